//! The files that pass between stages, one type each, shared by the stage that writes the file
//! and every stage that reads it. `model` depends on nothing else of ours: it is the
//! vocabulary the other folders speak.

pub mod build;
pub mod digest;
pub mod gate;
pub mod inventory;
pub mod lockfile;
pub mod package_json;
pub mod plan;
pub mod platform;
pub mod platform_results;
pub mod publish;
pub mod receipt;
pub mod resolution;
pub mod smoke;
pub mod tag;

pub use digest::Digest;
pub use platform::Platform;
pub use publish::{IndexEntry, PublishReport, PublishedIndex, PushedImage};
