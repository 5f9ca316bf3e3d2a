//! What the end-to-end tests share: the runner of the xtask binary ([`xtask::xtask`]), the
//! Docker engine and the schedule of the tests that use it ([`docker`]), fixtures (an npm
//! registry, a genuine release, the static verifier), and small helpers. The workflow replay
//! engine is a crate of its own (`replay/`, `actions_replay`).

pub mod docker;
pub mod genuine_release;
pub mod npm_fixture;
pub mod registry;
pub mod sigstore_standin;
pub mod verifier;
pub mod xtask;

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

/// The repository's root (this checkout), whatever the caller's `XTASK_ROOT` says. Private to
/// the support code on purpose: a test reaches the checkout only through [`checkout_path`],
/// [`checkout_file`] and [`committed_checkout`], which never hand it a file a release rewrote
/// (`tidy::tests_reach_the_checkout_only_through_support` keeps it so).
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the xtask crate sits in the repository root")
        .to_path_buf()
}

/// The path of `relative` in this checkout, for what a release never rewrites (scripts, the
/// Dockerfile, the manifest, the workflows, the schema, the caches under `.xtask/`). Panics,
/// naming the accessor to use instead, for a file a release rewrites ([`RELEASE_WRITTEN`]) or a
/// directory that holds one: after the README's release command those hold a newer lock and
/// clock than the commit the tests were written against.
pub fn checkout_path(relative: &str) -> PathBuf {
    let normal = relative.trim_start_matches("./").trim_end_matches('/');
    let holds_release_written = RELEASE_WRITTEN
        .iter()
        .any(|written| *written == normal || written.starts_with(&format!("{normal}/")))
        || normal.is_empty()
        || normal == ".";
    assert!(
        !holds_release_written,
        "`{relative}` is, or holds, a file a release rewrites ({RELEASE_WRITTEN:?}); read it with \
         support::checkout_file (the committed bytes), or use support::committed_checkout() as \
         the root"
    );
    repo_root().join(normal)
}

/// The bytes of `relative` as the tests must see the checkout: as committed at `HEAD` for a
/// file a release rewrites ([`RELEASE_WRITTEN`]), as on disk for every other file (so an edit
/// not yet committed is tested). The one accessor for a file of `template/`.
pub fn checkout_file(relative: &str) -> Vec<u8> {
    if RELEASE_WRITTEN.contains(&relative) {
        committed_file(relative)
    } else {
        let path = checkout_path(relative);
        std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
    }
}

/// [`checkout_file`] as text.
pub fn checkout_text(relative: &str) -> String {
    String::from_utf8(checkout_file(relative))
        .unwrap_or_else(|e| panic!("{relative} is not UTF-8: {e}"))
}

/// The checkout as the tests see it, as one root ([`scratch_repo`] of it, made once per test
/// process): tracked files as on disk, the release-written ones as committed. It is the root
/// (`XTASK_ROOT`) of every xtask run that names none ([`xtask::xtask`]) and of a `Layout` a
/// test builds for "the checkout". The tool's caches stay the checkout's own
/// ([`checkout_caches`]), so a second run reuses what the first one downloaded and assembled.
pub fn committed_checkout() -> &'static Path {
    static CHECKOUT: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    CHECKOUT.get_or_init(|| scratch_repo("checkout-")).path()
}

/// The variables that point the xtask at the checkout's own caches (`.xtask/cache`, the pinned
/// npm and other verified downloads; `.xtask/layers`, the layer caches) from any root.
pub fn checkout_caches() -> [(&'static str, PathBuf); 2] {
    [
        ("XTASK_CACHE_DIR", repo_root().join(".xtask/cache")),
        ("XTASK_LAYER_CACHE", repo_root().join(".xtask/layers")),
    ]
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// `prefix-<pid>-<nanos>`: a name no other test, run or process uses.
pub fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}-{}-{nanos}", std::process::id())
}

/// `$TMPDIR/xtask-it-<pid>`: where this test process keeps what it holds for its whole run.
/// Fixtures held in statics are never dropped, so a temporary directory of theirs would
/// outlive the run; under this one, the next run removes it. The first call removes the
/// directories of earlier runs whose process has ended.
pub fn run_dir() -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let tmp = std::env::temp_dir();
        for entry in std::fs::read_dir(&tmp).into_iter().flatten().flatten() {
            let name = entry.file_name();
            let pid = name
                .to_str()
                .and_then(|n| n.strip_prefix("xtask-it-"))
                .and_then(|p| p.parse::<u32>().ok());
            if let Some(pid) = pid {
                if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
        let dir = tmp.join(format!("xtask-it-{}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        dir
    })
}

/// The `runner` user the workflow replays run steps as (scripts/setup-runner-user.sh, idempotent),
/// made once per test process.
pub fn runner_user() {
    static DONE: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    DONE.get_or_init(|| {
        let status = Command::new("bash")
            .arg(repo_root().join("scripts/setup-runner-user.sh"))
            .status()
            .unwrap();
        assert!(status.success(), "scripts/setup-runner-user.sh failed");
    });
}

/// The `actions/cache` store the replays of `update-template.yml` share in this test process
/// (the runner's Rust build caches): the verifier job's replay (`verifier.rs`) fills it, the
/// scenarios (tests/it/replay.rs) read and add to it, as runs of one repository share GitHub's
/// cache. Empty at the start of each run: a static is never dropped, so a temporary directory
/// held there outlived every run (each suite left its 4.7 GB store in /tmp until the disk was
/// full); under [`run_dir`] the next run removes it.
pub fn replay_cache_store() -> &'static Path {
    static STORE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    STORE.get_or_init(|| {
        let dir = run_dir().join("replay-cache");
        std::fs::create_dir_all(&dir).unwrap();
        dir
    })
}

/// A runtime for a test's own async calls (the engine, a registry) or a fixture server's thread.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The last `max` bytes of `text` (on a character boundary): the end of a long log.
pub fn tail(text: &str, max: usize) -> &str {
    let start = text.len().saturating_sub(max);
    let start = (start..text.len())
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(text.len());
    &text[start..]
}

/// The files a release (`scripts/release.sh`, `cargo xtask release`) rewrites in the checkout:
/// its resolution and lock (what the workflow's `plan` artifact carries). After the README's
/// release command they hold a newer lock and clock than the commit, so tests that reproduce
/// the committed lock or assert the committed clock read these from `HEAD`, never from disk.
pub const RELEASE_WRITTEN: [&str; 4] = [
    "template/package.json",
    "template/package-lock.json",
    "template/inventory.json",
    "template/INVENTORY.md",
];

/// The release-written files ([`RELEASE_WRITTEN`]) whose bytes on disk differ from `HEAD`'s:
/// what a release (or `.ci/run`'s relock) left in the checkout. The one place that reads them
/// from disk, to say so.
pub fn release_written_changes() -> Vec<&'static str> {
    RELEASE_WRITTEN
        .iter()
        .copied()
        .filter(|path| std::fs::read(repo_root().join(path)).ok() != Some(committed_file(path)))
        .collect()
}

/// `path` (relative to the repository) as committed at `HEAD`.
pub fn committed_file(path: &str) -> Vec<u8> {
    let root = repo_root();
    let out = Command::new("git")
        .args(["show", &format!("HEAD:{path}")])
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git show HEAD:{path} in {}: {}",
        root.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// The committed resolution's clock, as written (`resolved_at` of template/inventory.json at
/// `HEAD`: a release since may have rewritten the file on disk): with it, a plan regenerates
/// the committed lockfile.
pub fn committed_resolved_at() -> String {
    let inventory: serde_json::Value =
        serde_json::from_slice(&committed_file("template/inventory.json")).unwrap();
    inventory["resolved_at"]
        .as_str()
        .expect("HEAD:template/inventory.json has a `resolved_at`")
        .to_owned()
}

/// A scratch git repository holding this checkout's tracked files as they are on disk, except
/// the ones a release rewrites ([`RELEASE_WRITTEN`], as committed), committed on `main`: a
/// release or a replay can write into it (receipts, lockfiles, a workspace) without touching
/// the checkout, and gets the same inputs whatever the README's release command left there.
pub fn scratch_repo(prefix: &str) -> tempfile::TempDir {
    let root = repo_root();
    let files = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(files.status.success(), "git ls-files in {}", root.display());
    let scratch = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(run_dir())
        .unwrap();
    for file in files.stdout.split(|b| *b == 0).filter(|f| !f.is_empty()) {
        let file = std::str::from_utf8(file).unwrap();
        let to = scratch.path().join(file);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        copy_checkout_file(file, &to);
    }
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["add", "-A"],
        &["commit", "-qm", "scratch"],
    ] {
        let ok = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(scratch.path())
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?} failed in {}", scratch.path().display());
    }
    scratch
}

/// Writes the checkout's `relative` to `to` as [`checkout_file`] reads it, keeping the mode bits
/// of a file copied from disk (scripts stay executable).
fn copy_checkout_file(relative: &str, to: &Path) {
    if RELEASE_WRITTEN.contains(&relative) {
        std::fs::write(to, committed_file(relative))
    } else {
        std::fs::copy(checkout_path(relative), to).map(drop)
    }
    .unwrap_or_else(|e| panic!("copying {relative} to {}: {e}", to.display()));
}

/// The committed files a build or a receipt reads from `template/`: what a scratch root for
/// an image or a release needs (with a Dockerfile of its own).
pub const TEMPLATE_FILES: [&str; 5] = [
    "template/manifest.yaml",
    "template/inventory.json",
    "template/package.json",
    "template/package-lock.json",
    "template/install-plan.js",
];

/// Makes `root` a git repository with one empty commit, as a scratch root a release step runs in
/// needs (`receipt write` records the checkout's commit).
pub fn commit_fixture(root: &Path) {
    for args in [
        &["init", "-q"][..],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "fixture",
        ],
    ] {
        let status = Command::new("git")
            .args(args)
            .current_dir(root)
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?} in {}", root.display());
    }
}

/// A scratch root for `XTASK_ROOT` holding copies of `paths` (relative to the repository), each
/// as [`checkout_file`] reads it (the release-written ones as committed).
pub fn scratch_root_with(paths: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir_in(run_dir()).unwrap();
    for path in paths {
        let to = dir.path().join(path);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        copy_checkout_file(path, &to);
    }
    dir
}

/// A git repository on `main` holding `files`, as the replay's `action_source` reads one (the
/// replay crate's own, so its engine tests and these make repositories the same way).
pub use actions_replay::committed_repo;
