//! `cargo xtask release build --platform P`: one platform of a planned release.
//!
//! Base image, build, smoke test, — when the plan publishes and every check passed — the push
//! by digest, and the SBOM (`sbom-<os>-<arch>.spdx.json` and `.cdx.json`, next to the results;
//! after the push, so it names the image by the manifest digest the push made and the release
//! tag), as one results file (`results-<os>-<arch>.json`) that the ship phase reads.
//! A push by digest writes no tag, so a platform pushed by a run that later fails burns
//! nothing; the tag is written only by `ship`, after the receipt verifies.
//!
//! In the workflow each platform runs on its own runner, from the plan's files (downloaded
//! into the checkout): the phase first checks that the checkout holds exactly what the plan
//! wrote, so a runner can never build something else than what was planned.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use crate::image::sbom::{cyclonedx_file_name, sbom_file_name};
use crate::release::plan::ensure_checkout_matches;
use crate::release::steps::{read_json, render_times, write_json, Step, StepRunner};
use template_formats::manifest::Platform;
use template_formats::model::build::BuildReport;
use template_formats::model::plan::{ReleasePlan, Target};
use template_formats::model::platform_results::{PlatformResults, RESULTS_SCHEMA_VERSION};
use template_formats::model::publish::PublishReport;
use template_formats::model::rfc3339;
use template_formats::model::smoke::SmokeReport;
use template_formats::sbom::PublishedImage;

/// `results-linux-amd64.json`.
pub(crate) fn results_file_name(platform: Platform) -> String {
    format!("results-{}.json", platform.slug())
}

/// Where a platform's steps keep their outputs, inside the phase's `--out`.
pub(crate) fn work_dir(out: &Path, platform: Platform) -> PathBuf {
    out.join(format!("work-{}", platform.arch()))
}

/// What one platform's steps are made from: the plan's target and clock, and where files go.
pub(crate) struct PlatformSteps<'a> {
    /// Where the push goes; `None` when the plan does not publish (no push step at all).
    pub publish: Option<&'a Target>,
    pub platform: Platform,
    /// Where each step's `--json` output is kept.
    pub work: &'a Path,
    /// Where the results file goes; the SBOM goes next to it, for ship to hand to the receipt.
    pub out: &'a Path,
    pub ca_bundle: Option<&'a Path>,
    /// The plan's clock (RFC 3339): the SBOM's creation time.
    pub now: &'a str,
    /// The previous release's index reference (the plan's), for the push to reuse its blobs.
    pub previous: Option<&'a str>,
}

/// The previous release the push may reuse blobs from: the plan's, when it is in the
/// target's registry (blobs move only within one registry; a release after a move of
/// registry publishes every layer, with the same digests). Pure.
pub(crate) fn previous_for<'a>(target: &Target, previous: Option<&'a str>) -> Option<&'a str> {
    let host =
        template_verify::oci::client::RegistryTarget::parse(&target.registry, &target.repository)
            .ok()?
            .host;
    previous.filter(|reference| {
        template_formats::oci::reference::parse_pinned_reference(reference)
            .is_ok_and(|r| r.name.domain == host && r.digest.is_some())
    })
}

/// The platform's steps as pure functions of the plan, so that the phase, `release --dry-run`
/// and the test that parses every step back with `flags.rs` build the very same command lines.
/// The steps after the build take the image it made; the dry run shows a placeholder there.
impl PlatformSteps<'_> {
    fn output(&self, what: &str) -> PathBuf {
        self.work
            .join(format!("{what}-{}.json", self.platform.arch()))
    }

    pub(crate) fn base(&self) -> Step {
        let base = crate::image::base::BaseRequest {
            platform: self.platform,
            suite: crate::image::base::DEFAULT_SUITE.to_string(),
            rebuild: false,
            dry_run: false,
            json: true,
        };
        Step::new(format!("base {}", self.platform), base).output(self.output("base"))
    }

    pub(crate) fn build(&self) -> Step {
        let build = crate::image::build::BuildRequest {
            platform: self.platform,
            base_image: None,
            ca_bundle: self.ca_bundle.map(Path::to_path_buf),
            dry_run: false,
            no_cache: false,
            json: true,
        };
        Step::new(format!("build {}", self.platform), build).output(self.output("build"))
    }

    /// The SBOM comes after the push, so it can name the image by the manifest digest the
    /// push made (`published`: repository, digest, release tag); a run that does not publish
    /// (or whose smoke test failed) makes it without, and ships nothing.
    pub(crate) fn sbom(&self, image: &str, published: Option<PublishedImage<'_>>) -> Step {
        let sbom = crate::image::sbom::SbomRequest {
            image: image.to_string(),
            platform: self.platform,
            output: self.out.join(sbom_file_name(self.platform)),
            cyclonedx: Some(self.out.join(cyclonedx_file_name(self.platform))),
            now: Some(self.now.to_string()),
            manifest_digest: published.as_ref().map(|p| p.manifest_digest.to_string()),
            repository: published.as_ref().map(|p| p.repository.to_string()),
            release_tag: published.as_ref().map(|p| p.tag.to_string()),
            json: true,
        };
        Step::new(format!("sbom {}", self.platform), sbom).output(self.output("sbom"))
    }

    /// The smoke test gets the build's CA bundle too: its scan looks for that bundle's
    /// certificates in every layer, and without it would only find the environment's.
    pub(crate) fn smoke(&self, image: &str) -> Step {
        let smoke = crate::image::smoke::SmokeRequest {
            image: image.to_string(),
            platform: Some(self.platform),
            ca_bundle: self.ca_bundle.map(Path::to_path_buf),
            json: true,
        };
        Step::new(format!("smoke {}", self.platform), smoke).output(self.output("smoke"))
    }

    /// The push by digest, only when the plan publishes.
    pub(crate) fn push(&self, image: &str) -> Option<Step> {
        let target = self.publish?;
        let push = crate::release::publish::PublishRequest {
            target: target.clone(),
            tag: None,
            images: vec![format!("{}={image}", self.platform)],
            pushed: Vec::new(),
            partial: false,
            defer_tag: false,
            previous: previous_for(target, self.previous).map(str::to_string),
            dry_run: false,
            json: true,
        };
        Some(
            Step::new(format!("push {} by digest", self.platform), push)
                .output(self.output("pushed")),
        )
    }

    /// Every step, in order, with `image` for the one the build makes (and placeholders for
    /// what the push reports, which the SBOM names).
    pub(crate) fn all(&self, image: &str) -> Vec<Step> {
        let mut steps = vec![self.base(), self.build(), self.smoke(image)];
        steps.extend(self.push(image));
        let repository = self
            .publish
            .map(|t| format!("{}/{}", t.registry, t.repository));
        let published = repository.as_deref().map(|repository| PublishedImage {
            repository,
            manifest_digest: "sha256:<the push's manifest digest>",
            tag: "<the plan's release tag>",
        });
        steps.push(self.sbom(image, published));
        steps
    }
}

/// One platform's build phase as the release runs it: the plan, where its results go.
pub(crate) struct PlatformBuild<'a> {
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
pub(crate) async fn run(build: PlatformBuild<'_>) -> Result<(PlatformResults, PathBuf)> {
    let PlatformBuild {
        root,
        plan,
        platform,
        out,
        ca_bundle,
        side_by_side,
    } = build;
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
    let work = work_dir(out, platform);
    std::fs::create_dir_all(&work)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", work.display()))?;
    let now = rfc3339(plan.now);
    let planned = PlatformSteps {
        publish: plan.publish.then_some(&plan.target),
        platform,
        work: &work,
        out,
        ca_bundle,
        now: &now,
        previous: plan.previous.as_ref().map(|p| p.reference.as_str()),
    };
    // The image only fills in arguments; it does not change how many steps there are.
    let mut runner = StepRunner::new(root, planned.all("").len())?;
    if side_by_side {
        runner = runner.labelled(platform.to_string());
    }
    let build = planned.build();
    runner.run(&planned.base()).await?;
    runner.run(&build).await?;
    let built: BuildReport = read_json(build.output.as_ref().unwrap(), "a build report")?;
    let smoke = planned.smoke(&built.image);
    let smoke_ok = runner.run_allowing_failure(&smoke).await?;
    let smoke_report: SmokeReport = read_json(smoke.output.as_ref().unwrap(), "a smoke report")?;
    let mut pushed = None;
    let mut repository = None;
    if let (true, Some(push)) = (smoke_ok && smoke_report.passed, planned.push(&built.image)) {
        runner.run(&push).await?;
        let report: PublishReport = read_json(push.output.as_ref().unwrap(), "a publish report")?;
        pushed = report
            .platforms
            .into_iter()
            .find(|p| p.platform == platform);
        if pushed.is_none() {
            bail!("the push of {platform} reported no {platform} image");
        }
        repository = Some(format!("{}/{}", report.registry, report.repository));
    }
    // After the push: the SBOM names the image by the manifest digest consumers pull.
    let published = match (&pushed, &repository) {
        (Some(p), Some(repository)) => Some(PublishedImage {
            repository,
            manifest_digest: &p.digest,
            tag: &tag,
        }),
        _ => None,
    };
    runner.run(&planned.sbom(&built.image, published)).await?;
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
    fn the_build_s_ca_bundle_reaches_the_smoke_test_s_scan() {
        let ca = Path::new("/etc/ssl/proxy-ca.pem");
        let steps = PlatformSteps {
            publish: None,
            platform: Platform::LinuxAmd64,
            work: Path::new("/w"),
            out: Path::new("/o"),
            ca_bundle: Some(ca),
            now: "2026-11-30T04:37:00Z",
            previous: None,
        };
        for step in [steps.build(), steps.smoke("coding-agent:x")] {
            let at = step.args.iter().position(|a| a == "--ca-bundle");
            assert_eq!(
                at.map(|i| step.args[i + 1].as_str()),
                Some("/etc/ssl/proxy-ca.pem"),
                "{}",
                step.command_line()
            );
        }
    }

    #[test]
    fn the_push_reuses_the_previous_release_only_in_the_same_registry() {
        let target = Target {
            registry: "ghcr.io".into(),
            repository: "sandbox0/coding-agent".into(),
        };
        let d = format!("sha256:{}", "a".repeat(64));
        let here = format!("ghcr.io/sandbox0/coding-agent@{d}");
        let moved = format!("ghcr.io/other/coding-agent@{d}");
        let elsewhere = format!("registry.example/sandbox0/coding-agent@{d}");
        assert_eq!(previous_for(&target, Some(&here)), Some(here.as_str()));
        // Another repository of the registry: its blobs are mounted.
        assert_eq!(previous_for(&target, Some(&moved)), Some(moved.as_str()));
        assert_eq!(previous_for(&target, Some(&elsewhere)), None);
        assert_eq!(
            previous_for(&target, Some("ghcr.io/sandbox0/coding-agent:tag")),
            None
        );
        assert_eq!(previous_for(&target, None), None);
        let steps = PlatformSteps {
            publish: Some(&target),
            platform: Platform::LinuxAmd64,
            work: Path::new("/w"),
            out: Path::new("/o"),
            ca_bundle: None,
            now: "2026-11-30T04:37:00Z",
            previous: Some(&here),
        };
        let push = steps.push("coding-agent:x").unwrap();
        let at = push.args.iter().position(|a| a == "--previous").unwrap();
        assert_eq!(push.args[at + 1], here);
    }

    #[test]
    fn results_are_named_by_platform() {
        assert_eq!(
            results_file_name(Platform::LinuxArm64),
            "results-linux-arm64.json"
        );
    }
}
