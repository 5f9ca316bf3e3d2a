//! Who judges a release's attestations for `consume`: `gh attestation verify` (gh's
//! cryptography, its JSON judged again in `attestation`), the verifier itself
//! (`attestation::release_bundles`: Sigstore bundles checked offline against a trusted root
//! file, by the release policy), or both, whose verdicts must agree. In native mode gh is at
//! most a transport: `gh attestation download` fetches the bundles when no directory of them
//! is given.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use anyhow::{anyhow, Result};

use super::gh::{Gh, OfflineBundles};
use crate::attestation::policy::ReleaseSigner;
use crate::attestation::release_bundles::{read_trusted_roots, verify_subject, BundleSet, Wanted};
use crate::sigstore::keyless::TrustedRoots;

/// `--attestations`: whose verdict counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttestationMode {
    /// `gh attestation verify` only (needs gh, a token and GitHub's attestation API).
    Gh,
    /// The verifier's own Sigstore verification only.
    Native,
    /// Both, and they must agree.
    Both,
}

impl FromStr for AttestationMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "gh" => Ok(AttestationMode::Gh),
            "native" => Ok(AttestationMode::Native),
            "both" => Ok(AttestationMode::Both),
            other => Err(format!("`{other}` is not gh, native or both")),
        }
    }
}

impl AttestationMode {
    pub fn name(self) -> &'static str {
        match self {
            AttestationMode::Gh => "gh",
            AttestationMode::Native => "native",
            AttestationMode::Both => "both",
        }
    }

    fn uses_gh(self) -> bool {
        matches!(self, AttestationMode::Gh | AttestationMode::Both)
    }

    pub fn uses_native(self) -> bool {
        matches!(self, AttestationMode::Native | AttestationMode::Both)
    }
}

/// The two verdicts on one subject made into one: in `both` mode a disagreement is an error
/// naming which verifier refused. Pure.
pub fn combine(
    gh: Option<Result<(), String>>,
    native: Option<Result<(), String>>,
) -> Result<(), String> {
    match (gh, native) {
        (Some(Ok(())), Some(Ok(()))) | (Some(Ok(())), None) | (None, Some(Ok(()))) => Ok(()),
        (Some(Err(g)), None) => Err(g),
        (None, Some(Err(n))) => Err(n),
        (Some(Err(g)), Some(Ok(()))) => Err(format!(
            "gh attestation verify refused while the native verifier accepted (the verdicts \
             must agree): gh: {g}"
        )),
        (Some(Ok(())), Some(Err(n))) => Err(format!(
            "the native verifier refused while gh attestation verify accepted (the verdicts \
             must agree): native: {n}"
        )),
        (Some(Err(g)), Some(Err(n))) => Err(format!(
            "gh attestation verify refused: {g}; the native verifier refused: {n}"
        )),
        (None, None) => Err("no verifier was asked (neither gh nor native)".into()),
    }
}

/// Where native mode takes bundles from, as the command line says.
#[derive(Debug, Clone, Copy)]
pub(crate) enum BundleSource<'a> {
    /// `--bundles DIR`.
    Dir(&'a Path),
    /// `--bundles-from-release`: each release's own `*.sigstore.json` assets.
    Release,
    /// Neither: `gh attestation download` per subject.
    Download,
}

/// Where native mode takes bundles from.
enum Bundles {
    /// `--bundles DIR`, read once.
    Dir(BundleSet),
    /// The bundle assets of the release being verified, loaded when its assets are
    /// downloaded ([`Native::use_release_bundles`]); `None` before.
    Release(std::cell::RefCell<Option<BundleSet>>),
    /// `gh attestation download` per subject, into a directory of `scratch`.
    Download { scratch: tempfile::TempDir },
}

/// The verifier's own check of a release's attestations.
pub(crate) struct Native {
    roots: TrustedRoots,
    /// The file `roots` came from: gh's `--custom-trusted-root` in `both` mode.
    trusted_root: PathBuf,
    bundles: Bundles,
    signer: ReleaseSigner,
    /// Where the bundles handed to gh are written, one file per subject.
    gh_bundles: tempfile::TempDir,
}

impl Native {
    /// `signer_workflow` is `owner/repo/.github/workflows/<file>` (built from the API's
    /// `full_name` unless the caller named another), `ids` the API's repository and owner ids
    /// when the workflow is the repository's own.
    pub(crate) fn new(
        trusted_root: &Path,
        bundles: BundleSource<'_>,
        signer_workflow: &str,
        source_ref: &str,
        ids: super::gh::RepositoryIds,
    ) -> Result<Native> {
        let mut parts = signer_workflow.splitn(3, '/');
        let (owner, repo, workflow) = match (parts.next(), parts.next(), parts.next()) {
            (Some(o), Some(r), Some(w)) => (o, r, w),
            _ => {
                return Err(anyhow!(
                    "the signer workflow `{signer_workflow}` is not OWNER/REPO/.github/workflows/<file>"
                ))
            }
        };
        let mut signer = ReleaseSigner::new(&format!("{owner}/{repo}"), workflow, source_ref, None)
            .map_err(|e| anyhow!(e))?;
        (signer.repository_id, signer.owner_id) = ids;
        let roots = read_trusted_roots(trusted_root)?;
        let bundles = match bundles {
            BundleSource::Dir(dir) => Bundles::Dir(BundleSet::from_dir(dir)?),
            BundleSource::Release => Bundles::Release(std::cell::RefCell::new(None)),
            BundleSource::Download => Bundles::Download {
                scratch: tempfile::tempdir()?,
            },
        };
        Ok(Native {
            roots,
            trusted_root: trusted_root.to_path_buf(),
            bundles,
            signer,
            gh_bundles: tempfile::tempdir()?,
        })
    }

    /// What `gh attestation verify` verifies offline in `both` mode, when the bundles are
    /// already at hand (`--bundles DIR`, or the release's own bundle assets): the ones naming
    /// `digest`, written to a JSON lines file, and the trusted root native mode uses. So both
    /// verifiers judge the same bundles, and neither needs GitHub's attestation API. `None`
    /// when the bundles come from `gh attestation download` (gh then asks the API itself).
    fn offline_for_gh(&self, digest: &str) -> Result<Option<OfflineBundles>, String> {
        let lines = match &self.bundles {
            Bundles::Download { .. } => return Ok(None),
            Bundles::Dir(set) => set.json_lines_naming(&hex_of(digest)),
            Bundles::Release(current) => match current.borrow().as_ref() {
                Some(set) => set.json_lines_naming(&hex_of(digest)),
                None => return Err("no release's bundle assets were read".to_owned()),
            },
        };
        let n = std::fs::read_dir(self.gh_bundles.path())
            .map(|d| d.count())
            .unwrap_or(0);
        let bundles = self.gh_bundles.path().join(format!("subject-{n}.jsonl"));
        std::fs::write(&bundles, lines)
            .map_err(|e| format!("cannot write {}: {e}", bundles.display()))?;
        Ok(Some(OfflineBundles {
            bundles,
            trusted_root: self.trusted_root.clone(),
        }))
    }

    /// Whether the bundles are each release's own assets.
    pub(crate) fn wants_release_bundles(&self) -> bool {
        matches!(self.bundles, Bundles::Release(_))
    }

    /// The bundles of the release whose assets are verified next (with
    /// `--bundles-from-release`; otherwise nothing changes).
    pub(crate) fn use_release_bundles(&self, set: BundleSet) {
        if let Bundles::Release(current) = &self.bundles {
            *current.borrow_mut() = Some(set);
        }
    }

    fn verify(&self, gh: &Gh, subject: &str, wanted: &Wanted<'_>) -> Result<(), String> {
        match &self.bundles {
            Bundles::Dir(set) => verify_subject(set, &self.roots, &self.signer, wanted).map(drop),
            Bundles::Release(current) => match current.borrow().as_ref() {
                Some(set) => verify_subject(set, &self.roots, &self.signer, wanted).map(drop),
                None => Err("no release's bundle assets were read".to_owned()),
            },
            Bundles::Download { scratch } => {
                let dir = fresh_dir(scratch.path()).map_err(|e| format!("{e:#}"))?;
                gh.download_attestations(subject, wanted.predicate_type, &dir)?;
                let set = BundleSet::from_dir(&dir).map_err(|e| format!("{e:#}"))?;
                verify_subject(&set, &self.roots, &self.signer, wanted).map(drop)
            }
        }
    }
}

/// The lowercase hex of a `sha256:<hex>` digest (the whole text when it has no prefix).
fn hex_of(digest: &str) -> String {
    digest
        .strip_prefix("sha256:")
        .unwrap_or(digest)
        .to_ascii_lowercase()
}

/// A new empty directory under `scratch`, one per download, so a subject's bundles are not
/// mixed with another's (they would be ignored anyway: bundles are matched by digest).
fn fresh_dir(scratch: &Path) -> Result<PathBuf> {
    let n = std::fs::read_dir(scratch)?.count();
    let dir = scratch.join(format!("subject-{n}"));
    std::fs::create_dir(&dir)?;
    Ok(dir)
}

/// The verifiers `consume` asks, per `--attestations`.
pub(crate) struct Attesters<'a> {
    pub(crate) gh: &'a Gh,
    pub(crate) mode: AttestationMode,
    pub(crate) native: Option<Native>,
}

impl Attesters<'_> {
    /// `subject` is a file path or `oci://repository@sha256:…` (what gh is given), `name` the
    /// statement's subject name the release policy expects (a file's name, the image's
    /// repository), `digest` its `sha256:<hex>`.
    pub(crate) fn verify(
        &self,
        subject: &str,
        name: &str,
        digest: &str,
        predicate_type: &str,
        source_commit: Option<&str>,
    ) -> Result<(), String> {
        let gh = self.mode.uses_gh().then(|| {
            let offline = match (&self.native, self.mode.uses_native()) {
                (Some(native), true) => native.offline_for_gh(digest)?,
                _ => None,
            };
            self.gh
                .verify_attestation(subject, digest, predicate_type, offline.as_ref())
        });
        let native = match (&self.native, self.mode.uses_native()) {
            (Some(native), true) => Some(native.verify(
                self.gh,
                subject,
                &Wanted {
                    name,
                    digest,
                    predicate_type,
                    source_commit,
                },
            )),
            (None, true) => Some(Err(
                "native verification needs --trusted-root (the JSON lines `gh attestation \
                 trusted-root` prints)"
                    .to_owned(),
            )),
            _ => None,
        };
        combine(gh, native)
    }

    /// With `--bundles-from-release`: downloads the release's bundle assets
    /// (`*.sigstore.json` among `names`) into `dir` and verifies with them from now on. A
    /// release without any leaves an empty set: every subject is then refused, naming it.
    pub(crate) fn load_release_bundles(
        &self,
        tag: &str,
        names: &[String],
        dir: &Path,
    ) -> Result<()> {
        let Some(native) = self.native.as_ref().filter(|n| n.wants_release_bundles()) else {
            return Ok(());
        };
        std::fs::create_dir_all(dir)?;
        let pattern = format!(
            "*{}",
            crate::attestation::release_bundles::BUNDLE_ASSET_SUFFIX
        );
        if names
            .iter()
            .any(|n| n.ends_with(crate::attestation::release_bundles::BUNDLE_ASSET_SUFFIX))
        {
            self.gh.download(tag, &pattern, dir)?;
        }
        native.use_release_bundles(BundleSet::from_dir(dir)?);
        Ok(())
    }

    /// Who judged, for the log.
    pub(crate) fn describe(&self) -> &'static str {
        match self.mode {
            AttestationMode::Gh => "gh attestation verify",
            AttestationMode::Native => "the native Sigstore verifier",
            AttestationMode::Both => "gh attestation verify and the native Sigstore verifier",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mode_is_one_of_three_words() {
        assert_eq!("gh".parse(), Ok(AttestationMode::Gh));
        assert_eq!("native".parse(), Ok(AttestationMode::Native));
        assert_eq!("both".parse(), Ok(AttestationMode::Both));
        assert!("Both".parse::<AttestationMode>().is_err());
        assert!("".parse::<AttestationMode>().is_err());
    }

    #[test]
    fn both_verdicts_must_agree_and_the_refusing_one_is_named() {
        let ok = || Some(Ok(()));
        let no = |why: &str| Some(Err(why.to_owned()));
        assert_eq!(combine(ok(), ok()), Ok(()));
        assert_eq!(combine(ok(), None), Ok(()));
        assert_eq!(combine(None, ok()), Ok(()));
        let why = combine(ok(), no("bad SAN")).unwrap_err();
        assert!(
            why.starts_with("the native verifier refused while gh") && why.contains("bad SAN"),
            "{why}"
        );
        let why = combine(no("no attestation"), ok()).unwrap_err();
        assert!(
            why.starts_with("gh attestation verify refused while the native")
                && why.contains("no attestation"),
            "{why}"
        );
        let why = combine(no("g"), no("n")).unwrap_err();
        assert!(
            why.contains("gh attestation verify refused: g")
                && why.contains("native verifier refused: n")
        );
        assert_eq!(combine(None, no("n")), Err("n".into()));
        assert!(combine(None, None).is_err());
    }

    /// Native mode from a directory of real bundles (cli/cli's, ../shared/fixtures): the
    /// signer built from the workflow `consume` names, the API's repository id compared with
    /// the certificate's, and the bundles of the release being verified. gh is not run: the
    /// bundles are given.
    #[test]
    fn native_mode_verifies_from_the_bundles_given_with_the_api_s_ids() {
        let Some(dir) = crate::sigstore::tests::fixtures() else {
            return;
        };
        let sigstore = dir.join("sigstore");
        let gh = Gh {
            repository: "actions/attest-demo".into(),
            policy: crate::attestation::AttestationPolicy {
                signer_workflow: "actions/attest-demo/.github/workflows/build-python.yml".into(),
                source_ref: "refs/heads/main".into(),
            },
            ids: (None, None),
            custom_signer: false,
        };
        let native = |repository_id: &str| {
            Native::new(
                &sigstore.join("github-trusted_root.json"),
                BundleSource::Dir(&sigstore.join("cli-cli")),
                &gh.policy.signer_workflow,
                &gh.policy.source_ref,
                (Some(repository_id.to_owned()), None),
            )
            .unwrap()
        };
        let verify = |attesters: &Attesters| {
            attesters.verify(
                "github_provenance_demo-0.0.12-py3-none-any.whl",
                "github_provenance_demo-0.0.12-py3-none-any.whl",
                "sha256:ae57936def59bc4c75edd3a837d89bcefc6d3a5e31d55a6fa7a71624f92c3c3b",
                crate::attestation::PROVENANCE,
                Some("a6c23b9806c593664f68637c8f9d45dfcf98b2db"),
            )
        };
        let attesters = Attesters {
            gh: &gh,
            mode: AttestationMode::Native,
            native: Some(native("763287532")),
        };
        verify(&attesters).unwrap();
        // Another repository id than the API's (a repository deleted and re-created under the
        // same name): refused naming the claim.
        let attesters = Attesters {
            native: Some(native("1")),
            ..attesters
        };
        let why = verify(&attesters).unwrap_err();
        assert!(why.contains("source repository identifier"), "{why}");
        let attesters = Attesters {
            native: None,
            ..attesters
        };
        assert!(verify(&attesters).unwrap_err().contains("--trusted-root"));

        // `--bundles-from-release`: nothing verifies before a release's bundles are read.
        let from_release = Native::new(
            &sigstore.join("github-trusted_root.json"),
            BundleSource::Release,
            &gh.policy.signer_workflow,
            &gh.policy.source_ref,
            (Some("763287532".into()), None),
        )
        .unwrap();
        let attesters = Attesters {
            native: Some(from_release),
            ..attesters
        };
        assert!(verify(&attesters)
            .unwrap_err()
            .contains("no release's bundle assets"));
        let native = attesters.native.as_ref().unwrap();
        native.use_release_bundles(BundleSet::from_dir(&sigstore.join("cli-cli")).unwrap());
        verify(&attesters).unwrap();
        // Another release's bundles (none of them names the wheel): refused naming it.
        let empty = tempfile::tempdir().unwrap();
        native.use_release_bundles(BundleSet::from_dir(empty.path()).unwrap());
        let why = verify(&attesters).unwrap_err();
        assert!(why.contains("no bundle among the 0"), "{why}");
    }

    /// In `both` mode gh is handed, per subject, only the bundles naming its digest (gh fails
    /// on the first bundle of the file that does not verify for the artifact) and native
    /// mode's root file; with bundles from `gh attestation download`, nothing (gh asks the API).
    #[test]
    fn gh_is_handed_the_bundles_naming_the_subject_and_the_same_root() {
        let Some(dir) = crate::sigstore::tests::fixtures() else {
            return;
        };
        let sigstore = dir.join("sigstore");
        let root = sigstore.join("github-trusted_root.json");
        let native = |bundles| {
            Native::new(
                &root,
                bundles,
                "actions/attest-demo/.github/workflows/build-python.yml",
                "refs/heads/main",
                (None, None),
            )
            .unwrap()
        };
        let cli_cli = sigstore.join("cli-cli");
        let from_dir = native(BundleSource::Dir(&cli_cli));
        let wheel = "sha256:AE57936DEF59BC4C75EDD3A837D89BCEFC6D3A5E31D55A6FA7A71624F92C3C3B";
        let offline = from_dir.offline_for_gh(wheel).unwrap().unwrap();
        assert_eq!(offline.trusted_root, root);
        let text = std::fs::read_to_string(&offline.bundles).unwrap();
        assert!(offline.bundles.extension().is_some_and(|e| e == "jsonl"));
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        // The wheel's bundle file holds it once; its `-missing-cert` and
        // `-missing-verification-material` variants name it too.
        assert!(!lines.is_empty() && lines.len() <= 3, "{}", lines.len());
        for bundle in &lines {
            assert_eq!(
                crate::attestation::release_bundles::named_sha256s(bundle),
                [hex_of(wheel)]
            );
        }
        // A digest no bundle names: an empty file, which gh refuses ("provided bundle file is
        // empty") as the native verifier refuses the subject.
        let none = from_dir
            .offline_for_gh(&format!("sha256:{}", "0".repeat(64)))
            .unwrap()
            .unwrap();
        assert_eq!(std::fs::read_to_string(none.bundles).unwrap(), "");
        // Before a release's bundles are read there is nothing to hand over.
        assert!(native(BundleSource::Release)
            .offline_for_gh(wheel)
            .unwrap_err()
            .contains("no release's bundle assets"));
        assert!(native(BundleSource::Download)
            .offline_for_gh(wheel)
            .unwrap()
            .is_none());
    }
}
