//! The consumer's step, `.github/actions/pin-template`, replayed as another repository's
//! workflow runs it: docs/consumers.md's copy-paste workflow as written (only `<commit-sha>`
//! replaced), the runner user, the action's files at a commit of this repository, the
//! template repository's releases in the gh stand-in with attestations recorded as the
//! release workflow makes them, the static verifier the release workflow's `verifier` job
//! built (scripts/build-verifiers.sh, replayed as the runner: tests/support/verifier.rs), and
//! receipts of images published to the local registry through a forwarder the test can shut.
//!
//! Each scenario has releases of its own (own images, own repository, own forwarder), so
//! they run side by side.

use std::io::ErrorKind;
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::docker::{light_docker, load_tiny_image, local_registry};
use crate::support::genuine_release::{self, build_json, receipt_write_for, release, smoke};
use crate::support::sigstore_standin::{GithubRun, SigstoreStandIn};
use crate::support::verifier::verifier;
use crate::support::xtask::xtask;
use crate::support::{
    checkout_path, checkout_text, committed_repo, runner_user, scratch_repo, sha256_hex, unique,
};
use actions_replay::{
    add_release, run_workflow, Replay, StandIn, Status, WorkflowRun, CYCLONEDX_BOM,
    MAIN_ON_GITHUB_HOSTED, SLSA_PROVENANCE_V1, SPDX_DOCUMENT_V2_3,
};
use actions_replay::{record_attestation_from, set_default_branch, SignedFrom, RUNNER_USER};

const TEMPLATE_REPOSITORY: &str = "sandbox0-ai/coding-agent-template";
const SIGNER: &str = "sandbox0-ai/coding-agent-template/.github/workflows/update-template.yml";
/// Where docs/consumers.md's workflow says the consumer keeps its template definition.
const TEMPLATE_FILE: &str = "templates/coding-agent.yaml";
const PR_ACTION: &str = "peter-evans/create-pull-request";
/// How the release workflow's runs sign: from the default branch, on GitHub-hosted runners.
const MAIN: SignedFrom<'static> = MAIN_ON_GITHUB_HOSTED;

/// This repository at a commit, as `uses: sandbox0-ai/coding-agent-template/...@<sha>` finds it.
fn action_repo() -> &'static (tempfile::TempDir, String) {
    static REPO: OnceLock<(tempfile::TempDir, String)> = OnceLock::new();
    REPO.get_or_init(|| {
        runner_user();
        let repo = scratch_repo("consume-action-");
        let head = Command::new("git")
            .args(["rev-parse", "HEAD"])
            .current_dir(repo.path())
            .output()
            .unwrap();
        let sha = String::from_utf8(head.stdout).unwrap().trim().to_owned();
        (repo, sha)
    })
}

/// Where the consumer's workflow is documented, between `consumer-workflow` markers.
const CONSUMER_DOC: &str = "docs/consumers.md";

/// docs/consumers.md's workflow with `<commit-sha>` replaced: what a consumer copies.
fn documented_workflow(sha: &str) -> String {
    let doc = checkout_text(CONSUMER_DOC);
    let begin = doc
        .find("<!-- consumer-workflow:begin")
        .unwrap_or_else(|| panic!("{CONSUMER_DOC} marks the consumer workflow"));
    let end = doc[begin..]
        .find("<!-- consumer-workflow:end -->")
        .unwrap_or_else(|| panic!("{CONSUMER_DOC} ends the consumer workflow"))
        + begin;
    let block = &doc[begin..end];
    let yaml = block
        .split_once("```yaml\n")
        .and_then(|(_, rest)| rest.split_once("```"))
        .expect("the consumer workflow is a ```yaml block")
        .0;
    assert_eq!(yaml.matches("<commit-sha>").count(), 1, "{yaml}");
    assert!(
        yaml.contains(&format!("template-file: {TEMPLATE_FILE}")),
        "{yaml}"
    );
    yaml.replace("<commit-sha>", sha)
}

/// The workflow consumers copy is found where the replays below read it, whole, without the
/// engine: a documentation move that loses it fails in every tier, not only where the
/// replays run.
#[test]
fn the_documented_consumer_workflow_is_found_where_the_replays_read_it() {
    let sha = "0123456789abcdef0123456789abcdef01234567";
    let workflow: yaml_serde::Value = yaml_serde::from_str(&documented_workflow(sha)).unwrap();
    let steps = workflow["jobs"]["pin"]["steps"].as_sequence().unwrap();
    let action = format!("{TEMPLATE_REPOSITORY}/.github/actions/pin-template@{sha}");
    assert!(
        steps
            .iter()
            .any(|s| s["uses"].as_str() == Some(action.as_str())),
        "{CONSUMER_DOC}'s workflow does not call {action}: {steps:#?}"
    );
}

/// Accepts on 127.0.0.1 and forwards each connection to the shared local registry, until
/// [`Forwarder::shut`]: then the port refuses connections, as an unreachable registry does.
struct Forwarder {
    address: String,
    open: Arc<AtomicBool>,
}

impl Forwarder {
    fn start() -> Forwarder {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let open = Arc::new(AtomicBool::new(true));
        let still_open = open.clone();
        std::thread::spawn(move || {
            while still_open.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((client, _)) => {
                        client.set_nonblocking(false).unwrap();
                        let Ok(upstream) = TcpStream::connect(local_registry()) else {
                            continue;
                        };
                        for (mut from, mut to) in [
                            (client.try_clone().unwrap(), upstream.try_clone().unwrap()),
                            (upstream, client),
                        ] {
                            std::thread::spawn(move || {
                                let _ = std::io::copy(&mut from, &mut to);
                                let _ = to.shutdown(std::net::Shutdown::Write);
                            });
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    Err(e) => panic!("forwarder: {e}"),
                }
            }
            // The listener is dropped here: connections are refused from now on.
        });
        Forwarder { address, open }
    }

    fn shut(&self) {
        self.open.store(false, Ordering::SeqCst);
        for _ in 0..200 {
            if TcpStream::connect(&self.address).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("the forwarder at {} still accepts", self.address);
    }
}

/// Releases of the template repository, as the gh stand-in keeps them.
struct Releases {
    forwarder: Forwarder,
    /// `127.0.0.1:<port>/xtask-test/consume-…`: where the images are, as receipts name them.
    repository: String,
    state: tempfile::TempDir,
    work: tempfile::TempDir,
    /// With a Sigstore stand-in: each release carries its signed bundles as
    /// `<what>.sigstore.json` assets, as the release workflow attaches them, and GitHub's
    /// attestation API holds only the verifier binary's attestation (which the action's first
    /// step checks with gh: a binary cannot vouch for itself).
    sigstore: Option<SigstoreStandIn>,
}

/// One release made for a scenario.
struct Made {
    tag: String,
    receipt: Value,
}

impl Releases {
    fn new() -> Releases {
        Releases::with(None)
    }

    /// Releases that carry their signed bundles (see [`Releases::sigstore`]).
    fn bundled() -> Releases {
        Releases::with(Some(SigstoreStandIn::new()))
    }

    fn with(sigstore: Option<SigstoreStandIn>) -> Releases {
        release(); // the genuine release's inputs: gate, resolve, template files
        verifier();
        let forwarder = Forwarder::start();
        let repository = unique("xtask-test/consume").to_lowercase();
        let state = tempfile::tempdir().unwrap();
        // What `gh api repos/<template repository>` answers: the branch the release
        // environment protects, the one every attestation must come from.
        set_default_branch(state.path(), "main").unwrap();
        Releases {
            repository: format!("{}/{repository}", forwarder.address),
            forwarder,
            state,
            work: tempfile::tempdir().unwrap(),
            sigstore,
        }
    }

    /// Publishes two tiny images of its own under `tag`, writes the receipt (`failing`: an
    /// amd64 smoke check that failed) and returns it with its path and the assets' directory.
    fn receipt(&self, tag: &str, failing: Option<&str>) -> (PathBuf, PathBuf) {
        let dir = self.work.path().join(tag);
        std::fs::create_dir_all(&dir).unwrap();
        let salt = unique(tag);
        let mut builds = Vec::new();
        let mut images = Vec::new();
        for (arch, emulated) in [("amd64", false), ("arm64", true)] {
            let image = format!("xtask-test-consume:{arch}-{}", unique("i"));
            let id = load_tiny_image(&image, arch, &format!("{arch} {salt}"));
            let platform = format!("linux/{arch}");
            let build = dir.join(format!("build-{arch}.json"));
            std::fs::write(
                &build,
                build_json(arch, &image, &id, &salt, emulated).to_string(),
            )
            .unwrap();
            let smoke_file = dir.join(format!("smoke-{arch}.json"));
            let failing = if arch == "amd64" { failing } else { None };
            std::fs::write(
                &smoke_file,
                smoke(&image, &platform, emulated, failing).to_string(),
            )
            .unwrap();
            images.push(format!("{platform}={image}"));
            builds.push((build, smoke_file, platform));
        }
        let (registry, repository) = self.repository.split_once('/').unwrap();
        let mut publish = xtask();
        publish.args([
            "publish",
            "--json",
            "--oci-registry",
            registry,
            "--repository",
        ]);
        publish.arg(repository).args(["--tag", tag]);
        for image in &images {
            publish.args(["--image", image]);
        }
        let published = publish.run();
        published.assert_success();
        let publish_file = dir.join("publish.json");
        std::fs::write(&publish_file, &published.stdout).unwrap();

        let assets = dir.join("assets");
        std::fs::create_dir_all(&assets).unwrap();
        let written = receipt_write_for(&assets, &builds, &publish_file)
            .args(["--tag", tag])
            .arg("--verifier")
            .arg(verifier())
            .run();
        assert_eq!(
            written.success(),
            failing.is_none(),
            "{}",
            written.stderr_text()
        );
        let path = PathBuf::from(written.json()["path"].as_str().unwrap());
        (path, assets)
    }

    /// Makes release `tag`, created at `created_at`, with its receipt and every asset the
    /// release workflow uploads, and records the attestations that workflow makes. `edit`
    /// changes the receipt after it was attested (a tampered asset).
    fn make(
        &self,
        tag: &str,
        created_at: &str,
        failing: Option<&str>,
        edit: Option<fn(&mut Value)>,
    ) -> Made {
        self.make_from(tag, created_at, failing, edit, MAIN, true)
    }

    /// [`Releases::make`] by a run of the release workflow `from` a ref and runner, with or
    /// without the verifier binary among its assets.
    fn make_from(
        &self,
        tag: &str,
        created_at: &str,
        failing: Option<&str>,
        edit: Option<fn(&mut Value)>,
        from: SignedFrom,
        with_verifier: bool,
    ) -> Made {
        let (receipt_path, assets) = self.receipt(tag, failing);
        let receipt: Value =
            serde_json::from_slice(&std::fs::read(&receipt_path).unwrap()).unwrap();
        let r = release();
        for artifact in receipt["artifacts"].as_array().unwrap() {
            let from = r.root.path().join(artifact["path"].as_str().unwrap());
            std::fs::copy(from, assets.join(artifact["name"].as_str().unwrap())).unwrap();
        }
        genuine_release::copy_sboms(&receipt, &assets);
        if with_verifier {
            // A branch's run builds its own binary (the same bytes would carry the default
            // branch's attestation too, and rightly pass).
            let mut binary = std::fs::read(verifier()).unwrap();
            if from.source_ref != MAIN.source_ref
                || from.runner_environment != MAIN.runner_environment
            {
                binary.extend_from_slice(format!("\nbuilt from {}\n", from.source_ref).as_bytes());
            }
            std::fs::write(assets.join("template-verify-linux-amd64"), binary).unwrap();
        }
        std::fs::copy(
            checkout_path("schemas/receipt.v2.schema.json"),
            assets.join("receipt.v2.schema.json"),
        )
        .unwrap();

        let mut files: Vec<PathBuf> = std::fs::read_dir(&assets)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        let subjects: Vec<(String, String)> = files
            .iter()
            .map(|f| {
                let name = f.file_name().unwrap().to_string_lossy().into_owned();
                (
                    name,
                    format!("sha256:{}", sha256_hex(&std::fs::read(f).unwrap())),
                )
            })
            .collect();
        let state = self.state.path();
        let image = |digest: &Value| {
            vec![(
                self.repository.clone(),
                digest.as_str().unwrap().to_string(),
            )]
        };
        // What the release workflow's attest steps sign, as (bundle asset name, predicate
        // type, subjects).
        let mut statements = vec![
            (
                "provenance-assets".to_string(),
                SLSA_PROVENANCE_V1,
                subjects.clone(),
            ),
            (
                "provenance-index".to_string(),
                SLSA_PROVENANCE_V1,
                image(&receipt["index"]["digest"]),
            ),
        ];
        for p in receipt["platforms"].as_array().unwrap() {
            let name = |field: &str| p[field]["name"].as_str().unwrap().to_string();
            statements.push((name("sbom"), SPDX_DOCUMENT_V2_3, image(&p["digest"])));
            // The workflow attests the CycloneDX form too, when the release carries it.
            if p["cyclonedx"].is_object() {
                statements.push((name("cyclonedx"), CYCLONEDX_BOM, image(&p["digest"])));
            }
        }
        let mut bundles = Vec::new();
        match &self.sigstore {
            None => {
                for (_, predicate_type, subjects) in &statements {
                    record_attestation_from(
                        state,
                        TEMPLATE_REPOSITORY,
                        SIGNER,
                        from,
                        predicate_type,
                        subjects,
                    )
                    .unwrap();
                }
            }
            Some(sigstore) => {
                let verifier_subject: Vec<(String, String)> = subjects
                    .iter()
                    .filter(|(name, _)| name == "template-verify-linux-amd64")
                    .cloned()
                    .collect();
                record_attestation_from(
                    state,
                    TEMPLATE_REPOSITORY,
                    SIGNER,
                    from,
                    SLSA_PROVENANCE_V1,
                    &verifier_subject,
                )
                .unwrap();
                let workflow = SIGNER
                    .strip_prefix(&format!("{TEMPLATE_REPOSITORY}/"))
                    .unwrap();
                let mut run = GithubRun::new(TEMPLATE_REPOSITORY, workflow, from.source_ref);
                run.runner = from.runner_environment.to_string();
                run.commit = receipt["source_commit"].as_str().unwrap().to_string();
                let dir = self.work.path().join(tag).join("bundles");
                std::fs::create_dir_all(&dir).unwrap();
                for (what, predicate_type, subjects) in &statements {
                    let statement = json!({
                        "_type": "https://in-toto.io/Statement/v1",
                        "subject": subjects.iter().map(|(name, digest)| json!({
                            "name": name,
                            "digest": { "sha256": digest.strip_prefix("sha256:").unwrap() },
                        })).collect::<Vec<_>>(),
                        "predicateType": predicate_type,
                        "predicate": {},
                    });
                    let bundle = sigstore.statement_bundle(&statement, &run, chrono::Utc::now());
                    let path = dir.join(format!("{what}.sigstore.json"));
                    std::fs::write(&path, format!("{bundle}\n")).unwrap();
                    bundles.push(path);
                }
            }
        }

        if let Some(edit) = edit {
            let mut edited = receipt.clone();
            edit(&mut edited);
            let mut bytes = serde_json::to_vec_pretty(&edited).unwrap();
            bytes.push(b'\n');
            std::fs::remove_file(&receipt_path).unwrap();
            let renamed = assets.join(format!("receipt-{tag}-{}.json", sha256_hex(&bytes)));
            std::fs::write(renamed, bytes).unwrap();
            files = std::fs::read_dir(&assets)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
        }
        files.extend(bundles);
        add_release(state, tag, created_at, &files, false).unwrap();
        Made {
            tag: tag.to_string(),
            receipt,
        }
    }

    /// A release that is being made: created, no receipt yet.
    fn unfinished(&self, tag: &str, created_at: &str) {
        let file = self.work.path().join(format!("{tag}-notes.md"));
        std::fs::write(&file, "in progress\n").unwrap();
        add_release(self.state.path(), tag, created_at, &[file], false).unwrap();
    }

    fn unpinned(&self) -> String {
        format!("{}:unpinned", self.repository)
    }
}

/// The consumer's repository: the documented workflow (with `inputs`, more lines under the
/// action's `with:`) and a template definition naming `image`.
fn consumer(image: &str, inputs: &str) -> (tempfile::TempDir, String) {
    let committed = checkout_text("template/sandbox0-template.yaml");
    let template: String = committed
        .split_inclusive('\n')
        .map(|line| {
            if line.starts_with("image: ") {
                format!("image: {image}\n")
            } else {
                line.to_string()
            }
        })
        .collect();
    assert!(template.contains(&format!("image: {image}\n")));
    let anchor = format!("          template-file: {TEMPLATE_FILE}\n");
    let workflow =
        documented_workflow(&action_repo().1).replace(&anchor, &format!("{anchor}{inputs}"));
    let (repo, _) = committed_repo(&[
        (".github/workflows/refresh-template.yml", workflow.as_str()),
        (TEMPLATE_FILE, template.as_str()),
    ]);
    let text = template;
    (repo, text)
}

/// What one replay of the consumer workflow left: the run, the template file after it, and
/// the pull requests the stand-in was asked to open.
struct Consumed {
    run: WorkflowRun,
    template: String,
    pull_requests: Vec<std::collections::BTreeMap<String, String>>,
}

fn consume(releases: &Releases, image: &str) -> (Consumed, String) {
    consume_with(releases, image, "")
}

/// [`consume`] with more inputs for the action (YAML lines under its `with:`). The replays
/// judge attestations with `gh` unless the inputs say otherwise: only releases made by
/// [`Releases::bundled`] carry signed bundles for the native verifier (and the gh stand-in's
/// `gh attestation trusted-root` prints their stand-in Sigstore's root). The native verifier's
/// own tests are verify/tests/attestation_cli.rs and the attestation module's unit tests.
fn consume_with(releases: &Releases, image: &str, inputs: &str) -> (Consumed, String) {
    let inputs = if inputs.contains("attestations:") {
        inputs.to_owned()
    } else {
        format!("          attestations: gh\n{inputs}")
    };
    let (repo, before) = consumer(image, &inputs);
    let opened = Arc::new(Mutex::new(Vec::new()));
    let record = opened.clone();
    let template_after = Arc::new(Mutex::new(String::new()));
    let keep = template_after.clone();
    let replay = Replay::new(
        repo.path().join(".github/workflows/refresh-template.yml"),
        repo.path(),
    )
    .unwrap()
    // A name of its own: the runner's workspace path is made from it, and no other replay
    // may empty it before the test reads the file the run left there.
    .repository(&format!("sandbox0-ai/{}", unique("infrastructure")))
    .event(
        "workflow_dispatch",
        json!({ "inputs": {}, "ref": "refs/heads/main" }),
    )
    .action_source(TEMPLATE_REPOSITORY, action_repo().0.path())
    .gh_foreign_repository(TEMPLATE_REPOSITORY, releases.state.path())
    .stand_in(
        PR_ACTION,
        StandIn::Closure(Arc::new(move |call| {
            // The pull request carries the workspace's file as the pin left it.
            let text = std::fs::read_to_string(call.workspace.join(TEMPLATE_FILE))
                .map_err(|e| e.to_string())?;
            *keep.lock().unwrap() = text;
            record.lock().unwrap().push(call.with.clone());
            Ok(Default::default())
        })),
    );
    if let Some(sigstore) = &releases.sigstore {
        // What `gh attestation trusted-root` prints for the action's native verifier.
        replay.trusted_root(&sigstore.trusted_root()).unwrap();
    }
    let run = run_workflow(replay).unwrap_or_else(|e| panic!("{e:#}"));
    let workspace_file = run.job("pin").workspace.join(TEMPLATE_FILE);
    let template = std::fs::read_to_string(&workspace_file)
        .unwrap_or_else(|e| panic!("{}: {e}", workspace_file.display()));
    {
        // Under the lock every job holds while it walks the runner's work directory.
        let _lock = actions_replay::lock_workspace().unwrap();
        let _ = std::fs::remove_dir_all(run.job("pin").workspace.parent().unwrap());
    }
    let pull_requests = opened.lock().unwrap().clone();
    if !pull_requests.is_empty() {
        assert_eq!(*template_after.lock().unwrap(), template);
    }
    (
        Consumed {
            run,
            template,
            pull_requests,
        },
        before,
    )
}

/// The run failed in the action's step, left the file as it was and opened no pull request;
/// returns that step's log.
fn assert_failed_and_unchanged(c: &Consumed, before: &str) -> String {
    assert_eq!(c.run.result("pin"), Status::Failure);
    assert_eq!(c.template, before, "the file is byte-for-byte unchanged");
    assert!(c.pull_requests.is_empty());
    c.run.job("pin").log_of("pin")
}

fn pin_outputs(c: &Consumed) -> std::collections::BTreeMap<String, String> {
    c.run.job("pin").step("pin").outputs.clone()
}

#[test]
fn the_newest_complete_release_is_pinned_and_a_pull_request_opened() {
    let Some(_docker) = light_docker() else {
        return;
    };
    let releases = Releases::new();
    releases.make(
        "2026.11.30-aaaaaaaaaaaa",
        "2026-11-24T04:50:00Z",
        None,
        None,
    );
    let newest = releases.make(
        "2026.11.30-bbbbbbbbbbbb",
        "2026-11-27T04:50:00Z",
        None,
        None,
    );
    let (c, before) = consume(&releases, &releases.unpinned());
    c.run.assert_success();
    let image = newest.receipt["index"]["reference"].as_str().unwrap();
    assert_eq!(c.template, before.replace(&releases.unpinned(), image));
    let out = pin_outputs(&c);
    assert_eq!(out["changed"], "true");
    assert_eq!(out["release-tag"], newest.tag);
    assert_eq!(out["image"], image);
    assert_eq!(out["previous-image"], releases.unpinned());
    let versions: Value = serde_json::from_str(&out["versions"]).unwrap();
    let expected: Vec<&str> = newest.receipt["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    let got: Vec<&str> = versions
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(got, expected);
    assert_eq!(c.pull_requests.len(), 1);
    let pr = &c.pull_requests[0];
    assert_eq!(
        pr["branch"],
        format!("coding-agent-template/{}", newest.tag)
    );
    assert!(
        pr["body"].contains(image) && pr["body"].starts_with("Pinned"),
        "{}",
        pr["body"]
    );
    let log = c.run.job("pin").log_of("pin");
    assert!(log.contains(&format!("attested by {SIGNER}")), "{log}");
    // The action's freshness step: the job summary names the release the file pins now, found
    // among the releases and verified again by `template-verify status`.
    let summary = c.run.summary();
    assert!(
        summary.contains("## Coding agent template: freshness")
            && summary.contains(&format!("pins release `{}`", newest.tag))
            && summary.contains("The pinned release is the newest complete one."),
        "{summary}"
    );
}

#[test]
fn an_incomplete_or_unfinished_newest_release_is_passed_over_for_the_complete_one_before() {
    let Some(_docker) = light_docker() else {
        return;
    };
    let releases = Releases::new();
    let complete = releases.make(
        "2026.11.30-aaaaaaaaaaaa",
        "2026-11-24T04:50:00Z",
        None,
        None,
    );
    let incomplete = releases.make(
        "2026.11.30-cccccccccccc",
        "2026-11-27T04:50:00Z",
        Some("version @openai/codex"),
        None,
    );
    assert_eq!(incomplete.receipt["complete"], false);
    releases.unfinished("2026.11.30-dddddddddddd", "2026-11-30T04:50:00Z");
    let (c, before) = consume(&releases, &releases.unpinned());
    c.run.assert_success();
    let image = complete.receipt["index"]["reference"].as_str().unwrap();
    assert_eq!(c.template, before.replace(&releases.unpinned(), image));
    let out = pin_outputs(&c);
    assert_eq!(out["release-tag"], complete.tag);
    let summary = &out["summary"];
    assert!(
        summary.contains("2026.11.30-cccccccccccc: its receipt says it is incomplete")
            && summary.contains("2026.11.30-dddddddddddd: no receipt"),
        "{summary}"
    );
}

#[test]
fn a_tampered_newest_release_fails_the_step_and_leaves_the_file_alone() {
    let Some(_docker) = light_docker() else {
        return;
    };
    let releases = Releases::new();
    releases.make(
        "2026.11.30-aaaaaaaaaaaa",
        "2026-11-24T04:50:00Z",
        None,
        None,
    );
    // A self-consistent edit, renamed to its new sha256: only the attestation can tell.
    let tampered = releases.make(
        "2026.11.30-eeeeeeeeeeee",
        "2026-11-27T04:50:00Z",
        None,
        Some(|r: &mut Value| r["platforms"][0]["smoke"]["checks"][0]["output"] = "edited".into()),
    );
    let (c, before) = consume(&releases, &releases.unpinned());
    let log = assert_failed_and_unchanged(&c, &before);
    assert!(
        log.contains(&format!("release {}: the receipt", tampered.tag))
            && log.contains(&format!("is not attested by {SIGNER}")),
        "{log}"
    );
    assert!(
        log.contains(&format!("{TEMPLATE_FILE} is unchanged")),
        "{log}"
    );
}

/// A release carrying its signed bundles, as the release workflow attaches them, is pinned
/// with `attestations: native` although GitHub's attestation API holds nothing of it (only the
/// verifier binary's attestation, which the action's first step checks with gh): the bundles
/// come with the release's assets. `both` pins it too: gh is given the same bundles and root
/// and asks no API (the gh stand-in verifies them as gh does, `replay/src/gh.py`); and a
/// receipt edited consistently after signing is refused natively, offline.
#[test]
fn a_release_is_pinned_natively_from_its_bundle_assets_without_the_attestation_api() {
    let Some(_docker) = light_docker() else {
        return;
    };
    let releases = Releases::bundled();
    let newest = releases.make(
        "2026.11.30-cccccccccccc",
        "2026-11-27T04:50:00Z",
        None,
        None,
    );
    let native = "          attestations: native\n";
    let (c, before) = consume_with(&releases, &releases.unpinned(), native);
    c.run.assert_success();
    let image = newest.receipt["index"]["reference"].as_str().unwrap();
    assert_eq!(c.template, before.replace(&releases.unpinned(), image));
    assert_eq!(pin_outputs(&c)["release-tag"], newest.tag);

    // `both`: gh is handed the same bundle assets and trusted root (`--bundle`,
    // `--custom-trusted-root`), so it judges offline too, and the two verdicts agree.
    let (c, before) = consume_with(
        &releases,
        &releases.unpinned(),
        "          attestations: both\n",
    );
    c.run.assert_success();
    assert_eq!(c.template, before.replace(&releases.unpinned(), image));
    assert_eq!(pin_outputs(&c)["release-tag"], newest.tag);

    let tampered_releases = Releases::bundled();
    let tampered = tampered_releases.make(
        "2026.11.30-dddddddddddd",
        "2026-11-27T04:50:00Z",
        None,
        Some(|r: &mut Value| r["platforms"][0]["smoke"]["checks"][0]["output"] = "edited".into()),
    );
    let (c, before) = consume_with(&tampered_releases, &tampered_releases.unpinned(), native);
    let log = assert_failed_and_unchanged(&c, &before);
    assert!(
        log.contains(&format!("release {}: the receipt", tampered.tag))
            && log.contains("no bundle among"),
        "{log}"
    );
}

#[test]
fn a_file_that_already_names_the_newest_release_is_left_as_it_is() {
    let Some(_docker) = light_docker() else {
        return;
    };
    let releases = Releases::new();
    let newest = releases.make(
        "2026.11.30-bbbbbbbbbbbb",
        "2026-11-27T04:50:00Z",
        None,
        None,
    );
    let image = newest.receipt["index"]["reference"].as_str().unwrap();
    let (c, before) = consume(&releases, image);
    c.run.assert_success();
    assert_eq!(c.template, before);
    let out = pin_outputs(&c);
    assert_eq!(out["changed"], "false");
    assert_eq!(out["previous-image"], image);
    assert!(c.pull_requests.is_empty(), "no pull request for no change");
    assert_eq!(
        c.run.job("pin").step("Open a pull request").outcome,
        Status::Skipped
    );
}

#[test]
fn an_unreachable_registry_fails_the_step_and_leaves_the_file_alone() {
    let Some(_docker) = light_docker() else {
        return;
    };
    let releases = Releases::new();
    let newest = releases.make(
        "2026.11.30-bbbbbbbbbbbb",
        "2026-11-27T04:50:00Z",
        None,
        None,
    );
    releases.forwarder.shut();
    let (c, before) = consume(&releases, &releases.unpinned());
    let log = assert_failed_and_unchanged(&c, &before);
    let registry = releases.repository.split('/').next().unwrap();
    assert!(
        log.contains(&format!("release {}", newest.tag)) && log.contains(registry),
        "the error names the release and the registry: {log}"
    );
}

/// `require-verified-inputs: true` reaches `consume --require-verified-inputs`: a release made
/// against a registry that served no signatures (the genuine releases here are locked against
/// this machine's stripping mirror, so their receipts say `unverified`) is refused, naming the
/// release and the registry, and the file stays as it was. A value other than `true` or `false`
/// is refused before the verifier runs, and so is an `attestations` other than gh, native or
/// both.
#[test]
fn a_consumer_that_requires_verified_inputs_refuses_an_unverified_release() {
    let Some(_docker) = light_docker() else {
        return;
    };
    let releases = Releases::new();
    let newest = releases.make(
        "2026.11.30-bbbbbbbbbbbb",
        "2026-11-27T04:50:00Z",
        None,
        None,
    );
    assert_eq!(
        newest.receipt["inputs"]["status"], "unverified",
        "the genuine release's receipt records the mirror's unverified inputs"
    );
    let (c, before) = consume_with(
        &releases,
        &releases.unpinned(),
        "          require-verified-inputs: true\n",
    );
    let log = assert_failed_and_unchanged(&c, &before);
    assert!(
        log.contains(&format!(
            "release {}: its npm inputs are `unverified`",
            newest.tag
        )) && log.contains("--require-verified-inputs refuses that"),
        "{log}"
    );

    let (c, before) = consume_with(
        &releases,
        &releases.unpinned(),
        "          require-verified-inputs: yes\n",
    );
    let log = assert_failed_and_unchanged(&c, &before);
    assert!(
        log.contains("require-verified-inputs is 'yes'; write true or false"),
        "{log}"
    );

    // The same for `attestations`: a word other than gh, native or both is refused before the
    // verifier runs (a seconds-long replay: the verifier is built once for all of them).
    let (c, before) = consume_with(
        &releases,
        &releases.unpinned(),
        "          attestations: Native\n",
    );
    let log = assert_failed_and_unchanged(&c, &before);
    assert!(
        log.contains("attestations is 'Native'; write gh, native or both"),
        "{log}"
    );
}

/// A copy of the release workflow dispatched from another branch (no `release` environment
/// there) signs with the same workflow path at another ref. Its attestations are refused:
/// the verifier it carries is never run, and when it carries none, its receipt is refused by
/// the genuine verifier of the release before it. The file stays as it was either way.
#[test]
fn a_release_attested_by_a_branch_dispatched_run_is_refused() {
    let Some(_docker) = light_docker() else {
        return;
    };
    let branch = SignedFrom {
        source_ref: "refs/heads/attacker",
        runner_environment: "github-hosted",
    };
    // It carries a verifier of its own: the action refuses to run it.
    let releases = Releases::new();
    releases.make(
        "2026.11.30-aaaaaaaaaaaa",
        "2026-11-24T04:50:00Z",
        None,
        None,
    );
    let forged = releases.make_from(
        "2026.11.30-ffffffffffff",
        "2026-11-27T04:50:00Z",
        None,
        None,
        branch,
        true,
    );
    let (c, before) = consume(&releases, &releases.unpinned());
    assert_eq!(c.run.result("pin"), Status::Failure);
    assert_eq!(c.template, before);
    assert!(c.pull_requests.is_empty());
    let log = c.run.job("pin").log_of("pin");
    assert!(
        log.contains(&format!(
            "template-verify-linux-amd64 of release {}",
            forged.tag
        )) && log.contains("from refs/heads/main on a GitHub-hosted runner: refusing to run it")
            && log.contains(
                "expected SourceRepositoryRef to be refs/heads/main, got refs/heads/attacker"
            ),
        "{log}"
    );

    // It carries none: the older release's verifier runs and refuses the forged receipt.
    let releases = Releases::new();
    releases.make(
        "2026.11.30-aaaaaaaaaaaa",
        "2026-11-24T04:50:00Z",
        None,
        None,
    );
    let forged = releases.make_from(
        "2026.11.30-ffffffffffff",
        "2026-11-27T04:50:00Z",
        None,
        None,
        branch,
        false,
    );
    let (c, before) = consume(&releases, &releases.unpinned());
    let log = assert_failed_and_unchanged(&c, &before);
    assert!(
        log.contains(&format!("release {}: the receipt", forged.tag))
            && log.contains(&format!("is not attested by {SIGNER} from refs/heads/main"))
            && log.contains("refs/heads/attacker"),
        "{log}"
    );

    // Made on a self-hosted runner from the default branch: refused as well.
    let releases = Releases::new();
    let self_hosted = SignedFrom {
        source_ref: "refs/heads/main",
        runner_environment: "self-hosted",
    };
    releases.make(
        "2026.11.30-aaaaaaaaaaaa",
        "2026-11-24T04:50:00Z",
        None,
        None,
    );
    releases.make_from(
        "2026.11.30-ffffffffffff",
        "2026-11-27T04:50:00Z",
        None,
        None,
        self_hosted,
        false,
    );
    let (c, before) = consume(&releases, &releases.unpinned());
    let log = assert_failed_and_unchanged(&c, &before);
    assert!(
        log.contains("RunnerEnvironment to be github-hosted, got self-hosted"),
        "{log}"
    );
}

/// The verifier as a consumer has it: built in a scratch copy that no longer exists, copied
/// to a directory of its own, run as another user from another directory, on a genuine
/// release's assets. It judges the receipt by the release's own manifest.yaml, and refuses a
/// manifest the receipt does not record.
#[test]
fn the_verifier_verifies_a_release_away_from_its_build_tree() {
    use std::os::unix::fs::PermissionsExt as _;
    let Some(_docker) = light_docker() else {
        return;
    };
    runner_user();
    let releases = Releases::new();
    let made = releases.make(
        "2026.11.30-bbbbbbbbbbbb",
        "2026-11-27T04:50:00Z",
        None,
        None,
    );
    // What a consumer downloads: the release's assets, readable by the runner user.
    let home = tempfile::Builder::new()
        .prefix("consumer-")
        .tempdir_in(crate::support::run_dir())
        .unwrap();
    let assets = home.path().join("release");
    std::fs::create_dir_all(&assets).unwrap();
    for entry in std::fs::read_dir(
        releases
            .state
            .path()
            .join(format!("releases/{}/assets", made.tag)),
    )
    .unwrap()
    {
        let entry = entry.unwrap();
        let to = assets.join(entry.file_name());
        std::fs::copy(entry.path(), &to).unwrap();
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let receipt = std::fs::read_dir(&assets)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("receipt-")
        })
        .unwrap();
    for dir in [home.path(), assets.as_path()] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let binary = home.path().join("template-verify");
    std::fs::copy(verifier(), &binary).unwrap();
    std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = |args: &[&std::ffi::OsStr]| {
        let out = Command::new("setpriv")
            .args([
                "--reuid",
                RUNNER_USER,
                "--regid",
                RUNNER_USER,
                "--init-groups",
                "--",
            ])
            .arg(&binary)
            .args(args)
            .current_dir(home.path())
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", home.path())
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let (ok, text) = run(&[
        "receipt".as_ref(),
        "verify".as_ref(),
        receipt.as_os_str(),
        "--artifacts".as_ref(),
        assets.as_os_str(),
        "--check-registry".as_ref(),
    ]);
    assert!(ok, "{text}");
    assert!(
        text.contains("valid, complete, matches the registry"),
        "{text}"
    );

    // Without the release's manifest the verifier has nothing to judge by.
    let (ok, text) = run(&["receipt".as_ref(), "verify".as_ref(), receipt.as_os_str()]);
    assert!(
        !ok && text.contains("--artifacts DIR") && text.contains("--manifest FILE"),
        "{text}"
    );

    // A manifest the receipt does not record (a laxer one, say) is refused, naming the field.
    let other = home.path().join("manifest.yaml");
    let mut text = std::fs::read_to_string(assets.join("manifest.yaml")).unwrap();
    text.push_str("# edited\n");
    std::fs::write(&other, text).unwrap();
    let (ok, text) = run(&[
        "receipt".as_ref(),
        "verify".as_ref(),
        receipt.as_os_str(),
        "--manifest".as_ref(),
        other.as_os_str(),
    ]);
    assert!(!ok, "{text}");
    assert!(
        text.contains("artifacts[4].sha256") && text.contains("not this release's"),
        "{text}"
    );
}

/// A private image: `gh attestation verify oci://…` reads registry credentials from the docker
/// config only, so the action's registry inputs must reach it there (the gh stand-in answers
/// 401 for a registry marked private when the docker config has no entry for it).
#[test]
fn registry_credentials_reach_gh_for_a_private_image() {
    let Some(_docker) = light_docker() else {
        return;
    };
    let releases = Releases::new();
    let newest = releases.make(
        "2026.11.30-bbbbbbbbbbbb",
        "2026-11-27T04:50:00Z",
        None,
        None,
    );
    let registry = releases.repository.split('/').next().unwrap().to_string();
    std::fs::write(
        releases.state.path().join("private-registries"),
        format!("{registry}\n"),
    )
    .unwrap();

    let (c, before) = consume(&releases, &releases.unpinned());
    let log = assert_failed_and_unchanged(&c, &before);
    assert!(
        log.contains("UNAUTHORIZED") && log.contains(&registry),
        "{log}"
    );

    let inputs = format!(
        "          registry: {registry}\n          registry-username: reader\n          registry-password: s3cret\n"
    );
    let (c, before) = consume_with(&releases, &releases.unpinned(), &inputs);
    c.run.assert_success();
    let image = newest.receipt["index"]["reference"].as_str().unwrap();
    assert_eq!(c.template, before.replace(&releases.unpinned(), image));
}
