//! `cargo xtask-bench publish --image REF`: `cargo xtask publish` next to `docker push` of the
//! same local image, each into its own fresh, empty registry, in the same run.
//!
//! Both registries are Debian's docker-registry (as `scripts/local-registry.sh` runs it) on
//! 127.0.0.1, ports from 5460-5479, storage in temporary directories; both are stopped and
//! their storage removed at the end. Before the timed runs the image is read once (`docker
//! save` to nowhere), so neither side pays for a cold page cache. Our side is the real
//! [`publish`](crate::release::publish::publish) (export, compression, upload, manifest PUT);
//! docker's is `docker push` of a tag on the image. Bytes pushed are what each registry stored
//! (its blob files), so both are counted the same way.

use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::release::publish::{publish, PublishOptions};
use crate::util::{print_json, Progress};
use template_formats::manifest::Platform;

const PORTS: std::ops::RangeInclusive<u16> = 5460..=5479;
const REPOSITORY: &str = "bench/coding-agent";

#[derive(Serialize)]
struct BenchReport {
    image: String,
    platform: String,
    cores: usize,
    docker_push_registry: String,
    docker_push_secs: f64,
    docker_push_bytes: u64,
    xtask_publish_registry: String,
    xtask_publish_secs: f64,
    xtask_publish_bytes: u64,
    xtask_manifest_digest: String,
    /// xtask publish time / docker push time: below 0.5 is "twice as fast".
    ratio: f64,
}

/// A docker-registry child process on a loopback port with its storage in a temporary
/// directory; killed (kill_on_drop) and removed when dropped.
pub(crate) struct Registry {
    pub addr: String,
    storage: PathBuf,
    _child: tokio::process::Child,
    _dir: tempfile::TempDir,
}

impl Registry {
    pub(crate) async fn start() -> Result<Registry> {
        // A port someone listens on is taken (the first registry's, other tools').
        let port = PORTS
            .clone()
            .find(|p| std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok())
            .with_context(|| format!("no free port in {PORTS:?} on 127.0.0.1 for a registry"))?;
        let addr = format!("127.0.0.1:{port}");
        let dir = tempfile::Builder::new()
            .prefix("xtask-bench-registry-")
            .tempdir()
            .context("cannot create a temporary directory for a benchmark registry")?;
        let storage = dir.path().join("storage");
        std::fs::create_dir_all(&storage)?;
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\n\
                 storage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: false\n\
                 http:\n  addr: {addr}\n",
                storage.display()
            ),
        )?;
        let child = tokio::process::Command::new("/usr/bin/docker-registry")
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context(
                "cannot start /usr/bin/docker-registry for the benchmark: run \
                 `bash scripts/setup-host.sh` first",
            )?;
        let http = reqwest::Client::new();
        let url = format!("http://{addr}/v2/");
        for _ in 0..100 {
            if let Ok(response) = http.get(&url).send().await {
                if response.status().is_success() {
                    return Ok(Registry {
                        addr,
                        storage,
                        _child: child,
                        _dir: dir,
                    });
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!("the benchmark registry on {addr} did not answer {url} within 10 s")
    }

    /// A blob (or manifest) the registry stored, by digest, read from its storage.
    pub(crate) fn blob(&self, digest: &str) -> Result<Vec<u8>> {
        let hex = digest
            .strip_prefix("sha256:")
            .filter(|h| h.len() == 64)
            .with_context(|| format!("`{digest}` is not a sha256 digest"))?;
        let path = self
            .storage
            .join("docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data");
        std::fs::read(&path)
            .with_context(|| format!("the registry stored no {digest} ({})", path.display()))
    }

    /// Bytes of the blobs (layers, configs, manifests) the registry stored.
    pub(crate) fn stored_bytes(&self) -> Result<u64> {
        fn walk(dir: &Path) -> Result<u64> {
            let mut total = 0;
            for entry in std::fs::read_dir(dir)? {
                let entry = entry?;
                let kind = entry.file_type()?;
                if kind.is_dir() {
                    total += walk(&entry.path())?;
                } else if kind.is_file() && entry.file_name() == "data" {
                    total += entry.metadata()?.len();
                }
            }
            Ok(total)
        }
        let blobs = self.storage.join("docker/registry/v2/blobs");
        if !blobs.exists() {
            return Ok(0);
        }
        walk(&blobs).with_context(|| format!("cannot measure {}", blobs.display()))
    }
}

/// `docker push` of the local `image` into `repository` of `registry` (through a tag that is
/// removed again): its seconds.
pub(crate) async fn docker_push(
    registry: &Registry,
    image: &str,
    repository: &str,
    progress: &Progress,
) -> Result<f64> {
    let tagged = format!("{}/{repository}:bench", registry.addr);
    docker(
        &["tag", image, &tagged],
        "tagging the image for docker push",
    )
    .await?;
    progress.step(format!("docker push {tagged}"));
    let start = Instant::now();
    let pushed = docker(&["push", "--quiet", &tagged], "docker push").await;
    let secs = start.elapsed().as_secs_f64();
    let _ = docker(&["rmi", &tagged], "untagging").await;
    pushed?;
    Ok(secs)
}

async fn docker(args: &[&str], what: &str) -> Result<()> {
    let output = tokio::process::Command::new("docker")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .with_context(|| format!("cannot run `docker {}`", args.join(" ")))?;
    if !output.status.success() {
        bail!(
            "{what}: `docker {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

/// `cargo xtask-bench publish`: the local image both sides push.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchPublishRequest {
    /// A local image in the engine.
    pub image: String,
    pub json: bool,
}

pub async fn run(request: BenchPublishRequest, ctx: &crate::Context) -> Result<ExitCode> {
    let progress = Progress::default();
    let engine = crate::image::engine::connect(&ctx.settings).await?;
    let inspect = engine
        .inspect_image(&request.image)
        .await
        .with_context(|| {
            format!(
                "image `{}` is not in the local engine; `docker images` lists what is",
                request.image
            )
        })?;
    let arch = inspect.architecture.clone().unwrap_or_default();
    let platform: Platform = format!("linux/{arch}")
        .parse()
        .map_err(|e: String| anyhow::anyhow!("image `{}` is linux/{arch}: {e}", request.image))?;

    progress.step(format!(
        "reading {} once (docker save to nowhere) so both sides start from a warm page cache",
        request.image
    ));
    let status = tokio::process::Command::new("docker")
        .args(["save", &request.image])
        .stdout(Stdio::null())
        .status()
        .await
        .context("cannot run `docker save`")?;
    if !status.success() {
        bail!("`docker save {}` failed", request.image);
    }

    let theirs = Registry::start().await?;
    let ours = Registry::start().await?;
    progress.step(format!(
        "empty registries: {} for docker push, {} for cargo xtask publish",
        theirs.addr, ours.addr
    ));

    let docker_secs = docker_push(&theirs, &request.image, REPOSITORY, &progress).await?;
    let docker_bytes = theirs.stored_bytes()?;
    progress.step(format!(
        "docker push: {docker_secs:.1} s, {docker_bytes} bytes stored"
    ));
    let docker_registry = theirs.addr.clone();
    // Its storage goes now: the disk holds one pushed copy of the image at a time.
    drop(theirs);

    progress.step(format!(
        "cargo xtask publish --registry {} --repository {REPOSITORY} --image {platform}={}",
        ours.addr, request.image
    ));
    let options = PublishOptions {
        registry: ours.addr.clone(),
        repository: REPOSITORY.to_string(),
        images: vec![(platform, request.image.clone())],
        pushed: Vec::new(),
        tag: None,
        required_platforms: Vec::new(),
        defer_tag: false,
        previous: None,
        dry_run: false,
    };
    let start = Instant::now();
    let report = publish(&options, ctx, &progress).await?;
    let our_secs = start.elapsed().as_secs_f64();
    let our_bytes = ours.stored_bytes()?;
    let digest = report
        .platforms
        .first()
        .map(|p| p.digest.clone())
        .unwrap_or_default();
    if report.platforms.first().map(|p| p.uploaded_bytes) == Some(0) {
        bail!(
            "cargo xtask publish uploaded nothing into the empty registry {}: the timing would \
             not be a publish",
            ours.addr
        );
    }
    progress.step(format!(
        "cargo xtask publish: {our_secs:.1} s, {our_bytes} bytes stored"
    ));

    let report = BenchReport {
        image: request.image.clone(),
        platform: platform.to_string(),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        docker_push_registry: docker_registry,
        docker_push_secs: docker_secs,
        docker_push_bytes: docker_bytes,
        xtask_publish_registry: ours.addr.clone(),
        xtask_publish_secs: our_secs,
        xtask_publish_bytes: our_bytes,
        xtask_manifest_digest: digest,
        ratio: our_secs / docker_secs,
    };
    if request.json {
        print_json(&report)?;
    } else {
        println!(
            "publish of {} ({}) into an empty local registry, {} cores:\n  \
             docker push          {:>7.1} s  {:>6.1} MB stored\n  \
             cargo xtask publish  {:>7.1} s  {:>6.1} MB stored\n  \
             ratio (ours/docker)  {:>7.2}",
            report.image,
            report.platform,
            report.cores,
            report.docker_push_secs,
            report.docker_push_bytes as f64 / 1e6,
            report.xtask_publish_secs,
            report.xtask_publish_bytes as f64 / 1e6,
            report.ratio
        );
    }
    Ok(ExitCode::SUCCESS)
}
