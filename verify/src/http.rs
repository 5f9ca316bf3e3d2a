//! The one HTTP policy of the tool, for the npm registry and OCI registries alike: how a client
//! is built (user agent, timeouts, trust store, proxy), which failures are worth another
//! attempt, and how long to wait before it.
//!
//! Trust: reqwest's default TLS is rustls with the platform verifier, i.e. the system trust
//! store. That is required, not a preference: registry traffic may pass a TLS-inspecting
//! proxy whose CA is only in the host's store, and compiled-in roots would reject it.
//! Depends on nothing else of ours, so npm/ and oci/ can both use it.

use std::future::Future;
use std::net::{IpAddr, Ipv6Addr};
use std::time::Duration;

use anyhow::{Context, Result};
use reqwest::{header, StatusCode};

/// Sent with every request, so registry operators can tell this tool's traffic apart.
pub const USER_AGENT: &str = concat!("coding-agent-xtask/", env!("CARGO_PKG_VERSION"));

const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);

/// How long one exchange may take.
#[derive(Debug, Clone, Copy)]
pub enum Timeout {
    /// The whole exchange, body included: small documents (packuments, manifests).
    Total(Duration),
    /// The longest silence between two reads: streamed multi-GB bodies, where a total bound
    /// would cut off a slow but progressing upload.
    Idle(Duration),
}

/// A client with the tool's policy. `host` (`name[:port]`) is the one it will talk to: a
/// loopback host is reached directly, never through a proxy from the environment (a corporate
/// proxy cannot reach this machine's own registry).
pub fn client(host: &str, timeout: Timeout) -> Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder()
        .user_agent(USER_AGENT)
        .connect_timeout(CONNECT_TIMEOUT);
    builder = match timeout {
        Timeout::Total(d) => builder.timeout(d),
        Timeout::Idle(d) => builder.read_timeout(d),
    };
    if is_loopback_host(host) {
        builder = builder.no_proxy();
    }
    builder
        .build()
        .with_context(|| format!("cannot set up the HTTP client for {host}"))
}

/// [`client`] for the host of `url` (an `http(s)://` URL).
pub fn client_for_url(url: &str, timeout: Timeout) -> Result<reqwest::Client> {
    let parsed =
        reqwest::Url::parse(url).with_context(|| format!("`{url}` is not an http(s) URL"))?;
    let host = match (parsed.host_str(), parsed.port()) {
        (Some(host), Some(port)) => format!("{host}:{port}"),
        (Some(host), None) => host.to_owned(),
        (None, _) => anyhow::bail!("`{url}` names no host"),
    };
    client(&host, timeout)
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`, or a bare IPv6 address, names this machine:
/// `localhost`, 127.0.0.0/8 or `::1`. Such hosts are spoken to over plain http and without
/// a proxy.
pub fn is_loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        // `[v6]` or `[v6]:port`
        match rest.split_once(']') {
            Some((v6, port)) if port.is_empty() || is_port(port.strip_prefix(':')) => v6,
            _ => return false,
        }
    } else if host.parse::<Ipv6Addr>().is_ok() {
        host
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) if is_port(Some(port)) => name,
            Some(_) => return false,
            None => host,
        }
    };
    if name.eq_ignore_ascii_case("localhost") {
        return true;
    }
    match name.parse::<IpAddr>() {
        Ok(IpAddr::V4(v4)) => v4.is_loopback(),
        Ok(IpAddr::V6(v6)) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
        Err(_) => false,
    }
}

fn is_port(port: Option<&str>) -> bool {
    port.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// The host (with its port) of an `http(s)://` URL names this machine.
pub fn is_loopback_url(url: &str) -> bool {
    reqwest::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(is_loopback_host))
        .unwrap_or(false)
}

// ---------------------------------------------------------------------------------------------
// Retries.

/// What one attempt came to.
pub enum Attempt<T> {
    Done(T),
    /// A transient failure: another attempt may help. `after` is the server's `Retry-After`.
    Retry {
        error: anyhow::Error,
        after: Option<Duration>,
    },
}

/// How many attempts a request gets and how long to wait between them: exponential backoff
/// from `base`, or the server's `Retry-After`, never longer than `max_wait`.
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    pub attempts: u32,
    pub base: Duration,
    pub max_wait: Duration,
}

impl Retry {
    /// Four attempts, waits doubling from `base` (`settings::TransferSettings::retry_base`,
    /// 0.5 s unless `XTASK_RETRY_BASE_MS` says: tests that inject faults shorten it), at most
    /// 30 s.
    pub fn with_base(base: Duration) -> Retry {
        Retry {
            attempts: 4,
            base,
            max_wait: Duration::from_secs(30),
        }
    }
}

impl Retry {
    /// The wait after failed attempt number `attempt` (1-based).
    pub fn wait(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        retry_after
            .unwrap_or(self.base.saturating_mul(2u32.saturating_pow(attempt - 1)))
            .min(self.max_wait)
    }

    /// Runs `attempt(last)` until it is done, fails, or the attempts are used up; `last` says
    /// no retry will follow (so the caller can hand back the final answer as it is). Each
    /// retry is announced on stderr with the reason, so a slow run explains itself in CI logs.
    pub async fn run<T, F, Fut>(&self, what: &str, mut attempt: F) -> Result<T>
    where
        F: FnMut(bool) -> Fut,
        Fut: Future<Output = Result<Attempt<T>>>,
    {
        let mut n = 1;
        loop {
            let last = n >= self.attempts;
            match attempt(last).await? {
                Attempt::Done(value) => return Ok(value),
                Attempt::Retry { error, .. } if last => {
                    return Err(error.context(format!(
                        "gave up on {what} after {} attempts",
                        self.attempts
                    )))
                }
                Attempt::Retry { error, after } => {
                    let wait = self.wait(n, after);
                    eprintln!(
                        "warning: {error:#}; retrying in {:.1}s (attempt {}/{})",
                        wait.as_secs_f64(),
                        n + 1,
                        self.attempts
                    );
                    tokio::time::sleep(wait).await;
                    n += 1;
                }
            }
        }
    }
}

/// Statuses that say "later": rate limiting and server-side failures.
pub fn retryable_status(status: StatusCode) -> bool {
    status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error()
}

/// Transport failures another attempt may cure: no connection, a timeout, a connection that
/// broke mid-exchange.
pub fn retryable_error(error: &reqwest::Error) -> bool {
    error.is_timeout() || error.is_connect() || error.is_request() || error.is_body()
}

/// The `Retry-After` of a response, when given in seconds.
pub fn retry_after(response: &reqwest::Response) -> Option<Duration> {
    response
        .headers()
        .get(header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
}

/// A blocking reader over an async byte stream (an image export, a blob's HTTP body), for
/// the synchronous tar and gzip readers. tokio-util's `StreamReader` makes it an `AsyncRead` and `SyncIoBridge` blocks on
/// it: the stream is polled only as the reader asks, so memory stays at one chunk whatever
/// the image's size. Call it on the runtime; read it on a blocking thread
/// (`spawn_blocking`).
pub fn blocking_reader<S, E>(stream: S) -> impl std::io::Read + Send + 'static
where
    S: futures_util::Stream<Item = Result<bytes::Bytes, E>> + Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    let stream = Box::pin(futures_util::StreamExt::map(stream, |item| {
        item.map_err(|e| std::io::Error::other(e.to_string()))
    }));
    tokio_util::io::SyncIoBridge::new(tokio_util::io::StreamReader::new(stream))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for host in [
            "localhost",
            "LOCALHOST:5000",
            "127.0.0.1",
            "127.0.0.1:5000",
            "127.1.2.3:80",
            "[::1]",
            "[::1]:5000",
            "::1",
            "0:0:0:0:0:0:0:1",
            "[::ffff:127.0.0.1]:5000",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "ghcr.io",
            "127.example.com",
            "127.0.0.1.example.com:5000",
            "localhost.example.com",
            "128.0.0.1",
            "10.0.0.1:5000",
            "[::2]:5000",
            "[::1]x",
            "[::1]:",
            "127.0.0.1:port",
            "",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }

    #[test]
    fn loopback_urls() {
        assert!(is_loopback_url("http://127.0.0.1:4873/"));
        assert!(is_loopback_url("http://[::1]:4873"));
        assert!(is_loopback_url("http://localhost/npm/"));
        assert!(!is_loopback_url("http://127.0.0.1.nip.io/"));
        assert!(!is_loopback_url("https://registry.npmjs.org/"));
        assert!(!is_loopback_url("not a url"));
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let retry = Retry {
            attempts: 4,
            base: Duration::from_millis(500),
            max_wait: Duration::from_secs(30),
        };
        assert_eq!(retry.wait(1, None), Duration::from_millis(500));
        assert_eq!(retry.wait(3, None), Duration::from_secs(2));
        assert_eq!(
            retry.wait(1, Some(Duration::from_secs(7))),
            Duration::from_secs(7)
        );
        assert_eq!(
            retry.wait(1, Some(Duration::from_secs(600))),
            Duration::from_secs(30)
        );
        assert_eq!(retry.wait(40, None), Duration::from_secs(30));
    }

    #[tokio::test]
    async fn retries_until_done_and_gives_up_naming_the_count() {
        let retry = Retry {
            attempts: 3,
            base: Duration::from_millis(1),
            max_wait: Duration::from_millis(5),
        };
        let mut calls = 0;
        let value = retry
            .run("x", |_| {
                calls += 1;
                let n = calls;
                async move {
                    Ok(if n < 3 {
                        Attempt::Retry {
                            error: anyhow::anyhow!("flaky"),
                            after: None,
                        }
                    } else {
                        Attempt::Done(n)
                    })
                }
            })
            .await
            .unwrap();
        assert_eq!(value, 3);

        let mut lasts = Vec::new();
        let err = retry
            .run("http://r/x", |last| {
                lasts.push(last);
                async {
                    Ok::<Attempt<()>, _>(Attempt::Retry {
                        error: anyhow::anyhow!("503"),
                        after: None,
                    })
                }
            })
            .await
            .unwrap_err();
        assert_eq!(lasts, [false, false, true]);
        assert!(
            format!("{err:#}").contains("gave up on http://r/x after 3 attempts"),
            "{err:#}"
        );

        let err = retry
            .run("x", |_| async {
                Err::<Attempt<()>, _>(anyhow::anyhow!("final"))
            })
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "final");
    }
}
