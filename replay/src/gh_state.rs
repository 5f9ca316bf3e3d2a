//! The gh stand-in's on-disk state (`gh.py`), written from the harness: fixture releases and
//! attestations a test sets up without replaying the workflow that would make them, the
//! attestation store the attest stand-in appends to, and the copies of other repositories'
//! states a job may read.
//!
//! A state dir holds `releases/<tag>/release.json` + `releases/<tag>/assets/`, the
//! `published-tags` list (a tag once published is never reusable) and `attestations.jsonl`,
//! one [`AttestationRecord`] per line.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context as _, Result};
use serde_json::{json, Value};

use crate::config::Replay;
use crate::runner::{give_to_runner, set_mode};

/// The file in a gh state dir with every attestation of that repository.
pub const ATTESTATION_STORE: &str = "attestations.jsonl";

/// What GitHub's attestation API knows about one attestation, as `gh attestation verify`
/// checks it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AttestationRecord {
    /// `owner/name` of the repository whose workflow signed it.
    pub repository: String,
    /// `owner/name/.github/workflows/<file>.yml`: the workflow that signed it.
    pub signer_workflow: String,
    /// The ref the signing run came from (`GITHUB_REF`): the certificate's SourceRepositoryRef
    /// (Fulcio OID 1.3.6.1.4.1.57264.1.14), and the `@<ref>` its subject alternative name ends
    /// with (the workflow's own ref, the same for a workflow that is not a reusable one).
    pub source_ref: String,
    /// `github-hosted` or `self-hosted`: the certificate's RunnerEnvironment (OID …1.11).
    pub runner_environment: String,
    /// The in-toto predicate type, e.g. `https://slsa.dev/provenance/v1`.
    pub predicate_type: String,
    pub subjects: Vec<RecordSubject>,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RecordSubject {
    /// A file name, or `host/repo` for an image.
    pub name: String,
    /// `sha256:<hex>`.
    pub digest: String,
}

pub const SLSA_PROVENANCE_V1: &str = "https://slsa.dev/provenance/v1";
pub const SPDX_DOCUMENT_V2_3: &str = "https://spdx.dev/Document/v2.3";
pub const CYCLONEDX_BOM: &str = "https://cyclonedx.org/bom";

fn valid_digest(d: &str) -> bool {
    d.strip_prefix("sha256:").is_some_and(|h| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// Where a run that signs came from: its ref and its runner.
#[derive(Clone, Copy, Debug)]
pub struct SignedFrom<'a> {
    pub source_ref: &'a str,
    pub runner_environment: &'a str,
}

/// A run of the default branch `main` on a GitHub-hosted runner, as the release workflow's are.
pub const MAIN_ON_GITHUB_HOSTED: SignedFrom<'static> = SignedFrom {
    source_ref: "refs/heads/main",
    runner_environment: "github-hosted",
};

/// Appends an attestation to `gh_state_dir`'s store, as if `signer_workflow` of `repository`
/// had attested `subjects` (`(name, "sha256:<hex>")`) in a run of `main` on a GitHub-hosted
/// runner.
pub fn record_attestation(
    gh_state_dir: &Path,
    repository: &str,
    signer_workflow: &str,
    predicate_type: &str,
    subjects: &[(String, String)],
) -> Result<()> {
    record_attestation_from(
        gh_state_dir,
        repository,
        signer_workflow,
        MAIN_ON_GITHUB_HOSTED,
        predicate_type,
        subjects,
    )
}

/// [`record_attestation`] for a run from another ref or runner.
pub fn record_attestation_from(
    gh_state_dir: &Path,
    repository: &str,
    signer_workflow: &str,
    from: SignedFrom,
    predicate_type: &str,
    subjects: &[(String, String)],
) -> Result<()> {
    if !from.source_ref.starts_with("refs/") {
        bail!(
            "record_attestation: source ref {:?} is not refs/…",
            from.source_ref
        );
    }
    if !["github-hosted", "self-hosted"].contains(&from.runner_environment) {
        bail!(
            "record_attestation: runner environment {:?} is neither github-hosted nor self-hosted",
            from.runner_environment
        );
    }
    if repository.split('/').count() != 2 {
        bail!("record_attestation: repository {repository:?} is not owner/name");
    }
    // A reusable workflow of another repository may sign, so only the form is checked.
    let parts: Vec<&str> = signer_workflow.split('/').collect();
    if parts.len() != 5
        || parts[2..4] != [".github", "workflows"]
        || !(parts[4].ends_with(".yml") || parts[4].ends_with(".yaml"))
    {
        bail!("record_attestation: signer workflow {signer_workflow:?} is not owner/name/.github/workflows/<file>.yml");
    }
    if subjects.is_empty() {
        bail!("record_attestation: no subjects");
    }
    for (name, digest) in subjects {
        if !valid_digest(digest) {
            bail!("record_attestation: subject {name}: digest {digest:?} is not sha256:<64 lowercase hex>");
        }
    }
    append_record(
        gh_state_dir,
        &AttestationRecord {
            repository: repository.into(),
            signer_workflow: signer_workflow.into(),
            source_ref: from.source_ref.into(),
            runner_environment: from.runner_environment.into(),
            predicate_type: predicate_type.into(),
            subjects: subjects
                .iter()
                .map(|(name, digest)| RecordSubject {
                    name: name.clone(),
                    digest: digest.clone(),
                })
                .collect(),
        },
    )
}

/// The file in a gh state dir with what `gh api repos/<owner>/<name>` answers.
pub const REPOSITORY_FILE: &str = "repository.json";

/// The trusted root registered with [`Replay::sigstore`](crate::Replay::sigstore), one JSON
/// line: what `gh attestation trusted-root` prints.
pub const TRUSTED_ROOT_FILE: &str = "trusted_root.jsonl";

/// Records the repository's default branch, as GitHub's API reports it
/// (`gh api repos/<owner>/<name>` → `default_branch`). Without it, the stand-in refuses
/// `gh api` for that repository rather than guess.
pub fn set_default_branch(gh_state_dir: &Path, branch: &str) -> Result<()> {
    std::fs::create_dir_all(gh_state_dir)
        .with_context(|| format!("creating {}", gh_state_dir.display()))?;
    let path = gh_state_dir.join(REPOSITORY_FILE);
    std::fs::write(&path, json!({ "default_branch": branch }).to_string())
        .with_context(|| format!("writing {}", path.display()))
}

pub(crate) fn append_record(gh_state_dir: &Path, record: &AttestationRecord) -> Result<()> {
    std::fs::create_dir_all(gh_state_dir)
        .with_context(|| format!("creating {}", gh_state_dir.display()))?;
    let path = gh_state_dir.join(ATTESTATION_STORE);
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    writeln!(f, "{}", serde_json::to_string(record)?)?;
    Ok(())
}

/// Every attestation in a gh state dir's store, oldest first.
pub fn attestation_records(gh_state_dir: &Path) -> Result<Vec<AttestationRecord>> {
    let path = gh_state_dir.join(ATTESTATION_STORE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str(l).with_context(|| format!("{}: invalid line {l}", path.display()))
        })
        .collect()
}

/// Creates release `tag` in `gh_state_dir` the way gh.py keeps it: created at `created_at`
/// (RFC 3339, e.g. `2026-01-02T03:04:05Z`), with copies of `assets`; a published one
/// (`draft` false) is published at `created_at`, its tag recorded as used, and it is the
/// latest release when no published release is newer.
pub fn add_release(
    gh_state_dir: &Path,
    tag: &str,
    created_at: &str,
    assets: &[PathBuf],
    draft: bool,
) -> Result<()> {
    let is_rfc3339 =
        created_at.len() == 20 && created_at.ends_with('Z') && created_at.as_bytes()[10] == b'T';
    if !is_rfc3339 {
        bail!("add_release {tag}: created_at {created_at:?} is not YYYY-MM-DDTHH:MM:SSZ");
    }
    let releases = gh_state_dir.join("releases");
    let dir = releases.join(tag);
    if dir.exists() {
        bail!(
            "add_release: release {tag} already exists in {}",
            gh_state_dir.display()
        );
    }
    std::fs::create_dir_all(dir.join("assets"))
        .with_context(|| format!("creating {}", dir.display()))?;
    for asset in assets {
        let name = asset.file_name().ok_or_else(|| {
            anyhow!(
                "add_release {tag}: asset {} has no file name",
                asset.display()
            )
        })?;
        std::fs::copy(asset, dir.join("assets").join(name))
            .with_context(|| format!("add_release {tag}: copying {}", asset.display()))?;
    }
    let mut others = Vec::new();
    for entry in std::fs::read_dir(&releases)? {
        let path = entry?.path().join("release.json");
        if path.exists() {
            let rel: Value = serde_json::from_slice(&std::fs::read(&path)?)
                .with_context(|| format!("reading {}", path.display()))?;
            others.push((path, rel));
        }
    }
    let newest_published = !draft
        && others.iter().all(|(_, r)| {
            r["isDraft"].as_bool() == Some(true)
                || r["createdAt"].as_str().unwrap_or_default() <= created_at
        });
    if newest_published {
        for (path, mut rel) in others.iter().cloned() {
            if rel["isLatest"] == json!(true) {
                rel["isLatest"] = json!(false);
                std::fs::write(&path, serde_json::to_vec_pretty(&rel)?)?;
            }
        }
    }
    let release = json!({
        "tagName": tag,
        "title": tag,
        "notes": "",
        "target": "main",
        "isDraft": draft,
        "isLatest": newest_published,
        "createdAt": created_at,
        "publishedAt": if draft { Value::Null } else { json!(created_at) },
        // gh.py's tie-breaker among releases created in the same second.
        "seq": others.len(),
    });
    std::fs::write(
        dir.join("release.json"),
        serde_json::to_vec_pretty(&release)?,
    )?;
    if !draft {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(gh_state_dir.join("published-tags"))?;
        writeln!(f, "{tag}")?;
    }
    // The run's own state is the runner's: its gh may later rewrite these files (publishing
    // another release clears isLatest here).
    give_to_runner(gh_state_dir)
}

/// Copies every registered foreign repository's state into the replay's directory, where the
/// runner can read it (the test's own directory may not be), and returns gh.py's map of
/// `owner/name` (lower case) to the copy. Copied afresh for each job: fixtures added between
/// jobs are seen, and nothing a job does can reach the original.
pub(crate) fn foreign_states(r: &Replay) -> Result<serde_json::Map<String, Value>> {
    let mut map = serde_json::Map::new();
    for (repo, source) in &r.foreign_repos {
        let copy = r.root().join("foreign").join(repo.replace('/', "+"));
        if copy.exists() {
            std::fs::remove_dir_all(&copy)?;
        }
        std::fs::create_dir_all(&copy)?;
        if source.exists() {
            copy_dir(source, &copy).with_context(|| {
                format!("copying the gh state of {repo} from {}", source.display())
            })?;
        }
        set_mode(&r.root().join("foreign"), 0o755)?;
        give_to_runner(&copy)?;
        map.insert(repo.clone(), json!(copy.display().to_string()));
    }
    Ok(map)
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let dest = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            std::fs::create_dir_all(&dest)?;
            copy_dir(&entry.path(), &dest)?;
        } else {
            std::fs::copy(entry.path(), &dest)?;
        }
    }
    Ok(())
}
