//! From a `docker save` archive to registry blobs: the config, each layer compressed
//! deterministically (same layer, same bytes, same digest) into a file on disk, and the OCI
//! image manifest over them.
//!
//! Speed: the export streams to disk layer by layer (never a whole layer in memory) while the
//! layers already on disk compress, largest first, one at a time on every core (`compress.rs`:
//! a layer is a series of gzip members, each compressed alone with libdeflate). Each finished
//! blob is handed to the caller at once, so uploading starts while the next layer compresses.
//! Determinism does not depend on the schedule or the number of cores.

use std::collections::{BTreeMap, BinaryHeap};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Condvar, Mutex};

use anyhow::{anyhow, bail, Context, Result};
use oci_spec::image::{DescriptorBuilder, Digest as OciDigest, ImageManifestBuilder, MediaType};
use serde::Deserialize;

use crate::oci::blob_upload::Blob;
use crate::oci::compress::{store_bytes, store_layer};
use crate::oci::reuse::{KnownBlob, COMPRESSOR, COMPRESSOR_ANNOTATION};
use crate::oci::stream::{CountingReader, HashingReader, TransferProgress};
use template_formats::model::Digest;
use template_formats::oci::index::{OCI_CONFIG, OCI_LAYER_GZIP};

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
    /// The image of `config` and `layers` (in order), with its canonical manifest.
    fn new(config: Blob, layers: Vec<Blob>, platform: ConfigPlatform) -> Result<PreparedImage> {
        let manifest = image_manifest(&config, &layers)?;
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

    /// Config plus layers: what the registry stores for this image.
    pub(crate) fn size(&self) -> u64 {
        self.config.size + self.layers.iter().map(|l| l.size).sum::<u64>()
    }
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

/// A layer on disk, uncompressed as the export wrote it, waiting for a compressing thread.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Job {
    /// First field: the heap hands out the largest layer first, so the longest compression
    /// starts early and the last one to finish is short.
    size: u64,
    name: String,
    raw: PathBuf,
    out: PathBuf,
}

/// The queue between the export reader and the compressing threads.
#[derive(Default)]
struct Queue {
    state: Mutex<QueueState>,
    /// A job was queued, or the queue closed or failed.
    ready: Condvar,
    /// A job was taken, or the queue failed.
    taken: Condvar,
}

#[derive(Default)]
struct QueueState {
    jobs: BinaryHeap<Job>,
    closed: bool,
    failed: bool,
    done: BTreeMap<String, Blob>,
    error: Option<anyhow::Error>,
}

impl Queue {
    /// Queues `job`; first waits while `waiting` layers already wait, so the uncompressed
    /// layers on disk stay bounded (the export waits instead) while every thread has work.
    fn push(&self, job: Job, waiting: usize) {
        let mut state = self.state.lock().expect("queue lock");
        while state.jobs.len() >= waiting && !state.failed {
            state = self.taken.wait(state).expect("queue lock");
        }
        state.jobs.push(job);
        self.ready.notify_one();
    }

    fn close(&self) {
        self.state.lock().expect("queue lock").closed = true;
        self.ready.notify_all();
    }

    fn failed(&self) -> bool {
        self.state.lock().expect("queue lock").failed
    }

    /// The largest waiting layer; `None` once the reader is done and nothing waits (or a
    /// layer failed: the result is an error anyway).
    fn next(&self) -> Option<Job> {
        let mut state = self.state.lock().expect("queue lock");
        loop {
            if state.failed {
                return None;
            }
            if let Some(job) = state.jobs.pop() {
                self.taken.notify_one();
                return Some(job);
            }
            if state.closed {
                return None;
            }
            state = self.ready.wait(state).expect("queue lock");
        }
    }

    fn finish(&self, name: String, result: Result<Blob>) {
        let mut state = self.state.lock().expect("queue lock");
        match result {
            Ok(blob) => {
                state.done.insert(name, blob);
            }
            Err(e) => {
                state.failed = true;
                state.error.get_or_insert(e);
                self.ready.notify_all();
                self.taken.notify_all();
            }
        }
    }
}

fn compress_job(job: &Job, interval: std::time::Duration) -> Result<Blob> {
    let raw = std::fs::File::open(&job.raw)
        .with_context(|| format!("cannot read {}", job.raw.display()))?;
    // Minutes for a multi-GB layer: say how far it got.
    let progress = TransferProgress::new(&format!("compress {}", job.name), job.size, interval);
    let counted = CountingReader {
        inner: io::BufReader::with_capacity(1 << 20, raw),
        progress: &progress,
    };
    let blob = store_layer(counted, job.out.clone())
        .with_context(|| format!("cannot compress layer {}", job.name))?;
    let _ = std::fs::remove_file(&job.raw);
    Ok(blob)
}

/// How many layers compress at once: one, on every core ([`gzip_members`]), so the last
/// layer's tail is as parallel as the rest and memory holds one layer's members in flight.
const LAYERS_AT_ONCE: usize = 1;

/// A `docker save` archive read in one pass: small files (configs, manifests, tiny layers) are
/// kept in memory, links recorded, and each large file (a layer) is handed on while it streams
/// by, so no layer is ever held in memory.
pub(crate) struct SavedArchive {
    small: BTreeMap<String, Vec<u8>>,
    links: BTreeMap<String, String>,
}

/// The one image of a `docker save` archive: its config and its layers' paths, in order.
pub(crate) struct SavedImage<'a> {
    pub config: &'a [u8],
    pub layers: Vec<String>,
}

impl SavedArchive {
    /// Reads `archive`; files larger than `small_limit` go to `on_large(n, path, size, data)`,
    /// which must read all of `data`. It returns `false` to stop reading early (its caller
    /// already has an error to report).
    pub(crate) fn read(
        archive: impl Read,
        small_limit: u64,
        mut on_large: impl FnMut(usize, String, u64, &mut dyn Read) -> Result<bool>,
    ) -> Result<SavedArchive> {
        let mut saved = SavedArchive {
            small: BTreeMap::new(),
            links: BTreeMap::new(),
        };
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
                saved.links.insert(path, resolved);
            } else if kind.is_file() {
                let size = entry.size();
                if size <= small_limit {
                    let mut bytes = Vec::with_capacity(size as usize);
                    entry.read_to_end(&mut bytes)?;
                    saved.small.insert(path, bytes);
                } else if !on_large(n, path, size, &mut entry)? {
                    break;
                }
            }
        }
        Ok(saved)
    }

    /// `path` with the archive's links followed.
    pub(crate) fn resolve(&self, path: &str) -> String {
        let mut path = normalize_archive_path(path);
        for _ in 0..16 {
            match self.links.get(&path) {
                Some(target) => path = target.clone(),
                None => break,
            }
        }
        path
    }

    /// A file that was small enough to be kept, by its resolved path.
    pub(crate) fn small(&self, path: &str) -> Option<&[u8]> {
        self.small.get(path).map(Vec::as_slice)
    }

    /// The archive's one image (`manifest.json`): config bytes and resolved layer paths.
    pub(crate) fn image(&self) -> Result<SavedImage<'_>> {
        #[derive(Deserialize)]
        struct Entry {
            #[serde(rename = "Config")]
            config: String,
            #[serde(rename = "Layers")]
            layers: Vec<String>,
        }
        let saved: Vec<Entry> = serde_json::from_slice(
            self.small("manifest.json")
                .context("the image archive has no manifest.json")?,
        )
        .context("the image archive's manifest.json is not a docker save manifest")?;
        let [saved] = <[Entry; 1]>::try_from(saved)
            .map_err(|v| anyhow!("the image archive holds {} images, expected one", v.len()))?;
        let config = self
            .small(&self.resolve(&saved.config))
            .with_context(|| format!("the image archive lacks its config {}", saved.config))?;
        Ok(SavedImage {
            config,
            layers: saved.layers.iter().map(|l| self.resolve(l)).collect(),
        })
    }
}

/// The export's large files (layers) to disk and onto the queue.
fn read_entries(
    archive: impl Read,
    dir: &Path,
    queue: &Queue,
    small_limit: u64,
) -> Result<SavedArchive> {
    SavedArchive::read(archive, small_limit, |n, path, size, entry| {
        if queue.failed() {
            // A layer failed to compress: the result is that error, stop reading.
            return Ok(false);
        }
        let raw = dir.join(format!("raw-{n}"));
        let file = std::fs::File::create(&raw)
            .with_context(|| format!("cannot create {}", raw.display()))?;
        let mut file = BufWriter::with_capacity(1 << 20, file);
        let copied = io::copy(entry, &mut file)
            .and_then(|copied| file.flush().map(|()| copied))
            .with_context(|| format!("cannot write {} to {}", path, raw.display()))?;
        if copied != size {
            bail!("the image archive is truncated in {path}");
        }
        queue.push(
            Job {
                size,
                name: path,
                raw,
                out: dir.join(format!("layer-{n}")),
            },
            // One waiting layer keeps every thread busy; more would only fill the disk.
            1,
        );
        Ok(true)
    })
}

/// Reads a `docker save` archive (legacy docker-archive or the OCI-layout form of newer
/// engines; both carry `manifest.json`) and prepares the image's blobs in `dir`.
#[cfg(test)]
pub(crate) fn prepare_from_archive(archive: impl Read, dir: &Path) -> Result<PreparedImage> {
    prepare_streaming(archive, dir, TEST_PROGRESS_INTERVAL, &|_| {})
}

/// The progress interval of the tests' preparations (they print nothing worth reading).
#[cfg(test)]
const TEST_PROGRESS_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

/// [`prepare_from_archive`], handing each large layer's blob to `on_blob` as soon as it is
/// compressed (from a compressing thread), while the export and other layers go on. The
/// config and small layers are not handed over: they are in the result.
pub(crate) fn prepare_streaming(
    archive: impl Read,
    dir: &Path,
    progress_interval: std::time::Duration,
    on_blob: &(dyn Fn(&Blob) + Sync),
) -> Result<PreparedImage> {
    // Files up to this size (configs, manifests, tiny layers) are read into memory.
    prepare_with_limit(archive, dir, 16 << 20, progress_interval, on_blob)
}

fn prepare_with_limit(
    archive: impl Read,
    dir: &Path,
    small_limit: u64,
    progress_interval: std::time::Duration,
    on_blob: &(dyn Fn(&Blob) + Sync),
) -> Result<PreparedImage> {
    let queue = Queue::default();
    let read = std::thread::scope(|scope| {
        for _ in 0..LAYERS_AT_ONCE {
            scope.spawn(|| {
                while let Some(job) = queue.next() {
                    let result = compress_job(&job, progress_interval);
                    if let Ok(blob) = &result {
                        on_blob(blob);
                    }
                    queue.finish(job.name, result);
                }
            });
        }
        let read = read_entries(archive, dir, &queue, small_limit);
        // Always closed, also on error, or the compressing threads would wait forever.
        queue.close();
        read
    });
    let state = queue.state.into_inner().expect("queue lock");
    if let Some(e) = state.error {
        return Err(e);
    }
    let saved = read?;
    let large = state.done;
    let image = saved.image()?;
    let platform = config_platform(image.config)?;
    let config = store_bytes(image.config, OCI_CONFIG, dir.join("config"))?;

    let mut layers = Vec::new();
    for (i, path) in image.layers.iter().enumerate() {
        let blob = if let Some(blob) = large.get(path) {
            blob.clone()
        } else if let Some(bytes) = saved.small(path) {
            store_layer(bytes, dir.join(format!("small-layer-{i}")))?
        } else {
            bail!("the image archive lacks layer {path}");
        };
        layers.push(blob);
    }

    PreparedImage::new(config, layers, platform)
}

#[derive(Deserialize)]
struct ConfigPlatform {
    architecture: String,
    os: String,
    #[serde(default)]
    variant: Option<String>,
}

fn config_platform(config: &[u8]) -> Result<ConfigPlatform> {
    serde_json::from_slice(config).context("the image config has no architecture/os")
}

/// A canonical layer on disk (the assembly's layer cache), named by its diff id; opened, so a
/// later assembly that prunes the cache cannot take it away.
#[derive(Debug)]
pub(crate) struct LayerFile {
    pub diff_id: String,
    pub path: PathBuf,
    pub file: std::fs::File,
}

/// The blobs of an image whose canonical `config` and uncompressed `layers` (in the config's
/// order) are already on disk, without an export: a layer in `reused` is described by the
/// blob the registry holds (nothing is read); every other one is compressed from its file,
/// largest first, each on every core, its input checked against its diff id as it streams by, and
/// handed to `on_blob` when done (from a compressing thread). Layers compress into `dir`.
pub(crate) fn prepare_from_layers(
    config: &[u8],
    layers: &[LayerFile],
    reused: &BTreeMap<String, KnownBlob>,
    dir: &Path,
    progress_interval: std::time::Duration,
    on_blob: &(dyn Fn(&Blob) + Sync),
) -> Result<PreparedImage> {
    let platform = config_platform(config)?;
    let config = store_bytes(config, OCI_CONFIG, dir.join("config"))?;
    // One job per distinct layer the registry lacks (an image may repeat a layer).
    let mut jobs: Vec<(u64, usize)> = Vec::new();
    for (i, layer) in layers.iter().enumerate() {
        if reused.contains_key(&layer.diff_id)
            || layers[..i].iter().any(|l| l.diff_id == layer.diff_id)
        {
            continue;
        }
        let size = layer
            .file
            .metadata()
            .with_context(|| format!("cannot read {}", layer.path.display()))?
            .len();
        jobs.push((size, i));
    }
    // Smallest first in the vector: `pop` hands out the largest.
    jobs.sort();
    let jobs = Mutex::new(jobs);
    let done: Mutex<BTreeMap<String, Result<Blob>>> = Mutex::new(BTreeMap::new());
    std::thread::scope(|scope| {
        for _ in 0..LAYERS_AT_ONCE {
            scope.spawn(|| loop {
                let Some((size, i)) = jobs.lock().expect("jobs lock").pop() else {
                    return;
                };
                let layer = &layers[i];
                let result = compress_layer_file(
                    layer,
                    size,
                    &dir.join(format!("layer-{i}")),
                    progress_interval,
                );
                if let Ok(blob) = &result {
                    on_blob(blob);
                } else {
                    // The result is an error anyway: leave the other layers.
                    jobs.lock().expect("jobs lock").clear();
                }
                done.lock()
                    .expect("done lock")
                    .insert(layer.diff_id.clone(), result);
            });
        }
    });
    let mut done = done.into_inner().expect("done lock");
    let mut compressed: BTreeMap<String, Blob> = BTreeMap::new();
    for (diff_id, result) in std::mem::take(&mut done) {
        compressed.insert(diff_id, result?);
    }
    let layers = layers
        .iter()
        .map(|layer| match reused.get(&layer.diff_id) {
            Some(known) => Ok(reused_blob(known)),
            None => compressed
                .get(&layer.diff_id)
                .cloned()
                .with_context(|| format!("the layer {} was not compressed", layer.diff_id)),
        })
        .collect::<Result<Vec<_>>>()?;
    PreparedImage::new(config, layers, platform)
}

/// Compresses the canonical layer `layer` (`size` bytes) into `out`; its bytes must hash to
/// its diff id (a damaged layer cache is an error that says how to rebuild it).
fn compress_layer_file(
    layer: &LayerFile,
    size: u64,
    out: &Path,
    interval: std::time::Duration,
) -> Result<Blob> {
    // From its start, whoever read the open file before.
    io::Seek::seek(&mut &layer.file, io::SeekFrom::Start(0))
        .with_context(|| format!("cannot read {}", layer.path.display()))?;
    let progress = TransferProgress::new(&format!("compress {}", layer.diff_id), size, interval);
    let mut hashing = HashingReader::new(CountingReader {
        inner: io::BufReader::with_capacity(1 << 20, &layer.file),
        progress: &progress,
    });
    let blob = store_layer(&mut hashing, out.to_path_buf())
        .with_context(|| format!("cannot compress the layer {}", layer.path.display()))?;
    let (read, _) = hashing.finish();
    if read != layer.diff_id {
        let _ = std::fs::remove_file(&blob.path);
        bail!(
            "{} hashes to {read}, not to its diff id {}: the layer cache is damaged; remove \
             {} and run `cargo xtask build` again to rebuild it",
            layer.path.display(),
            layer.diff_id,
            layer
                .path
                .parent()
                .map_or(String::new(), |d| d.display().to_string())
        );
    }
    Ok(blob)
}

/// The canonical OCI image manifest over `config` and `layers`: each layer this tool
/// compressed carries [`COMPRESSOR_ANNOTATION`], so a later publish knows which blobs it may
/// reuse (`oci/reuse.rs`). Pure; a reused [`KnownBlob`] gives the same descriptor as the blob
/// compressed again ([`Blob::reused`]).
pub(crate) fn image_manifest(config: &Blob, layers: &[Blob]) -> Result<Vec<u8>> {
    let descriptor = |blob: &Blob| -> Result<oci_spec::image::Descriptor> {
        let mut builder = DescriptorBuilder::default()
            .media_type(MediaType::from(blob.media_type.as_str()))
            .digest(OciDigest::from_str(&blob.digest)?)
            .size(blob.size);
        if let Some(compressor) = blob.compressor {
            builder = builder.annotations(std::collections::HashMap::from([(
                COMPRESSOR_ANNOTATION.to_string(),
                compressor.to_string(),
            )]));
        }
        Ok(builder.build()?)
    };
    let manifest = ImageManifestBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageManifest)
        .config(descriptor(config)?)
        .layers(layers.iter().map(descriptor).collect::<Result<Vec<_>>>()?)
        .build()?;
    Ok(serde_json::to_vec(&manifest)?)
}

/// A layer blob the registry already holds, made by [`COMPRESSOR`]: nothing on disk.
pub(crate) fn reused_blob(known: &KnownBlob) -> Blob {
    Blob {
        digest: known.digest.clone(),
        size: known.size,
        media_type: OCI_LAYER_GZIP.to_string(),
        path: PathBuf::new(),
        compressor: Some(COMPRESSOR),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oci::compress::tests::layer_tar;
    use template_formats::oci::index::OCI_MANIFEST;

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
    fn large_layers_compress_in_parallel_to_the_same_blobs() {
        let whole = archive(&layer_tar(3), "amd64");
        let dir = tempfile::tempdir().unwrap();
        let in_memory = prepare_from_archive(whole.as_slice(), dir.path()).unwrap();
        let dir2 = tempfile::tempdir().unwrap();
        let handed = Mutex::new(Vec::new());
        // Every layer counts as large: it goes through disk and the thread pool.
        let pooled = prepare_with_limit(
            whole.as_slice(),
            dir2.path(),
            4096,
            TEST_PROGRESS_INTERVAL,
            &|blob: &Blob| handed.lock().unwrap().push(blob.digest.clone()),
        )
        .unwrap();
        assert_eq!(pooled.manifest_digest, in_memory.manifest_digest);
        assert_eq!(pooled.layers[0].digest, in_memory.layers[0].digest);
        // The layer was handed over once, when compressed; no uncompressed copy is left.
        assert_eq!(
            handed.into_inner().unwrap(),
            vec![pooled.layers[0].digest.clone()]
        );
        let left: Vec<_> = std::fs::read_dir(dir2.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with("raw-"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
        // A truncated export is an error, also on this path.
        assert!(prepare_with_limit(
            &whole[..whole.len() / 2],
            dir2.path(),
            4096,
            TEST_PROGRESS_INTERVAL,
            &|_| {}
        )
        .is_err());
    }

    /// A `docker save`-shaped archive of `layers` under `config`, and the same layers as
    /// canonical layer files in `dir` (as the layer cache holds them).
    fn image_both_ways(layers: &[Vec<u8>], dir: &Path) -> (Vec<u8>, Vec<u8>, Vec<LayerFile>) {
        let diff_ids: Vec<String> = layers.iter().map(|l| Digest::of(l).to_string()).collect();
        let config = serde_json::to_vec(&serde_json::json!({"architecture": "amd64",
            "os": "linux", "config": {}, "rootfs": {"type": "layers", "diff_ids": diff_ids}}))
        .unwrap();
        let config_name = format!("{}.json", Digest::of(&config).hex());
        let names: Vec<String> = (0..layers.len())
            .map(|i| format!("l{i}/layer.tar"))
            .collect();
        let manifest = serde_json::to_vec(&serde_json::json!([
            {"Config": config_name, "RepoTags": null, "Layers": names}
        ]))
        .unwrap();
        let mut out = tar::Builder::new(Vec::new());
        let mut add = |name: &str, data: &[u8]| {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            out.append_data(&mut h, name, data).unwrap();
        };
        let mut files = Vec::new();
        for ((layer, name), diff_id) in layers.iter().zip(&names).zip(&diff_ids) {
            add(name, layer);
            let path = dir.join(format!("{}.tar", &diff_id[7..]));
            std::fs::write(&path, layer).unwrap();
            files.push(LayerFile {
                diff_id: diff_id.clone(),
                file: std::fs::File::open(&path).unwrap(),
                path,
            });
        }
        add(&config_name, &config);
        add("manifest.json", &manifest);
        (out.into_inner().unwrap(), config, files)
    }

    #[test]
    fn layers_from_the_cache_give_the_exports_manifest_with_or_without_a_previous_release() {
        let cache = tempfile::tempdir().unwrap();
        let layers = [layer_tar(4), layer_tar(2), layer_tar(3)];
        let (saved, config, files) = image_both_ways(&layers, cache.path());
        let out = tempfile::tempdir().unwrap();
        let exported = prepare_from_archive(saved.as_slice(), out.path()).unwrap();
        let none = BTreeMap::new();
        let handed = Mutex::new(Vec::new());
        let fresh = prepare_from_layers(
            &config,
            &files,
            &none,
            out.path(),
            TEST_PROGRESS_INTERVAL,
            &|b: &Blob| handed.lock().unwrap().push(b.digest.clone()),
        )
        .unwrap();
        // The cache path and the export path make the same image.
        assert_eq!(fresh.manifest_digest, exported.manifest_digest);
        assert_eq!(handed.into_inner().unwrap().len(), 3);
        let text = String::from_utf8(fresh.manifest.clone()).unwrap();
        assert_eq!(text.matches(COMPRESSOR).count(), 3, "{text}");
        // The cache files are inputs: left where they are.
        assert!(files.iter().all(|f| f.path.exists()));

        // A previous release this tool made: its blobs are reused, nothing is compressed,
        // and the manifest is the one a publish without it makes.
        let previous =
            crate::oci::reuse::reusable_layers("prev", &fresh.manifest, &config).unwrap();
        assert_eq!(previous.by_diff_id.len(), 3);
        let handed = Mutex::new(0);
        let reused = prepare_from_layers(
            &config,
            &files,
            &previous.by_diff_id,
            out.path(),
            TEST_PROGRESS_INTERVAL,
            &|_| *handed.lock().unwrap() += 1,
        )
        .unwrap();
        assert_eq!(*handed.lock().unwrap(), 0);
        assert_eq!(reused.manifest, fresh.manifest);
        // One CLI changed: only its layer is compressed; the manifest is again the fresh one.
        let changed = [layers[0].clone(), layer_tar(5), layers[2].clone()];
        let cache2 = tempfile::tempdir().unwrap();
        let (_, config2, files2) = image_both_ways(&changed, cache2.path());
        let handed = Mutex::new(0);
        let update = prepare_from_layers(
            &config2,
            &files2,
            &previous.by_diff_id,
            out.path(),
            TEST_PROGRESS_INTERVAL,
            &|_| *handed.lock().unwrap() += 1,
        )
        .unwrap();
        assert_eq!(*handed.lock().unwrap(), 1);
        let update_fresh = prepare_from_layers(
            &config2,
            &files2,
            &none,
            out.path(),
            TEST_PROGRESS_INTERVAL,
            &|_| {},
        )
        .unwrap();
        assert_eq!(update.manifest_digest, update_fresh.manifest_digest);

        // A previous release whose blobs another compressor made (level 1, no annotation):
        // equally valid gzip of the same layers, but reusing them would change the digest.
        let mut foreign_layers = Vec::new();
        for layer in &layers {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(1));
            gz.write_all(layer).unwrap();
            let bytes = gz.finish().unwrap();
            foreign_layers.push(serde_json::json!({"mediaType": OCI_LAYER_GZIP,
                "digest": Digest::of(&bytes).to_string(), "size": bytes.len()}));
        }
        let foreign_manifest = serde_json::to_vec(&serde_json::json!({"schemaVersion": 2,
            "mediaType": template_formats::oci::index::OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG, "digest": Digest::of(&config).to_string(),
                       "size": config.len()},
            "layers": foreign_layers}))
        .unwrap();
        let foreign =
            crate::oci::reuse::reusable_layers("prev", &foreign_manifest, &config).unwrap();
        let after_foreign = prepare_from_layers(
            &config,
            &files,
            &foreign.by_diff_id,
            out.path(),
            TEST_PROGRESS_INTERVAL,
            &|_| {},
        )
        .unwrap();
        assert_eq!(after_foreign.manifest_digest, fresh.manifest_digest);
        assert_eq!(foreign.foreign, 3);
    }

    #[test]
    fn a_damaged_cached_layer_is_an_error_naming_the_file() {
        let cache = tempfile::tempdir().unwrap();
        let (_, config, files) = image_both_ways(&[layer_tar(2)], cache.path());
        std::fs::write(&files[0].path, layer_tar(3)).unwrap();
        let files = vec![LayerFile {
            file: std::fs::File::open(&files[0].path).unwrap(),
            ..files.into_iter().next().unwrap()
        }];
        let out = tempfile::tempdir().unwrap();
        let err = prepare_from_layers(
            &config,
            &files,
            &BTreeMap::new(),
            out.path(),
            TEST_PROGRESS_INTERVAL,
            &|_| {},
        )
        .unwrap_err();
        let text = format!("{err:#}");
        assert!(text.contains("not to its diff id"), "{text}");
        assert!(
            text.contains(&files[0].path.display().to_string()),
            "{text}"
        );
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
