//! A target platform of the image (`linux/amd64`, `linux/arm64`): the key of every
//! per-platform record that passes between stages.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A target platform, `linux/amd64` or `linux/arm64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Platform {
    LinuxAmd64,
    LinuxArm64,
}

impl Platform {
    pub const ALL: [Platform; 2] = [Platform::LinuxAmd64, Platform::LinuxArm64];

    /// The OCI / Docker architecture name.
    pub fn arch(self) -> &'static str {
        match self {
            Platform::LinuxAmd64 => "amd64",
            Platform::LinuxArm64 => "arm64",
        }
    }

    /// `linux-amd64`: the platform in file and directory names (`results-linux-amd64.json`,
    /// `sbom-linux-amd64.spdx.json`, `template-verify-linux-amd64`, the layer cache's folder).
    pub fn slug(self) -> String {
        format!("linux-{}", self.arch())
    }

    /// The `cpu` name npm uses for this platform.
    pub fn npm_cpu(self) -> &'static str {
        match self {
            Platform::LinuxAmd64 => "x64",
            Platform::LinuxArm64 => "arm64",
        }
    }

    /// Whether this machine runs the platform's binaries only under emulation (qemu); see
    /// `image::base::ensure_emulation` for whether it can at all.
    pub fn is_emulated(self) -> bool {
        Platform::host() != Some(self)
    }

    /// The platform of the machine this runs on, when it is one we build for.
    pub fn host() -> Option<Platform> {
        match std::env::consts::ARCH {
            "x86_64" => Some(Platform::LinuxAmd64),
            "aarch64" => Some(Platform::LinuxArm64),
            _ => None,
        }
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "linux/{}", self.arch())
    }
}

impl FromStr for Platform {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "linux/amd64" => Ok(Platform::LinuxAmd64),
            "linux/arm64" | "linux/arm64/v8" => Ok(Platform::LinuxArm64),
            other => Err(format!(
                "unsupported platform `{other}`: expected linux/amd64 or linux/arm64"
            )),
        }
    }
}

impl TryFrom<String> for Platform {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<Platform> for String {
    fn from(p: Platform) -> String {
        p.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slug_is_the_platform_with_a_dash() {
        assert_eq!(Platform::LinuxAmd64.slug(), "linux-amd64");
        assert_eq!(Platform::LinuxArm64.slug(), "linux-arm64");
        for p in Platform::ALL {
            assert_eq!(p.slug(), p.to_string().replace('/', "-"));
        }
    }
}
