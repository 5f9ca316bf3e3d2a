//! The byte streams a blob passes through on the publisher's side: what a stream's first
//! bytes say its compression is, readers and writers that hash and count what passes, and the
//! progress lines of a long transfer (a layer's compression, a blob's upload: one line per
//! update, at most every few seconds, bytes done of total and MB/s). Below the modules that
//! stream (`archive.rs`, `canonical.rs`, `read_back.rs`, `blob_upload.rs`), which share it.

use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest as _, Sha256};

/// How a layer blob is compressed, by its magic number (RFC 1952 gzip, RFC 8878 zstd frame).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Compression {
    None,
    Gzip,
    Zstd,
}

impl Compression {
    pub(crate) fn of(head: &[u8]) -> Compression {
        if head.starts_with(&[0x1f, 0x8b]) {
            Compression::Gzip
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Compression::Zstd
        } else {
            Compression::None
        }
    }
}

/// Writer that hashes and counts what passes through.
pub(crate) struct HashingWriter<W> {
    pub(crate) inner: W,
    pub(crate) hasher: Sha256,
    pub(crate) written: u64,
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

/// A reader that hashes what passes through it.
pub(crate) struct HashingReader<R> {
    inner: R,
    hash: Sha256,
    count: u64,
}

impl<R> HashingReader<R> {
    pub(crate) fn new(inner: R) -> HashingReader<R> {
        HashingReader {
            inner,
            hash: Sha256::new(),
            count: 0,
        }
    }

    /// `sha256:<hex>` of what was read, and how many bytes.
    pub(crate) fn finish(self) -> (String, u64) {
        (hex_digest(self.hash), self.count)
    }
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hash.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }
}

/// `sha256:<hex>` of what `hash` took in.
pub(crate) fn hex_digest(hash: Sha256) -> String {
    format!("sha256:{}", hex::encode(hash.finalize()))
}

/// `sha256:0123456789ab: 512.0 MB of 2048.0 MB (25%), 85.3 MB/s`
pub(crate) fn progress_line(label: &str, sent: u64, total: u64, elapsed: Duration) -> String {
    let percent = sent.saturating_mul(100).checked_div(total).unwrap_or(100);
    let rate = sent as f64 / 1e6 / elapsed.as_secs_f64().max(0.001);
    format!(
        "{label}: {} of {} ({percent}%), {rate:.1} MB/s",
        human_size(sent),
        human_size(total)
    )
}

/// `189 B`, `12.3 kB`, `1573.1 MB` (decimal units, as registries and `docker push` print).
pub(crate) fn human_size(bytes: u64) -> String {
    match bytes {
        0..1_000 => format!("{bytes} B"),
        1_000..1_000_000 => format!("{:.1} kB", bytes as f64 / 1e3),
        _ => format!("{:.1} MB", bytes as f64 / 1e6),
    }
}

/// A progress line is due when `interval` passed since the last one.
pub(crate) fn line_due(last: Instant, now: Instant, interval: Duration) -> bool {
    now.saturating_duration_since(last) >= interval
}

/// The running count of one long transfer (a blob upload, a layer's compression), printed
/// to stderr at most every interval.
pub(crate) struct TransferProgress {
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
    pub(crate) fn new(label: &str, total: u64, interval: Duration) -> Arc<TransferProgress> {
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
    pub(crate) fn restart(&self) {
        self.sent.store(0, Ordering::Relaxed);
    }

    pub(crate) fn add(&self, bytes: u64) {
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

    pub(crate) fn summary(&self) -> String {
        progress_line(
            &self.label,
            self.sent.load(Ordering::Relaxed),
            self.total,
            self.start.elapsed(),
        )
    }
}

/// A reader that counts what is read from it into a [`TransferProgress`].
pub(crate) struct CountingReader<'a, R> {
    pub(crate) inner: R,
    pub(crate) progress: &'a TransferProgress,
}

impl<R: std::io::Read> std::io::Read for CountingReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.add(n as u64);
        Ok(n)
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
}
