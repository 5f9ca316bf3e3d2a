//! OCI media types and the canonical multi-arch image index: the same images always give the
//! same index bytes and digest (`publish` writes them, `receipt verify` recomputes them).

use std::str::FromStr;

use crate::model::publish::IndexEntry;

use anyhow::{anyhow, bail, Result};
use oci_spec::image::{
    Arch, DescriptorBuilder, Digest as OciDigest, ImageIndexBuilder, MediaType, Os, PlatformBuilder,
};

pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
pub const OCI_LAYER_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
pub const OCI_LAYER_ZSTD: &str = "application/vnd.oci.image.layer.v1.tar+zstd";

/// Every manifest type a tag or digest may resolve to; sent as `Accept`.
pub const MANIFEST_ACCEPT: &str = "application/vnd.oci.image.index.v1+json, \
    application/vnd.oci.image.manifest.v1+json, \
    application/vnd.docker.distribution.manifest.list.v2+json, \
    application/vnd.docker.distribution.manifest.v2+json";

/// One platform's image manifest as the index lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct PlatformManifest<'a> {
    pub os: &'a str,
    pub architecture: &'a str,
    pub variant: Option<&'a str>,
    pub digest: &'a str,
    pub media_type: &'a str,
    pub size: u64,
}

impl PlatformManifest<'_> {
    /// `os/architecture[/variant]`, the order of the index and how errors name an entry.
    pub fn platform(&self) -> String {
        match self.variant {
            Some(v) => format!("{}/{}/{v}", self.os, self.architecture),
            None => format!("{}/{}", self.os, self.architecture),
        }
    }
}

/// The canonical bytes of the OCI image index over `entries`: sorted by platform
/// (`os/architecture/variant`), compact JSON, no annotations, no timestamps. Equal inputs in
/// any order give equal bytes; a platform listed twice is an error.
pub fn index_bytes(entries: &[PlatformManifest<'_>]) -> Result<Vec<u8>> {
    let mut sorted: Vec<&PlatformManifest> = entries.iter().collect();
    sorted.sort_by_key(|e| (e.os, e.architecture, e.variant));
    if let Some(w) = sorted
        .windows(2)
        .find(|w| w[0].platform() == w[1].platform())
    {
        bail!("{} appears twice in the index", w[0].platform());
    }
    let mut manifests = Vec::new();
    for e in sorted {
        let mut platform = PlatformBuilder::default()
            .architecture(Arch::from(e.architecture))
            .os(Os::from(e.os));
        if let Some(variant) = e.variant {
            platform = platform.variant(variant.to_string());
        }
        let digest = OciDigest::from_str(e.digest)
            .map_err(|err| anyhow!("{}: digest `{}`: {err}", e.platform(), e.digest))?;
        manifests.push(
            DescriptorBuilder::default()
                .media_type(MediaType::from(e.media_type))
                .digest(digest)
                .size(e.size)
                .platform(platform.build()?)
                .build()?,
        );
    }
    let index = ImageIndexBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageIndex)
        .manifests(manifests)
        .build()?;
    Ok(serde_json::to_vec(&index)?)
}

/// The canonical bytes of the OCI image index over `entries`: sorted by platform, compact
/// JSON, no annotations, no timestamps. Equal inputs in any order give equal bytes.
pub fn index_bytes_of(entries: &[IndexEntry]) -> Result<Vec<u8>> {
    let manifests: Vec<PlatformManifest> = entries
        .iter()
        .map(|e| PlatformManifest {
            os: &e.os,
            architecture: &e.architecture,
            variant: e.variant.as_deref(),
            digest: &e.digest,
            media_type: &e.media_type,
            size: e.size,
        })
        .collect();
    index_bytes(&manifests)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry<'a>(arch: &'a str, digest: &'a str) -> PlatformManifest<'a> {
        PlatformManifest {
            os: "linux",
            architecture: arch,
            variant: None,
            digest,
            media_type: OCI_MANIFEST,
            size: 500,
        }
    }

    #[test]
    fn order_and_duplicates() {
        let (a, b) = (
            format!("sha256:{}", "a".repeat(64)),
            format!("sha256:{}", "b".repeat(64)),
        );
        let one = index_bytes(&[entry("arm64", &b), entry("amd64", &a)]).unwrap();
        let text = String::from_utf8(one).unwrap();
        assert!(
            text.find("amd64").unwrap() < text.find("arm64").unwrap(),
            "{text}"
        );
        let err = index_bytes(&[entry("arm64", &a), entry("arm64", &b)]).unwrap_err();
        assert_eq!(err.to_string(), "linux/arm64 appears twice in the index");
        let err = index_bytes(&[entry("arm64", "sha256:xyz")]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("linux/arm64: digest `sha256:xyz`"),
            "{err}"
        );
    }
}
