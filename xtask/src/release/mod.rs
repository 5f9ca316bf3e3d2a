//! The release: one plan, executed the same way by a maintainer and by the workflow.
//!
//! A release has three phases, each a subcommand that reads the previous phase's files:
//!
//! - [`plan`] (`release plan`): gate, resolve, lock, tag, "what changed", "may this run
//!   publish" — every decision, written to `plan.json`.
//! - [`platform`] (`release build --platform P`): base, build, smoke, push by digest —
//!   `results-<os>-<arch>.json`.
//! - [`ship`] (`release ship`): index by digest, receipt written and verified, then the
//!   immutable tag; the release assets.
//!
//! The scheduled workflow runs `plan` in one job, `build` in a job per platform (native
//! runners) and `ship` in the last job, and only moves files between them; `cargo xtask
//! release` runs the same phases in the same order on one machine. Both therefore make the same
//! tag from the same inputs and both stop after the plan on a day with nothing to do.

pub mod existing;
pub mod gate;
pub mod notes;
pub(crate) mod plan;
pub(crate) mod platform;
pub(crate) mod previous;
pub mod publish;
pub(crate) mod published;
pub(crate) mod push;
pub mod receipt_write;
pub(crate) mod ship;
pub mod steps;

use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};

use anyhow::{bail, Context, Result};
use futures_util::future::join_all;
use serde::Serialize;

use crate::release::steps::{render_times, Step, StepRunner};
use crate::util::print_json;
pub use plan::PlanOptions;
use template_formats::manifest::{Manifest, Platform};
use template_formats::model::plan::{Action, ReleasePlan, Target};
use template_formats::model::platform_results::StepTime;

/// `cargo xtask release`: the whole release on this machine, or one of its phases.
#[derive(Debug, Clone, PartialEq)]
pub enum ReleaseRequest {
    /// `release` alone: the three phases in turn.
    All(ReleaseAllRequest),
    Plan(ReleasePlanRequest),
    Build(ReleaseBuildRequest),
    Ship(ReleaseShipRequest),
    /// Not a phase: the notes of a release, from receipts.
    Notes(notes::ReleaseNotesRequest),
    /// Not a phase: what the workflow does about the GitHub release of this tag.
    Existing(existing::ReleaseExistingRequest),
}

/// `cargo xtask release` without a phase.
#[derive(Debug, Clone, PartialEq)]
pub struct ReleaseAllRequest {
    pub plan: PlanOptions,
    /// The extra CA bundle for the builds' download steps.
    pub ca_bundle: Option<PathBuf>,
    /// Print the plan and change nothing.
    pub dry_run: bool,
    pub json: bool,
}

/// `cargo xtask release plan`: the plan, written into `out`.
#[derive(Debug, Clone, PartialEq)]
pub struct ReleasePlanRequest {
    pub plan: PlanOptions,
    /// The plan directory.
    pub out: PathBuf,
    pub json: bool,
}

/// `cargo xtask release build`: one platform of a plan, its results written into `out`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseBuildRequest {
    /// The directory `release plan` wrote.
    pub plan: PathBuf,
    pub platform: Platform,
    /// Where the results file goes.
    pub out: PathBuf,
    pub ca_bundle: Option<PathBuf>,
    pub json: bool,
}

/// `cargo xtask release ship`: the index, the receipt and the tag of a built plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseShipRequest {
    /// The directory `release plan` wrote.
    pub plan: PathBuf,
    /// The directory holding every platform's `results-*.json`.
    pub results: PathBuf,
    /// Where the release assets go.
    pub assets: PathBuf,
    /// Stop before writing the tag.
    pub defer_tag: bool,
    /// A directory of the consumer's static verifier binaries, one per platform.
    pub verifiers: Option<PathBuf>,
    pub json: bool,
}

pub async fn run(request: ReleaseRequest, ctx: &crate::Context) -> Result<ExitCode> {
    match request {
        ReleaseRequest::All(all) => run_all(all, ctx).await,
        ReleaseRequest::Notes(n) => notes::run(n, ctx),
        ReleaseRequest::Existing(e) => existing::run(e, ctx),
        ReleaseRequest::Plan(a) => {
            let root = ctx.layout.root().to_path_buf();
            let out = absolute(&a.out)?;
            let manifest = Manifest::load(&ctx.layout.manifest())?;
            // The first line: whether the inputs can be verified (docs/inputs.md).
            eprintln!(
                "{}",
                crate::npm::resolve::inputs_headline(&a.plan.registry, &manifest, ctx).await
            );
            let platforms = if a.plan.platforms.is_empty() {
                manifest.platforms
            } else {
                a.plan.platforms.clone()
            };
            let mut runner = StepRunner::new(&root, plan::STEP_NAMES.len())?;
            let plan = plan::run(
                plan::PlanRequest {
                    verifier: &ctx.settings.verifier,
                    options: &a.plan,
                    root: &root,
                    out: &out,
                    now: ctx.release_now(a.plan.registry.now.as_deref())?,
                    platforms,
                    github: plan::github_env(&ctx.settings)?,
                },
                &mut runner,
            )
            .await?;
            if a.json {
                print_json(&plan)?;
            } else {
                println!("{}", plan::summary_markdown(&plan));
            }
            Ok(ExitCode::SUCCESS)
        }
        ReleaseRequest::Build(a) => {
            let root = ctx.layout.root().to_path_buf();
            let plan_dir = absolute(&a.plan)?;
            let plan = crate::release::plan::load_plan(&plan_dir)?;
            if plan.publish {
                ensure_local_registry(&root, &plan.target).await?;
            }
            let out = absolute(&a.out)?;
            let ca = a.ca_bundle.as_deref().map(absolute).transpose()?;
            let (results, path) = platform::run(platform::PlatformBuild {
                root: &root,
                plan: &plan,
                platform: a.platform,
                out: &out,
                ca_bundle: ca.as_deref(),
                side_by_side: false,
            })
            .await?;
            if a.json {
                print_json(&results)?;
            } else {
                println!("{}", path.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        ReleaseRequest::Ship(a) => {
            let root = ctx.layout.root().to_path_buf();
            let plan_dir = absolute(&a.plan)?;
            let plan = crate::release::plan::load_plan(&plan_dir)?;
            ensure_local_registry(&root, &plan.target).await?;
            let shipped = ship::run(ship::ShipRequest {
                verifier: &ctx.settings.verifier,
                root: &root,
                plan_dir: &plan_dir,
                plan: &plan,
                results: &absolute(&a.results)?,
                assets: &absolute(&a.assets)?,
                defer_tag: a.defer_tag,
                verifiers: a.verifiers.as_deref().map(absolute).transpose()?.as_deref(),
            })
            .await?;
            if a.json {
                print_json(&shipped)?;
            } else {
                println!("{}\n{}", shipped.receipt.display(), shipped.reference);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn absolute(path: &Path) -> Result<PathBuf> {
    std::path::absolute(path).with_context(|| format!("cannot make {} absolute", path.display()))
}

/// The platforms this machine can build and run: its own, and arm64 under qemu when binfmt
/// has it registered.
fn runnable_platforms(manifest: &Manifest) -> Vec<Platform> {
    let host = Platform::host();
    manifest
        .platforms
        .iter()
        .copied()
        .filter(|p| Some(*p) == host || crate::image::base::ensure_emulation(*p).is_ok())
        .collect()
}

/// What `release --dry-run` prints: each phase's steps.
#[derive(Serialize)]
pub(crate) struct DryRun {
    pub(crate) phases: Vec<DryRunPhase>,
    note: &'static str,
}

#[derive(Serialize)]
pub(crate) struct DryRunPhase {
    pub(crate) phase: String,
    pub(crate) steps: Vec<Step>,
}

/// Placeholders for what only the run knows, in the dry run's command lines.
const PLAN_CLOCK: &str = "<plan clock>";
const PLAN_TAG: &str = "<plan tag>";
const BUILT_IMAGE: &str = "<built image>";

/// Every step a run would take, without a plan: the plan's outputs are shown as placeholders.
/// The steps come from the functions the phases run, so the listing is what a run executes.
pub(crate) fn dry_run(
    options: &PlanOptions,
    platforms: &[Platform],
    manifest_platforms: &[Platform],
    ca: Option<&Path>,
) -> DryRun {
    let run_dir = Path::new("<run dir>");
    let target = Target {
        registry: options.target.registry.clone(),
        repository: options.target.repository.to_lowercase(),
    };
    let mut plan_steps = vec![plan::gate_step(
        options,
        PLAN_CLOCK,
        Some(Path::new("<previous receipt>")),
        run_dir,
    )];
    plan_steps.extend(plan::resolve_and_lock_steps(options, PLAN_CLOCK, run_dir));
    let mut phases = vec![DryRunPhase {
        phase: "plan".into(),
        steps: plan_steps,
    }];
    for p in platforms {
        let work = platform::work_dir(run_dir, *p);
        let steps = platform::PlatformSteps {
            publish: (!options.no_publish).then_some(&target),
            platform: *p,
            work: &work,
            out: run_dir,
            ca_bundle: ca,
            now: PLAN_CLOCK,
            // Known once the plan ran (its previous receipt's index); the push then gains
            // `--previous`.
            previous: None,
        };
        phases.push(DryRunPhase {
            phase: format!("build {p}"),
            steps: steps.all(BUILT_IMAGE),
        });
    }
    if !options.no_publish {
        let assets = options.previous_receipts.join(PLAN_TAG);
        let work = Path::new("<ship dir>");
        let receipt_sboms: Vec<PathBuf> = platforms
            .iter()
            .flat_map(|p| crate::image::sbom::sbom_file_names(*p))
            .map(|name| run_dir.join(name))
            .collect();
        let steps = ship::ShipSteps::new(&ship::ShipContext {
            plan_dir: run_dir,
            target: &target,
            now: PLAN_CLOCK,
            assets: &assets,
            tag: PLAN_TAG,
            work,
            partial: ship::is_partial(manifest_platforms, platforms),
            files: &ship::StageFiles::in_dir(work, platforms),
            receipt_sboms: &receipt_sboms,
            verifiers: &[],
            defer_tag: false,
        });
        phases.push(DryRunPhase {
            phase: "ship".into(),
            steps: steps.all(&assets.join("<receipt>")),
        });
    }
    DryRun {
        phases,
        note: "the build and ship phases run only when the plan's action is `release`: a due \
               day (or --force) whose inputs differ from the previous release",
    }
}

#[derive(Serialize)]
struct Outcome<'a> {
    status: &'static str,
    reason: &'a str,
    run_dir: &'a Path,
    receipt: Option<&'a Path>,
    tag: Option<&'a str>,
    reference: Option<&'a str>,
    changes: Vec<String>,
    steps: &'a [StepTime],
    /// The release's notes, when one was shipped.
    #[serde(skip_serializing_if = "Option::is_none")]
    notes: Option<&'a template_formats::model::notes::ReleaseNotes>,
}

async fn run_all(request: ReleaseAllRequest, ctx: &crate::Context) -> Result<ExitCode> {
    let root = ctx.layout.root().to_path_buf();
    let manifest = Manifest::load(&ctx.layout.manifest())?;
    let now = ctx.release_now(request.plan.registry.now.as_deref())?;
    let platforms = release_platforms(&request.plan, &manifest)?;
    let ca = request.ca_bundle.as_deref().map(absolute).transpose()?;
    if request.dry_run {
        let plan = dry_run(
            &request.plan,
            &platforms,
            &manifest.platforms,
            ca.as_deref(),
        );
        match request.json {
            true => print_json(&plan)?,
            false => print_dry_run(&plan),
        }
        return Ok(ExitCode::SUCCESS);
    }

    // The first line: whether the inputs can be verified (docs/inputs.md).
    eprintln!(
        "{}",
        crate::npm::resolve::inputs_headline(&request.plan.registry, &manifest, ctx).await
    );
    let run_dir = ctx
        .layout
        .state("runs")
        .join(now.format("%Y%m%dT%H%M%SZ").to_string());
    let mut times = Vec::new();
    let mut runner = StepRunner::new(&root, plan::STEP_NAMES.len())?;
    runner
        .progress
        .step(format!("release run in {}", run_dir.display()));
    let plan = plan::run(
        plan::PlanRequest {
            verifier: &ctx.settings.verifier,
            options: &request.plan,
            root: &root,
            out: &run_dir,
            now,
            platforms: platforms.clone(),
            github: plan::github_env(&ctx.settings)?,
        },
        &mut runner,
    )
    .await?;
    times.extend(runner.times.iter().cloned());
    if plan.action != Action::Release {
        return finish(request.json, &Outcome::planned(&plan, &run_dir, &times));
    }
    times.extend(build_platforms(&root, &plan, &run_dir, ca.as_deref()).await?);
    if !plan.publish {
        return finish(request.json, &Outcome::tested(&plan, &run_dir, &times));
    }
    let tag = plan.release_tag()?.to_string();
    let assets = root.join(&request.plan.previous_receipts).join(&tag);
    let shipped = ship::run(ship::ShipRequest {
        verifier: &ctx.settings.verifier,
        root: &root,
        plan_dir: &run_dir,
        plan: &plan,
        results: &run_dir,
        assets: &assets,
        defer_tag: false,
        verifiers: None,
    })
    .await?;
    times.extend(shipped.steps.iter().cloned());
    finish(
        request.json,
        &Outcome::released(&plan, &run_dir, &shipped, &times),
    )
}

impl<'a> Outcome<'a> {
    /// The plan stopped the run: the answer names the previous release, if any.
    fn planned(plan: &'a ReleasePlan, run_dir: &'a Path, steps: &'a [StepTime]) -> Outcome<'a> {
        let previous = plan.previous.as_ref();
        Outcome {
            status: plan.action.as_str(),
            reason: &plan.reason,
            run_dir,
            receipt: previous.map(|p| p.receipt.as_path()),
            tag: previous.map(|p| p.tag.as_str()),
            reference: previous.map(|p| p.reference.as_str()),
            changes: plan.changes.iter().map(ToString::to_string).collect(),
            steps,
            notes: None,
        }
    }

    /// Built and smoke-tested, but the plan may not publish.
    fn tested(plan: &'a ReleasePlan, run_dir: &'a Path, steps: &'a [StepTime]) -> Outcome<'a> {
        Outcome {
            status: "tested",
            reason: &plan.publish_reason,
            run_dir,
            receipt: None,
            tag: plan.tag.as_deref(),
            reference: None,
            changes: plan.changes.iter().map(ToString::to_string).collect(),
            steps,
            notes: None,
        }
    }

    fn released(
        plan: &'a ReleasePlan,
        run_dir: &'a Path,
        shipped: &'a ship::Shipped,
        steps: &'a [StepTime],
    ) -> Outcome<'a> {
        Outcome {
            status: "released",
            reason: &plan.reason,
            run_dir,
            receipt: Some(&shipped.receipt),
            tag: Some(&shipped.tag),
            reference: Some(&shipped.reference),
            changes: plan.changes.iter().map(ToString::to_string).collect(),
            steps,
            notes: Some(&shipped.release_notes),
        }
    }
}

/// `--platform` when given, else every manifest platform this machine can build.
fn release_platforms(options: &PlanOptions, manifest: &Manifest) -> Result<Vec<Platform>> {
    let platforms = if options.platforms.is_empty() {
        runnable_platforms(manifest)
    } else {
        options.platforms.clone()
    };
    if platforms.is_empty() {
        bail!(
            "this machine can build none of {:?}; pass --platform, or run \
             `bash scripts/setup-host.sh` to register arm64 emulation",
            manifest.platforms
        );
    }
    Ok(platforms)
}

fn print_dry_run(plan: &DryRun) {
    println!("release plan (nothing is changed by --dry-run):");
    for phase in &plan.phases {
        println!("  {}:", phase.phase);
        for step in &phase.steps {
            println!("    {}", step.command_line());
        }
    }
    println!("{}", plan.note);
}

/// Builds, smoke-tests and (when the plan publishes) pushes every planned platform, into the
/// local registry when the plan's target is one.
///
/// The platforms run side by side, as the workflow's jobs do: an emulated arm64 build keeps
/// one core busy for most of the release while amd64 needs little, so in turn they would take
/// their sum. A platform that fails does not stop the others; their finished steps are kept
/// (a re-run skips them) and every failure is reported.
async fn build_platforms(
    root: &Path,
    plan: &ReleasePlan,
    run_dir: &Path,
    ca: Option<&Path>,
) -> Result<Vec<StepTime>> {
    if plan.publish {
        ensure_local_registry(root, &plan.target).await?;
    }
    let side_by_side = plan.platforms.len() > 1;
    let runs = plan.platforms.iter().map(|p| {
        platform::run(platform::PlatformBuild {
            root,
            plan,
            platform: *p,
            out: run_dir,
            ca_bundle: ca,
            side_by_side,
        })
    });
    let mut times = Vec::new();
    let mut failures = Vec::new();
    for (p, outcome) in plan.platforms.iter().zip(join_all(runs).await) {
        match outcome {
            Ok((results, _)) => times.extend(results.steps),
            Err(e) => failures.push(format!("{p}: {e:#}")),
        }
    }
    match failures.as_slice() {
        [] => Ok(times),
        [one] => bail!("{one}"),
        many => bail!("{} platforms failed:\n  {}", many.len(), many.join("\n  ")),
    }
}

fn finish(json: bool, outcome: &Outcome<'_>) -> Result<ExitCode> {
    eprint!("{}", render_times("release steps:", outcome.steps));
    if json {
        print_json(outcome)?;
    } else {
        println!("release: {} — {}", outcome.status, outcome.reason);
        if let Some(tag) = outcome.tag {
            println!("  tag        {tag}");
        }
        if let Some(reference) = outcome.reference {
            println!("  reference  {reference}");
        }
        if let Some(receipt) = outcome.receipt {
            println!("  receipt    {}", receipt.display());
        }
        for change in &outcome.changes {
            println!("  {change}");
        }
        println!("  run dir    {}", outcome.run_dir.display());
        if let Some(notes) = outcome.notes {
            println!();
            notes::print_markdown(notes);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Starts the local registry (scripts/local-registry.sh) when the target is on loopback, so
/// the embedded default works on a bare machine.
async fn ensure_local_registry(root: &Path, target: &Target) -> Result<()> {
    let parsed =
        template_verify::oci::client::RegistryTarget::parse(&target.registry, &target.repository)?;
    if !template_verify::http::is_loopback_host(&parsed.host) {
        return Ok(());
    }
    let port = parsed.base.port().unwrap_or(5000);
    let status = tokio::process::Command::new("bash")
        .arg(crate::layout::Layout::at(root).script("local-registry.sh"))
        .arg("start")
        .env("XTASK_LOCAL_REGISTRY_PORT", port.to_string())
        .stdout(Stdio::null())
        .status()
        .await
        .context("cannot run scripts/local-registry.sh")?;
    if !status.success() {
        bail!(
            "scripts/local-registry.sh could not start a registry on 127.0.0.1:{port}; run \
             `bash scripts/setup-host.sh` first"
        );
    }
    Ok(())
}
