//! The checks that run the image: a package's version command, Node's version, a harness's
//! handshake over pipes and the script checks, each in a container of its own that is removed
//! when the check ends.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bollard::container::LogOutput;
use bollard::Docker;
use futures_util::StreamExt;
use serde_json::Value;
use tokio::io::AsyncWriteExt;

use super::checks::{clip, node_version_verdict, record_matches, LineSplitter, NODE_CHECK};
use super::evidence;
use super::scripts::{RelaunchCheck, ScriptCheck, TurnsCheck};
use crate::image::engine::{self, ContainerSpec, OutputStream};
use template_formats::manifest::{Harness, NodeSpec, Platform};
use template_formats::model::smoke::{Check, HarnessEvidence};

/// Time limits, generous enough for qemu when the image is for another CPU.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub command: Duration,
    pub harness: Duration,
    pub browser: Duration,
}

impl Limits {
    pub(crate) fn for_emulation(emulated: bool) -> Limits {
        let factor = if emulated { 5 } else { 1 };
        Limits {
            command: Duration::from_secs(60 * factor),
            harness: Duration::from_secs(90 * factor),
            browser: Duration::from_secs(120 * factor),
        }
    }
}

/// What every container check needs.
#[derive(Clone)]
pub(super) struct Ctx {
    pub docker: Docker,
    pub image: String,
    pub platform: Option<Platform>,
    pub run_id: String,
    pub limits: Limits,
}

impl Ctx {
    fn spec(&self, cmd: &[String]) -> ContainerSpec {
        let argv: Vec<&str> = cmd.iter().map(String::as_str).collect();
        let mut spec = ContainerSpec::new(&self.image, &self.run_id, &argv);
        spec.platform = self.platform;
        spec
    }
}

/// Runs a check and records how long it took.
pub(super) async fn timed(check: impl std::future::Future<Output = Check>) -> Check {
    let started = Instant::now();
    let mut check = check.await;
    check.duration_secs = tenths(started);
    check
}

/// Seconds since `started`, in tenths.
pub(super) fn tenths(started: Instant) -> f64 {
    (started.elapsed().as_secs_f64() * 10.0).round() / 10.0
}

/// `command` must print exactly `expected`.
pub(super) async fn version_check(
    ctx: &Ctx,
    name: String,
    command: &[String],
    expected: &str,
) -> Check {
    match engine::run(&ctx.docker, &ctx.spec(command), ctx.limits.command).await {
        Err(err) => Check::new(name, false, format!("{err:#}")),
        Ok(out) => {
            let printed = out.stdout.trim();
            let passed = out.success() && printed == expected;
            let output = if passed {
                format!("`{}` printed `{printed}`", command.join(" "))
            } else {
                format!(
                    "`{}` should print `{expected}`; got:\n{}",
                    command.join(" "),
                    clip(&out.combined(), 2000)
                )
            };
            Check::new(name, passed, output)
        }
    }
}

/// Node is on the manifest's line, at least its minimum, and exactly the pinned version.
pub(super) async fn node_check(ctx: &Ctx, node: &NodeSpec) -> Check {
    let name = NODE_CHECK;
    let spec = ctx.spec(&node.version_command);
    match engine::run(&ctx.docker, &spec, ctx.limits.command).await {
        Err(err) => Check::new(name, false, format!("{err:#}")),
        Ok(out) if !out.success() => Check::new(name, false, out.combined()),
        Ok(out) => {
            let (mut passed, text) = node_version_verdict(&out.stdout, node);
            passed &= out.stdout.trim().trim_start_matches('v') == node.version.to_string();
            Check::new(name, passed, text)
        }
    }
}

/// The harness, started over pipes, answers its handshake with a record matching `expect`.
pub(super) async fn harness_check(ctx: &Ctx, harness: &Harness) -> Check {
    let name = template_formats::manifest::harness_check_name(&harness.name);
    let started = Instant::now();
    let mut spec = ctx.spec(&harness.command);
    spec.stdin = true;
    let attached = match engine::start_attached(&ctx.docker, &spec).await {
        Ok(a) => a,
        Err(err) => return Check::new(name, false, format!("{err:#}")),
    };
    let engine::Attached {
        guard,
        mut output,
        mut input,
    } = attached;
    let outcome = async {
        // One native record per line, LF-terminated; stdin stays open, as in a supervised
        // session (some harnesses end at EOF before they answer).
        for record in &harness.handshake {
            input.write_all(record.as_bytes()).await?;
            input.write_all(b"\n").await?;
        }
        input.flush().await?;
        await_answer(&mut output, &harness.expect, ctx.limits.harness, started).await
    }
    .await;
    drop(input);
    drop(output);
    let removed = guard.remove().await;
    match (outcome, removed) {
        (Ok((passed, text)), Ok(())) => Check::new(name, passed, text),
        (Ok((_, text)), Err(err)) => {
            Check::new(name, false, format!("{text}\ncleanup failed: {err:#}"))
        }
        (Err(err), _) => Check::new(name, false, format!("{err:#}")),
    }
}

/// Reads stdout records until one matches `expect`, the harness exits, or `limit` passes;
/// returns the verdict and its evidence.
async fn await_answer(
    output: &mut OutputStream,
    expect: &BTreeMap<String, Value>,
    limit: Duration,
    started: Instant,
) -> anyhow::Result<(bool, String)> {
    let mut stdout = LineSplitter::default();
    let mut seen: Vec<String> = Vec::new();
    let mut stderr = String::new();
    let unanswered = |why: String, seen: &[String], stderr: &str| {
        format!(
            "{why}\nstdout:\n{}\nstderr:\n{}",
            clip(&seen.join("\n"), 1500),
            clip(stderr, 1500)
        )
    };
    let expected = serde_json::to_string(expect).unwrap_or_default();
    let deadline = tokio::time::sleep(limit);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            item = output.next() => match item {
                Some(Ok(LogOutput::StdOut { message })) | Some(Ok(LogOutput::Console { message })) => {
                    for line in stdout.push(&message) {
                        let matched = serde_json::from_str::<Value>(&line)
                            .map(|record| record_matches(&record, expect))
                            .unwrap_or(false);
                        if matched {
                            return Ok((true, format!(
                                "answered in {:.1}s after {} earlier record(s): {}",
                                started.elapsed().as_secs_f64(),
                                seen.len(),
                                clip(&line, 600)
                            )));
                        }
                        seen.push(line);
                    }
                }
                Some(Ok(LogOutput::StdErr { message })) => stderr.push_str(&String::from_utf8_lossy(&message)),
                Some(Ok(LogOutput::StdIn { .. })) => {}
                Some(Err(err)) => return Err(anyhow::anyhow!(err)),
                None => {
                    let why = format!("exited before answering (expected a record with {expected})");
                    return Ok((false, unanswered(why, &seen, &stderr)));
                }
            },
            _ = &mut deadline => {
                let why = format!("no record with {expected} within {} s", limit.as_secs());
                return Ok((false, unanswered(why, &seen, &stderr)));
            }
        }
    }
}

/// The script exits 0 and its stdout holds every expected string.
pub(super) async fn script_check(ctx: &Ctx, check: &ScriptCheck) -> Check {
    let name = check.name.as_str();
    let mut spec = ctx.spec(&["bash".into(), "-c".into(), check.script.clone()]);
    spec.user = check.user.clone();
    spec.security_opt = check.security_opt.clone();
    let limit = ctx.limits.browser;
    match engine::run(&ctx.docker, &spec, limit).await {
        Err(err) => Check::new(name, false, format!("{err:#}")),
        Ok(out) => {
            let (passed, text) = script_verdict(&out, &check.expect);
            Check::new(name, passed, text)
        }
    }
}

/// Exit 0 and every expected string on stdout; the evidence, clipped.
fn script_verdict(out: &engine::ContainerOutput, expect: &[String]) -> (bool, String) {
    let missing: Vec<&String> = expect
        .iter()
        .filter(|e| !out.stdout.contains(e.as_str()))
        .collect();
    let passed = out.success() && missing.is_empty();
    let mut text = clip(&out.combined(), 2500);
    if !missing.is_empty() {
        text.push_str(&format!("\nmissing from stdout: {missing:?}"));
    }
    (passed, text)
}

/// The first script, then the second, each in a container of its own with its host name and
/// the same fresh volume mounted; judged by the second's output. The volume is removed after.
pub(super) async fn relaunch_check(ctx: &Ctx, check: &RelaunchCheck) -> Check {
    let name = check.name.as_str();
    let volume = format!("{}-relaunch", ctx.run_id);
    if let Err(err) = engine::create_volume(&ctx.docker, &ctx.run_id, &volume).await {
        return Check::new(name, false, format!("{err:#}"));
    }
    let run = |script: &str, hostname: &str| {
        let mut spec = ctx.spec(&["bash".into(), "-c".into(), script.to_string()]);
        spec.security_opt = check.security_opt.clone();
        spec.hostname = Some(hostname.to_string());
        spec.binds = vec![format!("{volume}:{}", check.mount)];
        async move { engine::run(&ctx.docker, &spec, ctx.limits.browser).await }
    };
    let outcome = async {
        let first = run(&check.first, &check.hostnames[0]).await?;
        if !first.success() {
            return Ok((
                false,
                format!("the first start failed:\n{}", clip(&first.combined(), 2500)),
            ));
        }
        let second = run(&check.second, &check.hostnames[1]).await?;
        let (passed, text) = script_verdict(&second, &check.expect);
        anyhow::Ok((
            passed,
            format!(
                "{}: {}\n{}: {text}",
                check.hostnames[0],
                clip(&first.stdout, 600),
                check.hostnames[1]
            ),
        ))
    }
    .await;
    let removed = engine::remove_volume(&ctx.docker, &volume).await;
    match (outcome, removed) {
        (Ok((passed, text)), Ok(())) => Check::new(name, passed, text),
        (Ok((_, text)), Err(err)) => {
            Check::new(name, false, format!("{text}\ncleanup failed: {err:#}"))
        }
        (Err(err), _) => Check::new(name, false, format!("{err:#}")),
    }
}

/// The harness's turn and resume, with a tmpfs /tmp and a fresh volume at the workspace, as a
/// sandbox runs it; the volume is removed after. Its evidence (the protocol transcript, where
/// it wrote) comes back beside the check, which also fails on a broken resume contract or a
/// file written outside the workspace and /tmp (`evidence.rs`).
pub(super) async fn turns_check(ctx: &Ctx, check: &TurnsCheck) -> (Check, Option<HarnessEvidence>) {
    let name = check.name.as_str();
    let volume = format!(
        "{}-{}",
        ctx.run_id,
        name.replace(|c: char| !c.is_ascii_alphanumeric(), "-")
    );
    if let Err(err) = engine::create_volume(&ctx.docker, &ctx.run_id, &volume).await {
        return (Check::new(name, false, format!("{err:#}")), None);
    }
    let mut spec = ctx.spec(&["bash".into(), "-c".into(), check.script.clone()]);
    spec.tmpfs = vec!["/tmp".into()];
    spec.binds = vec![format!("{volume}:{}", check.workspace)];
    // Two harness starts, two turns and the setup around them.
    let limit = ctx.limits.harness * 3;
    let outcome = engine::run(&ctx.docker, &spec, limit).await;
    let removed = engine::remove_volume(&ctx.docker, &volume).await;
    match (outcome, removed) {
        (Ok(out), Ok(())) => turns_verdict(check, out),
        (Ok(out), Err(err)) => (
            Check::new(
                name,
                false,
                format!("{}\ncleanup failed: {err:#}", clip(&out.combined(), 2500)),
            ),
            None,
        ),
        (Err(err), _) => (Check::new(name, false, format!("{err:#}")), None),
    }
}

/// The script's verdict, and the driver's evidence judged: problems with it come first.
fn turns_verdict(
    check: &TurnsCheck,
    out: engine::ContainerOutput,
) -> (Check, Option<HarnessEvidence>) {
    let (raw, stdout) = evidence::split_stdout(&out.stdout);
    let out = engine::ContainerOutput { stdout, ..out };
    let (passed, text) = script_verdict(&out, &check.expect);
    let home = check.workspace.as_str();
    let raw = match raw {
        Some(Ok(raw)) => raw,
        Some(Err(why)) => {
            return (
                Check::new(&check.name, false, format!("{why}\n{text}")),
                None,
            )
        }
        None => {
            let why = "the driver printed no evidence (its `@harness-evidence` line)";
            return (
                Check::new(&check.name, false, format!("{why}\n{text}")),
                None,
            );
        }
    };
    let problems = evidence::problems(&check.harness, &raw, home);
    let found = evidence::evidence(&check.harness.name, &raw, home);
    let mut report = problems.join("\n");
    if !report.is_empty() {
        report.push('\n');
    }
    report.push_str(&text);
    (
        Check::new(&check.name, passed && problems.is_empty(), report),
        Some(found),
    )
}
