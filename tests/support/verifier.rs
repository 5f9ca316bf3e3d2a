//! The consumer's static amd64 verifier, as the end-to-end tests run it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use super::{checkout_path, scratch_repo};

/// The static amd64 verifier, built once per test process the way the release workflow
/// builds it, in a scratch copy of this repository that is deleted before anything runs it:
/// a verifier that read its build tree would find nothing there, as on a consumer's machine.
/// (Its target directory is a cache of its own below this checkout's: `cargo test` holds the
/// main one, and the dependencies are built once.) The binary is left in a directory of its
/// own, readable by the runner user.
pub fn verifier() -> &'static Path {
    static VERIFIER: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &VERIFIER
        .get_or_init(|| {
            use std::os::unix::fs::PermissionsExt as _;
            let build_tree = scratch_repo("consume-verifier-build-");
            let out = tempfile::Builder::new()
                .prefix("consume-verifier-")
                .tempdir_in(crate::support::run_dir())
                .unwrap();
            let status = Command::new("bash")
                .arg(build_tree.path().join("scripts/build-verifiers.sh"))
                .arg(out.path())
                .arg("linux/amd64")
                .env("CARGO_TARGET_DIR", checkout_path("target/consume-verifier"))
                .env("XTASK_ZIG_VENV", checkout_path(".xtask/venv-zig"))
                .status()
                .unwrap();
            assert!(status.success(), "scripts/build-verifiers.sh failed");
            let gone = build_tree.path().to_path_buf();
            drop(build_tree);
            assert!(
                !gone.exists(),
                "the build tree {} is deleted",
                gone.display()
            );
            std::fs::set_permissions(out.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
            let binary = out.path().join("template-verify-linux-amd64");
            (out, binary)
        })
        .1
}

/// Starts [`verifier`]'s build on a thread of its own, once; whoever needs the binary waits
/// for it. The arm64 image test calls this: its build under qemu keeps about one core busy
/// for ten minutes, and the verifier's cold build (minutes on two cores) takes the other, so
/// the consumer tests (`pin_consumer`, which run after `image`) find it made.
pub fn build_in_background() {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        std::thread::spawn(|| {
            verifier();
        });
    });
}
