//! A genuine release for end-to-end tests of receipts: two tiny one-layer images (amd64
//! native, arm64 "emulated") loaded into the Docker engine, published to a real local
//! registry (`scripts/local-registry.sh`, port XTASK_LOCAL_REGISTRY_PORT), and the JSON the
//! other commands would print about them, from which `receipt write` makes a real receipt.
//! No image is built: the whole fixture takes seconds.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::{json, Value};

use super::docker::{load_tiny_image, local_registry};
use super::xtask::{xtask, Run, Xtask};
use super::{checkout_file, checkout_path, checkout_text, scratch_root_with, sha256_hex, unique};

/// `publish --json` of `args` to `repository` in the local registry, to be run.
pub fn publish_command(repository: &str, args: &[&str]) -> Xtask {
    let mut command = xtask();
    command
        .arg("publish")
        .args([
            "--oci-registry",
            local_registry(),
            "--repository",
            repository,
            "--json",
        ])
        .args(args);
    command
}

/// `publish --json` of `args` to `repository` in the local registry.
pub fn publish(repository: &str, args: &[&str]) -> Run {
    publish_command(repository, args).run()
}

/// The `resolve --json` output that names the committed template's own top-level versions
/// (from `root`'s template/inventory.json), resolved at `now`.
pub fn resolve_json_of(root: &Path, now: &str) -> Value {
    let inventory: Value =
        serde_json::from_slice(&std::fs::read(root.join("template/inventory.json")).unwrap())
            .unwrap();
    let packages: Vec<Value> = inventory["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["top_level"] == true)
        .map(|p| {
            json!({
                "name": p["name"], "version": p["version"], "latest": p["version"],
                "published": "2026-11-20T10:00:00Z", "locked": p["version"],
                "rollback": false, "held_back": false, "notes": ["fixture"], "rejected": [],
            })
        })
        .collect();
    json!({
        "cutoff": inventory["cutoff"], "now": now, "registry": inventory["registry"],
        "cooldown_hours": 48, "inputs": inventory["inputs"], "packages": packages,
    })
}

/// The `build --json` output for a tiny image `tag` (engine id `id`) of `arch`.
pub fn build_json(arch: &str, tag: &str, id: &str, salt: &str, emulated: bool) -> Value {
    json!({
        "image": tag,
        "platform": format!("linux/{arch}"),
        "build_id": sha256_hex(format!("build {arch} {salt}").as_bytes()),
        "image_id": id,
        "built": true,
        "emulated": emulated,
        "size": 1234,
        "base_image": format!("coding-agent-base:{arch}"),
        "base_image_id": format!("sha256:{}", sha256_hex(arch.as_bytes())),
        "ca_bundle": null,
        "dry_run": false,
        "duration_secs": 1.0,
        "debian_packages": debian_packages(arch),
        "some_future_field": "ignored",
    })
}

/// The Debian packages a fixture build reports (as `build --json` reads them from dpkg):
/// the platforms share most, as real images do, and differ in one.
pub fn debian_packages(arch: &str) -> Vec<String> {
    let mut packages = vec![
        "base-files=12.4+deb12u13".to_string(),
        "libc6=2.36-9+deb12u13".to_string(),
        "tzdata=2025b-0+deb12u2".to_string(),
    ];
    if arch == "amd64" {
        packages.push("libquadmath0=12.2.0-14+deb12u1".to_string());
        packages.sort();
    }
    packages
}

pub struct Release {
    /// Scratch repository root (XTASK_ROOT) holding the template files.
    pub root: tempfile::TempDir,
    pub inputs: PathBuf,
    pub builds: Vec<(String, Value)>,
    pub publish: PathBuf,
}

/// Publishes two tiny images once and writes the JSON the other commands would print about
/// them; `receipt write` then assembles receipts from these files.
pub fn release() -> &'static Release {
    static RELEASE: OnceLock<Release> = OnceLock::new();
    RELEASE.get_or_init(|| {
        let root = scratch_root_with(&crate::support::TEMPLATE_FILES);
        // The receipt only hashes the Dockerfile; a fixture keeps this test independent of it.
        std::fs::write(
            root.path().join("Dockerfile"),
            "# fixture of tests/support/genuine_release.rs\nFROM scratch\n",
        )
        .unwrap();
        let inputs = root.path().join("inputs");
        std::fs::create_dir_all(&inputs).unwrap();

        let repository = unique("xtask-test/receipt").to_lowercase();
        let salt = unique("receipt");
        let mut builds = Vec::new();
        let mut images = Vec::new();
        for (arch, emulated) in [("amd64", false), ("arm64", true)] {
            let tag = format!("xtask-test-receipt:{arch}-{}", std::process::id());
            let id = load_tiny_image(&tag, arch, &format!("{arch} {salt}"));
            images.push("--image".to_string());
            images.push(format!("linux/{arch}={tag}"));
            builds.push((
                arch.to_string(),
                build_json(arch, &tag, &id, &salt, emulated),
            ));
        }
        let images: Vec<&str> = images.iter().map(String::as_str).collect();
        // In the scratch root: its push records and blob locations are the fixture's, not
        // the checkout's `.xtask/`.
        let out = publish_command(&repository, &[&images[..], &["--tag", TAG]].concat())
            .env("XTASK_ROOT", root.path())
            .run();
        out.assert_success();
        let publish = inputs.join("publish.json");
        std::fs::write(&publish, &out.stdout).unwrap();

        // The committed inventory, lockfile and package.json as they are: they agree with
        // each other, and `receipt verify --artifacts` checks that the receipt agrees with them.
        std::fs::write(
            inputs.join("resolve.json"),
            resolve_json_of(root.path(), "2026-11-30T06:17:00Z").to_string(),
        )
        .unwrap();
        for (arch, build) in &builds {
            std::fs::write(inputs.join(format!("build-{arch}.json")), build.to_string()).unwrap();
        }
        let gate = gate_json("2026-11-30T06:17:00Z", &[]);
        assert_eq!(gate["due"], true);
        std::fs::write(inputs.join("gate.json"), gate.to_string()).unwrap();
        Release {
            root,
            inputs,
            builds,
            publish,
        }
    })
}

/// The release tag of the genuine release: a form `cargo xtask release` makes.
pub const TAG: &str = "2026.11.30-0123456789ab";

/// The `smoke --json` output for `image` with every check the manifest requires of
/// `platform` (native or emulated), all passed but `failing`.
pub fn smoke(image: &str, platform: &str, emulated: bool, failing: Option<&str>) -> Value {
    let manifest =
        template_formats::manifest::Manifest::load(&checkout_path("template/manifest.yaml"))
            .unwrap();
    let checks: Vec<Value> = manifest
        .required_smoke_checks(platform.parse().unwrap(), emulated)
        .into_iter()
        .map(|name| {
            let passed = Some(name.as_str()) != failing;
            json!({"name": name, "passed": passed, "output": "ok", "duration_secs": 0.1})
        })
        .collect();
    json!({
        "image": image, "image_id": null, "platform": platform, "emulated": emulated,
        "passed": failing.is_none(), "checks": checks, "duration_secs": 1.0,
    })
}

/// `receipt write --json` of the published release into `out_dir`: the gate, resolve and
/// publish outputs, and for each build (in [`Release::builds`] order) its output, the smoke
/// output in `smoke_files` and a fixture SBOM.
pub fn receipt_write_command(out_dir: &Path, smoke_files: &[PathBuf]) -> Xtask {
    let r = release();
    assert_eq!(
        smoke_files.len(),
        r.builds.len(),
        "one smoke output a build"
    );
    let builds: Vec<(PathBuf, PathBuf, String)> = r
        .builds
        .iter()
        .zip(smoke_files)
        .map(|((arch, build), smoke_file)| {
            (
                r.inputs.join(format!("build-{arch}.json")),
                smoke_file.clone(),
                build["platform"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    receipt_write_for(out_dir, &builds, &r.publish)
}

/// `receipt write --json` into `out_dir` of the publish output `publish`, with the genuine
/// release's gate, resolve and template files, and for each `(build output, smoke output,
/// platform)` a fixture SBOM.
pub fn receipt_write_for(
    out_dir: &Path,
    builds: &[(PathBuf, PathBuf, String)],
    publish: &Path,
) -> Xtask {
    let r = release();
    let mut cmd = xtask();
    cmd.env("XTASK_ROOT", r.root.path())
        .args(["receipt", "write", "--json"])
        .arg("--gate")
        .arg(r.inputs.join("gate.json"))
        .arg("--resolve")
        .arg(r.inputs.join("resolve.json"))
        .arg("--publish")
        .arg(publish)
        .args(["--source-commit", &"ab12".repeat(10)])
        .args(["--now", "2026-11-30T06:30:00Z"])
        .arg("--out-dir")
        .arg(out_dir);
    let published: Value = serde_json::from_slice(&std::fs::read(publish).unwrap()).unwrap();
    for (build, smoke_file, platform) in builds {
        let build_output: Value = serde_json::from_slice(&std::fs::read(build).unwrap()).unwrap();
        let image_id = build_output["image_id"].as_str().unwrap();
        let name = Published::of_publish(&published, platform);
        let spdx = write_sbom(
            platform,
            image_id,
            &build_output["debian_packages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p.as_str().unwrap().to_string())
                .collect::<Vec<_>>(),
            &name,
        );
        cmd.arg("--build")
            .arg(build)
            .arg("--smoke")
            .arg(smoke_file)
            .arg("--sbom")
            .arg(spdx)
            .arg("--sbom")
            .arg(cyclonedx_path(platform, image_id, &name));
    }
    cmd
}

/// How a release names one platform's image, which its SBOMs carry (as `release build`
/// writes them after the push): the repository, the manifest digest, the release tag.
#[derive(Debug, Clone)]
pub struct Published {
    pub repository: String,
    pub digest: String,
    pub tag: String,
}

impl Published {
    /// From `publish --json --tag` output.
    pub fn of_publish(publish: &Value, platform: &str) -> Published {
        let pushed = publish["platforms"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["platform"] == platform)
            .unwrap();
        Published {
            repository: publish["index"]["repository"].as_str().unwrap().into(),
            digest: pushed["digest"].as_str().unwrap().into(),
            tag: publish["index"]["tag"].as_str().unwrap().into(),
        }
    }

    /// From a receipt and one of its platform records.
    pub fn of_record(receipt: &Value, platform: &Value) -> Published {
        Published {
            repository: receipt["index"]["repository"].as_str().unwrap().into(),
            digest: platform["digest"].as_str().unwrap().into(),
            tag: receipt["release_tag"].as_str().unwrap().into(),
        }
    }

    /// The `pkg:oci` purl `cargo xtask sbom --manifest-digest` gives the image.
    pub fn purl(&self, platform: &str) -> String {
        template_formats::sbom::image_purl(
            &template_formats::sbom::PublishedImage {
                repository: &self.repository,
                manifest_digest: &self.digest,
                tag: &self.tag,
            },
            platform.parse().unwrap(),
        )
    }
}

/// Runs `receipt write` for the published release, with the amd64 smoke check `failing`
/// failed when given. Returns (output, receipt path).
pub fn write_receipt(out_dir: &Path, failing: Option<&str>) -> (Run, Option<PathBuf>) {
    let r = release();
    std::fs::create_dir_all(out_dir).unwrap();
    let mut smoke_files = Vec::new();
    for (arch, build) in &r.builds {
        let image = build["image"].as_str().unwrap();
        let smoke_file = out_dir.join(format!("smoke-{arch}.json"));
        let failing = if arch == "amd64" { failing } else { None };
        let platform = build["platform"].as_str().unwrap();
        let emulated = build["emulated"] == true;
        std::fs::write(
            &smoke_file,
            smoke(image, platform, emulated, failing).to_string(),
        )
        .unwrap();
        smoke_files.push(smoke_file);
    }
    let out = receipt_write_command(out_dir, &smoke_files).run();
    let path = serde_json::from_slice::<Value>(&out.stdout)
        .ok()
        .and_then(|v| v["path"].as_str().map(PathBuf::from));
    (out, path)
}

/// Where the fixture SBOM of the `platform` image `image_id` published as `name` lies: one
/// folder an image and name, the file under its release asset name.
pub fn sbom_path(platform: &str, image_id: &str, name: &Published) -> PathBuf {
    let key = sha256_hex(
        format!(
            "{image_id} {} {} {}",
            name.repository, name.digest, name.tag
        )
        .as_bytes(),
    );
    // Under this test process's run directory, not the genuine release's inputs: a test
    // that only needs an SBOM (kill_points) then publishes no release, whose two images
    // would outlive the run.
    crate::support::run_dir()
        .join("fixture-sboms")
        .join(format!("sbom-of-{}", &key[..16]))
        .join(format!("sbom-{}.spdx.json", platform.replace('/', "-")))
}

/// Where the CycloneDX form of the fixture SBOM lies: beside the SPDX file, under its release
/// asset name.
pub fn cyclonedx_path(platform: &str, image_id: &str, name: &Published) -> PathBuf {
    sbom_path(platform, image_id, name)
        .with_file_name(format!("sbom-{}.cdx.json", platform.replace('/', "-")))
}

/// The fixture SBOM of one of `receipt`'s platform records.
pub fn sbom_of_record(receipt: &Value, platform: &Value) -> PathBuf {
    sbom_path(
        platform["platform"].as_str().unwrap(),
        platform["image_id"].as_str().unwrap(),
        &Published::of_record(receipt, platform),
    )
}

/// The CycloneDX form of the fixture SBOM of one of `receipt`'s platform records.
pub fn cyclonedx_of_record(receipt: &Value, platform: &Value) -> PathBuf {
    cyclonedx_path(
        platform["platform"].as_str().unwrap(),
        platform["image_id"].as_str().unwrap(),
        &Published::of_record(receipt, platform),
    )
}

/// `pkg:npm/%40scope/name@1.0.0`, as the purl specification spells an npm package.
fn npm_purl(name: &str, version: &str) -> String {
    format!("pkg:npm/{}@{version}", name.replace('@', "%40"))
}

/// The packages a package-lock.json installs on every platform (not dev, not a link, no
/// os/cpu/libc condition): those an SBOM of any platform must list.
fn common_npm_packages(lockfile: &[u8]) -> Vec<(String, String)> {
    let lock: Value = serde_json::from_slice(lockfile).unwrap();
    let mut out = Vec::new();
    for (path, entry) in lock["packages"].as_object().unwrap() {
        let conditional = ["os", "cpu", "libc"]
            .iter()
            .any(|k| entry.get(*k).is_some());
        if path.is_empty() || entry["dev"] == true || entry["link"] == true || conditional {
            continue;
        }
        let name = entry["name"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| path.rsplit("node_modules/").next().unwrap().to_string());
        out.push((name, entry["version"].as_str().unwrap().to_string()));
    }
    out
}

/// A minimal SPDX document of the `platform` image `image_id` listing `debian_packages`
/// (the tiny images have no dpkg database to make a real one from) and the npm packages the
/// lockfile installs everywhere, as `cargo xtask sbom` describes an image (xtask/src/image/
/// sbom.rs: the described root package carries the image id, each package a purl), and its
/// CycloneDX form beside it ([`cyclonedx_path`]), made from it as `sbom --cyclonedx` makes
/// it, so the genuine release carries both SBOM assets. Written once an image, atomically
/// (tests run in parallel and copy them); the same bytes each time.
pub fn write_sbom(
    platform: &str,
    image_id: &str,
    debian_packages: &[String],
    name: &Published,
) -> PathBuf {
    // The committed lockfile, which the release's scratch root is a copy of: an SBOM needs
    // no published release, and asking for one would load and publish two images (which
    // outlive the test process: the release is a static) for every test that writes one.
    let lockfile = checkout_file("template/package-lock.json");
    write_sbom_of_lock(platform, image_id, debian_packages, name, &lockfile)
}

/// [`write_sbom`] listing the npm packages of `lockfile` (a scratch checkout's own).
pub fn write_sbom_of_lock(
    platform: &str,
    image_id: &str,
    debian_packages: &[String],
    name: &Published,
    lockfile: &[u8],
) -> PathBuf {
    let slug = platform.replace('/', "-");
    let arch = platform.split('/').nth(1).unwrap();
    let path = sbom_path(platform, image_id, name);
    let hex = image_id.trim_start_matches("sha256:");
    let package = |id: &str, name: &str, version: &str, purl: Option<String>| {
        let mut p = json!({
            "name": name, "SPDXID": id, "versionInfo": version, "downloadLocation": "NOASSERTION",
            "filesAnalyzed": false, "licenseConcluded": "NOASSERTION",
            "licenseDeclared": "NOASSERTION", "copyrightText": "NOASSERTION",
        });
        if let Some(purl) = purl {
            p["externalRefs"] = json!([{"referenceCategory": "PACKAGE-MANAGER",
                "referenceType": "purl", "referenceLocator": purl}]);
        }
        p
    };
    // Named as consumers pull it, by the manifest digest and the release tag.
    let mut root = package(
        "SPDXRef-image",
        "coding-agent",
        "fixture",
        Some(name.purl(platform)),
    );
    root["primaryPackagePurpose"] = json!("CONTAINER");
    root["checksums"] = json!([{"algorithm": "SHA256", "checksumValue": hex}]);
    let mut packages = vec![root];
    for entry in debian_packages {
        let (name, version) = entry.split_once('=').unwrap();
        packages.push(package(
            &format!("SPDXRef-deb-{name}-{arch}"),
            name,
            version,
            Some(format!(
                "pkg:deb/debian/{name}@{}?arch={arch}&distro=debian-12",
                version.replace('+', "%2B")
            )),
        ));
    }
    for (i, (name, version)) in common_npm_packages(lockfile).iter().enumerate() {
        packages.push(package(
            &format!("SPDXRef-npm-{i}"),
            name,
            version,
            Some(npm_purl(name, version)),
        ));
    }
    // The image CONTAINS every package, as in the real document: the CycloneDX form lists
    // what the image contains as its components.
    let relationships: Vec<Value> = std::iter::once(json!({
        "spdxElementId": "SPDXRef-DOCUMENT", "relationshipType": "DESCRIBES",
        "relatedSpdxElement": "SPDXRef-image"}))
    .chain(packages[1..].iter().map(|p| {
        json!({"spdxElementId": "SPDXRef-image", "relationshipType": "CONTAINS",
            "relatedSpdxElement": p["SPDXID"]})
    }))
    .collect();
    let document = json!({
        "spdxVersion": "SPDX-2.3", "dataLicense": "CC0-1.0", "SPDXID": "SPDXRef-DOCUMENT",
        "name": format!("coding-agent-{slug}"),
        "documentNamespace": format!("https://spdx.org/spdxdocs/coding-agent-{slug}-{hex}"),
        "creationInfo": {"created": "2026-11-30T06:17:00Z", "creators": ["Tool: fixture"]},
        "packages": packages, "relationships": relationships,
    });
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let spdx = serde_json::to_vec_pretty(&document).unwrap();
    let cdx = xtask::image::sbom::cyclonedx_of_spdx_json(&spdx).unwrap();
    for (bytes, to) in [
        (&spdx, path.clone()),
        (&cdx, cyclonedx_path(platform, image_id, name)),
    ] {
        let temporary = to.with_extension(format!(
            "tmp-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::write(&temporary, bytes).unwrap();
        std::fs::rename(&temporary, &to).unwrap();
    }
    path
}

/// Copies each platform's SBOMs that `receipt` names (SPDX, and CycloneDX when recorded) into
/// `dir`, next to the artifacts, as a consumer downloads the release assets.
pub fn copy_sboms(receipt: &Value, dir: &Path) {
    for p in receipt["platforms"].as_array().unwrap() {
        let name = p["sbom"]["name"].as_str().unwrap();
        std::fs::copy(sbom_of_record(receipt, p), dir.join(name)).unwrap();
        if let Some(name) = p["cyclonedx"]["name"].as_str() {
            std::fs::copy(cyclonedx_of_record(receipt, p), dir.join(name)).unwrap();
        }
    }
}

pub fn gate_json(now: &str, extra: &[&str]) -> Value {
    let out = xtask()
        .args(["gate", "--json", "--now", now])
        .args(extra)
        .run();
    out.assert_success();
    out.json()
}

/// Writes `value` as a receipt whose file name carries its true digest (so the rejection
/// under test is not merely the name).
pub fn write_renamed(dir: &Path, tag: &str, value: &Value) -> PathBuf {
    let mut bytes = serde_json::to_vec_pretty(value).unwrap();
    bytes.push(b'\n');
    let path = dir.join(format!("receipt-{tag}-{}.json", sha256_hex(&bytes)));
    std::fs::write(&path, &bytes).unwrap();
    path
}

pub fn verify(path: &Path, artifacts: Option<&Path>) -> (bool, String, Value) {
    let mut cmd = xtask();
    cmd.args(["receipt", "verify", "--json"]).arg(path);
    if let Some(dir) = artifacts {
        cmd.arg("--artifacts").arg(dir);
    }
    let out = cmd.run();
    (out.success(), out.stderr_text(), out.json())
}

pub fn pin(receipt: &Path, template: &Path) -> Run {
    xtask()
        .args(["pin", "--json", "--receipt"])
        .arg(receipt)
        .arg("--template")
        .arg(template)
        .run()
}

/// A copy of the committed template definition in `dir` whose `image:` names `repository`
/// (unpinned), as a consumer's template does before the first pin of that repository.
pub fn template_for(dir: &Path, repository: &str) -> PathBuf {
    let text = checkout_text("template/sandbox0-template.yaml");
    let mut replaced = 0;
    let text: String = text
        .split_inclusive('\n')
        .map(|line| {
            if line.starts_with("image: ") {
                replaced += 1;
                format!("image: {repository}:unpinned\n")
            } else {
                line.to_string()
            }
        })
        .collect();
    assert_eq!(
        replaced, 1,
        "the committed template has one top-level image line"
    );
    let path = dir.join("sandbox0-template.yaml");
    std::fs::write(&path, text).unwrap();
    path
}
