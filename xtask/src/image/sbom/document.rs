//! The SPDX document of one image (pure over its `SbomInput`): the image itself, the Debian
//! release and its packages with their licenses, sources and dependencies, the npm side
//! (`npm.rs`), the ELF programs no package owns, and their relationships; and what it counts
//! for `sbom --json`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use super::copyright::{concluded_license, declared_license};
use super::files;
use super::input::{Edge, SbomInput};
use super::npm::{node_packages, npm_packages};
use super::purl::deb_purl;
use super::supplier::supplier;
use crate::image::dpkg::{dependency_edges, dpkg_packages, DebPackage, OsRelease};
use template_formats::manifest::Platform;
use template_formats::sbom::spdx::{
    self, cpe_ref, package, purl_ref, spdx_id, Checksum, CreationInfo, Document, ExtractedLicense,
    Package, Relationship, NOASSERTION,
};
use template_formats::sbom::SPDX_VERSION;

/// The SPDX document of one image.
pub(crate) fn document(input: &SbomInput<'_>) -> Result<Document> {
    let platform_slug = input.platform.slug();
    let (root, image_hex) = image_package(input)?;
    let mut license_refs = BTreeMap::new();
    let (debs, deb_edges) = deb_packages(input, &mut license_refs)?;
    let mut packages = vec![os_package(input.os_release, input.debian_version)];
    packages.extend(debs);
    let (node, npm_cli_edges) = node_packages(input)?;
    packages.extend(node);
    let (npm, npm_edges) = npm_packages(input)?;
    packages.extend(npm);
    packages.sort_by(|a, b| a.spdx_id.cmp(&b.spdx_id));
    ensure_unique_ids(&packages)?;
    let mut edges = deb_edges;
    edges.extend(npm_cli_edges);
    edges.extend(npm_edges);
    let mut file_elements: Vec<spdx::File> =
        input.elf_files.iter().map(files::file_element).collect();
    file_elements.sort_by(|a, b| a.spdx_id.cmp(&b.spdx_id));
    let mut relationships = relationships(&root.spdx_id, &packages, edges)?;
    relationships.extend(file_elements.iter().map(|f| Relationship {
        spdx_element_id: root.spdx_id.clone(),
        relationship_type: "CONTAINS".into(),
        related_spdx_element: f.spdx_id.clone(),
    }));
    relationships.sort();
    let mut root = root;
    // The image's files were read for this document, so it may contain file entries.
    root.files_analyzed = !file_elements.is_empty();
    packages.insert(0, root);

    Ok(Document {
        spdx_version: SPDX_VERSION.into(),
        data_license: "CC0-1.0".into(),
        spdx_id: "SPDXRef-DOCUMENT".into(),
        name: format!("coding-agent-{platform_slug}"),
        // A URI unique to this document: one image, one platform.
        document_namespace: format!(
            "https://spdx.org/spdxdocs/coding-agent-{platform_slug}-{image_hex}"
        ),
        creation_info: CreationInfo {
            created: input.created.to_string(),
            creators: vec![super::supplier::tool()],
        },
        packages,
        relationships,
        files: file_elements,
        has_extracted_licensing_infos: extracted_licenses(&license_refs),
    })
}

/// One definition per `LicenseRef-` id used: its Debian name, and where its text is. The
/// text differs between packages that use the same name (each `public-domain` paragraph says
/// something else), so the document points at the copyright files rather than pick one.
fn extracted_licenses(refs: &BTreeMap<String, BTreeSet<String>>) -> Vec<ExtractedLicense> {
    refs.iter()
        .map(|(id, names)| {
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            ExtractedLicense {
                license_id: id.clone(),
                name: names.join(" / "),
                extracted_text: format!(
                    "A license Debian copyright files name `{}`, which has no SPDX license list \
                     identifier; its text is in the copyright file (/usr/share/doc/<package>/\
                     copyright) of each package that declares it.",
                    names.join("` or `")
                ),
            }
        })
        .collect()
}

/// The root package, the image itself, and the hex of its id.
fn image_package<'a>(input: &SbomInput<'a>) -> Result<(Package, &'a str)> {
    let Some(image_hex) = input.image_id.strip_prefix("sha256:") else {
        bail!(
            "the image id of {} is `{}`, not sha256:<hex>",
            input.image,
            input.image_id
        );
    };
    let mut root = package("coding-agent", ROOT_ID.into(), input.image, NOASSERTION);
    root.primary_package_purpose = Some("CONTAINER".into());
    root.supplier = Some(IMAGE_SUPPLIER.into());
    root.checksums = vec![Checksum {
        algorithm: "SHA256".into(),
        checksum_value: image_hex.to_string(),
    }];
    root.comment = Some(format!(
        "the {} image {}; its image id (the sha256 of its config) is {}",
        input.platform, input.image, input.image_id
    ));
    if let Some(published) = &input.published {
        // The name consumers pull it by: what `receipt verify --artifacts` holds against the
        // receipt's platform digest, and what the CycloneDX form's metadata.component carries.
        root.external_refs
            .push(purl_ref(template_formats::sbom::image_purl(
                published,
                input.platform,
            )));
        root.comment = Some(format!(
            "{}; published as {}@{} (release tag {})",
            root.comment.unwrap_or_default(),
            published.repository,
            published.manifest_digest,
            published.tag
        ));
    }
    Ok((root, image_hex))
}

pub(super) const ROOT_ID: &str = "SPDXRef-image";

/// Who supplies the image: the template's own build, which is what this document describes.
const IMAGE_SUPPLIER: &str = "Organization: coding-agent template";
/// trivy recognises the operating system only by this element id prefix (aquasecurity/trivy
/// v0.74.0, pkg/sbom/spdx/unmarshal.go `parseType`: `SPDXRef-OperatingSystem-…` is an OS,
/// anything else a library), and takes the OS family from its name and the release from its
/// version (pkg/sbom/io/decode.go `decodeComponents`).
pub(super) const OS_ID: &str = "SPDXRef-OperatingSystem-debian";
/// The SPDX 2.3 JSON schema's spelling (spdx/spdx-spec v2.3, schemas/spdx-schema.json, the
/// `primaryPackagePurpose` enum), which schema-based validators (SPDX's Java tools) require;
/// the spec's prose spells it `OPERATING-SYSTEM`, which the schema rejects. pyspdxtools 0.8.5
/// accepts both (it maps `-` to `_` before looking the name up), trivy ignores the field.
const OPERATING_SYSTEM: &str = "OPERATING_SYSTEM";

fn os_package(os: &OsRelease, debian_version: &str) -> Package {
    let mut base = package(
        if os.id.is_empty() { "debian" } else { &os.id },
        OS_ID.into(),
        debian_version.trim(),
        NOASSERTION,
    );
    base.primary_package_purpose = Some(OPERATING_SYSTEM.into());
    base.supplier = Some("Organization: The Debian Project".into());
    base.external_refs = vec![cpe_ref(format!(
        "cpe:2.3:o:debian:debian_linux:{}:*:*:*:*:*:*:*",
        os.version_id
    ))];
    base.comment = Some(format!(
        "{} (suite {}): the base root filesystem made by mmdebstrap from Debian's mirror",
        os.pretty_name, os.codename
    ));
    base
}

/// The prefix trivy reads a binary package's source from `sourceInfo` by (aquasecurity/trivy
/// v0.74.0, pkg/sbom/spdx/marshal.go `SourcePackagePrefix`, read back in unmarshal.go
/// `parsePackage`): `built package from: <source> <version>`.
const SOURCE_PACKAGE_PREFIX: &str = "built package from";

/// Debian's packages, and their DEPENDS_ON edges (by SPDX id); the LicenseRefs they use are
/// added to `license_refs` (id -> Debian names).
fn deb_packages(
    input: &SbomInput<'_>,
    license_refs: &mut BTreeMap<String, BTreeSet<String>>,
) -> Result<(Vec<Package>, Vec<Edge>)> {
    let debs = dpkg_packages(input.dpkg_status);
    if debs.is_empty() {
        bail!(
            "{}: the dpkg database lists no installed package",
            input.image
        );
    }
    let id_of = |d: &DebPackage| spdx_id("deb", &format!("{}-{}", d.name, d.architecture));
    let mut out = Vec::new();
    for d in &debs {
        let mut p = package(&d.name, id_of(d), &d.version, NOASSERTION);
        p.primary_package_purpose = Some("LIBRARY".into());
        p.source_info = Some(format!(
            "{SOURCE_PACKAGE_PREFIX}: {} {}",
            d.source, d.source_version
        ));
        p.supplier = d.maintainer.as_deref().and_then(supplier);
        if let Some(declared) = input.docs.copyright_of(&d.name).and_then(declared_license) {
            p.license_concluded = concluded_license(&declared.expression, declared.evidence);
            p.license_declared = declared.expression;
            for (id, name) in declared.license_refs {
                license_refs.entry(id).or_default().insert(name);
            }
        }
        p.external_refs = vec![purl_ref(deb_purl(d, input.os_release))];
        out.push(p);
    }
    let edges = dependency_edges(&debs)
        .into_iter()
        .map(|(a, b)| (id_of(&debs[a]), id_of(&debs[b]), "DEPENDS_ON"))
        .collect();
    Ok((out, edges))
}

pub(super) fn ensure_unique_ids(packages: &[Package]) -> Result<()> {
    let mut seen = BTreeSet::new();
    for p in packages {
        if !seen.insert(p.spdx_id.as_str()) {
            bail!(
                "two packages would share the SPDX id {}; rename one",
                p.spdx_id
            );
        }
    }
    Ok(())
}

/// The document DESCRIBES the root; the root CONTAINS every package; `edges` are the
/// packages' own (DEPENDS_ON, and CONTAINS for bundled packages), each between two listed
/// packages. Sorted.
pub(super) fn relationships(
    root_id: &str,
    packages: &[Package],
    edges: Vec<Edge>,
) -> Result<Vec<Relationship>> {
    let ids: BTreeSet<&str> = packages.iter().map(|p| p.spdx_id.as_str()).collect();
    let mut relationships: Vec<Relationship> = packages
        .iter()
        .map(|p| Relationship {
            spdx_element_id: root_id.to_string(),
            relationship_type: "CONTAINS".into(),
            related_spdx_element: p.spdx_id.clone(),
        })
        .collect();
    for (from, to, kind) in edges {
        if !ids.contains(from.as_str()) || !ids.contains(to.as_str()) {
            bail!("a {kind} relationship from {from} to {to} names a package the document does not list");
        }
        relationships.push(Relationship {
            spdx_element_id: from,
            relationship_type: kind.into(),
            related_spdx_element: to,
        });
    }
    relationships.push(Relationship {
        spdx_element_id: "SPDXRef-DOCUMENT".into(),
        relationship_type: "DESCRIBES".into(),
        related_spdx_element: root_id.to_string(),
    });
    relationships.sort();
    relationships.dedup();
    Ok(relationships)
}

/// What `sbom --json` prints.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SbomReport {
    pub output: PathBuf,
    pub sha256: String,
    pub size: u64,
    pub image: String,
    pub image_id: String,
    pub platform: Platform,
    pub debian_packages: usize,
    pub npm_packages: usize,
    pub packages: usize,
    pub coverage: SbomStats,
}

/// How much of the inventory carries what scanners and auditors read: counted from the
/// document itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SbomStats {
    pub debian_packages: usize,
    /// With a declared license (an SPDX expression, LicenseRefs included).
    pub debian_with_license: usize,
    /// With a concluded license: declared in a machine-readable copyright file.
    pub debian_with_concluded_license: usize,
    /// With their source package in the form trivy reads (`sourceInfo`).
    pub debian_with_source: usize,
    pub npm_packages: usize,
    pub npm_with_license: usize,
    /// The packages npm bundles in its own tarball.
    pub npm_bundled: usize,
    pub packages: usize,
    pub packages_with_supplier: usize,
    pub depends_on: usize,
    pub contains: usize,
    pub license_refs: usize,
    /// File entries (ELF programs no Debian package owns).
    pub files: usize,
}

pub(crate) fn stats(doc: &Document) -> SbomStats {
    let of = |prefix: &str| -> Vec<&Package> {
        doc.packages
            .iter()
            .filter(|p| p.spdx_id.starts_with(prefix))
            .collect()
    };
    let licensed = |ps: &[&Package]| {
        ps.iter()
            .filter(|p| p.license_declared != NOASSERTION)
            .count()
    };
    let debs = of("SPDXRef-deb-");
    let npm = of("SPDXRef-npm-");
    let relationships = |kind: &str| {
        doc.relationships
            .iter()
            .filter(|r| r.relationship_type == kind)
            .count()
    };
    SbomStats {
        debian_packages: debs.len(),
        debian_with_license: licensed(&debs),
        debian_with_concluded_license: debs
            .iter()
            .filter(|p| p.license_concluded != NOASSERTION)
            .count(),
        debian_with_source: debs
            .iter()
            .filter(|p| {
                p.source_info
                    .as_deref()
                    .is_some_and(|s| s.starts_with(SOURCE_PACKAGE_PREFIX))
            })
            .count(),
        npm_packages: npm.len(),
        npm_with_license: licensed(&npm),
        npm_bundled: of("SPDXRef-npmcli-").len(),
        packages: doc.packages.len(),
        packages_with_supplier: doc
            .packages
            .iter()
            .filter(|p| p.supplier.as_deref().is_some_and(|s| s != NOASSERTION))
            .count(),
        depends_on: relationships("DEPENDS_ON"),
        contains: relationships("CONTAINS"),
        license_refs: doc.has_extracted_licensing_infos.len(),
        files: doc.files.len(),
    }
}
