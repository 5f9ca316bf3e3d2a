//! `template-verify`: the consumer's verifier, released as a static binary per platform.
//! Parses its command line and hands each subcommand to the library, like `main.rs`.

use std::process::ExitCode;

use clap::Parser;
use xtask::flags::{VerifierCli, VerifierCommand, VerifierReceiptCommand};

fn main() -> ExitCode {
    let cli = VerifierCli::parse();
    xtask::run_command(async {
        match cli.command {
            VerifierCommand::Consume(args) => xtask::release::consume::run(args),
            VerifierCommand::Receipt(VerifierReceiptCommand::Verify(args)) => {
                xtask::release::receipt::verify_cmd(args)
            }
            VerifierCommand::Pin(args) => xtask::release::pin::run(args),
        }
    })
}
