//! Skeleton: filled in by its issue.

use std::process::ExitCode;

use crate::flags::PinArgs;

pub fn run(_args: PinArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`cargo xtask pin` is not built yet")
}
