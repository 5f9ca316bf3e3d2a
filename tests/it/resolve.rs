//! End-to-end tests of `cargo xtask resolve`: the real binary and HTTP client against a fixture
//! npm registry on 127.0.0.1.

use std::time::Instant;

use serde_json::{json, Value};

use crate::support::npm_fixture::{
    days_ago, fixture_now, realistic, scratch_root, FixtureRegistry, Scripted,
};
use crate::support::xtask::{xtask, Run};

fn resolve(registry: &FixtureRegistry, locked: &[(&str, &str)]) -> Run {
    let root = scratch_root(locked);
    xtask()
        .args([
            "resolve",
            "--json",
            "--registry",
            &registry.url,
            "--now",
            &fixture_now().to_rfc3339(),
        ])
        .env("XTASK_ROOT", root.path())
        .env("XTASK_RETRY_BASE_MS", "50")
        .run()
}

fn resolved(registry: &FixtureRegistry, locked: &[(&str, &str)]) -> Value {
    resolve(registry, locked).assert_success().json()
}

fn failed(registry: &FixtureRegistry) -> String {
    let out = resolve(registry, &[]);
    out.assert_failure();
    assert!(
        out.stdout.is_empty(),
        "a failed resolve prints no partial result"
    );
    out.stderr_text()
}

fn package<'a>(resolution: &'a Value, name: &str) -> &'a Value {
    resolution["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap()
}

#[test]
fn happy_path_takes_latest_of_every_package() {
    let registry = realistic();
    let r = resolved(&registry, &[]);
    assert_eq!(r["cutoff"], "2026-11-27T12:00:00Z");
    assert_eq!(r["packages"].as_array().unwrap().len(), 6);
    assert_eq!(package(&r, "@openai/codex")["version"], "0.171.0");
    assert_eq!(package(&r, "opencode-ai")["version"], "1.1.0");
    assert_eq!(package(&r, "ws")["held_back"], false);
}

#[test]
fn prerelease_newest_and_codex_platform_prereleases_are_never_chosen() {
    let registry = realistic();
    registry.publish("ws", "2.0.0-rc.1", json!({}), &[], days_ago(5));
    registry.publish(
        "@openai/codex",
        "0.172.0-alpha.3",
        json!({}),
        &[],
        days_ago(5),
    );
    let r = resolved(&registry, &[]);
    assert_eq!(package(&r, "ws")["version"], "1.1.0");
    // The platform prereleases (0.171.0-linux-x64) and a newer alpha are all above 0.171.0
    // or beside it in semver order; only dist-tags.latest decides.
    assert_eq!(package(&r, "@openai/codex")["version"], "0.171.0");
}

#[test]
fn latest_too_young_is_held_back_and_said() {
    let registry = realistic();
    registry.publish(
        "ws",
        "1.2.0",
        json!({}),
        &[],
        fixture_now() - chrono::Duration::hours(3),
    );
    let r = resolved(&registry, &[]);
    let ws = package(&r, "ws");
    assert_eq!(ws["version"], "1.1.0");
    assert_eq!(ws["latest"], "1.2.0");
    assert_eq!(ws["held_back"], true);
    assert!(
        ws["notes"][0]
            .as_str()
            .unwrap()
            .contains("inside the cooldown"),
        "{ws}"
    );
}

#[test]
fn missing_or_future_publish_time_fails_closed() {
    let registry = realistic();
    registry.edit("ws", |p| {
        p["time"].as_object_mut().unwrap().remove("1.1.0");
        p["time"]["1.0.0"] = json!((fixture_now() + chrono::Duration::days(1)).to_rfc3339());
    });
    let err = failed(&registry);
    assert!(err.contains("no eligible version of `ws`"), "{err}");
    assert!(err.contains("1.1.0: publish time unknown"), "{err}");
    assert!(
        err.contains("1.0.0: publish time") && err.contains("in the future"),
        "{err}"
    );
}

#[test]
fn deprecated_latest_is_skipped() {
    let registry = realistic();
    registry.edit("@playwright/cli", |p| {
        p["versions"]["1.1.0"]["deprecated"] = json!("use 1.0.0")
    });
    let r = resolved(&registry, &[]);
    assert_eq!(package(&r, "@playwright/cli")["version"], "1.0.0");
}

#[test]
fn a_version_above_latest_is_ignored() {
    let registry = realistic();
    registry.publish("ws", "9.0.0", json!({}), &[], days_ago(20));
    registry.set_latest("ws", "1.1.0");
    let r = resolved(&registry, &[]);
    assert_eq!(package(&r, "ws")["version"], "1.1.0");
}

#[test]
fn a_missing_arm64_binary_package_holds_the_version_back() {
    let registry = realistic();
    registry.edit("opencode-linux-arm64", |p| {
        p["versions"].as_object_mut().unwrap().remove("1.1.0");
    });
    let r = resolved(&registry, &[]);
    let opencode = package(&r, "opencode-ai");
    assert_eq!(opencode["version"], "1.0.0");
    let reasons = opencode["rejected"][0]["reasons"].to_string();
    assert!(
        reasons.contains("opencode-linux-arm64@1.1.0 (linux arm64) is not published"),
        "{reasons}"
    );
}

#[test]
fn a_platform_package_missing_entirely_holds_every_version() {
    let registry = realistic();
    registry.remove("@anthropic-ai/claude-code-linux-arm64");
    let err = failed(&registry);
    assert!(
        err.contains("no eligible version of `@anthropic-ai/claude-code`"),
        "{err}"
    );
}

#[test]
fn latest_moved_backwards_is_followed_and_flagged() {
    let registry = realistic();
    registry.set_latest("opencode-ai", "1.0.0");
    let out = resolve(&registry, &[("opencode-ai", "1.1.0")]);
    let r = out.assert_success().json();
    let opencode = package(&r, "opencode-ai");
    assert_eq!(opencode["version"], "1.0.0");
    assert_eq!(opencode["rollback"], true);
    assert!(out.stderr_text().contains("ROLLBACK of `opencode-ai`"));
}

#[test]
fn server_errors_are_retried() {
    let registry = realistic();
    registry.script("ws", vec![Scripted::Status(503), Scripted::Status(502)]);
    let r = resolved(&registry, &[]);
    assert_eq!(package(&r, "ws")["version"], "1.1.0");
    assert_eq!(registry.hits("ws").len(), 3);
}

#[test]
fn too_many_requests_honours_retry_after() {
    let registry = realistic();
    registry.script(
        "@playwright/cli",
        vec![Scripted::TooManyRequests {
            retry_after_secs: 2,
        }],
    );
    let start = Instant::now();
    let r = resolved(&registry, &[]);
    assert_eq!(package(&r, "@playwright/cli")["version"], "1.1.0");
    let hits = registry.hits("@playwright/cli");
    assert_eq!(hits.len(), 2);
    assert!(
        (hits[1] - hits[0]).num_milliseconds() >= 1900,
        "waited {:?}",
        hits[1] - hits[0]
    );
    assert!(start.elapsed().as_secs() < 20);
}

#[test]
fn a_truncated_body_is_retried_then_named() {
    let registry = realistic();
    registry.script("ws", vec![Scripted::Truncated; 4]);
    let err = failed(&registry);
    assert!(
        err.contains("packument of `ws`") && err.contains("not valid JSON"),
        "{err}"
    );
    assert!(
        err.contains(&format!("{}ws", registry.url)),
        "names the URL: {err}"
    );
    assert!(err.contains("after 4 attempts"), "{err}");
    assert_eq!(registry.hits("ws").len(), 4);

    let registry = realistic();
    registry.script("ws", vec![Scripted::Truncated]);
    assert_eq!(package(&resolved(&registry, &[]), "ws")["version"], "1.1.0");
}

#[test]
fn a_missing_package_is_a_clear_error() {
    let registry = realistic();
    registry.remove("@earendil-works/pi-coding-agent");
    let err = failed(&registry);
    assert!(
        err.contains("`@earendil-works/pi-coding-agent` does not exist"),
        "{err}"
    );
    assert!(err.contains("@earendil-works%2fpi-coding-agent"), "{err}");
}

#[test]
fn a_name_mismatch_is_refused() {
    let registry = realistic();
    registry.edit("ws", |p| p["name"] = json!("not-ws"));
    let err = failed(&registry);
    assert!(
        err.contains("returned the packument of `not-ws` when asked for `ws`"),
        "{err}"
    );
}
