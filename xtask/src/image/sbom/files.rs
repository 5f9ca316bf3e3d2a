//! File entries for the ELF executables and libraries no Debian package owns: the Node binary,
//! the CLIs' native binaries inside npm packages (Codex's alone is most of the image). A
//! package element says nothing about their bytes (an npm package's checksum is its tarball's),
//! so each is listed as an SPDX file with its SHA-256, and the image CONTAINS it.
//!
//! The image's tree is read once, as a stream: only ELF files are hashed, each through the
//! hashers as it is read, so the 1.7 GB they hold never sit in memory.

use std::collections::BTreeSet;
use std::io::{Read, Write};

use anyhow::{Context, Result};
use sha1::Sha1;
use sha2::{Digest, Sha256};

use template_formats::sbom::spdx::{self, id_chars, Checksum, NOASSERTION};

/// An ELF file of the image: its path below `/` (`usr/local/bin/node`), size and digests.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct ElfFile {
    pub path: String,
    pub size: u64,
    pub sha256: String,
    /// SPDX 2.3 requires a SHA1 of every file (spec §8.4; pyspdxtools refuses a file without).
    pub sha1: String,
}

/// The SPDX id prefix of these file entries.
pub(crate) const FILE_ID_PREFIX: &str = "SPDXRef-File-";

/// Whether a file's first bytes are an ELF executable or shared object (`e_type` ET_EXEC or
/// ET_DYN, read in the byte order the header names). Relocatable objects and core files are
/// left out: nothing runs or loads them.
pub(crate) fn is_elf_program(head: &[u8]) -> bool {
    if head.len() < 18 || &head[..4] != b"\x7fELF" {
        return false;
    }
    let e_type = match head[5] {
        1 => u16::from_le_bytes([head[16], head[17]]),
        2 => u16::from_be_bytes([head[16], head[17]]),
        _ => return false,
    };
    matches!(e_type, 2 | 3)
}

/// A path as it is in a merged-/usr image (Debian 12: `/lib`, `/bin`, `/sbin`, `/lib64` are
/// links into `/usr`). dpkg's lists keep the names packages ship (`/lib/x86_64-linux-gnu/…`);
/// the archive holds the files under `usr/`. Without a leading `/`.
pub(crate) fn merged_usr(path: &str) -> String {
    let path = path.trim_start_matches("./").trim_start_matches('/');
    for dir in ["bin/", "sbin/", "lib/", "lib32/", "lib64/", "libx32/"] {
        if let Some(rest) = path.strip_prefix(dir) {
            return format!("usr/{dir}{rest}");
        }
    }
    path.to_string()
}

/// Every path dpkg's `*.list` files name, in merged-/usr form.
pub(crate) fn dpkg_owned<'a>(lists: impl IntoIterator<Item = &'a [u8]>) -> BTreeSet<String> {
    lists
        .into_iter()
        .flat_map(|bytes| {
            String::from_utf8_lossy(bytes)
                .lines()
                .map(merged_usr)
                .collect::<Vec<_>>()
        })
        .filter(|p| !p.is_empty())
        .collect()
}

/// The files no dpkg list names, sorted by path (the document's order must not depend on the
/// archive's).
pub(crate) fn unowned(mut files: Vec<ElfFile>, owned: &BTreeSet<String>) -> Vec<ElfFile> {
    files.retain(|f| !owned.contains(&merged_usr(&f.path)));
    files.sort();
    files.dedup_by(|a, b| a.path == b.path);
    files
}

/// Writes into both hashers.
struct Hashers(Sha256, Sha1, u64);

impl Write for Hashers {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        self.1.update(bytes);
        self.2 += bytes.len() as u64;
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The ELF programs of a tar stream (the archive API's tree of `/`: paths below `/`), each
/// hashed as it streams past; other files are skipped unread beyond their first 18 bytes.
pub(crate) fn elf_files(archive: &mut dyn Read) -> Result<Vec<ElfFile>> {
    let mut out: Vec<ElfFile> = Vec::new();
    // Paths already hashed, by their archive name: a hard link's target comes before it.
    let mut hashed: std::collections::BTreeMap<String, usize> = Default::default();
    let mut tar = tar::Archive::new(archive);
    for entry in tar.entries().context("reading the image's tree")? {
        let mut entry = entry.context("reading the image's tree")?;
        let kind = entry.header().entry_type();
        if kind.is_hard_link() {
            // The same bytes under a second name (npm installs platform binaries so, e.g.
            // opencode-ai's bin/opencode.exe): a file entry of its own, with the target's digests.
            let path = entry.path()?.to_string_lossy().into_owned();
            let target = entry.link_name()?.map(|t| t.to_string_lossy().into_owned());
            if let Some(&at) = target
                .as_ref()
                .and_then(|t| hashed.get(t.trim_start_matches('/')))
            {
                let file = ElfFile {
                    path: merged_usr(&path),
                    ..out[at].clone()
                };
                out.push(file);
            }
            continue;
        }
        if !kind.is_file() {
            continue;
        }
        let path = entry.path()?.to_string_lossy().into_owned();
        let mut head = [0u8; 18];
        let mut filled = 0;
        while filled < head.len() {
            match entry.read(&mut head[filled..])? {
                0 => break,
                n => filled += n,
            }
        }
        if !is_elf_program(&head[..filled]) {
            continue;
        }
        let mut hashers = Hashers(Sha256::new(), Sha1::new(), 0);
        hashers.write_all(&head[..filled])?;
        std::io::copy(&mut entry, &mut hashers)
            .with_context(|| format!("reading /{path} from the image's tree"))?;
        let Hashers(sha256, sha1, size) = hashers;
        hashed.insert(path.trim_start_matches('/').to_string(), out.len());
        out.push(ElfFile {
            path: merged_usr(&path),
            size,
            sha256: hex::encode(sha256.finalize()),
            sha1: hex::encode(sha1.finalize()),
        });
    }
    Ok(out)
}

/// The SPDX file element of one file.
pub(crate) fn file_element(f: &ElfFile) -> spdx::File {
    spdx::File {
        file_name: format!("./{}", f.path),
        spdx_id: format!("{FILE_ID_PREFIX}{}", id_chars(&f.path)),
        checksums: vec![
            Checksum {
                algorithm: "SHA1".into(),
                checksum_value: f.sha1.clone(),
            },
            Checksum {
                algorithm: "SHA256".into(),
                checksum_value: f.sha256.clone(),
            },
        ],
        file_types: vec!["BINARY".into()],
        license_concluded: NOASSERTION.into(),
        copyright_text: NOASSERTION.into(),
        comment: Some(format!(
            "ELF program no Debian package owns, {} bytes",
            f.size
        )),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An ELF header of `e_type` (little-endian), padded with `body`.
    pub(crate) fn elf(e_type: u16, body: &[u8]) -> Vec<u8> {
        let mut bytes = b"\x7fELF\x02\x01\x01".to_vec();
        bytes.resize(16, 0);
        bytes.extend_from_slice(&e_type.to_le_bytes());
        bytes.extend_from_slice(body);
        bytes
    }

    fn tar_of(files: &[(&str, Vec<u8>)], hard_links: &[(&str, &str)]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (path, bytes) in files {
            let mut h = tar::Header::new_gnu();
            h.set_size(bytes.len() as u64);
            h.set_mode(0o755);
            h.set_cksum();
            b.append_data(&mut h, path, bytes.as_slice()).unwrap();
        }
        for (path, target) in hard_links {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(tar::EntryType::Link);
            h.set_size(0);
            b.append_link(&mut h, path, target).unwrap();
        }
        b.into_inner().unwrap()
    }

    #[test]
    fn only_executables_and_shared_objects_are_elf_programs() {
        assert!(is_elf_program(&elf(2, b"")));
        assert!(is_elf_program(&elf(3, b"")));
        assert!(!is_elf_program(&elf(1, b"")), "a relocatable object");
        assert!(!is_elf_program(&elf(4, b"")), "a core file");
        assert!(!is_elf_program(b"#!/bin/sh\necho not elf at all\n"));
        assert!(!is_elf_program(b"\x7fELF"), "too short for a header");
        let mut big_endian = elf(0, b"");
        big_endian[5] = 2;
        big_endian[16..18].copy_from_slice(&3u16.to_be_bytes());
        assert!(is_elf_program(&big_endian));
    }

    #[test]
    fn what_dpkg_lists_is_owned_in_its_merged_usr_place() {
        let owned = dpkg_owned([
            b"/.\n/lib/x86_64-linux-gnu/libc.so.6\n/usr/bin/dpkg\n".as_slice(),
            b"/bin/bash\n".as_slice(),
        ]);
        assert!(owned.contains("usr/lib/x86_64-linux-gnu/libc.so.6"));
        assert!(owned.contains("usr/bin/bash"));
        assert!(owned.contains("usr/bin/dpkg"));
        let file = |path: &str| ElfFile {
            path: path.into(),
            size: 1,
            sha256: String::new(),
            sha1: String::new(),
        };
        let left = unowned(
            vec![
                file("usr/local/bin/node"),
                file("usr/lib/x86_64-linux-gnu/libc.so.6"),
                file("opt/a/codex"),
                file("usr/bin/bash"),
            ],
            &owned,
        );
        let paths: Vec<&str> = left.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["opt/a/codex", "usr/local/bin/node"]);
    }

    #[test]
    fn the_stream_hashes_elf_programs_and_skips_the_rest() {
        let node = elf(2, &vec![7u8; 100_000]);
        let archive = tar_of(
            &[
                ("usr/local/bin/node", node.clone()),
                ("usr/share/doc/x/copyright", b"not a program".to_vec()),
                ("lib/ld.so", elf(3, b"loader")),
                ("opt/empty", Vec::new()),
            ],
            &[
                ("opt/a/bin/node", "usr/local/bin/node"),
                ("opt/a/doc", "usr/share/doc/x/copyright"),
            ],
        );
        let files = elf_files(&mut archive.as_slice()).unwrap();
        assert_eq!(files.len(), 3, "{files:?}");
        assert_eq!(files[0].path, "usr/local/bin/node");
        assert_eq!(files[0].size, node.len() as u64);
        assert_eq!(files[0].sha256, hex::encode(Sha256::digest(&node)));
        assert_eq!(files[0].sha1, hex::encode(Sha1::digest(&node)));
        assert_eq!(
            files[1].path, "usr/lib/ld.so",
            "named in its merged-/usr place"
        );
        let e = file_element(&files[0]);
        assert_eq!(e.file_name, "./usr/local/bin/node");
        assert_eq!(e.spdx_id, "SPDXRef-File-usr-local-bin-node");
    }
}
