//! `cargo xtask publish`: tested images into an OCI registry by digest, then the multi-arch
//! index under a unique, immutable release tag.
//!
//! How an image gets into the registry: the engine exports it (`docker save` through bollard),
//! each layer is gzip-compressed here (deterministically: same layer, same bytes, same digest),
//! the blobs the registry lacks are uploaded through the distribution HTTP API v2, and an OCI
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
//! Credentials and registry authentication live in `credentials.rs` (environment, docker
//! config, credential helpers) and `oci_auth.rs` (Basic, Bearer tokens with the scopes a push
//! needs). Never flags: flags end up in logs.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::str::FromStr;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use futures_util::StreamExt;
use oci_spec::image::{
    Arch, DescriptorBuilder, Digest as OciDigest, ImageIndexBuilder, ImageManifestBuilder,
    MediaType, Os, PlatformBuilder,
};
use reqwest::{header, Method, RequestBuilder, Response, StatusCode, Url};
use serde::Deserialize;
use sha2::{Digest as _, Sha256};

use crate::flags::PublishArgs;
use crate::manifest::{repo_root, Manifest, Platform, MANIFEST_PATH};
use crate::model::publish::{IndexEntry, PublishReport, PublishedIndex, PushedImage};
use crate::model::tag::is_valid_tag;
use crate::oci::auth::{redact, Authenticator};
use crate::oci::blob_upload::{file_body, BlobLocations, CountingReader, TransferProgress};
use crate::oci::credentials::{credentials_for, Credentials};
use crate::util::{print_json, sha256_hex, Progress};

pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
pub const OCI_LAYER_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
pub const OCI_LAYER_ZSTD: &str = "application/vnd.oci.image.layer.v1.tar+zstd";

/// Every manifest type a tag or digest may resolve to; sent as `Accept`.
const MANIFEST_ACCEPT: &str = "application/vnd.oci.image.index.v1+json, \
    application/vnd.oci.image.manifest.v1+json, \
    application/vnd.docker.distribution.manifest.list.v2+json, \
    application/vnd.docker.distribution.manifest.v2+json";

// ---------------------------------------------------------------------------------------------
// The canonical index.

/// The canonical bytes of the OCI image index over `entries`: sorted by platform, compact
/// JSON, no annotations, no timestamps. Equal inputs in any order give equal bytes.
pub fn index_bytes(entries: &[IndexEntry]) -> Result<Vec<u8>> {
    let mut sorted: Vec<&IndexEntry> = entries.iter().collect();
    sorted.sort_by_key(|e| e.platform);
    if let Some(w) = sorted.windows(2).find(|w| w[0].platform == w[1].platform) {
        bail!("{} appears twice in the index", w[0].platform);
    }
    let mut manifests = Vec::new();
    for e in sorted {
        let mut platform = PlatformBuilder::default()
            .architecture(Arch::from(e.architecture.as_str()))
            .os(Os::from(e.os.as_str()));
        if let Some(variant) = &e.variant {
            platform = platform.variant(variant.clone());
        }
        let digest = OciDigest::from_str(&e.digest)
            .map_err(|err| anyhow!("{}: digest `{}`: {err}", e.platform, e.digest))?;
        manifests.push(
            DescriptorBuilder::default()
                .media_type(MediaType::from(e.media_type.as_str()))
                .digest(digest)
                .size(e.size)
                .platform(platform.build()?)
                .build()?,
        );
    }
    let index = ImageIndexBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageIndex)
        .manifests(manifests)
        .build()?;
    Ok(serde_json::to_vec(&index)?)
}

// ---------------------------------------------------------------------------------------------
// Where to push, and as whom.

#[derive(Debug, Clone, PartialEq)]
pub struct RegistryTarget {
    /// `http(s)://host[:port]/`
    pub base: Url,
    /// `host[:port]` as it appears in image references.
    pub host: String,
    pub repository: String,
}

impl RegistryTarget {
    /// `registry` is `host[:port]` (https, or http for a loopback address) or an explicit
    /// `http://` / `https://` URL.
    pub fn parse(registry: &str, repository: &str) -> Result<RegistryTarget> {
        let registry = registry.trim_end_matches('/');
        let (scheme, host) = if let Some(rest) = registry.strip_prefix("https://") {
            ("https", rest)
        } else if let Some(rest) = registry.strip_prefix("http://") {
            ("http", rest)
        } else if is_loopback_host(registry) {
            ("http", registry)
        } else {
            ("https", registry)
        };
        if host.is_empty() || host.contains('/') {
            bail!("--oci-registry `{registry}` is not `host[:port]`");
        }
        if !is_valid_repository(repository) {
            bail!(
                "--repository `{repository}` is not a valid repository name (lowercase \
                 components of [a-z0-9] separated by `.`, `_`, `-` and `/`)"
            );
        }
        let base = Url::parse(&format!("{scheme}://{host}/"))
            .with_context(|| format!("--oci-registry `{registry}` is not a host"))?;
        Ok(RegistryTarget {
            base,
            host: host.to_string(),
            repository: repository.to_string(),
        })
    }

    /// `host/repository`
    pub fn name(&self) -> String {
        format!("{}/{}", self.host, self.repository)
    }

    pub fn reference(&self, digest: &str) -> String {
        format!("{}@{digest}", self.name())
    }

    fn url(&self, rest: &str) -> Url {
        self.base
            .join(&format!("v2/{}/{rest}", self.repository))
            .expect("registry paths are valid URL paths")
    }
}

/// `host[:port]` names this machine (pushes to it go over plain http).
pub fn is_loopback_host(host: &str) -> bool {
    let name = host
        .rsplit_once(':')
        .filter(|(_, port)| port.bytes().all(|b| b.is_ascii_digit()))
        .map_or(host, |(name, _)| name);
    name == "localhost" || name == "[::1]" || name.starts_with("127.")
}

fn is_valid_repository(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && name.split('/').all(|component| {
            let bytes = component.as_bytes();
            !bytes.is_empty()
                && bytes[0].is_ascii_alphanumeric()
                && bytes[bytes.len() - 1].is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase() || b"._-".contains(b))
        })
}

// ---------------------------------------------------------------------------------------------
// The registry's HTTP API v2.

pub struct RegistryClient {
    http: reqwest::Client,
    pub target: RegistryTarget,
    auth: Authenticator,
}

impl RegistryClient {
    pub fn new(target: RegistryTarget, credentials: Option<Credentials>) -> Result<Self> {
        let mut builder = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(20))
            .read_timeout(Duration::from_secs(300))
            .user_agent(concat!("coding-agent-xtask/", env!("CARGO_PKG_VERSION")));
        if is_loopback_host(&target.host) {
            builder = builder.no_proxy();
        }
        let http = builder.build().context("cannot build the HTTP client")?;
        Ok(RegistryClient {
            auth: Authenticator::new(http.clone(), &target.host, &target.repository, credentials),
            http,
            target,
        })
    }

    /// Sends a request made by `make` (called again for each attempt), answering auth
    /// challenges (a bounded number: expired tokens are renewed, refusals reported) and
    /// retrying timeouts, connection errors, 429 and 5xx with backoff.
    async fn send(
        &self,
        url: &Url,
        make: impl Fn(&reqwest::Client) -> Result<RequestBuilder>,
    ) -> Result<Response> {
        const ATTEMPTS: u32 = 4;
        let mut auth_rounds = 0;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let request = self.auth.authorize(make(&self.http)?).await?;
            match request.send().await {
                Ok(response) if response.status() == StatusCode::UNAUTHORIZED => {
                    let challenge = response
                        .headers()
                        .get(header::WWW_AUTHENTICATE)
                        .and_then(|h| h.to_str().ok())
                        .unwrap_or("")
                        .to_string();
                    self.auth.answer(url, &challenge, auth_rounds).await?;
                    auth_rounds += 1;
                    attempt -= 1;
                }
                Ok(response)
                    if (response.status().is_server_error()
                        || response.status() == StatusCode::TOO_MANY_REQUESTS)
                        && attempt < ATTEMPTS =>
                {
                    let wait = response
                        .headers()
                        .get(header::RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.parse::<u64>().ok())
                        .map(Duration::from_secs)
                        .unwrap_or(Duration::from_millis(500 << attempt))
                        .min(Duration::from_secs(30));
                    tokio::time::sleep(wait).await;
                }
                Ok(response) => return Ok(response),
                Err(e) if (e.is_timeout() || e.is_connect()) && attempt < ATTEMPTS => {
                    tokio::time::sleep(Duration::from_millis(500 << attempt)).await;
                }
                Err(e) if e.is_connect() => {
                    return Err(anyhow!(e)).with_context(|| {
                        format!(
                            "cannot connect to the registry at {}; for the local registry run \
                             `scripts/local-registry.sh start`",
                            self.target.base
                        )
                    })
                }
                Err(e) => {
                    return Err(anyhow!(e)).with_context(|| format!("request to {url} failed"))
                }
            }
        }
    }

    async fn expect_ok(&self, what: &str, url: &Url, response: Response) -> Result<Response> {
        if response.status().is_success() {
            return Ok(response);
        }
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        let secrets = self.auth.secrets().await;
        let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
        let hint = if status == StatusCode::FORBIDDEN {
            format!(
                " (the registry denies this account: check that it may push to {}; on \
                 ghcr.io the token needs write:packages and the package must grant this \
                 account or workflow write access)",
                self.target.name()
            )
        } else {
            String::new()
        };
        bail!(
            "{what}: {url} answered {status}{hint}: {}",
            redact(&body.chars().take(500).collect::<String>(), &secrets)
        )
    }

    /// `GET /v2/`: reachable, and the API version we speak.
    pub async fn ping(&self) -> Result<()> {
        let url = self.target.base.join("v2/")?;
        let response = self.send(&url, |http| Ok(http.get(url.clone()))).await?;
        self.expect_ok("registry API check", &url, response).await?;
        Ok(())
    }

    pub async fn blob_exists(&self, digest: &str) -> Result<bool> {
        let url = self.target.url(&format!("blobs/{digest}"));
        let response = self.send(&url, |http| Ok(http.head(url.clone()))).await?;
        match response.status() {
            StatusCode::OK => Ok(true),
            StatusCode::NOT_FOUND => Ok(false),
            status => bail!("HEAD {url} answered {status}"),
        }
    }

    /// Gets `blob` into the repository: mounted from `mount_from` (another repository of
    /// this registry that holds it) when the registry agrees, else uploaded in one PUT whose
    /// body streams from the file on disk. A failed upload session is abandoned and a new one
    /// started, a bounded number of times (5xx inside a session are retried by `send`).
    pub async fn upload_blob(&self, blob: &Blob, mount_from: Option<&str>) -> Result<BlobPush> {
        const SESSIONS: u32 = 3;
        let progress = TransferProgress::new(&format!("upload {}", blob.digest), blob.size);
        let mut session = 0;
        loop {
            session += 1;
            let mut start = self.target.url("blobs/uploads/");
            if let Some(source) = mount_from {
                self.auth.want_pull_from(source).await;
                start
                    .query_pairs_mut()
                    .append_pair("mount", &blob.digest)
                    .append_pair("from", source);
            }
            let response = self
                .send(&start, |http| {
                    Ok(http.post(start.clone()).header(header::CONTENT_LENGTH, "0"))
                })
                .await?;
            if response.status() == StatusCode::CREATED && mount_from.is_some() {
                return Ok(BlobPush::Mounted);
            }
            let response = self
                .expect_ok("start a blob upload", &start, response)
                .await?;
            let location = response
                .headers()
                .get(header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .with_context(|| format!("{start} started an upload without a Location"))?;
            let mut put = start
                .join(location)
                .with_context(|| format!("{start}: upload Location `{location}` is not a URL"))?;
            put.query_pairs_mut().append_pair("digest", &blob.digest);
            let size = blob.size;
            let response = self
                .send(&put, |http| {
                    Ok(http
                        .request(Method::PUT, put.clone())
                        .header(header::CONTENT_TYPE, "application/octet-stream")
                        .header(header::CONTENT_LENGTH, size)
                        .body(file_body(&blob.path, progress.clone())?))
                })
                .await?;
            // A session the registry lost (404) or a failure it kept answering (5xx): start
            // a new one.
            let status = response.status();
            if (status == StatusCode::NOT_FOUND || status.is_server_error()) && session < SESSIONS {
                eprintln!(
                    "upload {}: {put} answered {status}; starting a new upload session",
                    blob.digest
                );
                continue;
            }
            self.expect_ok(&format!("upload blob {}", blob.digest), &put, response)
                .await?;
            eprintln!("{}", progress.summary());
            return Ok(BlobPush::Uploaded);
        }
    }

    /// GET a manifest by tag or digest: the successful response, `None` when absent.
    async fn manifest_response(&self, reference: &str) -> Result<Option<(Response, Url)>> {
        let url = self.target.url(&format!("manifests/{reference}"));
        let response = self
            .send(&url, |http| {
                Ok(http
                    .get(url.clone())
                    .header(header::ACCEPT, MANIFEST_ACCEPT))
            })
            .await?;
        if response.status() == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let response = self
            .expect_ok(&format!("read manifest {reference}"), &url, response)
            .await?;
        Ok(Some((response, url)))
    }

    /// The manifest a tag or digest points at: (bytes, content type), `None` when absent.
    pub async fn get_manifest(&self, reference: &str) -> Result<Option<(Vec<u8>, String)>> {
        let Some((response, url)) = self.manifest_response(reference).await? else {
            return Ok(None);
        };
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let bytes = response
            .bytes()
            .await
            .with_context(|| format!("cannot read {url}"))?;
        Ok(Some((bytes.to_vec(), content_type)))
    }

    /// Like [`Self::get_manifest`], for registries named by untrusted documents: reads at
    /// most `limit` bytes of the body (more is an error, so a hostile registry cannot exhaust
    /// memory); `None` when absent.
    pub async fn get_manifest_bounded(
        &self,
        reference: &str,
        limit: usize,
    ) -> Result<Option<Vec<u8>>> {
        let Some((mut response, url)) = self.manifest_response(reference).await? else {
            return Ok(None);
        };
        let too_big = || anyhow!("{url}: the manifest is larger than {limit} bytes");
        if response.content_length().is_some_and(|n| n > limit as u64) {
            return Err(too_big());
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .with_context(|| format!("cannot read {url}"))?
        {
            if bytes.len() + chunk.len() > limit {
                return Err(too_big());
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(Some(bytes))
    }

    /// Whether the registry holds the manifest `digest`, exactly `size` bytes long.
    pub async fn manifest_matches(&self, digest: &str, size: u64) -> Result<bool> {
        Ok(match self.get_manifest(digest).await? {
            Some((bytes, _)) => {
                format!("sha256:{}", sha256_hex(&bytes)) == digest && bytes.len() as u64 == size
            }
            None => false,
        })
    }

    /// PUTs a manifest under `reference` (a digest or a tag); returns the digest the
    /// registry computed.
    pub async fn put_manifest(
        &self,
        reference: &str,
        media_type: &str,
        bytes: &[u8],
    ) -> Result<String> {
        let url = self.target.url(&format!("manifests/{reference}"));
        let body = Bytes::copy_from_slice(bytes);
        let response = self
            .send(&url, |http| {
                Ok(http
                    .put(url.clone())
                    .header(header::CONTENT_TYPE, media_type)
                    .body(body.clone()))
            })
            .await?;
        let response = self
            .expect_ok(&format!("push manifest {reference}"), &url, response)
            .await?;
        let ours = format!("sha256:{}", sha256_hex(bytes));
        let theirs = response
            .headers()
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
            .unwrap_or_else(|| ours.clone());
        if theirs != ours {
            bail!("{url} stored the manifest as {theirs}, but its bytes are {ours}");
        }
        Ok(theirs)
    }
}

/// How a blob got into the repository.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BlobPush {
    /// Mounted from another repository of the registry: nothing was uploaded.
    Mounted,
    Uploaded,
}

// ---------------------------------------------------------------------------------------------
// From `docker save` output to blobs and an OCI manifest.

/// A content-addressed blob on local disk, ready to upload.
#[derive(Debug, Clone)]
pub struct Blob {
    pub digest: String,
    pub size: u64,
    pub media_type: String,
    pub path: PathBuf,
}

/// An image made ready for the registry from its `docker save` archive.
#[derive(Debug)]
pub struct PreparedImage {
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
    pub fn size(&self) -> u64 {
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
        digest: format!("sha256:{}", sha256_hex(bytes)),
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
pub fn prepare_from_archive(archive: impl Read, dir: &Path) -> Result<PreparedImage> {
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
        manifest_digest: format!("sha256:{}", sha256_hex(&manifest)),
        manifest,
        config,
        layers,
        os: platform.os,
        architecture: platform.architecture,
        variant: platform.variant,
    })
}

/// Adapts the engine's export stream to the blocking tar reader.
struct ChannelReader {
    rx: tokio::sync::mpsc::Receiver<io::Result<Bytes>>,
    current: Bytes,
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.current.is_empty() {
            match self.rx.blocking_recv() {
                None => return Ok(0),
                Some(chunk) => self.current = chunk?,
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current.split_to(n));
        Ok(n)
    }
}

// ---------------------------------------------------------------------------------------------
// The command.

/// What to publish; `run` makes it from the flags, `release` may build it directly.
#[derive(Debug, Clone)]
pub struct PublishOptions {
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
    pub dry_run: bool,
}

async fn push_image(
    docker: &bollard::Docker,
    client: &RegistryClient,
    platform: Platform,
    image: &str,
    dry_run: bool,
    progress: &Progress,
) -> Result<PushedImage> {
    let inspect = docker.inspect_image(image).await.with_context(|| {
        format!("image `{image}` for {platform} is not in the local engine; build it first")
    })?;
    let image_id = inspect
        .id
        .clone()
        .with_context(|| format!("the engine reports no id for `{image}`"))?;
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
    let cache = push_cache_path(&client.target, &image_id);
    if let Some(cached) = read_push_cache(&cache) {
        if cached.platform == platform
            && client
                .manifest_matches(&cached.digest, cached.manifest_size)
                .await?
        {
            progress.step(format!(
                "{platform}: {image} is already in the registry as {}",
                cached.reference
            ));
            return Ok(PushedImage {
                image: image.to_string(),
                uploaded_bytes: 0,
                ..cached
            });
        }
    }

    progress.step(format!(
        "{platform}: exporting {image} and compressing its layers"
    ));
    let dir = tempfile::Builder::new()
        .prefix("xtask-publish-")
        .tempdir()
        .context("cannot create a temporary directory for the image's blobs")?;
    let (tx, rx) = tokio::sync::mpsc::channel::<io::Result<Bytes>>(64);
    let forward = {
        let mut stream = Box::pin(docker.export_image(&image_id));
        async move {
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(io::Error::other);
                let failed = chunk.is_err();
                if tx.send(chunk).await.is_err() || failed {
                    break;
                }
            }
        }
    };
    let dir_path = dir.path().to_path_buf();
    let prepare = tokio::task::spawn_blocking(move || {
        prepare_from_archive(
            ChannelReader {
                rx,
                current: Bytes::new(),
            },
            &dir_path,
        )
    });
    let ((), prepared) = tokio::join!(forward, prepare);
    let prepared = prepared
        .context("the export task panicked")?
        .with_context(|| format!("cannot read the export of `{image}` from the engine"))?;
    if prepared.os != "linux" || prepared.architecture != platform.arch() {
        bail!(
            "the config of `{image}` says {}/{}, not {platform}",
            prepared.os,
            prepared.architecture
        );
    }

    let mut uploaded = 0;
    let locations_path = BlobLocations::path(&repo_root(), &client.target.host);
    let mut locations = BlobLocations::load(&locations_path);
    let repository = client.target.repository.as_str();
    for blob in std::iter::once(&prepared.config).chain(&prepared.layers) {
        if client.blob_exists(&blob.digest).await? {
            progress.step(format!(
                "{platform}: {} is already in the registry",
                blob.digest
            ));
            locations.record(&blob.digest, repository);
            continue;
        }
        let mount_from = locations.mount_source(&blob.digest, repository);
        if dry_run {
            progress.step(format!(
                "{platform}: would upload {} ({} bytes)",
                blob.digest, blob.size
            ));
            uploaded += blob.size;
            continue;
        }
        progress.step(format!(
            "{platform}: uploading {} ({} bytes){}",
            blob.digest,
            blob.size,
            mount_from.map_or(String::new(), |s| format!(", or mounting it from {s}"))
        ));
        match client.upload_blob(blob, mount_from).await? {
            BlobPush::Mounted => progress.step(format!(
                "{platform}: mounted {} from {}",
                blob.digest,
                mount_from.unwrap_or_default()
            )),
            BlobPush::Uploaded => uploaded += blob.size,
        }
        locations.record(&blob.digest, repository);
    }
    if !dry_run {
        locations.save(&locations_path);
    }
    if !dry_run {
        client
            .put_manifest(&prepared.manifest_digest, OCI_MANIFEST, &prepared.manifest)
            .await?;
        progress.step(format!(
            "{platform}: pushed {}",
            client.target.reference(&prepared.manifest_digest)
        ));
    }
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
        reference: client.target.reference(&prepared.manifest_digest),
        uploaded_bytes: uploaded,
    };
    if !dry_run {
        // Best effort: a missing cache only costs the next run an export.
        if let Ok(bytes) = serde_json::to_vec_pretty(&pushed) {
            let _ = crate::util::atomic_write(&cache, &bytes);
        }
    }
    Ok(pushed)
}

/// Where the record of pushing `image_id` to `target` is kept between runs.
fn push_cache_path(target: &RegistryTarget, image_id: &str) -> PathBuf {
    let key = sha256_hex(format!("{}\n{}\n{image_id}", target.host, target.repository).as_bytes());
    repo_root()
        .join("target/xtask/pushed")
        .join(format!("{key}.json"))
}

fn read_push_cache(path: &Path) -> Option<PushedImage> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// The whole publish: push the local images, then (with a tag) the index.
pub async fn publish(options: &PublishOptions, progress: &Progress) -> Result<PublishReport> {
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

    let client = RegistryClient::new(target.clone(), credentials_for(&target.host).await?)?;
    client.ping().await?;

    let mut pushed = Vec::new();
    if !options.images.is_empty() {
        let docker = crate::image::engine::connect().await?;
        for (platform, image) in &options.images {
            pushed.push(
                push_image(
                    &docker,
                    &client,
                    *platform,
                    image,
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
            let digest = format!("sha256:{}", sha256_hex(&bytes));
            let existing = client.get_manifest(tag).await?;
            let noop = match existing {
                Some((current, _)) => {
                    let current_digest = format!("sha256:{}", sha256_hex(&current));
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
                    client.put_manifest(&digest, OCI_INDEX, &bytes).await?;
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
                    client.put_manifest(tag, OCI_INDEX, &bytes).await?;
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

pub async fn run(args: PublishArgs) -> Result<ExitCode> {
    if args.images.is_empty() && args.pushed.is_empty() {
        bail!("nothing to publish: give --image PLATFORM=REF and/or --pushed FILE");
    }
    let images = args
        .images
        .iter()
        .map(|f| parse_image_flag(f))
        .collect::<Result<Vec<_>>>()?;
    let mut pushed = Vec::new();
    for file in &args.pushed {
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
    let required_platforms = if args.partial {
        Vec::new()
    } else {
        Manifest::load(&repo_root().join(MANIFEST_PATH))?.platforms
    };
    let options = PublishOptions {
        registry: args.target.oci_registry,
        repository: args.target.repository,
        images,
        pushed,
        tag: args.tag,
        required_platforms,
        dry_run: args.dry_run,
        defer_tag: args.defer_tag,
    };
    let progress = Progress::default();
    let report = publish(&options, &progress).await?;
    if args.json {
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
    fn targets() {
        let t = RegistryTarget::parse("127.0.0.1:5000", "sandbox0/coding-agent").unwrap();
        assert_eq!(t.base.as_str(), "http://127.0.0.1:5000/");
        assert_eq!(
            t.url("manifests/x").as_str(),
            "http://127.0.0.1:5000/v2/sandbox0/coding-agent/manifests/x"
        );
        assert_eq!(
            t.reference("sha256:ab"),
            "127.0.0.1:5000/sandbox0/coding-agent@sha256:ab"
        );
        let t = RegistryTarget::parse("ghcr.io", "a/b").unwrap();
        assert_eq!(t.base.as_str(), "https://ghcr.io/");
        let t = RegistryTarget::parse("http://reg.lan:5000", "a").unwrap();
        assert_eq!(t.host, "reg.lan:5000");
        assert!(RegistryTarget::parse("ghcr.io", "Upper/case").is_err());
        assert!(RegistryTarget::parse("ghcr.io", "a//b").is_err());
        assert!(RegistryTarget::parse("ghcr.io/x", "a").is_err());
    }

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
        let diff_id = format!("sha256:{}", sha256_hex(&layer));
        let config = format!(
            r#"{{"architecture":"{arch}","os":"linux","config":{{}},"rootfs":{{"type":"layers","diff_ids":["{diff_id}","{diff_id}"]}}}}"#
        );
        let config_name = format!("{}.json", sha256_hex(config.as_bytes()));
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
        assert_eq!(format!("sha256:{}", sha256_hex(&bytes)), a.layers[0].digest);
        assert_eq!(&bytes[..2], &[0x1f, 0x8b]);
        let manifest: serde_json::Value = serde_json::from_slice(&a.manifest).unwrap();
        assert_eq!(manifest["mediaType"], OCI_MANIFEST);
        assert_eq!(manifest["config"]["digest"], a.config.digest.as_str());
        let c = prepare_from_archive(archive(b"two", "arm64").as_slice(), dir2.path()).unwrap();
        assert_ne!(a.manifest_digest, c.manifest_digest);
        assert!(prepare_from_archive(&archive(b"x", "arm64")[..700], dir.path()).is_err());
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
