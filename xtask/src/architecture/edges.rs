//! The edge rule of ARCHITECTURE.md, one rule per crate: only a crate's edge files read the
//! process's environment or arguments, embed a build-time variable other than the version, or
//! call the functions that decide what the rest is passed (the checkout's root, the snapshot of
//! the environment); and only the binary's entry point names the command line's module. Below
//! the edge every decision is a function of what it is passed, and the shipped verifier
//! carries nothing of the machine that built it.
//!
//! The files and what they name come from the dependency rule's walker
//! (`dependencies::production_files` and `named`, with `syn`), so test code is left out the
//! same way for every crate, and comments and documentation are never read as code.

use std::path::Path;

use super::dependencies::{imports_of, named, production_files};

/// One crate's edge.
pub(super) struct EdgeRule {
    /// The crate's folder (`verify`).
    pub(super) krate: &'static str,
    /// The files, below `src/`, that may read the environment, embed a build-time variable
    /// and call [`EdgeRule::edge_calls`].
    pub(super) edge: &'static [&'static str],
    /// Functions only the edge may call (`from_process`: the settings' snapshot).
    pub(super) edge_calls: &'static [&'static str],
    /// The command line's module (`cli.rs`) and the files besides it and its own folder
    /// that may name it; `None` for a crate with no command line.
    pub(super) command_line: Option<(&'static str, &'static [&'static str])>,
}

/// The workspace's rules. The replay harness is held to the formats' rule: it is configured
/// by what its caller passes, not by the machine's environment.
pub(super) const EDGE_RULES: &[EdgeRule] = &[
    EdgeRule {
        krate: "formats",
        edge: &[],
        edge_calls: &[],
        command_line: None,
    },
    EdgeRule {
        krate: "verify",
        // main reads the environment once into `settings::Environment`; `cli.rs` converts
        // the command line into each module's own request type.
        edge: &["main.rs", "settings.rs"],
        edge_calls: &["from_process"],
        command_line: Some(("cli.rs", &["main.rs"])),
    },
    EdgeRule {
        krate: "xtask",
        // main builds the `Settings` and the `Layout` once and passes them down as `Context`;
        // `flags.rs` is the binary's command line (clap reads its `env = ...` fallbacks there).
        edge: &["main.rs", "flags.rs", "settings.rs", "layout.rs"],
        edge_calls: &["repo_root", "from_process"],
        command_line: Some(("flags.rs", &["main.rs"])),
    },
    EdgeRule {
        krate: "replay",
        edge: &[],
        edge_calls: &[],
        command_line: None,
    },
];

/// The functions of `std::env` that read the process's environment or arguments.
const PROCESS_READS: &[&str] = &["var", "var_os", "vars", "vars_os", "args", "args_os"];

/// The one build-time variable any file may embed: the version, for the user agent. Anything
/// else (`CARGO_MANIFEST_DIR`) ties the binary to the machine that built it.
const VERSION_VARIABLE: &str = "\"CARGO_PKG_VERSION\"";

/// The build-time variables the `env!`/`option_env!` invocations in `tokens` embed, as `syn`
/// prints tokens (`env ! ("X")`, inside another macro's: `concat ! (env ! ("X") , "/x")`).
fn build_variables(tokens: &str) -> Vec<String> {
    let mut found = Vec::new();
    let words: Vec<&str> = tokens.split_whitespace().collect();
    for (i, word) in words.iter().enumerate() {
        // A macro first in a group's tokens is printed against its parenthesis: `(env`.
        let word = word.trim_start_matches('(');
        if matches!(word, "env" | "option_env") && words.get(i + 1) == Some(&"!") {
            if let Some(argument) = words.get(i + 2) {
                let argument = argument.trim_start_matches('(');
                let name = argument.split([')', ',']).next().unwrap_or(argument);
                found.push(name.to_string());
            }
        }
    }
    found
}

/// What the production files of `rule`'s crate (below `root`) break of it, one line each:
/// `crate/src/file: what it does (the path), and what to do instead`.
pub(super) fn violations(root: &Path, rule: &EdgeRule) -> Vec<String> {
    let src = root.join(rule.krate).join("src");
    let at = |file: &str| format!("{}/src/{file}", rule.krate);
    let mut found = Vec::new();
    let files = production_files(&src);
    for file in &files {
        if rule.edge.contains(&file.path.as_str()) {
            continue;
        }
        let names = named(file);
        for path in &names.paths {
            let shown = path.join("::");
            if path
                .windows(2)
                .any(|w| w[0] == "env" && PROCESS_READS.contains(&w[1].as_str()))
            {
                found.push(format!(
                    "{}: reads the process (`{shown}`); read it at the edge ({}) and pass \
                     the value in",
                    at(&file.path),
                    rule.edge.join(", ")
                ));
            }
            if path
                .last()
                .is_some_and(|l| rule.edge_calls.contains(&l.as_str()))
            {
                found.push(format!(
                    "{}: calls `{shown}`, which only the edge ({}) may; take what the edge \
                     passes down (the request or the `Context`)",
                    at(&file.path),
                    rule.edge.join(", ")
                ));
            }
        }
        for (name, tokens) in &names.macros {
            let variables = build_variables(&format!("{name} ! ({tokens})"));
            for variable in variables.iter().filter(|v| *v != VERSION_VARIABLE) {
                found.push(format!(
                    "{}: embeds the build-time variable {variable}; only {VERSION_VARIABLE} \
                     may be compiled in (the rest ties the binary to the machine that built it)",
                    at(&file.path)
                ));
            }
        }
    }
    if let Some((command_line, users)) = rule.command_line {
        let folder = format!("{}/", command_line.trim_end_matches(".rs"));
        let inside = |file: &str| file == command_line || file.starts_with(&folder);
        for import in imports_of(files).imports {
            if inside(&import.to) && !inside(&import.from) && !users.contains(&import.from.as_str())
            {
                found.push(format!(
                    "{}: names the command line (`{}`); take the module's own request type \
                     and convert to it in {command_line}",
                    at(&import.from),
                    import.path
                ));
            }
        }
    }
    found
}

#[test]
fn only_each_crate_s_edge_reads_the_process_or_names_the_command_line() {
    let root = crate::util::repo_root();
    let lib = std::fs::read_to_string(root.join("xtask/src/lib.rs")).unwrap();
    assert!(
        !lib.contains(concat!("mod ", "flags")),
        "xtask/src/lib.rs declares the command line: only main.rs may (`mod flags;`); the \
         library's modules take requests"
    );
    let crates: Vec<&str> = EDGE_RULES.iter().map(|r| r.krate).collect();
    assert_eq!(
        crates,
        super::WORKSPACE_CRATES,
        "each workspace crate has an edge rule, in the members' order"
    );
    let found: Vec<String> = EDGE_RULES
        .iter()
        .flat_map(|rule| violations(&root, rule))
        .collect();
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn each_rule_is_found_and_tests_comments_and_the_edge_are_not() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("demo/src");
    std::fs::create_dir_all(src.join("area")).unwrap();
    // The edge: main.rs and the root's settings.rs read the process; cli.rs is the command
    // line, which only main.rs names. Test code (helper.rs, support.rs) may do anything.
    let files = [
        (
            "lib.rs",
            "pub mod area;\npub mod cli;\npub mod settings;\n#[cfg(test)]\nmod helper;\n\
             #[cfg(any(test, feature = \"test-support\"))]\npub mod support;\n",
        ),
        (
            "main.rs",
            "fn main() {\n    let _ = std::env::var(\"X\");\n    let _ = demo::cli::Args;\n    \
             let _ = demo::settings::Snapshot::from_process();\n}\n",
        ),
        ("cli.rs", "pub struct Args;\n"),
        (
            "settings.rs",
            "pub struct Snapshot;\nimpl Snapshot {\n    pub fn from_process() -> Self {\n        \
             let _ = std::env::var(\"X\");\n        Snapshot\n    }\n}\n",
        ),
        (
            "helper.rs",
            "fn h() {\n    let _ = std::env::var(\"X\");\n}\n",
        ),
        (
            "support.rs",
            "pub const ROOT: &str = env!(\"CARGO_MANIFEST_DIR\");\n",
        ),
        ("area/mod.rs", "pub mod leak;\npub mod settings;\n"),
        // One finding of each rule; the comment, the test items and the version are none.
        (
            "area/leak.rs",
            r#"use crate::cli::Args;
use std::env;
// std::env::var in a comment
const V: &str = env!("CARGO_PKG_VERSION");
const D: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/x");
pub fn l(_: Args) {
    let _ = env::var_os("X");
    let _ = crate::settings::Snapshot::from_process();
}
#[test]
fn t() {
    let _ = std::env::var("X");
}
#[cfg(test)]
mod tests {
    fn u() {
        let _ = std::env::args();
    }
}
"#,
        ),
        // A file named like the edge, below the root, is not the edge.
        (
            "area/settings.rs",
            "pub fn s() -> usize {\n    std::env::args().count()\n}\n",
        ),
    ];
    for (file, text) in files {
        std::fs::write(src.join(file), text).unwrap();
    }
    let rule = EdgeRule {
        krate: "demo",
        edge: &["main.rs", "settings.rs"],
        edge_calls: &["from_process"],
        command_line: Some(("cli.rs", &["main.rs"])),
    };
    let found = violations(dir.path(), &rule);
    let shown: Vec<&str> = found
        .iter()
        .map(|f| f.split(" (").next().unwrap())
        .collect();
    assert_eq!(
        shown,
        [
            "demo/src/area/leak.rs: reads the process",
            "demo/src/area/leak.rs: calls `crate::settings::Snapshot::from_process`, which only \
             the edge",
            "demo/src/area/leak.rs: embeds the build-time variable \"CARGO_MANIFEST_DIR\"; only \
             \"CARGO_PKG_VERSION\" may be compiled in",
            "demo/src/area/settings.rs: reads the process",
            "demo/src/area/leak.rs: names the command line",
        ],
        "{found:#?}"
    );
}
