//! `results-<os>-<arch>.json`, written by `release build --platform P`: the build, smoke and
//! push of one platform and how long each step took; `release ship` reads it.

use serde::{Deserialize, Serialize};

use crate::model::build::BuildReport;
use crate::model::publish::PushedImage;
use crate::model::smoke::SmokeReport;
use crate::model::Platform;

/// The results format; results of another version are refused.
pub const RESULTS_SCHEMA_VERSION: u32 = 1;

/// What one platform's phase produced.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlatformResults {
    pub schema_version: u32,
    pub platform: Platform,
    /// The plan's tag and inputs digest: ship refuses results of another plan.
    pub tag: String,
    pub inputs_digest: String,
    pub build: BuildReport,
    pub smoke: SmokeReport,
    /// The push by digest; `None` when the plan does not publish or smoke failed.
    pub pushed: Option<PushedImage>,
    pub steps: Vec<StepTime>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    Ok,
    Failed,
}

/// How long one step took, for the table at the end of a phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepTime {
    pub name: String,
    pub seconds: f64,
    pub status: StepStatus,
}
