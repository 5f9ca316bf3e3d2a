//! The workflow file, read and checked: the keys the engine implements (others are errors),
//! the jobs in `needs` order, the dispatch inputs.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{anyhow, bail, Context as _, Result};
use serde_json::{Map, Value};

use crate::expr;

#[derive(Clone)]
pub(crate) struct Workflow {
    pub(crate) file: String,
    pub(crate) doc: Map<String, Value>,
    /// Job ids in a `needs` order.
    pub(crate) order: Vec<String>,
    pub(crate) inputs: Map<String, Value>,
}

pub(crate) const WORKFLOW_KEYS: &[&str] = &[
    "name",
    "run-name",
    "on",
    "permissions",
    "env",
    "defaults",
    "concurrency",
    "jobs",
];
pub(crate) const JOB_KEYS: &[&str] = &[
    "name",
    "needs",
    "if",
    "runs-on",
    "strategy",
    "env",
    "defaults",
    "outputs",
    "timeout-minutes",
    "continue-on-error",
    "permissions",
    "environment",
    "steps",
    "concurrency",
];
pub(crate) const STEP_KEYS: &[&str] = &[
    "id",
    "name",
    "if",
    "uses",
    "run",
    "shell",
    "with",
    "env",
    "working-directory",
    "continue-on-error",
    "timeout-minutes",
];

/// Refuses a key of `map` that is not in `known`: the harness would otherwise ignore what
/// GitHub acts on (or a typo GitHub rejects). `place` starts the message.
pub(crate) fn only_known_keys(map: &Map<String, Value>, known: &[&str], place: &str) -> Result<()> {
    match map.keys().find(|key| !known.contains(&key.as_str())) {
        Some(key) => {
            bail!("{place} `{key}` is not supported by the replay harness (or misspelled)")
        }
        None => Ok(()),
    }
}

impl Workflow {
    pub(crate) fn load(path: &Path) -> Result<Workflow> {
        let file = path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string());
        let raw = std::fs::read_to_string(path)
            .with_context(|| format!("reading workflow {}", path.display()))?;
        let doc: Value =
            yaml_serde::from_str(&raw).with_context(|| format!("workflow {file}: invalid YAML"))?;
        let Value::Object(doc) = doc else {
            bail!("workflow {file}: not a mapping")
        };
        only_known_keys(&doc, WORKFLOW_KEYS, &format!("workflow {file}: top-level"))?;
        let jobs = doc
            .get("jobs")
            .and_then(Value::as_object)
            .ok_or_else(|| anyhow!("workflow {file}: no `jobs:` mapping"))?;
        for (id, job) in jobs {
            let job = job
                .as_object()
                .ok_or_else(|| anyhow!("workflow {file}: job {id} is not a mapping"))?;
            only_known_keys(job, JOB_KEYS, &format!("workflow {file}, job {id}:"))?;
            let steps = job
                .get("steps")
                .and_then(Value::as_array)
                .ok_or_else(|| anyhow!("workflow {file}, job {id}: no `steps:` list"))?;
            let mut ids = BTreeSet::new();
            for (i, step) in steps.iter().enumerate() {
                let step = step.as_object().ok_or_else(|| {
                    anyhow!("workflow {file}, job {id}: step {} is not a mapping", i + 1)
                })?;
                only_known_keys(
                    step,
                    STEP_KEYS,
                    &format!("workflow {file}, job {id}, step {}:", i + 1),
                )?;
                if step.contains_key("run") == step.contains_key("uses") {
                    bail!("workflow {file}, job {id}, step {}: a step has exactly one of `run` and `uses`", i + 1);
                }
                if let Some(sid) = step.get("id").and_then(Value::as_str) {
                    if !ids.insert(sid.to_owned()) {
                        bail!("workflow {file}, job {id}: step id {sid} is used twice");
                    }
                }
            }
            for need in needs_of(job) {
                if !jobs.contains_key(&need) {
                    bail!("workflow {file}, job {id}: needs `{need}`, which is not a job of this workflow");
                }
            }
        }
        // Topological order, stable on the file's order.
        let mut order: Vec<String> = Vec::new();
        while order.len() < jobs.len() {
            let next = jobs.iter().find(|(id, job)| {
                !order.contains(id)
                    && needs_of(job.as_object().expect("checked"))
                        .iter()
                        .all(|n| order.contains(n))
            });
            match next {
                Some((id, _)) => order.push(id.clone()),
                None => bail!("workflow {file}: the jobs' `needs` form a cycle"),
            }
        }
        let inputs = doc
            .get("on")
            .and_then(|on| on.get("workflow_dispatch"))
            .and_then(|d| d.get("inputs"))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        Ok(Workflow {
            file,
            doc,
            order,
            inputs,
        })
    }

    pub(crate) fn job(&self, id: &str) -> &Map<String, Value> {
        self.doc["jobs"][id].as_object().expect("checked at load")
    }

    pub(crate) fn triggers(&self) -> Vec<String> {
        match self.doc.get("on") {
            Some(Value::Object(m)) => m.keys().cloned().collect(),
            on => names(on),
        }
    }
}

pub(crate) fn needs_of(job: &Map<String, Value>) -> Vec<String> {
    names(job.get("needs"))
}

/// A key that takes one name or a list of them (`needs: a`, `needs: [a, b]`).
pub(crate) fn names(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// A scalar YAML value as the text GitHub sees (`true`, `15`, `a string`).
pub(crate) fn scalar_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => expr::to_string(other),
    }
}
