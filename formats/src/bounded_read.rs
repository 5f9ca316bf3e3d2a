//! Reading files named by someone else, with bounds.
//!
//! `receipt verify` and `pin` read a receipt and release artifacts that a consumer downloaded:
//! the paths may name a FIFO (an open that blocks forever), a device such as `/dev/zero` (a
//! read that never ends), or a huge file. Every such read goes through here: the file is
//! opened with `O_NONBLOCK` (so opening a FIFO returns at once), must be a regular file by
//! `fstat` of the opened descriptor (no race between the check and the read), is refused
//! above a size limit before anything is read, and is hashed in fixed-size chunks rather
//! than loaded whole.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

/// The largest receipt `verify` reads. A genuine receipt is tens of kilobytes (the lockfile's
/// dependency list is its largest part).
pub const MAX_RECEIPT_BYTES: u64 = 8 << 20;
/// The largest release artifact hashed (the lockfile is the largest, about a megabyte).
pub const MAX_ARTIFACT_BYTES: u64 = 64 << 20;
/// The largest artifact parsed as JSON (package.json, package-lock.json, inventory.json).
pub const MAX_PARSED_ARTIFACT_BYTES: u64 = 16 << 20;

/// Opens `path` for reading without blocking on FIFOs and checks that it is a regular file no
/// larger than `limit`. Returns the open file and its size.
pub fn open_regular(path: &Path, limit: u64, what: &str) -> Result<(File, u64)> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .with_context(|| format!("cannot open the {what} {}", path.display()))?;
    let meta = file
        .metadata()
        .with_context(|| format!("cannot stat the {what} {}", path.display()))?;
    if !meta.file_type().is_file() {
        bail!(
            "the {what} {} is not a regular file ({}); pass the downloaded file itself",
            path.display(),
            describe(&meta.file_type())
        );
    }
    if meta.len() > limit {
        bail!(
            "the {what} {} is {} bytes, above the limit of {limit} bytes; it is not a genuine {what}",
            path.display(),
            meta.len()
        );
    }
    Ok((file, meta.len()))
}

fn describe(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a plain file"
    }
}

/// The whole content of a regular file of at most `limit` bytes. The read itself is capped
/// too, so a file that grows after the size check cannot make it unbounded.
pub fn read_regular(path: &Path, limit: u64, what: &str) -> Result<Vec<u8>> {
    let (file, size) = open_regular(path, limit, what)?;
    let mut bytes = Vec::with_capacity(size as usize);
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read the {what} {}", path.display()))?;
    if bytes.len() as u64 > limit {
        bail!(
            "the {what} {} grew beyond {limit} bytes while it was read",
            path.display()
        );
    }
    Ok(bytes)
}

/// sha256 (lowercase hex) of a regular file of at most `limit` bytes, read in 64 KiB chunks.
pub fn sha256_regular(path: &Path, limit: u64, what: &str) -> Result<String> {
    let (file, _) = open_regular(path, limit, what)?;
    let mut reader = file.take(limit + 1);
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 64 << 10];
    let mut total: u64 = 0;
    loop {
        let n = reader
            .read(&mut buffer)
            .with_context(|| format!("cannot read the {what} {}", path.display()))?;
        if n == 0 {
            break;
        }
        total += n as u64;
        hasher.update(&buffer[..n]);
    }
    if total > limit {
        bail!(
            "the {what} {} grew beyond {limit} bytes while it was read",
            path.display()
        );
    }
    Ok(hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_files_are_read_and_hashed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"abc").unwrap();
        assert_eq!(read_regular(&path, 3, "file").unwrap(), b"abc");
        assert_eq!(
            sha256_regular(&path, 3, "file").unwrap(),
            crate::hash::sha256_hex(b"abc")
        );
        let msg = format!("{:#}", read_regular(&path, 2, "receipt").unwrap_err());
        assert!(msg.contains("above the limit"), "{msg}");
    }

    #[test]
    fn devices_directories_and_fifos_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let msg = format!("{:#}", read_regular(dir.path(), 10, "receipt").unwrap_err());
        assert!(msg.contains("a directory"), "{msg}");
        let msg = format!(
            "{:#}",
            sha256_regular(Path::new("/dev/zero"), 10, "artifact").unwrap_err()
        );
        assert!(msg.contains("character device"), "{msg}");
        let fifo = dir.path().join("fifo");
        let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo reads a NUL-terminated path and touches nothing else.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        // Without O_NONBLOCK this open would wait for a writer forever.
        let msg = format!("{:#}", read_regular(&fifo, 10, "receipt").unwrap_err());
        assert!(msg.contains("a FIFO"), "{msg}");
    }
}
