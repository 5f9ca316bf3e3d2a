//! Named points where the crash-consistency test (`tests/it/kill_points.rs`) kills the tool
//! with a real SIGKILL to its whole process group, as a lost runner or a cancelled job would.
//!
//! `XTASK_KILL_AT=NAME` (or `NAME#N`: the N-th time this process reaches it) is read once, at
//! the command's edge ([`init`], from `Settings::kill_at`); every other run pays one failed lookup per point.
//! Children started by a phase inherit the variable, so a point inside a child step kills the
//! phase too: the group is what a runner loses. The group is killed only when its leader is
//! this same executable (the test starts the tool with a process group of its own), so a
//! stray variable in a shell never kills the shell; otherwise only this process dies.
//!
//! The points (each one `reached` call, tried by the test):
//! - `after-step:<step>`: a step of `release plan`/`build`/`ship` finished (`release/steps.rs`);
//! - `lock:template-file-written`, `lock:template-swapped`: lock's staging of `template/`;
//! - `assemble:layer-bytes-written` (per MiB reaching a tree's layer file),
//!   `assemble:layer-file-complete` (the whole layer still in its temporary file),
//!   `assemble:layer-file-kept` (under its diff id, no entry yet), `assemble:tree-entry-written`
//!   (between trees), `assemble:system-layer-kept` (between the system's layers),
//!   `assemble:config-written` (the new config, before the load and the prune);
//! - `publish:blob-body` (per 1 MiB chunk of a blob's upload body, before the upload is
//!   committed), `publish:blob-uploaded` (a blob committed, the next not begun),
//!   `publish:manifest-pushed`, `publish:index-pushed`.

use std::sync::OnceLock;

/// The variable that names the kill point.
pub const KILL_AT_VAR: &str = "XTASK_KILL_AT";

/// Which point to die at, and at which of its passes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KillAt {
    pub name: String,
    pub pass: u32,
}

/// `NAME` or `NAME#N` (N >= 1).
pub(crate) fn parse(text: &str) -> Result<KillAt, String> {
    let (name, pass) = match text.rsplit_once('#') {
        None => (text, 1),
        Some((name, n)) => match n.parse::<u32>() {
            Ok(n) if n >= 1 => (name, n),
            _ => {
                return Err(format!(
                    "{KILL_AT_VAR}=`{text}`: the pass after `#` must be a number from 1"
                ))
            }
        },
    };
    if name.trim().is_empty() {
        return Err(format!("{KILL_AT_VAR}=`{text}` names no kill point"));
    }
    Ok(KillAt {
        name: name.to_string(),
        pass,
    })
}

/// Whether reaching `name` for the `pass`-th time is the kill.
pub(crate) fn is_the_kill(setting: &KillAt, name: &str, pass: u32) -> bool {
    setting.name == name && setting.pass == pass
}

static SETTING: OnceLock<Option<KillAt>> = OnceLock::new();
static PASSES: OnceLock<std::sync::Mutex<std::collections::BTreeMap<String, u32>>> =
    OnceLock::new();

/// Arms the crash point `XTASK_KILL_AT` named (`Settings::kill_at`, read once by main); a
/// malformed value is an error of the command.
pub fn init(kill_at: Option<&str>) -> anyhow::Result<()> {
    let setting = match kill_at {
        Some(text) => Some(parse(text).map_err(anyhow::Error::msg)?),
        None => None,
    };
    let _ = SETTING.set(setting);
    Ok(())
}

/// The tool reached the point `name`: dies here when `XTASK_KILL_AT` names this pass of it.
pub(crate) fn reached(name: &str) {
    let Some(Some(setting)) = SETTING.get() else {
        return;
    };
    if setting.name != name {
        return;
    }
    let pass = {
        let mut passes = PASSES
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let count = passes.entry(name.to_string()).or_insert(0);
        *count += 1;
        *count
    };
    if !is_the_kill(setting, name, pass) {
        return;
    }
    let group = rustix::process::getpgrp();
    if leader_is_this_executable(group.as_raw_nonzero().get()) {
        eprintln!("kill point {name}#{pass}: SIGKILL to process group {group:?}");
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
    } else {
        eprintln!(
            "kill point {name}#{pass}: the process group's leader is not this tool (start it \
             with a process group of its own to kill the group); SIGKILL to this process only"
        );
    }
    let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    // SIGKILL cannot be caught; nothing after this runs.
    std::process::abort();
}

fn leader_is_this_executable(group: i32) -> bool {
    match (
        std::fs::read_link("/proc/self/exe"),
        std::fs::read_link(format!("/proc/{group}/exe")),
    ) {
        (Ok(this), Ok(leader)) => this == leader,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_name_a_point_and_a_pass() {
        assert_eq!(
            parse("lock:template-file-written").unwrap(),
            KillAt {
                name: "lock:template-file-written".into(),
                pass: 1
            }
        );
        assert_eq!(
            parse("after-step:receipt write#2").unwrap(),
            KillAt {
                name: "after-step:receipt write".into(),
                pass: 2
            }
        );
        assert!(parse("x#0").unwrap_err().contains("from 1"));
        assert!(parse("x#two").unwrap_err().contains("from 1"));
        assert!(parse("#3").unwrap_err().contains("names no kill point"));
    }

    #[test]
    fn only_the_named_pass_kills() {
        let at = parse("publish:blob-body#2").unwrap();
        assert!(!is_the_kill(&at, "publish:blob-body", 1));
        assert!(is_the_kill(&at, "publish:blob-body", 2));
        assert!(!is_the_kill(&at, "publish:blob-body", 3));
        assert!(!is_the_kill(&at, "publish:index-pushed", 2));
    }
}
