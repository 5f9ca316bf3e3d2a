//! The npm side: which lockfile packages an image of a platform holds, and their SPDX
//! packages; Node and npm themselves from the inventory.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{bail, Context, Result};

use super::copyright::{concluded_license, Evidence};
use super::input::{Edge, SbomInput, NPM_CLI_PREFIX, NPM_PREFIX};
use super::package_json::NpmManifest;
use super::purl::{node_cpe, node_purl, npm_purl};
use super::supplier::{actor, supplier};
use template_formats::model::inventory::Publisher;
use template_formats::model::inventory::{InventoryPackage, License};
use template_formats::model::lockfile::LockEntry;
pub(crate) use template_formats::model::lockfile::{is_platform_specific, name_of, npm_candidates};
use template_formats::paths::{INVENTORY, PACKAGE_LOCK};
use template_formats::sbom::spdx::{
    cpe_ref, package, purl_ref, spdx_id, Checksum, Package, NOASSERTION,
};

/// SRI integrity (`sha512-<base64>`, possibly several) as SPDX checksums.
fn integrity_checksums(integrity: &str) -> Result<Vec<Checksum>> {
    use base64::Engine as _;
    let mut out = Vec::new();
    for part in integrity.split_whitespace() {
        let Some((algorithm, value)) = part.split_once('-') else {
            bail!("`{part}` is not subresource integrity (`sha512-<base64>`)");
        };
        let algorithm = match algorithm {
            "sha512" => "SHA512",
            "sha384" => "SHA384",
            "sha256" => "SHA256",
            "sha1" => "SHA1",
            other => bail!("`{other}` is not an integrity algorithm SPDX names"),
        };
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(value.split('?').next().unwrap_or(value))
            .with_context(|| format!("`{part}` does not hold base64"))?;
        out.push(Checksum {
            algorithm: algorithm.into(),
            checksum_value: hex::encode(bytes),
        });
    }
    out.sort();
    Ok(out)
}

/// The inventory's license of a lockfile package (recorded from the registry by `lock`), when
/// it is an SPDX expression.
fn npm_license(license: Option<&License>) -> Option<String> {
    match license {
        Some(License::Spdx { expression }) if spdx::Expression::parse(expression).is_ok() => {
            Some(expression.clone())
        }
        _ => None,
    }
}

/// The supplier of a locked npm package, in this order:
/// 1. package.json's `author`: the maker the package names itself, NTIA's "entity that
///    creates" the component; kept first, too, so the supplier of every package that names an
///    author is what it was before the registry's publisher was recorded.
/// 2. the registry's publisher (inventory `publisher`: the packument's `_npmUser`, else its
///    first maintainer): the account npm authenticated when it accepted this very tarball, so a
///    fact about the distribution (SPDX 2.3 §7.5 PackageSupplier, "the actual distribution
///    source"), where the package.json fields below are claims anyone publishing could write.
/// 3. package.json's other people (`maintainers`, `contributors`) and its repository's owner.
/// 4. the scope's owner (`scope_owner`).
pub(super) fn npm_supplier(
    name: &str,
    manifest: Option<&NpmManifest>,
    publisher: Option<&Publisher>,
) -> Option<String> {
    manifest
        .and_then(|m| m.author.clone())
        .or_else(|| publisher.and_then(supplier_of_publisher))
        .or_else(|| manifest.and_then(|m| m.supplier.clone()))
        .or_else(|| scope_owner(name))
}

/// An npm account as an SPDX actor. The old packument form `"name <email>"` arrives as a name
/// without an email, and is split here like a package.json person.
fn supplier_of_publisher(p: &Publisher) -> Option<String> {
    match &p.email {
        Some(email) => actor(&p.name, Some(email)),
        None => supplier(&p.name),
    }
}

/// Node and npm (from the inventory, installed under /usr/local), and the packages npm bundles
/// (from the image's /usr/local/lib/node_modules/npm), with npm CONTAINS each bundled one.
pub(super) fn node_packages(input: &SbomInput<'_>) -> Result<(Vec<Package>, Vec<Edge>)> {
    let node = &input.inventory.node;
    let platform = input.platform;
    let tarball = node.platforms.get(&platform).with_context(|| {
        format!("{INVENTORY} records no Node tarball for {platform}; run `cargo xtask lock`")
    })?;
    let mut out = Vec::new();
    for (name, t) in [("node", tarball), ("npm", &node.npm)] {
        let mut p = package(name, spdx_id("node", name), &t.version, &t.tarball);
        p.primary_package_purpose = Some("APPLICATION".into());
        p.checksums = vec![Checksum {
            algorithm: "SHA512".into(),
            checksum_value: t.sha512.clone(),
        }];
        p.comment = Some(format!(
            "installed under /usr/local from the npm registry tarball of {}",
            t.package
        ));
        p.annotations = vec![super::trust::tarball_annotation(
            input.inventory,
            t,
            &super::supplier::tool(),
        )];
        if name == "node" {
            // Node's license file is not installed; its supplier is the Node.js project.
            p.supplier = Some("Organization: OpenJS Foundation".into());
            p.external_refs = vec![
                purl_ref(node_purl(&t.version)),
                cpe_ref(node_cpe(&t.version)),
            ];
        } else {
            let manifest = input.npm_cli.get("").cloned().unwrap_or_default();
            if let Some(license) = manifest.license {
                p.license_concluded = concluded_license(&license, Evidence::MachineReadable);
                p.license_declared = license;
            }
            p.supplier = manifest.supplier;
            p.external_refs = vec![
                purl_ref(npm_purl("npm", &t.version)),
                cpe_ref(npm_cli_cpe(&t.version)),
            ];
        }
        out.push(p);
    }
    let npm_id = spdx_id("node", "npm");
    let mut edges = Vec::new();
    for (dir, m) in input.npm_cli.iter().filter(|(dir, _)| !dir.is_empty()) {
        let (Some(name), Some(version)) = (&m.name, &m.version) else {
            continue;
        };
        let mut p = package(name, spdx_id("npmcli", dir), version, NOASSERTION);
        debug_assert!(p.spdx_id.starts_with(super::spdx::NPM_BUNDLED_ID_PREFIX));
        p.primary_package_purpose = Some("LIBRARY".into());
        if let Some(license) = &m.license {
            p.license_concluded = concluded_license(license, Evidence::MachineReadable);
            p.license_declared = license.clone();
        }
        p.supplier = m.supplier.clone().or_else(|| scope_owner(name));
        p.external_refs = vec![purl_ref(npm_purl(name, version))];
        p.comment = Some(format!(
            "bundled in npm's own tarball: {NPM_CLI_PREFIX}/{dir}"
        ));
        edges.push((npm_id.clone(), p.spdx_id.clone(), "CONTAINS"));
        out.push(p);
    }
    Ok((out, edges))
}

/// The owner of a scoped package's scope (`@anthropic-ai/...` -> `anthropic-ai`), for a package
/// whose package.json names no one: only a scope's owner (an npm user or organisation) can
/// publish under it, so it is the package's supplier on the registry.
fn scope_owner(name: &str) -> Option<String> {
    let scope = name.strip_prefix('@')?.split('/').next()?;
    (!scope.is_empty()).then(|| format!("Organization: {scope}"))
}

/// NVD's CPE for the npm CLI (`cpe:2.3:a:npmjs:npm:<v>:*:*:*:*:node.js:*:*`).
fn npm_cli_cpe(version: &str) -> String {
    format!("cpe:2.3:a:npmjs:npm:{version}:*:*:*:*:node.js:*:*")
}

/// Where npm resolves `dependency` required from the package at `from`: the nearest
/// `node_modules/<dependency>` up the tree (Node's module resolution, which the lockfile's
/// paths follow), among the `listed` paths.
fn resolve_dependency(listed: &BTreeSet<&str>, from: &str, dependency: &str) -> Option<String> {
    let mut base = from;
    loop {
        let candidate = if base.is_empty() {
            format!("node_modules/{dependency}")
        } else {
            format!("{base}/node_modules/{dependency}")
        };
        if listed.contains(candidate.as_str()) {
            return Some(candidate);
        }
        if base.is_empty() {
            return None;
        }
        base = base.rfind("/node_modules/").map_or("", |at| &base[..at]);
    }
}

/// The lockfile's packages for the platform, leaving out the platform binaries the image lacks,
/// and their DEPENDS_ON edges (`dependencies` and `optionalDependencies` the image holds).
pub(super) fn npm_packages(input: &SbomInput<'_>) -> Result<(Vec<Package>, Vec<Edge>)> {
    let licenses: BTreeMap<(&str, &str), &License> = input
        .inventory
        .packages
        .iter()
        .map(|p| ((p.path.as_str(), p.version.as_str()), &p.license))
        .collect();
    let publishers: BTreeMap<(&str, &str), &Publisher> = input
        .inventory
        .packages
        .iter()
        .filter_map(|p| Some(((p.path.as_str(), p.version.as_str()), p.publisher.as_ref()?)))
        .collect();
    let rows: BTreeMap<(&str, &str), &InventoryPackage> = input
        .inventory
        .packages
        .iter()
        .map(|p| ((p.path.as_str(), p.version.as_str()), p))
        .collect();
    let listed: Vec<(&str, &LockEntry)> = npm_candidates(input.lockfile, input.platform)
        .into_iter()
        .filter(|(path, entry)| !is_platform_specific(entry) || input.present.contains(*path))
        .collect();
    let listed_paths: BTreeSet<&str> = listed.iter().map(|(path, _)| *path).collect();
    let mut out = Vec::new();
    let mut edges = Vec::new();
    for (path, entry) in listed {
        let name = name_of(path, entry);
        let version = entry
            .version
            .as_deref()
            .with_context(|| format!("{PACKAGE_LOCK}: `{path}` has no version"))?;
        let resolved = entry
            .resolved
            .as_deref()
            .with_context(|| format!("{PACKAGE_LOCK}: `{path}` has no resolved URL"))?;
        let integrity = entry
            .integrity
            .as_deref()
            .with_context(|| format!("{PACKAGE_LOCK}: `{path}` has no integrity"))?;
        let mut p = package(&name, spdx_id("npm", path), version, resolved);
        p.primary_package_purpose = Some("LIBRARY".into());
        if let Some(license) = npm_license(licenses.get(&(path, version)).copied()) {
            p.license_concluded = concluded_license(&license, Evidence::MachineReadable);
            p.license_declared = license;
        }
        let row = rows.get(&(path, version)).copied();
        // The trust record's supplier (trusted publishing with verified provenance) first.
        p.supplier = row
            .and_then(|r| super::trust::verified_supplier(r, input.inventory.inputs))
            .or_else(|| {
                npm_supplier(
                    &name,
                    input.npm_manifests.get(path),
                    publishers.get(&(path, version)).copied(),
                )
            });
        if let Some(row) = row {
            p.annotations = vec![super::trust::package_annotation(
                input.inventory,
                row,
                &super::supplier::tool(),
            )];
        }
        p.checksums = integrity_checksums(integrity)
            .with_context(|| format!("{PACKAGE_LOCK}: the integrity of `{path}`"))?;
        p.external_refs = vec![purl_ref(npm_purl(&name, version))];
        p.comment = Some(format!("{NPM_PREFIX}/{path}"));
        for dependency in entry
            .dependencies
            .keys()
            .chain(entry.optional_dependencies.keys())
        {
            if let Some(target) = resolve_dependency(&listed_paths, path, dependency) {
                edges.push((p.spdx_id.clone(), spdx_id("npm", &target), "DEPENDS_ON"));
            }
        }
        out.push(p);
    }
    Ok((out, edges))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::sbom::package_json::npm_manifest;
    use template_formats::model::lockfile::npm_field_matches;

    #[test]
    fn the_author_outranks_the_registry_s_publisher_which_outranks_the_rest() {
        let publisher = Publisher {
            name: "releaser".into(),
            email: Some("r@example.org".into()),
            trusted_publisher: None,
        };
        let m = |json: &str| npm_manifest(json.as_bytes()).unwrap();
        let with_author = m(r#"{"author": "Ann <ann@example.org>", "repository": "github:o/r"}"#);
        let repository_only = m(r#"{"repository": "github:o/r"}"#);
        let nothing = m("{}");
        let s = |name, manifest: Option<&NpmManifest>, publisher| {
            npm_supplier(name, manifest, publisher)
        };
        assert_eq!(
            s("a", Some(&with_author), Some(&publisher)).as_deref(),
            Some("Person: Ann (ann@example.org)")
        );
        assert_eq!(
            s("a", Some(&repository_only), Some(&publisher)).as_deref(),
            Some("Person: releaser (r@example.org)")
        );
        assert_eq!(
            s("@sc/a", Some(&nothing), Some(&publisher)).as_deref(),
            Some("Person: releaser (r@example.org)")
        );
        // Without a publisher, what it was before: package.json's people, then the scope.
        assert_eq!(
            s("a", Some(&repository_only), None).as_deref(),
            Some("Organization: o")
        );
        assert_eq!(
            s("@sc/a", Some(&nothing), None).as_deref(),
            Some("Organization: sc")
        );
        // opencode-ai's case: no author, repository or scope, and no publisher: no supplier.
        assert_eq!(s("opencode-ai", Some(&nothing), None), None);
        let old_form = Publisher {
            name: "bob <bob@example.org>".into(),
            email: None,
            trusted_publisher: None,
        };
        assert_eq!(
            s("opencode-ai", Some(&nothing), Some(&old_form)).as_deref(),
            Some("Person: bob (bob@example.org)")
        );
    }

    #[test]
    fn a_scope_s_owner_supplies_what_names_no_author() {
        assert_eq!(
            scope_owner("@anthropic-ai/claude-code-linux-x64").as_deref(),
            Some("Organization: anthropic-ai")
        );
        assert_eq!(scope_owner("opencode-ai"), None);
    }

    #[test]
    fn dependencies_resolve_to_the_nearest_node_modules() {
        let listed = BTreeSet::from([
            "node_modules/a",
            "node_modules/b",
            "node_modules/a/node_modules/b",
            "node_modules/a/node_modules/c",
        ]);
        let resolve = |from, dep| resolve_dependency(&listed, from, dep);
        assert_eq!(
            resolve("node_modules/a", "b").as_deref(),
            Some("node_modules/a/node_modules/b")
        );
        assert_eq!(
            resolve("node_modules/a/node_modules/c", "b").as_deref(),
            Some("node_modules/a/node_modules/b")
        );
        assert_eq!(
            resolve("node_modules/b", "b").as_deref(),
            Some("node_modules/b")
        );
        assert_eq!(resolve("node_modules/b", "c"), None);
    }

    #[test]
    fn npm_platform_fields_follow_npm() {
        let field = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert!(npm_field_matches(&None, "linux"));
        assert!(npm_field_matches(&field(&["linux", "darwin"]), "linux"));
        assert!(!npm_field_matches(&field(&["darwin"]), "linux"));
        assert!(npm_field_matches(&field(&["!win32"]), "linux"));
        assert!(!npm_field_matches(&field(&["!linux"]), "linux"));
    }
}
