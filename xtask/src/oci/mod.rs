//! The publisher's side of OCI: `docker save` archives and the layer cache to blobs, canonical
//! layers, which blobs of a previous release may be reused, the uploads, and reading a pushed
//! image back. The registry client (reads), its authentication and credentials are the
//! verifier's (`template_verify::oci`), the reference grammar and index bytes the formats'
//! (`template_formats::oci`): one client for the consumer and the publisher, and the
//! publisher's writes over it here (`blob_upload.rs`).

pub(crate) mod archive;
pub(crate) mod blob_upload;
pub(crate) mod canonical;
pub(crate) mod canonical_config;
pub(crate) mod compress;
pub(crate) mod read_back;
pub(crate) mod reuse;
pub(crate) mod stream;
pub(crate) mod unchanged;
