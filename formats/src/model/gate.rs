//! What `gate --json` writes (`gate.json`): is a run due today, and why; the plan and the
//! receipt read it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Why a run is due, or why not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    /// Today is a cadence day, or a catch-up after a dropped scheduled run.
    Scheduled,
    /// A maintainer asked for the run with `--force`.
    Forced,
}

/// The gate's answer; `--json` prints exactly this, and the receipt records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateDecision {
    pub due: bool,
    /// Whole days since 1970-01-01 UTC at `now`.
    pub epoch_day: i64,
    /// The first cadence day after today, `YYYY-MM-DD` (UTC).
    pub next_due: String,
    pub forced: bool,
    /// One sentence a maintainer can read in the job log.
    pub reason: String,
    /// The trigger a release made from this answer records.
    pub trigger: Trigger,
    /// Due only because the previous receipt is at least one interval old.
    pub catch_up: bool,
    pub interval_days: u32,
    /// The moment the decision was made for (whole seconds).
    pub now: DateTime<Utc>,
    /// The previous receipt's `created_at`, when one was given.
    pub previous_created_at: Option<DateTime<Utc>>,
    /// Epoch days between the previous receipt's creation and `now`.
    pub days_since_previous: Option<i64>,
}
