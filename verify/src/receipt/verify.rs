//! `receipt verify`: a receipt's bytes judged against its own digest, the published schema,
//! the manifest, the clock and (when given) the release's artifact files; pure over its inputs
//! except for the file-reading wrappers at the end.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use serde::Serialize;

use super::artifacts::{read_artifacts, sbom_asset_name, ArtifactEvidence};
use super::{parse_receipt_file_name, problem, Problem, ARTIFACTS, SCHEMA_VERSION};
use crate::receipt::policy::{binding_problems, ReceiptPolicy};
use template_formats::hash::sha256_hex;
use template_formats::manifest::{Manifest, Platform};
use template_formats::model::gate::Trigger;
use template_formats::model::publish::IndexEntry;
use template_formats::model::receipt::*;
use template_formats::oci::index::index_bytes_of;
use template_formats::paths::MANIFEST;

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
                    "1 is an earlier receipt format, which this tool no longer reads: \
                     version {SCHEMA_VERSION} records the verifier binaries and each platform's \
                     SBOM (checked for what they are, not only their hash) and requires them; a \
                     version-1 receipt cannot say what a version-{SCHEMA_VERSION} one promises. \
                     Use a release whose receipt is version {SCHEMA_VERSION}, or the tool of \
                     that release"
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
        v.problems.extend(super::artifacts::problems(
            &receipt,
            evidence,
            &mut v.unaccounted,
        ));
    }
    v.valid = v.problems.is_empty();
    v.receipt = Some(receipt);
    v
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
        if let Some(t) = &p.transcripts {
            let name = template_formats::model::transcript::transcripts_file_name(p.platform);
            if t.name != name {
                out.push(problem(
                    format!("platforms[{i}].transcripts.name"),
                    format!(
                        "is `{}`; the transcripts of {} are named `{name}`",
                        t.name, p.platform
                    ),
                ));
            }
            if p.harnesses.is_none() {
                out.push(problem(
                    format!("platforms[{i}].harnesses"),
                    "is absent, but the platform records transcripts of its harnesses' turns",
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
                format!("{platform} is missing; {MANIFEST} requires it of every release"),
            ));
        }
    }
    out
}

/// Reads and verifies a receipt file against `policy` (the release's manifest or the
/// checkout's, see [`crate::receipt::policy`]) and this machine's clock;
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
/// `attestation_problems` are the attestations' (`receipt verify --attestations`), checked by
/// the caller: the attestation layer sits above this one.
pub fn verify_cmd(
    args: VerifyRequest,
    policy: &ReceiptPolicy,
    env: &crate::settings::Environment,
    attestation_problems: Vec<Problem>,
) -> Result<ExitCode> {
    use crate::terminal_text::escape;
    let mut v = verify_file(&args.file, args.artifacts.as_deref(), policy)?;
    if !attestation_problems.is_empty() {
        v.valid = false;
        v.problems.extend(attestation_problems);
    }
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
pub(crate) mod tests {
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

    /// Fuzz target: a receipt's bytes, as `receipt verify` and `consume` read them from a
    /// release (its name made from its own bytes, so the checks behind the name run).
    #[test]
    fn fuzz_receipt() {
        let mut old = sample();
        old.inputs = None;
        let seeds = vec![receipt_bytes(&sample()), receipt_bytes(&old)];
        let outcome = crate::fuzz::campaign("receipt", &seeds, crate::fuzz::inputs(), |bytes| {
            let name = receipt_file_name("v20261130-0123abcd", &sha256_hex(bytes));
            let _ = verify_bytes(&name, bytes, None);
        });
        crate::fuzz::assert_clean(&outcome);
    }

    pub(crate) fn verify_sample(r: &Receipt) -> Verification {
        let bytes = receipt_bytes(r);
        verify_bytes(
            &receipt_file_name(&r.release_tag, &sha256_hex(&bytes)),
            &bytes,
            None,
        )
    }

    pub(crate) fn verify_bytes(
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

    pub(crate) fn fields(v: &Verification) -> Vec<&str> {
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
            // Found by `fuzz_receipt`: the day minus the tag's is i64::MIN, whose `abs` wraps.
            ("gate.epoch_day", |r| r.gate.epoch_day = i64::MIN + 20_787),
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
                .any(|p| p.field == "schema_version"
                    && p.problem.contains("an earlier receipt format")),
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
