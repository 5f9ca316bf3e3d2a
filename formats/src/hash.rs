//! The one digest every file of a release is named and checked by.

use sha2::{Digest, Sha256};

/// `sha256` of `bytes` as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}
