//! The SBOM files a release carries per platform: SPDX 2.3 ([`spdx`], the primary form) and
//! its CycloneDX 1.5 form ([`cyclonedx`]), their fixed asset names, and the checks that a
//! file is one of them. The xtask's `image::sbom` makes the document from an image; the
//! verifier reads it.

pub mod cyclonedx;
pub mod spdx;

use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::manifest::Platform;
pub use cyclonedx::cyclonedx_file_name;
pub use spdx::{Document, NPM_BUNDLED_ID_PREFIX, SPDX_VERSION};

/// `sbom-linux-amd64.spdx.json`: the release asset's name, fixed per platform so a verifier
/// looks up known names only.
pub fn sbom_file_name(platform: Platform) -> String {
    format!("sbom-{}.spdx.json", platform.slug())
}

/// Both SBOM assets of a platform: the SPDX file, then its CycloneDX form.
pub fn sbom_file_names(platform: Platform) -> [String; 2] {
    [sbom_file_name(platform), cyclonedx_file_name(platform)]
}

/// The release's name of one platform's image: where it was published, its manifest digest
/// (the digest consumers pull and the receipt records as `platforms[].digest`), and the
/// release tag. The SBOM names the image by these, not only by its config digest, so a
/// scanner or auditor can match it to what a consumer runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PublishedImage<'a> {
    /// `host[:port]/path`, as the receipt's `index.repository`.
    pub repository: &'a str,
    /// `sha256:<hex>`.
    pub manifest_digest: &'a str,
    pub tag: &'a str,
}

/// The published image as a package URL of the purl specification's `oci` type
/// (github.com/package-url/purl-spec, PURL-TYPES.rst, "oci"): the name is the repository's
/// last path segment, lowercase; the version is the manifest digest with its `:` percent-
/// encoded; `repository_url` the repository as the spec's examples write it
/// (`docker.io/library/debian`, no scheme); `arch` and `tag` qualifiers; qualifier keys in
/// lexical order, as the canonical form (PURL-SPECIFICATION.rst) sorts them.
pub fn image_purl(image: &PublishedImage<'_>, platform: Platform) -> String {
    let name = image
        .repository
        .rsplit('/')
        .next()
        .unwrap_or(image.repository)
        .to_ascii_lowercase();
    format!(
        "pkg:oci/{name}@{}?arch={}&repository_url={}&tag={}",
        image.manifest_digest.replace(':', "%3A"),
        platform.arch(),
        image.repository,
        image.tag
    )
}

/// The file's bytes: pretty JSON and a final newline.
pub fn document_bytes(doc: &Document) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(doc).expect("an SPDX document serializes");
    bytes.push(b'\n');
    bytes
}

/// Checks a file is an SPDX document this tool could have written for `platform`; used by
/// `receipt write` so a receipt never hashes something else under an SBOM's name.
pub fn check_file(path: &Path, platform: Platform) -> Result<Document> {
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
    let expected = format!("coding-agent-{}", platform.slug());
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
