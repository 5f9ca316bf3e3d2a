//! Crash consistency: the tool is killed with a real SIGKILL to its whole process
//! group at named points (`XTASK_KILL_AT`, `xtask/src/kill_point.rs`), then the same phase is
//! run again as GitHub's "Re-run failed jobs" would, and the end state must be whole:
//!
//! - `lock`: `template/` is the old or the new version at the kill, never a mix, and the
//!   re-run leaves exactly what an uninterrupted run writes, with no staging left behind;
//! - `publish`: the tag is never written before the kill is recovered (it never names an
//!   index that is not wholly there), and the re-run publishes the index an uninterrupted run
//!   publishes, every platform read back;
//! - `release ship`: the tag never names an index whose receipt does not verify, and the
//!   re-run (on the same machine, or on a fresh runner with only the registry kept) ends with
//!   exactly one receipt, verifying with its assets and the registry, whose index the tag
//!   names.
//!
//! Each point is tried on a fresh copy of the state; the test prints every point with what it
//! found, and the figure "recoveries N of M kill points". Fixtures only (the npm fixture
//! registry, tiny images, the local registry): no image is built.

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;

use serde_json::Value;

use crate::support::docker::{light_docker, load_layered_image, load_tiny_image, remove_images};
use crate::support::genuine_release::{
    debian_packages, publish_command, resolve_json_of, write_sbom, Published,
};
use crate::support::npm_fixture::{fixture_now, realistic, scratch_root, FixtureRegistry};
use crate::support::registry::Registry;
use crate::support::xtask::{xtask, Run, Xtask};
use crate::support::{scratch_root_with, tail, unique};

/// One kill point tried: its name, where, and what the re-run left (Err: what is wrong).
struct Tried {
    area: &'static str,
    point: String,
    verdict: Result<String, String>,
}

/// Runs `command` killed at `point`: Ok when the tool died of SIGKILL there, Err saying what
/// happened instead (a point never reached is a test that proves nothing).
fn killed_at(command: &mut Xtask, point: &str) -> Result<Run, String> {
    let run = command
        .env("XTASK_KILL_AT", point)
        .own_process_group()
        .run();
    let announced = run.stderr_text().contains(&format!("kill point {point}"));
    match run.status.signal() {
        Some(9) if announced => Ok(run),
        Some(9) => Err(format!("killed, but not at `{point}`")),
        _ => Err(format!(
            "the run was not killed at `{point}` ({}): the point was never reached: {}",
            run.status,
            tail(&run.stderr_text(), 400)
        )),
    }
}

/// Every file below `dir`, by relative path.
fn files_below(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(base, &path, out);
            } else {
                let name = path.strip_prefix(base).unwrap().display().to_string();
                out.insert(name, std::fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// Which version `now` is, or which files make it a mix.
fn version_of(
    now: &BTreeMap<String, Vec<u8>>,
    old: &BTreeMap<String, Vec<u8>>,
    new: &BTreeMap<String, Vec<u8>>,
) -> Result<&'static str, String> {
    if now == old {
        return Ok("old");
    }
    if now == new {
        return Ok("new");
    }
    let names: std::collections::BTreeSet<&String> =
        now.keys().chain(old.keys()).chain(new.keys()).collect();
    let parts: Vec<String> = names
        .into_iter()
        .filter_map(|name| {
            let (n, o, w) = (now.get(name), old.get(name), new.get(name));
            (o != w).then(|| {
                let which = if n == o {
                    "old"
                } else if n == w {
                    "new"
                } else {
                    "neither"
                };
                format!("{name} {which}")
            })
        })
        .collect();
    Err(format!("a mix: {}", parts.join(", ")))
}

/// A copy of the scratch root `from` (template/ only: lock's state is there).
fn copy_root(from: &Path) -> tempfile::TempDir {
    let to = scratch_root_with(&[]);
    for (name, bytes) in files_below(&from.join("template")) {
        let path = to.path().join("template").join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
    to
}

fn lock_command(root: &Path, registry: &FixtureRegistry) -> Xtask {
    let mut command = xtask();
    command
        .args(["lock", "--registry", &registry.url])
        .args(["--now", &fixture_now().to_rfc3339()])
        .env("XTASK_ROOT", root)
        .env("XTASK_RETRY_BASE_MS", "50");
    command
}

/// `lock` killed while it writes `template/`: between files, and around the swap.
fn lock_points(tried: &mut Vec<Tried>) {
    let registry = realistic();
    crate::lock::with_pinned_npm(&registry);
    registry.set_latest("opencode-ai", "1.0.0");
    let old_root = scratch_root(&[]);
    // The checkout's install plan, which lock keeps and `release plan` hashes as an input.
    std::fs::copy(
        crate::support::checkout_path("template/install-plan.js"),
        old_root.path().join("template/install-plan.js"),
    )
    .unwrap();
    lock_command(old_root.path(), &registry)
        .run()
        .assert_success();
    let old = files_below(&old_root.path().join("template"));
    // The new version: one CLI moved on, as a scheduled run finds it.
    registry.set_latest("opencode-ai", "1.1.0");
    let reference = copy_root(old_root.path());
    lock_command(reference.path(), &registry)
        .run()
        .assert_success();
    let new = files_below(&reference.path().join("template"));
    assert_ne!(old, new, "the fixture must change template/");

    for point in [
        "lock:template-file-written#1",
        "lock:template-file-written#2",
        "lock:template-file-written#3",
        "lock:template-file-written#4",
        "lock:template-swapped",
    ] {
        let root = copy_root(old_root.path());
        let verdict = killed_at(&mut lock_command(root.path(), &registry), point).and_then(|_| {
            let at_kill = version_of(&files_below(&root.path().join("template")), &old, &new)
                .map_err(|mix| format!("template/ at the kill is {mix}"))?;
            let staged = root.path().join(".xtask/lock-template").exists();
            let rerun = lock_command(root.path(), &registry).run();
            if !rerun.success() {
                return Err(format!(
                    "the re-run failed: {}",
                    tail(&rerun.stderr_text(), 600)
                ));
            }
            // A state directory the kill left is rebuilt with a message, not silently.
            if staged
                && !rerun
                    .stderr_text()
                    .contains("a lock killed while it wrote template/ left it")
            {
                return Err("the re-run removed the killed run's staging without a word".into());
            }
            let after = version_of(&files_below(&root.path().join("template")), &old, &new)
                .map_err(|mix| format!("template/ after the re-run is {mix}"))?;
            if after != "new" {
                return Err("the re-run left the old template/".into());
            }
            let left = files_below(&root.path().join(".xtask/lock-template"));
            if !left.is_empty() {
                return Err(format!(
                    "the re-run left lock's staging behind: {:?}",
                    left.keys().collect::<Vec<_>>()
                ));
            }
            let staging = if staged {
                " (staging removed, saying so)"
            } else {
                ""
            };
            Ok(format!(
                "{at_kill} at the kill, new after the re-run{staging}"
            ))
        });
        tried.push(Tried {
            area: "lock",
            point: point.to_string(),
            verdict,
        });
    }
    plan_points(tried, &registry, old_root.path(), &old, &new);
}

/// `release plan` (gate, resolve, lock as child steps, then plan.json) on the checkout `old`
/// at the fixture registry's new versions.
fn plan_command(root: &Path, registry: &FixtureRegistry, out: &Path) -> Xtask {
    let mut command = xtask();
    command
        .args(["release", "plan", "--json", "--force"])
        .args(["--registry", &registry.url])
        .args(["--now", &fixture_now().to_rfc3339()])
        .arg("--out")
        .arg(out)
        .arg("--previous-receipts")
        .arg(root.join("no-receipts"))
        .env("XTASK_ROOT", root)
        .env("XTASK_RETRY_BASE_MS", "50");
    command
}

/// `release plan` killed at its step boundaries and inside its lock step, then run again:
/// the plan and `template/` are those of an uninterrupted plan.
fn plan_points(
    tried: &mut Vec<Tried>,
    registry: &FixtureRegistry,
    old_root: &Path,
    old: &BTreeMap<String, Vec<u8>>,
    new: &BTreeMap<String, Vec<u8>>,
) {
    let with_dockerfile = |root: &Path| {
        std::fs::write(
            root.join("Dockerfile"),
            "# fixture of tests/it/kill_points.rs
",
        )
        .unwrap();
    };
    let reference = copy_root(old_root);
    with_dockerfile(reference.path());
    let out = reference.path().join("plan-out");
    plan_command(reference.path(), registry, &out)
        .run()
        .assert_success();
    let expected = std::fs::read(out.join("plan.json")).unwrap();
    assert_eq!(
        &files_below(&reference.path().join("template")),
        new,
        "an uninterrupted plan locks what lock does"
    );
    for point in [
        "after-step:gate",
        "after-step:resolve",
        "lock:template-file-written#2",
        "after-step:lock",
    ] {
        let root = copy_root(old_root);
        with_dockerfile(root.path());
        let out = root.path().join("plan-out");
        let verdict =
            killed_at(&mut plan_command(root.path(), registry, &out), point).and_then(|_| {
                let at_kill = version_of(&files_below(&root.path().join("template")), old, new)
                    .map_err(|mix| format!("template/ at the kill is {mix}"))?;
                if out.join("plan.json").exists() {
                    return Err("plan.json exists although the plan was killed".into());
                }
                let rerun = plan_command(root.path(), registry, &out).run();
                if !rerun.success() {
                    return Err(format!(
                        "the re-run failed: {}",
                        tail(&rerun.stderr_text(), 600)
                    ));
                }
                if &files_below(&root.path().join("template")) != new {
                    return Err("template/ after the re-run is not the new version".into());
                }
                if std::fs::read(out.join("plan.json")).unwrap() != expected {
                    return Err(
                        "the re-run's plan.json differs from an uninterrupted plan's".into(),
                    );
                }
                Ok(format!(
                    "template/ {at_kill} at the kill; the re-run's plan is an uninterrupted one's"
                ))
            });
        tried.push(Tried {
            area: "plan",
            point: point.to_string(),
            verdict,
        });
    }
}

/// The tag of the fixture releases `publish` writes.
const TAG: &str = "2026.12.02-0123456789ab";

/// A layer of `bytes` hex digits, deterministic and compressing to about half: its blob
/// spans several of the upload's 1 MiB body chunks, so a kill at its second chunk is one
/// after some of the blob's bytes went to the registry and before the upload is committed.
fn multi_chunk_content(salt: &str, bytes: usize) -> String {
    let mut out = String::with_capacity(bytes + 64);
    let mut link = crate::support::sha256_hex(salt.as_bytes());
    while out.len() < bytes {
        link = crate::support::sha256_hex(link.as_bytes());
        out.push_str(&link);
    }
    out.truncate(bytes);
    out
}

/// The size of the last blob a publish's log says it began uploading
/// (`uploading sha256:… (N bytes)`).
fn last_upload_size(stderr: &str) -> Option<u64> {
    let line = stderr
        .lines()
        .rev()
        .find(|l| l.contains(": uploading sha256:"))?;
    let (_, rest) = line.split_once(" (")?;
    rest.split_once(" bytes)")?.0.parse().ok()
}

/// The blob directories (`xtask-publish-*`) a publish left in the temporary directory `tmp`.
fn blob_dirs_in(tmp: &Path) -> Vec<String> {
    let mut found: Vec<String> = std::fs::read_dir(tmp)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("xtask-publish"))
        .collect();
    found.sort();
    found
}

/// Whether the manifest `digest` in `repository` is whole: absent (Ok(false)), or there
/// (Ok(true)) with its config and every layer in the registry, each hashing to its digest.
/// Err names a blob it references that is missing or partial.
fn manifest_whole(registry: &Registry, repository: &str, digest: &str) -> Result<bool, String> {
    let Some(manifest) = registry.get_body(repository, "manifests", digest) else {
        return Ok(false);
    };
    let manifest: Value = serde_json::from_slice(&manifest).unwrap();
    let layers = manifest["layers"].as_array().cloned().unwrap_or_default();
    for blob in std::iter::once(&manifest["config"]).chain(&layers) {
        let blob_digest = blob["digest"].as_str().unwrap();
        match registry.get_body(repository, "blobs", blob_digest) {
            None => return Err(format!("{digest} names {blob_digest}, which is missing")),
            Some(bytes) => {
                let got = format!("sha256:{}", crate::support::sha256_hex(&bytes));
                if got != blob_digest || Some(bytes.len() as u64) != blob["size"].as_u64() {
                    return Err(format!(
                        "{digest} names {blob_digest}, whose bytes in the registry ({} of \
                         them) hash to {got}",
                        bytes.len()
                    ));
                }
            }
        }
    }
    Ok(true)
}

/// `publish` of two tiny images (amd64's with a multi-chunk layer) killed mid-upload of a
/// blob, between blobs, between the platforms' manifests and before the tag; the re-run must
/// give the index an uninterrupted publish gives, every manifest it names whole, and remove
/// the compressed blobs the killed run left in its temporary directory, saying so.
fn publish_points(tried: &mut Vec<Tried>) {
    let salt = unique("kill-points");
    let big = multi_chunk_content(&salt, 5 << 20);
    let mut tags = Vec::new();
    let mut images = Vec::new();
    for arch in ["amd64", "arm64"] {
        let tag = format!("xtask-test-kill-points:{arch}-{}", std::process::id());
        let small = format!("{arch} {salt}");
        let contents: Vec<&str> = match arch {
            "amd64" => vec![&small, &big],
            _ => vec![&small],
        };
        load_layered_image(&tag, arch, &contents);
        images.push("--image".to_string());
        images.push(format!("linux/{arch}={tag}"));
        tags.push(tag);
    }
    // Each run's temporary directory is the test's: what a killed run leaves there is seen,
    // and removed with the test.
    let publish = |root: &Path, tmp: &Path, repository: &str, extra: &[&str]| -> Xtask {
        let mut args: Vec<&str> = images.iter().map(String::as_str).collect();
        args.extend(["--tag", TAG]);
        args.extend(extra);
        let mut command = publish_command(repository, &args);
        command.env("XTASK_ROOT", root).env("TMPDIR", tmp);
        command
    };
    let index_of = |run: &Run| -> String { run.json()["index"]["digest"].as_str().unwrap().into() };

    // What an uninterrupted publish gives: the images are content-addressed, so every
    // repository gets the same index and platform manifests.
    let reference_root = scratch_root_with(&["template/manifest.yaml"]);
    let reference_tmp = tempfile::tempdir().unwrap();
    let reference = publish(
        reference_root.path(),
        reference_tmp.path(),
        &unique("xtask-test/kill-points").to_lowercase(),
        &[],
    )
    .run();
    let expected = index_of(reference.assert_success());
    let manifests: Vec<String> = reference.json()["platforms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["digest"].as_str().unwrap().to_string())
        .collect();
    assert!(
        blob_dirs_in(reference_tmp.path()).is_empty(),
        "an uninterrupted publish leaves no blob directory"
    );

    let registry = Registry::local();
    for (point, defer_tag) in [
        // amd64's blobs go config, small layer, multi-chunk layer (2.8 MB compressed, three
        // chunks): the first blob's body, the big one's first chunk, its second (the first
        // MiB is on its way, the upload not committed).
        ("publish:blob-body#1", false),
        ("publish:blob-body#3", false),
        ("publish:blob-body#4", false),
        // Committed blobs: amd64's first, its last (no manifest yet), arm64's first.
        ("publish:blob-uploaded#1", false),
        ("publish:blob-uploaded#3", false),
        ("publish:blob-uploaded#4", false),
        ("publish:manifest-pushed#1", false),
        ("publish:manifest-pushed#2", false),
        ("publish:index-pushed", true),
    ] {
        let root = scratch_root_with(&["template/manifest.yaml"]);
        let tmp = tempfile::tempdir().unwrap();
        let repository = unique("xtask-test/kill-points").to_lowercase();
        let extra: &[&str] = if defer_tag { &["--defer-tag"] } else { &[] };
        let verdict = killed_at(
            &mut publish(root.path(), tmp.path(), &repository, extra),
            point,
        )
        .and_then(|killed| {
            // The big layer's second chunk is mid-blob only if that blob spans chunks.
            if point == "publish:blob-body#4" {
                let uploading = last_upload_size(&killed.stderr_text());
                if uploading.is_none_or(|size| size <= 1 << 20) {
                    return Err(format!(
                        "the blob being uploaded at the kill ({uploading:?} bytes) fits in \
                             one chunk: the kill is not mid-blob"
                    ));
                }
            }
            let (status, _) = registry.get_manifest(&repository, TAG, None);
            if status != 404 {
                return Err(format!(
                    "the tag {TAG} exists after a kill before it was written (GET {status})"
                ));
            }
            // A manifest the kill let through names only whole blobs.
            let mut there = 0;
            for manifest in &manifests {
                there += usize::from(
                    manifest_whole(&registry, &repository, manifest)
                        .map_err(|e| format!("at the kill: {e}"))?,
                );
            }
            let left = blob_dirs_in(tmp.path());
            // The re-run: the same command; a deferred tag is then written as ship does.
            let rerun = publish(root.path(), tmp.path(), &repository, extra).run();
            if !rerun.success() {
                return Err(format!(
                    "the re-run failed: {}",
                    tail(&rerun.stderr_text(), 600)
                ));
            }
            let still = blob_dirs_in(tmp.path());
            if !still.is_empty() {
                return Err(format!(
                    "the re-run left the killed run's compressed blobs in the temporary \
                         directory: {still:?}"
                ));
            }
            if !left.is_empty()
                && !rerun
                    .stderr_text()
                    .contains("the compressed blobs of a publish that was killed")
            {
                return Err("the re-run removed the killed run's blobs without a word".into());
            }
            let rerun = if defer_tag {
                publish(root.path(), tmp.path(), &repository, &[]).run()
            } else {
                rerun
            };
            if !rerun.success() {
                return Err(format!(
                    "writing the tag failed: {}",
                    tail(&rerun.stderr_text(), 600)
                ));
            }
            let index = index_of(&rerun);
            if index != expected {
                return Err(format!(
                    "the re-run published index {index}, an uninterrupted run {expected}"
                ));
            }
            let read_back = rerun.json()["platforms"]
                .as_array()
                .unwrap()
                .iter()
                .all(|p| p["read_back"] == Value::Bool(true));
            if !read_back {
                return Err("a platform of the re-run was not read back".into());
            }
            let (status, tagged) = registry.get_manifest(&repository, TAG, None);
            if (status, tagged.as_str()) != (200, index.as_str()) {
                return Err(format!(
                    "the tag {TAG} names {tagged} (GET {status}), not the index {index}"
                ));
            }
            for manifest in &manifests {
                if !manifest_whole(&registry, &repository, manifest)? {
                    return Err(format!(
                        "after the re-run {manifest} is not in the registry"
                    ));
                }
            }
            let blobs = match left.len() {
                0 => String::new(),
                n => format!(", its {n} blob dir removed saying so"),
            };
            Ok(format!(
                "no tag, {there} whole manifest(s) at the kill{blobs}; the re-run tagged the \
                     same index, every blob whole"
            ))
        });
        tried.push(Tried {
            area: "publish",
            point: point.to_string(),
            verdict,
        });
    }
    remove_images(&tags);
}

/// The fixture image `build` assembles for the assembly's kill points: the shape of the
/// template's Dockerfile at a fixture's size (a stage holding three trees, the first a few
/// MiB so its layer file is written in several pieces; a system stage; a final stage of
/// COPYs). `salt` makes the build id this run's own; the engine's build cache ignores it.
fn assembly_dockerfile(salt: &str) -> String {
    format!(
        "# fixture of tests/it/kill_points.rs, {salt}\n\
         ARG BASE_IMAGE\n\
         FROM ${{BASE_IMAGE}} AS stage\n\
         RUN mkdir -p /staging/big/opt/big /staging/b/opt/b /staging/c/opt/c \\\n\
             && seq 1 600000 > /staging/big/opt/big/numbers \\\n\
             && echo b > /staging/b/opt/b/file && echo c > /staging/c/opt/c/file\n\
         FROM ${{BASE_IMAGE}} AS system\n\
         RUN mkdir -p /opt\n\
         FROM system\n\
         COPY --from=stage /staging/big/ /\n\
         COPY --from=stage /staging/b/ /\n\
         COPY --from=stage /staging/c/ /\n"
    )
}

/// The files of a layer cache directory, by name, each `<diff id hex>.tar` checked to hash
/// to its name (Err names one that does not: a cache that would be trusted half written).
/// `hashed` holds the reference cache's files (device, inode), checked once: a layer
/// hard-linked from there is the same file (the system's layer is the base's size). Only
/// those are remembered: the reference outlives every case, so their inodes are never
/// reused, while a case's removed file's inode may be.
fn cache_listing(
    dir: &Path,
    hashed: &mut std::collections::BTreeSet<(u64, u64)>,
    remember: bool,
) -> Result<std::collections::BTreeSet<String>, String> {
    use std::os::unix::fs::MetadataExt;
    let mut names = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let meta = entry.metadata().unwrap();
        if let Some(hex) = name.strip_suffix(".tar") {
            if !hashed.contains(&(meta.dev(), meta.ino())) {
                // sha256sum: the test's own hashing is unoptimised, some 20 times slower.
                let out = std::process::Command::new("sha256sum")
                    .arg(entry.path())
                    .output()
                    .unwrap();
                let text = String::from_utf8_lossy(&out.stdout);
                let got = text.split_whitespace().next().unwrap_or_default();
                if got != hex {
                    return Err(format!("the cached layer {name} hashes to {got}"));
                }
                if remember {
                    hashed.insert((meta.dev(), meta.ino()));
                }
            }
        }
        names.insert(name);
    }
    Ok(names)
}

/// A layer cache holding only what the system stage gave (the uninterrupted run's system
/// entry and layers, hard-linked from `reference`: files there are replaced by rename,
/// never rewritten): the tree kill points then start where a bump's build starts.
fn seed_system_only(reference: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    let config = std::fs::read_dir(reference)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".config.json"))
        .expect("the reference cache holds the assembled config");
    let config: Value = serde_json::from_slice(&std::fs::read(config).unwrap()).unwrap();
    let diff_ids = config["rootfs"]["diff_ids"].as_array().unwrap();
    // The fixture's last three layers are its COPYs.
    let trees: Vec<String> = diff_ids[diff_ids.len() - 3..]
        .iter()
        .map(|d| format!("{}.tar", d.as_str().unwrap().trim_start_matches("sha256:")))
        .collect();
    for entry in std::fs::read_dir(reference).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let tree_entry = name.ends_with(".json")
            && serde_json::from_slice::<Value>(&std::fs::read(&path).unwrap())
                .is_ok_and(|v| v.get("diff_id").is_some());
        if trees.contains(&name) || tree_entry || name.ends_with(".config.json") {
            continue;
        }
        std::fs::hard_link(&path, to.join(&name)).unwrap();
    }
}

/// The containers of the engine labelled by a run of process `pid` (`engine::RUN_LABEL`:
/// `<command>-<pid>-<nanos>`).
fn containers_of(pid: u32) -> Vec<String> {
    let out = std::process::Command::new("docker")
        .args([
            "ps",
            "-a",
            "--filter",
            "label=org.sandbox0.xtask.run",
            "--format",
        ])
        .arg("{{.ID}} {{.Label \"org.sandbox0.xtask.run\"}}")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| {
            l.split_once(' ')
                .is_some_and(|(_, run)| run.split('-').nth(1) == Some(&pid.to_string()))
        })
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect()
}

/// `build` killed while the assembly writes the layer cache: mid-way through a layer's file,
/// with a whole layer not yet under its name, with a layer named but no entry, between
/// layers, between the system's layers, after the config. The re-run must load the image an
/// uninterrupted build assembles (the same config digest, so the same layers), leave the
/// cache an uninterrupted build leaves (each layer hashing to its name, nothing partial),
/// and say what it removed or made again.
fn assemble_points(tried: &mut Vec<Tried>) {
    // The base the image tests build on; a lookup when the engine has it.
    let base = xtask()
        .args(["base", "--platform", "linux/amd64", "--json"])
        .run();
    let base = base.assert_success().json()["image"]
        .as_str()
        .unwrap()
        .to_string();
    let root = scratch_root_with(&crate::support::TEMPLATE_FILES);
    std::fs::write(
        root.path().join("Dockerfile"),
        assembly_dockerfile(&unique("kill-assemble")),
    )
    .unwrap();
    let build = |caches: &Path| -> Xtask {
        let mut command = xtask();
        command
            .args(["build", "--platform", "linux/amd64", "--json"])
            .args(["--base-image", &base])
            .env("XTASK_ROOT", root.path())
            .env("XTASK_LAYER_CACHE", caches);
        command
    };
    let reference_caches = tempfile::tempdir().unwrap();
    let reference = build(reference_caches.path()).run();
    let report = reference.assert_success().json();
    let (image, image_id) = (
        report["image"].as_str().unwrap().to_string(),
        report["image_id"].as_str().unwrap().to_string(),
    );
    let engine_tag = format!(
        "coding-agent-engine:{}",
        report["build_id"].as_str().unwrap()
    );
    let reference_cache = reference_caches.path().join("linux-amd64");
    let mut hashed = std::collections::BTreeSet::new();
    let expected =
        cache_listing(&reference_cache, &mut hashed, true).expect("an uninterrupted build's cache");

    for (point, system_cached) in [
        ("assemble:layer-bytes-written#1", true),
        ("assemble:layer-file-complete#1", true),
        ("assemble:layer-file-kept#1", true),
        ("assemble:tree-entry-written#2", true),
        ("assemble:system-layer-kept#1", false),
        ("assemble:config-written", true),
    ] {
        // The image is not in the engine, so the build assembles it.
        remove_images(std::slice::from_ref(&image));
        let caches = tempfile::tempdir().unwrap();
        let cache = caches.path().join("linux-amd64");
        if system_cached {
            seed_system_only(&reference_cache, &cache);
        }
        let verdict = killed_at(&mut build(caches.path()), point).and_then(|killed| {
            let partial: Vec<String> = std::fs::read_dir(&cache)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(".tmp") || n.starts_with("export-"))
                .collect();
            let left_containers = containers_of(killed.pid);
            let rerun = build(caches.path()).run();
            if !rerun.success() {
                return Err(format!(
                    "the re-run failed: {}",
                    tail(&rerun.stderr_text(), 600)
                ));
            }
            let stderr = rerun.stderr_text();
            let again = rerun.json();
            if again["image"] != image.as_str() || again["image_id"] != image_id.as_str() {
                return Err(format!(
                    "the re-run assembled {} ({}), an uninterrupted build {image} ({image_id})",
                    again["image"], again["image_id"]
                ));
            }
            let listing = cache_listing(&cache, &mut hashed, false)
                .map_err(|e| format!("after the re-run {e}"))?;
            if listing != expected {
                return Err(format!(
                    "after the re-run the layer cache holds {listing:?}, an uninterrupted \
                     build's {expected:?}"
                ));
            }
            if !partial.is_empty()
                && !stderr.contains("that a killed assembly left in the layer cache")
            {
                return Err(format!(
                    "the re-run removed the killed run's partial files {partial:?} without a word"
                ));
            }
            if !left_containers.is_empty() {
                if !containers_of(killed.pid).is_empty() {
                    return Err(format!(
                        "the killed run's containers {left_containers:?} are still there"
                    ));
                }
                if !stderr.contains("left by runs that no longer exist") {
                    return Err(
                        "the re-run removed the killed run's container without a word".into(),
                    );
                }
            }
            // Every layer group (the system's, each tree's) is either taken from the cache
            // or made again saying the cache lacked it: nothing is rebuilt silently.
            let made_again = stderr.matches(": not in the layer cache;").count();
            let from_cache = stderr.matches(": from the cache").count();
            if made_again + from_cache != 4 {
                return Err(format!(
                    "of the system's and three trees' layers, the re-run said {from_cache} came \
                     from the cache and {made_again} were not in it: the rest were made again \
                     without a word"
                ));
            }
            let mut found = format!(
                "same image; cache whole ({from_cache} from it, {made_again} made again, said so)"
            );
            if !partial.is_empty() {
                found.push_str(&format!(
                    ", {} partial file(s) removed saying so",
                    partial.len()
                ));
            }
            if !left_containers.is_empty() {
                found.push_str(", the killed run's container removed saying so");
            }
            Ok(found)
        });
        tried.push(Tried {
            area: "assemble",
            point: point.to_string(),
            verdict,
        });
    }
    remove_images(&[image, engine_tag]);
}

/// What `release ship` needs, made from tiny images: a plan, both platforms' results and
/// SBOMs, a checkout holding the template files the receipt describes.
struct ShipFixture {
    root: tempfile::TempDir,
    plan: std::path::PathBuf,
    results: std::path::PathBuf,
    tags: Vec<String>,
}

/// The plan's clock and tag: the receipt's `created_at` is the plan's `now`.
const SHIP_NOW: &str = "2026-11-30T06:17:00Z";
const SHIP_TAG: &str = "2026.11.30-0123456789ab";

fn ship_fixture() -> ShipFixture {
    use crate::support::genuine_release::{build_json, gate_json, smoke};
    use serde_json::json;
    let root = scratch_root_with(&[
        "template/manifest.yaml",
        "template/inventory.json",
        "template/package.json",
        "template/package-lock.json",
        "template/install-plan.js",
        "scripts/local-registry.sh",
        "schemas/receipt.v2.schema.json",
    ]);
    std::fs::write(
        root.path().join("Dockerfile"),
        "# fixture of tests/it/kill_points.rs\nFROM scratch\n",
    )
    .unwrap();
    // `receipt write` records the checkout's commit.
    crate::support::commit_fixture(root.path());
    let plan = root.path().join("plan");
    let results = root.path().join("results");
    std::fs::create_dir_all(&plan).unwrap();
    std::fs::create_dir_all(&results).unwrap();
    let salt = unique("kill-ship");
    let mut tags = Vec::new();
    let mut results_of = Vec::new();
    for (arch, emulated) in [("amd64", false), ("arm64", true)] {
        let tag = format!("xtask-test-kill-ship:{arch}-{}", std::process::id());
        let id = load_tiny_image(&tag, arch, &format!("{arch} {salt}"));
        let platform = format!("linux/{arch}");
        let build = build_json(arch, &tag, &id, &salt, emulated);
        // The SBOMs name the pushed image, so they are written with `pushed`
        // ([`retarget_results`]).
        results_of.push((arch, platform, build, emulated, tag.clone()));
        tags.push(tag);
    }
    let gate = gate_json(SHIP_NOW, &[]);
    std::fs::write(plan.join("gate.json"), gate.to_string()).unwrap();
    // The resolution the receipt records: the committed template's own versions.
    std::fs::write(
        plan.join("resolve.json"),
        resolve_json_of(root.path(), SHIP_NOW).to_string(),
    )
    .unwrap();
    let inputs_digest = "0123456789ab".repeat(5) + "0123";
    std::fs::write(
        plan.join("plan.json"),
        json!({
            "schema_version": 1, "now": SHIP_NOW, "action": "release",
            "reason": "fixture of tests/it/kill_points.rs", "publish": true,
            "publish_reason": "fixture", "tag": SHIP_TAG,
            "platforms": ["linux/amd64", "linux/arm64"],
            "target": { "registry": crate::support::docker::local_registry(), "repository": "" },
            "npm_registry": "https://registry.npmjs.org/", "gate": gate, "previous": null,
            "inputs": [], "inputs_digest": inputs_digest, "changes": [],
        })
        .to_string(),
    )
    .unwrap();
    // `pushed` is filled in per try ([`retarget_results`]).
    for (arch, platform, build, emulated, tag) in results_of {
        std::fs::write(
            results.join(format!("results-linux-{arch}.json")),
            json!({
                "schema_version": 1, "platform": platform, "tag": SHIP_TAG,
                "inputs_digest": inputs_digest, "build": build,
                "smoke": smoke(&tag, &platform, emulated, None), "pushed": null, "steps": [],
            })
            .to_string(),
        )
        .unwrap();
    }
    ShipFixture {
        root,
        plan,
        results,
        tags,
    }
}

fn ship_command(f: &ShipFixture, assets: &Path, defer_tag: bool) -> Xtask {
    let mut command = xtask();
    command
        .args(["release", "ship", "--json", "--plan"])
        .arg(&f.plan)
        .arg("--results")
        .arg(&f.results)
        .arg("--assets")
        .arg(assets)
        .env("XTASK_ROOT", f.root.path());
    if defer_tag {
        command.arg("--defer-tag");
    }
    command
}

/// The receipts in `assets`.
fn receipts_in(assets: &Path) -> Vec<std::path::PathBuf> {
    let mut found: Vec<_> = std::fs::read_dir(assets)
        .map(|entries| {
            entries
                .map(|e| e.unwrap().path())
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("receipt-"))
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

/// `receipt verify --artifacts --check-registry` of the one receipt in `assets`: the index
/// it names, or what is wrong.
fn verified_index(f: &ShipFixture, assets: &Path) -> Result<String, String> {
    let receipts = receipts_in(assets);
    let [receipt] = receipts.as_slice() else {
        return Err(format!(
            "{} receipts in the assets, not one",
            receipts.len()
        ));
    };
    let run = xtask()
        .args([
            "receipt",
            "verify",
            "--json",
            "--check-registry",
            "--artifacts",
        ])
        .arg(assets)
        .arg(receipt)
        .env("XTASK_ROOT", f.root.path())
        .run();
    if !run.success() {
        return Err(format!(
            "the receipt does not verify: {}",
            run.stderr_text()
        ));
    }
    let receipt: Value = serde_json::from_slice(&std::fs::read(receipt).unwrap()).unwrap();
    Ok(receipt["index"]["digest"].as_str().unwrap().to_string())
}

/// `release ship` killed at its step boundaries and inside the index step, then run again on
/// the same machine (its work directory and assets kept) or as a fresh runner would (only the
/// registry kept): the tag never names an index whose receipt does not verify, and the
/// re-run ends with one verifying receipt whose index the tag names.
fn ship_points(tried: &mut Vec<Tried>) {
    let f = ship_fixture();
    let registry = Registry::local();
    for point in [
        "publish:index-pushed",
        "after-step:index by digest",
        "after-step:receipt write",
        "after-step:receipt verify",
        "after-step:tag",
    ] {
        for fresh_runner in [false, true] {
            // Each try gets a repository of its own: a tag, once written, stays.
            let mut fixture_plan: Value =
                serde_json::from_slice(&std::fs::read(f.plan.join("plan.json")).unwrap()).unwrap();
            let repository = unique("xtask-test/kill-ship").to_lowercase();
            fixture_plan["target"]["repository"] = Value::String(repository.clone());
            std::fs::write(f.plan.join("plan.json"), fixture_plan.to_string()).unwrap();
            retarget_results(&f, &repository);
            let assets = tempfile::tempdir().unwrap();
            let work = f.root.path().join(".xtask/ship");
            let _ = std::fs::remove_dir_all(&work);
            let verdict =
                killed_at(&mut ship_command(&f, assets.path(), false), point).and_then(|_| {
                    let (status, tagged) = registry.get_manifest(&repository, SHIP_TAG, None);
                    let at_kill = match status {
                        404 => "no tag at the kill".to_string(),
                        200 => {
                            let index = verified_index(&f, assets.path())
                                .map_err(|e| format!("the tag exists at the kill, but {e}"))?;
                            if index != tagged {
                                return Err(format!("the tag names {tagged}, the receipt {index}"));
                            }
                            "the tag at the kill names the verifying receipt's index".into()
                        }
                        other => return Err(format!("GET of the tag answered {other}")),
                    };
                    let fresh_assets = tempfile::tempdir().unwrap();
                    let assets_dir = if fresh_runner {
                        // A fresh runner: no assets, no work directory, no push records.
                        let _ = std::fs::remove_dir_all(f.root.path().join(".xtask"));
                        fresh_assets.path()
                    } else {
                        assets.path()
                    };
                    let rerun = ship_command(&f, assets_dir, false).run();
                    if !rerun.success() {
                        return Err(format!(
                            "the re-run failed: {}",
                            tail(&rerun.stderr_text(), 600)
                        ));
                    }
                    let index = verified_index(&f, assets_dir)?;
                    let (status, tagged) = registry.get_manifest(&repository, SHIP_TAG, None);
                    if (status, tagged.as_str()) != (200, index.as_str()) {
                        return Err(format!(
                            "after the re-run the tag names {tagged} (GET {status}), the \
                             receipt's index is {index}"
                        ));
                    }
                    Ok(format!(
                        "{at_kill}; one verifying receipt after the re-run, tagged"
                    ))
                });
            tried.push(Tried {
                area: if fresh_runner {
                    "ship (fresh runner)"
                } else {
                    "ship"
                },
                point: point.to_string(),
                verdict,
            });
        }
    }
    remove_images(&f.tags);
}

/// Points the fixture's results at `repository`: each platform pushed there again (a no-op
/// upload of blobs the registry has, by mount or HEAD), as `release build` would.
fn retarget_results(f: &ShipFixture, repository: &str) {
    for (arch, tag) in ["amd64", "arm64"].iter().zip(&f.tags) {
        let pushed = publish_command(repository, &["--image", &format!("linux/{arch}={tag}")])
            .env("XTASK_ROOT", f.root.path())
            .run();
        let report = pushed.assert_success().json();
        let pushed = report["platforms"][0].clone();
        // As `release build` writes them after its push: named by the manifest digest.
        let platform = format!("linux/{arch}");
        let name = Published {
            repository: format!(
                "{}/{}",
                report["registry"].as_str().unwrap(),
                report["repository"].as_str().unwrap()
            ),
            digest: pushed["digest"].as_str().unwrap().into(),
            tag: SHIP_TAG.into(),
        };
        let spdx = write_sbom(
            &platform,
            pushed["image_id"].as_str().unwrap(),
            &debian_packages(arch),
            &name,
        );
        std::fs::copy(
            &spdx,
            f.results.join(format!("sbom-linux-{arch}.spdx.json")),
        )
        .unwrap();
        std::fs::copy(
            spdx.with_file_name(format!("sbom-linux-{arch}.cdx.json")),
            f.results.join(format!("sbom-linux-{arch}.cdx.json")),
        )
        .unwrap();
        let file = f.results.join(format!("results-linux-{arch}.json"));
        let mut results: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        results["pushed"] = pushed;
        std::fs::write(&file, results.to_string()).unwrap();
    }
}

/// One area's kill points: each tried point is added to the list.
type Points = fn(&mut Vec<Tried>);

#[test]
fn killed_at_every_kill_point_the_re_run_recovers() {
    // Skipped without an engine (a newcomer's `cargo test`): the guard is `None` then, and
    // going on would fail at the first point that needs the engine.
    let Some(_docker) = light_docker() else {
        return;
    };
    let started = std::time::Instant::now();
    let mut tried = Vec::new();
    let mut cost = Vec::new();
    let areas: [(&str, Points); 4] = [
        ("lock and plan", lock_points),
        ("assemble", assemble_points),
        ("publish", publish_points),
        ("ship", ship_points),
    ];
    for (area, points) in areas {
        let started = std::time::Instant::now();
        points(&mut tried);
        cost.push(format!("{area} {:.0} s", started.elapsed().as_secs_f64()));
    }

    let recovered = tried.iter().filter(|t| t.verdict.is_ok()).count();
    let mut table =
        String::from("kill points tried (SIGKILL to the process group, then a re-run):\n");
    for t in &tried {
        let (mark, text) = match &t.verdict {
            Ok(text) => ("recovered", text.as_str()),
            Err(text) => ("NOT RECOVERED", text.as_str()),
        };
        table.push_str(&format!(
            "  {:<19} {:<40} {mark}: {text}\n",
            t.area, t.point
        ));
    }
    table.push_str(&format!(
        "recoveries {recovered} of {} kill points ({:.0} s: {})\n",
        tried.len(),
        started.elapsed().as_secs_f64(),
        cost.join(", ")
    ));
    // Written past libtest's capture (which takes print! and eprint! only), so the figure is
    // in .ci/run's log whether the test passes or fails.
    let _ = std::io::Write::write_all(&mut std::io::stderr(), table.as_bytes());
    assert_eq!(recovered, tried.len(), "{table}");
}
