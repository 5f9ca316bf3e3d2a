//! `actions/checkout`.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{anyhow, bail, Context as _, Result};
use base64::Engine as _;

use crate::glob;
use crate::leg::{Leg, StepEnd};
use crate::runner::give_to_runner;

use super::inputs::truthy_input;

/// Checks out the harness's source repository at the run's sha (or `ref`) into the workspace
/// (or `path` below it), detached, `fetch-depth` commits deep. `origin` is the local source, so
/// nothing can reach github.com. With `persist-credentials` (the default) the token stays in the
/// clone's config as actions/checkout v7.0.1 (actions/checkout@3d3c42e) leaves it (src/git-auth-helper.ts:
/// `http.https://github.com/.extraheader`, basic `x-access-token:<token>`).
pub(super) fn checkout(
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
