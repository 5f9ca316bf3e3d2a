//! Entries a layer repeats unchanged from the layers below it, which canonical layers leave
//! out, so that one build step gives one layer on every engine.
//!
//! Engines disagree on what a step's diff holds. The classic store's overlay2 driver exports
//! the upper directory as it is, and a file the step only opened for writing was copied up
//! there: `useradd` opens `/etc/.pwd.lock` and changes nothing, and overlay2's layer holds the
//! file again (moby v28.5.2, `daemon/graphdriver/overlay2`, `Diff`). The containerd image
//! store's overlayfs differ compares every upper entry with the lower one and leaves out those
//! it finds the same (containerd v2.1, `core/diff/walking` over continuity `fs.Changes`,
//! `sameFile`: same mode, owner, size, time and content). Leaving out, on every engine, the
//! entries whose canonical form (oci::canonical) and content equal the entry at the same path
//! below makes both exports one layer: the containerd store's diff already lacks them, and
//! overlay2's extra entries are exact copies.
//!
//! Measured on the template's apt layer (docker.io 28.5.2, both stores), the two
//! diffs also disagree on what has no effect, and those entries go too:
//! - a directory the step left as it was below (same mode, owner and attributes) with nothing
//!   of this layer inside it: overlay2 keeps a directory that was only copied up (`/tmp`
//!   after apt wrote and removed its files), the containerd differ does not (continuity
//!   compares a directory's stat without its time);
//! - an opaque marker (`.wh..wh..opq`) on a directory with nothing below it in the lower
//!   layers: overlay2 marks the directories a step creates, and hiding nothing is nothing.
//!
//! Directories with this layer's entries inside them stay, as do plain whiteouts, hard links
//! and the targets of this layer's hard links (a link needs its target in the same tar on some
//! appliers).

use std::collections::{BTreeMap, BTreeSet};

/// What an entry's canonical form and content hash to (see [`EntryKind::File`]).
pub(crate) type EntryId = [u8; 32];

/// One entry of a canonical layer, as this module needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IndexedEntry {
    /// The path in the layer, without a leading `./` or a trailing `/`.
    pub path: Vec<u8>,
    pub kind: EntryKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EntryKind {
    /// The sha256 of its mode, owner and extended attributes (not its time: a directory's
    /// time moves whenever an entry in it comes or goes).
    Directory(EntryId),
    /// A regular file, symbolic link, device or FIFO: the sha256 of its canonical header
    /// fields (type, mode, owner, time, size, link target, device numbers, extended
    /// attributes) and its content.
    File(EntryId),
    /// A hard link to `target`, a path of the image.
    HardLink { target: Vec<u8> },
    /// `.wh.<name>`: `<name>` (and everything below it) is removed.
    Whiteout { removed: Vec<u8> },
    /// `.wh..wh..opq`: everything below the directory is removed.
    Opaque { dir: Vec<u8> },
}

impl IndexedEntry {
    /// The entry at `path` (as the tar holds it), where `id` is the identity its kind has
    /// (see [`EntryKind`]); whiteout names are recognised here.
    pub(crate) fn new(path: &[u8], is_dir: bool, link_target: Option<&[u8]>, id: EntryId) -> Self {
        let path = normalize(path).to_vec();
        let (parent, name) = match path.iter().rposition(|&b| b == b'/') {
            Some(i) => (&path[..i], &path[i + 1..]),
            None => (&path[..0], &path[..]),
        };
        let kind = if name == b".wh..wh..opq" {
            EntryKind::Opaque {
                dir: parent.to_vec(),
            }
        } else if let Some(removed) = name.strip_prefix(b".wh.") {
            EntryKind::Whiteout {
                removed: join(parent, removed),
            }
        } else if is_dir {
            EntryKind::Directory(id)
        } else if let Some(target) = link_target {
            EntryKind::HardLink {
                target: normalize(target).to_vec(),
            }
        } else {
            EntryKind::File(id)
        };
        IndexedEntry { path, kind }
    }
}

/// `path` without a leading `./` or a trailing `/`.
pub(crate) fn normalize(path: &[u8]) -> &[u8] {
    let path = path.strip_prefix(b"./").unwrap_or(path);
    path.strip_suffix(b"/").unwrap_or(path)
}

fn join(parent: &[u8], name: &[u8]) -> Vec<u8> {
    if parent.is_empty() {
        name.to_vec()
    } else {
        [parent, b"/", name].concat()
    }
}

/// `path` is `prefix` or below it.
fn at_or_below(path: &[u8], prefix: &[u8]) -> bool {
    prefix.is_empty()
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest[0] == b'/')
}

/// The entries of the layers applied so far: what a layer on top would repeat.
#[derive(Debug, Default)]
pub(crate) struct LowerFiles {
    files: BTreeMap<Vec<u8>, EntryId>,
    dirs: BTreeMap<Vec<u8>, EntryId>,
}

/// The paths of `map` below `prefix` (and `prefix` itself unless `strictly`).
fn paths_below<'a, V>(
    map: &'a BTreeMap<Vec<u8>, V>,
    prefix: &'a [u8],
    strictly: bool,
) -> impl Iterator<Item = &'a Vec<u8>> + 'a {
    map.range(prefix.to_vec()..)
        .take_while(move |(p, _)| p.starts_with(prefix))
        .map(|(p, _)| p)
        .filter(move |p| at_or_below(p, prefix) && !(strictly && p.as_slice() == prefix))
}

impl LowerFiles {
    /// Removes `prefix` and everything below it (`keep_prefix`: only what is below).
    fn remove(&mut self, prefix: &[u8], keep_prefix: bool) {
        let files: Vec<Vec<u8>> = paths_below(&self.files, prefix, keep_prefix)
            .cloned()
            .collect();
        for path in files {
            self.files.remove(&path);
        }
        let dirs: Vec<Vec<u8>> = paths_below(&self.dirs, prefix, keep_prefix)
            .cloned()
            .collect();
        for path in dirs {
            self.dirs.remove(&path);
        }
    }

    /// Anything below the directory `dir` (not `dir` itself).
    fn holds_anything_below(&self, dir: &[u8]) -> bool {
        paths_below(&self.files, dir, true).next().is_some()
            || paths_below(&self.dirs, dir, true).next().is_some()
    }

    /// The filesystem after `layer` is applied on top.
    pub(crate) fn apply(&mut self, layer: &[IndexedEntry]) {
        for entry in layer {
            match &entry.kind {
                EntryKind::Whiteout { removed } => self.remove(removed, false),
                EntryKind::Opaque { dir } if dir.is_empty() => self.files.clear(),
                EntryKind::Opaque { dir } => self.remove(dir, true),
                _ => {}
            }
        }
        let mut this_layer: BTreeMap<&[u8], EntryId> = BTreeMap::new();
        for entry in layer {
            match &entry.kind {
                EntryKind::Directory(id) => {
                    self.files.remove(&entry.path);
                    self.dirs.insert(entry.path.clone(), *id);
                }
                EntryKind::File(id) => {
                    self.remove(&entry.path, false);
                    self.files.insert(entry.path.clone(), *id);
                    this_layer.insert(&entry.path, *id);
                }
                EntryKind::HardLink { target } => {
                    let id = this_layer
                        .get(target.as_slice())
                        .or_else(|| self.files.get(target))
                        .copied();
                    match id {
                        Some(id) => {
                            self.files.insert(entry.path.clone(), id);
                        }
                        None => {
                            self.files.remove(&entry.path);
                        }
                    }
                }
                EntryKind::Whiteout { .. } | EntryKind::Opaque { .. } => {}
            }
        }
    }
}

/// The paths of `layer`'s entries that repeat, unchanged, the entry at the same path in
/// `lower` (module docs): the ones a canonical layer leaves out.
pub(crate) fn unchanged_entries(lower: &LowerFiles, layer: &[IndexedEntry]) -> BTreeSet<Vec<u8>> {
    // A path this layer removes (or whose directory it empties) and writes again is new here.
    let removed: Vec<&[u8]> = layer
        .iter()
        .filter_map(|e| match &e.kind {
            EntryKind::Whiteout { removed } => Some(removed.as_slice()),
            EntryKind::Opaque { dir } => Some(dir.as_slice()),
            _ => None,
        })
        .collect();
    let link_targets: BTreeSet<&[u8]> = layer
        .iter()
        .filter_map(|e| match &e.kind {
            EntryKind::HardLink { target } => Some(target.as_slice()),
            _ => None,
        })
        .collect();
    let new_here = |path: &[u8]| removed.iter().any(|r| at_or_below(path, r));
    let mut left_out: BTreeSet<Vec<u8>> = layer
        .iter()
        .filter(|e| match &e.kind {
            EntryKind::File(id) => lower.files.get(&e.path) == Some(id),
            EntryKind::Opaque { dir } => !lower.holds_anything_below(dir),
            _ => false,
        })
        .filter(|e| !link_targets.contains(e.path.as_slice()))
        .filter(|e| matches!(e.kind, EntryKind::Opaque { .. }) || !new_here(&e.path))
        .map(|e| e.path.clone())
        .collect();
    // Directories deepest first: one whose entries all went may go too, then its parent.
    let paths: BTreeSet<&[u8]> = layer.iter().map(|e| e.path.as_slice()).collect();
    let mut dirs: Vec<(&[u8], &EntryId)> = layer
        .iter()
        .filter_map(|e| match &e.kind {
            EntryKind::Directory(id) => Some((e.path.as_slice(), id)),
            _ => None,
        })
        .collect();
    dirs.sort_by_key(|(path, _)| std::cmp::Reverse(path.iter().filter(|&&b| b == b'/').count()));
    for (path, id) in dirs {
        let same_below = lower.dirs.get(path) == Some(id);
        let inside = paths
            .range(path..)
            .take_while(|p| p.starts_with(path))
            .any(|p| *p != path && at_or_below(p, path) && !left_out.contains(*p));
        if same_below && !inside && !new_here(path) && !path.is_empty() {
            left_out.insert(path.to_vec());
        }
    }
    left_out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, id: u8) -> IndexedEntry {
        IndexedEntry::new(path.as_bytes(), false, None, [id; 32])
    }
    fn dir(path: &str) -> IndexedEntry {
        IndexedEntry::new(path.as_bytes(), true, None, [0; 32])
    }
    fn dir_with_mode(path: &str, mode: u8) -> IndexedEntry {
        IndexedEntry::new(path.as_bytes(), true, None, [mode; 32])
    }
    fn link(path: &str, target: &str) -> IndexedEntry {
        IndexedEntry::new(path.as_bytes(), false, Some(target.as_bytes()), [0; 32])
    }
    fn paths(set: BTreeSet<Vec<u8>>) -> Vec<String> {
        set.into_iter()
            .map(|p| String::from_utf8(p).unwrap())
            .collect()
    }
    fn lower(layers: &[&[IndexedEntry]]) -> LowerFiles {
        let mut lower = LowerFiles::default();
        for layer in layers {
            lower.apply(layer);
        }
        lower
    }

    #[test]
    fn a_file_copied_up_unchanged_is_left_out_and_a_changed_one_stays() {
        let below = lower(&[&[dir("etc/"), file("etc/.pwd.lock", 1), file("etc/passwd", 2)]]);
        // overlay2's diff of `useradd`: the lock file it opened, the files it changed.
        let step = [dir("etc/"), file("etc/.pwd.lock", 1), file("etc/passwd", 3)];
        assert_eq!(paths(unchanged_entries(&below, &step)), ["etc/.pwd.lock"]);
        // The same file with anything else changed (here: its identity) stays.
        let step = [file("./etc/.pwd.lock", 9)];
        assert!(unchanged_entries(&below, &step).is_empty());
    }

    #[test]
    fn whiteouts_hard_link_targets_and_the_directories_around_them_stay() {
        let below = lower(&[&[dir("a"), file("a/f", 1), file("a/g", 2)]]);
        let step = [
            dir("a/"),
            file("a/f", 1),
            link("a/h", "a/f"),
            file("a/.wh.g", 7),
        ];
        assert!(unchanged_entries(&below, &step).is_empty());
    }

    #[test]
    fn a_directory_only_copied_up_goes_and_a_changed_one_stays() {
        let below = lower(&[&[dir("tmp"), dir("etc"), dir("etc/d"), file("etc/d/f", 1)]]);
        // overlay2's diff after apt: /tmp (files made and removed), etc/d around a file that
        // is the same again; etc/new is new.
        let step = [
            dir("tmp/"),
            dir("etc/"),
            dir("etc/d/"),
            file("etc/d/f", 1),
            dir("etc/new/"),
        ];
        assert_eq!(
            paths(unchanged_entries(&below, &step)),
            ["etc/d", "etc/d/f", "tmp"]
        );
        // Another mode is a change, with or without entries inside.
        let step = [dir_with_mode("tmp/", 7)];
        assert!(unchanged_entries(&below, &step).is_empty());
    }

    #[test]
    fn an_opaque_marker_that_hides_nothing_goes() {
        let below = lower(&[&[dir("etc"), dir("etc/old"), file("etc/old/f", 1)]]);
        let step = [
            dir("etc/new/"),
            file("etc/new/.wh..wh..opq", 0),
            file("etc/new/g", 2),
            dir("etc/old/"),
            file("etc/old/.wh..wh..opq", 0),
        ];
        assert_eq!(
            paths(unchanged_entries(&below, &step)),
            ["etc/new/.wh..wh..opq"]
        );
    }

    #[test]
    fn a_path_removed_below_or_in_the_same_layer_is_new_again() {
        // Removed by a whiteout in the layer before: the same bytes again are a new file.
        let below = lower(&[&[file("a/f", 1)], &[file("a/.wh.f", 0)]]);
        assert!(unchanged_entries(&below, &[file("a/f", 1)]).is_empty());
        // Under an opaque directory of the layer itself.
        let below = lower(&[&[dir("a"), file("a/f", 1)]]);
        let step = [dir("a"), file("a/.wh..wh..opq", 0), file("a/f", 1)];
        assert!(unchanged_entries(&below, &step).is_empty());
        // A directory removed whole takes its files with it.
        let below = lower(&[&[dir("a"), file("a/b/f", 1)], &[file(".wh.a", 0)]]);
        assert!(unchanged_entries(&below, &[file("a/b/f", 1)]).is_empty());
        // A file that replaced a directory hides what was below it.
        let below = lower(&[&[file("a/b", 1)], &[file("a", 2)]]);
        assert!(unchanged_entries(&below, &[file("a/b", 1)]).is_empty());
    }

    #[test]
    fn a_hard_link_below_is_its_target_s_file() {
        let below = lower(&[&[file("a", 1), link("b", "a")]]);
        assert_eq!(paths(unchanged_entries(&below, &[file("b", 1)])), ["b"]);
    }
}
