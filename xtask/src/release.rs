//! Skeleton: filled in by its issue.

use std::process::ExitCode;

use crate::flags::ReleaseArgs;

pub async fn run(_args: ReleaseArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`cargo xtask release` is not built yet")
}
