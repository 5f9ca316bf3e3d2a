//! The coding-agent template's release toolchain. `main.rs` dispatches; each folder below is
//! one sub-domain. See ARCHITECTURE.md for the map and the invariants between modules.

// Shared ground: the manifest (the only policy), the command line, bounded and strict reading,
// terminal escaping, the HTTP policy.
pub(crate) mod bounded_read;
pub mod flags;
pub(crate) mod http;
pub mod manifest;
pub(crate) mod strict_json;
pub mod terminal_text;
pub(crate) mod util;

pub mod image;
pub mod model;
pub mod npm;
pub(crate) mod oci;
pub mod release;
