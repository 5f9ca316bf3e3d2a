//! The actions the release workflows use, emulated on this machine: `actions/checkout`,
//! `actions/upload-artifact` and `actions/download-artifact` (v4+ semantics: immutable names
//! per run unless `overwrite`, the least-common-ancestor root), `actions/cache`, and
//! `actions/attest` and its wrappers `actions/attest-build-provenance` / `actions/attest-sbom`
//! (each subject recorded in the runner's temp dir, `attestations.jsonl`, and, with a signer the
//! test registers, the statement signed into a bundle; see [`attest()`], `signing.rs`). Any
//! other `uses:` needs a stand-in registered by the test ([`StandIn`]); otherwise the replay stops
//! naming it.
//!
//! `mod.rs` checks a `uses:` and dispatches it; each emulated action has its file
//! (`checkout.rs`, `artifacts.rs`, `cache.rs`, `attest.rs`), `stand_in.rs` runs a test's
//! stand-in, `inputs.rs` and `files.rs` hold what several of them share.

mod artifacts;
mod attest;
mod cache;
mod checkout;
mod files;
mod inputs;
mod signing;
mod stand_in;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Result};

use crate::leg::{Leg, StepEnd};

pub use attest::{recorded_attestations, Attestation, Subject, ATTESTATIONS_FILE};
pub(crate) use cache::CacheSave;
pub use signing::{JobIdentity, Signer};
pub use stand_in::{ActionCall, ActionFn, StandIn};

use artifacts::{download, upload};
use attest::attest;
use cache::cache_restore;
use checkout::checkout;
use stand_in::run_stand_in;

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
