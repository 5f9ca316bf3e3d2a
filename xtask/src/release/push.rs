//! One platform's image pushed by digest, for `publish`: its blobs (from the layer cache, or
//! compressed from an export as they are needed, or the previous release's reused), uploaded
//! as each is ready from a temporary blob directory that a killed run's successor removes, the
//! manifest PUT by its digest, and the pushed image read back. A record of each push lets a
//! re-run skip what the registry already holds.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};

use crate::oci::archive::{prepare_from_layers, prepare_streaming, PreparedImage};
use crate::oci::blob_upload::{
    mount_blob, put_manifest, upload_blob, Blob, BlobLocations, BlobPush,
};
use crate::oci::reuse::{platform_manifest, reusable_layers, KnownBlob, Reusable};
use crate::util::{atomic_write, sha256_hex, Progress};
use template_formats::manifest::Platform;
use template_formats::model::publish::{LayerBlob, PushedImage};
use template_formats::model::Digest;
use template_formats::oci::index::OCI_MANIFEST;
use template_verify::oci::client::{Presence, RegistryClient, RegistryTarget};
use template_verify::oci::credentials::{credentials_for, EnvCredentialsHost};
use template_verify::settings::Environment;

/// The previous release a publish reuses blobs from: a client for its repository (which may
/// be the target's) and the digest `--previous` names.
pub(super) struct Previous {
    client: RegistryClient,
    digest: String,
}

/// Manifests and configs of a previous release are small; more is not one of ours.
const PREVIOUS_LIMIT: usize = 4 << 20;

impl Previous {
    /// The blobs the previous release offers for `platform`'s layers.
    async fn reusable(&self, platform: Platform) -> Result<Reusable> {
        let client = &self.client;
        let what = client.target.reference(&self.digest);
        let fetch = |digest: String| async move {
            let bytes = client
                .get_manifest_bounded(&digest, PREVIOUS_LIMIT)
                .await?
                .with_context(|| {
                    format!(
                        "{} is not in the registry",
                        client.target.reference(&digest)
                    )
                })?;
            if Digest::of(&bytes).as_str() != digest {
                bail!(
                    "{} does not hash to its digest",
                    client.target.reference(&digest)
                );
            }
            Ok(bytes)
        };
        let document = fetch(self.digest.clone()).await?;
        let manifest_digest = platform_manifest(&what, &self.digest, &document, platform)?;
        let manifest = if manifest_digest == self.digest {
            document
        } else {
            fetch(manifest_digest.clone()).await?
        };
        let parsed: oci_spec::image::ImageManifest = serde_json::from_slice(&manifest)
            .with_context(|| format!("{what}: {manifest_digest} is not an OCI image manifest"))?;
        let config_digest = parsed.config().digest().to_string();
        let config = client
            .get_blob_bounded(&config_digest, PREVIOUS_LIMIT)
            .await?
            .with_context(|| format!("{what}: the registry lacks its config {config_digest}"))?;
        reusable_layers(
            &client.target.reference(&manifest_digest),
            &manifest,
            &config,
        )
    }
}

// One image's push: the context (layout for the records and caches) joined the engine, the
// client, the image and its options; a struct for one caller would only rename them.
#[allow(clippy::too_many_arguments)]
pub(super) async fn push_image(
    ctx: &crate::Context,
    docker: &bollard::Docker,
    client: &RegistryClient,
    platform: Platform,
    image: &str,
    previous: Option<&Previous>,
    dry_run: bool,
    progress: &Progress,
) -> Result<PushedImage> {
    let inspect = docker.inspect_image(image).await.with_context(|| {
        format!("image `{image}` for {platform} is not in the local engine; build it first")
    })?;
    // The engine's handle exports the image; the tool's id (the config digest) is what the
    // read-back compares, on every store.
    let handle = inspect
        .id
        .clone()
        .with_context(|| format!("the engine reports no id for `{image}`"))?;
    let image_id =
        crate::image::identity::tool_image_id(docker, &ctx.layout, image, &inspect).await?;
    let (os, arch) = (
        inspect.os.clone().unwrap_or_default(),
        inspect.architecture.clone().unwrap_or_default(),
    );
    if os != "linux" || arch != platform.arch() {
        bail!(
            "image `{image}` is {os}/{arch}, not {platform}: it cannot be published as {platform}"
        );
    }

    // An image already pushed to this repository by an earlier run is not exported again:
    // the record of that push is reused once the registry confirms it still has the manifest.
    let cache = push_cache_path(&ctx.layout, &client.target, &image_id);
    if let Some(cached) = read_push_cache(&cache) {
        // A record from before the layers were kept cannot say them: pushed again (every blob
        // is in the registry, so only HEADs).
        if cached.platform == platform
            && cached.layer_blobs.len() == cached.layers
            // A registry that will not say (a package not created yet) is pushed to again.
            && client
                .manifest_presence(&cached.digest, cached.manifest_size)
                .await?
                == Presence::Present
        {
            let read_back = cached.read_back
                || read_back_step(client, platform, &cached.digest, &image_id, progress).await?;
            progress.step(format!(
                "{platform}: {image} is already in the registry as {}",
                cached.reference
            ));
            return Ok(PushedImage {
                image: image.to_string(),
                uploaded_bytes: 0,
                read_back,
                ..cached
            });
        }
    }

    let dir = BlobDir::create(&std::env::temp_dir(), progress)?;
    let dir_path = dir.path.clone();
    let locations_path =
        BlobLocations::path(&ctx.layout.state("blob-locations"), &client.target.host);
    let mut locations = BlobLocations::load(&locations_path);
    let push = BlobPushing {
        client,
        platform,
        dry_run,
        progress,
        progress_interval: ctx.settings.verifier.transfer.progress_interval,
    };
    let (ready_tx, ready) = tokio::sync::mpsc::unbounded_channel::<Blob>();
    // The receiver only goes away when an upload failed: that error is reported.
    let on_blob = move |blob: &Blob| {
        let _ = ready_tx.send(blob.clone());
    };
    // Blobs already in the registry: neither compressed nor uploaded.
    let mut pushed_blobs = BTreeSet::new();
    let cache_dir = ctx.layout.layer_cache(platform);
    let progress_interval = ctx.settings.verifier.transfer.progress_interval;
    let cached = crate::image::assemble::cached_image(&cache_dir, &image_id)?;
    // Before anything is written: the blobs go to the temp dir (at most the image's size:
    // gzip of these layers is smaller), and an export, when the layer cache lacks the image,
    // goes through the engine's data root first (moby writes `docker save` to `<root>/tmp`).
    let size = inspect.size.unwrap_or(0).max(0) as u64;
    let mut needs = vec![crate::disk::Need {
        dir: dir_path.clone(),
        bytes: size,
        what: format!("the compressed blobs of {image}, at most its size"),
    }];
    if cached.is_none() {
        needs.extend(
            crate::disk::engine_need(
                docker,
                ctx.settings.docker_host.as_deref(),
                size,
                format!("the export of {image}"),
                progress,
            )
            .await,
        );
    }
    crate::disk::ensure_space(&format!("publishing {image} ({platform})"), needs)?;
    let preparing = match cached {
        Some((config, files)) => {
            let reusable = match previous {
                None => Reusable::default(),
                Some(previous) => previous.reusable(platform).await.unwrap_or_else(|e| {
                    // Reuse only saves work; the image's digest is the same without it.
                    progress.step(format!(
                        "{platform}: the previous release {} offers no blobs ({e:#}); \
                         compressing every layer",
                        previous.client.target.reference(&previous.digest)
                    ));
                    Reusable::default()
                }),
            };
            let source = previous.map(|p| p.client.target.repository.as_str());
            let mut reused = std::collections::BTreeMap::new();
            for file in &files {
                if let Some(known) = reusable.by_diff_id.get(&file.diff_id) {
                    if !reused.contains_key(&file.diff_id)
                        && push.known(known, source, &mut locations).await?
                    {
                        pushed_blobs.insert(known.digest.clone());
                        reused.insert(file.diff_id.clone(), known.clone());
                    }
                }
            }
            progress.step(format!(
                "{platform}: {image}'s canonical layers are in the layer cache {}: {} of {} \
                 layers are in the registry from the previous release ({} made by another \
                 compressor), compressing the others from the cache (each on every core) and \
                 uploading each as soon as it is compressed",
                cache_dir.display(),
                reused.len(),
                files.len(),
                reusable.foreign
            ));
            tokio::task::spawn_blocking(move || {
                prepare_from_layers(
                    &config,
                    &files,
                    &reused,
                    &dir_path,
                    progress_interval,
                    &on_blob,
                )
            })
        }
        None => {
            progress.step(format!(
                "{platform}: exporting {image} (the layer cache {} does not hold it), \
                 compressing its layers (each on every core) and uploading each as soon as it is \
                 compressed",
                cache_dir.display()
            ));
            let archive = crate::image::engine::blocking_reader(docker.export_image(&handle));
            tokio::task::spawn_blocking(move || {
                prepare_streaming(archive, &dir_path, progress_interval, &on_blob)
            })
        }
    };
    let (prepared, uploaded) =
        upload_as_prepared(&push, preparing, ready, &mut pushed_blobs, &mut locations)
            .await
            .with_context(|| format!("cannot prepare the blobs of `{image}`"))?;
    drop(dir);
    if prepared.os != "linux" || prepared.architecture != platform.arch() {
        bail!(
            "the config of `{image}` says {}/{}, not {platform}",
            prepared.os,
            prepared.architecture
        );
    }
    if !dry_run {
        locations.save(&locations_path);
    }
    if !dry_run {
        put_manifest(
            client,
            &prepared.manifest_digest,
            OCI_MANIFEST,
            &prepared.manifest,
        )
        .await?;
        // Pushed, not yet read back or recorded in the push cache.
        crate::kill_point::reached("publish:manifest-pushed");
        progress.step(format!(
            "{platform}: pushed {}",
            client.target.reference(&prepared.manifest_digest)
        ));
    }
    let read_back = !dry_run
        && read_back_step(
            client,
            platform,
            &prepared.manifest_digest,
            &image_id,
            progress,
        )
        .await?;
    let pushed = PushedImage {
        platform,
        image: image.to_string(),
        image_id,
        os: prepared.os.clone(),
        architecture: prepared.architecture.clone(),
        variant: prepared.variant.clone(),
        digest: prepared.manifest_digest.clone(),
        media_type: OCI_MANIFEST.to_string(),
        manifest_size: prepared.manifest.len() as u64,
        config_digest: prepared.config.digest.clone(),
        size: prepared.size(),
        layers: prepared.layers.len(),
        layer_blobs: prepared
            .layers
            .iter()
            .map(|l| LayerBlob {
                digest: l.digest.clone(),
                size: l.size,
            })
            .collect(),
        reference: client.target.reference(&prepared.manifest_digest),
        uploaded_bytes: uploaded,
        read_back,
    };
    if !dry_run {
        // Best effort: a missing cache only costs the next run an export.
        if let Ok(bytes) = serde_json::to_vec_pretty(&pushed) {
            let _ = atomic_write(&cache, &bytes);
        }
    }
    Ok(pushed)
}

/// Where one image's compressed blobs wait for their upload: `<tmp>/xtask-publish-*`, held
/// locked (`flock` on the directory) while the push runs and removed when it ends. A publish
/// that is killed cannot remove its own, and it holds up to the image's size (a killed
/// release left 1.8 GB): the next publish removes every such directory no live publish
/// holds, saying so ([`remove_killed_blob_dirs`]).
struct BlobDir {
    path: PathBuf,
    /// The lock is the directory's own open file: the kernel drops it with the process, so a
    /// killed publish's directory is free to take.
    _lock: std::fs::File,
}

/// The name every publish's blob directory starts with.
const BLOB_DIR_PREFIX: &str = "xtask-publish-";

/// A blob directory's name before it is locked and renamed to [`BLOB_DIR_PREFIX`]; one is left,
/// empty, only by a publish killed in between.
const STAGING_PREFIX: &str = "xtask-publishing-";

/// How old an empty staging directory must be before the next publish takes it as a killed
/// one's: a live publish holds its own for microseconds, unlocked.
const STAGING_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

impl BlobDir {
    fn create(tmp: &Path, progress: &Progress) -> Result<BlobDir> {
        remove_killed_blob_dirs(tmp, progress);
        // Made under another name, locked, then renamed: a directory with the prefix is
        // either locked by its live publish or abandoned, never caught between the two.
        let staging = tempfile::Builder::new()
            .prefix(STAGING_PREFIX)
            .tempdir_in(tmp)
            .context("cannot create a temporary directory for the image's blobs")?;
        let lock = std::fs::File::open(staging.path())
            .with_context(|| format!("cannot open {}", staging.path().display()))?;
        // Best effort: where the filesystem has no flock, a scanner cannot take the lock
        // either and leaves the directory alone; the publish itself needs none.
        let _ = lock.try_lock();
        let name = staging
            .path()
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix(STAGING_PREFIX))
            .context("tempfile named the directory without its prefix")?;
        let path = tmp.join(format!("{BLOB_DIR_PREFIX}{name}"));
        std::fs::rename(staging.path(), &path).with_context(|| {
            format!(
                "cannot rename {} to {}",
                staging.path().display(),
                path.display()
            )
        })?;
        // Renamed away: the staging guard has nothing left to remove.
        let _ = staging.keep();
        Ok(BlobDir { path, _lock: lock })
    }
}

impl Drop for BlobDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Removes the blob directories in `tmp` that publishes killed mid-push left (none of them
/// holds its lock any more), naming each and its size. Best effort: what cannot be removed
/// only costs disk.
fn remove_killed_blob_dirs(tmp: &Path, progress: &Progress) {
    let Ok(listing) = std::fs::read_dir(tmp) else {
        return;
    };
    for entry in listing.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_str().unwrap_or_default();
        if name.starts_with(STAGING_PREFIX) {
            remove_killed_staging_dir(&path, progress);
            continue;
        }
        if !name.starts_with(BLOB_DIR_PREFIX) || !path.is_dir() {
            continue;
        }
        // Held by a live publish (here or in another process): not ours to take.
        let Ok(dir) = std::fs::File::open(&path) else {
            continue;
        };
        if dir.try_lock().is_err() {
            continue;
        }
        // A blob directory is flat: its files are the blobs.
        let bytes: u64 = std::fs::read_dir(&path)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum();
        if std::fs::remove_dir_all(&path).is_ok() {
            progress.step(format!(
                "removed {} ({}): the compressed blobs of a publish that was killed \
                 before it could remove them",
                path.display(),
                crate::disk::human(bytes)
            ));
        }
    }
}

/// Removes `path`, a staging directory, when it is empty and older than [`STAGING_GRACE`]:
/// a publish killed between making it and renaming it left it (a live one is younger).
fn remove_killed_staging_dir(path: &Path, progress: &Progress) {
    let old = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|at| at.elapsed().ok())
        .is_some_and(|age| age > STAGING_GRACE);
    // `remove_dir` removes only an empty directory: anything inside is not a killed staging.
    if old && std::fs::remove_dir(path).is_ok() {
        progress.step(format!(
            "removed {}: the empty blob directory of a publish that was killed as it began",
            path.display()
        ));
    }
}

/// Reads the pushed image back (`oci::read_back`): the published bytes must be the tested
/// image. Always true when it returns.
async fn read_back_step(
    client: &RegistryClient,
    platform: Platform,
    manifest_digest: &str,
    image_id: &str,
    progress: &Progress,
) -> Result<bool> {
    progress.step(format!(
        "{platform}: reading {manifest_digest} back: its config and each layer, decompressed, \
         must be the tested image's"
    ));
    let read = crate::oci::read_back::read_back(client, manifest_digest, image_id).await?;
    progress.step(format!(
        "{platform}: read back {} layers ({} bytes): the published image is the tested image {image_id}",
        read.layers, read.bytes
    ));
    Ok(true)
}

/// Uploads each blob `preparing` hands over (`ready`) as it comes, then the config and the
/// small layers it returns; blobs in `pushed_blobs` are skipped. Returns the image and the
/// bytes uploaded.
async fn upload_as_prepared(
    push: &BlobPushing<'_>,
    preparing: tokio::task::JoinHandle<Result<PreparedImage>>,
    mut ready: tokio::sync::mpsc::UnboundedReceiver<Blob>,
    pushed_blobs: &mut BTreeSet<String>,
    locations: &mut BlobLocations,
) -> Result<(PreparedImage, u64)> {
    let mut uploaded = 0;
    // Layers arrive here as they are compressed (the channel closes when preparing is done).
    while let Some(blob) = ready.recv().await {
        if pushed_blobs.insert(blob.digest.clone()) {
            uploaded += push.blob(&blob, locations).await?;
        }
        // In the registry now: the disk holds only the layers still on their way.
        let _ = std::fs::remove_file(&blob.path);
    }
    let prepared = preparing.await.context("the preparing task panicked")??;
    // The config and small layers, which the export hands over only at its end.
    for blob in std::iter::once(&prepared.config).chain(&prepared.layers) {
        if pushed_blobs.insert(blob.digest.clone()) {
            uploaded += push.blob(blob, locations).await?;
        }
    }
    Ok((prepared, uploaded))
}

/// Gets blobs of one platform's image into the registry.
struct BlobPushing<'a> {
    client: &'a RegistryClient,
    platform: Platform,
    dry_run: bool,
    progress: &'a Progress,
    /// The least time between two progress lines of one upload.
    progress_interval: std::time::Duration,
}

impl BlobPushing<'_> {
    /// Says why a blob whose presence the registry would not tell is pushed anyway.
    fn unreadable(&self, digest: &str) {
        self.progress.step(format!(
            "{}: {} does not say whether it holds {digest} (403; ghcr.io answers so while \
             the package does not exist yet): pushing it, the upload's answer decides",
            self.platform,
            self.client.target.name()
        ));
    }

    /// Whether `known` (a previous release's blob) is in the target repository: it is (HEAD),
    /// or it is mounted from `source`, the previous release's repository, when that differs
    /// (distribution's "mount a blob from another repository": 201 mounted, 202 an upload
    /// session instead; the session is then abandoned and the layer compressed). A dry run
    /// only asks whether `source` has it.
    async fn known(
        &self,
        known: &KnownBlob,
        source: Option<&str>,
        locations: &mut BlobLocations,
    ) -> Result<bool> {
        let (client, platform, progress) = (self.client, self.platform, self.progress);
        let repository = client.target.repository.as_str();
        match client.blob_presence(&known.digest).await? {
            Presence::Present => {
                locations.record(&known.digest, repository);
                return Ok(true);
            }
            Presence::Absent => {}
            Presence::Unreadable => self.unreadable(&known.digest),
        }
        let Some(source) = source.filter(|s| *s != repository) else {
            return Ok(false);
        };
        if self.dry_run {
            progress.step(format!(
                "{platform}: would mount {} from {source}",
                known.digest
            ));
            return Ok(true);
        }
        let mounted = mount_blob(client, &known.digest, source).await?;
        if mounted {
            progress.step(format!(
                "{platform}: mounted {} ({} bytes) from {source}",
                known.digest, known.size
            ));
            locations.record(&known.digest, repository);
        }
        Ok(mounted)
    }

    /// Skips `blob` when the registry has it (HEAD), mounts it from another repository of the
    /// registry known to hold it, or uploads it. Returns the bytes uploaded.
    async fn blob(&self, blob: &Blob, locations: &mut BlobLocations) -> Result<u64> {
        let (client, platform, progress) = (self.client, self.platform, self.progress);
        let repository = client.target.repository.as_str();
        match client.blob_presence(&blob.digest).await? {
            Presence::Present => {
                progress.step(format!(
                    "{platform}: {} is already in the registry",
                    blob.digest
                ));
                locations.record(&blob.digest, repository);
                return Ok(0);
            }
            Presence::Absent => {}
            Presence::Unreadable => self.unreadable(&blob.digest),
        }
        let mount_from = locations.mount_source(&blob.digest, repository);
        if self.dry_run {
            progress.step(format!(
                "{platform}: would upload {} ({} bytes)",
                blob.digest, blob.size
            ));
            return Ok(blob.size);
        }
        progress.step(format!(
            "{platform}: uploading {} ({} bytes){}",
            blob.digest,
            blob.size,
            mount_from.map_or(String::new(), |s| format!(", or mounting it from {s}"))
        ));
        let uploaded = match upload_blob(client, blob, mount_from, self.progress_interval).await? {
            BlobPush::Mounted => {
                progress.step(format!(
                    "{platform}: mounted {} from {}",
                    blob.digest,
                    mount_from.unwrap_or_default()
                ));
                0
            }
            BlobPush::Uploaded => blob.size,
        };
        // Between blobs: this one is committed in the registry, the next not begun, no
        // manifest names either, and the record of where blobs are is not saved.
        crate::kill_point::reached("publish:blob-uploaded");
        locations.record(&blob.digest, repository);
        Ok(uploaded)
    }
}

/// Where the record of pushing `image_id` to `target` is kept between runs.
fn push_cache_path(
    layout: &crate::layout::Layout,
    target: &RegistryTarget,
    image_id: &str,
) -> PathBuf {
    // The compressor is part of the key: a record from a tool that described (or compressed)
    // layers otherwise names another manifest than this tool makes.
    let key = sha256_hex(
        format!(
            "{}\n{}\n{image_id}\n{}",
            target.host,
            target.repository,
            crate::oci::reuse::COMPRESSOR
        )
        .as_bytes(),
    );
    layout.state("pushed").join(format!("{key}.json"))
}

fn read_push_cache(path: &Path) -> Option<PushedImage> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// The previous release `reference` names (`host/repository@digest`): it must be in the
/// target's registry, since blobs move between repositories of one registry only.
pub(super) async fn previous_of(
    reference: &str,
    target: &RegistryTarget,
    env: &Environment,
) -> Result<Previous> {
    let (host, repository, digest) = parse_previous(reference, &target.host)?;
    let previous_target = RegistryTarget::parse(&host, &repository)?;
    let client = RegistryClient::new(
        previous_target,
        credentials_for(&host, &EnvCredentialsHost::named(&host), &env.registry).await?,
        &env.transfer,
    )?;
    Ok(Previous { client, digest })
}

/// `host/repository@sha256:...` -> (host, repository, digest), with `host` the target's.
fn parse_previous(reference: &str, target_host: &str) -> Result<(String, String, String)> {
    let parsed = template_formats::oci::reference::parse_pinned_reference(reference)
        .map_err(|e| anyhow!("--previous `{reference}`: {e}"))?;
    if parsed.name.domain != target_host {
        bail!(
            "--previous `{reference}` is in {}, not in {target_host}: blobs can only be reused \
             within one registry; leave --previous out to publish every layer",
            parsed.name.domain
        );
    }
    let digest = parsed
        .digest
        .with_context(|| format!("--previous `{reference}` names no digest"))?;
    Ok((parsed.name.domain, parsed.name.path, digest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_blob_dirs_no_live_publish_holds_are_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let progress = Progress::default();
        // A killed publish's directory: nobody holds its lock.
        let killed = tmp.path().join(format!("{BLOB_DIR_PREFIX}killed"));
        std::fs::create_dir(&killed).unwrap();
        std::fs::write(killed.join("layer-0"), b"compressed").unwrap();
        let other = tmp.path().join("someone-else");
        std::fs::create_dir(&other).unwrap();
        // Staging directories: one a publish killed as it began (empty, old), one a live
        // publish is about to rename (empty, new), one with something in it (not a staging).
        let staging = |name: &str, age_secs: u64, file: bool| {
            let dir = tmp.path().join(format!("{STAGING_PREFIX}{name}"));
            std::fs::create_dir(&dir).unwrap();
            if file {
                std::fs::write(dir.join("x"), b"x").unwrap();
            }
            let at = std::time::SystemTime::now() - std::time::Duration::from_secs(age_secs);
            std::fs::File::open(&dir).unwrap().set_modified(at).unwrap();
            dir
        };
        let killed_staging = staging("killed", 600, false);
        let live_staging = staging("live", 0, false);
        let full_staging = staging("full", 600, true);
        let live = BlobDir::create(tmp.path(), &progress).unwrap();
        assert!(
            !killed_staging.exists(),
            "a killed publish's staging dir is left"
        );
        assert!(live_staging.exists() && full_staging.exists());
        assert!(
            !killed.exists(),
            "the killed publish's blobs are still there"
        );
        assert!(
            other.exists(),
            "a directory that is not a publish's was removed"
        );
        // A second publish beside the live one leaves its directory alone.
        let second = BlobDir::create(tmp.path(), &progress).unwrap();
        assert!(live.path.is_dir() && second.path.is_dir());
        assert!(live
            .path
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with(BLOB_DIR_PREFIX));
        let path = live.path.clone();
        drop(live);
        assert!(
            !path.exists(),
            "a finished publish removes its own directory"
        );
    }

    #[test]
    fn previous_flags() {
        let d = format!("sha256:{}", "a".repeat(64));
        assert_eq!(
            parse_previous(&format!("127.0.0.1:5000/a/b@{d}"), "127.0.0.1:5000").unwrap(),
            ("127.0.0.1:5000".into(), "a/b".into(), d.clone())
        );
        let err = parse_previous(&format!("ghcr.io/a/b@{d}"), "127.0.0.1:5000").unwrap_err();
        assert!(err.to_string().contains("within one registry"), "{err}");
        assert!(parse_previous("127.0.0.1:5000/a/b:tag", "127.0.0.1:5000").is_err());
    }
}
