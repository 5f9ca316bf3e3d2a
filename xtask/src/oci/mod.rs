//! The publisher's side of OCI: `docker save` archives and the layer cache to blobs, canonical
//! layers, which blobs of a previous release may be reused, and reading a pushed image back.
//! The registry client, its authentication and credentials are the verifier's
//! (`template_verify::oci`), the reference grammar and index bytes the formats'
//! (`template_formats::oci`): one client for the consumer and the publisher.

pub(crate) mod archive;
pub(crate) mod canonical;
pub(crate) mod read_back;
pub(crate) mod reuse;
pub(crate) mod unchanged;
