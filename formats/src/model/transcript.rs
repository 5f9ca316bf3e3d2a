//! The harnesses' protocol transcripts (`transcripts-<os>-<arch>.json`, a release asset the
//! receipt hashes): what each harness said over its native protocol during the smoke test's
//! turn and resume, reduced to its shape, so that the same CLI version gives the same bytes and
//! the next release can say what changed.
//!
//! A transcript is a set of messages, not a sequence (notifications interleave differently
//! from run to run). Each message is identified by its direction and its kind:
//!
//! - `method` of a JSON-RPC request or notification (`thread/start`, `session/update`);
//! - `<method> result` or `<method> error` of a JSON-RPC response, the method being the one of
//!   the request with the same `id` in the other direction (`thread/start result`);
//! - `type`, and `/subtype` when there is one, of a typed record (`system/init`, `response`);
//! - `(not JSON)` for a stdout line that is not JSON, `(untyped)` for a record none of the above.
//!
//! and its variant: the string values of the discriminating keys (`type`, `subtype`,
//! `sessionUpdate`, `command`, `role`) found in objects up to three levels below the record
//! (`params.item.type=agentMessage`): records of one kind whose variants differ have different
//! fields. Its fields are every path below the record (object keys joined by `.`, array
//! elements as `[]`, keys that are ids or paths as `*`) with the JSON types seen there, joined
//! by `|`; a path some records of the message lack ends in `?`. Values are left out: ids,
//! times and text change from run to run, their shapes do not.
//!
//! The smoke test makes transcripts (`xtask/src/image/smoke/evidence.rs`); the release notes
//! compare a release's with the previous one's ([`drift`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::Platform;

/// The transcripts format; a document of another version is refused.
pub const TRANSCRIPTS_SCHEMA_VERSION: u32 = 1;

/// The asset's name for `platform`: `transcripts-<os>-<arch>.json`.
pub fn transcripts_file_name(platform: Platform) -> String {
    format!(
        "transcripts-{}.json",
        platform.to_string().replace('/', "-")
    )
}

/// One platform's transcripts, every harness the smoke test drove through a turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Transcripts {
    pub schema_version: u32,
    pub platform: Platform,
    /// In the manifest's order of harnesses.
    pub harnesses: Vec<HarnessTranscript>,
}

impl Transcripts {
    /// The asset's bytes: pretty JSON (one field a line, so two releases' files diff well),
    /// a final newline. The same transcripts give the same bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec_pretty(self).expect("transcripts serialise");
        bytes.push(b'\n');
        bytes
    }

    /// Reads an asset, strictly: its version, its platform and sorted, unique messages.
    pub fn from_bytes(bytes: &[u8], platform: Platform) -> Result<Transcripts, String> {
        let value: serde_json::Value =
            crate::strict_json::parse(bytes).map_err(|e| e.to_string())?;
        let t: Transcripts = serde_json::from_value(value).map_err(|e| e.to_string())?;
        if t.schema_version != TRANSCRIPTS_SCHEMA_VERSION {
            return Err(format!(
                "schema_version {} is not {TRANSCRIPTS_SCHEMA_VERSION}",
                t.schema_version
            ));
        }
        if t.platform != platform {
            return Err(format!(
                "it is the transcripts of {}, not {platform}",
                t.platform
            ));
        }
        for h in &t.harnesses {
            if !h.messages.windows(2).all(|w| w[0].key() < w[1].key()) {
                return Err(format!(
                    "harness `{}`: its messages are not sorted and unique",
                    h.name
                ));
            }
        }
        Ok(t)
    }

    pub fn harness(&self, name: &str) -> Option<&HarnessTranscript> {
        self.harnesses.iter().find(|h| h.name == name)
    }
}

/// What one harness said and was sent, as shapes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HarnessTranscript {
    pub name: String,
    /// Sorted by direction, kind and variant; one entry each.
    pub messages: Vec<Message>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// From the harness (its stdout).
    Received,
    /// To the harness (its stdin).
    Sent,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Received => "received",
            Direction::Sent => "sent",
        }
    }
}

/// One kind of message and the shape of its records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Message {
    pub direction: Direction,
    pub kind: String,
    /// `path=value` of each discriminating key, sorted; empty for most messages.
    pub variant: Vec<String>,
    /// Path -> JSON types (`string`, `number|null`); a path ending in `?` is missing from
    /// some of the records.
    pub fields: BTreeMap<String, String>,
}

impl Message {
    /// What orders messages and tells them apart.
    pub fn key(&self) -> (Direction, &str, &[String]) {
        (self.direction, &self.kind, &self.variant)
    }

    /// `kind [variant]`, as notes and errors name the message.
    pub fn label(&self) -> String {
        if self.variant.is_empty() {
            self.kind.clone()
        } else {
            format!("{} [{}]", self.kind, self.variant.join(", "))
        }
    }

    /// The types at `path`, whether every record had it or not (`None`: no record had it).
    pub fn field(&self, path: &str) -> Option<(&str, bool)> {
        if let Some(types) = self.fields.get(path) {
            return Some((types, true));
        }
        self.fields
            .get(&format!("{path}?"))
            .map(|types| (types.as_str(), false))
    }

    /// Whether `selector` (`kind`, or `kind [path=value, ...]`) names this message: the same
    /// kind, and every `path=value` it lists among the variant's.
    pub fn is_named_by(&self, selector: &str) -> bool {
        let (kind, wanted) = split_selector(selector);
        kind == self.kind && wanted.iter().all(|w| self.variant.iter().any(|v| v == w))
    }
}

/// `kind [a=b, c=d]` -> (`kind`, [`a=b`, `c=d`]).
pub fn split_selector(selector: &str) -> (&str, Vec<&str>) {
    match selector.split_once(" [") {
        Some((kind, rest)) => (
            kind,
            rest.trim_end_matches(']')
                .split(", ")
                .filter(|s| !s.is_empty())
                .collect(),
        ),
        None => (selector, Vec::new()),
    }
}

/// One difference between two transcripts of a harness.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drift {
    pub direction: Direction,
    /// The message's label ([`Message::label`]).
    pub message: String,
    /// What changed: `message added`, `message removed`, `field added`, `field removed`,
    /// `field retyped`.
    pub change: String,
    /// The field's path, for a field's change.
    pub field: Option<String>,
    /// Its types before (`string`, `string?`); `None` when it was not there.
    pub before: Option<String>,
    /// Its types now.
    pub after: Option<String>,
}

impl std::fmt::Display for Drift {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} `{}`: {}",
            self.direction.as_str(),
            self.message,
            self.change
        )?;
        if let Some(field) = &self.field {
            write!(f, " `{field}`")?;
        }
        match (&self.before, &self.after) {
            (Some(b), Some(a)) => write!(f, " ({b} -> {a})"),
            (None, Some(a)) => write!(f, " ({a})"),
            (Some(b), None) => write!(f, " (was {b})"),
            (None, None) => Ok(()),
        }
    }
}

/// Every difference from `before` to `after`: messages added and removed, and each field of a
/// message both have that was added, removed or retyped (its types or whether every record
/// has it).
pub fn drift(before: &HarnessTranscript, after: &HarnessTranscript) -> Vec<Drift> {
    let index = |t: &HarnessTranscript| -> BTreeMap<(Direction, String, Vec<String>), Message> {
        t.messages
            .iter()
            .map(|m| ((m.direction, m.kind.clone(), m.variant.clone()), m.clone()))
            .collect()
    };
    let (old, new) = (index(before), index(after));
    let mut out = Vec::new();
    let keys: std::collections::BTreeSet<_> = old.keys().chain(new.keys()).collect();
    for key in keys {
        let change = |m: &Message, change: &str| Drift {
            direction: m.direction,
            message: m.label(),
            change: change.into(),
            field: None,
            before: None,
            after: None,
        };
        match (old.get(key), new.get(key)) {
            (None, Some(m)) => out.push(change(m, "message added")),
            (Some(m), None) => out.push(change(m, "message removed")),
            (Some(a), Some(b)) => out.extend(field_drift(a, b)),
            (None, None) => {}
        }
    }
    out
}

fn field_drift(a: &Message, b: &Message) -> Vec<Drift> {
    // A field is its path without the `?`; its description keeps the `?`.
    let described = |m: &Message| -> BTreeMap<String, String> {
        m.fields
            .iter()
            .map(|(path, types)| match path.strip_suffix('?') {
                Some(p) => (p.to_string(), format!("{types}?")),
                None => (path.clone(), types.clone()),
            })
            .collect()
    };
    let (old, new) = (described(a), described(b));
    let paths: std::collections::BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    let mut out = Vec::new();
    for path in paths {
        let (before, after) = (old.get(path), new.get(path));
        let change = match (before, after) {
            (None, Some(_)) => "field added",
            (Some(_), None) => "field removed",
            (Some(x), Some(y)) if x != y => "field retyped",
            _ => continue,
        };
        out.push(Drift {
            direction: b.direction,
            message: b.label(),
            change: change.into(),
            field: Some(path.clone()),
            before: before.cloned(),
            after: after.cloned(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(kind: &str, variant: &[&str], fields: &[(&str, &str)]) -> Message {
        Message {
            direction: Direction::Received,
            kind: kind.into(),
            variant: variant.iter().map(|v| v.to_string()).collect(),
            fields: fields
                .iter()
                .map(|(p, t)| (p.to_string(), t.to_string()))
                .collect(),
        }
    }

    fn harness(messages: Vec<Message>) -> HarnessTranscript {
        HarnessTranscript {
            name: "codex".into(),
            messages,
        }
    }

    #[test]
    fn drift_names_messages_and_fields_added_removed_and_retyped() {
        let before = harness(vec![
            message(
                "thread/start result",
                &[],
                &[("result.thread.id", "string"), ("result.cwd", "string")],
            ),
            message("warning", &[], &[("params.message", "string")]),
        ]);
        let after = harness(vec![
            message(
                "thread/start result",
                &[],
                &[
                    ("result.thread.id", "string"),
                    ("result.cwd?", "string"),
                    ("result.thread.name", "string|null"),
                ],
            ),
            message("deprecationNotice", &[], &[("params.summary", "string")]),
        ]);
        let lines: Vec<String> = drift(&before, &after)
            .iter()
            .map(|d| d.to_string())
            .collect();
        assert_eq!(
            lines,
            [
                "received `deprecationNotice`: message added",
                "received `thread/start result`: field retyped `result.cwd` (string -> string?)",
                "received `thread/start result`: field added `result.thread.name` (string|null)",
                "received `warning`: message removed",
            ]
        );
        assert!(drift(&after, &after).is_empty());
    }

    #[test]
    fn a_selector_names_a_kind_and_part_of_a_variant() {
        let m = message("response", &["command=get_state", "role=x"], &[]);
        assert!(m.is_named_by("response"));
        assert!(m.is_named_by("response [command=get_state]"));
        assert!(!m.is_named_by("response [command=prompt]"));
        assert!(!m.is_named_by("responses"));
        assert_eq!(m.label(), "response [command=get_state, role=x]");
    }

    #[test]
    fn the_asset_reads_back_only_as_itself() {
        let t = Transcripts {
            schema_version: TRANSCRIPTS_SCHEMA_VERSION,
            platform: Platform::LinuxAmd64,
            harnesses: vec![harness(vec![
                message("a", &[], &[("x", "string")]),
                message("b", &[], &[]),
            ])],
        };
        let bytes = t.to_bytes();
        assert_eq!(
            Transcripts::from_bytes(&bytes, Platform::LinuxAmd64).unwrap(),
            t
        );
        assert!(Transcripts::from_bytes(&bytes, Platform::LinuxArm64)
            .unwrap_err()
            .contains("not linux/arm64"));
        let mut unsorted = t.clone();
        unsorted.harnesses[0].messages.reverse();
        assert!(
            Transcripts::from_bytes(&unsorted.to_bytes(), Platform::LinuxAmd64)
                .unwrap_err()
                .contains("not sorted")
        );
        assert_eq!(
            transcripts_file_name(Platform::LinuxArm64),
            "transcripts-linux-arm64.json"
        );
    }
}
