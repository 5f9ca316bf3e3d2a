//! On real bundles no one here wrote (`../shared/fixtures/sigstore/cli-cli/`, SOURCE.md there):
//! the directory as a release would hand it, every bundle file in it, matched to a subject by
//! the digest its statement names. Skips, saying why, only where the fixtures are absent.
//! Negatives the fixtures cannot give are in verify/tests/release_bundles.rs (signed by the
//! tests' own Sigstore stand-in).

use super::*;
use crate::sigstore::tests::fixtures;

/// GitHub's own instance (a TSA timestamp, no log): actions/attest-demo's wheel.
const DEMO_WHEEL: &str = "github_provenance_demo-0.0.12-py3-none-any.whl";
const DEMO_SHA256: &str = "sha256:ae57936def59bc4c75edd3a837d89bcefc6d3a5e31d55a6fa7a71624f92c3c3b";
/// The commit its certificate names (1.3.6.1.4.1.57264.1.13).
const DEMO_COMMIT: &str = "a6c23b9806c593664f68637c8f9d45dfcf98b2db";

/// Both roots as `gh attestation trusted-root` prints them: JSON lines.
fn both_roots(sigstore: &Path, dir: &Path) -> TrustedRoots {
    let line = |name: &str| {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(sigstore.join(name)).unwrap()).unwrap();
        v.to_string()
    };
    let path = dir.join("trusted-root.jsonl");
    std::fs::write(
        &path,
        format!(
            "{}\n{}\n",
            line("public-good-trusted_root.json"),
            line("github-trusted_root.json")
        ),
    )
    .unwrap();
    read_trusted_roots(&path).unwrap()
}

fn demo_signer() -> ReleaseSigner {
    ReleaseSigner::new(
        "actions/attest-demo",
        ".github/workflows/build-python.yml",
        "refs/heads/main",
        None,
    )
    .unwrap()
}

#[test]
fn a_subject_is_attested_by_the_bundle_whose_statement_names_its_digest() {
    let Some(dir) = fixtures() else { return };
    let sigstore = dir.join("sigstore");
    let tmp = tempfile::tempdir().unwrap();
    let roots = both_roots(&sigstore, tmp.path());
    // The whole cli/cli directory: the good bundle beside its malformed variants (which name
    // the same digest and fail), sigstore-js's and others (which name other digests).
    let bundles = BundleSet::from_dir(&sigstore.join("cli-cli")).unwrap();
    assert!(bundles.len() >= 6, "{}", bundles.len());
    let wanted = |name, digest, commit| Wanted {
        name,
        digest,
        predicate_type: crate::attestation::PROVENANCE,
        source_commit: commit,
    };
    let good = wanted(DEMO_WHEEL, DEMO_SHA256, Some(DEMO_COMMIT));
    let claims = verify_subject(&bundles, &roots, &demo_signer(), &good).unwrap();
    assert_eq!(
        claims.source_repository_digest.as_deref(),
        Some(DEMO_COMMIT)
    );

    // Another commit than the receipt's: refused naming the claim.
    let ones = "1".repeat(40);
    let why = verify_subject(
        &bundles,
        &roots,
        &demo_signer(),
        &wanted(DEMO_WHEEL, DEMO_SHA256, Some(&ones)),
    )
    .unwrap_err();
    assert!(why.contains("source repository digest"), "{why}");
    // The right digest under another file name (an asset renamed): refused naming the name.
    let why = verify_subject(
        &bundles,
        &roots,
        &demo_signer(),
        &wanted("receipt.json", DEMO_SHA256, Some(DEMO_COMMIT)),
    )
    .unwrap_err();
    assert!(why.contains("statement subject name"), "{why}");
    // Another predicate type (an SBOM asked for, provenance found).
    let mut sbom = good.clone();
    sbom.predicate_type = crate::attestation::SPDX_SBOM;
    let why = verify_subject(&bundles, &roots, &demo_signer(), &sbom).unwrap_err();
    assert!(why.contains("statement predicateType"), "{why}");
    // Another repository's workflow (a casing the caller typed is another repository).
    let other = ReleaseSigner::new(
        "actions/Attest-Demo",
        ".github/workflows/build-python.yml",
        "refs/heads/main",
        None,
    )
    .unwrap();
    let why = verify_subject(&bundles, &roots, &other, &good).unwrap_err();
    assert!(
        why.contains("certificate subject alternative name"),
        "{why}"
    );
    // A digest no bundle names: refused naming the subject, nothing verified.
    let unknown = format!("sha256:{}", "ab".repeat(32));
    let why = verify_subject(
        &bundles,
        &roots,
        &demo_signer(),
        &wanted("inventory.json", &unknown, Some(DEMO_COMMIT)),
    )
    .unwrap_err();
    assert!(
        why.contains("no bundle among") && why.contains("`inventory.json`"),
        "{why}"
    );
}

#[test]
fn a_bundle_file_s_name_is_not_trusted_only_its_signed_subject() {
    let Some(dir) = fixtures() else { return };
    let sigstore = dir.join("sigstore");
    let tmp = tempfile::tempdir().unwrap();
    let roots = both_roots(&sigstore, tmp.path());
    let release = tmp.path().join("release");
    std::fs::create_dir(&release).unwrap();
    // The demo's bundle under the name of another asset's bundle, beside an asset file (not a
    // bundle: ignored) and sigstore-js's bundle (another subject: ignored).
    std::fs::copy(
        sigstore.join("cli-cli/github_provenance_demo-0.0.12-py3-none-any-bundle.jsonl"),
        release.join("inventory.json.sigstore.json"),
    )
    .unwrap();
    std::fs::copy(
        sigstore.join("cli-cli/sigstore-js-2.1.0-bundle.json"),
        release.join("receipt.sigstore.json"),
    )
    .unwrap();
    std::fs::write(release.join("inventory.json"), b"{}").unwrap();
    let bundles = BundleSet::from_dir(&release).unwrap();
    assert_eq!(bundles.len(), 2);
    let good = Wanted {
        name: DEMO_WHEEL,
        digest: DEMO_SHA256,
        predicate_type: crate::attestation::PROVENANCE,
        source_commit: Some(DEMO_COMMIT),
    };
    verify_subject(&bundles, &roots, &demo_signer(), &good).unwrap();
    // The bundle's file name says inventory.json; its statement does not.
    let inventory = format!("sha256:{}", template_formats::hash::sha256_hex(b"{}"));
    let why = verify_subject(
        &bundles,
        &roots,
        &demo_signer(),
        &Wanted {
            name: "inventory.json",
            digest: &inventory,
            ..good.clone()
        },
    )
    .unwrap_err();
    assert!(why.contains("no bundle among the 2"), "{why}");
    // Under a root that does not list GitHub's instance, the genuine bundle is refused.
    let public_only = read_trusted_roots(&sigstore.join("public-good-trusted_root.json")).unwrap();
    let why = verify_subject(&bundles, &public_only, &demo_signer(), &good).unwrap_err();
    assert!(why.contains("does not verify"), "{why}");
}

#[test]
fn a_bundle_file_that_is_not_json_is_an_error_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("receipt.sigstore.json"), b"{not json").unwrap();
    let why = BundleSet::from_dir(tmp.path()).err().unwrap();
    assert!(
        format!("{why:#}").contains("receipt.sigstore.json"),
        "{why:#}"
    );
    assert!(is_bundle_file("sha256:ab.jsonl") && is_bundle_file("x.sigstore.json"));
    assert!(!is_bundle_file("inventory.json") && !is_bundle_file("receipt-t-ab.json"));
}
