//! The registry client (distribution API v2), its authentication and credentials, and blob
//! uploads: what the verifier reads a release's index and manifests through, and what the
//! xtask's `publish` pushes through. Depends on the HTTP policy (`crate::http`) and the
//! formats crate only.

pub mod auth;
pub mod blob_upload;
pub mod client;
pub mod credentials;
