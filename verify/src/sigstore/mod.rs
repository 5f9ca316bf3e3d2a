//! Sigstore bundles verified offline: a bundle and a trusted root in, the verified
//! certificate's identity claims and the in-toto statement out. No policy of any ecosystem
//! lives here (npm's is `xtask/src/npm/provenance.rs`); callers judge the claims.
//!
//! The cryptography is sigstore-rust's (`sigstore-verify`, pinned exactly): certificate chain
//! to the root's Fulcio CAs at the log's time, the embedded SCT, the transparency log's
//! signed entry timestamp or inclusion proof, the DSSE signature, and the statement's subject
//! against the digest the caller knows. Nothing is fetched: the trusted root is passed in.

use anyhow::{anyhow, bail, Context, Result};
use chrono::{DateTime, Utc};
use sigstore_verify::trust_root::TrustedRoot as SigstoreRoot;
use sigstore_verify::types::{
    Artifact, ArtifactDigest, Bundle, DerPublicKey, HashAlgorithm, SignatureContent,
};
use sigstore_verify::{PublicKeyVerificationPolicy, VerificationPolicy, Verifier};

pub mod keyless;

/// A Sigstore trusted root (`trusted_root.json`: Fulcio CAs, Rekor and CT log keys, TSAs),
/// parsed and checked once.
pub struct TrustedRoot {
    verifier: Verifier,
}

impl TrustedRoot {
    /// `origin` names where the JSON came from, for errors.
    pub fn from_json(json: &str, origin: &str) -> Result<TrustedRoot> {
        let root = SigstoreRoot::from_json(json)
            .map_err(|e| anyhow!("{origin} is not a Sigstore trusted root: {e}"))?;
        let verifier = Verifier::new(&root)
            .map_err(|e| anyhow!("{origin}: the trusted root is unusable: {e}"))?;
        Ok(TrustedRoot { verifier })
    }
}

/// The artifact a bundle must be about, as a digest (the bundle's subject or message digest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    Sha256([u8; 32]),
    Sha512([u8; 64]),
}

impl Subject {
    fn artifact(&self) -> Result<Artifact<'static>> {
        let digest = match self {
            Subject::Sha256(d) => ArtifactDigest::new(HashAlgorithm::Sha2256, d.to_vec()),
            Subject::Sha512(d) => ArtifactDigest::new(HashAlgorithm::Sha2512, d.to_vec()),
        }
        .map_err(|e| anyhow!("{e}"))?;
        Ok(Artifact::from_digest(digest))
    }
}

/// Who must have signed the bundle.
#[derive(Debug, Clone, Copy)]
pub enum Signer<'a> {
    /// A Fulcio certificate chaining to the root; any identity (the caller judges the claims
    /// returned), its SCT and log entry verified.
    Certificate,
    /// A managed key, DER SubjectPublicKeyInfo (npm's publish attestations are signed by the
    /// registry's key); the log entry verified.
    PublicKey(&'a [u8]),
}

/// What a bundle that verified says. The certificate claims are only as good as the
/// certificate, which chained to the trusted root when `Signer::Certificate` was asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verified {
    /// The certificate's subject alternative name (a workflow URI for GitHub Actions).
    pub identity: Option<String>,
    /// The OIDC issuer (Fulcio's issuer extension).
    pub issuer: Option<String>,
    /// The repository the artifact was built from, as the certificate says it: the
    /// provider-neutral claim (a URL), else GitHub's deprecated `owner/repository`.
    pub source_repository: Option<String>,
    /// The ref it was built from (`refs/tags/v1.0.0`).
    pub source_ref: Option<String>,
    /// The build configuration that ran (a workflow file with its ref), when claimed.
    pub build_config: Option<String>,
    /// The transparency log's integrated time, authenticated by the log's signature.
    pub integrated_time: Option<DateTime<Utc>>,
    /// The in-toto statement of a DSSE bundle (`None` for a message signature).
    pub statement: Option<serde_json::Value>,
}

/// Verifies `bundle_json` against `root` for `subject`, signed as `signer` says.
pub fn verify_bundle(
    bundle_json: &str,
    root: &TrustedRoot,
    subject: &Subject,
    signer: Signer<'_>,
) -> Result<Verified> {
    let bundle =
        Bundle::from_json(bundle_json).map_err(|e| anyhow!("not a Sigstore bundle: {e}"))?;
    let result = match signer {
        Signer::Certificate => root.verifier.verify(
            subject.artifact()?,
            &bundle,
            &VerificationPolicy::any_identity(),
        ),
        Signer::PublicKey(spki) => root.verifier.verify(
            subject.artifact()?,
            &bundle,
            &PublicKeyVerificationPolicy::new(DerPublicKey::from(spki.to_vec())),
        ),
    }
    .map_err(|e| anyhow!("the Sigstore bundle does not verify: {e}"))?;
    if matches!(signer, Signer::Certificate) && !result.certificate_verified() {
        bail!("the bundle's certificate was not verified against the trusted root");
    }
    if !result.tlog_verified() {
        bail!("the bundle's transparency log entry was not verified");
    }
    let statement = match &bundle.content {
        SignatureContent::DsseEnvelope(envelope) => Some(
            serde_json::from_slice(envelope.payload.as_bytes())
                .context("the bundle's DSSE payload is not JSON")?,
        ),
        _ => None,
    };
    let claims = result.certificate().map(|c| &c.ci_claims);
    let first = |a: Option<&String>, b: Option<&String>| a.or(b).cloned();
    Ok(Verified {
        identity: result.identity().map(|i| i.as_str().to_owned()),
        issuer: result.issuer().map(str::to_owned),
        source_repository: claims.and_then(|c| {
            first(
                c.source_repository_uri.as_ref(),
                c.deprecated_github.workflow_repository.as_ref(),
            )
        }),
        source_ref: claims.and_then(|c| {
            first(
                c.source_repository_ref.as_ref(),
                c.deprecated_github.workflow_ref.as_ref(),
            )
        }),
        build_config: claims.and_then(|c| c.build_config_uri.clone()),
        integrated_time: result
            .integrated_time()
            .and_then(|t| DateTime::from_timestamp(t.as_second(), 0)),
        statement,
    })
}

/// Checks an ECDSA P-256 / SHA-256 signature (DER) over `message` with a DER
/// SubjectPublicKeyInfo: the form of npm's registry signatures.
pub fn verify_p256_sha256(spki: &[u8], message: &[u8], signature_der: &[u8]) -> Result<()> {
    use sigstore_verify::crypto::{verify_signature, SigningScheme};
    use sigstore_verify::types::SignatureBytes;
    verify_signature(
        &DerPublicKey::from(spki.to_vec()),
        message,
        &SignatureBytes::from(signature_der.to_vec()),
        SigningScheme::EcdsaP256Sha256,
    )
    .map_err(|e| anyhow!("{e}"))
}

#[cfg(test)]
pub(crate) mod tests;
