//! `cargo xtask release existing`: what the workflow's last job does about the GitHub release of
//! this run's tag, decided from what `gh` found and the assets this run made, so that a re-run of
//! any job after any outcome converges on exactly one published release with these assets.
//!
//! GitHub's immutable releases (docs: "Immutable releases") forbid adding, replacing or deleting
//! a published release's assets, and a tag once used by a published release can never name
//! another one. So:
//! - published with exactly this run's assets (a re-run of a green `ship`, or a day whose inputs
//!   equal an already-published tag): nothing to do, said so, success;
//! - published with other assets: a failure naming every difference (nothing can repair it);
//!   its Sigstore bundles (`*.sigstore.json`) are not compared: they attest the assets, and no
//!   two signings give the same bytes;
//! - otherwise (none, or a draft of an earlier attempt): every draft this workflow left goes
//!   (its own tag's, and earlier runs' that never published), then draft, assets, published.
//!
//! What gh found is read at the edge (`run`); the decision, `decide`, is pure.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use template_formats::model::tag::parse_release_tag;

fn is_release_tag(tag: &str) -> bool {
    parse_release_tag(tag).is_some()
}

/// Every release this workflow creates is titled this, then the tag: how a draft it left is
/// told from one a person made.
pub const TITLE_PREFIX: &str = "Coding agent template ";

/// `cargo xtask release existing`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseExistingRequest {
    /// This run's tag.
    pub tag: String,
    /// The assets this run made (`release ship --assets`).
    pub assets: PathBuf,
    /// What the workflow's `gh` step found: `releases.json` (`gh release list --json
    /// tagName,name,isDraft`), `this.json` (`gh release view TAG --json tagName,isDraft`, absent
    /// when there is no such release) and, for a published one, `assets/` (`gh release download`).
    pub found: PathBuf,
    pub json: bool,
}

/// One release as `gh release list --json tagName,name,isDraft` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Listed {
    pub tag_name: String,
    #[serde(default)]
    pub name: String,
    pub is_draft: bool,
}

/// This tag's release as GitHub holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ThisTag {
    Absent,
    Draft,
    /// Published: its assets' names and sha256.
    Published(BTreeMap<String, String>),
}

/// How a published release's assets differ from this run's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct AssetDifference {
    pub only_this_run: Vec<String>,
    pub only_published: Vec<String>,
    /// Same name, other content: (name, published sha256, this run's sha256).
    pub other_content: Vec<(String, String, String)>,
}

impl AssetDifference {
    fn is_empty(&self) -> bool {
        self.only_this_run.is_empty()
            && self.only_published.is_empty()
            && self.other_content.is_empty()
    }
}

impl std::fmt::Display for AssetDifference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if !self.only_this_run.is_empty() {
            parts.push(format!(
                "only in this run: {}",
                self.only_this_run.join(", ")
            ));
        }
        if !self.only_published.is_empty() {
            parts.push(format!(
                "only in the published release: {}",
                self.only_published.join(", ")
            ));
        }
        for (name, published, ours) in &self.other_content {
            parts.push(format!(
                "{name} differs (published sha256:{published}, this run sha256:{ours})"
            ));
        }
        f.write_str(&parts.join("; "))
    }
}

/// What the job does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub(crate) enum Decision {
    /// Delete `stale_drafts`, then create the draft, attach the assets, publish.
    Publish { stale_drafts: Vec<String> },
    /// Published already with exactly these assets: delete `stale_drafts`, nothing else.
    AlreadyPublished {
        stale_drafts: Vec<String>,
        assets: usize,
    },
}

/// The decision, or the difference that makes this run's release impossible.
pub(crate) fn decide(
    tag: &str,
    ours: &BTreeMap<String, String>,
    this: &ThisTag,
    listed: &[Listed],
) -> Result<Decision, AssetDifference> {
    // Drafts this workflow made: its title, a release tag (nothing else is ever passed on to
    // the shell), never published (a draft is). This tag's own draft is among them when the
    // list shows it, and is added when only `view` did (a list is one page long).
    let mut stale: BTreeSet<String> = listed
        .iter()
        .filter(|r| r.is_draft && r.name.starts_with(TITLE_PREFIX) && is_release_tag(&r.tag_name))
        .map(|r| r.tag_name.clone())
        .collect();
    if *this == ThisTag::Draft {
        stale.insert(tag.to_string());
    }
    let stale_drafts: Vec<String> = stale.into_iter().collect();
    match this {
        ThisTag::Published(published) => {
            let difference = difference(published, ours);
            if difference.is_empty() {
                Ok(Decision::AlreadyPublished {
                    stale_drafts,
                    assets: ours.len(),
                })
            } else {
                Err(difference)
            }
        }
        ThisTag::Absent | ThisTag::Draft => Ok(Decision::Publish { stale_drafts }),
    }
}

fn difference(
    published: &BTreeMap<String, String>,
    ours: &BTreeMap<String, String>,
) -> AssetDifference {
    let mut d = AssetDifference::default();
    for (name, sha) in ours {
        match published.get(name) {
            None => d.only_this_run.push(name.clone()),
            Some(theirs) if theirs != sha => {
                d.other_content
                    .push((name.clone(), theirs.clone(), sha.clone()))
            }
            Some(_) => {}
        }
    }
    d.only_published = published
        .keys()
        .filter(|name| !ours.contains_key(*name) && !is_bundle(name))
        .cloned()
        .collect();
    d
}

/// A Sigstore bundle asset (`<what>.sigstore.json`) attests the assets; it is not one of them.
/// Signing is not reproducible (a fresh key and timestamp each time), so a re-run's bundles
/// always differ from the published ones: the published release is judged by the assets its
/// bundles attest, which must be byte-identical, and keeps the bundles it was published with.
fn is_bundle(name: &str) -> bool {
    name.ends_with(template_formats::model::publish::BUNDLE_ASSET_SUFFIX)
}

/// What the workflow's next steps read: `publish`, `stale_drafts` (space-separated tags) and
/// `title`.
pub(crate) fn github_outputs(tag: &str, decision: &Decision) -> String {
    let (publish, stale) = match decision {
        Decision::Publish { stale_drafts } => (true, stale_drafts),
        Decision::AlreadyPublished { stale_drafts, .. } => (false, stale_drafts),
    };
    format!(
        "publish={publish}\nstale_drafts={}\ntitle={TITLE_PREFIX}{tag}\n",
        stale.join(" ")
    )
}

pub fn run(request: ReleaseExistingRequest, ctx: &crate::Context) -> Result<ExitCode> {
    if !is_release_tag(&request.tag) {
        bail!("{:?} is not a release tag", request.tag);
    }
    let ours = assets_in(&request.assets)?;
    if ours.is_empty() {
        bail!(
            "{} holds no assets; run `release ship --assets {}` first",
            request.assets.display(),
            request.assets.display()
        );
    }
    let (this, listed) = read_found(&request.found)?;
    let verifier = &ctx.settings.verifier;
    let decision = match decide(&request.tag, &ours, &this, &listed) {
        Ok(decision) => decision,
        Err(difference) => bail!(
            "release {} is published, and immutable, with other assets than this run's: \
             {difference}. Nothing can change a published release: find out why the same \
             tag's inputs gave other files (`cargo xtask release notes`, the receipts); the \
             next release gets a new tag",
            request.tag
        ),
    };
    let said = match &decision {
        Decision::AlreadyPublished { assets, .. } => format!(
            "Release {} is already published with exactly this run's {assets} assets: nothing to do.",
            request.tag
        ),
        Decision::Publish { .. } => format!(
            "Release {}: draft, assets, then published.",
            request.tag
        ),
    };
    let stale = match &decision {
        Decision::Publish { stale_drafts } | Decision::AlreadyPublished { stale_drafts, .. } => {
            stale_drafts
        }
    };
    let stale_line = if stale.is_empty() {
        String::new()
    } else {
        format!(
            " Drafts earlier attempts left, removed first: {}.",
            stale.join(", ")
        )
    };
    eprintln!("{said}{stale_line}");
    crate::util::append_to_github_file(
        &verifier.github_output,
        &github_outputs(&request.tag, &decision),
    )?;
    crate::util::append_to_github_file(
        &verifier.github_step_summary,
        &format!("{said}{stale_line}\n"),
    )?;
    if request.json {
        crate::util::print_json(&decision)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The files directly in `dir`, by name, with their sha256.
fn assets_in(dir: &Path) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e).with_context(|| format!("cannot list {}", dir.display())),
    };
    for entry in entries {
        let path = entry?.path();
        if path.is_file() {
            let name = path
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            out.insert(name, crate::util::sha256_file(&path)?);
        }
    }
    Ok(out)
}

/// Reads what the workflow's `gh` step left in `found`.
fn read_found(found: &Path) -> Result<(ThisTag, Vec<Listed>)> {
    let releases = found.join("releases.json");
    let listed: Vec<Listed> = serde_json::from_slice(
        &std::fs::read(&releases).with_context(|| format!("cannot read {}", releases.display()))?,
    )
    .with_context(|| {
        format!(
            "{}: not `gh release list --json tagName,name,isDraft`",
            releases.display()
        )
    })?;
    let this_file = found.join("this.json");
    let this = match std::fs::read(&this_file) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => ThisTag::Absent,
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", this_file.display())),
        Ok(bytes) => {
            #[derive(Deserialize)]
            #[serde(rename_all = "camelCase")]
            struct View {
                is_draft: bool,
            }
            let view: View = serde_json::from_slice(&bytes).with_context(|| {
                format!(
                    "{}: not `gh release view --json tagName,isDraft`",
                    this_file.display()
                )
            })?;
            if view.is_draft {
                ThisTag::Draft
            } else {
                ThisTag::Published(assets_in(&found.join("assets"))?)
            }
        }
    };
    Ok((this, listed))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TAG: &str = "2026.11.30-0123456789ab";

    fn assets(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(n, s)| (n.to_string(), s.to_string()))
            .collect()
    }

    fn listed(tag: &str, name: &str, is_draft: bool) -> Listed {
        Listed {
            tag_name: tag.into(),
            name: name.into(),
            is_draft,
        }
    }

    #[test]
    fn no_release_yet_publishes() {
        let ours = assets(&[("receipt-a.json", "aa")]);
        assert_eq!(
            decide(TAG, &ours, &ThisTag::Absent, &[]),
            Ok(Decision::Publish {
                stale_drafts: vec![]
            })
        );
    }

    #[test]
    fn a_published_release_with_the_same_assets_is_done() {
        let ours = assets(&[("receipt-a.json", "aa"), ("inventory.json", "bb")]);
        let this = ThisTag::Published(ours.clone());
        let list = [listed(TAG, &format!("{TITLE_PREFIX}{TAG}"), false)];
        assert_eq!(
            decide(TAG, &ours, &this, &list),
            Ok(Decision::AlreadyPublished {
                stale_drafts: vec![],
                assets: 2
            })
        );
    }

    #[test]
    fn a_published_release_keeps_its_own_bundles_when_the_assets_are_the_same() {
        // This run's bundles live outside its assets directory; the published ones are among
        // the release's assets, signed by an earlier attempt.
        let ours = assets(&[("receipt-a.json", "aa"), ("inventory.json", "bb")]);
        let mut published = ours.clone();
        published.insert("provenance-assets.sigstore.json".into(), "ee".into());
        let decided = decide(TAG, &ours, &ThisTag::Published(published.clone()), &[]);
        assert_eq!(
            decided,
            Ok(Decision::AlreadyPublished {
                stale_drafts: vec![],
                assets: 2
            })
        );
        // Not a loophole for anything else: another asset is still a difference.
        published.insert("provenance-assets.json".into(), "ff".into());
        let difference = decide(TAG, &ours, &ThisTag::Published(published), &[]).unwrap_err();
        assert_eq!(difference.only_published, ["provenance-assets.json"]);
    }

    #[test]
    fn a_published_release_with_other_assets_names_every_difference() {
        let ours = assets(&[
            ("receipt-a.json", "aa"),
            ("inventory.json", "bb"),
            ("new", "cc"),
        ]);
        let published = assets(&[
            ("receipt-a.json", "aa"),
            ("inventory.json", "00"),
            ("old", "dd"),
        ]);
        let difference = decide(TAG, &ours, &ThisTag::Published(published), &[]).unwrap_err();
        assert_eq!(difference.only_this_run, ["new"]);
        assert_eq!(difference.only_published, ["old"]);
        assert_eq!(
            difference.other_content,
            [(
                "inventory.json".to_string(),
                "00".to_string(),
                "bb".to_string()
            )]
        );
        let text = difference.to_string();
        for part in [
            "only in this run: new",
            "only in the published release: old",
            "inventory.json differs (published sha256:00, this run sha256:bb)",
        ] {
            assert!(text.contains(part), "{text}");
        }
    }

    #[test]
    fn drafts_this_workflow_left_are_removed_others_are_not() {
        let ours = assets(&[("receipt-a.json", "aa")]);
        let earlier = "2026.11.27-fedcba987654";
        let list = [
            listed(earlier, &format!("{TITLE_PREFIX}{earlier}"), true),
            listed("v1.0", "a person's draft", true),
            listed(
                "2026.11.24-aaaaaaaaaaaa",
                &format!("{TITLE_PREFIX}2026.11.24-aaaaaaaaaaaa"),
                false,
            ),
        ];
        // This tag's own draft, seen by `view` though not on the list's page.
        assert_eq!(
            decide(TAG, &ours, &ThisTag::Draft, &list),
            Ok(Decision::Publish {
                stale_drafts: vec![earlier.to_string(), TAG.to_string()]
            })
        );
        // Published already: the stale drafts still go.
        assert_eq!(
            decide(TAG, &ours, &ThisTag::Published(ours.clone()), &list),
            Ok(Decision::AlreadyPublished {
                stale_drafts: vec![earlier.to_string()],
                assets: 1
            })
        );
    }

    #[test]
    fn a_draft_whose_tag_is_not_a_release_tag_never_reaches_the_shell() {
        let ours = assets(&[("receipt-a.json", "aa")]);
        let list = [listed(
            "x\nstale_drafts=main",
            &format!("{TITLE_PREFIX}x"),
            true,
        )];
        assert_eq!(
            decide(TAG, &ours, &ThisTag::Absent, &list),
            Ok(Decision::Publish {
                stale_drafts: vec![]
            })
        );
    }

    #[test]
    fn the_outputs_say_whether_to_publish_which_drafts_go_and_the_title() {
        let decision = Decision::AlreadyPublished {
            stale_drafts: vec!["2026.11.27-fedcba987654".into(), TAG.into()],
            assets: 3,
        };
        assert_eq!(
            github_outputs(TAG, &decision),
            format!("publish=false\nstale_drafts=2026.11.27-fedcba987654 {TAG}\ntitle={TITLE_PREFIX}{TAG}\n")
        );
    }
}
