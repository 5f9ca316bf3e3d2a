//! `cargo xtask`: parses the command line and hands each subcommand to its module.

use std::process::ExitCode;

use clap::Parser;
use template_formats::manifest::MANIFEST_PATH;
use template_verify::receipt_policy::ReceiptPolicy;
use template_verify::settings::Environment;
use xtask::flags::{Cli, Command, ReceiptCommand};
use xtask::util::repo_root;

fn main() -> ExitCode {
    let cli = Cli::parse();
    xtask::run_command(async {
        // Test-only crash points (tests/it/kill_points.rs), read once here at the edge.
        xtask::kill_point::init_from_env()?;
        match cli.command {
            Command::Resolve(args) => xtask::npm::resolve::run(args).await,
            Command::Lock(args) => xtask::npm::lock::run(args).await,
            #[cfg(feature = "bench")]
            Command::Bench(command) => xtask::bench::run(command).await,
            #[cfg(not(feature = "bench"))]
            Command::Bench(_) => Err(anyhow::anyhow!(
                "the benchmarks are built only with the `bench` feature: run `cargo xtask-bench \
                 <name> ...` (the alias in .cargo/config.toml) instead of `cargo xtask bench`"
            )),
            Command::Base(args) => xtask::image::base::run(args).await,
            Command::Build(args) => xtask::image::build::run(args).await,
            Command::Smoke(args) => xtask::image::smoke::run(args).await,
            Command::Sbom(args) => xtask::image::sbom::run(args).await,
            Command::Gate(args) => xtask::release::gate::run(args),
            Command::Publish(args) => xtask::release::publish::run(args).await,
            Command::Receipt(ReceiptCommand::Verify(args)) => {
                let policy = checkout_policy(args.manifest.as_deref())?;
                // The verifier's environment snapshot, taken here at the edge.
                template_verify::receipt::verify_cmd(
                    args.into(),
                    &policy,
                    &Environment::from_process(),
                )
            }
            Command::Receipt(ReceiptCommand::Write(args)) => {
                xtask::release::receipt_write::write_cmd(*args)
            }
            Command::Pin(args) => {
                let policy = checkout_policy(args.manifest.as_deref())?;
                template_verify::pin::run(args.into(), &policy, &Environment::from_process())
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
