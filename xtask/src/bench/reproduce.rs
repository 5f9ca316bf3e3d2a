//! `cargo xtask-bench reproduce --platform P`: two cold builds of the same inputs in one run,
//! compared digest by digest.
//!
//! Each round makes the base again (`base --rebuild`: mmdebstrap from the mirror) and builds
//! without the engine's cache (`build --no-cache`), then prepares the registry blobs of the
//! canonical image (export, deterministic gzip) to get the platform manifest digest a publish
//! would push. The peer is the engine's own output of the same builds (`coding-agent-engine:`,
//! since the assembler the system stage only: the base and Debian layers), compared the same
//! way: that is what a release published before images were canonical.
//! Exits non-zero when the canonical images differ.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::image::canonicalize::ENGINE_REPOSITORY;
use crate::image::engine;
use crate::oci::archive::prepare_streaming;
use crate::release::steps::{read_json, Step, StepRunner};
use crate::util::print_json;
use template_formats::manifest::Platform;
use template_formats::model::build::BuildReport;

/// One round's digests.
#[derive(Debug, Serialize)]
struct Round {
    base_image_id: String,
    engine_image_id: String,
    engine_layers: Vec<String>,
    image_id: String,
    layers: Vec<String>,
    manifest_digest: String,
    seconds: f64,
}

#[derive(Debug, Serialize)]
struct ReproduceReport {
    platform: String,
    rounds: [Round; 2],
    base_identical: bool,
    /// Layers of the engine's image (the peer) that are identical in both rounds.
    engine_layers_identical: usize,
    /// Layers of the canonical image that are identical in both rounds.
    layers_identical: usize,
    layers: usize,
    image_identical: bool,
    manifest_identical: bool,
}

/// How many positions hold the same digest in both lists (of equal length, or 0).
fn same_positions(a: &[String], b: &[String]) -> usize {
    if a.len() != b.len() {
        return 0;
    }
    a.iter().zip(b).filter(|(x, y)| x == y).count()
}

/// One round's children: the base made again from the mirror, then a build without cache.
pub(crate) fn round_steps(platform: Platform, round: u32, dir: &Path) -> [Step; 2] {
    [
        Step::new(
            format!("base, round {round}"),
            crate::image::base::BaseRequest {
                platform,
                suite: crate::image::base::DEFAULT_SUITE.to_string(),
                rebuild: true,
                dry_run: false,
                json: true,
            },
        )
        .output(dir.join(format!("base-{round}.json"))),
        Step::new(
            format!("cold build, round {round}"),
            crate::image::build::BuildRequest {
                platform,
                base_image: None,
                ca_bundle: None,
                dry_run: false,
                no_cache: true,
                json: true,
            },
        )
        .output(dir.join(format!("build-{round}.json"))),
    ]
}

/// `cargo xtask-bench reproduce`: the platform built twice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchReproduceRequest {
    pub platform: Platform,
    pub json: bool,
}

pub async fn run(request: BenchReproduceRequest, ctx: &crate::Context) -> Result<ExitCode> {
    let root = ctx.layout.root().to_path_buf();
    let platform = request.platform;
    let dir = ctx.layout.state("bench-reproduce");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut runner = StepRunner::new(&root, 4)?;
    let docker = engine::connect(&ctx.settings).await?;
    let interval = ctx.settings.verifier.transfer.progress_interval;
    let mut rounds = Vec::new();
    for round in 1..=2 {
        let started = std::time::Instant::now();
        let [base_step, build_step] = round_steps(platform, round, &dir);
        runner.run(&base_step).await?;
        runner.run(&build_step).await?;
        let (Some(base_out), Some(build_out)) = (base_step.output, build_step.output) else {
            unreachable!("round_steps keeps both outputs")
        };
        let build: BuildReport = read_json(&build_out, "a build report")?;
        let engine_tag = format!("{ENGINE_REPOSITORY}:{}", build.build_id);
        let layers_of = |image: &bollard::models::ImageInspect| -> Vec<String> {
            image
                .root_fs
                .as_ref()
                .and_then(|r| r.layers.clone())
                .unwrap_or_default()
        };
        let raw = engine::inspect_image(&docker, &engine_tag)
            .await?
            .with_context(|| format!("the engine has no {engine_tag} after the build"))?;
        let canonical = engine::inspect_image(&docker, &build.image)
            .await?
            .with_context(|| format!("the engine has no {} after the build", build.image))?;
        runner.progress.step(format!(
            "round {round}: preparing the registry blobs of {} for its manifest digest",
            build.image
        ));
        let blobs = tempfile::Builder::new()
            .prefix("blobs-")
            .tempdir_in(&dir)
            .context("cannot create a directory for the blobs")?;
        let export = engine::blocking_reader(docker.export_image(&build.image));
        let blob_dir = blobs.path().to_path_buf();
        let prepared = tokio::task::spawn_blocking(move || {
            prepare_streaming(export, &blob_dir, interval, &|_| {})
        })
        .await
        .context("the preparing thread panicked")??;
        let base: serde_json::Value = read_json(&base_out, "a base report")?;
        rounds.push(Round {
            base_image_id: base["id"].as_str().unwrap_or_default().to_string(),
            engine_image_id: raw.id.clone().unwrap_or_default(),
            engine_layers: layers_of(&raw),
            image_id: canonical.id.clone().unwrap_or_default(),
            layers: layers_of(&canonical),
            manifest_digest: prepared.manifest_digest,
            seconds: started.elapsed().as_secs_f64(),
        });
    }
    let [first, second]: [Round; 2] = rounds.try_into().expect("two rounds");
    let report = ReproduceReport {
        platform: platform.to_string(),
        base_identical: first.base_image_id == second.base_image_id,
        engine_layers_identical: same_positions(&first.engine_layers, &second.engine_layers),
        layers_identical: same_positions(&first.layers, &second.layers),
        layers: first.layers.len(),
        image_identical: first.image_id == second.image_id,
        manifest_identical: first.manifest_digest == second.manifest_digest,
        rounds: [first, second],
    };
    if request.json {
        print_json(&report)?;
    } else {
        let [a, b] = &report.rounds;
        println!("two cold builds of {platform} (base remade, no build cache), one run:");
        println!(
            "  base image          {}  {}",
            if report.base_identical {
                "identical"
            } else {
                "DIFFERENT"
            },
            a.base_image_id
        );
        println!(
            "  engine's image      {}/{} layers identical, ids {} / {}",
            report.engine_layers_identical,
            a.engine_layers.len(),
            a.engine_image_id,
            b.engine_image_id
        );
        println!(
            "  canonical image     {}/{} layers identical, ids {} / {}",
            report.layers_identical, report.layers, a.image_id, b.image_id
        );
        println!(
            "  platform manifest   {}  {} / {}",
            if report.manifest_identical {
                "identical"
            } else {
                "DIFFERENT"
            },
            a.manifest_digest,
            b.manifest_digest
        );
        println!("  rounds took {:.0} s and {:.0} s", a.seconds, b.seconds);
    }
    Ok(
        if report.image_identical && report.manifest_identical && report.base_identical {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_only_equal_digests_at_the_same_place() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            same_positions(&v(&["a", "b", "c"]), &v(&["a", "x", "c"])),
            2
        );
        assert_eq!(same_positions(&v(&["a", "b"]), &v(&["b", "a"])), 0);
        assert_eq!(same_positions(&v(&["a"]), &v(&["a", "b"])), 0);
    }
}
