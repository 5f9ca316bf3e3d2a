//! `cargo xtask build --platform P`: the template image for one platform, through the Docker
//! Engine API (classic builder, so Docker 20.10 and 28+ behave the same).
//!
//! The image is tagged `coding-agent:<build-id>`, the build id being a content hash of every
//! input that decides the image: the Dockerfile, the install plan it runs, package.json,
//! package-lock.json, the manifest, the build arguments derived from them and from the inventory, the base image's id and the
//! platform. The same inputs give the same tag, so a build whose tag exists is skipped. The
//! engine builds the Dockerfile's stages up to `system` (tagged `coding-agent-engine:<build-id>`,
//! kept for the engine's layer cache), and [`assemble`](crate::image::assemble) makes the final
//! stage from them and loads it canonical as the build's tag, so every later step sees an image
//! whose digests depend only on its files. The
//! optional extra CA bundle is deliberately not an input: it only lets downloads through a
//! TLS-inspecting proxy and leaves nothing in the image.
//!
//! The build context is made here, in memory, from exactly the files the Dockerfile needs.
//! Pure functions decide the plan (arguments, id, context); IO stays in [`run`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use bollard::query_parameters::BuildImageOptionsBuilder;
use futures_util::StreamExt;

use crate::image::assemble::{assemble, Assembly, Canonical};
use crate::image::build_inputs::{
    build_args, build_context, build_id, host_ca_bundle, image_tag, BuildInputs, BUILD_ID_LABEL,
};
use crate::image::canonicalize::ENGINE_REPOSITORY;
use crate::image::dockerfile::{check_stage_starts, final_stage, stage_images};
use crate::image::engine::{self, EngineInfo};
use crate::image::identity::{self, ManifestRecords};
use crate::util::{print_json, Progress};
use template_formats::manifest::Platform;
use template_formats::model::build::BuildReport;
use template_formats::model::Digest;
use template_formats::paths::{DOCKERFILE, MANIFEST};

/// An image id as the engine reports it, read as the digest it is.
fn engine_digest(id: &str, image: &str) -> Result<Digest> {
    id.parse()
        .with_context(|| format!("the engine's id of {image} is not a sha256 digest"))
}

/// `cargo xtask build`: one platform's template image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildRequest {
    pub platform: Platform,
    /// Base image reference; `None` is the local base that `cargo xtask base` makes.
    pub base_image: Option<String>,
    /// Extra CA bundle (PEM) for the download steps only (a TLS-inspecting proxy's).
    pub ca_bundle: Option<PathBuf>,
    /// Print the build id and the reference it would build, build nothing.
    pub dry_run: bool,
    /// Rebuild every layer (no build cache), even when the image exists.
    pub no_cache: bool,
    pub json: bool,
}

impl BuildRequest {
    /// This request as the command line that parses back into it (the release's steps run
    /// their children this way; a test in main.rs checks the round trip).
    /// An absent `base_image` or `ca_bundle` renders no flag, so the child falls back to
    /// XTASK_BASE_IMAGE / XTASK_EXTRA_CA_BUNDLE of the environment it inherits, as a person's
    /// `cargo xtask build` would: the parent never chose one (the round-trip test parses
    /// without those variables, so a present one must be rendered to come back).
    pub fn to_args(&self) -> Vec<std::ffi::OsString> {
        crate::util::Argv::command(&["build"])
            .switch("--dry-run", self.dry_run)
            .switch("--no-cache", self.no_cache)
            .switch("--json", self.json)
            .value("--platform", self.platform.to_string())
            .option("--base-image", self.base_image.as_ref())
            .option("--ca-bundle", self.ca_bundle.as_ref())
            .into_vec()
    }
}

pub async fn run(request: BuildRequest, ctx: &crate::Context) -> Result<ExitCode> {
    let progress = Progress::default();
    let layout = &ctx.layout;
    let inputs = BuildInputs::load(layout)?;
    let platform = request.platform;
    if !inputs.manifest.platforms.contains(&platform) {
        bail!("{MANIFEST} does not list {platform} under `platforms`");
    }
    let emulated = Platform::host() != Some(platform);
    let epoch = inputs.manifest.image.source_date_epoch;
    if i64::try_from(epoch).map_or(true, |e| e > chrono::Utc::now().timestamp()) {
        bail!(
            "{MANIFEST}'s `image.source_date_epoch` ({epoch}) is in the future: file times \
             after the build would not be clamped; use a past instant"
        );
    }
    let mut build_args = build_args(&inputs, platform)?;

    let docker = engine::connect(&ctx.settings).await?;
    let engine_info = engine::engine_info(&docker).await?;
    progress.step(format!("engine: {engine_info}"));
    // The assembly reads each tree through a created container: a build killed meanwhile
    // cannot remove it, and a re-run of the build alone (no smoke after it) would not.
    if !request.dry_run {
        let dead = engine::remove_dead_runs(&docker, false).await?;
        if dead > 0 {
            progress.step(format!(
                "removed {dead} container(s) and volume(s) left by runs that no longer exist"
            ));
        }
    }
    let records = ManifestRecords::new(&crate::image::identity::records_dir(layout));
    let (base_image, base_image_id) =
        inspect_base(&docker, &engine_info, &records, &request).await?;
    build_args.insert("BASE_IMAGE".into(), base_image.clone());

    let build_id = build_id(&inputs, &build_args, &base_image_id, platform);
    let tag = image_tag(&build_id);
    let ca_bundle = host_ca_bundle(request.ca_bundle.as_deref(), &ctx.settings);
    let started = Instant::now();
    let mut report = BuildReport {
        image: tag.clone(),
        platform,
        build_id: build_id.clone(),
        image_id: None,
        built: false,
        emulated,
        size: None,
        base_image: base_image.clone(),
        base_image_id: engine_digest(&base_image_id, &base_image)?,
        ca_bundle: ca_bundle.clone(),
        dry_run: request.dry_run,
        duration_secs: 0.0,
        debian_packages: Vec::new(),
    };

    let existing = match request.no_cache {
        true => None,
        false => identity::inspect(&docker, &engine_info, &tag, &records).await?,
    };
    let engine_tag = format!("{ENGINE_REPOSITORY}:{build_id}");
    let final_stage = final_stage(&String::from_utf8_lossy(&inputs.dockerfile), &build_args)
        .with_context(|| format!("cannot assemble the image {DOCKERFILE} describes"))?;
    if let Some(existing) = existing {
        engine::ensure_image_platform(&tag, &existing.inspect, platform)?;
        progress.step(format!(
            "{tag} exists (same inputs) as {}; nothing to build",
            existing.config_digest
        ));
        record_image(
            &mut report,
            Some(existing.config_digest.to_string()),
            existing.inspect.size,
        )?;
    } else if request.dry_run {
        progress.step(format!(
            "would build the stages up to `{}` as {engine_tag} for {platform} from \
             {base_image}{}, then assemble the final stage and load it as {tag}",
            final_stage.system,
            if emulated { " under emulation" } else { "" }
        ));
    } else {
        if emulated {
            crate::image::base::ensure_emulation(platform)?;
            progress.step(format!(
                "{platform} is emulated here: expect several times the native time"
            ));
        }
        let job = AssembledBuild {
            context: build_context(&inputs, report.ca_bundle.as_deref(), &progress)?,
            dockerfile: &String::from_utf8_lossy(&inputs.dockerfile),
            build_args: &build_args,
            platform,
            engine_tag: &engine_tag,
            tag: &tag,
            epoch,
            cache_dir: &layout.layer_cache(platform),
            no_cache: request.no_cache,
            extra_labels: &[(BUILD_ID_LABEL.to_string(), build_id.clone())],
            engine: &engine_info,
            records: &records,
            docker_host: ctx.settings.docker_host.as_deref(),
        };
        let canonical = build_assembled(&docker, job, &progress)
            .await
            .with_context(|| format!("building {tag} on {engine_info}"))?;
        let image = engine::inspect_image(&docker, &tag)
            .await?
            .with_context(|| format!("the engine has no {tag} after loading it"))?;
        engine::ensure_image_platform(&tag, &image, platform)?;
        report.built = true;
        record_image(&mut report, Some(canonical.image_id.clone()), image.size)?;
        progress.step(format!(
            "{tag} is {} ({} layers), {:.2} GB, after {:.0} s",
            canonical.image_id,
            canonical.layers.len(),
            report.size.unwrap_or(0) as f64 / 1e9,
            started.elapsed().as_secs_f64()
        ));
    }
    if !request.dry_run {
        report.debian_packages = debian_packages(&docker, &tag).await?;
        progress.step(format!(
            "{tag}: {} Debian packages installed",
            report.debian_packages.len()
        ));
    }
    report.duration_secs = started.elapsed().as_secs_f64();
    if request.json {
        print_json(&report)?;
    } else {
        println!("{}", report.image);
    }
    Ok(ExitCode::SUCCESS)
}

/// The base image's reference and the tool's id for it (its config's digest, on every
/// engine: the build id and so the image's label depend on it), checked to be for the platform.
async fn inspect_base(
    docker: &bollard::Docker,
    engine: &EngineInfo,
    records: &ManifestRecords,
    request: &BuildRequest,
) -> Result<(String, String)> {
    let platform = request.platform;
    let base_image = request.base_image.clone().unwrap_or_else(|| {
        crate::image::base::image_ref(crate::image::base::DEFAULT_SUITE, platform)
    });
    let base = identity::inspect(docker, engine, &base_image, records)
        .await?
        .with_context(|| {
            format!(
                "the base image {base_image} is not in the engine; run \
                 `cargo xtask base --platform {platform}` (or pass --base-image)"
            )
        })?;
    engine::ensure_image_platform(&base_image, &base.inspect, platform)
        .with_context(|| format!("the base image must be {platform}"))?;
    Ok((base_image, base.config_digest.to_string()))
}

/// What one engine build is asked to produce.
struct EngineBuild<'a> {
    tag: &'a str,
    /// The stage to build up to (the classic builder builds every stage above it too).
    target: &'a str,
    platform: Platform,
    build_args: &'a BTreeMap<String, String>,
    /// `--no-cache`: the engine rebuilds every step instead of reusing its layer cache.
    no_cache: bool,
}

/// One build: a context, the Dockerfile in it, and where the assembled image goes.
pub struct AssembledBuild<'a> {
    pub context: Vec<u8>,
    pub dockerfile: &'a str,
    /// Every build argument, the final stage's included.
    pub build_args: &'a BTreeMap<String, String>,
    pub platform: Platform,
    /// The tag of the engine's image of the system stage.
    pub engine_tag: &'a str,
    /// The tag of the assembled image.
    pub tag: &'a str,
    pub epoch: u64,
    /// The platform's layer cache (`.xtask/layers/<os>-<arch>`).
    pub cache_dir: &'a Path,
    /// `--no-cache`: the engine rebuilds every step instead of reusing its layer cache.
    pub no_cache: bool,
    /// Labels added after the final stage's own.
    pub extra_labels: &'a [(String, String)],
    /// The engine, whose store decides how the image is loaded.
    pub engine: &'a EngineInfo,
    /// Where the load manifests given to a containerd store are kept.
    pub records: &'a ManifestRecords,
    /// The settings' `DOCKER_HOST`: whether the engine's data root is a local path.
    pub docker_host: Option<&'a str>,
}

/// Has the engine build the stages up to the final stage's `FROM`, then assembles the final
/// stage ([`crate::image::assemble`]) and loads it as `job.tag`.
pub async fn build_assembled(
    docker: &bollard::Docker,
    job: AssembledBuild<'_>,
    progress: &Progress,
) -> Result<Canonical> {
    let final_stage = final_stage(job.dockerfile, job.build_args)
        .with_context(|| format!("cannot assemble the image {DOCKERFILE} describes"))?;
    check_stage_starts(job.dockerfile)?;
    let engine_args: BTreeMap<String, String> = job
        .build_args
        .iter()
        .filter(|(name, _)| final_stage.engine_args.contains(*name))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let engine_build = EngineBuild {
        tag: job.engine_tag,
        target: &final_stage.system,
        platform: job.platform,
        build_args: &engine_args,
        no_cache: job.no_cache,
    };
    let started = Instant::now();
    progress.step(format!(
        "building the stages up to `{}` as {} for {}",
        final_stage.system, job.engine_tag, job.platform
    ));
    let output = stream_build(docker, &engine_build, job.context).await?;
    let image = engine::inspect_image(docker, job.engine_tag)
        .await?
        .with_context(|| {
            format!(
                "the build finished but the engine has no {}",
                job.engine_tag
            )
        })?;
    engine::ensure_image_platform(job.engine_tag, &image, job.platform)?;
    progress.step(format!(
        "built the stages up to `{}` in {:.0} s",
        final_stage.system,
        started.elapsed().as_secs_f64()
    ));
    let stage_images = stage_images(&output);
    let assembly = Assembly {
        stage: &final_stage,
        stage_images: &stage_images,
        system_image: job.engine_tag,
        extra_labels: job.extra_labels,
        tag: job.tag,
        epoch: job.epoch,
        cache_dir: job.cache_dir,
        engine: job.engine,
        records: job.records,
        docker_host: job.docker_host,
    };
    assemble(docker, &assembly, progress).await
}

/// The tool's id (the canonical config's digest) and size of the report's image.
fn record_image(report: &mut BuildReport, id: Option<String>, size: Option<i64>) -> Result<()> {
    report.image_id = id
        .as_deref()
        .map(|id| engine_digest(id, &report.image))
        .transpose()?;
    report.size = size;
    Ok(())
}

/// How often a silent build step is reported as still running.
const HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(30);

/// `Step 7/15 : RUN npm ci ...` -> `step 7/15 (RUN npm ci ...)`, clipped for one log line.
fn step_label(line: &str) -> String {
    let line = line.trim();
    let (number, command) = line
        .strip_prefix("Step ")
        .and_then(|rest| rest.split_once(" : "))
        .unwrap_or((line, ""));
    let mut command: String = command.chars().take(60).collect();
    if command.len() < line.len() && command.chars().count() == 60 {
        command.push('…');
    }
    format!("step {number} ({command})")
}

/// The Debian packages installed in `image`, read from its dpkg database without starting it
/// (so no emulation is needed for another CPU's image).
async fn debian_packages(docker: &bollard::Docker, image: &str) -> Result<Vec<String>> {
    let files = engine::read_image_files(
        docker,
        image,
        &engine::new_run_id("dpkg"),
        "/var/lib/dpkg/status",
    )
    .await?;
    let (_, status) = files
        .first()
        .with_context(|| format!("{image} has no /var/lib/dpkg/status: is it Debian-based?"))?;
    Ok(installed_packages(&String::from_utf8_lossy(status)))
}

/// `name=version` of every package whose status is `install ok installed`, sorted. Pure over
/// the text of a dpkg status file, through the one dpkg reader the SBOM uses too.
pub(crate) fn installed_packages(status: &str) -> Vec<String> {
    let mut out: Vec<String> = crate::image::dpkg::dpkg_packages(status)
        .into_iter()
        .map(|p| format!("{}={}", p.name, p.version))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Sends the context and streams the builder's output to stderr; returns the whole output.
async fn stream_build(
    docker: &bollard::Docker,
    engine_build: &EngineBuild<'_>,
    context: Vec<u8>,
) -> Result<String> {
    let buildargs: std::collections::HashMap<String, String> =
        engine_build.build_args.clone().into_iter().collect();
    // No build-id label here: it changes with every input, and on the system stage it would
    // make a new system image (and so a new export) for every bump. The assembler adds it.
    let options = BuildImageOptionsBuilder::default()
        .dockerfile(DOCKERFILE)
        .t(engine_build.tag)
        .target(engine_build.target)
        .rm(true)
        .forcerm(true)
        .buildargs(&buildargs)
        .platform(&engine_build.platform.to_string())
        .nocache(engine_build.no_cache)
        .build();
    let mut stream =
        std::pin::pin!(docker.build_image(options, None, Some(bollard::body_full(context.into()))));
    let mut output = String::new();
    let mut log = BuildLog::new();
    // Some steps print nothing for many minutes (npm ci under qemu): a heartbeat line says
    // which step is still running, so a CI log never looks hung.
    let mut heartbeat =
        tokio::time::interval_at(tokio::time::Instant::now() + HEARTBEAT, HEARTBEAT);
    loop {
        let item = tokio::select! {
            item = stream.next() => match item {
                Some(item) => item,
                None => break,
            },
            _ = heartbeat.tick() => {
                log.heartbeat();
                continue;
            }
        };
        let info = match item {
            Ok(info) => info,
            Err(err) => {
                bail!(
                    "building {} failed: {err}\nlast output:\n{}",
                    engine_build.tag,
                    log.last_lines.join("")
                );
            }
        };
        if let Some(text) = info.stream.as_deref() {
            output.push_str(text);
            if log.output(text) {
                heartbeat.reset();
            }
        }
        if let Some(status) = info.status.as_deref() {
            eprintln!("{status}");
        }
    }
    Ok(output)
}

/// The builder's output as it goes to stderr: which step runs since when, and the last lines
/// for the error message when the build fails.
struct BuildLog {
    started: Instant,
    current_step: String,
    step_started: Instant,
    last_lines: Vec<String>,
}

impl BuildLog {
    fn new() -> BuildLog {
        BuildLog {
            started: Instant::now(),
            current_step: String::from("sending the build context"),
            step_started: Instant::now(),
            last_lines: Vec::new(),
        }
    }

    fn heartbeat(&self) {
        eprintln!(
            "[{:>6.1}s] still running {} ({:.0} s so far)",
            self.started.elapsed().as_secs_f64(),
            self.current_step,
            self.step_started.elapsed().as_secs_f64()
        );
    }

    /// Prints one piece of builder output; true when it starts a new step.
    fn output(&mut self, text: &str) -> bool {
        // Time-stamp each step, so slow steps stand out in CI logs.
        let new_step = text.starts_with("Step ");
        if new_step {
            eprint!("[{:>6.1}s] {text}", self.started.elapsed().as_secs_f64());
            self.current_step = step_label(text);
            self.step_started = Instant::now();
        } else {
            eprint!("{text}");
        }
        self.last_lines.push(text.to_string());
        if self.last_lines.len() > 30 {
            self.last_lines.remove(0);
        }
        new_step
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silent_steps_are_named_in_heartbeats() {
        assert_eq!(
            step_label("Step 7/15 : RUN npm ci --omit=dev\n"),
            "step 7/15 (RUN npm ci --omit=dev)"
        );
        let long = format!("Step 1/2 : RUN {}", "x".repeat(100));
        assert!(step_label(&long).ends_with("…)"));
    }

    #[test]
    fn installed_packages_come_from_the_dpkg_status_file() {
        let status = "Package: libc6\nStatus: install ok installed\nArchitecture: arm64\n\
                      Version: 2.36-9+deb12u13\n\nPackage: gone\nStatus: deinstall ok \
                      config-files\nVersion: 1\n\nPackage: zlib1g\nStatus: install ok \
                      installed\nVersion: 1:1.2.13.dfsg-1\nDescription: x\n with: colon\n";
        assert_eq!(
            installed_packages(status),
            ["libc6=2.36-9+deb12u13", "zlib1g=1:1.2.13.dfsg-1"]
        );
    }
}
