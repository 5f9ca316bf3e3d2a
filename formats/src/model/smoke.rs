//! What `smoke --json` writes: every check run on one image and its evidence; the platform
//! phase and the receipt read it.

use serde::{Deserialize, Serialize};

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
}
