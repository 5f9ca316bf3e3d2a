//! `cargo xtask sbom`: an SPDX 2.3 JSON software bill of materials of one built image.
//!
//! Made from the image itself, not from the Dockerfile: the dpkg database and the copyright
//! files Debian installs (`/usr/share/doc/<pkg>/copyright`, which the Dockerfile keeps), the
//! Debian release (`/usr/lib/os-release`, `/etc/debian_version`), and the npm packages of the
//! committed lockfile that the image holds, with Node and npm from the inventory. The image is
//! read without being started, so another CPU's image needs no emulation.
//!
//! SPDX is the primary form: the SPDX crates are unmaintained or generated at build time, so
//! the document is written here with serde types for exactly the fields it uses. The same
//! document is also written as CycloneDX 1.5 (`formats/src/sbom/cyclonedx.rs`, through the
//! CycloneDX project's `cyclonedx-bom` crate, whose newest version writes 1.5, not 1.6;
//! ARCHITECTURE.md says why 1.5 is enough), for the tools that read only CycloneDX. GitHub's attest action and `gh
//! attestation verify` read both.
//!
//! Deterministic: the same image, lockfile and clock give the same bytes. Every list is
//! sorted, the creation time is the caller's clock (`--now`, the release plan's) or else the
//! image's own creation time, never the wall clock, and the document namespace is derived
//! from the image id (the sha256 of its config).

mod classify;
mod copyright;
#[cfg(test)]
mod cyclonedx_tests;
mod document;
pub(crate) mod files;
mod input;
mod npm;
mod package_json;
mod purl;
mod run;
mod supplier;
mod trust;

use anyhow::{Context, Result};

pub use run::{run, SbomRequest};
// The file formats this module writes (the verifier reads them through the formats crate).
pub(crate) use template_formats::sbom::{
    check_file, cyclonedx, cyclonedx_file_name, sbom_file_name, sbom_file_names, spdx, Document,
};

/// The CycloneDX file `sbom --cyclonedx` writes beside the SPDX document `spdx_json`: for
/// the end-to-end tests, whose fixture SBOMs describe images with no dpkg database to scan.
pub fn cyclonedx_of_spdx_json(spdx_json: &[u8]) -> Result<Vec<u8>> {
    let doc: Document =
        serde_json::from_slice(spdx_json).context("the fixture SBOM is not an SPDX document")?;
    cyclonedx::bom_bytes(&doc)
}

/// Small inputs of every shape, shared by the modules' tests.
#[cfg(test)]
pub(crate) mod fixtures {
    pub(crate) const STATUS: &str = "\
Package: libc6
Status: install ok installed
Maintainer: GNU Libc Maintainers <debian-glibc@lists.debian.org>
Architecture: amd64
Multi-Arch: same
Source: glibc
Version: 2.36-9+deb12u13
Depends: libgcc-s1
Description: GNU C Library: Shared libraries
 Contains the standard libraries.
 Source: not-a-field

Package: libstdc++6
Status: install ok installed
Maintainer: Debian GCC Maintainers <debian-gcc@lists.debian.org>
Architecture: amd64
Source: gcc-12 (12.2.0-14)
Version: 12.2.0-14+deb12u1
Pre-Depends: gcc-12-base (= 12.2.0-14+deb12u1)
Depends: libc6 (>= 2.36), libgcc-s1 (>= 4.2) | libgcc1:any

Package: gcc-12-base
Status: install ok installed
Maintainer: Debian GCC Maintainers <debian-gcc@lists.debian.org>
Architecture: amd64
Source: gcc-12 (12.2.0-14)
Version: 12.2.0-14+deb12u1

Package: removed-one
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0
";

    pub(crate) const DEP5: &str = "\
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: glibc

Files: *
Copyright: 1991-2023 Free Software Foundation
License: LGPL-2.1+

Files: debian/*
Copyright: Debian
License: GPL-2+ or Artistic

License: LGPL-2.1+
 The text.
";

    /// A free-form copyright file: prose and a reference to /usr/share/common-licenses.
    pub(crate) const FREE_FORM: &str = "\
This is the Debian prepackaged version of the GNU compiler collection.

GCC is free software; you can redistribute it and/or modify it under the terms of the GNU
General Public License as published by the Free Software Foundation; either version 3, or
(at your option) any later version.

On Debian GNU/Linux systems, the complete text of the GNU General Public License is in
`/usr/share/common-licenses/GPL-3'.
";

    pub(crate) const OS_RELEASE: &str = "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\nVERSION_CODENAME=bookworm\nID=debian\n";
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::document::*;
    use super::input::SbomInput;
    use super::package_json::npm_manifest;
    use super::*;
    use crate::image::dpkg::os_release;
    use fixtures::*;
    use std::path::Path;
    use template_formats::manifest::Platform;
    use template_formats::model::inventory::Inventory;
    use template_formats::model::lockfile::Lockfile;
    use template_formats::sbom::document_bytes;
    use template_formats::sbom::spdx::{package, Checksum, Package, Relationship, NOASSERTION};

    fn lockfile() -> Lockfile {
        Lockfile::parse(
            r#"{"lockfileVersion": 3, "packages": {
              "": {"name": "template"},
              "node_modules/@scope/cli": {"version": "1.2.3",
                "resolved": "https://registry.npmjs.org/@scope/cli/-/cli-1.2.3.tgz",
                "integrity": "sha512-AAEC", "dependencies": {"helper": "^2"},
                "optionalDependencies": {"@scope/cli-linux-x64": "1.2.3",
                  "@scope/cli-linux-arm64": "1.2.3"}},
              "node_modules/helper": {"version": "2.0.0",
                "resolved": "https://registry.npmjs.org/helper/-/helper-2.0.0.tgz",
                "integrity": "sha512-AAEC", "dependencies": {"absent": "^1"}},
              "node_modules/@scope/cli-linux-x64": {"version": "1.2.3", "optional": true,
                "os": ["linux"], "cpu": ["x64"],
                "resolved": "https://registry.npmjs.org/@scope/cli-linux-x64/-/cli-linux-x64-1.2.3.tgz",
                "integrity": "sha512-AwQF"},
              "node_modules/@scope/cli-linux-arm64": {"version": "1.2.3", "optional": true,
                "os": ["linux"], "cpu": ["arm64"],
                "resolved": "https://registry.npmjs.org/@scope/cli-linux-arm64/-/cli-linux-arm64-1.2.3.tgz",
                "integrity": "sha512-BgcI"},
              "node_modules/@scope/cli-linux-x64-musl": {"version": "1.2.3", "optional": true,
                "os": ["linux"], "cpu": ["x64"], "libc": ["musl"],
                "resolved": "https://registry.npmjs.org/x/-/x-1.2.3.tgz", "integrity": "sha512-CQ=="},
              "node_modules/@scope/cli-darwin-x64": {"version": "1.2.3", "optional": true,
                "os": ["darwin"], "cpu": ["x64"],
                "resolved": "https://registry.npmjs.org/y/-/y-1.2.3.tgz", "integrity": "sha512-Cg=="},
              "node_modules/devtool": {"version": "1.0.0", "dev": true,
                "resolved": "https://registry.npmjs.org/devtool/-/devtool-1.0.0.tgz", "integrity": "sha512-Cw=="}
            }}"#,
        )
        .unwrap()
    }

    /// The committed inventory with the fixture's packages; `helper` carries `publisher` (what
    /// `lock` records from the packument's `_npmUser`) when given.
    fn inventory(helper_publisher: Option<&str>) -> Inventory {
        // Any inventory this tool wrote will do (its packages are replaced below): read when the
        // test runs, not compiled in, so a relock of template/ does not recompile the tests.
        let written = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../template/inventory.json"),
        )
        .unwrap();
        let mut value: serde_json::Value = serde_json::from_str(&written).unwrap();
        let mut helper = serde_json::json!({
            "name": "helper", "version": "2.0.0", "path": "node_modules/helper",
            "top_level": false, "integrity": "sha512-AAEC",
            "resolved": "https://registry.npmjs.org/helper/-/helper-2.0.0.tgz",
            "install_script": false, "prerelease": false, "license": {"kind": "undeclared"}
        });
        if let Some(name) = helper_publisher {
            helper["publisher"] = serde_json::json!({"name": name, "email": "r@example.org"});
        }
        value["packages"] = serde_json::json!([{
            "name": "@scope/cli", "version": "1.2.3", "path": "node_modules/@scope/cli",
            "top_level": true, "integrity": "sha512-AAEC",
            "resolved": "https://registry.npmjs.org/@scope/cli/-/cli-1.2.3.tgz",
            "install_script": false, "prerelease": false,
            "license": {"kind": "spdx", "expression": "Apache-2.0 OR MIT"}
        }, helper]);
        serde_json::from_value(value).unwrap()
    }

    pub(crate) fn make(platform: Platform, present: &[&str], created: &str) -> Document {
        make_with(
            platform,
            present,
            created,
            r#"{"repository": "github:helpers/helper"}"#,
            None,
        )
    }

    /// `make`, with the package.json of `helper` and its registry publisher given.
    fn make_with(
        platform: Platform,
        present: &[&str],
        created: &str,
        helper_json: &str,
        helper_publisher: Option<&str>,
    ) -> Document {
        make_from(
            platform,
            present,
            created,
            helper_json,
            &inventory(helper_publisher),
        )
    }

    /// The fixture inventory (`inventory(None)`), for a test to edit before `make_from`.
    pub(super) fn fixture_inventory() -> Inventory {
        inventory(None)
    }

    /// `make_with`, from a given inventory.
    pub(super) fn make_from(
        platform: Platform,
        present: &[&str],
        created: &str,
        helper_json: &str,
        inventory: &Inventory,
    ) -> Document {
        let docs = copyright::doc_tree(
            vec![
                ("doc/libc6/copyright".into(), DEP5.as_bytes().to_vec()),
                (
                    "doc/gcc-12-base/copyright".into(),
                    FREE_FORM.as_bytes().to_vec(),
                ),
            ],
            vec![("doc/libstdc++6".into(), "gcc-12-base".into())],
        );
        let manifest = |json: &str| npm_manifest(json.as_bytes()).unwrap();
        let npm_manifests = BTreeMap::from([
            (
                "node_modules/@scope/cli".to_string(),
                manifest(r#"{"author": {"name": "Scope Inc.", "email": "dev@scope.example"}}"#),
            ),
            ("node_modules/helper".to_string(), manifest(helper_json)),
        ]);
        let npm_cli = BTreeMap::from([
            (
                String::new(),
                manifest(r#"{"name": "npm", "license": "Artistic-2.0", "author": "GitHub Inc."}"#),
            ),
            (
                "node_modules/abbrev".to_string(),
                manifest(
                    r#"{"name": "abbrev", "version": "2.0.0", "license": "ISC", "author": "GitHub Inc."}"#,
                ),
            ),
        ]);
        let lock = lockfile();
        let present: BTreeSet<String> = present.iter().map(|s| s.to_string()).collect();
        let os = os_release(OS_RELEASE);
        document(&SbomInput {
            platform,
            image: "coding-agent:abc",
            image_id: &format!("sha256:{}", "ab".repeat(32)),
            created,
            dpkg_status: STATUS,
            docs: &docs,
            os_release: &os,
            debian_version: "12.12\n",
            lockfile: &lock,
            present: &present,
            inventory,
            npm_manifests: &npm_manifests,
            npm_cli: &npm_cli,
            elf_files: &fixture_elf_files(),
            published: Some(FIXTURE_PUBLISHED),
        })
        .unwrap()
    }

    /// Where the fixture documents' image was published.
    pub(crate) const FIXTURE_PUBLISHED: template_formats::sbom::PublishedImage<'static> =
        template_formats::sbom::PublishedImage {
            repository: "ghcr.io/sandbox0/coding-agent",
            manifest_digest:
                "sha256:4803ffff59463b698617f3546bceff6b4c6280748d5936c1d814d1c338f4babf",
            tag: "2026.11.30-0123456789ab",
        };

    /// The image package names the image as consumers pull it: a `pkg:oci` purl with the
    /// manifest digest, the architecture, the repository and the release tag; the CycloneDX
    /// form's subject carries the same purl.
    #[test]
    fn the_image_is_named_by_its_manifest_digest_and_release_tag() {
        let doc = make(Platform::LinuxArm64, &[], "2026-11-30T04:37:00Z");
        let root = &doc.packages[0];
        let purls: Vec<&str> = root
            .external_refs
            .iter()
            .filter(|r| r.reference_type == "purl")
            .map(|r| r.reference_locator.as_str())
            .collect();
        assert_eq!(
            purls,
            vec![
                "pkg:oci/coding-agent@sha256%3A4803ffff59463b698617f3546bceff6b4c6280748d5936c1d814d1c338f4babf\
                 ?arch=arm64&repository_url=ghcr.io/sandbox0/coding-agent&tag=2026.11.30-0123456789ab"
            ]
        );
        let bom = cyclonedx::bom(&doc).unwrap();
        let subject = bom.metadata.unwrap().component.unwrap();
        assert_eq!(subject.purl.unwrap().to_string(), purls[0]);
        assert_eq!(subject.bom_ref.as_deref(), Some(ROOT_ID));
    }

    /// One ELF program no package owns, as `files::elf_files` reads it.
    pub(crate) fn fixture_elf_files() -> Vec<files::ElfFile> {
        vec![files::ElfFile {
            path: "opt/coding-agents/node_modules/@scope/cli-linux-x64/bin/cli".into(),
            size: 3,
            sha256: "ab".repeat(32),
            sha1: "cd".repeat(20),
        }]
    }

    /// The image CONTAINS each file entry, which carries SHA1 (SPDX 2.3 requires it) and
    /// SHA-256, a relative name, and no license claim; the root, and only it, is then
    /// `filesAnalyzed` (SPDX 2.3 §7.8).
    #[test]
    fn the_image_contains_its_unowned_elf_programs_as_file_entries() {
        let doc = make(Platform::LinuxAmd64, &[], "2026-11-30T06:17:00Z");
        let id = "SPDXRef-File-opt-coding-agents-node-modules--scope-cli-linux-x64-bin-cli";
        assert_eq!(doc.files.len(), 1);
        let f = &doc.files[0];
        assert_eq!(f.spdx_id, id);
        assert_eq!(
            f.file_name,
            "./opt/coding-agents/node_modules/@scope/cli-linux-x64/bin/cli"
        );
        let algorithms: Vec<&str> = f.checksums.iter().map(|c| c.algorithm.as_str()).collect();
        assert_eq!(algorithms, ["SHA1", "SHA256"]);
        assert!(doc.relationships.contains(&Relationship {
            spdx_element_id: ROOT_ID.into(),
            relationship_type: "CONTAINS".into(),
            related_spdx_element: id.into(),
        }));
        assert!(doc.packages[0].files_analyzed);
        assert!(doc.packages[1..].iter().all(|p| !p.files_analyzed));
        let text = String::from_utf8(document_bytes(&doc)).unwrap();
        assert!(
            text.contains("\"files\": ["),
            "the files are in the document's bytes"
        );
    }

    fn find<'a>(doc: &'a Document, id: &str) -> &'a Package {
        doc.packages.iter().find(|p| p.spdx_id == id).unwrap()
    }

    #[test]
    fn the_document_lists_what_the_platform_installs() {
        let doc = make(
            Platform::LinuxAmd64,
            &["node_modules/@scope/cli-linux-x64"],
            "2026-11-30T06:17:00Z",
        );
        assert_eq!(doc.spdx_version, "SPDX-2.3");
        assert_eq!(doc.packages[0].spdx_id, "SPDXRef-image");
        let names: Vec<&str> = doc.packages.iter().map(|p| p.name.as_str()).collect();
        for wanted in [
            "libc6",
            "libstdc++6",
            "debian",
            "node",
            "npm",
            "@scope/cli",
            "@scope/cli-linux-x64",
        ] {
            assert!(names.contains(&wanted), "{wanted} missing from {names:?}");
        }
        for unwanted in [
            "removed-one",
            "@scope/cli-linux-arm64",
            "@scope/cli-linux-x64-musl",
            "@scope/cli-darwin-x64",
            "devtool",
        ] {
            assert!(!names.contains(&unwanted), "{unwanted} listed: {names:?}");
        }
        let cli = find(&doc, "SPDXRef-npm-node-modules--scope-cli");
        assert_eq!(cli.license_declared, "Apache-2.0 OR MIT");
        assert_eq!(
            cli.checksums,
            [Checksum {
                algorithm: "SHA512".into(),
                checksum_value: "000102".into()
            }]
        );
        assert_eq!(
            cli.download_location,
            "https://registry.npmjs.org/@scope/cli/-/cli-1.2.3.tgz"
        );
        assert_eq!(
            cli.external_refs[0].reference_locator,
            "pkg:npm/%40scope/cli@1.2.3"
        );
        let libc = find(&doc, "SPDXRef-deb-libc6-amd64");
        assert_eq!(
            libc.license_declared,
            "(GPL-2.0-or-later OR Artistic-1.0) AND LGPL-2.1-or-later"
        );
        // A machine-readable file's license is concluded too; a free-form file's, reached
        // through a doc directory that is a link, is declared only.
        assert_eq!(libc.license_concluded, libc.license_declared);
        let libstdcxx = find(&doc, "SPDXRef-deb-libstdc--6-amd64");
        assert_eq!(libstdcxx.license_declared, "GPL-3.0-or-later");
        assert_eq!(libstdcxx.license_concluded, NOASSERTION);
        // Scanners' keys: the source package as trivy reads it, the purl as syft writes it,
        // the supplier from Maintainer.
        assert_eq!(
            libstdcxx.source_info.as_deref(),
            Some("built package from: gcc-12 12.2.0-14")
        );
        assert_eq!(
            libstdcxx.external_refs[0].reference_locator,
            "pkg:deb/debian/libstdc%2B%2B6@12.2.0-14%2Bdeb12u1?arch=amd64&distro=debian-12&upstream=gcc-12%4012.2.0-14"
        );
        assert_eq!(
            libc.supplier.as_deref(),
            Some("Organization: GNU Libc Maintainers (debian-glibc@lists.debian.org)")
        );
        assert_eq!(
            cli.supplier.as_deref(),
            Some("Organization: Scope Inc. (dev@scope.example)")
        );
        assert_eq!(cli.license_concluded, cli.license_declared);
        let node = find(&doc, "SPDXRef-node-node");
        assert_eq!(
            node.version_info.as_deref(),
            Some(inventory(None).node.version.as_str())
        );
        assert_eq!(
            node.checksums[0].checksum_value,
            inventory(None).node.platforms[&Platform::LinuxAmd64].sha512
        );
        assert_eq!(
            node.external_refs[0].reference_locator,
            format!("pkg:generic/node@{}", inventory(None).node.version)
        );
        assert_eq!(node.external_refs[1].reference_type, "cpe23Type");
        let npm = find(&doc, "SPDXRef-node-npm");
        assert_eq!(npm.license_declared, "Artistic-2.0");
        assert_eq!(npm.supplier.as_deref(), Some("Organization: GitHub Inc."));
        let bundled = find(&doc, "SPDXRef-npmcli-node-modules-abbrev");
        assert_eq!(
            (
                bundled.version_info.as_deref(),
                bundled.license_declared.as_str()
            ),
            (Some("2.0.0"), "ISC")
        );
        let os = find(&doc, "SPDXRef-OperatingSystem-debian");
        assert_eq!(
            (os.name.as_str(), os.version_info.as_deref()),
            ("debian", Some("12.12"))
        );
        assert_eq!(
            os.primary_package_purpose.as_deref(),
            Some("OPERATING_SYSTEM")
        );
        // The image contains every other package, and the document describes the image.
        let kind = |k: &str| {
            doc.relationships
                .iter()
                .filter(|r| r.relationship_type == k)
                .map(|r| (r.spdx_element_id.as_str(), r.related_spdx_element.as_str()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            kind("CONTAINS").len(),
            doc.packages.len() - 1 + 1 + 1,
            "the root contains all and the file entry, npm its bundled package"
        );
        assert!(kind("CONTAINS").contains(&("SPDXRef-node-npm", bundled.spdx_id.as_str())));
        assert_eq!(
            kind("DEPENDS_ON"),
            [
                // libstdc++6 -> gcc-12-base, libc6 (libgcc-s1 is not installed).
                (
                    "SPDXRef-deb-libstdc--6-amd64",
                    "SPDXRef-deb-gcc-12-base-amd64"
                ),
                ("SPDXRef-deb-libstdc--6-amd64", "SPDXRef-deb-libc6-amd64"),
                // @scope/cli -> helper and the platform binary the image holds.
                (
                    "SPDXRef-npm-node-modules--scope-cli",
                    "SPDXRef-npm-node-modules--scope-cli-linux-x64"
                ),
                (
                    "SPDXRef-npm-node-modules--scope-cli",
                    "SPDXRef-npm-node-modules-helper"
                ),
            ]
        );
        assert_eq!(
            stats(&doc),
            SbomStats {
                debian_packages: 3,
                debian_with_license: 3,
                debian_with_concluded_license: 1,
                debian_with_source: 3,
                npm_packages: 3,
                npm_with_license: 1,
                npm_bundled: 1,
                packages: doc.packages.len(),
                // The platform binary names no author: its scope's owner supplies it.
                packages_with_supplier: doc.packages.len(),
                depends_on: 4,
                // Every package but the root, npm's bundled one inside npm, and the one file.
                contains: doc.packages.len() + 1,
                license_refs: 0,
                files: 1,
            }
        );
        assert!(doc
            .relationships
            .iter()
            .any(|r| r.spdx_element_id == "SPDXRef-DOCUMENT"
                && r.relationship_type == "DESCRIBES"
                && r.related_spdx_element == "SPDXRef-image"));
        // The platform binary npm installed but the image lacks is not listed.
        let without = make(Platform::LinuxAmd64, &[], "2026-11-30T06:17:00Z");
        assert_eq!(without.packages.len(), doc.packages.len() - 1);
        // arm64 gets its own binaries and Node.
        let arm = make(
            Platform::LinuxArm64,
            &["node_modules/@scope/cli-linux-arm64"],
            "2026-11-30T06:17:00Z",
        );
        assert!(arm
            .packages
            .iter()
            .any(|p| p.name == "@scope/cli-linux-arm64"));
        assert_ne!(arm.document_namespace, doc.document_namespace);
    }

    #[test]
    fn the_same_inputs_give_the_same_bytes_and_the_clock_is_an_input() {
        let a = document_bytes(&make(Platform::LinuxAmd64, &[], "2026-11-30T06:17:00Z"));
        let b = document_bytes(&make(Platform::LinuxAmd64, &[], "2026-11-30T06:17:00Z"));
        assert_eq!(a, b);
        let later = document_bytes(&make(Platform::LinuxAmd64, &[], "2026-12-03T06:17:00Z"));
        assert_ne!(a, later);
        let doc: Document = serde_json::from_slice(&a).unwrap();
        assert_eq!(doc.creation_info.created, "2026-11-30T06:17:00Z");
        assert_eq!(
            doc.document_namespace,
            format!(
                "https://spdx.org/spdxdocs/coding-agent-linux-amd64-{}",
                "ab".repeat(32)
            )
        );
        // Required SPDX 2.3 document fields, spelled as the spec spells them.
        let value: serde_json::Value = serde_json::from_slice(&a).unwrap();
        for key in [
            "spdxVersion",
            "dataLicense",
            "SPDXID",
            "name",
            "documentNamespace",
            "creationInfo",
        ] {
            assert!(value.get(key).is_some(), "{key}");
        }
        for p in value["packages"].as_array().unwrap() {
            for key in ["name", "SPDXID", "downloadLocation", "filesAnalyzed"] {
                assert!(p.get(key).is_some(), "{key} in {p}");
            }
            let id = p["SPDXID"].as_str().unwrap();
            assert!(
                id.strip_prefix("SPDXRef-")
                    .unwrap()
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-'),
                "{id}"
            );
        }
    }

    #[test]
    fn receipt_write_accepts_only_this_tool_s_sbom_of_the_platform() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(sbom_file_name(Platform::LinuxAmd64));
        let doc = make(Platform::LinuxAmd64, &[], "2026-11-30T06:17:00Z");
        std::fs::write(&path, document_bytes(&doc)).unwrap();
        assert_eq!(check_file(&path, Platform::LinuxAmd64).unwrap(), doc);
        let err = check_file(&path, Platform::LinuxArm64).unwrap_err();
        assert!(format!("{err:#}").contains("linux/arm64"), "{err:#}");
        std::fs::write(&path, br#"{"bomFormat": "CycloneDX"}"#).unwrap();
        let err = check_file(&path, Platform::LinuxAmd64).unwrap_err();
        assert!(
            format!("{err:#}").contains("is not an SPDX 2.3 document"),
            "{err:#}"
        );
    }

    #[test]
    fn file_names_are_fixed_per_platform() {
        assert_eq!(
            sbom_file_name(Platform::LinuxArm64),
            "sbom-linux-arm64.spdx.json"
        );
    }

    #[test]
    fn the_root_contains_every_package_and_ids_must_be_unique() {
        let a = package("a", "SPDXRef-npm-a".into(), "1", NOASSERTION);
        let rels = relationships(ROOT_ID, std::slice::from_ref(&a), vec![]).unwrap();
        assert_eq!(rels.len(), 2);
        assert!(rels.iter().any(|r| r.relationship_type == "DESCRIBES"
            && r.spdx_element_id == "SPDXRef-DOCUMENT"
            && r.related_spdx_element == ROOT_ID));
        assert!(rels.iter().any(|r| r.relationship_type == "CONTAINS"
            && r.spdx_element_id == ROOT_ID
            && r.related_spdx_element == "SPDXRef-npm-a"));
        let dangling = vec![(
            "SPDXRef-npm-a".to_string(),
            "SPDXRef-npm-b".to_string(),
            "DEPENDS_ON",
        )];
        let err = relationships(ROOT_ID, std::slice::from_ref(&a), dangling).unwrap_err();
        assert!(err.to_string().contains("SPDXRef-npm-b"), "{err}");
        assert!(ensure_unique_ids(std::slice::from_ref(&a)).is_ok());
        let err = ensure_unique_ids(&[a.clone(), a]).unwrap_err();
        assert!(err.to_string().contains("SPDXRef-npm-a"), "{err}");
    }

    /// The fixture lockfile's integrities are shortened; SPDX and CycloneDX want a whole
    /// SHA-512.
    pub(super) fn whole_checksums(mut doc: Document) -> Document {
        for p in &mut doc.packages {
            for c in &mut p.checksums {
                if c.algorithm == "SHA512" {
                    c.checksum_value = "ab".repeat(64);
                }
            }
        }
        doc
    }

    /// scripts/check-sbom.sh on `bytes` written to `path`: whether it passed, and its log.
    pub(super) fn check_sbom(path: &Path, bytes: &[u8]) -> (bool, String) {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/check-sbom.sh");
        std::fs::write(path, bytes).unwrap();
        let out = std::process::Command::new("bash")
            .arg(&script)
            .arg(path)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// SPDX's validator, the official JSON schema and the NTIA checker (scripts/check-sbom.sh,
    /// which installs them) accept the document, and reject it once broken the ways the issue
    /// found it broken: the prose spelling of the OS purpose, a component without a supplier, a
    /// LicenseRef used but not defined.
    #[test]
    fn independent_validators_accept_the_document_and_reject_broken_ones() {
        let dir = tempfile::tempdir().unwrap();
        let doc = whole_checksums(make(Platform::LinuxAmd64, &[], "2026-11-30T06:17:00Z"));
        let check =
            |name: &str, doc: &Document| check_sbom(&dir.path().join(name), &document_bytes(doc));
        let (ok, log) = check("good.spdx.json", &doc);
        assert!(ok, "{log}");
        let mut prose = doc.clone();
        prose.packages.iter_mut().for_each(|p| {
            if p.spdx_id == OS_ID {
                p.primary_package_purpose = Some("OPERATING-SYSTEM".into());
            }
        });
        let (ok, log) = check("prose.spdx.json", &prose);
        assert!(!ok && log.contains("JSON schema: INVALID"), "{log}");
        let mut anonymous = doc.clone();
        anonymous.packages[1].supplier = None;
        let (ok, log) = check("anonymous.spdx.json", &anonymous);
        assert!(
            !ok && log.contains("NTIA minimum elements NOT met"),
            "{log}"
        );
        // A file entry without the SHA1 SPDX 2.3 requires; an image that CONTAINS files but
        // says its files were not analyzed.
        let mut no_sha1 = doc.clone();
        no_sha1.files[0].checksums.retain(|c| c.algorithm != "SHA1");
        let (ok, log) = check("no-sha1.spdx.json", &no_sha1);
        assert!(!ok && log.contains("must contain a SHA1"), "{log}");
        let mut unanalyzed = doc.clone();
        unanalyzed.packages[0].files_analyzed = false;
        let (ok, log) = check("unanalyzed.spdx.json", &unanalyzed);
        assert!(!ok && log.contains("files_analyzed is False"), "{log}");
        let mut undefined = doc;
        undefined.packages[1].license_declared = "LicenseRef-undefined".into();
        let (ok, log) = check("undefined.spdx.json", &undefined);
        assert!(!ok && log.contains("pyspdxtools 0.8.5: INVALID"), "{log}");
    }

    /// The NTIA failure the registry's publisher closes, opencode-ai's case: an unscoped npm package whose
    /// package.json names no author, repository or anyone. The NTIA checker refuses the SBOM
    /// while the inventory has no publisher for it, and accepts it once the inventory records the
    /// registry's publisher (which `lock` reads from the packument's `_npmUser`).
    #[test]
    fn the_registry_s_publisher_supplies_a_package_that_names_no_one() {
        let dir = tempfile::tempdir().unwrap();
        let of = |publisher: Option<&str>| {
            whole_checksums(make_with(
                Platform::LinuxAmd64,
                &[],
                "2026-11-30T06:17:00Z",
                "{}",
                publisher,
            ))
        };
        let before = of(None);
        assert_eq!(
            find(&before, "SPDXRef-npm-node-modules-helper").supplier,
            None
        );
        let path = dir.path().join("before.spdx.json");
        let (ok, log) = check_sbom(&path, &document_bytes(&before));
        assert!(
            !ok && log.contains("NTIA minimum elements NOT met"),
            "{log}"
        );
        let after = of(Some("releaser"));
        assert_eq!(
            find(&after, "SPDXRef-npm-node-modules-helper")
                .supplier
                .as_deref(),
            Some("Person: releaser (r@example.org)")
        );
        let path = dir.path().join("after.spdx.json");
        let (ok, log) = check_sbom(&path, &document_bytes(&after));
        assert!(ok && log.contains("NTIA minimum elements met"), "{log}");
    }
}
