//! `cargo xtask resolve`: one exact version of every template package, decided safely.
//!
//! The rules, each a pure function over registry data:
//! - start from `dist-tags.latest`, never from the highest semver (Codex publishes its platform
//!   binaries as prerelease versions of `@openai/codex` itself);
//! - a candidate is a stable version, not deprecated, not above `latest`;
//! - cooldown: its publish time is known, parseable, not in the future and older than the
//!   cutoff (`now - cooldown`); otherwise it is not eligible, ever: the rule fails closed;
//! - platform readiness: every linux glibc binary package it names for the manifest's CPUs
//!   (aliases included) exists at exactly the named version;
//! - the newest eligible candidate wins; below the locked version that is an upstream
//!   rollback, followed and flagged;
//! - no eligible candidate: fail, listing why each was rejected, and write nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use chrono::{DateTime, SubsecRound, Utc};
use semver::Version;

use crate::npm::provenance::{self, Outcome};
use crate::npm::registry::{Packument, Registry, VersionMeta};
use crate::npm::trust::{InputTrust, TrustOptions};
use crate::util::{now_or, print_json, Progress};
use template_formats::manifest::{Manifest, Platform, ProvenanceIdentity};
use template_formats::model::inventory::Inventory;
use template_formats::model::package_json::PackageJson;
use template_formats::model::resolution::{
    Evidence, InputStatus, ProvenanceRecord, Rejection, Resolution, Resolved,
};
use template_formats::model::rfc3339;

/// The versions pinned in template/package.json, by package name.
pub(crate) type Locked = BTreeMap<String, Version>;

/// What one package's resolution needs beyond its own packument: the packuments of the
/// platform-binary packages its candidates name, by package name.
pub(crate) type Related = BTreeMap<String, std::sync::Arc<Packument>>;

/// A platform binary named by an optional dependency: `opencode-linux-arm64@1.18.18`, or an
/// alias such as `@openai/codex-linux-x64 -> npm:@openai/codex@0.171.0-linux-x64`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PlatformBinary {
    pub dependency: String,
    pub package: String,
    pub version: String,
    pub cpu: &'static str,
}

/// The linux glibc binaries for `cpus` among a version's optional dependencies, and the
/// CPUs for which it names none. musl variants are not required: the image is glibc and
/// npm never installs them there.
pub(crate) fn required_platform_binaries(
    optional: &BTreeMap<String, String>,
    cpus: &[&'static str],
) -> (Vec<PlatformBinary>, Vec<&'static str>) {
    let mut found = Vec::new();
    let mut any_platform_package = false;
    for (dependency, spec) in optional {
        let (package, version) = match spec.strip_prefix("npm:") {
            Some(alias) => match alias[1..].rfind('@') {
                Some(at) => (alias[..at + 1].to_owned(), alias[at + 2..].to_owned()),
                None => (alias.to_owned(), String::new()),
            },
            None => (dependency.clone(), spec.clone()),
        };
        let tokens: BTreeSet<String> = format!("{dependency} {package} {version}")
            .to_ascii_lowercase()
            .split(|c: char| !c.is_ascii_alphanumeric())
            .map(str::to_owned)
            .collect();
        let os_tokens = ["linux", "darwin", "win32", "windows", "freebsd"];
        if os_tokens.iter().any(|t| tokens.contains(*t)) {
            any_platform_package = true;
        }
        if !tokens.contains("linux") || tokens.contains("musl") {
            continue;
        }
        for &cpu in cpus {
            if tokens.contains(cpu) {
                found.push(PlatformBinary {
                    dependency: dependency.clone(),
                    package: package.clone(),
                    version: version.clone(),
                    cpu,
                });
            }
        }
    }
    let missing = if any_platform_package {
        cpus.iter()
            .copied()
            .filter(|cpu| !found.iter().any(|b| b.cpu == *cpu))
            .collect()
    } else {
        Vec::new()
    };
    (found, missing)
}

/// Parses a publish time; `None` when absent or not RFC 3339.
fn publish_time(packument: &Packument, version: &str) -> Result<DateTime<Utc>, String> {
    match packument.time.get(version) {
        None => Err("publish time unknown (no `time` entry): the cooldown fails closed".into()),
        Some(serde_json::Value::String(s)) => DateTime::parse_from_rfc3339(s)
            .map(|t| t.with_timezone(&Utc))
            .map_err(|_| format!("publish time `{s}` is not RFC 3339: the cooldown fails closed")),
        Some(other) => Err(format!(
            "publish time {other} is not a string: the cooldown fails closed"
        )),
    }
}

/// The inputs of one package's decision.
pub(crate) struct Inputs<'a> {
    pub packument: &'a Packument,
    pub related: &'a Related,
    pub locked: Option<&'a Version>,
    pub now: DateTime<Utc>,
    pub cutoff: DateTime<Utc>,
    pub cpus: &'a [&'static str],
    /// Whether, and with which keys, registry signatures are required.
    pub trust: &'a InputTrust,
    /// The provenance identity template/manifest.yaml records for this package.
    pub identity: Option<&'a ProvenanceIdentity>,
    /// Each version's provenance as judged so far, by version; the edge fetches the ones
    /// `provenance_to_fetch` names.
    pub provenance: &'a BTreeMap<String, Outcome>,
    /// The locked version's trust record, as the committed inventory has it.
    pub locked_trust: Option<&'a LockedTrust>,
    /// For a package allowed to run install scripts: the content the manifest acknowledges,
    /// and what the versions read so far run.
    pub scripts: Option<ScriptsReview<'a>>,
}

/// What the committed inventory says of a top-level package's locked version: the level the
/// next version must keep.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LockedTrust {
    pub version: String,
    pub evidence: Evidence,
    /// How `publisher_of` names its publisher.
    pub publisher: Option<String>,
    pub provenance: Option<ProvenanceRecord>,
}

/// The locked versions' trust records from the committed inventory, by package name.
pub(crate) fn locked_trust(inventory: &Inventory) -> BTreeMap<String, LockedTrust> {
    inventory
        .packages
        .iter()
        .filter(|p| p.top_level)
        .map(|p| {
            let publisher = p
                .publisher
                .as_ref()
                .map(|person| describe_publisher(&person.name, person.trusted_publisher.is_some()));
            (
                p.name.clone(),
                LockedTrust {
                    version: p.version.clone(),
                    evidence: p.evidence,
                    publisher,
                    provenance: p.provenance.clone(),
                },
            )
        })
        .collect()
}

/// The strongest trust evidence the registry shows for a version (pnpm's `getTrustEvidence`).
pub(crate) fn evidence_of(meta: &VersionMeta) -> Evidence {
    if meta
        .npm_user
        .as_ref()
        .is_some_and(|u| u.trusted_publisher.is_some())
    {
        Evidence::TrustedPublisher
    } else if provenance::claims_provenance(
        meta.dist.as_ref().and_then(|d| d.attestations.as_ref()),
    ) {
        Evidence::Provenance
    } else {
        Evidence::None
    }
}

fn describe_publisher(name: &str, trusted: bool) -> String {
    if trusted {
        format!("{name} (trusted publishing)")
    } else {
        name.to_owned()
    }
}

/// Who published a version, as `_npmUser` says (not `maintainers`: who could have published
/// is not who did); `None` when the registry does not say (a mirror strips it).
pub(crate) fn publisher_of(meta: &VersionMeta) -> Option<String> {
    meta.npm_user
        .as_ref()
        .filter(|u| !u.name.trim().is_empty())
        .map(|u| describe_publisher(&u.name, u.trusted_publisher.is_some()))
}

/// A package's install scripts under review (`install_scripts.rs`): a version is eligible
/// only when what it runs is what the manifest acknowledges.
#[derive(Clone, Copy)]
pub(crate) struct ScriptsReview<'a> {
    pub acknowledged: &'a template_formats::manifest::InstallScripts,
    /// Version -> its install scripts as read from its tarball, or why they could not be read.
    pub read: &'a BTreeMap<String, Result<template_formats::manifest::InstallScripts, String>>,
}

/// The reason a version whose install scripts were not read yet carries: `resolve_all` reads
/// them when it is the only one ([`next_scripts_to_read`]), so it never reaches the output.
const SCRIPTS_NOT_READ: &str = "install scripts not read";

/// How many tarballs of one package `resolve` reads to find a version whose install scripts
/// are the acknowledged ones, besides those down to the locked version.
const MAX_SCRIPT_READS: usize = 8;

/// `latest`, and the versions that may be chosen, newest first: `latest` and every stable
/// version below it.
fn candidates(p: &Packument) -> Result<(Version, Vec<Version>)> {
    let latest_text = p
        .dist_tags
        .get("latest")
        .with_context(|| format!("`{}` has no `latest` dist-tag", p.name))?;
    let latest = Version::parse(latest_text).with_context(|| {
        format!(
            "`{}`: dist-tags.latest `{latest_text}` is not a semver version",
            p.name
        )
    })?;
    if !p.versions.contains_key(latest_text) {
        bail!(
            "`{}`: dist-tags.latest is {latest_text}, but the registry lists no such version",
            p.name
        );
    }

    // Candidates: `latest` first, then every stable version below it, newest first.
    let mut candidates: Vec<Version> = p
        .versions
        .keys()
        .filter_map(|v| Version::parse(v).ok())
        .filter(|v| v.pre.is_empty() && v.build.is_empty() && *v <= latest)
        .collect();
    if !latest.pre.is_empty() {
        candidates.push(latest.clone());
    }
    candidates.sort_by(|a, b| b.cmp(a));
    candidates.dedup();
    Ok((latest, candidates))
}

/// The newest version that would be taken but for its install scripts, which were not read
/// yet: the one tarball `resolve_all` must read next. `None` when the decision needs none, or
/// needs a version's provenance first ([`provenance_to_fetch`]: a version that falls by its
/// provenance needs no tarball read).
pub(crate) fn next_scripts_to_read(inputs: &Inputs<'_>) -> Option<Version> {
    let review = inputs.scripts?;
    let (_, candidates) = candidates(inputs.packument).ok()?;
    for candidate in candidates {
        // Down to the locked version every tarball is read if need be (a release that has not
        // run for a while); below it, a few: when the newest ones all differ from the
        // acknowledged content, older ones mostly do too, and each read is a download.
        let at_or_above_lock = inputs.locked.is_some_and(|l| candidate >= *l);
        if !at_or_above_lock && review.read.len() >= MAX_SCRIPT_READS {
            return None;
        }
        let before = rejections_before_provenance(inputs, &candidate);
        if before.is_empty() {
            let pending = needs_provenance(inputs, &candidate)
                && !inputs.provenance.contains_key(&candidate.to_string());
            if pending || provenance_rejection(inputs, &candidate).is_none() {
                // Taken, or its provenance is fetched next: no tarball is needed now.
                return None;
            }
            continue;
        }
        if before == [SCRIPTS_NOT_READ] {
            return Some(candidate);
        }
    }
    None
}

/// Decides one package's version. `Err` lists every candidate and why it was rejected.
pub(crate) fn decide(inputs: &Inputs<'_>) -> Result<Resolved> {
    let p = inputs.packument;
    let (latest, candidates) = candidates(p)?;
    let mut rejected = Vec::new();
    for candidate in &candidates {
        let mut reasons = rejections(inputs, candidate);
        if reasons.len() > 1 {
            // Not read because it was not eligible anyway: the other reasons say why.
            reasons.retain(|r| r != SCRIPTS_NOT_READ);
        }
        if !reasons.is_empty() {
            // What a maintainer acknowledges to take this version: its install scripts as
            // read, when they are what keeps it back.
            let install_scripts = inputs.scripts.and_then(|review| {
                let found = review.read.get(&candidate.to_string())?.as_ref().ok()?;
                (found != review.acknowledged).then(|| found.clone())
            });
            rejected.push(Rejection {
                version: candidate.clone(),
                reasons,
                install_scripts,
            });
            continue;
        }
        let text = candidate.to_string();
        let published = publish_time(p, &text).expect("checked by rejections");
        let signed_by = signed_by(inputs, candidate).expect("checked by rejections");
        let held_back = *candidate != latest;
        let rollback = inputs.locked.is_some_and(|l| candidate < l);
        let meta = &p.versions[&text];
        let provenance = match inputs.provenance.get(&text) {
            Some(Outcome::Verified(record)) => Some(record.clone()),
            _ => None,
        };
        let publisher = publisher_of(meta);
        let publisher_change = publisher_change(inputs, publisher.as_deref());
        let mut notes = Vec::new();
        if let Some(change) = &publisher_change {
            notes.push(format!("PUBLISHER CHANGED: {change}"));
        }
        if let (Some(now), Some(before)) = (
            &provenance,
            inputs.locked_trust.and_then(|l| l.provenance.as_ref()),
        ) {
            let (a, b) = (identity_text(before), identity_text(now));
            if a != b {
                notes.push(format!("PROVENANCE IDENTITY CHANGED: {a} -> {b}"));
            }
        }
        if held_back {
            let why = rejected
                .first()
                .map(|r| r.reasons.join("; "))
                .unwrap_or_default();
            notes.push(format!("held back from latest {latest}: {why}"));
        }
        if rollback {
            notes.push(format!(
                "ROLLBACK: {candidate} is below the locked {}; upstream moved `latest` back or withdrew versions",
                inputs.locked.unwrap()
            ));
        }
        return Ok(Resolved {
            name: p.name.clone(),
            version: candidate.clone(),
            latest: latest.clone(),
            published: published.trunc_subsecs(0),
            locked: inputs.locked.cloned(),
            rollback,
            held_back,
            notes,
            rejected,
            signed_by,
            evidence: evidence_of(meta),
            provenance,
            publisher,
            publisher_change,
            repository: meta.repository_url(),
        });
    }

    let mut message = format!(
        "no eligible version of `{}` (latest {latest}, cutoff {}):",
        p.name,
        inputs
            .cutoff
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    );
    const SHOWN: usize = 12;
    for r in rejected.iter().take(SHOWN) {
        message.push_str(&format!("\n  {}: {}", r.version, r.reasons.join("; ")));
    }
    if rejected.len() > SHOWN {
        message.push_str(&format!(
            "\n  ... and {} older versions",
            rejected.len() - SHOWN
        ));
    }
    if rejected.is_empty() {
        message.push_str("\n  the registry lists no stable version at or below latest");
    }
    if let Some(held) = rejected.iter().find(|r| r.install_scripts.is_some()) {
        message.push('\n');
        message.push_str(&crate::npm::install_scripts::remedy(
            &p.name,
            &held.version.to_string(),
            held.install_scripts.as_ref().expect("found above"),
        ));
    }
    bail!(message)
}

/// The key that signed `candidate` (`None` when the inputs are unverified), or why its
/// signature does not stand.
fn signed_by(inputs: &Inputs<'_>, candidate: &Version) -> Result<Option<String>, String> {
    let InputTrust::Signed(keys) = inputs.trust else {
        return Ok(None);
    };
    let p = inputs.packument;
    let text = candidate.to_string();
    let dist = p.versions[&text].dist.as_ref();
    let Some(integrity) = dist.and_then(|d| d.integrity.as_deref()) else {
        return Err("registry signature: the registry states no integrity".to_owned());
    };
    let signatures = dist.map(|d| d.signatures.as_slice()).unwrap_or_default();
    crate::npm::signatures::check(
        &p.name,
        &text,
        integrity,
        signatures,
        keys,
        publish_time(p, &text).ok(),
    )
    .map(Some)
    .map_err(|why| format!("registry signature: {why}"))
}

/// The version whose provenance `decide` needs next and does not have: the newest candidate
/// that passes every other rule and must be judged on its provenance. `None` when the
/// decision needs nothing more. The edge fetches it, adds the outcome and asks again.
pub(crate) fn provenance_to_fetch(inputs: &Inputs<'_>) -> Option<Version> {
    let (_, candidates) = candidates(inputs.packument).ok()?;
    for candidate in candidates {
        if !rejections_before_provenance(inputs, &candidate).is_empty() {
            continue;
        }
        let text = candidate.to_string();
        if needs_provenance(inputs, &candidate) && !inputs.provenance.contains_key(&text) {
            return Some(candidate);
        }
        // This candidate stands or falls by what is already known: it is taken if it stands.
        let stands = provenance_rejection(inputs, &candidate).is_none();
        if stands {
            return None;
        }
    }
    None
}

/// Whether `candidate`'s provenance must be judged: the registry signs (so it would serve
/// attestations too) and the manifest records an identity, or the version claims provenance.
fn needs_provenance(inputs: &Inputs<'_>, candidate: &Version) -> bool {
    if !matches!(inputs.trust, InputTrust::Signed(_)) {
        return false;
    }
    let meta = &inputs.packument.versions[&candidate.to_string()];
    inputs.identity.is_some()
        || provenance::claims_provenance(meta.dist.as_ref().and_then(|d| d.attestations.as_ref()))
}

/// Why `candidate`'s provenance does not stand, if it does not.
fn provenance_rejection(inputs: &Inputs<'_>, candidate: &Version) -> Option<String> {
    if !needs_provenance(inputs, candidate) {
        return None;
    }
    match inputs.provenance.get(&candidate.to_string()) {
        None => Some("provenance: not checked (fails closed)".to_owned()),
        Some(Outcome::Verified(_)) => None,
        Some(Outcome::Refused(why)) => Some(why.clone()),
        Some(Outcome::Absent(why)) => inputs.identity.map(|id| {
            format!(
                "provenance: none ({why}), but the manifest requires it from {} at {}",
                id.workflow_uri("").trim_end_matches('@'),
                id.ref_pattern
            )
        }),
    }
}

fn identity_text(record: &ProvenanceRecord) -> String {
    if record.workflow.is_empty() {
        // Not a GitHub workflow: `repository` holds the certificate's identity as it is.
        format!("{} ({})", record.repository, record.git_ref)
    } else {
        format!(
            "{}/{}@{}",
            record.repository, record.workflow, record.git_ref
        )
    }
}

/// `<locked publisher> -> <this publisher>` when both are known and differ.
fn publisher_change(inputs: &Inputs<'_>, publisher: Option<&str>) -> Option<String> {
    let locked = inputs.locked?.to_string();
    let before = inputs
        .locked_trust
        .filter(|t| t.version == locked)
        .and_then(|t| t.publisher.clone())
        .or_else(|| {
            inputs
                .packument
                .versions
                .get(&locked)
                .and_then(publisher_of)
        })?;
    let now = publisher?;
    (before != now).then(|| format!("{before} -> {now}"))
}

/// Why `candidate` has less trust evidence than the locked version had, or than a version
/// published before it had (pnpm's `failIfTrustDowngraded`: by publish time, not semver; a
/// stable candidate is compared with stable versions only). Only where the registry signs:
/// a stripping mirror shows no evidence for any version.
fn downgrade_rejection(inputs: &Inputs<'_>, candidate: &Version) -> Option<String> {
    if !matches!(inputs.trust, InputTrust::Signed(_)) {
        return None;
    }
    let p = inputs.packument;
    let text = candidate.to_string();
    let has = evidence_of(&p.versions[&text]);
    if let Some(locked) = inputs.locked_trust {
        if has < locked.evidence {
            return Some(format!(
                "trust downgrade: the locked {} had {}, this version has {} (docs/inputs.md)",
                locked.version,
                locked.evidence.describe(),
                has.describe()
            ));
        }
    }
    let published = publish_time(p, &text).ok()?;
    let stable = candidate.pre.is_empty();
    let stronger = p
        .versions
        .iter()
        .filter(|(v, _)| {
            Version::parse(v).is_ok_and(|v| !stable || v.pre.is_empty()) && *v != &text
        })
        .filter(|(v, _)| publish_time(p, v).is_ok_and(|t| t < published))
        .map(|(v, meta)| (evidence_of(meta), v))
        .filter(|(e, _)| *e > has)
        .max_by(|a, b| a.0.cmp(&b.0));
    stronger.map(|(e, v)| {
        format!(
            "trust downgrade: {v}, published before it, had {}, this version has {} (docs/inputs.md)",
            e.describe(),
            has.describe()
        )
    })
}

/// Every reason `candidate` is not eligible; empty when it is.
fn rejections(inputs: &Inputs<'_>, candidate: &Version) -> Vec<String> {
    let mut reasons = rejections_before_provenance(inputs, candidate);
    reasons.extend(provenance_rejection(inputs, candidate));
    reasons
}

/// Every reason but the provenance's (which may need a fetch first).
fn rejections_before_provenance(inputs: &Inputs<'_>, candidate: &Version) -> Vec<String> {
    let p = inputs.packument;
    let text = candidate.to_string();
    let mut reasons = Vec::new();
    if !candidate.pre.is_empty() {
        reasons.push("prerelease".to_owned());
    }
    let meta = &p.versions[&text];
    if let Some(message) = meta.deprecation() {
        reasons.push(format!("deprecated: {message}"));
    }
    let outcome = inputs.provenance.get(&text);
    match publish_time(p, &text) {
        Err(why) => reasons.push(why),
        Ok(t) if t > inputs.now => reasons.push(format!(
            "publish time {} is in the future: the cooldown fails closed",
            t.to_rfc3339()
        )),
        Ok(published) => {
            let t = provenance::effective_publish_time(published, outcome);
            if t > inputs.now {
                reasons.push(format!(
                    "the transparency log integrated its provenance at {}, in the future: the cooldown fails closed",
                    t.to_rfc3339()
                ));
            } else if t > inputs.cutoff {
                let age = inputs.now - t;
                let logged = if t > published {
                    format!(
                        " (its provenance logged at {}, after the registry's {})",
                        rfc3339(t),
                        rfc3339(published)
                    )
                } else {
                    String::new()
                };
                reasons.push(format!(
                    "published {} ({}h ago){logged}, inside the cooldown until {}",
                    rfc3339(t),
                    age.num_hours(),
                    rfc3339(t + (inputs.now - inputs.cutoff))
                ))
            }
        }
    }
    if let Err(why) = signed_by(inputs, candidate) {
        reasons.push(why);
    }
    reasons.extend(downgrade_rejection(inputs, candidate));
    if let Some(review) = inputs.scripts {
        match review.read.get(&text) {
            None => reasons.push(SCRIPTS_NOT_READ.to_owned()),
            Some(Err(why)) => reasons.push(format!("install scripts: {why}")),
            Some(Ok(found)) => {
                let judged =
                    crate::npm::install_scripts::judge(&p.name, &text, review.acknowledged, found);
                if let Err(why) = judged {
                    reasons.push(why);
                }
            }
        }
    }
    let (binaries, missing_cpus) =
        required_platform_binaries(&meta.optional_dependencies, inputs.cpus);
    for cpu in missing_cpus {
        reasons.push(format!("names no linux {cpu} binary package"));
    }
    for binary in binaries {
        let present = inputs
            .related
            .get(&binary.package)
            .is_some_and(|r| r.versions.contains_key(&binary.version));
        if !present {
            reasons.push(format!(
                "platform binary {}@{} (linux {}) is not published",
                binary.package, binary.version, binary.cpu
            ));
        }
    }
    reasons
}

/// The versions pinned in `template/package.json`; empty when there is none yet.
pub(crate) fn read_locked(layout: &crate::layout::Layout) -> Result<Locked> {
    let path = layout.package_json();
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Locked::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let origin = path.display().to_string();
    PackageJson::parse(text.as_bytes(), &origin)?.exact_versions(&origin)
}

/// Asks the registry about every package and decides them all; the IO half of `resolve`.
/// Also decides how the inputs are judged (`trust::establish`) and returns that.
pub(crate) async fn resolve_all(
    manifest: &Manifest,
    registry: &Registry,
    locked: &Locked,
    now: DateTime<Utc>,
    trust: &TrustOptions,
    ctx: &crate::Context,
    progress: &Progress,
) -> Result<(Resolution, InputTrust)> {
    let cutoff = now - manifest.cooldown();
    let cpus: Vec<&'static str> = manifest
        .platforms
        .iter()
        .map(|p| Platform::npm_cpu(*p))
        .collect();
    let names: Vec<String> = manifest.packages.iter().map(|p| p.name.clone()).collect();
    // Whether the inputs can be verified is the first thing the command says (an unverified
    // registry is named in its first line), so the packuments it is judged from are fetched
    // before anything is printed.
    let packuments = registry.packuments(&names).await?;
    let input_trust = crate::npm::trust::establish(
        trust,
        registry,
        packuments.values().map(|p| &**p),
        &manifest.node.npm_version.to_string(),
        ctx,
    )
    .await?;
    progress.step(input_trust.headline());
    progress.step(format!(
        "fetched {} packuments from {}",
        names.len(),
        registry.base()
    ));

    // The platform packages named by any version that could be chosen.
    let mut related_names = BTreeSet::new();
    for p in packuments.values() {
        for meta in p.versions.values() {
            if Version::parse(&meta.version).is_ok_and(|v| v.pre.is_empty()) {
                let (binaries, _) = required_platform_binaries(&meta.optional_dependencies, &cpus);
                related_names.extend(binaries.into_iter().map(|b| b.package));
            }
        }
    }
    let related_names: Vec<String> = related_names.into_iter().collect();
    progress.step(format!(
        "fetching {} platform-binary packuments",
        related_names.len()
    ));
    let related = registry.existing_packuments(&related_names).await?;

    let locked_trust = read_locked_trust(&ctx.layout, progress);
    let mut root = None;
    let mut packages = Vec::new();
    let mut failures = Vec::new();
    for spec in &manifest.packages {
        let name = &spec.name;
        let packument = &packuments[name];
        let mut outcomes = BTreeMap::new();
        let mut read = BTreeMap::new();
        let acknowledged = manifest.install_scripts_allowed.get(name);
        // Until the decision needs nothing more: the tarball of a version that would be taken
        // but for its unread install scripts (a package allowed to run them), then the
        // provenance of one that would be taken but for its unfetched provenance.
        loop {
            let inputs = Inputs {
                packument,
                related: &related,
                locked: locked.get(name),
                now,
                cutoff,
                cpus: &cpus,
                trust: &input_trust,
                identity: spec.provenance.as_ref(),
                provenance: &outcomes,
                locked_trust: locked_trust.get(name),
                scripts: acknowledged.map(|acknowledged| ScriptsReview {
                    acknowledged,
                    read: &read,
                }),
            };
            if let Some(version) = next_scripts_to_read(&inputs) {
                let text = version.to_string();
                let found = read_install_scripts(packument, &text, ctx, progress).await?;
                read.insert(text, found);
                continue;
            }
            let Some(version) = provenance_to_fetch(&inputs) else {
                match decide(&inputs) {
                    Ok(r) => packages.push(r),
                    Err(e) => failures.push(format!("{e:#}")),
                }
                break;
            };
            let text = version.to_string();
            let outcome = if outcomes.len() >= MAX_PROVENANCE_FETCHES {
                Outcome::Refused(format!(
                    "provenance: not checked, {MAX_PROVENANCE_FETCHES} newer versions of `{name}` already failed it"
                ))
            } else {
                let root = match &root {
                    Some(root) => root,
                    None => {
                        root.insert(trusted_root(trust, registry, manifest, ctx, progress).await?)
                    }
                };
                progress.step(format!("verifying the provenance of {name}@{text}"));
                let dist = packument.versions[&text].dist.as_ref();
                provenance::fetch_and_judge(
                    registry,
                    root,
                    name,
                    &text,
                    dist.and_then(|d| d.integrity.as_deref())
                        .unwrap_or_default(),
                    dist.and_then(|d| d.attestations.as_ref()),
                    spec.provenance.as_ref(),
                )
                .await
            };
            outcomes.insert(text, outcome);
        }
    }
    if !failures.is_empty() {
        bail!(
            "{} of {} packages could not be resolved; nothing was written:\n{}",
            failures.len(),
            names.len(),
            failures.join("\n")
        );
    }
    let inputs = match input_trust {
        InputTrust::Signed(_) => InputStatus::Verified,
        InputTrust::Unverified { .. } => InputStatus::Unverified,
    };
    Ok((
        Resolution {
            cutoff: cutoff.trunc_subsecs(0),
            now: now.trunc_subsecs(0),
            registry: registry.base().to_owned(),
            cooldown_hours: manifest.cooldown_hours,
            inputs,
            packages,
        },
        input_trust,
    ))
}

/// How many versions of one package have their provenance fetched before the rest are
/// refused unchecked: a registry serving bad bundles for every version must not cost a
/// request per version ever published.
const MAX_PROVENANCE_FETCHES: usize = 8;

/// The Sigstore trusted root provenance is verified against: `--trusted-root`, else the
/// public-good root in the pinned npm's seeds (`trust::seeds_of_pinned_npm`).
async fn trusted_root(
    trust: &TrustOptions,
    registry: &Registry,
    manifest: &Manifest,
    ctx: &crate::Context,
    progress: &Progress,
) -> Result<template_verify::sigstore::TrustedRoot> {
    let (json, origin) = match &trust.trusted_root {
        Some(path) => (
            std::fs::read_to_string(path)
                .with_context(|| format!("cannot read --trusted-root {}", path.display()))?,
            format!("--trusted-root {}", path.display()),
        ),
        None => {
            let npm = manifest.node.npm_version.to_string();
            let (_, json) = crate::npm::trust::seeds_of_pinned_npm(registry, &npm, ctx).await?;
            (
                json,
                format!("npm {npm}'s {}", crate::npm::trust::SEEDS_PATH),
            )
        }
    };
    progress.step(format!(
        "provenance is verified against the Sigstore root of {origin}"
    ));
    template_verify::sigstore::TrustedRoot::from_json(&json, &origin)
}

/// The committed inventory's trust records of the locked versions; none when there is no
/// inventory, or one this tool cannot read (said, since no-downgrade then compares with the
/// registry's earlier versions only).
fn read_locked_trust(
    layout: &crate::layout::Layout,
    progress: &Progress,
) -> BTreeMap<String, LockedTrust> {
    let path = layout.inventory();
    if !path.exists() {
        return BTreeMap::new();
    }
    match Inventory::load(&path) {
        Ok(inventory) => locked_trust(&inventory),
        Err(e) => {
            progress.step(format!(
                "warning: the locked versions' trust records are not readable ({e:#}); no-downgrade compares with the registry's earlier versions only"
            ));
            BTreeMap::new()
        }
    }
}

/// The install scripts of one version, from its tarball as the packument names it (checked
/// against the integrity the packument states: the one its registry signature covers).
async fn read_install_scripts(
    packument: &Packument,
    version: &str,
    ctx: &crate::Context,
    progress: &Progress,
) -> Result<Result<template_formats::manifest::InstallScripts, String>> {
    let dist = packument.versions[version].dist.as_ref();
    let (Some(url), Some(integrity)) = (
        dist.and_then(|d| d.tarball.as_deref()),
        dist.and_then(|d| d.integrity.as_deref()),
    ) else {
        return Ok(Err("the registry states no tarball or integrity".to_owned()));
    };
    progress.step(format!(
        "reading the install scripts of {}@{version} from its tarball",
        packument.name
    ));
    crate::npm::install_scripts::read(
        &ctx.layout.tool_cache(),
        &packument.name,
        version,
        url,
        integrity,
    )
    .await
}

/// What a maintainer does to take each version held back by its install scripts alone: the
/// newest such version of each package, with the manifest lines to paste after review.
pub(crate) fn install_script_remedies(resolution: &Resolution) -> Vec<String> {
    resolution
        .packages
        .iter()
        .filter_map(|p| {
            let held = p.rejected.iter().find(|r| r.install_scripts.is_some())?;
            Some(crate::npm::install_scripts::remedy(
                &p.name,
                &held.version.to_string(),
                held.install_scripts.as_ref()?,
            ))
        })
        .collect()
}

/// A readable table of the resolution and what changed against the lock.
pub(crate) fn render_table(resolution: &Resolution) -> String {
    let mut rows = vec![[
        "package".to_owned(),
        "locked".to_owned(),
        "resolved".to_owned(),
        "latest".to_owned(),
        "published".to_owned(),
        "change".to_owned(),
        "trust".to_owned(),
    ]];
    for p in &resolution.packages {
        let change = match &p.locked {
            None => "new".to_owned(),
            Some(l) if *l == p.version => "unchanged".to_owned(),
            Some(_) if p.rollback => "ROLLBACK".to_owned(),
            Some(_) => "update".to_owned(),
        };
        let change = if p.held_back {
            format!("{change}, held back")
        } else {
            change
        };
        rows.push([
            p.name.clone(),
            p.locked
                .as_ref()
                .map_or_else(|| "-".into(), ToString::to_string),
            p.version.to_string(),
            p.latest.to_string(),
            rfc3339(p.published),
            change,
            trust_cell(p),
        ]);
    }
    let widths: Vec<usize> = (0..7)
        .map(|i| rows.iter().map(|r| r[i].len()).max().unwrap())
        .collect();
    let mut out = format!(
        "inputs {}; cutoff {} (now {} minus a {}h cooldown), registry {}\n\n",
        match resolution.inputs {
            InputStatus::Verified => "verified",
            InputStatus::Unverified => "UNVERIFIED",
        },
        rfc3339(resolution.cutoff),
        rfc3339(resolution.now),
        resolution.cooldown_hours,
        resolution.registry
    );
    for row in &rows {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    let notes: Vec<String> = resolution
        .packages
        .iter()
        .flat_map(|p| p.notes.iter().map(move |n| format!("  {}: {n}", p.name)))
        .collect();
    if !notes.is_empty() {
        out.push_str("\nnotes:\n");
        out.push_str(&notes.join("\n"));
        out.push('\n');
    }
    for remedy in install_script_remedies(resolution) {
        out.push('\n');
        out.push_str(&remedy);
    }
    out
}

/// What the table says of a version's trust: its verified provenance (pinned when the
/// manifest requires that identity), else the registry's evidence.
fn trust_cell(p: &Resolved) -> String {
    match (&p.provenance, p.evidence) {
        (Some(record), _) => format!(
            "provenance{} {}",
            if record.identity_pinned {
                " (pinned)"
            } else {
                ""
            },
            identity_text(record)
        ),
        (None, Evidence::None) => "-".to_owned(),
        (None, evidence) => evidence.describe().to_owned(),
    }
}

/// Loud warnings for rollbacks, on stderr, so a scheduled log shows them at a glance.
pub(crate) fn warn_rollbacks(resolution: &Resolution) {
    for p in resolution.packages.iter().filter(|p| p.rollback) {
        eprintln!(
            "warning: ROLLBACK of `{}`: locked {} -> {} (latest {}). Upstream moved `latest` back; following it.",
            p.name,
            p.locked
                .as_ref()
                .map_or_else(|| "-".to_string(), ToString::to_string),
            p.version,
            p.latest
        );
    }
}

/// The first line of `release` and `release plan`: whether the inputs can be verified at the
/// registry the plan resolves against, judged as `resolve` judges it (the same packuments and
/// keys). Only said here: `--require-signed-inputs` is enforced by the plan's resolve, on a day
/// that resolves, so a day with nothing due does not fail on the registry. When the registry
/// cannot be asked, the line says so and the plan goes on.
pub(crate) async fn inputs_headline(
    registry: &RegistryAndClock,
    manifest: &Manifest,
    ctx: &crate::Context,
) -> String {
    let ask = async {
        let client = Registry::new(
            &registry.registry,
            ctx.settings.verifier.transfer.retry_base,
        )?;
        let names: Vec<String> = manifest.packages.iter().map(|p| p.name.clone()).collect();
        let packuments = client.packuments(&names).await?;
        let options = crate::npm::trust::TrustOptions {
            require_signed_inputs: false,
            ..registry.trust.clone()
        };
        let trust = crate::npm::trust::establish(
            &options,
            &client,
            packuments.values().map(|p| &**p),
            &manifest.node.npm_version.to_string(),
            ctx,
        )
        .await?;
        anyhow::Ok(trust.headline())
    };
    match ask.await {
        Ok(line) => line,
        Err(e) => format!(
            "inputs: not judged yet: cannot ask the registry {} ({e:#}); the plan's resolve \
             judges them when the day is due",
            registry.registry
        ),
    }
}

/// The npm registry used when `--registry` is not given.
pub const DEFAULT_NPM_REGISTRY: &str = "https://registry.npmjs.org/";

/// The npm registry a command asks and the clock it decides at (`--registry`, `--now`),
/// shared by every command that resolves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryAndClock {
    /// The registry every request of the command goes to.
    pub registry: String,
    /// The clock (RFC 3339) to resolve at instead of the time, e.g. to reproduce a past day.
    pub now: Option<String>,
    /// What the registry's signatures are judged by, and whether unsigned inputs are refused.
    pub trust: crate::npm::trust::TrustOptions,
}

impl RegistryAndClock {
    /// This registry's flags on a child's command line, after `argv`.
    pub(crate) fn render(&self, argv: crate::util::Argv) -> crate::util::Argv {
        // `--registry` always, though it has a default: the child must not take the
        // environment's XTASK_NPM_REGISTRY instead of the one the parent resolved.
        argv.value("--registry", &self.registry)
            .option("--now", self.now.as_ref())
            .option("--trusted-keys", self.trust.trusted_keys.as_ref())
            .option("--trusted-root", self.trust.trusted_root.as_ref())
            .switch("--require-signed-inputs", self.trust.require_signed_inputs)
    }
}

/// `cargo xtask resolve`: what to resolve against, and how to print the answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolveRequest {
    pub registry: RegistryAndClock,
    /// One JSON object instead of a table.
    pub json: bool,
}

impl ResolveRequest {
    /// This request as the command line that parses back into it (the release's steps run
    /// their children this way; a test in main.rs checks the round trip).
    pub fn to_args(&self) -> Vec<std::ffi::OsString> {
        self.registry
            .render(crate::util::Argv::command(&["resolve"]).switch("--json", self.json))
            .into_vec()
    }
}

pub async fn run(request: ResolveRequest, ctx: &crate::Context) -> Result<ExitCode> {
    let manifest = Manifest::load(&ctx.layout.manifest())?;
    let now = now_or(request.registry.now.as_deref())?;
    let registry = Registry::new(
        &request.registry.registry,
        ctx.settings.verifier.transfer.retry_base,
    )?;
    let locked = read_locked(&ctx.layout)?;
    let progress = Progress::default();
    let (resolution, input_trust) = resolve_all(
        &manifest,
        &registry,
        &locked,
        now,
        &request.registry.trust,
        ctx,
        &progress,
    )
    .await?;
    // Said first (resolve_all's first line) and again here, next to the answer.
    eprintln!("{}", input_trust.headline());
    warn_rollbacks(&resolution);
    if request.json {
        for remedy in install_script_remedies(&resolution) {
            eprint!("{remedy}");
        }
        print_json(&resolution)?;
    } else {
        print!("{}", render_table(&resolution));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    const CPUS: &[&str] = &["x64", "arm64"];

    fn now() -> DateTime<Utc> {
        "2026-11-29T12:00:00Z".parse().unwrap()
    }

    fn packument(value: serde_json::Value) -> Packument {
        serde_json::from_value(value).unwrap()
    }

    /// A packument with `versions` (version -> days before `now()` it was published).
    fn simple(name: &str, latest: &str, versions: &[(&str, i64)]) -> serde_json::Value {
        let mut vs = serde_json::Map::new();
        let mut time = serde_json::Map::new();
        for (v, days) in versions {
            vs.insert((*v).into(), json!({ "name": name, "version": v }));
            time.insert(
                (*v).into(),
                json!((now() - chrono::Duration::days(*days)).to_rfc3339()),
            );
        }
        json!({ "name": name, "dist-tags": { "latest": latest }, "versions": vs, "time": time })
    }

    fn decide_with(p: &Packument, related: &Related, locked: Option<&Version>) -> Result<Resolved> {
        decide(&Inputs {
            packument: p,
            related,
            locked,
            now: now(),
            cutoff: now() - chrono::Duration::hours(48),
            cpus: CPUS,
            trust: &InputTrust::Unverified {
                registry: "https://r.example/".into(),
            },
            identity: None,
            provenance: &BTreeMap::new(),
            locked_trust: None,
            scripts: None,
        })
    }

    fn scripts(file_digest: &str) -> template_formats::manifest::InstallScripts {
        template_formats::manifest::InstallScripts {
            postinstall: Some("node install.cjs".into()),
            files: [("install.cjs".to_string(), file_digest.repeat(64))].into(),
            ..Default::default()
        }
    }

    /// The tarballs `resolve_all` would read, in order, and its decision: each version's
    /// install scripts come from `content` (version -> what it runs).
    fn review(
        p: &Packument,
        locked: Option<&Version>,
        acknowledged: &template_formats::manifest::InstallScripts,
        content: &dyn Fn(&str) -> template_formats::manifest::InstallScripts,
    ) -> (Vec<String>, Result<Resolved>) {
        let related = Related::new();
        let trust = InputTrust::Unverified {
            registry: "https://r.example/".into(),
        };
        let mut read = BTreeMap::new();
        let mut order = Vec::new();
        let no_provenance = BTreeMap::new();
        type Read = BTreeMap<String, Result<template_formats::manifest::InstallScripts, String>>;
        let inputs = |read: &Read| -> Result<Resolved> {
            decide(&Inputs {
                packument: p,
                related: &related,
                locked,
                now: now(),
                cutoff: now() - chrono::Duration::hours(48),
                cpus: CPUS,
                trust: &trust,
                identity: None,
                provenance: &no_provenance,
                locked_trust: None,
                scripts: Some(ScriptsReview { acknowledged, read }),
            })
        };
        let next = |read: &Read| -> Option<Version> {
            next_scripts_to_read(&Inputs {
                packument: p,
                related: &related,
                locked,
                now: now(),
                cutoff: now() - chrono::Duration::hours(48),
                cpus: CPUS,
                trust: &trust,
                identity: None,
                provenance: &no_provenance,
                locked_trust: None,
                scripts: Some(ScriptsReview { acknowledged, read }),
            })
        };
        while let Some(v) = next(&read) {
            order.push(v.to_string());
            read.insert(v.to_string(), Ok(content(&v.to_string())));
        }
        let decision = inputs(&read);
        (order, decision)
    }

    #[test]
    fn changed_install_scripts_hold_a_version_back_to_the_acknowledged_content() {
        let p = packument(simple(
            "a",
            "1.3.0",
            &[("1.0.0", 30), ("1.1.0", 20), ("1.2.0", 10), ("1.3.0", 1)],
        ));
        let acknowledged = scripts("a");
        // 1.3.0 is in its cooldown (never read), 1.2.0 changed install.cjs, 1.1.0 did not.
        let content = |v: &str| {
            if v == "1.2.0" {
                scripts("b")
            } else {
                scripts("a")
            }
        };
        let (order, decision) = review(&p, None, &acknowledged, &content);
        assert_eq!(order, ["1.2.0", "1.1.0"]);
        let r = decision.unwrap();
        assert_eq!(r.version.to_string(), "1.1.0");
        assert!(r.held_back);
        let held = &r.rejected[1];
        assert_eq!(held.version.to_string(), "1.2.0");
        let why = held.reasons.join("; ");
        assert!(
            why.contains("install.cjs")
                && why.contains(&"a".repeat(64))
                && why.contains(&"b".repeat(64)),
            "{why}"
        );
        assert_eq!(held.install_scripts, Some(scripts("b")));
        // The cooldown's rejection does not mention scripts it never read.
        assert_eq!(r.rejected[0].reasons.len(), 1, "{:?}", r.rejected[0]);
        assert!(r.rejected[0].install_scripts.is_none());
        let remedies = install_script_remedies(&Resolution {
            cutoff: now(),
            now: now(),
            registry: "r".into(),
            cooldown_hours: 48,
            inputs: InputStatus::Unverified,
            packages: vec![r],
        });
        assert_eq!(remedies.len(), 1);
        assert!(remedies[0].contains("a 1.2.0") && remedies[0].contains(&"b".repeat(64)));
        // With every version changed, nothing is taken, and the error says what to paste.
        let (_, decision) = review(&p, None, &acknowledged, &|_| scripts("c"));
        let err = format!("{:#}", decision.unwrap_err());
        assert!(
            err.contains("install_scripts_allowed") && err.contains(&"c".repeat(64)),
            "{err}"
        );
    }

    #[test]
    fn tarballs_are_read_down_to_the_lock_and_a_few_below() {
        let versions: Vec<(String, i64)> = (0..30).map(|i| (format!("1.{i}.0"), 40 - i)).collect();
        let refs: Vec<(&str, i64)> = versions.iter().map(|(v, d)| (v.as_str(), *d)).collect();
        let p = packument(simple("a", "1.29.0", &refs));
        let changed = |_: &str| scripts("b");
        let (order, _) = review(&p, None, &scripts("a"), &changed);
        assert_eq!(order.len(), MAX_SCRIPT_READS);
        let locked = Version::parse("1.5.0").unwrap();
        let (order, _) = review(&p, Some(&locked), &scripts("a"), &changed);
        // 1.29.0 .. 1.5.0 (25 versions) though that passes the budget, then none below.
        assert_eq!(order.len(), 25);
        assert_eq!(order.last().unwrap(), "1.5.0");
    }

    #[test]
    fn takes_latest_not_the_highest_semver() {
        let p = packument(simple(
            "a",
            "1.0.0",
            &[("1.0.0", 5), ("2.0.0-beta.1", 5), ("0.9.0", 9)],
        ));
        let r = decide_with(&p, &Related::new(), None).unwrap();
        assert_eq!(r.version.to_string(), "1.0.0");
        assert!(!r.held_back && !r.rollback);
    }

    #[test]
    fn never_above_latest() {
        let p = packument(simple("a", "1.0.0", &[("1.0.0", 5), ("1.1.0", 5)]));
        assert_eq!(
            decide_with(&p, &Related::new(), None)
                .unwrap()
                .version
                .to_string(),
            "1.0.0"
        );
    }

    #[test]
    fn young_latest_is_held_back_to_the_newest_eligible() {
        let p = packument(simple(
            "a",
            "1.2.0",
            &[("1.0.0", 9), ("1.1.0", 4), ("1.2.0", 1)],
        ));
        let r = decide_with(&p, &Related::new(), None).unwrap();
        assert_eq!(r.version.to_string(), "1.1.0");
        assert!(r.held_back);
        assert!(r.notes[0].contains("inside the cooldown"), "{:?}", r.notes);
    }

    #[test]
    fn missing_unparseable_or_future_times_fail_closed() {
        let mut v = simple("a", "1.2.0", &[("1.0.0", 9), ("1.1.0", 9), ("1.2.0", 9)]);
        v["time"].as_object_mut().unwrap().remove("1.2.0");
        v["time"]["1.1.0"] = json!("yesterday");
        let p = packument(v);
        let r = decide_with(&p, &Related::new(), None).unwrap();
        assert_eq!(r.version.to_string(), "1.0.0");
        assert!(r.rejected[0].reasons[0].contains("unknown"));
        assert!(r.rejected[1].reasons[0].contains("not RFC 3339"));

        let p = packument(simple("a", "1.0.0", &[("1.0.0", -2)]));
        let err = format!("{:#}", decide_with(&p, &Related::new(), None).unwrap_err());
        assert!(err.contains("in the future"), "{err}");
    }

    #[test]
    fn deprecated_latest_is_skipped() {
        let mut v = simple("a", "1.1.0", &[("1.0.0", 9), ("1.1.0", 9)]);
        v["versions"]["1.1.0"]["deprecated"] = json!("broken build");
        let r = decide_with(&packument(v), &Related::new(), None).unwrap();
        assert_eq!(r.version.to_string(), "1.0.0");
        assert!(r.notes[0].contains("broken build"));
    }

    #[test]
    fn latest_moving_backwards_is_a_flagged_rollback() {
        let p = packument(simple("a", "1.0.0", &[("1.0.0", 9)]));
        let locked = Version::parse("1.1.0").unwrap();
        let r = decide_with(&p, &Related::new(), Some(&locked)).unwrap();
        assert_eq!(r.version.to_string(), "1.0.0");
        assert!(r.rollback);
        assert!(r.notes.iter().any(|n| n.contains("ROLLBACK")));
    }

    #[test]
    fn no_eligible_version_names_every_candidate() {
        let p = packument(simple("a", "1.1.0", &[("1.0.0", 1), ("1.1.0", 1)]));
        let err = format!("{:#}", decide_with(&p, &Related::new(), None).unwrap_err());
        assert!(err.contains("no eligible version of `a`"), "{err}");
        assert!(
            err.contains("1.1.0: published") && err.contains("1.0.0: published"),
            "{err}"
        );
    }

    #[test]
    fn codex_style_aliases_need_their_prerelease_binaries() {
        let mut v = simple(
            "@openai/codex",
            "0.2.0",
            &[
                ("0.1.0", 9),
                ("0.2.0", 9),
                ("0.1.0-linux-x64", 9),
                ("0.1.0-linux-arm64", 9),
                ("0.2.0-linux-x64", 9),
            ],
        );
        for ver in ["0.1.0", "0.2.0"] {
            v["versions"][ver]["optionalDependencies"] = json!({
                "@openai/codex-linux-x64": format!("npm:@openai/codex@{ver}-linux-x64"),
                "@openai/codex-linux-arm64": format!("npm:@openai/codex@{ver}-linux-arm64"),
                "@openai/codex-darwin-arm64": format!("npm:@openai/codex@{ver}-darwin-arm64"),
            });
        }
        let p = Arc::new(packument(v));
        let related: Related = [("@openai/codex".to_owned(), p.clone())].into();
        let r = decide_with(&p, &related, None).unwrap();
        assert_eq!(r.version.to_string(), "0.1.0");
        assert!(
            r.rejected[0].reasons[0].contains("@openai/codex@0.2.0-linux-arm64"),
            "{:?}",
            r.rejected
        );
    }

    #[test]
    fn platform_binaries_are_classified_by_name() {
        let optional: BTreeMap<String, String> = [
            ("opencode-linux-x64", "1.0.0"),
            ("opencode-linux-x64-baseline", "1.0.0"),
            ("opencode-linux-x64-musl", "1.0.0"),
            ("opencode-linux-arm64", "1.0.0"),
            ("opencode-darwin-arm64", "1.0.0"),
        ]
        .into_iter()
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .collect();
        let (found, missing) = required_platform_binaries(&optional, CPUS);
        let names: Vec<&str> = found.iter().map(|b| b.package.as_str()).collect();
        assert_eq!(
            names,
            [
                "opencode-linux-arm64",
                "opencode-linux-x64",
                "opencode-linux-x64-baseline"
            ]
        );
        assert!(missing.is_empty());

        let only_x64: BTreeMap<String, String> =
            [("tool-linux-x64".to_owned(), "1.0.0".to_owned())].into();
        assert_eq!(required_platform_binaries(&only_x64, CPUS).1, ["arm64"]);
        let pure_js: BTreeMap<String, String> =
            [("bufferutil".to_owned(), "4.0.0".to_owned())].into();
        assert_eq!(required_platform_binaries(&pure_js, CPUS), (vec![], vec![]));
    }
}

#[cfg(test)]
mod trust_tests;
