//! End-to-end test of `cargo xtask release`, the maintainer's one command: a real release of
//! both platforms to a real local registry, then a second run with nothing changed, which
//! must build nothing. It runs on a scratch copy of the repository (its own git commit, its
//! own receipts), with the committed clock, so while the registry answers that clock as it
//! did when the lock was committed, it regenerates the committed lockfile and reuses the images
//! other tests built (build ids are content addresses).

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::support::docker::heavy_docker;
use crate::support::xtask::xtask;
use crate::support::{committed_resolved_at, repo_root, scratch_repo, unique};

fn copy_repo() -> tempfile::TempDir {
    scratch_repo("xtask-release-run-")
}

/// The committed resolution's clock, plus `later_secs`.
fn committed_clock(later_secs: i64) -> String {
    let at: chrono::DateTime<chrono::Utc> = committed_resolved_at().parse().unwrap();
    (at + chrono::Duration::seconds(later_secs)).to_rfc3339()
}

fn release(root: &Path, extra: &[&str]) -> (Value, std::time::Duration) {
    release_at(root, &committed_clock(0), extra)
}

/// A repository of this test process's own in the shared local registry: tags are immutable,
/// so a release from an earlier run of other code (other layer bytes under the same tag) must
/// not decide this run's outcome.
fn repository() -> &'static str {
    static REPOSITORY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    REPOSITORY.get_or_init(|| unique("xtask-test/release-run"))
}

fn release_at(root: &Path, now: &str, extra: &[&str]) -> (Value, std::time::Duration) {
    let out = xtask()
        .args(["release", "--force", "--json", "--now", now])
        .args(["--platform", "linux/amd64", "--platform", "linux/arm64"])
        .args(extra)
        .env("XTASK_ROOT", root)
        .env("XTASK_OCI_REPOSITORY", repository())
        .env("XTASK_CACHE_DIR", repo_root().join(".xtask/cache"))
        .run();
    assert!(
        out.success(),
        "release failed:\n{}\n{}",
        out.stdout_text(),
        out.stderr_text()
    );
    (out.json(), out.elapsed)
}

#[test]
fn dry_run_prints_the_plan_and_changes_nothing() {
    let root = copy_repo();
    let before = std::fs::read(root.path().join("template/package-lock.json")).unwrap();
    let (plan, _) = release(root.path(), &["--dry-run"]);
    let phases: Vec<&str> = plan["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(
        phases,
        ["plan", "build linux/amd64", "build linux/arm64", "ship"]
    );
    let steps: Vec<&str> = plan["phases"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["steps"].as_array().unwrap())
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(steps.first(), Some(&"gate"));
    assert!(steps.contains(&"smoke linux/arm64") && steps.contains(&"push linux/arm64 by digest"));
    // The immutable tag is the very last step, after the receipt verified.
    assert_eq!(steps[steps.len() - 2..], ["receipt verify", "tag"]);
    assert_eq!(
        std::fs::read(root.path().join("template/package-lock.json")).unwrap(),
        before
    );
    assert!(
        !root.path().join(".xtask/runs").exists(),
        "a dry run creates no run directory"
    );
}

#[test]
fn a_release_then_a_rerun_with_nothing_changed() {
    let _docker = heavy_docker();
    let root = copy_repo();
    let (first, took) = release(root.path(), &[]);
    eprintln!("first release: {:.1}s", took.as_secs_f64());
    for step in first["steps"].as_array().unwrap() {
        eprintln!(
            "  {:<32} {:>7.1}s",
            step["name"].as_str().unwrap(),
            step["seconds"].as_f64().unwrap()
        );
    }
    assert_eq!(first["status"], "released", "{first}");
    let receipt = first["receipt"].as_str().unwrap();
    let verdict = xtask()
        .args(["receipt", "verify", receipt, "--json"])
        .env("XTASK_ROOT", root.path())
        .run()
        .json();
    assert_eq!(verdict["valid"], true, "{verdict}");
    assert_eq!(verdict["complete"], true, "{verdict}");
    // The release's assets, as a consumer downloads them, verify against the receipt.
    // The receipt sits among the assets it names, in `.xtask/releases/<tag>/`.
    let assets = Path::new(receipt).parent().unwrap().to_path_buf();
    assert!(
        assets.ends_with(first["tag"].as_str().unwrap()),
        "{}",
        assets.display()
    );
    xtask()
        .args(["receipt", "verify", "--artifacts"])
        .arg(&assets)
        .arg(assets.join(Path::new(receipt).file_name().unwrap()))
        .env("XTASK_ROOT", root.path())
        .run()
        .assert_success();
    assert!(
        assets.join("package-lock.json").exists() && assets.join("receipt.v2.schema.json").exists()
    );
    // What the release wrote is what `lock` makes of the same clock, byte for byte: an
    // independent regeneration from the same registry finds no drift.
    xtask()
        .args(["lock", "--check"])
        .env("XTASK_ROOT", root.path())
        .run()
        .assert_success();
    // The committed files came from the same clock, but from the registry as it was then. A
    // partial mirror that has since filled in a version published before the cutoff answers
    // differently for the same clock; that is the world's change, not the release's, so it is
    // reported, and the release above still had to build, test and publish the new answer.
    let repo = repo_root();
    for file in ["template/package-lock.json", "template/inventory.json"] {
        if std::fs::read(root.path().join(file)).unwrap() != std::fs::read(repo.join(file)).unwrap()
        {
            eprintln!(
                "note: the registry now resolves the committed clock differently from the \
                 committed {file}; `cargo xtask lock --check` shows the difference"
            );
        }
    }

    let receipts: Vec<_> = std::fs::read_dir(&assets)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("receipt-"))
        .collect();
    assert_eq!(receipts.len(), 1, "one receipt per release: {receipts:?}");

    // A minute later: a new clock, but nothing that is released changed. The plan ends the
    // run, and the checkout is left exactly as it was (the inventory keeps its clock).
    let (second, took) = release_at(root.path(), &committed_clock(60), &[]);
    eprintln!("re-run with nothing changed: {:.1}s", took.as_secs_f64());
    assert_eq!(second["status"], "unchanged", "{second}");
    assert_eq!(second["tag"], first["tag"]);
    assert!(second["changes"].as_array().unwrap().is_empty());
    let status = Command::new("git")
        .args(["status", "--porcelain", "--", "template", "Dockerfile"])
        .current_dir(root.path())
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&status.stdout),
        "",
        "an unchanged run leaves the checkout unchanged"
    );
}
