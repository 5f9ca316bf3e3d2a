//! `cargo xtask smoke --image REF`: runs the built image through the Docker Engine API and
//! checks, for real, what the template promises, with every value taken from the manifest:
//!
//! - every package's `version_command` prints the locked version (template/package.json), and
//!   Node is on the manifest's major line and at least its minimum;
//! - each harness command of the manifest, started over pipes (no TTY), answers its native
//!   handshake with a stdout record matching the manifest's `expect` pointers, with no
//!   credentials and within a time limit;
//! - natively: each harness, with its manifest command over pipes with a /workspace volume
//!   and a tmpfs /tmp, runs a real turn against a fake model on loopback (reached through the
//!   CLI's own base-URL setting), is killed, and a new process resumes the saved native
//!   session id; the fake model answers the next turn with the first turn's code word only if
//!   the request carries the first turn, and the session's files are under /workspace only.
//!   Its protocol transcript and the directories it wrote in are the report's evidence
//!   (`evidence.rs`); a resume field of the manifest it no longer returns, or a file written
//!   outside /workspace and /tmp, fails the check;
//! - playwright-cli drives Chromium headless to a page served inside the container and reads
//!   it back; Xtigervnc (speaking RFB) and openbox start as the browser user; `ws` echoes a
//!   message over a real WebSocket; the browser user exists;
//! - natively: the shared browser the image's launcher starts under the template's seccomp
//!   profile (headed, sandboxed, as the browser user; CDP and VNC on loopback; playwright-cli
//!   attached; a viewer's framebuffer through a ws bridge shows the page), refused under the
//!   engine's default profile, and relaunched on the same profile under another host name;
//! - the manifest's linked builds (OpenCode's x64 baseline) are the ones installed;
//! - the image config: HOME and WorkingDir, no Entrypoint/Cmd, the no-update and
//!   no-telemetry variables, the provenance labels, the requested OS/architecture;
//! - nothing of the extra CA bundle is left: no CA variables, and no certificate of the host's
//!   bundle that Debian does not ship appears in any layer of the image (the layers are
//!   exported and scanned), nor the build's CA files by name.
//!
//! Every container carries this run's label and is removed when its check ends, on timeout
//! and on Ctrl-C too; the run ends by removing anything still labelled. Exit 0 only when every
//! check passed.
//!
//! `checks` holds the check names and the pure verdicts, `container` the checks that run
//! the image, `scripts` the script checks (their bash and JavaScript live in `scripts/`),
//! `evidence` what the harness turns showed, `ca_scan` the layer scan.

mod ca_scan;
mod checks;
mod container;
mod evidence;
mod scripts;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use bollard::models::ImageInspect;
use bollard::Docker;
use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt};
use template_formats::model::smoke::HarnessEvidence;

use crate::image::build_inputs::locked_versions;
use crate::image::engine;
use crate::util::{print_json, Progress};
use template_formats::manifest::{Manifest, Platform};
use template_formats::paths::PACKAGE_JSON;

pub use checks::{EMULATED_CHROMIUM_CHECK, PLAYWRIGHT_CHECK};

use ca_scan::CaScanInputs;
use container::{timed, Ctx, Limits};

pub(crate) use template_formats::model::smoke::{Check, SmokeReport};

/// `cargo xtask smoke`: the image to check, and what it must be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmokeRequest {
    /// Image reference (tag or id).
    pub image: String,
    /// The platform the image must report; `None` is the image's own.
    pub platform: Option<Platform>,
    /// The extra CA bundle the build may have used: none of its certificates that Debian
    /// does not ship may appear in a layer.
    pub ca_bundle: Option<PathBuf>,
    pub json: bool,
}

impl SmokeRequest {
    /// This request as the command line that parses back into it (the release's steps run
    /// their children this way; a test in main.rs checks the round trip).
    /// An absent `ca_bundle` renders no flag: the child takes XTASK_EXTRA_CA_BUNDLE from
    /// the environment it inherits, as for `build`.
    pub fn to_args(&self) -> Vec<std::ffi::OsString> {
        crate::util::Argv::command(&["smoke"])
            .switch("--json", self.json)
            .option("--platform", self.platform.map(|p| p.to_string()))
            .value("--image", &self.image)
            .option("--ca-bundle", self.ca_bundle.as_ref())
            .into_vec()
    }
}

pub async fn run(request: SmokeRequest, ctx: &crate::Context) -> Result<ExitCode> {
    let progress = Progress::default();
    let root = &ctx.layout;
    let docker = engine::connect(&ctx.settings).await?;
    let run_id = engine::new_run_id("smoke");
    // Containers of runs that were killed (their process is gone) have nobody else to
    // remove them: a killed release left six of them.
    let dead = engine::remove_dead_runs(&docker, false).await?;
    if dead > 0 {
        progress.step(format!(
            "removed {dead} container(s) and volume(s) left by runs that no longer exist"
        ));
    }
    let ca_bundle =
        crate::image::build_inputs::host_ca_bundle(request.ca_bundle.as_deref(), &ctx.settings);
    let target = SmokeTarget {
        image: &request.image,
        platform: request.platform,
        ca_bundle: ca_bundle.as_deref(),
        docker_host: ctx.settings.docker_host.as_deref(),
    };
    let smoke = smoke(&docker, root, &target, &run_id, &progress);
    let outcome = tokio::select! {
        outcome = smoke => outcome,
        _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
    };
    // Whatever happened, nothing this run started stays behind.
    let leftovers = engine::remove_labelled(&docker, &run_id).await?;
    if leftovers > 0 {
        progress.step(format!("removed {leftovers} container(s) left by checks"));
    }
    let report = outcome?;
    if request.json {
        print_json(&report)?;
    } else {
        print_report(&report);
    }
    Ok(if report.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn print_report(report: &SmokeReport) {
    for check in &report.checks {
        println!(
            "{} {} ({:.1}s)\n    {}",
            if check.passed { "PASS" } else { "FAIL" },
            check.name,
            check.duration_secs,
            check.output.replace('\n', "\n    ")
        );
    }
    let failed = report.checks.iter().filter(|c| !c.passed).count();
    println!(
        "{}: {} checks, {} failed, {:.0} s",
        report.image,
        report.checks.len(),
        failed,
        report.duration_secs
    );
}

/// The image one smoke run tests.
pub(crate) struct SmokeTarget<'a> {
    pub image: &'a str,
    /// The platform the image must be; any of the manifest's when `None`.
    pub platform: Option<Platform>,
    /// The host's CA bundle, whose extra certificates must be nowhere in the image.
    pub ca_bundle: Option<&'a Path>,
    /// The settings' `DOCKER_HOST`, for the CA scan's check of the engine's free space.
    pub docker_host: Option<&'a str>,
}

/// The repository files the checks are judged against.
struct Expectations {
    manifest: Manifest,
    /// Locked version of each package (template/package.json).
    versions: BTreeMap<String, String>,
    lockfile_sha: String,
    /// The template's seccomp profile (JSON), verified against the manifest.
    seccomp_profile: String,
}

impl Expectations {
    fn load(root: &crate::layout::Layout) -> Result<Expectations> {
        let manifest = Manifest::load(&root.manifest())?;
        let package_json = std::fs::read(root.package_json())
            .with_context(|| format!("cannot read {}", root.package_json().display()))?;
        let seccomp_profile = crate::image::seccomp::load(root, &manifest.runtime.seccomp)?;
        Ok(Expectations {
            seccomp_profile,
            manifest,
            versions: locked_versions(&package_json)?,
            lockfile_sha: crate::util::sha256_file(&root.package_lock())?,
        })
    }
}

/// Runs every check against the target image and returns the report; errors only when the
/// checks cannot run at all (no engine, no image, unreadable repository files).
pub(crate) async fn smoke(
    docker: &Docker,
    root: &crate::layout::Layout,
    target: &SmokeTarget<'_>,
    run_id: &str,
    progress: &Progress,
) -> Result<SmokeReport> {
    let started = Instant::now();
    let expected = Expectations::load(root)?;
    let image = target.image;
    let inspect = engine::inspect_image(docker, image)
        .await?
        .with_context(|| {
            format!("image {image} is not in the engine; build it with `cargo xtask build`")
        })?;
    let image_platform: Option<Platform> = engine::image_platform(&inspect).parse().ok();
    let emulated = image_platform.is_some_and(Platform::is_emulated);
    progress.step(format!(
        "smoke-testing {image} ({}{})",
        engine::image_platform(&inspect),
        if emulated { ", emulated" } else { "" }
    ));
    let ctx = Ctx {
        docker: docker.clone(),
        image: image.to_string(),
        platform: image_platform,
        run_id: run_id.to_string(),
        limits: Limits::for_emulation(emulated),
    };

    let mut checks = checks::config_checks(
        &inspect,
        target.platform,
        &expected.manifest,
        &expected.versions,
        &expected.lockfile_sha,
    );
    // The layer scan streams the whole image out of the engine: start it first, in parallel.
    let ca_check = {
        let ctx = ctx.clone();
        let inputs = CaScanInputs {
            env: image_env(&inspect),
            forbidden_env: expected.manifest.image.forbidden_env.clone(),
            bundle: target.ca_bundle.map(Path::to_path_buf),
            docker_host: target.docker_host.map(str::to_string),
        };
        tokio::spawn(async move { timed(ca_scan::ca_bundle_absent(&ctx, inputs)).await })
    };
    let container_checks = container_checks(&ctx, &expected, emulated);
    // Two or three containers at a time: the machines have two cores, and the harnesses each
    // start a large native binary.
    let parallel = if emulated { 2 } else { 3 };
    let mut stream = futures_util::stream::iter(container_checks).buffered(parallel);
    let mut harnesses = Vec::new();
    while let Some((check, evidence)) = stream.next().await {
        report_progress(progress, &check);
        checks.push(check);
        harnesses.extend(evidence);
    }
    // In the manifest's order, whichever finished first.
    let order = |name: &str| {
        expected
            .manifest
            .harnesses
            .iter()
            .position(|h| h.name == name)
    };
    harnesses.sort_by_key(|h: &HarnessEvidence| order(&h.name));
    let ca = ca_check.await.context("the CA bundle check panicked")?;
    report_progress(progress, &ca);
    checks.push(ca);

    Ok(SmokeReport {
        image: image.to_string(),
        image_id: Some(crate::image::identity::tool_image_id(docker, root, image, &inspect).await?),
        platform: engine::image_platform(&inspect),
        emulated,
        passed: !checks.is_empty() && checks.iter().all(|c| c.passed),
        checks,
        duration_secs: started.elapsed().as_secs_f64(),
        harnesses,
    })
}

fn image_env(inspect: &ImageInspect) -> Vec<String> {
    inspect
        .config
        .as_ref()
        .and_then(|c| c.env.clone())
        .unwrap_or_default()
}

fn report_progress(progress: &Progress, check: &Check) {
    progress.step(format!(
        "{} {} ({:.1}s)",
        if check.passed { "pass" } else { "FAIL" },
        check.name,
        check.duration_secs
    ));
}

/// A check that runs a container, and the evidence of a harness turn when it is one.
type ContainerCheck = BoxFuture<'static, (Check, Option<HarnessEvidence>)>;

/// A check without evidence, timed.
fn plain(check: impl std::future::Future<Output = Check> + Send + 'static) -> ContainerCheck {
    timed(check).map(|c| (c, None)).boxed()
}

/// Every check that runs a container, in report order: the packages' versions, Node, the
/// harnesses, the browser stack, then the platform's linked builds.
fn container_checks(ctx: &Ctx, expected: &Expectations, emulated: bool) -> Vec<ContainerCheck> {
    let manifest = &expected.manifest;
    let mut checks: Vec<ContainerCheck> = Vec::new();
    // The shared browser's checks take longest: first, so the others run beside them.
    if !emulated {
        for script in scripts::shared_browser_scripts(manifest, &expected.seccomp_profile) {
            let ctx = ctx.clone();
            checks.push(plain(async move {
                container::script_check(&ctx, &script).await
            }));
        }
        let relaunch = scripts::relaunch_check(manifest, &expected.seccomp_profile);
        let ctx = ctx.clone();
        checks.push(plain(async move {
            container::relaunch_check(&ctx, &relaunch).await
        }));
    }
    for package in &manifest.packages {
        let ctx = ctx.clone();
        let name = template_formats::manifest::version_check_name(&package.name);
        let want = expected
            .versions
            .get(&package.name)
            .map(|v| package.expected_version_output(v));
        let command = package.version_command.clone();
        checks.push(plain(async move {
            match want {
                None => Check::new(
                    name,
                    false,
                    format!("{PACKAGE_JSON} does not pin this package"),
                ),
                Some(want) => container::version_check(&ctx, name, &command, &want).await,
            }
        }));
    }
    {
        let ctx = ctx.clone();
        let node = manifest.node.clone();
        checks.push(plain(
            async move { container::node_check(&ctx, &node).await },
        ));
    }
    for harness in &manifest.harnesses {
        let ctx = ctx.clone();
        let harness = harness.clone();
        checks.push(plain(async move {
            container::harness_check(&ctx, &harness).await
        }));
    }
    // Natively only: the harnesses start large native binaries twice each, and a turn check
    // under qemu would time the emulator.
    if !emulated {
        for check in scripts::harness_turns_checks(manifest, ctx.limits.harness) {
            let ctx = ctx.clone();
            checks.push(
                async move {
                    let started = std::time::Instant::now();
                    let (mut check, evidence) = container::turns_check(&ctx, &check).await;
                    check.duration_secs = container::tenths(started);
                    (check, evidence)
                }
                .boxed(),
            );
        }
    }
    let script_checks = scripts::browser_scripts(manifest, emulated)
        .into_iter()
        .chain(scripts::linked_build_scripts(manifest, ctx.platform));
    for script in script_checks {
        let ctx = ctx.clone();
        checks.push(plain(async move {
            container::script_check(&ctx, &script).await
        }));
    }
    checks
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::time::Duration;

    use super::*;
    use crate::image::build_inputs::locked_versions;
    use crate::util::repo_root;
    use template_formats::paths::MANIFEST;

    /// The manifest's required smoke checks (what receipts are judged by) are exactly the
    /// checks this module runs, for each platform built natively and under emulation.
    #[test]
    fn the_manifest_requires_exactly_the_checks_smoke_runs() {
        let manifest = Manifest::load(&repo_root().join(MANIFEST)).unwrap();
        let versions =
            locked_versions(&std::fs::read(repo_root().join(PACKAGE_JSON)).unwrap()).unwrap();
        for platform in Platform::ALL {
            for emulated in [false, true] {
                let mut run: BTreeSet<String> = checks::config_checks(
                    &checks::tests::inspect(&[], None, platform.arch()),
                    Some(platform),
                    &manifest,
                    &versions,
                    "abc",
                )
                .into_iter()
                .map(|c| c.name)
                .collect();
                if !emulated {
                    run.extend(
                        scripts::shared_browser_scripts(&manifest, "{}")
                            .into_iter()
                            .map(|check| check.name),
                    );
                    run.insert(scripts::relaunch_check(&manifest, "{}").name);
                    run.extend(
                        scripts::harness_turns_checks(&manifest, Duration::from_secs(1))
                            .into_iter()
                            .map(|check| check.name),
                    );
                }
                run.extend(
                    scripts::browser_scripts(&manifest, emulated)
                        .into_iter()
                        .chain(scripts::linked_build_scripts(&manifest, Some(platform)))
                        .map(|check| check.name),
                );
                run.extend(
                    manifest
                        .packages
                        .iter()
                        .map(|p| template_formats::manifest::version_check_name(&p.name)),
                );
                run.extend(
                    manifest
                        .harnesses
                        .iter()
                        .map(|h| template_formats::manifest::harness_check_name(&h.name)),
                );
                run.extend([checks::NODE_CHECK.to_string(), checks::CA_CHECK.to_string()]);
                assert_eq!(
                    run,
                    manifest.required_smoke_checks(platform, emulated),
                    "{platform}, emulated: {emulated}"
                );
            }
        }
        // The amd64 baseline check comes from the manifest's linked builds now: it still runs.
        assert!(
            scripts::linked_build_scripts(&manifest, Some(Platform::LinuxAmd64))
                .iter()
                .any(|c| c.name == "opencode x64 baseline build")
        );
    }
}
