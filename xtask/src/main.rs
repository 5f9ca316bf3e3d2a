//! `cargo xtask`: parses the command line and hands each subcommand to its module.

use std::process::ExitCode;

use clap::Parser;
use xtask::flags::{BenchCommand, Cli, Command, ReceiptCommand};
use xtask::manifest::{repo_root, MANIFEST_PATH};
use xtask::release::receipt_policy::ReceiptPolicy;

fn main() -> ExitCode {
    let cli = Cli::parse();
    xtask::run_command(async {
        // Test-only crash points (tests/it/kill_points.rs), read once here at the edge.
        xtask::kill_point::init_from_env()?;
        match cli.command {
            Command::Resolve(args) => xtask::npm::resolve::run(args).await,
            Command::Lock(args) => xtask::npm::lock::run(args).await,
            Command::Bench(BenchCommand::Resolve(args)) => xtask::npm::bench::resolve(args).await,
            Command::Bench(BenchCommand::Update(args)) => {
                xtask::release::bench_update::run(args).await
            }
            Command::Bench(BenchCommand::Rebuild(args)) => {
                xtask::release::bench_rebuild::run(args).await
            }
            Command::Bench(BenchCommand::Reproduce(args)) => {
                xtask::release::bench_reproduce::run(args).await
            }
            Command::Bench(BenchCommand::Publish(args)) => {
                xtask::release::bench_publish::run(args).await
            }
            Command::Base(args) => xtask::image::base::run(args).await,
            Command::Build(args) => xtask::image::build::run(args).await,
            Command::Smoke(args) => xtask::image::smoke::run(args).await,
            Command::Sbom(args) => xtask::image::sbom::run(args).await,
            Command::Gate(args) => xtask::release::gate::run(args),
            Command::Publish(args) => xtask::release::publish::run(args).await,
            Command::Receipt(ReceiptCommand::Verify(args)) => {
                let policy = checkout_policy(args.manifest.as_deref())?;
                xtask::release::receipt::verify_cmd(args, &policy)
            }
            Command::Receipt(ReceiptCommand::Write(args)) => {
                xtask::release::receipt::write_cmd(*args)
            }
            Command::Pin(args) => {
                let policy = checkout_policy(args.manifest.as_deref())?;
                xtask::release::pin::run(args, &policy)
            }
            Command::Release(args) => xtask::release::run(*args).await,
        }
    })
}

/// The maintainer judges receipts by the checkout's manifest, unless `--manifest` names a
/// release's own.
fn checkout_policy(manifest: Option<&std::path::Path>) -> anyhow::Result<ReceiptPolicy> {
    ReceiptPolicy::for_maintainer(manifest, &repo_root().join(MANIFEST_PATH))
}
