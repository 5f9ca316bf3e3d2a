//! Runs the toolchain's own subcommands as child processes, one step at a time: each prints
//! `==> [n/m] name` before it starts, its stdout (`--json`) is kept in a file, its stderr
//! (progress) passes through, and its time is recorded for the table every phase ends with.
//! Runners that work side by side (one per platform) label every line they pass through, so
//! interleaved progress still says which platform it is about.
//!
//! Children rather than function calls, because each subcommand is also what a maintainer runs
//! by hand: the release is exactly those commands, in that order, with those files.
//!
//! A step is made from the child's request (`ChildRequest`), and its command line is that
//! request's `to_args`: the phases decide values, never flag spellings, and the binary's
//! round-trip test parses every step back into the request it came from.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::util::{atomic_write, Progress};

/// [`ChildRequest`] and a `From` for each request, from one list.
macro_rules! child_requests {
    ($($(#[$doc:meta])* $variant:ident($request:ty)),* $(,)?) => {
        /// What a step asks its child to do: the request of one of the subcommands a phase
        /// runs. The step's argv is rendered from it, so what the child parses is what the
        /// phase decided (the binary's round-trip test parses every step back into its
        /// request).
        #[derive(Debug, Clone, PartialEq)]
        pub enum ChildRequest {
            $($(#[$doc])* $variant($request),)*
        }
        $(impl From<$request> for ChildRequest {
            fn from(request: $request) -> ChildRequest {
                ChildRequest::$variant(request)
            }
        })*
    };
}

child_requests!(
    Gate(crate::release::gate::GateRequest),
    Resolve(crate::npm::resolve::ResolveRequest),
    Lock(crate::npm::lock::LockRequest),
    Base(crate::image::base::BaseRequest),
    Build(crate::image::build::BuildRequest),
    Smoke(crate::image::smoke::SmokeRequest),
    Sbom(crate::image::sbom::SbomRequest),
    Publish(crate::release::publish::PublishRequest),
    ReceiptWrite(crate::release::receipt_write::ReceiptWriteRequest),
    /// The verifier's own request. No `--manifest`: the child judges the receipt by the
    /// checkout's manifest, as `receipt verify` without it does.
    ReceiptVerify(template_verify::receipt::verify::VerifyRequest),
);

impl ChildRequest {
    /// The child's argv after the program name.
    pub fn to_args(&self) -> Vec<std::ffi::OsString> {
        match self {
            ChildRequest::Gate(r) => r.to_args(),
            ChildRequest::Resolve(r) => r.to_args(),
            ChildRequest::Lock(r) => r.to_args(),
            ChildRequest::Base(r) => r.to_args(),
            ChildRequest::Build(r) => r.to_args(),
            ChildRequest::Smoke(r) => r.to_args(),
            ChildRequest::Sbom(r) => r.to_args(),
            ChildRequest::Publish(r) => r.to_args(),
            ChildRequest::ReceiptWrite(r) => r.to_args(),
            ChildRequest::ReceiptVerify(r) => {
                // `--credentials-registry` only when set: an absent one lets the child take
                // XTASK_OCI_REGISTRY from the environment it inherits, as a person's would.
                crate::util::Argv::command(&["receipt", "verify"])
                    .switch("--json", r.json)
                    .option("--artifacts", r.artifacts.as_ref())
                    .switch("--check-registry", r.check_registry)
                    .option("--credentials-registry", r.credentials_registry.as_ref())
                    .positional(&r.file)
                    .into_vec()
            }
        }
    }
}

/// One subcommand: `cargo xtask <args>`, its stdout kept in `output` when given.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Step {
    pub name: String,
    /// What the child is asked; `args` is its rendering.
    #[serde(skip)]
    pub request: ChildRequest,
    pub args: Vec<String>,
    pub output: Option<PathBuf>,
    /// Environment variables set for this step only.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<(String, String)>,
}

impl Step {
    /// The step `name` that runs `request`, its argv rendered from it.
    pub(crate) fn new(name: impl Into<String>, request: impl Into<ChildRequest>) -> Step {
        let request = request.into();
        Step {
            name: name.into(),
            args: request
                .to_args()
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            request,
            output: None,
            env: Vec::new(),
        }
    }

    pub(crate) fn output(mut self, path: impl Into<PathBuf>) -> Step {
        self.output = Some(path.into());
        self
    }

    /// The command line a person would type.
    pub fn command_line(&self) -> String {
        let env: String = self.env.iter().map(|(k, v)| format!("{k}={v} ")).collect();
        format!("{env}cargo xtask {}", self.args.join(" "))
    }
}

use template_formats::model::platform_results::{StepStatus, StepTime};

/// Executes steps in order and remembers their times.
pub(crate) struct StepRunner {
    exe: PathBuf,
    root: PathBuf,
    total: usize,
    done: usize,
    /// Put in front of every line this runner prints or passes through, e.g. `linux/arm64 |`.
    label: Option<String>,
    pub progress: Progress,
    pub times: Vec<StepTime>,
}

impl StepRunner {
    /// `total` is how many steps the phase plans, for the `[n/m]` counter.
    pub(crate) fn new(root: &Path, total: usize) -> Result<StepRunner> {
        Ok(StepRunner {
            exe: std::env::current_exe().context("cannot find the running xtask binary")?,
            root: root.to_path_buf(),
            total,
            done: 0,
            label: None,
            progress: Progress::default(),
            times: Vec::new(),
        })
    }

    /// Labels every line this runner prints or passes through with `label`.
    pub(crate) fn labelled(mut self, label: impl Into<String>) -> StepRunner {
        self.label = Some(label.into());
        self
    }

    fn say(&self, message: String) {
        match &self.label {
            Some(label) => self.progress.step(labelled_line(label, &message)),
            None => self.progress.step(message),
        }
    }

    /// Runs `step`; a non-zero exit is an error naming the step and where its output is.
    pub(crate) async fn run(&mut self, step: &Step) -> Result<()> {
        if !self.run_allowing_failure(step).await? {
            bail!(
                "step `{}` failed: `{}`{}. Fix the cause and run it again: finished steps are \
                 skipped or no-ops",
                step.name,
                step.command_line(),
                step.output
                    .as_ref()
                    .map(|o| format!("; its output is in {}", o.display()))
                    .unwrap_or_default()
            );
        }
        Ok(())
    }

    /// Runs `step` and reports whether it exited zero (its output is kept either way).
    pub(crate) async fn run_allowing_failure(&mut self, step: &Step) -> Result<bool> {
        self.done += 1;
        self.say(format!(
            "==> [{}/{}] {}: {}",
            self.done,
            self.total.max(self.done),
            step.name,
            step.command_line()
        ));
        let started = Instant::now();
        // spawn + wait_with_output, not `output()`: tokio's `output()` pipes stderr whatever
        // was configured, which swallowed every child's progress and error messages.
        let mut child = tokio::process::Command::new(&self.exe)
            .args(&step.args)
            .envs(step.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&self.root)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(match self.label {
                Some(_) => Stdio::piped(),
                None => Stdio::inherit(),
            })
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start step `{}`", step.name))?;
        let forward = child
            .stderr
            .take()
            .zip(self.label.clone())
            .map(|(stderr, label)| tokio::spawn(forward_lines(stderr, label)));
        let output = child
            .wait_with_output()
            .await
            .with_context(|| format!("step `{}` did not finish", step.name))?;
        if let Some(forward) = forward {
            // The child has exited, so its stderr ends; a failed forward loses only progress.
            let _ = forward.await;
        }
        if let Some(path) = &step.output {
            atomic_write(path, &output.stdout)?;
        }
        // A step boundary: the crash-consistency test kills the phase here.
        crate::kill_point::reached(&format!("after-step:{}", step.name));
        let ok = output.status.success();
        let seconds = started.elapsed().as_secs_f64();
        self.times.push(StepTime {
            name: step.name.clone(),
            seconds,
            status: if ok {
                StepStatus::Ok
            } else {
                StepStatus::Failed
            },
        });
        self.say(format!(
            "<== {} {} in {}",
            step.name,
            if ok { "done" } else { "FAILED" },
            format_duration(seconds)
        ));
        Ok(ok)
    }
}

/// `text` behind `label`: the one form of a labelled line, whether the runner wrote it (after
/// its own timestamp) or passed it through from a step (whose own timestamp follows).
fn labelled_line(label: &str, text: &str) -> String {
    format!("{label} | {text}")
}

/// Passes a child's stderr through line by line, each line behind `label`.
async fn forward_lines(stderr: tokio::process::ChildStderr, label: String) {
    labelled_lines(stderr, &label, |line| eprintln!("{line}")).await;
}

/// Reads `input` to its end and hands each line, behind `label`, to `emit`. Bytes, not
/// `String`s: a line that is not UTF-8 must not stop the reading, or the child would block on
/// a full pipe.
async fn labelled_lines(
    input: impl tokio::io::AsyncRead + Unpin,
    label: &str,
    mut emit: impl FnMut(String),
) {
    use tokio::io::AsyncBufReadExt;
    let mut reader = tokio::io::BufReader::new(input);
    let mut line = Vec::new();
    while matches!(reader.read_until(b'\n', &mut line).await, Ok(n) if n > 0) {
        let text = String::from_utf8_lossy(&line);
        emit(labelled_line(label, text.trim_end_matches(['\n', '\r'])));
        line.clear();
    }
}

pub(crate) use crate::util::read_json;

/// Writes a value as pretty JSON (with a final newline), atomically.
pub(crate) fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(value)?;
    bytes.push(b'\n');
    atomic_write(path, &bytes)
}

/// `1 min 05 s`, `12.3 s`.
pub(crate) fn format_duration(seconds: f64) -> String {
    if seconds < 60.0 {
        format!("{seconds:.1} s")
    } else {
        let whole = seconds.round() as u64;
        format!("{} min {:02} s", whole / 60, whole % 60)
    }
}

/// The table of step times a phase prints when it ends.
pub(crate) fn render_times(title: &str, times: &[StepTime]) -> String {
    let width = times.iter().map(|t| t.name.len()).max().unwrap_or(0);
    let mut out = format!("{title}\n");
    for t in times {
        out.push_str(&format!(
            "  {:<width$}  {:>12}{}\n",
            t.name,
            format_duration(t.seconds),
            if t.status == StepStatus::Failed {
                "  FAILED"
            } else {
                ""
            }
        ));
    }
    let total: f64 = times.iter().map(|t| t.seconds).sum();
    out.push_str(&format!(
        "  {:<width$}  {:>12}\n",
        "total",
        format_duration(total)
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_line_is_labelled_even_after_bytes_that_are_not_utf8() {
        let input: &[u8] = b"first\r\nbad \xff byte\nlast without newline";
        let mut lines = Vec::new();
        labelled_lines(input, "linux/arm64", |l| lines.push(l)).await;
        assert_eq!(
            lines,
            [
                "linux/arm64 | first",
                "linux/arm64 | bad \u{fffd} byte",
                "linux/arm64 | last without newline",
            ]
        );
    }

    #[test]
    fn durations_read_like_a_person_writes_them() {
        assert_eq!(format_duration(12.34), "12.3 s");
        assert_eq!(format_duration(65.2), "1 min 05 s");
        assert_eq!(format_duration(3600.0), "60 min 00 s");
    }

    #[test]
    fn the_times_table_totals_and_marks_failures() {
        let times = [
            StepTime {
                name: "build linux/amd64".into(),
                seconds: 90.0,
                status: StepStatus::Ok,
            },
            StepTime {
                name: "smoke".into(),
                seconds: 10.0,
                status: StepStatus::Failed,
            },
        ];
        let table = render_times("steps:", &times);
        let build = table
            .lines()
            .find(|l| l.contains("build linux/amd64"))
            .unwrap();
        assert!(build.ends_with("1 min 30 s"), "{table}");
        assert!(table.contains("FAILED"));
        assert!(table.trim_end().ends_with("1 min 40 s"), "{table}");
    }

    #[test]
    fn steps_print_as_the_command_a_person_types() {
        let step = Step::new(
            "gate",
            crate::release::gate::GateRequest {
                now: Some("2026-11-30T04:37:00Z".into()),
                force: false,
                previous_receipt: Vec::new(),
                json: true,
            },
        );
        assert_eq!(
            step.command_line(),
            "cargo xtask gate --json --now 2026-11-30T04:37:00Z"
        );
    }
}
