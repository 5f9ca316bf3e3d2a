//! Skeleton: filled in by its issue.

use std::process::ExitCode;

use crate::flags::PublishArgs;

pub async fn run(_args: PublishArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`cargo xtask publish` is not built yet")
}
