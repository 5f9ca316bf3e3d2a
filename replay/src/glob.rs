//! File globs as `@actions/glob` reads them (actions/toolkit packages/glob, 0.6.x as
//! upload-artifact v7.0.0 bundles it; upload-artifact, cache, hashFiles): one pattern a
//! line, `!` excludes, `*` `?` `[...]` within a path segment, `**` across segments, and a
//! pattern naming a directory includes everything below it. Also the search paths the patterns
//! start from, which decide an artifact's root.

use std::path::{Component, Path, PathBuf};

/// Matches one path segment against a pattern segment (`*`, `?`, `[abc]`, `[!a-z]`).
pub fn segment_match(pattern: &str, text: &str) -> bool {
    fn go(p: &[char], t: &[char]) -> bool {
        match p.first() {
            None => t.is_empty(),
            Some('*') => (0..=t.len()).any(|i| go(&p[1..], &t[i..])),
            Some('?') => !t.is_empty() && go(&p[1..], &t[1..]),
            Some('[') => {
                let Some(close) = p.iter().skip(1).position(|&c| c == ']').map(|i| i + 1) else {
                    return t.first() == Some(&'[') && go(&p[1..], &t[1..]);
                };
                let Some(&c) = t.first() else { return false };
                let mut set = &p[1..close];
                let negate = matches!(set.first(), Some('!') | Some('^'));
                if negate {
                    set = &set[1..];
                }
                let mut hit = false;
                let mut i = 0;
                while i < set.len() {
                    if i + 2 < set.len() && set[i + 1] == '-' {
                        hit |= set[i] <= c && c <= set[i + 2];
                        i += 3;
                    } else {
                        hit |= set[i] == c;
                        i += 1;
                    }
                }
                hit != negate && go(&p[close + 1..], &t[1..])
            }
            Some(&c) => t.first() == Some(&c) && go(&p[1..], &t[1..]),
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    go(&p, &t)
}

/// Whole-path match, segment by segment; `**` matches any number of segments. True also when
/// `path` lies below a directory the pattern matches.
pub fn path_match(pattern: &[String], path: &[String]) -> bool {
    match pattern.first() {
        None => true, // the pattern matched an ancestor: everything below it is included
        Some(seg) if seg == "**" => (0..=path.len()).any(|i| path_match(&pattern[1..], &path[i..])),
        Some(seg) => {
            !path.is_empty()
                && segment_match(seg, &path[0])
                && path_match(&pattern[1..], &path[1..])
        }
    }
}

fn has_glob(segment: &str) -> bool {
    segment.contains(['*', '?', '['])
}

/// Makes `p` absolute against `base` and removes `.` and `..` without touching the disk.
pub fn normalize(base: &Path, p: &str) -> PathBuf {
    let p = if let Some(rest) = p.strip_prefix("~/") {
        Path::new("/home/runner").join(rest)
    } else {
        base.join(p)
    };
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

fn segments_of(p: &Path) -> Vec<String> {
    p.components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect()
}

pub struct Matched {
    /// Matched files, absolute, sorted.
    pub files: Vec<PathBuf>,
    /// Where the include patterns start (the part before the first glob segment), without
    /// paths that lie below another search path.
    pub search_paths: Vec<PathBuf>,
}

/// Expands newline-separated patterns relative to `base`. Hidden files and directories (a
/// name starting with `.`) below a search path are skipped unless `include_hidden`.
pub fn expand(base: &Path, patterns: &str, include_hidden: bool) -> Matched {
    let mut includes = Vec::new();
    let mut excludes = Vec::new();
    for line in patterns
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        match line.strip_prefix('!') {
            Some(ex) => excludes.push(segments_of(&normalize(base, ex.trim()))),
            None => includes.push(segments_of(&normalize(base, line))),
        }
    }
    let mut search_paths: Vec<PathBuf> = includes
        .iter()
        .map(|segs| {
            let literal: Vec<&String> = segs.iter().take_while(|s| !has_glob(s)).collect();
            let mut p = PathBuf::from("/");
            p.extend(literal);
            p
        })
        .collect();
    search_paths.sort();
    search_paths.dedup();
    let search_paths: Vec<PathBuf> = search_paths
        .iter()
        .filter(|p| !search_paths.iter().any(|q| q != *p && p.starts_with(q)))
        .cloned()
        .collect();
    let mut files = Vec::new();
    for root in &search_paths {
        walk(root, root, include_hidden, &mut files);
    }
    files.retain(|f| {
        let segs = segments_of(f);
        includes.iter().any(|inc| path_match(inc, &segs))
            && !excludes.iter().any(|ex| path_match(ex, &segs))
    });
    files.sort();
    files.dedup();
    Matched {
        files,
        search_paths,
    }
}

fn walk(root: &Path, p: &Path, include_hidden: bool, out: &mut Vec<PathBuf>) {
    let Ok(meta) = std::fs::metadata(p) else {
        return;
    };
    if p != root
        && !include_hidden
        && p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'))
    {
        return;
    }
    if meta.is_dir() {
        let Ok(entries) = std::fs::read_dir(p) else {
            return;
        };
        for entry in entries.flatten() {
            walk(root, &entry.path(), include_hidden, out);
        }
    } else if meta.is_file() {
        out.push(p.to_path_buf());
    }
}

/// The deepest directory containing every path (upload-artifact's root for several paths).
pub fn common_ancestor(paths: &[PathBuf]) -> PathBuf {
    let mut it = paths.iter();
    let Some(first) = it.next() else {
        return PathBuf::from("/");
    };
    let mut common: Vec<String> = segments_of(first);
    for p in it {
        let segs = segments_of(p);
        let n = common.iter().zip(&segs).take_while(|(a, b)| a == b).count();
        common.truncate(n);
    }
    let mut out = PathBuf::from("/");
    out.extend(common);
    out
}

/// A glob over plain names (artifact names, release asset names).
pub fn name_match(pattern: &str, name: &str) -> bool {
    segment_match(pattern, name)
}
