//! `cargo xtask`: parses the command line and hands each subcommand to its module.

use std::process::ExitCode;

use clap::Parser;
use xtask::flags::{BenchCommand, Cli, Command, ReceiptCommand};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("cannot start the async runtime");
    let result = runtime.block_on(async {
        match cli.command {
            Command::Resolve(args) => xtask::resolve::run(args).await,
            Command::Lock(args) => xtask::lock::run(args).await,
            Command::Bench(BenchCommand::Resolve(args)) => xtask::bench::resolve(args).await,
            Command::Base(args) => xtask::base::run(args).await,
            Command::Build(args) => xtask::build::run(args).await,
            Command::Smoke(args) => xtask::smoke::run(args).await,
            Command::Gate(args) => xtask::gate::run(args),
            Command::Publish(args) => xtask::publish::run(args).await,
            Command::Receipt(ReceiptCommand::Verify(args)) => xtask::receipt::verify_cmd(args),
            Command::Receipt(ReceiptCommand::Write(args)) => xtask::receipt::write_cmd(args),
            Command::Pin(args) => xtask::pin::run(args),
            Command::Release(args) => xtask::release::run(args).await,
        }
    });
    match result {
        Ok(code) => code,
        Err(err) => {
            // Errors can quote a receipt or a registry's answer: printed escaped, line by line.
            let text = format!("{err:#}");
            let lines: Vec<String> = text.lines().map(xtask::terminal_text::escape).collect();
            eprintln!("error: {}", lines.join("\n"));
            ExitCode::FAILURE
        }
    }
}
