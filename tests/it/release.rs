//! End-to-end tests of the release side, driving the real `xtask` binary: `publish` against a
//! real local OCI registry (Debian's docker-registry, started by `scripts/local-registry.sh`)
//! with small real images loaded into the Docker engine, then `receipt write`, `receipt
//! verify`, `pin` and `gate` on what was published.
//!
//! These tests need the Docker engine and the docker-registry package. When either is missing
//! they fail, with a message to run `scripts/setup-host.sh`; they never skip.

use std::path::PathBuf;

use serde_json::{json, Value};

use crate::support::docker::{
    light_docker, load_layered_image, load_tiny_image, local_registry, on_engine, pull_and_untag,
    remove_images,
};
use crate::support::genuine_release::*;
use crate::support::registry::Registry;
use crate::support::xtask::xtask;
use crate::support::{sha256_hex, unique};

/// `GET /v2/<repo>/manifests/<reference>` on the local registry: (status, body sha256).
fn registry_manifest(repository: &str, reference: &str) -> (u16, String) {
    Registry::local().get_manifest(repository, reference, None)
}

fn is_digest(v: &Value) -> bool {
    v.as_str().is_some_and(|s| {
        s.strip_prefix("sha256:")
            .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
    })
}

/// A layer larger than one gzip member (`oci/archive.rs`, MEMBER_SIZE: 4 MiB) is published as
/// several members, and the engine pulls it: it decompresses every member and checks the
/// result against the config's diff id (moby 20.10 `distribution/pull_v2.go` fails a pull
/// whose layers do not match the configuration; the stream is read by Go's `compress/gzip`,
/// multistream by default, or unpigz). Docker 28 and containerd read layers with the same
/// `compress/gzip`; the nested engines cannot reach the host's loopback registry, so only the
/// host's engine pulls here.
#[test]
fn the_engine_pulls_a_layer_of_several_gzip_members() {
    let Some(_docker) = light_docker() else {
        return;
    };
    const MEMBER: usize = 4 << 20;
    // 9 MiB of hex digits from a xorshift: three members, compressible to about half.
    let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ u64::from(std::process::id());
    let mut big = String::with_capacity(9 << 20);
    while big.len() < 9 << 20 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        big.push_str(&format!("{state:016x}"));
    }
    let tag = format!("xtask-test-members:{}", std::process::id());
    let loaded = load_layered_image(&tag, "amd64", &[&big, "and a small layer"]);
    let repository = unique("xtask-test/members").to_lowercase();
    let out = publish(
        &repository,
        &["--image", &format!("linux/amd64={tag}"), "--partial"],
    );
    assert!(out.status.success(), "{}", out.stderr_text());
    let digest = out.json()["platforms"][0]["digest"]
        .as_str()
        .unwrap()
        .to_string();

    // The large layer is several members: its first one alone is MEMBER bytes of the layer.
    let registry = Registry::local();
    let manifest: Value = serde_json::from_slice(
        &registry
            .get_body(&repository, "manifests", &digest)
            .expect("the pushed manifest"),
    )
    .unwrap();
    let layer = manifest["layers"][0]["digest"].as_str().unwrap();
    let blob = registry
        .get_body(&repository, "blobs", layer)
        .expect("the pushed layer");
    let mut first = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(blob.as_slice()),
        &mut first,
    )
    .unwrap();
    assert_eq!(
        first.len(),
        MEMBER,
        "the layer is not a series of 4 MiB members"
    );
    assert_eq!(first[..], loaded.layers[0][..MEMBER]);

    // Gone from the engine, then pulled back by digest: the same image.
    remove_images(std::slice::from_ref(&tag));
    let reference = format!("{}/{repository}@{digest}", local_registry());
    let id = loaded.id.clone();
    let pulled = on_engine(|docker| {
        let reference = reference.clone();
        async move {
            let absent = docker.inspect_image(&id).await.is_err();
            let id = pull_and_untag(&docker, &reference).await;
            (absent, id)
        }
    });
    assert!(
        pulled.0,
        "the image was still in the engine before the pull"
    );
    assert_eq!(pulled.1.as_deref(), Some(loaded.id.as_str()));
}

#[test]
fn publish_by_digest_is_idempotent_and_release_tags_are_immutable() {
    let Some(_docker) = light_docker() else {
        return;
    };
    let repository = unique("xtask-test/publish").to_lowercase();
    let salt = unique("content");
    let amd64 = format!("xtask-test-publish:amd64-{}", std::process::id());
    let arm64 = format!("xtask-test-publish:arm64-{}", std::process::id());
    let amd64_id = load_tiny_image(&amd64, "amd64", &format!("amd64 {salt}"));
    let arm64_id = load_tiny_image(&arm64, "arm64", &format!("arm64 {salt}"));
    let images = [
        "--image".to_string(),
        format!("linux/amd64={amd64}"),
        "--image".to_string(),
        format!("linux/arm64={arm64}"),
    ];
    let images: Vec<&str> = images.iter().map(String::as_str).collect();

    // A dry run digests everything and writes nothing.
    let dry = publish(
        &repository,
        &[&images[..], &["--tag", "r1", "--dry-run"]].concat(),
    );
    assert!(dry.status.success());
    let dry = dry.json();
    assert_eq!(dry["dry_run"], true);
    assert_eq!(registry_manifest(&repository, "r1").0, 404);
    assert_eq!(
        registry_manifest(&repository, dry["platforms"][0]["digest"].as_str().unwrap()).0,
        404
    );

    // First publish: both platforms by digest, then the index under the tag.
    let first = publish(&repository, &[&images[..], &["--tag", "r1"]].concat());
    assert!(first.status.success());
    let first = first.json();
    assert_eq!(first["index"]["noop"], false);
    assert_eq!(first["index"]["tag"], "r1");
    let platforms = first["platforms"].as_array().unwrap();
    assert_eq!(platforms.len(), 2);
    assert_eq!(platforms[0]["platform"], "linux/amd64");
    assert_eq!(platforms[1]["platform"], "linux/arm64");
    assert_eq!(platforms[0]["image_id"], amd64_id.as_str());
    for p in platforms {
        assert!(
            is_digest(&p["digest"]) && is_digest(&p["config_digest"]),
            "{p}"
        );
        assert!(p["size"].as_u64().unwrap() > 0);
        assert!(p["uploaded_bytes"].as_u64().unwrap() > 0, "{p}");
        // Pushed by digest: the registry serves exactly that manifest.
        let (status, digest) = registry_manifest(&repository, p["digest"].as_str().unwrap());
        assert_eq!(
            (status, digest.as_str()),
            (200, p["digest"].as_str().unwrap())
        );
    }
    // The dry run predicted exactly these digests: gzip here is deterministic.
    assert_eq!(dry["platforms"], {
        let mut p = first["platforms"].clone();
        for (d, f) in p
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .zip(dry["platforms"].as_array().unwrap())
        {
            d["uploaded_bytes"] = f["uploaded_bytes"].clone();
            // Only a real push is read back from the registry.
            assert_eq!(
                (&d["read_back"], &f["read_back"]),
                (&json!(true), &json!(false))
            );
            d["read_back"] = json!(false);
        }
        p
    });
    assert_eq!(dry["index"]["digest"], first["index"]["digest"]);
    let index_digest = first["index"]["digest"].as_str().unwrap().to_string();
    assert!(is_digest(&first["index"]["digest"]));
    assert_eq!(
        registry_manifest(&repository, "r1"),
        (200, index_digest.clone())
    );
    assert_eq!(
        first["index"]["reference"],
        format!("{}/{repository}@{index_digest}", local_registry())
    );

    // The engine itself can pull the release by its index digest and gets this machine's
    // platform: the index and manifests are consumable, not just well-formed.
    let reference = first["index"]["reference"].as_str().unwrap().to_string();
    let (reference, amd64_id, arm64_id) = (&reference, &amd64_id, &arm64_id);
    on_engine(|docker| async move {
        let pulled = pull_and_untag(&docker, reference).await;
        let native = if std::env::consts::ARCH == "aarch64" {
            arm64_id
        } else {
            amd64_id
        };
        assert_eq!(pulled.as_ref(), Some(native));
    });

    // Second publish of the same images under the same tag: a no-op.
    let second = publish(&repository, &[&images[..], &["--tag", "r1"]].concat());
    assert!(second.status.success());
    let second = second.json();
    assert_eq!(second["index"]["noop"], true);
    assert_eq!(second["index"]["digest"], index_digest.as_str());
    for p in second["platforms"].as_array().unwrap() {
        assert_eq!(p["uploaded_bytes"], 0, "nothing is uploaded twice: {p}");
    }

    // Split as the workflow runs it: each platform on its own, then the index from their
    // outputs. The same images give the same index digest.
    let dir = tempfile::tempdir().unwrap();
    for (platform, image) in [("amd64", &amd64), ("arm64", &arm64)] {
        let out = publish(
            &repository,
            &["--image", &format!("linux/{platform}={image}")],
        );
        assert!(out.status.success());
        assert!(out.json()["index"].is_null());
        std::fs::write(dir.path().join(format!("{platform}.json")), &out.stdout).unwrap();
    }
    let joined = publish(
        &repository,
        &[
            "--pushed",
            dir.path().join("amd64.json").to_str().unwrap(),
            "--pushed",
            dir.path().join("arm64.json").to_str().unwrap(),
            "--tag",
            "r1-split",
        ],
    );
    assert!(joined.status.success());
    assert_eq!(joined.json()["index"]["digest"], index_digest.as_str());

    // Different content under an existing tag: refused, and the tag is unchanged.
    let changed = format!("xtask-test-publish:arm64-changed-{}", std::process::id());
    load_tiny_image(&changed, "arm64", &format!("changed {salt}"));
    let clash = publish(
        &repository,
        &[
            "--image",
            &format!("linux/amd64={amd64}"),
            "--image",
            &format!("linux/arm64={changed}"),
            "--tag",
            "r1",
        ],
    );
    assert!(!clash.status.success());
    let stderr = String::from_utf8_lossy(&clash.stderr);
    assert!(
        stderr.contains("tag `r1`") && stderr.contains("immutable"),
        "{stderr}"
    );
    assert!(stderr.contains(&index_digest), "{stderr}");
    assert_eq!(registry_manifest(&repository, "r1"), (200, index_digest));

    // An image whose config is not the platform it is published as is refused.
    let wrong = publish(&repository, &["--image", &format!("linux/arm64={amd64}")]);
    assert!(!wrong.status.success());
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("not linux/arm64"));

    // An index lacking a platform needs --partial.
    let partial = publish(
        &repository,
        &["--image", &format!("linux/amd64={amd64}"), "--tag", "r2"],
    );
    assert!(!partial.status.success());
    assert!(String::from_utf8_lossy(&partial.stderr).contains("linux/arm64"));
    assert_eq!(registry_manifest(&repository, "r2").0, 404);
}

// ---------------------------------------------------------------------------------------------
/// A layer cache (`XTASK_LAYER_CACHE`) holding `image` as the assembly leaves it: its config
/// and each layer by diff id, and the lock file.
fn layer_cache_of(image: &crate::support::docker::LoadedImage) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("linux-amd64");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(".lock"), b"").unwrap();
    std::fs::write(
        dir.join(format!("{}.config.json", sha256_hex(&image.config))),
        &image.config,
    )
    .unwrap();
    for layer in &image.layers {
        std::fs::write(dir.join(format!("{}.tar", sha256_hex(layer))), layer).unwrap();
    }
    root
}

fn publish_with_cache(
    repository: &str,
    cache: &std::path::Path,
    args: &[&str],
) -> crate::support::xtask::Run {
    crate::support::genuine_release::publish_command(repository, args)
        .env("XTASK_LAYER_CACHE", cache)
        .run()
}

#[test]
fn a_publish_after_the_previous_release_reuses_its_blobs_and_makes_the_same_digest() {
    let Some(_docker) = light_docker() else {
        return;
    };
    let salt = unique("delta");
    let pid = std::process::id();
    let (old_tag, new_tag) = (
        format!("xtask-test-delta:old-{pid}"),
        format!("xtask-test-delta:new-{pid}"),
    );
    // Two layers each; one CLI changed: the second layer.
    let base = format!("base {salt}\n").repeat(2000);
    load_layered_image(&old_tag, "amd64", &[&base, &format!("cli 1 {salt}")]);
    let new = load_layered_image(&new_tag, "amd64", &[&base, &format!("cli 2 {salt}")]);
    let empty = tempfile::tempdir().unwrap();
    let cache = layer_cache_of(&new);
    let (previous_repo, delta_repo, fresh_repo) = (
        unique("xtask-test/delta-previous").to_lowercase(),
        unique("xtask-test/delta-new").to_lowercase(),
        unique("xtask-test/delta-fresh").to_lowercase(),
    );

    // The previous release, from an export (no cache holds it).
    let first = publish_with_cache(
        &previous_repo,
        empty.path(),
        &["--image", &format!("linux/amd64={old_tag}")],
    );
    assert!(first.status.success(), "{}", first.stderr_text());
    let previous = first.json()["platforms"][0]["reference"]
        .as_str()
        .unwrap()
        .to_string();

    // The new release into another repository with --previous: the base layer is mounted,
    // only the changed layer is compressed (from the cache) and uploaded.
    let delta = publish_with_cache(
        &delta_repo,
        cache.path(),
        &[
            "--image",
            &format!("linux/amd64={new_tag}"),
            "--previous",
            &previous,
        ],
    );
    assert!(delta.status.success(), "{}", delta.stderr_text());
    let log = delta.stderr_text();
    assert!(
        log.contains("1 of 2 layers are in the registry from the previous release"),
        "{log}"
    );
    assert!(log.contains("mounted sha256:"), "{log}");
    assert!(!log.contains("exporting"), "{log}");
    let delta = delta.json();

    // Uploaded: the config and the changed layer, not the base layer (the whole image's size).
    let uploaded = delta["platforms"][0]["uploaded_bytes"].as_u64().unwrap();
    let size = delta["platforms"][0]["size"].as_u64().unwrap();
    assert!(uploaded > new.config.len() as u64, "{delta}");
    assert!(uploaded < size, "{delta}");

    // The same image without a previous release and without a cache (an export): the same
    // manifest digest. (Its blobs are mounted from the repository above, which this machine's
    // blob locations remember, so its bytes say nothing here.)
    let fresh = publish_with_cache(
        &fresh_repo,
        empty.path(),
        &["--image", &format!("linux/amd64={new_tag}")],
    );
    assert!(fresh.status.success(), "{}", fresh.stderr_text());
    assert!(
        fresh.stderr_text().contains("exporting"),
        "{}",
        fresh.stderr_text()
    );
    let fresh = fresh.json();
    assert_eq!(
        delta["platforms"][0]["digest"],
        fresh["platforms"][0]["digest"]
    );
    assert_eq!(delta["platforms"][0]["read_back"], true);

    // A previous release this tool did not compress (docker push's blobs): nothing is
    // reused and the digest is still the same.
    let docker_repo = unique("xtask-test/delta-docker").to_lowercase();
    let docker_tag = format!("{}/{docker_repo}:old", local_registry());
    let status = std::process::Command::new("docker")
        .args(["tag", &old_tag, &docker_tag])
        .status()
        .unwrap();
    assert!(status.success());
    let status = std::process::Command::new("docker")
        .args(["push", "--quiet", &docker_tag])
        .status()
        .unwrap();
    assert!(status.success());
    let inspect = std::process::Command::new("docker")
        .args(["inspect", "--format", "{{json .RepoDigests}}", &docker_tag])
        .output()
        .unwrap();
    let digests: Vec<String> = serde_json::from_slice(&inspect.stdout).unwrap();
    let pushed_as = format!("{}/{docker_repo}@", local_registry());
    let docker_reference = digests
        .into_iter()
        .find(|d| d.starts_with(&pushed_as))
        .expect("docker push records the digest it pushed");
    let foreign_repo = unique("xtask-test/delta-foreign").to_lowercase();
    let foreign = publish_with_cache(
        &foreign_repo,
        cache.path(),
        &[
            "--image",
            &format!("linux/amd64={new_tag}"),
            "--previous",
            &docker_reference,
        ],
    );
    assert!(foreign.status.success(), "{}", foreign.stderr_text());
    assert!(
        foreign.stderr_text().contains("0 of 2 layers"),
        "{}",
        foreign.stderr_text()
    );
    assert_eq!(
        foreign.json()["platforms"][0]["digest"],
        fresh["platforms"][0]["digest"]
    );
    remove_images(&[old_tag, new_tag, docker_tag]);
}

// Receipts and the pin, on a real publish.

#[test]
fn receipts_verify_and_pin_only_when_complete_and_untampered() {
    let Some(_docker) = light_docker() else {
        return;
    };
    let r = release();
    let work = tempfile::tempdir().unwrap();
    // A good receipt: written, named by its own digest, verified.
    let (out, path) = write_receipt(work.path(), None);
    assert!(out.status.success());
    let good = path.expect("receipt path");
    let bytes = std::fs::read(&good).unwrap();
    let name = good.file_name().unwrap().to_str().unwrap().to_string();
    assert_eq!(name, format!("receipt-{TAG}-{}.json", sha256_hex(&bytes)));
    let receipt: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(receipt["schema_version"], 2);
    assert_eq!(receipt["complete"], true);
    assert_eq!(receipt["trigger"], "scheduled");
    assert_eq!(receipt["platforms"][1]["build"], "emulated");
    assert_eq!(receipt["platforms"][0]["build"], "native");
    assert_eq!(receipt["created_at"], "2026-11-30T06:30:00Z");
    let published: Value = serde_json::from_slice(&std::fs::read(&r.publish).unwrap()).unwrap();
    assert_eq!(receipt["index"]["digest"], published["index"]["digest"]);
    assert_eq!(
        receipt["platforms"][1]["digest"],
        published["platforms"][1]["digest"]
    );
    let (ok, _, report) = verify(&good, None);
    assert!(ok, "{report}");
    assert_eq!(report["valid"], true);

    // With the release's artifact files: all match; one changed file is named.
    let artifacts = work.path().join("artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    for a in receipt["artifacts"].as_array().unwrap() {
        std::fs::copy(
            r.root.path().join(a["path"].as_str().unwrap()),
            artifacts.join(a["name"].as_str().unwrap()),
        )
        .unwrap();
    }
    copy_sboms(&receipt, &artifacts);
    assert!(verify(&good, Some(&artifacts)).0);
    // A platform's SBOM is an asset the receipt hashes too.
    let sbom = artifacts.join(receipt["platforms"][0]["sbom"]["name"].as_str().unwrap());
    let original_sbom = std::fs::read(&sbom).unwrap();
    std::fs::write(&sbom, b"{}").unwrap();
    let (ok, stderr, _) = verify(&good, Some(&artifacts));
    assert!(
        !ok && stderr.contains("platforms[0].sbom.sha256"),
        "{stderr}"
    );
    std::fs::write(&sbom, original_sbom).unwrap();
    std::fs::write(artifacts.join("package-lock.json"), b"{}").unwrap();
    let (ok, stderr, _) = verify(&good, Some(&artifacts));
    assert!(!ok);
    assert!(
        stderr.contains("package-lock.json") && stderr.contains(".sha256"),
        "{stderr}"
    );

    // The template definition to pin: a copy of the committed one.
    let template = template_for(
        work.path(),
        receipt["index"]["repository"].as_str().unwrap(),
    );
    let original = std::fs::read(&template).unwrap();

    // Adversarial receipts: each rejected, naming the field, and pin leaves the file as is.
    let tag = TAG;
    let mut cases: Vec<(&str, PathBuf, &str)> = Vec::new();

    let mut tampered = receipt.clone();
    tampered["platforms"][1]["digest"] = json!(format!("sha256:{}", "e".repeat(64)));
    cases.push((
        "tampered platform digest",
        write_renamed(work.path(), tag, &tampered),
        "index.digest",
    ));

    std::fs::create_dir_all(work.path().join("edited")).unwrap();
    let in_place = work.path().join("edited").join(&name);
    std::fs::write(
        &in_place,
        String::from_utf8_lossy(&bytes).replace(
            receipt["index"]["digest"].as_str().unwrap(),
            &format!("sha256:{}", "d".repeat(64)),
        ),
    )
    .unwrap();
    cases.push(("digest edited in place", in_place, "file name"));

    let mut missing = receipt.clone();
    missing["platforms"].as_array_mut().unwrap().pop();
    cases.push((
        "missing platform",
        write_renamed(work.path(), tag, &missing),
        "platforms",
    ));

    let mut failed = receipt.clone();
    failed["platforms"][0]["smoke"]["checks"][2]["passed"] = json!(false);
    cases.push((
        "failed smoke check",
        write_renamed(work.path(), tag, &failed),
        "platforms[0].smoke.checks[2].passed",
    ));

    let mut future = receipt.clone();
    future["schema_version"] = json!(3);
    cases.push((
        "unknown schema version",
        write_renamed(work.path(), tag, &future),
        "schema_version",
    ));

    let truncated = work.path().join("truncated").join(&name);
    std::fs::create_dir_all(truncated.parent().unwrap()).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    cases.push(("truncated file", truncated, "(document)"));

    let mut bad_format = receipt.clone();
    bad_format["platforms"][0]["config_digest"] = json!("sha256:XYZ");
    cases.push((
        "malformed config digest",
        write_renamed(work.path(), tag, &bad_format),
        "platforms[0].config_digest",
    ));

    // An incomplete receipt made by `receipt write` itself: written, but exit non-zero.
    let incomplete_dir = work.path().join("incomplete");
    let (out, path) = write_receipt(&incomplete_dir, Some("harness pi"));
    assert!(
        !out.status.success(),
        "an incomplete receipt fails the write"
    );
    let incomplete = path.expect("the incomplete receipt is still written");
    let value: Value = serde_json::from_slice(&std::fs::read(&incomplete).unwrap()).unwrap();
    assert_eq!(value["complete"], false);
    cases.push(("incomplete (written so)", incomplete, "complete"));

    for (what, path, field) in &cases {
        let (ok, stderr, report) = verify(path, None);
        assert!(!ok, "{what}: accepted");
        assert_eq!(report["valid"], false, "{what}");
        let fields: Vec<&str> = report["problems"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["field"].as_str().unwrap())
            .collect();
        assert!(
            fields.contains(field),
            "{what}: expected a problem with `{field}`, got {fields:?}"
        );
        assert!(
            stderr.contains(field),
            "{what}: stderr does not name `{field}`:\n{stderr}"
        );
        let out = pin(path, &template);
        assert!(!out.status.success(), "{what}: pin succeeded");
        assert_eq!(
            std::fs::read(&template).unwrap(),
            original,
            "{what}: pin changed the template"
        );
    }

    // The good receipt pins: exactly the image line changes, to repo@index digest.
    let out = pin(&good, &template);
    assert!(out.status.success());
    let report = out.json();
    assert_eq!(report["changed"], true);
    let pinned = String::from_utf8(std::fs::read(&template).unwrap()).unwrap();
    let original = String::from_utf8(original).unwrap();
    let changed: Vec<(&str, &str)> = original
        .lines()
        .zip(pinned.lines())
        .filter(|(a, b)| a != b)
        .collect();
    assert_eq!(original.lines().count(), pinned.lines().count());
    assert_eq!(changed.len(), 1, "{changed:?}");
    assert_eq!(
        changed[0].1,
        format!("image: {}", receipt["index"]["reference"].as_str().unwrap())
    );
    let doc: yaml_serde::Value = yaml_serde::from_str(&pinned).unwrap();
    assert_eq!(
        doc["image"].as_str(),
        receipt["index"]["reference"].as_str()
    );
    // Pinning again changes nothing.
    let again = pin(&good, &template);
    assert!(again.status.success());
    assert_eq!(again.json()["changed"], false);
    assert_eq!(std::fs::read_to_string(&template).unwrap(), pinned);

    // The gate reads the receipt back: one day later is not due, four days later is a
    // catch-up although it is not a cadence day.
    let gate = gate_json(
        "2026-12-01T06:17:00Z",
        &["--previous-receipt", good.to_str().unwrap()],
    );
    assert_eq!(
        (gate["due"].clone(), gate["catch_up"].clone()),
        (json!(false), json!(false))
    );
    let output = work.path().join("github-output");
    let out = xtask()
        .args([
            "gate",
            "--json",
            "--now",
            "2026-12-04T06:17:00Z",
            "--previous-receipt",
        ])
        .arg(&good)
        .env("GITHUB_OUTPUT", &output)
        .run();
    assert!(out.status.success());
    let gate = out.json();
    assert_eq!(gate["due"], true);
    assert_eq!(gate["catch_up"], true);
    assert_eq!(gate["next_due"], "2026-12-06");
    let lines = std::fs::read_to_string(&output).unwrap();
    assert!(lines.lines().any(|l| l == "due=true"), "{lines}");

    // Several receipts (a re-run, a hand-edited copy): the newest that verifies decides, the
    // others are named and ignored, and the gate never fails on them.
    let mut edited: Value = serde_json::from_slice(&std::fs::read(&good).unwrap()).unwrap();
    edited["created_at"] = json!("2026-12-03T06:17:00Z");
    let edited_dir = work.path().join("edited");
    std::fs::create_dir_all(&edited_dir).unwrap();
    let edited_path = edited_dir.join(good.file_name().unwrap());
    std::fs::write(&edited_path, serde_json::to_vec(&edited).unwrap()).unwrap();
    let out = xtask()
        .args(["gate", "--json", "--now", "2026-12-04T06:17:00Z"])
        .arg("--previous-receipt")
        .arg(&edited_path)
        .arg("--previous-receipt")
        .arg(&good)
        .run();
    assert!(out.status.success());
    let gate = out.json();
    assert_eq!(
        gate["catch_up"], true,
        "the edited, newer receipt is ignored"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("ignored"));
}

#[test]
fn gate_exits_zero_when_not_due_and_forced_runs_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out");
    let out = xtask()
        .args(["gate", "--json", "--now", "2026-12-01T06:17:00Z"])
        .env("GITHUB_OUTPUT", &output)
        .run();
    assert!(out.status.success(), "not due still exits 0");
    let gate = out.json();
    assert_eq!(gate["due"], false);
    assert_eq!(gate["epoch_day"], 20_788);
    assert_eq!(gate["next_due"], "2026-12-03");
    assert_eq!(gate["forced"], false);
    assert!(gate["reason"].as_str().unwrap().contains("not a multiple"));
    assert!(std::fs::read_to_string(&output)
        .unwrap()
        .lines()
        .any(|l| l == "due=false"));
    let forced = gate_json("2026-12-01T06:17:00Z", &["--force"]);
    assert_eq!(
        (forced["due"].clone(), forced["forced"].clone()),
        (json!(true), json!(true))
    );
    assert_eq!(forced["trigger"], "forced");
    let bad = xtask().args(["gate", "--now", "yesterday"]).run();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--now"));
}

/// `release plan` on a GitHub runner, fed what the runner provides (GITHUB_EVENT_NAME,
/// GITHUB_REF, the payload at GITHUB_EVENT_PATH) on a day that is not due, so nothing is
/// resolved: the publish decision alone. A scheduled run's payload has no `repository`
/// (GitHub's events documentation; github/codeql-action#1211); the run is on the default
/// branch its ref names.
#[test]
fn a_scheduled_plan_may_publish_and_a_dispatch_follows_its_payload() {
    let root = crate::support::scratch_root_with(&["template/manifest.yaml"]);
    let plan = |event_name: &str, git_ref: &str, payload: Value| -> Value {
        let dir = tempfile::tempdir().unwrap();
        let event = dir.path().join("event.json");
        std::fs::write(&event, payload.to_string()).unwrap();
        xtask()
            .args(["release", "plan", "--json", "--now", "2026-12-01T04:37:00Z"])
            .arg("--out")
            .arg(dir.path().join("plan"))
            .arg("--previous-receipts")
            .arg(dir.path().join("none"))
            .env("XTASK_ROOT", root.path())
            .env("GITHUB_ACTIONS", "true")
            .env("GITHUB_EVENT_NAME", event_name)
            .env("GITHUB_REF", git_ref)
            .env("GITHUB_EVENT_PATH", &event)
            .run()
            .assert_success()
            .json()
    };
    let schedule = json!({
        "schedule": "37 4 * * *",
        "workflow": ".github/workflows/update-template.yml"
    });
    let scheduled = plan("schedule", "refs/heads/main", schedule);
    assert_eq!(scheduled["action"], "not_due");
    assert_eq!(scheduled["publish"], true, "{scheduled}");
    assert!(scheduled["publish_reason"]
        .as_str()
        .unwrap()
        .contains("default branch main"));
    let dispatch = |git_ref: &str| {
        json!({
            "inputs": { "force": "false", "no_publish": "false" },
            "ref": git_ref,
            "repository": { "full_name": "o/r", "default_branch": "main", "visibility": "public" },
            "sender": { "login": "octocat" },
            "workflow": ".github/workflows/update-template.yml"
        })
    };
    let on_main = plan(
        "workflow_dispatch",
        "refs/heads/main",
        dispatch("refs/heads/main"),
    );
    assert_eq!(on_main["publish"], true, "{on_main}");
    let elsewhere = plan(
        "workflow_dispatch",
        "refs/heads/x",
        dispatch("refs/heads/x"),
    );
    assert_eq!(elsewhere["publish"], false, "{elsewhere}");
}
