//! `attestation verify` against real signed material no one here wrote:
//! `../shared/fixtures/sigstore/` beside the checkout (SOURCE.md there says what each file is):
//! Sigstore's client conformance cases, cli/cli's GitHub attestation fixtures, and the release
//! policy's negatives on genuine bundles. Each test skips, saying why, only where that
//! directory is absent.

use std::path::{Path, PathBuf};

use super::*;
use crate::sigstore::tests::fixtures;

const GITHUB_ISSUER: &str = "https://token.actions.githubusercontent.com";
/// The conformance suite's default signer (its bundle-verify README).
const BEACON: &str = "https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/.github/workflows/extremely-dangerous-oidc-beacon.yml@refs/heads/main";
/// cli/cli's packaged artifacts, by the digests their bundles sign (SOURCE.md).
const REUSABLE_WORKFLOW_ARTIFACT: &str =
    "sha256:49a3aa6075e0f49f82843e74b5baa614ad2a588e6675612bf108a0a008c5ac25";
const PROVENANCE_DEMO_WHEEL: &str =
    "sha256:ae57936def59bc4c75edd3a837d89bcefc6d3a5e31d55a6fa7a71624f92c3c3b";
const SIGSTORE_JS_TARBALL: &str = "sha512:90f223f992e4c88dd068cd2a5fc57f9d2b30798343dd6e38f29c240e04ba090ef831f84490847c4e82b9232c78e8a258463b1e55c0f7469f730265008fa6633f";

fn identity_request(
    artifact: &str,
    bundle: PathBuf,
    root: PathBuf,
    identity: &str,
    issuer: &str,
) -> VerifyAttestationRequest {
    VerifyAttestationRequest {
        artifact: artifact.into(),
        bundle,
        trusted_root: root,
        signer: RequestedSigner::Identity {
            identity: identity.into(),
            issuer: issuer.into(),
        },
        subject_name: None,
        predicate_type: None,
        json: false,
    }
}

fn release_request(
    artifact: &str,
    bundle: PathBuf,
    root: PathBuf,
    repository: &str,
    workflow: &str,
) -> VerifyAttestationRequest {
    VerifyAttestationRequest {
        artifact: artifact.into(),
        bundle,
        trusted_root: root,
        signer: RequestedSigner::Release {
            repository: repository.into(),
            workflow: workflow.into(),
            source_ref: "refs/heads/main".into(),
            source_commit: None,
            repository_id: None,
            owner_id: None,
        },
        subject_name: None,
        predicate_type: None,
        json: false,
    }
}

/// Why a request was refused: the error, or each bundle's error and refusals. Empty when
/// accepted.
fn refusal(request: &VerifyAttestationRequest) -> String {
    match verify_request(request) {
        Err(e) => format!("{e:#}"),
        Ok(report) if report.accepted => String::new(),
        Ok(report) => render_refused(&report),
    }
}

/// The claims refused in the report's first bundle (the bundle verified).
fn refused_claims(request: &VerifyAttestationRequest) -> Vec<String> {
    let report = verify_request(request).unwrap();
    let first = &report.bundles[0];
    assert!(first.verified, "{:?}", first.error);
    first.refusals.iter().map(|r| r.claim.clone()).collect()
}

#[test]
fn every_certificate_based_conformance_case_is_judged_as_labelled() {
    let Some(dir) = fixtures() else { return };
    let cases = dir.join("sigstore/conformance/bundle-verify");
    let public_good = dir.join("sigstore/public-good-trusted_root.json");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&cases)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    let (mut accepted, mut refused, mut managed_key, mut wrong) = (0, 0, 0, Vec::new());
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        // Verified with a key the case gives, not a certificate: not this command's.
        if case.join("key.pub").exists() {
            managed_key += 1;
            continue;
        }
        let read = |file: &str, default: &str| {
            std::fs::read_to_string(case.join(file))
                .map(|s| s.trim().to_owned())
                .unwrap_or_else(|_| default.to_owned())
        };
        let artifact = if case.join("artifact").exists() {
            case.join("artifact")
        } else {
            case.parent().unwrap().join("a.txt")
        };
        let root = if case.join("trusted_root.json").exists() {
            case.join("trusted_root.json")
        } else {
            public_good.clone()
        };
        let request = identity_request(
            artifact.to_str().unwrap(),
            case.join("bundle.sigstore.json"),
            root,
            &read("identity", BEACON),
            &read("issuer", GITHUB_ISSUER),
        );
        let why = refusal(&request);
        let should_fail = name.ends_with("_fail");
        match (should_fail, why.is_empty()) {
            (true, false) => refused += 1,
            (false, true) => accepted += 1,
            (true, true) => wrong.push(format!("{name}: accepted")),
            (false, false) => wrong.push(format!("{name}: refused: {why}")),
        }
    }
    eprintln!(
        "conformance: {accepted} accepted, {refused} `_fail` cases refused, {managed_key} \
         managed-key cases left to a key verifier"
    );
    assert!(wrong.is_empty(), "{wrong:#?}");
    // Sigstore's conformance suite at the commit SOURCE.md names: 19 to accept, 48 to refuse.
    assert_eq!(accepted + refused + managed_key, cases.len());
    assert!(
        accepted >= 19 && refused >= 48,
        "{accepted} accepted, {refused} refused"
    );
}

#[test]
fn gh_s_public_good_fixtures_accept_their_identity_and_refuse_a_broken_one() {
    let Some(dir) = fixtures() else { return };
    let cli = dir.join("sigstore/cli-cli");
    let root = cli.join("trusted_root.json");
    // actions/attest through a reusable workflow: the SAN is the called workflow.
    let called = "https://github.com/github/artifact-attestations-workflows/.github/workflows/attest.yml@09b495c3f12c7881b3cc17209a327792065c1a1d";
    let mut request = identity_request(
        REUSABLE_WORKFLOW_ARTIFACT,
        cli.join("reusable-workflow-attestation.sigstore.json"),
        root.clone(),
        called,
        GITHUB_ISSUER,
    );
    request.predicate_type = Some(crate::attestation::PROVENANCE.into());
    assert_eq!(refusal(&request), "");
    // The release policy refuses the indirection: the build config is the caller.
    let mut release = release_request(
        REUSABLE_WORKFLOW_ARTIFACT,
        cli.join("reusable-workflow-attestation.sigstore.json"),
        root.clone(),
        "malancas/attest-demo",
        ".github/workflows/shared.yml",
    );
    release.subject_name = Some("github_provenance_demo-0.0.0-py3-none-any.whl".into());
    assert_eq!(
        refused_claims(&release),
        [
            "certificate subject alternative name",
            "build signer URI (1.3.6.1.4.1.57264.1.9)",
        ],
        "the caller's build config matches; the signer is another repository's workflow"
    );

    // A custom issuer: valid, and refused by the issuer it names.
    let custom = identity_request(
        cli.join("custom-issuer-artifact").to_str().unwrap(),
        cli.join("custom-issuer.sigstore.json"),
        root.clone(),
        "https://github.com/too-legit/attest/.github/workflows/integration.yml@refs/heads/main",
        GITHUB_ISSUER,
    );
    assert_eq!(refused_claims(&custom), ["certificate OIDC issuer"]);
    let why = refusal(&custom);
    assert!(
        why.contains(&format!("expected `{GITHUB_ISSUER}`"))
            && why.contains("found `https://token.actions.githubusercontent.com/hammer-time`"),
        "{why}"
    );
    let custom_release = release_request(
        cli.join("custom-issuer-artifact").to_str().unwrap(),
        cli.join("custom-issuer.sigstore.json"),
        root.clone(),
        "too-legit/attest",
        ".github/workflows/integration.yml",
    );
    let mut custom_release = custom_release;
    custom_release.subject_name = Some("artifact".into());
    assert_eq!(refused_claims(&custom_release), ["certificate OIDC issuer"]);

    // npm provenance of sigstore-js 2.1.0 (a sha512 subject): bundle v0.3, v0.1, and JSON
    // lines of two; the invalid signature is refused by the cryptography.
    let npm =
        "https://github.com/sigstore/sigstore-js/.github/workflows/release.yml@refs/heads/main";
    for file in [
        "sigstore-js-2.1.0-bundle.json",
        "sigstore-js-2.1.0-bundle-v0.1.json",
        "sigstore-js-2.1.0_with_2_bundles.jsonl",
    ] {
        let r = identity_request(
            SIGSTORE_JS_TARBALL,
            cli.join(file),
            root.clone(),
            npm,
            GITHUB_ISSUER,
        );
        assert_eq!(refusal(&r), "", "{file}");
    }
    let invalid = identity_request(
        SIGSTORE_JS_TARBALL,
        cli.join("sigstoreBundle-invalid-signature.json"),
        root,
        npm,
        GITHUB_ISSUER,
    );
    let report = verify_request(&invalid).unwrap();
    assert!(!report.accepted);
    let error = report.bundles[0].error.clone().unwrap();
    assert!(error.contains("does not verify"), "{error}");
}

/// The release policy on genuine bundles that satisfy it: the public-good conformance DSSE
/// case (a workflow of its own repository at refs/heads/main) and GitHub's own instance's
/// (actions/attest-demo, RFC 3161 timestamp, no log). Then each negative, named.
#[test]
fn the_release_policy_accepts_genuine_bundles_and_names_each_claim_that_differs() {
    let Some(dir) = fixtures() else { return };
    let sigstore = dir.join("sigstore");
    let conformance = sigstore.join("conformance/bundle-verify");
    let public_good = sigstore.join("public-good-trusted_root.json");
    let github_root = sigstore.join("github-trusted_root.json");
    let beacon = || {
        let mut r = release_request(
            conformance.join("a.txt").to_str().unwrap(),
            conformance.join("happy-path-intoto-in-dsse-v3/bundle.sigstore.json"),
            public_good.clone(),
            "sigstore-conformance/extremely-dangerous-public-oidc-beacon",
            ".github/workflows/extremely-dangerous-oidc-beacon.yml",
        );
        if let RequestedSigner::Release {
            source_commit,
            repository_id,
            owner_id,
            ..
        } = &mut r.signer
        {
            *source_commit = Some("82a3bfe6dd50fe9c71d6315eae66da15307856cf".into());
            *repository_id = Some("632596897".into());
            *owner_id = Some("131804563".into());
        }
        r
    };
    let demo = || {
        let mut r = release_request(
            PROVENANCE_DEMO_WHEEL,
            sigstore.join("cli-cli/github_provenance_demo-0.0.12-py3-none-any-bundle.jsonl"),
            github_root.clone(),
            "actions/attest-demo",
            ".github/workflows/build-python.yml",
        );
        r.subject_name = Some("github_provenance_demo-0.0.12-py3-none-any.whl".into());
        r
    };
    let accepted = verify_request(&beacon()).unwrap();
    assert!(accepted.accepted, "{}", render_refused(&accepted));
    let evidence = accepted.bundles[0].evidence.clone().unwrap();
    assert!(evidence.sct_verified && evidence.transparency_log.is_some());
    let accepted = verify_request(&demo()).unwrap();
    assert!(accepted.accepted, "{}", render_refused(&accepted));
    let v = &accepted.bundles[0];
    let instance = v.instance.clone().unwrap();
    assert_eq!(instance.certificate_authority, "fulcio.githubapp.com");
    let evidence = v.evidence.clone().unwrap();
    assert!(evidence.transparency_log.is_none() && !evidence.sct_verified);
    assert_eq!(evidence.verified_times.len(), 1, "the TSA's timestamp");

    let with = |make: &dyn Fn() -> VerifyAttestationRequest,
                edit: &dyn Fn(&mut VerifyAttestationRequest)| {
        let mut r = make();
        edit(&mut r);
        r
    };
    let set_release = |r: &mut VerifyAttestationRequest, field: &str, value: &str| {
        if let RequestedSigner::Release {
            repository,
            workflow,
            source_ref,
            source_commit,
            repository_id,
            ..
        } = &mut r.signer
        {
            let value = value.to_owned();
            match field {
                "repository" => *repository = value,
                "workflow" => *workflow = value,
                "source_ref" => *source_ref = value,
                "source_commit" => *source_commit = Some(value),
                "repository_id" => *repository_id = Some(value),
                _ => unreachable!(),
            }
        }
    };
    const SAN: &str = "certificate subject alternative name";
    const SIGNER: &str = "build signer URI (1.3.6.1.4.1.57264.1.9)";
    const CONFIG: &str = "build config URI (1.3.6.1.4.1.57264.1.18)";
    for make in [&beacon as &dyn Fn() -> VerifyAttestationRequest, &demo] {
        let branch = with(make, &|r| {
            set_release(r, "source_ref", "refs/heads/release")
        });
        assert_eq!(
            refused_claims(&branch),
            [
                SAN,
                SIGNER,
                CONFIG,
                "source repository ref (1.3.6.1.4.1.57264.1.14)"
            ]
        );
        let workflow = with(make, &|r| {
            set_release(r, "workflow", ".github/workflows/update-template.yml")
        });
        assert_eq!(refused_claims(&workflow), [SAN, SIGNER, CONFIG]);
        let repository = with(make, &|r| set_release(r, "repository", "attacker/fork"));
        assert_eq!(
            refused_claims(&repository),
            [
                SAN,
                SIGNER,
                CONFIG,
                "source repository URI (1.3.6.1.4.1.57264.1.12)"
            ]
        );
        let commit = with(make, &|r| set_release(r, "source_commit", &"0".repeat(40)));
        assert_eq!(
            refused_claims(&commit),
            ["source repository digest (1.3.6.1.4.1.57264.1.13)"]
        );
        let id = with(make, &|r| set_release(r, "repository_id", "1"));
        assert_eq!(
            refused_claims(&id),
            ["source repository identifier (1.3.6.1.4.1.57264.1.15)"]
        );
        let sbom = with(make, &|r| {
            r.predicate_type = Some(crate::attestation::SPDX_SBOM.into())
        });
        assert_eq!(refused_claims(&sbom), ["statement predicateType"]);
        let name = with(make, &|r| r.subject_name = Some("receipt.json".into()));
        assert_eq!(refused_claims(&name), ["statement subject name"]);
        // Another artifact: the cryptography's subject binding refuses it.
        let other = with(make, &|r| {
            r.artifact = format!("sha256:{}", "1".repeat(64));
            r.subject_name.get_or_insert("a.txt".into());
        });
        let why = refusal(&other);
        assert!(why.contains("does not match any subject"), "{why}");
    }
    // The GitHub instance's bundle under the public-good root alone: no root accepts it.
    let wrong_root = with(&demo, &|r| r.trusted_root = public_good.clone());
    let why = refusal(&wrong_root);
    assert!(why.contains("does not verify"), "{why}");
    // Its malformed variants.
    for broken in ["missing-cert", "missing-verification-material"] {
        let r = with(&demo, &|r| {
            r.bundle = sigstore.join(format!(
                "cli-cli/github_provenance_demo-0.0.12-py3-none-any-bundle-{broken}.jsonl"
            ))
        });
        assert!(!refusal(&r).is_empty(), "{broken}");
    }
}

#[test]
fn an_edited_statement_is_refused_by_the_signature() {
    let Some(dir) = fixtures() else { return };
    use base64::Engine as _;
    let sigstore = dir.join("sigstore");
    let conformance = sigstore.join("conformance/bundle-verify");
    let path = conformance.join("happy-path-intoto-in-dsse-v3/bundle.sigstore.json");
    let mut bundle: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD;
    let payload = b64
        .decode(bundle["dsseEnvelope"]["payload"].as_str().unwrap())
        .unwrap();
    let edited = String::from_utf8(payload)
        .unwrap()
        .replace("refs/heads/main", "refs/heads/mainx");
    bundle["dsseEnvelope"]["payload"] = b64.encode(edited).into();
    let tmp = tempfile::tempdir().unwrap();
    let edited_path = tmp.path().join("edited.sigstore.json");
    std::fs::write(&edited_path, bundle.to_string()).unwrap();
    let request = identity_request(
        conformance.join("a.txt").to_str().unwrap(),
        edited_path,
        sigstore.join("public-good-trusted_root.json"),
        BEACON,
        GITHUB_ISSUER,
    );
    let why = refusal(&request);
    assert!(why.contains("does not verify"), "{why}");
    // The unedited bundle passes the same request.
    let mut original = request.clone();
    original.bundle = path;
    assert_eq!(refusal(&original), "");
}

/// `gh attestation trusted-root` prints one root per line (public-good, then GitHub's): each
/// bundle verifies under its own instance's root, which the report names.
#[test]
fn json_lines_of_trusted_roots_verify_each_instance_under_its_own_root() {
    let Some(dir) = fixtures() else { return };
    let sigstore = dir.join("sigstore");
    let line = |p: &Path| {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
        v.to_string()
    };
    let tmp = tempfile::tempdir().unwrap();
    let roots = tmp.path().join("trusted-roots.jsonl");
    std::fs::write(
        &roots,
        format!(
            "{}\n{}\n",
            line(&sigstore.join("public-good-trusted_root.json")),
            line(&sigstore.join("github-trusted_root.json"))
        ),
    )
    .unwrap();
    let conformance = sigstore.join("conformance/bundle-verify");
    let public = identity_request(
        conformance.join("a.txt").to_str().unwrap(),
        conformance.join("happy-path-intoto-in-dsse-v3/bundle.sigstore.json"),
        roots.clone(),
        BEACON,
        GITHUB_ISSUER,
    );
    let github = identity_request(
        PROVENANCE_DEMO_WHEEL,
        sigstore.join("cli-cli/github_provenance_demo-0.0.12-py3-none-any-bundle.jsonl"),
        roots,
        "https://github.com/actions/attest-demo/.github/workflows/build-python.yml@refs/heads/main",
        GITHUB_ISSUER,
    );
    for (request, root, requires_log) in [(public, "root 1", true), (github, "root 2", false)] {
        let report = verify_request(&request).unwrap();
        assert!(report.accepted, "{}", render_refused(&report));
        let instance = report.bundles[0].instance.clone().unwrap();
        assert!(instance.root.ends_with(root), "{instance:?}");
        assert_eq!(instance.requires_transparency_log, requires_log);
        assert_eq!(instance.root_sha256.len(), 64);
    }
}

/// Every field of a genuine bundle that a check covers, changed in one character at eight
/// places each: the signature, the payload, the certificate, the log entry's body, time, index
/// and id, the signed entry timestamp, the inclusion proof and its signed checkpoint. Each
/// change is refused (and none panics): no part of the bundle is taken on trust.
#[test]
fn a_one_character_change_anywhere_a_check_covers_is_refused() {
    let Some(dir) = fixtures() else { return };
    let sigstore = dir.join("sigstore");
    let conformance = sigstore.join("conformance/bundle-verify");
    let original: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            conformance.join("happy-path-intoto-in-dsse-v3/bundle.sigstore.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let entry = "/verificationMaterial/tlogEntries/0";
    let mut fields: Vec<String> = [
        "/dsseEnvelope/signatures/0/sig",
        "/dsseEnvelope/payload",
        "/dsseEnvelope/payloadType",
        "/verificationMaterial/certificate/rawBytes",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for field in [
        "/logIndex",
        "/logId/keyId",
        "/kindVersion/kind",
        "/kindVersion/version",
        "/integratedTime",
        "/inclusionPromise/signedEntryTimestamp",
        "/inclusionProof/logIndex",
        "/inclusionProof/rootHash",
        "/inclusionProof/treeSize",
        "/inclusionProof/hashes/0",
        "/inclusionProof/hashes/10",
        "/inclusionProof/checkpoint/envelope",
        "/canonicalizedBody",
    ] {
        fields.push(format!("{entry}{field}"));
    }
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("changed.sigstore.json");
    let mut request = identity_request(
        conformance.join("a.txt").to_str().unwrap(),
        path.clone(),
        sigstore.join("public-good-trusted_root.json"),
        BEACON,
        GITHUB_ISSUER,
    );
    request.predicate_type = Some(crate::attestation::PROVENANCE.into());
    let (mut tried, mut accepted) = (0, Vec::new());
    for field in &fields {
        let text = original
            .pointer(field)
            .unwrap()
            .as_str()
            .unwrap()
            .to_owned();
        let chars: Vec<char> = text.chars().collect();
        // In a signed note (the checkpoint), the name on a signature line (`— <name> <key
        // hash and signature>`) is not signed: sigstore-verify finds the signature by the
        // key hash, so another name there changes nothing that is verified. Left out.
        let unsigned_name = chars
            .iter()
            .position(|&c| c == '—')
            .filter(|_| field.ends_with("/checkpoint/envelope"))
            .map(|dash| {
                let end = (dash + 2..chars.len())
                    .find(|&i| chars[i] == ' ')
                    .unwrap_or(chars.len());
                dash + 2..end
            })
            .unwrap_or(0..0);
        for k in 1..=8 {
            // The first letter or digit at or after the k-ninth of the value, changed to the
            // next of its kind.
            let Some(i) =
                (chars.len() * k / 9..chars.len()).find(|&i| chars[i].is_ascii_alphanumeric())
            else {
                continue;
            };
            if unsigned_name.contains(&i) {
                continue;
            }
            let mut changed = chars.clone();
            changed[i] = match changed[i] {
                '9' => '0',
                'z' => 'a',
                'Z' => 'A',
                c => (c as u8 + 1) as char,
            };
            let mut bundle = original.clone();
            *bundle.pointer_mut(field).unwrap() = changed.iter().collect::<String>().into();
            std::fs::write(&path, bundle.to_string()).unwrap();
            tried += 1;
            if refusal(&request).is_empty() {
                accepted.push(format!("{field} at {i}"));
            }
        }
    }
    eprintln!(
        "{tried} one-character changes over {} fields, {} accepted",
        fields.len(),
        accepted.len()
    );
    assert!(accepted.is_empty(), "accepted: {accepted:#?}");
    assert!(tried >= 100, "{tried}");
    // The same request on the unchanged bundle passes.
    std::fs::write(&path, original.to_string()).unwrap();
    assert_eq!(refusal(&request), "");
}

/// Every bundle the fixtures hold, one per seed (a JSON lines file gives each of its bundles).
fn bundle_seeds(dir: &Path) -> Vec<Vec<u8>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("sigstore/cli-cli"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json" || e == "jsonl"))
        .filter(|p| !p.ends_with("trusted_root.json"))
        .collect();
    for case in std::fs::read_dir(dir.join("sigstore/conformance/bundle-verify")).unwrap() {
        let bundle = case.unwrap().path().join("bundle.sigstore.json");
        if bundle.is_file() {
            files.push(bundle);
        }
    }
    files.sort();
    files
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            // A case that is not JSON (conformance has some) is a seed as it is.
            serde_json::Deserializer::from_str(&text)
                .into_iter::<serde_json::Value>()
                .map(|v| v.map(|v| v.to_string().into_bytes()))
                .collect::<Result<Vec<_>, _>>()
                .unwrap_or_else(|_| vec![text.into_bytes()])
        })
        .collect()
}

/// Fuzz target: a bundle file, as `attestation verify` and a release's bundle assets meet it:
/// split into bundles, each verified under both instances' roots and judged by the release
/// policy of GitHub's provenance demo (the seed the policy accepts).
#[test]
fn fuzz_bundles() {
    let Some(dir) = fixtures() else { return };
    let roots_text = format!(
        "{}\n{}",
        read_compact(&dir.join("sigstore/public-good-trusted_root.json")),
        read_compact(&dir.join("sigstore/github-trusted_root.json"))
    );
    let roots = TrustedRoots::from_text(&roots_text, "the fixtures' roots").unwrap();
    let mut request = release_request(
        PROVENANCE_DEMO_WHEEL,
        "fuzz.sigstore.json".into(),
        "roots.jsonl".into(),
        "actions/attest-demo",
        ".github/workflows/build-python.yml",
    );
    request.subject_name = Some("github_provenance_demo-0.0.12-py3-none-any.whl".into());
    let artifact = read_artifact(PROVENANCE_DEMO_WHEEL).unwrap();
    let policy = policy_of(&request, &artifact).unwrap();
    let seeds = bundle_seeds(&dir);
    assert!(seeds.len() >= 20, "{} bundles", seeds.len());
    // How deep the inputs went: a target whose inputs all stop at the JSON reader tests
    // nothing behind it.
    let (parsed, accepted) = (std::cell::Cell::new(0), std::cell::Cell::new(0));
    // The verifier's most exposed parser gets five times the inputs of the others.
    let count = crate::fuzz::inputs() * 5;
    let outcome = crate::fuzz::campaign("bundles", &seeds, count, |bytes| {
        let text = String::from_utf8_lossy(bytes);
        if let Ok(bundles) = bundles_of(&text, Path::new("fuzz.sigstore.json")) {
            let report = verify_all(&request, &artifact, &policy, &roots, &bundles);
            let read = |b: &BundleVerdict| {
                b.verified
                    || !b
                        .error
                        .as_deref()
                        .unwrap_or("")
                        .starts_with("not a Sigstore bundle")
            };
            parsed.set(parsed.get() + report.bundles.iter().filter(|b| read(b)).count());
            accepted.set(accepted.get() + usize::from(report.accepted));
            for bundle in &bundles {
                if let Ok(value) = serde_json::from_str(bundle) {
                    let _ = crate::attestation::release_bundles::named_sha256s(&value);
                }
            }
        }
    });
    crate::fuzz::assert_clean(&outcome);
    eprintln!(
        "fuzz target bundles: {} bundles read past the parser, {} inputs accepted by the policy",
        parsed.get(),
        accepted.get()
    );
    // About one in seven gets past sigstore's typed reader (measured: 300 of 2,080); far
    // fewer would mean the mutations no longer fit the bundle's shape.
    assert!(
        parsed.get() > outcome.tried / 10,
        "{} of {}",
        parsed.get(),
        outcome.tried
    );
    assert!(
        accepted.get() >= 1,
        "not even the genuine seed was accepted"
    );
}

/// Fuzz target: a trusted root file (one root, or JSON lines of them), then a genuine bundle
/// of each instance verified under what it gave.
#[test]
fn fuzz_trusted_roots() {
    let Some(dir) = fixtures() else { return };
    let seeds: Vec<Vec<u8>> = [
        "sigstore/public-good-trusted_root.json",
        "sigstore/github-trusted_root.json",
        "sigstore/cli-cli/trusted_root.json",
    ]
    .iter()
    .map(|f| std::fs::read(dir.join(f)).unwrap())
    .collect();
    let public_good = std::fs::read_to_string(
        dir.join("sigstore/cli-cli/reusable-workflow-attestation.sigstore.json"),
    )
    .unwrap();
    let github = std::fs::read_to_string(
        dir.join("sigstore/cli-cli/github_provenance_demo-0.0.12-py3-none-any-bundle.jsonl"),
    )
    .unwrap();
    let reusable = read_artifact(REUSABLE_WORKFLOW_ARTIFACT).unwrap();
    let wheel = read_artifact(PROVENANCE_DEMO_WHEEL).unwrap();
    let outcome = crate::fuzz::campaign("trusted roots", &seeds, crate::fuzz::inputs(), |bytes| {
        if let Ok(roots) = TrustedRoots::from_text(&String::from_utf8_lossy(bytes), "fuzz") {
            let _ = verify_keyless(&public_good, &roots, reusable.input());
            let _ = verify_keyless(github.trim(), &roots, wheel.input());
        }
    });
    crate::fuzz::assert_clean(&outcome);
}

/// A JSON file on one line (JSON lines hold one document a line).
fn read_compact(path: &Path) -> String {
    serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(path).unwrap())
        .unwrap()
        .to_string()
}
