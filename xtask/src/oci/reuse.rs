//! Which blobs of a previous release a publish may use instead of compressing a layer again.
//!
//! The previous release's manifest and config map each layer's diff id (the uncompressed
//! layer, which the canonical layers make a function of the files alone) to the blob the
//! registry holds for it. Using that blob is only correct if it is byte for byte the blob this
//! tool would make now: otherwise the manifest digest of a publish would depend on whether a
//! previous release exists (and on which one), and receipts, reproducible rebuilds and
//! consumers compare those digests. Gzip is deterministic for one compressor at one level and
//! member size, but an older version of this tool, another deflate implementation (a
//! libdeflate update changes the bytes) or another level makes other, equally valid, blobs.
//!
//! The decision: every layer this tool compresses is described in its manifest with the
//! annotation [`COMPRESSOR_ANNOTATION`] = [`COMPRESSOR`], which names the level, the member
//! size, the header form and the exact versions of libdeflater and libdeflate-sys (the C
//! library's bindings and sources; a unit test ties it to `Cargo.lock`, so
//! a dependency update cannot keep the old name). A previous blob is reused only when its
//! descriptor carries exactly this identity and the gzip media type; anything else (no
//! annotation: an older tool, `docker push`, an engine's own compression; another identity)
//! is compressed again. The annotation is part of the descriptor whether or not a previous
//! release exists, so a reused descriptor is equal to the fresh one. What it trusts: that the
//! previous release's manifest was written by this tool (it is in the release's own
//! repository, named by a receipt that verified); the read-back still checks every layer of
//! the new image against its diff id. Verifying the blob instead (compressing again to
//! compare) would cost exactly what reuse saves.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use template_formats::manifest::Platform;
use template_formats::model::Digest;
use template_formats::oci::index::{OCI_INDEX, OCI_LAYER_GZIP, OCI_MANIFEST};

/// The layer descriptor annotation that names the compressor of a layer blob.
pub(crate) const COMPRESSOR_ANNOTATION: &str = "dev.coding-agent.xtask.compressor";

/// The compressor of every layer `oci::archive` compresses: gzip at
/// [`crate::oci::compress::LAYER_LEVEL`] in members of [`crate::oci::compress::MEMBER_SIZE`],
/// headers without time or name, libdeflate at the locked versions. Change it with any of
/// those (the tests check the level, the member size and the versions in `Cargo.lock`).
/// Earlier releases name "gzip level 6, no mtime or name; flate2 1.1.11, zlib-rs 0.6.8" (one
/// member): they offer nothing to reuse.
pub(crate) const COMPRESSOR: &str =
    "gzip level 6, members of 4 MiB, no mtime or name; libdeflater 1.26.1, libdeflate-sys 1.26.1";

/// A blob the registry holds for a layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KnownBlob {
    pub digest: String,
    pub size: u64,
}

/// What a previous release offers: its blobs by diff id, for layers [`COMPRESSOR`] made.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Reusable {
    pub by_diff_id: BTreeMap<String, KnownBlob>,
    /// Layers of the previous image left out because another compressor made them.
    pub foreign: usize,
}

#[derive(Deserialize)]
struct Rootfs {
    diff_ids: Vec<String>,
}

#[derive(Deserialize)]
struct Config {
    rootfs: Rootfs,
}

/// The reusable blobs of the image whose manifest is `manifest` and config `config` (named
/// `what` in errors). Pure.
pub(crate) fn reusable_layers(what: &str, manifest: &[u8], config: &[u8]) -> Result<Reusable> {
    let manifest: oci_spec::image::ImageManifest = serde_json::from_slice(manifest)
        .with_context(|| format!("{what}: the manifest is not an OCI image manifest"))?;
    if manifest.config().digest().to_string() != Digest::of(config).as_str() {
        bail!(
            "{what}: the config read is not the one the manifest names ({})",
            manifest.config().digest()
        );
    }
    let config: Config = serde_json::from_slice(config)
        .with_context(|| format!("{what}: the config has no rootfs.diff_ids"))?;
    let layers = manifest.layers();
    if layers.len() != config.rootfs.diff_ids.len() {
        bail!(
            "{what}: the manifest names {} layers but the config {} diff ids: not an image \
             this tool published",
            layers.len(),
            config.rootfs.diff_ids.len()
        );
    }
    let mut reusable = Reusable::default();
    for (layer, diff_id) in layers.iter().zip(config.rootfs.diff_ids) {
        let ours = layer.media_type().to_string() == OCI_LAYER_GZIP
            && layer
                .annotations()
                .as_ref()
                .and_then(|a| a.get(COMPRESSOR_ANNOTATION))
                .is_some_and(|c| c == COMPRESSOR);
        if ours {
            reusable.by_diff_id.insert(
                diff_id,
                KnownBlob {
                    digest: layer.digest().to_string(),
                    size: layer.size(),
                },
            );
        } else {
            reusable.foreign += 1;
        }
    }
    Ok(reusable)
}

/// The digest of the image manifest for `platform` in `document`: the document itself when
/// it is an image manifest (`digest`), its entry for `platform` when it is an index. Pure.
pub(crate) fn platform_manifest(
    what: &str,
    digest: &str,
    document: &[u8],
    platform: Platform,
) -> Result<String> {
    #[derive(Deserialize)]
    struct Entry {
        #[serde(rename = "mediaType")]
        media_type: String,
        digest: String,
        platform: Option<EntryPlatform>,
    }
    #[derive(Deserialize)]
    struct EntryPlatform {
        os: String,
        architecture: String,
    }
    #[derive(Deserialize)]
    struct Document {
        #[serde(rename = "mediaType")]
        media_type: String,
        #[serde(default)]
        manifests: Vec<Entry>,
    }
    let document: Document = serde_json::from_slice(document)
        .with_context(|| format!("{what}: not an OCI image manifest or index"))?;
    match document.media_type.as_str() {
        OCI_MANIFEST => Ok(digest.to_string()),
        OCI_INDEX => document
            .manifests
            .into_iter()
            .find(|e| {
                e.media_type == OCI_MANIFEST
                    && e.platform
                        .as_ref()
                        .is_some_and(|p| p.os == "linux" && p.architecture == platform.arch())
            })
            .map(|e| e.digest)
            .with_context(|| format!("{what}: the index has no image manifest for {platform}")),
        other => bail!("{what}: media type `{other}` is neither an OCI image manifest nor index"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn digest_of(bytes: &[u8]) -> String {
        Digest::of(bytes).to_string()
    }

    fn config(diff_ids: &[&str]) -> Vec<u8> {
        serde_json::to_vec(&json!({"architecture": "amd64", "os": "linux",
            "rootfs": {"type": "layers", "diff_ids": diff_ids}}))
        .unwrap()
    }

    fn layer(digest: &str, compressor: Option<&str>, media_type: &str) -> serde_json::Value {
        let mut layer = json!({"mediaType": media_type, "digest": digest, "size": 42});
        if let Some(c) = compressor {
            layer["annotations"] = json!({ COMPRESSOR_ANNOTATION: c });
        }
        layer
    }

    fn manifest(config: &[u8], layers: Vec<serde_json::Value>) -> Vec<u8> {
        serde_json::to_vec(&json!({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "config": {"mediaType": template_formats::oci::index::OCI_CONFIG,
                       "digest": digest_of(config), "size": config.len()},
            "layers": layers}))
        .unwrap()
    }

    fn d(n: char) -> String {
        format!("sha256:{}", n.to_string().repeat(64))
    }

    #[test]
    fn only_layers_our_compressor_made_are_reusable() {
        let (a, b, c, e) = (d('a'), d('b'), d('c'), d('e'));
        let config = config(&[&a, &b, &c, &e]);
        let manifest = manifest(
            &config,
            vec![
                layer(&d('1'), Some(COMPRESSOR), OCI_LAYER_GZIP),
                // An older tool (no annotation), another compressor, another media type.
                layer(&d('2'), None, OCI_LAYER_GZIP),
                layer(&d('3'), Some("gzip level 6; flate2 1.0.0"), OCI_LAYER_GZIP),
                layer(
                    &d('4'),
                    Some(COMPRESSOR),
                    template_formats::oci::index::OCI_LAYER_ZSTD,
                ),
            ],
        );
        let reusable = reusable_layers("prev", &manifest, &config).unwrap();
        assert_eq!(
            reusable.by_diff_id,
            BTreeMap::from([(
                a,
                KnownBlob {
                    digest: d('1'),
                    size: 42
                }
            )])
        );
        assert_eq!(reusable.foreign, 3);
    }

    #[test]
    fn a_manifest_that_does_not_match_its_config_is_refused() {
        let config_bytes = config(&[&d('a')]);
        let two = manifest(
            &config_bytes,
            vec![
                layer(&d('1'), Some(COMPRESSOR), OCI_LAYER_GZIP),
                layer(&d('2'), Some(COMPRESSOR), OCI_LAYER_GZIP),
            ],
        );
        let err = reusable_layers("prev", &two, &config_bytes).unwrap_err();
        assert!(
            err.to_string().contains("2 layers but the config 1"),
            "{err}"
        );
        let one = manifest(
            &config_bytes,
            vec![layer(&d('1'), Some(COMPRESSOR), OCI_LAYER_GZIP)],
        );
        let err = reusable_layers("prev", &one, &config(&[&d('b')])).unwrap_err();
        assert!(
            err.to_string().contains("not the one the manifest names"),
            "{err}"
        );
    }

    #[test]
    fn the_compressor_identity_names_the_level_and_the_locked_versions() {
        let lock = include_str!("../../../Cargo.lock");
        let locked = |name: &str| {
            let pattern = format!("name = \"{name}\"\nversion = \"");
            let at = lock
                .find(&pattern)
                .unwrap_or_else(|| panic!("{name} is not in Cargo.lock"));
            let rest = &lock[at + pattern.len()..];
            rest[..rest.find('"').unwrap()].to_string()
        };
        for crate_name in ["libdeflater", "libdeflate-sys"] {
            let expected = format!("{crate_name} {}", locked(crate_name));
            assert!(
                COMPRESSOR.contains(&expected),
                "COMPRESSOR `{COMPRESSOR}` must name `{expected}`: a new deflate makes other \
                 bytes, so the previous release's blobs are not what this tool makes"
            );
        }
        assert!(COMPRESSOR.starts_with(&format!(
            "gzip level {}, members of {} MiB, ",
            crate::oci::compress::LAYER_LEVEL,
            crate::oci::compress::MEMBER_SIZE >> 20
        )));
    }

    #[test]
    fn an_index_names_the_platforms_manifest() {
        let index = template_formats::oci::index::index_bytes(&[
            template_formats::oci::index::PlatformManifest {
                os: "linux",
                architecture: "arm64",
                variant: None,
                digest: &d('7'),
                media_type: OCI_MANIFEST,
                size: 10,
            },
        ])
        .unwrap();
        assert_eq!(
            platform_manifest("prev", "x", &index, Platform::LinuxArm64).unwrap(),
            d('7')
        );
        let err = platform_manifest("prev", "x", &index, Platform::LinuxAmd64).unwrap_err();
        assert!(
            err.to_string()
                .contains("no image manifest for linux/amd64"),
            "{err}"
        );
        let config = config(&[]);
        let image = manifest(&config, vec![]);
        assert_eq!(
            platform_manifest("prev", &d('9'), &image, Platform::LinuxAmd64).unwrap(),
            d('9')
        );
    }
}
