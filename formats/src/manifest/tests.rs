use super::*;

fn committed() -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(crate::paths::MANIFEST),
    )
    .unwrap()
}

#[test]
fn committed_manifest_is_valid() {
    let m = Manifest::parse(&committed(), Path::new(crate::paths::MANIFEST)).unwrap();
    assert_eq!(m.packages.len(), 6);
    assert_eq!(m.platforms, Platform::ALL.to_vec());
    assert_eq!(m.harnesses.len(), 4);
}

#[test]
fn a_package_s_provenance_identity_is_read_and_checked() {
    let with = |block: &str| {
        committed().replacen(
            "    version_output: \"{version}\"\n",
            &format!("    version_output: \"{{version}}\"\n{block}"),
            1,
        )
    };
    let block = "    provenance:\n      repository: o/r\n      workflow: .github/workflows/release.yml\n      ref: refs/tags/v*\n      source: o/r .github/workflows/release.yml at v1.0.0\n";
    let m = Manifest::parse(&with(block), Path::new("m.yaml")).unwrap();
    let id = m
        .packages
        .iter()
        .find_map(|p| p.provenance.as_ref())
        .unwrap();
    assert_eq!(id.repository, "o/r");
    assert!(id.ref_matches("refs/tags/v2"));
    // A misspelt key and a malformed value are errors naming them.
    let err = format!(
        "{:#}",
        Manifest::parse(
            &with(&block.replace("workflow:", "workflw:")),
            Path::new("m.yaml")
        )
        .unwrap_err()
    );
    assert!(err.contains("workflw"), "{err}");
    let err = format!(
        "{:#}",
        Manifest::parse(
            &with(&block.replace("refs/tags/v*", "v*")),
            Path::new("m.yaml")
        )
        .unwrap_err()
    );
    assert!(err.contains("provenance.ref"), "{err}");
}

#[test]
fn unknown_key_is_named() {
    let text = committed().replace("cooldown_hours:", "cooldown_hourz:");
    let err = Manifest::parse(&text, Path::new("m.yaml")).unwrap_err();
    let msg = format!("{err:#}");
    assert!(msg.contains("m.yaml"), "{msg}");
    assert!(msg.contains("cooldown_hourz"), "{msg}");
}

#[test]
fn wrong_type_is_named() {
    let text = committed().replace("interval_days: 3", "interval_days: three");
    let msg = format!(
        "{:#}",
        Manifest::parse(&text, Path::new("m.yaml")).unwrap_err()
    );
    assert!(msg.contains("interval_days"), "{msg}");
}

#[test]
fn cooldown_below_a_day_is_rejected() {
    let text = committed().replace("cooldown_hours: 48", "cooldown_hours: 2");
    let msg = format!(
        "{:#}",
        Manifest::parse(&text, Path::new("m.yaml")).unwrap_err()
    );
    assert!(msg.contains("at least 24"), "{msg}");
}

#[test]
fn node_off_the_major_line_is_rejected() {
    let text = committed().replace("version: 22.23.5", "version: 24.1.0");
    let msg = format!(
        "{:#}",
        Manifest::parse(&text, Path::new("m.yaml")).unwrap_err()
    );
    assert!(msg.contains("node.major"), "{msg}");
}

#[test]
fn required_smoke_checks_differ_by_build_and_platform() {
    let m = Manifest::parse(&committed(), Path::new(crate::paths::MANIFEST)).unwrap();
    let native = m.required_smoke_checks(Platform::LinuxAmd64, false);
    let emulated = m.required_smoke_checks(Platform::LinuxArm64, true);
    assert!(native.contains("playwright-cli drives chromium"));
    assert!(!native.contains("chromium starts (emulated)"));
    assert!(native.contains("opencode x64 baseline build"));
    assert!(emulated.contains("chromium starts (emulated)"));
    assert!(!emulated.contains("opencode x64 baseline build"));
    for set in [&native, &emulated] {
        assert!(set.contains("no CA bundle left in the image"));
        assert!(set.contains("harness claude-code") && set.contains("version ws"));
    }
    for shared in [
        "shared browser: sandboxed chromium shared over cdp and vnc",
        "shared browser refused under the default seccomp profile",
        "shared browser relaunches on another host name",
    ] {
        assert!(
            native.contains(shared) && !emulated.contains(shared),
            "{shared}"
        );
    }
    for harness in &m.harnesses {
        let turns = harness_turns_check_name(&harness.name);
        assert!(
            native.contains(&turns) && !emulated.contains(&turns),
            "{turns}"
        );
    }
    assert_eq!(native.len(), 10 + 4 + 1 + 6 + 4 + 4);
}

#[test]
fn smoke_check_lists_are_strict() {
    for (from, to, expect) in [
        ("  every_build:", "  every_buld:", "every_buld"),
        ("    linux/arm64: []\n", "", "no entry for linux/arm64"),
        (
            "    - node runtime\n",
            "    - node runtime\n    - node runtime\n",
            "twice",
        ),
        ("    - node runtime\n", "    - harness pi\n", "twice"),
        ("smoke_checks:", "smoke_checkz:", "smoke_checkz"),
    ] {
        let text = committed().replacen(from, to, 1);
        assert_ne!(text, committed(), "{from}");
        let msg = format!(
            "{:#}",
            Manifest::parse(&text, Path::new("m.yaml")).unwrap_err()
        );
        assert!(msg.contains(expect), "{from} -> {to}: {msg}");
    }
}

/// A harness name is pasted into the turn check's script as a shell word and a JavaScript
/// string: only lowercase letters, digits and `-` get through.
#[test]
fn harness_names_are_plain_words() {
    for bad in ["Pi", "pi agent", "pi'", "pi\"", ""] {
        let text = committed().replacen(
            "  - name: pi\n",
            &format!("  - name: \"{}\"\n", bad.replace('"', "\\\"")),
            1,
        );
        assert_ne!(text, committed(), "{bad}");
        let msg = format!(
            "{:#}",
            Manifest::parse(&text, Path::new("m.yaml")).unwrap_err()
        );
        assert!(
            msg.contains("must be lowercase letters, digits and `-`"),
            "{bad}: {msg}"
        );
    }
}

#[test]
fn image_browser_and_linked_builds_come_from_the_committed_manifest() {
    let m = Manifest::parse(&committed(), Path::new(crate::paths::MANIFEST)).unwrap();
    let env = m.image.required_env();
    assert_eq!(env[0], ("HOME".to_string(), "/workspace".to_string()));
    assert!(env.contains(&("PI_TELEMETRY".to_string(), "0".to_string())));
    assert_eq!(env.len(), 1 + m.image.env.len());
    assert!(m
        .image
        .forbidden_env
        .contains(&"NODE_EXTRA_CA_CERTS".to_string()));
    assert_eq!(m.image.install_dir, "/opt/coding-agents");
    assert_eq!(m.browser.user, "sandbox-browser");
    assert_eq!(m.node.version_command, ["node", "--version"]);
    let [build] = m.linked_builds.as_slice() else {
        panic!("one linked build: {:?}", m.linked_builds)
    };
    assert_eq!(build.platform, Platform::LinuxAmd64);
    assert!(m.smoke_checks.platform[&Platform::LinuxAmd64].contains(&build.check));
}

/// Values that smoke pastes into shell scripts, and the policy lists, are checked strictly.
#[test]
fn image_browser_and_linked_build_keys_are_strict() {
    for (from, to, expect) in [
        ("  home: /workspace", "  home: workspace", "`image.home`"),
        (
            "  install_dir: /opt/coding-agents",
            "  install_dir: /opt/coding agents",
            "`image.install_dir`",
        ),
        (
            "  install_dir: /opt/coding-agents",
            "  install_dir: /opt/../etc",
            "`image.install_dir`",
        ),
        (
            "    - PI_TELEMETRY=0",
            "    - PI_TELEMETRY",
            "not NAME=value",
        ),
        (
            "    - PI_TELEMETRY=0",
            "    - pi-telemetry=0",
            "not a variable name",
        ),
        (
            "    - PI_TELEMETRY=0",
            "    - HOME=/root",
            "HOME comes from",
        ),
        (
            "    - PI_TELEMETRY=0",
            "    - PI_SKIP_VERSION_CHECK=0",
            "twice",
        ),
        (
            "    - GIT_SSL_CAINFO",
            "    - PI_TELEMETRY",
            "both required (`image.env`) and forbidden",
        ),
        (
            "  user: sandbox-browser",
            "  user: Sandbox Browser",
            "`browser.user`",
        ),
        (
            "  user: sandbox-browser",
            "  user: \"x;y\"",
            "`browser.user`",
        ),
        (
            "    link: opencode-ai/bin/opencode.exe",
            "    link: /usr/bin/opencode",
            "`link`",
        ),
        (
            "    absent: opencode-linux-x64",
            "    absent: ../opencode-linux-x64",
            "`absent`",
        ),
        (
            "    target: opencode-linux-x64-baseline/bin/opencode",
            "    target: \"$(reboot)\"",
            "`target`",
        ),
        (
            "  - check: opencode x64 baseline build",
            "  - check: opencode baseline",
            "not required by `smoke_checks.platform.linux/amd64`",
        ),
        (
            "    platform: linux/amd64\n    link:",
            "    platform: linux/arm64\n    link:",
            "not required by `smoke_checks.platform.linux/arm64`",
        ),
        (
            "  version_command: [node, --version]",
            "  version_command: []",
            "node.version_command",
        ),
        ("\nbrowser:", "\nbrowzer:", "browzer"),
        (
            "    allows: [clone, unshare]",
            "    allow: [clone, unshare]",
            "allow",
        ),
        (
            "    allows: [clone, unshare]",
            "    allows: []",
            "`runtime.seccomp.allows` is empty",
        ),
        (
            "    allows: [clone, unshare]",
            "    allows: [clone, \"unshare;reboot\"]",
            "not a system call name",
        ),
        (
            "    profile: template/seccomp/shared-browser.json",
            "    profile: /etc/seccomp.json",
            "`runtime.seccomp.profile`",
        ),
        (
            "    base_sha256: f47d",
            "    base_sha256: F47d",
            "`runtime.seccomp.base_sha256`",
        ),
        ("\nruntime:", "\nruntimes:", "runtimes"),
    ] {
        let text = committed().replacen(from, to, 1);
        assert_ne!(text, committed(), "{from}");
        let msg = match Manifest::parse(&text, Path::new("m.yaml")) {
            Ok(_) => panic!("{from} -> {to}: accepted"),
            Err(err) => format!("{err:#}"),
        };
        assert!(msg.contains(expect), "{from} -> {to}: {msg}");
    }
}

/// An acknowledgment is held to its form: a command, plain relative paths, sha256 hex, a
/// package that is under `packages`.
#[test]
fn install_script_acknowledgments_are_strict() {
    let m = Manifest::parse(&committed(), Path::new(crate::paths::MANIFEST)).unwrap();
    let claude = &m.install_scripts_allowed["@anthropic-ai/claude-code"];
    assert_eq!(claude.postinstall.as_deref(), Some("node install.cjs"));
    assert_eq!(claude.files.len(), 1);
    for (from, to, expect) in [
        (
            "      install.cjs: 49e8",
            "      install.cjs: 49E8",
            "sha256",
        ),
        (
            "      install.cjs: 49e8",
            "      ../install.cjs: 49e8",
            "relative",
        ),
        (
            "    postinstall: node install.cjs\n",
            "",
            "names no preinstall",
        ),
        (
            "    postinstall: node install.cjs",
            "    postinstal: node install.cjs",
            "postinstal",
        ),
        ("  opencode-ai:\n", "  opencode:\n", "not under `packages`"),
    ] {
        let text = committed().replacen(from, to, 1);
        assert_ne!(text, committed(), "{from}");
        let msg = match Manifest::parse(&text, Path::new("m.yaml")) {
            Ok(_) => panic!("{from} -> {to}: accepted"),
            Err(err) => format!("{err:#}"),
        };
        assert!(msg.contains(expect), "{from} -> {to}: {msg}");
    }
}

#[test]
fn platform_names_round_trip() {
    for p in Platform::ALL {
        assert_eq!(p.to_string().parse::<Platform>().unwrap(), p);
    }
    assert!("linux/riscv64".parse::<Platform>().is_err());
}
