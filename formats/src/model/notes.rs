//! A release's notes for the people who act on it (`release notes --format json`; `release
//! ship` writes them beside the assets as `notes.json` and `notes.md`): what changed since the
//! previous release, made from the two receipts and the assets they hash alone
//! (`template_verify::notes` builds and renders them), so they can be made again and tested.

use serde::{Deserialize, Serialize};

use crate::model::receipt::{LayerRecord, RejectedVersion};
use crate::model::resolution::InputStatus;
use crate::model::transcript::Drift;
use crate::model::Platform;

/// The notes format; notes of another version are refused.
pub const NOTES_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReleaseNotes {
    pub schema_version: u32,
    pub release_tag: String,
    pub created_at: String,
    /// `repository@digest`: what consumers pin.
    pub reference: String,
    pub complete: bool,
    /// The release these notes compare against; `None`: a first release, or none was given.
    pub previous: Option<PreviousRelease>,
    /// The template's top-level packages, in the receipt's order.
    pub packages: Vec<PackageNote>,
    /// Every other package whose version differs from the previous release's (added and
    /// removed ones too), by name.
    pub dependencies: Vec<VersionChange>,
    pub platforms: Vec<PlatformNote>,
    pub harnesses: Vec<HarnessNote>,
    /// How the release's npm inputs were judged; `None` for a receipt without the record.
    pub inputs: Option<InputsNote>,
    /// What these notes could not show or compare, and why (an asset missing or not the one
    /// its receipt hashes, a record an older receipt lacks).
    pub unavailable: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreviousRelease {
    pub release_tag: String,
    pub created_at: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// Not in the previous release (or there is none).
    New,
    Updated,
    /// A lower version than the previous release's: upstream moved `latest` back.
    Rollback,
    Unchanged,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackageNote {
    pub name: String,
    pub version: String,
    /// Its version in the previous release.
    pub previous: Option<String>,
    pub change: Change,
    /// Where the package's release notes are (from its `repository`).
    pub release_notes: Option<String>,
    /// The registry's `latest` when the release was resolved.
    pub latest: String,
    /// `latest` was not taken.
    pub held_back: bool,
    /// Why `latest` was not taken: every reason the resolution recorded for it.
    pub not_taken_because: Vec<String>,
    /// Every newer version passed over, with its reasons.
    pub rejected: Vec<RejectedVersion>,
    /// The resolution's other notes (a publisher or provenance identity that changed, a
    /// rollback).
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VersionChange {
    pub name: String,
    /// `None`: added.
    pub before: Option<String>,
    /// `None`: removed.
    pub after: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlatformNote {
    pub platform: Platform,
    /// Uncompressed, as the engine reports it.
    pub image_size: u64,
    pub previous_image_size: Option<u64>,
    /// Config and compressed layers, as stored in the registry.
    pub compressed_size: u64,
    pub previous_compressed_size: Option<u64>,
    /// How many layers the image has; `None` when its receipt does not record them.
    pub layers: Option<usize>,
    /// The layer blobs the previous release's image of this platform does not have; `None`
    /// when either receipt does not record its layers.
    pub new_layers: Option<Vec<LayerRecord>>,
    /// What a host holding the previous release pulls for this platform: the manifest, the
    /// config and the new layers (everything when there is no previous release); `None` as
    /// `new_layers`.
    pub pull_bytes: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HarnessNote {
    pub name: String,
    /// The package whose command the harness runs, and its versions.
    pub package: Option<String>,
    pub version: Option<String>,
    pub previous_version: Option<String>,
    pub timings: Vec<HarnessTiming>,
    /// Each platform's differences from the previous release's transcript; only platforms
    /// both releases have transcripts of.
    pub drift: Vec<PlatformDrift>,
    /// The directories holding its session, on the first platform that recorded them.
    pub session: Vec<String>,
    /// The same in the previous release.
    pub previous_session: Option<Vec<String>>,
    /// Directories it writes in that the previous release's did not, and the other way round.
    pub written_added: Vec<String>,
    pub written_removed: Vec<String>,
    /// Set when the session moved: existing sandboxes keep their state where the previous
    /// version wrote it, and a supervisor's resume would not find it.
    pub resume_risk: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HarnessTiming {
    pub platform: Platform,
    /// The handshake check (`harness <name>`), seconds.
    pub handshake_secs: Option<f64>,
    /// The turn, kill and resume (`harness <name> turn and resume`), seconds.
    pub turn_secs: Option<f64>,
    pub previous_turn_secs: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlatformDrift {
    pub platform: Platform,
    pub changes: Vec<Drift>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputsNote {
    pub status: InputStatus,
    pub previous_status: Option<InputStatus>,
    pub registry: String,
    /// Where the keys that verified the signatures came from.
    pub keys: Option<String>,
    pub packages: Vec<PackageTrust>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackageTrust {
    pub name: String,
    pub version: String,
    /// The registry key whose signature verified.
    pub signed_by: Option<String>,
    /// `owner/repo workflow@ref`, when verified provenance is recorded (the inventory asset).
    pub provenance: Option<String>,
    /// Who published the version on the registry.
    pub publisher: Option<String>,
    /// What it runs when npm installs it, for a package allowed to.
    pub install_scripts: Option<String>,
    /// What differs from the previous release's record of the package.
    pub changes: Vec<String>,
}
