use super::*;
use crate::receipt::tests_support::{inventory_of, manifest, sample};
use template_formats::model::install_scripts::InstallScripts;

fn fields(problems: &[Problem]) -> Vec<&str> {
    problems.iter().map(|p| p.field.as_str()).collect()
}

/// The sample receipt with its inputs verified by one key.
fn verified() -> Receipt {
    let mut r = sample();
    let inputs = r.inputs.as_mut().unwrap();
    inputs.status = InputStatus::Verified;
    inputs.keys = Some("npm 10.9.9's node_modules/@sigstore/tuf/seeds.json".into());
    for p in &mut inputs.packages {
        p.signed_by = Some("SHA256:DhQ8wR5APBvFHLF/+Tc+AYvPOdTpcIDqOhxsBHRwC7U".into());
    }
    r
}

fn inventory(r: &Receipt) -> Inventory {
    serde_json::from_value(inventory_of(r)).unwrap()
}

#[test]
fn a_record_that_holds_together_passes_and_each_break_is_named() {
    let m = manifest();
    for r in [sample(), verified()] {
        assert_eq!(record_problems(&r, &m), vec![]);
        assert_eq!(acknowledged_problems(&r, &m), vec![]);
        assert_eq!(inventory_problems(&r, &inventory(&r)), vec![]);
    }
    type Tamper = fn(&mut InputsRecord);
    let cases: &[(&str, Tamper)] = &[
        ("inputs.registry", |i| {
            i.registry = "https://mirror.example/".into()
        }),
        ("inputs.keys", |i| i.keys = None),
        ("inputs.packages", |i| i.packages.swap(0, 1)),
        ("inputs.packages", |i| {
            i.packages[0].version = "0.0.1".into()
        }),
        ("inputs.packages[0].signed_by", |i| {
            i.packages[0].signed_by = None
        }),
        ("inputs.packages[1].install_scripts", |i| {
            i.packages[1].install_scripts = None
        }),
        ("inputs.packages[0].install_scripts", |i| {
            i.packages[0].install_scripts = Some(InstallScripts {
                postinstall: Some("node x.js".into()),
                ..Default::default()
            })
        }),
    ];
    let m = manifest();
    assert_eq!(m.packages[1].name, "@anthropic-ai/claude-code");
    for (field, tamper) in cases {
        let mut r = verified();
        tamper(r.inputs.as_mut().unwrap());
        let problems = record_problems(&r, &m);
        assert!(fields(&problems).contains(field), "{field}: {problems:?}");
    }
    // Unverified inputs with a key, or keys named: neither holds together.
    let mut r = sample();
    r.inputs.as_mut().unwrap().packages[2].signed_by = Some("SHA256:x".into());
    r.inputs.as_mut().unwrap().keys = Some("--trusted-keys keys.json".into());
    assert_eq!(
        fields(&record_problems(&r, &m)),
        ["inputs.keys", "inputs.packages[2].signed_by"]
    );
}

#[test]
fn the_install_scripts_must_be_what_the_releases_manifest_acknowledges() {
    let m = manifest();
    let mut r = sample();
    let claude = &mut r.inputs.as_mut().unwrap().packages[1];
    claude
        .install_scripts
        .as_mut()
        .unwrap()
        .files
        .insert("install.cjs".into(), "0".repeat(64));
    // Still a record that holds together: only the release's own manifest says otherwise.
    assert_eq!(record_problems(&r, &m), vec![]);
    let problems = acknowledged_problems(&r, &m);
    assert_eq!(fields(&problems), ["inputs.packages[1].install_scripts"]);
    assert!(problems[0].problem.contains("acknowledges"), "{problems:?}");
}

#[test]
fn the_record_is_the_inventorys() {
    let r = verified();
    let genuine = inventory(&r);
    type Tamper = fn(&mut Inventory);
    let cases: &[(&str, Tamper)] = &[
        ("inputs.status", |i| i.inputs = InputStatus::Unverified),
        ("inputs.keys", |i| {
            i.keys = Some("--trusted-keys other.json".into())
        }),
        ("inputs.registry", |i| {
            i.registry = "https://other.example/".into()
        }),
        ("inputs.packages[0].signed_by", |i| {
            i.packages[0].signed_by = Some("SHA256:other".into())
        }),
        ("inputs.packages[1].install_scripts", |i| {
            i.packages[1].install_scripts = None
        }),
        ("inputs.packages[2].version", |i| {
            i.packages[2].version = "9.9.9".into()
        }),
        ("inputs.packages[3]", |i| i.packages[3].top_level = false),
    ];
    for (field, tamper) in cases {
        let mut changed = genuine.clone();
        tamper(&mut changed);
        let problems = inventory_problems(&r, &changed);
        assert!(fields(&problems).contains(field), "{field}: {problems:?}");
    }
    // A receipt that records nothing, next to an inventory that does.
    let mut old = r.clone();
    old.inputs = None;
    let problems = inventory_problems(&old, &genuine);
    assert_eq!(fields(&problems), ["inputs"]);
    assert!(problems[0].problem.contains("`verified`"), "{problems:?}");
    // Without the inventory, such a receipt still holds together (an older release).
    assert_eq!(record_problems(&old, &manifest()), vec![]);
}

#[test]
fn requiring_verified_inputs_refuses_unverified_and_unrecorded_ones_naming_the_release() {
    assert_eq!(unverified_refusal(&verified()), None);
    let r = sample();
    let refusal = unverified_refusal(&r).unwrap();
    assert_eq!(refusal.field, "inputs.status");
    assert!(
        refusal.problem.contains(&r.release_tag)
            && refusal.problem.contains("https://registry.npmjs.org/")
            && refusal.problem.contains("unverified"),
        "{refusal:?}"
    );
    let mut old = r.clone();
    old.inputs = None;
    let refusal = unverified_refusal(&old).unwrap();
    assert_eq!(refusal.field, "inputs");
    assert!(refusal.problem.contains(&r.release_tag), "{refusal:?}");
}
