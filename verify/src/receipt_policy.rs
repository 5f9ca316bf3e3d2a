//! The manifest a receipt is judged by, and where it came from: never a path of the machine
//! that built the tool.
//!
//! The consumer's verifier (`template-verify`) takes it from the release it verifies: the
//! `manifest.yaml` asset, whose sha256 the receipt records among its artifacts and which the
//! release workflow attests like every other asset. So the verifier judges a receipt by the
//! policy that release was made under, and the receipt must name exactly those bytes (see
//! [`binding_problems`]): a manifest swapped for a laxer one is refused, not obeyed. The
//! maintainer's `cargo xtask receipt verify` / `pin` / `gate` / `release` judge by the
//! checkout's `template/manifest.yaml`, which the command line passes in.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::receipt::{problem, Problem};
use template_formats::bounded_read::{read_regular, MAX_PARSED_ARTIFACT_BYTES};
use template_formats::hash::sha256_hex;
use template_formats::manifest::Manifest;
use template_formats::model::receipt::Receipt;

/// The release asset that carries a release's manifest (the receipt's `artifacts` name).
pub const MANIFEST_ASSET: &str = "manifest.yaml";

/// A manifest to judge receipts by.
pub struct ReceiptPolicy {
    pub manifest: Manifest,
    /// The file it was read from, for messages.
    pub origin: PathBuf,
    /// sha256 of that file's bytes.
    pub sha256: String,
    /// A release's own manifest: the receipt must record these bytes as its `manifest.yaml`.
    /// A checkout's manifest judges receipts of any release (older ones too) by today's rules.
    pub from_release: bool,
}

impl ReceiptPolicy {
    fn read(path: &Path, from_release: bool) -> Result<ReceiptPolicy> {
        let bytes = read_regular(path, MAX_PARSED_ARTIFACT_BYTES, "template manifest")
            .with_context(|| format!("cannot read the template manifest {}", path.display()))?;
        let text =
            String::from_utf8(bytes).with_context(|| format!("{} is not UTF-8", path.display()))?;
        Ok(ReceiptPolicy {
            manifest: Manifest::parse(&text, path)?,
            origin: path.to_path_buf(),
            sha256: sha256_hex(text.as_bytes()),
            from_release,
        })
    }

    /// The maintainer's checkout manifest (`template/manifest.yaml`), given by the command line.
    pub fn checkout(path: &Path) -> Result<ReceiptPolicy> {
        ReceiptPolicy::read(path, false)
    }

    /// A release's own `manifest.yaml` asset; the receipt must name its sha256.
    pub fn release_asset(path: &Path) -> Result<ReceiptPolicy> {
        ReceiptPolicy::read(path, true)
    }

    /// The maintainer's commands: `--manifest FILE` (a release's asset) when given, else the
    /// checkout's manifest at `checkout`.
    pub fn for_maintainer(manifest: Option<&Path>, checkout: &Path) -> Result<ReceiptPolicy> {
        match manifest {
            Some(file) => ReceiptPolicy::release_asset(file),
            None => ReceiptPolicy::checkout(checkout),
        }
    }

    /// The consumer's verifier: `--manifest FILE`, else `manifest.yaml` among `--artifacts DIR`.
    /// Both are the release's own asset; the verifier has no manifest of its own to fall back on.
    pub fn for_verifier(
        manifest: Option<&Path>,
        artifacts: Option<&Path>,
    ) -> Result<ReceiptPolicy> {
        match (manifest, artifacts) {
            (Some(file), _) => ReceiptPolicy::release_asset(file),
            (None, Some(dir)) => ReceiptPolicy::release_asset(&dir.join(MANIFEST_ASSET)),
            (None, None) => bail!(
                "template-verify judges a receipt by its release's manifest: pass --artifacts DIR \
                 (the release's assets, with {MANIFEST_ASSET}) or --manifest FILE (the release's \
                 {MANIFEST_ASSET} asset)"
            ),
        }
    }
}

/// A release's manifest must be the one its receipt records: the same name, the same sha256.
/// Nothing for a checkout's manifest. Pure.
pub fn binding_problems(receipt: &Receipt, policy: &ReceiptPolicy) -> Vec<Problem> {
    if !policy.from_release {
        return Vec::new();
    }
    let recorded = receipt
        .artifacts
        .iter()
        .enumerate()
        .find(|(_, a)| a.name == MANIFEST_ASSET);
    match recorded {
        None => vec![problem(
            "artifacts",
            format!(
                "names no `{MANIFEST_ASSET}`, so the manifest {} cannot be shown to be this \
                 release's",
                policy.origin.display()
            ),
        )],
        Some((i, a)) if a.sha256 != policy.sha256 => vec![problem(
            format!("artifacts[{i}].sha256"),
            format!(
                "the receipt is judged by {} (sha256 {}), but it records `{MANIFEST_ASSET}` as \
                 {}: that manifest is not this release's",
                policy.origin.display(),
                policy.sha256,
                a.sha256
            ),
        )],
        Some(_) => Vec::new(),
    }
}

#[cfg(any(test, feature = "test-support"))]
pub mod tests {
    use super::*;
    use crate::receipt::tests_support::repo_root;
    #[cfg(test)]
    use crate::receipt::tests_support::sample;
    use template_formats::manifest::MANIFEST_PATH;

    /// The committed manifest as a release's asset, and as a checkout's.
    pub fn committed(from_release: bool) -> ReceiptPolicy {
        let path = repo_root().join(MANIFEST_PATH);
        if from_release {
            ReceiptPolicy::release_asset(&path).unwrap()
        } else {
            ReceiptPolicy::checkout(&path).unwrap()
        }
    }

    #[test]
    fn a_release_manifest_must_be_the_one_its_receipt_records() {
        let policy = committed(true);
        let mut r = sample();
        // The sample records sha256("manifest.yaml") for it: not the committed file's bytes.
        let problems = binding_problems(&r, &policy);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].field, "artifacts[4].sha256");
        assert!(problems[0].problem.contains("not this release's"));

        for a in &mut r.artifacts {
            if a.name == MANIFEST_ASSET {
                a.sha256 = policy.sha256.clone();
            }
        }
        assert!(binding_problems(&r, &policy).is_empty());

        r.artifacts.retain(|a| a.name != MANIFEST_ASSET);
        assert_eq!(binding_problems(&r, &policy)[0].field, "artifacts");
        // The maintainer's checkout judges any receipt by today's rules.
        assert!(binding_problems(&r, &committed(false)).is_empty());
    }

    #[test]
    fn the_verifier_has_no_manifest_of_its_own() {
        let err = ReceiptPolicy::for_verifier(None, None).err().unwrap();
        let text = format!("{err:#}");
        assert!(
            text.contains("--artifacts DIR") && text.contains("--manifest FILE"),
            "{text}"
        );

        let dir = tempfile::tempdir().unwrap();
        let err = ReceiptPolicy::for_verifier(None, Some(dir.path()))
            .err()
            .unwrap();
        assert!(
            format!("{err:#}").contains(&dir.path().join(MANIFEST_ASSET).display().to_string()),
            "{err:#}"
        );
        std::fs::copy(
            repo_root().join(MANIFEST_PATH),
            dir.path().join(MANIFEST_ASSET),
        )
        .unwrap();
        let policy = ReceiptPolicy::for_verifier(None, Some(dir.path())).unwrap();
        assert!(policy.from_release);
        assert_eq!(policy.origin, dir.path().join(MANIFEST_ASSET));
        let explicit = ReceiptPolicy::for_verifier(
            Some(&dir.path().join(MANIFEST_ASSET)),
            Some(Path::new("/nonexistent")),
        )
        .unwrap();
        assert_eq!(explicit.sha256, policy.sha256);
    }
}
