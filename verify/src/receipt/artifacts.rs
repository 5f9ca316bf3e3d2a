//! The release's artifact files as evidence (`receipt verify --artifacts DIR`): read from the
//! folder under their fixed names only (the IO edge, [`read_artifacts`]), and judged against
//! what the receipt records of them: each file's sha256, the install plan a Dockerfile copies,
//! the documents' contents (`policy.rs`) and what the SBOMs, verifier binaries and the folder's
//! other files are (`contents.rs`). Pure over what was read.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;

use super::policy::ArtifactDocuments;
use super::{problem, Problem, ARTIFACTS};
use template_formats::manifest::Platform;
use template_formats::model::receipt::Receipt;
use template_formats::model::transcript::{transcripts_file_name, Transcripts};

/// What a release's artifact files say, when the consumer has them (`--artifacts DIR`).
#[derive(Debug, Clone, Default)]
pub struct ArtifactEvidence {
    /// Asset name -> sha256 of the file found for it, or why there is none.
    pub digests: BTreeMap<String, Result<String, String>>,
    /// package.json, package-lock.json and inventory.json, read as their types.
    pub documents: ArtifactDocuments,
    /// Whether the Dockerfile found copies the install plan (`None`: no Dockerfile was read).
    pub dockerfile_copies_install_plan: Option<bool>,
    /// Each platform's SBOM found under its fixed name, read as this tool's SPDX document.
    pub sboms: BTreeMap<Platform, super::contents::SbomReading>,
    /// Each platform's CycloneDX SBOM found under its fixed name, checked to be the form of
    /// its SPDX SBOM (only when that one was read), or why it is not.
    pub cyclonedx: BTreeMap<Platform, Result<(), String>>,
    /// The first bytes of each platform's verifier binary found under its fixed name.
    pub verifier_heads: BTreeMap<Platform, Vec<u8>>,
    /// Each platform's transcripts found under its fixed name, read as that platform's
    /// transcripts document, or why they are not one.
    pub transcripts: BTreeMap<Platform, Result<Transcripts, String>>,
    /// The names of the files in the folder.
    pub folder: Vec<String>,
}

/// Every problem the artifact files show in `receipt`; the folder's files the receipt does
/// not account for go to `unaccounted`.
pub fn problems(
    receipt: &Receipt,
    evidence: &ArtifactEvidence,
    unaccounted: &mut Vec<String>,
) -> Vec<Problem> {
    let mut out = artifact_problems(receipt, &evidence.digests);
    // Contents are only compared for files whose digest the receipt names correctly: a
    // mismatching file is already a problem of its own.
    let named = |name: &str| {
        receipt.artifacts.iter().any(|a| {
            a.name == name
                && evidence.digests.get(name).and_then(|d| d.as_ref().ok()) == Some(&a.sha256)
        })
    };
    if named("Dockerfile")
        && evidence.dockerfile_copies_install_plan == Some(true)
        && !receipt
            .artifacts
            .iter()
            .any(|a| a.name == super::INSTALL_PLAN_ARTIFACT)
    {
        out.push(problem(
            "artifacts",
            format!(
                "has no entry for `{}`, but the release's Dockerfile copies {} and runs \
                 it: the program that split the lock into the image's layers is not vouched \
                 for; ask for a receipt that records it",
                super::INSTALL_PLAN_ARTIFACT,
                template_formats::paths::INSTALL_PLAN
            ),
        ));
    }
    let docs = &evidence.documents;
    let verified = ArtifactDocuments {
        package_json: docs.package_json.clone().filter(|_| named("package.json")),
        lockfile: docs.lockfile.clone().filter(|_| named("package-lock.json")),
        inventory: docs.inventory.clone().filter(|_| named("inventory.json")),
    };
    out.extend(super::policy::artifact_content_problems(receipt, &verified));
    if let Some(Ok(inventory)) = &verified.inventory {
        out.extend(super::inputs::inventory_problems(receipt, inventory));
    }
    out.extend(contents_problems(receipt, evidence, &verified, unaccounted));
    out
}

/// What each artifact is (its hash matched the receipt's): SBOMs, verifier binaries, and the
/// folder's other files.
fn contents_problems(
    receipt: &Receipt,
    evidence: &ArtifactEvidence,
    verified: &ArtifactDocuments,
    unaccounted: &mut Vec<String>,
) -> Vec<Problem> {
    let matches = |name: &str, sha256: &str| {
        evidence
            .digests
            .get(name)
            .and_then(|d| d.as_ref().ok())
            .map(String::as_str)
            == Some(sha256)
    };
    let sboms: BTreeMap<Platform, super::contents::SbomReading> = receipt
        .platforms
        .iter()
        .filter(|p| matches(&p.sbom.name, &p.sbom.sha256))
        .filter_map(|p| Some((p.platform, evidence.sboms.get(&p.platform)?.clone())))
        .collect();
    let heads: BTreeMap<Platform, Vec<u8>> = receipt
        .verifiers
        .iter()
        .filter(|v| matches(&v.name, &v.sha256))
        .filter_map(|v| {
            Some((
                v.platform,
                evidence.verifier_heads.get(&v.platform)?.clone(),
            ))
        })
        .collect();
    let mut out = super::contents::sbom_problems(
        receipt,
        &sboms,
        verified.lockfile.as_ref().and_then(|d| d.as_ref().ok()),
        verified.inventory.as_ref().and_then(|d| d.as_ref().ok()),
    );
    out.extend(super::contents::verifier_binary_problems(receipt, &heads));
    // A CycloneDX file whose hash the receipt records, but which is not the SPDX one's form.
    for (i, p) in receipt.platforms.iter().enumerate() {
        let Some(c) = p.cyclonedx.as_ref().filter(|c| matches(&c.name, &c.sha256)) else {
            continue;
        };
        if let Some(Err(why)) = evidence.cyclonedx.get(&p.platform) {
            out.push(problem(
                format!("platforms[{i}].cyclonedx"),
                format!(
                    "`{}` is not the CycloneDX form of `{}`: {why}",
                    c.name, p.sbom.name
                ),
            ));
        }
    }
    out.extend(transcripts_problems(receipt, evidence));
    let (problems, other) = super::contents::unaccounted_files(receipt, &evidence.folder);
    out.extend(problems);
    *unaccounted = other;
    out
}

/// A transcripts file whose hash the receipt records must be that platform's transcripts, of
/// the harnesses the receipt says ran their turns there.
fn transcripts_problems(receipt: &Receipt, evidence: &ArtifactEvidence) -> Vec<Problem> {
    let mut out = Vec::new();
    for (i, p) in receipt.platforms.iter().enumerate() {
        let Some(asset) = &p.transcripts else {
            continue;
        };
        let found = evidence
            .digests
            .get(&asset.name)
            .and_then(|d| d.as_ref().ok());
        if found != Some(&asset.sha256) {
            continue;
        }
        let field = format!("platforms[{i}].transcripts");
        match evidence.transcripts.get(&p.platform) {
            Some(Err(why)) => out.push(problem(
                field,
                format!("`{}` is not a transcripts document: {why}", asset.name),
            )),
            Some(Ok(t)) => {
                let names: Vec<&str> = t.harnesses.iter().map(|h| h.name.as_str()).collect();
                let recorded: Vec<&str> = p
                    .harnesses
                    .iter()
                    .flatten()
                    .map(|h| h.name.as_str())
                    .collect();
                if names != recorded {
                    out.push(problem(
                        field,
                        format!(
                            "`{}` holds the transcripts of {names:?}, the receipt's `harnesses` \
                             are {recorded:?}",
                            asset.name
                        ),
                    ));
                }
            }
            None => {}
        }
    }
    out
}

fn artifact_problems(
    r: &Receipt,
    found: &BTreeMap<String, Result<String, String>>,
) -> Vec<Problem> {
    let mut out = Vec::new();
    for (i, a) in r.artifacts.iter().enumerate() {
        let field = format!("artifacts[{i}]");
        if !found.contains_key(&a.name) {
            out.push(problem(
                field,
                format!("`{}` is not an artifact of a release", a.name),
            ));
            continue;
        }
        out.extend(digest_problem(found, &field, &a.name, &a.sha256));
    }
    // A verifier or SBOM name this tool never makes is not looked up (`found` has no entry):
    // it is a problem of the receipt's form.
    for (i, v) in r.verifiers.iter().enumerate() {
        out.extend(digest_problem(
            found,
            &format!("verifiers[{i}]"),
            &v.name,
            &v.sha256,
        ));
    }
    for (i, p) in r.platforms.iter().enumerate() {
        for (field, sbom) in p.sbom_assets() {
            let field = format!("platforms[{i}].{field}");
            out.extend(digest_problem(found, &field, &sbom.name, &sbom.sha256));
        }
        if let Some(t) = &p.transcripts {
            let field = format!("platforms[{i}].transcripts");
            out.extend(digest_problem(found, &field, &t.name, &t.sha256));
        }
    }
    out
}

/// The file found under `name` against the sha256 the receipt records for it at `field`.
fn digest_problem(
    found: &BTreeMap<String, Result<String, String>>,
    field: &str,
    name: &str,
    sha256: &str,
) -> Option<Problem> {
    match found.get(name)? {
        Err(why) => Some(problem(
            field,
            format!("`{name}` is not among the artifact files: {why}"),
        )),
        Ok(actual) if actual != sha256 => Some(problem(
            format!("{field}.sha256"),
            format!("`{name}` has sha256 {actual}, the receipt says {sha256}"),
        )),
        Ok(_) => None,
    }
}

/// The fixed name of a platform's SBOM asset recorded under `field` (`sbom`, `cyclonedx`).
pub fn sbom_asset_name(field: &str, platform: Platform) -> String {
    match field {
        "cyclonedx" => template_formats::sbom::cyclonedx_file_name(platform),
        _ => template_formats::sbom::sbom_file_name(platform),
    }
}

/// Reads a release's artifact files from `dir`: the sha256 of each of [`ARTIFACTS`] (streamed,
/// regular files only, bounded) and the parsed JSON of the three JSON ones. Only these fixed
/// names are looked up, so a receipt cannot make the verifier read outside `dir`.
pub fn read_artifacts(dir: &Path) -> ArtifactEvidence {
    use template_formats::bounded_read::{
        read_regular, sha256_regular, MAX_ARTIFACT_BYTES, MAX_PARSED_ARTIFACT_BYTES,
    };
    let mut evidence = ArtifactEvidence::default();
    for (name, _) in ARTIFACTS {
        let file = dir.join(name);
        let digest = sha256_regular(&file, MAX_ARTIFACT_BYTES, "release artifact")
            .map_err(|e| format!("{e:#}"));
        if digest.is_ok() && name == "Dockerfile" {
            if let Ok(bytes) = read_regular(&file, MAX_PARSED_ARTIFACT_BYTES, "release artifact") {
                evidence.dockerfile_copies_install_plan = Some(
                    super::dockerfile_copies_install_plan(&String::from_utf8_lossy(&bytes)),
                );
            }
        }
        if digest.is_ok() && name.ends_with(".json") {
            if let Ok(bytes) = read_regular(&file, MAX_PARSED_ARTIFACT_BYTES, "release artifact") {
                let docs = &mut evidence.documents;
                match name {
                    "package.json" => docs.package_json = Some(read_document(&bytes)),
                    "package-lock.json" => docs.lockfile = Some(read_document(&bytes)),
                    "inventory.json" => docs.inventory = Some(read_document(&bytes)),
                    _ => {}
                }
            }
        }
        evidence.digests.insert(name.to_string(), digest);
    }
    // The SBOMs are looked up under their fixed names too, never under a receipt's.
    for platform in Platform::ALL {
        let name = template_formats::sbom::sbom_file_name(platform);
        let digest = sha256_regular(&dir.join(&name), MAX_ARTIFACT_BYTES, "release SBOM")
            .map_err(|e| format!("{e:#}"));
        if digest.is_ok() {
            let reading = template_formats::sbom::check_file(&dir.join(&name), platform)
                .map_err(|e| format!("{e:#}"));
            evidence.sboms.insert(platform, reading);
        }
        evidence.digests.insert(name, digest);
        // The CycloneDX form, judged against the SPDX document it must say the same as.
        let name = template_formats::sbom::cyclonedx_file_name(platform);
        let path = dir.join(&name);
        let digest =
            sha256_regular(&path, MAX_ARTIFACT_BYTES, "release SBOM").map_err(|e| format!("{e:#}"));
        if let (Ok(_), Some(Ok(doc))) = (&digest, evidence.sboms.get(&platform)) {
            let reading = template_formats::sbom::cyclonedx::check_file(&path, doc)
                .map_err(|e| format!("{e:#}"));
            evidence.cyclonedx.insert(platform, reading);
        }
        evidence.digests.insert(name, digest);
        // The verifier binaries likewise; a release without them has none to check.
        let name = crate::verifier::verifier_file_name(platform);
        let path = dir.join(&name);
        let digest = sha256_regular(&path, MAX_ARTIFACT_BYTES, "verifier binary")
            .map_err(|e| format!("{e:#}"));
        if digest.is_ok() {
            if let Ok(head) = read_head(&path) {
                evidence.verifier_heads.insert(platform, head);
            }
        }
        evidence.digests.insert(name, digest);
        // The harnesses' transcripts.
        let name = transcripts_file_name(platform);
        let path = dir.join(&name);
        let digest = sha256_regular(&path, MAX_ARTIFACT_BYTES, "release transcripts")
            .map_err(|e| format!("{e:#}"));
        if digest.is_ok() {
            let reading = read_regular(&path, MAX_PARSED_ARTIFACT_BYTES, "release transcripts")
                .map_err(|e| format!("{e:#}"))
                .and_then(|bytes| Transcripts::from_bytes(&bytes, platform));
            evidence.transcripts.insert(platform, reading);
        }
        evidence.digests.insert(name, digest);
    }
    // The folder's names, to report what the receipt does not account for (bounded: a
    // download folder is small).
    if let Ok(entries) = std::fs::read_dir(dir) {
        evidence.folder = entries
            .take(10_000)
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        evidence.folder.sort();
    }
    evidence
}

/// The first 64 KiB of a regular file: enough for an ELF header and its program headers.
fn read_head(path: &Path) -> Result<Vec<u8>> {
    use std::io::Read;
    let (file, _) = template_formats::bounded_read::open_regular(
        path,
        template_formats::bounded_read::MAX_ARTIFACT_BYTES,
        "verifier binary",
    )?;
    let mut head = Vec::new();
    file.take(64 << 10).read_to_end(&mut head)?;
    Ok(head)
}

/// One artifact document as its type; strict JSON (a duplicate key is refused, as in a
/// receipt), then the type's own rules.
fn read_document<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    let value =
        template_formats::strict_json::parse(bytes).map_err(|e| format!("not valid JSON: {e}"))?;
    serde_json::from_value(value).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receipt::tests_support::*;
    use crate::receipt::verify::tests::{fields, verify_bytes, verify_sample};
    use crate::receipt::{receipt_bytes, receipt_file_name};
    use template_formats::hash::sha256_hex;

    #[test]
    fn metadata_is_checked_against_the_artifact_documents() {
        let r = sample();
        let bytes = receipt_bytes(&r);
        let name = receipt_file_name(&r.release_tag, &sha256_hex(&bytes));
        let deps: serde_json::Map<String, serde_json::Value> = r
            .packages
            .iter()
            .map(|p| (p.name.clone(), p.version.clone().into()))
            .collect();
        let mut lock = serde_json::json!({"lockfileVersion": 3, "packages": {}});
        for p in &r.packages {
            lock["packages"][format!("node_modules/{}", p.name)] =
                serde_json::json!({"version": p.version, "integrity": p.integrity});
        }
        let inventory = inventory_of(&r);
        fn typed<T: serde::de::DeserializeOwned>(
            v: &serde_json::Value,
        ) -> Option<Result<T, String>> {
            Some(Ok(serde_json::from_value(v.clone()).unwrap()))
        }
        let mut evidence = ArtifactEvidence {
            digests: ARTIFACTS
                .iter()
                .map(|(n, _)| (n.to_string(), Ok(sha256_hex(n.as_bytes()))))
                .collect(),
            documents: ArtifactDocuments {
                package_json: typed(&serde_json::json!({"dependencies": deps})),
                lockfile: typed(&lock),
                inventory: typed(&inventory),
            },
            ..Default::default()
        };
        let v = verify_bytes(&name, &bytes, Some(&evidence));
        assert!(v.valid, "{:?}", v.problems);

        lock["packages"]["node_modules/ws"]["version"] = "0.0.1".into();
        evidence.documents.lockfile = typed(&lock);
        let mut changed = inventory;
        changed["node"]["platforms"]["linux/arm64"]["integrity"] = "sha512-ZZZZ".into();
        evidence.documents.inventory = typed(&changed);
        let v = verify_bytes(&name, &bytes, Some(&evidence));
        let ws = r.packages.iter().position(|p| p.name == "ws").unwrap();
        assert!(
            fields(&v).contains(&format!("packages[{ws}].version").as_str()),
            "{:?}",
            v.problems
        );
        assert!(
            fields(&v).contains(&"node.platforms.linux/arm64"),
            "{:?}",
            v.problems
        );
    }

    #[test]
    fn an_artifact_that_is_not_its_document_is_named() {
        let docs = ArtifactDocuments {
            inventory: read_document(br#"{"node": {}}"#).map(Some).transpose(),
            ..Default::default()
        };
        assert!(matches!(docs.inventory, Some(Err(_))));
        let problems = super::super::policy::artifact_content_problems(&sample(), &docs);
        assert!(
            problems
                .iter()
                .any(|p| p.field == "artifacts" && p.problem.contains("inventory.json")),
            "{problems:?}"
        );
    }

    #[test]
    fn artifacts_are_checked_by_name() {
        let r = sample();
        let bytes = receipt_bytes(&r);
        let name = receipt_file_name(&r.release_tag, &sha256_hex(&bytes));
        let mut found = ArtifactEvidence {
            digests: ARTIFACTS
                .iter()
                .map(|(n, _)| (n.to_string(), Ok(sha256_hex(n.as_bytes()))))
                .collect(),
            ..Default::default()
        };
        assert!(verify_bytes(&name, &bytes, Some(&found)).valid);
        found
            .digests
            .insert("Dockerfile".into(), Ok(sha256_hex(b"changed")));
        found
            .digests
            .insert("manifest.yaml".into(), Err("no such file".into()));
        let v = verify_bytes(&name, &bytes, Some(&found));
        assert!(
            fields(&v).contains(&"artifacts[3].sha256"),
            "{:?}",
            v.problems
        );
        assert!(fields(&v).contains(&"artifacts[4]"), "{:?}", v.problems);
    }

    /// A receipt written while the install plan was inline in the Dockerfile records five
    /// artifacts, not six: it is still a version-2 receipt and still verifies, with its own
    /// artifact files too, as long as its Dockerfile does not copy an install plan it leaves
    /// out. One of the five missing is refused as before.
    #[test]
    fn a_receipt_from_before_the_install_plan_file_verifies_by_its_own_five_artifacts() {
        let mut old = sample();
        old.artifacts
            .retain(|a| a.name != crate::receipt::INSTALL_PLAN_ARTIFACT);
        assert_eq!(old.artifacts.len(), 5);
        let v = verify_sample(&old);
        assert!(v.valid, "{:?}", v.problems);
        let (name, bytes, mut found) = with_evidence(&old);
        // The old release's folder: no install-plan.js, a Dockerfile with the program inline.
        found.digests.insert(
            crate::receipt::INSTALL_PLAN_ARTIFACT.into(),
            Err("no such file".into()),
        );
        found.dockerfile_copies_install_plan = Some(false);
        let v = verify_bytes(&name, &bytes, Some(&found));
        assert!(v.valid, "{:?}", v.problems);

        let mut incomplete = old.clone();
        incomplete.artifacts.retain(|a| a.name != "Dockerfile");
        let v = verify_sample(&incomplete);
        assert!(
            v.problems
                .iter()
                .any(|p| p.field == "artifacts" && p.problem.contains("`Dockerfile`")),
            "{:?}",
            v.problems
        );
    }

    /// A receipt that leaves the install plan out while its Dockerfile copies one does not
    /// vouch for everything its image was made from: `--artifacts` refuses it, naming the file.
    #[test]
    fn a_receipt_without_the_install_plan_its_dockerfile_copies_is_refused() {
        let mut stripped = sample();
        stripped
            .artifacts
            .retain(|a| a.name != crate::receipt::INSTALL_PLAN_ARTIFACT);
        let (name, bytes, mut found) = with_evidence(&stripped);
        found.dockerfile_copies_install_plan = Some(true);
        let v = verify_bytes(&name, &bytes, Some(&found));
        assert!(!v.valid);
        assert!(
            v.problems.iter().any(|p| p.field == "artifacts"
                && p.problem.contains("install-plan.js")
                && p.problem.contains("template/install-plan.js")),
            "{:?}",
            v.problems
        );
        // The receipt this tool writes records it, and then the same folder verifies.
        let (name, bytes, mut found) = with_evidence(&sample());
        found.dockerfile_copies_install_plan = Some(true);
        let v = verify_bytes(&name, &bytes, Some(&found));
        assert!(v.valid, "{:?}", v.problems);
    }

    #[test]
    fn the_committed_dockerfile_copies_the_install_plan_and_the_inline_one_did_not() {
        let committed =
            std::fs::read_to_string(repo_root().join("Dockerfile")).expect("the Dockerfile");
        assert!(crate::receipt::dockerfile_copies_install_plan(&committed));
        let inline = "FROM npm AS install-plan\n\
                      COPY template/package.json template/package-lock.json /tmp/lock/\n\
                      RUN node -e 'const fs = require(\"fs\");' /plan\n";
        assert!(!crate::receipt::dockerfile_copies_install_plan(inline));
    }

    /// `r`'s file name and bytes, and artifact files that match every digest it records (the
    /// fixed artifacts hash to their own names in the sample).
    fn with_evidence(r: &Receipt) -> (String, Vec<u8>, ArtifactEvidence) {
        let bytes = receipt_bytes(r);
        let name = receipt_file_name(&r.release_tag, &sha256_hex(&bytes));
        let mut found = ArtifactEvidence::default();
        for (n, _) in ARTIFACTS {
            found.digests.insert(n.into(), Ok(sha256_hex(n.as_bytes())));
        }
        for (_, s) in r.platforms.iter().flat_map(|p| p.sbom_assets()) {
            found.digests.insert(s.name.clone(), Ok(s.sha256.clone()));
        }
        for v in &r.verifiers {
            found.digests.insert(v.name.clone(), Ok(v.sha256.clone()));
        }
        (name, bytes, found)
    }

    #[test]
    fn sboms_are_checked_by_their_fixed_name_and_hash() {
        let r = sample();
        let (name, bytes, mut found) = with_evidence(&r);
        assert!(verify_bytes(&name, &bytes, Some(&found)).valid);
        let first = r.platforms[0].sbom.name.clone();
        found
            .digests
            .insert(first.clone(), Ok(sha256_hex(b"another SBOM")));
        let v = verify_bytes(&name, &bytes, Some(&found));
        assert!(
            fields(&v).contains(&"platforms[0].sbom.sha256"),
            "{:?}",
            v.problems
        );
        found.digests.insert(first, Err("no such file".into()));
        let v = verify_bytes(&name, &bytes, Some(&found));
        assert!(
            fields(&v).contains(&"platforms[0].sbom"),
            "{:?}",
            v.problems
        );

        // A name the tool never makes (a path, another platform's) is refused by the schema
        // or the form check, so the verifier never opens it.
        for bad in [
            "../sbom-linux-amd64.spdx.json",
            "sbom-linux-arm64.spdx.json",
        ] {
            let mut t = sample();
            t.platforms[0].sbom.name = bad.into();
            let v = verify_sample(&t);
            assert!(
                v.problems
                    .iter()
                    .any(|p| p.field.starts_with("platforms[0].sbom")),
                "{bad}: {:?}",
                v.problems
            );
        }
        let mut t = sample();
        t.platforms[0].sbom.sha256 = "ABC".into();
        assert!(!verify_sample(&t).valid);
    }

    #[test]
    fn cyclonedx_sboms_are_checked_by_name_hash_and_against_the_spdx_one() {
        let r = sample();
        let (name, bytes, mut found) = with_evidence(&r);
        assert!(verify_bytes(&name, &bytes, Some(&found)).valid);
        let cdx = r.platforms[0].cyclonedx.clone().unwrap();
        // Another file under the name.
        let mut other = found.clone();
        other
            .digests
            .insert(cdx.name.clone(), Ok(sha256_hex(b"another BOM")));
        let v = verify_bytes(&name, &bytes, Some(&other));
        assert!(
            fields(&v).contains(&"platforms[0].cyclonedx.sha256"),
            "{:?}",
            v.problems
        );
        // The file is missing.
        let mut missing = found.clone();
        missing
            .digests
            .insert(cdx.name.clone(), Err("no such file".into()));
        let v = verify_bytes(&name, &bytes, Some(&missing));
        assert!(
            fields(&v).contains(&"platforms[0].cyclonedx"),
            "{:?}",
            v.problems
        );
        // The hash matches, but it does not say what the SPDX file says.
        found.cyclonedx.insert(
            r.platforms[0].platform,
            Err("does not list the packages".into()),
        );
        let v = verify_bytes(&name, &bytes, Some(&found));
        assert!(
            v.problems
                .iter()
                .any(|p| p.field == "platforms[0].cyclonedx"
                    && p.problem.contains("not the CycloneDX form")),
            "{:?}",
            v.problems
        );
        // A name the tool never makes.
        let mut t = sample();
        t.platforms[0].cyclonedx.as_mut().unwrap().name = "sbom-linux-amd64.spdx.json".into();
        assert!(verify_sample(&t)
            .problems
            .iter()
            .any(|p| p.field.starts_with("platforms[0].cyclonedx")));
        // A receipt of a release without the CycloneDX asset (null) is still valid...
        let mut old = sample();
        old.platforms.iter_mut().for_each(|p| p.cyclonedx = None);
        assert!(
            verify_sample(&old).valid,
            "{:?}",
            verify_sample(&old).problems
        );
        // ...but a CycloneDX file it does not list is not part of its release.
        let (problems, _) =
            super::super::contents::unaccounted_files(&old, std::slice::from_ref(&cdx.name));
        assert_eq!(problems.len(), 1, "{problems:?}");
    }

    #[test]
    fn verifier_binaries_are_checked_by_their_fixed_name_and_hash() {
        use crate::verifier::verifier_file_name;
        use template_formats::model::receipt::VerifierRecord;
        let mut r = sample();
        r.verifiers = Platform::ALL
            .into_iter()
            .map(|platform| VerifierRecord {
                platform,
                name: verifier_file_name(platform),
                sha256: sha256_hex(verifier_file_name(platform).as_bytes()),
            })
            .collect();
        assert!(verify_sample(&r).valid, "{:?}", verify_sample(&r).problems);
        let (name, bytes, mut found) = with_evidence(&r);
        assert!(verify_bytes(&name, &bytes, Some(&found)).valid);
        found.digests.insert(
            r.verifiers[1].name.clone(),
            Ok(sha256_hex(b"another binary")),
        );
        let v = verify_bytes(&name, &bytes, Some(&found));
        assert_eq!(fields(&v), vec!["verifiers[1].sha256"], "{:?}", v.problems);
        found
            .digests
            .insert(r.verifiers[1].name.clone(), Err("no such file".into()));
        let v = verify_bytes(&name, &bytes, Some(&found));
        assert_eq!(fields(&v), vec!["verifiers[1]"], "{:?}", v.problems);

        // Another platform's name, a path, or one platform twice: the form is refused.
        let mut t = r.clone();
        t.verifiers[0].name = verifier_file_name(Platform::LinuxArm64);
        assert!(fields(&verify_sample(&t)).contains(&"verifiers[0].name"));
        let mut t = r.clone();
        t.verifiers[0].name = "../template-verify-linux-amd64".into();
        assert!(!verify_sample(&t).valid);
        let mut t = r.clone();
        t.verifiers[1] = t.verifiers[0].clone();
        assert!(fields(&verify_sample(&t)).contains(&"verifiers[1].platform"));
    }
}
