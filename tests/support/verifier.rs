//! The consumer's static verifiers, as the end-to-end tests get them: built once per test
//! process by the release workflow's own `verifier` job (`update-template.yml`), replayed alone
//! by the replay engine as the runner user, from a scratch copy of this repository.
//!
//! The one build serves twice, as on GitHub:
//!
//! - its binaries are the verifiers the consumer's tests run (`replayed_consumer`: [`verifier`], the
//!   amd64 one), built where no consumer's machine has the build tree: the runner's workspace
//!   is removed before anything runs them;
//! - its `actions/cache` entry (the job's Rust build cache: `target` and `~/.cargo/registry`)
//!   lands in the store the workflow replays share ([`super::replay_cache_store`]), so the due
//!   day's `verifier` job (tests/it/replay.rs) restores it, as every release after the first
//!   does on GitHub, and compiles only the workspace's own crates (the checkout gives their
//!   files new times) instead of both targets cold a second time.
//!
//! Before, the consumer's tests built the amd64 verifier as root with the script, and the due
//! day's job built both targets cold again: the amd64 compile twice, about 8 minutes of the
//! due day on two cores. What proves the cold build now is this replay: the committed job's
//! steps, as the runner, from an empty cache, every step checked.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::{json, Value};

use super::{checkout_text, run_dir};

const WORKFLOW: &str = ".github/workflows/update-template.yml";
/// The job that builds the verifiers, and what it uploads them as.
const JOB: &str = "verifier";
const ARTIFACT: &str = "verifiers";

/// `update-template.yml` with only its `verifier` job, run on its own: its `needs: plan` and
/// its `if:` on the plan's output go (nothing else changes). Each removal must find what it
/// removes, so a change to the workflow cannot silently leave this replaying something else.
fn verifier_job_alone(workflow: &str) -> String {
    super::cold_builds::only_job(workflow, JOB, |job_map| {
        assert_eq!(
        job_map.remove("needs"),
        Some(json!("plan")),
        "{WORKFLOW}: the `{JOB}` job no longer needs only `plan`; update tests/support/verifier.rs"
    );
        assert_eq!(
            job_map.remove("if"),
            Some(json!("needs.plan.outputs.publish == 'true'")),
            "{WORKFLOW}: the `{JOB}` job's `if:` changed; update tests/support/verifier.rs"
        );
    })
}

struct Built {
    _dir: tempfile::TempDir,
    amd64: PathBuf,
}

fn built() -> &'static Built {
    static BUILT: OnceLock<Built> = OnceLock::new();
    BUILT.get_or_init(|| {
        use std::os::unix::fs::PermissionsExt as _;
        let run = super::cold_builds::replay_alone(
            "verifier job",
            &verifier_job_alone(&checkout_text(WORKFLOW)),
        );
        // The build tree goes before anything runs the binaries.
        let workspace = run.job(JOB).workspace.clone();
        {
            // Checked under the lock: once it is released, another replay of the same
            // repository (another test process on this machine) may make the directory again.
            let _lock = actions_replay::lock_workspace().unwrap();
            std::fs::remove_dir_all(&workspace)
                .unwrap_or_else(|e| panic!("removing {}: {e}", workspace.display()));
            assert!(
                !workspace.exists(),
                "the build tree {} is gone",
                workspace.display()
            );
        }
        let dir = tempfile::Builder::new()
            .prefix("verifiers-")
            .tempdir_in(run_dir())
            .unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let uploaded = run.artifacts_dir().join(ARTIFACT).join("files");
        let amd64 = dir.path().join("template-verify-linux-amd64");
        std::fs::copy(uploaded.join("template-verify-linux-amd64"), &amd64)
            .unwrap_or_else(|e| panic!("the `{ARTIFACT}` artifact has no amd64 verifier: {e}"));
        std::fs::set_permissions(&amd64, std::fs::Permissions::from_mode(0o755)).unwrap();
        Built { _dir: dir, amd64 }
    })
}

/// The static amd64 verifier the release workflow's `verifier` job built (see the module).
pub fn verifier() -> &'static Path {
    &built().amd64
}

/// Makes sure the verifier job's `actions/cache` entry is in the shared store before a replay
/// of the whole workflow reaches its own `verifier` job: made here unless the suite's lane of
/// cold builds (`super::cold_builds`) has made it, or is making it.
pub fn verifier_job_cache() {
    built();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verifier_job_runs_alone_and_unchanged() {
        let text = checkout_text(WORKFLOW);
        let alone: Value = yaml_serde::from_str(&verifier_job_alone(&text)).unwrap();
        let committed: Value = yaml_serde::from_str(&text).unwrap();
        super::super::cold_builds::assert_only_job(&alone, &committed, JOB);
        let mut job = committed["jobs"][JOB].clone();
        job.as_object_mut().unwrap().remove("needs");
        job.as_object_mut().unwrap().remove("if");
        assert_eq!(alone["jobs"][JOB], job, "the job's steps as committed");
    }
}
