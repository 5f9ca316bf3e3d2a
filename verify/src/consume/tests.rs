//! `consume`'s pure decisions: which release, which receipt, what to do with it, the
//! repository's identity as the API gives it, and the outputs.

use super::gh::repository_facts;
use super::*;
use crate::receipt::problem;

fn listed(tag: &str, published: Option<&str>, draft: bool, pre: bool) -> ListedRelease {
    ListedRelease {
        tag_name: tag.into(),
        is_draft: draft,
        is_prerelease: pre,
        created_at: "2026-11-01T00:00:00Z".into(),
        published_at: published.map(Into::into),
    }
}

#[test]
fn releases_are_taken_newest_published_first_without_drafts_or_prereleases() {
    let list = vec![
        listed("a", Some("2026-11-24T04:40:00Z"), false, false),
        listed("c", Some("2026-11-30T04:40:00Z"), false, false),
        listed("draft", None, true, false),
        listed("pre", Some("2026-12-01T00:00:00Z"), false, true),
        listed("b", Some("2026-11-27T04:40:00Z"), false, false),
    ];
    assert_eq!(order_releases(&list, 10), vec!["c", "b", "a"]);
    assert_eq!(order_releases(&list, 2), vec!["c", "b"]);
    assert!(order_releases(&[], 5).is_empty());
}

#[test]
fn a_release_has_one_receipt_or_none_yet() {
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        receipt_asset(&names(&["inventory.json", "sbom-linux-amd64.spdx.json"])),
        ReceiptAsset::Missing
    );
    assert_eq!(
        receipt_asset(&names(&["receipt-t-aa.json", "inventory.json"])),
        ReceiptAsset::One("receipt-t-aa.json".into())
    );
    assert!(matches!(
        receipt_asset(&names(&["receipt-t-aa.json", "receipt-t-bb.json"])),
        ReceiptAsset::Several(_)
    ));
    assert_eq!(
        receipt_asset(&names(&["receipt-/../../etc/x.json"])),
        ReceiptAsset::Missing
    );
}

#[test]
fn only_an_incomplete_receipt_is_passed_over_anything_else_is_refused() {
    let mut v = Verification {
        valid: true,
        complete: Some(true),
        release_tag: Some("t".into()),
        ..Verification::default()
    };
    assert_eq!(judge("t", &v), Judgement::Take);
    // Another release's genuine receipt, uploaded again: a rollback, refused.
    assert!(
        matches!(judge("u", &v), Judgement::Refuse(why) if why.contains("receipt of release t"))
    );
    v.valid = false;
    v.complete = Some(false);
    v.problems = vec![problem("complete", "is false")];
    assert!(matches!(judge("t", &v), Judgement::PassOver(why) if why.contains("incomplete")));
    v.complete = Some(true);
    v.problems = vec![problem("index.digest", "differs")];
    assert!(matches!(judge("t", &v), Judgement::Refuse(why) if why.contains("index.digest")));
    // Unreadable or not a receipt at all: nothing says it is merely incomplete.
    v.complete = None;
    assert!(matches!(judge("t", &v), Judgement::Refuse(_)));
}

#[test]
fn the_identity_is_the_api_s_full_name_not_what_the_caller_typed() {
    let answer = br#"{"full_name": "S0/Template", "default_branch": "trunk", "id": 12, "owner": {"id": 34}}"#;
    let (name, branch, ids) = repository_facts(answer, "s0/template").unwrap();
    assert_eq!((name.as_str(), branch.as_str()), ("S0/Template", "trunk"));
    assert_eq!(ids, (Some("12".into()), Some("34".into())));
    // Without ids (an older answer, the replay's stand-in): none are asked for.
    let (_, _, ids) =
        repository_facts(br#"{"full_name": "s0/t", "default_branch": "main"}"#, "x/y").unwrap();
    assert_eq!(ids, (None, None));
    for bad in [
        r#"{"full_name": "s0", "default_branch": "main"}"#,
        r#"{"full_name": "s0/t/u", "default_branch": "main"}"#,
        r#"{"full_name": "s0/t", "default_branch": ""}"#,
        r#"{"full_name": "s0/t", "default_branch": "a b"}"#,
        r#"{"default_branch": "main"}"#,
    ] {
        assert!(repository_facts(bad.as_bytes(), "s0/t").is_err(), "{bad}");
    }
}

#[test]
fn outputs_keep_the_summary_in_one_heredoc() {
    let c = Consumed {
        attestations: "both",
        changed: true,
        dry_run: false,
        previous_image: "r/x@sha256:1".into(),
        image: "r/x@sha256:2".into(),
        release_tag: "2026.11.30-abc".into(),
        receipt: "/w/receipt.json".into(),
        versions: vec![PackageVersion {
            name: "@openai/codex".into(),
            version: "1.2.3".into(),
            previously_locked: Some("1.2.2".into()),
        }],
        passed_over: vec!["t: EOF_SUMMARY in a reason".into()],
        notes: None,
    };
    let summary = summary_markdown(&c);
    let text = github_outputs(&c, &summary).unwrap();
    assert!(
        text.starts_with("changed=true\nprevious-image=r/x@sha256:1\n"),
        "{text}"
    );
    assert!(text.contains("summary<<EOF_SUMMARY_\n"), "{text}");
    assert!(text.ends_with("\nEOF_SUMMARY_\n"), "{text}");
    assert!(text.contains(
        r#"versions=[{"name":"@openai/codex","version":"1.2.3","previously_locked":"1.2.2"}]"#
    ));
}

/// Fuzz target: gh's JSON about the repository and its releases, as `consume` reads it: the
/// repository's identity (`gh api repos/R`), the release list and a release's asset names
/// (`gh release list`/`view --json`), then the choices made from them.
#[test]
fn fuzz_gh_repository_and_release_json() {
    let seeds: Vec<Vec<u8>> = [
        r#"{"id": 12, "full_name": "S0/Template", "default_branch": "trunk", "owner": {"login": "S0", "id": 34}, "private": false}"#,
        r#"[{"tagName": "2026.11.30-abc", "isDraft": false, "isPrerelease": false, "createdAt": "2026-11-30T05:00:00Z", "publishedAt": "2026-11-30T05:10:00Z"}, {"tagName": "2026.11.27-def", "isDraft": true, "isPrerelease": false, "createdAt": "2026-11-27T05:00:00Z", "publishedAt": null}]"#,
        r#"{"assets": [{"name": "receipt-2026.11.30-abc-0123.json"}, {"name": "template-verify-linux-amd64"}, {"name": "receipt.json.sigstore.json"}]}"#,
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    #[derive(serde::Deserialize)]
    struct View {
        assets: Vec<Asset>,
    }
    #[derive(serde::Deserialize)]
    struct Asset {
        name: String,
    }
    let outcome = crate::fuzz::campaign(
        "gh repository and releases",
        &seeds,
        crate::fuzz::inputs(),
        |bytes| {
            let _ = repository_facts(bytes, "s0/template");
            if let Ok(list) = serde_json::from_slice::<Vec<ListedRelease>>(bytes) {
                let _ = order_releases(&list, 5);
            }
            if let Ok(view) = serde_json::from_slice::<View>(bytes) {
                let names: Vec<String> = view.assets.into_iter().map(|a| a.name).collect();
                let _ = receipt_asset(&names);
            }
        },
    );
    crate::fuzz::assert_clean(&outcome);
}
