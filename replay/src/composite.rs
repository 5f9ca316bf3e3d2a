//! Composite actions (`runs.using: composite`) from a repository registered with
//! [`Replay::action_source`](super::Replay::action_source), run step by step inside the
//! calling step the way GitHub's runner does:
//!
//! - the action is `<dir>/action.yml` (or `.yaml`) at the `@ref` of the local repository, its
//!   directory exported for the runner as `github.action_path` / `GITHUB_ACTION_PATH`;
//! - `with:` keys the action does not declare are errors (GitHub only warns: a typo then
//!   silently uses the default), as is a `required` input with neither value nor default (GitHub
//!   passes an empty string); defaults are expressions evaluated in the caller's job;
//! - the `inputs` context holds the action's inputs as strings; no `INPUT_<NAME>` variables
//!   (GitHub sets those for JavaScript and Docker actions only);
//! - every `run` step needs `shell` (GitHub rejects the action without it); the steps see the
//!   contexts GitHub's action schema allows them (github, inputs, steps, runner, env, job,
//!   strategy, matrix: no secrets, vars or needs);
//! - each step has its own GITHUB_OUTPUT; its outputs go to the action's `steps` context, and
//!   the action's `outputs.<x>.value` become the calling step's outputs;
//! - GITHUB_ENV and GITHUB_PATH reach the following steps, inside and after the action;
//! - a failing step (without continue-on-error) fails the calling step; `if:` status functions
//!   (and `github.action_status`) look at the action's steps;
//! - a `uses:` step runs like a workflow's (emulated action, stand-in, or another registered
//!   composite action).
//!
//! Read from actions/runner v2.336.0: src/Runner.Worker/ActionManifestManager.cs and
//! action_yaml.json (the action file, its inputs and defaults, the contexts each key may use),
//! ActionRunner.cs (undeclared inputs: "Unexpected input(s)", a warning there, an error here)
//! and Handlers/CompositeActionHandler.cs (the steps, `GITHUB_ACTION_PATH`, outputs, status).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{anyhow, bail, Context as _, Result};
use serde_json::{json, Map, Value};

use crate::leg::{parse_command_file, script_for_runner, Leg, StepEnd};
use crate::run::{eval_env, eval_value};
use crate::runner::{exec_as_runner, give_to_runner};
use crate::scope::{Ctx, StatusMode};
use crate::workflow::{only_known_keys, scalar_text};
use crate::{expr, glob};

const ACTION_KEYS: &[&str] = &[
    "name",
    "description",
    "author",
    "inputs",
    "outputs",
    "runs",
    "branding",
];
const INPUT_KEYS: &[&str] = &["description", "required", "default", "deprecationMessage"];
const OUTPUT_KEYS: &[&str] = &["description", "value"];
const RUNS_KEYS: &[&str] = &["using", "steps"];
const STEP_KEYS: &[&str] = &[
    "id",
    "if",
    "name",
    "run",
    "shell",
    "env",
    "working-directory",
    "continue-on-error",
    "uses",
    "with",
];
/// What expressions in an action may use besides `steps`/`inputs`/`env` (GitHub's action
/// schema): the caller's job-level contexts.
const CALLER_CONTEXTS: &[&str] = &["github", "strategy", "matrix", "job", "runner"];

/// An action loaded from its repository.
struct Action {
    /// `owner/name`.
    repository: String,
    git_ref: String,
    /// The exported action directory (`github.action_path`).
    path: PathBuf,
    /// `<dir>/action.yml` at the ref, for messages.
    file: String,
    inputs: Map<String, Value>,
    outputs: Map<String, Value>,
    steps: Vec<Map<String, Value>>,
}

fn git(repo: &Path, args: &[&str]) -> Result<std::process::Output> {
    Command::new("git")
        .args(["-c", "safe.directory=*", "-C"])
        .arg(repo)
        .args(args)
        .output()
        .with_context(|| format!("running git {args:?} in {}", repo.display()))
}

/// Loads, validates and exports `uses` (`owner/name[/dir]@ref`) from `source`.
fn load(leg: &Leg, here: &str, uses: &str, source: &Path) -> Result<Action> {
    let (path, git_ref) = uses
        .rsplit_once('@')
        .ok_or_else(|| anyhow!("{here}: `uses: {uses}` has no @ref"))?;
    let mut parts = path.splitn(3, '/');
    let repository = format!(
        "{}/{}",
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default()
    );
    let dir = parts.next().unwrap_or("").trim_matches('/').to_owned();
    let out = git(
        source,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{git_ref}^{{commit}}"),
        ],
    )?;
    if !out.status.success() {
        bail!(
            "{here}: `uses: {uses}`: `{git_ref}` is not a commit or branch of {} (the local source registered for {repository})",
            source.display()
        );
    }
    let commit = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let in_dir = |f: &str| {
        if dir.is_empty() {
            f.to_owned()
        } else {
            format!("{dir}/{f}")
        }
    };
    let (file, text) = ["action.yml", "action.yaml"]
        .iter()
        .find_map(|f| {
            let out = git(source, &["show", &format!("{commit}:{}", in_dir(f))]).ok()?;
            out.status
                .success()
                .then(|| (in_dir(f), String::from_utf8_lossy(&out.stdout).into_owned()))
        })
        .ok_or_else(|| {
            anyhow!(
                "{here}: `uses: {uses}`: {} has no {} or {} at {git_ref}",
                source.display(),
                in_dir("action.yml"),
                in_dir("action.yaml")
            )
        })?;
    let place = format!("action {repository}/{file}@{git_ref}");
    let doc: Value =
        yaml_serde::from_str(&text).with_context(|| format!("{here}: {place}: invalid YAML"))?;
    let Value::Object(doc) = doc else {
        bail!("{here}: {place}: not a mapping")
    };
    only_known_keys(&doc, ACTION_KEYS, &format!("{here}: {place}: top-level"))?;
    let mapping = |key: &str| -> Result<Map<String, Value>> {
        match doc.get(key) {
            None | Some(Value::Null) => Ok(Map::new()),
            Some(Value::Object(m)) => Ok(m.clone()),
            Some(other) => bail!("{here}: {place}: `{key}` is not a mapping: {other}"),
        }
    };
    let inputs = mapping("inputs")?;
    for (name, decl) in &inputs {
        if let Some(decl) = decl.as_object() {
            only_known_keys(
                decl,
                INPUT_KEYS,
                &format!("{here}: {place}: inputs.{name}:"),
            )?;
        }
    }
    let outputs = mapping("outputs")?;
    for (name, decl) in &outputs {
        let decl = decl
            .as_object()
            .ok_or_else(|| anyhow!("{here}: {place}: outputs.{name} is not a mapping"))?;
        only_known_keys(
            decl,
            OUTPUT_KEYS,
            &format!("{here}: {place}: outputs.{name}:"),
        )?;
        if !decl.contains_key("value") {
            bail!("{here}: {place}: outputs.{name} has no `value` (a composite action's outputs need one)");
        }
    }
    let runs = mapping("runs")?;
    let using = runs.get("using").map(scalar_text).unwrap_or_default();
    if using != "composite" {
        bail!("{here}: {place}: runs.using is `{using}`; the replay harness runs composite actions only");
    }
    only_known_keys(&runs, RUNS_KEYS, &format!("{here}: {place}: runs:"))?;
    let steps: Vec<Map<String, Value>> = runs
        .get("steps")
        .and_then(Value::as_array)
        .ok_or_else(|| anyhow!("{here}: {place}: runs.steps is missing or not a list"))?
        .iter()
        .enumerate()
        .map(|(i, s)| {
            s.as_object()
                .cloned()
                .ok_or_else(|| anyhow!("{here}: {place}: step {} is not a mapping", i + 1))
        })
        .collect::<Result<_>>()?;
    let mut ids = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let at = format!("{here}: {place}: step {}:", i + 1);
        only_known_keys(step, STEP_KEYS, &at)?;
        if step.contains_key("run") == step.contains_key("uses") {
            bail!("{at} a step has exactly one of `run` and `uses`");
        }
        if step.contains_key("uses") {
            if let Some(key) = ["shell", "run", "working-directory"]
                .iter()
                .find(|k| step.contains_key(**k))
            {
                bail!("{at} a `uses` step cannot have `{key}`");
            }
        } else if !step.contains_key("shell") {
            bail!("{at} a `run` step of a composite action needs `shell` (GitHub rejects the action without it)");
        }
        if let Some(id) = step.get("id").map(scalar_text) {
            if ids.contains(&id) {
                bail!("{at} step id {id} is used twice");
            }
            ids.push(id);
        }
    }

    // The action's repository at the commit, as GitHub downloads it, for the runner.
    let store = leg.env.run.replay.root().join("actions");
    let export = store.join(format!("{}@{commit}", repository.replace('/', "+")));
    if !export.exists() {
        std::fs::create_dir_all(&export)?;
        let mut archive = Command::new("git")
            .args(["-c", "safe.directory=*", "-C"])
            .arg(source)
            .args(["archive", "--format=tar", &commit])
            .stdout(Stdio::piped())
            .spawn()
            .context("running git archive")?;
        let status = Command::new("tar")
            .arg("-x")
            .arg("-C")
            .arg(&export)
            .stdin(archive.stdout.take().expect("piped"))
            .status()
            .context("running tar")?;
        if !archive.wait()?.success() || !status.success() {
            bail!("{here}: exporting {commit} of {} failed", source.display());
        }
        give_to_runner(&store)?;
    }
    Ok(Action {
        repository,
        git_ref: git_ref.to_owned(),
        path: export.join(&dir),
        file,
        inputs,
        outputs,
        steps,
    })
}

/// The contexts of an expression inside the action: the leg's, minus what the action schema
/// leaves out, plus the action's own `inputs`/`steps` and `github.action_*`.
fn action_ctx<'a>(
    leg: &'a Leg,
    place: &'static str,
    env: &Map<String, Value>,
    github: &Value,
    extra: &[(&str, Value)],
    failed: bool,
    strict_outputs: bool,
) -> Ctx<'a> {
    let mut c = leg.ctx(place, Some(env), strict_outputs);
    c.contexts
        .retain(|name, _| CALLER_CONTEXTS.contains(&name.as_str()) || name == "env");
    c.contexts.insert("github".into(), github.clone());
    for (name, value) in extra {
        c.contexts.insert((*name).into(), value.clone());
    }
    c.status = StatusMode::Step {
        failed,
        cancelled: leg.cancelled,
    };
    c
}

/// What a step of the action does, once its expressions are evaluated.
enum Work {
    Skip,
    Run(String),
    Uses(String, BTreeMap<String, String>),
}

/// The scope of a composite step's expressions.
fn step_ctx<'a>(
    leg: &'a Leg,
    action: &'a Action,
    step_ids: &'a [String],
    env: &Map<String, Value>,
    github: &Value,
    extra: &[(&str, Value)],
    failed: bool,
) -> Ctx<'a> {
    let mut ctx = action_ctx(
        leg,
        "a composite action's step",
        env,
        github,
        extra,
        failed,
        true,
    );
    ctx.step_ids = Some(step_ids);
    ctx.inputs_declared = &action.inputs;
    ctx.inputs_owner = "the action";
    ctx
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    leg: &mut Leg,
    here: &str,
    uses: &str,
    source: &Path,
    with: &BTreeMap<String, String>,
    caller_env: &BTreeMap<String, String>,
    log: &Path,
    deadline: Instant,
) -> Result<StepEnd> {
    let action = load(leg, here, uses, source)?;
    let here = format!("{here} (action {}/{})", action.repository, action.file);
    let mut logf = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    writeln!(logf, "##[replay] {uses} with {with:?}")?;

    let mut github = leg.github.clone();
    github["action_status"] = json!("success");
    github["action_path"] = json!(action.path.display().to_string());
    github["action_repository"] = json!(action.repository);
    github["action_ref"] = json!(action.git_ref);
    let step_env = leg.step_env.clone();

    // Inputs: given, or the default evaluated in the caller's job, as strings.
    for key in with.keys() {
        if !action.inputs.keys().any(|k| k.eq_ignore_ascii_case(key)) {
            bail!(
                "{here}: `with.{key}`: the action declares no input `{key}` (inputs: {:?})",
                action.inputs.keys().collect::<Vec<_>>()
            );
        }
    }
    let mut inputs = Map::new();
    for (name, decl) in &action.inputs {
        let given = with.iter().find(|(k, _)| k.eq_ignore_ascii_case(name));
        let value = match (given, decl.get("default")) {
            (Some((_, v)), _) => {
                if let Some(msg) = decl.get("deprecationMessage") {
                    writeln!(
                        logf,
                        "##[warning]Input '{name}' has been deprecated with message: {}",
                        scalar_text(msg)
                    )?;
                }
                v.clone()
            }
            (None, Some(default)) => {
                let mut ctx = action_ctx(
                    leg,
                    "an action input's `default:`",
                    &step_env,
                    &github,
                    &[],
                    false,
                    true,
                );
                ctx.contexts.remove("env");
                ctx.status = StatusMode::None;
                expr::to_string(
                    &eval_value(default, &ctx)
                        .map_err(|e| anyhow!("{here}: inputs.{name}.default: {e}"))?,
                )
            }
            (None, None) => {
                if decl.get("required").map(expr::truthy) == Some(true) {
                    bail!("{here}: required input `{name}` has no value and no default");
                }
                String::new()
            }
        };
        inputs.insert(name.clone(), Value::String(value));
    }
    let inputs = Value::Object(inputs);

    let step_ids: Vec<String> = action
        .steps
        .iter()
        .filter_map(|s| s.get("id").map(scalar_text))
        .collect();
    // Unique per call: a nested action's steps get files of their own.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = format!(
        "{:02}-c{}",
        leg.steps.len() + 1,
        CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let mut steps_ctx = Map::new();
    let mut failed = false;
    let mut timed_out = false;
    let mut cpu = std::time::Duration::ZERO;
    for (k, step) in action.steps.iter().enumerate() {
        let id = step.get("id").map(scalar_text);
        let label = step
            .get("name")
            .map(scalar_text)
            .or_else(|| id.clone())
            .unwrap_or_else(|| format!("step {}", k + 1));
        let at = format!("{here}, step '{label}'");
        let extra = [
            ("inputs", inputs.clone()),
            ("steps", Value::Object(steps_ctx.clone())),
        ];
        let cond = step
            .get("if")
            .map(scalar_text)
            .unwrap_or_else(|| "success()".into());
        github["action_status"] = json!(if failed { "failure" } else { "success" });
        let ctx = step_ctx(leg, &action, &step_ids, &step_env, &github, &extra, failed);
        let go = expr::condition(&cond, &ctx).map_err(|e| anyhow!("{at}: `if: {cond}`: {e}"))?;
        let mut env = step_env.clone();
        let mut work = Work::Skip;
        let mut wd = leg.workspace.clone();
        let mut continue_on_error = false;
        if go {
            eval_env(step.get("env"), &ctx, &mut env).map_err(|e| anyhow!("{at}: env: {e}"))?;
            let ctx = step_ctx(leg, &action, &step_ids, &env, &github, &extra, failed);
            work = match (step.get("run"), step.get("uses")) {
                (Some(run), _) => Work::Run(
                    expr::render_string(&scalar_text(run), &ctx)
                        .map_err(|e| anyhow!("{at}: run: {e}"))?,
                ),
                (None, Some(nested)) => {
                    let mut with = BTreeMap::new();
                    if let Some(Value::Object(w)) = step.get("with") {
                        for (key, v) in w {
                            let v = expr::to_string(
                                &eval_value(v, &ctx)
                                    .map_err(|e| anyhow!("{at}: with.{key}: {e}"))?,
                            );
                            with.insert(key.clone(), v);
                        }
                    }
                    Work::Uses(scalar_text(nested), with)
                }
                (None, None) => unreachable!("checked at load"),
            };
            if let Some(w) = step.get("working-directory") {
                let w = expr::render_string(&scalar_text(w), &ctx)
                    .map_err(|e| anyhow!("{at}: working-directory: {e}"))?;
                wd = glob::normalize(&leg.workspace, &w);
            }
            if let Some(v) = step.get("continue-on-error") {
                continue_on_error = expr::truthy(
                    &eval_value(v, &ctx).map_err(|e| anyhow!("{at}: continue-on-error: {e}"))?,
                );
            }
        }
        drop(ctx);
        writeln!(logf, "##[group]{uses} step {}: {label}", k + 1)?;
        if !go {
            writeln!(logf, "##[replay] skipped: `if: {cond}` is false")?;
            if let Some(id) = &id {
                steps_ctx.insert(
                    id.clone(),
                    json!({ "outputs": {}, "outcome": "skipped", "conclusion": "skipped" }),
                );
            }
            continue;
        }
        let mut nested_outputs = BTreeMap::new();
        let files = leg.dir.join("files").join(format!("{call}-{:02}", k + 1));
        std::fs::create_dir_all(&files)?;
        for f in ["output", "env", "path", "summary"] {
            std::fs::write(files.join(f), "")?;
        }
        give_to_runner(&files)?;
        let mut penv = leg.step_process_env(&env, &files);
        // The caller's GITHUB_ACTION and anything else the runner set for its step.
        for (key, v) in caller_env {
            if key == "GITHUB_ACTION" {
                penv.insert(key.clone(), v.clone());
            }
        }
        penv.insert(
            "GITHUB_ACTION_PATH".into(),
            action.path.display().to_string(),
        );
        penv.insert("GITHUB_ACTION_REPOSITORY".into(), action.repository.clone());
        penv.insert("GITHUB_ACTION_REF".into(), action.git_ref.clone());

        let shell = step.get("shell").map(scalar_text);
        let ok = if let Work::Uses(nested, with) = &work {
            logf.flush()?;
            // A nested composite inherits this step's env.
            let caller_step_env = std::mem::replace(&mut leg.step_env, env.clone());
            let end = super::actions::run(leg, &at, nested, with, &penv, log, deadline);
            leg.step_env = caller_step_env;
            let end = end?;
            leg.pgids.extend(end.pgid);
            cpu += end.cpu;
            if end.timed_out {
                writeln!(logf, "##[error]The action has timed out.")?;
                timed_out = true;
            }
            nested_outputs = end.outputs;
            end.ok
        } else if !wd.is_dir() {
            writeln!(logf, "##[error]An error occurred trying to start process: working directory '{}' does not exist", wd.display())?;
            false
        } else {
            let Work::Run(script) = &work else {
                unreachable!("a step that runs has work")
            };
            let stem = format!(
                "step-{call}-{:02}-attempt-{}",
                k + 1,
                leg.env.run.run_attempt
            );
            let argv = script_for_runner(&leg.temp, &stem, script, shell.as_deref(), &mut logf)
                .map_err(|e| anyhow!("{at}: {e:#}"))?;
            logf.flush()?;
            let end = exec_as_runner(&argv, &penv, &wd, log, deadline)?;
            leg.pgids.extend(end.pgid);
            cpu += end.cpu;
            if end.timed_out {
                writeln!(logf, "##[error]The action has timed out.")?;
                timed_out = true;
            }
            end.ok
        };
        let (mut outputs, files_ok) = apply_command_files(leg, &files, &mut logf)?;
        outputs.extend(std::mem::take(&mut nested_outputs));
        let ok = ok && files_ok;
        writeln!(logf, "##[endgroup]")?;
        let outcome = if ok { "success" } else { "failure" };
        let conclusion = if ok || continue_on_error {
            "success"
        } else {
            "failure"
        };
        failed |= conclusion == "failure";
        if let Some(id) = &id {
            steps_ctx.insert(
                id.clone(),
                json!({ "outputs": outputs, "outcome": outcome, "conclusion": conclusion }),
            );
        }
        if timed_out {
            break;
        }
    }

    // The action's outputs, over its steps.
    let mut outputs = BTreeMap::new();
    {
        let extra = [
            ("inputs", inputs.clone()),
            ("steps", Value::Object(steps_ctx)),
        ];
        let mut ctx = action_ctx(
            leg,
            "an action's `outputs:`",
            &step_env,
            &github,
            &extra,
            failed,
            !failed,
        );
        ctx.step_ids = Some(&step_ids);
        ctx.inputs_declared = &action.inputs;
        ctx.inputs_owner = "the action";
        ctx.status = StatusMode::None;
        for (name, decl) in &action.outputs {
            let src = scalar_text(&decl["value"]);
            let value = expr::render_string(&src, &ctx)
                .map_err(|e| anyhow!("{here}: outputs.{name}.value `{src}`: {e}"))?;
            outputs.insert(name.clone(), value);
        }
    }
    Ok(StepEnd {
        ok: !failed,
        timed_out,
        outputs,
        cpu,
        ..StepEnd::ok()
    })
}

/// Reads a step's command files (a workflow step's or a composite step's): its outputs;
/// GITHUB_ENV, GITHUB_PATH and the summary go to the job (the following steps, inside and
/// after an action). False when a file is malformed (the step fails, as on GitHub).
pub(super) fn apply_command_files(
    leg: &mut Leg,
    files: &Path,
    logf: &mut std::fs::File,
) -> Result<(BTreeMap<String, String>, bool)> {
    let mut ok = true;
    let mut outputs = BTreeMap::new();
    match parse_command_file(&std::fs::read_to_string(files.join("output"))?) {
        Ok(pairs) => outputs.extend(pairs),
        Err(e) => {
            writeln!(
                logf,
                "##[error]Unable to process file command 'output' successfully: {e}"
            )?;
            ok = false;
        }
    }
    match parse_command_file(&std::fs::read_to_string(files.join("env"))?) {
        Ok(pairs) => {
            for (k, v) in pairs {
                leg.added_env.insert(k, Value::String(v));
            }
        }
        Err(e) => {
            writeln!(
                logf,
                "##[error]Unable to process file command 'env' successfully: {e}"
            )?;
            ok = false;
        }
    }
    for line in std::fs::read_to_string(files.join("path"))?
        .lines()
        .filter(|l| !l.trim().is_empty())
    {
        leg.added_path.push(line.trim().to_owned());
    }
    leg.summary += &std::fs::read_to_string(files.join("summary"))?;
    Ok((outputs, ok))
}

/// A git repository on `main` holding `files` (`.sh` files executable) in one commit, as
/// [`crate::Replay::action_source`] reads one: for tests that replay a composite action from a
/// repository of their own. Returns it and the commit id.
pub fn committed_repo(files: &[(&str, &str)]) -> (tempfile::TempDir, String) {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    for (path, content) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, content).unwrap();
        if path.ends_with(".sh") {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    git(&["init", "--quiet", "--initial-branch=main"]);
    git(&["add", "."]);
    git(&["commit", "--quiet", "-m", "action"]);
    let commit = git(&["rev-parse", "HEAD"]);
    (dir, commit)
}
