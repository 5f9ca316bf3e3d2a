//! A genuine release for end-to-end tests of receipts: two tiny one-layer images (amd64
//! native, arm64 "emulated") loaded into the Docker engine, published to a real local
//! registry (`scripts/local-registry.sh`, port XTASK_LOCAL_REGISTRY_PORT), and the JSON the
//! other commands would print about them, from which `receipt write` makes a real receipt.
//! No image is built: the whole fixture takes seconds.
//!
//! Included by path (`#[path = "support/genuine_release.rs"] mod genuine_release;`) in the
//! test binaries that need it, so the others do not compile it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

pub fn xtask() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_xtask"));
    // Registry credentials of the developer's machine must not leak into the tests.
    cmd.env_remove("XTASK_REGISTRY_USERNAME")
        .env_remove("XTASK_REGISTRY_PASSWORD")
        .env_remove("XTASK_OCI_REGISTRY")
        .env_remove("XTASK_OCI_REPOSITORY")
        .env_remove("GITHUB_OUTPUT")
        .env_remove("GITHUB_SHA");
    cmd
}

pub fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("cannot run the xtask binary");
    eprintln!(
        "$ {cmd:?}\n--- status {}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

pub fn stdout_json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

pub fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}-{}-{nanos}", std::process::id())
}

/// The local registry's address, started once per test binary (idempotent across runs).
pub fn registry() -> &'static str {
    static ADDR: OnceLock<String> = OnceLock::new();
    ADDR.get_or_init(|| {
        let out = Command::new("bash")
            .arg(repo_root().join("scripts/local-registry.sh"))
            .arg("start")
            .output()
            .expect("cannot run bash");
        assert!(
            out.status.success(),
            "the local registry did not start: {}\nrun scripts/setup-host.sh (it installs \
             docker-registry) and try again",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    })
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

pub fn docker() -> bollard::Docker {
    let docker = bollard::Docker::connect_with_defaults()
        .expect("cannot connect to the Docker engine: run scripts/setup-host.sh");
    runtime()
        .block_on(docker.negotiate_version())
        .expect("the Docker engine does not answer: run scripts/setup-host.sh to start it")
}

/// Loads a one-layer image with `content` in `/hello.txt` and the given architecture into the
/// engine as `tag` (a `docker load` of a hand-made archive: `docker import` cannot record a
/// foreign architecture). Returns the engine's image id.
pub fn load_image(tag: &str, arch: &str, content: &str) -> String {
    let mut layer = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(content.len() as u64);
    header.set_mode(0o644);
    header.set_mtime(0);
    layer
        .append_data(&mut header, "hello.txt", content.as_bytes())
        .unwrap();
    let layer = layer.into_inner().unwrap();
    let config = json!({
        "architecture": arch,
        "os": "linux",
        "config": {"Env": ["HOME=/workspace"], "WorkingDir": "/workspace"},
        "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{}", sha256_hex(&layer))]},
        "history": [{"created_by": "tests/release.rs"}],
    })
    .to_string();
    let config_hex = sha256_hex(config.as_bytes());
    let manifest = json!([{
        "Config": format!("{config_hex}.json"),
        "RepoTags": [tag],
        "Layers": [format!("{config_hex}/layer.tar")],
    }])
    .to_string();
    let mut archive = tar::Builder::new(Vec::new());
    for (name, data) in [
        (format!("{config_hex}/layer.tar"), layer.as_slice()),
        (format!("{config_hex}.json"), config.as_bytes()),
        ("manifest.json".to_string(), manifest.as_bytes()),
    ] {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        archive.append_data(&mut h, name, data).unwrap();
    }
    let archive = archive.into_inner().unwrap();

    let docker = docker();
    runtime().block_on(async {
        use futures_util::StreamExt;
        let mut stream = docker.import_image(
            bollard::query_parameters::ImportImageOptionsBuilder::default()
                .quiet(true)
                .build(),
            bollard::body_full(archive.into()),
            None,
        );
        while let Some(item) = stream.next().await {
            let info = item.expect("docker load failed");
            assert!(info.error_detail.is_none(), "docker load: {info:?}");
        }
        let inspect = docker.inspect_image(tag).await.expect("loaded image");
        assert_eq!(inspect.architecture.as_deref(), Some(arch));
        inspect.id.unwrap()
    })
}

pub fn publish(repository: &str, args: &[&str]) -> Output {
    run(xtask()
        .arg("publish")
        .args([
            "--oci-registry",
            registry(),
            "--repository",
            repository,
            "--json",
        ])
        .args(args))
}

pub struct Release {
    /// Scratch repository root (XTASK_ROOT) holding the template files.
    pub root: tempfile::TempDir,
    pub inputs: PathBuf,
    pub builds: Vec<(String, Value)>,
    pub publish: PathBuf,
}

/// Publishes two tiny images once and writes the JSON the other commands would print about
/// them; `receipt write` then assembles receipts from these files.
pub fn release() -> &'static Release {
    static RELEASE: OnceLock<Release> = OnceLock::new();
    RELEASE.get_or_init(|| {
        let root = tempfile::tempdir().unwrap();
        for path in [
            "template/manifest.yaml",
            "template/inventory.json",
            "template/package.json",
            "template/package-lock.json",
        ] {
            let to = root.path().join(path);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(repo_root().join(path), &to)
                .unwrap_or_else(|e| panic!("{path} must exist in the repository: {e}"));
        }
        // The receipt only hashes the Dockerfile; a fixture keeps this test independent of it.
        std::fs::write(
            root.path().join("Dockerfile"),
            "# fixture of tests/release.rs\nFROM scratch\n",
        )
        .unwrap();
        let inputs = root.path().join("inputs");
        std::fs::create_dir_all(&inputs).unwrap();

        let repository = unique("xtask-test/receipt").to_lowercase();
        let salt = unique("receipt");
        let mut builds = Vec::new();
        let mut images = Vec::new();
        for (arch, emulated) in [("amd64", false), ("arm64", true)] {
            let tag = format!("xtask-test-receipt:{arch}-{}", std::process::id());
            let id = load_image(&tag, arch, &format!("{arch} {salt}"));
            images.push("--image".to_string());
            images.push(format!("linux/{arch}={tag}"));
            builds.push((
                arch.to_string(),
                json!({
                    "image": tag,
                    "platform": format!("linux/{arch}"),
                    "build_id": sha256_hex(format!("build {arch} {salt}").as_bytes()),
                    "image_id": id,
                    "built": true,
                    "emulated": emulated,
                    "size": 1234,
                    "base_image": format!("coding-agent-base:{arch}"),
                    "base_image_id": format!("sha256:{}", sha256_hex(arch.as_bytes())),
                    "ca_bundle": null,
                    "dry_run": false,
                    "duration_secs": 1.0,
                    "debian_packages": [],
                    "some_future_field": "ignored",
                }),
            ));
        }
        let images: Vec<&str> = images.iter().map(String::as_str).collect();
        let out = publish(&repository, &[&images[..], &["--tag", TAG]].concat());
        assert!(out.status.success());
        let publish = inputs.join("publish.json");
        std::fs::write(&publish, &out.stdout).unwrap();

        // The committed inventory, lockfile and package.json as they are: they agree with
        // each other, and `receipt verify --artifacts` checks that the receipt agrees with them.
        let inventory: Value = serde_json::from_slice(
            &std::fs::read(root.path().join("template/inventory.json")).unwrap(),
        )
        .unwrap();
        let packages: Vec<Value> = inventory["packages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["top_level"] == true)
            .map(|p| {
                json!({
                    "name": p["name"], "version": p["version"], "latest": p["version"],
                    "published": "2026-11-20T10:00:00Z", "locked": p["version"],
                    "rollback": false, "held_back": false, "notes": ["fixture"], "rejected": [],
                })
            })
            .collect();
        std::fs::write(
            inputs.join("resolve.json"),
            json!({
                "cutoff": inventory["cutoff"], "now": "2026-11-30T06:17:00Z",
                "registry": inventory["registry"], "cooldown_hours": 48, "packages": packages,
            })
            .to_string(),
        )
        .unwrap();
        for (arch, build) in &builds {
            std::fs::write(inputs.join(format!("build-{arch}.json")), build.to_string()).unwrap();
        }
        let gate = gate_json("2026-11-30T06:17:00Z", &[]);
        assert_eq!(gate["due"], true);
        std::fs::write(inputs.join("gate.json"), gate.to_string()).unwrap();
        Release {
            root,
            inputs,
            builds,
            publish,
        }
    })
}

/// The release tag of the genuine release: a form `cargo xtask release` makes.
pub const TAG: &str = "2026.11.30-0123456789ab";

/// The `smoke --json` output for `image` with every check the manifest requires of
/// `platform` (native or emulated), all passed but `failing`.
pub fn smoke(image: &str, platform: &str, emulated: bool, failing: Option<&str>) -> Value {
    let manifest =
        xtask::manifest::Manifest::load(&repo_root().join("template/manifest.yaml")).unwrap();
    let checks: Vec<Value> = manifest
        .required_smoke_checks(platform.parse().unwrap(), emulated)
        .into_iter()
        .map(|name| {
            let passed = Some(name.as_str()) != failing;
            json!({"name": name, "passed": passed, "output": "ok", "duration_secs": 0.1})
        })
        .collect();
    json!({
        "image": image, "image_id": null, "platform": platform, "emulated": emulated,
        "passed": failing.is_none(), "checks": checks, "duration_secs": 1.0,
    })
}

/// Runs `receipt write` for the published release, with the amd64 smoke check `failing`
/// failed when given. Returns (output, receipt path).
pub fn write_receipt(out_dir: &Path, failing: Option<&str>) -> (Output, Option<PathBuf>) {
    let r = release();
    std::fs::create_dir_all(out_dir).unwrap();
    let mut cmd = xtask();
    cmd.env("XTASK_ROOT", r.root.path())
        .args(["receipt", "write", "--json"])
        .arg("--gate")
        .arg(r.inputs.join("gate.json"))
        .arg("--resolve")
        .arg(r.inputs.join("resolve.json"))
        .arg("--publish")
        .arg(&r.publish)
        .args(["--source-commit", &"ab12".repeat(10)])
        .args(["--now", "2026-11-30T06:30:00Z"])
        .arg("--out-dir")
        .arg(out_dir);
    for (arch, build) in &r.builds {
        let image = build["image"].as_str().unwrap();
        let smoke_file = out_dir.join(format!("smoke-{arch}.json"));
        let failing = if arch == "amd64" { failing } else { None };
        let platform = build["platform"].as_str().unwrap();
        let emulated = build["emulated"] == true;
        std::fs::write(
            &smoke_file,
            smoke(image, platform, emulated, failing).to_string(),
        )
        .unwrap();
        cmd.arg("--build")
            .arg(r.inputs.join(format!("build-{arch}.json")))
            .arg("--smoke")
            .arg(&smoke_file);
    }
    let out = run(&mut cmd);
    let path = serde_json::from_slice::<Value>(&out.stdout)
        .ok()
        .and_then(|v| v["path"].as_str().map(PathBuf::from));
    (out, path)
}

pub fn gate_json(now: &str, extra: &[&str]) -> Value {
    let out = run(xtask().args(["gate", "--json", "--now", now]).args(extra));
    assert!(out.status.success());
    stdout_json(&out)
}

/// Writes `value` as a receipt whose file name carries its true digest (so the rejection
/// under test is not merely the name).
pub fn write_renamed(dir: &Path, tag: &str, value: &Value) -> PathBuf {
    let mut bytes = serde_json::to_vec_pretty(value).unwrap();
    bytes.push(b'\n');
    let path = dir.join(format!("receipt-{tag}-{}.json", sha256_hex(&bytes)));
    std::fs::write(&path, &bytes).unwrap();
    path
}

pub fn verify(path: &Path, artifacts: Option<&Path>) -> (bool, String, Value) {
    let mut cmd = xtask();
    cmd.args(["receipt", "verify", "--json"]).arg(path);
    if let Some(dir) = artifacts {
        cmd.arg("--artifacts").arg(dir);
    }
    let out = run(&mut cmd);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        stdout_json(&out),
    )
}

pub fn pin(receipt: &Path, template: &Path) -> Output {
    run(xtask()
        .args(["pin", "--json", "--receipt"])
        .arg(receipt)
        .arg("--template")
        .arg(template))
}

/// A copy of the committed template definition in `dir` whose `image:` names `repository`
/// (unpinned), as a consumer's template does before the first pin of that repository.
pub fn template_for(dir: &Path, repository: &str) -> PathBuf {
    let text =
        std::fs::read_to_string(repo_root().join("template/sandbox0-template.yaml")).unwrap();
    let mut replaced = 0;
    let text: String = text
        .split_inclusive('\n')
        .map(|line| {
            if line.starts_with("image: ") {
                replaced += 1;
                format!("image: {repository}:unpinned\n")
            } else {
                line.to_string()
            }
        })
        .collect();
    assert_eq!(
        replaced, 1,
        "the committed template has one top-level image line"
    );
    let path = dir.join("sandbox0-template.yaml");
    std::fs::write(&path, text).unwrap();
    path
}
