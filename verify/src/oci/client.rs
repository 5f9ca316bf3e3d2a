//! The registry client: the distribution HTTP API v2 (blob HEAD, mount and streamed upload,
//! manifest GET and PUT) for one repository, authenticated through `auth.rs`, with the tool's
//! HTTP policy (`crate::http`) for timeouts and retries.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use reqwest::{header, Method, RequestBuilder, Response, StatusCode, Url};

use crate::http::{self, Attempt, Retry, Timeout};
use crate::oci::auth::{redact, Authenticator};
use crate::oci::blob_upload::{file_body, TransferProgress};
use crate::oci::credentials::Credentials;
use crate::settings::TransferSettings;
use template_formats::model::Digest;
use template_formats::oci::index::MANIFEST_ACCEPT;

/// A content-addressed blob on local disk, ready to upload.
#[derive(Debug, Clone)]
pub struct Blob {
    pub digest: String,
    pub size: u64,
    pub media_type: String,
    pub path: PathBuf,
    /// The xtask's `oci::reuse::COMPRESSOR` when it compressed the layer (its manifest
    /// descriptor then says so); `None` for a config and a layer kept as the export gave it.
    pub compressor: Option<&'static str>,
}

// ---------------------------------------------------------------------------------------------
// Where to push.

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
        } else if http::is_loopback_host(registry) {
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
    retry: Retry,
    progress_interval: Duration,
}

impl RegistryClient {
    /// `transfer`: the retries' backoff and the progress lines' interval, from the
    /// environment's snapshot.
    pub fn new(
        target: RegistryTarget,
        credentials: Option<Credentials>,
        transfer: &TransferSettings,
    ) -> Result<Self> {
        // Idle, not total: a multi-GB blob upload may take many minutes, and after it the
        // registry may take a while to verify the digest before it answers.
        let http = http::client(&target.host, Timeout::Idle(Duration::from_secs(300)))?;
        Ok(RegistryClient {
            auth: Authenticator::new(http.clone(), &target.host, &target.repository, credentials),
            http,
            target,
            retry: Retry::with_base(transfer.retry_base),
            progress_interval: transfer.progress_interval,
        })
    }

    /// Sends a request made by `make` (called again for each attempt), answering auth
    /// challenges (a bounded number: expired tokens are renewed, refusals reported) and
    /// retrying what the HTTP policy calls transient ([`http::retryable_status`],
    /// [`http::retryable_error`]). The last attempt's answer is returned as it is, so the
    /// caller reports the registry's own words.
    async fn send(
        &self,
        url: &Url,
        make: impl Fn(&reqwest::Client) -> Result<RequestBuilder>,
    ) -> Result<Response> {
        let auth_rounds = AtomicU32::new(0);
        let (make, auth_rounds) = (&make, &auth_rounds);
        self.retry
            .run(url.as_str(), |last| async move {
                loop {
                    let request = self.auth.authorize(make(&self.http)?).await?;
                    match request.send().await {
                        Ok(response) if response.status() == StatusCode::UNAUTHORIZED => {
                            let challenge = response
                                .headers()
                                .get(header::WWW_AUTHENTICATE)
                                .and_then(|h| h.to_str().ok())
                                .unwrap_or("")
                                .to_string();
                            let round = auth_rounds.fetch_add(1, Ordering::Relaxed);
                            self.auth.answer(url, &challenge, round).await?;
                        }
                        Ok(response) if http::retryable_status(response.status()) && !last => {
                            return Ok(Attempt::Retry {
                                error: anyhow!("{url} answered {}", response.status()),
                                after: http::retry_after(&response),
                            });
                        }
                        Ok(response) => return Ok(Attempt::Done(response)),
                        Err(e) if http::retryable_error(&e) && !last => {
                            return Ok(Attempt::Retry {
                                error: anyhow!(e).context(format!("request to {url} failed")),
                                after: None,
                            });
                        }
                        Err(e) if e.is_connect() => {
                            return Err(anyhow!(e)).with_context(|| {
                                format!(
                                    "cannot connect to the registry at {}; for the local \
                                     registry run `scripts/local-registry.sh start`",
                                    self.target.base
                                )
                            })
                        }
                        Err(e) => {
                            return Err(anyhow!(e))
                                .with_context(|| format!("request to {url} failed"))
                        }
                    }
                }
            })
            .await
    }

    async fn expect_ok(&self, what: &str, url: &Url, response: Response) -> Result<Response> {
        if response.status().is_success() {
            return Ok(response);
        }
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        let secrets = self.auth.secrets().await;
        let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
        let hint = if status == StatusCode::FORBIDDEN && what.starts_with("read ") {
            // A read-only check needs pull access, nothing more.
            format!(
                " (the registry denies this account read access: check that it may pull from \
                 {}, or that the image is public)",
                self.target.name()
            )
        } else if status == StatusCode::FORBIDDEN {
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
        let progress = TransferProgress::new(
            &format!("upload {}", blob.digest),
            blob.size,
            self.progress_interval,
        );
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

    /// Mounts the blob `digest` from `source`, another repository of this registry, without a
    /// body (distribution spec, "Mounting a blob from another repository"; distribution's
    /// `registry/handlers/blobupload.go` answers 201 Created when mounted and 202 Accepted
    /// with a new upload session when it cannot, e.g. the source lacks the blob or denies
    /// pull). Returns whether it was mounted; a session it started instead is cancelled.
    pub async fn mount_blob(&self, digest: &str, source: &str) -> Result<bool> {
        self.auth.want_pull_from(source).await;
        let mut start = self.target.url("blobs/uploads/");
        start
            .query_pairs_mut()
            .append_pair("mount", digest)
            .append_pair("from", source);
        let response = self
            .send(&start, |http| {
                Ok(http.post(start.clone()).header(header::CONTENT_LENGTH, "0"))
            })
            .await?;
        if response.status() == StatusCode::CREATED {
            return Ok(true);
        }
        let response = self
            .expect_ok(
                &format!("mount blob {digest} from {source}"),
                &start,
                response,
            )
            .await?;
        let session = response
            .headers()
            .get(header::LOCATION)
            .and_then(|l| l.to_str().ok())
            .and_then(|l| start.join(l).ok());
        if let Some(session) = session {
            // Best effort: an abandoned session expires on the registry's own schedule.
            let _ = self
                .send(&session, |http| Ok(http.delete(session.clone())))
                .await;
        }
        Ok(false)
    }

    /// GET a blob: the successful response, whose body streams (registries redirect blob
    /// reads to storage; reqwest follows).
    pub async fn get_blob(&self, digest: &str) -> Result<Response> {
        let url = self.target.url(&format!("blobs/{digest}"));
        let response = self.send(&url, |http| Ok(http.get(url.clone()))).await?;
        self.expect_ok(&format!("read blob {digest}"), &url, response)
            .await
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
        let Some((response, url)) = self.manifest_response(reference).await? else {
            return Ok(None);
        };
        read_bounded(response, &url, "manifest", limit)
            .await
            .map(Some)
    }

    /// A small blob (an image config) from a registry named by an untrusted document: at most
    /// `limit` bytes; `None` when absent.
    pub async fn get_blob_bounded(&self, digest: &str, limit: usize) -> Result<Option<Vec<u8>>> {
        let url = self.target.url(&format!("blobs/{digest}"));
        let response = self.send(&url, |http| Ok(http.get(url.clone()))).await?;
        if response.status() == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let response = self
            .expect_ok(&format!("read blob {digest}"), &url, response)
            .await?;
        read_bounded(response, &url, "blob", limit).await.map(Some)
    }

    /// Whether the registry holds the manifest `digest`, exactly `size` bytes long.
    pub async fn manifest_matches(&self, digest: &str, size: u64) -> Result<bool> {
        Ok(match self.get_manifest(digest).await? {
            Some((bytes, _)) => Digest::of(&bytes).as_str() == digest && bytes.len() as u64 == size,
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
        let ours = Digest::of(bytes).to_string();
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

/// A response body, at most `limit` bytes (with or without a Content-Length).
async fn read_bounded(
    mut response: Response,
    url: &Url,
    what: &str,
    limit: usize,
) -> Result<Vec<u8>> {
    let too_big = || anyhow!("{url}: the {what} is larger than {limit} bytes");
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
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
