//! The npm registry client: fetches packuments, concurrently, with timeouts and bounded retries.
//!
//! This is the network edge of `resolve`, `lock` and `bench`. It returns typed registry data
//! and never decides anything: the rules live in `resolve`. Client, trust store and retries
//! follow the tool's one HTTP policy (`template_verify::http`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use serde::Deserialize;
use tokio::sync::Mutex;

use template_verify::http::{self, Attempt, Retry, Timeout};

/// A full packument (`GET /<name>`), reduced to the fields the toolchain reads.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Packument {
    pub name: String,
    #[serde(rename = "dist-tags", default)]
    pub dist_tags: BTreeMap<String, String>,
    #[serde(default)]
    pub versions: BTreeMap<String, VersionMeta>,
    /// Publish times by version. Mirrors may lack entries; a missing time is never guessed.
    #[serde(default)]
    pub time: BTreeMap<String, serde_json::Value>,
}

/// One version's metadata within a packument.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct VersionMeta {
    #[serde(default)]
    pub version: String,
    /// A string (the deprecation message) when deprecated; some registries send `false`.
    #[serde(default)]
    pub deprecated: Option<serde_json::Value>,
    #[serde(rename = "optionalDependencies", default)]
    pub optional_dependencies: BTreeMap<String, String>,
    #[serde(default)]
    pub dist: Option<Dist>,
    /// The registry account that published this version. npm's full packument carries it per
    /// version (npm/registry docs/responses/package-metadata.md, "Full metadata format":
    /// `_npmUser`, `{ "name", "email" }`); the abbreviated form and some mirrors leave it out.
    #[serde(rename = "_npmUser", default)]
    pub npm_user: Option<NpmPerson>,
    /// The accounts allowed to publish the package when this version was published (the same
    /// document: `maintainers`, a list of `{ "name", "email" }`).
    #[serde(default)]
    pub maintainers: Vec<NpmPerson>,
    /// Where the source is (package.json's `repository`: a URL, a `host:owner/name` shorthand,
    /// or `{ "type", "url", "directory" }`; npm's docs, "package.json", repository).
    #[serde(default)]
    pub repository: Option<serde_json::Value>,
}

/// An npm registry account as a packument names it. Old packuments spell one as the string
/// `"name <email>"`; that form is kept as the name, the SBOM's actor parser splits it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NpmPerson {
    pub name: String,
    pub email: Option<String>,
    /// Set on `_npmUser` when the version was published through trusted publishing (an OIDC
    /// token of a CI workflow, no account token): `{ "id": "github", "oidcConfigId": ... }`, as
    /// pnpm reads it (pnpm `resolving/npm-resolver/src/trustChecks.ts`, `getTrustEvidence`;
    /// the type in `@pnpm/registry.types`). The registry's signature does not cover it.
    pub trusted_publisher: Option<String>,
}

impl<'de> Deserialize<'de> for NpmPerson {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct TrustedPublisher {
            #[serde(default)]
            id: Option<String>,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            Text(String),
            Object {
                #[serde(default)]
                name: String,
                #[serde(default)]
                email: Option<String>,
                #[serde(default, rename = "trustedPublisher")]
                trusted_publisher: Option<TrustedPublisher>,
            },
        }
        Ok(match Form::deserialize(d)? {
            Form::Text(name) => NpmPerson {
                name,
                email: None,
                trusted_publisher: None,
            },
            Form::Object {
                name,
                email,
                trusted_publisher,
            } => NpmPerson {
                name,
                email,
                // A trusted publisher must name its provider, as pnpm requires.
                trusted_publisher: trusted_publisher
                    .and_then(|t| t.id)
                    .filter(|id| !id.trim().is_empty()),
            },
        })
    }
}

impl VersionMeta {
    /// Who published this version on the registry: `_npmUser`, else the first of
    /// `maintainers` (a packument without `_npmUser` still names who could publish it).
    /// `None` when the packument names no one (an account with neither name nor email).
    pub(crate) fn publisher(&self) -> Option<&NpmPerson> {
        let named = |p: &&NpmPerson| {
            !p.name.trim().is_empty() || p.email.as_deref().is_some_and(|e| !e.trim().is_empty())
        };
        self.npm_user
            .iter()
            .find(named)
            .or_else(|| self.maintainers.iter().find(named))
    }
}

impl VersionMeta {
    /// The source repository as a web URL: `git+https://github.com/o/r.git`, `github:o/r` and
    /// `o/r` (npm's GitHub shorthand) all give `https://github.com/o/r`; `None` for anything
    /// that is not an http(s) or git URL or a shorthand of a known host.
    pub(crate) fn repository_url(&self) -> Option<String> {
        let text = match self.repository.as_ref()? {
            serde_json::Value::String(s) => s.as_str(),
            serde_json::Value::Object(o) => o.get("url")?.as_str()?,
            _ => return None,
        };
        repository_web_url(text)
    }

    pub(crate) fn deprecation(&self) -> Option<String> {
        match &self.deprecated {
            Some(serde_json::Value::String(s)) if !s.is_empty() => Some(s.clone()),
            Some(serde_json::Value::Bool(true)) => Some("deprecated".to_owned()),
            _ => None,
        }
    }
}

/// `repository` of a package.json as a web URL ([`VersionMeta::repository_url`]).
fn repository_web_url(text: &str) -> Option<String> {
    let text = text.trim();
    let shorthand = |host: &str, path: &str| -> Option<String> {
        let path = path.trim_end_matches(".git");
        let mut parts = path.split('/');
        let (owner, name) = (parts.next()?, parts.next()?);
        let plain = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        };
        (parts.next().is_none() && plain(owner) && plain(name))
            .then(|| format!("https://{host}/{owner}/{name}"))
    };
    for (prefix, host) in [
        ("github:", "github.com"),
        ("gitlab:", "gitlab.com"),
        ("bitbucket:", "bitbucket.org"),
    ] {
        if let Some(path) = text.strip_prefix(prefix) {
            return shorthand(host, path);
        }
    }
    if !text.contains(':') {
        return shorthand("github.com", text);
    }
    let url = text
        .trim_start_matches("git+")
        .replacen("git://", "https://", 1)
        .replacen("ssh://git@", "https://", 1);
    let url = match url.strip_prefix("git@") {
        // scp-like `git@host:owner/name.git`
        Some(rest) => format!("https://{}", rest.replacen(':', "/", 1)),
        None => url,
    };
    let url = url
        .trim_end_matches('/')
        .trim_end_matches(".git")
        .to_string();
    let parsed = reqwest::Url::parse(&url).ok()?;
    (parsed.scheme() == "https" || parsed.scheme() == "http")
        .then(|| parsed.host_str().is_some())
        .filter(|ok| *ok)
        .map(|_| url)
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Dist {
    #[serde(default)]
    pub integrity: Option<String>,
    #[serde(default)]
    pub tarball: Option<String>,
    /// The registry's signatures over `<name>@<version>:<integrity>` (npm/registry docs,
    /// "Registry signatures"); a mirror may strip them.
    #[serde(default)]
    pub signatures: Vec<DistSignature>,
    /// Where the registry serves this version's attestations, and whether one is SLSA
    /// provenance (`dist.attestations`, as npm/cli's `lib/utils/verify-signatures.js` and
    /// pnpm read it); a mirror may strip it.
    #[serde(default)]
    pub attestations: Option<DistAttestations>,
}

/// `dist.attestations`: `{ "url": ".../-/npm/v1/attestations/<name>@<version>",
/// "provenance": { "predicateType": "https://slsa.dev/provenance/v1" } }`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct DistAttestations {
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub provenance: Option<AttestationKind>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct AttestationKind {
    #[serde(rename = "predicateType", default)]
    pub predicate_type: Option<String>,
}

/// One entry of `dist.signatures`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct DistSignature {
    pub keyid: String,
    pub sig: String,
}

/// The URL of a package's packument: scoped names keep their `@` and encode the `/`.
pub(crate) fn packument_url(registry: &str, name: &str) -> String {
    format!(
        "{}/{}",
        registry.trim_end_matches('/'),
        name.replacen('/', "%2f", 1)
    )
}

/// A registry client that remembers what it fetched, so a package asked for twice (Codex's
/// platform binaries are aliases of Codex itself) is fetched once.
#[derive(Clone)]
pub(crate) struct Registry {
    base: String,
    http: reqwest::Client,
    cache: Arc<Mutex<BTreeMap<String, Arc<Packument>>>>,
    retry: Retry,
}

impl Registry {
    /// `retry_base` is the first backoff (`XTASK_RETRY_BASE_MS`, from the settings).
    pub(crate) fn new(base: &str, retry_base: Duration) -> Result<Registry> {
        let http = http::client_for_url(base, Timeout::Total(Duration::from_secs(60)))
            .with_context(|| format!("--registry `{base}`"))?;
        Ok(Registry {
            base: base.trim_end_matches('/').to_owned(),
            http,
            cache: Arc::default(),
            retry: Retry::with_base(retry_base),
        })
    }

    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    /// The names of every packument this client has fetched so far (`bench rebuild`).
    #[cfg(feature = "bench")]
    pub(crate) async fn cached_names(&self) -> Vec<String> {
        self.cache.lock().await.keys().cloned().collect()
    }

    /// Fetches `name`'s packument (once per client), retrying transient failures.
    pub(crate) async fn packument(&self, name: &str) -> Result<Arc<Packument>> {
        match self.packument_if_exists(name).await? {
            Some(p) => Ok(p),
            None => Err(anyhow!(
                "npm package `{name}` does not exist at {} (404); check its name in {} or the \
                 --registry",
                packument_url(&self.base, name),
                template_formats::paths::MANIFEST
            )),
        }
    }

    /// Like `packument`, but a package the registry does not have is `None`, not an error:
    /// platform-binary packages may be missing from a partial mirror.
    pub(crate) async fn packument_if_exists(&self, name: &str) -> Result<Option<Arc<Packument>>> {
        if let Some(hit) = self.cache.lock().await.get(name) {
            return Ok(Some(hit.clone()));
        }
        let url = packument_url(&self.base, name);
        let fetched = self
            .retry
            .run(&url, |_| self.fetch_once(name, &url))
            .await?;
        let Some(packument) = fetched else {
            return Ok(None);
        };
        let packument = Arc::new(packument);
        self.cache
            .lock()
            .await
            .insert(name.to_owned(), packument.clone());
        Ok(Some(packument))
    }

    /// The body of `GET <registry>/<path>` (`-/npm/v1/keys`, an attestation URL), `None` on a
    /// 404: a registry that does not serve it. Other failures are errors naming the URL.
    pub(crate) async fn get_optional(&self, url: &str) -> Result<Option<String>> {
        self.retry.run(url, |_| self.get_once(url)).await
    }

    async fn get_once(&self, url: &str) -> Result<Attempt<Option<String>>> {
        let retry = |error: anyhow::Error, after| Ok(Attempt::Retry { error, after });
        let response = match self.http.get(url).send().await {
            Ok(r) => r,
            Err(e) => return retry(anyhow!(e).context(format!("cannot reach {url}")), None),
        };
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(Attempt::Done(None));
        }
        if http::retryable_status(status) {
            let after = http::retry_after(&response);
            return retry(anyhow!("{url} answered {status}"), after);
        }
        if !status.is_success() {
            bail!("{url} answered {status}");
        }
        match response.text().await {
            Ok(body) => Ok(Attempt::Done(Some(body))),
            Err(e) => retry(anyhow!(e).context(format!("reading {url}")), None),
        }
    }

    /// `<registry>/-/npm/v1/keys`, when the registry serves it.
    pub(crate) fn keys_url(&self) -> String {
        format!("{}/-/npm/v1/keys", self.base)
    }

    /// Fetches every name concurrently; fails with the first error, naming its package.
    pub(crate) async fn packuments(
        &self,
        names: &[String],
    ) -> Result<BTreeMap<String, Arc<Packument>>> {
        let fetches = names
            .iter()
            .map(|n| async move { self.packument(n).await.map(|p| (n.clone(), p)) });
        futures_util::future::try_join_all(fetches)
            .await
            .map(|pairs| pairs.into_iter().collect())
    }

    /// Fetches every name concurrently, leaving out the ones the registry does not have.
    pub(crate) async fn existing_packuments(
        &self,
        names: &[String],
    ) -> Result<BTreeMap<String, Arc<Packument>>> {
        let fetches = names.iter().map(|n| async move {
            self.packument_if_exists(n)
                .await
                .map(|p| p.map(|p| (n.clone(), p)))
        });
        futures_util::future::try_join_all(fetches)
            .await
            .map(|pairs| pairs.into_iter().flatten().collect())
    }

    /// One request: status, body and parse; `Done(None)` when the registry lacks the
    /// package. A truncated or malformed body counts as a transient failure, since a broken
    /// connection or proxy produces exactly that; so does any transport error (the npm
    /// registry is read-only: a repeated GET is harmless).
    async fn fetch_once(&self, name: &str, url: &str) -> Result<Attempt<Option<Packument>>> {
        let retry = |error: anyhow::Error, after| Ok(Attempt::Retry { error, after });
        let response = match self
            .http
            .get(url)
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
        {
            Ok(response) => response,
            Err(e) => return retry(anyhow!(e).context(format!("cannot reach {url}")), None),
        };
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(Attempt::Done(None));
        }
        if http::retryable_status(status) {
            let after = http::retry_after(&response);
            return retry(anyhow!("{url} answered {status} for `{name}`"), after);
        }
        if !status.is_success() {
            bail!("{url} answered {status} for npm package `{name}`");
        }
        let body = match response.bytes().await {
            Ok(body) => body,
            Err(e) => {
                let e = anyhow!(e).context(format!("reading the packument of `{name}` from {url}"));
                return retry(e, None);
            }
        };
        let packument: Packument = match serde_json::from_slice(&body) {
            Ok(packument) => packument,
            Err(e) => {
                let e = anyhow!(
                    "the packument of `{name}` from {url} is not valid JSON ({e}; {} bytes)",
                    body.len()
                );
                return retry(e, None);
            }
        };
        if packument.name != name {
            bail!(
                "{url} returned the packument of `{}` when asked for `{name}`",
                packument.name
            );
        }
        Ok(Attempt::Done(Some(packument)))
    }
}

/// The 64 digest bytes of an npm `sha512-<base64>` integrity; `None` for any other form.
pub(crate) fn sha512_integrity(integrity: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    integrity
        .strip_prefix("sha512-")
        .and_then(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok())
        .filter(|digest| digest.len() == 64)
}

/// Downloads a tarball and checks its `sha512-` integrity; returns the bytes.
pub(crate) async fn download_verified(url: &str, integrity: &str) -> Result<Vec<u8>> {
    use sha2::{Digest, Sha512};
    let expected = sha512_integrity(integrity)
        .with_context(|| format!("integrity `{integrity}` of {url} is not a sha512 digest"))?;
    let bytes = download(url).await?;
    if Sha512::digest(&bytes).as_slice() != expected.as_slice() {
        bail!("{url} does not match its integrity {integrity}: refusing to use it");
    }
    Ok(bytes)
}

/// Downloads `url` whole (no check of what it is: the caller checks its integrity).
pub(crate) async fn download(url: &str) -> Result<Vec<u8>> {
    let client = http::client_for_url(url, Timeout::Total(Duration::from_secs(300)))?;
    let bytes = client
        .get(url)
        .send()
        .await
        .and_then(|r| r.error_for_status())
        .with_context(|| format!("cannot download {url}"))?
        .bytes()
        .await
        .with_context(|| format!("cannot read {url}"))?;
    Ok(bytes.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scoped_names_encode_the_slash_only() {
        assert_eq!(
            packument_url("https://r.example/", "@openai/codex"),
            "https://r.example/@openai%2fcodex"
        );
        assert_eq!(
            packument_url("http://127.0.0.1:9/", "ws"),
            "http://127.0.0.1:9/ws"
        );
    }

    #[test]
    fn repositories_become_web_urls() {
        for (given, want) in [
            (
                "git+https://github.com/openai/codex.git",
                Some("https://github.com/openai/codex"),
            ),
            (
                "github:anomalyco/opencode",
                Some("https://github.com/anomalyco/opencode"),
            ),
            (
                "microsoft/playwright-cli",
                Some("https://github.com/microsoft/playwright-cli"),
            ),
            (
                "git@github.com:websockets/ws.git",
                Some("https://github.com/websockets/ws"),
            ),
            ("git://github.com/a/b.git", Some("https://github.com/a/b")),
            ("https://gitlab.com/g/p", Some("https://gitlab.com/g/p")),
            ("file:../x", None),
            ("a/b/c", None),
            ("", None),
        ] {
            assert_eq!(repository_web_url(given).as_deref(), want, "{given}");
        }
    }

    #[test]
    fn deprecation_accepts_strings_and_ignores_false() {
        let meta = |v: serde_json::Value| -> VersionMeta {
            serde_json::from_value(serde_json::json!({ "version": "1.0.0", "deprecated": v }))
                .unwrap()
        };
        assert_eq!(meta("gone".into()).deprecation().as_deref(), Some("gone"));
        assert_eq!(meta(false.into()).deprecation(), None);
        assert_eq!(meta("".into()).deprecation(), None);
    }

    #[test]
    fn the_publisher_is_the_npm_user_else_the_first_maintainer() {
        let meta = |v: serde_json::Value| -> VersionMeta { serde_json::from_value(v).unwrap() };
        let both = meta(serde_json::json!({
            "version": "1.0.0",
            "_npmUser": {"name": "releaser", "email": "r@example.org"},
            "maintainers": [{"name": "ann", "email": "ann@example.org"}]
        }));
        assert_eq!(
            both.publisher(),
            Some(&NpmPerson {
                name: "releaser".into(),
                email: Some("r@example.org".into()),
                trusted_publisher: None,
            })
        );
        let maintainers = meta(serde_json::json!({
            "version": "1.0.0",
            "maintainers": [{"name": ""}, "bob <bob@example.org>"]
        }));
        assert_eq!(
            maintainers.publisher(),
            Some(&NpmPerson {
                name: "bob <bob@example.org>".into(),
                email: None,
                trusted_publisher: None,
            })
        );
        // What this project's mirror serves: neither field.
        assert_eq!(
            meta(serde_json::json!({"version": "1.0.0"})).publisher(),
            None
        );
    }

    #[test]
    fn sha512_integrities_decode_to_64_bytes() {
        let digest = sha512_integrity(&format!("sha512-{}==", "A".repeat(86))).unwrap();
        assert_eq!(digest, vec![0u8; 64]);
        assert_eq!(sha512_integrity("sha512-AAAA"), None);
        assert_eq!(sha512_integrity("sha1-AAAA"), None);
        assert_eq!(sha512_integrity("sha512-not base64"), None);
    }
}
