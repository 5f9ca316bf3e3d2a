//! A release's attestations verified natively, offline: the Sigstore bundles of a directory
//! (a release's `*.sigstore.json` assets, or what `gh attestation download` wrote), each
//! subject of the release matched to the bundles whose signed statement names its digest, and
//! every such bundle verified against the trusted root (`sigstore::keyless`) and judged by the
//! release policy (`policy`). Which file a bundle came from is never trusted: a bundle whose
//! statement names none of the subject's digests is ignored, a subject no bundle names is
//! refused naming it.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};

use super::policy::{judge, ExpectedSubject, Policy, ReleaseSigner, Signer};
use crate::sigstore::keyless::{verify_keyless, ArtifactInput, CertificateClaims, TrustedRoots};

/// How a release names its bundle assets: `<what>.sigstore.json`, each holding one Sigstore
/// bundle or JSON lines of them (`template_formats::model::publish::BUNDLE_ASSET_SUFFIX`).
pub use template_formats::model::publish::BUNDLE_ASSET_SUFFIX;

/// The largest bundle file (one bundle is a few kilobytes; JSON lines hold a handful).
const MAX_BUNDLE_BYTES: u64 = 16 << 20;
/// The largest trusted root file (GitHub's and Sigstore's are tens of kilobytes).
const MAX_TRUSTED_ROOT_BYTES: u64 = 4 << 20;

/// A file of a release directory that holds bundles rather than being attested itself (a
/// bundle cannot be attested by the step that makes it). `gh attestation download` names its
/// files `<algorithm>:<hex>.jsonl`.
pub fn is_bundle_file(name: &str) -> bool {
    name.ends_with(BUNDLE_ASSET_SUFFIX) || name.ends_with(".jsonl")
}

/// Reads a trusted root file: one Sigstore trusted root, or the JSON lines
/// `gh attestation trusted-root` prints.
pub fn read_trusted_roots(path: &Path) -> Result<TrustedRoots> {
    let bytes =
        template_formats::bounded_read::read_regular(path, MAX_TRUSTED_ROOT_BYTES, "trusted root")?;
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow!("the trusted root {} is not UTF-8 text", path.display()))?;
    TrustedRoots::from_text(&text, &path.display().to_string())
}

/// One bundle, with the sha256 digests its statement names (read before verification, only
/// to pick the bundles worth verifying for a subject).
struct LoadedBundle {
    /// `file` or `file line N`.
    origin: String,
    json: String,
    sha256s: Vec<String>,
}

/// The bundles of a directory.
pub struct BundleSet {
    dir: PathBuf,
    bundles: Vec<LoadedBundle>,
}

/// The sha256 digests an (unverified) bundle's DSSE statement names as subjects.
pub(crate) fn named_sha256s(bundle: &serde_json::Value) -> Vec<String> {
    use base64::Engine as _;
    let payload = bundle["dsseEnvelope"]["payload"].as_str().unwrap_or("");
    let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(payload) else {
        return Vec::new();
    };
    let Ok(statement) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return Vec::new();
    };
    statement["subject"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["digest"]["sha256"].as_str().map(str::to_ascii_lowercase))
        .collect()
}

impl BundleSet {
    /// Every bundle file of `dir` (see [`is_bundle_file`]); an unreadable or non-JSON bundle
    /// file is an error naming it.
    pub fn from_dir(dir: &Path) -> Result<BundleSet> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .with_context(|| format!("cannot list the attestation bundles in {}", dir.display()))?
            .map(|e| e.map(|e| e.path()))
            .collect::<std::io::Result<_>>()?;
        files.retain(|p| {
            p.file_name()
                .is_some_and(|n| is_bundle_file(&n.to_string_lossy()))
        });
        files.sort();
        let mut bundles = Vec::new();
        for file in &files {
            let bytes =
                template_formats::bounded_read::read_regular(file, MAX_BUNDLE_BYTES, "bundle")?;
            let text = String::from_utf8(bytes)
                .map_err(|_| anyhow!("the bundle file {} is not UTF-8 text", file.display()))?;
            let values: Vec<serde_json::Value> = serde_json::Deserializer::from_str(&text)
                .into_iter()
                .collect::<Result<_, _>>()
                .with_context(|| format!("the bundle file {} is not JSON", file.display()))?;
            let many = values.len() > 1;
            for (i, value) in values.iter().enumerate() {
                let name = file.file_name().unwrap_or_default().to_string_lossy();
                bundles.push(LoadedBundle {
                    origin: if many {
                        format!("{name} bundle {}", i + 1)
                    } else {
                        name.into_owned()
                    },
                    json: value.to_string(),
                    sha256s: named_sha256s(value),
                });
            }
        }
        Ok(BundleSet {
            dir: dir.to_path_buf(),
            bundles,
        })
    }

    pub fn len(&self) -> usize {
        self.bundles.len()
    }

    /// The bundles whose statement names `sha256_hex` (lowercase hex) as a subject, one
    /// compact JSON per line: what `gh attestation verify --bundle FILE.jsonl` reads (cli/cli
    /// v2.60.0 `pkg/cmd/attestation/verification/attestation.go`, `GetLocalAttestations`).
    /// Only these: gh verifies every bundle of the file against the artifact and fails on the
    /// first that does not name it (`verification/sigstore.go`, `Verify`). Unverified: this
    /// only picks what to hand over.
    pub fn json_lines_naming(&self, sha256_hex: &str) -> String {
        self.bundles
            .iter()
            .filter(|b| b.sha256s.iter().any(|d| d == sha256_hex))
            .map(|b| format!("{}\n", b.json))
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.bundles.is_empty()
    }
}

/// The subject an attestation must be about, and what it must say.
#[derive(Debug, Clone)]
pub struct Wanted<'a> {
    /// The statement's subject name (a file's name, an image's repository).
    pub name: &'a str,
    /// `sha256:<hex>`.
    pub digest: &'a str,
    pub predicate_type: &'a str,
    /// The commit every attestation of the release must have been made from (the receipt's
    /// `source_commit`); `None` only before the receipt is read.
    pub source_commit: Option<&'a str>,
}

/// Verifies that some bundle of `bundles` attests `wanted` under `roots`, signed as `signer`
/// (its `source_commit` replaced by `wanted`'s). Returns the accepted certificate's claims;
/// the error names the subject and, for each bundle that names it, why it was refused.
pub fn verify_subject(
    bundles: &BundleSet,
    roots: &TrustedRoots,
    signer: &ReleaseSigner,
    wanted: &Wanted<'_>,
) -> Result<CertificateClaims, String> {
    let hex = wanted
        .digest
        .strip_prefix("sha256:")
        .filter(|h| h.len() == 64)
        .ok_or_else(|| format!("{} is not sha256:<64 hex digits>", wanted.digest))?
        .to_ascii_lowercase();
    let digest: [u8; 32] = hex::decode(&hex)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| format!("{} is not sha256:<64 hex digits>", wanted.digest))?;
    let mut signer = signer.clone();
    signer.source_commit = wanted.source_commit.map(str::to_ascii_lowercase);
    let policy = Policy {
        signer: Signer::Release(signer),
        predicate_type: Some(wanted.predicate_type.to_owned()),
        subject: ExpectedSubject {
            name: Some(wanted.name.to_owned()),
            digests: vec![("sha256", hex.clone())],
        },
    };
    let candidates: Vec<&LoadedBundle> = bundles
        .bundles
        .iter()
        .filter(|b| b.sha256s.contains(&hex))
        .collect();
    if candidates.is_empty() {
        return Err(format!(
            "no bundle among the {} in {} names `{}` (sha256:{hex}) as its subject",
            bundles.len(),
            bundles.dir.display(),
            wanted.name
        ));
    }
    let mut refusals = Vec::new();
    for bundle in candidates {
        match verify_keyless(&bundle.json, roots, ArtifactInput::Sha256(&digest)) {
            Ok(verified) => {
                let (differ, _) = judge(
                    &policy,
                    &verified.certificate,
                    verified.statement.as_deref(),
                );
                if differ.is_empty() {
                    return Ok(verified.certificate);
                }
                let why: Vec<String> = differ.iter().map(ToString::to_string).collect();
                refusals.push(format!("{}: {}", bundle.origin, why.join("; ")));
            }
            Err(e) => refusals.push(format!("{}: {e:#}", bundle.origin)),
        }
    }
    Err(format!(
        "no bundle in {} attests `{}` (sha256:{hex}, {}) as the release policy requires: {}",
        bundles.dir.display(),
        wanted.name,
        wanted.predicate_type,
        refusals.join(" | ")
    ))
}

#[cfg(test)]
mod tests;
