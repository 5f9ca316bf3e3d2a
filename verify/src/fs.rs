//! The verifier's writes: a file replaced atomically (the pinned template definition) and the
//! files GitHub Actions reads a step's outputs from.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};

/// Writes `bytes` to `path` through a temporary file in the same directory and a rename, so a
/// reader (or an interrupted run) never sees a half-written file.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create directory {}", dir.display()))?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
    tmp.write_all(bytes)
        .and_then(|_| tmp.as_file().sync_all())
        .with_context(|| format!("cannot write {}", path.display()))?;
    tmp.persist(path)
        .with_context(|| format!("cannot replace {}", path.display()))?;
    Ok(())
}

/// A file GitHub Actions reads after a step (`$GITHUB_OUTPUT`, `$GITHUB_STEP_SUMMARY`): the
/// variable that names it (for messages) and its path, `None` outside Actions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GithubFile {
    pub variable: &'static str,
    pub path: Option<std::path::PathBuf>,
}

impl GithubFile {
    /// `value` is the variable's; empty counts as unset (as in GitHub's own toolkit).
    pub fn new(variable: &'static str, value: Option<std::ffi::OsString>) -> GithubFile {
        GithubFile {
            variable,
            path: value.filter(|p| !p.is_empty()).map(Into::into),
        }
    }
}

/// Appends `text` to a GitHub file, when its variable was set.
pub fn append_to_github_file(file: &GithubFile, text: &str) -> Result<()> {
    let Some(path) = &file.path else {
        return Ok(());
    };
    let variable = file.variable;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .with_context(|| format!("cannot append to ${variable} ({})", path.display()))
}
