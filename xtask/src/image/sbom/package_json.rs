//! The package.json files the image holds, as the SBOM reads them: the fields it uses of each
//! package's own file (name, version, license, the people), and which files are a package's
//! own. npm owns the format and packages write it by hand, so every field is optional and read
//! leniently.

use super::supplier::{actor, supplier};

/// What an installed package.json says about the package: the fields the SBOM uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct NpmManifest {
    pub name: Option<String>,
    pub version: Option<String>,
    /// `license` when it is an SPDX expression (npm's rule since npm 2); the older
    /// `{ "type": ... }` and `licenses` forms are read the same way.
    pub license: Option<String>,
    /// `author` as an SPDX supplier, else the first of `maintainers` or `contributors`.
    pub supplier: Option<String>,
    /// `author` alone: the package's own word on who makes it, which outranks the registry's
    /// publisher (see `npm_supplier`).
    pub author: Option<String>,
}

/// An npm person: `"Name <email> (url)"` or `{ "name", "email", "url" }`.
fn npm_person(value: &serde_json::Value) -> Option<String> {
    match value {
        serde_json::Value::String(s) => supplier(s),
        serde_json::Value::Object(o) => actor(
            o.get("name").and_then(|v| v.as_str()).unwrap_or(""),
            o.get("email").and_then(|v| v.as_str()),
        ),
        _ => None,
    }
}

/// The account that owns the repository a package names (`github:openai/codex`,
/// `git+https://github.com/openai/codex.git`, `{"url": ...}`), as an organisation: for a
/// package that names no author, the one who publishes its source is the closest thing to a
/// supplier it states.
fn repository_owner(repository: &serde_json::Value) -> Option<String> {
    let url = match repository {
        serde_json::Value::String(s) => s.as_str(),
        serde_json::Value::Object(o) => o.get("url")?.as_str()?,
        _ => return None,
    };
    let path = ["github.com/", "gitlab.com/", "bitbucket.org/"]
        .iter()
        .find_map(|host| url.split_once(host).map(|(_, rest)| rest))
        .or_else(|| {
            ["github:", "gitlab:", "bitbucket:"]
                .iter()
                .find_map(|p| url.strip_prefix(p))
        })
        .or_else(|| (!url.contains(':') && url.matches('/').count() == 1).then_some(url))?;
    let owner = path.split('/').next()?.trim_start_matches('@');
    let owner_ok = !owner.is_empty()
        && owner
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    owner_ok.then(|| format!("Organization: {owner}"))
}

/// What the package.json `bytes` say, when they are JSON.
pub(crate) fn npm_manifest(bytes: &[u8]) -> Option<NpmManifest> {
    let json: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let text = |key: &str| json.get(key).and_then(|v| v.as_str()).map(str::to_string);
    let license_of = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Object(o) => o.get("type").and_then(|t| t.as_str()).map(String::from),
        _ => None,
    };
    let license = json
        .get("license")
        .and_then(license_of)
        .or_else(|| {
            let list = json.get("licenses")?.as_array()?;
            let all: Option<Vec<String>> = list.iter().map(license_of).collect();
            let all = all?;
            (!all.is_empty()).then(|| all.join(" OR "))
        })
        .filter(|e| spdx::Expression::parse(e).is_ok());
    let first_person = |key: &str| json.get(key)?.as_array()?.iter().find_map(npm_person);
    let author = json.get("author").and_then(npm_person);
    let supplier = author
        .clone()
        .or_else(|| first_person("maintainers"))
        .or_else(|| first_person("contributors"))
        .or_else(|| repository_owner(json.get("repository")?));
    Some(NpmManifest {
        name: text("name"),
        version: text("version"),
        license,
        supplier,
        author,
    })
}

/// The package directory of a package.json path, when the file is a package's own
/// (`node_modules/@s/a/node_modules/b/package.json` -> `node_modules/@s/a/node_modules/b`),
/// not one deeper inside a package (`node_modules/a/lib/package.json`). `""` is the root's.
pub(crate) fn package_dir(path: &str) -> Option<&str> {
    let dir = path.strip_suffix("package.json")?;
    let dir = dir.strip_suffix('/').unwrap_or(dir);
    let mut parts = dir.split('/').filter(|p| !p.is_empty()).peekable();
    while let Some(part) = parts.next() {
        if part != "node_modules" {
            return None;
        }
        let name = parts.next()?;
        if name.starts_with('@') {
            parts.next()?;
        }
    }
    Some(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_json_gives_license_and_supplier() {
        let m = npm_manifest(
            br#"{"name": "npm", "version": "10.9.9", "license": "Artistic-2.0",
                "author": "GitHub Inc."}"#,
        )
        .unwrap();
        assert_eq!(m.license.as_deref(), Some("Artistic-2.0"));
        assert_eq!(m.supplier.as_deref(), Some("Organization: GitHub Inc."));
        let old = npm_manifest(
            br#"{"licenses": [{"type": "MIT"}, {"type": "Apache-2.0"}],
                "maintainers": [{"name": "Ann", "email": "ann@example.org"}]}"#,
        )
        .unwrap();
        assert_eq!(old.license.as_deref(), Some("MIT OR Apache-2.0"));
        assert_eq!(
            old.supplier.as_deref(),
            Some("Person: Ann (ann@example.org)")
        );
        for repository in [
            r#""github:openai/codex""#,
            r#"{"type": "git", "url": "git+https://github.com/openai/codex.git"}"#,
            r#""openai/codex""#,
        ] {
            let json = format!(r#"{{"repository": {repository}}}"#);
            let m = npm_manifest(json.as_bytes()).unwrap();
            assert_eq!(
                m.supplier.as_deref(),
                Some("Organization: openai"),
                "{repository}"
            );
        }
        let unclear = npm_manifest(br#"{"license": "SEE LICENSE IN LICENSE.md"}"#).unwrap();
        assert_eq!((unclear.license, unclear.supplier), (None, None));
        assert_eq!(npm_manifest(b"not json"), None);
    }

    #[test]
    fn only_a_package_s_own_package_json_counts() {
        assert_eq!(package_dir("package.json"), Some(""));
        assert_eq!(
            package_dir("node_modules/@s/a/node_modules/b/package.json"),
            Some("node_modules/@s/a/node_modules/b")
        );
        assert_eq!(package_dir("node_modules/a/lib/package.json"), None);
        assert_eq!(package_dir("node_modules/@s/package.json"), None);
    }
}
