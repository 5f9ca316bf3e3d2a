//! The coding-agent template's release toolchain, for its maintainers and its workflow.
//! `main.rs` dispatches; each folder below is one sub-domain. It builds on the file formats
//! (`template_formats`) and the consumer's verifier (`template_verify`), which know nothing
//! of it. See ARCHITECTURE.md for the map and the invariants between modules.

// Shared ground: the command line, free space, small IO helpers.
#[cfg(test)]
mod architecture;
pub(crate) mod disk;
pub mod flags;
pub mod kill_point;
pub mod util;

#[cfg(feature = "bench")]
pub mod bench;
pub mod image;
pub mod npm;
pub(crate) mod oci;
pub mod release;

pub use template_verify::run_command;
