//! The package inventory (`template/inventory.json`), written by `lock`: every package the
//! template installs and the Node runtime; `build`, `pin` and the receipt read it.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub use crate::model::resolution::InputStatus;
pub use crate::model::trust::{Evidence, ProvenanceRecord};
use crate::model::Platform;

/// The inventory's format. 2 added each package's registry `publisher`: an inventory of
/// version 1 lacks it, and reading one as if its packages had no publisher would silently drop
/// SBOM suppliers, so it is refused and written again by `cargo xtask lock`. 3 added whether
/// the inputs were verified (`inputs`) and each package's and tarball's `signed_by`: an older
/// inventory would read as unverified whatever its registry did, so it too is written again.
/// 4 added what each package allowed to run install scripts runs (`install_scripts`) and the
/// source of the keys the signatures were verified with (`keys`): an older inventory would read
/// as if no script content had been checked.
pub const INVENTORY_SCHEMA_VERSION: u32 = 4;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Inventory {
    pub schema_version: u32,
    /// The clock of the resolution (`--now`); `lock --check` replays it.
    pub resolved_at: DateTime<Utc>,
    /// The resolver's cutoff: versions and transitive dependencies are no newer than this.
    pub cutoff: DateTime<Utc>,
    /// The npm registry the lockfile was generated against.
    pub registry: String,
    /// Whether every entry's registry signature was verified (`verified`), or the registry
    /// served none (`unverified`: a stripping mirror); docs/inputs.md.
    pub inputs: InputStatus,
    /// Where the registry keys that verified the signatures came from (npm's own anchors in
    /// the pinned npm, or a `--trusted-keys` file, by name); absent when `unverified`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub keys: Option<String>,
    pub node: NodeRuntime,
    pub packages: Vec<InventoryPackage>,
    pub summary: Summary,
}

/// The Node runtime and npm, each pinned to a registry tarball and its sha512.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NodeRuntime {
    pub version: String,
    pub platforms: BTreeMap<Platform, Tarball>,
    pub npm: Tarball,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Tarball {
    pub package: String,
    pub version: String,
    pub tarball: String,
    /// Subresource-integrity form, `sha512-<base64>`.
    pub integrity: String,
    /// The same digest as lowercase hex, as `sha512sum -c` wants it.
    pub sha512: String,
    /// The registry key whose signature over `<package>@<version>:<integrity>` verified;
    /// absent when the inputs are unverified.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub signed_by: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct InventoryPackage {
    pub name: String,
    pub version: String,
    /// Lockfile path, e.g. `node_modules/@openai/codex-linux-x64`.
    pub path: String,
    pub top_level: bool,
    pub integrity: String,
    pub resolved: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub published: Option<String>,
    pub install_script: bool,
    pub prerelease: bool,
    pub license: License,
    /// Who published this version on the npm registry (the packument's `_npmUser`, else its
    /// first `maintainers` entry), read at lock time; absent when the registry names no one
    /// (this project's mirror serves neither field). The SBOM's supplier when package.json
    /// names no author.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub publisher: Option<Publisher>,
    /// The registry key whose signature over `<name>@<version>:<integrity>` (this row's
    /// integrity, the lockfile's) verified; absent when the inputs are unverified.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub signed_by: Option<String>,
    /// The provenance `resolve` verified for this version (top-level packages), with the
    /// identity its certificate carries; absent when it has none or was not verified.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub provenance: Option<ProvenanceRecord>,
    /// The strongest trust evidence the registry showed for this version (`none` is left
    /// out); the next `resolve` refuses a version of this package with less.
    #[serde(skip_serializing_if = "Evidence::is_none", default)]
    pub evidence: Evidence,
    /// For a package the manifest allows to run install scripts: what this version runs (the
    /// commands and the sha256 of each file they run, read from its tarball), which `lock`
    /// checked is the content the manifest acknowledges.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub install_scripts: Option<crate::model::install_scripts::InstallScripts>,
    /// Set for platform-binary packages.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub os: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cpu: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub libc: Option<Vec<String>>,
}

/// An npm registry account, as the packument names it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Publisher {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub email: Option<String>,
    /// The trusted publisher's provider (`github`) when the version was published through
    /// trusted publishing (`_npmUser.trustedPublisher.id`), not with an account's token.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub trusted_publisher: Option<String>,
}

/// A package's license, classified: a valid SPDX expression, a reference to a file in the
/// package (`SEE LICENSE IN ...`), or nothing declared at all.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum License {
    Spdx {
        expression: String,
    },
    Reference {
        text: String,
    },
    Undeclared,
    /// Declared, but neither SPDX nor a reference: kept verbatim for a human to judge.
    Unrecognized {
        text: String,
    },
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Summary {
    pub packages: usize,
    pub top_level: usize,
    pub platform_binaries: usize,
    pub install_scripts: usize,
    pub prerelease: usize,
    pub license_undeclared: usize,
    pub license_reference: usize,
    pub license_unrecognized: usize,
}

impl Inventory {
    pub fn load(path: &Path) -> Result<Inventory> {
        let text = std::fs::read_to_string(path).with_context(|| {
            format!(
                "cannot read the package inventory {}; run `cargo xtask lock` first",
                path.display()
            )
        })?;
        let inventory: Inventory = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a valid package inventory", path.display()))?;
        inventory
            .check_version()
            .with_context(|| path.display().to_string())?;
        Ok(inventory)
    }

    /// Only this tool's format is read (see `INVENTORY_SCHEMA_VERSION`).
    pub fn check_version(&self) -> Result<()> {
        if self.schema_version != INVENTORY_SCHEMA_VERSION {
            anyhow::bail!(
                "the package inventory has schema_version {}, this tool reads \
                 {INVENTORY_SCHEMA_VERSION}: run `cargo xtask lock` to write it again",
                self.schema_version
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inventory_of_another_version_is_refused_naming_the_remedy() {
        let dir = tempfile::tempdir().unwrap();
        // Any inventory this tool wrote will do (the test edits its version): read when the test
        // runs, not compiled in, so a relock of template/ does not recompile the tests.
        let committed = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../template/inventory.json"),
        )
        .unwrap();
        let committed = committed.as_str();
        let path = dir.path().join("inventory.json");
        std::fs::write(&path, committed).unwrap();
        assert!(Inventory::load(&path).is_ok());
        let v1 = committed.replacen("\"schema_version\": 4,", "\"schema_version\": 1,", 1);
        assert_ne!(v1, committed);
        std::fs::write(&path, v1).unwrap();
        let err = format!("{:#}", Inventory::load(&path).unwrap_err());
        assert!(
            err.contains("inventory.json")
                && err.contains("schema_version 1")
                && err.contains("cargo xtask lock"),
            "{err}"
        );
    }
}
