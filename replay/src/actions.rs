//! The actions the release workflows use, emulated on this machine: `actions/checkout`,
//! `actions/upload-artifact` and `actions/download-artifact` (v4+ semantics: immutable names
//! per run unless `overwrite`, the least-common-ancestor root), `actions/cache`, and
//! `actions/attest` and its wrappers `actions/attest-build-provenance` / `actions/attest-sbom`
//! (each subject recorded in the runner's temp dir, `attestations.jsonl`; see [`attest`]). Any
//! other
//! `uses:` needs a stand-in registered by the test ([`StandIn`]); otherwise the replay stops
//! naming it.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, bail, Context as _, Result};
use base64::Engine as _;
use sha2::{Digest, Sha256};

use crate::glob;
use crate::leg::{Leg, StepEnd};
use crate::runner::{exec_as_runner, give_to_runner};

/// What a closure stand-in gets: the evaluated `with:` inputs and the job's workspace.
pub struct ActionCall<'a> {
    pub with: &'a BTreeMap<String, String>,
    pub workspace: &'a Path,
}

/// A closure stand-in returns the step's outputs, or why the step failed.
pub type ActionFn =
    Arc<dyn Fn(&ActionCall) -> Result<BTreeMap<String, String>, String> + Send + Sync>;

/// A stand-in for an action the harness does not emulate, keyed by `owner/name`.
#[derive(Clone)]
pub enum StandIn {
    /// Runs in the harness (as root): for actions whose effect lives outside the job.
    Closure(ActionFn),
    /// A bash script run like a `run:` step as the runner, with the inputs as `INPUT_<NAME>`
    /// variables (GitHub's convention) and `GITHUB_OUTPUT` for outputs.
    Script(String),
}

/// `owner/name` of `owner/name[/path]@ref`, lowercased.
fn action_name(uses: &str) -> String {
    let without_ref = uses.split('@').next().unwrap_or(uses);
    without_ref
        .split('/')
        .take(2)
        .collect::<Vec<_>>()
        .join("/")
        .to_ascii_lowercase()
}

pub(crate) fn run(
    leg: &mut Leg,
    here: &str,
    uses: &str,
    with: &BTreeMap<String, String>,
    env: &BTreeMap<String, String>,
    log: &Path,
    deadline: Instant,
) -> Result<StepEnd> {
    if uses.starts_with("./") || uses.starts_with("docker://") || !uses.contains('@') {
        bail!("{here}: `uses: {uses}` is not supported by the replay harness (only `owner/name@ref` actions)");
    }
    let name = action_name(uses);
    if let Some(source) = leg.env.run.replay.action_sources.get(&name).cloned() {
        return super::composite::run(leg, here, uses, &source, with, env, log, deadline);
    }
    if let Some(stand_in) = leg.env.run.replay.stand_ins.get(&name).cloned() {
        return run_stand_in(leg, &stand_in, with, env, log, deadline);
    }
    let known: &[&str] = match name.as_str() {
        "actions/checkout" => &[
            "repository", "ref", "token", "ssh-key", "ssh-known-hosts", "ssh-strict", "ssh-user", "persist-credentials", "path", "clean",
            "filter", "sparse-checkout", "sparse-checkout-cone-mode", "fetch-depth", "fetch-tags", "show-progress", "lfs", "submodules",
            "set-safe-directory", "github-server-url",
        ],
        "actions/upload-artifact" => &["name", "path", "if-no-files-found", "retention-days", "compression-level", "overwrite", "include-hidden-files"],
        "actions/download-artifact" => &["name", "artifact-ids", "path", "pattern", "merge-multiple", "github-token", "repository", "run-id"],
        "actions/cache" => &["path", "key", "restore-keys", "upload-chunk-size", "enableCrossOsArchive", "fail-on-cache-miss", "lookup-only", "save-always"],
        // actions/attest@59d8942 (v4.1.0), action.yml.
        "actions/attest" => &["subject-path", "subject-digest", "subject-name", "subject-checksums", "subject-version", "sbom-path", "predicate-type", "predicate", "predicate-path", "push-to-registry", "create-storage-record", "show-summary", "github-token"],
        "actions/attest-build-provenance" => &["subject-path", "subject-digest", "subject-name", "subject-checksums", "predicate-type", "predicate", "predicate-path", "push-to-registry", "create-storage-record", "show-summary", "github-token"],
        "actions/attest-sbom" => &["subject-path", "subject-digest", "subject-name", "subject-checksums", "sbom-path", "push-to-registry", "show-summary", "github-token"],
        _ => bail!(
            "{here}: `uses: {uses}`: the replay harness does not emulate `{name}`; register a stand-in with Replay::stand_in(\"{name}\", ...)"
        ),
    };
    for key in with.keys() {
        if !known.contains(&key.as_str()) {
            bail!("{here}: `{name}` has no input `{key}`");
        }
    }
    let mut logf = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    writeln!(logf, "##[replay] {uses} with {with:?}")?;
    let result = match name.as_str() {
        "actions/checkout" => checkout(leg, with, env, log, deadline),
        "actions/upload-artifact" => upload(leg, with, &mut logf),
        "actions/download-artifact" => download(leg, with, &mut logf),
        "actions/cache" => cache_restore(leg, with, &mut logf),
        "actions/attest" | "actions/attest-build-provenance" | "actions/attest-sbom" => {
            attest(leg, &name, with, &mut logf)
        }
        _ => unreachable!("checked above"),
    };
    match result {
        Ok(end) => Ok(end),
        Err(e) => {
            writeln!(logf, "##[error]{e:#}")?;
            Ok(StepEnd::failed())
        }
    }
}

fn run_stand_in(
    leg: &mut Leg,
    stand_in: &StandIn,
    with: &BTreeMap<String, String>,
    env: &BTreeMap<String, String>,
    log: &Path,
    deadline: Instant,
) -> Result<StepEnd> {
    match stand_in {
        StandIn::Closure(f) => {
            let call = ActionCall {
                with,
                workspace: &leg.workspace,
            };
            match f(&call) {
                Ok(outputs) => Ok(StepEnd {
                    outputs,
                    ..StepEnd::ok()
                }),
                Err(e) => {
                    let mut logf = std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(log)?;
                    writeln!(logf, "##[error]{e}")?;
                    Ok(StepEnd::failed())
                }
            }
        }
        StandIn::Script(script) => {
            let mut env = env.clone();
            for (k, v) in with {
                env.insert(
                    format!("INPUT_{}", k.replace(' ', "_").to_ascii_uppercase()),
                    v.clone(),
                );
            }
            let path = leg.temp.join(format!("action-{}.sh", leg.steps.len() + 1));
            std::fs::write(&path, script)?;
            give_to_runner(&path)?;
            let argv = ["bash", "--noprofile", "--norc", "-eo", "pipefail"]
                .iter()
                .map(|s| s.to_string())
                .chain([path.display().to_string()])
                .collect::<Vec<_>>();
            exec_as_runner(&argv, &env, &leg.workspace, log, deadline)
        }
    }
}

fn truthy_input(with: &BTreeMap<String, String>, key: &str, default: bool) -> Result<bool> {
    match with.get(key).map(String::as_str) {
        None | Some("") => Ok(default),
        Some("true") => Ok(true),
        Some("false") => Ok(false),
        Some(other) => bail!("input `{key}` must be true or false, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// actions/checkout
// ---------------------------------------------------------------------------------------------

/// Checks out the harness's source repository at the run's sha (or `ref`) into the workspace
/// (or `path` below it), detached, `fetch-depth` commits deep. `origin` is the local source, so
/// nothing can reach github.com. With `persist-credentials` (the default) the token stays in the
/// clone's config as actions/checkout v7.0.1 (actions/checkout@3d3c42e) leaves it (src/git-auth-helper.ts:
/// `http.https://github.com/.extraheader`, basic `x-access-token:<token>`).
fn checkout(
    leg: &mut Leg,
    with: &BTreeMap<String, String>,
    env: &BTreeMap<String, String>,
    log: &Path,
    deadline: Instant,
) -> Result<StepEnd> {
    let replay = &leg.env.run.replay;
    if let Some(repo) = with.get("repository").filter(|r| !r.is_empty()) {
        if !repo.eq_ignore_ascii_case(&replay.repository) {
            bail!("checkout of another repository ({repo}) is not emulated; the run's repository is {}", replay.repository);
        }
    }
    if truthy_input(with, "submodules", false)? || truthy_input(with, "lfs", false)? {
        bail!("submodules and lfs are not emulated");
    }
    let dest = glob::normalize(
        &leg.workspace,
        with.get("path").map(String::as_str).unwrap_or("."),
    );
    if !dest.starts_with(&leg.workspace) {
        bail!("path {} is outside the workspace", dest.display());
    }
    if dest.exists() {
        for entry in std::fs::read_dir(&dest)? {
            let p = entry?.path();
            if p.is_dir() && !p.is_symlink() {
                std::fs::remove_dir_all(&p)?;
            } else {
                std::fs::remove_file(&p)?;
            }
        }
    }
    std::fs::create_dir_all(&dest)?;
    let sha = leg.github["sha"].as_str().unwrap_or_default().to_owned();
    let target = with
        .get("ref")
        .filter(|r| !r.is_empty())
        .cloned()
        .unwrap_or(sha);
    let git = |args: &[&str], cwd: &Path| -> Result<String> {
        // Root runs git in the runner's directory: trust it for this command only.
        let out = Command::new("git")
            .args(["-c", "safe.directory=*"])
            .args(args)
            .current_dir(cwd)
            .output()?;
        let mut f = std::fs::OpenOptions::new().append(true).open(log)?;
        f.write_all(&out.stderr)?;
        if !out.status.success() {
            bail!("git {} failed", args.join(" "));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    let source = std::fs::canonicalize(&replay.source_repo)
        .with_context(|| format!("source repository {}", replay.source_repo.display()))?;
    let commit = git(
        &["rev-parse", "--verify", &format!("{target}^{{commit}}")],
        &source,
    )
    .with_context(|| format!("`{target}` is not a commit of {}", source.display()))?;
    // Fetched over file:// (objects are copied, never hard-linked: the clone is handed to the
    // runner, and chowning a hard link would chown the source's objects), `fetch-depth`
    // commits deep like GitHub's (default 1; 0 = every branch and tag with full history).
    let depth: u32 = match with.get("fetch-depth").map(String::as_str) {
        None | Some("") => 1,
        Some(d) => d
            .parse()
            .map_err(|_| anyhow!("fetch-depth must be a number, got {d:?}"))?,
    };
    let url = format!("file://{}", source.display());
    git(&["init", "--quiet", "--initial-branch=replay", "."], &dest)?;
    git(&["remote", "add", "origin", &url], &dest)?;
    if depth == 0 {
        git(
            &[
                "fetch",
                "--quiet",
                "--tags",
                "origin",
                "+refs/heads/*:refs/remotes/origin/*",
            ],
            &dest,
        )?;
    } else {
        git(
            &[
                "fetch",
                "--quiet",
                "--no-tags",
                &format!("--depth={depth}"),
                "origin",
                &commit,
            ],
            &dest,
        )?;
    }
    git(&["checkout", "--quiet", "--detach", &commit], &dest)?;
    if truthy_input(with, "persist-credentials", true)? {
        let token = with
            .get("token")
            .filter(|t| !t.is_empty())
            .unwrap_or(&leg.token);
        let basic =
            base64::engine::general_purpose::STANDARD.encode(format!("x-access-token:{token}"));
        git(
            &[
                "config",
                "--local",
                "http.https://github.com/.extraheader",
                &format!("AUTHORIZATION: basic {basic}"),
            ],
            &dest,
        )?;
    }
    give_to_runner(&dest)?;
    let _ = (env, deadline);
    Ok(StepEnd::ok())
}

// ---------------------------------------------------------------------------------------------
// Artifacts
// ---------------------------------------------------------------------------------------------

fn artifacts_dir(leg: &Leg) -> PathBuf {
    leg.env.run.replay.root().join("artifacts")
}

/// actions/upload-artifact v7.0.0 (actions/upload-artifact@bbbca2d): the name's forbidden characters and their message
/// (@actions/artifact, actions/toolkit packages/artifact/src/internal/upload/
/// path-and-artifact-name-validation.ts), `if-no-files-found` (src/upload/upload-artifact.ts),
/// a name already uploaded in this run refused unless `overwrite` (the service's 409), and the
/// artifact's root: the least common ancestor of the search paths (src/shared/search.ts,
/// `getMultiPathLCA`), or a lone file's directory.
fn upload(
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

/// Creates `dir` and any missing parents, each the runner's (what a step would have made).
fn create_runner_dirs(dir: &Path) -> Result<()> {
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
fn copy_tree(from: &Path, to: &Path, for_runner: bool) -> Result<usize> {
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

/// actions/download-artifact v8.0.1 (actions/download-artifact@3e5f45b, src/download-artifact.ts): one artifact by
/// `name` (missing: @actions/artifact's "Artifact not found for name", find/get-artifact.ts), or
/// every artifact matching `pattern`, each in a directory of its name unless `merge-multiple`.
fn download(
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

// ---------------------------------------------------------------------------------------------
// actions/cache
// ---------------------------------------------------------------------------------------------

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
fn cache_restore(
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

// ---------------------------------------------------------------------------------------------
// actions/attest, actions/attest-build-provenance, actions/attest-sbom
// ---------------------------------------------------------------------------------------------

/// The file in a leg's runner temp dir where the attest stand-in records what was attested:
/// one JSON object per line, `{"action", "subjects": [{"name", "digest", "path"?}],
/// "push_to_registry", "predicate_type", "sigstore_instance", "sbom_sha256"?}`.
pub const ATTESTATIONS_FILE: &str = "attestations.jsonl";

/// One subject an attestation names.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct Subject {
    pub name: String,
    /// `sha256:<hex>`.
    pub digest: String,
    /// The file it was read from, for `subject-path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// Everything one attest step recorded.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Attestation {
    pub action: String,
    pub subjects: Vec<Subject>,
    pub push_to_registry: bool,
    /// `https://slsa.dev/provenance/v1`, `https://spdx.dev/Document/v2.3`, ...
    #[serde(default)]
    pub predicate_type: String,
    /// The Sigstore instance the real action would sign with: `public-good` when the event
    /// payload's `repository.visibility` is `public`, else `github` (actions/attest v4.1.0,
    /// src/main.ts). A schedule payload has no repository, so a scheduled run signs with
    /// GitHub's instance.
    #[serde(default)]
    pub sigstore_instance: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sbom_sha256: Option<String>,
}

/// The attestations recorded in a leg's temp dir (its `dir`), in step order.
pub fn recorded_attestations(leg_dir: &Path) -> Vec<Attestation> {
    let text =
        std::fs::read_to_string(leg_dir.join("temp").join(ATTESTATIONS_FILE)).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).expect("the stand-in writes valid lines"))
        .collect()
}

fn is_sha256_digest(s: &str) -> bool {
    s.strip_prefix("sha256:").is_some_and(|h| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

enum SbomKind {
    Spdx,
    CycloneDx,
}

/// How the real action tells the formats apart (actions/attest v4.1.0, src/helper/sbom.ts,
/// `parseSBOMFromPath`): SPDX when `spdxVersion` and `SPDXID` are both truthy, else CycloneDX
/// when `bomFormat`, `serialNumber` and `specVersion` all are, else `Unsupported SBOM format`.
/// A CycloneDX document without the serial number the CycloneDX schema makes optional is
/// refused.
fn sbom_kind(doc: &serde_json::Value) -> Option<SbomKind> {
    let truthy = |key: &str| match doc.get(key) {
        None | Some(serde_json::Value::Null) | Some(serde_json::Value::Bool(false)) => false,
        Some(serde_json::Value::String(s)) => !s.is_empty(),
        Some(serde_json::Value::Number(n)) => n.as_f64() != Some(0.0),
        Some(_) => true,
    };
    if truthy("spdxVersion") && truthy("SPDXID") {
        Some(SbomKind::Spdx)
    } else if ["bomFormat", "serialNumber", "specVersion"]
        .iter()
        .all(|k| truthy(k))
    {
        Some(SbomKind::CycloneDx)
    } else {
        None
    }
}

/// What the real actions check before they sign: the token may mint an OIDC token and write
/// attestations (and packages, to push to a registry), the subject is given one way only and
/// well formed, subject files exist, and an SBOM is an SPDX or CycloneDX JSON document of at
/// most 16 MB. The stand-in signs nothing: it records the subjects.
fn attest(
    leg: &mut Leg,
    action: &str,
    with: &BTreeMap<String, String>,
    logf: &mut std::fs::File,
) -> Result<StepEnd> {
    let input = |k: &str| with.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
    let granted = |scope: &str| leg.token.split('.').any(|p| p == format!("{scope}=write"));
    for scope in ["id-token", "attestations"] {
        if !granted(scope) {
            bail!("{action} needs `permissions: {scope}: write` on the job");
        }
    }
    let push = truthy_input(with, "push-to-registry", false)?;
    if push && !granted("packages") {
        bail!("{action}: push-to-registry needs `permissions: packages: write`");
    }
    let mut subjects = Vec::new();
    match (input("subject-path"), input("subject-digest"), input("subject-name"), input("subject-checksums")) {
        (Some(paths), None, None, None) => {
            if push {
                bail!("{action}: push-to-registry needs subject-name and subject-digest, not subject-path");
            }
            let patterns = paths.replace(',', "\n");
            let matched = glob::expand(&leg.workspace, &patterns, false);
            if matched.files.is_empty() {
                bail!("{action}: subject-path `{paths}` matches no file");
            }
            for file in matched.files {
                let bytes = std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
                subjects.push(Subject {
                    name: file.file_name().unwrap_or_default().to_string_lossy().into_owned(),
                    digest: format!("sha256:{}", hex::encode(Sha256::digest(&bytes))),
                    path: Some(file.display().to_string()),
                });
            }
        }
        (None, Some(digest), Some(name), None) => {
            if !is_sha256_digest(digest) {
                bail!("{action}: subject-digest `{digest}` is not sha256:<64 lowercase hex>");
            }
            let valid_name = !name.contains(['@', ' ', '\n'])
                && !name.contains("://")
                && name.split('/').count() >= 2
                && name == name.to_ascii_lowercase()
                && !name.rsplit('/').next().unwrap_or("").contains(':');
            if push && !valid_name {
                bail!("{action}: subject-name `{name}` is not a registry repository (host/path, lower case, no tag or digest)");
            }
            if name.is_empty() {
                bail!("{action}: subject-name is empty");
            }
            subjects.push(Subject { name: name.to_string(), digest: digest.to_string(), path: None });
        }
        (None, None, None, None) => bail!("{action}: one of subject-path, subject-digest (with subject-name) or subject-checksums must be provided"),
        (None, Some(_), None, None) | (None, None, Some(_), None) => {
            bail!("{action}: subject-digest and subject-name go together")
        }
        _ => bail!("{action}: give the subject one way: subject-path, subject-digest with subject-name, or subject-checksums"),
    }
    let mut sbom_sha256 = None;
    let mut predicate_type = super::gh_state::SLSA_PROVENANCE_V1.to_string();
    let sbom = match action {
        "actions/attest-sbom" => true,
        // actions/attest v4.1.0 src/detect.ts: sbom-path makes an SBOM attestation, and may not
        // be combined with predicate inputs.
        "actions/attest" => {
            if input("sbom-path").is_some()
                && ["predicate-type", "predicate", "predicate-path"]
                    .iter()
                    .any(|k| input(k).is_some())
            {
                bail!("{action}: Cannot specify sbom-path together with predicate-type, predicate, or predicate-path");
            }
            input("sbom-path").is_some()
        }
        _ => false,
    };
    if sbom {
        let path = input("sbom-path")
            .ok_or_else(|| anyhow!("{action}: Input required and not supplied: sbom-path"))?;
        let file = glob::normalize(&leg.workspace, path);
        let bytes = std::fs::read(&file)
            .with_context(|| format!("{action}: sbom-path {}", file.display()))?;
        if bytes.len() > 16 << 20 {
            bail!("{action}: {} is larger than 16 MB", file.display());
        }
        let doc: serde_json::Value = serde_json::from_slice(&bytes)
            .with_context(|| format!("{action}: {} is not JSON", file.display()))?;
        predicate_type = match sbom_kind(&doc) {
            Some(SbomKind::Spdx) => super::gh_state::SPDX_DOCUMENT_V2_3,
            Some(SbomKind::CycloneDx) => super::gh_state::CYCLONEDX_BOM,
            None => bail!(
                "{action}: Unsupported SBOM format: {} is neither SPDX (spdxVersion and SPDXID) \
                 nor CycloneDX (bomFormat, serialNumber and specVersion)",
                file.display()
            ),
        }
        .to_string();
        sbom_sha256 = Some(hex::encode(Sha256::digest(&bytes)));
    } else if with.contains_key("sbom-path") && action != "actions/attest" {
        bail!("{action} has no input `sbom-path`");
    } else if let Some(custom) = input("predicate-type") {
        if input("predicate").is_none() && input("predicate-path").is_none() {
            bail!("{action}: predicate-type needs predicate or predicate-path");
        }
        predicate_type = custom.to_string();
    }
    let public = leg.env.run.event_payload()["repository"]["visibility"].as_str() == Some("public");
    let record = Attestation {
        action: action.trim_start_matches("actions/").to_string(),
        subjects,
        push_to_registry: push,
        predicate_type: predicate_type.clone(),
        sigstore_instance: if public { "public-good" } else { "github" }.to_string(),
        sbom_sha256,
    };
    let line = serde_json::to_string(&record)?;
    // What GitHub's attestation API then serves (`gh attestation verify`).
    let run = leg.env.run;
    super::gh_state::append_record(
        &run.replay.gh_state_dir(),
        &super::gh_state::AttestationRecord {
            repository: run.replay.repository.clone(),
            signer_workflow: format!(
                "{}/.github/workflows/{}",
                run.replay.repository, run.workflow.file
            ),
            // Fulcio's certificate for the run: its GITHUB_REF, and the replay stands in for
            // GitHub-hosted runners.
            source_ref: run.replay.git_ref.clone(),
            runner_environment: "github-hosted".into(),
            predicate_type: predicate_type.clone(),
            subjects: record
                .subjects
                .iter()
                .map(|s| super::gh_state::RecordSubject {
                    name: s.name.clone(),
                    digest: s.digest.clone(),
                })
                .collect(),
        },
    )?;
    // Signed and stored in GitHub's API by now; only then does the real action read registry
    // credentials to push the bundle, and fail without them (the step fails, the attestation
    // stays stored).
    if push {
        let name = &record.subjects[0].name;
        registry_credentials(Path::new(super::RUNNER_HOME), name)
            .with_context(|| format!("{action}: pushing the attestation of {name}"))?;
        writeln!(
            logf,
            "registry credentials found for {name}; the stand-in pushes nothing to the registry"
        )?;
    }
    let store = leg.temp.join(ATTESTATIONS_FILE);
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&store)?;
    writeln!(f, "{line}")?;
    writeln!(
        logf,
        "attested {} subject(s): {line}",
        record.subjects.len()
    )?;
    // The real actions write the signed bundle to the runner's temp dir and name it.
    let bundle = leg
        .temp
        .join(format!("attestation-{}.jsonl", leg.steps.len() + 1));
    std::fs::write(&bundle, format!("{line}\n"))?;
    give_to_runner(&bundle)?;
    let mut end = StepEnd::ok();
    end.outputs
        .insert("bundle-path".into(), bundle.display().to_string());
    end.outputs
        .insert("attestation-id".into(), format!("{}", leg.steps.len() + 1));
    end.outputs.insert(
        "attestation-url".into(),
        "https://github.com/attestations/replay".into(),
    );
    Ok(end)
}

/// The registry credentials actions/attest uses to push an attestation, as @sigstore/oci 0.6.0
/// reads them (sigstore/sigstore-js, packages/oci/src/credentials.ts, `getRegistryCredentials`;
/// actions/attest v4.1.0 src/attest.ts calls it when `push-to-registry` is true): only
/// `$HOME/.docker/config.json` (no `DOCKER_CONFIG`, no credential helpers, no environment),
/// the first `auths` key that contains the image's registry, else the registry itself; its
/// `auth` is base64 `user:password`. The errors are the upstream's words.
pub fn registry_credentials(home: &Path, image: &str) -> Result<(String, String)> {
    // packages/oci/src/name.ts, parseImageName: `<domain[:port]>/<path>`.
    let registry = match image.split_once('/') {
        Some((domain, path)) if !domain.is_empty() && !path.is_empty() => domain,
        _ => bail!("Invalid image name: {image}"),
    };
    let file = home.join(".docker").join("config.json");
    let Ok(content) = std::fs::read_to_string(&file) else {
        bail!("No credential file found at {}", file.display());
    };
    let config: serde_json::Value = serde_json::from_str(&content)
        .with_context(|| format!("{} is not JSON", file.display()))?;
    let auths = config.get("auths").and_then(serde_json::Value::as_object);
    let key = auths
        .and_then(|a| a.keys().find(|k| k.contains(registry)).cloned())
        .unwrap_or_else(|| registry.to_string());
    let Some(entry) = auths.and_then(|a| a.get(&key)) else {
        bail!("No credentials found for registry {registry}");
    };
    // fromBasicAuth(creds.auth): a missing `auth` throws inside Buffer.from.
    let auth = entry
        .get("auth")
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| anyhow!("{}: auths[{key:?}] has no `auth`", file.display()))?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(auth)
        .with_context(|| format!("{}: auths[{key:?}].auth is not base64", file.display()))?;
    let text = String::from_utf8_lossy(&decoded);
    let (user, password) = text.split_once(':').unwrap_or((&text, ""));
    Ok((user.to_string(), password.to_string()))
}
