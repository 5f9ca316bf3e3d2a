//! The published JSON Schema, enforced: `verify` checks every receipt against it with the
//! `jsonschema` crate, so the schema in the repository cannot drift from what the tool accepts.
//! Problems name the field as the rest of `verify` does (`platforms[1].digest`), not as a JSON
//! pointer, so one rejection reads the same whichever check found it.

use std::sync::OnceLock;

use jsonschema::error::ValidationErrorKind;
use jsonschema::paths::{Location, LocationSegment};
use jsonschema::{ValidationError, Validator};
use serde_json::Value;

use super::{problem, Problem};

/// The published schema of [`super::SCHEMA_VERSION`], as committed at
/// [`template_formats::paths::RECEIPT_SCHEMA`].
pub const SCHEMA_JSON: &str = include_str!("../../../schemas/receipt.v2.schema.json");

/// The compiled schema. Formats (`date-time`) are asserted, not only annotated: a receipt's
/// times are part of what it claims. Nothing is fetched: the schema has only local `$ref`s and
/// the crate is built without its network resolvers.
fn validator() -> &'static Validator {
    static VALIDATOR: OnceLock<Validator> = OnceLock::new();
    VALIDATOR.get_or_init(|| {
        let schema: Value =
            serde_json::from_str(SCHEMA_JSON).expect("the embedded receipt schema is JSON");
        jsonschema::options()
            .should_validate_formats(true)
            .build(&schema)
            .expect("the embedded receipt schema is a valid JSON Schema")
    })
}

/// Every way `instance` breaks the published schema, each naming the field.
pub fn schema_problems(instance: &Value) -> Vec<Problem> {
    validator()
        .iter_errors(instance)
        .flat_map(|e| to_problems(instance, &e))
        .collect()
}

fn to_problems(instance: &Value, e: &ValidationError<'_>) -> Vec<Problem> {
    let path = field_path(instance, e.instance_path());
    let field = || {
        if path.is_empty() {
            "(document)".to_string()
        } else {
            path.clone()
        }
    };
    match e.kind() {
        ValidationErrorKind::Required { property } => {
            let key = property
                .as_str()
                .map_or_else(|| property.to_string(), String::from);
            vec![problem(join(&path, &key), "is missing")]
        }
        ValidationErrorKind::AdditionalProperties { unexpected } => unexpected
            .iter()
            .map(|key| problem(join(&path, key), "is not a field of this receipt version"))
            .collect(),
        ValidationErrorKind::PropertyNames { error } => {
            let key = error.instance().as_str().unwrap_or_default().to_string();
            vec![problem(
                join(&path, &key),
                format!("is not an allowed key: {error}"),
            )]
        }
        _ => vec![problem(field(), e.to_string())],
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// A JSON pointer as the receipt's field names: `platforms[1].digest`. Whether a segment is
/// an index is read from the instance (a pointer alone cannot tell `"1"` the key from `1` the
/// index).
fn field_path(instance: &Value, location: &Location) -> String {
    let mut out = String::new();
    let mut node = Some(instance);
    for segment in location.iter() {
        let key = match &segment {
            LocationSegment::Property(p) => p.to_string(),
            LocationSegment::Index(i) => i.to_string(),
        };
        match node {
            Some(Value::Array(items)) => {
                out.push_str(&format!("[{key}]"));
                node = key.parse::<usize>().ok().and_then(|i| items.get(i));
            }
            other => {
                out = join(&out, &key);
                node = other.and_then(|v| v.get(&key));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receipt::tests_support::*;

    /// Properties a receipt may leave out, with why: `inputs`, which receipts written before
    /// the tool recorded the input trust lack (they still verify); an install-scripts
    /// record's commands, which name only the lifecycle scripts a package has (the same form
    /// as the manifest's acknowledgment); what the release notes read, which receipts written
    /// before the tool recorded it lack (a package's repository and rejected versions, a
    /// smoke check's duration, a platform's layers, transcripts and harness state), and
    /// which a platform without harness turns (an emulated build) or a package without a
    /// repository or newer versions leaves out.
    const OPTIONAL: [&str; 10] = [
        "/properties/inputs",
        "/install_scripts/oneOf/properties/preinstall",
        "/install_scripts/oneOf/properties/install",
        "/install_scripts/oneOf/properties/postinstall",
        "/packages/items/properties/repository",
        "/packages/items/properties/rejected",
        "/checks/items/properties/duration_secs",
        "/platforms/items/properties/layers",
        "/platforms/items/properties/transcripts",
        "/platforms/items/properties/harnesses",
    ];

    #[test]
    fn schema_objects_are_closed_and_fully_required() {
        fn walk(v: &serde_json::Value, path: &str) {
            if let Some(obj) = v.as_object() {
                if let Some(props) = obj.get("properties").and_then(|p| p.as_object()) {
                    let mut required: Vec<&str> = obj["required"]
                        .as_array()
                        .unwrap_or_else(|| panic!("{path}: no `required`"))
                        .iter()
                        .map(|r| r.as_str().unwrap())
                        .collect();
                    required.sort();
                    let mut keys: Vec<&str> = props
                        .keys()
                        .map(String::as_str)
                        .filter(|k| {
                            let at = format!("{path}/properties/{k}");
                            !OPTIONAL.iter().any(|o| at.ends_with(o))
                        })
                        .collect();
                    keys.sort();
                    assert_eq!(required, keys, "{path}");
                    assert_eq!(obj["additionalProperties"], false, "{path}");
                }
                for (k, child) in obj {
                    walk(child, &format!("{path}/{k}"));
                }
            } else if let Some(items) = v.as_array() {
                items.iter().for_each(|i| walk(i, path));
            }
        }
        walk(&serde_json::from_str(SCHEMA_JSON).unwrap(), "");
    }

    #[test]
    fn schema_rejections_name_the_field() {
        let mut instance = serde_json::to_value(sample()).unwrap();
        instance["platforms"][1]["digest"] = "sha256:abc".into();
        instance["platforms"][0]["build"] = "guessed".into();
        instance["index"]["extra"] = true.into();
        instance["gate"].as_object_mut().unwrap().remove("due");
        instance["node"]["platforms"]["linux/riscv64"] = instance["node"]["npm"].clone();
        instance["packages"][0]["integrity"] = "md5-xyz".into();
        let got: Vec<String> = schema_problems(&instance)
            .into_iter()
            .map(|p| p.field)
            .collect();
        for expected in [
            "platforms[1].digest",
            "platforms[0].build",
            "index.extra",
            "gate.due",
            "node.platforms.linux/riscv64",
            "packages[0].integrity",
        ] {
            assert!(
                got.iter().any(|g| g == expected),
                "{expected} not in {got:?}"
            );
        }
    }
}
