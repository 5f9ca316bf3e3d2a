//! `cargo xtask release build --platform P`: one platform of a planned release.
//!
//! Base image, build, SBOM (`sbom-<os>-<arch>.spdx.json`, next to the results), smoke test and — when the plan publishes and every check passed — the
//! push by digest, as one results file (`results-<os>-<arch>.json`) that the ship phase reads.
//! A push by digest writes no tag, so a platform pushed by a run that later fails burns
//! nothing; the tag is written only by `ship`, after the receipt verifies.
//!
//! In the workflow each platform runs on its own runner, from the plan's files (downloaded
//! into the checkout): the phase first checks that the checkout holds exactly what the plan
//! wrote, so a runner can never build something else than what was planned.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use crate::image::sbom::sbom_file_name;
use crate::manifest::Platform;
use crate::model::build::BuildReport;
use crate::model::plan::{ReleasePlan, Target};
use crate::model::platform_results::{PlatformResults, RESULTS_SCHEMA_VERSION};
use crate::model::publish::PublishReport;
use crate::model::rfc3339;
use crate::model::smoke::SmokeReport;
use crate::release::plan::ensure_checkout_matches;
use crate::release::steps::{read_json, render_times, write_json, Step, StepRunner};

/// `results-linux-amd64.json`.
pub(crate) fn results_file_name(platform: Platform) -> String {
    format!("results-{}.json", platform.to_string().replace('/', "-"))
}

/// The steps of one platform, in order; the push only when the plan publishes.
pub(crate) fn steps(
    publish: Option<&Target>,
    platform: Platform,
    work: &Path,
    ca_bundle: Option<&Path>,
) -> Vec<Step> {
    let arch = platform.arch();
    let name = platform.to_string();
    let mut build = Step::new(format!("build {name}"), &["build", "--json"])
        .arg("--platform", &name)
        .output(work.join(format!("build-{arch}.json")));
    if let Some(ca) = ca_bundle {
        build = build.arg("--ca-bundle", ca);
    }
    let mut steps = vec![
        Step::new(format!("base {name}"), &["base", "--json"])
            .arg("--platform", &name)
            .output(work.join(format!("base-{arch}.json"))),
        build,
        // `--image`, `--output` and `--now` (the plan's clock) are filled in when the phase runs.
        Step::new(format!("sbom {name}"), &["sbom", "--json"])
            .arg("--platform", &name)
            .output(work.join(format!("sbom-{arch}.json"))),
        // `--image` is filled in from the build's output when the phase runs.
        Step::new(format!("smoke {name}"), &["smoke", "--json"])
            .arg("--platform", &name)
            .output(work.join(format!("smoke-{arch}.json"))),
    ];
    if let Some(target) = publish {
        steps.push(
            Step::new(format!("push {name} by digest"), &["publish", "--json"])
                .arg("--oci-registry", &target.registry)
                .arg("--repository", &target.repository)
                .output(work.join(format!("pushed-{arch}.json"))),
        );
    }
    steps
}

pub(crate) struct BuildRequest<'a> {
    pub root: &'a Path,
    pub plan: &'a ReleasePlan,
    pub platform: Platform,
    pub out: &'a Path,
    pub ca_bundle: Option<&'a Path>,
    /// Other platforms build at the same time: label this one's progress lines.
    pub side_by_side: bool,
}

/// Runs the platform's steps and writes its results file; returns it and its path. A failed
/// smoke test still writes the results (the evidence), then fails.
pub(crate) async fn run(request: BuildRequest<'_>) -> Result<(PlatformResults, PathBuf)> {
    let BuildRequest {
        root,
        plan,
        platform,
        out,
        ca_bundle,
        side_by_side,
    } = request;
    let tag = plan.release_tag()?.to_string();
    if !plan.platforms.contains(&platform) {
        bail!(
            "the plan releases {:?}, not {platform}",
            plan.platforms
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
        );
    }
    ensure_checkout_matches(root, plan)?;
    let work = out.join(format!("work-{}", platform.arch()));
    std::fs::create_dir_all(&work)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", work.display()))?;
    let planned = steps(
        plan.publish.then_some(&plan.target),
        platform,
        &work,
        ca_bundle,
    );
    let mut runner = StepRunner::new(root, planned.len())?;
    if side_by_side {
        runner = runner.labelled(platform.to_string());
    }
    let [base, build, sbom, smoke, push @ ..] = planned.as_slice() else {
        unreachable!("every platform has base, build, sbom and smoke steps")
    };
    runner.run(base).await?;
    runner.run(build).await?;
    let built: BuildReport = read_json(build.output.as_ref().unwrap(), "a build report")?;
    // The SBOM goes next to the results file: ship hands both to the receipt.
    let sbom = sbom
        .clone()
        .arg("--image", &built.image)
        .arg("--output", out.join(sbom_file_name(platform)))
        .arg("--now", rfc3339(plan.now));
    runner.run(&sbom).await?;
    let smoke = smoke.clone().arg("--image", &built.image);
    let smoke_ok = runner.run_allowing_failure(&smoke).await?;
    let smoke_report: SmokeReport = read_json(smoke.output.as_ref().unwrap(), "a smoke report")?;
    let mut pushed = None;
    if let (true, Some(push)) = (smoke_ok && smoke_report.passed, push.first()) {
        let push = push
            .clone()
            .arg("--image", format!("{platform}={}", built.image));
        runner.run(&push).await?;
        let report: PublishReport = read_json(push.output.as_ref().unwrap(), "a publish report")?;
        pushed = report
            .platforms
            .into_iter()
            .find(|p| p.platform == platform);
        if pushed.is_none() {
            bail!("the push of {platform} reported no {platform} image");
        }
    }
    let results = PlatformResults {
        schema_version: RESULTS_SCHEMA_VERSION,
        platform,
        tag,
        inputs_digest: plan.inputs_digest.clone(),
        build: built,
        smoke: smoke_report,
        pushed,
        steps: runner.times.clone(),
    };
    let path = out.join(results_file_name(platform));
    write_json(&path, &results)?;
    eprint!(
        "{}",
        render_times(&format!("{platform} steps:"), &runner.times)
    );
    if !(smoke_ok && results.smoke.passed) {
        let failed: Vec<&str> = results
            .smoke
            .checks
            .iter()
            .filter(|c| !c.passed)
            .map(|c| c.name.as_str())
            .collect();
        bail!(
            "{platform}: smoke checks failed ({}); the evidence is in {}. Nothing was pushed.",
            failed.join(", "),
            path.display()
        );
    }
    Ok((results, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_named_by_platform() {
        assert_eq!(
            results_file_name(Platform::LinuxArm64),
            "results-linux-arm64.json"
        );
    }
}
