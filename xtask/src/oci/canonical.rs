//! Canonical layers and configs: the same files give the same bytes, whatever the build's
//! clock, container ids or cache.
//!
//! The engine's classic builder writes each layer with the build's own times and records its
//! container and parent image in the config, so two builds of the same inputs never share a
//! digest and every release re-publishes the whole image. Rewriting the engine's output here,
//! before anything is tested, makes layer digests depend only on their files:
//! - a layer keeps its entries in the engine's order (a sorted directory walk, the same for the
//!   same files), their paths, types, modes, numeric owners, link targets, device numbers and
//!   extended attributes (file capabilities live there);
//! - it drops what only describes the build: times later than the epoch become the epoch
//!   (clamped, as `SOURCE_DATE_EPOCH` tools do, so older times from packages stay), access and
//!   change times go, and so do owner names (extraction uses the numeric ids);
//! - every entry is written in one header form: a GNU header, long names as GNU long-name
//!   entries, extended attributes in a PAX header with sorted records.
//!
//! The config's canonical form is `canonical_config.rs`.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::io::{BufRead, Read, Write};
use std::os::unix::ffi::OsStrExt;

use anyhow::{bail, Context, Result};
use sha2::{Digest as _, Sha256};

use crate::oci::stream::{Compression, HashingWriter};
use crate::oci::unchanged::IndexedEntry;
use template_formats::model::Digest;

/// A canonical layer as written: its uncompressed digest (the config's `diff_id`) and size.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct CanonicalLayer {
    pub diff_id: Digest,
    pub size: u64,
    pub entries: u64,
}

/// PAX keys that carry extended attributes; they are kept, every other PAX record describes
/// the build (times) or is re-derived from the header.
fn is_xattr_key(key: &str) -> bool {
    key.starts_with("SCHILY.xattr.") || key.starts_with("LIBARCHIVE.xattr.")
}

/// One PAX record, `"<len> <key>=<value>\n"`, where `<len>` counts the whole record.
fn pax_record(key: &str, value: &[u8]) -> Vec<u8> {
    let body = key.len() + value.len() + 3; // ' ', '=', '\n'
    let mut len = body + body.to_string().len();
    if len.to_string().len() + body != len {
        len = body + len.to_string().len();
    }
    let mut record = format!("{len} {key}=").into_bytes();
    record.extend_from_slice(value);
    record.push(b'\n');
    debug_assert_eq!(record.len(), len);
    record
}

/// Rewrites the layer `input` into `output` in canonical form (module docs), with times
/// clamped to `epoch` (seconds since 1970, UTC). `input` is a tar or a gzip-compressed tar,
/// told apart by its first bytes: `docker save` on the containerd image store exports the
/// layers it built or imported gzip-compressed and the ones it loaded plain, in one export,
/// under names that say neither.
#[cfg(test)]
pub(crate) fn canonical_layer(
    input: impl Read,
    output: impl Write,
    epoch: u64,
) -> Result<CanonicalLayer> {
    Ok(indexed_canonical_layer(input, output, epoch)?.0)
}

/// [`canonical_layer`], with the index of the entries written (for `oci::unchanged`).
pub(crate) fn indexed_canonical_layer(
    input: impl Read,
    output: impl Write,
    epoch: u64,
) -> Result<(CanonicalLayer, Vec<IndexedEntry>)> {
    let none = BTreeSet::new();
    let mut input = std::io::BufReader::with_capacity(1 << 20, input);
    match Compression::of(input.fill_buf().context("cannot read the layer")?) {
        Compression::None => rewrite(input, output, epoch, None, &none),
        Compression::Gzip => rewrite(
            flate2::bufread::MultiGzDecoder::new(input),
            output,
            epoch,
            None,
            &none,
        )
        .context("the layer is gzip-compressed: it was decompressed on the way"),
        Compression::Zstd => bail!(
            "the layer is zstd-compressed, which the tool does not decompress; set the engine to \
             store layers uncompressed or gzip-compressed (the containerd image store's default)"
        ),
    }
}

/// The canonical layer `input` (one this module wrote) without the entries at `paths`
/// (normalized as `oci::unchanged` names them): the layer the image keeps once the entries it
/// repeats from the layers below are left out.
pub(crate) fn canonical_layer_without(
    input: impl Read,
    output: impl Write,
    epoch: u64,
    paths: &BTreeSet<Vec<u8>>,
) -> Result<CanonicalLayer> {
    Ok(rewrite(input, output, epoch, None, paths)?.0)
}

/// The mode a canonical header carries: the permission bits (with setuid, setgid and sticky),
/// never the file-type bits. Docker 20.10's `pkg/archive` wrote Go's `FileInfoHeader` modes
/// (`0040755` for a directory, `0100644` for a file) in layer diffs and in the archive API;
/// moby 24 (moby/moby@cddaa84) strips them, as GNU tar, mmdebstrap and containerd do and as
/// POSIX ustar defines the field (the type is the type flag's). Permission bits only is the
/// form every current engine already writes, so 28 and 29 layers pass through unchanged.
fn canonical_mode(mode: u32) -> u32 {
    mode & 0o7777
}

/// Like [`canonical_layer`], for a directory tree as the engine's archive API sends it (`docker
/// cp`): every entry sits below the tree's name, `top`. The layer is the tree's content at `/`:
/// `top/` goes from paths and hard-link targets, and the entry of the tree itself goes. The
/// engine's own layer of `COPY --from=STAGE /staging/<top>/ /` has the same entries, in the
/// same order, so the two give the same bytes.
pub(crate) fn canonical_layer_of_tree(
    input: impl Read,
    top: &str,
    output: impl Write,
    epoch: u64,
) -> Result<CanonicalLayer> {
    Ok(rewrite(input, output, epoch, Some(top.as_bytes()), &BTreeSet::new())?.0)
}

/// `path` below `top`: `Some(b"")` for the tree itself, `None` for a path outside it.
fn below<'a>(path: &'a [u8], top: &[u8]) -> Option<&'a [u8]> {
    let rest = path.strip_prefix(top)?;
    match rest {
        [] | [b'/'] => Some(b""),
        [b'/', rest @ ..] => Some(rest),
        _ => None,
    }
}

/// Writes `input` canonical without the entries at `skip`; returns the layer and the index of
/// what it wrote.
fn rewrite(
    input: impl Read,
    output: impl Write,
    epoch: u64,
    top: Option<&[u8]>,
    skip: &BTreeSet<Vec<u8>>,
) -> Result<(CanonicalLayer, Vec<IndexedEntry>)> {
    let mut index = Vec::new();
    let mut out = tar::Builder::new(HashingWriter {
        inner: output,
        hasher: Sha256::new(),
        written: 0,
    });
    let mut archive = tar::Archive::new(input);
    let mut entries = 0u64;
    for entry in archive.entries().context("the layer is not a tar")? {
        let mut entry = entry.context("the layer tar is truncated or corrupt")?;
        let mut path = entry.path_bytes().into_owned();
        let shown = String::from_utf8_lossy(&path).into_owned();
        if let Some(top) = top {
            match below(&path, top) {
                Some([]) => continue,
                Some(rest) => path = rest.to_vec(),
                None => bail!(
                    "{shown} is outside the tree {} the archive should hold",
                    String::from_utf8_lossy(top)
                ),
            }
        }
        if !skip.is_empty() && skip.contains(crate::oci::unchanged::normalize(&path)) {
            continue;
        }
        let mut xattrs: Vec<(String, Vec<u8>)> = Vec::new();
        if let Some(pax) = entry
            .pax_extensions()
            .with_context(|| format!("{shown}: unreadable PAX header"))?
        {
            for record in pax {
                let record = record.with_context(|| format!("{shown}: malformed PAX record"))?;
                let key = record
                    .key()
                    .with_context(|| format!("{shown}: a PAX key is not UTF-8"))?;
                if is_xattr_key(key) {
                    xattrs.push((key.to_string(), record.value_bytes().to_vec()));
                }
            }
        }
        xattrs.sort();
        let source = entry.header();
        let kind = source.entry_type();
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(kind);
        header.set_mode(canonical_mode(
            source.mode().with_context(|| format!("{shown}: no mode"))?,
        ));
        header.set_uid(source.uid().with_context(|| format!("{shown}: no uid"))?);
        header.set_gid(source.gid().with_context(|| format!("{shown}: no gid"))?);
        let mtime = source
            .mtime()
            .with_context(|| format!("{shown}: no mtime"))?;
        header.set_mtime(mtime.min(epoch));
        // A whiteout is a name, nothing else: overlay2 writes it 0600 at the build's time, the
        // containerd store 0000 at time 0; one form for both (containerd's).
        let name = path
            .rsplit(|&b| b == b'/')
            .find(|n| !n.is_empty())
            .unwrap_or(&[]);
        if name.starts_with(b".wh.") {
            header.set_mode(0);
            header.set_uid(0);
            header.set_gid(0);
            header.set_mtime(0);
        }
        let (mut device_major, mut device_minor) = (0u32, 0u32);
        if kind.is_character_special() || kind.is_block_special() {
            device_major = source.device_major()?.unwrap_or(0);
            device_minor = source.device_minor()?.unwrap_or(0);
            header.set_device_major(device_major)?;
            header.set_device_minor(device_minor)?;
        }
        if !xattrs.is_empty() {
            let mut records = Vec::new();
            for (key, value) in &xattrs {
                records.extend(pax_record(key, value));
            }
            let mut pax = tar::Header::new_gnu();
            pax.set_entry_type(tar::EntryType::XHeader);
            pax.set_mode(0o644);
            pax.set_size(records.len() as u64);
            pax.set_path("././@PaxHeader")?;
            pax.set_cksum();
            out.append(&pax, records.as_slice())?;
        }
        // The entry's identity (oci::unchanged): its canonical header fields, then its content.
        let mut identity = Sha256::new();
        identity.update([kind.as_byte()]);
        let is_dir = kind == tar::EntryType::Directory;
        for field in [
            header.mode()?.into(),
            header.uid()?,
            header.gid()?,
            // A directory's time is not part of what it is (oci::unchanged).
            if is_dir { 0 } else { header.mtime()? },
            device_major.into(),
            device_minor.into(),
            entry.size(),
        ] {
            identity.update(field.to_le_bytes());
        }
        for (key, value) in &xattrs {
            identity.update((key.len() as u64).to_le_bytes());
            identity.update(key.as_bytes());
            identity.update((value.len() as u64).to_le_bytes());
            identity.update(value);
        }
        let raw_path = path.clone();
        let path = OsStr::from_bytes(&path);
        let mut hard_link_target = None;
        match kind {
            tar::EntryType::Link | tar::EntryType::Symlink => {
                let mut target = entry
                    .link_name_bytes()
                    .with_context(|| format!("{shown}: a link without a target"))?
                    .into_owned();
                // A hard link names a path of the archive; a symbolic link's target is text.
                if let (tar::EntryType::Link, Some(top)) = (kind, top) {
                    target = match below(&target, top) {
                        Some(rest) if !rest.is_empty() => rest.to_vec(),
                        _ => bail!(
                            "{shown}: a hard link to {}, outside the tree",
                            String::from_utf8_lossy(&target)
                        ),
                    };
                }
                identity.update(&target);
                if kind == tar::EntryType::Link {
                    hard_link_target = Some(target.clone());
                }
                header.set_size(0);
                out.append_link(&mut header, path, OsStr::from_bytes(&target))
                    .with_context(|| format!("cannot write the link {shown}"))?;
            }
            tar::EntryType::Regular
            | tar::EntryType::Continuous
            | tar::EntryType::Directory
            | tar::EntryType::Char
            | tar::EntryType::Block
            | tar::EntryType::Fifo => {
                let size = entry.size();
                header.set_size(size);
                let mut counted = IdentityReader {
                    inner: (&mut entry).take(size),
                    identity: &mut identity,
                };
                out.append_data(&mut header, path, &mut counted)
                    .with_context(|| format!("cannot write {shown}"))?;
            }
            other => bail!("{shown}: a layer entry of type {other:?} has no canonical form"),
        }
        index.push(IndexedEntry::new(
            &raw_path,
            kind == tar::EntryType::Directory,
            hard_link_target.as_deref(),
            identity.finalize().into(),
        ));
        entries += 1;
    }
    let hashing = out.into_inner().context("cannot finish the layer tar")?;
    let mut hashing = hashing;
    hashing.flush()?;
    Ok((
        CanonicalLayer {
            diff_id: Digest::from_hasher(hashing.hasher),
            size: hashing.written,
            entries,
        },
        index,
    ))
}

/// Reads `inner`, adding what it reads to an entry's identity.
struct IdentityReader<'a, R> {
    inner: R,
    identity: &'a mut Sha256,
}

impl<R: Read> Read for IdentityReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.identity.update(&buf[..n]);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct File<'a> {
        path: &'a str,
        kind: tar::EntryType,
        data: &'a [u8],
        mtime: u64,
        link: Option<&'a str>,
        xattrs: Vec<(&'a str, &'a [u8])>,
        uname: &'a str,
    }

    fn file<'a>(path: &'a str, data: &'a [u8], mtime: u64) -> File<'a> {
        File {
            path,
            kind: tar::EntryType::Regular,
            data,
            mtime,
            link: None,
            xattrs: vec![],
            uname: "root",
        }
    }

    /// A layer tar as an engine might write it: ustar headers, PAX for attributes and times,
    /// modes with permission bits only (moby >= 24, containerd, GNU tar).
    fn layer(files: &[File]) -> Vec<u8> {
        layer_with_modes(files, false)
    }

    /// The file-type bits Go's `archive/tar.FileInfoHeader` adds to a mode (`c_ISDIR` and so
    /// on), which Docker 20.10's `pkg/archive` kept in every header (moby/moby@cddaa84, in
    /// 24.0, strips them). A hard link carries its target's: a regular file's here.
    fn go_type_bits(kind: tar::EntryType) -> u32 {
        match kind {
            tar::EntryType::Directory => 0o040000,
            tar::EntryType::Symlink => 0o120000,
            tar::EntryType::Char => 0o020000,
            tar::EntryType::Block => 0o060000,
            tar::EntryType::Fifo => 0o010000,
            _ => 0o100000,
        }
    }

    /// `layer`, with Docker 20.10's modes when `type_bits` (see [`go_type_bits`]).
    fn layer_with_modes(files: &[File], type_bits: bool) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for f in files {
            let mut records = Vec::new();
            records.extend(pax_record("atime", format!("{}.5", f.mtime + 7).as_bytes()));
            for (k, v) in &f.xattrs {
                records.extend(pax_record(k, v));
            }
            let mut pax = tar::Header::new_ustar();
            pax.set_entry_type(tar::EntryType::XHeader);
            pax.set_size(records.len() as u64);
            pax.set_path("PaxHeaders.0/x").unwrap();
            pax.set_mtime(f.mtime);
            pax.set_cksum();
            builder.append(&pax, records.as_slice()).unwrap();
            let mut h = tar::Header::new_ustar();
            h.set_entry_type(f.kind);
            let permissions = if f.kind.is_dir() { 0o755 } else { 0o4755 };
            h.set_mode(permissions | if type_bits { go_type_bits(f.kind) } else { 0 });
            h.set_uid(0);
            h.set_gid(0);
            h.set_username(f.uname).unwrap();
            h.set_mtime(f.mtime);
            match f.link {
                Some(target) => {
                    h.set_size(0);
                    builder.append_link(&mut h, f.path, target).unwrap();
                }
                None => {
                    h.set_size(f.data.len() as u64);
                    builder.append_data(&mut h, f.path, f.data).unwrap();
                }
            }
        }
        builder.into_inner().unwrap()
    }

    fn canonical(tar: &[u8], epoch: u64) -> (Vec<u8>, CanonicalLayer) {
        let mut out = Vec::new();
        let layer = canonical_layer(tar, &mut out, epoch).unwrap();
        (out, layer)
    }

    const EPOCH: u64 = 1_767_225_600;

    fn sample(build_time: u64, uname: &'static str) -> Vec<u8> {
        sample_at("", build_time, uname)
    }

    /// `sample`'s files below `prefix` (empty, or a directory name and `/`), hard-link targets
    /// too, as the archive API names them.
    fn sample_at(prefix: &str, build_time: u64, uname: &'static str) -> Vec<u8> {
        layer(&sample_files(prefix, build_time, uname))
    }

    fn sample_files(prefix: &str, build_time: u64, uname: &'static str) -> Vec<File<'static>> {
        // Leaked: a test's few strings, so the files can outlive this function.
        let prefix: &'static str = prefix.to_string().leak();
        let long: &'static str = format!("{prefix}opt/coding-agents/node_modules/@anthropic-ai/claude-code/vendor/ripgrep/x64-linux/a-rather-long-file-name-beyond-one-hundred-bytes").leak();
        let [opt, old, ping, hard, sym] =
            ["opt/", "opt/old", "usr/bin/ping", "opt/hard", "opt/sym"]
                .map(|p| &*format!("{prefix}{p}").leak());
        let mut files = Vec::new();
        if !prefix.is_empty() {
            files.push(File {
                kind: tar::EntryType::Directory,
                ..file(prefix, b"", build_time + 3)
            });
        }
        files.extend([
            File {
                kind: tar::EntryType::Directory,
                ..file(opt, b"", build_time)
            },
            file(old, b"from a package", 1_000_000),
            File {
                xattrs: vec![("SCHILY.xattr.security.capability", b"\x01\x00\x00\x02")],
                uname,
                ..file(ping, b"ELF", build_time)
            },
            file(long, b"long", build_time),
            File {
                kind: tar::EntryType::Link,
                link: Some(long),
                ..file(hard, b"", build_time)
            },
            File {
                kind: tar::EntryType::Symlink,
                link: Some("../old"),
                ..file(sym, b"", build_time)
            },
        ]);
        files
    }

    #[test]
    fn the_same_files_built_at_other_times_give_the_same_layer() {
        let (a, la) = canonical(&sample(EPOCH + 86_400 * 300, "root"), EPOCH);
        let (b, lb) = canonical(&sample(EPOCH + 86_400 * 303 + 17, "builder"), EPOCH);
        assert_eq!(a, b);
        assert_eq!(la, lb);
        assert_eq!(la.entries, 6);
        assert_eq!(la.size, a.len() as u64);
        assert_eq!(la.diff_id, Digest::of(&a));
    }

    /// One `useradd` step, as the two stores export it: overlay2's diff holds the lock file the
    /// step opened and left as it was, the containerd store's diff leaves it out (measured on
    /// docker.io 28.5.2, both stores). With the repeated entry left out they are one layer.
    #[test]
    fn the_classic_and_containerd_diffs_of_one_step_give_one_layer() {
        let dir = |path| File {
            kind: tar::EntryType::Directory,
            ..file(path, b"", EPOCH + 50)
        };
        let lock = file("etc/.pwd.lock", b"", 1_000_000);
        let below = layer(&[dir("etc/"), lock, file("etc/passwd", b"root\n", 1_000_000)]);
        let passwd = file("etc/passwd", b"root\nsandbox\n", EPOCH + 90);
        let overlay2 = layer(&[dir("etc/"), file("etc/.pwd.lock", b"", 1_000_000), passwd]);
        let containerd = layer(&[
            dir("etc/"),
            file("etc/passwd", b"root\nsandbox\n", EPOCH + 95),
        ]);

        let mut lower = crate::oci::unchanged::LowerFiles::default();
        let (_, below_index) = indexed_canonical_layer(&below[..], std::io::sink(), EPOCH).unwrap();
        lower.apply(&below_index);
        let mut trimmed = Vec::new();
        for diff in [&overlay2, &containerd] {
            let mut once = Vec::new();
            let (_, index) = indexed_canonical_layer(&diff[..], &mut once, EPOCH).unwrap();
            let repeated = crate::oci::unchanged::unchanged_entries(&lower, &index);
            let mut out = Vec::new();
            let layer = canonical_layer_without(&once[..], &mut out, EPOCH, &repeated).unwrap();
            trimmed.push((out, layer, repeated.len()));
        }
        assert_eq!(
            trimmed[0].2, 1,
            "overlay2's copy of the lock file is left out"
        );
        assert_eq!(trimmed[1].2, 0);
        assert_eq!(trimmed[0].0, trimmed[1].0);
        assert_eq!(trimmed[0].1.entries, 2);
        // Without the rule the two differ (the check can fail).
        assert_ne!(
            canonical(&overlay2, EPOCH).0,
            canonical(&containerd, EPOCH).0
        );
        // A lock file the step did change stays.
        let changed = layer(&[file("etc/.pwd.lock", b"x", 1_000_000)]);
        let (_, index) = indexed_canonical_layer(&changed[..], std::io::sink(), EPOCH).unwrap();
        assert!(crate::oci::unchanged::unchanged_entries(&lower, &index).is_empty());
    }

    #[test]
    fn canonical_layers_are_a_fixed_point() {
        let (once, first) = canonical(&sample(EPOCH + 5, "root"), EPOCH);
        let (twice, second) = canonical(&once, EPOCH);
        assert_eq!(once, twice);
        assert_eq!(first, second);
    }

    #[test]
    fn what_the_files_are_survives_and_only_build_times_change() {
        let (out, _) = canonical(&sample(EPOCH + 99, "root"), EPOCH);
        let mut archive = tar::Archive::new(out.as_slice());
        let mut seen = Vec::new();
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            let path = entry.path().unwrap().to_string_lossy().into_owned();
            let header = entry.header().clone();
            let mut xattrs = Vec::new();
            if let Some(pax) = entry.pax_extensions().unwrap() {
                for r in pax {
                    let r = r.unwrap();
                    xattrs.push(format!("{}={:?}", r.key().unwrap(), r.value_bytes()));
                }
            }
            let link = entry
                .link_name()
                .unwrap()
                .map(|l| l.to_string_lossy().into_owned());
            let mut data = Vec::new();
            entry.read_to_end(&mut data).unwrap();
            seen.push((
                path,
                header.mtime().unwrap(),
                header.mode().unwrap(),
                header.username().unwrap().unwrap_or("").to_string(),
                link,
                xattrs,
                data,
            ));
        }
        let by_path = |p: &str| {
            let paths: Vec<&str> = seen.iter().map(|s| s.0.as_str()).collect();
            let found = seen.iter().find(|s| s.0.ends_with(p));
            found
                .unwrap_or_else(|| panic!("{p} not in {paths:?}"))
                .clone()
        };
        assert_eq!(seen.len(), 6);
        assert_eq!(by_path("opt/").1, EPOCH, "a build time is clamped");
        assert_eq!(by_path("opt/old").1, 1_000_000, "an older time stays");
        let ping = by_path("usr/bin/ping");
        assert_eq!(ping.2, 0o4755, "setuid and mode stay");
        assert_eq!(ping.3, "", "owner names go");
        assert_eq!(
            ping.5,
            vec!["SCHILY.xattr.security.capability=[1, 0, 0, 2]".to_string()],
            "capabilities stay, atime goes"
        );
        assert_eq!(ping.6, b"ELF");
        assert!(by_path("opt/hard")
            .4
            .unwrap()
            .ends_with("beyond-one-hundred-bytes"));
        assert_eq!(by_path("opt/sym").4.as_deref(), Some("../old"));
        assert_eq!(by_path("beyond-one-hundred-bytes").6, b"long");
        assert!(seen
            .iter()
            .all(|s| s.5.iter().all(|x| !x.contains("atime"))));
    }

    #[test]
    fn other_files_give_another_layer() {
        let base = sample(EPOCH + 3, "root");
        let mut other = sample(EPOCH + 3, "root");
        let at = other
            .windows(b"from a package".len())
            .position(|w| w == b"from a package")
            .unwrap();
        other[at] = b'F';
        assert_ne!(
            canonical(&base, EPOCH).1.diff_id,
            canonical(&other, EPOCH).1.diff_id
        );
    }

    #[test]
    fn pax_records_count_their_own_length() {
        assert_eq!(pax_record("a", b"b"), b"6 a=b\n");
        // 98 bytes and two digits would be 100, which needs three digits: 101.
        let r = pax_record("k", &[b'v'; 94]);
        assert_eq!(r.len(), 101);
        assert!(r.starts_with(b"101 k="));
        let r = pax_record("k", &[b'v'; 93]);
        assert!(
            r.starts_with(b"99 k="),
            "{:?}",
            String::from_utf8_lossy(&r[..4])
        );
        assert_eq!(r.len(), 99);
    }

    #[test]
    fn a_tree_from_the_archive_api_gives_the_layer_of_its_copy() {
        let (from_layer, layer) = canonical(&sample(EPOCH + 40, "root"), EPOCH);
        let mut from_tree = Vec::new();
        let tree = canonical_layer_of_tree(
            sample_at("claude-code/", EPOCH + 90, "root").as_slice(),
            "claude-code",
            &mut from_tree,
            EPOCH,
        )
        .unwrap();
        assert_eq!(tree, layer);
        assert_eq!(from_tree, from_layer);
    }

    #[test]
    fn a_tree_entry_outside_its_directory_is_refused() {
        let err = canonical_layer_of_tree(
            sample_at("codex/", EPOCH, "root").as_slice(),
            "cod",
            &mut Vec::new(),
            EPOCH,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("outside the tree cod"), "{err}");
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(bytes).unwrap();
        gz.finish().unwrap()
    }

    /// The containerd image store's `docker save` holds built and imported layers as gzip
    /// blobs and loaded ones as plain tars, in one export (docker-engines.md, probed on
    /// docker.io 28.5.2): both give the same canonical layer.
    #[test]
    fn a_gzip_layer_gives_the_canonical_layer_of_its_tar() {
        let tar = sample(EPOCH + 9, "root");
        let (plain, plain_layer) = canonical(&tar, EPOCH);
        let (unzipped, unzipped_layer) = canonical(&gzip(&tar), EPOCH);
        assert_eq!(unzipped, plain);
        assert_eq!(unzipped_layer, plain_layer);
    }

    #[test]
    fn a_zstd_layer_is_refused_by_name_and_a_damaged_gzip_layer_says_so() {
        let mut zstd = vec![0x28, 0xb5, 0x2f, 0xfd];
        zstd.extend_from_slice(&[0; 64]);
        let err = format!(
            "{:#}",
            canonical_layer(zstd.as_slice(), &mut Vec::new(), EPOCH).unwrap_err()
        );
        assert!(err.contains("zstd"), "{err}");
        let mut damaged = gzip(&sample(EPOCH, "root"));
        damaged.truncate(damaged.len() / 2);
        let err = format!(
            "{:#}",
            canonical_layer(damaged.as_slice(), &mut Vec::new(), EPOCH).unwrap_err()
        );
        assert!(err.contains("gzip"), "{err}");
    }

    /// Docker 20.10's archive API and layer diffs write `0040755` where moby >= 24 writes
    /// `0000755` for the same directory: the canonical layer is the same for both.
    #[test]
    fn modes_with_file_type_bits_give_the_layer_of_permission_bits_only() {
        let files = sample_files("", EPOCH + 12, "root");
        let (with_type_bits, _) = canonical(&layer_with_modes(&files, true), EPOCH);
        let (permissions_only, _) = canonical(&layer_with_modes(&files, false), EPOCH);
        assert_eq!(with_type_bits, permissions_only);
        let mut archive = tar::Archive::new(with_type_bits.as_slice());
        let modes: Vec<(String, u32)> = archive
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.path().unwrap().to_string_lossy().into_owned(),
                    e.header().mode().unwrap(),
                )
            })
            .collect();
        assert!(modes.contains(&("opt/".to_string(), 0o755)), "{modes:?}");
        assert!(
            modes.contains(&("usr/bin/ping".to_string(), 0o4755)),
            "setuid stays: {modes:?}"
        );
    }
}
