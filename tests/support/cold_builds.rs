//! The suite's two cold Rust builds as the runner, from the release workflow's own jobs, on a
//! lane of their own beside the engine tests:
//!
//! - the `plan` job up to its "Build the tool" step ([`plan_build_alone`]): `cargo build
//!   --locked --package xtask` from an empty cache;
//! - the `verifier` job alone (`super::verifier`): both static verifiers cross-compiled from
//!   an empty cache; its binaries are the consumer tests' verifiers.
//!
//! Each saves its `actions/cache` entry into the store the workflow replays share
//! ([`super::replay_cache_store`]), so the scenarios of tests/it/replay.rs restore both, as
//! every run after the first does on GitHub, instead of compiling cold inside a scenario
//! while nothing else runs. What proves the cold builds is these two replays: the committed
//! steps, as the runner, from nothing, every step checked.
//!
//! Why a lane: an engine test can leave a core idle (an arm64 build and smoke run under qemu is
//! one process at a time, a smoke run waits on its harnesses, a push on the registry, a replay
//! runs one job at a time), and a compile fills it. The lane starts with the first heavy engine
//! test ([`start_in_background`]), at a lower priority than the tests (nice 5: the engine's own
//! work, in dockerd's processes, keeps the default), on a runner home of its own
//! (`actions_replay::own_runner_home`: a mount namespace for the lane's thread, as GitHub gives
//! each job its own machine), so its replays never wait for a scenario's workspace lock nor make
//! one wait. It runs the two replays one after the other, in the order they are needed: the
//! tool first (every scenario's plan restores it), then the verifier (only a due day's
//! `verifier` job and the consumer tests need it). Whoever needs a result waits for it. The
//! names order the tests so that what waits comes late (tests/it/main.rs): after
//! `release_run`, the scenarios that need only the tool (`replay::a_*`) run while the verifier
//! still builds in their idle time, and the due day (`replay::the_due_day_*`) and the consumer
//! tests (`replayed_consumer`) come last.

use std::sync::OnceLock;

use actions_replay::{run_workflow, Replay, WorkflowRun};
use serde_json::{json, Value};

use super::{checkout_text, runner_user, scratch_repo};

const WORKFLOW: &str = ".github/workflows/update-template.yml";
const PLAN_JOB: &str = "plan";
/// The last step of the plan job that the tool's cold build needs; everything after it
/// (the receipt's download, the plan itself, its upload) is the scenarios' to run.
const BUILD_STEP: &str = "Build the tool";

/// `update-template.yml` with only its `plan` job, up to and including "Build the tool": the
/// steps before it (checkout, the Rust version, the build cache) as committed, the job's
/// `outputs` gone (they name the plan step, which is not there). Each removal must find what
/// it removes, so a change to the workflow cannot silently leave this replaying something else.
pub fn plan_build_alone(workflow: &str) -> String {
    only_job(workflow, PLAN_JOB, |job_map| {
        assert!(
        job_map.get("needs").is_none() && job_map.get("if").is_none(),
        "{WORKFLOW}: the `{PLAN_JOB}` job gained `needs` or `if`; update tests/support/cold_builds.rs"
    );
        assert!(
        job_map.remove("outputs").is_some(),
        "{WORKFLOW}: the `{PLAN_JOB}` job has no `outputs`; update tests/support/cold_builds.rs"
    );
        let steps = job_map["steps"]
            .as_array_mut()
            .expect("the plan job has steps");
        let build = steps
        .iter()
        .position(|s| s["name"] == BUILD_STEP)
        .unwrap_or_else(|| {
            panic!("{WORKFLOW}: the `{PLAN_JOB}` job has no step {BUILD_STEP:?}; update tests/support/cold_builds.rs")
        });
        steps.truncate(build + 1);
    })
}

/// `workflow` (the release workflow's text) with only its job `name`, changed by `edit`; the
/// workflow's top level (triggers, permissions, defaults, env, concurrency) as it is.
pub fn only_job(
    workflow: &str,
    name: &str,
    edit: impl FnOnce(&mut serde_json::Map<String, Value>),
) -> String {
    let mut doc: Value = yaml_serde::from_str(workflow).expect("the workflow is YAML");
    let jobs = doc["jobs"].as_object_mut().expect("the workflow has jobs");
    let mut job = jobs
        .remove(name)
        .unwrap_or_else(|| panic!("{WORKFLOW} has no `{name}` job"));
    edit(job.as_object_mut().expect("a job is a mapping"));
    jobs.clear();
    jobs.insert(name.into(), job);
    yaml_serde::to_string(&doc).expect("a workflow serializes")
}

/// Checks that `alone` holds only the job `name` and the committed workflow's top level.
#[cfg(test)]
pub fn assert_only_job(alone: &Value, committed: &Value, name: &str) {
    let jobs: Vec<&String> = alone["jobs"].as_object().unwrap().keys().collect();
    assert_eq!(jobs, [name]);
    for key in ["on", "permissions", "defaults", "env", "concurrency"] {
        assert_eq!(alone[key], committed[key], "{key}");
    }
}

/// Replays `workflow` (one job of the release workflow, cut out of it) on a scratch copy of
/// this repository, as a dispatch, with the shared cache store; prints its timings past
/// libtest's capture and fails unless it succeeded. `what` names it in the output.
pub fn replay_alone(what: &str, workflow: &str) -> WorkflowRun {
    runner_user();
    let source = scratch_repo("job-alone-");
    let file = source.path().join("job-alone.yml");
    std::fs::write(&file, workflow).unwrap();
    let replay = Replay::new(&file, source.path())
        .unwrap()
        // The scenarios' repository name (tests/it/replay.rs): the workspace path is made from
        // it, and a cache entry holds a target directory built there.
        .repository("sandbox0/coding-agent-template")
        .cache_dir(super::replay_cache_store())
        .event("workflow_dispatch", json!({ "inputs": {} }));
    let run = run_workflow(replay).unwrap_or_else(|e| panic!("{e:#}"));
    let text = format!("replay of the {what} alone: {}", run.timings());
    let _ = std::io::Write::write_all(&mut std::io::stderr(), text.as_bytes());
    run.assert_success();
    run
}

/// The tool's cold build, replayed once per test process; its cache entry lands in the shared
/// store.
fn tool_built() {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        replay_alone(
            "plan job's tool build",
            &plan_build_alone(&checkout_text(WORKFLOW)),
        );
    });
}

/// Makes sure the tool build's `actions/cache` entry is in the shared store before a replay
/// of the whole workflow starts: made here unless the lane has made it, or is making it.
pub fn tool_cache() {
    tool_built();
}

/// Whether this test process runs something that waits for the lane: the whole binary (no
/// filter), or a filter naming the consumer tests or the replays (libtest keeps a test whose
/// name contains any filter). A run of other areas alone starts no background build that its
/// end would leave running as orphans.
fn lane_wanted(args: &[String]) -> bool {
    // libtest's options that take their value as the next argument.
    const TAKES_VALUE: [&str; 6] = [
        "--skip",
        "--test-threads",
        "--format",
        "--color",
        "--logfile",
        "-Z",
    ];
    let mut filters = Vec::new();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        if TAKES_VALUE.contains(&arg.as_str()) {
            args.next();
        } else if !arg.starts_with('-') {
            filters.push(arg.as_str());
        }
    }
    const WAITERS: [&str; 2] = ["replayed_consumer::", "replay::"];
    filters.is_empty()
        || filters
            .iter()
            .any(|f| WAITERS.iter().any(|w| w.contains(f) || f.starts_with(w)))
}

/// Starts the lane (see the module) once per test process, when [`lane_wanted`]; it returns
/// at once.
pub fn start_in_background() {
    static STARTED: OnceLock<()> = OnceLock::new();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !lane_wanted(&args) {
        return;
    }
    STARTED.get_or_init(|| {
        std::thread::spawn(|| {
            // Linux keeps a nice value per thread, and the replay engine starts every step's
            // processes from the thread that runs it: the lane's builds inherit this.
            // SAFETY: setpriority with PRIO_PROCESS and 0 changes only the calling thread.
            unsafe {
                libc::setpriority(libc::PRIO_PROCESS, 0, 5);
            }
            // A runner machine of its own, as GitHub gives each job: the lane's replays do not
            // hold the shared home's workspace lock, so the scenarios that need only the tool
            // run while the verifier still builds. Not root: the lane takes turns on the shared
            // home instead, and only the order of the tests helps.
            let home = super::run_dir().join("lane-runner-home");
            match actions_replay::own_runner_home(&home) {
                Ok(true) => {}
                Ok(false) => eprintln!(
                    "the lane of cold builds shares /home/runner (not root: no mount namespace)"
                ),
                Err(e) => panic!("a runner home of its own for the lane: {e:#}"),
            }
            tool_built();
            super::verifier::verifier_job_cache();
            // What the builds left in the lane's home is in the cache store now. Only these
            // (never the home itself: its ~/.rustup and ~/.cargo/bin are the shared home's,
            // bound in, in this thread's namespace).
            for left in ["work", ".cargo/registry", ".cache"] {
                let _ = std::fs::remove_dir_all(home.join(left));
            }
        });
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_job_keeps_its_steps_up_to_the_tool_build_unchanged() {
        let text = checkout_text(WORKFLOW);
        let alone: Value = yaml_serde::from_str(&plan_build_alone(&text)).unwrap();
        let committed: Value = yaml_serde::from_str(&text).unwrap();
        assert_only_job(&alone, &committed, PLAN_JOB);
        let steps = alone["jobs"][PLAN_JOB]["steps"].as_array().unwrap();
        let committed_steps = committed["jobs"][PLAN_JOB]["steps"].as_array().unwrap();
        assert_eq!(steps.last().unwrap()["name"], BUILD_STEP);
        assert_eq!(
            steps[..],
            committed_steps[..steps.len()],
            "the steps as committed"
        );
        for key in ["runs-on", "permissions", "timeout-minutes"] {
            assert_eq!(
                alone["jobs"][PLAN_JOB][key], committed["jobs"][PLAN_JOB][key],
                "{key}"
            );
        }
        for key in ["on", "permissions", "defaults", "env", "concurrency"] {
            assert_eq!(alone[key], committed[key], "{key}");
        }
    }

    #[test]
    fn the_lane_starts_for_the_whole_binary_and_for_what_waits_for_it() {
        let wanted =
            |args: &[&str]| lane_wanted(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>());
        assert!(wanted(&[]));
        assert!(wanted(&["--test-threads=2"]));
        assert!(wanted(&["--test-threads", "2", "--skip", "image::"]));
        assert!(wanted(&["replay::"]));
        assert!(wanted(&["replay::the_due_day"]));
        assert!(wanted(&["image::", "replayed_con"]));
        assert!(!wanted(&["image::"]));
        assert!(!wanted(&["image::amd64", "--test-threads", "1"]));
        assert!(!wanted(&["--skip", "replay::", "image::"]));
    }

    #[test]
    #[should_panic(expected = "has no step \"Build the tool\"")]
    fn a_plan_job_whose_tool_build_was_renamed_is_refused() {
        let text = checkout_text(WORKFLOW);
        assert!(text.contains("- name: Build the tool\n"));
        plan_build_alone(&text.replace("- name: Build the tool\n", "- name: Build it\n"));
    }
}
