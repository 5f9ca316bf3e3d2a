//! `cargo xtask sbom`: an SPDX 2.3 JSON software bill of materials of one built image.
//!
//! Made from the image itself, not from the Dockerfile: the dpkg database and the copyright
//! files Debian installs (`/usr/share/doc/<pkg>/copyright`, which the Dockerfile keeps), the
//! Debian release (`/usr/lib/os-release`, `/etc/debian_version`), and the npm packages of the
//! committed lockfile that the image holds, with Node and npm from the inventory. The image is
//! read without being started, so another CPU's image needs no emulation.
//!
//! SPDX rather than CycloneDX 1.6: no maintained Rust crate writes CycloneDX 1.6
//! (`cyclonedx-bom` stops at 1.5) and the SPDX crates are unmaintained or generated at build
//! time, so the document is written here with serde types for exactly the fields it uses.
//! GitHub's `attest-sbom` and `gh attestation verify` read SPDX JSON.
//!
//! Deterministic: the same image, lockfile and clock give the same bytes. Every list is
//! sorted, the creation time is the caller's clock (`--now`, the release plan's) or else the
//! image's own creation time, never the wall clock, and the document namespace is derived
//! from the image id (the sha256 of its config).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::flags::SbomArgs;
use crate::image::engine;
use crate::manifest::{repo_root, Platform};
use crate::model::inventory::{Inventory, License, NodeRuntime};
use crate::model::lockfile::{LockEntry, Lockfile};
use crate::npm::inventory::INVENTORY_PATH;
use crate::npm::lockfile::name_of;
use crate::util::{atomic_write, print_json, sha256_hex};

pub(crate) const SPDX_VERSION: &str = "SPDX-2.3";
/// Where the Dockerfile installs the template's npm packages (its `agents` stage WORKDIR).
pub(crate) const NPM_PREFIX: &str = "/opt/coding-agents";
const LOCKFILE_PATH: &str = "template/package-lock.json";
const NOASSERTION: &str = "NOASSERTION";

/// `sbom-linux-amd64.spdx.json`: the release asset's name, fixed per platform so a verifier
/// looks up known names only.
pub(crate) fn sbom_file_name(platform: Platform) -> String {
    format!("sbom-{}.spdx.json", platform.to_string().replace('/', "-"))
}

// ---------------------------------------------------------------------------------------------
// SPDX 2.3 JSON, the fields this tool writes.

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Document {
    pub spdx_version: String,
    pub data_license: String,
    #[serde(rename = "SPDXID")]
    pub spdx_id: String,
    pub name: String,
    pub document_namespace: String,
    pub creation_info: CreationInfo,
    pub packages: Vec<Package>,
    pub relationships: Vec<Relationship>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct CreationInfo {
    pub created: String,
    pub creators: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Package {
    pub name: String,
    #[serde(rename = "SPDXID")]
    pub spdx_id: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub version_info: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub primary_package_purpose: Option<String>,
    pub download_location: String,
    /// Always false: packages are listed, their files are not.
    pub files_analyzed: bool,
    pub license_concluded: String,
    pub license_declared: String,
    pub copyright_text: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub source_info: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub comment: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub checksums: Vec<Checksum>,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub external_refs: Vec<ExternalRef>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Checksum {
    pub algorithm: String,
    pub checksum_value: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ExternalRef {
    pub reference_category: String,
    pub reference_type: String,
    pub reference_locator: String,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Relationship {
    pub spdx_element_id: String,
    pub relationship_type: String,
    pub related_spdx_element: String,
}

// ---------------------------------------------------------------------------------------------
// What the image says, parsed.

/// One installed Debian package from the dpkg database.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct DebPackage {
    pub name: String,
    pub version: String,
    pub architecture: String,
    /// The source package and its version, when they differ from the binary's.
    pub source: String,
    pub source_version: String,
}

/// Installed packages (`Status: install ok installed`), sorted by name and architecture.
pub(crate) fn dpkg_packages(status: &str) -> Vec<DebPackage> {
    let mut out: Vec<DebPackage> = status
        .split("\n\n")
        .filter_map(|stanza| {
            let field = |name: &str| {
                stanza
                    .lines()
                    .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                    .map(str::trim)
                    .filter(|v| !v.is_empty())
            };
            if field("Status")? != "install ok installed" {
                return None;
            }
            let name = field("Package")?.to_string();
            let version = field("Version")?.to_string();
            // `Source: gcc-12 (12.2.0-14)` names the source version when it differs.
            let (source, source_version) = match field("Source") {
                None => (name.clone(), version.clone()),
                Some(s) => match s.split_once(' ') {
                    Some((src, v)) => (
                        src.to_string(),
                        v.trim_matches(|c| c == '(' || c == ')').to_string(),
                    ),
                    None => (s.to_string(), version.clone()),
                },
            };
            Some(DebPackage {
                name,
                version,
                architecture: field("Architecture").unwrap_or("all").to_string(),
                source,
                source_version,
            })
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The SPDX expression of a machine-readable (DEP-5) Debian copyright file: every `Files`
/// paragraph's license joined with AND. `None` when the file is free-form or names a license
/// without an SPDX identifier (`public-domain`, `other`, exceptions): NOASSERTION is honest,
/// a guess is not.
pub(crate) fn copyright_license(text: &str) -> Option<String> {
    let mut paragraphs = text.split("\n\n");
    let header = paragraphs.next()?;
    if !header
        .lines()
        .any(|l| l.starts_with("Format:") && l.contains("copyright-format"))
    {
        return None;
    }
    let mut found = BTreeSet::new();
    for paragraph in paragraphs {
        let mut lines = paragraph.lines();
        if !paragraph.lines().any(|l| l.starts_with("Files:")) {
            continue;
        }
        let license = lines.find_map(|l| l.strip_prefix("License:"))?.trim();
        found.insert(debian_expression(license)?);
    }
    if found.is_empty() {
        return None;
    }
    let joined = if found.len() == 1 {
        found.into_iter().next().unwrap()
    } else {
        found
            .iter()
            .map(|e| {
                if e.contains(' ') {
                    format!("({e})")
                } else {
                    e.clone()
                }
            })
            .collect::<Vec<_>>()
            .join(" AND ")
    };
    spdx::Expression::parse(&joined).ok().map(|_| joined)
}

/// `GPL-2+ or Artistic` -> `GPL-2.0-or-later OR Artistic-1.0`; `None` for a name without an
/// SPDX identifier or a syntax DEP-5 allows but SPDX does not (commas, exceptions).
fn debian_expression(license: &str) -> Option<String> {
    let mut out = Vec::new();
    for (i, token) in license.split_whitespace().enumerate() {
        if i % 2 == 1 {
            out.push(match token.to_ascii_lowercase().as_str() {
                "or" => "OR",
                "and" => "AND",
                _ => return None,
            });
        } else {
            out.push(debian_license_id(token)?);
        }
    }
    (!out.is_empty()).then(|| out.join(" "))
}

fn debian_license_id(name: &str) -> Option<&'static str> {
    // Debian's short names (copyright-format 1.0, "License specification") that differ from
    // SPDX's; the rest are looked up as SPDX ids as they are.
    let (base, plus) = match name.strip_suffix('+') {
        Some(base) => (base, true),
        None => (name, false),
    };
    let gnu = |id: &'static str, later: &'static str| if plus { later } else { id };
    // Copyright files spell the same name in several cases and with or without `.0`.
    let key = base.to_ascii_lowercase();
    let key = key.strip_suffix(".0").unwrap_or(&key);
    Some(match key {
        "gpl-1" => gnu("GPL-1.0-only", "GPL-1.0-or-later"),
        "gpl-2" => gnu("GPL-2.0-only", "GPL-2.0-or-later"),
        "gpl-3" => gnu("GPL-3.0-only", "GPL-3.0-or-later"),
        "lgpl-2" => gnu("LGPL-2.0-only", "LGPL-2.0-or-later"),
        "lgpl-2.1" => gnu("LGPL-2.1-only", "LGPL-2.1-or-later"),
        "lgpl-3" => gnu("LGPL-3.0-only", "LGPL-3.0-or-later"),
        "agpl-3" => gnu("AGPL-3.0-only", "AGPL-3.0-or-later"),
        "gfdl-1.2" => gnu("GFDL-1.2-only", "GFDL-1.2-or-later"),
        "gfdl-1.3" => gnu("GFDL-1.3-only", "GFDL-1.3-or-later"),
        _ if plus => return None,
        "expat" => "MIT",
        "artistic" => "Artistic-1.0",
        "bsd-2-clause" => "BSD-2-Clause",
        "bsd-3-clause" => "BSD-3-Clause",
        "bsd-4-clause" => "BSD-4-Clause",
        "psf-2" => "PSF-2.0",
        "zlib" => "Zlib",
        _ => spdx::license_id(base)?.name,
    })
}

/// `/etc/os-release`-format text: the Debian release the image is built on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct OsRelease {
    pub id: String,
    pub version_id: String,
    pub codename: String,
    pub pretty_name: String,
}

pub(crate) fn os_release(text: &str) -> OsRelease {
    let mut out = OsRelease::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let value = value.trim().trim_matches('"').to_string();
        match key.trim() {
            "ID" => out.id = value,
            "VERSION_ID" => out.version_id = value,
            "VERSION_CODENAME" => out.codename = value,
            "PRETTY_NAME" => out.pretty_name = value,
            _ => {}
        }
    }
    out
}

/// Whether npm installs a package with these `os`/`cpu`/`libc` fields on `platform` (Debian:
/// glibc). A list matches a value it names, or, when it only excludes (`!win32`), any value it
/// does not exclude.
fn npm_field_matches(list: &Option<Vec<String>>, value: &str) -> bool {
    let Some(list) = list else { return true };
    if list.iter().any(|v| v == value) {
        return true;
    }
    list.iter().all(|v| v.starts_with('!')) && !list.iter().any(|v| v[1..] == *value)
}

pub(crate) fn npm_installs_on(entry: &LockEntry, platform: Platform) -> bool {
    npm_field_matches(&entry.os, "linux")
        && npm_field_matches(&entry.cpu, platform.npm_cpu())
        && npm_field_matches(&entry.libc, "glibc")
}

/// Lockfile entries npm installs on `platform` (not dev, not links, fitting os/cpu/libc). The
/// platform-specific ones among them are still checked against the image, because the
/// Dockerfile removes some that npm installed (the AVX2 OpenCode build).
pub(crate) fn npm_candidates(lock: &Lockfile, platform: Platform) -> Vec<(&str, &LockEntry)> {
    lock.installed()
        .filter(|(_, e)| !e.dev && !e.link && npm_installs_on(e, platform))
        .collect()
}

pub(crate) fn is_platform_specific(entry: &LockEntry) -> bool {
    entry.os.is_some() || entry.cpu.is_some() || entry.libc.is_some()
}

// ---------------------------------------------------------------------------------------------
// The document.

/// Everything one SBOM is made from; [`document`] is pure over it.
pub(crate) struct SbomInput<'a> {
    pub platform: Platform,
    /// The local reference the SBOM was made from (a tag).
    pub image: &'a str,
    /// The engine's image id, `sha256:<hex>`: the sha256 of the image config.
    pub image_id: &'a str,
    /// RFC 3339.
    pub created: &'a str,
    pub dpkg_status: &'a str,
    /// Package name -> text of `/usr/share/doc/<name>/copyright`.
    pub copyrights: &'a BTreeMap<String, String>,
    pub os_release: &'a OsRelease,
    pub debian_version: &'a str,
    pub lockfile: &'a Lockfile,
    /// Lockfile paths of platform-specific packages that are in the image.
    pub present: &'a BTreeSet<String>,
    pub inventory: &'a Inventory,
}

/// Characters an SPDXID may hold: letters, digits, `.` and `-`.
fn spdx_id(prefix: &str, text: &str) -> String {
    let clean: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("SPDXRef-{prefix}-{clean}")
}

/// Percent-encoding of a purl component: everything but unreserved characters.
fn purl_encode(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `pkg:npm/%40scope/name@1.0.0` (the scope's `@` encoded, as purl requires).
pub(crate) fn npm_purl(name: &str, version: &str) -> String {
    let path = match name.split_once('/') {
        Some((scope, name)) => format!("{}/{}", purl_encode(scope), purl_encode(name)),
        None => purl_encode(name),
    };
    format!("pkg:npm/{path}@{}", purl_encode(version))
}

/// `pkg:deb/debian/libc6@2.36-9%2Bdeb12u13?arch=amd64&distro=debian-12`.
pub(crate) fn deb_purl(p: &DebPackage, os: &OsRelease) -> String {
    let mut purl = format!(
        "pkg:deb/debian/{}@{}?arch={}",
        purl_encode(&p.name),
        purl_encode(&p.version),
        purl_encode(&p.architecture)
    );
    if !os.version_id.is_empty() {
        purl.push_str(&format!("&distro=debian-{}", purl_encode(&os.version_id)));
    }
    purl
}

/// SRI integrity (`sha512-<base64>`, possibly several) as SPDX checksums.
fn integrity_checksums(integrity: &str) -> Result<Vec<Checksum>> {
    use base64::Engine as _;
    let mut out = Vec::new();
    for part in integrity.split_whitespace() {
        let Some((algorithm, value)) = part.split_once('-') else {
            bail!("`{part}` is not subresource integrity (`sha512-<base64>`)");
        };
        let algorithm = match algorithm {
            "sha512" => "SHA512",
            "sha384" => "SHA384",
            "sha256" => "SHA256",
            "sha1" => "SHA1",
            other => bail!("`{other}` is not an integrity algorithm SPDX names"),
        };
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(value.split('?').next().unwrap_or(value))
            .with_context(|| format!("`{part}` does not hold base64"))?;
        out.push(Checksum {
            algorithm: algorithm.into(),
            checksum_value: hex::encode(bytes),
        });
    }
    out.sort();
    Ok(out)
}

fn purl_ref(locator: String) -> ExternalRef {
    ExternalRef {
        reference_category: "PACKAGE-MANAGER".into(),
        reference_type: "purl".into(),
        reference_locator: locator,
    }
}

fn package(name: &str, spdx_id: String, version: &str, download: &str) -> Package {
    Package {
        name: name.to_string(),
        spdx_id,
        version_info: Some(version.to_string()),
        primary_package_purpose: None,
        download_location: download.to_string(),
        files_analyzed: false,
        license_concluded: NOASSERTION.into(),
        license_declared: NOASSERTION.into(),
        copyright_text: NOASSERTION.into(),
        source_info: None,
        comment: None,
        checksums: Vec::new(),
        external_refs: Vec::new(),
    }
}

fn npm_license(license: Option<&License>) -> String {
    match license {
        Some(License::Spdx { expression }) if spdx::Expression::parse(expression).is_ok() => {
            expression.clone()
        }
        _ => NOASSERTION.into(),
    }
}

fn node_packages(node: &NodeRuntime, platform: Platform) -> Result<Vec<Package>> {
    let tarball = node.platforms.get(&platform).with_context(|| {
        format!("{INVENTORY_PATH} records no Node tarball for {platform}; run `cargo xtask lock`")
    })?;
    let mut out = Vec::new();
    for (name, t, purpose) in [
        ("node", tarball, "APPLICATION"),
        ("npm", &node.npm, "APPLICATION"),
    ] {
        let mut p = package(name, spdx_id("node", name), &t.version, &t.tarball);
        p.primary_package_purpose = Some(purpose.into());
        p.checksums = vec![Checksum {
            algorithm: "SHA512".into(),
            checksum_value: t.sha512.clone(),
        }];
        p.external_refs = vec![purl_ref(npm_purl(&t.package, &t.version))];
        p.comment = Some(format!(
            "installed under /usr/local from the npm registry tarball of {}",
            t.package
        ));
        out.push(p);
    }
    Ok(out)
}

/// The SPDX document of one image.
pub(crate) fn document(input: &SbomInput<'_>) -> Result<Document> {
    let platform_slug = input.platform.to_string().replace('/', "-");
    let (root, image_hex) = image_package(input)?;
    let mut packages = vec![os_package(input.os_release, input.debian_version)];
    packages.extend(deb_packages(input)?);
    packages.extend(node_packages(&input.inventory.node, input.platform)?);
    packages.extend(npm_packages(input)?);
    packages.sort_by(|a, b| a.spdx_id.cmp(&b.spdx_id));
    ensure_unique_ids(&packages)?;
    let relationships = relationships(&root.spdx_id, &packages);
    packages.insert(0, root);

    Ok(Document {
        spdx_version: SPDX_VERSION.into(),
        data_license: "CC0-1.0".into(),
        spdx_id: "SPDXRef-DOCUMENT".into(),
        name: format!("coding-agent-{platform_slug}"),
        // A URI unique to this document: one image, one platform.
        document_namespace: format!(
            "https://spdx.org/spdxdocs/coding-agent-{platform_slug}-{image_hex}"
        ),
        creation_info: CreationInfo {
            created: input.created.to_string(),
            creators: vec![format!("Tool: cargo-xtask-{}", env!("CARGO_PKG_VERSION"))],
        },
        packages,
        relationships,
    })
}

/// The root package, the image itself, and the hex of its id.
fn image_package<'a>(input: &SbomInput<'a>) -> Result<(Package, &'a str)> {
    let Some(image_hex) = input.image_id.strip_prefix("sha256:") else {
        bail!(
            "the image id of {} is `{}`, not sha256:<hex>",
            input.image,
            input.image_id
        );
    };
    let mut root = package("coding-agent", ROOT_ID.into(), input.image, NOASSERTION);
    root.primary_package_purpose = Some("CONTAINER".into());
    root.checksums = vec![Checksum {
        algorithm: "SHA256".into(),
        checksum_value: image_hex.to_string(),
    }];
    root.comment = Some(format!(
        "the {} image {}; its image id (the sha256 of its config) is {}",
        input.platform, input.image, input.image_id
    ));
    Ok((root, image_hex))
}

const ROOT_ID: &str = "SPDXRef-image";

fn os_package(os: &OsRelease, debian_version: &str) -> Package {
    let mut base = package(
        if os.id.is_empty() { "debian" } else { &os.id },
        spdx_id("os", "debian"),
        debian_version.trim(),
        NOASSERTION,
    );
    base.primary_package_purpose = Some("OPERATING-SYSTEM".into());
    base.comment = Some(format!(
        "{} (suite {}): the base root filesystem made by mmdebstrap from Debian's mirror",
        os.pretty_name, os.codename
    ));
    base
}

fn deb_packages(input: &SbomInput<'_>) -> Result<Vec<Package>> {
    let debs = dpkg_packages(input.dpkg_status);
    if debs.is_empty() {
        bail!(
            "{}: the dpkg database lists no installed package",
            input.image
        );
    }
    let mut out = Vec::new();
    for d in &debs {
        let mut p = package(
            &d.name,
            spdx_id("deb", &format!("{}-{}", d.name, d.architecture)),
            &d.version,
            NOASSERTION,
        );
        p.primary_package_purpose = Some("LIBRARY".into());
        p.source_info = Some(format!(
            "built from the Debian source package {} {}",
            d.source, d.source_version
        ));
        if let Some(expr) = input
            .copyrights
            .get(&d.name)
            .and_then(|t| copyright_license(t))
        {
            p.license_declared = expr;
        }
        p.external_refs = vec![purl_ref(deb_purl(d, input.os_release))];
        out.push(p);
    }
    Ok(out)
}

/// The lockfile's packages for the platform, leaving out the platform binaries the image lacks.
fn npm_packages(input: &SbomInput<'_>) -> Result<Vec<Package>> {
    let licenses: BTreeMap<(&str, &str), &License> = input
        .inventory
        .packages
        .iter()
        .map(|p| ((p.path.as_str(), p.version.as_str()), &p.license))
        .collect();
    let mut out = Vec::new();
    for (path, entry) in npm_candidates(input.lockfile, input.platform) {
        if is_platform_specific(entry) && !input.present.contains(path) {
            continue;
        }
        let name = name_of(path, entry);
        let version = entry
            .version
            .as_deref()
            .with_context(|| format!("{LOCKFILE_PATH}: `{path}` has no version"))?;
        let resolved = entry
            .resolved
            .as_deref()
            .with_context(|| format!("{LOCKFILE_PATH}: `{path}` has no resolved URL"))?;
        let integrity = entry
            .integrity
            .as_deref()
            .with_context(|| format!("{LOCKFILE_PATH}: `{path}` has no integrity"))?;
        let mut p = package(&name, spdx_id("npm", path), version, resolved);
        p.primary_package_purpose = Some("LIBRARY".into());
        p.license_declared = npm_license(licenses.get(&(path, version)).copied());
        p.checksums = integrity_checksums(integrity)
            .with_context(|| format!("{LOCKFILE_PATH}: the integrity of `{path}`"))?;
        p.external_refs = vec![purl_ref(npm_purl(&name, version))];
        p.comment = Some(format!("{NPM_PREFIX}/{path}"));
        out.push(p);
    }
    Ok(out)
}

fn ensure_unique_ids(packages: &[Package]) -> Result<()> {
    let mut seen = BTreeSet::new();
    for p in packages {
        if !seen.insert(p.spdx_id.as_str()) {
            bail!(
                "two packages would share the SPDX id {}; rename one",
                p.spdx_id
            );
        }
    }
    Ok(())
}

/// The root CONTAINS every package; the document DESCRIBES the root. Sorted.
fn relationships(root_id: &str, packages: &[Package]) -> Vec<Relationship> {
    let mut relationships: Vec<Relationship> = packages
        .iter()
        .map(|p| Relationship {
            spdx_element_id: root_id.to_string(),
            relationship_type: "CONTAINS".into(),
            related_spdx_element: p.spdx_id.clone(),
        })
        .collect();
    relationships.push(Relationship {
        spdx_element_id: "SPDXRef-DOCUMENT".into(),
        relationship_type: "DESCRIBES".into(),
        related_spdx_element: root_id.to_string(),
    });
    relationships.sort();
    relationships
}

/// The file's bytes: pretty JSON and a final newline.
pub(crate) fn document_bytes(doc: &Document) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(doc).expect("an SPDX document serializes");
    bytes.push(b'\n');
    bytes
}

/// What `sbom --json` prints.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SbomReport {
    pub output: PathBuf,
    pub sha256: String,
    pub size: u64,
    pub image: String,
    pub image_id: String,
    pub platform: Platform,
    pub debian_packages: usize,
    pub npm_packages: usize,
    pub packages: usize,
}

// ---------------------------------------------------------------------------------------------
// The edge: the engine and the repository's files.

async fn read_one(docker: &bollard::Docker, image: &str, path: &str) -> Result<Option<Vec<u8>>> {
    match engine::read_image_files(docker, image, &engine::new_run_id("sbom"), path).await {
        Ok(files) => Ok(files.into_iter().next().map(|(_, bytes)| bytes)),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

fn is_not_found(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        matches!(
            e.downcast_ref::<bollard::errors::Error>(),
            Some(bollard::errors::Error::DockerResponseServerError {
                status_code: 404,
                ..
            })
        )
    })
}

pub async fn run(args: SbomArgs) -> Result<ExitCode> {
    let root = repo_root();
    let lock_path = root.join(LOCKFILE_PATH);
    let lock_text = std::fs::read_to_string(&lock_path)
        .with_context(|| format!("cannot read {}", lock_path.display()))?;
    let lockfile = Lockfile::parse(&lock_text)?;
    let inventory = Inventory::load(&root.join(INVENTORY_PATH))?;

    let docker = engine::connect().await?;
    let image = &args.image;
    let (image_id, created) = inspect_image(&docker, &args).await?;
    let contents = ImageContents::read(&docker, image, &lockfile, args.platform).await?;

    let doc = document(&SbomInput {
        platform: args.platform,
        image,
        image_id: &image_id,
        created: &created,
        dpkg_status: &contents.dpkg_status,
        copyrights: &contents.copyrights,
        os_release: &contents.os_release,
        debian_version: &contents.debian_version,
        lockfile: &lockfile,
        present: &contents.present,
        inventory: &inventory,
    })?;
    let bytes = document_bytes(&doc);
    atomic_write(&args.output, &bytes)?;
    let report = sbom_report(&args, &doc, &bytes, image_id);
    eprintln!(
        "{}: {} packages ({} Debian, {} npm), {} bytes",
        report.output.display(),
        report.packages,
        report.debian_packages,
        report.npm_packages,
        report.size
    );
    if args.json {
        print_json(&report)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The image's id and the SBOM's creation time (`--now`, else the image's), checked to be for
/// the platform.
async fn inspect_image(docker: &bollard::Docker, args: &SbomArgs) -> Result<(String, String)> {
    let image = &args.image;
    let inspect = engine::inspect_image(docker, image)
        .await?
        .with_context(|| format!("the image {image} is not in the Docker engine; build it first (`cargo xtask build --platform {}`)", args.platform))?;
    engine::ensure_image_platform(image, &inspect, args.platform)?;
    let image_id = inspect
        .id
        .clone()
        .with_context(|| format!("the engine reports no id for {image}"))?;
    let created = match (&args.now, &inspect.created) {
        (Some(now), _) => crate::util::now_or(Some(now))?,
        (None, Some(created)) => chrono::DateTime::parse_from_rfc3339(created)
            .with_context(|| format!("{image}: the engine's creation time `{created}`"))?
            .with_timezone(&chrono::Utc),
        (None, None) => bail!("{image} has no creation time; pass --now"),
    }
    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    Ok((image_id, created))
}

/// What the SBOM reads from inside the image, without starting it.
struct ImageContents {
    dpkg_status: String,
    os_release: OsRelease,
    debian_version: String,
    copyrights: BTreeMap<String, String>,
    present: BTreeSet<String>,
}

impl ImageContents {
    async fn read(
        docker: &bollard::Docker,
        image: &str,
        lockfile: &Lockfile,
        platform: Platform,
    ) -> Result<ImageContents> {
        let text = |bytes: Option<Vec<u8>>| {
            String::from_utf8_lossy(&bytes.unwrap_or_default()).into_owned()
        };
        let status = read_one(docker, image, "/var/lib/dpkg/status")
            .await?
            .with_context(|| format!("{image} has no /var/lib/dpkg/status: is it Debian-based?"))?;
        let dpkg_status = String::from_utf8_lossy(&status).into_owned();
        // /etc/os-release is a symbolic link; the archive API would return the link itself.
        let os_release = os_release(&text(read_one(docker, image, "/usr/lib/os-release").await?));
        let debian_version = text(read_one(docker, image, "/etc/debian_version").await?);
        let docs =
            engine::read_image_files(docker, image, &engine::new_run_id("sbom"), "/usr/share/doc")
                .await?;
        let mut present = BTreeSet::new();
        for (path, entry) in npm_candidates(lockfile, platform) {
            if is_platform_specific(entry)
                && read_one(docker, image, &format!("{NPM_PREFIX}/{path}/package.json"))
                    .await?
                    .is_some()
            {
                present.insert(path.to_string());
            }
        }
        Ok(ImageContents {
            dpkg_status,
            os_release,
            debian_version,
            copyrights: copyrights(docs),
            present,
        })
    }
}

/// Package name -> copyright text, from the files under /usr/share/doc.
fn copyrights(docs: Vec<(String, Vec<u8>)>) -> BTreeMap<String, String> {
    let mut copyrights = BTreeMap::new();
    for (path, bytes) in docs {
        let parts: Vec<&str> = path.split('/').collect();
        if let ["doc", name, "copyright"] = parts.as_slice() {
            copyrights.insert(
                name.to_string(),
                String::from_utf8_lossy(&bytes).into_owned(),
            );
        }
    }
    copyrights
}

fn sbom_report(args: &SbomArgs, doc: &Document, bytes: &[u8], image_id: String) -> SbomReport {
    let count = |prefix: &str| {
        doc.packages
            .iter()
            .filter(|p| p.spdx_id.starts_with(prefix))
            .count()
    };
    SbomReport {
        output: args.output.clone(),
        sha256: sha256_hex(bytes),
        size: bytes.len() as u64,
        image: args.image.clone(),
        image_id,
        platform: args.platform,
        debian_packages: count("SPDXRef-deb-"),
        npm_packages: count("SPDXRef-npm-"),
        packages: doc.packages.len(),
    }
}

/// Checks a file is an SPDX document this tool could have written for `platform`; used by
/// `receipt write` so a receipt never hashes something else under an SBOM's name.
pub(crate) fn check_file(path: &Path, platform: Platform) -> Result<Document> {
    let bytes = crate::bounded_read::read_regular(
        path,
        crate::bounded_read::MAX_PARSED_ARTIFACT_BYTES,
        "SBOM",
    )?;
    let doc: Document = serde_json::from_slice(&bytes).with_context(|| {
        format!(
            "{} is not an SPDX 2.3 document of this tool",
            path.display()
        )
    })?;
    let expected = format!("coding-agent-{}", platform.to_string().replace('/', "-"));
    if doc.spdx_version != SPDX_VERSION || doc.name != expected {
        bail!(
            "{} is `{}` {}, not the {SPDX_VERSION} SBOM of {platform} (`{expected}`)",
            path.display(),
            doc.name,
            doc.spdx_version
        );
    }
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = "\
Package: libc6
Status: install ok installed
Architecture: amd64
Source: glibc
Version: 2.36-9+deb12u13

Package: libstdc++6
Status: install ok installed
Architecture: amd64
Source: gcc-12 (12.2.0-14)
Version: 12.2.0-14+deb12u1

Package: removed-one
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0
";

    const DEP5: &str = "\
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: glibc

Files: *
Copyright: 1991-2023 Free Software Foundation
License: LGPL-2.1+

Files: debian/*
Copyright: Debian
License: GPL-2+ or Artistic

License: LGPL-2.1+
 The text.
";

    const OS_RELEASE: &str = "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\nVERSION_CODENAME=bookworm\nID=debian\n";

    fn lockfile() -> Lockfile {
        Lockfile::parse(
            r#"{"lockfileVersion": 3, "packages": {
              "": {"name": "template"},
              "node_modules/@scope/cli": {"version": "1.2.3",
                "resolved": "https://registry.npmjs.org/@scope/cli/-/cli-1.2.3.tgz",
                "integrity": "sha512-AAEC"},
              "node_modules/@scope/cli-linux-x64": {"version": "1.2.3", "optional": true,
                "os": ["linux"], "cpu": ["x64"],
                "resolved": "https://registry.npmjs.org/@scope/cli-linux-x64/-/cli-linux-x64-1.2.3.tgz",
                "integrity": "sha512-AwQF"},
              "node_modules/@scope/cli-linux-arm64": {"version": "1.2.3", "optional": true,
                "os": ["linux"], "cpu": ["arm64"],
                "resolved": "https://registry.npmjs.org/@scope/cli-linux-arm64/-/cli-linux-arm64-1.2.3.tgz",
                "integrity": "sha512-BgcI"},
              "node_modules/@scope/cli-linux-x64-musl": {"version": "1.2.3", "optional": true,
                "os": ["linux"], "cpu": ["x64"], "libc": ["musl"],
                "resolved": "https://registry.npmjs.org/x/-/x-1.2.3.tgz", "integrity": "sha512-CQ=="},
              "node_modules/@scope/cli-darwin-x64": {"version": "1.2.3", "optional": true,
                "os": ["darwin"], "cpu": ["x64"],
                "resolved": "https://registry.npmjs.org/y/-/y-1.2.3.tgz", "integrity": "sha512-Cg=="},
              "node_modules/devtool": {"version": "1.0.0", "dev": true,
                "resolved": "https://registry.npmjs.org/devtool/-/devtool-1.0.0.tgz", "integrity": "sha512-Cw=="}
            }}"#,
        )
        .unwrap()
    }

    fn inventory() -> Inventory {
        let mut value: serde_json::Value =
            serde_json::from_str(include_str!("../../../template/inventory.json")).unwrap();
        value["packages"] = serde_json::json!([{
            "name": "@scope/cli", "version": "1.2.3", "path": "node_modules/@scope/cli",
            "top_level": true, "integrity": "sha512-AAEC",
            "resolved": "https://registry.npmjs.org/@scope/cli/-/cli-1.2.3.tgz",
            "install_script": false, "prerelease": false,
            "license": {"kind": "spdx", "expression": "Apache-2.0 OR MIT"}
        }]);
        serde_json::from_value(value).unwrap()
    }

    fn make(platform: Platform, present: &[&str], created: &str) -> Document {
        let copyrights = BTreeMap::from([("libc6".to_string(), DEP5.to_string())]);
        let lock = lockfile();
        let inventory = inventory();
        let present: BTreeSet<String> = present.iter().map(|s| s.to_string()).collect();
        let os = os_release(OS_RELEASE);
        document(&SbomInput {
            platform,
            image: "coding-agent:abc",
            image_id: &format!("sha256:{}", "ab".repeat(32)),
            created,
            dpkg_status: STATUS,
            copyrights: &copyrights,
            os_release: &os,
            debian_version: "12.12\n",
            lockfile: &lock,
            present: &present,
            inventory: &inventory,
        })
        .unwrap()
    }

    fn find<'a>(doc: &'a Document, id: &str) -> &'a Package {
        doc.packages.iter().find(|p| p.spdx_id == id).unwrap()
    }

    #[test]
    fn installed_debian_packages_with_source_and_arch() {
        let debs = dpkg_packages(STATUS);
        assert_eq!(debs.len(), 2);
        assert_eq!(debs[0].name, "libc6");
        assert_eq!(
            (debs[0].source.as_str(), debs[0].source_version.as_str()),
            ("glibc", "2.36-9+deb12u13")
        );
        assert_eq!(
            (debs[1].source.as_str(), debs[1].source_version.as_str()),
            ("gcc-12", "12.2.0-14")
        );
    }

    #[test]
    fn dep5_licenses_become_spdx_expressions_or_nothing() {
        assert_eq!(
            copyright_license(DEP5).as_deref(),
            Some("(GPL-2.0-or-later OR Artistic-1.0) AND LGPL-2.1-or-later")
        );
        assert_eq!(
            copyright_license("This package was debianized by someone."),
            None
        );
        let public_domain = DEP5.replace("License: GPL-2+ or Artistic", "License: public-domain");
        assert_eq!(
            copyright_license(&public_domain),
            None,
            "a guess is not a license"
        );
        let cased = DEP5.replace("License: GPL-2+ or Artistic", "License: BSD-3-clause");
        assert_eq!(
            copyright_license(&cased).as_deref(),
            Some("BSD-3-Clause AND LGPL-2.1-or-later")
        );
    }

    #[test]
    fn purls_encode_scopes_epochs_and_plus() {
        assert_eq!(
            npm_purl("@scope/cli", "1.2.3"),
            "pkg:npm/%40scope/cli@1.2.3"
        );
        assert_eq!(npm_purl("ws", "8.18.0"), "pkg:npm/ws@8.18.0");
        let libc = &dpkg_packages(STATUS)[0];
        assert_eq!(
            deb_purl(libc, &os_release(OS_RELEASE)),
            "pkg:deb/debian/libc6@2.36-9%2Bdeb12u13?arch=amd64&distro=debian-12"
        );
    }

    #[test]
    fn the_document_lists_what_the_platform_installs() {
        let doc = make(
            Platform::LinuxAmd64,
            &["node_modules/@scope/cli-linux-x64"],
            "2026-11-30T06:17:00Z",
        );
        assert_eq!(doc.spdx_version, "SPDX-2.3");
        assert_eq!(doc.packages[0].spdx_id, "SPDXRef-image");
        let names: Vec<&str> = doc.packages.iter().map(|p| p.name.as_str()).collect();
        for wanted in [
            "libc6",
            "libstdc++6",
            "debian",
            "node",
            "npm",
            "@scope/cli",
            "@scope/cli-linux-x64",
        ] {
            assert!(names.contains(&wanted), "{wanted} missing from {names:?}");
        }
        for unwanted in [
            "removed-one",
            "@scope/cli-linux-arm64",
            "@scope/cli-linux-x64-musl",
            "@scope/cli-darwin-x64",
            "devtool",
        ] {
            assert!(!names.contains(&unwanted), "{unwanted} listed: {names:?}");
        }
        let cli = find(&doc, "SPDXRef-npm-node-modules--scope-cli");
        assert_eq!(cli.license_declared, "Apache-2.0 OR MIT");
        assert_eq!(
            cli.checksums,
            [Checksum {
                algorithm: "SHA512".into(),
                checksum_value: "000102".into()
            }]
        );
        assert_eq!(
            cli.download_location,
            "https://registry.npmjs.org/@scope/cli/-/cli-1.2.3.tgz"
        );
        assert_eq!(
            cli.external_refs[0].reference_locator,
            "pkg:npm/%40scope/cli@1.2.3"
        );
        let libc = find(&doc, "SPDXRef-deb-libc6-amd64");
        assert_eq!(
            libc.license_declared,
            "(GPL-2.0-or-later OR Artistic-1.0) AND LGPL-2.1-or-later"
        );
        assert_eq!(
            find(&doc, "SPDXRef-deb-libstdc--6-amd64").license_declared,
            NOASSERTION
        );
        let node = find(&doc, "SPDXRef-node-node");
        assert_eq!(
            node.version_info.as_deref(),
            Some(inventory().node.version.as_str())
        );
        assert_eq!(
            node.checksums[0].checksum_value,
            inventory().node.platforms[&Platform::LinuxAmd64].sha512
        );
        assert_eq!(
            find(&doc, "SPDXRef-os-debian").version_info.as_deref(),
            Some("12.12")
        );
        // The image contains every other package, and the document describes the image.
        assert_eq!(doc.relationships.len(), doc.packages.len());
        assert!(doc
            .relationships
            .iter()
            .any(|r| r.spdx_element_id == "SPDXRef-DOCUMENT"
                && r.relationship_type == "DESCRIBES"
                && r.related_spdx_element == "SPDXRef-image"));
        // The platform binary npm installed but the image lacks is not listed.
        let without = make(Platform::LinuxAmd64, &[], "2026-11-30T06:17:00Z");
        assert_eq!(without.packages.len(), doc.packages.len() - 1);
        // arm64 gets its own binaries and Node.
        let arm = make(
            Platform::LinuxArm64,
            &["node_modules/@scope/cli-linux-arm64"],
            "2026-11-30T06:17:00Z",
        );
        assert!(arm
            .packages
            .iter()
            .any(|p| p.name == "@scope/cli-linux-arm64"));
        assert_ne!(arm.document_namespace, doc.document_namespace);
    }

    #[test]
    fn the_same_inputs_give_the_same_bytes_and_the_clock_is_an_input() {
        let a = document_bytes(&make(Platform::LinuxAmd64, &[], "2026-11-30T06:17:00Z"));
        let b = document_bytes(&make(Platform::LinuxAmd64, &[], "2026-11-30T06:17:00Z"));
        assert_eq!(a, b);
        let later = document_bytes(&make(Platform::LinuxAmd64, &[], "2026-12-03T06:17:00Z"));
        assert_ne!(a, later);
        let doc: Document = serde_json::from_slice(&a).unwrap();
        assert_eq!(doc.creation_info.created, "2026-11-30T06:17:00Z");
        assert_eq!(
            doc.document_namespace,
            format!(
                "https://spdx.org/spdxdocs/coding-agent-linux-amd64-{}",
                "ab".repeat(32)
            )
        );
        // Required SPDX 2.3 document fields, spelled as the spec spells them.
        let value: serde_json::Value = serde_json::from_slice(&a).unwrap();
        for key in [
            "spdxVersion",
            "dataLicense",
            "SPDXID",
            "name",
            "documentNamespace",
            "creationInfo",
        ] {
            assert!(value.get(key).is_some(), "{key}");
        }
        for p in value["packages"].as_array().unwrap() {
            for key in ["name", "SPDXID", "downloadLocation", "filesAnalyzed"] {
                assert!(p.get(key).is_some(), "{key} in {p}");
            }
            let id = p["SPDXID"].as_str().unwrap();
            assert!(
                id.strip_prefix("SPDXRef-")
                    .unwrap()
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-'),
                "{id}"
            );
        }
    }

    #[test]
    fn npm_platform_fields_follow_npm() {
        let field = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert!(npm_field_matches(&None, "linux"));
        assert!(npm_field_matches(&field(&["linux", "darwin"]), "linux"));
        assert!(!npm_field_matches(&field(&["darwin"]), "linux"));
        assert!(npm_field_matches(&field(&["!win32"]), "linux"));
        assert!(!npm_field_matches(&field(&["!linux"]), "linux"));
    }

    #[test]
    fn receipt_write_accepts_only_this_tool_s_sbom_of_the_platform() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(sbom_file_name(Platform::LinuxAmd64));
        let doc = make(Platform::LinuxAmd64, &[], "2026-11-30T06:17:00Z");
        std::fs::write(&path, document_bytes(&doc)).unwrap();
        assert_eq!(check_file(&path, Platform::LinuxAmd64).unwrap(), doc);
        let err = check_file(&path, Platform::LinuxArm64).unwrap_err();
        assert!(format!("{err:#}").contains("linux/arm64"), "{err:#}");
        std::fs::write(&path, br#"{"bomFormat": "CycloneDX"}"#).unwrap();
        let err = check_file(&path, Platform::LinuxAmd64).unwrap_err();
        assert!(
            format!("{err:#}").contains("is not an SPDX 2.3 document"),
            "{err:#}"
        );
    }

    #[test]
    fn file_names_are_fixed_per_platform() {
        assert_eq!(
            sbom_file_name(Platform::LinuxArm64),
            "sbom-linux-arm64.spdx.json"
        );
    }

    #[test]
    fn copyrights_come_only_from_doc_name_copyright() {
        let docs = vec![
            (
                "doc/libc6/copyright".to_string(),
                b"License: LGPL-2.1".to_vec(),
            ),
            ("doc/libc6/changelog.gz".to_string(), b"x".to_vec()),
            ("doc/libc6/extra/copyright".to_string(), b"y".to_vec()),
        ];
        assert_eq!(
            copyrights(docs),
            BTreeMap::from([("libc6".to_string(), "License: LGPL-2.1".to_string())])
        );
    }

    #[test]
    fn the_root_contains_every_package_and_ids_must_be_unique() {
        let a = package("a", "SPDXRef-npm-a".into(), "1", NOASSERTION);
        let rels = relationships(ROOT_ID, std::slice::from_ref(&a));
        assert_eq!(rels.len(), 2);
        assert!(rels.iter().any(|r| r.relationship_type == "DESCRIBES"
            && r.spdx_element_id == "SPDXRef-DOCUMENT"
            && r.related_spdx_element == ROOT_ID));
        assert!(rels.iter().any(|r| r.relationship_type == "CONTAINS"
            && r.spdx_element_id == ROOT_ID
            && r.related_spdx_element == "SPDXRef-npm-a"));
        assert!(ensure_unique_ids(std::slice::from_ref(&a)).is_ok());
        let err = ensure_unique_ids(&[a.clone(), a]).unwrap_err();
        assert!(err.to_string().contains("SPDXRef-npm-a"), "{err}");
    }
}
