//! No downgrade, end to end: a version with less trust evidence than a version published
//! before it, or than the locked version had by the committed inventory's record, is passed
//! over (a registry that stops showing provenance for every version is caught by the
//! record); a change of publisher is shown in the table and in `--json`.

use serde_json::json;

use super::{keys_flag, package, root_flag, signing_with_standin};
use crate::lock::with_pinned_npm;
use crate::support::npm_fixture::{days_ago, fixture_now, scratch_root, FixtureRegistry};
use crate::support::sigstore_standin::GithubRun;
use crate::support::xtask::{xtask, Run};

fn run_in(
    command: &[&str],
    root: &tempfile::TempDir,
    registry: &FixtureRegistry,
    dir: &tempfile::TempDir,
) -> Run {
    xtask()
        .args(command)
        .args(["--registry", &registry.url])
        .args(["--now", &fixture_now().to_rfc3339()])
        .args(["--trusted-keys", &keys_flag(dir)])
        .args(["--trusted-root", &root_flag(dir)])
        .env("XTASK_ROOT", root.path())
        .env("XTASK_RETRY_BASE_MS", "50")
        .run()
}

/// `_npmUser` as registry.npmjs.org records a trusted publish (pnpm's
/// `@pnpm/registry.types`: `trustedPublisher: { id, oidcConfigId }`).
fn trusted_publisher() -> serde_json::Value {
    json!({ "name": "GitHub Actions", "email": "npm-oidc-no-reply@github.com",
            "trustedPublisher": { "id": "github", "oidcConfigId": "oidc:fixture" } })
}

#[test]
fn less_trust_than_an_earlier_version_is_passed_over_and_a_publisher_change_is_shown() {
    let (registry, _key, dir, standin) = signing_with_standin();
    // ws 1.0.0 came through trusted publishing, with provenance, two days before 1.1.0, which
    // an account published without either (the nx and axios pattern).
    registry.attest_provenance(
        &standin,
        "ws",
        "1.0.0",
        &GithubRun::new(
            "websockets/ws",
            ".github/workflows/publish.yml",
            "refs/tags/1.0.0",
        ),
    );
    registry.edit("ws", |p| {
        p["versions"]["1.0.0"]["_npmUser"] = trusted_publisher();
        p["versions"]["1.1.0"]["_npmUser"] = json!({ "name": "mallory", "email": "m@example.org" });
        p["time"]["1.0.0"] = json!(days_ago(12).to_rfc3339());
    });
    // opencode-ai moves from one account to another: shown, not refused.
    registry.edit("opencode-ai", |p| {
        p["versions"]["1.0.0"]["_npmUser"] = json!({ "name": "alice", "email": "a@example.org" });
        p["versions"]["1.1.0"]["_npmUser"] = json!({ "name": "bob", "email": "b@example.org" });
    });
    let root = scratch_root(&[("opencode-ai", "1.0.0"), ("ws", "1.0.0")]);

    let r = run_in(&["resolve", "--json"], &root, &registry, &dir)
        .assert_success()
        .json();
    let ws = package(&r, "ws");
    assert_eq!(ws["version"], "1.0.0", "{ws}");
    assert_eq!(ws["evidence"], "trusted_publisher", "{ws}");
    assert_eq!(ws["publisher"], "GitHub Actions (trusted publishing)");
    let reasons = ws["rejected"][0]["reasons"].to_string();
    assert!(
        reasons.contains(
            "trust downgrade: 1.0.0, published before it, had trusted publishing, this version has no trust evidence"
        ),
        "{reasons}"
    );
    let opencode = package(&r, "opencode-ai");
    assert_eq!(opencode["version"], "1.1.0", "{opencode}");
    assert_eq!(opencode["publisher_change"], "alice -> bob");

    // The table says both, the change loudly.
    let out = run_in(&["resolve"], &root, &registry, &dir);
    let table = out.assert_success().stdout_text();
    assert!(
        table.contains("opencode-ai: PUBLISHER CHANGED: alice -> bob"),
        "{table}"
    );
    assert!(table.contains("trust downgrade"), "{table}");
}

#[test]
fn the_inventory_keeps_each_version_s_trust_and_a_stripped_registry_cannot_lower_it() {
    let (registry, _key, dir, standin) = signing_with_standin();
    with_pinned_npm(&registry);
    for version in ["1.0.0", "1.1.0"] {
        for (name, run) in [
            (
                "@playwright/cli",
                GithubRun::new(
                    "microsoft/playwright-cli",
                    ".github/workflows/publish.yml",
                    &format!("refs/tags/v{version}"),
                ),
            ),
            (
                "ws",
                GithubRun::new(
                    "websockets/ws",
                    ".github/workflows/publish.yml",
                    &format!("refs/tags/{version}"),
                ),
            ),
        ] {
            registry.attest_provenance(&standin, name, version, &run);
        }
        registry.edit("@playwright/cli", |p| {
            p["versions"][version]["_npmUser"] = trusted_publisher()
        });
    }
    let root = scratch_root(&[]);
    run_in(&["lock"], &root, &registry, &dir).assert_success();
    let inventory: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.path().join("template/inventory.json")).unwrap(),
    )
    .unwrap();
    let row = |name: &str| {
        inventory["packages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name && p["top_level"] == true)
            .unwrap()
            .clone()
    };
    let playwright = row("@playwright/cli");
    assert_eq!(playwright["evidence"], "trusted_publisher", "{playwright}");
    assert_eq!(playwright["publisher"]["trusted_publisher"], "github");
    assert_eq!(playwright["provenance"]["identity_pinned"], true);
    // ws has no identity in the manifest: its provenance is verified and recorded as observed.
    let ws = row("ws");
    assert_eq!(ws["evidence"], "provenance", "{ws}");
    assert_eq!(ws["provenance"]["identity_pinned"], false);
    assert_eq!(ws["provenance"]["repository"], "websockets/ws");
    let md = std::fs::read_to_string(root.path().join("template/INVENTORY.md")).unwrap();
    assert!(
        md.contains(
            "provenance: websockets/ws `.github/workflows/publish.yml` at `refs/tags/1.1.0`"
        ),
        "{md}"
    );

    // A registry (or a proxy) that stops showing provenance for every ws version: nothing in
    // the packument is left to compare with, but the locked version's record is.
    for version in ["1.0.0", "1.1.0"] {
        registry.drop_attestations("ws", version);
    }
    let out = run_in(&["resolve", "--json"], &root, &registry, &dir);
    out.assert_failure();
    let err = out.stderr_text();
    assert!(
        err.contains("no eligible version of `ws`")
            && err.contains(
                "1.1.0: trust downgrade: the locked 1.1.0 had provenance, this version has no trust evidence"
            ),
        "{err}"
    );
}
