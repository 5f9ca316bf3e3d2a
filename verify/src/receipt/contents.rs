//! What the release's files are, not only what they hash to (`receipt verify --artifacts`):
//! a file whose sha256 the receipt records correctly can still be the wrong file for a
//! receipt edited and renamed along with it. So each SBOM must be this tool's SPDX SBOM of
//! this release's image for its platform and list exactly the Debian packages the receipt
//! records for that platform (and the npm packages the lockfile installs there); each
//! verifier binary must be a static executable of its platform; and the release folder must
//! hold no artifact the receipt does not account for.
//!
//! Pure over what [`super::artifacts::read_artifacts`] read; every problem names the receipt
//! field (or the file) it is about.

use std::collections::{BTreeMap, BTreeSet};

use crate::receipt::{problem, Problem};
use template_formats::manifest::Platform;
use template_formats::model::inventory::Inventory;
use template_formats::model::lockfile::Lockfile;
use template_formats::model::receipt::{PlatformRecord, Receipt};
use template_formats::sbom::Document;

/// A package URL split into its parts, each percent-decoded (the purl specification,
/// github.com/package-url/purl-spec `PURL-SPECIFICATION.rst`: `pkg:type/namespace/name@version
/// ?qualifiers#subpath`, the version split off at the last `@`). Qualifiers are kept but the
/// checks read only the ones they need, so new ones (`distro=`, `upstream=`) change nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Purl {
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
    pub version: Option<String>,
    pub qualifiers: BTreeMap<String, String>,
}

fn decode(text: &str) -> Option<String> {
    percent_encoding::percent_decode_str(text)
        .decode_utf8()
        .ok()
        .map(|s| s.into_owned())
}

pub fn parse_purl(text: &str) -> Option<Purl> {
    let rest = text.strip_prefix("pkg:")?;
    let rest = rest.split_once('#').map_or(rest, |(before, _)| before);
    let (rest, qualifiers) = match rest.split_once('?') {
        Some((rest, q)) => (rest, q),
        None => (rest, ""),
    };
    let (path, version) = match rest.rsplit_once('@') {
        Some((path, version)) => (path, Some(decode(version)?)),
        None => (rest, None),
    };
    let path = path.trim_matches('/');
    let (kind, path) = path.split_once('/')?;
    let (namespace, name) = match path.rsplit_once('/') {
        Some((ns, name)) => (
            Some(
                ns.split('/')
                    .map(decode)
                    .collect::<Option<Vec<_>>>()?
                    .join("/"),
            ),
            name,
        ),
        None => (None, path),
    };
    let mut parsed = BTreeMap::new();
    for pair in qualifiers.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=')?;
        parsed.insert(key.to_ascii_lowercase(), decode(value)?);
    }
    let name = decode(name)?;
    if kind.is_empty() || name.is_empty() {
        return None;
    }
    Some(Purl {
        kind: kind.to_ascii_lowercase(),
        namespace,
        name,
        version,
        qualifiers: parsed,
    })
}

/// The purls of every package an SBOM lists.
/// The purls of the document's packages, less those npm itself bundles (the npm the
/// inventory pins brings them, not the template's lockfile).
fn purls(doc: &Document) -> Vec<Purl> {
    doc.packages
        .iter()
        .filter(|p| {
            !p.spdx_id
                .starts_with(template_formats::sbom::NPM_BUNDLED_ID_PREFIX)
        })
        .flat_map(|p| &p.external_refs)
        .filter(|r| r.reference_type == "purl")
        .filter_map(|r| parse_purl(&r.reference_locator))
        .collect()
}

/// The Debian package name (Debian Policy 5.6.1: lowercase letters, digits, `+`, `-`, `.`,
/// at least two characters, starting alphanumeric) and version (5.6.12: digits first,
/// letters, digits and `.+~-:`) of a receipt entry `name=version`.
fn split_debian_entry(entry: &str) -> Option<(&str, &str)> {
    let (name, version) = entry.split_once('=')?;
    let name_ok = name.len() >= 2
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c));
    let version_ok = version.starts_with(|c: char| c.is_ascii_digit())
        && version
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".+~-:".contains(c));
    (name_ok && version_ok).then_some((name, version))
}

/// Each platform's Debian package list: non-empty (every image of this template is Debian),
/// each entry `name=version` as dpkg says it, each name once.
pub fn debian_set_problems(r: &Receipt) -> Vec<Problem> {
    let mut out = Vec::new();
    for (i, p) in r.platforms.iter().enumerate() {
        if p.debian_packages.is_empty() {
            out.push(problem(
                format!("platforms[{i}].debian_packages"),
                format!(
                    "is empty: the {} image is Debian-based, its dpkg database lists packages",
                    p.platform
                ),
            ));
        }
        let mut names = BTreeSet::new();
        for (j, entry) in p.debian_packages.iter().enumerate() {
            match split_debian_entry(entry) {
                None => out.push(problem(
                    format!("platforms[{i}].debian_packages[{j}]"),
                    format!("`{entry}` is not `name=version` of a Debian package"),
                )),
                Some((name, _)) if !names.insert(name) => out.push(problem(
                    format!("platforms[{i}].debian_packages[{j}]"),
                    format!("`{name}` is listed twice for {}", p.platform),
                )),
                Some(_) => {}
            }
        }
    }
    out
}

/// What a release's SBOM of one platform was read as: this tool's SPDX document, or why not.
pub type SbomReading = Result<Document, String>;

/// Each SBOM (those whose sha256 already matched) against its platform record; `lockfile`
/// and `inventory` are the release's own (verified) files, when given.
pub fn sbom_problems(
    r: &Receipt,
    sboms: &BTreeMap<Platform, SbomReading>,
    lockfile: Option<&Lockfile>,
    inventory: Option<&Inventory>,
) -> Vec<Problem> {
    let mut out = Vec::new();
    for (i, p) in r.platforms.iter().enumerate() {
        let field = format!("platforms[{i}].sbom");
        match sboms.get(&p.platform) {
            None => {}
            Some(Err(why)) => out.push(problem(
                field,
                format!(
                    "`{}` is not the SPDX SBOM of {}: {why}",
                    p.sbom.name, p.platform
                ),
            )),
            Some(Ok(doc)) => {
                out.extend(one_sbom_problems(&field, p, doc, lockfile, inventory));
                out.extend(published_name_problems(&field, p, doc, &r.release_tag));
            }
        }
    }
    out
}

/// The SPDX ids of what the document DESCRIBES (the image package).
fn described_ids(doc: &Document) -> BTreeSet<&str> {
    doc.relationships
        .iter()
        .filter(|rel| rel.spdx_element_id == doc.spdx_id && rel.relationship_type == "DESCRIBES")
        .map(|rel| rel.related_spdx_element.as_str())
        .collect()
}

/// The described image must be named by its `pkg:oci` purl with this platform's manifest
/// digest (the receipt's `platforms[].digest`, which `--check-registry` holds against the
/// registry) and the release tag: the image config's digest alone ties the SBOM to the image,
/// not to the name consumers pull and scanners match. The CycloneDX file carries the same purl
/// (its subject is checked against the SPDX file's), so this covers both.
fn published_name_problems(
    field: &str,
    p: &PlatformRecord,
    doc: &Document,
    release_tag: &str,
) -> Vec<Problem> {
    let described = described_ids(doc);
    let named: Vec<Purl> = doc
        .packages
        .iter()
        .filter(|pkg| described.contains(pkg.spdx_id.as_str()))
        .flat_map(|pkg| &pkg.external_refs)
        .filter(|r| r.reference_type == "purl")
        .filter_map(|r| parse_purl(&r.reference_locator))
        .filter(|u| u.kind == "oci")
        .collect();
    let found = |u: &Purl| {
        format!(
            "{}@{} tag {}",
            u.name,
            u.version.as_deref().unwrap_or("(no version)"),
            u.qualifiers.get("tag").map_or("(none)", String::as_str)
        )
    };
    let matches = |u: &Purl| {
        u.version.as_deref() == Some(p.digest.as_str())
            && u.qualifiers.get("tag").map(String::as_str) == Some(release_tag)
            && u.qualifiers.get("arch").map(String::as_str) == Some(p.platform.arch())
    };
    if named.iter().any(matches) {
        return Vec::new();
    }
    vec![problem(
        field,
        format!(
            "`{}` does not name the published image by this platform's manifest digest \
             ({}.digest {}) and release tag {release_tag}: its described package's pkg:oci \
             purls are [{}]; make the SBOM after the push, as `release build` does",
            p.sbom.name,
            field.trim_end_matches(".sbom"),
            p.digest,
            named.iter().map(found).collect::<Vec<_>>().join(", ")
        ),
    )]
}

fn one_sbom_problems(
    field: &str,
    p: &PlatformRecord,
    doc: &Document,
    lockfile: Option<&Lockfile>,
    inventory: Option<&Inventory>,
) -> Vec<Problem> {
    let mut out = Vec::new();
    let name = &p.sbom.name;
    // The image: what the document DESCRIBES carries the image id (the config's sha256).
    let described = described_ids(doc);
    let image_hex = p.image_id.strip_prefix("sha256:").unwrap_or(&p.image_id);
    let names_image = doc.packages.iter().any(|pkg| {
        described.contains(pkg.spdx_id.as_str())
            && pkg.checksums.iter().any(|c| {
                c.algorithm == "SHA256" && c.checksum_value.eq_ignore_ascii_case(image_hex)
            })
    });
    if !names_image {
        out.push(problem(
            field,
            format!(
                "`{name}` does not describe this release's {} image {} (no described package \
                 carries its image id): it is the SBOM of another image",
                p.platform, p.image_id
            ),
        ));
    }

    let purls = purls(doc);
    // Debian: exactly the receipt's set, architecture this platform's (or `all`).
    let mut in_sbom: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for purl in purls.iter().filter(|u| u.kind == "deb") {
        let arch = purl.qualifiers.get("arch").map(String::as_str);
        if !matches!(arch, Some(a) if a == p.platform.arch() || a == "all") {
            out.push(problem(
                field,
                format!(
                    "`{name}` lists the Debian package {} for architecture {}, not {}",
                    purl.name,
                    arch.unwrap_or("(none)"),
                    p.platform.arch()
                ),
            ));
        }
        in_sbom
            .entry(purl.name.clone())
            .or_default()
            .insert(purl.version.clone().unwrap_or_default());
    }
    let in_receipt: BTreeMap<String, BTreeSet<String>> = p
        .debian_packages
        .iter()
        .filter_map(|e| split_debian_entry(e))
        .fold(BTreeMap::new(), |mut m, (n, v)| {
            m.entry(n.to_string())
                .or_insert_with(BTreeSet::new)
                .insert(v.to_string());
            m
        });
    let show = |m: &BTreeMap<String, BTreeSet<String>>, n: &str| {
        m.get(n)
            .map(|vs| vs.iter().cloned().collect::<Vec<_>>().join(", "))
            .unwrap_or_default()
    };
    let mut differences = Vec::new();
    for n in in_sbom
        .keys()
        .chain(in_receipt.keys())
        .collect::<BTreeSet<_>>()
    {
        match (in_receipt.get(n), in_sbom.get(n)) {
            (Some(a), Some(b)) if a == b => {}
            (Some(_), Some(_)) => differences.push(format!(
                "{n}: receipt {}, SBOM {}",
                show(&in_receipt, n),
                show(&in_sbom, n)
            )),
            (Some(_), None) => differences.push(format!("{n}: not in the SBOM")),
            (None, _) => differences.push(format!("{n}: not in the receipt")),
        }
    }
    if !differences.is_empty() {
        let total = differences.len();
        differences.truncate(8);
        out.push(problem(
            format!("{}.debian_packages", field.trim_end_matches(".sbom")),
            format!(
                "differ from `{name}` in {total} package(s) ({}{}): the receipt and the SBOM \
                 must list the same Debian packages of the {} image",
                differences.join("; "),
                if total > 8 { "; …" } else { "" },
                p.platform
            ),
        ));
    }

    // npm: every package the lockfile installs on this platform everywhere (not platform
    // specific) is listed; nothing is listed that the lockfile (or the inventory's Node
    // runtime) does not install there. Platform-specific packages may be missing: the
    // Dockerfile removes some npm installed.
    if let Some(lock) = lockfile {
        let candidates = template_formats::model::lockfile::npm_candidates(lock, p.platform);
        let allowed: BTreeSet<(String, String)> = candidates
            .iter()
            .filter_map(|(path, e)| {
                Some((
                    template_formats::model::lockfile::name_of(path, e),
                    e.version.clone()?,
                ))
            })
            .chain(inventory.into_iter().flat_map(|inv| {
                inv.node
                    .platforms
                    .get(&p.platform)
                    .into_iter()
                    .chain([&inv.node.npm])
                    .map(|t| (t.package.clone(), t.version.clone()))
            }))
            .collect();
        let required: BTreeSet<(String, String)> = candidates
            .iter()
            .filter(|(_, e)| !template_formats::model::lockfile::is_platform_specific(e))
            .filter_map(|(path, e)| {
                Some((
                    template_formats::model::lockfile::name_of(path, e),
                    e.version.clone()?,
                ))
            })
            .collect();
        let listed: BTreeSet<(String, String)> = purls
            .iter()
            .filter(|u| u.kind == "npm")
            .map(|u| {
                let full = match &u.namespace {
                    Some(ns) => format!("{ns}/{}", u.name),
                    None => u.name.clone(),
                };
                (full, u.version.clone().unwrap_or_default())
            })
            .collect();
        let fmt = |set: Vec<&(String, String)>| {
            let total = set.len();
            let mut shown: Vec<String> = set
                .iter()
                .take(8)
                .map(|(n, v)| format!("{n}@{v}"))
                .collect();
            if total > 8 {
                shown.push("…".into());
            }
            format!("{total} ({})", shown.join(", "))
        };
        let missing: Vec<&(String, String)> = required.difference(&listed).collect();
        if !missing.is_empty() {
            out.push(problem(
                field,
                format!(
                    "`{name}` lacks npm packages package-lock.json installs on {}: {}",
                    p.platform,
                    fmt(missing)
                ),
            ));
        }
        let unknown: Vec<&(String, String)> = listed.difference(&allowed).collect();
        if !unknown.is_empty() {
            out.push(problem(
                field,
                format!(
                    "`{name}` lists npm packages package-lock.json does not install on {}: {}",
                    p.platform,
                    fmt(unknown)
                ),
            ));
        }
    }
    out
}

/// The first bytes of each verifier binary (those whose sha256 already matched), by
/// platform: each must be a static executable of the platform it is listed for.
pub fn verifier_binary_problems(r: &Receipt, heads: &BTreeMap<Platform, Vec<u8>>) -> Vec<Problem> {
    let mut out = Vec::new();
    for (i, v) in r.verifiers.iter().enumerate() {
        let Some(head) = heads.get(&v.platform) else {
            continue;
        };
        if let Some(why) = crate::verifier::binary_problem(head, v.platform) {
            out.push(problem(
                format!("verifiers[{i}]"),
                format!(
                    "`{}` {why}: it is not a static executable a {} consumer can run",
                    v.name, v.platform
                ),
            ));
        }
    }
    out
}

/// Files in the release folder the receipt does not account for. Returns the problems (a
/// file named as a release artifact that the receipt does not list: an SBOM or verifier
/// binary it does not record, which a consumer might take for part of the release) and the
/// other names (reported, not refused: a download folder may hold other things).
pub fn unaccounted_files(r: &Receipt, names: &[String]) -> (Vec<Problem>, Vec<String>) {
    // The fixed artifacts every receipt records, and the install plan when this one records it
    // (an older release's folder holding one would otherwise pass as part of that release).
    let mut accounted: BTreeSet<String> = super::ARTIFACTS
        .iter()
        .map(|(name, _)| name.to_string())
        .filter(|name| super::always_recorded(name) || r.artifacts.iter().any(|a| a.name == *name))
        .collect();
    accounted.extend(
        r.platforms
            .iter()
            .flat_map(|p| p.sbom_assets())
            .map(|(_, s)| s.name.clone()),
    );
    accounted.extend(r.verifiers.iter().map(|v| v.name.clone()));
    accounted.extend(
        r.platforms
            .iter()
            .filter_map(|p| p.transcripts.as_ref())
            .map(|t| t.name.clone()),
    );
    let mut problems = Vec::new();
    let mut other = Vec::new();
    for name in names {
        if accounted.contains(name) {
            continue;
        }
        let artifact_like = Platform::ALL.into_iter().find(|p| {
            *name == template_formats::sbom::sbom_file_name(*p)
                || *name == template_formats::sbom::cyclonedx_file_name(*p)
                || *name == crate::verifier::verifier_file_name(*p)
                || *name == template_formats::model::transcript::transcripts_file_name(*p)
        });
        let receipt_or_schema = super::parse_receipt_file_name(name).is_some()
            || (name.starts_with("receipt.v") && name.ends_with(".schema.json"))
            || name == super::INVENTORY_MD_ASSET;
        if let Some(platform) = artifact_like {
            let field = if name.starts_with(crate::verifier::BINARY) {
                "verifiers"
            } else {
                "platforms"
            };
            problems.push(problem(
                field,
                format!(
                    "the release folder holds `{name}` ({platform}), which the receipt does not \
                     list: a file of the release that nothing vouches for"
                ),
            ));
        } else if !receipt_or_schema {
            other.push(name.clone());
        }
    }
    (problems, other)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receipt::tests_support::sample;

    #[test]
    fn purls_are_parsed_by_the_specification() {
        let p = parse_purl(
            "pkg:deb/debian/libc6@2.36-9%2Bdeb12u13?arch=amd64&distro=debian-12&upstream=glibc",
        )
        .unwrap();
        assert_eq!(
            (p.kind.as_str(), p.namespace.as_deref(), p.name.as_str()),
            ("deb", Some("debian"), "libc6")
        );
        assert_eq!(p.version.as_deref(), Some("2.36-9+deb12u13"));
        assert_eq!(p.qualifiers["arch"], "amd64");
        assert_eq!(p.qualifiers["upstream"], "glibc");
        let p = parse_purl("pkg:npm/%40scope/cli@1.2.3#sub/path").unwrap();
        assert_eq!(p.namespace.as_deref(), Some("@scope"));
        assert_eq!(
            (p.name.as_str(), p.version.as_deref()),
            ("cli", Some("1.2.3"))
        );
        let p = parse_purl("pkg:npm/ws@8.18.0").unwrap();
        assert_eq!((p.namespace, p.name.as_str()), (None, "ws"));
        assert!(parse_purl("npm/ws@1").is_none());
        assert!(parse_purl("pkg:deb").is_none());
    }

    #[test]
    fn debian_sets_are_well_formed_and_unique() {
        let fields = |r: &Receipt| -> Vec<String> {
            debian_set_problems(r)
                .into_iter()
                .map(|p| p.field)
                .collect()
        };
        let mut r = sample();
        assert!(fields(&r).is_empty());
        r.platforms[0].debian_packages = vec![];
        r.platforms[1].debian_packages = vec![
            "libc6=2.36-9".into(),
            "libc6=2.36-10".into(),
            "Not A Package".into(),
        ];
        assert_eq!(
            fields(&r),
            vec![
                "platforms[0].debian_packages",
                "platforms[1].debian_packages[1]",
                "platforms[1].debian_packages[2]"
            ]
        );
    }

    #[test]
    fn unaccounted_artifacts_are_refused_other_files_reported() {
        let r = sample();
        let names: Vec<String> = [
            "package.json",
            "sbom-linux-amd64.spdx.json",
            "template-verify-linux-arm64",
            "receipt.v2.schema.json",
            "notes.txt",
        ]
        .map(String::from)
        .to_vec();
        let (problems, other) = unaccounted_files(&r, &names);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].field, "verifiers");
        assert_eq!(other, vec!["notes.txt"]);
    }
}
