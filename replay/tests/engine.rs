//! The replay engine's own tests: small fixture workflows whose steps are `echo`, `cat` and
//! `id -u`, replayed as the non-root runner user. No Docker, no cargo builds inside, and no
//! crate of this workspace: `cargo test -p actions-replay` builds this crate alone.
//!
//! The tests that replay need the runner user (`scripts/setup-runner-user.sh`, as root), so
//! they run in the tier that runs the xtask's engine tests ([`runs`]). Their jobs take turns
//! with any other replay on this machine on the runner's one workspace path (an flock held per
//! job, `lock_workspace`), so a check of how long something took times the step, never the
//! whole run.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, OnceLock};

use actions_replay::expr;
use actions_replay::{
    committed_repo, rerun_failed, rerun_job, run_workflow, JobRun, Replay, StandIn, Status,
    WorkflowRun,
};
use serde_json::{json, Value};

/// `XTASK_ENGINE_TESTS`, the variable that decides whether the tests needing the host
/// scripts/test.sh sets up run (the xtask's tests/support/docker.rs reads the same one).
const ENGINE_TESTS_ENV: &str = "XTASK_ENGINE_TESTS";

/// Whether a test that replays runs: with `XTASK_ENGINE_TESTS=1` (scripts/test.sh), or unset
/// under CI, it runs and fails when the runner user is missing, naming the script that makes
/// it; with `0`, or unset outside CI, it passes unrun and says so on stderr (written directly:
/// libtest captures a passing test's `eprintln!`). So a plain `cargo test` on a bare machine
/// passes, and CI cannot pass by skipping.
fn runs() -> bool {
    static TIER: OnceLock<bool> = OnceLock::new();
    let required = *TIER.get_or_init(|| {
        let ci = std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
        match std::env::var(ENGINE_TESTS_ENV).ok().as_deref().map(str::trim) {
            Some("1") => true,
            Some("0") => false,
            Some(other) => panic!(
                "{ENGINE_TESTS_ENV}={other:?}: use 1 (run the tests that need the runner user) or 0 (skip them)"
            ),
            None => ci,
        }
    });
    if required {
        if let Err(e) = actions_replay::runner_ids() {
            panic!("{e:#} ({ENGINE_TESTS_ENV}=0 skips the tests that need it)");
        }
        return true;
    }
    let name = std::thread::current().name().unwrap_or("?").to_string();
    let _ = writeln!(
        std::io::stderr(),
        "skipped {name}: needs the runner user scripts/setup-runner-user.sh makes \
         ({ENGINE_TESTS_ENV}=1 runs it)"
    );
    false
}

/// A throwaway git repository (the source `actions/checkout` clones) with one commit, and a
/// workflow file beside it.
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(repo.join("src")).unwrap();
        std::fs::write(repo.join("hello.txt"), "hello from the source repository\n").unwrap();
        std::fs::write(repo.join("src/a.txt"), "a\n").unwrap();
        let git = |args: &[&str]| {
            let out = Command::new("git")
                .args(args)
                .current_dir(&repo)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "git {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let commit = |message: &str| {
            git(&["add", "."]);
            git(&["-c", "user.name=t", "-c", "user.email=t@example.invalid"]
                .into_iter()
                .chain(["commit", "--quiet", "-m", message])
                .collect::<Vec<_>>());
        };
        git(&["init", "--quiet", "--initial-branch=main"]);
        commit("first");
        std::fs::write(repo.join("src/b.txt"), "b\n").unwrap();
        commit("second");
        Fixture { dir }
    }
    fn repo(&self) -> PathBuf {
        self.dir.path().join("repo")
    }
    fn workflow(&self, name: &str, yaml: &str) -> Replay {
        let path = self.dir.path().join(name);
        std::fs::write(&path, yaml).unwrap();
        Replay::new(&path, self.repo()).unwrap()
    }
}

fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

fn replay(yaml: &str) -> (Fixture, Replay) {
    let f = Fixture::new();
    let r = f.workflow("wf.yml", yaml);
    (f, r)
}

/// Replays `yaml` to its end, whatever its jobs' results.
fn replay_to_end(yaml: &str) -> (Fixture, WorkflowRun) {
    let (f, r) = replay(yaml);
    let run = run_workflow(r).unwrap_or_else(|e| panic!("{e:#}"));
    (f, run)
}

fn run_ok(yaml: &str) -> (Fixture, WorkflowRun) {
    let (f, run) = replay_to_end(yaml);
    run.assert_success();
    (f, run)
}

/// The replay error of a workflow that must not replay.
fn replay_error(yaml: &str) -> String {
    let (_f, r) = replay(yaml);
    match run_workflow(r) {
        Ok(run) => panic!(
            "the replay should have stopped with an error; jobs: {:?}",
            run.jobs
                .iter()
                .map(|j| (&j.name, j.status))
                .collect::<Vec<_>>()
        ),
        Err(e) => format!("{e:#}"),
    }
}

const ON: &str = "on:\n  workflow_dispatch:\n  push:\n";

// ---------------------------------------------------------------------------------------------
// The runner user and the step environment
// ---------------------------------------------------------------------------------------------

#[test]
fn steps_run_as_the_non_root_runner_with_github_s_environment_only() {
    if !runs() {
        return;
    }
    // What the caller's environment has (cargo sets this for test binaries) must not reach
    // the step.
    assert!(
        std::env::var("CARGO_PKG_NAME").is_ok(),
        "the check below needs a caller variable"
    );
    let (_f, r) = replay(&format!(
        r#"name: identity
{ON}
env:
  WORKFLOW_LEVEL: wf
jobs:
  who:
    runs-on: ubuntu-latest
    env:
      JOB_LEVEL: job
    steps:
      - id: id
        run: |
          echo "uid=$(id -u)" >> "$GITHUB_OUTPUT"
          echo "user=$(id -un)" >> "$GITHUB_OUTPUT"
          echo "groups=$(id -Gn)" >> "$GITHUB_OUTPUT"
      - name: sudo works without a password
        run: sudo -n true
      - name: cargo works
        run: cargo --version
      - name: environment
        env:
          STEP_LEVEL: step
        run: |
          test -z "${{CARGO_PKG_NAME:-}}"
          test "$HOME" = /home/runner
          test "$CI" = true && test "$GITHUB_ACTIONS" = true
          test "$RUNNER_OS" = Linux && test "$RUNNER_ARCH" = X64
          test "$PWD" = "$GITHUB_WORKSPACE"
          test -d "$RUNNER_TEMP" && test -w "$RUNNER_TEMP"
          test "$GITHUB_REPOSITORY" = sandbox0/coding-agent-template
          test "$GITHUB_REPOSITORY_OWNER" = sandbox0
          test "$GITHUB_REF" = refs/heads/main && test "$GITHUB_REF_NAME" = main
          test "$GITHUB_RUN_ATTEMPT" = 1 && test -n "$GITHUB_RUN_ID" && test "$GITHUB_JOB" = who
          test "$GITHUB_EVENT_NAME" = workflow_dispatch
          test "$(jq -r .repository.default_branch "$GITHUB_EVENT_PATH")" = main
          test "${{#GITHUB_SHA}}" = 40
          test "$WORKFLOW_LEVEL $JOB_LEVEL $STEP_LEVEL" = "wf job step"
          case ":$PATH:" in *":/home/runner/.cargo/bin:"*) ;; *) echo "no cargo bin in $PATH"; exit 1;; esac
          test "$(command -v gh)" != ""
      - name: secrets are masked in logs
        env:
          TOKEN: ${{{{ github.token }}}}
          PASSWORD: ${{{{ secrets.REGISTRY_PASSWORD }}}}
        run: echo "token=$TOKEN password=$PASSWORD"
      - name: default shell has no pipefail, bash has
        run: |
          false | true
          echo "ok"
"#
    ));
    let run = run_workflow(r.secret("REGISTRY_PASSWORD", "hunter2-secret")).unwrap();
    run.assert_success();
    let job = run.job("who");
    assert_eq!(
        job.log_of("secrets are masked in logs").lines().last(),
        Some("token=*** password=***")
    );
    let outputs = &job.step("id").outputs;
    assert_ne!(outputs["uid"], "0", "steps must not run as root");
    assert_eq!(outputs["user"], "runner");
    assert!(
        job.log_of("cargo works").contains("cargo "),
        "{}",
        job.log_of("cargo works")
    );
    assert_eq!(job.runs_on, json!("ubuntu-latest"));
}

/// A replay on a runner home of its own (`own_runner_home`: another machine, as GitHub gives
/// each job) runs while the shared home's workspace is locked, sees the runner image's
/// toolchain, and leaves its files in its own home, never in the shared one.
#[test]
fn a_thread_with_a_runner_home_of_its_own_replays_beside_the_shared_home() {
    if !runs() {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let own = scratch.path().join("home");
    let probe = format!("own-home-probe-{}", std::process::id());
    // Held for the whole test: a replay on the shared home would wait for it.
    let shared_lock = actions_replay::lock_workspace().unwrap();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let (thread_home, thread_probe) = (own.clone(), probe.clone());
    std::thread::spawn(move || {
        let result = std::panic::catch_unwind(move || {
            if !actions_replay::own_runner_home(&thread_home).unwrap() {
                return None;
            }
            let (_f, run) = run_ok(&format!(
                r#"name: own home
{ON}
jobs:
  elsewhere:
    runs-on: ubuntu-latest
    steps:
      - run: |
          test "$HOME" = /home/runner
          test "$PWD" = /home/runner/work/coding-agent-template/coding-agent-template
          cargo --version
          echo mine > "$HOME/{thread_probe}"
          mkdir -p "$HOME/.cargo/registry" && touch "$HOME/.cargo/registry/{thread_probe}"
"#
            ));
            Some(run)
        });
        let _ = done_tx.send(result.map_err(|_| "the replay panicked"));
    });
    let run = match done_rx.recv_timeout(std::time::Duration::from_secs(120)) {
        Ok(Ok(Some(run))) => run,
        Ok(Ok(None)) => {
            // SAFETY: geteuid has no failure mode.
            let root = unsafe { libc::geteuid() } == 0;
            assert!(
                !root,
                "as root, own_runner_home must give the thread a home of its own; it declined"
            );
            eprintln!("not root: own_runner_home leaves the shared home, nothing to check");
            return;
        }
        Ok(Err(e)) => panic!("{e} (its log is above)"),
        Err(_) => panic!(
            "the replay on a home of its own did not end in 120 s: it is waiting for the shared \
             workspace lock this test holds, so its home is not its own"
        ),
    };
    drop(shared_lock);
    assert_eq!(run.result("elsewhere"), Status::Success);
    assert_eq!(
        std::fs::read_to_string(own.join(&probe)).unwrap(),
        "mine\n",
        "the step wrote into the home of its own"
    );
    assert!(own.join(".cargo/registry").join(&probe).exists());
    let shared = std::path::Path::new(actions_replay::RUNNER_HOME);
    assert!(
        !shared.join(&probe).exists(),
        "nothing reaches the shared home"
    );
    assert!(!shared.join(".cargo/registry").join(&probe).exists());
    // The toolchain was bound in, not copied: the shared home still holds it as it was.
    assert!(shared.join(".cargo/bin/cargo").exists());
}

#[test]
fn bash_shell_has_pipefail_and_the_default_shell_does_not() {
    if !runs() {
        return;
    }
    let (_f, r) = replay(&format!(
        r#"{ON}
jobs:
  j:
    runs-on: ubuntu-latest
    steps:
      - name: implicit
        run: false | true
      - name: explicit bash
        shell: bash
        run: false | true
"#
    ));
    let run = run_workflow(r).unwrap();
    let job = run.job("j");
    assert_eq!(job.step("implicit").outcome, Status::Success);
    assert_eq!(job.step("explicit bash").outcome, Status::Failure);
    assert!(job.log_of("explicit bash").contains("exit code 1"));
}

#[test]
fn working_directory_comes_from_the_step_or_the_defaults_and_background_processes_end_with_the_job()
{
    if !runs() {
        return;
    }
    let (_f, run) = replay_to_end(&format!(
        r#"{ON}
jobs:
  j:
    runs-on: ubuntu-latest
    defaults:
      run:
        working-directory: sub
    steps:
      - name: prepare
        working-directory: .
        run: mkdir -p sub/deeper
      - id: where
        run: |
          echo "default=${{PWD#"$GITHUB_WORKSPACE"/}}" >> "$GITHUB_OUTPUT"
          sleep 600 &
          echo "pid=$!" >> "$GITHUB_OUTPUT"
      - id: deeper
        working-directory: sub/deeper
        run: echo "dir=${{PWD#"$GITHUB_WORKSPACE"/}}" >> "$GITHUB_OUTPUT"
      - name: missing
        working-directory: nowhere
        run: echo never
"#
    ));
    let job = run.job("j");
    assert_eq!(job.step("where").outputs["default"], "sub");
    assert_eq!(job.step("deeper").outputs["dir"], "sub/deeper");
    assert_eq!(job.step("missing").outcome, Status::Failure);
    assert!(job.log_of("missing").contains("working directory"));
    // The background `sleep` a step started is gone once the job ended.
    let pid = &job.step("where").outputs["pid"];
    std::thread::sleep(std::time::Duration::from_millis(200));
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    // Gone, or a zombie this container's init has not reaped yet: dead either way.
    let alive = !status.is_empty() && !status.contains("State:\tZ");
    assert!(
        !alive,
        "the step's background process {pid} outlived the job:\n{status}"
    );
}

// ---------------------------------------------------------------------------------------------
// Outputs, env files, summaries
// ---------------------------------------------------------------------------------------------

#[test]
fn outputs_flow_from_step_to_job_to_needs_with_env_path_and_summary_files() {
    if !runs() {
        return;
    }
    let (_f, run) = run_ok(&format!(
        r#"{ON}
defaults:
  run:
    shell: bash
jobs:
  produce:
    runs-on: ubuntu-latest
    outputs:
      word: ${{{{ steps.make.outputs.word }}}}
      text: ${{{{ steps.make.outputs.text }}}}
    steps:
      - id: make
        run: |
          echo "word=hello" >> "$GITHUB_OUTPUT"
          {{ echo "text<<EOF"; echo "line one"; echo "line two"; echo "EOF"; }} >> "$GITHUB_OUTPUT"
          echo "FROM_ENV_FILE=set-by-step" >> "$GITHUB_ENV"
          mkdir -p "$RUNNER_TEMP/tools" && printf '#!/bin/sh\necho tool-ran\n' > "$RUNNER_TEMP/tools/mytool" && chmod +x "$RUNNER_TEMP/tools/mytool"
          echo "$RUNNER_TEMP/tools" >> "$GITHUB_PATH"
          echo '## produced' >> "$GITHUB_STEP_SUMMARY"
      - name: later steps see GITHUB_ENV and GITHUB_PATH
        env:
          VIA_EXPR: ${{{{ env.FROM_ENV_FILE }}}}
          CASED: ${{{{ steps.MAKE.outputs.WORD }}}}
        run: |
          test "$CASED" = hello
          test "$FROM_ENV_FILE" = set-by-step
          test "$VIA_EXPR" = set-by-step
          test "$(mytool)" = tool-ran
  consume:
    needs: produce
    runs-on: ubuntu-latest
    steps:
      - id: echo
        env:
          WORD: ${{{{ needs.produce.outputs.word }}}}
          TEXT: ${{{{ needs.produce.outputs.text }}}}
          RESULT: ${{{{ needs.produce.result }}}}
        run: |
          echo "got=$WORD/$RESULT" >> "$GITHUB_OUTPUT"
          test "$TEXT" = "$(printf 'line one\nline two')"
"#
    ));
    assert_eq!(run.job("produce").outputs["word"], "hello");
    assert_eq!(run.job("produce").outputs["text"], "line one\nline two");
    assert_eq!(
        run.job("consume").step("echo").outputs["got"],
        "hello/success"
    );
    assert!(run.summary().contains("## produced"));
}

#[test]
fn matrix_legs_expand_axes_and_include_and_evaluate_runs_on_and_name() {
    if !runs() {
        return;
    }
    let (_f, run) = run_ok(&format!(
        r#"{ON}
jobs:
  build:
    name: Build ${{{{ matrix.platform }}}}
    strategy:
      fail-fast: false
      matrix:
        include:
          - platform: linux/amd64
            runner: ubuntu-latest
            slug: linux-amd64
          - platform: linux/arm64
            runner: ubuntu-24.04-arm
            slug: linux-arm64
    runs-on: ${{{{ matrix.runner }}}}
    env:
      SLUG: ${{{{ matrix.slug }}}}
    steps:
      - id: s
        run: echo "slug=$SLUG arch=$RUNNER_ARCH" >> "$GITHUB_OUTPUT"
  grid:
    strategy:
      matrix:
        os: [a, b]
        n: [1, 2]
        exclude:
          - os: b
            n: 2
        include:
          - os: a
            extra: x
          - os: c
            n: 3
    runs-on: ubuntu-latest
    steps:
      - run: echo "${{{{ matrix.os }}}}-${{{{ matrix.n }}}}"
"#
    ));
    let legs = run.legs("build");
    assert_eq!(legs.len(), 2);
    assert_eq!(legs[0].name, "Build linux/amd64");
    assert_eq!(legs[1].runs_on, json!("ubuntu-24.04-arm"));
    assert_eq!(legs[0].step("s").outputs["slug"], "linux-amd64 arch=X64");
    assert_eq!(legs[1].step("s").outputs["slug"], "linux-arm64 arch=ARM64");
    let grid: Vec<Value> = run
        .legs("grid")
        .iter()
        .map(|l| Value::Object(l.matrix.clone().unwrap()))
        .collect();
    assert_eq!(
        grid,
        vec![
            json!({"os": "a", "n": 1, "extra": "x"}),
            json!({"os": "a", "n": 2, "extra": "x"}),
            json!({"os": "b", "n": 1}),
            json!({"os": "c", "n": 3}),
        ]
    );
}

#[test]
fn fail_fast_cancels_the_remaining_legs_and_fail_fast_false_runs_them() {
    if !runs() {
        return;
    }
    let yaml = |ff: bool| {
        format!(
            r#"{ON}
jobs:
  m:
    strategy:
      fail-fast: {ff}
      matrix:
        n: [1, 2]
    runs-on: ubuntu-latest
    steps:
      - run: test "${{{{ matrix.n }}}}" != 1
"#
        )
    };
    let (_f, run) = replay_to_end(&yaml(true));
    let legs = run.legs("m");
    assert_eq!(
        (legs[0].status, legs[1].status),
        (Status::Failure, Status::Cancelled)
    );
    let (_f, run) = replay_to_end(&yaml(false));
    let legs = run.legs("m");
    assert_eq!(
        (legs[0].status, legs[1].status),
        (Status::Failure, Status::Success)
    );
}

/// A step that meets its peer: it writes its name into its home and a mark into `$MEETING`,
/// then waits up to 30 s for the peer's mark; once met, its home must still hold its own
/// name. Two such steps pass only if they run at the same time, each on a home of its own.
fn meeting_step(me: &str, peer: &str) -> String {
    format!(
        r#"      - run: |
          echo {me} > "$HOME/whose"
          touch "$MEETING/{me}"
          for _ in $(seq 300); do
            if [ -e "$MEETING/{peer}" ]; then
              test "$(cat "$HOME/whose")" = {me} || {{ echo "{me}: my home holds $(cat "$HOME/whose")"; exit 1; }}
              exit 0
            fi
            sleep 0.1
          done
          echo "{me}: {peer} never ran beside me"
          exit 1
"#
    )
}

/// A directory every user may write, where [`meeting_step`]s leave their marks; `None` when
/// the tests that replay do not run, or run without root, where jobs and legs take turns on
/// the shared home and there is nothing to check.
fn meeting_place() -> Option<tempfile::TempDir> {
    use std::os::unix::fs::PermissionsExt as _;
    if !runs() {
        return None;
    }
    // SAFETY: geteuid has no failure mode.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: jobs and legs take turns on the shared home, nothing to check");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    Some(dir)
}

/// Jobs whose needs have ended start together, as GitHub starts them, each on a machine of
/// its own (`own_runner_home`: its own /home/runner); what needs them starts after both.
#[test]
fn independent_jobs_run_side_by_side_each_on_a_home_of_its_own() {
    let Some(meeting) = meeting_place() else {
        return;
    };
    let (_f, run) = run_ok(&format!(
        r#"{ON}
env:
  MEETING: {meeting}
jobs:
  first:
    runs-on: ubuntu-latest
    steps:
{first}  second:
    runs-on: ubuntu-latest
    steps:
{second}  after:
    needs: [first, second]
    runs-on: ubuntu-latest
    steps:
      - run: test -e "$MEETING/first" && test -e "$MEETING/second"
"#,
        meeting = meeting.path().display(),
        first = meeting_step("first", "second"),
        second = meeting_step("second", "first"),
    ));
    // Each job's workspace, as the caller sees it, is on the home it ran on, which holds
    // what the job wrote into its $HOME.
    for job in ["first", "second"] {
        let workspace = &run.job(job).workspace;
        assert!(!workspace.starts_with(actions_replay::RUNNER_HOME));
        let home = workspace.ancestors().nth(3).unwrap();
        assert_eq!(
            std::fs::read_to_string(home.join("whose")).unwrap(),
            format!("{job}\n"),
            "{job}: its home {}",
            home.display()
        );
    }
}

/// Legs of a matrix without fail-fast start together, each on a machine of its own; their
/// results keep the matrix's order.
#[test]
fn legs_without_fail_fast_run_side_by_side() {
    let Some(meeting) = meeting_place() else {
        return;
    };
    let (_f, run) = run_ok(&format!(
        r#"{ON}
env:
  MEETING: {meeting}
jobs:
  m:
    strategy:
      fail-fast: false
      matrix:
        include:
          - me: a
            peer: b
          - me: b
            peer: a
    runs-on: ubuntu-latest
    steps:
{step}"#,
        meeting = meeting.path().display(),
        step = meeting_step("${{ matrix.me }}", "${{ matrix.peer }}"),
    ));
    let legs = run.legs("m");
    assert_eq!(legs.len(), 2);
    assert_eq!(legs[0].matrix.as_ref().unwrap()["me"], "a");
    assert_eq!(legs[1].matrix.as_ref().unwrap()["me"], "b");
}

// ---------------------------------------------------------------------------------------------
// Conditions and failure propagation
// ---------------------------------------------------------------------------------------------

#[test]
fn a_job_is_skipped_when_its_need_failed_and_not_cancelled_steps_still_run() {
    if !runs() {
        return;
    }
    let (_f, run) = replay_to_end(&format!(
        r#"{ON}
jobs:
  first:
    runs-on: ubuntu-latest
    steps:
      - name: breaks
        run: echo "about to fail"; exit 3
      - name: skipped by default
        run: echo never
      - name: still runs
        if: ${{{{ !cancelled() }}}}
        run: echo "ran after the failure"
      - name: on failure
        if: failure()
        run: echo "failure() is true"
      - name: the step's own env is not in its if
        if: always() && env.OWN == 'yes'
        env:
          OWN: "yes"
        run: echo never
      - name: success is false
        if: success()
        run: echo never
  second:
    needs: first
    runs-on: ubuntu-latest
    steps:
      - run: echo never
  report:
    needs: [first, second]
    if: always()
    runs-on: ubuntu-latest
    steps:
      - env:
          FIRST: ${{{{ needs.first.result }}}}
          SECOND: ${{{{ needs.second.result }}}}
        run: test "$FIRST/$SECOND" = failure/skipped
  on-failure:
    needs: second
    if: failure()
    runs-on: ubuntu-latest
    steps:
      - run: echo "an ancestor failed"
"#
    ));
    assert!(!run.succeeded());
    let first = run.job("first");
    assert_eq!(first.status, Status::Failure);
    let outcomes: Vec<Status> = first.steps.iter().map(|s| s.outcome).collect();
    assert_eq!(
        outcomes,
        vec![
            Status::Failure,
            Status::Skipped,
            Status::Success,
            Status::Success,
            Status::Skipped,
            Status::Skipped
        ]
    );
    assert_eq!(run.result("second"), Status::Skipped);
    assert_eq!(
        run.result("report"),
        Status::Success,
        "{}",
        run.failure_report()
    );
    assert_eq!(run.result("on-failure"), Status::Success);
    let report = run.failure_report();
    assert!(
        report.contains("about to fail") && report.contains("exit code 3"),
        "{report}"
    );
}

#[test]
fn continue_on_error_keeps_the_job_green_with_the_outcome_recorded() {
    if !runs() {
        return;
    }
    let (_f, run) = run_ok(&format!(
        r#"{ON}
jobs:
  j:
    runs-on: ubuntu-latest
    steps:
      - id: flaky
        continue-on-error: true
        run: exit 1
      - env:
          OUTCOME: ${{{{ steps.flaky.outcome }}}}
          CONCLUSION: ${{{{ steps.flaky.conclusion }}}}
        run: test "$OUTCOME/$CONCLUSION" = failure/success
  tolerated:
    runs-on: ubuntu-latest
    continue-on-error: true
    steps:
      - run: exit 1
"#
    ));
    assert_eq!(run.job("tolerated").outcome, Status::Failure);
    assert_eq!(run.job("tolerated").status, Status::Success);
}

#[test]
fn each_step_records_its_wall_time_and_the_cpu_time_of_its_processes() {
    if !runs() {
        return;
    }
    let (_f, run) = run_ok(&format!(
        r#"{ON}
jobs:
  timed:
    runs-on: ubuntu-latest
    steps:
      - name: sleeps
        run: sleep 1
      - name: computes in a child it waits for
        run: sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done'
"#
    ));
    let job = run.job("timed");
    let sleeps = job.step("sleeps");
    assert!(sleeps.elapsed.as_secs_f64() >= 1.0, "{sleeps:?}");
    assert!(
        sleeps.cpu.as_secs_f64() < 0.5,
        "sleeping uses no CPU: {sleeps:?}"
    );
    let computes = job.step("computes in a child it waits for");
    assert!(
        computes.cpu.as_secs_f64() >= 0.1,
        "the child's CPU time counts: {computes:?}"
    );
    assert_eq!(job.cpu(), sleeps.cpu + computes.cpu);
    let table = run.timings();
    assert!(
        table.contains("computes in a child it waits for"),
        "{table}"
    );
}

#[test]
fn timeout_minutes_kills_the_step_and_fails_the_job() {
    if !runs() {
        return;
    }
    let (_f, r) = replay(&format!(
        r#"{ON}
jobs:
  slow:
    runs-on: ubuntu-latest
    timeout-minutes: 0.02
    steps:
      - run: sleep 30
      - if: always()
        run: echo after
"#
    ));
    let run = run_workflow(r).unwrap();
    let job = run.job("slow");
    // The step's own time: the whole run's would include waiting for the runner's workspace,
    // which another replay on this machine may hold for minutes.
    let slept = job.step("Run sleep 30").elapsed;
    assert!(
        slept.as_secs() < 10,
        "the timeout did not stop the step: it ran {slept:?}"
    );
    assert_eq!(job.status, Status::Failure);
    assert!(
        job.error
            .as_deref()
            .unwrap_or_default()
            .contains("timeout-minutes"),
        "{:?}",
        job.error
    );
    assert!(job.log_of("Run sleep 30").contains("timed out"));
    // The job was cancelled: an `always()` step still runs.
    assert_eq!(job.step("Run echo after").outcome, Status::Success);
}

#[test]
fn typed_dispatch_inputs_permissions_environment_and_events_are_recorded() {
    if !runs() {
        return;
    }
    let f = Fixture::new();
    let yaml = r#"
on:
  schedule:
    - cron: "0 0 * * *"
  workflow_dispatch:
    inputs:
      force:
        type: boolean
        default: false
      dry_run:
        type: boolean
        default: true
      label:
        type: string
        default: plain
permissions: {}
jobs:
  j:
    runs-on: ubuntu-latest
    environment: release
    permissions:
      contents: write
      packages: read
    steps:
      - id: v
        env:
          FORCE: ${{ inputs.force }}
          FORCE_IS_BOOL: ${{ inputs.force == true }}
          DRY: ${{ inputs.dry_run || false }}
          LABEL: ${{ inputs.label }}
          EVENT_FORCE: ${{ github.event.inputs.force }}
        run: echo "all=$FORCE $FORCE_IS_BOOL $DRY $LABEL $EVENT_FORCE" >> "$GITHUB_OUTPUT"
"#;
    let run = run_workflow(f.workflow("w.yml", yaml).dispatch(json!({ "force": true }))).unwrap();
    run.assert_success();
    let job = run.job("j");
    assert_eq!(job.step("v").outputs["all"], "true true true plain true");
    assert_eq!(job.environment, Some(json!("release")));
    assert_eq!(
        job.permissions.get("contents").map(String::as_str),
        Some("write")
    );
    // A scheduled run has no inputs: declared inputs read as empty, `|| false` gives false.
    let run = run_workflow(f.workflow("w.yml", yaml).event("schedule", json!({}))).unwrap();
    assert_eq!(run.job("j").step("v").outputs["all"], " false false  ");
    // An event the workflow is not triggered by is an error.
    let err = run_workflow(f.workflow("w.yml", yaml).event("push", json!({})))
        .err()
        .unwrap();
    assert!(
        format!("{err:#}").contains("not triggered by `push`"),
        "{err:#}"
    );
}

#[test]
fn event_payloads_have_github_s_shape_per_event() {
    if !runs() {
        return;
    }
    let f = Fixture::new();
    let yaml = r#"
on:
  schedule:
    - cron: "37 4 * * *"
  workflow_dispatch:
    inputs:
      force:
        type: boolean
        default: false
permissions: {}
jobs:
  j:
    runs-on: ubuntu-latest
    steps:
      - id: e
        run: |
          {
            echo 'payload<<EOF'
            cat "$GITHUB_EVENT_PATH"
            echo
            echo EOF
            echo "name=$GITHUB_EVENT_NAME ref=$GITHUB_REF"
          } >> "$GITHUB_OUTPUT"
"#;
    let payload = |run: &WorkflowRun| -> Value {
        serde_json::from_str(&run.job("j").step("e").outputs["payload"]).unwrap()
    };
    // schedule: the cron expression and the workflow file, no repository, no sender.
    let run = run_workflow(f.workflow("w.yml", yaml).event("schedule", json!({}))).unwrap();
    run.assert_success();
    assert_eq!(
        payload(&run),
        json!({ "schedule": "37 4 * * *", "workflow": ".github/workflows/w.yml" })
    );
    assert_eq!(
        run.job("j").step("e").outputs["name"],
        "schedule ref=refs/heads/main"
    );
    // A schedule payload with a repository is one GitHub never sends: the replay refuses it.
    let err = run_workflow(f.workflow("w.yml", yaml).event(
        "schedule",
        json!({ "schedule": "37 4 * * *", "repository": { "default_branch": "main" } }),
    ))
    .err()
    .unwrap();
    assert!(format!("{err:#}").contains("no repository"), "{err:#}");
    // workflow_dispatch: inputs as strings, ref, repository with default_branch and
    // visibility, sender, workflow.
    let run = run_workflow(f.workflow("w.yml", yaml).dispatch(json!({ "force": true }))).unwrap();
    run.assert_success();
    let p = payload(&run);
    assert_eq!(p["inputs"], json!({ "force": "true" }));
    assert_eq!(p["ref"], "refs/heads/main");
    assert_eq!(p["repository"]["default_branch"], "main");
    assert_eq!(p["repository"]["visibility"], "public");
    assert_eq!(
        p["repository"]["full_name"],
        "sandbox0/coding-agent-template"
    );
    assert_eq!(p["sender"]["login"], "replay-actor");
    assert_eq!(p["workflow"], ".github/workflows/w.yml");
}

// ---------------------------------------------------------------------------------------------
// Strictness
// ---------------------------------------------------------------------------------------------

#[test]
fn a_misspelled_step_output_reference_stops_the_replay_naming_it() {
    if !runs() {
        return;
    }
    let err = replay_error(&format!(
        r#"name: typo
{ON}
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - id: build
        run: echo "image=abc" >> "$GITHUB_OUTPUT"
      - name: Smoke test
        env:
          IMAGE: ${{{{ steps.build.outputs.imgae }}}}
        run: echo "$IMAGE"
"#
    ));
    assert!(
        err.contains("wf.yml") && err.contains("job build") && err.contains("step 'Smoke test'"),
        "{err}"
    );
    assert!(
        err.contains("steps.build.outputs.imgae") && err.contains("never wrote output `imgae`"),
        "{err}"
    );
}

#[test]
fn strict_references_are_errors_naming_the_expression() {
    if !runs() {
        return;
    }
    let cases: &[(&str, &str, &str)] = &[
        // (job extras, expression, expected in the error)
        (
            "",
            "steps.nope.outputs.x",
            "no step of this job has id `nope`",
        ),
        ("", "steps.later.outputs.x", "has not run yet"),
        (
            "",
            "needs.other.outputs.x",
            "this job does not need `other`",
        ),
        (
            "needs: other\n    ",
            "needs.other.outputs.undeclared",
            "declares no output `undeclared`",
        ),
        ("", "matrix.platform", "no key `platform`"),
        ("", "inputs.nope", "declares no input `nope`"),
        ("", "github.repository_ownr", "github.repository_ownr"),
        ("", "fromJSON('{')", "is not JSON"),
    ];
    for (extra, expression, expected) in cases {
        let err = replay_error(&format!(
            r#"{ON}
jobs:
  other:
    runs-on: ubuntu-latest
    outputs:
      x: declared
    steps:
      - run: "true"
  j:
    {extra}runs-on: ubuntu-latest
    steps:
      - name: uses it
        env:
          V: ${{{{ {expression} }}}}
        run: "true"
      - id: later
        run: "true"
"#
        ));
        assert!(
            err.contains(expected) && err.contains(expression) && err.contains("step 'uses it'"),
            "{expression}: {err}"
        );
    }
}

#[test]
fn a_misspelled_artifact_name_fails_the_download_naming_it() {
    if !runs() {
        return;
    }
    let (_f, run) = replay_to_end(&format!(
        r#"{ON}
jobs:
  up:
    runs-on: ubuntu-latest
    steps:
      - run: mkdir -p out && echo 1 > out/gate.json
      - uses: actions/upload-artifact@0000000000000000000000000000000000000000 # v7
        with:
          name: gate
          path: out/gate.json
  down:
    needs: up
    runs-on: ubuntu-latest
    steps:
      - name: Download
        uses: actions/download-artifact@0000000000000000000000000000000000000000 # v8
        with:
          name: gaet
"#
    ));
    assert_eq!(run.result("down"), Status::Failure);
    let report = run.failure_report();
    assert!(
        report.contains("Artifact not found for name: gaet") && report.contains("step 'Download'"),
        "{report}"
    );
}

#[test]
fn an_action_without_emulation_or_stand_in_is_an_error_naming_it() {
    if !runs() {
        return;
    }
    let err = replay_error(&format!(
        "{ON}\njobs:\n  j:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/setup-node@abc # v6\n"
    ));
    assert!(
        err.contains("actions/setup-node") && err.contains("Replay::stand_in"),
        "{err}"
    );
    let err = replay_error(&format!(
        "{ON}\njobs:\n  j:\n    runs-on: ubuntu-latest\n    step:\n      - run: 'true'\n"
    ));
    assert!(err.contains("`step` is not supported"), "{err}");
}

#[test]
fn attest_actions_record_each_subject_and_refuse_missing_or_malformed_ones() {
    if !runs() {
        return;
    }
    let digest = format!("sha256:{}", "ab".repeat(32));
    let (_f, r) = replay(&format!(
        r#"{ON}
permissions: {{}}
jobs:
  j:
    runs-on: ubuntu-latest
    permissions:
      id-token: write
      attestations: write
      packages: write
    steps:
      - run: |
          mkdir -p out
          printf 'receipt' > out/receipt.json
          printf '{{}}' > out/schema.json
          printf '{{"spdxVersion": "SPDX-2.3", "SPDXID": "SPDXRef-DOCUMENT"}}' > out/sbom.spdx.json
          mkdir -p cdx
          printf '{{"bomFormat": "CycloneDX", "specVersion": "1.5", "serialNumber": "urn:uuid:3e671687-395b-41f5-a30f-a58921a69b79", "version": 1}}' > cdx/good.cdx.json
          printf '{{"bomFormat": "CycloneDX", "specVersion": "1.5", "version": 1}}' > cdx/unnumbered.cdx.json
          printf '{{"spdxVersion": "SPDX-2.3"}}' > cdx/anonymous.spdx.json
      - name: docker login
        run: |
          mkdir -p ~/.docker
          printf '{{"auths":{{"ghcr.io":{{"auth":"%s"}}}}}}' "$(printf 'u:p' | base64)" > ~/.docker/config.json
      - name: index
        uses: actions/attest-build-provenance@abc # v3
        with:
          subject-name: ghcr.io/owner/coding-agent
          subject-digest: {digest}
          push-to-registry: true
      - name: assets
        uses: actions/attest-build-provenance@abc # v3
        with:
          subject-path: out/*.json
      - name: sbom
        id: sbom
        uses: actions/attest-sbom@abc # v2
        with:
          subject-name: ghcr.io/owner/coding-agent
          subject-digest: {digest}
          sbom-path: out/sbom.spdx.json
          push-to-registry: true
      - name: malformed digest
        if: always()
        uses: actions/attest-build-provenance@abc # v3
        with:
          subject-name: ghcr.io/owner/coding-agent
          subject-digest: sha256:ABC
      - name: no subject
        if: always()
        uses: actions/attest-build-provenance@abc # v3
      - name: nothing matches
        if: always()
        uses: actions/attest-build-provenance@abc # v3
        with:
          subject-path: out/missing-*
      - name: tag in the name
        if: always()
        uses: actions/attest-build-provenance@abc # v3
        with:
          subject-name: ghcr.io/owner/coding-agent:latest
          subject-digest: {digest}
          push-to-registry: true
      - name: not an sbom
        if: always()
        uses: actions/attest-sbom@abc # v2
        with:
          subject-path: out/receipt.json
          sbom-path: out/schema.json
      - name: cyclonedx
        if: always()
        uses: actions/attest@59d89421af93a897026c735860bf21b6eb4f7b26 # v4.1.0
        with:
          subject-name: ghcr.io/owner/coding-agent
          subject-digest: {digest}
          sbom-path: cdx/good.cdx.json
      - name: cyclonedx without a serial number
        if: always()
        uses: actions/attest@59d89421af93a897026c735860bf21b6eb4f7b26 # v4.1.0
        with:
          subject-name: ghcr.io/owner/coding-agent
          subject-digest: {digest}
          sbom-path: cdx/unnumbered.cdx.json
      - name: spdx without an SPDXID
        if: always()
        uses: actions/attest@59d89421af93a897026c735860bf21b6eb4f7b26 # v4.1.0
        with:
          subject-name: ghcr.io/owner/coding-agent
          subject-digest: {digest}
          sbom-path: cdx/anonymous.spdx.json
  k:
    runs-on: ubuntu-latest
    permissions:
      attestations: write
    steps:
      - name: no id-token
        uses: actions/attest-build-provenance@abc # v3
        with:
          subject-name: ghcr.io/owner/coding-agent
          subject-digest: {digest}
"#
    ));
    let run = run_workflow(r).unwrap_or_else(|e| panic!("{e:#}"));
    let job = run.job("j");
    for ok in ["index", "assets", "sbom", "cyclonedx"] {
        assert_eq!(
            job.step(ok).outcome,
            Status::Success,
            "{ok}: {}",
            job.log_of(ok)
        );
    }
    for (bad, why) in [
        ("malformed digest", "sha256:ABC"),
        ("no subject", "must be provided"),
        ("nothing matches", "matches no file"),
        ("tag in the name", "not a registry repository"),
        ("not an sbom", "Unsupported SBOM format"),
        // actions/attest tells the formats apart by fields the schemas make optional.
        (
            "cyclonedx without a serial number",
            "Unsupported SBOM format",
        ),
        ("spdx without an SPDXID", "Unsupported SBOM format"),
    ] {
        assert_eq!(job.step(bad).outcome, Status::Failure, "{bad}");
        assert!(job.log_of(bad).contains(why), "{bad}: {}", job.log_of(bad));
    }
    let k = run.job("k");
    assert_eq!(k.step("no id-token").outcome, Status::Failure);
    assert!(k.log_of("no id-token").contains("id-token: write"));
    assert!(k.attestations().is_empty());

    let sha = |bytes: &[u8]| {
        use sha2::Digest as _;
        format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
    };
    const SPDX: &[u8] = br#"{"spdxVersion": "SPDX-2.3", "SPDXID": "SPDXRef-DOCUMENT"}"#;
    // Only the attestations that succeeded are recorded, each with its subjects.
    let recorded = job.attestations();
    type Recorded = (String, Vec<(String, String)>, bool);
    let summary: Vec<Recorded> = recorded
        .iter()
        .map(|a| {
            (
                a.action.clone(),
                a.subjects
                    .iter()
                    .map(|s| (s.name.clone(), s.digest.clone()))
                    .collect(),
                a.push_to_registry,
            )
        })
        .collect();
    let repo = "ghcr.io/owner/coding-agent".to_string();
    assert_eq!(
        summary,
        vec![
            (
                "attest-build-provenance".into(),
                vec![(repo.clone(), digest.clone())],
                true
            ),
            (
                "attest-build-provenance".into(),
                vec![
                    ("receipt.json".into(), sha(b"receipt")),
                    ("sbom.spdx.json".into(), sha(SPDX)),
                    ("schema.json".into(), sha(b"{}")),
                ],
                false
            ),
            (
                "attest-sbom".into(),
                vec![(repo.clone(), digest.clone())],
                true
            ),
            ("attest".into(), vec![(repo, digest.clone())], false),
        ]
    );
    assert_eq!(
        recorded[2].sbom_sha256.as_deref(),
        Some(&sha(SPDX)["sha256:".len()..])
    );
    assert_eq!(
        (
            recorded[2].predicate_type.as_str(),
            recorded[3].predicate_type.as_str()
        ),
        (
            actions_replay::SPDX_DOCUMENT_V2_3,
            actions_replay::CYCLONEDX_BOM
        )
    );
}

#[test]
fn attest_pushes_to_a_registry_only_with_a_docker_config_entry_for_it() {
    if !runs() {
        return;
    }
    let digest = format!("sha256:{}", "cd".repeat(32));
    let push = |name: &str| {
        format!(
            "      - name: {name}\n        if: always()\n        uses: actions/attest@59d89421af93a897026c735860bf21b6eb4f7b26 # v4.1.0\n        with:\n          subject-name: ghcr.io/owner/coding-agent\n          subject-digest: {digest}\n          push-to-registry: true\n"
        )
    };
    let (_f, r) = replay(&format!(
        r#"{ON}
permissions: {{}}
jobs:
  j:
    runs-on: ubuntu-latest
    permissions:
      id-token: write
      attestations: write
      packages: write
    steps:
{no_file}      - name: login elsewhere
        if: always()
        run: |
          mkdir -p ~/.docker
          printf '{{"auths":{{"registry.example":{{"auth":"%s"}}}}}}' "$(printf 'u:p' | base64)" > ~/.docker/config.json
{no_entry}      - name: login
        if: always()
        run: |
          printf '{{"auths":{{"https://ghcr.io":{{"auth":"%s"}}}}}}' "$(printf 'u:p' | base64)" > ~/.docker/config.json
{logged_in}      - name: sbom
        if: always()
        run: |
          printf '{{"spdxVersion": "SPDX-2.3", "SPDXID": "SPDXRef-DOCUMENT"}}' > sbom.spdx.json
      - name: sbom attestation
        if: always()
        uses: actions/attest@59d89421af93a897026c735860bf21b6eb4f7b26 # v4.1.0
        with:
          subject-name: ghcr.io/owner/coding-agent
          subject-digest: {digest}
          sbom-path: sbom.spdx.json
  k:
    needs: j
    if: always()
    runs-on: ubuntu-latest
    permissions:
      id-token: write
      attestations: write
      packages: write
    steps:
{next_job}"#,
        no_file = push("no credential file"),
        no_entry = push("no entry for ghcr.io"),
        logged_in = push("logged in"),
        next_job = push("another job"),
    ));
    let run = run_workflow(r).unwrap_or_else(|e| panic!("{e:#}"));
    let j = run.job("j");
    for (step, why) in [
        (
            "no credential file",
            "No credential file found at /home/runner/.docker/config.json",
        ),
        (
            "no entry for ghcr.io",
            "No credentials found for registry ghcr.io",
        ),
    ] {
        assert_eq!(j.step(step).outcome, Status::Failure, "{step}");
        assert!(j.log_of(step).contains(why), "{step}: {}", j.log_of(step));
    }
    for ok in ["logged in", "sbom attestation"] {
        assert_eq!(
            j.step(ok).outcome,
            Status::Success,
            "{ok}: {}",
            j.log_of(ok)
        );
    }
    // A job is a fresh runner: the docker config the last job wrote is not there.
    let k = run.job("k");
    assert_eq!(k.step("another job").outcome, Status::Failure);
    assert!(k.log_of("another job").contains("No credential file found"));
    // In the job's record only what succeeded; the SBOM through actions/attest's sbom-path,
    // signed with the public-good instance for a public repository's dispatch.
    let recorded = j.attestations();
    assert_eq!(recorded.len(), 2, "{recorded:?}");
    assert!(recorded[0].push_to_registry);
    assert_eq!(recorded[0].predicate_type, "https://slsa.dev/provenance/v1");
    assert_eq!(recorded[1].predicate_type, "https://spdx.dev/Document/v2.3");
    assert!(recorded
        .iter()
        .all(|a| a.sigstore_instance == "public-good"));
    // The real action signs and stores the attestation before it pushes: GitHub's API holds
    // all five, including the three whose push failed.
    let stored = actions_replay::attestation_records(&run.replay.gh_state_dir()).unwrap();
    assert_eq!(stored.len(), 5, "{stored:?}");
}

/// The attest actions with a signer registered: each step's statement (subjects, predicate type
/// and predicate as the real action makes them) and the job's identity reach the signer, the
/// bundle it returns lands where actions/attest v4.1.0 writes it and is named by `bundle-path`,
/// and `gh attestation trusted-root` prints the registered root. A signer that fails fails
/// the step before anything is stored.
#[test]
fn attest_actions_have_the_statement_signed_as_the_job_and_write_the_bundle() {
    if !runs() {
        return;
    }
    let yaml = format!(
        r#"{ON}
jobs:
  j:
    runs-on: ubuntu-latest
    permissions:
      id-token: write
      attestations: write
    steps:
      - run: |
          mkdir -p out
          printf 'a' > out/a.bin
          printf 'b' > out/b.bin
          printf '{{"spdxVersion": "SPDX-2.2", "SPDXID": "SPDXRef-DOCUMENT", "name": "s"}}' > sbom.spdx.json
          printf '{{"said": "custom"}}' > predicate.json
      - id: provenance
        uses: actions/attest@59d89421af93a897026c735860bf21b6eb4f7b26 # v4.1.0
        with:
          subject-path: out/*
      - id: sbom
        uses: actions/attest@59d89421af93a897026c735860bf21b6eb4f7b26 # v4.1.0
        with:
          subject-name: ghcr.io/owner/image
          subject-digest: sha256:{digest}
          sbom-path: sbom.spdx.json
      - id: custom
        uses: actions/attest@59d89421af93a897026c735860bf21b6eb4f7b26 # v4.1.0
        with:
          subject-path: out/a.bin
          predicate-type: https://example.test/predicate
          predicate-path: predicate.json
      - id: check
        env:
          P: ${{{{ steps.provenance.outputs.bundle-path }}}}
          S: ${{{{ steps.sbom.outputs.bundle-path }}}}
          C: ${{{{ steps.custom.outputs.bundle-path }}}}
          URL: ${{{{ steps.sbom.outputs.attestation-url }}}}
        run: |
          for b in "$P" "$S" "$C"; do
            case "$b" in "$RUNNER_TEMP"/??????/attestation.json) ;; *) echo "bundle at $b"; exit 1;; esac
            test "$(wc -l < "$b")" = 1
            test "$(stat -c %U "$b")" = runner
          done
          test "$(dirname "$P")" != "$(dirname "$S")"
          printf '%s\n' "$P" "$S" "$C" | cmp - "$RUNNER_TEMP/created_attestation_paths.txt"
          test "$URL" = "https://github.com/$GITHUB_REPOSITORY/attestations/2"
          gh attestation trusted-root > root.jsonl
          {{
            echo "sha=$GITHUB_SHA"
            echo "provenance=$(cat "$P")"
            echo "sbom=$(cat "$S")"
            echo "custom=$(cat "$C")"
            echo "root=$(cat root.jsonl)"
          }} >> "$GITHUB_OUTPUT"
"#,
        digest = "ab".repeat(32)
    );
    let root = json!({ "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1", "tlogs": [] });
    // A test's signer: the bundle it returns carries what it was given, so the test sees it.
    let signer = |statement: &Value, identity: &actions_replay::JobIdentity| {
        Ok(json!({ "statement": statement, "identity": identity }))
    };
    let (_f, r) = replay(&yaml);
    let run = run_workflow(r.sigstore(&root, signer).unwrap()).unwrap();
    run.assert_success();
    let out = &run.job("j").step("check").outputs;
    let sha = &out["sha"];
    let bundle = |step: &str| -> Value { serde_json::from_str(&out[step]).unwrap() };
    let repo = "sandbox0/coding-agent-template";
    let workflow_ref = format!("{repo}/.github/workflows/wf.yml@refs/heads/main");

    let provenance = bundle("provenance");
    let identity = &provenance["identity"];
    assert_eq!(identity["job_workflow_ref"], workflow_ref, "{identity}");
    assert_eq!(identity["workflow_ref"], workflow_ref);
    assert_eq!(identity["repository"], repo);
    assert_eq!(identity["ref"], "refs/heads/main");
    assert_eq!(identity["sha"], *sha);
    assert_eq!(identity["event_name"], "workflow_dispatch");
    assert_eq!(identity["runner_environment"], "github-hosted");
    assert_eq!(
        identity["iss"],
        "https://token.actions.githubusercontent.com"
    );
    // A dispatch payload names a public repository: actions/attest picks public-good.
    assert_eq!(identity["sigstore_instance"], "public-good");
    let statement = &provenance["statement"];
    assert_eq!(statement["_type"], "https://in-toto.io/Statement/v1");
    assert_eq!(statement["predicateType"], "https://slsa.dev/provenance/v1");
    let sha256 = |s: &str| {
        use sha2::Digest as _;
        hex::encode(sha2::Sha256::digest(s.as_bytes()))
    };
    assert_eq!(
        statement["subject"],
        json!([
            { "name": "a.bin", "digest": { "sha256": sha256("a") } },
            { "name": "b.bin", "digest": { "sha256": sha256("b") } },
        ])
    );
    let predicate = &statement["predicate"];
    assert_eq!(
        predicate["buildDefinition"]["externalParameters"]["workflow"],
        json!({ "ref": "refs/heads/main", "repository": format!("https://github.com/{repo}"),
                "path": ".github/workflows/wf.yml" })
    );
    assert_eq!(
        predicate["buildDefinition"]["resolvedDependencies"][0],
        json!({ "uri": format!("git+https://github.com/{repo}@refs/heads/main"),
                "digest": { "gitCommit": sha } })
    );
    assert_eq!(
        predicate["runDetails"]["builder"]["id"],
        format!("https://github.com/{workflow_ref}")
    );
    assert_eq!(
        predicate["runDetails"]["metadata"]["invocationId"],
        format!(
            "https://github.com/{repo}/actions/runs/{}/attempts/1",
            run.run_id
        )
    );

    // An SBOM attestation's predicate is the document; SPDX's type names its version.
    let sbom = bundle("sbom")["statement"].clone();
    assert_eq!(sbom["predicateType"], "https://spdx.dev/Document/v2.2");
    assert_eq!(sbom["predicate"]["name"], "s");
    assert_eq!(
        sbom["subject"],
        json!([{ "name": "ghcr.io/owner/image", "digest": { "sha256": "ab".repeat(32) } }])
    );
    let custom = bundle("custom")["statement"].clone();
    assert_eq!(custom["predicateType"], "https://example.test/predicate");
    assert_eq!(custom["predicate"], json!({ "said": "custom" }));
    assert_eq!(serde_json::from_str::<Value>(&out["root"]).unwrap(), root);

    // A signer that fails: the step fails naming why, and GitHub's API stores nothing.
    let (_f, r) = replay(&yaml);
    let r = r
        .sigstore(&root, |_: &Value, _: &actions_replay::JobIdentity| {
            anyhow::bail!("the test's signer refuses")
        })
        .unwrap();
    let run = run_workflow(r).unwrap();
    let job = run.job("j");
    assert_eq!(job.step("provenance").outcome, Status::Failure);
    assert!(job
        .log_of("provenance")
        .contains("the test's signer refuses"));
    assert!(
        actions_replay::attestation_records(&run.replay.gh_state_dir())
            .unwrap()
            .is_empty()
    );
}

#[test]
fn stand_ins_replace_actions_as_closures_or_scripts() {
    if !runs() {
        return;
    }
    let (_f, r) = replay(&format!(
        r#"{ON}
jobs:
  j:
    runs-on: ubuntu-latest
    steps:
      - id: attest
        uses: actions/attest-build-provenance@abc # v3
        with:
          subject-path: out.bin
      - id: scripted
        uses: example/scripted@v1
        with:
          greeting: hi there
      - env:
          BUNDLE: ${{{{ steps.attest.outputs.bundle-path }}}}
          SAID: ${{{{ steps.scripted.outputs.said }}}}
        run: test "$BUNDLE/$SAID/$(id -u)" = "attested:out.bin/hi there/$(id -u runner)"
"#
    ));
    let r = r
        .stand_in(
            "actions/attest-build-provenance",
            StandIn::Closure(Arc::new(|call| {
                let subject = call
                    .with
                    .get("subject-path")
                    .ok_or("subject-path is required")?;
                Ok([("bundle-path".to_owned(), format!("attested:{subject}"))].into())
            })),
        )
        .stand_in(
            "example/scripted",
            StandIn::Script(r#"echo "said=$INPUT_GREETING" >> "$GITHUB_OUTPUT""#.into()),
        );
    let run = run_workflow(r).unwrap();
    run.assert_success();
}

#[test]
fn fake_tools_come_first_on_the_runner_s_path() {
    if !runs() {
        return;
    }
    let (_f, r) = replay(&format!(
        r#"{ON}
jobs:
  j:
    runs-on: ubuntu-latest
    steps:
      - id: s
        run: |
          echo "gate=$(cargo xtask gate --json)" >> "$GITHUB_OUTPUT"
          echo "real=$(rustc --version | cut -d' ' -f1)" >> "$GITHUB_OUTPUT"
"#
    ));
    let run = run_workflow(r.fake_tool("cargo", "#!/bin/sh\necho \"fake cargo $*\"\n")).unwrap();
    run.assert_success();
    let outputs = &run.job("j").step("s").outputs;
    assert_eq!(outputs["gate"], "fake cargo xtask gate --json");
    assert_eq!(outputs["real"], "rustc", "other tools stay the real ones");
}

// ---------------------------------------------------------------------------------------------
// Actions: checkout, artifacts, cache
// ---------------------------------------------------------------------------------------------

#[test]
fn checkout_clones_the_run_sha_for_the_runner_and_honours_persist_credentials() {
    if !runs() {
        return;
    }
    let (f, run) = run_ok(&format!(
        r#"{ON}
jobs:
  j:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@0000000000000000000000000000000000000000 # v7
        with:
          persist-credentials: false
      - run: |
          test "$(cat hello.txt)" = "hello from the source repository"
          test "$(git rev-parse HEAD)" = "$GITHUB_SHA"
          test "$(git rev-parse --is-shallow-repository)" = true
          test "$(git log --oneline | wc -l)" = 1
          test -z "$(git config --get http.https://github.com/.extraheader || true)"
          touch written-by-runner
      - uses: actions/checkout@0000000000000000000000000000000000000000 # v7
        with:
          path: second
          fetch-depth: 0
      - run: |
          git -C second config --get http.https://github.com/.extraheader | grep -q 'AUTHORIZATION: basic'
          test "$(git -C second log --oneline | wc -l)" = 2
          git -C second rev-parse --verify origin/main
"#
    ));
    use std::os::unix::fs::MetadataExt as _;
    let workspace = run.job("j").workspace.clone();
    let (uid, _) = actions_replay::runner_ids().unwrap();
    assert_eq!(
        std::fs::metadata(workspace.join("written-by-runner"))
            .unwrap()
            .uid(),
        uid
    );
    assert_eq!(
        std::fs::metadata(workspace.join("hello.txt"))
            .unwrap()
            .uid(),
        uid
    );
    // The clone shares no inode with the source: the source's objects are still root's.
    let objects = walk(&f.repo().join(".git/objects"));
    assert!(
        !objects.is_empty()
            && objects
                .iter()
                .all(|p| std::fs::metadata(p).unwrap().uid() == 0)
    );
}

#[test]
fn upload_name_clash_fails_without_overwrite_passes_with_it_also_across_a_rerun() {
    if !runs() {
        return;
    }
    let yaml = |overwrite: bool| {
        format!(
            r#"{ON}
jobs:
  a:
    runs-on: ubuntu-latest
    steps:
      - run: echo a > file.txt
      - uses: actions/upload-artifact@0000000000000000000000000000000000000000 # v7
        with:
          name: same
          path: file.txt
  b:
    needs: a
    runs-on: ubuntu-latest
    steps:
      - run: echo b > file.txt
      - name: Upload again
        uses: actions/upload-artifact@0000000000000000000000000000000000000000 # v7
        with:
          name: same
          path: file.txt
          overwrite: {overwrite}
      - run: test "$GITHUB_RUN_ATTEMPT" -ge 2
"#
        )
    };
    // Without overwrite: the second upload of `same` fails.
    let (_f, r) = replay(&yaml(false));
    let mut run = run_workflow(r).unwrap();
    assert_eq!(run.result("b"), Status::Failure);
    assert!(
        run.failure_report().contains("(409) Conflict"),
        "{}",
        run.failure_report()
    );
    // Re-running: attempt 2 of job b uploads `same` again, which job a's attempt 1 made.
    rerun_failed(&mut run).unwrap();
    assert_eq!(run.result("b"), Status::Failure);
    assert!(run
        .job("b")
        .log_of("Upload again")
        .contains("(409) Conflict"));

    // With overwrite: attempt 1 passes the upload (and fails its last step), attempt 2 re-uploads.
    let (_f, mut run) = replay_to_end(&yaml(true));
    assert_eq!(run.job("b").step("Upload again").outcome, Status::Success);
    assert_eq!(run.result("b"), Status::Failure);
    rerun_failed(&mut run).unwrap();
    run.assert_success();
    assert_eq!(
        std::fs::read_to_string(run.artifacts_dir().join("same/files/file.txt")).unwrap(),
        "b\n"
    );
}

#[test]
fn download_by_pattern_merges_and_the_upload_root_is_the_least_common_ancestor() {
    if !runs() {
        return;
    }
    let (_f, run) = run_ok(&format!(
        r#"{ON}
jobs:
  build:
    strategy:
      matrix:
        slug: [linux-amd64, linux-arm64]
    runs-on: ubuntu-latest
    steps:
      - run: |
          mkdir -p release template .hidden
          echo "${{{{ matrix.slug }}}}" > "release/build-${{{{ matrix.slug }}}}.json"
          echo other > release/other.json
          echo t > template/package.json
          echo h > release/.secret
      - uses: actions/upload-artifact@0000000000000000000000000000000000000000 # v7
        with:
          name: results-${{{{ matrix.slug }}}}
          if-no-files-found: error
          path: release/*-${{{{ matrix.slug }}}}.json
      - if: matrix.slug == 'linux-amd64'
        uses: actions/upload-artifact@0000000000000000000000000000000000000000 # v7
        with:
          name: lock
          path: |
            template/package.json
            release/
            !release/other.json
  release:
    needs: build
    runs-on: ubuntu-latest
    steps:
      - uses: actions/download-artifact@0000000000000000000000000000000000000000 # v8
        with:
          pattern: results-*
          merge-multiple: true
          path: release
      - uses: actions/download-artifact@0000000000000000000000000000000000000000 # v8
        with:
          name: lock
          path: .
      - uses: actions/download-artifact@0000000000000000000000000000000000000000 # v8
        with:
          path: all
      - run: |
          test "$(cat release/build-linux-amd64.json release/build-linux-arm64.json)" = "$(printf 'linux-amd64\nlinux-arm64')"
          test "$(cat template/package.json)" = t
          test ! -e release/other.json
          test ! -e release/.secret
          test -f all/results-linux-arm64/build-linux-arm64.json
          test -f all/lock/template/package.json
          test "$(stat -c %U release/build-linux-amd64.json)" = runner
          touch all/lock/template/written-by-the-runner
"#
    ));
    assert!(run
        .artifacts_dir()
        .join("lock/files/release/build-linux-amd64.json")
        .exists());
}

#[test]
fn if_no_files_found_error_fails_and_warn_passes() {
    if !runs() {
        return;
    }
    let (_f, run) = replay_to_end(&format!(
        r#"{ON}
jobs:
  j:
    runs-on: ubuntu-latest
    steps:
      - name: warn
        uses: actions/upload-artifact@0000000000000000000000000000000000000000 # v7
        with:
          path: nothing-here/*
      - name: error
        uses: actions/upload-artifact@0000000000000000000000000000000000000000 # v7
        with:
          path: nothing-here/*
          if-no-files-found: error
"#
    ));
    let job = run.job("j");
    assert_eq!(
        (job.step("warn").outcome, job.step("error").outcome),
        (Status::Success, Status::Failure)
    );
    assert!(job.log_of("error").contains("No files were found"));
}

#[test]
fn cache_misses_saves_after_a_successful_job_and_hits_on_the_next_run() {
    if !runs() {
        return;
    }
    let f = Fixture::new();
    let cache = tempfile::tempdir().unwrap();
    let yaml = format!(
        r#"{ON}
jobs:
  j:
    runs-on: ubuntu-latest
    steps:
      - id: cache
        uses: actions/cache@0000000000000000000000000000000000000000 # v4
        with:
          path: deps
          key: deps-${{{{ hashFiles('hello.txt', 'src/**') }}}}
          restore-keys: deps-
      - if: steps.cache.outputs.cache-hit != 'true'
        run: mkdir -p deps && echo built > deps/lib && echo "${{{{ hashFiles('hello.txt') }}}}" > deps/hash
      - id: check
        run: echo "lib=$(cat deps/lib)" >> "$GITHUB_OUTPUT"
"#
    );
    let mut yaml_with_sources = yaml.replace(
        "      - id: cache\n",
        "      - run: |\n          echo hello > hello.txt\n          mkdir -p src && echo a > src/a.txt\n      - id: cache\n",
    );
    yaml_with_sources.push('\n');
    let first = f
        .workflow("c.yml", &yaml_with_sources)
        .cache_dir(cache.path());
    let run = run_workflow(first).unwrap();
    run.assert_success();
    assert_eq!(run.job("j").step("cache").outputs["cache-hit"], "");
    let run = run_workflow(
        f.workflow("c.yml", &yaml_with_sources)
            .cache_dir(cache.path()),
    )
    .unwrap();
    run.assert_success();
    let job = run.job("j");
    assert_eq!(job.step("cache").outputs["cache-hit"], "true");
    assert_eq!(job.steps[2].outcome, Status::Skipped);
    assert_eq!(job.step("check").outputs["lib"], "built");
    // The hash is GitHub's: sha256 over the sha256 digests of the matched files.
    let expected = {
        use sha2::{Digest, Sha256};
        hex::encode(Sha256::digest(Sha256::digest(b"hello\n")))
    };
    let saved = std::fs::read_dir(cache.path())
        .unwrap()
        .flatten()
        .map(|e| e.path().join("data/0/hash"))
        .find(|p| p.exists())
        .unwrap();
    assert_eq!(std::fs::read_to_string(saved).unwrap().trim(), expected);
}

// ---------------------------------------------------------------------------------------------
// Re-runs
// ---------------------------------------------------------------------------------------------

#[test]
fn rerun_failed_reruns_only_the_failed_job_and_its_dependents() {
    if !runs() {
        return;
    }
    let (_f, mut run) = replay_to_end(&format!(
        r#"{ON}
jobs:
  ok:
    runs-on: ubuntu-latest
    outputs:
      attempt: ${{{{ steps.a.outputs.attempt }}}}
    steps:
      - id: a
        run: echo "attempt=$GITHUB_RUN_ATTEMPT" >> "$GITHUB_OUTPUT"
  flaky:
    needs: ok
    runs-on: ubuntu-latest
    steps:
      - run: test "$GITHUB_RUN_ATTEMPT" -ge 2
  independent:
    runs-on: ubuntu-latest
    steps:
      - run: echo fine
  after:
    needs: [ok, flaky]
    runs-on: ubuntu-latest
    steps:
      - id: s
        env:
          OK_ATTEMPT: ${{{{ needs.ok.outputs.attempt }}}}
        run: echo "seen=$OK_ATTEMPT/$GITHUB_RUN_ATTEMPT" >> "$GITHUB_OUTPUT"
"#
    ));
    let first_id = run.run_id;
    assert_eq!(run.result("flaky"), Status::Failure);
    assert_eq!(run.result("after"), Status::Skipped);
    rerun_failed(&mut run).unwrap();
    run.assert_success();
    assert_eq!((run.run_id, run.run_attempt), (first_id, 2));
    assert_eq!(
        run.job("ok").attempt,
        1,
        "a successful job keeps its attempt-1 result"
    );
    assert_eq!(run.job("independent").attempt, 1);
    assert_eq!(run.job("flaky").attempt, 2);
    assert_eq!(run.job("after").step("s").outputs["seen"], "1/2");
    assert_eq!(run.history.len(), 4 + 2);
    assert!(rerun_failed(&mut run).is_err(), "nothing left to re-run");
}

#[test]
fn rerun_job_reruns_a_green_job_and_its_dependents_only() {
    if !runs() {
        return;
    }
    let (_f, mut run) = run_ok(&format!(
        r#"{ON}
jobs:
  first:
    runs-on: ubuntu-latest
    outputs:
      attempt: ${{{{ steps.s.outputs.attempt }}}}
    steps:
      - id: s
        run: echo "attempt=$GITHUB_RUN_ATTEMPT" >> "$GITHUB_OUTPUT"
  middle:
    needs: first
    runs-on: ubuntu-latest
    steps:
      - run: echo middle
  last:
    needs: [first, middle]
    runs-on: ubuntu-latest
    steps:
      - id: s
        env:
          FIRST: ${{{{ needs.first.outputs.attempt }}}}
        run: echo "seen=$FIRST/$GITHUB_RUN_ATTEMPT" >> "$GITHUB_OUTPUT"
"#
    ));
    rerun_job(&mut run, "middle").unwrap();
    run.assert_success();
    assert_eq!(run.run_attempt, 2);
    assert_eq!(run.job("first").attempt, 1, "not a dependent: kept");
    assert_eq!(run.job("middle").attempt, 2);
    assert_eq!(run.job("last").attempt, 2, "a dependent runs again");
    assert_eq!(run.job("last").step("s").outputs["seen"], "1/2");
    assert!(rerun_job(&mut run, "nonesuch").is_err());
}

#[test]
fn an_artifact_s_files_lose_their_modes() {
    if !runs() {
        return;
    }
    run_ok(&format!(
        r#"{ON}
jobs:
  up:
    runs-on: ubuntu-latest
    steps:
      - run: mkdir out && printf '#!/bin/sh\necho hi\n' > out/tool && chmod 755 out/tool
      - uses: actions/upload-artifact@bbbca2ddaa5d8feaa63e36b76fdaad77386f024f
        with:
          name: tool
          path: out/tool
  down:
    needs: up
    runs-on: ubuntu-latest
    steps:
      - uses: actions/download-artifact@3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c
        with:
          name: tool
          path: got
      - run: |
          test "$(stat -c %a got/tool)" = 644
          ! got/tool
          chmod +x got/tool && got/tool
"#
    ));
}

#[test]
fn rerun_failed_reruns_only_the_failed_and_cancelled_matrix_legs() {
    if !runs() {
        return;
    }
    let (_f, mut run) = replay_to_end(&format!(
        r#"{ON}
jobs:
  m:
    strategy:
      matrix:
        n: [1, 2, 3]
    runs-on: ubuntu-latest
    steps:
      - run: test "${{{{ matrix.n }}}}" != 2 || test "$GITHUB_RUN_ATTEMPT" -ge 2
"#
    ));
    let statuses = |run: &WorkflowRun| {
        run.legs("m")
            .iter()
            .map(|l| (l.status, l.attempt))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        statuses(&run),
        vec![
            (Status::Success, 1),
            (Status::Failure, 1),
            (Status::Cancelled, 1)
        ]
    );
    rerun_failed(&mut run).unwrap();
    assert_eq!(
        statuses(&run),
        vec![
            (Status::Success, 1),
            (Status::Success, 2),
            (Status::Success, 2)
        ]
    );
    assert_eq!(run.history.len(), 3 + 2);
}

// ---------------------------------------------------------------------------------------------
// The gh stand-in
// ---------------------------------------------------------------------------------------------

const RELEASE_JOB: &str = r#"
  release:
    runs-on: ubuntu-latest
    permissions:
      contents: write
    env:
      GH_TOKEN: ${{ github.token }}
      GH_REPO: ${{ github.repository }}
      TAG: v1
    steps:
      - name: No release yet
        run: |
          if gh release download --pattern '*.json' --dir prev 2> err.txt; then exit 1; fi
          grep -q "release not found" err.txt
      - name: Create the draft release
        run: |
          echo notes > notes.md && echo '{}' > receipt.json
          gh release view "$TAG" > /dev/null 2>&1 \
            || gh release create "$TAG" --draft --target "$GITHUB_SHA" --title "T $TAG" --notes-file notes.md
      - name: Attach the assets
        run: gh release upload "$TAG" receipt.json --clobber
      - name: Publish the release
        run: gh release edit "$TAG" --draft=false --latest
      - name: Published is immutable
        run: |
          ! gh release upload "$TAG" notes.md --clobber 2> e1 && grep -q immutable e1
          ! gh release edit "$TAG" --notes-file notes.md 2> e2 && grep -q immutable e2
          ! gh release delete-asset "$TAG" receipt.json -y 2> e3 && grep -q immutable e3
          ! gh release create "$TAG" --draft 2> e4 && grep -q "cannot be reused" e4
          echo more > more.txt
          ! gh release upload "$TAG" more.txt 2> e5
          grep -q '^HTTP 422: Cannot upload assets to an immutable release. (https://uploads.github.com/' e5
          ! gh release upload "$TAG" receipt.json 2> e6 && grep -qx 'asset under the same name already exists: \[receipt.json\]' e6
      - name: A draft can be deleted
        run: |
          gh release create v2 --draft --title "T v2" --notes-file notes.md
          gh release delete v2 --yes
          ! gh release view v2 2> e7 && grep -qx 'release not found' e7
      - name: Read back
        id: read
        run: |
          gh release download --pattern 'receipt-*.json' --pattern '*.json' --dir got
          test -f got/receipt.json
          echo "list=$(gh release list --json tagName,isDraft,isLatest --exclude-drafts --limit 5 | jq -c .)" >> "$GITHUB_OUTPUT"
"#;

#[test]
fn gh_stand_in_keeps_releases_and_refuses_to_change_a_published_one() {
    if !runs() {
        return;
    }
    let (_f, run) = run_ok(&format!("{ON}\njobs:{RELEASE_JOB}"));
    assert_eq!(
        run.job("release").step("read").outputs["list"],
        r#"[{"tagName":"v1","isDraft":false,"isLatest":true}]"#
    );
    let release: Value =
        serde_json::from_slice(&std::fs::read(run.releases_dir().join("v1/release.json")).unwrap())
            .unwrap();
    assert_eq!(release["isDraft"], json!(false));
    assert!(run.releases_dir().join("v1/assets/receipt.json").exists());
}

#[test]
fn gh_stand_in_refuses_writes_without_contents_write_and_calls_without_a_token() {
    if !runs() {
        return;
    }
    let (_f, run) = replay_to_end(&format!(
        r#"{ON}
permissions:
  contents: read
jobs:
  j:
    runs-on: ubuntu-latest
    steps:
      - name: read-only token
        env:
          GH_TOKEN: ${{{{ github.token }}}}
          GH_REPO: ${{{{ github.repository }}}}
        run: gh release create v1 --draft
      - name: no token
        if: always()
        run: gh release list
      - name: another repository
        if: always()
        env:
          GH_TOKEN: ${{{{ github.token }}}}
          GH_REPO: someone/else
        run: gh release list
"#
    ));
    let job = run.job("j");
    assert!(
        job.steps.iter().all(|s| s.outcome == Status::Failure),
        "{}",
        run.failure_report()
    );
    let log = job.log_of("read-only token");
    assert!(
        log.contains("HTTP 403") && log.contains("contents: write"),
        "{log}"
    );
    assert!(job
        .log_of("no token")
        .contains("set the GH_TOKEN environment variable"));
    assert!(job.log_of("another repository").contains("someone/else"));
    assert!(!run.releases_dir().join("v1").exists());
}

#[test]
fn gh_fail_once_fails_the_last_step_and_a_rerun_finishes_the_release() {
    if !runs() {
        return;
    }
    let (_f, r) = replay(&format!("{ON}\njobs:{RELEASE_JOB}"));
    r.gh_fail_once("release edit").unwrap();
    let mut run = run_workflow(r).unwrap();
    let job = run.job("release");
    assert_eq!(job.step("Publish the release").outcome, Status::Failure);
    assert!(job.log_of("Publish the release").contains("injected once"));
    // The draft exists; re-running the job finds it (`gh release view`), re-uploads with
    // --clobber and publishes.
    rerun_failed(&mut run).unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(run.run_attempt, 2);
    let release: Value =
        serde_json::from_slice(&std::fs::read(run.releases_dir().join("v1/release.json")).unwrap())
            .unwrap();
    assert_eq!(release["isDraft"], json!(false));
    assert_eq!(run.job("release").attempt, 2);
    run.assert_success();
}

// ---------------------------------------------------------------------------------------------
// The expression language alone
// ---------------------------------------------------------------------------------------------

struct Plain(Value);

impl expr::Scope for Plain {
    fn context(&self, name: &str) -> Result<Value, String> {
        self.0
            .get(name)
            .cloned()
            .ok_or_else(|| format!("no context {name}"))
    }
    fn check_path(&self, _: &[String], _: bool) -> Result<(), String> {
        Ok(())
    }
    fn status(&self, f: &str) -> Result<bool, String> {
        Ok(f == "success" || f == "always")
    }
    fn hash_files(&self, _: &[String]) -> Result<String, String> {
        Err("no files".into())
    }
}

#[test]
fn expressions_follow_github_s_coercion_and_functions() {
    let scope = Plain(json!({
        "env": { "DRY_RUN": "false", "EMPTY": "" },
        "inputs": { "force": true },
        "obj": { "Name": "x", "list": ["a", "b"] },
    }));
    let eval = |src: &str| {
        expr::eval(
            &expr::parse(src).unwrap_or_else(|e| panic!("{src}: {e}")),
            &scope,
        )
        .unwrap_or_else(|e| panic!("{src}: {e}"))
    };
    let cases: &[(&str, Value)] = &[
        ("env.DRY_RUN != 'true'", json!(true)),
        ("inputs.force || false", json!(true)),
        ("env.EMPTY || 'fallback'", json!("fallback")),
        ("env.EMPTY && 'x'", json!("")),
        ("'a' && 'b'", json!("b")),
        ("'ABC' == 'abc'", json!(true)),
        ("1 == '1'", json!(true)),
        ("true == 1", json!(true)),
        ("null == 0", json!(true)),
        ("'' == 0", json!(true)),
        ("'x' == 0", json!(false)),
        ("fromJSON('[]') == fromJSON('[]')", json!(false)),
        ("2 > 1 && 1 >= 1 && 'b' > 'A'", json!(true)),
        ("!0", json!(true)),
        ("!(1 == 1)", json!(false)),
        ("obj.name", json!("x")),
        ("obj['Name']", json!("x")),
        ("obj.list[1]", json!("b")),
        ("obj.missing", Value::Null),
        ("'it''s'", json!("it's")),
        ("format('{0}-{1}{{x}}', 'a', 2)", json!("a-2{x}")),
        ("contains(obj.list, 'A')", json!(true)),
        ("contains('Hello', 'ell')", json!(true)),
        ("startsWith('refs/tags/v1', 'refs/TAGS')", json!(true)),
        ("endsWith('file.json', '.JSON')", json!(true)),
        ("join(obj.list, '+')", json!("a+b")),
        ("join(obj.list)", json!("a,b")),
        ("toJSON(obj.list)", json!("[\n  \"a\",\n  \"b\"\n]")),
        ("fromJSON('{\"a\": [1, true]}').a[1]", json!(true)),
        ("fromJSON('3') == 3", json!(true)),
        ("0x10 == 16 && -1.5 < 0 && 1e2 == 100", json!(true)),
        ("success() && !failure()", json!(true)),
    ];
    for (src, expected) in cases {
        assert_eq!(&eval(src), expected, "{src}");
    }
    assert!(expr::parse("1 +").is_err());
    assert!(expr::parse("'unterminated").is_err());
    assert!(
        expr::render("a ${{ obj }} b", &scope).is_err(),
        "an object inside text is an error"
    );
    assert_eq!(
        expr::render("${{ obj.list }}", &scope).unwrap(),
        json!(["a", "b"])
    );
    assert_eq!(
        expr::render_string("x-${{ 'a' }}-${{ 1 }}", &scope).unwrap(),
        "x-a-1"
    );
    assert!(expr::condition("${{ env.DRY_RUN == 'false' }}", &scope).unwrap());
    assert!(!expr::condition("env.DRY_RUN == 'true'", &scope).unwrap());
}

#[test]
fn command_files_parse_single_and_multi_line_forms() {
    let parsed = actions_replay::parse_command_file("a=1\n\nb<<EOF\nx\ny=z\nEOF\nc=\n").unwrap();
    assert_eq!(
        parsed,
        vec![
            ("a".into(), "1".into()),
            ("b".into(), "x\ny=z".into()),
            ("c".into(), String::new())
        ]
    );
    assert!(actions_replay::parse_command_file("b<<EOF\nno end\n").is_err());
    assert!(actions_replay::parse_command_file("just text\n").is_err());
}

// ---------------------------------------------------------------------------------------------
// Composite actions from a registered source repository
// ---------------------------------------------------------------------------------------------

/// A git repository (branch `main`, one commit) holding `files` (`path`, `content`); paths
/// ending in `.sh` are executable. Returns the directory and the commit.
const GREET_ACTION: &str = r#"name: greet
description: Greets, from a script shipped beside it
inputs:
  who:
    description: whom to greet
    required: true
  repo:
    description: defaults to the caller's repository
    default: ${{ github.repository }}
  me:
    default: ${{ github.action_repository }}
outputs:
  greeting:
    description: the greeting
    value: ${{ steps.say.outputs.text }}
  tail:
    value: ${{ steps.script.outputs.tail }}
runs:
  using: composite
  steps:
    - id: say
      shell: bash
      run: |
        # GitHub sets no INPUT_ variables for composite actions.
        test -z "${INPUT_WHO:-}"
        echo "text=hello ${{ inputs.who }} from ${{ inputs.repo }} via ${{ inputs.me }}" >> "$GITHUB_OUTPUT"
        echo "FROM_ACTION=set-inside" >> "$GITHUB_ENV"
    - id: script
      shell: bash
      env:
        SEEN: ${{ env.FROM_ACTION }}
      run: |
        test "$SEEN" = set-inside
        test "$GITHUB_ACTION_PATH" = "${{ github.action_path }}"
        test "$GITHUB_ACTION_REPOSITORY" = acme/actions
        "$GITHUB_ACTION_PATH/tail.sh" >> "$GITHUB_OUTPUT"
    - name: only on failure
      if: failure()
      shell: bash
      run: echo failure-step-ran
"#;

const FAILING_ACTION: &str = r#"name: fails
description: One soft failure, one hard, and a clean-up
outputs:
  soft:
    value: ${{ steps.soft.outcome }}/${{ steps.soft.conclusion }}
runs:
  using: composite
  steps:
    - id: soft
      shell: bash
      continue-on-error: true
      run: exit 3
    - id: hard
      shell: sh
      run: echo before-the-failure; exit 1
    - id: never
      shell: bash
      run: echo should-not-run
    - id: cleanup
      if: failure()
      shell: bash
      run: echo cleanup-ran
"#;

const NESTING_ACTION: &str = r#"name: nest
description: Calls a stand-in and another composite action
inputs:
  who:
    description: passed on
outputs:
  both:
    value: ${{ steps.tool.outputs.echoed }}+${{ steps.inner.outputs.greeting }}
runs:
  using: composite
  steps:
    - id: tool
      uses: acme/tool@v1
      with:
        msg: tool-${{ inputs.who }}
    - id: inner
      uses: acme/actions/.github/actions/greet@main
      with:
        who: ${{ steps.tool.outputs.echoed }}
"#;

fn action_fixture() -> (tempfile::TempDir, String) {
    committed_repo(&[
        (".github/actions/greet/action.yml", GREET_ACTION),
        (
            ".github/actions/greet/tail.sh",
            "#!/bin/sh\necho \"tail=from-script $(id -u)\"\n",
        ),
        ("fails/action.yaml", FAILING_ACTION),
        ("nest/action.yml", NESTING_ACTION),
        (
            "action.yml",
            "name: root\ndescription: at the root\nruns:\n  using: node20\n  main: index.js\n",
        ),
    ])
}

#[test]
fn composite_action_runs_its_steps_with_inputs_outputs_env_and_its_own_files() {
    if !runs() {
        return;
    }
    let (actions, commit) = action_fixture();
    let (_f, r) = replay(&format!(
        r#"{ON}
jobs:
  j:
    runs-on: ubuntu-latest
    steps:
      - id: call
        uses: acme/actions/.github/actions/greet@{commit}
        with:
          who: world
      - id: after
        run: |
          echo "env=$FROM_ACTION" >> "$GITHUB_OUTPUT"
          echo "greeting=${{{{ steps.call.outputs.greeting }}}}" >> "$GITHUB_OUTPUT"
"#
    ));
    let run = run_workflow(r.action_source("acme/actions", actions.path()))
        .unwrap_or_else(|e| panic!("{e:#}"));
    run.assert_success();
    let job = run.job("j");
    let call = job.step("call");
    let expected = "hello world from sandbox0/coding-agent-template via acme/actions";
    assert_eq!(call.outputs["greeting"], expected);
    let uid = Command::new("id").args(["-u", "runner"]).output().unwrap();
    assert_eq!(
        call.outputs["tail"],
        format!(
            "from-script {}",
            String::from_utf8_lossy(&uid.stdout).trim()
        )
    );
    assert_eq!(job.step("after").outputs["env"], "set-inside");
    assert_eq!(job.step("after").outputs["greeting"], expected);
    let log = job.log_of("call");
    assert!(
        log.contains("only on failure") && log.contains("skipped"),
        "{log}"
    );
    assert!(!log.contains("failure-step-ran"), "{log}");
}

#[test]
fn a_failing_composite_step_fails_the_calling_step_and_failure_steps_still_run() {
    if !runs() {
        return;
    }
    let (actions, _) = action_fixture();
    let (_f, r) = replay(&format!(
        r#"{ON}
jobs:
  j:
    runs-on: ubuntu-latest
    steps:
      - id: call
        uses: acme/actions/fails@main
      - id: next
        run: echo next-ran
      - id: report
        if: always()
        run: echo "soft=${{{{ steps.call.outputs.soft }}}}" >> "$GITHUB_OUTPUT"
"#
    ));
    let run = run_workflow(r.action_source("acme/actions", actions.path()))
        .unwrap_or_else(|e| panic!("{e:#}"));
    let job = run.job("j");
    assert_eq!(job.status, Status::Failure);
    assert_eq!(job.step("call").outcome, Status::Failure);
    assert_eq!(job.step("next").outcome, Status::Skipped);
    assert_eq!(job.step("report").outputs["soft"], "failure/success");
    let log = job.log_of("call");
    assert!(log.contains("before-the-failure"), "{log}");
    assert!(log.contains("cleanup-ran"), "{log}");
    assert!(!log.contains("should-not-run"), "{log}");
}

#[test]
fn composite_steps_may_use_stand_ins_and_other_composite_actions() {
    if !runs() {
        return;
    }
    let (actions, _) = action_fixture();
    let (_f, r) = replay(&format!(
        r#"{ON}
jobs:
  j:
    runs-on: ubuntu-latest
    steps:
      - id: call
        uses: acme/actions/nest@main
        with:
          who: nested
"#
    ));
    let r = r.action_source("acme/actions", actions.path()).stand_in(
        "acme/tool",
        StandIn::Script(r#"echo "echoed=$INPUT_MSG" >> "$GITHUB_OUTPUT""#.into()),
    );
    let run = run_workflow(r).unwrap_or_else(|e| panic!("{e:#}"));
    run.assert_success();
    assert_eq!(
        run.job("j").step("call").outputs["both"],
        "tool-nested+hello tool-nested from sandbox0/coding-agent-template via acme/actions"
    );
}

#[test]
fn composite_actions_refuse_what_github_rejects_or_ignores() {
    if !runs() {
        return;
    }
    let broken = committed_repo(&[
        (
            "noshell/action.yml",
            "name: x\ndescription: x\nruns:\n  using: composite\n  steps:\n    - run: echo hi\n",
        ),
        (
            "secrets/action.yml",
            "name: x\ndescription: x\nruns:\n  using: composite\n  steps:\n    - shell: bash\n      run: echo ${{ secrets.GITHUB_TOKEN }}\n",
        ),
        (
            "typo/action.yml",
            "name: x\ndescription: x\ninputs:\n  a:\n    descripton: typo\nruns:\n  using: composite\n  steps: []\n",
        ),
    ])
    .0;
    let (greet, _) = action_fixture();
    let error = |uses: &str, with: &str, source: &std::path::Path| -> String {
        let (_f, r) = replay(&format!(
            "{ON}\njobs:\n  j:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: {uses}\n{with}"
        ));
        match run_workflow(r.action_source("acme/actions", source)) {
            Ok(run) => panic!(
                "`uses: {uses}` should not replay: {:?}",
                run.job("j").status
            ),
            Err(e) => format!("{e:#}"),
        }
    };
    let e = error(
        "acme/actions/.github/actions/greet@main",
        "        with:\n          who: x\n          whom: y\n",
        greet.path(),
    );
    assert!(e.contains("declares no input `whom`"), "{e}");
    let e = error("acme/actions/.github/actions/greet@main", "", greet.path());
    assert!(e.contains("required input `who`"), "{e}");
    let e = error("acme/actions/.github/actions/greet@nope", "", greet.path());
    assert!(e.contains("`nope` is not a commit or branch"), "{e}");
    let e = error("acme/actions/missing@main", "", greet.path());
    assert!(e.contains("missing/action.yml"), "{e}");
    let e = error("acme/actions@main", "", greet.path());
    assert!(e.contains("runs.using is `node20`"), "{e}");
    let e = error("acme/actions/noshell@main", "", broken.path());
    assert!(e.contains("needs `shell`"), "{e}");
    let e = error("acme/actions/secrets@main", "", broken.path());
    assert!(e.contains("`secrets` context is not available"), "{e}");
    let e = error("acme/actions/typo@main", "", broken.path());
    assert!(e.contains("`descripton`"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// gh: another repository's releases, attestations
// ---------------------------------------------------------------------------------------------

use actions_replay::{add_release, attestation_records, record_attestation};

const TEMPLATE: &str = "acme/template";
const TEMPLATE_RELEASE_WF: &str = "acme/template/.github/workflows/release.yml";

fn sha256_of(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
}

/// A foreign state dir with releases v0.9.0 (old), v1.0.0, v1.1.0 (latest) and a draft, each
/// published one with `template.txt` holding its tag.
fn template_state() -> tempfile::TempDir {
    let state = tempfile::tempdir().unwrap();
    template_releases(state.path());
    state
}

/// [`template_state`]'s releases, added to the gh state dir `state`.
fn template_releases(state: &std::path::Path) {
    let assets = tempfile::tempdir().unwrap();
    for (tag, created, draft) in [
        ("v1.0.0", "2026-01-01T00:00:00Z", false),
        ("v1.1.0", "2026-02-01T00:00:00Z", false),
        ("v0.9.0", "2025-12-01T00:00:00Z", false),
        ("v2.0.0", "2026-03-01T00:00:00Z", true),
    ] {
        let file = assets.path().join(tag).join("template.txt");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, format!("{tag}\n")).unwrap();
        add_release(state, tag, created, &[file], draft).unwrap();
    }
}

/// `gh release list` as the plan job runs it: a read-only token is listed no drafts (only a
/// token that may push sees them, cli/cli#9076), `--order asc` with `--limit` keeps the oldest
/// (the limit applies after the order, cli/cli v2.60.0 pkg/cmd/release/list/http.go), and a
/// token that may push sees the draft.
#[test]
fn gh_release_list_hides_drafts_from_a_read_token_and_limits_after_the_order() {
    if !runs() {
        return;
    }
    let (_f, r) = replay(&format!(
        r#"{ON}
jobs:
  read:
    runs-on: ubuntu-latest
    permissions:
      contents: read
    env:
      GH_TOKEN: ${{{{ github.token }}}}
      GH_REPO: ${{{{ github.repository }}}}
    steps:
      - id: list
        run: |
          echo "all=$(gh release list --limit 10000 --json tagName,isDraft --jq '[.[].tagName] | join(",")')" >> "$GITHUB_OUTPUT"
          echo "oldest=$(gh release list --order asc --limit 1 --json tagName --jq '.[0].tagName')" >> "$GITHUB_OUTPUT"
  write:
    runs-on: ubuntu-latest
    permissions:
      contents: write
    env:
      GH_TOKEN: ${{{{ github.token }}}}
      GH_REPO: ${{{{ github.repository }}}}
    steps:
      - id: list
        run: |
          echo "all=$(gh release list --json tagName --jq '[.[].tagName] | join(",")')" >> "$GITHUB_OUTPUT"
          echo "published=$(gh release list --exclude-drafts --limit 2 --json tagName --jq '[.[].tagName] | join(",")')" >> "$GITHUB_OUTPUT"
"#
    ));
    template_releases(&r.gh_state_dir());
    let run = run_workflow(r).unwrap_or_else(|e| panic!("{e:#}"));
    run.assert_success();
    let read = &run.job("read").step("list").outputs;
    assert_eq!(read["all"], "v1.1.0,v1.0.0,v0.9.0");
    assert_eq!(read["oldest"], "v0.9.0");
    let write = &run.job("write").step("list").outputs;
    assert_eq!(write["all"], "v2.0.0,v1.1.0,v1.0.0,v0.9.0");
    assert_eq!(write["published"], "v1.1.0,v1.0.0");
}

#[test]
fn gh_reads_another_repository_s_published_releases_and_changes_nothing_there() {
    if !runs() {
        return;
    }
    let state = template_state();
    let (_f, r) = replay(&format!(
        r#"{ON}
jobs:
  j:
    runs-on: ubuntu-latest
    # No contents permission at all: the other repository is public.
    permissions:
      actions: read
    env:
      GH_TOKEN: ${{{{ github.token }}}}
    steps:
      - id: read
        run: |
          echo "list=$(gh release list --repo {TEMPLATE} --json tagName,isLatest --exclude-drafts | jq -c .)" >> "$GITHUB_OUTPUT"
          echo "asc=$(gh release list -R {TEMPLATE} --json tagName --order asc --jq '[.[].tagName] | join(",")')" >> "$GITHUB_OUTPUT"
          echo "newest=$(GH_REPO={TEMPLATE} gh release list --limit 1 --json tagName --jq '.[0].tagName')" >> "$GITHUB_OUTPUT"
          gh release download v1.1.0 --repo {TEMPLATE} --pattern '*.txt' --dir got
          echo "got=$(cat got/template.txt)" >> "$GITHUB_OUTPUT"
          echo "latest=$(gh release view --repo {TEMPLATE} --json tagName --jq .tagName)" >> "$GITHUB_OUTPUT"
          echo "digest=$(gh release view v1.0.0 --repo {TEMPLATE} --json assets --jq '.assets[0].digest')" >> "$GITHUB_OUTPUT"
          gh release download v1.0.0 --repo {TEMPLATE} --pattern template.txt --output one.txt
          echo "one=$(cat one.txt)" >> "$GITHUB_OUTPUT"
      - name: drafts are invisible
        run: gh release view v2.0.0 --repo {TEMPLATE}
      - name: create
        if: always()
        run: gh release create v9 --repo {TEMPLATE} --notes x
      - name: upload
        if: always()
        run: echo x > x.txt && GH_REPO={TEMPLATE} gh release upload v1.1.0 x.txt
      - name: unknown repository
        if: always()
        run: gh release list --repo acme/unknown
"#
    ));
    let run = run_workflow(r.gh_foreign_repository(TEMPLATE, state.path()))
        .unwrap_or_else(|e| panic!("{e:#}"));
    let job = run.job("j");
    let read = job.step("read");
    assert_eq!(read.outcome, Status::Success, "{}", run.failure_report());
    assert_eq!(
        read.outputs["list"],
        r#"[{"tagName":"v1.1.0","isLatest":true},{"tagName":"v1.0.0","isLatest":false},{"tagName":"v0.9.0","isLatest":false}]"#
    );
    // Without --exclude-drafts an outsider still sees no draft.
    assert_eq!(read.outputs["asc"], "v0.9.0,v1.0.0,v1.1.0");
    assert_eq!(read.outputs["newest"], "v1.1.0");
    assert_eq!(read.outputs["got"], "v1.1.0");
    assert_eq!(read.outputs["latest"], "v1.1.0");
    assert_eq!(read.outputs["digest"], sha256_of(b"v1.0.0\n"));
    assert_eq!(read.outputs["one"], "v1.0.0");
    for name in [
        "drafts are invisible",
        "create",
        "upload",
        "unknown repository",
    ] {
        assert_eq!(job.step(name).outcome, Status::Failure, "{name}");
    }
    assert!(job
        .log_of("drafts are invisible")
        .contains("release not found"));
    for name in ["create", "upload"] {
        let log = job.log_of(name);
        assert!(log.contains("HTTP 403") && log.contains(TEMPLATE), "{log}");
    }
    assert!(job.log_of("unknown repository").contains("HTTP 404"));
    assert!(!state.path().join("releases/v9").exists());
    assert_eq!(
        std::fs::read_dir(state.path().join("releases/v1.1.0/assets"))
            .unwrap()
            .count(),
        1
    );
}

/// Each (step, text): the step failed, and its log says the text.
fn assert_steps_fail_saying(job: &JobRun, failing: &[(&str, &str)]) {
    for (step, says) in failing {
        assert_eq!(job.step(step).outcome, Status::Failure, "{step}");
        let log = job.log_of(step);
        assert!(log.contains(says), "{step}: {log}");
    }
}

/// Sigstore's real material, beside the checkout (`../shared/fixtures/sigstore`; its
/// SOURCE.md says what each file is); `None`, saying why, where it is absent.
fn sigstore_fixtures() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/sigstore");
    if dir.is_dir() {
        return Some(dir.canonicalize().unwrap());
    }
    let name = std::thread::current().name().unwrap_or("?").to_string();
    let _ = writeln!(
        std::io::stderr(),
        "skipped {name}: {} is absent (the real Sigstore material lives beside the checkout)",
        dir.display()
    );
    None
}

/// `gh attestation verify --bundle FILE --custom-trusted-root FILE` verifies offline, as gh
/// does, a real bundle no one here wrote: cli/cli's public-good actions/attest bundle (a
/// reusable workflow's, Rekor `dsse` entry) with the public-good root is accepted; edited, for
/// another digest, under GitHub's root, without a root (gh would ask TUF), for another
/// repository or signer, it is refused as gh refuses it.
#[test]
fn gh_attestation_verify_checks_a_bundle_file_offline_as_gh_does() {
    if !runs() {
        return;
    }
    let Some(sigstore) = sigstore_fixtures() else {
        return;
    };
    use base64::Engine as _;
    let bundle = std::fs::read_to_string(
        sigstore.join("cli-cli/reusable-workflow-attestation.sigstore.json"),
    )
    .unwrap();
    let one_line = |file: &str| {
        let v: Value =
            serde_json::from_slice(&std::fs::read(sigstore.join(file)).unwrap()).unwrap();
        format!("{v}\n")
    };
    let mut edited: Value = serde_json::from_str(&bundle).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD;
    let payload = b64
        .decode(edited["dsseEnvelope"]["payload"].as_str().unwrap())
        .unwrap();
    let payload = String::from_utf8(payload)
        .unwrap()
        .replace("refs/heads/main", "refs/heads/mainx");
    edited["dsseEnvelope"]["payload"] = b64.encode(payload).into();
    let edited = format!("{edited}\n");
    let (public_good, github) = (
        one_line("public-good-trusted_root.json"),
        one_line("github-trusted_root.json"),
    );
    let (source, _) = committed_repo(&[
        ("hello.txt", "not a bundle\n"),
        ("bundle.json", &bundle),
        ("edited.jsonl", &edited),
        ("public-good.jsonl", &public_good),
        ("github.jsonl", &github),
    ]);
    let subject = "oci://registry.example.test/attest-demo@sha256:\
                   49a3aa6075e0f49f82843e74b5baa614ad2a588e6675612bf108a0a008c5ac25";
    let verify = format!(
        "gh attestation verify {subject} --repo malancas/attest-demo \
         --signer-workflow github/artifact-attestations-workflows/.github/workflows/attest.yml \
         --deny-self-hosted-runners --format json"
    );
    let workflow_dir = tempfile::tempdir().unwrap();
    let workflow = workflow_dir.path().join("wf.yml");
    std::fs::write(
        &workflow,
        format!(
            r#"{ON}
jobs:
  j:
    runs-on: ubuntu-latest
    env:
      GH_TOKEN: ${{{{ github.token }}}}
    steps:
      - uses: actions/checkout@0000000000000000000000000000000000000000 # v7
      - id: ok
        run: |
          {verify} --bundle bundle.json --custom-trusted-root public-good.jsonl > out.json
          echo "ref=$(jq -r '.[0].verificationResult.signature.certificate.sourceRepositoryRef' out.json)" >> "$GITHUB_OUTPUT"
      - name: edited
        if: always()
        run: {verify} --bundle edited.jsonl --custom-trusted-root public-good.jsonl
      - name: other digest
        if: always()
        run: gh attestation verify oci://registry.example.test/attest-demo@sha256:{zeros} --repo malancas/attest-demo --bundle bundle.json --custom-trusted-root public-good.jsonl
      - name: github root
        if: always()
        run: {verify} --bundle bundle.json --custom-trusted-root github.jsonl
      - name: no root
        if: always()
        run: {verify} --bundle bundle.json
      - name: other repository
        if: always()
        run: gh attestation verify {subject} --repo malancas/other --bundle bundle.json --custom-trusted-root public-good.jsonl
      - name: other signer
        if: always()
        run: gh attestation verify {subject} --repo malancas/attest-demo --signer-workflow malancas/attest-demo/.github/workflows/release.yml --bundle bundle.json --custom-trusted-root public-good.jsonl
      - name: not a bundle file
        if: always()
        run: {verify} --bundle hello.txt --custom-trusted-root public-good.jsonl
"#,
            zeros = "0".repeat(64)
        ),
    )
    .unwrap();
    let r = Replay::new(&workflow, source.path()).unwrap();
    let run = run_workflow(r).unwrap_or_else(|e| panic!("{e:#}"));
    let job = run.job("j");
    assert_eq!(
        job.step("ok").outcome,
        Status::Success,
        "{}",
        run.failure_report()
    );
    assert_eq!(job.step("ok").outputs["ref"], "refs/heads/main");
    let failing = [
        ("edited", "verifying with issuer \"sigstore.dev\""),
        ("other digest", "verifying with issuer \"sigstore.dev\""),
        ("github root", "unable to use provided trusted roots"),
        ("no root", "failed to create TUF client"),
        (
            "other repository",
            "expected SourceRepositoryURI to be https://github.com/malancas/other",
        ),
        ("other signer", "verifying with issuer \"sigstore.dev\""),
        ("not a bundle file", "must be json or jsonl"),
    ];
    assert_steps_fail_saying(job, &failing);
    // What failed, said on the way: the signature, the digest, the signer.
    assert!(job.log_of("edited").contains("failed to verify signature"));
    assert!(job
        .log_of("other digest")
        .contains("does not match any digest in statement"));
    assert!(job.log_of("other signer").contains("expected SAN to match"));
}

#[test]
fn gh_attestation_verify_checks_digest_predicate_type_and_signer_workflow() {
    if !runs() {
        return;
    }
    let state = template_state();
    let file_digest = sha256_of(b"v1.1.0\n");
    let image_digest = format!("sha256:{}", "cd".repeat(32));
    record_attestation(
        state.path(),
        TEMPLATE,
        TEMPLATE_RELEASE_WF,
        actions_replay::SLSA_PROVENANCE_V1,
        &[("template.txt".into(), file_digest.clone())],
    )
    .unwrap();
    record_attestation(
        state.path(),
        TEMPLATE,
        TEMPLATE_RELEASE_WF,
        actions_replay::SPDX_DOCUMENT_V2_3,
        &[("ghcr.io/acme/template".into(), image_digest.clone())],
    )
    .unwrap();
    assert!(record_attestation(
        state.path(),
        TEMPLATE,
        "acme/template/workflows/a.yml",
        "p",
        &[("a".into(), file_digest.clone())]
    )
    .is_err());
    let verify = format!("gh attestation verify --repo {TEMPLATE}");
    let signer = format!("--signer-workflow {TEMPLATE_RELEASE_WF}");
    let (_f, r) = replay(&format!(
        r#"{ON}
jobs:
  j:
    runs-on: ubuntu-latest
    permissions:
      contents: read
      id-token: write
      attestations: write
    env:
      GH_TOKEN: ${{{{ github.token }}}}
    steps:
      - id: ok
        run: |
          gh release download v1.1.0 --repo {TEMPLATE} --dir got
          {verify} got/template.txt {signer} > out.txt
          grep -q "Verification succeeded" out.txt
          echo "type=$({verify} got/template.txt --format json | jq -r '.[0].verificationResult.statement.predicateType')" >> "$GITHUB_OUTPUT"
          {verify} oci://ghcr.io/acme/template@{image_digest} --predicate-type https://spdx.dev/Document/v2.3 {signer}
          gh attestation verify --owner acme got/template.txt
      - name: own attestation
        run: |
          echo mine > mine.txt
      - uses: actions/attest-build-provenance@abc
        with:
          subject-path: mine.txt
      - name: verify own
        run: gh attestation verify mine.txt --repo sandbox0/coding-agent-template --signer-workflow sandbox0/coding-agent-template/.github/workflows/wf.yml
      - name: unrecorded digest
        if: always()
        run: echo other > other.txt && {verify} other.txt
      - name: wrong signer
        if: always()
        run: {verify} got/template.txt --signer-workflow {TEMPLATE}/.github/workflows/other.yml
      - name: wrong predicate type
        if: always()
        run: {verify} got/template.txt --predicate-type https://spdx.dev/Document/v2.3
      - name: oci name differs
        if: always()
        run: {verify} oci://ghcr.io/acme/other@{image_digest} --predicate-type https://spdx.dev/Document/v2.3
      - name: oci tag
        if: always()
        run: {verify} oci://ghcr.io/acme/template:latest
      - name: no token
        if: always()
        env:
          GH_TOKEN: ""
        run: {verify} got/template.txt
      - name: other subcommand
        if: always()
        run: gh attestation download got/template.txt --repo {TEMPLATE}
"#
    ));
    let run = run_workflow(r.gh_foreign_repository(TEMPLATE, state.path()))
        .unwrap_or_else(|e| panic!("{e:#}"));
    let job = run.job("j");
    assert_eq!(
        job.step("ok").outcome,
        Status::Success,
        "{}",
        run.failure_report()
    );
    assert_eq!(
        job.step("ok").outputs["type"],
        "https://slsa.dev/provenance/v1"
    );
    assert_eq!(
        job.step("verify own").outcome,
        Status::Success,
        "{}",
        run.failure_report()
    );
    let own = attestation_records(&run.replay.gh_state_dir()).unwrap();
    assert_eq!(own.len(), 1);
    assert_eq!(own[0].repository, "sandbox0/coding-agent-template");
    assert_eq!(
        own[0].signer_workflow,
        "sandbox0/coding-agent-template/.github/workflows/wf.yml"
    );
    assert_eq!(own[0].predicate_type, "https://slsa.dev/provenance/v1");
    assert_eq!(own[0].subjects[0].digest, sha256_of(b"mine\n"));
    // The leg's own record is unchanged.
    assert_eq!(job.attestations().len(), 1);
    let failing = [
        ("unrecorded digest", "no matching attestations found"),
        ("wrong signer", "other.yml"),
        (
            "wrong predicate type",
            "predicate type https://spdx.dev/Document/v2.3",
        ),
        ("oci name differs", "no matching attestations found"),
        ("oci tag", "no @sha256: digest"),
        ("no token", "GH_TOKEN"),
        ("other subcommand", "only `gh attestation verify`"),
    ];
    assert_steps_fail_saying(job, &failing);
    assert!(job
        .log_of("unrecorded digest")
        .contains(&sha256_of(b"other\n")));
}

#[test]
fn a_fixture_release_in_the_run_s_own_state_is_the_runner_s_to_update() {
    if !runs() {
        return;
    }
    let (_f, r) = replay(&format!(
        r#"{ON}
jobs:
  j:
    runs-on: ubuntu-latest
    permissions:
      contents: write
    env:
      GH_TOKEN: ${{{{ github.token }}}}
      GH_REPO: ${{{{ github.repository }}}}
    steps:
      - id: read
        run: |
          gh release create v2 --notes second
          echo "list=$(gh release list --json tagName,isLatest | jq -c .)" >> "$GITHUB_OUTPUT"
"#
    ));
    let asset = r.root().join("fixture.txt");
    std::fs::write(&asset, "v1\n").unwrap();
    add_release(
        &r.gh_state_dir(),
        "v1",
        "2020-01-01T00:00:00Z",
        &[asset],
        false,
    )
    .unwrap();
    assert!(add_release(&r.gh_state_dir(), "v1", "2020-01-01T00:00:00Z", &[], false).is_err());
    assert!(add_release(&r.gh_state_dir(), "v0", "yesterday", &[], false).is_err());
    let run = run_workflow(r).unwrap_or_else(|e| panic!("{e:#}"));
    run.assert_success();
    assert_eq!(
        run.job("j").step("read").outputs["list"],
        r#"[{"tagName":"v2","isLatest":true},{"tagName":"v1","isLatest":false}]"#
    );
}
