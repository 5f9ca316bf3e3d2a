//! One package of the template at another version, for measurements: `bench rebuild` builds the
//! template again after exactly the change a release with one CLI bump makes.
//!
//! npm would re-resolve the whole tree (and a different npm writes a different lock), so the
//! lock is edited instead: the package's entry and its platform packages' entries get the other
//! version's `version`, `resolved` and `integrity` from the registry, and every other entry stays
//! byte for byte. `npm ci` then installs the other version's tarballs, checked against those
//! integrities. Fields that may differ between the versions (engines, bin, license) are kept
//! from the current lock: a fixture for build times, not a lock to release.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use serde_json::Value;

use crate::npm::registry::{Packument, VersionMeta};
use template_formats::model::lockfile::Lockfile;
use template_formats::model::package_json::PackageJson;
use template_formats::paths::{PACKAGE_JSON, PACKAGE_LOCK};

/// What a bump changed.
#[derive(Debug, PartialEq)]
pub(crate) struct Bumped {
    pub package_json: String,
    pub package_lock: String,
    /// The old version.
    pub from: String,
    /// Lock entries rewritten, by path.
    pub rewritten: Vec<String>,
    /// Lock entries of other operating systems that the registry does not carry at the new
    /// version (a partial mirror); they stay as they were, and `npm ci` on Linux skips them.
    pub kept: Vec<String>,
}

/// `name@version`, scoped names included.
pub(crate) fn parse_spec(spec: &str) -> Result<(&str, &str)> {
    match spec.rfind('@') {
        Some(at) if at > 0 && at + 1 < spec.len() => Ok((&spec[..at], &spec[at + 1..])),
        _ => bail!("`{spec}` is not NAME@VERSION (e.g. @anthropic-ai/claude-code@2.1.331)"),
    }
}

/// The registry name and version an optional dependency's spec installs: Codex's platform
/// packages are aliases (`npm:@openai/codex@0.171.0-linux-x64`).
fn target_of<'a>(dependency: &'a str, spec: &'a str) -> Result<(&'a str, &'a str)> {
    match spec.strip_prefix("npm:") {
        Some(alias) => parse_spec(alias),
        None => Ok((dependency, spec)),
    }
}

fn version_meta<'a>(
    packuments: &'a BTreeMap<String, Packument>,
    name: &str,
    version: &str,
) -> Option<&'a VersionMeta> {
    packuments.get(name)?.versions.get(version)
}

/// One change to the lock's document: the value at `keys` inside the entry at `path` (the
/// root project is `""`).
struct LockEdit {
    path: String,
    keys: Vec<String>,
    value: Value,
}

impl LockEdit {
    fn new(path: &str, keys: &[&str], value: impl Into<Value>) -> LockEdit {
        LockEdit {
            path: path.to_string(),
            keys: keys.iter().map(|k| k.to_string()).collect(),
            value: value.into(),
        }
    }
}

/// The edits that give the lock entry at `path` another version's `version`, `resolved` and
/// `integrity`.
fn dist_edits(path: &str, version: &str, meta: &VersionMeta) -> Result<Vec<LockEdit>> {
    let dist = meta.dist.as_ref();
    let (Some(tarball), Some(integrity)) = (
        dist.and_then(|d| d.tarball.clone()),
        dist.and_then(|d| d.integrity.clone()),
    ) else {
        bail!("the registry gives no tarball and integrity for {path} at {version}");
    };
    Ok(vec![
        LockEdit::new(path, &["version"], version),
        LockEdit::new(path, &["resolved"], tarball),
        LockEdit::new(path, &["integrity"], integrity),
    ])
}

/// `package_lock` with `edits` made and every other byte of npm's document as it was (the
/// format is npm's, with fields the lock type does not model, so the text is edited, not
/// written again from the type).
fn apply(package_lock: &str, edits: &[LockEdit]) -> Result<String> {
    let mut lock: Value = serde_json::from_str(package_lock).context(PACKAGE_LOCK)?;
    for edit in edits {
        let mut at = lock
            .get_mut("packages")
            .and_then(|p| p.get_mut(&edit.path))
            .with_context(|| format!("{PACKAGE_LOCK} has no {:?}", edit.path))?;
        let (last, inner) = edit.keys.split_last().expect("an edit names a field");
        for key in inner {
            at = at
                .get_mut(key)
                .with_context(|| format!("{PACKAGE_LOCK}: {:?} has no `{key}`", edit.path))?;
        }
        at.as_object_mut()
            .with_context(|| format!("{PACKAGE_LOCK}: {:?} is not an object", edit.path))?
            .insert(last.clone(), edit.value.clone());
    }
    Ok(serde_json::to_string_pretty(&lock)? + "\n")
}

/// The template's package.json and lock with `name` at `version`. `packuments` holds the
/// package's and its platform packages' packuments (those the registry has). Both files are
/// read as their types; package.json is written from its type, the lock is edited.
pub(crate) fn bump(
    package_json: &str,
    package_lock: &str,
    name: &str,
    version: &str,
    packuments: &BTreeMap<String, Packument>,
) -> Result<Bumped> {
    let mut pkg = PackageJson::parse(package_json.as_bytes(), PACKAGE_JSON)?;
    let lock = Lockfile::parse(package_lock)?;
    let from = pkg
        .dependencies
        .get(name)
        .with_context(|| format!("{PACKAGE_JSON} does not depend on {name}"))?
        .clone();
    if from == version {
        bail!("{name} is already at {version}: name another version to bump to");
    }
    let meta = version_meta(packuments, name, version)
        .with_context(|| format!("the registry has no {name}@{version}"))?;
    pkg.dependencies
        .insert(name.to_string(), version.to_string());
    if !lock.packages.contains_key("") {
        bail!("{PACKAGE_LOCK} has no root entry");
    }
    let mut edits = vec![LockEdit::new("", &["dependencies", name], version)];

    let path = format!("node_modules/{name}");
    let entry = lock
        .packages
        .get(&path)
        .with_context(|| format!("{PACKAGE_LOCK} has no {path}"))?;
    let old_optional: Vec<&String> = entry.optional_dependencies.keys().collect();
    let new_optional: Vec<&String> = meta.optional_dependencies.keys().collect();
    if old_optional != new_optional {
        bail!(
            "{name}@{version} has other platform packages than {from} ({new_optional:?} against \
             {old_optional:?}); run `cargo xtask lock` for a real lock instead"
        );
    }
    edits.extend(dist_edits(&path, version, meta)?);
    edits.push(LockEdit::new(
        &path,
        &["optionalDependencies"],
        serde_json::to_value(&meta.optional_dependencies)?,
    ));
    let mut rewritten = vec![path];
    let mut kept = Vec::new();
    for (dependency, spec) in &meta.optional_dependencies {
        let path = format!("node_modules/{dependency}");
        let entry = lock
            .packages
            .get(&path)
            .with_context(|| format!("{PACKAGE_LOCK} has no {path}"))?;
        let (target, target_version) = target_of(dependency, spec)?;
        match version_meta(packuments, target, target_version) {
            Some(meta) => {
                edits.extend(dist_edits(&path, target_version, meta)?);
                rewritten.push(path);
            }
            None => {
                let linux = entry
                    .os
                    .as_ref()
                    .is_none_or(|os| os.iter().any(|o| o == "linux"));
                if linux {
                    bail!(
                        "the registry has no {target}@{target_version}, the Linux package \
                         {dependency} of {name}@{version}"
                    );
                }
                kept.push(path);
            }
        }
    }
    Ok(Bumped {
        package_json: pkg.to_text(),
        package_lock: apply(package_lock, &edits)?,
        from,
        rewritten,
        kept,
    })
}

/// The registry names whose packuments [`bump`] reads: the package's, then the targets of its
/// platform packages in the current lock (the new version has the same ones, or `bump` refuses).
pub(crate) fn packuments_needed(package_lock: &str, name: &str) -> Result<Vec<String>> {
    let lock = Lockfile::parse(package_lock)?;
    let mut names = vec![name.to_string()];
    let Some(entry) = lock.packages.get(&format!("node_modules/{name}")) else {
        return Ok(names);
    };
    for dependency in entry.optional_dependencies.keys() {
        // An aliased entry names its registry package in `name`.
        let target = lock
            .packages
            .get(&format!("node_modules/{dependency}"))
            .and_then(|e| e.name.clone())
            .unwrap_or_else(|| dependency.clone());
        if !names.contains(&target) {
            names.push(target);
        }
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packument(name: &str, versions: &[(&str, &[(&str, &str)])]) -> (String, Packument) {
        let versions: serde_json::Map<String, Value> = versions
            .iter()
            .map(|(v, optional)| {
                let optional: BTreeMap<&str, &str> = optional.iter().copied().collect();
                (
                    v.to_string(),
                    serde_json::json!({
                        "version": v,
                        "optionalDependencies": optional,
                        "dist": {
                            "tarball": format!("https://r/{name}-{v}.tgz"),
                            "integrity": format!("sha512-{name}-{v}"),
                        },
                    }),
                )
            })
            .collect();
        let p = serde_json::json!({"name": name, "versions": versions});
        (name.to_string(), serde_json::from_value(p).unwrap())
    }

    /// The template's package.json as `lock` writes it.
    fn package_json() -> String {
        PackageJson::pinning([
            ("cli".to_string(), "1.0.0".to_string()),
            ("other".to_string(), "3.0.0".to_string()),
        ])
        .to_text()
    }

    const LOCK: &str = r#"{
  "name": "t",
  "lockfileVersion": 3,
  "packages": {
    "": {"name": "t", "dependencies": {"cli": "1.0.0", "other": "3.0.0"}},
    "node_modules/cli": {"version": "1.0.0", "resolved": "https://r/cli-1.0.0.tgz",
      "integrity": "sha512-cli-1.0.0", "hasInstallScript": true,
      "optionalDependencies": {"cli-linux-x64": "1.0.0", "cli-darwin-arm64": "1.0.0"}},
    "node_modules/cli-darwin-arm64": {"version": "1.0.0", "resolved": "https://r/cli-darwin-arm64-1.0.0.tgz",
      "integrity": "sha512-cli-darwin-arm64-1.0.0", "optional": true, "os": ["darwin"]},
    "node_modules/cli-linux-x64": {"version": "1.0.0", "resolved": "https://r/cli-linux-x64-1.0.0.tgz",
      "integrity": "sha512-cli-linux-x64-1.0.0", "optional": true, "os": ["linux"]},
    "node_modules/other": {"version": "3.0.0", "resolved": "https://r/other-3.0.0.tgz",
      "integrity": "sha512-other-3.0.0"}
  }
}
"#;

    fn registry(with_darwin: bool) -> BTreeMap<String, Packument> {
        let platforms: &[(&str, &str)] =
            &[("cli-darwin-arm64", "1.1.0"), ("cli-linux-x64", "1.1.0")];
        let mut all = BTreeMap::from([
            packument("cli", &[("1.0.0", platforms), ("1.1.0", platforms)]),
            packument("cli-linux-x64", &[("1.0.0", &[]), ("1.1.0", &[])]),
        ]);
        if with_darwin {
            all.extend([packument("cli-darwin-arm64", &[("1.1.0", &[])])]);
        }
        all
    }

    #[test]
    fn a_bump_rewrites_the_package_and_its_platform_packages_and_nothing_else() {
        let bumped = bump(&package_json(), LOCK, "cli", "1.1.0", &registry(true)).unwrap();
        assert_eq!(bumped.from, "1.0.0");
        assert_eq!(
            bumped.rewritten,
            [
                "node_modules/cli",
                "node_modules/cli-darwin-arm64",
                "node_modules/cli-linux-x64"
            ]
        );
        let pkg: Value = serde_json::from_str(&bumped.package_json).unwrap();
        assert_eq!(pkg["dependencies"]["cli"], "1.1.0");
        assert_eq!(pkg["dependencies"]["other"], "3.0.0");
        let lock: Value = serde_json::from_str(&bumped.package_lock).unwrap();
        let packages = &lock["packages"];
        assert_eq!(packages[""]["dependencies"]["cli"], "1.1.0");
        assert_eq!(
            packages["node_modules/cli-linux-x64"]["integrity"],
            "sha512-cli-linux-x64-1.1.0"
        );
        assert_eq!(
            packages["node_modules/cli"]["resolved"],
            "https://r/cli-1.1.0.tgz"
        );
        assert_eq!(packages["node_modules/cli"]["hasInstallScript"], true);
        let before: Value = serde_json::from_str(LOCK).unwrap();
        assert_eq!(
            packages["node_modules/other"],
            before["packages"]["node_modules/other"]
        );
    }

    #[test]
    fn another_systems_package_missing_from_a_partial_mirror_is_kept_but_linux_is_required() {
        let bumped = bump(&package_json(), LOCK, "cli", "1.1.0", &registry(false)).unwrap();
        assert_eq!(bumped.kept, ["node_modules/cli-darwin-arm64"]);
        let mut no_linux = registry(true);
        no_linux.remove("cli-linux-x64");
        let err = bump(&package_json(), LOCK, "cli", "1.1.0", &no_linux).unwrap_err();
        assert!(err.to_string().contains("cli-linux-x64@1.1.0"), "{err}");
    }

    #[test]
    fn unknown_versions_same_versions_and_other_platform_sets_are_refused() {
        let err = |name, version, registry| {
            bump(&package_json(), LOCK, name, version, &registry)
                .unwrap_err()
                .to_string()
        };
        assert!(err("cli", "9.9.9", registry(true)).contains("no cli@9.9.9"));
        assert!(err("cli", "1.0.0", registry(true)).contains("already at 1.0.0"));
        assert!(err("nope", "1.0.0", registry(true)).contains("does not depend on nope"));
        let fewer = BTreeMap::from([packument(
            "cli",
            &[("1.1.0", &[("cli-linux-x64", "1.1.0")])],
        )]);
        assert!(err("cli", "1.1.0", fewer).contains("other platform packages"));
    }

    #[test]
    fn aliased_platform_packages_are_read_from_their_registry_name() {
        assert_eq!(
            target_of(
                "@openai/codex-linux-x64",
                "npm:@openai/codex@0.171.0-linux-x64"
            )
            .unwrap(),
            ("@openai/codex", "0.171.0-linux-x64")
        );
        assert_eq!(
            target_of("cli-linux-x64", "1.1.0").unwrap(),
            ("cli-linux-x64", "1.1.0")
        );
        assert_eq!(
            packuments_needed(LOCK, "cli").unwrap(),
            ["cli", "cli-darwin-arm64", "cli-linux-x64"]
        );
        assert_eq!(parse_spec("@a/b@1.2.3").unwrap(), ("@a/b", "1.2.3"));
        assert!(parse_spec("@a/b").is_err());
    }
}
