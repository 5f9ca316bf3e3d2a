//! From a `docker save` archive to registry blobs: the config, each layer compressed
//! deterministically (same layer, same bytes, same digest) into a file on disk, and the OCI
//! image manifest over them.

use std::collections::BTreeMap;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use anyhow::{anyhow, bail, Context, Result};
use oci_spec::image::{DescriptorBuilder, Digest as OciDigest, ImageManifestBuilder, MediaType};
use serde::Deserialize;
use sha2::{Digest as _, Sha256};

use crate::model::Digest;
use crate::oci::blob_upload::{CountingReader, TransferProgress};
use crate::oci::index::{OCI_CONFIG, OCI_LAYER_GZIP, OCI_LAYER_ZSTD};

/// A content-addressed blob on local disk, ready to upload.
#[derive(Debug, Clone)]
pub(crate) struct Blob {
    pub digest: String,
    pub size: u64,
    pub media_type: String,
    pub path: PathBuf,
}

/// An image made ready for the registry from its `docker save` archive.
#[derive(Debug)]
pub(crate) struct PreparedImage {
    pub config: Blob,
    pub layers: Vec<Blob>,
    pub os: String,
    pub architecture: String,
    pub variant: Option<String>,
    /// Canonical OCI image manifest bytes and their digest.
    pub manifest: Vec<u8>,
    pub manifest_digest: String,
}

impl PreparedImage {
    /// Config plus layers: what the registry stores for this image.
    pub(crate) fn size(&self) -> u64 {
        self.config.size + self.layers.iter().map(|l| l.size).sum::<u64>()
    }
}

/// Writer that hashes and counts what passes through.
struct HashingWriter<W> {
    inner: W,
    hasher: Sha256,
    written: u64,
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Stores one layer as a registry blob: an uncompressed tar is gzip-compressed (level 6,
/// no timestamp: deterministic), an already compressed one (gzip or zstd, as an engine with
/// the containerd image store exports) is kept as it is.
fn store_layer(mut source: impl Read, path: PathBuf) -> Result<Blob> {
    let mut magic = [0u8; 4];
    let mut filled = 0;
    while filled < magic.len() {
        let n = source.read(&mut magic[filled..])?;
        if n == 0 {
            break;
        }
        filled += n;
    }
    let head = &magic[..filled];
    let media_type = if head.starts_with(&[0x1f, 0x8b]) {
        Some(OCI_LAYER_GZIP)
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Some(OCI_LAYER_ZSTD)
    } else {
        None
    };
    let mut source = io::Cursor::new(head.to_vec()).chain(source);
    let file = std::fs::File::create(&path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    let mut out = HashingWriter {
        inner: BufWriter::with_capacity(1 << 20, file),
        hasher: Sha256::new(),
        written: 0,
    };
    let media_type = match media_type {
        Some(kept) => {
            io::copy(&mut source, &mut out)?;
            kept
        }
        None => {
            let mut gz = flate2::write::GzEncoder::new(&mut out, flate2::Compression::default());
            io::copy(&mut source, &mut gz)?;
            gz.finish()?;
            OCI_LAYER_GZIP
        }
    };
    out.flush()?;
    Ok(Blob {
        digest: format!("sha256:{}", hex::encode(out.hasher.finalize())),
        size: out.written,
        media_type: media_type.to_string(),
        path,
    })
}

fn store_bytes(bytes: &[u8], media_type: &str, path: PathBuf) -> Result<Blob> {
    std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(Blob {
        digest: Digest::of(bytes).to_string(),
        size: bytes.len() as u64,
        media_type: media_type.to_string(),
        path,
    })
}

/// `a/b/../c` -> `a/c`, `./x` -> `x`.
fn normalize_archive_path(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    parts.join("/")
}

/// Reads a `docker save` archive (legacy docker-archive or the OCI-layout form of newer
/// engines; both carry `manifest.json`) and prepares the image's blobs in `dir`. Large files
/// are compressed as they stream past, so the uncompressed image never lands on disk.
pub(crate) fn prepare_from_archive(archive: impl Read, dir: &Path) -> Result<PreparedImage> {
    const SMALL: u64 = 16 << 20;
    let mut small: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut large: BTreeMap<String, Blob> = BTreeMap::new();
    let mut links: BTreeMap<String, String> = BTreeMap::new();
    let mut archive = tar::Archive::new(archive);
    for (n, entry) in archive
        .entries()
        .context("the image archive is not a tar")?
        .enumerate()
    {
        let mut entry = entry.context("the image archive is truncated")?;
        let path = normalize_archive_path(&entry.path()?.to_string_lossy());
        let kind = entry.header().entry_type();
        if kind.is_symlink() || kind.is_hard_link() {
            let target = entry
                .link_name()?
                .map(|t| t.to_string_lossy().into_owned())
                .unwrap_or_default();
            let resolved = if kind.is_symlink() {
                let dir = path.rsplit_once('/').map_or("", |(d, _)| d);
                normalize_archive_path(&format!("{dir}/{target}"))
            } else {
                normalize_archive_path(&target)
            };
            links.insert(path, resolved);
        } else if kind.is_file() {
            if entry.size() <= SMALL {
                let mut bytes = Vec::with_capacity(entry.size() as usize);
                entry.read_to_end(&mut bytes)?;
                small.insert(path, bytes);
            } else {
                // Minutes for a multi-GB layer: say how far it got.
                let progress = TransferProgress::new(&format!("compress {path}"), entry.size());
                let counted = CountingReader {
                    inner: &mut entry,
                    progress: &progress,
                };
                let blob = store_layer(counted, dir.join(format!("layer-{n}")))?;
                large.insert(path, blob);
            }
        }
    }

    let resolve = |path: &str| -> String {
        let mut path = normalize_archive_path(path);
        for _ in 0..16 {
            match links.get(&path) {
                Some(target) => path = target.clone(),
                None => break,
            }
        }
        path
    };
    #[derive(Deserialize)]
    struct SavedImage {
        #[serde(rename = "Config")]
        config: String,
        #[serde(rename = "Layers")]
        layers: Vec<String>,
    }
    let saved: Vec<SavedImage> = serde_json::from_slice(
        small
            .get("manifest.json")
            .context("the image archive has no manifest.json")?,
    )
    .context("the image archive's manifest.json is not a docker save manifest")?;
    let [saved] = <[SavedImage; 1]>::try_from(saved)
        .map_err(|v| anyhow!("the image archive holds {} images, expected one", v.len()))?;

    let config_bytes = small
        .get(&resolve(&saved.config))
        .with_context(|| format!("the image archive lacks its config {}", saved.config))?;
    #[derive(Deserialize)]
    struct ConfigPlatform {
        architecture: String,
        os: String,
        #[serde(default)]
        variant: Option<String>,
    }
    let platform: ConfigPlatform =
        serde_json::from_slice(config_bytes).context("the image config has no architecture/os")?;
    let config = store_bytes(config_bytes, OCI_CONFIG, dir.join("config"))?;

    let mut layers = Vec::new();
    for (i, layer) in saved.layers.iter().enumerate() {
        let path = resolve(layer);
        let blob = if let Some(blob) = large.get(&path) {
            blob.clone()
        } else if let Some(bytes) = small.get(&path) {
            store_layer(bytes.as_slice(), dir.join(format!("small-layer-{i}")))?
        } else {
            bail!("the image archive lacks layer {layer}");
        };
        layers.push(blob);
    }

    let descriptor = |blob: &Blob| -> Result<oci_spec::image::Descriptor> {
        Ok(DescriptorBuilder::default()
            .media_type(MediaType::from(blob.media_type.as_str()))
            .digest(OciDigest::from_str(&blob.digest)?)
            .size(blob.size)
            .build()?)
    };
    let manifest = ImageManifestBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageManifest)
        .config(descriptor(&config)?)
        .layers(layers.iter().map(descriptor).collect::<Result<Vec<_>>>()?)
        .build()?;
    let manifest = serde_json::to_vec(&manifest)?;
    Ok(PreparedImage {
        manifest_digest: Digest::of(&manifest).to_string(),
        manifest,
        config,
        layers,
        os: platform.os,
        architecture: platform.architecture,
        variant: platform.variant,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oci::index::OCI_MANIFEST;

    /// A `docker save`-shaped archive: one config, one layer (an inner tar), a symlinked
    /// duplicate, the manifest last (as the engine writes it).
    fn archive(file_content: &[u8], arch: &str) -> Vec<u8> {
        let mut layer = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_size(file_content.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        layer
            .append_data(&mut header, "hello.txt", file_content)
            .unwrap();
        let layer = layer.into_inner().unwrap();
        let diff_id = format!("sha256:{}", Digest::of(&layer).hex());
        let config = format!(
            r#"{{"architecture":"{arch}","os":"linux","config":{{}},"rootfs":{{"type":"layers","diff_ids":["{diff_id}","{diff_id}"]}}}}"#
        );
        let config_name = format!("{}.json", Digest::of(config.as_bytes()).hex());
        let manifest = format!(
            r#"[{{"Config":"{config_name}","RepoTags":null,"Layers":["aaa/layer.tar","bbb/layer.tar"]}}]"#
        );
        let mut out = tar::Builder::new(Vec::new());
        let mut add = |name: &str, data: &[u8]| {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            out.append_data(&mut h, name, data).unwrap();
        };
        add("aaa/layer.tar", &layer);
        add(&config_name, config.as_bytes());
        let mut link = tar::Header::new_gnu();
        link.set_entry_type(tar::EntryType::Symlink);
        link.set_size(0);
        out.append_link(&mut link, "bbb/layer.tar", "../aaa/layer.tar")
            .unwrap();
        let mut h = tar::Header::new_gnu();
        h.set_size(manifest.len() as u64);
        out.append_data(&mut h, "manifest.json", manifest.as_bytes())
            .unwrap();
        out.into_inner().unwrap()
    }

    #[test]
    fn archives_become_deterministic_oci_manifests() {
        let dir = tempfile::tempdir().unwrap();
        let a = prepare_from_archive(archive(b"one", "arm64").as_slice(), dir.path()).unwrap();
        let dir2 = tempfile::tempdir().unwrap();
        let b = prepare_from_archive(archive(b"one", "arm64").as_slice(), dir2.path()).unwrap();
        assert_eq!(a.manifest_digest, b.manifest_digest);
        assert_eq!(a.architecture, "arm64");
        assert_eq!(a.layers.len(), 2);
        assert_eq!(a.layers[0].digest, a.layers[1].digest);
        assert_eq!(a.layers[0].media_type, OCI_LAYER_GZIP);
        // The blob on disk is what its digest says, and it is gzip.
        let bytes = std::fs::read(&a.layers[0].path).unwrap();
        assert_eq!(Digest::of(&bytes).to_string(), a.layers[0].digest);
        assert_eq!(&bytes[..2], &[0x1f, 0x8b]);
        let manifest: serde_json::Value = serde_json::from_slice(&a.manifest).unwrap();
        assert_eq!(manifest["mediaType"], OCI_MANIFEST);
        assert_eq!(manifest["config"]["digest"], a.config.digest.as_str());
        let c = prepare_from_archive(archive(b"two", "arm64").as_slice(), dir2.path()).unwrap();
        assert_ne!(a.manifest_digest, c.manifest_digest);
        assert!(prepare_from_archive(&archive(b"x", "arm64")[..700], dir.path()).is_err());
    }
}
