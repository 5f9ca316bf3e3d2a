//! The GitHub Actions replay engine: runs a workflow file on this machine the way a
//! GitHub-hosted runner would, so the release workflows are tested for real before they ever
//! run on GitHub. What it implements, where each behaviour comes from and the rule for growing
//! it: README.md beside this crate.
//!
//! Jobs run in `needs` order (sequentially), matrix legs one after another; every `run:` step
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
//! `scripts/setup-runner-user.sh` to have run. Jobs do not get fresh machines: they share
//! /home/runner, and steps run on this machine's architecture whatever `runs-on` says
//! (`RUNNER_ARCH` follows the label).

mod actions;
mod composite;
pub mod expr;
mod gh_state;
mod glob;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _, Result};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

pub use actions::{ActionCall, ActionFn, Attestation, StandIn, Subject, ATTESTATIONS_FILE};
pub use gh_state::{
    add_release, attestation_records, record_attestation, record_attestation_from,
    set_default_branch, AttestationRecord, RecordSubject, SignedFrom, ATTESTATION_STORE,
    CYCLONEDX_BOM, MAIN_ON_GITHUB_HOSTED, SLSA_PROVENANCE_V1, SPDX_DOCUMENT_V2_3,
};

/// The user GitHub-hosted runners run jobs as.
pub const RUNNER_USER: &str = "runner";
pub const RUNNER_HOME: &str = "/home/runner";
/// How long steps that run after a job was cancelled may take (GitHub's default
/// `cancel-timeout-minutes`: actions/runner v2.336.0,
/// src/Sdk/DTPipelines/Pipelines/PipelineConstants.cs, `DefaultJobCancelTimeoutInMinutes`).
const CANCEL_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// A job's `timeout-minutes` when it sets none (the same file, `DefaultJobTimeoutInMinutes`).
const DEFAULT_JOB_TIMEOUT_MINUTES: f64 = 360.0;

// ---------------------------------------------------------------------------------------------
// Results
// ---------------------------------------------------------------------------------------------

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
    workflow: Workflow,
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
    /// Every attempt's legs and steps with how long each took, one line each, for a test to
    /// print: what a replay costs, step by step (skipped steps and legs left out).
    pub fn timings(&self) -> String {
        let mut out = format!("{}, run {}:\n", self.workflow.file, self.run_id);
        for job in self.history.iter().filter(|j| j.outcome != Status::Skipped) {
            out += &format!(
                "  attempt {} {:<40} {:>7.1} s  {}\n",
                job.attempt,
                job.name,
                job.elapsed.as_secs_f64(),
                job.outcome.as_str()
            );
            for step in job.steps.iter().filter(|s| s.outcome != Status::Skipped) {
                out += &format!(
                    "      {:<44} {:>7.1} s  {}\n",
                    step.name,
                    step.elapsed.as_secs_f64(),
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

fn log_tail(path: &Path, lines: usize) -> String {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| format!("(cannot read the log: {e})\n"));
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..]
        .iter()
        .map(|l| format!("    | {l}\n"))
        .collect()
}

fn aggregate(legs: &[&JobRun]) -> Status {
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

// ---------------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------------

/// What to replay and as what: the workflow file, the repository it is checked out from, the
/// event, and the stand-ins for actions the harness does not emulate.
#[derive(Clone)]
pub struct Replay {
    pub workflow: PathBuf,
    pub source_repo: PathBuf,
    pub sha: Option<String>,
    /// `owner/name`.
    pub repository: String,
    pub git_ref: String,
    /// The repository's default branch (in payloads that carry a `repository`).
    pub default_branch: String,
    pub actor: String,
    pub event_name: String,
    pub event: Value,
    pub vars: BTreeMap<String, String>,
    pub secrets: BTreeMap<String, String>,
    stand_ins: BTreeMap<String, StandIn>,
    /// Lower-case `owner/name` -> a local git repository holding its actions.
    action_sources: BTreeMap<String, PathBuf>,
    /// Lower-case `owner/name` -> the gh state dir of another repository the jobs may read.
    foreign_repos: BTreeMap<String, PathBuf>,
    tools: BTreeMap<String, String>,
    cache_dir: Option<PathBuf>,
    /// See [`Replay::arm64_legs_restore_the_x64_cache`].
    pub(crate) arm64_cache_from_x64: bool,
    root: Arc<tempfile::TempDir>,
}

impl Replay {
    /// A `workflow_dispatch` run without inputs of `workflow`, checking out `source_repo`'s HEAD,
    /// as repository `sandbox0/coding-agent-template` on `refs/heads/main`.
    pub fn new(workflow: impl AsRef<Path>, source_repo: impl AsRef<Path>) -> Result<Replay> {
        runner_ids()?;
        let root = tempfile::Builder::new()
            .prefix("replay-")
            .tempdir()
            .context("creating the replay's directory")?;
        set_mode(root.path(), 0o755)?;
        let gh = root.path().join("gh");
        std::fs::create_dir_all(&gh)?;
        give_to_runner(&gh)?;
        Ok(Replay {
            workflow: workflow.as_ref().to_path_buf(),
            source_repo: source_repo.as_ref().to_path_buf(),
            sha: None,
            repository: "sandbox0/coding-agent-template".into(),
            git_ref: "refs/heads/main".into(),
            default_branch: "main".into(),
            actor: "replay-actor".into(),
            event_name: "workflow_dispatch".into(),
            event: json!({ "inputs": {} }),
            vars: BTreeMap::new(),
            secrets: BTreeMap::new(),
            stand_ins: BTreeMap::new(),
            action_sources: BTreeMap::new(),
            foreign_repos: BTreeMap::new(),
            tools: BTreeMap::new(),
            cache_dir: None,
            arm64_cache_from_x64: false,
            root: Arc::new(root),
        })
    }
    pub fn repository(mut self, owner_name: &str) -> Self {
        self.repository = owner_name.into();
        self
    }
    pub fn event(mut self, name: &str, payload: Value) -> Self {
        self.event_name = name.into();
        self.event = payload;
        self
    }
    /// A `workflow_dispatch` event with these inputs (strings, booleans or numbers).
    pub fn dispatch(self, inputs: Value) -> Self {
        self.event("workflow_dispatch", json!({ "inputs": inputs }))
    }
    pub fn stand_in(mut self, action: &str, stand_in: StandIn) -> Self {
        self.stand_ins.insert(action.to_ascii_lowercase(), stand_in);
        self
    }
    /// Actions of repository `owner_name` (`uses: owner/name[/dir]@ref`) are loaded from the
    /// local git repository `git_repo` at `ref` (a commit or branch of it): composite actions,
    /// run step by step as GitHub runs them.
    pub fn action_source(mut self, owner_name: &str, git_repo: impl AsRef<Path>) -> Self {
        self.action_sources.insert(
            owner_name.to_ascii_lowercase(),
            git_repo.as_ref().to_path_buf(),
        );
        self
    }
    /// Another (public) repository whose releases and attestations live in `state_dir` (gh.py's
    /// format, see [`add_release`], [`record_attestation`]): `gh ... --repo owner/name` reads
    /// them with any valid token, and refuses every change (HTTP 403). Each job sees a copy
    /// taken when it starts.
    pub fn gh_foreign_repository(mut self, owner_name: &str, state_dir: impl AsRef<Path>) -> Self {
        self.foreign_repos.insert(
            owner_name.to_ascii_lowercase(),
            state_dir.as_ref().to_path_buf(),
        );
        self
    }
    pub fn secret(mut self, name: &str, value: &str) -> Self {
        self.secrets.insert(name.into(), value.into());
        self
    }
    /// Puts an executable `name` with this script (start it with a `#!` line) first on the
    /// runner's PATH, in front of the real one: fakes for the fast replays of a release
    /// workflow (`cargo`, `rustup`, `sudo`...). A `gh` here replaces the gh stand-in.
    pub fn fake_tool(mut self, name: &str, script: &str) -> Self {
        self.tools.insert(name.into(), script.into());
        self
    }
    /// Where `actions/cache` keeps entries (default: inside this replay's directory).
    /// A shortcut the real runners do not take, for the test suite's time: an `actions/cache`
    /// restore on an ARM64 leg that finds no entry for its key restores the entry saved under
    /// the same key with `X64` in place of `ARM64`, and says so in the step's log. Every leg
    /// runs on this x86 machine (above), so that entry holds exactly what the ARM64 leg would
    /// compile (a cold build of the tool: minutes on two cores). The keys, restore order and
    /// save rules stay actions/cache's; only where an ARM64 miss looks next is the harness's.
    pub fn arm64_legs_restore_the_x64_cache(mut self) -> Self {
        self.arm64_cache_from_x64 = true;
        self
    }
    pub fn cache_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.cache_dir = Some(dir.as_ref().to_path_buf());
        self
    }
    /// The replay's own directory (removed when the last clone of this Replay is dropped).
    pub fn root(&self) -> &Path {
        self.root.path()
    }
    /// The gh stand-in's state: `releases/<tag>/release.json` + `assets/`.
    pub fn gh_state_dir(&self) -> PathBuf {
        self.root().join("gh")
    }
    /// Makes the next `gh <subcommand>` (e.g. `release edit`) fail once.
    pub fn gh_fail_once(&self, subcommand: &str) -> Result<()> {
        let path = self.gh_state_dir().join("fail-once");
        std::fs::write(&path, subcommand)?;
        give_to_runner(&path)
    }
    fn cache_store(&self) -> PathBuf {
        self.cache_dir
            .clone()
            .unwrap_or_else(|| self.root().join("cache"))
    }
}

// ---------------------------------------------------------------------------------------------
// The workflow file
// ---------------------------------------------------------------------------------------------

#[derive(Clone)]
struct Workflow {
    file: String,
    doc: Map<String, Value>,
    /// Job ids in a `needs` order.
    order: Vec<String>,
    inputs: Map<String, Value>,
}

const WORKFLOW_KEYS: &[&str] = &[
    "name",
    "run-name",
    "on",
    "permissions",
    "env",
    "defaults",
    "concurrency",
    "jobs",
];
const JOB_KEYS: &[&str] = &[
    "name",
    "needs",
    "if",
    "runs-on",
    "strategy",
    "env",
    "defaults",
    "outputs",
    "timeout-minutes",
    "continue-on-error",
    "permissions",
    "environment",
    "steps",
    "concurrency",
];
const STEP_KEYS: &[&str] = &[
    "id",
    "name",
    "if",
    "uses",
    "run",
    "shell",
    "with",
    "env",
    "working-directory",
    "continue-on-error",
    "timeout-minutes",
];

/// Refuses a key of `map` that is not in `known`: the harness would otherwise ignore what
/// GitHub acts on (or a typo GitHub rejects). `place` starts the message.
fn only_known_keys(map: &Map<String, Value>, known: &[&str], place: &str) -> Result<()> {
    match map.keys().find(|key| !known.contains(&key.as_str())) {
        Some(key) => {
            bail!("{place} `{key}` is not supported by the replay harness (or misspelled)")
        }
        None => Ok(()),
    }
}

impl Workflow {
    fn load(path: &Path) -> Result<Workflow> {
        let file = path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string());
        let raw = std::fs::read_to_string(path)
            .with_context(|| format!("reading workflow {}", path.display()))?;
        let doc: Value =
            yaml_serde::from_str(&raw).with_context(|| format!("workflow {file}: invalid YAML"))?;
        let Value::Object(doc) = doc else {
            bail!("workflow {file}: not a mapping")
        };
        only_known_keys(&doc, WORKFLOW_KEYS, &format!("workflow {file}: top-level"))?;
        let jobs = doc
            .get("jobs")
            .and_then(Value::as_object)
            .ok_or_else(|| anyhow!("workflow {file}: no `jobs:` mapping"))?;
        for (id, job) in jobs {
            let job = job
                .as_object()
                .ok_or_else(|| anyhow!("workflow {file}: job {id} is not a mapping"))?;
            only_known_keys(job, JOB_KEYS, &format!("workflow {file}, job {id}:"))?;
            let steps = job
                .get("steps")
                .and_then(Value::as_array)
                .ok_or_else(|| anyhow!("workflow {file}, job {id}: no `steps:` list"))?;
            let mut ids = BTreeSet::new();
            for (i, step) in steps.iter().enumerate() {
                let step = step.as_object().ok_or_else(|| {
                    anyhow!("workflow {file}, job {id}: step {} is not a mapping", i + 1)
                })?;
                only_known_keys(
                    step,
                    STEP_KEYS,
                    &format!("workflow {file}, job {id}, step {}:", i + 1),
                )?;
                if step.contains_key("run") == step.contains_key("uses") {
                    bail!("workflow {file}, job {id}, step {}: a step has exactly one of `run` and `uses`", i + 1);
                }
                if let Some(sid) = step.get("id").and_then(Value::as_str) {
                    if !ids.insert(sid.to_owned()) {
                        bail!("workflow {file}, job {id}: step id {sid} is used twice");
                    }
                }
            }
            for need in needs_of(job) {
                if !jobs.contains_key(&need) {
                    bail!("workflow {file}, job {id}: needs `{need}`, which is not a job of this workflow");
                }
            }
        }
        // Topological order, stable on the file's order.
        let mut order: Vec<String> = Vec::new();
        while order.len() < jobs.len() {
            let next = jobs.iter().find(|(id, job)| {
                !order.contains(id)
                    && needs_of(job.as_object().expect("checked"))
                        .iter()
                        .all(|n| order.contains(n))
            });
            match next {
                Some((id, _)) => order.push(id.clone()),
                None => bail!("workflow {file}: the jobs' `needs` form a cycle"),
            }
        }
        let inputs = doc
            .get("on")
            .and_then(|on| on.get("workflow_dispatch"))
            .and_then(|d| d.get("inputs"))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        Ok(Workflow {
            file,
            doc,
            order,
            inputs,
        })
    }

    fn job(&self, id: &str) -> &Map<String, Value> {
        self.doc["jobs"][id].as_object().expect("checked at load")
    }

    fn triggers(&self) -> Vec<String> {
        match self.doc.get("on") {
            Some(Value::Object(m)) => m.keys().cloned().collect(),
            on => names(on),
        }
    }
}

fn needs_of(job: &Map<String, Value>) -> Vec<String> {
    names(job.get("needs"))
}

/// A key that takes one name or a list of them (`needs: a`, `needs: [a, b]`).
fn names(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// A scalar YAML value as the text GitHub sees (`true`, `15`, `a string`).
fn scalar_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => expr::to_string(other),
    }
}

// ---------------------------------------------------------------------------------------------
// Expression scope
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy)]
enum StatusMode {
    /// A job `if:`: from the results of the needed jobs.
    Job { success: bool, failure: bool },
    /// A step `if:` (and everything after the job started): from the job's status.
    Step { failed: bool, cancelled: bool },
    /// Places where status functions are not allowed.
    None,
}

/// What an expression sees at one place in the workflow.
struct Ctx<'a> {
    contexts: Map<String, Value>,
    place: &'static str,
    step_ids: Option<&'a [String]>,
    need_ids: &'a [String],
    need_outputs: &'a BTreeMap<String, BTreeSet<String>>,
    inputs_declared: &'a Map<String, Value>,
    /// Who declares the inputs (`the workflow`, or an action), for messages.
    inputs_owner: &'a str,
    status: StatusMode,
    workspace: Option<&'a Path>,
    /// False after the job failed: an output a step did not get to write reads as empty.
    strict_outputs: bool,
}

impl expr::Scope for Ctx<'_> {
    fn context(&self, name: &str) -> Result<Value, String> {
        self.contexts.get(name).cloned().ok_or_else(|| {
            format!(
                "the `{name}` context is not available in {} (or does not exist)",
                self.place
            )
        })
    }

    fn check_path(&self, path: &[String], found: bool) -> Result<(), String> {
        let p: Vec<&str> = path.iter().map(String::as_str).collect();
        match p.as_slice() {
            ["steps", id] => {
                let ids = self.step_ids.unwrap_or(&[]);
                if !ids.iter().any(|s| s.eq_ignore_ascii_case(id)) {
                    return Err(format!(
                        "`steps.{id}`: no step of this job has id `{id}` (ids: {})",
                        ids.join(", ")
                    ));
                }
                if !found {
                    return Err(format!(
                        "`steps.{id}`: step `{id}` has not run yet at this point"
                    ));
                }
            }
            ["steps", id, field] if !["outputs", "outcome", "conclusion"].contains(field) => {
                return Err(format!(
                    "`steps.{id}.{field}`: a step has outputs, outcome and conclusion only"
                ));
            }
            ["steps", id, "outputs", name] if !found => {
                let step = self.contexts["steps"]
                    .as_object()
                    .and_then(|steps| steps.iter().find(|(k, _)| k.eq_ignore_ascii_case(id)))
                    .map(|(_, v)| v)
                    .unwrap_or(&Value::Null);
                if self.strict_outputs && step["outcome"] == "success" {
                    let written: Vec<&String> = step["outputs"]
                        .as_object()
                        .map(|o| o.keys().collect())
                        .unwrap_or_default();
                    return Err(format!(
                        "`steps.{id}.outputs.{name}`: step `{id}` ran and never wrote output `{name}` (it wrote: {written:?})"
                    ));
                }
            }
            ["needs", id] if !self.need_ids.iter().any(|n| n.eq_ignore_ascii_case(id)) => {
                return Err(format!(
                    "`needs.{id}`: this job does not need `{id}` (needs: {})",
                    self.need_ids.join(", ")
                ));
            }
            ["needs", id, field] if !["outputs", "result"].contains(field) => {
                return Err(format!(
                    "`needs.{id}.{field}`: a needed job has outputs and result only"
                ));
            }
            ["needs", id, "outputs", name] => {
                let declared = self
                    .need_outputs
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(id))
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default();
                if !declared.iter().any(|d| d.eq_ignore_ascii_case(name)) {
                    return Err(format!("`needs.{id}.outputs.{name}`: job `{id}` declares no output `{name}` (outputs: {declared:?})"));
                }
            }
            ["matrix", key] if !found => {
                let keys: Vec<&String> = self
                    .contexts
                    .get("matrix")
                    .and_then(Value::as_object)
                    .map(|m| m.keys().collect())
                    .unwrap_or_default();
                return Err(format!(
                    "`matrix.{key}`: this matrix leg has no key `{key}` (keys: {keys:?})"
                ));
            }
            ["inputs", name]
                if !self
                    .inputs_declared
                    .keys()
                    .any(|k| k.eq_ignore_ascii_case(name)) =>
            {
                return Err(format!(
                    "`inputs.{name}`: {} declares no input `{name}` (inputs: {:?})",
                    self.inputs_owner,
                    self.inputs_declared.keys().collect::<Vec<_>>()
                ));
            }
            ["github" | "runner" | "job" | "strategy", key] if !found => {
                return Err(format!(
                    "`{}.{key}`: no such property in the replay's `{}` context",
                    p[0], p[0]
                ));
            }
            _ => {}
        }
        Ok(())
    }

    fn status(&self, function: &str) -> Result<bool, String> {
        Ok(match (self.status, function) {
            (_, "always") => true,
            (StatusMode::None, f) => {
                return Err(format!("{f}() is not available in {}", self.place))
            }
            (StatusMode::Job { success, .. }, "success") => success,
            (StatusMode::Job { failure, .. }, "failure") => failure,
            (StatusMode::Job { .. }, _) => false,
            (StatusMode::Step { failed, cancelled }, "success") => !failed && !cancelled,
            (StatusMode::Step { failed, .. }, "failure") => failed,
            (StatusMode::Step { cancelled, .. }, _) => cancelled,
        })
    }

    /// actions/runner v2.336.0, src/Misc/expressionFunc/hashFiles/src/hashFiles.ts: the
    /// sha256 of the matched files' sha256s, in match order, files outside the workspace left
    /// out, and `''` when nothing matched.
    fn hash_files(&self, patterns: &[String]) -> Result<String, String> {
        let workspace = self
            .workspace
            .ok_or_else(|| format!("hashFiles() is not available in {}", self.place))?;
        let matched = glob::expand(workspace, &patterns.join("\n"), true);
        let mut total = Sha256::new();
        let mut any = false;
        for file in matched.files.iter().filter(|f| f.starts_with(workspace)) {
            let bytes =
                std::fs::read(file).map_err(|e| format!("hashFiles: {}: {e}", file.display()))?;
            total.update(Sha256::digest(&bytes));
            any = true;
        }
        Ok(if any {
            hex::encode(total.finalize())
        } else {
            String::new()
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Running
// ---------------------------------------------------------------------------------------------

/// Runs every job of the workflow once (attempt 1).
pub fn run_workflow(replay: Replay) -> Result<WorkflowRun> {
    let workflow = Workflow::load(&replay.workflow)?;
    let triggers = workflow.triggers();
    if !triggers.contains(&replay.event_name) {
        bail!(
            "workflow {}: is not triggered by `{}` (on: {triggers:?})",
            workflow.file,
            replay.event_name
        );
    }
    check_event_payload(&replay)?;
    let run_id = 1_000_000_000
        + std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros() as u64 % 1_000_000_000)
            .unwrap_or(0);
    let mut run = WorkflowRun {
        replay,
        run_id,
        run_attempt: 1,
        jobs: Vec::new(),
        history: Vec::new(),
        workflow,
    };
    let all: BTreeSet<String> = run.workflow.order.iter().cloned().collect();
    run_attempt(&mut run, &all, &BTreeSet::new())?;
    Ok(run)
}

/// GitHub's "Re-run failed jobs": the same run id with the next attempt number; failed and
/// cancelled jobs (failed matrix legs only) and every job that depends on them run again,
/// successful jobs keep their results and outputs, and the run's artifacts stay (GitHub's
/// documentation, "Re-running workflows and jobs"; done by GitHub's service, not the runner).
pub fn rerun_failed(run: &mut WorkflowRun) -> Result<()> {
    let mut jobs: BTreeSet<String> = BTreeSet::new();
    let mut failed_legs: BTreeSet<(String, usize)> = BTreeSet::new();
    for id in &run.workflow.order {
        let legs = run.legs(id);
        for (i, leg) in legs.iter().enumerate() {
            if matches!(leg.status, Status::Failure | Status::Cancelled) {
                failed_legs.insert((id.clone(), i));
                jobs.insert(id.clone());
            }
        }
    }
    if jobs.is_empty() {
        bail!(
            "workflow {}: run {} has no failed job to re-run",
            run.workflow.file,
            run.run_id
        );
    }
    // Dependents, transitively, re-run whole.
    let mut dependents = BTreeSet::new();
    for id in &run.workflow.order {
        let needs = needs_of(run.workflow.job(id));
        if needs
            .iter()
            .any(|n| jobs.contains(n) || dependents.contains(n))
        {
            dependents.insert(id.clone());
        }
    }
    run.run_attempt += 1;
    let mut whole = dependents;
    // A failed job that is not a matrix re-runs whole, too.
    for id in &jobs {
        if run.workflow.job(id).get("strategy").is_none() {
            whole.insert(id.clone());
        }
    }
    run_attempt(run, &whole, &failed_legs)
}

fn run_attempt(
    run: &mut WorkflowRun,
    whole: &BTreeSet<String>,
    legs: &BTreeSet<(String, usize)>,
) -> Result<()> {
    let order = run.workflow.order.clone();
    for job_id in &order {
        let rerun_legs: BTreeSet<usize> = legs
            .iter()
            .filter(|(j, _)| j == job_id)
            .map(|(_, i)| *i)
            .collect();
        if !whole.contains(job_id) && rerun_legs.is_empty() {
            continue;
        }
        let previous: Vec<JobRun> = run.legs(job_id).into_iter().cloned().collect();
        let results = run_job(
            run,
            job_id,
            if whole.contains(job_id) {
                None
            } else {
                Some((&previous, &rerun_legs))
            },
        )?;
        // Legs kept from an earlier attempt are already in the history.
        let attempt = run.run_attempt;
        run.history
            .extend(results.iter().filter(|r| r.attempt == attempt).cloned());
        let first = run
            .jobs
            .iter()
            .position(|j| &j.job_id == job_id)
            .unwrap_or(run.jobs.len());
        run.jobs.retain(|j| &j.job_id != job_id);
        let at = first.min(run.jobs.len());
        run.jobs.splice(at..at, results);
    }
    Ok(())
}

/// Everything a job needs to know about the jobs it needs.
struct NeedsView {
    ids: Vec<String>,
    context: Map<String, Value>,
    declared: BTreeMap<String, BTreeSet<String>>,
    all_succeeded: bool,
    any_ancestor_failed: bool,
}

fn needs_view(run: &WorkflowRun, job_id: &str) -> NeedsView {
    let ids = needs_of(run.workflow.job(job_id));
    let mut context = Map::new();
    let mut declared = BTreeMap::new();
    let mut all_succeeded = true;
    for id in &ids {
        let legs = run.legs(id);
        let result = aggregate(&legs);
        all_succeeded &= result == Status::Success;
        let mut outputs = Map::new();
        for leg in &legs {
            for (k, v) in &leg.outputs {
                if !v.is_empty() || !outputs.contains_key(k) {
                    outputs.insert(k.clone(), Value::String(v.clone()));
                }
            }
        }
        let names: BTreeSet<String> = run
            .workflow
            .job(id)
            .get("outputs")
            .and_then(Value::as_object)
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default();
        for name in &names {
            outputs
                .entry(name.clone())
                .or_insert(Value::String(String::new()));
        }
        declared.insert(id.clone(), names);
        context.insert(
            id.clone(),
            json!({ "result": result.as_str(), "outputs": outputs }),
        );
    }
    // failure(): any ancestor failed.
    let mut stack = ids.clone();
    let mut seen = BTreeSet::new();
    let mut any_ancestor_failed = false;
    while let Some(id) = stack.pop() {
        if seen.insert(id.clone()) {
            any_ancestor_failed |= matches!(aggregate(&run.legs(&id)), Status::Failure);
            stack.extend(needs_of(run.workflow.job(&id)));
        }
    }
    NeedsView {
        ids,
        context,
        declared,
        all_succeeded,
        any_ancestor_failed,
    }
}

fn github_context(
    run: &WorkflowRun,
    job_id: &str,
    token: &str,
    workspace: Option<&Path>,
    sha: &str,
) -> Value {
    let r = &run.replay;
    let ref_name = r
        .git_ref
        .rsplit('/')
        .next()
        .unwrap_or(&r.git_ref)
        .to_owned();
    json!({
        "event_name": r.event_name,
        "event": event_payload(run),
        "ref": r.git_ref,
        "ref_name": ref_name,
        "ref_type": if r.git_ref.starts_with("refs/tags/") { "tag" } else { "branch" },
        "sha": sha,
        "repository": r.repository,
        "repository_owner": r.repository.split('/').next().unwrap_or_default(),
        "run_id": run.run_id.to_string(),
        "run_number": "1",
        "run_attempt": run.run_attempt.to_string(),
        "actor": r.actor,
        "triggering_actor": r.actor,
        "token": token,
        "workflow": run.workflow.doc.get("name").and_then(Value::as_str).unwrap_or(&run.workflow.file),
        "workflow_ref": format!("{}/.github/workflows/{}@{}", r.repository, run.workflow.file, r.git_ref),
        "job": job_id,
        "server_url": "https://github.com",
        "api_url": "https://api.github.com",
        "graphql_url": "https://api.github.com/graphql",
        "base_ref": "",
        "head_ref": "",
        "action": "",
        "workspace": workspace.map(|w| w.display().to_string()).unwrap_or_default(),
        "retention_days": "90",
    })
}

/// The event payload (`github.event`, `$GITHUB_EVENT_PATH`) as GitHub sends it for the event:
///
/// - `schedule`: only `schedule` (the cron expression) and `workflow` (the workflow file).
///   GitHub's "Events that trigger workflows" lists the webhook payload of `schedule` as "Not
///   applicable"; what the runner writes has no `repository` and no `sender` (the payload
///   `{"schedule": "* * * * *"}` is quoted in peter-evans/create-pull-request#30; `workflow`
///   was added per GitHub changelog 2022-09-27; projects that read `repository` from it broke:
///   github/codeql-action#1211, docker/metadata-action#184, ossf/scorecard-action#73 and #106,
///   letsencrypt/boulder#6209). A `schedule` payload given to the replay may hold only those
///   two keys ([`check_event_payload`]).
/// - `workflow_dispatch`: `inputs` (every declared input, as a string: GitHub keeps
///   `github.event.inputs` untyped), `ref`, `repository` (with `default_branch` and
///   `visibility`), `sender`, `workflow` (GitHub's webhook events documentation,
///   "workflow_dispatch").
/// - other events: the replay's payload with the `repository` and `sender` GitHub adds.
fn event_payload(run: &WorkflowRun) -> Value {
    let r = &run.replay;
    let mut payload = r.event.clone();
    let Value::Object(map) = &mut payload else {
        return payload;
    };
    let workflow_path = format!(".github/workflows/{}", run.workflow.file);
    let owner = r.repository.split('/').next().unwrap_or_default();
    let repository = json!({
        "full_name": r.repository,
        "name": r.repository.split('/').nth(1).unwrap_or_default(),
        "owner": { "login": owner },
        "default_branch": r.default_branch,
        "visibility": "public",
    });
    match r.event_name.as_str() {
        "schedule" => {
            let cron = run
                .workflow
                .doc
                .get("on")
                .and_then(|on| on.get("schedule"))
                .and_then(Value::as_array)
                .and_then(|s| s.first())
                .and_then(|s| s.get("cron"))
                .cloned()
                .unwrap_or(Value::Null);
            map.entry("schedule").or_insert(cron);
            map.entry("workflow").or_insert(json!(workflow_path));
        }
        "workflow_dispatch" => {
            if let Ok(inputs) = inputs_context(run) {
                let strings: Map<String, Value> = inputs
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::String(expr::to_string(v))))
                    .collect();
                map.insert("inputs".into(), Value::Object(strings));
            }
            map.entry("ref").or_insert(json!(r.git_ref));
            map.entry("repository").or_insert(repository);
            map.entry("sender").or_insert(json!({ "login": r.actor }));
            map.entry("workflow").or_insert(json!(workflow_path));
        }
        _ => {
            map.entry("repository").or_insert(repository);
            map.entry("sender").or_insert(json!({ "login": r.actor }));
        }
    }
    payload
}

/// Refuses a payload GitHub would never send for the event: a `schedule` payload with anything
/// beyond `schedule` and `workflow` (in particular a `repository`, see [`event_payload`]).
fn check_event_payload(replay: &Replay) -> Result<()> {
    if replay.event_name == "schedule" {
        if let Some(map) = replay.event.as_object() {
            let extra: Vec<&String> = map
                .keys()
                .filter(|k| !["schedule", "workflow"].contains(&k.as_str()))
                .collect();
            if !extra.is_empty() {
                bail!(
                    "a `schedule` payload holds only `schedule` and `workflow` on GitHub \
                     (no repository, no sender); this one also has {extra:?}"
                );
            }
        }
    }
    Ok(())
}

/// The typed `inputs` context: declared workflow_dispatch inputs with their defaults, booleans
/// as booleans; empty for other events.
fn inputs_context(run: &WorkflowRun) -> Result<Map<String, Value>> {
    let wf = &run.workflow;
    let mut out = Map::new();
    if run.replay.event_name != "workflow_dispatch" {
        return Ok(out);
    }
    let given = run
        .replay
        .event
        .get("inputs")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for name in given.keys() {
        if !wf.inputs.contains_key(name) {
            bail!("workflow {}: the dispatch gives input `{name}`, which the workflow does not declare", wf.file);
        }
    }
    for (name, decl) in &wf.inputs {
        let kind = decl.get("type").and_then(Value::as_str).unwrap_or("string");
        let raw = given.get(name).or_else(|| decl.get("default")).cloned();
        if raw.is_none() && decl.get("required").and_then(Value::as_bool) == Some(true) {
            bail!(
                "workflow {}: required input `{name}` was not given",
                wf.file
            );
        }
        let value = match (kind, raw) {
            ("boolean", None) => Value::Bool(false),
            ("boolean", Some(Value::Bool(b))) => Value::Bool(b),
            ("boolean", Some(Value::String(s))) if s == "true" || s == "false" => {
                Value::Bool(s == "true")
            }
            ("boolean", Some(other)) => bail!(
                "workflow {}: input `{name}` is a boolean, got {other}",
                wf.file
            ),
            ("number", Some(v)) => {
                let n: f64 = scalar_text(&v).parse().map_err(|_| {
                    anyhow!("workflow {}: input `{name}` is a number, got {v}", wf.file)
                })?;
                json!(n)
            }
            ("choice", Some(v)) => {
                let options: Vec<String> = decl
                    .get("options")
                    .and_then(Value::as_array)
                    .map(|o| o.iter().map(scalar_text).collect())
                    .unwrap_or_default();
                let s = scalar_text(&v);
                if !options.contains(&s) {
                    bail!(
                        "workflow {}: input `{name}` must be one of {options:?}, got {s:?}",
                        wf.file
                    );
                }
                Value::String(s)
            }
            (_, Some(v)) => Value::String(scalar_text(&v)),
            (_, None) => Value::String(String::new()),
        };
        out.insert(name.clone(), value);
    }
    Ok(out)
}

/// The job's token permissions: the job's `permissions:`, else the workflow's, else the
/// restricted default of a new repository (GitHub's documentation, "Controlling permissions
/// for GITHUB_TOKEN"). The scopes are actions/runner v2.336.0's
/// (src/Sdk/WorkflowParser/Permissions.cs) less `artifact-metadata`, `repository-projects` and
/// `vulnerability-alerts`, which no committed workflow names: a workflow that does stops here
/// ("invalid permission") until the engine learns them, with a test.
fn permissions_of(run: &WorkflowRun, job: &Map<String, Value>) -> Result<BTreeMap<String, String>> {
    const SCOPES: &[&str] = &[
        "actions",
        "attestations",
        "checks",
        "contents",
        "deployments",
        "discussions",
        "id-token",
        "issues",
        "models",
        "packages",
        "pages",
        "pull-requests",
        "security-events",
        "statuses",
    ];
    let spec = job
        .get("permissions")
        .or_else(|| run.workflow.doc.get("permissions"));
    let mut out = BTreeMap::new();
    match spec {
        // GitHub's restricted default for new repositories.
        None => {
            out.insert("contents".into(), "read".into());
            out.insert("packages".into(), "read".into());
        }
        Some(Value::String(s)) if s == "read-all" || s == "write-all" => {
            for scope in SCOPES {
                out.insert((*scope).into(), s.trim_end_matches("-all").into());
            }
        }
        Some(Value::Object(map)) => {
            for (scope, level) in map {
                let level = scalar_text(level);
                if !SCOPES.contains(&scope.as_str())
                    || !["read", "write", "none"].contains(&level.as_str())
                {
                    bail!(
                        "workflow {}: invalid permission `{scope}: {level}`",
                        run.workflow.file
                    );
                }
                out.insert(scope.clone(), level);
            }
        }
        Some(other) => bail!(
            "workflow {}: invalid permissions {other}",
            run.workflow.file
        ),
    }
    Ok(out)
}

/// The token string the gh stand-in reads permissions from.
fn token_for(permissions: &BTreeMap<String, String>) -> String {
    let mut t = String::from("replay");
    for (scope, level) in permissions {
        t += &format!(".{scope}={level}");
    }
    t
}

struct JobEnv<'a> {
    run: &'a WorkflowRun,
    job_id: &'a str,
    needs: NeedsView,
    inputs: Map<String, Value>,
    github: Value,
}

impl JobEnv<'_> {
    fn ctx<'s>(
        &'s self,
        place: &'static str,
        names: &[&str],
        extra: Vec<(&str, Value)>,
        status: StatusMode,
    ) -> Ctx<'s> {
        let mut contexts = Map::new();
        for name in names {
            let v = match *name {
                "github" => self.github.clone(),
                "inputs" => Value::Object(self.inputs.clone()),
                "needs" => Value::Object(self.needs.context.clone()),
                "vars" => json!(self.run.replay.vars),
                _ => continue,
            };
            contexts.insert((*name).into(), v);
        }
        for (name, v) in extra {
            contexts.insert(name.into(), v);
        }
        Ctx {
            contexts,
            place,
            step_ids: None,
            need_ids: &self.needs.ids,
            need_outputs: &self.needs.declared,
            inputs_declared: &self.run.workflow.inputs,
            inputs_owner: "the workflow",
            status,
            workspace: None,
            strict_outputs: true,
        }
    }
}

fn where_(run: &WorkflowRun, job: &str) -> String {
    format!("workflow {}, job {job}", run.workflow.file)
}

/// Runs one job: its `if`, its matrix legs, its outputs. `partial` = re-run only these legs
/// and keep the others from `previous`.
fn run_job(
    run: &WorkflowRun,
    job_id: &str,
    partial: Option<(&Vec<JobRun>, &BTreeSet<usize>)>,
) -> Result<Vec<JobRun>> {
    let job = run.workflow.job(job_id);
    let here = where_(run, job_id);
    let needs = needs_view(run, job_id);
    let inputs = inputs_context(run)?;
    let sha = resolve_sha(&run.replay)?;
    let permissions = permissions_of(run, job)?;
    let token = token_for(&permissions);
    let github = github_context(run, job_id, &token, None, &sha);
    let env = JobEnv {
        run,
        job_id,
        needs,
        inputs,
        github,
    };

    let skipped = |name: String| JobRun {
        job_id: job_id.into(),
        name,
        matrix: None,
        attempt: run.run_attempt,
        status: Status::Skipped,
        outcome: Status::Skipped,
        outputs: BTreeMap::new(),
        steps: Vec::new(),
        runs_on: job.get("runs-on").cloned().unwrap_or(Value::Null),
        permissions: permissions.clone(),
        environment: None,
        summary: String::new(),
        error: None,
        dir: PathBuf::new(),
        workspace: PathBuf::new(),
        elapsed: Duration::ZERO,
    };

    // The job's `if` (default success()).
    let status = StatusMode::Job {
        success: env.needs.all_succeeded,
        failure: env.needs.any_ancestor_failed,
    };
    let cond = job
        .get("if")
        .map(scalar_text)
        .unwrap_or_else(|| "success()".into());
    let ctx = env.ctx(
        "a job `if:`",
        &["github", "needs", "vars", "inputs"],
        vec![],
        status,
    );
    let go = expr::condition(&cond, &ctx).map_err(|e| anyhow!("{here}: `if: {cond}`: {e}"))?;
    if !go {
        let name = job
            .get("name")
            .map(scalar_text)
            .unwrap_or_else(|| job_id.into());
        return Ok(vec![skipped(name)]);
    }

    // The matrix.
    let strategy = job
        .get("strategy")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let ctx = env.ctx(
        "`strategy:`",
        &["github", "needs", "vars", "inputs"],
        vec![],
        StatusMode::None,
    );
    let legs = match strategy.get("matrix") {
        None => vec![None],
        Some(m) => expand_matrix(
            &eval_value(m, &ctx).map_err(|e| anyhow!("{here}: strategy.matrix: {e}"))?,
        )
        .map_err(|e| anyhow!("{here}: strategy.matrix: {e}"))?
        .into_iter()
        .map(Some)
        .collect(),
    };
    let fail_fast = strategy
        .get("fail-fast")
        .map(|v| expr::truthy(&eval_value(v, &ctx).unwrap_or(Value::Bool(true))))
        .unwrap_or(true);

    let mut results = Vec::new();
    let mut leg_failed = false;
    for (index, matrix) in legs.iter().enumerate() {
        if let Some((previous, rerun)) = partial {
            if !rerun.contains(&index) {
                results.push(
                    previous
                        .get(index)
                        .cloned()
                        .ok_or_else(|| anyhow!("{here}: leg {index} has no previous result"))?,
                );
                continue;
            }
        }
        let strategy_ctx = json!({ "fail-fast": fail_fast, "job-index": index, "job-total": legs.len(), "max-parallel": legs.len() });
        if fail_fast && leg_failed {
            let mut r = skipped(job_id.into());
            r.status = Status::Cancelled;
            r.outcome = Status::Cancelled;
            r.matrix = matrix.clone();
            r.error = Some("cancelled by fail-fast after another leg failed".into());
            results.push(r);
            continue;
        }
        let r = run_leg(
            &env,
            index,
            matrix.clone(),
            strategy_ctx,
            &sha,
            &permissions,
            &token,
        )?;
        // A leg with continue-on-error does not trigger fail-fast.
        leg_failed |= r.status == Status::Failure;
        results.push(r);
    }
    Ok(results)
}

/// GitHub's matrix expansion: the cartesian product of the axes minus `exclude`, then each
/// `include` entry is merged into every combination whose original values it does not change,
/// or added as a combination of its own (GitHub's documentation, "Running variations of jobs
/// in a workflow", "Expanding or adding matrix configurations"; the expansion happens on
/// GitHub's side, not in actions/runner).
fn expand_matrix(m: &Value) -> Result<Vec<Map<String, Value>>, String> {
    let m = m.as_object().ok_or("the matrix is not a mapping")?;
    let mut combos: Vec<Map<String, Value>> = vec![Map::new()];
    let mut axes = Vec::new();
    for (key, values) in m {
        if key == "include" || key == "exclude" {
            continue;
        }
        let values = values
            .as_array()
            .ok_or_else(|| format!("matrix axis `{key}` is not a list"))?;
        axes.push(key.clone());
        combos = combos
            .into_iter()
            .flat_map(|c| {
                values.iter().map(move |v| {
                    let mut c = c.clone();
                    c.insert(key.clone(), v.clone());
                    c
                })
            })
            .collect();
    }
    if axes.is_empty() {
        combos.clear();
    }
    if let Some(ex) = m.get("exclude").and_then(Value::as_array) {
        combos.retain(|c| {
            !ex.iter()
                .filter_map(Value::as_object)
                .any(|e| e.iter().all(|(k, v)| c.get(k) == Some(v)))
        });
    }
    let originals = combos.len();
    for inc in m
        .get("include")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let inc = inc
            .as_object()
            .ok_or("a matrix include entry is not a mapping")?;
        let mut merged = false;
        for c in combos.iter_mut().take(originals) {
            let conflicts = inc
                .iter()
                .any(|(k, v)| axes.contains(k) && c.get(k).is_some_and(|cv| cv != v));
            if !conflicts {
                for (k, v) in inc {
                    c.insert(k.clone(), v.clone());
                }
                merged = true;
            }
        }
        if !merged {
            combos.push(inc.clone());
        }
    }
    if combos.is_empty() {
        return Err("the matrix has no combinations".into());
    }
    Ok(combos)
}

/// Evaluates `${{ }}` in a YAML value: strings are templates, containers recursively.
fn eval_value(v: &Value, ctx: &Ctx) -> Result<Value, String> {
    Ok(match v {
        Value::String(s) => expr::render(s, ctx)?,
        Value::Array(a) => Value::Array(
            a.iter()
                .map(|x| eval_value(x, ctx))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(o) => {
            let mut out = Map::new();
            for (k, x) in o {
                out.insert(k.clone(), eval_value(x, ctx)?);
            }
            Value::Object(out)
        }
        other => other.clone(),
    })
}

fn eval_env(map: Option<&Value>, ctx: &Ctx, into: &mut Map<String, Value>) -> Result<(), String> {
    if let Some(Value::Object(map)) = map {
        for (k, v) in map {
            let s = match v {
                Value::String(t) => expr::render_string(t, ctx)?,
                other => scalar_text(other),
            };
            into.insert(k.clone(), Value::String(s));
        }
    }
    Ok(())
}

fn resolve_sha(r: &Replay) -> Result<String> {
    if let Some(s) = &r.sha {
        return Ok(s.clone());
    }
    let out = Command::new("git")
        .arg("-C")
        .arg(&r.source_repo)
        .args(["rev-parse", "HEAD"])
        .output()?;
    if !out.status.success() {
        bail!(
            "cannot read HEAD of the source repository {}: {}",
            r.source_repo.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// One job leg's live state.
pub(crate) struct Leg<'a> {
    env: &'a JobEnv<'a>,
    here: String,
    dir: PathBuf,
    workspace: PathBuf,
    temp: PathBuf,
    matrix: Value,
    strategy: Value,
    runner_ctx: Value,
    github: Value,
    base_env: Map<String, Value>,
    added_env: Map<String, Value>,
    added_path: Vec<String>,
    step_ids: Vec<String>,
    steps: Vec<StepRun>,
    steps_ctx: Map<String, Value>,
    failed: bool,
    cancelled: bool,
    summary: String,
    deadline: Instant,
    timeout_minutes: f64,
    post: Vec<actions::CacheSave>,
    token: String,
    process_env: BTreeMap<String, String>,
    pgids: Vec<u32>,
    /// The `env:` of the step running (what a composite action's steps inherit).
    step_env: Map<String, Value>,
}

fn run_leg(
    env: &JobEnv,
    index: usize,
    matrix: Option<Map<String, Value>>,
    strategy: Value,
    sha: &str,
    permissions: &BTreeMap<String, String>,
    token: &str,
) -> Result<JobRun> {
    let run = env.run;
    let job = run.workflow.job(env.job_id);
    let matrix_value = Value::Object(matrix.clone().unwrap_or_default());
    let leg_label = match &matrix {
        Some(m) => format!(
            "{} ({})",
            env.job_id,
            m.values()
                .map(expr::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        None => env.job_id.to_owned(),
    };
    let here = where_(run, &leg_label);
    let base_ctx = |place| {
        env.ctx(
            place,
            &["github", "needs", "vars", "inputs"],
            vec![
                ("matrix", matrix_value.clone()),
                ("strategy", strategy.clone()),
            ],
            StatusMode::None,
        )
    };
    let name = match job.get("name") {
        Some(n) => expr::render_string(&scalar_text(n), &base_ctx("a job `name:`"))
            .map_err(|e| anyhow!("{here}: name: {e}"))?,
        None => leg_label.clone(),
    };
    let runs_on = eval_value(
        job.get("runs-on").unwrap_or(&Value::Null),
        &base_ctx("`runs-on:`"),
    )
    .map_err(|e| anyhow!("{here}: runs-on: {e}"))?;
    if runs_on.is_null() || runs_on == "" {
        bail!("{here}: `runs-on` is missing or empty");
    }
    let arch = if expr::to_string(&runs_on).contains("arm") || runs_on.to_string().contains("arm") {
        "ARM64"
    } else {
        "X64"
    };
    let environment = job
        .get("environment")
        .map(|e| eval_value(e, &base_ctx("`environment:`")))
        .transpose()
        .map_err(|e| anyhow!("{here}: environment: {e}"))?;
    let timeout_minutes = match job.get("timeout-minutes") {
        Some(v) => expr::to_string(
            &eval_value(v, &base_ctx("`timeout-minutes:`"))
                .map_err(|e| anyhow!("{here}: timeout-minutes: {e}"))?,
        )
        .parse::<f64>()
        .map_err(|_| anyhow!("{here}: timeout-minutes is not a number"))?,
        None => DEFAULT_JOB_TIMEOUT_MINUTES,
    };

    let continue_on_error = match job.get("continue-on-error") {
        Some(v) => expr::truthy(
            &eval_value(v, &base_ctx("`continue-on-error:`"))
                .map_err(|e| anyhow!("{here}: continue-on-error: {e}"))?,
        ),
        None => false,
    };

    // Directories, all the runner's.
    let dir = run
        .replay
        .root()
        .join(format!("attempt-{}", run.run_attempt))
        .join(format!("{}-{index}", env.job_id));
    // GitHub's workspace path, the same for every job (/home/runner/work/<repo>/<repo>): tools
    // that cache by absolute path (cargo's target directory restored by actions/cache) behave
    // as they do there. Each job starts with it empty, as on a fresh runner, and holds a lock
    // on it while it runs, so replays in parallel threads or processes take turns.
    let repo_name = run.replay.repository.split('/').nth(1).unwrap_or("repo");
    let workspace = Path::new(RUNNER_HOME)
        .join("work")
        .join(repo_name)
        .join(repo_name);
    let _workspace_lock = lock_workspace()?;
    let started = Instant::now();
    if workspace.exists() {
        std::fs::remove_dir_all(&workspace)
            .with_context(|| format!("emptying the workspace {}", workspace.display()))?;
    }
    // A fresh runner has no docker config: GitHub's runner images write none
    // (actions/runner-images), and what one job wrote (a `docker login`) is gone in the next.
    let docker_config = Path::new(RUNNER_HOME).join(".docker");
    if docker_config.exists() {
        std::fs::remove_dir_all(&docker_config)
            .with_context(|| format!("removing {}", docker_config.display()))?;
    }
    let temp = dir.join("temp");
    for d in [&workspace, &temp, &dir.join("files"), &dir.join("logs")] {
        std::fs::create_dir_all(d)?;
    }
    give_to_runner(&dir)?;
    give_to_runner(&Path::new(RUNNER_HOME).join("work"))?;
    let event_path = temp.join("_github_workflow").join("event.json");
    std::fs::create_dir_all(event_path.parent().expect("has a parent"))?;
    std::fs::write(&event_path, serde_json::to_vec_pretty(&event_payload(run))?)?;
    give_to_runner(&temp)?;
    let gh_bin = gh_bin_dir(&run.replay)?;

    let github = github_context(run, env.job_id, token, Some(&workspace), sha);
    let runner_ctx = json!({ "os": "Linux", "arch": arch, "temp": temp, "tool_cache": "/opt/hostedtoolcache", "name": "replay", "environment": "github-hosted", "debug": "" });

    // Workflow env, then job env.
    let mut base_env = Map::new();
    let wf_ctx = {
        let mut c = env.ctx(
            "the workflow's `env:`",
            &["github", "vars", "inputs"],
            vec![("secrets", secrets_ctx(run, token))],
            StatusMode::None,
        );
        c.contexts.insert("github".into(), github.clone());
        c
    };
    eval_env(run.workflow.doc.get("env"), &wf_ctx, &mut base_env)
        .map_err(|e| anyhow!("workflow {}: env: {e}", run.workflow.file))?;
    let job_ctx = {
        let mut c = env.ctx(
            "a job's `env:`",
            &["github", "needs", "vars", "inputs"],
            vec![
                ("matrix", matrix_value.clone()),
                ("strategy", strategy.clone()),
                ("secrets", secrets_ctx(run, token)),
            ],
            StatusMode::None,
        );
        c.contexts.insert("github".into(), github.clone());
        c
    };
    eval_env(job.get("env"), &job_ctx, &mut base_env).map_err(|e| anyhow!("{here}: env: {e}"))?;

    let mut process_env: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in [
        ("HOME", RUNNER_HOME.to_owned()),
        ("USER", RUNNER_USER.to_owned()),
        ("LANG", "C.UTF-8".to_owned()),
        ("CI", "true".to_owned()),
        ("GITHUB_ACTIONS", "true".to_owned()),
        ("GITHUB_WORKSPACE", workspace.display().to_string()),
        ("GITHUB_EVENT_NAME", run.replay.event_name.clone()),
        ("GITHUB_EVENT_PATH", event_path.display().to_string()),
        ("GITHUB_REF", run.replay.git_ref.clone()),
        ("GITHUB_REF_NAME", github["ref_name"].as_str().unwrap_or_default().to_owned()),
        ("GITHUB_REF_TYPE", github["ref_type"].as_str().unwrap_or_default().to_owned()),
        ("GITHUB_SHA", sha.to_owned()),
        ("GITHUB_REPOSITORY", run.replay.repository.clone()),
        ("GITHUB_REPOSITORY_OWNER", github["repository_owner"].as_str().unwrap_or_default().to_owned()),
        ("GITHUB_RUN_ID", run.run_id.to_string()),
        ("GITHUB_RUN_NUMBER", "1".to_owned()),
        ("GITHUB_RUN_ATTEMPT", run.run_attempt.to_string()),
        ("GITHUB_ACTOR", run.replay.actor.clone()),
        ("GITHUB_TRIGGERING_ACTOR", run.replay.actor.clone()),
        ("GITHUB_JOB", env.job_id.to_owned()),
        ("GITHUB_WORKFLOW", github["workflow"].as_str().unwrap_or_default().to_owned()),
        ("GITHUB_SERVER_URL", "https://github.com".to_owned()),
        ("GITHUB_API_URL", "https://api.github.com".to_owned()),
        ("GITHUB_GRAPHQL_URL", "https://api.github.com/graphql".to_owned()),
        ("RUNNER_OS", "Linux".to_owned()),
        ("RUNNER_ARCH", arch.to_owned()),
        ("RUNNER_TEMP", temp.display().to_string()),
        ("RUNNER_NAME", "replay".to_owned()),
        ("RUNNER_ENVIRONMENT", "github-hosted".to_owned()),
        ("RUNNER_TOOL_CACHE", "/opt/hostedtoolcache".to_owned()),
        (
            "PATH",
            format!("{}:{RUNNER_HOME}/.cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", gh_bin.display()),
        ),
    ] {
        process_env.insert(k.into(), v);
    }

    let step_ids: Vec<String> = job["steps"]
        .as_array()
        .expect("checked")
        .iter()
        .filter_map(|s| s.get("id")?.as_str().map(str::to_owned))
        .collect();
    let mut leg = Leg {
        env,
        here: here.clone(),
        dir: dir.clone(),
        workspace: workspace.clone(),
        temp,
        matrix: matrix_value,
        strategy,
        runner_ctx,
        github,
        base_env,
        added_env: Map::new(),
        added_path: Vec::new(),
        step_ids,
        steps: Vec::new(),
        steps_ctx: Map::new(),
        failed: false,
        cancelled: false,
        summary: String::new(),
        deadline: Instant::now() + Duration::from_secs_f64(timeout_minutes * 60.0),
        timeout_minutes,
        post: Vec::new(),
        token: token.to_owned(),
        process_env,
        pgids: Vec::new(),
        step_env: Map::new(),
    };

    let mut error = None;
    for (i, step) in job["steps"].as_array().expect("checked").iter().enumerate() {
        let step = step.as_object().expect("checked");
        leg.run_step(i, step)?;
        if Instant::now() >= leg.deadline && !leg.cancelled {
            // GitHub cancels the job: only `always()`/`cancelled()` steps still run, each
            // within the cancellation timeout.
            leg.cancelled = true;
            leg.failed = true;
            leg.deadline = Instant::now() + CANCEL_TIMEOUT;
            error = Some(format!(
                "the job exceeded its timeout-minutes ({})",
                leg.timeout_minutes
            ));
        }
    }

    // The end of the job: like GitHub's orphan-process clean-up, what the steps left running
    // in the background (servers for later steps) is stopped. Only the runner's processes in
    // the steps' own process groups: a daemon that left its group, or one started with sudo,
    // outlives the job here.
    for pgid in std::mem::take(&mut leg.pgids) {
        let _ = Command::new("pkill")
            .args(["-KILL", "-g", &pgid.to_string(), "-u", RUNNER_USER])
            .status();
    }

    // Post-job: cache saves, in reverse order, only when the job succeeded.
    let saves = std::mem::take(&mut leg.post);
    for save in saves.into_iter().rev() {
        if !leg.failed {
            if let Err(e) = save.save() {
                leg.failed = true;
                error = Some(format!("post-job cache save failed: {e}"));
            }
        }
    }

    // Outputs, evaluated after the job.
    let mut outputs = BTreeMap::new();
    if let Some(Value::Object(decl)) = job.get("outputs") {
        let ctx = leg.ctx("a job's `outputs:`", None, !leg.failed);
        for (k, v) in decl {
            let value = expr::render_string(&scalar_text(v), &ctx)
                .map_err(|e| anyhow!("{here}: outputs.{k}: `{}`: {e}", scalar_text(v)))?;
            outputs.insert(k.clone(), value);
        }
    }

    let outcome = if leg.failed {
        Status::Failure
    } else {
        Status::Success
    };
    Ok(JobRun {
        job_id: env.job_id.into(),
        name,
        matrix,
        attempt: run.run_attempt,
        status: if outcome == Status::Failure && continue_on_error {
            Status::Success
        } else {
            outcome
        },
        outcome,
        outputs,
        steps: leg.steps,
        runs_on,
        permissions: permissions.clone(),
        environment,
        summary: leg.summary,
        error,
        dir,
        workspace,
        elapsed: started.elapsed(),
    })
}

fn secrets_ctx(run: &WorkflowRun, token: &str) -> Value {
    let mut s: Map<String, Value> = run
        .replay
        .secrets
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    s.insert("GITHUB_TOKEN".into(), Value::String(token.into()));
    Value::Object(s)
}

impl Leg<'_> {
    /// The scope of expressions inside the job. `strict_outputs` = false after a failure, when
    /// missing step outputs are expected.
    fn ctx(
        &self,
        place: &'static str,
        env: Option<&Map<String, Value>>,
        strict_outputs: bool,
    ) -> Ctx<'_> {
        let mut env_ctx = self.base_env.clone();
        env_ctx.extend(self.added_env.clone());
        if let Some(e) = env {
            env_ctx.extend(e.clone());
        }
        let job_ctx = json!({ "status": if self.failed { "failure" } else { "success" }, "container": {}, "services": {} });
        let steps_ctx = self.steps_ctx.clone();
        let mut c = self.env.ctx(
            place,
            &["github", "needs", "vars", "inputs"],
            vec![
                ("matrix", self.matrix.clone()),
                ("strategy", self.strategy.clone()),
                ("runner", self.runner_ctx.clone()),
                ("job", job_ctx),
                ("env", Value::Object(env_ctx)),
                ("steps", Value::Object(steps_ctx)),
                ("secrets", secrets_ctx(self.env.run, &self.token)),
            ],
            StatusMode::Step {
                failed: self.failed,
                cancelled: self.cancelled,
            },
        );
        c.contexts.insert("github".into(), self.github.clone());
        c.step_ids = Some(&self.step_ids);
        c.workspace = Some(&self.workspace);
        c.strict_outputs = strict_outputs;
        c
    }

    fn run_step(&mut self, i: usize, step: &Map<String, Value>) -> Result<()> {
        let started = Instant::now();
        let id = step.get("id").and_then(Value::as_str).map(str::to_owned);
        let raw_name = step.get("name").map(scalar_text);
        let label = raw_name
            .clone()
            .or_else(|| id.clone())
            .unwrap_or_else(|| format!("step {}", i + 1));
        let here = format!("{}, step '{label}'", self.here);
        let log = self.dir.join("logs").join(format!("{:02}.log", i + 1));

        // The condition first, as the runner does: it sees the job's env, not the step's own
        // (which is evaluated only for a step that runs).
        let cond = step
            .get("if")
            .map(scalar_text)
            .unwrap_or_else(|| "success()".into());
        let go = {
            let ctx = self.ctx("a step's `if:`", None, true);
            expr::condition(&cond, &ctx).map_err(|e| anyhow!("{here}: `if: {cond}`: {e}"))?
        };
        let mut step_env = Map::new();
        if go {
            let ctx = self.ctx("a step's `env:`", None, true);
            eval_env(step.get("env"), &ctx, &mut step_env)
                .map_err(|e| anyhow!("{here}: env: {e}"))?;
        }
        let ctx = self.ctx("a step", Some(&step_env), true);
        let name = match &raw_name {
            Some(n) => expr::render_string(n, &ctx).map_err(|e| anyhow!("{here}: name: {e}"))?,
            None => step
                .get("run")
                .map(|r| format!("Run {}", scalar_text(r).lines().next().unwrap_or_default()))
                .or_else(|| step.get("uses").map(|u| format!("Run {}", scalar_text(u))))
                .unwrap_or_default(),
        };
        let mut record = StepRun {
            id: id.clone(),
            name,
            outcome: Status::Skipped,
            conclusion: Status::Skipped,
            outputs: BTreeMap::new(),
            log: log.clone(),
            elapsed: Duration::ZERO,
        };
        if !go {
            std::fs::write(&log, format!("##[replay] skipped: `if: {cond}` is false\n"))?;
            return self.finish_step(record);
        }
        let continue_on_error = match step.get("continue-on-error") {
            Some(v) => expr::truthy(
                &eval_value(v, &ctx).map_err(|e| anyhow!("{here}: continue-on-error: {e}"))?,
            ),
            None => false,
        };
        let step_deadline = match step.get("timeout-minutes") {
            Some(v) => {
                let m: f64 = expr::to_string(
                    &eval_value(v, &ctx).map_err(|e| anyhow!("{here}: timeout-minutes: {e}"))?,
                )
                .parse()
                .map_err(|_| anyhow!("{here}: timeout-minutes is not a number"))?;
                self.deadline
                    .min(Instant::now() + Duration::from_secs_f64(m * 60.0))
            }
            None => self.deadline,
        };

        // Per-step command files.
        let files = self.dir.join("files").join(format!("{:02}", i + 1));
        std::fs::create_dir_all(&files)?;
        let file_names = ["output", "env", "path", "summary"];
        for f in file_names {
            std::fs::write(files.join(f), "")?;
        }
        give_to_runner(&files)?;
        let mut penv = self.step_process_env(&step_env, &files);
        penv.insert(
            "GITHUB_ACTION".into(),
            id.clone().unwrap_or_else(|| format!("__run_{}", i + 1)),
        );

        let mut logf = std::fs::File::create(&log)?;
        let end = if let Some(script) = step.get("run") {
            let script = expr::render_string(&scalar_text(script), &ctx)
                .map_err(|e| anyhow!("{here}: run: {e}"))?;
            let shell = step
                .get("shell")
                .map(scalar_text)
                .or_else(|| self.default_run("shell"));
            let wd = step
                .get("working-directory")
                .map(scalar_text)
                .or_else(|| self.default_run("working-directory"));
            let wd = match wd {
                Some(w) => glob::normalize(
                    &self.workspace,
                    &expr::render_string(&w, &ctx)
                        .map_err(|e| anyhow!("{here}: working-directory: {e}"))?,
                ),
                None => self.workspace.clone(),
            };
            if !wd.is_dir() {
                writeln!(logf, "##[error]An error occurred trying to start process: working directory '{}' does not exist", wd.display())?;
                StepEnd::failed()
            } else {
                let stem = format!("step-{:02}-attempt-{}", i + 1, self.env.run.run_attempt);
                let argv =
                    script_for_runner(&self.temp, &stem, &script, shell.as_deref(), &mut logf)
                        .map_err(|e| anyhow!("{here}: {e:#}"))?;
                drop(logf);
                exec_as_runner(&argv, &penv, &wd, &log, step_deadline)?
            }
        } else {
            let uses = scalar_text(&step["uses"]);
            let with = match step.get("with") {
                Some(Value::Object(w)) => {
                    let mut out = BTreeMap::new();
                    for (k, v) in w {
                        let s = match v {
                            Value::String(t) => expr::render_string(t, &ctx)
                                .map_err(|e| anyhow!("{here}: with.{k}: {e}"))?,
                            other => scalar_text(other),
                        };
                        out.insert(k.clone(), s);
                    }
                    out
                }
                None => BTreeMap::new(),
                Some(other) => bail!("{here}: `with:` is not a mapping: {other}"),
            };
            drop(ctx);
            drop(logf);
            self.step_env = step_env.clone();
            actions::run(self, &here, &uses, &with, &penv, &log, step_deadline)?
        };

        // Command files.
        let mut end = end;
        let mut logf = std::fs::OpenOptions::new().append(true).open(&log)?;
        if end.timed_out {
            writeln!(logf, "##[error]The action has timed out.")?;
        }
        let (outputs, files_ok) = composite::apply_command_files(self, &files, &mut logf)?;
        end.outputs.extend(outputs);
        end.ok &= files_ok;

        self.pgids.extend(end.pgid);
        self.mask_secrets(&log)?;
        record.outputs = end.outputs;
        record.outcome = if end.ok {
            Status::Success
        } else {
            Status::Failure
        };
        record.conclusion = if end.ok || continue_on_error {
            Status::Success
        } else {
            Status::Failure
        };
        if record.conclusion == Status::Failure {
            self.failed = true;
        }
        record.elapsed = started.elapsed();
        self.finish_step(record)
    }

    /// A step's process environment: the job's variables, `env:` of the workflow, the job and
    /// `step_env`, what earlier steps added (GITHUB_ENV, GITHUB_PATH), and the command files
    /// in `files`.
    fn step_process_env(
        &self,
        step_env: &Map<String, Value>,
        files: &Path,
    ) -> BTreeMap<String, String> {
        let mut penv = self.process_env.clone();
        for (k, v) in self
            .base_env
            .iter()
            .chain(self.added_env.iter())
            .chain(step_env.iter())
        {
            penv.insert(k.clone(), expr::to_string(v));
        }
        // GitHub's own variables win over env of the same name.
        for (k, v) in &self.process_env {
            if k != "PATH" && (k.starts_with("GITHUB_") || k.starts_with("RUNNER_") || k == "CI") {
                penv.insert(k.clone(), v.clone());
            }
        }
        if !self.added_path.is_empty() && !step_env.contains_key("PATH") {
            let base = penv["PATH"].clone();
            penv.insert(
                "PATH".into(),
                format!(
                    "{}:{base}",
                    self.added_path
                        .iter()
                        .rev()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(":")
                ),
            );
        }
        for (var, file) in [
            ("GITHUB_OUTPUT", "output"),
            ("GITHUB_ENV", "env"),
            ("GITHUB_PATH", "path"),
            ("GITHUB_STEP_SUMMARY", "summary"),
        ] {
            penv.insert(var.into(), files.join(file).display().to_string());
        }
        penv
    }

    /// GitHub masks the token and secrets in logs.
    fn mask_secrets(&self, log: &Path) -> Result<()> {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let mut masked = text.clone();
        let secrets = self.env.run.replay.secrets.values();
        for secret in std::iter::once(&self.token).chain(secrets) {
            if !secret.is_empty() {
                masked = masked.replace(secret.as_str(), "***");
            }
        }
        if masked != text {
            std::fs::write(log, masked)?;
        }
        Ok(())
    }

    fn finish_step(&mut self, record: StepRun) -> Result<()> {
        if let Some(id) = &record.id {
            self.steps_ctx.insert(
                id.clone(),
                json!({ "outputs": record.outputs, "outcome": record.outcome.as_str(), "conclusion": record.conclusion.as_str() }),
            );
        }
        self.steps.push(record);
        Ok(())
    }

    fn default_run(&self, key: &str) -> Option<String> {
        let job = self.env.run.workflow.job(self.env.job_id);
        job.get("defaults")
            .and_then(|d| d.get("run"))
            .and_then(|r| r.get(key))
            .or_else(|| {
                self.env
                    .run
                    .workflow
                    .doc
                    .get("defaults")
                    .and_then(|d| d.get("run"))
                    .and_then(|r| r.get(key))
            })
            .map(scalar_text)
    }
}

/// How a step ended.
pub(crate) struct StepEnd {
    pub ok: bool,
    pub timed_out: bool,
    /// The process group the step ran in (for the end-of-job clean-up).
    pub pgid: Option<u32>,
    pub outputs: BTreeMap<String, String>,
}

impl StepEnd {
    pub fn ok() -> StepEnd {
        StepEnd {
            ok: true,
            timed_out: false,
            outputs: BTreeMap::new(),
            pgid: None,
        }
    }
    pub fn failed() -> StepEnd {
        StepEnd {
            ok: false,
            timed_out: false,
            outputs: BTreeMap::new(),
            pgid: None,
        }
    }
}

/// The command line GitHub runs a script with, and the script's file extension.
/// Writes a `run:` script where the runner can run it (`dir/<stem><ext>`), logs it as GitHub
/// does (the script, then the shell line; the output follows) and returns the shell's argv.
/// Workflow and composite steps alike.
fn script_for_runner(
    dir: &Path,
    stem: &str,
    script: &str,
    shell: Option<&str>,
    logf: &mut std::fs::File,
) -> Result<Vec<String>> {
    let (argv, ext) = shell_command(shell).map_err(|e| anyhow!(e))?;
    let script_path = dir.join(format!("{stem}{ext}"));
    std::fs::write(&script_path, script)?;
    give_to_runner(&script_path)?;
    let argv: Vec<String> = argv
        .iter()
        .map(|a| a.replace("{0}", &script_path.display().to_string()))
        .collect();
    for line in script.lines() {
        writeln!(logf, "##[replay] {line}")?;
    }
    writeln!(logf, "##[replay] shell: {}", argv.join(" "))?;
    Ok(argv)
}

/// The shells as actions/runner v2.336.0 runs a `run:` step on Linux
/// (src/Runner.Worker/Handlers/ScriptHandlerHelpers.cs, `_defaultArguments` and `_extensions`;
/// ScriptHandler.cs: no `shell` runs bash, found on PATH, with `sh`'s `-e {0}`).
fn shell_command(shell: Option<&str>) -> Result<(Vec<String>, &'static str), String> {
    let words = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    Ok(match shell {
        None => (words("bash -e {0}"), ".sh"),
        Some("bash") => (words("bash --noprofile --norc -eo pipefail {0}"), ".sh"),
        Some("sh") => (words("sh -e {0}"), ".sh"),
        Some("python") => (words("python3 {0}"), ".py"),
        Some(custom) if custom.contains("{0}") => (words(custom), ""),
        Some(other) => {
            return Err(format!(
                "shell `{other}` is not supported (bash, sh, python, or a command with {{0}})"
            ))
        }
    })
}

/// `GITHUB_OUTPUT`/`GITHUB_ENV`: `name=value` lines and `name<<DELIMITER` blocks, as
/// actions/runner v2.336.0 reads them (src/Runner.Worker/FileCommandManager.cs,
/// `EnvFileKeyValuePairs`: whichever of `=` and `<<` comes first decides; a block without its
/// delimiter line is "Matching delimiter not found").
pub fn parse_command_file(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim().is_empty() {
            continue;
        }
        let eq = line.find('=');
        let heredoc = line.find("<<");
        match (eq, heredoc) {
            (Some(e), h) if h.is_none_or(|h| e < h) => {
                let name = &line[..e];
                if name.is_empty() {
                    return Err(format!("empty name in `{line}`"));
                }
                out.push((name.to_owned(), line[e + 1..].to_owned()));
            }
            (_, Some(h)) => {
                let name = &line[..h];
                let delim = &line[h + 2..];
                if name.is_empty() || delim.is_empty() {
                    return Err(format!("invalid `{line}`"));
                }
                let mut value = Vec::new();
                loop {
                    match lines.next() {
                        Some(l) if l == delim => break,
                        Some(l) => value.push(l),
                        None => return Err(format!("matching delimiter not found '{delim}'")),
                    }
                }
                out.push((name.to_owned(), value.join("\n")));
            }
            _ => return Err(format!("invalid format `{line}`")),
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// The runner user
// ---------------------------------------------------------------------------------------------

/// The runner user's uid and gid.
pub fn runner_ids() -> Result<(u32, u32)> {
    static IDS: OnceLock<Option<(u32, u32)>> = OnceLock::new();
    let ids = IDS.get_or_init(|| {
        let id = |flag: &str| -> Option<u32> {
            let out = Command::new("id").args([flag, RUNNER_USER]).output().ok()?;
            String::from_utf8_lossy(&out.stdout).trim().parse().ok()
        };
        Some((id("-u")?, id("-g")?))
    });
    ids.ok_or_else(|| anyhow!("user `{RUNNER_USER}` does not exist: run `bash scripts/setup-runner-user.sh` as root first"))
}

fn set_mode(path: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("chmod {}", path.display()))
}

/// An exclusive lock on the runner's workspace, released when the returned file is dropped.
pub fn lock_workspace() -> Result<std::fs::File> {
    use std::os::fd::AsRawFd as _;
    let dir = Path::new(RUNNER_HOME).join("work");
    std::fs::create_dir_all(&dir)?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(".replay-lock"))
        .with_context(|| format!("opening {}/.replay-lock", dir.display()))?;
    // SAFETY: flock on a descriptor this function owns; no memory is shared.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
        bail!(
            "cannot lock {}/.replay-lock: {}",
            dir.display(),
            std::io::Error::last_os_error()
        );
    }
    Ok(file)
}

/// Hands a file or a tree to the runner user (what it would have created itself on GitHub).
pub(crate) fn give_to_runner(path: &Path) -> Result<()> {
    let (uid, gid) = runner_ids()?;
    std::os::unix::fs::lchown(path, Some(uid), Some(gid))
        .with_context(|| format!("chown {}", path.display()))?;
    let meta = std::fs::symlink_metadata(path)?;
    if meta.is_dir() {
        for entry in std::fs::read_dir(path)? {
            give_to_runner(&entry?.path())?;
        }
    }
    Ok(())
}

/// Writes the gh stand-in for this replay (state dir and repository baked in).
/// The directory first on the runner's PATH: the gh stand-in (state dir and repository baked
/// in) and the test's fake tools.
fn gh_bin_dir(r: &Replay) -> Result<PathBuf> {
    let bin = r.root().join("bin");
    std::fs::create_dir_all(&bin)?;
    set_mode(&bin, 0o755)?;
    let foreign = serde_json::to_string(&gh_state::foreign_states(r)?)?;
    let gh = include_str!("gh.py")
        .replace("@STATE@", &r.gh_state_dir().display().to_string())
        .replace("@REPOSITORY@", &r.repository)
        .replace("@FOREIGN@", &foreign);
    let mut tools = BTreeMap::from([("gh".to_owned(), gh)]);
    tools.extend(r.tools.clone());
    for (name, script) in tools {
        let path = bin.join(&name);
        std::fs::write(&path, script).with_context(|| format!("writing {}", path.display()))?;
        set_mode(&path, 0o755)?;
    }
    Ok(bin)
}

/// Runs `argv` as the runner user with exactly `env`, in `cwd`, output (both streams) to
/// `log`, killed with its whole process group at `deadline`.
pub(crate) fn exec_as_runner(
    argv: &[String],
    env: &BTreeMap<String, String>,
    cwd: &Path,
    log: &Path,
    deadline: Instant,
) -> Result<StepEnd> {
    use std::os::unix::fs::MetadataExt as _;
    let (uid, gid) = runner_ids()?;
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    // As root (here): switch to the runner. Already the runner (on a GitHub-hosted runner,
    // where CI runs these tests): run as is.
    let mut command = if std::fs::metadata("/proc/self")?.uid() == uid {
        Command::new(&argv[0])
    } else {
        let mut c = Command::new("setpriv");
        c.arg(format!("--reuid={uid}"))
            .arg(format!("--regid={gid}"))
            .arg("--init-groups")
            .arg("--")
            .arg(&argv[0]);
        c
    };
    let mut child = command
        .args(&argv[1..])
        .env_clear()
        .envs(env)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .process_group(0)
        .spawn()
        .with_context(|| format!("starting {argv:?} as {RUNNER_USER}"))?;
    loop {
        if let Some(status) = child.try_wait()? {
            let mut end = if status.success() {
                StepEnd::ok()
            } else {
                StepEnd::failed()
            };
            if !status.success() {
                let mut f = std::fs::OpenOptions::new().append(true).open(log)?;
                writeln!(
                    f,
                    "##[error]Process completed with exit code {}.",
                    status.code().unwrap_or(-1)
                )?;
            }
            end.pgid = Some(child.id());
            return Ok(end);
        }
        if Instant::now() >= deadline {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
            return Ok(StepEnd {
                ok: false,
                timed_out: true,
                outputs: BTreeMap::new(),
                pgid: None,
            });
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod standalone_tests;
