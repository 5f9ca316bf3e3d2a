//! The provenance identity a package's versions must carry (`packages[].provenance` in
//! template/manifest.yaml): the GitHub repository, the workflow file and the refs it publishes
//! from. Each version's npm provenance is a Sigstore bundle whose Fulcio certificate names the
//! workflow that ran (its subject alternative name) and the repository and ref it ran on; the
//! xtask (`npm/provenance.rs`) verifies the bundle and holds the claims against this record.
//!
//! The issuer is always GitHub Actions' (`token.actions.githubusercontent.com`): the only CI
//! npm's trusted publishing and `npm publish --provenance` accept from the template's packages.
//! A workflow called from another repository (a reusable workflow) signs under its own name,
//! which this record cannot express: such a package is left without an identity (and said so).

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

/// The OIDC issuer of GitHub Actions' tokens, as Fulcio records it (its `Issuer (V2)` extension,
/// sigstore/fulcio docs/oid-info.md, `1.3.6.1.4.1.57264.1.8`).
pub const GITHUB_ACTIONS_ISSUER: &str = "https://token.actions.githubusercontent.com";

/// Who must have built and published a package's versions.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ProvenanceIdentity {
    /// `owner/name` of the GitHub repository the versions are built from.
    pub repository: String,
    /// The workflow file that publishes, relative to the repository root
    /// (`.github/workflows/release.yml`).
    pub workflow: String,
    /// The git ref the workflow runs on; `*` stands for any run of characters
    /// (`refs/tags/v*`). A branch (`refs/heads/main`) is allowed but weaker: anyone who can
    /// push to it can publish.
    #[serde(rename = "ref")]
    pub ref_pattern: String,
    /// Where the maintainer read this identity (the workflow file at a tag, or the registry's
    /// provenance of a named version): a reviewer checks it against the source.
    pub source: String,
}

impl ProvenanceIdentity {
    /// The certificate identity (Fulcio's subject alternative name for a GitHub workflow) of
    /// a run of this workflow on `git_ref`.
    pub fn workflow_uri(&self, git_ref: &str) -> String {
        format!(
            "https://github.com/{}/{}@{git_ref}",
            self.repository, self.workflow
        )
    }

    /// Whether `git_ref` is one of the refs this identity publishes from.
    pub fn ref_matches(&self, git_ref: &str) -> bool {
        glob_matches(&self.ref_pattern, git_ref)
    }

    /// What is wrong with this record, if anything (`package` names it in the error).
    pub fn validate(&self, package: &str) -> Result<()> {
        let at = |what: &str| format!("`packages[{package}].provenance.{what}`");
        let parts: Vec<&str> = self.repository.split('/').collect();
        let plain = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        };
        if parts.len() != 2 || !parts.iter().all(|p| plain(p)) {
            bail!(
                "{} is `{}`; it must be a GitHub `owner/name`",
                at("repository"),
                self.repository
            );
        }
        let file = self.workflow.strip_prefix(".github/workflows/");
        if !file.is_some_and(|f| {
            plain(f.trim_end_matches(".yml").trim_end_matches(".yaml"))
                && (f.ends_with(".yml") || f.ends_with(".yaml"))
        }) {
            bail!(
                "{} is `{}`; it must be a file in `.github/workflows/` ending .yml or .yaml",
                at("workflow"),
                self.workflow
            );
        }
        if !self.ref_pattern.starts_with("refs/") || self.ref_pattern.contains(char::is_whitespace)
        {
            bail!(
                "{} is `{}`; it must be a full git ref such as `refs/tags/v*`",
                at("ref"),
                self.ref_pattern
            );
        }
        if self.source.trim().is_empty() {
            bail!(
                "{} is empty; say where the identity was read (a workflow file at a tag)",
                at("source")
            );
        }
        Ok(())
    }
}

/// `*` matches any run of characters (including none and `/`); everything else matches itself.
/// Hand-written: the only wildcard a ref pattern needs, where a glob crate would bring
/// character classes and path semantics (`*` stopping at `/`) that a tag name does not have.
pub fn glob_matches(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity() -> ProvenanceIdentity {
        ProvenanceIdentity {
            repository: "sigstore/sigstore-js".into(),
            workflow: ".github/workflows/publish.yml".into(),
            ref_pattern: "refs/tags/v*".into(),
            source: "the registry's provenance of sigstore@1.0.0".into(),
        }
    }

    #[test]
    fn refs_match_the_pattern_and_nothing_else() {
        let id = identity();
        assert!(id.ref_matches("refs/tags/v1.0.0"));
        assert!(id.ref_matches("refs/tags/v"));
        assert!(!id.ref_matches("refs/heads/main"));
        assert!(!id.ref_matches("refs/tags/x1.0.0"));
        assert!(glob_matches("refs/heads/main", "refs/heads/main"));
        assert!(!glob_matches("refs/heads/main", "refs/heads/main2"));
        assert!(glob_matches(
            "refs/tags/rust-v*-stable",
            "refs/tags/rust-v1.2-stable"
        ));
        assert!(!glob_matches(
            "refs/tags/rust-v*-stable",
            "refs/tags/rust-v1.2"
        ));
        assert!(glob_matches("a*b*c", "abbbc"));
        assert!(!glob_matches("a*ab", "ab"));
        assert_eq!(
            id.workflow_uri("refs/tags/v1.0.0"),
            "https://github.com/sigstore/sigstore-js/.github/workflows/publish.yml@refs/tags/v1.0.0"
        );
    }

    #[test]
    fn malformed_records_are_refused_naming_the_key() {
        identity().validate("sigstore").unwrap();
        for (edit, key) in [
            (
                (|i: &mut ProvenanceIdentity| i.repository = "sigstore".into())
                    as fn(&mut ProvenanceIdentity),
                "repository",
            ),
            (
                |i| i.repository = "https://github.com/a/b".into(),
                "repository",
            ),
            (|i| i.workflow = "publish.yml".into(), "workflow"),
            (|i| i.workflow = ".github/workflows/p.sh".into(), "workflow"),
            (|i| i.ref_pattern = "v*".into(), "ref"),
            (|i| i.source = " ".into(), "source"),
        ] {
            let mut id = identity();
            edit(&mut id);
            let err = format!("{:#}", id.validate("sigstore").unwrap_err());
            assert!(
                err.contains(&format!("packages[sigstore].provenance.{key}")),
                "{err}"
            );
        }
    }
}
