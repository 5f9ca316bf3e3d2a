//! The consumer's verifier of coding-agent template releases: a receipt judged offline and
//! against its registry (`receipt`), the template definition pinned to a verified release
//! (`pin`), and a release taken from GitHub with its attestations (`consume`). The
//! `template-verify` binary (`main.rs`) is this crate's command line; the maintainer's xtask
//! uses the same library for `cargo xtask receipt verify` and `cargo xtask pin`, and its
//! registry client (`oci`) for `publish`.
//!
//! What a receipt is judged by is passed in ([`receipt_policy::ReceiptPolicy`]): the
//! release's own manifest for a consumer, never a file of the machine that built this binary.

pub mod cli;
pub mod consume;
pub mod fs;
pub mod http;
pub mod oci;
pub mod pin;
pub mod receipt;
pub mod receipt_policy;
pub mod terminal_text;
pub mod verifier;

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
