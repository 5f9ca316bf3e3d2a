//! Reading a pushed image back from the registry, to show that what is published is what was
//! tested: the manifest the registry serves under the pushed digest names the tested image's
//! config (the engine's image id is the sha256 of its config), and every layer blob hashes to
//! its descriptor and decompresses to the uncompressed layer the config records (`diff_ids`),
//! which is the layer the smoke checks ran on. Blobs stream through: memory stays at one
//! chunk whatever the image's size.

use std::io::{Read, Write};

use anyhow::{bail, Context, Result};
use sha2::{Digest as _, Sha256};

use crate::oci::stream::{hex_digest, HashingReader};
use template_formats::model::Digest;
use template_verify::oci::client::RegistryClient;

/// What was read back.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ReadBack {
    pub layers: usize,
    /// Compressed bytes read.
    pub bytes: u64,
}

/// A sink that hashes what is written to it.
struct HashingSink(Sha256);

impl Write for HashingSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// (sha256 of the gzip stream, its length, sha256 of what it decompresses to) for `reader`,
/// a series of gzip members (`oci::archive` writes layers so; one member is a series of one).
/// Bytes after the last member that are not a member are an error.
pub(crate) fn gzip_digests(reader: impl Read) -> std::io::Result<(String, u64, String)> {
    let mut compressed = HashingReader::new(reader);
    let mut plain = HashingSink(Sha256::new());
    let mut decoder = flate2::read::MultiGzDecoder::new(&mut compressed);
    std::io::copy(&mut decoder, &mut plain)?;
    drop(decoder);
    std::io::copy(&mut compressed, &mut std::io::sink())?;
    let (compressed_digest, count) = compressed.finish();
    Ok((compressed_digest, count, hex_digest(plain.0)))
}

/// The layer descriptors and config digest of an OCI image manifest, and the config's
/// `rootfs.diff_ids`, as the checks need them.
fn manifest_parts(manifest: &[u8]) -> Result<(String, Vec<(String, u64)>)> {
    let manifest: oci_spec::image::ImageManifest =
        serde_json::from_slice(manifest).context("the manifest is not an OCI image manifest")?;
    let layers = manifest
        .layers()
        .iter()
        .map(|l| (l.digest().to_string(), l.size()))
        .collect();
    Ok((manifest.config().digest().to_string(), layers))
}

fn diff_ids(config: &[u8]) -> Result<Vec<String>> {
    let config: serde_json::Value =
        serde_json::from_slice(config).context("the config is not JSON")?;
    config["rootfs"]["diff_ids"]
        .as_array()
        .context("the config has no rootfs.diff_ids")?
        .iter()
        .map(|d| {
            d.as_str()
                .map(str::to_string)
                .context("a diff_id is not a string")
        })
        .collect()
}

/// Reads `manifest_digest` back from `client`'s repository and checks it against the tested
/// image: config `tested_config` (the engine's image id), every layer as described above.
pub(crate) async fn read_back(
    client: &RegistryClient,
    manifest_digest: &str,
    tested_config: &str,
) -> Result<ReadBack> {
    let reference = client.target.reference(manifest_digest);
    let manifest = client
        .get_manifest_bounded(manifest_digest, 4 << 20)
        .await?
        .with_context(|| format!("{reference}: the registry does not serve the pushed manifest"))?;
    if Digest::of(&manifest).as_str() != manifest_digest {
        bail!("{reference}: the registry serves a manifest with another digest");
    }
    let (config_digest, layers) = manifest_parts(&manifest)?;
    if config_digest != tested_config {
        bail!(
            "{reference}: the published config is {config_digest}, but the smoke-tested image is \
             {tested_config}: what was published is not what was tested"
        );
    }
    let config = client
        .get_blob(&config_digest)
        .await?
        .bytes()
        .await
        .with_context(|| format!("{reference}: cannot read the config {config_digest}"))?;
    if Digest::of(&config).as_str() != config_digest {
        bail!("{reference}: the config blob does not hash to {config_digest}");
    }
    let diff_ids = diff_ids(&config)?;
    if diff_ids.len() != layers.len() {
        bail!(
            "{reference}: the manifest has {} layers, the tested image's config {}",
            layers.len(),
            diff_ids.len()
        );
    }
    // One layer per core at once, largest first: each is a download, a sha256 of the blob, an
    // inflate and a sha256 of the layer, CPU-bound in one stream on a near registry.
    let mut order: Vec<usize> = (0..layers.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(layers[i].1));
    let reference = &reference;
    let checks = order.into_iter().map(|i| {
        let (digest, size) = &layers[i];
        let diff_id = &diff_ids[i];
        async move {
            let result = async {
                let response = client.get_blob(digest).await?;
                let reader = template_verify::http::blocking_reader(response.bytes_stream());
                let (compressed, count, plain) =
                    tokio::task::spawn_blocking(move || gzip_digests(reader))
                        .await
                        .context("the read-back task panicked")?
                        .with_context(|| format!("{reference}: cannot read layer {digest} back"))?;
                if compressed != *digest || count != *size {
                    bail!("{reference}: layer {digest} reads back as {compressed} ({count} bytes)");
                }
                if plain != *diff_id {
                    bail!(
                        "{reference}: layer {digest} decompresses to {plain}, but the tested \
                         image's layer is {diff_id}: what was published is not what was tested"
                    );
                }
                Ok(count)
            }
            .await;
            (i, result)
        }
    });
    let parallel = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut results: Vec<(usize, Result<u64>)> = futures_util::StreamExt::collect(
        futures_util::StreamExt::buffer_unordered(futures_util::stream::iter(checks), parallel),
    )
    .await;
    // The first failing layer in the manifest's order, whichever finished first.
    results.sort_by_key(|(i, _)| *i);
    let mut bytes = 0;
    for (_, result) in results {
        bytes += result?;
    }
    Ok(ReadBack {
        layers: layers.len(),
        bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(6));
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn sha(data: &[u8]) -> String {
        format!("sha256:{}", hex::encode(Sha256::digest(data)))
    }

    #[test]
    fn a_gzip_stream_yields_both_digests() {
        let plain = b"a layer's tar bytes".repeat(1000);
        let blob = gzip(&plain);
        let (compressed, count, uncompressed) = gzip_digests(blob.as_slice()).unwrap();
        assert_eq!(compressed, sha(&blob));
        assert_eq!(count, blob.len() as u64);
        assert_eq!(uncompressed, sha(&plain));
    }

    #[test]
    fn bytes_after_the_stream_change_the_blob_digest_and_garbage_fails() {
        let plain = b"layer".repeat(100);
        let mut blob = gzip(&plain);
        blob.extend_from_slice(b"appended");
        assert!(gzip_digests(blob.as_slice()).is_err());
        assert!(gzip_digests(&b"not gzip at all"[..]).is_err());
    }

    #[test]
    fn a_series_of_members_decompresses_to_all_of_them() {
        let (first, second) = (
            b"the first member ".repeat(100),
            b"and the second".repeat(50),
        );
        let mut blob = gzip(&first);
        blob.extend_from_slice(&gzip(&second));
        let (compressed, count, uncompressed) = gzip_digests(blob.as_slice()).unwrap();
        assert_eq!((compressed, count), (sha(&blob), blob.len() as u64));
        assert_eq!(uncompressed, sha(&[first, second].concat()));
    }

    /// A registry serving `blobs` (digest -> bytes) and one manifest, from memory.
    async fn serve(blobs: std::collections::BTreeMap<String, Vec<u8>>) -> RegistryClient {
        use axum::http::{StatusCode, Uri};
        let app = axum::Router::new().fallback(move |uri: Uri| {
            let blobs = blobs.clone();
            async move {
                let digest = uri.path().rsplit('/').next().unwrap_or("").to_string();
                match blobs.get(&digest) {
                    Some(bytes) => (StatusCode::OK, bytes.clone()),
                    None => (StatusCode::NOT_FOUND, Vec::new()),
                }
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let target =
            template_verify::oci::client::RegistryTarget::parse(&addr.to_string(), "s0/r").unwrap();
        RegistryClient::new(target, None, &Default::default()).unwrap()
    }

    /// An image of one layer as a registry holds it: (blobs, manifest digest, config digest);
    /// `served_layer` is what the registry serves under the layer's digest.
    fn image(
        layer: &[u8],
        served_layer: Option<Vec<u8>>,
        diff_id: Option<String>,
    ) -> (std::collections::BTreeMap<String, Vec<u8>>, String, String) {
        let blob = gzip(layer);
        let diff_id = diff_id.unwrap_or_else(|| sha(layer));
        let config = serde_json::json!({"rootfs": {"type": "layers", "diff_ids": [diff_id]}})
            .to_string()
            .into_bytes();
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": sha(&config), "size": config.len()},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": sha(&blob), "size": blob.len()}],
        })
        .to_string()
        .into_bytes();
        let (manifest_digest, config_digest) = (sha(&manifest), sha(&config));
        let blobs = [
            (sha(&blob), served_layer.unwrap_or(blob)),
            (config_digest.clone(), config),
            (manifest_digest.clone(), manifest),
        ]
        .into_iter()
        .collect();
        (blobs, manifest_digest, config_digest)
    }

    #[tokio::test]
    async fn the_tested_image_reads_back_and_anything_else_is_named() {
        let (blobs, manifest, config) = image(b"the tested layer", None, None);
        let client = serve(blobs).await;
        let read = read_back(&client, &manifest, &config).await.unwrap();
        assert_eq!(read.layers, 1);

        // Another image was tested than the one whose config is published.
        let other = sha(b"another config");
        let err = read_back(&client, &manifest, &other).await.unwrap_err();
        assert!(
            format!("{err:#}").contains("not what was tested"),
            "{err:#}"
        );

        // The registry serves other bytes under the layer's digest.
        let (blobs, manifest, config) =
            image(b"the tested layer", Some(gzip(b"a swapped layer")), None);
        let client = serve(blobs).await;
        let err = read_back(&client, &manifest, &config).await.unwrap_err();
        assert!(format!("{err:#}").contains("reads back as"), "{err:#}");

        // The blob is the one described, but not the tested image's uncompressed layer.
        let (blobs, manifest, config) = image(b"published", None, Some(sha(b"tested")));
        let client = serve(blobs).await;
        let err = read_back(&client, &manifest, &config).await.unwrap_err();
        assert!(format!("{err:#}").contains("decompresses to"), "{err:#}");
    }

    #[test]
    fn manifests_and_configs_give_their_parts() {
        let layer = format!("sha256:{}", "a".repeat(64));
        let config = format!("sha256:{}", "c".repeat(64));
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config, "size": 10},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layer, "size": 7}],
        });
        let (c, layers) = manifest_parts(manifest.to_string().as_bytes()).unwrap();
        assert_eq!(c, config);
        assert_eq!(layers, vec![(layer, 7)]);
        let ids = diff_ids(br#"{"rootfs": {"type": "layers", "diff_ids": ["sha256:1"]}}"#).unwrap();
        assert_eq!(ids, vec!["sha256:1"]);
        assert!(diff_ids(br#"{"rootfs": {}}"#).is_err());
    }
}
