//! What the attest actions sign, and as whom: the in-toto statement each one makes and the
//! job's identity as its OIDC token states it. The signing itself is the test's
//! ([`Replay::sigstore`](crate::Replay::sigstore)): this crate holds no key and no CA.

use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context as _, Result};
use serde_json::{json, Value};

use super::attest::Subject;
use crate::leg::Leg;

/// A Sigstore signer for the attest actions: the statement and the identity in, the bundle
/// (`application/vnd.dev.sigstore.bundle...+json`) out.
pub type Signer = Arc<dyn Fn(&Value, &JobIdentity) -> Result<Value> + Send + Sync>;

/// The claims of a job's GitHub Actions OIDC token that Fulcio copies into the signing
/// certificate (sigstore/fulcio `docs/oid-info.md`, at sigstore/fulcio@001376a5: the subject
/// alternative name is `server_url/job_workflow_ref`; `1.3.6.1.4.1.57264.1.8` issuer, `.9`
/// build signer URI `server_url/job_workflow_ref`, `.10` its digest `job_workflow_sha`, `.11`
/// `runner_environment`, `.12` `server_url/repository`, `.13` `sha`, `.14` `ref`, `.15`
/// `repository_id`, `.16` `server_url/repository_owner`, `.17` `repository_owner_id`, `.18`
/// build config `server_url/workflow_ref`, `.19` `workflow_sha`, `.20` `event_name`, `.21`
/// `server_url/repository/actions/runs/run_id/attempts/run_attempt`, `.22`
/// `repository_visibility`). The field names are the token's.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct JobIdentity {
    /// `https://token.actions.githubusercontent.com`.
    pub iss: String,
    /// `owner/name`.
    pub repository: String,
    pub repository_id: String,
    pub repository_owner: String,
    pub repository_owner_id: String,
    /// `public`, `private` or `internal`.
    pub repository_visibility: String,
    /// `refs/heads/main`.
    #[serde(rename = "ref")]
    pub git_ref: String,
    pub sha: String,
    pub event_name: String,
    /// `owner/name/.github/workflows/<file>@<ref>`: the workflow the run started.
    pub workflow_ref: String,
    pub workflow_sha: String,
    /// The workflow the job's steps come from: the same as `workflow_ref` for a job that is
    /// not in a reusable workflow (the replay runs none).
    pub job_workflow_ref: String,
    pub job_workflow_sha: String,
    pub run_id: String,
    pub run_attempt: String,
    /// `github-hosted` (every replayed job stands in for a GitHub-hosted runner).
    pub runner_environment: String,
    /// The instance actions/attest signs with: `public-good` or `github` (actions/attest
    /// v4.1.0 `src/main.ts`: public-good only when the event payload's
    /// `repository.visibility` is `public`).
    pub sigstore_instance: String,
}

impl JobIdentity {
    /// The job's identity as its token would state it.
    pub(crate) fn of(leg: &Leg, sigstore_instance: &str) -> JobIdentity {
        let github = &leg.github;
        let text = |key: &str| github[key].as_str().unwrap_or_default().to_string();
        let replay = &leg.env.run.replay;
        let workflow_ref = text("workflow_ref");
        JobIdentity {
            iss: "https://token.actions.githubusercontent.com".into(),
            repository: text("repository"),
            repository_id: replay.repository_id.clone(),
            repository_owner: text("repository_owner"),
            repository_owner_id: replay.repository_owner_id.clone(),
            // GitHub's OIDC token documentation: the visibility of the repository the
            // workflow runs in; the replayed repositories are public (`event_payload`).
            repository_visibility: "public".into(),
            git_ref: text("ref"),
            sha: text("sha"),
            event_name: text("event_name"),
            job_workflow_ref: workflow_ref.clone(),
            workflow_ref,
            workflow_sha: text("sha"),
            job_workflow_sha: text("sha"),
            run_id: text("run_id"),
            run_attempt: text("run_attempt"),
            runner_environment: "github-hosted".into(),
            sigstore_instance: sigstore_instance.into(),
        }
    }

    /// Fulcio's subject alternative name (and build signer URI) for this job.
    pub fn workflow_uri(&self) -> String {
        format!("https://github.com/{}", self.job_workflow_ref)
    }
}

/// The SLSA v1 provenance predicate actions/attest makes for a job (`@actions/attest`'s
/// `buildSLSAProvenancePredicate`, actions/toolkit `packages/attest/src/provenance.ts`, which
/// actions/attest v4.1.0 `src/provenance.ts` calls): build type
/// `https://actions.github.io/buildtypes/workflow/v1`, the workflow's path and ref split off
/// `workflow_ref`, the token's ids and runner environment, the commit, the builder (the job's
/// workflow) and the run attempt.
pub(crate) fn provenance_predicate(id: &JobIdentity) -> Value {
    let server = "https://github.com";
    let rest = id
        .workflow_ref
        .strip_prefix(&format!("{}/", id.repository))
        .unwrap_or(&id.workflow_ref);
    // A tag may hold `@`: the path is before the first one, the ref all after it.
    let (path, workflow_ref) = rest.split_once('@').unwrap_or((rest, ""));
    json!({
        "buildDefinition": {
            "buildType": "https://actions.github.io/buildtypes/workflow/v1",
            "externalParameters": { "workflow": {
                "ref": workflow_ref,
                "repository": format!("{server}/{}", id.repository),
                "path": path,
            }},
            "internalParameters": { "github": {
                "event_name": id.event_name,
                "repository_id": id.repository_id,
                "repository_owner_id": id.repository_owner_id,
                "runner_environment": id.runner_environment,
            }},
            "resolvedDependencies": [{
                "uri": format!("git+{server}/{}@{}", id.repository, id.git_ref),
                "digest": { "gitCommit": id.sha },
            }],
        },
        "runDetails": {
            "builder": { "id": format!("{server}/{}", id.job_workflow_ref) },
            "metadata": { "invocationId": format!(
                "{server}/{}/actions/runs/{}/attempts/{}", id.repository, id.run_id, id.run_attempt) },
        },
    })
}

/// A custom predicate (`predicate` or `predicate-path`), parsed as the action parses it
/// (actions/attest v4.1.0 `src/predicate.ts`: one of the two, a file of at most 16 MB, then
/// `JSON.parse`).
pub(crate) fn custom_predicate(
    workspace: &Path,
    inline: Option<&str>,
    path: Option<&str>,
) -> Result<Value> {
    let text = match (inline, path) {
        (Some(_), Some(_)) => bail!("Only one of predicate-path or predicate may be provided"),
        (Some(text), None) => text.to_string(),
        (None, Some(file)) => {
            let file = crate::glob::normalize(workspace, file);
            let bytes = std::fs::read(&file)
                .map_err(|_| anyhow!("predicate file not found: {}", file.display()))?;
            if bytes.len() > 16 << 20 {
                bail!("predicate file exceeds maximum allowed size: 16777216 bytes");
            }
            String::from_utf8(bytes).context("the predicate file is not UTF-8")?
        }
        (None, None) => bail!("One of predicate-path or predicate must be provided"),
    };
    serde_json::from_str(&text).context("the predicate is not JSON")
}

/// The in-toto statement (v1) over `subjects` (`@actions/attest` `buildIntotoStatement`,
/// actions/toolkit `packages/attest/src/intoto.ts`): each subject's digest as
/// `{"sha256": hex}`.
pub(crate) fn statement(subjects: &[Subject], predicate_type: &str, predicate: Value) -> Value {
    let subject: Vec<Value> = subjects
        .iter()
        .map(|s| {
            let (alg, hex) = s.digest.split_once(':').unwrap_or(("sha256", &s.digest));
            json!({ "name": s.name, "digest": { alg: hex } })
        })
        .collect();
    json!({
        "_type": "https://in-toto.io/Statement/v1",
        "subject": subject,
        "predicateType": predicate_type,
        "predicate": predicate,
    })
}
