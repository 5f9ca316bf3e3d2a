//! Registry credentials, found the way the container ecosystem expects them, so that a
//! machine already logged in with `docker login` (or a CI job exporting a token) publishes
//! without extra set-up, and never through flags (flags end up in logs and process lists).
//!
//! The order, first match wins:
//! 1. `XTASK_OCI_USERNAME` / `XTASK_OCI_PASSWORD` (the older `XTASK_REGISTRY_USERNAME` /
//!    `XTASK_REGISTRY_PASSWORD` are accepted as aliases; the workflow sets those), but only
//!    for the one registry host the user named for them (see [`EnvCredentialsHost`]): the
//!    variables do not say which registry they are for, so they must never follow a host
//!    that a document under check (a receipt) names;
//! 2. the docker config (`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`):
//!    `credHelpers.<host>` (a credential helper for this registry), then an `auths` entry
//!    that carries credentials, then `credsStore` (the helper for every registry).
//!
//! Helpers are run with the docker-credential-helpers protocol: `docker-credential-<name>
//! get`, the server URL on stdin, `{"Username": …, "Secret": …}` on stdout. Decisions are
//! pure functions over the environment's snapshot (`settings::RegistryEnvironment`, taken
//! once by the binary) and the config text; only [`credentials_for`] reads
//! files and runs helpers. A password never appears in an error or a `Debug` output.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use base64::Engine as _;
use serde::Deserialize;
use tokio::io::AsyncWriteExt;

use crate::settings::{
    RegistryEnvironment, PASSWORD_ENV, PASSWORD_ENV_ALIAS, USERNAME_ENV, USERNAME_ENV_ALIAS,
};

/// How long a credential helper may take (a desktop keychain may prompt; CI must not hang).
const HELPER_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Clone, PartialEq)]
pub struct Credentials {
    pub username: String,
    pub password: String,
    /// Where they came from, for error messages: e.g. `XTASK_OCI_USERNAME/XTASK_OCI_PASSWORD`.
    pub source: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Credentials({}, <redacted>, from {})",
            self.username, self.source
        )
    }
}

/// Credentials from the environment (`get` reads a variable; empty counts as unset).
pub fn credentials_from_env(get: impl Fn(&str) -> Option<String>) -> Result<Option<Credentials>> {
    let get = |name: &str| get(name).filter(|v| !v.is_empty());
    for (user_var, pass_var) in [
        (USERNAME_ENV, PASSWORD_ENV),
        (USERNAME_ENV_ALIAS, PASSWORD_ENV_ALIAS),
    ] {
        match (get(user_var), get(pass_var)) {
            (Some(username), Some(password)) => {
                return Ok(Some(Credentials {
                    username,
                    password,
                    source: format!("{user_var}/{pass_var}"),
                }))
            }
            (None, None) => {}
            _ => bail!("set both {user_var} and {pass_var}, or neither"),
        }
    }
    Ok(None)
}

/// The registry host the environment's credentials are for, named by the user, never by a
/// document being checked: `publish`'s `--oci-registry`, the template's current registry for
/// `pin`, `--credentials-registry` (or `XTASK_OCI_REGISTRY`) for `receipt verify`. `None`:
/// the environment's credentials go nowhere (the docker config still answers for its own
/// hosts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvCredentialsHost(pub Option<String>);

impl EnvCredentialsHost {
    pub fn named(host: &str) -> EnvCredentialsHost {
        EnvCredentialsHost(Some(host.to_string()))
    }

    /// Whether the environment's credentials may be sent to `host`.
    pub fn allows(&self, host: &str) -> bool {
        self.0
            .as_deref()
            .is_some_and(|bound| same_registry_host(bound, host))
    }
}

/// `https://ghcr.io/` and `GHCR.io` are one host; Docker Hub's spellings are one host.
fn same_registry_host(a: &str, b: &str) -> bool {
    let norm = |h: &str| config_key_host(h.trim()).to_ascii_lowercase();
    let (a, b) = (norm(a), norm(b));
    a == b || (is_docker_hub(&a) && is_docker_hub(&b))
}

/// What the docker config says about one registry.
#[derive(Debug, PartialEq)]
pub enum DockerConfigAnswer {
    /// Credentials written in the config (`auths.<key>.auth` or `username`/`password`).
    Inline(Credentials),
    /// Ask `docker-credential-<helper> get` for `server_url`.
    Helper {
        helper: String,
        server_url: String,
    },
    Nothing,
}

/// Docker Hub is spelt several ways; `docker login` stores it under its v1 URL.
const DOCKER_HUB_KEY: &str = "https://index.docker.io/v1/";

fn is_docker_hub(host: &str) -> bool {
    matches!(
        host,
        "docker.io" | "index.docker.io" | "registry-1.docker.io"
    )
}

/// `https://ghcr.io/v1/` -> `ghcr.io`: the host part of an `auths` key as `docker login`
/// writes it (with or without scheme and path).
fn config_key_host(key: &str) -> &str {
    let key = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    key.split('/').next().unwrap_or(key)
}

/// Looks `host` up in a docker config: `credHelpers`, then `auths` with credentials in it,
/// then `credsStore` (Docker's own order; with a `credsStore`, `auths` entries are empty
/// markers).
pub fn docker_config_answer(text: &str, host: &str, origin: &Path) -> Result<DockerConfigAnswer> {
    #[derive(Deserialize)]
    struct Config {
        #[serde(default)]
        auths: BTreeMap<String, AuthEntry>,
        #[serde(default, rename = "credsStore")]
        creds_store: Option<String>,
        #[serde(default, rename = "credHelpers")]
        cred_helpers: BTreeMap<String, String>,
    }
    #[derive(Deserialize)]
    struct AuthEntry {
        #[serde(default)]
        auth: Option<String>,
        #[serde(default)]
        username: Option<String>,
        #[serde(default)]
        password: Option<String>,
    }
    let config: Config = serde_json::from_str(text)
        .with_context(|| format!("{} is not a docker config", origin.display()))?;
    let hub = is_docker_hub(host);
    let matches_host = |key: &str| {
        let key_host = config_key_host(key);
        key_host == host || (hub && is_docker_hub(key_host))
    };
    let server_url = if hub {
        DOCKER_HUB_KEY.to_string()
    } else {
        host.to_string()
    };

    if let Some((_, helper)) = config
        .cred_helpers
        .iter()
        .find(|(key, helper)| matches_host(key) && !helper.is_empty())
    {
        return Ok(DockerConfigAnswer::Helper {
            helper: helper.clone(),
            server_url,
        });
    }
    for (key, entry) in config.auths.iter().filter(|(key, _)| matches_host(key)) {
        let source = format!("{} auths.{key}", origin.display());
        if let (Some(username), Some(password)) = (&entry.username, &entry.password) {
            if !username.is_empty() && !password.is_empty() {
                return Ok(DockerConfigAnswer::Inline(Credentials {
                    username: username.clone(),
                    password: password.clone(),
                    source,
                }));
            }
        }
        let Some(auth) = entry.auth.as_deref().filter(|a| !a.is_empty()) else {
            continue;
        };
        let not_user_password = || {
            format!(
                "{}: `auths.{key}.auth` is not base64 of `user:password`; run `docker login \
                 {host}` again",
                origin.display()
            )
        };
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(auth.trim())
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .with_context(not_user_password)?;
        let (username, password) = decoded.split_once(':').with_context(not_user_password)?;
        return Ok(DockerConfigAnswer::Inline(Credentials {
            username: username.to_string(),
            password: password.to_string(),
            source,
        }));
    }
    if let Some(helper) = config.creds_store.filter(|h| !h.is_empty()) {
        return Ok(DockerConfigAnswer::Helper { helper, server_url });
    }
    Ok(DockerConfigAnswer::Nothing)
}

/// A credential helper's `get` answer: credentials, or none stored for that server.
pub fn parse_helper_answer(
    helper: &str,
    server_url: &str,
    success: bool,
    stdout: &str,
) -> Result<Option<Credentials>> {
    let program = format!("docker-credential-{helper}");
    if !success {
        // The protocol's "nothing stored" answer; anything else is the helper failing.
        if stdout.contains("credentials not found") {
            return Ok(None);
        }
        bail!(
            "`{program} get` failed for {server_url}: {}; check the helper (or set \
             {USERNAME_ENV}/{PASSWORD_ENV})",
            stdout.trim().chars().take(300).collect::<String>()
        );
    }
    #[derive(Deserialize)]
    struct Answer {
        #[serde(rename = "Username", default)]
        username: String,
        #[serde(rename = "Secret", default)]
        secret: String,
    }
    // The answer holds the secret: the parse error must not quote it.
    let answer: Answer = serde_json::from_str(stdout).ok().with_context(|| {
        format!("`{program} get` for {server_url} did not print the helper protocol's JSON")
    })?;
    if answer.username == "<token>" {
        bail!(
            "`{program} get` for {server_url} gave an identity token (an OAuth refresh token), \
             which this tool does not exchange; set {USERNAME_ENV}/{PASSWORD_ENV} instead"
        );
    }
    if answer.username.is_empty() || answer.secret.is_empty() {
        return Ok(None);
    }
    Ok(Some(Credentials {
        username: answer.username,
        password: answer.secret,
        source: program,
    }))
}

/// Runs `docker-credential-<helper> get` with `server_url` on stdin.
async fn run_helper(helper: &str, server_url: &str) -> Result<Option<Credentials>> {
    let program = format!("docker-credential-{helper}");
    let spawned = tokio::process::Command::new(&program)
        .arg("get")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        // A docker config copied from a desktop (`credsStore: desktop`) onto a machine
        // without that helper: Docker fails there too, but an anonymous registry needs no
        // credentials, so go on without them and say why a later 401 may follow.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!(
                "publish: the docker config names the credential helper `{helper}`, but \
                 `{program}` is not on PATH; going on without credentials for {server_url} \
                 (install the helper or set {USERNAME_ENV}/{PASSWORD_ENV})"
            );
            return Ok(None);
        }
        Err(e) => {
            return Err(e).with_context(|| format!("cannot run `{program} get`"));
        }
    };
    let mut stdin = child.stdin.take().expect("stdin is piped");
    stdin
        .write_all(server_url.as_bytes())
        .await
        .with_context(|| format!("cannot write to `{program} get`"))?;
    drop(stdin);
    let output = tokio::time::timeout(HELPER_TIMEOUT, child.wait_with_output())
        .await
        .with_context(|| {
            format!(
                "`{program} get` did not answer within {}s",
                HELPER_TIMEOUT.as_secs()
            )
        })?
        .with_context(|| format!("`{program} get` failed"))?;
    parse_helper_answer(
        helper,
        server_url,
        output.status.success(),
        &String::from_utf8_lossy(&output.stdout),
    )
}

/// Credentials for `host`: the environment's when they are bound to `host`, then the docker
/// config (its helpers run for real; entries are looked up by `host` itself), else anonymous.
/// `env` is the snapshot of the credential variables and the docker config's path.
pub async fn credentials_for(
    host: &str,
    env_host: &EnvCredentialsHost,
    env: &RegistryEnvironment,
) -> Result<Option<Credentials>> {
    let from_env = credentials_from_env(|name| env.variable(name))?;
    if let Some(found) = from_env.filter(|_| env_host.allows(host)) {
        return Ok(Some(found));
    }
    let Some(path) = env.docker_config.clone() else {
        return Ok(None);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(e)
                .with_context(|| format!("cannot read the docker config {}", path.display()))
        }
    };
    match docker_config_answer(&text, host, &path)? {
        DockerConfigAnswer::Inline(found) => Ok(Some(found)),
        DockerConfigAnswer::Helper { helper, server_url } => run_helper(&helper, &server_url).await,
        DockerConfigAnswer::Nothing => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn environment_names_and_aliases() {
        let c = credentials_from_env(env(&[
            (USERNAME_ENV, "new"),
            (PASSWORD_ENV, "p1"),
            (USERNAME_ENV_ALIAS, "old"),
            (PASSWORD_ENV_ALIAS, "p2"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!((c.username.as_str(), c.password.as_str()), ("new", "p1"));
        assert_eq!(c.source, "XTASK_OCI_USERNAME/XTASK_OCI_PASSWORD");
        let c = credentials_from_env(env(&[
            (USERNAME_ENV_ALIAS, "old"),
            (PASSWORD_ENV_ALIAS, "p2"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!((c.username.as_str(), c.password.as_str()), ("old", "p2"));
        assert!(credentials_from_env(env(&[])).unwrap().is_none());
        assert!(
            credentials_from_env(env(&[(USERNAME_ENV, ""), (PASSWORD_ENV, "")]))
                .unwrap()
                .is_none()
        );
        let err = credentials_from_env(env(&[(USERNAME_ENV, "u")])).unwrap_err();
        assert!(err.to_string().contains(PASSWORD_ENV), "{err}");
        let err = credentials_from_env(env(&[(PASSWORD_ENV_ALIAS, "secret")])).unwrap_err();
        assert!(!err.to_string().contains("secret"), "{err}");
    }

    #[test]
    fn environment_credentials_go_only_to_their_named_host() {
        let ghcr = EnvCredentialsHost::named("ghcr.io");
        assert!(ghcr.allows("ghcr.io"));
        assert!(ghcr.allows("GHCR.io"));
        assert!(EnvCredentialsHost::named("https://ghcr.io/").allows("ghcr.io"));
        assert!(!ghcr.allows("ghcr.io.evil.example"));
        assert!(!ghcr.allows("127.0.0.1:5000"));
        assert!(!EnvCredentialsHost::named("127.0.0.1:5000").allows("127.0.0.1:5001"));
        assert!(EnvCredentialsHost::named("docker.io").allows("registry-1.docker.io"));
        assert!(!EnvCredentialsHost(None).allows("ghcr.io"));
    }

    #[test]
    fn docker_config_auths_entries() {
        let auth = base64::engine::general_purpose::STANDARD.encode("bot:s3cret:with-colon");
        let text = format!(
            r#"{{"auths": {{"https://ghcr.io/v1/": {{"auth": "{auth}"}}, "other.io": {{"username": "u", "password": "p"}}}}}}"#
        );
        let origin = Path::new("config.json");
        let DockerConfigAnswer::Inline(c) = docker_config_answer(&text, "ghcr.io", origin).unwrap()
        else {
            panic!("ghcr.io has inline credentials")
        };
        assert_eq!(
            (c.username.as_str(), c.password.as_str()),
            ("bot", "s3cret:with-colon")
        );
        assert_eq!(c.source, "config.json auths.https://ghcr.io/v1/");
        assert!(!format!("{c:?}").contains("s3cret"));
        let DockerConfigAnswer::Inline(c) =
            docker_config_answer(&text, "other.io", origin).unwrap()
        else {
            panic!("other.io has inline credentials")
        };
        assert_eq!((c.username.as_str(), c.password.as_str()), ("u", "p"));
        assert_eq!(
            docker_config_answer(&text, "none.io", origin).unwrap(),
            DockerConfigAnswer::Nothing
        );
        let bad = r#"{"auths": {"ghcr.io": {"auth": "%%%"}}}"#;
        let err = docker_config_answer(bad, "ghcr.io", origin).unwrap_err();
        assert!(format!("{err:#}").contains("auths.ghcr.io.auth"), "{err:#}");
    }

    #[test]
    fn docker_config_helpers_and_their_order() {
        let origin = Path::new("config.json");
        let auth = base64::engine::general_purpose::STANDARD.encode("u:p");
        // credHelpers beats auths; auths with content beats credsStore; an empty auths entry
        // (what `docker login` leaves next to a credsStore) falls through to the store.
        let text = format!(
            r#"{{"auths": {{"ghcr.io": {{"auth": "{auth}"}}, "quay.io": {{}}, "https://index.docker.io/v1/": {{}}}},
                "credsStore": "desktop", "credHelpers": {{"ghcr.io": "gh", "gcr.io": "gcloud"}}}}"#
        );
        let helper = |helper: &str, server_url: &str| DockerConfigAnswer::Helper {
            helper: helper.into(),
            server_url: server_url.into(),
        };
        assert_eq!(
            docker_config_answer(&text, "ghcr.io", origin).unwrap(),
            helper("gh", "ghcr.io")
        );
        assert_eq!(
            docker_config_answer(&text, "gcr.io", origin).unwrap(),
            helper("gcloud", "gcr.io")
        );
        assert_eq!(
            docker_config_answer(&text, "quay.io", origin).unwrap(),
            helper("desktop", "quay.io")
        );
        assert_eq!(
            docker_config_answer(&text, "registry-1.docker.io", origin).unwrap(),
            helper("desktop", "https://index.docker.io/v1/")
        );
        let text =
            format!(r#"{{"auths": {{"ghcr.io": {{"auth": "{auth}"}}}}, "credsStore": "desktop"}}"#);
        assert!(matches!(
            docker_config_answer(&text, "ghcr.io", origin).unwrap(),
            DockerConfigAnswer::Inline(_)
        ));
    }

    #[tokio::test]
    async fn a_missing_helper_means_no_credentials() {
        let found = run_helper("xtask-test-helper-that-does-not-exist", "ghcr.io")
            .await
            .unwrap();
        assert!(found.is_none());
    }

    #[test]
    fn helper_answers() {
        let c = parse_helper_answer(
            "gh",
            "ghcr.io",
            true,
            r#"{"ServerURL":"ghcr.io","Username":"bot","Secret":"tok"}"#,
        )
        .unwrap()
        .unwrap();
        assert_eq!((c.username.as_str(), c.password.as_str()), ("bot", "tok"));
        assert_eq!(c.source, "docker-credential-gh");
        assert!(parse_helper_answer(
            "gh",
            "ghcr.io",
            false,
            "credentials not found in native keychain\n"
        )
        .unwrap()
        .is_none());
        let err = parse_helper_answer("gh", "ghcr.io", false, "dbus: no session").unwrap_err();
        assert!(
            err.to_string().contains("docker-credential-gh get"),
            "{err}"
        );
        let err = parse_helper_answer("gh", "ghcr.io", true, r#"{"Username":"bot","Secret":"tok""#)
            .unwrap_err();
        assert!(!format!("{err:#}").contains("tok"), "{err:#}");
        assert!(parse_helper_answer(
            "gh",
            "ghcr.io",
            true,
            r#"{"Username":"<token>","Secret":"r"}"#
        )
        .is_err());
    }
}
