//! What `resolve --json` writes (`resolve.json`): one exact version of every template package
//! and how it was chosen; `lock`, the plan and the receipt read it.

use serde::{Deserialize, Serialize};

/// The resolver's answer for one package.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Resolved {
    pub name: String,
    pub version: String,
    /// `dist-tags.latest` at resolution time.
    pub latest: String,
    /// Publish time of `version`, RFC 3339.
    pub published: String,
    /// The version currently locked in template/, if any.
    pub locked: Option<String>,
    /// The answer is below the locked version: upstream moved `latest` back or withdrew versions.
    pub rollback: bool,
    /// `latest` itself was not eligible and an older version was taken.
    pub held_back: bool,
    pub notes: Vec<String>,
    /// Newer candidates that were passed over, with why.
    pub rejected: Vec<Rejection>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Rejection {
    pub version: String,
    pub reasons: Vec<String>,
}

/// The whole resolution, as `--json` prints it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Resolution {
    pub cutoff: String,
    pub now: String,
    pub registry: String,
    pub cooldown_hours: u32,
    pub packages: Vec<Resolved>,
}
