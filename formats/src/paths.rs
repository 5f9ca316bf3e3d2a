//! Where the files of a checkout live, relative to the repository root: the one definition of
//! each path the tools read, write or record. The xtask's `Layout` joins them to the checkout it
//! works on; the verifier needs them too (a receipt records its release inputs by these paths),
//! so they live here, below both. A test (`xtask/src/architecture/paths.rs`) fails on a
//! production file elsewhere that spells one of them out.

/// `template/`: the files a release ships, swapped as one directory by `lock`.
pub const TEMPLATE: &str = "template";
/// The template's manifest, the only policy.
pub const MANIFEST: &str = "template/manifest.yaml";
/// The exact version of every top-level package, written by `lock`.
pub const PACKAGE_JSON: &str = "template/package.json";
/// npm's lock of the whole tree, written by npm under `lock`.
pub const PACKAGE_LOCK: &str = "template/package-lock.json";
/// Every package the template installs and the Node runtime, written by `lock`.
pub const INVENTORY: &str = "template/inventory.json";
/// The inventory for people, written by `lock` beside [`INVENTORY`].
pub const INVENTORY_MD: &str = "template/INVENTORY.md";
/// The program the Dockerfile's install-plan stage copies and runs to split the lock into
/// install groups: it decides the image as much as the Dockerfile does.
pub const INSTALL_PLAN: &str = "template/install-plan.js";
/// The template definition whose `image:` line `pin` rewrites.
pub const TEMPLATE_DEFINITION: &str = "template/sandbox0-template.yaml";
/// The image's recipe.
pub const DOCKERFILE: &str = "Dockerfile";
/// The published JSON Schema of the receipt, a release asset.
pub const RECEIPT_SCHEMA: &str = "schemas/receipt.v2.schema.json";
/// The repository's scripts (`scripts/<name>`).
pub const SCRIPTS: &str = "scripts";
/// The tool's own state (caches, records of earlier pushes, receipts, run directories):
/// ignored by git, so removing it resets every cache.
pub const STATE: &str = ".xtask";
/// Where `cargo xtask release` keeps its releases' assets and receipts (below [`STATE`]).
pub const RELEASES: &str = ".xtask/releases";

/// The files that decide what is released. The inventory is left out on purpose: it also
/// records *when* it was resolved, and a new clock alone is not a change (its package data is
/// derived from the lockfile, which is here). The install plan is in: the Dockerfile runs it,
/// so a change to it alone changes the image.
pub const RELEASE_INPUTS: [&str; 5] = [
    PACKAGE_JSON,
    PACKAGE_LOCK,
    DOCKERFILE,
    INSTALL_PLAN,
    MANIFEST,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_files_are_in_the_template_folder_and_exist() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap();
        for path in [
            MANIFEST,
            PACKAGE_JSON,
            PACKAGE_LOCK,
            INVENTORY,
            INVENTORY_MD,
            INSTALL_PLAN,
            TEMPLATE_DEFINITION,
        ] {
            assert!(path.starts_with(&format!("{TEMPLATE}/")), "{path}");
            assert!(root.join(path).is_file(), "{path} is not a committed file");
        }
        assert!(RELEASES.starts_with(&format!("{STATE}/")));
        for path in [DOCKERFILE, RECEIPT_SCHEMA] {
            assert!(root.join(path).is_file(), "{path} is not a committed file");
        }
        assert!(root.join(SCRIPTS).is_dir());
    }
}
