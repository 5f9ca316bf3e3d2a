//! Skeleton: filled in by its issue.

use std::process::ExitCode;

use crate::flags::BenchResolveArgs;

pub async fn resolve(_args: BenchResolveArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`cargo xtask bench` is not built yet")
}
