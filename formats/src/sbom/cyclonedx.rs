//! CycloneDX 1.5 JSON of the same SBOM, for the tools that read only CycloneDX
//! (Dependency-Track, for one).
//!
//! Made from the SPDX document, not from the image a second time: one set of decisions
//! (purls, licenses, suppliers, dependencies) and two spellings of it, so the two files of a
//! release cannot disagree. Written through `cyclonedx-bom`, the CycloneDX project's own Rust
//! crate; 1.5 is the newest version it writes (ARCHITECTURE.md says why that is enough).
//!
//! Deterministic like the SPDX file: the timestamp is the SPDX document's creation time (the
//! plan's clock), and the serial number, which the spec says to make unique per BOM, is
//! derived from the rest of the document's bytes rather than drawn at random; GitHub's attest
//! action refuses a CycloneDX document without one (actions/attest, src/helper/sbom.ts,
//! `checkIsCycloneDX`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::str::FromStr;

use anyhow::{anyhow, bail, Context, Result};
use cyclonedx_bom::models::component::{Classification, Cpe};
use cyclonedx_bom::models::dependency::{Dependencies, Dependency};
use cyclonedx_bom::models::hash::{Hash, HashAlgorithm, HashValue, Hashes};
use cyclonedx_bom::models::license::{LicenseChoice, Licenses};
use cyclonedx_bom::models::organization::{OrganizationalContact, OrganizationalEntity};
use cyclonedx_bom::models::tool::Tools;
use cyclonedx_bom::prelude::*;
use sha2::{Digest, Sha256};

use super::spdx::{Document, File, Package, NOASSERTION};
use crate::manifest::Platform;

/// `sbom-linux-amd64.cdx.json`: the release asset's name, fixed per platform like the SPDX
/// one's (`.cdx.json` is the extension the CycloneDX spec recommends for JSON BOMs).
pub fn cyclonedx_file_name(platform: Platform) -> String {
    format!("sbom-{}.cdx.json", platform.slug())
}

/// The CycloneDX BOM of an SPDX document this tool wrote: its first package (the image) is
/// the BOM's subject, every other package a component, npm's bundled packages nested in npm
/// (CycloneDX says containment by nesting), and DEPENDS_ON as the dependency graph.
pub fn bom(doc: &Document) -> Result<Bom> {
    let Some((root, packages)) = doc.packages.split_first() else {
        bail!("the SPDX document `{}` lists no package", doc.name);
    };
    let mut children: BTreeMap<&str, Vec<&Package>> = BTreeMap::new();
    let mut depends_on: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let by_id: BTreeMap<&str, &Package> =
        packages.iter().map(|p| (p.spdx_id.as_str(), p)).collect();
    let files: BTreeMap<&str, &File> = doc.files.iter().map(|f| (f.spdx_id.as_str(), f)).collect();
    let mut contained_files = Vec::new();
    for r in &doc.relationships {
        let (from, to) = (r.spdx_element_id.as_str(), r.related_spdx_element.as_str());
        match r.relationship_type.as_str() {
            // The image's file entries: components of type `file` beside the packages.
            "CONTAINS" if files.contains_key(to) => {
                if from != root.spdx_id {
                    bail!(
                        "{}: {from} CONTAINS the file {to}; only the image may",
                        doc.name
                    );
                }
                contained_files.push(files[to]);
            }
            "CONTAINS" => {
                children
                    .entry(from)
                    .or_default()
                    .push(by_id.get(to).copied().with_context(|| {
                        format!("{}: CONTAINS names {to}, which it does not list", doc.name)
                    })?)
            }
            "DEPENDS_ON" => {
                depends_on.entry(from).or_default().insert(to);
            }
            _ => {}
        }
    }
    let mut top = children.remove(root.spdx_id.as_str()).unwrap_or_default();
    // What another package contains is listed inside it, not again beside it.
    let nested: BTreeSet<&str> = children
        .values()
        .flatten()
        .map(|p| p.spdx_id.as_str())
        .collect();
    top.retain(|p| !nested.contains(p.spdx_id.as_str()));
    let mut components = top
        .iter()
        .map(|p| component_tree(p, &children, 0))
        .collect::<Result<Vec<_>>>()?;
    for f in contained_files {
        components.push(file_component(f)?);
    }

    let mut subject = component(root, Classification::Container)?;
    subject.name = NormalizedString::new(&doc.name);
    let tool = Component::new(
        Classification::Application,
        "cargo-xtask",
        env!("CARGO_PKG_VERSION"),
        None,
    );
    let timestamp = DateTime::try_from(doc.creation_info.created.clone())
        .map_err(|e| anyhow!("{}: the creation time: {e}", doc.name))?;
    let mut bom = Bom {
        serial_number: None,
        metadata: Some(Metadata {
            timestamp: Some(timestamp),
            tools: Some(Tools::Object {
                services: None,
                components: Some(Components(vec![tool])),
            }),
            authors: None,
            component: Some(subject),
            manufacture: None,
            supplier: root.supplier.as_deref().and_then(organization),
            licenses: None,
            properties: None,
            lifecycles: None,
        }),
        components: Some(Components(components)),
        dependencies: Some(Dependencies(
            depends_on
                .into_iter()
                .map(|(from, to)| Dependency {
                    dependency_ref: from.to_string(),
                    dependencies: to.into_iter().map(str::to_string).collect(),
                })
                .collect(),
        )),
        spec_version: SpecVersion::V1_5,
        ..Bom::default()
    };
    bom.serial_number = Some(serial_number(&json(bom.clone())?)?);
    Ok(bom)
}

/// A package and, nested, what it contains.
fn component_tree(
    p: &Package,
    children: &BTreeMap<&str, Vec<&Package>>,
    depth: usize,
) -> Result<Component> {
    if depth > 8 {
        bail!(
            "{}: CONTAINS nests more than 8 deep; is there a cycle?",
            p.spdx_id
        );
    }
    let mut c = component(p, classification(p))?;
    if let Some(inner) = children.get(p.spdx_id.as_str()) {
        let mut inner = inner
            .iter()
            .map(|q| component_tree(q, children, depth + 1))
            .collect::<Result<Vec<_>>>()?;
        inner.sort_by(|a, b| a.bom_ref.cmp(&b.bom_ref));
        c.components = Some(Components(inner));
    }
    Ok(c)
}

fn classification(p: &Package) -> Classification {
    match p.primary_package_purpose.as_deref() {
        Some("OPERATING_SYSTEM") => Classification::OperatingSystem,
        Some("APPLICATION") => Classification::Application,
        Some("CONTAINER") => Classification::Container,
        _ => Classification::Library,
    }
}

/// One SPDX package as a component; its SPDXID is its `bom-ref`, so the two files name each
/// package the same way.
fn component(p: &Package, kind: Classification) -> Result<Component> {
    let mut c = Component::new(
        kind,
        &p.name,
        p.version_info.as_deref().unwrap_or_default(),
        Some(p.spdx_id.clone()),
    );
    if p.version_info.is_none() {
        c.version = None;
    }
    c.supplier = p.supplier.as_deref().and_then(organization);
    if p.license_declared != NOASSERTION {
        c.licenses = Some(Licenses(vec![LicenseChoice::Expression(
            SpdxExpression::new(&p.license_declared),
        )]));
    }
    let hashes = p
        .checksums
        .iter()
        .map(|sum| hash(&p.spdx_id, &sum.algorithm, &sum.checksum_value))
        .collect::<Result<Vec<_>>>()?;
    if !hashes.is_empty() {
        c.hashes = Some(Hashes(hashes));
    }
    for r in &p.external_refs {
        match r.reference_type.as_str() {
            "purl" => {
                c.purl = Some(Purl::from_str(&r.reference_locator).expect("infallible"));
            }
            "cpe23Type" => c.cpe = Some(Cpe::new(&r.reference_locator)),
            _ => {}
        }
    }
    Ok(c)
}

/// One SPDX file entry as a component of type `file`: its path the name, its SPDXID the
/// `bom-ref`, its checksums the hashes.
fn file_component(f: &File) -> Result<Component> {
    let mut c = Component::new(
        Classification::File,
        f.file_name.trim_start_matches("./"),
        "",
        Some(f.spdx_id.clone()),
    );
    c.version = None;
    c.hashes = Some(Hashes(
        f.checksums
            .iter()
            .map(|sum| hash(&f.spdx_id, &sum.algorithm, &sum.checksum_value))
            .collect::<Result<Vec<_>>>()?,
    ));
    Ok(c)
}

fn hash(id: &str, algorithm: &str, value: &str) -> Result<Hash> {
    let alg = match algorithm {
        "SHA1" => HashAlgorithm::SHA1,
        "SHA256" => HashAlgorithm::SHA_256,
        "SHA512" => HashAlgorithm::SHA_512,
        other => bail!("{id}: no CycloneDX name for checksum {other}"),
    };
    Ok(Hash {
        alg,
        content: HashValue(value.to_string()),
    })
}

/// An SPDX actor (`Organization: name (email)`, `Person: name (email)`) as the organization
/// CycloneDX's `supplier` is; its address a contact.
pub fn organization(actor: &str) -> Option<OrganizationalEntity> {
    let text = actor
        .strip_prefix("Organization:")
        .or_else(|| actor.strip_prefix("Person:"))?
        .trim();
    let (name, email) = match (text.rfind(" ("), text.ends_with(')')) {
        (Some(at), true) => (&text[..at], Some(&text[at + 2..text.len() - 1])),
        _ => (text, None),
    };
    if name.is_empty() || name == NOASSERTION {
        return None;
    }
    let mut org = OrganizationalEntity::new(name);
    org.contact = email.map(|e| {
        vec![OrganizationalContact {
            bom_ref: None,
            name: None,
            email: Some(NormalizedString::new(e)),
            phone: None,
        }]
    });
    Some(org)
}

fn json(bom: Bom) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    bom.output_as_json_v1_5(&mut bytes)
        .map_err(|e| anyhow!("writing CycloneDX 1.5 JSON: {e}"))?;
    Ok(bytes)
}

/// A name-based UUID (RFC 9562 version 8, the one for hashes other than MD5 and SHA-1) of the
/// document's bytes without a serial number: the same document always gets the same serial,
/// another document another.
fn serial_number(unnumbered: &[u8]) -> Result<UrnUuid> {
    let mut b: [u8; 16] = Sha256::digest(unnumbered)[..16]
        .try_into()
        .expect("16 bytes");
    b[6] = (b[6] & 0x0f) | 0x80;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    UrnUuid::new(format!(
        "urn:uuid:{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    ))
    .map_err(|e| anyhow!("a derived serial number: {e:?}"))
}

/// The file's bytes: the crate's pretty JSON and a final newline.
pub fn bom_bytes(doc: &Document) -> Result<Vec<u8>> {
    let mut bytes = json(bom(doc)?)?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// Checks a file is the CycloneDX form of `spdx`, the platform's SPDX document: a CycloneDX
/// 1.5 BOM of the same image (its subject's SHA-256) listing the same packages (bom-refs,
/// versions and purls). Used by `receipt write` and `receipt verify`, so a release's two
/// SBOMs cannot say different things.
pub fn check_file(path: &Path, spdx: &Document) -> Result<()> {
    let bytes = crate::bounded_read::read_regular(
        path,
        crate::bounded_read::MAX_PARSED_ARTIFACT_BYTES,
        "CycloneDX SBOM",
    )?;
    let theirs = Bom::parse_from_json_v1_5(bytes.as_slice()).map_err(|e| {
        anyhow!(
            "{} is not a CycloneDX 1.5 JSON document: {e}",
            path.display()
        )
    })?;
    let ours = bom(spdx)?;
    // The subject's purl too: it names the published image by its manifest digest and
    // release tag, which `receipt verify` holds against the receipt through the SPDX file.
    let subject_hash = |b: &Bom| {
        b.metadata
            .as_ref()
            .and_then(|m| m.component.as_ref())
            .map(|c| {
                (
                    c.name.to_string(),
                    c.hashes.clone(),
                    c.purl.as_ref().map(|p| p.to_string()),
                )
            })
    };
    if subject_hash(&theirs) != subject_hash(&ours) {
        bail!(
            "{} describes another image than {}: its metadata.component is not `{}` with the \
             image's SHA-256 and the purl of its manifest digest and release tag; make both \
             with the same `cargo xtask sbom` run",
            path.display(),
            spdx.name,
            spdx.name
        );
    }
    let listed = summary(&theirs);
    let wanted = summary(&ours);
    if listed != wanted {
        let missing: Vec<_> = wanted.difference(&listed).take(3).collect();
        let extra: Vec<_> = listed.difference(&wanted).take(3).collect();
        bail!(
            "{} does not list the packages of {} (missing {missing:?}, not in the SPDX \
             document {extra:?}); make both with the same `cargo xtask sbom` run",
            path.display(),
            spdx.name
        );
    }
    // Everything else the form carries, licenses, suppliers and dependencies above all: the
    // SPDX document decides the whole BOM (`bom`), so the file must be that BOM, compared as
    // parsed documents (formatting and key order are the writer's).
    if theirs != ours {
        let mut differs: Vec<&str> = bom_parts(&theirs)
            .into_iter()
            .zip(bom_parts(&ours))
            .filter(|(a, b)| a.1 != b.1)
            .map(|(a, _)| a.0)
            .collect();
        // The last part holds every component field: named only when no narrower one is.
        if differs.len() > 1 {
            differs.retain(|part| *part != OTHER_FIELDS);
        }
        let differs = match differs.is_empty() {
            true => "serial number, version or format fields".to_string(),
            false => differs.join(", "),
        };
        bail!(
            "{} is not the CycloneDX form of {}: its {differs} differ from what the SPDX \
             document says; make both with the same `cargo xtask sbom` run",
            path.display(),
            spdx.name
        );
    }
    Ok(())
}

/// The parts of a BOM named in a mismatch, each as comparable text: which one a tampered
/// file changed (a license, a supplier, a dependency edge) is what the message says.
fn bom_parts(bom: &Bom) -> [(&'static str, String); 5] {
    let components = |pick: fn(&Component) -> String| {
        fn walk(cs: &[Component], pick: fn(&Component) -> String, out: &mut Vec<String>) {
            for c in cs {
                out.push(format!("{:?} {}", c.bom_ref, pick(c)));
                if let Some(inner) = &c.components {
                    walk(&inner.0, pick, out);
                }
            }
        }
        let mut out = Vec::new();
        if let Some(cs) = &bom.components {
            walk(&cs.0, pick, &mut out);
        }
        out.join("\n")
    };
    [
        ("licenses", components(|c| format!("{:?}", c.licenses))),
        ("suppliers", components(|c| format!("{:?}", c.supplier))),
        ("dependencies", format!("{:?}", bom.dependencies)),
        ("metadata", format!("{:?}", bom.metadata)),
        (OTHER_FIELDS, components(|c| format!("{c:?}"))),
    ]
}

const OTHER_FIELDS: &str = "other component fields";

/// (bom-ref, version, purl, hashes) of every component, nested ones included: the hashes so
/// that a file entry's (or a package's) digest cannot differ between the two files.
pub fn summary(bom: &Bom) -> BTreeSet<(String, String, String, String)> {
    fn walk(cs: &[Component], out: &mut BTreeSet<(String, String, String, String)>) {
        for c in cs {
            let hashes = c.hashes.as_ref().map(|h| {
                h.0.iter()
                    .map(|h| format!("{:?}:{}", h.alg, h.content.0))
                    .collect::<Vec<_>>()
                    .join(",")
            });
            out.insert((
                c.bom_ref.clone().unwrap_or_default(),
                c.version
                    .as_ref()
                    .map(|v| v.to_string())
                    .unwrap_or_default(),
                c.purl.as_ref().map(|p| p.to_string()).unwrap_or_default(),
                hashes.unwrap_or_default(),
            ));
            if let Some(inner) = &c.components {
                walk(&inner.0, out);
            }
        }
    }
    let mut out = BTreeSet::new();
    if let Some(cs) = &bom.components {
        walk(&cs.0, &mut out);
    }
    out
}
