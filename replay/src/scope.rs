//! What an expression sees at one place in the workflow ([`Ctx`], the engine's
//! [`expr::Scope`]): the contexts, the strict checks of property paths, status functions and
//! `hashFiles`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::Result;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::{expr, glob};

#[derive(Clone, Copy)]
pub(crate) enum StatusMode {
    /// A job `if:`: from the results of the needed jobs.
    Job { success: bool, failure: bool },
    /// A step `if:` (and everything after the job started): from the job's status.
    Step { failed: bool, cancelled: bool },
    /// Places where status functions are not allowed.
    None,
}

/// What an expression sees at one place in the workflow.
pub(crate) struct Ctx<'a> {
    pub(crate) contexts: Map<String, Value>,
    pub(crate) place: &'static str,
    pub(crate) step_ids: Option<&'a [String]>,
    pub(crate) need_ids: &'a [String],
    pub(crate) need_outputs: &'a BTreeMap<String, BTreeSet<String>>,
    pub(crate) inputs_declared: &'a Map<String, Value>,
    /// Who declares the inputs (`the workflow`, or an action), for messages.
    pub(crate) inputs_owner: &'a str,
    pub(crate) status: StatusMode,
    pub(crate) workspace: Option<&'a Path>,
    /// False after the job failed: an output a step did not get to write reads as empty.
    pub(crate) strict_outputs: bool,
}

impl expr::Scope for Ctx<'_> {
    fn context(&self, name: &str) -> Result<Value, String> {
        self.contexts.get(name).cloned().ok_or_else(|| {
            format!(
                "the `{name}` context is not available in {} (or does not exist)",
                self.place
            )
        })
    }

    fn check_path(&self, path: &[String], found: bool) -> Result<(), String> {
        let p: Vec<&str> = path.iter().map(String::as_str).collect();
        match p.as_slice() {
            ["steps", id] => {
                let ids = self.step_ids.unwrap_or(&[]);
                if !ids.iter().any(|s| s.eq_ignore_ascii_case(id)) {
                    return Err(format!(
                        "`steps.{id}`: no step of this job has id `{id}` (ids: {})",
                        ids.join(", ")
                    ));
                }
                if !found {
                    return Err(format!(
                        "`steps.{id}`: step `{id}` has not run yet at this point"
                    ));
                }
            }
            ["steps", id, field] if !["outputs", "outcome", "conclusion"].contains(field) => {
                return Err(format!(
                    "`steps.{id}.{field}`: a step has outputs, outcome and conclusion only"
                ));
            }
            ["steps", id, "outputs", name] if !found => {
                let step = self.contexts["steps"]
                    .as_object()
                    .and_then(|steps| steps.iter().find(|(k, _)| k.eq_ignore_ascii_case(id)))
                    .map(|(_, v)| v)
                    .unwrap_or(&Value::Null);
                if self.strict_outputs && step["outcome"] == "success" {
                    let written: Vec<&String> = step["outputs"]
                        .as_object()
                        .map(|o| o.keys().collect())
                        .unwrap_or_default();
                    return Err(format!(
                        "`steps.{id}.outputs.{name}`: step `{id}` ran and never wrote output `{name}` (it wrote: {written:?})"
                    ));
                }
            }
            ["needs", id] if !self.need_ids.iter().any(|n| n.eq_ignore_ascii_case(id)) => {
                return Err(format!(
                    "`needs.{id}`: this job does not need `{id}` (needs: {})",
                    self.need_ids.join(", ")
                ));
            }
            ["needs", id, field] if !["outputs", "result"].contains(field) => {
                return Err(format!(
                    "`needs.{id}.{field}`: a needed job has outputs and result only"
                ));
            }
            ["needs", id, "outputs", name] => {
                let declared = self
                    .need_outputs
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(id))
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default();
                if !declared.iter().any(|d| d.eq_ignore_ascii_case(name)) {
                    return Err(format!("`needs.{id}.outputs.{name}`: job `{id}` declares no output `{name}` (outputs: {declared:?})"));
                }
            }
            ["matrix", key] if !found => {
                let keys: Vec<&String> = self
                    .contexts
                    .get("matrix")
                    .and_then(Value::as_object)
                    .map(|m| m.keys().collect())
                    .unwrap_or_default();
                return Err(format!(
                    "`matrix.{key}`: this matrix leg has no key `{key}` (keys: {keys:?})"
                ));
            }
            ["inputs", name]
                if !self
                    .inputs_declared
                    .keys()
                    .any(|k| k.eq_ignore_ascii_case(name)) =>
            {
                return Err(format!(
                    "`inputs.{name}`: {} declares no input `{name}` (inputs: {:?})",
                    self.inputs_owner,
                    self.inputs_declared.keys().collect::<Vec<_>>()
                ));
            }
            ["github" | "runner" | "job" | "strategy", key] if !found => {
                return Err(format!(
                    "`{}.{key}`: no such property in the replay's `{}` context",
                    p[0], p[0]
                ));
            }
            _ => {}
        }
        Ok(())
    }

    fn status(&self, function: &str) -> Result<bool, String> {
        Ok(match (self.status, function) {
            (_, "always") => true,
            (StatusMode::None, f) => {
                return Err(format!("{f}() is not available in {}", self.place))
            }
            (StatusMode::Job { success, .. }, "success") => success,
            (StatusMode::Job { failure, .. }, "failure") => failure,
            (StatusMode::Job { .. }, _) => false,
            (StatusMode::Step { failed, cancelled }, "success") => !failed && !cancelled,
            (StatusMode::Step { failed, .. }, "failure") => failed,
            (StatusMode::Step { cancelled, .. }, _) => cancelled,
        })
    }

    /// actions/runner v2.336.0, src/Misc/expressionFunc/hashFiles/src/hashFiles.ts: the
    /// sha256 of the matched files' sha256s, in match order, files outside the workspace left
    /// out, and `''` when nothing matched.
    fn hash_files(&self, patterns: &[String]) -> Result<String, String> {
        let workspace = self
            .workspace
            .ok_or_else(|| format!("hashFiles() is not available in {}", self.place))?;
        let matched = glob::expand(workspace, &patterns.join("\n"), true);
        let mut total = Sha256::new();
        let mut any = false;
        for file in matched.files.iter().filter(|f| f.starts_with(workspace)) {
            let bytes =
                std::fs::read(file).map_err(|e| format!("hashFiles: {}: {e}", file.display()))?;
            total.update(Sha256::digest(&bytes));
            any = true;
        }
        Ok(if any {
            hex::encode(total.finalize())
        } else {
            String::new()
        })
    }
}
