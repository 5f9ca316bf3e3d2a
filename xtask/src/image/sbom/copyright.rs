//! Debian copyright files (`/usr/share/doc/<pkg>/copyright`): the license a package declares.
//!
//! Read as established scanners read them (trivy v0.74, pkg/fanal/analyzer/pkg/dpkg/
//! copyright.go: every `License:` line, and every `/usr/share/common-licenses/<name>`
//! reference), with two differences that keep the result an SPDX expression: a machine-readable
//! (DEP-5) file is read paragraph by paragraph, each `License:` synopsis becoming one term of
//! the package's expression, and a name with no SPDX identifier becomes a `LicenseRef-` (defined
//! in the document) rather than making the whole file unreadable. Free-form files give the
//! licenses they reference or spell out in `License:` lines, else the license texts they hold
//! ([`super::classify`]).

use std::collections::{BTreeMap, BTreeSet};

use template_formats::sbom::spdx::NOASSERTION;

/// Where a declared license came from; it decides `licenseConcluded` (see
/// [`concluded_license`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Evidence {
    /// The `License:` fields of a machine-readable (DEP-5) copyright file: the maintainer's
    /// own statement in the format made for it.
    MachineReadable,
    /// Read out of a free-form file's prose: its references to `/usr/share/common-licenses`
    /// or `License:` lines. An inference, not a statement.
    Prose,
}

/// What goes in `licenseConcluded`, decided here once: the declared license where the
/// package's own machine-readable metadata states it (a DEP-5 copyright file's `License:`
/// fields, package.json's `license`): this tool analysed no file, and concludes that a package
/// is under what its maintainers declared in the format made for declaring it. NOASSERTION
/// where the declared license was read out of prose (a free-form copyright file's references
/// to /usr/share/common-licenses): an inference is not a conclusion. NOASSERTION when nothing
/// is declared.
pub(crate) fn concluded_license(declared: &str, evidence: Evidence) -> String {
    match evidence {
        Evidence::MachineReadable if declared != NOASSERTION => declared.to_string(),
        _ => NOASSERTION.to_string(),
    }
}

/// The license a copyright file declares: an SPDX expression and the `LicenseRef-` ids it
/// uses, each with the Debian name it stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Declared {
    pub expression: String,
    pub license_refs: BTreeMap<String, String>,
    pub evidence: Evidence,
}

/// A DEP-5 file: its header names the copyright-format (or the older DEP-5 draft URLs).
fn is_machine_readable(header: &str) -> bool {
    header.lines().any(|l| {
        (l.starts_with("Format:") || l.starts_with("Format-Specification:"))
            && (l.contains("copyright-format") || l.contains("dep5") || l.contains("dep.debian"))
    })
}

/// deb822 paragraphs: separated by lines that are empty or hold only white space.
fn paragraphs(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
        } else {
            current.push_str(line);
            current.push('\n');
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// The first line of a paragraph's `License:` field (its synopsis), when it has one.
fn license_synopsis(paragraph: &str) -> Option<&str> {
    paragraph
        .lines()
        .find_map(|l| l.strip_prefix("License:"))
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

fn has_field(paragraph: &str, name: &str) -> bool {
    paragraph
        .lines()
        .any(|l| l.strip_prefix(name).is_some_and(|r| r.starts_with(':')))
}

/// The declared license of a copyright file, or `None` when it names none.
pub(crate) fn declared_license(text: &str) -> Option<Declared> {
    let paragraphs = paragraphs(text);
    let header = paragraphs.first()?;
    let (synopses, evidence) = if is_machine_readable(header) {
        // The header's License applies to the whole package; each Files paragraph's to its
        // files. Stand-alone License paragraphs only give the texts of names used above,
        // unless nothing else names a license.
        let mut synopses: Vec<&str> = paragraphs
            .iter()
            .enumerate()
            .filter(|(i, p)| *i == 0 || has_field(p, "Files"))
            .filter_map(|(_, p)| license_synopsis(p))
            .collect();
        if synopses.is_empty() {
            synopses = paragraphs
                .iter()
                .filter_map(|p| license_synopsis(p))
                .collect();
        }
        (
            synopses.into_iter().map(str::to_string).collect(),
            Evidence::MachineReadable,
        )
    } else {
        let mut names = prose_licenses(text);
        if names.is_empty() {
            names = super::classify::classify(text).into_iter().collect();
        }
        (names, Evidence::Prose)
    };
    let mut terms = BTreeSet::new();
    let mut license_refs = BTreeMap::new();
    for synopsis in &synopses {
        let (expression, refs) = debian_expression(synopsis);
        terms.insert(expression);
        license_refs.extend(refs);
    }
    if terms.is_empty() {
        return None;
    }
    let expression = join(terms.into_iter().collect(), "AND");
    debug_assert!(spdx::Expression::parse(&expression).is_ok(), "{expression}");
    Some(Declared {
        expression,
        license_refs,
        evidence,
    })
}

/// A free-form file's licenses: the names it references under /usr/share/common-licenses
/// (trivy's pattern), and its `License:` lines. GNU names referenced this way carry no
/// `+`; they are read as "or later" when the file grants "any later version".
fn prose_licenses(text: &str) -> Vec<String> {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let later = flat.to_ascii_lowercase().contains("any later version");
    let mut out = BTreeSet::new();
    for line in text.lines() {
        // In prose a `License:` line may start a sentence ("License: Permission to use, ...");
        // only a line that is a license name, or an expression of listed ones, counts.
        if let Some(l) = line.trim_start().strip_prefix("License:") {
            let l = l.trim();
            let (_, refs) = debian_expression(l);
            if !l.is_empty() && (refs.is_empty() || !l.contains(char::is_whitespace)) {
                out.insert(l.to_string());
            }
        }
    }
    let mut rest = flat.as_str();
    while let Some(at) = rest.find("/usr/share/common-licenses/") {
        rest = &rest[at + "/usr/share/common-licenses/".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || "_.+-".contains(*c))
            .collect();
        // A sentence's full stop is not part of the name (`.../GPL-2.`).
        let name = name.trim_end_matches(['.', '-', '_']);
        if name.is_empty() {
            continue;
        }
        // Debian 12's base-files: GPL -> GPL-3, LGPL -> LGPL-3, GFDL -> GFDL-1.3 (links).
        let name = match name {
            "GPL" => "GPL-3",
            "LGPL" => "LGPL-3",
            "GFDL" => "GFDL-1.3",
            other => other,
        };
        let gnu = ["GPL", "LGPL", "AGPL", "GFDL"]
            .iter()
            .any(|g| name.starts_with(&format!("{g}-")));
        if name == "BSD" {
            out.insert("BSD-3-clause".to_string());
        } else if later && gnu && !name.ends_with('+') {
            out.insert(format!("{name}+"));
        } else {
            out.insert(name.to_string());
        }
    }
    out.into_iter().collect()
}

/// Joins SPDX expressions with an operator, each compound one in parentheses.
fn join(terms: Vec<String>, operator: &str) -> String {
    if terms.len() == 1 {
        return terms.into_iter().next().unwrap();
    }
    terms
        .iter()
        .map(|t| {
            if t.contains(' ') {
                format!("({t})")
            } else {
                t.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(&format!(" {operator} "))
}

/// A DEP-5 license synopsis as an SPDX expression, with the LicenseRefs it needed.
/// `GPL-2+ or Artistic, and BSD-3-clause` -> `(GPL-2.0-or-later OR Artistic-1.0) AND
/// BSD-3-Clause` (the comma separates parts of lower precedence, copyright-format 1.0,
/// "License specification"); `GPL-2+ with OpenSSL exception` -> one LicenseRef, because SPDX
/// 2.3's `WITH` takes only listed exceptions. Whatever cannot be parsed becomes one LicenseRef
/// of the whole synopsis: never dropped.
pub(crate) fn debian_expression(synopsis: &str) -> (String, BTreeMap<String, String>) {
    let mut refs = BTreeMap::new();
    let mut result: Option<String> = None;
    for (i, group) in synopsis.split(',').enumerate() {
        let mut words: Vec<&str> = group.split_whitespace().collect();
        let mut operator = "AND";
        if i > 0 {
            match words.first().map(|w| w.to_ascii_lowercase()) {
                Some(w) if w == "and" || w == "or" => {
                    operator = if w == "or" { "OR" } else { "AND" };
                    words.remove(0);
                }
                _ => {}
            }
        }
        if words.is_empty() {
            continue;
        }
        let Some(expression) = group_expression(&words, &mut refs) else {
            return whole_as_ref(synopsis);
        };
        result = Some(match result {
            None => expression,
            Some(previous) => join(vec![previous, expression], operator),
        });
    }
    match result {
        Some(e) if spdx::Expression::parse(&e).is_ok() => (e, refs),
        _ => whole_as_ref(synopsis),
    }
}

fn whole_as_ref(synopsis: &str) -> (String, BTreeMap<String, String>) {
    let id = license_ref(synopsis);
    (id.clone(), BTreeMap::from([(id, synopsis.to_string())]))
}

/// `A or B and C with D exception`: terms separated by `and`/`or`; a term is a name with an
/// optional `with <exception words>`.
fn group_expression(words: &[&str], refs: &mut BTreeMap<String, String>) -> Option<String> {
    let mut out = Vec::new();
    let mut term: Vec<&str> = Vec::new();
    let flush = |term: &mut Vec<&str>, out: &mut Vec<String>, refs: &mut BTreeMap<_, _>| {
        if term.is_empty() {
            return false;
        }
        out.push(term_expression(term, refs));
        term.clear();
        true
    };
    for word in words {
        match word.to_ascii_lowercase().as_str() {
            op @ ("and" | "or") => {
                if !flush(&mut term, &mut out, refs) {
                    return None;
                }
                out.push(op.to_ascii_uppercase());
            }
            _ => term.push(word),
        }
    }
    if !flush(&mut term, &mut out, refs) {
        return None;
    }
    Some(out.join(" "))
}

fn term_expression(words: &[&str], refs: &mut BTreeMap<String, String>) -> String {
    let text = words.join(" ");
    let with_at = words.iter().position(|w| w.eq_ignore_ascii_case("with"));
    let (name, exception) = match with_at {
        Some(at) => (words[..at].join(" "), Some(words[at + 1..].join(" "))),
        None => (text.clone(), None),
    };
    let id = (!name.contains(' '))
        .then(|| debian_license_id(&name))
        .flatten();
    match (id, exception) {
        (Some(id), None) => id,
        (Some(id), Some(exception)) if spdx::exception_id(&exception).is_some() => {
            format!("{id} WITH {exception}")
        }
        _ => {
            let id = license_ref(&text);
            refs.insert(id.clone(), text);
            id
        }
    }
}

/// `LicenseRef-` and the name, with the characters SPDX ids may not hold made `-`.
pub(crate) fn license_ref(name: &str) -> String {
    format!(
        "LicenseRef-{}",
        template_formats::sbom::spdx::id_chars(name.trim())
    )
}

/// An SPDX id for a Debian short name (`GPL-2+`, `Expat`, `BSD-3-clause`), `None` for a name
/// SPDX does not list.
fn debian_license_id(name: &str) -> Option<String> {
    // Debian's short names (copyright-format 1.0, "License specification") that differ from
    // SPDX's; the rest are looked up as SPDX ids, in any case.
    let (base, plus) = match name.strip_suffix('+') {
        Some(base) => (base, true),
        None => (name, false),
    };
    let gnu = |id: &str, later: &str| if plus { later } else { id }.to_string();
    // Copyright files spell the same name in several cases and with or without `.0`.
    let key = base.to_ascii_lowercase();
    let key = key.strip_suffix(".0").unwrap_or(&key);
    Some(match key {
        "gpl-1" => gnu("GPL-1.0-only", "GPL-1.0-or-later"),
        "gpl-2" => gnu("GPL-2.0-only", "GPL-2.0-or-later"),
        "gpl-3" => gnu("GPL-3.0-only", "GPL-3.0-or-later"),
        "lgpl-2" => gnu("LGPL-2.0-only", "LGPL-2.0-or-later"),
        "lgpl-2.1" => gnu("LGPL-2.1-only", "LGPL-2.1-or-later"),
        "lgpl-3" => gnu("LGPL-3.0-only", "LGPL-3.0-or-later"),
        "agpl-3" => gnu("AGPL-3.0-only", "AGPL-3.0-or-later"),
        "gfdl-1.1" => gnu("GFDL-1.1-only", "GFDL-1.1-or-later"),
        "gfdl-1.2" => gnu("GFDL-1.2-only", "GFDL-1.2-or-later"),
        "gfdl-1.3" => gnu("GFDL-1.3-only", "GFDL-1.3-or-later"),
        _ => {
            let id = match key {
                "expat" => "MIT".to_string(),
                "artistic" => "Artistic-1.0".to_string(),
                "psf-2" => "PSF-2.0".to_string(),
                "apache-2" => "Apache-2.0".to_string(),
                "mpl-2" => "MPL-2.0".to_string(),
                "cc0" => "CC0-1.0".to_string(),
                _ => spdx_id_any_case(base)?,
            };
            // `+` on a license other than the GNU ones is SPDX's own "or later" operator.
            if plus {
                format!("{id}+")
            } else {
                id
            }
        }
    })
}

/// A listed SPDX license id spelled in any case, not deprecated nor too new for validators (`BSD-3-clause`, `zlib`).
fn spdx_id_any_case(name: &str) -> Option<String> {
    let found = spdx::identifiers::LICENSES
        .iter()
        .find(|l| l.name.eq_ignore_ascii_case(name))?;
    let id = spdx::license_id(found.name)?;
    let usable =
        !id.is_deprecated() && !super::classify::NOT_YET_IN_VALIDATORS.contains(&found.name);
    usable.then(|| found.name.to_string())
}

/// Package doc directory -> its copyright text, from the regular files and symbolic links under
/// /usr/share/doc: `doc/<dir>/copyright` files, and directories (or copyright files) that are
/// links to another package's (`/usr/share/doc/libgcc-s1 -> gcc-12-base`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct DocTree {
    pub copyrights: BTreeMap<String, String>,
    /// Link path below `doc/` (`libgcc-s1` or `libgcc-s1/copyright`) -> its target as stored.
    pub links: BTreeMap<String, String>,
}

impl DocTree {
    /// The copyright text of a package's doc directory, following links (a few hops, within
    /// /usr/share/doc) the way a reader of the image's file system would.
    pub(crate) fn copyright_of(&self, package: &str) -> Option<&str> {
        let mut dir = package.to_string();
        for _ in 0..8 {
            if let Some(text) = self.copyrights.get(&dir) {
                return Some(text);
            }
            let next = self
                .links
                .get(&dir)
                .map(|t| (t.as_str(), false))
                .or_else(|| {
                    self.links
                        .get(&format!("{dir}/copyright"))
                        .map(|t| (t.as_str(), true))
                })?;
            dir = resolve_link(&dir, next.0, next.1)?;
        }
        None
    }
}

/// The doc directory a link's target names: `gcc-12-base`, `/usr/share/doc/gcc-12-base`, or,
/// for a link of the copyright file itself, `../gcc-12-base/copyright`.
fn resolve_link(dir: &str, target: &str, is_file: bool) -> Option<String> {
    let target = target.trim_end_matches('/');
    let target = if is_file {
        target.strip_suffix("/copyright")?
    } else {
        target
    };
    let name = if let Some(abs) = target.strip_prefix("/usr/share/doc/") {
        abs.to_string()
    } else if is_file {
        target.strip_prefix("../")?.to_string()
    } else if !target.starts_with('/') && !target.starts_with("..") {
        target.to_string()
    } else {
        return None;
    };
    (!name.is_empty() && !name.contains('/') && name != dir).then_some(name)
}

/// The doc tree from the paths (relative, `doc/...`) and contents of /usr/share/doc's regular
/// files and links.
pub(crate) fn doc_tree(files: Vec<(String, Vec<u8>)>, links: Vec<(String, String)>) -> DocTree {
    let mut tree = DocTree::default();
    for (path, bytes) in files {
        let parts: Vec<&str> = path.split('/').collect();
        if let ["doc", name, "copyright"] = parts.as_slice() {
            tree.copyrights.insert(
                name.to_string(),
                String::from_utf8_lossy(&bytes).into_owned(),
            );
        }
    }
    for (path, target) in links {
        match path.split('/').collect::<Vec<_>>().as_slice() {
            ["doc", name] => {
                tree.links.insert(name.to_string(), target);
            }
            ["doc", name, "copyright"] => {
                tree.links.insert(format!("{name}/copyright"), target);
            }
            _ => {}
        }
    }
    tree
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::sbom::fixtures::*;

    fn expr(text: &str) -> Option<String> {
        declared_license(text).map(|d| d.expression)
    }

    #[test]
    fn dep5_paragraphs_each_give_a_term() {
        let d = declared_license(DEP5).unwrap();
        assert_eq!(
            d.expression,
            "(GPL-2.0-or-later OR Artistic-1.0) AND LGPL-2.1-or-later"
        );
        assert_eq!(d.evidence, Evidence::MachineReadable);
        assert!(d.license_refs.is_empty());
        let cased = DEP5.replace("License: GPL-2+ or Artistic", "License: BSD-3-clause");
        assert_eq!(
            expr(&cased).as_deref(),
            Some("BSD-3-Clause AND LGPL-2.1-or-later")
        );
    }

    #[test]
    fn a_name_without_an_spdx_id_is_a_license_ref_not_a_lost_file() {
        let public_domain = DEP5.replace("License: GPL-2+ or Artistic", "License: public-domain");
        let d = declared_license(&public_domain).unwrap();
        assert_eq!(
            d.expression,
            "LGPL-2.1-or-later AND LicenseRef-public-domain"
        );
        assert_eq!(
            d.license_refs,
            BTreeMap::from([(
                "LicenseRef-public-domain".to_string(),
                "public-domain".to_string()
            )])
        );
        let exception = DEP5.replace(
            "License: GPL-2+ or Artistic",
            "License: GPL-2+ with OpenSSL exception",
        );
        assert_eq!(
            expr(&exception).as_deref(),
            Some("LGPL-2.1-or-later AND LicenseRef-GPL-2--with-OpenSSL-exception")
        );
        let listed = DEP5.replace(
            "License: GPL-2+ or Artistic",
            "License: GPL-3+ with GCC-exception-3.1",
        );
        assert_eq!(
            expr(&listed).as_deref(),
            Some("(GPL-3.0-or-later WITH GCC-exception-3.1) AND LGPL-2.1-or-later")
        );
    }

    #[test]
    fn commas_split_parts_of_lower_precedence() {
        assert_eq!(
            debian_expression("GPL-2+ or Artistic, and BSD-3-clause").0,
            "(GPL-2.0-or-later OR Artistic-1.0) AND BSD-3-Clause"
        );
        assert_eq!(debian_expression("Apache-2.0+").0, "Apache-2.0+");
        assert_eq!(debian_expression("Expat or GPL-2").0, "MIT OR GPL-2.0-only");
        // Nonsense is kept, whole, as one reference.
        let (e, refs) = debian_expression("or or");
        assert_eq!(e, "LicenseRef-or-or");
        assert_eq!(refs["LicenseRef-or-or"], "or or");
    }

    #[test]
    fn free_form_files_give_what_they_reference() {
        let text = "This package was debianized by someone.\n\nIt is free software; you can \
            redistribute it under the GNU General Public License, either version 2, or (at \
            your option) any later version.\n\nOn Debian systems, the complete text is in\n\
            /usr/share/common-licenses/GPL-2.\n";
        let d = declared_license(text).unwrap();
        assert_eq!(d.expression, "GPL-2.0-or-later");
        assert_eq!(d.evidence, Evidence::Prose);
        let only = text.replace("any later version", "no other version");
        assert_eq!(expr(&only).as_deref(), Some("GPL-2.0-only"));
        let two = format!("{only}\nSee also /usr/share/common-licenses/BSD\n");
        // /usr/share/common-licenses/BSD is the University of California's 3-clause text.
        assert_eq!(expr(&two).as_deref(), Some("BSD-3-Clause AND GPL-2.0-only"));
        assert_eq!(expr("Copyright 2001 someone.\nNo license here.\n"), None);
        // The unversioned names are links to the current versions.
        let unversioned = text.replace("GPL-2.", "GPL.");
        assert_eq!(expr(&unversioned).as_deref(), Some("GPL-3.0-or-later"));
        // A sentence that starts with `License:` is not a license name.
        let sentence = format!("{only}\nLicense: Permission to use, copy, modify this.\n");
        assert_eq!(expr(&sentence).as_deref(), Some("GPL-2.0-only"));
        let named = format!("{only}\nLicense: BSD-2-clause\n");
        assert_eq!(
            expr(&named).as_deref(),
            Some("BSD-2-Clause AND GPL-2.0-only")
        );
    }

    #[test]
    fn doc_directories_that_are_links_lead_to_their_target_s_copyright() {
        let tree = doc_tree(
            vec![
                ("doc/gcc-12-base/copyright".into(), DEP5.as_bytes().to_vec()),
                ("doc/gcc-12-base/changelog.gz".into(), b"x".to_vec()),
                ("doc/gcc-12-base/extra/copyright".into(), b"y".to_vec()),
            ],
            vec![
                ("doc/libgcc-s1".into(), "gcc-12-base".into()),
                (
                    "doc/libstdc++6".into(),
                    "/usr/share/doc/gcc-12-base/".into(),
                ),
                (
                    "doc/cpp/copyright".into(),
                    "../gcc-12-base/copyright".into(),
                ),
                ("doc/loop-a".into(), "loop-b".into()),
                ("doc/loop-b".into(), "loop-a".into()),
                ("doc/outside".into(), "../../elsewhere".into()),
            ],
        );
        assert_eq!(tree.copyrights.len(), 1);
        for package in ["gcc-12-base", "libgcc-s1", "libstdc++6", "cpp"] {
            assert_eq!(tree.copyright_of(package), Some(DEP5), "{package}");
        }
        for package in ["loop-a", "outside", "absent"] {
            assert_eq!(tree.copyright_of(package), None, "{package}");
        }
    }
}
