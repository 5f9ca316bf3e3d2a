//! What `resolve --json` writes (`resolve.json`): one exact version of every template package
//! and how it was chosen; `lock`, the plan and the receipt read it.

use chrono::{DateTime, Utc};
use semver::Version;
use serde::{Deserialize, Serialize};

pub use crate::model::trust::{Evidence, ProvenanceRecord};

/// The resolver's answer for one package.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Resolved {
    pub name: String,
    pub version: Version,
    /// `dist-tags.latest` at resolution time.
    pub latest: Version,
    /// Publish time of `version`, whole seconds.
    pub published: DateTime<Utc>,
    /// The version currently locked in template/, if any.
    pub locked: Option<Version>,
    /// The answer is below the locked version: upstream moved `latest` back or withdrew versions.
    pub rollback: bool,
    /// `latest` itself was not eligible and an older version was taken.
    pub held_back: bool,
    pub notes: Vec<String>,
    /// Newer candidates that were passed over, with why.
    pub rejected: Vec<Rejection>,
    /// The registry key whose signature over `<name>@<version>:<integrity>` verified; `None`
    /// when the inputs are unverified (a registry that serves no signatures).
    pub signed_by: Option<String>,
    /// The version's provenance as verified offline; `None` when it has none, or the inputs
    /// are unverified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<ProvenanceRecord>,
    /// The strongest trust evidence the registry showed for the version.
    #[serde(default, skip_serializing_if = "Evidence::is_none")]
    pub evidence: Evidence,
    /// Who published it (`_npmUser.name`, with `trusted publishing` when it came through
    /// trusted publishing), when the registry says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publisher: Option<String>,
    /// `<locked version's publisher> -> <this version's>` when they differ: shown, and judged
    /// by the evidence rule (trusted publishing to an account is a downgrade).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publisher_change: Option<String>,
    /// The version's source repository (its package.json's `repository`, as a URL), where its
    /// release notes are; `None` when it names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
}

/// Whether a run's inputs were checked against the registry's signatures.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum InputStatus {
    /// Every version taken carried a registry signature that verified.
    Verified,
    /// The registry served no signatures and no keys: nothing was verified.
    Unverified,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Rejection {
    pub version: Version,
    pub reasons: Vec<String>,
    /// The install scripts this version runs, when they differ from what the manifest
    /// acknowledges for the package: what a maintainer reviews and pastes into
    /// `install_scripts_allowed` to take it (docs/inputs.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_scripts: Option<crate::model::install_scripts::InstallScripts>,
}

/// The whole resolution, as `--json` prints it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Resolution {
    /// Versions and transitive dependencies are no newer than this (whole seconds).
    pub cutoff: DateTime<Utc>,
    /// The resolution's clock (whole seconds).
    pub now: DateTime<Utc>,
    pub registry: String,
    pub cooldown_hours: u32,
    /// Whether the versions' registry signatures were verified (docs/inputs.md).
    pub inputs: InputStatus,
    pub packages: Vec<Resolved>,
}
