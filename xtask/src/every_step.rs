//! Every step a release phase, the dry run or a benchmark can hand to a child, from the same
//! functions the phases run (no argv is rebuilt here), once for every combination of the
//! options that add or remove arguments. The binary's test (xtask/src/flags/round_trip.rs,
//! where the command line is) parses each one with `Cli` and checks that it gives back the
//! request the step was rendered from: without it a renamed or dropped flag would break a
//! release only when that step runs. Public for that test only, and compiled only with the
//! `test-support` feature (which the crate's tests turn on): the release never calls it. It
//! sits above `release/` and `bench/`, so neither names the other.

use std::path::{Path, PathBuf};

#[cfg(feature = "bench")]
use crate::bench::{rebuild as bench_rebuild, reproduce as bench_reproduce};
use crate::npm::resolve::{RegistryAndClock, DEFAULT_NPM_REGISTRY};
use crate::release::plan::PlanOptions;
use crate::release::steps::Step;
use crate::release::{plan, platform, ship};
use template_formats::manifest::Platform;
use template_formats::model::plan::Target;

/// A step, and which combination of options made it (for a failure message).
pub struct Emitted {
    pub variant: String,
    pub step: Step,
}

fn emitted(variant: impl Into<String>, steps: impl IntoIterator<Item = Step>) -> Vec<Emitted> {
    let variant = variant.into();
    steps
        .into_iter()
        .map(|step| Emitted {
            variant: variant.clone(),
            step,
        })
        .collect()
}

fn plan_flags(force: bool, no_publish: bool, platforms: &[Platform]) -> PlanOptions {
    PlanOptions {
        registry: RegistryAndClock {
            registry: DEFAULT_NPM_REGISTRY.into(),
            now: None,
            trust: crate::npm::trust::TrustOptions {
                trusted_keys: force.then(|| "keys.json".into()),
                require_signed_inputs: !no_publish,
                trusted_root: force.then(|| "trusted_root.json".into()),
            },
        },
        force,
        no_publish,
        previous_receipts: template_formats::paths::RELEASES.into(),
        published_tags: None,
        platforms: platforms.to_vec(),
        target: Target {
            registry: "ghcr.io".into(),
            repository: "sandbox0/coding-agent".into(),
        },
    }
}

const NOW: &str = "2026-11-30T04:37:00Z";
const TAG: &str = "2026.11.30-0123456789ab";
const IMAGE: &str = "coding-agent:0123456789ab";

/// Each platform alone (a maintainer's partial release) and both (the workflow's).
fn platform_sets() -> [Vec<Platform>; 3] {
    [
        vec![Platform::LinuxAmd64],
        vec![Platform::LinuxArm64],
        Platform::ALL.to_vec(),
    ]
}

fn plan_phase() -> Vec<Emitted> {
    let out = Path::new("/run/plan");
    let mut all = Vec::new();
    for force in [false, true] {
        for previous in [None, Some(Path::new("/releases/receipt-a.json"))] {
            let flags = plan_flags(force, false, &[]);
            all.extend(emitted(
                format!("plan, force {force}, previous receipt {previous:?}"),
                [plan::gate_step(&flags, NOW, previous, out)],
            ));
        }
    }
    all.extend(emitted(
        "plan, due",
        plan::resolve_and_lock_steps(&plan_flags(false, false, &[]), NOW, out),
    ));
    all
}

fn platform_phase() -> Vec<Emitted> {
    let target = Target {
        registry: "ghcr.io".into(),
        repository: "sandbox0/coding-agent".into(),
    };
    let out = Path::new("/run/out");
    let ca = Path::new("/etc/ssl/proxy-ca.pem");
    let mut all = Vec::new();
    for p in Platform::ALL {
        let work = platform::work_dir(out, p);
        let previous = format!("ghcr.io/sandbox0/coding-agent@sha256:{}", "c".repeat(64));
        for publish in [None, Some(&target)] {
            for ca_bundle in [None, Some(ca)] {
                for previous in [None, Some(previous.as_str())] {
                    let steps = platform::PlatformSteps {
                        publish,
                        platform: p,
                        work: &work,
                        out,
                        ca_bundle,
                        now: NOW,
                        previous,
                    };
                    all.extend(emitted(
                        format!(
                            "build {p}, publish {}, ca bundle {ca_bundle:?}, previous {}",
                            publish.is_some(),
                            previous.is_some()
                        ),
                        steps.all(IMAGE),
                    ));
                }
            }
        }
    }
    all
}

fn ship_phase() -> Vec<Emitted> {
    let target = Target {
        registry: "ghcr.io".into(),
        repository: "sandbox0/coding-agent".into(),
    };
    let (plan_dir, work, assets) = (
        Path::new("/run/plan"),
        Path::new("/state/ship"),
        Path::new("/run/assets"),
    );
    let mut all = Vec::new();
    for platforms in platform_sets() {
        let files = ship::StageFiles::in_dir(work, &platforms);
        let sboms: Vec<PathBuf> = platforms
            .iter()
            .flat_map(|p| crate::image::sbom::sbom_file_names(*p))
            .map(|name| plan_dir.join(name))
            .collect();
        let verifier_binaries: Vec<PathBuf> = Platform::ALL
            .iter()
            .map(|p| {
                Path::new("/verifiers").join(template_verify::verifier::verifier_file_name(*p))
            })
            .collect();
        for verifiers in [&[][..], &verifier_binaries[..]] {
            for defer_tag in [false, true] {
                let partial = ship::is_partial(&Platform::ALL, &platforms);
                let steps = ship::ShipSteps::new(&ship::ShipContext {
                    plan_dir,
                    target: &target,
                    now: NOW,
                    assets,
                    tag: TAG,
                    work,
                    partial,
                    files: &files,
                    receipt_sboms: &sboms,
                    verifiers,
                    defer_tag,
                });
                all.extend(emitted(
                    format!(
                        "ship {platforms:?}, partial {partial}, {} verifiers, defer tag \
                         {defer_tag}",
                        verifiers.len()
                    ),
                    steps.all(&assets.join("receipt-x.json")),
                ));
            }
        }
    }
    all
}

fn dry_runs() -> Vec<Emitted> {
    let mut all = Vec::new();
    for platforms in platform_sets() {
        for no_publish in [false, true] {
            for ca in [None, Some(Path::new("/etc/ssl/proxy-ca.pem"))] {
                for force in [false, true] {
                    let flags = plan_flags(force, no_publish, &platforms);
                    let listing = crate::release::dry_run(&flags, &platforms, &Platform::ALL, ca);
                    for phase in listing.phases {
                        all.extend(emitted(
                            format!(
                                "dry run {platforms:?}, no publish {no_publish}, ca bundle \
                                 {ca:?}, force {force}, phase {}",
                                phase.phase
                            ),
                            phase.steps,
                        ));
                    }
                }
            }
        }
    }
    all
}

/// The benchmarks' children (with the `bench` feature, which scripts/test.sh builds).
#[cfg(feature = "bench")]
fn benches() -> Vec<Emitted> {
    let dir = Path::new("/state/bench");
    let mut all = Vec::new();
    for p in Platform::ALL {
        for round in 1..=2 {
            all.extend(emitted(
                format!("bench reproduce {p}, round {round}"),
                bench_reproduce::round_steps(p, round, dir),
            ));
        }
        let scratch = Path::new("/state/bench/bumped");
        all.extend(emitted(
            format!("bench rebuild {p}"),
            std::iter::once(bench_rebuild::dry_build_step(
                p,
                scratch,
                &dir.join("plan.json"),
            ))
            .chain(bench_rebuild::timed_steps(
                p,
                ("@openai/codex", "0.171.0"),
                scratch,
                Path::new("/state/layers"),
                dir,
            )),
        ));
    }
    all
}

/// Every step any phase, the dry run or a benchmark can emit.
pub fn every_step() -> Vec<Emitted> {
    [
        plan_phase(),
        platform_phase(),
        ship_phase(),
        dry_runs(),
        #[cfg(feature = "bench")]
        benches(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

#[test]
fn every_branch_of_the_options_is_in_some_step() {
    let all = every_step();
    // The options' branches were all taken: each flag only a branch adds is in some step, so
    // a combination dropped from the loops above cannot hide a step that no longer parses.
    let used: std::collections::BTreeSet<&str> = all
        .iter()
        .flat_map(|e| e.step.args.iter().map(String::as_str))
        .collect();
    let mut branch_flags = vec![
        "--force",
        "--previous-receipt",
        "--ca-bundle",
        "--partial",
        "--defer-tag",
        "--verifier",
        "--pushed",
    ];
    // Only the benchmarks' children take these (`bench rebuild`, `bench reproduce`).
    if cfg!(feature = "bench") {
        branch_flags.extend(["--rebuild", "--no-cache", "--dry-run"]);
    }
    for branch_flag in branch_flags {
        assert!(used.contains(branch_flag), "no step uses {branch_flag}");
    }
    let names: std::collections::BTreeSet<&str> =
        all.iter().map(|e| e.step.name.as_str()).collect();
    for name in ["push linux/arm64 by digest", "tag", "receipt verify"] {
        assert!(names.contains(name), "no step is named {name:?}");
    }
}
