//! `cargo xtask-bench resolve`: the resolver's wall time next to npm's, in the same run.
//!
//! The packuments the resolver reads are fetched once from `--registry` and served from a
//! local HTTP server on 127.0.0.1, so both sides see the same bytes and the same (loopback)
//! network. The reference is `npm view <pkg> dist-tags time --json`, run once per package, as
//! a person checking versions by hand would; the resolver fetches every packument (and the
//! platform-binary packuments) concurrently and decides, so its time should stay well below.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::npm::registry::{packument_url, Registry};
use crate::npm::resolve;
use crate::util::{now_or, print_json, Progress};
use template_formats::manifest::Manifest;
use template_formats::model::resolution::Resolution;

#[derive(Serialize)]
struct BenchReport {
    registry_snapshot_of: String,
    local_registry: String,
    packages: usize,
    packuments_served: usize,
    runs: u32,
    xtask_resolve_ms: Vec<u128>,
    xtask_resolve_median_ms: u128,
    npm_view_ms: Vec<u128>,
    npm_view_median_ms: u128,
    ratio: f64,
}

/// `cargo xtask-bench resolve`: the registry to snapshot and how many runs a side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchResolveRequest {
    pub registry: crate::npm::resolve::RegistryAndClock,
    /// How many times to run each side (the median is reported).
    pub runs: u32,
    pub json: bool,
}

pub async fn resolve(request: BenchResolveRequest, ctx: &crate::Context) -> Result<ExitCode> {
    let manifest = Manifest::load(&ctx.layout.manifest())?;
    let now = now_or(request.registry.now.as_deref())?;
    let progress = Progress::default();
    if request.runs == 0 {
        bail!("--runs must be at least 1");
    }

    // Snapshot: every packument a resolution reads, as raw bytes.
    progress.step(format!(
        "snapshotting packuments from {}",
        request.registry.registry
    ));
    let upstream = Registry::new(
        &request.registry.registry,
        ctx.settings.verifier.transfer.retry_base,
    )?;
    let (warm, _) = resolve::resolve_all(
        &manifest,
        &upstream,
        &Default::default(),
        now,
        &request.registry.trust,
        ctx,
        &progress,
    )
    .await?;
    let names = upstream.cached_names().await;
    let local = serve(Arc::new(snapshot(&upstream, &names).await?)).await?;
    progress.step(format!("serving {} packuments on {local}", names.len()));

    let bench = Bench {
        manifest: &manifest,
        now,
        runs: request.runs,
        local: &local,
        retry_base: ctx.settings.verifier.transfer.retry_base,
        progress: &progress,
        trust: &request.registry.trust,
        ctx,
    };
    let ours = bench
        .time_xtask_resolve(&warm, &request.registry.registry)
        .await?;
    let theirs = bench.time_npm_view().await?;

    let report = BenchReport {
        registry_snapshot_of: request.registry.registry.clone(),
        local_registry: local,
        packages: manifest.packages.len(),
        packuments_served: names.len(),
        runs: request.runs,
        xtask_resolve_median_ms: median(&ours).as_millis(),
        npm_view_median_ms: median(&theirs).as_millis(),
        ratio: ms(median(&ours)) / ms(median(&theirs)),
        xtask_resolve_ms: ours.iter().map(Duration::as_millis).collect(),
        npm_view_ms: theirs.iter().map(Duration::as_millis).collect(),
    };
    if request.json {
        print_json(&report)?;
    } else {
        print_report(&report);
    }
    Ok(ExitCode::SUCCESS)
}

/// The raw bytes of each named packument upstream, keyed by the URL path the server answers.
async fn snapshot(upstream: &Registry, names: &[String]) -> Result<BTreeMap<String, bytes::Bytes>> {
    let http = template_verify::http::client_for_url(
        upstream.base(),
        template_verify::http::Timeout::Total(Duration::from_secs(60)),
    )?;
    let mut snapshot = BTreeMap::new();
    for name in names {
        let url = packument_url(upstream.base(), name);
        let bytes = http
            .get(&url)
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .with_context(|| format!("cannot fetch {url}"))?
            .bytes()
            .await?;
        snapshot.insert(name.replacen('/', "%2f", 1), bytes);
    }
    Ok(snapshot)
}

/// Both sides of the benchmark, timed against the same loopback snapshot.
struct Bench<'a> {
    manifest: &'a Manifest,
    now: DateTime<Utc>,
    runs: u32,
    /// The snapshot server's URL.
    local: &'a str,
    /// The first retry backoff, from the settings.
    retry_base: Duration,
    progress: &'a Progress,
    trust: &'a crate::npm::trust::TrustOptions,
    ctx: &'a crate::Context,
}

impl Bench<'_> {
    /// Each run's wall time of a full resolution, which must match the upstream one.
    async fn time_xtask_resolve(&self, warm: &Resolution, upstream: &str) -> Result<Vec<Duration>> {
        let mut ours = Vec::new();
        for run in 1..=self.runs {
            let registry = Registry::new(self.local, self.retry_base)?;
            let start = Instant::now();
            let (again, _) = resolve::resolve_all(
                self.manifest,
                &registry,
                &Default::default(),
                self.now,
                self.trust,
                self.ctx,
                &Progress::default(),
            )
            .await?;
            ours.push(start.elapsed());
            if again.packages != warm.packages {
                bail!("the local snapshot resolved differently from {upstream}");
            }
            self.progress.step(format!(
                "xtask resolve run {run}: {:.0} ms",
                ms(*ours.last().unwrap())
            ));
        }
        Ok(ours)
    }

    /// Each run's wall time of one `npm view` per manifest package.
    async fn time_npm_view(&self) -> Result<Vec<Duration>> {
        let mut theirs = Vec::new();
        let npmrc = tempfile::NamedTempFile::new()?;
        std::fs::write(npmrc.path(), format!("registry={}\n", self.local))?;
        let cache = tempfile::tempdir()?;
        for run in 1..=self.runs {
            let start = Instant::now();
            for package in &self.manifest.packages {
                let output = tokio::process::Command::new("npm")
                    .args(["view", &package.name, "dist-tags", "time", "--json"])
                    .env("NPM_CONFIG_USERCONFIG", npmrc.path())
                    .env("NPM_CONFIG_CACHE", cache.path())
                    .env("NPM_CONFIG_PREFER_ONLINE", "true")
                    .output()
                    .await
                    .context("cannot run `npm`: the benchmark needs npm on PATH")?;
                if !output.status.success() {
                    bail!(
                        "`npm view {}` failed: {}",
                        package.name,
                        String::from_utf8_lossy(&output.stderr)
                    );
                }
            }
            theirs.push(start.elapsed());
            self.progress.step(format!(
                "npm view x{} run {run}: {:.0} ms",
                self.manifest.packages.len(),
                ms(*theirs.last().unwrap())
            ));
        }
        Ok(theirs)
    }
}

fn print_report(report: &BenchReport) {
    println!(
        "resolve of {} packages ({} packuments) from a local snapshot, median of {} runs:\n  \
         cargo xtask resolve            {:>6} ms\n  \
         npm view <pkg> dist-tags time  {:>6} ms  (once per package)\n  \
         ratio                          {:>6.2}",
        report.packages,
        report.packuments_served,
        report.runs,
        report.xtask_resolve_median_ms,
        report.npm_view_median_ms,
        report.ratio
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median(samples: &[Duration]) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

/// Serves `snapshot` (URL path -> packument bytes) on an ephemeral loopback port.
async fn serve(snapshot: Arc<BTreeMap<String, bytes::Bytes>>) -> Result<String> {
    use axum::http::StatusCode;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let app = axum::Router::new().fallback(move |uri: axum::http::Uri| {
        let snapshot = snapshot.clone();
        async move {
            let path = uri.path().trim_start_matches('/').replace("%2F", "%2f");
            match snapshot.get(&path) {
                Some(bytes) => (StatusCode::OK, bytes.clone()),
                None => (StatusCode::NOT_FOUND, bytes::Bytes::from_static(b"{}")),
            }
        }
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(format!("http://{addr}/"))
}
