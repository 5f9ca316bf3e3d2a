//! The OCI side: image references, the canonical index and media types, `docker save`
//! archives to blobs, the registry client, its authentication and credentials, blob uploads.
//! Depends on nothing of ours but `model` and the HTTP policy (`crate::http`), so the release
//! code and the consumer's verifier share it.

pub mod archive;
pub mod auth;
pub mod blob_upload;
pub mod client;
pub mod credentials;
pub mod index;
pub mod reference;
