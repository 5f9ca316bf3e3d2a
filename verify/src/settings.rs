//! The process environment, read once: every variable this crate acts on, as one snapshot
//! that a binary's `main` takes ([`Environment::from_process`]) and passes down. Below it,
//! code is a function of what it is given, so a test states its environment instead of
//! setting process variables (which leak between tests running side by side). A test in
//! lib.rs fails when any other file (but `main.rs`) reads the environment.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::fs::GithubFile;

/// The registry user name for the one host the user names (`oci/credentials.rs`).
pub const USERNAME_ENV: &str = "XTASK_OCI_USERNAME";
/// Its password or token.
pub const PASSWORD_ENV: &str = "XTASK_OCI_PASSWORD";
/// Older names of the same variables, still set by the workflow.
pub const USERNAME_ENV_ALIAS: &str = "XTASK_REGISTRY_USERNAME";
pub const PASSWORD_ENV_ALIAS: &str = "XTASK_REGISTRY_PASSWORD";

/// The base of the retries' exponential backoff when `XTASK_RETRY_BASE_MS` is unset.
pub const DEFAULT_RETRY_BASE: Duration = Duration::from_millis(500);
/// How often a progress line may be printed when `XTASK_PROGRESS_INTERVAL_SECS` is unset.
pub const DEFAULT_PROGRESS_INTERVAL: Duration = Duration::from_secs(5);

/// Every variable the crate reads. [`Default`] is an environment with none of them set.
#[derive(Debug, Clone, Default)]
pub struct Environment {
    pub registry: RegistryEnvironment,
    pub transfer: TransferSettings,
    /// `GITHUB_OUTPUT`: the file GitHub Actions reads a step's outputs from (`consume`
    /// appends its result); unset or empty outside Actions, and then nothing is written.
    pub github_output: GithubFile,
    /// `GITHUB_STEP_SUMMARY`: the file GitHub Actions shows as the job's summary; as above.
    pub github_step_summary: GithubFile,
}

/// Where registry credentials come from (`oci/credentials.rs` says in which order).
#[derive(Clone, Default)]
pub struct RegistryEnvironment {
    /// `XTASK_OCI_USERNAME`; empty counts as unset.
    pub username: Option<String>,
    /// `XTASK_OCI_PASSWORD`; empty counts as unset.
    pub password: Option<String>,
    /// `XTASK_REGISTRY_USERNAME`, the older name the workflow still sets; used only when
    /// neither of the two above is set.
    pub username_alias: Option<String>,
    /// `XTASK_REGISTRY_PASSWORD`, as above.
    pub password_alias: Option<String>,
    /// The docker config: `$DOCKER_CONFIG/config.json`, else `$HOME/.docker/config.json`
    /// (where `docker login` writes); `None` when neither variable is set.
    pub docker_config: Option<PathBuf>,
}

impl std::fmt::Debug for RegistryEnvironment {
    /// Passwords never appear in a `Debug` output.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let set = |v: &Option<String>| if v.is_some() { "set" } else { "unset" };
        f.debug_struct("RegistryEnvironment")
            .field("username", &self.username)
            .field("password", &set(&self.password))
            .field("username_alias", &self.username_alias)
            .field("password_alias", &set(&self.password_alias))
            .field("docker_config", &self.docker_config)
            .finish()
    }
}

impl RegistryEnvironment {
    /// The value of one of the four credential variables, by its name (for
    /// [`crate::oci::credentials::credentials_from_env`]).
    pub fn variable(&self, name: &str) -> Option<String> {
        match name {
            USERNAME_ENV => self.username.clone(),
            PASSWORD_ENV => self.password.clone(),
            USERNAME_ENV_ALIAS => self.username_alias.clone(),
            PASSWORD_ENV_ALIAS => self.password_alias.clone(),
            _ => None,
        }
    }
}

/// How transfers behave: retries and progress lines.
#[derive(Debug, Clone, Copy)]
pub struct TransferSettings {
    /// `XTASK_RETRY_BASE_MS`: the first wait before a retry, doubling after it; default
    /// [`DEFAULT_RETRY_BASE`]. Tests that inject faults shorten it; a value that is not a
    /// whole number of milliseconds is ignored (the default holds).
    pub retry_base: Duration,
    /// `XTASK_PROGRESS_INTERVAL_SECS`: the least time between two progress lines of one
    /// transfer (seconds, fractions allowed); default [`DEFAULT_PROGRESS_INTERVAL`], which
    /// keeps CI logs short. A value that is not a positive number is ignored.
    pub progress_interval: Duration,
}

impl Default for TransferSettings {
    fn default() -> TransferSettings {
        TransferSettings {
            retry_base: DEFAULT_RETRY_BASE,
            progress_interval: DEFAULT_PROGRESS_INTERVAL,
        }
    }
}

/// The docker config Docker itself reads, from the values of `DOCKER_CONFIG` (a directory)
/// and `HOME`.
pub fn docker_config_path(
    docker_config: Option<OsString>,
    home: Option<OsString>,
) -> Option<PathBuf> {
    match docker_config {
        Some(dir) => Some(PathBuf::from(dir).join("config.json")),
        None => home.map(|home| PathBuf::from(home).join(".docker/config.json")),
    }
}

impl Environment {
    /// The snapshot of whatever `lookup` answers for each variable: the process's own in
    /// [`Environment::from_process`], a table in tests. A value that is not UTF-8 counts as
    /// unset, except in the paths (`DOCKER_CONFIG`, `HOME`, the GitHub files).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<OsString>) -> Environment {
        let text = |name: &str| lookup(name).and_then(|v| v.into_string().ok());
        let defaults = TransferSettings::default();
        Environment {
            registry: RegistryEnvironment {
                username: text(USERNAME_ENV),
                password: text(PASSWORD_ENV),
                username_alias: text(USERNAME_ENV_ALIAS),
                password_alias: text(PASSWORD_ENV_ALIAS),
                docker_config: docker_config_path(lookup("DOCKER_CONFIG"), lookup("HOME")),
            },
            transfer: TransferSettings {
                retry_base: text("XTASK_RETRY_BASE_MS")
                    .and_then(|ms| ms.trim().parse().ok())
                    .map_or(defaults.retry_base, Duration::from_millis),
                progress_interval: text("XTASK_PROGRESS_INTERVAL_SECS")
                    .and_then(|v| v.trim().parse::<f64>().ok())
                    .filter(|secs| *secs > 0.0)
                    .and_then(|secs| Duration::try_from_secs_f64(secs).ok())
                    .unwrap_or(defaults.progress_interval),
            },
            github_output: GithubFile::new("GITHUB_OUTPUT", lookup("GITHUB_OUTPUT")),
            github_step_summary: GithubFile::new(
                "GITHUB_STEP_SUMMARY",
                lookup("GITHUB_STEP_SUMMARY"),
            ),
        }
    }

    /// The process's environment. Only the verifier's `main` calls this; the xtask's
    /// `Settings::from_process` takes the same snapshot through [`Environment::from_lookup`].
    pub fn from_process() -> Environment {
        Environment::from_lookup(|name| std::env::var_os(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn nothing_set_gives_the_defaults() {
        let env = Environment::from_lookup(|_| None);
        assert_eq!(env.transfer.retry_base, Duration::from_millis(500));
        assert_eq!(env.transfer.progress_interval, Duration::from_secs(5));
        assert_eq!(env.registry.docker_config, None);
        assert_eq!(env.github_output.path, None);
        assert_eq!(env.github_step_summary.variable, "GITHUB_STEP_SUMMARY");
    }

    #[test]
    fn each_variable_lands_in_its_field() {
        let env = Environment::from_lookup(lookup(&[
            ("XTASK_RETRY_BASE_MS", "50"),
            ("XTASK_PROGRESS_INTERVAL_SECS", "0.2"),
            ("XTASK_OCI_USERNAME", "u"),
            ("XTASK_OCI_PASSWORD", "secret"),
            ("XTASK_REGISTRY_USERNAME", "old"),
            ("HOME", "/home/me"),
            ("GITHUB_OUTPUT", "/tmp/out"),
            ("GITHUB_STEP_SUMMARY", ""),
        ]));
        assert_eq!(env.transfer.retry_base, Duration::from_millis(50));
        assert_eq!(env.transfer.progress_interval, Duration::from_millis(200));
        assert_eq!(env.registry.variable(USERNAME_ENV).as_deref(), Some("u"));
        assert_eq!(
            env.registry.variable(PASSWORD_ENV).as_deref(),
            Some("secret")
        );
        assert_eq!(
            env.registry.variable(USERNAME_ENV_ALIAS).as_deref(),
            Some("old")
        );
        assert_eq!(env.registry.variable(PASSWORD_ENV_ALIAS), None);
        assert!(!format!("{env:?}").contains("secret"));
        assert_eq!(
            env.registry.docker_config,
            Some(PathBuf::from("/home/me/.docker/config.json"))
        );
        assert_eq!(env.github_output.path, Some(PathBuf::from("/tmp/out")));
        assert_eq!(env.github_step_summary.path, None, "empty is unset");
    }

    #[test]
    fn values_that_are_not_numbers_keep_the_defaults() {
        for (retry, interval) in [("soon", "-1"), ("", "inf"), ("1.5", "0")] {
            let env = Environment::from_lookup(lookup(&[
                ("XTASK_RETRY_BASE_MS", retry),
                ("XTASK_PROGRESS_INTERVAL_SECS", interval),
            ]));
            assert_eq!(env.transfer.retry_base, DEFAULT_RETRY_BASE, "{retry}");
            assert_eq!(
                env.transfer.progress_interval, DEFAULT_PROGRESS_INTERVAL,
                "{interval}"
            );
        }
    }
}
