//! template/install-plan.js, the program the Dockerfile's install-plan stage runs, run here with
//! the host's Node on the committed lock and on broken copies of it: no engine, no image build.
//! (The heavy `image::the_install_plan_refuses_a_lock_it_cannot_split` runs it in the real
//! builder stage.) Node is the one the lock step needs too (`apt-get install nodejs`).

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{json, Value};

use crate::support::{checkout_path, checkout_text, committed_checkout};

/// The arguments the Dockerfile passes to the install plan after its own path, read from the
/// Dockerfile's RUN step: the lock directory, the output directory, the groups.
fn dockerfile_arguments() -> Vec<String> {
    let dockerfile = checkout_text("Dockerfile");
    let joined = dockerfile.replace("\\\n", " ");
    let call = joined
        .split("node /tmp/install-plan.js ")
        .nth(1)
        .expect("the Dockerfile runs `node /tmp/install-plan.js ...`");
    let call = &call[..call.find(';').expect("the call ends with `;`")];
    call.split_whitespace().map(str::to_owned).collect()
}

/// The commands the image must provide, as the build passes them (AGENT_COMMANDS).
fn agent_commands() -> String {
    let layout = xtask::layout::Layout::at(committed_checkout());
    let inputs = xtask::image::build_inputs::BuildInputs::load(&layout).unwrap();
    let args = xtask::image::build_inputs::build_args(
        &inputs,
        template_formats::manifest::Platform::LinuxAmd64,
    )
    .unwrap();
    args["AGENT_COMMANDS"].clone()
}

/// `node template/install-plan.js LOCK_DIR OUT GROUPS...` with the Dockerfile's groups.
fn run_plan(lock_dir: &Path, out: &Path, agent_commands: &str) -> Output {
    let arguments = dockerfile_arguments();
    assert_eq!(arguments[..2], ["/tmp/lock", "/plan"], "{arguments:?}");
    Command::new("node")
        .arg(checkout_path("template/install-plan.js"))
        .arg(lock_dir)
        .arg(out)
        .args(&arguments[2..])
        .env("AGENT_COMMANDS", agent_commands)
        .output()
        .expect("cannot run `node`: these tests need Node.js on PATH (apt-get install nodejs)")
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// `value` as JSON.stringify(value, null, 2) writes it, with the final newline the plan adds.
fn stringified(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap() + "\n"
}

/// On the committed lock the plan writes one share per group: each group's files are the
/// template's, cut down to its roots and the entries they need (unchanged, in the lock's
/// order, written as npm writes them), and every entry npm would install is in exactly one.
#[test]
fn the_committed_lock_splits_into_one_share_per_group() {
    let template = committed_checkout().join("template");
    let out = tempfile::tempdir().unwrap();
    let run = run_plan(&template, out.path(), &agent_commands());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert_eq!(stderr, "");

    let package = read_json(&template.join("package.json"));
    let lock = read_json(&template.join("package-lock.json"));
    let entries = lock["packages"].as_object().unwrap();
    let arguments = dockerfile_arguments();
    let mut groups: Vec<(String, Vec<String>)> = arguments[2..]
        .iter()
        .map(|spec| {
            let (group, root) = spec.split_once('=').unwrap();
            (group.to_owned(), vec![root.to_owned()])
        })
        .collect();
    let named: Vec<String> = groups.iter().flat_map(|(_, r)| r.clone()).collect();
    let rest: Vec<String> = package["dependencies"]
        .as_object()
        .unwrap()
        .keys()
        .filter(|name| !named.contains(name))
        .cloned()
        .collect();
    groups.push(("rest".into(), rest));

    let mut expected_stdout = String::new();
    let mut owner: std::collections::BTreeMap<String, String> = Default::default();
    for (group, roots) in &groups {
        let dir = out.path().join(group);
        let written_lock = std::fs::read_to_string(dir.join("package-lock.json")).unwrap();
        let written_package = std::fs::read_to_string(dir.join("package.json")).unwrap();
        let share: Value = serde_json::from_str(&written_lock).unwrap();
        let paths: Vec<&String> = share["packages"]
            .as_object()
            .unwrap()
            .keys()
            .filter(|p| !p.is_empty())
            .collect();
        for path in &paths {
            if let Some(other) = owner.insert(path.to_string(), group.clone()) {
                panic!("{path} is in both {other} and {group}");
            }
        }
        let dependencies: serde_json::Map<String, Value> = roots
            .iter()
            .map(|r| (r.clone(), package["dependencies"][r].clone()))
            .collect();
        let mut expected_package = package.clone();
        expected_package["dependencies"] = Value::Object(dependencies.clone());
        let mut root_entry = entries[""].clone();
        root_entry["dependencies"] = Value::Object(dependencies);
        let mut packages = serde_json::Map::from_iter([(String::new(), root_entry)]);
        for (path, entry) in entries {
            if paths.contains(&path) {
                packages.insert(path.clone(), entry.clone());
            }
        }
        let mut expected_lock = lock.clone();
        expected_lock["packages"] = Value::Object(packages);
        assert_eq!(written_package, stringified(&expected_package), "{group}");
        assert_eq!(written_lock, stringified(&expected_lock), "{group}");
        expected_stdout.push_str(&format!(
            "build: install group {group}: {} ({} packages)\n",
            roots.join(" "),
            paths.len()
        ));
    }
    assert_eq!(String::from_utf8_lossy(&run.stdout), expected_stdout);
    let installed: Vec<&String> = entries
        .iter()
        .filter(|(path, entry)| !path.is_empty() && entry["dev"] != true)
        .map(|(path, _)| path)
        .collect();
    let owned: Vec<&String> = owner.keys().collect();
    let mut installed_sorted = installed.clone();
    installed_sorted.sort();
    assert_eq!(
        owned, installed_sorted,
        "every installed entry in one group"
    );
}

/// One broken input: what it is, the edit of the lock's `packages`, AGENT_COMMANDS, and the
/// message the plan must fail with.
type BrokenLock<'a> = (&'a str, &'a dyn Fn(&mut Value), &'a str, &'a str);

/// What cannot be split fails with one line naming the package, exit status 1, as the build
/// step did when the program was inline in the Dockerfile (the same messages, compared there).
#[test]
fn a_lock_that_cannot_be_split_fails_with_one_line_naming_the_package() {
    let template = committed_checkout().join("template");
    let package = std::fs::read(template.join("package.json")).unwrap();
    let lock = read_json(&template.join("package-lock.json"));
    let commands = agent_commands();
    let cases: [BrokenLock; 5] = [
        (
            "a dependency two groups need",
            &|p| p["node_modules/@openai/codex"]["dependencies"] = json!({"ws": "8.23.0"}),
            &commands,
            "node_modules/ws is needed by both codex and rest; one layer each cannot hold it",
        ),
        (
            "an entry nothing needs",
            &|p| p["node_modules/left-over"] = json!({"version": "1.0.0"}),
            &commands,
            "the lock has packages no dependency needs: node_modules/left-over",
        ),
        (
            "a bin of two groups",
            &|p| p["node_modules/ws"]["bin"] = json!({"codex": "bin/codex.js"}),
            &commands,
            "the bin codex of node_modules/ws and of node_modules/@openai/codex would land in two layers",
        ),
        (
            "a dependency the lock lacks",
            &|p| p["node_modules/@openai/codex"]["dependencies"] = json!({"no-such-dep": "1.0.0"}),
            &commands,
            "no-such-dep (needed by node_modules/@openai/codex) is not in the lock",
        ),
        (
            "a command no package provides",
            &|_| {},
            "codex no-such-command",
            "the command no-such-command is not a bin of any package in the lock",
        ),
    ];
    for (what, edit, commands, message) in cases {
        let dir = tempfile::tempdir().unwrap();
        let mut changed = lock.clone();
        edit(&mut changed["packages"]);
        std::fs::write(dir.path().join("package.json"), &package).unwrap();
        std::fs::write(dir.path().join("package-lock.json"), stringified(&changed)).unwrap();
        let run = run_plan(dir.path(), &dir.path().join("plan"), commands);
        assert_eq!(run.status.code(), Some(1), "{what}");
        assert_eq!(
            String::from_utf8_lossy(&run.stderr),
            format!("install plan: {message}\n"),
            "{what}"
        );
    }
}
