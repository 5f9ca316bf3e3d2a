//! A fixture npm registry served over real HTTP on 127.0.0.1, for end-to-end tests of
//! `resolve` and `lock` with the real client (and the real npm).
//!
//! Packuments are plain JSON values the test shapes; tarballs are real gzip'd tar archives
//! with correct sha512 integrity, so `npm ci` can install from the fixture. A per-package
//! script of canned responses (5xx, 429, truncated bodies) is served before the packument.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{HeaderValue, Response, StatusCode, Uri};
use base64::Engine as _;
use chrono::{DateTime, Duration, Utc};
use serde_json::{json, Value};
use sha2::{Digest, Sha512};

/// A canned response served instead of the packument.
#[derive(Clone, Debug)]
pub enum Scripted {
    Status(u16),
    TooManyRequests { retry_after_secs: u64 },
    Truncated,
}

#[derive(Default)]
struct State {
    packuments: BTreeMap<String, Value>,
    tarballs: HashMap<String, Vec<u8>>,
    scripts: HashMap<String, VecDeque<Scripted>>,
    hits: Vec<(String, DateTime<Utc>)>,
}

pub struct FixtureRegistry {
    pub url: String,
    state: Arc<Mutex<State>>,
    _thread: std::thread::JoinHandle<()>,
}

impl FixtureRegistry {
    /// Starts the server on an ephemeral port of 127.0.0.1.
    pub fn start() -> FixtureRegistry {
        let state: Arc<Mutex<State>> = Arc::default();
        let (tx, rx) = std::sync::mpsc::channel();
        let server_state = state.clone();
        let thread = std::thread::spawn(move || {
            super::runtime().block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                tx.send(listener.local_addr().unwrap()).unwrap();
                let app = axum::Router::new().fallback(move |uri: Uri| {
                    let state = server_state.clone();
                    async move { serve(&state, &uri) }
                });
                axum::serve(listener, app).await.unwrap();
            });
        });
        let addr: SocketAddr = rx.recv().unwrap();
        FixtureRegistry {
            url: format!("http://{addr}/"),
            state,
            _thread: thread,
        }
    }

    pub fn set_packument(&self, name: &str, packument: Value) {
        self.state
            .lock()
            .unwrap()
            .packuments
            .insert(name.to_owned(), packument);
    }

    pub fn packument(&self, name: &str) -> Value {
        self.state.lock().unwrap().packuments[name].clone()
    }

    pub fn edit(&self, name: &str, f: impl FnOnce(&mut Value)) {
        let mut state = self.state.lock().unwrap();
        f(state
            .packuments
            .get_mut(name)
            .unwrap_or_else(|| panic!("no fixture packument {name}")));
    }

    pub fn remove(&self, name: &str) {
        self.state.lock().unwrap().packuments.remove(name);
    }

    pub fn script(&self, name: &str, responses: Vec<Scripted>) {
        self.state
            .lock()
            .unwrap()
            .scripts
            .insert(name.to_owned(), responses.into());
    }

    /// Times at which `name`'s packument was requested.
    pub fn hits(&self, name: &str) -> Vec<DateTime<Utc>> {
        self.state
            .lock()
            .unwrap()
            .hits
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, t)| *t)
            .collect()
    }

    /// Adds `version` of `name` with a real tarball made of `files` (paths under `package/`,
    /// package.json included automatically from `meta`), published `published`.
    pub fn publish(
        &self,
        name: &str,
        version: &str,
        meta: Value,
        files: &[(&str, &str)],
        published: DateTime<Utc>,
    ) {
        let mut manifest = meta.clone();
        manifest["name"] = json!(name);
        manifest["version"] = json!(version);
        let tarball = make_tarball(&manifest, files);
        let integrity = format!(
            "sha512-{}",
            base64::engine::general_purpose::STANDARD.encode(Sha512::digest(&tarball))
        );
        let base = name.rsplit('/').next().unwrap();
        let path = format!("{name}/-/{base}-{version}.tgz");
        let mut entry = manifest;
        entry["dist"] = json!({ "integrity": integrity, "tarball": format!("{}{path}", self.url) });
        let mut state = self.state.lock().unwrap();
        state.tarballs.insert(path, tarball);
        let p = state.packuments.entry(name.to_owned()).or_insert_with(
            || json!({ "name": name, "dist-tags": {}, "versions": {}, "time": {} }),
        );
        p["versions"][version] = entry;
        p["time"][version] = json!(published.to_rfc3339());
        let newest_stable = p["dist-tags"]["latest"]
            .as_str()
            .map(|l| semver::Version::parse(l).unwrap());
        let this = semver::Version::parse(version).unwrap();
        if this.pre.is_empty() && newest_stable.is_none_or(|l| this > l) {
            p["dist-tags"]["latest"] = json!(version);
        }
    }

    pub fn set_latest(&self, name: &str, version: &str) {
        self.edit(name, |p| p["dist-tags"]["latest"] = json!(version));
    }
}

fn serve(state: &Mutex<State>, uri: &Uri) -> Response<Body> {
    let raw = uri.path().trim_start_matches('/');
    let path = raw.replace("%2f", "/").replace("%2F", "/");
    let mut state = state.lock().unwrap();
    if let Some(bytes) = state.tarballs.get(&path) {
        return Response::new(Body::from(bytes.clone()));
    }
    state.hits.push((path.clone(), Utc::now()));
    if let Some(next) = state.scripts.get_mut(&path).and_then(VecDeque::pop_front) {
        return match next {
            Scripted::Status(code) => status(code, "scripted failure"),
            Scripted::TooManyRequests { retry_after_secs } => {
                let mut r = status(429, "slow down");
                r.headers_mut()
                    .insert("retry-after", HeaderValue::from(retry_after_secs));
                r
            }
            Scripted::Truncated => {
                let full = state
                    .packuments
                    .get(&path)
                    .map(Value::to_string)
                    .unwrap_or_default();
                Response::new(Body::from(full[..full.len() / 2].to_owned()))
            }
        };
    }
    match state.packuments.get(&path) {
        Some(p) => {
            let mut r = Response::new(Body::from(p.to_string()));
            r.headers_mut()
                .insert("content-type", HeaderValue::from_static("application/json"));
            r
        }
        None => status(404, "{\"error\":\"Not found\"}"),
    }
}

fn status(code: u16, body: &str) -> Response<Body> {
    let mut r = Response::new(Body::from(body.to_owned()));
    *r.status_mut() = StatusCode::from_u16(code).unwrap();
    r
}

/// A real npm tarball: `package/package.json` plus `files`.
pub fn make_tarball(manifest: &Value, files: &[(&str, &str)]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    let package_json = serde_json::to_string_pretty(manifest).unwrap();
    let mut entries: Vec<(&str, &str)> = vec![("package.json", &package_json)];
    entries.extend_from_slice(files);
    for (path, content) in entries {
        let mut header = tar::Header::new_gnu();
        header.set_size(content.len() as u64);
        header.set_mode(if path.starts_with("bin/") {
            0o755
        } else {
            0o644
        });
        header.set_mtime(0);
        header.set_cksum();
        tar.append_data(&mut header, format!("package/{path}"), content.as_bytes())
            .unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap()
}

/// The fixed clock of the fixture world.
pub fn fixture_now() -> DateTime<Utc> {
    "2026-11-29T12:00:00Z".parse().unwrap()
}

pub fn days_ago(days: i64) -> DateTime<Utc> {
    fixture_now() - Duration::days(days)
}

/// A registry shaped like the real one for the template's six packages: each has an old and a
/// current stable version; codex ships its linux binaries as prerelease aliases of itself,
/// claude-code and opencode-ai as separate per-platform packages with install scripts.
pub fn realistic() -> FixtureRegistry {
    let r = FixtureRegistry::start();
    let bin = |cmd: &str| json!({ cmd: format!("bin/{cmd}.js") });
    let script = |cmd: &str| format!("#!/usr/bin/env node\nconsole.log('{cmd}');\n");
    for v in ["0.170.0", "0.171.0"] {
        for cpu in ["x64", "arm64"] {
            r.publish(
                "@openai/codex",
                &format!("{v}-linux-{cpu}"),
                json!({ "os": ["linux"], "cpu": [cpu], "license": "Apache-2.0" }),
                &[],
                days_ago(10),
            );
        }
        r.publish(
            "@openai/codex",
            v,
            json!({ "license": "Apache-2.0", "bin": bin("codex"), "optionalDependencies": {
                "@openai/codex-linux-x64": format!("npm:@openai/codex@{v}-linux-x64"),
                "@openai/codex-linux-arm64": format!("npm:@openai/codex@{v}-linux-arm64"),
            }}),
            &[("bin/codex.js", &script("codex"))],
            days_ago(10),
        );
    }
    for (name, prefix, license, command) in [
        (
            "@anthropic-ai/claude-code",
            "@anthropic-ai/claude-code",
            "SEE LICENSE IN README.md",
            "claude",
        ),
        ("opencode-ai", "opencode", "MIT", "opencode"),
    ] {
        for v in ["1.0.0", "1.1.0"] {
            let mut optional = serde_json::Map::new();
            for cpu in ["x64", "arm64"] {
                let platform = format!("{prefix}-linux-{cpu}");
                let meta = if name == "opencode-ai" {
                    json!({ "os": ["linux"], "cpu": [cpu] })
                } else {
                    json!({ "os": ["linux"], "cpu": [cpu], "license": license })
                };
                r.publish(&platform, v, meta, &[], days_ago(10));
                optional.insert(platform, json!(v));
            }
            let file = format!("bin/{command}.js");
            let body = script(command);
            r.publish(
                name,
                v,
                json!({ "license": license, "bin": bin(command), "optionalDependencies": optional,
                        "scripts": { "postinstall": "node -e 0" } }),
                &[(file.as_str(), body.as_str())],
                days_ago(10),
            );
        }
    }
    for (name, command) in [
        ("@earendil-works/pi-coding-agent", Some("pi")),
        ("@playwright/cli", Some("playwright-cli")),
        ("ws", None),
    ] {
        for v in ["1.0.0", "1.1.0"] {
            let (meta, files) = match command {
                Some(c) => (
                    json!({ "license": "MIT", "bin": bin(c) }),
                    vec![(format!("bin/{c}.js"), script(c))],
                ),
                None => (
                    json!({ "license": "MIT", "main": "index.js" }),
                    vec![("index.js".to_owned(), "module.exports = 1;\n".to_owned())],
                ),
            };
            let files: Vec<(&str, &str)> = files
                .iter()
                .map(|(p, s)| (p.as_str(), s.as_str()))
                .collect();
            r.publish(name, v, meta, &files, days_ago(10));
        }
    }
    r
}

/// A scratch repository root for `XTASK_ROOT`: the committed manifest, optionally a
/// package.json pinning `locked`.
pub fn scratch_root(locked: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = super::scratch_root_with(&["template/manifest.yaml"]);
    if !locked.is_empty() {
        let deps: serde_json::Map<String, Value> = locked
            .iter()
            .map(|(n, v)| ((*n).to_owned(), json!(v)))
            .collect();
        std::fs::write(
            dir.path().join("template/package.json"),
            serde_json::to_string_pretty(
                &json!({ "name": "coding-agent-template", "private": true, "dependencies": deps }),
            )
            .unwrap(),
        )
        .unwrap();
    }
    dir
}
