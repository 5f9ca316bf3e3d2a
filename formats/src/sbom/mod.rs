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
