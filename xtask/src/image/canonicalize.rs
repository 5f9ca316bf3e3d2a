//! Canonical images in and out of the engine: an engine's image exported and rewritten into
//! canonical layers and config (`oci::canonical`), and a canonical image loaded back.
//!
//! [`crate::image::assemble`] uses both: the system image (base, Debian, settings) is exported
//! once per package set, and the assembled image is loaded under the build's tag. Everything
//! after that (smoke, SBOM, publish) works on the loaded image, so what is tested is what is
//! published: its id is the digest of the config the registry receives, and its layers are the
//! bytes that are compressed.

use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use bollard::Docker;

use crate::image::engine::{self, EngineInfo, ImageStore};
use crate::image::identity::{self, ManifestRecords};
use crate::oci::archive::SavedArchive;
use crate::oci::canonical::{canonical_layer_without, indexed_canonical_layer, CanonicalLayer};
use crate::oci::canonical_config::canonical_config;
use crate::oci::unchanged::{self, IndexedEntry, LowerFiles};
use crate::util::Progress;
use template_formats::model::Digest;

/// Repository of the engine's own images (the system stage as built), before anything is made
/// canonical; the tag is the build id, like the canonical image's.
pub(crate) const ENGINE_REPOSITORY: &str = "coding-agent-engine";

/// Exports `source` (an image in the engine) and writes its layers canonical into `dir`.
pub(crate) async fn export_canonical(
    docker: &Docker,
    source: &str,
    dir: &Path,
    epoch: u64,
    progress: &Progress,
) -> Result<CanonicalFiles> {
    progress.step(format!(
        "exporting {source} canonical: layer times clamped to {epoch}, build-only config fields \
         dropped"
    ));
    let export = engine::blocking_reader(docker.export_image(source));
    let dir = dir.to_path_buf();
    let progress = progress.clone();
    tokio::task::spawn_blocking(move || write_layers(export, &dir, epoch, &progress))
        .await
        .context("the canonicalizing thread panicked")?
}

/// One layer of an image to load: its canonical form, and the file that holds it, or `None`
/// when the engine already holds the layer on this parent chain (`docker load` skips a layer
/// whose chain it has, without opening its file).
pub(crate) struct LoadLayer<'a> {
    pub layer: &'a CanonicalLayer,
    pub file: Option<&'a Path>,
}

/// Loads the image of `config` and `layers` into the engine as `tag`, in the form its store
/// loads (a docker-archive on the classic store, an OCI layout on the containerd store, whose
/// manifest is kept in `records`), and checks what it loaded: the engine's id (the config's
/// digest, or the load manifest's) and every diff id. Returns the engine's id.
pub(crate) async fn load(
    docker: &Docker,
    engine: &EngineInfo,
    records: &ManifestRecords,
    tag: &str,
    config: &[u8],
    layers: &[LoadLayer<'_>],
    progress: &Progress,
) -> Result<Digest> {
    let canonical: Vec<CanonicalLayer> = layers.iter().map(|l| l.layer.clone()).collect();
    let expected_id = identity::expected_engine_id(engine.store, config, &canonical);
    let sent: u64 = layers
        .iter()
        .filter(|l| l.file.is_some())
        .map(|l| l.layer.size)
        .sum();
    progress.step(format!(
        "loading {tag} ({}) into {engine}: {} of {} layers, {:.0} MB",
        Digest::of(config),
        layers.iter().filter(|l| l.file.is_some()).count(),
        layers.len(),
        sent as f64 / 1e6
    ));
    let manifest = match engine.store {
        ImageStore::Classic => None,
        ImageStore::Containerd => {
            let manifest = identity::load_manifest(config, &canonical);
            records.keep(&manifest)?;
            Some(manifest)
        }
    };
    // The archive to load is made on the fly from the layer files: no second copy on disk.
    let (to_engine, from_writer) = tokio::io::duplex(1 << 20);
    let tag_owned = tag.to_string();
    let config_owned = config.to_vec();
    let files: Vec<(Option<PathBuf>, CanonicalLayer)> = layers
        .iter()
        .map(|l| (l.file.map(Path::to_path_buf), l.layer.clone()))
        .collect();
    let writing = tokio::task::spawn_blocking(move || {
        let mut out = tokio_util::io::SyncIoBridge::new(to_engine);
        match &manifest {
            None => write_load_archive(&config_owned, &files, &tag_owned, &mut out)?,
            Some(manifest) => {
                write_oci_layout(&config_owned, manifest, &files, &tag_owned, &mut out)?
            }
        }
        out.shutdown()?;
        Ok::<_, anyhow::Error>(())
    });
    let chunks = tokio_util::io::ReaderStream::with_capacity(from_writer, 1 << 20);
    let loaded = engine::load_stream(docker, chunks, &format!("of {tag}"), progress).await;
    // The writer's error first: a load that failed because the archive ended early says less.
    writing
        .await
        .context("the archive-writing thread panicked")??;
    loaded.with_context(|| format!("on {engine}"))?;
    let loaded = engine::inspect_image(docker, tag)
        .await?
        .with_context(|| format!("{engine} loaded the archive of {tag} but has no {tag}"))?;
    let diff_ids: Vec<Digest> = canonical.iter().map(|l| l.diff_id.clone()).collect();
    let loaded_layers = loaded.root_fs.and_then(|r| r.layers).unwrap_or_default();
    identity::check_loaded(
        tag,
        engine,
        &expected_id,
        &diff_ids,
        loaded.id.as_deref(),
        &loaded_layers,
    )?;
    Ok(expected_id)
}

/// A canonical image on disk: its config and layer files, in the image's order.
pub(crate) struct CanonicalFiles {
    pub config: Vec<u8>,
    pub layers: Vec<(PathBuf, CanonicalLayer)>,
}

/// Reads the export and writes each layer canonical into `dir`, without the entries it repeats
/// unchanged from the layers below (`oci::unchanged`: engines disagree on those); makes the
/// config canonical.
pub(crate) fn write_layers(
    export: impl std::io::Read,
    dir: &Path,
    epoch: u64,
    progress: &Progress,
) -> Result<CanonicalFiles> {
    let mut written: BTreeMap<String, Written> = BTreeMap::new();
    let to_file = |written: &mut BTreeMap<_, _>, name: &str, data: &mut dyn std::io::Read| {
        write_layer(dir, epoch, progress, written, name, data)
    };
    // Layers up to 1 MB stay in memory until the archive is read; the rest stream through.
    let saved = SavedArchive::read(export, 1 << 20, |_, name, _, data| {
        to_file(&mut written, &name, data)?;
        Ok(true)
    })?;
    let image = saved.image()?;
    let mut layers = Vec::new();
    // The export holds layers in its own order; which entries repeat a lower layer's is a
    // question of the image's order.
    let mut lower = LowerFiles::default();
    for (position, name) in image.layers.iter().enumerate() {
        if !written.contains_key(name) {
            let bytes = saved
                .small(name)
                .with_context(|| format!("the image archive lacks the layer {name}"))?;
            to_file(&mut written, name, &mut &bytes[..])?;
        }
        let (file, layer, index) = &written[name];
        let repeated = unchanged::unchanged_entries(&lower, index);
        lower.apply(index);
        if repeated.is_empty() {
            layers.push((file.clone(), layer.clone()));
            continue;
        }
        let trimmed_file = dir.join(format!("layer-{position}-trimmed.tar"));
        let trimmed = trim_layer(file, &trimmed_file, epoch, &repeated).with_context(|| {
            format!("cannot leave the repeated entries out of the layer {name}")
        })?;
        let shown: Vec<String> = repeated
            .iter()
            .take(3)
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect();
        progress.step(format!(
            "layer {position}: {} entries repeated unchanged from the layers below left out ({}{}): {}",
            repeated.len(),
            shown.join(", "),
            if repeated.len() > 3 { ", ..." } else { "" },
            trimmed.diff_id
        ));
        layers.push((trimmed_file, trimmed));
    }
    let diff_ids: Vec<Digest> = layers.iter().map(|(_, l)| l.diff_id.clone()).collect();
    let config = canonical_config(image.config, &diff_ids, epoch)?;
    Ok(CanonicalFiles { config, layers })
}

/// Writes the `docker load` archive of `config` and its layers, tagged `tag`, into `out`. A
/// layer without a file is named in the manifest but not sent (see [`LoadLayer`]).
fn write_load_archive(
    config: &[u8],
    layers: &[(Option<PathBuf>, CanonicalLayer)],
    tag: &str,
    out: &mut impl Write,
) -> Result<()> {
    let mut tar = tar::Builder::new(out);
    let config_name = format!("{}.json", Digest::of(config).hex());
    let layer_names: Vec<String> = (0..layers.len())
        .map(|i| format!("{i}/layer.tar"))
        .collect();
    let manifest = serde_json::to_vec(&serde_json::json!([{
        "Config": config_name,
        "RepoTags": [tag],
        "Layers": layer_names,
    }]))?;
    append(&mut tar, "manifest.json", &manifest)?;
    append(&mut tar, &config_name, config)?;
    for ((path, layer), name) in layers.iter().zip(&layer_names) {
        if let Some(path) = path {
            append_layer_file(&mut tar, name, path, layer)?;
        }
    }
    tar.finish()?;
    Ok(())
}

/// Writes the OCI image layout of `manifest` (over `config` and the layers, uncompressed),
/// tagged `tag`, into `out`: what the containerd image store loads. A layer without a file is
/// named in the manifest but not sent; the store then uses its own blob of that digest.
fn write_oci_layout(
    config: &[u8],
    manifest: &[u8],
    layers: &[(Option<PathBuf>, CanonicalLayer)],
    tag: &str,
    out: &mut impl Write,
) -> Result<()> {
    let mut tar = tar::Builder::new(out);
    let index = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": template_formats::oci::index::OCI_INDEX,
        "manifests": [{
            "mediaType": template_formats::oci::index::OCI_MANIFEST,
            "digest": Digest::of(manifest).as_str(),
            "size": manifest.len(),
            // As the containerd store's own `docker save` names an image (moby 28.5.2).
            "annotations": {
                "io.containerd.image.name": identity::full_image_name(tag),
                "org.opencontainers.image.ref.name": tag.rsplit_once(':').map_or("latest", |(_, t)| t),
            },
        }],
    }))?;
    append(&mut tar, "oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#)?;
    append(&mut tar, "index.json", &index)?;
    let blob = |digest: &Digest| format!("blobs/sha256/{}", digest.hex());
    append(&mut tar, &blob(&Digest::of(manifest)), manifest)?;
    append(&mut tar, &blob(&Digest::of(config)), config)?;
    for (path, layer) in layers {
        if let Some(path) = path {
            append_layer_file(&mut tar, &blob(&layer.diff_id), path, layer)?;
        }
    }
    tar.finish()?;
    Ok(())
}

/// A layer of the export as first written: its file, its canonical form, its entries.
type Written = (PathBuf, CanonicalLayer, Vec<IndexedEntry>);

/// The canonical layer `from` without the entries at `paths`, written to `to`.
fn trim_layer(
    from: &Path,
    to: &Path,
    epoch: u64,
    paths: &std::collections::BTreeSet<Vec<u8>>,
) -> Result<CanonicalLayer> {
    let input = std::io::BufReader::with_capacity(
        1 << 20,
        std::fs::File::open(from).with_context(|| format!("cannot read {}", from.display()))?,
    );
    let file =
        std::fs::File::create(to).with_context(|| format!("cannot create {}", to.display()))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let layer = canonical_layer_without(input, &mut out, epoch, paths)?;
    out.flush()?;
    Ok(layer)
}

/// One layer of the export, written canonical to a file in `dir` and recorded in `written`.
fn write_layer(
    dir: &Path,
    epoch: u64,
    progress: &Progress,
    written: &mut BTreeMap<String, Written>,
    name: &str,
    data: &mut dyn std::io::Read,
) -> Result<()> {
    let path = dir.join(format!("layer-{}.tar", written.len()));
    let file = std::fs::File::create(&path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let (layer, index) = indexed_canonical_layer(data, &mut out, epoch)
        .with_context(|| format!("cannot make the layer {name} canonical"))?;
    out.flush()?;
    progress.step(format!(
        "canonical layer: {} entries, {:.0} MB, {}",
        layer.entries,
        layer.size as f64 / 1e6,
        layer.diff_id
    ));
    written.insert(name.to_string(), (path, layer, index));
    Ok(())
}

/// Adds the layer file `path` (of `layer`'s size) to the archive to load as `name`.
fn append_layer_file<W: Write>(
    tar: &mut tar::Builder<W>,
    name: &str,
    path: &Path,
    layer: &CanonicalLayer,
) -> Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_size(layer.size);
    header.set_mode(0o644);
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    tar.append_data(&mut header, name, file)
        .with_context(|| format!("cannot send {} to the engine", path.display()))
}

fn append<W: Write>(tar: &mut tar::Builder<W>, name: &str, bytes: &[u8]) -> Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_size(bytes.len() as u64);
    header.set_mode(0o644);
    tar.append_data(&mut header, name, bytes)
        .with_context(|| format!("cannot add {name} to the archive to load"))
}
