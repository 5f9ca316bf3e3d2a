//! Release notes of a release where one CLI changed, made here twice in a row: `release plan`
//! against the npm fixture registry (the real npm locks), each platform's results from tiny
//! images published to the local registry (no image is built: the smoke results and the
//! harnesses' evidence are the committed real ones, `tests/fixtures/harness-evidence/`), then
//! `release ship`, which writes the notes the GitHub release carries. Between the two releases
//! Codex gets a new version (old enough to take), Claude Code one inside the cooldown, Codex's
//! layer changes, and Codex's `thread/start` answer gains a field in the transcript. The
//! second release's notes must lead with those, and `release notes` must make the same notes
//! from the two receipts alone.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::support::docker::{light_docker, load_layered_image, local_registry, remove_images};
use crate::support::genuine_release::{
    build_json, debian_packages, publish_command, smoke, write_sbom_of_lock, Published,
};
use crate::support::npm_fixture::{
    days_ago, fixture_now, realistic, scratch_root, FixtureRegistry,
};
use crate::support::xtask::{xtask, Run};
use crate::support::{checkout_file, checkout_path, tail, unique};

/// The scratch checkout: the fixture's manifest, the install plan, a fixture Dockerfile, the
/// schema and the local registry's script, committed (the receipt records the commit).
fn checkout() -> tempfile::TempDir {
    let root = scratch_root(&[]);
    for path in [
        "template/install-plan.js",
        "schemas/receipt.v2.schema.json",
        "scripts/local-registry.sh",
    ] {
        let to = root.path().join(path);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(checkout_path(path), to).unwrap();
    }
    std::fs::write(
        root.path().join("Dockerfile"),
        "# fixture of tests/it/release_notes.rs\nFROM scratch\n",
    )
    .unwrap();
    // `receipt write` records the checkout's commit.
    crate::support::commit_fixture(root.path());
    root
}

struct Release {
    plan: Value,
    receipt: PathBuf,
    notes: String,
    tags: Vec<String>,
}

fn run_ok(run: Run, what: &str) -> Value {
    assert!(
        run.success(),
        "{what} failed:\n{}\n{}",
        run.stdout_text(),
        tail(&run.stderr_text(), 6000)
    );
    run.json()
}

/// One release: plan at `now`, results from tiny images whose Codex layer is `codex_layer`
/// and whose amd64 harness evidence is `harnesses`, ship. `size` is the images' size as the
/// fixture build reports it.
fn release(
    root: &Path,
    registry: &FixtureRegistry,
    repository: &str,
    now: &str,
    codex_layer: &str,
    size: u64,
    harnesses: &Value,
) -> Release {
    let run = root.join(format!("run-{}", now.replace(':', "")));
    let (plan_dir, results) = (run.join("plan"), run.join("results"));
    std::fs::create_dir_all(&results).unwrap();
    let plan = run_ok(
        xtask()
            .args(["release", "plan", "--json", "--force"])
            .args(["--registry", &registry.url, "--now", now])
            .args([
                "--oci-registry",
                local_registry(),
                "--repository",
                repository,
            ])
            .arg("--out")
            .arg(&plan_dir)
            .arg("--previous-receipts")
            .arg(root.join("releases"))
            .env("XTASK_ROOT", root)
            .env("XTASK_RETRY_BASE_MS", "50")
            .run(),
        "release plan",
    );
    assert_eq!(plan["action"], "release", "{plan}");
    let tag = plan["tag"].as_str().unwrap().to_string();
    let mut tags = Vec::new();
    for (arch, emulated) in [("amd64", false), ("arm64", true)] {
        let image = format!(
            "xtask-test-notes:{arch}-{}-{}",
            std::process::id(),
            &tag[11..]
        );
        let loaded = load_layered_image(
            &image,
            arch,
            &[
                "system files",
                codex_layer,
                &format!("other packages {arch}"),
            ],
        );
        tags.push(image.clone());
        let platform = format!("linux/{arch}");
        let mut build = build_json(arch, &image, &loaded.id, &tag, emulated);
        build["size"] = json!(size);
        let report = run_ok(
            publish_command(repository, &["--image", &format!("{platform}={image}")])
                .env("XTASK_ROOT", root)
                .run(),
            "publish",
        );
        let pushed = report["platforms"][0].clone();
        let name = Published {
            repository: format!("{}/{repository}", local_registry()),
            digest: pushed["digest"].as_str().unwrap().into(),
            tag: tag.clone(),
        };
        let lockfile = std::fs::read(root.join("template/package-lock.json")).unwrap();
        let spdx = write_sbom_of_lock(
            &platform,
            &loaded.id,
            &debian_packages(arch),
            &name,
            &lockfile,
        );
        for (from, to) in [
            (spdx.clone(), format!("sbom-linux-{arch}.spdx.json")),
            (
                spdx.with_file_name(format!("sbom-linux-{arch}.cdx.json")),
                format!("sbom-linux-{arch}.cdx.json"),
            ),
        ] {
            std::fs::copy(from, results.join(to)).unwrap();
        }
        let mut smoke = smoke(&image, &platform, emulated, None);
        if !emulated {
            smoke["harnesses"] = harnesses.clone();
        }
        std::fs::write(
            results.join(format!("results-linux-{arch}.json")),
            json!({
                "schema_version": 1, "platform": platform, "tag": tag,
                "inputs_digest": plan["inputs_digest"], "build": build, "smoke": smoke,
                "pushed": pushed, "steps": [],
            })
            .to_string(),
        )
        .unwrap();
    }
    let shipped = run_ok(
        xtask()
            .args(["release", "ship", "--json", "--plan"])
            .arg(&plan_dir)
            .arg("--results")
            .arg(&results)
            .arg("--assets")
            .arg(root.join("releases").join(&tag))
            .env("XTASK_ROOT", root)
            .run(),
        "release ship",
    );
    let notes = std::fs::read_to_string(shipped["notes"].as_str().unwrap()).unwrap();
    Release {
        plan,
        receipt: shipped["receipt"].as_str().unwrap().into(),
        notes,
        tags,
    }
}

/// The committed harness evidence with one field added to Codex's `thread/start` answer, as a
/// newer Codex would give it.
fn with_a_new_codex_field(harnesses: &Value) -> Value {
    let mut edited = harnesses.clone();
    let codex = edited
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|h| h["name"] == "codex")
        .unwrap();
    let start = codex["messages"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|m| m["kind"] == "thread/start result")
        .expect("the real Codex transcript has a thread/start answer");
    start["fields"]["result.thread.title"] = json!("string");
    edited
}

#[test]
fn a_release_where_one_cli_changed_has_notes_that_lead_with_it() {
    let Some(_docker) = light_docker() else {
        return;
    };
    let started = std::time::Instant::now();
    let registry = realistic();
    crate::lock::with_pinned_npm(&registry);
    let root = checkout();
    let repository = unique("xtask-test/notes").to_lowercase();
    let harnesses: Value = serde_json::from_slice(&checkout_file(
        "tests/fixtures/harness-evidence/smoke-harnesses.json",
    ))
    .unwrap();

    let t1 = fixture_now().to_rfc3339();
    let first = release(
        root.path(),
        &registry,
        &repository,
        &t1,
        "codex 0.171.0",
        2_260_000_000,
        &harnesses,
    );
    assert!(
        first.notes.contains("No previous release to compare with"),
        "{}",
        first.notes
    );

    // A day later: Codex 0.172.0, published two days ago, is taken; Claude Code 1.2.0,
    // published 20 hours ago, is inside the 48-hour cooldown.
    let t2 = fixture_now() + chrono::Duration::days(1);
    for cpu in ["x64", "arm64"] {
        registry.publish(
            "@openai/codex",
            &format!("0.172.0-linux-{cpu}"),
            json!({ "os": ["linux"], "cpu": [cpu], "license": "Apache-2.0" }),
            &[],
            days_ago(2),
        );
    }
    registry.publish(
        "@openai/codex",
        "0.172.0",
        json!({ "license": "Apache-2.0", "bin": { "codex": "bin/codex.js" },
        "repository": { "type": "git", "url": "git+https://github.com/openai/codex.git" },
        "optionalDependencies": {
            "@openai/codex-linux-x64": "npm:@openai/codex@0.172.0-linux-x64",
            "@openai/codex-linux-arm64": "npm:@openai/codex@0.172.0-linux-arm64",
        }}),
        &[(
            "bin/codex.js",
            "#!/usr/bin/env node\nconsole.log('codex');\n",
        )],
        days_ago(2),
    );
    let young = t2 - chrono::Duration::hours(20);
    let mut optional = serde_json::Map::new();
    for cpu in ["x64", "arm64"] {
        let platform = format!("@anthropic-ai/claude-code-linux-{cpu}");
        registry.publish(
            &platform,
            "1.2.0",
            json!({ "os": ["linux"], "cpu": [cpu] }),
            &[],
            young,
        );
        optional.insert(platform, json!("1.2.0"));
    }
    let (postinstall, file, body) =
        crate::support::npm_fixture::fixture_install_script("@anthropic-ai/claude-code");
    registry.publish(
        "@anthropic-ai/claude-code",
        "1.2.0",
        json!({ "license": "SEE LICENSE IN README.md", "bin": { "claude": "bin/claude.js" },
                "optionalDependencies": optional, "scripts": { "postinstall": postinstall } }),
        &[("bin/claude.js", "#!/usr/bin/env node\n"), (file, body)],
        young,
    );
    let second = release(
        root.path(),
        &registry,
        &repository,
        &t2.to_rfc3339(),
        "codex 0.172.0",
        2_272_400_000,
        &with_a_new_codex_field(&harnesses),
    );
    assert_eq!(
        second.plan["previous"]["tag"], first.plan["tag"],
        "{}",
        second.plan
    );

    let lines: Vec<&str> = second.notes.lines().collect();
    let first_tag = first.plan["tag"].as_str().unwrap();
    assert_eq!(
        lines[2],
        format!("Changes since {first_tag} ({}):", rfc3339(&t1))
    );
    assert_eq!(
        lines[4],
        "- `@openai/codex` 0.171.0 → 0.172.0 ([release notes](https://github.com/openai/codex/releases))",
        "{}",
        second.notes
    );
    let until = rfc3339(&(young + chrono::Duration::hours(48)).to_rfc3339());
    assert_eq!(
        lines[5],
        format!(
            "- Held back: `@anthropic-ai/claude-code` 1.1.0, not latest 1.2.0: published {} \
             (20h ago), inside the cooldown until {until}",
            rfc3339(&young.to_rfc3339())
        ),
        "{}",
        second.notes
    );
    for (i, platform) in ["linux/amd64", "linux/arm64"].iter().enumerate() {
        let line = lines[6 + i];
        assert!(
            line.starts_with(&format!("- {platform}: 2.27 GB (+12.4 MB), ")),
            "{line}"
        );
        assert!(
            line.contains(&format!("; a host holding {first_tag} pulls "))
                && line.ends_with("(1 of 3 layers new)"),
            "{line}"
        );
    }
    assert!(
        second.notes.contains(
            "  - drift: received `thread/start result [result.sandbox.type=readOnly, \
             result.thread.status.type=idle]`: field added `result.thread.title` (string)"
        ),
        "{}",
        second.notes
    );
    assert!(
        second
            .notes
            .contains("- Protocol drift (listed below, not failed): `codex` 1 change(s)"),
        "{}",
        second.notes
    );

    // The same notes again, from the two receipts (and the assets beside them) alone.
    let regenerated = xtask()
        .args(["release", "notes", "--receipt"])
        .arg(&second.receipt)
        .arg("--previous")
        .arg(&first.receipt)
        .env("XTASK_ROOT", root.path())
        .run();
    assert!(regenerated.success(), "{}", regenerated.stderr_text());
    assert_eq!(regenerated.stdout_text(), second.notes);
    let json = xtask()
        .args(["release", "notes", "--format", "json", "--receipt"])
        .arg(&second.receipt)
        .arg("--previous")
        .arg(&first.receipt)
        .env("XTASK_ROOT", root.path())
        .run();
    let json = run_ok(json, "release notes --format json");
    assert_eq!(json["packages"][0]["previous"], "0.171.0");
    assert!(json["packages"][1]["not_taken_because"][0]
        .as_str()
        .unwrap()
        .contains("inside the cooldown until"));
    eprintln!(
        "two fixture releases and their notes: {:.0} s",
        started.elapsed().as_secs_f64()
    );
    remove_images(&[first.tags, second.tags].concat());
}

/// `2026-11-29T12:00:00+00:00` as the tool writes it: `2026-11-29T12:00:00Z`.
fn rfc3339(text: &str) -> String {
    text.parse::<chrono::DateTime<chrono::Utc>>()
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}
