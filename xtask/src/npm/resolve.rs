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
use crate::npm::registry::{Packument, Registry};
use crate::npm::trust::{InputTrust, TrustOptions};
use crate::util::{now_or, print_json, Progress};
use template_formats::manifest::{Manifest, Platform};
use template_formats::model::inventory::Inventory;
use template_formats::model::package_json::PackageJson;
use template_formats::model::resolution::{Evidence, InputStatus, Resolution, Resolved};
use template_formats::model::rfc3339;

mod rules;
pub(crate) use rules::*;

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
