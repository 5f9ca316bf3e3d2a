//! Golden tests on real npm provenance no one here wrote: `../shared/fixtures/` beside the
//! checkout (SOURCE.md there says what each file is); each skips, saying why, only when that
//! directory is absent. Every check is also shown refusing a broken input.

use super::*;

/// `<repository>/../shared/fixtures`, where CI lays it beside the clone.
fn fixtures() -> Option<std::path::PathBuf> {
    // cargo runs a package's tests in the package's directory (xtask/).
    let dir = std::path::Path::new("../../shared/fixtures").to_path_buf();
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "skipped: {} is absent (the real npm provenance lives beside the checkout)",
            dir.display()
        );
        None
    }
}

fn read(dir: &std::path::Path, path: &str) -> String {
    std::fs::read_to_string(dir.join(path)).unwrap()
}

fn public_good(dir: &std::path::Path) -> TrustedRoot {
    TrustedRoot::from_json(
        &read(dir, "sigstore/public-good-trusted_root.json"),
        "public-good-trusted_root.json",
    )
    .unwrap()
}

/// The integrity registry.npmjs.org signed for `name@1.0.0` (npm/registry-signatures.json).
fn integrity(dir: &std::path::Path, name: &str) -> String {
    let doc: serde_json::Value =
        serde_json::from_str(&read(dir, "npm/registry-signatures.json")).unwrap();
    doc["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == name)
        .unwrap()["dist"]["integrity"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn identity(repository: &str, workflow: &str, pattern: &str) -> ProvenanceIdentity {
    ProvenanceIdentity {
        repository: repository.into(),
        workflow: workflow.into(),
        ref_pattern: pattern.into(),
        source: "test".into(),
    }
}

fn sigstore_js() -> ProvenanceIdentity {
    identity(
        "sigstore/sigstore-js",
        ".github/workflows/publish.yml",
        "refs/tags/v*",
    )
}

fn refused(outcome: Outcome) -> String {
    match outcome {
        Outcome::Refused(why) => why,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn npm_s_real_provenance_of_sigstore_1_0_0_carries_its_identity() {
    let Some(dir) = fixtures() else { return };
    let root = public_good(&dir);
    let answer = read(&dir, "npm/valid-sigstore-attestations.json");
    let integrity = integrity(&dir, "sigstore");
    let outcome = judge(
        &answer,
        &root,
        "sigstore",
        "1.0.0",
        &integrity,
        Some(&sigstore_js()),
    );
    let Outcome::Verified(record) = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(record.repository, "sigstore/sigstore-js");
    assert_eq!(record.workflow, ".github/workflows/publish.yml");
    assert_eq!(record.git_ref, "refs/tags/v1.0.0");
    assert_eq!(record.issuer, GITHUB_ACTIONS_ISSUER);
    assert!(record.identity_pinned);
    assert_eq!(record.predicate_type, "https://slsa.dev/provenance/v0.2");
    let logged = record.log_integrated_time.unwrap();
    assert_eq!(logged.to_rfc3339(), "2023-02-09T17:56:00+00:00");
    // Without a recorded identity, the same bundle is verified and its identity observed.
    let Outcome::Verified(observed) = judge(&answer, &root, "sigstore", "1.0.0", &integrity, None)
    else {
        panic!()
    };
    assert!(!observed.identity_pinned);
    assert_eq!(observed.repository, record.repository);
}

#[test]
fn a_wrong_repository_workflow_or_ref_is_refused_naming_what_differs() {
    let Some(dir) = fixtures() else { return };
    let root = public_good(&dir);
    let answer = read(&dir, "npm/valid-sigstore-attestations.json");
    let integrity = integrity(&dir, "sigstore");
    for (id, names) in [
        (
            identity(
                "sigstore/other",
                ".github/workflows/publish.yml",
                "refs/tags/v*",
            ),
            "in repository sigstore/sigstore-js",
        ),
        (
            identity(
                "sigstore/sigstore-js",
                ".github/workflows/release.yml",
                "refs/tags/v*",
            ),
            "workflow file .github/workflows/publish.yml",
        ),
        (
            identity(
                "sigstore/sigstore-js",
                ".github/workflows/publish.yml",
                "refs/heads/main",
            ),
            "from ref refs/tags/v1.0.0",
        ),
    ] {
        let why = refused(judge(
            &answer,
            &root,
            "sigstore",
            "1.0.0",
            &integrity,
            Some(&id),
        ));
        assert!(
            why.contains("provenance identity") && why.contains(names),
            "{why}"
        );
    }
    // tuf-js@1.0.0's real provenance comes from its own repository, not sigstore-js.
    let why = refused(judge(
        &read(&dir, "npm/valid-tuf-js-attestations.json"),
        &root,
        "tuf-js",
        "1.0.0",
        &integrity_of_tuf_js(&dir),
        Some(&sigstore_js()),
    ));
    assert!(why.contains("theupdateframework/tuf-js"), "{why}");
}

fn integrity_of_tuf_js(dir: &std::path::Path) -> String {
    integrity(dir, "tuf-js")
}

#[test]
fn provenance_over_another_digest_or_for_another_version_is_refused() {
    let Some(dir) = fixtures() else { return };
    let root = public_good(&dir);
    let answer = read(&dir, "npm/valid-sigstore-attestations.json");
    // tuf-js's integrity in place of sigstore's: the bundle's subject digest differs.
    let why = refused(judge(
        &answer,
        &root,
        "sigstore",
        "1.0.0",
        &integrity_of_tuf_js(&dir),
        Some(&sigstore_js()),
    ));
    assert!(why.contains("does not verify"), "{why}");
    // The right digest, but asked as sigstore@1.0.1: the statement's purl differs.
    let why = refused(judge(
        &answer,
        &root,
        "sigstore",
        "1.0.1",
        &integrity(&dir, "sigstore"),
        Some(&sigstore_js()),
    ));
    assert!(
        why.contains("pkg:npm/sigstore@1.0.0") && why.contains("not pkg:npm/sigstore@1.0.1"),
        "{why}"
    );
    // A root that does not hold the Fulcio CA (GitHub's own instance): the chain fails.
    let github = TrustedRoot::from_json(
        &read(&dir, "sigstore/github-trusted_root.json"),
        "github-trusted_root.json",
    )
    .unwrap();
    let why = refused(judge(
        &answer,
        &github,
        "sigstore",
        "1.0.0",
        &integrity(&dir, "sigstore"),
        Some(&sigstore_js()),
    ));
    assert!(why.contains("does not verify"), "{why}");
    // An answer holding only the registry's publish attestation has no provenance.
    let mut only_publish: serde_json::Value = serde_json::from_str(&answer).unwrap();
    only_publish["attestations"]
        .as_array_mut()
        .unwrap()
        .retain(|a| {
            !a["predicateType"]
                .as_str()
                .unwrap()
                .starts_with(SLSA_PROVENANCE)
        });
    let why = refused(judge(
        &only_publish.to_string(),
        &root,
        "sigstore",
        "1.0.0",
        &integrity(&dir, "sigstore"),
        Some(&sigstore_js()),
    ));
    assert!(why.contains("no SLSA provenance"), "{why}");
}

/// sigstore-js 2.1.0's provenance as gh's tests keep it: a bundle v0.3, SLSA v1, with the
/// certificate's newer claims (source repository URI, build config), from `release.yml` on
/// `refs/heads/main`.
#[test]
fn a_v0_3_bundle_with_slsa_v1_is_held_against_its_identity_too() {
    let Some(dir) = fixtures() else { return };
    let root = TrustedRoot::from_json(
        &read(&dir, "sigstore/cli-cli/trusted_root.json"),
        "cli-cli/trusted_root.json",
    )
    .unwrap();
    let bundle: serde_json::Value = serde_json::from_str(&read(
        &dir,
        "sigstore/cli-cli/sigstore-js-2.1.0-bundle.json",
    ))
    .unwrap();
    let answer = serde_json::json!({ "attestations": [
        { "predicateType": "https://slsa.dev/provenance/v1", "bundle": bundle }
    ]})
    .to_string();
    let sha512 = hex::decode("90f223f992e4c88dd068cd2a5fc57f9d2b30798343dd6e38f29c240e04ba090ef831f84490847c4e82b9232c78e8a258463b1e55c0f7469f730265008fa6633f").unwrap();
    use base64::Engine as _;
    let integrity = format!(
        "sha512-{}",
        base64::engine::general_purpose::STANDARD.encode(&sha512)
    );
    let release = identity(
        "sigstore/sigstore-js",
        ".github/workflows/release.yml",
        "refs/heads/main",
    );
    let Outcome::Verified(record) = judge(
        &answer,
        &root,
        "sigstore",
        "2.1.0",
        &integrity,
        Some(&release),
    ) else {
        panic!()
    };
    assert_eq!(record.git_ref, "refs/heads/main");
    assert_eq!(record.predicate_type, "https://slsa.dev/provenance/v1");
    let why = refused(judge(
        &answer,
        &root,
        "sigstore",
        "2.1.0",
        &integrity,
        Some(&sigstore_js()),
    ));
    assert!(why.contains("release.yml"), "{why}");
}

#[test]
fn purls_encode_the_scope_as_npm_does() {
    assert_eq!(purl("sigstore", "1.0.0"), "pkg:npm/sigstore@1.0.0");
    assert_eq!(
        purl("@openai/codex", "0.171.0"),
        "pkg:npm/%40openai/codex@0.171.0"
    );
}

#[test]
fn attestations_are_fetched_from_the_registry_s_own_origin_only() {
    let a = |url: &str| DistAttestations {
        url: Some(url.into()),
        provenance: None,
    };
    let base = "https://registry.npmjs.org";
    assert_eq!(
        attestations_url(
            base,
            &a("https://registry.npmjs.org/-/npm/v1/attestations/ws@8.0.0")
        )
        .unwrap(),
        "https://registry.npmjs.org/-/npm/v1/attestations/ws@8.0.0"
    );
    assert!(attestations_url(
        base,
        &a("https://evil.example/-/npm/v1/attestations/ws@8.0.0")
    )
    .unwrap_err()
    .contains("not on the registry"));
    assert!(attestations_url(base, &a("http://registry.npmjs.org/x")).is_err());
}

#[test]
fn only_slsa_provenance_counts_as_provenance() {
    let kind = |t: Option<&str>| DistAttestations {
        url: None,
        provenance: Some(crate::npm::registry::AttestationKind {
            predicate_type: t.map(str::to_owned),
        }),
    };
    assert!(claims_provenance(Some(&kind(Some(
        "https://slsa.dev/provenance/v1"
    )))));
    assert!(claims_provenance(Some(&kind(None))));
    assert!(!claims_provenance(Some(&kind(Some(
        "https://example.org/other"
    )))));
    assert!(!claims_provenance(None));
}

#[test]
fn the_cooldown_counts_from_the_later_of_the_registry_s_and_the_log_s_time() {
    let published: DateTime<Utc> = "2026-11-20T00:00:00Z".parse().unwrap();
    let logged: DateTime<Utc> = "2026-11-28T00:00:00Z".parse().unwrap();
    let record = |t| {
        Outcome::Verified(ProvenanceRecord {
            repository: "o/r".into(),
            workflow: ".github/workflows/r.yml".into(),
            git_ref: "refs/tags/v1".into(),
            issuer: GITHUB_ACTIONS_ISSUER.into(),
            identity_pinned: true,
            predicate_type: "https://slsa.dev/provenance/v1".into(),
            log_integrated_time: Some(t),
        })
    };
    assert_eq!(
        effective_publish_time(published, Some(&record(logged))),
        logged
    );
    let earlier: DateTime<Utc> = "2026-11-19T00:00:00Z".parse().unwrap();
    assert_eq!(
        effective_publish_time(published, Some(&record(earlier))),
        published
    );
    assert_eq!(effective_publish_time(published, None), published);
}
