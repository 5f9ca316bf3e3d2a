//! The GitHub Actions replay engine: runs a workflow file on this machine the way a
//! GitHub-hosted runner would, so the release workflows are tested for real before they ever
//! run on GitHub. What it implements, where each behaviour comes from and the rule for growing
//! it: README.md beside this crate.
//!
//! Jobs run in `needs` order: those whose needs have ended start together, each on a runner
//! home of its own when there are several (root only: [`own_runner_home`]), matrix legs side by
//! side without `fail-fast` and one after another with it; every `run:` step
//! is a script executed by the non-root `runner` user (`scripts/setup-runner-user.sh`) with a
//! clean environment holding only what GitHub sets. `actions/checkout`, `upload-artifact`,
//! `download-artifact`, `cache` and the attest actions are emulated; composite actions of a
//! repository registered with [`Replay::action_source`] run from its local git repository
//! (`composite.rs`); other actions need a stand-in registered with [`Replay::stand_in`]. A `gh`
//! stand-in (`gh.py`) keeps releases in a directory and enforces immutable releases and the
//! job token's permissions, reads other repositories' releases
//! ([`Replay::gh_foreign_repository`]) and verifies attestations against what the attest
//! actions (or [`record_attestation`]) recorded (`gh_state.rs`).
//!
//! Where GitHub silently evaluates a mistake to an empty string — a misspelled step id or
//! output, a need the job does not declare, a matrix key or input that does not exist — the
//! replay stops with an error naming the workflow, job, step and expression.
//!
//! ```ignore
//! let replay = Replay::new(".github/workflows/update-template.yml", repo_root)?
//!     .dispatch(json!({ "dry_run": true }))
//!     .stand_in("actions/attest-build-provenance", StandIn::Script("...".into()));
//! replay.gh_fail_once("release edit")?;           // the last step fails once
//! let mut run = run_workflow(replay)?;             // Err = the workflow itself is wrong
//! assert_eq!(run.result("release"), Status::Failure);
//! rerun_failed(&mut run)?;                         // attempt 2, same run id
//! run.assert_success();                            // panics with the failing steps' log tails
//! ```
//!
//! Needs root (steps switch to the runner with `setpriv`) or to run as the runner itself, and
//! `scripts/setup-runner-user.sh` to have run. A job that runs alone runs on the shared
//! /home/runner (jobs after it find what it left there, as they would not on GitHub); what
//! runs beside others gets a home of its own, which is only ever fresh. Steps run on this
//! machine's architecture whatever `runs-on` says (`RUNNER_ARCH` follows the label), and
//! side-by-side jobs share this machine's Docker engine and system directories.

mod actions;
mod composite;
mod config;
pub mod expr;
mod gh_state;
mod glob;
mod leg;
mod results;
mod run;
mod runner;
mod scope;
mod workflow;

use std::time::Duration;

pub use actions::{
    ActionCall, ActionFn, Attestation, JobIdentity, Signer, StandIn, Subject, ATTESTATIONS_FILE,
};
pub use composite::committed_repo;
pub use config::Replay;
pub use gh_state::{
    add_release, attestation_records, record_attestation, record_attestation_from,
    set_default_branch, AttestationRecord, RecordSubject, SignedFrom, ATTESTATION_STORE,
    CYCLONEDX_BOM, MAIN_ON_GITHUB_HOSTED, SLSA_PROVENANCE_V1, SPDX_DOCUMENT_V2_3,
};
pub use leg::parse_command_file;
pub use results::{JobRun, Status, StepRun, WorkflowRun};
pub use run::{rerun_failed, rerun_job, run_workflow};
pub use runner::{lock_workspace, own_runner_home, runner_ids};

/// The user GitHub-hosted runners run jobs as.
pub const RUNNER_USER: &str = "runner";
pub const RUNNER_HOME: &str = "/home/runner";
/// How long steps that run after a job was cancelled may take (GitHub's default
/// `cancel-timeout-minutes`: actions/runner v2.336.0,
/// src/Sdk/DTPipelines/Pipelines/PipelineConstants.cs, `DefaultJobCancelTimeoutInMinutes`).
const CANCEL_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// A job's `timeout-minutes` when it sets none (the same file, `DefaultJobTimeoutInMinutes`).
const DEFAULT_JOB_TIMEOUT_MINUTES: f64 = 360.0;

#[cfg(test)]
mod standalone_tests;
