//! The coding-agent template's release toolchain. `main.rs` dispatches; each folder below is
//! one sub-domain. See ARCHITECTURE.md for the map and the invariants between modules.

// Shared ground: the manifest (the only policy), the command line, bounded and strict reading,
// terminal escaping, the HTTP policy.
pub mod bounded_read;
pub mod flags;
pub mod http;
pub mod manifest;
pub mod strict_json;
pub mod terminal_text;
pub mod util;

pub mod image;
pub mod model;
pub mod npm;
pub mod oci;
pub mod release;
