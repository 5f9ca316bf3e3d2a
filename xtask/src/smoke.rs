//! Skeleton: filled in by its issue.

use std::process::ExitCode;

use crate::flags::SmokeArgs;

pub async fn run(_args: SmokeArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`cargo xtask smoke` is not built yet")
}
