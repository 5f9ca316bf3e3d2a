//! What a replay leaves: each step's and leg's result, the run's, and what the tests ask of them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use crate::actions;
use crate::config::Replay;
use crate::run::event_payload;
use crate::workflow::Workflow;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Success,
    Failure,
    Skipped,
    Cancelled,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Success => "success",
            Status::Failure => "failure",
            Status::Skipped => "skipped",
            Status::Cancelled => "cancelled",
        }
    }
}

#[derive(Clone, Debug)]
pub struct StepRun {
    pub id: Option<String>,
    pub name: String,
    pub outcome: Status,
    pub conclusion: Status,
    pub outputs: BTreeMap<String, String>,
    pub log: PathBuf,
    /// How long the step took, its `if:` and command files included.
    pub elapsed: Duration,
    /// The CPU time its processes used (user and system; see `StepEnd::cpu`).
    pub cpu: Duration,
}

/// One job, or one leg of a matrix job, in one attempt.
#[derive(Clone, Debug)]
pub struct JobRun {
    pub job_id: String,
    /// The evaluated display name (`Build linux/amd64`).
    pub name: String,
    pub matrix: Option<Map<String, Value>>,
    pub attempt: u32,
    /// The conclusion: `continue-on-error: true` turns a failure into success here.
    pub status: Status,
    /// What actually happened, before `continue-on-error`.
    pub outcome: Status,
    pub outputs: BTreeMap<String, String>,
    pub steps: Vec<StepRun>,
    pub runs_on: Value,
    pub permissions: BTreeMap<String, String>,
    pub environment: Option<Value>,
    pub summary: String,
    /// Why the job failed when no step explains it (timeout, post-job phase).
    pub error: Option<String>,
    pub dir: PathBuf,
    /// `GITHUB_WORKSPACE`: GitHub's fixed path, which the next job empties.
    pub workspace: PathBuf,
    /// How long the leg took once it held the runner's workspace, post-job cache saves
    /// included (zero for a job that was skipped or cancelled before it started).
    pub elapsed: Duration,
}

impl JobRun {
    /// The CPU time the leg's steps used.
    pub fn cpu(&self) -> Duration {
        self.steps.iter().map(|s| s.cpu).sum()
    }
    pub fn step(&self, name_or_id: &str) -> &StepRun {
        self.steps
            .iter()
            .find(|s| s.id.as_deref() == Some(name_or_id) || s.name == name_or_id)
            .unwrap_or_else(|| panic!("job {} has no step named or id'd {name_or_id:?}", self.name))
    }
    pub fn log_of(&self, name_or_id: &str) -> String {
        std::fs::read_to_string(&self.step(name_or_id).log).unwrap_or_default()
    }
    /// What this leg's attest steps recorded in its runner temp dir, in step order.
    pub fn attestations(&self) -> Vec<actions::Attestation> {
        actions::recorded_attestations(&self.dir)
    }
}

pub struct WorkflowRun {
    pub replay: Replay,
    pub run_id: u64,
    pub run_attempt: u32,
    /// The latest result of every job leg, in execution order.
    pub jobs: Vec<JobRun>,
    /// Every attempt's results, oldest first.
    pub history: Vec<JobRun>,
    pub(crate) workflow: Workflow,
}

impl WorkflowRun {
    /// `github.event` as the runner gives it to every step of this run.
    pub fn event_payload(&self) -> Value {
        event_payload(self)
    }
    pub fn legs(&self, job_id: &str) -> Vec<&JobRun> {
        self.jobs.iter().filter(|j| j.job_id == job_id).collect()
    }
    /// The only leg of a job (panics on a matrix job with several legs or an unknown job).
    pub fn job(&self, job_id: &str) -> &JobRun {
        match self.legs(job_id).as_slice() {
            [one] => one,
            [] => panic!("the run has no job {job_id}"),
            many => panic!("job {job_id} has {} legs; use legs()", many.len()),
        }
    }
    /// A job's result as `needs.<job>.result` reports it.
    pub fn result(&self, job_id: &str) -> Status {
        aggregate(&self.legs(job_id))
    }
    pub fn artifacts_dir(&self) -> PathBuf {
        self.replay.root().join("artifacts")
    }
    pub fn releases_dir(&self) -> PathBuf {
        self.replay.gh_state_dir().join("releases")
    }
    /// Every job's summary, in order.
    pub fn summary(&self) -> String {
        self.jobs.iter().map(|j| j.summary.as_str()).collect()
    }
    /// The run failed when any job did (after continue-on-error).
    pub fn succeeded(&self) -> bool {
        self.jobs
            .iter()
            .all(|j| matches!(j.status, Status::Success | Status::Skipped))
    }
    /// What failed, with the last lines of each failing step's log.
    pub fn failure_report(&self) -> String {
        let mut out = String::new();
        for job in self
            .jobs
            .iter()
            .filter(|j| matches!(j.outcome, Status::Failure | Status::Cancelled))
        {
            out += &format!(
                "{}: job {} ({}) {}\n",
                self.workflow.file,
                job.job_id,
                job.name,
                job.outcome.as_str()
            );
            if let Some(e) = &job.error {
                out += &format!("  {e}\n");
            }
            for step in job.steps.iter().filter(|s| s.outcome == Status::Failure) {
                out += &format!(
                    "  step '{}' failed; log {}:\n",
                    step.name,
                    step.log.display()
                );
                out += &log_tail(&step.log, 25);
            }
        }
        out
    }
    /// Every attempt's legs and steps with how long each took and the CPU time its processes
    /// used (which, unlike the wall time, does not grow with what else the machine runs), one
    /// line each, for a test to print: what a replay costs, step by step (skipped steps and
    /// legs left out).
    pub fn timings(&self) -> String {
        let mut out = format!("{}, run {} (wall, CPU):\n", self.workflow.file, self.run_id);
        for job in self.history.iter().filter(|j| j.outcome != Status::Skipped) {
            out += &format!(
                "  attempt {} {:<40} {:>7.1} s {:>7.1} s  {}\n",
                job.attempt,
                job.name,
                job.elapsed.as_secs_f64(),
                job.cpu().as_secs_f64(),
                job.outcome.as_str()
            );
            for step in job.steps.iter().filter(|s| s.outcome != Status::Skipped) {
                out += &format!(
                    "      {:<44} {:>7.1} s {:>7.1} s  {}\n",
                    step.name,
                    step.elapsed.as_secs_f64(),
                    step.cpu.as_secs_f64(),
                    step.outcome.as_str()
                );
            }
        }
        out
    }
    pub fn assert_success(&self) {
        assert!(
            self.succeeded(),
            "workflow {} failed:\n{}",
            self.workflow.file,
            self.failure_report()
        );
    }
}

pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| format!("(cannot read the log: {e})\n"));
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..]
        .iter()
        .map(|l| format!("    | {l}\n"))
        .collect()
}

pub(crate) fn aggregate(legs: &[&JobRun]) -> Status {
    if legs.is_empty() {
        return Status::Skipped;
    }
    if legs.iter().any(|j| j.status == Status::Failure) {
        return Status::Failure;
    }
    if legs.iter().any(|j| j.status == Status::Cancelled) {
        return Status::Cancelled;
    }
    if legs.iter().all(|j| j.status == Status::Skipped) {
        return Status::Skipped;
    }
    Status::Success
}
