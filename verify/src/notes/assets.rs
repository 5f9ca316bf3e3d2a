//! One release's files as the notes read them (the IO edge of `notes`): its receipt, verified
//! offline, and the assets beside it, each read under its fixed name and taken only when its
//! sha256 is the one the receipt records.

use std::path::Path;

use anyhow::{bail, Context, Result};

use super::ReleaseFiles;
use crate::receipt::policy::ReceiptPolicy;
use crate::receipt::verify::verify_file;
use crate::receipt::MANIFEST_ASSET;
use template_formats::bounded_read::{read_regular, MAX_PARSED_ARTIFACT_BYTES};
use template_formats::hash::sha256_hex;
use template_formats::manifest::Manifest;
use template_formats::model::inventory::Inventory;
use template_formats::model::receipt::Receipt;
use template_formats::model::transcript::{transcripts_file_name, Transcripts};

/// The receipt at `path`, verified offline (by its release's own `manifest.yaml` beside it,
/// else by `fallback`), and the assets in its folder. A receipt that does not verify is an
/// error naming its problems: notes are not made from it.
pub fn read_release(path: &Path, fallback: Option<&ReceiptPolicy>) -> Result<ReleaseFiles> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let own = dir.join(MANIFEST_ASSET);
    let own_policy;
    let policy = if own.is_file() {
        own_policy = ReceiptPolicy::release_asset(&own)?;
        &own_policy
    } else {
        match fallback {
            Some(policy) => policy,
            None => bail!(
                "{} has no {MANIFEST_ASSET} beside it to judge it by: keep the release's assets \
                 in the receipt's folder",
                path.display()
            ),
        }
    };
    let verification = verify_file(path, None, policy)?;
    let Some(receipt) = verification.receipt.filter(|_| verification.valid) else {
        let problems: Vec<String> = verification
            .problems
            .iter()
            .map(|p| format!("{}: {}", p.field, p.problem))
            .collect();
        bail!(
            "{} does not verify, so no notes are made from it: {}",
            path.display(),
            crate::terminal_text::escape(&problems.join("; "))
        );
    };
    Ok(release_in(receipt, dir))
}

/// A verified receipt and the assets in `dir`.
pub fn release_in(receipt: Receipt, dir: &Path) -> ReleaseFiles {
    let transcripts = receipt
        .platforms
        .iter()
        .filter_map(|p| {
            let asset = p.transcripts.as_ref()?;
            let name = transcripts_file_name(p.platform);
            let read = read_asset(dir, &name, &asset.sha256)
                .and_then(|bytes| Transcripts::from_bytes(&bytes, p.platform));
            Some((p.platform, read))
        })
        .collect();
    let recorded = |name: &str| {
        receipt
            .artifacts
            .iter()
            .find(|a| a.name == name)
            .map(|a| a.sha256.clone())
            .ok_or_else(|| format!("the receipt records no `{name}`"))
    };
    let manifest = recorded(MANIFEST_ASSET)
        .and_then(|sha| read_asset(dir, MANIFEST_ASSET, &sha))
        .and_then(|bytes| {
            let text = String::from_utf8(bytes).map_err(|_| "not UTF-8".to_string())?;
            Manifest::parse(&text, &dir.join(MANIFEST_ASSET)).map_err(|e| format!("{e:#}"))
        });
    let inventory = recorded("inventory.json")
        .and_then(|sha| read_asset(dir, "inventory.json", &sha))
        .and_then(|bytes| serde_json::from_slice::<Inventory>(&bytes).map_err(|e| e.to_string()));
    ReleaseFiles {
        receipt,
        transcripts,
        manifest,
        inventory,
    }
}

/// The bytes of `dir/name` when their sha256 is `sha256`; otherwise why not.
fn read_asset(dir: &Path, name: &str, sha256: &str) -> Result<Vec<u8>, String> {
    let path = dir.join(name);
    let bytes = read_regular(&path, MAX_PARSED_ARTIFACT_BYTES, "release asset")
        .with_context(|| format!("`{name}` is not beside the receipt"))
        .map_err(|e| format!("{e:#}"))?;
    let actual = sha256_hex(&bytes);
    if actual != sha256 {
        return Err(format!(
            "`{name}` has sha256 {actual}, the receipt records {sha256}"
        ));
    }
    Ok(bytes)
}
