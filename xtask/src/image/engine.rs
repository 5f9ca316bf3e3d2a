//! The Docker Engine API as the image commands use it: one connection with the API version
//! negotiated (Docker 20.10 / API 1.41 on the build machines, 28+ on hosted runners), image
//! lookups, and containers that are always removed again.
//!
//! Every container made here carries the label [`RUN_LABEL`] with the id of the command run that
//! made it, so a run can remove whatever it left behind even after a timeout or a panic, and
//! tests can prove that nothing was left.

use std::collections::HashMap;
use std::io::Read;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use bollard::container::LogOutput;
use bollard::errors::Error as DockerError;
use bollard::models::{ContainerCreateBody, HostConfig, ImageInspect, VolumeCreateRequest};
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, CreateContainerOptionsBuilder,
    DownloadFromContainerOptionsBuilder, ListContainersOptionsBuilder, ListVolumesOptionsBuilder,
    RemoveContainerOptionsBuilder, RemoveVolumeOptionsBuilder, WaitContainerOptions,
};
use bollard::Docker;
use bytes::Bytes;
use futures_util::{Stream, StreamExt};

use template_formats::manifest::Platform;

/// Label on every container this tool creates; the value identifies one command run.
pub const RUN_LABEL: &str = "org.sandbox0.xtask.run";

/// Label on every container and volume this tool creates: which process made it, as
/// [`Owner`] writes it, so a later run can tell the leftovers of a killed run (its process is
/// gone) from the containers of a live one.
pub const OWNER_LABEL: &str = "org.sandbox0.xtask.owner";

/// The process that made a container: the kernel's boot id and the pid namespace (together:
/// which pid numbering the pid belongs to; a container of its own has another namespace, a
/// reboot another boot id), the pid and the process's start time (clock ticks since boot,
/// `/proc/<pid>/stat` field 22), so a reused pid is not taken for the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub boot_id: String,
    pub pid_namespace: String,
    pub pid: u32,
    pub start_time: u64,
}

impl Owner {
    /// `<boot id>/<pid namespace>/<pid>/<start time>`, the label's value.
    pub fn label(&self) -> String {
        format!(
            "{}/{}/{}/{}",
            self.boot_id, self.pid_namespace, self.pid, self.start_time
        )
    }

    /// The label's value read back; `None` for anything else. Pure.
    pub fn parse(label: &str) -> Option<Owner> {
        let mut parts = label.split('/');
        let owner = Owner {
            boot_id: parts.next().filter(|s| !s.is_empty())?.to_string(),
            pid_namespace: parts.next().filter(|s| !s.is_empty())?.to_string(),
            pid: parts.next()?.parse().ok()?,
            start_time: parts.next()?.parse().ok()?,
        };
        parts.next().is_none().then_some(owner)
    }

    /// This process, from /proc; `None` where /proc does not say (then nothing is labelled
    /// with an owner, and nothing of ours is ever taken for dead).
    pub fn of_this_process() -> Option<Owner> {
        let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        let pid_namespace = std::fs::read_link("/proc/self/ns/pid").ok()?;
        let pid = std::process::id();
        Some(Owner {
            boot_id: boot_id.trim().to_string(),
            pid_namespace: pid_namespace.to_string_lossy().replace('/', "_"),
            pid,
            start_time: start_time_of(pid)?,
        })
    }
}

/// The start time of process `pid` in this pid namespace, `None` when there is no such
/// process. The edge of [`is_dead_run`].
pub fn start_time_of(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat_start_time(&stat)
}

/// Field 22 of a `/proc/<pid>/stat` line; the command (field 2) may hold spaces and
/// parentheses, so fields are counted after its last `)`. Pure.
fn stat_start_time(stat: &str) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether a container labelled `owner` is the leftover of a run that ended: only when the
/// label is ours to judge (this boot, this pid namespace) and no process with that pid and
/// start time exists (`start_time_of`). A container of another host, another namespace (a
/// run inside a container), or without a readable label is never taken for dead. Pure.
pub fn is_dead_run(owner: &str, here: &Owner, start_time_of: impl Fn(u32) -> Option<u64>) -> bool {
    let Some(owner) = Owner::parse(owner) else {
        return false;
    };
    owner.boot_id == here.boot_id
        && owner.pid_namespace == here.pid_namespace
        && start_time_of(owner.pid) != Some(owner.start_time)
}

/// The labels of everything this run creates: its run id and, when known, its process.
fn labels_of(run_id: &str) -> HashMap<String, String> {
    let mut labels = HashMap::from([(RUN_LABEL.to_string(), run_id.to_string())]);
    if let Some(owner) = Owner::of_this_process() {
        labels.insert(OWNER_LABEL.to_string(), owner.label());
    }
    labels
}

/// Removes the containers and volumes that runs whose process is gone left behind (a release
/// killed with SIGKILL cannot remove its own); returns how many. Never touches a live run's,
/// another host's or anything without [`OWNER_LABEL`] ([`is_dead_run`]). With `dry_run`,
/// only counts.
pub async fn remove_dead_runs(docker: &Docker, dry_run: bool) -> Result<usize> {
    let Some(here) = Owner::of_this_process() else {
        return Ok(0);
    };
    let dead = |labels: Option<&HashMap<String, String>>| {
        labels
            .and_then(|l| l.get(OWNER_LABEL))
            .is_some_and(|owner| is_dead_run(owner, &here, start_time_of))
    };
    let (containers, volumes) = labelled(docker, OWNER_LABEL, dead).await?;
    if !dry_run {
        for id in &containers {
            remove_container(docker, id).await?;
        }
        for name in &volumes {
            remove_volume(docker, name).await?;
        }
    }
    Ok(containers.len() + volumes.len())
}

/// What to tell someone whose engine cannot be reached.
const SETUP_HINT: &str = "run `bash scripts/setup-host.sh` (installs and starts dockerd)";

/// Connects to the local engine (DOCKER_HOST or the default socket) and negotiates the API
/// version down to what the engine speaks.
/// `settings` names the engine in the error (bollard itself reads `DOCKER_HOST` to connect).
pub async fn connect(settings: &crate::settings::Settings) -> Result<Docker> {
    let docker = Docker::connect_with_defaults()
        .with_context(|| format!("cannot connect to the Docker engine; {SETUP_HINT}"))?
        // Builds and image exports stream for minutes; bollard's timeout covers waiting for
        // the response head only, but a slow engine under emulation can take long for that too.
        .with_timeout(Duration::from_secs(900));
    let docker = docker.negotiate_version().await.with_context(|| {
        format!(
            "the Docker engine at {} does not answer; {SETUP_HINT}",
            settings
                .docker_host
                .as_deref()
                .unwrap_or("unix:///var/run/docker.sock")
        )
    })?;
    Ok(docker)
}

/// Where an engine keeps images, which decides what its image ids are and what it loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ImageStore {
    /// The graph-driver store (overlay2): an image's id is its config's digest; a
    /// `docker load` may omit layers the engine holds.
    Classic,
    /// The containerd image store (`features.containerd-snapshotter`, the default of Docker 29
    /// and Docker Desktop): an image's id is its manifest's digest; a docker-archive that omits
    /// a layer is refused.
    Containerd,
}

/// The engine as `/info` describes it: what every engine error names.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct EngineInfo {
    pub version: String,
    pub driver: String,
    pub store: ImageStore,
}

impl std::fmt::Display for EngineInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let store = match self.store {
            ImageStore::Classic => "classic image store",
            ImageStore::Containerd => "containerd image store",
        };
        write!(f, "Docker {} ({store}, {})", self.version, self.driver)
    }
}

/// The store of an engine whose `/info` reports `driver_status`: moby's containerd image
/// service reports `["driver-type", "io.containerd.snapshotter.v1"]` there
/// (daemon/containerd/service.go, moby 24 to 29), the graph drivers their own keys. Pure.
pub fn image_store(driver_status: &[Vec<String>]) -> ImageStore {
    let containerd = driver_status.iter().any(|pair| {
        pair.first().map(String::as_str) == Some("driver-type")
            && pair
                .get(1)
                .is_some_and(|v| v.starts_with("io.containerd.snapshotter"))
    });
    match containerd {
        true => ImageStore::Containerd,
        false => ImageStore::Classic,
    }
}

/// Reads the engine's version and image store from `/info`.
pub async fn engine_info(docker: &Docker) -> Result<EngineInfo> {
    let info = docker
        .info()
        .await
        .context("the Docker engine does not answer /info")?;
    Ok(EngineInfo {
        version: info.server_version.unwrap_or_else(|| "?".into()),
        driver: info.driver.unwrap_or_else(|| "?".into()),
        store: image_store(&info.driver_status.unwrap_or_default()),
    })
}

/// Connects to the engine at `host` (`unix:///…`, as DOCKER_HOST takes it), negotiated as
/// [`connect`] does: for callers that talk to several engines (the tests of every engine).
pub async fn connect_to(host: &str) -> Result<Docker> {
    let path = host.strip_prefix("unix://").unwrap_or(host);
    let docker = Docker::connect_with_unix(path, 900, bollard::API_DEFAULT_VERSION)
        .with_context(|| format!("cannot connect to the Docker engine at {host}"))?;
    docker
        .negotiate_version()
        .await
        .with_context(|| format!("the Docker engine at {host} does not answer"))
}

/// A fresh id for one command run, used as the value of [`RUN_LABEL`].
pub fn new_run_id(command: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{command}-{}-{nanos}", std::process::id())
}

fn is_not_found(err: &DockerError) -> bool {
    matches!(
        err,
        DockerError::DockerResponseServerError {
            status_code: 404,
            ..
        }
    )
}

/// The image, or `None` when the engine does not have it.
pub async fn inspect_image(docker: &Docker, reference: &str) -> Result<Option<ImageInspect>> {
    match docker.inspect_image(reference).await {
        Ok(image) => Ok(Some(image)),
        Err(err) if is_not_found(&err) => Ok(None),
        Err(err) => Err(err).with_context(|| format!("cannot inspect image {reference}")),
    }
}

/// `os/architecture` of an inspected image, as the engine reports it.
pub fn image_platform(image: &ImageInspect) -> String {
    format!(
        "{}/{}",
        image.os.as_deref().unwrap_or("?"),
        image.architecture.as_deref().unwrap_or("?")
    )
}

/// Fails unless the image's config says `platform`.
pub(crate) fn ensure_image_platform(
    reference: &str,
    image: &ImageInspect,
    platform: Platform,
) -> Result<()> {
    let found = image_platform(image);
    if found != platform.to_string() {
        bail!("image {reference} is {found}, not {platform}");
    }
    Ok(())
}

/// A container to run: the image's own environment plus `env`, no TTY.
#[derive(Debug, Clone)]
pub(crate) struct ContainerSpec {
    pub image: String,
    pub cmd: Vec<String>,
    pub env: Vec<String>,
    pub user: Option<String>,
    pub platform: Option<Platform>,
    pub run_id: String,
    /// Keep stdin open (attached) so the caller can write to it.
    pub stdin: bool,
    /// `--security-opt` values, e.g. `seccomp=<profile JSON>` (what `docker run --security-opt
    /// seccomp=FILE` sends: the file's content); empty for the engine's defaults.
    pub security_opt: Vec<String>,
    /// The container's host name; the engine's default (its id's prefix) when `None`.
    pub hostname: Option<String>,
    /// Volumes to mount, `volume:/path` (the volume must exist).
    pub binds: Vec<String>,
    /// `--read-only`: the image's filesystem cannot be written, only `binds` and `tmpfs`.
    pub read_only_rootfs: bool,
    /// `--tmpfs PATH` mounts, with the engine's default options.
    pub tmpfs: Vec<String>,
}

impl ContainerSpec {
    pub(crate) fn new(image: &str, run_id: &str, cmd: &[&str]) -> ContainerSpec {
        ContainerSpec {
            image: image.to_string(),
            cmd: cmd.iter().map(|s| s.to_string()).collect(),
            env: Vec::new(),
            user: None,
            platform: None,
            run_id: run_id.to_string(),
            stdin: false,
            security_opt: Vec::new(),
            hostname: None,
            binds: Vec::new(),
            read_only_rootfs: false,
            tmpfs: Vec::new(),
        }
    }
}

/// Owns one container: [`ContainerGuard::remove`] removes it; if the guard is dropped without
/// that (a timeout dropped the future, a panic unwound), removal is spawned on the runtime.
pub(crate) struct ContainerGuard {
    docker: Docker,
    id: String,
    armed: bool,
}

impl ContainerGuard {
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    pub(crate) async fn remove(mut self) -> Result<()> {
        self.armed = false;
        remove_container(&self.docker, &self.id).await
    }
}

impl Drop for ContainerGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let docker = self.docker.clone();
        let id = std::mem::take(&mut self.id);
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let _ = remove_container(&docker, &id).await;
            });
        }
    }
}

/// Removes a container, killing it first when it runs; a container that is already gone is fine.
async fn remove_container(docker: &Docker, id: &str) -> Result<()> {
    let options = RemoveContainerOptionsBuilder::default()
        .force(true)
        .v(true)
        .build();
    match docker.remove_container(id, Some(options)).await {
        Ok(()) => Ok(()),
        Err(err) if is_not_found(&err) => Ok(()),
        // 409: removal already in progress (the drop guard raced an explicit removal).
        Err(DockerError::DockerResponseServerError {
            status_code: 409, ..
        }) => Ok(()),
        Err(err) => Err(err).with_context(|| format!("cannot remove container {id}")),
    }
}

/// The containers (ids, running or not) and volumes (names) that match the label filter
/// `filter` (`KEY` or `KEY=VALUE`) and whose labels `keep` accepts.
async fn labelled(
    docker: &Docker,
    filter: &str,
    keep: impl Fn(Option<&HashMap<String, String>>) -> bool,
) -> Result<(Vec<String>, Vec<String>)> {
    let filters = HashMap::from([("label", vec![filter.to_string()])]);
    let options = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    let containers = docker
        .list_containers(Some(options))
        .await
        .context("cannot list containers")?
        .into_iter()
        .filter(|c| keep(c.labels.as_ref()))
        .filter_map(|c| c.id)
        .collect();
    let options = ListVolumesOptionsBuilder::default()
        .filters(&filters)
        .build();
    let volumes = docker
        .list_volumes(Some(options))
        .await
        .context("cannot list volumes")?
        .volumes
        .unwrap_or_default()
        .into_iter()
        .filter(|v| keep(Some(&v.labels)))
        .map(|v| v.name)
        .collect();
    Ok((containers, volumes))
}

/// Removes every container of one run, then its volumes; returns how many there were.
pub(crate) async fn remove_labelled(docker: &Docker, run_id: &str) -> Result<usize> {
    let (ids, volumes) = labelled(docker, &format!("{RUN_LABEL}={run_id}"), |_| true).await?;
    for id in &ids {
        remove_container(docker, id).await?;
    }
    for volume in &volumes {
        remove_volume(docker, volume).await?;
    }
    Ok(ids.len() + volumes.len())
}

/// Creates an empty named volume labelled with the run, so [`remove_labelled`] removes it too.
pub(crate) async fn create_volume(docker: &Docker, run_id: &str, name: &str) -> Result<()> {
    let request = VolumeCreateRequest {
        name: Some(name.to_string()),
        labels: Some(labels_of(run_id)),
        ..Default::default()
    };
    docker
        .create_volume(request)
        .await
        .with_context(|| format!("cannot create the volume {name}"))?;
    Ok(())
}

/// Removes a volume; one that is already gone is fine.
pub(crate) async fn remove_volume(docker: &Docker, name: &str) -> Result<()> {
    let options = RemoveVolumeOptionsBuilder::default().force(true).build();
    match docker.remove_volume(name, Some(options)).await {
        Ok(()) => Ok(()),
        Err(err) if is_not_found(&err) => Ok(()),
        Err(err) => Err(err).with_context(|| format!("cannot remove the volume {name}")),
    }
}

/// Creates the container (not started) and returns its guard.
async fn create(docker: &Docker, spec: &ContainerSpec) -> Result<ContainerGuard> {
    let mut options = CreateContainerOptionsBuilder::default();
    if let Some(platform) = spec.platform {
        options = options.platform(&platform.to_string());
    }
    let body = ContainerCreateBody {
        image: Some(spec.image.clone()),
        cmd: Some(spec.cmd.clone()),
        env: Some(spec.env.clone()),
        user: spec.user.clone(),
        hostname: spec.hostname.clone(),
        tty: Some(false),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        attach_stdin: Some(spec.stdin),
        open_stdin: Some(spec.stdin),
        stdin_once: Some(spec.stdin),
        labels: Some(labels_of(&spec.run_id)),
        host_config: Some(HostConfig {
            // Chromium needs more than Docker's default 64 MB of /dev/shm.
            shm_size: Some(512 * 1024 * 1024),
            init: Some(true),
            security_opt: (!spec.security_opt.is_empty()).then(|| spec.security_opt.clone()),
            binds: (!spec.binds.is_empty()).then(|| spec.binds.clone()),
            readonly_rootfs: spec.read_only_rootfs.then_some(true),
            tmpfs: (!spec.tmpfs.is_empty()).then(|| {
                spec.tmpfs
                    .iter()
                    .map(|path| (path.clone(), String::new()))
                    .collect()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let created = docker
        .create_container(Some(options.build()), body)
        .await
        .with_context(|| format!("cannot create a container from image {}", spec.image))?;
    Ok(ContainerGuard {
        docker: docker.clone(),
        id: created.id,
        armed: true,
    })
}

/// A started container with its stdio attached over the API (pipes, no TTY).
pub(crate) struct Attached {
    pub guard: ContainerGuard,
    pub output: OutputStream,
    pub input: InputSink,
}

/// Creates, attaches to and starts a container. Attaching before the start is what makes the
/// first bytes of output reach us.
pub(crate) async fn start_attached(docker: &Docker, spec: &ContainerSpec) -> Result<Attached> {
    let guard = create(docker, spec).await?;
    match attach_and_start(docker, spec, guard.id()).await {
        Ok((output, input)) => Ok(Attached {
            guard,
            output,
            input,
        }),
        Err(err) => {
            // E.g. the command does not exist in the image: the container was made, remove it.
            guard.remove().await.ok();
            Err(err)
        }
    }
}

pub(crate) type OutputStream =
    std::pin::Pin<Box<dyn Stream<Item = Result<LogOutput, DockerError>> + Send>>;
pub(crate) type InputSink = std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>;

async fn attach_and_start(
    docker: &Docker,
    spec: &ContainerSpec,
    id: &str,
) -> Result<(OutputStream, InputSink)> {
    let options = AttachContainerOptionsBuilder::default()
        .stdin(spec.stdin)
        .stdout(true)
        .stderr(true)
        .stream(true)
        .logs(false)
        .build();
    let attached = docker
        .attach_container(id, Some(options))
        .await
        .with_context(|| format!("cannot attach to a container of {}", spec.image))?;
    docker.start_container(id, None).await.with_context(|| {
        format!(
            "cannot start `{}` in a container of {}",
            spec.cmd.join(" "),
            spec.image
        )
    })?;
    Ok((attached.output, attached.input))
}

/// What a container printed and how it ended.
#[derive(Debug, Clone, Default)]
pub(crate) struct ContainerOutput {
    pub stdout: String,
    pub stderr: String,
    /// `None` when it was still running at the deadline.
    pub exit_code: Option<i64>,
    pub timed_out: bool,
}

impl ContainerOutput {
    pub(crate) fn success(&self) -> bool {
        self.exit_code == Some(0)
    }

    /// stdout and stderr together, for reports.
    pub(crate) fn combined(&self) -> String {
        let mut text = self.stdout.trim_end().to_string();
        let stderr = self.stderr.trim_end();
        if !stderr.is_empty() {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(stderr);
        }
        if self.timed_out {
            text.push_str("\n(timed out)");
        } else if let Some(code) = self.exit_code.filter(|c| *c != 0) {
            text.push_str(&format!("\n(exit code {code})"));
        }
        text
    }
}

/// Runs a container to its end (or `timeout`), stdin closed, and removes it whatever happens.
pub(crate) async fn run(
    docker: &Docker,
    spec: &ContainerSpec,
    timeout: Duration,
) -> Result<ContainerOutput> {
    let mut spec = spec.clone();
    spec.stdin = false;
    // The input half stays bound to the end, as the attach connection's other half.
    let Attached {
        guard,
        mut output,
        input: _input,
    } = start_attached(docker, &spec).await?;
    let result = async {
        let mut collected = ContainerOutput::default();
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                item = output.next() => match item {
                    Some(Ok(LogOutput::StdOut { message })) | Some(Ok(LogOutput::Console { message })) => {
                        collected.stdout.push_str(&String::from_utf8_lossy(&message));
                    }
                    Some(Ok(LogOutput::StdErr { message })) => {
                        collected.stderr.push_str(&String::from_utf8_lossy(&message));
                    }
                    Some(Ok(LogOutput::StdIn { .. })) => {}
                    Some(Err(err)) => return Err(anyhow!(err).context("reading the container's output")),
                    None => break,
                },
                _ = &mut deadline => {
                    collected.timed_out = true;
                    return Ok(collected);
                }
            }
        }
        collected.exit_code = Some(wait_exit_code(docker, guard.id()).await?);
        Ok(collected)
    }
    .await;
    let removed = guard.remove().await;
    let collected = result?;
    removed?;
    Ok(collected)
}

/// The exit code of a container that has stopped (or stops soon).
async fn wait_exit_code(docker: &Docker, id: &str) -> Result<i64> {
    let mut wait = docker.wait_container(id, None::<WaitContainerOptions>);
    match wait.next().await {
        Some(Ok(response)) => Ok(response.status_code),
        Some(Err(DockerError::DockerContainerWaitError { code, .. })) => Ok(code),
        Some(Err(err)) => Err(err).with_context(|| format!("cannot wait for container {id}")),
        None => bail!("the engine ended the wait for container {id} without a status"),
    }
}

/// The regular files below `path` inside an image, read from a created (never started)
/// container, so it works for any architecture without emulation. Returns (path, content).
pub(crate) async fn read_image_files(
    docker: &Docker,
    image: &str,
    run_id: &str,
    path: &str,
) -> Result<Vec<(String, Vec<u8>)>> {
    let spec = ContainerSpec::new(image, run_id, &["/nonexistent"]);
    let guard = create(docker, &spec).await?;
    let options = DownloadFromContainerOptionsBuilder::default()
        .path(path)
        .build();
    let collected: Result<Vec<Bytes>> = docker
        .download_from_container(guard.id(), Some(options))
        .map(|chunk| chunk.with_context(|| format!("cannot read {path} from image {image}")))
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect();
    guard.remove().await?;
    let archive: Vec<u8> = collected?.concat();
    let mut files = Vec::new();
    let mut tar = tar::Archive::new(archive.as_slice());
    for entry in tar.entries().context("reading a container archive")? {
        let mut entry = entry.context("reading a container archive")?;
        if entry.header().entry_type().is_file() {
            let name = entry.path()?.to_string_lossy().into_owned();
            let mut content = Vec::new();
            entry.read_to_end(&mut content)?;
            files.push((name, content));
        }
    }
    Ok(files)
}

/// The tree at `path` inside `image` as the archive API sends it (`docker cp`: a tar whose
/// entries sit below the tree's own name), handed to `consume` on a blocking thread. Read from
/// a created, never started, container, so it works for any architecture without emulation.
pub(crate) async fn read_image_tree<T: Send + 'static>(
    docker: &Docker,
    image: &str,
    run_id: &str,
    path: &str,
    consume: impl FnOnce(&mut dyn Read) -> Result<T> + Send + 'static,
) -> Result<T> {
    let spec = ContainerSpec::new(image, run_id, &["/nonexistent"]);
    let guard = create(docker, &spec).await?;
    let options = DownloadFromContainerOptionsBuilder::default()
        .path(path)
        .build();
    let mut tree = blocking_reader(docker.download_from_container(guard.id(), Some(options)));
    let consumed = tokio::task::spawn_blocking(move || consume(&mut tree))
        .await
        .context("the thread reading an image's tree panicked");
    guard.remove().await?;
    consumed?.with_context(|| format!("cannot read {path} from image {image}"))
}

// The one stream bridge lives with the HTTP policy; the export stream uses it too.
pub(crate) use template_verify::http::blocking_reader;

/// Loads a `docker save`-shaped archive arriving as `chunks` (`docker load`); `what` names it
/// in errors.
pub(crate) async fn load_stream(
    docker: &Docker,
    chunks: impl Stream<Item = std::io::Result<Bytes>> + Send + 'static,
    what: &str,
    progress: &crate::util::Progress,
) -> Result<()> {
    let options = bollard::query_parameters::ImportImageOptionsBuilder::default()
        .quiet(false)
        .build();
    let mut stream = std::pin::pin!(docker.import_image_stream(options, chunks, None));
    while let Some(item) = stream.next().await {
        let info = item.with_context(|| format!("the engine refused the image archive {what}"))?;
        if let Some(line) = info
            .stream
            .as_deref()
            .map(str::trim)
            .filter(|l| !l.is_empty())
        {
            progress.step(line);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combined_output_names_how_it_ended() {
        let out = ContainerOutput {
            stdout: "a\n".into(),
            stderr: "b\n".into(),
            exit_code: Some(3),
            timed_out: false,
        };
        assert_eq!(out.combined(), "a\nb\n(exit code 3)");
        assert!(!out.success());
        let out = ContainerOutput {
            timed_out: true,
            ..Default::default()
        };
        assert_eq!(out.combined(), "\n(timed out)");
    }

    /// `/info`'s `DriverStatus` as docker.io 28.5.2 reports it, classic and containerd store
    /// (scripts/nested-engines.sh start prints both).
    #[test]
    fn the_store_is_read_from_the_driver_status() {
        let pairs = |v: &[[&str; 2]]| -> Vec<Vec<String>> {
            v.iter()
                .map(|p| p.iter().map(|s| s.to_string()).collect())
                .collect()
        };
        let classic = pairs(&[
            ["Backing Filesystem", "extfs"],
            ["Supports d_type", "true"],
            ["Native Overlay Diff", "true"],
        ]);
        let containerd = pairs(&[["driver-type", "io.containerd.snapshotter.v1"]]);
        assert_eq!(image_store(&classic), ImageStore::Classic);
        assert_eq!(image_store(&[]), ImageStore::Classic);
        assert_eq!(image_store(&containerd), ImageStore::Containerd);
        let info = EngineInfo {
            version: "28.5.2".into(),
            driver: "overlayfs".into(),
            store: ImageStore::Containerd,
        };
        assert_eq!(
            info.to_string(),
            "Docker 28.5.2 (containerd image store, overlayfs)"
        );
    }

    fn here() -> Owner {
        Owner {
            boot_id: "b1".into(),
            pid_namespace: "pid:[4026531836]".into(),
            pid: 100,
            start_time: 5000,
        }
    }

    #[test]
    fn only_runs_of_this_boot_and_namespace_whose_process_is_gone_are_dead() {
        let here = here();
        let run = |pid: u32, start: u64| {
            Owner {
                pid,
                start_time: start,
                ..here.clone()
            }
            .label()
        };
        // Process 200 runs, started at tick 7000.
        let alive = |pid: u32| (pid == 200).then_some(7000);
        assert!(!is_dead_run(&run(200, 7000), &here, alive), "a live run");
        assert!(is_dead_run(&run(300, 7000), &here, alive), "pid gone");
        assert!(is_dead_run(&run(200, 6000), &here, alive), "pid reused");
        let other_boot = Owner {
            boot_id: "b0".into(),
            pid: 300,
            ..here.clone()
        };
        assert!(!is_dead_run(&other_boot.label(), &here, alive));
        let other_namespace = Owner {
            pid_namespace: "pid:[4026532999]".into(),
            pid: 300,
            ..here.clone()
        };
        assert!(!is_dead_run(&other_namespace.label(), &here, alive));
        for unreadable in ["", "smoke-300-1", "b1/pid:[4026531836]/300", "b1/x/300/1/2"] {
            assert!(!is_dead_run(unreadable, &here, alive), "{unreadable}");
        }
    }

    #[test]
    fn owner_labels_round_trip_and_this_process_is_alive() {
        assert_eq!(Owner::parse(&here().label()), Some(here()));
        let me = Owner::of_this_process().expect("/proc says who we are");
        assert!(!is_dead_run(&me.label(), &me, start_time_of));
        assert_eq!(start_time_of(me.pid), Some(me.start_time));
    }

    #[test]
    fn the_start_time_is_counted_after_the_command() {
        let stat = "42 (a) b (c) S 1 42 42 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 98765 1 2";
        assert_eq!(stat_start_time(stat), Some(98765));
        assert_eq!(stat_start_time("42 (a) S 1"), None);
    }

    #[test]
    fn run_ids_differ() {
        assert_ne!(new_run_id("smoke"), new_run_id("smoke"));
    }

    #[tokio::test]
    async fn stream_reader_reassembles_chunks() {
        let chunks: Vec<Result<Bytes, String>> = vec![
            Ok(Bytes::from_static(b"hello ")),
            Ok(Bytes::new()),
            Ok(Bytes::from_static(b"world")),
        ];
        let mut reader = blocking_reader(futures_util::stream::iter(chunks));
        let text = tokio::task::spawn_blocking(move || {
            let mut s = String::new();
            reader.read_to_string(&mut s).map(|_| s)
        })
        .await
        .unwrap()
        .unwrap();
        assert_eq!(text, "hello world");
    }

    #[tokio::test]
    async fn stream_reader_passes_errors_on() {
        let chunks: Vec<Result<Bytes, String>> =
            vec![Ok(Bytes::from_static(b"x")), Err("engine went away".into())];
        let mut reader = blocking_reader(futures_util::stream::iter(chunks));
        let err = tokio::task::spawn_blocking(move || {
            let mut v = Vec::new();
            reader.read_to_end(&mut v)
        })
        .await
        .unwrap()
        .unwrap_err();
        assert!(err.to_string().contains("engine went away"));
    }
}
