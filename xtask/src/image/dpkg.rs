//! The dpkg database and `/usr/lib/os-release`: what Debian says is installed.

use std::collections::BTreeMap;

/// One installed Debian package from the dpkg database.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct DebPackage {
    pub name: String,
    pub version: String,
    pub architecture: String,
    /// The source package and its version: dpkg's `Source` field, else the binary's own.
    pub source: String,
    pub source_version: String,
    /// `Maintainer`: `Name <address>`.
    pub maintainer: Option<String>,
    /// `Pre-Depends` and `Depends`: each entry a list of alternatives (`a | b`), package names
    /// with their version constraints and `:any` qualifiers left out.
    pub depends: Vec<Vec<String>>,
    /// `Provides`: virtual package names this one satisfies.
    pub provides: Vec<String>,
}

/// The fields of one deb822 stanza; continuation lines are folded into their field.
fn fields(stanza: &str) -> BTreeMap<&str, String> {
    let mut out: BTreeMap<&str, String> = BTreeMap::new();
    let mut current: Option<&str> = None;
    for line in stanza.lines() {
        if line.starts_with([' ', '\t']) {
            if let Some(name) = current {
                let value = out.entry(name).or_default();
                value.push('\n');
                value.push_str(line.trim());
            }
            continue;
        }
        if let Some((name, value)) = line.split_once(':') {
            current = Some(name);
            out.insert(name, value.trim().to_string());
        }
    }
    out
}

/// `libc6 (>= 2.34), libgcc-s1 | libgcc1, python3:any` -> `[[libc6], [libgcc-s1, libgcc1],
/// [python3]]`.
fn relation_names(text: &str) -> Vec<Vec<String>> {
    text.split(',')
        .map(|entry| {
            entry
                .split('|')
                .filter_map(|alternative| {
                    let name = alternative.split_whitespace().next()?;
                    let name = name.split([':', '(']).next().unwrap_or(name);
                    (!name.is_empty()).then(|| name.to_string())
                })
                .collect::<Vec<_>>()
        })
        .filter(|alternatives| !alternatives.is_empty())
        .collect()
}

/// Installed packages (`Status: install ok installed`), sorted by name and architecture.
pub(crate) fn dpkg_packages(status: &str) -> Vec<DebPackage> {
    let mut out: Vec<DebPackage> = status
        .split("\n\n")
        .filter_map(|stanza| {
            let fields = fields(stanza);
            let field = |name: &str| fields.get(name).map(|v| v.trim()).filter(|v| !v.is_empty());
            if field("Status")? != "install ok installed" {
                return None;
            }
            let name = field("Package")?.to_string();
            let version = field("Version")?.to_string();
            // `Source: gcc-12 (12.2.0-14)` names the source version when it differs.
            let (source, source_version) = match field("Source") {
                None => (name.clone(), version.clone()),
                Some(s) => match s.split_once(' ') {
                    Some((src, v)) => (
                        src.to_string(),
                        v.trim_matches(|c| c == '(' || c == ')').to_string(),
                    ),
                    None => (s.to_string(), version.clone()),
                },
            };
            let mut depends = Vec::new();
            for key in ["Pre-Depends", "Depends"] {
                depends.extend(field(key).map(relation_names).unwrap_or_default());
            }
            Some(DebPackage {
                name,
                version,
                architecture: field("Architecture").unwrap_or("all").to_string(),
                source,
                source_version,
                maintainer: field("Maintainer").map(str::to_string),
                depends,
                provides: field("Provides")
                    .map(relation_names)
                    .unwrap_or_default()
                    .into_iter()
                    .flatten()
                    .collect(),
            })
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The installed packages each package depends on, by index into `packages`: for every
/// `Depends` entry the first alternative that is installed, by name or through `Provides`,
/// preferring the package's own architecture, then `all`. Entries nothing installed satisfies
/// (an alternative the image does without) give no edge. Sorted, without duplicates.
pub(crate) fn dependency_edges(packages: &[DebPackage]) -> Vec<(usize, usize)> {
    let mut by_name: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, p) in packages.iter().enumerate() {
        by_name.entry(&p.name).or_default().push(i);
    }
    let mut provided: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, p) in packages.iter().enumerate() {
        for v in &p.provides {
            provided.entry(v).or_default().push(i);
        }
    }
    let mut edges = Vec::new();
    for (i, p) in packages.iter().enumerate() {
        for alternatives in &p.depends {
            let pick = alternatives.iter().find_map(|name| {
                let candidates = by_name.get(name.as_str()).or(provided.get(name.as_str()))?;
                let rank = |j: &usize| match packages[*j].architecture.as_str() {
                    a if a == p.architecture => 0,
                    "all" => 1,
                    _ => 2,
                };
                candidates.iter().min_by_key(|j| (rank(j), **j)).copied()
            });
            if let Some(j) = pick.filter(|j| *j != i) {
                edges.push((i, j));
            }
        }
    }
    edges.sort();
    edges.dedup();
    edges
}

/// `/etc/os-release`-format text: the Debian release the image is built on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct OsRelease {
    pub id: String,
    pub version_id: String,
    pub codename: String,
    pub pretty_name: String,
}

pub(crate) fn os_release(text: &str) -> OsRelease {
    let mut out = OsRelease::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let value = value.trim().trim_matches('"').to_string();
        match key.trim() {
            "ID" => out.id = value,
            "VERSION_ID" => out.version_id = value,
            "VERSION_CODENAME" => out.codename = value,
            "PRETTY_NAME" => out.pretty_name = value,
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::sbom::fixtures::*;

    #[test]
    fn installed_debian_packages_with_source_and_arch() {
        let debs = dpkg_packages(STATUS);
        assert_eq!(debs.len(), 3);
        assert_eq!(debs[0].name, "gcc-12-base");
        assert_eq!(debs[1].name, "libc6");
        assert_eq!(
            (debs[1].source.as_str(), debs[1].source_version.as_str()),
            ("glibc", "2.36-9+deb12u13")
        );
        assert_eq!(
            (debs[2].source.as_str(), debs[2].source_version.as_str()),
            ("gcc-12", "12.2.0-14")
        );
        assert_eq!(
            debs[1].maintainer.as_deref(),
            Some("GNU Libc Maintainers <debian-glibc@lists.debian.org>")
        );
        assert_eq!(
            debs[2].depends,
            [
                vec!["gcc-12-base".to_string()],
                vec!["libc6".to_string()],
                vec!["libgcc-s1".to_string(), "libgcc1".to_string()],
            ]
        );
    }

    #[test]
    fn depends_resolve_to_installed_packages_by_name_or_provides() {
        let debs = dpkg_packages(STATUS);
        // libstdc++6 -> gcc-12-base, libc6; `libgcc-s1 | libgcc1` is not installed: no edge.
        assert_eq!(dependency_edges(&debs), [(2, 0), (2, 1)]);
        let mut with_virtual = debs.clone();
        with_virtual[0].provides = vec!["libgcc1".into()];
        assert_eq!(dependency_edges(&with_virtual), [(2, 0), (2, 1)]);
        with_virtual[2].depends.push(vec!["libgcc1".into()]);
        with_virtual[1].provides = vec!["libgcc1".into()];
        // Two providers: the lower index wins, deterministically.
        assert_eq!(dependency_edges(&with_virtual), [(2, 0), (2, 1)]);
    }
}
