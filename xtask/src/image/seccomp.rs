//! The shared browser's runtime requirement: the seccomp profile of the manifest's
//! `runtime.seccomp`. It must be its upstream base (Docker's default profile) plus one added
//! entry that allows exactly `allows`, so that what a platform is asked to grant is visibly
//! no more than that: [`verify`] checks both, without trusting the file's own words.

use anyhow::{bail, Context, Result};
use serde_json::{Map, Value};

use crate::util::sha256_hex;
use template_formats::manifest::SeccompSpec;

/// How the added entry's `comment` starts; docs/shared-browser.md's `jq` command selects it by this.
pub(crate) const ADDED_ENTRY_COMMENT: &str = "coding-agent template";

/// Reads the profile the manifest names (relative to `root`) and returns its text once it
/// verifies, ready to hand to the engine as `seccomp=<json>`.
pub(crate) fn load(layout: &crate::layout::Layout, spec: &SeccompSpec) -> Result<String> {
    let path = layout.file(&spec.profile);
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read the seccomp profile {}", path.display()))?;
    verify(&text, spec).with_context(|| {
        format!(
            "{} is not `runtime.seccomp` of the manifest: fix the profile or the manifest",
            path.display()
        )
    })?;
    Ok(text)
}

/// The profile is `spec.base` (by its canonical digest) plus exactly one added entry, the one
/// whose comment starts with [`ADDED_ENTRY_COMMENT`], that allows `spec.allows` with any
/// arguments and has no other condition.
pub(crate) fn verify(text: &str, spec: &SeccompSpec) -> Result<()> {
    let mut profile: Value = serde_json::from_str(text).context("not JSON")?;
    let syscalls = profile
        .get_mut("syscalls")
        .and_then(Value::as_array_mut)
        .context("no `syscalls` list")?;
    let is_added = |entry: &Value| {
        entry
            .get("comment")
            .and_then(Value::as_str)
            .is_some_and(|c| c.starts_with(ADDED_ENTRY_COMMENT))
    };
    let added: Vec<Value> = syscalls.iter().filter(|e| is_added(e)).cloned().collect();
    let [entry] = added.as_slice() else {
        bail!(
            "{} entries have a comment starting `{ADDED_ENTRY_COMMENT}`; exactly one is the template's",
            added.len()
        );
    };
    let keys: Vec<&str> = entry
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    if keys
        .iter()
        .any(|k| !["names", "action", "comment"].contains(k))
    {
        bail!("the added entry has keys {keys:?}; only names, action and comment are expected (no args, includes or excludes)");
    }
    if entry.get("action").and_then(Value::as_str) != Some("SCMP_ACT_ALLOW") {
        bail!("the added entry's action is not SCMP_ACT_ALLOW");
    }
    let mut names: Vec<String> = serde_json::from_value(entry["names"].clone())
        .context("the added entry's `names` is not a list of strings")?;
    let mut allows = spec.allows.clone();
    names.sort();
    allows.sort();
    if names != allows {
        bail!("the added entry allows {names:?}; the manifest's `runtime.seccomp.allows` says {allows:?}");
    }
    syscalls.retain(|e| !is_added(e));
    // `jq` ends its output with a newline, and `sha256sum` digests it too.
    let base = sha256_hex(format!("{}\n", canonical(&profile)).as_bytes());
    if base != spec.base_sha256 {
        bail!(
            "without its added entry the profile has canonical sha256 {base}, not the base's {} ({}): only the added entry may differ from the base",
            spec.base_sha256,
            spec.base
        );
    }
    Ok(())
}

/// The JSON with every object's keys sorted, compact: what `jq -S -c .` prints.
fn canonical(value: &Value) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                let mut out = Map::new();
                for key in keys {
                    out.insert(key.clone(), sorted(&map[key]));
                }
                Value::Object(out)
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(value).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::repo_root;
    use template_formats::manifest::Manifest;
    use template_formats::paths::MANIFEST;

    fn spec() -> SeccompSpec {
        Manifest::load(&repo_root().join(MANIFEST))
            .unwrap()
            .runtime
            .seccomp
    }

    fn committed() -> String {
        std::fs::read_to_string(repo_root().join(spec().profile)).unwrap()
    }

    #[test]
    fn the_committed_profile_is_its_base_plus_the_allowance() {
        load(&crate::layout::Layout::at(repo_root()), &spec()).unwrap();
    }

    #[test]
    fn canonical_form_is_what_jq_prints() {
        let value: Value =
            serde_json::from_str(r#"{"b":[{"z":1,"a":"x/y"}],"a":{"d":true,"c":null}}"#).unwrap();
        assert_eq!(
            canonical(&value),
            r#"{"a":{"c":null,"d":true},"b":[{"a":"x/y","z":1}]}"#
        );
    }

    /// Each way of asking for more than the manifest says is refused.
    #[test]
    fn a_broader_or_different_profile_is_refused() {
        let text = committed();
        // The added entry is the last; its last name is `unshare`.
        let last = text.rfind("\"unshare\"\n").unwrap();
        let cases = [
            // One more system call in the added entry.
            (
                format!(
                    "{}\"unshare\",\n\t\t\t\t\"setns\"\n{}",
                    &text[..last],
                    &text[last + "\"unshare\"\n".len()..]
                ),
                "setns",
            ),
            // A base entry changed: mount without CAP_SYS_ADMIN.
            (
                text.replacen("\"CAP_SYS_ADMIN\"", "\"CAP_CHOWN\"", 1),
                "not the base's",
            ),
            // Everything allowed.
            (
                text.replacen(
                    "\"defaultAction\": \"SCMP_ACT_ERRNO\"",
                    "\"defaultAction\": \"SCMP_ACT_ALLOW\"",
                    1,
                ),
                "not the base's",
            ),
            // The allowance hidden under a condition-free second entry without the marker.
            (
                text.replacen(ADDED_ENTRY_COMMENT, "shared browser", 1),
                "0 entries",
            ),
        ];
        for (broken, expect) in cases {
            assert_ne!(broken, text, "{expect}");
            let err = format!("{:#}", verify(&broken, &spec()).unwrap_err());
            assert!(err.contains(expect), "{expect}: {err}");
        }
        let mut narrower = spec();
        narrower.allows = vec!["clone".into()];
        let err = format!("{:#}", verify(&text, &narrower).unwrap_err());
        assert!(err.contains("[\"clone\"]"), "{err}");
    }
}
