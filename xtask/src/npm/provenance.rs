//! npm provenance, verified offline and held against the identity the manifest records.
//!
//! A version published with provenance carries `dist.attestations` in its packument entry; the
//! registry serves, at that URL (`/-/npm/v1/attestations/<name>@<version>`), `{ "attestations":
//! [{ "predicateType", "bundle" }] }`, one of which is the SLSA provenance: a Sigstore bundle
//! (DSSE envelope over an in-toto statement, a Fulcio certificate, a Rekor entry). This is
//! npm's own form (npm/cli `lib/utils/verify-signatures.js`, which fetches
//! `dist.attestations.url` and checks the purl and sha512 subject; it pins no identity). Here
//! the bundle is verified with `template_verify::sigstore` against the trusted root (npm's
//! seeds, or `--trusted-root`) for the version's purl and the sha512 the lockfile records, and
//! its certificate's claims must be the identity template/manifest.yaml records for the
//! package (repository, workflow file, ref pattern; GitHub Actions' issuer).
//!
//! Pure functions over the answer's text; the fetch is `fetch_and_judge`, at the edge.

use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::npm::registry::{sha512_integrity, DistAttestations, Registry};
use template_formats::manifest::{ProvenanceIdentity, GITHUB_ACTIONS_ISSUER};
use template_formats::model::trust::ProvenanceRecord;
use template_verify::sigstore::{verify_bundle, Signer, Subject, TrustedRoot, Verified};

/// Statements whose predicate type starts so are SLSA provenance (v0.2 and v1).
pub(crate) const SLSA_PROVENANCE: &str = "https://slsa.dev/provenance/";

/// The in-toto statement types a provenance statement may have.
const IN_TOTO_STATEMENTS: [&str; 2] = [
    "https://in-toto.io/Statement/v0.1",
    "https://in-toto.io/Statement/v1",
];

/// How one version's provenance was judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The bundle verified and (when the manifest records one) carries the identity.
    Verified(ProvenanceRecord),
    /// The version has no provenance (the reason says how that was seen).
    Absent(String),
    /// It claims provenance, or must carry it, and what was served does not stand.
    Refused(String),
}

/// npm's purl of a version, as npm writes it into a provenance statement's subject
/// (npm-package-arg `lib/npa.js`, `toPurl`): the scope's `@` as `%40`.
pub(crate) fn purl(name: &str, version: &str) -> String {
    let name = match name.strip_prefix('@') {
        Some(scoped) => format!("%40{scoped}"),
        None => name.to_owned(),
    };
    format!("pkg:npm/{name}@{version}")
}

/// Whether the packument says the version has SLSA provenance.
pub(crate) fn claims_provenance(attestations: Option<&DistAttestations>) -> bool {
    attestations
        .and_then(|a| a.provenance.as_ref())
        .is_some_and(|p| {
            p.predicate_type
                .as_deref()
                .is_none_or(|t| t.starts_with(SLSA_PROVENANCE))
        })
}

/// The URL to fetch a version's attestations from: `dist.attestations.url`, which must be on
/// the registry's own origin (a packument naming another host is refused, not followed).
pub(crate) fn attestations_url(
    registry_base: &str,
    attestations: &DistAttestations,
) -> Result<String, String> {
    let Some(url) = attestations.url.as_deref() else {
        return Err("dist.attestations names no url".to_owned());
    };
    let origin = |u: &str| {
        reqwest::Url::parse(u)
            .ok()
            .map(|u| u.origin().ascii_serialization())
    };
    match (origin(url), origin(registry_base)) {
        (Some(a), Some(b)) if a == b => Ok(url.to_owned()),
        _ => Err(format!(
            "dist.attestations.url {url} is not on the registry {registry_base}"
        )),
    }
}

/// The parts of a GitHub workflow identity: `https://github.com/<owner>/<repo>/<path>@<ref>`.
fn split_workflow_uri(uri: &str) -> Option<(String, String, String)> {
    let rest = uri.strip_prefix("https://github.com/")?;
    let (path, git_ref) = rest.split_once('@')?;
    let mut parts = path.splitn(3, '/');
    let (owner, repo, file) = (parts.next()?, parts.next()?, parts.next()?);
    if owner.is_empty() || repo.is_empty() || file.is_empty() {
        return None;
    }
    Some((
        format!("{owner}/{repo}"),
        file.to_owned(),
        git_ref.to_owned(),
    ))
}

/// The repository a certificate names: Fulcio's `Source Repository URI` (a URL) or the
/// deprecated `GitHub Workflow Repository` (`owner/name`), as `owner/name`.
fn repository_of(claim: &str) -> &str {
    claim
        .strip_prefix("https://github.com/")
        .unwrap_or(claim)
        .trim_end_matches('/')
}

/// Holds verified certificate claims against the recorded identity (when there is one) and
/// returns the identity the certificate carries.
pub(crate) fn hold(
    claims: &Verified,
    identity: Option<&ProvenanceIdentity>,
) -> Result<(String, String, String, String), String> {
    let issuer = claims.issuer.clone().unwrap_or_default();
    let san = claims.identity.clone().unwrap_or_default();
    let parsed = split_workflow_uri(&san);
    if identity.is_none() && (parsed.is_none() || issuer != GITHUB_ACTIONS_ISSUER) {
        // Nothing is required of this package: record what signed, whatever CI it was.
        let git_ref = claims.source_ref.clone().unwrap_or_default();
        return Ok((san, String::new(), git_ref, issuer));
    }
    let Some((repository, workflow, git_ref)) = parsed else {
        return Err(format!(
            "the provenance was signed by `{san}` (issuer `{issuer}`), not by a GitHub workflow"
        ));
    };
    if issuer != GITHUB_ACTIONS_ISSUER {
        return Err(format!(
            "the provenance certificate's issuer is `{issuer}`, not GitHub Actions' {GITHUB_ACTIONS_ISSUER}"
        ));
    }
    let Some(identity) = identity else {
        return Ok((repository, workflow, git_ref, issuer));
    };
    let required = format!(
        "{} at {}",
        identity.workflow_uri("<ref>").trim_end_matches("@<ref>"),
        identity.ref_pattern
    );
    if !repository.eq_ignore_ascii_case(&identity.repository) {
        return Err(format!(
            "provenance identity: built by the workflow {san}, in repository {repository}; the manifest requires {required}"
        ));
    }
    if workflow != identity.workflow {
        return Err(format!(
            "provenance identity: built by the workflow file {workflow} ({san}); the manifest requires {required}"
        ));
    }
    if !identity.ref_matches(&git_ref) {
        return Err(format!(
            "provenance identity: built from ref {git_ref} ({san}); the manifest requires {required}"
        ));
    }
    // The repository and ref the run was based on must be the same (a workflow of this
    // repository, on this ref); the top-level workflow, when the certificate names it, must be
    // the one that signed (a reusable workflow signs under its own name).
    if let Some(source) = &claims.source_repository {
        if !repository_of(source).eq_ignore_ascii_case(&identity.repository) {
            return Err(format!(
                "provenance identity: the certificate's source repository is {source}; the manifest requires {}",
                identity.repository
            ));
        }
    }
    if let Some(source_ref) = &claims.source_ref {
        if !identity.ref_matches(source_ref) {
            return Err(format!(
                "provenance identity: the certificate's source ref is {source_ref}; the manifest requires {}",
                identity.ref_pattern
            ));
        }
    }
    if let Some(config) = &claims.build_config {
        if config != &san {
            return Err(format!(
                "provenance identity: the run's top-level workflow is {config}, but {san} signed (a reusable workflow); the manifest requires {required}"
            ));
        }
    }
    Ok((repository, workflow, git_ref, issuer))
}

/// Judges a registry's attestations answer for `name@version` with the lockfile's
/// `integrity`: the SLSA provenance bundle must verify against `root`, be about this purl and
/// digest, and carry `identity` when the manifest records one.
pub(crate) fn judge(
    answer: &str,
    root: &TrustedRoot,
    name: &str,
    version: &str,
    integrity: &str,
    identity: Option<&ProvenanceIdentity>,
) -> Outcome {
    #[derive(Deserialize)]
    struct Answer {
        attestations: Vec<Attestation>,
    }
    #[derive(Deserialize)]
    struct Attestation {
        #[serde(rename = "predicateType")]
        predicate_type: String,
        bundle: serde_json::Value,
    }
    let refused = |why: String| Outcome::Refused(format!("provenance: {why}"));
    let answer: Answer = match serde_json::from_str(answer) {
        Ok(a) => a,
        Err(e) => {
            return refused(format!(
                "the attestations answer is not npm's form ({{\"attestations\": [...]}}): {e}"
            ))
        }
    };
    let Some(provenance) = answer
        .attestations
        .iter()
        .find(|a| a.predicate_type.starts_with(SLSA_PROVENANCE))
    else {
        return refused("the registry's attestations hold no SLSA provenance".to_owned());
    };
    let Some(sha512) = sha512_integrity(integrity) else {
        return refused(format!(
            "the integrity `{integrity}` is not a sha512 digest"
        ));
    };
    let subject = Subject::Sha512(sha512.clone().try_into().expect("64 bytes"));
    let claims = match verify_bundle(
        &provenance.bundle.to_string(),
        root,
        &subject,
        Signer::Certificate,
    ) {
        Ok(c) => c,
        Err(e) => return refused(format!("{e:#}")),
    };
    if let Err(why) = statement_is_about(claims.statement.as_ref(), name, version, &sha512) {
        return refused(why);
    }
    match hold(&claims, identity) {
        Ok((repository, workflow, git_ref, issuer)) => Outcome::Verified(ProvenanceRecord {
            repository,
            workflow,
            git_ref,
            issuer,
            identity_pinned: identity.is_some(),
            predicate_type: provenance.predicate_type.clone(),
            log_integrated_time: claims.integrated_time,
        }),
        Err(why) => Outcome::Refused(why),
    }
}

/// The statement must be in-toto SLSA provenance whose subject names this purl with this
/// sha512 (the verifier has bound the digest; the name binds the package and version).
fn statement_is_about(
    statement: Option<&serde_json::Value>,
    name: &str,
    version: &str,
    sha512: &[u8],
) -> Result<(), String> {
    let Some(statement) = statement else {
        return Err("the bundle holds no in-toto statement".to_owned());
    };
    let kind = statement["_type"].as_str().unwrap_or_default();
    if !IN_TOTO_STATEMENTS.contains(&kind) {
        return Err(format!("the statement's type is `{kind}`, not in-toto's"));
    }
    let predicate = statement["predicateType"].as_str().unwrap_or_default();
    if !predicate.starts_with(SLSA_PROVENANCE) {
        return Err(format!(
            "the statement's predicate is `{predicate}`, not SLSA provenance"
        ));
    }
    let purl = purl(name, version);
    let digest = hex::encode(sha512);
    let subjects = statement["subject"].as_array().cloned().unwrap_or_default();
    let named = |s: &serde_json::Value| {
        let n = s["name"].as_str().unwrap_or_default();
        // npm adds `?repository_url=` for a registry other than registry.npmjs.org.
        n == purl || n.starts_with(&format!("{purl}?repository_url="))
    };
    if subjects
        .iter()
        .any(|s| named(s) && s["digest"]["sha512"].as_str() == Some(digest.as_str()))
    {
        return Ok(());
    }
    let listed: Vec<String> = subjects
        .iter()
        .map(|s| s["name"].as_str().unwrap_or("?").to_owned())
        .collect();
    Err(format!(
        "the statement is about {}, not {purl} with the lockfile's sha512",
        listed.join(", ")
    ))
}

/// The provenance of one version, fetched from the registry and judged (the IO edge).
/// `integrity` is the one the version's lockfile entry will record.
pub(crate) async fn fetch_and_judge(
    registry: &Registry,
    root: &TrustedRoot,
    name: &str,
    version: &str,
    integrity: &str,
    attestations: Option<&DistAttestations>,
    identity: Option<&ProvenanceIdentity>,
) -> Outcome {
    let Some(attestations) = attestations.filter(|a| claims_provenance(Some(a))) else {
        return Outcome::Absent("the registry lists no provenance (dist.attestations)".to_owned());
    };
    let url = match attestations_url(registry.base(), attestations) {
        Ok(url) => url,
        Err(why) => return Outcome::Refused(format!("provenance: {why}")),
    };
    match registry.get_optional(&url).await {
        Ok(Some(answer)) => judge(&answer, root, name, version, integrity, identity),
        Ok(None) => Outcome::Refused(format!(
            "provenance: the packument names attestations at {url}, which answers 404"
        )),
        Err(e) => Outcome::Refused(format!("provenance: {e:#}")),
    }
}

/// The later of the registry's publish time and the log's integrated time: a version the log
/// saw later than the registry says it was published is as young as the log says.
pub(crate) fn effective_publish_time(
    published: DateTime<Utc>,
    outcome: Option<&Outcome>,
) -> DateTime<Utc> {
    match outcome {
        Some(Outcome::Verified(record)) => record
            .log_integrated_time
            .map_or(published, |t| t.max(published)),
        _ => published,
    }
}

#[cfg(test)]
mod tests;
