//! `cargo xtask release plan`: decides whether there is a release, and which.
//!
//! The plan is the one place where the release's decisions are made — cadence, versions,
//! tag, "did anything change", "may this run publish" — so that the maintainer's
//! `cargo xtask release` and the scheduled workflow cannot disagree: both run this phase and
//! obey its `plan.json`. The decisions are pure functions ([`decide`], [`publish_decision`],
//! [`changes_since`], [`release_tag`]); [`run`] gathers their inputs (previous receipts, the
//! gate, resolve and lock steps, the GitHub context) and writes the outcome.
//!
//! The plan's clock (`now`) is the release's clock: the receipt's `created_at` comes from it,
//! so re-running any later phase of the same plan writes the same receipt, byte for byte.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use chrono::{DateTime, Utc};

use crate::release::previous::{self, PreviousRelease};
use crate::release::published;
use crate::release::steps::{read_json, render_times, write_json, Step, StepRunner};
use crate::util::{sha256_file, sha256_hex};
use template_formats::manifest::{Manifest, Platform};
use template_formats::model::gate::GateDecision;
use template_formats::model::plan::{
    Action, Change, InputDigest, PreviousSummary, ReleasePlan, Target, PLAN_SCHEMA_VERSION,
};
use template_formats::model::receipt::Receipt;
use template_formats::model::resolution::Resolution;
use template_formats::model::rfc3339;
use template_formats::paths::{MANIFEST, RELEASE_INPUTS};
use template_verify::receipt::policy::ReceiptPolicy;

pub(crate) const PLAN_FILE: &str = "plan.json";

/// The phase's steps, in order.
pub(crate) const STEP_NAMES: [&str; 3] = ["gate", "resolve", "lock"];

/// The plan `release plan` wrote into `dir`, of this tool's schema version.
pub(crate) fn load_plan(dir: &Path) -> Result<ReleasePlan> {
    let plan: ReleasePlan = read_json(&dir.join(PLAN_FILE), "a release plan")?;
    if plan.schema_version != PLAN_SCHEMA_VERSION {
        bail!(
            "{} has schema_version {}, this tool reads {PLAN_SCHEMA_VERSION}: run \
             `cargo xtask release plan` again with this version of the tool",
            dir.join(PLAN_FILE).display(),
            plan.schema_version
        );
    }
    Ok(plan)
}

/// The release tag: the day and a digest of what is released, so the same inputs on the same
/// day name the same release (publishing it again is then a no-op) and anything else a new one.
pub(crate) fn release_tag(now: DateTime<Utc>, inputs_digest: &str) -> String {
    format!("{}-{}", now.format("%Y.%m.%d"), &inputs_digest[..12])
}

/// One digest over every input, path and content.
pub(crate) fn inputs_digest(inputs: &[InputDigest]) -> String {
    sha256_hex(
        inputs
            .iter()
            .map(|i| format!("{} {}\n", i.path, i.sha256))
            .collect::<String>()
            .as_bytes(),
    )
}

/// True when `previous` released exactly these inputs for at least these platforms, completely.
pub(crate) fn unchanged_since(
    previous: &Receipt,
    inputs: &[InputDigest],
    platforms: &[Platform],
) -> bool {
    let recorded = |path: &str| {
        previous
            .artifacts
            .iter()
            .find(|a| a.path == path)
            .map(|a| a.sha256.as_str())
    };
    previous.complete
        && inputs
            .iter()
            .all(|i| recorded(&i.path) == Some(i.sha256.as_str()))
        && platforms
            .iter()
            .all(|p| previous.platforms.iter().any(|r| r.platform == *p))
}

/// The top-level packages whose version differs from the previous release's. The baseline is
/// the previous release's receipt, not the checkout's lockfile: the workflow never commits its
/// lockfile, so the checkout's can be many releases old.
pub(crate) fn changes_since(previous: Option<&Receipt>, resolution: &Resolution) -> Vec<Change> {
    resolution
        .packages
        .iter()
        .filter_map(|p| {
            let before = previous
                .and_then(|r| r.packages.iter().find(|q| q.name == p.name))
                .map(|q| q.version.clone());
            if before.as_deref() == Some(p.version.to_string().as_str()) {
                return None;
            }
            let rollback = match before.as_deref().map(semver::Version::parse) {
                Some(Ok(from)) => p.version < from,
                _ => false,
            };
            Some(Change {
                name: p.name.clone(),
                from: before,
                to: p.version.to_string(),
                rollback,
            })
        })
        .collect()
}

/// What the due gate and the inputs decide: the action, why, and the tag.
pub(crate) fn decide(
    now: DateTime<Utc>,
    gate: &GateDecision,
    previous: Option<&Receipt>,
    inputs: &[InputDigest],
    platforms: &[Platform],
) -> (Action, String, Option<String>) {
    if !gate.due {
        return (Action::NotDue, format!("not due: {}", gate.reason), None);
    }
    let tag = release_tag(now, &inputs_digest(inputs));
    if let Some(previous) = previous {
        if unchanged_since(previous, inputs, platforms) {
            return (
                Action::Unchanged,
                format!(
                    "nothing changed since release {}: same versions, lockfile, Dockerfile, \
                     install plan and manifest, so nothing is built or published",
                    previous.release_tag
                ),
                None,
            );
        }
    }
    let why = match previous {
        None => "no previous release verifies: a first release".to_string(),
        Some(p) => format!("the inputs differ from release {}", p.release_tag),
    };
    (
        Action::Release,
        format!("{}; {why}", gate.reason),
        Some(tag),
    )
}

/// Where the run comes from, when it runs under GitHub Actions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GithubRef {
    /// `GITHUB_REF`, e.g. `refs/heads/main`.
    pub git_ref: String,
    /// The repository's default branch, as far as the runner tells it ([`github_ref`]).
    pub default_branch: Option<String>,
}

/// What the runner provides about the run: `GITHUB_EVENT_NAME`, `GITHUB_REF` and the event
/// payload (`GITHUB_EVENT_PATH`), read at the command's edge.
#[derive(Debug, Clone, Default)]
pub(crate) struct GithubEnv {
    pub event_name: String,
    pub git_ref: String,
    /// The payload, when the runner wrote one.
    pub payload: Option<serde_json::Value>,
}

/// The default branch, decided from what the runner provides, without an API call.
///
/// - `schedule`: GitHub runs scheduled workflows on the latest commit of the default branch
///   and sets `GITHUB_REF` to it ("Events that trigger workflows", `schedule`: "Scheduled
///   workflows will only run on the default branch"; `GITHUB_REF` "default branch"). The
///   payload carries no `repository` object (the events documentation lists its webhook payload
///   as not applicable; github/codeql-action#1211, docker/metadata-action#184,
///   ossf/scorecard-action#73 and #106, letsencrypt/boulder#6209), so the ref is the answer.
/// - any other event (`workflow_dispatch` here): the payload's `repository.default_branch`;
///   without it, none (publishing is then refused rather than guessed).
pub(crate) fn github_ref(env: &GithubEnv) -> GithubRef {
    let default_branch = if env.event_name == "schedule" {
        env.git_ref.strip_prefix("refs/heads/").map(str::to_owned)
    } else {
        env.payload
            .as_ref()
            .and_then(|p| p["repository"]["default_branch"].as_str())
            .map(str::to_owned)
    };
    GithubRef {
        git_ref: env.git_ref.clone(),
        default_branch,
    }
}

/// Whether later phases may push and publish. Releases come only from the default branch: a
/// manual run on another branch builds and smoke-tests, and publishes nothing.
pub(crate) fn publish_decision(no_publish: bool, github: Option<&GithubRef>) -> (bool, String) {
    if no_publish {
        return (
            false,
            "--no-publish: build and smoke-test only, push nothing".into(),
        );
    }
    match github {
        None => (true, "a maintainer's run on this machine".into()),
        Some(GithubRef {
            git_ref,
            default_branch: Some(default),
        }) if *git_ref == format!("refs/heads/{default}") => {
            (true, format!("running on the default branch {default}"))
        }
        Some(GithubRef {
            git_ref,
            default_branch: Some(default),
        }) => (
            false,
            format!(
                "running on {git_ref}, not the default branch {default}: releases are published \
                 only from {default}"
            ),
        ),
        Some(GithubRef {
            git_ref,
            default_branch: None,
        }) => (
            false,
            format!(
                "running on {git_ref}, and the event names no default branch: publishing is \
                 refused rather than guessed"
            ),
        ),
    }
}

/// The lines for `$GITHUB_OUTPUT`.
pub(crate) fn github_outputs(plan: &ReleasePlan) -> String {
    format!(
        "action={}\ntag={}\npublish={}\nnow={}\n",
        plan.action.as_str(),
        plan.tag.as_deref().unwrap_or(""),
        plan.publish && plan.action == Action::Release,
        rfc3339(plan.now)
    )
}

/// Markdown for `$GITHUB_STEP_SUMMARY` (and the end of a local run).
pub(crate) fn summary_markdown(plan: &ReleasePlan) -> String {
    let mut out = format!(
        "## Release plan: {}\n\n{}\n\n",
        plan.action.as_str(),
        plan.reason
    );
    if let Some(tag) = &plan.tag {
        out.push_str(&format!(
            "- tag `{tag}`, platforms {}\n- publish: {} ({})\n",
            plan.platforms
                .iter()
                .map(|p| format!("`{p}`"))
                .collect::<Vec<_>>()
                .join(", "),
            plan.publish,
            plan.publish_reason
        ));
    }
    match &plan.previous {
        Some(p) => out.push_str(&format!(
            "- previous release `{}` ({}), `{}`\n",
            p.tag, p.created_at, p.reference
        )),
        None => out.push_str("- no previous release verifies\n"),
    }
    if !plan.changes.is_empty() {
        out.push_str("\n| package | previous | now |\n| --- | --- | --- |\n");
        for c in &plan.changes {
            out.push_str(&format!(
                "| `{}` | {} | {}{} |\n",
                c.name,
                c.from.as_deref().unwrap_or("—"),
                c.to,
                if c.rollback { " **ROLLBACK**" } else { "" }
            ));
        }
    }
    out
}

/// The GitHub context of the settings (the variables the runner sets, read once by main),
/// with the event payload its `GITHUB_EVENT_PATH` names.
pub(crate) fn github_env(settings: &crate::settings::Settings) -> Result<Option<GithubEnv>> {
    let Some(github) = &settings.github else {
        return Ok(None);
    };
    let payload = match &github.event_path {
        None => None,
        Some(path) => Some(read_json(path, "the GitHub event (GITHUB_EVENT_PATH)")?),
    };
    Ok(Some(GithubEnv {
        event_name: github.event_name.clone(),
        git_ref: github.git_ref.clone(),
        payload,
    }))
}

/// The release inputs in the checkout at `root`.
pub(crate) fn current_inputs(root: &Path) -> Result<Vec<InputDigest>> {
    RELEASE_INPUTS
        .iter()
        .map(|path| {
            Ok(InputDigest {
                path: path.to_string(),
                sha256: sha256_file(&root.join(path))?,
            })
        })
        .collect()
}

/// Later phases run in other checkouts (other runners): they must hold what the plan wrote.
pub(crate) fn ensure_checkout_matches(root: &Path, plan: &ReleasePlan) -> Result<()> {
    let current = current_inputs(root)?;
    for expected in &plan.inputs {
        let found = current.iter().find(|c| c.path == expected.path);
        if found.map(|f| &f.sha256) != Some(&expected.sha256) {
            bail!(
                "{} in {} is not the file the plan wrote (sha256 {} expected): put the plan's \
                 template files into the checkout first (the workflow downloads the `plan` \
                 artifact), or run `cargo xtask release plan` again",
                expected.path,
                root.display(),
                expected.sha256
            );
        }
    }
    Ok(())
}

/// What a plan is made from: the options `release` and `release plan` share.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanOptions {
    pub registry: crate::npm::resolve::RegistryAndClock,
    /// Proceed whatever the cadence says.
    pub force: bool,
    /// Build and smoke-test only: push nothing, publish no release.
    pub no_publish: bool,
    /// Where previous releases' receipts are (`receipt-*.json`, in subdirectories too).
    pub previous_receipts: PathBuf,
    /// The repository's published release tags (`gh release list --json tagName,isDraft`);
    /// a tag in it ends the plan. Without it, only the previous receipt decides "unchanged".
    pub published_tags: Option<PathBuf>,
    /// The platforms to release; empty is the command's default (see `release::run`).
    pub platforms: Vec<Platform>,
    /// Where the images and the index go; the repository as given (the plan lowercases it).
    pub target: Target,
}

/// The options the plan was made from, resolved to values.
pub(crate) struct PlanRequest<'a> {
    pub options: &'a PlanOptions,
    pub root: &'a Path,
    pub out: &'a Path,
    pub now: DateTime<Utc>,
    pub platforms: Vec<Platform>,
    /// What the GitHub runner says about the run; `None` off GitHub (a maintainer's run).
    pub github: Option<GithubEnv>,
    /// Where the plan's outputs and summary go (`GITHUB_OUTPUT`, `GITHUB_STEP_SUMMARY`).
    pub verifier: &'a template_verify::settings::Environment,
}

/// Runs the plan phase: previous release, gate, and when due resolve + lock, then decides.
pub(crate) async fn run(request: PlanRequest<'_>, runner: &mut StepRunner) -> Result<ReleasePlan> {
    let PlanRequest {
        options,
        root,
        out,
        now,
        platforms,
        github,
        verifier,
    } = request;
    let manifest = Manifest::load(&root.join(MANIFEST))?;
    for p in &platforms {
        if !manifest.platforms.contains(p) {
            bail!("{MANIFEST} does not list {p} under `platforms`");
        }
    }
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let now_text = rfc3339(now);

    let previous = find_previous(root, options, runner)?;
    // Read before the gate, resolve and lock: a file of the wrong form fails in a second.
    let published_tags = match &options.published_tags {
        Some(file) => published::read_published_tags(&root.join(file))?,
        None => Default::default(),
    };
    let previous = previous.as_ref();
    // The ship phase makes the release notes from it, in another job.
    previous::keep_for_notes(previous, out)?;

    runner
        .run(&gate_step(
            options,
            &now_text,
            previous.map(|p| p.path.as_path()),
            out,
        ))
        .await?;
    let gate: GateDecision = read_json(&out.join("gate.json"), "the gate's decision")?;

    let (inputs, changes) = if gate.due {
        let resolution = resolve_and_lock(runner, options, &now_text, out).await?;
        (
            current_inputs(root)?,
            changes_since(previous.map(|p| &p.receipt), &resolution),
        )
    } else {
        (Vec::new(), Vec::new())
    };

    let (action, reason, tag) = published::end_if_published(
        decide(
            now,
            &gate,
            previous.map(|p| &p.receipt),
            &inputs,
            &platforms,
        ),
        &published_tags,
    );
    let (publish, publish_reason) =
        publish_decision(options.no_publish, github.as_ref().map(github_ref).as_ref());
    let plan = ReleasePlan {
        schema_version: PLAN_SCHEMA_VERSION,
        now,
        action,
        reason,
        publish,
        publish_reason,
        tag,
        platforms,
        // OCI repository names are lowercase; GitHub owners (`<owner>/coding-agent`) may not be.
        target: Target {
            registry: options.target.registry.clone(),
            repository: options.target.repository.to_lowercase(),
        },
        npm_registry: options.registry.registry.clone(),
        gate,
        previous: previous.map(|p| PreviousSummary {
            receipt: p.path.clone(),
            tag: p.receipt.release_tag.clone(),
            created_at: p.receipt.created_at.clone(),
            reference: p.receipt.index.reference.clone(),
        }),
        inputs_digest: if inputs.is_empty() {
            String::new()
        } else {
            inputs_digest(&inputs)
        },
        inputs,
        changes,
    };
    write_json(&out.join(PLAN_FILE), &plan)?;
    crate::util::append_to_github_file(&verifier.github_output, &github_outputs(&plan))?;
    crate::util::append_to_github_file(&verifier.github_step_summary, &summary_markdown(&plan))?;
    announce(&plan, runner);
    Ok(plan)
}

/// The newest previous receipt that verifies; the ones passed over are reported, with why.
fn find_previous(
    root: &Path,
    options: &PlanOptions,
    runner: &StepRunner,
) -> Result<Option<PreviousRelease>> {
    let candidates = previous::receipts_below(&root.join(&options.previous_receipts))?;
    let policy = ReceiptPolicy::checkout(&root.join(MANIFEST))?;
    let selection = previous::newest_verified(&candidates, &policy)?;
    for line in &selection.ignored {
        runner.progress.step(line);
    }
    match &selection.newest {
        Some(p) => runner.progress.step(format!(
            "previous release: {} ({})",
            p.receipt.release_tag,
            p.path.display()
        )),
        None => runner.progress.step(format!(
            "no previous release verifies among {} receipt(s) in {}",
            candidates.len(),
            options.previous_receipts.display()
        )),
    }
    Ok(selection.newest)
}

/// The gate step: the plan's clock, `--force`, and the previous release's receipt when one
/// verifies (its `created_at` decides a catch-up).
pub(crate) fn gate_step(
    options: &PlanOptions,
    now_text: &str,
    previous_receipt: Option<&Path>,
    out: &Path,
) -> Step {
    let gate = crate::release::gate::GateRequest {
        now: Some(now_text.to_string()),
        force: options.force,
        previous_receipt: previous_receipt
            .map(Path::to_path_buf)
            .into_iter()
            .collect(),
        json: true,
    };
    Step::new("gate", gate).output(out.join("gate.json"))
}

/// `resolve` and `lock`, in that order: both ask the same registry with the plan's clock.
pub(crate) fn resolve_and_lock_steps(
    options: &PlanOptions,
    now_text: &str,
    out: &Path,
) -> [Step; 2] {
    let registry = crate::npm::resolve::RegistryAndClock {
        registry: options.registry.registry.clone(),
        now: Some(now_text.to_string()),
        trust: options.registry.trust.clone(),
    };
    let resolve = crate::npm::resolve::ResolveRequest {
        registry: registry.clone(),
        json: true,
    };
    let lock = crate::npm::lock::LockRequest {
        registry,
        check: false,
        dry_run: false,
        json: true,
    };
    [
        Step::new("resolve", resolve).output(out.join("resolve.json")),
        Step::new("lock", lock).output(out.join("lock.json")),
    ]
}

/// Runs `resolve` and `lock` as children and reads back the resolution.
async fn resolve_and_lock(
    runner: &mut StepRunner,
    options: &PlanOptions,
    now_text: &str,
    out: &Path,
) -> Result<Resolution> {
    for step in resolve_and_lock_steps(options, now_text, out) {
        runner.run(&step).await?;
    }
    read_json(&out.join("resolve.json"), "a resolution")
}

fn announce(plan: &ReleasePlan, runner: &StepRunner) {
    runner.progress.step(format!(
        "plan: {} — {}{}",
        plan.action.as_str(),
        plan.reason,
        plan.tag
            .as_deref()
            .map(|t| format!(" (tag {t}, publish: {})", plan.publish))
            .unwrap_or_default()
    ));
    for change in &plan.changes {
        runner.progress.step(format!("  {change}"));
    }
    eprint!("{}", render_times("plan steps:", &runner.times));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::release::gate::decide as gate_decide;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    fn previous_receipt() -> Receipt {
        serde_json::from_str(include_str!("../../../tests/fixtures/receipt-minimal.json")).unwrap()
    }

    fn inputs_of(receipt: &Receipt) -> Vec<InputDigest> {
        RELEASE_INPUTS
            .iter()
            .map(|path| InputDigest {
                path: path.to_string(),
                sha256: receipt
                    .artifacts
                    .iter()
                    .find(|a| a.path == *path)
                    .unwrap()
                    .sha256
                    .clone(),
            })
            .collect()
    }

    #[test]
    fn not_due_decides_nothing_else() {
        let now = at("2026-12-01T04:37:00Z");
        let gate = gate_decide(now, 3, false, None);
        let (action, reason, tag) = decide(now, &gate, None, &[], &Platform::ALL);
        assert_eq!(action, Action::NotDue);
        assert!(reason.starts_with("not due: epoch day 20788"), "{reason}");
        assert_eq!(tag, None);
    }

    #[test]
    fn a_due_day_with_the_previous_inputs_is_unchanged() {
        let now = at("2026-11-30T04:37:00Z");
        let gate = gate_decide(now, 3, false, None);
        let mut previous = previous_receipt();
        let inputs = inputs_of(&previous);
        // The fixture released amd64 only; the same inputs for amd64 are unchanged...
        previous.platforms = vec![];
        let (action, _, _) = decide(now, &gate, Some(&previous), &inputs, &[]);
        assert_eq!(action, Action::Unchanged);
        // ... one changed file is a release, tagged by day and content.
        let mut changed = inputs.clone();
        changed[1].sha256 = "f".repeat(64);
        let (action, reason, tag) = decide(now, &gate, Some(&previous), &changed, &[]);
        assert_eq!(action, Action::Release);
        assert!(reason.contains("the inputs differ from release 2026.11.27-0123456789ab"));
        let tag = tag.unwrap();
        assert_eq!(tag, release_tag(now, &inputs_digest(&changed)));
        assert!(tag.starts_with("2026.11.30-"));
        // An incomplete previous release never counts as "unchanged".
        previous.complete = false;
        assert_eq!(
            decide(now, &gate, Some(&previous), &inputs, &[]).0,
            Action::Release
        );
    }

    /// A release made while the install plan was inline in the Dockerfile records no
    /// install-plan.js: the checkout's install plan is then a new input, so the day releases
    /// rather than call the new Dockerfile and its install plan unchanged.
    #[test]
    fn a_previous_release_without_the_install_plan_is_not_unchanged() {
        let now = at("2026-11-30T04:37:00Z");
        let gate = gate_decide(now, 3, false, None);
        let mut previous = previous_receipt();
        previous.platforms = vec![];
        let inputs = inputs_of(&previous);
        assert_eq!(
            decide(now, &gate, Some(&previous), &inputs, &[]).0,
            Action::Unchanged
        );
        previous
            .artifacts
            .retain(|a| a.path != template_formats::paths::INSTALL_PLAN);
        let (action, reason, _) = decide(now, &gate, Some(&previous), &inputs, &[]);
        assert_eq!(action, Action::Release, "{reason}");
    }

    #[test]
    fn the_same_inputs_on_the_same_day_name_the_same_release() {
        let inputs = inputs_of(&previous_receipt());
        let morning = release_tag(at("2026-11-30T04:37:00Z"), &inputs_digest(&inputs));
        let evening = release_tag(at("2026-11-30T23:59:59Z"), &inputs_digest(&inputs));
        let next_day = release_tag(at("2026-12-01T00:00:00Z"), &inputs_digest(&inputs));
        assert_eq!(morning, evening);
        assert_ne!(morning, next_day);
        assert_eq!(morning.len(), "2026.11.30-".len() + 12);
    }

    #[test]
    fn only_the_default_branch_publishes() {
        let main = GithubRef {
            git_ref: "refs/heads/main".into(),
            default_branch: Some("main".into()),
        };
        let feature = GithubRef {
            git_ref: "refs/heads/try-arm".into(),
            default_branch: Some("main".into()),
        };
        let unknown = GithubRef {
            git_ref: "refs/heads/main".into(),
            default_branch: None,
        };
        assert!(publish_decision(false, None).0);
        assert!(publish_decision(false, Some(&main)).0);
        let (publish, why) = publish_decision(false, Some(&feature));
        assert!(!publish);
        assert!(why.contains("refs/heads/try-arm") && why.contains("only from main"));
        assert!(!publish_decision(false, Some(&unknown)).0);
        assert!(!publish_decision(true, Some(&main)).0);
    }

    /// GitHub's `schedule` payload: the cron expression and, since 2022, the workflow file
    /// (peter-evans/create-pull-request#30 quotes `{"schedule": "* * * * *"}`; GitHub's
    /// changelog entry "additional information available in github event payload for
    /// scheduled workflow runs" added `workflow`). No `repository`, no `sender`.
    fn schedule_payload() -> serde_json::Value {
        serde_json::json!({
            "schedule": "37 4 * * *",
            "workflow": ".github/workflows/update-template.yml"
        })
    }

    /// GitHub's `workflow_dispatch` payload (webhook docs, "workflow_dispatch"): `inputs`,
    /// `ref`, `repository` (with `default_branch`, `visibility`), `sender`, `workflow`.
    fn dispatch_payload(git_ref: &str) -> serde_json::Value {
        serde_json::json!({
            "inputs": { "force": "false", "no_publish": "false" },
            "ref": git_ref,
            "repository": {
                "full_name": "octo-org/coding-agent-template",
                "default_branch": "main",
                "visibility": "public"
            },
            "sender": { "login": "octocat" },
            "workflow": ".github/workflows/update-template.yml"
        })
    }

    fn env(event_name: &str, git_ref: &str, payload: serde_json::Value) -> GithubEnv {
        GithubEnv {
            event_name: event_name.into(),
            git_ref: git_ref.into(),
            payload: Some(payload),
        }
    }

    #[test]
    fn a_scheduled_run_is_on_the_default_branch_its_ref_names() {
        let scheduled = github_ref(&env("schedule", "refs/heads/main", schedule_payload()));
        assert_eq!(scheduled.default_branch.as_deref(), Some("main"));
        let (publish, why) = publish_decision(false, Some(&scheduled));
        assert!(publish, "{why}");
        assert!(why.contains("default branch main"), "{why}");
        // A default branch of another name: the ref is still the answer.
        let trunk = github_ref(&env("schedule", "refs/heads/trunk", schedule_payload()));
        assert_eq!(trunk.default_branch.as_deref(), Some("trunk"));
        assert!(publish_decision(false, Some(&trunk)).0);
        // --no-publish still wins.
        assert!(!publish_decision(true, Some(&scheduled)).0);
    }

    #[test]
    fn a_dispatch_keeps_the_payload_rule() {
        let main = github_ref(&env(
            "workflow_dispatch",
            "refs/heads/main",
            dispatch_payload("refs/heads/main"),
        ));
        assert_eq!(main.default_branch.as_deref(), Some("main"));
        assert!(publish_decision(false, Some(&main)).0);
        let branch = github_ref(&env(
            "workflow_dispatch",
            "refs/heads/try-arm",
            dispatch_payload("refs/heads/try-arm"),
        ));
        let (publish, why) = publish_decision(false, Some(&branch));
        assert!(!publish && why.contains("only from main"), "{why}");
        // A dispatch whose payload lacks the repository (not what GitHub sends): refused, not
        // guessed from the ref as a schedule is.
        let bare = github_ref(&env(
            "workflow_dispatch",
            "refs/heads/main",
            serde_json::json!({ "inputs": {} }),
        ));
        assert_eq!(bare.default_branch, None);
        assert!(!publish_decision(false, Some(&bare)).0);
        // No payload file at all.
        let none = github_ref(&GithubEnv {
            event_name: "workflow_dispatch".into(),
            git_ref: "refs/heads/main".into(),
            payload: None,
        });
        assert!(!publish_decision(false, Some(&none)).0);
    }

    #[test]
    fn a_scheduled_run_on_a_ref_that_is_no_branch_publishes_nothing() {
        // Not something GitHub does for schedules; the rule must not turn it into a branch.
        let tag = github_ref(&env("schedule", "refs/tags/v1", schedule_payload()));
        assert_eq!(tag.default_branch, None);
        assert!(!publish_decision(false, Some(&tag)).0);
    }

    #[test]
    fn changes_are_measured_against_the_previous_release() {
        let previous = previous_receipt();
        let resolution = Resolution {
            cutoff: "2026-11-28T04:37:00Z".parse().unwrap(),
            now: "2026-11-30T04:37:00Z".parse().unwrap(),
            registry: "https://registry.npmjs.org/".into(),
            cooldown_hours: 48,
            inputs: template_formats::model::resolution::InputStatus::Unverified,
            packages: vec![
                resolved("@openai/codex", "0.171.0", false),
                resolved("ws", "8.23.0", false),
            ],
        };
        let changes = changes_since(Some(&previous), &resolution);
        assert_eq!(
            changes.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["@openai/codex: 0.170.0 -> 0.171.0", "ws: 8.23.0 (new)"]
        );
        // A rollback is measured against the previous release, whatever the checkout's lock
        // says (the resolver's own flag compares with the checkout).
        let mut back = resolution.clone();
        back.packages = vec![resolved("@openai/codex", "0.169.0", false)];
        assert_eq!(
            changes_since(Some(&previous), &back)[0].to_string(),
            "@openai/codex: 0.170.0 -> 0.169.0 (ROLLBACK)"
        );
        let mut same = resolution;
        same.packages = vec![resolved("@openai/codex", "0.170.0", false)];
        assert!(changes_since(Some(&previous), &same).is_empty());
    }

    fn resolved(
        name: &str,
        version: &str,
        rollback: bool,
    ) -> template_formats::model::resolution::Resolved {
        template_formats::model::resolution::Resolved {
            name: name.into(),
            version: version.parse().unwrap(),
            latest: version.parse().unwrap(),
            published: "2026-11-20T00:00:00Z".parse().unwrap(),
            locked: None,
            rollback,
            held_back: false,
            notes: vec![],
            rejected: vec![],
            signed_by: None,
            provenance: None,
            evidence: Default::default(),
            publisher: None,
            publisher_change: None,
            repository: None,
        }
    }

    #[test]
    fn outputs_and_summary_say_what_happens() {
        let now = at("2026-11-30T04:37:00Z");
        let gate = gate_decide(now, 3, false, None);
        let plan = ReleasePlan {
            schema_version: PLAN_SCHEMA_VERSION,
            now,
            action: Action::Release,
            reason: "due".into(),
            publish: false,
            publish_reason: "running on refs/heads/x".into(),
            tag: Some("2026.11.30-0123456789ab".into()),
            platforms: Platform::ALL.to_vec(),
            target: Target {
                registry: "ghcr.io".into(),
                repository: "sandbox0/coding-agent".into(),
            },
            npm_registry: "https://registry.npmjs.org/".into(),
            gate,
            previous: None,
            inputs: vec![],
            inputs_digest: String::new(),
            changes: vec![],
        };
        assert_eq!(
            github_outputs(&plan),
            "action=release\ntag=2026.11.30-0123456789ab\npublish=false\nnow=2026-11-30T04:37:00Z\n"
        );
        let summary = summary_markdown(&plan);
        assert!(
            summary.contains("publish: false (running on refs/heads/x)"),
            "{summary}"
        );
        let round_trip: ReleasePlan =
            serde_json::from_slice(&serde_json::to_vec(&plan).unwrap()).unwrap();
        assert_eq!(round_trip, plan);
    }
}
