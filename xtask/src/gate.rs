//! Skeleton: filled in by its issue.

use std::process::ExitCode;

use crate::flags::GateArgs;

pub fn run(_args: GateArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`cargo xtask gate` is not built yet")
}
