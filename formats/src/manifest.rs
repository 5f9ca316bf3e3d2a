//! The template manifest (`template/manifest.yaml`): the policy every command reads.
//!
//! Parsing is strict: unknown keys and wrong types are errors naming the key and the file,
//! because a misspelt policy key that were silently ignored would turn a safety rule off.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

mod provenance;
mod resume;
pub use crate::model::install_scripts::InstallScripts;
pub use provenance::{glob_matches, ProvenanceIdentity, GITHUB_ACTIONS_ISSUER};
pub use resume::ResumeField;

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub packages: Vec<PackageSpec>,
    pub platforms: Vec<Platform>,
    pub cadence: Cadence,
    pub cooldown_hours: u32,
    pub node: NodeSpec,
    /// Packages whose install scripts run during `npm ci`, each with the content a maintainer
    /// reviewed and acknowledged: any other content holds a version back.
    pub install_scripts_allowed: BTreeMap<String, InstallScripts>,
    /// Packages with install scripts that were reviewed and are not run.
    #[serde(default)]
    pub install_scripts_skipped: Vec<String>,
    pub harnesses: Vec<Harness>,
    /// The smoke checks a receipt must show passed; see [`Manifest::required_smoke_checks`].
    pub smoke_checks: SmokeCheckSpec,
    pub image: ImageSpec,
    pub browser: BrowserSpec,
    /// What a sandbox of this template needs from the platform that runs it.
    pub runtime: RuntimeSpec,
    /// Builds linked in place of a package's default on one platform.
    #[serde(default)]
    pub linked_builds: Vec<LinkedBuild>,
}

/// The image's layout and environment, as the Dockerfile makes them and smoke checks them.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ImageSpec {
    /// HOME and the working directory.
    pub home: String,
    /// Where the npm packages are installed (`node_modules` below it).
    pub install_dir: String,
    /// `NAME=value` pairs the image must set exactly, besides HOME.
    pub env: Vec<String>,
    /// Variables that must not be set at all (they would point a process at a CA bundle).
    pub forbidden_env: Vec<String>,
    /// Seconds since 1970 (UTC): every later file time in the layers is clamped to it and the
    /// config's times are it (`SOURCE_DATE_EPOCH` for mmdebstrap and the Dockerfile too), so
    /// the same files give the same digests on any machine, any day.
    pub source_date_epoch: u64,
}

impl ImageSpec {
    /// Every variable the image must set, with its value: HOME first, then `env` in order.
    pub fn required_env(&self) -> Vec<(String, String)> {
        let listed = self.env.iter().filter_map(|kv| kv.split_once('='));
        std::iter::once(("HOME", self.home.as_str()))
            .chain(listed)
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }
}

/// The shared browser's headed desktop.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BrowserSpec {
    /// The unprivileged user the desktop runs as; its home is `/home/<user>`.
    pub user: String,
}

/// What the platform must grant a sandbox of this template beyond a default container.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RuntimeSpec {
    pub seccomp: SeccompSpec,
}

/// The seccomp profile the shared browser needs: an upstream default profile plus one entry
/// that allows `allows` unconditionally (see `xtask::image::seccomp`).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SeccompSpec {
    /// The profile file, relative to the repository root, in Docker's seccomp format.
    pub profile: String,
    /// Where the base profile comes from: repository, version and path.
    pub base: String,
    /// sha256 of the base profile in canonical JSON (`jq -S -c .`): the profile without its
    /// added entry must give it.
    pub base_sha256: String,
    /// The system calls the added entry allows, with any arguments.
    pub allows: Vec<String>,
}

/// A build the Dockerfile links in place of a package's default on one platform; paths are
/// relative to `<install_dir>/node_modules`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LinkedBuild {
    /// The smoke check that proves it; `smoke_checks.platform` requires it on `platform`.
    pub check: String,
    pub platform: Platform,
    /// The file the package runs, which must be the same file as `target`.
    pub link: String,
    pub target: String,
    /// The default build, which must not be installed.
    pub absent: String,
}

/// The smoke check of a package's version (`cargo xtask smoke` names it so).
pub fn version_check_name(package: &str) -> String {
    format!("version {package}")
}

/// The smoke check of a harness's native handshake (`cargo xtask smoke` names it so).
pub fn harness_check_name(harness: &str) -> String {
    format!("harness {harness}")
}

/// The smoke check of a harness's real turn, kill and resume against a fake model
/// (`cargo xtask smoke` names it so; natively built images only, so `smoke_checks.native`
/// requires it by name).
pub fn harness_turns_check_name(harness: &str) -> String {
    format!("harness {harness} turn and resume")
}

/// The names of the smoke checks every release must pass, besides the derived `version
/// <package>` and `harness <name>` checks.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SmokeCheckSpec {
    /// Required on every platform, native or emulated.
    pub every_build: Vec<String>,
    /// Required only when the platform was built and tested on its own CPU.
    pub native: Vec<String>,
    /// Required instead of `native` when the platform was built and tested under emulation.
    pub emulated: Vec<String>,
    /// Required on one platform only; every manifest platform has an entry (maybe empty).
    pub platform: BTreeMap<Platform, Vec<String>>,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PackageSpec {
    pub name: String,
    /// The executable linked into /usr/local/bin, when the package has one.
    #[serde(default)]
    pub command: Option<String>,
    pub version_command: Vec<String>,
    /// Expected output of `version_command`; `{version}` stands for the locked version.
    pub version_output: String,
    /// The provenance identity every version must carry, for a package that publishes npm
    /// provenance (docs/inputs.md); absent for one that does not, or whose identity was not
    /// confirmed from its source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<ProvenanceIdentity>,
}

impl PackageSpec {
    pub fn expected_version_output(&self, version: &str) -> String {
        self.version_output.replace("{version}", version)
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Cadence {
    pub interval_days: u32,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    pub version: semver::Version,
    pub minimum: semver::Version,
    pub major: u64,
    /// The npm registry package that carries the Node binary for each platform.
    pub packages: BTreeMap<Platform, String>,
    pub npm_version: semver::Version,
    /// The command that prints the image's Node version (`v<version>`).
    pub version_command: Vec<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Harness {
    pub name: String,
    pub command: Vec<String>,
    /// Records written to the harness's stdin, one per line.
    pub handshake: Vec<String>,
    /// JSON pointer -> expected value in one stdout record; the string `present` only asks
    /// that the pointer resolves.
    pub expect: BTreeMap<String, serde_json::Value>,
    /// The fields a supervisor saves to resume the harness's session (`resume.rs`).
    pub resume: Vec<ResumeField>,
}

pub use crate::model::Platform;

impl Manifest {
    /// Reads and validates the manifest at `path`.
    pub fn load(path: &Path) -> Result<Manifest> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the template manifest {}", path.display()))?;
        Manifest::parse(&text, path)
    }

    /// Parses manifest text; `origin` only names the file in errors.
    pub fn parse(text: &str, origin: &Path) -> Result<Manifest> {
        let manifest: Manifest =
            yaml_serde::from_str(text).map_err(|e| anyhow::anyhow!("{}: {e}", origin.display()))?;
        manifest
            .validate()
            .with_context(|| format!("{} is not a valid template manifest", origin.display()))?;
        Ok(manifest)
    }

    fn validate(&self) -> Result<()> {
        if self.packages.is_empty() {
            bail!("`packages` is empty");
        }
        let mut seen = std::collections::BTreeSet::new();
        for p in &self.packages {
            if !seen.insert(&p.name) {
                bail!("package `{}` is listed twice under `packages`", p.name);
            }
            if p.version_command.is_empty() {
                bail!("`packages[{}].version_command` is empty", p.name);
            }
            if let Some(identity) = &p.provenance {
                identity.validate(&p.name)?;
            }
            if !p.version_output.contains("{version}") {
                bail!(
                    "`packages[{}].version_output` must contain `{{version}}`",
                    p.name
                );
            }
        }
        if self.platforms.is_empty() {
            bail!("`platforms` is empty");
        }
        if self.cadence.interval_days == 0 {
            bail!("`cadence.interval_days` must be at least 1");
        }
        if self.cooldown_hours < 24 {
            bail!(
                "`cooldown_hours` is {}; it must be at least 24 (see the comment above it)",
                self.cooldown_hours
            );
        }
        let node = &self.node;
        if node.version.major != node.major {
            bail!(
                "`node.version` {} is not on the `node.major` {} line",
                node.version,
                node.major
            );
        }
        if node.version < node.minimum {
            bail!(
                "`node.version` {} is older than `node.minimum` {}",
                node.version,
                node.minimum
            );
        }
        if !node.version.pre.is_empty() {
            bail!("`node.version` {} is a prerelease", node.version);
        }
        for platform in &self.platforms {
            if !node.packages.contains_key(platform) {
                bail!("`node.packages` has no entry for {platform}");
            }
        }
        for (allowed, acknowledged) in &self.install_scripts_allowed {
            if !self.packages.iter().any(|p| &p.name == allowed) {
                bail!("`install_scripts_allowed` names `{allowed}`, which is not under `packages`");
            }
            if let Some(problem) = acknowledged.form_problem() {
                bail!("`install_scripts_allowed.{allowed}` {problem}");
            }
        }
        if let Some(both) = self
            .install_scripts_skipped
            .iter()
            .find(|s| self.install_scripts_allowed.contains_key(*s))
        {
            bail!("`{both}` is in both install_scripts_allowed and install_scripts_skipped");
        }
        for h in &self.harnesses {
            // The name goes into the turn check's script as a shell word and a JS string.
            if h.name.is_empty()
                || !h
                    .name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            {
                bail!(
                    "harness name `{}` must be lowercase letters, digits and `-`",
                    h.name
                );
            }
            if h.command.is_empty() || h.handshake.is_empty() || h.expect.is_empty() {
                bail!(
                    "harness `{}` needs a command, a handshake and an expect map",
                    h.name
                );
            }
            for line in &h.handshake {
                serde_json::from_str::<serde_json::Value>(line).with_context(|| {
                    format!(
                        "harness `{}`: a handshake record is not JSON: {line}",
                        h.name
                    )
                })?;
            }
            if h.resume.is_empty() {
                bail!(
                    "harness `{}` needs `resume`: the fields a supervisor saves to resume it",
                    h.name
                );
            }
            for field in &h.resume {
                field.validate(&h.name)?;
            }
            for pointer in h.expect.keys() {
                if !pointer.starts_with('/') {
                    bail!(
                        "harness `{}`: expect key `{pointer}` is not a JSON pointer",
                        h.name
                    );
                }
            }
        }
        self.validate_smoke_checks()?;
        if self.node.version_command.is_empty() {
            bail!("`node.version_command` is empty");
        }
        self.validate_image()?;
        self.validate_linked_builds()?;
        self.validate_runtime()?;
        Ok(())
    }

    fn validate_runtime(&self) -> Result<()> {
        let seccomp = &self.runtime.seccomp;
        let profile = &seccomp.profile;
        if profile.starts_with('/') || !is_plain_path(profile) || !profile.ends_with(".json") {
            bail!("`runtime.seccomp.profile` `{profile}` must be a relative path to a .json file inside the repository");
        }
        let digest = &seccomp.base_sha256;
        if digest.len() != 64
            || !digest
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        {
            bail!("`runtime.seccomp.base_sha256` `{digest}` is not a lowercase sha256 hex digest");
        }
        if seccomp.allows.is_empty() {
            bail!("`runtime.seccomp.allows` is empty: the profile would add nothing to its base");
        }
        for name in &seccomp.allows {
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            {
                bail!("`runtime.seccomp.allows` entry `{name}` is not a system call name");
            }
        }
        Ok(())
    }

    /// The values smoke pastes into its shell scripts are limited to characters that need no
    /// quoting, so a manifest value can never change a script's meaning.
    fn validate_image(&self) -> Result<()> {
        let image = &self.image;
        for (key, path) in [
            ("image.home", &image.home),
            ("image.install_dir", &image.install_dir),
        ] {
            if !path.starts_with('/') || !is_plain_path(path) {
                bail!(
                    "`{key}` is `{path}`: it must be an absolute path of letters, digits and `._+-/`, without `..`"
                );
            }
        }
        let mut names = BTreeSet::new();
        for kv in &image.env {
            let Some((name, _)) = kv.split_once('=') else {
                bail!("`image.env` entry `{kv}` is not NAME=value");
            };
            if !is_env_name(name) {
                bail!("`image.env` entry `{kv}`: `{name}` is not a variable name");
            }
            if name == "HOME" {
                bail!("`image.env` sets HOME; HOME comes from `image.home`");
            }
            if !names.insert(name) {
                bail!("`image.env` sets {name} twice");
            }
        }
        for name in &image.forbidden_env {
            if !is_env_name(name) {
                bail!("`image.forbidden_env` entry `{name}` is not a variable name");
            }
            if names.contains(name.as_str()) || name == "HOME" {
                bail!(
                    "{name} is both required (`image.env`) and forbidden (`image.forbidden_env`)"
                );
            }
        }
        let user = &self.browser.user;
        let user_ok = user.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && user
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
        if !user_ok {
            bail!("`browser.user` `{user}` is not a valid user name ([a-z_][a-z0-9_-]*)");
        }
        Ok(())
    }

    fn validate_linked_builds(&self) -> Result<()> {
        let mut checks = BTreeSet::new();
        for build in &self.linked_builds {
            let check = &build.check;
            if !checks.insert(check) {
                bail!("`linked_builds` names the check `{check}` twice");
            }
            if !self.platforms.contains(&build.platform) {
                bail!(
                    "`linked_builds` check `{check}` is for {}, which is not under `platforms`",
                    build.platform
                );
            }
            let required = self.smoke_checks.platform.get(&build.platform);
            if !required.is_some_and(|names| names.contains(check)) {
                bail!(
                    "`linked_builds` check `{check}` is not required by `smoke_checks.platform.{}`; \
                     add it there so receipts need it",
                    build.platform
                );
            }
            for (key, path) in [
                ("link", &build.link),
                ("target", &build.target),
                ("absent", &build.absent),
            ] {
                if path.starts_with('/') || !is_plain_path(path) {
                    bail!(
                        "`linked_builds` check `{check}`: `{key}` is `{path}`; it must be a path \
                         below node_modules of letters, digits and `._+-/`, without `..`"
                    );
                }
            }
        }
        Ok(())
    }

    /// The names of the smoke checks a `platform` image must have passed, built natively or
    /// under emulation: the manifest's `smoke_checks` lists, `version <package>` for every
    /// package and `harness <name>` for every harness.
    pub fn required_smoke_checks(&self, platform: Platform, emulated: bool) -> BTreeSet<String> {
        let spec = &self.smoke_checks;
        let by_build = if emulated {
            &spec.emulated
        } else {
            &spec.native
        };
        spec.every_build
            .iter()
            .chain(by_build)
            .chain(spec.platform.get(&platform).into_iter().flatten())
            .cloned()
            .chain(self.packages.iter().map(|p| version_check_name(&p.name)))
            .chain(self.harnesses.iter().map(|h| harness_check_name(&h.name)))
            .collect()
    }

    fn validate_smoke_checks(&self) -> Result<()> {
        let spec = &self.smoke_checks;
        if spec.every_build.is_empty() {
            bail!("`smoke_checks.every_build` is empty: a release would need no checks");
        }
        if spec.native.is_empty() || spec.emulated.is_empty() {
            bail!(
                "`smoke_checks.native` and `smoke_checks.emulated` each need at least one check \
                 (the browser check differs between them)"
            );
        }
        for platform in &self.platforms {
            if !spec.platform.contains_key(platform) {
                bail!("`smoke_checks.platform` has no entry for {platform} (use [] for none)");
            }
        }
        for platform in spec.platform.keys() {
            if !self.platforms.contains(platform) {
                bail!("`smoke_checks.platform` names {platform}, which is not under `platforms`");
            }
        }
        let derived = self
            .packages
            .iter()
            .map(|p| version_check_name(&p.name))
            .chain(self.harnesses.iter().map(|h| harness_check_name(&h.name)));
        let mut seen: BTreeMap<String, String> = derived
            .map(|n| (n, "packages/harnesses".to_string()))
            .collect();
        let lists = [
            ("every_build".to_string(), &spec.every_build),
            ("native".to_string(), &spec.native),
            ("emulated".to_string(), &spec.emulated),
        ];
        let named = lists
            .into_iter()
            .chain(
                spec.platform
                    .iter()
                    .map(|(p, names)| (format!("platform.{p}"), names)),
            )
            .flat_map(|(list, names)| names.iter().map(move |n| (list.clone(), n)));
        for (list, name) in named {
            if name.trim().is_empty() || name.trim() != name {
                bail!("`smoke_checks.{list}` has an empty or space-padded check name `{name}`");
            }
            // `native` and `emulated` never apply together, so one name may be in both.
            if let Some(first) = seen.insert(name.clone(), list.clone()) {
                if [first.as_str(), list.as_str()] != ["native", "emulated"] {
                    bail!(
                        "smoke check `{name}` is required twice (`{first}` and \
                         `smoke_checks.{list}`)"
                    );
                }
            }
        }
        Ok(())
    }

    pub fn cooldown(&self) -> chrono::Duration {
        chrono::Duration::hours(i64::from(self.cooldown_hours))
    }
}

/// A non-empty path of characters the shell takes literally, with no `..` component.
fn is_plain_path(path: &str) -> bool {
    !path.is_empty()
        && path
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._+-/".contains(c))
        && !path.split('/').any(|part| part == "..")
}

fn is_env_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_uppercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

#[cfg(test)]
mod tests;
