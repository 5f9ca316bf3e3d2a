//! `actions/upload-artifact` and `actions/download-artifact`.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::PathBuf;

use anyhow::{anyhow, bail, Context as _, Result};
use sha2::{Digest, Sha256};

use crate::glob;
use crate::leg::{Leg, StepEnd};

use super::files::{copy_tree, create_runner_dirs};
use super::inputs::truthy_input;

fn artifacts_dir(leg: &Leg) -> PathBuf {
    leg.env.run.replay.root().join("artifacts")
}

/// actions/upload-artifact v7.0.0 (actions/upload-artifact@bbbca2d): the name's forbidden characters and their message
/// (@actions/artifact, actions/toolkit packages/artifact/src/internal/upload/
/// path-and-artifact-name-validation.ts), `if-no-files-found` (src/upload/upload-artifact.ts),
/// a name already uploaded in this run refused unless `overwrite` (the service's 409), and the
/// artifact's root: the least common ancestor of the search paths (src/shared/search.ts,
/// `getMultiPathLCA`), or a lone file's directory.
pub(super) fn upload(
    leg: &mut Leg,
    with: &BTreeMap<String, String>,
    logf: &mut std::fs::File,
) -> Result<StepEnd> {
    let name = with
        .get("name")
        .filter(|n| !n.is_empty())
        .cloned()
        .unwrap_or_else(|| "artifact".into());
    if let Some(bad) = name.chars().find(|c| "\":<>|*?\r\n\\/".contains(*c)) {
        bail!("The artifact name is not valid: {name}. Contains the following character: {bad:?}");
    }
    let patterns = with
        .get("path")
        .filter(|p| !p.trim().is_empty())
        .ok_or_else(|| anyhow!("Input required and not supplied: path"))?;
    let mode = with
        .get("if-no-files-found")
        .map(String::as_str)
        .unwrap_or("warn");
    let overwrite = truthy_input(with, "overwrite", false)?;
    let hidden = truthy_input(with, "include-hidden-files", false)?;
    let matched = glob::expand(&leg.workspace, patterns, hidden);
    if matched.files.is_empty() {
        let msg = format!(
            "No files were found with the provided path: {}. No artifacts will be uploaded.",
            patterns.trim()
        );
        return match mode {
            "error" => bail!("{msg}"),
            "warn" => {
                writeln!(logf, "##[warning]{msg}")?;
                Ok(StepEnd::ok())
            }
            "ignore" => {
                writeln!(logf, "{msg}")?;
                Ok(StepEnd::ok())
            }
            other => bail!("if-no-files-found must be warn, error or ignore, got {other:?}"),
        };
    }
    let root = if matched.search_paths.len() > 1 {
        glob::common_ancestor(&matched.search_paths)
    } else if matched.files.len() == 1 && matched.search_paths[0] == matched.files[0] {
        matched.files[0]
            .parent()
            .expect("a file has a parent")
            .to_path_buf()
    } else {
        matched.search_paths[0].clone()
    };
    let store = artifacts_dir(leg);
    std::fs::create_dir_all(&store)?;
    let dest = store.join(&name);
    if dest.exists() {
        if !overwrite {
            bail!(
                "Failed to CreateArtifact: Received non-retryable error: Failed request: (409) Conflict: an artifact with this name already exists on the workflow run (artifact `{name}`; set `overwrite: true` to replace it)"
            );
        }
        std::fs::remove_dir_all(&dest)?;
        writeln!(logf, "Artifact '{name}' deleted (overwrite: true)")?;
    }
    let staging = store.join(format!(".staging-{name}"));
    let _ = std::fs::remove_dir_all(&staging);
    let mut digest = Sha256::new();
    for file in &matched.files {
        let rel = file.strip_prefix(&root).with_context(|| {
            format!(
                "{} is not below the artifact root {}",
                file.display(),
                root.display()
            )
        })?;
        let to = staging.join("files").join(rel);
        std::fs::create_dir_all(to.parent().expect("has a parent"))?;
        std::fs::copy(file, &to).with_context(|| format!("copying {}", file.display()))?;
        // "File permissions are not maintained during artifact upload. All directories will
        // have `755` and all files will have `644`" (upload-artifact and download-artifact
        // READMEs, "Permission Loss"): a binary passed on needs its `chmod +x` again.
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o644))?;
        }
        digest.update(rel.to_string_lossy().as_bytes());
        digest.update(Sha256::digest(std::fs::read(file)?));
        writeln!(logf, "  {}", rel.display())?;
    }
    std::fs::write(
        staging.join("meta.json"),
        serde_json::to_vec_pretty(
            &serde_json::json!({ "attempt": leg.env.run.run_attempt, "job": leg.env.job_id }),
        )?,
    )?;
    std::fs::rename(&staging, &dest)?;
    writeln!(
        logf,
        "Artifact {name} uploaded: {} file(s), root {}",
        matched.files.len(),
        root.display()
    )?;
    let id = std::fs::read_dir(&store)?.count().to_string();
    let mut end = StepEnd::ok();
    end.outputs.insert("artifact-id".into(), id.clone());
    end.outputs.insert(
        "artifact-url".into(),
        format!(
            "https://github.com/{}/actions/runs/{}/artifacts/{id}",
            leg.env.run.replay.repository, leg.env.run.run_id
        ),
    );
    end.outputs
        .insert("artifact-digest".into(), hex::encode(digest.finalize()));
    Ok(end)
}

/// actions/download-artifact v8.0.1 (actions/download-artifact@3e5f45b, src/download-artifact.ts): one artifact by
/// `name` (missing: @actions/artifact's "Artifact not found for name", find/get-artifact.ts), or
/// every artifact matching `pattern`, each in a directory of its name unless `merge-multiple`.
pub(super) fn download(
    leg: &mut Leg,
    with: &BTreeMap<String, String>,
    logf: &mut std::fs::File,
) -> Result<StepEnd> {
    let store = artifacts_dir(leg);
    let dest = glob::normalize(
        &leg.workspace,
        with.get("path")
            .filter(|p| !p.is_empty())
            .map(String::as_str)
            .unwrap_or("."),
    );
    let merge = truthy_input(with, "merge-multiple", false)?;
    if with.get("artifact-ids").is_some_and(|s| !s.is_empty())
        || with.get("run-id").is_some_and(|s| !s.is_empty())
    {
        bail!("artifact-ids and run-id are not emulated");
    }
    let mut names: Vec<String> = if store.is_dir() {
        std::fs::read_dir(&store)?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| !n.starts_with(".staging-"))
            .collect()
    } else {
        Vec::new()
    };
    names.sort();
    let mut end = StepEnd::ok();
    end.outputs
        .insert("download-path".into(), dest.display().to_string());
    if let Some(name) = with.get("name").filter(|n| !n.is_empty()) {
        if !names.contains(name) {
            bail!(
                "Unable to download artifact(s): Artifact not found for name: {name}\nPlease ensure that your artifact is not expired and the artifact was uploaded using a compatible version of toolkit/upload-artifact.\n(artifacts of this run: {names:?})"
            );
        }
        let n = copy_tree(&store.join(name).join("files"), &dest, true)?;
        writeln!(
            logf,
            "Artifact {name} downloaded to {}: {n} file(s)",
            dest.display()
        )?;
    } else {
        let pattern = with.get("pattern").filter(|p| !p.is_empty());
        let selected: Vec<&String> = names
            .iter()
            .filter(|n| pattern.is_none_or(|p| glob::name_match(p, n)))
            .collect();
        if selected.is_empty() {
            // download-artifact succeeds when a pattern matches nothing; say so loudly.
            writeln!(logf, "##[warning]No artifacts match pattern {pattern:?} (artifacts of this run: {names:?})")?;
        }
        for name in selected {
            let to = if merge { dest.clone() } else { dest.join(name) };
            let n = copy_tree(&store.join(name).join("files"), &to, true)?;
            writeln!(
                logf,
                "Artifact {name} downloaded to {}: {n} file(s)",
                to.display()
            )?;
        }
    }
    create_runner_dirs(&dest)?;
    Ok(end)
}
