//! `actions/cache`: the restore step and the post-job save.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context as _, Result};
use sha2::{Digest, Sha256};

use crate::glob;
use crate::leg::{Leg, StepEnd};
use crate::runner::give_to_runner;

use super::files::{copy_tree, create_runner_dirs};
use super::inputs::truthy_input;

/// A cache entry to save in the post-job phase (when the key missed and the job succeeded).
pub(crate) struct CacheSave {
    store: PathBuf,
    key: String,
    version: String,
    paths: Vec<PathBuf>,
}

fn cache_paths(leg: &Leg, with: &BTreeMap<String, String>) -> Result<(Vec<PathBuf>, String)> {
    let text = with
        .get("path")
        .filter(|p| !p.trim().is_empty())
        .ok_or_else(|| anyhow!("Input required and not supplied: path"))?;
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if lines
        .iter()
        .any(|l| l.starts_with('!') || l.contains(['*', '?', '[']))
    {
        bail!("cache paths with globs or excludes are not emulated: {lines:?}");
    }
    let version = hex::encode(Sha256::digest(lines.join("\n").as_bytes()));
    Ok((
        lines
            .iter()
            .map(|l| glob::normalize(&leg.workspace, l))
            .collect(),
        version,
    ))
}

fn entry_dir(store: &Path, key: &str, version: &str) -> PathBuf {
    store.join(hex::encode(
        &Sha256::digest(format!("{version}\n{key}").as_bytes())[..12],
    ))
}

/// actions/cache v5.0.5 (actions/cache@27d5ce7, src/restoreImpl.ts): the exact key, else the newest entry
/// whose key starts with a `restore-keys` line, for the same paths (@actions/cache's "version";
/// here the sha256 of the path lines, without the compression method and OS the real one also
/// hashes), with its messages and outputs; the save is a post-job step that runs only when the
/// job succeeded (action.yml, `post-if: success()`) and never replaces an entry.
pub(super) fn cache_restore(
    leg: &mut Leg,
    with: &BTreeMap<String, String>,
    logf: &mut std::fs::File,
) -> Result<StepEnd> {
    let key = with
        .get("key")
        .filter(|k| !k.is_empty())
        .ok_or_else(|| anyhow!("Input required and not supplied: key"))?
        .clone();
    let (paths, version) = cache_paths(leg, with)?;
    let store = leg.env.run.replay.cache_store();
    std::fs::create_dir_all(&store)?;
    let exact = entry_dir(&store, &key, &version);
    let mut found = exact.is_dir().then(|| (exact.clone(), key.clone()));
    // Not actions/cache: the harness's shortcut (Replay::arm64_legs_restore_the_x64_cache).
    if found.is_none() && leg.env.run.replay.arm64_cache_from_x64 && key.contains("-ARM64-") {
        let twin = entry_dir(&store, &key.replace("-ARM64-", "-X64-"), &version);
        if twin.is_dir() {
            writeln!(
                logf,
                "replay: no entry for {key}; restoring its X64 twin (this machine is x86)"
            )?;
            found = Some((twin, key.clone()));
        }
    }
    if found.is_none() {
        let mut entries: Vec<(u64, PathBuf, String)> = Vec::new();
        for e in std::fs::read_dir(&store)? {
            let p = e?.path();
            let meta: serde_json::Value = match std::fs::read(p.join("meta.json"))
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
            {
                Some(m) => m,
                None => continue,
            };
            if meta["version"] == version.as_str() {
                entries.push((
                    meta["seq"].as_u64().unwrap_or(0),
                    p,
                    meta["key"].as_str().unwrap_or_default().to_owned(),
                ));
            }
        }
        entries.sort_by_key(|e| std::cmp::Reverse(e.0));
        for prefix in with
            .get("restore-keys")
            .map(|r| {
                r.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
        {
            if let Some((_, p, k)) = entries.iter().find(|(_, _, k)| k.starts_with(prefix)) {
                found = Some((p.clone(), k.clone()));
                break;
            }
        }
    }
    let mut end = StepEnd::ok();
    end.outputs.insert("cache-primary-key".into(), key.clone());
    let exact_hit = found.as_ref().is_some_and(|(_, k)| *k == key);
    match &found {
        Some((dir, matched)) => {
            for (i, path) in paths.iter().enumerate() {
                let saved = dir.join("data").join(i.to_string());
                if saved.is_dir() {
                    copy_tree(&saved, path, true)?;
                } else if saved.is_file() {
                    create_runner_dirs(path.parent().expect("has a parent"))?;
                    std::fs::copy(&saved, path)?;
                    give_to_runner(path)?;
                }
            }
            writeln!(logf, "Cache restored from key: {matched}")?;
            end.outputs
                .insert("cache-hit".into(), exact_hit.to_string());
            end.outputs
                .insert("cache-matched-key".into(), matched.clone());
        }
        None => {
            writeln!(logf, "Cache not found for input keys: {key}")?;
            // actions/cache leaves cache-hit empty on a miss.
            end.outputs.insert("cache-hit".into(), String::new());
            end.outputs
                .insert("cache-matched-key".into(), String::new());
        }
    }
    if !exact_hit && !truthy_input(with, "lookup-only", false)? {
        leg.post.push(CacheSave {
            store,
            key,
            version,
            paths,
        });
    }
    if found.is_none() && truthy_input(with, "fail-on-cache-miss", false)? {
        bail!(
            "Failed to restore cache entry. Exiting as fail-on-cache-miss is set. Input key: {}",
            with["key"]
        );
    }
    Ok(end)
}

impl CacheSave {
    pub(crate) fn save(&self) -> Result<()> {
        let dir = entry_dir(&self.store, &self.key, &self.version);
        if dir.exists() {
            return Ok(()); // "Cache already exists": another job saved it first.
        }
        let staging = self.store.join(format!(".staging-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&staging);
        for (i, path) in self.paths.iter().enumerate() {
            let to = staging.join("data").join(i.to_string());
            if path.is_dir() {
                copy_tree(path, &to, false)?;
            } else if path.is_file() {
                std::fs::create_dir_all(to.parent().expect("has a parent"))?;
                std::fs::copy(path, &to)?;
            }
        }
        let seq = std::fs::read_dir(&self.store)?.count();
        std::fs::create_dir_all(&staging)?;
        std::fs::write(
            staging.join("meta.json"),
            serde_json::to_vec(
                &serde_json::json!({ "key": self.key, "version": self.version, "seq": seq }),
            )?,
        )?;
        std::fs::rename(&staging, &dir).with_context(|| format!("saving cache entry {}", self.key))
    }
}
