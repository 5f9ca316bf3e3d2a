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
    let pure_js: BTreeMap<String, String> = [("bufferutil".to_owned(), "4.0.0".to_owned())].into();
    assert_eq!(required_platform_binaries(&pure_js, CPUS), (vec![], vec![]));
}
