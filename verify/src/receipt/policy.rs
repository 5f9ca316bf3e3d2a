//! The policy a receipt is judged by, and the checks it must pass beyond its schema.
//!
//! [`ReceiptPolicy`] is the manifest a receipt is judged by, and where it came from: never a
//! path of the machine that built the tool. The consumer's verifier (`template-verify`) takes
//! it from the release it verifies: the `manifest.yaml` asset, whose sha256 the receipt
//! records among its artifacts and which the release workflow attests like every other asset.
//! So the verifier judges a receipt by the policy that release was made under, and the receipt
//! must name exactly those bytes (see [`binding_problems`]): a manifest swapped for a laxer one
//! is refused, not obeyed. The maintainer's `cargo xtask receipt verify` / `pin` / `gate` /
//! `release` judge by the checkout's `template/manifest.yaml`, which the command line passes
//! in.
//!
//! The checks `receipt verify` runs on a parsed receipt against that manifest, the clock and
//! the release's artifact files: a receipt's sha256 is in its file name, so anyone who edits a
//! receipt can rename it and the digest still matches. These checks therefore hold a receipt
//! to what this tool can know without trusting it: the manifest (required platforms, smoke
//! checks, Node packages), the forms the tool itself writes (tags, times, media types,
//! references), the clock, and — when the release's files are given — the lockfile,
//! package.json and inventory those files really contain. What none of these can catch (a
//! digest or a smoke output that was edited consistently) is for the registry check
//! (`receipt verify --check-registry`) and the release's attestation.
//!
//! Every check is pure and returns [`Problem`]s naming the receipt field; only
//! [`ReceiptPolicy`]'s constructors read a file.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use chrono::{DateTime, NaiveDate, SecondsFormat, Utc};

use crate::receipt::{problem, Problem, MANIFEST_ASSET};
use template_formats::bounded_read::{read_regular, MAX_PARSED_ARTIFACT_BYTES};
use template_formats::hash::sha256_hex;
use template_formats::manifest::Manifest;
use template_formats::model::inventory::{Inventory, Tarball};
use template_formats::model::lockfile::Lockfile;
use template_formats::model::package_json::PackageJson;
use template_formats::model::receipt::{BuildMode, Receipt, TarballRecord};
use template_formats::model::tag::parse_release_tag;
use template_formats::oci::index::{OCI_INDEX, OCI_MANIFEST};
use template_formats::oci::reference::{parse_pinned_reference, parse_repository_name};

/// A manifest to judge receipts by.
pub struct ReceiptPolicy {
    pub manifest: Manifest,
    /// The file it was read from, for messages.
    pub origin: PathBuf,
    /// sha256 of that file's bytes.
    pub sha256: String,
    /// A release's own manifest: the receipt must record these bytes as its `manifest.yaml`.
    /// A checkout's manifest judges receipts of any release (older ones too) by today's rules.
    pub from_release: bool,
}

impl ReceiptPolicy {
    fn read(path: &Path, from_release: bool) -> Result<ReceiptPolicy> {
        let bytes = read_regular(path, MAX_PARSED_ARTIFACT_BYTES, "template manifest")
            .with_context(|| format!("cannot read the template manifest {}", path.display()))?;
        let text =
            String::from_utf8(bytes).with_context(|| format!("{} is not UTF-8", path.display()))?;
        Ok(ReceiptPolicy {
            manifest: Manifest::parse(&text, path)?,
            origin: path.to_path_buf(),
            sha256: sha256_hex(text.as_bytes()),
            from_release,
        })
    }

    /// The maintainer's checkout manifest (`template/manifest.yaml`), given by the command line.
    pub fn checkout(path: &Path) -> Result<ReceiptPolicy> {
        ReceiptPolicy::read(path, false)
    }

    /// A release's own `manifest.yaml` asset; the receipt must name its sha256.
    pub fn release_asset(path: &Path) -> Result<ReceiptPolicy> {
        ReceiptPolicy::read(path, true)
    }

    /// The maintainer's commands: `--manifest FILE` (a release's asset) when given, else the
    /// checkout's manifest at `checkout`.
    pub fn for_maintainer(manifest: Option<&Path>, checkout: &Path) -> Result<ReceiptPolicy> {
        match manifest {
            Some(file) => ReceiptPolicy::release_asset(file),
            None => ReceiptPolicy::checkout(checkout),
        }
    }

    /// The consumer's verifier: `--manifest FILE`, else `manifest.yaml` among `--artifacts DIR`.
    /// Both are the release's own asset; the verifier has no manifest of its own to fall back on.
    pub fn for_verifier(
        manifest: Option<&Path>,
        artifacts: Option<&Path>,
    ) -> Result<ReceiptPolicy> {
        match (manifest, artifacts) {
            (Some(file), _) => ReceiptPolicy::release_asset(file),
            (None, Some(dir)) => ReceiptPolicy::release_asset(&dir.join(MANIFEST_ASSET)),
            (None, None) => bail!(
                "template-verify judges a receipt by its release's manifest: pass --artifacts DIR \
                 (the release's assets, with {MANIFEST_ASSET}) or --manifest FILE (the release's \
                 {MANIFEST_ASSET} asset)"
            ),
        }
    }
}

/// A release's manifest must be the one its receipt records: the same name, the same sha256.
/// Nothing for a checkout's manifest. Pure.
pub fn binding_problems(receipt: &Receipt, policy: &ReceiptPolicy) -> Vec<Problem> {
    if !policy.from_release {
        return Vec::new();
    }
    let recorded = receipt
        .artifacts
        .iter()
        .enumerate()
        .find(|(_, a)| a.name == MANIFEST_ASSET);
    match recorded {
        None => vec![problem(
            "artifacts",
            format!(
                "names no `{MANIFEST_ASSET}`, so the manifest {} cannot be shown to be this \
                 release's",
                policy.origin.display()
            ),
        )],
        Some((i, a)) if a.sha256 != policy.sha256 => vec![problem(
            format!("artifacts[{i}].sha256"),
            format!(
                "the receipt is judged by {} (sha256 {}), but it records `{MANIFEST_ASSET}` as \
                 {}: that manifest is not this release's",
                policy.origin.display(),
                policy.sha256,
                a.sha256
            ),
        )],
        Some(_) => Vec::new(),
    }
}

// ---------------------------------------------------------------------------------------------
// The checks.

/// How far ahead of the verifier's clock a `created_at` may be (clock skew between the
/// release runner and the consumer), in seconds.
pub const CLOCK_SKEW_SECONDS: i64 = 300;

/// How many days after its tag's day a receipt may be written: GitHub lets failed jobs of a
/// workflow run be re-run for 30 days, and a re-run keeps the run's tag.
pub const MAX_RERUN_DAYS: i64 = 30;

/// A time exactly as the tool writes it: RFC 3339, UTC, whole seconds, `Z`.
fn parse_tool_time(text: &str) -> Option<DateTime<Utc>> {
    let t = DateTime::parse_from_rfc3339(text).ok()?.with_timezone(&Utc);
    (t.to_rfc3339_opts(SecondsFormat::Secs, true) == text).then_some(t)
}

/// Tags, times, references and media types: the forms `receipt write` and `publish` make,
/// and the order of events they imply.
pub fn form_problems(r: &Receipt, now: DateTime<Utc>) -> Vec<Problem> {
    let mut out = Vec::new();
    let tag_day = parse_release_tag(&r.release_tag);
    if tag_day.is_none() {
        out.push(problem(
            "release_tag",
            format!(
                "`{}` is not a tag this tool makes (`YYYY.MM.DD-` and 12 hex digits of the \
                 release inputs' digest, or the workflow run id)",
                r.release_tag
            ),
        ));
    }
    let created = parse_tool_time(&r.created_at);
    match created {
        None => out.push(problem(
            "created_at",
            format!(
                "`{}` is not a UTC time in the form the tool writes (e.g. 2026-11-30T06:30:00Z)",
                r.created_at
            ),
        )),
        Some(created) if (created - now).num_seconds() > CLOCK_SKEW_SECONDS => out.push(problem(
            "created_at",
            format!(
                "{} is in the future (this machine's clock says {}): no release is made \
                     ahead of time",
                r.created_at,
                now.to_rfc3339_opts(SecondsFormat::Secs, true)
            ),
        )),
        Some(_) => {}
    }
    match parse_tool_time(&r.resolver.cutoff) {
        None => out.push(problem(
            "resolver.cutoff",
            format!(
                "`{}` is not a UTC time in the form the tool writes",
                r.resolver.cutoff
            ),
        )),
        Some(cutoff) => {
            if let Some(created) = created {
                if cutoff > created {
                    out.push(problem(
                        "resolver.cutoff",
                        format!(
                            "{} is after created_at {}: versions cannot be chosen after the \
                             receipt was written",
                            r.resolver.cutoff, r.created_at
                        ),
                    ));
                }
            }
        }
    }
    if let (Some(day), Some(created)) = (tag_day, created) {
        let created_day = created.date_naive();
        // The tag is named when the run starts; the receipt is written hours later, or, when
        // failed jobs of the workflow run are re-run (which keeps the run's tag), up to
        // GitHub's re-run window later. It is never written before the day its tag names.
        if day > created_day || (created_day - day).num_days() > MAX_RERUN_DAYS {
            out.push(problem(
                "release_tag",
                format!(
                    "names the day {day}, but created_at is {}: a receipt is written on its \
                     tag's day or within {MAX_RERUN_DAYS} days after (a re-run)",
                    r.created_at
                ),
            ));
        }
    }
    if let Err(e) = parse_repository_name(&r.index.repository) {
        out.push(problem(
            "index.repository",
            format!(
                "`{}` is not a registry repository `host[:port]/path`: it {}",
                r.index.repository, e
            ),
        ));
    }
    if let Err(e) = parse_pinned_reference(&r.index.reference) {
        out.push(problem(
            "index.reference",
            format!(
                "`{}` is not a pinned reference `host[:port]/path@sha256:<hex>`: {}",
                r.index.reference, e
            ),
        ));
    }
    if r.index.media_type != OCI_INDEX {
        out.push(problem(
            "index.media_type",
            format!(
                "`{}` is not {OCI_INDEX}, the index type publish writes",
                r.index.media_type
            ),
        ));
    }
    for (i, a) in r.artifacts.iter().enumerate() {
        let known = crate::receipt::ARTIFACTS
            .iter()
            .find(|(name, _)| *name == a.name);
        if let Some((_, path)) = known {
            if a.path != *path {
                out.push(problem(
                    format!("artifacts[{i}].path"),
                    format!("`{}` is not where {} lives ({path})", a.path, a.name),
                ));
            }
        }
    }
    if let Some(day) = tag_day {
        let epoch_day = day
            .signed_duration_since(NaiveDate::from_ymd_opt(1970, 1, 1).expect("a date"))
            .num_days();
        // The gate decides on the day the run starts, which names the tag. `abs_diff`: a
        // receipt's day is anything a hostile one says (i64::MIN made the subtraction's `abs`
        // wrap to a negative number, and the check pass, in the release build).
        if r.gate.epoch_day.abs_diff(epoch_day) > 1 {
            out.push(problem(
                "gate.epoch_day",
                format!(
                    "{} is not the day of the release tag ({day}, epoch day {epoch_day})",
                    r.gate.epoch_day
                ),
            ));
        }
    }
    for (i, p) in r.platforms.iter().enumerate() {
        if p.media_type != OCI_MANIFEST {
            out.push(problem(
                format!("platforms[{i}].media_type"),
                format!(
                    "`{}` ({}) is not {OCI_MANIFEST}, an image manifest as publish writes it",
                    p.media_type, p.platform
                ),
            ));
        }
    }
    out
}

/// The receipt against the manifest: every manifest platform required, the manifest's
/// packages exactly, and Node from the manifest's per-platform packages.
pub fn manifest_problems(r: &Receipt, manifest: &Manifest) -> Vec<Problem> {
    let mut out = Vec::new();
    let required: BTreeSet<_> = r.required_platforms.iter().collect();
    let expected: BTreeSet<_> = manifest.platforms.iter().collect();
    if required != expected || r.required_platforms.len() != manifest.platforms.len() {
        out.push(problem(
            "required_platforms",
            format!(
                "{:?} is not the manifest's platforms {:?}",
                r.required_platforms
                    .iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>(),
                manifest
                    .platforms
                    .iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
            ),
        ));
    }
    let names: Vec<&str> = r.packages.iter().map(|p| p.name.as_str()).collect();
    let wanted: Vec<&str> = manifest.packages.iter().map(|p| p.name.as_str()).collect();
    if names != wanted {
        out.push(problem(
            "packages",
            format!(
                "lists {:?}; the manifest's packages are {wanted:?}, each once and in order",
                names
            ),
        ));
    }
    let node_platforms: BTreeSet<_> = r.node.platforms.keys().collect();
    if node_platforms != expected {
        out.push(problem(
            "node.platforms",
            format!(
                "covers {:?}; the manifest's platforms are {:?}",
                node_platforms
                    .iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>(),
                expected.iter().map(|p| p.to_string()).collect::<Vec<_>>()
            ),
        ));
    }
    for (platform, tarball) in &r.node.platforms {
        let field = format!("node.platforms.{platform}");
        match manifest.node.packages.get(platform) {
            Some(package) if *package == tarball.package => {}
            Some(package) => out.push(problem(
                format!("{field}.package"),
                format!(
                    "`{}` is not the manifest's Node package for {platform}, `{package}`",
                    tarball.package
                ),
            )),
            None => {}
        }
        if tarball.version != r.node.version {
            out.push(problem(
                format!("{field}.version"),
                format!(
                    "`{}` differs from node.version `{}`",
                    tarball.version, r.node.version
                ),
            ));
        }
    }
    out
}

/// Every platform's smoke results cover the manifest's required checks for that platform and
/// build mode, each recorded once. Part of completeness: a receipt that lacks a check is
/// incomplete however many checks it shows passed.
pub fn smoke_coverage_problems(r: &Receipt, manifest: &Manifest) -> Vec<Problem> {
    let mut out = Vec::new();
    for (i, p) in r.platforms.iter().enumerate() {
        let required = manifest.required_smoke_checks(p.platform, p.build == BuildMode::Emulated);
        let mut seen = BTreeSet::new();
        for (j, check) in p.smoke.checks.iter().enumerate() {
            if !seen.insert(check.name.as_str()) {
                out.push(problem(
                    format!("platforms[{i}].smoke.checks[{j}].name"),
                    format!("{}: check `{}` is recorded twice", p.platform, check.name),
                ));
            }
        }
        let missing: Vec<&String> = required
            .iter()
            .filter(|name| !seen.contains(name.as_str()))
            .collect();
        if !missing.is_empty() {
            out.push(problem(
                format!("platforms[{i}].smoke.checks"),
                format!(
                    "{} ({} build) lacks the required smoke check(s) {missing:?} (see \
                     smoke_checks in {}): the image was not fully tested",
                    p.platform,
                    if p.build == BuildMode::Emulated {
                        "emulated"
                    } else {
                        "native"
                    },
                    template_formats::paths::MANIFEST,
                ),
            ));
        }
    }
    out
}

/// The release's JSON artifact files, each read as the type its writer writes. `None`: the
/// file was not available; `Err`: it is there but is not that document (why).
#[derive(Debug, Clone, Default)]
pub struct ArtifactDocuments {
    pub package_json: Option<Result<PackageJson, String>>,
    pub lockfile: Option<Result<Lockfile, String>>,
    pub inventory: Option<Result<Inventory, String>>,
}

/// The receipt's package, dependency and Node records against the release's own files:
/// package.json (the pinned top-level versions), package-lock.json (versions and integrity of
/// every package) and inventory.json (Node, the cutoff, the npm registry).
pub fn artifact_content_problems(r: &Receipt, documents: &ArtifactDocuments) -> Vec<Problem> {
    let mut out = Vec::new();
    let mut readable = |name: &str, why: &String| {
        out.push(problem(
            "artifacts",
            format!("`{name}` is not the document this tool writes under that name: {why}"),
        ))
    };
    let package_json = match &documents.package_json {
        Some(Err(why)) => {
            readable("package.json", why);
            None
        }
        other => other.as_ref().and_then(|d| d.as_ref().ok()),
    };
    let lockfile = match &documents.lockfile {
        Some(Err(why)) => {
            readable("package-lock.json", why);
            None
        }
        other => other.as_ref().and_then(|d| d.as_ref().ok()),
    };
    let inventory = match &documents.inventory {
        Some(Err(why)) => {
            readable("inventory.json", why);
            None
        }
        other => other.as_ref().and_then(|d| d.as_ref().ok()),
    };
    if let Some(package_json) = package_json {
        let deps = &package_json.dependencies;
        for (i, p) in r.packages.iter().enumerate() {
            let pinned = deps.get(&p.name).map(String::as_str);
            if pinned != Some(p.version.as_str()) {
                out.push(problem(
                    format!("packages[{i}].version"),
                    format!(
                        "`{}` {} is not what package.json pins ({})",
                        p.name,
                        p.version,
                        pinned.unwrap_or("nothing")
                    ),
                ));
            }
        }
        let listed: BTreeSet<&str> = r.packages.iter().map(|p| p.name.as_str()).collect();
        for name in deps.keys() {
            if !listed.contains(name.as_str()) {
                out.push(problem(
                    "packages",
                    format!("has no record of `{}`, which package.json pins", name),
                ));
            }
        }
    }
    if let Some(lock) = lockfile {
        let mut check = |field: String, path: &str, version: &str, integrity: &str| {
            let entry = lock.packages.get(path);
            let locked_version = entry.and_then(|e| e.version.as_deref());
            let locked_integrity = entry.and_then(|e| e.integrity.as_deref());
            if locked_version != Some(version) {
                out.push(problem(
                    format!("{field}.version"),
                    format!(
                        "{} is {}, but package-lock.json locks {} at {}",
                        path,
                        version,
                        path,
                        locked_version.unwrap_or("nothing")
                    ),
                ));
            }
            if locked_integrity != Some(integrity) {
                out.push(problem(
                    format!("{field}.integrity"),
                    format!("differs from package-lock.json's integrity of {}", path),
                ));
            }
        };
        for (i, p) in r.packages.iter().enumerate() {
            check(
                format!("packages[{i}]"),
                &format!("node_modules/{}", p.name),
                &p.version,
                &p.integrity,
            );
        }
        for (i, d) in r.dependencies.iter().enumerate() {
            check(
                format!("dependencies[{i}]"),
                &d.path,
                &d.version,
                &d.integrity,
            );
        }
    }
    if let Some(inventory) = inventory {
        let node = &inventory.node;
        out.extend(differs(
            "node.version",
            &r.node.version,
            &node.version,
            "Node",
        ));
        let same = |record: &TarballRecord, t: &Tarball| {
            t.package == record.package
                && t.version == record.version
                && t.integrity == record.integrity
        };
        if !same(&r.node.npm, &node.npm) {
            out.push(problem(
                "node.npm",
                "differs from inventory.json's npm (package, version or integrity)",
            ));
        }
        let inventory_platforms: BTreeSet<String> =
            node.platforms.keys().map(|p| p.to_string()).collect();
        let receipt_platforms: BTreeSet<String> =
            r.node.platforms.keys().map(|p| p.to_string()).collect();
        if inventory_platforms != receipt_platforms {
            out.push(problem(
                "node.platforms",
                format!(
                    "covers {receipt_platforms:?}; inventory.json's Node covers \
                     {inventory_platforms:?}"
                ),
            ));
        }
        for (platform, record) in &r.node.platforms {
            if let Some(theirs) = node.platforms.get(platform) {
                if !same(record, theirs) {
                    out.push(problem(
                        format!("node.platforms.{platform}"),
                        "differs from inventory.json's Node tarball (package, version or \
                         integrity)",
                    ));
                }
            }
        }
        let cutoff = template_formats::model::rfc3339(inventory.cutoff);
        out.extend(differs(
            "resolver.cutoff",
            &r.resolver.cutoff,
            &cutoff,
            "cutoff",
        ));
        out.extend(differs(
            "resolver.registry",
            &r.resolver.registry,
            &inventory.registry,
            "registry",
        ));
    }
    out
}

/// A problem when the receipt's copy (`ours`) of a value of inventory.json (`theirs`, its
/// `what`) differs from it.
fn differs(field: &str, ours: &str, theirs: &str, what: &str) -> Option<Problem> {
    (ours != theirs).then(|| {
        problem(
            field,
            format!("`{ours}` is not inventory.json's {what} {theirs}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receipt::tests_support::{repo_root, sample};
    use template_formats::paths::MANIFEST;

    #[test]
    fn tool_times_are_utc_whole_seconds() {
        assert!(parse_tool_time("2026-11-30T06:30:00Z").is_some());
        assert!(parse_tool_time("2026-11-30T06:30:00+00:00").is_none());
        assert!(parse_tool_time("2026-11-30T07:30:00+01:00").is_none());
        assert!(parse_tool_time("2026-11-30T06:30:00.5Z").is_none());
        assert!(parse_tool_time("2026-11-30").is_none());
    }

    /// The committed manifest as a release's asset, and as a checkout's.
    pub fn committed(from_release: bool) -> ReceiptPolicy {
        let path = repo_root().join(MANIFEST);
        if from_release {
            ReceiptPolicy::release_asset(&path).unwrap()
        } else {
            ReceiptPolicy::checkout(&path).unwrap()
        }
    }

    #[test]
    fn a_release_manifest_must_be_the_one_its_receipt_records() {
        let policy = committed(true);
        let mut r = sample();
        // The sample records sha256("manifest.yaml") for it: not the committed file's bytes.
        let problems = binding_problems(&r, &policy);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].field, "artifacts[4].sha256");
        assert!(problems[0].problem.contains("not this release's"));

        for a in &mut r.artifacts {
            if a.name == MANIFEST_ASSET {
                a.sha256 = policy.sha256.clone();
            }
        }
        assert!(binding_problems(&r, &policy).is_empty());

        r.artifacts.retain(|a| a.name != MANIFEST_ASSET);
        assert_eq!(binding_problems(&r, &policy)[0].field, "artifacts");
        // The maintainer's checkout judges any receipt by today's rules.
        assert!(binding_problems(&r, &committed(false)).is_empty());
    }

    #[test]
    fn the_verifier_has_no_manifest_of_its_own() {
        let err = ReceiptPolicy::for_verifier(None, None).err().unwrap();
        let text = format!("{err:#}");
        assert!(
            text.contains("--artifacts DIR") && text.contains("--manifest FILE"),
            "{text}"
        );

        let dir = tempfile::tempdir().unwrap();
        let err = ReceiptPolicy::for_verifier(None, Some(dir.path()))
            .err()
            .unwrap();
        assert!(
            format!("{err:#}").contains(&dir.path().join(MANIFEST_ASSET).display().to_string()),
            "{err:#}"
        );
        std::fs::copy(repo_root().join(MANIFEST), dir.path().join(MANIFEST_ASSET)).unwrap();
        let policy = ReceiptPolicy::for_verifier(None, Some(dir.path())).unwrap();
        assert!(policy.from_release);
        assert_eq!(policy.origin, dir.path().join(MANIFEST_ASSET));
        let explicit = ReceiptPolicy::for_verifier(
            Some(&dir.path().join(MANIFEST_ASSET)),
            Some(Path::new("/nonexistent")),
        )
        .unwrap();
        assert_eq!(explicit.sha256, policy.sha256);
    }
}
