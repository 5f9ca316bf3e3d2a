//! `cargo xtask release notes`: a release's notes from its receipt and the previous release's
//! (and the assets beside each) alone, so they can be made again and compared. The notes
//! themselves are `template_verify::notes`'s, which `release ship` and the consumer's
//! `template-verify consume` use too.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;

use template_formats::model::notes::ReleaseNotes;
use template_verify::notes::{self, ReleaseFiles};
use template_verify::receipt::policy::ReceiptPolicy;

/// The notes' forms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotesFormat {
    Markdown,
    Json,
}

/// `cargo xtask release notes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseNotesRequest {
    /// The release's receipt, its assets beside it.
    pub receipt: PathBuf,
    /// The previous release's receipt, its assets beside it.
    pub previous: Option<PathBuf>,
    pub format: NotesFormat,
}

pub fn run(request: ReleaseNotesRequest, ctx: &crate::Context) -> Result<ExitCode> {
    let policy = ReceiptPolicy::checkout(&ctx.layout.manifest())?;
    let notes = notes_of(&request.receipt, request.previous.as_deref(), &policy)?;
    match request.format {
        NotesFormat::Json => template_verify::terminal_text::print_json_escaped(&notes)?,
        NotesFormat::Markdown => print_markdown(&notes),
    }
    Ok(ExitCode::SUCCESS)
}

/// The notes of the receipt at `receipt` against the one at `previous`: each verified offline
/// (by its release's own manifest beside it, else `policy`), assets beside each.
pub(crate) fn notes_of(
    receipt: &Path,
    previous: Option<&Path>,
    policy: &ReceiptPolicy,
) -> Result<ReleaseNotes> {
    let new = notes::assets::read_release(receipt, Some(policy))?;
    let previous: Option<ReleaseFiles> = previous
        .map(|p| notes::assets::read_release(p, Some(policy)))
        .transpose()?;
    Ok(notes::build(&new, previous.as_ref()))
}

/// The Markdown (whose rendering escapes what a terminal must not see).
pub(crate) fn print_markdown(notes: &ReleaseNotes) {
    print!("{}", notes::markdown::render(notes));
}
