//! How a layer becomes a blob: an uncompressed tar is compressed deterministically (same
//! layer, same bytes, same digest) as a series of gzip members of [`MEMBER_SIZE`] input bytes,
//! each compressed alone with libdeflate on every core; an already compressed one is kept as it
//! is. Determinism does not depend on the number of cores: every member is compressed alone,
//! with a fixed level and a gzip header without time or name.

use std::collections::BTreeMap;
use std::io::{self, BufWriter, Read, Write};
use std::path::PathBuf;
use std::sync::Mutex;

use anyhow::{Context, Result};
use sha2::{Digest as _, Sha256};

use crate::oci::blob_upload::Blob;
use crate::oci::reuse::COMPRESSOR;
use crate::oci::stream::{Compression, HashingWriter};
use template_formats::model::Digest;
use template_formats::oci::index::{OCI_LAYER_GZIP, OCI_LAYER_ZSTD};

/// The gzip level of layers (libdeflate's levels), chosen by measurement on the amd64
/// template image's largest layer (825 MB of Debian packages; one core; relative to zlib-rs at
/// level 6, the compressor before, 71-80 MB/s and 320.4 MB): libdeflate level 4 is 1.7x as
/// fast and 0.7% smaller, level 5 1.6x as fast and 2.6% smaller, level 6 1.3x as fast and 3.1%
/// smaller, level 7 1.1x as fast and 3.4% smaller.
/// Every node pulls what is published, every release: bytes weigh more than seconds here, and
/// level 6 on every core is fast enough (docs/decisions.md).
/// Changing the level changes every layer's digest: one release then re-pushes everything.
pub(crate) const LAYER_LEVEL: u32 = 6;

/// Uncompressed bytes per gzip member. A layer blob is a series of gzip members (RFC 1952,
/// section 2.2: "a gzip file consists of a series of members"), each compressed alone, so
/// the members of one layer compress on every core and the bytes do not depend on how many
/// there are. Every registry client decompresses multi-member gzip (Go's `compress/gzip`
/// reads a multistream by default, as do pigz and zlib's gunzip; the engines and containerd
/// use those). Measured on the same layer: 4 MiB members are 0.03% larger than 16 MiB ones
/// and 0.04% larger than 64 MiB; memory holds about three members per core.
pub(crate) const MEMBER_SIZE: usize = 4 << 20;

/// Compresses `source` into `out` as gzip members of [`MEMBER_SIZE`] input bytes at
/// [`LAYER_LEVEL`], on `threads` threads. libdeflate's gzip header has no time or name and
/// fixed flags, and its output is deterministic for one version (its maintainer, in
/// ebiggers/libdeflate#400, 2024: "no version of libdeflate has ever been non-deterministic",
/// but the output varies across versions, hence the versions in `oci::reuse::COMPRESSOR`):
/// the output is a function of the input alone. The source is read and the output
/// written on the calling thread and one writer, in order; at most `3 * threads` members are
/// in flight.
pub(crate) fn gzip_members<W: Write + Send>(
    source: &mut impl Read,
    out: &mut W,
    threads: usize,
) -> io::Result<()> {
    use std::sync::mpsc::sync_channel;
    let threads = threads.max(1);
    let level = libdeflater::CompressionLvl::new(LAYER_LEVEL as i32)
        .map_err(|e| io::Error::other(format!("gzip level {LAYER_LEVEL}: {e:?}")))?;
    let (work, to_compress) = sync_channel::<(u64, Vec<u8>)>(threads);
    // Owned by the compressing threads alone: when the writer fails they stop, the receiver
    // goes with the last of them, and the reader's next send fails instead of blocking.
    let to_compress = std::sync::Arc::new(Mutex::new(to_compress));
    let (compressed, to_write) = sync_channel::<(u64, io::Result<Vec<u8>>)>(threads);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let compressed = compressed.clone();
            let to_compress = std::sync::Arc::clone(&to_compress);
            scope.spawn(move || {
                let mut compressor = libdeflater::Compressor::new(level);
                loop {
                    let next = to_compress.lock().expect("member queue lock").recv();
                    let Ok((index, input)) = next else { return };
                    let mut member = vec![0; compressor.gzip_compress_bound(input.len())];
                    let result = compressor
                        .gzip_compress(&input, &mut member)
                        .map(|n| {
                            member.truncate(n);
                            member
                        })
                        .map_err(|e| io::Error::other(format!("libdeflate: {e:?}")));
                    if compressed.send((index, result)).is_err() {
                        return; // The writer failed: its error is the result.
                    }
                }
            });
        }
        drop(compressed);
        drop(to_compress);
        let writer = scope.spawn(move || -> io::Result<()> {
            let mut waiting: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
            let mut next = 0;
            for (index, member) in to_write {
                waiting.insert(index, member?);
                while let Some(member) = waiting.remove(&next) {
                    out.write_all(&member)?;
                    next += 1;
                }
            }
            Ok(())
        });
        let read = (|| -> io::Result<()> {
            let mut index = 0;
            loop {
                let mut input = Vec::with_capacity(MEMBER_SIZE);
                (&mut *source)
                    .take(MEMBER_SIZE as u64)
                    .read_to_end(&mut input)?;
                // An empty source still makes one (empty) member: a blob must be gzip.
                if input.is_empty() && index > 0 {
                    return Ok(());
                }
                let last = input.len() < MEMBER_SIZE;
                if work.send((index, input)).is_err() {
                    return Ok(()); // The writer failed: its error is the result.
                }
                index += 1;
                if last {
                    return Ok(());
                }
            }
        })();
        // Closed in every case, or the compressing threads would wait forever.
        drop(work);
        let written = writer.join().expect("the gzip writer panicked");
        read.and(written)
    })
}

/// How many threads compress a layer's members: one per core.
pub(crate) fn compressors() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// Stores one layer as a registry blob: an uncompressed tar is gzip-compressed
/// ([`LAYER_LEVEL`], no timestamp or name in the header: deterministic), an already compressed
/// one (gzip or zstd, as an engine with
/// the containerd image store exports) is kept as it is.
pub(crate) fn store_layer(mut source: impl Read, path: PathBuf) -> Result<Blob> {
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
    let media_type = match Compression::of(head) {
        Compression::Gzip => Some(OCI_LAYER_GZIP),
        Compression::Zstd => Some(OCI_LAYER_ZSTD),
        Compression::None => None,
    };
    let mut source = io::Cursor::new(head.to_vec()).chain(source);
    let file = std::fs::File::create(&path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    let mut out = HashingWriter {
        inner: BufWriter::with_capacity(1 << 20, file),
        hasher: Sha256::new(),
        written: 0,
    };
    let (media_type, compressor) = match media_type {
        Some(kept) => {
            io::copy(&mut source, &mut out)?;
            (kept, None)
        }
        None => {
            gzip_members(&mut source, &mut out, compressors())?;
            (OCI_LAYER_GZIP, Some(COMPRESSOR))
        }
    };
    out.flush()?;
    Ok(Blob {
        digest: format!("sha256:{}", hex::encode(out.hasher.finalize())),
        size: out.written,
        media_type: media_type.to_string(),
        path,
        compressor,
    })
}

pub(crate) fn store_bytes(bytes: &[u8], media_type: &str, path: PathBuf) -> Result<Blob> {
    std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(Blob {
        digest: Digest::of(bytes).to_string(),
        size: bytes.len() as u64,
        media_type: media_type.to_string(),
        path,
        compressor: None,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A layer tar with varied content (text and incompressible bytes), `files` files.
    pub(crate) fn layer_tar(files: usize) -> Vec<u8> {
        let mut layer = tar::Builder::new(Vec::new());
        let mut noise = 0x2545_f491_4f6c_dd1du64;
        for i in 0..files {
            let mut data = format!("file {i}\n").repeat(500).into_bytes();
            for _ in 0..4096 {
                noise ^= noise << 13;
                noise ^= noise >> 7;
                noise ^= noise << 17;
                data.extend_from_slice(&noise.to_le_bytes());
            }
            let mut header = tar::Header::new_gnu();
            header.set_size(data.len() as u64);
            header.set_mode(0o644);
            header.set_mtime(0);
            layer
                .append_data(&mut header, format!("dir/file-{i}"), data.as_slice())
                .unwrap();
        }
        layer.into_inner().unwrap()
    }

    #[test]
    fn layers_compress_to_the_same_bytes_every_time() {
        let tar = layer_tar(8);
        let dir = tempfile::tempdir().unwrap();
        let a = store_layer(tar.as_slice(), dir.path().join("a")).unwrap();
        let b = store_layer(tar.as_slice(), dir.path().join("b")).unwrap();
        assert_eq!(a.digest, b.digest);
        assert_eq!(a.size, b.size);
        let (a_bytes, b_bytes) = (
            std::fs::read(&a.path).unwrap(),
            std::fs::read(&b.path).unwrap(),
        );
        assert_eq!(a_bytes, b_bytes);
        assert_eq!(Digest::of(&a_bytes).to_string(), a.digest);
        // The gzip header carries no time, no name and no OS-dependent flags beyond the
        // fixed ones: bytes 4..8 are the mtime.
        assert_eq!(&a_bytes[..4], &[0x1f, 0x8b, 8, 0]);
        assert_eq!(&a_bytes[4..8], &[0, 0, 0, 0]);
        let other = store_layer(layer_tar(9).as_slice(), dir.path().join("c")).unwrap();
        assert_ne!(other.digest, a.digest);
    }

    #[test]
    fn compressed_layers_decompress_to_their_input() {
        let tar = layer_tar(5);
        let dir = tempfile::tempdir().unwrap();
        let blob = store_layer(tar.as_slice(), dir.path().join("a")).unwrap();
        assert_eq!(blob.media_type, OCI_LAYER_GZIP);
        assert!(blob.size < tar.len() as u64);
        let mut back = Vec::new();
        flate2::read::MultiGzDecoder::new(std::fs::File::open(&blob.path).unwrap())
            .read_to_end(&mut back)
            .unwrap();
        assert_eq!(back, tar);
        // An already compressed layer is kept byte for byte.
        let bytes = std::fs::read(&blob.path).unwrap();
        let kept = store_layer(bytes.as_slice(), dir.path().join("b")).unwrap();
        assert_eq!(kept.digest, blob.digest);
    }

    /// `gzip_members` of `input` on `threads` threads.
    fn members(input: &[u8], threads: usize) -> Vec<u8> {
        let mut out = Vec::new();
        gzip_members(&mut &input[..], &mut out, threads).unwrap();
        out
    }

    #[test]
    fn a_layer_is_a_series_of_members_the_same_on_any_number_of_threads() {
        let tar = layer_tar(300);
        assert!(tar.len() > 2 * MEMBER_SIZE, "{}", tar.len());
        let one = members(&tar, 1);
        for threads in [2, 3, 8] {
            assert!(
                members(&tar, threads) == one,
                "{threads} threads gave other bytes"
            );
        }
        // The first member is the first MEMBER_SIZE bytes alone; all of them are the layer.
        let mut first = Vec::new();
        flate2::read::GzDecoder::new(one.as_slice())
            .read_to_end(&mut first)
            .unwrap();
        assert_eq!(first.len(), MEMBER_SIZE);
        let mut all = Vec::new();
        flate2::read::MultiGzDecoder::new(one.as_slice())
            .read_to_end(&mut all)
            .unwrap();
        assert!(all == tar);
        // A layer of exactly one member, and an empty one, are still gzip.
        for input in [&tar[..MEMBER_SIZE], &[][..]] {
            let blob = members(input, 2);
            let mut back = Vec::new();
            flate2::read::MultiGzDecoder::new(blob.as_slice())
                .read_to_end(&mut back)
                .unwrap();
            assert!(back == input, "{} bytes", input.len());
        }
    }

    #[test]
    fn a_write_that_fails_ends_the_compression_with_its_error() {
        // A disk that fills after the first member: the reader must not wait for ever on
        // threads that stopped.
        struct Full(usize);
        impl Write for Full {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                if self.0 == 0 {
                    return Err(io::Error::other("no space left on device"));
                }
                self.0 -= 1;
                Ok(buf.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let (done, result) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let input = vec![7u8; 20 * MEMBER_SIZE];
            let _ = done.send(gzip_members(&mut input.as_slice(), &mut Full(1), 2));
        });
        let result = result
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("gzip_members still waits a minute after its writer failed");
        assert!(result.unwrap_err().to_string().contains("no space left"));
    }
}
