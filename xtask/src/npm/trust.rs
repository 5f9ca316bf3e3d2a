//! Which inputs can be verified, and against what: the registry's signing keys (npm's own
//! anchors, shipped in the pinned npm, or `--trusted-keys`), cross-checked with the keys the
//! registry serves; or, for a registry that serves no signatures at all (a stripping mirror),
//! `unverified`, said loudly and refused by `--require-signed-inputs`.
//!
//! npm ships its trust anchors in every npm tarball of this line:
//! `node_modules/@sigstore/tuf/seeds.json` (@sigstore/tuf `seeds.json`) holds, base64 each,
//! the TUF targets `registry.npmjs.org/keys.json` (the registry's keys with validity windows)
//! and `trusted_root.json` (Sigstore's public-good root). The tool already downloads the
//! pinned npm and checks its sha512, so these anchors cost no look-up.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use base64::Engine as _;
use serde::Deserialize;

use crate::npm::registry::{Packument, Registry};
use crate::npm::signatures::RegistryKeys;

/// Where npm's trust anchors are inside the npm package.
pub(crate) const SEEDS_PATH: &str = "node_modules/@sigstore/tuf/seeds.json";

/// What a run was told about trust (`--trusted-keys`, `--require-signed-inputs`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustOptions {
    /// npm's `/-/npm/v1/keys` form: the keys a registry's signatures are judged by, instead
    /// of npm's own (a private registry that signs with its own key; tests).
    pub trusted_keys: Option<PathBuf>,
    /// Refuse a registry that serves no signatures, instead of reporting it `unverified`.
    pub require_signed_inputs: bool,
    /// Sigstore's `trusted_root.json` form: the root provenance bundles are verified against,
    /// instead of the public-good root in npm's seeds (a private Sigstore; tests).
    pub trusted_root: Option<PathBuf>,
}

/// How the inputs of this run are judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum InputTrust {
    /// Every version taken must carry a registry signature that verifies with these keys.
    Signed(RegistryKeys),
    /// The registry serves neither signatures nor keys: nothing about the inputs is verified
    /// beyond their sha512 integrity as the same registry states it.
    Unverified { registry: String },
}

impl InputTrust {
    /// The one-line status every command prints first.
    pub(crate) fn headline(&self) -> String {
        match self {
            InputTrust::Signed(keys) => format!(
                "inputs: registry signatures verified with {} ({} key{})",
                keys.origin,
                keys.keys.len(),
                if keys.keys.len() == 1 { "" } else { "s" }
            ),
            InputTrust::Unverified { registry } => format!(
                "inputs: UNVERIFIED: the registry {registry} serves no registry signatures and no \
                 keys (a mirror that strips them?); versions are taken on its word. \
                 --require-signed-inputs refuses this (docs/inputs.md)"
            ),
        }
    }
}

impl InputTrust {
    /// Where the keys came from, as the inventory and the receipt record it: the anchors'
    /// origin, a `--trusted-keys` file by its name only (its directory is the machine's, not
    /// the release's); `None` when the inputs are unverified.
    pub(crate) fn keys_source(&self) -> Option<String> {
        let InputTrust::Signed(keys) = self else {
            return None;
        };
        Some(match keys.origin.strip_prefix("--trusted-keys ") {
            Some(path) => format!(
                "--trusted-keys {}",
                Path::new(path)
                    .file_name()
                    .map_or_else(|| path.into(), |n| n.to_string_lossy())
            ),
            None => keys.origin.clone(),
        })
    }
}

/// The two targets of npm's `seeds.json`: the registry keys, and the Sigstore trusted root's
/// JSON.
pub(crate) fn anchors_from_seeds(seeds: &str, origin: &str) -> Result<(RegistryKeys, String)> {
    #[derive(Deserialize)]
    struct Repository {
        targets: std::collections::BTreeMap<String, String>,
    }
    let repositories: std::collections::BTreeMap<String, Repository> = serde_json::from_str(seeds)
        .with_context(|| format!("{origin} is not @sigstore/tuf's seeds.json"))?;
    let target = |name: &str| -> Result<String> {
        let encoded = repositories
            .values()
            .find_map(|r| r.targets.get(name))
            .with_context(|| format!("{origin} holds no target `{name}`"))?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .with_context(|| format!("{origin}: target `{name}` is not base64"))?;
        String::from_utf8(bytes).with_context(|| format!("{origin}: target `{name}` is not text"))
    };
    let keys = RegistryKeys::from_tuf_target(
        &target("registry.npmjs.org%2Fkeys.json")?,
        &format!("{origin} (registry.npmjs.org/keys.json)"),
    )?;
    Ok((keys, target("trusted_root.json")?))
}

/// Whether the registry signs: any version of the fetched packuments carries a signature, or
/// it serves keys.
pub(crate) fn registry_signs<'a>(
    packuments: impl IntoIterator<Item = &'a Packument>,
    served_keys: bool,
) -> bool {
    served_keys
        || packuments.into_iter().any(|p| {
            p.versions
                .values()
                .any(|v| v.dist.as_ref().is_some_and(|d| !d.signatures.is_empty()))
        })
}

/// Decides how this run's inputs are judged (the IO half: `/-/npm/v1/keys`, the pinned npm's
/// seeds, the `--trusted-keys` file). `packuments` are the ones fetched so far.
pub(crate) async fn establish<'a>(
    options: &TrustOptions,
    registry: &Registry,
    packuments: impl IntoIterator<Item = &'a Packument>,
    npm_version: &str,
    ctx: &crate::Context,
) -> Result<InputTrust> {
    let keys_url = registry.keys_url();
    let served = match registry.get_optional(&keys_url).await? {
        Some(body) => Some(RegistryKeys::from_npm_keys(&body, &keys_url)?),
        None => None,
    };
    let anchors = match &options.trusted_keys {
        Some(path) => Some(read_trusted_keys(path)?),
        None if registry_signs(packuments, served.is_some()) => {
            Some(seeds_of_pinned_npm(registry, npm_version, ctx).await?.0)
        }
        None => None,
    };
    let Some(anchors) = anchors else {
        if options.require_signed_inputs {
            bail!(
                "--require-signed-inputs: the registry {} serves no registry signatures \
                 (dist.signatures) and no keys ({keys_url} answered 404), so no input can be \
                 verified; registry.npmjs.org signs every version, so this is a stripping mirror, \
                 an outage or an attack (docs/inputs.md)",
                registry.base()
            );
        }
        return Ok(InputTrust::Unverified {
            registry: registry.base().to_owned(),
        });
    };
    if let Some(served) = &served {
        let conflicts = anchors.conflicts_with(served);
        if !conflicts.is_empty() {
            bail!(
                "the registry's keys contradict the trusted ones: {}",
                conflicts.join("; ")
            );
        }
    }
    Ok(InputTrust::Signed(anchors))
}

fn read_trusted_keys(path: &Path) -> Result<RegistryKeys> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read --trusted-keys {}", path.display()))?;
    RegistryKeys::from_npm_keys(&text, &format!("--trusted-keys {}", path.display()))
}

/// npm's anchors from the pinned npm (downloaded once, sha512-checked, cached).
pub(crate) async fn seeds_of_pinned_npm(
    registry: &Registry,
    npm_version: &str,
    ctx: &crate::Context,
) -> Result<(RegistryKeys, String)> {
    let npm = crate::npm::cli::Npm::pinned(registry, npm_version, ctx).await?;
    let path = npm.package_dir().join(SEEDS_PATH);
    let seeds = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "cannot read npm's trust anchors {} (npm {npm_version} ships them; a --trusted-keys file replaces them)",
            path.display()
        )
    })?;
    anchors_from_seeds(&seeds, &format!("npm {npm_version}'s {SEEDS_PATH}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npm_seeds_carry_the_registry_keys_and_the_trusted_root() {
        // The installed npm's own seeds (the host's npm), else the shared fixtures' copy.
        let seeds = "/usr/lib/node_modules/npm/node_modules/@sigstore/tuf/seeds.json";
        let Ok(text) = std::fs::read_to_string(seeds) else {
            eprintln!("skipped: {seeds} is absent (no system npm)");
            return;
        };
        let (keys, root) = anchors_from_seeds(&text, seeds).unwrap();
        assert!(keys.keys.iter().any(|k| k.keyid
            == "SHA256:jl3bwswu80PjjokCgh0o2w5c2U4LhQAE57gj9cz1kzA"
            && k.valid_until.is_some()));
        template_verify::sigstore::TrustedRoot::from_json(&root, seeds).unwrap();
        assert!(anchors_from_seeds("{}", "empty").is_err());
    }

    #[test]
    fn a_registry_signs_when_any_version_is_signed_or_it_serves_keys() {
        let p = |dist: serde_json::Value| -> Packument {
            serde_json::from_value(serde_json::json!({
                "name": "a", "versions": { "1.0.0": { "version": "1.0.0", "dist": dist } }
            }))
            .unwrap()
        };
        let stripped = p(serde_json::json!({ "integrity": "sha512-x" }));
        let signed = p(serde_json::json!({ "integrity": "sha512-x",
            "signatures": [{ "keyid": "SHA256:k", "sig": "MEU=" }] }));
        assert!(!registry_signs([&stripped], false));
        assert!(registry_signs([&stripped], true));
        assert!(registry_signs([&stripped, &signed], false));
    }
}
