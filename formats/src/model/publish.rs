//! What `publish --json` writes (and `publish --pushed`, the platform phase and `receipt
//! write` read): the pushed images, the index, and one platform's entry in that index.

use serde::{Deserialize, Serialize};

use crate::model::Platform;

/// How a release names the Sigstore bundles of its attestations among its assets:
/// `<what>.sigstore.json`, each holding one bundle or JSON lines of bundles (what an attest
/// step's `bundle-path` holds). A consumer matches a bundle to an asset or image by the digest
/// its signed statement names, never by this name; the name only tells bundles apart from the
/// assets they attest (a bundle is not attested itself). docs/consumers.md says more.
pub const BUNDLE_ASSET_SUFFIX: &str = ".sigstore.json";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PublishReport {
    /// Registry host as given, e.g. `127.0.0.1:5000`.
    pub registry: String,
    pub repository: String,
    pub dry_run: bool,
    pub platforms: Vec<PushedImage>,
    /// Present when `--tag` was given.
    pub index: Option<PublishedIndex>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PushedImage {
    pub platform: Platform,
    /// The local image reference that was pushed.
    pub image: String,
    /// The engine's id of that image.
    pub image_id: String,
    pub os: String,
    pub architecture: String,
    #[serde(default)]
    pub variant: Option<String>,
    /// The manifest digest: the image's digest in the registry.
    pub digest: String,
    pub media_type: String,
    pub manifest_size: u64,
    pub config_digest: String,
    /// Config plus compressed layers, as stored in the registry.
    pub size: u64,
    pub layers: usize,
    /// Each layer blob, in the manifest's order (empty in records written before the tool
    /// kept them).
    #[serde(default)]
    pub layer_blobs: Vec<LayerBlob>,
    /// `registry/repository@digest`.
    pub reference: String,
    /// Bytes uploaded by this run (0: the registry had every blob already).
    #[serde(default)]
    pub uploaded_bytes: u64,
    /// The registry served the manifest back with the tested image's config, and every layer
    /// back as the tested image's layer (`oci/read_back.rs`). False for a dry run.
    #[serde(default)]
    pub read_back: bool,
}

/// One layer blob of a pushed image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerBlob {
    /// `sha256:<hex>` of the compressed blob.
    pub digest: String,
    pub size: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PublishedIndex {
    pub tag: String,
    pub digest: String,
    pub media_type: String,
    pub size: u64,
    /// `registry/repository`.
    pub repository: String,
    /// `registry/repository@digest`: what consumers pin.
    pub reference: String,
    /// The tag already pointed at exactly this index: nothing was written.
    pub noop: bool,
}

/// One platform's entry in the multi-arch index.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexEntry {
    pub platform: Platform,
    pub os: String,
    pub architecture: String,
    pub variant: Option<String>,
    pub digest: String,
    pub media_type: String,
    pub size: u64,
}

impl From<&PushedImage> for IndexEntry {
    fn from(p: &PushedImage) -> IndexEntry {
        IndexEntry {
            platform: p.platform,
            os: p.os.clone(),
            architecture: p.architecture.clone(),
            variant: p.variant.clone(),
            digest: p.digest.clone(),
            media_type: p.media_type.clone(),
            size: p.manifest_size,
        }
    }
}
