//! `template-verify`: the consumer's verifier, released as a static binary per platform.
//! Parses its command line and hands each subcommand to the library, like `main.rs`.

use std::process::ExitCode;

use clap::Parser;
use xtask::flags::{VerifierCli, VerifierCommand, VerifierReceiptCommand};

fn main() -> ExitCode {
    let cli = VerifierCli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("cannot start the async runtime");
    let result = runtime.block_on(async {
        match cli.command {
            VerifierCommand::Consume(args) => xtask::release::consume::run(args),
            VerifierCommand::Receipt(VerifierReceiptCommand::Verify(args)) => {
                xtask::release::receipt::verify_cmd(args)
            }
            VerifierCommand::Pin(args) => xtask::release::pin::run(args),
        }
    });
    match result {
        Ok(code) => code,
        Err(err) => {
            // Errors can quote a receipt, a registry's or GitHub's answer: printed escaped.
            let text = format!("{err:#}");
            let lines: Vec<String> = text.lines().map(xtask::terminal_text::escape).collect();
            eprintln!("error: {}", lines.join("\n"));
            ExitCode::FAILURE
        }
    }
}
