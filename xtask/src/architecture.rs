//! Tests that keep ARCHITECTURE.md true: every source file of the workspace's crates is on the
//! map, only each crate's edge reads the environment (`edges.rs`), the imports follow the
//! dependency rule (`dependencies.rs`), and each path of the checkout has one home
//! (`paths.rs`).

mod dependencies;
mod edges;
mod paths;

use std::path::{Path, PathBuf};

/// The workspace's crates, each a folder of the checkout (the workspace's Cargo.toml `members`;
/// a test below keeps the two the same).
pub(crate) const WORKSPACE_CRATES: &[&str] = &["formats", "verify", "xtask", "replay"];

/// The map: the first fenced block after `## Map`.
fn map(text: &str) -> &str {
    let from = text
        .find("## Map")
        .expect("ARCHITECTURE.md has a `## Map` section");
    let rest = &text[from..];
    let start = rest.find("```\n").expect("the map is a fenced block") + 4;
    let end = rest[start..].find("```").expect("the map's block ends") + start;
    &rest[start..end]
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// What the map must name for `file`: its own name, or for a `mod.rs` its folder (`sbom/`).
fn named_by(file: &Path) -> String {
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    if name == "mod.rs" || name == "lib.rs" {
        let dir = file.parent().unwrap();
        let dir_name = dir.file_name().unwrap().to_string_lossy();
        if dir_name == "src" {
            // A crate root: the crate's folder (`formats/src/`).
            let krate = dir.parent().unwrap().file_name().unwrap().to_string_lossy();
            return format!("{krate}/src/");
        }
        return format!("{dir_name}/");
    }
    name
}

/// The files of `crates` (below `root`) that `map` does not name.
fn unnamed(root: &Path, crates: &[&str], map: &str) -> Vec<String> {
    let mut files = Vec::new();
    for krate in crates {
        rust_files(&root.join(krate).join("src"), &mut files);
    }
    let mut missing: Vec<String> = files
        .iter()
        .filter(|f| !map.contains(&named_by(f)))
        .map(|f| f.strip_prefix(root).unwrap().display().to_string())
        .collect();
    missing.sort();
    missing
}

#[test]
fn every_source_file_is_on_the_map() {
    let root = crate::util::repo_root();
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let missing = unnamed(&root, WORKSPACE_CRATES, map(&text));
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md's map does not name these files; add a line for each: {missing:#?}"
    );
}

#[test]
fn a_file_the_map_does_not_name_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("demo/src/things");
    std::fs::create_dir_all(&src).unwrap();
    for file in [
        "demo/src/lib.rs",
        "demo/src/things/mod.rs",
        "demo/src/things/named.rs",
    ] {
        std::fs::write(dir.path().join(file), "").unwrap();
    }
    std::fs::write(src.join("forgotten.rs"), "").unwrap();
    let map = "demo/src/\n  things/  named.rs the one named\n";
    assert_eq!(
        unnamed(dir.path(), &["demo"], map),
        ["demo/src/things/forgotten.rs"]
    );
    assert!(unnamed(dir.path(), &["demo"], &format!("{map} forgotten.rs\n")).is_empty());
}

/// The names `[workspace.dependencies]` declares in the workspace's manifest.
fn workspace_dependencies(manifest: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut inside = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            inside = line == "[workspace.dependencies]";
            continue;
        }
        if inside && !line.starts_with('#') {
            if let Some((name, _)) = line.split_once('=') {
                names.push(name.trim().to_string());
            }
        }
    }
    names
}

/// The lines of a member's manifest that give a dependency in `declared` its own version
/// instead of the workspace's (`anyhow = "1"` where `anyhow.workspace = true` belongs).
fn restated<'a>(manifest: &'a str, declared: &[String]) -> Vec<&'a str> {
    let mut found = Vec::new();
    let mut in_dependencies = false;
    for line in manifest.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            in_dependencies = trimmed.ends_with("dependencies]");
            continue;
        }
        let Some((key, value)) = trimmed.split_once('=') else {
            continue;
        };
        let name = key.trim();
        if in_dependencies
            && declared.iter().any(|d| d == name)
            && !value.contains("workspace = true")
        {
            found.push(line);
        }
    }
    found
}

#[test]
fn the_members_take_the_workspace_s_versions() {
    let root = crate::util::repo_root();
    let workspace = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let declared = workspace_dependencies(&workspace);
    assert!(declared.iter().any(|d| d == "serde_json"), "{declared:?}");
    let mut found = Vec::new();
    for member in WORKSPACE_CRATES {
        let manifest = std::fs::read_to_string(root.join(member).join("Cargo.toml")).unwrap();
        for line in restated(&manifest, &declared) {
            found.push(format!("{member}/Cargo.toml: {line}"));
        }
    }
    assert!(
        found.is_empty(),
        "these dependencies restate a version the workspace's Cargo.toml declares; write \
         `NAME.workspace = true` (or `{{ workspace = true, ... }}`) instead:\n{}",
        found.join("\n")
    );
}

#[test]
fn a_restated_version_is_found() {
    let declared = workspace_dependencies(
        "[workspace]\nmembers = [\"a\"]\n\n[workspace.dependencies]\n# why\nanyhow = \"1\"\n\
         serde = { version = \"1\" }\n\n[profile.dev]\ndebug = 0\n",
    );
    assert_eq!(declared, ["anyhow", "serde"]);
    let member = "[package]\nname = \"a\"\n\n[dependencies]\nanyhow = \"1\"\n\
                  serde = { workspace = true, optional = true }\nbollard = \"0.21\"\n\n\
                  [dev-dependencies]\nserde.workspace = true\nanyhow = { version = \"1\" }\n\n\
                  [features]\nanyhow = []\n";
    assert_eq!(
        restated(member, &declared),
        ["anyhow = \"1\"", "anyhow = { version = \"1\" }"]
    );
}

/// The most lines a production file of the workspace's crates may have: a file past it is a module
/// that holds two, to be split where they meet.
const MOST_LINES: usize = 900;

/// The production files of `crates` (below `root`) longer than [`MOST_LINES`], with their
/// lengths. Test-only files (a `#[cfg(test)] mod` of their own) do not count.
fn too_long(root: &Path, crates: &[&str]) -> Vec<(String, usize)> {
    let mut found = Vec::new();
    for krate in crates {
        let src = root.join(krate).join("src");
        for file in dependencies::production_files(&src) {
            let text = std::fs::read_to_string(src.join(&file.path)).unwrap();
            let lines = text.lines().count();
            if lines > MOST_LINES {
                found.push((format!("{krate}/src/{}", file.path), lines));
            }
        }
    }
    found
}

#[test]
fn no_production_file_is_over_900_lines() {
    let found = too_long(&crate::util::repo_root(), WORKSPACE_CRATES);
    assert!(
        found.is_empty(),
        "these files are over {MOST_LINES} lines: split each where its two modules meet (its \
         tests go with the code they test): {found:?}"
    );
}

#[test]
fn a_file_over_900_lines_is_found_and_a_test_only_one_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("demo/src");
    std::fs::create_dir_all(&src).unwrap();
    let long = "fn f() {}\n".repeat(MOST_LINES + 1);
    std::fs::write(
        src.join("lib.rs"),
        "mod long;\nmod short;\n#[cfg(test)]\nmod tests;\n",
    )
    .unwrap();
    std::fs::write(src.join("long.rs"), &long).unwrap();
    std::fs::write(src.join("short.rs"), "fn f() {}\n".repeat(MOST_LINES)).unwrap();
    std::fs::write(src.join("tests.rs"), &long).unwrap();
    assert_eq!(
        too_long(dir.path(), &["demo"]),
        [("demo/src/long.rs".to_string(), MOST_LINES + 1)]
    );
}

#[test]
fn the_workspace_crates_are_the_workspace_members() {
    let root = crate::util::repo_root();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let line = manifest
        .lines()
        .find(|l| l.starts_with("members = ["))
        .expect("the workspace's Cargo.toml has a one-line `members = [...]`");
    let members: Vec<&str> = line["members = [".len()..]
        .trim_end_matches(']')
        .split(',')
        .map(|m| m.trim().trim_matches('"'))
        .collect();
    assert_eq!(members, WORKSPACE_CRATES);
}
