//! The engine stands alone: it depends on no crate of this workspace, so `cargo test -p
//! actions-replay` compiles this crate and its few dependencies, never the xtask (ARCHITECTURE.md,
//! "Dependencies").

use std::process::Command;

/// The packages of `tree` (`cargo tree --prefix none --format {p}` lines: `name vX.Y.Z (path)`)
/// that are members of the workspace, other than `this` one.
fn workspace_members_in(tree: &str, members: &[String], this: &str) -> Vec<String> {
    let mut found: Vec<String> = tree
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != this && members.iter().any(|m| m == name))
        .map(str::to_owned)
        .collect();
    found.sort();
    found.dedup();
    found
}

fn cargo(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO"))
        .args(args)
        .arg("--locked")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_engine_depends_on_no_crate_of_this_workspace() {
    let metadata: serde_json::Value =
        serde_json::from_str(&cargo(&["metadata", "--no-deps", "--format-version", "1"])).unwrap();
    let members: Vec<String> = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        members.iter().any(|m| m == "xtask"),
        "the workspace's members: {members:?}"
    );
    // Every kind of edge: what `cargo test -p actions-replay` compiles.
    let tree = cargo(&[
        "tree",
        "-p",
        env!("CARGO_PKG_NAME"),
        "-e",
        "normal,build,dev",
        "--prefix",
        "none",
        "--format",
        "{p}",
    ]);
    assert!(
        tree.contains("serde_json v"),
        "the tree is the engine's: {tree}"
    );
    assert_eq!(
        workspace_members_in(&tree, &members, env!("CARGO_PKG_NAME")),
        Vec::<String>::new(),
        "the replay engine must build without the workspace's other crates"
    );
}

#[test]
fn a_tree_that_reaches_another_member_is_refused() {
    let members = ["xtask", "template-formats", "actions-replay"].map(String::from);
    let tree = "actions-replay v0.1.0 (/r/replay)\nserde_json v1.0.0\n\
                template-formats v0.1.0 (/r/formats)\nserde_json v1.0.0\n";
    assert_eq!(
        workspace_members_in(tree, &members, "actions-replay"),
        ["template-formats"]
    );
    assert!(workspace_members_in(
        "actions-replay v0.1.0\nanyhow v1.0.0\n",
        &members,
        "actions-replay"
    )
    .is_empty());
}
