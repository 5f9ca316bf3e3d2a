//! The release policy over small hand-made claims and statements: each claim accepted as
//! the release workflow makes it, and refused, naming itself, when it differs.

use super::*;

const HEX: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";
const WORKFLOW_URI: &str =
    "https://github.com/s0/template/.github/workflows/update-template.yml@refs/heads/main";

fn release() -> ReleaseSigner {
    let mut signer = ReleaseSigner::new(
        "s0/template",
        ".github/workflows/update-template.yml",
        "refs/heads/main",
        Some(COMMIT),
    )
    .unwrap();
    signer.repository_id = Some("101".into());
    signer.owner_id = Some("7".into());
    signer
}

fn policy() -> Policy {
    Policy {
        signer: Signer::Release(release()),
        predicate_type: Some(crate::attestation::PROVENANCE.into()),
        subject: ExpectedSubject {
            name: Some("receipt.json".into()),
            digests: vec![("sha256", HEX.into())],
        },
    }
}

/// The claims the release workflow's certificate carries (as Fulcio issues them to a
/// scheduled run of update-template.yml on the default branch).
fn claims() -> CertificateClaims {
    let s = |v: &str| Some(v.to_owned());
    CertificateClaims {
        subject_alternative_name: s(WORKFLOW_URI),
        issuer: s(GITHUB_ACTIONS_ISSUER),
        build_signer_uri: s(WORKFLOW_URI),
        build_signer_digest: s(COMMIT),
        runner_environment: s("github-hosted"),
        source_repository_uri: s("https://github.com/s0/template"),
        source_repository_digest: s(COMMIT),
        source_repository_ref: s("refs/heads/main"),
        source_repository_identifier: s("101"),
        source_repository_owner_uri: s("https://github.com/s0"),
        source_repository_owner_identifier: s("7"),
        build_config_uri: s(WORKFLOW_URI),
        build_config_digest: s(COMMIT),
        build_trigger: s("schedule"),
        run_invocation_uri: s("https://github.com/s0/template/actions/runs/1/attempts/1"),
        source_repository_visibility_at_signing: s("public"),
    }
}

fn statement(predicate: &str, name: &str, hex: &str) -> Vec<u8> {
    serde_json::json!({
        "_type": IN_TOTO_STATEMENT_V1,
        "subject": [{"name": name, "digest": {"sha256": hex}}],
        "predicateType": predicate,
        "predicate": {},
    })
    .to_string()
    .into_bytes()
}

fn good_statement() -> Vec<u8> {
    statement(crate::attestation::PROVENANCE, "receipt.json", HEX)
}

/// The claims refused, by name.
fn refused(policy: &Policy, c: &CertificateClaims, statement: Option<&[u8]>) -> Vec<String> {
    judge(policy, c, statement)
        .0
        .into_iter()
        .map(|r| r.claim)
        .collect()
}

#[test]
fn the_release_workflow_s_own_attestation_is_accepted() {
    let (refusals, summary) = judge(&policy(), &claims(), Some(&good_statement()));
    assert_eq!(refusals, vec![]);
    assert_eq!(summary.subject_names, ["receipt.json"]);
    assert_eq!(
        summary.predicate_type.as_deref(),
        Some(crate::attestation::PROVENANCE)
    );
}

#[test]
fn each_certificate_claim_that_differs_is_refused_by_name_with_both_values() {
    let good = good_statement();
    type Edit = Box<dyn Fn(&mut CertificateClaims)>;
    let cases: Vec<(&str, Edit)> = vec![
        (
            "certificate OIDC issuer",
            Box::new(|c| {
                c.issuer = Some("https://token.actions.githubusercontent.com/hammer-time".into())
            }),
        ),
        (
            "runner environment (1.3.6.1.4.1.57264.1.11)",
            Box::new(|c| c.runner_environment = Some("self-hosted".into())),
        ),
        (
            "source repository digest (1.3.6.1.4.1.57264.1.13)",
            Box::new(|c| c.source_repository_digest = Some("f".repeat(40))),
        ),
        (
            "source repository identifier (1.3.6.1.4.1.57264.1.15)",
            Box::new(|c| c.source_repository_identifier = Some("102".into())),
        ),
        (
            "source repository owner identifier (1.3.6.1.4.1.57264.1.17)",
            Box::new(|c| c.source_repository_owner_identifier = None),
        ),
        (
            "source repository URI (1.3.6.1.4.1.57264.1.12)",
            // GitHub's URLs ignore case; the policy does not.
            Box::new(|c| c.source_repository_uri = Some("https://github.com/S0/template".into())),
        ),
    ];
    for (claim, edit) in cases {
        let mut c = claims();
        edit(&mut c);
        let (refusals, _) = judge(&policy(), &c, Some(&good));
        assert_eq!(
            refusals
                .iter()
                .map(|r| r.claim.as_str())
                .collect::<Vec<_>>(),
            [claim],
            "{refusals:?}"
        );
        let text = refusals[0].to_string();
        assert!(
            text.contains("expected `") && text.contains("found "),
            "{text}"
        );
    }
}

#[test]
fn another_branch_is_refused_in_the_san_signer_and_ref_byte_exact() {
    let mut c = claims();
    let other = WORKFLOW_URI.replace("refs/heads/main", "refs/heads/Main");
    c.subject_alternative_name = Some(other.clone());
    c.build_signer_uri = Some(other.clone());
    c.build_config_uri = Some(other);
    c.source_repository_ref = Some("refs/heads/Main".into());
    let (refusals, _) = judge(&policy(), &c, Some(&good_statement()));
    assert_eq!(
        refusals
            .iter()
            .map(|r| r.claim.as_str())
            .collect::<Vec<_>>(),
        [
            "certificate subject alternative name",
            "build signer URI (1.3.6.1.4.1.57264.1.9)",
            "build config URI (1.3.6.1.4.1.57264.1.18)",
            "source repository ref (1.3.6.1.4.1.57264.1.14)",
        ]
    );
    assert_eq!(refusals[3].expected, "`refs/heads/main`");
    assert_eq!(refusals[3].found, "`refs/heads/Main`");
}

#[test]
fn a_reusable_workflow_s_caller_is_refused_by_its_build_config() {
    // Another workflow calling update-template.yml: Fulcio's SAN and build signer are the
    // called workflow, the build config is the caller.
    let mut c = claims();
    c.build_config_uri =
        Some("https://github.com/s0/template/.github/workflows/caller.yml@refs/heads/main".into());
    assert_eq!(
        refused(&policy(), &c, Some(&good_statement())),
        ["build config URI (1.3.6.1.4.1.57264.1.18)"]
    );
}

#[test]
fn the_statement_s_type_predicate_digest_and_name_are_each_judged() {
    let c = claims();
    let provenance = crate::attestation::PROVENANCE;
    assert_eq!(
        refused(
            &policy(),
            &c,
            Some(&statement(
                crate::attestation::SPDX_SBOM,
                "receipt.json",
                HEX
            ))
        ),
        ["statement predicateType"]
    );
    let other_digest = "b".repeat(64);
    assert_eq!(
        refused(
            &policy(),
            &c,
            Some(&statement(provenance, "receipt.json", &other_digest))
        ),
        ["statement subject digest"]
    );
    assert_eq!(
        refused(
            &policy(),
            &c,
            Some(&statement(provenance, "other.json", HEX))
        ),
        ["statement subject name"]
    );
    let v02 = String::from_utf8(good_statement())
        .unwrap()
        .replace(IN_TOTO_STATEMENT_V1, "https://in-toto.io/Statement/v0.1");
    assert_eq!(
        refused(&policy(), &c, Some(v02.as_bytes())),
        ["statement _type"]
    );
    // A repeated key could show sigstore-verify one predicate and this policy another.
    let twice = String::from_utf8(good_statement()).unwrap().replacen(
        "\"predicateType\"",
        "\"predicateType\":\"x\",\"predicateType\"",
        1,
    );
    let (refusals, _) = judge(&policy(), &c, Some(twice.as_bytes()));
    assert_eq!(refusals.len(), 1, "{refusals:?}");
    assert!(refusals[0].found.contains("duplicate key"), "{refusals:?}");
    // A file's sha512 names it as well as its sha256 (npm's provenance names a tarball so).
    let mut both = policy();
    both.subject.digests = vec![("sha256", "c".repeat(64)), ("sha512", "d".repeat(128))];
    let sha512_only = String::from_utf8(good_statement()).unwrap().replace(
        &format!("\"sha256\":\"{HEX}\""),
        &format!("\"sha512\":\"{}\"", "d".repeat(128)),
    );
    assert_eq!(
        refused(&both, &c, Some(sha512_only.as_bytes())),
        Vec::<String>::new()
    );
    both.subject.digests.pop();
    assert_eq!(
        refused(&both, &c, Some(sha512_only.as_bytes())),
        ["statement subject digest"]
    );
    // A release attestation is a statement; a bare message signature is refused.
    assert_eq!(refused(&policy(), &c, None), ["statement"]);
}

#[test]
fn an_identity_signer_checks_the_san_and_issuer_exactly_and_a_statement_only_when_asked() {
    let mut p = policy();
    p.signer = Signer::Identity {
        identity: WORKFLOW_URI.into(),
        issuer: GITHUB_ACTIONS_ISSUER.into(),
    };
    p.predicate_type = None;
    p.subject.name = None;
    let mut c = claims();
    c.runner_environment = Some("self-hosted".into());
    assert_eq!(refused(&p, &c, None), Vec::<String>::new());
    c.subject_alternative_name = Some(format!("{WORKFLOW_URI}x"));
    assert_eq!(
        refused(&p, &c, None),
        ["certificate subject alternative name"]
    );
    p.predicate_type = Some(crate::attestation::PROVENANCE.into());
    assert_eq!(
        refused(&p, &claims(), None),
        ["statement"],
        "a predicate type asked for needs a statement"
    );
}

#[test]
fn argument_forms_are_checked_before_anything_is_judged() {
    let ok = ".github/workflows/update-template.yml";
    assert!(ReleaseSigner::new("s0/template", ok, "refs/heads/main", None).is_ok());
    for (repository, workflow, git_ref, commit) in [
        ("s0", ok, "refs/heads/main", None),
        ("s0/template/x", ok, "refs/heads/main", None),
        (
            "s0/template",
            "update-template.yml",
            "refs/heads/main",
            None,
        ),
        (
            "s0/template",
            ".github/workflows/a/b.yml",
            "refs/heads/main",
            None,
        ),
        ("s0/template", ok, "main", None),
        ("s0/template", ok, "refs/heads/main", Some("abc")),
    ] {
        let err = ReleaseSigner::new(repository, workflow, git_ref, commit).unwrap_err();
        assert!(err.starts_with("--"), "{err}");
    }
    assert_eq!(
        release().workflow_uri(),
        WORKFLOW_URI,
        "the SAN GitHub's Fulcio issues for this workflow at this ref"
    );
}
