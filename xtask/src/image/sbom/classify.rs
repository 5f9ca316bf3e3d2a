//! Full-text license classification, for the free-form copyright files that neither name a
//! license in a `License:` line nor reference /usr/share/common-licenses (the X.Org libraries'
//! MIT/X11 texts, for one). The spdx crate's matcher (askalono's n-gram scorer) against the SPDX
//! license list's own texts, as trivy does with `--license-full` (google/licenseclassifier):
//! each license whose text the file holds with at least [`CONFIDENCE`] of its n-grams.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use spdx::detection::scan::Scanner;
use spdx::detection::{Store, TextData};

/// The share of a license's text that must match: askalono's own default is 0.9; 0.8 accepts a
/// license with its copyright lines and a few words changed, as Debian's files carry them.
const CONFIDENCE: f32 = 0.8;

/// SPDX license-list ids that the spdx crate (0.13.6) knows but validators in use do not yet:
/// each of these fails pyspdxtools 0.8.5's check ("Unrecognized license reference"; its list
/// comes from the license-expression package it pins). Measured by validating every id of the
/// crate's list with spdx-tools 0.8.5. A file that matches one of these texts is left to the
/// next best match, or to NOASSERTION.
pub(crate) const NOT_YET_IN_VALIDATORS: &[&str] = &[
    "ALGLIB-Documentation",
    "Advanced-Cryptics-Dictionary",
    "BOLA-1.1",
    "BSD-2-Clause-pos-unchanged",
    "BSD-3-Clause-OpenWebUI",
    "BSD-3-Clause-Tso",
    "BSD-Mark-Modifications",
    "BSD-Source-Code-no-disclaimer",
    "BSD-Source-alt-GPL",
    "BSD-ask-to-endorse",
    "Brian-Gladman-3-Clause-no-conversion",
    "Buddy",
    "Bugroff",
    "CAPEC-tou",
    "CC-BY-NC-3.0-IGO",
    "ESA-PL-permissive-2.4",
    "ESA-PL-strong-copyleft-2.4",
    "ESA-PL-weak-copyleft-2.4",
    "FDK-MPEG-H",
    "GFDL-1.1-invariants",
    "GFDL-1.1-no-invariants",
    "GFDL-1.2-invariants",
    "GFDL-1.2-no-invariants",
    "GFDL-1.3-invariants",
    "GFDL-1.3-no-invariants",
    "GPL-2.0-with-GCC-exception",
    "GPL-2.0-with-autoconf-exception",
    "GPL-2.0-with-bison-exception",
    "GPL-2.0-with-classpath-exception",
    "GPL-2.0-with-font-exception",
    "GPL-3.0-with-GCC-exception",
    "GPL-3.0-with-autoconf-exception",
    "HPND-SMC",
    "HPND-sell-variant-critical-systems",
    "Hippocratic-3.0-core",
    "ISO-permission",
    "Informatica",
    "MIT-STK",
    "MMPL-1.0.1",
    "MPL-2.0-no-copyleft-exception",
    "MVT-1.1",
    "NIST-PD-TNT",
    "OSC-1.0",
    "OSSP",
    "OpenMDW-1.0",
    "ParaType-Free-Font-1.3",
    "SGMLUG-PM",
    "TekHVC",
    "UnRAR",
    "Vixie-Cron",
    "WTFNMFPL",
    "WordNet",
    "X11-no-permit-persons",
    "atc-game",
    "eCos-2.0",
    "hyphen-bulgarian",
];

/// The SPDX list's texts, each once: a deprecated id, or an id whose text another id already
/// has (`GPL-2.0-only` and `GPL-2.0-or-later`), is left out, so no two entries tie.
fn store() -> &'static Store {
    static STORE: OnceLock<Store> = OnceLock::new();
    STORE.get_or_init(|| {
        let mut store = Store::new();
        let mut seen = BTreeSet::new();
        for (name, text) in spdx::text::LICENSE_TEXTS {
            let Some(id) = spdx::license_id(name) else {
                continue;
            };
            if id.is_deprecated() || NOT_YET_IN_VALIDATORS.contains(name) || !seen.insert(*text) {
                continue;
            }
            store.add_license(name.to_string(), TextData::new(text));
        }
        store
    })
}

/// How a permission notice starts: the files that concatenate many (the X.Org libraries',
/// one notice per contributor, each with its own copyright lines) match no license as a whole.
const NOTICE_STARTS: &[&str] = &[
    "permission ",
    "redistribution and use",
    "this software is provided",
];

/// The licenses of the notices in a file, each notice read on its own: a paragraph that starts
/// like one, with the one or two paragraphs after it (a notice's disclaimer), the best match
/// at [`CONFIDENCE`] or more.
fn notices(text: &str) -> BTreeSet<&'static str> {
    let paragraphs: Vec<String> = text
        .split("\n\n")
        .map(|p| p.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|p| !p.is_empty())
        .collect();
    let mut out = BTreeSet::new();
    let mut seen = BTreeSet::new();
    for (i, p) in paragraphs.iter().enumerate() {
        let lower = p.to_ascii_lowercase();
        if !NOTICE_STARTS.iter().any(|s| lower.starts_with(s)) {
            continue;
        }
        let mut best: Option<(f32, &'static str)> = None;
        for k in 1..=3 {
            let Some(window) = paragraphs.get(i..i + k) else {
                break;
            };
            let window = window.join("\n\n");
            if !seen.insert(window.clone()) {
                continue;
            }
            let found = store().analyze(&TextData::new(&window));
            if found.score >= CONFIDENCE && best.is_none_or(|(s, _)| found.score > s) {
                best = Some((found.score, found.name));
            }
        }
        out.extend(best.map(|(_, name)| name));
    }
    out
}

/// The SPDX ids of the license texts `text` holds; a GNU license's `-only` id is made
/// `-or-later` when the file grants "any later version".
pub(crate) fn classify(text: &str) -> BTreeSet<String> {
    let scanner = Scanner::new(store())
        .confidence_threshold(CONFIDENCE)
        .optimize(true)
        .shallow_limit(0.99)
        .max_passes(10);
    let result = scanner.scan(&TextData::new(text));
    let mut names: BTreeSet<&str> = result.containing.iter().map(|c| c.license.name).collect();
    if let Some(license) = result.license.filter(|_| result.score >= CONFIDENCE) {
        names.insert(license.name);
    }
    if names.is_empty() {
        names = notices(text);
    }
    let later = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_ascii_lowercase()
        .contains("any later version");
    names
        .into_iter()
        .map(|name| match name.strip_suffix("-only") {
            Some(base) if later => format!("{base}-or-later"),
            _ => name.to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_license_text_among_copyright_lines_is_recognised() {
        let mit = spdx::text::LICENSE_TEXTS
            .iter()
            .find(|(n, _)| *n == "MIT")
            .unwrap()
            .1;
        let file = format!(
            "This package was debianized by someone.\n\nCopyright 1999 The Open Group\n\n{mit}\n"
        );
        assert_eq!(classify(&file), BTreeSet::from(["MIT".to_string()]));
        assert!(classify("Copyright 1999 someone. All rights reserved.\n").is_empty());
        // Two notices among many copyright lines, as the X.Org libraries' files hold them.
        let isc = spdx::text::LICENSE_TEXTS
            .iter()
            .find(|(n, _)| *n == "ISC")
            .unwrap()
            .1;
        let many = format!(
            "Copyright 1 A\nCopyright 2 B\n\n{mit}\n\n----\n\nCopyright 3 C\n\n{isc}\n\n\
             ----\n\nCopyright 4 D\n\nSee the file COPYING for more.\n"
        );
        assert_eq!(
            classify(&many),
            BTreeSet::from(["ISC".to_string(), "MIT".to_string()])
        );
    }
}
