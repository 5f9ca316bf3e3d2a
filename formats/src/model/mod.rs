//! The files that pass between stages, one type each, shared by the stage that writes the file
//! and every stage that reads it. `model` depends on nothing else of ours: it is the
//! vocabulary the other folders speak. A format changes by its version (`schema_version`,
//! [`plan::PLAN_SCHEMA_VERSION`], [`platform_results::RESULTS_SCHEMA_VERSION`]), never by a
//! reader keeping a lenient copy of a type.
//!
//! Which file each type is, who writes it and who reads it: the one data-flow table, in
//! ARCHITECTURE.md ("Data flow"); `data_flow_table` below keeps it true.
//!
//! Times are `DateTime<Utc>` and chosen versions `semver::Version`, except in the receipt,
//! which is verified on its exact bytes and so keeps the strings it was written with.

pub mod build;
pub mod digest;
pub mod gate;
pub mod install_scripts;
pub mod inventory;
pub mod lockfile;
pub mod notes;
pub mod package_json;
pub mod plan;
pub mod platform;
pub mod platform_results;
pub mod publish;
pub mod receipt;
pub mod resolution;
pub mod smoke;
pub mod tag;
pub mod transcript;
pub mod trust;

pub use digest::Digest;
pub use platform::Platform;

/// A time as every file of ours writes it: RFC 3339, UTC, whole seconds, `Z` (what serde
/// writes for these types, for the places that print one).
pub fn rfc3339(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[cfg(test)]
mod data_flow_table {
    //! ARCHITECTURE.md's data-flow table names, for each file, the type it is read and written
    //! as. The types are named here through the compiler (`type_name`), so a renamed or moved
    //! type breaks this file, and the table must say the same.

    use std::any::type_name;
    use std::path::Path;

    /// (file, its type), as the code has them.
    fn files() -> Vec<(&'static str, &'static str)> {
        vec![
            ("gate.json", type_name::<super::gate::GateDecision>()),
            ("resolve.json", type_name::<super::resolution::Resolution>()),
            (
                "template/package.json",
                type_name::<super::package_json::PackageJson>(),
            ),
            (
                "template/package-lock.json",
                type_name::<super::lockfile::Lockfile>(),
            ),
            (
                "template/inventory.json",
                type_name::<super::inventory::Inventory>(),
            ),
            (
                "build-<arch>.json",
                type_name::<super::build::BuildReport>(),
            ),
            (
                "smoke-<arch>.json",
                type_name::<super::smoke::SmokeReport>(),
            ),
            (
                "sbom-<os>-<arch>.spdx.json",
                type_name::<crate::sbom::spdx::Document>(),
            ),
            (
                "sbom-<os>-<arch>.cdx.json",
                type_name::<cyclonedx_bom::models::bom::Bom>(),
            ),
            (
                "pushed-<arch>.json",
                type_name::<super::publish::PublishReport>(),
            ),
            ("publish.json", type_name::<super::publish::PublishReport>()),
            ("plan.json", type_name::<super::plan::ReleasePlan>()),
            (
                "results-<os>-<arch>.json",
                type_name::<super::platform_results::PlatformResults>(),
            ),
            (
                "receipt-<tag>-<sha256>.json",
                type_name::<super::receipt::Receipt>(),
            ),
            (
                "transcripts-<os>-<arch>.json",
                type_name::<super::transcript::Transcripts>(),
            ),
            ("notes.json", type_name::<super::notes::ReleaseNotes>()),
        ]
    }

    /// The rows of the first table after `## Data flow`: (each file the first cell names in
    /// backquotes, the type the second cell names first in backquotes).
    fn table(text: &str) -> Vec<(String, String)> {
        let section = &text[text.find("## Data flow").expect("a `## Data flow` section")..];
        let quoted = |cell: &str| -> Vec<String> {
            cell.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_owned)
                .collect()
        };
        let mut rows = Vec::new();
        for line in section
            .lines()
            .skip_while(|l| !l.starts_with('|'))
            .take_while(|l| l.starts_with('|'))
            .skip(2)
        {
            let cells: Vec<&str> = line.split('|').collect();
            let ty = quoted(cells[2]).into_iter().next().unwrap_or_default();
            for file in quoted(cells[1]) {
                rows.push((file, ty.clone()));
            }
        }
        rows
    }

    /// `template_formats::model::gate::GateDecision` as the table writes it: without the
    /// crate, `model::gate::GateDecision`; a type of another crate keeps its crate.
    fn as_written(full: &str) -> String {
        full.strip_prefix("template_formats::")
            .unwrap_or(full)
            .to_owned()
    }

    fn mismatches(rows: &[(String, String)]) -> Vec<String> {
        let expected: Vec<(String, String)> = files()
            .into_iter()
            .map(|(f, t)| (f.to_owned(), as_written(t)))
            .collect();
        let mut problems = Vec::new();
        for (file, ty) in &expected {
            match rows.iter().find(|(f, _)| f == file) {
                None => problems.push(format!("no row for `{file}` (it is `{ty}`)")),
                Some((_, written)) if written != ty => {
                    problems.push(format!("`{file}` is `{ty}`, the table says `{written}`"))
                }
                Some(_) => {}
            }
        }
        for (file, _) in rows {
            if !expected.iter().any(|(f, _)| f == file) {
                problems.push(format!(
                    "the table names `{file}`, which this test does not know"
                ));
            }
        }
        problems
    }

    #[test]
    fn the_data_flow_table_names_each_file_with_its_type() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ARCHITECTURE.md");
        let text = std::fs::read_to_string(&path).unwrap();
        let problems = mismatches(&table(&text));
        assert!(
            problems.is_empty(),
            "ARCHITECTURE.md's data-flow table disagrees with the code:\n{}",
            problems.join("\n")
        );
    }

    #[test]
    fn a_stale_row_is_reported() {
        let text = "## Data flow\n\n| file | type | written by | read by |\n|---|---|---|---|\n\
                    | `gate.json` | `model::gate::Gate` | `gate` | x |\n\n";
        let problems = mismatches(&table(text));
        assert!(
            problems
                .iter()
                .any(|p| p == "`gate.json` is `model::gate::GateDecision`, the table says `model::gate::Gate`"),
            "{problems:?}"
        );
        assert!(problems
            .iter()
            .any(|p| p.starts_with("no row for `plan.json`")));
    }
}
