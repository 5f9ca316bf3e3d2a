//! What a harness's turn and resume showed (`harness-turns.js` prints it as one
//! `@harness-evidence` line): every record over its pipes and every file it changed. Here it
//! becomes the release's evidence and is judged, purely:
//!
//! - the protocol transcript (`template_formats::model::transcript`): records reduced to their
//!   direction, kind, variant and field shapes, so the same CLI version gives the same bytes;
//! - the resume contract: every field the manifest says a supervisor saves (`harnesses[].resume`)
//!   is a string in every message that should carry it;
//! - where it wrote: directories normalized (the session id `<session>`, digits `#`, other ids
//!   `*`), the session's own files apart; a file written outside the home and /tmp fails the
//!   check, since a sandbox keeps only /workspace (its volume) and /tmp is emptied.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_json::Value;

use template_formats::manifest::Harness;
use template_formats::model::receipt::{scratch_collapsed, SCRATCH_DIR};
use template_formats::model::smoke::HarnessEvidence;
use template_formats::model::transcript::{Direction, Message};
use template_formats::paths::MANIFEST;

/// How the driver's evidence line starts.
pub(crate) const EVIDENCE_PREFIX: &str = "@harness-evidence ";

/// The driver's evidence, as it prints it.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct RawEvidence {
    pub transcript: Vec<RawEntry>,
    /// Every file changed since the driver started (absolute paths).
    pub written: Vec<String>,
    /// The session turn one named and the written files that name it; `None` when turn one
    /// gave no id.
    pub session: Option<RawSession>,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct RawEntry {
    pub direction: Direction,
    /// The record, or `None` for a stdout line that was not JSON (`text`).
    #[serde(default)]
    pub record: Option<Value>,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct RawSession {
    pub id: String,
    pub files: Vec<String>,
}

/// Splits the evidence line from the rest of a turn check's stdout: (the evidence, or why it
/// cannot be read, or `None` when the driver printed none; the other lines).
pub(crate) fn split_stdout(stdout: &str) -> (Option<Result<RawEvidence, String>>, String) {
    let mut evidence = None;
    let mut rest = String::new();
    for line in stdout.split_inclusive('\n') {
        match line.strip_prefix(EVIDENCE_PREFIX) {
            Some(json) => {
                evidence = Some(
                    serde_json::from_str::<RawEvidence>(json.trim_end())
                        .map_err(|e| format!("the driver's evidence is not readable: {e}")),
                )
            }
            None => rest.push_str(line),
        }
    }
    (evidence, rest)
}

/// The keys whose string values tell records of one kind apart.
const DISCRIMINATORS: [&str; 5] = ["type", "subtype", "sessionUpdate", "command", "role"];
/// How deep below a record discriminators are looked for.
const DISCRIMINATOR_DEPTH: usize = 3;

/// The protocol transcript of a run: one message a direction, kind and variant, with every
/// field path its records had and their types; sorted.
pub(crate) fn transcript(entries: &[RawEntry]) -> Vec<Message> {
    // JSON-RPC requests by id, keyed by the direction their response comes back in.
    let mut requests: BTreeMap<(Direction, String), String> = BTreeMap::new();
    type Key = (Direction, String, Vec<String>);
    let mut groups: BTreeMap<Key, Vec<BTreeMap<String, BTreeSet<&'static str>>>> = BTreeMap::new();
    for entry in entries {
        let Some(record) = &entry.record else {
            groups
                .entry((entry.direction, "(not JSON)".into(), Vec::new()))
                .or_default();
            continue;
        };
        let Some(object) = record.as_object() else {
            groups
                .entry((entry.direction, "(not an object)".into(), Vec::new()))
                .or_default();
            continue;
        };
        if let (Some(Value::String(method)), Some(id)) = (object.get("method"), object.get("id")) {
            requests.insert((other(entry.direction), id.to_string()), method.clone());
        }
        let (kind, consumed) = kind_of(object, entry.direction, &requests);
        let mut variant = Vec::new();
        for (key, value) in object {
            if !consumed.contains(&key.as_str()) {
                discriminators(key, value, 1, &mut variant);
            }
        }
        variant.sort();
        let mut shape = BTreeMap::new();
        shape_of(record, "", &mut shape);
        groups
            .entry((entry.direction, kind, variant))
            .or_default()
            .push(shape);
    }
    groups
        .into_iter()
        .map(|((direction, kind, variant), shapes)| {
            let paths: BTreeSet<&String> = shapes.iter().flat_map(|s| s.keys()).collect();
            let fields = paths
                .into_iter()
                .map(|path| {
                    let types: BTreeSet<&str> = shapes
                        .iter()
                        .filter_map(|s| s.get(path))
                        .flatten()
                        .copied()
                        .collect();
                    let everywhere = shapes.iter().all(|s| s.contains_key(path));
                    let name = if everywhere {
                        path.clone()
                    } else {
                        format!("{path}?")
                    };
                    (name, types.into_iter().collect::<Vec<_>>().join("|"))
                })
                .collect();
            Message {
                direction,
                kind,
                variant,
                fields,
            }
        })
        .collect()
}

fn other(direction: Direction) -> Direction {
    match direction {
        Direction::Sent => Direction::Received,
        Direction::Received => Direction::Sent,
    }
}

/// The record's kind and the top-level keys that made it.
fn kind_of(
    object: &serde_json::Map<String, Value>,
    direction: Direction,
    requests: &BTreeMap<(Direction, String), String>,
) -> (String, Vec<&'static str>) {
    if let Some(Value::String(method)) = object.get("method") {
        return (method.clone(), vec!["method"]);
    }
    let answer = ["result", "error"]
        .into_iter()
        .find(|k| object.contains_key(*k));
    if let (Some(answer), Some(id), false) = (answer, object.get("id"), object.contains_key("type"))
    {
        let method = requests
            .get(&(direction, id.to_string()))
            .map_or("(unknown request)", String::as_str);
        return (format!("{method} {answer}"), Vec::new());
    }
    if let Some(Value::String(kind)) = object.get("type") {
        return match object.get("subtype") {
            Some(Value::String(sub)) => (format!("{kind}/{sub}"), vec!["type", "subtype"]),
            _ => (kind.clone(), vec!["type"]),
        };
    }
    ("(untyped)".into(), Vec::new())
}

/// A short identifier, not free text or an id: what a discriminating value looks like.
fn is_identifier(value: &str) -> bool {
    let mut chars = value.chars();
    value.len() <= 40
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '-'))
}

fn discriminators(path: &str, value: &Value, depth: usize, out: &mut Vec<String>) {
    let key = path.rsplit('.').next().unwrap_or(path);
    match value {
        Value::String(s) if DISCRIMINATORS.contains(&key) && is_identifier(s) => {
            out.push(format!("{path}={s}"))
        }
        Value::Object(map) if depth <= DISCRIMINATOR_DEPTH => {
            for (k, v) in map {
                discriminators(&format!("{path}.{}", field_key(k)), v, depth + 1, out);
            }
        }
        _ => {}
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// An object key as a path segment: keys that are ids, numbers or paths (a map keyed by
/// session or file) are `*`, so two runs give the same paths.
fn field_key(key: &str) -> String {
    let volatile = key.starts_with('/')
        || (!key.is_empty() && key.chars().all(|c| c.is_ascii_digit()))
        || has_hex_id(key);
    if volatile {
        "*".into()
    } else {
        key.to_string()
    }
}

/// Eight or more hex digits in a row, at least one a digit: an id or a hash.
fn has_hex_id(text: &str) -> bool {
    hex_runs(text).next().is_some()
}

/// The byte ranges of `text`'s hex ids ([`has_hex_id`]).
fn hex_runs(text: &str) -> impl Iterator<Item = (usize, usize)> + '_ {
    let bytes = text.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < bytes.len() {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_hexdigit() {
                i += 1;
            }
            if i - start >= 8 && bytes[start..i].iter().any(u8::is_ascii_digit) {
                return Some((start, i));
            }
            if i == start {
                i += 1;
            }
        }
        None
    })
}

fn shape_of(value: &Value, path: &str, out: &mut BTreeMap<String, BTreeSet<&'static str>>) {
    if !path.is_empty() {
        out.entry(path.to_string())
            .or_default()
            .insert(json_type(value));
    }
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                let key = field_key(k);
                let child = if path.is_empty() {
                    key
                } else {
                    format!("{path}.{key}")
                };
                shape_of(v, &child, out);
            }
        }
        Value::Array(items) => {
            for item in items {
                shape_of(item, &format!("{path}[]"), out);
            }
        }
        _ => {}
    }
}

/// A path with its volatile parts replaced: the session id by `<session>`, hex ids by `*`,
/// runs of digits by `#`.
pub(crate) fn normalize_path(path: &str, session: Option<&str>) -> String {
    let path = match session.filter(|s| !s.is_empty()) {
        Some(id) => path.replace(id, "<session>"),
        None => path.to_string(),
    };
    let mut hexless = String::new();
    let mut last = 0;
    for (start, end) in hex_runs(&path) {
        hexless.push_str(&path[last..start]);
        hexless.push('*');
        last = end;
    }
    hexless.push_str(&path[last..]);
    let mut out = String::new();
    let mut in_digits = false;
    for c in hexless.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push('#');
            }
            in_digits = true;
        } else {
            out.push(c);
            in_digits = false;
        }
    }
    out
}

/// The directory of `file`, kept to `depth` components below `base`.
fn directory_below(file: &str, base: &str, depth: usize) -> String {
    let dir = file.rsplit_once('/').map_or("/", |(d, _)| d);
    let Some(rest) = dir.strip_prefix(base) else {
        return dir.to_string();
    };
    let parts: Vec<&str> = rest.split('/').filter(|p| !p.is_empty()).collect();
    // A temporary directory is kept, what a harness makes inside it is not: its children come
    // and go with the timing of a run (Codex's `.tmp/.staging` is there in one run of an image
    // and gone in the next), and they hold no state a resume needs.
    let depth = parts
        .iter()
        .position(|p| is_temporary(p))
        .map_or(depth, |at| depth.min(at + 1));
    let kept = &parts[..parts.len().min(depth)];
    if kept.is_empty() {
        base.trim_end_matches('/').to_string()
    } else {
        format!("{}/{}", base.trim_end_matches('/'), kept.join("/"))
    }
}

/// A directory named as temporary (`tmp`, `.tmp`, `temp`, `.temp`, any case).
fn is_temporary(name: &str) -> bool {
    let name = name.trim_start_matches('.').to_ascii_lowercase();
    name == "tmp" || name == "temp"
}

/// A log file (`*.log`, or any file in a `log` or `logs` directory). A log may name the
/// session, but whether it does depends on when the harness flushes it, and a resume never
/// reads it: the session's directories leave it out, so two runs of one image agree.
fn is_log(file: &str) -> bool {
    let (dirs, name) = file.rsplit_once('/').unwrap_or(("", file));
    name.to_ascii_lowercase().ends_with(".log")
        || dirs.split('/').any(|d| {
            let d = d.to_ascii_lowercase();
            d == "log" || d == "logs"
        })
}

fn is_below(file: &str, dir: &str) -> bool {
    file.strip_prefix(dir.trim_end_matches('/'))
        .is_some_and(|rest| rest.starts_with('/'))
}

/// The harness's evidence for the report: its transcript, the directories holding its
/// session (full depth, logs left out) and every directory it wrote in (three levels below
/// the home, the scratch directory itself, whole elsewhere), normalized.
pub(crate) fn evidence(name: &str, raw: &RawEvidence, home: &str) -> HarnessEvidence {
    let id = raw.session.as_ref().map(|s| s.id.as_str());
    let dir_of = |file: &str| file.rsplit_once('/').map_or("/", |(d, _)| d).to_string();
    let session: BTreeSet<String> = raw
        .session
        .iter()
        .flat_map(|s| &s.files)
        .filter(|f| !is_log(f))
        .map(|f| normalize_path(&dir_of(f), id))
        .collect();
    let written: BTreeSet<String> = raw
        .written
        .iter()
        .map(|f| {
            let dir = if is_below(f, home) {
                directory_below(f, home, 3)
            } else {
                scratch_collapsed(&dir_of(f)).to_string()
            };
            normalize_path(&dir, id)
        })
        .collect();
    HarnessEvidence {
        name: name.to_string(),
        messages: transcript(&raw.transcript),
        session: session.into_iter().collect(),
        written: written.into_iter().collect(),
    }
}

/// What is wrong with a harness's turn beyond what the driver checked: a resume field the
/// manifest declares that the harness no longer returns, and files written outside the home
/// and /tmp. Each line names the harness.
pub(crate) fn problems(harness: &Harness, raw: &RawEvidence, home: &str) -> Vec<String> {
    let messages = transcript(&raw.transcript);
    let mut out = contract_problems(harness, &messages);
    let outside: Vec<&String> = raw
        .written
        .iter()
        .filter(|f| !is_below(f, home) && !is_below(f, SCRATCH_DIR))
        .collect();
    if !outside.is_empty() {
        const SHOWN: usize = 10;
        let shown: Vec<&str> = outside.iter().take(SHOWN).map(|f| f.as_str()).collect();
        out.push(format!(
            "{}: wrote {} file(s) outside {home} and /tmp, where a sandbox keeps nothing across \
             a restart or a move of its volume: {}{}",
            harness.name,
            outside.len(),
            shown.join(", "),
            if outside.len() > SHOWN { ", ..." } else { "" }
        ));
    }
    out
}

/// Each declared resume field that a message meant to carry it lacks, or carries as
/// something other than a string in every record.
pub(crate) fn contract_problems(harness: &Harness, messages: &[Message]) -> Vec<String> {
    let mut out = Vec::new();
    for declared in &harness.resume {
        let carriers: Vec<&Message> = messages
            .iter()
            .filter(|m| m.direction == Direction::Received && m.is_named_by(&declared.message))
            .collect();
        let saved = format!(
            "the field a supervisor saves to resume the session ({MANIFEST}, harnesses[{}].resume)",
            harness.name
        );
        if carriers.is_empty() {
            out.push(format!(
                "{}: the harness sent no `{}` message, which carries `{}`, {saved}",
                harness.name, declared.message, declared.field
            ));
        }
        for m in carriers {
            let problem = match m.field(&declared.field) {
                None => "no longer has",
                Some((_, false)) => "does not always have",
                Some((types, true)) if types != "string" => "has a non-string",
                Some(_) => continue,
            };
            let types = m
                .field(&declared.field)
                .map(|(t, _)| format!(" ({t})"))
                .unwrap_or_default();
            out.push(format!(
                "{}: message `{}` {problem} field `{}`{types}, {saved}",
                harness.name,
                m.label(),
                declared.field
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use template_formats::manifest::Manifest;
    use template_formats::model::transcript::{HarnessTranscript, Transcripts};
    use template_formats::model::Platform;

    const HARNESSES: [&str; 4] = ["codex", "claude-code", "opencode", "pi"];

    fn fixture(harness: &str, run: u32) -> RawEvidence {
        let path = crate::util::repo_root().join(format!(
            "tests/fixtures/harness-evidence/{harness}-{run}.json"
        ));
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
    }

    fn manifest() -> Manifest {
        Manifest::load(&crate::util::repo_root().join(template_formats::paths::MANIFEST)).unwrap()
    }

    fn transcripts_bytes(run: u32) -> Vec<u8> {
        Transcripts {
            schema_version: template_formats::model::transcript::TRANSCRIPTS_SCHEMA_VERSION,
            platform: Platform::LinuxAmd64,
            harnesses: HARNESSES
                .iter()
                .map(|h| HarnessTranscript {
                    name: h.to_string(),
                    messages: transcript(&fixture(h, run).transcript),
                })
                .collect(),
        }
        .to_bytes()
    }

    /// Two real runs of each harness (other ids, times, texts, another interleaving of
    /// notifications) give the same transcript bytes and the same state directories.
    #[test]
    fn two_real_runs_give_the_same_evidence() {
        assert_eq!(
            String::from_utf8(transcripts_bytes(1)).unwrap(),
            String::from_utf8(transcripts_bytes(2)).unwrap()
        );
        for h in HARNESSES {
            let (a, b) = (fixture(h, 1), fixture(h, 2));
            assert_ne!(
                a.session.as_ref().unwrap().id,
                b.session.as_ref().unwrap().id
            );
            let (a, b) = (evidence(h, &a, "/workspace"), evidence(h, &b, "/workspace"));
            assert_eq!(a.session, b.session, "{h}");
            assert_eq!(a.written, b.written, "{h}");
            assert!(!a.session.is_empty(), "{h}: no directory holds its session");
        }
        let codex = evidence("codex", &fixture("codex", 1), "/workspace");
        assert!(
            codex
                .session
                .contains(&"/workspace/.codex/sessions/#/#/#".to_string()),
            "{:?}",
            codex.session
        );
        let claude = evidence("claude-code", &fixture("claude-code", 1), "/workspace");
        assert!(claude.written.contains(&SCRATCH_DIR.to_string()));
        assert!(claude
            .session
            .contains(&"/workspace/.claude/projects/-workspace".to_string()));
    }

    /// Claude Code's file-watch probe (`/tmp/claude-0/fswatch-probe-*/probe`) is left behind
    /// only when its process is killed before the probe ends: a nested engine's smoke run of
    /// the same image missed it where the real run here caught it. Either way the evidence is
    /// the same.
    #[test]
    fn a_probe_left_in_the_scratch_directory_or_not_gives_the_same_evidence() {
        let caught = fixture("claude-code", 1);
        let probe = |f: &String| f.starts_with("/tmp/claude-0/fswatch-probe-");
        assert!(caught.written.iter().any(probe), "{:?}", caught.written);
        let mut missed = fixture("claude-code", 1);
        missed.written.retain(|f| !probe(f));
        let (caught, missed) = (
            evidence("claude-code", &caught, "/workspace"),
            evidence("claude-code", &missed, "/workspace"),
        );
        assert_eq!(caught.written, missed.written);
        assert!(caught.written.contains(&SCRATCH_DIR.to_string()));
    }

    /// The smoke report's harness evidence the end-to-end tests put in fixture releases
    /// (tests/fixtures/harness-evidence/smoke-harnesses.json) is what the first real runs give.
    #[test]
    fn the_committed_smoke_evidence_is_what_the_real_runs_give() {
        let made: Vec<HarnessEvidence> = HARNESSES
            .iter()
            .map(|h| evidence(h, &fixture(h, 1), "/workspace"))
            .collect();
        let path =
            crate::util::repo_root().join("tests/fixtures/harness-evidence/smoke-harnesses.json");
        let committed: Vec<HarnessEvidence> =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert!(
            committed == made,
            "{} is not the evidence of the real runs beside it",
            path.display()
        );
    }

    /// The kinds the manifest's resume declarations name are the ones the real transcripts
    /// have, and every declared field is there as a string.
    #[test]
    fn the_real_transcripts_keep_the_resume_contract() {
        let manifest = manifest();
        for h in HARNESSES {
            let harness = manifest.harnesses.iter().find(|x| x.name == h).unwrap();
            let raw = fixture(h, 1);
            assert_eq!(problems(harness, &raw, "/workspace"), Vec::<String>::new());
        }
    }

    /// A real Codex run whose `thread/start` answers lose `thread.id`: the check names the
    /// harness, the message and the field.
    #[test]
    fn a_removed_resume_field_is_named_with_its_harness_and_message() {
        let manifest = manifest();
        let codex = manifest
            .harnesses
            .iter()
            .find(|h| h.name == "codex")
            .unwrap();
        let mut raw = fixture("codex", 1);
        let mut removed = 0;
        let started: Vec<Value> = raw
            .transcript
            .iter()
            .filter_map(|e| e.record.as_ref())
            .filter(|r| r["method"] == "thread/start")
            .map(|r| r["id"].clone())
            .collect();
        for entry in &mut raw.transcript {
            let Some(record) = entry.record.as_mut() else {
                continue;
            };
            if entry.direction == Direction::Received
                && record.get("method").is_none()
                && started.contains(&record["id"])
            {
                record["result"]["thread"]
                    .as_object_mut()
                    .unwrap()
                    .remove("id");
                removed += 1;
            }
        }
        assert_eq!(removed, 1, "one thread/start answer in the fixture");
        let problems = problems(codex, &raw, "/workspace");
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with(
                "codex: message `thread/start result [result.sandbox.type=readOnly, \
                 result.thread.status.type=idle]` no longer has field `result.thread.id`"
            ),
            "{}",
            problems[0]
        );
        // A harness that stops answering the message at all.
        raw.transcript.retain(|e| {
            e.record
                .as_ref()
                .is_none_or(|r| !started.contains(&r["id"]))
        });
        let problems = problems_of(codex, &raw);
        assert!(
            problems[0].contains("sent no `thread/start result` message"),
            "{problems:?}"
        );
    }

    fn problems_of(harness: &Harness, raw: &RawEvidence) -> Vec<String> {
        problems(harness, raw, "/workspace")
    }

    #[test]
    fn what_a_harness_makes_inside_a_temporary_directory_is_not_recorded() {
        let home = "/workspace";
        assert_eq!(
            directory_below("/workspace/.codex/.tmp/.staging/x.json", home, 3),
            "/workspace/.codex/.tmp"
        );
        assert_eq!(
            directory_below("/workspace/.codex/tmp/arg1-linux/f", home, 3),
            "/workspace/.codex/tmp"
        );
        assert_eq!(
            directory_below("/workspace/.codex/sessions/2026/f.jsonl", home, 3),
            "/workspace/.codex/sessions/2026"
        );
    }

    #[test]
    fn a_log_that_names_the_session_is_not_where_the_session_lives() {
        // opencode's log names the session only when it is flushed before the driver looks,
        // so one run of an image lists its log directory and the next does not.
        let id = "ses_4f2a";
        let raw = RawEvidence {
            transcript: vec![],
            written: vec![],
            session: Some(RawSession {
                id: id.into(),
                files: vec![
                    format!("/workspace/.local/share/opencode/storage/session/{id}.json"),
                    "/workspace/.local/share/opencode/log/2026-12-05T121500.log".into(),
                    "/workspace/.pi/agent/logs/agent.txt".into(),
                    "/workspace/.claude/debug.log".into(),
                ],
            }),
        };
        assert_eq!(
            evidence("opencode", &raw, "/workspace").session,
            ["/workspace/.local/share/opencode/storage/session"]
        );
    }

    #[test]
    fn a_file_written_outside_the_home_and_tmp_is_a_problem() {
        let manifest = manifest();
        let pi = manifest.harnesses.iter().find(|h| h.name == "pi").unwrap();
        let mut raw = fixture("pi", 1);
        assert!(problems_of(pi, &raw).is_empty());
        raw.written.push("/var/lib/pi/state.json".into());
        raw.written.push("/workspace-other/x".into());
        let problems = problems_of(pi, &raw);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with(
                "pi: wrote 2 file(s) outside /workspace and /tmp, where a sandbox keeps nothing"
            ) && problems[0].ends_with("/var/lib/pi/state.json, /workspace-other/x"),
            "{}",
            problems[0]
        );
    }

    #[test]
    fn kinds_come_from_methods_responses_and_types() {
        let entry = |direction, record: Value| RawEntry {
            direction,
            record: Some(record),
        };
        let sent = Direction::Sent;
        let received = Direction::Received;
        let messages = transcript(&[
            entry(
                sent,
                serde_json::json!({"id": 7, "method": "thread/start", "params": {}}),
            ),
            entry(
                received,
                serde_json::json!({"id": 7, "result": {"thread": {"id": "x"}}}),
            ),
            entry(received, serde_json::json!({"id": 8, "error": {"code": 1}})),
            entry(
                received,
                serde_json::json!({"type": "system", "subtype": "init", "session_id": "s"}),
            ),
            entry(
                received,
                serde_json::json!({"method": "item/completed",
                    "params": {"item": {"type": "agentMessage", "text": "hi"}}}),
            ),
            entry(
                received,
                serde_json::json!({"method": "item/completed",
                    "params": {"item": {"type": "agentMessage", "text": null, "extra": 1}}}),
            ),
            entry(
                received,
                serde_json::json!({"type": "x", "map": {"0199a1b2-c3d4": {"v": 1}}}),
            ),
            RawEntry {
                direction: received,
                record: None,
            },
        ]);
        let labels: Vec<String> = messages
            .iter()
            .map(|m| format!("{} {}", m.direction.as_str(), m.label()))
            .collect();
        assert_eq!(
            labels,
            [
                "received (not JSON)",
                "received (unknown request) error",
                "received item/completed [params.item.type=agentMessage]",
                "received system/init",
                "received thread/start result",
                "received x",
                "sent thread/start",
            ]
        );
        let item = &messages[2].fields;
        assert_eq!(item["params.item.text"], "null|string");
        assert_eq!(item["params.item.extra?"], "number");
        assert_eq!(messages[5].fields["map.*.v"], "number");
    }

    #[test]
    fn paths_lose_their_ids_and_numbers() {
        let id = "01a243e5-76db-7fd3-bc15-db1c239c3069";
        assert_eq!(
            normalize_path(
                &format!(
                    "/workspace/.codex/sessions/2026/12/05/rollout-2026-12-05T01-50-41-{id}.jsonl"
                ),
                Some(id)
            ),
            "/workspace/.codex/sessions/#/#/#/rollout-#-#-#T#-#-#-<session>.jsonl"
        );
        assert_eq!(
            normalize_path(
                "/workspace/.local/state/opencode/locks/1903d2e0817241e6b798e549697021e145425e5c.lock",
                None
            ),
            "/workspace/.local/state/opencode/locks/*.lock"
        );
        assert_eq!(
            directory_below(
                "/workspace/.codex/tmp/arg0-linux/codex-arg0XEv5TJ/.lock",
                "/workspace",
                3
            ),
            "/workspace/.codex/tmp"
        );
        assert_eq!(
            directory_below("/workspace/.claude.json", "/workspace", 3),
            "/workspace"
        );
        assert_eq!(
            directory_below("/tmp/claude-0/probe-x/p", "/tmp", 1),
            "/tmp/claude-0"
        );
        assert!(!is_below("/workspace-other/x", "/workspace"));
    }
}
