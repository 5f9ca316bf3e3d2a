//! Provenance with identity, end to end: the real binary against the signing fixture registry
//! serving provenance from the Sigstore stand-in (`tests/support/sigstore_standin.rs`), its
//! root given with `--trusted-root`, and a scratch manifest recording an identity for each
//! package. Each broken provenance is on another package, so one run shows them all.

use serde_json::Value;

use super::{keys_flag, package, root_flag, signing};
use crate::support::npm_fixture::{fixture_now, scratch_root, FixtureRegistry};
use crate::support::sigstore_standin::{GithubRun, SigstoreStandIn};
use crate::support::xtask::{xtask, Run};

/// (package, repository, workflow) of each identity the scratch manifests record; each
/// publishes from `refs/tags/v*`.
const IDENTITIES: [(&str, &str, &str); 6] = [
    (
        "@openai/codex",
        "openai/codex",
        ".github/workflows/rust-release.yml",
    ),
    (
        "@anthropic-ai/claude-code",
        "anthropics/claude-code",
        ".github/workflows/release.yml",
    ),
    (
        "opencode-ai",
        "anomalyco/opencode",
        ".github/workflows/publish.yml",
    ),
    (
        "@earendil-works/pi-coding-agent",
        "earendil-works/pi",
        ".github/workflows/build-binaries.yml",
    ),
    (
        "@playwright/cli",
        "microsoft/playwright-cli",
        ".github/workflows/publish.yml",
    ),
    ("ws", "websockets/ws", ".github/workflows/publish.yml"),
];

/// A scratch root whose manifest records every identity of `IDENTITIES`.
fn root_with_identities() -> tempfile::TempDir {
    let root = scratch_root(&[]);
    let path = root.path().join("template/manifest.yaml");
    let mut manifest: Value =
        yaml_serde::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for spec in manifest["packages"].as_array_mut().unwrap() {
        let (_, repository, workflow) = IDENTITIES
            .iter()
            .find(|(name, _, _)| spec["name"] == *name)
            .unwrap();
        spec["provenance"] = serde_json::json!({
            "repository": repository, "workflow": workflow, "ref": "refs/tags/v*",
            "source": "the test's own",
        });
    }
    std::fs::write(&path, yaml_serde::to_string(&manifest).unwrap()).unwrap();
    root
}

/// The run that genuinely builds `name@version`.
fn genuine(name: &str, version: &str) -> GithubRun {
    let (_, repository, workflow) = IDENTITIES.iter().find(|(n, _, _)| *n == name).unwrap();
    GithubRun::new(repository, workflow, &format!("refs/tags/v{version}"))
}

/// Every stable version of every template package, with genuine provenance from `standin`.
fn attest_all(registry: &FixtureRegistry, standin: &SigstoreStandIn) {
    for (name, _, _) in IDENTITIES {
        let versions: Vec<String> = registry.packument(name)["versions"]
            .as_object()
            .unwrap()
            .keys()
            .filter(|v| !v.contains('-'))
            .cloned()
            .collect();
        for version in versions {
            registry.attest_provenance(standin, name, &version, &genuine(name, &version));
        }
    }
}

fn resolve_in(
    root: &tempfile::TempDir,
    registry: &FixtureRegistry,
    dir: &tempfile::TempDir,
) -> Run {
    xtask()
        .args(["resolve", "--json", "--registry", &registry.url])
        .args(["--now", &fixture_now().to_rfc3339()])
        .args(["--trusted-keys", &keys_flag(dir)])
        .args(["--trusted-root", &root_flag(dir)])
        .env("XTASK_ROOT", root.path())
        .env("XTASK_RETRY_BASE_MS", "50")
        .run()
}

fn standin_of(dir: &tempfile::TempDir) -> SigstoreStandIn {
    // `signing()` wrote another stand-in's root; these tests use their own, written over it.
    let standin = SigstoreStandIn::new();
    standin.write_trusted_root(dir.path());
    standin
}

#[test]
fn genuine_provenance_is_taken_and_each_broken_one_passes_the_version_over() {
    let (registry, _key, dir) = signing();
    let standin = standin_of(&dir);
    attest_all(&registry, &standin);
    let root = root_with_identities();

    // With everything genuine: the newest version of each, each with its pinned identity.
    let r = resolve_in(&root, &registry, &dir).assert_success().json();
    for (name, repository, _) in IDENTITIES {
        let p = package(&r, name);
        assert_eq!(p["held_back"], false, "{p}");
        assert_eq!(p["provenance"]["identity_pinned"], true, "{p}");
        assert_eq!(p["provenance"]["repository"], repository, "{p}");
    }

    // Then one broken provenance per package, on its newest version.
    let other = |name: &str, repository: &str, workflow: &str, git_ref: &str| {
        let (_, default_repository, default_workflow) =
            IDENTITIES.iter().find(|(n, _, _)| *n == name).unwrap();
        GithubRun::new(
            if repository.is_empty() {
                default_repository
            } else {
                repository
            },
            if workflow.is_empty() {
                default_workflow
            } else {
                workflow
            },
            git_ref,
        )
    };
    // Dropped: the registry serves 1.1.0 without provenance.
    registry.drop_attestations("opencode-ai", "1.1.0");
    // Another repository, another workflow file, another ref.
    let runs = [
        ("ws", other("ws", "evil/ws", "", "refs/tags/v1.1.0")),
        (
            "@earendil-works/pi-coding-agent",
            other(
                "@earendil-works/pi-coding-agent",
                "",
                ".github/workflows/ci.yml",
                "refs/tags/v1.1.0",
            ),
        ),
        (
            "@playwright/cli",
            other("@playwright/cli", "", "", "refs/heads/main"),
        ),
    ];
    for (name, run) in &runs {
        registry.attest_provenance(&standin, name, "1.1.0", run);
    }
    // Genuine identity, but over another tarball's digest (1.0.0's, for 1.1.0).
    let claude = "@anthropic-ai/claude-code";
    let answer = standin.npm_attestations(
        claude,
        "1.1.0",
        &registry.sha512(claude, "1.0.0"),
        &genuine(claude, "1.1.0"),
        registry.published(claude, "1.1.0") + chrono::Duration::minutes(1),
    );
    registry.attest(claude, "1.1.0", answer);

    let r = resolve_in(&root, &registry, &dir).assert_success().json();
    for (name, why) in [
        (
            "opencode-ai",
            "provenance: none (the registry lists no provenance (dist.attestations)), but the manifest requires it from https://github.com/anomalyco/opencode/.github/workflows/publish.yml at refs/tags/v*",
        ),
        ("ws", "in repository evil/ws; the manifest requires https://github.com/websockets/ws/.github/workflows/publish.yml at refs/tags/v*"),
        (
            "@earendil-works/pi-coding-agent",
            "built by the workflow file .github/workflows/ci.yml",
        ),
        ("@playwright/cli", "built from ref refs/heads/main"),
        (claude, "does not verify"),
    ] {
        let p = package(&r, name);
        assert_eq!(p["version"], "1.0.0", "{name} fell back: {p}");
        assert_eq!(p["held_back"], true, "{p}");
        assert_eq!(p["provenance"]["ref"], "refs/tags/v1.0.0", "{p}");
        let reasons = p["rejected"][0]["reasons"].to_string();
        assert!(reasons.contains(why), "{name}: {reasons}");
        let notes = p["notes"].to_string();
        assert!(notes.contains("held back from latest 1.1.0"), "{notes}");
    }
    // The untouched one is still the newest.
    assert_eq!(package(&r, "@openai/codex")["version"], "0.171.0");
}

#[test]
fn a_bundle_from_a_ca_and_log_the_root_does_not_hold_is_refused() {
    let (registry, _key, dir) = signing();
    let standin = standin_of(&dir);
    attest_all(&registry, &standin);
    // ws 1.1.0: the right identity, but certified and logged by another Sigstore.
    let forger = SigstoreStandIn::new();
    registry.attest_provenance(&forger, "ws", "1.1.0", &genuine("ws", "1.1.0"));
    let root = root_with_identities();
    let r = resolve_in(&root, &registry, &dir).assert_success().json();
    let p = package(&r, "ws");
    assert_eq!(p["version"], "1.0.0", "{p}");
    let reasons = p["rejected"][0]["reasons"].to_string();
    assert!(
        reasons.contains("provenance: the Sigstore bundle does not verify"),
        "{reasons}"
    );
}

#[test]
fn the_cooldown_counts_from_the_log_when_it_saw_the_provenance_later() {
    let (registry, _key, dir) = signing();
    let standin = standin_of(&dir);
    attest_all(&registry, &standin);
    // The registry says codex 0.171.0 is ten days old; the log integrated its provenance a day
    // before the resolution's clock.
    let codex = "@openai/codex";
    let answer = standin.npm_attestations(
        codex,
        "0.171.0",
        &registry.sha512(codex, "0.171.0"),
        &genuine(codex, "0.171.0"),
        fixture_now() - chrono::Duration::days(1),
    );
    registry.attest(codex, "0.171.0", answer);
    let root = root_with_identities();
    let r = resolve_in(&root, &registry, &dir).assert_success().json();
    let p = package(&r, codex);
    assert_eq!(p["version"], "0.170.0", "{p}");
    let reasons = p["rejected"][0]["reasons"].to_string();
    assert!(
        reasons.contains("its provenance logged at") && reasons.contains("inside the cooldown"),
        "{reasons}"
    );
}

#[test]
fn a_mirror_serving_no_provenance_is_unverified_not_a_failure() {
    // The stripping mirror: no signatures, no attestations, and every identity recorded.
    let registry = crate::support::npm_fixture::realistic();
    let root = root_with_identities();
    let out = xtask()
        .args(["resolve", "--json", "--registry", &registry.url])
        .args(["--now", &fixture_now().to_rfc3339()])
        .env("XTASK_ROOT", root.path())
        .env("XTASK_RETRY_BASE_MS", "50")
        .run();
    let r = out.assert_success().json();
    assert_eq!(r["inputs"], "unverified");
    for (name, _, _) in IDENTITIES {
        let p = package(&r, name);
        assert_eq!(p["held_back"], false, "{p}");
        assert!(p["provenance"].is_null(), "{p}");
    }
    assert!(out.stderr_text().contains("inputs: UNVERIFIED"));
}

/// The stand-in meets the real verifier (`template_verify::sigstore`, sigstore-verify): its
/// bundle verifies against its root, and each part it imitates is checked, not skipped: with
/// another stand-in's CA, CT log or transparency log in the root, or with the log's proof,
/// checkpoint or signed entry timestamp changed, the bundle is refused.
#[test]
fn each_part_of_the_stand_in_is_checked_by_the_real_verifier() {
    use template_verify::sigstore::{verify_bundle, Signer, Subject, TrustedRoot};
    let standin = SigstoreStandIn::new();
    let other = SigstoreStandIn::new().trusted_root();
    let sha512 = [7u8; 64];
    let run = GithubRun::new("o/r", ".github/workflows/release.yml", "refs/tags/v1.0.0");
    let at = fixture_now() - chrono::Duration::days(3);
    let bundle = standin.provenance_bundle("@o/r", "1.0.0", &sha512, &run, at);
    let verify = |bundle: &Value, root: &Value| {
        let root = TrustedRoot::from_json(&root.to_string(), "stand-in root").unwrap();
        verify_bundle(
            &bundle.to_string(),
            &root,
            &Subject::Sha512(sha512),
            Signer::Certificate,
        )
    };
    let root = standin.trusted_root();
    let verified = verify(&bundle, &root).unwrap();
    assert_eq!(
        verified.identity.as_deref(),
        Some("https://github.com/o/r/.github/workflows/release.yml@refs/tags/v1.0.0")
    );
    assert_eq!(
        verified.source_repository.as_deref(),
        Some("https://github.com/o/r")
    );
    assert_eq!(
        verified.integrated_time.unwrap().timestamp(),
        at.timestamp()
    );

    let mut broken = Vec::new();
    for part in ["certificateAuthorities", "ctlogs", "tlogs"] {
        let mut swapped = root.clone();
        swapped[part] = other[part].clone();
        broken.push((format!("root with another {part}"), bundle.clone(), swapped));
    }
    let entry = "/verificationMaterial/tlogEntries/0";
    for (what, pointer, value) in [
        (
            "inclusion proof",
            format!("{entry}/inclusionProof/logIndex"),
            "1",
        ),
        (
            "signed entry timestamp",
            format!("{entry}/integratedTime"),
            "1700000000",
        ),
    ] {
        let mut b = bundle.clone();
        *b.pointer_mut(&pointer).unwrap() = Value::String(value.into());
        broken.push((what.into(), b, root.clone()));
    }
    let mut b = bundle.clone();
    let checkpoint = b
        .pointer_mut(&format!("{entry}/inclusionProof/checkpoint/envelope"))
        .unwrap();
    let text = checkpoint.as_str().unwrap().to_owned();
    // Another tree size under the same signature.
    let mut lines: Vec<&str> = text.split('\n').collect();
    let size = format!("{}", lines[1].parse::<u64>().unwrap() + 1);
    lines[1] = &size;
    *checkpoint = Value::String(lines.join("\n"));
    broken.push(("checkpoint".into(), b, root.clone()));
    for (what, bundle, root) in broken {
        assert!(
            verify(&bundle, &root).is_err(),
            "the verifier accepted the stand-in's bundle with a broken {what}"
        );
    }
}

#[test]
fn a_trusted_root_that_is_not_one_is_named() {
    let (registry, _key, dir) = signing();
    std::fs::write(dir.path().join("trusted_root.json"), "{\"keys\": []}").unwrap();
    let out = resolve_in(&root_with_identities(), &registry, &dir);
    out.assert_failure();
    let err = out.stderr_text();
    assert!(
        err.contains("--trusted-root") && err.contains("is not a Sigstore trusted root"),
        "{err}"
    );
}
