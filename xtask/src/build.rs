//! Skeleton: filled in by its issue.

use std::process::ExitCode;

use crate::flags::BuildArgs;

pub async fn run(_args: BuildArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`cargo xtask build` is not built yet")
}
