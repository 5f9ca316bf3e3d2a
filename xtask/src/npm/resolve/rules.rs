//! The resolver's rules, pure: one package's versions, the registry's signatures and
//! provenance outcomes, the install scripts read so far and the locked trust record in; the
//! version taken (or why none is) out. The edge (`resolve.rs`) fetches what
//! [`provenance_to_fetch`] and [`next_scripts_to_read`] name and asks again.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{bail, Context, Result};
use chrono::{DateTime, SubsecRound, Utc};
use semver::Version;

use crate::npm::provenance::{self, Outcome};
use crate::npm::registry::{Packument, VersionMeta};
use crate::npm::trust::InputTrust;
use template_formats::manifest::ProvenanceIdentity;
use template_formats::model::inventory::Inventory;
use template_formats::model::resolution::*;
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

pub(crate) fn identity_text(record: &ProvenanceRecord) -> String {
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

#[cfg(test)]
mod tests;
#[cfg(test)]
mod trust_tests;
