//! `plan.json`, written by `release plan`: every decision of a release (action, tag,
//! platforms, target, inputs); the build and ship phases obey it.

use std::path::PathBuf;

use anyhow::{bail, Result};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::model::gate::GateDecision;
use crate::model::Platform;

/// The plan format; a plan of another version is refused, never read leniently.
pub const PLAN_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Not a cadence day and not forced: nothing else runs.
    NotDue,
    /// Due, but the previous release already has exactly these inputs: nothing to build.
    Unchanged,
    /// Build every platform, then ship (when `publish`).
    Release,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::NotDue => "not_due",
            Action::Unchanged => "unchanged",
            Action::Release => "release",
        }
    }
}

/// A release input and its sha256 (hex).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputDigest {
    pub path: String,
    pub sha256: String,
}

/// One top-level package whose version differs from the previous release.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    pub name: String,
    /// `None`: not in the previous release (or there is none).
    pub from: Option<String>,
    pub to: String,
    /// The version went down: upstream moved `latest` back.
    pub rollback: bool,
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.from {
            None => write!(f, "{}: {} (new)", self.name, self.to),
            Some(from) => write!(
                f,
                "{}: {from} -> {}{}",
                self.name,
                self.to,
                if self.rollback { " (ROLLBACK)" } else { "" }
            ),
        }
    }
}

/// The release this plan compares against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PreviousSummary {
    pub receipt: PathBuf,
    pub tag: String,
    pub created_at: String,
    pub reference: String,
}

/// Where images go.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Target {
    pub registry: String,
    pub repository: String,
}

/// `plan.json`: everything the later phases obey.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReleasePlan {
    pub schema_version: u32,
    /// The release's clock: gate, resolve, lock and the receipt's `created_at`.
    pub now: DateTime<Utc>,
    pub action: Action,
    /// One sentence: why this action.
    pub reason: String,
    /// Whether the later phases push images and publish a release.
    pub publish: bool,
    pub publish_reason: String,
    /// `<yyyy.mm.dd>-<first 12 hex of the inputs digest>`; `None` when not due.
    pub tag: Option<String>,
    pub platforms: Vec<Platform>,
    pub target: Target,
    pub npm_registry: String,
    pub gate: GateDecision,
    pub previous: Option<PreviousSummary>,
    /// The release inputs as the plan wrote them; later phases refuse a checkout that differs.
    pub inputs: Vec<InputDigest>,
    /// sha256 over `inputs` (empty when not due).
    pub inputs_digest: String,
    pub changes: Vec<Change>,
}

impl ReleasePlan {
    /// The tag, for phases that only run when there is a release.
    pub fn release_tag(&self) -> Result<&str> {
        match (self.action, &self.tag) {
            (Action::Release, Some(tag)) => Ok(tag),
            _ => bail!(
                "the plan's action is `{}` ({}): there is nothing to build or ship",
                self.action.as_str(),
                self.reason
            ),
        }
    }
}
