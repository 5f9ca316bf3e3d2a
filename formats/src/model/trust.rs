//! A version's trust record, as `resolve --json` (`resolution.rs`) and the inventory
//! (`inventory.rs`) carry it: its verified provenance and the strongest trust evidence the
//! registry showed for it. The registry signature (`signed_by`) and the publisher sit beside
//! these in each file, as they did before.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// A version's npm provenance, as the tool verified it offline: the Sigstore bundle from the
/// registry's attestations, checked against the trusted root for the version's purl and the
/// lockfile's sha512, and the identity its Fulcio certificate carries.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ProvenanceRecord {
    /// `owner/name` of the GitHub repository the workflow ran in.
    pub repository: String,
    /// The workflow file that signed (`.github/workflows/publish.yml`).
    pub workflow: String,
    /// The git ref it ran on (`refs/tags/v1.0.0`).
    #[serde(rename = "ref")]
    pub git_ref: String,
    /// The OIDC issuer of the certificate.
    pub issuer: String,
    /// Whether template/manifest.yaml records this package's identity and this one matched it
    /// (`true`), or the manifest records none and this is only what the bundle carried.
    pub identity_pinned: bool,
    /// The SLSA predicate type of the statement.
    pub predicate_type: String,
    /// When the transparency log integrated the entry (authenticated by the log's signed entry
    /// timestamp); the cooldown counts from the later of this and the registry's publish time.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub log_integrated_time: Option<DateTime<Utc>>,
}

/// The strongest trust evidence the registry showed for a version, ranked as pnpm's
/// `trustPolicy: no-downgrade` ranks it (pnpm `resolving/npm-resolver/src/trustChecks.ts`,
/// `TRUST_RANK`): trusted publishing above provenance above nothing. A version with less than
/// the locked version had, or than a version published before it had, is not taken.
#[derive(
    Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash,
)]
#[serde(rename_all = "snake_case")]
pub enum Evidence {
    /// Neither (or the registry strips both: a mirror).
    #[default]
    None,
    /// `dist.attestations.provenance`: a SLSA provenance attestation.
    Provenance,
    /// `_npmUser.trustedPublisher`: published by a CI workflow's OIDC token (which also
    /// produces provenance), not by an account's token.
    TrustedPublisher,
}

impl Evidence {
    pub fn is_none(&self) -> bool {
        *self == Evidence::None
    }

    /// How a message names it.
    pub fn describe(&self) -> &'static str {
        match self {
            Evidence::None => "no trust evidence",
            Evidence::Provenance => "provenance",
            Evidence::TrustedPublisher => "trusted publishing",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trusted_publishing_outranks_provenance_outranks_nothing() {
        assert!(Evidence::TrustedPublisher > Evidence::Provenance);
        assert!(Evidence::Provenance > Evidence::None);
        assert_eq!(
            serde_json::to_string(&Evidence::TrustedPublisher).unwrap(),
            "\"trusted_publisher\""
        );
    }
}
