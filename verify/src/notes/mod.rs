//! A release's notes (`template_formats::model::notes`), made from its receipt and the
//! previous release's, and the assets they hash: what changed, led by what a maintainer or a
//! reviewer of the pin's pull request acts on. [`build`] is pure over the files as read;
//! `assets::read_release` reads them beside a receipt, [`markdown`] renders them.
//!
//! Used by `cargo xtask release notes`, `release ship` (the GitHub release's body and the
//! release's report) and `template-verify consume` (the pull request's summary).

pub mod assets;
pub mod markdown;

use std::collections::{BTreeMap, BTreeSet};

use template_formats::manifest::{harness_check_name, harness_turns_check_name, Manifest};
use template_formats::model::inventory::Inventory;
use template_formats::model::notes::*;
use template_formats::model::receipt::{LayerRecord, PlatformRecord, Receipt};
use template_formats::model::transcript::{drift, Transcripts};
use template_formats::model::Platform;

/// One release as the notes read it: its receipt and the assets beside it, each asset either
/// read (its sha256 the receipt's) or why not.
#[derive(Debug, Clone)]
pub struct ReleaseFiles {
    pub receipt: Receipt,
    /// Each platform's transcripts, for the platforms whose record names them.
    pub transcripts: BTreeMap<Platform, Result<Transcripts, String>>,
    /// The release's `manifest.yaml` asset (which package each harness runs).
    pub manifest: Result<Manifest, String>,
    /// The release's `inventory.json` asset (each package's trust record).
    pub inventory: Result<Inventory, String>,
}

impl ReleaseFiles {
    /// A receipt without its assets: the notes say what they could not show.
    pub fn receipt_only(receipt: Receipt) -> ReleaseFiles {
        let absent = "not given".to_string();
        ReleaseFiles {
            transcripts: receipt
                .platforms
                .iter()
                .filter(|p| p.transcripts.is_some())
                .map(|p| (p.platform, Err(absent.clone())))
                .collect(),
            receipt,
            manifest: Err(absent.clone()),
            inventory: Err(absent),
        }
    }
}

/// The notes of `new`, compared with `previous` when given.
pub fn build(new: &ReleaseFiles, previous: Option<&ReleaseFiles>) -> ReleaseNotes {
    let r = &new.receipt;
    let old = previous.map(|p| &p.receipt);
    let mut unavailable = Vec::new();
    for (release, files) in std::iter::once(("", new)).chain(previous.map(|p| (" previous", p))) {
        let tag = &files.receipt.release_tag;
        for (platform, t) in &files.transcripts {
            if let Err(why) = t {
                unavailable.push(format!(
                    "the{release} release {tag}'s {platform} transcripts: {why}"
                ));
            }
        }
    }
    ReleaseNotes {
        schema_version: NOTES_SCHEMA_VERSION,
        release_tag: r.release_tag.clone(),
        created_at: r.created_at.clone(),
        reference: r.index.reference.clone(),
        complete: r.complete,
        previous: old.map(|o| PreviousRelease {
            release_tag: o.release_tag.clone(),
            created_at: o.created_at.clone(),
        }),
        packages: package_notes(r, old),
        dependencies: dependency_changes(r, old),
        platforms: platform_notes(r, old, &mut unavailable),
        harnesses: harness_notes(new, previous),
        inputs: inputs_note(new, previous, &mut unavailable),
        unavailable,
    }
}

fn package_notes(r: &Receipt, old: Option<&Receipt>) -> Vec<PackageNote> {
    r.packages
        .iter()
        .map(|p| {
            let before = old
                .and_then(|o| o.packages.iter().find(|q| q.name == p.name))
                .map(|q| q.version.clone());
            let change = match &before {
                None => Change::New,
                Some(b) if *b == p.version => Change::Unchanged,
                Some(b) => match (
                    semver::Version::parse(b),
                    semver::Version::parse(&p.version),
                ) {
                    (Ok(b), Ok(a)) if a < b => Change::Rollback,
                    _ => Change::Updated,
                },
            };
            let latest_rejection = p.rejected.iter().find(|x| x.version == p.latest);
            let not_taken_because = match (p.held_back, latest_rejection) {
                (false, _) => Vec::new(),
                (true, Some(x)) => x.reasons.clone(),
                // A receipt without the rejections: the resolution's own note says why.
                (true, None) => p
                    .notes
                    .iter()
                    .filter_map(|n| {
                        n.strip_prefix(&format!("held back from latest {}: ", p.latest))
                    })
                    .map(str::to_string)
                    .collect(),
            };
            PackageNote {
                name: p.name.clone(),
                version: p.version.clone(),
                previous: before,
                change,
                release_notes: p.repository.as_deref().map(release_notes_url),
                latest: p.latest.clone(),
                held_back: p.held_back,
                not_taken_because,
                rejected: p.rejected.clone(),
                notes: p
                    .notes
                    .iter()
                    .filter(|n| !n.starts_with("held back from latest "))
                    .cloned()
                    .collect(),
            }
        })
        .collect()
}

/// Where a repository's release notes are: its GitHub releases page, else the repository.
pub fn release_notes_url(repository: &str) -> String {
    match repository.strip_prefix("https://github.com/") {
        Some(path) if path.split('/').count() == 2 => format!("{repository}/releases"),
        _ => repository.to_string(),
    }
}

fn dependency_changes(r: &Receipt, old: Option<&Receipt>) -> Vec<VersionChange> {
    let Some(old) = old else {
        return Vec::new();
    };
    // By name: a package nested in two places counts with all its versions, joined.
    let versions = |deps: &[template_formats::model::receipt::DependencyRecord]| {
        let mut by_name: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for d in deps {
            by_name
                .entry(d.name.clone())
                .or_default()
                .insert(d.version.clone());
        }
        by_name
            .into_iter()
            .map(|(n, v)| (n, v.into_iter().collect::<Vec<_>>().join(", ")))
            .collect::<BTreeMap<_, _>>()
    };
    let (a, b) = (versions(&old.dependencies), versions(&r.dependencies));
    let names: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    names
        .into_iter()
        .filter(|n| a.get(*n) != b.get(*n))
        .map(|n| VersionChange {
            name: n.clone(),
            before: a.get(n).cloned(),
            after: b.get(n).cloned(),
        })
        .collect()
}

fn platform_notes(
    r: &Receipt,
    old: Option<&Receipt>,
    unavailable: &mut Vec<String>,
) -> Vec<PlatformNote> {
    r.platforms
        .iter()
        .map(|p| {
            let before = old.and_then(|o| o.platforms.iter().find(|q| q.platform == p.platform));
            let layers_before = match (old, before) {
                (None, _) => Some(Vec::new()),
                (Some(_), Some(b)) => b.layers.clone(),
                (Some(o), None) => {
                    unavailable.push(format!(
                        "{}: the previous release {} has no image for it",
                        p.platform, o.release_tag
                    ));
                    Some(Vec::new())
                }
            };
            if p.layers.is_none() {
                unavailable.push(format!(
                    "{}: the receipt of {} does not record the image's layers",
                    p.platform, r.release_tag
                ));
            } else if layers_before.is_none() {
                unavailable.push(format!(
                    "{}: the previous receipt does not record the image's layers: what a host \
                     holding it pulls is not known",
                    p.platform
                ));
            }
            let new_layers = match (&p.layers, &layers_before) {
                (Some(now), Some(then)) => Some(new_layers(now, then)),
                _ => None,
            };
            PlatformNote {
                platform: p.platform,
                image_size: p.image_size,
                previous_image_size: before.map(|b| b.image_size),
                compressed_size: p.pushed_size,
                previous_compressed_size: before.map(|b| b.pushed_size),
                layers: p.layers.as_ref().map(Vec::len),
                pull_bytes: new_layers.as_ref().map(|n| pull_bytes(p, n)),
                new_layers,
            }
        })
        .collect()
}

/// The layers of `now` that `then` does not have, by digest, in `now`'s order.
pub fn new_layers(now: &[LayerRecord], then: &[LayerRecord]) -> Vec<LayerRecord> {
    let held: BTreeSet<&str> = then.iter().map(|l| l.digest.as_str()).collect();
    let mut seen = BTreeSet::new();
    now.iter()
        .filter(|l| !held.contains(l.digest.as_str()) && seen.insert(l.digest.as_str()))
        .cloned()
        .collect()
}

/// A pull of `p` by a host that lacks `new_layers`: the manifest, the config (the pushed size
/// less every layer) and those layers.
fn pull_bytes(p: &PlatformRecord, new_layers: &[LayerRecord]) -> u64 {
    let layers: u64 = p.layers.iter().flatten().map(|l| l.size).sum();
    let config = p.pushed_size.saturating_sub(layers);
    p.manifest_size + config + new_layers.iter().map(|l| l.size).sum::<u64>()
}

/// The harnesses a receipt shows: those with state records, else those with smoke checks.
fn harness_names(r: &Receipt) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for p in &r.platforms {
        for h in p.harnesses.iter().flatten() {
            if !names.contains(&h.name) {
                names.push(h.name.clone());
            }
        }
        for c in &p.smoke.checks {
            let Some(name) = c.name.strip_prefix("harness ") else {
                continue;
            };
            let name = name.strip_suffix(" turn and resume").unwrap_or(name);
            if !names.iter().any(|n| n == name) {
                names.push(name.to_string());
            }
        }
    }
    names
}

fn check_secs(p: &PlatformRecord, name: &str) -> Option<f64> {
    p.smoke
        .checks
        .iter()
        .find(|c| c.name == name)
        .and_then(|c| c.duration_secs)
}

fn harness_notes(new: &ReleaseFiles, previous: Option<&ReleaseFiles>) -> Vec<HarnessNote> {
    let r = &new.receipt;
    let old = previous.map(|p| &p.receipt);
    let mut names = harness_names(r);
    // In the manifest's order when the release's manifest is at hand.
    if let Ok(m) = &new.manifest {
        names.sort_by_key(|n| m.harnesses.iter().position(|h| h.name == *n));
    }
    names
        .into_iter()
        .map(|name| {
            let package = new.manifest.as_ref().ok().and_then(|m| {
                let harness = m.harnesses.iter().find(|h| h.name == name)?;
                let command = harness.command.first()?;
                m.packages
                    .iter()
                    .find(|p| p.command.as_deref() == Some(command.as_str()))
                    .map(|p| p.name.clone())
            });
            let version_in = |r: &Receipt| {
                package.as_ref().and_then(|n| {
                    r.packages
                        .iter()
                        .find(|p| p.name == *n)
                        .map(|p| p.version.clone())
                })
            };
            let timings = r
                .platforms
                .iter()
                .map(|p| HarnessTiming {
                    platform: p.platform,
                    handshake_secs: check_secs(p, &harness_check_name(&name)),
                    turn_secs: check_secs(p, &harness_turns_check_name(&name)),
                    previous_turn_secs: old
                        .and_then(|o| o.platforms.iter().find(|q| q.platform == p.platform))
                        .and_then(|q| check_secs(q, &harness_turns_check_name(&name))),
                })
                .collect();
            let drift = previous
                .map(|prev| {
                    new.transcripts
                        .iter()
                        .filter_map(|(platform, t)| {
                            let now = t.as_ref().ok()?.harness(&name)?;
                            let then = prev.transcripts.get(platform)?.as_ref().ok()?;
                            let then = then.harness(&name)?;
                            Some(PlatformDrift {
                                platform: *platform,
                                changes: drift(then, now),
                            })
                        })
                        .collect()
                })
                .unwrap_or_default();
            let state = |r: &Receipt| {
                r.platforms
                    .iter()
                    .flat_map(|p| p.harnesses.iter().flatten())
                    .find(|h| h.name == name)
                    .cloned()
            };
            let (now, then) = (state(r), old.and_then(state));
            let session = now.as_ref().map(|s| s.session.clone()).unwrap_or_default();
            let previous_session = then.as_ref().map(|s| s.session.clone());
            let set = |s: &Option<template_formats::model::receipt::HarnessStateRecord>| {
                s.iter()
                    .flat_map(|s| s.written_directories())
                    .collect::<BTreeSet<String>>()
            };
            let (written_now, written_then) = (set(&now), set(&then));
            let compared = now.is_some() && then.is_some();
            let resume_risk = match (&now, &then) {
                (Some(a), Some(b)) if a.session != b.session => Some(format!(
                    "{name} keeps its session in {} (the previous release: {}): existing \
                     sandboxes keep their state where the previous version wrote it, so a \
                     resume after this update may not find it",
                    list(&a.session),
                    list(&b.session)
                )),
                _ => None,
            };
            HarnessNote {
                version: version_in(r),
                previous_version: old.and_then(version_in),
                package,
                timings,
                drift,
                session,
                previous_session,
                written_added: if compared {
                    written_now.difference(&written_then).cloned().collect()
                } else {
                    Vec::new()
                },
                written_removed: if compared {
                    written_then.difference(&written_now).cloned().collect()
                } else {
                    Vec::new()
                },
                resume_risk,
                name,
            }
        })
        .collect()
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "nowhere".into()
    } else {
        items.join(", ")
    }
}

fn inputs_note(
    new: &ReleaseFiles,
    previous: Option<&ReleaseFiles>,
    unavailable: &mut Vec<String>,
) -> Option<InputsNote> {
    let r = &new.receipt;
    let Some(inputs) = &r.inputs else {
        unavailable.push(format!(
            "the input trust: the receipt of {} predates its record",
            r.release_tag
        ));
        return None;
    };
    let inventory_row = |files: &ReleaseFiles, name: &str| {
        files.inventory.as_ref().ok().and_then(|i| {
            i.packages
                .iter()
                .find(|p| p.top_level && p.name == name)
                .cloned()
        })
    };
    let old_inputs = previous.and_then(|p| p.receipt.inputs.as_ref());
    let packages = inputs
        .packages
        .iter()
        .map(|p| {
            let row = inventory_row(new, &p.name);
            let provenance = row.as_ref().and_then(|r| r.provenance.as_ref()).map(|v| {
                format!(
                    "{} {}@{}{}",
                    v.repository,
                    v.workflow,
                    v.git_ref,
                    if v.identity_pinned {
                        ""
                    } else {
                        " (identity not pinned)"
                    }
                )
            });
            let publisher = row
                .as_ref()
                .and_then(|r| r.publisher.as_ref())
                .map(|x| x.name.clone());
            let install_scripts = p.install_scripts.as_ref().map(|s| {
                s.commands()
                    .into_iter()
                    .map(|(k, v)| format!("{k}: {v}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            });
            let mut changes = Vec::new();
            if let Some(before) =
                old_inputs.and_then(|o| o.packages.iter().find(|q| q.name == p.name))
            {
                if before.signed_by != p.signed_by {
                    changes.push(format!(
                        "signed by {} (was {})",
                        p.signed_by.as_deref().unwrap_or("nothing"),
                        before.signed_by.as_deref().unwrap_or("nothing")
                    ));
                }
                if before.install_scripts != p.install_scripts {
                    changes.push("its install scripts changed (reviewed in the manifest)".into());
                }
            }
            if let Some(prev) = previous {
                let old_row = inventory_row(prev, &p.name);
                let describe = |r: &Option<
                    template_formats::model::inventory::InventoryPackage,
                >| { r.as_ref().map(|r| r.evidence.describe()) };
                if let (Some(a), Some(b)) = (describe(&old_row), describe(&row)) {
                    if a != b {
                        changes.push(format!("trust evidence {b} (was {a})"));
                    }
                }
                let pub_of = |r: &Option<template_formats::model::inventory::InventoryPackage>| {
                    r.as_ref()
                        .and_then(|r| r.publisher.as_ref())
                        .map(|x| x.name.clone())
                };
                if old_row.is_some() && row.is_some() && pub_of(&old_row) != pub_of(&row) {
                    changes.push(format!(
                        "published by {} (was {})",
                        pub_of(&row).unwrap_or_else(|| "no one named".into()),
                        pub_of(&old_row).unwrap_or_else(|| "no one named".into())
                    ));
                }
            }
            PackageTrust {
                name: p.name.clone(),
                version: p.version.clone(),
                signed_by: p.signed_by.clone(),
                provenance,
                publisher,
                install_scripts,
                changes,
            }
        })
        .collect();
    if let Err(why) = &new.inventory {
        unavailable.push(format!(
            "provenance and publishers (the release's inventory.json): {why}"
        ));
    }
    Some(InputsNote {
        status: inputs.status,
        previous_status: old_inputs.map(|o| o.status),
        registry: inputs.registry.clone(),
        keys: inputs.keys.clone(),
        packages,
    })
}

#[cfg(test)]
mod tests;
