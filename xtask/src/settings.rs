//! The environment, read once: every variable the tool's production code acts on is a field
//! here, filled by `main.rs` from the process (`Settings::from_process`) and passed down in
//! the [`crate::Context`]. A test builds one from a table (`Settings::from_lookup`), so no
//! test has to set a process-wide variable to steer a decision. Child processes still
//! inherit the whole environment (a `Command` does that by itself; it is not a read).

use std::ffi::OsString;
use std::path::PathBuf;

/// What the tool reads from its environment. A variable that is unset or empty is `None`
/// (an empty value is how a workflow writes "not set"), except where a field says otherwise.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// What the verifier's code the xtask runs reads (registry credentials, the docker
    /// config, retry and progress intervals, `GITHUB_OUTPUT`/`GITHUB_STEP_SUMMARY`), read from
    /// the same table: `template_verify::settings::Environment` documents each variable.
    pub verifier: template_verify::settings::Environment,
    /// `XTASK_ROOT`: the repository the tool works on; default, the checkout it was built
    /// from. Tests point it at a scratch copy so nothing they do touches the real template/.
    pub root: Option<PathBuf>,
    /// `XTASK_NOW`: the release's clock (RFC 3339) when `--now` is not given; default, the
    /// time. Tests and reproductions replay a day without a flag on every phase.
    pub now: Option<String>,
    /// `XTASK_KILL_AT`: a test-only crash point, `NAME[#N]` (`kill_point.rs`); default, none.
    pub kill_at: Option<String>,
    /// `XTASK_CACHE_DIR`: where verified tool downloads (the pinned npm) are kept; default,
    /// `.xtask/cache`. Tests share one across scratch repositories.
    pub cache_dir: Option<PathBuf>,
    /// `XTASK_LAYER_CACHE`: the directory of every platform's layer cache; default,
    /// `.xtask/layers`. `bench rebuild` points its rebuild (in a scratch root) at the cold
    /// build's cache, as one machine's releases share theirs.
    pub layer_cache: Option<PathBuf>,
    /// `DOCKER_HOST`: only to name the engine in an error (bollard reads it itself to
    /// connect) and to tell a local engine's data root from a remote one's (`disk.rs`);
    /// default, the local socket.
    pub docker_host: Option<String>,
    /// `SSL_CERT_FILE`: the host's CA bundle, which the build's download steps trust when
    /// `--ca-bundle` is not given (a TLS-inspecting proxy's CA); default, Debian's bundle.
    pub ssl_cert_file: Option<PathBuf>,
    /// `NODE_OPTIONS`: kept for the pinned npm, with the tool's own option added
    /// (`npm/cli.rs`); default, none.
    pub node_options: Option<String>,
    /// The names of the `npm_config_*` variables present (any case): removed from the pinned
    /// npm's environment so a user's configuration cannot change the lockfile.
    pub npm_config_names: Vec<OsString>,
    /// `GITHUB_SHA`: the commit a workflow run checked out, the receipt's source commit
    /// unless `--source-commit` is given; default, `git rev-parse HEAD`. Read whether or not
    /// `GITHUB_ACTIONS` is set, as `receipt write` always has.
    pub github_sha: Option<String>,
    /// The GitHub Actions context, when `GITHUB_ACTIONS=true`.
    pub github: Option<Github>,
}

/// What a GitHub-hosted run says about itself (GitHub sets each on every runner).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Github {
    /// `GITHUB_EVENT_NAME`: `schedule`, `workflow_dispatch`, ... (empty when unset).
    pub event_name: String,
    /// `GITHUB_REF`: the ref the run is on, `refs/heads/<branch>` (empty when unset).
    pub git_ref: String,
    /// `GITHUB_EVENT_PATH`: the event payload's file, read by `release plan`.
    pub event_path: Option<PathBuf>,
}

impl Settings {
    /// The settings of this process. Only `main.rs` calls it, once.
    pub fn from_process() -> Settings {
        let names = std::env::vars_os().map(|(name, _)| name).collect();
        Settings::from_lookup(names, |name| std::env::var_os(name))
    }

    /// The settings a table of variables gives: `names` are the variables present (for the
    /// ones matched by prefix), `lookup` gives a variable's value.
    pub fn from_lookup(
        names: Vec<OsString>,
        lookup: impl Fn(&str) -> Option<OsString>,
    ) -> Settings {
        let value = |name: &str| lookup(name).filter(|v| !v.is_empty());
        let text = |name: &str| value(name).map(|v| v.to_string_lossy().into_owned());
        let path = |name: &str| value(name).map(PathBuf::from);
        let github = (text("GITHUB_ACTIONS").as_deref() == Some("true")).then(|| Github {
            event_name: text("GITHUB_EVENT_NAME").unwrap_or_default(),
            git_ref: text("GITHUB_REF").unwrap_or_default(),
            event_path: path("GITHUB_EVENT_PATH"),
        });
        Settings {
            root: path("XTASK_ROOT"),
            now: text("XTASK_NOW"),
            kill_at: text(crate::kill_point::KILL_AT_VAR),
            cache_dir: path("XTASK_CACHE_DIR"),
            layer_cache: path("XTASK_LAYER_CACHE"),
            docker_host: text("DOCKER_HOST"),
            ssl_cert_file: path("SSL_CERT_FILE"),
            node_options: text("NODE_OPTIONS"),
            npm_config_names: names
                .into_iter()
                .filter(|n| {
                    n.to_string_lossy()
                        .to_ascii_lowercase()
                        .starts_with("npm_config_")
                })
                .collect(),
            github_sha: text("GITHUB_SHA"),
            github,
            verifier: template_verify::settings::Environment::from_lookup(&lookup),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(vars: &[(&str, &str)]) -> Settings {
        let table: Vec<(OsString, OsString)> =
            vars.iter().map(|(k, v)| (k.into(), v.into())).collect();
        let names = table.iter().map(|(k, _)| k.clone()).collect();
        Settings::from_lookup(names, |name| {
            table
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn empty_is_unset_and_github_needs_actions_true() {
        let s = settings(&[
            ("XTASK_NOW", ""),
            ("XTASK_LAYER_CACHE", "/cache"),
            ("GITHUB_REF", "refs/heads/main"),
        ]);
        assert_eq!(s.now, None);
        assert_eq!(s.layer_cache, Some(PathBuf::from("/cache")));
        assert_eq!(
            s.github, None,
            "GITHUB_* without GITHUB_ACTIONS=true is not Actions"
        );
        let s = settings(&[
            ("GITHUB_ACTIONS", "true"),
            ("GITHUB_REF", "refs/heads/main"),
            ("GITHUB_SHA", ""),
        ]);
        let github = s.github.unwrap();
        assert_eq!(github.git_ref, "refs/heads/main");
        assert_eq!(s.github_sha, None);
    }

    #[test]
    fn npm_config_variables_are_found_in_any_case() {
        let s = settings(&[
            ("npm_config_registry", "x"),
            ("NPM_CONFIG_CACHE", "y"),
            ("NPMRC", "z"),
        ]);
        assert_eq!(
            s.npm_config_names,
            [
                OsString::from("npm_config_registry"),
                "NPM_CONFIG_CACHE".into()
            ]
        );
    }
}
