//! The policy a verified attestation is judged by: a pure function over the verified
//! certificate's claims (`sigstore::keyless::CertificateClaims`) and the in-toto statement the
//! bundle signed. Each refusal names the claim that differs, what was expected and what was
//! found; every claim is checked, so one run lists every difference.
//!
//! The release policy is stricter than `gh attestation verify --signer-workflow ...
//! --source-ref ... --deny-self-hosted-runners`: gh matches the signer workflow as a pattern
//! that accepts any ref and compares the source ref case-insensitively (cli/cli
//! `pkg/cmd/attestation/verification/policy.go`, `extensions.go`); here every claim is
//! compared byte for byte, and the build configuration must be the signer workflow itself, so
//! a workflow of another repository calling the release workflow as a reusable one (whose
//! build signer is the release workflow but whose build config is the caller) is refused.

use serde::Serialize;

use crate::sigstore::keyless::CertificateClaims;

/// The OIDC issuer of GitHub Actions' tokens (Fulcio's `config/identity/config.yaml`), on
/// both the public-good instance and GitHub's own.
pub const GITHUB_ACTIONS_ISSUER: &str = "https://token.actions.githubusercontent.com";
/// The in-toto statement type actions/attest signs.
pub const IN_TOTO_STATEMENT_V1: &str = "https://in-toto.io/Statement/v1";

/// Who must have signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signer {
    /// Exactly this subject alternative name and OIDC issuer, nothing else of the certificate
    /// (`cosign verify-blob --certificate-identity --certificate-oidc-issuer`).
    Identity { identity: String, issuer: String },
    /// A release workflow of a GitHub repository, at one ref, on a GitHub-hosted runner.
    Release(ReleaseSigner),
}

/// The release workflow that must have signed, as the consumer expects it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseSigner {
    /// `owner/repository`, byte-exact.
    pub repository: String,
    /// `.github/workflows/<file>`.
    pub workflow: String,
    /// `refs/heads/<branch>` (or any `refs/...`), byte-exact.
    pub source_ref: String,
    /// The commit built, when the caller knows it (the receipt's `source_commit`).
    pub source_commit: Option<String>,
    /// The repository's numeric id, when the caller knows it (GitHub's API).
    pub repository_id: Option<String>,
    /// The owner's numeric id, when the caller knows it.
    pub owner_id: Option<String>,
}

impl ReleaseSigner {
    /// Checks the forms, so a typo is an error about the argument, not a refusal of the
    /// attestation.
    pub fn new(
        repository: &str,
        workflow: &str,
        source_ref: &str,
        source_commit: Option<&str>,
    ) -> Result<ReleaseSigner, String> {
        let parts: Vec<&str> = repository.split('/').collect();
        if parts.len() != 2 || parts.iter().any(|p| p.is_empty() || !is_name(p)) {
            return Err(format!(
                "--repository {repository:?} is not OWNER/REPO (letters, digits, `-`, `_`, `.`)"
            ));
        }
        let file = workflow.strip_prefix(".github/workflows/").unwrap_or("");
        if file.is_empty() || file.contains('/') || !is_name(file) {
            return Err(format!(
                "--workflow {workflow:?} is not .github/workflows/<file> (e.g. \
                 .github/workflows/update-template.yml)"
            ));
        }
        if !source_ref.starts_with("refs/") || source_ref.chars().any(char::is_whitespace) {
            return Err(format!(
                "--source-ref {source_ref:?} is not a full ref (refs/heads/<branch>)"
            ));
        }
        if let Some(commit) = source_commit {
            if commit.len() != 40 || !commit.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(format!(
                    "--source-commit {commit:?} is not a 40-character commit id"
                ));
            }
        }
        Ok(ReleaseSigner {
            repository: repository.to_owned(),
            workflow: workflow.to_owned(),
            source_ref: source_ref.to_owned(),
            source_commit: source_commit.map(str::to_ascii_lowercase),
            repository_id: None,
            owner_id: None,
        })
    }

    /// `https://github.com/<owner>/<repo>/.github/workflows/<file>@<ref>`: the certificate's
    /// subject alternative name, build signer and build config for this workflow at this ref.
    pub fn workflow_uri(&self) -> String {
        format!(
            "https://github.com/{}/{}@{}",
            self.repository, self.workflow, self.source_ref
        )
    }
}

fn is_name(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The statement's subject the artifact must be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedSubject {
    /// The subject's name (actions/attest names a file subject by its file name); `None`: any.
    pub name: Option<String>,
    /// The artifact's digests as (`sha256` or `sha512`, lowercase hex): a file's both (a
    /// statement may name its subject by either, as npm's provenance names a tarball by its
    /// sha512), a digest given alone. A subject matches when one of its digests is one of these.
    pub digests: Vec<(&'static str, String)>,
}

impl ExpectedSubject {
    fn matches(&self, subject: &serde_json::Value) -> bool {
        self.digests
            .iter()
            .any(|(algorithm, hex)| subject["digest"][*algorithm].as_str() == Some(hex.as_str()))
    }

    fn describe(&self) -> String {
        let digests: Vec<String> = self
            .digests
            .iter()
            .map(|(a, h)| format!("{a}:{h}"))
            .collect();
        digests.join(" or ")
    }
}

/// Everything an attestation is judged by, beyond its cryptography.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub signer: Signer,
    /// The statement's predicate type; `None`: any (and a message signature, which has no
    /// statement, is accepted with an identity signer).
    pub predicate_type: Option<String>,
    pub subject: ExpectedSubject,
}

/// One claim that differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refusal {
    /// The claim, named as the certificate or the statement names it.
    pub claim: String,
    pub expected: String,
    pub found: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: expected {}, found {}",
            self.claim, self.expected, self.found
        )
    }
}

/// What the statement said, for the report.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StatementSummary {
    pub predicate_type: Option<String>,
    /// The names of the subjects whose digest is the artifact's.
    pub subject_names: Vec<String>,
}

/// Judges a verified certificate and the statement it signed (`None`: a message signature).
/// No refusal means the attestation satisfies `policy`.
pub fn judge(
    policy: &Policy,
    certificate: &CertificateClaims,
    statement: Option<&[u8]>,
) -> (Vec<Refusal>, StatementSummary) {
    let mut refusals = Vec::new();
    match &policy.signer {
        Signer::Identity { identity, issuer } => {
            expect(
                &mut refusals,
                "certificate subject alternative name",
                identity,
                &certificate.subject_alternative_name,
            );
            expect(
                &mut refusals,
                "certificate OIDC issuer",
                issuer,
                &certificate.issuer,
            );
        }
        Signer::Release(release) => judge_release(&mut refusals, release, certificate),
    }
    let statement_needed = matches!(policy.signer, Signer::Release(_))
        || policy.predicate_type.is_some()
        || policy.subject.name.is_some();
    let summary = match statement {
        Some(bytes) => judge_statement(&mut refusals, policy, bytes),
        None if statement_needed => {
            refusals.push(Refusal {
                claim: "statement".into(),
                expected: "an in-toto statement in a DSSE envelope".into(),
                found: "a message signature (no statement)".into(),
            });
            StatementSummary::default()
        }
        None => StatementSummary::default(),
    };
    (refusals, summary)
}

fn judge_release(refusals: &mut Vec<Refusal>, release: &ReleaseSigner, c: &CertificateClaims) {
    let workflow = release.workflow_uri();
    let repository = format!("https://github.com/{}", release.repository);
    let checks: [(&str, &str, &Option<String>); 7] = [
        ("certificate OIDC issuer", GITHUB_ACTIONS_ISSUER, &c.issuer),
        (
            "certificate subject alternative name",
            &workflow,
            &c.subject_alternative_name,
        ),
        (
            "build signer URI (1.3.6.1.4.1.57264.1.9)",
            &workflow,
            &c.build_signer_uri,
        ),
        (
            "build config URI (1.3.6.1.4.1.57264.1.18)",
            &workflow,
            &c.build_config_uri,
        ),
        (
            "source repository URI (1.3.6.1.4.1.57264.1.12)",
            &repository,
            &c.source_repository_uri,
        ),
        (
            "source repository ref (1.3.6.1.4.1.57264.1.14)",
            &release.source_ref,
            &c.source_repository_ref,
        ),
        (
            "runner environment (1.3.6.1.4.1.57264.1.11)",
            "github-hosted",
            &c.runner_environment,
        ),
    ];
    for (claim, expected, found) in checks {
        expect(refusals, claim, expected, found);
    }
    let optional = [
        (
            "source repository digest (1.3.6.1.4.1.57264.1.13)",
            &release.source_commit,
            &c.source_repository_digest,
        ),
        (
            "source repository identifier (1.3.6.1.4.1.57264.1.15)",
            &release.repository_id,
            &c.source_repository_identifier,
        ),
        (
            "source repository owner identifier (1.3.6.1.4.1.57264.1.17)",
            &release.owner_id,
            &c.source_repository_owner_identifier,
        ),
    ];
    for (claim, expected, found) in optional {
        if let Some(expected) = expected {
            expect(refusals, claim, expected, found);
        }
    }
}

fn expect(refusals: &mut Vec<Refusal>, claim: &str, expected: &str, found: &Option<String>) {
    if found.as_deref() != Some(expected) {
        refusals.push(Refusal {
            claim: claim.into(),
            expected: format!("`{expected}`"),
            found: match found {
                Some(f) => format!("`{f}`"),
                None => "nothing (the certificate does not claim it)".into(),
            },
        });
    }
}

fn judge_statement(refusals: &mut Vec<Refusal>, policy: &Policy, bytes: &[u8]) -> StatementSummary {
    // Parsed refusing repeated keys: serde_json keeps the last of two, another reader may
    // keep the first, so such a statement could name one subject to sigstore-verify and
    // another here.
    let statement = match template_formats::strict_json::parse(bytes) {
        Ok(value) => value,
        Err(e) => {
            refusals.push(Refusal {
                claim: "statement".into(),
                expected: "one JSON object without repeated keys".into(),
                found: e.to_string(),
            });
            return StatementSummary::default();
        }
    };
    let text = |v: &serde_json::Value| v.as_str().map(str::to_owned);
    if matches!(policy.signer, Signer::Release(_)) {
        expect(
            refusals,
            "statement _type",
            IN_TOTO_STATEMENT_V1,
            &text(&statement["_type"]),
        );
    }
    let predicate_type = text(&statement["predicateType"]);
    if let Some(expected) = &policy.predicate_type {
        expect(
            refusals,
            "statement predicateType",
            expected,
            &predicate_type,
        );
    }
    let wanted = &policy.subject;
    let subjects = statement["subject"].as_array().cloned().unwrap_or_default();
    let matching: Vec<String> = subjects
        .iter()
        .filter(|s| wanted.matches(s))
        .map(|s| text(&s["name"]).unwrap_or_default())
        .collect();
    let listed = || {
        let all: Vec<String> = subjects
            .iter()
            .map(|s| format!("`{}` {}", text(&s["name"]).unwrap_or_default(), s["digest"]))
            .collect();
        if all.is_empty() {
            "no subject".to_owned()
        } else {
            all.join(", ")
        }
    };
    if matching.is_empty() {
        refusals.push(Refusal {
            claim: "statement subject digest".into(),
            expected: wanted.describe(),
            found: listed(),
        });
    } else if let Some(name) = &wanted.name {
        if !matching.iter().any(|n| n == name) {
            refusals.push(Refusal {
                claim: "statement subject name".into(),
                expected: format!("`{name}` with {}", wanted.describe()),
                found: listed(),
            });
        }
    }
    StatementSummary {
        predicate_type,
        subject_names: matching,
    }
}

#[cfg(test)]
mod tests;
