//! The repository's published release tags, and the plan's rule over them.
//!
//! A release tag is the UTC day and a digest of the release's inputs ([`super::plan::release_tag`]),
//! so a tag that is already published holds exactly these inputs. The previous receipt answers
//! "unchanged" only for the latest release; when these inputs equal an older release of the same
//! day (a later one is the latest, or its receipt does not verify), building again would make a
//! receipt that differs from the published one (a new clock, new run ids), and the ship job's
//! `release existing` rightly refuses to replace an immutable release. [`end_if_published`]
//! ends the plan instead, as "unchanged" does, naming the release that holds the inputs.
//!
//! The tags come from a file: the JSON `gh release list --json tagName,isDraft` prints
//! (cli/cli v2.60.0 pkg/cmd/release/list/http.go, `Release`: an array of objects with those
//! fields), read at the command's edge by [`read_published_tags`]. Drafts are not releases yet
//! (the ship job replaces a stale draft of its own tag), so only `isDraft: false` counts.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{anyhow, Result};
use serde::Deserialize;

use template_formats::model::plan::Action;

/// How the workflow makes the file; the remedy every error names.
pub(crate) const GH_COMMAND: &str =
    "gh release list --exclude-drafts --limit 10000 --json tagName,isDraft > FILE";

/// The largest file read: a listing of ten thousand releases is under a megabyte.
const MAX_BYTES: u64 = 16 << 20;

/// One entry of `gh release list --json tagName,isDraft`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListedRelease {
    tag_name: String,
    is_draft: bool,
}

/// The published (non-draft) tags in `text`, the content of `file` (named in errors).
pub(crate) fn parse_published_tags(text: &[u8], file: &Path) -> Result<BTreeSet<String>> {
    let listed: Vec<ListedRelease> = serde_json::from_slice(text).map_err(|e| {
        anyhow!(
            "{} is not the JSON `gh release list --json tagName,isDraft` prints ({e}): make it \
             with `{GH_COMMAND}`",
            file.display()
        )
    })?;
    let mut tags = BTreeSet::new();
    for release in listed {
        if release.tag_name.is_empty() {
            return Err(anyhow!(
                "{} lists a release with an empty `tagName`: make it with `{GH_COMMAND}`",
                file.display()
            ));
        }
        if !release.is_draft {
            tags.insert(release.tag_name);
        }
    }
    Ok(tags)
}

/// Reads `--published-tags FILE`.
pub(crate) fn read_published_tags(file: &Path) -> Result<BTreeSet<String>> {
    let bytes = template_formats::bounded_read::read_regular(
        file,
        MAX_BYTES,
        "published release tags file",
    )
    .map_err(|e| anyhow!("{e:#}: make the file with `{GH_COMMAND}`"))?;
    parse_published_tags(&bytes, file)
}

/// The plan's decision, unless it releases a tag that is already published: then nothing is
/// built or published, and the reason names the release that holds these inputs.
pub(crate) fn end_if_published(
    (action, reason, tag): (Action, String, Option<String>),
    published: &BTreeSet<String>,
) -> (Action, String, Option<String>) {
    match tag {
        Some(tag) if action == Action::Release && published.contains(&tag) => (
            Action::Unchanged,
            format!(
                "these inputs are already published as release {tag} (the tag is the day and \
                 the inputs' digest), so nothing is built or published"
            ),
            None,
        ),
        tag => (action, reason, tag),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TAG: &str = "2026.11.30-0123456789ab";

    fn tags(json: &str) -> Result<BTreeSet<String>> {
        parse_published_tags(json.as_bytes(), Path::new("published-tags.json"))
    }

    fn release() -> (Action, String, Option<String>) {
        (Action::Release, "due".into(), Some(TAG.into()))
    }

    #[test]
    fn a_published_tag_ends_the_plan_naming_the_release() {
        let published = tags(&format!(
            r#"[{{"tagName":"2026.12.03-aaaaaaaaaaaa","isDraft":false}},
                {{"tagName":"{TAG}","isDraft":false}}]"#
        ))
        .unwrap();
        let (action, reason, tag) = end_if_published(release(), &published);
        assert_eq!(action, Action::Unchanged);
        assert_eq!(tag, None);
        assert!(
            reason.contains(&format!("already published as release {TAG}")),
            "{reason}"
        );
    }

    #[test]
    fn a_draft_of_the_tag_or_another_tag_does_not() {
        let published = tags(&format!(
            r#"[{{"tagName":"{TAG}","isDraft":true}},
                {{"tagName":"2026.11.30-0123456789ac","isDraft":false}}]"#
        ))
        .unwrap();
        assert_eq!(end_if_published(release(), &published), release());
        assert_eq!(end_if_published(release(), &BTreeSet::new()), release());
    }

    #[test]
    fn other_decisions_pass_through() {
        let published = BTreeSet::from([TAG.to_string()]);
        for decision in [
            (Action::NotDue, "not due".to_string(), None),
            (Action::Unchanged, "nothing changed".to_string(), None),
        ] {
            assert_eq!(end_if_published(decision.clone(), &published), decision);
        }
    }

    #[test]
    fn an_empty_repository_lists_nothing() {
        // `gh release list --json ...` prints `[]` when there is no release (list.go returns
        // "no releases found" only without --json).
        assert!(tags("[]").unwrap().is_empty());
    }

    #[test]
    fn a_file_of_another_form_names_the_file_and_the_command() {
        for bad in [
            // `gh release list` without `--json`: its table.
            "Coding agent template\tLatest\t2026.11.30-0123456789ab\t2026-11-30T04:40:00Z\n",
            // `--json tagName` alone: drafts could not be told apart.
            r#"[{"tagName":"2026.11.30-0123456789ab"}]"#,
            // The REST API's form (`gh api repos/OWNER/NAME/releases`).
            r#"[{"tag_name":"2026.11.30-0123456789ab","draft":false}]"#,
            r#"[{"tagName":"","isDraft":false}]"#,
        ] {
            let error = format!("{:#}", tags(bad).unwrap_err());
            assert!(error.contains("published-tags.json"), "{error}");
            assert!(error.contains(GH_COMMAND), "{error}");
        }
    }

    #[test]
    fn a_missing_file_names_the_file_and_the_command() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("published-tags.json");
        let error = format!("{:#}", read_published_tags(&missing).unwrap_err());
        assert!(error.contains(&missing.display().to_string()), "{error}");
        assert!(error.contains(GH_COMMAND), "{error}");
    }
}
