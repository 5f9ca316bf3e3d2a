//! Pure checks over a generated `package-lock.json`, and the inventory rows derived from it.
//!
//! npm writes the lockfile; these functions decide whether it may be committed. npm drops an
//! optional dependency it cannot resolve silently with exit 0, so platform binaries are checked
//! here rather than trusted.

use std::collections::BTreeMap;

use crate::npm::resolve::required_platform_binaries;
use anyhow::{bail, Context, Result};
use template_formats::model::inventory::{InventoryPackage, License, Publisher, Summary};
pub(crate) use template_formats::model::lockfile::name_of;
use template_formats::model::lockfile::{LockEntry, Lockfile};

/// What the checks need besides the lockfile.
pub(crate) struct Policy<'a> {
    /// The registry base, with a trailing slash.
    pub registry: &'a str,
    /// package.json's `dependencies` (exact versions).
    pub pinned: &'a BTreeMap<String, String>,
    pub install_scripts_allowed: &'a [String],
    pub install_scripts_skipped: &'a [String],
    pub cpus: &'a [&'static str],
}

/// Every reason the lockfile may not be committed; empty when it may.
pub(crate) fn check(lock: &Lockfile, policy: &Policy<'_>) -> Vec<String> {
    let mut problems = Vec::new();
    if lock.lockfile_version != 3 {
        problems.push(format!(
            "lockfileVersion is {}, expected 3",
            lock.lockfile_version
        ));
    }
    let https_or_loopback = policy.registry.starts_with("https://")
        || (policy.registry.starts_with("http://")
            && template_verify::http::is_loopback_url(policy.registry));
    if !https_or_loopback {
        problems.push(format!("the registry {} is not https", policy.registry));
    }
    for (path, entry) in lock.installed() {
        let name = name_of(path, entry);
        if entry.link {
            problems.push(format!("{name} ({path}) is a link, not a registry package"));
            continue;
        }
        match entry.integrity.as_deref() {
            Some(i) if i.starts_with("sha512-") => {}
            Some(i) => problems.push(format!(
                "{name} ({path}) has integrity `{}`, not sha512",
                i.split('-').next().unwrap_or(i)
            )),
            None => problems.push(format!("{name} ({path}) has no integrity")),
        }
        match entry.resolved.as_deref() {
            Some(url) if url.starts_with(policy.registry) => {}
            Some(url) => problems.push(format!(
                "{name} ({path}) resolves to {url}, not to a tarball on the registry {}",
                policy.registry
            )),
            None => problems.push(format!("{name} ({path}) has no `resolved` URL")),
        }
        if entry.has_install_script
            && !policy.install_scripts_allowed.contains(&name)
            && !policy.install_scripts_skipped.contains(&name)
        {
            problems.push(format!(
                "{name} ({path}) has an install script that nobody reviewed: review it, then add it to \
                 install_scripts_allowed (it runs) or install_scripts_skipped (it does not) in the manifest"
            ));
        }
        // Platform binaries: every linux glibc binary a package names must be in the lock.
        let (binaries, missing_cpus) =
            required_platform_binaries(&entry.optional_dependencies, policy.cpus);
        for cpu in missing_cpus {
            problems.push(format!("{name} names no linux {cpu} binary package"));
        }
        for binary in binaries {
            let found = nested_lookup(lock, path, &binary.dependency);
            let version = found.and_then(|e| e.version.as_deref());
            if version != Some(binary.version.as_str()) {
                problems.push(format!(
                    "{name}: its linux {} binary {}@{} is missing from the lockfile{} (npm drops optional dependencies it cannot resolve)",
                    binary.cpu,
                    binary.package,
                    binary.version,
                    version.map(|v| format!(" (found {v})")).unwrap_or_default()
                ));
            }
        }
    }
    // package.json and the lockfile agree.
    let root_deps = lock.packages.get("").map(|r| &r.dependencies);
    if root_deps != Some(policy.pinned) {
        problems.push("the lockfile's root dependencies differ from package.json".to_owned());
    }
    for (name, version) in policy.pinned {
        let entry = lock.packages.get(&format!("node_modules/{name}"));
        if entry.and_then(|e| e.version.as_deref()) != Some(version.as_str()) {
            problems.push(format!(
                "{name}: package.json pins {version}, the lockfile does not install it"
            ));
        }
    }
    problems
}

/// The entry node's resolution would find for `dependency` required from `from`.
fn nested_lookup<'a>(lock: &'a Lockfile, from: &str, dependency: &str) -> Option<&'a LockEntry> {
    let mut base = from.to_owned();
    loop {
        let candidate = if base.is_empty() {
            format!("node_modules/{dependency}")
        } else {
            format!("{base}/node_modules/{dependency}")
        };
        if let Some(entry) = lock.packages.get(&candidate) {
            return Some(entry);
        }
        if base.is_empty() {
            return None;
        }
        base = match base.rfind("/node_modules/") {
            Some(i) => base[..i].to_owned(),
            None => String::new(),
        };
    }
}

/// Classifies a package.json `license` value.
pub(crate) fn classify_license(value: Option<&serde_json::Value>) -> License {
    let text = match value {
        None | Some(serde_json::Value::Null) => return License::Undeclared,
        Some(serde_json::Value::String(s)) => s.trim().to_owned(),
        // The old `{ "type": "MIT", "url": ... }` form.
        Some(serde_json::Value::Object(o)) => match o.get("type").and_then(|t| t.as_str()) {
            Some(t) => t.to_owned(),
            None => {
                return License::Unrecognized {
                    text: value.unwrap().to_string(),
                }
            }
        },
        Some(other) => {
            return License::Unrecognized {
                text: other.to_string(),
            }
        }
    };
    if text.is_empty() {
        return License::Undeclared;
    }
    if text.to_ascii_uppercase().starts_with("SEE LICENSE IN")
        || text.eq_ignore_ascii_case("UNLICENSED")
    {
        return License::Reference { text };
    }
    match spdx::Expression::parse(&text) {
        Ok(_) => License::Spdx { expression: text },
        Err(_) => License::Unrecognized { text },
    }
}

/// One inventory row per installed lockfile entry, sorted by path.
pub(crate) fn inventory_rows(
    lock: &Lockfile,
    pinned: &BTreeMap<String, String>,
    published: &BTreeMap<(String, String), String>,
    publishers: &BTreeMap<(String, String), Publisher>,
) -> Result<Vec<InventoryPackage>> {
    let mut rows = Vec::new();
    for (path, entry) in lock.installed() {
        let name = name_of(path, entry);
        let version = entry
            .version
            .clone()
            .with_context(|| format!("{path} has no version in the lockfile"))?;
        let prerelease = match semver::Version::parse(&version) {
            Ok(v) => !v.pre.is_empty(),
            Err(_) => bail!("{name} ({path}): version `{version}` is not semver"),
        };
        rows.push(InventoryPackage {
            top_level: path == format!("node_modules/{name}") && pinned.contains_key(&name),
            published: published.get(&(name.clone(), version.clone())).cloned(),
            publisher: publishers.get(&(name.clone(), version.clone())).cloned(),
            signed_by: None,
            provenance: None,
            evidence: Default::default(),
            install_scripts: None,
            path: path.to_owned(),
            integrity: entry.integrity.clone().unwrap_or_default(),
            resolved: entry.resolved.clone().unwrap_or_default(),
            install_script: entry.has_install_script,
            prerelease,
            license: classify_license(entry.license.as_ref()),
            os: entry.os.clone(),
            cpu: entry.cpu.clone(),
            libc: entry.libc.clone(),
            name,
            version,
        });
    }
    Ok(rows)
}

pub(crate) fn summarize(rows: &[InventoryPackage]) -> Summary {
    let count = |f: &dyn Fn(&InventoryPackage) -> bool| rows.iter().filter(|r| f(r)).count();
    Summary {
        packages: rows.len(),
        top_level: count(&|r| r.top_level),
        platform_binaries: count(&|r| !r.top_level && (r.os.is_some() || r.cpu.is_some())),
        install_scripts: count(&|r| r.install_script),
        prerelease: count(&|r| r.prerelease),
        license_undeclared: count(&|r| r.license == License::Undeclared),
        license_reference: count(&|r| matches!(r.license, License::Reference { .. })),
        license_unrecognized: count(&|r| matches!(r.license, License::Unrecognized { .. })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const REG: &str = "https://registry.npmjs.org/";

    fn entry(name: &str, version: &str) -> serde_json::Value {
        json!({
            "version": version,
            "resolved": format!("{REG}{name}/-/{name}-{version}.tgz"),
            "integrity": "sha512-AAAA",
            "license": "MIT",
        })
    }

    fn lock_with(extra: &[(&str, serde_json::Value)]) -> Lockfile {
        let mut packages = serde_json::Map::new();
        packages.insert(
            "".into(),
            json!({ "name": "t", "dependencies": { "tool": "1.0.0" } }),
        );
        let mut tool = entry("tool", "1.0.0");
        tool["optionalDependencies"] =
            json!({ "tool-linux-x64": "1.0.0", "tool-linux-arm64": "1.0.0" });
        packages.insert("node_modules/tool".into(), tool);
        let mut x64 = entry("tool-linux-x64", "1.0.0");
        x64["os"] = json!(["linux"]);
        x64["cpu"] = json!(["x64"]);
        x64["optional"] = json!(true);
        packages.insert("node_modules/tool-linux-x64".into(), x64);
        packages.insert(
            "node_modules/tool-linux-arm64".into(),
            entry("tool-linux-arm64", "1.0.0"),
        );
        for (path, value) in extra {
            packages.insert((*path).into(), value.clone());
        }
        serde_json::from_value(json!({ "lockfileVersion": 3, "packages": packages })).unwrap()
    }

    fn problems(lock: &Lockfile) -> Vec<String> {
        let pinned: BTreeMap<String, String> = [("tool".to_owned(), "1.0.0".to_owned())].into();
        check(
            lock,
            &Policy {
                registry: REG,
                pinned: &pinned,
                install_scripts_allowed: &[],
                install_scripts_skipped: &[],
                cpus: &["x64", "arm64"],
            },
        )
    }

    #[test]
    fn a_clean_lock_passes() {
        assert_eq!(problems(&lock_with(&[])), Vec::<String>::new());
    }

    #[test]
    fn each_check_names_the_package() {
        let mut sha1 = entry("old", "1.0.0");
        sha1["integrity"] = json!("sha1-abc=");
        let mut elsewhere = entry("far", "1.0.0");
        elsewhere["resolved"] = json!("https://example.com/far-1.0.0.tgz");
        let mut scripted = entry("sneaky", "1.0.0");
        scripted["hasInstallScript"] = json!(true);
        let linked = json!({ "resolved": "../x", "link": true });
        let lock = lock_with(&[
            ("node_modules/old", sha1),
            ("node_modules/far", elsewhere),
            ("node_modules/sneaky", scripted),
            ("node_modules/linked", linked),
        ]);
        let p = problems(&lock).join("\n");
        assert!(
            p.contains("old (node_modules/old) has integrity `sha1`"),
            "{p}"
        );
        assert!(
            p.contains("far (node_modules/far) resolves to https://example.com/far-1.0.0.tgz"),
            "{p}"
        );
        assert!(
            p.contains("sneaky (node_modules/sneaky) has an install script that nobody reviewed"),
            "{p}"
        );
        assert!(p.contains("linked (node_modules/linked) is a link"), "{p}");
    }

    #[test]
    fn a_dropped_arm64_binary_is_caught() {
        let mut lock = lock_with(&[]);
        lock.packages.remove("node_modules/tool-linux-arm64");
        let p = problems(&lock).join("\n");
        assert!(
            p.contains("tool: its linux arm64 binary tool-linux-arm64@1.0.0 is missing"),
            "{p}"
        );
    }

    #[test]
    fn package_json_and_lock_must_agree() {
        let mut lock = lock_with(&[]);
        lock.packages
            .get_mut("")
            .unwrap()
            .dependencies
            .insert("tool".into(), "0.9.0".into());
        assert!(problems(&lock)
            .iter()
            .any(|p| p.contains("differ from package.json")));
    }

    #[test]
    fn lockfile_version_must_be_3() {
        let mut lock = lock_with(&[]);
        lock.lockfile_version = 2;
        assert!(problems(&lock)[0].contains("lockfileVersion is 2"));
    }

    #[test]
    fn licenses_are_classified() {
        assert_eq!(
            classify_license(Some(&json!("MIT"))),
            License::Spdx {
                expression: "MIT".into()
            }
        );
        assert_eq!(
            classify_license(Some(&json!("(MIT OR Apache-2.0)"))),
            License::Spdx {
                expression: "(MIT OR Apache-2.0)".into()
            }
        );
        assert_eq!(
            classify_license(Some(&json!("SEE LICENSE IN README.md"))),
            License::Reference {
                text: "SEE LICENSE IN README.md".into()
            }
        );
        assert_eq!(classify_license(None), License::Undeclared);
        assert_eq!(
            classify_license(Some(&json!("Free for all"))),
            License::Unrecognized {
                text: "Free for all".into()
            }
        );
    }

    #[test]
    fn nested_names_and_top_level_flags() {
        let lock = lock_with(&[(
            "node_modules/tool/node_modules/@s/dep",
            entry("dep", "2.0.0-rc.1"),
        )]);
        let pinned: BTreeMap<String, String> = [("tool".to_owned(), "1.0.0".to_owned())].into();
        let rows = inventory_rows(&lock, &pinned, &BTreeMap::new(), &BTreeMap::new()).unwrap();
        let nested = rows.iter().find(|r| r.name == "@s/dep").unwrap();
        assert!(nested.prerelease && !nested.top_level);
        assert!(rows.iter().find(|r| r.name == "tool").unwrap().top_level);
        let s = summarize(&rows);
        assert_eq!(
            (s.packages, s.top_level, s.prerelease, s.platform_binaries),
            (4, 1, 1, 1)
        );
    }
}
