//! The runner user: its ids, files handed to it, the workspace lock, the gh stand-in on its
//! PATH, and running a step's command as it.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _, Result};

use crate::config::Replay;
use crate::leg::StepEnd;
use crate::results::WorkflowRun;
use crate::{gh_state, RUNNER_HOME, RUNNER_USER};

/// The runner user's uid and gid.
pub fn runner_ids() -> Result<(u32, u32)> {
    static IDS: OnceLock<Option<(u32, u32)>> = OnceLock::new();
    let ids = IDS.get_or_init(|| {
        let id = |flag: &str| -> Option<u32> {
            let out = Command::new("id").args([flag, RUNNER_USER]).output().ok()?;
            String::from_utf8_lossy(&out.stdout).trim().parse().ok()
        };
        Some((id("-u")?, id("-g")?))
    });
    ids.ok_or_else(|| anyhow!("user `{RUNNER_USER}` does not exist: run `bash scripts/setup-runner-user.sh` as root first"))
}

pub(crate) fn set_mode(path: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("chmod {}", path.display()))
}

/// An exclusive lock on the runner's workspace, released when the returned file is dropped.
pub fn lock_workspace() -> Result<std::fs::File> {
    use std::os::fd::AsRawFd as _;
    let dir = Path::new(RUNNER_HOME).join("work");
    std::fs::create_dir_all(&dir)?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(".replay-lock"))
        .with_context(|| format!("opening {}/.replay-lock", dir.display()))?;
    // SAFETY: flock on a descriptor this function owns; no memory is shared.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
        bail!(
            "cannot lock {}/.replay-lock: {}",
            dir.display(),
            std::io::Error::last_os_error()
        );
    }
    Ok(file)
}

/// Gives the calling thread a runner machine of its own, as GitHub gives each job one: from
/// here on, for this thread and every process it starts, /home/runner is `home` (created empty
/// for the runner, with the runner image's toolchain, `~/.rustup` and `~/.cargo/bin`, bound in
/// from the shared home), so the workspace, its lock, `~/.cargo/registry`, `~/.cache` and
/// `~/.docker` are this thread's alone. Other threads keep the shared /home/runner, so a replay
/// here runs beside replays there instead of waiting for the workspace lock.
///
/// Linux keeps the mount namespace per thread: `unshare(2)` with `CLONE_NEWNS` moves only the
/// caller (and what it starts later) into a copy, and mounts made there with private
/// propagation stay there (mount_namespaces(7)). Needs root (`CAP_SYS_ADMIN`); `Ok(false)`,
/// with nothing changed, when this process is not root (the runner itself on a GitHub-hosted
/// machine), where jobs take turns on the shared home as before.
pub fn own_runner_home(home: &Path) -> Result<bool> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt as _;
    if !side_by_side_possible() {
        return Ok(false);
    }
    let shared = Path::new(RUNNER_HOME);
    const TOOLCHAIN: [&str; 2] = [".rustup", ".cargo/bin"];
    std::fs::create_dir_all(home).with_context(|| format!("creating {}", home.display()))?;
    for sub in TOOLCHAIN {
        std::fs::create_dir_all(home.join(sub))?;
    }
    give_to_runner(home)?;
    let c_path = |p: &Path| CString::new(p.as_os_str().as_bytes()).expect("no NUL in a path");
    let mount = |from: Option<&Path>, to: &Path, flags: libc::c_ulong| -> Result<()> {
        let (from_c, to_c) = (from.map(c_path), c_path(to));
        // SAFETY: both paths are NUL-terminated C strings that outlive the call; a null
        // source, filesystem type and data are allowed for bind and propagation changes.
        let rc = unsafe {
            libc::mount(
                from_c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
                to_c.as_ptr(),
                std::ptr::null(),
                flags,
                std::ptr::null(),
            )
        };
        if rc != 0 {
            bail!(
                "mount {} on {} (flags {flags:#x}): {}",
                from.map_or("(propagation)".into(), |f| f.display().to_string()),
                to.display(),
                std::io::Error::last_os_error()
            );
        }
        Ok(())
    };
    // SAFETY: unshare changes only the calling thread's namespaces and fs attributes.
    if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
        bail!(
            "unshare(CLONE_NEWNS) for a runner home of its own: {}",
            std::io::Error::last_os_error()
        );
    }
    mount(None, Path::new("/"), libc::MS_REC | libc::MS_PRIVATE)?;
    for sub in TOOLCHAIN {
        if shared.join(sub).is_dir() {
            mount(
                Some(&shared.join(sub)),
                &home.join(sub),
                libc::MS_BIND | libc::MS_REC,
            )?;
        }
    }
    mount(Some(home), shared, libc::MS_BIND | libc::MS_REC)?;
    Ok(true)
}

/// Whether jobs and legs can run side by side here: each needs a runner home of its own
/// ([`own_runner_home`], root only). Otherwise they take turns on the shared home.
pub(crate) fn side_by_side_possible() -> bool {
    // SAFETY: geteuid reads the caller's effective uid and has no failure mode.
    unsafe { libc::geteuid() == 0 }
}

/// Where a job or leg that runs beside others keeps its runner home: under the attempt's
/// directory, so it goes with the replay's root.
pub(crate) fn own_home_dir(run: &WorkflowRun, name: &str) -> PathBuf {
    run.replay
        .root()
        .join(format!("attempt-{}", run.run_attempt))
        .join(name)
}

/// A path under /home/runner as a thread on the shared home sees it, for a job that ran on
/// `home` (a result's `workspace`).
pub(crate) fn seen_from_outside(home: &Path, path: &Path) -> PathBuf {
    match path.strip_prefix(RUNNER_HOME) {
        Ok(rest) => home.join(rest),
        Err(_) => path.to_path_buf(),
    }
}

/// Hands a file or a tree to the runner user (what it would have created itself on GitHub).
pub(crate) fn give_to_runner(path: &Path) -> Result<()> {
    let (uid, gid) = runner_ids()?;
    std::os::unix::fs::lchown(path, Some(uid), Some(gid))
        .with_context(|| format!("chown {}", path.display()))?;
    let meta = std::fs::symlink_metadata(path)?;
    if meta.is_dir() {
        for entry in std::fs::read_dir(path)? {
            give_to_runner(&entry?.path())?;
        }
    }
    Ok(())
}

/// Writes the gh stand-in for this replay (state dir and repository baked in).
/// The directory first on the runner's PATH: the gh stand-in (state dir and repository baked
/// in) and the test's fake tools.
pub(crate) fn gh_bin_dir(r: &Replay) -> Result<PathBuf> {
    let bin = r.root().join("bin");
    std::fs::create_dir_all(&bin)?;
    set_mode(&bin, 0o755)?;
    let foreign = serde_json::to_string(&gh_state::foreign_states(r)?)?;
    let gh = include_str!("gh.py")
        .replace("@STATE@", &r.gh_state_dir().display().to_string())
        .replace("@REPOSITORY@", &r.repository)
        .replace("@FOREIGN@", &foreign);
    let mut tools = BTreeMap::from([("gh".to_owned(), gh)]);
    tools.extend(r.tools.clone());
    for (name, script) in tools {
        let path = bin.join(&name);
        std::fs::write(&path, script).with_context(|| format!("writing {}", path.display()))?;
        set_mode(&path, 0o755)?;
    }
    Ok(bin)
}

/// Runs `argv` as the runner user with exactly `env`, in `cwd`, output (both streams) to
/// `log`, killed with its whole process group at `deadline`.
pub(crate) fn exec_as_runner(
    argv: &[String],
    env: &BTreeMap<String, String>,
    cwd: &Path,
    log: &Path,
    deadline: Instant,
) -> Result<StepEnd> {
    use std::os::unix::fs::MetadataExt as _;
    let (uid, gid) = runner_ids()?;
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    // As root (here): switch to the runner. Already the runner (on a GitHub-hosted runner,
    // where CI runs these tests): run as is.
    let mut command = if std::fs::metadata("/proc/self")?.uid() == uid {
        Command::new(&argv[0])
    } else {
        let mut c = Command::new("setpriv");
        c.arg(format!("--reuid={uid}"))
            .arg(format!("--regid={gid}"))
            .arg("--init-groups")
            .arg("--")
            .arg(&argv[0]);
        c
    };
    let child = command
        .args(&argv[1..])
        .env_clear()
        .envs(env)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .process_group(0)
        .spawn()
        .with_context(|| format!("starting {argv:?} as {RUNNER_USER}"))?;
    // Reaped with wait4 rather than `Child::try_wait`, for the CPU time the step used.
    let pid = child.id();
    loop {
        if let Some((code, cpu)) = reap(pid, false)? {
            let mut end = if code == Some(0) {
                StepEnd::ok()
            } else {
                StepEnd::failed()
            };
            if code != Some(0) {
                let mut f = std::fs::OpenOptions::new().append(true).open(log)?;
                writeln!(
                    f,
                    "##[error]Process completed with exit code {}.",
                    code.unwrap_or(-1)
                )?;
            }
            end.pgid = Some(pid);
            end.cpu = cpu;
            return Ok(end);
        }
        if Instant::now() >= deadline {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .status();
            let cpu = reap(pid, true)?.map(|(_, cpu)| cpu).unwrap_or_default();
            return Ok(StepEnd {
                ok: false,
                timed_out: true,
                cpu,
                ..StepEnd::ok()
            });
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits for the child `pid` (without blocking unless `block`): its exit code (`None` when a
/// signal ended it) and the CPU time, user and system, of it and the descendants it waited
/// for; `None` while it runs.
fn reap(pid: u32, block: bool) -> Result<Option<(Option<i32>, Duration)>> {
    let pid = libc::pid_t::try_from(pid).context("a child's pid")?;
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: `rusage` is plain data the kernel fills in; `pid` is this process's own child,
        // which nothing else waits for (the `Child` that spawned it is never waited on).
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let flags = if block { 0 } else { libc::WNOHANG };
        let reaped = unsafe { libc::wait4(pid, &mut status, flags, &mut usage) };
        if reaped == 0 {
            return Ok(None);
        }
        if reaped < 0 {
            let error = std::io::Error::last_os_error();
            if error.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            bail!("waiting for the step's process {pid}: {error}");
        }
        let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
        let seconds = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
        return Ok(Some((
            code,
            seconds(usage.ru_utime) + seconds(usage.ru_stime),
        )));
    }
}
