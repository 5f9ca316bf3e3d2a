//! `template-verify consume`: the consumer's whole step. Another repository (infrastructure
//! CI) takes the newest *complete* release of the template repository, checks it against
//! something other than the receipt itself, and pins its template definition to it.
//!
//! Trust comes from GitHub's artifact attestations: every asset (the receipt first) must be
//! attested by the template repository's release workflow, the image index by its build
//! provenance and each platform manifest by its SBOM. Then the receipt is verified with its
//! assets and against its registry, and `pin` writes the one `image:` line. A release whose
//! receipt is missing (not finished) or whose attested receipt says it is incomplete is passed
//! over for the one before it; anything else wrong with a release is an error, never a reason
//! to fall back to an older one. On every error the template is left byte-for-byte as it was.
//!
//! GitHub is reached through its CLI (`gh`, with the caller's GH_TOKEN), the only IO here
//! besides files; the decisions ([`order_releases`], [`receipt_asset`], [`judge`], and what
//! an attestation must say, `attestation.rs`) are pure.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{bail, Context, Result};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::attestation::release_bundles::is_bundle_file;
use crate::attestation::{
    attestation_args, judge_attestations, sbom_attestations, AttestationPolicy, PROVENANCE,
};
use crate::fs::append_to_github_file;
use crate::notes::ReleaseFiles;
use crate::pin::{pin, PinOutcome, PinRequest};
use crate::receipt::policy::ReceiptPolicy;
use crate::receipt::verify::{verify_file, Verification};
use crate::receipt::MANIFEST_ASSET;
use crate::settings::Environment;
use crate::terminal_text::{escape, print_json_escaped};
use template_formats::model::notes::ReleaseNotes;
use template_formats::model::receipt::Receipt;

mod attesters;

pub use attesters::AttestationMode;
use attesters::{Attesters, Native};

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

/// Published, non-prerelease releases, newest first (by publication time, else creation
/// time; ties by tag), at most `max`.
pub fn order_releases(listed: &[ListedRelease], max: usize) -> Vec<String> {
    let time = |r: &ListedRelease| -> Option<DateTime<Utc>> {
        r.published_at
            .as_deref()
            .unwrap_or(&r.created_at)
            .parse()
            .ok()
    };
    let mut releases: Vec<&ListedRelease> = listed
        .iter()
        .filter(|r| !r.is_draft && !r.is_prerelease)
        .collect();
    releases.sort_by(|a, b| (time(b), &b.tag_name).cmp(&(time(a), &a.tag_name)));
    releases
        .into_iter()
        .take(max)
        .map(|r| r.tag_name.clone())
        .collect()
}

/// The receipt among a release's asset names.
#[derive(Debug, PartialEq)]
pub enum ReceiptAsset {
    /// None yet: the release is not finished (assets are uploaded before it is published, but
    /// a release can also be made by hand).
    Missing,
    One(String),
    Several(Vec<String>),
}

pub fn receipt_asset(names: &[String]) -> ReceiptAsset {
    // The name becomes a file name under the work directory: nothing that could leave it.
    let receipts: Vec<String> = names
        .iter()
        .filter(|n| n.starts_with("receipt-") && n.ends_with(".json") && !n.contains(['/', '\\']))
        .cloned()
        .collect();
    match receipts.len() {
        0 => ReceiptAsset::Missing,
        1 => ReceiptAsset::One(receipts[0].clone()),
        _ => ReceiptAsset::Several(receipts),
    }
}

/// What to do with a release whose attested receipt was verified offline.
#[derive(Debug, PartialEq)]
pub enum Judgement {
    Take,
    /// The release workflow said so itself: not every platform passed every check.
    PassOver(String),
    Refuse(String),
}

/// `tag` is the GitHub release's: a genuine receipt of another release (an older one,
/// uploaded again) is refused, or a rollback could pass every other check.
pub fn judge(tag: &str, verification: &Verification) -> Judgement {
    let problems = || {
        verification
            .problems
            .iter()
            .map(|p| format!("{}: {}", p.field, p.problem))
            .collect::<Vec<_>>()
            .join("; ")
    };
    let own = verification.release_tag.as_deref().is_none_or(|t| t == tag);
    if !own {
        Judgement::Refuse(format!(
            "it is the receipt of release {}, not of {tag}",
            verification.release_tag.as_deref().unwrap_or_default()
        ))
    } else if verification.valid {
        Judgement::Take
    } else if verification.complete == Some(false) {
        Judgement::PassOver(format!(
            "its receipt says it is incomplete ({})",
            problems()
        ))
    } else {
        Judgement::Refuse(problems())
    }
}

/// The GitHub CLI, for one repository's releases and attestations.
pub(crate) struct Gh {
    /// `owner/name` as GitHub's API spells it (`full_name`), not as the caller typed it.
    pub(crate) repository: String,
    pub(crate) policy: AttestationPolicy,
    /// The API's repository `id` and `owner.id`, when it gave them.
    pub(crate) ids: (Option<String>, Option<String>),
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
) -> Result<(String, String, (Option<String>, Option<String>))> {
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
    fn repository_facts(&self) -> Result<(String, String, (Option<String>, Option<String>))> {
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

    /// `subject` is a file path or `oci://repository@sha256:…`; `digest` its `sha256:<hex>`.
    pub(crate) fn verify_attestation(
        &self,
        subject: &str,
        digest: &str,
        predicate_type: &str,
    ) -> Result<(), String> {
        let args = attestation_args(subject, &self.repository, &self.policy, predicate_type);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = self.output(&args)?;
        judge_attestations(&out, digest, &self.policy, predicate_type).map(drop)
    }
}

/// `sha256:<hex>` of a downloaded asset.
pub(crate) fn file_digest(path: &Path) -> Result<String, String> {
    template_formats::bounded_read::sha256_regular(
        path,
        template_formats::bounded_read::MAX_ARTIFACT_BYTES,
        "release asset",
    )
    .map(|hex| format!("sha256:{hex}"))
    .map_err(|e| format!("{e:#}"))
}

/// The release the template named before `old` (`repository@sha256:…`), among `older` (the
/// releases before the chosen one, newest first): its receipt and the assets the notes read
/// downloaded, each attested as the chosen release's are, the receipt verified by its own
/// manifest. `Err` says why there is none to compare with.
fn pinned_before(
    att: &Attesters,
    work_dir: &Path,
    older: &[String],
    old: &str,
) -> Result<ReleaseFiles, String> {
    if !old.contains("@sha256:") {
        return Err(format!(
            "the template named no release before (`{}`)",
            escape(old)
        ));
    }
    let gh = att.gh;
    for tag in older {
        let names = gh.asset_names(tag).map_err(|e| format!("{e:#}"))?;
        let ReceiptAsset::One(name) = receipt_asset(&names) else {
            continue;
        };
        let dir = work_dir.join(tag);
        gh.download(tag, &name, &dir)
            .map_err(|e| format!("{e:#}"))?;
        let receipt_path = dir.join(&name);
        let Some(pinned) = template_formats::bounded_read::read_regular(
            &receipt_path,
            template_formats::bounded_read::MAX_RECEIPT_BYTES,
            "receipt",
        )
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Receipt>(&bytes).ok())
        .filter(|r| r.index.reference == old) else {
            continue;
        };
        // The files the notes read, as this release carries them.
        let wanted: Vec<&String> = names
            .iter()
            .filter(|n| {
                *n == MANIFEST_ASSET
                    || *n == "inventory.json"
                    || (n.starts_with("transcripts-") && n.ends_with(".json") && !n.contains('/'))
            })
            .collect();
        for asset in &wanted {
            gh.download(tag, asset, &dir)
                .map_err(|e| format!("{e:#}"))?;
        }
        for file in std::iter::once(&name).chain(wanted) {
            let path = dir.join(file);
            file_digest(&path)
                .and_then(|d| {
                    att.verify(
                        &path.display().to_string(),
                        file,
                        &d,
                        PROVENANCE,
                        Some(&pinned.source_commit),
                    )
                })
                .map_err(|why| format!("release {tag}: `{file}` is not attested: {why}"))?;
        }
        return crate::notes::assets::read_release(&receipt_path, None)
            .map_err(|e| format!("release {tag}: {e:#}"));
    }
    Err(format!(
        "the release the template named before (`{}`) is not among the {} release(s) looked          through before this one",
        escape(old),
        older.len()
    ))
}

/// The notes of the chosen release against the one the template named before.
fn notes_for_the_pull_request(
    att: &Attesters,
    args: &ConsumeRequest,
    chosen: &Chosen,
    old: &str,
) -> ReleaseNotes {
    let new =
        crate::notes::assets::release_in(chosen.receipt.clone(), &args.work_dir.join(&chosen.tag));
    match pinned_before(att, &args.work_dir, &chosen.older, old) {
        Ok(previous) => crate::notes::build(&new, Some(&previous)),
        Err(why) => {
            eprintln!("consume: the notes compare with nothing: {why}");
            let mut notes = crate::notes::build(&new, None);
            notes.unavailable.push(format!(
                "a comparison with the release the template pinned before: {why}"
            ));
            notes
        }
    }
}

/// What `consume` reports (`--json`, and the workflow outputs).
#[derive(Debug, Serialize)]
struct Consumed {
    changed: bool,
    dry_run: bool,
    previous_image: String,
    image: String,
    release_tag: String,
    receipt: String,
    /// The template's packages: name, version, and the version locked before this release.
    versions: Vec<PackageVersion>,
    /// Newer releases that were passed over, and why.
    passed_over: Vec<String>,
    /// The release's notes against the release the template named before, when it changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    notes: Option<ReleaseNotes>,
}

#[derive(Debug, Serialize)]
struct PackageVersion {
    name: String,
    version: String,
    previously_locked: Option<String>,
}

/// The release `consume` takes.
struct Chosen {
    tag: String,
    /// Its receipt file, downloaded and verified offline.
    path: PathBuf,
    receipt: Receipt,
    /// Its release's manifest, which it was judged by.
    policy: ReceiptPolicy,
    /// Newer releases passed over, and why.
    passed_over: Vec<String>,
    /// The releases older than it, newest first, among those looked through.
    older: Vec<String>,
}

/// What `consume` is asked, as the library takes it (`cli.rs` converts the command line's
/// `ConsumeArgs` into it).
#[derive(Debug, Clone)]
pub struct ConsumeRequest {
    /// The template's GitHub repository, `owner/name`.
    pub repository: String,
    /// The template definition to pin.
    pub template: PathBuf,
    /// Where release assets are downloaded.
    pub work_dir: PathBuf,
    /// The workflow whose attestations are trusted; `None`: the repository's release workflow.
    pub signer_workflow: Option<String>,
    /// The ref attestations must come from; `None`: the repository's default branch.
    pub source_ref: Option<String>,
    /// How many of the newest releases to look through.
    pub max_releases: usize,
    /// Whose verdict on the attestations counts: gh's, the verifier's own, or both.
    pub attestations: AttestationMode,
    /// The trusted root for native verification (one root, or `gh attestation trusted-root`'s
    /// JSON lines).
    pub trusted_root: Option<PathBuf>,
    /// A directory of Sigstore bundles for native verification; `None`: downloaded with
    /// `gh attestation download`.
    pub bundles: Option<PathBuf>,
    /// Allow a release in another repository than the template's current one.
    pub allow_repository_change: bool,
    /// Refuse a release whose npm inputs are not `verified`.
    pub require_verified_inputs: bool,
    /// Verify everything, write nothing.
    pub dry_run: bool,
    /// Print the result as JSON.
    pub json: bool,
}

/// The newest release whose attested receipt verifies; errors name the release and why.
fn newest_complete(att: &Attesters, args: &ConsumeRequest) -> Result<Chosen> {
    let gh = att.gh;
    let tags = order_releases(&gh.list()?, args.max_releases);
    let mut passed_over = Vec::new();
    for tag in &tags {
        let dir = args.work_dir.join(tag);
        let name = match receipt_asset(&gh.asset_names(tag)?) {
            ReceiptAsset::Missing => {
                eprintln!("consume: {tag}: no receipt yet, passed over");
                passed_over.push(format!("{tag}: no receipt (the release is not finished)"));
                continue;
            }
            ReceiptAsset::Several(names) => bail!(
                "release {tag} of {} has several receipts ({}); a release has one",
                gh.repository,
                names.join(", ")
            ),
            ReceiptAsset::One(name) => name,
        };
        gh.download(tag, &name, &dir)?;
        gh.download(tag, MANIFEST_ASSET, &dir)?;
        let receipt = dir.join(&name);
        let manifest = dir.join(MANIFEST_ASSET);
        // The receipt and the manifest it is judged by, both attested before either is
        // trusted. The native policy holds every attestation to the receipt's source commit:
        // the one field read first, and the receipt's own attestation then proves it signed.
        let commit = claimed_source_commit(&receipt);
        for (what, file) in [("receipt", &receipt), ("manifest", &manifest)] {
            let file_name = file.file_name().unwrap_or_default().to_string_lossy();
            file_digest(file)
                .and_then(|digest| {
                    att.verify(
                        &file.display().to_string(),
                        &file_name,
                        &digest,
                        PROVENANCE,
                        commit.as_deref(),
                    )
                })
                .map_err(|why| {
                    anyhow::anyhow!(
                        "release {tag}: the {what} {file_name} is not attested by {} from {} \
                         ({}): {why}",
                        gh.policy.signer_workflow,
                        gh.policy.source_ref,
                        att.describe()
                    )
                })?;
        }
        let policy = ReceiptPolicy::release_asset(&manifest)
            .with_context(|| format!("release {tag}: its {MANIFEST_ASSET}"))?;
        let verification = verify_file(&receipt, None, &policy)?;
        match judge(tag, &verification) {
            Judgement::Take => {
                let verified = verification
                    .receipt
                    .context("a verified receipt carries its receipt")?;
                let older = tags
                    .iter()
                    .skip_while(|t| *t != tag)
                    .skip(1)
                    .cloned()
                    .collect();
                return Ok(Chosen {
                    tag: tag.clone(),
                    path: receipt,
                    receipt: verified,
                    policy,
                    passed_over,
                    older,
                });
            }
            Judgement::PassOver(why) => {
                eprintln!("consume: {tag}: {why}, passed over");
                passed_over.push(format!("{tag}: {why}"));
            }
            Judgement::Refuse(why) => {
                bail!("release {tag}: the receipt {name} does not verify: {why}")
            }
        }
    }
    bail!(
        "none of the {} newest releases of {} has a complete receipt{}",
        tags.len(),
        gh.repository,
        if passed_over.is_empty() {
            String::new()
        } else {
            format!(" ({})", passed_over.join("; "))
        }
    )
}

/// Every asset of the chosen release attested, then the image's own attestations.
/// The release's bundle assets (`*.sigstore.json`) are not attested themselves (the step that
/// makes a bundle cannot attest it); every other asset is.
fn verify_attestations(att: &Attesters, tag: &str, dir: &Path, receipt: &Receipt) -> Result<()> {
    let gh = att.gh;
    gh.download(tag, "*", dir)?;
    let mut assets: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    assets.retain(|a| {
        !a.file_name()
            .is_some_and(|n| is_bundle_file(&n.to_string_lossy()))
    });
    assets.sort();
    let commit = Some(receipt.source_commit.as_str());
    for asset in &assets {
        let name = asset.file_name().unwrap_or_default().to_string_lossy();
        file_digest(asset)
            .and_then(|digest| {
                att.verify(
                    &asset.display().to_string(),
                    &name,
                    &digest,
                    PROVENANCE,
                    commit,
                )
            })
            .map_err(|why| {
                anyhow::anyhow!(
                    "release {tag}: the asset {name} is not attested by {} from {} ({}): {why}",
                    gh.policy.signer_workflow,
                    gh.policy.source_ref,
                    att.describe()
                )
            })?;
    }
    // actions/attest names an image subject by the `subject-name` the workflow gives it: the
    // image's repository, as the receipt records it.
    let repository = &receipt.index.repository;
    let image = |digest: &str| format!("oci://{repository}@{digest}");
    att.verify(
        &image(&receipt.index.digest),
        repository,
        &receipt.index.digest,
        PROVENANCE,
        commit,
    )
    .map_err(|why| anyhow::anyhow!("release {tag}: the image index has no provenance: {why}"))?;
    for (platform, digest, predicate) in sbom_attestations(receipt) {
        att.verify(&image(digest), repository, digest, predicate, commit)
            .map_err(|why| {
                anyhow::anyhow!(
                    "release {tag}: the {platform} image has no {predicate} SBOM attestation: {why}"
                )
            })?;
    }
    eprintln!(
        "consume: {tag}: {} assets, the index and {} platform images attested by {} from {} at \
         {} on GitHub-hosted runners ({})",
        assets.len(),
        receipt.platforms.len(),
        gh.policy.signer_workflow,
        gh.policy.source_ref,
        receipt.source_commit,
        att.describe()
    );
    Ok(())
}

/// The `source_commit` a receipt file claims, read before its attestation is checked only to
/// ask the attestation for that commit (the attestation then proves the receipt said it).
fn claimed_source_commit(receipt: &Path) -> Option<String> {
    let bytes = template_formats::bounded_read::read_regular(
        receipt,
        template_formats::bounded_read::MAX_RECEIPT_BYTES,
        "receipt",
    )
    .ok()?;
    let value: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    value["source_commit"].as_str().map(str::to_owned)
}

/// Everything but the report: the release taken, the pin's report, and the release notes
/// when the pin changed.
fn verify_and_pin(
    args: &ConsumeRequest,
    env: &Environment,
) -> Result<(Chosen, crate::pin::PinReport, Option<ReleaseNotes>)> {
    let gh = Gh::new(
        &args.repository,
        args.signer_workflow.as_deref(),
        args.source_ref.as_deref(),
    )?;
    std::fs::create_dir_all(&args.work_dir)
        .with_context(|| format!("cannot create {}", args.work_dir.display()))?;
    let native = match (args.attestations.uses_native(), &args.trusted_root) {
        (false, _) => None,
        (true, Some(root)) => Some(Native::new(
            root,
            args.bundles.as_deref(),
            &gh.policy.signer_workflow,
            &gh.policy.source_ref,
            if gh.custom_signer {
                (None, None)
            } else {
                gh.ids.clone()
            },
        )?),
        (true, None) => bail!(
            "--attestations {} needs --trusted-root FILE (save `gh attestation trusted-root` \
             to a file), or --attestations gh",
            args.attestations.name()
        ),
    };
    let att = Attesters {
        gh: &gh,
        mode: args.attestations,
        native,
    };
    let chosen = newest_complete(&att, args)?;
    let dir = args.work_dir.join(&chosen.tag);
    verify_attestations(&att, &chosen.tag, &dir, &chosen.receipt)?;

    // The policy is the release's own manifest asset, verified with the receipt above.
    let request = PinRequest {
        receipt: chosen.path.clone(),
        artifacts: Some(dir),
        template: args.template.clone(),
        offline: false,
        allow_repository_change: args.allow_repository_change,
        require_verified_inputs: args.require_verified_inputs,
        dry_run: args.dry_run,
    };
    match pin(&request, &chosen.policy, env)? {
        PinOutcome::Pinned(report) => {
            let notes = report
                .changed
                .then(|| notes_for_the_pull_request(&att, args, &chosen, &report.old));
            Ok((chosen, report, notes))
        }
        PinOutcome::Rejected(problems) => {
            crate::receipt::verify::print_problems(&problems);
            bail!(
                "release {}: the receipt {} was rejected with its assets and registry (above)",
                chosen.tag,
                chosen.path.display()
            )
        }
    }
}

/// `env` is the environment's snapshot, taken by the binary: credentials for the registry
/// check, and GitHub's output files.
pub fn run(args: ConsumeRequest, env: &Environment) -> Result<ExitCode> {
    // Every error ends by saying what a failure guarantees: the file was not touched.
    let (chosen, report, notes) = verify_and_pin(&args, env)
        .map_err(|e| anyhow::anyhow!("{e:#}\n{} is unchanged", args.template.display()))?;
    let consumed = Consumed {
        changed: report.changed,
        dry_run: args.dry_run,
        previous_image: report.old,
        image: report.new,
        release_tag: chosen.tag,
        receipt: chosen.path.display().to_string(),
        versions: chosen
            .receipt
            .packages
            .iter()
            .map(|p| PackageVersion {
                name: p.name.clone(),
                version: p.version.clone(),
                previously_locked: p.previously_locked.clone(),
            })
            .collect(),
        passed_over: chosen.passed_over,
        notes,
    };
    let summary = summary_markdown(&consumed);
    append_to_github_file(&env.github_output, &github_outputs(&consumed, &summary)?)?;
    append_to_github_file(&env.github_step_summary, &summary)?;
    if args.json {
        print_json_escaped(&consumed)?;
    } else {
        for line in summary.lines() {
            println!("{}", escape(line));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A short Markdown account: what changed, from which release, the package versions.
fn summary_markdown(c: &Consumed) -> String {
    let mut out = if c.changed {
        format!(
            "{} the coding-agent template to release `{}`\n\n- image `{}`\n- was `{}`\n",
            if c.dry_run { "Would pin" } else { "Pinned" },
            c.release_tag,
            c.image,
            c.previous_image
        )
    } else {
        format!(
            "The template already pins release `{}` (`{}`)\n",
            c.release_tag, c.image
        )
    };
    out.push_str("\n| package | version | before |\n| --- | --- | --- |\n");
    for v in &c.versions {
        out.push_str(&format!(
            "| `{}` | {} | {} |\n",
            v.name,
            v.version,
            v.previously_locked.as_deref().unwrap_or("–")
        ));
    }
    for p in &c.passed_over {
        out.push_str(&format!("\nPassed over: {p}\n"));
    }
    if let Some(notes) = &c.notes {
        out.push('\n');
        out.push_str(&crate::notes::markdown::render(notes));
    }
    out
}

/// `$GITHUB_OUTPUT` lines; the multi-line summary in a heredoc whose delimiter is not in it.
fn github_outputs(c: &Consumed, summary: &str) -> Result<String> {
    let versions = serde_json::to_string(&c.versions)?;
    let mut delimiter = String::from("EOF_SUMMARY");
    while summary.contains(&delimiter) {
        delimiter.push('_');
    }
    Ok(format!(
        "changed={}\nprevious-image={}\nimage={}\nrelease-tag={}\nreceipt={}\nversions={versions}\nsummary<<{delimiter}\n{summary}\n{delimiter}\n",
        c.changed, c.previous_image, c.image, c.release_tag, c.receipt
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receipt::problem;

    fn listed(tag: &str, published: Option<&str>, draft: bool, pre: bool) -> ListedRelease {
        ListedRelease {
            tag_name: tag.into(),
            is_draft: draft,
            is_prerelease: pre,
            created_at: "2026-11-01T00:00:00Z".into(),
            published_at: published.map(Into::into),
        }
    }

    #[test]
    fn releases_are_taken_newest_published_first_without_drafts_or_prereleases() {
        let list = vec![
            listed("a", Some("2026-11-24T04:40:00Z"), false, false),
            listed("c", Some("2026-11-30T04:40:00Z"), false, false),
            listed("draft", None, true, false),
            listed("pre", Some("2026-12-01T00:00:00Z"), false, true),
            listed("b", Some("2026-11-27T04:40:00Z"), false, false),
        ];
        assert_eq!(order_releases(&list, 10), vec!["c", "b", "a"]);
        assert_eq!(order_releases(&list, 2), vec!["c", "b"]);
        assert!(order_releases(&[], 5).is_empty());
    }

    #[test]
    fn a_release_has_one_receipt_or_none_yet() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            receipt_asset(&names(&["inventory.json", "sbom-linux-amd64.spdx.json"])),
            ReceiptAsset::Missing
        );
        assert_eq!(
            receipt_asset(&names(&["receipt-t-aa.json", "inventory.json"])),
            ReceiptAsset::One("receipt-t-aa.json".into())
        );
        assert!(matches!(
            receipt_asset(&names(&["receipt-t-aa.json", "receipt-t-bb.json"])),
            ReceiptAsset::Several(_)
        ));
        assert_eq!(
            receipt_asset(&names(&["receipt-/../../etc/x.json"])),
            ReceiptAsset::Missing
        );
    }

    #[test]
    fn only_an_incomplete_receipt_is_passed_over_anything_else_is_refused() {
        let mut v = Verification {
            valid: true,
            complete: Some(true),
            release_tag: Some("t".into()),
            ..Verification::default()
        };
        assert_eq!(judge("t", &v), Judgement::Take);
        // Another release's genuine receipt, uploaded again: a rollback, refused.
        assert!(
            matches!(judge("u", &v), Judgement::Refuse(why) if why.contains("receipt of release t"))
        );
        v.valid = false;
        v.complete = Some(false);
        v.problems = vec![problem("complete", "is false")];
        assert!(matches!(judge("t", &v), Judgement::PassOver(why) if why.contains("incomplete")));
        v.complete = Some(true);
        v.problems = vec![problem("index.digest", "differs")];
        assert!(matches!(judge("t", &v), Judgement::Refuse(why) if why.contains("index.digest")));
        // Unreadable or not a receipt at all: nothing says it is merely incomplete.
        v.complete = None;
        assert!(matches!(judge("t", &v), Judgement::Refuse(_)));
    }

    #[test]
    fn outputs_keep_the_summary_in_one_heredoc() {
        let c = Consumed {
            changed: true,
            dry_run: false,
            previous_image: "r/x@sha256:1".into(),
            image: "r/x@sha256:2".into(),
            release_tag: "2026.11.30-abc".into(),
            receipt: "/w/receipt.json".into(),
            versions: vec![PackageVersion {
                name: "@openai/codex".into(),
                version: "1.2.3".into(),
                previously_locked: Some("1.2.2".into()),
            }],
            passed_over: vec!["t: EOF_SUMMARY in a reason".into()],
            notes: None,
        };
        let summary = summary_markdown(&c);
        let text = github_outputs(&c, &summary).unwrap();
        assert!(
            text.starts_with("changed=true\nprevious-image=r/x@sha256:1\n"),
            "{text}"
        );
        assert!(text.contains("summary<<EOF_SUMMARY_\n"), "{text}");
        assert!(text.ends_with("\nEOF_SUMMARY_\n"), "{text}");
        assert!(text.contains(
            r#"versions=[{"name":"@openai/codex","version":"1.2.3","previously_locked":"1.2.2"}]"#
        ));
    }
}
