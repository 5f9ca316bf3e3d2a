//! The package inventory (`template/inventory.json`): every package the template installs,
//! with version, integrity, license and origin, plus the Node runtime the image uses.
//!
//! `cargo xtask lock` writes it; `build` reads the Node tarball and its checksum from it;
//! `release` copies it into the receipt. `INVENTORY.md` is rendered from it for people.

pub(crate) use template_formats::model::inventory::INVENTORY_PATH;
pub(crate) const INVENTORY_MD_PATH: &str = "template/INVENTORY.md";
