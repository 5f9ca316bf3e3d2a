//! Command-line interface: every subcommand and its flags (clap derive), and their
//! conversion into the requests the library's modules run. Only the binary has it: no module
//! of the library knows clap or these types (`architecture.rs` keeps it so).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use template_formats::manifest::Platform;
// The verifier's commands the xtask offers too, with the verifier's own arguments.
pub use template_verify::cli::{PinArgs, ReceiptVerifyArgs, StatusArgs};

use xtask::npm::resolve::DEFAULT_NPM_REGISTRY;

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
    /// Write the SPDX 2.3 SBOM of a built image (dpkg database, npm lockfile, Node, base),
    /// and with --cyclonedx the same as CycloneDX 1.5.
    Sbom(SbomArgs),
    /// Decide whether a scheduled run is due (three-day cadence in UTC epoch days).
    Gate(GateArgs),
    /// Push tested images by digest and the multi-arch index under a unique release tag.
    Publish(PublishArgs),
    /// Write or verify release receipts.
    #[command(subcommand)]
    Receipt(ReceiptCommand),
    /// Pin the Sandbox0 template definition to a verified receipt's index digest.
    Pin(PinArgs),
    /// How fresh a template definition's pin is (as `template-verify status`).
    Status(StatusArgs),
    /// The whole release on this machine: gate, resolve, lock, base, build, smoke, publish, receipt.
    Release(Box<ReleaseArgs>),
    /// Documentation generated from the code.
    #[command(subcommand)]
    Docs(DocsCommand),
}

#[derive(Debug, Subcommand)]
pub enum DocsCommand {
    /// Write docs/cli.md: every subcommand's --help of `cargo xtask` and `template-verify`, as
    /// clap renders it.
    Cli(DocsCliArgs),
}

#[derive(Debug, Args)]
pub struct DocsCliArgs {
    /// Write nothing; fail with a diff when docs/cli.md is not what the command lines render.
    #[arg(long)]
    pub check: bool,
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
    /// The keys the registry's signatures are judged by, in npm's `/-/npm/v1/keys` form,
    /// instead of npm's own (shipped in the pinned npm): a private registry that signs with
    /// its own key.
    #[arg(long, value_name = "FILE")]
    pub trusted_keys: Option<PathBuf>,
    /// Refuse a registry that serves no signatures (registry.npmjs.org signs every version)
    /// instead of reporting the inputs `unverified`.
    #[arg(long)]
    pub require_signed_inputs: bool,
    /// The Sigstore trusted root (`trusted_root.json` form) npm provenance is verified
    /// against, instead of the public-good root in the pinned npm's seeds.
    #[arg(long, value_name = "FILE")]
    pub trusted_root: Option<PathBuf>,
}

/// Where images and the release index are published.
#[derive(Debug, Clone, Args)]
pub struct OciTargetArgs {
    /// OCI registry: `host[:port]` (https; http for loopback) or an http(s):// URL.
    #[arg(long, env = "XTASK_OCI_REGISTRY", default_value = "127.0.0.1:5000")]
    pub oci_registry: String,
    /// Repository within the registry.
    #[arg(
        long,
        env = "XTASK_OCI_REPOSITORY",
        default_value = "sandbox0/coding-agent"
    )]
    pub repository: String,
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
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// The tool's resolve time next to `npm view <pkg> dist-tags time` once per package.
    Resolve(BenchResolveArgs),
    /// `publish` of a local image next to `docker push` of it, each into a fresh empty
    /// registry, in one run.
    Publish(BenchPublishArgs),
    /// Two cold builds of the same inputs (base remade, no build cache) in one run, compared
    /// digest by digest, next to the engine's own images of the same builds.
    Reproduce(BenchReproduceArgs),
    /// What publishing an image adds to a registry that holds the previous release's image,
    /// against the largest layer that is new in it.
    Update(BenchUpdateArgs),
    /// A cold build of the template (no build cache) next to a rebuild after one package's
    /// version changed, in one run.
    Rebuild(BenchRebuildArgs),
}

#[derive(Debug, Args)]
pub struct BenchRebuildArgs {
    #[command(flatten)]
    pub registry: RegistryArgs,
    /// The package and the version it changes to, as in a release with one CLI bump, e.g.
    /// `@anthropic-ai/claude-code@2.1.331`. Pick a version this engine never built.
    #[arg(long, value_name = "NAME@VERSION")]
    pub bump: String,
    /// The platform to build.
    #[arg(
        long,
        value_name = "linux/amd64|linux/arm64",
        default_value = "linux/amd64"
    )]
    pub platform: Platform,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BenchUpdateArgs {
    /// The previous release's image (a local image in the engine).
    #[arg(long)]
    pub previous: String,
    /// The new release's image, same platform.
    #[arg(long)]
    pub image: String,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BenchReproduceArgs {
    /// The platform to build.
    #[arg(long, value_name = "linux/amd64|linux/arm64")]
    pub platform: Platform,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BenchPublishArgs {
    /// A local image in the engine (e.g. the template image `release build` made).
    #[arg(long)]
    pub image: String,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BenchResolveArgs {
    #[command(flatten)]
    pub registry: RegistryArgs,
    /// How many times to run each side (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub runs: u32,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BaseArgs {
    /// The platform of the base image.
    #[arg(long, value_name = "linux/amd64|linux/arm64")]
    pub platform: Platform,
    /// Debian suite of the root filesystem.
    #[arg(long, default_value = xtask::image::base::DEFAULT_SUITE)]
    pub suite: String,
    /// Rebuild even when the image already exists.
    #[arg(long)]
    pub rebuild: bool,
    /// Print what would be made, make nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BuildArgs {
    /// The platform to build.
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
    /// Rebuild every layer (no build cache), even when the image exists: for cold-build
    /// measurements and for suspected cache corruption.
    #[arg(long)]
    pub no_cache: bool,
    /// Print the result as JSON on stdout.
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
    /// The extra CA bundle the build may have used; its certificates that Debian does not
    /// ship must appear in no layer. Defaults as for `build`.
    #[arg(long, env = "XTASK_EXTRA_CA_BUNDLE", value_name = "PEM")]
    pub ca_bundle: Option<PathBuf>,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Reads the image without starting it; the same image, lockfile and `--now` give the same
/// bytes.
#[derive(Debug, Args)]
pub struct SbomArgs {
    /// Image reference (tag or id) in the local Docker engine.
    #[arg(long)]
    pub image: String,
    /// The platform the image must report.
    #[arg(long, value_name = "linux/amd64|linux/arm64")]
    pub platform: Platform,
    /// Where to write the SBOM, e.g. sbom-linux-amd64.spdx.json.
    #[arg(long, value_name = "FILE")]
    pub output: PathBuf,
    /// Where to write the same SBOM as CycloneDX 1.5 JSON too, e.g. sbom-linux-amd64.cdx.json.
    #[arg(long, value_name = "FILE")]
    pub cyclonedx: Option<PathBuf>,
    /// The document's creation time (RFC 3339); defaults to the image's creation time, so
    /// the wall clock never enters the file.
    #[arg(long, value_name = "RFC3339")]
    pub now: Option<String>,
    /// The image's manifest digest in the registry (the push's), so the SBOM names the image
    /// as consumers pull it (a `pkg:oci` purl); with --repository and --release-tag.
    #[arg(long, value_name = "sha256:HEX", requires_all = ["repository", "release_tag"])]
    pub manifest_digest: Option<String>,
    /// Where the image was published, `host/path` (with --manifest-digest).
    #[arg(long, value_name = "HOST/PATH", requires = "manifest_digest")]
    pub repository: Option<String>,
    /// The release tag (with --manifest-digest).
    #[arg(long, value_name = "TAG", requires = "manifest_digest")]
    pub release_tag: Option<String>,
    /// Print `{"output", "sha256", "size", "image", "image_id", "platform",
    /// "debian_packages", "npm_packages", "packages", "coverage"}`; `coverage` counts
    /// licenses, sources, suppliers, bundled packages and relationships.
    #[arg(long)]
    pub json: bool,
}

/// Exit status is 0 whether or not the run is due; read the answer from `--json` or from
/// `due=true|false` appended to `$GITHUB_OUTPUT` (with `forced`, `catch_up`, `trigger`,
/// `epoch_day`, `next_due`).
#[derive(Debug, Args)]
pub struct GateArgs {
    /// Replace the clock (RFC 3339), e.g. 2026-11-30T06:17:00Z.
    #[arg(long, value_name = "RFC3339")]
    pub now: Option<String>,
    /// Proceed whatever the day (manual runs); the answer records that it was forced.
    #[arg(long)]
    pub force: bool,
    /// A previous release's receipt, once per file: the newest one that verifies is the
    /// previous release, and a run is due (catch-up) when at least the cadence interval of
    /// UTC epoch days has passed since its `created_at`. Receipts that do not verify are
    /// reported and ignored.
    #[arg(long, value_name = "FILE")]
    pub previous_receipt: Vec<PathBuf>,
    /// Print `{"due", "epoch_day", "next_due", "forced", "reason", "trigger", "catch_up", ...}`.
    #[arg(long)]
    pub json: bool,
}

/// Pushes local images by digest (no tag per platform) and, with `--tag`, the multi-arch OCI
/// index under that immutable tag. Split across runners: `publish --image P=REF --json >
/// P.json` on each, then `publish --pushed amd64.json --pushed arm64.json --tag T --json`.
/// Credentials: XTASK_OCI_USERNAME/XTASK_OCI_PASSWORD (or XTASK_REGISTRY_USERNAME/
/// XTASK_REGISTRY_PASSWORD), else the docker config ($DOCKER_CONFIG or ~/.docker/config.json):
/// `credHelpers`, `auths`, `credsStore` (helpers are run), else anonymous.
#[derive(Debug, Args)]
pub struct PublishArgs {
    #[command(flatten)]
    pub target: OciTargetArgs,
    /// The unique, immutable release tag of the index. Without it, only the platform images
    /// are pushed (by digest). An existing tag with other content is an error; with the same
    /// content, a no-op.
    #[arg(long)]
    pub tag: Option<String>,
    /// A tested local image: `linux/amd64=REF`, one flag per platform.
    #[arg(long = "image", value_name = "PLATFORM=REF")]
    pub images: Vec<String>,
    /// The `--json` output of an earlier `publish --image ...` (another runner's platform);
    /// its manifest must already be in the registry.
    #[arg(long, value_name = "FILE")]
    pub pushed: Vec<PathBuf>,
    /// Allow an index that lacks some of the manifest's platforms (its receipt is incomplete).
    #[arg(long)]
    pub partial: bool,
    /// With --tag: push the index by digest and check that the tag is free (or already this
    /// index), but do not write the tag. `release ship` writes it after the receipt verified.
    #[arg(long, requires = "tag")]
    pub defer_tag: bool,
    /// The previous release, `host/repository@digest` of its index (or of one platform's
    /// manifest), in the same registry: its layers that this tool compressed are checked
    /// with a HEAD (or mounted from its repository) and neither compressed nor uploaded.
    /// The digests published are the same with or without it.
    #[arg(long, value_name = "REPOSITORY@DIGEST")]
    pub previous: Option<String>,
    /// Export and digest everything, read the registry, write nothing to it.
    #[arg(long)]
    pub dry_run: bool,
    /// Print `{"registry", "repository", "dry_run", "platforms": [{"platform", "image",
    /// "image_id", "digest", "config_digest", "size", ...}], "index": {"tag", "digest",
    /// "reference", "noop", ...} | null}`.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum ReceiptCommand {
    /// Check a release receipt: schema version, own digest, completeness, artifact digests.
    Verify(ReceiptVerifyArgs),
    /// Assemble a receipt from the JSON outputs of gate, resolve, build, smoke and publish.
    Write(Box<ReceiptWriteArgs>),
}

/// Writes `receipt-<tag>-<sha256>.json` atomically; the template files are read from the
/// repository (or XTASK_ROOT). Exits non-zero when the receipt is incomplete (it is still
/// written, for the record).
#[derive(Debug, Args)]
pub struct ReceiptWriteArgs {
    /// `cargo xtask gate --json` output.
    #[arg(long, value_name = "FILE")]
    pub gate: PathBuf,
    /// `cargo xtask resolve --json` output.
    #[arg(long, value_name = "FILE")]
    pub resolve: PathBuf,
    /// `cargo xtask build --platform P --json` output, one per platform.
    #[arg(long = "build", value_name = "FILE")]
    pub builds: Vec<PathBuf>,
    /// `cargo xtask smoke --image REF --json` output, one per platform.
    #[arg(long = "smoke", value_name = "FILE")]
    pub smokes: Vec<PathBuf>,
    /// `cargo xtask sbom` output, one per platform, named `sbom-<os>-<arch>.spdx.json`, and
    /// its CycloneDX form (`--cyclonedx`) named `sbom-<os>-<arch>.cdx.json`, checked to say
    /// the same; the receipt records each one's name and sha256.
    #[arg(long = "sbom", value_name = "FILE")]
    pub sboms: Vec<PathBuf>,
    /// A static `template-verify` binary for consumers, named `template-verify-<os>-<arch>`
    /// (scripts/build-verifiers.sh); the receipt records its name and sha256.
    #[arg(long = "verifier", value_name = "FILE")]
    pub verifiers: Vec<PathBuf>,
    /// `cargo xtask publish --tag T --json` output (with the index).
    #[arg(long, value_name = "FILE")]
    pub publish: PathBuf,
    /// The release tag; defaults to the published index's (and must equal it).
    #[arg(long)]
    pub tag: Option<String>,
    /// Source commit; defaults to $GITHUB_SHA, else `git rev-parse HEAD`.
    #[arg(long, value_name = "SHA")]
    pub source_commit: Option<String>,
    /// The receipt's creation time (RFC 3339); defaults to now.
    #[arg(long, value_name = "RFC3339")]
    pub now: Option<String>,
    /// Where to write the receipt; defaults to .xtask/receipts.
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    /// Print `{"path", "sha256", "release_tag", "reference", "complete", "problems"}`.
    #[arg(long)]
    pub json: bool,
}

/// `cargo xtask release` alone runs the three phases on this machine; the workflow runs each
/// phase in its own job (`plan` once, `build` once per platform, `ship` once).
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ReleaseArgs {
    #[command(subcommand)]
    pub phase: Option<ReleasePhase>,
    #[command(flatten)]
    pub all: ReleaseAllArgs,
}

#[derive(Debug, Subcommand)]
pub enum ReleasePhase {
    /// Gate, resolve, lock, tag and "what changed": decides whether there is a release.
    Plan(ReleasePlanArgs),
    /// One platform: base image, build, smoke test, push by digest (when the plan publishes).
    Build(ReleaseBuildArgs),
    /// Index by digest, receipt written and verified, then the immutable tag and the assets.
    Ship(ReleaseShipArgs),
    /// A release's notes from its receipt and the previous one's (and the assets beside each)
    /// alone: each package's old and new version, what was held back and why, sizes and pulls,
    /// the harnesses' timings, protocol drift and state, the input trust.
    Notes(ReleaseNotesArgs),
    /// What the workflow does about the GitHub release of this tag, from what `gh` found: a
    /// release published with exactly these assets is done (success, said so); one published
    /// with other assets fails, naming each difference; otherwise the drafts this workflow left
    /// are listed for removal and the release is to be created. Writes `publish`,
    /// `stale_drafts` and `title` to `$GITHUB_OUTPUT`.
    Existing(ReleaseExistingArgs),
}

/// Decides from files only (it runs in the job that may write releases, which runs no cargo).
#[derive(Debug, Args)]
pub struct ReleaseExistingArgs {
    /// This run's release tag.
    #[arg(long)]
    pub tag: String,
    /// The assets this run made (`release ship --assets`).
    #[arg(long, value_name = "DIR")]
    pub assets: PathBuf,
    /// What `gh` found: `releases.json` (`gh release list --json tagName,name,isDraft`),
    /// `this.json` (`gh release view TAG --json tagName,isDraft`; absent: no such release) and,
    /// for a published release, its assets in `assets/` (`gh release download TAG`).
    #[arg(long, value_name = "DIR")]
    pub found: PathBuf,
    /// Print the decision as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Prints the notes on stdout: Markdown, as the GitHub release's body (`--format md`), or
/// JSON. Each receipt is verified offline first (by its release's own manifest.yaml beside
/// it, else the checkout's manifest), and an asset beside it is used only when its sha256 is
/// the one the receipt records; what could not be shown is listed.
#[derive(Debug, Args)]
pub struct ReleaseNotesArgs {
    /// The release's receipt; its assets (transcripts-*.json, manifest.yaml, inventory.json)
    /// beside it.
    #[arg(long, value_name = "FILE")]
    pub receipt: PathBuf,
    /// The previous release's receipt, its assets beside it; without it nothing is compared.
    #[arg(long, value_name = "FILE")]
    pub previous: Option<PathBuf>,
    /// The notes' form.
    #[arg(long, value_enum, default_value_t = NotesFormatArg::Md)]
    pub format: NotesFormatArg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum NotesFormatArg {
    /// Markdown.
    Md,
    Json,
}

/// Flags of the plan, shared by `release` and `release plan`.
#[derive(Debug, Clone, Args)]
pub struct PlanFlags {
    #[command(flatten)]
    pub registry: RegistryArgs,
    /// Proceed whatever the cadence says (manual runs).
    #[arg(long)]
    pub force: bool,
    /// Build and smoke-test only: push nothing, publish no release.
    #[arg(long)]
    pub no_publish: bool,
    /// Where previous releases' receipts are: `receipt-*.json` in it and in its
    /// subdirectories. The newest one that verifies is the previous release.
    #[arg(long, value_name = "DIR", default_value = template_formats::paths::RELEASES)]
    pub previous_receipts: PathBuf,
    /// The repository's published release tags: the JSON `gh release list --json
    /// tagName,isDraft` prints. A tag in it (not a draft) ends the plan like `unchanged`: these
    /// inputs are already published that day. Without it, only the previous receipt decides.
    #[arg(long, value_name = "FILE")]
    pub published_tags: Option<PathBuf>,
    /// Platforms to release; `release` defaults to those this machine can run (native or
    /// emulated), `release plan` to the manifest's.
    #[arg(long = "platform")]
    pub platforms: Vec<Platform>,
    #[command(flatten)]
    pub target: OciTargetArgs,
}

#[derive(Debug, Args)]
pub struct ReleaseAllArgs {
    #[command(flatten)]
    pub plan: PlanFlags,
    /// Extra CA bundle (PEM) for the builds behind a TLS-inspecting proxy, as for `build`.
    #[arg(long, env = "XTASK_EXTRA_CA_BUNDLE", value_name = "PEM")]
    pub ca_bundle: Option<PathBuf>,
    /// Print the plan and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Writes `plan.json` (with `gate.json`, `resolve.json`, `lock.json`) into `--out`, the
/// template files into `template/`, and, under GitHub Actions, `action`, `tag`, `publish`
/// and `now` to `$GITHUB_OUTPUT` and a summary to `$GITHUB_STEP_SUMMARY`.
#[derive(Debug, Args)]
pub struct ReleasePlanArgs {
    #[command(flatten)]
    pub plan: PlanFlags,
    /// The plan directory.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Print the plan as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Writes `results-<os>-<arch>.json` into `--out` (also when smoke fails, then exits
/// non-zero).
#[derive(Debug, Args)]
pub struct ReleaseBuildArgs {
    /// The directory `release plan` wrote.
    #[arg(long, value_name = "DIR")]
    pub plan: PathBuf,
    /// The platform this run builds, tests and pushes.
    #[arg(long, value_name = "linux/amd64|linux/arm64")]
    pub platform: Platform,
    /// Where the results file goes.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Extra CA bundle (PEM) for the builds behind a TLS-inspecting proxy, as for `build`.
    #[arg(long, env = "XTASK_EXTRA_CA_BUNDLE", value_name = "PEM")]
    pub ca_bundle: Option<PathBuf>,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Writes the release assets (receipt, the files it names, the schema) into `--assets` and,
/// under GitHub Actions, `tag`, `receipt` and `reference` to `$GITHUB_OUTPUT`.
#[derive(Debug, Args)]
pub struct ReleaseShipArgs {
    /// The directory `release plan` wrote.
    #[arg(long, value_name = "DIR")]
    pub plan: PathBuf,
    /// The directory holding every platform's `results-*.json`.
    #[arg(long, value_name = "DIR")]
    pub results: PathBuf,
    /// Where the release assets go (created; files in it are replaced).
    #[arg(long, value_name = "DIR")]
    pub assets: PathBuf,
    /// Stop before writing the tag (the index is pushed by digest, the receipt written and
    /// verified with its assets). The workflow attests them, then runs `release ship` again
    /// without it: every earlier step is then a no-op and the same receipt is written.
    #[arg(long)]
    pub defer_tag: bool,
    /// A directory holding the consumer's static verifier binaries, one per platform
    /// (`template-verify-<os>-<arch>`, made by scripts/build-verifiers.sh): they become
    /// release assets and the receipt records their sha256.
    #[arg(long, value_name = "DIR")]
    pub verifiers: Option<PathBuf>,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

// Each command's clap arguments become the request its module runs: the domain modules know
// these conversions' results, never clap or this file (the architecture test keeps it so).
// Every field is carried; where a request groups flags differently, the match says so.

use template_formats::model::plan::Target;
use xtask::image::base::BaseRequest;
use xtask::image::build::BuildRequest;
use xtask::image::sbom::SbomRequest;
use xtask::image::smoke::SmokeRequest;
use xtask::npm::lock::LockRequest;
use xtask::npm::resolve::{RegistryAndClock, ResolveRequest};
use xtask::release::gate::GateRequest;
use xtask::release::publish::PublishRequest;
use xtask::release::receipt_write::ReceiptWriteRequest;
use xtask::release::{
    PlanOptions, ReleaseAllRequest, ReleaseBuildRequest, ReleasePlanRequest, ReleaseRequest,
    ReleaseShipRequest,
};

impl From<RegistryArgs> for RegistryAndClock {
    fn from(args: RegistryArgs) -> RegistryAndClock {
        RegistryAndClock {
            registry: args.registry,
            now: args.now,
            trust: xtask::npm::trust::TrustOptions {
                trusted_keys: args.trusted_keys,
                require_signed_inputs: args.require_signed_inputs,
                trusted_root: args.trusted_root,
            },
        }
    }
}

impl From<OciTargetArgs> for Target {
    fn from(args: OciTargetArgs) -> Target {
        Target {
            registry: args.oci_registry,
            repository: args.repository,
        }
    }
}

impl From<ResolveArgs> for ResolveRequest {
    fn from(args: ResolveArgs) -> ResolveRequest {
        ResolveRequest {
            registry: args.registry.into(),
            json: args.json,
        }
    }
}

impl From<LockArgs> for LockRequest {
    fn from(args: LockArgs) -> LockRequest {
        LockRequest {
            registry: args.registry.into(),
            check: args.check,
            dry_run: args.dry_run,
            json: args.json,
        }
    }
}

impl From<BaseArgs> for BaseRequest {
    fn from(args: BaseArgs) -> BaseRequest {
        BaseRequest {
            platform: args.platform,
            suite: args.suite,
            rebuild: args.rebuild,
            dry_run: args.dry_run,
            json: args.json,
        }
    }
}

impl From<BuildArgs> for BuildRequest {
    fn from(args: BuildArgs) -> BuildRequest {
        BuildRequest {
            platform: args.platform,
            base_image: args.base_image,
            ca_bundle: args.ca_bundle,
            dry_run: args.dry_run,
            no_cache: args.no_cache,
            json: args.json,
        }
    }
}

impl From<SmokeArgs> for SmokeRequest {
    fn from(args: SmokeArgs) -> SmokeRequest {
        SmokeRequest {
            image: args.image,
            platform: args.platform,
            ca_bundle: args.ca_bundle,
            json: args.json,
        }
    }
}

impl From<SbomArgs> for SbomRequest {
    fn from(args: SbomArgs) -> SbomRequest {
        SbomRequest {
            image: args.image,
            platform: args.platform,
            output: args.output,
            cyclonedx: args.cyclonedx,
            now: args.now,
            manifest_digest: args.manifest_digest,
            repository: args.repository,
            release_tag: args.release_tag,
            json: args.json,
        }
    }
}

impl From<GateArgs> for GateRequest {
    fn from(args: GateArgs) -> GateRequest {
        GateRequest {
            now: args.now,
            force: args.force,
            previous_receipt: args.previous_receipt,
            json: args.json,
        }
    }
}

impl From<PublishArgs> for PublishRequest {
    fn from(args: PublishArgs) -> PublishRequest {
        PublishRequest {
            target: args.target.into(),
            tag: args.tag,
            images: args.images,
            pushed: args.pushed,
            partial: args.partial,
            defer_tag: args.defer_tag,
            previous: args.previous,
            dry_run: args.dry_run,
            json: args.json,
        }
    }
}

impl From<ReceiptWriteArgs> for ReceiptWriteRequest {
    fn from(args: ReceiptWriteArgs) -> ReceiptWriteRequest {
        ReceiptWriteRequest {
            gate: args.gate,
            resolve: args.resolve,
            builds: args.builds,
            smokes: args.smokes,
            sboms: args.sboms,
            verifiers: args.verifiers,
            publish: args.publish,
            tag: args.tag,
            source_commit: args.source_commit,
            now: args.now,
            out_dir: args.out_dir,
            json: args.json,
        }
    }
}

impl From<PlanFlags> for PlanOptions {
    fn from(args: PlanFlags) -> PlanOptions {
        PlanOptions {
            registry: args.registry.into(),
            force: args.force,
            no_publish: args.no_publish,
            previous_receipts: args.previous_receipts,
            published_tags: args.published_tags,
            platforms: args.platforms,
            target: args.target.into(),
        }
    }
}

/// `release` with a phase is that phase's request; without, the whole release's (clap lets
/// the whole release's flags through only when no phase is named).
impl From<ReleaseArgs> for ReleaseRequest {
    fn from(args: ReleaseArgs) -> ReleaseRequest {
        match args.phase {
            None => ReleaseRequest::All(ReleaseAllRequest {
                plan: args.all.plan.into(),
                ca_bundle: args.all.ca_bundle,
                dry_run: args.all.dry_run,
                json: args.all.json,
            }),
            Some(ReleasePhase::Plan(a)) => ReleaseRequest::Plan(ReleasePlanRequest {
                plan: a.plan.into(),
                out: a.out,
                json: a.json,
            }),
            Some(ReleasePhase::Build(a)) => ReleaseRequest::Build(ReleaseBuildRequest {
                plan: a.plan,
                platform: a.platform,
                out: a.out,
                ca_bundle: a.ca_bundle,
                json: a.json,
            }),
            Some(ReleasePhase::Ship(a)) => ReleaseRequest::Ship(ReleaseShipRequest {
                plan: a.plan,
                results: a.results,
                assets: a.assets,
                defer_tag: a.defer_tag,
                verifiers: a.verifiers,
                json: a.json,
            }),
            Some(ReleasePhase::Existing(a)) => {
                ReleaseRequest::Existing(xtask::release::existing::ReleaseExistingRequest {
                    tag: a.tag,
                    assets: a.assets,
                    found: a.found,
                    json: a.json,
                })
            }
            Some(ReleasePhase::Notes(a)) => {
                use xtask::release::notes::{NotesFormat, ReleaseNotesRequest};
                ReleaseRequest::Notes(ReleaseNotesRequest {
                    receipt: a.receipt,
                    previous: a.previous,
                    format: match a.format {
                        NotesFormatArg::Md => NotesFormat::Markdown,
                        NotesFormatArg::Json => NotesFormat::Json,
                    },
                })
            }
        }
    }
}

#[cfg(feature = "bench")]
impl From<BenchCommand> for xtask::bench::BenchRequest {
    fn from(command: BenchCommand) -> xtask::bench::BenchRequest {
        use xtask::bench::{publish, rebuild, reproduce, resolve, update, BenchRequest};
        match command {
            BenchCommand::Resolve(a) => BenchRequest::Resolve(resolve::BenchResolveRequest {
                registry: a.registry.into(),
                runs: a.runs,
                json: a.json,
            }),
            BenchCommand::Publish(a) => BenchRequest::Publish(publish::BenchPublishRequest {
                image: a.image,
                json: a.json,
            }),
            BenchCommand::Update(a) => BenchRequest::Update(update::BenchUpdateRequest {
                previous: a.previous,
                image: a.image,
                json: a.json,
            }),
            BenchCommand::Rebuild(a) => BenchRequest::Rebuild(rebuild::BenchRebuildRequest {
                registry: a.registry.into(),
                bump: a.bump,
                platform: a.platform,
                json: a.json,
            }),
            BenchCommand::Reproduce(a) => {
                BenchRequest::Reproduce(reproduce::BenchReproduceRequest {
                    platform: a.platform,
                    json: a.json,
                })
            }
        }
    }
}

pub mod cli_reference;
#[cfg(test)]
mod round_trip;
