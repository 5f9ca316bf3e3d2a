//! Golden tests on registry.npmjs.org's own signatures and keys (`../shared/fixtures/npm/`,
//! SOURCE.md there); skipped, saying why, only where that directory is absent.

use super::*;

fn fixtures() -> Option<std::path::PathBuf> {
    // Beside the checkout: `<repository>/../shared/fixtures` (CI lays it there).
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/npm");
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "skipped: {} is absent (npm's real signatures and keys)",
            dir.display()
        );
        None
    }
}

struct Golden {
    npm_keys: RegistryKeys,
    seeds_keys: RegistryKeys,
    /// (name, integrity, signatures)
    versions: Vec<(String, String, Vec<DistSignature>)>,
}

fn golden(dir: &std::path::Path) -> Golden {
    let doc: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("registry-signatures.json")).unwrap(),
    )
    .unwrap();
    let npm_keys = RegistryKeys::from_npm_keys(
        &serde_json::json!({ "keys": doc["keys"] }).to_string(),
        "registry-signatures.json",
    )
    .unwrap();
    let seeds_keys = RegistryKeys::from_tuf_target(
        &std::fs::read_to_string(dir.join("registry.npmjs.org-keys.json")).unwrap(),
        "registry.npmjs.org-keys.json",
    )
    .unwrap();
    let versions = doc["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["name"].as_str().unwrap().to_owned(),
                v["dist"]["integrity"].as_str().unwrap().to_owned(),
                serde_json::from_value(v["dist"]["signatures"].clone()).unwrap(),
            )
        })
        .collect();
    Golden {
        npm_keys,
        seeds_keys,
        versions,
    }
}

fn published() -> Option<DateTime<Utc>> {
    Some("2023-02-09T17:56:00Z".parse().unwrap())
}

#[test]
fn genuine_signatures_verify_with_the_registry_keys_and_npm_seeds() {
    let Some(dir) = fixtures() else { return };
    let g = golden(&dir);
    assert_eq!(g.seeds_keys.keys.len(), 2, "the 2022 key and its successor");
    for (name, integrity, sigs) in &g.versions {
        for keys in [&g.npm_keys, &g.seeds_keys] {
            assert_eq!(
                check(name, "1.0.0", integrity, sigs, keys, published()).as_deref(),
                Ok("SHA256:jl3bwswu80PjjokCgh0o2w5c2U4LhQAE57gj9cz1kzA"),
                "{name} with {}",
                keys.origin
            );
        }
    }
}

#[test]
fn each_broken_input_is_refused_with_its_reason() {
    let Some(dir) = fixtures() else { return };
    let g = golden(&dir);
    let (name, integrity, sigs) = &g.versions[0];
    let reason = |name: &str, version: &str, integrity: &str, sigs: &[DistSignature], keys, t| {
        check(name, version, integrity, sigs, keys, t).unwrap_err()
    };
    // Another version, another package's integrity (a lockfile that is not what was signed).
    assert!(
        reason(name, "1.0.1", integrity, sigs, &g.seeds_keys, published())
            .contains("does not verify")
    );
    let other_integrity = &g.versions[1].1;
    assert!(reason(
        name,
        "1.0.0",
        other_integrity,
        sigs,
        &g.seeds_keys,
        published()
    )
    .contains("does not verify"));
    // One character of the signature changed.
    let mut tampered = sigs.clone();
    let mut chars: Vec<char> = tampered[0].sig.chars().collect();
    let i = chars.len() / 2;
    chars[i] = if chars[i] == 'A' { 'B' } else { 'A' };
    tampered[0].sig = chars.into_iter().collect();
    assert!(reason(
        name,
        "1.0.0",
        integrity,
        &tampered,
        &g.seeds_keys,
        published()
    )
    .contains("does not verify"));
    // The 2022 key's window, as the seeds carry it: it ended `2025-01-29`.
    let after = Some("2025-02-01T00:00:00Z".parse().unwrap());
    let expired = reason(name, "1.0.0", integrity, sigs, &g.seeds_keys, after);
    assert!(expired.contains("expired at 2025-01-29"), "{expired}");
    // The same with npm's /-/npm/v1/keys form (`expires` null): still valid then.
    assert!(check(name, "1.0.0", integrity, sigs, &g.npm_keys, after).is_ok());
    // A publish time that is missing cannot be judged against a window.
    assert!(reason(name, "1.0.0", integrity, sigs, &g.seeds_keys, None)
        .contains("publish time unknown"));
    // A foreign key set: only the 2025 key.
    let mut foreign = g.seeds_keys.clone();
    foreign.keys.retain(|k| k.keyid.starts_with("SHA256:DhQ8"));
    assert!(
        reason(name, "1.0.0", integrity, sigs, &foreign, published()).contains("does not hold")
    );
    // No signature at all from a signing registry.
    assert!(
        reason(name, "1.0.0", integrity, &[], &g.seeds_keys, published())
            .contains("no registry signature")
    );
}

#[test]
fn a_key_whose_bytes_are_not_its_id_is_refused_and_a_served_conflict_is_named() {
    let Some(dir) = fixtures() else { return };
    let g = golden(&dir);
    let other = &g.seeds_keys.keys[1];
    let lying = serde_json::json!({ "keys": [{
        "keyid": "SHA256:jl3bwswu80PjjokCgh0o2w5c2U4LhQAE57gj9cz1kzA",
        "key": base64::engine::general_purpose::STANDARD.encode(&other.spki),
        "expires": null,
    }]});
    let err = RegistryKeys::from_npm_keys(&lying.to_string(), "keys.json").unwrap_err();
    assert!(
        format!("{err:#}").contains("not the key its id names"),
        "{err:#}"
    );
    let mut served = g.npm_keys.clone();
    served.origin = "http://registry/-/npm/v1/keys".into();
    assert!(g.seeds_keys.conflicts_with(&served).is_empty());
    served.keys[0].spki = other.spki.clone();
    assert_eq!(g.seeds_keys.conflicts_with(&served).len(), 1);
}
