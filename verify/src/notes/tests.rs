//! The notes of two small releases, rendered: a golden file (tests/fixtures/notes/) holds the
//! whole Markdown, and the first lines are checked one by one.

use std::collections::BTreeMap;

use super::*;
use crate::receipt::tests_support::{digest, manifest, sample};
use template_formats::model::inventory::Inventory;
use template_formats::model::receipt::{
    AssetRecord, DependencyRecord, HarnessStateRecord, LayerRecord, RejectedVersion,
};
use template_formats::model::transcript::{
    Direction, HarnessTranscript, Message, TRANSCRIPTS_SCHEMA_VERSION,
};

const VERSIONS: [(&str, &str); 6] = [
    ("@openai/codex", "0.171.0"),
    ("@anthropic-ai/claude-code", "2.1.332"),
    ("opencode-ai", "1.18.18"),
    ("@earendil-works/pi-coding-agent", "1.6.0"),
    ("@playwright/cli", "0.1.22"),
    ("ws", "8.23.1"),
];

fn layer(seed: &str, size: u64) -> LayerRecord {
    LayerRecord {
        digest: digest(seed),
        size,
    }
}

fn message(kind: &str, fields: &[(&str, &str)]) -> Message {
    Message {
        direction: Direction::Received,
        kind: kind.into(),
        variant: Vec::new(),
        fields: fields
            .iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect(),
    }
}

fn transcripts(codex_extra: bool) -> Transcripts {
    let mut start = vec![("id", "number"), ("result.thread.id", "string")];
    if codex_extra {
        start.push(("result.thread.name", "string|null"));
    }
    Transcripts {
        schema_version: TRANSCRIPTS_SCHEMA_VERSION,
        platform: Platform::LinuxAmd64,
        harnesses: vec![
            HarnessTranscript {
                name: "codex".into(),
                messages: vec![message("thread/start result", &start)],
            },
            HarnessTranscript {
                name: "pi".into(),
                messages: vec![message("response", &[("data.sessionId", "string")])],
            },
        ],
    }
}

/// The previous release: the committed versions, three layers on amd64, transcripts.
fn previous() -> ReleaseFiles {
    let mut r = sample();
    r.release_tag = "2026.11.27-aaaaaaaaaaaa".into();
    r.created_at = "2026-11-27T06:30:00Z".into();
    for p in &mut r.packages {
        let version = VERSIONS.iter().find(|(n, _)| *n == p.name).unwrap().1;
        p.version = version.into();
        p.latest = version.into();
        p.previously_locked = Some(version.into());
    }
    r.dependencies = vec![dependency("undici", "7.1.0"), dependency("zod", "3.25.0")];
    for p in &mut r.platforms {
        p.image_size = 2_260_000_000;
        p.pushed_size = 812_000_000;
        p.manifest_size = 1_200;
        p.layers = Some(vec![
            layer("system", 300_000_000),
            layer("node", 40_000_000),
            layer(&format!("codex 0.171.0 {}", p.platform), 60_000_000),
            layer("others", 411_990_000),
        ]);
        for c in &mut p.smoke.checks {
            c.duration_secs = Some(if c.name.ends_with("turn and resume") {
                9.5
            } else {
                1.5
            });
        }
    }
    let amd64 = &mut r.platforms[0];
    amd64.transcripts = Some(AssetRecord {
        name: "transcripts-linux-amd64.json".into(),
        sha256: "0".repeat(64),
    });
    amd64.harnesses = Some(vec![
        state("codex", &["/workspace/.codex/sessions/#/#/#"]),
        state("pi", &["/workspace/.pi/agent/sessions/--workspace--"]),
    ]);
    files(r, transcripts(false))
}

fn dependency(name: &str, version: &str) -> DependencyRecord {
    DependencyRecord {
        name: name.into(),
        version: version.into(),
        path: format!("node_modules/{name}"),
        integrity: "sha512-AA==".into(),
    }
}

fn state(name: &str, session: &[&str]) -> HarnessStateRecord {
    HarnessStateRecord {
        name: name.into(),
        session: session.iter().map(|s| s.to_string()).collect(),
        written: session.iter().map(|s| s.to_string()).collect(),
    }
}

fn files(receipt: Receipt, t: Transcripts) -> ReleaseFiles {
    let inventory: Inventory =
        serde_json::from_value(crate::receipt::tests_support::inventory_of(&receipt)).unwrap();
    ReleaseFiles {
        transcripts: BTreeMap::from([(Platform::LinuxAmd64, Ok(t))]),
        receipt,
        manifest: Ok(manifest()),
        inventory: Ok(inventory),
    }
}

/// The next release: Codex moved, Claude Code's latest held back in its cooldown, Codex's
/// layer replaced, a field added to Codex's `thread/start` answer, Pi's session moved.
fn next() -> ReleaseFiles {
    let before = previous();
    let mut r = before.receipt.clone();
    r.release_tag = "2026.11.30-0123456789ab".into();
    r.created_at = "2026-11-30T06:30:00Z".into();
    for p in &mut r.packages {
        p.previously_locked = Some(p.version.clone());
        match p.name.as_str() {
            "@openai/codex" => {
                p.version = "0.172.0".into();
                p.latest = "0.172.0".into();
                p.repository = Some("https://github.com/openai/codex".into());
            }
            "@anthropic-ai/claude-code" => {
                p.latest = "2.1.340".into();
                p.held_back = true;
                let why = "published 2026-11-29T10:00:00Z (20h ago), inside the cooldown until \
                           2026-12-01T10:00:00Z";
                p.notes = vec![format!("held back from latest 2.1.340: {why}")];
                p.rejected = vec![RejectedVersion {
                    version: "2.1.340".into(),
                    reasons: vec![why.into()],
                }];
            }
            _ => {}
        }
    }
    if let Some(i) = &mut r.inputs {
        for p in &mut i.packages {
            p.version = r
                .packages
                .iter()
                .find(|q| q.name == p.name)
                .unwrap()
                .version
                .clone();
        }
    }
    r.dependencies = vec![
        dependency("undici", "7.2.0"),
        dependency("zod", "3.25.0"),
        dependency("yaml", "2.8.0"),
    ];
    for p in &mut r.platforms {
        p.image_size = 2_272_400_000;
        p.pushed_size = 816_100_000;
        let layers = p.layers.as_mut().unwrap();
        layers[2] = layer(&format!("codex 0.172.0 {}", p.platform), 64_100_000);
        for c in &mut p.smoke.checks {
            if c.name == "harness codex turn and resume" {
                c.duration_secs = Some(11.2);
            }
        }
    }
    r.platforms[0].harnesses = Some(vec![
        state("codex", &["/workspace/.codex/sessions/#/#/#"]),
        state("pi", &["/workspace/.pi/sessions"]),
    ]);
    files(r, transcripts(true))
}

fn golden(name: &str) -> (std::path::PathBuf, String) {
    let path = crate::receipt::tests_support::repo_root()
        .join("tests/fixtures/notes")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    (path, text)
}

fn assert_golden(name: &str, actual: &str) {
    let (path, expected) = golden(name);
    assert!(
        actual == expected,
        "{} differs from the notes rendered now; if the change is meant, write these notes \
         there:\n{actual}",
        path.display()
    );
}

#[test]
fn the_notes_of_a_release_where_one_cli_changed_lead_with_the_change() {
    let notes = build(&next(), Some(&previous()));
    let text = markdown::render(&notes);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "# Coding agent template 2026.11.30-0123456789ab");
    assert_eq!(
        lines[2],
        "Changes since 2026.11.27-aaaaaaaaaaaa (2026-11-27T06:30:00Z):"
    );
    assert_eq!(
        lines[4],
        "- `@openai/codex` 0.171.0 → 0.172.0 ([release notes](https://github.com/openai/codex/releases))"
    );
    assert_eq!(
        lines[5],
        "- Held back: `@anthropic-ai/claude-code` 2.1.332, not latest 2.1.340: published \
         2026-11-29T10:00:00Z (20h ago), inside the cooldown until 2026-12-01T10:00:00Z"
    );
    // The new layer is 64.1 MB; the host also fetches the manifest and the config
    // (816.1 MB less 816.09 MB of layers).
    assert_eq!(
        lines[6],
        "- linux/amd64: 2.27 GB (+12.4 MB), 816.1 MB compressed (+4.1 MB); a host holding \
         2026.11.27-aaaaaaaaaaaa pulls 64.1 MB (1 of 4 layers new)"
    );
    assert!(lines[8].starts_with("- RESUME RISK: pi keeps its session in /workspace/.pi/sessions (the previous release: /workspace/.pi/agent/sessions/--workspace--)"), "{}", lines[8]);
    assert_eq!(
        lines[9],
        "- Protocol drift (listed below, not failed): `codex` 1 change(s)"
    );
    assert!(text.contains(
        "  - drift: received `thread/start result`: field added `result.thread.name` (string|null)"
    ));
    let platform = &notes.platforms[0];
    assert_eq!(platform.pull_bytes, Some(1_200 + 10_000 + 64_100_000));
    assert_eq!(
        notes.dependencies,
        [
            VersionChange {
                name: "undici".into(),
                before: Some("7.1.0".into()),
                after: Some("7.2.0".into()),
            },
            VersionChange {
                name: "yaml".into(),
                before: None,
                after: Some("2.8.0".into()),
            },
        ]
    );
    assert_golden("one-cli-changed.md", &text);
    // The same receipts give the same notes.
    assert_eq!(markdown::render(&build(&next(), Some(&previous()))), text);
}

#[test]
fn a_first_release_and_a_receipt_without_the_new_records_say_what_they_cannot_show() {
    let notes = build(&previous(), None);
    let text = markdown::render(&notes);
    assert!(
        text.contains("No previous release to compare with"),
        "{text}"
    );
    assert!(text.contains("- `@openai/codex` 0.171.0 (new)"), "{text}");
    assert!(text.contains("a first pull is 812.0 MB"), "{text}");
    // An older receipt: no layers, no timings, no state, no transcripts.
    let old = ReleaseFiles::receipt_only(sample());
    let notes = build(&next(), Some(&old));
    let text = markdown::render(&notes);
    assert!(
        text.contains("the previous receipt does not record the image's layers"),
        "{text}"
    );
    assert!(text.contains("the bytes to pull are not known"), "{text}");
    assert!(
        text.contains("no transcript of the previous release to compare with"),
        "{text}"
    );
}

#[test]
fn an_asset_that_is_not_the_receipt_s_is_named_not_used() {
    let mut new = next();
    new.transcripts.insert(
        Platform::LinuxAmd64,
        Err("`transcripts-linux-amd64.json` has sha256 ab, the receipt records cd".into()),
    );
    let notes = build(&new, Some(&previous()));
    assert!(notes.harnesses.iter().all(|h| h.drift.is_empty()));
    assert!(
        notes
            .unavailable
            .iter()
            .any(|u| u.contains("has sha256 ab")),
        "{:?}",
        notes.unavailable
    );
}

#[test]
fn pull_bytes_count_the_layers_a_host_lacks_once() {
    let now = [layer("a", 1), layer("b", 2), layer("b", 2), layer("c", 3)];
    let then = [layer("a", 1), layer("c", 3)];
    assert_eq!(new_layers(&now, &then), [layer("b", 2)]);
    assert_eq!(
        release_notes_url("https://github.com/openai/codex"),
        "https://github.com/openai/codex/releases"
    );
    assert_eq!(
        release_notes_url("https://gitlab.com/g/p"),
        "https://gitlab.com/g/p"
    );
}

/// A receipt may record what a harness made below the scratch directory (`/tmp/cc-socks`),
/// the smoke evidence now the directory itself: the notes compare them as one, and still
/// report a directory that did change.
#[test]
fn scratch_entries_recorded_either_way_are_not_a_change() {
    let with = |written: &[&str]| HarnessStateRecord {
        name: "claude-code".into(),
        session: vec!["/workspace/.claude/projects/-workspace".into()],
        written: written.iter().map(|w| w.to_string()).collect(),
    };
    let mut before = previous();
    before.receipt.platforms[0].harnesses = Some(vec![with(&[
        "/tmp/cc-socks",
        "/tmp/claude-#",
        "/workspace/.claude/sessions",
    ])]);
    let mut after = next();
    after.receipt.platforms[0].harnesses =
        Some(vec![with(&["/tmp", "/workspace/.claude/sessions"])]);
    let claude = |notes: &ReleaseNotes| {
        notes
            .harnesses
            .iter()
            .find(|h| h.name == "claude-code")
            .cloned()
            .unwrap()
    };
    let note = claude(&build(&after, Some(&before)));
    assert!(note.written_added.is_empty(), "{note:?}");
    assert!(note.written_removed.is_empty(), "{note:?}");

    after.receipt.platforms[0].harnesses = Some(vec![with(&["/tmp", "/workspace/.claude/state"])]);
    let note = claude(&build(&after, Some(&before)));
    assert_eq!(note.written_added, ["/workspace/.claude/state"]);
    assert_eq!(note.written_removed, ["/workspace/.claude/sessions"]);
}
