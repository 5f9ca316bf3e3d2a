//! `receipt verify`: a receipt's bytes judged against its own digest, the published schema,
//! the manifest, the clock and (when given) the release's artifact files; pure over its inputs
//! except for the file-reading wrappers at the end.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use serde::Serialize;

use super::policy::ArtifactDocuments;
use super::{parse_receipt_file_name, problem, Problem, ARTIFACTS, SCHEMA_VERSION};
use crate::receipt_policy::{binding_problems, ReceiptPolicy};
use template_formats::hash::sha256_hex;
use template_formats::manifest::{Manifest, Platform, MANIFEST_PATH};
use template_formats::model::gate::Trigger;
use template_formats::model::publish::IndexEntry;
use template_formats::model::receipt::*;
use template_formats::oci::index::index_bytes_of;

#[derive(Debug, Default, Serialize)]
pub struct Verification {
    pub file: String,
    pub valid: bool,
    /// sha256 of the file's bytes.
    pub sha256: String,
    pub release_tag: Option<String>,
    pub reference: Option<String>,
    pub complete: Option<bool>,
    pub problems: Vec<Problem>,
    /// Files in the `--artifacts` folder that are not part of the release the receipt
    /// records (reported, not refused; an unlisted SBOM or verifier binary is a problem).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unaccounted: Vec<String>,
    #[serde(skip)]
    pub receipt: Option<Receipt>,
}

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
    /// The names of the files in the folder.
    pub folder: Vec<String>,
}

/// What a receipt is judged against besides its own bytes.
pub struct VerifyContext<'a> {
    /// The consumer's manifest: required platforms, smoke checks, Node packages.
    pub manifest: &'a Manifest,
    /// The verifier's clock (a receipt from the future is refused).
    pub now: chrono::DateTime<chrono::Utc>,
    pub artifacts: Option<&'a ArtifactEvidence>,
}

/// Verifies a receipt's bytes, pure: nothing is read but the arguments.
pub fn verify(file_name: &str, bytes: &[u8], ctx: &VerifyContext) -> Verification {
    let sha256 = sha256_hex(bytes);
    let mut v = Verification {
        file: file_name.to_string(),
        valid: false,
        sha256: sha256.clone(),
        release_tag: None,
        reference: None,
        complete: None,
        problems: Vec::new(),
        unaccounted: Vec::new(),
        receipt: None,
    };

    let named = parse_receipt_file_name(file_name);
    match named {
        None => v.problems.push(problem(
            "file name",
            format!("`{file_name}` is not `receipt-<tag>-<sha256 hex>.json`, so the receipt's own digest is unknown"),
        )),
        Some((_, hex)) if hex != sha256 => v.problems.push(problem(
            "file name",
            format!("the file's sha256 is {sha256}, not the {hex} its name claims: the receipt was changed or truncated"),
        )),
        Some(_) => {}
    }

    let value: serde_json::Value = match template_formats::strict_json::parse(bytes) {
        Ok(value) => value,
        Err(e) if e.to_string().starts_with("duplicate key") => {
            v.problems.push(problem(
                field_of_serde_error(&e.to_string()),
                format!(
                    "{e}: JSON readers disagree on which of two equal keys counts, so a receipt \
                     says each thing once"
                ),
            ));
            return v;
        }
        Err(e) => {
            v.problems.push(problem(
                "(document)",
                format!("not valid JSON ({e}); the file is truncated or not a receipt"),
            ));
            return v;
        }
    };
    match value.get("schema_version") {
        None => {
            v.problems
                .push(problem("schema_version", "missing; every receipt has one"));
            return v;
        }
        Some(serde_json::Value::Number(n)) if n.as_u64() == Some(u64::from(SCHEMA_VERSION)) => {}
        Some(serde_json::Value::Number(n)) if n.as_u64() == Some(1) => {
            v.problems.push(problem(
                "schema_version",
                format!(
                    "1 is the receipt format before 2026-12-01, which this tool no longer reads: \
                     version {SCHEMA_VERSION} records the verifier binaries and each platform's \
                     SBOM (checked for what they are, not only their hash) and requires them; a \
                     version-1 receipt cannot say what a version-{SCHEMA_VERSION} one promises. \
                     Use a release made since, or the tool of that release"
                ),
            ));
            return v;
        }
        Some(other) => {
            v.problems.push(problem(
                "schema_version",
                format!(
                    "{other} is not a schema version this tool reads (it reads {SCHEMA_VERSION}); \
                     update the tool or ask for a version-{SCHEMA_VERSION} receipt"
                ),
            ));
            return v;
        }
    }
    let against_schema = super::schema::schema_problems(&value);
    if !against_schema.is_empty() {
        v.problems.extend(against_schema);
        return v;
    }
    let receipt: Receipt = match serde_path_to_error::deserialize(value) {
        Ok(r) => r,
        Err(e) => {
            let inner = e.inner().to_string();
            v.problems.push(problem(
                field_of_deserialize_error(&e.path().to_string(), &inner),
                format!("does not match receipt schema version {SCHEMA_VERSION}: {inner}"),
            ));
            return v;
        }
    };
    v.release_tag = Some(receipt.release_tag.clone());
    v.reference = Some(receipt.index.reference.clone());
    v.complete = Some(receipt.complete);

    v.problems.extend(format_problems(&receipt));
    v.problems
        .extend(super::policy::form_problems(&receipt, ctx.now));
    v.problems
        .extend(super::policy::manifest_problems(&receipt, ctx.manifest));
    v.problems
        .extend(super::inputs::record_problems(&receipt, ctx.manifest));
    if let Some((tag, _)) = named {
        if tag != receipt.release_tag {
            v.problems.push(problem(
                "release_tag",
                format!(
                    "`{}` differs from the tag `{tag}` in the file name",
                    receipt.release_tag
                ),
            ));
        }
    }
    v.problems.extend(index_digest_problems(&receipt));
    v.problems
        .extend(super::contents::debian_set_problems(&receipt));
    let completeness = completeness_problems(&receipt, ctx.manifest);
    if !receipt.complete {
        v.problems.push(problem(
            "complete",
            "is false: the release did not pass every check on every platform and must not be used",
        ));
    } else if !completeness.is_empty() {
        v.problems.push(problem(
            "complete",
            "is true, but the receipt's own records say otherwise (see the other problems)",
        ));
    }
    v.problems.extend(completeness);
    if let Some(evidence) = ctx.artifacts {
        v.problems
            .extend(artifact_problems(&receipt, &evidence.digests));
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
            v.problems.push(problem(
                "artifacts",
                format!(
                    "has no entry for `{}`, but the release's Dockerfile copies {} and runs \
                     it: the program that split the lock into the image's layers is not vouched \
                     for; ask for a receipt that records it",
                    super::INSTALL_PLAN_ARTIFACT,
                    super::INSTALL_PLAN_PATH
                ),
            ));
        }
        let docs = &evidence.documents;
        let verified = ArtifactDocuments {
            package_json: docs.package_json.clone().filter(|_| named("package.json")),
            lockfile: docs.lockfile.clone().filter(|_| named("package-lock.json")),
            inventory: docs.inventory.clone().filter(|_| named("inventory.json")),
        };
        v.problems.extend(super::policy::artifact_content_problems(
            &receipt, &verified,
        ));
        if let Some(Ok(inventory)) = &verified.inventory {
            v.problems
                .extend(super::inputs::inventory_problems(&receipt, inventory));
        }
        v.problems.extend(contents_problems(
            &receipt,
            evidence,
            &verified,
            &mut v.unaccounted,
        ));
    }
    v.valid = v.problems.is_empty();
    v.receipt = Some(receipt);
    v
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
    let (problems, other) = super::contents::unaccounted_files(receipt, &evidence.folder);
    out.extend(problems);
    *unaccounted = other;
    out
}

/// The field a deserialization error is about: the path to where it failed, and for a
/// missing or unknown field that field's name (serde quotes it in backticks; other messages
/// quote a value, e.g. `1e29`, which is no field name).
fn field_of_deserialize_error(path: &str, message: &str) -> String {
    let path = if path == "." { "" } else { path };
    let named = ["missing field", "unknown field", "duplicate field"]
        .iter()
        .any(|start| message.starts_with(start));
    match (named, path.is_empty()) {
        (true, true) => field_of_serde_error(message),
        (true, false) => format!("{path}.{}", field_of_serde_error(message)),
        (false, true) => "(document)".to_string(),
        (false, false) => path.to_string(),
    }
}

/// serde's messages name the field in backticks ("missing field `x`", "unknown field `x`").
fn field_of_serde_error(message: &str) -> String {
    message
        .split('`')
        .nth(1)
        .filter(|f| !f.is_empty())
        .unwrap_or("(document)")
        .to_string()
}

/// What the schema cannot say: fields that must agree with each other. (Every form — tags,
/// digests, times, integrity — is the schema's, and `verify` has returned on those already.)
fn format_problems(r: &Receipt) -> Vec<Problem> {
    let mut out = Vec::new();
    if (r.trigger == Trigger::Forced) != r.gate.forced {
        out.push(problem(
            "trigger",
            format!("is {:?} but gate.forced is {}", r.trigger, r.gate.forced),
        ));
    }
    if !r.gate.due {
        out.push(problem(
            "gate.due",
            "is false: the gate did not let this run through",
        ));
    }
    if r.packages.is_empty() {
        out.push(problem("packages", "is empty"));
    }
    let mut names = BTreeSet::new();
    for (i, a) in r.artifacts.iter().enumerate() {
        if !names.insert(a.name.as_str()) {
            out.push(problem(
                format!("artifacts[{i}].name"),
                format!("`{}` is listed twice", a.name),
            ));
        }
    }
    for (name, _) in ARTIFACTS {
        if super::always_recorded(name) && !names.contains(name) {
            out.push(problem("artifacts", format!("has no entry for `{name}`")));
        }
    }
    for (i, p) in r.platforms.iter().enumerate() {
        // The engine's image id is the sha256 of the image's config: the smoke checks ran on
        // the image whose config the registry serves under this platform's manifest.
        if p.image_id != p.config_digest {
            out.push(problem(
                format!("platforms[{i}].config_digest"),
                format!(
                    "`{}` is not the smoke-tested image `{}` (image_id; an image's id is its \
                     config's digest): the smoke checks ran on another image than the one \
                     published",
                    p.config_digest, p.image_id
                ),
            ));
        }
    }
    let mut verifier_platforms = BTreeSet::new();
    for (i, v) in r.verifiers.iter().enumerate() {
        let name = crate::verifier::verifier_file_name(v.platform);
        if v.name != name {
            out.push(problem(
                format!("verifiers[{i}].name"),
                format!(
                    "is `{}`; the verifier for {} is named `{name}`",
                    v.name, v.platform
                ),
            ));
        }
        if !verifier_platforms.insert(v.platform) {
            out.push(problem(
                format!("verifiers[{i}].platform"),
                format!("{} has two verifiers", v.platform),
            ));
        }
    }
    for (i, p) in r.platforms.iter().enumerate() {
        for (field, sbom) in p.sbom_assets() {
            let sbom_name = sbom_asset_name(field, p.platform);
            if sbom.name != sbom_name {
                out.push(problem(
                    format!("platforms[{i}].{field}.name"),
                    format!(
                        "is `{}`; the SBOM of {} is named `{sbom_name}`",
                        sbom.name, p.platform
                    ),
                ));
            }
        }
        if p.architecture != p.platform.arch() || p.os != "linux" {
            out.push(problem(
                format!("platforms[{i}].architecture"),
                format!(
                    "the image says {}/{}, the record is for {}",
                    p.os, p.architecture, p.platform
                ),
            ));
        }
    }
    if r.index.tag != r.release_tag {
        out.push(problem(
            "index.tag",
            format!(
                "`{}` differs from release_tag `{}`",
                r.index.tag, r.release_tag
            ),
        ));
    }
    let expected_reference = format!("{}@{}", r.index.repository, r.index.digest);
    if r.index.reference != expected_reference {
        out.push(problem(
            "index.reference",
            format!(
                "`{}` is not `{expected_reference}` (repository@digest)",
                r.index.reference
            ),
        ));
    }
    out
}

/// The index digest must be the digest of the canonical index made from the platform records.
pub fn index_digest_problems(r: &Receipt) -> Vec<Problem> {
    let entries: Vec<IndexEntry> = r.platforms.iter().map(IndexEntry::from).collect();
    let bytes = match index_bytes_of(&entries) {
        Ok(bytes) => bytes,
        Err(e) => {
            return vec![problem(
                "platforms",
                format!("cannot form the image index from the platform records: {e:#}"),
            )]
        }
    };
    let expected = format!("sha256:{}", sha256_hex(&bytes));
    let mut out = Vec::new();
    if r.index.digest != expected {
        out.push(problem(
            "index.digest",
            format!(
                "is {}, but the index of the recorded platform digests is {expected}: a platform \
                 digest or the index digest was changed",
                r.index.digest
            ),
        ));
    }
    if r.index.size != bytes.len() as u64 {
        out.push(problem(
            "index.size",
            format!(
                "is {}, but the index of the recorded platforms is {} bytes",
                r.index.size,
                bytes.len()
            ),
        ));
    }
    out
}

/// Why a receipt is not complete; empty when every required platform is present once, has
/// every smoke check the manifest requires of it, and passed every smoke check.
pub fn completeness_problems(r: &Receipt, manifest: &Manifest) -> Vec<Problem> {
    let mut out = super::policy::smoke_coverage_problems(r, manifest);
    let mut required: BTreeSet<Platform> = r.required_platforms.iter().copied().collect();
    // The consumer's manifest says which platforms a release carries; a receipt cannot opt
    // out of one by not listing it.
    required.extend(manifest.platforms.iter().copied());
    let mut seen = BTreeSet::new();
    for (i, p) in r.platforms.iter().enumerate() {
        if !seen.insert(p.platform) {
            out.push(problem(
                format!("platforms[{i}].platform"),
                format!("{} is recorded twice", p.platform),
            ));
        }
        if p.smoke.checks.is_empty() {
            out.push(problem(
                format!("platforms[{i}].smoke.checks"),
                format!("{} has no smoke checks: it was never tested", p.platform),
            ));
        }
        for (j, check) in p.smoke.checks.iter().enumerate() {
            if !check.passed {
                out.push(problem(
                    format!("platforms[{i}].smoke.checks[{j}].passed"),
                    format!("{}: smoke check `{}` failed", p.platform, check.name),
                ));
            }
        }
        if !p.smoke.passed {
            out.push(problem(
                format!("platforms[{i}].smoke.passed"),
                format!("{} did not pass its smoke test", p.platform),
            ));
        }
    }
    for platform in required {
        if !seen.contains(&platform) {
            out.push(problem(
                "platforms",
                format!("{platform} is missing; {MANIFEST_PATH} requires it of every release"),
            ));
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

/// Reads and verifies a receipt file against `policy` (the release's manifest or the
/// checkout's, see [`crate::receipt_policy`]) and this machine's clock;
/// `artifacts_dir` holds the release's artifact files. The receipt is read bounded (regular
/// file, at most [`template_formats::bounded_read::MAX_RECEIPT_BYTES`]).
pub fn verify_file(
    path: &Path,
    artifacts_dir: Option<&Path>,
    policy: &ReceiptPolicy,
) -> Result<Verification> {
    let bytes = template_formats::bounded_read::read_regular(
        path,
        template_formats::bounded_read::MAX_RECEIPT_BYTES,
        "receipt",
    )?;
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let evidence = artifacts_dir.map(read_artifacts);
    let ctx = VerifyContext {
        manifest: &policy.manifest,
        now: chrono::Utc::now(),
        artifacts: evidence.as_ref(),
    };
    let mut v = verify(&file_name, &bytes, &ctx);
    if let Some(receipt) = &v.receipt {
        v.problems.extend(binding_problems(receipt, policy));
        // The install scripts it ran against what its own manifest acknowledges (a checkout's
        // manifest may acknowledge newer content since, and judges older releases too).
        if policy.from_release {
            v.problems.extend(super::inputs::acknowledged_problems(
                receipt,
                &policy.manifest,
            ));
        }
        v.valid = v.problems.is_empty();
    }
    v.file = path.display().to_string();
    Ok(v)
}

/// Adds the registry's answer to a verification (`--check-registry`). Only a receipt that
/// passed every offline check is taken to the registry it names: an invalid one may name any
/// host at all.
///
/// `env_host` is the one registry the environment's credentials may go to, named by the
/// user (never by the receipt under check).
pub fn add_registry_check(
    v: &mut Verification,
    env_host: &crate::oci::credentials::EnvCredentialsHost,
    env: &crate::settings::Environment,
) -> Result<()> {
    if !v.valid {
        return Ok(());
    }
    let receipt = v
        .receipt
        .as_ref()
        .context("a valid verification carries its receipt")?;
    let problems = super::registry::check(receipt, env_host, env)?;
    if !problems.is_empty() {
        v.problems.extend(problems);
        v.valid = false;
    }
    Ok(())
}

/// Prints a rejection on stderr, every string escaped (it may come from the receipt).
pub fn print_problems(problems: &[Problem]) {
    use crate::terminal_text::escape;
    for p in problems {
        eprintln!("  {}: {}", escape(&p.field), escape(&p.problem));
    }
}

/// What `receipt verify` is asked, as the library takes it (`cli.rs` converts the command
/// line's `ReceiptVerifyArgs` into it). The manifest is not here: it is the [`ReceiptPolicy`]
/// the caller made at its edge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyRequest {
    /// The receipt file.
    pub file: std::path::PathBuf,
    /// The release's artifact files, checked against the receipt's sha256s.
    pub artifacts: Option<std::path::PathBuf>,
    /// Also compare the receipt with the registry it names.
    pub check_registry: bool,
    /// The one registry host the environment's credentials may go to (never the receipt's
    /// choice).
    pub credentials_registry: Option<String>,
    /// Print the verification as JSON.
    pub json: bool,
}

/// `receipt verify`; `policy` comes from the command line's edge (the release's manifest for
/// `template-verify`, the checkout's for `cargo xtask`).
/// `env` is the environment's snapshot, taken by the binary.
pub fn verify_cmd(
    args: VerifyRequest,
    policy: &ReceiptPolicy,
    env: &crate::settings::Environment,
) -> Result<ExitCode> {
    use crate::terminal_text::escape;
    let mut v = verify_file(&args.file, args.artifacts.as_deref(), policy)?;
    if args.check_registry {
        let env_host =
            crate::oci::credentials::EnvCredentialsHost(args.credentials_registry.clone());
        add_registry_check(&mut v, &env_host, env)?;
    }
    if args.json {
        crate::terminal_text::print_json_escaped(&v)?;
    } else if v.valid {
        println!(
            "{}: valid, complete{}; pin {}",
            escape(&v.file),
            if args.check_registry {
                ", matches the registry"
            } else {
                " (not compared with the registry: add --check-registry)"
            },
            escape(v.reference.as_deref().unwrap_or("?"))
        );
    } else {
        eprintln!("{}: rejected", escape(&v.file));
    }
    if !v.valid {
        print_problems(&v.problems);
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receipt::schema::schema_problems;
    use crate::receipt::tests_support::*;
    use crate::receipt::{receipt_bytes, receipt_file_name};

    #[test]
    fn a_value_no_integer_type_holds_is_named_by_its_field() {
        let text = String::from_utf8(receipt_bytes(&sample())).unwrap();
        let text = text.replacen("\"manifest_size\": 700", "\"manifest_size\": 1e29", 1);
        let name = receipt_file_name(SAMPLE_TAG, &sha256_hex(text.as_bytes()));
        let v = verify_bytes(&name, text.as_bytes(), None);
        assert_eq!(
            fields(&v),
            vec!["platforms[0].manifest_size"],
            "{:?}",
            v.problems
        );
        assert_eq!(
            field_of_deserialize_error("gate", "missing field `due`"),
            "gate.due"
        );
    }

    #[test]
    fn serde_field_names_are_extracted() {
        assert_eq!(
            field_of_serde_error("missing field `index` at line 3 column 1"),
            "index"
        );
        assert_eq!(field_of_serde_error("expected value"), "(document)");
    }

    fn verify_sample(r: &Receipt) -> Verification {
        let bytes = receipt_bytes(r);
        verify_bytes(
            &receipt_file_name(&r.release_tag, &sha256_hex(&bytes)),
            &bytes,
            None,
        )
    }

    fn verify_bytes(
        name: &str,
        bytes: &[u8],
        artifacts: Option<&ArtifactEvidence>,
    ) -> Verification {
        let manifest = manifest();
        verify(
            name,
            bytes,
            &VerifyContext {
                manifest: &manifest,
                now: sample_now(),
                artifacts,
            },
        )
    }

    fn fields(v: &Verification) -> Vec<&str> {
        v.problems.iter().map(|p| p.field.as_str()).collect()
    }

    #[test]
    fn sample_receipt_is_valid_and_matches_the_schema() {
        let v = verify_sample(&sample());
        assert!(v.valid, "{:?}", v.problems);
        let instance = serde_json::to_value(sample()).unwrap();
        assert_eq!(schema_problems(&instance), vec![]);
    }

    /// Every object in the schema lists all its properties as required and allows no
    /// others: the serialised receipt always has every field (optional ones as null).
    #[test]
    fn semantic_rejections() {
        let mut r = sample();
        r.platforms[0].smoke.checks[0].passed = false;
        assert!(fields(&verify_sample(&r)).contains(&"platforms[0].smoke.checks[0].passed"));
        let mut r = sample();
        r.platforms.retain(|p| p.platform == Platform::LinuxArm64);
        r.required_platforms = vec![Platform::LinuxArm64];
        let v = verify_sample(&r);
        assert!(
            v.problems
                .iter()
                .any(|p| p.field == "platforms" && p.problem.contains("linux/amd64")),
            "a receipt cannot drop a platform by not requiring it: {:?}",
            v.problems
        );
        let mut r = sample();
        r.platforms[0].digest = digest("other");
        assert!(fields(&verify_sample(&r)).contains(&"index.digest"));
        let mut r = sample();
        r.trigger = Trigger::Forced;
        assert!(fields(&verify_sample(&r)).contains(&"trigger"));
        let mut r = sample();
        r.index.reference = "elsewhere@sha256:0".into();
        assert!(fields(&verify_sample(&r)).contains(&"index.reference"));
        let mut r = sample();
        r.release_tag = "2026.12.01-0123456789ab".into();
        assert!(fields(&verify_sample(&r)).contains(&"index.tag"));
        let mut r = sample();
        r.complete = false;
        assert!(fields(&verify_sample(&r)).contains(&"complete"));
    }

    /// Moves the receipt to `repository`, its reference along with it.
    fn move_to(r: &mut Receipt, repository: &str) {
        r.index.repository = repository.into();
        r.index.reference = format!("{}@{}", r.index.repository, r.index.digest);
    }

    /// Each tampering of a genuine receipt (file renamed to its new digest) is rejected
    /// offline, naming the field.
    #[test]
    fn tampered_receipts_are_rejected_naming_the_field() {
        type Tamper = fn(&mut Receipt);
        let cases: &[(&str, Tamper)] = &[
            ("platforms[0].smoke.checks", |r| {
                r.platforms[0]
                    .smoke
                    .checks
                    .retain(|c| c.name != "no CA bundle left in the image")
            }),
            ("platforms[1].smoke.checks", |r| {
                r.platforms[1].smoke.checks.truncate(1)
            }),
            ("platforms[1].smoke.checks", |r| {
                r.platforms[1].build = BuildMode::Emulated
            }),
            ("platforms[0].smoke.checks[1].name", |r| {
                r.platforms[0].smoke.checks[1].name = r.platforms[0].smoke.checks[0].name.clone()
            }),
            ("index.repository", |r| move_to(r, "127.0.0.1:5000/S0/ca")),
            ("index.repository", |r| {
                move_to(r, "https://127.0.0.1:5000/s0/ca")
            }),
            ("index.repository", |r| {
                move_to(r, "127.0.0.1:5000/s0/ca\u{200b}")
            }),
            ("index.repository", |r| {
                move_to(r, "127.0.0.1:5000/s0/ca:v1")
            }),
            ("created_at", |r| {
                r.created_at = "2026-12-30T06:30:00Z".into()
            }),
            ("created_at", |r| {
                r.created_at = "2026-11-30T06:30:00.000Z".into()
            }),
            ("resolver.cutoff", |r| {
                r.resolver.cutoff = "2026-11-30T06:30:01Z".into()
            }),
            ("release_tag", |r| {
                r.release_tag = "2026.12.01-0123456789ab".into();
                r.index.tag = r.release_tag.clone();
            }),
            ("release_tag", |r| {
                r.release_tag = "2026.10.30-0123456789ab".into();
                r.index.tag = r.release_tag.clone();
            }),
            ("gate.epoch_day", |r| r.gate.epoch_day += 5),
            ("platforms[0].media_type", |r| {
                r.platforms[0].media_type = template_formats::oci::index::OCI_INDEX.into()
            }),
            ("required_platforms", |r| {
                r.required_platforms = vec![Platform::LinuxAmd64, Platform::LinuxAmd64]
            }),
            ("packages", |r| {
                r.packages.pop();
            }),
            ("node.platforms", |r| {
                r.node.platforms.remove(&Platform::LinuxArm64);
            }),
            ("node.platforms.linux/amd64.package", |r| {
                r.node
                    .platforms
                    .get_mut(&Platform::LinuxAmd64)
                    .unwrap()
                    .package = "x".into()
            }),
            ("artifacts[0].path", |r| r.artifacts[0].path = "../x".into()),
            // Smoke-tested one image, published another.
            ("platforms[1].config_digest", |r| {
                r.platforms[1].image_id = format!("sha256:{}", "9".repeat(64))
            }),
        ];
        for (field, tamper) in cases {
            let mut r = sample();
            tamper(&mut r);
            let v = verify_sample(&r);
            assert!(fields(&v).contains(field), "{field}: {:?}", v.problems);
        }
    }

    #[test]
    fn duplicate_keys_are_rejected_naming_the_path() {
        let text = String::from_utf8(receipt_bytes(&sample())).unwrap();
        let text = text.replacen(
            "\"complete\": true",
            "\"complete\": false, \"complete\": true",
            1,
        );
        let name = receipt_file_name(SAMPLE_TAG, &sha256_hex(text.as_bytes()));
        let v = verify_bytes(&name, text.as_bytes(), None);
        assert_eq!(fields(&v), vec!["complete"], "{:?}", v.problems);
    }

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

    /// A receipt written before the tool recorded the input trust has no `inputs` key at all:
    /// it is still a version-2 receipt and verifies (the gate and the plan find that release).
    /// Its `inputs` record, when present, is checked like any field.
    #[test]
    fn a_receipt_from_before_the_input_trust_verifies_and_a_broken_record_is_named() {
        let mut old = sample();
        old.inputs = None;
        let bytes = receipt_bytes(&old);
        assert!(!String::from_utf8_lossy(&bytes).contains("\"inputs\""));
        let v = verify_sample(&old);
        assert!(v.valid, "{:?}", v.problems);
        let mut broken = sample();
        broken.inputs.as_mut().unwrap().registry = "https://elsewhere.example/".into();
        assert_eq!(fields(&verify_sample(&broken)), ["inputs.registry"]);
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

    #[test]
    fn garbage_and_truncation_are_rejected_with_a_field() {
        let v = verify_bytes("receipt-x-00.json", b"{\"schema_version\": 1, \"rel", None);
        assert!(!v.valid);
        assert!(v.problems.iter().any(|p| p.field == "(document)"));
        assert!(v.problems.iter().any(|p| p.field == "file name"));
        let v = verify_bytes("receipt-x-00.json", b"{\"schema_version\": 3}", None);
        assert!(v.problems.iter().any(|p| p.field == "schema_version"));
        let v = verify_bytes("receipt-x-00.json", b"{\"schema_version\": 1}", None);
        assert!(
            v.problems
                .iter()
                .any(|p| p.field == "schema_version" && p.problem.contains("before 2026-12-01")),
            "{:?}",
            v.problems
        );
        let v = verify_bytes("receipt-x-00.json", b"{\"schema_version\": 2}", None);
        assert!(
            v.problems.iter().any(|p| p.field == "release_tag"),
            "{:?}",
            v.problems
        );
    }
}
