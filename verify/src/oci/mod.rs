//! The registry client (distribution API v2), its authentication and credentials: what the
//! verifier reads a release's index and manifests through, and what the xtask's `publish`
//! pushes through (its uploads are its own, `xtask/src/oci/blob_upload.rs`, over
//! `client::RegistryClient::send`). Depends on the HTTP policy (`crate::http`) and the formats
//! crate only.

pub mod auth;
pub mod client;
pub mod credentials;
