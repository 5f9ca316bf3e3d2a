//! Release receipts: what a release contains, how it was decided, and proof it was tested.
//!
//! A receipt is one JSON document, `schema_version: 1`, described by the published schema
//! `schemas/receipt.v1.schema.json`. `cargo xtask receipt write` assembles it from the JSON
//! outputs of the other commands (resolve, gate, build, smoke, publish) plus the committed
//! template files; `cargo xtask receipt verify` is what consumers run before trusting one.
//!
//! The file name carries the receipt's own digest: `receipt-<tag>-<hex>.json`, where `<hex>` is
//! the sha256 of the file's bytes exactly as written (the receipt is written once and never
//! re-serialised, so there is no canonical form to agree on: the bytes are the receipt). The
//! digest catches truncation and accidental edits; authenticity comes from where the file was
//! fetched (the immutable GitHub release and its attestation), not from the digest.
//!
//! Besides format checks, verification recomputes the multi-arch index digest from the
//! per-platform records (the index bytes are canonical, see [`crate::release::publish::index_bytes`]),
//! so a receipt must hold together. Someone who edits a receipt can still make it hold
//! together and rename it; what catches that is in [`crate::release::receipt_policy`] (the manifest,
//! the tool's own forms, the clock, the artifact files) and [`crate::release::receipt_registry`] (the
//! registry, `--check-registry`), and, for what no one else records, the attestation.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::flags::{ReceiptVerifyArgs, ReceiptWriteArgs};
use crate::manifest::{repo_root, Manifest, Platform, MANIFEST_PATH};
use crate::npm::inventory::INVENTORY_PATH;
use crate::release::gate::{GateDecision, Trigger};
use crate::release::publish::{index_bytes, IndexEntry, PublishReport};
use crate::util::{atomic_write, now_or, sha256_file, sha256_hex};

/// The receipt format this tool writes and reads.
pub const SCHEMA_VERSION: u32 = 1;
/// Where the published JSON Schema of [`SCHEMA_VERSION`] lives in the repository.
pub const SCHEMA_PATH: &str = "schemas/receipt.v1.schema.json";

/// The release's input files whose sha256 the receipt records: (asset name, repository path).
/// The asset name is the file's name among the release assets and under `--artifacts DIR`.
pub const ARTIFACTS: [(&str, &str); 5] = [
    ("package.json", "template/package.json"),
    ("package-lock.json", "template/package-lock.json"),
    ("inventory.json", INVENTORY_PATH),
    ("Dockerfile", "Dockerfile"),
    ("manifest.yaml", MANIFEST_PATH),
];

// ---------------------------------------------------------------------------------------------
// The receipt, version 1. Strict: an unknown field is a rejection, because a consumer that
// silently ignored fields could be told something it never checked.

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Receipt {
    pub schema_version: u32,
    /// The unique, immutable tag of the multi-arch index.
    pub release_tag: String,
    /// RFC 3339, UTC.
    pub created_at: String,
    /// The git commit the release was built from (40 hex digits).
    pub source_commit: String,
    pub trigger: Trigger,
    pub gate: GateRecord,
    pub resolver: ResolverRecord,
    pub node: NodeRecord,
    /// The template's top-level packages, each with the `latest` it was chosen from.
    pub packages: Vec<PackageRecord>,
    /// Every other package in the lockfile.
    pub dependencies: Vec<DependencyRecord>,
    pub artifacts: Vec<ArtifactRecord>,
    /// The platforms the manifest asks for; the receipt is complete only when each one is
    /// present and passed every smoke check.
    pub required_platforms: Vec<Platform>,
    pub platforms: Vec<PlatformRecord>,
    pub index: IndexRecord,
    pub complete: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateRecord {
    pub due: bool,
    pub forced: bool,
    pub catch_up: bool,
    pub epoch_day: i64,
    pub next_due: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResolverRecord {
    /// Versions and transitive dependencies are no newer than this (RFC 3339).
    pub cutoff: String,
    /// The npm registry the lockfile was generated against.
    pub registry: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeRecord {
    pub version: String,
    pub npm: TarballRecord,
    pub platforms: BTreeMap<Platform, TarballRecord>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TarballRecord {
    pub package: String,
    pub version: String,
    pub integrity: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackageRecord {
    pub name: String,
    pub version: String,
    pub integrity: String,
    /// The registry's `dist-tags.latest` when the version was chosen.
    pub latest: String,
    pub published: Option<String>,
    /// The version locked before this release, when there was one.
    pub previously_locked: Option<String>,
    /// The chosen version is lower than the one locked before (an upstream rollback).
    pub rollback: bool,
    /// `latest` was not taken (cooldown or platform readiness); see `notes`.
    pub held_back: bool,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DependencyRecord {
    pub name: String,
    pub version: String,
    pub path: String,
    pub integrity: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArtifactRecord {
    /// The file's name among the release assets.
    pub name: String,
    /// Its path in the repository at `source_commit`.
    pub path: String,
    /// Lowercase hex, no prefix.
    pub sha256: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BuildMode {
    Native,
    Emulated,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlatformRecord {
    pub platform: Platform,
    /// As the image config says (the index's platform entry is made from these).
    pub os: String,
    pub architecture: String,
    pub variant: Option<String>,
    pub build: BuildMode,
    pub build_id: String,
    /// The local reference that was built and smoke-tested.
    pub local_image: String,
    /// The engine's image id of that local image.
    pub image_id: String,
    pub base_image: BaseImageRecord,
    /// The pushed manifest's digest: the image digest.
    pub digest: String,
    pub media_type: String,
    /// Size of the manifest itself, as the index's descriptor records it.
    pub manifest_size: u64,
    pub config_digest: String,
    /// Uncompressed size of the image as the engine reports it.
    pub image_size: u64,
    /// Bytes in the registry: config plus compressed layers.
    pub pushed_size: u64,
    /// The image's Debian packages (`name=version`, sorted), read from its dpkg database.
    pub debian_packages: Vec<String>,
    pub smoke: SmokeRecord,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaseImageRecord {
    pub reference: String,
    pub digest: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SmokeRecord {
    pub passed: bool,
    pub checks: Vec<SmokeCheck>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SmokeCheck {
    pub name: String,
    pub passed: bool,
    #[serde(default)]
    pub output: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexRecord {
    pub tag: String,
    pub digest: String,
    pub media_type: String,
    pub size: u64,
    /// Registry host and repository, e.g. `ghcr.io/sandbox0/coding-agent`.
    pub repository: String,
    /// `repository@digest`: what consumers pin.
    pub reference: String,
}

// ---------------------------------------------------------------------------------------------
// Inputs: the JSON outputs of the other commands, read leniently (unknown fields ignored).

/// `cargo xtask resolve --json`.
#[derive(Debug, Clone, Deserialize)]
pub struct ResolveOutput {
    pub cutoff: String,
    pub packages: Vec<ResolvedPackage>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ResolvedPackage {
    pub name: String,
    pub version: String,
    pub latest: String,
    #[serde(default)]
    pub published: Option<String>,
    #[serde(default)]
    pub locked: Option<String>,
    #[serde(default)]
    pub rollback: bool,
    #[serde(default)]
    pub held_back: bool,
    #[serde(default)]
    pub notes: Vec<String>,
}

/// `cargo xtask build --platform P --json`.
#[derive(Debug, Clone, Deserialize)]
pub struct BuildOutput {
    pub image: String,
    pub platform: Platform,
    pub build_id: String,
    pub image_id: String,
    #[serde(default)]
    pub emulated: bool,
    pub size: u64,
    pub base_image: String,
    pub base_image_id: String,
    #[serde(default)]
    pub debian_packages: Vec<String>,
}

/// `cargo xtask smoke --image REF --json`.
#[derive(Debug, Clone, Deserialize)]
pub struct SmokeOutput {
    pub image: String,
    pub passed: bool,
    pub checks: Vec<SmokeCheck>,
}

/// `template/inventory.json`, only the fields the receipt copies (the inventory module owns
/// the full, strict format; a receipt must not break when it gains a field).
#[derive(Debug, Clone, Deserialize)]
pub struct InventoryInput {
    pub cutoff: String,
    pub registry: String,
    pub node: InventoryNode,
    pub packages: Vec<InventoryPackageInput>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct InventoryNode {
    pub version: String,
    pub platforms: BTreeMap<Platform, InventoryTarball>,
    pub npm: InventoryTarball,
}

#[derive(Debug, Clone, Deserialize)]
pub struct InventoryTarball {
    pub package: String,
    pub version: String,
    pub integrity: String,
}

impl From<&InventoryTarball> for TarballRecord {
    fn from(t: &InventoryTarball) -> TarballRecord {
        TarballRecord {
            package: t.package.clone(),
            version: t.version.clone(),
            integrity: t.integrity.clone(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct InventoryPackageInput {
    pub name: String,
    pub version: String,
    pub path: String,
    pub top_level: bool,
    pub integrity: String,
}

/// Everything `receipt write` assembles a receipt from; [`assemble`] is pure over it.
pub struct ReceiptInputs {
    pub release_tag_override: Option<String>,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub source_commit: String,
    pub gate: GateDecision,
    pub resolve: ResolveOutput,
    pub inventory: InventoryInput,
    pub manifest: Manifest,
    /// (asset name, repository path, sha256 hex)
    pub artifacts: Vec<(String, String, String)>,
    pub builds: Vec<BuildOutput>,
    pub smokes: Vec<SmokeOutput>,
    pub publish: PublishReport,
}

/// Joins the inputs into a receipt and decides `complete`. Errors are wiring mistakes
/// (inputs that do not belong together); a failed smoke check is not an error but an
/// incomplete receipt.
pub fn assemble(inputs: ReceiptInputs) -> Result<Receipt> {
    let ReceiptInputs {
        release_tag_override,
        created_at,
        source_commit,
        gate,
        resolve,
        inventory,
        manifest,
        artifacts,
        builds,
        smokes,
        publish,
    } = inputs;

    let Some(published) = publish.index.clone() else {
        bail!("the publish output has no `index`: run `cargo xtask publish` with --tag");
    };
    if publish.dry_run {
        bail!("the publish output comes from a --dry-run: nothing was published");
    }
    let index = IndexRecord {
        tag: published.tag,
        digest: published.digest,
        media_type: published.media_type,
        size: published.size,
        repository: published.repository,
        reference: published.reference,
    };
    let release_tag = release_tag_override.unwrap_or_else(|| index.tag.clone());
    if release_tag != index.tag {
        bail!(
            "--tag {release_tag} differs from the published index's tag {}",
            index.tag
        );
    }
    if crate::release::receipt_policy::parse_release_tag(&release_tag).is_none() {
        bail!(
            "release tag `{release_tag}` is not a form consumers accept (`YYYY.MM.DD-` and 12 hex \
             digits of the inputs' digest, or the workflow run id); publish under such a tag"
        );
    }
    // `lock` keeps the committed inventory when a new clock alone would change it, so the
    // lockfile's cutoff may be earlier than this resolution's (the same versions either way:
    // checked package by package below). A later one means the lockfile is not from this run.
    let cutoff = |text: &str, what: &str| {
        chrono::DateTime::parse_from_rfc3339(text)
            .with_context(|| format!("{what} cutoff `{text}` is not an RFC 3339 time"))
    };
    if cutoff(&inventory.cutoff, INVENTORY_PATH)? > cutoff(&resolve.cutoff, "the resolve output's")?
    {
        bail!(
            "{INVENTORY_PATH}'s cutoff {} is later than the resolve output's {}: the lockfile \
             was not written from this resolution (run `cargo xtask lock`)",
            inventory.cutoff,
            resolve.cutoff
        );
    }

    let mut packages = Vec::new();
    for spec in &manifest.packages {
        let resolved = resolve
            .packages
            .iter()
            .find(|p| p.name == spec.name)
            .with_context(|| format!("the resolve output has no package `{}`", spec.name))?;
        let locked = inventory
            .packages
            .iter()
            .find(|p| p.top_level && p.name == spec.name)
            .with_context(|| {
                format!("{INVENTORY_PATH} has no top-level package `{}`", spec.name)
            })?;
        if locked.version != resolved.version {
            bail!(
                "package `{}`: resolve chose {} but {INVENTORY_PATH} locks {}; run `cargo xtask \
                 lock` so the lockfile matches the resolution",
                spec.name,
                resolved.version,
                locked.version
            );
        }
        packages.push(PackageRecord {
            name: spec.name.clone(),
            version: resolved.version.clone(),
            integrity: locked.integrity.clone(),
            latest: resolved.latest.clone(),
            published: resolved.published.clone(),
            previously_locked: resolved.locked.clone(),
            rollback: resolved.rollback,
            held_back: resolved.held_back,
            notes: resolved.notes.clone(),
        });
    }
    let dependencies = inventory
        .packages
        .iter()
        .filter(|p| !p.top_level)
        .map(|p| DependencyRecord {
            name: p.name.clone(),
            version: p.version.clone(),
            path: p.path.clone(),
            integrity: p.integrity.clone(),
        })
        .collect();

    let pushed: BTreeMap<Platform, _> = publish.platforms.iter().map(|p| (p.platform, p)).collect();
    let mut platforms = Vec::new();
    let mut seen = BTreeSet::new();
    for build in &builds {
        if !seen.insert(build.platform) {
            bail!("two build outputs are for {}", build.platform);
        }
        let pushed = pushed.get(&build.platform).with_context(|| {
            format!(
                "{} was built ({}) but the publish output has no image for it",
                build.platform, build.image
            )
        })?;
        if pushed.image_id != build.image_id {
            bail!(
                "{}: the published image {} ({}) is not the built image {} ({})",
                build.platform,
                pushed.image,
                pushed.image_id,
                build.image,
                build.image_id
            );
        }
        let smoke = smokes
            .iter()
            .find(|s| s.image == build.image || s.image == build.image_id)
            .with_context(|| {
                format!(
                    "no smoke output is for the {} image {}: run `cargo xtask smoke --image {} \
                     --json` and pass it with --smoke",
                    build.platform, build.image, build.image
                )
            })?;
        // A smoke output without every required check is not a test result to publish: the
        // receipt would look complete while the image went partly untested.
        let required = manifest.required_smoke_checks(build.platform, build.emulated);
        let mut names = BTreeSet::new();
        for check in &smoke.checks {
            if !names.insert(check.name.as_str()) {
                bail!(
                    "the smoke output for the {} image {} records check `{}` twice; pass the \
                     output of one `cargo xtask smoke` run",
                    build.platform,
                    build.image,
                    check.name
                );
            }
        }
        let missing: Vec<&String> = required
            .iter()
            .filter(|n| !names.contains(n.as_str()))
            .collect();
        if !missing.is_empty() {
            bail!(
                "the smoke output for the {} image {} ({} build) lacks the required check(s) \
                 {missing:?} (smoke_checks in {MANIFEST_PATH}); run `cargo xtask smoke --image {} \
                 --json` with this tool's version and pass its whole output",
                build.platform,
                build.image,
                if build.emulated { "emulated" } else { "native" },
                build.image
            );
        }
        platforms.push(PlatformRecord {
            platform: build.platform,
            os: pushed.os.clone(),
            architecture: pushed.architecture.clone(),
            variant: pushed.variant.clone(),
            build: if build.emulated {
                BuildMode::Emulated
            } else {
                BuildMode::Native
            },
            build_id: build.build_id.clone(),
            local_image: build.image.clone(),
            image_id: build.image_id.clone(),
            base_image: BaseImageRecord {
                reference: build.base_image.clone(),
                digest: build.base_image_id.clone(),
            },
            digest: pushed.digest.clone(),
            media_type: pushed.media_type.clone(),
            manifest_size: pushed.manifest_size,
            config_digest: pushed.config_digest.clone(),
            image_size: build.size,
            pushed_size: pushed.size,
            debian_packages: build.debian_packages.clone(),
            smoke: SmokeRecord {
                passed: smoke.passed,
                checks: smoke.checks.clone(),
            },
        });
    }
    for p in &publish.platforms {
        if !seen.contains(&p.platform) {
            bail!(
                "the publish output has an image for {} ({}) but no build output was given for it",
                p.platform,
                p.image
            );
        }
    }
    platforms.sort_by_key(|p| p.platform);

    let node = NodeRecord {
        version: inventory.node.version.clone(),
        npm: (&inventory.node.npm).into(),
        platforms: inventory
            .node
            .platforms
            .iter()
            .map(|(p, t)| (*p, t.into()))
            .collect(),
    };

    let mut receipt = Receipt {
        schema_version: SCHEMA_VERSION,
        release_tag,
        created_at: created_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        source_commit,
        trigger: gate.trigger,
        gate: GateRecord {
            due: gate.due,
            forced: gate.forced,
            catch_up: gate.catch_up,
            epoch_day: gate.epoch_day,
            next_due: gate.next_due,
            reason: gate.reason,
        },
        resolver: ResolverRecord {
            // The lockfile's own cutoff: what the release's versions are no newer than.
            cutoff: inventory.cutoff.clone(),
            registry: inventory.registry.clone(),
        },
        node,
        packages,
        dependencies,
        artifacts: artifacts
            .into_iter()
            .map(|(name, path, sha256)| ArtifactRecord { name, path, sha256 })
            .collect(),
        required_platforms: manifest.platforms.clone(),
        platforms,
        index,
        complete: false,
    };
    let index_problems: Vec<_> = index_digest_problems(&receipt);
    if let Some(p) = index_problems.first() {
        bail!(
            "the publish output does not hold together: {}: {}",
            p.field,
            p.problem
        );
    }
    receipt.complete = completeness_problems(&receipt, &manifest).is_empty();
    Ok(receipt)
}

/// The bytes of a receipt file: pretty JSON and a final newline. Hashed as they are.
pub fn receipt_bytes(receipt: &Receipt) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(receipt).expect("a receipt always serialises");
    bytes.push(b'\n');
    bytes
}

/// `receipt-<tag>-<sha256 hex of the file's bytes>.json`.
pub fn receipt_file_name(tag: &str, sha256_hex: &str) -> String {
    format!("receipt-{tag}-{sha256_hex}.json")
}

/// Splits a receipt file name into (tag, digest hex).
pub fn parse_receipt_file_name(name: &str) -> Option<(&str, &str)> {
    let stem = name.strip_prefix("receipt-")?.strip_suffix(".json")?;
    let (tag, hex) = stem.rsplit_once('-')?;
    (!tag.is_empty()).then_some((tag, hex))
}

// ---------------------------------------------------------------------------------------------
// Verification: pure over (file name, bytes, artifact digests).

/// One reason a receipt is rejected, naming the field it is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub field: String,
    pub problem: String,
}

pub(crate) fn problem(field: impl Into<String>, text: impl Into<String>) -> Problem {
    Problem {
        field: field.into(),
        problem: text.into(),
    }
}

#[derive(Debug, Serialize)]
pub struct Verification {
    pub file: String,
    pub valid: bool,
    /// sha256 of the file's bytes.
    pub sha256: String,
    pub release_tag: Option<String>,
    pub reference: Option<String>,
    pub complete: Option<bool>,
    pub problems: Vec<Problem>,
    #[serde(skip)]
    pub receipt: Option<Receipt>,
}

/// `sha256:` and 64 lowercase hex digits.
pub fn is_sha256_digest(text: &str) -> bool {
    text.strip_prefix("sha256:").is_some_and(is_sha256_hex)
}

pub fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// An OCI tag: `[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`.
pub fn is_valid_tag(tag: &str) -> bool {
    let mut bytes = tag.bytes();
    match bytes.next() {
        Some(b) if b.is_ascii_alphanumeric() || b == b'_' => {}
        _ => return false,
    }
    tag.len() <= 128 && bytes.all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// What a release's artifact files say, when the consumer has them (`--artifacts DIR`).
#[derive(Debug, Clone, Default)]
pub struct ArtifactEvidence {
    /// Asset name -> sha256 of the file found for it, or why there is none.
    pub digests: BTreeMap<String, Result<String, String>>,
    /// Asset name -> parsed JSON, for package.json, package-lock.json and inventory.json.
    pub documents: BTreeMap<String, serde_json::Value>,
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

    let value: serde_json::Value = match crate::strict_json::parse(bytes) {
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
    let schema: serde_json::Value =
        serde_json::from_str(SCHEMA_JSON).expect("the embedded receipt schema is JSON");
    let against_schema = schema_problems(&schema, &value);
    if !against_schema.is_empty() {
        v.problems.extend(against_schema);
        return v;
    }
    let receipt: Receipt = match serde_json::from_value(value) {
        Ok(r) => r,
        Err(e) => {
            v.problems.push(problem(
                field_of_serde_error(&e.to_string()),
                format!("does not match receipt schema version {SCHEMA_VERSION}: {e}"),
            ));
            return v;
        }
    };
    v.release_tag = Some(receipt.release_tag.clone());
    v.reference = Some(receipt.index.reference.clone());
    v.complete = Some(receipt.complete);

    v.problems.extend(format_problems(&receipt));
    v.problems
        .extend(crate::release::receipt_policy::form_problems(
            &receipt, ctx.now,
        ));
    v.problems
        .extend(crate::release::receipt_policy::manifest_problems(
            &receipt,
            ctx.manifest,
        ));
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
        let verified: BTreeMap<String, serde_json::Value> = evidence
            .documents
            .iter()
            .filter(|(name, _)| {
                receipt.artifacts.iter().any(|a| {
                    &a.name == *name
                        && evidence.digests.get(*name).and_then(|d| d.as_ref().ok())
                            == Some(&a.sha256)
                })
            })
            .map(|(n, d)| (n.clone(), d.clone()))
            .collect();
        v.problems
            .extend(crate::release::receipt_policy::artifact_content_problems(
                &receipt, &verified,
            ));
    }
    v.valid = v.problems.is_empty();
    v.receipt = Some(receipt);
    v
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

fn format_problems(r: &Receipt) -> Vec<Problem> {
    let mut out = Vec::new();
    if !is_valid_tag(&r.release_tag) {
        out.push(problem(
            "release_tag",
            format!("`{}` is not a valid OCI tag", r.release_tag),
        ));
    }
    if chrono::DateTime::parse_from_rfc3339(&r.created_at).is_err() {
        out.push(problem(
            "created_at",
            format!("`{}` is not an RFC 3339 time", r.created_at),
        ));
    }
    if chrono::DateTime::parse_from_rfc3339(&r.resolver.cutoff).is_err() {
        out.push(problem(
            "resolver.cutoff",
            format!("`{}` is not an RFC 3339 time", r.resolver.cutoff),
        ));
    }
    if !(r.source_commit.len() == 40 && r.source_commit.bytes().all(|b| b.is_ascii_hexdigit())) {
        out.push(problem(
            "source_commit",
            format!("`{}` is not a 40-digit git commit id", r.source_commit),
        ));
    }
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
    for (i, p) in r.packages.iter().enumerate() {
        if !p.integrity.starts_with("sha512-") {
            out.push(problem(
                format!("packages[{i}].integrity"),
                format!("`{}` of {} is not a sha512 integrity", p.integrity, p.name),
            ));
        }
    }
    let mut names = BTreeSet::new();
    for (i, a) in r.artifacts.iter().enumerate() {
        if !is_sha256_hex(&a.sha256) {
            out.push(problem(
                format!("artifacts[{i}].sha256"),
                format!(
                    "`{}` of {} is not 64 lowercase hex digits",
                    a.sha256, a.name
                ),
            ));
        }
        if !names.insert(a.name.as_str()) {
            out.push(problem(
                format!("artifacts[{i}].name"),
                format!("`{}` is listed twice", a.name),
            ));
        }
    }
    for (name, _) in ARTIFACTS {
        if !names.contains(name) {
            out.push(problem("artifacts", format!("has no entry for `{name}`")));
        }
    }
    for (i, p) in r.platforms.iter().enumerate() {
        for (field, value) in [
            ("digest", &p.digest),
            ("config_digest", &p.config_digest),
            ("image_id", &p.image_id),
            ("base_image.digest", &p.base_image.digest),
        ] {
            if !is_sha256_digest(value) {
                out.push(problem(
                    format!("platforms[{i}].{field}"),
                    format!(
                        "`{value}` ({}) is not `sha256:` followed by 64 lowercase hex digits",
                        p.platform
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
    if !is_sha256_digest(&r.index.digest) {
        out.push(problem(
            "index.digest",
            format!(
                "`{}` is not `sha256:` followed by 64 lowercase hex digits",
                r.index.digest
            ),
        ));
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

/// A platform record is exactly the index's descriptor of that platform.
impl From<&PlatformRecord> for IndexEntry {
    fn from(p: &PlatformRecord) -> IndexEntry {
        IndexEntry {
            platform: p.platform,
            os: p.os.clone(),
            architecture: p.architecture.clone(),
            variant: p.variant.clone(),
            digest: p.digest.clone(),
            media_type: p.media_type.clone(),
            size: p.manifest_size,
        }
    }
}

/// The index digest must be the digest of the canonical index made from the platform records.
fn index_digest_problems(r: &Receipt) -> Vec<Problem> {
    let entries: Vec<IndexEntry> = r.platforms.iter().map(IndexEntry::from).collect();
    let bytes = match index_bytes(&entries) {
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
    let mut out = crate::release::receipt_policy::smoke_coverage_problems(r, manifest);
    let mut required: BTreeSet<Platform> = r.required_platforms.iter().copied().collect();
    // The template is published for both platforms; a receipt cannot opt out of one.
    required.extend(Platform::ALL);
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
                format!("{platform} is missing; every release carries both platforms"),
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
        match found.get(&a.name) {
            None => out.push(problem(
                format!("artifacts[{i}]"),
                format!("`{}` is not an artifact of a release", a.name),
            )),
            Some(Err(why)) => out.push(problem(
                format!("artifacts[{i}]"),
                format!("`{}` is not among the artifact files: {}", a.name, why),
            )),
            Some(Ok(actual)) if *actual != a.sha256 => out.push(problem(
                format!("artifacts[{i}].sha256"),
                format!(
                    "`{}` has sha256 {actual}, the receipt says {}",
                    a.name, a.sha256
                ),
            )),
            Some(Ok(_)) => {}
        }
    }
    out
}

/// Reads a release's artifact files from `dir`: the sha256 of each of [`ARTIFACTS`] (streamed,
/// regular files only, bounded) and the parsed JSON of the three JSON ones. Only these fixed
/// names are looked up, so a receipt cannot make the verifier read outside `dir`.
pub fn read_artifacts(dir: &Path) -> ArtifactEvidence {
    use crate::bounded_read::{
        read_regular, sha256_regular, MAX_ARTIFACT_BYTES, MAX_PARSED_ARTIFACT_BYTES,
    };
    let mut evidence = ArtifactEvidence::default();
    for (name, _) in ARTIFACTS {
        let file = dir.join(name);
        let digest = sha256_regular(&file, MAX_ARTIFACT_BYTES, "release artifact")
            .map_err(|e| format!("{e:#}"));
        if digest.is_ok() && name.ends_with(".json") {
            if let Ok(bytes) = read_regular(&file, MAX_PARSED_ARTIFACT_BYTES, "release artifact") {
                if let Ok(document) = crate::strict_json::parse(&bytes) {
                    evidence.documents.insert(name.to_string(), document);
                }
            }
        }
        evidence.digests.insert(name.to_string(), digest);
    }
    evidence
}

/// Reads and verifies a receipt file against the repository's manifest and this machine's
/// clock; `artifacts_dir` holds the release's artifact files. The receipt is read bounded
/// (regular file, at most [`crate::bounded_read::MAX_RECEIPT_BYTES`]).
pub fn verify_file(path: &Path, artifacts_dir: Option<&Path>) -> Result<Verification> {
    let manifest = Manifest::load(&repo_root().join(MANIFEST_PATH))?;
    let bytes =
        crate::bounded_read::read_regular(path, crate::bounded_read::MAX_RECEIPT_BYTES, "receipt")?;
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let evidence = artifacts_dir.map(read_artifacts);
    let ctx = VerifyContext {
        manifest: &manifest,
        now: chrono::Utc::now(),
        artifacts: evidence.as_ref(),
    };
    let mut v = verify(&file_name, &bytes, &ctx);
    v.file = path.display().to_string();
    Ok(v)
}

/// Adds the registry's answer to a verification (`--check-registry`). Only a receipt that
/// passed every offline check is taken to the registry it names: an invalid one may name any
/// host at all.
pub fn add_registry_check(v: &mut Verification) -> Result<()> {
    if !v.valid {
        return Ok(());
    }
    let receipt = v
        .receipt
        .as_ref()
        .context("a valid verification carries its receipt")?;
    let problems = crate::release::receipt_registry::check(receipt)?;
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

pub fn verify_cmd(args: ReceiptVerifyArgs) -> Result<ExitCode> {
    use crate::terminal_text::escape;
    let mut v = verify_file(&args.file, args.artifacts.as_deref())?;
    if args.check_registry {
        add_registry_check(&mut v)?;
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

// ---------------------------------------------------------------------------------------------
// The published JSON Schema, enforced: `verify` checks every receipt against it, so the schema
// in the repository cannot drift from what the tool accepts.

/// The published schema of [`SCHEMA_VERSION`], as committed at [`SCHEMA_PATH`].
pub const SCHEMA_JSON: &str = include_str!("../../../schemas/receipt.v1.schema.json");

/// Checks `instance` against `schema` (the subset of JSON Schema 2020-12 that the receipt
/// schema uses: `$ref` to `#/$defs/...`, `type`, `const`, `enum`, `pattern`, `format:
/// date-time`, `minimum`, `properties`, `required`, `additionalProperties`, `propertyNames`,
/// `items`). A keyword outside that subset is reported, never ignored.
pub fn schema_problems(schema: &serde_json::Value, instance: &serde_json::Value) -> Vec<Problem> {
    let mut out = Vec::new();
    check_schema(schema, schema, instance, "", &mut out);
    out
}

fn join_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// The schema's patterns, each implemented exactly (no regex engine in the tool).
fn pattern_matches(pattern: &str, s: &str) -> Option<bool> {
    let all = |s: &str, f: fn(u8) -> bool| s.bytes().all(f);
    Some(match pattern {
        "^[0-9a-fA-F]{40}$" => s.len() == 40 && all(s, |b| b.is_ascii_hexdigit()),
        "^[0-9a-f]{64}$" => is_sha256_hex(s),
        "^sha256:[0-9a-f]{64}$" => is_sha256_digest(s),
        "^[0-9]{4}-[0-9]{2}-[0-9]{2}$" => {
            let b = s.as_bytes();
            b.len() == 10
                && b.iter().enumerate().all(|(i, c)| {
                    if i == 4 || i == 7 {
                        *c == b'-'
                    } else {
                        c.is_ascii_digit()
                    }
                })
        }
        "^sha512-[A-Za-z0-9+/]+={0,2}$" => s.strip_prefix("sha512-").is_some_and(|b64| {
            let body = b64.trim_end_matches('=');
            !body.is_empty()
                && b64.len() - body.len() <= 2
                && all(body, |b| {
                    b.is_ascii_alphanumeric() || b == b'+' || b == b'/'
                })
        }),
        "^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$" => is_valid_tag(s),
        "^[a-z0-9][a-z0-9+.-]*=[A-Za-z0-9.+~:-]+$" => s.split_once('=').is_some_and(|(n, v)| {
            n.bytes()
                .next()
                .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
                && all(n, |b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || b"+.-".contains(&b)
                })
                && !v.is_empty()
                && all(v, |b| b.is_ascii_alphanumeric() || b".+~:-".contains(&b))
        }),
        "^[0-9]{4}[.][0-9]{2}[.][0-9]{2}-([0-9a-f]{12}|[1-9][0-9]{0,19})$" => {
            crate::release::receipt_policy::parse_release_tag(s).is_some()
        }
        _ => return None,
    })
}

fn type_matches(name: &str, v: &serde_json::Value) -> bool {
    use serde_json::Value;
    match name {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        "number" => v.is_number(),
        "integer" => matches!(v, Value::Number(n) if n.is_i64() || n.is_u64()),
        _ => false,
    }
}

fn check_schema(
    root: &serde_json::Value,
    schema: &serde_json::Value,
    v: &serde_json::Value,
    path: &str,
    out: &mut Vec<Problem>,
) {
    use serde_json::Value;
    let field = || {
        if path.is_empty() {
            "(document)".to_string()
        } else {
            path.to_string()
        }
    };
    let Some(schema) = schema.as_object() else {
        out.push(problem(field(), "the schema here is not an object"));
        return;
    };
    for (keyword, rule) in schema {
        match keyword.as_str() {
            "$schema" | "$id" | "$defs" | "title" | "description" => {}
            "$ref" => {
                let target = rule
                    .as_str()
                    .and_then(|r| r.strip_prefix("#/$defs/"))
                    .and_then(|name| root.get("$defs")?.get(name));
                match target {
                    Some(target) => check_schema(root, target, v, path, out),
                    None => out.push(problem(
                        field(),
                        format!("schema $ref {rule} does not resolve"),
                    )),
                }
            }
            "type" => {
                let names: Vec<&str> = match rule {
                    Value::String(n) => vec![n.as_str()],
                    Value::Array(ns) => ns.iter().filter_map(Value::as_str).collect(),
                    _ => vec![],
                };
                if !names.iter().any(|n| type_matches(n, v)) {
                    out.push(problem(
                        field(),
                        format!("is {v}, expected {}", names.join(" or ")),
                    ));
                }
            }
            "const" => {
                if v != rule {
                    out.push(problem(field(), format!("is {v}, must be {rule}")));
                }
            }
            "enum" => {
                if !rule.as_array().is_some_and(|options| options.contains(v)) {
                    out.push(problem(field(), format!("is {v}, must be one of {rule}")));
                }
            }
            "pattern" => {
                if let (Some(pattern), Some(s)) = (rule.as_str(), v.as_str()) {
                    match pattern_matches(pattern, s) {
                        Some(true) => {}
                        Some(false) => {
                            out.push(problem(field(), format!("`{s}` does not match {pattern}")))
                        }
                        None => out.push(problem(
                            field(),
                            format!("the schema's pattern {pattern} is not supported by this tool"),
                        )),
                    }
                }
            }
            "format" => {
                if let (Some("date-time"), Some(s)) = (rule.as_str(), v.as_str()) {
                    if chrono::DateTime::parse_from_rfc3339(s).is_err() {
                        out.push(problem(
                            field(),
                            format!("`{s}` is not an RFC 3339 date-time"),
                        ));
                    }
                }
            }
            "minimum" => {
                if let (Some(min), Some(n)) = (rule.as_f64(), v.as_f64()) {
                    if n < min {
                        out.push(problem(field(), format!("is {n}, below the minimum {min}")));
                    }
                }
            }
            "required" => {
                if let Some(obj) = v.as_object() {
                    for key in rule
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                    {
                        if !obj.contains_key(key) {
                            out.push(problem(join_path(path, key), "is missing"));
                        }
                    }
                }
            }
            "properties" => {
                if let (Some(obj), Some(props)) = (v.as_object(), rule.as_object()) {
                    for (key, sub) in props {
                        if let Some(value) = obj.get(key) {
                            check_schema(root, sub, value, &join_path(path, key), out);
                        }
                    }
                }
            }
            "additionalProperties" => {
                if let Some(obj) = v.as_object() {
                    let known = schema.get("properties").and_then(Value::as_object);
                    for (key, value) in obj {
                        if known.is_some_and(|k| k.contains_key(key)) {
                            continue;
                        }
                        match rule {
                            Value::Bool(false) => out.push(problem(
                                join_path(path, key),
                                "is not a field of this receipt version",
                            )),
                            Value::Bool(true) => {}
                            sub => check_schema(root, sub, value, &join_path(path, key), out),
                        }
                    }
                }
            }
            "propertyNames" => {
                if let Some(obj) = v.as_object() {
                    for key in obj.keys() {
                        check_schema(
                            root,
                            rule,
                            &Value::String(key.clone()),
                            &join_path(path, key),
                            out,
                        );
                    }
                }
            }
            "items" => {
                if let Some(items) = v.as_array() {
                    for (i, item) in items.iter().enumerate() {
                        check_schema(root, rule, item, &format!("{path}[{i}]"), out);
                    }
                }
            }
            other => out.push(problem(
                field(),
                format!("the schema keyword `{other}` is not supported by this tool"),
            )),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// `receipt write`

fn read_json<T: serde::de::DeserializeOwned>(path: &Path, what: &str) -> Result<T> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the {what} {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{}: not the JSON that {what} prints", path.display()))
}

fn source_commit(root: &Path) -> Result<String> {
    if let Ok(sha) = std::env::var("GITHUB_SHA") {
        if !sha.is_empty() {
            return Ok(sha);
        }
    }
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["rev-parse", "HEAD"])
        .output()
        .context("cannot run git to find the source commit; pass --source-commit")?;
    if !out.status.success() {
        bail!(
            "`git rev-parse HEAD` failed in {}: {}; pass --source-commit",
            root.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[derive(Serialize)]
struct WriteReport<'a> {
    path: String,
    sha256: String,
    release_tag: &'a str,
    reference: &'a str,
    complete: bool,
    problems: Vec<Problem>,
}

pub fn write_cmd(args: ReceiptWriteArgs) -> Result<ExitCode> {
    let root = repo_root();
    let manifest = Manifest::load(&root.join(MANIFEST_PATH))?;
    let inventory: InventoryInput = read_json(&root.join(INVENTORY_PATH), "package inventory")?;
    let mut artifacts = Vec::new();
    for (name, path) in ARTIFACTS {
        let file = root.join(path);
        let digest = sha256_file(&file)
            .with_context(|| format!("artifact `{name}` ({path}) is needed for the receipt"))?;
        artifacts.push((name.to_string(), path.to_string(), digest));
    }
    let inputs = ReceiptInputs {
        release_tag_override: args.tag.clone(),
        created_at: now_or(args.now.as_deref())?,
        source_commit: match &args.source_commit {
            Some(sha) => sha.clone(),
            None => source_commit(&root)?,
        },
        gate: read_json(&args.gate, "`cargo xtask gate --json` output")?,
        resolve: read_json(&args.resolve, "`cargo xtask resolve --json` output")?,
        inventory,
        manifest,
        artifacts,
        builds: args
            .builds
            .iter()
            .map(|p| read_json(p, "`cargo xtask build --json` output"))
            .collect::<Result<_>>()?,
        smokes: args
            .smokes
            .iter()
            .map(|p| read_json(p, "`cargo xtask smoke --json` output"))
            .collect::<Result<_>>()?,
        publish: read_json(&args.publish, "`cargo xtask publish --json` output")?,
    };
    let receipt = assemble(inputs)?;
    let bytes = receipt_bytes(&receipt);
    let digest = sha256_hex(&bytes);
    let out_dir = args
        .out_dir
        .clone()
        .unwrap_or_else(|| crate::util::state_dir(&root, "receipts"));
    let path: PathBuf = out_dir.join(receipt_file_name(&receipt.release_tag, &digest));
    atomic_write(&path, &bytes)?;

    // Read back what is on disk and verify it as a consumer would.
    let check = verify_file(&path, None)?;
    let report = WriteReport {
        path: path.display().to_string(),
        sha256: digest,
        release_tag: &receipt.release_tag,
        reference: &receipt.index.reference,
        complete: receipt.complete,
        problems: check.problems,
    };
    if args.json {
        crate::terminal_text::print_json_escaped(&report)?;
    } else {
        println!("{}", crate::terminal_text::escape(&report.path));
    }
    if !receipt.complete {
        eprintln!("the receipt is written but incomplete; consumers will reject it:");
        print_problems(&report.problems);
        return Ok(ExitCode::FAILURE);
    }
    if !report.problems.is_empty() {
        print_problems(&report.problems);
        bail!("the receipt written to {} does not verify", report.path);
    }
    Ok(ExitCode::SUCCESS)
}

/// A genuine-looking receipt for unit tests here and in the modules that judge receipts.
#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;

    pub fn manifest() -> Manifest {
        Manifest::load(&repo_root().join(MANIFEST_PATH)).unwrap()
    }

    pub fn digest(seed: &str) -> String {
        format!("sha256:{}", sha256_hex(seed.as_bytes()))
    }

    /// A complete receipt whose index digest really is the index of its platforms.
    pub const SAMPLE_TAG: &str = "2026.11.30-0123456789ab";

    /// The time at which the sample is verified: an hour after it was written.
    pub fn sample_now() -> chrono::DateTime<chrono::Utc> {
        "2026-11-30T07:30:00Z".parse().unwrap()
    }

    pub fn sample() -> Receipt {
        let platforms: Vec<PlatformRecord> = Platform::ALL
            .iter()
            .map(|&platform| PlatformRecord {
                platform,
                os: "linux".into(),
                architecture: platform.arch().into(),
                variant: None,
                build: BuildMode::Native,
                build_id: "b".repeat(64),
                local_image: format!("coding-agent:{}", platform.arch()),
                image_id: digest(&format!("id {platform}")),
                base_image: BaseImageRecord {
                    reference: "base".into(),
                    digest: digest("base"),
                },
                digest: digest(&format!("manifest {platform}")),
                media_type: crate::oci::index::OCI_MANIFEST.into(),
                manifest_size: 700,
                config_digest: digest(&format!("config {platform}")),
                image_size: 10,
                pushed_size: 5,
                debian_packages: vec!["libc6=2.36-9+deb12u13".into()],
                smoke: SmokeRecord {
                    passed: true,
                    checks: manifest()
                        .required_smoke_checks(platform, false)
                        .into_iter()
                        .map(|name| SmokeCheck {
                            name,
                            passed: true,
                            output: "ok".into(),
                        })
                        .collect(),
                },
            })
            .collect();
        let entries: Vec<IndexEntry> = platforms.iter().map(IndexEntry::from).collect();
        let index = index_bytes(&entries).unwrap();
        let index_digest = format!("sha256:{}", sha256_hex(&index));
        let manifest = manifest();
        let tarball = |package: &str| TarballRecord {
            package: package.into(),
            version: "22.23.5".into(),
            integrity: "sha512-AAAA".into(),
        };
        Receipt {
            schema_version: 1,
            release_tag: SAMPLE_TAG.into(),
            created_at: "2026-11-30T06:30:00Z".into(),
            source_commit: "ab".repeat(20),
            trigger: Trigger::Scheduled,
            gate: GateRecord {
                due: true,
                forced: false,
                catch_up: false,
                epoch_day: 20_787,
                next_due: "2026-12-03".into(),
                reason: "cadence".into(),
            },
            resolver: ResolverRecord {
                cutoff: "2026-11-28T06:30:00Z".into(),
                registry: "https://registry.npmjs.org/".into(),
            },
            node: NodeRecord {
                version: "22.23.5".into(),
                npm: TarballRecord {
                    package: "npm".into(),
                    version: "10.9.9".into(),
                    integrity: "sha512-CCCC".into(),
                },
                platforms: manifest
                    .node
                    .packages
                    .iter()
                    .map(|(platform, package)| (*platform, tarball(package)))
                    .collect(),
            },
            packages: manifest
                .packages
                .iter()
                .map(|p| PackageRecord {
                    name: p.name.clone(),
                    version: "8.23.0".into(),
                    integrity: "sha512-BBBB==".into(),
                    latest: "8.23.0".into(),
                    published: None,
                    previously_locked: Some("8.22.0".into()),
                    rollback: false,
                    held_back: false,
                    notes: vec![],
                })
                .collect(),
            dependencies: vec![],
            artifacts: ARTIFACTS
                .iter()
                .map(|(name, path)| ArtifactRecord {
                    name: name.to_string(),
                    path: path.to_string(),
                    sha256: sha256_hex(name.as_bytes()),
                })
                .collect(),
            required_platforms: Platform::ALL.to_vec(),
            platforms,
            index: IndexRecord {
                tag: SAMPLE_TAG.into(),
                reference: format!("127.0.0.1:5000/s0/ca@{index_digest}"),
                digest: index_digest,
                media_type: crate::oci::index::OCI_INDEX.into(),
                size: index.len() as u64,
                repository: "127.0.0.1:5000/s0/ca".into(),
            },
            complete: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::tests_support::*;
    use super::*;

    #[test]
    fn file_names_round_trip_with_dashes_in_the_tag() {
        let hex = "a".repeat(64);
        let name = receipt_file_name("2026-11-30-abc1234", &hex);
        assert_eq!(
            parse_receipt_file_name(&name),
            Some(("2026-11-30-abc1234", hex.as_str()))
        );
        assert_eq!(parse_receipt_file_name("receipt.json"), None);
        assert_eq!(parse_receipt_file_name("receipt--x.json"), None);
    }

    #[test]
    fn digest_formats() {
        assert!(is_sha256_digest(&format!("sha256:{}", "0f".repeat(32))));
        assert!(!is_sha256_digest(&format!("sha256:{}", "0F".repeat(32))));
        assert!(!is_sha256_digest(&format!("sha512:{}", "0f".repeat(32))));
        assert!(!is_sha256_digest(&format!("sha256:{}", "0f".repeat(31))));
        assert!(!is_sha256_digest(&"0f".repeat(32)));
    }

    #[test]
    fn tags() {
        assert!(is_valid_tag("2026-11-30.1_a"));
        assert!(!is_valid_tag("-x"));
        assert!(!is_valid_tag(""));
        assert!(!is_valid_tag("a/b"));
        assert!(!is_valid_tag(&"a".repeat(129)));
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
        let schema: serde_json::Value = serde_json::from_str(SCHEMA_JSON).unwrap();
        let instance = serde_json::to_value(sample()).unwrap();
        assert_eq!(schema_problems(&schema, &instance), vec![]);
    }

    /// Every object in the schema lists all its properties as required and allows no
    /// others: the serialised receipt always has every field (optional ones as null).
    #[test]
    fn schema_objects_are_closed_and_fully_required() {
        fn walk(v: &serde_json::Value, path: &str) {
            if let Some(obj) = v.as_object() {
                if let Some(props) = obj.get("properties").and_then(|p| p.as_object()) {
                    let mut required: Vec<&str> = obj["required"]
                        .as_array()
                        .unwrap_or_else(|| panic!("{path}: no `required`"))
                        .iter()
                        .map(|r| r.as_str().unwrap())
                        .collect();
                    required.sort();
                    let mut keys: Vec<&str> = props.keys().map(String::as_str).collect();
                    keys.sort();
                    assert_eq!(required, keys, "{path}");
                    assert_eq!(obj["additionalProperties"], false, "{path}");
                }
                for (k, child) in obj {
                    walk(child, &format!("{path}/{k}"));
                }
            } else if let Some(items) = v.as_array() {
                items.iter().for_each(|i| walk(i, path));
            }
        }
        walk(&serde_json::from_str(SCHEMA_JSON).unwrap(), "");
    }

    #[test]
    fn schema_rejections_name_the_field() {
        let schema: serde_json::Value = serde_json::from_str(SCHEMA_JSON).unwrap();
        let mut instance = serde_json::to_value(sample()).unwrap();
        instance["platforms"][1]["digest"] = "sha256:abc".into();
        instance["platforms"][0]["build"] = "guessed".into();
        instance["index"]["extra"] = true.into();
        instance["gate"].as_object_mut().unwrap().remove("due");
        instance["node"]["platforms"]["linux/riscv64"] = instance["node"]["npm"].clone();
        instance["packages"][0]["integrity"] = "md5-xyz".into();
        let got: Vec<String> = schema_problems(&schema, &instance)
            .into_iter()
            .map(|p| p.field)
            .collect();
        for expected in [
            "platforms[1].digest",
            "platforms[0].build",
            "index.extra",
            "gate.due",
            "node.platforms.linux/riscv64",
            "packages[0].integrity",
        ] {
            assert!(
                got.iter().any(|g| g == expected),
                "{expected} not in {got:?}"
            );
        }
    }

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
            ("index.repository", |r| {
                r.index.repository = "127.0.0.1:5000/S0/ca".into();
                r.index.reference = format!("{}@{}", r.index.repository, r.index.digest);
            }),
            ("index.repository", |r| {
                r.index.repository = "https://127.0.0.1:5000/s0/ca".into();
                r.index.reference = format!("{}@{}", r.index.repository, r.index.digest);
            }),
            ("index.repository", |r| {
                r.index.repository = "127.0.0.1:5000/s0/ca\u{200b}".into();
                r.index.reference = format!("{}@{}", r.index.repository, r.index.digest);
            }),
            ("index.repository", |r| {
                r.index.repository = "127.0.0.1:5000/s0/ca:v1".into();
                r.index.reference = format!("{}@{}", r.index.repository, r.index.digest);
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
                r.platforms[0].media_type = crate::oci::index::OCI_INDEX.into()
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
        let mut lock = serde_json::json!({"packages": {}});
        for p in &r.packages {
            lock["packages"][format!("node_modules/{}", p.name)] =
                serde_json::json!({"version": p.version, "integrity": p.integrity});
        }
        let tarball = |t: &TarballRecord| serde_json::json!({"package": t.package, "version": t.version, "integrity": t.integrity});
        let inventory = serde_json::json!({
            "cutoff": r.resolver.cutoff,
            "registry": r.resolver.registry,
            "node": {
                "version": r.node.version,
                "npm": tarball(&r.node.npm),
                "platforms": r.node.platforms.iter()
                    .map(|(p, t)| (p.to_string(), tarball(t)))
                    .collect::<serde_json::Map<_, _>>(),
            },
        });
        let mut evidence = ArtifactEvidence {
            digests: ARTIFACTS
                .iter()
                .map(|(n, _)| (n.to_string(), Ok(sha256_hex(n.as_bytes()))))
                .collect(),
            documents: [
                (
                    "package.json".to_string(),
                    serde_json::json!({"dependencies": deps}),
                ),
                ("package-lock.json".to_string(), lock.clone()),
                ("inventory.json".to_string(), inventory.clone()),
            ]
            .into_iter()
            .collect(),
        };
        let v = verify_bytes(&name, &bytes, Some(&evidence));
        assert!(v.valid, "{:?}", v.problems);

        lock["packages"]["node_modules/ws"]["version"] = "0.0.1".into();
        evidence.documents.insert("package-lock.json".into(), lock);
        let mut changed = inventory;
        changed["node"]["platforms"]["linux/arm64"]["integrity"] = "sha512-ZZZZ".into();
        evidence.documents.insert("inventory.json".into(), changed);
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
    fn artifacts_are_checked_by_name() {
        let r = sample();
        let bytes = receipt_bytes(&r);
        let name = receipt_file_name(&r.release_tag, &sha256_hex(&bytes));
        let mut found = ArtifactEvidence {
            digests: ARTIFACTS
                .iter()
                .map(|(n, _)| (n.to_string(), Ok(sha256_hex(n.as_bytes()))))
                .collect(),
            documents: BTreeMap::new(),
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

    #[test]
    fn garbage_and_truncation_are_rejected_with_a_field() {
        let v = verify_bytes("receipt-x-00.json", b"{\"schema_version\": 1, \"rel", None);
        assert!(!v.valid);
        assert!(v.problems.iter().any(|p| p.field == "(document)"));
        assert!(v.problems.iter().any(|p| p.field == "file name"));
        let v = verify_bytes("receipt-x-00.json", b"{\"schema_version\": 2}", None);
        assert!(v.problems.iter().any(|p| p.field == "schema_version"));
        let v = verify_bytes("receipt-x-00.json", b"{\"schema_version\": 1}", None);
        assert!(
            v.problems.iter().any(|p| p.field == "release_tag"),
            "{:?}",
            v.problems
        );
    }
}
