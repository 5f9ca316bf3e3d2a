//! Skeleton: filled in by its issue.

use std::process::ExitCode;

use crate::flags::ReceiptVerifyArgs;

pub fn verify_cmd(_args: ReceiptVerifyArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`cargo xtask receipt` is not built yet")
}
