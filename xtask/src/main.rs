//! `cargo xtask`: the edge. Reads the environment once (`Settings`), decides where the
//! repository is (`Layout`), parses the command line (`flags.rs`, the binary's own), turns
//! each subcommand's arguments into its module's request and hands it over with that
//! `Context`.

mod flags;

use std::process::ExitCode;

use clap::Parser;
use flags::{Cli, Command, DocsCommand, ReceiptCommand};
use template_verify::receipt::policy::ReceiptPolicy;
use xtask::settings::Settings;
use xtask::Context;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let ctx = Context::new(Settings::from_process());
    xtask::run_command(async {
        // Test-only crash points (tests/it/kill_points.rs), from the settings.
        xtask::kill_point::init(ctx.settings.kill_at.as_deref())?;
        let ctx = &ctx;
        match cli.command {
            Command::Resolve(args) => xtask::npm::resolve::run(args.into(), ctx).await,
            Command::Lock(args) => xtask::npm::lock::run(args.into(), ctx).await,
            #[cfg(feature = "bench")]
            Command::Bench(command) => xtask::bench::run(command.into(), ctx).await,
            #[cfg(not(feature = "bench"))]
            Command::Bench(_) => Err(anyhow::anyhow!(
                "the benchmarks are built only with the `bench` feature: run `cargo xtask-bench \
                 <name> ...` (the alias in .cargo/config.toml) instead of `cargo xtask bench`"
            )),
            Command::Base(args) => xtask::image::base::run(args.into(), ctx).await,
            Command::Build(args) => xtask::image::build::run(args.into(), ctx).await,
            Command::Smoke(args) => xtask::image::smoke::run(args.into(), ctx).await,
            Command::Sbom(args) => xtask::image::sbom::run(args.into(), ctx).await,
            Command::Gate(args) => xtask::release::gate::run(args.into(), ctx),
            Command::Publish(args) => xtask::release::publish::run(args.into(), ctx).await,
            Command::Receipt(ReceiptCommand::Verify(args)) => {
                let policy = checkout_policy(args.manifest.as_deref(), ctx)?;
                let attested = args.attestation_problems()?;
                template_verify::receipt::verify::verify_cmd(
                    args.into(),
                    &policy,
                    &ctx.settings.verifier,
                    attested,
                )
            }
            Command::Receipt(ReceiptCommand::Write(args)) => {
                xtask::release::receipt_write::write_cmd((*args).into(), ctx)
            }
            Command::Pin(args) => {
                let policy = checkout_policy(args.manifest.as_deref(), ctx)?;
                template_verify::pin::run(args.into(), &policy, &ctx.settings.verifier)
            }
            Command::Status(args) => {
                template_verify::status::run(args.into(), &ctx.settings.verifier)
            }
            Command::Release(args) => xtask::release::run((*args).into(), ctx).await,
            Command::Docs(DocsCommand::Cli(args)) => flags::cli_reference::run(&args, ctx),
        }
    })
}

/// The maintainer judges receipts by the checkout's manifest, unless `--manifest` names a
/// release's own.
fn checkout_policy(
    manifest: Option<&std::path::Path>,
    ctx: &Context,
) -> anyhow::Result<ReceiptPolicy> {
    ReceiptPolicy::for_maintainer(manifest, &ctx.layout.manifest())
}
