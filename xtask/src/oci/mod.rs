//! The OCI side: image references, the canonical index and media types, `docker save`
//! archives to blobs, the registry client, reading a pushed image back, its authentication and credentials, blob uploads.
//! Depends on nothing of ours but `model` and the HTTP policy (`crate::http`), so the release
//! code and the consumer's verifier share it.

pub(crate) mod archive;
pub(crate) mod auth;
pub(crate) mod blob_upload;
pub(crate) mod canonical;
pub(crate) mod client;
pub(crate) mod credentials;
pub(crate) mod index;
pub(crate) mod read_back;
pub(crate) mod reference;
pub(crate) mod reuse;
pub(crate) mod unchanged;
