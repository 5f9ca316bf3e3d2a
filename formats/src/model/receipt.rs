//! The release receipt, schema version 2 (`schemas/receipt.v2.schema.json`): what `receipt
//! write` writes and `receipt verify`, `pin`, the gate and the next release's plan read.
//!
//! Times and digests stay strings here: a receipt is judged on its exact bytes (a
//! `created_at` with fractional seconds is a rejection, not something to normalise), so the
//! verifier checks each form and names the field instead of failing at deserialisation.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::model::gate::Trigger;
use crate::model::install_scripts::InstallScripts;
use crate::model::inventory::Tarball;
use crate::model::publish::IndexEntry;
pub use crate::model::resolution::InputStatus;
use crate::model::Platform;

// The receipt, version 1. Strict: an unknown field is a rejection, because a consumer that
// silently ignored fields could be told something it never checked.

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Receipt {
    pub schema_version: u32,
    /// The unique, immutable tag of the multi-arch index.
    pub release_tag: String,
    /// RFC 3339, UTC.
    pub created_at: String,
    /// The git commit the release was built from (40 hex digits).
    pub source_commit: String,
    pub trigger: Trigger,
    pub gate: GateRecord,
    pub resolver: ResolverRecord,
    /// How the release's npm inputs were judged (docs/inputs.md). Absent from receipts written
    /// before the tool recorded it; they are still version 2 and still verify, and a consumer
    /// who requires verified inputs refuses them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<InputsRecord>,
    pub node: NodeRecord,
    /// The template's top-level packages, each with the `latest` it was chosen from.
    pub packages: Vec<PackageRecord>,
    /// Every other package in the lockfile.
    pub dependencies: Vec<DependencyRecord>,
    pub artifacts: Vec<ArtifactRecord>,
    /// The consumer's verifier (`template-verify`), one static binary per platform, when the
    /// release carries them (the workflow's releases do; a local release may not).
    pub verifiers: Vec<VerifierRecord>,
    /// The platforms the manifest asks for; the receipt is complete only when each one is
    /// present and passed every smoke check.
    pub required_platforms: Vec<Platform>,
    pub platforms: Vec<PlatformRecord>,
    pub index: IndexRecord,
    pub complete: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateRecord {
    pub due: bool,
    pub forced: bool,
    pub catch_up: bool,
    pub epoch_day: i64,
    pub next_due: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResolverRecord {
    /// Versions and transitive dependencies are no newer than this (RFC 3339).
    pub cutoff: String,
    /// The npm registry the lockfile was generated against.
    pub registry: String,
}

/// The trust in the release's npm inputs, copied from its inventory (`inventory.json`, a
/// release asset, which `receipt verify --artifacts` holds it to).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputsRecord {
    /// `verified`: every lockfile entry's registry signature verified; `unverified`: the
    /// registry served none (a stripping mirror).
    pub status: InputStatus,
    /// The npm registry, as `resolver.registry`.
    pub registry: String,
    /// Where the keys that verified the signatures came from (npm's anchors in the pinned npm,
    /// or a `--trusted-keys` file by name); null when unverified.
    pub keys: Option<String>,
    /// The manifest's packages, in `packages` order.
    pub packages: Vec<PackageInputsRecord>,
}

/// One top-level package's input trust. Its provenance (the identity it was published with)
/// joins this record when the inventory records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackageInputsRecord {
    pub name: String,
    pub version: String,
    /// The registry key whose signature over `<name>@<version>:<integrity>` verified; null
    /// when unverified.
    pub signed_by: Option<String>,
    /// What it runs when npm installs it, for a package the manifest allows to run install
    /// scripts (the content the manifest acknowledged); null for the others.
    pub install_scripts: Option<InstallScripts>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeRecord {
    pub version: String,
    pub npm: TarballRecord,
    pub platforms: BTreeMap<Platform, TarballRecord>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TarballRecord {
    pub package: String,
    pub version: String,
    pub integrity: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackageRecord {
    pub name: String,
    pub version: String,
    pub integrity: String,
    /// The registry's `dist-tags.latest` when the version was chosen.
    pub latest: String,
    pub published: Option<String>,
    /// The version locked before this release, when there was one.
    pub previously_locked: Option<String>,
    /// The chosen version is lower than the one locked before (an upstream rollback).
    pub rollback: bool,
    /// `latest` was not taken (cooldown or platform readiness); see `notes`.
    pub held_back: bool,
    pub notes: Vec<String>,
    /// The package's source repository as the registry gives it for this version
    /// (`repository` of its package.json, as a URL), where its release notes are. Absent from
    /// receipts written before the tool recorded it, and for a package that names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
    /// Each version newer than the chosen one that was not taken, with every reason (the
    /// cooldown until when, a platform binary missing, deprecated, a trust downgrade, install
    /// scripts not acknowledged). Absent when none was passed over, and from receipts written
    /// before the tool recorded it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejected: Vec<RejectedVersion>,
}

/// A version the resolution passed over, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RejectedVersion {
    pub version: String,
    pub reasons: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DependencyRecord {
    pub name: String,
    pub version: String,
    pub path: String,
    pub integrity: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArtifactRecord {
    /// The file's name among the release assets.
    pub name: String,
    /// Its path in the repository at `source_commit`.
    pub path: String,
    /// Lowercase hex, no prefix.
    pub sha256: String,
}

/// A prebuilt `template-verify` binary among the release assets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerifierRecord {
    /// The platform it runs on.
    pub platform: Platform,
    /// Its name among the release assets: always `template-verify-<os>-<arch>`.
    pub name: String,
    /// Lowercase hex, no prefix.
    pub sha256: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BuildMode {
    Native,
    Emulated,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlatformRecord {
    pub platform: Platform,
    /// As the image config says (the index's platform entry is made from these).
    pub os: String,
    pub architecture: String,
    pub variant: Option<String>,
    pub build: BuildMode,
    pub build_id: String,
    /// The local reference that was built and smoke-tested.
    pub local_image: String,
    /// The engine's image id of that local image.
    pub image_id: String,
    pub base_image: BaseImageRecord,
    /// The pushed manifest's digest: the image digest.
    pub digest: String,
    pub media_type: String,
    /// Size of the manifest itself, as the index's descriptor records it.
    pub manifest_size: u64,
    pub config_digest: String,
    /// Uncompressed size of the image as the engine reports it.
    pub image_size: u64,
    /// Bytes in the registry: config plus compressed layers.
    pub pushed_size: u64,
    /// The image's Debian packages (`name=version`, sorted), read from its dpkg database.
    pub debian_packages: Vec<String>,
    /// The platform's SBOM, a release asset.
    pub sbom: SbomRecord,
    /// The same SBOM as CycloneDX 1.5 JSON (`sbom-<os>-<arch>.cdx.json`), a release asset;
    /// null when `receipt write` was given none (`release ship` always gives it).
    pub cyclonedx: Option<SbomRecord>,
    pub smoke: SmokeRecord,
    /// The image's layers as the pushed manifest lists them, in order: what a host holding
    /// another release must pull is the layers it lacks. Absent from receipts written before
    /// the tool recorded them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layers: Option<Vec<LayerRecord>>,
    /// The harnesses' protocol transcripts from the smoke test's turns
    /// (`transcripts-<os>-<arch>.json`, a release asset; `model::transcript`). Absent where no
    /// turn ran (an emulated build) and from receipts written before the tool recorded them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcripts: Option<AssetRecord>,
    /// Where each harness wrote during its turn and where its session is kept, as the smoke
    /// test found them; absent as `transcripts` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harnesses: Option<Vec<HarnessStateRecord>>,
}

/// One layer blob of a platform's image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayerRecord {
    /// `sha256:<hex>` of the compressed blob.
    pub digest: String,
    /// Its size in bytes, as the manifest's descriptor says.
    pub size: u64,
}

/// A release asset the receipt vouches for by name and hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AssetRecord {
    /// Its name among the release assets (a fixed form for each kind of asset).
    pub name: String,
    /// Lowercase hex, no prefix.
    pub sha256: String,
}

/// Where one harness keeps its state, as its smoke turn showed it. Paths are normalized: the
/// session id reads `<session>`, runs of digits `#`, other ids `*`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HarnessStateRecord {
    pub name: String,
    /// The directories holding the files that name the session (by name or content): what
    /// a supervisor's resume depends on.
    pub session: Vec<String>,
    /// Every directory the harness wrote files in, at most three levels below the home; in
    /// the scratch directory, [`SCRATCH_DIR`] itself.
    pub written: Vec<String>,
}

/// The sandbox's scratch directory. Nothing there outlives a restart, and what a harness makes
/// there comes and goes with a run's timing (Claude Code's file-watch probe is left behind
/// when its process is killed before the probe ends, and not when after), so a harness's
/// evidence records that it writes there, never what below.
pub const SCRATCH_DIR: &str = "/tmp";

/// `dir` as a harness's evidence records it: [`SCRATCH_DIR`] for that directory and any below
/// it, any other directory as it is.
pub fn scratch_collapsed(dir: &str) -> &str {
    match dir.strip_prefix(SCRATCH_DIR) {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => SCRATCH_DIR,
        _ => dir,
    }
}

impl HarnessStateRecord {
    /// The directories the harness wrote in, an entry below [`SCRATCH_DIR`] (as a receipt
    /// may record it) counted as that directory: what two releases' records are compared on.
    pub fn written_directories(&self) -> BTreeSet<String> {
        self.written
            .iter()
            .map(|dir| scratch_collapsed(dir).to_string())
            .collect()
    }
}

impl PlatformRecord {
    /// The platform's SBOM assets with the field each is recorded under: the SPDX one, and
    /// the CycloneDX one when the receipt records it.
    pub fn sbom_assets(&self) -> Vec<(&'static str, &SbomRecord)> {
        let mut out = vec![("sbom", &self.sbom)];
        out.extend(self.cyclonedx.as_ref().map(|c| ("cyclonedx", c)));
        out
    }
}

/// The SBOM `cargo xtask sbom` made from the platform's image (SPDX 2.3 JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SbomRecord {
    /// Its name among the release assets: always `sbom-<os>-<arch>.spdx.json` (or
    /// `.cdx.json` for the CycloneDX form).
    pub name: String,
    /// Lowercase hex, no prefix.
    pub sha256: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaseImageRecord {
    pub reference: String,
    pub digest: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SmokeRecord {
    pub passed: bool,
    pub checks: Vec<SmokeCheck>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SmokeCheck {
    pub name: String,
    pub passed: bool,
    #[serde(default)]
    pub output: String,
    /// How long the check took, in seconds (tenths); absent from receipts written before the
    /// tool recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_secs: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexRecord {
    pub tag: String,
    pub digest: String,
    pub media_type: String,
    pub size: u64,
    /// Registry host and repository, e.g. `ghcr.io/sandbox0/coding-agent`.
    pub repository: String,
    /// `repository@digest`: what consumers pin.
    pub reference: String,
}

/// A platform record is exactly the index's descriptor of that platform.
impl From<&PlatformRecord> for IndexEntry {
    fn from(p: &PlatformRecord) -> IndexEntry {
        IndexEntry {
            platform: p.platform,
            os: p.os.clone(),
            architecture: p.architecture.clone(),
            variant: p.variant.clone(),
            digest: p.digest.clone(),
            media_type: p.media_type.clone(),
            size: p.manifest_size,
        }
    }
}

/// The receipt records a Node tarball by name, version and integrity (the URL and hex form
/// follow from those).
impl From<&Tarball> for TarballRecord {
    fn from(t: &Tarball) -> TarballRecord {
        TarballRecord {
            package: t.package.clone(),
            version: t.version.clone(),
            integrity: t.integrity.clone(),
        }
    }
}
