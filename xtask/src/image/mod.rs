//! The image: the Debian base rootfs, the Docker build, and the smoke checks, all through the
//! Docker engine ([`engine`]).

pub mod assemble;
pub mod base;
pub mod build;
pub mod build_inputs;
pub mod canonicalize;
pub mod dockerfile;
pub(crate) mod dpkg;
pub mod engine;
pub mod identity;
pub mod sbom;
pub mod seccomp;
pub mod smoke;
