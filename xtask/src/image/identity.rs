//! One meaning of "the image", whatever the engine: the tool's canonical config digest (and
//! the OCI manifest digest `publish` computes over the canonical layers). The engine's id is
//! only a handle for running and exporting the image:
//! - on the classic store, the engine's id *is* the config digest;
//! - on the containerd image store, the engine's id is the digest of the manifest the image was
//!   loaded with (docker-engines.md). The tool loads an OCI layout there whose manifest it
//!   writes itself ([`load_manifest`]) and keeps ([`ManifestRecords`]): a record is the
//!   manifest's bytes, named by their digest, so it proves itself (its bytes must hash to the
//!   engine's id) and names the config the engine holds under that id.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use bollard::models::ImageInspect;
use bollard::Docker;
use oci_spec::image::ImageManifest;
use serde_json::json;

use crate::image::engine::{self, EngineInfo, ImageStore};
use crate::oci::canonical::CanonicalLayer;
use crate::util::atomic_write;
use template_formats::model::Digest;
use template_formats::oci::index::{OCI_CONFIG, OCI_MANIFEST};

/// An uncompressed layer (OCI image spec, media types).
pub(crate) const OCI_LAYER_TAR: &str = "application/vnd.oci.image.layer.v1.tar";

/// The OCI image manifest the tool loads into a containerd store: the canonical config and
/// the canonical layers, uncompressed (so each layer's digest is its diff id). Pure.
pub(crate) fn load_manifest(config: &[u8], layers: &[CanonicalLayer]) -> Vec<u8> {
    let layers: Vec<_> = layers
        .iter()
        .map(|l| json!({"mediaType": OCI_LAYER_TAR, "digest": l.diff_id.as_str(), "size": l.size}))
        .collect();
    serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": Digest::of(config).as_str(), "size": config.len()},
        "layers": layers,
    }))
    .expect("a manifest serializes")
}

/// The id the engine must report for the image of `config` and `layers` once loaded. Pure.
pub(crate) fn expected_engine_id(
    store: ImageStore,
    config: &[u8],
    layers: &[CanonicalLayer],
) -> Digest {
    match store {
        ImageStore::Classic => Digest::of(config),
        ImageStore::Containerd => Digest::of(&load_manifest(config, layers)),
    }
}

/// The load manifests the tool gave a containerd store, one file per manifest, named by the
/// manifest's digest (`.xtask/engine-manifests/`).
pub struct ManifestRecords {
    dir: PathBuf,
}

impl ManifestRecords {
    pub fn new(dir: &Path) -> ManifestRecords {
        ManifestRecords {
            dir: dir.to_path_buf(),
        }
    }

    fn file(&self, digest: &Digest) -> PathBuf {
        self.dir.join(format!("{}.json", digest.hex()))
    }

    pub(crate) fn keep(&self, manifest: &[u8]) -> Result<()> {
        std::fs::create_dir_all(&self.dir)
            .with_context(|| format!("cannot create {}", self.dir.display()))?;
        atomic_write(&self.file(&Digest::of(manifest)), manifest)
    }

    /// The config digest of the manifest `digest`, if a record of it is here and hashes to it.
    fn config_of(&self, digest: &Digest) -> Option<Digest> {
        let bytes = std::fs::read(self.file(digest)).ok()?;
        if &Digest::of(&bytes) != digest {
            return None;
        }
        let manifest: ImageManifest = serde_json::from_slice(&bytes).ok()?;
        manifest.config().digest().as_ref().parse().ok()
    }
}

/// The record of the manifest `engine_id` in `export` (`docker save` of that image on a
/// containerd store: an OCI layout whose blobs are the manifest and config the store holds,
/// and `manifest.json`): the manifest's bytes, checked to hash to `engine_id` and to name a
/// config the export holds. Pure.
pub(crate) fn record_from_export(
    export: &crate::oci::archive::SavedArchive,
    reference: &str,
    engine_id: &Digest,
) -> Result<Vec<u8>> {
    let manifest = export
        .small(&format!("blobs/sha256/{}", engine_id.hex()))
        .with_context(|| {
            format!("the engine's export of {reference} lacks its manifest {engine_id}")
        })?;
    if &Digest::of(manifest) != engine_id {
        bail!("the engine's export of {reference} holds other bytes under {engine_id}");
    }
    let parsed: ImageManifest = serde_json::from_slice(manifest).with_context(|| {
        format!("the manifest {engine_id} of {reference} is not an OCI image manifest")
    })?;
    let config: Digest = parsed
        .config()
        .digest()
        .as_ref()
        .parse()
        .with_context(|| format!("the manifest {engine_id} of {reference} names no config"))?;
    let config_bytes = export
        .small(&format!("blobs/sha256/{}", config.hex()))
        .with_context(|| format!("the engine's export of {reference} lacks its config {config}"))?;
    if Digest::of(config_bytes) != config {
        bail!("the engine's export of {reference} holds other bytes under its config {config}");
    }
    Ok(manifest.to_vec())
}

/// Makes the record of `engine_id` from the engine's own export of `reference`, for an image
/// that another checkout, user or state directory loaded: the store keeps the manifest the
/// image was loaded with, so the export holds the very bytes a record would. Layers are read
/// and dropped (the whole image passes once: seconds for a base, about half a minute for the
/// template).
async fn recover_record(
    docker: &Docker,
    engine: &EngineInfo,
    reference: &str,
    engine_id: &Digest,
    records: &ManifestRecords,
) -> Result<Digest> {
    let export = engine::blocking_reader(docker.export_image(reference));
    let reference_owned = reference.to_string();
    let saved = tokio::task::spawn_blocking(move || {
        crate::oci::archive::SavedArchive::read(export, 1 << 20, |_, _, _, data| {
            std::io::copy(data, &mut std::io::sink())?;
            Ok(true)
        })
        .with_context(|| format!("cannot read the engine's export of {reference_owned}"))
    })
    .await
    .context("the export-reading thread panicked")??;
    let manifest =
        record_from_export(&saved, reference, engine_id).with_context(|| format!("on {engine}"))?;
    records.keep(&manifest)?;
    records.config_of(engine_id).with_context(|| {
        format!(
            "the record of {engine_id} in {} does not read back",
            records.dir.display()
        )
    })
}

/// The tool's config digest of the engine's image `engine_id`, from the records; on a
/// containerd store without a record, from the engine's export of the image (which then
/// becomes a record).
async fn config_digest_or_recover(
    docker: &Docker,
    engine: &EngineInfo,
    reference: &str,
    engine_id: &Digest,
    records: &ManifestRecords,
) -> Result<Digest> {
    match config_digest(engine, reference, engine_id, records) {
        Ok(digest) => Ok(digest),
        Err(no_record) if engine.store == ImageStore::Containerd => {
            recover_record(docker, engine, reference, engine_id, records)
                .await
                .with_context(|| format!("{no_record:#}; reading it from the engine failed too"))
        }
        Err(err) => Err(err),
    }
}

/// The tool's config digest of the engine's image `engine_id`.
pub(crate) fn config_digest(
    engine: &EngineInfo,
    reference: &str,
    engine_id: &Digest,
    records: &ManifestRecords,
) -> Result<Digest> {
    match engine.store {
        ImageStore::Classic => Ok(engine_id.clone()),
        ImageStore::Containerd => records.config_of(engine_id).with_context(|| {
            format!(
                "{reference} is {engine_id} on {engine}, whose ids are manifest digests, and \
                 this machine has no record of that manifest in {}: only an image the tool's \
                 `build` loaded has one; build it again",
                records.dir.display()
            )
        }),
    }
}

/// The engine's id of `reference`, as its `inspect` reports it.
fn engine_id_of(engine: &EngineInfo, reference: &str, inspect: &ImageInspect) -> Result<Digest> {
    inspect
        .id
        .as_deref()
        .with_context(|| format!("{engine} reports no id for {reference}"))?
        .parse()
        .with_context(|| format!("{engine}'s id of {reference} is not a sha256 digest"))
}

/// An image in the engine and what it is: the engine's handle and the tool's config digest.
pub(crate) struct EngineImage {
    pub inspect: ImageInspect,
    /// The tool's id of the image: its canonical config's digest.
    pub config_digest: Digest,
}

/// Looks `reference` up and says which image it is; `None` when the engine has no such image.
pub(crate) async fn inspect(
    docker: &Docker,
    engine: &EngineInfo,
    reference: &str,
    records: &ManifestRecords,
) -> Result<Option<EngineImage>> {
    let Some(inspect) = engine::inspect_image(docker, reference)
        .await
        .with_context(|| format!("on {engine}"))?
    else {
        return Ok(None);
    };
    let engine_id = engine_id_of(engine, reference, &inspect)?;
    let config_digest =
        config_digest_or_recover(docker, engine, reference, &engine_id, records).await?;
    Ok(Some(EngineImage {
        inspect,
        config_digest,
    }))
}

/// The directory of [`ManifestRecords`] in the checkout's state.
pub(crate) fn records_dir(layout: &crate::layout::Layout) -> PathBuf {
    layout.state("engine-manifests")
}

/// The tool's id (canonical config digest, `sha256:…`) of the engine's image `inspect` of
/// `reference`: what smoke, SBOM and publish report and compare, on every engine.
pub(crate) async fn tool_image_id(
    docker: &Docker,
    layout: &crate::layout::Layout,
    reference: &str,
    inspect: &ImageInspect,
) -> Result<String> {
    let engine = engine::engine_info(docker).await?;
    let engine_id = engine_id_of(&engine, reference, inspect)?;
    let records = ManifestRecords::new(&records_dir(layout));
    Ok(
        config_digest_or_recover(docker, &engine, reference, &engine_id, &records)
            .await?
            .to_string(),
    )
}

/// Checks a loaded image against what was loaded: the engine's id (the config, through the
/// manifest on a containerd store) and every diff id. A load the engine reported as done can
/// still have left an image without layers: the containerd store does that for an OCI layout
/// that omits a layer it holds only compressed. Pure.
pub(crate) fn check_loaded(
    tag: &str,
    engine: &EngineInfo,
    expected_id: &Digest,
    diff_ids: &[Digest],
    loaded_id: Option<&str>,
    loaded_layers: &[String],
) -> Result<()> {
    let loaded_id = loaded_id.unwrap_or("(none)");
    if loaded_id != expected_id.as_str() {
        bail!(
            "{engine} loaded {tag} as {loaded_id}, not as {expected_id} ({}); an engine that \
             rewrites images on load cannot give reproducible images",
            match engine.store {
                ImageStore::Classic => "the canonical config's digest",
                ImageStore::Containerd => "the digest of the manifest the tool loaded",
            }
        );
    }
    if loaded_layers.is_empty() && !diff_ids.is_empty() {
        bail!(
            "{engine} reported loading {tag} but the image has no layers (of {}); a layer the \
             archive left out is not held uncompressed by the engine",
            diff_ids.len()
        );
    }
    let expected: Vec<&str> = diff_ids.iter().map(Digest::as_str).collect();
    if loaded_layers != expected {
        bail!("{engine} loaded {tag} with the layers {loaded_layers:?}, not {expected:?}");
    }
    Ok(())
}

/// A repository and tag as the containerd store names images (`docker.io/library/x:y` for
/// `x:y`), for the OCI layout's `io.containerd.image.name`. Pure.
pub(crate) fn full_image_name(reference: &str) -> String {
    let first = reference.split('/').next().unwrap_or_default();
    let has_host = reference.contains('/')
        && (first.contains('.') || first.contains(':') || first == "localhost");
    match (has_host, reference.contains('/')) {
        (true, _) => reference.to_string(),
        (false, true) => format!("docker.io/{reference}"),
        (false, false) => format!("docker.io/library/{reference}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(content: &[u8]) -> CanonicalLayer {
        CanonicalLayer {
            diff_id: Digest::of(content),
            size: content.len() as u64,
            entries: 1,
        }
    }

    fn engine(store: ImageStore) -> EngineInfo {
        EngineInfo {
            version: "28.5.2".into(),
            driver: "overlayfs".into(),
            store,
        }
    }

    /// A containerd store's `docker save` of one image: blobs by digest (`extra` as well).
    fn export(blobs: &[&[u8]], extra: &[(&str, &[u8])]) -> crate::oci::archive::SavedArchive {
        let mut tar = tar::Builder::new(Vec::new());
        let mut add = |name: &str, bytes: &[u8]| {
            let mut header = tar::Header::new_gnu();
            header.set_size(bytes.len() as u64);
            header.set_mode(0o644);
            tar.append_data(&mut header, name, bytes).unwrap();
        };
        for blob in blobs {
            add(&format!("blobs/sha256/{}", Digest::of(blob).hex()), blob);
        }
        for (name, bytes) in extra {
            add(name, bytes);
        }
        let bytes = tar.into_inner().unwrap();
        crate::oci::archive::SavedArchive::read(&bytes[..], 1 << 20, |_, _, _, _| Ok(true)).unwrap()
    }

    #[test]
    fn a_record_another_checkout_made_is_recovered_from_the_engine_s_export() {
        let config = br#"{"rootfs":{"diff_ids":[]}}"#;
        let manifest = load_manifest(config, &[layer(b"a")]);
        let id = Digest::of(&manifest);
        let recovered = record_from_export(&export(&[&manifest, config], &[]), "x:y", &id);
        assert_eq!(recovered.unwrap(), manifest);
        // The export of another image, or one without the config, proves nothing.
        let other = load_manifest(br#"{"other":1}"#, &[]);
        let err = record_from_export(&export(&[&other, config], &[]), "x:y", &id).unwrap_err();
        assert!(format!("{err:#}").contains("lacks its manifest"), "{err:#}");
        let err = record_from_export(&export(&[&manifest], &[]), "x:y", &id).unwrap_err();
        assert!(format!("{err:#}").contains("lacks its config"), "{err:#}");
        // Bytes under a name they do not hash to.
        let name = format!("blobs/sha256/{}", id.hex());
        let err =
            record_from_export(&export(&[config], &[(&name, b"{}")]), "x:y", &id).unwrap_err();
        assert!(format!("{err:#}").contains("other bytes"), "{err:#}");
    }

    #[test]
    fn the_engine_id_is_the_config_digest_on_classic_and_the_manifest_digest_on_containerd() {
        let config = br#"{"rootfs":{}}"#;
        let layers = [layer(b"a"), layer(b"b")];
        assert_eq!(
            expected_engine_id(ImageStore::Classic, config, &layers),
            Digest::of(config)
        );
        let manifest = load_manifest(config, &layers);
        assert_eq!(
            expected_engine_id(ImageStore::Containerd, config, &layers),
            Digest::of(&manifest)
        );
        let parsed: ImageManifest = serde_json::from_slice(&manifest).unwrap();
        assert_eq!(
            parsed.config().digest().as_ref(),
            Digest::of(config).as_str()
        );
        assert_eq!(
            parsed.layers()[1].digest().as_ref(),
            layers[1].diff_id.as_str()
        );
        assert_eq!(parsed.layers()[1].media_type().to_string(), OCI_LAYER_TAR);
    }

    #[test]
    fn a_record_names_the_config_only_when_it_hashes_to_the_engine_id() {
        let dir = tempfile::tempdir().unwrap();
        let records = ManifestRecords::new(dir.path());
        let config = br#"{"rootfs":{}}"#;
        let manifest = load_manifest(config, &[layer(b"a")]);
        let id = Digest::of(&manifest);
        let containerd = engine(ImageStore::Containerd);
        let err = config_digest(&containerd, "x:y", &id, &records)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("containerd image store") && err.contains("no record"),
            "{err}"
        );
        records.keep(&manifest).unwrap();
        assert_eq!(
            config_digest(&containerd, "x:y", &id, &records).unwrap(),
            Digest::of(config)
        );
        // A record that was changed is no record.
        std::fs::write(
            records.file(&id),
            b"{\"config\":{\"digest\":\"sha256:00\"}}",
        )
        .unwrap();
        assert!(config_digest(&containerd, "x:y", &id, &records).is_err());
        // The classic store's id is the config digest itself.
        assert_eq!(
            config_digest(&engine(ImageStore::Classic), "x:y", &id, &records).unwrap(),
            id
        );
    }

    #[test]
    fn a_load_without_layers_or_with_other_ones_is_an_error_naming_the_image_and_store() {
        let engine = engine(ImageStore::Containerd);
        let ids = [Digest::of(b"a"), Digest::of(b"b")];
        let id = Digest::of(b"manifest");
        let layers: Vec<String> = ids.iter().map(|d| d.to_string()).collect();
        check_loaded("x:y", &engine, &id, &ids, Some(id.as_str()), &layers).unwrap();
        let err = check_loaded("x:y", &engine, &id, &ids, Some(id.as_str()), &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("x:y")
                && err.contains("containerd image store")
                && err.contains("no layers"),
            "{err}"
        );
        let err = check_loaded("x:y", &engine, &id, &ids, Some(id.as_str()), &layers[..1])
            .unwrap_err()
            .to_string();
        assert!(err.contains("with the layers"), "{err}");
        let err = check_loaded("x:y", &engine, &id, &ids, Some("sha256:11"), &layers)
            .unwrap_err()
            .to_string();
        assert!(err.contains("manifest the tool loaded"), "{err}");
    }

    #[test]
    fn image_names_are_completed_as_the_containerd_store_names_them() {
        assert_eq!(
            full_image_name("coding-agent:1"),
            "docker.io/library/coding-agent:1"
        );
        assert_eq!(full_image_name("me/x:1"), "docker.io/me/x:1");
        assert_eq!(full_image_name("127.0.0.1:5000/x:1"), "127.0.0.1:5000/x:1");
        assert_eq!(full_image_name("ghcr.io/o/x:1"), "ghcr.io/o/x:1");
    }
}
