//! The publisher's writes to a registry, over the verifier's client (which only reads): a
//! blob mounted from another repository of the registry or uploaded in one PUT whose body
//! streams from the blob file on disk (memory stays bounded by the chunk size, whatever the
//! layer's size), with progress lines on stderr that CI logs can hold; manifests PUT; and a
//! record of which repository of a registry already holds a blob, so pushing to a second
//! repository mounts it instead of uploading it again. Only the xtask links this: the
//! consumer's verifier uploads nothing.
//!
//! The location lookup is pure and unit-tested; the requests, the file reads and the record's
//! file are the IO edges.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use futures_util::StreamExt;
use reqwest::{header, Method, StatusCode};

use crate::oci::stream::TransferProgress;
use template_formats::model::Digest;
use template_verify::http::Attempt;
use template_verify::oci::client::RegistryClient;

/// Bytes read from disk per body chunk: the memory one upload holds.
const CHUNK: usize = 1 << 20;

/// A content-addressed blob on local disk, ready to upload.
#[derive(Debug, Clone)]
pub(crate) struct Blob {
    pub(crate) digest: String,
    pub(crate) size: u64,
    pub(crate) media_type: String,
    pub(crate) path: PathBuf,
    /// `oci::reuse::COMPRESSOR` when it compressed the layer (its manifest
    /// descriptor then says so); `None` for a config and a layer kept as the export gave it.
    pub(crate) compressor: Option<&'static str>,
}

/// How a blob got into the repository.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum BlobPush {
    /// Mounted from another repository of the registry: nothing was uploaded.
    Mounted,
    Uploaded,
}

/// Gets `blob` into the repository: mounted from `mount_from` (another repository of
/// this registry that holds it) when the registry agrees, else uploaded in one PUT whose
/// body streams from the file on disk. A failed upload session is abandoned and a new one
/// started, a bounded number of times (5xx inside a session are retried by `send`).
pub(crate) async fn upload_blob(
    client: &RegistryClient,
    blob: &Blob,
    mount_from: Option<&str>,
    progress_interval: Duration,
) -> Result<BlobPush> {
    const SESSIONS: u32 = 3;
    let progress = TransferProgress::new(
        &format!("upload {}", blob.digest),
        blob.size,
        progress_interval,
    );
    let mut session = 0;
    let mut mount_from = mount_from;
    loop {
        session += 1;
        let mut start = client.target.url("blobs/uploads/");
        let response = match mount_from {
            Some(source) => {
                client.want_pull_from(source).await;
                start
                    .query_pairs_mut()
                    .append_pair("mount", &blob.digest)
                    .append_pair("from", source);
                // One attempt: a refused mount is no race, and a plain upload follows it.
                let response = client
                    .send(&start, |http| {
                        Ok(http.post(start.clone()).header(header::CONTENT_LENGTH, "0"))
                    })
                    .await?;
                match response.status() {
                    StatusCode::CREATED => return Ok(BlobPush::Mounted),
                    StatusCode::FORBIDDEN => {
                        eprintln!(
                            "upload {}: {start} answered 403 to the mount from {source} \
                             ({MOUNT_REFUSED}); uploading it instead",
                            blob.digest
                        );
                        mount_from = None;
                        session -= 1;
                        continue;
                    }
                    _ => response,
                }
            }
            None => {
                send_write(client, &start, |http| {
                    Ok(http.post(start.clone()).header(header::CONTENT_LENGTH, "0"))
                })
                .await?
            }
        };
        let response = client
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
        let response = client
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
        client
            .expect_ok(&format!("upload blob {}", blob.digest), &put, response)
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
pub(crate) async fn mount_blob(
    client: &RegistryClient,
    digest: &str,
    source: &str,
) -> Result<bool> {
    client.want_pull_from(source).await;
    let mut start = client.target.url("blobs/uploads/");
    start
        .query_pairs_mut()
        .append_pair("mount", digest)
        .append_pair("from", source);
    let response = client
        .send(&start, |http| {
            Ok(http.post(start.clone()).header(header::CONTENT_LENGTH, "0"))
        })
        .await?;
    if response.status() == StatusCode::CREATED {
        return Ok(true);
    }
    if response.status() == StatusCode::FORBIDDEN {
        eprintln!(
            "mount {digest}: {start} answered 403 to the mount from {source} ({MOUNT_REFUSED}); \
             the layer is compressed and uploaded instead"
        );
        return Ok(false);
    }
    let response = client
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
        let _ = client
            .send(&session, |http| Ok(http.delete(session.clone())))
            .await;
    }
    Ok(false)
}

/// PUTs a manifest under `reference` (a digest or a tag); returns the digest the
/// registry computed.
pub(crate) async fn put_manifest(
    client: &RegistryClient,
    reference: &str,
    media_type: &str,
    bytes: &[u8],
) -> Result<String> {
    let url = client.target.url(&format!("manifests/{reference}"));
    let body = Bytes::copy_from_slice(bytes);
    let response = send_write(client, &url, |http| {
        Ok(http
            .put(url.clone())
            .header(header::CONTENT_TYPE, media_type)
            .body(body.clone()))
    })
    .await?;
    let response = client
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

/// Why a 403 to a mount is not the end of a push: some registries refuse a mount whose
/// source repository the account may not read with 403 where distribution starts a plain
/// upload session (202), and a plain upload of the same blob then succeeds
/// (containerd/containerd#14086; go-containerregistry retries without the mount,
/// google/go-containerregistry#1404).
const MOUNT_REFUSED: &str = "the source may not be readable to this account";

/// Whether a write's answer may be a race with another push creating the repository, which
/// a later attempt may not meet: 403, which ghcr.io answered a manifest PUT while another
/// push of the same package ran and not when the same PUT was sent again
/// (goreleaser/goreleaser#1977: `failed to put manifest ...: denied`), and 409, GitHub
/// Packages' answer to a write that raced another (whoz-oss/coday#989). Two matrix legs
/// push to one package at once, and on the first release neither has created it yet.
pub(crate) fn may_race_creation(status: StatusCode) -> bool {
    status == StatusCode::FORBIDDEN || status == StatusCode::CONFLICT
}

/// Sends a write (an upload's start, a manifest PUT) through `send`, and sends it again a
/// bounded number of times (the client's retry policy, with its backoff) while the answer
/// [`may_race_creation`]. The last answer is returned as it is: a refusal that persists is
/// the account's, and the caller reports it with its remedy.
async fn send_write(
    client: &RegistryClient,
    url: &reqwest::Url,
    make: impl Fn(&reqwest::Client) -> Result<reqwest::RequestBuilder>,
) -> Result<reqwest::Response> {
    let make = &make;
    client
        .retry()
        .run(url.as_str(), |last| async move {
            let response = client.send(url, make).await?;
            let status = response.status();
            if may_race_creation(status) && !last {
                return Ok(Attempt::Retry {
                    error: anyhow::anyhow!(
                        "{url} answered {status} (another push may be creating the repository \
                         this moment)"
                    ),
                    after: None,
                });
            }
            Ok(Attempt::Done(response))
        })
        .await
}

/// The blob at `path` as a streamed request body: read in [`CHUNK`]s as the connection takes
/// them, counted into `progress`.
fn file_body(path: &Path, progress: Arc<TransferProgress>) -> Result<reqwest::Body> {
    Ok(reqwest::Body::wrap_stream(file_chunks(path, progress)?))
}

fn file_chunks(
    path: &Path,
    progress: Arc<TransferProgress>,
) -> Result<impl futures_util::Stream<Item = std::io::Result<bytes::Bytes>>> {
    let file = std::fs::File::open(path)
        .with_context(|| format!("cannot open blob {}", path.display()))?;
    progress.restart();
    Ok(
        tokio_util::io::ReaderStream::with_capacity(tokio::fs::File::from_std(file), CHUNK)
            .inspect(move |chunk| {
                if let Ok(bytes) = chunk {
                    progress.add(bytes.len() as u64);
                    // Mid-upload: a chunk is read, the registry has not got the whole blob
                    // (`kill_point.rs`, for the crash-consistency test).
                    crate::kill_point::reached("publish:blob-body");
                }
            }),
    )
}

/// Which repository of one registry holds which blob, as far as this machine pushed or saw
/// them: `digest -> repository`.
#[derive(Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct BlobLocations {
    pub(crate) blobs: BTreeMap<String, String>,
}

impl BlobLocations {
    /// A repository other than `repository` known to hold `digest`: a mount source.
    pub(crate) fn mount_source(&self, digest: &str, repository: &str) -> Option<&str> {
        self.blobs
            .get(digest)
            .map(String::as_str)
            .filter(|source| *source != repository)
    }

    pub(crate) fn record(&mut self, digest: &str, repository: &str) {
        self.blobs
            .insert(digest.to_string(), repository.to_string());
    }

    /// One file per registry host in `dir` (the caller's state directory).
    pub(crate) fn path(dir: &Path, host: &str) -> PathBuf {
        dir.join(format!(
            "{}.json",
            template_formats::model::Digest::of(host.as_bytes()).hex()
        ))
    }

    /// Best effort: a missing or unreadable record only costs uploads.
    pub(crate) fn load(path: &Path) -> BlobLocations {
        std::fs::read(path)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default()
    }

    /// Best effort, like `load`. Written to a temporary file and renamed, so a concurrent
    /// reader never sees half a record.
    pub(crate) fn save(&self, path: &Path) {
        let Some(dir) = path.parent() else { return };
        let write = || -> std::io::Result<()> {
            std::fs::create_dir_all(dir)?;
            let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
            serde_json::to_writer_pretty(&mut tmp, self)?;
            tmp.persist(path)?;
            Ok(())
        };
        let _ = write();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_sources_are_other_repositories() {
        let mut locations = BlobLocations::default();
        locations.record("sha256:a", "team/base");
        assert_eq!(
            locations.mount_source("sha256:a", "team/app"),
            Some("team/base")
        );
        assert_eq!(locations.mount_source("sha256:a", "team/base"), None);
        assert_eq!(locations.mount_source("sha256:b", "team/app"), None);
        let dir = tempfile::tempdir().unwrap();
        let path = BlobLocations::path(dir.path(), "ghcr.io");
        locations.save(&path);
        assert_eq!(BlobLocations::load(&path), locations);
        assert_eq!(
            BlobLocations::load(&dir.path().join("none")),
            BlobLocations::default()
        );
    }

    #[test]
    fn only_refusals_a_racing_push_may_cause_are_sent_again() {
        assert!(may_race_creation(StatusCode::FORBIDDEN));
        assert!(may_race_creation(StatusCode::CONFLICT));
        for status in [
            StatusCode::UNAUTHORIZED,
            StatusCode::NOT_FOUND,
            StatusCode::BAD_REQUEST,
            StatusCode::CREATED,
            StatusCode::ACCEPTED,
        ] {
            assert!(!may_race_creation(status), "{status}");
        }
    }

    #[tokio::test]
    async fn file_bodies_stream_and_count() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("blob");
        let data: Vec<u8> = (0..3 * CHUNK + 7).map(|i| i as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let progress = TransferProgress::new("blob", data.len() as u64, Duration::from_secs(5));
        let mut stream = Box::pin(file_chunks(&path, progress.clone()).unwrap());
        let mut got = Vec::new();
        let mut chunks = 0;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.unwrap();
            assert!(chunk.len() <= CHUNK);
            got.extend_from_slice(&chunk);
            chunks += 1;
        }
        assert_eq!(got, data);
        assert!(chunks >= 4);
        assert!(
            progress.summary().contains("(100%)"),
            "{}",
            progress.summary()
        );
    }
}
