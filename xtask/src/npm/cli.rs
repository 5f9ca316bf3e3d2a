//! Runs the real npm, pinned and isolated, to generate the template's lockfile.
//!
//! npm's resolution is the well-kept implementation, so the lockfile is npm's own work; what
//! this module controls is *which* npm (the manifest's `node.npm_version`, downloaded from the
//! registry and checked against its sha512, so every machine writes the same lockfile) and
//! *which configuration* (a fresh npmrc and cache per run, the user's and global npmrc and
//! every inherited `npm_config_*` variable ignored).

use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::{bail, Context, Result};

use crate::npm::registry::{download_verified, Registry};

/// A verified npm CLI on disk, run with the host's `node`.
pub(crate) struct Npm {
    pub version: String,
    cli: PathBuf,
    /// The inherited `npm_config_*` variables, removed from npm's environment.
    scrub: Vec<std::ffi::OsString>,
    /// The inherited `NODE_OPTIONS`, which npm gets with the tool's own option added.
    node_options: Option<String>,
}

impl Npm {
    /// The pinned npm, from the cache when its integrity marker matches, else downloaded from
    /// `registry` and verified.
    /// `ctx` says where the cache is (`Layout::tool_cache`) and what of the environment npm
    /// must not see.
    pub(crate) async fn pinned(
        registry: &Registry,
        version: &str,
        ctx: &crate::Context,
    ) -> Result<Npm> {
        let cache_dir = ctx.layout.tool_cache();
        let packument = registry.packument("npm").await?;
        let meta = packument.versions.get(version).with_context(|| {
            format!(
                "npm {version} (node.npm_version in the manifest) is not on {}",
                registry.base()
            )
        })?;
        let dist = meta.dist.as_ref().context("npm has no dist")?;
        let (Some(integrity), Some(tarball)) = (&dist.integrity, &dist.tarball) else {
            bail!(
                "npm {version} on {} has no sha512 integrity or tarball",
                registry.base()
            );
        };
        let dir = cache_dir.join(format!("npm-{version}"));
        let cli = dir.join("package/bin/npm-cli.js");
        let cached = || {
            std::fs::read_to_string(dir.join(".integrity"))
                .ok()
                .as_deref()
                == Some(integrity.as_str())
                && cli.exists()
        };
        let pinned = || Npm {
            version: version.to_owned(),
            cli: cli.clone(),
            scrub: ctx.settings.npm_config_names.clone(),
            node_options: ctx.settings.node_options.clone(),
        };
        if cached() {
            return Ok(pinned());
        }
        eprintln!("downloading npm {version} from {tarball}");
        let bytes = download_verified(tarball, integrity).await?;
        let staging = tempfile::tempdir_in(cache_dir_created(&cache_dir)?)?;
        tar::Archive::new(flate2::read::GzDecoder::new(bytes.as_slice()))
            .unpack(staging.path())
            .with_context(|| format!("cannot unpack {tarball}"))?;
        std::fs::write(staging.path().join(".integrity"), integrity)?;
        // Concurrent runs may race to fill the cache. Renaming a directory never replaces a
        // non-empty one, so a complete copy another run put there first (and may be running
        // npm from right now) is kept; only an incomplete one is cleared away.
        let staged = staging.keep();
        if std::fs::rename(&staged, &dir).is_err() {
            if cached() {
                let _ = std::fs::remove_dir_all(&staged);
            } else {
                let _ = std::fs::remove_dir_all(&dir);
                std::fs::rename(&staged, &dir)
                    .with_context(|| format!("cannot move npm into {}", dir.display()))?;
            }
        }
        Ok(pinned())
    }

    /// The unpacked npm package (`package.json`, `node_modules/`, ...).
    pub(crate) fn package_dir(&self) -> &Path {
        self.cli
            .parent()
            .and_then(Path::parent)
            .expect("the npm cli is package/bin/npm-cli.js")
    }

    /// Runs `npm <args>` in `dir` with only the configuration in `npmrc`.
    pub(crate) async fn run(&self, dir: &Path, npmrc: &str, args: &[&str]) -> Result<String> {
        let config_dir = tempfile::tempdir()?;
        let user = config_dir.path().join("npmrc");
        let global = config_dir.path().join("global-npmrc");
        std::fs::write(&user, npmrc)?;
        std::fs::write(&global, "")?;
        let mut command = tokio::process::Command::new("node");
        command.arg(&self.cli).args(args).current_dir(dir);
        for key in &self.scrub {
            command.env_remove(key);
        }
        command
            .env("NPM_CONFIG_USERCONFIG", &user)
            .env("NPM_CONFIG_GLOBALCONFIG", &global)
            .env("NPM_CONFIG_CACHE", config_dir.path().join("cache"))
            .env("NPM_CONFIG_UPDATE_NOTIFIER", "false")
            .env("NODE_OPTIONS", node_options(self.node_options.as_deref()))
            .stdin(Stdio::null());
        let output = command.output().await.with_context(|| {
            "cannot run `node`: the lock step needs Node.js on PATH (apt-get install nodejs)"
        })?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        if !output.status.success() {
            bail!(
                "`npm {}` failed in {} ({}):\n{}",
                args.join(" "),
                dir.display(),
                output.status,
                stderr.trim()
            );
        }
        Ok(stderr.into_owned())
    }
}

fn cache_dir_created(dir: &Path) -> Result<&Path> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir)
}

/// The npmrc of the lock step: the registry given, lockfile URLs kept (the host may set
/// `omit-lockfile-registry-resolved`), no scripts, no network side trips.
pub(crate) fn lock_npmrc(registry: &str) -> String {
    format!(
        "registry={}\nomit-lockfile-registry-resolved=false\nignore-scripts=true\naudit=false\nfund=false\nupdate-notifier=false\nlockfile-version=3\nengine-strict=false\nsave-exact=true\n",
        ensure_trailing_slash(registry)
    )
}

pub(crate) fn ensure_trailing_slash(url: &str) -> String {
    format!("{}/", url.trim_end_matches('/'))
}

/// Node's own CA list does not hold a TLS-inspecting proxy's CA, and `NODE_EXTRA_CA_CERTS`
/// may not be set (a runner's clean environment). Like the tool's own HTTP client, npm trusts
/// the system store: `--use-openssl-ca`, added to whatever NODE_OPTIONS the caller has.
pub(crate) fn node_options(existing: Option<&str>) -> String {
    const SYSTEM_STORE: &str = "--use-openssl-ca";
    match existing.map(str::trim).filter(|e| !e.is_empty()) {
        None => SYSTEM_STORE.to_string(),
        Some(e) if e.split_whitespace().any(|o| o == SYSTEM_STORE) => e.to_string(),
        Some(e) => format!("{e} {SYSTEM_STORE}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npm_trusts_the_system_store_whatever_node_options_held() {
        assert_eq!(node_options(None), "--use-openssl-ca");
        assert_eq!(node_options(Some(" ")), "--use-openssl-ca");
        assert_eq!(
            node_options(Some("--max-old-space-size=4096")),
            "--max-old-space-size=4096 --use-openssl-ca"
        );
        assert_eq!(node_options(Some("--use-openssl-ca")), "--use-openssl-ca");
    }
}
