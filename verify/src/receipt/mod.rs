//! Release receipts: what a release contains, how it was decided, and proof it was tested.
//!
//! A receipt is one JSON document, `schema_version: 2`, described by the published schema
//! `schemas/receipt.v2.schema.json`. `cargo xtask receipt write` assembles it from the JSON
//! outputs of the other commands (resolve, gate, build, smoke, publish) plus the committed
//! template files; `cargo xtask receipt verify` is what consumers run before trusting one.
//!
//! The file name carries the receipt's own digest: `receipt-<tag>-<hex>.json`, where `<hex>` is
//! the sha256 of the file's bytes exactly as written (the receipt is written once and never
//! re-serialised, so there is no canonical form to agree on: the bytes are the receipt). The
//! digest catches truncation and accidental edits; authenticity comes from where the file was
//! fetched (the immutable GitHub release and its attestation), not from the digest.
//!
//! Besides format checks, verification recomputes the multi-arch index digest from the
//! per-platform records (the index bytes are canonical, see
//! [`template_formats::oci::index::index_bytes_of`]), so a receipt must hold together. Someone who
//! edits a receipt can still make it hold together and rename it; what catches that is in
//! `policy.rs` (the manifest the receipt is judged by, the tool's own forms, the clock, the
//! artifact files), `contents.rs` (what the artifact files are) and `registry.rs` (the
//! registry, `--check-registry`), and, for what no one else records, the attestation.
//!
//! The files: this one the receipt's bytes, file name and recorded artifacts (the layer the
//! others build on), `verify.rs` judges a receipt's bytes and is `receipt verify`, `schema.rs`
//! enforces the published JSON Schema, the others as above; the xtask's
//! `release/receipt_write.rs` assembles and writes receipts. The receipt type itself is
//! [`template_formats::model::receipt::Receipt`].

pub mod artifacts;
pub mod contents;
pub mod inputs;
pub mod policy;
pub mod registry;
pub mod schema;
pub mod verify;

use serde::Serialize;

use template_formats::model::receipt::Receipt;
use template_formats::paths;

/// The receipt format this tool writes and reads.
pub const SCHEMA_VERSION: u32 = 2;

/// The release's input files whose sha256 the receipt records: (asset name, repository path).
/// The asset name is the file's name among the release assets and under `--artifacts DIR`.
/// `receipt write` records every one; the install plan came last (see [`INSTALL_PLAN_ARTIFACT`]),
/// so the others keep their places (`artifacts[4]` is still the manifest).
pub const ARTIFACTS: [(&str, &str); 6] = [
    ("package.json", paths::PACKAGE_JSON),
    ("package-lock.json", paths::PACKAGE_LOCK),
    ("inventory.json", paths::INVENTORY),
    ("Dockerfile", paths::DOCKERFILE),
    (MANIFEST_ASSET, paths::MANIFEST),
    (INSTALL_PLAN_ARTIFACT, paths::INSTALL_PLAN),
];

/// The release asset that carries a release's manifest: what a receipt is judged by when it
/// is the release's own (`policy::ReceiptPolicy`).
pub const MANIFEST_ASSET: &str = "manifest.yaml";

/// The asset name of the install plan, the program the Dockerfile's install-plan stage copies
/// and runs to split the lock into the image's install groups: it decides the image as the
/// Dockerfile does, so the receipt records it. Receipts of releases whose Dockerfile held the
/// program inline, before it was a file of its own, record none; they are still
/// version 2 and still verify. So a receipt without it is judged by the five it always had, and
/// `--artifacts` refuses one only when its Dockerfile does copy the install plan
/// ([`dockerfile_copies_install_plan`]): that release depends on a file its receipt does not
/// vouch for.
pub const INSTALL_PLAN_ARTIFACT: &str = "install-plan.js";

/// Whether every version-2 receipt records the artifact `name` (all but the install plan, which
/// receipts of earlier releases lack).
pub fn always_recorded(name: &str) -> bool {
    name != INSTALL_PLAN_ARTIFACT
}

/// Whether a Dockerfile's text copies the install plan from the build context: then the image
/// it describes depends on that file.
pub fn dockerfile_copies_install_plan(dockerfile: &str) -> bool {
    dockerfile.lines().any(|line| {
        let mut words = line.split_whitespace();
        words.next().is_some_and(|w| w.eq_ignore_ascii_case("COPY"))
            && words.any(|w| w == paths::INSTALL_PLAN)
    })
}

/// The bytes of a receipt file: pretty JSON and a final newline. Hashed as they are.
/// The release asset that lists every package for people (`template/INVENTORY.md`): made from
/// inventory.json, which the receipt hashes, so the receipt does not name it.
pub const INVENTORY_MD_ASSET: &str = "INVENTORY.md";

pub fn receipt_bytes(receipt: &Receipt) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(receipt).expect("a receipt always serialises");
    bytes.push(b'\n');
    bytes
}

/// `receipt-<tag>-<sha256 hex of the file's bytes>.json`.
pub fn receipt_file_name(tag: &str, sha256_hex: &str) -> String {
    format!("receipt-{tag}-{sha256_hex}.json")
}

/// Splits a receipt file name into (tag, digest hex).
pub fn parse_receipt_file_name(name: &str) -> Option<(&str, &str)> {
    let stem = name.strip_prefix("receipt-")?.strip_suffix(".json")?;
    let (tag, hex) = stem.rsplit_once('-')?;
    (!tag.is_empty()).then_some((tag, hex))
}

/// One reason a receipt is rejected, naming the field it is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub field: String,
    pub problem: String,
}

pub fn problem(field: impl Into<String>, text: impl Into<String>) -> Problem {
    Problem {
        field: field.into(),
        problem: text.into(),
    }
}

/// A genuine-looking receipt for unit tests here and in the modules that judge receipts.
#[cfg(any(test, feature = "test-support"))]
pub mod tests_support {
    use super::*;
    use template_formats::manifest::{Manifest, Platform};

    /// The checkout these tests run in (the workspace root, above this crate).
    pub fn repo_root() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("the crate lives one level below the workspace root")
            .to_path_buf()
    }
    use template_formats::hash::sha256_hex;
    use template_formats::model::gate::Trigger;
    use template_formats::model::publish::IndexEntry;
    use template_formats::model::receipt::*;
    use template_formats::oci::index::index_bytes_of;

    /// The inventory.json a release of receipt `r` carries: its Node tarballs, cutoff and
    /// registry, its inputs' status and keys, and a top-level row per package with its registry
    /// key and install scripts.
    pub fn inventory_of(r: &Receipt) -> serde_json::Value {
        let tarball = |t: &TarballRecord| {
            serde_json::json!({
                "package": t.package, "version": t.version, "integrity": t.integrity,
                "tarball": format!("{}{}.tgz", r.resolver.registry, t.package), "sha512": "00",
            })
        };
        let inputs = r.inputs.as_ref();
        let packages: Vec<serde_json::Value> = r
            .packages
            .iter()
            .map(|p| {
                let record = inputs.and_then(|i| i.packages.iter().find(|q| q.name == p.name));
                let mut row = serde_json::json!({
                    "name": p.name, "version": p.version, "path": format!("node_modules/{}", p.name),
                    "top_level": true, "integrity": p.integrity, "resolved": "", "install_script": false,
                    "prerelease": false, "license": { "kind": "undeclared" },
                });
                if let Some(key) = record.and_then(|q| q.signed_by.as_ref()) {
                    row["signed_by"] = key.as_str().into();
                }
                if let Some(scripts) = record.and_then(|q| q.install_scripts.as_ref()) {
                    row["install_scripts"] = serde_json::to_value(scripts).unwrap();
                }
                row
            })
            .collect();
        let mut inventory = serde_json::json!({
            "schema_version": 4,
            "resolved_at": r.resolver.cutoff,
            "cutoff": r.resolver.cutoff,
            "registry": r.resolver.registry,
            "inputs": inputs.map_or(InputStatus::Unverified, |i| i.status),
            "node": {
                "version": r.node.version,
                "npm": tarball(&r.node.npm),
                "platforms": r.node.platforms.iter()
                    .map(|(p, t)| (p.to_string(), tarball(t)))
                    .collect::<serde_json::Map<_, _>>(),
            },
            "packages": packages,
            "summary": template_formats::model::inventory::Summary::default(),
        });
        if let Some(keys) = inputs.and_then(|i| i.keys.as_ref()) {
            inventory["keys"] = keys.as_str().into();
        }
        inventory
    }

    pub fn manifest() -> Manifest {
        Manifest::load(&repo_root().join(paths::MANIFEST)).unwrap()
    }

    pub fn digest(seed: &str) -> String {
        format!("sha256:{}", sha256_hex(seed.as_bytes()))
    }

    /// A complete receipt whose index digest really is the index of its platforms.
    pub const SAMPLE_TAG: &str = "2026.11.30-0123456789ab";

    /// The time at which the sample is verified: an hour after it was written.
    pub fn sample_now() -> chrono::DateTime<chrono::Utc> {
        "2026-11-30T07:30:00Z".parse().unwrap()
    }

    pub fn sample() -> Receipt {
        let platforms: Vec<PlatformRecord> = Platform::ALL
            .iter()
            .map(|&platform| PlatformRecord {
                platform,
                os: "linux".into(),
                architecture: platform.arch().into(),
                variant: None,
                build: BuildMode::Native,
                build_id: "b".repeat(64),
                local_image: format!("coding-agent:{}", platform.arch()),
                image_id: digest(&format!("config {platform}")),
                base_image: BaseImageRecord {
                    reference: "base".into(),
                    digest: digest("base"),
                },
                digest: digest(&format!("manifest {platform}")),
                media_type: template_formats::oci::index::OCI_MANIFEST.into(),
                manifest_size: 700,
                config_digest: digest(&format!("config {platform}")),
                image_size: 10,
                pushed_size: 5,
                debian_packages: vec!["libc6=2.36-9+deb12u13".into()],
                sbom: SbomRecord {
                    name: template_formats::sbom::sbom_file_name(platform),
                    sha256: sha256_hex(format!("sbom {platform}").as_bytes()),
                },
                cyclonedx: Some(SbomRecord {
                    name: template_formats::sbom::cyclonedx_file_name(platform),
                    sha256: sha256_hex(format!("cyclonedx {platform}").as_bytes()),
                }),
                smoke: SmokeRecord {
                    passed: true,
                    checks: manifest()
                        .required_smoke_checks(platform, false)
                        .into_iter()
                        .map(|name| SmokeCheck {
                            name,
                            passed: true,
                            output: "ok".into(),
                            duration_secs: None,
                        })
                        .collect(),
                },
                layers: None,
                transcripts: None,
                harnesses: None,
            })
            .collect();
        let entries: Vec<IndexEntry> = platforms.iter().map(IndexEntry::from).collect();
        let index = index_bytes_of(&entries).unwrap();
        let index_digest = format!("sha256:{}", sha256_hex(&index));
        let manifest = manifest();
        let tarball = |package: &str| TarballRecord {
            package: package.into(),
            version: "22.23.5".into(),
            integrity: "sha512-AAAA".into(),
        };
        Receipt {
            schema_version: SCHEMA_VERSION,
            release_tag: SAMPLE_TAG.into(),
            created_at: "2026-11-30T06:30:00Z".into(),
            source_commit: "ab".repeat(20),
            trigger: Trigger::Scheduled,
            gate: GateRecord {
                due: true,
                forced: false,
                catch_up: false,
                epoch_day: 20_787,
                next_due: "2026-12-03".into(),
                reason: "cadence".into(),
            },
            resolver: ResolverRecord {
                cutoff: "2026-11-28T06:30:00Z".into(),
                registry: "https://registry.npmjs.org/".into(),
            },
            inputs: Some(InputsRecord {
                status: InputStatus::Unverified,
                registry: "https://registry.npmjs.org/".into(),
                keys: None,
                packages: manifest
                    .packages
                    .iter()
                    .map(|p| PackageInputsRecord {
                        name: p.name.clone(),
                        version: "8.23.0".into(),
                        signed_by: None,
                        install_scripts: manifest.install_scripts_allowed.get(&p.name).cloned(),
                    })
                    .collect(),
            }),
            node: NodeRecord {
                version: "22.23.5".into(),
                npm: TarballRecord {
                    package: "npm".into(),
                    version: "10.9.9".into(),
                    integrity: "sha512-CCCC".into(),
                },
                platforms: manifest
                    .node
                    .packages
                    .iter()
                    .map(|(platform, package)| (*platform, tarball(package)))
                    .collect(),
            },
            packages: manifest
                .packages
                .iter()
                .map(|p| PackageRecord {
                    name: p.name.clone(),
                    version: "8.23.0".into(),
                    integrity: "sha512-BBBB==".into(),
                    latest: "8.23.0".into(),
                    published: None,
                    previously_locked: Some("8.22.0".into()),
                    rollback: false,
                    held_back: false,
                    notes: vec![],
                    repository: None,
                    rejected: vec![],
                })
                .collect(),
            dependencies: vec![],
            artifacts: ARTIFACTS
                .iter()
                .map(|(name, path)| ArtifactRecord {
                    name: name.to_string(),
                    path: path.to_string(),
                    sha256: sha256_hex(name.as_bytes()),
                })
                .collect(),
            verifiers: vec![],
            required_platforms: Platform::ALL.to_vec(),
            platforms,
            index: IndexRecord {
                tag: SAMPLE_TAG.into(),
                reference: format!("127.0.0.1:5000/s0/ca@{index_digest}"),
                digest: index_digest,
                media_type: template_formats::oci::index::OCI_INDEX.into(),
                size: index.len() as u64,
                repository: "127.0.0.1:5000/s0/ca".into(),
            },
            complete: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_round_trip_with_dashes_in_the_tag() {
        let hex = "a".repeat(64);
        let name = receipt_file_name("2026-11-30-abc1234", &hex);
        assert_eq!(
            parse_receipt_file_name(&name),
            Some(("2026-11-30-abc1234", hex.as_str()))
        );
        assert_eq!(parse_receipt_file_name("receipt.json"), None);
        assert_eq!(parse_receipt_file_name("receipt--x.json"), None);
    }
}
