//! One job leg on the runner: its directories, environment and timeout, each step (`run:` as
//! the runner user, or an action), command files, outputs, the post-job phase.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _, Result};
use serde_json::{json, Map, Value};

use crate::results::{JobRun, Status, StepRun, WorkflowRun};
use crate::run::{eval_env, eval_value, event_payload, github_context, where_, JobEnv};
use crate::runner::{exec_as_runner, gh_bin_dir, give_to_runner, lock_workspace};
use crate::scope::{Ctx, StatusMode};
use crate::workflow::scalar_text;
use crate::{actions, composite, expr, glob};
use crate::{CANCEL_TIMEOUT, DEFAULT_JOB_TIMEOUT_MINUTES, RUNNER_HOME, RUNNER_USER};

/// One job leg's live state.
pub(crate) struct Leg<'a> {
    pub(crate) env: &'a JobEnv<'a>,
    pub(crate) here: String,
    pub(crate) dir: PathBuf,
    pub(crate) workspace: PathBuf,
    pub(crate) temp: PathBuf,
    pub(crate) matrix: Value,
    pub(crate) strategy: Value,
    pub(crate) runner_ctx: Value,
    pub(crate) github: Value,
    pub(crate) base_env: Map<String, Value>,
    pub(crate) added_env: Map<String, Value>,
    pub(crate) added_path: Vec<String>,
    pub(crate) step_ids: Vec<String>,
    pub(crate) steps: Vec<StepRun>,
    pub(crate) steps_ctx: Map<String, Value>,
    pub(crate) failed: bool,
    pub(crate) cancelled: bool,
    pub(crate) summary: String,
    pub(crate) deadline: Instant,
    pub(crate) timeout_minutes: f64,
    pub(crate) post: Vec<actions::CacheSave>,
    pub(crate) token: String,
    pub(crate) process_env: BTreeMap<String, String>,
    pub(crate) pgids: Vec<u32>,
    /// The `env:` of the step running (what a composite action's steps inherit).
    pub(crate) step_env: Map<String, Value>,
}

pub(crate) fn run_leg(
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

pub(crate) fn secrets_ctx(run: &WorkflowRun, token: &str) -> Value {
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
    pub(crate) fn ctx(
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

    pub(crate) fn run_step(&mut self, i: usize, step: &Map<String, Value>) -> Result<()> {
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
            cpu: Duration::ZERO,
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
        record.cpu = end.cpu;
        self.finish_step(record)
    }

    /// A step's process environment: the job's variables, `env:` of the workflow, the job and
    /// `step_env`, what earlier steps added (GITHUB_ENV, GITHUB_PATH), and the command files
    /// in `files`.
    pub(crate) fn step_process_env(
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
    pub(crate) fn mask_secrets(&self, log: &Path) -> Result<()> {
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

    pub(crate) fn finish_step(&mut self, record: StepRun) -> Result<()> {
        if let Some(id) = &record.id {
            self.steps_ctx.insert(
                id.clone(),
                json!({ "outputs": record.outputs, "outcome": record.outcome.as_str(), "conclusion": record.conclusion.as_str() }),
            );
        }
        self.steps.push(record);
        Ok(())
    }

    pub(crate) fn default_run(&self, key: &str) -> Option<String> {
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
    /// The CPU time (user and system) of the step's processes, the ones they waited for
    /// included; zero for what the harness does itself (the emulated actions).
    pub cpu: Duration,
}

impl StepEnd {
    pub fn ok() -> StepEnd {
        StepEnd {
            ok: true,
            timed_out: false,
            outputs: BTreeMap::new(),
            pgid: None,
            cpu: Duration::ZERO,
        }
    }
    pub fn failed() -> StepEnd {
        StepEnd {
            ok: false,
            ..StepEnd::ok()
        }
    }
}

/// The command line GitHub runs a script with, and the script's file extension.
/// Writes a `run:` script where the runner can run it (`dir/<stem><ext>`), logs it as GitHub
/// does (the script, then the shell line; the output follows) and returns the shell's argv.
/// Workflow and composite steps alike.
pub(crate) fn script_for_runner(
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
pub(crate) fn shell_command(shell: Option<&str>) -> Result<(Vec<String>, &'static str), String> {
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
