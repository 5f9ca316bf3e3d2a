//! Stand-ins a test registers for the actions the harness does not emulate.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;

use crate::leg::{Leg, StepEnd};
use crate::runner::{exec_as_runner, give_to_runner};

/// What a closure stand-in gets: the evaluated `with:` inputs and the job's workspace.
pub struct ActionCall<'a> {
    pub with: &'a BTreeMap<String, String>,
    pub workspace: &'a Path,
}

/// A closure stand-in returns the step's outputs, or why the step failed.
pub type ActionFn =
    Arc<dyn Fn(&ActionCall) -> Result<BTreeMap<String, String>, String> + Send + Sync>;

/// A stand-in for an action the harness does not emulate, keyed by `owner/name`.
#[derive(Clone)]
pub enum StandIn {
    /// Runs in the harness (as root): for actions whose effect lives outside the job.
    Closure(ActionFn),
    /// A bash script run like a `run:` step as the runner, with the inputs as `INPUT_<NAME>`
    /// variables (GitHub's convention) and `GITHUB_OUTPUT` for outputs.
    Script(String),
}

pub(super) fn run_stand_in(
    leg: &mut Leg,
    stand_in: &StandIn,
    with: &BTreeMap<String, String>,
    env: &BTreeMap<String, String>,
    log: &Path,
    deadline: Instant,
) -> Result<StepEnd> {
    match stand_in {
        StandIn::Closure(f) => {
            let call = ActionCall {
                with,
                workspace: &leg.workspace,
            };
            match f(&call) {
                Ok(outputs) => Ok(StepEnd {
                    outputs,
                    ..StepEnd::ok()
                }),
                Err(e) => {
                    let mut logf = std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(log)?;
                    writeln!(logf, "##[error]{e}")?;
                    Ok(StepEnd::failed())
                }
            }
        }
        StandIn::Script(script) => {
            let mut env = env.clone();
            for (k, v) in with {
                env.insert(
                    format!("INPUT_{}", k.replace(' ', "_").to_ascii_uppercase()),
                    v.clone(),
                );
            }
            let path = leg.temp.join(format!("action-{}.sh", leg.steps.len() + 1));
            std::fs::write(&path, script)?;
            give_to_runner(&path)?;
            let argv = ["bash", "--noprofile", "--norc", "-eo", "pipefail"]
                .iter()
                .map(|s| s.to_string())
                .chain([path.display().to_string()])
                .collect::<Vec<_>>();
            exec_as_runner(&argv, &env, &leg.workspace, log, deadline)
        }
    }
}
