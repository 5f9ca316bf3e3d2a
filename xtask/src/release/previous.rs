//! The previous release: the newest receipt that verifies.
//!
//! Both the gate (catch-up after dropped runs) and the plan ("nothing changed", "what changed")
//! measure against the previous release. Whatever lies around — several receipts after a
//! re-run, a truncated download, a hand-edited file — the answer must be the same: receipts
//! that do not verify are reported and ignored, and the newest `created_at` among the rest
//! wins. Files that are not receipts at all are an error only when named explicitly.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use template_formats::model::receipt::Receipt;
use template_verify::receipt::policy::ReceiptPolicy;
use template_verify::receipt::verify::verify_file;

/// A receipt that verified, and where it was.
#[derive(Debug, Clone)]
pub(crate) struct PreviousRelease {
    pub path: PathBuf,
    pub receipt: Receipt,
}

/// The outcome of looking at the candidates.
#[derive(Debug, Default)]
pub(crate) struct Selection {
    pub newest: Option<PreviousRelease>,
    /// One line per candidate that was ignored, naming the file and why.
    pub ignored: Vec<String>,
}

/// The candidate whose receipt is newest, among those that verified. Pure over its input:
/// `(path, Ok(receipt) | Err(why it did not verify))`.
pub(crate) fn pick_newest(candidates: Vec<(PathBuf, Result<Receipt, String>)>) -> Selection {
    let mut selection = Selection::default();
    for (path, verdict) in candidates {
        match verdict {
            Err(why) => selection
                .ignored
                .push(format!("{}: ignored, {why}", path.display())),
            Ok(receipt) => {
                let newer = selection
                    .newest
                    .as_ref()
                    .is_none_or(|n| created_at(&receipt) > created_at(&n.receipt));
                if newer {
                    selection.newest = Some(PreviousRelease { path, receipt });
                }
            }
        }
    }
    selection
}

fn created_at(receipt: &Receipt) -> Option<chrono::DateTime<chrono::Utc>> {
    receipt.created_at.parse().ok()
}

/// Verifies each file (without its artifacts: only the receipt itself is at hand) and picks
/// the newest that verifies.
pub(crate) fn newest_verified(paths: &[PathBuf], policy: &ReceiptPolicy) -> Result<Selection> {
    let mut candidates = Vec::new();
    for path in paths {
        let verification = verify_file(path, None, policy)?;
        let verdict = match (verification.valid, verification.receipt) {
            (true, Some(receipt)) => Ok(receipt),
            _ => Err(verification
                .problems
                .iter()
                .map(|p| format!("{}: {}", p.field, p.problem))
                .collect::<Vec<_>>()
                .join("; ")),
        };
        candidates.push((path.clone(), verdict));
    }
    Ok(pick_newest(candidates))
}

/// Where `release plan` keeps the previous release's receipt and assets, in the plan
/// directory: the ship phase (another job of the workflow) makes the release notes from them.
pub(crate) const PREVIOUS_DIR: &str = "previous";

/// The release assets the notes read beside a receipt, besides each platform's transcripts.
const NOTES_ASSETS: [&str; 2] = ["manifest.yaml", "inventory.json"];

/// Copies the previous release's receipt and the assets the notes read beside it (those
/// present) into `<out>/previous/`, replacing what an earlier plan put there (none stays when
/// there is no previous release).
pub(crate) fn keep_for_notes(previous: Option<&PreviousRelease>, out: &Path) -> Result<()> {
    let dir = out.join(PREVIOUS_DIR);
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .with_context(|| format!("cannot remove {}", dir.display()))?;
    }
    let Some(previous) = previous else {
        return Ok(());
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let from = previous.path.parent().unwrap_or(Path::new("."));
    let transcripts = previous
        .receipt
        .platforms
        .iter()
        .map(|p| template_formats::model::transcript::transcripts_file_name(p.platform));
    let names = NOTES_ASSETS
        .iter()
        .map(|n| n.to_string())
        .chain(transcripts);
    for name in names {
        let source = from.join(&name);
        if source.is_file() {
            std::fs::copy(&source, dir.join(&name)).with_context(|| {
                format!("cannot copy {} into {}", source.display(), dir.display())
            })?;
        }
    }
    let receipt = dir.join(previous.path.file_name().unwrap_or_default());
    std::fs::copy(&previous.path, &receipt).with_context(|| {
        format!(
            "cannot copy {} into {}",
            previous.path.display(),
            dir.display()
        )
    })?;
    Ok(())
}

/// The previous release's receipt that `release plan` kept in the plan directory, if any.
pub(crate) fn kept_for_notes(plan_dir: &Path) -> Result<Option<PathBuf>> {
    let dir = plan_dir.join(PREVIOUS_DIR);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(None);
    };
    let mut found = Vec::new();
    for entry in entries {
        let path = entry
            .with_context(|| format!("cannot list {}", dir.display()))?
            .path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if name.starts_with("receipt-") && name.ends_with(".json") {
            found.push(path);
        }
    }
    match found.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(one.clone())),
        _ => anyhow::bail!(
            "{} holds {} receipts; `release plan` keeps one there",
            dir.display(),
            found.len()
        ),
    }
}

/// `receipt-*.json` files in `dir` and in its direct subdirectories (a release's assets
/// directory), sorted; none when `dir` does not exist.
pub(crate) fn receipts_below(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries {
            let entry = entry.with_context(|| format!("cannot list {}", dir.display()))?;
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                dirs.push(entry.path());
            }
        }
    }
    for d in dirs {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries {
            let path = entry
                .with_context(|| format!("cannot list {}", d.display()))?
                .path();
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            if name.starts_with("receipt-") && name.ends_with(".json") && path.is_file() {
                found.push(path);
            }
        }
    }
    found.sort();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn receipt(created_at: &str) -> Receipt {
        let mut value: serde_json::Value =
            serde_json::from_str(include_str!("../../../tests/fixtures/receipt-minimal.json"))
                .unwrap();
        value["created_at"] = created_at.into();
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn the_newest_receipt_that_verifies_wins() {
        let selection = pick_newest(vec![
            ("a.json".into(), Ok(receipt("2026-11-24T04:40:00Z"))),
            ("b.json".into(), Err("sha256: does not match".into())),
            ("c.json".into(), Ok(receipt("2026-11-27T04:40:00Z"))),
            ("d.json".into(), Ok(receipt("2026-11-21T04:40:00Z"))),
        ]);
        assert_eq!(selection.newest.unwrap().path, PathBuf::from("c.json"));
        assert_eq!(selection.ignored.len(), 1);
        assert!(selection.ignored[0].starts_with("b.json: ignored, sha256"));
    }

    #[test]
    fn nothing_verifies_means_no_previous_release() {
        let selection = pick_newest(vec![("b.json".into(), Err("schema".into()))]);
        assert!(selection.newest.is_none());
        assert!(pick_newest(vec![]).newest.is_none());
    }
}
