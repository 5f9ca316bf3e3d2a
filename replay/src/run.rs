//! Running a workflow: attempts and "Re-run failed jobs", jobs in order with their `needs`,
//! `if:` and matrix, the `github` context and event payload, inputs, permissions and token.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use serde_json::{json, Map, Value};

use crate::config::Replay;
use crate::expr;
use crate::leg::run_leg;
use crate::results::{aggregate, JobRun, Status, WorkflowRun};
use crate::runner::{own_home_dir, own_runner_home, seen_from_outside, side_by_side_possible};
use crate::scope::{Ctx, StatusMode};
use crate::workflow::{needs_of, scalar_text, Workflow};

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

/// GitHub's "Re-run this job" on one job of a finished run: the same run id with the next
/// attempt number; that job (every leg of a matrix) and every job that depends on it,
/// transitively, run again whatever their earlier outcome; the others keep their results and
/// outputs, and the run's artifacts stay (GitHub's documentation, "Re-running workflows and
/// jobs", "Re-running a specific job in a workflow": "a new workflow run will start for the job
/// and any dependents"; go-gitea/gitea#29983 implements the same rule "just like GitHub does").
pub fn rerun_job(run: &mut WorkflowRun, job: &str) -> Result<()> {
    if !run.workflow.order.iter().any(|id| id == job) {
        bail!("workflow {}: has no job {job}", run.workflow.file);
    }
    let mut whole: BTreeSet<String> = BTreeSet::from([job.to_string()]);
    for id in &run.workflow.order {
        if needs_of(run.workflow.job(id))
            .iter()
            .any(|n| whole.contains(n))
        {
            whole.insert(id.clone());
        }
    }
    run.run_attempt += 1;
    run_attempt(run, &whole, &BTreeSet::new())
}

pub(crate) fn run_attempt(
    run: &mut WorkflowRun,
    whole: &BTreeSet<String>,
    legs: &BTreeSet<(String, usize)>,
) -> Result<()> {
    let mut pending: Vec<String> = run
        .workflow
        .order
        .iter()
        .filter(|id| whole.contains(*id) || legs.iter().any(|(j, _)| j == *id))
        .cloned()
        .collect();
    while !pending.is_empty() {
        // Every job whose needs have ended (or are not part of this attempt) starts now, as
        // GitHub starts them: side by side, each on a machine of its own.
        let wave: Vec<String> = pending
            .iter()
            .filter(|id| {
                needs_of(run.workflow.job(id))
                    .iter()
                    .all(|n| !pending.contains(n))
            })
            .cloned()
            .collect();
        pending.retain(|id| !wave.contains(id));
        let this_attempt = |run: &WorkflowRun, job_id: &str| -> Result<Vec<JobRun>> {
            let rerun_legs: BTreeSet<usize> = legs
                .iter()
                .filter(|(j, _)| j == job_id)
                .map(|(_, i)| *i)
                .collect();
            let previous: Vec<JobRun> = run.legs(job_id).into_iter().cloned().collect();
            run_job(
                run,
                job_id,
                if whole.contains(job_id) {
                    None
                } else {
                    Some((&previous, &rerun_legs))
                },
            )
        };
        let ended: Vec<(String, Vec<JobRun>)> = if wave.len() > 1 && side_by_side_possible() {
            let shared: &WorkflowRun = run;
            std::thread::scope(|scope| {
                let started: Vec<_> = wave
                    .iter()
                    .map(|job_id| {
                        let home = own_home_dir(shared, &format!("{job_id}-home"));
                        scope.spawn(move || -> Result<(String, Vec<JobRun>)> {
                            own_runner_home(&home)?;
                            let mut results = this_attempt(shared, job_id)?;
                            for r in &mut results {
                                r.workspace = seen_from_outside(&home, &r.workspace);
                            }
                            Ok((job_id.clone(), results))
                        })
                    })
                    .collect();
                started
                    .into_iter()
                    .map(|t| t.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                    .collect::<Result<Vec<_>>>()
            })?
        } else {
            wave.iter()
                .map(|job_id| Ok((job_id.clone(), this_attempt(run, job_id)?)))
                .collect::<Result<Vec<_>>>()?
        };
        for (job_id, results) in ended {
            // Legs kept from an earlier attempt are already in the history.
            let attempt = run.run_attempt;
            run.history
                .extend(results.iter().filter(|r| r.attempt == attempt).cloned());
            let first = run
                .jobs
                .iter()
                .position(|j| j.job_id == job_id)
                .unwrap_or(run.jobs.len());
            run.jobs.retain(|j| j.job_id != job_id);
            let at = first.min(run.jobs.len());
            run.jobs.splice(at..at, results);
        }
    }
    Ok(())
}

/// Everything a job needs to know about the jobs it needs.
pub(crate) struct NeedsView {
    pub(crate) ids: Vec<String>,
    pub(crate) context: Map<String, Value>,
    pub(crate) declared: BTreeMap<String, BTreeSet<String>>,
    pub(crate) all_succeeded: bool,
    pub(crate) any_ancestor_failed: bool,
}

pub(crate) fn needs_view(run: &WorkflowRun, job_id: &str) -> NeedsView {
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

pub(crate) fn github_context(
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
///   was added per GitHub's changelog entry "additional information available in github event
///   payload for scheduled workflow runs"; projects that read `repository` from it broke:
///   github/codeql-action#1211, docker/metadata-action#184, ossf/scorecard-action#73 and #106,
///   letsencrypt/boulder#6209). A `schedule` payload given to the replay may hold only those
///   two keys ([`check_event_payload`]).
/// - `workflow_dispatch`: `inputs` (every declared input, as a string: GitHub keeps
///   `github.event.inputs` untyped), `ref`, `repository` (with `default_branch` and
///   `visibility`), `sender`, `workflow` (GitHub's webhook events documentation,
///   "workflow_dispatch").
/// - other events: the replay's payload with the `repository` and `sender` GitHub adds.
pub(crate) fn event_payload(run: &WorkflowRun) -> Value {
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
pub(crate) fn check_event_payload(replay: &Replay) -> Result<()> {
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
pub(crate) fn inputs_context(run: &WorkflowRun) -> Result<Map<String, Value>> {
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
pub(crate) fn permissions_of(
    run: &WorkflowRun,
    job: &Map<String, Value>,
) -> Result<BTreeMap<String, String>> {
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
pub(crate) fn token_for(permissions: &BTreeMap<String, String>) -> String {
    let mut t = String::from("replay");
    for (scope, level) in permissions {
        t += &format!(".{scope}={level}");
    }
    t
}

pub(crate) struct JobEnv<'a> {
    pub(crate) run: &'a WorkflowRun,
    pub(crate) job_id: &'a str,
    pub(crate) needs: NeedsView,
    pub(crate) inputs: Map<String, Value>,
    pub(crate) github: Value,
}

impl JobEnv<'_> {
    pub(crate) fn ctx<'s>(
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

pub(crate) fn where_(run: &WorkflowRun, job: &str) -> String {
    format!("workflow {}, job {job}", run.workflow.file)
}

/// Runs one job: its `if`, its matrix legs, its outputs. `partial` = re-run only these legs
/// and keep the others from `previous`.
pub(crate) fn run_job(
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

    // Without fail-fast, the legs start together, as on GitHub, each on a machine of its own.
    // With it (the default) they take turns, so that a failure cancels the legs not yet
    // started; GitHub would also cancel the ones running, which the replay does not interrupt.
    let to_run: Vec<usize> = (0..legs.len())
        .filter(|i| partial.is_none_or(|(_, rerun)| rerun.contains(i)))
        .collect();
    let strategy_ctx = |index: usize| json!({ "fail-fast": fail_fast, "job-index": index, "job-total": legs.len(), "max-parallel": legs.len() });
    if !fail_fast && to_run.len() > 1 && side_by_side_possible() {
        let env = &env;
        let (permissions, token, sha) = (&permissions, &token, &sha);
        let mut ran: BTreeMap<usize, JobRun> = std::thread::scope(|scope| {
            let started: Vec<_> = to_run
                .iter()
                .map(|&index| {
                    let home = own_home_dir(run, &format!("{job_id}-{index}-home"));
                    let (matrix, strategy) = (legs[index].clone(), strategy_ctx(index));
                    scope.spawn(move || -> Result<(usize, JobRun)> {
                        own_runner_home(&home)?;
                        let mut r = run_leg(env, index, matrix, strategy, sha, permissions, token)?;
                        r.workspace = seen_from_outside(&home, &r.workspace);
                        Ok((index, r))
                    })
                })
                .collect();
            started
                .into_iter()
                .map(|t| t.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect::<Result<BTreeMap<_, _>>>()
        })?;
        return (0..legs.len())
            .map(|index| match ran.remove(&index) {
                Some(r) => Ok(r),
                None => partial
                    .and_then(|(previous, _)| previous.get(index).cloned())
                    .ok_or_else(|| anyhow!("{here}: leg {index} has no previous result")),
            })
            .collect();
    }
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
            strategy_ctx(index),
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
pub(crate) fn expand_matrix(m: &Value) -> Result<Vec<Map<String, Value>>, String> {
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
pub(crate) fn eval_value(v: &Value, ctx: &Ctx) -> Result<Value, String> {
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

pub(crate) fn eval_env(
    map: Option<&Value>,
    ctx: &Ctx,
    into: &mut Map<String, Value>,
) -> Result<(), String> {
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

pub(crate) fn resolve_sha(r: &Replay) -> Result<String> {
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
