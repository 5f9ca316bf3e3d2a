//! What a build is made of and named by, pure but for reading the checkout's files: the inputs
//! (the Dockerfile, the install plan, package.json, package-lock.json, the manifest and the
//! inventory's Node), the build arguments derived from them, the build id (a content hash of
//! every input that decides the image) and the tag it names, the labels, the extra CA bundle's
//! choice, and the build context: one list of files, so what the Dockerfile copies and what
//! the build id covers cannot drift apart.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::util::{sha256_hex, Progress};
use template_formats::manifest::{Manifest, Platform};
use template_formats::model::inventory::{Inventory, NodeRuntime};
use template_formats::model::package_json::PackageJson;
use template_formats::paths::{
    DOCKERFILE, INSTALL_PLAN, INVENTORY, MANIFEST, PACKAGE_JSON, PACKAGE_LOCK,
};

/// Name of the optional extra CA bundle inside the build context (see the Dockerfile).
pub const CONTEXT_CA_NAME: &str = "extra-ca.pem";
/// Repository of the built images; the tag is the build id.
pub(crate) const IMAGE_REPOSITORY: &str = "coding-agent";
/// Image label carrying the build id.
pub(crate) const BUILD_ID_LABEL: &str = "org.sandbox0.coding-agent.build-id";
/// Image label carrying the lockfile's sha256 (set in the Dockerfile).
pub(crate) const LOCKFILE_LABEL: &str = "org.sandbox0.coding-agent.lockfile.sha256";
/// The system trust store that is used as the extra CA bundle when nothing else is given.
pub(crate) const SYSTEM_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// The files a build reads, as bytes: the build id is computed over exactly these.
#[derive(Debug, Clone)]
pub struct BuildInputs {
    pub dockerfile: Vec<u8>,
    /// `template/install-plan.js`, which the Dockerfile copies into its install-plan stage.
    pub install_plan: Vec<u8>,
    pub package_json: Vec<u8>,
    pub package_lock: Vec<u8>,
    pub manifest_text: Vec<u8>,
    pub manifest: Manifest,
    /// The `node` section of the inventory: the Node and npm tarballs and their sha512.
    pub node: NodeRuntime,
}

impl BuildInputs {
    /// The build's inputs in the checkout `layout`.
    pub fn load(layout: &crate::layout::Layout) -> Result<BuildInputs> {
        let read = |path: PathBuf| {
            std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))
        };
        Ok(BuildInputs {
            dockerfile: read(layout.dockerfile())?,
            install_plan: read(layout.install_plan())?,
            package_json: read(layout.package_json())?,
            package_lock: read(layout.package_lock())?,
            manifest_text: read(layout.manifest())?,
            manifest: Manifest::load(&layout.manifest())?,
            node: Inventory::load(&layout.inventory())?.node,
        })
    }

    /// The files the Dockerfile COPYs from the build context, by their path in it: what the
    /// context holds besides the optional CA bundle, and what the build id covers besides the
    /// manifest. One list, so a file the Dockerfile starts to need cannot be sent without also
    /// naming the build.
    pub fn context_files(&self) -> [(&'static str, &[u8]); 4] {
        [
            (DOCKERFILE, &self.dockerfile),
            (INSTALL_PLAN, &self.install_plan),
            (PACKAGE_JSON, &self.package_json),
            (PACKAGE_LOCK, &self.package_lock),
        ]
    }
}

/// The exact version of every dependency pinned in template/package.json.
pub(crate) fn locked_versions(package_json: &[u8]) -> Result<BTreeMap<String, String>> {
    let parsed = PackageJson::parse(package_json, PACKAGE_JSON)?;
    parsed.exact_versions(PACKAGE_JSON)?;
    Ok(parsed.dependencies)
}

/// The build arguments of the Dockerfile for one platform, all derived from the manifest, the
/// inventory and the lock. `BASE_IMAGE` is added by the caller.
pub fn build_args(inputs: &BuildInputs, platform: Platform) -> Result<BTreeMap<String, String>> {
    let manifest = &inputs.manifest;
    let node = &inputs.node;
    if node.version != manifest.node.version.to_string() {
        bail!(
            "{INVENTORY} has Node {} but {MANIFEST} asks for {}; run `cargo xtask lock`",
            node.version,
            manifest.node.version
        );
    }
    if node.npm.version != manifest.node.npm_version.to_string() {
        bail!(
            "{INVENTORY} has npm {} but {MANIFEST} asks for {}; run `cargo xtask lock`",
            node.npm.version,
            manifest.node.npm_version
        );
    }
    let tarball = node.platforms.get(&platform).with_context(|| {
        format!("{INVENTORY} has no Node tarball for {platform}; run `cargo xtask lock`")
    })?;
    let versions = locked_versions(&inputs.package_json)?;
    let mut pinned = Vec::new();
    for package in &manifest.packages {
        let version = versions.get(&package.name).with_context(|| {
            format!(
                "{PACKAGE_JSON} does not pin {}, which {MANIFEST} lists; run `cargo xtask lock`",
                package.name
            )
        })?;
        pinned.push(format!("{}@{version}", package.name));
    }
    let commands: Vec<&str> = manifest
        .packages
        .iter()
        .filter_map(|p| p.command.as_deref())
        .collect();
    for value in [&tarball.sha512, &node.npm.sha512] {
        if value.len() != 128 || !value.bytes().all(|b| b.is_ascii_hexdigit()) {
            bail!("{INVENTORY} has a sha512 that is not 128 hex digits: `{value}`");
        }
    }
    Ok(BTreeMap::from([
        ("NODE_TARBALL_URL".into(), tarball.tarball.clone()),
        ("NODE_SHA512".into(), tarball.sha512.clone()),
        ("NPM_TARBALL_URL".into(), node.npm.tarball.clone()),
        ("NPM_SHA512".into(), node.npm.sha512.clone()),
        ("NODE_MINIMUM".into(), manifest.node.minimum.to_string()),
        ("NODE_MAJOR".into(), manifest.node.major.to_string()),
        ("NODE_VERSION".into(), node.version.clone()),
        ("AGENT_COMMANDS".into(), commands.join(" ")),
        (
            "INSTALL_SCRIPTS_ALLOWED".into(),
            manifest
                .install_scripts_allowed
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(" "),
        ),
        ("LOCKFILE_SHA256".into(), sha256_hex(&inputs.package_lock)),
        ("PACKAGE_VERSIONS".into(), pinned.join(" ")),
        (
            "SOURCE_DATE_EPOCH".into(),
            manifest.image.source_date_epoch.to_string(),
        ),
    ]))
}

/// The content hash that names a build. It covers every input that decides the image and
/// nothing else: not the base image's name (its id counts), not the CA bundle.
pub(crate) fn build_id(
    inputs: &BuildInputs,
    args: &BTreeMap<String, String>,
    base_image_id: &str,
    platform: Platform,
) -> String {
    // The version names the canonical form too: the same inputs made into other bytes (v2:
    // tar modes with permission bits only, entries repeated from the layers below left out)
    // must not find an engine's image of the old form under their tag.
    let mut text = String::from("coding-agent build id v2\n");
    let manifest: (&str, &[u8]) = (MANIFEST, &inputs.manifest_text);
    for (name, bytes) in inputs.context_files().into_iter().chain([manifest]) {
        text.push_str(&format!("file {name} sha256:{}\n", sha256_hex(bytes)));
    }
    for (name, value) in args {
        if name != "BASE_IMAGE" {
            text.push_str(&format!("arg {name}={value}\n"));
        }
    }
    text.push_str(&format!("base {base_image_id}\nplatform {platform}\n"));
    sha256_hex(text.as_bytes())
}

pub(crate) fn image_tag(build_id: &str) -> String {
    format!("{IMAGE_REPOSITORY}:{build_id}")
}

/// Which extra CA bundle goes into the build context: the flag (or XTASK_EXTRA_CA_BUNDLE),
/// else the file SSL_CERT_FILE names, else the system trust store when it exists. Hosts behind
/// a TLS-inspecting proxy carry the proxy's CA there; containers do not inherit it.
pub(crate) fn choose_ca_bundle(
    flag: Option<&Path>,
    ssl_cert_file: Option<&Path>,
    system_bundle_exists: bool,
) -> Option<PathBuf> {
    flag.or(ssl_cert_file)
        .map(Path::to_path_buf)
        .or_else(|| system_bundle_exists.then(|| PathBuf::from(SYSTEM_CA_BUNDLE)))
}

/// The CA bundle the host would use, following [`choose_ca_bundle`] with the settings'
/// `SSL_CERT_FILE`.
pub fn host_ca_bundle(
    flag: Option<&Path>,
    settings: &crate::settings::Settings,
) -> Option<PathBuf> {
    choose_ca_bundle(
        flag,
        settings.ssl_cert_file.as_deref(),
        Path::new(SYSTEM_CA_BUNDLE).exists(),
    )
}

/// Reads a PEM bundle and makes sure it holds at least one certificate.
pub(crate) fn read_ca_bundle(path: &Path) -> Result<Vec<u8>> {
    let bytes = std::fs::read(path)
        .with_context(|| format!("cannot read the CA bundle {}", path.display()))?;
    if !bytes
        .windows(b"-----BEGIN CERTIFICATE-----".len())
        .any(|w| w == b"-----BEGIN CERTIFICATE-----")
    {
        bail!(
            "{} holds no PEM certificate (-----BEGIN CERTIFICATE-----); pass a PEM bundle with --ca-bundle",
            path.display()
        );
    }
    Ok(bytes)
}

/// The build context: a tar with fixed metadata, so equal files give an equal context.
pub fn context_tar(files: &[(&str, &[u8])]) -> Result<Vec<u8>> {
    let mut tar = tar::Builder::new(Vec::new());
    for (name, bytes) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        header.set_cksum();
        tar.append_data(&mut header, name, *bytes)
            .with_context(|| format!("cannot add {name} to the build context"))?;
    }
    Ok(tar.into_inner()?)
}

/// The context tar: the Dockerfile, the install plan, the package files and, when there is one,
/// the CA bundle.
pub(crate) fn build_context(
    inputs: &BuildInputs,
    ca_bundle: Option<&Path>,
    progress: &Progress,
) -> Result<Vec<u8>> {
    let ca = match ca_bundle {
        Some(path) => {
            progress.step(format!(
                "extra CA bundle for the download steps: {}",
                path.display()
            ));
            Some(read_ca_bundle(path)?)
        }
        None => None,
    };
    let mut files: Vec<(&str, &[u8])> = inputs.context_files().to_vec();
    if let Some(ca) = &ca {
        files.push((CONTEXT_CA_NAME, ca));
    }
    context_tar(&files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs() -> BuildInputs {
        BuildInputs::load(&crate::layout::Layout::at(crate::util::repo_root()))
            .expect("the committed template files load")
    }

    #[test]
    fn build_args_come_from_manifest_inventory_and_lock() {
        let inputs = inputs();
        let args = build_args(&inputs, Platform::LinuxArm64).unwrap();
        let node = &inputs.node.platforms[&Platform::LinuxArm64];
        assert_eq!(args["NODE_TARBALL_URL"], node.tarball);
        assert_eq!(args["NODE_SHA512"], node.sha512);
        assert_eq!(args["NPM_SHA512"], inputs.node.npm.sha512);
        assert_eq!(
            args["NODE_MINIMUM"],
            inputs.manifest.node.minimum.to_string()
        );
        assert_eq!(args["LOCKFILE_SHA256"], sha256_hex(&inputs.package_lock));
        let commands: Vec<&str> = args["AGENT_COMMANDS"].split(' ').collect();
        let expected: Vec<&str> = inputs
            .manifest
            .packages
            .iter()
            .filter_map(|p| p.command.as_deref())
            .collect();
        assert_eq!(commands, expected);
        let versions = locked_versions(&inputs.package_json).unwrap();
        for p in &inputs.manifest.packages {
            let pin = format!("{}@{}", p.name, versions[&p.name]);
            assert!(
                args["PACKAGE_VERSIONS"].split(' ').any(|x| x == pin),
                "{pin}"
            );
        }
        let amd = build_args(&inputs, Platform::LinuxAmd64).unwrap();
        assert_ne!(amd["NODE_TARBALL_URL"], args["NODE_TARBALL_URL"]);
    }

    #[test]
    fn build_args_refuse_an_inventory_out_of_step() {
        let mut inputs = inputs();
        inputs.node.version = "22.1.0".into();
        let msg = format!(
            "{:#}",
            build_args(&inputs, Platform::LinuxAmd64).unwrap_err()
        );
        assert!(msg.contains("cargo xtask lock"), "{msg}");

        let mut inputs = self::inputs();
        inputs.node.platforms.remove(&Platform::LinuxArm64);
        let msg = format!(
            "{:#}",
            build_args(&inputs, Platform::LinuxArm64).unwrap_err()
        );
        assert!(msg.contains("linux/arm64"), "{msg}");
    }

    #[test]
    fn ranges_in_package_json_are_rejected() {
        let err = locked_versions(br#"{"dependencies":{"ws":"^8.0.0"}}"#).unwrap_err();
        assert!(format!("{err:#}").contains("ws"));
        let ok = locked_versions(br#"{"dependencies":{"ws":"8.23.0"}}"#).unwrap();
        assert_eq!(ok["ws"], "8.23.0");
    }

    #[test]
    fn build_id_follows_every_input_and_nothing_else() {
        let inputs = inputs();
        let platform = Platform::LinuxAmd64;
        let mut args = build_args(&inputs, platform).unwrap();
        args.insert(
            "BASE_IMAGE".into(),
            "coding-agent-base:bookworm-amd64".into(),
        );
        let id = build_id(&inputs, &args, "sha256:base1", platform);
        assert_eq!(id.len(), 64);
        assert_eq!(id, build_id(&inputs, &args, "sha256:base1", platform));

        // The base image's name does not count, its id does.
        let mut renamed = args.clone();
        renamed.insert("BASE_IMAGE".into(), "elsewhere/base:1".into());
        assert_eq!(id, build_id(&inputs, &renamed, "sha256:base1", platform));
        assert_ne!(id, build_id(&inputs, &args, "sha256:base2", platform));
        assert_ne!(
            id,
            build_id(&inputs, &args, "sha256:base1", Platform::LinuxArm64)
        );

        let mut changed = inputs.clone();
        changed.package_lock.push(b'\n');
        assert_ne!(id, build_id(&changed, &args, "sha256:base1", platform));
        let mut changed = inputs.clone();
        changed.dockerfile.extend_from_slice(b"# x\n");
        assert_ne!(id, build_id(&changed, &args, "sha256:base1", platform));
        let mut changed = inputs.clone();
        changed.install_plan.extend_from_slice(b"// x\n");
        assert_ne!(
            id,
            build_id(&changed, &args, "sha256:base1", platform),
            "a changed install plan must not reuse the image of the old one"
        );
        let mut changed = inputs.clone();
        changed.manifest_text.push(b'\n');
        assert_ne!(id, build_id(&changed, &args, "sha256:base1", platform));
        let mut changed = inputs.clone();
        changed.package_json.push(b'\n');
        assert_ne!(id, build_id(&changed, &args, "sha256:base1", platform));
        let mut other_args = args.clone();
        other_args.insert("NODE_SHA512".into(), "0".repeat(128));
        assert_ne!(id, build_id(&inputs, &other_args, "sha256:base1", platform));
        assert_eq!(image_tag(&id), format!("coding-agent:{id}"));
    }

    #[test]
    fn ca_bundle_choice_prefers_the_flag_then_ssl_cert_file_then_the_system() {
        let flag = Path::new("/x/flag.pem");
        let env = Path::new("/x/env.pem");
        assert_eq!(choose_ca_bundle(Some(flag), Some(env), true).unwrap(), flag);
        assert_eq!(choose_ca_bundle(None, Some(env), true).unwrap(), env);
        assert_eq!(
            choose_ca_bundle(None, None, true).unwrap(),
            Path::new(SYSTEM_CA_BUNDLE)
        );
        assert_eq!(choose_ca_bundle(None, None, false), None);
    }

    #[test]
    fn a_bundle_without_certificates_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty.pem");
        std::fs::write(&path, "not a certificate").unwrap();
        let msg = format!("{:#}", read_ca_bundle(&path).unwrap_err());
        assert!(msg.contains("empty.pem"), "{msg}");
    }

    #[test]
    fn context_is_deterministic_and_holds_only_the_given_files() {
        let a = context_tar(&[
            ("Dockerfile", b"FROM x\n"),
            ("template/package.json", b"{}"),
        ])
        .unwrap();
        let b = context_tar(&[
            ("Dockerfile", b"FROM x\n"),
            ("template/package.json", b"{}"),
        ])
        .unwrap();
        assert_eq!(a, b);
        let mut archive = tar::Archive::new(a.as_slice());
        let names: Vec<String> = archive
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["Dockerfile", "template/package.json"]);
    }

    /// The sources of the Dockerfile's `COPY` steps from the build context (not `--from` a
    /// stage), globs left out: the optional CA bundle is the one glob, and it is optional.
    fn context_copies(dockerfile: &str) -> Vec<&str> {
        dockerfile
            .lines()
            .filter_map(|line| line.strip_prefix("COPY "))
            .filter(|rest| !rest.trim_start().starts_with("--from="))
            .flat_map(|rest| {
                let words: Vec<&str> = rest.split_whitespace().collect();
                words[..words.len() - 1].to_vec()
            })
            .filter(|source| !source.contains('*'))
            .collect()
    }

    /// A file the Dockerfile copies from the context but the build does not send fails the
    /// engine's build only after minutes of earlier stages; and one the build id does not cover
    /// would let a changed file reuse the image of the old one. Both come from
    /// `context_files`, so checking that list checks both.
    #[test]
    fn the_context_and_the_build_id_hold_every_file_the_dockerfile_copies() {
        let inputs = inputs();
        let dockerfile = String::from_utf8(inputs.dockerfile.clone()).unwrap();
        let copies = context_copies(&dockerfile);
        assert!(copies.contains(&INSTALL_PLAN), "{copies:?}");
        let sent: Vec<&str> = inputs.context_files().iter().map(|(n, _)| *n).collect();
        for source in copies {
            assert!(
                sent.contains(&source),
                "the Dockerfile copies {source} from the build context, but \
                 BuildInputs::context_files does not send it: add it there"
            );
        }
        let context = build_context(&inputs, None, &Progress::default()).unwrap();
        let names: Vec<String> = tar::Archive::new(context.as_slice())
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, sent);
    }

    #[test]
    fn committed_dockerfile_declares_every_build_argument() {
        let inputs = inputs();
        let dockerfile = String::from_utf8(inputs.dockerfile.clone()).unwrap();
        let mut args = build_args(&inputs, Platform::LinuxAmd64).unwrap();
        args.insert("BASE_IMAGE".into(), String::new());
        for name in args.keys() {
            assert!(
                dockerfile
                    .lines()
                    .any(|l| l.trim() == format!("ARG {name}")),
                "the Dockerfile does not declare ARG {name}"
            );
        }
    }
}
