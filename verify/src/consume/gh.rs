//! The GitHub CLI (`gh`, with the caller's GH_TOKEN) for one repository: its identity and
//! default branch as the API records them, its releases and assets, `gh attestation verify`
//! (its JSON judged again in `attestation`), and `gh attestation download` as a transport.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use crate::attestation::{attestation_args, judge_attestations, AttestationPolicy};
use crate::terminal_text::escape;

/// The workflow that makes releases; its attestations are the ones trusted by default.
pub const RELEASE_WORKFLOW: &str = ".github/workflows/update-template.yml";
/// One entry of `gh release list --json tagName,isDraft,isPrerelease,createdAt,publishedAt`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListedRelease {
    pub tag_name: String,
    pub is_draft: bool,
    pub is_prerelease: bool,
    pub created_at: String,
    #[serde(default)]
    pub published_at: Option<String>,
}

/// The API's repository `id` and `owner.id` (as decimal text), when it gave them.
pub(crate) type RepositoryIds = (Option<String>, Option<String>);

/// The GitHub CLI, for one repository's releases and attestations.
pub(crate) struct Gh {
    /// `owner/name` as GitHub's API spells it (`full_name`), not as the caller typed it.
    pub(crate) repository: String,
    pub(crate) policy: AttestationPolicy,
    /// The API's repository `id` and `owner.id`, when it gave them.
    pub(crate) ids: RepositoryIds,
    /// The caller named the signer workflow (it may be another repository's).
    pub(crate) custom_signer: bool,
}

/// What `gh api repos/R` says of the repository.
#[derive(Debug, Deserialize)]
pub(crate) struct RepositoryFacts {
    pub(crate) full_name: String,
    pub(crate) default_branch: String,
    #[serde(default)]
    pub(crate) id: Option<serde_json::Value>,
    #[serde(default)]
    pub(crate) owner: Option<Owner>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Owner {
    #[serde(default)]
    pub(crate) id: Option<serde_json::Value>,
}

/// The API's answer judged: a full name of the form `owner/name` and a default branch that
/// can be a ref. Pure.
pub(crate) fn repository_facts(
    json: &[u8],
    asked: &str,
) -> Result<(String, String, RepositoryIds)> {
    let facts: RepositoryFacts = serde_json::from_slice(json)
        .with_context(|| format!("`gh api repos/{asked}` did not print the repository"))?;
    let parts: Vec<&str> = facts.full_name.split('/').collect();
    if parts.len() != 2
        || parts.iter().any(|p| {
            p.is_empty()
                || !p
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        })
    {
        bail!(
            "`gh api repos/{asked}` names the repository `{}`, not OWNER/NAME",
            escape(&facts.full_name)
        );
    }
    let branch = facts.default_branch;
    if branch.is_empty() || branch.contains(char::is_whitespace) {
        bail!(
            "`gh api repos/{asked}` names no default branch (got `{}`)",
            escape(&branch)
        );
    }
    let id = |v: Option<&serde_json::Value>| match v {
        Some(serde_json::Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    let ids = (
        id(facts.id.as_ref()),
        id(facts.owner.as_ref().and_then(|o| o.id.as_ref())),
    );
    Ok((facts.full_name, branch, ids))
}

impl Gh {
    /// `repository`'s releases, their attestations held to `signer_workflow` (default: its
    /// release workflow) from `source_ref` (default: its default branch, as GitHub names it).
    /// The repository is named as GitHub's API spells it (`full_name`): gh matches the signer
    /// workflow case-sensitively, and a caller may type another casing or a former name.
    pub(crate) fn new(
        repository: &str,
        signer_workflow: Option<&str>,
        source_ref: Option<&str>,
    ) -> Result<Gh> {
        let mut gh = Gh {
            policy: AttestationPolicy {
                signer_workflow: String::new(),
                source_ref: String::new(),
            },
            repository: repository.to_string(),
            ids: (None, None),
            custom_signer: signer_workflow.is_some(),
        };
        let (full_name, default_branch, ids) = gh.repository_facts()?;
        gh.repository = full_name;
        gh.ids = ids;
        gh.policy.signer_workflow = signer_workflow
            .map(str::to_string)
            .unwrap_or_else(|| format!("{}/{RELEASE_WORKFLOW}", gh.repository));
        gh.policy.source_ref = match source_ref {
            Some(source_ref) => source_ref.to_string(),
            None => format!("refs/heads/{default_branch}"),
        };
        Ok(gh)
    }

    fn output(&self, args: &[&str]) -> Result<Vec<u8>, String> {
        let out = Command::new("gh").args(args).output().map_err(|e| {
            format!("cannot run `gh` ({e}); the GitHub CLI is needed (preinstalled on GitHub's runners)")
        })?;
        if out.status.success() {
            Ok(out.stdout)
        } else {
            Err(format!(
                "`gh {}` failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    pub(crate) fn list(&self) -> Result<Vec<ListedRelease>> {
        let fields = "tagName,isDraft,isPrerelease,createdAt,publishedAt";
        let out = self
            .output(&[
                "release",
                "list",
                "--repo",
                &self.repository,
                "--limit",
                "100",
                "--exclude-drafts",
                "--json",
                fields,
            ])
            .map_err(anyhow::Error::msg)?;
        serde_json::from_slice(&out)
            .with_context(|| format!("`gh release list --json {fields}` did not print its list"))
    }

    pub(crate) fn asset_names(&self, tag: &str) -> Result<Vec<String>> {
        #[derive(Deserialize)]
        struct View {
            assets: Vec<Asset>,
        }
        #[derive(Deserialize)]
        struct Asset {
            name: String,
        }
        let out = self
            .output(&[
                "release",
                "view",
                tag,
                "--repo",
                &self.repository,
                "--json",
                "assets",
            ])
            .map_err(anyhow::Error::msg)?;
        let view: View = serde_json::from_slice(&out)
            .with_context(|| format!("`gh release view {tag} --json assets` did not print them"))?;
        Ok(view.assets.into_iter().map(|a| a.name).collect())
    }

    pub(crate) fn download(&self, tag: &str, pattern: &str, dir: &Path) -> Result<()> {
        let dir_text = dir.display().to_string();
        self.output(&[
            "release",
            "download",
            tag,
            "--repo",
            &self.repository,
            "--pattern",
            pattern,
            "--dir",
            &dir_text,
            "--clobber",
        ])
        .map(drop)
        .map_err(anyhow::Error::msg)
    }

    /// The repository's full name, default branch and ids as GitHub records them
    /// (`gh api repos/R`): only an administrator of the repository can change the branch,
    /// unlike anything in a release, which whoever mints an attestation also writes.
    fn repository_facts(&self) -> Result<(String, String, RepositoryIds)> {
        let path = format!("repos/{}", self.repository);
        let out = self.output(&["api", &path]).map_err(anyhow::Error::msg)?;
        repository_facts(&out, &self.repository)
    }

    /// `gh attestation download SUBJECT` into `dir` (gh as transport only: the bundles are
    /// verified natively afterwards). gh writes `<algorithm>:<hex>.jsonl` into its working
    /// directory.
    pub(crate) fn download_attestations(
        &self,
        subject: &str,
        predicate_type: &str,
        dir: &Path,
    ) -> Result<(), String> {
        let subject = std::path::absolute(subject)
            .ok()
            .filter(|_| !subject.starts_with("oci://"))
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| subject.to_owned());
        let args = [
            "attestation",
            "download",
            &subject,
            "--repo",
            &self.repository,
            "--predicate-type",
            predicate_type,
        ];
        let out = Command::new("gh")
            .args(args)
            .current_dir(dir)
            .output()
            .map_err(|e| {
                format!("cannot run `gh` ({e}); the GitHub CLI downloads the attestations (or give --bundles DIR)")
            })?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "`gh {}` failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// `gh attestation verify` of `subject`, judged again; with `offline`, from those bundles
    /// and that trusted root (`--bundle`, `--custom-trusted-root`): gh then asks neither the
    /// attestation API nor Sigstore's TUF repository. `subject` is a file path or
    /// `oci://repository@sha256:…`; `digest` its `sha256:<hex>`.
    pub(crate) fn verify_attestation(
        &self,
        subject: &str,
        digest: &str,
        predicate_type: &str,
        offline: Option<&OfflineBundles>,
    ) -> Result<(), String> {
        let mut args = attestation_args(subject, &self.repository, &self.policy, predicate_type);
        if let Some(offline) = offline {
            args.extend([
                "--bundle".to_owned(),
                offline.bundles.display().to_string(),
                "--custom-trusted-root".to_owned(),
                offline.trusted_root.display().to_string(),
            ]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = self.output(&args)?;
        judge_attestations(&out, digest, &self.policy, predicate_type).map(drop)
    }
}

/// Bundles and a trusted root on disk, for `gh attestation verify --bundle FILE
/// --custom-trusted-root FILE`.
#[derive(Debug)]
pub(crate) struct OfflineBundles {
    /// A JSON lines file (gh reads `.jsonl` as one bundle a line).
    pub(crate) bundles: PathBuf,
    /// Trusted roots as JSON lines, as `gh attestation trusted-root` prints them.
    pub(crate) trusted_root: PathBuf,
}
