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

/// A registry signing key, as registry.npmjs.org signs: ECDSA P-256 over SHA-256 of
/// `<name>@<version>:<integrity>`, the DER signature in base64 as `dist.signatures[].sig`, the
/// key named by its OpenSSH fingerprint, `SHA256:` + unpadded base64 of the sha256 of its SSH
/// wire form (what registry.npmjs.org's own key id is; npm/cli
/// `lib/utils/verify-signatures.js` 11.x, pacote `lib/registry.js`); served at `/-/npm/v1/keys`
/// as `{keys: [{expires, keyid, keytype, scheme, key}]}` (npm/registry docs, "Registry
/// signatures").
pub struct SigningKey {
    pair: aws_lc_rs::signature::EcdsaKeyPair,
    pub spki: Vec<u8>,
    pub keyid: String,
}

impl SigningKey {
    pub fn generate() -> SigningKey {
        use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
        let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING).unwrap();
        // The SubjectPublicKeyInfo of a P-256 key: the fixed algorithm header, then the point.
        let mut spki = hex::decode("3059301306072a8648ce3d020106082a8648ce3d030107034200").unwrap();
        spki.extend_from_slice(pair.public_key().as_ref());
        let point = pair.public_key().as_ref();
        let mut wire = Vec::new();
        for part in [&b"ecdsa-sha2-nistp256"[..], b"nistp256", point] {
            wire.extend_from_slice(&(part.len() as u32).to_be_bytes());
            wire.extend_from_slice(part);
        }
        let keyid = format!(
            "SHA256:{}",
            base64::engine::general_purpose::STANDARD_NO_PAD.encode(sha2::Sha256::digest(&wire))
        );
        SigningKey { pair, spki, keyid }
    }

    pub fn sign(&self, message: &str) -> String {
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let sig = self.pair.sign(&rng, message.as_bytes()).unwrap();
        base64::engine::general_purpose::STANDARD.encode(sig.as_ref())
    }

    /// This key in npm's `/-/npm/v1/keys` form (what `--trusted-keys` reads).
    pub fn keys_document(&self) -> Value {
        json!({ "keys": [{
            "expires": null,
            "keyid": self.keyid,
            "keytype": "ecdsa-sha2-nistp256",
            "scheme": "ecdsa-sha2-nistp256",
            "key": base64::engine::general_purpose::STANDARD.encode(&self.spki),
        }]})
    }

    /// The keys document written to a file in `dir`, for `--trusted-keys`.
    pub fn keys_file(&self, dir: &std::path::Path) -> std::path::PathBuf {
        let path = dir.join("trusted-keys.json");
        std::fs::write(&path, self.keys_document().to_string()).unwrap();
        path
    }
}

#[derive(Default)]
struct State {
    /// When set, every version served without `dist.signatures` gets this key's signature
    /// (computed at serve time, so versions published later are signed too), and the key is
    /// served at `/-/npm/v1/keys`.
    signing: Option<Arc<SigningKey>>,
    packuments: BTreeMap<String, Value>,
    tarballs: HashMap<String, Vec<u8>>,
    scripts: HashMap<String, VecDeque<Scripted>>,
    hits: Vec<(String, DateTime<Utc>)>,
    /// `/-/npm/v1/attestations/<name>@<version>` answers, by `<name>@<version>`.
    attestations: HashMap<String, Value>,
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

    /// Signs every version from now on with `key`, as registry.npmjs.org does.
    pub fn sign_with(&self, key: Arc<SigningKey>) {
        self.state.lock().unwrap().signing = Some(key);
    }

    /// Replaces the signatures of one version (a tampered or foreign signature; `[]` strips
    /// them, as a mirror does).
    pub fn set_signatures(&self, name: &str, version: &str, signatures: Value) {
        self.edit(name, |p| {
            p["versions"][version]["dist"]["signatures"] = signatures
        });
    }

    /// Serves `answer` at `/-/npm/v1/attestations/<name>@<version>` and names it in the
    /// version's `dist.attestations`, as registry.npmjs.org does for a version published with
    /// provenance (`{ url, provenance: { predicateType } }`; npm/cli
    /// `lib/utils/verify-signatures.js` reads it so). The scoped name's `/` is encoded, as in
    /// packument URLs.
    pub fn attest(&self, name: &str, version: &str, answer: Value) {
        let url = format!(
            "{}-/npm/v1/attestations/{}@{version}",
            self.url,
            name.replacen('/', "%2f", 1)
        );
        self.state
            .lock()
            .unwrap()
            .attestations
            .insert(format!("{name}@{version}"), answer);
        self.edit(name, |p| {
            p["versions"][version]["dist"]["attestations"] = json!({
                "url": url,
                "provenance": { "predicateType": "https://slsa.dev/provenance/v1" },
            })
        });
    }

    /// The sha512 of a version's tarball, as its packument's integrity states it.
    pub fn sha512(&self, name: &str, version: &str) -> Vec<u8> {
        let integrity = self.packument(name)["versions"][version]["dist"]["integrity"]
            .as_str()
            .unwrap()
            .to_owned();
        base64::engine::general_purpose::STANDARD
            .decode(integrity.strip_prefix("sha512-").unwrap())
            .unwrap()
    }

    /// The version's publish time, as its packument states it.
    pub fn published(&self, name: &str, version: &str) -> DateTime<Utc> {
        self.packument(name)["time"][version]
            .as_str()
            .unwrap()
            .parse()
            .unwrap()
    }

    /// Provenance of `name@version` built by `run`, from `standin`, logged a minute after the
    /// registry's publish time (as a CI publish is), served as the registry serves it.
    pub fn attest_provenance(
        &self,
        standin: &super::sigstore_standin::SigstoreStandIn,
        name: &str,
        version: &str,
        run: &super::sigstore_standin::GithubRun,
    ) {
        let logged = self.published(name, version) + Duration::minutes(1);
        let answer =
            standin.npm_attestations(name, version, &self.sha512(name, version), run, logged);
        self.attest(name, version, answer);
    }

    /// Takes `dist.attestations` away from a version (what a proxy stripping it serves).
    pub fn drop_attestations(&self, name: &str, version: &str) {
        self.edit(name, |p| {
            p["versions"][version]["dist"]
                .as_object_mut()
                .unwrap()
                .remove("attestations");
        });
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
    if let Some(version) = path.strip_prefix("-/npm/v1/attestations/") {
        return match state.attestations.get(version) {
            Some(answer) => Response::new(Body::from(answer.to_string())),
            None => status(404, "{\"error\":\"Not found\"}"),
        };
    }
    if path == "-/npm/v1/keys" {
        return match &state.signing {
            Some(key) => Response::new(Body::from(key.keys_document().to_string())),
            None => status(404, "{\"error\":\"Not found\"}"),
        };
    }
    match state.packuments.get(&path) {
        Some(p) => {
            let mut p = p.clone();
            if let Some(key) = &state.signing {
                sign_versions(&mut p, key);
            }
            let mut r = Response::new(Body::from(p.to_string()));
            r.headers_mut()
                .insert("content-type", HeaderValue::from_static("application/json"));
            r
        }
        None => status(404, "{\"error\":\"Not found\"}"),
    }
}

/// Adds the registry's signature to every version that has none (a test's own, tampered or
/// stripped signatures stay as it set them).
fn sign_versions(packument: &mut Value, key: &SigningKey) {
    let name = packument["name"].as_str().unwrap_or_default().to_owned();
    let Some(versions) = packument["versions"].as_object_mut() else {
        return;
    };
    for (version, meta) in versions.iter_mut() {
        let Some(integrity) = meta["dist"]["integrity"].as_str().map(str::to_owned) else {
            continue;
        };
        if meta["dist"].get("signatures").is_none() {
            meta["dist"]["signatures"] = json!([{
                "keyid": key.keyid,
                "sig": key.sign(&format!("{name}@{version}:{integrity}")),
            }]);
        }
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
            let (postinstall, install_file, install_body) = fixture_install_script(name);
            r.publish(
                name,
                v,
                json!({ "license": license, "bin": bin(command), "optionalDependencies": optional,
                        "scripts": { "postinstall": postinstall } }),
                &[(file.as_str(), body.as_str()), (install_file, install_body)],
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

/// The install script the fixture's claude-code and opencode-ai run (every version the same):
/// (postinstall command, the file it runs, that file's content). Each announces itself and
/// changes nothing.
pub fn fixture_install_script(name: &str) -> (&'static str, &'static str, &'static str) {
    match name {
        "@anthropic-ai/claude-code" => (
            "node install.cjs",
            "install.cjs",
            "#!/usr/bin/env node\nconsole.log('the fixture claude-code install script');\n",
        ),
        "opencode-ai" => (
            "node ./postinstall.mjs",
            "postinstall.mjs",
            "#!/usr/bin/env node\nconsole.log('the fixture opencode postinstall');\n",
        ),
        other => panic!("the fixture gives {other} no install script"),
    }
}

/// The committed manifest with `install_scripts_allowed` acknowledging the fixture's install
/// scripts instead of the real packages' (whose files the fixture does not carry).
pub fn fixture_manifest() -> String {
    use sha2::Digest as _;
    let committed =
        std::fs::read_to_string(super::checkout_path("template/manifest.yaml")).unwrap();
    let start = committed
        .find("\ninstall_scripts_allowed:\n")
        .expect("the manifest allows install scripts")
        + 1;
    let end = start
        + committed[start..]
            .find("\n\n")
            .expect("a blank line after install_scripts_allowed");
    let mut block = String::from("install_scripts_allowed:\n");
    for name in ["@anthropic-ai/claude-code", "opencode-ai"] {
        let (command, file, body) = fixture_install_script(name);
        let digest = hex::encode(sha2::Sha256::digest(body.as_bytes()));
        block.push_str(&format!(
            "  \"{name}\":\n    postinstall: {command}\n    files:\n      {file}: {digest}\n"
        ));
    }
    format!(
        "{}{}{}",
        &committed[..start],
        block.trim_end(),
        &committed[end..]
    )
}

/// A scratch repository root for `XTASK_ROOT`: the committed manifest (acknowledging the
/// fixture's install scripts, [`fixture_manifest`]), optionally a package.json pinning
/// `locked`.
pub fn scratch_root(locked: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = super::scratch_root_with(&["template/manifest.yaml"]);
    std::fs::write(
        dir.path().join("template/manifest.yaml"),
        fixture_manifest(),
    )
    .unwrap();
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
