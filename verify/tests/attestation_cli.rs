//! `template-verify attestation verify` as a consumer runs it: the built binary copied away
//! from the checkout, run with an empty environment from another directory (as `nobody` when
//! the tests run as root), on real bundles from `../shared/fixtures/sigstore/` (SOURCE.md there).
//! Skips, saying why, only where that directory is absent.

#[path = "../../tests/support/sigstore_standin.rs"]
mod sigstore_standin;

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
fn run_binary(installed: &Installed, args: &[&str]) -> (i32, String, String) {
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
    let (code, out, err) = run_binary(
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
    let (code, out, err) = run_binary(
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
    let (code, out, err) = run_binary(
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
    let (code, _, err) = run_binary(
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
        let (code, _, err) = run_binary(&installed, &args);
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
    let (code, _, err) = run_binary(&installed, &args);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("is not .github/workflows/<file>"), "{err}");
}

/// The negatives no real bundle gives, signed by the Sigstore STAND-IN (its own CA, CT log and
/// transparency log; tests/support/sigstore_standin.rs), so they are the stand-in's bundles,
/// not Sigstore's: a self-hosted runner, another commit, and the release workflow run as a
/// reusable workflow of another workflow. Each is cryptographically valid under the stand-in's
/// root, and refused by the one claim that differs.
#[test]
fn standin_bundles_a_self_hosted_runner_another_commit_and_a_reusable_call_are_refused() {
    use sigstore_standin::{GithubRun, SigstoreStandIn};
    let installed = install();
    let standin = SigstoreStandIn::new();
    let root = standin.write_trusted_root(&installed.home);
    let artifact = installed.home.join("receipt.json");
    std::fs::write(&artifact, b"{}\n").unwrap();
    let sha256 = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(b"{}\n"))
    };
    let statement = serde_json::json!({
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": "receipt.json", "digest": {"sha256": sha256}}],
        "predicateType": "https://slsa.dev/provenance/v1",
        "predicate": {},
    });
    let commit = "1".repeat(40);
    let release_run = || {
        let mut run = GithubRun::new(
            "s0/template",
            ".github/workflows/update-template.yml",
            "refs/heads/main",
        );
        run.commit = commit.clone();
        run
    };
    let judge = |run: &GithubRun, source_commit: &str| -> (i32, serde_json::Value) {
        let bundle = standin.statement_bundle(
            &statement,
            run,
            chrono::Utc::now() - chrono::Duration::minutes(1),
        );
        let path = installed.home.join("bundle.json");
        std::fs::write(&path, bundle.to_string()).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let (code, out, err) = run_binary(
            &installed,
            &[
                "attestation",
                "verify",
                artifact.to_str().unwrap(),
                "--bundle",
                path.to_str().unwrap(),
                "--trusted-root",
                root.to_str().unwrap(),
                "--repository",
                "s0/template",
                "--workflow",
                ".github/workflows/update-template.yml",
                "--source-ref",
                "refs/heads/main",
                "--source-commit",
                source_commit,
                "--json",
            ],
        );
        (
            code,
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}")),
        )
    };
    let refused = |report: &serde_json::Value| -> Vec<(String, String, String)> {
        report["bundles"][0]["refusals"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let f = |k: &str| r[k].as_str().unwrap().to_owned();
                (f("claim"), f("expected"), f("found"))
            })
            .collect()
    };
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(&artifact, std::fs::Permissions::from_mode(0o644)).unwrap();

    let (code, report) = judge(&release_run(), &commit);
    assert_eq!((code, refused(&report)), (0, vec![]), "{report:#}");

    let mut self_hosted = release_run();
    self_hosted.runner = "self-hosted".into();
    let (code, report) = judge(&self_hosted, &commit);
    assert_eq!(code, 1);
    assert_eq!(report["bundles"][0]["verified"], true, "{report:#}");
    assert_eq!(
        refused(&report),
        [(
            "runner environment (1.3.6.1.4.1.57264.1.11)".to_owned(),
            "`github-hosted`".to_owned(),
            "`self-hosted`".to_owned()
        )]
    );

    let (code, report) = judge(&release_run(), &"2".repeat(40));
    assert_eq!(code, 1);
    assert_eq!(
        refused(&report),
        [(
            "source repository digest (1.3.6.1.4.1.57264.1.13)".to_owned(),
            format!("`{}`", "2".repeat(40)),
            format!("`{commit}`")
        )]
    );

    let mut called = release_run();
    called.build_config =
        Some("https://github.com/s0/template/.github/workflows/caller.yml@refs/heads/main".into());
    let (code, report) = judge(&called, &commit);
    assert_eq!(code, 1);
    assert_eq!(
        refused(&report)
            .into_iter()
            .map(|(claim, _, _)| claim)
            .collect::<Vec<_>>(),
        ["build config URI (1.3.6.1.4.1.57264.1.18)"]
    );

    // The stand-in's bundle under Sigstore's own root: no such CA, refused by the cryptography.
    if let Some(sigstore) = fixtures() {
        let path = installed.home.join("bundle.json");
        let (code, _, err) = run_binary(
            &installed,
            &[
                "attestation",
                "verify",
                artifact.to_str().unwrap(),
                "--bundle",
                path.to_str().unwrap(),
                "--trusted-root",
                sigstore
                    .join("public-good-trusted_root.json")
                    .to_str()
                    .unwrap(),
                "--certificate-identity",
                "x",
                "--certificate-oidc-issuer",
                "y",
            ],
        );
        assert_eq!(code, 1, "{err}");
        assert!(err.contains("does not verify"), "{err}");
    }
}
