//! Each npm package's trust record in the SBOM, from the inventory `lock` wrote: an SPDX
//! annotation (SPDX 2.3 §12) holding the record as JSON, and, for a version that came through
//! trusted publishing with verified provenance, the supplier it names.

use template_formats::model::inventory::{InputStatus, Inventory, InventoryPackage, Tarball};
use template_formats::model::rfc3339;
use template_formats::sbom::spdx::Annotation;

/// How every trust annotation's comment starts; the JSON record follows.
pub(crate) const TRUST_ANNOTATION_PREFIX: &str = "trust record: ";

/// The annotation of one lockfile package: whether the inputs were verified, the registry key
/// that signed it, its trust evidence, its publisher and its verified provenance. Dated when
/// the record was made (the inventory's `resolved_at`), so the same inventory gives the same
/// bytes.
pub(crate) fn package_annotation(
    inventory: &Inventory,
    row: &InventoryPackage,
    annotator: &str,
) -> Annotation {
    let record = serde_json::json!({
        "inputs": inventory.inputs,
        "signed_by": row.signed_by,
        "evidence": row.evidence,
        "publisher": row.publisher,
        "provenance": row.provenance,
    });
    annotation(inventory, annotator, record)
}

/// The annotation of the Node or npm tarball: whether the inputs were verified and the key that
/// signed it.
pub(crate) fn tarball_annotation(
    inventory: &Inventory,
    tarball: &Tarball,
    annotator: &str,
) -> Annotation {
    let record = serde_json::json!({
        "inputs": inventory.inputs,
        "signed_by": tarball.signed_by,
        "package": format!("{}@{}", tarball.package, tarball.version),
    });
    annotation(inventory, annotator, record)
}

fn annotation(inventory: &Inventory, annotator: &str, record: serde_json::Value) -> Annotation {
    Annotation {
        annotation_date: rfc3339(inventory.resolved_at),
        annotation_type: "OTHER".into(),
        annotator: annotator.into(),
        comment: format!("{TRUST_ANNOTATION_PREFIX}{record}"),
    }
}

/// The supplier the trust record names: for a version published through trusted publishing
/// whose provenance was verified, the owner of the repository it was built from (the registry
/// took it from that repository's workflow, not from an account). `None` otherwise: an
/// account's publish is a supplier only after package.json's author (`npm::npm_supplier`).
pub(crate) fn verified_supplier(row: &InventoryPackage, inputs: InputStatus) -> Option<String> {
    if inputs != InputStatus::Verified {
        return None;
    }
    let trusted = row
        .publisher
        .as_ref()
        .is_some_and(|p| p.trusted_publisher.is_some());
    let provenance = row.provenance.as_ref().filter(|p| !p.workflow.is_empty())?;
    let owner = provenance.repository.split('/').next()?;
    (trusted && !owner.is_empty()).then(|| format!("Organization: {owner}"))
}

#[cfg(test)]
mod tests {
    use super::super::tests::{check_sbom, fixture_inventory, make_from, whole_checksums};
    use super::*;
    use template_formats::manifest::Platform;
    use template_formats::model::inventory::{Evidence, ProvenanceRecord, Publisher};

    const CREATED: &str = "2026-11-30T06:17:00Z";
    const CLI: &str = "SPDXRef-npm-node-modules--scope-cli";

    /// The fixture inventory, verified, with `@scope/cli` published through trusted
    /// publishing from `scope-org/cli` and its provenance verified.
    fn trusted_inventory() -> Inventory {
        let mut inventory = fixture_inventory();
        inventory.inputs = InputStatus::Verified;
        let cli = &mut inventory.packages[0];
        cli.signed_by = Some("SHA256:key".into());
        cli.evidence = Evidence::TrustedPublisher;
        cli.publisher = Some(Publisher {
            name: "GitHub Actions".into(),
            email: Some("npm-oidc-no-reply@github.com".into()),
            trusted_publisher: Some("github".into()),
        });
        cli.provenance = Some(ProvenanceRecord {
            repository: "scope-org/cli".into(),
            workflow: ".github/workflows/release.yml".into(),
            git_ref: "refs/tags/v1.2.3".into(),
            issuer: "https://token.actions.githubusercontent.com".into(),
            identity_pinned: true,
            predicate_type: "https://slsa.dev/provenance/v1".into(),
            log_integrated_time: Some("2026-11-20T00:01:00Z".parse().unwrap()),
        });
        inventory
    }

    fn package<'a>(doc: &'a spdx::Document, id: &str) -> &'a spdx::Package {
        doc.packages.iter().find(|p| p.spdx_id == id).unwrap()
    }

    use template_formats::sbom::spdx;

    fn record(p: &spdx::Package) -> serde_json::Value {
        let [annotation] = p.annotations.as_slice() else {
            panic!("{} has {} annotations", p.spdx_id, p.annotations.len())
        };
        assert_eq!(annotation.annotation_type, "OTHER");
        assert!(annotation.annotator.starts_with("Tool: cargo-xtask-"));
        serde_json::from_str(
            annotation
                .comment
                .strip_prefix(TRUST_ANNOTATION_PREFIX)
                .unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn each_npm_package_carries_its_trust_record_and_a_trusted_publish_names_its_supplier() {
        let inventory = trusted_inventory();
        let doc = make_from(Platform::LinuxAmd64, &[], CREATED, "{}", &inventory);
        let cli = package(&doc, CLI);
        // The trusted publisher's repository owner, over package.json's author (Scope Inc.).
        assert_eq!(cli.supplier.as_deref(), Some("Organization: scope-org"));
        let r = record(cli);
        assert_eq!(r["inputs"], "verified");
        assert_eq!(r["signed_by"], "SHA256:key");
        assert_eq!(r["evidence"], "trusted_publisher");
        assert_eq!(r["publisher"]["trusted_publisher"], "github");
        assert_eq!(r["provenance"]["repository"], "scope-org/cli");
        assert_eq!(
            cli.annotations[0].annotation_date,
            rfc3339(inventory.resolved_at)
        );
        // A package without a record of its own says so, and keeps its supplier.
        let helper = package(&doc, "SPDXRef-npm-node-modules-helper");
        assert!(record(helper)["provenance"].is_null());
        // Node and npm carry the registry key that signed their tarballs.
        assert!(record(package(&doc, "SPDXRef-node-npm"))["package"]
            .as_str()
            .unwrap()
            .starts_with("npm@"));

        // Without verified inputs, or without verified provenance, the author supplies it.
        for edit in [
            (|i: &mut Inventory| i.inputs = InputStatus::Unverified) as fn(&mut Inventory),
            |i| i.packages[0].provenance = None,
            |i| i.packages[0].publisher.as_mut().unwrap().trusted_publisher = None,
        ] {
            let mut inventory = trusted_inventory();
            edit(&mut inventory);
            let doc = make_from(Platform::LinuxAmd64, &[], CREATED, "{}", &inventory);
            assert_eq!(
                package(&doc, CLI).supplier.as_deref(),
                Some("Organization: Scope Inc. (dev@scope.example)")
            );
        }
    }

    /// The validators (scripts/check-sbom.sh) accept the annotated document and refuse an
    /// annotation SPDX does not define, so they do read it.
    #[test]
    fn the_validators_accept_the_annotations_and_refuse_a_broken_one() {
        let dir = tempfile::tempdir().unwrap();
        let doc = whole_checksums(make_from(
            Platform::LinuxAmd64,
            &[],
            CREATED,
            r#"{"repository": "github:helpers/helper"}"#,
            &trusted_inventory(),
        ));
        let bytes = |d: &spdx::Document| template_formats::sbom::document_bytes(d);
        let (ok, log) = check_sbom(&dir.path().join("trust.spdx.json"), &bytes(&doc));
        assert!(ok, "{log}");
        let mut broken = doc;
        broken
            .packages
            .iter_mut()
            .find(|p| p.spdx_id == CLI)
            .unwrap()
            .annotations[0]
            .annotation_type = "PROVENANCE".into();
        let (ok, log) = check_sbom(&dir.path().join("broken.spdx.json"), &bytes(&broken));
        assert!(!ok && log.contains("JSON schema: INVALID"), "{log}");
    }
}
