//! Package URLs (purl): how scanners name a package.

use crate::image::dpkg::{DebPackage, OsRelease};

/// Percent-encoding of a purl component: everything but unreserved characters.
fn purl_encode(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `pkg:npm/%40scope/name@1.0.0` (the scope's `@` encoded, as purl requires).
pub(crate) fn npm_purl(name: &str, version: &str) -> String {
    let path = match name.split_once('/') {
        Some((scope, name)) => format!("{}/{}", purl_encode(scope), purl_encode(name)),
        None => purl_encode(name),
    };
    format!("pkg:npm/{path}@{}", purl_encode(version))
}

/// `pkg:deb/debian/libstdc%2B%2B6@12.2.0-14%2Bdeb12u1?arch=amd64&distro=debian-12&upstream=gcc-12%4012.2.0-14`:
/// the form syft writes (anchore/syft v1.51.0, syft/pkg/cataloger/debian/package.go
/// `packageURL`): `distro=<ID>-<VERSION_ID>`, and `upstream=<source>`, with `@<version>` when
/// the source's version differs from the binary's, whenever the source is not the binary
/// itself. Qualifiers in purl's canonical order (sorted by key). The version is dpkg's, epoch
/// included, as syft and purl's deb type write it.
pub(crate) fn deb_purl(p: &DebPackage, os: &OsRelease) -> String {
    let mut purl = format!(
        "pkg:deb/debian/{}@{}?arch={}",
        purl_encode(&p.name),
        purl_encode(&p.version),
        purl_encode(&p.architecture)
    );
    if !os.version_id.is_empty() {
        purl.push_str(&format!("&distro=debian-{}", purl_encode(&os.version_id)));
    }
    if p.source_version != p.version {
        let upstream = format!("{}@{}", p.source, p.source_version);
        purl.push_str(&format!("&upstream={}", purl_encode(&upstream)));
    } else if p.source != p.name {
        purl.push_str(&format!("&upstream={}", purl_encode(&p.source)));
    }
    purl
}

/// Node.js as NVD and the scanners that match binaries name it: `pkg:generic/node@<v>` and
/// `cpe:2.3:a:nodejs:node.js:<v>:...`, the purl and CPE syft's binary classifier gives a node
/// executable (anchore/syft v1.51.0, syft/pkg/cataloger/binary/classifiers.go). Node.js
/// advisories are filed against that CPE in NVD; the npm registry package `node` that the
/// tarball comes from is another thing, under which no Node.js advisory is filed.
pub(crate) fn node_purl(version: &str) -> String {
    format!("pkg:generic/node@{}", purl_encode(version))
}

pub(crate) fn node_cpe(version: &str) -> String {
    format!(
        "cpe:2.3:a:nodejs:node.js:{}:*:*:*:*:*:*:*",
        cpe_escape(version)
    )
}

/// CPE 2.3 formatted-string escaping of an attribute: a backslash before every character
/// that is not a letter, digit, `_`, `.` or `-`.
fn cpe_escape(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if !(c.is_ascii_alphanumeric() || "_.-".contains(c)) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::dpkg::{dpkg_packages, os_release};
    use crate::image::sbom::fixtures::*;

    #[test]
    fn purls_encode_scopes_epochs_and_plus() {
        assert_eq!(
            npm_purl("@scope/cli", "1.2.3"),
            "pkg:npm/%40scope/cli@1.2.3"
        );
        assert_eq!(npm_purl("ws", "8.18.0"), "pkg:npm/ws@8.18.0");
        let debs = dpkg_packages(STATUS);
        let os = os_release(OS_RELEASE);
        // The source is named only when it is not the binary itself, with its version only
        // when that differs.
        assert_eq!(
            deb_purl(&debs[0], &os),
            "pkg:deb/debian/gcc-12-base@12.2.0-14%2Bdeb12u1?arch=amd64&distro=debian-12&upstream=gcc-12%4012.2.0-14"
        );
        assert_eq!(
            deb_purl(&debs[1], &os),
            "pkg:deb/debian/libc6@2.36-9%2Bdeb12u13?arch=amd64&distro=debian-12&upstream=glibc"
        );
        let mut own = debs[1].clone();
        own.source = own.name.clone();
        assert_eq!(
            deb_purl(&own, &os),
            "pkg:deb/debian/libc6@2.36-9%2Bdeb12u13?arch=amd64&distro=debian-12"
        );
        let mut epoch = own;
        epoch.version = "1:2.36".into();
        epoch.source_version = epoch.version.clone();
        assert!(deb_purl(&epoch, &os).starts_with("pkg:deb/debian/libc6@1%3A2.36?"));
    }

    #[test]
    fn node_is_named_as_its_advisories_name_it() {
        assert_eq!(node_purl("22.23.5"), "pkg:generic/node@22.23.5");
        assert_eq!(
            node_cpe("22.23.5"),
            "cpe:2.3:a:nodejs:node.js:22.23.5:*:*:*:*:*:*:*"
        );
        assert_eq!(cpe_escape("1.0+x"), "1.0\\+x");
    }
}
