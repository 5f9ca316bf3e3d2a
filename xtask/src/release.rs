//! `cargo xtask release`: the maintainer's whole run on one machine.
//!
//! A release is a plan of the toolchain's own subcommands, each run as a child process of this
//! binary with `--json` and its output saved in the run directory, exactly as the GitHub
//! workflow chains them across jobs. The plan is pure data (`plan_prepare`, `plan_ship`), so
//! `--dry-run` prints precisely what a real run would do; `execute` is the only part with IO.
//!
//! Phases: gate -> resolve + lock -> "anything changed since the previous receipt?" -> per
//! platform base, build, smoke -> publish (platform images by digest, then the index under a
//! unique tag) -> receipt write + verify -> summary. Every step is safe to repeat: builds are
//! content-addressed and skipped when present, publishing identical content is a no-op, files
//! are replaced atomically, and smoke removes its containers. So an interrupted run is resumed
//! by running it again.

use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};

use anyhow::{bail, Context, Result};
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::flags::ReleaseArgs;
use crate::manifest::{repo_root, Manifest, Platform, MANIFEST_PATH};
use crate::receipt::Receipt;
use crate::util::{now_or, print_json, sha256_file, Progress};

/// One subcommand of the plan.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Step {
    pub name: String,
    /// Arguments after `cargo xtask`.
    pub args: Vec<String>,
    /// Where its stdout (JSON) is kept, relative to the run directory.
    pub output: Option<String>,
}

impl Step {
    fn new(name: impl Into<String>, args: &[&str], output: Option<&str>) -> Step {
        Step {
            name: name.into(),
            args: args.iter().map(|s| s.to_string()).collect(),
            output: output.map(str::to_owned),
        }
    }

    fn args_push(mut self, value: impl Into<String>) -> Step {
        self.args.push(value.into());
        self
    }

    fn arg(mut self, flag: &str, value: impl Into<String>) -> Step {
        self.args.push(flag.to_owned());
        self.args.push(value.into());
        self
    }
}

/// What the plan depends on.
#[derive(Debug, Clone, Serialize)]
pub struct PlanInputs {
    pub now: String,
    pub force: bool,
    pub npm_registry: String,
    pub previous_receipt: Option<PathBuf>,
    pub platforms: Vec<Platform>,
    pub oci_registry: String,
    pub repository: String,
    pub ca_bundle: Option<PathBuf>,
    pub receipts_dir: PathBuf,
}

/// Gate, resolve and lock: the steps that decide whether there is anything to ship.
pub fn plan_prepare(inputs: &PlanInputs) -> Vec<Step> {
    let mut gate =
        Step::new("gate", &["gate", "--json"], Some("gate.json")).arg("--now", &inputs.now);
    if inputs.force {
        gate.args.push("--force".into());
    }
    if let Some(previous) = &inputs.previous_receipt {
        gate = gate.arg("--previous-receipt", previous.display().to_string());
    }
    vec![
        gate,
        Step::new("resolve", &["resolve", "--json"], Some("resolve.json"))
            .arg("--registry", &inputs.npm_registry)
            .arg("--now", &inputs.now),
        Step::new("lock", &["lock", "--json"], Some("lock.json"))
            .arg("--registry", &inputs.npm_registry)
            .arg("--now", &inputs.now),
    ]
}

/// Base, build, smoke per platform, then publish and the receipt. Build outputs name the
/// image that smoke and publish take, so those arguments are filled in at run time from
/// `build-<arch>.json` (written `{build:<arch>}` here).
pub fn plan_ship(inputs: &PlanInputs, tag: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    for p in &inputs.platforms {
        let arch = p.arch();
        let platform = p.to_string();
        steps.push(
            Step::new(
                format!("base {platform}"),
                &["base", "--json"],
                Some(&format!("base-{arch}.json")),
            )
            .arg("--platform", &platform),
        );
        let mut build = Step::new(
            format!("build {platform}"),
            &["build", "--json"],
            Some(&format!("build-{arch}.json")),
        )
        .arg("--platform", &platform);
        if let Some(ca) = &inputs.ca_bundle {
            build = build.arg("--ca-bundle", ca.display().to_string());
        }
        steps.push(build);
        steps.push(
            Step::new(
                format!("smoke {platform}"),
                &["smoke", "--json"],
                Some(&format!("smoke-{arch}.json")),
            )
            .arg("--image", format!("{{build:{arch}}}"))
            .arg("--platform", &platform),
        );
    }
    let mut publish = Step::new("publish", &["publish", "--json"], Some("publish.json"))
        .arg("--oci-registry", &inputs.oci_registry)
        .arg("--repository", &inputs.repository)
        .arg("--tag", tag);
    for p in &inputs.platforms {
        publish = publish.arg("--image", format!("{p}={{build:{}}}", p.arch()));
    }
    if inputs.platforms.len() < 2 {
        publish.args.push("--partial".into());
    }
    steps.push(publish);
    let mut write = Step::new(
        "receipt write",
        &["receipt", "write", "--json"],
        Some("receipt.json"),
    )
    .arg("--gate", "gate.json")
    .arg("--resolve", "resolve.json")
    .arg("--publish", "publish.json")
    .arg("--tag", tag)
    .arg("--now", &inputs.now)
    .arg("--out-dir", inputs.receipts_dir.display().to_string());
    for p in &inputs.platforms {
        write = write
            .arg("--build", format!("build-{}.json", p.arch()))
            .arg("--smoke", format!("smoke-{}.json", p.arch()));
    }
    steps.push(write);
    steps
}

/// The release tag: the day and a digest of what is released, so the same inputs on the same
/// day name the same release (publishing it again is then a no-op) and anything else a new one.
pub fn release_tag(now: DateTime<Utc>, inputs_digest: &str) -> String {
    format!("{}-{}", now.format("%Y.%m.%d"), &inputs_digest[..12])
}

/// The files that decide what is released, relative to the repository root. The inventory is
/// left out on purpose: it also records *when* it was resolved, and a new clock alone is not a
/// change (its package data is derived from the lockfile, which is here).
pub const RELEASE_INPUTS: [&str; 4] = [
    "template/package.json",
    "template/package-lock.json",
    "Dockerfile",
    MANIFEST_PATH,
];

/// True when `previous` released exactly these inputs for at least these platforms, completely.
pub fn unchanged_since(
    previous: &Receipt,
    current: &[(String, String)],
    platforms: &[Platform],
) -> bool {
    let recorded = |path: &str| {
        previous
            .artifacts
            .iter()
            .find(|a| a.path == path)
            .map(|a| a.sha256.as_str())
    };
    previous.complete
        && current
            .iter()
            .all(|(path, sha)| recorded(path) == Some(sha.as_str()))
        && platforms
            .iter()
            .all(|p| previous.platforms.iter().any(|r| r.platform == *p))
}

/// The newest receipt in `dir`, by its `created_at`.
fn latest_receipt(dir: &Path) -> Result<Option<(PathBuf, Receipt)>> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(None);
    };
    let mut newest: Option<(PathBuf, Receipt)> = None;
    for entry in entries {
        let path = entry?.path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let Ok(receipt) = serde_json::from_slice::<Receipt>(&std::fs::read(&path)?) else {
            continue;
        };
        if newest
            .as_ref()
            .is_none_or(|(_, n)| receipt.created_at > n.created_at)
        {
            newest = Some((path, receipt));
        }
    }
    Ok(newest)
}

/// The platforms this machine can build and run: its own, and arm64 under qemu when binfmt
/// has it registered.
fn runnable_platforms(manifest: &Manifest) -> Vec<Platform> {
    let host = Platform::host();
    let qemu = std::fs::read_to_string("/proc/sys/fs/binfmt_misc/qemu-aarch64").is_ok_and(|s| {
        s.starts_with("enabled")
            && s.lines()
                .any(|l| l.starts_with("flags:") && l.contains('F'))
    });
    manifest
        .platforms
        .iter()
        .copied()
        .filter(|p| Some(*p) == host || (*p == Platform::LinuxArm64 && qemu))
        .collect()
}

#[derive(Serialize)]
struct DryRun<'a> {
    inputs: &'a PlanInputs,
    prepare: Vec<Step>,
    ship: Vec<Step>,
    note: &'static str,
}

pub async fn run(args: ReleaseArgs) -> Result<ExitCode> {
    let root = repo_root();
    let manifest = Manifest::load(&root.join(MANIFEST_PATH))?;
    let now = now_or(args.registry.now.as_deref())?;
    let now_text = now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let receipts_dir = root.join(".xtask/releases");
    let previous = latest_receipt(&receipts_dir)?;
    let platforms = if args.platforms.is_empty() {
        runnable_platforms(&manifest)
    } else {
        args.platforms.clone()
    };
    if platforms.is_empty() {
        bail!(
            "this machine can build none of {:?}; pass --platform",
            manifest.platforms
        );
    }
    let inputs = PlanInputs {
        now: now_text.clone(),
        force: args.force,
        npm_registry: args.registry.registry.clone(),
        previous_receipt: previous.as_ref().map(|(p, _)| p.clone()),
        platforms: platforms.clone(),
        oci_registry: args.target.oci_registry.clone(),
        repository: args.target.repository.clone(),
        ca_bundle: args.ca_bundle.clone(),
        receipts_dir: receipts_dir.clone(),
    };

    if args.dry_run {
        let plan = DryRun {
            inputs: &inputs,
            prepare: plan_prepare(&inputs),
            ship: plan_ship(&inputs, "<date>-<inputs digest>"),
            note: "ship runs only when the gate is due and the inputs differ from the previous receipt",
        };
        if args.json {
            print_json(&plan)?;
        } else {
            println!("release plan (nothing is changed by --dry-run):");
            for step in plan.prepare.iter().chain(&plan.ship) {
                println!("  cargo xtask {}", step.args.join(" "));
            }
            println!("{}", plan.note);
        }
        return Ok(ExitCode::SUCCESS);
    }

    let progress = Progress::default();
    let run_dir = root
        .join(".xtask/runs")
        .join(now.format("%Y%m%dT%H%M%SZ").to_string());
    std::fs::create_dir_all(&run_dir)
        .with_context(|| format!("cannot create {}", run_dir.display()))?;
    progress.step(format!("release run in {}", run_dir.display()));
    for step in plan_prepare(&inputs) {
        execute(&step, &run_dir, &progress).await?;
        if step.name == "gate" {
            let gate: serde_json::Value = read_json(&run_dir.join("gate.json"))?;
            if gate["due"] != true {
                progress.step(format!(
                    "not due: {} (next due {})",
                    gate["reason"], gate["next_due"]
                ));
                return finish(
                    args.json,
                    &Outcome {
                        status: "not_due",
                        run_dir: &run_dir,
                        receipt: None,
                        tag: None,
                        changes: vec![],
                    },
                );
            }
        }
    }

    let current: Vec<(String, String)> = RELEASE_INPUTS
        .iter()
        .map(|path| Ok((path.to_string(), sha256_file(&root.join(path))?)))
        .collect::<Result<_>>()?;
    let changes = changes_since(
        previous.as_ref().map(|(_, r)| r),
        &read_json(&run_dir.join("resolve.json"))?,
    );
    if let Some((path, receipt)) = &previous {
        if unchanged_since(receipt, &current, &platforms) {
            progress.step(format!(
                "nothing changed since release {} ({}): same versions, same inputs; nothing to build",
                receipt.release_tag,
                path.display()
            ));
            return finish(
                args.json,
                &Outcome {
                    status: "unchanged",
                    run_dir: &run_dir,
                    receipt: Some(path),
                    tag: Some(&receipt.release_tag),
                    changes,
                },
            );
        }
    }
    let digest = crate::util::sha256_hex(
        current
            .iter()
            .map(|(p, s)| format!("{p} {s}\n"))
            .collect::<String>()
            .as_bytes(),
    );
    let tag = release_tag(now, &digest);
    let target =
        crate::publish::RegistryTarget::parse(&args.target.oci_registry, &args.target.repository)?;
    if crate::publish::is_loopback_host(&target.host) {
        let port = target.base.port().unwrap_or(5000);
        start_local_registry(&root, port, &progress).await?;
    }
    for step in plan_ship(&inputs, &tag) {
        let step = fill_in_images(step, &run_dir)?;
        execute(&step, &run_dir, &progress).await?;
    }
    let written: serde_json::Value = read_json(&run_dir.join("receipt.json"))?;
    let receipt_path = PathBuf::from(
        written["path"]
            .as_str()
            .context("receipt write printed no path")?,
    );
    let assets = collect_release_assets(&root, &receipt_path)?;
    progress.step(format!("release assets in {}", assets.display()));
    let receipt_in_assets = assets.join(
        receipt_path
            .file_name()
            .context("receipt has no file name")?,
    );
    execute(
        &Step::new("receipt verify", &["receipt", "verify"], None)
            .arg("--artifacts", assets.display().to_string())
            .args_push(receipt_in_assets.display().to_string()),
        &run_dir,
        &progress,
    )
    .await?;
    for line in &changes {
        progress.step(line);
    }
    finish(
        args.json,
        &Outcome {
            status: "released",
            run_dir: &run_dir,
            receipt: Some(&receipt_path),
            tag: Some(&tag),
            changes,
        },
    )
}

/// Gathers what a GitHub release would carry — the receipt, the artifacts it names and the
/// receipt schema — into `<receipts dir>/<tag>/`, the directory consumers verify against.
fn collect_release_assets(root: &Path, receipt_path: &Path) -> Result<PathBuf> {
    let receipt: Receipt = serde_json::from_slice(&std::fs::read(receipt_path)?)
        .with_context(|| format!("{} is not a receipt", receipt_path.display()))?;
    let dir = receipt_path
        .parent()
        .context("receipt has no directory")?
        .join(&receipt.release_tag);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut copies: Vec<(PathBuf, String)> = receipt
        .artifacts
        .iter()
        .map(|a| (root.join(&a.path), a.name.clone()))
        .collect();
    copies.push((
        root.join(crate::receipt::SCHEMA_PATH),
        "receipt.v1.schema.json".into(),
    ));
    copies.push((
        receipt_path.to_path_buf(),
        receipt_path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned(),
    ));
    for (from, name) in copies {
        let bytes =
            std::fs::read(&from).with_context(|| format!("cannot read {}", from.display()))?;
        crate::util::atomic_write(&dir.join(name), &bytes)?;
    }
    Ok(dir)
}

#[derive(Serialize)]
struct Outcome<'a> {
    status: &'static str,
    run_dir: &'a Path,
    receipt: Option<&'a Path>,
    tag: Option<&'a str>,
    changes: Vec<String>,
}

fn finish(json: bool, outcome: &Outcome<'_>) -> Result<ExitCode> {
    if json {
        print_json(outcome)?;
    } else {
        println!("release: {}", outcome.status);
        if let Some(tag) = outcome.tag {
            println!("  tag      {tag}");
        }
        if let Some(receipt) = outcome.receipt {
            println!("  receipt  {}", receipt.display());
        }
        for change in &outcome.changes {
            println!("  {change}");
        }
        println!("  run dir  {}", outcome.run_dir.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// What changed since the previous receipt, one line per package.
pub fn changes_since(previous: Option<&Receipt>, resolution: &serde_json::Value) -> Vec<String> {
    let empty = Vec::new();
    let packages = resolution["packages"].as_array().unwrap_or(&empty);
    packages
        .iter()
        .filter_map(|p| {
            let name = p["name"].as_str()?;
            let version = p["version"].as_str()?;
            let before = previous
                .and_then(|r| r.packages.iter().find(|q| q.name == name))
                .map(|q| q.version.as_str());
            match before {
                None => Some(format!("{name}: {version} (new)")),
                Some(b) if b == version => None,
                Some(b) => Some(format!(
                    "{name}: {b} -> {version}{}",
                    if p["rollback"] == true {
                        " (ROLLBACK)"
                    } else {
                        ""
                    }
                )),
            }
        })
        .collect()
}

/// Replaces `{build:<arch>}` placeholders with the image that build step printed.
fn fill_in_images(mut step: Step, run_dir: &Path) -> Result<Step> {
    for arg in &mut step.args {
        while let Some(start) = arg.find("{build:") {
            let end = start + arg[start..].find('}').context("unterminated placeholder")?;
            let arch = &arg[start + 7..end];
            let build: serde_json::Value = read_json(&run_dir.join(format!("build-{arch}.json")))?;
            let image = build["image"]
                .as_str()
                .with_context(|| format!("build-{arch}.json has no `image`"))?;
            arg.replace_range(start..=end, image);
        }
    }
    Ok(step)
}

/// Runs one step as a child process: stderr (progress) passes through, stdout is saved.
async fn execute(step: &Step, run_dir: &Path, progress: &Progress) -> Result<()> {
    progress.step(format!(
        "==> {} (cargo xtask {})",
        step.name,
        step.args.join(" ")
    ));
    let exe = std::env::current_exe().context("cannot find the running xtask binary")?;
    let output = tokio::process::Command::new(exe)
        .args(&step.args)
        .current_dir(run_dir)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .output()
        .await
        .with_context(|| format!("cannot start step `{}`", step.name))?;
    if let Some(name) = &step.output {
        crate::util::atomic_write(&run_dir.join(name), &output.stdout)?;
    }
    if !output.status.success() {
        bail!(
            "step `{}` failed ({}); its output is in {}. Fix the cause and run `cargo xtask release` again: finished steps are skipped or no-ops",
            step.name,
            output.status,
            run_dir.display()
        );
    }
    Ok(())
}

fn read_json(path: &Path) -> Result<serde_json::Value> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_slice(&bytes).with_context(|| format!("{} is not JSON", path.display()))
}

/// Starts the local registry (scripts/local-registry.sh) on 127.0.0.1:`port`.
async fn start_local_registry(root: &Path, port: u16, progress: &Progress) -> Result<()> {
    progress.step(format!("starting the local registry on 127.0.0.1:{port}"));
    let status = tokio::process::Command::new("bash")
        .arg(root.join("scripts/local-registry.sh"))
        .arg("start")
        .env("XTASK_LOCAL_REGISTRY_PORT", port.to_string())
        .stdout(Stdio::null())
        .status()
        .await
        .context("cannot run scripts/local-registry.sh")?;
    if !status.success() {
        bail!("scripts/local-registry.sh could not start a registry on 127.0.0.1:{port}; run scripts/setup-host.sh first");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(platforms: Vec<Platform>) -> PlanInputs {
        PlanInputs {
            now: "2026-11-29T12:00:00Z".into(),
            force: true,
            npm_registry: "https://registry.npmjs.org/".into(),
            previous_receipt: None,
            platforms,
            oci_registry: "127.0.0.1:5000".into(),
            repository: "sandbox0/coding-agent".into(),
            ca_bundle: None,
            receipts_dir: "/r".into(),
        }
    }

    #[test]
    fn prepare_uses_one_clock_for_gate_resolve_and_lock() {
        let steps = plan_prepare(&inputs(Platform::ALL.to_vec()));
        let names: Vec<&str> = steps.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["gate", "resolve", "lock"]);
        for step in &steps {
            assert!(
                step.args
                    .windows(2)
                    .any(|w| w == ["--now", "2026-11-29T12:00:00Z"]),
                "{step:?}"
            );
        }
        assert!(steps[0].args.contains(&"--force".to_owned()));
    }

    #[test]
    fn ship_builds_every_platform_before_publishing_once() {
        let steps = plan_ship(&inputs(Platform::ALL.to_vec()), "2026.11.29-abc");
        let names: Vec<&str> = steps.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "base linux/amd64",
                "build linux/amd64",
                "smoke linux/amd64",
                "base linux/arm64",
                "build linux/arm64",
                "smoke linux/arm64",
                "publish",
                "receipt write"
            ]
        );
        let publish = &steps[6];
        assert!(publish
            .args
            .contains(&"linux/arm64={build:arm64}".to_owned()));
        assert!(!publish.args.contains(&"--partial".to_owned()));
        let one = plan_ship(&inputs(vec![Platform::LinuxAmd64]), "t");
        assert!(one.iter().any(|s| s.args.contains(&"--partial".to_owned())));
    }

    #[test]
    fn placeholders_take_the_built_image() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("build-amd64.json"),
            r#"{"image":"coding-agent:abc"}"#,
        )
        .unwrap();
        let step = Step::new("smoke", &["smoke"], None)
            .arg("--image", "{build:amd64}")
            .arg("--image", "linux/amd64={build:amd64}");
        let filled = fill_in_images(step, dir.path()).unwrap();
        assert_eq!(
            filled.args,
            [
                "smoke",
                "--image",
                "coding-agent:abc",
                "--image",
                "linux/amd64=coding-agent:abc"
            ]
        );
    }

    #[test]
    fn tags_are_per_day_and_per_content() {
        let now = "2026-11-29T23:59:00Z".parse().unwrap();
        assert_eq!(
            release_tag(now, "0123456789abcdef"),
            "2026.11.29-0123456789ab"
        );
    }
}
