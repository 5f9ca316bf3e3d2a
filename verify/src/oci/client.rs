//! The registry client: the distribution HTTP API v2 for one repository (blob HEAD and GET,
//! manifest GET, bounded reads for registries an untrusted document names), authenticated
//! through `auth.rs`, with the tool's HTTP policy (`crate::http`) for timeouts and retries.
//! What only a publisher does (blob mounts and streamed uploads, manifest PUTs) is the
//! xtask's (`xtask/src/oci/blob_upload.rs`), over [`RegistryClient::send`]: the consumer's
//! verifier links no upload code.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use reqwest::{header, RequestBuilder, Response, StatusCode, Url};

use crate::http::{self, Attempt, Retry, Timeout};
use crate::oci::auth::{redact, Authenticator};
use crate::oci::credentials::Credentials;
use crate::settings::TransferSettings;
use template_formats::model::Digest;
use template_formats::oci::index::MANIFEST_ACCEPT;

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

    pub fn url(&self, rest: &str) -> Url {
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
}

impl RegistryClient {
    /// `transfer`: the retries' backoff, from the environment's snapshot.
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
        })
    }

    /// Sends a request made by `make` (called again for each attempt), answering auth
    /// challenges (a bounded number: expired tokens are renewed, refusals reported) and
    /// retrying what the HTTP policy calls transient ([`http::retryable_status`],
    /// [`http::retryable_error`]). The last attempt's answer is returned as it is, so the
    /// caller reports the registry's own words. Public for the requests this client does not
    /// make itself (the publisher's uploads, in the xtask).
    pub async fn send(
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

    /// `response` when it succeeded; else an error naming `what`, the URL, the status, what the
    /// account may lack, and the registry's answer with any secret of ours redacted.
    pub async fn expect_ok(&self, what: &str, url: &Url, response: Response) -> Result<Response> {
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

    /// Makes the next token also grant `pull` on `source`, another repository of this
    /// registry (for a cross-repository mount).
    pub async fn want_pull_from(&self, source: &str) {
        self.auth.want_pull_from(source).await;
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
