//! `cargo xtask release ship`: turns tested platforms into a release.
//!
//! Order matters, because a tag can never be taken back: the index goes to the registry by
//! digest (and the tag is checked to be free or already this index), the receipt is written
//! from the plan's clock and the platforms' results, the assets are gathered and verified as a
//! consumer would verify them, and only then is the immutable tag written. A failure anywhere
//! before that leaves the tag free; running the phase again repeats no-ops and writes the
//! same receipt, byte for byte, so a release has exactly one receipt however often it is
//! re-run.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::image::sbom::{cyclonedx_file_name, sbom_file_name};
use crate::release::plan::ensure_checkout_matches;
use crate::release::platform::results_file_name;
use crate::release::steps::{read_json, render_times, write_json, Step, StepRunner};
use crate::util::{append_to_github_file, atomic_write};
use template_formats::manifest::{Manifest, Platform};
use template_formats::model::notes::ReleaseNotes;
use template_formats::model::plan::{ReleasePlan, Target};
use template_formats::model::platform_results::PlatformResults;
use template_formats::model::platform_results::StepTime;
use template_formats::model::publish::PublishReport;
use template_formats::model::receipt::Receipt;
use template_formats::model::rfc3339;
use template_formats::paths::INVENTORY_MD;
use template_formats::paths::MANIFEST;
use template_formats::paths::RECEIPT_SCHEMA;
use template_verify::receipt::policy::ReceiptPolicy;
use template_verify::receipt::INVENTORY_MD_ASSET;

/// What `release ship --json` prints.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Shipped {
    pub tag: String,
    pub receipt: PathBuf,
    pub assets: PathBuf,
    pub reference: String,
    pub debian_difference: DebianDifference,
    pub steps: Vec<StepTime>,
    /// The release notes (Markdown, the GitHub release's body) and their JSON form.
    pub notes: PathBuf,
    pub notes_json: PathBuf,
    #[serde(skip)]
    pub release_notes: ReleaseNotes,
}

/// The phase's steps, in order.
pub(crate) const STEP_NAMES: [&str; 4] =
    ["index by digest", "receipt write", "receipt verify", "tag"];

/// How the platforms' Debian package sets differ (`name=version`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct DebianDifference {
    pub platforms: (String, String),
    pub only_first: Vec<String>,
    pub only_second: Vec<String>,
    /// `name: version on first -> version on second`.
    pub versions: Vec<String>,
}

/// The difference between two `name=version` package sets.
pub(crate) fn debian_difference(
    (first, a): (Platform, &[String]),
    (second, b): (Platform, &[String]),
) -> DebianDifference {
    let split = |list: &[String]| -> std::collections::BTreeMap<String, String> {
        list.iter()
            .filter_map(|e| e.split_once('='))
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    };
    let (a, b) = (split(a), split(b));
    let names: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let mut out = DebianDifference {
        platforms: (first.to_string(), second.to_string()),
        ..Default::default()
    };
    for name in names {
        match (a.get(name), b.get(name)) {
            (Some(v), None) => out.only_first.push(format!("{name}={v}")),
            (None, Some(v)) => out.only_second.push(format!("{name}={v}")),
            (Some(x), Some(y)) if x != y => out.versions.push(format!("{name}: {x} -> {y}")),
            _ => {}
        }
    }
    out
}

/// Checks that the results belong to this plan and are fit to ship.
pub(crate) fn check_results(
    plan: &ReleasePlan,
    tag: &str,
    file: &Path,
    r: &PlatformResults,
) -> Result<()> {
    let file = file.display();
    if r.tag != tag || r.inputs_digest != plan.inputs_digest {
        bail!(
            "{file} belongs to release {} (inputs {}), not to this plan's {tag} (inputs {}): \
             download the results of this run",
            r.tag,
            r.inputs_digest,
            plan.inputs_digest
        );
    }
    if !r.smoke.passed {
        bail!(
            "{file}: {} failed its smoke checks; a release needs every platform",
            r.platform
        );
    }
    if r.pushed.is_none() {
        bail!(
            "{file}: {} was not pushed (was the plan made with --no-publish?)",
            r.platform
        );
    }
    if r.build.debian_packages.is_empty() {
        bail!("{file}: {} records no Debian packages", r.platform);
    }
    Ok(())
}

pub(crate) struct ShipRequest<'a> {
    pub root: &'a Path,
    pub plan_dir: &'a Path,
    pub plan: &'a ReleasePlan,
    pub results: &'a Path,
    pub assets: &'a Path,
    /// Stop before the tag: the workflow attests the index and the assets first, then runs
    /// the phase again (every step before the tag a no-op) to write it.
    pub defer_tag: bool,
    /// Where the consumer's verifier binaries are (`template-verify-<os>-<arch>`, one per
    /// manifest platform): they become assets and the receipt records them.
    pub verifiers: Option<&'a Path>,
    /// Where the outputs and summary go (`GITHUB_OUTPUT`, `GITHUB_STEP_SUMMARY`).
    pub verifier: &'a template_verify::settings::Environment,
}

pub(crate) async fn run(request: ShipRequest<'_>) -> Result<Shipped> {
    let ShipRequest {
        root,
        plan_dir,
        plan,
        results,
        assets,
        defer_tag,
        verifiers,
        verifier,
    } = request;
    let tag = plan.release_tag()?.to_string();
    if !plan.publish {
        bail!(
            "the plan does not publish ({}); nothing is shipped",
            plan.publish_reason
        );
    }
    ensure_checkout_matches(root, plan)?;
    let (platforms, receipt_sboms) = read_results(plan, &tag, results)?;
    let manifest = Manifest::load(&root.join(MANIFEST))?;
    let verifier_files = match verifiers {
        Some(dir) => verifier_files(dir, &manifest.platforms)?,
        None => Vec::new(),
    };

    // The subcommands read files; write each platform's pieces where they can.
    let work = crate::layout::Layout::at(root).state("ship").join(&tag);
    std::fs::create_dir_all(&work).with_context(|| format!("cannot create {}", work.display()))?;
    let stage_files = write_stage_files(&work, plan, &platforms)?;
    let steps = ShipSteps::new(&ShipContext {
        plan_dir,
        target: &plan.target,
        now: &rfc3339(plan.now),
        assets,
        tag: &tag,
        work: &work,
        partial: is_partial(&manifest.platforms, &plan.platforms),
        files: &stage_files,
        receipt_sboms: &receipt_sboms,
        verifiers: &verifier_files,
        defer_tag,
    });

    // The receipt's path only fills in an argument; it does not change how many steps there are.
    let mut runner = StepRunner::new(root, steps.all(Path::new("")).len())?;
    runner.run(&steps.index).await?;
    // A release has one receipt: an earlier attempt's (other content, other name) goes.
    remove_receipts(assets)?;
    runner.run(&steps.write).await?;
    #[derive(serde::Deserialize)]
    struct Written {
        path: PathBuf,
    }
    let written: Written = read_json(&work.join("receipt.json"), "`receipt write --json` output")?;
    let receipt: Receipt = read_json(&written.path, "a receipt")?;
    copy_assets(root, &receipt, assets)?;
    copy_files(receipt_sboms.iter().chain(&verifier_files), assets)?;
    runner.run(&steps.verify(&written.path)).await?;
    if let Some(tag_step) = &steps.tag {
        runner.run(tag_step).await?;
        check_tagged(&work, &tag, &receipt)?;
    }

    let release_notes = notes_against_previous(root, plan_dir, &receipt, assets)?;
    let (notes, notes_json) = (work.join("notes.md"), work.join("notes.json"));
    let markdown = template_verify::notes::markdown::render(&release_notes);
    atomic_write(&notes, markdown.as_bytes())?;
    write_json(&notes_json, &release_notes)?;
    let shipped = Shipped {
        tag: tag.clone(),
        receipt: written.path.clone(),
        assets: assets.to_path_buf(),
        reference: receipt.index.reference.clone(),
        debian_difference: first_two_differ(&platforms),
        steps: runner.times.clone(),
        notes,
        notes_json,
        release_notes,
    };
    write_workflow_outputs(&shipped, &receipt, verifier)?;
    if !defer_tag {
        // Once per release: the deferred run is followed by the one that tags.
        append_to_github_file(
            &verifier.github_step_summary,
            &format!("{}\n{markdown}", summary_markdown(&shipped, &receipt)),
        )?;
    }
    eprint!("{}", render_times("ship steps:", &runner.times));
    Ok(shipped)
}

/// The release's notes, against the previous release `release plan` kept in the plan
/// directory (its own manifest beside it judges it; else the checkout's). A previous receipt
/// that is missing or does not verify leaves notes without a comparison, which say why.
fn notes_against_previous(
    root: &Path,
    plan_dir: &Path,
    receipt: &Receipt,
    assets: &Path,
) -> Result<ReleaseNotes> {
    let new = template_verify::notes::assets::release_in(receipt.clone(), assets);
    let policy = ReceiptPolicy::checkout(&root.join(MANIFEST))?;
    let previous = crate::release::previous::kept_for_notes(plan_dir)?
        .map(|path| template_verify::notes::assets::read_release(&path, Some(&policy)));
    Ok(match previous {
        None => template_verify::notes::build(&new, None),
        Some(Ok(files)) => template_verify::notes::build(&new, Some(&files)),
        Some(Err(e)) => {
            let mut notes = template_verify::notes::build(&new, None);
            notes
                .unavailable
                .push(format!("a comparison with the previous release: {e:#}"));
            notes
        }
    })
}

/// Each planned platform's results and SBOM from the results directory, checked to be this
/// plan's and fit to ship.
fn read_results(
    plan: &ReleasePlan,
    tag: &str,
    results: &Path,
) -> Result<(Vec<PlatformResults>, Vec<PathBuf>)> {
    let mut platforms = Vec::new();
    let mut receipt_sboms = Vec::new();
    for p in &plan.platforms {
        let file = results.join(results_file_name(*p));
        let r: PlatformResults = read_json(&file, "a platform's results")?;
        if r.platform != *p {
            bail!(
                "{} holds the results of {}, not {p}",
                file.display(),
                r.platform
            );
        }
        check_results(plan, tag, &file, &r)?;
        let sbom = results.join(sbom_file_name(*p));
        if !sbom.is_file() {
            bail!(
                "{} is missing: `release build --platform {p}` writes it next to {}; download \
                 the results of this run",
                sbom.display(),
                file.display()
            );
        }
        receipt_sboms.push(sbom);
        let cdx = results.join(cyclonedx_file_name(*p));
        if !cdx.is_file() {
            bail!(
                "{} is missing: `release build --platform {p}` writes it beside {}; download \
                 the results of this run (the workflow uploads sbom-*.cdx.json with them)",
                cdx.display(),
                file.display()
            );
        }
        receipt_sboms.push(cdx);
        platforms.push(r);
    }
    Ok((platforms, receipt_sboms))
}

/// True when the release leaves out a platform the manifest lists: its index is partial and
/// its receipt says it is incomplete.
pub(crate) fn is_partial(manifest_platforms: &[Platform], released: &[Platform]) -> bool {
    manifest_platforms.iter().any(|p| !released.contains(p))
}

/// The files the `publish` and `receipt write` children read, one set per platform.
pub(crate) struct StageFiles {
    pushed: Vec<PathBuf>,
    /// Each platform's `build` and `smoke` outputs, in the platforms' order.
    builds: Vec<PathBuf>,
    smokes: Vec<PathBuf>,
}

fn stage_file(work: &Path, what: &str, platform: Platform) -> PathBuf {
    work.join(format!("{what}-{}.json", platform.arch()))
}

impl StageFiles {
    /// Where the pieces of `platforms` go in `work`, in their order.
    pub(crate) fn in_dir(work: &Path, platforms: &[Platform]) -> StageFiles {
        StageFiles {
            pushed: platforms
                .iter()
                .map(|p| stage_file(work, "pushed", *p))
                .collect(),
            builds: platforms
                .iter()
                .map(|p| stage_file(work, "build", *p))
                .collect(),
            smokes: platforms
                .iter()
                .map(|p| stage_file(work, "smoke", *p))
                .collect(),
        }
    }
}

fn write_stage_files(
    work: &Path,
    plan: &ReleasePlan,
    platforms: &[PlatformResults],
) -> Result<StageFiles> {
    for r in platforms {
        write_json(&stage_file(work, "build", r.platform), &r.build)?;
        write_json(&stage_file(work, "smoke", r.platform), &r.smoke)?;
        let pushed = PublishReport {
            registry: plan.target.registry.clone(),
            repository: plan.target.repository.clone(),
            dry_run: false,
            platforms: r.pushed.iter().cloned().collect(),
            index: None,
        };
        write_json(&stage_file(work, "pushed", r.platform), &pushed)?;
    }
    let order: Vec<Platform> = platforms.iter().map(|r| r.platform).collect();
    Ok(StageFiles::in_dir(work, &order))
}

/// What the phase's child commands are made from.
pub(crate) struct ShipContext<'a> {
    pub plan_dir: &'a Path,
    pub target: &'a Target,
    /// The plan's clock (RFC 3339): the receipt's `created_at`.
    pub now: &'a str,
    pub assets: &'a Path,
    pub tag: &'a str,
    pub work: &'a Path,
    /// The plan leaves out a platform the manifest lists ([`is_partial`]).
    pub partial: bool,
    pub files: &'a StageFiles,
    pub receipt_sboms: &'a [PathBuf],
    pub verifiers: &'a [PathBuf],
    /// Stop before the tag: no tag step.
    pub defer_tag: bool,
}

/// The phase's child commands, pure functions of the context, so that the phase,
/// `release --dry-run` and the test that parses every step back with `flags.rs` build the very
/// same command lines. `verify` needs the written receipt's path, so it is made later.
pub(crate) struct ShipSteps {
    pub index: Step,
    pub write: Step,
    /// `None` with `--defer-tag`.
    pub tag: Option<Step>,
    assets: PathBuf,
    verify_output: PathBuf,
}

impl ShipSteps {
    pub(crate) fn new(c: &ShipContext<'_>) -> ShipSteps {
        // The index by digest first (the tag deferred), the tag itself last.
        let publish = |defer_tag: bool| crate::release::publish::PublishRequest {
            target: c.target.clone(),
            tag: Some(c.tag.to_string()),
            images: Vec::new(),
            pushed: c.files.pushed.clone(),
            // A maintainer's single-platform release: its receipt says it is incomplete.
            partial: c.partial,
            defer_tag,
            previous: None,
            dry_run: false,
            json: true,
        };
        let index = Step::new(STEP_NAMES[0], publish(true)).output(c.work.join("index.json"));
        let receipt = crate::release::receipt_write::ReceiptWriteRequest {
            gate: c.plan_dir.join("gate.json"),
            resolve: c.plan_dir.join("resolve.json"),
            builds: c.files.builds.clone(),
            smokes: c.files.smokes.clone(),
            sboms: c.receipt_sboms.to_vec(),
            verifiers: c.verifiers.to_vec(),
            publish: c.work.join("index.json"),
            tag: Some(c.tag.to_string()),
            // The child finds it as it would alone ($GITHUB_SHA, else `git rev-parse HEAD`).
            source_commit: None,
            now: Some(c.now.to_string()),
            out_dir: Some(c.assets.to_path_buf()),
            json: true,
        };
        let write = Step::new(STEP_NAMES[1], receipt).output(c.work.join("receipt.json"));
        let tag = (!c.defer_tag)
            .then(|| Step::new(STEP_NAMES[3], publish(false)).output(c.work.join("tagged.json")));
        ShipSteps {
            index,
            write,
            tag,
            assets: c.assets.to_path_buf(),
            verify_output: c.work.join("verify.json"),
        }
    }

    pub(crate) fn verify(&self, receipt: &Path) -> Step {
        let verify = template_verify::receipt::verify::VerifyRequest {
            file: receipt.to_path_buf(),
            artifacts: Some(self.assets.clone()),
            check_registry: false,
            credentials_registry: None,
            json: true,
        };
        Step::new(STEP_NAMES[2], verify).output(self.verify_output.clone())
    }

    /// Every step, in the order the phase runs them, with `receipt` for the one written.
    pub(crate) fn all(&self, receipt: &Path) -> Vec<Step> {
        let mut steps = vec![self.index.clone(), self.write.clone(), self.verify(receipt)];
        steps.extend(self.tag.clone());
        steps
    }
}

/// The verifier binary of each platform in `dir`; every one must be there.
fn verifier_files(dir: &Path, platforms: &[Platform]) -> Result<Vec<PathBuf>> {
    platforms
        .iter()
        .map(|p| {
            let path = dir.join(template_verify::verifier::verifier_file_name(*p));
            if path.is_file() {
                Ok(path)
            } else {
                bail!(
                    "{} is missing: the verifier for {p} (build it with scripts/build-verifiers.sh {})",
                    path.display(),
                    dir.display()
                )
            }
        })
        .collect()
}

fn copy_files<'p>(files: impl IntoIterator<Item = &'p PathBuf>, assets: &Path) -> Result<()> {
    for path in files {
        let name = path.file_name().unwrap_or_default();
        std::fs::copy(path, assets.join(name))
            .with_context(|| format!("cannot copy {} into {}", path.display(), assets.display()))?;
    }
    Ok(())
}

/// The tag must now name the index the receipt records, nothing else.
fn check_tagged(work: &Path, tag: &str, receipt: &Receipt) -> Result<()> {
    let tagged: PublishReport = read_json(&work.join("tagged.json"), "a publish report")?;
    match &tagged.index {
        Some(index) if index.digest == receipt.index.digest => Ok(()),
        other => bail!(
            "the tag {tag} was written for {:?}, not the receipt's index {}",
            other.as_ref().map(|i| &i.digest),
            receipt.index.digest
        ),
    }
}

fn first_two_differ(platforms: &[PlatformResults]) -> DebianDifference {
    match platforms {
        [a, b, ..] => debian_difference(
            (a.platform, &a.build.debian_packages),
            (b.platform, &b.build.debian_packages),
        ),
        _ => DebianDifference::default(),
    }
}

fn write_workflow_outputs(
    shipped: &Shipped,
    receipt: &Receipt,
    verifier: &template_verify::settings::Environment,
) -> Result<()> {
    append_to_github_file(
        &verifier.github_output,
        &format!(
            "tag={}\nreceipt={}\nreference={}\nnotes={}\n{}",
            shipped.tag,
            shipped
                .receipt
                .file_name()
                .unwrap_or_default()
                .to_string_lossy(),
            shipped.reference,
            shipped.notes.display(),
            attestation_outputs(receipt)
        ),
    )
}

/// What the workflow's attestation steps name: the repository, the index digest, and each
/// platform's manifest digest (`digest_linux_amd64=`), which its SBOM is attested against.
pub(crate) fn attestation_outputs(receipt: &Receipt) -> String {
    let mut out = format!(
        "repository={}\nindex_digest={}\n",
        receipt.index.repository, receipt.index.digest
    );
    for p in &receipt.platforms {
        out.push_str(&format!(
            "digest_{}={}\n",
            p.platform.to_string().replace('/', "_"),
            p.digest
        ));
    }
    out
}

/// Markdown for the job summary: what a consumer pins, and how the platforms differ.
pub(crate) fn summary_markdown(shipped: &Shipped, receipt: &Receipt) -> String {
    let mut out = format!(
        "## Release {}\n\nPin `{}`\n\n| platform | digest | Debian packages |\n| --- | --- | --- |\n",
        shipped.tag, shipped.reference
    );
    for p in &receipt.platforms {
        out.push_str(&format!(
            "| `{}` | `{}` | {} |\n",
            p.platform,
            p.digest,
            p.debian_packages.len()
        ));
    }
    let d = &shipped.debian_difference;
    if !d.platforms.0.is_empty() {
        out.push_str(&format!(
            "\nDebian packages only on {}: {}; only on {}: {}; other versions: {}\n",
            d.platforms.0,
            list_or_none(&d.only_first),
            d.platforms.1,
            list_or_none(&d.only_second),
            list_or_none(&d.versions)
        ));
    }
    out
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items
            .iter()
            .map(|i| format!("`{i}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn remove_receipts(assets: &Path) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(assets) else {
        return Ok(());
    };
    for entry in entries {
        let path = entry?.path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if name.starts_with("receipt-") && name.ends_with(".json") {
            std::fs::remove_file(&path)
                .with_context(|| format!("cannot remove the stale receipt {}", path.display()))?;
        }
    }
    Ok(())
}

/// Copies the files the receipt names, and its schema, next to it: what a GitHub release
/// carries and what consumers verify against.
fn copy_assets(root: &Path, receipt: &Receipt, assets: &Path) -> Result<()> {
    let mut copies: Vec<(PathBuf, String)> = receipt
        .artifacts
        .iter()
        .map(|a| (root.join(&a.path), a.name.clone()))
        .collect();
    copies.push((
        root.join(RECEIPT_SCHEMA),
        Path::new(RECEIPT_SCHEMA)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned(),
    ));
    // Every package in one table, for people (the notes are the release's body now); the
    // receipt does not hash it: it is made from inventory.json, which it does.
    let table = root.join(INVENTORY_MD);
    if table.is_file() {
        copies.push((table, INVENTORY_MD_ASSET.to_string()));
    }
    for (from, name) in copies {
        let bytes =
            std::fs::read(&from).with_context(|| format!("cannot read {}", from.display()))?;
        atomic_write(&assets.join(name), &bytes)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attestation_outputs_name_the_index_and_every_platform_manifest() {
        let receipt = template_verify::receipt::tests_support::sample();
        let out = attestation_outputs(&receipt);
        assert!(out.starts_with(&format!(
            "repository={}\nindex_digest={}\n",
            receipt.index.repository, receipt.index.digest
        )));
        for p in &receipt.platforms {
            let key = format!("digest_{}=", p.platform.to_string().replace('/', "_"));
            assert!(out.contains(&format!("{key}{}\n", p.digest)), "{out}");
        }
    }

    #[test]
    fn the_debian_difference_lists_each_side_and_versions() {
        let amd64 = [
            "libc6=2.36-9+deb12u13".to_string(),
            "grub=1".into(),
            "zlib1g=1:1.2.13".into(),
        ];
        let arm64 = [
            "libc6=2.36-9+deb12u13".to_string(),
            "zlib1g=1:1.2.14".into(),
            "u-boot=2".into(),
        ];
        let d = debian_difference(
            (Platform::LinuxAmd64, &amd64),
            (Platform::LinuxArm64, &arm64),
        );
        assert_eq!(d.only_first, ["grub=1"]);
        assert_eq!(d.only_second, ["u-boot=2"]);
        assert_eq!(d.versions, ["zlib1g: 1:1.2.13 -> 1:1.2.14"]);
    }
}
