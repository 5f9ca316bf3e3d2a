//! The coding-agent template's release toolchain. `main.rs` dispatches; each folder below is
//! one sub-domain. See ARCHITECTURE.md for the map and the invariants between modules.

// Shared ground: the manifest (the only policy), the command line, bounded and strict reading,
// terminal escaping, the HTTP policy.
pub(crate) mod bounded_read;
pub(crate) mod disk;
pub mod flags;
pub(crate) mod http;
pub mod kill_point;
pub mod manifest;
pub(crate) mod strict_json;
pub mod terminal_text;
pub(crate) mod util;

pub mod image;
pub mod model;
pub mod npm;
pub(crate) mod oci;
pub mod release;

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
