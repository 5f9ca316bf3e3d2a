//! The files that pass between stages, one type each, shared by the stage that writes the file
//! and every stage that reads it. `model` depends on nothing else of ours: it is the
//! vocabulary the other folders speak. A format changes by its version (`schema_version`,
//! [`plan::PLAN_SCHEMA_VERSION`], [`platform_results::RESULTS_SCHEMA_VERSION`]), never by a
//! reader keeping a lenient copy of a type.
//!
//! | file | type | written by | read by |
//! |---|---|---|---|
//! | `gate.json` | [`gate::GateDecision`] | `gate` | `release plan`, `receipt write` |
//! | `resolve.json` | [`resolution::Resolution`] | `resolve` | `lock`, `release plan`, `receipt write` |
//! | `template/package.json` | [`package_json::PackageJson`] | `lock` | `resolve`, `build`, `smoke`, `receipt verify` |
//! | `template/package-lock.json` | [`lockfile::Lockfile`] | npm under `lock` | `lock`, `receipt verify` |
//! | `template/inventory.json` | [`inventory::Inventory`] | `lock` | `build`, `receipt write`, `receipt verify` |
//! | `build-<arch>.json` | [`build::BuildReport`] | `build` | `release build`, `receipt write` |
//! | `smoke-<arch>.json` | [`smoke::SmokeReport`] | `smoke` | `release build`, `receipt write` |
//! | `pushed-<arch>.json`, `publish.json` | [`publish::PublishReport`] | `publish` | `release build`, `release ship`, `publish --pushed`, `receipt write` |
//! | `plan.json` | [`plan::ReleasePlan`] | `release plan` | `release build`, `release ship` |
//! | `results-<os>-<arch>.json` | [`platform_results::PlatformResults`] | `release build` | `release ship` |
//! | `receipt-<tag>-<sha256>.json` | [`receipt::Receipt`] | `receipt write` | `receipt verify`, `pin`, `gate`, `release plan` |
//!
//! Times are `DateTime<Utc>` and chosen versions `semver::Version`, except in the receipt,
//! which is verified on its exact bytes and so keeps the strings it was written with.

pub mod build;
pub mod digest;
pub mod gate;
pub mod inventory;
pub mod lockfile;
pub mod package_json;
pub mod plan;
pub mod platform;
pub mod platform_results;
pub mod publish;
pub mod receipt;
pub mod resolution;
pub mod smoke;
pub mod tag;

pub use digest::Digest;
pub use platform::Platform;

/// A time as every file of ours writes it: RFC 3339, UTC, whole seconds, `Z` (what serde
/// writes for these types, for the places that print one).
pub fn rfc3339(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}
