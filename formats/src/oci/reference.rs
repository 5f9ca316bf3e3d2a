//! Image references, parsed by the grammar of the distribution project
//! (`github.com/distribution/reference`), strictly.
//!
//! A receipt's `index.repository` ends up verbatim in the template definition's `image:` line
//! and then in a container runtime. Anything the grammar does not allow — a scheme, spaces,
//! quotes, upper case in the path, a tag next to a digest, two digests, invisible Unicode,
//! YAML syntax — must be refused when the receipt is verified, naming the receipt's field,
//! not later by `pin` with an error that blames the template. So the grammar lives here, as
//! pure functions, and both `receipt verify` and `pin` use it.
//!
//! ```text
//! reference      := name [ ":" tag ] [ "@" digest ]
//! name           := domain "/" path            (this tool always names the registry)
//! domain         := host [ ":" port ]
//! host           := domain-name | "[" IPv6 "]"
//! domain-name    := component ( "." component )*, component := [a-z0-9]([a-z0-9-]*[a-z0-9])?
//! path           := path-component ( "/" path-component )*
//! path-component := [a-z0-9]+ ( separator [a-z0-9]+ )*, separator := [_.] | "__" | "-"+
//! tag            := [A-Za-z0-9_][A-Za-z0-9._-]{0,127}
//! digest         := "sha256:" [0-9a-f]{64}     (the only algorithm this tool writes)
//! ```
//!
//! Stricter than distribution in two places, both on purpose: the host must be lowercase
//! (registries compare host names case-insensitively, so upper case only makes two spellings
//! of one anchor), and the registry host is mandatory (no implicit `docker.io`).

use std::fmt;

/// The longest `domain/path` distribution accepts.
pub const MAX_NAME_LENGTH: usize = 255;

/// `host[:port]/path`: where an image lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepositoryName {
    /// `host[:port]`, as written in references.
    pub domain: String,
    /// The repository path inside the registry, e.g. `sandbox0/coding-agent`.
    pub path: String,
}

impl fmt::Display for RepositoryName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.domain, self.path)
    }
}

/// A full reference: a repository with a tag, a digest, or both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageReference {
    pub name: RepositoryName,
    pub tag: Option<String>,
    pub digest: Option<String>,
}

/// Why a text is not a reference; the message says which part is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReferenceError(pub String);

impl fmt::Display for ReferenceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ReferenceError {}

fn err<T>(text: impl Into<String>) -> Result<T, ReferenceError> {
    Err(ReferenceError(text.into()))
}

fn is_lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// `[a-z0-9]+ ( ([_.] | "__" | "-"+) [a-z0-9]+ )*`
fn is_path_component(text: &str) -> bool {
    let b = text.as_bytes();
    if b.is_empty() || !is_lower_alnum(b[0]) || !is_lower_alnum(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if is_lower_alnum(b[i]) {
            i += 1;
            continue;
        }
        // A separator run, which must be exactly one of: `.`, `_`, `__`, or one or more `-`.
        let start = i;
        while i < b.len() && !is_lower_alnum(b[i]) {
            i += 1;
        }
        let sep = &text[start..i];
        let ok = sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|c| c == b'-');
        if !ok {
            return false;
        }
    }
    true
}

/// `[a-z0-9]([a-z0-9-]*[a-z0-9])?`
fn is_domain_component(text: &str) -> bool {
    let b = text.as_bytes();
    !b.is_empty()
        && is_lower_alnum(b[0])
        && is_lower_alnum(b[b.len() - 1])
        && b.iter().all(|&c| is_lower_alnum(c) || c == b'-')
}

/// `host[:port]`, lowercase; an IPv6 host in brackets.
pub fn parse_domain(text: &str) -> Result<(), ReferenceError> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let Some((inside, after)) = rest.split_once(']') else {
            return err(format!("`{text}`: an IPv6 host needs its closing `]`"));
        };
        if inside.is_empty() || !inside.bytes().all(|b| b.is_ascii_hexdigit() || b == b':') {
            return err(format!("`{text}`: `[{inside}]` is not an IPv6 address"));
        }
        if inside.bytes().any(|b| b.is_ascii_uppercase()) {
            return err(format!("`{text}`: the host must be lowercase"));
        }
        match after {
            "" => (None, None),
            _ => match after.strip_prefix(':') {
                Some(port) => (None, Some(port)),
                None => return err(format!("`{text}`: unexpected `{after}` after the host")),
            },
        }
    } else {
        match text.split_once(':') {
            Some((host, port)) => (Some(host), Some(port)),
            None => (Some(text), None),
        }
    };
    if let Some(host) = host {
        if host.is_empty() {
            return err("the registry host is empty");
        }
        if host.bytes().any(|b| b.is_ascii_uppercase()) {
            return err(format!("host `{host}` must be lowercase"));
        }
        if !host.split('.').all(is_domain_component) {
            return err(format!(
                "host `{host}` is not a domain name (components of [a-z0-9-], separated by `.`)"
            ));
        }
    }
    if let Some(port) = port {
        let valid = !port.is_empty()
            && port.len() <= 5
            && port.bytes().all(|b| b.is_ascii_digit())
            && port.parse::<u32>().is_ok_and(|p| (1..=65535).contains(&p));
        if !valid {
            return err(format!("port `{port}` is not a number from 1 to 65535"));
        }
    }
    Ok(())
}

/// Does the first component of a name look like a registry host (distribution's rule: it
/// contains `.` or `:`, or is `localhost`)?
fn looks_like_domain(component: &str) -> bool {
    component.contains('.') || component.contains(':') || component == "localhost"
}

/// `host[:port]/path`, nothing else: no scheme, tag or digest.
pub fn parse_repository_name(text: &str) -> Result<RepositoryName, ReferenceError> {
    if text.is_empty() {
        return err("the repository is empty");
    }
    if let Some(bad) = text
        .chars()
        .find(|c| !c.is_ascii() || c.is_ascii_control() || *c == ' ')
    {
        return err(format!(
            "contains {}, which no image reference may contain",
            describe_char(bad)
        ));
    }
    if text.contains("://") {
        return err("starts with a URL scheme; a reference is `host[:port]/path`, without one");
    }
    if text.len() > MAX_NAME_LENGTH {
        return err(format!(
            "is {} characters long; the limit is {MAX_NAME_LENGTH}",
            text.len()
        ));
    }
    if text.contains('@') {
        return err("contains `@`: a repository carries no digest");
    }
    let Some((domain, path)) = text.split_once('/') else {
        return err("has no `/`: expected `host[:port]/path`");
    };
    if !looks_like_domain(domain) {
        return err(format!(
            "`{domain}` is not a registry host (it needs a `.`, a `:port`, or to be `localhost`)"
        ));
    }
    parse_domain(domain)?;
    for component in path.split('/') {
        if component.contains(':') {
            return err(format!(
                "path component `{component}` contains `:`: a repository carries no tag"
            ));
        }
        if !is_path_component(component) {
            return err(format!(
                "path component `{component}` is not lowercase [a-z0-9] separated by `.`, `_`, \
                 `__` or `-`"
            ));
        }
    }
    Ok(RepositoryName {
        domain: domain.to_string(),
        path: path.to_string(),
    })
}

/// `[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`
pub fn is_tag(tag: &str) -> bool {
    let mut bytes = tag.bytes();
    match bytes.next() {
        Some(b) if b.is_ascii_alphanumeric() || b == b'_' => {}
        _ => return false,
    }
    tag.len() <= 128 && bytes.all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// `sha256:` and 64 lowercase hex digits.
pub fn is_sha256_digest(text: &str) -> bool {
    crate::model::Digest::is_valid(text)
}

/// `name[:tag][@digest]`.
pub fn parse_reference(text: &str) -> Result<ImageReference, ReferenceError> {
    let (rest, digest) = match text.split_once('@') {
        Some((rest, digest)) => {
            if digest.contains('@') {
                return err("contains two `@`: a reference has at most one digest");
            }
            if !is_sha256_digest(digest) {
                return err(format!(
                    "digest `{digest}` is not `sha256:` followed by 64 lowercase hex digits"
                ));
            }
            (rest, Some(digest.to_string()))
        }
        None => (text, None),
    };
    // A tag is after the last `:` that follows the last `/` (a `:` before it is the port).
    let last_slash = rest.rfind('/').unwrap_or(0);
    let (name, tag) = match rest[last_slash..].rfind(':') {
        Some(i) => {
            let at = last_slash + i;
            (&rest[..at], Some(rest[at + 1..].to_string()))
        }
        None => (rest, None),
    };
    let name = parse_repository_name(name)?;
    if let Some(tag) = &tag {
        if !is_tag(tag) {
            return err(format!("tag `{tag}` is not a valid tag"));
        }
    }
    Ok(ImageReference { name, tag, digest })
}

/// `repository@digest` exactly, the only form a receipt pins: no tag beside the digest.
pub fn parse_pinned_reference(text: &str) -> Result<ImageReference, ReferenceError> {
    let reference = parse_reference(text)?;
    if reference.tag.is_some() {
        return err("has a tag and a digest; a pinned reference is `repository@digest` only");
    }
    if reference.digest.is_none() {
        return err("has no `@sha256:` digest");
    }
    Ok(reference)
}

fn describe_char(c: char) -> String {
    match c {
        ' ' => "a space".to_string(),
        _ => format!("the character U+{:04X}", c as u32),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn repository_names_table() {
        let accepted = [
            "ghcr.io/sandbox0/coding-agent",
            "127.0.0.1:5000/sandbox0/coding-agent",
            "localhost/a",
            "localhost:5013/a/b/c",
            "registry.example.com:443/x__y/a.b/c-d/e---f",
            "[::1]:5000/repo",
            "xn--bcher-kva.example/repo",
        ];
        for text in accepted {
            assert!(
                parse_repository_name(text).is_ok(),
                "{text}: {:?}",
                parse_repository_name(text)
            );
        }
        let refused = [
            ("", "empty"),
            ("ghcr.io/Sandbox0/coding-agent", "upper case in the path"),
            ("GHCR.io/sandbox0/coding-agent", "upper case in the host"),
            ("https://ghcr.io/sandbox0/coding-agent", "a scheme"),
            ("ghcr.io/sandbox0/coding agent", "a space"),
            ("\"ghcr.io/sandbox0/coding-agent\"", "quotes"),
            ("ghcr.io/sandbox0/coding-agent:latest", "a tag"),
            (&format!("ghcr.io/s/c@{DIGEST}"), "a digest"),
            (
                "ghcr.io/sandbox0/coding\u{200b}-agent",
                "a zero-width space",
            ),
            ("ghcr.io/sandbox0/\u{202e}tnega", "a bidi override"),
            ("ghcr.io/sandbox0/coding-agent\nimage: evil", "a newline"),
            ("ghcr.io/sandbox0/{coding-agent}", "YAML flow syntax"),
            ("ghcr.io/sandbox0/coding-agent #x", "a YAML comment"),
            ("sandbox0/coding-agent", "no registry host"),
            ("ghcr.io", "no path"),
            ("ghcr.io/", "an empty path"),
            ("ghcr.io//a", "an empty component"),
            ("ghcr.io/a/", "a trailing slash"),
            ("ghcr.io/-a", "a leading separator"),
            ("ghcr.io/a-", "a trailing separator"),
            ("ghcr.io/a..b", "a double dot"),
            ("ghcr.io/a___b", "three underscores"),
            ("ghcr.io/a._b", "mixed separators"),
            ("ghcr.io:0/a", "port zero"),
            ("ghcr.io:65536/a", "a port above 65535"),
            ("ghcr.io:/a", "an empty port"),
            ("ghcr.io:12a/a", "a port with a letter"),
            ("-ghcr.io/a", "a host starting with a hyphen"),
            ("gh_cr.io/a", "an underscore in the host"),
            ("[::g]/a", "a bad IPv6 address"),
            ("[::1/a", "an unclosed IPv6 bracket"),
        ];
        for (text, why) in refused {
            assert!(
                parse_repository_name(text).is_err(),
                "accepted {text:?} with {why}"
            );
        }
        let long = format!("ghcr.io/{}", "a".repeat(MAX_NAME_LENGTH));
        assert!(parse_repository_name(&long).is_err());
    }

    #[test]
    fn references_table() {
        let r = parse_reference(&format!("127.0.0.1:5000/s0/ca@{DIGEST}")).unwrap();
        assert_eq!(r.name.domain, "127.0.0.1:5000");
        assert_eq!(r.name.path, "s0/ca");
        assert_eq!((r.tag, r.digest.as_deref()), (None, Some(DIGEST)));
        let r = parse_reference("127.0.0.1:5000/sandbox0/coding-agent:unpinned").unwrap();
        assert_eq!(r.tag.as_deref(), Some("unpinned"));
        assert_eq!(r.name.to_string(), "127.0.0.1:5000/sandbox0/coding-agent");
        let r = parse_reference("localhost:5013/a").unwrap();
        assert_eq!((r.name.domain.as_str(), r.tag), ("localhost:5013", None));

        assert!(parse_pinned_reference(&format!("ghcr.io/a@{DIGEST}")).is_ok());
        for (text, why) in [
            (format!("ghcr.io/a:v1@{DIGEST}"), "a tag beside the digest"),
            (format!("ghcr.io/a@{DIGEST}@{DIGEST}"), "two digests"),
            ("ghcr.io/a:v1".to_string(), "no digest"),
            (format!("ghcr.io/a@{}", DIGEST.to_uppercase()), "upper hex"),
            ("ghcr.io/a@sha256:abc".to_string(), "a short digest"),
            (
                format!("ghcr.io/a@sha512:{}", &DIGEST[7..]),
                "another algorithm",
            ),
            (format!("ghcr.io/a:-x@{DIGEST}"), "a bad tag"),
        ] {
            assert!(
                parse_pinned_reference(&text).is_err(),
                "accepted {text:?} with {why}"
            );
        }
    }

    #[test]
    fn separators() {
        for ok in ["a", "a.b", "a_b", "a__b", "a-b", "a---b", "a1.b2_c3__d4-e5"] {
            assert!(is_path_component(ok), "{ok}");
        }
        for bad in ["", ".a", "a.", "a..b", "a.-b", "a-_b", "a___b", "A", "a:b"] {
            assert!(!is_path_component(bad), "{bad}");
        }
    }
}
