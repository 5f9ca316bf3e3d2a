//! Gzip of one layer on every core, with bytes that do not depend on how many cores there are.
//!
//! A single deflate stream is sequential: each symbol may refer back 32 KiB. pigz (Mark
//! Adler's parallel gzip, `pigz.c`, "parallel compression" in its header comment) cuts the
//! input into fixed blocks and compresses them independently, each primed with the last
//! 32 KiB of the block before it as its dictionary (`deflateSetDictionary`), each but the last
//! ended with a sync flush (an empty stored block, so it ends on a byte boundary) and the last
//! with the final block bit. The blocks joined are one ordinary deflate stream, inside one
//! ordinary gzip member: any gunzip (Go's `compress/gzip` in the engines and containerd,
//! `gzip -d`) reads it as it reads any other. The output is a function of the input, the
//! level, [`BLOCK_SIZE`] and the deflate implementation alone: one thread or sixteen give the
//! same bytes, which is what a layer digest needs (`oci/reuse.rs`).
//!
//! Why this and not the `gzp` crate (pigz's scheme in Rust): its dictionaries need a C zlib
//! (`gzp`'s `any_zlib` features build libz-sys or zlib-ng), and its pure-Rust backend is
//! miniz_oxide, which measured half zlib-rs's speed on the template's layers (`Cargo.toml`);
//! the block scheme itself is the hundred lines below, on flate2's `Compress`.

use std::io::{self, Read, Write};

use flate2::{Compress, Compression, Crc, FlushCompress, Status};

/// The size of the blocks compressed independently. Larger blocks lose less to the sync
/// markers (5 bytes each) and the restarted Huffman statistics; smaller ones spread a small
/// layer over more cores. 1 MiB: a 100 MB layer is 100 blocks, and the loss is below 0.1 %.
/// Changing it changes every layer's bytes (so `oci/reuse.rs`'s `COMPRESSOR` names it).
pub(crate) const BLOCK_SIZE: usize = 1 << 20;

/// How far back deflate can refer: each block is primed with this much of the one before.
const WINDOW: usize = 32 * 1024;

/// The gzip member header flate2's `GzEncoder` writes at levels 2-8: no mtime, no name, no
/// extra flags, OS "unknown" (RFC 1952, 2.3). A test checks it against flate2's.
const HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];

/// Compresses all of `source` into `out` as one gzip member at `level` (2-8, so the header
/// above is flate2's), `threads` blocks at a time. Memory: about two blocks per thread.
pub(crate) fn compress(
    mut source: impl Read,
    out: &mut impl Write,
    level: u32,
    threads: usize,
) -> io::Result<()> {
    assert!(
        (2..=8).contains(&level),
        "the header is flate2's for levels 2-8"
    );
    let threads = threads.max(1);
    out.write_all(&HEADER)?;
    let mut crc = Crc::new();
    let mut dictionary = Vec::new();
    let mut next = read_block(&mut source)?;
    loop {
        // A batch of blocks, each with its dictionary; one block of look-ahead says which is
        // the last (it gets the final bit, and an empty input is one empty last block).
        let mut batch = Vec::with_capacity(2 * threads);
        let mut finished = false;
        while batch.len() < 2 * threads && !finished {
            let block = std::mem::take(&mut next);
            crc.update(&block);
            next = read_block(&mut source)?;
            finished = next.is_empty();
            let primed = std::mem::replace(&mut dictionary, tail(&block).to_vec());
            batch.push((block, primed, finished));
        }
        for compressed in compress_batch(&batch, level, threads) {
            out.write_all(&compressed?)?;
        }
        if finished {
            break;
        }
    }
    out.write_all(&crc.sum().to_le_bytes())?;
    out.write_all(&crc.amount().to_le_bytes())?;
    Ok(())
}

/// Up to [`BLOCK_SIZE`] bytes: fewer only at the end of `source`.
fn read_block(source: &mut impl Read) -> io::Result<Vec<u8>> {
    let mut block = Vec::with_capacity(BLOCK_SIZE);
    source.take(BLOCK_SIZE as u64).read_to_end(&mut block)?;
    Ok(block)
}

fn tail(block: &[u8]) -> &[u8] {
    &block[block.len().saturating_sub(WINDOW)..]
}

/// The batch's blocks compressed, in order; `threads` at once.
fn compress_batch(
    batch: &[(Vec<u8>, Vec<u8>, bool)],
    level: u32,
    threads: usize,
) -> Vec<io::Result<Vec<u8>>> {
    if threads == 1 || batch.len() == 1 {
        return batch
            .iter()
            .map(|(block, primed, last)| compress_block(block, primed, *last, level))
            .collect();
    }
    let mut results: Vec<Option<io::Result<Vec<u8>>>> = (0..batch.len()).map(|_| None).collect();
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads.min(batch.len()))
            .map(|worker| {
                scope.spawn(move || {
                    batch
                        .iter()
                        .enumerate()
                        .skip(worker)
                        .step_by(threads)
                        .map(|(i, (block, primed, last))| {
                            (i, compress_block(block, primed, *last, level))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for worker in workers {
            for (i, result) in worker.join().expect("a compressing thread panicked") {
                results[i] = Some(result);
            }
        }
    });
    results
        .into_iter()
        .map(|r| r.expect("every block was compressed"))
        .collect()
}

/// One block as raw deflate, primed with `primed`, ended by a sync flush or, for the last
/// block, the final block.
fn compress_block(block: &[u8], primed: &[u8], last: bool, level: u32) -> io::Result<Vec<u8>> {
    let mut deflate = Compress::new(Compression::new(level), false);
    if !primed.is_empty() {
        deflate.set_dictionary(primed).map_err(io::Error::other)?;
    }
    let flush = if last {
        FlushCompress::Finish
    } else {
        FlushCompress::Sync
    };
    let mut out = Vec::with_capacity(block.len() + block.len() / 100 + 64);
    loop {
        let consumed = deflate.total_in() as usize;
        let status = deflate
            .compress_vec(&block[consumed..], &mut out, flush)
            .map_err(io::Error::other)?;
        // Done when the stream ended (last block), or all input is in and zlib left room in
        // the output (it has nothing more to write for the flush).
        let done = match status {
            Status::StreamEnd => true,
            _ => !last && deflate.total_in() as usize == block.len() && out.len() < out.capacity(),
        };
        if done {
            return Ok(out);
        }
        out.reserve(out.capacity().max(64 * 1024));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes that compress somewhat, as layers do: text with random runs.
    fn sample(len: usize) -> Vec<u8> {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        (0..len)
            .map(|i| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                if (i / 4096) % 3 == 0 {
                    state as u8
                } else {
                    b"layer tar bytes "[i % 16]
                }
            })
            .collect()
    }

    fn gzip(data: &[u8], threads: usize) -> Vec<u8> {
        let mut out = Vec::new();
        compress(data, &mut out, 6, threads).unwrap();
        out
    }

    fn gunzip(blob: &[u8]) -> Vec<u8> {
        let mut plain = Vec::new();
        flate2::read::GzDecoder::new(blob)
            .read_to_end(&mut plain)
            .unwrap();
        plain
    }

    #[test]
    fn the_blocks_make_one_gzip_member_that_decompresses_to_the_input() {
        for len in [
            0,
            1,
            WINDOW,
            BLOCK_SIZE - 1,
            BLOCK_SIZE,
            BLOCK_SIZE + 1,
            3 * BLOCK_SIZE + 12_345,
        ] {
            let data = sample(len);
            let blob = gzip(&data, 3);
            assert_eq!(gunzip(&blob), data, "{len} bytes");
            // One member: a multi-member file would also decompress, but is not what
            // gzip's trailer describes.
            let mut decoder = flate2::bufread::GzDecoder::new(blob.as_slice());
            std::io::copy(&mut decoder, &mut std::io::sink()).unwrap();
            assert!(
                decoder.into_inner().is_empty(),
                "{len} bytes: bytes after the member"
            );
        }
    }

    #[test]
    fn the_bytes_do_not_depend_on_the_number_of_threads() {
        let data = sample(5 * BLOCK_SIZE + 777);
        let one = gzip(&data, 1);
        for threads in [2, 3, 4, 16] {
            assert!(
                gzip(&data, threads) == one,
                "{threads} threads made other bytes"
            );
        }
    }

    #[test]
    fn the_header_is_the_one_flate2_writes() {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), Compression::new(6));
        e.write_all(b"x").unwrap();
        let flate2_header = e.finish().unwrap()[..10].to_vec();
        assert_eq!(flate2_header, HEADER);
    }

    #[test]
    fn the_dictionary_keeps_the_size_near_a_single_stream() {
        // Without priming each block with the one before, matches across block boundaries
        // are lost; with it, the size is within 0.5 % of one sequential stream.
        let data = sample(4 * BLOCK_SIZE);
        let mut e = flate2::write::GzEncoder::new(Vec::new(), Compression::new(6));
        e.write_all(&data).unwrap();
        let single = e.finish().unwrap().len() as f64;
        let blocks = gzip(&data, 2).len() as f64;
        assert!(blocks / single < 1.005, "{blocks} bytes against {single}");
    }

    #[test]
    fn system_gzip_reads_it() {
        // The real decoder, not only flate2's: gzip(1) tests the member, CRC and length.
        let Ok(status) = std::process::Command::new("gzip").arg("--version").output() else {
            panic!("gzip(1) is not installed; it is part of every Debian system");
        };
        assert!(status.status.success());
        let data = sample(2 * BLOCK_SIZE + 5);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("layer.gz");
        std::fs::write(&path, gzip(&data, 2)).unwrap();
        let out = std::process::Command::new("gzip")
            .args(["-dc"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stdout == data);
    }
}
