//! What to replay and as what: [`Replay`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, Result};
use serde_json::{json, Value};

use crate::runner::{give_to_runner, runner_ids, set_mode};
use crate::{Signer, StandIn};

/// What to replay and as what: the workflow file, the repository it is checked out from, the
/// event, and the stand-ins for actions the harness does not emulate.
#[derive(Clone)]
pub struct Replay {
    pub workflow: PathBuf,
    pub source_repo: PathBuf,
    pub sha: Option<String>,
    /// `owner/name`.
    pub repository: String,
    pub git_ref: String,
    /// The repository's default branch (in payloads that carry a `repository`).
    pub default_branch: String,
    pub actor: String,
    pub event_name: String,
    pub event: Value,
    pub vars: BTreeMap<String, String>,
    pub secrets: BTreeMap<String, String>,
    pub(crate) stand_ins: BTreeMap<String, StandIn>,
    /// Lower-case `owner/name` -> a local git repository holding its actions.
    pub(crate) action_sources: BTreeMap<String, PathBuf>,
    /// Lower-case `owner/name` -> the gh state dir of another repository the jobs may read.
    pub(crate) foreign_repos: BTreeMap<String, PathBuf>,
    pub(crate) tools: BTreeMap<String, String>,
    pub(crate) cache_dir: Option<PathBuf>,
    /// See [`Replay::arm64_legs_restore_the_x64_cache`].
    pub(crate) arm64_cache_from_x64: bool,
    /// See [`Replay::sigstore`].
    pub(crate) signer: Option<Signer>,
    /// GitHub's numeric ids of the repository and its owner (the OIDC token's
    /// `repository_id`, `repository_owner_id`).
    pub repository_id: String,
    pub repository_owner_id: String,
    pub(crate) root: Arc<tempfile::TempDir>,
}

impl Replay {
    /// A `workflow_dispatch` run without inputs of `workflow`, checking out `source_repo`'s HEAD,
    /// as repository `sandbox0/coding-agent-template` on `refs/heads/main`.
    pub fn new(workflow: impl AsRef<Path>, source_repo: impl AsRef<Path>) -> Result<Replay> {
        runner_ids()?;
        let root = tempfile::Builder::new()
            .prefix("replay-")
            .tempdir()
            .context("creating the replay's directory")?;
        set_mode(root.path(), 0o755)?;
        let gh = root.path().join("gh");
        std::fs::create_dir_all(&gh)?;
        give_to_runner(&gh)?;
        Ok(Replay {
            workflow: workflow.as_ref().to_path_buf(),
            source_repo: source_repo.as_ref().to_path_buf(),
            sha: None,
            repository: "sandbox0/coding-agent-template".into(),
            git_ref: "refs/heads/main".into(),
            default_branch: "main".into(),
            actor: "replay-actor".into(),
            event_name: "workflow_dispatch".into(),
            event: json!({ "inputs": {} }),
            vars: BTreeMap::new(),
            secrets: BTreeMap::new(),
            stand_ins: BTreeMap::new(),
            action_sources: BTreeMap::new(),
            foreign_repos: BTreeMap::new(),
            tools: BTreeMap::new(),
            cache_dir: None,
            arm64_cache_from_x64: false,
            signer: None,
            repository_id: "1".into(),
            repository_owner_id: "2".into(),
            root: Arc::new(root),
        })
    }
    pub fn repository(mut self, owner_name: &str) -> Self {
        self.repository = owner_name.into();
        self
    }
    pub fn event(mut self, name: &str, payload: Value) -> Self {
        self.event_name = name.into();
        self.event = payload;
        self
    }
    /// A `workflow_dispatch` event with these inputs (strings, booleans or numbers).
    pub fn dispatch(self, inputs: Value) -> Self {
        self.event("workflow_dispatch", json!({ "inputs": inputs }))
    }
    pub fn stand_in(mut self, action: &str, stand_in: StandIn) -> Self {
        self.stand_ins.insert(action.to_ascii_lowercase(), stand_in);
        self
    }
    /// Actions of repository `owner_name` (`uses: owner/name[/dir]@ref`) are loaded from the
    /// local git repository `git_repo` at `ref` (a commit or branch of it): composite actions,
    /// run step by step as GitHub runs them.
    pub fn action_source(mut self, owner_name: &str, git_repo: impl AsRef<Path>) -> Self {
        self.action_sources.insert(
            owner_name.to_ascii_lowercase(),
            git_repo.as_ref().to_path_buf(),
        );
        self
    }
    /// Another (public) repository whose releases and attestations live in `state_dir` (gh.py's
    /// format, see [`add_release`], [`record_attestation`]): `gh ... --repo owner/name` reads
    /// them with any valid token, and refuses every change (HTTP 403). Each job sees a copy
    /// taken when it starts.
    pub fn gh_foreign_repository(mut self, owner_name: &str, state_dir: impl AsRef<Path>) -> Self {
        self.foreign_repos.insert(
            owner_name.to_ascii_lowercase(),
            state_dir.as_ref().to_path_buf(),
        );
        self
    }
    pub fn secret(mut self, name: &str, value: &str) -> Self {
        self.secrets.insert(name.into(), value.into());
        self
    }
    /// Puts an executable `name` with this script (start it with a `#!` line) first on the
    /// runner's PATH, in front of the real one: fakes for the fast replays of a release
    /// workflow (`cargo`, `rustup`, `sudo`...). A `gh` here replaces the gh stand-in.
    pub fn fake_tool(mut self, name: &str, script: &str) -> Self {
        self.tools.insert(name.into(), script.into());
        self
    }
    /// Where `actions/cache` keeps entries (default: inside this replay's directory).
    /// A shortcut the real runners do not take, for the test suite's time: an `actions/cache`
    /// restore on an ARM64 leg that finds no entry for its key restores the entry saved under
    /// the same key with `X64` in place of `ARM64`, and says so in the step's log. Every leg
    /// runs on this x86 machine (above), so that entry holds exactly what the ARM64 leg would
    /// compile (a cold build of the tool: minutes on two cores). The keys, restore order and
    /// save rules stay actions/cache's; only where an ARM64 miss looks next is the harness's.
    pub fn arm64_legs_restore_the_x64_cache(mut self) -> Self {
        self.arm64_cache_from_x64 = true;
        self
    }
    /// Sigstore for the attest actions: `signer` is called with the in-toto statement an
    /// attest step would sign and the job's identity ([`JobIdentity`](crate::JobIdentity), the
    /// claims of its OIDC token that Fulcio puts in the certificate) and returns the Sigstore
    /// bundle, which the step writes where actions/attest writes it (its `bundle-path`).
    /// `trusted_root` (a Sigstore trusted root verifying what `signer` makes) is what the gh
    /// stand-in's `gh attestation trusted-root` prints. Without this, attest steps record their
    /// subjects and sign nothing: no bundle, no `bundle-path`.
    pub fn sigstore(
        mut self,
        trusted_root: &Value,
        signer: impl Fn(&Value, &crate::JobIdentity) -> Result<Value> + Send + Sync + 'static,
    ) -> Result<Self> {
        self.trusted_root(trusted_root)?;
        self.signer = Some(Arc::new(signer));
        Ok(self)
    }
    /// Only the trusted root of [`Replay::sigstore`], for a workflow that verifies and signs
    /// nothing.
    pub fn trusted_root(&self, trusted_root: &Value) -> Result<()> {
        let path = self.gh_state_dir().join(crate::gh_state::TRUSTED_ROOT_FILE);
        std::fs::write(&path, format!("{trusted_root}\n"))
            .with_context(|| format!("writing {}", path.display()))?;
        give_to_runner(&path)
    }
    pub fn cache_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.cache_dir = Some(dir.as_ref().to_path_buf());
        self
    }
    /// The replay's own directory (removed when the last clone of this Replay is dropped).
    pub fn root(&self) -> &Path {
        self.root.path()
    }
    /// The gh stand-in's state: `releases/<tag>/release.json` + `assets/`.
    pub fn gh_state_dir(&self) -> PathBuf {
        self.root().join("gh")
    }
    /// Makes the next `gh <subcommand>` (e.g. `release edit`) fail once.
    pub fn gh_fail_once(&self, subcommand: &str) -> Result<()> {
        let path = self.gh_state_dir().join("fail-once");
        std::fs::write(&path, subcommand)?;
        give_to_runner(&path)
    }
    pub(crate) fn cache_store(&self) -> PathBuf {
        self.cache_dir
            .clone()
            .unwrap_or_else(|| self.root().join("cache"))
    }
}
