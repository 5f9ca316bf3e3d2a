//! `template/package-lock.json`, written by npm under `lock`: read by `lock`'s checks and the
//! inventory it derives, and by the receipt's verifier. npm owns the format, so unknown fields
//! are ignored and absent ones default, as npm itself treats them.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use serde::Deserialize;

use crate::model::Platform;

#[derive(Debug, Clone, Deserialize)]
pub struct Lockfile {
    #[serde(rename = "lockfileVersion")]
    pub lockfile_version: u32,
    #[serde(default)]
    pub packages: BTreeMap<String, LockEntry>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct LockEntry {
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
    pub fn parse(text: &str) -> Result<Lockfile> {
        serde_json::from_str(text).context("package-lock.json is not a valid npm lockfile")
    }

    /// Installed entries: everything but the root project.
    pub fn installed(&self) -> impl Iterator<Item = (&str, &LockEntry)> {
        self.packages
            .iter()
            .filter(|(path, _)| !path.is_empty())
            .map(|(path, entry)| (path.as_str(), entry))
    }
}

// ---------------------------------------------------------------------------------------------
// Which entries an image of a platform holds (the SBOM writes them, the verifier checks them).

/// Whether npm installs a package with these `os`/`cpu`/`libc` fields on `platform` (Debian:
/// glibc). A list matches a value it names, or, when it only excludes (`!win32`), any value it
/// does not exclude.
pub fn npm_field_matches(list: &Option<Vec<String>>, value: &str) -> bool {
    let Some(list) = list else { return true };
    if list.iter().any(|v| v == value) {
        return true;
    }
    list.iter().all(|v| v.starts_with('!')) && !list.iter().any(|v| v[1..] == *value)
}

pub fn npm_installs_on(entry: &LockEntry, platform: Platform) -> bool {
    npm_field_matches(&entry.os, "linux")
        && npm_field_matches(&entry.cpu, platform.npm_cpu())
        && npm_field_matches(&entry.libc, "glibc")
}

/// The package name of a lockfile path: `node_modules/a/node_modules/@s/b` -> `@s/b`.
pub fn name_of(path: &str, entry: &LockEntry) -> String {
    if let Some(name) = &entry.name {
        return name.clone();
    }
    let tail = path.rsplit("node_modules/").next().unwrap_or(path);
    tail.to_owned()
}

/// Lockfile entries npm installs on `platform` (not dev, not links, fitting os/cpu/libc). The
/// platform-specific ones among them are still checked against the image, because the
/// Dockerfile removes some that npm installed (the AVX2 OpenCode build).
pub fn npm_candidates(lock: &Lockfile, platform: Platform) -> Vec<(&str, &LockEntry)> {
    lock.installed()
        .filter(|(_, e)| !e.dev && !e.link && npm_installs_on(e, platform))
        .collect()
}

pub fn is_platform_specific(entry: &LockEntry) -> bool {
    entry.os.is_some() || entry.cpu.is_some() || entry.libc.is_some()
}
