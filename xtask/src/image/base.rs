//! `cargo xtask base`: the local base image, made from Debian's packages on a machine that
//! reaches no container registry.
//!
//! mmdebstrap writes a minimal Debian root filesystem as a tar (cached under `.xtask/base/`,
//! about 20 s for amd64 and 3 min for arm64 under qemu). That tar becomes the single layer of
//! a docker-archive whose image config (oci-spec) states the right OS and architecture; the
//! engine loads it through the API. `docker import` cannot be used: on Docker 20.10 it records
//! the host's architecture whatever the rootfs holds.
//!
//! The archive format is docker-archive (`manifest.json` + config + layer) because Docker 20.10
//! loads only that; newer engines load it as well.

use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};

use anyhow::{bail, Context, Result};
use oci_spec::image::{
    Arch, ConfigBuilder, HistoryBuilder, ImageConfiguration, ImageConfigurationBuilder, Os,
    RootFsBuilder,
};
use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

use crate::image::canonicalize::{self, LoadLayer};
use crate::image::engine;
use crate::image::identity::{self, ManifestRecords};
use crate::oci::canonical::CanonicalLayer;
use crate::util::{atomic_write, print_json, Progress};
use template_formats::manifest::{Manifest, Platform};

/// Where root filesystems and archives are cached: the state directory `.xtask/base`.
pub(crate) const CACHE_DIR: &str = "base";

/// The tag of the local base image for a suite and platform, e.g.
/// `coding-agent-base:bookworm-amd64`. `cargo xtask build` uses it by default.
pub fn image_ref(suite: &str, platform: Platform) -> String {
    format!("coding-agent-base:{suite}-{}", platform.arch())
}

/// Everything `base` is going to do, decided before any of it happens.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct BasePlan {
    pub image: String,
    pub platform: Platform,
    pub suite: String,
    /// The cached root filesystem tar.
    pub rootfs: PathBuf,
    /// The docker-archive that is loaded into the engine.
    pub archive: PathBuf,
    pub mmdebstrap: Vec<String>,
    /// The rootfs is made for another CPU, so mmdebstrap's second stage runs under qemu.
    pub emulated: bool,
    /// The manifest's `image.source_date_epoch`: mmdebstrap's and the config's time.
    pub source_date_epoch: u64,
}

/// Debian's archive keyring. Passed explicitly: on Ubuntu, mmdebstrap neither depends on
/// nor recommends `debian-archive-keyring`, and without it apt in the bootstrap fails with
/// NO_PUBKEY.
const DEBIAN_KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";

/// Who runs `base`: mmdebstrap needs root (its unshare mode is blocked by Ubuntu 24.04's
/// AppArmor, and fakechroot is not installed on GitHub's runners), so a non-root user runs
/// it through passwordless sudo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Privilege {
    Root,
    Sudo,
}

impl Privilege {
    pub(crate) fn current() -> Privilege {
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            Privilege::Root
        } else {
            Privilege::Sudo
        }
    }
}

pub(crate) fn plan(
    layout: &crate::layout::Layout,
    suite: &str,
    platform: Platform,
    host: Option<Platform>,
    privilege: Privilege,
    source_date_epoch: u64,
) -> BasePlan {
    // The epoch is in the cache's name: a root filesystem made for another epoch is not reused.
    let stem = format!("{suite}-{}-{source_date_epoch}", platform.arch());
    let cache = layout.state(CACHE_DIR);
    let rootfs = cache.join(format!("{stem}.rootfs.tar"));
    let mut mmdebstrap = match privilege {
        Privilege::Root => vec![],
        // -n: fail at once instead of asking for a password nobody can type in CI.
        Privilege::Sudo => vec!["sudo".to_string(), "-n".to_string(), "--".to_string()],
    };
    mmdebstrap.extend([
        // mmdebstrap makes the same root filesystem from the same mirror state when
        // SOURCE_DATE_EPOCH is set (times, /etc/shadow, no machine id); `env` because sudo
        // does not pass the caller's environment on.
        "env".to_string(),
        format!("SOURCE_DATE_EPOCH={source_date_epoch}"),
        "mmdebstrap".to_string(),
        "--mode=root".to_string(),
        format!("--keyring={DEBIAN_KEYRING}"),
        "--variant=minbase".to_string(),
        "--include=ca-certificates".to_string(),
        format!("--architectures={}", platform.arch()),
        // Debian's own mirror over http: apt verifies the signed Release files, and http works
        // behind TLS-inspecting proxies without any CA configuration.
        suite.to_string(),
        // mmdebstrap picks the output format from the extension, so the partial file must end
        // in .tar as well; it is renamed into place when complete.
        cache
            .join(format!("{stem}.partial.tar"))
            .to_string_lossy()
            .into_owned(),
    ]);
    BasePlan {
        image: image_ref(suite, platform),
        platform,
        suite: suite.to_string(),
        archive: cache.join(format!("{stem}.docker-archive.tar")),
        rootfs,
        mmdebstrap,
        emulated: host != Some(platform),
        source_date_epoch,
    }
}

fn oci_arch(platform: Platform) -> Arch {
    match platform {
        Platform::LinuxAmd64 => Arch::Amd64,
        Platform::LinuxArm64 => Arch::ARM64,
    }
}

/// The image config of the base: one layer (`diff_id`, the sha256 of the rootfs tar), the
/// platform, Debian's default PATH, and deliberately no Cmd or Entrypoint, because the
/// template image must not inherit any.
fn image_config(
    platform: Platform,
    diff_id: &str,
    created: &str,
    created_by: &str,
) -> Result<ImageConfiguration> {
    let config = ConfigBuilder::default()
        .env(vec![
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_string(),
        ])
        .build()?;
    let rootfs = RootFsBuilder::default()
        .typ("layers")
        .diff_ids(vec![format!("sha256:{diff_id}")])
        .build()?;
    let history = HistoryBuilder::default()
        .created(created)
        .created_by(created_by)
        .comment("cargo xtask base")
        .build()?;
    let mut builder = ImageConfigurationBuilder::default()
        .created(created)
        .architecture(oci_arch(platform))
        .os(Os::Linux)
        .config(config)
        .rootfs(rootfs)
        .history(vec![history]);
    if platform == Platform::LinuxArm64 {
        builder = builder.variant("v8");
    }
    Ok(builder.build()?)
}

/// `manifest.json` of a docker-archive holding one image with one layer.
fn archive_manifest(config_file: &str, tag: &str, layer_file: &str) -> serde_json::Value {
    serde_json::json!([{
        "Config": config_file,
        "RepoTags": [tag],
        "Layers": [layer_file],
    }])
}

/// The JSON `--json` prints.
#[derive(Debug, Serialize)]
struct BaseReport<'a> {
    image: &'a str,
    id: Option<String>,
    platform: Platform,
    suite: &'a str,
    /// False when the image already existed and nothing was made.
    built: bool,
    emulated: bool,
    dry_run: bool,
    rootfs: &'a Path,
}

/// `cargo xtask base`: the platform and suite of the local base image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseRequest {
    pub platform: Platform,
    /// Debian suite of the root filesystem.
    pub suite: String,
    /// Rebuild even when the image already exists.
    pub rebuild: bool,
    pub dry_run: bool,
    pub json: bool,
}

/// The suite `--suite` defaults to.
pub const DEFAULT_SUITE: &str = "bookworm";

impl BaseRequest {
    /// This request as the command line that parses back into it (the release's steps run
    /// their children this way; a test in main.rs checks the round trip).
    pub fn to_args(&self) -> Vec<std::ffi::OsString> {
        // `--suite` only when it is not the default: clap's default (no environment
        // variable behind it) gives the same back, and the steps print as they always did.
        let suite = (self.suite != DEFAULT_SUITE).then_some(&self.suite);
        crate::util::Argv::command(&["base"])
            .switch("--rebuild", self.rebuild)
            .switch("--dry-run", self.dry_run)
            .switch("--json", self.json)
            .value("--platform", self.platform.to_string())
            .option("--suite", suite)
            .into_vec()
    }
}

pub async fn run(request: BaseRequest, ctx: &crate::Context) -> Result<ExitCode> {
    let progress = Progress::default();
    let root = &ctx.layout;
    let manifest = Manifest::load(&root.manifest())?;
    let plan = plan(
        root,
        &request.suite,
        request.platform,
        Platform::host(),
        Privilege::current(),
        manifest.image.source_date_epoch,
    );
    let docker = engine::connect(&ctx.settings).await?;
    let existing = engine::inspect_image(&docker, &plan.image).await?;

    let report = |id: Option<String>, built: bool, dry_run: bool| BaseReport {
        image: &plan.image,
        id,
        platform: plan.platform,
        suite: &plan.suite,
        built,
        emulated: plan.emulated,
        dry_run,
        rootfs: &plan.rootfs,
    };

    // A base made for another epoch (or by a version of this tool that used the clock) would
    // make every image after it differ from a fresh machine's: it is made again.
    if let (Some(image), false) = (&existing, request.rebuild) {
        engine::ensure_image_platform(&plan.image, image, plan.platform).with_context(|| {
            format!(
                "remove it (docker rmi {}) or run with --rebuild",
                plan.image
            )
        })?;
        if made_at_epoch(image.created.as_deref(), plan.source_date_epoch) {
            progress.step(format!(
                "{} exists; nothing to do (--rebuild makes it again)",
                plan.image
            ));
            if request.json {
                let id = identity::tool_image_id(&docker, root, &plan.image, image).await?;
                print_json(&report(Some(id), false, request.dry_run))?;
            }
            return Ok(ExitCode::SUCCESS);
        }
        progress.step(format!(
            "{} exists but is dated {}, not the manifest's image.source_date_epoch ({}): it was \
             made another way, so it is made again",
            plan.image,
            image.created.as_deref().unwrap_or("(no date)"),
            plan.source_date_epoch
        ));
    }
    if request.dry_run {
        progress.step(format!(
            "would run `{}` (unless {} is cached) and load {} for {}",
            plan.mmdebstrap.join(" "),
            plan.rootfs.display(),
            plan.image,
            plan.platform
        ));
        if request.json {
            print_json(&report(None, false, true))?;
        }
        return Ok(ExitCode::SUCCESS);
    }

    // Two `base` runs of one platform on one machine share the cache (a build on each of two
    // engines, say): the first makes the root filesystem and the archive, the other waits for
    // it and then uses them, instead of both writing the same partial files.
    let _cache_lock = lock_cache_entry(&plan, &progress).await?;
    if request.rebuild || !plan.rootfs.exists() {
        make_rootfs(&plan, &progress).await?;
    } else {
        progress.step(format!(
            "using the cached root filesystem {}",
            plan.rootfs.display()
        ));
    }
    let (config, layer) = write_archive(&plan, &progress)?;
    // Loaded in the form the engine's store loads, and checked after loading (the config and
    // the layer): the same as the assembled image's load.
    let engine_info = engine::engine_info(&docker).await?;
    let records = ManifestRecords::new(&identity::records_dir(root));
    let layers = [LoadLayer {
        layer: &layer,
        file: Some(&plan.rootfs),
    }];
    canonicalize::load(
        &docker,
        &engine_info,
        &records,
        &plan.image,
        &config,
        &layers,
        &progress,
    )
    .await
    .with_context(|| format!("cannot load {} into {engine_info}", plan.image))?;

    let image = engine::inspect_image(&docker, &plan.image)
        .await?
        .with_context(|| {
            format!(
                "the engine loaded the archive but has no image {}",
                plan.image
            )
        })?;
    engine::ensure_image_platform(&plan.image, &image, plan.platform)?;
    progress.step(format!(
        "{} ready ({}, {})",
        plan.image,
        engine::image_platform(&image),
        image.id.as_deref().unwrap_or("?")
    ));
    if request.json {
        let id = identity::tool_image_id(&docker, root, &plan.image, &image).await?;
        print_json(&report(Some(id), true, false))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Is an image's `created` (RFC 3339, as the engine reports it) exactly the epoch?
fn made_at_epoch(created: Option<&str>, epoch: u64) -> bool {
    created
        .and_then(|c| chrono::DateTime::parse_from_rfc3339(c).ok())
        .is_some_and(|c| {
            i64::try_from(epoch)
                .is_ok_and(|e| c.timestamp() == e && c.timestamp_subsec_nanos() == 0)
        })
}

/// The keyring and, for a non-root user, passwordless sudo: checked first, so the error says
/// what to install or configure rather than what mmdebstrap tripped over.
async fn ensure_bootstrap_prerequisites(plan: &BasePlan) -> Result<()> {
    if !Path::new(DEBIAN_KEYRING).is_file() {
        bail!(
            "{DEBIAN_KEYRING} is missing: install Debian's archive keyring (`apt-get install \
             debian-archive-keyring`, also on Ubuntu; scripts/setup-host.sh does it)"
        );
    }
    if plan.mmdebstrap[0] == "sudo" {
        let sudo = tokio::process::Command::new("sudo")
            .args(["-n", "true"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await;
        if !sudo.is_ok_and(|s| s.success()) {
            bail!(
                "`cargo xtask base` runs mmdebstrap as root, and this user is not root and has \
                 no passwordless sudo (`sudo -n true` failed). Run it as root, or give the user \
                 passwordless sudo (GitHub's runners have it); mmdebstrap's rootless modes do \
                 not work on Ubuntu 24.04 (AppArmor blocks unprivileged user namespaces)"
            );
        }
    }
    Ok(())
}

/// Fails with what to do when the host cannot run the target's binaries.
pub(crate) fn ensure_emulation(platform: Platform) -> Result<()> {
    if !platform.is_emulated() {
        return Ok(());
    }
    let binfmt = match platform {
        Platform::LinuxArm64 => "/proc/sys/fs/binfmt_misc/qemu-aarch64",
        Platform::LinuxAmd64 => "/proc/sys/fs/binfmt_misc/qemu-x86_64",
    };
    let registered = std::fs::read_to_string(binfmt).unwrap_or_default();
    if !binfmt_runs_in_containers(&registered) {
        bail!(
            "{platform} binaries cannot run on this machine: {binfmt} is missing, disabled or \
             lacks the F flag; run `bash scripts/setup-host.sh` (qemu-user-static, binfmt-support)"
        );
    }
    Ok(())
}

/// Whether a `/proc/sys/fs/binfmt_misc/<name>` entry lets containers run foreign binaries:
/// enabled, and with the F flag (the interpreter is opened at registration, so it need not
/// exist inside the container's filesystem).
fn binfmt_runs_in_containers(entry: &str) -> bool {
    entry.starts_with("enabled")
        && entry
            .lines()
            .any(|l| l.starts_with("flags:") && l.contains('F'))
}

/// Holds `<stem>.lock` beside the cached root filesystem exclusively until dropped, waiting
/// (and saying so) while another process holds it.
async fn lock_cache_entry(plan: &BasePlan, progress: &Progress) -> Result<std::fs::File> {
    let lock_path = plan.rootfs.with_extension("lock");
    if let Some(dir) = lock_path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let waiting = format!(
        "waiting for another `base` run to finish with {}",
        plan.rootfs.display()
    );
    crate::util::lock_exclusive_waiting(&lock_path, &waiting, progress).await
}

/// What a bootstrap writes, from known sizes: the bookworm rootfs tars here were 180 MB
/// (amd64) and 204 MB (arm64); mmdebstrap's temp dir holds the unpacked tree and the packages
/// (about as much again, plus about 60 MB). Rounded up, so a nearly full disk fails early.
const ROOTFS_TAR_BYTES: u64 = 250_000_000;
const ROOTFS_TEMP_BYTES: u64 = 500_000_000;

async fn make_rootfs(plan: &BasePlan, progress: &Progress) -> Result<()> {
    if plan.emulated {
        ensure_emulation(plan.platform)?;
    }
    let dir = plan
        .rootfs
        .parent()
        .expect("the rootfs lives in the cache directory");
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let partial = PathBuf::from(
        plan.mmdebstrap
            .last()
            .expect("the output path is the last argument"),
    );
    let _ = std::fs::remove_file(&partial);
    ensure_bootstrap_prerequisites(plan).await?;
    crate::disk::ensure_space(
        &format!("the {} {} root filesystem", plan.suite, plan.platform),
        vec![
            crate::disk::Need {
                dir: std::env::temp_dir(),
                bytes: ROOTFS_TEMP_BYTES,
                what: "mmdebstrap's unpacked tree and packages".into(),
            },
            crate::disk::Need {
                dir: dir.to_path_buf(),
                bytes: ROOTFS_TAR_BYTES,
                what: "the rootfs tar".into(),
            },
        ],
    )?;
    progress.step(format!(
        "running {}{}",
        plan.mmdebstrap.join(" "),
        if plan.emulated {
            " (second stage under qemu: a few minutes)"
        } else {
            ""
        }
    ));
    let mut child = tokio::process::Command::new(&plan.mmdebstrap[0])
        .args(&plan.mmdebstrap[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("cannot run mmdebstrap; run `bash scripts/setup-host.sh` (installs mmdebstrap)")?;
    // mmdebstrap reports each phase on stderr; pass the lines on with the elapsed time, and
    // keep the last ones for the error message.
    let stderr = child.stderr.take().expect("stderr is piped");
    let mut lines = BufReader::new(stderr).lines();
    let mut tail: Vec<String> = Vec::new();
    while let Some(line) = lines.next_line().await? {
        progress.step(format!("mmdebstrap: {line}"));
        tail.push(line);
        if tail.len() > 20 {
            tail.remove(0);
        }
    }
    let mut stdout = String::new();
    if let Some(mut out) = child.stdout.take() {
        out.read_to_string(&mut stdout).await.ok();
    }
    let status = child.wait().await?;
    if !status.success() {
        let _ = std::fs::remove_file(&partial);
        bail!(
            "mmdebstrap failed ({status}) making the {} {} root filesystem:\n{}{}",
            plan.suite,
            plan.platform,
            tail.join("\n"),
            stdout
        );
    }
    std::fs::rename(&partial, &plan.rootfs).with_context(|| {
        format!(
            "cannot move {} to {}",
            partial.display(),
            plan.rootfs.display()
        )
    })?;
    Ok(())
}

/// The history line of the base layer: the mmdebstrap command without sudo and the output.
fn created_by(plan: &BasePlan) -> String {
    let start = plan
        .mmdebstrap
        .iter()
        .position(|a| a == "mmdebstrap")
        .unwrap_or(0);
    plan.mmdebstrap[start..plan.mmdebstrap.len() - 1].join(" ")
}

/// Writes the docker-archive next to the rootfs: the rootfs tar is the layer as it is.
/// Writes the docker-archive of the base (kept for people and other tools) and returns its
/// config and its one layer (the rootfs as mmdebstrap wrote it).
fn write_archive(plan: &BasePlan, progress: &Progress) -> Result<(Vec<u8>, CanonicalLayer)> {
    progress.step(format!("hashing {}", plan.rootfs.display()));
    let diff_id = sha256_of_file(&plan.rootfs)?;
    // The epoch, not the clock: the same root filesystem gives the same base image id.
    let created = crate::oci::canonical_config::epoch_time(plan.source_date_epoch)?;
    let config = image_config(plan.platform, &diff_id, &created, &created_by(plan))?;
    let config_json = config.to_string()?;
    let config_file = format!("{}.json", crate::util::sha256_hex(config_json.as_bytes()));
    let layer_file = format!("{diff_id}/layer.tar");
    let manifest = serde_json::to_vec(&archive_manifest(&config_file, &plan.image, &layer_file))?;

    let tmp = plan.archive.with_extension("tar.partial");
    let file =
        std::fs::File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    let mut tar = tar::Builder::new(std::io::BufWriter::new(file));
    append_bytes(&mut tar, "manifest.json", &manifest)?;
    append_bytes(&mut tar, &config_file, config_json.as_bytes())?;
    tar.append_path_with_name(&plan.rootfs, &layer_file)
        .with_context(|| format!("cannot add {} to the archive", plan.rootfs.display()))?;
    tar.into_inner()?
        .into_inner()
        .map_err(|e| e.into_error())?
        .sync_all()?;
    std::fs::rename(&tmp, &plan.archive)
        .with_context(|| format!("cannot write {}", plan.archive.display()))?;
    // Keep a readable copy of the config next to the archive, for people.
    atomic_write(
        &plan.archive.with_extension("config.json"),
        config.to_string_pretty()?.as_bytes(),
    )?;
    progress.step(format!(
        "wrote {} ({} config, layer sha256:{})",
        plan.archive.display(),
        plan.platform,
        &diff_id[..12]
    ));
    let layer = CanonicalLayer {
        diff_id: format!("sha256:{diff_id}").parse()?,
        size: std::fs::metadata(&plan.rootfs)
            .with_context(|| format!("cannot read {}", plan.rootfs.display()))?
            .len(),
        entries: 0,
    };
    Ok((config_json.into_bytes(), layer))
}

fn append_bytes<W: std::io::Write>(
    tar: &mut tar::Builder<W>,
    name: &str,
    bytes: &[u8],
) -> Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_size(bytes.len() as u64);
    header.set_mode(0o644);
    header.set_mtime(0);
    header.set_cksum();
    tar.append_data(&mut header, name, bytes)?;
    Ok(())
}

fn sha256_of_file(path: &Path) -> Result<String> {
    let mut file =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher)
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second `base` of one platform waits for the first to release the cache entry (the
    /// two used to write one partial file, and the second rename failed).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_second_base_waits_for_the_cache_entry_the_first_holds() {
        let dir = tempfile::tempdir().unwrap();
        let p = plan(
            &crate::layout::Layout::at(dir.path()),
            "bookworm",
            Platform::LinuxAmd64,
            Some(Platform::LinuxAmd64),
            Privilege::Root,
            1_767_225_600,
        );
        let progress = Progress::default();
        let first = lock_cache_entry(&p, &progress).await.unwrap();
        let second = {
            let p = p.clone();
            tokio::spawn(async move { lock_cache_entry(&p, &Progress::default()).await })
        };
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert!(
            !second.is_finished(),
            "the second took a lock the first holds"
        );
        drop(first);
        let second = tokio::time::timeout(std::time::Duration::from_secs(10), second)
            .await
            .expect("the second still waits after the first let go")
            .unwrap();
        assert!(second.is_ok());
        assert!(p.rootfs.with_extension("lock").exists());
    }

    #[test]
    fn plan_names_image_cache_and_architecture() {
        let p = plan(
            &crate::layout::Layout::at("/repo"),
            "bookworm",
            Platform::LinuxArm64,
            Some(Platform::LinuxAmd64),
            Privilege::Root,
            1_767_225_600,
        );
        assert_eq!(p.image, "coding-agent-base:bookworm-arm64");
        assert_eq!(
            p.rootfs,
            Path::new("/repo/.xtask/base/bookworm-arm64-1767225600.rootfs.tar")
        );
        assert!(p.emulated);
        assert!(p.mmdebstrap.contains(&"--architectures=arm64".to_string()));
        assert!(p.mmdebstrap.contains(&"--variant=minbase".to_string()));
        assert!(p.mmdebstrap.last().unwrap().ends_with(".partial.tar"));
        let native = plan(
            &crate::layout::Layout::at("/repo"),
            "bookworm",
            Platform::LinuxAmd64,
            Some(Platform::LinuxAmd64),
            Privilege::Sudo,
            1_767_225_600,
        );
        assert!(!native.emulated);
        assert_eq!(native.image, "coding-agent-base:bookworm-amd64");
        // A runner user goes through passwordless sudo, which drops the environment, so the
        // epoch goes through `env`; the keyring is always explicit.
        assert_eq!(
            native.mmdebstrap[..6],
            [
                "sudo",
                "-n",
                "--",
                "env",
                "SOURCE_DATE_EPOCH=1767225600",
                "mmdebstrap"
            ]
        );
        assert_eq!(
            p.mmdebstrap[..3],
            ["env", "SOURCE_DATE_EPOCH=1767225600", "mmdebstrap"]
        );
        for plan in [&p, &native] {
            assert!(plan
                .mmdebstrap
                .contains(&format!("--keyring={DEBIAN_KEYRING}")));
        }
    }

    #[test]
    fn only_a_base_dated_at_the_epoch_counts_as_made_for_it() {
        assert!(made_at_epoch(Some("2026-01-01T00:00:00Z"), 1_767_225_600));
        assert!(made_at_epoch(
            Some("2026-01-01T01:00:00+01:00"),
            1_767_225_600
        ));
        assert!(!made_at_epoch(Some("2026-11-30T10:39:45Z"), 1_767_225_600));
        assert!(!made_at_epoch(
            Some("2026-01-01T00:00:00.5Z"),
            1_767_225_600
        ));
        assert!(!made_at_epoch(Some("not a date"), 1_767_225_600));
        assert!(!made_at_epoch(None, 1_767_225_600));
    }

    #[test]
    fn config_states_the_platform_and_no_command() {
        let config = image_config(
            Platform::LinuxArm64,
            "ab",
            "2026-01-01T00:00:00Z",
            "mmdebstrap",
        )
        .unwrap();
        let json: serde_json::Value = serde_json::from_str(&config.to_string().unwrap()).unwrap();
        assert_eq!(json["architecture"], "arm64");
        assert_eq!(json["variant"], "v8");
        assert_eq!(json["os"], "linux");
        assert_eq!(json["rootfs"]["type"], "layers");
        assert_eq!(json["rootfs"]["diff_ids"][0], "sha256:ab");
        assert!(json["config"].get("Cmd").is_none());
        assert!(json["config"].get("Entrypoint").is_none());

        let amd = image_config(Platform::LinuxAmd64, "cd", "2026-01-01T00:00:00Z", "x").unwrap();
        let json: serde_json::Value = serde_json::from_str(&amd.to_string().unwrap()).unwrap();
        assert_eq!(json["architecture"], "amd64");
        assert!(json.get("variant").is_none());
    }

    #[test]
    fn archive_manifest_points_at_config_and_layer() {
        let m = archive_manifest("c.json", "coding-agent-base:bookworm-amd64", "d/layer.tar");
        assert_eq!(m[0]["Config"], "c.json");
        assert_eq!(m[0]["RepoTags"][0], "coding-agent-base:bookworm-amd64");
        assert_eq!(m[0]["Layers"][0], "d/layer.tar");
    }

    #[test]
    fn binfmt_entries_need_enabled_and_the_f_flag() {
        let entry = |state: &str, flags: &str| {
            format!(
                "{state}\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\nflags: {flags}\n\
                 offset 0\nmagic 7f454c460201010000000000000000000200b700\n"
            )
        };
        assert!(binfmt_runs_in_containers(&entry("enabled", "POCF")));
        assert!(binfmt_runs_in_containers(&entry("enabled", "F")));
        assert!(!binfmt_runs_in_containers(&entry("enabled", "POC")));
        assert!(!binfmt_runs_in_containers(&entry("disabled", "POCF")));
        assert!(!binfmt_runs_in_containers(""));
    }

    #[test]
    fn emulation_of_the_host_platform_needs_nothing() {
        if let Some(host) = Platform::host() {
            ensure_emulation(host).unwrap();
        }
    }
}
