//! What `smoke --json` writes: every check run on one image and its evidence; the platform
//! phase and the receipt read it.

use serde::{Deserialize, Serialize};

use crate::model::transcript::Message;

/// One check and its evidence.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Check {
    pub name: String,
    pub passed: bool,
    pub output: String,
    pub duration_secs: f64,
}

impl Check {
    pub fn new(name: impl Into<String>, passed: bool, output: impl Into<String>) -> Check {
        Check {
            name: name.into(),
            passed,
            output: output.into(),
            duration_secs: 0.0,
        }
    }
}

/// What `smoke --json` prints.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SmokeReport {
    pub image: String,
    pub image_id: Option<String>,
    pub platform: String,
    pub emulated: bool,
    pub passed: bool,
    pub checks: Vec<Check>,
    pub duration_secs: f64,
    /// What each harness's turn and resume showed (natively only: no turn runs emulated).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub harnesses: Vec<HarnessEvidence>,
}

/// One harness's turn and resume, as evidence: its protocol transcript and where it wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HarnessEvidence {
    pub name: String,
    /// Its protocol transcript (`model::transcript`), sorted.
    pub messages: Vec<Message>,
    /// The directories holding the files that name its session (normalized, as the
    /// receipt's `harnesses[].session`).
    pub session: Vec<String>,
    /// Every directory it wrote files in (as the receipt's `harnesses[].written`).
    pub written: Vec<String>,
}
