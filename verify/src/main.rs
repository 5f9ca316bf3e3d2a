//! `template-verify`: the consumer's verifier, released as a static binary per platform.
//! Parses its command line and hands each subcommand to the library.

use std::process::ExitCode;

use clap::Parser;
use template_verify::cli::{VerifierCli, VerifierCommand, VerifierReceiptCommand};
use template_verify::receipt_policy::ReceiptPolicy;

fn main() -> ExitCode {
    let cli = VerifierCli::parse();
    template_verify::run_command(async {
        match cli.command {
            VerifierCommand::Consume(args) => template_verify::consume::run(args.into()),
            // The policy is the release's own manifest, never a file of the machine that
            // built this binary.
            VerifierCommand::Receipt(VerifierReceiptCommand::Verify(args)) => {
                let policy = ReceiptPolicy::for_verifier(
                    args.manifest.as_deref(),
                    args.artifacts.as_deref(),
                )?;
                template_verify::receipt::verify_cmd(args.into(), &policy)
            }
            VerifierCommand::Pin(args) => {
                let policy = ReceiptPolicy::for_verifier(
                    args.manifest.as_deref(),
                    args.artifacts.as_deref(),
                )?;
                template_verify::pin::run(args.into(), &policy)
            }
        }
    })
}
