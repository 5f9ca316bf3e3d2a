//! What an attestation must say of itself before `consume` trusts a release: the
//! `gh attestation verify` arguments that ask for it, and gh's JSON answer judged again here
//! (predicate type, subject digest, the signer workflow at the default branch's ref, a
//! GitHub-hosted runner), so the result does not rest on gh's version. Pure; `consume.rs` runs
//! gh. The attestations verified natively, offline: `policy.rs` (the release policy, pure) and
//! `verify.rs` (`template-verify attestation verify`).

use serde::Deserialize;

pub mod policy;
pub mod receipt_check;
pub mod release_bundles;
pub mod verify;

use template_formats::model::receipt::Receipt;
use template_formats::model::Platform;

/// The predicate type `gh attestation verify` checks by default (build provenance).
pub const PROVENANCE: &str = "https://slsa.dev/provenance/v1";
/// The predicate type of an SPDX SBOM attestation (`actions/attest` with an SPDX `sbom-path`).
pub const SPDX_SBOM: &str = "https://spdx.dev/Document/v2.3";
/// The predicate type of a CycloneDX SBOM attestation (`actions/attest` with a CycloneDX
/// `sbom-path`; @actions/attest's `buildSBOMPredicate`).
pub const CYCLONEDX_SBOM: &str = "https://cyclonedx.org/bom";

/// The SBOM attestations a release must have, as (platform, manifest digest, predicate type):
/// each platform manifest's SPDX SBOM, and its CycloneDX SBOM when the receipt records one.
pub fn sbom_attestations(receipt: &Receipt) -> Vec<(Platform, &str, &'static str)> {
    receipt
        .platforms
        .iter()
        .flat_map(|p| {
            p.sbom_assets().into_iter().map(|(field, _)| {
                let predicate = if field == "cyclonedx" {
                    CYCLONEDX_SBOM
                } else {
                    SPDX_SBOM
                };
                (p.platform, p.digest.as_str(), predicate)
            })
        })
        .collect()
}

/// What an attestation must say of itself before `consume` trusts it: beyond a valid
/// signature over the subject's digest, the workflow that signed it, the ref it ran from and
/// a GitHub-hosted runner.
#[derive(Debug, Clone)]
pub struct AttestationPolicy {
    /// `owner/name/.github/workflows/<file>.yml`.
    pub signer_workflow: String,
    /// `refs/heads/<default branch>`: a copy of the workflow dispatched from any other branch
    /// (which anyone who can push a branch can run, without the release environment's
    /// protection) signs with the same workflow path but another ref.
    pub source_ref: String,
}

/// The `gh attestation verify` arguments that enforce `policy`. `--signer-workflow` alone is a
/// pattern that accepts the workflow at any ref (cli/cli pkg/cmd/attestation/verify/policy.go,
/// `signerWorkflowSANPattern`: `(@(refs/.*|[0-9a-fA-F]+))?$` after the workflow's URL); the
/// ref is pinned by `--source-ref` (compared case-insensitively with the certificate's
/// SourceRepositoryRef, verification/extensions.go), and `--deny-self-hosted-runners` requires
/// the certificate's RunnerEnvironment to be `github-hosted`.
pub fn attestation_args(
    subject: &str,
    repository: &str,
    policy: &AttestationPolicy,
    predicate_type: &str,
) -> Vec<String> {
    [
        "attestation",
        "verify",
        subject,
        "--repo",
        repository,
        "--signer-workflow",
        &policy.signer_workflow,
        "--source-ref",
        &policy.source_ref,
        "--deny-self-hosted-runners",
        "--predicate-type",
        predicate_type,
        "--format",
        "json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// `gh attestation verify --format json`: one entry per attestation that passed gh's policy.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct VerifiedAttestation {
    verification_result: VerificationResult,
}

#[derive(Debug, Deserialize)]
struct VerificationResult {
    statement: Statement,
    signature: Signature,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Statement {
    predicate_type: String,
    #[serde(default)]
    subject: Vec<StatementSubject>,
}

#[derive(Debug, Deserialize)]
struct StatementSubject {
    #[serde(default)]
    digest: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
struct Signature {
    certificate: Certificate,
}

/// The fields of sigstore-go's `certificate.Summary` (its JSON names) that are checked.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Certificate {
    #[serde(default)]
    subject_alternative_name: String,
    #[serde(default)]
    source_repository_ref: String,
    #[serde(default)]
    runner_environment: String,
}

/// Checks gh's JSON answer itself, so the result does not rest on gh's version: gh up to
/// 2.66.1 exits 0 when no attestation has the `--predicate-type` asked for (cli/cli#10418),
/// and an older gh without `--source-ref` fails on the flag. Every attestation gh returns
/// must name `digest` (`sha256:<hex>`) as a subject and have the predicate type, the signer
/// workflow at the source ref, and a GitHub-hosted runner; at least one must be there.
/// Returns how many there were. Pure.
pub fn judge_attestations(
    json: &[u8],
    digest: &str,
    policy: &AttestationPolicy,
    predicate_type: &str,
) -> Result<usize, String> {
    let found: Vec<VerifiedAttestation> = serde_json::from_slice(json).map_err(|e| {
        format!("`gh attestation verify --format json` printed no attestations ({e})")
    })?;
    if found.is_empty() {
        return Err(format!(
            "no attestation with predicate type {predicate_type}"
        ));
    }
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    let signer = format!("https://github.com/{}@", policy.signer_workflow).to_lowercase();
    for a in &found {
        let r = &a.verification_result;
        let c = &r.signature.certificate;
        if r.statement.predicate_type != predicate_type {
            return Err(format!(
                "gh returned an attestation of predicate type {}, not {predicate_type} (gh up to                  2.66.1 does so, cli/cli#10418)",
                r.statement.predicate_type
            ));
        }
        if !r
            .statement
            .subject
            .iter()
            .any(|s| s.digest.get("sha256").map(String::as_str) == Some(hex))
        {
            return Err(format!(
                "gh returned an attestation that does not name {digest}"
            ));
        }
        if !c
            .source_repository_ref
            .eq_ignore_ascii_case(&policy.source_ref)
        {
            return Err(format!(
                "the attestation was made by a run from {}, not {}",
                if c.source_repository_ref.is_empty() {
                    "an unknown ref"
                } else {
                    &c.source_repository_ref
                },
                policy.source_ref
            ));
        }
        if !c
            .subject_alternative_name
            .to_lowercase()
            .starts_with(&signer)
        {
            return Err(format!(
                "the attestation was signed by {}, not {}",
                c.subject_alternative_name, policy.signer_workflow
            ));
        }
        if c.runner_environment != "github-hosted" {
            return Err(format!(
                "the attestation was made on a {} runner, not a GitHub-hosted one",
                if c.runner_environment.is_empty() {
                    "unknown"
                } else {
                    &c.runner_environment
                }
            ));
        }
    }
    Ok(found.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    const WORKFLOW: &str = "s0/template/.github/workflows/update-template.yml";

    fn main_branch() -> AttestationPolicy {
        AttestationPolicy {
            signer_workflow: WORKFLOW.into(),
            source_ref: "refs/heads/main".into(),
        }
    }

    /// One entry of `gh attestation verify --format json` as gh prints it.
    fn attestation(predicate: &str, hex: &str, git_ref: &str, runner: &str) -> serde_json::Value {
        serde_json::json!({
            "attestation": {"bundle": {}},
            "verificationResult": {
                "statement": {
                    "_type": "https://in-toto.io/Statement/v1",
                    "subject": [{"name": "receipt.json", "digest": {"sha256": hex}}],
                    "predicateType": predicate,
                },
                "signature": {"certificate": {
                    "subjectAlternativeName": format!("https://github.com/{WORKFLOW}@{git_ref}"),
                    "sourceRepositoryRef": git_ref,
                    "runnerEnvironment": runner,
                }},
            }
        })
    }

    /// Fuzz target: what `gh attestation verify --format json` prints, judged as consume
    /// judges it.
    #[test]
    fn fuzz_gh_attestation_json() {
        let hex = "a".repeat(64);
        let seeds: Vec<Vec<u8>> = [
            serde_json::json!([attestation(
                PROVENANCE,
                &hex,
                "refs/heads/main",
                "github-hosted"
            )]),
            serde_json::json!([
                attestation(PROVENANCE, &hex, "refs/heads/main", "github-hosted"),
                attestation(
                    "https://spdx.dev/Document/v2.3",
                    &hex,
                    "refs/heads/dev",
                    "self-hosted"
                ),
            ]),
        ]
        .iter()
        .map(|v| serde_json::to_vec(v).unwrap())
        .collect();
        let digest = format!("sha256:{hex}");
        let outcome = crate::fuzz::campaign(
            "gh attestation json",
            &seeds,
            crate::fuzz::inputs(),
            |bytes| {
                let _ = judge_attestations(bytes, &digest, &main_branch(), PROVENANCE);
            },
        );
        crate::fuzz::assert_clean(&outcome);
    }

    #[test]
    fn gh_is_asked_for_the_source_ref_and_github_hosted_runners() {
        let args = attestation_args("f", "s0/template", &main_branch(), PROVENANCE);
        let text = args.join(" ");
        assert!(
            text.contains("--signer-workflow s0/template/.github/workflows/update-template.yml")
                && text.contains("--source-ref refs/heads/main")
                && text.contains("--deny-self-hosted-runners")
                && text.ends_with("--format json"),
            "{text}"
        );
    }

    #[test]
    fn attestations_are_judged_from_gh_s_json_not_its_exit_status() {
        let hex = "ab".repeat(32);
        let digest = format!("sha256:{hex}");
        let judge = |entries: Vec<serde_json::Value>| {
            judge_attestations(
                serde_json::to_vec(&entries).unwrap().as_slice(),
                &digest,
                &main_branch(),
                PROVENANCE,
            )
        };
        let good = attestation(PROVENANCE, &hex, "refs/heads/main", "github-hosted");
        assert_eq!(judge(vec![good.clone()]), Ok(1));
        // gh <= 2.66.1 exits 0 with nothing (or another predicate type) found.
        assert!(judge(vec![]).unwrap_err().contains("no attestation"));
        let sbom = attestation(SPDX_SBOM, &hex, "refs/heads/main", "github-hosted");
        assert!(judge(vec![good.clone(), sbom])
            .unwrap_err()
            .contains("10418"));
        let branch = attestation(PROVENANCE, &hex, "refs/heads/attacker", "github-hosted");
        let why = judge(vec![branch]).unwrap_err();
        assert!(
            why.contains("refs/heads/attacker") && why.contains("not refs/heads/main"),
            "{why}"
        );
        let self_hosted = attestation(PROVENANCE, &hex, "refs/heads/main", "self-hosted");
        assert!(judge(vec![self_hosted])
            .unwrap_err()
            .contains("self-hosted"));
        let other = attestation(
            PROVENANCE,
            &"cd".repeat(32),
            "refs/heads/main",
            "github-hosted",
        );
        assert!(judge(vec![other]).unwrap_err().contains("does not name"));
        let mut copy = good.clone();
        copy["verificationResult"]["signature"]["certificate"]["subjectAlternativeName"] =
            "https://github.com/s0/template/.github/workflows/copy.yml@refs/heads/main".into();
        assert!(judge(vec![copy]).unwrap_err().contains("signed by"));
        assert!(judge_attestations(
            b"Verification succeeded",
            &digest,
            &main_branch(),
            PROVENANCE
        )
        .is_err());
    }

    #[test]
    fn each_platform_needs_the_sbom_attestations_of_each_form_its_receipt_records() {
        let mut r = crate::receipt::tests_support::sample();
        let wanted = |r: &Receipt| -> Vec<(Platform, String, &str)> {
            sbom_attestations(r)
                .into_iter()
                .map(|(p, d, t)| (p, d.to_string(), t))
                .collect()
        };
        let amd = r.platforms[0].clone();
        let got = wanted(&r);
        assert_eq!(got.len(), 2 * r.platforms.len(), "{got:?}");
        assert!(got.contains(&(amd.platform, amd.digest.clone(), SPDX_SBOM)));
        assert!(got.contains(&(amd.platform, amd.digest.clone(), CYCLONEDX_SBOM)));
        // A release without the CycloneDX asset is asked for its SPDX attestations only.
        r.platforms.iter_mut().for_each(|p| p.cyclonedx = None);
        assert!(wanted(&r).iter().all(|(_, _, t)| *t == SPDX_SBOM));
        assert_eq!(wanted(&r).len(), r.platforms.len());
    }
}
