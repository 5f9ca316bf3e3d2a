//! `cargo xtask-bench <name>` (the `bench` feature): the measurements docs/benchmarks.md
//! quotes, each against a peer measured side by side in one run. Kept out of the release's
//! modules, and out of the default build: a release never needs them, and their loopback
//! servers (axum) are compiled only with the feature.
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

/// `cargo xtask-bench <name>`: one benchmark's request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BenchRequest {
    Resolve(resolve::BenchResolveRequest),
    Publish(publish::BenchPublishRequest),
    Update(update::BenchUpdateRequest),
    Rebuild(rebuild::BenchRebuildRequest),
    Reproduce(reproduce::BenchReproduceRequest),
}

/// Runs one benchmark.
pub async fn run(request: BenchRequest, ctx: &crate::Context) -> Result<ExitCode> {
    match request {
        BenchRequest::Resolve(request) => resolve::resolve(request, ctx).await,
        BenchRequest::Publish(request) => publish::run(request, ctx).await,
        BenchRequest::Update(request) => update::run(request, ctx).await,
        BenchRequest::Rebuild(request) => rebuild::run(request, ctx).await,
        BenchRequest::Reproduce(request) => reproduce::run(request, ctx).await,
    }
}
