//! `template-verify`: the consumer's verifier, released as a static binary per platform.
//! Parses its command line and hands each subcommand to the library, like `main.rs`.

use std::process::ExitCode;

use clap::Parser;
use xtask::flags::{VerifierCli, VerifierCommand, VerifierReceiptCommand};
use xtask::release::receipt_policy::ReceiptPolicy;

fn main() -> ExitCode {
    let cli = VerifierCli::parse();
    xtask::run_command(async {
        match cli.command {
            VerifierCommand::Consume(args) => xtask::release::consume::run(args),
            // The policy is the release's own manifest, never a file of the machine that
            // built this binary.
            VerifierCommand::Receipt(VerifierReceiptCommand::Verify(args)) => {
                let policy = ReceiptPolicy::for_verifier(
                    args.manifest.as_deref(),
                    args.artifacts.as_deref(),
                )?;
                xtask::release::receipt::verify_cmd(args, &policy)
            }
            VerifierCommand::Pin(args) => {
                let policy = ReceiptPolicy::for_verifier(
                    args.manifest.as_deref(),
                    args.artifacts.as_deref(),
                )?;
                xtask::release::pin::run(args, &policy)
            }
        }
    })
}
