//! The release workflow, replayed on this machine as a GitHub-hosted runner runs it: jobs in
//! `needs` order, every `run:` step as the non-root `runner` user with passwordless sudo, the
//! real `cargo xtask` commands, a real Docker engine, a local registry standing in for ghcr.io,
//! and a `gh` stand-in that keeps releases in a directory and refuses to change a published
//! one (tests/support/replay).
//!
//! The workflow file is replayed as committed, with two lines changed and checked: the registry
//! (ghcr.io -> 127.0.0.1:5000) and a fixed clock (`XTASK_NOW`), so that the plan reproduces the
//! committed lockfile and the images other tests built are reused (build ids are content
//! addresses). amd64 runs natively, arm64 under qemu.
//!
//! Scenarios share one Rust build cache and run one at a time.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{json, Value};

use crate::support::docker::{heavy_docker, local_registry, EngineGuard};
use crate::support::sigstore_standin::{GithubRun, SigstoreStandIn};
use crate::support::xtask::xtask;
use crate::support::{
    checkout_text, committed_resolved_at, replay_cache_store, runner_user, scratch_repo, unique,
};
use actions_replay::{
    rerun_failed, rerun_job, run_workflow, set_default_branch, JobIdentity, Replay, Status,
};

const WORKFLOW: &str = ".github/workflows/update-template.yml";
/// A cadence day (epoch day 20787) whose resolution reproduced the committed lockfile when
/// it was chosen (a partial mirror may since have filled in versions; nothing here needs it).
const DUE: &str = "2026-11-30T04:37:00Z";

/// The committed resolution's clock: epoch day 20786, not a cadence day.
fn not_due() -> String {
    committed_resolved_at()
}

/// One scenario at a time, and nothing else that uses the engine beside it: they share the
/// engine, the registry, /home/runner and the cache, and each builds both platforms.
fn serial() -> Option<EngineGuard<'static>> {
    heavy_docker()
}

struct Shared {
    /// A git repository holding this working tree's tracked files, committed on `main`.
    repo: tempfile::TempDir,
}

fn shared() -> &'static Shared {
    static SHARED: OnceLock<Shared> = OnceLock::new();
    SHARED.get_or_init(|| {
        runner_user();
        local_registry();
        // The tool's cold build (the plan job's first steps, replayed alone by the suite's lane
        // of cold builds, tests/support/cold_builds.rs) saved its cache entry: every scenario's
        // `plan` restores it, as runs after the first do on GitHub.
        crate::support::cold_builds::tool_cache();
        Shared {
            repo: scratch_repo("replay-repo-"),
        }
    })
}

/// The committed workflow with the registry and the clock replaced (and `edit` applied); each
/// replacement must match exactly once, so a change to the workflow cannot silently void it.
fn workflow(dir: &Path, now: &str, edit: &[(&str, &str)]) -> PathBuf {
    let mut text = checkout_text(WORKFLOW);
    let mut replacements = vec![
        (
            "  XTASK_OCI_REGISTRY: ghcr.io\n",
            format!(
                "  XTASK_OCI_REGISTRY: {}\n  XTASK_NOW: \"{now}\"\n",
                local_registry()
            ),
        ),
        (
            "  CARGO_TERM_COLOR: always\n",
            "  CARGO_TERM_COLOR: never\n".into(),
        ),
        // The npm registry these machines reach is a mirror that strips the registry's
        // signatures (docs/inputs.md): the replay runs the plan without requiring them, and
        // takes its inputs `unverified`, as the README's local release does.
        (
            "release plan --require-signed-inputs ",
            "release plan ".into(),
        ),
    ];
    replacements.extend(edit.iter().map(|(a, b)| (*a, b.to_string())));
    for (from, to) in replacements {
        assert_eq!(
            text.matches(from).count(),
            1,
            "{WORKFLOW} no longer holds {from:?} exactly once; update tests/it/replay.rs"
        );
        text = text.replace(from, &to);
    }
    let path = dir.join("update-template.yml");
    std::fs::write(&path, text).unwrap();
    path
}

/// `owner/coding-agent-template` with an owner of this test process's own: the workflow pushes
/// to `<owner>/coding-agent` in the shared local registry, and tags are immutable, so a
/// release left there by an earlier run of other code must not decide this run's outcome.
fn repository() -> &'static str {
    static REPOSITORY: OnceLock<String> = OnceLock::new();
    REPOSITORY.get_or_init(|| format!("{}/coding-agent-template", unique("sandbox0")))
}

/// The event as GitHub sends it (the harness completes the payload per event, citing its
/// sources: tests/support/replay/mod.rs, `event_payload`): a schedule carries only its cron
/// expression and workflow file, no `repository`; a dispatch its inputs and the repository.
fn event(kind: &str, inputs: Value) -> (String, Value) {
    match kind {
        "schedule" => ("schedule".into(), json!({ "schedule": "37 4 * * *" })),
        _ => ("workflow_dispatch".into(), json!({ "inputs": inputs })),
    }
}

/// The build matrix without its arm64 leg. The scenarios that publish nothing use it: what they
/// test is the plan's decision and the jobs it skips, which the amd64 leg shows as well as two
/// legs do, and an arm64 leg is a smoke test under qemu (minutes; the due day keeps both legs).
const AMD64_ONLY: (&str, &str) = (
    "          - platform: linux/arm64\n            runner: ubuntu-24.04-arm\n            slug: linux-arm64\n",
    "",
);

fn replay(workflow: &Path, (name, payload): (String, Value)) -> Replay {
    let shared = shared();
    Replay::new(workflow, shared.repo.path())
        .unwrap()
        .repository(repository())
        .cache_dir(replay_cache_store())
        .arm64_legs_restore_the_x64_cache()
        .event(&name, payload)
}

/// Whom the stand-in Sigstore certifies an attest step as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Certified {
    /// The job, as Fulcio would from its OIDC token.
    TheJob,
    /// Another workflow file of the same repository at the same ref: a signature the consumer's
    /// policy (this workflow at the default branch) must refuse.
    AnotherWorkflow,
}

/// `replay` with Sigstore standing in (tests/support/sigstore_standin.rs: its own CA, CT log
/// and transparency log): the attest steps' statements are signed by it as `certified` says
/// at the time, and `gh attestation trusted-root` prints its root. Returns the root too.
fn with_sigstore(replay: Replay, certified: Arc<Mutex<Certified>>) -> (Replay, Value) {
    let sigstore = Arc::new(SigstoreStandIn::new());
    let root = sigstore.trusted_root();
    let signer = move |statement: &Value, job: &JobIdentity| {
        let (workflow, git_ref) = job
            .job_workflow_ref
            .strip_prefix(&format!("{}/", job.repository))
            .and_then(|r| r.split_once('@'))
            .ok_or_else(|| anyhow::anyhow!("job_workflow_ref {:?}", job.job_workflow_ref))?;
        let mut run = GithubRun::new(&job.repository, workflow, git_ref);
        run.commit = job.sha.clone();
        run.runner = job.runner_environment.clone();
        if *certified.lock().unwrap() == Certified::AnotherWorkflow {
            run.workflow = ".github/workflows/other.yml".into();
        }
        Ok(sigstore.statement_bundle(statement, &run, chrono::Utc::now()))
    };
    let replay = replay.sigstore(&root, signer).unwrap();
    // `gh api repos/<owner>/<repo>`: the ship job builds the consumer's policy from it.
    set_default_branch(&replay.gh_state_dir(), "main").unwrap();
    (replay, root)
}

/// What the run cost, leg by leg and step by step, written past libtest's capture (which takes
/// `print!` and `eprint!` only), so `.ci/run`'s log has each scenario's figures.
fn report(scenario: &str, run: &actions_replay::WorkflowRun) {
    let text = format!("replay {scenario}: {}", run.timings());
    let _ = std::io::Write::write_all(&mut std::io::stderr(), text.as_bytes());
}

fn outputs(
    run: &actions_replay::WorkflowRun,
    job: &str,
) -> std::collections::BTreeMap<String, String> {
    run.job(job).outputs.clone()
}

fn releases(dir: &Path) -> Vec<(String, Value, Vec<String>)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return vec![];
    };
    let mut out: Vec<(String, Value, Vec<String>)> = entries
        .map(|e| e.unwrap().path())
        .map(|release| {
            let meta: Value =
                serde_json::from_slice(&std::fs::read(release.join("release.json")).unwrap())
                    .unwrap();
            let mut assets: Vec<String> = std::fs::read_dir(release.join("assets"))
                .map(|a| {
                    a.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            assets.sort();
            (
                release.file_name().unwrap().to_string_lossy().into_owned(),
                meta,
                assets,
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The tag `cargo xtask release plan` makes on this machine for the same inputs and clock.
fn local_plan_tag(now: &str) -> String {
    let out_dir = tempfile::tempdir().unwrap();
    let plan = xtask()
        .args(["release", "plan", "--json", "--force", "--now", now])
        .arg("--out")
        .arg(out_dir.path())
        .arg("--previous-receipts")
        .arg(out_dir.path().join("none"))
        .env("XTASK_ROOT", shared().repo.path())
        .run()
        .assert_success()
        .json();
    plan["tag"].as_str().unwrap().to_owned()
}

#[test]
fn a_scheduled_day_that_is_not_due_ends_after_the_plan() {
    let Some(_serial) = serial() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run = run_workflow(replay(
        &workflow(dir.path(), &not_due(), &[]),
        event("schedule", json!({})),
    ))
    .expect("the workflow replays");
    report("not due", &run);
    run.assert_success();
    assert_eq!(outputs(&run, "plan")["action"], "not_due");
    assert_eq!(outputs(&run, "plan")["publish"], "false");
    assert_eq!(run.result("build"), Status::Skipped);
    assert_eq!(run.result("ship"), Status::Skipped);
    assert!(
        run.summary().contains("not due: epoch day 20786"),
        "the job summary says why: {}",
        run.summary()
    );
    assert!(releases(&run.releases_dir()).is_empty());
}

#[test]
fn the_due_day_releases_once_survives_a_rerun_then_has_nothing_to_do() {
    let Some(_serial) = serial() else {
        return;
    };
    // The verifier job's Rust build cache, from the replay of that job alone that built the
    // consumer tests' verifiers (tests/support/verifier.rs; usually made by the suite's lane of
    // cold builds beside the image tests, tests/support/cold_builds.rs): this run's `verifier` job restores it, as every release after the
    // first does on GitHub, and compiles only this workspace's crates for both targets. The
    // cold cross-build of both verifiers as the runner, from the committed job's steps, is that
    // replay; this one still runs the job and ships, verifies and starts what it built.
    crate::support::verifier::verifier_job_cache();
    let dir = tempfile::tempdir().unwrap();
    let certified = Arc::new(Mutex::new(Certified::AnotherWorkflow));
    let (due, root) = with_sigstore(
        replay(
            &workflow(dir.path(), DUE, &[]),
            event("schedule", json!({})),
        ),
        certified.clone(),
    );

    // First the attestations are signed as another workflow of the repository: the ship job
    // verifies them as a consumer will and refuses to tag; nothing is tagged or released.
    let mut run = run_workflow(due.clone()).expect("the workflow replays");
    report("due day, signed as another workflow", &run);
    assert_eq!(
        run.result("plan"),
        Status::Success,
        "{}",
        run.failure_report()
    );
    assert_eq!(
        run.result("attest"),
        Status::Success,
        "{}",
        run.failure_report()
    );
    let ship = run.job("ship");
    let verify_step = "Verify the attestations as a consumer will";
    assert_eq!(
        ship.step(verify_step).outcome,
        Status::Failure,
        "{}",
        run.failure_report()
    );
    let refused = ship.log_of(verify_step);
    assert!(
        refused.contains("not attested by") && refused.contains(".github/workflows/other.yml"),
        "the verifier names the signer it wanted and the one it found: {refused}"
    );
    assert_eq!(ship.step("Tag").outcome, Status::Skipped);
    assert!(run
        .summary()
        .contains("Not tagged: this run's attestations fail"));
    assert!(releases(&run.releases_dir()).is_empty());

    // Signed as the job now: "Re-run" `attest` (and `ship` after it). The last step
    // (publishing the draft) fails once, as a GitHub API hiccup would.
    *certified.lock().unwrap() = Certified::TheJob;
    due.gh_fail_once("release edit").unwrap();
    rerun_job(&mut run, "attest").expect("the re-run replays");
    let plan = outputs(&run, "plan");
    assert_eq!(plan["action"], "release");
    assert_eq!(plan["publish"], "true");
    let legs = run.legs("build");
    assert_eq!(legs.len(), 2);
    for leg in legs {
        assert_eq!(leg.status, Status::Success, "{}", run.failure_report());
    }
    assert_eq!(
        run.result("verifier"),
        Status::Success,
        "{}",
        run.failure_report()
    );
    assert_eq!(
        run.result("ship"),
        Status::Failure,
        "{}",
        run.failure_report()
    );
    assert_eq!(
        run.job("ship").step("Publish the release").outcome,
        Status::Failure
    );

    // What earlier attempts leave behind: this tag's draft holding a file no run of these
    // inputs makes, and the draft of an earlier day whose `ship` failed at "Publish" and was
    // never re-run. A re-run must replace the first and remove the second.
    let tag = plan["tag"].clone();
    let draft_assets = run.releases_dir().join(&tag).join("assets");
    assert!(
        draft_assets.is_dir(),
        "ship left its draft: {:?}",
        releases(&run.releases_dir())
    );
    std::fs::write(
        draft_assets.join("stale.txt"),
        "an earlier attempt's asset\n",
    )
    .unwrap();
    let earlier_day = "2026.11.27-0123456789ab";
    stale_draft(&due, earlier_day);

    // "Re-run failed jobs": ship again, same run, same plan and results.
    rerun_failed(&mut run).expect("the re-run replays");
    report("due day", &run);
    run.assert_success();
    let decided = run.job("ship").log_of("Decide");
    assert!(
        decided.contains(&format!("removed first: {earlier_day}, {tag}")),
        "{decided}"
    );
    assert_eq!(
        tag,
        local_plan_tag(DUE),
        "cargo xtask release and the workflow name the same release"
    );
    let published = releases(&run.releases_dir());
    assert_eq!(
        published.len(),
        1,
        "the stale drafts are gone: {published:?}"
    );
    let (name, meta, assets) = &published[0];
    assert_eq!(*name, tag);
    assert_eq!(meta["isDraft"], false, "{meta}");
    assert!(!assets.iter().any(|a| a == "stale.txt"), "{assets:?}");
    let receipts: Vec<&String> = assets
        .iter()
        .filter(|a| a.starts_with("receipt-"))
        .collect();
    assert_eq!(receipts.len(), 1, "one receipt per release: {assets:?}");
    for asset in [
        "package-lock.json",
        "inventory.json",
        "receipt.v2.schema.json",
    ] {
        assert!(assets.iter().any(|a| a == asset), "{asset} in {assets:?}");
    }

    // What a consumer does with the published assets: verify against the registry.
    let release_dir = run.releases_dir().join(&tag).join("assets");
    let verify = xtask()
        .args(["receipt", "verify", "--check-registry", "--artifacts"])
        .arg(&release_dir)
        .arg(release_dir.join(receipts[0]))
        .run();
    assert!(
        verify.success(),
        "{}{}",
        verify.stdout_text(),
        verify.stderr_text()
    );
    let receipt: Value =
        serde_json::from_slice(&std::fs::read(release_dir.join(receipts[0])).unwrap()).unwrap();
    for platform in receipt["platforms"].as_array().unwrap() {
        assert!(
            platform["debian_packages"].as_array().unwrap().len() > 100,
            "each platform's Debian packages are recorded"
        );
    }
    assert!(run
        .summary()
        .contains("Debian packages only on linux/amd64"));

    // The consumer's verifiers: built by the read-only job, shipped as assets, recorded in the
    // receipt (whose `verify --artifacts` above checked their sha256), and each one starts:
    // amd64 natively, arm64 under qemu.
    let verifiers: Vec<&str> = receipt["verifiers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        verifiers,
        ["template-verify-linux-amd64", "template-verify-linux-arm64"]
    );
    for name in verifiers {
        assert!(assets.iter().any(|a| a == name), "{name} in {assets:?}");
        let path = release_dir.join(name);
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        let version = Command::new(&path).arg("--version").output().unwrap();
        assert!(
            version.status.success()
                && String::from_utf8_lossy(&version.stdout).starts_with("template-verify "),
            "{name} --version: {version:?}"
        );
    }

    // The signed bundles ship with the release, one per attest step, and verify offline as a
    // consumer verifies them: the shipped verifier, the stand-in's root, the release policy.
    let bundles: Vec<&str> = assets
        .iter()
        .filter(|a| a.ends_with(".sigstore.json"))
        .map(String::as_str)
        .collect();
    assert_eq!(
        bundles,
        [
            "provenance-assets.sigstore.json",
            "provenance-index.sigstore.json",
            "sbom-linux-amd64.cdx.json.sigstore.json",
            "sbom-linux-amd64.spdx.json.sigstore.json",
            "sbom-linux-arm64.cdx.json.sigstore.json",
            "sbom-linux-arm64.spdx.json.sigstore.json",
        ]
    );
    assert!(
        run.summary()
            .contains("Attestations verified before the tag, as a consumer will"),
        "{}",
        run.summary()
    );
    // The summary names the instance that signed, its log entry or timestamp, and the run.
    for line in ["  instance ", "  log ", "  time ", "  run "] {
        assert!(
            run.summary().contains(line),
            "the summary has no `{}` line: {}",
            line.trim(),
            run.summary()
        );
    }
    let root_file = dir.path().join("trusted-root.jsonl");
    std::fs::write(&root_file, format!("{root}\n")).unwrap();
    let offline = Command::new(release_dir.join("template-verify-linux-amd64"))
        .args(["receipt", "verify"])
        .arg(release_dir.join(receipts[0]))
        .arg("--artifacts")
        .arg(&release_dir)
        .arg("--attestations")
        .arg(&release_dir)
        .arg("--trusted-root")
        .arg(&root_file)
        .args([
            "--repository",
            repository(),
            "--source-ref",
            "refs/heads/main",
        ])
        .output()
        .unwrap();
    assert!(
        offline.status.success(),
        "the published bundles verify offline: {}{}",
        String::from_utf8_lossy(&offline.stdout),
        String::from_utf8_lossy(&offline.stderr)
    );

    // The attestations the ship job requested, all through actions/attest and kept in GitHub's
    // API (none pushed to the registry): the index by digest, every release asset by its
    // sha256, and each platform's SBOM against its manifest. A scheduled run's payload names no
    // repository visibility, so the real action would sign with GitHub's Sigstore instance.
    let attested = run.job("attest").attestations();
    assert!(attested
        .iter()
        .all(|a| a.action == "attest" && !a.push_to_registry));
    assert!(attested.iter().all(|a| a.sigstore_instance == "github"));
    let index = (
        receipt["index"]["repository"].as_str().unwrap().to_string(),
        receipt["index"]["digest"].as_str().unwrap().to_string(),
    );
    let subjects = |predicate_type: &str| -> Vec<Vec<(String, String)>> {
        attested
            .iter()
            .filter(|a| a.predicate_type == predicate_type)
            .map(|a| {
                a.subjects
                    .iter()
                    .map(|s| (s.name.clone(), s.digest.clone()))
                    .collect()
            })
            .collect()
    };
    let provenance = subjects("https://slsa.dev/provenance/v1");
    assert_eq!(provenance.len(), 2, "{attested:?}");
    assert_eq!(provenance[0], vec![index.clone()]);
    let mut published_assets: Vec<(String, String)> = assets
        .iter()
        .filter(|name| !name.ends_with(".sigstore.json"))
        .map(|name| {
            let bytes = std::fs::read(release_dir.join(name)).unwrap();
            use sha2::Digest as _;
            (
                name.clone(),
                format!("sha256:{}", hex::encode(sha2::Sha256::digest(&bytes))),
            )
        })
        .collect();
    published_assets.sort();
    assert_eq!(
        provenance[1], published_assets,
        "the attested assets are the published ones"
    );
    // Both forms of each platform's SBOM: SPDX, and CycloneDX (`platforms[].cyclonedx`).
    let platforms = receipt["platforms"].as_array().unwrap();
    for (predicate_type, field) in [
        (actions_replay::SPDX_DOCUMENT_V2_3, "sbom"),
        (actions_replay::CYCLONEDX_BOM, "cyclonedx"),
    ] {
        let sboms: Vec<&actions_replay::Attestation> = attested
            .iter()
            .filter(|a| a.predicate_type == predicate_type)
            .collect();
        assert_eq!(sboms.len(), platforms.len(), "{field}");
        for (attestation, platform) in sboms.iter().zip(platforms) {
            assert_eq!(
                attestation.subjects,
                vec![actions_replay::Subject {
                    name: index.0.clone(),
                    digest: platform["digest"].as_str().unwrap().to_string(),
                    path: None,
                }]
            );
            assert_eq!(
                attestation.sbom_sha256.as_deref(),
                platform[field]["sha256"].as_str(),
                "the attested {field} is the one the receipt hashes"
            );
            assert!(assets
                .iter()
                .any(|a| Some(a.as_str()) == platform[field]["name"].as_str()));
        }
    }

    // "Re-run" of the green `receipt` job: it, `attest` and `ship` run again, and the release
    // they find published with exactly their assets stays as it is.
    let before = published_digests(&run.releases_dir(), &tag);
    rerun_job(&mut run, "receipt").expect("the re-run replays");
    report("re-run of a green ship", &run);
    run.assert_success();
    assert_eq!(
        run.job("ship").step("Create the draft release").outcome,
        Status::Skipped
    );
    assert!(
        run.summary().contains(&format!(
            "Release {tag} is already published with exactly this run's"
        )),
        "{}",
        run.summary()
    );
    assert_eq!(releases(&run.releases_dir()).len(), 1);
    assert_eq!(published_digests(&run.releases_dir(), &tag), before);

    // The same due day again: the previous release has exactly these inputs. The plan ends
    // the run; nothing is built, pushed or released.
    let again = run_workflow(due.clone()).expect("the workflow replays");
    report("due day again", &again);
    again.assert_success();
    assert_eq!(outputs(&again, "plan")["action"], "unchanged");
    assert_eq!(again.result("build"), Status::Skipped);
    assert_eq!(again.result("ship"), Status::Skipped);
    assert!(again.summary().contains("nothing changed since release"));
    assert_eq!(releases(&again.releases_dir()).len(), 1);

    // A day whose inputs equal an already-published tag that is not the latest release: a
    // later release is the latest, and its receipt is not one the plan can use, so the
    // previous receipt says nothing about these inputs. The repository's published tags do:
    // the plan ends the run naming the release that holds them, and nothing is built, pushed
    // or released (a new receipt would differ from the published one, which `ship` refuses).
    let later = "2026.11.30-aaaaaaaaaaaa";
    let unusable = dir.path().join(format!("receipt-{later}.json"));
    std::fs::write(&unusable, b"{\"schema_version\": \"not a receipt\"}\n").unwrap();
    actions_replay::add_release(
        &due.gh_state_dir(),
        later,
        "2099-01-01T00:00:00Z",
        &[unusable],
        false,
    )
    .unwrap();
    let same_tag = run_workflow(due.clone()).expect("the workflow replays");
    report("inputs of a published tag", &same_tag);
    same_tag.assert_success();
    assert_eq!(outputs(&same_tag, "plan")["action"], "unchanged");
    assert_eq!(outputs(&same_tag, "plan")["publish"], "false");
    assert_eq!(same_tag.result("build"), Status::Skipped);
    assert_eq!(same_tag.result("ship"), Status::Skipped);
    assert!(
        same_tag
            .summary()
            .contains(&format!("already published as release {tag}")),
        "{}",
        same_tag.summary()
    );
    assert_eq!(published_digests(&same_tag.releases_dir(), &tag), before);
    assert_eq!(releases(&same_tag.releases_dir()).len(), 2);
}

/// A draft this workflow left on an earlier day (its title is the workflow's) in the replay's
/// gh state.
fn stale_draft(replay: &Replay, tag: &str) {
    let notes = tempfile::NamedTempFile::new().unwrap();
    actions_replay::add_release(
        &replay.gh_state_dir(),
        tag,
        "2026-11-27T04:40:00Z",
        &[notes.path().to_path_buf()],
        true,
    )
    .unwrap();
    let meta = replay
        .gh_state_dir()
        .join("releases")
        .join(tag)
        .join("release.json");
    let mut release: Value = serde_json::from_slice(&std::fs::read(&meta).unwrap()).unwrap();
    release["title"] = json!(format!("Coding agent template {tag}"));
    std::fs::write(&meta, serde_json::to_vec_pretty(&release).unwrap()).unwrap();
}

/// Each asset of release `tag` with its sha256.
fn published_digests(releases_dir: &Path, tag: &str) -> Vec<(String, String)> {
    use sha2::Digest as _;
    let dir = releases_dir.join(tag).join("assets");
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            (
                path.file_name().unwrap().to_string_lossy().into_owned(),
                hex::encode(sha2::Sha256::digest(&bytes)),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn a_forced_dispatch_on_a_day_that_is_not_due_builds_and_tests_without_publishing() {
    let Some(_serial) = serial() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run = run_workflow(replay(
        &workflow(dir.path(), &not_due(), &[AMD64_ONLY]),
        event(
            "workflow_dispatch",
            json!({ "force": true, "no_publish": true }),
        ),
    ))
    .expect("the workflow replays");
    report("forced dispatch", &run);
    run.assert_success();
    let plan = outputs(&run, "plan");
    assert_eq!(plan["action"], "release", "force passes the gate");
    assert_eq!(plan["publish"], "false");
    assert_eq!(run.legs("build").len(), 1);
    assert_eq!(run.result("build"), Status::Success);
    assert_eq!(run.result("ship"), Status::Skipped);
    assert!(releases(&run.releases_dir()).is_empty());
}

#[test]
fn a_dispatch_from_another_branch_publishes_nothing() {
    let Some(_serial) = serial() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // The plan job alone: what a branch changes is the plan's decision. What the jobs after it
    // do with `publish: false` (build and test, ship nothing) is the forced dispatch's
    // scenario above, whose amd64 leg is this one's to the byte; running it here too cost a
    // build and smoke run for nothing new.
    let full = workflow(dir.path(), &not_due(), &[]);
    let plan_alone = dir.path().join("plan-alone.yml");
    std::fs::write(
        &plan_alone,
        crate::support::cold_builds::only_job(
            &std::fs::read_to_string(&full).unwrap(),
            "plan",
            |_| {},
        ),
    )
    .unwrap();
    let mut branch = replay(
        &plan_alone,
        event("workflow_dispatch", json!({ "force": true })),
    );
    branch.git_ref = "refs/heads/try-arm".into();
    let run = run_workflow(branch).expect("the workflow replays");
    report("dispatch from a branch", &run);
    run.assert_success();
    let plan = outputs(&run, "plan");
    assert_eq!(
        plan["action"], "release",
        "force passes the gate on a branch too"
    );
    assert_eq!(plan["publish"], "false");
    assert!(
        run.summary()
            .contains("releases are published only from main"),
        "{}",
        run.summary()
    );
    assert!(releases(&run.releases_dir()).is_empty());
}

#[test]
fn a_misspelled_step_output_or_artifact_name_fails_the_replay() {
    let Some(_serial) = serial() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let misspelled_output = workflow(
        dir.path(),
        &not_due(),
        &[(
            "action: ${{ steps.plan.outputs.action }}",
            "action: ${{ steps.plan.outputs.acton }}",
        )],
    );
    let error = match run_workflow(replay(&misspelled_output, event("schedule", json!({})))) {
        Err(e) => format!("{e:#}"),
        Ok(run) => run.failure_report(),
    };
    assert!(error.contains("acton"), "{error}");

    let misspelled_artifact = workflow(
        dir.path(),
        &not_due(),
        &[(
            "          name: plan\n          path: .\n      - name: Rust version",
            "          name: plans\n          path: .\n      - name: Rust version",
        )],
    );
    let run = run_workflow(replay(
        &misspelled_artifact,
        event(
            "workflow_dispatch",
            json!({ "force": true, "no_publish": true }),
        ),
    ))
    .expect("the workflow replays");
    report("misspelled artifact name", &run);
    assert!(!run.succeeded());
    let report = run.failure_report();
    assert!(report.contains("plans"), "{report}");
}
