//! An unverified registry is named first: the first line `resolve`, `lock`, `release plan`
//! and `release` print says the inputs are UNVERIFIED and names the registry, and the release's
//! notes (INVENTORY.md, which the workflow publishes) say it too. A signing registry's first
//! line says what verified it.

use std::path::Path;

use crate::lock::with_pinned_npm;
use crate::support::npm_fixture::{fixture_now, realistic, scratch_root};
use crate::support::xtask::{xtask, Run};

/// A day the cadence does not release on (epoch day 20788 is not a multiple of 3): the plan
/// stops after the gate, and only the first line is about the inputs.
const NOT_DUE: &str = "2026-12-01T04:37:00Z";

fn first_line(run: &Run) -> String {
    run.stderr_text()
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

fn unverified_named(line: &str, registry: &str) {
    assert!(
        line.contains("inputs: UNVERIFIED") && line.contains(registry.trim_end_matches('/')),
        "the first line does not name the unverified registry {registry}: {line}"
    );
}

fn run(root: &Path, args: &[&str]) -> Run {
    xtask()
        .args(args)
        .env("XTASK_ROOT", root)
        .env("XTASK_RETRY_BASE_MS", "50")
        .run()
}

#[test]
fn resolve_lock_and_the_release_name_an_unverified_registry_first() {
    let registry = realistic();
    with_pinned_npm(&registry);
    let root = scratch_root(&[]);
    let now = fixture_now().to_rfc3339();
    let at = ["--registry", registry.url.as_str(), "--now", now.as_str()];

    let resolve = run(root.path(), &[&["resolve", "--json"][..], &at].concat());
    unverified_named(&first_line(resolve.assert_success()), &registry.url);
    let lock = run(root.path(), &[&["lock"][..], &at].concat());
    unverified_named(&first_line(lock.assert_success()), &registry.url);
    // The notes say it, with the registry, in one line.
    let notes = std::fs::read_to_string(root.path().join("template/INVENTORY.md")).unwrap();
    assert!(
        notes
            .lines()
            .any(|l| l.contains("**UNVERIFIED**") && l.contains(&registry.url)),
        "{notes}"
    );

    let out = tempfile::tempdir().unwrap();
    let plan_dir = out.path().join("plan").display().to_string();
    let none = out.path().join("none").display().to_string();
    let flags = [
        "--registry",
        registry.url.as_str(),
        "--now",
        NOT_DUE,
        "--previous-receipts",
        none.as_str(),
    ];
    let plan = run(
        root.path(),
        &[
            &["release", "plan", "--json", "--out", plan_dir.as_str()][..],
            &flags,
        ]
        .concat(),
    );
    unverified_named(&first_line(plan.assert_success()), &registry.url);
    assert_eq!(plan.json()["action"], "not_due");
    let release = run(
        root.path(),
        &[&["release", "--no-publish", "--json"][..], &flags].concat(),
    );
    unverified_named(&first_line(release.assert_success()), &registry.url);
}

#[test]
fn a_signing_registrys_first_line_says_what_verified_it() {
    // Signing, and serving the provenance the committed manifest requires (from the stand-in).
    let (registry, _key, dir) = crate::inputs::signing();
    let root = scratch_root(&[]);
    let now = fixture_now().to_rfc3339();
    let resolve = run(
        root.path(),
        &[
            "resolve",
            "--json",
            "--registry",
            &registry.url,
            "--now",
            &now,
            "--trusted-keys",
            &crate::inputs::keys_flag(&dir),
            "--trusted-root",
            &crate::inputs::root_flag(&dir),
        ],
    );
    let line = first_line(resolve.assert_success());
    assert!(
        line.contains("inputs: registry signatures verified with --trusted-keys"),
        "{line}"
    );
}
