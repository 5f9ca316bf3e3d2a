//! A content digest, `sha256:` and 64 lowercase hex digits, as OCI descriptors and receipts
//! write it. A newtype so a digest is checked once, where it is read, and a tag, an image id
//! and a digest can no longer be swapped by accident.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest as _, Sha256};

#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest(String);

impl Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Digest {
        Digest(format!("sha256:{}", hex::encode(Sha256::digest(bytes))))
    }

    /// The digest a streaming hasher arrived at.
    pub fn from_hasher(hasher: Sha256) -> Digest {
        Digest(format!("sha256:{}", hex::encode(hasher.finalize())))
    }

    /// `sha256:<hex>`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The 64 hex digits.
    pub fn hex(&self) -> &str {
        &self.0["sha256:".len()..]
    }

    /// Does `text` have the form `sha256:` and 64 lowercase hex digits?
    pub fn is_valid(text: &str) -> bool {
        text.strip_prefix("sha256:").is_some_and(|hex| {
            hex.len() == 64
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DigestError(String);

impl fmt::Display for DigestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` is not a digest: expected `sha256:` and 64 lowercase hex digits",
            self.0.escape_debug()
        )
    }
}

impl std::error::Error for DigestError {}

impl FromStr for Digest {
    type Err = DigestError;
    fn from_str(text: &str) -> Result<Digest, DigestError> {
        if Digest::is_valid(text) {
            Ok(Digest(text.to_string()))
        } else {
            Err(DigestError(text.chars().take(80).collect()))
        }
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Digest({})", self.0)
    }
}

impl AsRef<str> for Digest {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for Digest {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for Digest {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl Serialize for Digest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Digest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Digest, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_formats() {
        assert!(Digest::is_valid(&format!("sha256:{}", "0f".repeat(32))));
        assert!(!Digest::is_valid(&format!("sha256:{}", "0F".repeat(32))));
        assert!(!Digest::is_valid(&format!("sha512:{}", "0f".repeat(32))));
        assert!(!Digest::is_valid(&format!("sha256:{}", "0f".repeat(31))));
        assert!(!Digest::is_valid(&"0f".repeat(32)));
    }

    #[test]
    fn digest_of_bytes_matches_sha256sum() {
        let d = Digest::of(b"");
        assert_eq!(
            d.as_str(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(d.hex().len(), 64);
    }

    #[test]
    fn malformed_digests_are_refused_when_read() {
        for bad in [
            "",
            "sha256:",
            "sha512:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "sha256:E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855",
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b85",
            " sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        ] {
            assert!(bad.parse::<Digest>().is_err(), "{bad:?}");
            let json = serde_json::to_string(bad).unwrap();
            let err = serde_json::from_str::<Digest>(&json)
                .unwrap_err()
                .to_string();
            assert!(err.contains("not a digest"), "{err}");
        }
    }
}
