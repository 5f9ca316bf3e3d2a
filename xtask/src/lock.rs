//! Skeleton: filled in by its issue.

use std::process::ExitCode;

use crate::flags::LockArgs;

pub async fn run(_args: LockArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`cargo xtask lock` is not built yet")
}
