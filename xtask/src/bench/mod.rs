//! `cargo xtask-bench <name>` (the `bench` feature): the measurements the README quotes, each
//! against a peer measured side by side in one run. Kept out of the release's modules, and out
//! of the default build: a release never needs them, and their loopback servers (axum) are
//! compiled only with the feature.
//!
//! - [`resolve`]: the resolver next to `npm view`, on a loopback snapshot of the registry.
//! - [`publish`]: `publish` next to `docker push`, each into a fresh registry.
//! - [`update`]: what publishing with `--previous` adds to a registry, next to `docker push`.
//! - [`reproduce`]: two cold builds in one run, compared digest by digest.
//! - [`rebuild`]: a cold build next to a rebuild after one package's version changed
//!   ([`bump`]: the lock with that one package at another version).

pub mod bump;
pub mod publish;
pub mod rebuild;
pub mod reproduce;
pub mod resolve;
pub mod update;

use std::process::ExitCode;

use anyhow::Result;

use crate::flags::BenchCommand;

/// Runs one benchmark.
pub async fn run(command: BenchCommand, ctx: &crate::Context) -> Result<ExitCode> {
    match command {
        BenchCommand::Resolve(args) => resolve::resolve(args, ctx).await,
        BenchCommand::Publish(args) => publish::run(args, ctx).await,
        BenchCommand::Update(args) => update::run(args, ctx).await,
        BenchCommand::Rebuild(args) => rebuild::run(args, ctx).await,
        BenchCommand::Reproduce(args) => reproduce::run(args, ctx).await,
    }
}
