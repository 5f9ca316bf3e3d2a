//! The scripts a person runs first, run for real with a stand-in for the command they wrap:
//! `scripts/compile.sh`, which `scripts/release.sh` and `scripts/test.sh` run before their
//! long command so that a first run shows what it compiles instead of compiling in silence.

use std::process::Command;

use crate::support::checkout_path;

/// `scripts/compile.sh "the demo" bash -c COMMAND`, with COMMAND standing in for cargo:
/// whether it succeeded, and what it printed (all of it on stderr, as cargo prints).
fn compile(command: &str) -> (bool, String, String) {
    let out = Command::new("bash")
        .arg(checkout_path("scripts/compile.sh"))
        .args(["the demo", "bash", "-c", command])
        .output()
        .expect("bash runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn compile_sh_shows_cargo_only_when_it_compiles_and_keeps_its_failure() {
    // Up to date: cargo's one line is swallowed.
    let fresh = "echo '    Finished `dev` profile [unoptimized] target(s) in 0.20s' >&2";
    assert_eq!(compile(fresh), (true, String::new(), String::new()));

    // Something to compile: what, cargo's own lines as they come, and how long it took.
    let (ok, stdout, stderr) = compile(
        "printf '   Compiling a v1.0.0\\n   Compiling b v2.0.0\\n    Finished `dev` profile \
         [unoptimized] target(s) in 1.00s\\n' >&2",
    );
    assert!(ok, "{stderr}");
    assert_eq!(stdout, "");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 5, "{stderr}");
    assert!(
        lines[0].starts_with("compile.sh: compiling the demo"),
        "{stderr}"
    );
    assert_eq!(
        lines[1..3],
        ["   Compiling a v1.0.0", "   Compiling b v2.0.0"]
    );
    assert!(lines[3].contains("Finished"), "{stderr}");
    assert!(
        lines[4].starts_with("compile.sh: compiled the demo in 0 min"),
        "{stderr}"
    );

    // A failure is shown, its status is the script's, and nothing claims it compiled.
    let (ok, _, stderr) =
        compile("printf '   Compiling a v1.0.0\\nerror: could not compile `a`\\n' >&2; exit 101");
    assert!(!ok);
    assert!(stderr.contains("error: could not compile `a`"), "{stderr}");
    assert!(!stderr.contains("compiled the demo"), "{stderr}");
}
