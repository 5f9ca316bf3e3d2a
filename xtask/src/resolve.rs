//! Skeleton: filled in by its issue.

use std::process::ExitCode;

use crate::flags::ResolveArgs;

pub async fn run(_args: ResolveArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`cargo xtask resolve` is not built yet")
}
