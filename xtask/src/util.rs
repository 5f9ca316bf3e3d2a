//! Small IO helpers shared by the commands: the state directory, atomic writes, digests,
//! progress lines, the clock.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};

use chrono::{DateTime, Utc};
pub(crate) use template_formats::hash::sha256_hex;
pub(crate) use template_verify::fs::atomic_write;

pub(crate) use template_verify::fs::append_to_github_file;

/// Reads a stage's JSON file through its owner's type; `what` names the file for the error.
pub(crate) fn read_json<T: serde::de::DeserializeOwned>(path: &Path, what: &str) -> Result<T> {
    let bytes = std::fs::read(path)
        .with_context(|| format!("cannot read {what} from {}", path.display()))?;
    serde_json::from_slice(&bytes).with_context(|| format!("{} is not {what}", path.display()))
}

/// `sha256` of a file's content as lowercase hex.
pub(crate) fn sha256_file(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(sha256_hex(&bytes))
}

/// Parses `--now`, or reads the clock when it is absent. Time is an input like any other, so
/// every decision that depends on it can be replayed.
pub(crate) fn now_or(flag: Option<&str>) -> Result<DateTime<Utc>> {
    match flag {
        None => Ok(Utc::now()),
        Some(text) => DateTime::parse_from_rfc3339(text)
            .map(|t| t.with_timezone(&Utc))
            .with_context(|| {
                format!("--now `{text}` is not an RFC 3339 time (e.g. 2026-11-29T12:00:00Z)")
            }),
    }
}

/// Progress lines on stderr, each with the time since the command started, so long steps are
/// visible in CI logs without a terminal.
#[derive(Clone)]
pub struct Progress {
    start: Instant,
}

impl Default for Progress {
    fn default() -> Self {
        Progress {
            start: Instant::now(),
        }
    }
}

impl Progress {
    pub(crate) fn step(&self, message: impl AsRef<str>) {
        eprintln!(
            "[{:>6.1}s] {}",
            self.start.elapsed().as_secs_f64(),
            message.as_ref()
        );
    }
}

/// Holds `path` (created if missing) locked exclusively until the returned file is dropped;
/// while another process holds it, says `waiting` once and waits.
pub(crate) async fn lock_exclusive_waiting(
    path: &std::path::Path,
    waiting: &str,
    progress: &Progress,
) -> Result<std::fs::File> {
    let lock =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    if lock.try_lock().is_err() {
        progress.step(waiting);
        let locking = lock.try_clone()?;
        let shown = path.display().to_string();
        tokio::task::spawn_blocking(move || locking.lock())
            .await
            .context("the locking thread panicked")?
            .with_context(|| format!("cannot lock {shown}"))?;
    }
    Ok(lock)
}

/// Prints a value as pretty JSON on stdout.
pub(crate) fn print_json<T: serde::Serialize>(value: &T) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// The checkout this crate was compiled in, for unit tests that read the committed files
/// (production code gets its `Layout` from main).
#[cfg(test)]
pub(crate) fn repo_root() -> std::path::PathBuf {
    crate::layout::Layout::of(&crate::settings::Settings::default())
        .root()
        .to_path_buf()
}

/// A child's command line, built flag by flag: what each request's `to_args` renders (the
/// release runs its steps as `cargo xtask <argv>`). Absent options and false switches add
/// nothing, so clap gives the child the same default as a person who left the flag out.
#[derive(Debug, Default)]
pub(crate) struct Argv(Vec<std::ffi::OsString>);

impl Argv {
    /// The subcommand's words, e.g. `["receipt", "write"]`.
    pub(crate) fn command(words: &[&str]) -> Argv {
        Argv(words.iter().map(Into::into).collect())
    }

    /// `flag` when `on`.
    pub(crate) fn switch(mut self, flag: &str, on: bool) -> Argv {
        if on {
            self.0.push(flag.into());
        }
        self
    }

    /// `flag value`.
    pub(crate) fn value(mut self, flag: &str, value: impl AsRef<std::ffi::OsStr>) -> Argv {
        self.0.push(flag.into());
        self.0.push(value.as_ref().to_owned());
        self
    }

    /// `flag value` when there is a value.
    pub(crate) fn option<V: AsRef<std::ffi::OsStr>>(self, flag: &str, value: Option<V>) -> Argv {
        match value {
            Some(value) => self.value(flag, value),
            None => self,
        }
    }

    /// `flag value` once per value, in order.
    pub(crate) fn each<V: AsRef<std::ffi::OsStr>>(
        self,
        flag: &str,
        values: impl IntoIterator<Item = V>,
    ) -> Argv {
        values
            .into_iter()
            .fold(self, |argv, value| argv.value(flag, value))
    }

    /// A positional argument.
    pub(crate) fn positional(mut self, value: impl AsRef<std::ffi::OsStr>) -> Argv {
        self.0.push(value.as_ref().to_owned());
        self
    }

    pub(crate) fn into_vec(self) -> Vec<std::ffi::OsString> {
        self.0
    }
}
