//! The replay's expression evaluator (`src/expr/`) against GitHub's own known-answer tests
//! for the expression language.
//!
//! The cases are `expressions/testdata/*.json` of
//! actions/languageservices@4043eda158e16579cc5fb1b0b07a4bce2a76f0b5 (`@actions/expressions`
//! 0.3.61, MIT, LICENSE beside them), copied unchanged into this crate's
//! `tests/fixtures/actions-expressions/`. Upstream runs them
//! through `expressions/src/xlang.test.ts`; the file format is its `TestCase`: `expr`, optional
//! `contexts`, and either `result: {kind, value}` or `err: {kind: lexing|parsing|evaluation}`.
//! The cases marked `options.skip: ["typescript"]` are ones the TypeScript port gets wrong
//! and the runner's own evaluator (C#, actions/runner) gets right, so they are run here too.
//!
//! Every case must agree, except the ones listed in [`KNOWN_DIVERGENCES`], each with the
//! reason the replay can live with it; a listed case that starts agreeing fails too, so the
//! list stays true. The test prints the figure: cases agreeing out of cases run.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value};

use actions_replay::expr;

const CASES_DIR: &str = "tests/fixtures/actions-expressions";

/// Cases where the replay's evaluator answers differently from GitHub's, by file and `expr`,
/// with why that does not matter for the workflows the replay runs.
const KNOWN_DIVERGENCES: &[(&str, &str, &str)] = &[(
    "syntax-errors",
    MEMORY_CASE,
    "the runner's evaluator fails an expression whose intermediate values outgrow its memory \
     budget (actions/runner's EvaluationMemory); the replay keeps no budget, as the TypeScript \
     port keeps none (upstream marks the case skip: typescript). The workflows the replay runs \
     build strings of a few hundred bytes.",
)];

/// The one case of `syntax-errors.json`'s `memory-errors` group: forty copies of
/// `toJSON(github)` formatted into one string, twice.
const MEMORY_CASE: &str = "startswith(format('{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}', tojson(github)), format('{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}', tojson(github)))";

/// What a case expects.
#[derive(Debug)]
enum Expected {
    Value { kind: String, value: Value },
    Error { stage: String },
}

#[derive(Debug)]
struct Case {
    file: String,
    group: String,
    expr: String,
    contexts: Map<String, Value>,
    expected: Expected,
}

fn load_cases(dir: &Path) -> Vec<Case> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    let mut cases = Vec::new();
    for path in files {
        let file = path.file_stem().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let groups: Map<String, Value> = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{} is not a case file: {e}", path.display()));
        for (group, list) in groups {
            // Upstream files carry a few non-list keys (none today); only lists are cases.
            let Value::Array(list) = list else { continue };
            for case in list {
                let expr = case["expr"]
                    .as_str()
                    .expect("every case has an expr")
                    .to_owned();
                let contexts = case
                    .get("contexts")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                let expected = if let Some(err) = case.get("err") {
                    Expected::Error {
                        stage: err["kind"].as_str().unwrap_or_default().to_owned(),
                    }
                } else {
                    Expected::Value {
                        kind: case["result"]["kind"].as_str().unwrap().to_owned(),
                        value: case["result"]["value"].clone(),
                    }
                };
                cases.push(Case {
                    file: file.clone(),
                    group: group.clone(),
                    expr,
                    contexts,
                    expected,
                });
            }
        }
    }
    cases
}

/// The contexts a case names, and nothing else: no status functions, no files.
struct CaseScope<'a>(&'a Map<String, Value>);

impl expr::Scope for CaseScope<'_> {
    fn context(&self, name: &str) -> Result<Value, String> {
        // GitHub resolves named values case-insensitively (`GITHUB.sha`).
        self.0
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
            .ok_or_else(|| format!("Unrecognized named-value: '{name}'"))
    }
    fn check_path(&self, _: &[String], _: bool) -> Result<(), String> {
        Ok(())
    }
    fn status(&self, function: &str) -> Result<bool, String> {
        Err(format!("{function}() is not available in a test case"))
    }
    fn hash_files(&self, _: &[String]) -> Result<String, String> {
        Err("hashFiles() is not available in a test case".into())
    }
}

/// Numbers compare by value (`1` and `1.0` are one number to JSON.stringify), and a Number
/// whose expected value is null is a non-finite one: JSON.stringify writes NaN and ±Infinity
/// as null.
fn same_value(actual: &expr::Data, expected: &Value) -> bool {
    use expr::Data;
    match (actual, expected) {
        (Data::Num(n), Value::Null) => !n.is_finite(),
        (Data::Num(n), Value::Number(m)) => m.as_f64() == Some(*n),
        (Data::Arr { items, .. }, Value::Array(want)) => {
            items.len() == want.len() && items.iter().zip(want).all(|(a, b)| same_value(a, b))
        }
        (Data::Obj(pairs), Value::Object(want)) => {
            pairs.len() == want.len()
                && pairs
                    .iter()
                    .all(|(k, v)| want.get(k).is_some_and(|w| same_value(v, w)))
        }
        (Data::Null, Value::Null) => true,
        (Data::Bool(a), Value::Bool(b)) => a == b,
        (Data::Str(a), Value::String(b)) => a == b,
        _ => false,
    }
}

/// What the replay's evaluator makes of a case: None when it agrees, else what it said.
fn disagreement(case: &Case) -> Option<String> {
    let scope = CaseScope(&case.contexts);
    let outcome = expr::parse(&case.expr).and_then(|e| expr::eval_data(&e, &scope));
    match (&case.expected, outcome) {
        (Expected::Error { .. }, Err(_)) => None,
        (Expected::Error { stage }, Ok(v)) => Some(format!(
            "expected a {stage} error, got {} {}",
            v.kind(),
            v.to_json()
        )),
        (Expected::Value { kind, value }, Err(e)) => {
            Some(format!("expected {kind} {value}, got the error: {e}"))
        }
        (Expected::Value { kind, value }, Ok(v)) => {
            let agrees = v.kind() == kind && same_value(&v, value);
            (!agrees).then(|| format!("expected {kind} {value}, got {} {:?}", v.kind(), v))
        }
    }
}

#[test]
fn the_replay_evaluates_expressions_as_github_does() {
    let cases = load_cases(&Path::new(env!("CARGO_MANIFEST_DIR")).join(CASES_DIR));
    assert!(
        cases.len() >= 1000,
        "{CASES_DIR} holds {} cases; upstream's 28 files hold 1,020",
        cases.len()
    );
    let known: BTreeMap<(&str, &str), &str> = KNOWN_DIVERGENCES
        .iter()
        .map(|(file, expr, why)| ((*file, *expr), *why))
        .collect();
    let mut unexpected = Vec::new();
    let mut agreeing = 0;
    let mut divergent_as_known = 0;
    let mut now_agreeing = Vec::new();
    for case in &cases {
        let listed = known.contains_key(&(case.file.as_str(), case.expr.as_str()));
        match (disagreement(case), listed) {
            (None, false) => agreeing += 1,
            (None, true) => now_agreeing.push(format!("{}: {}", case.file, case.expr)),
            (Some(_), true) => divergent_as_known += 1,
            (Some(what), false) => unexpected.push(format!(
                "{} / {}: `{}`: {what}",
                case.file, case.group, case.expr
            )),
        }
    }
    eprintln!(
        "expressions: {agreeing} of {} of GitHub's cases agree, {divergent_as_known} known \
         divergences ({CASES_DIR})",
        cases.len()
    );
    assert!(
        unexpected.is_empty(),
        "{} cases disagree with GitHub's evaluator:\n{}",
        unexpected.len(),
        unexpected.join("\n")
    );
    assert!(
        now_agreeing.is_empty(),
        "listed as divergent but now agree (remove them from KNOWN_DIVERGENCES):\n{}",
        now_agreeing.join("\n")
    );
}
