//! `cargo xtask lock`: writes the template's pinned inputs from a fresh resolution.
//!
//! Generates `template/package.json`, `package-lock.json` (by the pinned, isolated npm, with
//! `--before` at the resolver's cutoff so no brand-new transitive dependency slips in),
//! `inventory.json` and `INVENTORY.md`, all in memory and a temporary directory first. Files
//! are replaced only when every lockfile check passed, all four in one swap of `template/`
//! (`template_swap.rs`: a kill leaves the old version or the new one); `--check` compares
//! instead of writing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::npm::cli::{ensure_trailing_slash, lock_npmrc, Npm};
use crate::npm::lockfile::{self, Policy};
use crate::npm::registry::{Packument, Registry};
use crate::npm::resolve;
use crate::npm::trust::InputTrust;
use crate::util::{now_or, print_json, Progress};
use template_formats::manifest::Manifest;
use template_formats::model::inventory::{
    Inventory, NodeRuntime, Publisher, Tarball, INVENTORY_SCHEMA_VERSION,
};
use template_formats::model::lockfile::Lockfile;
use template_formats::model::package_json::PackageJson;
use template_formats::model::resolution::Resolution;
use template_formats::model::rfc3339;
use template_formats::paths::{INVENTORY, INVENTORY_MD, PACKAGE_JSON, PACKAGE_LOCK};

/// Everything `lock` writes, as file contents.
pub(crate) struct Generated {
    pub resolution: Resolution,
    /// Whether the inputs were verified, in one line (`InputTrust::headline`).
    pub headline: String,
    pub inventory: Inventory,
    /// (path relative to the repository root, content), in write order.
    pub files: Vec<(&'static str, String)>,
}

/// package.json pinning exactly the resolved versions.
pub(crate) fn render_package_json(resolution: &Resolution) -> String {
    PackageJson::pinning(
        resolution
            .packages
            .iter()
            .map(|p| (p.name.clone(), p.version.to_string())),
    )
    .to_text()
}

/// Resolves, runs npm, checks the lockfile and builds the inventory; writes nothing.
pub(crate) async fn generate(inputs: &LockInputs<'_>, progress: &Progress) -> Result<Generated> {
    let LockInputs {
        manifest,
        registry,
        locked,
        now,
        trust,
        ctx,
    } = *inputs;
    let (resolution, input_trust) =
        resolve::resolve_all(manifest, registry, locked, now, trust, ctx, progress).await?;
    resolve::warn_rollbacks(&resolution);
    let package_json = render_package_json(&resolution);
    let registry_url = ensure_trailing_slash(registry.base());
    let lock_text = npm_lock(inputs, &package_json, resolution.cutoff, progress).await?;
    let lock = Lockfile::parse(&lock_text)?;

    let pinned: BTreeMap<String, String> = resolution
        .packages
        .iter()
        .map(|p| (p.name.clone(), p.version.to_string()))
        .collect();
    check_lock(manifest, &registry_url, &pinned, &lock)?;

    progress.step(format!(
        "reading publish times of {} locked packages",
        lock.packages.len() - 1
    ));
    let names: Vec<String> = lock
        .installed()
        .map(|(path, e)| lockfile::name_of(path, e))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let packuments = registry.existing_packuments(&names).await?;
    let published = publish_times(&packuments);
    let publishers = publishers(&packuments);
    let mut packages = lockfile::inventory_rows(&lock, &pinned, &published, &publishers)?;
    if let InputTrust::Signed(keys) = &input_trust {
        progress.step(format!(
            "verifying the registry signatures of {} lockfile entries",
            packages.len()
        ));
        sign_rows(&mut packages, &packuments, keys)?;
    }
    record_trust(&mut packages, &packuments, &resolution)?;
    crate::npm::install_scripts::check_rows(&mut packages, manifest, ctx, progress).await?;
    let summary = lockfile::summarize(&packages);
    let node = node_runtime(manifest, registry, &input_trust).await?;
    let inventory = Inventory {
        schema_version: INVENTORY_SCHEMA_VERSION,
        resolved_at: resolution.now,
        cutoff: resolution.cutoff,
        registry: registry_url,
        inputs: resolution.inputs,
        keys: input_trust.keys_source(),
        node,
        packages,
        summary,
    };
    let inventory_json = serde_json::to_string_pretty(&inventory)? + "\n";
    let inventory_md = render_inventory_md(&inventory);
    Ok(Generated {
        resolution,
        headline: input_trust.headline(),
        inventory,
        files: vec![
            (PACKAGE_JSON, package_json),
            (PACKAGE_LOCK, lock_text),
            (INVENTORY, inventory_json),
            (INVENTORY_MD, inventory_md),
        ],
    })
}

/// Every lockfile entry's integrity, as the lockfile records it, checked against the registry's
/// signature of that version: a lockfile whose integrity is not the signed one, or an entry
/// whose version carries no valid signature, fails the lock naming package, version and why.
fn sign_rows(
    rows: &mut [template_formats::model::inventory::InventoryPackage],
    packuments: &BTreeMap<String, std::sync::Arc<Packument>>,
    keys: &crate::npm::signatures::RegistryKeys,
) -> Result<()> {
    let mut problems = Vec::new();
    for row in rows.iter_mut() {
        let meta = packuments
            .get(&row.name)
            .and_then(|p| p.versions.get(&row.version));
        let Some(meta) = meta else {
            problems.push(format!(
                "{}@{} ({}): the registry lists no such version, so its signature cannot be read",
                row.name, row.version, row.path
            ));
            continue;
        };
        let signatures = meta
            .dist
            .as_ref()
            .map(|d| d.signatures.as_slice())
            .unwrap_or_default();
        let published = row
            .published
            .as_deref()
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&Utc));
        match crate::npm::signatures::check(
            &row.name,
            &row.version,
            &row.integrity,
            signatures,
            keys,
            published,
        ) {
            Ok(keyid) => row.signed_by = Some(keyid),
            Err(why) => problems.push(format!(
                "{}@{} ({}): {why}",
                row.name, row.version, row.path
            )),
        }
    }
    if !problems.is_empty() {
        bail!(
            "{} lockfile entr{} failed the registry signature check; template/ was not changed:\n  {}",
            problems.len(),
            if problems.len() == 1 { "y" } else { "ies" },
            problems.join("\n  ")
        );
    }
    Ok(())
}

/// Each row's trust evidence as the registry shows it, and each top-level row's provenance as
/// `resolve` verified it. That provenance was verified for the integrity the registry states;
/// the row's is the lockfile's, so the two must be the same digest.
fn record_trust(
    rows: &mut [template_formats::model::inventory::InventoryPackage],
    packuments: &BTreeMap<String, std::sync::Arc<Packument>>,
    resolution: &Resolution,
) -> Result<()> {
    for row in rows.iter_mut() {
        let Some(meta) = packuments
            .get(&row.name)
            .and_then(|p| p.versions.get(&row.version))
        else {
            continue;
        };
        row.evidence = resolve::evidence_of(meta);
        if !row.top_level {
            continue;
        }
        let Some(resolved) = resolution
            .packages
            .iter()
            .find(|p| p.name == row.name && p.version.to_string() == row.version)
        else {
            continue;
        };
        if let Some(record) = &resolved.provenance {
            let registry_integrity = meta.dist.as_ref().and_then(|d| d.integrity.as_deref());
            if registry_integrity != Some(row.integrity.as_str()) {
                bail!(
                    "{}@{}: the lockfile's integrity {} is not the one whose provenance was verified ({}); template/ was not changed",
                    row.name,
                    row.version,
                    row.integrity,
                    registry_integrity.unwrap_or("none")
                );
            }
            row.provenance = Some(record.clone());
        }
    }
    Ok(())
}

/// What a lock is made from: the policy, the registry, the current pins and the clock.
#[derive(Clone, Copy)]
pub(crate) struct LockInputs<'a> {
    pub manifest: &'a Manifest,
    pub registry: &'a Registry,
    pub locked: &'a resolve::Locked,
    pub now: DateTime<Utc>,
    /// `--trusted-keys`, `--require-signed-inputs`.
    pub trust: &'a crate::npm::trust::TrustOptions,
    /// Where the pinned npm is cached and what of the environment it must not see.
    pub ctx: &'a crate::Context,
}

/// The text of the lockfile the pinned npm writes for `package_json`, seeing only what was
/// published before the cutoff.
async fn npm_lock(
    inputs: &LockInputs<'_>,
    package_json: &str,
    cutoff: DateTime<Utc>,
    progress: &Progress,
) -> Result<String> {
    let (manifest, registry) = (inputs.manifest, inputs.registry);
    progress.step(format!(
        "fetching the pinned npm {}",
        manifest.node.npm_version
    ));
    let npm = Npm::pinned(registry, &manifest.node.npm_version.to_string(), inputs.ctx).await?;
    let work = tempfile::tempdir()?;
    std::fs::write(work.path().join("package.json"), package_json)?;
    progress.step(format!(
        "npm {} install --package-lock-only --before {}",
        npm.version,
        rfc3339(cutoff)
    ));
    npm.run(
        work.path(),
        &lock_npmrc(&ensure_trailing_slash(registry.base())),
        &[
            "install",
            "--package-lock-only",
            "--ignore-scripts",
            "--no-audit",
            "--no-fund",
            "--before",
            &rfc3339(cutoff),
        ],
    )
    .await?;
    std::fs::read_to_string(work.path().join("package-lock.json"))
        .context("npm wrote no package-lock.json")
}

/// Refuses a generated lockfile that breaks the manifest's policy, before anything is written.
fn check_lock(
    manifest: &Manifest,
    registry_url: &str,
    pinned: &BTreeMap<String, String>,
    lock: &Lockfile,
) -> Result<()> {
    let cpus: Vec<&'static str> = manifest.platforms.iter().map(|p| p.npm_cpu()).collect();
    let allowed: Vec<String> = manifest.install_scripts_allowed.keys().cloned().collect();
    let problems = lockfile::check(
        lock,
        &Policy {
            registry: registry_url,
            pinned,
            install_scripts_allowed: &allowed,
            install_scripts_skipped: &manifest.install_scripts_skipped,
            cpus: &cpus,
        },
    );
    if !problems.is_empty() {
        bail!(
            "the generated lockfile failed {} check(s); template/ was not changed:\n  {}",
            problems.len(),
            problems.join("\n  ")
        );
    }
    Ok(())
}

/// (name, version) -> who published it (`VersionMeta::publisher`), as the packuments record
/// it at lock time: the SBOM is made later from the image, offline, and must name the same
/// supplier however often it is made, so the registry's answer is kept in the inventory.
fn publishers(
    packuments: &BTreeMap<String, std::sync::Arc<Packument>>,
) -> BTreeMap<(String, String), Publisher> {
    let mut out = BTreeMap::new();
    for (name, p) in packuments {
        for (version, meta) in &p.versions {
            if let Some(person) = meta.publisher() {
                let email = person.email.clone().filter(|e| !e.trim().is_empty());
                let publisher = Publisher {
                    name: person.name.clone(),
                    email,
                    trusted_publisher: person.trusted_publisher.clone(),
                };
                out.insert((name.clone(), version.clone()), publisher);
            }
        }
    }
    out
}

/// (name, version) -> publish time, as the packuments record it; a missing time stays missing.
fn publish_times(
    packuments: &BTreeMap<String, std::sync::Arc<Packument>>,
) -> BTreeMap<(String, String), String> {
    let mut published = BTreeMap::new();
    for (name, p) in packuments {
        for (version, time) in &p.time {
            if let Some(t) = time.as_str() {
                published.insert((name.clone(), version.clone()), t.to_owned());
            }
        }
    }
    published
}

/// The Node runtime and npm tarballs with their digests, from the registry's metadata, each
/// signature-checked when the registry signs.
async fn node_runtime(
    manifest: &Manifest,
    registry: &Registry,
    trust: &InputTrust,
) -> Result<NodeRuntime> {
    let version = manifest.node.version.to_string();
    let mut platforms = BTreeMap::new();
    for platform in &manifest.platforms {
        let package = &manifest.node.packages[platform];
        platforms.insert(
            *platform,
            tarball(registry, package, &version, trust).await?,
        );
    }
    let npm = tarball(
        registry,
        "npm",
        &manifest.node.npm_version.to_string(),
        trust,
    )
    .await?;
    Ok(NodeRuntime {
        version,
        platforms,
        npm,
    })
}

async fn tarball(
    registry: &Registry,
    package: &str,
    version: &str,
    trust: &InputTrust,
) -> Result<Tarball> {
    let p = registry.packument(package).await?;
    let signed_by = match trust {
        InputTrust::Unverified { .. } => None,
        InputTrust::Signed(keys) => {
            let dist = p.versions.get(version).and_then(|v| v.dist.as_ref());
            let published = p
                .time
                .get(version)
                .and_then(|t| t.as_str())
                .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.with_timezone(&Utc));
            let check = crate::npm::signatures::check(
                package,
                version,
                dist.and_then(|d| d.integrity.as_deref())
                    .unwrap_or_default(),
                dist.map(|d| d.signatures.as_slice()).unwrap_or_default(),
                keys,
                published,
            );
            Some(check.map_err(|why| {
                anyhow::anyhow!("{package}@{version} (the image's Node runtime): {why}")
            })?)
        }
    };
    let dist = p
        .versions
        .get(version)
        .and_then(|v| v.dist.clone())
        .with_context(|| format!("{package}@{version} is not on {}", registry.base()))?;
    let (Some(integrity), Some(url)) = (dist.integrity, dist.tarball) else {
        bail!(
            "{package}@{version} on {} has no integrity or tarball",
            registry.base()
        );
    };
    let sha512 = crate::npm::registry::sha512_integrity(&integrity)
        .map(hex::encode)
        .with_context(|| format!("{package}@{version}: integrity `{integrity}` is not sha512"))?;
    Ok(Tarball {
        package: package.to_owned(),
        version: version.to_owned(),
        tarball: url,
        integrity,
        sha512,
        signed_by,
    })
}

/// The inventory for people: a Markdown table, generated, replacing a hand-written one.
pub(crate) fn render_inventory_md(inv: &Inventory) -> String {
    use template_formats::model::inventory::License;
    let mut out = String::from(
        "# Third-party packages of the coding-agent template\n\n\
         Generated by `cargo xtask lock` from `inventory.json`; do not edit by hand.\n\n",
    );
    out.push_str(&format!(
        "Resolved at {} (cutoff {}) against {}; registry signatures {}.\n\n",
        rfc3339(inv.resolved_at),
        rfc3339(inv.cutoff),
        inv.registry,
        match (inv.inputs, &inv.keys) {
            (template_formats::model::inventory::InputStatus::Verified, Some(keys)) =>
                format!("verified with {keys}"),
            (template_formats::model::inventory::InputStatus::Verified, None) =>
                "verified".to_owned(),
            (template_formats::model::inventory::InputStatus::Unverified, _) =>
                "**UNVERIFIED** (the registry served none; docs/inputs.md)".to_owned(),
        }
    ));
    out.push_str(&format!(
        "Node.js {} (npm {}):\n\n",
        inv.node.version, inv.node.npm.version
    ));
    for (platform, t) in &inv.node.platforms {
        out.push_str(&format!(
            "- {platform}: `{}@{}`, sha512 `{}`\n",
            t.package, t.version, t.sha512
        ));
    }
    out.push_str(&format!(
        "- npm: `npm@{}`, sha512 `{}`\n\n",
        inv.node.npm.version, inv.node.npm.sha512
    ));
    let s = &inv.summary;
    out.push_str(&format!(
        "{} packages: {} top-level, {} platform binaries, {} with install scripts, {} prereleases; \
         licenses: {} undeclared, {} by reference, {} unrecognized.\n\n",
        s.packages, s.top_level, s.platform_binaries, s.install_scripts, s.prerelease,
        s.license_undeclared, s.license_reference, s.license_unrecognized
    ));
    out.push_str("| package | version | license | platform | install script | notes |\n|---|---|---|---|---|---|\n");
    let mut rows: Vec<_> = inv.packages.iter().collect();
    rows.sort_by(|a, b| {
        (!a.top_level, &a.name, &a.version).cmp(&(!b.top_level, &b.name, &b.version))
    });
    for p in rows {
        let license = match &p.license {
            License::Spdx { expression } => expression.clone(),
            License::Reference { text } => format!("{text} (reference)"),
            License::Undeclared => "**undeclared**".to_owned(),
            License::Unrecognized { text } => format!("{text} (**unrecognized**)"),
        };
        let platform = match (&p.os, &p.cpu) {
            (None, None) => String::new(),
            (os, cpu) => format!(
                "{}/{}{}",
                os.as_ref().map(|v| v.join(",")).unwrap_or_default(),
                cpu.as_ref().map(|v| v.join(",")).unwrap_or_default(),
                p.libc
                    .as_ref()
                    .map(|l| format!(" ({})", l.join(",")))
                    .unwrap_or_default()
            ),
        };
        let mut notes = Vec::new();
        if p.top_level {
            notes.push("top-level".to_owned());
        }
        if p.prerelease {
            notes.push("prerelease".to_owned());
        }
        if let Some(record) = &p.provenance {
            notes.push(format!(
                "provenance{}: {} `{}` at `{}`",
                if record.identity_pinned {
                    " (pinned)"
                } else {
                    ""
                },
                record.repository,
                record.workflow,
                record.git_ref
            ));
        } else if !p.evidence.is_none() {
            notes.push(p.evidence.describe().to_owned());
        }
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            p.name,
            p.version,
            license.replace('|', "\\|"),
            platform,
            install_script_cell(p),
            notes.join(", ")
        ));
    }
    out
}

/// The install-script column: `yes`, or for a package whose scripts run what the manifest
/// acknowledges, its commands and the files they run (sha256, 12 digits; the full digests are
/// in inventory.json).
fn install_script_cell(p: &template_formats::model::inventory::InventoryPackage) -> String {
    let Some(scripts) = &p.install_scripts else {
        return if p.install_script {
            "yes".into()
        } else {
            String::new()
        };
    };
    let commands = scripts
        .commands()
        .into_iter()
        .map(|(name, command)| format!("{name} `{command}`"));
    let files = scripts
        .files
        .iter()
        .map(|(path, sha256)| format!("`{path}` {}", &sha256[..12]));
    let all: Vec<String> = commands.chain(files).collect();
    format!("pinned: {}", all.join("; ")).replace('|', "\\|")
}

/// A unified diff of `old` -> `new` for `path`, empty when they are equal.
pub(crate) fn diff(path: &str, old: &str, new: &str) -> String {
    if old == new {
        return String::new();
    }
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(2)
        .header(
            &format!("a/{path} (committed)"),
            &format!("b/{path} (regenerated)"),
        )
        .to_string()
}

#[derive(Serialize)]
struct Report<'a> {
    cutoff: DateTime<Utc>,
    resolved_at: DateTime<Utc>,
    mode: &'static str,
    /// Files whose content differs from what is on disk.
    changed: Vec<&'a str>,
    written: bool,
    summary: &'a template_formats::model::inventory::Summary,
    packages: &'a [template_formats::model::resolution::Resolved],
}

/// `cargo xtask lock`: where to resolve, and whether to write, only show, or check for drift.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockRequest {
    pub registry: resolve::RegistryAndClock,
    /// Regenerate in a temporary directory and fail with a diff when template/ drifted.
    pub check: bool,
    /// Generate and check everything, print what would change, write nothing.
    pub dry_run: bool,
    pub json: bool,
}

impl LockRequest {
    /// This request as the command line that parses back into it (the release's steps run
    /// their children this way; a test in main.rs checks the round trip).
    pub fn to_args(&self) -> Vec<std::ffi::OsString> {
        self.registry
            .render(
                crate::util::Argv::command(&["lock"])
                    .switch("--check", self.check)
                    .switch("--dry-run", self.dry_run)
                    .switch("--json", self.json),
            )
            .into_vec()
    }
}

pub async fn run(request: LockRequest, ctx: &crate::Context) -> Result<ExitCode> {
    let layout = &ctx.layout;
    let manifest = Manifest::load(&layout.manifest())?;
    let now = match (&request.registry.now, request.check) {
        (Some(now), _) => now_or(Some(now))?,
        // --check replays the committed resolution's clock so it is deterministic.
        (None, true) => Inventory::load(&layout.inventory())?.resolved_at,
        (None, false) => now_or(None)?,
    };
    let registry = Registry::new(
        &request.registry.registry,
        ctx.settings.verifier.transfer.retry_base,
    )?;
    let progress = Progress::default();
    crate::npm::template_swap::clear_leftover(layout, &progress)?;
    let locked = resolve::read_locked(layout)?;
    let inputs = LockInputs {
        manifest: &manifest,
        registry: &registry,
        locked: &locked,
        now,
        trust: &request.registry.trust,
        ctx,
    };
    let generated = generate(&inputs, &progress).await?;
    eprintln!("{}", generated.headline);

    let (mut changed, mut diffs) = changes_against(layout, &generated)?;
    // A new clock alone is not a change: when the pinned files are as committed and the
    // inventory differs only in when it was resolved, the committed inventory stays (its
    // clock is what `lock --check` replays), so a run with nothing new leaves the checkout
    // untouched.
    if !request.check {
        let current_inventory = read_or_empty(&layout.inventory())?;
        if clock_only_change(&changed, &current_inventory, &generated.inventory) {
            changed.clear();
            diffs.clear();
        }
    }
    let mode = if request.check {
        "check"
    } else if request.dry_run {
        "dry-run"
    } else {
        "write"
    };
    let write = mode == "write" && !changed.is_empty();
    if write {
        // One swap of the whole directory: a kill leaves the old version or the new one.
        crate::npm::template_swap::write_template(layout, &generated.files, &progress)?;
    }
    if request.json {
        print_json(&Report {
            cutoff: generated.resolution.cutoff,
            resolved_at: generated.resolution.now,
            mode,
            changed: changed.clone(),
            written: write,
            summary: &generated.inventory.summary,
            packages: &generated.resolution.packages,
        })?;
    } else {
        print_text(&generated, mode, &changed, &diffs);
    }
    if request.check && !changed.is_empty() {
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// The generated files that differ from the checkout, and their diffs.
fn changes_against(
    layout: &crate::layout::Layout,
    generated: &Generated,
) -> Result<(Vec<&'static str>, String)> {
    let mut changed = Vec::new();
    let mut diffs = String::new();
    for (path, content) in &generated.files {
        let current = read_or_empty(&layout.file(path))?;
        let d = diff(path, &current, content);
        if !d.is_empty() {
            changed.push(*path);
            diffs.push_str(&d);
        }
    }
    Ok((changed, diffs))
}

fn print_text(generated: &Generated, mode: &str, changed: &[&str], diffs: &str) {
    print!("{}", resolve::render_table(&generated.resolution));
    if mode != "write" && !diffs.is_empty() {
        eprint!("{diffs}");
    }
    let s = &generated.inventory.summary;
    println!(
        "\n{} packages locked ({} platform binaries, {} with install scripts, {} prereleases)",
        s.packages, s.platform_binaries, s.install_scripts, s.prerelease
    );
    match (mode, changed.is_empty()) {
        (_, true) => println!("template/ is up to date"),
        ("write", false) => println!("wrote {}", changed.join(", ")),
        ("check", false) => println!(
            "template/ drifted from its regeneration: {} (run `cargo xtask lock` and commit)",
            changed.join(", ")
        ),
        (_, false) => println!("would change {}", changed.join(", ")),
    }
}

/// True when only the inventory files changed, and the inventory only in its clock
/// (`resolved_at`, `cutoff`).
pub(crate) fn clock_only_change(
    changed: &[&str],
    current_inventory: &str,
    new: &Inventory,
) -> bool {
    if changed.is_empty()
        || changed
            .iter()
            .any(|p| *p != INVENTORY && *p != INVENTORY_MD)
    {
        return false;
    }
    let Ok(mut current) = serde_json::from_str::<Inventory>(current_inventory) else {
        return false;
    };
    current.resolved_at = new.resolved_at;
    current.cutoff = new.cutoff;
    current == *new
}

fn read_or_empty(path: &Path) -> Result<String> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(s),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn committed() -> (String, Inventory) {
        let text = std::fs::read_to_string(crate::util::repo_root().join(INVENTORY)).unwrap();
        let inventory = serde_json::from_str(&text).unwrap();
        (text, inventory)
    }

    #[test]
    fn a_new_clock_alone_rewrites_nothing() {
        let (text, mut later) = committed();
        later.resolved_at = "2030-01-01T00:00:00Z".parse().unwrap();
        later.cutoff = "2029-12-30T00:00:00Z".parse().unwrap();
        let both = [INVENTORY, INVENTORY_MD];
        assert!(clock_only_change(&both, &text, &later));
        // A changed lockfile, or any other inventory field, is a change.
        assert!(!clock_only_change(
            &[PACKAGE_LOCK, INVENTORY],
            &text,
            &later
        ));
        later.packages[0].version.push_str("-x");
        assert!(!clock_only_change(&both, &text, &later));
        // Nothing changed at all: nothing to keep back either.
        assert!(!clock_only_change(&[], &text, &committed().1));
    }

    /// The committed notes are the committed inventory rendered: neither is edited alone.
    #[test]
    fn the_committed_inventory_md_is_the_committed_inventory_rendered() {
        let (_, inventory) = committed();
        let md = std::fs::read_to_string(
            crate::util::repo_root().join(template_formats::paths::INVENTORY_MD),
        )
        .unwrap();
        let rendered = render_inventory_md(&inventory);
        let differing = rendered.lines().zip(md.lines()).find(|(a, b)| a != b);
        assert_eq!(differing, None, "rendered, then committed");
        assert_eq!(rendered, md);
    }

    /// Each allowed package's committed inventory row records the content the committed
    /// manifest acknowledges (`lock` checks it; an edit of one alone is caught here).
    #[test]
    fn the_committed_inventory_records_the_acknowledged_install_scripts() {
        let (_, inventory) = committed();
        let manifest =
            Manifest::load(&crate::util::repo_root().join("template/manifest.yaml")).unwrap();
        for (name, acknowledged) in &manifest.install_scripts_allowed {
            let row = inventory
                .packages
                .iter()
                .find(|p| p.top_level && &p.name == name)
                .unwrap_or_else(|| panic!("{name} is not in the inventory"));
            assert_eq!(row.install_scripts.as_ref(), Some(acknowledged), "{name}");
        }
        let recorded = inventory
            .packages
            .iter()
            .filter(|p| p.install_scripts.is_some())
            .count();
        assert_eq!(recorded, manifest.install_scripts_allowed.len());
    }

    #[test]
    fn publish_times_keep_only_recorded_times() {
        let packument: Packument = serde_json::from_value(serde_json::json!({
            "name": "a",
            "time": {"1.0.0": "2026-01-01T00:00:00Z", "1.0.1": null}
        }))
        .unwrap();
        let times = publish_times(&BTreeMap::from([(
            "a".to_string(),
            std::sync::Arc::new(packument),
        )]));
        assert_eq!(
            times,
            BTreeMap::from([(
                ("a".to_string(), "1.0.0".to_string()),
                "2026-01-01T00:00:00Z".to_string()
            )])
        );
    }
}
