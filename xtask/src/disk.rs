//! Free space before a heavy step: what the step will write, where, against what the
//! filesystems there have free, so a step fails before it starts (naming the directory, the
//! bytes needed and the bytes free) instead of with ENOSPC half-way through.
//!
//! [`judge`] decides (pure); [`space_of`] (statvfs through rustix, the edge) and
//! [`engine_root`] (the engine's `DockerRootDir`, when it is a path of this machine) measure.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

/// Something a step will write: `bytes` into `dir`, described by `what` ("the export of
/// coding-agent:abc").
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Need {
    pub dir: PathBuf,
    pub bytes: u64,
    pub what: String,
}

/// A directory's filesystem as statvfs saw it: which one (`device`) and what an unprivileged
/// writer may still use (`free`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Space {
    pub device: u64,
    pub free: u64,
}

/// Bytes as people read them: 2.3 GB, 512 MB, 40 kB (decimal units, as `df -H`).
pub(crate) fn human(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["kB", "MB", "GB", "TB"];
    if bytes < 1000 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1000.0;
    let mut unit = 0;
    while value >= 1000.0 && unit < UNITS.len() - 1 {
        value /= 1000.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// Whether `step` fits: needs on one filesystem add up (the export and the blobs of a publish
/// may share `/`), and each filesystem must have their sum free. `Err` names, per filesystem
/// that is short, each directory and what goes there, the bytes needed and free, and what to
/// do. Pure.
pub(crate) fn judge(step: &str, needs: &[(Need, Space)]) -> Result<(), String> {
    let mut by_device: BTreeMap<u64, (u64, u64, Vec<&Need>)> = BTreeMap::new();
    for (need, space) in needs {
        let entry = by_device
            .entry(space.device)
            .or_insert((0, space.free, Vec::new()));
        entry.0 = entry.0.saturating_add(need.bytes);
        entry.2.push(need);
    }
    let short: Vec<String> = by_device
        .values()
        .filter(|(needed, free, _)| needed > free)
        .map(|(needed, free, list)| {
            let parts: Vec<String> = list
                .iter()
                .map(|n| format!("{} ({}) in {}", human(n.bytes), n.what, n.dir.display()))
                .collect();
            format!(
                "needs {} free but the filesystem has {} ({free} bytes) free: {} ({needed} bytes)",
                human(*needed),
                human(*free),
                parts.join(" + "),
            )
        })
        .collect();
    if short.is_empty() {
        return Ok(());
    }
    Err(format!(
        "not enough disk space for {step}: {}. Free space there (old images: `docker image \
         prune`; the layer caches of other platforms in .xtask/layers), or point the directory \
         at a larger disk (TMPDIR for the temp dir, XTASK_LAYER_CACHE for the layer cache, the \
         engine's data-root in daemon.json)",
        short.join("; ")
    ))
}

/// statvfs of `dir`, or of its nearest existing ancestor (a step often creates the directory
/// it writes). The edge of this module.
pub(crate) fn space_of(dir: &Path) -> Result<Space> {
    use std::os::unix::fs::MetadataExt;
    let mut probe = dir;
    while !probe.exists() {
        match probe.parent() {
            Some(parent) => probe = parent,
            None => bail!("no ancestor of {} exists", dir.display()),
        }
    }
    let vfs = rustix::fs::statvfs(probe)
        .map_err(|e| anyhow::anyhow!("cannot statvfs {}: {e}", probe.display()))?;
    let device = std::fs::metadata(probe)
        .map_err(|e| anyhow::anyhow!("cannot stat {}: {e}", probe.display()))?
        .dev();
    Ok(Space {
        device,
        free: vfs.f_bavail.saturating_mul(vfs.f_frsize),
    })
}

/// Measures each need's directory and judges; the error is [`judge`]'s message.
pub(crate) fn ensure_space(step: &str, needs: Vec<Need>) -> Result<()> {
    let mut measured = Vec::with_capacity(needs.len());
    for need in needs {
        let space = space_of(&need.dir)?;
        measured.push((need, space));
    }
    judge(step, &measured).map_err(anyhow::Error::msg)
}

/// The engine's data root as a path of this machine, or why it is not one. The engine reports
/// `DockerRootDir` as a path of its own filesystem: that is ours only when we reach the engine
/// over a local socket and it runs on our host, not in a container of its own (a nested engine
/// has its own hostname, which `/info`'s `Name` reports) nor on another machine (`tcp://`,
/// `ssh://`). Then the check of the engine's space is skipped, and the caller says so. Pure.
pub(crate) fn engine_root(
    docker_host: Option<&str>,
    engine_name: Option<&str>,
    our_hostname: &str,
    root_dir: Option<&str>,
) -> Result<PathBuf, String> {
    if let Some(host) = docker_host.filter(|h| !h.is_empty()) {
        if !host.starts_with("unix://") {
            return Err(format!(
                "the engine is at {host}, another machine: its data root is not a local path"
            ));
        }
    }
    match engine_name {
        Some(name) if name == our_hostname => {}
        other => {
            return Err(format!(
                "the engine runs on host {:?}, not this one ({our_hostname}): a nested or \
                 remote engine, whose data root is not a local path",
                other.unwrap_or("?")
            ))
        }
    }
    match root_dir {
        Some(dir) if dir.starts_with('/') => Ok(PathBuf::from(dir)),
        _ => Err("the engine reports no DockerRootDir".into()),
    }
}

/// [`engine_root`] of the connected engine (its `/info`) from `docker_host` (the settings'
/// `DOCKER_HOST`, which bollard connected by) and this machine's hostname.
pub(crate) async fn engine_root_of(
    docker: &bollard::Docker,
    docker_host: Option<&str>,
) -> Result<PathBuf, String> {
    let info = docker
        .info()
        .await
        .map_err(|e| format!("the engine does not answer /info: {e}"))?;
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    engine_root(
        docker_host,
        info.name.as_deref(),
        &hostname,
        info.docker_root_dir.as_deref(),
    )
}

/// The needs of a step that makes the engine write `bytes` into its data root (an image
/// export goes through `<root>/tmp`): one need when the root is local, none (and a progress
/// line saying why) otherwise. `docker_host` is the settings' `DOCKER_HOST`.
pub(crate) async fn engine_need(
    docker: &bollard::Docker,
    docker_host: Option<&str>,
    bytes: u64,
    what: String,
    progress: &crate::util::Progress,
) -> Vec<Need> {
    match engine_root_of(docker, docker_host).await {
        Ok(dir) => vec![Need { dir, bytes, what }],
        Err(why) => {
            progress.step(format!("not checking the engine's free space: {why}"));
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn need(dir: &str, bytes: u64, what: &str) -> Need {
        Need {
            dir: dir.into(),
            bytes,
            what: what.into(),
        }
    }

    const GB: u64 = 1_000_000_000;

    #[test]
    fn a_step_that_fits_passes_and_one_that_does_not_names_directory_need_and_free() {
        let root = Space {
            device: 1,
            free: 3 * GB,
        };
        let export = need("/var/lib/docker", 2_300_000_000, "the export of img");
        assert_eq!(judge("publish", &[(export.clone(), root)]), Ok(()));
        let full = Space {
            device: 1,
            free: 1_200_000_000,
        };
        let err = judge("publish", &[(export, full)]).unwrap_err();
        assert!(err.contains("not enough disk space for publish"), "{err}");
        assert!(err.contains("/var/lib/docker"), "{err}");
        assert!(err.contains("the export of img"), "{err}");
        assert!(err.contains("2300000000 bytes"), "{err}");
        assert!(err.contains("1200000000 bytes) free"), "{err}");
        assert!(err.contains("docker image prune"), "{err}");
    }

    #[test]
    fn needs_on_one_filesystem_add_up_and_other_filesystems_are_judged_apart() {
        let disk = Space {
            device: 1,
            free: 3 * GB,
        };
        let tmpfs = Space {
            device: 2,
            free: GB,
        };
        let export = need("/var/lib/docker", 2 * GB, "the export");
        let blobs = need("/tmp", 2 * GB, "the blobs");
        // Each fits alone on the disk, both together do not.
        assert_eq!(judge("s", &[(export.clone(), disk)]), Ok(()));
        let err = judge("s", &[(export.clone(), disk), (blobs.clone(), disk)]).unwrap_err();
        assert!(
            err.contains("the export") && err.contains("the blobs"),
            "{err}"
        );
        assert!(err.contains("4000000000 bytes"), "{err}");
        // On another filesystem the blobs are judged against its own free space.
        let err = judge("s", &[(export, disk), (blobs, tmpfs)]).unwrap_err();
        assert!(!err.contains("the export"), "{err}");
        assert!(err.contains("2.0 GB (the blobs) in /tmp"), "{err}");
        assert_eq!(judge("s", &[]), Ok(()));
    }

    #[test]
    fn exactly_the_free_bytes_fit() {
        let space = Space {
            device: 7,
            free: 10,
        };
        assert_eq!(judge("s", &[(need("/d", 10, "x"), space)]), Ok(()));
        assert!(judge("s", &[(need("/d", 11, "x"), space)]).is_err());
    }

    #[test]
    fn the_engine_root_is_local_only_for_a_local_engine_on_this_host() {
        let root = Some("/var/lib/docker");
        assert_eq!(
            engine_root(None, Some("box"), "box", root),
            Ok(PathBuf::from("/var/lib/docker"))
        );
        assert_eq!(
            engine_root(Some("unix:///run/docker.sock"), Some("box"), "box", root),
            Ok(PathBuf::from("/var/lib/docker"))
        );
        let remote = engine_root(Some("tcp://10.0.0.2:2375"), Some("box"), "box", root);
        assert!(remote.unwrap_err().contains("tcp://10.0.0.2:2375"));
        // A nested engine: a local socket, but dockerd runs in a container of its own.
        let nested = engine_root(
            Some("unix:///tmp/n/docker.sock"),
            Some("dind1"),
            "box",
            root,
        );
        assert!(nested.unwrap_err().contains("dind1"));
        assert!(engine_root(None, Some("box"), "box", None).is_err());
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human(999), "999 B");
        assert_eq!(human(2_300_000_000), "2.3 GB");
        assert_eq!(human(512_000_000), "512.0 MB");
    }

    #[test]
    fn space_of_a_missing_directory_is_its_ancestor_s() {
        let dir = tempfile::tempdir().unwrap();
        let here = space_of(dir.path()).unwrap();
        let below = space_of(&dir.path().join("not/yet")).unwrap();
        assert_eq!(here.device, below.device);
        assert!(here.free > 0);
    }
}
