//! Repository invariants of `.github/workflows/`: the GitHub Actions hardening rules every
//! workflow follows, the release workflow's shape, and that every `cargo xtask` command line the
//! workflows run names a subcommand and flags the real binary accepts.
//!
//! Each rule is a function from a parsed workflow (and, where YAML comments matter, its raw text)
//! to the list of its violations; the `rules` module feeds each one a bad snippet and asserts that
//! it complains, so no check here can pass vacuously.

use std::collections::BTreeSet;
use std::path::PathBuf;

use yaml_serde::Value;

use crate::support::checkout_path;
use crate::support::xtask::xtask;

/// The release workflow's file name and its `name:`.
const RELEASE_WORKFLOW: &str = "update-template.yml";
const RELEASE_WORKFLOW_NAME: &str = "Update Coding Agent Template";
const CI_WORKFLOW: &str = "ci.yml";

struct Workflow {
    file: String,
    raw: String,
    doc: Value,
}

fn workflows_dir() -> PathBuf {
    checkout_path(".github/workflows")
}

fn load_workflows() -> Vec<Workflow> {
    let dir = workflows_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("yml" | "yaml")))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let raw = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
            let doc = parse(&raw).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let file = path.file_name().unwrap().to_string_lossy().into_owned();
            Workflow { file, raw, doc }
        })
        .collect()
}

fn parse(raw: &str) -> Result<Value, String> {
    let doc: Value = yaml_serde::from_str(raw).map_err(|e| format!("invalid YAML: {e}"))?;
    if !doc.is_mapping() {
        return Err("a workflow must be a YAML mapping".into());
    }
    Ok(doc)
}

fn release_workflow(all: &[Workflow]) -> &Workflow {
    all.iter()
        .find(|w| w.file == RELEASE_WORKFLOW)
        .unwrap_or_else(|| panic!(".github/workflows/{RELEASE_WORKFLOW} is missing"))
}

/// Runs `rule` on every workflow and fails with every violation at once.
fn assert_all(all: &[Workflow], rule: fn(&Workflow) -> Vec<String>) {
    assert!(!all.is_empty(), "no workflow files found");
    let problems: Vec<String> = all
        .iter()
        .flat_map(|w| rule(w).into_iter().map(move |p| format!("{}: {p}", w.file)))
        .collect();
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// Walking a workflow
// ---------------------------------------------------------------------------------------------

fn jobs(doc: &Value) -> Vec<(String, &Value)> {
    match doc.get("jobs").and_then(Value::as_mapping) {
        Some(map) => map
            .iter()
            .map(|(k, v)| (k.as_str().unwrap_or("?").to_owned(), v))
            .collect(),
        None => Vec::new(),
    }
}

fn steps(job: &Value) -> Vec<&Value> {
    job.get("steps")
        .and_then(Value::as_sequence)
        .map(|s| s.iter().collect())
        .unwrap_or_default()
}

/// The jobs `job` needs, directly or through others.
fn ancestors(doc: &Value, job: &str) -> BTreeSet<String> {
    let needs_of = |id: &str| -> Vec<String> {
        match doc
            .get("jobs")
            .and_then(|j| j.get(id))
            .and_then(|j| j.get("needs"))
        {
            Some(Value::String(one)) => vec![one.clone()],
            Some(Value::Sequence(many)) => many
                .iter()
                .filter_map(|n| n.as_str().map(str::to_owned))
                .collect(),
            _ => Vec::new(),
        }
    };
    let mut found = BTreeSet::new();
    let mut todo = needs_of(job);
    while let Some(next) = todo.pop() {
        if found.insert(next.clone()) {
            todo.extend(needs_of(&next));
        }
    }
    found
}

fn step_label(index: usize, step: &Value) -> String {
    match step.get("name").and_then(Value::as_str) {
        Some(name) => format!("step {} ({name})", index + 1),
        None => format!("step {}", index + 1),
    }
}

/// Every `uses:` value in the workflow, with where it is: job-level (reusable workflows) and
/// step-level.
fn all_uses(doc: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (job_id, job) in jobs(doc) {
        if let Some(uses) = job.get("uses").and_then(Value::as_str) {
            out.push((format!("job {job_id}"), uses.to_owned()));
        }
        for (i, step) in steps(job).into_iter().enumerate() {
            if let Some(uses) = step.get("uses").and_then(Value::as_str) {
                out.push((
                    format!("job {job_id}, {}", step_label(i, step)),
                    uses.to_owned(),
                ));
            }
        }
    }
    out
}

/// Every `run:` script in the workflow, with where it is.
fn all_runs(doc: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (job_id, job) in jobs(doc) {
        for (i, step) in steps(job).into_iter().enumerate() {
            if let Some(run) = step.get("run") {
                let script = run
                    .as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| format!("{run:?}"));
                out.push((format!("job {job_id}, {}", step_label(i, step)), script));
            }
        }
    }
    out
}

fn is_false(v: Option<&Value>) -> bool {
    matches!(v, Some(Value::Bool(false))) || v.and_then(Value::as_str) == Some("false")
}

fn is_40_hex(s: &str) -> bool {
    s.len() == 40
        && s.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// `vX.Y.Z`: the release a pinned SHA came from.
fn is_version_comment(s: &str) -> bool {
    let Some(rest) = s.strip_prefix('v') else {
        return false;
    };
    let parts: Vec<&str> = rest.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

// ---------------------------------------------------------------------------------------------
// The rules
// ---------------------------------------------------------------------------------------------

/// Top-level `permissions` present and empty or read-only; no job grants `write-all`.
fn check_permissions(w: &Workflow) -> Vec<String> {
    let mut problems = Vec::new();
    match w.doc.get("permissions") {
        None => problems.push("no top-level `permissions:` (use `permissions: {}`)".into()),
        Some(Value::Mapping(map)) => {
            for (scope, level) in map {
                if !matches!(level.as_str(), Some("read" | "none")) {
                    problems.push(format!(
                        "top-level permission {scope:?} is {level:?}; grant writes per job"
                    ));
                }
            }
        }
        Some(Value::String(s)) if s == "read-all" => {}
        Some(other) => problems.push(format!(
            "top-level permissions must be {{}} or read-only, found {other:?}"
        )),
    }
    for (job_id, job) in jobs(&w.doc) {
        match job.get("permissions") {
            None | Some(Value::Mapping(_)) => {}
            Some(Value::String(s)) if s == "read-all" => {}
            Some(other) => problems.push(format!(
                "job {job_id}: permissions {other:?}; list each scope"
            )),
        }
        if let Some(map) = job.get("permissions").and_then(Value::as_mapping) {
            for (scope, level) in map {
                if !matches!(level.as_str(), Some("read" | "write" | "none")) {
                    problems.push(format!("job {job_id}: permission {scope:?} is {level:?}"));
                }
            }
        }
    }
    problems
}

/// Every `uses:` pinned by a full 40-hex commit SHA, with a `# vX.Y.Z` comment on its line.
/// yaml_serde drops comments, so the comment is checked on the raw text.
fn check_pinned_uses(w: &Workflow) -> Vec<String> {
    let mut problems = Vec::new();
    for (place, uses) in all_uses(&w.doc) {
        if uses.starts_with("./") {
            continue; // a local action or workflow: same commit as the workflow itself
        }
        if let Some(image) = uses.strip_prefix("docker://") {
            if !image.contains("@sha256:") {
                problems.push(format!("{place}: {uses} is not pinned by digest"));
            }
            continue;
        }
        match uses.rsplit_once('@') {
            Some((_, git_ref)) if is_40_hex(git_ref) => {}
            _ => problems.push(format!(
                "{place}: {uses} is not pinned by a full commit SHA"
            )),
        }
        let lines: Vec<&str> = w
            .raw
            .lines()
            .filter(|line| {
                let t = line.trim_start().trim_start_matches("- ").trim_start();
                t.strip_prefix("uses:")
                    .map(|v| {
                        let v = v.split(" #").next().unwrap_or("").trim();
                        v.trim_matches(|c| c == '"' || c == '\'') == uses
                    })
                    .unwrap_or(false)
            })
            .collect();
        if lines.is_empty() {
            problems.push(format!("{place}: cannot find the line of `uses: {uses}`"));
        }
        for line in lines {
            let comment = line.split_once(" #").map(|(_, c)| c.trim());
            if !comment.is_some_and(is_version_comment) {
                problems.push(format!(
                    "{place}: `{}` needs a `# vX.Y.Z` comment naming the pinned release",
                    line.trim()
                ));
            }
        }
    }
    problems
}

/// Every actions/checkout step sets `persist-credentials: false`.
fn check_checkout_credentials(w: &Workflow) -> Vec<String> {
    let mut problems = Vec::new();
    for (job_id, job) in jobs(&w.doc) {
        for (i, step) in steps(job).into_iter().enumerate() {
            let uses = step.get("uses").and_then(Value::as_str).unwrap_or("");
            if uses.starts_with("actions/checkout@")
                && !is_false(step.get("with").and_then(|w| w.get("persist-credentials")))
            {
                problems.push(format!(
                    "job {job_id}, {}: actions/checkout without `persist-credentials: false`",
                    step_label(i, step)
                ));
            }
        }
    }
    problems
}

/// No `${{ ... }}` inside any `run:` (template injection); values go through `env:`.
fn check_no_expressions_in_run(w: &Workflow) -> Vec<String> {
    all_runs(&w.doc)
        .into_iter()
        .filter(|(_, script)| script.contains("${{"))
        .map(|(place, _)| format!("{place}: `${{{{ }}}}` inside `run:`; pass it through `env:`"))
        .collect()
}

/// Every job has a positive `timeout-minutes` (the default is six hours).
fn check_timeouts(w: &Workflow) -> Vec<String> {
    let mut problems = Vec::new();
    for (job_id, job) in jobs(&w.doc) {
        match job.get("timeout-minutes") {
            Some(Value::Number(n)) if n.as_f64().is_some_and(|m| m > 0.0) => {}
            Some(other) => problems.push(format!("job {job_id}: timeout-minutes {other:?}")),
            None => problems.push(format!("job {job_id}: no timeout-minutes")),
        }
    }
    problems
}

/// `defaults.run.shell: bash` at the top: GitHub then runs steps with `-eo pipefail`, so a
/// failing command piped into `tee` fails its step (the implicit default shell has no pipefail).
fn check_pipefail_shell(w: &Workflow) -> Vec<String> {
    let mut problems = Vec::new();
    let shell = w
        .doc
        .get("defaults")
        .and_then(|d| d.get("run"))
        .and_then(|r| r.get("shell"))
        .and_then(Value::as_str);
    if shell != Some("bash") {
        problems.push(format!(
            "top-level defaults.run.shell is {shell:?}; set `bash` (pipefail)"
        ));
    }
    for (job_id, job) in jobs(&w.doc) {
        for (i, step) in steps(job).into_iter().enumerate() {
            if let Some(other) = step.get("shell").and_then(Value::as_str) {
                if other != "bash" {
                    problems.push(format!(
                        "job {job_id}, {}: shell {other:?} overrides bash",
                        step_label(i, step)
                    ));
                }
            }
        }
    }
    problems
}

/// Nothing pushes to a branch: releases go to the registry and GitHub releases only.
fn check_no_git_push(w: &Workflow) -> Vec<String> {
    all_runs(&w.doc)
        .into_iter()
        .filter(|(_, script)| script.contains("git push"))
        .map(|(place, _)| format!("{place}: `git push`; the workflows never push to a branch"))
        .collect()
}

/// The release workflow: a fixed concurrency group that never cancels a run in progress.
fn check_release_concurrency(w: &Workflow) -> Vec<String> {
    let mut problems = Vec::new();
    let Some(concurrency) = w.doc.get("concurrency") else {
        return vec!["no top-level `concurrency:`".into()];
    };
    match concurrency.get("group").and_then(Value::as_str) {
        Some(group) if !group.is_empty() && !group.contains("${{") => {}
        Some(group) => problems.push(format!("concurrency group {group:?} is not a fixed name")),
        None => problems.push("concurrency without a `group:` name".into()),
    }
    if !is_false(concurrency.get("cancel-in-progress")) {
        problems.push("concurrency needs `cancel-in-progress: false`".into());
    }
    problems
}

/// The release workflow's triggers: a daily schedule off the top of the hour, and manual runs
/// with boolean `force` and `no_publish` inputs.
fn check_release_triggers(w: &Workflow) -> Vec<String> {
    let mut problems = Vec::new();
    let Some(on) = w.doc.get("on").and_then(Value::as_mapping) else {
        return vec!["`on:` must be a mapping of triggers".into()];
    };
    let crons: Vec<&str> = on
        .get("schedule")
        .and_then(Value::as_sequence)
        .map(|s| {
            s.iter()
                .filter_map(|e| e.get("cron").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    if crons.is_empty() {
        problems.push("no `schedule:` cron".into());
    }
    for cron in crons {
        let fields: Vec<&str> = cron.split_whitespace().collect();
        match fields.as_slice() {
            [minute, hour, "*", "*", "*"] if hour.parse::<u32>().is_ok_and(|h| h < 24) => {
                match minute.parse::<u32>() {
                    Ok(m) if (1..=59).contains(&m) => {}
                    _ => problems.push(format!(
                        "cron {cron:?}: run once a day at a fixed off-peak minute (not :00)"
                    )),
                }
            }
            _ => problems.push(format!(
                "cron {cron:?}: expected a daily `M H * * *` schedule"
            )),
        }
    }
    let inputs = on.get("workflow_dispatch").and_then(|d| d.get("inputs"));
    for input in ["force", "no_publish"] {
        match inputs.and_then(|i| i.get(input)) {
            Some(def) if def.get("type").and_then(Value::as_str) == Some("boolean") => {}
            Some(_) => problems.push(format!("workflow_dispatch input {input} is not boolean")),
            None => problems.push(format!("no workflow_dispatch input {input}")),
        }
    }
    problems
}

/// The release workflow builds natively: a matrix job runs linux/amd64 on `ubuntu-latest` and
/// linux/arm64 on `ubuntu-24.04-arm`.
fn check_release_matrix(w: &Workflow) -> Vec<String> {
    let want = [
        ("linux/amd64", "ubuntu-24.04"),
        ("linux/arm64", "ubuntu-24.04-arm"),
    ];
    let mut found = BTreeSet::new();
    for (_, job) in jobs(&w.doc) {
        let runs_on_matrix = job
            .get("runs-on")
            .and_then(Value::as_str)
            .is_some_and(|r| r.contains("matrix.runner"));
        let include = job
            .get("strategy")
            .and_then(|s| s.get("matrix"))
            .and_then(|m| m.get("include"))
            .and_then(Value::as_sequence);
        if let (true, Some(include)) = (runs_on_matrix, include) {
            for entry in include {
                let platform = entry.get("platform").and_then(Value::as_str);
                let runner = entry.get("runner").and_then(Value::as_str);
                if let (Some(p), Some(r)) = (platform, runner) {
                    found.insert((p.to_owned(), r.to_owned()));
                }
            }
        }
    }
    want.iter()
        .filter(|(p, r)| !found.contains(&((*p).to_owned(), (*r).to_owned())))
        .map(|(p, r)| {
            format!("no matrix job (runs-on: matrix.runner) building {p} on the native {r}")
        })
        .collect()
}

/// The runner labels a job may get: its `runs-on` literal, or each matrix entry's value of the
/// key `runs-on` names (`${{ matrix.KEY }}`).
fn runner_labels(job: &Value) -> Vec<String> {
    let Some(runs_on) = job.get("runs-on").and_then(Value::as_str) else {
        return vec![format!("{:?}", job.get("runs-on"))];
    };
    let Some(key) = runs_on
        .trim()
        .strip_prefix("${{")
        .and_then(|r| r.strip_suffix("}}"))
        .and_then(|r| r.trim().strip_prefix("matrix."))
    else {
        return vec![runs_on.to_owned()];
    };
    let matrix = job.get("strategy").and_then(|s| s.get("matrix"));
    let mut labels: Vec<String> = matrix
        .and_then(|m| m.get("include"))
        .and_then(Value::as_sequence)
        .into_iter()
        .flatten()
        .filter_map(|e| e.get(key).and_then(Value::as_str).map(str::to_owned))
        .collect();
    labels.extend(
        matrix
            .and_then(|m| m.get(key))
            .and_then(Value::as_sequence)
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_owned)),
    );
    if labels.is_empty() {
        labels.push(runs_on.to_owned());
    }
    labels
}

/// Every job of every workflow runs on one named Ubuntu release (`ubuntu-YY.MM`, or
/// `ubuntu-YY.MM-arm` for arm64), never a moving label such as `ubuntu-latest` (26.04 now, with
/// another Docker and image store than 24.04's `-arm`), and every `actions/cache` key names that
/// release: a cache built on one release is never restored on another.
fn check_one_ubuntu_release(all: &[Workflow]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut releases = BTreeSet::new();
    for w in all {
        for (job_id, job) in jobs(&w.doc) {
            for label in runner_labels(job) {
                let release = label
                    .strip_prefix("ubuntu-")
                    .map(|r| r.strip_suffix("-arm").unwrap_or(r))
                    .filter(|r| {
                        let parts: Vec<&str> = r.split('.').collect();
                        parts.len() == 2
                            && parts
                                .iter()
                                .all(|p| p.len() == 2 && p.bytes().all(|b| b.is_ascii_digit()))
                    });
                match release {
                    Some(r) => {
                        releases.insert(r.to_owned());
                    }
                    None => problems.push(format!(
                        "{}: job {job_id}: runs on `{label}`, not a named Ubuntu release (ubuntu-YY.MM[-arm])",
                        w.file
                    )),
                }
            }
        }
    }
    if releases.len() > 1 {
        problems.push(format!(
            "the jobs run on more than one Ubuntu release: {releases:?}"
        ));
    }
    let Some(release) = releases.iter().next() else {
        return problems;
    };
    for w in all {
        for (job_id, job) in jobs(&w.doc) {
            for (i, step) in steps(job).into_iter().enumerate() {
                if !step_uses(step, "cache") {
                    continue;
                }
                for key in ["key", "restore-keys"] {
                    let value = step_with(step, key);
                    if !value.is_empty() && !value.contains(&format!("ubuntu-{release}")) {
                        problems.push(format!(
                            "{}: job {job_id}: {}: cache `{key}` does not name ubuntu-{release}",
                            w.file,
                            step_label(i, step)
                        ));
                    }
                }
            }
        }
    }
    problems
}

/// Every `actions/cache` key and restore key names the compiler: an output of an earlier step
/// of the same job that runs `rustc -V`. Without it, after the runner image updates Rust an
/// exact hit restores a `target/` the new compiler cannot reuse, and every run recompiles it
/// until the sources change (and the key with them).
fn check_cache_keys_name_the_compiler(w: &Workflow) -> Vec<String> {
    let mut problems = Vec::new();
    for (job_id, job) in jobs(&w.doc) {
        let steps = steps(job);
        for (i, step) in steps.iter().enumerate() {
            if !step_uses(step, "cache") {
                continue;
            }
            let compiler_outputs: Vec<String> = steps[..i]
                .iter()
                .filter(|s| step_run(s).contains("rustc -V"))
                .filter_map(|s| s.get("id").and_then(Value::as_str))
                .map(|id| format!("steps.{id}.outputs."))
                .collect();
            for key in ["key", "restore-keys"] {
                let value = step_with(step, key);
                if value.is_empty() && key == "restore-keys" {
                    continue;
                }
                if !compiler_outputs.iter().any(|o| value.contains(o.as_str())) {
                    problems.push(format!(
                        "job {job_id}: {}: cache `{key}` does not name the compiler (an \
                         earlier step's output of `rustc -V`)",
                        step_label(i, step)
                    ));
                }
            }
        }
    }
    problems
}

/// The release is created as a draft, its assets attached, then published, in that order, so
/// immutable releases get their assets.
fn check_release_draft_order(w: &Workflow) -> Vec<String> {
    let runs: Vec<String> = all_runs(&w.doc).into_iter().map(|(_, s)| s).collect();
    let position = |needle: &dyn Fn(&str) -> bool| runs.iter().position(|s| needle(s));
    let create = position(&|s| s.contains("gh release create") && s.contains("--draft"));
    let upload = position(&|s| s.contains("gh release upload"));
    let publish = position(&|s| s.contains("gh release edit") && s.contains("--draft=false"));
    match (create, upload, publish) {
        (Some(c), Some(u), Some(p)) if c < u && u < p => Vec::new(),
        (Some(_), Some(_), Some(_)) => {
            vec![
                "release steps out of order: create --draft, then upload, then --draft=false"
                    .into(),
            ]
        }
        _ => vec![format!(
            "missing release step(s): create --draft {}, upload {}, edit --draft=false {}",
            create.is_some(),
            upload.is_some(),
            publish.is_some()
        )],
    }
}

/// Whether step `s` uses `actions/<action>@…`.
fn step_uses(s: &Value, action: &str) -> bool {
    s.get("uses")
        .and_then(Value::as_str)
        .is_some_and(|u| u.starts_with(&format!("actions/{action}@")))
}

/// Step `s`'s `run:` script, or nothing.
fn step_run(s: &Value) -> String {
    s.get("run")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// Step `s`'s `with.<key>` as text (a non-string value as its YAML), or nothing.
fn step_with(s: &Value, key: &str) -> String {
    s.get("with")
        .and_then(|w| w.get(key))
        .map(|v| match v {
            Value::String(t) => t.clone(),
            other => yaml_serde::to_string(other)
                .unwrap_or_default()
                .trim()
                .to_string(),
        })
        .unwrap_or_default()
}

/// Attestations are made after the receipt is verified (`release ship --defer-tag`) and before
/// anything a consumer finds by name exists: the registry tag (`release ship` without
/// `--defer-tag`) and the GitHub release (`gh release create`). The index (pushed to the
/// registry), the release assets and an SBOM per platform manifest are attested, and only
/// the job that attests may mint an OIDC token or write attestations.
///
/// All through `actions/attest` (attest-sbom v4 is deprecated, and attest-build-provenance v4 is
/// a wrapper of it). A step that pushes its attestation to the registry needs an earlier step
/// of its job that logs in to that registry (`docker login`: actions/attest reads credentials
/// only from ~/.docker/config.json, @sigstore/oci 0.6.0 `getRegistryCredentials`), `packages:
/// write`, and `artifact-metadata: write` for the storage record it then makes.
fn check_attestations(w: &Workflow) -> Vec<String> {
    let mut problems = Vec::new();
    for (job_id, job) in jobs(&w.doc) {
        let steps = steps(job);
        let (uses, run, with) = (step_uses, step_run, step_with);
        let attest: Vec<usize> = (0..steps.len())
            .filter(|&i| {
                ["attest", "attest-build-provenance", "attest-sbom"]
                    .iter()
                    .any(|a| uses(steps[i], a))
            })
            .collect();
        for &i in &attest {
            if !uses(steps[i], "attest") {
                problems.push(format!(
                    "job {job_id}: {}: use actions/attest (attest-sbom v4 is deprecated; attest-build-provenance v4 wraps actions/attest)",
                    step_label(i, steps[i])
                ));
            }
        }
        let perms = job.get("permissions");
        let writes =
            |scope: &str| perms.and_then(|p| p.get(scope)).and_then(Value::as_str) == Some("write");
        if attest.is_empty() {
            for scope in ["id-token", "attestations"] {
                if writes(scope) {
                    problems.push(format!(
                        "job {job_id}: `{scope}: write` without an attest step"
                    ));
                }
            }
            continue;
        }
        for scope in ["id-token", "attestations"] {
            if !writes(scope) {
                problems.push(format!("job {job_id}: attests without `{scope}: write`"));
            }
        }
        for &i in attest
            .iter()
            .filter(|&&i| with(steps[i], "push-to-registry") == "true")
        {
            let label = step_label(i, steps[i]);
            let logged_in = steps[..i]
                .iter()
                .any(|s| run(s).contains("docker login") || uses(s, "docker/login-action"));
            if !logged_in {
                problems.push(format!(
                    "job {job_id}: {label} pushes to the registry without a registry login before it (actions/attest reads only ~/.docker/config.json)"
                ));
            }
            for scope in ["packages", "artifact-metadata"] {
                if !writes(scope) {
                    problems.push(format!(
                        "job {job_id}: {label} pushes to the registry without `{scope}: write`"
                    ));
                }
            }
        }
        // Before the attestations: the receipt verified (`release ship --defer-tag`), earlier
        // in this job or in a job this one needs. After them: the tag (`release ship` without
        // it) and the GitHub release, later in this job or in a job that needs this one.
        let (first, last) = (attest[0], *attest.last().unwrap());
        let ship_call = |s: &Value, deferred: bool| {
            let r = run(s);
            r.contains("xtask release ship") && r.contains("--defer-tag") == deferred
        };
        let verified = steps[..first].iter().any(|s| ship_call(s, true))
            || jobs(&w.doc).iter().any(|(other, j)| {
                ancestors(&w.doc, &job_id).contains(other)
                    && self::steps(j).iter().any(|s| ship_call(s, true))
            });
        if !verified {
            problems.push(format!(
                "job {job_id}: the attest steps must follow `release ship --defer-tag` (the receipt verified)"
            ));
        }
        let after = |is: &dyn Fn(&Value) -> bool| -> (bool, bool) {
            let mut found_before = steps[..last].iter().any(|s| is(s));
            let mut found_after = steps[last + 1..].iter().any(|s| is(s));
            for (other, j) in jobs(&w.doc) {
                if other == job_id {
                    continue;
                }
                if self::steps(j).iter().any(|s| is(s)) {
                    if ancestors(&w.doc, &other).contains(&job_id) {
                        found_after = true;
                    } else {
                        found_before = true;
                    }
                }
            }
            (found_before, found_after)
        };
        match after(&|s| ship_call(s, false)) {
            (false, true) => {}
            _ => problems.push(format!(
                "job {job_id}: the tag (`release ship` without --defer-tag) must come after every attest step"
            )),
        }
        if after(&|s| run(s).contains("gh release create")).0 {
            problems.push(format!(
                "job {job_id}: `gh release create` must come after every attest step"
            ));
        }
        let provenance = |i: usize| with(steps[i], "sbom-path").is_empty();
        let index = attest
            .iter()
            .any(|&i| provenance(i) && with(steps[i], "subject-digest").contains("index_digest"));
        let assets = attest.iter().any(|&i| {
            provenance(i) && with(steps[i], "subject-path").starts_with("release/assets/")
        });
        // Each SBOM format of each platform: SPDX and CycloneDX.
        let sboms = |ext: &str| {
            attest
                .iter()
                .filter(|&&i| {
                    let path = with(steps[i], "sbom-path");
                    path.contains("sbom-") && path.ends_with(ext)
                })
                .count()
        };
        if !index {
            problems.push(format!("job {job_id}: the index digest is not attested"));
        }
        if !assets {
            problems.push(format!("job {job_id}: the release assets are not attested"));
        }
        for (ext, format) in [(".spdx.json", "SPDX"), (".cdx.json", "CycloneDX")] {
            let n = sboms(ext);
            if n < 2 {
                problems.push(format!(
                    "job {job_id}: {n} {format} SBOM attestation(s); one per platform"
                ));
            }
        }
    }
    problems
}

/// The consumer's verifier binaries reach the receipt: every `release ship` call passes the
/// same `--verifiers DIR`, the job downloads the `verifiers` artifact into DIR, and the job
/// that builds them (scripts/build-verifiers.sh) has no write permission and uploads that
/// artifact.
fn check_verifiers(w: &Workflow) -> Vec<String> {
    let mut problems = Vec::new();
    let (run, uses) = (step_run, step_uses);
    let with = |s: &Value, key: &str| step_with(s, key).trim_end_matches('/').to_string();
    let mut built = false;
    for (job_id, job) in jobs(&w.doc) {
        let steps = steps(job);
        if steps
            .iter()
            .any(|s| run(s).contains("scripts/build-verifiers.sh"))
        {
            built = true;
            let perms = job.get("permissions").and_then(Value::as_mapping);
            let writes = perms.is_none_or(|m| m.values().any(|v| v.as_str() != Some("read")));
            if writes {
                problems.push(format!(
                    "job {job_id}: builds the verifiers with write permissions (only `contents: read`)"
                ));
            }
            if !steps
                .iter()
                .any(|s| uses(s, "upload-artifact") && with(s, "name") == "verifiers")
            {
                problems.push(format!(
                    "job {job_id}: does not upload the `verifiers` artifact"
                ));
            }
        }
        let ships: Vec<String> = steps
            .iter()
            .map(|s| run(s))
            .filter(|r| r.contains("xtask release ship"))
            .collect();
        if ships.is_empty() {
            continue;
        }
        let dirs: Vec<Option<&str>> = ships
            .iter()
            .map(|r| {
                let mut words = r.split_whitespace();
                words.find(|w| *w == "--verifiers")?;
                words.next()
            })
            .collect();
        match dirs.first().copied().flatten() {
            Some(dir) if dirs.iter().all(|d| *d == Some(dir)) => {
                let downloaded = steps.iter().any(|s| {
                    uses(s, "download-artifact")
                        && with(s, "name") == "verifiers"
                        && with(s, "path") == dir
                });
                if !downloaded {
                    problems.push(format!(
                        "job {job_id}: no step downloads the `verifiers` artifact into {dir}"
                    ));
                }
            }
            _ => problems.push(format!(
                "job {job_id}: every `release ship` must pass the same `--verifiers DIR` (the receipt records them)"
            )),
        }
    }
    if !built {
        problems.push("no job runs scripts/build-verifiers.sh".to_string());
    }
    problems
}

/// The write token (`GH_TOKEN`) is only in the environment of steps that run `gh`: never at
/// the workflow or job level, where every cargo build script would see it.
fn check_token_only_where_gh_runs(w: &Workflow) -> Vec<String> {
    let mut problems = Vec::new();
    let has_token = |v: Option<&Value>| v.and_then(|e| e.get("GH_TOKEN")).is_some();
    if has_token(w.doc.get("env")) {
        problems.push("GH_TOKEN in the workflow's env".to_string());
    }
    for (job_id, job) in jobs(&w.doc) {
        if has_token(job.get("env")) {
            problems.push(format!("job {job_id}: GH_TOKEN in the job's env"));
        }
        for (i, step) in steps(job).into_iter().enumerate() {
            let run = step.get("run").and_then(Value::as_str).unwrap_or("");
            let calls_gh = run
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
                .any(|word| word == "gh");
            if has_token(step.get("env")) && !calls_gh {
                problems.push(format!(
                    "job {job_id}, {}: GH_TOKEN in a step that does not run `gh`",
                    step_label(i, step)
                ));
            }
        }
    }
    problems
}

/// Scopes that let a job mint an OIDC token (and sign as this workflow) or write what consumers
/// trust: attestations, releases and tags, the repository.
const SIGNING_OR_RELEASING: [&str; 3] = ["id-token", "attestations", "contents"];

/// What a job that holds one of [`SIGNING_OR_RELEASING`] may run besides `gh` and binaries an
/// earlier job built: the shell's plumbing, nothing that compiles or fetches code.
const PLUMBING: [&str; 15] = [
    "gh", "jq", "mkdir", "cp", "chmod", "rm", "cat", "grep", "echo", "printf", "test", "[", "exit",
    "true", "false",
];

/// The `xtask` phases that push to the registry: the only ones a registry token may reach.
const PUSHING_PHASES: [&str; 2] = ["release build", "release ship"];

/// Every command a `run:` script runs: the first word of each simple command (continuation lines
/// joined; split at `;`, `&&`, `||`, `|`, `$(`, `(`, `)`), shell keywords, `!` and leading
/// assignments skipped, quotes removed. `for NAME in WORDS` runs nothing.
fn commands(script: &str) -> Vec<String> {
    const KEYWORDS: [&str; 12] = [
        "if", "then", "elif", "else", "fi", "do", "done", "while", "until", "!", "{", "}",
    ];
    let joined = script.replace("\\\n", " ");
    let mut out = Vec::new();
    for line in joined.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        let mut text = line.to_string();
        for sep in ["&&", "||", "$(", ";", "|", "(", ")"] {
            text = text.replace(sep, "\n");
        }
        for segment in text.lines() {
            let words: Vec<&str> = segment.split_whitespace().collect();
            if words.first() == Some(&"for") {
                continue;
            }
            let command = words
                .iter()
                .map(|w| w.trim_matches(|c| c == '"' || c == '\''))
                .find(|w| !KEYWORDS.contains(w) && !w.contains('='));
            if let Some(c) = command.filter(|c| !c.is_empty()) {
                out.push(c.to_string());
            }
        }
    }
    out
}

/// Whether a command compiles or runs the Rust toolchain (`cargo xtask` is `cargo run`).
fn compiles(command: &str) -> bool {
    let name = command.rsplit('/').next().unwrap_or(command);
    matches!(name, "cargo" | "rustc" | "rustup" | "cc" | "gcc" | "make")
}

/// Environment values that carry a write token: `github.token` or a secret.
fn carries_token(value: &Value) -> bool {
    value
        .as_str()
        .is_some_and(|v| v.contains("github.token") || v.contains("secrets."))
}

fn token_vars(env: Option<&Value>) -> Vec<String> {
    env.and_then(Value::as_mapping)
        .map(|m| {
            m.iter()
                .filter(|(_, v)| carries_token(v))
                .filter_map(|(k, _)| k.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The artifacts `job` downloads by name before step `before`.
fn downloaded_before(job: &Value, before: usize) -> BTreeSet<String> {
    steps(job)[..before]
        .iter()
        .filter(|s| step_uses(s, "download-artifact"))
        .map(|s| step_with(s, "name"))
        .filter(|n| !n.is_empty())
        .collect()
}

/// Whether `path` is a file some job `job_id` needs put into an artifact `job_id` downloads
/// before step `before`: a binary an earlier job built, passed on.
fn from_an_earlier_job(doc: &Value, job_id: &str, before: usize, path: &str) -> bool {
    let job = &doc["jobs"][job_id];
    let downloaded = downloaded_before(job, before);
    let earlier = ancestors(doc, job_id);
    jobs(doc).into_iter().any(|(other, j)| {
        earlier.contains(&other)
            && steps(j).iter().any(|s| {
                step_uses(s, "upload-artifact")
                    && downloaded.contains(&step_with(s, "name"))
                    && step_with(s, "path")
                        .lines()
                        .map(str::trim)
                        .any(|p| p == path || (p.ends_with('/') && path.starts_with(p)))
            })
    })
}

/// Least privilege per job, over the parsed workflow:
/// - a job that holds `id-token`, `attestations` or `contents` write compiles nothing and runs
///   no cargo: its steps use only pinned `actions/attest`, `actions/checkout` and
///   `actions/download-artifact`, or `actions/upload-artifact` (which runs nothing of the
///   repository: the attest job passes its signed bundles on with it), and its scripts run `gh`,
///   shell plumbing and binaries an earlier job built and passed as an artifact;
/// - a write token other than gh's (`GH_TOKEN`, [`check_token_only_where_gh_runs`]) is never in
///   the workflow's or a job's `env`, and reaches only a step that pushes (an xtask phase that
///   pushes), which runs a binary built earlier without it: from an earlier job's artifact, or
///   by an earlier step of the same job with no token in its `env`. Never `cargo`.
fn check_least_privilege(w: &Workflow) -> Vec<String> {
    let mut problems = Vec::new();
    for var in token_vars(w.doc.get("env")) {
        problems.push(format!(
            "the workflow's env gives every job a token ({var})"
        ));
    }
    for (job_id, job) in jobs(&w.doc) {
        for var in token_vars(job.get("env")) {
            problems.push(format!(
                "job {job_id}: a token in the job's env ({var}) reaches every step"
            ));
        }
        let held: Vec<&str> = SIGNING_OR_RELEASING
            .into_iter()
            .filter(|scope| {
                job.get("permissions")
                    .and_then(|p| p.get(*scope))
                    .and_then(Value::as_str)
                    == Some("write")
            })
            .collect();
        let steps = steps(job);
        for (i, step) in steps.iter().enumerate() {
            let label = step_label(i, step);
            let script = step_run(step);
            let cmds = commands(&script);
            if !held.is_empty() {
                let privilege = held
                    .iter()
                    .map(|s| format!("{s}: write"))
                    .collect::<Vec<_>>()
                    .join(", ");
                if let Some(uses) = step.get("uses").and_then(Value::as_str) {
                    let allowed = ["attest", "checkout", "download-artifact", "upload-artifact"]
                        .iter()
                        .any(|a| step_uses(step, a));
                    if !allowed {
                        problems.push(format!(
                            "job {job_id} ({privilege}), {label}: uses {uses}; only actions/attest, checkout, download-artifact and upload-artifact"
                        ));
                    }
                }
                for command in &cmds {
                    if compiles(command) {
                        problems.push(format!(
                            "job {job_id} ({privilege}), {label}: runs `{command}`; build in a job without these permissions and pass the binary as an artifact"
                        ));
                    } else if !PLUMBING.contains(&command.as_str())
                        && (!command.contains('/')
                            || !from_an_earlier_job(&w.doc, &job_id, i, command))
                    {
                        problems.push(format!(
                            "job {job_id} ({privilege}), {label}: runs `{command}`, neither gh, shell plumbing nor a binary an earlier job built and passed as an artifact"
                        ));
                    }
                }
            }
            let tokens: Vec<String> = token_vars(step.get("env"))
                .into_iter()
                .filter(|v| v != "GH_TOKEN")
                .collect();
            if tokens.is_empty() {
                continue;
            }
            let shown = tokens.join(", ");
            let pushes = PUSHING_PHASES.iter().any(|phase| script.contains(phase));
            if !pushes {
                problems.push(format!(
                    "job {job_id}, {label}: {shown} in a step that runs no pushing phase ({})",
                    PUSHING_PHASES.join(", ")
                ));
            }
            for command in &cmds {
                let built_earlier = command.contains('/')
                    && !compiles(command)
                    && (from_an_earlier_job(&w.doc, &job_id, i, command)
                        || steps[..i].iter().any(|earlier| {
                            let r = step_run(earlier);
                            let cargo_built = commands(&r).iter().any(|c| c == "cargo")
                                && r.contains("cargo build");
                            cargo_built
                                && token_vars(earlier.get("env")).is_empty()
                                && (command.starts_with("target/") || r.contains(command.as_str()))
                        }));
                if !built_earlier {
                    problems.push(format!(
                        "job {job_id}, {label}: {shown} reaches `{command}`; a token may reach only a binary built earlier without it (never cargo, which may compile)"
                    ));
                }
            }
        }
    }
    problems
}

/// CI runs formatting, clippy, the tests (the README's test command, which is what .ci/run
/// runs, or `cargo test` itself) and the lock check.
fn check_ci_steps(w: &Workflow) -> Vec<String> {
    let runs: Vec<String> = all_runs(&w.doc).into_iter().map(|(_, s)| s).collect();
    let required: [&[&str]; 4] = [
        &["cargo fmt"],
        &["cargo clippy"],
        &["bash scripts/test.sh", "cargo test"],
        &["cargo xtask lock --check"],
    ];
    required
        .iter()
        .filter(|any_of| !runs.iter().any(|s| any_of.iter().any(|n| s.contains(n))))
        .map(|any_of| format!("no step runs `{}`", any_of.join("` or `")))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// `cargo xtask` command lines
// ---------------------------------------------------------------------------------------------

/// One `cargo xtask ...` invocation in a script: its subcommand path and the long flags it passes.
#[derive(Debug, PartialEq)]
struct XtaskCall {
    subcommand: Vec<String>,
    flags: Vec<String>,
}

/// Finds every `cargo xtask` invocation in a shell script. Continuation lines (`\`) are joined;
/// an invocation ends at a pipe, redirection, `;`, `&&`, `||` or a closing parenthesis.
fn xtask_calls(script: &str) -> Vec<XtaskCall> {
    // The tool run as a built binary (`target/debug/xtask`, `release/bin/xtask`) at the start
    // of a line is the same command line as `cargo xtask`.
    let joined: String = script
        .replace("\\\n", " ")
        .lines()
        .map(|line| {
            let trimmed = line.trim_start();
            let first = trimmed.split_whitespace().next().unwrap_or("");
            if first.contains('/') && first.ends_with("/xtask") {
                format!("cargo xtask{}\n", &trimmed[first.len()..])
            } else {
                format!("{line}\n")
            }
        })
        .collect();
    let mut calls = Vec::new();
    for line in joined.lines() {
        let mut rest = line;
        while let Some(at) = rest.find("cargo xtask") {
            rest = &rest[at + "cargo xtask".len()..];
            let end = rest
                .find(['|', '>', ';', '&', ')', '<'])
                .unwrap_or(rest.len());
            let mut call = XtaskCall {
                subcommand: Vec::new(),
                flags: Vec::new(),
            };
            let mut in_flags = false;
            for token in rest[..end].split_whitespace() {
                if let Some(flag) = token.strip_prefix("--") {
                    in_flags = true;
                    let name = flag.split('=').next().unwrap_or("");
                    if !name.is_empty() {
                        call.flags.push(format!("--{name}"));
                    }
                } else if !in_flags
                    && token.starts_with(|c: char| c.is_ascii_lowercase())
                    && token
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                {
                    call.subcommand.push(token.to_owned());
                } else {
                    in_flags = true; // a positional argument: no more subcommand words
                }
            }
            calls.push(call);
            rest = &rest[end..];
        }
    }
    calls
}

/// Every `cargo xtask` subcommand the workflows run exists, and accepts every flag passed to it:
/// asked of the real binary through `--help`.
#[test]
fn every_xtask_call_in_the_workflows_exists() {
    let all = load_workflows();
    let mut calls = Vec::new();
    for w in &all {
        for (place, script) in all_runs(&w.doc) {
            for call in xtask_calls(&script) {
                calls.push((format!("{}: {place}", w.file), call));
            }
        }
    }
    for phase in ["plan", "build", "ship"] {
        assert!(
            calls
                .iter()
                .any(|(_, c)| c.subcommand == ["release", phase]),
            "expected the workflows to call `cargo xtask release {phase}`, found {calls:?}"
        );
    }
    let mut problems = Vec::new();
    for (place, call) in &calls {
        if call.subcommand.is_empty() {
            problems.push(format!("{place}: `cargo xtask` without a subcommand"));
            continue;
        }
        let output = xtask().args(&call.subcommand).arg("--help").run();
        let shown = call.subcommand.join(" ");
        if !output.success() {
            problems.push(format!(
                "{place}: `cargo xtask {shown}` does not exist: {}",
                output.stderr_text().trim()
            ));
            continue;
        }
        let help = output.stdout_text();
        for flag in &call.flags {
            let accepted = help
                .split(|c: char| c.is_whitespace() || c == ',' || c == '=' || c == '[')
                .any(|word| word == flag);
            if !accepted {
                problems.push(format!("{place}: `cargo xtask {shown}` has no {flag} flag"));
            }
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// The rules on the real workflows
// ---------------------------------------------------------------------------------------------

#[test]
fn permissions_are_least_privilege() {
    assert_all(&load_workflows(), check_permissions);
}

/// No job that can sign or release compiles, and a registry token reaches only a push by a
/// binary built before it: over every workflow's parsed jobs, permissions, steps and `env`.
#[test]
fn least_privilege_per_job() {
    assert_all(&load_workflows(), check_least_privilege);
}

#[test]
fn actions_are_pinned_by_commit_with_a_version_comment() {
    assert_all(&load_workflows(), check_pinned_uses);
}

#[test]
fn checkouts_do_not_persist_credentials() {
    assert_all(&load_workflows(), check_checkout_credentials);
}

#[test]
fn no_expressions_inside_run() {
    assert_all(&load_workflows(), check_no_expressions_in_run);
}

#[test]
fn every_job_has_a_timeout() {
    assert_all(&load_workflows(), check_timeouts);
}

#[test]
fn steps_run_with_pipefail() {
    assert_all(&load_workflows(), check_pipefail_shell);
}

#[test]
fn nothing_pushes_to_a_branch() {
    assert_all(&load_workflows(), check_no_git_push);
}

#[test]
fn every_job_runs_on_one_named_ubuntu_release_and_caches_name_it() {
    let all = load_workflows();
    let problems = check_one_ubuntu_release(&all);
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn cache_keys_name_the_compiler() {
    let all = load_workflows();
    assert_all(&all, check_cache_keys_name_the_compiler);
}

#[test]
fn the_release_workflow_has_its_shape() {
    let all = load_workflows();
    let w = release_workflow(&all);
    assert_eq!(
        w.doc.get("name").and_then(Value::as_str),
        Some(RELEASE_WORKFLOW_NAME),
        "{RELEASE_WORKFLOW}: workflow name"
    );
    let mut problems = Vec::new();
    problems.extend(check_release_concurrency(w));
    problems.extend(check_release_triggers(w));
    problems.extend(check_release_matrix(w));
    problems.extend(check_release_draft_order(w));
    problems.extend(check_token_only_where_gh_runs(w));
    problems.extend(check_attestations(w));
    problems.extend(check_verifiers(w));
    assert!(
        problems.is_empty(),
        "{RELEASE_WORKFLOW}:\n{}",
        problems.join("\n")
    );
}

#[test]
fn ci_runs_every_check() {
    let all = load_workflows();
    let w = all
        .iter()
        .find(|w| w.file == CI_WORKFLOW)
        .unwrap_or_else(|| panic!(".github/workflows/{CI_WORKFLOW} is missing"));
    let problems = check_ci_steps(w);
    assert!(
        problems.is_empty(),
        "{CI_WORKFLOW}:\n{}",
        problems.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// Every rule can fail: bad snippets
// ---------------------------------------------------------------------------------------------

mod rules {
    use super::*;

    fn wf(raw: &str) -> Workflow {
        Workflow {
            file: "snippet.yml".into(),
            raw: raw.into(),
            doc: parse(raw).unwrap(),
        }
    }

    fn assert_flags(problems: Vec<String>, needle: &str) {
        assert!(
            problems.iter().any(|p| p.contains(needle)),
            "expected a problem mentioning {needle:?}, got {problems:?}"
        );
    }

    const CHECKOUT: &str = "actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1 # v7.0.1";

    /// A workflow that passes every generic rule; each test below breaks one thing in it.
    fn good() -> String {
        format!(
            "name: ok\non: push\npermissions: {{}}\ndefaults:\n  run:\n    shell: bash\njobs:\n  a:\n    runs-on: ubuntu-latest\n    \
             timeout-minutes: 5\n    permissions:\n      contents: read\n    steps:\n      \
             - uses: {CHECKOUT}\n        with:\n          persist-credentials: false\n      \
             - run: echo \"$X\"\n        env:\n          X: ${{{{ github.ref }}}}\n"
        )
    }

    #[test]
    fn the_good_snippet_passes_every_generic_rule() {
        let w = wf(&good());
        for rule in [
            check_permissions,
            check_pinned_uses,
            check_checkout_credentials,
            check_no_expressions_in_run,
            check_timeouts,
            check_no_git_push,
            check_pipefail_shell,
        ] {
            assert_eq!(rule(&w), Vec::<String>::new());
        }
    }

    #[test]
    fn a_cache_key_without_the_compiler_fails() {
        let cache = |key: &str| {
            format!(
                "name: ok\non: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    steps:\n      \
                 - id: rustc\n        run: echo \"hash=$(rustc -V | sha256sum)\" >> \"$GITHUB_OUTPUT\"\n      \
                 - uses: actions/cache@27d5ce7f107fe9357f9df03efb73ab90386fccae # v5.0.5\n        \
                 with:\n          path: target\n          key: {key}\n"
            )
        };
        let named = "x-${{ steps.rustc.outputs.hash }}-${{ hashFiles('Cargo.lock') }}";
        assert_eq!(
            check_cache_keys_name_the_compiler(&wf(&cache(named))),
            Vec::<String>::new()
        );
        assert_flags(
            check_cache_keys_name_the_compiler(&wf(&cache("x-${{ hashFiles('Cargo.lock') }}"))),
            "does not name the compiler",
        );
        // The output of a step that does not run `rustc -V` is not the compiler.
        assert_flags(
            check_cache_keys_name_the_compiler(&wf(&cache(named).replace("rustc -V", "cargo -V"))),
            "does not name the compiler",
        );
    }

    #[test]
    fn missing_or_writable_top_level_permissions_fail() {
        assert_flags(
            check_permissions(&wf(&good().replace("permissions: {}\n", ""))),
            "no top-level",
        );
        assert_flags(
            check_permissions(&wf(
                &good().replace("permissions: {}", "permissions: write-all")
            )),
            "top-level permissions",
        );
        assert_flags(
            check_permissions(&wf(
                &good().replace("permissions: {}", "permissions:\n  contents: write")
            )),
            "grant writes per job",
        );
        assert_flags(
            check_permissions(&wf(&good().replace(
                "    permissions:\n      contents: read\n",
                "    permissions: write-all\n",
            ))),
            "list each scope",
        );
    }

    #[test]
    fn tag_pins_and_missing_version_comments_fail() {
        assert_flags(
            check_pinned_uses(&wf(
                &good().replace(CHECKOUT, "actions/checkout@v7 # v7.0.1")
            )),
            "full commit SHA",
        );
        let short = "actions/checkout@3d3c42e # v7.0.1";
        assert_flags(
            check_pinned_uses(&wf(&good().replace(CHECKOUT, short))),
            "full commit SHA",
        );
        let bare = "actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1";
        assert_flags(
            check_pinned_uses(&wf(&good().replace(CHECKOUT, bare))),
            "# vX.Y.Z",
        );
        let vague = "actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1 # v7";
        assert_flags(
            check_pinned_uses(&wf(&good().replace(CHECKOUT, vague))),
            "# vX.Y.Z",
        );
        let docker = "docker://alpine:3";
        assert_flags(
            check_pinned_uses(&wf(&good().replace(CHECKOUT, docker))),
            "by digest",
        );
        let reusable = "name: r\non: push\npermissions: {}\njobs:\n  a:\n    \
                        uses: org/repo/.github/workflows/x.yml@main\n";
        assert_flags(check_pinned_uses(&wf(reusable)), "full commit SHA");
    }

    #[test]
    fn checkout_persisting_credentials_fails() {
        let w = good().replace("persist-credentials: false", "persist-credentials: true");
        assert_flags(check_checkout_credentials(&wf(&w)), "persist-credentials");
        let w = good().replace("        with:\n          persist-credentials: false\n", "");
        assert_flags(check_checkout_credentials(&wf(&w)), "persist-credentials");
    }

    #[test]
    fn expressions_inside_run_fail() {
        let w = good().replace("echo \"$X\"", "echo \"${{ github.head_ref }}\"");
        assert_flags(check_no_expressions_in_run(&wf(&w)), "inside `run:`");
        let block = good().replace(
            "- run: echo \"$X\"",
            "- run: |\n          echo ${{ inputs.x }}",
        );
        assert_flags(check_no_expressions_in_run(&wf(&block)), "inside `run:`");
    }

    #[test]
    fn jobs_without_a_timeout_fail() {
        let w = good().replace("    timeout-minutes: 5\n", "");
        assert_flags(check_timeouts(&wf(&w)), "no timeout-minutes");
        let w = good().replace("timeout-minutes: 5", "timeout-minutes: 0");
        assert_flags(check_timeouts(&wf(&w)), "timeout-minutes");
    }

    #[test]
    fn a_shell_without_pipefail_fails() {
        let w = good().replace("defaults:\n  run:\n    shell: bash\n", "");
        assert_flags(check_pipefail_shell(&wf(&w)), "pipefail");
        let w = good().replace(
            "- run: echo \"$X\"",
            "- run: echo \"$X\"\n        shell: sh",
        );
        assert_flags(check_pipefail_shell(&wf(&w)), "overrides bash");
    }

    #[test]
    fn git_push_fails() {
        let w = good().replace("echo \"$X\"", "git push origin HEAD:main");
        assert_flags(check_no_git_push(&wf(&w)), "git push");
    }

    fn release(concurrency: &str, on: &str) -> Workflow {
        wf(&format!(
            "name: r\non:\n{on}\npermissions: {{}}\n{concurrency}\njobs: {{}}\n"
        ))
    }

    const ON: &str =
        "  schedule:\n    - cron: \"37 4 * * *\"\n  workflow_dispatch:\n    inputs:\n      \
                      force:\n        type: boolean\n      no_publish:\n        type: boolean";
    const CONCURRENCY: &str = "concurrency:\n  group: release\n  cancel-in-progress: false";

    #[test]
    fn release_concurrency_must_be_fixed_and_non_cancelling() {
        assert_eq!(
            check_release_concurrency(&release(CONCURRENCY, ON)),
            Vec::<String>::new()
        );
        assert_flags(
            check_release_concurrency(&release("", ON)),
            "no top-level `concurrency:`",
        );
        let cancelling = CONCURRENCY.replace("false", "true");
        assert_flags(
            check_release_concurrency(&release(&cancelling, ON)),
            "cancel-in-progress",
        );
        let unset = "concurrency:\n  group: release";
        assert_flags(
            check_release_concurrency(&release(unset, ON)),
            "cancel-in-progress",
        );
        let per_ref = CONCURRENCY.replace("group: release", "group: r-${{ github.ref }}");
        assert_flags(
            check_release_concurrency(&release(&per_ref, ON)),
            "not a fixed name",
        );
        let bare = "concurrency: release";
        assert_flags(check_release_concurrency(&release(bare, ON)), "group");
    }

    #[test]
    fn release_triggers_must_be_complete() {
        assert_eq!(
            check_release_triggers(&release(CONCURRENCY, ON)),
            Vec::<String>::new()
        );
        let top_of_hour = ON.replace("37 4", "0 4");
        assert_flags(
            check_release_triggers(&release(CONCURRENCY, &top_of_hour)),
            "off-peak",
        );
        let hourly = ON.replace("37 4 * * *", "37 * * * *");
        assert_flags(
            check_release_triggers(&release(CONCURRENCY, &hourly)),
            "daily",
        );
        let weekly = ON.replace("37 4 * * *", "37 4 * * 1");
        assert_flags(
            check_release_triggers(&release(CONCURRENCY, &weekly)),
            "daily",
        );
        let no_schedule = ON.replace("  schedule:\n    - cron: \"37 4 * * *\"\n", "");
        assert_flags(
            check_release_triggers(&release(CONCURRENCY, &no_schedule)),
            "schedule",
        );
        let no_dry_run = ON.replace("      no_publish:\n        type: boolean", "");
        assert_flags(
            check_release_triggers(&release(CONCURRENCY, &no_dry_run)),
            "no_publish",
        );
        let string_force = ON.replacen("type: boolean", "type: string", 1);
        assert_flags(
            check_release_triggers(&release(CONCURRENCY, &string_force)),
            "force",
        );
        assert_flags(
            check_release_triggers(&release(CONCURRENCY, "  push:")),
            "schedule",
        );
    }

    fn matrix(include: &str, runs_on: &str) -> Workflow {
        wf(&format!(
            "name: m\non: push\npermissions: {{}}\njobs:\n  build:\n    runs-on: {runs_on}\n    \
             strategy:\n      matrix:\n        include:\n{include}\n"
        ))
    }

    const INCLUDE: &str =
        "          - platform: linux/amd64\n            runner: ubuntu-24.04\n          \
                           - platform: linux/arm64\n            runner: ubuntu-24.04-arm";

    #[test]
    fn the_matrix_must_build_both_platforms_natively() {
        let runs_on = "${{ matrix.runner }}";
        assert_eq!(
            check_release_matrix(&matrix(INCLUDE, runs_on)),
            Vec::<String>::new()
        );
        let emulated = INCLUDE.replace("ubuntu-24.04-arm", "ubuntu-24.04");
        assert_flags(
            check_release_matrix(&matrix(&emulated, runs_on)),
            "linux/arm64",
        );
        let amd64_only = INCLUDE
            .split("\n          - platform: linux/arm64")
            .next()
            .unwrap();
        assert_flags(
            check_release_matrix(&matrix(amd64_only, runs_on)),
            "linux/arm64",
        );
        assert_flags(
            check_release_matrix(&matrix(INCLUDE, "ubuntu-latest")),
            "linux/amd64",
        );
    }

    #[test]
    fn a_moving_label_two_releases_or_a_cache_key_without_the_release_fail() {
        let all = load_workflows();
        let raw = |file: &str| all.iter().find(|w| w.file == file).unwrap().raw.clone();
        let with = |file: &str, text: String| -> Vec<Workflow> {
            all.iter()
                .map(|w| {
                    if w.file == file {
                        let mut changed = wf(&text);
                        changed.file = w.file.clone();
                        changed
                    } else {
                        wf(&w.raw)
                    }
                })
                .collect()
        };
        assert_eq!(
            check_one_ubuntu_release(&with(CI_WORKFLOW, raw(CI_WORKFLOW))),
            Vec::<String>::new()
        );
        // An earlier form of the workflow: `ubuntu-latest` for amd64, and a cache key of `runner.os`.
        let release = raw(RELEASE_WORKFLOW);
        assert_flags(
            check_one_ubuntu_release(&with(
                RELEASE_WORKFLOW,
                release.replacen("runs-on: ubuntu-24.04\n", "runs-on: ubuntu-latest\n", 1),
            )),
            "runs on `ubuntu-latest`",
        );
        assert_flags(
            check_one_ubuntu_release(&with(
                RELEASE_WORKFLOW,
                release.replace("runner: ubuntu-24.04\n", "runner: ubuntu-latest\n"),
            )),
            "runs on `ubuntu-latest`",
        );
        assert_flags(
            check_one_ubuntu_release(&with(
                CI_WORKFLOW,
                raw(CI_WORKFLOW).replacen("runs-on: ubuntu-24.04", "runs-on: ubuntu-26.04", 1),
            )),
            "more than one Ubuntu release",
        );
        assert_flags(
            check_one_ubuntu_release(&with(
                RELEASE_WORKFLOW,
                release.replacen(
                    "key: xtask-ubuntu-24.04-${{ runner.arch }}-",
                    "key: xtask-${{ runner.os }}-${{ runner.arch }}-",
                    1,
                ),
            )),
            "does not name ubuntu-24.04",
        );
    }

    fn release_steps(runs: &[&str]) -> Workflow {
        let steps: String = runs.iter().map(|r| format!("      - run: {r}\n")).collect();
        wf(&format!(
            "name: r\non: push\npermissions: {{}}\njobs:\n  a:\n    runs-on: x\n    steps:\n{steps}"
        ))
    }

    #[test]
    fn the_release_must_go_draft_upload_publish() {
        let create = "gh release create \"$TAG\" --draft";
        let upload = "gh release upload \"$TAG\" a";
        let publish = "gh release edit \"$TAG\" --draft=false";
        assert_eq!(
            check_release_draft_order(&release_steps(&[create, upload, publish])),
            Vec::<String>::new()
        );
        assert_flags(
            check_release_draft_order(&release_steps(&[create, publish, upload])),
            "out of order",
        );
        let not_draft = "gh release create \"$TAG\"";
        assert_flags(
            check_release_draft_order(&release_steps(&[not_draft, upload, publish])),
            "missing",
        );
        assert_flags(
            check_release_draft_order(&release_steps(&[create, upload])),
            "missing",
        );
    }

    #[test]
    fn verifiers_missing_from_a_ship_call_or_built_with_write_permissions_fail() {
        let all = load_workflows();
        let good = release_workflow(&all).raw.clone();
        assert_eq!(check_verifiers(&wf(&good)), Vec::<String>::new());
        let tag_call = "--assets release/assets --verifiers release/verifiers\n";
        assert_eq!(
            good.matches(tag_call).count(),
            1,
            "the Tag step's call ends the line"
        );
        assert_flags(
            check_verifiers(&wf(&good.replacen(
                tag_call,
                "--assets release/assets\n",
                1,
            ))),
            "same `--verifiers DIR`",
        );
        assert_flags(
            check_verifiers(&wf(&good.replace(
                "          path: release/verifiers\n",
                "          path: elsewhere\n",
            ))),
            "downloads the `verifiers` artifact",
        );
        let read_only = "    permissions:\n      contents: read # checkout\n    steps:\n";
        assert_eq!(good.matches(read_only).count(), 1);
        assert_flags(
            check_verifiers(&wf(&good.replace(
                read_only,
                &read_only.replace("contents: read # checkout", "contents: write"),
            ))),
            "write permissions",
        );
    }

    #[test]
    fn attestations_out_of_order_incomplete_or_without_permissions_fail() {
        let all = load_workflows();
        let good = release_workflow(&all).raw.clone();
        assert_eq!(check_attestations(&wf(&good)), Vec::<String>::new());
        // The tag and the release in a job that does not wait for the attestations: a consumer
        // could see an unattested tag.
        let ship_needs = "    needs: [plan, receipt, attest]\n";
        assert_eq!(good.matches(ship_needs).count(), 1);
        let problems = check_attestations(&wf(
            &good.replace(ship_needs, "    needs: [plan, receipt]\n")
        ));
        assert_flags(problems.clone(), "must come after every attest step");
        assert_flags(
            problems,
            "`gh release create` must come after every attest step",
        );
        // Attesting before the receipt is verified.
        assert_flags(
            check_attestations(&wf(&good.replace(" --defer-tag", ""))),
            "must follow `release ship --defer-tag`",
        );
        assert_flags(
            check_attestations(&wf(
                &good.replace("      id-token: write", "      id-token: none")
            )),
            "without `id-token: write`",
        );
        assert_flags(
            check_attestations(&wf(&good.replace(
                "subject-digest: ${{ needs.receipt.outputs.index_digest }}",
                "subject-digest: ${{ needs.receipt.outputs.digest_linux_amd64 }}",
            ))),
            "index digest is not attested",
        );
        // An earlier form of the workflow: the deprecated attest-sbom, and pushes to the registry with
        // no login before them and no `artifact-metadata: write`.
        let attest = "uses: actions/attest@59d89421af93a897026c735860bf21b6eb4f7b26 # v4.1.0";
        let index = "          subject-digest: ${{ needs.receipt.outputs.index_digest }}\n";
        assert_eq!(good.matches(index).count(), 1);
        let pushed = good.replacen(
            index,
            &format!("{index}          push-to-registry: true\n"),
            1,
        );
        let problems = check_attestations(&wf(&pushed));
        assert_flags(problems.clone(), "without a registry login before it");
        assert_flags(problems, "without `artifact-metadata: write`");
        let logged_in = pushed
            .replace(
                "      - name: Attest the image index\n",
                "      - name: Log in\n        run: echo \"$T\" | docker login ghcr.io -u x --password-stdin\n      - name: Attest the image index\n",
            )
            .replace(
                "      attestations: write # store the attestations in the repository\n",
                "      attestations: write # store the attestations in the repository\n      artifact-metadata: write\n      packages: write\n",
            );
        assert_eq!(check_attestations(&wf(&logged_in)), Vec::<String>::new());
        assert_flags(
            check_attestations(&wf(&good.replacen(
                attest,
                "uses: actions/attest-sbom@c604332985a26aa8cf1bdc465b92731239ec6b9e # v4.1.0",
                1,
            ))),
            "use actions/attest",
        );
        assert_flags(
            check_attestations(&wf(
                &good.replace("subject-path: release/assets/*", "subject-path: README.md")
            )),
            "assets are not attested",
        );
        assert_flags(
            check_attestations(&wf(&good.replace(
                "sbom-path: release/assets/sbom-linux-arm64.spdx.json",
                "sbom-path: x.json",
            ))),
            "1 SPDX SBOM attestation(s); one per platform",
        );
        assert_flags(
            check_attestations(&wf(&good.replace(
                "sbom-path: release/assets/sbom-linux-amd64.cdx.json",
                "sbom-path: release/assets/sbom-linux-amd64.spdx.json",
            ))),
            "1 CycloneDX SBOM attestation(s); one per platform",
        );
    }

    /// The shape `ship` had when one job held every permission: it compiled the tool and ran
    /// `cargo xtask` with the registry token, beside an OIDC token.
    const ONE_SHIP_JOB: &str = "name: r\non: push\npermissions: {}\njobs:\n  ship:\n    runs-on: x\n    permissions:\n      contents: write\n      packages: write\n      id-token: write\n    steps:\n      - name: Rust build cache\n        uses: actions/cache@27d5ce7f107fe9357f9df03efb73ab90386fccae # v5.0.5\n        with:\n          path: target\n          key: k\n      - name: Build the tool\n        run: cargo build --locked --package xtask\n      - name: Index and receipt\n        env:\n          XTASK_REGISTRY_PASSWORD: ${{ github.token }}\n        run: cargo xtask release ship --plan p --defer-tag\n";

    #[test]
    fn a_signing_job_that_compiles_or_a_token_that_reaches_cargo_fails() {
        let problems = check_least_privilege(&wf(ONE_SHIP_JOB));
        assert_flags(problems.clone(), "uses actions/cache");
        assert_flags(
            problems.clone(),
            "(id-token: write, contents: write), step 2 (Build the tool): runs `cargo`",
        );
        assert_flags(problems.clone(), "XTASK_REGISTRY_PASSWORD reaches `cargo`");
        // Split: the build without permissions to sign, the binary passed on; still, a push in
        // the releasing job by a binary nobody passed on fails, and so does a token in the
        // job's env or in a step that pushes nothing.
        let split = "name: r\non: push\npermissions: {}\njobs:\n  receipt:\n    runs-on: x\n    permissions:\n      packages: write\n    steps:\n      - name: Build\n        run: |\n          cargo build --locked --package xtask\n          cp target/debug/xtask out/xtask\n      - name: Push\n        env:\n          XTASK_REGISTRY_PASSWORD: ${{ github.token }}\n        run: out/xtask release ship --defer-tag\n      - uses: actions/upload-artifact@bbbca2ddaa5d8feaa63e36b76fdaad77386f024f # v7.0.0\n        with:\n          name: tool\n          path: out/xtask\n  ship:\n    needs: receipt\n    runs-on: x\n    permissions:\n      contents: write\n      packages: write\n    steps:\n      - uses: actions/download-artifact@3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c # v8.0.1\n        with:\n          name: tool\n          path: out\n      - run: chmod +x out/xtask\n      - name: Tag\n        env:\n          XTASK_REGISTRY_PASSWORD: ${{ github.token }}\n        run: out/xtask release ship\n      - name: Release\n        env:\n          GH_TOKEN: ${{ github.token }}\n        run: |\n          if gh release view \"$T\" > v.json 2> e; then jq -r .isDraft v.json; fi\n          for d in $X; do gh release delete \"$d\" --yes; done\n";
        assert_eq!(check_least_privilege(&wf(split)), Vec::<String>::new());
        let bad = [
            (
                split.replace("out/xtask release ship\n", "other/xtask release ship\n"),
                "runs `other/xtask`, neither gh",
            ),
            (
                split.replace("          name: tool\n          path: out\n", "          name: plan\n          path: out\n"),
                "runs `out/xtask`, neither gh",
            ),
            (
                split.replace("      - name: Release\n", "      - name: Release\n        run: cargo xtask release existing\n      - name: Again\n"),
                "runs `cargo`; build in a job without these permissions",
            ),
            (
                split.replace("    permissions:\n      packages: write\n    steps:\n", "    permissions:\n      packages: write\n    env:\n      T: ${{ secrets.X }}\n    steps:\n"),
                "a token in the job's env (T)",
            ),
            (
                split.replace("out/xtask release ship --defer-tag", "out/xtask release existing"),
                "in a step that runs no pushing phase",
            ),
            (
                split.replace("          cargo build --locked --package xtask\n          cp target/debug/xtask out/xtask\n", "          echo none\n"),
                "XTASK_REGISTRY_PASSWORD reaches `out/xtask`",
            ),
        ];
        for (workflow, needle) in bad {
            assert_flags(check_least_privilege(&wf(&workflow)), needle);
        }
    }

    #[test]
    fn commands_are_the_first_word_of_each_simple_command() {
        assert_eq!(
            commands("found=x\nif gh a > f 2> e; then\n  if [ \"$(jq -r .d f)\" = false ]; then\n    gh b\n  fi\nelif grep -qx 'n' e; then\n  rm f\nfi\nfor d in $S; do gh c \"$d\"; done\n! cargo \\\n  xtask x | tee o && release/bin/xtask y\n"),
            ["gh", "[", "jq", "gh", "grep", "rm", "gh", "cargo", "tee", "release/bin/xtask"]
        );
    }

    #[test]
    fn a_token_outside_the_gh_steps_fails() {
        let job = |env_at_job: &str, step_env: &str, run: &str| {
            wf(&format!(
                "name: r\non: push\npermissions: {{}}\njobs:\n  ship:\n    runs-on: x\n{env_at_job}    \
                 steps:\n      - name: s\n{step_env}        run: {run}\n"
            ))
        };
        let token = "        env:\n          GH_TOKEN: t\n";
        assert!(check_token_only_where_gh_runs(&job("", token, "gh release view x")).is_empty());
        assert_flags(
            check_token_only_where_gh_runs(&job("", token, "cargo xtask release ship")),
            "does not run `gh`",
        );
        assert_flags(
            check_token_only_where_gh_runs(&job(
                "    env:\n      GH_TOKEN: t\n",
                "",
                "gh release view x",
            )),
            "job's env",
        );
    }

    #[test]
    fn ci_missing_a_check_fails() {
        let w = release_steps(&[
            "cargo fmt --all --check",
            "cargo test",
            "cargo xtask lock --check",
        ]);
        assert_flags(check_ci_steps(&w), "cargo clippy");
    }

    #[test]
    fn xtask_calls_are_found_with_their_flags() {
        let script = "args=(--json)\ncargo xtask gate \"${args[@]}\"\n\
                      cargo xtask build --platform \"$P\" --json | tee out.json\n\
                      cargo xtask receipt verify dir/r.json --artifacts=dir && echo ok\n\
                      x=\"$(cargo xtask smoke --image \"$I\" \\\n  --json)\"";
        assert_eq!(
            xtask_calls(script),
            vec![
                XtaskCall {
                    subcommand: vec!["gate".into()],
                    flags: vec![]
                },
                XtaskCall {
                    subcommand: vec!["build".into()],
                    flags: vec!["--platform".into(), "--json".into()]
                },
                XtaskCall {
                    subcommand: vec!["receipt".into(), "verify".into()],
                    flags: vec!["--artifacts".into()]
                },
                XtaskCall {
                    subcommand: vec!["smoke".into()],
                    flags: vec!["--image".into(), "--json".into()]
                },
            ]
        );
    }

    #[test]
    fn an_unknown_xtask_subcommand_or_flag_is_rejected_by_the_binary() {
        let unknown = xtask().args(["no-such-command", "--help"]).run();
        assert!(!unknown.success(), "an unknown subcommand must fail");
        let help = xtask().args(["gate", "--help"]).run();
        assert!(help.success());
        let help = help.stdout_text();
        assert!(help.contains("--force") && !help.contains("--no-such-flag"));
    }
}
