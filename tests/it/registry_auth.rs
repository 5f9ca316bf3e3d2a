//! `cargo xtask publish` against a registry shaped like ghcr.io, so that the first real
//! release is not the first time the authentication code talks to anything.
//!
//! The stand-in, started per test from Debian packages and this file:
//! - Debian's `docker-registry` (distribution 2.8) with `auth: token`, serving TLS with a
//!   certificate from a CA this test generates (rcgen);
//! - a token service (axum over TLS) that checks Basic credentials, grants only the actions
//!   its policy allows for the scopes it is asked for, and signs ES256 JWTs whose `x5c`
//!   header carries a signing certificate issued by the same CA (distribution verifies that
//!   chain against `rootcertbundle`); it can issue tokens that expire within seconds;
//! - a TLS proxy in front of the registry that answers `GET /v2/` with ghcr.io's placeholder
//!   scope in its challenge, and can hold or fail (503) blob uploads; it can also answer as
//!   ghcr.io does on the first push to a package that does not exist yet (reads refused with
//!   403 until a manifest creates it) and refuse writes that race that creation (403 `denied`
//!   a bounded number of times), each with the public report it imitates cited at
//!   [`Faults`].
//!
//! One test swaps token auth for htpasswd (Basic), as a self-hosted registry has it.
//!
//! The tool trusts the test CA only through `SSL_CERT_FILE` (the system trust store
//! mechanism reqwest's verifier reads): no insecure flags. Ports are 5400-5499 on 127.0.0.1,
//! storage a temporary directory; the registry is killed when the test's stand-in drops.
//!
//! These tests need the Docker engine (images are loaded into it, as `publish` exports from
//! it) and /usr/bin/docker-registry: run scripts/setup-host.sh. They never skip.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_lc_rs::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use serde_json::{json, Value};

use crate::support::docker::{heavy_docker, light_docker, load_tiny_image, remove_images};
use crate::support::registry::Registry;
use crate::support::xtask::{xtask, Run, Xtask};
use crate::support::{sha256_hex, unique};

const SERVICE: &str = "xtask-test-registry";
const ISSUER: &str = "xtask-test-token-issuer";
const USERNAME: &str = "release-bot";
const PASSWORD: &str = "correct-horse-battery-staple-9f3e";

fn b64url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// Ports 5400-5499 on loopback are this test's (others use 5000-5099).
fn free_port() -> u16 {
    static NEXT: AtomicU16 = AtomicU16::new(5400);
    loop {
        let port = NEXT.fetch_add(1, Ordering::SeqCst);
        assert!(port < 5500, "no free port left in 127.0.0.1:5400-5499");
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

fn bind_free() -> std::net::TcpListener {
    loop {
        if let Ok(listener) = std::net::TcpListener::bind(("127.0.0.1", free_port())) {
            listener.set_nonblocking(true).unwrap();
            return listener;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Keys and certificates.

struct Pki {
    ca_pem: String,
    /// `127.0.0.1` server certificate and key (PKCS#8) for the registry, token service, proxy.
    server_cert_pem: String,
    server_cert_der: Vec<u8>,
    server_key_pem: String,
    server_key_der: Vec<u8>,
    /// The token signing certificate (in every JWT's `x5c`) and its key.
    signing_cert_der: Vec<u8>,
    signing_key: EcdsaKeyPair,
}

fn pki() -> Pki {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    };
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "xtask test CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);

    let server_key = KeyPair::generate().unwrap();
    let mut server_params = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    server_params
        .distinguished_name
        .push(DnType::CommonName, "127.0.0.1");
    let server_cert = server_params.signed_by(&server_key, &issuer).unwrap();

    let signing_key = KeyPair::generate().unwrap();
    let mut signing_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    signing_params
        .distinguished_name
        .push(DnType::CommonName, "xtask test token signer");
    let signing_cert = signing_params.signed_by(&signing_key, &issuer).unwrap();

    Pki {
        ca_pem: ca_cert.pem(),
        server_cert_pem: server_cert.pem(),
        server_cert_der: server_cert.der().to_vec(),
        server_key_pem: server_key.serialize_pem(),
        server_key_der: server_key.serialize_der(),
        signing_cert_der: signing_cert.der().to_vec(),
        signing_key: EcdsaKeyPair::from_pkcs8(
            &ECDSA_P256_SHA256_FIXED_SIGNING,
            &signing_key.serialize_der(),
        )
        .unwrap(),
    }
}

fn tls_config(pki: &Pki) -> Arc<rustls::ServerConfig> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![rustls::pki_types::CertificateDer::from(
                pki.server_cert_der.clone(),
            )],
            rustls::pki_types::PrivateKeyDer::Pkcs8(pki.server_key_der.clone().into()),
        )
        .unwrap();
    Arc::new(config)
}

/// Serves `app` over TLS (HTTP/1.1) on `listener`.
async fn serve_tls(
    listener: std::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: axum::Router,
) {
    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let acceptor = acceptor.clone();
        let app = app.clone();
        tokio::spawn(async move {
            let Ok(stream) = acceptor.accept(tcp).await else {
                return;
            };
            let service = hyper_util::service::TowerToHyperService::new(app);
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

// ---------------------------------------------------------------------------------------------
// The token service.

/// One token request as the service saw it.
#[derive(Debug, Clone)]
struct TokenRequest {
    authenticated: bool,
    scopes: Vec<String>,
    granted: Vec<String>,
}

struct TokenService {
    signing_cert_der: Vec<u8>,
    signing_key: EcdsaKeyPair,
    /// Whether the account may push (pull is always granted to it).
    may_push: bool,
    /// Seconds a token is accepted by the registry.
    lifetime: i64,
    requests: Mutex<Vec<TokenRequest>>,
    issued: Mutex<Vec<String>>,
}

impl TokenService {
    /// A signed token granting `access` (`repository:name:actions` strings).
    fn mint(&self, access: &[String]) -> String {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let header = json!({
            "typ": "JWT",
            "alg": "ES256",
            "x5c": [base64::engine::general_purpose::STANDARD.encode(&self.signing_cert_der)],
        });
        let access: Vec<Value> = access
            .iter()
            .filter_map(|scope| {
                let mut parts = scope.splitn(3, ':');
                let (kind, name, actions) = (parts.next()?, parts.next()?, parts.next()?);
                Some(json!({"type": kind, "name": name, "actions": actions.split(',').collect::<Vec<_>>()}))
            })
            .collect();
        // distribution accepts a token until 60 s (its leeway) after `exp`.
        let claims = json!({
            "iss": ISSUER,
            "sub": USERNAME,
            "aud": SERVICE,
            "exp": now + self.lifetime - 60,
            "nbf": now - 1,
            "iat": now,
            "jti": unique("jti"),
            "access": access,
        });
        let input = format!(
            "{}.{}",
            b64url(header.to_string().as_bytes()),
            b64url(claims.to_string().as_bytes())
        );
        let signature = self
            .signing_key
            .sign(&aws_lc_rs::rand::SystemRandom::new(), input.as_bytes())
            .unwrap();
        let token = format!("{input}.{}", b64url(signature.as_ref()));
        self.issued.lock().unwrap().push(token.clone());
        token
    }

    fn requests(&self) -> Vec<TokenRequest> {
        self.requests.lock().unwrap().clone()
    }

    fn issued(&self) -> Vec<String> {
        self.issued.lock().unwrap().clone()
    }
}

/// `GET /token?service=…&scope=…`: distribution's token auth, with Basic credentials.
async fn token_endpoint(
    State(service): State<Arc<TokenService>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let url = reqwest::Url::parse(&format!(
        "https://token.invalid/?{}",
        query.unwrap_or_default()
    ))
    .unwrap();
    let scopes: Vec<String> = url
        .query_pairs()
        .filter(|(k, _)| k == "scope")
        .flat_map(|(_, v)| v.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .collect();
    let asked_service = url
        .query_pairs()
        .find(|(k, _)| k == "service")
        .map(|(_, v)| v.into_owned());
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{USERNAME}:{PASSWORD}"))
    );
    let authenticated =
        headers.get("authorization").and_then(|v| v.to_str().ok()) == Some(expected.as_str());
    let mut record = TokenRequest {
        authenticated,
        scopes: scopes.clone(),
        granted: Vec::new(),
    };
    if !authenticated || asked_service.as_deref() != Some(SERVICE) {
        service.requests.lock().unwrap().push(record);
        return (
            StatusCode::UNAUTHORIZED,
            [(
                "www-authenticate",
                "Basic realm=\"xtask test token service\"",
            )],
            axum::Json(
                json!({"errors": [{"code": "UNAUTHORIZED", "message": "authentication required"}]}),
            ),
        )
            .into_response();
    }
    // Grant what was asked and is allowed: pull always, push only when the policy says.
    for scope in &scopes {
        let mut parts = scope.splitn(3, ':');
        let (Some("repository"), Some(name), Some(actions)) =
            (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let allowed: Vec<&str> = actions
            .split(',')
            .filter(|a| *a == "pull" || (*a == "push" && service.may_push))
            .collect();
        if !allowed.is_empty() {
            record
                .granted
                .push(format!("repository:{name}:{}", allowed.join(",")));
        }
    }
    let token = service.mint(&record.granted);
    service.requests.lock().unwrap().push(record);
    axum::Json(json!({"token": token, "access_token": token, "expires_in": service.lifetime}))
        .into_response()
}

// ---------------------------------------------------------------------------------------------
// The fault-injecting proxy.

/// What ghcr.io puts in the scope of its `GET /v2/` challenge.
const PLACEHOLDER_SCOPE: &str = "repository:user/image:pull";

/// How long the proxy holds a blob upload: longer than a short-lived token lives.
const HOLD: Duration = Duration::from_secs(3);

/// ghcr.io's answer to a read of a package that does not exist yet: 403 with this body.
/// run-ai/fake-gpu-operator#244 saw `denied: permission_denied: read_package` when a first
/// push read the package it was creating; RightNow-AI/openfang#12 shows the body, for a
/// package the token may not read: `{"errors":[{"code":"DENIED","message":
/// "permission_denied: read_package"}]}`. A HEAD answer has the status alone (a HEAD of a
/// blob answered `403 Forbidden` on a first push: ryokun6/ryos#1156).
const READ_PACKAGE_DENIED: &str =
    r#"{"errors":[{"code":"DENIED","message":"permission_denied: read_package"}]}"#;

/// ghcr.io's answer to a manifest PUT that raced another push of the same package, and that
/// the same PUT did not get when sent again (goreleaser/goreleaser#1977: `failed to put
/// manifest ...: denied`, gone with one push at a time).
const RACE_DENIED: &str = r#"{"errors":[{"code":"DENIED","message":"denied"}]}"#;

#[derive(Default)]
struct Faults {
    /// ghcr.io's first push: until a manifest of a repository has been stored (assumed to be
    /// what creates the package), HEAD and GET of its blobs and manifests answer 403
    /// ([`READ_PACKAGE_DENIED`]); the registry behind (distribution 2.8) would answer 404.
    first_push: std::sync::atomic::AtomicBool,
    /// Repositories a manifest PUT has created (for `first_push`).
    created: Mutex<BTreeSet<String>>,
    /// Reads refused because the repository was not created yet.
    denied_reads: AtomicU32,
    /// Answer this many upload starts (`POST .../blobs/uploads/`) and manifest PUTs with 403
    /// ([`RACE_DENIED`]) without forwarding them, as a write racing another push's creation
    /// of the package.
    racing_writes: AtomicU32,
    injected_races: AtomicU32,
    /// Answer every cross-repository mount (`POST .../blobs/uploads/?mount=...&from=...`)
    /// with 403, as registries do that refuse a mount whose source the account may not read
    /// (containerd/containerd#14086), where distribution starts a plain upload (202).
    refuse_mounts: std::sync::atomic::AtomicBool,
    refused_mounts: AtomicU32,
    /// Answer this many blob upload PUTs with 503 without forwarding them.
    fail_blob_puts: AtomicU32,
    /// Hold this many blob upload PUTs for [`HOLD`] before forwarding them.
    hold_blob_puts: AtomicU32,
    injected_failures: AtomicU32,
    /// 401 answers from the registry that said the token was invalid (expired).
    invalid_token_answers: AtomicU32,
    /// Every request forwarded: `METHOD path` (query dropped).
    seen: Mutex<Vec<String>>,
}

impl Faults {
    /// How many `method` requests to a path containing `path` were forwarded.
    fn count(&self, method: &str, path: &str) -> usize {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.starts_with(method) && r.contains(path))
            .count()
    }
}

struct Proxy {
    faults: Arc<Faults>,
    upstream: String,
    public: String,
    http: reqwest::Client,
}

async fn proxy_endpoint(
    State(proxy): State<Arc<Proxy>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    let is_blob_put = method == Method::PUT && path.contains("/blobs/uploads/");
    let repository = repository_of(&path);
    let is_read = (method == Method::HEAD || method == Method::GET)
        && (path.contains("/blobs/sha256:") || path.contains("/manifests/"));
    if let Some(repository) = repository.as_deref().filter(|_| is_read) {
        let not_created = !proxy.faults.created.lock().unwrap().contains(repository);
        if proxy.faults.first_push.load(Ordering::SeqCst) && not_created {
            proxy.faults.denied_reads.fetch_add(1, Ordering::SeqCst);
            proxy
                .faults
                .seen
                .lock()
                .unwrap()
                .push(format!("{method} {path} (denied: not created)"));
            return (
                StatusCode::FORBIDDEN,
                [("content-type", "application/json")],
                READ_PACKAGE_DENIED,
            )
                .into_response();
        }
    }
    let is_mount = method == Method::POST
        && uri
            .query()
            .is_some_and(|q| q.contains("mount=") && q.contains("from="));
    if is_mount && proxy.faults.refuse_mounts.load(Ordering::SeqCst) {
        proxy.faults.refused_mounts.fetch_add(1, Ordering::SeqCst);
        return (
            StatusCode::FORBIDDEN,
            [("content-type", "application/json")],
            READ_PACKAGE_DENIED,
        )
            .into_response();
    }
    let is_write = (method == Method::POST && path.ends_with("/blobs/uploads/"))
        || (method == Method::PUT && path.contains("/manifests/"));
    if is_write
        && proxy
            .faults
            .racing_writes
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    {
        proxy.faults.injected_races.fetch_add(1, Ordering::SeqCst);
        return (
            StatusCode::FORBIDDEN,
            [("content-type", "application/json")],
            RACE_DENIED,
        )
            .into_response();
    }
    let is_manifest_put = method == Method::PUT && path.contains("/manifests/");
    proxy
        .faults
        .seen
        .lock()
        .unwrap()
        .push(format!("{method} {path}"));
    if is_blob_put {
        let hold = proxy
            .faults
            .hold_blob_puts
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if hold {
            tokio::time::sleep(HOLD).await;
        }
        let fail = proxy
            .faults
            .fail_blob_puts
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if fail {
            proxy
                .faults
                .injected_failures
                .fetch_add(1, Ordering::SeqCst);
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                "injected by the test proxy",
            )
                .into_response();
        }
    }
    let url = format!(
        "https://{}{}",
        proxy.upstream,
        uri.path_and_query().map_or("/", |p| p.as_str())
    );
    let mut request = proxy.http.request(method, &url).body(body);
    for (name, value) in &headers {
        if name != "host" && name != "content-length" {
            request = request.header(name, value);
        }
    }
    let upstream = match request.send().await {
        Ok(response) => response,
        Err(e) => return (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    let status = upstream.status();
    if is_manifest_put && status.is_success() {
        // Assumed: the first stored manifest, even by digest, creates the ghcr.io package
        // (the reports show a push creating it, not which request does; if only a tag did,
        // the legs' read-back would meet 403 too, and this stand-in would not show it).
        if let Some(repository) = repository {
            proxy.faults.created.lock().unwrap().insert(repository);
        }
    }
    let mut response = Response::builder().status(status.as_u16());
    for (name, value) in upstream.headers() {
        if matches!(
            name.as_str(),
            "content-length" | "transfer-encoding" | "connection"
        ) {
            continue;
        }
        let value = value.to_str().unwrap_or("");
        if name == "www-authenticate" && value.contains("invalid_token") {
            proxy
                .faults
                .invalid_token_answers
                .fetch_add(1, Ordering::SeqCst);
        }
        let mut value = value.replace(&proxy.upstream, &proxy.public);
        // ghcr.io's shape: `GET /v2/` challenges with a placeholder scope; a client that
        // caches a token for it cannot push.
        if name == "www-authenticate" && path == "/v2/" {
            value.push_str(&format!(",scope=\"{PLACEHOLDER_SCOPE}\""));
        }
        response = response.header(name.as_str(), value);
    }
    let body = upstream.bytes().await.unwrap_or_default();
    response.body(axum::body::Body::from(body)).unwrap()
}

/// `<name>` of a `/v2/<name>/blobs/...` or `/v2/<name>/manifests/...` path.
fn repository_of(path: &str) -> Option<String> {
    let rest = path.strip_prefix("/v2/")?;
    let end = ["/blobs/", "/manifests/"]
        .iter()
        .filter_map(|marker| rest.rfind(marker))
        .min()?;
    Some(rest[..end].to_string())
}

// ---------------------------------------------------------------------------------------------
// The stand-in.

struct Policy {
    may_push: bool,
    token_lifetime_secs: i64,
    /// Basic auth from an htpasswd file (a self-hosted registry) instead of tokens.
    htpasswd: bool,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            may_push: true,
            token_lifetime_secs: 300,
            htpasswd: false,
        }
    }
}

struct StandIn {
    dir: tempfile::TempDir,
    registry: Child,
    registry_port: u16,
    proxy_port: u16,
    ca_file: PathBuf,
    tokens: Arc<TokenService>,
    faults: Arc<Faults>,
    _runtime: tokio::runtime::Runtime,
}

impl Drop for StandIn {
    fn drop(&mut self) {
        let _ = self.registry.kill();
        let _ = self.registry.wait();
    }
}

impl StandIn {
    fn start(policy: Policy) -> StandIn {
        assert!(
            Path::new("/usr/bin/docker-registry").exists(),
            "/usr/bin/docker-registry is missing: run scripts/setup-host.sh"
        );
        let dir = tempfile::Builder::new()
            .prefix("xtask-registry-auth-")
            .tempdir()
            .unwrap();
        let pki = pki();
        let ca_file = dir.path().join("ca.pem");
        std::fs::write(&ca_file, &pki.ca_pem).unwrap();
        std::fs::write(dir.path().join("server.pem"), &pki.server_cert_pem).unwrap();
        std::fs::write(dir.path().join("server.key"), &pki.server_key_pem).unwrap();
        let tls = tls_config(&pki);

        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let token_listener = bind_free();
        let token_port = token_listener.local_addr().unwrap().port();
        let tokens = Arc::new(TokenService {
            signing_cert_der: pki.signing_cert_der,
            signing_key: pki.signing_key,
            may_push: policy.may_push,
            lifetime: policy.token_lifetime_secs,
            requests: Mutex::new(Vec::new()),
            issued: Mutex::new(Vec::new()),
        });
        let token_app = axum::Router::new()
            .route("/token", axum::routing::get(token_endpoint))
            .with_state(tokens.clone());
        runtime.spawn(serve_tls(token_listener, tls.clone(), token_app));

        let registry_port = free_port();
        let storage = dir.path().join("storage");
        let auth = if policy.htpasswd {
            let hash = bcrypt::hash(PASSWORD, 4).unwrap();
            std::fs::write(dir.path().join("htpasswd"), format!("{USERNAME}:{hash}\n")).unwrap();
            format!(
                "auth:\n  htpasswd:\n    realm: xtask-test\n    path: {}/htpasswd\n",
                dir.path().display()
            )
        } else {
            format!(
                "auth:\n  token:\n    realm: https://127.0.0.1:{token_port}/token\n    \
                 service: {SERVICE}\n    issuer: {ISSUER}\n    rootcertbundle: {}/ca.pem\n",
                dir.path().display()
            )
        };
        let config = format!(
            "version: 0.1
log:
  level: info
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: {storage}
  delete:
    enabled: false
http:
  addr: 127.0.0.1:{registry_port}
  tls:
    certificate: {dir}/server.pem
    key: {dir}/server.key
{auth}",
            storage = storage.display(),
            dir = dir.path().display(),
        );
        std::fs::write(dir.path().join("config.yml"), config).unwrap();
        let log = std::fs::File::create(dir.path().join("registry.log")).unwrap();
        let registry = Command::new("/usr/bin/docker-registry")
            .arg("serve")
            .arg(dir.path().join("config.yml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("cannot start /usr/bin/docker-registry");

        let proxy_listener = bind_free();
        let proxy_port = proxy_listener.local_addr().unwrap().port();
        let faults = Arc::new(Faults::default());
        let proxy = Arc::new(Proxy {
            faults: faults.clone(),
            upstream: format!("127.0.0.1:{registry_port}"),
            public: format!("127.0.0.1:{proxy_port}"),
            http: reqwest::Client::builder()
                .no_proxy()
                .tls_certs_only([reqwest::Certificate::from_pem(pki.ca_pem.as_bytes()).unwrap()])
                .build()
                .unwrap(),
        });
        let proxy_app = axum::Router::new()
            .fallback(proxy_endpoint)
            .layer(axum::extract::DefaultBodyLimit::disable())
            .with_state(proxy);
        runtime.spawn(serve_tls(proxy_listener, tls, proxy_app));

        let mut stand_in = StandIn {
            dir,
            registry,
            registry_port,
            proxy_port,
            ca_file,
            tokens,
            faults,
            _runtime: runtime,
        };
        stand_in.wait_until_up();
        stand_in
    }

    fn wait_until_up(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.registry.try_wait() {
                panic!(
                    "docker-registry exited with {status}: {}",
                    std::fs::read_to_string(self.dir.path().join("registry.log"))
                        .unwrap_or_default()
                );
            }
            if std::net::TcpStream::connect(("127.0.0.1", self.registry_port)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "docker-registry did not listen on 127.0.0.1:{}",
            self.registry_port
        );
    }

    /// `https://127.0.0.1:PORT` of the registry itself.
    fn direct(&self) -> String {
        format!("https://127.0.0.1:{}", self.registry_port)
    }

    /// `https://127.0.0.1:PORT` of the fault-injecting proxy in front of it.
    fn proxied(&self) -> String {
        format!("https://127.0.0.1:{}", self.proxy_port)
    }

    /// `GET /v2/<repo>/manifests/<reference>` with a token for `repository:<repo>:pull`:
    /// (status, sha256 of the body).
    fn manifest(&self, repository: &str, reference: &str) -> (u16, String) {
        let token = self.tokens.mint(&[format!("repository:{repository}:pull")]);
        let ca = std::fs::read(&self.ca_file).unwrap();
        Registry::tls(self.direct(), ca).get_manifest(repository, reference, Some(&token))
    }
}

// ---------------------------------------------------------------------------------------------
// Images and the tool.

/// Images a test loaded into the shared engine (platform, tag); removed when the test ends.
struct LoadedImages {
    tags: Vec<(String, String)>,
}

impl LoadedImages {
    fn load(&mut self, platform: &str, tag: String, content: &str) {
        load_tiny_image(&tag, platform.trim_start_matches("linux/"), content);
        self.tags.push((platform.to_string(), tag));
    }

    /// `--image` of the amd64 image alone, `--partial`: a one-platform publish.
    fn amd64_partial(&self) -> Vec<String> {
        [image_args(&self.tags[..1]), vec!["--partial".into()]].concat()
    }
}

impl Drop for LoadedImages {
    fn drop(&mut self) {
        let tags: Vec<String> = self.tags.iter().map(|(_, tag)| tag.clone()).collect();
        remove_images(&tags);
    }
}

/// Two small images (amd64 and arm64, different content) loaded for this test.
fn test_images(name: &str) -> LoadedImages {
    let salt = unique(name);
    let tag = |arch: &str| format!("xtask-test-auth:{arch}-{}", sha256_hex(salt.as_bytes()));
    let mut images = LoadedImages { tags: Vec::new() };
    images.load("linux/amd64", tag("amd64"), &format!("amd64 {salt}"));
    images.load("linux/arm64", tag("arm64"), &format!("arm64 {salt}"));
    images
}

fn image_args(images: &[(String, String)]) -> Vec<String> {
    images
        .iter()
        .flat_map(|(platform, image)| ["--image".to_string(), format!("{platform}={image}")])
        .collect()
}

/// `xtask publish --json` to `registry`, trusting the test CA through SSL_CERT_FILE, with
/// the developer's own docker config out of the way (the runner already drops `XTASK_*`).
/// The amd64 image alone, with the right credentials, through the fault-injecting proxy:
/// the publish each fault test disturbs.
fn publish_amd64(stand_in: &StandIn, repository: &str, images: &LoadedImages) -> Run {
    publish(
        stand_in,
        &stand_in.proxied(),
        repository,
        &images.amd64_partial(),
        &CREDENTIALS,
    )
}

fn publish(
    stand_in: &StandIn,
    registry: &str,
    repository: &str,
    args: &[String],
    env: &[(&str, &str)],
) -> Run {
    let empty_docker_config = stand_in.dir.path().join("no-docker-config");
    std::fs::create_dir_all(&empty_docker_config).unwrap();
    xtask()
        .env_remove("SSL_CERT_DIR")
        .env("SSL_CERT_FILE", &stand_in.ca_file)
        .env("DOCKER_CONFIG", &empty_docker_config)
        .env("XTASK_PROGRESS_INTERVAL_SECS", "0.2")
        .envs(env.iter().copied())
        .args([
            "publish",
            "--json",
            "--oci-registry",
            registry,
            "--repository",
            repository,
        ])
        .args(args)
        .run()
}

const CREDENTIALS: [(&str, &str); 2] = [
    ("XTASK_OCI_USERNAME", USERNAME),
    ("XTASK_OCI_PASSWORD", PASSWORD),
];

/// No output of the tool carries the password or any token the service issued.
fn assert_no_secrets(stand_in: &StandIn, outputs: &[&Run]) {
    let mut secrets = vec![PASSWORD.to_string()];
    secrets.extend(stand_in.tokens.issued());
    for out in outputs {
        let text = format!("{}{}", out.stdout_text(), out.stderr_text());
        for secret in &secrets {
            assert!(
                !text.contains(secret.as_str()),
                "a secret appears in the tool's output:\n{text}"
            );
        }
        // A JWT's signature alone must not leak either.
        for token in stand_in.tokens.issued() {
            let signature = token.rsplit('.').next().unwrap();
            assert!(
                !text.contains(signature),
                "a token signature leaked:\n{text}"
            );
        }
    }
}

/// A publish that must be refused, and what its error must say.
struct Refusal<'a> {
    what: &'a str,
    args: Vec<String>,
    env: &'a [(&'a str, &'a str)],
    says: Vec<String>,
}

/// The publish failed, its stderr names every one of `needles`, and none of `secrets`.
fn assert_refused(out: &Run, needles: &[String], secrets: &[&str]) {
    out.assert_failure();
    let err = out.stderr_text();
    for needle in needles {
        assert!(err.contains(needle.as_str()), "no `{needle}` in:\n{err}");
    }
    for secret in secrets {
        assert!(!err.contains(secret), "`{secret}` shown in:\n{err}");
    }
}

/// The registry serves `reference` of `repository` with exactly the bytes of `digest`.
fn assert_served(stand_in: &StandIn, repository: &str, reference: &str, digest: &str) {
    assert_eq!(
        stand_in.manifest(repository, reference),
        (200, digest.to_string()),
        "{repository}:{reference}"
    );
}

/// The digest of the first platform a publish reported.
fn first_platform_digest(out: &Run) -> String {
    out.json()["platforms"][0]["digest"]
        .as_str()
        .unwrap()
        .to_string()
}

// ---------------------------------------------------------------------------------------------
// The tests.

#[test]
fn publishes_a_multi_platform_image_and_index_over_tls_with_tokens() {
    let Some(_docker) = light_docker() else {
        return;
    };
    let stand_in = StandIn::start(Policy::default());
    let repository = unique("team/coding-agent").to_lowercase();
    let images = test_images("full");
    let out = publish(
        &stand_in,
        &stand_in.direct(),
        &repository,
        &[image_args(&images.tags), vec!["--tag".into(), "r1".into()]].concat(),
        &CREDENTIALS,
    );
    let report = out.assert_success().json();
    let platforms = report["platforms"].as_array().unwrap();
    assert_eq!(platforms.len(), 2);
    for p in platforms {
        assert!(p["uploaded_bytes"].as_u64().unwrap() > 0, "{p}");
        let digest = p["digest"].as_str().unwrap();
        assert_served(&stand_in, &repository, digest, digest);
    }
    let index = report["index"]["digest"].as_str().unwrap();
    assert_served(&stand_in, &repository, "r1", index);
    assert_served(&stand_in, &repository, index, index);

    // Push and pull on the repository were asked for up front, with the credentials, and a
    // handful of tokens served the whole publish (no token per request).
    let requests = stand_in.tokens.requests();
    assert!(!requests.is_empty());
    let wanted = format!("repository:{repository}:pull,push");
    for r in &requests {
        assert!(r.authenticated, "{r:?}");
        assert_eq!(r.scopes, vec![wanted.clone()], "{r:?}");
    }
    assert!(requests.len() <= 2, "{requests:?}");
    // Progress lines: bytes of total and MB/s.
    let err = out.stderr_text();
    assert!(err.contains("MB/s") && err.contains("(100%)"), "{err}");
    assert_no_secrets(&stand_in, &[&out]);
}

#[test]
fn a_resumed_publish_uploads_only_the_missing_blobs() {
    let Some(_docker) = light_docker() else {
        return;
    };
    let stand_in = StandIn::start(Policy::default());
    let repository = unique("team/resume").to_lowercase();
    let salt = unique("resume");
    // Same layer content, two architectures: the arm64 image shares the amd64 layer.
    let amd64 = format!(
        "xtask-test-auth:resume-amd64-{}",
        sha256_hex(salt.as_bytes())
    );
    let arm64 = format!(
        "xtask-test-auth:resume-arm64-{}",
        sha256_hex(salt.as_bytes())
    );
    let mut images = LoadedImages { tags: Vec::new() };
    images.load("linux/amd64", amd64.clone(), &format!("shared {salt}"));
    images.load("linux/arm64", arm64.clone(), &format!("shared {salt}"));

    // The first run stops after amd64 (as a run that died half-way would).
    let first = publish_amd64(&stand_in, &repository, &images);
    let first = first.assert_success().json();
    let layer_and_config = first["platforms"][0]["uploaded_bytes"].as_u64().unwrap();

    stand_in.faults.seen.lock().unwrap().clear();
    let second = publish(
        &stand_in,
        &stand_in.proxied(),
        &repository,
        &[
            format!("--image=linux/amd64={amd64}"),
            format!("--image=linux/arm64={arm64}"),
            "--tag".into(),
            "r1".into(),
        ],
        &CREDENTIALS,
    );
    let report = second.assert_success().json();
    assert_eq!(report["platforms"][0]["uploaded_bytes"], 0, "{report}");
    let arm64_uploaded = report["platforms"][1]["uploaded_bytes"].as_u64().unwrap();
    // Only the arm64 config went up: the shared layer was already there.
    assert!(
        arm64_uploaded > 0 && arm64_uploaded < layer_and_config,
        "{arm64_uploaded} vs {layer_and_config}"
    );
    let puts = stand_in.faults.count("PUT", "/blobs/uploads/");
    assert_eq!(puts, 1, "{:?}", stand_in.faults.seen.lock().unwrap());
    assert!(second.stderr_text().contains("is already in the registry"));
    // The placeholder scope of the `/v2/` challenge was never asked for.
    assert!(stand_in
        .tokens
        .requests()
        .iter()
        .all(|r| r.scopes == vec![format!("repository:{repository}:pull,push")]));
    let index = report["index"]["digest"].as_str().unwrap();
    assert_served(&stand_in, &repository, "r1", index);
}

#[test]
fn a_token_that_expires_during_an_upload_is_renewed() {
    let Some(_docker) = light_docker() else {
        return;
    };
    // Tokens live 2 s; the first blob PUT is held 3 s by the proxy, so the token it carries
    // has expired when the registry reads it.
    let stand_in = StandIn::start(Policy {
        token_lifetime_secs: 2,
        ..Policy::default()
    });
    stand_in.faults.hold_blob_puts.store(1, Ordering::SeqCst);
    let repository = unique("team/expiry").to_lowercase();
    let images = test_images("expiry");
    let out = publish_amd64(&stand_in, &repository, &images);
    out.assert_success();
    assert!(
        stand_in.faults.invalid_token_answers.load(Ordering::SeqCst) >= 1,
        "the registry never refused an expired token: the test did not test expiry"
    );
    assert!(stand_in.tokens.requests().len() >= 2);
    let digest = first_platform_digest(&out);
    assert_served(&stand_in, &repository, &digest, &digest);
    assert_no_secrets(&stand_in, &[&out]);
}

#[test]
fn wrong_credentials_say_which_registry_refused_and_what_to_check() {
    let Some(_docker) = light_docker() else {
        return;
    };
    let stand_in = StandIn::start(Policy::default());
    let repository = unique("team/denied").to_lowercase();
    let images = test_images("wrong");
    let host = stand_in.direct().replace("https://", "");
    let wrong_password = "not-the-password-7c1d";
    // Wrong credentials, then none at all: each refusal says what to check or where
    // credentials go.
    let cases = [
        Refusal {
            what: "wrong credentials",
            args: [image_args(&images.tags), vec!["--tag".into(), "r1".into()]].concat(),
            env: &[
                ("XTASK_REGISTRY_USERNAME", USERNAME),
                ("XTASK_REGISTRY_PASSWORD", wrong_password),
            ],
            says: vec![
                format!("registry {host}"),
                "refused the credentials of `release-bot`".into(),
                "XTASK_REGISTRY_USERNAME/XTASK_REGISTRY_PASSWORD".into(),
                "check the username and the password or token".into(),
            ],
        },
        Refusal {
            what: "anonymous",
            args: image_args(&images.tags),
            env: &[],
            says: vec![
                format!("registry {host} asks for credentials"),
                "set XTASK_OCI_USERNAME/XTASK_OCI_PASSWORD or run `docker login".into(),
            ],
        },
    ];
    let mut outs = Vec::new();
    for case in &cases {
        eprintln!("--- case: {}", case.what);
        let out = publish(
            &stand_in,
            &stand_in.direct(),
            &repository,
            &case.args,
            case.env,
        );
        assert_refused(&out, &case.says, &[wrong_password]);
        outs.push(out);
    }
    assert!(stand_in.tokens.requests().iter().all(|r| !r.authenticated));
    assert_no_secrets(&stand_in, &outs.iter().collect::<Vec<_>>());
}

#[test]
fn a_token_without_push_is_refused_with_what_it_lacks() {
    let Some(_docker) = light_docker() else {
        return;
    };
    let stand_in = StandIn::start(Policy {
        may_push: false,
        ..Policy::default()
    });
    let repository = unique("team/readonly").to_lowercase();
    let images = test_images("readonly");
    let out = publish_amd64(&stand_in, &repository, &images);
    assert_refused(
        &out,
        &[
            "does not grant this action".into(),
            format!("may push to {repository}"),
        ],
        &[],
    );
    // Bounded: a refused scope is not asked for again and again.
    let requests = stand_in.tokens.requests();
    assert!(requests.len() <= 3, "{requests:?}");
    assert!(requests
        .iter()
        .all(|r| r.granted == vec![format!("repository:{repository}:pull")]));
    assert_no_secrets(&stand_in, &[&out]);
}

#[test]
fn a_5xx_during_a_blob_upload_is_retried() {
    let Some(_docker) = light_docker() else {
        return;
    };
    // Five failures: four answers to the same upload session (the client's retries with
    // backoff), then the client gives that session up and the new session's second try
    // gets through.
    let stand_in = StandIn::start(Policy::default());
    stand_in.faults.fail_blob_puts.store(5, Ordering::SeqCst);
    let repository = unique("team/flaky").to_lowercase();
    let images = test_images("flaky");
    let out = publish_amd64(&stand_in, &repository, &images);
    out.assert_success();
    assert_eq!(stand_in.faults.injected_failures.load(Ordering::SeqCst), 5);
    let err = out.stderr_text();
    assert!(
        err.contains("503 Service Unavailable; starting a new upload session"),
        "{err}"
    );
    let sessions = stand_in.faults.count("POST", "/blobs/uploads/");
    // Config and layer: one session each, plus the one given up.
    assert_eq!(sessions, 3, "{:?}", stand_in.faults.seen.lock().unwrap());
    let digest = first_platform_digest(&out);
    assert_served(&stand_in, &repository, &digest, &digest);
}

#[test]
fn a_first_push_from_two_legs_at_once_creates_the_package() {
    let Some(_docker) = light_docker() else {
        return;
    };
    // ghcr.io on the first release: the package does not exist, so every read of it is
    // refused (403) until a manifest creates it, and the two platform legs push at once; two
    // of their writes meet the race with the other leg's creation (403 `denied`).
    let stand_in = StandIn::start(Policy::default());
    stand_in.faults.first_push.store(true, Ordering::SeqCst);
    stand_in.faults.racing_writes.store(2, Ordering::SeqCst);
    let repository = unique("team/first").to_lowercase();
    let images = test_images("first");
    let legs: Vec<Run> = std::thread::scope(|scope| {
        let legs: Vec<_> = images
            .tags
            .iter()
            .map(|leg| {
                let (stand_in, repository) = (&stand_in, &repository);
                scope.spawn(move || {
                    publish(
                        stand_in,
                        &stand_in.proxied(),
                        repository,
                        &[
                            image_args(std::slice::from_ref(leg)),
                            vec!["--partial".into()],
                        ]
                        .concat(),
                        &[
                            CREDENTIALS[0],
                            CREDENTIALS[1],
                            ("XTASK_RETRY_BASE_MS", "100"),
                        ],
                    )
                })
            })
            .collect();
        legs.into_iter().map(|leg| leg.join().unwrap()).collect()
    });
    let seen = || stand_in.faults.seen.lock().unwrap().clone();
    assert!(
        stand_in.faults.denied_reads.load(Ordering::SeqCst) >= 2,
        "no read met the package that does not exist yet: the test did not test a first \
         push; {:?}",
        seen()
    );
    assert_eq!(stand_in.faults.injected_races.load(Ordering::SeqCst), 2);
    let mut pushed_files = Vec::new();
    for (n, leg) in legs.iter().enumerate() {
        let digest = first_platform_digest(leg.assert_success());
        assert_served(&stand_in, &repository, &digest, &digest);
        assert!(
            leg.stderr_text().contains("the upload's answer decides"),
            "{}",
            leg.stderr_text()
        );
        let file = stand_in.dir.path().join(format!("pushed-{n}.json"));
        std::fs::write(&file, leg.stdout_text()).unwrap();
        pushed_files.push(file);
    }
    // The index over both legs' pushes, as `ship` makes it: the package exists by now.
    let pushed: Vec<String> = pushed_files
        .iter()
        .flat_map(|f| ["--pushed".to_string(), f.display().to_string()])
        .collect();
    let out = publish(
        &stand_in,
        &stand_in.proxied(),
        &repository,
        &[pushed, vec!["--tag".into(), "r1".into()]].concat(),
        &CREDENTIALS,
    );
    let index = out.assert_success().json()["index"]["digest"]
        .as_str()
        .unwrap()
        .to_string();
    assert_served(&stand_in, &repository, "r1", &index);
    assert_no_secrets(&stand_in, &[&legs[0], &legs[1], &out]);
}

#[test]
fn a_write_refused_every_time_is_reported_after_a_bounded_number_of_attempts() {
    let Some(_docker) = light_docker() else {
        return;
    };
    // A refusal that persists is the account's, not a race: the publish gives up after the
    // client's attempts and says what to check.
    let stand_in = StandIn::start(Policy::default());
    stand_in.faults.racing_writes.store(1000, Ordering::SeqCst);
    let repository = unique("team/refused").to_lowercase();
    let images = test_images("refused");
    let out = publish(
        &stand_in,
        &stand_in.proxied(),
        &repository,
        &images.amd64_partial(),
        &[
            CREDENTIALS[0],
            CREDENTIALS[1],
            ("XTASK_RETRY_BASE_MS", "50"),
        ],
    );
    assert_refused(
        &out,
        &[
            "403 Forbidden".into(),
            "may push to".into(),
            repository.clone(),
            "write:packages".into(),
        ],
        &[PASSWORD],
    );
    assert_eq!(stand_in.faults.injected_races.load(Ordering::SeqCst), 4);
}

#[test]
fn blobs_already_in_another_repository_are_mounted() {
    let Some(_docker) = light_docker() else {
        return;
    };
    let stand_in = StandIn::start(Policy::default());
    let base = unique("team/base").to_lowercase();
    let app = unique("team/app").to_lowercase();
    let images = test_images("mount");
    let first = publish_amd64(&stand_in, &base, &images);
    first.assert_success();

    let before = stand_in.tokens.requests().len();
    stand_in.faults.seen.lock().unwrap().clear();
    let second = publish_amd64(&stand_in, &app, &images);
    let report = second.assert_success().json();
    assert_eq!(report["platforms"][0]["uploaded_bytes"], 0, "{report}");
    assert!(
        second.stderr_text().contains("mounted"),
        "{}",
        second.stderr_text()
    );
    // No blob bytes went up, and the token covered pulling from the source repository.
    assert_eq!(stand_in.faults.count("PUT", "/blobs/uploads/"), 0);
    let asked: BTreeSet<String> = stand_in.tokens.requests()[before..]
        .iter()
        .flat_map(|r| r.scopes.clone())
        .collect();
    assert!(
        asked.contains(&format!("repository:{base}:pull")),
        "{asked:?}"
    );
    let digest = first_platform_digest(&second);
    assert_served(&stand_in, &app, &digest, &digest);
}

#[test]
fn a_refused_mount_falls_back_to_an_upload() {
    let Some(_docker) = light_docker() else {
        return;
    };
    let stand_in = StandIn::start(Policy::default());
    let base = unique("team/base").to_lowercase();
    let app = unique("team/app").to_lowercase();
    let images = test_images("mount-refused");
    publish_amd64(&stand_in, &base, &images).assert_success();
    // The record of where the blobs are says `base` holds them: the second push tries to
    // mount them, and the registry refuses.
    stand_in.faults.refuse_mounts.store(true, Ordering::SeqCst);
    let second = publish_amd64(&stand_in, &app, &images);
    let report = second.assert_success().json();
    assert!(
        stand_in.faults.refused_mounts.load(Ordering::SeqCst) >= 1,
        "no mount was tried: the test did not test a refused mount"
    );
    assert!(report["platforms"][0]["uploaded_bytes"].as_u64().unwrap() > 0);
    assert!(
        second.stderr_text().contains("uploading it instead"),
        "{}",
        second.stderr_text()
    );
    let digest = first_platform_digest(&second);
    assert_served(&stand_in, &app, &digest, &digest);
}

#[test]
fn credential_helpers_from_the_docker_config_are_run() {
    let Some(_docker) = light_docker() else {
        return;
    };
    let stand_in = StandIn::start(Policy::default());
    let host = stand_in.direct().replace("https://", "");
    let config_dir = stand_in.dir.path().join("docker-config");
    let bin = stand_in.dir.path().join("bin");
    std::fs::create_dir_all(&config_dir).unwrap();
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(
        config_dir.join("config.json"),
        json!({"auths": {"other.example": {}}, "credHelpers": {host.clone(): "xtasktest"}})
            .to_string(),
    )
    .unwrap();
    // The docker-credential-helpers protocol: `get`, server URL on stdin, JSON on stdout.
    let asked = stand_in.dir.path().join("helper-asked");
    let helper = bin.join("docker-credential-xtasktest");
    std::fs::write(
        &helper,
        format!(
            "#!/bin/sh\n[ \"$1\" = get ] || exit 2\nurl=$(cat)\nprintf '%s' \"$url\" > '{asked}'\n\
             if [ \"$url\" = '{host}' ]; then\n  printf '{{\"ServerURL\":\"%s\",\"Username\":\"{USERNAME}\",\"Secret\":\"{PASSWORD}\"}}' \"$url\"\n\
             else\n  echo 'credentials not found in native keychain'; exit 1\nfi\n",
            asked = asked.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();

    let repository = unique("team/helper").to_lowercase();
    let images = test_images("helper");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let config_dir_text = config_dir.display().to_string();
    let out = publish(
        &stand_in,
        &stand_in.direct(),
        &repository,
        &images.amd64_partial(),
        &[
            ("DOCKER_CONFIG", config_dir_text.as_str()),
            ("PATH", path.as_str()),
        ],
    );
    out.assert_success();
    assert_eq!(std::fs::read_to_string(&asked).unwrap(), host);
    assert!(stand_in.tokens.requests().iter().all(|r| r.authenticated));
    assert_no_secrets(&stand_in, &[&out]);
}

/// The peak memory of publishing a large image through the ghcr-shaped stand-in, measured
/// with `/usr/bin/time -v` (maximum resident set size). Needs a large linux/amd64 image in
/// the engine, named by `XTASK_LARGE_IMAGE`; run it on purpose:
/// `XTASK_LARGE_IMAGE=ref cargo test -p xtask --test it -- registry_auth::peak_memory --ignored --nocapture`.
#[test]
#[ignore = "needs a multi-GB image in the engine (XTASK_LARGE_IMAGE); run on purpose"]
fn peak_memory_publishing_a_large_image_stays_bounded() {
    // Alone: a multi-GB push, and a measurement that other tests' load would disturb.
    let Some(_docker) = heavy_docker() else {
        return;
    };
    let image = std::env::var("XTASK_LARGE_IMAGE")
        .expect("set XTASK_LARGE_IMAGE to a large linux/amd64 image in the engine");
    assert!(
        Path::new("/usr/bin/time").exists(),
        "/usr/bin/time is missing (Debian package `time`)"
    );
    let stand_in = StandIn::start(Policy::default());
    let repository = unique("measure/large").to_lowercase();
    let out = Xtask::under(&["/usr/bin/time", "-v"])
        .args(["publish", "--json", "--partial", "--oci-registry"])
        .arg(stand_in.direct())
        .args(["--repository", &repository, "--image"])
        .arg(format!("linux/amd64={image}"))
        .env("SSL_CERT_FILE", &stand_in.ca_file)
        .env("DOCKER_CONFIG", stand_in.dir.path())
        .envs(CREDENTIALS)
        .run();
    let err = out.stderr_text();
    eprintln!("{err}");
    assert!(out.success());
    let uploaded = out.json()["platforms"][0]["uploaded_bytes"]
        .as_u64()
        .unwrap();
    let max_rss_kb: u64 = err
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("Maximum resident set size (kbytes): ")
        })
        .expect("/usr/bin/time -v reports the maximum resident set size")
        .parse()
        .unwrap();
    eprintln!(
        "published {uploaded} bytes to a TLS token-auth registry; peak RSS {} MB",
        max_rss_kb / 1024
    );
    // The template image compresses to about 865 MB (2.27 GB in the engine).
    assert!(
        uploaded > 500_000_000,
        "not a large image: {uploaded} bytes"
    );
    assert!(max_rss_kb < 256 * 1024, "peak RSS {max_rss_kb} kB");
}

#[test]
fn basic_auth_registries_take_docker_config_credentials_and_refuse_wrong_ones() {
    let Some(_docker) = light_docker() else {
        return;
    };
    let stand_in = StandIn::start(Policy {
        htpasswd: true,
        ..Policy::default()
    });
    let host = stand_in.direct().replace("https://", "");
    let repository = unique("team/basic").to_lowercase();
    let images = test_images("basic");
    let args = images.amd64_partial();

    // Credentials as `docker login` writes them: base64 of user:password under `auths`.
    let config_dir = stand_in.dir.path().join("docker-config");
    std::fs::create_dir_all(&config_dir).unwrap();
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{USERNAME}:{PASSWORD}"));
    std::fs::write(
        config_dir.join("config.json"),
        json!({"auths": {format!("https://{host}"): {"auth": auth}}}).to_string(),
    )
    .unwrap();
    let config_dir = config_dir.display().to_string();
    let out = publish(
        &stand_in,
        &stand_in.direct(),
        &repository,
        &args,
        &[("DOCKER_CONFIG", config_dir.as_str())],
    );
    out.assert_success();
    assert_no_secrets(&stand_in, &[&out]);

    let wrong_password = "not-the-password-5e2a";
    let out = publish(
        &stand_in,
        &stand_in.direct(),
        &unique("team/basic-denied").to_lowercase(),
        &args,
        &[
            ("XTASK_OCI_USERNAME", USERNAME),
            ("XTASK_OCI_PASSWORD", wrong_password),
        ],
    );
    assert_refused(
        &out,
        &[format!("registry {host} refused the credentials of `release-bot` from XTASK_OCI_USERNAME/XTASK_OCI_PASSWORD")],
        &[wrong_password],
    );
}
