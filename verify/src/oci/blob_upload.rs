//! What a multi-GB layer upload needs besides HTTP: a request body streamed from the blob
//! file on disk (memory stays bounded by the chunk size, whatever the layer's size), progress
//! lines on stderr that CI logs can hold (one line per update, at most every few seconds:
//! bytes pushed of total and MB/s; compressing the layer beforehand reports the same way), and a record of which repository of a registry already
//! holds a blob, so pushing to a second repository mounts it instead of uploading it again.
//!
//! Formatting, throttling and the location lookup are pure and unit-tested; the file reads
//! and the record's file are the IO edges.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use futures_util::StreamExt;

/// Bytes read from disk per body chunk: the memory one upload holds.
const CHUNK: usize = 1 << 20;

/// `sha256:0123456789ab: 512.0 MB of 2048.0 MB (25%), 85.3 MB/s`
pub fn progress_line(label: &str, sent: u64, total: u64, elapsed: Duration) -> String {
    let percent = sent.saturating_mul(100).checked_div(total).unwrap_or(100);
    let rate = sent as f64 / 1e6 / elapsed.as_secs_f64().max(0.001);
    format!(
        "{label}: {} of {} ({percent}%), {rate:.1} MB/s",
        human_size(sent),
        human_size(total)
    )
}

/// `189 B`, `12.3 kB`, `1573.1 MB` (decimal units, as registries and `docker push` print).
pub fn human_size(bytes: u64) -> String {
    match bytes {
        0..1_000 => format!("{bytes} B"),
        1_000..1_000_000 => format!("{:.1} kB", bytes as f64 / 1e3),
        _ => format!("{:.1} MB", bytes as f64 / 1e6),
    }
}

/// A progress line is due when `interval` passed since the last one.
pub fn line_due(last: Instant, now: Instant, interval: Duration) -> bool {
    now.saturating_duration_since(last) >= interval
}

/// The running count of one long transfer (a blob upload, a layer's compression), printed
/// to stderr at most every interval.
pub struct TransferProgress {
    label: String,
    total: u64,
    sent: AtomicU64,
    start: Instant,
    last_line: Mutex<Instant>,
    interval: Duration,
}

impl TransferProgress {
    /// `interval`: the least time between two lines
    /// (`settings::TransferSettings::progress_interval`).
    pub fn new(label: &str, total: u64, interval: Duration) -> Arc<TransferProgress> {
        let now = Instant::now();
        Arc::new(TransferProgress {
            label: label.to_string(),
            total,
            sent: AtomicU64::new(0),
            start: now,
            last_line: Mutex::new(now),
            interval,
        })
    }

    /// A new attempt sends the blob from its start again.
    pub fn restart(&self) {
        self.sent.store(0, Ordering::Relaxed);
    }

    pub fn add(&self, bytes: u64) {
        let sent = self.sent.fetch_add(bytes, Ordering::Relaxed) + bytes;
        let now = Instant::now();
        let mut last = self.last_line.lock().expect("progress lock");
        if line_due(*last, now, self.interval) {
            *last = now;
            eprintln!(
                "{}",
                progress_line(&self.label, sent, self.total, self.start.elapsed())
            );
        }
    }

    pub fn summary(&self) -> String {
        progress_line(
            &self.label,
            self.sent.load(Ordering::Relaxed),
            self.total,
            self.start.elapsed(),
        )
    }
}

/// The blob at `path` as a streamed request body: read in [`CHUNK`]s as the connection takes
/// them, counted into `progress`.
pub fn file_body(path: &Path, progress: Arc<TransferProgress>) -> Result<reqwest::Body> {
    Ok(reqwest::Body::wrap_stream(file_chunks(path, progress)?))
}

/// Called after each chunk of a blob body is read, before the registry has the whole blob:
/// the xtask's crash-consistency test kills the tool there (its `kill_point.rs`). Unset in
/// the consumer's verifier, which uploads nothing.
static CHUNK_HOOK: std::sync::OnceLock<fn()> = std::sync::OnceLock::new();

/// Sets the hook called after each chunk of an upload (once per process; later calls are
/// ignored).
pub fn set_chunk_hook(hook: fn()) {
    let _ = CHUNK_HOOK.set(hook);
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
                    // Mid-upload: a chunk is read, the registry has not got the whole blob.
                    if let Some(hook) = CHUNK_HOOK.get() {
                        hook();
                    }
                }
            }),
    )
}

/// A reader that counts what is read from it into a [`TransferProgress`].
pub struct CountingReader<'a, R> {
    pub inner: R,
    pub progress: &'a TransferProgress,
}

impl<R: std::io::Read> std::io::Read for CountingReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.add(n as u64);
        Ok(n)
    }
}

/// Which repository of one registry holds which blob, as far as this machine pushed or saw
/// them: `digest -> repository`.
#[derive(Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BlobLocations {
    pub blobs: BTreeMap<String, String>,
}

impl BlobLocations {
    /// A repository other than `repository` known to hold `digest`: a mount source.
    pub fn mount_source(&self, digest: &str, repository: &str) -> Option<&str> {
        self.blobs
            .get(digest)
            .map(String::as_str)
            .filter(|source| *source != repository)
    }

    pub fn record(&mut self, digest: &str, repository: &str) {
        self.blobs
            .insert(digest.to_string(), repository.to_string());
    }

    /// One file per registry host in `dir` (the caller's state directory).
    pub fn path(dir: &Path, host: &str) -> PathBuf {
        dir.join(format!(
            "{}.json",
            template_formats::model::Digest::of(host.as_bytes()).hex()
        ))
    }

    /// Best effort: a missing or unreadable record only costs uploads.
    pub fn load(path: &Path) -> BlobLocations {
        std::fs::read(path)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default()
    }

    /// Best effort, like `load`. Written to a temporary file and renamed, so a concurrent
    /// reader never sees half a record.
    pub fn save(&self, path: &Path) {
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
    fn progress_lines() {
        assert_eq!(
            progress_line(
                "sha256:abc",
                512_000_000,
                2_048_000_000,
                Duration::from_secs(4)
            ),
            "sha256:abc: 512.0 MB of 2048.0 MB (25%), 128.0 MB/s"
        );
        assert_eq!(
            progress_line("x", 0, 0, Duration::ZERO),
            "x: 0 B of 0 B (100%), 0.0 MB/s"
        );
        assert_eq!(
            progress_line("cfg", 189, 12_345, Duration::from_secs(1)),
            "cfg: 189 B of 12.3 kB (1%), 0.0 MB/s"
        );
        let t = Instant::now();
        assert!(!line_due(
            t,
            t + Duration::from_secs(4),
            Duration::from_secs(5)
        ));
        assert!(line_due(
            t,
            t + Duration::from_secs(5),
            Duration::from_secs(5)
        ));
        assert!(!line_due(
            t + Duration::from_secs(1),
            t,
            Duration::from_secs(5)
        ));
    }

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
    fn counting_readers_count_what_passes() {
        let data = vec![7u8; 10_000];
        let progress = TransferProgress::new("compress", data.len() as u64, Duration::from_secs(5));
        let mut out = Vec::new();
        std::io::copy(
            &mut CountingReader {
                inner: data.as_slice(),
                progress: &progress,
            },
            &mut out,
        )
        .unwrap();
        assert_eq!(out, data);
        assert!(
            progress
                .summary()
                .starts_with("compress: 10.0 kB of 10.0 kB (100%)"),
            "{}",
            progress.summary()
        );
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
