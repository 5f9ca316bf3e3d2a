//! What `build --json` writes: the image built for one platform; the platform phase and the
//! receipt read it.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::model::{Digest, Platform};

/// What `build --json` prints.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BuildReport {
    /// The reference built (or that would be built): later commands take it from here.
    pub image: String,
    pub platform: Platform,
    pub build_id: String,
    pub image_id: Option<Digest>,
    /// False when an image with this build id existed and nothing was built.
    pub built: bool,
    /// The platform is not this machine's: it was built under qemu.
    pub emulated: bool,
    /// Bytes, as the engine reports the image's size.
    pub size: Option<i64>,
    pub base_image: String,
    pub base_image_id: Digest,
    pub ca_bundle: Option<PathBuf>,
    pub dry_run: bool,
    pub duration_secs: f64,
    /// The image's Debian packages, `name=version`, sorted (from its dpkg database).
    #[serde(default)]
    pub debian_packages: Vec<String>,
}
