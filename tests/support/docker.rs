//! The Docker engine as the tests share it: which tests may run beside each other, the
//! connection, tiny images, the local registry, and the containers a run left behind.
//!
//! # Which tests run side by side
//!
//! The tests are one binary run with two threads (scripts/test.sh), on machines with two cores.
//! Each test that touches the engine takes one of two guards of one process-wide lock, first
//! thing, and holds it to its end:
//!
//! - [`heavy_docker`] (exclusive): image builds and smoke runs, whole releases and workflow
//!   replays, large pushes. Each keeps both cores busy for minutes, and some check state of the
//!   whole engine or share the runner's home, so nothing else that uses the engine runs beside
//!   one.
//! - [`light_docker`] (shared): tiny one-layer images loaded and published to a registry. These
//!   ran two at a time when each area was its own binary, and still do among themselves, but
//!   never beside a heavy test. The replay engine's own tests take it too, without using the
//!   engine: their jobs take turns with the replay scenarios' jobs on the runner's workspace,
//!   and their timed checks cannot wait out a scenario's job.
//!
//! Tests without Docker (resolve, lock, workflows, a release's dry run) take no guard and run
//! beside anything. The lock prefers writers (std's `RwLock` on
//! Linux), so a heavy test waiting for the light ones in flight is not overtaken by new ones.
//! A test never takes both guards. The lock is per process: two `cargo test` runs at once on
//! one machine coordinate outside (e.g. `flock`), as before.

use std::future::Future;
use std::sync::{OnceLock, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use serde_json::json;
use xtask::image::engine;

use super::{repo_root, runtime, sha256_hex};

static ENGINE: RwLock<()> = RwLock::new(());

/// Holds the engine alone (see the module comment); a test that panicked while holding it does
/// not stop the others.
pub fn heavy_docker() -> RwLockWriteGuard<'static, ()> {
    ENGINE.write().unwrap_or_else(PoisonError::into_inner)
}

/// Shares the engine with other light tests only (see the module comment).
pub fn light_docker() -> RwLockReadGuard<'static, ()> {
    ENGINE.read().unwrap_or_else(PoisonError::into_inner)
}

/// The engines the image tests run on: the host's, and the two `scripts/nested-engines.sh`
/// starts (Debian sid's docker.io, classic store and containerd image store).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// The machine's own engine (DOCKER_HOST or the default socket): Docker 20.10 here.
    Host,
    /// Docker 28, classic store (as GitHub's ubuntu-24.04 runners).
    Classic28,
    /// Docker 28, containerd image store (as Docker 29 on ubuntu-26.04, Docker Desktop).
    Containerd28,
}

thread_local! {
    /// The engine this test thread's helpers use (libtest runs each test on its own thread).
    static CURRENT: std::cell::Cell<Engine> = const { std::cell::Cell::new(Engine::Host) };
}

/// Makes this test's helpers ([`on_engine`], the xtask runner) use `engine`; a nested engine
/// is started first (idempotent). Returns the engine's DOCKER_HOST, `None` for the host's.
pub fn use_engine(engine: Engine) -> Option<String> {
    CURRENT.with(|c| c.set(engine));
    docker_host()
}

/// The engine this thread's helpers use ([`use_engine`]).
pub fn current_engine() -> Engine {
    CURRENT.with(|c| c.get())
}

/// The DOCKER_HOST of this thread's engine; `None` for the host's own.
pub fn docker_host() -> Option<String> {
    let engine = CURRENT.with(|c| c.get());
    let hosts = match engine {
        Engine::Host => return None,
        _ => nested_engines(),
    };
    Some(match engine {
        Engine::Classic28 => hosts.0.clone(),
        _ => hosts.1.clone(),
    })
}

/// `scripts/nested-engines.sh start`, once per test process: (classic, containerd) hosts.
fn nested_engines() -> &'static (String, String) {
    static HOSTS: OnceLock<(String, String)> = OnceLock::new();
    HOSTS.get_or_init(|| {
        let out = std::process::Command::new("bash")
            .arg(repo_root().join("scripts/nested-engines.sh"))
            .arg("start")
            .output()
            .expect("cannot run bash");
        assert!(
            out.status.success(),
            "the nested engines did not start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let value = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{key}=")))
                .unwrap_or_else(|| panic!("nested-engines.sh printed no {key}: {text}"))
                .to_string()
        };
        (
            value("XTASK_ENGINE_CLASSIC"),
            value("XTASK_ENGINE_CONTAINERD"),
        )
    })
}

/// Runs `f` with a connection to this test's engine ([`use_engine`]), made as the tool makes
/// it (API version negotiated), on a runtime of its own. Fails (never skips) when no engine
/// answers.
pub fn on_engine<T, F, Fut>(f: F) -> T
where
    F: FnOnce(bollard::Docker) -> Fut,
    Fut: Future<Output = T>,
{
    let host = docker_host();
    runtime().block_on(async {
        let docker = match &host {
            None => engine::connect().await,
            Some(host) => engine::connect_to(host).await,
        }
        .unwrap_or_else(|err| {
            panic!("these tests need a running Docker engine and none answers: {err:#}")
        });
        f(docker).await
    })
}

/// Loads a one-layer image with `content` in `/hello.txt` and the given architecture into the
/// engine as `tag` (a `docker load` of a hand-made archive: `docker import` cannot record a
/// foreign architecture). Returns the engine's image id.
pub fn load_tiny_image(tag: &str, arch: &str, content: &str) -> String {
    load_layered_image(tag, arch, &[content]).id
}

/// An image [`load_layered_image`] loaded: the engine's id, its config, its layer tars.
pub struct LoadedImage {
    pub id: String,
    pub config: Vec<u8>,
    pub layers: Vec<Vec<u8>>,
}

/// [`load_tiny_image`] with one layer per entry of `contents`, each a `/hello-<n>.txt`.
pub fn load_layered_image(tag: &str, arch: &str, contents: &[&str]) -> LoadedImage {
    let layers: Vec<Vec<u8>> = contents
        .iter()
        .enumerate()
        .map(|(n, content)| {
            let mut layer = tar::Builder::new(Vec::new());
            let mut header = tar::Header::new_gnu();
            header.set_size(content.len() as u64);
            header.set_mode(0o644);
            header.set_mtime(0);
            let name = if n == 0 {
                "hello.txt".to_string()
            } else {
                format!("hello-{n}.txt")
            };
            layer
                .append_data(&mut header, name, content.as_bytes())
                .unwrap();
            layer.into_inner().unwrap()
        })
        .collect();
    let diff_ids: Vec<String> = layers
        .iter()
        .map(|l| format!("sha256:{}", sha256_hex(l)))
        .collect();
    let config = json!({
        "architecture": arch,
        "os": "linux",
        "config": {"Env": ["HOME=/workspace"], "WorkingDir": "/workspace"},
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
        "history": [{"created_by": "tests/support/docker.rs"}],
    })
    .to_string();
    let config_hex = sha256_hex(config.as_bytes());
    let names: Vec<String> = (0..layers.len())
        .map(|n| format!("{}/layer.tar", &diff_ids[n][7..]))
        .collect();
    let manifest = json!([{
        "Config": format!("{config_hex}.json"),
        "RepoTags": [tag],
        "Layers": names,
    }])
    .to_string();
    let mut archive = tar::Builder::new(Vec::new());
    let mut files: Vec<(String, &[u8])> = names
        .iter()
        .cloned()
        .zip(layers.iter().map(Vec::as_slice))
        .collect();
    files.push((format!("{config_hex}.json"), config.as_bytes()));
    files.push(("manifest.json".to_string(), manifest.as_bytes()));
    for (name, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        archive.append_data(&mut h, name, data).unwrap();
    }
    let archive = archive.into_inner().unwrap();

    on_engine(|docker| async move {
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
        LoadedImage {
            id: inspect.id.unwrap(),
            config: config.into_bytes(),
            layers,
        }
    })
}

/// Removes images by tag, ignoring those already gone.
pub fn remove_images(tags: &[String]) {
    on_engine(|docker| async move {
        for tag in tags {
            let _ = docker
                .remove_image(
                    tag,
                    Some(
                        bollard::query_parameters::RemoveImageOptionsBuilder::default()
                            .force(true)
                            .build(),
                    ),
                    None,
                )
                .await;
        }
    });
}

/// Containers, running or not, that the xtask process `pid` made and left. The tool labels
/// every container with [`engine::RUN_LABEL`] = `<command>-<pid>-<nanos>`
/// ([`engine::new_run_id`]), so this sees one run's leftovers whatever else uses the engine.
pub fn containers_left_by(pid: u32) -> Vec<String> {
    let ours = engine::new_run_id("probe");
    assert!(
        ours.starts_with(&format!("probe-{}-", std::process::id())),
        "run ids no longer carry the process id ({ours}): update containers_left_by"
    );
    on_engine(|docker| async move {
        let filters =
            std::collections::HashMap::from([("label", vec![engine::RUN_LABEL.to_string()])]);
        let options = bollard::query_parameters::ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&filters)
            .build();
        docker
            .list_containers(Some(options))
            .await
            .unwrap()
            .into_iter()
            .filter(|c| {
                let run_id = c.labels.as_ref().and_then(|l| l.get(engine::RUN_LABEL));
                run_id.and_then(|id| id.split('-').nth(1)) == Some(pid.to_string().as_str())
            })
            .filter_map(|c| c.id)
            .collect()
    })
}

/// The local registry's address (`scripts/local-registry.sh start`, idempotent), started once
/// per test process.
pub fn local_registry() -> &'static str {
    static ADDR: OnceLock<String> = OnceLock::new();
    ADDR.get_or_init(|| {
        let out = std::process::Command::new("bash")
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
