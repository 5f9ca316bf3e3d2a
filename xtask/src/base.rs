//! Skeleton: filled in by its issue.

use std::process::ExitCode;

use crate::flags::BaseArgs;

pub async fn run(_args: BaseArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`cargo xtask base` is not built yet")
}
