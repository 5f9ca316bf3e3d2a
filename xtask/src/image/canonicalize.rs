//! The last step of `build`: the engine's image, rewritten into canonical layers and config
//! (`oci::canonical`), loaded back into the engine under the build's tag.
//!
//! Everything after this (smoke, SBOM, publish) works on the loaded image, so what is tested is
//! what is published: its id is the digest of the config the registry receives, and its layers
//! are the bytes that are compressed. The engine's own image stays under
//! [`ENGINE_REPOSITORY`], because the classic builder's layer cache hangs off it.

use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use bollard::Docker;

use crate::image::engine;
use crate::model::Digest;
use crate::oci::archive::SavedArchive;
use crate::oci::canonical::{canonical_config, canonical_layer, CanonicalLayer};
use crate::util::Progress;

/// Repository of the engine's images as built, before they are made canonical; the tag is the
/// build id, like the canonical image's.
pub(crate) const ENGINE_REPOSITORY: &str = "coding-agent-engine";

/// The canonical image as loaded: its id and each layer.
#[derive(Debug)]
pub struct Canonical {
    /// `sha256:<hex>` of the canonical config: the engine's id of the loaded image.
    pub image_id: String,
    pub(crate) layers: Vec<CanonicalLayer>,
}

/// Rewrites `source` (an image in the engine) into canonical form and loads it as `tag`.
/// `work` is a directory for the layers on their way (about the image's size, removed after).
pub async fn canonicalize(
    docker: &Docker,
    source: &str,
    tag: &str,
    epoch: u64,
    work: &Path,
    progress: &Progress,
) -> Result<Canonical> {
    std::fs::create_dir_all(work).with_context(|| format!("cannot create {}", work.display()))?;
    let dir = tempfile::Builder::new()
        .prefix("canonical-")
        .tempdir_in(work)
        .with_context(|| format!("cannot create a directory in {}", work.display()))?;
    progress.step(format!(
        "making {source} canonical: layer times clamped to {epoch}, build-only config fields \
         dropped"
    ));
    let export = engine::blocking_reader(docker.export_image(source));
    let dir_path = dir.path().to_path_buf();
    let progress_owned = progress.clone();
    let image = tokio::task::spawn_blocking(move || {
        write_layers(export, &dir_path, epoch, &progress_owned)
    })
    .await
    .context("the canonicalizing thread panicked")??;
    let image_id = image.image_id.clone();

    // The archive to load is made on the fly from the layer files: no second copy on disk.
    progress.step(format!("loading {tag} ({image_id}) into the engine"));
    let (to_engine, from_writer) = tokio::io::duplex(1 << 20);
    let tag_owned = tag.to_string();
    let writing = tokio::task::spawn_blocking(move || {
        let mut out = tokio_util::io::SyncIoBridge::new(to_engine);
        write_load_archive(&image, &tag_owned, &mut out)?;
        out.shutdown()?;
        Ok::<_, anyhow::Error>(image)
    });
    let chunks = tokio_util::io::ReaderStream::with_capacity(from_writer, 1 << 20);
    let loaded = engine::load_stream(docker, chunks, &format!("of {tag}"), progress).await;
    // The writer's error first: a load that failed because the archive ended early says less.
    let image = writing
        .await
        .context("the archive-writing thread panicked")??;
    loaded?;
    let layers = image.layers.into_iter().map(|(_, l)| l).collect();
    let loaded = engine::inspect_image(docker, tag)
        .await?
        .with_context(|| format!("the engine loaded the archive of {tag} but has no {tag}"))?;
    let loaded_id: Digest = loaded
        .id
        .as_deref()
        .unwrap_or_default()
        .parse()
        .with_context(|| format!("the engine's id of {tag} is not a sha256 digest"))?;
    if loaded_id != image_id {
        bail!(
            "the engine loaded {tag} as {loaded_id}, not as {image_id} (the canonical config's \
             digest); an engine that rewrites configs on load cannot give reproducible images"
        );
    }
    Ok(Canonical {
        image_id: image_id.to_string(),
        layers,
    })
}

/// The canonical image on disk: its config, id and layer files, in the image's order.
struct CanonicalFiles {
    config: Vec<u8>,
    image_id: Digest,
    layers: Vec<(PathBuf, CanonicalLayer)>,
}

/// Reads the export and writes each layer canonical into `dir`; makes the config canonical.
fn write_layers(
    export: impl std::io::Read,
    dir: &Path,
    epoch: u64,
    progress: &Progress,
) -> Result<CanonicalFiles> {
    let mut written: BTreeMap<String, (PathBuf, CanonicalLayer)> = BTreeMap::new();
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
    for name in &image.layers {
        if !written.contains_key(name) {
            let bytes = saved
                .small(name)
                .with_context(|| format!("the image archive lacks the layer {name}"))?;
            to_file(&mut written, name, &mut &bytes[..])?;
        }
        layers.push(written[name].clone());
    }
    let diff_ids: Vec<Digest> = layers.iter().map(|(_, l)| l.diff_id.clone()).collect();
    let config = canonical_config(image.config, &diff_ids, epoch)?;
    Ok(CanonicalFiles {
        image_id: Digest::of(&config),
        config,
        layers,
    })
}

/// Writes the `docker load` archive of `image`, tagged `tag`, into `out`; each layer file is
/// removed once it was written for the last time.
fn write_load_archive(image: &CanonicalFiles, tag: &str, out: &mut impl Write) -> Result<()> {
    let mut tar = tar::Builder::new(out);
    let config_name = format!("{}.json", image.image_id.hex());
    let layer_names: Vec<String> = (0..image.layers.len())
        .map(|i| format!("{i}/layer.tar"))
        .collect();
    let manifest = serde_json::to_vec(&serde_json::json!([{
        "Config": config_name,
        "RepoTags": [tag],
        "Layers": layer_names,
    }]))?;
    append(&mut tar, "manifest.json", &manifest)?;
    append(&mut tar, &config_name, &image.config)?;
    let layers = &image.layers;
    for (i, ((path, layer), name)) in layers.iter().zip(&layer_names).enumerate() {
        let mut header = tar::Header::new_gnu();
        header.set_size(layer.size);
        header.set_mode(0o644);
        let file =
            std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
        tar.append_data(&mut header, name, file)
            .with_context(|| format!("cannot send {} to the engine", path.display()))?;
        if !layers[i + 1..].iter().any(|(later, _)| later == path) {
            let _ = std::fs::remove_file(path);
        }
    }
    tar.finish()?;
    Ok(())
}

/// One layer of the export, written canonical to a file in `dir` and recorded in `written`.
fn write_layer(
    dir: &Path,
    epoch: u64,
    progress: &Progress,
    written: &mut BTreeMap<String, (PathBuf, CanonicalLayer)>,
    name: &str,
    data: &mut dyn std::io::Read,
) -> Result<()> {
    let path = dir.join(format!("layer-{}.tar", written.len()));
    let file = std::fs::File::create(&path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let layer = canonical_layer(data, &mut out, epoch)
        .with_context(|| format!("cannot make the layer {name} canonical"))?;
    out.flush()?;
    progress.step(format!(
        "canonical layer: {} entries, {:.0} MB, {}",
        layer.entries,
        layer.size as f64 / 1e6,
        layer.diff_id
    ));
    written.insert(name.to_string(), (path, layer));
    Ok(())
}

fn append<W: Write>(tar: &mut tar::Builder<W>, name: &str, bytes: &[u8]) -> Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_size(bytes.len() as u64);
    header.set_mode(0o644);
    tar.append_data(&mut header, name, bytes)
        .with_context(|| format!("cannot add {name} to the archive to load"))
}
