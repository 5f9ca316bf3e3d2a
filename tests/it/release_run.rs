//! End-to-end test of `cargo xtask release`, the maintainer's one command: a real release of
//! both platforms to a real local registry, then a second run with nothing changed, which
//! must build nothing. It runs on a scratch copy of the repository (its own git commit, its
//! own receipts), with the committed clock, so while the registry answers that clock as it
//! did when the lock was committed, it regenerates the committed lockfile and reuses the images
//! other tests built (build ids are content addresses).

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::support::docker::{heavy_docker, on_engine, use_engine, Engine};
use crate::support::xtask::xtask;
use crate::support::{
    checkout_file, checkout_path, committed_resolved_at, scratch_repo, tail, unique,
};

fn copy_repo() -> tempfile::TempDir {
    scratch_repo("xtask-release-run-")
}

/// The committed resolution's clock, plus `later_secs`.
fn committed_clock(later_secs: i64) -> String {
    let at: chrono::DateTime<chrono::Utc> = committed_resolved_at().parse().unwrap();
    (at + chrono::Duration::seconds(later_secs)).to_rfc3339()
}

fn release(root: &Path, extra: &[&str]) -> (Value, std::time::Duration) {
    release_at(root, &committed_clock(0), extra)
}

/// A repository of this test process's own in the shared local registry: tags are immutable,
/// so a release from an earlier run of other code (other layer bytes under the same tag) must
/// not decide this run's outcome.
fn repository() -> &'static str {
    static REPOSITORY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    REPOSITORY.get_or_init(|| unique("xtask-test/release-run"))
}

fn release_at(root: &Path, now: &str, extra: &[&str]) -> (Value, std::time::Duration) {
    let out = xtask()
        .args(["release", "--force", "--json", "--now", now])
        .args(["--platform", "linux/amd64", "--platform", "linux/arm64"])
        .args(extra)
        .env("XTASK_ROOT", root)
        .env("XTASK_OCI_REPOSITORY", repository())
        .env("XTASK_CACHE_DIR", checkout_path(".xtask/cache"))
        .run();
    assert!(
        out.success(),
        "release failed:\n{}\n{}",
        out.stdout_text(),
        out.stderr_text()
    );
    (out.json(), out.elapsed)
}

#[test]
fn dry_run_prints_the_plan_and_changes_nothing() {
    let root = copy_repo();
    let before = std::fs::read(root.path().join("template/package-lock.json")).unwrap();
    let (plan, _) = release(root.path(), &["--dry-run"]);
    let phases: Vec<&str> = plan["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(
        phases,
        ["plan", "build linux/amd64", "build linux/arm64", "ship"]
    );
    let steps: Vec<&str> = plan["phases"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["steps"].as_array().unwrap())
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(steps.first(), Some(&"gate"));
    assert!(steps.contains(&"smoke linux/arm64") && steps.contains(&"push linux/arm64 by digest"));
    // The immutable tag is the very last step, after the receipt verified.
    assert_eq!(steps[steps.len() - 2..], ["receipt verify", "tag"]);
    assert_eq!(
        std::fs::read(root.path().join("template/package-lock.json")).unwrap(),
        before
    );
    assert!(
        !root.path().join(".xtask/runs").exists(),
        "a dry run creates no run directory"
    );
}

/// A receipt's record of `platform` (its `platforms` entry).
fn platform_record(receipt: &Value, platform: &str) -> Value {
    receipt["platforms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["platform"] == platform)
        .unwrap_or_else(|| panic!("the receipt has no {platform}: {receipt}"))
        .clone()
}

/// The host's release of both platforms, made once per test process and shared by the tests
/// that start from it (heavy tests hold the engine alone, so never two at once).
struct HostRelease {
    root: tempfile::TempDir,
    report: Value,
}

fn host_release() -> &'static HostRelease {
    static RELEASE: std::sync::OnceLock<HostRelease> = std::sync::OnceLock::new();
    RELEASE.get_or_init(|| {
        let root = copy_repo();
        let (report, took) = release(root.path(), &[]);
        eprintln!("first release: {:.1}s", took.as_secs_f64());
        HostRelease { root, report }
    })
}

#[test]
fn a_release_then_a_rerun_with_nothing_changed() {
    let Some(_docker) = heavy_docker() else {
        return;
    };
    let HostRelease {
        root,
        report: first,
    } = host_release();
    for step in first["steps"].as_array().unwrap() {
        eprintln!(
            "  {:<32} {:>7.1}s",
            step["name"].as_str().unwrap(),
            step["seconds"].as_f64().unwrap()
        );
    }
    assert_eq!(first["status"], "released", "{first}");
    let receipt = first["receipt"].as_str().unwrap();
    let verdict = xtask()
        .args(["receipt", "verify", receipt, "--json"])
        .env("XTASK_ROOT", root.path())
        .run()
        .json();
    assert_eq!(verdict["valid"], true, "{verdict}");
    assert_eq!(verdict["complete"], true, "{verdict}");
    // The arm64 image (built and smoke-tested under qemu by this release, and by no other
    // test: the receipt's completeness above is its smoke's) is an arm64 image within the
    // template's size budget, as the amd64 one is in tests/it/image.rs.
    let arm64 = platform_record(
        &serde_json::from_slice(&std::fs::read(receipt).unwrap()).unwrap(),
        "linux/arm64",
    );
    let image = format!("coding-agent:{}", arm64["build_id"].as_str().unwrap());
    let inspect = on_engine(|docker| {
        let image = image.clone();
        async move { xtask::image::engine::inspect_image(&docker, &image).await }
    })
    .unwrap()
    .unwrap_or_else(|| panic!("the engine does not hold {image}, the release's arm64 image"));
    assert_eq!(
        xtask::image::engine::image_platform(&inspect),
        "linux/arm64"
    );
    let size = inspect.size.unwrap_or_default();
    assert!(
        (1_000_000_000..=2_300_000_000).contains(&size),
        "{image} weighs {size} bytes; the template's budget is 2.3 GB"
    );
    // The release's assets, as a consumer downloads them, verify against the receipt.
    // The receipt sits among the assets it names, in `.xtask/releases/<tag>/`.
    let assets = Path::new(receipt).parent().unwrap().to_path_buf();
    assert!(
        assets.ends_with(first["tag"].as_str().unwrap()),
        "{}",
        assets.display()
    );
    xtask()
        .args(["receipt", "verify", "--artifacts"])
        .arg(&assets)
        .arg(assets.join(Path::new(receipt).file_name().unwrap()))
        .env("XTASK_ROOT", root.path())
        .run()
        .assert_success();
    assert!(
        assets.join("package-lock.json").exists() && assets.join("receipt.v2.schema.json").exists()
    );
    // What the release wrote is what `lock` makes of the same clock, byte for byte: an
    // independent regeneration from the same registry finds no drift.
    xtask()
        .args(["lock", "--check"])
        .env("XTASK_ROOT", root.path())
        .run()
        .assert_success();
    // The committed files came from the same clock, but from the registry as it was then. A
    // partial mirror that has since filled in a version published before the cutoff answers
    // differently for the same clock; that is the world's change, not the release's, so it is
    // reported, and the release above still had to build, test and publish the new answer.
    for file in ["template/package-lock.json", "template/inventory.json"] {
        if std::fs::read(root.path().join(file)).unwrap() != checkout_file(file) {
            eprintln!(
                "note: the registry now resolves the committed clock differently from the \
                 committed {file}; `cargo xtask lock --check` shows the difference"
            );
        }
    }

    let receipts: Vec<_> = std::fs::read_dir(&assets)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("receipt-"))
        .collect();
    assert_eq!(receipts.len(), 1, "one receipt per release: {receipts:?}");

    // A minute later: a new clock, but nothing that is released changed. The plan ends the
    // run, and the checkout is left exactly as the first release left it (the inventory keeps
    // its clock). As the first release left it, not as committed: a partial mirror may have
    // answered the committed clock differently (the note above), and then the first release
    // rightly rewrote template/.
    let state = |root: &Path| {
        let status = Command::new("git")
            .args(["status", "--porcelain", "--", "template", "Dockerfile"])
            .current_dir(root)
            .output()
            .unwrap();
        let files = ["Dockerfile"]
            .into_iter()
            .map(str::to_owned)
            .chain(crate::support::RELEASE_WRITTEN.map(str::to_owned))
            .map(|file| (std::fs::read(root.join(&file)).unwrap(), file))
            .collect::<Vec<_>>();
        (String::from_utf8_lossy(&status.stdout).into_owned(), files)
    };
    let before = state(root.path());
    let (second, took) = release_at(root.path(), &committed_clock(60), &[]);
    eprintln!("re-run with nothing changed: {:.1}s", took.as_secs_f64());
    assert_eq!(second["status"], "unchanged", "{second}");
    assert_eq!(second["tag"], first["tag"]);
    assert!(second["changes"].as_array().unwrap().is_empty());
    let after = state(root.path());
    assert!(
        before == after,
        "an unchanged run leaves the checkout as it was: git status before\n{}after\n{}",
        before.0,
        after.0
    );
}

/// The amd64 leg of the host's release, run again on `engine` from the same plan, as the
/// workflow's amd64 job runs on a fresh runner: in a copy of the host's checkout without its
/// `.xtask/` (no base root filesystem, no layer cache: nothing another engine made is
/// reused), `release build` with a copy of the host's run directory less its amd64 results,
/// then `release ship` with the host's arm64 results. Returns the amd64 results it wrote and
/// the receipt's path.
fn amd64_leg_on(engine: Engine, host: &HostRelease) -> (Value, std::path::PathBuf) {
    use_engine(engine);
    let host_run = Path::new(host.report["run_dir"].as_str().unwrap());
    let scratch = tempfile::Builder::new()
        .prefix(&format!("xtask-engine-leg-{engine:?}-"))
        .tempdir_in(crate::support::run_dir())
        .unwrap();
    let run = scratch.keep();
    let root = run.join("checkout");
    std::fs::create_dir(&root).unwrap();
    let copied = Command::new("sh")
        .arg("-c")
        .arg("tar -C \"$1\" --exclude=./.xtask -cf - . | tar -C \"$2\" -xf -")
        .args([
            "copy",
            host.root.path().to_str().unwrap(),
            root.to_str().unwrap(),
        ])
        .status()
        .unwrap();
    assert!(copied.success(), "copying {}", host.root.path().display());
    let copied = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", host_run.display()))
        .arg(run.join("run"))
        .status()
        .unwrap();
    assert!(copied.success(), "cp -a {}", host_run.display());
    let run_dir = run.join("run");
    // Whatever the host's amd64 leg left: its work directory, results and SBOM.
    for entry in std::fs::read_dir(&run_dir).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.contains("amd64") {
            let path = entry.path();
            match path.is_dir() {
                true => std::fs::remove_dir_all(&path).unwrap(),
                false => std::fs::remove_file(&path).unwrap(),
            }
        }
    }
    let phase = |args: &[&str]| {
        let out = xtask()
            .args(["release"])
            .args(args)
            .arg("--json")
            .env("XTASK_ROOT", &root)
            .env("XTASK_OCI_REPOSITORY", repository())
            .env("XTASK_CACHE_DIR", checkout_path(".xtask/cache"))
            .run();
        assert!(
            out.success(),
            "{engine:?}: release {args:?} failed:\n{}\n{}",
            out.stdout_text(),
            tail(&out.stderr_text(), 6000)
        );
        eprintln!(
            "{engine:?}: release {} in {:.0} s",
            args[0],
            out.elapsed.as_secs_f64()
        );
        out.json()
    };
    let run_arg = run_dir.to_str().unwrap();
    phase(&[
        "build",
        "--plan",
        run_arg,
        "--platform",
        "linux/amd64",
        "--out",
        run_arg,
    ]);
    let assets = run.join("assets");
    let shipped = phase(&[
        "ship",
        "--plan",
        run_arg,
        "--results",
        run_arg,
        "--assets",
        assets.to_str().unwrap(),
    ]);
    let results: Value = serde_json::from_slice(
        &std::fs::read(run_dir.join("results-linux-amd64.json")).expect("amd64 results"),
    )
    .unwrap();
    // The image the leg tested is on that engine (which starts empty in CI: `built` is then
    // true, and every stage came from that engine).
    let image = results["build"]["image"].as_str().unwrap().to_string();
    eprintln!(
        "{engine:?}: {image}, built there: {}",
        results["build"]["built"]
    );
    let found =
        on_engine(
            |docker| async move { xtask::image::engine::inspect_image(&docker, &image).await },
        )
        .unwrap();
    assert!(
        found.is_some(),
        "{engine:?} does not hold the image its leg tested"
    );
    let receipt = std::path::PathBuf::from(
        shipped["receipt"]
            .as_str()
            .unwrap_or_else(|| panic!("{engine:?}: ship names no receipt: {shipped}")),
    );
    (results, receipt)
}

/// The runners' engines release this machine's release. The host (Docker 20.10)
/// released both platforms; its amd64 leg then runs again, from the same plan, on Docker 28's
/// classic store (as GitHub's `ubuntu-24.04`) and on the containerd image store (as Docker 29
/// on `ubuntu-26.04`, where the workflow's amd64 job runs), and ships with the host's arm64
/// leg. Each engine starts empty in CI, so its build is cold: every stage built by that
/// engine and assembled from that engine's export. Each must give the host's platform
/// manifest and config, so its ship finds the release's immutable tag already naming its
/// index, and its receipt must verify against the registry; its smoke run must leave the
/// harnesses' evidence of the host's, byte for byte. The two legs run side by side (a cold
/// build waits on the network about as much as on the two cores).
#[test]
fn the_amd64_leg_on_docker_28_and_the_containerd_store_ships_the_host_s_release() {
    let Some(_docker) = heavy_docker() else {
        return;
    };
    let host = host_release();
    assert_eq!(host.report["status"], "released", "{}", host.report);
    let host_receipt: Value =
        serde_json::from_slice(&std::fs::read(host.report["receipt"].as_str().unwrap()).unwrap())
            .unwrap();
    let host_amd64 = platform_record(&host_receipt, "linux/amd64");
    let host_amd64_results: Value = serde_json::from_slice(
        &std::fs::read(
            Path::new(host.report["run_dir"].as_str().unwrap()).join("results-linux-amd64.json"),
        )
        .expect("the host's amd64 results"),
    )
    .unwrap();
    let legs: Vec<(Engine, (Value, std::path::PathBuf))> = std::thread::scope(|scope| {
        [Engine::Classic28, Engine::Containerd28]
            .map(|engine| (engine, scope.spawn(move || amd64_leg_on(engine, host))))
            .into_iter()
            .map(|(engine, leg)| {
                (
                    engine,
                    leg.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
                )
            })
            .collect()
    });
    for (engine, (results, receipt)) in &legs {
        eprintln!("{engine:?}: amd64 results {results}");
        let verdict = xtask()
            .args(["receipt", "verify", "--check-registry", "--json"])
            .arg(receipt)
            .env("XTASK_ROOT", host.root.path())
            .run();
        assert!(
            verdict.success(),
            "{engine:?}: its receipt does not verify against the registry:\n{}\n{}",
            verdict.stdout_text(),
            verdict.stderr_text()
        );
        let receipt: Value = serde_json::from_slice(&std::fs::read(receipt).unwrap()).unwrap();
        assert_eq!(receipt["release_tag"], host_receipt["release_tag"]);
        assert_eq!(receipt["index"], host_receipt["index"], "{engine:?}");
        let amd64 = platform_record(&receipt, "linux/amd64");
        for field in ["build_id", "digest", "config_digest", "manifest_size"] {
            assert_eq!(
                amd64[field], host_amd64[field],
                "{engine:?}: the amd64 image's {field} differs from the host's"
            );
        }
        // The harnesses' evidence is what the next release compares with, so another smoke
        // run of the same image (other ids, times, interleavings, and here another engine)
        // must give the same bytes: the transcripts asset the receipt records, and each
        // harness's session and written files.
        assert_eq!(
            amd64["transcripts"], host_amd64["transcripts"],
            "{engine:?}: the amd64 smoke run's transcripts differ from the host's"
        );
        assert!(
            !host_amd64["transcripts"].is_null(),
            "the host's receipt records amd64 transcripts: {host_amd64}"
        );
        for (h, other) in host_amd64_results["smoke"]["harnesses"]
            .as_array()
            .unwrap()
            .iter()
            .zip(results["smoke"]["harnesses"].as_array().unwrap())
        {
            assert_eq!(h["name"], other["name"], "{engine:?}: the harnesses' order");
            for field in ["messages", "session", "written"] {
                assert_eq!(
                    h[field], other[field],
                    "{engine:?}: harness {}'s {field} differs from the host's smoke run",
                    h["name"]
                );
            }
        }
        assert_eq!(
            results["smoke"]["harnesses"].as_array().map(Vec::len),
            host_amd64_results["smoke"]["harnesses"]
                .as_array()
                .map(Vec::len),
            "{engine:?}: the harnesses that left evidence"
        );
    }
}
