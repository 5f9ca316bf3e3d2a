//! The consumer's verifier of coding-agent template releases: a receipt judged offline and
//! against its registry (`receipt`), the template definition pinned to a verified release
//! (`pin`), and a release taken from GitHub with its attestations (`consume`). The
//! `template-verify` binary (`main.rs`) is this crate's command line; the maintainer's xtask
//! uses the same library for `cargo xtask receipt verify` and `cargo xtask pin`, and its
//! registry client (`oci`) for `publish`.
//!
//! What a receipt is judged by is passed in ([`receipt::policy::ReceiptPolicy`]): the
//! release's own manifest for a consumer, never a file of the machine that built this binary.

pub mod attestation;
pub mod cli;
pub mod consume;
pub mod fs;
pub mod http;
pub mod notes;
pub mod oci;
pub mod pin;
pub mod receipt;
pub mod settings;
pub mod sigstore;
pub mod status;
pub mod terminal_text;
pub mod verifier;

#[cfg(test)]
mod fuzz;

/// Runs one command on a multi-threaded runtime and turns its result into the exit status,
/// for both binaries (`xtask`, `template-verify`). Errors can quote a receipt or a registry's
/// or GitHub's answer, so they are printed escaped, line by line.
pub fn run_command(
    command: impl std::future::Future<Output = anyhow::Result<std::process::ExitCode>>,
) -> std::process::ExitCode {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("cannot start the async runtime");
    match runtime.block_on(command) {
        Ok(code) => code,
        Err(err) => {
            let text = format!("{err:#}");
            let lines: Vec<String> = text.lines().map(terminal_text::escape).collect();
            eprintln!("error: {}", lines.join("\n"));
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    /// What a verifier has no use for: a Docker client, an HTTP server, layer compression and
    /// tar, a text diff, the license-text classifier (the `spdx` crate's `detection`).
    const NOT_IN_THE_VERIFIER: [&str; 9] = [
        "bollard ",
        "axum ",
        "tar ",
        "flate2 ",
        "zlib-rs ",
        "libdeflate-sys ",
        "similar ",
        "spdx feature \"detection\"",
        "spdx feature \"text\"",
    ];

    /// The lines of `cargo tree` (`name vX` and `name feature "f"`) that name what the
    /// verifier must not build.
    fn forbidden(tree: &str) -> Vec<&str> {
        let mut found: Vec<&str> = tree
            .lines()
            .filter(|line| NOT_IN_THE_VERIFIER.iter().any(|bad| line.starts_with(bad)))
            .collect();
        found.sort();
        found.dedup();
        found
    }

    #[test]
    fn the_verifier_depends_on_no_engine_server_or_compressor() {
        // Cargo's own answer for this package's normal dependencies and their features, as
        // `cargo build -p template-verify` (scripts/build-verifiers.sh) resolves them.
        let out = std::process::Command::new(env!("CARGO"))
            .args(["tree", "-p", "template-verify", "-e", "normal,features"])
            .args(["--prefix", "none", "--locked"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("cargo runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let tree = String::from_utf8(out.stdout).unwrap();
        assert!(
            tree.contains("reqwest v"),
            "the tree is the verifier's: {tree}"
        );
        assert_eq!(forbidden(&tree), Vec::<&str>::new());
    }

    #[test]
    fn a_tree_with_a_compressor_or_the_classifier_is_refused() {
        let tree = "reqwest v0.13.5\nflate2 v1.1.11\nspdx v0.13.6\nspdx feature \"detection\"\n";
        assert_eq!(
            forbidden(tree),
            ["flate2 v1.1.11", "spdx feature \"detection\""]
        );
        assert!(forbidden("reqwest v0.13.5\nspdx feature \"default\"\n").is_empty());
    }
}
