//! End-to-end tests of the inputs' verification (docs/inputs.md): the real binary against the
//! fixture npm registry, unsigned (as the mirror these machines reach) or signing every version
//! with its own key (given to the tool with `--trusted-keys`), as registry.npmjs.org signs, and
//! serving provenance from the Sigstore stand-in (its root given with `--trusted-root`) where
//! the manifest records an identity. The provenance rules' own tests: `inputs/provenance.rs`.

mod provenance;
mod trust;

mod headline;
mod scripts;

use std::sync::Arc;

use serde_json::{json, Value};

use crate::lock::with_pinned_npm;
use crate::support::npm_fixture::{
    fixture_now, realistic, scratch_root, FixtureRegistry, SigningKey,
};
use crate::support::sigstore_standin::{GithubRun, SigstoreStandIn};
use crate::support::xtask::{xtask, Run};

fn resolve(registry: &FixtureRegistry, extra: &[&str]) -> Run {
    let root = scratch_root(&[]);
    xtask()
        .args(["resolve", "--json", "--registry", &registry.url])
        .args(["--now", &fixture_now().to_rfc3339()])
        .args(extra)
        .env("XTASK_ROOT", root.path())
        .env("XTASK_RETRY_BASE_MS", "50")
        .run()
}

fn package<'a>(resolution: &'a Value, name: &str) -> &'a Value {
    resolution["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap()
}

fn versions(resolution: &Value) -> Vec<(String, String)> {
    resolution["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().into(),
                p["version"].as_str().unwrap().into(),
            )
        })
        .collect()
}

/// The realistic registry, signing with a key of its own, and serving the provenance the
/// committed manifest requires (playwright-cli's, from the Sigstore stand-in); the key's file
/// for `--trusted-keys` and the stand-in's root for `--trusted-root` in the directory.
pub(crate) fn signing() -> (FixtureRegistry, Arc<SigningKey>, tempfile::TempDir) {
    let (registry, key, dir, _) = signing_with_standin();
    (registry, key, dir)
}

/// `signing()`, and the stand-in whose root is in the directory.
fn signing_with_standin() -> (
    FixtureRegistry,
    Arc<SigningKey>,
    tempfile::TempDir,
    SigstoreStandIn,
) {
    let registry = realistic();
    let key = Arc::new(SigningKey::generate());
    registry.sign_with(key.clone());
    let dir = tempfile::tempdir().unwrap();
    key.keys_file(dir.path());
    let standin = SigstoreStandIn::new();
    standin.write_trusted_root(dir.path());
    for version in ["1.0.0", "1.1.0"] {
        let run = GithubRun::new(
            "microsoft/playwright-cli",
            ".github/workflows/publish.yml",
            &format!("refs/tags/v{version}"),
        );
        registry.attest_provenance(&standin, "@playwright/cli", version, &run);
    }
    (registry, key, dir, standin)
}

pub(crate) fn keys_flag(dir: &tempfile::TempDir) -> String {
    dir.path().join("trusted-keys.json").display().to_string()
}

pub(crate) fn root_flag(dir: &tempfile::TempDir) -> String {
    dir.path().join("trusted_root.json").display().to_string()
}

#[test]
fn an_unsigned_registry_is_reported_unverified_and_refused_when_signed_inputs_are_required() {
    let registry = realistic();
    let out = resolve(&registry, &[]);
    let r = out.assert_success().json();
    assert_eq!(r["inputs"], "unverified");
    assert!(r["packages"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["signed_by"].is_null()));
    assert!(
        out.stderr_text().contains("inputs: UNVERIFIED"),
        "{}",
        out.stderr_text()
    );

    let out = resolve(&registry, &["--require-signed-inputs"]);
    out.assert_failure();
    let err = out.stderr_text();
    assert!(
        err.contains("--require-signed-inputs")
            && err.contains(&registry.url.trim_end_matches('/').to_string()),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn a_signing_registry_with_genuine_signatures_takes_the_same_versions() {
    let unsigned = resolve(&realistic(), &[]).assert_success().json();
    let (registry, key, dir) = signing();
    let r = resolve(
        &registry,
        &[
            "--trusted-keys",
            &keys_flag(&dir),
            "--trusted-root",
            &root_flag(&dir),
            "--require-signed-inputs",
        ],
    )
    .assert_success()
    .json();
    assert_eq!(r["inputs"], "verified");
    assert_eq!(versions(&r), versions(&unsigned));
    for p in r["packages"].as_array().unwrap() {
        assert_eq!(p["signed_by"], key.keyid.as_str(), "{p}");
    }
    // The one identity the committed manifest records was required and found.
    let playwright = &package(&r, "@playwright/cli")["provenance"];
    assert_eq!(playwright["identity_pinned"], true, "{playwright}");
    assert_eq!(playwright["repository"], "microsoft/playwright-cli");
}

#[test]
fn a_tampered_foreign_or_stripped_signature_never_gets_that_version_taken() {
    let (registry, key, dir) = signing();
    let foreign = SigningKey::generate();
    // opencode-ai 1.1.0: one character of its genuine signature changed.
    let integrity = |name: &str, version: &str| {
        registry.packument(name)["versions"][version]["dist"]["integrity"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let genuine = key.sign(&format!(
        "opencode-ai@1.1.0:{}",
        integrity("opencode-ai", "1.1.0")
    ));
    let mut chars: Vec<char> = genuine.chars().collect();
    let i = chars.len() / 2;
    chars[i] = if chars[i] == 'A' { 'B' } else { 'A' };
    let tampered: String = chars.into_iter().collect();
    registry.set_signatures(
        "opencode-ai",
        "1.1.0",
        json!([{ "keyid": key.keyid, "sig": tampered }]),
    );
    // ws 1.1.0: signed by a key nobody trusts.
    registry.set_signatures(
        "ws",
        "1.1.0",
        json!([{ "keyid": foreign.keyid, "sig": foreign.sign(&format!("ws@1.1.0:{}", integrity("ws", "1.1.0"))) }]),
    );
    // @playwright/cli 1.1.0: signed for another integrity (what a swapped tarball would carry).
    registry.set_signatures(
        "@playwright/cli",
        "1.1.0",
        json!([{ "keyid": key.keyid, "sig": key.sign(&format!("@playwright/cli@1.1.0:{}", integrity("ws", "1.1.0"))) }]),
    );
    // pi 1.1.0: no signature at all, as a stripping proxy would serve it.
    registry.set_signatures("@earendil-works/pi-coding-agent", "1.1.0", json!([]));

    let r = resolve(
        &registry,
        &[
            "--trusted-keys",
            &keys_flag(&dir),
            "--trusted-root",
            &root_flag(&dir),
        ],
    )
    .assert_success()
    .json();
    for (name, why) in [
        ("opencode-ai", "does not verify"),
        ("ws", "which --trusted-keys"),
        ("@playwright/cli", "does not verify"),
        ("@earendil-works/pi-coding-agent", "no registry signature"),
    ] {
        let p = package(&r, name);
        assert_eq!(p["version"], "1.0.0", "{name} fell back: {p}");
        assert_eq!(p["held_back"], true);
        let reasons = p["rejected"][0]["reasons"].to_string();
        assert!(
            reasons.contains("registry signature") && reasons.contains(why),
            "{name}: {reasons}"
        );
    }
    // The untouched ones are still the newest.
    assert_eq!(package(&r, "@anthropic-ai/claude-code")["version"], "1.1.0");
}

#[test]
fn a_key_file_naming_a_key_by_another_keys_id_is_refused() {
    let (registry, key, dir) = signing();
    // The registry's key id over another key's bytes: refused before any version is judged.
    let mut doc = SigningKey::generate().keys_document();
    doc["keys"][0]["keyid"] = json!(key.keyid);
    std::fs::write(dir.path().join("trusted-keys.json"), doc.to_string()).unwrap();
    let out = resolve(
        &registry,
        &[
            "--trusted-keys",
            &keys_flag(&dir),
            "--trusted-root",
            &root_flag(&dir),
        ],
    );
    out.assert_failure();
    assert!(
        out.stderr_text().contains("not the key its id names"),
        "{}",
        out.stderr_text()
    );
}

#[test]
fn lock_verifies_every_entry_and_the_node_tarballs_and_refuses_a_bad_one() {
    let (registry, key, dir) = signing();
    with_pinned_npm(&registry);
    let root = scratch_root(&[]);
    let lock = |extra: &[&str]| {
        xtask()
            .arg("lock")
            .args([
                "--registry",
                &registry.url,
                "--now",
                &fixture_now().to_rfc3339(),
            ])
            .args([
                "--trusted-keys",
                &keys_flag(&dir),
                "--trusted-root",
                &root_flag(&dir),
            ])
            .args(extra)
            .env("XTASK_ROOT", root.path())
            .env("XTASK_RETRY_BASE_MS", "50")
            .run()
    };
    lock(&["--require-signed-inputs"]).assert_success();
    let inventory: Value = serde_json::from_str(
        &std::fs::read_to_string(root.path().join("template/inventory.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(inventory["inputs"], "verified");
    let packages = inventory["packages"].as_array().unwrap();
    assert!(packages.len() > 6);
    for p in packages {
        assert_eq!(p["signed_by"], key.keyid.as_str(), "{p}");
    }
    assert_eq!(inventory["node"]["npm"]["signed_by"], key.keyid.as_str());
    // The provenance resolve verified is the top-level row's record.
    let playwright = packages
        .iter()
        .find(|p| p["name"] == "@playwright/cli")
        .unwrap();
    assert_eq!(playwright["provenance"]["ref"], "refs/tags/v1.1.0");
    assert_eq!(playwright["evidence"], "provenance");
    for t in inventory["node"]["platforms"].as_object().unwrap().values() {
        assert_eq!(t["signed_by"], key.keyid.as_str());
    }
    // The committed lock, re-verified: a platform package's signature tampered afterwards
    // fails `lock --check`, naming it.
    let stripped = "opencode-linux-arm64";
    registry.set_signatures(stripped, "1.1.0", json!([]));
    let out = lock(&["--check"]);
    out.assert_failure();
    let err = out.stderr_text();
    assert!(
        err.contains(&format!("{stripped}@1.1.0")) && err.contains("no registry signature"),
        "{err}"
    );
}
