//! `template-verify`: the consumer's verifier, released as a static binary per platform.
//! Parses its command line and hands each subcommand to the library.

use std::process::ExitCode;

use clap::Parser;
use template_verify::cli::{
    VerifierAttestationCommand, VerifierCli, VerifierCommand, VerifierReceiptCommand,
};
use template_verify::receipt::policy::ReceiptPolicy;
use template_verify::settings::Environment;

fn main() -> ExitCode {
    let cli = VerifierCli::parse();
    // The one read of the process environment; everything below is passed what it needs.
    let env = Environment::from_process();
    template_verify::run_command(async {
        match cli.command {
            VerifierCommand::Consume(args) => template_verify::consume::run(args.into(), &env),
            // The policy is the release's own manifest, never a file of the machine that
            // built this binary.
            VerifierCommand::Receipt(VerifierReceiptCommand::Verify(args)) => {
                let policy = ReceiptPolicy::for_verifier(
                    args.manifest.as_deref(),
                    args.artifacts.as_deref(),
                )?;
                template_verify::receipt::verify::verify_cmd(args.into(), &policy, &env)
            }
            VerifierCommand::Status(args) => template_verify::status::run(args.into(), &env),
            // Offline: the files named are all it reads.
            VerifierCommand::Attestation(VerifierAttestationCommand::Verify(args)) => {
                template_verify::attestation::verify::run(args.into())
            }
            VerifierCommand::Pin(args) => {
                let policy = ReceiptPolicy::for_verifier(
                    args.manifest.as_deref(),
                    args.artifacts.as_deref(),
                )?;
                template_verify::pin::run(args.into(), &policy, &env)
            }
        }
    })
}
