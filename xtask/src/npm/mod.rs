//! The npm side: registry data in, exact versions and pinned files (package.json,
//! package-lock.json, the inventory) out.

pub(crate) mod cli;
pub(crate) mod install_scripts;
pub mod lock;
pub(crate) mod lockfile;
pub(crate) mod provenance;
pub(crate) mod registry;
pub mod resolve;
pub(crate) mod signatures;
pub(crate) mod template_swap;
pub mod trust;
