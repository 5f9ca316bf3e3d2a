//! `template-verify attestation verify` as a consumer runs it: the built binary copied away
//! from the checkout, run with an empty environment from another directory (as `nobody` when
//! the tests run as root), on real bundles from `../shared/fixtures/sigstore/` (SOURCE.md there).
//! Skips, saying why, only where that directory is absent.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixtures() -> Option<PathBuf> {
    // cargo runs an integration test in its package's directory (verify/).
    let dir = Path::new("../../shared/fixtures/sigstore");
    if dir.is_dir() {
        Some(dir.canonicalize().unwrap())
    } else {
        eprintln!(
            "skipped: {} is absent (the real Sigstore material lives beside the checkout)",
            dir.display()
        );
        None
    }
}

struct Installed {
    _dir: tempfile::TempDir,
    binary: PathBuf,
    home: PathBuf,
}

/// The binary alone in a directory no build tree is near.
fn install() -> Installed {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let binary = dir.path().join("template-verify");
    std::fs::copy(env!("CARGO_BIN_EXE_template-verify"), &binary).unwrap();
    std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).unwrap();
    let home = dir.path().to_path_buf();
    Installed {
        _dir: dir,
        binary,
        home,
    }
}

/// (exit code, stdout, stderr).
fn run(installed: &Installed, args: &[&str]) -> (i32, String, String) {
    // /proc/self belongs to the process's effective user.
    let as_root =
        std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap()) == 0;
    let mut command = if as_root {
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid",
            "nobody",
            "--regid",
            "nogroup",
            "--clear-groups",
            "--",
        ])
        .arg(&installed.binary);
        c
    } else {
        Command::new(&installed.binary)
    };
    let out = command
        .args(args)
        .current_dir(&installed.home)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const DEMO_WHEEL: &str = "sha256:ae57936def59bc4c75edd3a837d89bcefc6d3a5e31d55a6fa7a71624f92c3c3b";

#[test]
fn the_installed_binary_verifies_offline_and_names_what_it_refuses() {
    let Some(sigstore) = fixtures() else { return };
    let installed = install();
    let path = |p: &str| sigstore.join(p).to_str().unwrap().to_owned();
    let bundle = path("cli-cli/github_provenance_demo-0.0.12-py3-none-any-bundle.jsonl");
    let root = path("github-trusted_root.json");
    let release = |source_ref: &str| -> Vec<String> {
        [
            "attestation",
            "verify",
            DEMO_WHEEL,
            "--bundle",
            &bundle,
            "--trusted-root",
            &root,
            "--repository",
            "actions/attest-demo",
            "--workflow",
            ".github/workflows/build-python.yml",
            "--source-ref",
            source_ref,
            "--subject-name",
            "github_provenance_demo-0.0.12-py3-none-any.whl",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let args = release("refs/heads/main");
    let (code, out, err) = run(
        &installed,
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("attestation verified")
            && out.contains("fulcio.githubapp.com")
            && out.contains("none (this instance keeps no transparency log)")
            && out.contains("https://github.com/actions/attest-demo refs/heads/main"),
        "{out}"
    );

    let args = release("refs/heads/release");
    let (code, out, err) = run(
        &installed,
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("attestation refused")
            && err.contains(
                "source repository ref (1.3.6.1.4.1.57264.1.14): expected `refs/heads/release`, \
                 found `refs/heads/main`"
            ),
        "{err}"
    );

    // --json on a public-good message signature, with an exact identity.
    let conformance = sigstore.join("conformance/bundle-verify");
    let (code, out, err) = run(
        &installed,
        &[
            "attestation",
            "verify",
            conformance.join("a.txt").to_str().unwrap(),
            "--bundle",
            conformance
                .join("happy-path-v0.3/bundle.sigstore.json")
                .to_str()
                .unwrap(),
            "--trusted-root",
            &path("public-good-trusted_root.json"),
            "--certificate-identity",
            "https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/.github/workflows/extremely-dangerous-oidc-beacon.yml@refs/heads/main",
            "--certificate-oidc-issuer",
            "https://token.actions.githubusercontent.com",
            "--json",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["accepted"], true);
    assert_eq!(report["bundles"][0]["evidence"]["sct_verified"], true);
    assert!(report["bundles"][0]["evidence"]["transparency_log"]["index"].is_u64());

    // No trusted root: nothing is fetched and nothing built in is used.
    let (code, _, err) = run(
        &installed,
        &[
            "attestation",
            "verify",
            DEMO_WHEEL,
            "--bundle",
            &bundle,
            "--repository",
            "a/b",
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--trusted-root"), "{err}");

    // One signer form, whole: an identity and a repository together, a repository without its
    // workflow and ref, an identity without its issuer, and neither.
    let common = [
        "attestation",
        "verify",
        DEMO_WHEEL,
        "--bundle",
        &bundle,
        "--trusted-root",
        &root,
    ];
    for (extra, named) in [
        (
            &[
                "--certificate-identity",
                "x",
                "--certificate-oidc-issuer",
                "y",
                "--repository",
                "a/b",
                "--workflow",
                ".github/workflows/w.yml",
                "--source-ref",
                "refs/heads/main",
            ][..],
            "--repository",
        ),
        (&["--repository", "a/b"][..], "--workflow"),
        (
            &["--certificate-identity", "x"][..],
            "--certificate-oidc-issuer",
        ),
        (&[][..], "--certificate-identity"),
    ] {
        let args: Vec<&str> = common.iter().chain(extra).copied().collect();
        let (code, _, err) = run(&installed, &args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(named), "{args:?}: {err}");
    }
    // A form clap cannot see: the workflow's path.
    let args: Vec<&str> = common
        .iter()
        .chain(&[
            "--repository",
            "actions/attest-demo",
            "--workflow",
            "build-python.yml",
            "--source-ref",
            "refs/heads/main",
            "--subject-name",
            "x",
        ])
        .copied()
        .collect();
    let (code, _, err) = run(&installed, &args);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("is not .github/workflows/<file>"), "{err}");
}
