//! Adversarial receipts: each case derives a tampered receipt from a genuine one (published
//! to a real local registry from tiny images, see `support/genuine_release.rs`), renames it to
//! its new sha256 so the self-digest passes, and asserts that `receipt verify --check-registry`
//! and `pin` both refuse it, that the template definition is byte-identical afterwards, and
//! that the refusal names the field (or, for files that cannot be read, says why).
//!
//! The categories: no trust anchor (registry and repository),
//! completeness, the image reference grammar, metadata against the artifacts, duplicate keys,
//! raw terminal output, unbounded reading, and loose fields.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::docker::light_docker;
use crate::support::genuine_release::{self, *};
use crate::support::registry::{Registry, OCI_INDEX};
use crate::support::sha256_hex;
use crate::support::xtask::{xtask, Run, Xtask};

/// A hang is a failure: every command must answer well within this.
const COMMAND_LIMIT: Duration = Duration::from_secs(60);

/// Runs `cmd`, killing it and failing the test if it does not finish in [`COMMAND_LIMIT`].
fn run_bounded(cmd: &mut Xtask) -> Run {
    cmd.time_limit(COMMAND_LIMIT).run()
}

/// What one tampering produces: a receipt file, and maybe a different artifacts directory.
struct Tampered {
    receipt: PathBuf,
    artifacts: Option<PathBuf>,
}

type Edit = Box<dyn Fn(&mut Value)>;
type MakeFile = Box<dyn Fn(&Path, &str) -> PathBuf>;
type EditBoth = Box<dyn Fn(&Path, &mut Value)>;

enum Make {
    /// Edit the genuine receipt's JSON; written pretty and renamed to its sha256.
    Json(Edit),
    /// Edit the genuine receipt's JSON, then recompute the index digest, size and reference
    /// and the file name, so the receipt holds together offline.
    Consistent(Edit),
    /// Edit the genuine receipt's bytes as text; renamed to its sha256.
    Text(Box<dyn Fn(&str) -> String>),
    /// Make a special receipt file in the given directory.
    File(MakeFile),
    /// The genuine receipt with the artifacts directory changed by this function.
    Artifacts(Box<dyn Fn(&Path)>),
    /// The artifacts directory and the receipt's JSON changed together (a file replaced and
    /// its sha256 updated in the receipt; maybe an index published to match); the receipt is
    /// written pretty and renamed to its sha256.
    Both(EditBoth),
}

struct Case {
    name: &'static str,
    make: Make,
    /// What `receipt verify`'s stderr (and its JSON problems, when it got as far as the
    /// receipt) must name.
    verify_names: &'static str,
    /// What `pin`'s stderr must name (defaults to `verify_names`).
    pin_names: Option<&'static str>,
    /// What else `receipt verify`'s stderr must say, where the field alone would also match
    /// another problem (`platforms` names many).
    verify_says: Option<&'static str>,
}

fn case(name: &'static str, verify_names: &'static str, make: Make) -> Case {
    Case {
        name,
        make,
        verify_names,
        pin_names: None,
        verify_says: None,
    }
}

fn json_edit(f: impl Fn(&mut Value) + 'static) -> Make {
    Make::Json(Box::new(f))
}

fn consistent(f: impl Fn(&mut Value) + 'static) -> Make {
    Make::Consistent(Box::new(f))
}

fn both(f: impl Fn(&Path, &mut Value) + 'static) -> Make {
    Make::Both(Box::new(f))
}

/// Edits platform `i`'s SBOM in the artifacts `dir` and records its new sha256 in `v`, so the
/// file matches its hash and only its content can be wrong.
fn edit_sbom(dir: &Path, v: &mut Value, i: usize, edit: impl Fn(&mut Value)) {
    let path = dir.join(v["platforms"][i]["sbom"]["name"].as_str().unwrap());
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edit(&mut doc);
    replace_sbom(dir, v, i, &serde_json::to_vec_pretty(&doc).unwrap());
}

/// Puts `bytes` as platform `i`'s SBOM and records their sha256 in `v`.
fn replace_sbom(dir: &Path, v: &mut Value, i: usize, bytes: &[u8]) {
    let path = dir.join(v["platforms"][i]["sbom"]["name"].as_str().unwrap());
    std::fs::write(&path, bytes).unwrap();
    v["platforms"][i]["sbom"]["sha256"] = json!(sha256_hex(bytes));
}

/// Edits platform `i`'s CycloneDX SBOM in the artifacts `dir` and records its new sha256 in
/// `v`, so the file matches its hash and only its content can be wrong.
fn edit_cdx(dir: &Path, v: &mut Value, i: usize, edit: impl Fn(&mut Value)) {
    let path = dir.join(v["platforms"][i]["cyclonedx"]["name"].as_str().unwrap());
    let mut bom: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edit(&mut bom);
    replace_cdx(dir, v, i, &serde_json::to_vec_pretty(&bom).unwrap());
}

/// Puts `bytes` as platform `i`'s CycloneDX SBOM and records their sha256 in `v`.
fn replace_cdx(dir: &Path, v: &mut Value, i: usize, bytes: &[u8]) {
    let path = dir.join(v["platforms"][i]["cyclonedx"]["name"].as_str().unwrap());
    std::fs::write(&path, bytes).unwrap();
    v["platforms"][i]["cyclonedx"]["sha256"] = json!(sha256_hex(bytes));
}

/// Makes every platform's SBOMs (SPDX and CycloneDX) name the image as `v` now records it
/// (manifest digest, release tag), so a consistent lie reaches the registry check, which runs
/// only after every offline check passed.
fn match_sboms(dir: &Path, v: &mut Value) {
    for i in 0..v["platforms"].as_array().unwrap().len() {
        let p = v["platforms"][i].clone();
        let packages: Vec<String> = p["debian_packages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e.as_str().unwrap().to_string())
            .collect();
        let made = genuine_release::write_sbom(
            p["platform"].as_str().unwrap(),
            p["image_id"].as_str().unwrap(),
            &packages,
            &Published::of_record(v, &p),
        );
        replace_sbom(dir, v, i, &std::fs::read(made).unwrap());
        let cdx = genuine_release::cyclonedx_of_record(v, &p);
        replace_cdx(dir, v, i, &std::fs::read(cdx).unwrap());
    }
}

/// Makes platform `i`'s SBOMs (SPDX and CycloneDX, each the other's form) name the image as
/// `rename` changes the receipt's name for it: a consistent pair only the receipt contradicts.
fn rename_in_sboms(dir: &Path, v: &mut Value, i: usize, rename: impl Fn(&mut Published)) {
    let p = v["platforms"][i].clone();
    let packages: Vec<String> = p["debian_packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap().to_string())
        .collect();
    let mut name = Published::of_record(v, &p);
    rename(&mut name);
    let made = genuine_release::write_sbom(
        p["platform"].as_str().unwrap(),
        p["image_id"].as_str().unwrap(),
        &packages,
        &name,
    );
    replace_sbom(dir, v, i, &std::fs::read(&made).unwrap());
    let cdx = made.with_file_name(p["cyclonedx"]["name"].as_str().unwrap());
    replace_cdx(dir, v, i, &std::fs::read(cdx).unwrap());
}

/// The CycloneDX SBOM's components whose purl starts with `prefix`.
fn cdx_components<'a>(bom: &'a mut Value, prefix: &'a str) -> impl Iterator<Item = &'a mut Value> {
    bom["components"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .filter(move |c| c["purl"].as_str().is_some_and(|l| l.starts_with(prefix)))
}

/// The SBOM's packages whose purl starts with `prefix`.
fn sbom_packages<'a>(doc: &'a mut Value, prefix: &'a str) -> impl Iterator<Item = &'a mut Value> {
    doc["packages"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .filter(move |p| {
            p["externalRefs"][0]["referenceLocator"]
                .as_str()
                .is_some_and(|l| l.starts_with(prefix))
        })
}

/// Lists `bytes` as the linux/amd64 verifier binary: in the folder and in the receipt.
fn add_verifier(dir: &Path, v: &mut Value, bytes: &[u8]) {
    std::fs::write(dir.join("template-verify-linux-amd64"), bytes).unwrap();
    v["verifiers"] = json!([{
        "platform": "linux/amd64",
        "name": "template-verify-linux-amd64",
        "sha256": sha256_hex(bytes),
    }]);
}

/// A little-endian ELF64 executable header for `machine` (62 x86-64, 183 AArch64) with one
/// program header of type `ph_type` (1 PT_LOAD; 3 PT_INTERP: dynamically linked), as the ELF
/// specification lays them out (System V gABI, "ELF Header" and "Program Header").
fn elf(machine: u16, ph_type: u32) -> Vec<u8> {
    let mut b = vec![0u8; 64 + 56];
    b[..4].copy_from_slice(b"\x7fELF");
    b[4] = 2; // ELFCLASS64
    b[5] = 1; // ELFDATA2LSB
    b[6] = 1; // EV_CURRENT
    b[16..18].copy_from_slice(&2u16.to_le_bytes()); // ET_EXEC
    b[18..20].copy_from_slice(&machine.to_le_bytes());
    b[20..24].copy_from_slice(&1u32.to_le_bytes());
    b[32..40].copy_from_slice(&64u64.to_le_bytes()); // e_phoff
    b[52..54].copy_from_slice(&64u16.to_le_bytes()); // e_ehsize
    b[54..56].copy_from_slice(&56u16.to_le_bytes()); // e_phentsize
    b[56..58].copy_from_slice(&1u16.to_le_bytes()); // e_phnum
    b[64..68].copy_from_slice(&ph_type.to_le_bytes());
    b
}

/// Publishes the canonical index of `v`'s platform records under `v`'s release tag in the
/// local registry (after [`recompute_index`]), so a consistent lie reaches the configs.
fn publish_index(path: &str, v: &Value) {
    let entries: Vec<template_formats::model::publish::IndexEntry> = v["platforms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| template_formats::model::publish::IndexEntry {
            platform: p["platform"].as_str().unwrap().parse().unwrap(),
            os: p["os"].as_str().unwrap().into(),
            architecture: p["architecture"].as_str().unwrap().into(),
            variant: p["variant"].as_str().map(Into::into),
            digest: p["digest"].as_str().unwrap().into(),
            media_type: p["media_type"].as_str().unwrap().into(),
            size: p["manifest_size"].as_u64().unwrap(),
        })
        .collect();
    Registry::local().put_manifest(
        path,
        v["release_tag"].as_str().unwrap(),
        OCI_INDEX,
        xtask::release::publish::index_bytes(&entries).unwrap(),
    );
}

fn set_tag(v: &mut Value, tag: &str) {
    v["release_tag"] = json!(tag);
    v["index"]["tag"] = json!(tag);
}

fn bytes_of(value: &Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(value).unwrap();
    bytes.push(b'\n');
    bytes
}

fn write_named(dir: &Path, tag: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(format!("receipt-{tag}-{}.json", sha256_hex(bytes)));
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Recomputes what depends on the platform records: the canonical index, its digest and
/// size, and the reference.
fn recompute_index(v: &mut Value) {
    let entries: Vec<template_formats::model::publish::IndexEntry> = v["platforms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| template_formats::model::publish::IndexEntry {
            platform: p["platform"].as_str().unwrap().parse().unwrap(),
            os: p["os"].as_str().unwrap().into(),
            architecture: p["architecture"].as_str().unwrap().into(),
            variant: p["variant"].as_str().map(Into::into),
            digest: p["digest"].as_str().unwrap().into(),
            media_type: p["media_type"].as_str().unwrap().into(),
            size: p["manifest_size"].as_u64().unwrap(),
        })
        .collect();
    let index = xtask::release::publish::index_bytes(&entries).unwrap();
    let digest = format!("sha256:{}", sha256_hex(&index));
    v["index"]["digest"] = json!(digest);
    v["index"]["size"] = json!(index.len());
    v["index"]["reference"] = json!(format!(
        "{}@{digest}",
        v["index"]["repository"].as_str().unwrap()
    ));
}

/// Sets the repository and the matching reference.
fn move_to(v: &mut Value, repository: &str) {
    v["index"]["repository"] = json!(repository);
    v["index"]["reference"] = json!(format!(
        "{repository}@{}",
        v["index"]["digest"].as_str().unwrap()
    ));
}

fn remove_checks(v: &mut Value, platform: usize, drop: impl Fn(&str) -> bool) {
    v["platforms"][platform]["smoke"]["checks"]
        .as_array_mut()
        .unwrap()
        .retain(|c| !drop(c["name"].as_str().unwrap()));
}

fn other_digest(seed: &str) -> String {
    format!("sha256:{}", sha256_hex(seed.as_bytes()))
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success());
}

fn cases(genuine: &Value) -> Vec<Case> {
    let repository = genuine["index"]["repository"].as_str().unwrap().to_string();
    let (host, path) = repository.split_once('/').unwrap();
    let (host, path) = (host.to_string(), path.to_string());
    let index_digest = genuine["index"]["digest"].as_str().unwrap().to_string();

    // A tag in the registry that points at another index: one of the genuine amd64 manifest
    // alone.
    let elsewhere_tag = "2026.11.30-eeeeeeeeeeee";
    {
        let p = &genuine["platforms"][0];
        let entry = template_formats::model::publish::IndexEntry {
            platform: p["platform"].as_str().unwrap().parse().unwrap(),
            os: p["os"].as_str().unwrap().into(),
            architecture: p["architecture"].as_str().unwrap().into(),
            variant: None,
            digest: p["digest"].as_str().unwrap().into(),
            media_type: p["media_type"].as_str().unwrap().into(),
            size: p["manifest_size"].as_u64().unwrap(),
        };
        Registry::local().put_manifest(
            &path,
            elsewhere_tag,
            OCI_INDEX,
            xtask::release::publish::index_bytes(&[entry]).unwrap(),
        );
    }

    let mut cases = vec![
        // -- No trust anchor: consistent edits that only the registry or the template's
        //    repository can contradict.
        Case {
            pin_names: Some("index.repository"),
            ..case(
                "repository moved within the registry",
                "index.digest",
                json_edit({
                    let moved = format!("{host}/evil/coding-agent");
                    move_to_fn(moved)
                }),
            )
        },
        Case {
            pin_names: Some("index.repository"),
            ..case(
                "repository moved to another registry",
                "index.repository",
                json_edit(move_to_fn(format!("127.0.0.1:5019/{path}"))),
            )
        },
        case(
            "platform digest that does not exist, index recomputed",
            "platforms[1].digest",
            both(|dir, v| {
                v["platforms"][1]["digest"] = json!(other_digest("no such manifest"));
                recompute_index(v);
                match_sboms(dir, v);
            }),
        ),
        case(
            "config digest edited",
            "platforms[0].config_digest",
            json_edit(|v| v["platforms"][0]["config_digest"] = json!(other_digest("config"))),
        ),
        case(
            "manifest size edited, index recomputed",
            "index.digest",
            consistent(|v| v["platforms"][0]["manifest_size"] = json!(1)),
        ),
        case(
            "index digest that does not exist",
            "index.digest",
            json_edit(|v| {
                let d = other_digest("no such index");
                v["index"]["digest"] = json!(d);
                let repository = v["index"]["repository"].as_str().unwrap().to_owned();
                move_to(v, &repository);
            }),
        ),
        case(
            "release tag pointing at another index",
            "release_tag",
            both(move |dir, v| {
                set_tag(v, elsewhere_tag);
                match_sboms(dir, v);
            }),
        ),
        case(
            "release tag never published",
            "release_tag",
            both(|dir, v| {
                set_tag(v, "2026.11.30-bbbbbbbbbbbb");
                match_sboms(dir, v);
            }),
        ),
        // -- Completeness counts the manifest's required checks, not the ones present.
        case(
            "CA scan removed",
            "platforms[0].smoke.checks",
            json_edit(|v| remove_checks(v, 0, |n| n == "no CA bundle left in the image")),
        ),
        case(
            "every harness check removed",
            "platforms[1].smoke.checks",
            json_edit(|v| remove_checks(v, 1, |n| n.starts_with("harness "))),
        ),
        case(
            "all checks replaced by one passing check",
            "platforms[0].smoke.checks",
            json_edit(|v| {
                v["platforms"][0]["smoke"]["checks"] =
                    json!([{"name": "everything", "passed": true, "output": "ok"}]);
            }),
        ),
        case(
            "browser check removed from the native platform",
            "platforms[0].smoke.checks",
            json_edit(|v| remove_checks(v, 0, |n| n == "playwright-cli drives chromium")),
        ),
        case(
            "emulated platform relabelled native",
            "platforms[1].smoke.checks",
            json_edit(|v| v["platforms"][1]["build"] = json!("native")),
        ),
        case(
            "a version check removed",
            "platforms[0].smoke.checks",
            json_edit(|v| remove_checks(v, 0, |n| n == "version ws")),
        ),
        case(
            "a check duplicated in place of another",
            "platforms[0].smoke.checks",
            json_edit(|v| {
                let checks = v["platforms"][0]["smoke"]["checks"].as_array_mut().unwrap();
                let first = checks[0].clone();
                checks.pop();
                checks.push(first);
            }),
        ),
        case(
            "a platform no longer required",
            "required_platforms",
            consistent(|v| {
                v["required_platforms"] = json!(["linux/amd64"]);
                v["platforms"].as_array_mut().unwrap().truncate(1);
            }),
        ),
        case(
            "a failed check",
            "platforms[0].smoke.checks[2].passed",
            json_edit(|v| v["platforms"][0]["smoke"]["checks"][2]["passed"] = json!(false)),
        ),
        // -- The image reference grammar.
        case(
            "space in the repository",
            "index.repository",
            json_edit(move_to_fn(format!("{host}/evil repo"))),
        ),
        case(
            "quotes in the repository",
            "index.repository",
            json_edit(move_to_fn(format!("\"{host}/{path}\""))),
        ),
        case(
            "upper case in the repository",
            "index.repository",
            json_edit(move_to_fn(format!("{host}/{}", path.to_uppercase()))),
        ),
        case(
            "a scheme",
            "index.repository",
            json_edit(move_to_fn(format!("http://{host}/{path}"))),
        ),
        case(
            "a tag beside the digest",
            "index.repository",
            json_edit(move_to_fn(format!("{host}/{path}:latest"))),
        ),
        case(
            "two digests",
            "index.repository",
            json_edit(move_to_fn(format!("{host}/{path}@{index_digest}"))),
        ),
        case(
            "a zero-width space",
            "index.repository",
            json_edit(move_to_fn(format!("{host}/{path}\u{200b}"))),
        ),
        case(
            "a bidi override",
            "index.repository",
            json_edit(move_to_fn(format!("{host}/\u{202e}{path}"))),
        ),
        case(
            "a newline and YAML in the repository",
            "index.repository",
            json_edit(move_to_fn(format!("{host}/{path}\nuser: evil"))),
        ),
        case(
            "YAML flow syntax in the repository",
            "index.repository",
            json_edit(move_to_fn(format!("{host}/{{a: b}}"))),
        ),
        case(
            "reference with a tag and the digest",
            "index.reference",
            json_edit(move |v| {
                v["index"]["reference"] = json!(format!(
                    "{}:v1@{}",
                    v["index"]["repository"].as_str().unwrap(),
                    v["index"]["digest"].as_str().unwrap()
                ))
            }),
        ),
        // -- Metadata against the verified artifacts.
        case(
            "package version not the lockfile's",
            "packages[0].version",
            json_edit(|v| v["packages"][0]["version"] = json!("9.9.9")),
        ),
        case(
            "package integrity not the lockfile's",
            "packages[2].integrity",
            json_edit(|v| v["packages"][2]["integrity"] = json!("sha512-AAAA")),
        ),
        case(
            "dependency version not the lockfile's",
            "dependencies[0].version",
            json_edit(|v| v["dependencies"][0]["version"] = json!("0.0.1")),
        ),
        case(
            "Node platform package not the manifest's",
            "node.platforms.linux/arm64.package",
            json_edit(|v| v["node"]["platforms"]["linux/arm64"]["package"] = json!("node-evil")),
        ),
        case(
            "Node platform dropped",
            "node.platforms",
            json_edit(|v| {
                v["node"]["platforms"]
                    .as_object_mut()
                    .unwrap()
                    .remove("linux/arm64");
            }),
        ),
        case(
            "Node version not the inventory's",
            "node.version",
            json_edit(|v| {
                v["node"]["version"] = json!("22.0.0");
                for p in v["node"]["platforms"].as_object_mut().unwrap().values_mut() {
                    p["version"] = json!("22.0.0");
                }
            }),
        ),
        case(
            "npm registry not the inventory's",
            "resolver.registry",
            json_edit(|v| v["resolver"]["registry"] = json!("https://evil.example/")),
        ),
        // -- The input trust (docs/inputs.md) against the inventory it is copied from: the
        //    genuine release's inputs are `unverified` (this machine's mirror).
        case(
            "inputs claimed verified",
            "inputs.status",
            json_edit(|v| {
                v["inputs"]["status"] = json!("verified");
                v["inputs"]["keys"] = json!(
                    "npm 10.9.9's node_modules/@sigstore/tuf/seeds.json (registry.npmjs.org/keys.json)"
                );
                for p in v["inputs"]["packages"].as_array_mut().unwrap() {
                    p["signed_by"] = json!("SHA256:DhQ8wR5APBvFHLF/+Tc+AYvPOdTpcIDqOhxsBHRwC7U");
                }
            }),
        ),
        Case {
            verify_says: Some("is missing, but the release's inventory.json records"),
            ..case(
                "inputs record dropped",
                "inputs",
                json_edit(|v| {
                    v.as_object_mut().unwrap().remove("inputs");
                }),
            )
        },
        case(
            "install script digest not the inventory's",
            "inputs.packages[1].install_scripts",
            json_edit(|v| {
                assert_eq!(
                    v["inputs"]["packages"][1]["name"],
                    "@anthropic-ai/claude-code"
                );
                v["inputs"]["packages"][1]["install_scripts"]["files"]["install.cjs"] =
                    json!("0".repeat(64));
            }),
        ),
        case(
            "install scripts of an allowed package dropped",
            "inputs.packages[2].install_scripts",
            json_edit(|v| v["inputs"]["packages"][2]["install_scripts"] = Value::Null),
        ),
        // -- Duplicate keys.
        case(
            "duplicate top-level key",
            "release_tag",
            Make::Text(Box::new(|t| {
                t.replacen("{\n", "{\n  \"release_tag\": \"x\",\n", 1)
            })),
        ),
        case(
            "duplicate nested key",
            "platforms[1].digest",
            Make::Text(Box::new(move |t| {
                let arm = t.find("\"platform\": \"linux/arm64\"").unwrap();
                let mut out = t.to_string();
                out.insert_str(
                    arm,
                    &format!("\"digest\": \"{}\",\n      ", other_digest("dup")),
                );
                out
            })),
        ),
        // -- Raw output: ANSI and bidi in what the refusal prints.
        case(
            "ANSI sequences in a failed check's output",
            "platforms[0].smoke.checks[0].passed",
            json_edit(|v| {
                v["platforms"][0]["smoke"]["checks"][0]["passed"] = json!(false);
                v["platforms"][0]["smoke"]["checks"][0]["name"] =
                    json!("x\u{1b}[2K\u{1b}[1A\rvalid, complete");
            }),
        ),
        case(
            "ANSI sequences in the repository",
            "index.repository",
            json_edit(move_to_fn(format!("{host}/{path}\u{1b}[2K\u{1b}[1A"))),
        ),
        // -- Unbounded reading.
        case(
            "receipt is a FIFO",
            "FIFO",
            Make::File(Box::new(|dir, tag| {
                let path = dir.join(format!("receipt-{tag}-{}.json", "0".repeat(64)));
                mkfifo(&path);
                path
            })),
        ),
        case(
            "receipt is /dev/zero",
            "character device",
            Make::File(Box::new(|dir, tag| {
                let path = dir.join(format!("receipt-{tag}-{}.json", "1".repeat(64)));
                std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
                path
            })),
        ),
        case(
            "receipt is huge",
            "limit",
            Make::File(Box::new(|dir, tag| {
                let path = dir.join(format!("receipt-{tag}-{}.json", "2".repeat(64)));
                let f = std::fs::File::create(&path).unwrap();
                f.set_len(1 << 30).unwrap();
                path
            })),
        ),
        case(
            "an artifact is /dev/zero",
            "artifacts[1]",
            Make::Artifacts(Box::new(|dir| {
                std::fs::remove_file(dir.join("package-lock.json")).unwrap();
                std::os::unix::fs::symlink("/dev/zero", dir.join("package-lock.json")).unwrap();
            })),
        ),
        case(
            "an artifact is a FIFO",
            "artifacts[2]",
            Make::Artifacts(Box::new(|dir| {
                std::fs::remove_file(dir.join("inventory.json")).unwrap();
                mkfifo(&dir.join("inventory.json"));
            })),
        ),
        // -- Loose fields.
        case(
            "a tag the tool never makes",
            "release_tag",
            json_edit(|v| {
                v["release_tag"] = json!("2026-11-30.1");
                v["index"]["tag"] = json!("2026-11-30.1");
            }),
        ),
        case(
            "the tag `latest`",
            "release_tag",
            json_edit(|v| {
                v["release_tag"] = json!("latest");
                v["index"]["tag"] = json!("latest");
            }),
        ),
        case(
            "created_at in the future",
            "created_at",
            json_edit(|v| v["created_at"] = json!("2999-01-01T00:00:00Z")),
        ),
        case(
            "created_at not in the tool's form",
            "created_at",
            json_edit(|v| v["created_at"] = json!("2026-11-30T07:30:00+01:00")),
        ),
        case(
            "cutoff after created_at",
            "resolver.cutoff",
            json_edit(|v| v["resolver"]["cutoff"] = json!("2026-11-30T06:31:00Z")),
        ),
        case(
            "platform media type not an image manifest",
            "platforms[0].media_type",
            consistent(|v| {
                v["platforms"][0]["media_type"] = json!("application/vnd.oci.image.index.v1+json")
            }),
        ),
        case(
            "index media type not an index",
            "index.media_type",
            json_edit(|v| {
                v["index"]["media_type"] = json!("application/vnd.oci.image.manifest.v1+json")
            }),
        ),
        case(
            "tag dated after the receipt",
            "release_tag",
            json_edit(|v| {
                v["release_tag"] = json!("2026.12.05-0123456789ab");
                v["index"]["tag"] = json!("2026.12.05-0123456789ab");
            }),
        ),
        // -- SBOMs are read, not only hashed. Each SBOM is replaced and its new
        //    sha256 recorded in the receipt, so only its content can give it away.
        case(
            "SBOM Debian version edited",
            "platforms[0].debian_packages",
            both(|dir, v| {
                edit_sbom(dir, v, 0, |doc| {
                    for p in sbom_packages(doc, "pkg:deb/debian/libc6@") {
                        p["externalRefs"][0]["referenceLocator"] = json!(
                            "pkg:deb/debian/libc6@2.36-9%2Bdeb12u99?arch=amd64&distro=debian-12"
                        );
                    }
                })
            }),
        ),
        case(
            "SBOM Debian package removed",
            "platforms[1].debian_packages",
            both(|dir, v| {
                edit_sbom(dir, v, 1, |doc| {
                    doc["packages"]
                        .as_array_mut()
                        .unwrap()
                        .retain(|p| p["name"] != "tzdata")
                })
            }),
        ),
        case(
            "SBOM Debian package added",
            "platforms[0].debian_packages",
            both(|dir, v| {
                edit_sbom(dir, v, 0, |doc| {
                    let mut extra = sbom_packages(doc, "pkg:deb/").next().unwrap().clone();
                    extra["SPDXID"] = json!("SPDXRef-deb-backdoor-amd64");
                    extra["externalRefs"][0]["referenceLocator"] =
                        json!("pkg:deb/debian/backdoor@1.0?arch=amd64");
                    doc["packages"].as_array_mut().unwrap().push(extra);
                })
            }),
        ),
        case(
            "SBOM Debian package of another architecture",
            "platforms[0].sbom",
            both(|dir, v| {
                edit_sbom(dir, v, 0, |doc| {
                    for p in sbom_packages(doc, "pkg:deb/debian/libc6@") {
                        let l = p["externalRefs"][0]["referenceLocator"].as_str().unwrap();
                        p["externalRefs"][0]["referenceLocator"] =
                            json!(l.replace("arch=amd64", "arch=arm64"));
                    }
                })
            }),
        ),
        case(
            "SBOM that is not SPDX",
            "platforms[0].sbom",
            both(|dir, v| {
                let cyclonedx =
                    br#"{"bomFormat": "CycloneDX", "specVersion": "1.6", "components": []}"#;
                replace_sbom(dir, v, 0, cyclonedx)
            }),
        ),
        case(
            "SBOM of another image",
            "platforms[1].sbom",
            both(|dir, v| {
                edit_sbom(dir, v, 1, |doc| {
                    doc["packages"][0]["checksums"][0]["checksumValue"] =
                        json!(sha256_hex(b"another image"));
                })
            }),
        ),
        case(
            "SBOMs swapped between platforms",
            "platforms[0].sbom",
            both(|dir, v| {
                let name = |i: usize| {
                    v["platforms"][i]["sbom"]["name"]
                        .as_str()
                        .unwrap()
                        .to_string()
                };
                let (a, b) = (dir.join(name(0)), dir.join(name(1)));
                let (bytes_a, bytes_b) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
                replace_sbom(dir, v, 0, &bytes_b);
                replace_sbom(dir, v, 1, &bytes_a);
            }),
        ),
        case(
            "the other platform's SBOM renamed as this one's",
            "platforms[0].sbom",
            both(|dir, v| {
                let other = dir.join(v["platforms"][1]["sbom"]["name"].as_str().unwrap());
                let mut doc: Value =
                    serde_json::from_slice(&std::fs::read(other).unwrap()).unwrap();
                doc["name"] = json!("coding-agent-linux-amd64");
                replace_sbom(dir, v, 0, &serde_json::to_vec_pretty(&doc).unwrap());
            }),
        ),
        case(
            "SBOM lacks an npm package the lockfile installs",
            "platforms[1].sbom",
            both(|dir, v| {
                edit_sbom(dir, v, 1, |doc| {
                    let first = sbom_packages(doc, "pkg:npm/").next().unwrap()["SPDXID"].clone();
                    doc["packages"]
                        .as_array_mut()
                        .unwrap()
                        .retain(|p| p["SPDXID"] != first)
                })
            }),
        ),
        case(
            "SBOM lists an npm package the lockfile does not install",
            "platforms[0].sbom",
            both(|dir, v| {
                edit_sbom(dir, v, 0, |doc| {
                    let mut extra = sbom_packages(doc, "pkg:npm/").next().unwrap().clone();
                    extra["SPDXID"] = json!("SPDXRef-npm-evil");
                    extra["externalRefs"][0]["referenceLocator"] =
                        json!("pkg:npm/evil-helper@6.6.6");
                    doc["packages"].as_array_mut().unwrap().push(extra);
                })
            }),
        ),
        // -- The CycloneDX SBOMs, like the SPDX ones: hashed, looked up under their fixed
        //    names, and read (each must be the CycloneDX form of its platform's SPDX file).
        case(
            "CycloneDX SBOM missing",
            "platforms[0].cyclonedx",
            Make::Artifacts(Box::new(|dir| {
                std::fs::remove_file(dir.join("sbom-linux-amd64.cdx.json")).unwrap();
            })),
        ),
        case(
            "CycloneDX SBOM bytes changed",
            "platforms[1].cyclonedx.sha256",
            Make::Artifacts(Box::new(|dir| {
                let path = dir.join("sbom-linux-arm64.cdx.json");
                let mut bytes = std::fs::read(&path).unwrap();
                bytes.extend_from_slice(b"\n");
                std::fs::write(path, bytes).unwrap();
            })),
        ),
        case(
            "CycloneDX SBOM sha256 edited",
            "platforms[0].cyclonedx.sha256",
            json_edit(|v| {
                v["platforms"][0]["cyclonedx"]["sha256"] = json!(sha256_hex(b"another bom"))
            }),
        ),
        case(
            "CycloneDX SBOM is a FIFO",
            "platforms[1].cyclonedx",
            Make::Artifacts(Box::new(|dir| {
                let path = dir.join("sbom-linux-arm64.cdx.json");
                std::fs::remove_file(&path).unwrap();
                mkfifo(&path);
            })),
        ),
        case(
            "CycloneDX Debian version edited",
            "platforms[0].cyclonedx",
            both(|dir, v| {
                edit_cdx(dir, v, 0, |bom| {
                    for c in cdx_components(bom, "pkg:deb/debian/libc6@") {
                        c["version"] = json!("2.36-9+deb12u99");
                        c["purl"] = json!(
                            "pkg:deb/debian/libc6@2.36-9%2Bdeb12u99?arch=amd64&distro=debian-12"
                        );
                    }
                })
            }),
        ),
        case(
            "CycloneDX Debian package removed",
            "platforms[1].cyclonedx",
            both(|dir, v| {
                edit_cdx(dir, v, 1, |bom| {
                    bom["components"]
                        .as_array_mut()
                        .unwrap()
                        .retain(|c| c["name"] != "tzdata")
                })
            }),
        ),
        case(
            "CycloneDX Debian package added",
            "platforms[0].cyclonedx",
            both(|dir, v| {
                edit_cdx(dir, v, 0, |bom| {
                    let mut extra = cdx_components(bom, "pkg:deb/").next().unwrap().clone();
                    extra["bom-ref"] = json!("SPDXRef-deb-backdoor-amd64");
                    extra["name"] = json!("backdoor");
                    extra["purl"] = json!("pkg:deb/debian/backdoor@1.0?arch=amd64");
                    bom["components"].as_array_mut().unwrap().push(extra);
                })
            }),
        ),
        case(
            "CycloneDX Debian package of another architecture",
            "platforms[0].cyclonedx",
            both(|dir, v| {
                edit_cdx(dir, v, 0, |bom| {
                    for c in cdx_components(bom, "pkg:deb/debian/libc6@") {
                        let l = c["purl"]
                            .as_str()
                            .unwrap()
                            .replace("arch=amd64", "arch=arm64");
                        c["purl"] = json!(l);
                    }
                })
            }),
        ),
        case(
            "CycloneDX npm package removed",
            "platforms[1].cyclonedx",
            both(|dir, v| {
                edit_cdx(dir, v, 1, |bom| {
                    let first = cdx_components(bom, "pkg:npm/").next().unwrap()["bom-ref"].clone();
                    bom["components"]
                        .as_array_mut()
                        .unwrap()
                        .retain(|c| c["bom-ref"] != first)
                })
            }),
        ),
        case(
            "CycloneDX npm package added",
            "platforms[0].cyclonedx",
            both(|dir, v| {
                edit_cdx(dir, v, 0, |bom| {
                    let mut extra = cdx_components(bom, "pkg:npm/").next().unwrap().clone();
                    extra["bom-ref"] = json!("SPDXRef-npm-evil");
                    extra["name"] = json!("evil-helper");
                    extra["version"] = json!("6.6.6");
                    extra["purl"] = json!("pkg:npm/evil-helper@6.6.6");
                    bom["components"].as_array_mut().unwrap().push(extra);
                })
            }),
        ),
        case(
            "CycloneDX SBOM that is not CycloneDX",
            "platforms[0].cyclonedx",
            both(|dir, v| {
                let spdx = dir.join(v["platforms"][0]["sbom"]["name"].as_str().unwrap());
                replace_cdx(dir, v, 0, &std::fs::read(spdx).unwrap());
            }),
        ),
        case(
            "CycloneDX SBOM of another image",
            "platforms[1].cyclonedx",
            both(|dir, v| {
                edit_cdx(dir, v, 1, |bom| {
                    bom["metadata"]["component"]["hashes"][0]["content"] =
                        json!(sha256_hex(b"another image"));
                })
            }),
        ),
        case(
            "CycloneDX SBOMs swapped between platforms",
            "platforms[0].cyclonedx",
            both(|dir, v| {
                let name = |i: usize| {
                    v["platforms"][i]["cyclonedx"]["name"]
                        .as_str()
                        .unwrap()
                        .to_string()
                };
                let (a, b) = (dir.join(name(0)), dir.join(name(1)));
                let (bytes_a, bytes_b) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
                replace_cdx(dir, v, 0, &bytes_b);
                replace_cdx(dir, v, 1, &bytes_a);
            }),
        ),
        case(
            "the other platform's CycloneDX SBOM renamed as this one's",
            "platforms[0].cyclonedx",
            both(|dir, v| {
                let other = dir.join(v["platforms"][1]["cyclonedx"]["name"].as_str().unwrap());
                let mut bom: Value =
                    serde_json::from_slice(&std::fs::read(other).unwrap()).unwrap();
                bom["metadata"]["component"]["name"] = json!("coding-agent-linux-amd64");
                replace_cdx(dir, v, 0, &serde_json::to_vec_pretty(&bom).unwrap());
            }),
        ),
        case(
            "receipt names the other platform's CycloneDX SBOM",
            "platforms[0].cyclonedx.name",
            json_edit(|v| v["platforms"][0]["cyclonedx"] = v["platforms"][1]["cyclonedx"].clone()),
        ),
        case(
            "receipt names the SPDX SBOM as the CycloneDX one",
            // The schema's name pattern refuses it before the name check does.
            "platforms[1].cyclonedx",
            json_edit(|v| v["platforms"][1]["cyclonedx"] = v["platforms"][1]["sbom"].clone()),
        ),
        Case {
            verify_says: Some("sbom-linux-amd64.cdx.json"),
            ..case(
                "a CycloneDX SBOM the receipt does not list",
                "platforms",
                json_edit(|v| v["platforms"][0]["cyclonedx"] = json!(null)),
            )
        },
        // -- The SBOMs name the image by the manifest digest and release tag the receipt
        //    records (each pair consistent, so only the receipt contradicts it).
        Case {
            verify_says: Some("does not name the published image"),
            ..case(
                "SBOMs name another manifest digest",
                "platforms[0].sbom",
                both(|dir, v| {
                    rename_in_sboms(dir, v, 0, |n| n.digest = other_digest("another manifest"))
                }),
            )
        },
        Case {
            verify_says: Some("does not name the published image"),
            ..case(
                "SBOMs name the other platform's manifest digest",
                "platforms[1].sbom",
                both(|dir, v| {
                    let amd = v["platforms"][0]["digest"].as_str().unwrap().to_string();
                    rename_in_sboms(dir, v, 1, move |n| n.digest = amd.clone())
                }),
            )
        },
        Case {
            verify_says: Some("does not name the published image"),
            ..case(
                "SBOMs name another release tag",
                "platforms[0].sbom",
                both(|dir, v| {
                    rename_in_sboms(dir, v, 0, |n| n.tag = "2026.11.27-0123456789ab".into())
                }),
            )
        },
        // -- The receipt's own Debian package sets.
        case(
            "receipt Debian version edited",
            "platforms[0].debian_packages",
            json_edit(|v| {
                v["platforms"][0]["debian_packages"][1] = json!("libc6=2.36-9+deb12u99");
            }),
        ),
        case(
            "receipt Debian entry removed",
            "platforms[0].debian_packages",
            json_edit(|v| {
                v["platforms"][0]["debian_packages"]
                    .as_array_mut()
                    .unwrap()
                    .pop();
            }),
        ),
        case(
            "receipt Debian list emptied",
            "platforms[1].debian_packages",
            json_edit(|v| v["platforms"][1]["debian_packages"] = json!([])),
        ),
        case(
            "receipt Debian name listed twice",
            "platforms[0].debian_packages[",
            json_edit(|v| {
                v["platforms"][0]["debian_packages"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!("libc6=2.36-9+deb12u12"));
            }),
        ),
        case(
            "receipt Debian entry malformed",
            "platforms[1].debian_packages[0]",
            json_edit(|v| v["platforms"][1]["debian_packages"][0] = json!("base-files 12.4")),
        ),
        case(
            "receipt Debian sets swapped between platforms",
            "platforms[0].debian_packages",
            json_edit(|v| {
                let a = v["platforms"][0]["debian_packages"].clone();
                v["platforms"][0]["debian_packages"] = v["platforms"][1]["debian_packages"].clone();
                v["platforms"][1]["debian_packages"] = a;
            }),
        ),
        // -- Verifier binaries are read: a static executable of their platform.
        case(
            "verifier binary for another architecture",
            "verifiers[0]",
            both(|dir, v| add_verifier(dir, v, &elf(183, 1))),
        ),
        case(
            "verifier binary dynamically linked",
            "verifiers[0]",
            both(|dir, v| add_verifier(dir, v, &std::fs::read("/bin/ls").unwrap())),
        ),
        case(
            "verifier binary that is a script",
            "verifiers[0]",
            both(|dir, v| add_verifier(dir, v, b"#!/bin/sh\necho valid, complete\n")),
        ),
        // -- Files the receipt does not account for.
        case(
            "a verifier binary the receipt does not list",
            "verifiers",
            Make::Artifacts(Box::new(|dir| {
                std::fs::write(dir.join("template-verify-linux-arm64"), elf(183, 1)).unwrap();
            })),
        ),
        // -- The registry's configs: an index that lists another platform's image.
        case(
            "index swaps the platforms' manifests",
            "platforms[0].architecture",
            both({
                let path = path.clone();
                move |dir, v| {
                    set_tag(v, "2026.11.30-5a5a5a5a5a5a");
                    let (a, b) = (v["platforms"][0].clone(), v["platforms"][1].clone());
                    for (i, from) in [(0, &b), (1, &a)] {
                        for key in ["digest", "manifest_size", "config_digest", "image_id"] {
                            v["platforms"][i][key] = from[key].clone();
                        }
                    }
                    // SBOMs made to match, so only the registry can tell.
                    match_sboms(dir, v);
                    recompute_index(v);
                    publish_index(&path, v);
                }
            }),
        ),
        case(
            "a variant the image does not have",
            "platforms[1].variant",
            both({
                let path = path.clone();
                move |dir, v| {
                    set_tag(v, "2026.11.30-7a7a7a7a7a7a");
                    match_sboms(dir, v);
                    let variant = if v["platforms"][1]["variant"] == "v8" {
                        "v7"
                    } else {
                        "v8"
                    };
                    v["platforms"][1]["variant"] = json!(variant);
                    recompute_index(v);
                    publish_index(&path, v);
                }
            }),
        ),
    ];
    cases.sort_by_key(|c| c.name);
    cases
}

/// A copy of the artifacts folder in `dir`.
fn copy_artifacts(artifacts: &Path, dir: &Path) -> PathBuf {
    let copy = dir.join("artifacts");
    std::fs::create_dir_all(&copy).unwrap();
    for entry in std::fs::read_dir(artifacts).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), copy.join(entry.file_name())).unwrap();
    }
    copy
}

fn move_to_fn(repository: String) -> impl Fn(&mut Value) + 'static {
    move |v: &mut Value| move_to(v, &repository)
}

fn tag_of(v: &Value) -> String {
    v["release_tag"].as_str().unwrap_or("x").to_string()
}

#[test]
fn every_tampered_receipt_is_refused_by_verify_and_pin() {
    let Some(_docker) = light_docker() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let (out, path) = write_receipt(work.path(), None);
    assert!(out.status.success(), "the genuine receipt is written");
    let genuine_path = path.unwrap();
    let genuine_bytes = std::fs::read(&genuine_path).unwrap();
    let genuine: Value = serde_json::from_slice(&genuine_bytes).unwrap();

    // The release's artifact files, as a consumer downloads them.
    let r = release();
    let artifacts = work.path().join("artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    for a in genuine["artifacts"].as_array().unwrap() {
        std::fs::copy(
            r.root.path().join(a["path"].as_str().unwrap()),
            artifacts.join(a["name"].as_str().unwrap()),
        )
        .unwrap();
    }
    genuine_release::copy_sboms(&genuine, &artifacts);
    let template = template_for(
        work.path(),
        genuine["index"]["repository"].as_str().unwrap(),
    );
    let original_template = std::fs::read(&template).unwrap();

    let verify = |receipt: &Path, artifacts: &Path| {
        run_bounded(
            xtask()
                .args(["receipt", "verify", "--check-registry", "--artifacts"])
                .arg(artifacts)
                .arg(receipt),
        )
    };
    let verify_json = |receipt: &Path, artifacts: &Path| {
        run_bounded(
            xtask()
                .args([
                    "receipt",
                    "verify",
                    "--json",
                    "--check-registry",
                    "--artifacts",
                ])
                .arg(artifacts)
                .arg(receipt),
        )
    };
    let pin = |receipt: &Path, artifacts: &Path| {
        run_bounded(
            xtask()
                .args(["pin", "--receipt"])
                .arg(receipt)
                .arg("--artifacts")
                .arg(artifacts)
                .arg("--template")
                .arg(&template),
        )
    };

    // The control: the genuine receipt verifies online with its artifacts.
    let control = verify(&genuine_path, &artifacts);
    assert!(
        control.status.success(),
        "the genuine receipt must verify: {}",
        String::from_utf8_lossy(&control.stderr)
    );

    let all = cases(&genuine);
    assert!(all.len() >= 94, "only {} cases", all.len());
    let mut failures = Vec::new();
    for (i, c) in all.into_iter().enumerate() {
        let dir = work.path().join(format!("case-{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        let tampered = match &c.make {
            Make::Json(edit) => {
                let mut v = genuine.clone();
                edit(&mut v);
                Tampered {
                    receipt: write_named(&dir, &tag_of(&v), &bytes_of(&v)),
                    artifacts: None,
                }
            }
            Make::Consistent(edit) => {
                let mut v = genuine.clone();
                edit(&mut v);
                recompute_index(&mut v);
                Tampered {
                    receipt: write_named(&dir, &tag_of(&v), &bytes_of(&v)),
                    artifacts: None,
                }
            }
            Make::Text(edit) => {
                let text = edit(std::str::from_utf8(&genuine_bytes).unwrap());
                Tampered {
                    receipt: write_named(&dir, &tag_of(&genuine), text.as_bytes()),
                    artifacts: None,
                }
            }
            Make::File(make) => Tampered {
                receipt: make(&dir, &tag_of(&genuine)),
                artifacts: None,
            },
            Make::Artifacts(change) => {
                let copy = copy_artifacts(&artifacts, &dir);
                change(&copy);
                Tampered {
                    receipt: genuine_path.clone(),
                    artifacts: Some(copy),
                }
            }
            Make::Both(change) => {
                let copy = copy_artifacts(&artifacts, &dir);
                let mut v = genuine.clone();
                change(&copy, &mut v);
                Tampered {
                    receipt: write_named(&dir, &tag_of(&v), &bytes_of(&v)),
                    artifacts: Some(copy),
                }
            }
        };
        let artifacts_dir = tampered.artifacts.as_deref().unwrap_or(&artifacts);
        let mut problems = Vec::new();

        // The runner logs each command's stderr: the harness shows it when the test fails.
        eprintln!("--- case: {}", c.name);
        let v = verify(&tampered.receipt, artifacts_dir);
        let stderr = v.stderr_text();
        if v.status.success() {
            problems.push("verify accepted it".to_string());
        }
        if !stderr.contains(c.verify_names) {
            problems.push(format!(
                "verify's stderr does not name `{}`:\n{stderr}",
                c.verify_names
            ));
        }
        if let Some(says) = c.verify_says.filter(|says| !stderr.contains(says)) {
            problems.push(format!("verify's stderr does not say `{says}`:\n{stderr}"));
        }
        // Nothing from the receipt reaches the terminal raw.
        for bad in ['\u{1b}', '\u{202e}', '\u{200b}', '\r'] {
            if stderr.contains(bad) || String::from_utf8_lossy(&v.stdout).contains(bad) {
                problems.push(format!("verify printed U+{:04X} raw", bad as u32));
            }
        }
        let vj = verify_json(&tampered.receipt, artifacts_dir);
        if vj.status.success() {
            problems.push("verify --json accepted it".to_string());
        }
        if let Ok(report) = serde_json::from_slice::<Value>(&vj.stdout) {
            let fields: Vec<String> = report["problems"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| p["field"].as_str().unwrap_or("").to_string())
                .collect();
            if !fields.iter().any(|f| f.contains(c.verify_names)) {
                problems.push(format!(
                    "verify --json lists no problem with `{}`: {fields:?}",
                    c.verify_names
                ));
            }
            for bad in ['\u{1b}', '\u{202e}', '\u{200b}'] {
                if String::from_utf8_lossy(&vj.stdout).contains(bad) {
                    problems.push(format!("verify --json printed U+{:04X} raw", bad as u32));
                }
            }
        }

        let p = pin(&tampered.receipt, artifacts_dir);
        let pin_stderr = p.stderr_text();
        if p.status.success() {
            problems.push("pin succeeded".to_string());
        }
        let pin_names = c.pin_names.unwrap_or(c.verify_names);
        if !pin_stderr.contains(pin_names) {
            problems.push(format!(
                "pin's stderr does not name `{pin_names}`:\n{pin_stderr}"
            ));
        }
        if std::fs::read(&template).unwrap() != original_template {
            problems.push("pin changed the template".to_string());
            std::fs::write(&template, &original_template).unwrap();
        }
        if !problems.is_empty() {
            failures.push(format!("{}:\n  {}", c.name, problems.join("\n  ")));
        }
    }
    assert!(
        failures.is_empty(),
        "{} case(s) wrongly handled:\n{}",
        failures.len(),
        failures.join("\n")
    );

    // And the genuine receipt still pins, from the same template.
    let out = pin(&genuine_path, &artifacts);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pinned = std::fs::read_to_string(&template).unwrap();
    assert!(pinned.contains(&format!(
        "image: {}\n",
        genuine["index"]["reference"].as_str().unwrap()
    )));
}

/// The anchor can be moved only on purpose, and moving it never skips the registry check;
/// `--offline` skips only the registry.
#[test]
fn pin_flags_move_the_anchor_only_on_purpose() {
    let Some(_docker) = light_docker() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let (out, path) = write_receipt(work.path(), None);
    assert!(out.status.success());
    let genuine_path = path.unwrap();
    let genuine: Value = serde_json::from_slice(&std::fs::read(&genuine_path).unwrap()).unwrap();
    let repository = genuine["index"]["repository"].as_str().unwrap();
    let (host, _) = repository.split_once('/').unwrap();
    let pin = |receipt: &Path, template: &Path, flags: &[&str]| {
        run_bounded(
            xtask()
                .args(["pin", "--receipt"])
                .arg(receipt)
                .arg("--template")
                .arg(template)
                .args(flags),
        )
    };

    // A template that names another repository: refused, then pinned when told to move.
    let elsewhere = work.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let template = template_for(&elsewhere, &format!("{host}/sandbox0/coding-agent"));
    let before = std::fs::read(&template).unwrap();
    let refused = pin(&genuine_path, &template, &[]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains(repository) && stderr.contains(&format!("{host}/sandbox0/coding-agent")),
        "the error names both repositories: {stderr}"
    );
    assert_eq!(std::fs::read(&template).unwrap(), before);
    let moved = pin(&genuine_path, &template, &["--allow-repository-change"]);
    assert!(
        moved.status.success(),
        "{}",
        String::from_utf8_lossy(&moved.stderr)
    );
    assert!(std::fs::read_to_string(&template)
        .unwrap()
        .contains(&format!(
            "image: {}\n",
            genuine["index"]["reference"].as_str().unwrap()
        )));

    // A receipt moved to a repository the registry does not hold: allowed to move, it is
    // still refused by the registry; with --offline instead, the anchor refuses it.
    let mut tampered = genuine.clone();
    let evil = format!("{host}/evil/coding-agent");
    tampered["index"]["repository"] = json!(evil);
    tampered["index"]["reference"] = json!(format!(
        "{evil}@{}",
        genuine["index"]["digest"].as_str().unwrap()
    ));
    let mut bytes = serde_json::to_vec_pretty(&tampered).unwrap();
    bytes.push(b'\n');
    let tampered_path = work
        .path()
        .join(format!("receipt-{TAG}-{}.json", sha256_hex(&bytes)));
    std::fs::write(&tampered_path, &bytes).unwrap();
    let template = template_for(work.path(), repository);
    let before = std::fs::read(&template).unwrap();
    let out = pin(&tampered_path, &template, &["--allow-repository-change"]);
    assert!(!out.status.success(), "the registry does not hold it");
    assert!(String::from_utf8_lossy(&out.stderr).contains("index.digest"));
    assert_eq!(std::fs::read(&template).unwrap(), before);
    let out = pin(&tampered_path, &template, &["--offline"]);
    assert!(!out.status.success(), "the anchor holds offline too");
    assert_eq!(std::fs::read(&template).unwrap(), before);
}

/// A consumer can require verified inputs: `pin --require-verified-inputs` refuses the genuine
/// release (its inputs came from this machine's mirror, `unverified`) and a receipt from before
/// the record, naming the release and the registry and leaving the template as it was; it pins
/// a release whose inventory and receipt say `verified`. Without the flag both pin, and the
/// older receipt still verifies.
#[test]
fn pin_can_require_verified_inputs() {
    let Some(_docker) = light_docker() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let (out, path) = write_receipt(work.path(), None);
    assert!(out.status.success(), "the genuine receipt is written");
    let genuine_path = path.unwrap();
    let genuine: Value = serde_json::from_slice(&std::fs::read(&genuine_path).unwrap()).unwrap();
    assert_eq!(genuine["inputs"]["status"], "unverified");
    let r = release();
    let artifacts = work.path().join("artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    for a in genuine["artifacts"].as_array().unwrap() {
        std::fs::copy(
            r.root.path().join(a["path"].as_str().unwrap()),
            artifacts.join(a["name"].as_str().unwrap()),
        )
        .unwrap();
    }
    genuine_release::copy_sboms(&genuine, &artifacts);
    let repository = genuine["index"]["repository"].as_str().unwrap();
    let template = template_for(work.path(), repository);
    let unpinned = std::fs::read(&template).unwrap();
    let pin = |receipt: &Path, artifacts: Option<&Path>, flags: &[&str]| {
        let mut command = xtask();
        command
            .args(["pin", "--receipt"])
            .arg(receipt)
            .arg("--template")
            .arg(&template)
            .args(flags);
        if let Some(dir) = artifacts {
            command.arg("--artifacts").arg(dir);
        }
        run_bounded(&mut command)
    };
    let require = ["--require-verified-inputs"];

    let refused = pin(&genuine_path, Some(&artifacts), &require);
    assert!(!refused.success());
    let err = refused.stderr_text();
    assert!(
        err.contains("inputs.status")
            && err.contains(TAG)
            && err.contains("https://registry.npmjs.org/")
            && err.contains("unverified"),
        "{err}"
    );
    assert_eq!(std::fs::read(&template).unwrap(), unpinned);
    pin(&genuine_path, Some(&artifacts), &[]).assert_success();
    std::fs::write(&template, &unpinned).unwrap();

    // A receipt from before the record: still pins, but not when verified inputs are required.
    let mut old = genuine.clone();
    old.as_object_mut().unwrap().remove("inputs");
    let old_dir = work.path().join("old");
    std::fs::create_dir_all(&old_dir).unwrap();
    let old_path = genuine_release::write_renamed(&old_dir, TAG, &old);
    let refused = pin(&old_path, None, &require);
    assert!(!refused.success());
    let err = refused.stderr_text();
    assert!(
        err.contains("records no input trust") && err.contains(TAG),
        "{err}"
    );
    assert_eq!(std::fs::read(&template).unwrap(), unpinned);
    pin(&old_path, None, &[]).assert_success();
    std::fs::write(&template, &unpinned).unwrap();

    // A release whose inputs were verified: its inventory asset and its receipt say so.
    let key = "SHA256:DhQ8wR5APBvFHLF/+Tc+AYvPOdTpcIDqOhxsBHRwC7U";
    let keys = "npm 10.9.9's node_modules/@sigstore/tuf/seeds.json (registry.npmjs.org/keys.json)";
    let verified_dir = copy_artifacts(&artifacts, &work.path().join("verified"));
    let inventory_path = verified_dir.join("inventory.json");
    let mut inventory: Value =
        serde_json::from_slice(&std::fs::read(&inventory_path).unwrap()).unwrap();
    inventory["inputs"] = json!("verified");
    inventory["keys"] = json!(keys);
    for p in inventory["packages"].as_array_mut().unwrap() {
        p["signed_by"] = json!(key);
    }
    let bytes = serde_json::to_vec_pretty(&inventory).unwrap();
    std::fs::write(&inventory_path, &bytes).unwrap();
    let mut verified = genuine.clone();
    for a in verified["artifacts"].as_array_mut().unwrap() {
        if a["name"] == "inventory.json" {
            a["sha256"] = json!(sha256_hex(&bytes));
        }
    }
    verified["inputs"]["status"] = json!("verified");
    verified["inputs"]["keys"] = json!(keys);
    for p in verified["inputs"]["packages"].as_array_mut().unwrap() {
        p["signed_by"] = json!(key);
    }
    let verified_path =
        genuine_release::write_renamed(&work.path().join("verified"), TAG, &verified);
    pin(&verified_path, Some(&verified_dir), &require).assert_success();
    assert!(std::fs::read_to_string(&template)
        .unwrap()
        .contains(genuine["index"]["reference"].as_str().unwrap()));
}

/// `receipt write` refuses smoke results that lack a required check (and writes nothing).
#[test]
fn receipt_write_refuses_incomplete_smoke_results() {
    let Some(_docker) = light_docker() else {
        return;
    };
    let r = release();
    let work = tempfile::tempdir().unwrap();
    let (amd64, build) = &r.builds[0];
    let image = build["image"].as_str().unwrap();
    for (what, drop) in [
        ("CA scan", "no CA bundle left in the image"),
        ("a harness", "harness codex"),
        ("the browser", "playwright-cli drives chromium"),
    ] {
        let mut smoke = smoke(image, "linux/amd64", false, None);
        smoke["checks"]
            .as_array_mut()
            .unwrap()
            .retain(|c| c["name"] != drop);
        let smoke_amd64 = work.path().join(format!("smoke-{amd64}.json"));
        std::fs::write(&smoke_amd64, smoke.to_string()).unwrap();
        let (_, arm_build) = &r.builds[1];
        let smoke_arm64 = work.path().join("smoke-arm64.json");
        std::fs::write(
            &smoke_arm64,
            genuine_release::smoke(
                arm_build["image"].as_str().unwrap(),
                "linux/arm64",
                true,
                None,
            )
            .to_string(),
        )
        .unwrap();
        let out_dir = work.path().join(format!("out-{what}"));
        let out = run_bounded(&mut receipt_write_command(
            &out_dir,
            &[smoke_amd64, smoke_arm64],
        ));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{what}: receipt write accepted it");
        assert!(
            stderr.contains(drop) && stderr.contains("lacks the required check"),
            "{what}: {stderr}"
        );
        assert!(!out_dir.exists(), "{what}: something was written");
    }
}

/// A registry that answers every request `401` with a `Basic` challenge, as distribution
/// does with htpasswd auth (distribution/distribution v2.8 `registry/auth/htpasswd`:
/// `WWW-Authenticate: Basic realm="..."`), and records each request's `Authorization` header.
struct CredentialTrap {
    host: String,
    seen: std::sync::Arc<std::sync::Mutex<Vec<Option<String>>>>,
}

impl CredentialTrap {
    fn start() -> CredentialTrap {
        use std::io::{BufRead, BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let host = listener.local_addr().unwrap().to_string();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let record = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut authorization = None;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some((name, value)) = line.split_once(':') {
                        if name.eq_ignore_ascii_case("authorization") {
                            authorization = Some(value.trim().to_string());
                        }
                    }
                }
                record.lock().unwrap().push(authorization);
                let _ = stream.write_all(
                    b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"trap\"\r\n\
                      Content-Type: application/json\r\nContent-Length: 2\r\n\
                      Connection: close\r\n\r\n{}",
                );
            }
        });
        CredentialTrap { host, seen }
    }

    /// The `Authorization` headers received so far (`None` for a request without one).
    fn seen(&self) -> Vec<Option<String>> {
        self.seen.lock().unwrap().clone()
    }
}

/// A tampered receipt that names another registry never receives the consumer's
/// environment credentials, from `receipt verify --check-registry` or from `pin`; they go
/// to a registry only when the consumer names it.
#[test]
fn environment_credentials_never_follow_a_receipt() {
    use base64::Engine as _;
    let Some(_docker) = light_docker() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let (out, path) = write_receipt(work.path(), None);
    assert!(out.status.success());
    let genuine: Value = serde_json::from_slice(&std::fs::read(path.unwrap()).unwrap()).unwrap();
    let repository = genuine["index"]["repository"].as_str().unwrap();
    let (_, repo_path) = repository.split_once('/').unwrap();

    let trap = CredentialTrap::start();
    let mut tampered = genuine.clone();
    move_to(&mut tampered, &format!("{}/{repo_path}", trap.host));
    let receipt = write_named(work.path(), TAG, &bytes_of(&tampered));
    let password = format!("consumer-secret-{}", std::process::id());
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("consumer:{password}"));
    let empty_docker_config = work.path().join("docker-config");
    std::fs::create_dir_all(&empty_docker_config).unwrap();
    let with_credentials = |cmd: &mut Xtask| {
        cmd.env("XTASK_OCI_USERNAME", "consumer")
            .env("XTASK_OCI_PASSWORD", &password)
            .env_remove("XTASK_OCI_REGISTRY")
            .env_remove("XTASK_REGISTRY_USERNAME")
            .env_remove("XTASK_REGISTRY_PASSWORD")
            .env("DOCKER_CONFIG", &empty_docker_config);
    };
    let leaked = |seen: &[Option<String>]| {
        seen.iter()
            .flatten()
            .any(|a| a.contains(&basic) || a.contains(&password))
    };

    let mut verify = xtask();
    verify
        .args(["receipt", "verify", "--check-registry"])
        .arg(&receipt);
    with_credentials(&mut verify);
    let out = run_bounded(&mut verify);
    assert!(!out.success(), "the trap registry holds nothing");
    let seen = trap.seen();
    assert!(!seen.is_empty(), "the check asked the receipt's registry");
    assert!(
        seen.iter().all(Option::is_none),
        "receipt verify sent credentials to the receipt's registry: {seen:?}"
    );
    assert!(
        out.stderr_text().contains("not sent"),
        "the refusal says why no credentials were sent: {}",
        out.stderr_text()
    );

    // pin, told to allow the move: the credentials stay bound to the template's registry.
    let template = template_for(work.path(), repository);
    let before = std::fs::read(&template).unwrap();
    let mut pin = xtask();
    pin.args(["pin", "--allow-repository-change", "--receipt"])
        .arg(&receipt)
        .arg("--template")
        .arg(&template);
    with_credentials(&mut pin);
    let out = run_bounded(&mut pin);
    assert!(!out.success());
    assert_eq!(std::fs::read(&template).unwrap(), before);
    assert!(
        !leaked(&trap.seen()),
        "pin sent credentials: {:?}",
        trap.seen()
    );
    assert!(trap.seen().iter().all(Option::is_none));

    // The control: named by the consumer, the registry gets them (so the trap can see them).
    let mut named = xtask();
    named
        .args([
            "receipt",
            "verify",
            "--check-registry",
            "--credentials-registry",
        ])
        .arg(&trap.host)
        .arg(&receipt);
    with_credentials(&mut named);
    assert!(!run_bounded(&mut named).success());
    assert!(
        leaked(&trap.seen()),
        "a registry the consumer names receives the credentials: {:?}",
        trap.seen()
    );
}
