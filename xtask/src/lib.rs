//! The coding-agent template's release toolchain. `main.rs` dispatches; each module below is
//! one concern. See ARCHITECTURE.md for the map and the invariants between modules.

pub mod bounded_read;
pub mod flags;
pub mod inventory;
pub mod manifest;
pub mod oci_reference;
pub mod strict_json;
pub mod terminal_text;
pub mod util;

// npm side: registry data in, exact versions and pinned files out.
pub mod bench;
pub mod lock;
pub mod lockfile;
pub mod npm;
pub mod registry;
pub mod resolve;

// Image side: base rootfs, build, smoke checks.
pub mod base;
pub mod build;
pub mod docker;
pub mod smoke;

// Release side: cadence, publishing, receipts, the consumer's pin.
pub mod blob_upload;
pub mod credentials;
pub mod gate;
pub mod oci_auth;
pub mod pin;
pub mod publish;
pub mod receipt;
pub mod receipt_policy;
pub mod receipt_registry;
pub mod release;
