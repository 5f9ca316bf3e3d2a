//! The one way the tests run the xtask binary (`CARGO_BIN_EXE_xtask`).
//!
//! Whatever the caller's shell holds in `XTASK_*` (registry credentials, a root, a clock, a
//! registry) or `GITHUB_*` (a CI runner's job context: `GITHUB_ACTIONS`, `GITHUB_OUTPUT`,
//! `GITHUB_SHA`, ...) would change what the binary does, so none of it reaches the binary; a test
//! sets what it needs with [`Xtask::env`]. A run that sets no `XTASK_ROOT` works on
//! [`super::committed_checkout`], never on the checkout's own `template/`, which the README's
//! release command rewrites. Every run is logged to the test's captured output
//! (shown when the test fails) and returns one shape, [`Run`].

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::tail;

/// Variables of the caller that never reach the binary.
const CLEARED_PREFIXES: [&str; 2] = ["XTASK_", "GITHUB_"];

/// How much of a run's stderr the log and failure messages show (builds print a lot).
const STDERR_SHOWN: usize = 8000;

/// A command line of the xtask binary being put together; [`Xtask::run`] runs it.
pub struct Xtask {
    cmd: Command,
    shown: Vec<OsString>,
    limit: Option<Duration>,
}

/// The xtask binary with the caller's `XTASK_*` and `GITHUB_*` variables removed.
pub fn xtask() -> Xtask {
    Xtask::under(&[])
}

impl Xtask {
    /// The binary run by `wrapper` (a program and its arguments, e.g. `/usr/bin/time -v`).
    pub fn under(wrapper: &[&str]) -> Xtask {
        let binary = env!("CARGO_BIN_EXE_xtask");
        let mut cmd = match wrapper.split_first() {
            Some((program, args)) => {
                let mut cmd = Command::new(program);
                cmd.args(args).arg(binary);
                cmd
            }
            None => Command::new(binary),
        };
        for (key, _) in std::env::vars_os() {
            let name = key.to_string_lossy();
            if CLEARED_PREFIXES.iter().any(|p| name.starts_with(p)) {
                cmd.env_remove(&key);
            }
        }
        // The engine this test runs on (support::docker::use_engine).
        if let Some(host) = super::docker::docker_host() {
            cmd.env("DOCKER_HOST", host);
        }
        Xtask {
            cmd,
            shown: vec!["xtask".into()],
            limit: None,
        }
    }

    pub fn arg(&mut self, arg: impl AsRef<OsStr>) -> &mut Xtask {
        self.shown.push(arg.as_ref().to_owned());
        self.cmd.arg(arg);
        self
    }

    pub fn args<I, S>(&mut self, args: I) -> &mut Xtask
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        for arg in args {
            self.arg(arg);
        }
        self
    }

    pub fn env(&mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> &mut Xtask {
        self.cmd.env(key, value);
        self
    }

    pub fn envs<I, K, V>(&mut self, vars: I) -> &mut Xtask
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        self.cmd.envs(vars);
        self
    }

    pub fn env_remove(&mut self, key: impl AsRef<OsStr>) -> &mut Xtask {
        self.cmd.env_remove(key);
        self
    }

    pub fn current_dir(&mut self, dir: impl AsRef<Path>) -> &mut Xtask {
        self.cmd.current_dir(dir);
        self
    }

    /// Starts the binary as the leader of a process group of its own, so that a SIGKILL to
    /// its group (the kill points of `tests/it/kill_points.rs`) reaches it and its children
    /// and not the test.
    pub fn own_process_group(&mut self) -> &mut Xtask {
        use std::os::unix::process::CommandExt;
        self.cmd.process_group(0);
        self
    }

    /// Fails the test, after killing the binary, when a run takes longer than `limit`: for
    /// commands whose hang is the bug under test.
    pub fn time_limit(&mut self, limit: Duration) -> &mut Xtask {
        self.limit = Some(limit);
        self
    }

    /// Runs the command line to its end (stdin empty, stdout and stderr captured).
    pub fn run(&mut self) -> Run {
        let command = self
            .shown
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ");
        // A run that names no root works on the checkout as the tests see it: release-written
        // files as committed (`support::committed_checkout`), with the checkout's caches.
        // A variable the test set is the test's: the defaults fill only the rest. (`under`
        // removed the caller's own `XTASK_*`, which shows here as a name without a value.)
        let set_by_test = |cmd: &Command, name: &str| {
            cmd.get_envs()
                .any(|(key, value)| key == name && value.is_some())
        };
        if !set_by_test(&self.cmd, "XTASK_ROOT") {
            self.cmd.env("XTASK_ROOT", super::committed_checkout());
            for (name, value) in super::checkout_caches() {
                if !set_by_test(&self.cmd, name) {
                    self.cmd.env(name, value);
                }
            }
        }
        let started = Instant::now();
        let mut child = self
            .cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run the xtask binary ({command}): {e}"));
        let pid = child.id();
        // Drained on threads so that a chatty child never blocks on a full pipe.
        let stdout = drain(child.stdout.take());
        let stderr = drain(child.stderr.take());
        let status = wait(&mut child, self.limit);
        let run = Run {
            command,
            status: status.unwrap_or_else(|| {
                let _ = child.kill();
                child.wait().expect("the killed xtask binary is reaped")
            }),
            stdout: stdout.join().expect("stdout reader"),
            stderr: stderr.join().expect("stderr reader"),
            pid,
            elapsed: started.elapsed(),
        };
        eprintln!(
            "$ {}\n--- {} in {:.1} s, stderr:\n{}",
            run.command,
            run.status,
            run.elapsed.as_secs_f64(),
            tail(&run.stderr_text(), STDERR_SHOWN)
        );
        if status.is_none() {
            panic!(
                "`{}` did not finish within {:?}: it hangs",
                run.command,
                self.limit.unwrap_or_default()
            );
        }
        run
    }
}

fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
    let mut pipe = pipe.expect("the pipe was requested");
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        bytes
    })
}

/// The exit status, or None when `limit` passed first.
fn wait(child: &mut Child, limit: Option<Duration>) -> Option<ExitStatus> {
    let Some(limit) = limit else {
        return Some(child.wait().expect("waiting for the xtask binary"));
    };
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("waiting for the xtask binary") {
            return Some(status);
        }
        if started.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One finished run of the binary.
pub struct Run {
    /// The command line as shown in messages (`xtask receipt verify ...`).
    pub command: String,
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// The binary's process id: the containers a run makes carry it in their run label.
    pub pid: u32,
    pub elapsed: Duration,
}

impl Run {
    pub fn success(&self) -> bool {
        self.status.success()
    }

    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }

    /// Stdout as one JSON value (the `--json` output), whatever the exit status.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "`{}` printed no JSON ({e}):\n{}\n--- stderr:\n{}",
                self.command,
                tail(&self.stdout_text(), STDERR_SHOWN),
                tail(&self.stderr_text(), STDERR_SHOWN)
            )
        })
    }

    /// Fails the test, showing stderr, unless the run exited 0.
    pub fn assert_success(&self) -> &Run {
        assert!(
            self.success(),
            "`{}` failed ({}):\n{}",
            self.command,
            self.status,
            tail(&self.stderr_text(), STDERR_SHOWN)
        );
        self
    }

    /// Fails the test, showing stdout, if the run exited 0.
    pub fn assert_failure(&self) -> &Run {
        assert!(
            !self.success(),
            "`{}` should have failed:\n{}",
            self.command,
            tail(&self.stdout_text(), STDERR_SHOWN)
        );
        self
    }
}
