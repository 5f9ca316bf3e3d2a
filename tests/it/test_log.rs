//! The suite's log (`scripts/test.sh` through `scripts/stamped.sh`) shows every failure's
//! cause whole, even after a program the tests started has left the log's pipe non-blocking.
//!
//! libtest prints each failed test's captured output once, at the end, in one burst. A run
//! once stopped mid-line there and never said why 13 of its 14 failures failed: Node.js sets
//! O_NONBLOCK on a stdout pipe it inherits (and keeps it set when killed), the flag is shared by
//! every writer of that pipe, and libtest's writes then fail with EAGAIN while the time-stamping
//! reader is behind. `stamped.sh` gives the command a regular file instead, which it follows.

use std::process::Command;

use crate::support::checkout_path;

/// How many lines the deliberate failure prints: far more than a pipe holds (64 KiB).
const LINES: usize = 20_000;
const MARKER: &str = "the deliberate failure's last words";

/// Not a check of the tool: the failing test whose output
/// [`a_failing_tests_output_reaches_the_log_whole`] sends through the suite's log.
#[test]
#[ignore = "fails on purpose; run by test_log::a_failing_tests_output_reaches_the_log_whole"]
fn deliberately_failing() {
    for n in 0..LINES {
        println!("captured line {n} {}", "x".repeat(60));
    }
    panic!("{MARKER}");
}

/// `bash -c SCRIPT`, with this test binary as `$0`: Node.js leaves the inherited stdout
/// non-blocking (killed before it could restore it), then the deliberate failure runs.
fn failing_run_after_node() -> Vec<String> {
    let script = r#"node -e 'process.stdout; process.kill(process.pid, "SIGKILL")'
exec "$0" --ignored --exact test_log::deliberately_failing --test-threads=1"#;
    let exe = std::env::current_exe().unwrap();
    vec![
        "bash".into(),
        "-c".into(),
        script.into(),
        exe.to_string_lossy().into_owned(),
    ]
}

/// How many of the deliberate failure's lines `log` shows, whether its panic message and
/// libtest's verdict are there.
fn judge(log: &str) -> (usize, bool, bool) {
    let mut seen = vec![false; LINES];
    for line in log.lines() {
        let number = line
            .split_once("captured line ")
            .and_then(|(_, rest)| rest.split_once(' '))
            .and_then(|(n, rest)| rest.starts_with('x').then_some(n))
            .and_then(|n| n.parse::<usize>().ok());
        if let Some(n) = number.filter(|n| *n < LINES) {
            seen[n] = true;
        }
    }
    let lines = seen.iter().filter(|s| **s).count();
    (
        lines,
        log.contains(MARKER),
        log.contains("test result: FAILED"),
    )
}

#[test]
fn a_failing_tests_output_reaches_the_log_whole() {
    let node = Command::new("node").arg("--version").output();
    assert!(
        node.is_ok_and(|o| o.status.success()),
        "this test needs Node.js on PATH, as the suite does (scripts/setup-host.sh installs it)"
    );
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("suite.log");

    // The suite's way.
    let out = Command::new("bash")
        .arg(checkout_path("scripts/stamped.sh"))
        .arg(&log)
        .args(failing_run_after_node())
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "the deliberate failure must fail the command, and stamped.sh pass its status on"
    );
    let shown = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        judge(&shown),
        (LINES, true, true),
        "the stamped log must hold every line of the failure, its message and the verdict; \
         its end:\n{}",
        crate::support::tail(&shown, 2000)
    );
    assert!(
        shown.lines().all(|l| l.as_bytes().get(8) == Some(&b' ')
            && l[..8].bytes().filter(|b| *b == b':').count() == 2),
        "every line is stamped HH:MM:SS"
    );
    assert_eq!(
        judge(&std::fs::read_to_string(&log).unwrap()),
        (LINES, true, true),
        "the log file holds it all too"
    );

    // The way the suite's log was read before: a pipe into the stamping loop. Node's flag makes
    // it lose the failure, which is what the check above guards against; if this ever stops
    // happening, the check above no longer proves anything and needs another hazard.
    let piped = Command::new("bash")
        .arg("-c")
        .arg(
            r#"set -o pipefail; "$@" 2>&1 | while IFS= read -r line; do printf '%(%H:%M:%S)T %s\n' -1 "$line"; done"#,
        )
        .arg("plain-pipe")
        .args(failing_run_after_node())
        .output()
        .unwrap();
    let (lines, marker, verdict) = judge(&String::from_utf8_lossy(&piped.stdout));
    assert!(
        lines < LINES || !marker || !verdict,
        "a plain pipe kept the whole failure after Node.js left it non-blocking ({lines} lines): \
         the hazard this test reproduces is gone, so the test proves nothing; find the new one"
    );
    eprintln!(
        "through a plain pipe: {lines} of {LINES} lines, message {marker}, verdict {verdict}"
    );
}
