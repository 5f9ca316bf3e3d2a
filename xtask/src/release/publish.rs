//! `cargo xtask publish`: tested images into an OCI registry by digest, then the multi-arch
//! index under a unique, immutable release tag.
//!
//! How an image gets into the registry: the engine exports it (`docker save` through bollard),
//! each layer is gzip-compressed here (deterministically: same layer, same bytes, same digest;
//! one layer per core at once), the blobs the registry lacks are uploaded as soon as each is
//! compressed through the distribution HTTP API v2, and an OCI
//! image manifest is PUT by its digest. No tag is created for a platform image, the engine
//! needs no registry credentials, and the manifest digest, config digest and sizes are known
//! exactly, without asking the registry what it stored.
//!
//! The index is an OCI image index made with oci-spec from the per-platform descriptors,
//! sorted by platform and serialised compactly without annotations, so the same images always
//! give the same index bytes and digest ([`index_bytes`]; `receipt verify` recomputes it).
//! The release tag is immutable: when it already exists with the same digest the step is a
//! no-op; with any other content it is an error and nothing is written. (The registry API has
//! no conditional PUT, so two publishers racing for one tag are not excluded; the workflow's
//! concurrency group serialises releases.)
//!
//! Split runs: `publish --image linux/amd64=REF --json > amd64.json` on each platform's
//! runner pushes by digest and prints what it pushed; a final `publish --pushed amd64.json
//! --pushed arm64.json --tag T --json` checks those manifests are in the registry and writes
//! the index. One machine can do both at once: `publish --image P=REF... --tag T`.
//!
//! This module holds the command's flow and decisions, and one image's push is `push.rs`; the
//! OCI mechanics live in `oci/`: the archive-to-blobs step (`oci/archive.rs`), the uploads
//! (`oci/blob_upload.rs`); the
//! verifier's crate has the registry client (`verify/src/oci/client.rs`), credentials
//! (`verify/src/oci/credentials.rs`: environment, docker config, credential helpers; never
//! flags, flags end up in logs) and registry authentication (`verify/src/oci/auth.rs`: Basic,
//! Bearer tokens with the scopes a push needs); the formats' crate the canonical index and
//! media types (`formats/src/oci/index.rs`).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};

use crate::oci::blob_upload::put_manifest;
use crate::release::push::{previous_of, push_image};
use crate::util::{print_json, Progress};
use template_formats::manifest::{Manifest, Platform};
use template_formats::model::plan::Target;
use template_formats::model::publish::{IndexEntry, PublishReport, PublishedIndex, PushedImage};
use template_formats::model::tag::is_valid_tag;
use template_formats::model::Digest;
use template_formats::oci::index::OCI_INDEX;
use template_verify::oci::client::{RegistryClient, RegistryTarget};
use template_verify::oci::credentials::{credentials_for, EnvCredentialsHost};

// ---------------------------------------------------------------------------------------------
// The canonical index.

pub use template_formats::oci::index::index_bytes_of as index_bytes;

// ---------------------------------------------------------------------------------------------
// The command.

/// What to publish; `run` makes it from the flags, `release` may build it directly.
#[derive(Debug, Clone)]
pub(crate) struct PublishOptions {
    pub registry: String,
    pub repository: String,
    /// Local images to push by digest.
    pub images: Vec<(Platform, String)>,
    /// Images pushed by earlier runs (`publish --json` outputs).
    pub pushed: Vec<PushedImage>,
    /// Write the index under this tag.
    pub tag: Option<String>,
    /// Platforms the index must contain (empty: any).
    pub required_platforms: Vec<Platform>,
    /// Push the index by digest only, after checking that the tag is free or already this
    /// index; the tag is written by a later run without this option (after the receipt
    /// verified), so a failure in between burns no tag.
    pub defer_tag: bool,
    /// The previous release (`host/repository@digest` of its index or of one platform's
    /// manifest, in the same registry): layers it holds that this tool's compressor made are
    /// neither compressed nor uploaded (`oci/reuse.rs`).
    pub previous: Option<String>,
    pub dry_run: bool,
}

/// The whole publish: push the local images, then (with a tag) the index.
pub(crate) async fn publish(
    options: &PublishOptions,
    ctx: &crate::Context,
    progress: &Progress,
) -> Result<PublishReport> {
    let target = RegistryTarget::parse(&options.registry, &options.repository)?;
    if let Some(tag) = &options.tag {
        if !is_valid_tag(tag) {
            bail!("--tag `{tag}` is not a valid OCI tag ([A-Za-z0-9_][A-Za-z0-9._-]{{0,127}})");
        }
    }
    let mut platforms = BTreeSet::new();
    for platform in options
        .images
        .iter()
        .map(|(p, _)| *p)
        .chain(options.pushed.iter().map(|p| p.platform))
    {
        if !platforms.insert(platform) {
            bail!("{platform} is given more than once (--image / --pushed)");
        }
    }
    for pushed in &options.pushed {
        if pushed.reference != target.reference(&pushed.digest) {
            bail!(
                "the pushed image {} is not in {}: --pushed outputs must come from the same \
                 registry and repository",
                pushed.reference,
                target.name()
            );
        }
    }
    if options.tag.is_some() {
        let missing: Vec<String> = options
            .required_platforms
            .iter()
            .filter(|p| !platforms.contains(p))
            .map(|p| p.to_string())
            .collect();
        if !missing.is_empty() {
            bail!(
                "the index would lack {}; give every platform (or --partial to publish an \
                 index whose receipt will be incomplete)",
                missing.join(", ")
            );
        }
    }

    let env = &ctx.settings.verifier;
    let client = RegistryClient::new(
        target.clone(),
        credentials_for(
            &target.host,
            // The user named this registry (--oci-registry): the environment's credentials are
            // for it.
            &EnvCredentialsHost::named(&target.host),
            &env.registry,
        )
        .await?,
        &env.transfer,
    )?;
    client.ping().await?;

    let previous = match &options.previous {
        None => None,
        Some(reference) => Some(previous_of(reference, &target, env).await?),
    };
    let mut pushed = Vec::new();
    if !options.images.is_empty() {
        let docker = crate::image::engine::connect(&ctx.settings).await?;
        for (platform, image) in &options.images {
            pushed.push(
                push_image(
                    ctx,
                    &docker,
                    &client,
                    *platform,
                    image,
                    previous.as_ref(),
                    options.dry_run,
                    progress,
                )
                .await?,
            );
        }
    }
    // Images pushed by other runs must really be in the registry, exactly as described.
    for earlier in &options.pushed {
        if !client
            .manifest_matches(&earlier.digest, earlier.manifest_size)
            .await?
        {
            bail!(
                "{} is not in the registry as its --pushed record describes it (digest and \
                 size); run `publish --image {}=...` for it first",
                earlier.reference,
                earlier.platform
            );
        }
        pushed.push(earlier.clone());
    }
    pushed.sort_by_key(|p| p.platform);

    let index = match &options.tag {
        None => None,
        Some(tag) => {
            let entries: Vec<IndexEntry> = pushed.iter().map(IndexEntry::from).collect();
            let bytes = index_bytes(&entries)?;
            let digest = Digest::of(&bytes).to_string();
            let existing = client.get_manifest(tag).await?;
            let noop = match existing {
                Some((current, _)) => {
                    let current_digest = Digest::of(&current).to_string();
                    if current_digest != digest {
                        bail!(
                            "tag `{tag}` of {} already points at {current_digest}, not at this \
                             release's index {digest}; release tags are immutable, choose a new tag",
                            target.name()
                        );
                    }
                    progress.step(format!(
                        "{}:{tag} is already this index: nothing to do",
                        target.name()
                    ));
                    true
                }
                None if options.dry_run => {
                    progress.step(format!("would tag {} as {}:{tag}", digest, target.name()));
                    false
                }
                None if options.defer_tag => {
                    put_manifest(&client, &digest, OCI_INDEX, &bytes).await?;
                    crate::kill_point::reached("publish:index-pushed");
                    match client.get_manifest(&digest).await? {
                        Some((stored, _)) if stored == bytes => {}
                        _ => bail!(
                            "{}@{digest} does not read back as the index just pushed",
                            target.name()
                        ),
                    }
                    progress.step(format!(
                        "pushed the index {} to {} by digest; the tag {tag} is still free",
                        digest,
                        target.name()
                    ));
                    false
                }
                None => {
                    put_manifest(&client, tag, OCI_INDEX, &bytes).await?;
                    // Read it back: the tag must now resolve to exactly our bytes.
                    match client.get_manifest(tag).await? {
                        Some((stored, _)) if stored == bytes => {}
                        _ => bail!(
                            "{}:{tag} does not read back as the index just pushed; another \
                             publisher may have raced for the tag",
                            target.name()
                        ),
                    }
                    progress.step(format!("tagged {} as {}:{tag}", digest, target.name()));
                    false
                }
            };
            Some(PublishedIndex {
                tag: tag.clone(),
                reference: target.reference(&digest),
                digest,
                media_type: OCI_INDEX.to_string(),
                size: bytes.len() as u64,
                repository: target.name(),
                noop,
            })
        }
    };
    Ok(PublishReport {
        registry: target.host.clone(),
        repository: target.repository.clone(),
        dry_run: options.dry_run,
        platforms: pushed,
        index,
    })
}

fn parse_image_flag(flag: &str) -> Result<(Platform, String)> {
    let (platform, image) = flag
        .split_once('=')
        .with_context(|| format!("--image `{flag}` is not `PLATFORM=REF`"))?;
    let platform = platform
        .parse::<Platform>()
        .map_err(|e| anyhow!("--image `{flag}`: {e}"))?;
    if image.is_empty() {
        bail!("--image `{flag}` names no image");
    }
    Ok((platform, image.to_string()))
}

/// `cargo xtask publish`: where to, which images (local, or already pushed elsewhere), and
/// whether to make the index under a tag.
#[derive(Debug, Clone, PartialEq)]
pub struct PublishRequest {
    /// The registry (`--oci-registry`) and repository within it.
    pub target: Target,
    /// The release tag of the index; `None` pushes the platform images by digest only.
    pub tag: Option<String>,
    /// Tested local images, `PLATFORM=REF`, one per platform.
    pub images: Vec<String>,
    /// The `--json` output of earlier `publish --image ...` runs (other runners' platforms).
    pub pushed: Vec<PathBuf>,
    /// Allow an index that lacks some of the manifest's platforms.
    pub partial: bool,
    /// With `tag`: push the index by digest and check the tag, but do not write it.
    pub defer_tag: bool,
    /// The previous release, `host/repository@digest`, whose layers need no upload.
    pub previous: Option<String>,
    /// Read the registry, write nothing to it.
    pub dry_run: bool,
    pub json: bool,
}

impl PublishRequest {
    /// This request as the command line that parses back into it (the release's steps run
    /// their children this way; a test in main.rs checks the round trip).
    pub fn to_args(&self) -> Vec<std::ffi::OsString> {
        // The registry and repository always, though they have defaults: the child must not
        // take XTASK_OCI_REGISTRY / XTASK_OCI_REPOSITORY instead of the plan's target.
        crate::util::Argv::command(&["publish"])
            .switch("--json", self.json)
            .value("--oci-registry", &self.target.registry)
            .value("--repository", &self.target.repository)
            .option("--tag", self.tag.as_ref())
            .each("--image", &self.images)
            .each("--pushed", &self.pushed)
            .switch("--partial", self.partial)
            .switch("--defer-tag", self.defer_tag)
            .option("--previous", self.previous.as_ref())
            .switch("--dry-run", self.dry_run)
            .into_vec()
    }
}

pub async fn run(request: PublishRequest, ctx: &crate::Context) -> Result<ExitCode> {
    if request.images.is_empty() && request.pushed.is_empty() {
        bail!("nothing to publish: give --image PLATFORM=REF and/or --pushed FILE");
    }
    let images = request
        .images
        .iter()
        .map(|f| parse_image_flag(f))
        .collect::<Result<Vec<_>>>()?;
    let mut pushed = Vec::new();
    for file in &request.pushed {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("cannot read --pushed {}", file.display()))?;
        let report: PublishReport = serde_json::from_str(&text).with_context(|| {
            format!(
                "--pushed {}: not the JSON that `cargo xtask publish --json` prints",
                file.display()
            )
        })?;
        if report.dry_run {
            bail!(
                "--pushed {} comes from a --dry-run: nothing was pushed",
                file.display()
            );
        }
        pushed.extend(report.platforms);
    }
    let required_platforms = if request.partial {
        Vec::new()
    } else {
        Manifest::load(&ctx.layout.manifest())?.platforms
    };
    let options = PublishOptions {
        registry: request.target.registry,
        repository: request.target.repository,
        images,
        pushed,
        tag: request.tag,
        required_platforms,
        dry_run: request.dry_run,
        defer_tag: request.defer_tag,
        previous: request.previous,
    };
    let progress = Progress::default();
    let report = publish(&options, ctx, &progress).await?;
    if request.json {
        print_json(&report)?;
    } else {
        for p in &report.platforms {
            println!(
                "{}  {}  ({} bytes, {} uploaded)",
                p.platform, p.reference, p.size, p.uploaded_bytes
            );
        }
        if let Some(index) = &report.index {
            println!(
                "{}:{} -> {}{}",
                index.repository,
                index.tag,
                index.digest,
                if index.noop {
                    " (already published)"
                } else {
                    ""
                }
            );
        }
        if report.dry_run {
            println!("dry run: nothing was written to the registry");
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use template_formats::oci::index::OCI_MANIFEST;

    fn entry(platform: Platform, digest_byte: &str) -> IndexEntry {
        IndexEntry {
            platform,
            os: "linux".into(),
            architecture: platform.arch().into(),
            variant: None,
            digest: format!("sha256:{}", digest_byte.repeat(64)),
            media_type: OCI_MANIFEST.into(),
            size: 500,
        }
    }

    #[test]
    fn index_bytes_are_canonical() {
        let a = entry(Platform::LinuxAmd64, "a");
        let b = entry(Platform::LinuxArm64, "b");
        let one = index_bytes(&[a.clone(), b.clone()]).unwrap();
        let two = index_bytes(&[b.clone(), a.clone()]).unwrap();
        assert_eq!(one, two);
        let text = String::from_utf8(one.clone()).unwrap();
        assert!(text.starts_with(r#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"#), "{text}");
        assert!(text.find("amd64").unwrap() < text.find("arm64").unwrap());
        let mut changed = b.clone();
        changed.digest = format!("sha256:{}", "c".repeat(64));
        assert_ne!(index_bytes(&[a.clone(), changed]).unwrap(), one);
        assert!(index_bytes(&[a.clone(), a]).is_err());
    }

    #[test]
    fn image_flags() {
        assert_eq!(
            parse_image_flag("linux/arm64=coding-agent:abc").unwrap(),
            (Platform::LinuxArm64, "coding-agent:abc".to_string())
        );
        assert!(parse_image_flag("coding-agent:abc").is_err());
        assert!(parse_image_flag("linux/s390x=x").is_err());
    }
}
