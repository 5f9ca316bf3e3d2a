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
//!   never beside a heavy test.
//!
//! Tests without Docker (resolve, lock, workflows, a release's dry run) take no guard and run
//! beside anything. The lock ([`EngineLock`]) serves a waiting heavy test before light ones
//! that arrive after it, so a heavy test is not starved by a stream of light ones; which test
//! libtest starts first changes only how long the run takes, never what may run together.
//! A test never takes both guards. The lock is per process: two `cargo test` runs at once on
//! one machine coordinate outside (e.g. `flock`), as before.
//!
//! # Which tests run at all
//!
//! Each guard also decides whether its test runs ([`ENGINE_TESTS_ENV`]): a plain `cargo test`
//! outside CI passes them without running and says so on stderr; scripts/test.sh runs them
//! and fails them when no engine answers.

use std::future::Future;
use std::io::Write as _;
use std::sync::{Condvar, Mutex, OnceLock, PoisonError};

use serde_json::json;
use xtask::image::engine;

use super::{checkout_path, runtime, sha256_hex};

// ---------------------------------------------------------------------------------------------
// Which tests run: the engine tier.

/// `XTASK_ENGINE_TESTS`: `1` runs the tests that need the host scripts/test.sh sets up (a
/// Docker engine, nested engines, mmdebstrap, qemu binfmt, the local registry, the runner
/// user) and fails them when no engine answers; `0` passes them without running (the fast
/// tier). Unset: as `1` under CI (`CI=true`, which GitHub Actions sets), else as `0` with a
/// note on stderr, so a newcomer's plain `cargo test` runs what needs nothing and says what it
/// left out. scripts/test.sh (so `.ci/run`) sets `1`.
pub const ENGINE_TESTS_ENV: &str = "XTASK_ENGINE_TESTS";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineTier {
    /// Run them; no engine is a failure.
    Required,
    /// Pass them without running, saying so once.
    Skipped { asked: bool },
}

/// The tier from the two variables (pure, for its test).
pub fn engine_tier(engine_tests: Option<&str>, ci: Option<&str>) -> Result<EngineTier, String> {
    match engine_tests.map(str::trim) {
        Some("1") => Ok(EngineTier::Required),
        Some("0") => Ok(EngineTier::Skipped { asked: true }),
        Some(other) => Err(format!(
            "{ENGINE_TESTS_ENV}={other:?}: use 1 (run the engine tests) or 0 (skip them)"
        )),
        None if ci.is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1") => {
            Ok(EngineTier::Required)
        }
        None => Ok(EngineTier::Skipped { asked: false }),
    }
}

fn tier() -> EngineTier {
    static TIER: OnceLock<EngineTier> = OnceLock::new();
    *TIER.get_or_init(|| {
        engine_tier(
            std::env::var(ENGINE_TESTS_ENV).ok().as_deref(),
            std::env::var("CI").ok().as_deref(),
        )
        .unwrap_or_else(|e| panic!("{e}"))
    })
}

/// The engine's version, or why none answers (`docker version`, DOCKER_HOST honoured).
fn engine_answers() -> &'static Result<String, String> {
    static ANSWER: OnceLock<Result<String, String>> = OnceLock::new();
    ANSWER.get_or_init(|| {
        let where_ =
            std::env::var("DOCKER_HOST").unwrap_or_else(|_| "unix:///var/run/docker.sock".into());
        match std::process::Command::new("docker")
            .args(["version", "--format", "{{.Server.Version}}"])
            .output()
        {
            Ok(out) if out.status.success() => {
                Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
            }
            Ok(out) => Err(format!(
                "no Docker engine answers at {where_}: `docker version` said {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )),
            Err(e) => Err(format!(
                "no Docker engine answers at {where_}: cannot run `docker`: {e}"
            )),
        }
    })
}

/// Whether this test runs: in the required tier, after checking that the engine answers
/// (a failure naming the remedy otherwise); in the skipped tier, never, with one note on
/// stderr for the whole run and a line per test. Written to stderr directly: libtest
/// captures `eprintln!` of passing tests, and a skip must be seen.
fn runs(need: &str) -> bool {
    match tier() {
        EngineTier::Required => {
            if let Err(why) = engine_answers() {
                panic!(
                    "{why}. This test needs {need}; `bash scripts/setup-host.sh` installs and \
                     starts the engine ({ENGINE_TESTS_ENV}=0 skips such tests instead)"
                );
            }
            true
        }
        EngineTier::Skipped { asked } => {
            static NOTE: OnceLock<()> = OnceLock::new();
            NOTE.get_or_init(|| {
                let why = if asked {
                    format!("{ENGINE_TESTS_ENV}=0")
                } else {
                    format!("{ENGINE_TESTS_ENV} is unset and this is not CI")
                };
                let _ = writeln!(
                    std::io::stderr(),
                    "note: tests that need a Docker engine and the host scripts/test.sh sets up \
                     pass without running ({why}); `bash scripts/test.sh` runs them all, or set \
                     {ENGINE_TESTS_ENV}=1"
                );
            });
            let name = std::thread::current().name().unwrap_or("?").to_string();
            let _ = writeln!(std::io::stderr(), "skipped {name}: needs {need}");
            false
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Which tests run side by side: one lock, writers first.

/// The engine's lock: many light holders or one heavy one, and a heavy test that is waiting
/// is served before light tests that arrive after it. Written out rather than std's
/// `RwLock`, whose preference between readers and writers is unspecified.
pub struct EngineLock {
    state: Mutex<LockState>,
    changed: Condvar,
}

#[derive(Default)]
struct LockState {
    light: usize,
    heavy: bool,
    heavy_waiting: usize,
}

impl EngineLock {
    pub const fn new() -> EngineLock {
        EngineLock {
            state: Mutex::new(LockState {
                light: 0,
                heavy: false,
                heavy_waiting: 0,
            }),
            changed: Condvar::new(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, LockState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn heavy(&self) -> EngineGuard<'_> {
        let mut s = self.state();
        s.heavy_waiting += 1;
        while s.heavy || s.light > 0 {
            s = self.changed.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
        s.heavy_waiting -= 1;
        s.heavy = true;
        EngineGuard {
            lock: self,
            heavy: true,
        }
    }

    pub fn light(&self) -> EngineGuard<'_> {
        let mut s = self.state();
        while s.heavy || s.heavy_waiting > 0 {
            s = self.changed.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
        s.light += 1;
        EngineGuard {
            lock: self,
            heavy: false,
        }
    }
}

impl Default for EngineLock {
    fn default() -> Self {
        EngineLock::new()
    }
}

/// Held to the end of a test; released when the test ends, also by a panic.
pub struct EngineGuard<'a> {
    lock: &'a EngineLock,
    heavy: bool,
}

impl Drop for EngineGuard<'_> {
    fn drop(&mut self) {
        let mut s = self.lock.state();
        if self.heavy {
            s.heavy = false;
        } else {
            s.light -= 1;
        }
        drop(s);
        self.lock.changed.notify_all();
    }
}

static ENGINE: EngineLock = EngineLock::new();

/// Holds the engine alone (see the module comment); `None` when the engine tier is skipped
/// (the test then returns at once).
pub fn heavy_docker() -> Option<EngineGuard<'static>> {
    runs("the Docker engine alone").then(|| ENGINE.heavy())
}

/// Shares the engine with other light tests only (see the module comment); `None` when the
/// engine tier is skipped.
pub fn light_docker() -> Option<EngineGuard<'static>> {
    runs("the Docker engine").then(|| ENGINE.light())
}

#[cfg(test)]
mod tier_tests {
    use super::*;

    #[test]
    fn a_test_image_tag_names_its_process() {
        assert_eq!(pid_of_test_tag("arm64-8969"), Some(8969));
        assert_eq!(
            pid_of_test_tag("amd64-i-10724-1796223936484436017"),
            Some(10724)
        );
        assert_eq!(pid_of_test_tag("arm64-changed-31775"), Some(31775));
        assert_eq!(pid_of_test_tag("4242"), Some(4242));
        assert_eq!(pid_of_test_tag("bench"), None);
        assert_eq!(pid_of_test_tag("amd64-latest"), None);
    }

    #[test]
    fn the_engine_tier_is_asked_for_or_follows_ci() {
        assert_eq!(engine_tier(Some("1"), None), Ok(EngineTier::Required));
        assert_eq!(
            engine_tier(Some("0"), Some("true")),
            Ok(EngineTier::Skipped { asked: true })
        );
        assert_eq!(engine_tier(None, Some("true")), Ok(EngineTier::Required));
        assert_eq!(
            engine_tier(None, None),
            Ok(EngineTier::Skipped { asked: false })
        );
        assert_eq!(
            engine_tier(None, Some("false")),
            Ok(EngineTier::Skipped { asked: false })
        );
        assert!(engine_tier(Some("yes"), None).is_err());
    }

    #[test]
    fn a_waiting_heavy_test_goes_before_light_tests_that_come_after_it() {
        use std::sync::mpsc;
        use std::time::Duration;
        static LOCK: EngineLock = EngineLock::new();
        let (tx, rx) = mpsc::channel();
        let first_light = LOCK.light();
        let heavy = {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let _g = LOCK.heavy();
                tx.send("heavy").unwrap();
                std::thread::sleep(Duration::from_millis(100));
            })
        };
        // The heavy test is waiting for the first light one.
        while LOCK.state().heavy_waiting == 0 {
            std::thread::yield_now();
        }
        let late_light = {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let _g = LOCK.light();
                tx.send("late light").unwrap();
            })
        };
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            rx.try_recv().is_err(),
            "nothing runs while the first light test holds it"
        );
        drop(first_light);
        heavy.join().unwrap();
        late_light.join().unwrap();
        let order: Vec<&str> = rx.try_iter().collect();
        assert_eq!(order, ["heavy", "late light"]);
    }
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
            .arg(checkout_path("scripts/nested-engines.sh"))
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
            None => engine::connect(&xtask::settings::Settings::from_process()).await,
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

/// The process id a test image's tag names: the first `-`/`_`-separated part of the tag that
/// is a `u32` (`arm64-8969`, `amd64-i-10724-<nanos>` from [`super::unique`], `arm64-changed-9`;
/// nanoseconds do not fit). Pure.
pub fn pid_of_test_tag(tag: &str) -> Option<u32> {
    tag.split(['-', '_'])
        .find_map(|part| part.parse::<u32>().ok())
}

/// Removes, once per engine and test process, the `xtask-test-*` images of test processes
/// that have ended. Fixtures held in statics are never dropped and a failed test does not
/// clean up, so each run would otherwise leave its tiny images (hundreds, seen here); like
/// [`super::run_dir`], the next run removes them. An image a live process's tag names, or one
/// a container still uses, stays.
fn remove_dead_runs_images() {
    static DONE: Mutex<Vec<Engine>> = Mutex::new(Vec::new());
    let engine = current_engine();
    {
        let mut done = DONE.lock().unwrap_or_else(PoisonError::into_inner);
        if done.contains(&engine) {
            return;
        }
        done.push(engine);
    }
    on_engine(|docker| async move {
        let filters = std::collections::HashMap::from([("reference", vec!["xtask-test-*"])]);
        let Ok(images) = docker
            .list_images(Some(
                bollard::query_parameters::ListImagesOptionsBuilder::default()
                    .filters(&filters)
                    .build(),
            ))
            .await
        else {
            return;
        };
        for reference in images.into_iter().flat_map(|i| i.repo_tags) {
            let Some((_, tag)) = reference.rsplit_once(':') else {
                continue;
            };
            let dead = pid_of_test_tag(tag).is_some_and(|pid| {
                pid != std::process::id() && !std::path::Path::new(&format!("/proc/{pid}")).exists()
            });
            if dead {
                untag(&docker, &reference).await;
            }
        }
    });
}

/// Removes `reference` from the engine (the image goes with its last reference), ignoring
/// errors: a container that uses it keeps it.
pub async fn untag(docker: &bollard::Docker, reference: &str) {
    let _ = docker
        .remove_image(
            reference,
            None::<bollard::query_parameters::RemoveImageOptions>,
            None,
        )
        .await;
}

/// `docker pull reference` on this test's engine; returns the image id it got and removes the
/// reference again (a pull by digest has no tag to remove it by). Fails the test when the
/// pull does.
pub async fn pull_and_untag(docker: &bollard::Docker, reference: &str) -> Option<String> {
    use futures_util::StreamExt;
    let mut pull = docker.create_image(
        Some(
            bollard::query_parameters::CreateImageOptionsBuilder::default()
                .from_image(reference)
                .build(),
        ),
        None,
        None,
    );
    while let Some(item) = pull.next().await {
        item.unwrap_or_else(|e| panic!("docker pull {reference}: {e}"));
    }
    let id = docker.inspect_image(reference).await.unwrap().id;
    untag(docker, reference).await;
    id
}

/// [`load_tiny_image`] with one layer per entry of `contents`, each a `/hello-<n>.txt`.
pub fn load_layered_image(tag: &str, arch: &str, contents: &[&str]) -> LoadedImage {
    remove_dead_runs_images();
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
            .arg(checkout_path("scripts/local-registry.sh"))
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
