//! The edge of `cargo xtask sbom`: the engine (the image's files, read without starting it)
//! and the repository's lockfile and inventory.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};

use super::copyright::{doc_tree, DocTree};
use super::document::{document, stats, SbomReport};
use super::files::{dpkg_owned, elf_files, unowned, ElfFile};
use super::input::{SbomInput, NPM_CLI_PREFIX, NPM_PREFIX};
use super::npm::{is_platform_specific, npm_candidates};
use super::package_json::{npm_manifest, package_dir, NpmManifest};
use crate::image::dpkg::{os_release, OsRelease};
use crate::image::engine;
use crate::util::{atomic_write, print_json, sha256_hex};
use template_formats::manifest::Platform;
use template_formats::model::inventory::Inventory;
use template_formats::model::lockfile::Lockfile;
use template_formats::sbom::cyclonedx::bom_bytes;
use template_formats::sbom::document_bytes;
use template_formats::sbom::spdx::Document;

async fn read_one(docker: &bollard::Docker, image: &str, path: &str) -> Result<Option<Vec<u8>>> {
    match engine::read_image_files(docker, image, &engine::new_run_id("sbom"), path).await {
        Ok(files) => Ok(files.into_iter().next().map(|(_, bytes)| bytes)),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

fn is_not_found(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        matches!(
            e.downcast_ref::<bollard::errors::Error>(),
            Some(bollard::errors::Error::DockerResponseServerError {
                status_code: 404,
                ..
            })
        )
    })
}

/// `cargo xtask sbom`: the image to describe and where the documents go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SbomRequest {
    /// Image reference (tag or id) in the local Docker engine.
    pub image: String,
    /// The platform the image must report.
    pub platform: Platform,
    /// Where the SPDX document goes.
    pub output: PathBuf,
    /// Where the same SBOM goes as CycloneDX, if anywhere.
    pub cyclonedx: Option<PathBuf>,
    /// The documents' creation time (RFC 3339); `None` is the image's creation time.
    pub now: Option<String>,
    /// The pushed manifest's digest, with `repository` and `release_tag`: the SBOM then names
    /// the image as consumers pull it.
    pub manifest_digest: Option<String>,
    pub repository: Option<String>,
    pub release_tag: Option<String>,
    pub json: bool,
}

impl SbomRequest {
    /// This request as the command line that parses back into it (the release's steps run
    /// their children this way; a test in main.rs checks the round trip).
    pub fn to_args(&self) -> Vec<std::ffi::OsString> {
        crate::util::Argv::command(&["sbom"])
            .switch("--json", self.json)
            .value("--platform", self.platform.to_string())
            .value("--image", &self.image)
            .value("--output", &self.output)
            .option("--cyclonedx", self.cyclonedx.as_ref())
            .option("--now", self.now.as_ref())
            .option("--manifest-digest", self.manifest_digest.as_ref())
            .option("--repository", self.repository.as_ref())
            .option("--release-tag", self.release_tag.as_ref())
            .into_vec()
    }
}

pub async fn run(request: SbomRequest, ctx: &crate::Context) -> Result<ExitCode> {
    let root = &ctx.layout;
    let lock_path = root.package_lock();
    let lock_text = std::fs::read_to_string(&lock_path)
        .with_context(|| format!("cannot read {}", lock_path.display()))?;
    let lockfile = Lockfile::parse(&lock_text)?;
    let inventory = Inventory::load(&root.inventory())?;

    let docker = engine::connect(&ctx.settings).await?;
    let image = &request.image;
    let (image_id, created) = inspect_image(&docker, root, &request).await?;
    let contents = ImageContents::read(&docker, image, &lockfile, request.platform).await?;

    let doc = document(&SbomInput {
        platform: request.platform,
        image,
        image_id: &image_id,
        created: &created,
        dpkg_status: &contents.dpkg_status,
        docs: &contents.docs,
        os_release: &contents.os_release,
        debian_version: &contents.debian_version,
        lockfile: &lockfile,
        present: &contents.present,
        inventory: &inventory,
        npm_manifests: &contents.npm_manifests,
        npm_cli: &contents.npm_cli,
        elf_files: &contents.elf_files,
        published: published(&request)?,
    })?;
    let bytes = document_bytes(&doc);
    atomic_write(&request.output, &bytes)?;
    if let Some(path) = &request.cyclonedx {
        atomic_write(path, &bom_bytes(&doc)?)?;
    }
    let report = sbom_report(&request, &doc, &bytes, image_id);
    let c = &report.coverage;
    eprintln!(
        "{}: {} packages ({} Debian, {} npm, {} bundled in npm), {} bytes; licenses: {}/{} \
         Debian ({} concluded), {}/{} npm; suppliers: {}/{}; {} DEPENDS_ON",
        report.output.display(),
        c.packages,
        c.debian_packages,
        c.npm_packages,
        c.npm_bundled,
        report.size,
        c.debian_with_license,
        c.debian_packages,
        c.debian_with_concluded_license,
        c.npm_with_license,
        c.npm_packages,
        c.packages_with_supplier,
        c.packages,
        c.depends_on,
    );
    eprintln!(
        "{}: {} file entries (ELF programs no Debian package owns), {} bytes",
        report.output.display(),
        contents.elf_files.len(),
        contents.elf_files.iter().map(|f| f.size).sum::<u64>(),
    );
    if request.json {
        print_json(&report)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The published image the flags name (`--manifest-digest`, `--repository`, `--release-tag`,
/// which clap requires together), its digest checked to be `sha256:<64 hex>`.
fn published(request: &SbomRequest) -> Result<Option<template_formats::sbom::PublishedImage<'_>>> {
    let (Some(digest), Some(repository), Some(tag)) = (
        &request.manifest_digest,
        &request.repository,
        &request.release_tag,
    ) else {
        return Ok(None);
    };
    let hex = digest.strip_prefix("sha256:").unwrap_or_default();
    if hex.len() != 64
        || !hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        bail!("--manifest-digest `{digest}` is not sha256:<64 lowercase hex>");
    }
    Ok(Some(template_formats::sbom::PublishedImage {
        repository,
        manifest_digest: digest,
        tag,
    }))
}

/// The image's id and the SBOM's creation time (`--now`, else the image's), checked to be for
/// the platform.
async fn inspect_image(
    docker: &bollard::Docker,
    root: &crate::layout::Layout,
    request: &SbomRequest,
) -> Result<(String, String)> {
    let image = &request.image;
    let inspect = engine::inspect_image(docker, image)
        .await?
        .with_context(|| format!("the image {image} is not in the Docker engine; build it first (`cargo xtask build --platform {}`)", request.platform))?;
    engine::ensure_image_platform(image, &inspect, request.platform)?;
    // The tool's id of the image (its config digest), not the engine's handle for it.
    let image_id = crate::image::identity::tool_image_id(docker, root, image, &inspect).await?;
    let created = match (&request.now, &inspect.created) {
        (Some(now), _) => crate::util::now_or(Some(now))?,
        (None, Some(created)) => chrono::DateTime::parse_from_rfc3339(created)
            .with_context(|| format!("{image}: the engine's creation time `{created}`"))?
            .with_timezone(&chrono::Utc),
        (None, None) => bail!("{image} has no creation time; pass --now"),
    }
    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    Ok((image_id, created))
}

/// What the SBOM reads from inside the image, without starting it.
struct ImageContents {
    dpkg_status: String,
    os_release: OsRelease,
    debian_version: String,
    docs: DocTree,
    present: BTreeSet<String>,
    npm_manifests: BTreeMap<String, NpmManifest>,
    npm_cli: BTreeMap<String, NpmManifest>,
    elf_files: Vec<ElfFile>,
}

/// The regular files an image tree's archive holds whose path `keep` accepts, with their
/// contents, and every symbolic link with its target. Paths as the archive API gives them,
/// below the tree's own name (`doc/libc6/copyright` for /usr/share/doc).
type TreeEntries = (Vec<(String, Vec<u8>)>, Vec<(String, String)>);

fn tree_entries(archive: &mut dyn Read, keep: fn(&str) -> bool) -> Result<TreeEntries> {
    let mut files = Vec::new();
    let mut links = Vec::new();
    let mut tar = tar::Archive::new(archive);
    for entry in tar.entries().context("reading a container archive")? {
        let mut entry = entry.context("reading a container archive")?;
        let path = entry.path()?.to_string_lossy().into_owned();
        let kind = entry.header().entry_type();
        if kind.is_symlink() {
            if let Some(target) = entry.link_name()? {
                links.push((path, target.to_string_lossy().into_owned()));
            }
        } else if kind.is_file() && keep(&path) {
            let mut content = Vec::new();
            entry.read_to_end(&mut content)?;
            files.push((path, content));
        }
    }
    Ok((files, links))
}

/// package.json files of packages (not those deeper inside a package), by package directory,
/// with `prefix` (the tree's own name) taken off the paths.
fn manifests(files: Vec<(String, Vec<u8>)>, prefix: &str) -> BTreeMap<String, NpmManifest> {
    files
        .into_iter()
        .filter_map(|(path, bytes)| {
            let path = path.strip_prefix(prefix)?.trim_start_matches('/');
            let dir = package_dir(path)?;
            Some((dir.to_string(), npm_manifest(&bytes)?))
        })
        .collect()
}

async fn read_tree(
    docker: &bollard::Docker,
    image: &str,
    path: &'static str,
    keep: fn(&str) -> bool,
) -> Result<TreeEntries> {
    let run_id = engine::new_run_id("sbom");
    engine::read_image_tree(docker, image, &run_id, path, move |r| tree_entries(r, keep)).await
}

impl ImageContents {
    async fn read(
        docker: &bollard::Docker,
        image: &str,
        lockfile: &Lockfile,
        platform: Platform,
    ) -> Result<ImageContents> {
        let text = |bytes: Option<Vec<u8>>| {
            String::from_utf8_lossy(&bytes.unwrap_or_default()).into_owned()
        };
        let status = read_one(docker, image, "/var/lib/dpkg/status")
            .await?
            .with_context(|| format!("{image} has no /var/lib/dpkg/status: is it Debian-based?"))?;
        let dpkg_status = String::from_utf8_lossy(&status).into_owned();
        // /etc/os-release is a symbolic link; the archive API would return the link itself.
        let os_release = os_release(&text(read_one(docker, image, "/usr/lib/os-release").await?));
        let debian_version = text(read_one(docker, image, "/etc/debian_version").await?);
        let tree =
            |path: &'static str, keep: fn(&str) -> bool| read_tree(docker, image, path, keep);
        eprintln!("sbom: reading /usr/share/doc of {image}");
        let (files, links) = tree("/usr/share/doc", |p| p.ends_with("/copyright")).await?;
        let docs = doc_tree(files, links);
        // One pass over the install tree, keeping only package.json files: the platform
        // binaries it holds, and each package's author.
        eprintln!("sbom: reading the package.json files under {NPM_PREFIX}/node_modules");
        let (files, _) = tree(NPM_INSTALL_TREE, |p| p.ends_with("/package.json")).await?;
        let npm_manifests = manifests(files, "");
        let present = npm_candidates(lockfile, platform)
            .into_iter()
            .filter(|(path, entry)| {
                is_platform_specific(entry) && npm_manifests.contains_key(*path)
            })
            .map(|(path, _)| path.to_string())
            .collect();
        let (files, _) = tree(NPM_CLI_PREFIX, |p| p.ends_with("package.json")).await?;
        let npm_cli = manifests(files, "npm");
        let (lists, _) = tree("/var/lib/dpkg/info", |p| p.ends_with(".list")).await?;
        let owned = dpkg_owned(lists.iter().map(|(_, bytes)| bytes.as_slice()));
        // One streamed pass over the whole tree: only ELF programs are hashed, as they pass.
        eprintln!("sbom: hashing the ELF programs of {image} that no Debian package owns");
        let run_id = engine::new_run_id("sbom");
        let all = engine::read_image_tree(docker, image, &run_id, "/", elf_files).await?;
        let elf_files = unowned(all, &owned);
        Ok(ImageContents {
            dpkg_status,
            os_release,
            debian_version,
            docs,
            present,
            npm_manifests,
            npm_cli,
            elf_files,
        })
    }
}

/// The template's install tree: its archive's paths are the lockfile's (`node_modules/...`).
const NPM_INSTALL_TREE: &str = "/opt/coding-agents/node_modules";

fn sbom_report(
    request: &SbomRequest,
    doc: &Document,
    bytes: &[u8],
    image_id: String,
) -> SbomReport {
    let coverage = stats(doc);
    SbomReport {
        output: request.output.clone(),
        sha256: sha256_hex(bytes),
        size: bytes.len() as u64,
        image: request.image.clone(),
        image_id,
        platform: request.platform,
        debian_packages: coverage.debian_packages,
        npm_packages: coverage.npm_packages,
        packages: coverage.packages,
        coverage,
    }
}
