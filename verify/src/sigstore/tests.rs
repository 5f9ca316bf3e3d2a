//! Golden tests on real signed material no one here wrote: `../shared/fixtures/` beside the
//! checkout (SOURCE.md there says what each file is). Each test skips, saying why, only when
//! that directory is absent (a bare clone); each check is also shown failing on a broken input.

use super::*;
use base64::Engine as _;

/// `<repository>/../shared/fixtures`, where CI lays it beside the clone.
pub(crate) fn fixtures() -> Option<std::path::PathBuf> {
    // cargo runs a package's tests in the package's directory (verify/).
    let dir = std::path::Path::new("../../shared/fixtures").to_path_buf();
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "skipped: {} is absent (the real Sigstore and npm material lives beside the checkout)",
            dir.display()
        );
        None
    }
}

fn read(dir: &std::path::Path, path: &str) -> String {
    std::fs::read_to_string(dir.join(path)).unwrap()
}

fn sha512_of_integrity(integrity: &str) -> [u8; 64] {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(integrity.strip_prefix("sha512-").unwrap())
        .unwrap();
    bytes.try_into().unwrap()
}

/// The real `/-/npm/v1/attestations/<name>@1.0.0` answer: (predicate type, bundle JSON).
fn attestations(dir: &std::path::Path, file: &str) -> Vec<(String, String)> {
    let answer: serde_json::Value =
        serde_json::from_str(&read(dir, &format!("npm/{file}"))).unwrap();
    answer["attestations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["predicateType"].as_str().unwrap().to_owned(),
                a["bundle"].to_string(),
            )
        })
        .collect()
}

/// (name, integrity, registry key SPKI) from npm/registry-signatures.json.
fn npm_version(dir: &std::path::Path, name: &str) -> ([u8; 64], Vec<u8>) {
    let doc: serde_json::Value =
        serde_json::from_str(&read(dir, "npm/registry-signatures.json")).unwrap();
    let key = base64::engine::general_purpose::STANDARD
        .decode(doc["keys"][0]["key"].as_str().unwrap())
        .unwrap();
    let version = doc["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == name)
        .unwrap();
    (
        sha512_of_integrity(version["dist"]["integrity"].as_str().unwrap()),
        key,
    )
}

fn public_good(dir: &std::path::Path) -> TrustedRoot {
    TrustedRoot::from_json(
        &read(dir, "sigstore/public-good-trusted_root.json"),
        "public-good-trusted_root.json",
    )
    .unwrap()
}

#[test]
fn npm_provenance_of_sigstore_and_tuf_js_verifies_with_its_identity() {
    let Some(dir) = fixtures() else { return };
    let root = public_good(&dir);
    for (name, file, repository) in [
        (
            "sigstore",
            "valid-sigstore-attestations.json",
            "sigstore/sigstore-js",
        ),
        (
            "tuf-js",
            "valid-tuf-js-attestations.json",
            "theupdateframework/tuf-js",
        ),
    ] {
        let (sha512, _) = npm_version(&dir, name);
        let (_, bundle) = attestations(&dir, file)
            .into_iter()
            .find(|(t, _)| t.starts_with("https://slsa.dev/provenance/"))
            .unwrap();
        let verified = verify_bundle(
            &bundle,
            &root,
            &Subject::Sha512(sha512),
            Signer::Certificate,
        )
        .unwrap();
        assert_eq!(
            verified.identity.as_deref(),
            Some(
                format!("https://github.com/{repository}/.github/workflows/publish.yml@refs/tags/v1.0.0")
                    .as_str()
            )
        );
        assert_eq!(
            verified.issuer.as_deref(),
            Some("https://token.actions.githubusercontent.com")
        );
        assert_eq!(verified.source_repository.as_deref(), Some(repository));
        assert_eq!(verified.source_ref.as_deref(), Some("refs/tags/v1.0.0"));
        assert!(verified
            .integrated_time
            .unwrap()
            .to_rfc3339()
            .starts_with("2023-02-09T17:"));
        let statement = verified.statement.unwrap();
        assert_eq!(
            statement["subject"][0]["name"],
            format!("pkg:npm/{name}@1.0.0")
        );

        // Broken inputs: another digest, and the envelope's signature with one character changed.
        let mut other = sha512;
        other[0] ^= 1;
        let err = verify_bundle(&bundle, &root, &Subject::Sha512(other), Signer::Certificate)
            .unwrap_err();
        assert!(format!("{err:#}").contains("does not verify"), "{err:#}");
        let mut value: serde_json::Value = serde_json::from_str(&bundle).unwrap();
        let sig = value["dsseEnvelope"]["signatures"][0]["sig"]
            .as_str()
            .unwrap()
            .to_owned();
        let flipped = flip_one_base64_char(&sig);
        value["dsseEnvelope"]["signatures"][0]["sig"] = flipped.into();
        assert!(verify_bundle(
            &value.to_string(),
            &root,
            &Subject::Sha512(sha512),
            Signer::Certificate
        )
        .is_err());
    }
}

fn flip_one_base64_char(text: &str) -> String {
    // A character in the middle, so the DER stays the same length and only its value changes.
    let mut chars: Vec<char> = text.chars().collect();
    let i = chars.len() / 2;
    chars[i] = if chars[i] == 'A' { 'B' } else { 'A' };
    chars.into_iter().collect()
}

#[test]
fn npm_publish_attestation_verifies_with_the_registry_key_only() {
    let Some(dir) = fixtures() else { return };
    let root = public_good(&dir);
    let (sha512, key) = npm_version(&dir, "sigstore");
    let (_, bundle) = attestations(&dir, "valid-sigstore-attestations.json")
        .into_iter()
        .find(|(t, _)| t.contains("npm/attestation"))
        .unwrap();
    let verified = verify_bundle(
        &bundle,
        &root,
        &Subject::Sha512(sha512),
        Signer::PublicKey(&key),
    )
    .unwrap();
    assert!(verified.identity.is_none());
    // The registry's 2025 key (npm's seeds) did not sign it.
    let keys: serde_json::Value =
        serde_json::from_str(&read(&dir, "npm/registry.npmjs.org-keys.json")).unwrap();
    let other = keys["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["keyId"] == "SHA256:DhQ8wR5APBvFHLF/+Tc+AYvPOdTpcIDqOhxsBHRwC7U")
        .unwrap();
    let other = base64::engine::general_purpose::STANDARD
        .decode(other["publicKey"]["rawBytes"].as_str().unwrap())
        .unwrap();
    assert!(verify_bundle(
        &bundle,
        &root,
        &Subject::Sha512(sha512),
        Signer::PublicKey(&other)
    )
    .is_err());
}

#[test]
fn gh_cli_fixtures_a_valid_and_an_invalid_signature() {
    let Some(dir) = fixtures() else { return };
    let root = TrustedRoot::from_json(
        &read(&dir, "sigstore/cli-cli/trusted_root.json"),
        "cli-cli/trusted_root.json",
    )
    .unwrap();
    let sha512: [u8; 64] = hex::decode("90f223f992e4c88dd068cd2a5fc57f9d2b30798343dd6e38f29c240e04ba090ef831f84490847c4e82b9232c78e8a258463b1e55c0f7469f730265008fa6633f").unwrap().try_into().unwrap();
    let good = read(&dir, "sigstore/cli-cli/sigstore-js-2.1.0-bundle.json");
    let verified =
        verify_bundle(&good, &root, &Subject::Sha512(sha512), Signer::Certificate).unwrap();
    assert_eq!(
        verified.statement.unwrap()["subject"][0]["name"],
        "pkg:npm/sigstore@2.1.0"
    );
    let bad = read(
        &dir,
        "sigstore/cli-cli/sigstoreBundle-invalid-signature.json",
    );
    let err =
        verify_bundle(&bad, &root, &Subject::Sha512(sha512), Signer::Certificate).unwrap_err();
    assert!(format!("{err:#}").contains("does not verify"), "{err:#}");
}

#[test]
fn npm_registry_signatures_verify_for_their_own_message_only() {
    let Some(dir) = fixtures() else { return };
    let doc: serde_json::Value =
        serde_json::from_str(&read(&dir, "npm/registry-signatures.json")).unwrap();
    let b64 = |s: &serde_json::Value| {
        base64::engine::general_purpose::STANDARD
            .decode(s.as_str().unwrap())
            .unwrap()
    };
    let key = b64(&doc["keys"][0]["key"]);
    for v in doc["versions"].as_array().unwrap() {
        let sig = b64(&v["dist"]["signatures"][0]["sig"]);
        let (name, integrity) = (
            v["name"].as_str().unwrap(),
            v["dist"]["integrity"].as_str().unwrap(),
        );
        verify_p256_sha256(&key, format!("{name}@1.0.0:{integrity}").as_bytes(), &sig).unwrap();
        assert!(
            verify_p256_sha256(&key, format!("{name}@1.0.1:{integrity}").as_bytes(), &sig).is_err()
        );
    }
}
