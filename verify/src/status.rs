//! `template-verify status` (and `cargo xtask status`): how fresh a template's pin is, for the
//! operators who run it. Which release the template pins and how old it is, each package's
//! pinned version against npm's `latest` now, and whether a newer complete release exists
//! and what it would move; using only the releases' assets (through `gh`, attested as
//! `consume` requires), the npm registry and the verifier. What could not be checked (GitHub
//! or the registry unreachable, the pinned release not found) is said, line by line, and
//! is not an error: the answer is as much as could be known.
//!
//! The IO is here at the edge ([`run`], [`gather`]); [`judge`] is pure over what was found.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::attestation::PROVENANCE;
use crate::consume::{file_digest, judge as judge_release, order_releases, receipt_asset};
use crate::consume::{Gh, Judgement, ReceiptAsset};
use crate::fs::append_to_github_file;
use crate::receipt::policy::ReceiptPolicy;
use crate::receipt::verify::verify_file;
use crate::receipt::MANIFEST_ASSET;
use crate::settings::Environment;
use crate::terminal_text::{escape, print_json_escaped};
use template_formats::model::receipt::Receipt;

/// What `status` is asked.
#[derive(Debug, Clone)]
pub struct StatusRequest {
    /// The template's GitHub repository, `owner/name`, whose releases are read.
    pub repository: String,
    /// The template definition whose `image:` is judged.
    pub template: PathBuf,
    /// Where release assets are downloaded; `None`: a temporary directory.
    pub work_dir: Option<PathBuf>,
    pub signer_workflow: Option<String>,
    pub source_ref: Option<String>,
    pub max_releases: usize,
    /// The npm registry to ask for `latest`; `None`: the one the pinned release was resolved
    /// against.
    pub registry: Option<String>,
    /// The clock the age is measured with; `None`: now.
    pub now: Option<DateTime<Utc>>,
    pub json: bool,
}

/// A release as status names it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReleaseRef {
    pub tag: String,
    pub created_at: String,
}

/// One package of the pinned release.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PackageStatus {
    pub name: String,
    pub pinned: String,
    /// npm's `latest` now; `None` when it could not be asked.
    pub latest_now: Option<String>,
    /// The version in the newest complete release, when that is another release.
    pub in_newest_release: Option<String>,
}

/// What `status` answers (`--json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Status {
    pub template: String,
    pub image: String,
    /// The release the template pins; `None` when it could not be found.
    pub pinned: Option<ReleaseRef>,
    /// Its age at the clock, in whole hours.
    pub age_hours: Option<i64>,
    pub packages: Vec<PackageStatus>,
    /// The newest complete release, when it is not the pinned one.
    pub newer_release: Option<ReleaseRef>,
    /// `name old -> new` for each package the newer release would move.
    pub newer_release_moves: Vec<String>,
    /// Whether the pinned release is the newest complete one (`None`: not known).
    pub up_to_date: Option<bool>,
    /// Each thing that could not be checked, and why.
    pub could_not_check: Vec<String>,
}

/// What was found, for [`judge`].
#[derive(Debug, Default)]
pub struct Found {
    pub pinned: Option<Receipt>,
    pub newest: Option<Receipt>,
    /// npm's `latest` now, by package, or why it is not known.
    pub latest: BTreeMap<String, Result<String, String>>,
    pub could_not_check: Vec<String>,
}

/// The status of `image` (the template's), from what was found at `now`. Pure.
pub fn judge(template: &Path, image: &str, found: &Found, now: DateTime<Utc>) -> Status {
    let mut could_not_check = found.could_not_check.clone();
    let pinned = found.pinned.as_ref();
    let newest = found
        .newest
        .as_ref()
        .filter(|n| pinned.is_none_or(|p| p.release_tag != n.release_tag));
    let age_hours = pinned.and_then(|p| {
        let created: DateTime<Utc> = p.created_at.parse().ok()?;
        Some((now - created).num_hours())
    });
    let packages: Vec<PackageStatus> = pinned
        .map(|p| {
            p.packages
                .iter()
                .map(|pkg| {
                    let latest_now = match found.latest.get(&pkg.name) {
                        Some(Ok(v)) => Some(v.clone()),
                        Some(Err(why)) => {
                            could_not_check.push(format!("npm's latest of `{}`: {why}", pkg.name));
                            None
                        }
                        None => None,
                    };
                    PackageStatus {
                        name: pkg.name.clone(),
                        pinned: pkg.version.clone(),
                        latest_now,
                        in_newest_release: newest.and_then(|n| {
                            n.packages
                                .iter()
                                .find(|q| q.name == pkg.name)
                                .map(|q| q.version.clone())
                        }),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let newer_release_moves = packages
        .iter()
        .filter_map(|p| {
            let newer = p.in_newest_release.as_ref()?;
            (*newer != p.pinned).then(|| format!("{} {} -> {newer}", p.name, p.pinned))
        })
        .collect();
    let up_to_date = match (pinned, &found.newest) {
        (Some(p), Some(n)) => Some(p.release_tag == n.release_tag),
        _ => None,
    };
    Status {
        template: template.display().to_string(),
        image: image.to_string(),
        pinned: pinned.map(release_ref),
        age_hours,
        packages,
        newer_release: newest.map(release_ref),
        newer_release_moves,
        up_to_date,
        could_not_check,
    }
}

fn release_ref(r: &Receipt) -> ReleaseRef {
    ReleaseRef {
        tag: r.release_tag.clone(),
        created_at: r.created_at.clone(),
    }
}

/// `3 days 4 hours`, `5 hours`.
fn age_text(hours: i64) -> String {
    let (days, hours) = (hours / 24, hours % 24);
    match days {
        0 => format!("{hours} hour(s)"),
        _ => format!("{days} day(s) {hours} hour(s)"),
    }
}

/// The status as Markdown (stdout, and the job summary under GitHub Actions).
pub fn markdown(s: &Status) -> String {
    let mut out = String::from("## Coding agent template: freshness\n\n");
    match (&s.pinned, s.age_hours) {
        (Some(p), Some(age)) => out.push_str(&format!(
            "`{}` pins release `{}`, created {} ({} ago): `{}`.\n",
            s.template,
            p.tag,
            p.created_at,
            age_text(age),
            s.image
        )),
        (Some(p), None) => out.push_str(&format!(
            "`{}` pins release `{}`, created {}: `{}`.\n",
            s.template, p.tag, p.created_at, s.image
        )),
        (None, _) => out.push_str(&format!(
            "`{}` names `{}`; which release that is could not be told (below).\n",
            s.template, s.image
        )),
    }
    if !s.packages.is_empty() {
        let newest = s
            .newer_release
            .as_ref()
            .map_or("–".to_string(), |r| format!("in {}", r.tag));
        out.push_str(&format!(
            "\n| package | pinned | npm `latest` now | {newest} |\n| --- | --- | --- | --- |\n"
        ));
        for p in &s.packages {
            let behind = match &p.latest_now {
                Some(l) if *l != p.pinned => format!("{l} (newer)"),
                Some(l) => l.clone(),
                None => "not checked".into(),
            };
            out.push_str(&format!(
                "| `{}` | {} | {} | {} |\n",
                p.name,
                p.pinned,
                behind,
                p.in_newest_release.as_deref().unwrap_or("–")
            ));
        }
    }
    out.push('\n');
    match (&s.newer_release, s.up_to_date) {
        (Some(r), _) if s.newer_release_moves.is_empty() => out.push_str(&format!(
            "A newer complete release exists, `{}` (created {}); it moves no package.\n",
            r.tag, r.created_at
        )),
        (Some(r), _) => out.push_str(&format!(
            "A newer complete release exists, `{}` (created {}); it would move {}.\n",
            r.tag,
            r.created_at,
            s.newer_release_moves.join(", ")
        )),
        (None, Some(true)) => out.push_str("The pinned release is the newest complete one.\n"),
        _ => out.push_str("Whether a newer complete release exists is not known (below).\n"),
    }
    if !s.could_not_check.is_empty() {
        out.push_str("\nCould not check:\n\n");
        for c in &s.could_not_check {
            out.push_str(&format!("- {}\n", c.replace('\n', " ")));
        }
    }
    out
}

/// The template's `image:` value.
fn image_of(template: &Path) -> Result<String> {
    let text = std::fs::read_to_string(template)
        .with_context(|| format!("cannot read the template definition {}", template.display()))?;
    crate::pin::rewrite_image_line(&text, "")
        .map(|(old, _)| old)
        .with_context(|| format!("{}", template.display()))
}

/// `template-verify status`.
pub fn run(request: StatusRequest, env: &Environment) -> Result<ExitCode> {
    let image = image_of(&request.template)?;
    let scratch;
    let work_dir = match &request.work_dir {
        Some(dir) => dir.clone(),
        None => {
            scratch = tempfile::tempdir().context("cannot make a temporary directory")?;
            scratch.path().to_path_buf()
        }
    };
    let found = gather(&request, &image, &work_dir);
    let status = judge(
        &request.template,
        &image,
        &found,
        request.now.unwrap_or_else(Utc::now),
    );
    let text = markdown(&status);
    append_to_github_file(&env.github_step_summary, &text)?;
    if request.json {
        print_json_escaped(&status)?;
    } else {
        for line in text.lines() {
            println!("{}", escape(line));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Everything status can find: the releases through `gh` (newest first, until the pinned one),
/// then npm's `latest` of the pinned release's packages. Failures become `could_not_check`.
fn gather(request: &StatusRequest, image: &str, work_dir: &Path) -> Found {
    let mut found = Found::default();
    match Gh::new(
        &request.repository,
        request.signer_workflow.as_deref(),
        request.source_ref.as_deref(),
    ) {
        Err(e) => found.could_not_check.push(format!(
            "the releases of {} (GitHub, through `gh`): {e:#}",
            request.repository
        )),
        Ok(gh) => releases(&gh, request, image, work_dir, &mut found),
    }
    if let Some(pinned) = &found.pinned {
        let registry = request
            .registry
            .clone()
            .unwrap_or_else(|| pinned.resolver.registry.clone());
        let names: Vec<String> = pinned.packages.iter().map(|p| p.name.clone()).collect();
        match latest_versions(&registry, &names) {
            Ok(latest) => found.latest = latest,
            Err(e) => found
                .could_not_check
                .push(format!("npm's latest versions at {registry}: {e:#}")),
        }
    }
    found
}

fn releases(gh: &Gh, request: &StatusRequest, image: &str, work_dir: &Path, found: &mut Found) {
    let listed = match gh.list() {
        Ok(listed) => listed,
        Err(e) => {
            found.could_not_check.push(format!(
                "the releases of {} (GitHub, through `gh`): {e:#}",
                gh.repository
            ));
            return;
        }
    };
    let tags = order_releases(&listed, request.max_releases);
    for tag in &tags {
        match attested_receipt(gh, tag, work_dir) {
            Ok(None) => {}
            Ok(Some((receipt, judgement))) => {
                if found.newest.is_none() && judgement == Judgement::Take {
                    found.newest = Some(receipt.clone());
                }
                if receipt.index.reference == image {
                    if let Judgement::Refuse(why) = &judgement {
                        found.could_not_check.push(format!(
                            "the pinned release {tag}: its receipt does not verify: {why}"
                        ));
                    }
                    found.pinned = Some(receipt);
                    return;
                }
            }
            Err(e) => found.could_not_check.push(format!("release {tag}: {e:#}")),
        }
    }
    found.could_not_check.push(format!(
        "which release `{image}` is: none of the {} newest releases of {} has its index",
        tags.len(),
        gh.repository
    ));
}

/// A release's receipt and manifest, downloaded and attested, the receipt verified offline
/// by that manifest; `None` for a release without a receipt.
fn attested_receipt(gh: &Gh, tag: &str, work_dir: &Path) -> Result<Option<(Receipt, Judgement)>> {
    let name = match receipt_asset(&gh.asset_names(tag)?) {
        ReceiptAsset::One(name) => name,
        ReceiptAsset::Missing => return Ok(None),
        ReceiptAsset::Several(names) => anyhow::bail!("several receipts: {}", names.join(", ")),
    };
    let dir = work_dir.join(tag);
    gh.download(tag, &name, &dir)?;
    gh.download(tag, MANIFEST_ASSET, &dir)?;
    let (receipt, manifest) = (dir.join(&name), dir.join(MANIFEST_ASSET));
    for file in [&receipt, &manifest] {
        file_digest(file)
            .and_then(|d| gh.verify_attestation(&file.display().to_string(), &d, PROVENANCE, None))
            .map_err(|why| {
                anyhow::anyhow!(
                    "{} is not attested by {} from {}: {why}",
                    file.file_name().unwrap_or_default().to_string_lossy(),
                    gh.policy.signer_workflow,
                    gh.policy.source_ref
                )
            })?;
    }
    let policy = ReceiptPolicy::release_asset(&manifest)?;
    let verification = verify_file(&receipt, None, &policy)?;
    let judgement = judge_release(tag, &verification);
    let receipt = verification
        .receipt
        .context("the receipt is not readable as a receipt")?;
    Ok(Some((receipt, judgement)))
}

/// npm's `dist-tags.latest` of each package (the abbreviated packument, as npm asks for it).
fn latest_versions(
    registry: &str,
    names: &[String],
) -> Result<BTreeMap<String, Result<String, String>>> {
    let base = format!("{}/", registry.trim_end_matches('/'));
    let client =
        crate::http::client_for_url(&base, crate::http::Timeout::Total(Duration::from_secs(30)))?;
    let runtime = tokio::runtime::Handle::try_current();
    let ask = |name: &String| {
        let url = format!("{base}{}", packument_path(name));
        let client = client.clone();
        async move {
            let response = client
                .get(&url)
                .header("accept", "application/vnd.npm.install-v1+json")
                .send()
                .await
                .map_err(|e| format!("{url}: {e}"))?;
            if !response.status().is_success() {
                return Err(format!("{url} answered {}", response.status()));
            }
            let body: serde_json::Value =
                response.json().await.map_err(|e| format!("{url}: {e}"))?;
            body["dist-tags"]["latest"]
                .as_str()
                .map(str::to_string)
                .ok_or_else(|| format!("{url} names no `latest`"))
        }
    };
    let asks = futures_util::future::join_all(names.iter().map(ask));
    let answers = match runtime {
        Ok(handle) => tokio::task::block_in_place(|| handle.block_on(asks)),
        Err(_) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
            .block_on(asks),
    };
    Ok(names.iter().cloned().zip(answers).collect())
}

/// A package's path in the registry: a scope's `/` escaped, as npm's clients send it.
pub fn packument_path(name: &str) -> String {
    name.replace('/', "%2f")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receipt::tests_support::sample;

    fn release(tag: &str, created_at: &str, codex: &str) -> Receipt {
        let mut r = sample();
        r.release_tag = tag.into();
        r.created_at = created_at.into();
        r.index.reference = format!("ghcr.io/o/coding-agent@sha256:{}", "a".repeat(64));
        for p in &mut r.packages {
            p.version = if p.name == "@openai/codex" {
                codex
            } else {
                "1.0.0"
            }
            .into();
        }
        r
    }

    #[test]
    fn an_old_pin_names_its_age_npm_s_newer_versions_and_the_release_that_would_move_it() {
        let now: DateTime<Utc> = "2026-12-05T10:00:00Z".parse().unwrap();
        let pinned = release("2026.11.30-aaaaaaaaaaaa", "2026-11-30T06:00:00Z", "0.171.0");
        let newest = release("2026.12.03-bbbbbbbbbbbb", "2026-12-03T06:00:00Z", "0.172.0");
        let mut latest: BTreeMap<String, Result<String, String>> = pinned
            .packages
            .iter()
            .map(|p| (p.name.clone(), Ok("1.0.0".to_string())))
            .collect();
        latest.insert("@openai/codex".into(), Ok("0.173.0".into()));
        latest.insert("ws".into(), Err("http://x/ws: connection refused".into()));
        let found = Found {
            pinned: Some(pinned.clone()),
            newest: Some(newest),
            latest,
            could_not_check: vec![],
        };
        let s = judge(Path::new("t.yaml"), &pinned.index.reference, &found, now);
        assert_eq!(s.age_hours, Some(124));
        assert_eq!(s.up_to_date, Some(false));
        assert_eq!(s.newer_release_moves, ["@openai/codex 0.171.0 -> 0.172.0"]);
        let text = markdown(&s);
        assert!(text.contains("pins release `2026.11.30-aaaaaaaaaaaa`, created 2026-11-30T06:00:00Z (5 day(s) 4 hour(s) ago)"), "{text}");
        assert!(
            text.contains("| `@openai/codex` | 0.171.0 | 0.173.0 (newer) | 0.172.0 |"),
            "{text}"
        );
        assert!(
            text.contains("it would move @openai/codex 0.171.0 -> 0.172.0"),
            "{text}"
        );
        assert!(
            text.contains("- npm's latest of `ws`: http://x/ws: connection refused"),
            "{text}"
        );
    }

    #[test]
    fn what_was_not_found_is_said_not_guessed() {
        let now: DateTime<Utc> = "2026-12-05T10:00:00Z".parse().unwrap();
        let found = Found {
            could_not_check: vec![
                "the releases of o/r (GitHub, through `gh`): gh: not found".into()
            ],
            ..Found::default()
        };
        let s = judge(Path::new("t.yaml"), "ghcr.io/o/c@sha256:aa", &found, now);
        assert_eq!(s.pinned, None);
        assert_eq!(s.up_to_date, None);
        let text = markdown(&s);
        assert!(
            text.contains("which release that is could not be told"),
            "{text}"
        );
        assert!(
            text.contains("Whether a newer complete release exists is not known"),
            "{text}"
        );
        assert!(
            text.contains("- the releases of o/r (GitHub, through `gh`): gh: not found"),
            "{text}"
        );
        // Pinned to the newest: said so.
        let r = release("t", "2026-12-05T06:00:00Z", "1");
        let found = Found {
            pinned: Some(r.clone()),
            newest: Some(r.clone()),
            ..Found::default()
        };
        let s = judge(Path::new("t.yaml"), &r.index.reference, &found, now);
        assert_eq!(s.up_to_date, Some(true));
        assert!(markdown(&s).contains("The pinned release is the newest complete one."));
        assert_eq!(packument_path("@openai/codex"), "@openai%2fcodex");
    }
}
