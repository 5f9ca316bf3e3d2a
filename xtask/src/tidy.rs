//! Tidy checks, in the spirit of rust-analyzer's `xtask/src/tidy.rs`, over every file the
//! checkout tracks.
//!
//! Every relative link of a document leads to a file, and to a heading of it: a page that
//! moves takes its links along.
//!
//! History belongs to git, not to the files: a comment or a document names no commit of ours,
//! no number of our tracker and no date of work (CONTRIBUTING.md, "History belongs to git");
//! docs/benchmarks.md, whose figures are dated once at its top, is the one exception. What
//! stays allowed, because it cites something outside this repository or is a value: another
//! project's issue (`owner/repo#N`, `repo#N`, and `#M` listed right after one), a pinned
//! commit of another project (`owner/repo@<hash>`), a digest (`sha256:…`, or shortened with
//! `…`), a date inside a code span, a URL or an RFC 3339 instant (`2026-11-30T06:17:00Z`), and
//! the Unix epoch.

use std::path::Path;
use std::sync::OnceLock;

use regex::Regex;

/// Files whose content is exempt: the one dated page, and two generated files (their sources
/// are checked instead: the command lines' doc comments, the lockfile's data).
const EXEMPT_FILES: &[&str] = &["docs/benchmarks.md", "docs/cli.md", "template/INVENTORY.md"];

/// Data no one here wrote: upstream's own cases, copied in with their source cited.
const EXEMPT_DIRS: &[&str] = &["tests/fixtures/"];

/// How a file's comments are found.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Syntax {
    /// Every line is prose (Markdown).
    Prose,
    /// `//` to the end of the line (Rust, JavaScript).
    SlashSlash,
    /// `#` to the end of the line (shell, Python, YAML, TOML, Dockerfile).
    Hash,
}

fn syntax_of(path: &str) -> Option<Syntax> {
    let name = path.rsplit('/').next().unwrap_or(path);
    let ext = name.rsplit_once('.').map(|(_, e)| e);
    match ext {
        Some("md") => Some(Syntax::Prose),
        Some("rs" | "js") => Some(Syntax::SlashSlash),
        Some("sh" | "py" | "yml" | "yaml" | "toml") => Some(Syntax::Hash),
        _ if name == "Dockerfile" || path == ".ci/run" || name.starts_with('.') => {
            Some(Syntax::Hash)
        }
        // Data (JSON, lockfiles, PEM): values, not prose.
        _ => None,
    }
}

/// The comment on `line`, if any: what follows the marker outside a string literal.
fn comment(line: &str, syntax: Syntax) -> Option<&str> {
    let marker = match syntax {
        Syntax::Prose => return Some(line),
        Syntax::SlashSlash => "//",
        Syntax::Hash => "#",
    };
    let mut in_string: Option<char> = None;
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        if let Some(quote) = in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                _ if c == quote => in_string = None,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = Some('"'),
            // Shell and YAML quote with ' too; in Rust it starts a char or a lifetime.
            '\'' if syntax == Syntax::Hash => in_string = Some('\''),
            _ if line[i..].starts_with(marker) => {
                // `#` starts a comment only at the line's start or after a blank (not `$#`,
                // `${#x}` or a URL's fragment).
                let starts = syntax == Syntax::SlashSlash
                    || line[..i].chars().last().is_none_or(char::is_whitespace);
                if starts {
                    return Some(&line[i + marker.len()..]);
                }
            }
            _ => {}
        }
    }
    None
}

struct Rules {
    tracker_word: Regex,
    cited_issue: Regex,
    bare_number: Regex,
    code_span: Regex,
    date: Regex,
    hex_word: Regex,
}

fn rules() -> &'static Rules {
    static RULES: OnceLock<Rules> = OnceLock::new();
    RULES.get_or_init(|| Rules {
        tracker_word: Regex::new(r"(?i)\b(issues?|stops?|goals?|PR)\s+#?\d+").unwrap(),
        // Another project's issue, with any `#M` listed right after it.
        cited_issue: Regex::new(r"[\w.-]*[A-Za-z][\w.-]*#\d+((,\s*|,?\s+(and|or)\s+)#\d+)*")
            .unwrap(),
        bare_number: Regex::new(r"#\d+\b").unwrap(),
        code_span: Regex::new(r"`[^`]*`").unwrap(),
        date: Regex::new(r"\b\d{4}-\d{2}-\d{2}\b").unwrap(),
        hex_word: Regex::new(r"\b[0-9a-f]{7,40}\b").unwrap(),
    })
}

/// What is wrong with one comment (or line of prose), if anything.
fn problems_in(text: &str) -> Vec<String> {
    let r = rules();
    let mut found = Vec::new();
    if let Some(m) = r.tracker_word.find(text) {
        found.push(format!("tracker number `{}`", m.as_str()));
    }
    let uncited = r.cited_issue.replace_all(text, "");
    if let Some(m) = r.bare_number.find(&uncited) {
        found.push(format!("tracker number `{}`", m.as_str()));
    }
    let outside_code = r.code_span.replace_all(text, "``");
    for m in r.date.find_iter(&outside_code) {
        let before = outside_code[..m.start()].chars().last();
        let after = &outside_code[m.end()..];
        // A URL's path (`/changelog/2022-09-27-…`), an RFC 3339 instant or the Unix epoch
        // is a value.
        if before == Some('/') || after.starts_with('T') || m.as_str() == "1970-01-01" {
            continue;
        }
        found.push(format!("date `{}`", m.as_str()));
    }
    for m in r.hex_word.find_iter(text) {
        let word = m.as_str();
        let before = &text[..m.start()];
        // A word of digits alone is a number, unless it is where a commit would be named.
        let digits_only = !word.bytes().any(|b| b >= b'a');
        let named_as_a_commit = before.ends_with("at ") || before.ends_with("commit ");
        if !word.bytes().any(|b| b.is_ascii_digit()) || (digits_only && !named_as_a_commit) {
            continue;
        }
        let after = &text[m.end()..];
        // A pinned commit of another project (`@<hash>`), a digest (`sha256:…`), a path or
        // URL, or a shortened digest (`…`).
        let cited = ["@", ":", "/", "sha256 ", "sha256 `"]
            .iter()
            .any(|p| before.ends_with(p));
        if cited || after.starts_with('…') || after.starts_with("...") {
            continue;
        }
        found.push(format!("commit hash `{word}`"));
    }
    found
}

/// Every problem of the file at `path` (relative, `/`-separated) with content `text`, as
/// `path:line: problem`.
fn problems(path: &str, text: &str) -> Vec<String> {
    if EXEMPT_FILES.contains(&path) || EXEMPT_DIRS.iter().any(|d| path.starts_with(d)) {
        return Vec::new();
    }
    let Some(syntax) = syntax_of(path) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if let Some(comment) = comment(line, syntax) {
            for problem in problems_in(comment) {
                found.push(format!("{path}:{}: {problem}", i + 1));
            }
        }
    }
    found
}

/// The repository's files as git sees them: tracked, and new ones not ignored.
fn checkout_files(root: &Path) -> Vec<String> {
    let out = std::process::Command::new("git")
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .current_dir(root)
        .output()
        .expect("git runs (the tidy check lists the checkout's files with `git ls-files`)");
    assert!(
        out.status.success(),
        "git ls-files failed in {}: {}",
        root.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .split('\0')
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

/// The anchor GitHub gives a Markdown heading: lower case, spaces as `-`, punctuation other
/// than `-` and `_` dropped.
fn heading_anchor(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_lowercase().next()?),
            _ => None,
        })
        .collect()
}

/// The lines of a Markdown text outside its fenced code blocks, numbered from 1.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            lines.push((i + 1, line));
        }
    }
    lines
}

/// Every anchor a Markdown text defines: its headings (a repeated one gets `-1`, `-2`, as
/// GitHub numbers them) and `<a id="...">`.
fn anchors(text: &str) -> Vec<String> {
    let id = Regex::new(r#"<a id="([^"]+)""#).unwrap();
    let mut found: Vec<String> = Vec::new();
    let mut seen: std::collections::BTreeMap<String, usize> = Default::default();
    for (_, line) in prose_lines(text) {
        let level = line.bytes().take_while(|&b| b == b'#').count();
        if (1..=6).contains(&level) && line[level..].starts_with(' ') {
            let anchor = heading_anchor(&line[level..]);
            let times = seen.entry(anchor.clone()).or_default();
            found.push(match *times {
                0 => anchor,
                n => format!("{anchor}-{n}"),
            });
            *times += 1;
        }
        found.extend(id.captures_iter(line).map(|c| c[1].to_string()));
    }
    found
}

/// The relative links of the Markdown file `path` that lead nowhere: no such file, or no such
/// heading in it. `read` gives a checkout file's text, `None` when it does not exist.
fn broken_links(path: &str, text: &str, read: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    let link = Regex::new(r"\]\(([^)\s]+)\)").unwrap();
    let mut broken = Vec::new();
    for (number, line) in prose_lines(text) {
        for captures in link.captures_iter(line) {
            let target = &captures[1];
            // A URL, or an address with a scheme (`mailto:`): not a file of the checkout.
            if target
                .split_once(':')
                .is_some_and(|(scheme, _)| scheme.bytes().all(|b| b.is_ascii_lowercase()))
            {
                continue;
            }
            let (file, anchor) = target.split_once('#').unwrap_or((target, ""));
            let resolved = if file.is_empty() {
                path.to_string()
            } else {
                normalize(&format!("{}{file}", parent_of(path)))
            };
            let Some(content) = read(&resolved) else {
                broken.push(format!("{path}:{number}: `{target}`: no file {resolved}"));
                continue;
            };
            if !anchor.is_empty()
                && resolved.ends_with(".md")
                && !anchors(&content).iter().any(|a| a == anchor)
            {
                broken.push(format!(
                    "{path}:{number}: `{target}`: {resolved} has no heading #{anchor}"
                ));
            }
        }
    }
    broken
}

/// `docs/` for `docs/a.md`, the empty string for `README.md`.
fn parent_of(path: &str) -> &str {
    path.rfind('/').map_or("", |at| &path[..=at])
}

/// `a/b/../c` as `a/c`, `./a` as `a`.
fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "." | "" => {}
            ".." => {
                parts.pop();
            }
            _ => parts.push(part),
        }
    }
    parts.join("/")
}

#[test]
fn every_relative_link_in_a_document_leads_to_a_file_and_heading() {
    let root = crate::util::repo_root();
    let read = |p: &str| {
        let path = root.join(p);
        // A directory is a valid target too (`tests/fixtures/`); its text is empty.
        path.is_dir()
            .then(String::new)
            .or_else(|| std::fs::read_to_string(path).ok())
    };
    let mut broken = Vec::new();
    for path in checkout_files(&root) {
        if !path.ends_with(".md") || EXEMPT_DIRS.iter().any(|d| path.starts_with(d)) {
            continue;
        }
        if let Some(text) = read(&path) {
            broken.extend(broken_links(&path, &text, &read));
        }
    }
    assert!(
        broken.is_empty(),
        "{} links lead nowhere (a page or a heading moved?):\n{}",
        broken.len(),
        broken.join("\n")
    );
}

#[test]
fn a_link_to_a_missing_page_or_heading_is_reported() {
    let files = |p: &str| match p {
        "docs/a.md" => Some("# A page\n\n## The shared browser's runtime requirement\n".into()),
        "README.md" => Some("# Title\n".into()),
        _ => None,
    };
    let text = "\
[fine](a.md#the-shared-browsers-runtime-requirement) [up](../README.md#title) [web](https://x.y/z#q)
[gone](b.md) [moved](a.md#automation)
```sh
[not a link](in-code.md)
```
";
    assert_eq!(
        broken_links("docs/page.md", text, &files),
        [
            "docs/page.md:2: `b.md`: no file docs/b.md",
            "docs/page.md:2: `a.md#automation`: docs/a.md has no heading #automation",
        ]
    );
}

#[test]
fn no_commit_hash_tracker_number_or_date_of_work_in_comments_or_docs() {
    let root = crate::util::repo_root();
    let mut found = Vec::new();
    for path in checkout_files(&root) {
        // Deleted but not yet staged, or not text: nothing to read.
        let Ok(text) = std::fs::read_to_string(root.join(&path)) else {
            continue;
        };
        found.extend(problems(&path, &text));
    }
    assert!(
        found.is_empty(),
        "history belongs to git (CONTRIBUTING.md, \"History belongs to git\"): say why, not \
         when or in which issue; measured figures go to docs/benchmarks.md. {} problems:\n{}",
        found.len(),
        found.join("\n")
    );
}

#[test]
fn history_in_a_comment_or_a_document_is_reported() {
    let p = |path: &str, text: &str| problems(path, text);
    // Ours: tracker numbers, commit hashes and dates of work.
    assert_eq!(
        p("a.rs", "let x = 1; // the fix of issue 27\n"),
        ["a.rs:1: tracker number `issue 27`"]
    );
    assert_eq!(
        p("a.rs", "// TODO(#26): later\n"),
        ["a.rs:1: tracker number `#26`"]
    );
    assert_eq!(
        p("b.md", "Measured at 9201976 (stop 31).\n"),
        [
            "b.md:1: tracker number `stop 31`",
            "b.md:1: commit hash `9201976`"
        ]
    );
    assert_eq!(
        p("c.sh", "echo hi # since 2026-12-02\n"),
        ["c.sh:1: date `2026-12-02`"]
    );
    assert_eq!(
        p(".github/x.yml", "# goal 5: 0.3x\n"),
        [".github/x.yml:1: tracker number `goal 5`"]
    );
    // Citations of other projects, digests, values, code and data are not history of ours.
    for (path, text) in [
        (
            "a.md",
            "gh exits 0 (cli/cli#10418); github/codeql-action#1211 and #106, runner-images#14748",
        ),
        (
            "a.md",
            "libdeflate is deterministic (ebiggers/libdeflate#400).",
        ),
        (
            "a.yml",
            "      uses: actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1 # v7.0.1",
        ),
        ("a.md", "testdata at actions/languageservices@4043eda"),
        (
            "a.md",
            "the manifest `dfa2b3b8…`, config sha256:510e43a4cafe",
        ),
        (
            "a.rs",
            "/// `--now 2026-11-30T06:17:00Z` e.g. 2026-11-30T06:17:00Z",
        ),
        ("a.rs", "// `2026-11-29` is epoch day 20786"),
        ("a.yml", "# whole days since 1970-01-01"),
        ("a.rs", "/// moby 24 (moby/moby@cddaa84) strips them"),
        (
            "a.rs",
            "// https://github.blog/changelog/2022-09-27-additional-information/",
        ),
        ("a.rs", "let tag = \"2026-11-30-abc1234\"; // a fixture"),
        ("a.sh", "n=${#list[@]}; echo \"#1 is not a comment\""),
        (
            "a.json",
            "{\"created\": \"2026-12-02\", \"commit\": \"9201976\"}",
        ),
        ("docs/benchmarks.md", "Measured 2026-12-03 at 2ef72cf."),
        ("tests/fixtures/x/cases.md", "issue 7"),
    ] {
        assert_eq!(p(path, text), Vec::<String>::new(), "{path}: {text}");
    }
}
