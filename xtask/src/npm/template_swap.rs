//! `lock`'s write of `template/` as one change: the old version or the new one at every
//! instant, whenever the tool is killed.
//!
//! Renaming each file into place is atomic per file only: a lock killed after package.json
//! and before package-lock.json left a package.json that pins one version beside a lockfile
//! of another (tests/it/kill_points.rs found it), which `build` would install and a person
//! could commit. So the next `template/` is staged whole, as a copy of the current one with
//! the new files, in `.xtask/lock-template/next` (the checkout's filesystem), and swapped
//! with `template/` by one `renameat2(RENAME_EXCHANGE)`; the old version, now in the staging
//! place, is then removed. A killed run leaves at most the staging directory, never a mix;
//! the next write removes it and says so.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use rustix::io::Errno;

use crate::layout::Layout;
use crate::util::{atomic_write, Progress};

/// Where the next `template/` is staged.
pub(crate) fn staging_dir(layout: &Layout) -> PathBuf {
    layout.state("lock-template")
}

/// Whether the failed swap means the filesystem cannot exchange two directories (then the
/// files are replaced one by one, with a warning), rather than an error to report.
pub(crate) fn swap_unsupported(errno: Errno) -> bool {
    errno == Errno::INVAL || errno == Errno::NOSYS || errno == Errno::OPNOTSUPP
}

/// Removes what a killed lock left in the staging place, saying so: template/ itself is
/// whole either way, so nothing there is worth keeping. Every lock calls it first, also one
/// that finds nothing to write (a lock killed after its swap left the old version there).
pub(crate) fn clear_leftover(layout: &Layout, progress: &Progress) -> Result<()> {
    let staging = staging_dir(layout);
    if !staging.exists() {
        return Ok(());
    }
    progress.step(format!(
        "removing {}: a lock killed while it wrote template/ left it (template/ itself is \
         whole: the old or the new version, swapped in one rename)",
        staging.display()
    ));
    remove(&staging)
}

/// Replaces `files` (paths below `root`, each in `template/`) in one swap of `template/`.
pub(crate) fn write_template(
    layout: &Layout,
    files: &[(&str, String)],
    progress: &Progress,
) -> Result<()> {
    let template = layout.template();
    let staging = staging_dir(layout);
    clear_leftover(layout, progress)?;
    let next = staging.join("next");
    copy_tree(&template, &next)?;
    let mut staged = Vec::new();
    for (path, content) in files {
        let relative = Path::new(path)
            .strip_prefix("template")
            .with_context(|| format!("{path} is not in template/: lock writes template/ only"))?;
        atomic_write(&next.join(relative), content.as_bytes())?;
        staged.push(relative.to_path_buf());
        crate::kill_point::reached("lock:template-file-written");
    }
    match rustix::fs::renameat_with(
        rustix::fs::CWD,
        &next,
        rustix::fs::CWD,
        &template,
        rustix::fs::RenameFlags::EXCHANGE,
    ) {
        Ok(()) => {}
        Err(errno) if swap_unsupported(errno) => {
            progress.step(format!(
                "warning: the filesystem of {} cannot swap two directories (renameat2 \
                 RENAME_EXCHANGE: {errno}); replacing template/'s files one by one, so a kill \
                 now can leave a mix: run `cargo xtask lock` again if this one is interrupted",
                template.display()
            ));
            for relative in &staged {
                std::fs::rename(next.join(relative), template.join(relative)).with_context(
                    || format!("cannot replace {}", template.join(relative).display()),
                )?;
            }
        }
        Err(errno) => bail!(
            "cannot swap {} with the new version staged in {} ({errno}); template/ is \
             unchanged: check the permissions of both, then run `cargo xtask lock` again",
            template.display(),
            next.display()
        ),
    }
    crate::kill_point::reached("lock:template-swapped");
    // The old version, now in the staging place.
    remove(&staging)
}

fn remove(dir: &Path) -> Result<()> {
    std::fs::remove_dir_all(dir).with_context(|| {
        format!(
            "cannot remove {}, lock's staging of template/; remove it by hand",
            dir.display()
        )
    })
}

/// A copy of the directory `from` at `to`: files (with their permissions), directories and
/// symbolic links.
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("cannot create {}", to.display()))?;
    let permissions = std::fs::metadata(from)
        .with_context(|| format!("cannot read {}", from.display()))?
        .permissions();
    std::fs::set_permissions(to, permissions)
        .with_context(|| format!("cannot set the permissions of {}", to.display()))?;
    for entry in
        std::fs::read_dir(from).with_context(|| format!("cannot read {}", from.display()))?
    {
        let entry = entry.with_context(|| format!("cannot read {}", from.display()))?;
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        let kind = entry
            .file_type()
            .with_context(|| format!("cannot read {}", source.display()))?;
        if kind.is_dir() {
            copy_tree(&source, &target)?;
        } else if kind.is_symlink() {
            let link = std::fs::read_link(&source)
                .with_context(|| format!("cannot read the link {}", source.display()))?;
            std::os::unix::fs::symlink(&link, &target)
                .with_context(|| format!("cannot create the link {}", target.display()))?;
        } else {
            std::fs::copy(&source, &target).with_context(|| {
                format!("cannot copy {} to {}", source.display(), target.display())
            })?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_filesystem_that_cannot_swap_falls_back() {
        assert!(swap_unsupported(Errno::INVAL));
        assert!(swap_unsupported(Errno::NOSYS));
        assert!(swap_unsupported(Errno::OPNOTSUPP));
        assert!(!swap_unsupported(Errno::ACCESS));
        assert!(!swap_unsupported(Errno::NOENT));
    }

    #[test]
    fn the_swap_replaces_the_files_keeps_the_others_and_clears_a_leftover_staging() {
        let root = tempfile::tempdir().unwrap();
        let template = root.path().join("template");
        std::fs::create_dir_all(template.join("seccomp")).unwrap();
        std::fs::write(template.join("manifest.yaml"), "kept\n").unwrap();
        std::fs::write(template.join("seccomp/profile.json"), "{}\n").unwrap();
        std::fs::write(template.join("package.json"), "old\n").unwrap();
        // What a killed run leaves: a half-staged next version.
        let leftover = staging_dir(&Layout::at(root.path())).join("next");
        std::fs::create_dir_all(&leftover).unwrap();
        std::fs::write(leftover.join("package.json"), "half\n").unwrap();

        let files = [
            ("template/package.json", "new\n".to_string()),
            ("template/package-lock.json", "lock\n".to_string()),
        ];
        write_template(&Layout::at(root.path()), &files, &Progress::default()).unwrap();
        let read = |p: &str| std::fs::read_to_string(template.join(p)).unwrap();
        assert_eq!(read("package.json"), "new\n");
        assert_eq!(read("package-lock.json"), "lock\n");
        assert_eq!(read("manifest.yaml"), "kept\n");
        assert_eq!(read("seccomp/profile.json"), "{}\n");
        assert!(!staging_dir(&Layout::at(root.path())).exists());
    }

    #[test]
    fn files_outside_template_are_refused() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("template")).unwrap();
        let err = write_template(
            &Layout::at(root.path()),
            &[("Dockerfile", String::new())],
            &Progress::default(),
        )
        .unwrap_err();
        assert!(
            format!("{err:#}").contains("is not in template/"),
            "{err:#}"
        );
    }
}
