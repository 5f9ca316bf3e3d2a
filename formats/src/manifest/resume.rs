//! The fields a supervisor must save to resume a harness's session after a new process
//! attempt (`harnesses[].resume` in template/manifest.yaml), as Sandbox0's "Run Coding Agents
//! With Supervised Sessions" guide names them: Codex's `result.thread.id` from `thread/start`,
//! Claude Code's `session_id` of its first `system`/`init` record, OpenCode's ACP `sessionId`,
//! Pi's `sessionFile`/`sessionId` from `get_state`.
//!
//! Each is named in the vocabulary of the protocol transcripts (`model::transcript`): the
//! message that carries it (`thread/start result`, `system/init`, `response
//! [command=get_state]`) and the field's path in it. The smoke test holds every turn's
//! transcript to these declarations: a harness that no longer returns one fails smoke, naming
//! the harness, the message and the field.

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ResumeField {
    /// The message the harness sends it in: a transcript kind, optionally with the part of its
    /// variant that singles it out (`response [command=get_state]`).
    pub message: String,
    /// Its path in that message, object keys joined by `.` (`result.thread.id`).
    pub field: String,
}

impl ResumeField {
    /// What is wrong with this declaration, if anything (`harness` names it in the error).
    pub fn validate(&self, harness: &str) -> Result<()> {
        let at = |what: &str| format!("`harnesses[{harness}].resume`: {what}");
        let (kind, variant) = crate::model::transcript::split_selector(&self.message);
        if kind.trim().is_empty() || kind != kind.trim() {
            bail!(
                "{}",
                at(&format!("message `{}` names no kind", self.message))
            );
        }
        if variant.iter().any(|v| !v.contains('=')) {
            bail!(
                "{}",
                at(&format!(
                    "message `{}`: a variant is `path=value`, comma-separated in brackets",
                    self.message
                ))
            );
        }
        let plain = |part: &str| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
        };
        if !self.field.split('.').all(plain) {
            bail!(
                "{}",
                at(&format!(
                    "field `{}` is not a path of object keys joined by `.`",
                    self.field
                ))
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(message: &str, field: &str) -> ResumeField {
        ResumeField {
            message: message.into(),
            field: field.into(),
        }
    }

    #[test]
    fn a_declaration_names_a_message_and_a_path() {
        field("thread/start result", "result.thread.id")
            .validate("codex")
            .unwrap();
        field("response [command=get_state]", "data.sessionId")
            .validate("pi")
            .unwrap();
        let err = field("response [get_state]", "data.sessionId")
            .validate("pi")
            .unwrap_err();
        assert!(err.to_string().contains("harnesses[pi].resume"), "{err}");
        assert!(field("system/init", "session_id[0]").validate("x").is_err());
        assert!(field("system/init", "a..b").validate("x").is_err());
        assert!(field(" ", "a").validate("x").is_err());
    }
}
