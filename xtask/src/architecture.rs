//! Tests that keep ARCHITECTURE.md's map true: every source file of the three crates is on it.

use std::path::{Path, PathBuf};

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
    let missing = unnamed(&root, &["formats", "verify", "xtask"], map(&text));
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
