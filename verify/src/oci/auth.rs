//! Registry authentication as ghcr.io, Docker Hub and distribution's token auth expect it:
//! `Basic` with the credentials, or `Bearer` tokens from the challenge's `realm`.
//!
//! Why this is more than "answer a 401": ghcr.io answers `GET /v2/` with a challenge whose
//! scope is a placeholder (`repository:user/image:pull`), so a token cached from that answer
//! fails every push. Like Docker and crane, the client therefore asks for
//! `repository:<name>:pull,push` up front (plus `pull` on a repository it mounts blobs from)
//! and never caches a scope it did not choose. Tokens expire (ghcr's after minutes, a
//! multi-GB layer may take longer), so an `invalid_token` or `insufficient_scope` answer
//! fetches a new token and the request is retried, a bounded number of times; the error
//! after that says which registry refused what and what to check.
//!
//! Pure decisions ([`parse_challenge`], [`scopes_for`], [`token_url`], [`refusal_kind`])
//! are unit-tested; [`Authenticator`] does the token requests.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use reqwest::{RequestBuilder, StatusCode, Url};
use serde::Deserialize;

use crate::oci::credentials::Credentials;
use crate::settings::{PASSWORD_ENV, USERNAME_ENV};

/// A `WWW-Authenticate` challenge: scheme and parameters (values may contain commas inside
/// quotes, e.g. `scope="repository:x:pull,push"`).
#[derive(Debug, PartialEq)]
pub struct Challenge {
    pub scheme: String,
    pub params: BTreeMap<String, String>,
}

pub fn parse_challenge(header: &str) -> Option<Challenge> {
    let header = header.trim();
    let (scheme, rest) = header.split_once(' ').unwrap_or((header, ""));
    let mut params = BTreeMap::new();
    let mut chars = rest.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        let key: String = std::iter::from_fn(|| chars.next_if(|c| *c != '=')).collect();
        if key.is_empty() || chars.next() != Some('=') {
            break;
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => value.extend(chars.next()),
                    '"' => break,
                    c => value.push(c),
                }
            }
        } else {
            value = std::iter::from_fn(|| chars.next_if(|c| *c != ',')).collect();
        }
        params.insert(key.trim().to_ascii_lowercase(), value.trim().to_string());
    }
    (!scheme.is_empty()).then(|| Challenge {
        scheme: scheme.to_ascii_lowercase(),
        params,
    })
}

/// The scopes to ask a token service for: push and pull on our repository, pull on the
/// repositories blobs are mounted from, and a challenge's scope only when it names one of
/// those repositories (ghcr's placeholder at `/v2/` names none of them and is dropped).
pub fn scopes_for(
    repository: &str,
    mount_sources: &BTreeSet<String>,
    challenge_scope: Option<&str>,
) -> BTreeSet<String> {
    let mut scopes = BTreeSet::from([format!("repository:{repository}:pull,push")]);
    for source in mount_sources.iter().filter(|s| *s != repository) {
        scopes.insert(format!("repository:{source}:pull"));
    }
    for scope in challenge_scope.unwrap_or("").split_whitespace() {
        let mut parts = scope.splitn(3, ':');
        let (Some("repository"), Some(name), Some(_actions)) =
            (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let ours = name == repository || mount_sources.contains(name);
        if ours && !scopes.iter().any(|s| s == scope) {
            // e.g. `repository:<ours>:pull` is covered by pull,push: only add what is new.
            let covered = scopes.iter().any(|s| {
                s.rsplit_once(':').is_some_and(|(resource, actions)| {
                    scope.rsplit_once(':').is_some_and(|(r, wanted)| {
                        r == resource
                            && wanted
                                .split(',')
                                .all(|w| actions.split(',').any(|a| a == w))
                    })
                })
            });
            if !covered {
                scopes.insert(scope.to_string());
            }
        }
    }
    scopes
}

/// `realm?service=…&scope=…&scope=…[&account=…]`: the token request of distribution's
/// token auth specification.
pub fn token_url(
    realm: &str,
    service: Option<&str>,
    scopes: &BTreeSet<String>,
    account: Option<&str>,
) -> Result<Url> {
    let mut url =
        Url::parse(realm).with_context(|| format!("token realm `{realm}` is not a URL"))?;
    {
        let mut query = url.query_pairs_mut();
        if let Some(service) = service {
            query.append_pair("service", service);
        }
        for scope in scopes {
            query.append_pair("scope", scope);
        }
        if let Some(account) = account {
            query.append_pair("account", account);
        }
    }
    Ok(url)
}

/// Why a registry answered 401 to a request that carried a token.
#[derive(Debug, PartialEq, Clone, Copy)]
pub enum Refusal {
    /// Expired or otherwise not accepted: a new token may help.
    InvalidToken,
    /// The token does not grant the action: a new token helps only if we now ask for more.
    InsufficientScope,
    /// No token was sent, or the registry did not say.
    Unauthenticated,
}

pub fn refusal_kind(challenge: &Challenge) -> Refusal {
    match challenge.params.get("error").map(String::as_str) {
        Some("invalid_token") => Refusal::InvalidToken,
        Some("insufficient_scope") => Refusal::InsufficientScope,
        _ => Refusal::Unauthenticated,
    }
}

/// `text` with every secret replaced, for error messages that quote a server's answer.
pub fn redact(text: &str, secrets: &[&str]) -> String {
    secrets
        .iter()
        .filter(|s| s.len() >= 4)
        .fold(text.to_string(), |text, secret| {
            text.replace(secret, "<redacted>")
        })
}

#[derive(Clone)]
struct Token {
    value: String,
    scopes: BTreeSet<String>,
    /// When to fetch a new one before using it again.
    refresh_after: Instant,
}

#[derive(Clone)]
enum Scheme {
    Anonymous,
    Basic,
    Bearer {
        realm: String,
        service: Option<String>,
        token: Option<Token>,
    },
}

/// One registry's authentication state, shared by every request of a client.
pub struct Authenticator {
    http: reqwest::Client,
    /// `host[:port]`, for messages.
    host: String,
    repository: String,
    credentials: Option<Credentials>,
    state: tokio::sync::Mutex<(Scheme, BTreeSet<String>)>,
}

impl Authenticator {
    pub fn new(
        http: reqwest::Client,
        host: &str,
        repository: &str,
        credentials: Option<Credentials>,
    ) -> Authenticator {
        Authenticator {
            http,
            host: host.to_string(),
            repository: repository.to_string(),
            credentials,
            state: tokio::sync::Mutex::new((Scheme::Anonymous, BTreeSet::new())),
        }
    }

    /// Adds the credentials or the current token to `request`, fetching a new token first
    /// when the current one is about to expire.
    pub async fn authorize(&self, request: RequestBuilder) -> Result<RequestBuilder> {
        let mut state = self.state.lock().await;
        let (scheme, mount_sources) = &mut *state;
        match scheme {
            Scheme::Anonymous => Ok(request),
            Scheme::Basic => Ok(match &self.credentials {
                Some(c) => request.basic_auth(&c.username, Some(&c.password)),
                None => request,
            }),
            Scheme::Bearer {
                realm,
                service,
                token,
            } => {
                let stale = token
                    .as_ref()
                    .is_none_or(|t| Instant::now() >= t.refresh_after);
                if stale {
                    let scopes = scopes_for(&self.repository, mount_sources, None);
                    *token = Some(self.fetch_token(realm, service.as_deref(), scopes).await?);
                }
                Ok(request.bearer_auth(&token.as_ref().expect("fetched above").value))
            }
        }
    }

    /// Makes the next token also grant `pull` on `source` (for a cross-repository mount;
    /// without it, distribution silently starts a plain upload instead of mounting).
    pub async fn want_pull_from(&self, source: &str) {
        let mut state = self.state.lock().await;
        let (scheme, mount_sources) = &mut *state;
        if mount_sources.insert(source.to_string()) {
            if let Scheme::Bearer { token, .. } = scheme {
                // The next request fetches a token with the wider scope set.
                *token = None;
            }
        }
    }

    /// Answers a 401 from `url`. `round` counts the challenges this request already had:
    /// the caller gives up (with the error returned here) after [`MAX_AUTH_ROUNDS`].
    pub async fn answer(&self, url: &Url, www_authenticate: &str, round: u32) -> Result<()> {
        let challenge = parse_challenge(www_authenticate).with_context(|| {
            format!("{url} answered 401 without a usable WWW-Authenticate challenge")
        })?;
        let mut state = self.state.lock().await;
        let (scheme, mount_sources) = &mut *state;
        match challenge.scheme.as_str() {
            "basic" => {
                if self.credentials.is_none() {
                    return Err(self.need_credentials(url));
                }
                if matches!(scheme, Scheme::Basic) {
                    return Err(self.refused_credentials(url, None));
                }
                *scheme = Scheme::Basic;
            }
            "bearer" => {
                let realm = challenge
                    .params
                    .get("realm")
                    .with_context(|| format!("{url}: Bearer challenge without a realm"))?
                    .clone();
                let service = challenge.params.get("service").cloned();
                let refusal = refusal_kind(&challenge);
                let had_token = matches!(scheme, Scheme::Bearer { token: Some(_), .. });
                let scopes = scopes_for(
                    &self.repository,
                    mount_sources,
                    challenge.params.get("scope").map(String::as_str),
                );
                let same_scopes = match &*scheme {
                    Scheme::Bearer {
                        token: Some(token), ..
                    } => token.scopes == scopes,
                    _ => false,
                };
                // Asking again for what was refused cannot help; an expired token can.
                if had_token
                    && (round >= MAX_AUTH_ROUNDS
                        || (refusal == Refusal::InsufficientScope && same_scopes))
                {
                    return Err(self.refused_token(url, &challenge, refusal, &scopes));
                }
                let token = self.fetch_token(&realm, service.as_deref(), scopes).await?;
                *scheme = Scheme::Bearer {
                    realm,
                    service,
                    token: Some(token),
                };
            }
            other => {
                bail!("{url} asks for `{other}` authentication, which this tool does not support")
            }
        }
        Ok(())
    }

    fn need_credentials(&self, url: &Url) -> anyhow::Error {
        anyhow!(
            "registry {} asks for credentials ({url} refused anonymous access): set \
             {USERNAME_ENV}/{PASSWORD_ENV} or run `docker login {}`",
            self.host,
            self.host
        )
    }

    fn refused_credentials(&self, url: &Url, realm: Option<&str>) -> anyhow::Error {
        let Some(c) = &self.credentials else {
            return self.need_credentials(url);
        };
        let by = realm.map_or(String::new(), |r| format!(" (token service {r})"));
        anyhow!(
            "registry {}{by} refused the credentials of `{}` from {}: check the username and \
             the password or token, that it has not expired, and that it may read {} (to \
             publish, also push: on ghcr.io a token with write:packages, or GITHUB_TOKEN with \
             `packages: write`)",
            self.host,
            c.username,
            c.source,
            self.repository
        )
    }

    fn refused_token(
        &self,
        url: &Url,
        challenge: &Challenge,
        refusal: Refusal,
        asked: &BTreeSet<String>,
    ) -> anyhow::Error {
        let who = self
            .credentials
            .as_ref()
            .map_or("anonymous".to_string(), |c| {
                format!("`{}` from {}", c.username, c.source)
            });
        let needed = challenge
            .params
            .get("scope")
            .map_or(String::new(), |s| format!(" (it needs `{s}`)"));
        match refusal {
            Refusal::InsufficientScope => anyhow!(
                "registry {} refused {url}: the token issued to {who} for {} does not grant \
                 this action{needed}; check that the account or token may push to {} (ghcr.io: \
                 write:packages, and the package's access settings)",
                self.host,
                asked.iter().cloned().collect::<Vec<_>>().join(" "),
                self.repository
            ),
            Refusal::InvalidToken | Refusal::Unauthenticated => anyhow!(
                "registry {} refused {url} even with a fresh token for {who}{needed}; check the \
                 registry's token service and the account's permissions on {}",
                self.host,
                self.repository
            ),
        }
    }

    async fn fetch_token(
        &self,
        realm: &str,
        service: Option<&str>,
        scopes: BTreeSet<String>,
    ) -> Result<Token> {
        let account = self.credentials.as_ref().map(|c| c.username.as_str());
        let url = token_url(realm, service, &scopes, account)
            .with_context(|| format!("registry {}", self.host))?;
        let mut request = self.http.get(url.clone());
        if let Some(c) = &self.credentials {
            request = request.basic_auth(&c.username, Some(&c.password));
        }
        let response = request
            .send()
            .await
            .with_context(|| format!("cannot fetch a token for {} from {realm}", self.host))?;
        let status = response.status();
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            return Err(self.refused_credentials(&url, Some(realm)));
        }
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            let secrets: Vec<&str> = self
                .credentials
                .iter()
                .map(|c| c.password.as_str())
                .collect();
            bail!(
                "the token service {realm} of registry {} answered {status}: {}",
                self.host,
                redact(&body.chars().take(300).collect::<String>(), &secrets)
            );
        }
        #[derive(Deserialize)]
        struct Answer {
            token: Option<String>,
            access_token: Option<String>,
            expires_in: Option<u64>,
        }
        let answer: Answer = response
            .json()
            .await
            .ok()
            .with_context(|| format!("the token service {realm} did not answer token JSON"))?;
        let value = answer
            .token
            .or(answer.access_token)
            .filter(|t| !t.is_empty())
            .with_context(|| format!("the token service {realm} answered without a token"))?;
        // Fetch the next token a little before this one runs out (a quarter of its life,
        // at most 30 s early), so a long upload does not start with a token about to expire.
        // Without `expires_in` a token lives 60 s (the token specification's default).
        let life = Duration::from_secs(answer.expires_in.unwrap_or(60));
        let refresh_after = Instant::now() + life - (life / 4).min(Duration::from_secs(30));
        Ok(Token {
            value,
            scopes,
            refresh_after,
        })
    }

    /// The password and the token currently held: what error messages must not quote.
    pub async fn secrets(&self) -> Vec<String> {
        let state = self.state.lock().await;
        let mut secrets: Vec<String> = self
            .credentials
            .iter()
            .map(|c| c.password.clone())
            .collect();
        if let Scheme::Bearer {
            token: Some(token), ..
        } = &state.0
        {
            secrets.push(token.value.clone());
        }
        secrets
    }
}

/// How many 401s one request may answer with a new token before it fails.
pub const MAX_AUTH_ROUNDS: u32 = 3;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_with_commas_in_quotes() {
        let c = parse_challenge(
            r#"Bearer realm="https://ghcr.io/token",service="ghcr.io",scope="repository:a/b:pull,push""#,
        )
        .unwrap();
        assert_eq!(c.scheme, "bearer");
        assert_eq!(c.params["realm"], "https://ghcr.io/token");
        assert_eq!(c.params["scope"], "repository:a/b:pull,push");
        assert_eq!(c.params["service"], "ghcr.io");
        assert_eq!(refusal_kind(&c), Refusal::Unauthenticated);
        let c = parse_challenge(r#"Basic realm="Registry Realm""#).unwrap();
        assert_eq!(c.scheme, "basic");
        // distribution's answer to a token without the action:
        let c = parse_challenge(
            r#"Bearer realm="https://t/token",service="reg",scope="repository:a/b:push,pull",error="insufficient_scope""#,
        )
        .unwrap();
        assert_eq!(refusal_kind(&c), Refusal::InsufficientScope);
        let c = parse_challenge(r#"Bearer realm="https://t/token",error="invalid_token""#).unwrap();
        assert_eq!(refusal_kind(&c), Refusal::InvalidToken);
    }

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn scopes_ask_for_push_up_front_and_drop_placeholders() {
        let none = BTreeSet::new();
        // ghcr.io's `GET /v2/` challenge names a placeholder repository.
        assert_eq!(
            scopes_for(
                "sandbox0/coding-agent",
                &none,
                Some("repository:user/image:pull")
            ),
            set(&["repository:sandbox0/coding-agent:pull,push"])
        );
        assert_eq!(
            scopes_for("a/b", &none, None),
            set(&["repository:a/b:pull,push"])
        );
        // Our own repository's scope is covered by pull,push.
        assert_eq!(
            scopes_for("a/b", &none, Some("repository:a/b:push,pull")),
            set(&["repository:a/b:pull,push"])
        );
        // Mount sources are pulled from; a challenge may ask for them.
        let sources = set(&["a/base", "a/b"]);
        assert_eq!(
            scopes_for("a/b", &sources, Some("repository:a/base:pull")),
            set(&["repository:a/b:pull,push", "repository:a/base:pull"])
        );
        // Something new on our repository (e.g. delete) is asked for when challenged.
        assert_eq!(
            scopes_for("a/b", &none, Some("repository:a/b:delete")),
            set(&["repository:a/b:delete", "repository:a/b:pull,push"])
        );
    }

    #[test]
    fn token_urls_carry_every_scope() {
        let url = token_url(
            "https://ghcr.io/token",
            Some("ghcr.io"),
            &set(&["repository:a/b:pull,push", "repository:a/base:pull"]),
            Some("bot"),
        )
        .unwrap();
        assert_eq!(
            url.as_str(),
            "https://ghcr.io/token?service=ghcr.io&scope=repository%3Aa%2Fb%3Apull%2Cpush&scope=repository%3Aa%2Fbase%3Apull&account=bot"
        );
        assert!(token_url("not a url", None, &BTreeSet::new(), None).is_err());
    }

    #[test]
    fn redaction() {
        assert_eq!(
            redact("bad password hunter22 for bot", &["hunter22", ""]),
            "bad password <redacted> for bot"
        );
    }
}
