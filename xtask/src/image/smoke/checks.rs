//! The smoke checks' fixed names and their pure verdicts: the image config, Node's version and
//! the harnesses' answers, judged against the manifest without a container.

use std::collections::BTreeMap;

use bollard::models::{ImageConfig, ImageInspect};
use serde_json::Value;

use crate::image::build_inputs::LOCKFILE_LABEL;
use crate::image::engine;
use template_formats::manifest::{Manifest, NodeSpec, Platform};
use template_formats::model::smoke::Check;
use template_formats::paths::PACKAGE_LOCK;

/// Node's version against the manifest (template/manifest.yaml requires every check by name).
pub(crate) const NODE_CHECK: &str = "node runtime";
/// The scan of every layer for the build CA.
pub(crate) const CA_CHECK: &str = "no CA bundle left in the image";
/// Where the platform runs natively: playwright-cli drives a page in Chromium.
pub const PLAYWRIGHT_CHECK: &str = "playwright-cli drives chromium";
/// The browser check that replaces [`PLAYWRIGHT_CHECK`] under emulation.
pub const EMULATED_CHROMIUM_CHECK: &str = "chromium starts (emulated)";
pub(crate) const DESKTOP_CHECK: &str = "xtigervnc and openbox start";
/// The seed's shared browser under the template's seccomp profile (native platforms only:
/// under qemu-user Chromium's renderer dies whatever the flags).
pub(crate) const SHARED_BROWSER_CHECK: &str =
    "shared browser: sandboxed chromium shared over cdp and vnc";
/// Its negative control: the same start refused under the engine's default seccomp profile.
pub(crate) const SHARED_BROWSER_REFUSED_CHECK: &str =
    "shared browser refused under the default seccomp profile";
/// The launcher on a persistent profile, relaunched on another host name.
pub(crate) const SHARED_BROWSER_RELAUNCH_CHECK: &str =
    "shared browser relaunches on another host name";
pub(crate) const WS_CHECK: &str = "ws loads and echoes";
/// Named after the committed `browser.user`; receipts require the check by this name.
pub(crate) const BROWSER_USER_CHECK: &str = "sandbox-browser user";
pub(crate) const PLATFORM_CHECK: &str = "platform";
pub(crate) const HOME_CHECK: &str = "home and working directory";
pub(crate) const ENTRYPOINT_CHECK: &str = "no entrypoint or cmd";
pub(crate) const ENV_CHECK: &str = "no-update and no-telemetry variables";
pub(crate) const LABELS_CHECK: &str = "provenance labels";

/// The label listing `name@version` of every package, space-separated (see the Dockerfile).
pub(crate) const PACKAGES_LABEL: &str = "org.sandbox0.coding-agent.packages";

pub(super) fn env_map(env: &[String]) -> BTreeMap<&str, &str> {
    env.iter().filter_map(|kv| kv.split_once('=')).collect()
}

/// The checks on the image config alone: pure, no container.
pub(crate) fn config_checks(
    inspect: &ImageInspect,
    requested: Option<Platform>,
    manifest: &Manifest,
    versions: &BTreeMap<String, String>,
    lockfile_sha: &str,
) -> Vec<Check> {
    let config = inspect.config.clone().unwrap_or_default();
    vec![
        platform_check(inspect, requested, manifest),
        home_check(&config, manifest),
        entrypoint_check(&config),
        env_check(&config, manifest),
        labels_check(&config, manifest, versions, lockfile_sha),
    ]
}

fn platform_check(
    inspect: &ImageInspect,
    requested: Option<Platform>,
    manifest: &Manifest,
) -> Check {
    let found = engine::image_platform(inspect);
    match requested {
        Some(platform) => Check::new(
            PLATFORM_CHECK,
            found == platform.to_string(),
            format!("image config says {found}; requested {platform}"),
        ),
        None => {
            let known = found
                .parse::<Platform>()
                .is_ok_and(|p| manifest.platforms.contains(&p));
            Check::new(
                PLATFORM_CHECK,
                known,
                format!(
                    "image config says {found}; the manifest builds {:?}",
                    manifest
                        .platforms
                        .iter()
                        .map(|p| p.to_string())
                        .collect::<Vec<_>>()
                ),
            )
        }
    }
}

fn home_check(config: &ImageConfig, manifest: &Manifest) -> Check {
    let env_list = config.env.clone().unwrap_or_default();
    let env = env_map(&env_list);
    let workdir = config.working_dir.clone().unwrap_or_default();
    let home = manifest.image.home.as_str();
    Check::new(
        HOME_CHECK,
        env.get("HOME") == Some(&home) && workdir == home,
        format!(
            "HOME={} WorkingDir={}",
            env.get("HOME").unwrap_or(&"(unset)"),
            if workdir.is_empty() {
                "(unset)"
            } else {
                &workdir
            }
        ),
    )
}

fn entrypoint_check(config: &ImageConfig) -> Check {
    let entrypoint = config.entrypoint.clone().unwrap_or_default();
    let cmd = config.cmd.clone().unwrap_or_default();
    Check::new(
        ENTRYPOINT_CHECK,
        entrypoint.is_empty() && cmd.is_empty(),
        format!("Entrypoint={entrypoint:?} Cmd={cmd:?}"),
    )
}

fn env_check(config: &ImageConfig, manifest: &Manifest) -> Check {
    let env_list = config.env.clone().unwrap_or_default();
    let env = env_map(&env_list);
    let required = manifest.image.required_env();
    let mut wrong = Vec::new();
    for (name, value) in &required {
        match env.get(name.as_str()) {
            Some(v) if v == value => {}
            Some(v) => wrong.push(format!("{name}={v} (want {value})")),
            None => wrong.push(format!("{name} unset (want {value})")),
        }
    }
    Check::new(
        ENV_CHECK,
        wrong.is_empty(),
        if wrong.is_empty() {
            required
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        } else {
            wrong.join("; ")
        },
    )
}

fn labels_check(
    config: &ImageConfig,
    manifest: &Manifest,
    versions: &BTreeMap<String, String>,
    lockfile_sha: &str,
) -> Check {
    let labels = config.labels.clone().unwrap_or_default();
    let mut problems = Vec::new();
    match labels.get(LOCKFILE_LABEL) {
        Some(v) if v == lockfile_sha => {}
        Some(v) => problems.push(format!(
            "{LOCKFILE_LABEL}={v}, but {PACKAGE_LOCK} has sha256 {lockfile_sha}: the image was built from another lock"
        )),
        None => problems.push(format!("{LOCKFILE_LABEL} missing")),
    }
    let packages_label = labels.get(PACKAGES_LABEL).cloned().unwrap_or_default();
    for package in &manifest.packages {
        if let Some(version) = versions.get(&package.name) {
            let pin = format!("{}@{version}", package.name);
            if !packages_label.split(' ').any(|p| p == pin) {
                problems.push(format!("label {PACKAGES_LABEL} lacks {pin}"));
            }
        }
    }
    Check::new(
        LABELS_CHECK,
        problems.is_empty(),
        if problems.is_empty() {
            format!("{LOCKFILE_LABEL}={lockfile_sha}; packages: {packages_label}")
        } else {
            problems.join("; ")
        },
    )
}

/// Node's version against the manifest: on the major line and at least the minimum.
pub(crate) fn node_version_verdict(printed: &str, node: &NodeSpec) -> (bool, String) {
    let text = printed.trim().trim_start_matches('v');
    match semver::Version::parse(text) {
        Err(_) => (
            false,
            format!(
                "`{}` printed `{}`, not a version",
                node.version_command.join(" "),
                printed.trim()
            ),
        ),
        Ok(version) => {
            let ok = version.major == node.major && version >= node.minimum;
            (
                ok,
                format!(
                    "Node {version}; the template needs {}.x and at least {}{}",
                    node.major,
                    node.minimum,
                    if version.to_string() == node.version.to_string() {
                        String::new()
                    } else {
                        format!(" (the manifest pins {})", node.version)
                    }
                ),
            )
        }
    }
}

/// Splits a byte stream into LF-terminated lines (chunk boundaries are not record boundaries).
#[derive(Debug, Default)]
pub(crate) struct LineSplitter {
    pending: Vec<u8>,
}

impl LineSplitter {
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        self.pending.extend_from_slice(bytes);
        let mut lines = Vec::new();
        while let Some(pos) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=pos).collect();
            let line = String::from_utf8_lossy(&line[..line.len() - 1]);
            lines.push(line.trim_end_matches('\r').to_string());
        }
        lines
    }
}

/// Whether one stdout record satisfies every `expect` pointer: equal values, or for the
/// string `"present"`, a pointer that resolves.
pub(crate) fn record_matches(record: &Value, expect: &BTreeMap<String, Value>) -> bool {
    expect
        .iter()
        .all(|(pointer, want)| match record.pointer(pointer) {
            None => false,
            Some(_) if want == "present" => true,
            Some(got) => got == want,
        })
}

/// Truncates long evidence in the middle, keeping its start and end.
pub(crate) fn clip(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.chars().count() <= max {
        return text.to_string();
    }
    let head: String = text.chars().take(max / 2).collect();
    let tail: String = text
        .chars()
        .rev()
        .take(max / 2)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    format!("{head}\n[...]\n{tail}")
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    use crate::image::build_inputs::locked_versions;
    use crate::util::repo_root;
    use template_formats::paths::MANIFEST;
    use template_formats::paths::PACKAGE_JSON;

    #[test]
    fn lines_are_split_across_chunks() {
        let mut s = LineSplitter::default();
        assert!(s.push(b"{\"a\":").is_empty());
        assert_eq!(s.push(b"1}\n{\"b\""), vec!["{\"a\":1}"]);
        assert_eq!(s.push(b":2}\r\n\n"), vec!["{\"b\":2}", ""]);
    }

    #[test]
    fn records_match_values_and_presence() {
        let expect: BTreeMap<String, Value> =
            serde_json::from_str(r#"{"/id": 1, "/result/userAgent": "present", "/ok": true}"#)
                .unwrap();
        let good = serde_json::json!({"id": 1, "ok": true, "result": {"userAgent": "x"}});
        assert!(record_matches(&good, &expect));
        let wrong_id = serde_json::json!({"id": "1", "ok": true, "result": {"userAgent": "x"}});
        assert!(!record_matches(&wrong_id, &expect));
        let missing = serde_json::json!({"id": 1, "ok": true, "result": {}});
        assert!(!record_matches(&missing, &expect));
        let null_present = serde_json::json!({"id": 1, "ok": true, "result": {"userAgent": null}});
        assert!(record_matches(&null_present, &expect));
    }

    #[test]
    fn committed_harness_expectations_match_what_the_harnesses_answered() {
        // Records as environment.md reports them (abridged); a wrong pointer in the manifest
        // would fail here before it fails a 10-minute image test.
        let manifest = Manifest::load(&repo_root().join(MANIFEST)).unwrap();
        let answers = [
            (
                "codex",
                r#"{"id":1,"result":{"userAgent":"codex/0.171.0","codexHome":"/workspace/.codex"}}"#,
            ),
            (
                "claude-code",
                r#"{"type":"system","subtype":"init","session_id":"abc","tools":[]}"#,
            ),
            (
                "opencode",
                r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{}}}"#,
            ),
            (
                "pi",
                r#"{"id":"1","type":"response","command":"get_state","success":true,"data":{}}"#,
            ),
        ];
        for (name, answer) in answers {
            let harness = manifest.harnesses.iter().find(|h| h.name == name).unwrap();
            let record: Value = serde_json::from_str(answer).unwrap();
            assert!(record_matches(&record, &harness.expect), "{name}");
            // The replayed handshake itself must not count as an answer.
            for line in &harness.handshake {
                let sent: Value = serde_json::from_str(line).unwrap();
                assert!(
                    !record_matches(&sent, &harness.expect),
                    "{name}: handshake matches itself"
                );
            }
        }
    }

    #[test]
    fn node_versions_are_judged_against_the_manifest() {
        let manifest = Manifest::load(&repo_root().join(MANIFEST)).unwrap();
        let node = &manifest.node;
        assert!(node_version_verdict(&format!("v{}\n", node.version), node).0);
        assert!(!node_version_verdict("v22.18.0", node).0);
        assert!(!node_version_verdict("v24.1.0", node).0);
        assert!(!node_version_verdict("command not found", node).0);
    }

    pub(in crate::image::smoke) fn inspect(
        env: &[&str],
        cmd: Option<Vec<&str>>,
        arch: &str,
    ) -> ImageInspect {
        let manifest = Manifest::load(&repo_root().join(MANIFEST)).unwrap();
        let versions =
            locked_versions(&std::fs::read(repo_root().join(PACKAGE_JSON)).unwrap()).unwrap();
        let pins: Vec<String> = manifest
            .packages
            .iter()
            .map(|p| format!("{}@{}", p.name, versions[&p.name]))
            .collect();
        ImageInspect {
            os: Some("linux".into()),
            architecture: Some(arch.into()),
            config: Some(bollard::models::ImageConfig {
                env: Some(env.iter().map(|s| s.to_string()).collect()),
                cmd: cmd.map(|c| c.iter().map(|s| s.to_string()).collect()),
                working_dir: Some("/workspace".into()),
                labels: Some(std::collections::HashMap::from([
                    (LOCKFILE_LABEL.to_string(), "abc".to_string()),
                    (
                        "org.sandbox0.coding-agent.packages".to_string(),
                        pins.join(" "),
                    ),
                ])),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// The manifest states what the image must hold and the Dockerfile makes it: a value
    /// changed in one but not the other fails here, not after a 20-minute image build.
    #[test]
    fn the_committed_dockerfile_makes_what_the_manifest_requires() {
        let manifest = Manifest::load(&repo_root().join(MANIFEST)).unwrap();
        let dockerfile =
            std::fs::read_to_string(repo_root().join(template_formats::paths::DOCKERFILE)).unwrap();
        for (name, value) in manifest.image.required_env() {
            assert!(
                dockerfile.contains(&format!("{name}={value}")),
                "the Dockerfile does not set {name}={value}"
            );
        }
        for name in &manifest.image.forbidden_env {
            assert!(
                !dockerfile.contains(&format!("ENV {name}")),
                "the Dockerfile sets {name}"
            );
        }
        let image = &manifest.image;
        assert!(dockerfile.contains(&format!("\nWORKDIR {}\n", image.home)));
        assert!(dockerfile.contains(&format!("\nWORKDIR {}\n", image.install_dir)));
        let user = &manifest.browser.user;
        assert!(dockerfile.contains(&format!(
            "useradd --create-home --user-group --shell /bin/bash {user}"
        )));
        for build in &manifest.linked_builds {
            for path in [&build.link, &build.target] {
                assert!(
                    dockerfile.contains(path.as_str()),
                    "{}: {path}",
                    build.check
                );
            }
        }
    }

    /// HOME, the working directory and the variables are judged against the manifest's
    /// values, not against values of this module.
    #[test]
    fn config_checks_follow_the_manifest() {
        let mut manifest = Manifest::load(&repo_root().join(MANIFEST)).unwrap();
        let env: Vec<String> = manifest
            .image
            .required_env()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let env: Vec<&str> = env.iter().map(String::as_str).collect();
        let image = inspect(&env, None, "amd64");
        let config = image.config.clone().unwrap();
        assert!(home_check(&config, &manifest).passed);
        assert!(env_check(&config, &manifest).passed);
        manifest.image.home = "/home/agent".into();
        let home = home_check(&config, &manifest);
        assert!(!home.passed, "{}", home.output);
        manifest.image.env.push("EXTRA_POLICY=1".into());
        let vars = env_check(&config, &manifest);
        assert!(!vars.passed);
        assert!(
            vars.output.contains("EXTRA_POLICY unset (want 1)"),
            "{}",
            vars.output
        );
        assert!(
            vars.output.contains("HOME=/workspace (want /home/agent)"),
            "{}",
            vars.output
        );
    }

    #[test]
    fn config_checks_catch_each_mistake() {
        let manifest = Manifest::load(&repo_root().join(MANIFEST)).unwrap();
        let versions =
            locked_versions(&std::fs::read(repo_root().join(PACKAGE_JSON)).unwrap()).unwrap();
        let good_env: Vec<String> = manifest
            .image
            .required_env()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let good_env: Vec<&str> = good_env.iter().map(String::as_str).collect();
        let verdicts =
            |i: &ImageInspect, p: Option<Platform>, sha: &str| -> BTreeMap<String, bool> {
                config_checks(i, p, &manifest, &versions, sha)
                    .into_iter()
                    .map(|c| (c.name, c.passed))
                    .collect()
            };
        let all_pass = verdicts(
            &inspect(&good_env, None, "amd64"),
            Some(Platform::LinuxAmd64),
            "abc",
        );
        assert!(all_pass.values().all(|p| *p), "{all_pass:?}");

        let v = verdicts(
            &inspect(&good_env, None, "amd64"),
            Some(Platform::LinuxArm64),
            "abc",
        );
        assert!(!v["platform"]);
        let v = verdicts(
            &inspect(&good_env, Some(vec!["bash"]), "arm64"),
            None,
            "abc",
        );
        assert!(v["platform"]);
        assert!(!v["no entrypoint or cmd"]);
        let v = verdicts(&inspect(&good_env[1..], None, "amd64"), None, "abc");
        assert!(!v["home and working directory"]);
        assert!(!v["no-update and no-telemetry variables"]);
        let v = verdicts(&inspect(&good_env, None, "amd64"), None, "other-lock");
        assert!(!v["provenance labels"]);
    }

    #[test]
    fn clip_keeps_both_ends() {
        let long = "a".repeat(50) + &"b".repeat(50);
        let c = clip(&long, 20);
        assert!(
            c.starts_with("aaaaaaaaaa") && c.ends_with("bbbbbbbbbb"),
            "{c}"
        );
        assert_eq!(clip("short", 20), "short");
    }
}
