//! `template/package-lock.json`, written by npm under `lock`: read by `lock`'s checks and the
//! inventory it derives, and by the receipt's verifier. npm owns the format, so unknown fields
//! are ignored and absent ones default, as npm itself treats them.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Lockfile {
    #[serde(rename = "lockfileVersion")]
    pub lockfile_version: u32,
    #[serde(default)]
    pub packages: BTreeMap<String, LockEntry>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct LockEntry {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub resolved: Option<String>,
    #[serde(default)]
    pub integrity: Option<String>,
    #[serde(default)]
    pub link: bool,
    #[serde(default)]
    pub dev: bool,
    #[serde(rename = "hasInstallScript", default)]
    pub has_install_script: bool,
    #[serde(default)]
    pub license: Option<serde_json::Value>,
    #[serde(default)]
    pub dependencies: BTreeMap<String, String>,
    #[serde(rename = "optionalDependencies", default)]
    pub optional_dependencies: BTreeMap<String, String>,
    #[serde(default)]
    pub os: Option<Vec<String>>,
    #[serde(default)]
    pub cpu: Option<Vec<String>>,
    #[serde(default)]
    pub libc: Option<Vec<String>>,
}

impl Lockfile {
    pub(crate) fn parse(text: &str) -> Result<Lockfile> {
        serde_json::from_str(text).context("package-lock.json is not a valid npm lockfile")
    }

    /// Installed entries: everything but the root project.
    pub(crate) fn installed(&self) -> impl Iterator<Item = (&str, &LockEntry)> {
        self.packages
            .iter()
            .filter(|(path, _)| !path.is_empty())
            .map(|(path, entry)| (path.as_str(), entry))
    }
}
