//! `template-verify attestation verify`: a Sigstore bundle checked offline against a trusted
//! root given as a file (`sigstore::keyless`), then judged by the identity the caller asks for
//! (`policy`). The files are read here, at the edge; nothing is fetched.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;

use super::policy::{judge, ExpectedSubject, Policy, Refusal, ReleaseSigner, Signer};
use crate::sigstore::keyless::{
    verify_keyless, ArtifactInput, CertificateClaims, Evidence, Instance, TrustedRoots,
};
use crate::terminal_text::escape;

/// The largest artifact read whole (a release's assets are a few megabytes; a verifier binary
/// the largest).
const MAX_ARTIFACT_BYTES: u64 = 512 << 20;
/// The largest bundle file (one bundle is a few kilobytes; JSON lines hold a handful).
const MAX_BUNDLE_BYTES: u64 = 16 << 20;
/// The largest trusted root file (GitHub's and Sigstore's are tens of kilobytes).
const MAX_TRUSTED_ROOT_BYTES: u64 = 4 << 20;

/// Who must have signed, as the command line asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestedSigner {
    Identity {
        identity: String,
        issuer: String,
    },
    Release {
        repository: String,
        workflow: String,
        source_ref: String,
        source_commit: Option<String>,
        repository_id: Option<String>,
        owner_id: Option<String>,
    },
}

#[derive(Debug, Clone)]
pub struct VerifyAttestationRequest {
    /// A file, or `sha256:<hex>` / `sha512:<hex>`.
    pub artifact: String,
    pub bundle: PathBuf,
    pub trusted_root: PathBuf,
    pub signer: RequestedSigner,
    /// Default: the artifact file's name for a release signer; none for a digest.
    pub subject_name: Option<String>,
    /// Default: SLSA provenance v1 for a release signer; any for an identity.
    pub predicate_type: Option<String>,
    pub json: bool,
}

/// The artifact as given: its bytes (a file) or a digest.
enum Artifact {
    File { name: String, bytes: Vec<u8> },
    Sha256([u8; 32]),
    Sha512([u8; 64]),
}

impl Artifact {
    fn input(&self) -> ArtifactInput<'_> {
        match self {
            Artifact::File { bytes, .. } => ArtifactInput::Bytes(bytes),
            Artifact::Sha256(d) => ArtifactInput::Sha256(d),
            Artifact::Sha512(d) => ArtifactInput::Sha512(d),
        }
    }

    /// (algorithm, lowercase hex), the first the one reported: a file's sha256 and sha512,
    /// or the digest given.
    fn digests(&self) -> Vec<(&'static str, String)> {
        match self {
            Artifact::File { bytes, .. } => {
                use sha2::Digest as _;
                vec![
                    ("sha256", template_formats::hash::sha256_hex(bytes)),
                    ("sha512", hex::encode(sha2::Sha512::digest(bytes))),
                ]
            }
            Artifact::Sha256(d) => vec![("sha256", hex::encode(d))],
            Artifact::Sha512(d) => vec![("sha512", hex::encode(d))],
        }
    }
}

/// `sha256:<hex>` or `sha512:<hex>` is a digest; anything else names a file.
fn read_artifact(artifact: &str) -> Result<Artifact> {
    let decode = |hex_text: &str, len: usize, algorithm: &str| -> Result<Vec<u8>> {
        let bytes = hex::decode(hex_text)
            .ok()
            .filter(|b| b.len() == len)
            .ok_or_else(|| anyhow!("{artifact:?} is not {algorithm}:<{} hex digits>", 2 * len))?;
        Ok(bytes)
    };
    if let Some(hex_text) = artifact.strip_prefix("sha256:") {
        let bytes = decode(hex_text, 32, "sha256")?;
        return Ok(Artifact::Sha256(bytes.try_into().expect("32 bytes")));
    }
    if let Some(hex_text) = artifact.strip_prefix("sha512:") {
        let bytes = decode(hex_text, 64, "sha512")?;
        return Ok(Artifact::Sha512(bytes.try_into().expect("64 bytes")));
    }
    let path = Path::new(artifact);
    let bytes = template_formats::bounded_read::read_regular(path, MAX_ARTIFACT_BYTES, "artifact")?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(Artifact::File { name, bytes })
}

/// The bundles of a file: one bundle JSON document, or JSON lines of them (what
/// `gh attestation download` writes).
fn bundles_of(text: &str, path: &Path) -> Result<Vec<String>> {
    let mut bundles = Vec::new();
    for value in serde_json::Deserializer::from_str(text).into_iter::<serde_json::Value>() {
        let value =
            value.with_context(|| format!("the bundle file {} is not JSON", path.display()))?;
        bundles.push(value.to_string());
    }
    if bundles.is_empty() {
        bail!("the bundle file {} holds no bundle", path.display());
    }
    Ok(bundles)
}

/// The policy the request asks for, its forms checked.
fn policy_of(request: &VerifyAttestationRequest, artifact: &Artifact) -> Result<Policy> {
    let digests = artifact.digests();
    let file_name = match artifact {
        Artifact::File { name, .. } => Some(name.clone()),
        _ => None,
    };
    Ok(match &request.signer {
        RequestedSigner::Identity { identity, issuer } => Policy {
            signer: Signer::Identity {
                identity: identity.clone(),
                issuer: issuer.clone(),
            },
            predicate_type: request.predicate_type.clone(),
            subject: ExpectedSubject {
                name: request.subject_name.clone(),
                digests,
            },
        },
        RequestedSigner::Release {
            repository,
            workflow,
            source_ref,
            source_commit,
            repository_id,
            owner_id,
        } => {
            let mut signer =
                ReleaseSigner::new(repository, workflow, source_ref, source_commit.as_deref())
                    .map_err(|e| anyhow!(e))?;
            signer.repository_id = repository_id.clone();
            signer.owner_id = owner_id.clone();
            let name = request.subject_name.clone().or(file_name).ok_or_else(|| {
                anyhow!(
                    "{} is a digest: name the statement's subject with --subject-name \
                     (actions/attest names a file by its file name)",
                    request.artifact
                )
            })?;
            Policy {
                signer: Signer::Release(signer),
                predicate_type: Some(
                    request
                        .predicate_type
                        .clone()
                        .unwrap_or_else(|| super::PROVENANCE.to_owned()),
                ),
                subject: ExpectedSubject {
                    name: Some(name),
                    digests,
                },
            }
        }
    })
}

/// One bundle's verdict.
#[derive(Debug, Clone, Serialize)]
pub struct BundleVerdict {
    /// 1-based, in the file's order.
    pub bundle: usize,
    /// The cryptography held (signature, chain, log or timestamp, SCT, subject digest).
    pub verified: bool,
    /// Why the cryptography failed.
    pub error: Option<String>,
    pub instance: Option<Instance>,
    pub evidence: Option<Evidence>,
    pub certificate: Option<CertificateClaims>,
    pub predicate_type: Option<String>,
    pub subject_names: Vec<String>,
    /// The claims that differ from the policy (empty: accepted when `verified`).
    pub refusals: Vec<Refusal>,
    pub accepted: bool,
}

/// The command's result (`--json`).
#[derive(Debug, Clone, Serialize)]
pub struct AttestationReport {
    pub artifact: String,
    /// `sha256:<hex>` of a file, or the digest given.
    pub digest: String,
    pub bundle_file: String,
    pub trusted_root: String,
    /// At least one bundle verified and satisfied the policy.
    pub accepted: bool,
    pub bundles: Vec<BundleVerdict>,
}

/// Verifies and judges every bundle of the request's file; pure over the bytes read.
fn verify_all(
    request: &VerifyAttestationRequest,
    artifact: &Artifact,
    policy: &Policy,
    roots: &TrustedRoots,
    bundles: &[String],
) -> AttestationReport {
    let (algorithm, hex) = artifact.digests().swap_remove(0);
    let verdicts: Vec<BundleVerdict> = bundles
        .iter()
        .enumerate()
        .map(
            |(i, bundle)| match verify_keyless(bundle, roots, artifact.input()) {
                Ok(verified) => {
                    let (refusals, summary) =
                        judge(policy, &verified.certificate, verified.statement.as_deref());
                    BundleVerdict {
                        bundle: i + 1,
                        verified: true,
                        error: None,
                        instance: Some(verified.instance),
                        evidence: Some(verified.evidence),
                        certificate: Some(verified.certificate),
                        predicate_type: summary.predicate_type,
                        subject_names: summary.subject_names,
                        accepted: refusals.is_empty(),
                        refusals,
                    }
                }
                Err(e) => BundleVerdict {
                    bundle: i + 1,
                    verified: false,
                    error: Some(format!("{e:#}")),
                    instance: None,
                    evidence: None,
                    certificate: None,
                    predicate_type: None,
                    subject_names: Vec::new(),
                    refusals: Vec::new(),
                    accepted: false,
                },
            },
        )
        .collect();
    AttestationReport {
        artifact: request.artifact.clone(),
        digest: format!("{algorithm}:{hex}"),
        bundle_file: request.bundle.display().to_string(),
        trusted_root: request.trusted_root.display().to_string(),
        accepted: verdicts.iter().any(|v| v.accepted),
        bundles: verdicts,
    }
}

/// Reads the files and verifies: the report, or an error about an argument or a file.
pub fn verify_request(request: &VerifyAttestationRequest) -> Result<AttestationReport> {
    let artifact = read_artifact(&request.artifact)?;
    let policy = policy_of(request, &artifact)?;
    let root_bytes = template_formats::bounded_read::read_regular(
        &request.trusted_root,
        MAX_TRUSTED_ROOT_BYTES,
        "trusted root",
    )?;
    let root_text = String::from_utf8(root_bytes).map_err(|_| {
        anyhow!(
            "the trusted root {} is not UTF-8 text",
            request.trusted_root.display()
        )
    })?;
    let roots = TrustedRoots::from_text(&root_text, &request.trusted_root.display().to_string())?;
    let bundle_bytes =
        template_formats::bounded_read::read_regular(&request.bundle, MAX_BUNDLE_BYTES, "bundle")?;
    let bundle_text = String::from_utf8(bundle_bytes).map_err(|_| {
        anyhow!(
            "the bundle file {} is not UTF-8 text",
            request.bundle.display()
        )
    })?;
    let bundles = bundles_of(&bundle_text, &request.bundle)?;
    Ok(verify_all(request, &artifact, &policy, &roots, &bundles))
}

/// `template-verify attestation verify`: exit 0 only when a bundle of the file verifies and
/// satisfies the policy.
pub fn run(request: VerifyAttestationRequest) -> Result<ExitCode> {
    let report = verify_request(&request)?;
    if request.json {
        crate::terminal_text::print_json_escaped(&report)?;
    }
    if let Some(good) = report.bundles.iter().find(|v| v.accepted) {
        if !request.json {
            print!("{}", render_accepted(&report, good));
        }
        return Ok(ExitCode::SUCCESS);
    }
    eprint!("{}", render_refused(&report));
    Ok(ExitCode::FAILURE)
}

fn render_accepted(report: &AttestationReport, v: &BundleVerdict) -> String {
    let mut out = format!(
        "{} ({}): attestation verified (bundle {} of {})\n",
        escape(&report.artifact),
        report.digest,
        v.bundle,
        report.bundles.len()
    );
    let line = |out: &mut String, key: &str, value: &str| {
        out.push_str(&format!("  {key:<11} {}\n", escape(value)));
    };
    if let Some(i) = &v.instance {
        line(
            &mut out,
            "instance",
            &format!(
                "{} (trusted root {}, sha256 {})",
                i.certificate_authority, i.root, i.root_sha256
            ),
        );
    }
    if let Some(e) = &v.evidence {
        let times: Vec<String> = e.verified_times.iter().map(|t| t.to_rfc3339()).collect();
        match &e.transparency_log {
            Some(log) => line(&mut out, "log", &format!("{} entry {}", log.log, log.index)),
            None => line(
                &mut out,
                "log",
                "none (this instance keeps no transparency log)",
            ),
        }
        line(&mut out, "time", &times.join(", "));
        line(
            &mut out,
            "sct",
            if e.sct_verified {
                "verified"
            } else {
                "not required by this instance"
            },
        );
    }
    if let Some(c) = &v.certificate {
        let or = |v: &Option<String>| v.clone().unwrap_or_else(|| "?".into());
        line(
            &mut out,
            "signer",
            &format!(
                "{} (issuer {})",
                or(&c.subject_alternative_name),
                or(&c.issuer)
            ),
        );
        if c.source_repository_uri.is_some() {
            line(
                &mut out,
                "source",
                &format!(
                    "{} {} at {}, {} runner",
                    or(&c.source_repository_uri),
                    or(&c.source_repository_ref),
                    or(&c.source_repository_digest),
                    or(&c.runner_environment)
                ),
            );
        }
        if let Some(run) = &c.run_invocation_uri {
            line(&mut out, "run", run);
        }
    }
    match &v.predicate_type {
        Some(p) => line(
            &mut out,
            "statement",
            &format!("{p}, subject {}", v.subject_names.join(", ")),
        ),
        None => line(&mut out, "statement", "none (a message signature)"),
    }
    out
}

fn render_refused(report: &AttestationReport) -> String {
    let mut out = format!(
        "{} ({}): attestation refused: no bundle of {} verifies under {} and satisfies the \
         policy\n",
        escape(&report.artifact),
        report.digest,
        escape(&report.bundle_file),
        escape(&report.trusted_root)
    );
    for v in &report.bundles {
        if let Some(error) = &v.error {
            out.push_str(&format!("  bundle {}: {}\n", v.bundle, escape(error)));
        }
        for r in &v.refusals {
            out.push_str(&format!(
                "  bundle {}: {}\n",
                v.bundle,
                escape(&r.to_string())
            ));
        }
    }
    out
}

#[cfg(test)]
mod fixtures_tests;
