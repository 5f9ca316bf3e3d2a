//! The suite's fuzzing of what the verifier reads from others: Sigstore bundles and trusted
//! roots, receipts, a registry's manifests, index and configs, gh's JSON. Each parser has a
//! target, a `#[test]` beside the parser (named `fuzz_*`), that feeds it inputs mutated from
//! real seeds and fails on the first panic, naming the input.
//!
//! Why not cargo-fuzz: libFuzzer's coverage guidance needs a nightly compiler and a second,
//! instrumented build of the verifier, minutes of the suite's budget on every run. This is a
//! seeded mutation loop instead, on the stable test build: deterministic (a fixed generator
//! seed and a fixed number of inputs per target, so a crash reproduces by running the test
//! again), bounded (`TEMPLATE_VERIFY_FUZZ_INPUTS`, default [`DEFAULT_INPUTS`], runs longer
//! campaigns by hand), and structure-aware: a seed that is JSON is mostly mutated as JSON
//! (a value replaced by another type, an extreme number, a long string, a deep nesting, a key
//! removed, a value moved from elsewhere, base64 text decoded, mutated and re-encoded), so
//! the inputs get past the JSON reader into the checks behind it, as far as a certificate's
//! DER. What it cannot find is what needs coverage to reach; what it does find is every
//! `unwrap`, index and slice a hostile document can reach from the seeds.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::Value;

/// Inputs per target in the suite: about a second or two each in the test profile.
pub(crate) const DEFAULT_INPUTS: usize = 2_000;
/// An input that takes longer than this is reported like a crash: a hostile document must not
/// stall the verifier.
const SLOW: Duration = Duration::from_secs(5);

/// What a campaign found.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub target: String,
    pub tried: usize,
    pub elapsed: Duration,
    /// The first input that panicked or stalled, with what happened.
    pub finding: Option<Finding>,
}

#[derive(Debug)]
pub(crate) struct Finding {
    pub input: Vec<u8>,
    pub what: String,
    pub after: usize,
}

/// How many inputs a target gets: `TEMPLATE_VERIFY_FUZZ_INPUTS`, else [`DEFAULT_INPUTS`].
pub(crate) fn inputs() -> usize {
    std::env::var("TEMPLATE_VERIFY_FUZZ_INPUTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_INPUTS)
}

/// Feeds `target` the seeds themselves, then `count` mutants of them, and stops at the first
/// panic or stall. The generator's seed comes from the target's name, so every run of a target
/// tries the same inputs.
pub(crate) fn campaign(
    name: &str,
    seeds: &[Vec<u8>],
    count: usize,
    target: impl Fn(&[u8]),
) -> Outcome {
    assert!(!seeds.is_empty(), "fuzz target {name} has no seeds");
    campaign_within(name, seeds, count, SLOW, target)
}

fn campaign_within(
    name: &str,
    seeds: &[Vec<u8>],
    count: usize,
    slow: Duration,
    target: impl Fn(&[u8]),
) -> Outcome {
    let mut rng = Rng::new(name);
    let parsed: Vec<Option<Value>> = seeds
        .iter()
        .map(|s| serde_json::from_slice(s).ok())
        .collect();
    let donors: Vec<Value> = parsed.iter().flatten().cloned().collect();
    let start = Instant::now();
    // The default panic hook stays: its message goes to this test's captured output, which
    // libtest shows when the finding fails the test.
    let mut outcome = Outcome {
        target: name.to_string(),
        tried: 0,
        elapsed: Duration::ZERO,
        finding: None,
    };
    let mutants = (0..count).map(|_| mutate(&mut rng, seeds, &parsed, &donors));
    for input in seeds.iter().cloned().chain(mutants) {
        outcome.tried += 1;
        let began = Instant::now();
        let result = catch_unwind(AssertUnwindSafe(|| target(&input)));
        let took = began.elapsed();
        let what = match result {
            Err(panic) => Some(format!("panicked: {}", panic_text(&panic))),
            Ok(()) if took > slow => Some(format!("took {took:?} (more than {slow:?})")),
            Ok(()) => None,
        };
        if let Some(what) = what {
            outcome.finding = Some(Finding {
                input,
                what,
                after: outcome.tried,
            });
            break;
        }
    }
    outcome.elapsed = start.elapsed();
    outcome
}

/// Fails with the finding, else prints the figure (inputs tried, time) past libtest's capture.
pub(crate) fn assert_clean(outcome: &Outcome) {
    if let Some(f) = &outcome.finding {
        panic!(
            "fuzz target {}: input {} of this run {}; the input ({} bytes):\n{}",
            outcome.target,
            f.after,
            f.what,
            f.input.len(),
            String::from_utf8_lossy(&f.input)
        );
    }
    let line = format!(
        "fuzz target {}: {} inputs, no crash, {:.1} s\n",
        outcome.target,
        outcome.tried,
        outcome.elapsed.as_secs_f64()
    );
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
}

fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(a panic without a message)".into())
}

/// splitmix64: small, fast, and the same on every machine.
struct Rng(u64);

impl Rng {
    fn new(name: &str) -> Rng {
        // FNV-1a of the name.
        let seed = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// One to four mutations of one seed (sometimes spliced with another): as JSON three times in
/// four when the seed is JSON, else as bytes.
fn mutate(rng: &mut Rng, seeds: &[Vec<u8>], parsed: &[Option<Value>], donors: &[Value]) -> Vec<u8> {
    let which = rng.below(seeds.len());
    let seed = &seeds[which];
    let rounds = 1 + rng.below(4);
    if rng.chance(75) {
        if let Some(value) = &parsed[which] {
            let mut value = value.clone();
            // Fewer rounds as JSON: each one makes a reader's refusal likelier.
            for _ in 0..rounds.div_ceil(2) {
                mutate_json(rng, &mut value, donors);
            }
            return serde_json::to_vec(&value).expect("a JSON value serializes");
        }
    }
    let mut bytes = seed.clone();
    for _ in 0..rounds {
        mutate_bytes(rng, &mut bytes, seeds);
    }
    bytes
}

const INTERESTING_BYTES: [u8; 12] = [
    0, 0xff, 0x7f, 0x80, b'"', b'\\', b'{', b'}', b'[', b']', b':', b',',
];
const INTERESTING_TOKENS: [&str; 10] = [
    "null",
    "-1",
    "1e999",
    "\"\"",
    "18446744073709551616",
    "\\u0000",
    "{}",
    "[]",
    "\u{202e}",
    "%00",
];

fn mutate_bytes(rng: &mut Rng, bytes: &mut Vec<u8>, seeds: &[Vec<u8>]) {
    if bytes.is_empty() {
        bytes.push(INTERESTING_BYTES[rng.below(INTERESTING_BYTES.len())]);
        return;
    }
    let at = rng.below(bytes.len());
    match rng.below(7) {
        0 => bytes[at] ^= 1 << rng.below(8),
        1 => bytes[at] = INTERESTING_BYTES[rng.below(INTERESTING_BYTES.len())],
        2 => {
            let end = (at + 1 + rng.below(16)).min(bytes.len());
            bytes.drain(at..end);
        }
        3 => {
            let end = (at + 1 + rng.below(64)).min(bytes.len());
            let copy = bytes[at..end].to_vec();
            let to = rng.below(bytes.len());
            bytes.splice(to..to, copy);
        }
        4 => {
            let token = INTERESTING_TOKENS[rng.below(INTERESTING_TOKENS.len())];
            bytes.splice(at..at, token.bytes());
        }
        5 => bytes.truncate(at),
        _ => {
            let other = &seeds[rng.below(seeds.len())];
            let from = rng.below(other.len().max(1));
            bytes.truncate(at);
            bytes.extend_from_slice(other.get(from..).unwrap_or_default());
        }
    }
}

/// Half the time changes the contents of one string (where a document's certificates,
/// signatures and digests are, so the input still has the reader's shape and meets the checks
/// behind it); else replaces, removes or reshapes one node, chosen uniformly among all.
fn mutate_json(rng: &mut Rng, value: &mut Value, donors: &[Value]) {
    let strings = count_strings(value);
    if strings > 0 && rng.chance(50) {
        let mut seen = 0;
        let pick = rng.below(strings);
        if let Some(Value::String(s)) = nth_string(value, pick, &mut seen) {
            mutate_string(rng, s);
        }
        return;
    }
    let count = count_nodes(value);
    let target = rng.below(count);
    let mut seen = 0;
    let node = nth_node(value, target, &mut seen).expect("the node exists");
    match rng.below(10) {
        0 => *node = extreme_value(rng),
        1 => {
            // Another type in its place, of the kind parsers trip on.
            *node = match node {
                Value::String(s) => Value::Array(vec![Value::String(std::mem::take(s))]),
                Value::Array(a) => Value::Object(
                    a.drain(..)
                        .enumerate()
                        .map(|(i, v)| (i.to_string(), v))
                        .collect(),
                ),
                Value::Object(_) => Value::String("{}".into()),
                Value::Number(n) => Value::String(n.to_string()),
                Value::Bool(b) => Value::Number((*b as u8).into()),
                Value::Null => Value::Object(Default::default()),
            }
        }
        2 => match node {
            Value::Object(map) if !map.is_empty() => {
                let key = map.keys().nth(rng.below(map.len())).cloned().unwrap();
                map.remove(&key);
            }
            Value::Array(items) if !items.is_empty() => {
                items.remove(rng.below(items.len()));
            }
            other => *other = Value::Null,
        },
        3 => match node {
            Value::Array(items) if !items.is_empty() => {
                let copy = items[rng.below(items.len())].clone();
                let n = 1 + rng.below(3);
                items.extend(std::iter::repeat_n(copy, n));
            }
            Value::Object(map) if !map.is_empty() => {
                let key = map.keys().nth(rng.below(map.len())).cloned().unwrap();
                let copy = map[&key].clone();
                map.insert(format!("{key}\u{0}"), copy);
            }
            other => *other = Value::Array(vec![other.take(), Value::Null]),
        },
        4 => {
            // A value from elsewhere: the same place in another seed is often valid there.
            let donor = &donors[rng.below(donors.len())];
            let mut seen = 0;
            let pick = rng.below(count_nodes(donor));
            *node = nth_node_ref(donor, pick, &mut seen)
                .cloned()
                .unwrap_or(Value::Null);
        }
        5 => {
            let mut deep = Value::Null;
            for _ in 0..(1 + rng.below(200)) {
                deep = Value::Array(vec![deep]);
            }
            *node = deep;
        }
        _ => match node {
            Value::String(s) => mutate_string(rng, s),
            Value::Number(n) => {
                *node = match rng.below(4) {
                    0 => (-(n.as_f64().unwrap_or(0.0))).into(),
                    1 => Value::from(n.as_u64().unwrap_or(0).wrapping_add(1)),
                    2 => Value::from(u64::MAX),
                    _ => Value::from(i64::MIN),
                }
            }
            other => *other = extreme_value(rng),
        },
    }
}

/// A string changed as its contents: base64 decoded, mutated as bytes and re-encoded (a
/// certificate, a signature, a DSSE payload), else edited as text.
fn mutate_string(rng: &mut Rng, s: &mut String) {
    let engine = base64::engine::general_purpose::STANDARD;
    if s.len() >= 16 && rng.chance(70) {
        if let Ok(mut bytes) = engine.decode(s.as_bytes()) {
            let seeds = [bytes.clone()];
            for _ in 0..(1 + rng.below(3)) {
                mutate_bytes(rng, &mut bytes, &seeds);
            }
            *s = engine.encode(bytes);
            return;
        }
    }
    let mut bytes = s.clone().into_bytes();
    let seeds = [bytes.clone()];
    mutate_bytes(rng, &mut bytes, &seeds);
    *s = String::from_utf8_lossy(&bytes).into_owned();
}

fn extreme_value(rng: &mut Rng) -> Value {
    match rng.below(9) {
        0 => Value::Null,
        1 => Value::Bool(true),
        2 => Value::from(-1),
        3 => Value::from(u64::MAX),
        4 => Value::from(f64::MAX),
        5 => Value::String(String::new()),
        6 => Value::String("A".repeat(1 + rng.below(100_000))),
        7 => Value::Array(vec![]),
        _ => Value::Object(Default::default()),
    }
}

fn count_strings(value: &Value) -> usize {
    match value {
        Value::String(_) => 1,
        Value::Array(items) => items.iter().map(count_strings).sum(),
        Value::Object(map) => map.values().map(count_strings).sum(),
        _ => 0,
    }
}

fn nth_string<'a>(value: &'a mut Value, n: usize, seen: &mut usize) -> Option<&'a mut Value> {
    match value {
        Value::String(_) => {
            *seen += 1;
            (*seen == n + 1).then_some(value)
        }
        Value::Array(items) => items.iter_mut().find_map(|v| nth_string(v, n, seen)),
        Value::Object(map) => map.values_mut().find_map(|v| nth_string(v, n, seen)),
        _ => None,
    }
}

fn count_nodes(value: &Value) -> usize {
    1 + match value {
        Value::Array(items) => items.iter().map(count_nodes).sum(),
        Value::Object(map) => map.values().map(count_nodes).sum(),
        _ => 0,
    }
}

fn nth_node<'a>(value: &'a mut Value, n: usize, seen: &mut usize) -> Option<&'a mut Value> {
    if *seen == n {
        return Some(value);
    }
    *seen += 1;
    match value {
        Value::Array(items) => items.iter_mut().find_map(|v| nth_node(v, n, seen)),
        Value::Object(map) => map.values_mut().find_map(|v| nth_node(v, n, seen)),
        _ => None,
    }
}

fn nth_node_ref<'a>(value: &'a Value, n: usize, seen: &mut usize) -> Option<&'a Value> {
    if *seen == n {
        return Some(value);
    }
    *seen += 1;
    match value {
        Value::Array(items) => items.iter().find_map(|v| nth_node_ref(v, n, seen)),
        Value::Object(map) => map.values().find_map(|v| nth_node_ref(v, n, seen)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A parser with the bug fuzzing is for: it trusts that `items` has two entries.
    fn fragile(bytes: &[u8]) {
        if let Ok(v) = serde_json::from_slice::<Value>(bytes) {
            if let Some(items) = v["items"].as_array() {
                let _second = &items[1];
            }
        }
    }

    /// The same parser, fixed.
    fn sturdy(bytes: &[u8]) {
        if let Ok(v) = serde_json::from_slice::<Value>(bytes) {
            let _second = v["items"].as_array().and_then(|items| items.get(1));
        }
    }

    #[test]
    fn a_panic_behind_the_json_reader_is_found_and_its_input_named() {
        let seeds = [br#"{"items": ["a", "b"], "name": "x"}"#.to_vec()];
        let found = campaign("fragile", &seeds, 2_000, fragile);
        let finding = found.finding.expect("the fuzzer found the short array");
        assert!(
            finding.what.contains("index out of bounds"),
            "{}",
            finding.what
        );
        // The input it names reproduces the crash.
        assert!(catch_unwind(|| fragile(&finding.input)).is_err());
        let clean = campaign("fragile", &seeds, 2_000, sturdy);
        assert!(clean.finding.is_none(), "{:?}", clean.finding);
        assert_eq!(clean.tried, 2_001);
    }

    #[test]
    fn a_campaign_tries_the_same_inputs_every_run() {
        let seeds =
            [br#"{"a": [1, "two", {"b": null}], "c": "aGVsbG8gd29ybGQgaGVsbG8="}"#.to_vec()];
        let record = |name: &str| {
            let seen = std::cell::RefCell::new(Vec::new());
            campaign(name, &seeds, 300, |b| seen.borrow_mut().push(b.to_vec()));
            seen.into_inner()
        };
        let first = record("same");
        assert_eq!(first, record("same"));
        assert_ne!(first, record("other"));
        let distinct: std::collections::BTreeSet<&Vec<u8>> = first.iter().collect();
        assert!(
            distinct.len() > 250,
            "only {} distinct inputs",
            distinct.len()
        );
        // Both kinds of mutant are made: ones that still parse as JSON, and ones that do not.
        let json = first
            .iter()
            .filter(|b| serde_json::from_slice::<Value>(b).is_ok())
            .count();
        assert!(json > 100 && json < 300, "{json} of 301 parse as JSON");
    }

    #[test]
    fn a_stalling_input_is_a_finding() {
        let seeds = [b"x".to_vec()];
        let slow = Duration::from_millis(20);
        let found = campaign_within("stall", &seeds, 0, slow, |_| std::thread::sleep(slow * 2));
        assert!(found.finding.unwrap().what.contains("took"));
    }
}
