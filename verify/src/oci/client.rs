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

    /// Whether the repository holds the blob `digest`, as a push asks before uploading it
    /// (HEAD; [`presence_of`] reads the answer).
    pub async fn blob_presence(&self, digest: &str) -> Result<Presence> {
        let url = self.target.url(&format!("blobs/{digest}"));
        let response = self.send(&url, |http| Ok(http.head(url.clone()))).await?;
        presence_of(response.status())
            .with_context(|| format!("HEAD {url} answered {}", response.status()))
    }

    /// The retry policy of this client's requests (for the publisher's own retries of writes).
    pub fn retry(&self) -> Retry {
        self.retry
    }

    /// GET a blob: the successful response, whose body streams (registries redirect blob
    /// reads to storage; reqwest follows).
    pub async fn get_blob(&self, digest: &str) -> Result<Response> {
        let url = self.target.url(&format!("blobs/{digest}"));
        let response = self.send(&url, |http| Ok(http.get(url.clone()))).await?;
        self.expect_ok(&format!("read blob {digest}"), &url, response)
            .await
    }

    /// GET a manifest by tag or digest: the response as it came, and its URL.
    async fn manifest_get(&self, reference: &str) -> Result<(Response, Url)> {
        let url = self.target.url(&format!("manifests/{reference}"));
        let response = self
            .send(&url, |http| {
                Ok(http
                    .get(url.clone())
                    .header(header::ACCEPT, MANIFEST_ACCEPT))
            })
            .await?;
        Ok((response, url))
    }

    /// GET a manifest by tag or digest: the successful response, `None` when absent.
    async fn manifest_response(&self, reference: &str) -> Result<Option<(Response, Url)>> {
        let (response, url) = self.manifest_get(reference).await?;
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

    /// Like [`Self::manifest_matches`], for a push deciding whether to push the manifest
    /// again: a registry that will not say ([`Presence::Unreadable`]) is no error here, the
    /// push's own PUT decides.
    pub async fn manifest_presence(&self, digest: &str, size: u64) -> Result<Presence> {
        let (response, url) = self.manifest_get(digest).await?;
        match presence_of(response.status()) {
            Some(Presence::Present) => {}
            Some(other) => return Ok(other),
            None => {
                let status = response.status();
                self.expect_ok(&format!("read manifest {digest}"), &url, response)
                    .await?;
                bail!("GET {url} answered {status}, not the manifest");
            }
        }
        let bytes = read_bounded(response, &url, "manifest", MANIFEST_LIMIT).await?;
        Ok(
            if Digest::of(&bytes).as_str() == digest && bytes.len() as u64 == size {
                Presence::Present
            } else {
                Presence::Absent
            },
        )
    }
}

/// A push's own manifests are small; a larger answer is not one of them.
const MANIFEST_LIMIT: usize = 4 << 20;

/// What a registry says about a blob or manifest a push is about to write.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Presence {
    /// 200: it is there; nothing to upload.
    Present,
    /// 404 (the distribution spec's answer for a blob or manifest, or a repository, that
    /// does not exist: opencontainers/distribution-spec@967efdc079b91785ad18c77cc4f8991a47feefbf
    /// spec.md, "Checking if content exists in the registry" and end-2/end-3).
    Absent,
    /// 403: the registry will not say. ghcr.io answers reads of a package that does not
    /// exist yet with 403 `DENIED` "permission_denied: read_package" (reported on a first
    /// push in run-ai/fake-gpu-operator#244; the same body for an unreadable package in
    /// RightNow-AI/openfang#12; a HEAD of a blob answered 403 on a first push in
    /// ryokun6/ryos#1156 and docker/build-push-action#981). A push uploads it: a token
    /// that may push gets it in (and creates the package), one that may not is refused by
    /// the upload, whose error names the remedy. containerd's pusher stops on a 403 here
    /// (core/remotes/docker/pusher.go, "unexpected status"), which is the failure those
    /// reports show.
    Unreadable,
}

/// The answer to a HEAD or GET of a blob or manifest a push may write, read as a push
/// reads it; `None` for any other status (an error). A 401 never gets here: `send` answers
/// the challenge, and one that outlives a fresh token is the credentials' refusal, which
/// an upload would meet too.
pub fn presence_of(status: StatusCode) -> Option<Presence> {
    match status {
        StatusCode::OK => Some(Presence::Present),
        StatusCode::NOT_FOUND => Some(Presence::Absent),
        StatusCode::FORBIDDEN => Some(Presence::Unreadable),
        _ => None,
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

    #[test]
    fn a_push_reads_403_as_a_registry_that_will_not_say() {
        assert_eq!(presence_of(StatusCode::OK), Some(Presence::Present));
        assert_eq!(presence_of(StatusCode::NOT_FOUND), Some(Presence::Absent));
        assert_eq!(
            presence_of(StatusCode::FORBIDDEN),
            Some(Presence::Unreadable)
        );
        for other in [
            StatusCode::UNAUTHORIZED,
            StatusCode::BAD_REQUEST,
            StatusCode::NO_CONTENT,
            StatusCode::INTERNAL_SERVER_ERROR,
        ] {
            assert_eq!(presence_of(other), None, "{other}");
        }
    }
}
