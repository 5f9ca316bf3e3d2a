//! `cargo xtask smoke --image REF`: runs the built image through the Docker Engine API and
//! checks, for real, what the template promises:
//!
//! - every package's `version_command` prints the locked version (template/package.json), and
//!   Node is on the manifest's major line and at least its minimum;
//! - each harness command of the manifest, started over pipes (no TTY), answers its native
//!   handshake with a stdout record matching the manifest's `expect` pointers, with no
//!   credentials and within a time limit;
//! - playwright-cli drives Chromium headless to a page served inside the container and reads
//!   it back; Xtigervnc (speaking RFB) and openbox start as `sandbox-browser`; `ws` echoes a
//!   message over a real WebSocket; the `sandbox-browser` user exists;
//! - the image config: HOME and WorkingDir /workspace, no Entrypoint/Cmd, the no-update and
//!   no-telemetry variables, the provenance labels, the requested OS/architecture;
//! - nothing of the extra CA bundle is left: no CA variables, and no certificate of the host's
//!   bundle that Debian does not ship appears in any layer of the image (the layers are
//!   exported and scanned), nor the build's CA files by name.
//!
//! Every container carries this run's label and is removed when its check ends, on timeout
//! and on Ctrl-C too; the run ends by removing anything still labelled. Exit 0 only when every
//! check passed.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use base64::Engine as _;
use bollard::container::LogOutput;
use bollard::models::ImageInspect;
use bollard::Docker;
use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::AsyncWriteExt;

use crate::flags::SmokeArgs;
use crate::image::build::{locked_versions, LOCKFILE_LABEL, PACKAGE_JSON_PATH, PACKAGE_LOCK_PATH};
use crate::image::engine::{self, ContainerSpec};
use crate::manifest::{repo_root, Harness, Manifest, Platform, MANIFEST_PATH};
use crate::util::{print_json, sha256_hex, Progress};

/// Variables the image must set so no CLI updates itself or phones home, with their values.
pub const REQUIRED_ENV: &[(&str, &str)] = &[
    ("HOME", "/workspace"),
    ("DISABLE_AUTOUPDATER", "1"),
    ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
    ("PI_SKIP_VERSION_CHECK", "1"),
    ("PI_TELEMETRY", "0"),
    ("NPM_CONFIG_UPDATE_NOTIFIER", "false"),
    ("NPM_CONFIG_AUDIT", "false"),
    ("NPM_CONFIG_FUND", "false"),
    ("PLAYWRIGHT_MCP_BROWSER", "chromium"),
    ("PLAYWRIGHT_MCP_EXECUTABLE_PATH", "/usr/bin/chromium"),
];

/// Variables that would point a process at a CA bundle: none may survive into the image.
pub const FORBIDDEN_CA_ENV: &[&str] = &[
    "NODE_EXTRA_CA_CERTS",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "CURL_CA_BUNDLE",
    "REQUESTS_CA_BUNDLE",
    "NPM_CONFIG_CAFILE",
    "GIT_SSL_CAINFO",
];

/// The user the headed browser runs as.
pub const BROWSER_USER: &str = "sandbox-browser";

/// One check and its evidence.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Check {
    pub name: String,
    pub passed: bool,
    pub output: String,
    pub duration_secs: f64,
}

impl Check {
    fn new(name: impl Into<String>, passed: bool, output: impl Into<String>) -> Check {
        Check {
            name: name.into(),
            passed,
            output: output.into(),
            duration_secs: 0.0,
        }
    }
}

/// What `smoke --json` prints.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SmokeReport {
    pub image: String,
    pub image_id: Option<String>,
    pub platform: String,
    pub emulated: bool,
    pub passed: bool,
    pub checks: Vec<Check>,
    pub duration_secs: f64,
}

/// Time limits, generous enough for qemu when the image is for another CPU.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub command: Duration,
    pub harness: Duration,
    pub browser: Duration,
}

impl Limits {
    pub fn for_emulation(emulated: bool) -> Limits {
        let factor = if emulated { 5 } else { 1 };
        Limits {
            command: Duration::from_secs(60 * factor),
            harness: Duration::from_secs(90 * factor),
            browser: Duration::from_secs(120 * factor),
        }
    }
}

pub async fn run(args: SmokeArgs) -> Result<ExitCode> {
    let progress = Progress::default();
    let root = repo_root();
    let docker = engine::connect().await?;
    let run_id = engine::new_run_id("smoke");
    let ca_bundle = crate::image::build::host_ca_bundle(args.ca_bundle.as_deref());
    let smoke = smoke(
        &docker,
        &root,
        &args.image,
        args.platform,
        ca_bundle.as_deref(),
        &run_id,
        &progress,
    );
    let outcome = tokio::select! {
        outcome = smoke => outcome,
        _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
    };
    // Whatever happened, nothing this run started stays behind.
    let leftovers = engine::remove_labelled(&docker, &run_id).await?;
    if leftovers > 0 {
        progress.step(format!("removed {leftovers} container(s) left by checks"));
    }
    let report = outcome?;
    if args.json {
        print_json(&report)?;
    } else {
        for check in &report.checks {
            println!(
                "{} {} ({:.1}s)\n    {}",
                if check.passed { "PASS" } else { "FAIL" },
                check.name,
                check.duration_secs,
                check.output.replace('\n', "\n    ")
            );
        }
        let failed = report.checks.iter().filter(|c| !c.passed).count();
        println!(
            "{}: {} checks, {} failed, {:.0} s",
            report.image,
            report.checks.len(),
            failed,
            report.duration_secs
        );
    }
    Ok(if report.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Runs every check against `image` and returns the report; errors only when the checks cannot
/// run at all (no engine, no image, unreadable repository files).
pub async fn smoke(
    docker: &Docker,
    root: &Path,
    image: &str,
    platform: Option<Platform>,
    ca_bundle: Option<&Path>,
    run_id: &str,
    progress: &Progress,
) -> Result<SmokeReport> {
    let started = Instant::now();
    let manifest = Manifest::load(&root.join(MANIFEST_PATH))?;
    let package_json = std::fs::read(root.join(PACKAGE_JSON_PATH))
        .with_context(|| format!("cannot read {}", root.join(PACKAGE_JSON_PATH).display()))?;
    let versions = locked_versions(&package_json)?;
    let lockfile_sha = crate::util::sha256_file(&root.join(PACKAGE_LOCK_PATH))?;
    let inspect = engine::inspect_image(docker, image)
        .await?
        .with_context(|| {
            format!("image {image} is not in the engine; build it with `cargo xtask build`")
        })?;
    let image_platform: Option<Platform> = engine::image_platform(&inspect).parse().ok();
    let emulated = image_platform.is_some() && image_platform != Platform::host();
    let limits = Limits::for_emulation(emulated);
    progress.step(format!(
        "smoke-testing {image} ({}{})",
        engine::image_platform(&inspect),
        if emulated { ", emulated" } else { "" }
    ));

    let ctx = Ctx {
        docker: docker.clone(),
        image: image.to_string(),
        platform: image_platform,
        run_id: run_id.to_string(),
        limits,
    };

    let mut checks = config_checks(&inspect, platform, &manifest, &versions, &lockfile_sha);

    // The layer scan streams the whole image out of the engine: start it first, in parallel.
    let ca_check = {
        let ctx = ctx.clone();
        let ca_bundle = ca_bundle.map(Path::to_path_buf);
        let env = inspect
            .config
            .as_ref()
            .and_then(|c| c.env.clone())
            .unwrap_or_default();
        tokio::spawn(async move { timed(ca_bundle_absent(&ctx, env, ca_bundle)).await })
    };

    let mut container_checks: Vec<BoxFuture<'static, Check>> = Vec::new();
    for package in &manifest.packages {
        let ctx = ctx.clone();
        let name = crate::manifest::version_check_name(&package.name);
        let expected = versions
            .get(&package.name)
            .map(|v| package.expected_version_output(v));
        let command = package.version_command.clone();
        container_checks.push(
            timed(async move {
                match expected {
                    None => Check::new(
                        name,
                        false,
                        format!("{PACKAGE_JSON_PATH} does not pin this package"),
                    ),
                    Some(expected) => version_check(&ctx, name, &command, &expected).await,
                }
            })
            .boxed(),
        );
    }
    {
        let ctx = ctx.clone();
        let node = manifest.node.clone();
        container_checks.push(timed(async move { node_check(&ctx, &node).await }).boxed());
    }
    for harness in &manifest.harnesses {
        let ctx = ctx.clone();
        let harness = harness.clone();
        container_checks.push(timed(async move { harness_check(&ctx, &harness).await }).boxed());
    }
    for (name, script, user, expect) in browser_scripts(emulated) {
        let ctx = ctx.clone();
        container_checks.push(
            timed(async move { script_check(&ctx, name, &script, user, &expect).await }).boxed(),
        );
    }
    if image_platform == Some(Platform::LinuxAmd64) {
        let ctx = ctx.clone();
        container_checks.push(
            timed(async move {
                script_check(
                    &ctx,
                    OPENCODE_BASELINE_CHECK,
                    OPENCODE_BASELINE_SCRIPT,
                    None,
                    &["baseline build linked".into()],
                )
                .await
            })
            .boxed(),
        );
    }

    // Two or three containers at a time: the machines have two cores, and the harnesses each
    // start a large native binary.
    let parallel = if emulated { 2 } else { 3 };
    let mut stream = futures_util::stream::iter(container_checks).buffered(parallel);
    while let Some(check) = stream.next().await {
        progress.step(format!(
            "{} {} ({:.1}s)",
            if check.passed { "pass" } else { "FAIL" },
            check.name,
            check.duration_secs
        ));
        checks.push(check);
    }
    let ca = ca_check.await.context("the CA bundle check panicked")?;
    progress.step(format!(
        "{} {} ({:.1}s)",
        if ca.passed { "pass" } else { "FAIL" },
        ca.name,
        ca.duration_secs
    ));
    checks.push(ca);

    Ok(SmokeReport {
        image: image.to_string(),
        image_id: inspect.id.clone(),
        platform: engine::image_platform(&inspect),
        emulated,
        passed: !checks.is_empty() && checks.iter().all(|c| c.passed),
        checks,
        duration_secs: started.elapsed().as_secs_f64(),
    })
}

/// What every container check needs.
#[derive(Clone)]
struct Ctx {
    docker: Docker,
    image: String,
    platform: Option<Platform>,
    run_id: String,
    limits: Limits,
}

impl Ctx {
    fn spec(&self, cmd: &[&str]) -> ContainerSpec {
        let mut spec = ContainerSpec::new(&self.image, &self.run_id, cmd);
        spec.platform = self.platform;
        spec
    }
}

async fn timed(check: impl std::future::Future<Output = Check>) -> Check {
    let started = Instant::now();
    let mut check = check.await;
    check.duration_secs = (started.elapsed().as_secs_f64() * 10.0).round() / 10.0;
    check
}

fn env_map(env: &[String]) -> BTreeMap<&str, &str> {
    env.iter().filter_map(|kv| kv.split_once('=')).collect()
}

/// The checks on the image config alone: pure, no container.
pub fn config_checks(
    inspect: &ImageInspect,
    requested: Option<Platform>,
    manifest: &Manifest,
    versions: &BTreeMap<String, String>,
    lockfile_sha: &str,
) -> Vec<Check> {
    let mut checks = Vec::new();
    let found = engine::image_platform(inspect);
    checks.push(match requested {
        Some(platform) => Check::new(
            "platform",
            found == platform.to_string(),
            format!("image config says {found}; requested {platform}"),
        ),
        None => {
            let known = found
                .parse::<Platform>()
                .is_ok_and(|p| manifest.platforms.contains(&p));
            Check::new(
                "platform",
                known,
                format!(
                    "image config says {found}; the manifest builds {:?}",
                    manifest
                        .platforms
                        .iter()
                        .map(|p| p.to_string())
                        .collect::<Vec<_>>()
                ),
            )
        }
    });

    let config = inspect.config.clone().unwrap_or_default();
    let env_list = config.env.clone().unwrap_or_default();
    let env = env_map(&env_list);
    let workdir = config.working_dir.clone().unwrap_or_default();
    checks.push(Check::new(
        "home and working directory",
        env.get("HOME") == Some(&"/workspace") && workdir == "/workspace",
        format!(
            "HOME={} WorkingDir={}",
            env.get("HOME").unwrap_or(&"(unset)"),
            if workdir.is_empty() {
                "(unset)"
            } else {
                &workdir
            }
        ),
    ));

    let entrypoint = config.entrypoint.clone().unwrap_or_default();
    let cmd = config.cmd.clone().unwrap_or_default();
    checks.push(Check::new(
        "no entrypoint or cmd",
        entrypoint.is_empty() && cmd.is_empty(),
        format!("Entrypoint={entrypoint:?} Cmd={cmd:?}"),
    ));

    let mut wrong = Vec::new();
    for (name, value) in REQUIRED_ENV {
        match env.get(name) {
            Some(v) if v == value => {}
            Some(v) => wrong.push(format!("{name}={v} (want {value})")),
            None => wrong.push(format!("{name} unset (want {value})")),
        }
    }
    checks.push(Check::new(
        "no-update and no-telemetry variables",
        wrong.is_empty(),
        if wrong.is_empty() {
            REQUIRED_ENV
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        } else {
            wrong.join("; ")
        },
    ));

    let labels = config.labels.clone().unwrap_or_default();
    let mut problems = Vec::new();
    match labels.get(LOCKFILE_LABEL) {
        Some(v) if v == lockfile_sha => {}
        Some(v) => problems.push(format!(
            "{LOCKFILE_LABEL}={v}, but {PACKAGE_LOCK_PATH} has sha256 {lockfile_sha}: the image was built from another lock"
        )),
        None => problems.push(format!("{LOCKFILE_LABEL} missing")),
    }
    let packages_label = labels
        .get("org.sandbox0.coding-agent.packages")
        .cloned()
        .unwrap_or_default();
    for package in &manifest.packages {
        if let Some(version) = versions.get(&package.name) {
            let pin = format!("{}@{version}", package.name);
            if !packages_label.split(' ').any(|p| p == pin) {
                problems.push(format!(
                    "label org.sandbox0.coding-agent.packages lacks {pin}"
                ));
            }
        }
    }
    checks.push(Check::new(
        "provenance labels",
        problems.is_empty(),
        if problems.is_empty() {
            format!("{LOCKFILE_LABEL}={lockfile_sha}; packages: {packages_label}")
        } else {
            problems.join("; ")
        },
    ));
    checks
}

async fn version_check(ctx: &Ctx, name: String, command: &[String], expected: &str) -> Check {
    let argv: Vec<&str> = command.iter().map(String::as_str).collect();
    match engine::run(&ctx.docker, &ctx.spec(&argv), None, ctx.limits.command).await {
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

/// Node's version against the manifest: on the major line and at least the minimum.
pub fn node_version_verdict(printed: &str, node: &crate::manifest::NodeSpec) -> (bool, String) {
    let text = printed.trim().trim_start_matches('v');
    match semver::Version::parse(text) {
        Err(_) => (
            false,
            format!(
                "`node --version` printed `{}`, not a version",
                printed.trim()
            ),
        ),
        Ok(version) => {
            let ok = version.major == node.major && version >= node.minimum;
            (
                ok,
                format!(
                    "Node {version}; the template needs {}.x and at least {}{}",
                    node.major,
                    node.minimum,
                    if version.to_string() == node.version.to_string() {
                        String::new()
                    } else {
                        format!(" (the manifest pins {})", node.version)
                    }
                ),
            )
        }
    }
}

async fn node_check(ctx: &Ctx, node: &crate::manifest::NodeSpec) -> Check {
    let name = NODE_CHECK;
    match engine::run(
        &ctx.docker,
        &ctx.spec(&["node", "--version"]),
        None,
        ctx.limits.command,
    )
    .await
    {
        Err(err) => Check::new(name, false, format!("{err:#}")),
        Ok(out) if !out.success() => Check::new(name, false, out.combined()),
        Ok(out) => {
            let (mut passed, text) = node_version_verdict(&out.stdout, node);
            passed &= out.stdout.trim().trim_start_matches('v') == node.version.to_string();
            Check::new(name, passed, text)
        }
    }
}

/// Splits a byte stream into LF-terminated lines (chunk boundaries are not record boundaries).
#[derive(Debug, Default)]
pub struct LineSplitter {
    pending: Vec<u8>,
}

impl LineSplitter {
    pub fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        self.pending.extend_from_slice(bytes);
        let mut lines = Vec::new();
        while let Some(pos) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=pos).collect();
            let line = String::from_utf8_lossy(&line[..line.len() - 1]);
            lines.push(line.trim_end_matches('\r').to_string());
        }
        lines
    }
}

/// Whether one stdout record satisfies every `expect` pointer: equal values, or for the
/// string `"present"`, a pointer that resolves.
pub fn record_matches(record: &Value, expect: &BTreeMap<String, Value>) -> bool {
    expect
        .iter()
        .all(|(pointer, want)| match record.pointer(pointer) {
            None => false,
            Some(_) if want == "present" => true,
            Some(got) => got == want,
        })
}

async fn harness_check(ctx: &Ctx, harness: &Harness) -> Check {
    let name = crate::manifest::harness_check_name(&harness.name);
    let started = Instant::now();
    let mut spec = ctx.spec(
        &harness
            .command
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
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
        let mut stdout = LineSplitter::default();
        let mut seen: Vec<String> = Vec::new();
        let mut stderr = String::new();
        let deadline = tokio::time::sleep(ctx.limits.harness);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                item = output.next() => match item {
                    Some(Ok(LogOutput::StdOut { message })) | Some(Ok(LogOutput::Console { message })) => {
                        for line in stdout.push(&message) {
                            let matched = serde_json::from_str::<Value>(&line)
                                .map(|record| record_matches(&record, &harness.expect))
                                .unwrap_or(false);
                            if matched {
                                return anyhow::Ok((true, format!(
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
                        return Ok((false, format!(
                            "exited before answering (expected a record with {})\nstdout:\n{}\nstderr:\n{}",
                            serde_json::to_string(&harness.expect).unwrap_or_default(),
                            clip(&seen.join("\n"), 1500),
                            clip(&stderr, 1500)
                        )));
                    }
                },
                _ = &mut deadline => {
                    return Ok((false, format!(
                        "no record with {} within {} s\nstdout:\n{}\nstderr:\n{}",
                        serde_json::to_string(&harness.expect).unwrap_or_default(),
                        ctx.limits.harness.as_secs(),
                        clip(&seen.join("\n"), 1500),
                        clip(&stderr, 1500)
                    )));
                }
            }
        }
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

/// A random token, so a page or message read back cannot be a stale result.
fn token() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    sha256_hex(format!("{nanos}-{}", std::process::id()).as_bytes())[..16].to_string()
}

/// Name of the browser check where the platform runs natively.
pub const NODE_CHECK: &str = "node runtime";
/// The scan of every layer for the build CA (template/manifest.yaml requires it by this name).
pub const CA_CHECK: &str = "no CA bundle left in the image";
/// Only on linux/amd64: the OpenCode launcher is the baseline (non-AVX2) build.
pub const OPENCODE_BASELINE_CHECK: &str = "opencode x64 baseline build";
pub const PLAYWRIGHT_CHECK: &str = "playwright-cli drives chromium";
/// Name of the browser check that replaces it under emulation (see [`browser_scripts`]).
pub const EMULATED_CHROMIUM_CHECK: &str = "chromium starts (emulated)";

/// (name, bash script, user, strings stdout must contain).
///
/// Under qemu-user emulation Chromium's renderer and GPU processes die (SIGTRAP in V8, no
/// ptrace), whatever the flags: driving a page there would test qemu, not the image. So an
/// emulated run checks that Chromium and playwright-cli start and says so under its own check
/// name; the page is driven wherever the platform is native (the release builds arm64 on
/// arm64 runners).
fn browser_scripts(
    emulated: bool,
) -> Vec<(&'static str, String, Option<&'static str>, Vec<String>)> {
    let page_token = token();
    let ws_token = token();
    let browser = if emulated {
        (
            EMULATED_CHROMIUM_CHECK,
            EMULATED_CHROMIUM_SCRIPT.to_string(),
            None,
            vec!["Chromium ".to_string()],
        )
    } else {
        (
            PLAYWRIGHT_CHECK,
            PLAYWRIGHT_SCRIPT.replace("@TOKEN@", &page_token),
            None,
            vec![format!("heading \"coding-agent smoke {page_token}\"")],
        )
    };
    vec![
        browser,
        (
            "xtigervnc and openbox start",
            DESKTOP_SCRIPT.to_string(),
            Some(BROWSER_USER),
            vec!["RFB 003.".to_string(), "openbox running".to_string()],
        ),
        (
            "ws loads and echoes",
            WS_SCRIPT.replace("@TOKEN@", &ws_token),
            None,
            vec![format!("echo: ping-{ws_token}")],
        ),
        (
            "sandbox-browser user",
            USER_SCRIPT.to_string(),
            None,
            vec!["home /home/sandbox-browser owned by sandbox-browser".to_string()],
        ),
    ]
}

/// A page served by node inside the container, opened and read back through playwright-cli.
const PLAYWRIGHT_SCRIPT: &str = r#"set -eu
cd "$(mktemp -d)"
node -e '
const http = require("http");
const server = http.createServer((req, res) => {
  res.setHeader("content-type", "text/html");
  res.end("<!doctype html><title>smoke</title><h1>coding-agent smoke @TOKEN@</h1>");
});
server.listen(0, "127.0.0.1", () => console.log(server.address().port));
' > port &
for i in $(seq 1 100); do [ -s port ] && break; sleep 0.2; done
url="http://127.0.0.1:$(cat port)/"
export PLAYWRIGHT_MCP_HEADLESS=true
playwright-cli open "$url"
playwright-cli snapshot
playwright-cli close
"#;

const EMULATED_CHROMIUM_SCRIPT: &str = r#"set -eu
chromium --version
playwright-cli --version
echo "emulated platform: page driving is left to a native run (qemu-user cannot run Chromium's renderer)"
"#;

/// The on-demand desktop as the browser user: Xtigervnc must answer with the RFB banner and
/// openbox must still run against it.
const DESKTOP_SCRIPT: &str = r#"set -u
export HOME=/home/sandbox-browser
Xtigervnc :1 -SecurityTypes None -localhost -rfbport 5901 -geometry 1280x800 -depth 24 >/tmp/xvnc.log 2>&1 &
xvnc=$!
for i in $(seq 1 150); do [ -S /tmp/.X11-unix/X1 ] && break; sleep 0.2; done
if [ ! -S /tmp/.X11-unix/X1 ]; then echo "Xtigervnc made no display socket"; cat /tmp/xvnc.log; exit 1; fi
DISPLAY=:1 openbox --sm-disable >/tmp/openbox.log 2>&1 &
openbox=$!
sleep 3
kill -0 "$xvnc" 2>/dev/null || { echo "Xtigervnc exited"; cat /tmp/xvnc.log; exit 1; }
kill -0 "$openbox" 2>/dev/null || { echo "openbox exited"; cat /tmp/openbox.log; exit 1; }
exec 3<>/dev/tcp/127.0.0.1/5901
head -c 12 <&3
echo
echo "Xtigervnc pid $xvnc serving; openbox running as pid $openbox, user $(id -un)"
"#;

/// A real WebSocket round trip through the template's `ws`.
const WS_SCRIPT: &str = r#"set -eu
node -e '
const WebSocket = require("/opt/coding-agents/node_modules/ws");
const server = new WebSocket.WebSocketServer({ host: "127.0.0.1", port: 0 }, () => {
  const client = new WebSocket(`ws://127.0.0.1:${server.address().port}/`);
  client.on("open", () => client.send("ping-@TOKEN@"));
  client.on("message", (data) => { console.log("echo: " + data); process.exit(0); });
});
server.on("connection", (socket) => socket.on("message", (data) => socket.send(String(data))));
setTimeout(() => { console.error("no echo within 30 s"); process.exit(1); }, 30000);
'
"#;

const USER_SCRIPT: &str = r#"set -eu
id sandbox-browser
uid="$(id -u sandbox-browser)"
[ "$uid" != 0 ] || { echo "sandbox-browser is root"; exit 1; }
home="$(getent passwd sandbox-browser | cut -d: -f6)"
owner="$(stat -c %U "$home")"
echo "home $home owned by $owner"
"#;

/// The Dockerfile's OpenCode decision, verified: the linked binary is the baseline build and
/// the AVX2 package is gone.
const OPENCODE_BASELINE_SCRIPT: &str = r#"set -eu
cd /opt/coding-agents/node_modules
[ opencode-ai/bin/opencode.exe -ef opencode-linux-x64-baseline/bin/opencode ] || { echo "opencode.exe is not the baseline build"; exit 1; }
[ ! -e opencode-linux-x64 ] || { echo "opencode-linux-x64 (AVX2) is still installed"; exit 1; }
echo "baseline build linked; opencode-linux-x64 absent"
"#;

async fn script_check(
    ctx: &Ctx,
    name: &str,
    script: &str,
    user: Option<&str>,
    expect: &[String],
) -> Check {
    let mut spec = ctx.spec(&["bash", "-c", script]);
    spec.user = user.map(str::to_string);
    let limit = ctx.limits.browser;
    match engine::run(&ctx.docker, &spec, None, limit).await {
        Err(err) => Check::new(name, false, format!("{err:#}")),
        Ok(out) => {
            let missing: Vec<&String> = expect
                .iter()
                .filter(|e| !out.stdout.contains(e.as_str()))
                .collect();
            let passed = out.success() && missing.is_empty();
            let mut text = clip(&out.combined(), 2500);
            if !missing.is_empty() {
                text.push_str(&format!("\nmissing from stdout: {missing:?}"));
            }
            Check::new(name, passed, text)
        }
    }
}

/// Truncates long evidence in the middle, keeping its start and end.
pub fn clip(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.chars().count() <= max {
        return text.to_string();
    }
    let head: String = text.chars().take(max / 2).collect();
    let tail: String = text
        .chars()
        .rev()
        .take(max / 2)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    format!("{head}\n[...]\n{tail}")
}

// ---- The CA bundle must not be in the image --------------------------------------------------

/// The DER bytes of every certificate in a PEM text.
pub fn pem_certificates(text: &str) -> Vec<Vec<u8>> {
    let mut certs = Vec::new();
    let mut body: Option<String> = None;
    for line in text.lines() {
        let line = line.trim();
        if line == "-----BEGIN CERTIFICATE-----" {
            body = Some(String::new());
        } else if line == "-----END CERTIFICATE-----" {
            if let Some(b64) = body.take() {
                if let Ok(der) = base64::engine::general_purpose::STANDARD.decode(b64) {
                    certs.push(der);
                }
            }
        } else if let Some(b64) = body.as_mut() {
            b64.push_str(line);
        }
    }
    certs
}

/// Byte strings that betray a certificate in a file: a run of its base64 text (inside the
/// first 64-character PEM line, so line wrapping cannot split it) and a run of its DER bytes.
pub fn certificate_needles(der: &[u8]) -> Vec<Vec<u8>> {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut needles = Vec::new();
    if b64.len() >= 60 {
        needles.push(b64.as_bytes()[16..60].to_vec());
    }
    if der.len() >= 160 {
        needles.push(der[96..160].to_vec());
    }
    needles
}

/// Finds needles in a stream of chunks, including across chunk boundaries.
pub struct NeedleScanner {
    needles: Vec<(usize, Vec<u8>)>,
    carry: Vec<u8>,
    keep: usize,
}

impl NeedleScanner {
    /// `needles` are (owner index, bytes); an empty needle is ignored.
    pub fn new(needles: Vec<(usize, Vec<u8>)>) -> NeedleScanner {
        let needles: Vec<_> = needles.into_iter().filter(|(_, n)| !n.is_empty()).collect();
        let keep = needles.iter().map(|(_, n)| n.len()).max().unwrap_or(1) - 1;
        NeedleScanner {
            needles,
            carry: Vec::new(),
            keep,
        }
    }

    /// Starts a new file: matches never span two files.
    pub fn reset(&mut self) {
        self.carry.clear();
    }

    /// Owners whose needle occurs in the data seen since the last reset, up to this chunk.
    pub fn feed(&mut self, chunk: &[u8]) -> BTreeSet<usize> {
        let mut window = std::mem::take(&mut self.carry);
        window.extend_from_slice(chunk);
        let found = self
            .needles
            .iter()
            .filter(|(_, needle)| memchr::memmem::find(&window, needle).is_some())
            .map(|(owner, _)| *owner)
            .collect();
        let start = window.len().saturating_sub(self.keep);
        self.carry = window[start..].to_vec();
        found
    }
}

/// Where a certificate (or a CA file by name) was found in the exported image.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub owner: Option<usize>,
    pub location: String,
}

/// Whether a path inside a layer is one of the build's CA files (see the Dockerfile).
fn is_build_ca_path(path: &str) -> bool {
    path.ends_with("extra-ca.pem") || path.contains("build-ca/")
}

/// Scans an image archive as `docker save` writes it (docker-archive, or OCI layout with
/// gzip-compressed or plain layer blobs), every file of every layer. Returns the findings and
/// (layers, files, bytes) scanned.
pub fn scan_image_archive(
    archive: impl Read,
    scanner: &mut NeedleScanner,
) -> Result<(Vec<Finding>, (usize, usize, u64))> {
    let mut findings = Vec::new();
    let mut stats = (0usize, 0usize, 0u64);
    let mut outer = tar::Archive::new(archive);
    for entry in outer.entries().context("reading the exported image")? {
        let mut entry = entry.context("reading the exported image")?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let outer_path = entry.path()?.to_string_lossy().into_owned();
        let mut head = vec![0u8; 512];
        let mut filled = 0;
        while filled < head.len() {
            let n = entry.read(&mut head[filled..])?;
            if n == 0 {
                break;
            }
            filled += n;
        }
        head.truncate(filled);
        let gzip = head.starts_with(&[0x1f, 0x8b]);
        let is_tar = head.len() >= 262 && &head[257..262] == b"ustar";
        let reader = std::io::Cursor::new(head).chain(entry);
        if gzip || is_tar {
            stats.0 += 1;
            let reader: Box<dyn Read> = if gzip {
                Box::new(flate2::read::GzDecoder::new(reader))
            } else {
                Box::new(reader)
            };
            let mut layer = tar::Archive::new(reader);
            for file in layer
                .entries()
                .with_context(|| format!("reading layer {outer_path}"))?
            {
                let mut file = file.with_context(|| format!("reading layer {outer_path}"))?;
                let path = file.path()?.to_string_lossy().into_owned();
                if is_build_ca_path(&path) {
                    findings.push(Finding {
                        owner: None,
                        location: format!("{outer_path}: {path}"),
                    });
                }
                if !file.header().entry_type().is_file() {
                    continue;
                }
                stats.1 += 1;
                stats.2 += scan_file(
                    &mut file,
                    scanner,
                    &format!("{outer_path}: {path}"),
                    &mut findings,
                )?;
            }
        } else {
            // Configs and manifests: the Env lives here.
            stats.2 += scan_file(&mut { reader }, scanner, &outer_path, &mut findings)?;
        }
    }
    Ok((findings, stats))
}

fn scan_file(
    reader: &mut impl Read,
    scanner: &mut NeedleScanner,
    location: &str,
    findings: &mut Vec<Finding>,
) -> Result<u64> {
    scanner.reset();
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0u64;
    let mut found = BTreeSet::new();
    loop {
        let n = reader
            .read(&mut buf)
            .with_context(|| format!("reading {location}"))?;
        if n == 0 {
            break;
        }
        total += n as u64;
        found.extend(scanner.feed(&buf[..n]));
    }
    for owner in found {
        findings.push(Finding {
            owner: Some(owner),
            location: location.to_string(),
        });
    }
    Ok(total)
}

/// Where Debian (and Ubuntu) keep the certificates of the ca-certificates package.
const DISTRIBUTION_CA_DIR: &str = "/usr/share/ca-certificates";

/// The certificates below `dir` on this host, recursively; none when it does not exist.
fn host_distribution_certificates(dir: &Path) -> Vec<Vec<u8>> {
    let mut certs = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if let Ok(text) = std::fs::read_to_string(&path) {
                certs.extend(pem_certificates(&text));
            }
        }
    }
    certs
}

/// The certificates of a bundle that are not in `shipped`, each once, in bundle order.
pub fn extra_certificates(bundle: Vec<Vec<u8>>, shipped: &BTreeSet<Vec<u8>>) -> Vec<Vec<u8>> {
    let mut seen = BTreeSet::new();
    bundle
        .into_iter()
        .filter(|c| !shipped.contains(c) && seen.insert(c.clone()))
        .collect()
}

fn fingerprint(der: &[u8]) -> String {
    sha256_hex(der)[..16].to_string()
}

async fn ca_bundle_absent(ctx: &Ctx, env: Vec<String>, bundle: Option<PathBuf>) -> Check {
    let name = CA_CHECK;
    match ca_bundle_absent_inner(ctx, env, bundle).await {
        Ok((passed, text)) => Check::new(name, passed, text),
        Err(err) => Check::new(name, false, format!("{err:#}")),
    }
}

async fn ca_bundle_absent_inner(
    ctx: &Ctx,
    env: Vec<String>,
    bundle: Option<PathBuf>,
) -> Result<(bool, String)> {
    let mut problems = Vec::new();
    let env = env_map(&env);
    for name in FORBIDDEN_CA_ENV {
        if let Some(value) = env.get(name) {
            problems.push(format!("the image sets {name}={value}"));
        }
    }

    // The certificates of the bundle that neither the image's nor the host's distribution
    // ships are the ones a proxy (or a company) added; those must appear nowhere in the image.
    // Public roots are no evidence: NSS, Chromium and Bun binaries embed them anyway, including
    // roots that newer ca-certificates releases dropped.
    let mut extra: Vec<Vec<u8>> = Vec::new();
    let mut bundle_note = String::from("no CA bundle on this host");
    if let Some(path) = &bundle {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the CA bundle {}", path.display()))?;
        let certs = pem_certificates(&text);
        let mut shipped: BTreeSet<Vec<u8>> =
            engine::read_image_files(&ctx.docker, &ctx.image, &ctx.run_id, DISTRIBUTION_CA_DIR)
                .await?
                .iter()
                .flat_map(|(_, content)| pem_certificates(&String::from_utf8_lossy(content)))
                .collect();
        shipped.extend(host_distribution_certificates(Path::new(
            DISTRIBUTION_CA_DIR,
        )));
        extra = extra_certificates(certs, &shipped);
        bundle_note = format!(
            "{}: {} certificate(s) that no distribution ships ({})",
            path.display(),
            extra.len(),
            extra
                .iter()
                .map(|c| format!("sha256:{}", fingerprint(c)))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }

    let needles: Vec<(usize, Vec<u8>)> = extra
        .iter()
        .enumerate()
        .flat_map(|(i, der)| certificate_needles(der).into_iter().map(move |n| (i, n)))
        .collect();
    let export = ctx.docker.export_image(&ctx.image);
    let reader = engine::blocking_reader(export);
    let (findings, (layers, files, bytes)) = tokio::task::spawn_blocking(move || {
        let mut scanner = NeedleScanner::new(needles);
        scan_image_archive(reader, &mut scanner)
    })
    .await
    .context("the layer scan panicked")?
    .with_context(|| format!("cannot scan the layers of {}", ctx.image))?;
    if layers == 0 {
        problems.push("the exported image held no layer to scan".to_string());
    }
    for finding in &findings {
        match finding.owner {
            Some(i) => problems.push(format!(
                "certificate sha256:{} found in {}",
                fingerprint(&extra[i]),
                finding.location
            )),
            None => problems.push(format!("build CA file in {}", finding.location)),
        }
    }
    let summary = format!(
        "{bundle_note}; scanned {layers} layer(s), {files} files, {:.0} MB",
        bytes as f64 / 1e6
    );
    if problems.is_empty() {
        Ok((true, format!("{summary}: none found, no CA variables set")))
    } else {
        Ok((
            false,
            format!("{summary}:\n{}", clip(&problems.join("\n"), 3000)),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_split_across_chunks() {
        let mut s = LineSplitter::default();
        assert!(s.push(b"{\"a\":").is_empty());
        assert_eq!(s.push(b"1}\n{\"b\""), vec!["{\"a\":1}"]);
        assert_eq!(s.push(b":2}\r\n\n"), vec!["{\"b\":2}", ""]);
    }

    #[test]
    fn records_match_values_and_presence() {
        let expect: BTreeMap<String, Value> =
            serde_json::from_str(r#"{"/id": 1, "/result/userAgent": "present", "/ok": true}"#)
                .unwrap();
        let good = serde_json::json!({"id": 1, "ok": true, "result": {"userAgent": "x"}});
        assert!(record_matches(&good, &expect));
        let wrong_id = serde_json::json!({"id": "1", "ok": true, "result": {"userAgent": "x"}});
        assert!(!record_matches(&wrong_id, &expect));
        let missing = serde_json::json!({"id": 1, "ok": true, "result": {}});
        assert!(!record_matches(&missing, &expect));
        let null_present = serde_json::json!({"id": 1, "ok": true, "result": {"userAgent": null}});
        assert!(record_matches(&null_present, &expect));
    }

    #[test]
    fn committed_harness_expectations_match_what_the_harnesses_answered() {
        // Records as environment.md reports them (abridged); a wrong pointer in the manifest
        // would fail here before it fails a 10-minute image test.
        let manifest = Manifest::load(&repo_root().join(MANIFEST_PATH)).unwrap();
        let answers = [
            (
                "codex",
                r#"{"id":1,"result":{"userAgent":"codex/0.171.0","codexHome":"/workspace/.codex"}}"#,
            ),
            (
                "claude-code",
                r#"{"type":"system","subtype":"init","session_id":"abc","tools":[]}"#,
            ),
            (
                "opencode",
                r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{}}}"#,
            ),
            (
                "pi",
                r#"{"id":"1","type":"response","command":"get_state","success":true,"data":{}}"#,
            ),
        ];
        for (name, answer) in answers {
            let harness = manifest.harnesses.iter().find(|h| h.name == name).unwrap();
            let record: Value = serde_json::from_str(answer).unwrap();
            assert!(record_matches(&record, &harness.expect), "{name}");
            // The replayed handshake itself must not count as an answer.
            for line in &harness.handshake {
                let sent: Value = serde_json::from_str(line).unwrap();
                assert!(
                    !record_matches(&sent, &harness.expect),
                    "{name}: handshake matches itself"
                );
            }
        }
    }

    #[test]
    fn node_versions_are_judged_against_the_manifest() {
        let manifest = Manifest::load(&repo_root().join(MANIFEST_PATH)).unwrap();
        let node = &manifest.node;
        assert!(node_version_verdict(&format!("v{}\n", node.version), node).0);
        assert!(!node_version_verdict("v22.18.0", node).0);
        assert!(!node_version_verdict("v24.1.0", node).0);
        assert!(!node_version_verdict("command not found", node).0);
    }

    const CERT: &str = "-----BEGIN CERTIFICATE-----
MIIBszCCAVmgAwIBAgIUWl3b1t0nXyrVlXw0V5yq1A3yqkEwCgYIKoZIzj0EAwIw
LzEtMCsGA1UEAwwkY29kaW5nLWFnZW50IHNtb2tlIHRlc3QgZXh0cmEgcm9vdCBD
QTAeFw0yNjAxMDEwMDAwMDBaFw0zNjAxMDEwMDAwMDBaMC8xLTArBgNVBAMMJGNv
ZGluZy1hZ2VudCBzbW9rZSB0ZXN0IGV4dHJhIHJvb3QgQ0EwWTATBgcqhkjOPQIB
BggqhkjOPQMBBwNCAAQx5uGZkVhpL3mVRw7Gx1ZV3J9qYt2Kp4v8k8cX2cZf1n9a
Zs3bNQm4Vw8lGg2c6q2q7pGz0sCq0x8Hq8s3wC8Wo1MwUTAdBgNVHQ4EFgQUq6fK
sJ3mL2d2a9e2vG7y6c1lZ0UwHwYDVR0jBBgwFoAUq6fKsJ3mL2d2a9e2vG7y6c1l
Z0UwDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNIADBFAiEAu0h3l8tq9lGJ
-----END CERTIFICATE-----
";

    #[test]
    fn pem_bundles_yield_der_and_needles_that_survive_rewrapping() {
        let certs = pem_certificates(&format!("junk\n{CERT}{CERT}"));
        assert_eq!(certs.len(), 2);
        let needles = certificate_needles(&certs[0]);
        assert_eq!(needles.len(), 2);
        // A copy of the PEM file is found, and so is the raw DER.
        let mut scanner = NeedleScanner::new(needles.into_iter().map(|n| (0, n)).collect());
        assert_eq!(scanner.feed(CERT.as_bytes()), BTreeSet::from([0]));
        scanner.reset();
        assert_eq!(scanner.feed(&certs[0]), BTreeSet::from([0]));
        scanner.reset();
        assert!(scanner.feed(b"nothing to see here").is_empty());
    }

    #[test]
    fn only_certificates_no_distribution_ships_are_extra() {
        let shipped = BTreeSet::from([b"public root".to_vec()]);
        let bundle = vec![
            b"public root".to_vec(),
            b"proxy ca".to_vec(),
            b"proxy ca".to_vec(),
            b"company ca".to_vec(),
        ];
        assert_eq!(
            extra_certificates(bundle, &shipped),
            vec![b"proxy ca".to_vec(), b"company ca".to_vec()]
        );
    }

    #[test]
    fn needles_are_found_across_chunk_boundaries_but_not_across_files() {
        let mut scanner = NeedleScanner::new(vec![(7, b"needle-in-the-stream".to_vec())]);
        assert!(scanner.feed(b"....needle-in-").is_empty());
        assert_eq!(scanner.feed(b"the-stream...."), BTreeSet::from([7]));
        scanner.reset();
        assert!(scanner.feed(b"needle-in-").is_empty());
        scanner.reset();
        assert!(scanner.feed(b"the-stream").is_empty());
    }

    fn layer(files: &[(&str, &[u8])]) -> Vec<u8> {
        crate::image::build::context_tar(files).unwrap()
    }

    #[test]
    fn image_archives_are_scanned_layer_by_layer_plain_and_gzip() {
        let clean = layer(&[("usr/bin/tool", b"binary"), ("etc/motd", b"hello")]);
        let leaky = layer(&[("opt/x/cert.pem", CERT.as_bytes())]);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &layer(&[("tmp/build-ca/extra-ca.pem", b"-")])).unwrap();
        let gz = gz.finish().unwrap();
        let archive = layer(&[
            ("manifest.json", b"[]"),
            ("aaa/layer.tar", &clean),
            ("bbb/layer.tar", &leaky),
            ("blobs/sha256/ccc", &gz),
        ]);
        let der = pem_certificates(CERT).remove(0);
        let mut scanner = NeedleScanner::new(
            certificate_needles(&der)
                .into_iter()
                .map(|n| (0, n))
                .collect(),
        );
        let (findings, (layers, files, _)) =
            scan_image_archive(archive.as_slice(), &mut scanner).unwrap();
        assert_eq!(layers, 3);
        assert_eq!(files, 4);
        assert_eq!(
            findings,
            vec![
                Finding {
                    owner: Some(0),
                    location: "bbb/layer.tar: opt/x/cert.pem".into()
                },
                Finding {
                    owner: None,
                    location: "blobs/sha256/ccc: tmp/build-ca/extra-ca.pem".into()
                },
            ]
        );
        let (findings, _) =
            scan_image_archive(layer(&[("aaa/layer.tar", &clean)]).as_slice(), &mut scanner)
                .unwrap();
        assert!(findings.is_empty());
    }

    fn inspect(env: &[&str], cmd: Option<Vec<&str>>, arch: &str) -> ImageInspect {
        let manifest = Manifest::load(&repo_root().join(MANIFEST_PATH)).unwrap();
        let versions =
            locked_versions(&std::fs::read(repo_root().join(PACKAGE_JSON_PATH)).unwrap()).unwrap();
        let pins: Vec<String> = manifest
            .packages
            .iter()
            .map(|p| format!("{}@{}", p.name, versions[&p.name]))
            .collect();
        ImageInspect {
            os: Some("linux".into()),
            architecture: Some(arch.into()),
            config: Some(bollard::models::ImageConfig {
                env: Some(env.iter().map(|s| s.to_string()).collect()),
                cmd: cmd.map(|c| c.iter().map(|s| s.to_string()).collect()),
                working_dir: Some("/workspace".into()),
                labels: Some(std::collections::HashMap::from([
                    (LOCKFILE_LABEL.to_string(), "abc".to_string()),
                    (
                        "org.sandbox0.coding-agent.packages".to_string(),
                        pins.join(" "),
                    ),
                ])),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn config_checks_catch_each_mistake() {
        let manifest = Manifest::load(&repo_root().join(MANIFEST_PATH)).unwrap();
        let versions =
            locked_versions(&std::fs::read(repo_root().join(PACKAGE_JSON_PATH)).unwrap()).unwrap();
        let good_env: Vec<String> = REQUIRED_ENV
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let good_env: Vec<&str> = good_env.iter().map(String::as_str).collect();
        let verdicts =
            |i: &ImageInspect, p: Option<Platform>, sha: &str| -> BTreeMap<String, bool> {
                config_checks(i, p, &manifest, &versions, sha)
                    .into_iter()
                    .map(|c| (c.name, c.passed))
                    .collect()
            };
        let all_pass = verdicts(
            &inspect(&good_env, None, "amd64"),
            Some(Platform::LinuxAmd64),
            "abc",
        );
        assert!(all_pass.values().all(|p| *p), "{all_pass:?}");

        let v = verdicts(
            &inspect(&good_env, None, "amd64"),
            Some(Platform::LinuxArm64),
            "abc",
        );
        assert!(!v["platform"]);
        let v = verdicts(
            &inspect(&good_env, Some(vec!["bash"]), "arm64"),
            None,
            "abc",
        );
        assert!(v["platform"]);
        assert!(!v["no entrypoint or cmd"]);
        let v = verdicts(&inspect(&good_env[1..], None, "amd64"), None, "abc");
        assert!(!v["home and working directory"]);
        assert!(!v["no-update and no-telemetry variables"]);
        let v = verdicts(&inspect(&good_env, None, "amd64"), None, "other-lock");
        assert!(!v["provenance labels"]);
    }

    /// The manifest's required smoke checks (what receipts are judged by) are exactly the
    /// checks this module runs, for each platform built natively and under emulation.
    #[test]
    fn the_manifest_requires_exactly_the_checks_smoke_runs() {
        let manifest = Manifest::load(&repo_root().join(MANIFEST_PATH)).unwrap();
        let versions =
            locked_versions(&std::fs::read(repo_root().join(PACKAGE_JSON_PATH)).unwrap()).unwrap();
        for platform in Platform::ALL {
            for emulated in [false, true] {
                let mut run: BTreeSet<String> = config_checks(
                    &inspect(&[], None, platform.arch()),
                    Some(platform),
                    &manifest,
                    &versions,
                    "abc",
                )
                .into_iter()
                .map(|c| c.name)
                .collect();
                run.extend(
                    browser_scripts(emulated)
                        .into_iter()
                        .map(|(name, ..)| name.to_string()),
                );
                run.extend(
                    manifest
                        .packages
                        .iter()
                        .map(|p| crate::manifest::version_check_name(&p.name)),
                );
                run.extend(
                    manifest
                        .harnesses
                        .iter()
                        .map(|h| crate::manifest::harness_check_name(&h.name)),
                );
                run.extend([NODE_CHECK.to_string(), CA_CHECK.to_string()]);
                if platform == Platform::LinuxAmd64 {
                    run.insert(OPENCODE_BASELINE_CHECK.to_string());
                }
                assert_eq!(
                    run,
                    manifest.required_smoke_checks(platform, emulated),
                    "{platform}, emulated: {emulated}"
                );
            }
        }
    }

    #[test]
    fn clip_keeps_both_ends() {
        let long = "a".repeat(50) + &"b".repeat(50);
        let c = clip(&long, 20);
        assert!(
            c.starts_with("aaaaaaaaaa") && c.ends_with("bbbbbbbbbb"),
            "{c}"
        );
        assert_eq!(clip("short", 20), "short");
    }
}
