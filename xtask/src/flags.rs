//! Command-line interface: every subcommand and its flags, nothing else.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::manifest::Platform;

/// The npm registry used when `--registry` is not given.
pub const DEFAULT_NPM_REGISTRY: &str = "https://registry.npmjs.org/";

#[derive(Debug, Parser)]
#[command(
    name = "cargo xtask",
    bin_name = "cargo xtask",
    about = "Release toolchain of the coding-agent template",
    version
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Decide one exact version of every template package from the npm registry.
    Resolve(ResolveArgs),
    /// Write template/package.json, package-lock.json and the package inventory.
    Lock(LockArgs),
    /// Benchmarks of the tool against its reference implementations.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Make the local base image from Debian packages (no container registry needed).
    Base(BaseArgs),
    /// Build the template image for one platform through the Docker Engine API.
    Build(BuildArgs),
    /// Run every smoke check against a built image.
    Smoke(SmokeArgs),
    /// Decide whether a scheduled run is due (three-day cadence in UTC epoch days).
    Gate(GateArgs),
    /// Push tested images by digest and the multi-arch index under a unique release tag.
    Publish(PublishArgs),
    /// Write or verify release receipts.
    #[command(subcommand)]
    Receipt(ReceiptCommand),
    /// Pin the Sandbox0 template definition to a verified receipt's index digest.
    Pin(PinArgs),
    /// The whole release on this machine: gate, resolve, lock, base, build, smoke, publish, receipt.
    Release(ReleaseArgs),
}

/// Flags shared by every command that asks the npm registry.
#[derive(Debug, Clone, Args)]
pub struct RegistryArgs {
    /// npm registry that every request of this command goes to.
    #[arg(long, env = "XTASK_NPM_REGISTRY", default_value = DEFAULT_NPM_REGISTRY)]
    pub registry: String,
    /// Replace the clock (RFC 3339), e.g. to reproduce a past resolution.
    #[arg(long, value_name = "RFC3339")]
    pub now: Option<String>,
}

#[derive(Debug, Args)]
pub struct ResolveArgs {
    #[command(flatten)]
    pub registry: RegistryArgs,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct LockArgs {
    #[command(flatten)]
    pub registry: RegistryArgs,
    /// Regenerate in a temporary directory and fail with a diff when template/ drifted.
    /// Uses the committed cutoff unless --now is given.
    #[arg(long, conflicts_with = "dry_run")]
    pub check: bool,
    /// Generate and check everything, print what would change, write nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// The tool's resolve time next to `npm view <pkg> dist-tags time` once per package.
    Resolve(BenchResolveArgs),
}

#[derive(Debug, Args)]
pub struct BenchResolveArgs {
    #[command(flatten)]
    pub registry: RegistryArgs,
    /// How many times to run each side (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub runs: u32,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BaseArgs {
    #[arg(long, value_name = "linux/amd64|linux/arm64")]
    pub platform: Platform,
    /// Debian suite of the root filesystem.
    #[arg(long, default_value = "bookworm")]
    pub suite: String,
    /// Rebuild even when the image already exists.
    #[arg(long)]
    pub rebuild: bool,
    #[arg(long)]
    pub dry_run: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BuildArgs {
    #[arg(long, value_name = "linux/amd64|linux/arm64")]
    pub platform: Platform,
    /// Base image reference; defaults to the local base that `cargo xtask base` makes.
    #[arg(long, env = "XTASK_BASE_IMAGE")]
    pub base_image: Option<String>,
    /// Extra CA bundle (PEM) for builds behind a TLS-inspecting proxy. It is used by the
    /// download steps only and never lands in the final image.
    #[arg(long, env = "XTASK_EXTRA_CA_BUNDLE", value_name = "PEM")]
    pub ca_bundle: Option<PathBuf>,
    /// Print the build id and the reference it would build, build nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SmokeArgs {
    /// Image reference (tag or id) to test.
    #[arg(long)]
    pub image: String,
    /// Platform the image must report; defaults to the image's own.
    #[arg(long)]
    pub platform: Option<Platform>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct GateArgs {
    #[arg(long, value_name = "RFC3339")]
    pub now: Option<String>,
    /// Proceed whatever the day (manual runs); the answer records that it was forced.
    #[arg(long)]
    pub force: bool,
    /// The previous release's receipt: a run is due when it is older than the interval.
    #[arg(long, value_name = "FILE")]
    pub previous_receipt: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct PublishArgs {
    /// OCI registry host, e.g. 127.0.0.1:5000 or ghcr.io.
    #[arg(long, env = "XTASK_OCI_REGISTRY", default_value = "127.0.0.1:5000")]
    pub oci_registry: String,
    /// Repository within the registry.
    #[arg(
        long,
        env = "XTASK_OCI_REPOSITORY",
        default_value = "sandbox0/coding-agent"
    )]
    pub repository: String,
    /// The unique, immutable release tag.
    #[arg(long)]
    pub tag: String,
    /// A tested image per platform: `linux/amd64=REF`, one flag per platform.
    #[arg(long = "image", value_name = "PLATFORM=REF", required = true)]
    pub images: Vec<String>,
    #[arg(long)]
    pub dry_run: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum ReceiptCommand {
    /// Check a release receipt: schema version, own digest, completeness, artifact digests.
    Verify(ReceiptVerifyArgs),
}

#[derive(Debug, Args)]
pub struct ReceiptVerifyArgs {
    pub file: PathBuf,
    /// Directory holding the release's artifact files, checked against the receipt's digests.
    #[arg(long)]
    pub artifacts: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct PinArgs {
    #[arg(long)]
    pub receipt: PathBuf,
    /// The Sandbox0 template definition to rewrite.
    #[arg(long, default_value = "template/sandbox0-template.yaml")]
    pub template: PathBuf,
    /// Show the change, write nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ReleaseArgs {
    #[command(flatten)]
    pub registry: RegistryArgs,
    /// Proceed whatever the cadence says (manual runs).
    #[arg(long)]
    pub force: bool,
    /// Platforms to build; defaults to those this machine can run (native or emulated).
    #[arg(long = "platform")]
    pub platforms: Vec<Platform>,
    #[arg(long, env = "XTASK_OCI_REGISTRY", default_value = "127.0.0.1:5000")]
    pub oci_registry: String,
    #[arg(
        long,
        env = "XTASK_OCI_REPOSITORY",
        default_value = "sandbox0/coding-agent"
    )]
    pub repository: String,
    #[arg(long, env = "XTASK_EXTRA_CA_BUNDLE", value_name = "PEM")]
    pub ca_bundle: Option<PathBuf>,
    /// Print the plan and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[arg(long)]
    pub json: bool,
}
