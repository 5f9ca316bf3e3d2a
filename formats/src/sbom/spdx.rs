//! SPDX 2.3 JSON: serde types for exactly the fields this tool writes, and the constructors
//! every element kind shares.

use serde::{Deserialize, Serialize};

pub const SPDX_VERSION: &str = "SPDX-2.3";
pub const NOASSERTION: &str = "NOASSERTION";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Document {
    pub spdx_version: String,
    pub data_license: String,
    #[serde(rename = "SPDXID")]
    pub spdx_id: String,
    pub name: String,
    pub document_namespace: String,
    pub creation_info: CreationInfo,
    pub packages: Vec<Package>,
    pub relationships: Vec<Relationship>,
    /// The ELF programs no Debian package owns (`xtask/src/image/sbom/files.rs`), sorted by
    /// path; the image CONTAINS each. Absent from documents without any.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub files: Vec<File>,
    /// The `LicenseRef-` ids the packages' license expressions use, each defined once.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub has_extracted_licensing_infos: Vec<ExtractedLicense>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtractedLicense {
    pub license_id: String,
    pub extracted_text: String,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreationInfo {
    pub created: String,
    pub creators: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Package {
    pub name: String,
    #[serde(rename = "SPDXID")]
    pub spdx_id: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub version_info: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub primary_package_purpose: Option<String>,
    /// `Person: name (email)` or `Organization: name (email)`: who supplies the package.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub supplier: Option<String>,
    pub download_location: String,
    /// False but for the image when it CONTAINS file entries (SPDX 2.3 §7.8: a package
    /// whose files were not analyzed must contain none): packages are listed, their files not.
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
    /// What the tool recorded about the package besides SPDX's own fields (SPDX 2.3 §12): for
    /// an npm package, its trust record.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub annotations: Vec<Annotation>,
}

/// An SPDX 2.3 annotation (spec §12, `packages[].annotations[]` in the JSON schema).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Annotation {
    /// RFC 3339, UTC.
    pub annotation_date: String,
    /// `OTHER` or `REVIEW`.
    pub annotation_type: String,
    /// `Tool: <name>`, `Person: ...` or `Organization: ...`.
    pub annotator: String,
    pub comment: String,
}

/// An SPDX 2.3 file element (spec §8): what `xtask/src/image/sbom/files.rs` lists.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct File {
    /// Relative to the image's root, `./usr/local/bin/node` (the spec's form).
    pub file_name: String,
    #[serde(rename = "SPDXID")]
    pub spdx_id: String,
    pub checksums: Vec<Checksum>,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub file_types: Vec<String>,
    pub license_concluded: String,
    pub copyright_text: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub comment: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Checksum {
    pub algorithm: String,
    pub checksum_value: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExternalRef {
    pub reference_category: String,
    pub reference_type: String,
    pub reference_locator: String,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Relationship {
    pub spdx_element_id: String,
    pub relationship_type: String,
    pub related_spdx_element: String,
}

/// The SPDXID prefix of the packages npm itself bundles (`node_modules/npm/node_modules/…`):
/// they come with the npm the inventory pins, not from the template's lockfile, so readers
/// that compare an SBOM's npm packages with the lockfile leave them out.
pub const NPM_BUNDLED_ID_PREFIX: &str = "SPDXRef-npmcli-";

/// `text` with every character an SPDX id may not hold (anything but letters, digits, `.`
/// and `-`) made `-`: the one rule for SPDXIDs and LicenseRefs.
pub fn id_chars(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// An SPDXID: the prefix and `text`, in the characters an SPDXID may hold.
pub fn spdx_id(prefix: &str, text: &str) -> String {
    format!("SPDXRef-{prefix}-{}", id_chars(text))
}

/// A CPE 2.3 name, the key NVD files advisories under.
pub fn cpe_ref(locator: String) -> ExternalRef {
    ExternalRef {
        reference_category: "SECURITY".into(),
        reference_type: "cpe23Type".into(),
        reference_locator: locator,
    }
}

pub fn purl_ref(locator: String) -> ExternalRef {
    ExternalRef {
        reference_category: "PACKAGE-MANAGER".into(),
        reference_type: "purl".into(),
        reference_locator: locator,
    }
}

pub fn package(name: &str, spdx_id: String, version: &str, download: &str) -> Package {
    Package {
        name: name.to_string(),
        spdx_id,
        version_info: Some(version.to_string()),
        primary_package_purpose: None,
        supplier: None,
        download_location: download.to_string(),
        files_analyzed: false,
        license_concluded: NOASSERTION.into(),
        license_declared: NOASSERTION.into(),
        copyright_text: NOASSERTION.into(),
        source_info: None,
        comment: None,
        checksums: Vec::new(),
        external_refs: Vec::new(),
        annotations: Vec::new(),
    }
}
