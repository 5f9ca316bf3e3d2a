//! The npm side: registry data in, exact versions and pinned files (package.json,
//! package-lock.json, the inventory) out.

pub mod bench;
pub mod cli;
pub mod inventory;
pub mod lock;
pub mod lockfile;
pub mod registry;
pub mod resolve;
