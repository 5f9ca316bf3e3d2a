//! The OCI side: image references, registry authentication and credentials, blob uploads.
//! Depends on nothing else of ours, so the release code and the consumer's verifier share it.

pub mod auth;
pub mod blob_upload;
pub mod credentials;
pub mod reference;
