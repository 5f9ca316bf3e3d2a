//! `receipt write`: the stage outputs joined into one receipt ([`assemble`], pure), written
//! under its own digest and read back as a consumer would.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::util::{atomic_write, now_or, read_json, sha256_file, sha256_hex};
use template_formats::manifest::{Manifest, Platform};
use template_formats::model::build::BuildReport;
use template_formats::model::gate::GateDecision;
use template_formats::model::inventory::Inventory;
use template_formats::model::publish::{PublishReport, PushedImage};
use template_formats::model::receipt::*;
use template_formats::model::resolution::Resolution;
use template_formats::model::rfc3339;
use template_formats::model::smoke::SmokeReport;
use template_formats::model::transcript::{
    transcripts_file_name, HarnessTranscript, Transcripts, TRANSCRIPTS_SCHEMA_VERSION,
};
use template_formats::paths::INVENTORY;
use template_formats::paths::MANIFEST;
use template_verify::receipt::policy::ReceiptPolicy;
use template_verify::receipt::verify::{
    completeness_problems, index_digest_problems, print_problems, verify_file,
};
use template_verify::receipt::{
    receipt_bytes, receipt_file_name, Problem, ARTIFACTS, SCHEMA_VERSION,
};

/// Everything `receipt write` assembles a receipt from; [`assemble`] is pure over it.
pub(crate) struct ReceiptInputs {
    pub release_tag_override: Option<String>,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub source_commit: String,
    pub gate: GateDecision,
    pub resolve: Resolution,
    pub inventory: Inventory,
    pub manifest: Manifest,
    /// (asset name, repository path, sha256 hex)
    pub artifacts: Vec<(String, String, String)>,
    pub builds: Vec<BuildReport>,
    pub smokes: Vec<SmokeReport>,
    /// Each platform's SBOM, as recorded.
    pub sboms: BTreeMap<Platform, SbomRecord>,
    /// Each platform's CycloneDX SBOM, when given.
    pub cyclonedx: BTreeMap<Platform, SbomRecord>,
    /// The consumer's verifier binaries the release carries, by platform.
    pub verifiers: BTreeMap<Platform, VerifierRecord>,
    pub publish: PublishReport,
}

/// A receipt and the assets made with it (each platform's transcripts, whose sha256 it records).
pub(crate) struct Assembled {
    pub receipt: Receipt,
    pub transcripts: Vec<Transcripts>,
}

/// Joins the inputs into a receipt and decides `complete`. Errors are wiring mistakes
/// (inputs that do not belong together); a failed smoke check is not an error but an
/// incomplete receipt.
pub(crate) fn assemble(inputs: ReceiptInputs) -> Result<Assembled> {
    let ReceiptInputs {
        release_tag_override,
        created_at,
        source_commit,
        gate,
        resolve,
        inventory,
        manifest,
        artifacts,
        builds,
        smokes,
        sboms,
        cyclonedx,
        verifiers,
        publish,
    } = inputs;

    let (release_tag, index) = index_record(&publish, release_tag_override)?;
    // `lock` keeps the committed inventory when a new clock alone would change it, so the
    // lockfile's cutoff may be earlier than this resolution's (the same versions either way:
    // checked package by package below). A later one means the lockfile is not from this run.
    if inventory.cutoff > resolve.cutoff {
        bail!(
            "{INVENTORY}'s cutoff {} is later than the resolve output's {}: the lockfile \
             was not written from this resolution (run `cargo xtask lock`)",
            rfc3339(inventory.cutoff),
            rfc3339(resolve.cutoff)
        );
    }

    let packages = package_records(&manifest, &resolve, &inventory)?;
    let inputs = inputs_record(&packages, &inventory)?;
    let dependencies = inventory
        .packages
        .iter()
        .filter(|p| !p.top_level)
        .map(|p| DependencyRecord {
            name: p.name.clone(),
            version: p.version.clone(),
            path: p.path.clone(),
            integrity: p.integrity.clone(),
        })
        .collect();

    let pushed: BTreeMap<Platform, _> = publish.platforms.iter().map(|p| (p.platform, p)).collect();
    let mut platforms = Vec::new();
    let mut transcripts = Vec::new();
    let mut seen = BTreeSet::new();
    for build in &builds {
        if !seen.insert(build.platform) {
            bail!("two build outputs are for {}", build.platform);
        }
        let pushed = pushed.get(&build.platform).with_context(|| {
            format!(
                "{} was built ({}) but the publish output has no image for it",
                build.platform, build.image
            )
        })?;
        let sbom = sboms.get(&build.platform).cloned().with_context(|| {
            format!(
                "no SBOM was given for {}; make it with `cargo xtask sbom --image {} --platform \
                 {} --output {}` and pass it with --sbom",
                build.platform,
                build.image,
                build.platform,
                crate::image::sbom::sbom_file_name(build.platform)
            )
        })?;
        let (mut record, transcript) = platform_record(build, pushed, &smokes, &manifest, sbom)?;
        record.cyclonedx = cyclonedx.get(&build.platform).cloned();
        platforms.push(record);
        transcripts.extend(transcript);
    }
    for p in &publish.platforms {
        if !seen.contains(&p.platform) {
            bail!(
                "the publish output has an image for {} ({}) but no build output was given for it",
                p.platform,
                p.image
            );
        }
    }
    platforms.sort_by_key(|p| p.platform);

    let node = NodeRecord {
        version: inventory.node.version.clone(),
        npm: (&inventory.node.npm).into(),
        platforms: inventory
            .node
            .platforms
            .iter()
            .map(|(p, t)| (*p, t.into()))
            .collect(),
    };

    let mut receipt = Receipt {
        schema_version: SCHEMA_VERSION,
        release_tag,
        created_at: rfc3339(created_at),
        source_commit,
        trigger: gate.trigger,
        gate: GateRecord {
            due: gate.due,
            forced: gate.forced,
            catch_up: gate.catch_up,
            epoch_day: gate.epoch_day,
            next_due: gate.next_due,
            reason: gate.reason,
        },
        resolver: ResolverRecord {
            // The lockfile's own cutoff: what the release's versions are no newer than.
            cutoff: rfc3339(inventory.cutoff),
            registry: inventory.registry.clone(),
        },
        inputs: Some(inputs),
        node,
        packages,
        dependencies,
        artifacts: artifacts
            .into_iter()
            .map(|(name, path, sha256)| ArtifactRecord { name, path, sha256 })
            .collect(),
        verifiers: verifiers.into_values().collect(),
        required_platforms: manifest.platforms.clone(),
        platforms,
        index,
        complete: false,
    };
    let index_problems: Vec<_> = index_digest_problems(&receipt);
    if let Some(p) = index_problems.first() {
        bail!(
            "the publish output does not hold together: {}: {}",
            p.field,
            p.problem
        );
    }
    receipt.complete = completeness_problems(&receipt, &manifest).is_empty();
    transcripts.sort_by_key(|t| t.platform);
    Ok(Assembled {
        receipt,
        transcripts,
    })
}

/// The published index, and the release tag it is under (`--tag` must agree with it).
fn index_record(
    publish: &PublishReport,
    release_tag_override: Option<String>,
) -> Result<(String, IndexRecord)> {
    let Some(published) = publish.index.clone() else {
        bail!("the publish output has no `index`: run `cargo xtask publish` with --tag");
    };
    if publish.dry_run {
        bail!("the publish output comes from a --dry-run: nothing was published");
    }
    let index = IndexRecord {
        tag: published.tag,
        digest: published.digest,
        media_type: published.media_type,
        size: published.size,
        repository: published.repository,
        reference: published.reference,
    };
    let release_tag = release_tag_override.unwrap_or_else(|| index.tag.clone());
    if release_tag != index.tag {
        bail!(
            "--tag {release_tag} differs from the published index's tag {}",
            index.tag
        );
    }
    if template_formats::model::tag::parse_release_tag(&release_tag).is_none() {
        bail!(
            "release tag `{release_tag}` is not a form consumers accept (`YYYY.MM.DD-` and 12 hex \
             digits of the inputs' digest, or the workflow run id); publish under such a tag"
        );
    }
    Ok((release_tag, index))
}

/// The manifest's packages as resolved, each with the integrity the lockfile locks.
fn package_records(
    manifest: &Manifest,
    resolve: &Resolution,
    inventory: &Inventory,
) -> Result<Vec<PackageRecord>> {
    let mut packages = Vec::new();
    for spec in &manifest.packages {
        let resolved = resolve
            .packages
            .iter()
            .find(|p| p.name == spec.name)
            .with_context(|| format!("the resolve output has no package `{}`", spec.name))?;
        let locked = inventory
            .packages
            .iter()
            .find(|p| p.top_level && p.name == spec.name)
            .with_context(|| format!("{INVENTORY} has no top-level package `{}`", spec.name))?;
        if locked.version != resolved.version.to_string() {
            bail!(
                "package `{}`: resolve chose {} but {INVENTORY} locks {}; run `cargo xtask \
                 lock` so the lockfile matches the resolution",
                spec.name,
                resolved.version,
                locked.version
            );
        }
        packages.push(PackageRecord {
            name: spec.name.clone(),
            version: resolved.version.to_string(),
            integrity: locked.integrity.clone(),
            latest: resolved.latest.to_string(),
            published: Some(rfc3339(resolved.published)),
            previously_locked: resolved.locked.as_ref().map(ToString::to_string),
            rollback: resolved.rollback,
            held_back: resolved.held_back,
            notes: resolved.notes.clone(),
            repository: resolved.repository.clone(),
            rejected: resolved
                .rejected
                .iter()
                .map(|r| RejectedVersion {
                    version: r.version.to_string(),
                    reasons: r.reasons.clone(),
                })
                .collect(),
        });
    }
    Ok(packages)
}

/// How the inputs were judged, from the inventory `lock` wrote: its status, registry and keys,
/// and each top-level package's registry key and install scripts.
fn inputs_record(packages: &[PackageRecord], inventory: &Inventory) -> Result<InputsRecord> {
    let packages = packages
        .iter()
        .map(|p| {
            let row = inventory
                .packages
                .iter()
                .find(|row| row.top_level && row.name == p.name)
                .with_context(|| format!("{INVENTORY} has no top-level package `{}`", p.name))?;
            Ok(PackageInputsRecord {
                name: p.name.clone(),
                version: p.version.clone(),
                signed_by: row.signed_by.clone(),
                install_scripts: row.install_scripts.clone(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(InputsRecord {
        status: inventory.inputs,
        registry: inventory.registry.clone(),
        keys: inventory.keys.clone(),
        packages,
    })
}

/// One platform's record: the build, the image pushed from it and its smoke test, which
/// must be one image and every check the manifest requires of it.
fn platform_record(
    build: &BuildReport,
    pushed: &PushedImage,
    smokes: &[SmokeReport],
    manifest: &Manifest,
    sbom: SbomRecord,
) -> Result<(PlatformRecord, Option<Transcripts>)> {
    let (Some(image_id), Some(size), false) = (&build.image_id, build.size, build.dry_run) else {
        bail!(
            "the build output for {} ({}) is from a --dry-run: nothing was built; pass the \
             output of `cargo xtask build --platform {} --json`",
            build.platform,
            build.image,
            build.platform
        );
    };
    let image_size = u64::try_from(size).with_context(|| {
        format!(
            "the build output for {} gives the image size {size}",
            build.platform
        )
    })?;
    if *image_id != *pushed.image_id {
        bail!(
            "{}: the published image {} ({}) is not the built image {} ({})",
            build.platform,
            pushed.image,
            pushed.image_id,
            build.image,
            image_id
        );
    }
    if !pushed.read_back {
        bail!(
            "{}: the publish output for {} does not show the image read back from the registry \
             (the check that the published bytes are the tested image); publish it again with \
             `cargo xtask publish`",
            build.platform,
            pushed.reference
        );
    }
    let smoke = smokes
        .iter()
        .find(|s| s.image == build.image || *image_id == *s.image)
        .with_context(|| {
            format!(
                "no smoke output is for the {} image {}: run `cargo xtask smoke --image {} \
                 --json` and pass it with --smoke",
                build.platform, build.image, build.image
            )
        })?;
    // A smoke output without every required check is not a test result to publish: the
    // receipt would look complete while the image went partly untested.
    let required = manifest.required_smoke_checks(build.platform, build.emulated);
    let mut names = BTreeSet::new();
    for check in &smoke.checks {
        if !names.insert(check.name.as_str()) {
            bail!(
                "the smoke output for the {} image {} records check `{}` twice; pass the \
                 output of one `cargo xtask smoke` run",
                build.platform,
                build.image,
                check.name
            );
        }
    }
    let missing: Vec<&String> = required
        .iter()
        .filter(|n| !names.contains(n.as_str()))
        .collect();
    if !missing.is_empty() {
        bail!(
            "the smoke output for the {} image {} ({} build) lacks the required check(s) \
             {missing:?} (smoke_checks in {MANIFEST}); run `cargo xtask smoke --image {} \
             --json` with this tool's version and pass its whole output",
            build.platform,
            build.image,
            if build.emulated { "emulated" } else { "native" },
            build.image
        );
    }
    let transcripts = transcripts_of(build.platform, smoke);
    let record = PlatformRecord {
        platform: build.platform,
        os: pushed.os.clone(),
        architecture: pushed.architecture.clone(),
        variant: pushed.variant.clone(),
        build: if build.emulated {
            BuildMode::Emulated
        } else {
            BuildMode::Native
        },
        build_id: build.build_id.clone(),
        local_image: build.image.clone(),
        image_id: image_id.to_string(),
        base_image: BaseImageRecord {
            reference: build.base_image.clone(),
            digest: build.base_image_id.to_string(),
        },
        digest: pushed.digest.clone(),
        media_type: pushed.media_type.clone(),
        manifest_size: pushed.manifest_size,
        config_digest: pushed.config_digest.clone(),
        image_size,
        pushed_size: pushed.size,
        debian_packages: build.debian_packages.clone(),
        sbom,
        cyclonedx: None,
        smoke: SmokeRecord {
            passed: smoke.passed,
            checks: smoke
                .checks
                .iter()
                .map(|c| SmokeCheck {
                    name: c.name.clone(),
                    passed: c.passed,
                    output: c.output.clone(),
                    duration_secs: Some(c.duration_secs),
                })
                .collect(),
        },
        layers: layer_records(pushed),
        transcripts: transcripts.as_ref().map(|t| AssetRecord {
            name: transcripts_file_name(build.platform),
            sha256: sha256_hex(&t.to_bytes()),
        }),
        harnesses: (!smoke.harnesses.is_empty()).then(|| {
            smoke
                .harnesses
                .iter()
                .map(|h| HarnessStateRecord {
                    name: h.name.clone(),
                    session: h.session.clone(),
                    written: h.written.clone(),
                })
                .collect()
        }),
    };
    Ok((record, transcripts))
}

/// The pushed image's layers, when the publish output has them all (an older push record
/// does not).
fn layer_records(pushed: &PushedImage) -> Option<Vec<LayerRecord>> {
    (pushed.layer_blobs.len() == pushed.layers && pushed.layers > 0).then(|| {
        pushed
            .layer_blobs
            .iter()
            .map(|l| LayerRecord {
                digest: l.digest.clone(),
                size: l.size,
            })
            .collect()
    })
}

/// A platform's transcripts asset, from its smoke output's harness evidence; `None` when the
/// smoke ran no turn (an emulated build).
fn transcripts_of(platform: Platform, smoke: &SmokeReport) -> Option<Transcripts> {
    (!smoke.harnesses.is_empty()).then(|| Transcripts {
        schema_version: TRANSCRIPTS_SCHEMA_VERSION,
        platform,
        harnesses: smoke
            .harnesses
            .iter()
            .map(|h| HarnessTranscript {
                name: h.name.clone(),
                messages: h.messages.clone(),
            })
            .collect(),
    })
}

// ---------------------------------------------------------------------------------------------
// `receipt write`

fn source_commit(root: &Path, github_sha: Option<&str>) -> Result<String> {
    if let Some(sha) = github_sha {
        return Ok(sha.to_string());
    }
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["rev-parse", "HEAD"])
        .output()
        .context("cannot run git to find the source commit; pass --source-commit")?;
    if !out.status.success() {
        bail!(
            "`git rev-parse HEAD` failed in {}: {}; pass --source-commit",
            root.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[derive(Serialize)]
struct WriteReport<'a> {
    path: String,
    sha256: String,
    release_tag: &'a str,
    reference: &'a str,
    complete: bool,
    problems: Vec<Problem>,
}

/// `--verifier` files, each named for its platform and checked to be a static executable
/// for it.
fn verifier_records(paths: &[PathBuf]) -> Result<BTreeMap<Platform, VerifierRecord>> {
    let mut records = BTreeMap::new();
    for path in paths {
        let file_name = path.file_name().unwrap_or_default().to_string_lossy();
        let platform =
            template_verify::verifier::platform_of_file_name(&file_name).with_context(|| {
                format!(
                    "{} is not named as a verifier binary of a platform (`{}-<os>-<arch>`)",
                    path.display(),
                    template_verify::verifier::BINARY
                )
            })?;
        let record = template_verify::verifier::record(path, platform)?;
        if records.insert(platform, record).is_some() {
            bail!("two verifier binaries were given for {platform}");
        }
    }
    Ok(records)
}

/// The `--sbom` files by platform, SPDX and CycloneDX apart, each checked to be this tool's
/// document of its platform, and a CycloneDX one the form of the SPDX one given with it.
type SbomRecords = (
    BTreeMap<Platform, SbomRecord>,
    BTreeMap<Platform, SbomRecord>,
);

fn sbom_records(paths: &[PathBuf]) -> Result<SbomRecords> {
    use crate::image::sbom::{cyclonedx, cyclonedx_file_name, sbom_file_name};
    let named = |path: &Path, name: fn(Platform) -> String| {
        let file_name = path.file_name().unwrap_or_default().to_string_lossy();
        Platform::ALL.into_iter().find(|p| name(*p) == file_name)
    };
    let record = |path: &Path| -> Result<SbomRecord> {
        Ok(SbomRecord {
            name: path
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned(),
            sha256: sha256_file(path)?,
        })
    };
    let (mut spdx, mut cdx) = (BTreeMap::new(), BTreeMap::new());
    let mut documents = BTreeMap::new();
    for path in paths {
        if named(path, cyclonedx_file_name).is_some() {
            continue;
        }
        let platform = named(path, sbom_file_name).with_context(|| {
            format!(
                "{} is not named as an SBOM of a platform (`sbom-<os>-<arch>.spdx.json` or \
                 `sbom-<os>-<arch>.cdx.json`)",
                path.display()
            )
        })?;
        documents.insert(platform, crate::image::sbom::check_file(path, platform)?);
        if spdx.insert(platform, record(path)?).is_some() {
            bail!("two SBOMs were given for {platform}");
        }
    }
    for path in paths {
        let Some(platform) = named(path, cyclonedx_file_name) else {
            continue;
        };
        let doc = documents.get(&platform).with_context(|| {
            format!(
                "{} was given without the SPDX SBOM of {platform} it is the form of; pass \
                 {} with --sbom too",
                path.display(),
                sbom_file_name(platform)
            )
        })?;
        cyclonedx::check_file(path, doc)?;
        if cdx.insert(platform, record(path)?).is_some() {
            bail!("two CycloneDX SBOMs were given for {platform}");
        }
    }
    Ok((spdx, cdx))
}

/// `cargo xtask receipt write`: the files a receipt is assembled from, and where it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptWriteRequest {
    /// `gate --json` output.
    pub gate: PathBuf,
    /// `resolve --json` output.
    pub resolve: PathBuf,
    /// `build --json` outputs, one per platform.
    pub builds: Vec<PathBuf>,
    /// `smoke --json` outputs, one per platform.
    pub smokes: Vec<PathBuf>,
    /// Each platform's SBOMs, SPDX and CycloneDX.
    pub sboms: Vec<PathBuf>,
    /// The consumer's static verifier binaries.
    pub verifiers: Vec<PathBuf>,
    /// `publish --tag T --json` output (with the index).
    pub publish: PathBuf,
    /// The release tag; `None` is the published index's.
    pub tag: Option<String>,
    /// The source commit; `None` is `$GITHUB_SHA`, else `git rev-parse HEAD`.
    pub source_commit: Option<String>,
    /// The receipt's creation time (RFC 3339); `None` is now.
    pub now: Option<String>,
    /// Where the receipt goes; `None` is .xtask/receipts.
    pub out_dir: Option<PathBuf>,
    pub json: bool,
}

impl ReceiptWriteRequest {
    /// This request as the command line that parses back into it (the release's steps run
    /// their children this way; a test in main.rs checks the round trip).
    pub fn to_args(&self) -> Vec<std::ffi::OsString> {
        crate::util::Argv::command(&["receipt", "write"])
            .switch("--json", self.json)
            .value("--gate", &self.gate)
            .value("--resolve", &self.resolve)
            .value("--publish", &self.publish)
            .option("--tag", self.tag.as_ref())
            .option("--now", self.now.as_ref())
            .option("--out-dir", self.out_dir.as_ref())
            .each("--build", &self.builds)
            .each("--smoke", &self.smokes)
            .each("--sbom", &self.sboms)
            .each("--verifier", &self.verifiers)
            .option("--source-commit", self.source_commit.as_ref())
            .into_vec()
    }
}

pub fn write_cmd(request: ReceiptWriteRequest, ctx: &crate::Context) -> Result<ExitCode> {
    let layout = &ctx.layout;
    let root = layout.root();
    let manifest = Manifest::load(&layout.manifest())?;
    let inventory = Inventory::load(&layout.inventory())?;
    let mut artifacts = Vec::new();
    for (name, path) in ARTIFACTS {
        let file = root.join(path);
        let digest = sha256_file(&file)
            .with_context(|| format!("artifact `{name}` ({path}) is needed for the receipt"))?;
        artifacts.push((name.to_string(), path.to_string(), digest));
    }
    let (sboms, cyclonedx) = sbom_records(&request.sboms)?;
    let inputs = ReceiptInputs {
        release_tag_override: request.tag.clone(),
        created_at: now_or(request.now.as_deref())?,
        source_commit: match &request.source_commit {
            Some(sha) => sha.clone(),
            None => source_commit(root, ctx.settings.github_sha.as_deref())?,
        },
        gate: read_json(&request.gate, "`cargo xtask gate --json` output")?,
        resolve: read_json(&request.resolve, "`cargo xtask resolve --json` output")?,
        inventory,
        manifest,
        artifacts,
        builds: request
            .builds
            .iter()
            .map(|p| read_json(p, "`cargo xtask build --json` output"))
            .collect::<Result<_>>()?,
        smokes: request
            .smokes
            .iter()
            .map(|p| read_json(p, "`cargo xtask smoke --json` output"))
            .collect::<Result<_>>()?,
        sboms,
        cyclonedx,
        verifiers: verifier_records(&request.verifiers)?,
        publish: read_json(&request.publish, "`cargo xtask publish --json` output")?,
    };
    let Assembled {
        receipt,
        transcripts,
    } = assemble(inputs)?;
    let bytes = receipt_bytes(&receipt);
    let digest = sha256_hex(&bytes);
    let out_dir = request
        .out_dir
        .clone()
        .unwrap_or_else(|| layout.state("receipts"));
    // The assets the receipt vouches for first, under their fixed names, then the receipt.
    for t in &transcripts {
        atomic_write(
            &out_dir.join(transcripts_file_name(t.platform)),
            &t.to_bytes(),
        )?;
    }
    let path: PathBuf = out_dir.join(receipt_file_name(&receipt.release_tag, &digest));
    atomic_write(&path, &bytes)?;

    // Read back what is on disk and verify it as a consumer would.
    // As a consumer would: judged by the manifest the receipt records, which must be it.
    let policy = ReceiptPolicy::release_asset(&layout.manifest())?;
    let check = verify_file(&path, None, &policy)?;
    let report = WriteReport {
        path: path.display().to_string(),
        sha256: digest,
        release_tag: &receipt.release_tag,
        reference: &receipt.index.reference,
        complete: receipt.complete,
        problems: check.problems,
    };
    if request.json {
        template_verify::terminal_text::print_json_escaped(&report)?;
    } else {
        println!("{}", template_verify::terminal_text::escape(&report.path));
    }
    if !receipt.complete {
        eprintln!("the receipt is written but incomplete; consumers will reject it:");
        print_problems(&report.problems);
        return Ok(ExitCode::FAILURE);
    }
    if !report.problems.is_empty() {
        print_problems(&report.problems);
        bail!("the receipt written to {} does not verify", report.path);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::sbom::tests::make;
    use crate::image::sbom::{cyclonedx, cyclonedx_file_name, sbom_file_name};
    use template_formats::sbom::document_bytes;

    #[test]
    fn a_cyclonedx_sbom_is_recorded_only_beside_the_spdx_one_it_is_the_form_of() {
        let dir = tempfile::tempdir().unwrap();
        let (amd, arm) = (Platform::LinuxAmd64, Platform::LinuxArm64);
        let clock = "2026-11-30T06:17:00Z";
        let spdx = dir.path().join(sbom_file_name(amd));
        let cdx = dir.path().join(cyclonedx_file_name(amd));
        let doc = make(amd, &[], clock);
        std::fs::write(&spdx, document_bytes(&doc)).unwrap();
        std::fs::write(&cdx, cyclonedx::bom_bytes(&doc).unwrap()).unwrap();
        let (s, c) = sbom_records(&[cdx.clone(), spdx.clone()]).unwrap();
        assert_eq!(s[&amd].name, "sbom-linux-amd64.spdx.json");
        assert_eq!(c[&amd].name, "sbom-linux-amd64.cdx.json");
        assert_eq!(c[&amd].sha256, sha256_file(&cdx).unwrap());
        let err = sbom_records(std::slice::from_ref(&cdx)).unwrap_err();
        assert!(
            format!("{err:#}").contains("without the SPDX SBOM"),
            "{err:#}"
        );
        // The arm64 BOM under the amd64 name: not the form of the amd64 document.
        std::fs::write(&cdx, cyclonedx::bom_bytes(&make(arm, &[], clock)).unwrap()).unwrap();
        let err = sbom_records(&[spdx, cdx]).unwrap_err();
        assert!(
            format!("{err:#}").contains("describes another image"),
            "{err:#}"
        );
    }
}
