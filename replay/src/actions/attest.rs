//! `actions/attest`, `actions/attest-build-provenance`, `actions/attest-sbom`.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context as _, Result};
use base64::Engine as _;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::glob;
use crate::leg::{Leg, StepEnd};
use crate::runner::give_to_runner;

use super::inputs::truthy_input;
use super::signing::{custom_predicate, provenance_predicate, statement, JobIdentity};

/// The file in a leg's runner temp dir where the attest stand-in records what was attested:
/// one JSON object per line, `{"action", "subjects": [{"name", "digest", "path"?}],
/// "push_to_registry", "predicate_type", "sigstore_instance", "sbom_sha256"?}`.
pub const ATTESTATIONS_FILE: &str = "attestations.jsonl";

/// One subject an attestation names.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct Subject {
    pub name: String,
    /// `sha256:<hex>`.
    pub digest: String,
    /// The file it was read from, for `subject-path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// Everything one attest step recorded.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Attestation {
    pub action: String,
    pub subjects: Vec<Subject>,
    pub push_to_registry: bool,
    /// `https://slsa.dev/provenance/v1`, `https://spdx.dev/Document/v2.3`, ...
    #[serde(default)]
    pub predicate_type: String,
    /// The Sigstore instance the real action would sign with: `public-good` when the event
    /// payload's `repository.visibility` is `public`, else `github` (actions/attest v4.1.0,
    /// src/main.ts). A schedule payload has no repository, so a scheduled run signs with
    /// GitHub's instance.
    #[serde(default)]
    pub sigstore_instance: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sbom_sha256: Option<String>,
}

/// The attestations recorded in a leg's temp dir (its `dir`), in step order.
pub fn recorded_attestations(leg_dir: &Path) -> Vec<Attestation> {
    let text =
        std::fs::read_to_string(leg_dir.join("temp").join(ATTESTATIONS_FILE)).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).expect("the stand-in writes valid lines"))
        .collect()
}

fn is_sha256_digest(s: &str) -> bool {
    s.strip_prefix("sha256:").is_some_and(|h| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

enum SbomKind {
    Spdx,
    CycloneDx,
}

/// How the real action tells the formats apart (actions/attest v4.1.0, src/helper/sbom.ts,
/// `parseSBOMFromPath`): SPDX when `spdxVersion` and `SPDXID` are both truthy, else CycloneDX
/// when `bomFormat`, `serialNumber` and `specVersion` all are, else `Unsupported SBOM format`.
/// A CycloneDX document without the serial number the CycloneDX schema makes optional is
/// refused.
fn sbom_kind(doc: &serde_json::Value) -> Option<SbomKind> {
    let truthy = |key: &str| match doc.get(key) {
        None | Some(serde_json::Value::Null) | Some(serde_json::Value::Bool(false)) => false,
        Some(serde_json::Value::String(s)) => !s.is_empty(),
        Some(serde_json::Value::Number(n)) => n.as_f64() != Some(0.0),
        Some(_) => true,
    };
    if truthy("spdxVersion") && truthy("SPDXID") {
        Some(SbomKind::Spdx)
    } else if ["bomFormat", "serialNumber", "specVersion"]
        .iter()
        .all(|k| truthy(k))
    {
        Some(SbomKind::CycloneDx)
    } else {
        None
    }
}

/// What the real actions check before they sign: the token may mint an OIDC token and write
/// attestations (and packages, to push to a registry), the subject is given one way only and
/// well formed, subject files exist, and an SBOM is an SPDX or CycloneDX JSON document of at
/// most 16 MB. It records the subjects, and with a signer ([`Replay::sigstore`]) has the
/// statement the real action makes signed as the job, writing the bundle where the real
/// action does and naming it in `bundle-path`.
///
/// [`Replay::sigstore`]: crate::Replay::sigstore
pub(super) fn attest(
    leg: &mut Leg,
    action: &str,
    with: &BTreeMap<String, String>,
    logf: &mut std::fs::File,
) -> Result<StepEnd> {
    let input = |k: &str| with.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
    let granted = |scope: &str| leg.token.split('.').any(|p| p == format!("{scope}=write"));
    for scope in ["id-token", "attestations"] {
        if !granted(scope) {
            bail!("{action} needs `permissions: {scope}: write` on the job");
        }
    }
    let push = truthy_input(with, "push-to-registry", false)?;
    if push && !granted("packages") {
        bail!("{action}: push-to-registry needs `permissions: packages: write`");
    }
    let mut subjects = Vec::new();
    match (input("subject-path"), input("subject-digest"), input("subject-name"), input("subject-checksums")) {
        (Some(paths), None, None, None) => {
            if push {
                bail!("{action}: push-to-registry needs subject-name and subject-digest, not subject-path");
            }
            let patterns = paths.replace(',', "\n");
            let matched = glob::expand(&leg.workspace, &patterns, false);
            if matched.files.is_empty() {
                bail!("{action}: subject-path `{paths}` matches no file");
            }
            for file in matched.files {
                let bytes = std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
                subjects.push(Subject {
                    name: file.file_name().unwrap_or_default().to_string_lossy().into_owned(),
                    digest: format!("sha256:{}", hex::encode(Sha256::digest(&bytes))),
                    path: Some(file.display().to_string()),
                });
            }
        }
        (None, Some(digest), Some(name), None) => {
            if !is_sha256_digest(digest) {
                bail!("{action}: subject-digest `{digest}` is not sha256:<64 lowercase hex>");
            }
            let valid_name = !name.contains(['@', ' ', '\n'])
                && !name.contains("://")
                && name.split('/').count() >= 2
                && name == name.to_ascii_lowercase()
                && !name.rsplit('/').next().unwrap_or("").contains(':');
            if push && !valid_name {
                bail!("{action}: subject-name `{name}` is not a registry repository (host/path, lower case, no tag or digest)");
            }
            if name.is_empty() {
                bail!("{action}: subject-name is empty");
            }
            subjects.push(Subject { name: name.to_string(), digest: digest.to_string(), path: None });
        }
        (None, None, None, None) => bail!("{action}: one of subject-path, subject-digest (with subject-name) or subject-checksums must be provided"),
        (None, Some(_), None, None) | (None, None, Some(_), None) => {
            bail!("{action}: subject-digest and subject-name go together")
        }
        _ => bail!("{action}: give the subject one way: subject-path, subject-digest with subject-name, or subject-checksums"),
    }
    let mut sbom_sha256 = None;
    let mut predicate_type = crate::gh_state::SLSA_PROVENANCE_V1.to_string();
    // None: the SLSA provenance of the job.
    let mut predicate: Option<Value> = None;
    let sbom = match action {
        "actions/attest-sbom" => true,
        // actions/attest v4.1.0 src/detect.ts: sbom-path makes an SBOM attestation, and may not
        // be combined with predicate inputs.
        "actions/attest" => {
            if input("sbom-path").is_some()
                && ["predicate-type", "predicate", "predicate-path"]
                    .iter()
                    .any(|k| input(k).is_some())
            {
                bail!("{action}: Cannot specify sbom-path together with predicate-type, predicate, or predicate-path");
            }
            input("sbom-path").is_some()
        }
        _ => false,
    };
    if sbom {
        let path = input("sbom-path")
            .ok_or_else(|| anyhow!("{action}: Input required and not supplied: sbom-path"))?;
        let file = glob::normalize(&leg.workspace, path);
        let bytes = std::fs::read(&file)
            .with_context(|| format!("{action}: sbom-path {}", file.display()))?;
        if bytes.len() > 16 << 20 {
            bail!("{action}: {} is larger than 16 MB", file.display());
        }
        let doc: serde_json::Value = serde_json::from_slice(&bytes)
            .with_context(|| format!("{action}: {} is not JSON", file.display()))?;
        // actions/attest v4.1.0 src/sbom.ts, `generateSBOMPredicate`: the document itself is
        // the predicate; SPDX's type carries the version after `SPDX-`.
        predicate_type = match sbom_kind(&doc) {
            Some(SbomKind::Spdx) => {
                let version = doc["spdxVersion"].as_str().unwrap_or_default();
                let version = version.split('-').nth(1).unwrap_or("undefined");
                format!("https://spdx.dev/Document/v{version}")
            }
            Some(SbomKind::CycloneDx) => crate::gh_state::CYCLONEDX_BOM.to_string(),
            None => bail!(
                "{action}: Unsupported SBOM format: {} is neither SPDX (spdxVersion and SPDXID) \
                 nor CycloneDX (bomFormat, serialNumber and specVersion)",
                file.display()
            ),
        };
        sbom_sha256 = Some(hex::encode(Sha256::digest(&bytes)));
        predicate = Some(doc);
    } else if with.contains_key("sbom-path") && action != "actions/attest" {
        bail!("{action} has no input `sbom-path`");
    } else if let Some(custom) = input("predicate-type") {
        if input("predicate").is_none() && input("predicate-path").is_none() {
            bail!("{action}: predicate-type needs predicate or predicate-path");
        }
        predicate_type = custom.to_string();
        predicate = Some(
            custom_predicate(&leg.workspace, input("predicate"), input("predicate-path"))
                .with_context(|| format!("{action}: the predicate"))?,
        );
    }
    let public = leg.env.run.event_payload()["repository"]["visibility"].as_str() == Some("public");
    let instance = if public { "public-good" } else { "github" };
    let record = Attestation {
        action: action.trim_start_matches("actions/").to_string(),
        subjects,
        push_to_registry: push,
        predicate_type: predicate_type.clone(),
        sigstore_instance: instance.to_string(),
        sbom_sha256,
    };
    let line = serde_json::to_string(&record)?;
    // Signed first (actions/attest v4.1.0 src/main.ts, `createAttestation`): a signing failure
    // fails the step before anything is stored.
    let mut end = StepEnd::ok();
    if let Some(signer) = leg.env.run.replay.signer.clone() {
        let identity = JobIdentity::of(leg, instance);
        let predicate = predicate.unwrap_or_else(|| provenance_predicate(&identity));
        let statement = statement(&record.subjects, &predicate_type, predicate);
        let bundle = signer(&statement, &identity)
            .with_context(|| format!("{action}: signing the attestation"))?;
        let path = write_bundle(&leg.temp, &bundle)?;
        writeln!(
            logf,
            "signed as {} ({} Sigstore instance of the test's signer); bundle written to {}",
            identity.workflow_uri(),
            instance,
            path.display()
        )?;
        end.outputs
            .insert("bundle-path".into(), path.display().to_string());
    } else {
        writeln!(
            logf,
            "no Sigstore signer registered (Replay::sigstore): nothing signed, no bundle-path"
        )?;
    }
    // What GitHub's attestation API then serves (`gh attestation verify`).
    let run = leg.env.run;
    crate::gh_state::append_record(
        &run.replay.gh_state_dir(),
        &crate::gh_state::AttestationRecord {
            repository: run.replay.repository.clone(),
            signer_workflow: format!(
                "{}/.github/workflows/{}",
                run.replay.repository, run.workflow.file
            ),
            // Fulcio's certificate for the run: its GITHUB_REF, and the replay stands in for
            // GitHub-hosted runners.
            source_ref: run.replay.git_ref.clone(),
            runner_environment: "github-hosted".into(),
            predicate_type: predicate_type.clone(),
            subjects: record
                .subjects
                .iter()
                .map(|s| crate::gh_state::RecordSubject {
                    name: s.name.clone(),
                    digest: s.digest.clone(),
                })
                .collect(),
        },
    )?;
    // Signed and stored in GitHub's API by now; only then does the real action read registry
    // credentials to push the bundle, and fail without them (the step fails, the attestation
    // stays stored).
    if push {
        let name = &record.subjects[0].name;
        registry_credentials(Path::new(crate::RUNNER_HOME), name)
            .with_context(|| format!("{action}: pushing the attestation of {name}"))?;
        writeln!(
            logf,
            "registry credentials found for {name}; the stand-in pushes nothing to the registry"
        )?;
    }
    let store = leg.temp.join(ATTESTATIONS_FILE);
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&store)?;
    writeln!(f, "{line}")?;
    writeln!(
        logf,
        "attested {} subject(s): {line}",
        record.subjects.len()
    )?;
    // Stored in GitHub's attestation API: its id, and the URL actions/attest v4.1.0 makes of
    // it (src/main.ts, `attestationURL`).
    let id = crate::gh_state::attestation_records(&run.replay.gh_state_dir())?.len();
    end.outputs.insert("attestation-id".into(), id.to_string());
    end.outputs.insert(
        "attestation-url".into(),
        format!(
            "https://github.com/{}/attestations/{id}",
            run.replay.repository
        ),
    );
    Ok(end)
}

/// Where actions/attest v4.1.0 writes a bundle (src/main.ts): a fresh directory under
/// `RUNNER_TEMP` (`fs.mkdtemp(RUNNER_TEMP + '/')`, six random characters), file
/// `attestation.json`, the bundle as one JSON line (appended); the path is also appended to
/// `RUNNER_TEMP/created_attestation_paths.txt`.
fn write_bundle(runner_temp: &Path, bundle: &Value) -> Result<PathBuf> {
    let dir = tempfile::Builder::new()
        .prefix("")
        .rand_bytes(6)
        .tempdir_in(runner_temp)
        .with_context(|| format!("creating a directory in {}", runner_temp.display()))?
        .keep();
    let path = dir.join("attestation.json");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)?;
    writeln!(f, "{bundle}")?;
    let paths = runner_temp.join("created_attestation_paths.txt");
    let mut p = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&paths)?;
    writeln!(p, "{}", path.display())?;
    for made in [&dir, &path, &paths] {
        give_to_runner(made)?;
    }
    Ok(path)
}

/// The registry credentials actions/attest uses to push an attestation, as @sigstore/oci 0.6.0
/// reads them (sigstore/sigstore-js, packages/oci/src/credentials.ts, `getRegistryCredentials`;
/// actions/attest v4.1.0 src/attest.ts calls it when `push-to-registry` is true): only
/// `$HOME/.docker/config.json` (no `DOCKER_CONFIG`, no credential helpers, no environment),
/// the first `auths` key that contains the image's registry, else the registry itself; its
/// `auth` is base64 `user:password`. The errors are the upstream's words.
pub fn registry_credentials(home: &Path, image: &str) -> Result<(String, String)> {
    // packages/oci/src/name.ts, parseImageName: `<domain[:port]>/<path>`.
    let registry = match image.split_once('/') {
        Some((domain, path)) if !domain.is_empty() && !path.is_empty() => domain,
        _ => bail!("Invalid image name: {image}"),
    };
    let file = home.join(".docker").join("config.json");
    let Ok(content) = std::fs::read_to_string(&file) else {
        bail!("No credential file found at {}", file.display());
    };
    let config: serde_json::Value = serde_json::from_str(&content)
        .with_context(|| format!("{} is not JSON", file.display()))?;
    let auths = config.get("auths").and_then(serde_json::Value::as_object);
    let key = auths
        .and_then(|a| a.keys().find(|k| k.contains(registry)).cloned())
        .unwrap_or_else(|| registry.to_string());
    let Some(entry) = auths.and_then(|a| a.get(&key)) else {
        bail!("No credentials found for registry {registry}");
    };
    // fromBasicAuth(creds.auth): a missing `auth` throws inside Buffer.from.
    let auth = entry
        .get("auth")
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| anyhow!("{}: auths[{key:?}] has no `auth`", file.display()))?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(auth)
        .with_context(|| format!("{}: auths[{key:?}].auth is not base64", file.display()))?;
    let text = String::from_utf8_lossy(&decoded);
    let (user, password) = text.split_once(':').unwrap_or((&text, ""));
    Ok((user.to_string(), password.to_string()))
}
