//! Keyless (Fulcio certificate) bundles verified offline against one or more trusted roots,
//! each root with the checks its own instance makes possible, and every claim of the verified
//! certificate returned for a caller's policy. No identity is judged here.
//!
//! Which checks a root demands is read from the root itself, as gh's verifier decides it
//! (cli/cli `pkg/cmd/attestation/verification/sigstore.go`: `newPublicGoodVerifierWithTrustedRoot`
//! asks for an SCT, a transparency log entry and an observer timestamp;
//! `newGitHubVerifierWithTrustedRoot` for an RFC 3161 timestamp; `newCustomVerifier` for a log
//! entry only when the root lists a log): a root that lists transparency logs requires the
//! bundle's inclusion in one of them, a root that lists CT logs requires the certificate's SCT,
//! and a root with neither (GitHub's own instance) is left with its timestamp authorities,
//! whose RFC 3161 timestamp `sigstore-verify` then requires (it refuses a bundle with no
//! verified time: `determine_validation_times`).
//!
//! gh picks the root for a bundle by the organization of the leaf's issuer; here every root
//! given is tried in turn and the first under which the bundle verifies is named. A root can
//! only accept a certificate that chains to its own CAs, with its own requirements, so the
//! order cannot weaken a check.

use anyhow::{anyhow, bail, Result};
use chrono::{DateTime, Utc};
use serde::Serialize;
use sigstore_verify::trust_root::TrustedRoot as SigstoreRoot;
use sigstore_verify::types::{Artifact, ArtifactDigest, Bundle, HashAlgorithm, SignatureContent};
use sigstore_verify::{VerificationPolicy, Verifier};

/// One trusted root of a file: the Sigstore instance it describes and its verifier.
struct InstanceRoot {
    verifier: Verifier,
    instance: Instance,
    /// The transparency logs' ids and base URLs, to name the log of a verified entry.
    logs: Vec<(sigstore_verify::types::LogId, String)>,
}

/// Which instance a bundle verified under, and what that root requires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Instance {
    /// Where the root came from (`FILE`, or `FILE line N` for JSON lines).
    pub root: String,
    /// sha256 of the root's JSON as read (one line of JSON lines).
    pub root_sha256: String,
    /// The Fulcio CA's URI the root names first (`https://fulcio.sigstore.dev`,
    /// `fulcio.githubapp.com`).
    pub certificate_authority: String,
    /// The root lists transparency logs: a bundle must prove its inclusion in one.
    pub requires_transparency_log: bool,
    /// The root lists certificate transparency logs: the certificate's SCT must verify.
    pub requires_sct: bool,
}

/// The trusted roots a bundle may verify under: one trusted root JSON document, or the JSON
/// lines `gh attestation trusted-root` prints (one root per line).
pub struct TrustedRoots {
    roots: Vec<InstanceRoot>,
}

impl TrustedRoots {
    /// `origin` names the file, for errors and for [`Instance::root`].
    pub fn from_text(text: &str, origin: &str) -> Result<TrustedRoots> {
        let mut documents = Vec::new();
        for value in serde_json::Deserializer::from_str(text).into_iter::<serde_json::Value>() {
            let value = value.map_err(|e| anyhow!("{origin} is not JSON: {e}"))?;
            documents.push(value);
        }
        let many = documents.len() > 1;
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let mut roots = Vec::new();
        for (i, value) in documents.iter().enumerate() {
            let name = if many {
                format!("{origin} root {}", i + 1)
            } else {
                origin.to_owned()
            };
            // The sha256 names the bytes a person can hash: the line of JSON lines, or the file.
            let bytes = if many && lines.len() == documents.len() {
                lines[i]
            } else {
                text
            };
            let json = value.to_string();
            let root = SigstoreRoot::from_json(&json)
                .map_err(|e| anyhow!("{name} is not a Sigstore trusted root: {e}"))?;
            let verifier = Verifier::new(&root)
                .map_err(|e| anyhow!("{name}: the trusted root is unusable: {e}"))?;
            let instance = Instance {
                root: name,
                root_sha256: template_formats::hash::sha256_hex(bytes.as_bytes()),
                certificate_authority: root
                    .certificate_authorities
                    .first()
                    .map(|ca| ca.uri.clone())
                    .unwrap_or_default(),
                requires_transparency_log: !root.tlogs.is_empty(),
                requires_sct: !root.ctlogs.is_empty(),
            };
            let logs = root
                .tlogs
                .iter()
                .map(|log| (log.log_id.clone(), log.base_url.clone()))
                .collect();
            roots.push(InstanceRoot {
                verifier,
                instance,
                logs,
            });
        }
        if roots
            .iter()
            .all(|r| r.instance.certificate_authority.is_empty())
        {
            bail!("{origin} names no Fulcio certificate authority: no keyless bundle can verify");
        }
        Ok(TrustedRoots { roots })
    }

    /// The instances, in the file's order.
    pub fn instances(&self) -> impl Iterator<Item = &Instance> {
        self.roots.iter().map(|r| &r.instance)
    }
}

/// What a bundle is checked against: the artifact's bytes (any signature scheme), or its
/// digest (`sha256:`/`sha512:` given in place of a file).
#[derive(Debug, Clone, Copy)]
pub enum ArtifactInput<'a> {
    Bytes(&'a [u8]),
    Sha256(&'a [u8; 32]),
    Sha512(&'a [u8; 64]),
}

impl<'a> ArtifactInput<'a> {
    fn artifact(&self) -> Result<Artifact<'a>> {
        Ok(match *self {
            ArtifactInput::Bytes(bytes) => Artifact::from(bytes),
            ArtifactInput::Sha256(d) => Artifact::from_digest(
                ArtifactDigest::new(HashAlgorithm::Sha2256, d.to_vec())
                    .map_err(|e| anyhow!("{e}"))?,
            ),
            ArtifactInput::Sha512(d) => Artifact::from_digest(
                ArtifactDigest::new(HashAlgorithm::Sha2512, d.to_vec())
                    .map_err(|e| anyhow!("{e}"))?,
            ),
        })
    }
}

/// The claims of a verified Fulcio certificate (Fulcio's `docs/oid-info.md`, the arc
/// `1.3.6.1.4.1.57264.1`): plain data, so a policy is a pure function over it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CertificateClaims {
    /// The subject alternative name (a workflow URI with its ref, for GitHub Actions).
    pub subject_alternative_name: Option<String>,
    /// The OIDC issuer (`.1.8`, else the deprecated `.1.1`).
    pub issuer: Option<String>,
    /// `.1.9`: the build configuration that requested the certificate, with its ref.
    pub build_signer_uri: Option<String>,
    /// `.1.10`
    pub build_signer_digest: Option<String>,
    /// `.1.11`: `github-hosted` or `self-hosted`.
    pub runner_environment: Option<String>,
    /// `.1.12`
    pub source_repository_uri: Option<String>,
    /// `.1.13`: the commit built.
    pub source_repository_digest: Option<String>,
    /// `.1.14`: the ref built.
    pub source_repository_ref: Option<String>,
    /// `.1.15`: the repository's immutable id.
    pub source_repository_identifier: Option<String>,
    /// `.1.16`
    pub source_repository_owner_uri: Option<String>,
    /// `.1.17`: the owner's immutable id.
    pub source_repository_owner_identifier: Option<String>,
    /// `.1.18`: the build configuration that ran (for a reusable workflow, the caller).
    pub build_config_uri: Option<String>,
    /// `.1.19`
    pub build_config_digest: Option<String>,
    /// `.1.20`: the event (`schedule`, `workflow_dispatch`, ...).
    pub build_trigger: Option<String>,
    /// `.1.21`: the run.
    pub run_invocation_uri: Option<String>,
    /// `.1.22`: `public`, `private` or `internal` at signing.
    pub source_repository_visibility_at_signing: Option<String>,
}

/// How the bundle's time and log inclusion were established.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Evidence {
    /// The transparency log entry whose inclusion was verified (none on an instance without a
    /// log).
    pub transparency_log: Option<LogEntry>,
    /// Every authenticated time the certificate was checked at (the log's integrated time,
    /// RFC 3161 timestamps).
    pub verified_times: Vec<DateTime<Utc>>,
    /// The certificate's SCT was verified.
    pub sct_verified: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LogEntry {
    /// The log's base URL, from the trusted root.
    pub log: String,
    pub index: u64,
    /// Rekor v1's integrated time (Rekor v2 entries have none: their time is a timestamp).
    pub integrated_time: Option<DateTime<Utc>>,
}

/// A keyless bundle that verified: under which instance, with which evidence, signed by a
/// certificate with these claims, over this DSSE payload (none for a message signature).
#[derive(Debug, Clone)]
pub struct KeylessVerified {
    pub instance: Instance,
    pub evidence: Evidence,
    pub certificate: CertificateClaims,
    /// The DSSE envelope's payload as signed, and its payload type.
    pub statement: Option<Vec<u8>>,
}

/// Verifies a keyless bundle for `artifact` under the first of `roots` that accepts it:
/// the certificate chain to the root's Fulcio CAs at every verified time, its SCT and the log
/// inclusion when the root requires them, the signature (DSSE or message), and that the
/// statement's subject or the message digest is the artifact's. The error names each root's
/// refusal.
pub fn verify_keyless(
    bundle_json: &str,
    roots: &TrustedRoots,
    artifact: ArtifactInput<'_>,
) -> Result<KeylessVerified> {
    let bundle =
        Bundle::from_json(bundle_json).map_err(|e| anyhow!("not a Sigstore bundle: {e}"))?;
    let mut refusals = Vec::new();
    for root in &roots.roots {
        match verify_under(&bundle, root, artifact) {
            Ok(verified) => return Ok(verified),
            Err(e) => refusals.push(format!("under {}: {e:#}", root.instance.root)),
        }
    }
    bail!(
        "the Sigstore bundle does not verify {}",
        if refusals.len() == 1 {
            refusals.remove(0)
        } else {
            refusals.join("; ")
        }
    )
}

fn verify_under(
    bundle: &Bundle,
    root: &InstanceRoot,
    artifact: ArtifactInput<'_>,
) -> Result<KeylessVerified> {
    let instance = &root.instance;
    let mut policy = VerificationPolicy::any_identity();
    if !instance.requires_transparency_log {
        policy = policy.skip_tlog_unsafe();
    }
    if !instance.requires_sct {
        policy = policy.skip_sct();
    }
    let result = root
        .verifier
        .verify(artifact.artifact()?, bundle, &policy)
        .map_err(|e| anyhow!("{e}"))?;
    // What the policy asked for must be what the result says was done.
    if !result.certificate_verified() {
        bail!("the certificate was not verified against the trusted root");
    }
    if instance.requires_sct && !result.sct_verified() {
        bail!("the certificate's SCT was not verified");
    }
    if instance.requires_transparency_log && !result.tlog_verified() {
        bail!("the transparency log entry was not verified");
    }
    if result.verified_timestamps().is_empty() {
        bail!("no verified time (transparency log or RFC 3161 timestamp)");
    }
    let Some(cert) = result.certificate() else {
        bail!("the bundle carries no signing certificate");
    };
    let c = &cert.ci_claims;
    let certificate = CertificateClaims {
        subject_alternative_name: result.identity().map(|i| i.as_str().to_owned()),
        issuer: result.issuer().map(str::to_owned),
        build_signer_uri: c.build_signer_uri.clone(),
        build_signer_digest: c.build_signer_digest.clone(),
        runner_environment: c.runner_environment.clone(),
        source_repository_uri: c.source_repository_uri.clone(),
        source_repository_digest: c.source_repository_digest.clone(),
        source_repository_ref: c.source_repository_ref.clone(),
        source_repository_identifier: c.source_repository_identifier.clone(),
        source_repository_owner_uri: c.source_repository_owner_uri.clone(),
        source_repository_owner_identifier: c.source_repository_owner_identifier.clone(),
        build_config_uri: c.build_config_uri.clone(),
        build_config_digest: c.build_config_digest.clone(),
        build_trigger: c.build_trigger.clone(),
        run_invocation_uri: c.run_invocation_uri.clone(),
        source_repository_visibility_at_signing: c.source_repository_visibility_at_signing.clone(),
    };
    let transparency_log = if result.tlog_verified() {
        bundle
            .verification_material
            .tlog_entries
            .first()
            .map(|entry| LogEntry {
                log: root
                    .logs
                    .iter()
                    .find(|(id, _)| *id == entry.log_id)
                    .map(|(_, url)| url.clone())
                    .unwrap_or_else(|| "a log the root does not name".into()),
                index: entry.log_index.get(),
                integrated_time: result
                    .integrated_time()
                    .and_then(|t| DateTime::from_timestamp(t.as_second(), 0)),
            })
    } else {
        None
    };
    let statement = match &bundle.content {
        SignatureContent::DsseEnvelope(envelope) => Some(envelope.payload.as_bytes().to_vec()),
        _ => None,
    };
    Ok(KeylessVerified {
        instance: instance.clone(),
        evidence: Evidence {
            transparency_log,
            verified_times: result
                .verified_timestamps()
                .iter()
                .filter_map(|t| DateTime::from_timestamp(t.as_second(), 0))
                .collect(),
            sct_verified: result.sct_verified(),
        },
        certificate,
        statement,
    })
}
