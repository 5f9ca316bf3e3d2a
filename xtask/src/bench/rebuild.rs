//! `cargo xtask-bench rebuild --bump NAME@VERSION`: what a release with one CLI bump costs the
//! build, against a cold build, in one run (the target: at most 0.3x).
//!
//! 1. A cold build of the committed template: `build --no-cache` (the base image is kept; making
//!    it is `base`'s work, the same for both sides).
//! 2. The same template with one package at another version ([`crate::bench::bump`]), in a scratch
//!    copy of the build's inputs, built right after with the cold build's engine cache and layer
//!    cache (`XTASK_LAYER_CACHE`): exactly what the scheduled release on one machine does after
//!    a bump. Images of those inputs that the engine already holds are removed first, or the
//!    build would be skipped; their layers can still not be reused, because the cold build made
//!    every layer, and so every cache parent, anew.
//!
//! Both are timed as a person waits for them (the whole `build` command). The canonical layers
//! of the two images are compared position by position: a bump should change its group's layer
//! and the lock files' layer only.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::bench::bump::{bump, packuments_needed, parse_spec};
use crate::image::assemble::CACHE_ENV;
use crate::image::build::BuildRequest;
use crate::image::canonicalize::ENGINE_REPOSITORY;
use crate::image::engine;
use crate::npm::registry::{Packument, Registry};
use crate::release::steps::{Step, StepRunner};
use crate::util::{print_json, read_json};
use template_formats::manifest::Platform;
use template_formats::model::build::BuildReport;
use template_formats::paths::INVENTORY;
use template_formats::paths::MANIFEST;
use template_formats::paths::{DOCKERFILE, INSTALL_PLAN, PACKAGE_JSON, PACKAGE_LOCK};

#[derive(Debug, Serialize)]
struct Side {
    image: String,
    image_id: String,
    layers: Vec<String>,
    seconds: f64,
}

#[derive(Debug, Serialize)]
struct RebuildReport {
    platform: String,
    package: String,
    from: String,
    to: String,
    cold: Side,
    rebuild: Side,
    /// Positions (0: the base) whose canonical layer differs between the two images.
    changed_layers: Vec<usize>,
    /// rebuild.seconds / cold.seconds; the target is at most 0.3.
    ratio: f64,
}

/// Positions at which two layer lists differ; a longer list's extra positions count as changed.
fn changed_positions(a: &[String], b: &[String]) -> Vec<usize> {
    (0..a.len().max(b.len()))
        .filter(|&i| a.get(i) != b.get(i))
        .collect()
}

/// The bumped template's build id and image, without building: images of those inputs that the
/// engine already holds must go first, or the rebuild would be skipped.
pub(crate) fn dry_build_step(platform: Platform, scratch: &Path, output: &Path) -> Step {
    let dry_build = BuildRequest {
        dry_run: true,
        ..build_of(platform)
    };
    with_env(
        Step::new("the bumped template's image", dry_build),
        "XTASK_ROOT",
        scratch,
    )
    .output(output)
}

/// `step` with an environment variable set for its child.
fn with_env(mut step: Step, name: &str, value: impl AsRef<std::ffi::OsStr>) -> Step {
    step.env.push((
        name.to_owned(),
        value.as_ref().to_string_lossy().into_owned(),
    ));
    step
}

/// `build --json --platform P`, the benchmark's builds before their one difference.
fn build_of(platform: Platform) -> BuildRequest {
    BuildRequest {
        platform,
        base_image: None,
        ca_bundle: None,
        dry_run: false,
        no_cache: false,
        json: true,
    }
}

/// The two timed builds, cold first: the committed template without build cache, then the
/// bumped one in `scratch`, both with the one `layer_cache`.
pub(crate) fn timed_steps(
    platform: Platform,
    (name, version): (&str, &str),
    scratch: &Path,
    layer_cache: &Path,
    dir: &Path,
) -> [Step; 2] {
    [
        (
            "cold",
            Step::new(
                "cold build of the committed template",
                BuildRequest {
                    no_cache: true,
                    ..build_of(platform)
                },
            ),
        ),
        (
            "rebuild",
            with_env(
                Step::new(format!("rebuild with {name} {version}"), build_of(platform)),
                "XTASK_ROOT",
                scratch,
            ),
        ),
    ]
    .map(|(what, step)| {
        with_env(step, CACHE_ENV, layer_cache).output(dir.join(format!("{what}.json")))
    })
}

/// `cargo xtask-bench rebuild`: the one package bump, where to resolve it, the platform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchRebuildRequest {
    pub registry: crate::npm::resolve::RegistryAndClock,
    /// The package and the version it changes to, `NAME@VERSION`.
    pub bump: String,
    pub platform: Platform,
    pub json: bool,
}

pub async fn run(request: BenchRebuildRequest, ctx: &crate::Context) -> Result<ExitCode> {
    let root = ctx.layout.root().to_path_buf();
    let platform = request.platform;
    let (name, version) = parse_spec(&request.bump)?;
    let read = |rel: &str| {
        std::fs::read_to_string(root.join(rel))
            .with_context(|| format!("cannot read {}", root.join(rel).display()))
    };
    let package_json = read(PACKAGE_JSON)?;
    let package_lock = read(PACKAGE_LOCK)?;
    let registry = Registry::new(
        &request.registry.registry,
        ctx.settings.verifier.transfer.retry_base,
    )?;
    let mut packuments: BTreeMap<String, Packument> = BTreeMap::new();
    for needed in packuments_needed(&package_lock, name)? {
        if let Some(packument) = registry.packument_if_exists(&needed).await? {
            packuments.insert(needed, Packument::clone(&packument));
        }
    }
    let bumped = bump(&package_json, &package_lock, name, version, &packuments)
        .with_context(|| format!("cannot bump {name} to {version} in {PACKAGE_LOCK}"))?;

    let dir = ctx.layout.state("bench-rebuild");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let scratch = tempfile::Builder::new()
        .prefix("bumped-")
        .tempdir_in(&dir)
        .with_context(|| format!("cannot create a directory in {}", dir.display()))?;
    for rel in [DOCKERFILE, INSTALL_PLAN, MANIFEST, INVENTORY] {
        let to = scratch.path().join(rel);
        std::fs::create_dir_all(to.parent().expect("a file has a parent"))?;
        std::fs::copy(root.join(rel), &to)
            .with_context(|| format!("cannot copy {rel} to {}", to.display()))?;
    }
    std::fs::write(scratch.path().join(PACKAGE_JSON), &bumped.package_json)?;
    std::fs::write(scratch.path().join(PACKAGE_LOCK), &bumped.package_lock)?;

    let mut runner = StepRunner::new(&root, 3)?;
    runner.progress.step(format!(
        "{name} {} -> {version}: {} lock entries rewritten{}",
        bumped.from,
        bumped.rewritten.len(),
        if bumped.kept.is_empty() {
            String::new()
        } else {
            format!(
                ", {} of other systems kept (not on {})",
                bumped.kept.len(),
                registry.base()
            )
        }
    ));
    let docker = engine::connect(&ctx.settings).await?;
    let planned = dir.join("rebuild-plan.json");
    let dry_build = dry_build_step(platform, scratch.path(), &planned);
    runner.run(&dry_build).await?;
    let planned: BuildReport = read_json(&planned, "a build report")?;
    // Both the canonical image (`build` would skip it) and the engine's system image.
    for image in [
        planned.image.clone(),
        format!("{ENGINE_REPOSITORY}:{}", planned.build_id),
    ] {
        if engine::inspect_image(&docker, &image).await?.is_some() {
            runner.progress.step(format!(
                "removing {image}, built before from the same inputs, so the rebuild is not \
                 skipped"
            ));
            docker
                .remove_image(
                    &image,
                    None::<bollard::query_parameters::RemoveImageOptions>,
                    None,
                )
                .await
                .with_context(|| format!("cannot remove {image}"))?;
        }
    }

    // One layer cache for both sides, the one this root's own builds use: the rebuild runs in a
    // scratch root, and the scheduled release after a bump finds the last release's layers.
    let layer_cache = ctx.layout.layer_caches();
    let mut sides = Vec::new();
    for step in timed_steps(
        platform,
        (name, version),
        scratch.path(),
        &layer_cache,
        &dir,
    ) {
        let output = step.output.clone().expect("a timed step keeps its output");
        runner.run(&step).await?;
        let report: BuildReport = read_json(&output, "a build report")?;
        let image = engine::inspect_image(&docker, &report.image)
            .await?
            .with_context(|| format!("the engine has no {} after the build", report.image))?;
        sides.push(Side {
            image: report.image,
            image_id: image.id.clone().unwrap_or_default(),
            layers: image.root_fs.and_then(|r| r.layers).unwrap_or_default(),
            seconds: runner.times.last().map(|t| t.seconds).unwrap_or_default(),
        });
    }
    let [cold, rebuild]: [Side; 2] = sides.try_into().expect("two sides");
    let report = RebuildReport {
        platform: platform.to_string(),
        package: name.to_string(),
        from: bumped.from,
        to: version.to_string(),
        changed_layers: changed_positions(&cold.layers, &rebuild.layers),
        ratio: rebuild.seconds / cold.seconds,
        cold,
        rebuild,
    };
    if request.json {
        print_json(&report)?;
    } else {
        println!(
            "{platform}: a cold build next to a rebuild after {} {} -> {}, one run:",
            report.package, report.from, report.to
        );
        println!(
            "  cold build (no build cache)  {:>6.1} s  {}",
            report.cold.seconds, report.cold.image_id
        );
        println!(
            "  rebuild after the bump       {:>6.1} s  {}",
            report.rebuild.seconds, report.rebuild.image_id
        );
        println!(
            "  layers changed               {} of {} (positions {:?})",
            report.changed_layers.len(),
            report.rebuild.layers.len(),
            report.changed_layers
        );
        println!("  ratio                        {:.2}x", report.ratio);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_positions_include_extra_layers() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            changed_positions(&v(&["a", "b", "c"]), &v(&["a", "x", "c"])),
            [1]
        );
        assert_eq!(changed_positions(&v(&["a"]), &v(&["a", "b"])), [1]);
        assert!(changed_positions(&v(&["a"]), &v(&["a"])).is_empty());
    }
}
