//! The repository's layout: every path of the checkout the tool reads or writes is a method
//! here, below one root: the paths themselves are `template_formats::paths` (the verifier names
//! them too), joined to the root here. `main.rs` builds the one `Layout` of a run (from `XTASK_ROOT`, else
//! the checkout this binary was compiled in: only main decides that) and passes it down in
//! the [`crate::Context`]; nothing below the binary guesses where the repository is.

use std::path::{Path, PathBuf};

use template_formats::manifest::Platform;
use template_formats::paths;

use crate::settings::Settings;

/// The checkout the tool works on and the tool's state in it (`.xtask/`, ignored by git).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    root: PathBuf,
    tool_cache: Option<PathBuf>,
    layer_cache: Option<PathBuf>,
}

impl Layout {
    /// The checkout at `root`, with the state directories in their default places.
    pub fn at(root: impl Into<PathBuf>) -> Layout {
        Layout {
            root: root.into(),
            tool_cache: None,
            layer_cache: None,
        }
    }

    /// The layout `settings` name: `XTASK_ROOT`, else the checkout this binary was compiled
    /// in (the xtask crate's parent), with the caches the settings move. Only `main.rs`
    /// calls it.
    pub fn of(settings: &Settings) -> Layout {
        let root = settings.root.clone().unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .parent()
                .expect("xtask lives one level below the repository root")
                .to_path_buf()
        });
        Layout {
            root,
            tool_cache: settings.cache_dir.clone(),
            layer_cache: settings.layer_cache.clone(),
        }
    }

    /// The repository root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A committed file, by its path relative to the root (e.g. a manifest's
    /// `runtime.seccomp.profile`, a release input's path).
    pub fn file(&self, relative: impl AsRef<Path>) -> PathBuf {
        self.root.join(relative)
    }

    /// `template/`: the files a release ships, swapped as one directory by `lock`.
    pub fn template(&self) -> PathBuf {
        self.root.join(paths::TEMPLATE)
    }

    /// `template/manifest.yaml`, the only policy.
    pub fn manifest(&self) -> PathBuf {
        self.root.join(paths::MANIFEST)
    }

    /// `template/package.json`.
    pub fn package_json(&self) -> PathBuf {
        self.root.join(paths::PACKAGE_JSON)
    }

    /// `template/package-lock.json`.
    pub fn package_lock(&self) -> PathBuf {
        self.root.join(paths::PACKAGE_LOCK)
    }

    /// `template/inventory.json`.
    pub fn inventory(&self) -> PathBuf {
        self.root.join(paths::INVENTORY)
    }

    /// `template/install-plan.js`, the program the Dockerfile's install-plan stage runs.
    pub fn install_plan(&self) -> PathBuf {
        self.root.join(paths::INSTALL_PLAN)
    }

    /// The `Dockerfile`.
    pub fn dockerfile(&self) -> PathBuf {
        self.root.join(paths::DOCKERFILE)
    }

    /// The receipt's JSON schema (`schemas/`), a release asset.
    pub fn receipt_schema(&self) -> PathBuf {
        self.root.join(paths::RECEIPT_SCHEMA)
    }

    /// `docs/cli.md`: the command-line reference, generated from the command lines
    /// (`cargo xtask docs cli`).
    pub fn cli_reference(&self) -> PathBuf {
        self.root.join("docs/cli.md")
    }

    /// `scripts/<name>`, e.g. `local-registry.sh`.
    pub fn script(&self, name: &str) -> PathBuf {
        self.root.join(paths::SCRIPTS).join(name)
    }

    /// The tool's own state: `.xtask/<name>` (caches, records of earlier pushes, receipts,
    /// run directories). One root, ignored by git, so `rm -rf .xtask` resets every cache and
    /// `cargo clean` resets none.
    pub fn state(&self, name: &str) -> PathBuf {
        self.root.join(paths::STATE).join(name)
    }

    /// Where verified tool downloads (the pinned npm) are kept: `XTASK_CACHE_DIR`, else
    /// `.xtask/cache`.
    pub fn tool_cache(&self) -> PathBuf {
        self.tool_cache
            .clone()
            .unwrap_or_else(|| self.state("cache"))
    }

    /// The directory of every platform's layer cache: `XTASK_LAYER_CACHE`, else
    /// `.xtask/layers`.
    pub fn layer_caches(&self) -> PathBuf {
        self.layer_cache
            .clone()
            .unwrap_or_else(|| self.state("layers"))
    }

    /// The layer cache of `platform` (`image/assemble.rs`).
    pub fn layer_cache(&self, platform: Platform) -> PathBuf {
        self.layer_caches().join(platform.slug())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_settings_move_the_root_and_the_caches() {
        let settings = Settings {
            root: Some("/repo".into()),
            layer_cache: Some("/shared/layers".into()),
            ..Settings::default()
        };
        let layout = Layout::of(&settings);
        assert_eq!(layout.manifest(), Path::new("/repo/template/manifest.yaml"));
        assert_eq!(layout.tool_cache(), Path::new("/repo/.xtask/cache"));
        assert_eq!(
            layout.layer_cache(Platform::LinuxArm64),
            Path::new("/shared/layers/linux-arm64")
        );
        let compiled = Layout::of(&Settings::default());
        assert!(compiled.manifest().exists(), "{compiled:?}");
    }
}
