//! The check that no CA bundle is left in the image: no CA variables, and no certificate that
//! the host's bundle adds to Debian's (nor a build CA file by name) in any layer.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use base64::Engine as _;

use super::checks::{clip, env_map, CA_CHECK};
use super::container::Ctx;
use crate::image::engine;
use crate::util::sha256_hex;
use template_formats::model::smoke::Check;

/// The DER bytes of every certificate in a PEM text.
pub(crate) fn pem_certificates(text: &str) -> Vec<Vec<u8>> {
    let mut certs = Vec::new();
    let mut body: Option<String> = None;
    for line in text.lines() {
        let line = line.trim();
        if line == "-----BEGIN CERTIFICATE-----" {
            body = Some(String::new());
        } else if line == "-----END CERTIFICATE-----" {
            if let Some(b64) = body.take() {
                if let Ok(der) = base64::engine::general_purpose::STANDARD.decode(b64) {
                    certs.push(der);
                }
            }
        } else if let Some(b64) = body.as_mut() {
            b64.push_str(line);
        }
    }
    certs
}

/// Byte strings that betray a certificate in a file: a run of its base64 text (inside the
/// first 64-character PEM line, so line wrapping cannot split it) and a run of its DER bytes.
pub(crate) fn certificate_needles(der: &[u8]) -> Vec<Vec<u8>> {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut needles = Vec::new();
    if b64.len() >= 60 {
        needles.push(b64.as_bytes()[16..60].to_vec());
    }
    if der.len() >= 160 {
        needles.push(der[96..160].to_vec());
    }
    needles
}

/// Finds needles in a stream of chunks, including across chunk boundaries.
pub(crate) struct NeedleScanner {
    needles: Vec<(usize, Vec<u8>)>,
    carry: Vec<u8>,
    keep: usize,
}

impl NeedleScanner {
    /// `needles` are (owner index, bytes); an empty needle is ignored.
    pub(crate) fn new(needles: Vec<(usize, Vec<u8>)>) -> NeedleScanner {
        let needles: Vec<_> = needles.into_iter().filter(|(_, n)| !n.is_empty()).collect();
        let keep = needles.iter().map(|(_, n)| n.len()).max().unwrap_or(1) - 1;
        NeedleScanner {
            needles,
            carry: Vec::new(),
            keep,
        }
    }

    /// Starts a new file: matches never span two files.
    pub(crate) fn reset(&mut self) {
        self.carry.clear();
    }

    /// Owners whose needle occurs in the data seen since the last reset, up to this chunk.
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> BTreeSet<usize> {
        let mut window = std::mem::take(&mut self.carry);
        window.extend_from_slice(chunk);
        let found = self
            .needles
            .iter()
            .filter(|(_, needle)| memchr::memmem::find(&window, needle).is_some())
            .map(|(owner, _)| *owner)
            .collect();
        let start = window.len().saturating_sub(self.keep);
        self.carry = window[start..].to_vec();
        found
    }
}

/// Where a certificate (or a CA file by name) was found in the exported image.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Finding {
    pub owner: Option<usize>,
    pub location: String,
}

/// Whether a path inside a layer is one of the build's CA files (see the Dockerfile).
fn is_build_ca_path(path: &str) -> bool {
    path.ends_with("extra-ca.pem") || path.contains("build-ca/")
}

/// Scans an image archive as `docker save` writes it (docker-archive, or OCI layout with
/// gzip-compressed or plain layer blobs), every file of every layer. Returns the findings and
/// (layers, files, bytes) scanned.
pub(crate) fn scan_image_archive(
    archive: impl Read,
    scanner: &mut NeedleScanner,
) -> Result<(Vec<Finding>, (usize, usize, u64))> {
    let mut findings = Vec::new();
    let mut stats = (0usize, 0usize, 0u64);
    let mut outer = tar::Archive::new(archive);
    for entry in outer.entries().context("reading the exported image")? {
        let mut entry = entry.context("reading the exported image")?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let outer_path = entry.path()?.to_string_lossy().into_owned();
        let mut head = vec![0u8; 512];
        let mut filled = 0;
        while filled < head.len() {
            let n = entry.read(&mut head[filled..])?;
            if n == 0 {
                break;
            }
            filled += n;
        }
        head.truncate(filled);
        let gzip = head.starts_with(&[0x1f, 0x8b]);
        let is_tar = head.len() >= 262 && &head[257..262] == b"ustar";
        let reader = std::io::Cursor::new(head).chain(entry);
        if gzip || is_tar {
            stats.0 += 1;
            let reader: Box<dyn Read> = if gzip {
                Box::new(flate2::read::MultiGzDecoder::new(reader))
            } else {
                Box::new(reader)
            };
            let mut layer = tar::Archive::new(reader);
            for file in layer
                .entries()
                .with_context(|| format!("reading layer {outer_path}"))?
            {
                let mut file = file.with_context(|| format!("reading layer {outer_path}"))?;
                let path = file.path()?.to_string_lossy().into_owned();
                if is_build_ca_path(&path) {
                    findings.push(Finding {
                        owner: None,
                        location: format!("{outer_path}: {path}"),
                    });
                }
                if !file.header().entry_type().is_file() {
                    continue;
                }
                stats.1 += 1;
                stats.2 += scan_file(
                    &mut file,
                    scanner,
                    &format!("{outer_path}: {path}"),
                    &mut findings,
                )?;
            }
        } else {
            // Configs and manifests: the Env lives here.
            stats.2 += scan_file(&mut { reader }, scanner, &outer_path, &mut findings)?;
        }
    }
    Ok((findings, stats))
}

fn scan_file(
    reader: &mut impl Read,
    scanner: &mut NeedleScanner,
    location: &str,
    findings: &mut Vec<Finding>,
) -> Result<u64> {
    scanner.reset();
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0u64;
    let mut found = BTreeSet::new();
    loop {
        let n = reader
            .read(&mut buf)
            .with_context(|| format!("reading {location}"))?;
        if n == 0 {
            break;
        }
        total += n as u64;
        found.extend(scanner.feed(&buf[..n]));
    }
    for owner in found {
        findings.push(Finding {
            owner: Some(owner),
            location: location.to_string(),
        });
    }
    Ok(total)
}

/// Where Debian (and Ubuntu) keep the certificates of the ca-certificates package.
const DISTRIBUTION_CA_DIR: &str = "/usr/share/ca-certificates";

/// The certificates below `dir` on this host, recursively; none when it does not exist.
fn host_distribution_certificates(dir: &Path) -> Vec<Vec<u8>> {
    let mut certs = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if let Ok(text) = std::fs::read_to_string(&path) {
                certs.extend(pem_certificates(&text));
            }
        }
    }
    certs
}

/// The certificates of a bundle that are not in `shipped`, each once, in bundle order.
pub(crate) fn extra_certificates(
    bundle: Vec<Vec<u8>>,
    shipped: &BTreeSet<Vec<u8>>,
) -> Vec<Vec<u8>> {
    let mut seen = BTreeSet::new();
    bundle
        .into_iter()
        .filter(|c| !shipped.contains(c) && seen.insert(c.clone()))
        .collect()
}

fn fingerprint(der: &[u8]) -> String {
    sha256_hex(der)[..16].to_string()
}

/// What the CA check looks at besides the image's layers.
pub(super) struct CaScanInputs {
    /// The image config's environment (`NAME=value`).
    pub env: Vec<String>,
    /// The manifest's `image.forbidden_env`.
    pub forbidden_env: Vec<String>,
    /// The host's CA bundle, when it has one.
    pub bundle: Option<PathBuf>,
    /// The settings' `DOCKER_HOST`: whether the engine's data root is a local path.
    pub docker_host: Option<String>,
}

pub(super) async fn ca_bundle_absent(ctx: &Ctx, inputs: CaScanInputs) -> Check {
    let name = CA_CHECK;
    match ca_bundle_absent_inner(ctx, inputs).await {
        Ok((passed, text)) => Check::new(name, passed, text),
        Err(err) => Check::new(name, false, format!("{err:#}")),
    }
}

/// The forbidden variables the image sets, as problems to report.
fn forbidden_variables(env: &[String], forbidden: &[String]) -> Vec<String> {
    let env = env_map(env);
    forbidden
        .iter()
        .filter_map(|name| {
            env.get(name.as_str())
                .map(|value| format!("the image sets {name}={value}"))
        })
        .collect()
}

async fn ca_bundle_absent_inner(ctx: &Ctx, inputs: CaScanInputs) -> Result<(bool, String)> {
    let mut problems = forbidden_variables(&inputs.env, &inputs.forbidden_env);
    let bundle = inputs.bundle;

    // The certificates of the bundle that neither the image's nor the host's distribution
    // ships are the ones a proxy (or a company) added; those must appear nowhere in the image.
    // Public roots are no evidence: NSS, Chromium and Bun binaries embed them anyway, including
    // roots that newer ca-certificates releases dropped.
    let mut extra: Vec<Vec<u8>> = Vec::new();
    let mut bundle_note = String::from("no CA bundle on this host");
    if let Some(path) = &bundle {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the CA bundle {}", path.display()))?;
        let certs = pem_certificates(&text);
        let mut shipped: BTreeSet<Vec<u8>> =
            engine::read_image_files(&ctx.docker, &ctx.image, &ctx.run_id, DISTRIBUTION_CA_DIR)
                .await?
                .iter()
                .flat_map(|(_, content)| pem_certificates(&String::from_utf8_lossy(content)))
                .collect();
        shipped.extend(host_distribution_certificates(Path::new(
            DISTRIBUTION_CA_DIR,
        )));
        extra = extra_certificates(certs, &shipped);
        bundle_note = format!(
            "{}: {} certificate(s) that no distribution ships ({})",
            path.display(),
            extra.len(),
            extra
                .iter()
                .map(|c| format!("sha256:{}", fingerprint(c)))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }

    let needles: Vec<(usize, Vec<u8>)> = extra
        .iter()
        .enumerate()
        .flat_map(|(i, der)| certificate_needles(der).into_iter().map(move |n| (i, n)))
        .collect();
    // The export goes through the engine's data root (`<root>/tmp`) as large as the image.
    let size = engine::inspect_image(&ctx.docker, &ctx.image)
        .await?
        .and_then(|i| i.size)
        .unwrap_or(0)
        .max(0) as u64;
    let needs = crate::disk::engine_need(
        &ctx.docker,
        inputs.docker_host.as_deref(),
        size,
        format!("the export of {} for the scan", ctx.image),
        &crate::util::Progress::default(),
    )
    .await;
    crate::disk::ensure_space("the CA scan", needs)?;
    let export = ctx.docker.export_image(&ctx.image);
    let reader = engine::blocking_reader(export);
    let (findings, (layers, files, bytes)) = tokio::task::spawn_blocking(move || {
        let mut scanner = NeedleScanner::new(needles);
        scan_image_archive(reader, &mut scanner)
    })
    .await
    .context("the layer scan panicked")?
    .with_context(|| format!("cannot scan the layers of {}", ctx.image))?;
    if layers == 0 {
        problems.push("the exported image held no layer to scan".to_string());
    }
    for finding in &findings {
        match finding.owner {
            Some(i) => problems.push(format!(
                "certificate sha256:{} found in {}",
                fingerprint(&extra[i]),
                finding.location
            )),
            None => problems.push(format!("build CA file in {}", finding.location)),
        }
    }
    let summary = format!(
        "{bundle_note}; scanned {layers} layer(s), {files} files, {:.0} MB",
        bytes as f64 / 1e6
    );
    if problems.is_empty() {
        Ok((true, format!("{summary}: none found, no CA variables set")))
    } else {
        Ok((
            false,
            format!("{summary}:\n{}", clip(&problems.join("\n"), 3000)),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CERT: &str = "-----BEGIN CERTIFICATE-----
MIIBszCCAVmgAwIBAgIUWl3b1t0nXyrVlXw0V5yq1A3yqkEwCgYIKoZIzj0EAwIw
LzEtMCsGA1UEAwwkY29kaW5nLWFnZW50IHNtb2tlIHRlc3QgZXh0cmEgcm9vdCBD
QTAeFw0yNjAxMDEwMDAwMDBaFw0zNjAxMDEwMDAwMDBaMC8xLTArBgNVBAMMJGNv
ZGluZy1hZ2VudCBzbW9rZSB0ZXN0IGV4dHJhIHJvb3QgQ0EwWTATBgcqhkjOPQIB
BggqhkjOPQMBBwNCAAQx5uGZkVhpL3mVRw7Gx1ZV3J9qYt2Kp4v8k8cX2cZf1n9a
Zs3bNQm4Vw8lGg2c6q2q7pGz0sCq0x8Hq8s3wC8Wo1MwUTAdBgNVHQ4EFgQUq6fK
sJ3mL2d2a9e2vG7y6c1lZ0UwHwYDVR0jBBgwFoAUq6fKsJ3mL2d2a9e2vG7y6c1l
Z0UwDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNIADBFAiEAu0h3l8tq9lGJ
-----END CERTIFICATE-----
";

    #[test]
    fn pem_bundles_yield_der_and_needles_that_survive_rewrapping() {
        let certs = pem_certificates(&format!("junk\n{CERT}{CERT}"));
        assert_eq!(certs.len(), 2);
        let needles = certificate_needles(&certs[0]);
        assert_eq!(needles.len(), 2);
        // A copy of the PEM file is found, and so is the raw DER.
        let mut scanner = NeedleScanner::new(needles.into_iter().map(|n| (0, n)).collect());
        assert_eq!(scanner.feed(CERT.as_bytes()), BTreeSet::from([0]));
        scanner.reset();
        assert_eq!(scanner.feed(&certs[0]), BTreeSet::from([0]));
        scanner.reset();
        assert!(scanner.feed(b"nothing to see here").is_empty());
    }

    #[test]
    fn only_certificates_no_distribution_ships_are_extra() {
        let shipped = BTreeSet::from([b"public root".to_vec()]);
        let bundle = vec![
            b"public root".to_vec(),
            b"proxy ca".to_vec(),
            b"proxy ca".to_vec(),
            b"company ca".to_vec(),
        ];
        assert_eq!(
            extra_certificates(bundle, &shipped),
            vec![b"proxy ca".to_vec(), b"company ca".to_vec()]
        );
    }

    #[test]
    fn needles_are_found_across_chunk_boundaries_but_not_across_files() {
        let mut scanner = NeedleScanner::new(vec![(7, b"needle-in-the-stream".to_vec())]);
        assert!(scanner.feed(b"....needle-in-").is_empty());
        assert_eq!(scanner.feed(b"the-stream...."), BTreeSet::from([7]));
        scanner.reset();
        assert!(scanner.feed(b"needle-in-").is_empty());
        scanner.reset();
        assert!(scanner.feed(b"the-stream").is_empty());
    }

    fn layer(files: &[(&str, &[u8])]) -> Vec<u8> {
        crate::image::build_inputs::context_tar(files).unwrap()
    }

    #[test]
    fn image_archives_are_scanned_layer_by_layer_plain_and_gzip() {
        let clean = layer(&[("usr/bin/tool", b"binary"), ("etc/motd", b"hello")]);
        let leaky = layer(&[("opt/x/cert.pem", CERT.as_bytes())]);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &layer(&[("tmp/build-ca/extra-ca.pem", b"-")])).unwrap();
        let gz = gz.finish().unwrap();
        let archive = layer(&[
            ("manifest.json", b"[]"),
            ("aaa/layer.tar", &clean),
            ("bbb/layer.tar", &leaky),
            ("blobs/sha256/ccc", &gz),
        ]);
        let der = pem_certificates(CERT).remove(0);
        let mut scanner = NeedleScanner::new(
            certificate_needles(&der)
                .into_iter()
                .map(|n| (0, n))
                .collect(),
        );
        let (findings, (layers, files, _)) =
            scan_image_archive(archive.as_slice(), &mut scanner).unwrap();
        assert_eq!(layers, 3);
        assert_eq!(files, 4);
        assert_eq!(
            findings,
            vec![
                Finding {
                    owner: Some(0),
                    location: "bbb/layer.tar: opt/x/cert.pem".into()
                },
                Finding {
                    owner: None,
                    location: "blobs/sha256/ccc: tmp/build-ca/extra-ca.pem".into()
                },
            ]
        );
        let (findings, _) =
            scan_image_archive(layer(&[("aaa/layer.tar", &clean)]).as_slice(), &mut scanner)
                .unwrap();
        assert!(findings.is_empty());
    }

    #[test]
    fn forbidden_variables_are_reported_by_name_and_value() {
        let env = vec![
            "PATH=/usr/bin".to_string(),
            "SSL_CERT_FILE=/tmp/ca.pem".to_string(),
        ];
        let forbidden = vec![
            "SSL_CERT_FILE".to_string(),
            "NODE_EXTRA_CA_CERTS".to_string(),
        ];
        assert_eq!(
            forbidden_variables(&env, &forbidden),
            vec!["the image sets SSL_CERT_FILE=/tmp/ca.pem"]
        );
        assert!(forbidden_variables(&env[..1], &forbidden).is_empty());
    }
}
