//! Files the actions write into a job: the runner's, modification times kept.

use std::path::Path;

use anyhow::{Context as _, Result};

use crate::runner::give_to_runner;

/// Creates `dir` and any missing parents, each the runner's (what a step would have made).
pub(super) fn create_runner_dirs(dir: &Path) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        create_runner_dirs(parent)?;
    }
    std::fs::create_dir(dir).with_context(|| format!("creating {}", dir.display()))?;
    give_to_runner(dir)
}

/// Copies a tree; with `for_runner`, what it creates in a job's files belongs to the runner
/// (only what it creates: a download into a large workspace does not walk the workspace).
pub(super) fn copy_tree(from: &Path, to: &Path, for_runner: bool) -> Result<usize> {
    let mut n = 0;
    if for_runner {
        create_runner_dirs(to)?;
    } else {
        std::fs::create_dir_all(to)?;
    }
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            n += copy_tree(&entry.path(), &target, for_runner)?;
        } else {
            std::fs::copy(entry.path(), &target)
                .with_context(|| format!("writing {}", target.display()))?;
            // Keep the modification time, as the real actions (tar archives) do: cargo judges a
            // restored target directory fresh or stale by comparing mtimes.
            let modified = entry.metadata()?.modified()?;
            std::fs::File::options()
                .write(true)
                .open(&target)
                .and_then(|f| f.set_modified(modified))
                .with_context(|| format!("setting the mtime of {}", target.display()))?;
            if for_runner {
                give_to_runner(&target)?;
            }
            n += 1;
        }
    }
    Ok(n)
}
