//! `cargo xtask-bench update --previous REF --image REF`: what publishing a release adds to a
//! registry that already holds the previous one, against the layers that really changed, and
//! how long it takes next to `docker push` of the same image into the same registry.
//!
//! A fresh local registry (as `bench publish` starts it) receives the previous image, then the
//! new one, into the same repository, both through the real `publish`; the second is given the
//! first as `--previous` (as `release build` passes the previous release's index), so its
//! unchanged layers are recognised from the registry and neither compressed nor uploaded, and
//! its changed ones are compressed from the layer cache when that holds the image. The bytes
//! the second publish added to the registry's storage are compared with the largest layer
//! that is new in it (for a release where one CLI changed: that CLI's compressed layer; the
//! target is at most 1.1x), and the bytes it uploaded with the new layers, config and
//! manifest (at most 1.1x). Then `docker push` of the new image into another
//! repository of the same registry is timed (its compression differs from ours, so it finds
//! none of our blobs, as from a fresh engine; an engine that pushed these layers before may
//! mount some, which only favours docker). The target is at most 0.2x its time.

use std::collections::BTreeSet;
use std::process::ExitCode;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::bench::publish::Registry;
use crate::release::publish::{publish, PublishOptions};
use crate::util::{print_json, Progress};
use template_formats::manifest::Platform;

const REPOSITORY: &str = "bench/coding-agent";
const DOCKER_REPOSITORY: &str = "bench/docker-push";

/// A layer of the new image that the previous one lacks.
#[derive(Debug, Serialize, PartialEq)]
struct NewLayer {
    /// Position in the new image (0: the base).
    position: usize,
    digest: String,
    size: u64,
}

#[derive(Debug, Serialize)]
struct UpdateReport {
    previous: String,
    image: String,
    platform: String,
    previous_digest: String,
    digest: String,
    /// Registry storage after the previous image alone.
    previous_stored_bytes: u64,
    /// What publishing `image` added to the storage (layers, config, manifest).
    added_bytes: u64,
    layers: usize,
    new_layers: Vec<NewLayer>,
    /// added_bytes / the largest new layer's size; the target is at most 1.1.
    ratio: f64,
    /// The second publish, with the first as `--previous`.
    publish_secs: f64,
    publish_uploaded_bytes: u64,
    /// The new layers, the config and the manifest: what must be uploaded.
    necessary_bytes: u64,
    /// publish_uploaded_bytes / necessary_bytes; the target is at most 1.1.
    bytes_ratio: f64,
    /// `docker push` of the new image into another repository of the same registry.
    docker_push_secs: f64,
    docker_push_stored_bytes: u64,
    /// publish_secs / docker_push_secs; the target is at most 0.2.
    time_ratio: f64,
}

/// Bytes a publish after the previous release must upload: the new layers, config, manifest.
fn necessary_bytes(new: &[NewLayer], config_size: u64, manifest_size: u64) -> u64 {
    new.iter().map(|l| l.size).sum::<u64>() + config_size + manifest_size
}

#[derive(Deserialize)]
struct Descriptor {
    digest: String,
    size: u64,
}

#[derive(Deserialize)]
struct ManifestLayers {
    layers: Vec<Descriptor>,
}

/// The layers of `next` whose blobs `previous` does not have, with their positions.
fn new_layers(previous: &[Descriptor], next: &[Descriptor]) -> Vec<NewLayer> {
    let known: BTreeSet<&str> = previous.iter().map(|d| d.digest.as_str()).collect();
    next.iter()
        .enumerate()
        .filter(|(_, d)| !known.contains(d.digest.as_str()))
        .map(|(position, d)| NewLayer {
            position,
            digest: d.digest.clone(),
            size: d.size,
        })
        .collect()
}

async fn platform_of(image: &str, ctx: &crate::Context) -> Result<Platform> {
    let engine = crate::image::engine::connect(&ctx.settings).await?;
    let inspect = crate::image::engine::inspect_image(&engine, image)
        .await?
        .with_context(|| {
            format!("image `{image}` is not in the local engine; `docker images` lists what is")
        })?;
    crate::image::engine::image_platform(&inspect)
        .parse()
        .map_err(|e: String| anyhow::anyhow!("image `{image}`: {e}"))
}

/// `cargo xtask-bench update`: the previous release's image and the new one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchUpdateRequest {
    /// The previous release's image (a local image in the engine).
    pub previous: String,
    /// The new release's image, same platform.
    pub image: String,
    pub json: bool,
}

pub async fn run(request: BenchUpdateRequest, ctx: &crate::Context) -> Result<ExitCode> {
    let progress = Progress::default();
    let platform = platform_of(&request.image, ctx).await?;
    let previous_platform = platform_of(&request.previous, ctx).await?;
    if previous_platform != platform {
        anyhow::bail!(
            "`{}` is {previous_platform} but `{}` is {platform}: compare one platform's images",
            request.previous,
            request.image
        );
    }
    let registry = Registry::start().await?;
    progress.step(format!("empty registry {}", registry.addr));
    let publish_one = |image: &str, previous: Option<String>| PublishOptions {
        registry: registry.addr.clone(),
        repository: REPOSITORY.to_string(),
        images: vec![(platform, image.to_string())],
        pushed: Vec::new(),
        tag: None,
        required_platforms: Vec::new(),
        defer_tag: false,
        previous,
        dry_run: false,
    };
    progress.step(format!(
        "publishing the previous release's image {}",
        request.previous
    ));
    let first = publish(&publish_one(&request.previous, None), ctx, &progress).await?;
    let before = registry.stored_bytes()?;
    let previous_reference = first
        .platforms
        .first()
        .map(|p| p.reference.clone())
        .context("publish reported no image")?;
    progress.step(format!(
        "publishing the new release's image {} with --previous {previous_reference}",
        request.image
    ));
    let start = std::time::Instant::now();
    let second = publish(
        &publish_one(&request.image, Some(previous_reference)),
        ctx,
        &progress,
    )
    .await?;
    let publish_secs = start.elapsed().as_secs_f64();
    let after = registry.stored_bytes()?;
    let pushed = second
        .platforms
        .first()
        .context("publish reported no image")?;
    let (uploaded, manifest_size, config_digest) = (
        pushed.uploaded_bytes,
        pushed.manifest_size,
        pushed.config_digest.clone(),
    );
    let config_size = registry.blob(&config_digest)?.len() as u64;
    let docker_secs =
        crate::bench::publish::docker_push(&registry, &request.image, DOCKER_REPOSITORY, &progress)
            .await?;
    let docker_stored = registry.stored_bytes()?.saturating_sub(after);
    let digest_of = |report: &template_formats::model::publish::PublishReport| {
        report
            .platforms
            .first()
            .map(|p| p.digest.clone())
            .context("publish reported no image")
    };
    let (previous_digest, digest) = (digest_of(&first)?, digest_of(&second)?);
    let layers_of = |digest: &str| -> Result<Vec<Descriptor>> {
        let bytes = registry.blob(digest)?;
        let manifest: ManifestLayers = serde_json::from_slice(&bytes).with_context(|| {
            format!("the manifest {digest} in the registry is not an image manifest")
        })?;
        Ok(manifest.layers)
    };
    let next = layers_of(&digest)?;
    let new = new_layers(&layers_of(&previous_digest)?, &next);
    let largest = new.iter().map(|l| l.size).max().unwrap_or(0);
    let added = after.saturating_sub(before);
    let report = UpdateReport {
        previous: request.previous.clone(),
        image: request.image.clone(),
        platform: platform.to_string(),
        previous_digest,
        digest,
        previous_stored_bytes: before,
        added_bytes: added,
        layers: next.len(),
        ratio: if largest == 0 {
            0.0
        } else {
            added as f64 / largest as f64
        },
        publish_secs,
        publish_uploaded_bytes: uploaded,
        necessary_bytes: necessary_bytes(&new, config_size, manifest_size),
        bytes_ratio: uploaded as f64 / necessary_bytes(&new, config_size, manifest_size) as f64,
        docker_push_secs: docker_secs,
        docker_push_stored_bytes: docker_stored,
        time_ratio: publish_secs / docker_secs,
        new_layers: new,
    };
    if request.json {
        print_json(&report)?;
    } else {
        println!(
            "publishing {} ({}) after {} into one local registry:",
            report.image, report.platform, report.previous
        );
        println!(
            "  previous release stored      {:>8.1} MB",
            report.previous_stored_bytes as f64 / 1e6
        );
        println!(
            "  the new release added        {:>8.1} MB",
            report.added_bytes as f64 / 1e6
        );
        for layer in &report.new_layers {
            println!(
                "  new layer {} of {}            {:>8.1} MB  {}",
                layer.position + 1,
                report.layers,
                layer.size as f64 / 1e6,
                layer.digest
            );
        }
        println!("  ratio (added / largest new layer) {:.3}", report.ratio);
        println!(
            "  side by side into {}:\n    \
             cargo xtask publish --previous {:>7.1} s  {:>8.1} MB uploaded \
             (necessary: {:.1} MB, ratio {:.3})\n    \
             docker push                    {:>7.1} s  {:>8.1} MB stored\n    \
             time ratio (ours/docker)       {:>7.3}",
            registry.addr,
            report.publish_secs,
            report.publish_uploaded_bytes as f64 / 1e6,
            report.necessary_bytes as f64 / 1e6,
            report.bytes_ratio,
            report.docker_push_secs,
            report.docker_push_stored_bytes as f64 / 1e6,
            report.time_ratio
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(digest: &str, size: u64) -> Descriptor {
        Descriptor {
            digest: digest.to_string(),
            size,
        }
    }

    #[test]
    fn only_blobs_the_previous_image_lacks_are_new_whatever_their_position() {
        let previous = [
            d("base", 10),
            d("debian", 300),
            d("claude", 180),
            d("codex", 170),
        ];
        // The same codex layer after a changed claude layer is not new.
        let next = [
            d("base", 10),
            d("debian", 300),
            d("claude2", 185),
            d("codex", 170),
        ];
        assert_eq!(
            new_layers(&previous, &next),
            vec![NewLayer {
                position: 2,
                digest: "claude2".into(),
                size: 185
            }]
        );
        assert!(new_layers(&next, &next).is_empty());
        let new = new_layers(&previous, &next);
        assert_eq!(necessary_bytes(&new, 3, 4), 192);
        assert_eq!(necessary_bytes(&[], 3, 4), 7);
    }
}
