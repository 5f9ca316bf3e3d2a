//! What an npm package runs when npm installs it: its lifecycle commands and the sha256 of each
//! of its files they run. The manifest acknowledges this content for each package allowed to
//! run scripts (`install_scripts_allowed`), `lock` records it in the inventory, and the receipt
//! carries it for the top-level packages; the xtask's `npm/install_scripts.rs` reads it from a
//! version's tarball.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The lifecycle scripts npm runs for a package installed from a registry, in its order:
/// npm 10.9.9 `node_modules/@npmcli/arborist/lib/arborist/rebuild.js` (`#build`) runs
/// `preinstall`, then links bins, then `install` and `postinstall`; `prepare` runs only for
/// linked packages (`type === 'links'`), never for a registry tarball.
pub const LIFECYCLE_SCRIPTS: [&str; 3] = ["preinstall", "install", "postinstall"];

/// A package's install scripts: each lifecycle command as package.json has it (or as npm
/// implies it: `node-gyp rebuild` for a package with a `binding.gyp` and no `install` or
/// `preinstall`), and the files of the package they run, by path relative to the package root.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstallScripts {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preinstall: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postinstall: Option<String>,
    /// Path (relative to the package root, no `./`) -> sha256, lowercase hex.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
}

impl InstallScripts {
    /// The commands that are set, as (lifecycle script, command), in npm's order.
    pub fn commands(&self) -> Vec<(&'static str, &str)> {
        LIFECYCLE_SCRIPTS
            .iter()
            .zip([&self.preinstall, &self.install, &self.postinstall])
            .filter_map(|(name, command)| command.as_deref().map(|c| (*name, c)))
            .collect()
    }

    /// The command of lifecycle script `name`.
    pub fn command(&self, name: &str) -> Option<&str> {
        match name {
            "preinstall" => self.preinstall.as_deref(),
            "install" => self.install.as_deref(),
            "postinstall" => self.postinstall.as_deref(),
            _ => None,
        }
    }

    /// Why this cannot be an acknowledgment the manifest holds (no command, a path that is not
    /// a plain relative one, a digest that is not sha256 hex); `None` when it can.
    pub fn form_problem(&self) -> Option<String> {
        if self.commands().is_empty() {
            return Some("names no preinstall, install or postinstall command".into());
        }
        if let Some((_, c)) = self
            .commands()
            .into_iter()
            .find(|(_, c)| c.trim().is_empty())
        {
            return Some(format!("has an empty command `{c}`"));
        }
        for (path, digest) in &self.files {
            let plain = !path.is_empty()
                && !path.starts_with('/')
                && !path
                    .split('/')
                    .any(|p| p.is_empty() || p == "." || p == "..");
            if !plain {
                return Some(format!(
                    "file `{path}` is not a path relative to the package root"
                ));
            }
            if digest.len() != 64
                || !digest
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            {
                return Some(format!(
                    "file `{path}`: `{digest}` is not a lowercase sha256 hex digest"
                ));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_keep_npms_order_and_forms_are_checked() {
        let scripts = InstallScripts {
            preinstall: None,
            install: Some("node-gyp rebuild".into()),
            postinstall: Some("node install.cjs".into()),
            files: [("install.cjs".to_string(), "a".repeat(64))].into(),
        };
        assert_eq!(
            scripts.commands(),
            [
                ("install", "node-gyp rebuild"),
                ("postinstall", "node install.cjs")
            ]
        );
        assert_eq!(scripts.form_problem(), None);
        for (path, digest, why) in [
            ("../x.js", "a".repeat(64), "relative"),
            ("./x.js", "a".repeat(64), "relative"),
            ("/x.js", "a".repeat(64), "relative"),
            ("x.js", "A".repeat(64), "sha256"),
            ("x.js", "a".repeat(63), "sha256"),
        ] {
            let mut bad = scripts.clone();
            bad.files = [(path.to_string(), digest)].into();
            let problem = bad.form_problem().unwrap();
            assert!(problem.contains(why), "{path}: {problem}");
        }
        assert!(InstallScripts::default()
            .form_problem()
            .unwrap()
            .contains("no preinstall"));
    }
}
