//! `receipt verify --attestations DIR`: the receipt's own provenance attestation, and each
//! artifact file's, checked offline from the release's Sigstore bundles by the release policy.
//! A receipt edited consistently (a smoke output changed, its digests and file name updated)
//! holds together for every other check; only a signature made when the release was made can
//! tell it from the original, and its digest then matches no bundle.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};

use super::policy::ReleaseSigner;
use super::release_bundles::{
    is_bundle_file, read_trusted_roots, verify_subject, BundleSet, Wanted,
};
use super::PROVENANCE;
use crate::receipt::{problem, Problem};

/// What `--attestations` asks for.
#[derive(Debug, Clone)]
pub struct ReceiptAttestationCheck {
    /// The release's bundles (`*.sigstore.json`).
    pub bundles: PathBuf,
    pub trusted_root: PathBuf,
    /// `owner/repo` of the release workflow, byte-exact (as GitHub's API spells it).
    pub repository: String,
    /// `.github/workflows/<file>`.
    pub workflow: String,
    /// `refs/heads/<default branch>`.
    pub source_ref: String,
}

/// The `source_commit` a receipt file claims, read before its attestation is checked only to
/// ask the attestation for that commit (the attestation then proves the receipt said it).
pub(crate) fn claimed_source_commit(receipt: &Path) -> Option<String> {
    let bytes = template_formats::bounded_read::read_regular(
        receipt,
        template_formats::bounded_read::MAX_RECEIPT_BYTES,
        "receipt",
    )
    .ok()?;
    let value: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    value["source_commit"].as_str().map(str::to_owned)
}

/// The files whose attestations are checked: the receipt, then every file of `artifacts`
/// but the bundles, sorted.
fn subjects(receipt: &Path, artifacts: Option<&Path>) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    if let Some(dir) = artifacts {
        for entry in std::fs::read_dir(dir)
            .map_err(|e| anyhow!("cannot list the artifacts in {}: {e}", dir.display()))?
        {
            let path = entry?.path();
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            if path.is_file() && !is_bundle_file(&name) {
                files.push(path);
            }
        }
    }
    files.sort();
    let receipt_name = receipt.file_name();
    files.retain(|f| f.file_name() != receipt_name);
    files.insert(0, receipt.to_path_buf());
    Ok(files)
}

/// The problems of the attestations (field `attestation`, naming the file); none when every
/// file is attested. An error is about an argument (an unreadable root or bundle file).
pub fn attestation_problems(
    receipt: &Path,
    artifacts: Option<&Path>,
    check: &ReceiptAttestationCheck,
) -> Result<Vec<Problem>> {
    let signer = ReleaseSigner::new(&check.repository, &check.workflow, &check.source_ref, None)
        .map_err(|e| anyhow!(e))?;
    let roots = read_trusted_roots(&check.trusted_root)?;
    let bundles = BundleSet::from_dir(&check.bundles)?;
    let Some(commit) = claimed_source_commit(receipt) else {
        return Ok(vec![problem(
            "attestation",
            format!(
                "{} names no source_commit, so no attestation can be held to it",
                receipt.display()
            ),
        )]);
    };
    let mut problems = Vec::new();
    for file in subjects(receipt, artifacts)? {
        let name = file
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let digest = template_formats::bounded_read::sha256_regular(
            &file,
            template_formats::bounded_read::MAX_ARTIFACT_BYTES,
            "attested file",
        )
        .map(|hex| format!("sha256:{hex}"))?;
        let wanted = Wanted {
            name: &name,
            digest: &digest,
            predicate_type: PROVENANCE,
            source_commit: Some(&commit),
        };
        if let Err(why) = verify_subject(&bundles, &roots, &signer, &wanted) {
            problems.push(problem(
                "attestation",
                format!("{name} is not attested by {}: {why}", signer.workflow_uri()),
            ));
        }
    }
    Ok(problems)
}
