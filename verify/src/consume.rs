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
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::attestation::receipt_check::claimed_source_commit;
use crate::attestation::release_bundles::is_bundle_file;
use crate::attestation::{sbom_attestations, PROVENANCE};
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
mod gh;

pub use attesters::AttestationMode;
use attesters::{Attesters, BundleSource, Native};
pub(crate) use gh::Gh;
pub use gh::{ListedRelease, RELEASE_WORKFLOW};

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
        att.load_release_bundles(tag, &names, &dir)
            .map_err(|e| format!("release {tag}: its bundle assets: {e:#}"))?;
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
    /// Whose verdict on the attestations counted: `gh`, `native` or `both`.
    attestations: &'static str,
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
    /// `gh attestation download`, or read from each release's assets.
    pub bundles: Option<PathBuf>,
    /// Native bundles from each release's own `*.sigstore.json` assets.
    pub bundles_from_release: bool,
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
        let names = gh.asset_names(tag)?;
        let name = match receipt_asset(&names) {
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
        att.load_release_bundles(tag, &names, &dir)
            .with_context(|| format!("release {tag}: its bundle assets"))?;
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
            match (&args.bundles, args.bundles_from_release) {
                (Some(dir), _) => BundleSource::Dir(dir),
                (None, true) => BundleSource::Release,
                (None, false) => BundleSource::Download,
            },
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
        attestations: args.attestations.name(),
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
mod tests;
