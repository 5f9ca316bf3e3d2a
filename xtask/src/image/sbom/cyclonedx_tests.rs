//! The CycloneDX form of documents this crate's builder makes (`template_formats::sbom::cyclonedx`).

use crate::image::sbom::tests::{check_sbom, make, whole_checksums};
use template_formats::manifest::Platform;
use template_formats::sbom::cyclonedx::*;
use template_formats::sbom::spdx::*;
use template_verify::receipt::artifacts::read_artifacts;

const CLOCK: &str = "2026-11-30T06:17:00Z";

fn value(doc: &Document) -> serde_json::Value {
    serde_json::from_slice(&bom_bytes(doc).unwrap()).unwrap()
}

#[test]
fn the_bom_says_what_the_spdx_document_says() {
    let doc = make(
        Platform::LinuxAmd64,
        &["node_modules/@scope/cli-linux-x64"],
        CLOCK,
    );
    let v = value(&doc);
    assert_eq!(
        (
            v["bomFormat"].as_str(),
            v["specVersion"].as_str(),
            v["version"].as_i64()
        ),
        (Some("CycloneDX"), Some("1.5"), Some(1))
    );
    assert_eq!(v["metadata"]["timestamp"], CLOCK);
    let subject = &v["metadata"]["component"];
    assert_eq!(subject["type"], "container");
    assert_eq!(subject["name"], "coding-agent-linux-amd64");
    assert_eq!(subject["hashes"][0]["alg"], "SHA-256");
    assert_eq!(subject["hashes"][0]["content"], "ab".repeat(32));
    let top = v["components"].as_array().unwrap();
    let find = |list: &[serde_json::Value], r: &str| {
        list.iter()
            .find(|c| c["bom-ref"] == r)
            .unwrap_or_else(|| panic!("{r} missing"))
            .clone()
    };
    let os = find(top, "SPDXRef-OperatingSystem-debian");
    assert_eq!(
        (os["type"].as_str(), os["version"].as_str()),
        (Some("operating-system"), Some("12.12"))
    );
    let libc = find(top, "SPDXRef-deb-libc6-amd64");
    assert_eq!(libc["type"], "library");
    assert_eq!(
        libc["licenses"][0]["expression"],
        "(GPL-2.0-or-later OR Artistic-1.0) AND LGPL-2.1-or-later"
    );
    assert!(libc["purl"]
        .as_str()
        .unwrap()
        .starts_with("pkg:deb/debian/libc6@"));
    assert_eq!(libc["supplier"]["name"], "GNU Libc Maintainers");
    assert_eq!(
        libc["supplier"]["contact"][0]["email"],
        "debian-glibc@lists.debian.org"
    );
    let cli = find(top, "SPDXRef-npm-node-modules--scope-cli");
    assert_eq!(cli["hashes"][0]["alg"], "SHA-512");
    assert_eq!(cli["purl"], "pkg:npm/%40scope/cli@1.2.3");
    let node = find(top, "SPDXRef-node-node");
    assert!(
        node["cpe"]
            .as_str()
            .unwrap()
            .starts_with("cpe:2.3:a:nodejs:node.js:"),
        "{node}"
    );
    // npm's bundled package is inside npm, not beside it.
    let npm = find(top, "SPDXRef-node-npm");
    assert_eq!(
        npm["components"][0]["bom-ref"],
        "SPDXRef-npmcli-node-modules-abbrev"
    );
    assert!(top
        .iter()
        .all(|c| c["bom-ref"] != "SPDXRef-npmcli-node-modules-abbrev"));
    // Every SPDX package but the image is a component; DEPENDS_ON is the graph.
    assert_eq!(
        summary(&bom(&doc).unwrap()).len(),
        doc.packages.len() - 1 + doc.files.len()
    );
    // The SPDX file entries are components of type `file`, with the same hashes.
    let file = find(top, &doc.files[0].spdx_id);
    assert_eq!(file["type"], "file");
    assert_eq!(
        file["name"],
        "opt/coding-agents/node_modules/@scope/cli-linux-x64/bin/cli"
    );
    assert_eq!(file["hashes"][1]["alg"], "SHA-256");
    assert_eq!(
        file["hashes"][1]["content"],
        doc.files[0].checksums[1].checksum_value
    );
    let deps: Vec<(String, Vec<String>)> =
        serde_json::from_value::<Vec<serde_json::Value>>(v["dependencies"].clone())
            .unwrap()
            .into_iter()
            .map(|d| {
                (
                    d["ref"].as_str().unwrap().to_string(),
                    serde_json::from_value(d["dependsOn"].clone()).unwrap(),
                )
            })
            .collect();
    assert_eq!(
        deps,
        [
            (
                "SPDXRef-deb-libstdc--6-amd64".to_string(),
                vec![
                    "SPDXRef-deb-gcc-12-base-amd64".to_string(),
                    "SPDXRef-deb-libc6-amd64".to_string()
                ]
            ),
            (
                "SPDXRef-npm-node-modules--scope-cli".to_string(),
                vec![
                    "SPDXRef-npm-node-modules--scope-cli-linux-x64".to_string(),
                    "SPDXRef-npm-node-modules-helper".to_string()
                ]
            ),
        ]
    );
}

#[test]
fn same_document_same_bytes_and_the_serial_follows_the_content() {
    let doc = make(Platform::LinuxAmd64, &[], CLOCK);
    let a = bom_bytes(&doc).unwrap();
    assert_eq!(
        a,
        bom_bytes(&make(Platform::LinuxAmd64, &[], CLOCK)).unwrap()
    );
    let serial = |bytes: &[u8]| {
        serde_json::from_slice::<serde_json::Value>(bytes).unwrap()["serialNumber"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let s = serial(&a);
    // A version 8 UUID with RFC 9562's variant, as the CycloneDX schema's pattern wants.
    assert_eq!(
        (&s[..9], &s[23..24], s.len()),
        ("urn:uuid:", "8", 45),
        "{s}"
    );
    assert!("89ab".contains(&s[28..29]), "{s}");
    let later = bom_bytes(&make(Platform::LinuxAmd64, &[], "2026-12-03T06:17:00Z")).unwrap();
    assert_ne!(serial(&later), s);
    let arm = bom_bytes(&make(Platform::LinuxArm64, &[], CLOCK)).unwrap();
    assert_ne!(serial(&arm), s);
}

#[test]
fn check_file_accepts_only_the_form_of_the_same_document() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(cyclonedx_file_name(Platform::LinuxAmd64));
    let doc = make(Platform::LinuxAmd64, &[], CLOCK);
    std::fs::write(&path, bom_bytes(&doc).unwrap()).unwrap();
    check_file(&path, &doc).unwrap();
    // Another platform's SPDX document: another image.
    let arm = make(Platform::LinuxArm64, &[], CLOCK);
    let err = check_file(&path, &arm).unwrap_err();
    assert!(
        format!("{err:#}").contains("describes another image"),
        "{err:#}"
    );
    // The same image, a package fewer.
    let mut fewer = doc.clone();
    fewer
        .packages
        .retain(|p| p.spdx_id != "SPDXRef-deb-libc6-amd64");
    fewer.relationships.retain(|r| {
        r.spdx_element_id != "SPDXRef-deb-libc6-amd64"
            && r.related_spdx_element != "SPDXRef-deb-libc6-amd64"
    });
    let err = check_file(&path, &fewer).unwrap_err();
    assert!(
        format!("{err:#}").contains("SPDXRef-deb-libc6-amd64"),
        "{err:#}"
    );
    // The same image and packages, a file entry's SHA-256 another.
    let mut other_file = doc.clone();
    other_file.files[0].checksums[1].checksum_value = "ef".repeat(32);
    let err = check_file(&path, &other_file).unwrap_err();
    assert!(
        format!("{err:#}").contains(&doc.files[0].spdx_id),
        "{err:#}"
    );
    std::fs::write(&path, b"{\"spdxVersion\": \"SPDX-2.3\"}").unwrap();
    let err = check_file(&path, &doc).unwrap_err();
    assert!(
        format!("{err:#}").contains("is not a CycloneDX 1.5"),
        "{err:#}"
    );
    assert_eq!(
        cyclonedx_file_name(Platform::LinuxArm64),
        "sbom-linux-arm64.cdx.json"
    );
}

#[test]
fn actors_become_organizations_with_a_contact() {
    let org = organization("Organization: GitHub Inc. (npm@github.com)").unwrap();
    assert_eq!(org.name.unwrap().to_string(), "GitHub Inc.");
    let contact = &org.contact.unwrap()[0];
    assert_eq!(
        contact.email.as_ref().unwrap().to_string(),
        "npm@github.com"
    );
    let person = organization("Person: Jane Doe").unwrap();
    assert_eq!(
        (person.name.unwrap().to_string(), person.contact),
        ("Jane Doe".into(), None)
    );
    assert!(organization("NOASSERTION").is_none());
}

/// The CycloneDX project's own validator (cyclonedx-python-lib's strict JSON schema check,
/// installed by scripts/check-sbom.sh) accepts the BOM, and rejects it once broken: a
/// component type the schema does not know, and a serial number that is not a UUID.
#[test]
fn the_cyclonedx_validator_accepts_the_bom_and_rejects_broken_ones() {
    let dir = tempfile::tempdir().unwrap();
    let doc = whole_checksums(make(Platform::LinuxAmd64, &[], CLOCK));
    let good = bom_bytes(&doc).unwrap();
    let (ok, log) = check_sbom(&dir.path().join("good.cdx.json"), &good);
    assert!(ok && log.contains("valid CycloneDX 1.5"), "{log}");
    let broken = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut v: serde_json::Value = serde_json::from_slice(&good).unwrap();
        edit(&mut v);
        serde_json::to_vec(&v).unwrap()
    };
    let bad_type = broken(&|v| v["components"][0]["type"] = "operating_system".into());
    let (ok, log) = check_sbom(&dir.path().join("type.cdx.json"), &bad_type);
    assert!(
        !ok && log.contains("INVALID CycloneDX 1.5") && log.contains("operating_system"),
        "{log}"
    );
    let bad_serial = broken(&|v| v["serialNumber"] = "coding-agent-linux-amd64".into());
    let (ok, log) = check_sbom(&dir.path().join("serial.cdx.json"), &bad_serial);
    assert!(!ok && log.contains("serialNumber"), "{log}");
}

/// The verifier's reading of a release's assets (`template_verify::receipt::verify`) judges the
/// CycloneDX file against the SPDX one this crate's builder made.
#[test]
fn read_artifacts_judges_the_cyclonedx_file_against_the_spdx_one_beside_it() {
    use template_formats::sbom::{cyclonedx, cyclonedx_file_name, document_bytes, sbom_file_name};
    let dir = tempfile::tempdir().unwrap();
    let amd = Platform::LinuxAmd64;
    let clock = "2026-11-30T06:17:00Z";
    let doc = make(amd, &[], clock);
    let cdx = dir.path().join(cyclonedx_file_name(amd));
    std::fs::write(&cdx, cyclonedx::bom_bytes(&doc).unwrap()).unwrap();
    // Without its SPDX file there is nothing to judge it against (the hash is still read).
    let found = read_artifacts(dir.path());
    assert!(found.cyclonedx.is_empty());
    assert!(found.digests[&cyclonedx_file_name(amd)].is_ok());
    std::fs::write(dir.path().join(sbom_file_name(amd)), document_bytes(&doc)).unwrap();
    assert_eq!(
        read_artifacts(dir.path()).cyclonedx.get(&amd),
        Some(&Ok(()))
    );
    let arm = make(Platform::LinuxArm64, &[], clock);
    std::fs::write(&cdx, cyclonedx::bom_bytes(&arm).unwrap()).unwrap();
    let why = read_artifacts(dir.path()).cyclonedx[&amd]
        .clone()
        .unwrap_err();
    assert!(why.contains("describes another image"), "{why}");
}

/// What the form says beyond bom-refs, versions, purls and hashes is held against the SPDX
/// document too: a license, a supplier or a dependency edge edited in the CycloneDX file is
/// refused, naming what differs (before, only the packages' identities were compared, and
/// each of these edits was accepted).
#[test]
fn check_file_refuses_a_form_whose_licenses_suppliers_or_dependencies_were_edited() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(cyclonedx_file_name(Platform::LinuxAmd64));
    let doc = make(Platform::LinuxAmd64, &[], CLOCK);
    let genuine: serde_json::Value = serde_json::from_slice(&bom_bytes(&doc).unwrap()).unwrap();
    type Pick = fn(&serde_json::Value) -> bool;
    type Edit = fn(&mut serde_json::Value);
    let cases: [(&str, Pick, Edit); 3] = [
        (
            "licenses",
            |c| c.get("licenses").is_some(),
            |c| {
                c["licenses"] = serde_json::json!([{"expression": "MIT"}]);
            },
        ),
        (
            "suppliers",
            |c| c.get("supplier").is_some(),
            |c| {
                c["supplier"] = serde_json::json!({"name": "Someone Else"});
            },
        ),
        ("dependencies", |_| true, |_| {}),
    ];
    for (part, pick, edit) in cases {
        let mut bom = genuine.clone();
        if part == "dependencies" {
            let edges = bom["dependencies"]
                .as_array_mut()
                .expect("the fixture has edges");
            let first = edges
                .iter_mut()
                .find(|d| d["dependsOn"].as_array().is_some_and(|a| !a.is_empty()))
                .expect("an edge to remove");
            first["dependsOn"].as_array_mut().unwrap().pop();
        } else {
            let component = bom["components"]
                .as_array_mut()
                .unwrap()
                .iter_mut()
                .find(|c| pick(c))
                .unwrap_or_else(|| panic!("the fixture has a component with {part}"));
            edit(component);
        }
        std::fs::write(&path, serde_json::to_vec(&bom).unwrap()).unwrap();
        let err = check_file(&path, &doc).expect_err(part);
        assert!(
            format!("{err:#}").contains(&format!("its {part} differ")),
            "{part}: {err:#}"
        );
    }
    // The genuine file, re-serialised with other formatting, is still the form.
    std::fs::write(&path, serde_json::to_vec(&genuine).unwrap()).unwrap();
    check_file(&path, &doc).unwrap();
}
