//! The tests and the checkout a release rewrote.
//!
//! The README's two commands run in order: `scripts/release.sh --force` rewrites the files of
//! `template/` a release owns (`support::RELEASE_WRITTEN`: today's lock at today's clock), then
//! `scripts/test.sh` runs this suite in the same checkout. Tests written against the commit
//! must not see the rewrite, so they reach the checkout only through `tests/support/mod.rs`
//! (`checkout_path`, `checkout_file`, `committed_checkout`), which hands out the committed
//! bytes of a release-written file and refuses its path. `.ci/run` proves the order on every
//! run: it relocks `template/` at another clock before the suite and puts it back after.

use std::path::{Path, PathBuf};

use crate::support::{checkout_path, release_written_changes, RELEASE_WRITTEN};

/// The one file allowed to find the checkout's root and read `template/` from disk.
const ACCESSOR: &str = "tests/support/mod.rs";
/// This file: the rule's examples below quote the reads it refuses.
const THE_RULE: &str = "tests/it/checkout.rs";

/// A line of test code that reaches the checkout's files around the accessor, and why that is
/// refused. Comments are not code: a line whose text starts with `//` is never judged.
fn bypass(line: &str) -> Option<&'static str> {
    let code = line.trim_start();
    if code.starts_with("//") {
        return None;
    }
    let names_template_literal = |from: usize| {
        code[from..]
            .split('"')
            .nth(1)
            .is_some_and(|literal| literal.contains("template"))
    };
    if code.contains("CARGO_MANIFEST_DIR") {
        return Some("finds the checkout's root itself (CARGO_MANIFEST_DIR)");
    }
    if code.contains("repo_root") {
        return Some("names the checkout's root, which only the accessor holds");
    }
    if code.contains("Layout::of(") {
        return Some("builds the xtask's default Layout, which is the checkout on disk");
    }
    for include in ["include_str!(", "include_bytes!("] {
        if let Some(at) = code.find(include) {
            if names_template_literal(at) {
                return Some("compiles in a file of template/ as it was on disk");
            }
        }
    }
    // A path of its own: relative to the test's working directory (the xtask crate), so `..`
    // leads into the checkout; or a release-written path opened as it is, relative.
    let up_into_template = code
        .split('"')
        .skip(1)
        .step_by(2)
        .any(|literal| literal.starts_with("..") && literal.contains("template"));
    let opened_relative = RELEASE_WRITTEN.iter().any(|written| {
        ["read(\"", "read_to_string(\"", "open(\"", "Path::new(\""]
            .iter()
            .any(|call| code.contains(&format!("{call}{written}")))
    });
    if up_into_template || opened_relative {
        return Some("reads a release-written file by a path of its own");
    }
    None
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

/// Every end-to-end test and support file reads what a release rewrites through the accessor
/// (as committed), never from the disk: a new direct read is refused here, naming the line.
#[test]
fn tests_reach_the_checkout_only_through_support() {
    let tests = checkout_path("tests");
    let mut files = Vec::new();
    rust_files(&tests, &mut files);
    assert!(
        files.len() > 10,
        "found only {files:?} below {}",
        tests.display()
    );
    let mut refused = Vec::new();
    for file in &files {
        let relative = format!("tests/{}", file.strip_prefix(&tests).unwrap().display());
        if relative == ACCESSOR || relative == THE_RULE {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            if let Some(why) = bypass(line) {
                refused.push(format!("{relative}:{}: {why}:\n    {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        refused.is_empty(),
        "these lines read the checkout around {ACCESSOR}; after the README's release command \
         they would read a newer lock and clock than the commit. Use support::checkout_file \
         (committed bytes), support::checkout_path (files a release never rewrites) or \
         support::committed_checkout() (a root):\n{}",
        refused.join("\n")
    );
}

/// The judge refuses each way the suite once read a rewritten file, quoted from the code that
/// did it, and lets the accessor's own forms through.
#[test]
fn the_checkout_rule_refuses_the_reads_that_broke_the_suite() {
    let refused = [
        // genuine_release.rs's SBOM fixture, and image.rs's install-plan test:
        r#"        &std::fs::read(crate::support::repo_root().join("template/package-lock.json")).unwrap(),"#,
        // install_plan.rs and image.rs: the checkout as a whole.
        r#"    let inputs = xtask::image::build::BuildInputs::load(&xtask::layout::Layout::of(&settings)).unwrap();"#,
        r#"    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();"#,
        r#"    let committed = include_str!("../../../template/inventory.json");"#,
        r#"    let lock = std::fs::read("../template/package-lock.json").unwrap();"#,
        r#"    let lock = std::fs::read_to_string("template/inventory.json").unwrap();"#,
    ];
    // Reads below a scratch root made from the committed files are what the accessor is for.
    for line in refused {
        assert!(bypass(line).is_some(), "not refused: {line}");
    }
    let allowed = [
        r#"    let lock = checkout_file("template/package-lock.json");"#,
        r#"    let root = scratch_root_with(&["template/manifest.yaml", "template/inventory.json"]);"#,
        r#"        std::fs::remove_file(dir.join("package-lock.json")).unwrap();"#,
        r#"    let before = std::fs::read(root.path().join("template/package-lock.json")).unwrap();"#,
        r#"    // repo_root() was how the suite read template/ before the accessor."#,
        r#"    assert!(err.contains("a/template/package-lock.json (committed)"), "{err}");"#,
    ];
    for line in allowed {
        assert_eq!(bypass(line), None, "refused: {line}");
    }
}

/// Under `.ci/run` (which sets `XTASK_SUITE_ON_RELEASED_TREE=1` after relocking `template/` at
/// another clock), the suite really runs on a tree that differs from `HEAD`: otherwise the run
/// proves nothing about the README's order. Elsewhere it only reports what it sees.
#[test]
fn the_suite_runs_on_the_tree_a_release_left_when_ci_says_so() {
    let expected = std::env::var_os("XTASK_SUITE_ON_RELEASED_TREE").is_some_and(|v| v == "1");
    let differing = release_written_changes();
    eprintln!(
        "release-written files that differ from HEAD in this checkout: {differing:?} (of {:?})",
        RELEASE_WRITTEN
    );
    if expected {
        // The inventory always moves with the clock; the lockfile moves when any of its ~150
        // packages published in between, which a relock days after the commit finds.
        assert!(
            differing.contains(&"template/inventory.json"),
            "XTASK_SUITE_ON_RELEASED_TREE=1, but template/inventory.json is as committed: \
             .ci/run's relock did not run, so this run does not prove the suite passes after a \
             release"
        );
    }
}
