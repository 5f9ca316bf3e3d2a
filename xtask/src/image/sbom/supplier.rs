//! SPDX suppliers (`Person: name (email)`, `Organization: name (email)`) from what packages
//! say about who makes them: dpkg's `Maintainer`, package.json's `author`.

/// Words that mark a name as an organisation's rather than a person's (Debian's teams are
/// "... Maintainers" or "... Team" at a lists.debian.org address; npm authors are often
/// companies). Anything else is a person, as syft reads dpkg's Maintainer (anchore/syft v1.51.0,
/// syft/format/internal/spdxutil/helpers/originator_supplier.go).
const ORGANISATION_WORDS: &[&str] = &[
    "maintainers",
    "team",
    "project",
    "developers",
    "contributors",
    "authors",
    "foundation",
    "inc",
    "inc.",
    "llc",
    "ltd",
    "ltd.",
    "gmbh",
    "corporation",
    "corp",
    "corp.",
    "group",
    "community",
];

/// `Name <address>` (dpkg's Maintainer, npm's author string, which may add ` (url)`) as an
/// SPDX supplier; `None` when it names no one.
pub(crate) fn supplier(person_or_org: &str) -> Option<String> {
    let text = person_or_org.trim();
    // npm's `Name <email> (url)`: the url is no part of an SPDX actor.
    let text = match (text.rfind(" ("), text.ends_with(')')) {
        (Some(at), true) => text[..at].trim(),
        _ => text,
    };
    let (name, email) = match (text.find('<'), text.rfind('>')) {
        (Some(open), Some(close)) if open < close => {
            (text[..open].trim(), Some(text[open + 1..close].trim()))
        }
        _ => (text, None),
    };
    actor(name, email.filter(|e| !e.is_empty()))
}

/// An SPDX actor from a name and an address; the characters that delimit an actor's parts
/// are left out of the name.
pub(crate) fn actor(name: &str, email: Option<&str>) -> Option<String> {
    let name: String = name
        .chars()
        .filter(|c| !"()<>".contains(*c))
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let name = name.trim_matches(|c: char| c == ',' || c == '"');
    let email = email
        .map(|e| e.trim().to_string())
        .filter(|e| !e.is_empty());
    if name.is_empty() && email.is_none() {
        return None;
    }
    let name = if name.is_empty() {
        email.clone().unwrap_or_default()
    } else {
        name.to_string()
    };
    let organisation = name
        .split(|c: char| c.is_whitespace() || c == ',')
        .any(|w| ORGANISATION_WORDS.contains(&w.to_ascii_lowercase().as_str()))
        || email
            .as_deref()
            .is_some_and(|e| e.ends_with("@lists.debian.org") || e.contains("alioth"));
    let kind = if organisation {
        "Organization"
    } else {
        "Person"
    };
    Some(match email {
        Some(e) => format!("{kind}: {name} ({e})"),
        None => format!("{kind}: {name}"),
    })
}

/// This tool as an SPDX actor: the document's creator and the annotations' annotator.
pub(super) fn tool() -> String {
    format!("Tool: cargo-xtask-{}", env!("CARGO_PKG_VERSION"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maintainers_and_authors_become_spdx_actors() {
        assert_eq!(
            supplier("Debian GCC Maintainers <debian-gcc@lists.debian.org>").as_deref(),
            Some("Organization: Debian GCC Maintainers (debian-gcc@lists.debian.org)")
        );
        assert_eq!(
            supplier("Guillem Jover <guillem@debian.org>").as_deref(),
            Some("Person: Guillem Jover (guillem@debian.org)")
        );
        assert_eq!(
            supplier("Isaac Z. Schlueter <i@izs.me> (http://blog.izs.me/)").as_deref(),
            Some("Person: Isaac Z. Schlueter (i@izs.me)")
        );
        assert_eq!(
            supplier("GitHub Inc.").as_deref(),
            Some("Organization: GitHub Inc.")
        );
        assert_eq!(supplier("  "), None);
        assert_eq!(
            actor("", Some("a@b.c")).as_deref(),
            Some("Person: a@b.c (a@b.c)")
        );
    }
}
