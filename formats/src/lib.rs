//! The files of the coding-agent template's releases, one type each: the template's manifest
//! (the only policy), the reports that pass between the release's stages, the receipt, the
//! SBOMs, the canonical bytes of the OCI index and the image-reference grammar.
//!
//! Both the consumer's verifier (`template-verify`) and the maintainer's `xtask` build on this
//! crate and on nothing of each other's here: a format is defined once, for its writer and
//! every reader. No network, no engine, no clock; the only IO is reading a named file with
//! limits ([`bounded_read`]).

pub mod bounded_read;
pub mod hash;
pub mod manifest;
pub mod model;
pub mod oci;
pub mod paths;
pub mod sbom;
pub mod strict_json;
