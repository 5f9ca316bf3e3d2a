//! The final image, assembled: `build` has the engine build the Dockerfile's stages up to the
//! system (the final stage's `FROM`), and makes the final stage's layers here, from the stages'
//! trees, instead of letting the engine copy them.
//!
//! Why: the classic builder re-runs every `COPY` after a changed one, and a whole-image export
//! is the only way to get its layers back out; after a one-CLI bump most of a rebuild was
//! those two. Here each `COPY --from=STAGE /staging/DIR/ /` is the stage's tree as the archive
//! API sends it (`docker cp`), made canonical ([`canonical_layer_of_tree`]): the same entries,
//! in the same order, as the engine's own layer of that `COPY`. Each layer is cached by the
//! stage image it came from, and the system's layers and config by the system image, so a bump
//! reads one tree and loads only the layers whose parent chain is new.
//!
//! The final stage may hold `COPY --from=STAGE /DIR/ /`, `ARG NAME` and `LABEL`, nothing else
//! ([`crate::image::dockerfile::final_stage`] refuses the rest, naming the line): those are the steps whose result
//! depends on nothing but their stage's files and the build arguments, so `docker build` of
//! the same Dockerfile gives an image with the same files and settings (a Docker test checks
//! it).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use bollard::Docker;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::image::canonicalize::{self, LoadLayer};
use crate::image::dockerfile::{FinalStage, FinalStep};
use crate::image::engine::{self, EngineInfo};
use crate::image::identity::ManifestRecords;
use crate::oci::canonical::{canonical_layer_of_tree, CanonicalLayer};
use crate::oci::canonical_config::epoch_time;
use crate::util::{atomic_write, sha256_hex, Progress};
use template_formats::model::Digest;

/// The assembled image as loaded: its id and each layer.
#[derive(Debug)]
pub struct Canonical {
    /// `sha256:<hex>` of the canonical config: the tool's id of the image, on every engine.
    pub image_id: String,
    /// The engine's id of the loaded image: the config digest on the classic store, the load
    /// manifest's digest on the containerd store (see [`crate::image::identity`]).
    pub engine_id: String,
    pub(crate) layers: Vec<CanonicalLayer>,
}

/// The assembled image's config: the system's canonical config with the final stage's layers,
/// history and labels added. Pure.
pub(crate) fn assembled_config(
    system_config: &[u8],
    steps: &[FinalStep],
    copied: &[CanonicalLayer],
    extra_labels: &[(String, String)],
    epoch: u64,
) -> Result<Vec<u8>> {
    let mut config: Value =
        serde_json::from_slice(system_config).context("the system's config is not JSON")?;
    let time = Value::String(epoch_time(epoch)?);
    let mut copies = copied.iter();
    let mut history = Vec::new();
    let mut labels = Vec::new();
    let mut diff_ids = Vec::new();
    for step in steps {
        match step {
            FinalStep::Copy { instruction, .. } => {
                let layer = copies
                    .next()
                    .context("fewer layers than COPY steps in the final stage")?;
                diff_ids.push(Value::String(layer.diff_id.to_string()));
                history.push(serde_json::json!({"created": time, "created_by": instruction}));
            }
            FinalStep::Label {
                labels: pairs,
                instruction,
            } => {
                labels.extend(pairs.iter().cloned());
                history.push(serde_json::json!({
                    "created": time, "created_by": instruction, "empty_layer": true
                }));
            }
        }
    }
    if copies.next().is_some() {
        bail!("more layers than COPY steps in the final stage");
    }
    labels.extend(extra_labels.iter().cloned());
    let object = config
        .as_object_mut()
        .context("the system's config is not an object")?;
    object
        .get_mut("rootfs")
        .and_then(|r| r.get_mut("diff_ids"))
        .and_then(Value::as_array_mut)
        .context("the system's config has no rootfs.diff_ids")?
        .extend(diff_ids);
    object
        .entry("history")
        .or_insert_with(|| Value::Array(Vec::new()))
        .as_array_mut()
        .context("the system's config has a history that is not a list")?
        .extend(history);
    let settings = object
        .entry("config")
        .or_insert_with(|| Value::Object(Default::default()))
        .as_object_mut()
        .context("the system's config has settings that are not an object")?;
    let existing = settings
        .entry("Labels")
        .or_insert_with(|| Value::Object(Default::default()));
    if existing.is_null() {
        *existing = Value::Object(Default::default());
    }
    let existing = existing
        .as_object_mut()
        .context("the system's labels are not an object")?;
    for (key, value) in labels {
        existing.insert(key, Value::String(value));
    }
    Ok(crate::oci::canonical_config::canonical_json(config))
}

/// What to do when a load fails: a layer file damaged in the cache fails the engine's diff id
/// check, and removing the cache makes every layer anew.
fn damaged_cache_hint(dir: &Path) -> String {
    format!(
        "the engine did not load the assembled image; if it reports an invalid diff id, a cached \
         layer is damaged: remove {} and build again",
        dir.display()
    )
}

/// Chain ids of `diff_ids` (the OCI image spec's ChainID): a layer's identity on its parents.
pub(crate) fn chain_ids(diff_ids: &[Digest]) -> Vec<Digest> {
    let mut chains: Vec<Digest> = Vec::new();
    for diff_id in diff_ids {
        let chain = match chains.last() {
            None => diff_id.clone(),
            Some(parent) => Digest::of(format!("{parent} {diff_id}").as_bytes()),
        };
        chains.push(chain);
    }
    chains
}

/// The file an assembly holds locked in its cache directory.
const LOCK_FILE: &str = ".lock";

/// The environment variable that moves the layer cache (`Settings::layer_cache`; the cache's
/// directory is `Layout::layer_cache`): `bench rebuild` sets it for its rebuild, which runs in
/// a scratch root, so it uses the cold build's cache as one machine's releases share theirs.
#[cfg_attr(not(feature = "bench"), allow(dead_code))]
pub(crate) const CACHE_ENV: &str = "XTASK_LAYER_CACHE";

/// Canonical layers kept between builds, one directory per platform: layer files named by
/// their diff id, and entries naming the layers of one stage tree or one system image.
struct LayerCache {
    dir: PathBuf,
}

/// The system image's canonical config and layers.
#[derive(Debug, Serialize, Deserialize)]
struct SystemEntry {
    config: String,
    layers: Vec<CanonicalLayer>,
}

impl LayerCache {
    fn layer_file(&self, layer: &CanonicalLayer) -> PathBuf {
        self.dir.join(format!("{}.tar", layer.diff_id.hex()))
    }

    fn config_file(&self, image_id: &Digest) -> PathBuf {
        self.dir.join(format!("{}.config.json", image_id.hex()))
    }

    fn has(&self, layer: &CanonicalLayer) -> bool {
        std::fs::metadata(self.layer_file(layer)).is_ok_and(|m| m.len() == layer.size)
    }

    fn entry_file(&self, what: &str, source: &str, epoch: u64) -> PathBuf {
        let key =
            sha256_hex(format!("assembly cache v2\n{what} {source}\nepoch {epoch}\n").as_bytes());
        self.dir.join(format!("{key}.json"))
    }

    fn read<T: serde::de::DeserializeOwned>(&self, entry: &Path) -> Option<T> {
        serde_json::from_slice(&std::fs::read(entry).ok()?).ok()
    }

    fn write<T: Serialize>(&self, entry: &Path, value: &T) -> Result<()> {
        atomic_write(entry, &serde_json::to_vec(value)?)
    }

    /// Moves a freshly written layer file into the cache under its diff id.
    fn keep(&self, file: &Path, layer: &CanonicalLayer) -> Result<()> {
        let to = self.layer_file(layer);
        if file.exists() {
            std::fs::rename(file, &to)
                .with_context(|| format!("cannot move {} to {}", file.display(), to.display()))?;
        }
        Ok(())
    }

    /// Removes what a killed assembly was writing when it died: temporary files (a layer
    /// or an entry not yet renamed into place, `.tmp*`) and system export directories
    /// (`export-*`). Layer files and entries only ever enter the cache whole, by rename, so
    /// nothing else can be partial. Called under the cache's exclusive lock, when no other
    /// assembly writes here. Returns how many and their bytes.
    fn remove_killed_writes(&self) -> (usize, u64) {
        let Ok(listing) = std::fs::read_dir(&self.dir) else {
            return (0, 0);
        };
        let (mut count, mut bytes) = (0, 0);
        for entry in listing.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if !(name.starts_with(".tmp") || name.starts_with("export-")) {
                continue;
            }
            let path = entry.path();
            let size = match path.is_dir() {
                true => std::fs::read_dir(&path)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .filter_map(|e| e.metadata().ok())
                    .map(|m| m.len())
                    .sum(),
                false => entry.metadata().map_or(0, |m| m.len()),
            };
            let removed = match path.is_dir() {
                true => std::fs::remove_dir_all(&path),
                false => std::fs::remove_file(&path),
            };
            if removed.is_ok() {
                count += 1;
                bytes += size;
            }
        }
        (count, bytes)
    }

    /// Removes every layer file and entry that `kept` does not name: the cache holds one image
    /// per platform, the last one assembled.
    fn prune(&self, kept: &[CanonicalLayer], entries: &[PathBuf]) {
        let layers: BTreeSet<PathBuf> = kept.iter().map(|l| self.layer_file(l)).collect();
        let Ok(listing) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for path in listing.flatten().map(|e| e.path()) {
            if !layers.contains(&path) && !entries.contains(&path) {
                let _ = match path.is_dir() {
                    true => std::fs::remove_dir_all(&path),
                    false => std::fs::remove_file(&path),
                };
            }
        }
    }
}

/// The image `image_id` as the layer cache in `dir` holds it (the last one assembled there):
/// its canonical config and each layer's file, opened under the cache's lock so a later
/// assembly's pruning cannot take them; `None` when the cache holds another image or lacks a
/// layer (`publish` then exports the image from the engine).
pub(crate) fn cached_image(
    dir: &Path,
    image_id: &str,
) -> Result<Option<(Vec<u8>, Vec<crate::oci::archive::LayerFile>)>> {
    let Ok(id) = image_id.parse::<Digest>() else {
        return Ok(None);
    };
    let cache = LayerCache {
        dir: dir.to_path_buf(),
    };
    let lock_path = dir.join(LOCK_FILE);
    let Ok(lock) = std::fs::File::open(&lock_path) else {
        return Ok(None);
    };
    // Shared: publishers read side by side; an assembly (exclusive) waits for them.
    lock.lock_shared()
        .with_context(|| format!("cannot lock {}", lock_path.display()))?;
    let Ok(config) = std::fs::read(cache.config_file(&id)) else {
        return Ok(None);
    };
    if Digest::of(&config) != id {
        return Ok(None);
    }
    #[derive(Deserialize)]
    struct Rootfs {
        diff_ids: Vec<Digest>,
    }
    #[derive(Deserialize)]
    struct Config {
        rootfs: Rootfs,
    }
    let parsed: Config = serde_json::from_slice(&config)
        .with_context(|| format!("{}: not an image config", cache.config_file(&id).display()))?;
    let mut files = Vec::new();
    for diff_id in parsed.rootfs.diff_ids {
        let path = dir.join(format!("{}.tar", diff_id.hex()));
        let Ok(file) = std::fs::File::open(&path) else {
            return Ok(None);
        };
        files.push(crate::oci::archive::LayerFile {
            diff_id: diff_id.to_string(),
            path,
            file,
        });
    }
    Ok(Some((config, files)))
}

/// What to assemble: the final stage read from the Dockerfile, the builder's stage images, and
/// where the result goes.
pub(crate) struct Assembly<'a> {
    pub stage: &'a FinalStage,
    /// Stage name -> the engine's image of it, from [`stage_images`].
    pub stage_images: &'a BTreeMap<String, String>,
    /// The engine's image of the system stage.
    pub system_image: &'a str,
    /// Labels added after the final stage's own (the build id).
    pub extra_labels: &'a [(String, String)],
    pub tag: &'a str,
    pub epoch: u64,
    /// This platform's cache directory.
    pub cache_dir: &'a Path,
    /// The engine, whose store decides how the image is loaded.
    pub engine: &'a EngineInfo,
    /// Where the load manifests given to a containerd store are kept.
    pub records: &'a ManifestRecords,
    /// The settings' `DOCKER_HOST`: whether the engine's data root is a local path.
    pub docker_host: Option<&'a str>,
}

/// Assembles the final image and loads it as `assembly.tag`.
pub(crate) async fn assemble(
    docker: &Docker,
    assembly: &Assembly<'_>,
    progress: &Progress,
) -> Result<Canonical> {
    let cache = LayerCache {
        dir: assembly.cache_dir.to_path_buf(),
    };
    std::fs::create_dir_all(&cache.dir)
        .with_context(|| format!("cannot create {}", cache.dir.display()))?;
    // One assembly per cache at a time: a second one's pruning would take this one's layers.
    let lock_path = cache.dir.join(LOCK_FILE);
    let waiting = format!(
        "waiting for another build's assembly in {}",
        cache.dir.display()
    );
    let lock = crate::util::lock_exclusive_waiting(&lock_path, &waiting, progress).await?;
    let (count, bytes) = cache.remove_killed_writes();
    if count > 0 {
        progress.step(format!(
            "removed {count} partial file(s) ({}) that a killed assembly left in the layer \
             cache {}: what they were to hold is made again",
            crate::disk::human(bytes),
            cache.dir.display()
        ));
    }
    let epoch = assembly.epoch;
    let mut entries = Vec::new();

    let system_id = image_id(docker, assembly.system_image).await?;
    let system_entry = cache.entry_file("system", &system_id, epoch);
    let system = match cache.read::<SystemEntry>(&system_entry) {
        Some(system) if system.layers.iter().all(|l| cache.has(l)) => {
            progress.step(format!(
                "system layers of {} ({system_id}): from the cache",
                assembly.system_image
            ));
            system
        }
        _ => {
            progress.step(format!(
                "system layers of {} ({system_id}): not in the layer cache; exporting them",
                assembly.system_image
            ));
            // The system's export passes through the engine's data root and its canonical
            // layers stay in the cache: each about the system image's size.
            let size = crate::image::engine::inspect_image(docker, assembly.system_image)
                .await?
                .and_then(|i| i.size)
                .unwrap_or(0)
                .max(0) as u64;
            let system_image = assembly.system_image;
            let mut needs = vec![crate::disk::Need {
                dir: cache.dir.clone(),
                bytes: size,
                what: format!("the canonical layers of {system_image} in the layer cache"),
            }];
            needs.extend(
                crate::disk::engine_need(
                    docker,
                    assembly.docker_host,
                    size,
                    format!("the export of {system_image}"),
                    progress,
                )
                .await,
            );
            crate::disk::ensure_space(&format!("assembling {system_image}'s layers"), needs)?;
            let work = tempfile::Builder::new()
                .prefix("export-")
                .tempdir_in(&cache.dir)
                .with_context(|| format!("cannot create a directory in {}", cache.dir.display()))?;
            let files = canonicalize::export_canonical(
                docker,
                assembly.system_image,
                work.path(),
                epoch,
                progress,
            )
            .await?;
            for (file, layer) in &files.layers {
                cache.keep(file, layer)?;
                // A whole layer under its diff id, no entry naming it yet; the others may
                // still be in the export directory.
                crate::kill_point::reached("assemble:system-layer-kept");
            }
            let system = SystemEntry {
                config: String::from_utf8(files.config)
                    .context("the system's canonical config is not UTF-8")?,
                layers: files.layers.into_iter().map(|(_, l)| l).collect(),
            };
            cache.write(&system_entry, &system)?;
            system
        }
    };
    entries.push(system_entry);

    let mut copied = Vec::new();
    for step in &assembly.stage.steps {
        let FinalStep::Copy { stage, tree, .. } = step else {
            continue;
        };
        let image = assembly.stage_images.get(stage).with_context(|| {
            format!("the engine's build output names no image for the stage `{stage}`")
        })?;
        let (layer, entry) =
            tree_layer(docker, &cache, stage, image, tree, epoch, progress).await?;
        entries.push(entry);
        copied.push(layer);
    }

    let config = assembled_config(
        system.config.as_bytes(),
        &assembly.stage.steps,
        &copied,
        assembly.extra_labels,
        epoch,
    )?;
    // The config too, so `publish` compresses from this cache instead of an export.
    let config_file = cache.config_file(&Digest::of(&config));
    atomic_write(&config_file, &config)?;
    // The cache names the new image; the engine has not loaded it, the old image's layers
    // are not pruned.
    crate::kill_point::reached("assemble:config-written");
    entries.push(config_file);
    let layers: Vec<CanonicalLayer> = system.layers.iter().chain(&copied).cloned().collect();
    let held = held_chains(docker).await?;
    let diff_ids: Vec<Digest> = layers.iter().map(|l| l.diff_id.clone()).collect();
    let files: Vec<PathBuf> = layers.iter().map(|l| cache.layer_file(l)).collect();
    let thin: Vec<LoadLayer> = layers
        .iter()
        .zip(chain_ids(&diff_ids))
        .zip(&files)
        .map(|((layer, chain), file)| LoadLayer {
            layer,
            file: (!held.contains(&chain)).then_some(file.as_path()),
        })
        .collect();
    let load = |layers| {
        canonicalize::load(
            docker,
            assembly.engine,
            assembly.records,
            assembly.tag,
            &config,
            layers,
            progress,
        )
    };
    let engine_id = match load(&thin).await {
        Ok(id) => id,
        // An image removed since `held_chains` looked (another build's clean-up) takes its
        // layers with it, and the containerd store refuses, or half-loads, an archive without
        // a layer it holds only compressed; the whole archive does not depend on what the
        // engine holds.
        Err(err) if thin.iter().any(|l| l.file.is_none()) => {
            progress.step(format!(
                "loading only the engine's missing layers failed ({err:#}); loading every layer"
            ));
            let full: Vec<LoadLayer> = layers
                .iter()
                .zip(&files)
                .map(|(layer, file)| LoadLayer {
                    layer,
                    file: Some(file),
                })
                .collect();
            load(&full)
                .await
                .with_context(|| damaged_cache_hint(&cache.dir))?
        }
        Err(err) => return Err(err).with_context(|| damaged_cache_hint(&cache.dir)),
    };
    entries.push(cache.dir.join(LOCK_FILE));
    cache.prune(&layers, &entries);
    drop(lock);
    Ok(Canonical {
        image_id: Digest::of(&config).to_string(),
        engine_id: engine_id.to_string(),
        layers,
    })
}

/// The canonical layer of `tree` in `stage`'s image, from the cache or read through the
/// archive API; with the cache entry that names it.
async fn tree_layer(
    docker: &Docker,
    cache: &LayerCache,
    stage: &str,
    image: &str,
    tree: &str,
    epoch: u64,
    progress: &Progress,
) -> Result<(CanonicalLayer, PathBuf)> {
    let image_id = image_id(docker, image).await?;
    let entry = cache.entry_file("tree", &format!("{image_id} {tree}"), epoch);
    if let Some(layer) = cache
        .read::<CanonicalLayer>(&entry)
        .filter(|l| cache.has(l))
    {
        progress.step(format!(
            "{stage} {tree}: from the cache ({})",
            layer.diff_id
        ));
        return Ok((layer, entry));
    }
    progress.step(format!(
        "{stage} {tree}: not in the layer cache; reading it from {image}"
    ));
    let top = tree.rsplit('/').next().unwrap_or(tree).to_string();
    let file = tempfile::NamedTempFile::new_in(&cache.dir)
        .with_context(|| format!("cannot create a file in {}", cache.dir.display()))?;
    let writer = KillPointWriter(file.reopen()?);
    let layer = engine::read_image_tree(
        docker,
        &image_id,
        &engine::new_run_id("assemble"),
        tree,
        move |archive| {
            let mut out = std::io::BufWriter::with_capacity(1 << 20, writer);
            let layer = canonical_layer_of_tree(archive, &top, &mut out, epoch)?;
            std::io::Write::flush(&mut out)?;
            // The whole layer is in the temporary file, not yet under its diff id.
            crate::kill_point::reached("assemble:layer-file-complete");
            Ok(layer)
        },
    )
    .await
    .with_context(|| format!("cannot make the layer of {tree} in the stage {stage}"))?;
    progress.step(format!(
        "{stage} {tree}: {} entries, {:.0} MB, {}",
        layer.entries,
        layer.size as f64 / 1e6,
        layer.diff_id
    ));
    file.persist(cache.layer_file(&layer))
        .with_context(|| format!("cannot keep the layer of {tree} in {}", cache.dir.display()))?;
    // The layer file is in place under its diff id; no entry names it yet.
    crate::kill_point::reached("assemble:layer-file-kept");
    cache.write(&entry, &layer)?;
    // Between layers: this tree's entry is written, the next tree not begun.
    crate::kill_point::reached("assemble:tree-entry-written");
    Ok((layer, entry))
}

/// The writer of a layer's temporary file: each write that reaches the file (the buffer in
/// front of it passes 1 MiB at a time) is the kill point `assemble:layer-bytes-written`, so
/// the crash test can leave a layer file half written; one lookup per MiB otherwise.
struct KillPointWriter(std::fs::File);

impl std::io::Write for KillPointWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let written = self.0.write(bytes)?;
        crate::kill_point::reached("assemble:layer-bytes-written");
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// The engine's full id of `image`.
async fn image_id(docker: &Docker, image: &str) -> Result<String> {
    engine::inspect_image(docker, image)
        .await?
        .and_then(|i| i.id)
        .with_context(|| format!("the engine has no image {image}"))
}

/// Every layer chain the engine's tagged images stand on.
async fn held_chains(docker: &Docker) -> Result<BTreeSet<Digest>> {
    let images = docker
        .list_images(None::<bollard::query_parameters::ListImagesOptions>)
        .await
        .context("cannot list the engine's images")?;
    let mut held = BTreeSet::new();
    for summary in images {
        let Some(image) = engine::inspect_image(docker, &summary.id).await? else {
            continue;
        };
        let diff_ids: Vec<Digest> = image
            .root_fs
            .and_then(|r| r.layers)
            .unwrap_or_default()
            .iter()
            .filter_map(|d| d.parse().ok())
            .collect();
        held.extend(chain_ids(&diff_ids));
    }
    Ok(held)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::dockerfile::final_stage;
    use crate::image::dockerfile::tests::{args, DOCKERFILE};

    fn layer(n: u8) -> CanonicalLayer {
        CanonicalLayer {
            diff_id: Digest::of(&[n]),
            size: 1024,
            entries: 1,
        }
    }

    #[test]
    fn the_config_gains_the_final_stages_layers_history_and_labels() {
        let system = serde_json::json!({
            "architecture": "amd64",
            "config": {"Env": ["HOME=/workspace"], "Labels": null},
            "history": [{"created": "x", "created_by": "base"}],
            "os": "linux",
            "rootfs": {"type": "layers", "diff_ids": [layer(0).diff_id.to_string()]},
        });
        let system = serde_json::to_vec(&system).unwrap();
        let stage = final_stage(DOCKERFILE, &args()).unwrap();
        let extra = [("build-id".to_string(), "42".to_string())];
        let copied = [layer(1), layer(2)];
        let config = assembled_config(&system, &stage.steps, &copied, &extra, 0).unwrap();
        assert_eq!(
            config,
            assembled_config(&system, &stage.steps, &copied, &extra, 0).unwrap()
        );
        let v: Value = serde_json::from_slice(&config).unwrap();
        let ids: Vec<&str> = v["rootfs"]["diff_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_str().unwrap())
            .collect();
        let expected: Vec<String> = (0..3).map(|n| layer(n).diff_id.to_string()).collect();
        assert_eq!(ids, expected);
        assert_eq!(v["history"].as_array().unwrap().len(), 4);
        assert_eq!(
            v["history"][1]["created_by"],
            "COPY --from=tools /staging/tools/ /"
        );
        assert_eq!(v["history"][3]["empty_layer"], true);
        assert_eq!(v["config"]["Labels"]["org.example.lock"], "abc");
        assert_eq!(v["config"]["Labels"]["build-id"], "42");
        assert_eq!(v["config"]["Env"][0], "HOME=/workspace");
        let err = assembled_config(&system, &stage.steps, &copied[..1], &extra, 0).unwrap_err();
        assert!(err.to_string().contains("fewer layers"), "{err}");
    }

    #[test]
    fn chain_ids_follow_the_image_spec() {
        let diff_ids = [layer(0).diff_id, layer(1).diff_id];
        let chains = chain_ids(&diff_ids);
        assert_eq!(chains[0], diff_ids[0]);
        assert_eq!(
            chains[1],
            Digest::of(format!("{} {}", diff_ids[0], diff_ids[1]).as_bytes())
        );
        // The same layer on another parent is another chain: the engine applies it again.
        assert_ne!(
            chain_ids(&[layer(2).diff_id, layer(1).diff_id])[1],
            chains[1]
        );
    }
}
