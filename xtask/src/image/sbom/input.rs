//! What one SBOM is made from: the engine's findings in the image (the dpkg database, the
//! copyright files, the package.json files, the ELF programs), the committed lockfile and
//! inventory, and where the Dockerfile installs npm and the template's packages. The
//! document's builders (`document.rs`, `npm.rs`) are pure over it; `run.rs` gathers it.

use std::collections::{BTreeMap, BTreeSet};

use super::copyright::DocTree;
use super::files::ElfFile;
use super::package_json::NpmManifest;
use crate::image::dpkg::OsRelease;
use template_formats::manifest::Platform;
use template_formats::model::inventory::Inventory;
use template_formats::model::lockfile::Lockfile;

/// Where the Dockerfile installs the template's npm packages (its `agents` stage WORKDIR).
pub(crate) const NPM_PREFIX: &str = "/opt/coding-agents";
/// Where the Dockerfile installs npm itself (its `node` stage).
pub(super) const NPM_CLI_PREFIX: &str = "/usr/local/lib/node_modules/npm";

/// Everything one SBOM is made from; `document::document` is pure over it.
pub(crate) struct SbomInput<'a> {
    pub platform: Platform,
    /// The local reference the SBOM was made from (a tag).
    pub image: &'a str,
    /// The engine's image id, `sha256:<hex>`: the sha256 of the image config.
    pub image_id: &'a str,
    /// RFC 3339.
    pub created: &'a str,
    pub dpkg_status: &'a str,
    /// The copyright files and links under `/usr/share/doc`.
    pub docs: &'a DocTree,
    pub os_release: &'a OsRelease,
    pub debian_version: &'a str,
    pub lockfile: &'a Lockfile,
    /// Lockfile paths of platform-specific packages that are in the image.
    pub present: &'a BTreeSet<String>,
    pub inventory: &'a Inventory,
    /// The package.json files of the template's npm packages, by lockfile path.
    pub npm_manifests: &'a BTreeMap<String, NpmManifest>,
    /// npm's own package.json (key `""`) and those of the packages it bundles
    /// (`node_modules/<name>`, nested as npm nests them), under /usr/local/lib/node_modules/npm.
    pub npm_cli: &'a BTreeMap<String, NpmManifest>,
    /// The ELF programs no Debian package owns (`files::unowned`), sorted by path.
    pub elf_files: &'a [ElfFile],
    /// The image as the release publishes it (manifest digest, repository, tag), when the
    /// SBOM is made after the push (`release build`); the image package then carries its
    /// `pkg:oci` purl.
    pub published: Option<template_formats::sbom::PublishedImage<'a>>,
}

/// A relationship between two packages: (from, to, SPDX relationship type).
pub(super) type Edge = (String, String, &'static str);
