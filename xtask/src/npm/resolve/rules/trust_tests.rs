//! The resolver's trust rules over small packuments: provenance fetched only where the
//! decision needs it, refused or missing provenance passed over with its reason, the cooldown
//! from the log's time, and no downgrade of trust evidence.

use super::*;
use crate::npm::signatures::{keyid_of, RegistryKey, RegistryKeys};
use serde_json::json;

fn now() -> DateTime<Utc> {
    "2026-11-29T12:00:00Z".parse().unwrap()
}

/// A registry key that signs, as registry.npmjs.org does.
struct Key {
    pair: aws_lc_rs::signature::EcdsaKeyPair,
    keys: RegistryKeys,
}

fn key() -> Key {
    use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
    let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING).unwrap();
    let mut spki = hex::decode("3059301306072a8648ce3d020106082a8648ce3d030107034200").unwrap();
    spki.extend_from_slice(pair.public_key().as_ref());
    let keyid = keyid_of(&spki).unwrap();
    Key {
        pair,
        keys: RegistryKeys {
            origin: "test keys".into(),
            keys: vec![RegistryKey {
                keyid,
                spki,
                valid_from: None,
                valid_until: None,
            }],
        },
    }
}

/// `versions`: (version, days before now, extra fields of its entry); every version signed.
fn packument(key: &Key, versions: &[(&str, i64, serde_json::Value)]) -> Packument {
    use base64::Engine as _;
    let mut vs = serde_json::Map::new();
    let mut time = serde_json::Map::new();
    let mut latest = semver::Version::new(0, 0, 0);
    for (v, days, extra) in versions {
        let integrity = format!("sha512-{}", "A".repeat(86) + "==");
        let message = format!("a@{v}:{integrity}");
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let sig = key.pair.sign(&rng, message.as_bytes()).unwrap();
        let mut entry = json!({ "name": "a", "version": v, "dist": {
            "integrity": integrity,
            "signatures": [{ "keyid": key.keys.keys[0].keyid,
                "sig": base64::engine::general_purpose::STANDARD.encode(sig.as_ref()) }],
        }});
        for (k, value) in extra.as_object().unwrap() {
            if k == "attestations" {
                entry["dist"]["attestations"] = value.clone();
            } else {
                entry[k] = value.clone();
            }
        }
        vs.insert((*v).into(), entry);
        time.insert(
            (*v).into(),
            json!((now() - chrono::Duration::days(*days)).to_rfc3339()),
        );
        latest = latest.max(semver::Version::parse(v).unwrap());
    }
    serde_json::from_value(
        json!({ "name": "a", "dist-tags": { "latest": latest.to_string() },
        "versions": vs, "time": time }),
    )
    .unwrap()
}

fn provenance() -> serde_json::Value {
    json!({ "attestations": {
        "url": "https://r.example/-/npm/v1/attestations/a@1.0.0",
        "provenance": { "predicateType": "https://slsa.dev/provenance/v1" } } })
}

fn trusted(name: &str) -> serde_json::Value {
    let mut v = provenance();
    v["_npmUser"] = json!({ "name": name, "email": "npm-oidc-no-reply@github.com",
        "trustedPublisher": { "id": "github", "oidcConfigId": "oidc:1" } });
    v
}

fn account(name: &str) -> serde_json::Value {
    json!({ "_npmUser": { "name": name, "email": "x@example.org" } })
}

fn identity() -> ProvenanceIdentity {
    ProvenanceIdentity {
        repository: "o/a".into(),
        workflow: ".github/workflows/release.yml".into(),
        ref_pattern: "refs/tags/v*".into(),
        source: "test".into(),
    }
}

fn verified(logged_days_ago: i64) -> Outcome {
    Outcome::Verified(ProvenanceRecord {
        repository: "o/a".into(),
        workflow: ".github/workflows/release.yml".into(),
        git_ref: "refs/tags/v1".into(),
        issuer: template_formats::manifest::GITHUB_ACTIONS_ISSUER.into(),
        identity_pinned: true,
        predicate_type: "https://slsa.dev/provenance/v1".into(),
        log_integrated_time: Some(now() - chrono::Duration::days(logged_days_ago)),
    })
}

struct World<'a> {
    packument: &'a Packument,
    trust: InputTrust,
    identity: Option<ProvenanceIdentity>,
    outcomes: BTreeMap<String, Outcome>,
    locked: Option<Version>,
    locked_trust: Option<LockedTrust>,
}

impl<'a> World<'a> {
    fn new(key: &Key, packument: &'a Packument) -> World<'a> {
        World {
            packument,
            trust: InputTrust::Signed(key.keys.clone()),
            identity: None,
            outcomes: BTreeMap::new(),
            locked: None,
            locked_trust: None,
        }
    }

    fn inputs(&self) -> Inputs<'_> {
        static RELATED: std::sync::OnceLock<Related> = std::sync::OnceLock::new();
        Inputs {
            packument: self.packument,
            related: RELATED.get_or_init(Related::new),
            locked: self.locked.as_ref(),
            now: now(),
            cutoff: now() - chrono::Duration::hours(48),
            cpus: &["x64", "arm64"],
            trust: &self.trust,
            identity: self.identity.as_ref(),
            provenance: &self.outcomes,
            locked_trust: self.locked_trust.as_ref(),
            scripts: None,
        }
    }

    fn to_fetch(&self) -> Option<String> {
        provenance_to_fetch(&self.inputs()).map(|v| v.to_string())
    }

    fn decide(&self) -> Result<Resolved> {
        decide(&self.inputs())
    }
}

fn reasons(r: &Resolved, version: &str) -> String {
    r.rejected
        .iter()
        .find(|x| x.version.to_string() == version)
        .map(|x| x.reasons.join("; "))
        .unwrap_or_default()
}

#[test]
fn provenance_is_fetched_for_the_newest_candidate_only_and_a_refusal_falls_back() {
    let key = key();
    let p = packument(
        &key,
        &[
            ("1.0.0", 9, provenance()),
            ("1.1.0", 5, provenance()),
            ("1.2.0", 1, provenance()),
        ],
    );
    let mut w = World::new(&key, &p);
    w.identity = Some(identity());
    // 1.2.0 is inside the cooldown: its provenance is not needed; 1.1.0's is.
    assert_eq!(w.to_fetch().as_deref(), Some("1.1.0"));
    w.outcomes.insert(
        "1.1.0".into(),
        Outcome::Refused("provenance identity: built from ref refs/heads/x".into()),
    );
    assert_eq!(w.to_fetch().as_deref(), Some("1.0.0"));
    w.outcomes.insert("1.0.0".into(), verified(9));
    assert_eq!(w.to_fetch(), None);
    let r = w.decide().unwrap();
    assert_eq!(r.version.to_string(), "1.0.0");
    assert!(r.held_back);
    assert!(
        reasons(&r, "1.1.0").contains("refs/heads/x"),
        "{:?}",
        r.rejected
    );
    assert_eq!(r.provenance.unwrap().repository, "o/a");
    assert_eq!(r.evidence, Evidence::Provenance);
}

#[test]
fn a_version_without_the_provenance_the_manifest_requires_is_passed_over() {
    let key = key();
    // The registry shows no provenance for either version (a proxy that strips it everywhere
    // leaves no earlier version to compare with): the manifest's identity still requires it.
    let p = packument(&key, &[("1.0.0", 9, json!({})), ("1.1.0", 5, json!({}))]);
    let mut w = World::new(&key, &p);
    w.identity = Some(identity());
    // Not fetched at all: fails closed, never taken.
    let err = format!("{:#}", w.decide().unwrap_err());
    assert!(err.contains("provenance: not checked"), "{err}");
    for version in ["1.1.0", "1.0.0"] {
        assert_eq!(w.to_fetch().as_deref(), Some(version));
        w.outcomes.insert(
            version.into(),
            Outcome::Absent("the registry lists no provenance".into()),
        );
    }
    assert_eq!(w.to_fetch(), None);
    let err = format!("{:#}", w.decide().unwrap_err());
    assert!(
        err.contains("1.1.0: provenance: none (the registry lists no provenance), but the manifest requires it from https://github.com/o/a/.github/workflows/release.yml at refs/tags/v*"),
        "{err}"
    );
    // Without an identity in the manifest, a version without provenance is fine.
    w.identity = None;
    assert_eq!(w.decide().unwrap().version.to_string(), "1.1.0");
}

#[test]
fn an_unverified_registry_needs_no_provenance_and_judges_no_downgrade() {
    let key = key();
    let p = packument(
        &key,
        &[
            ("1.0.0", 9, trusted("GitHub Actions")),
            ("1.1.0", 5, json!({})),
        ],
    );
    let mut w = World::new(&key, &p);
    w.identity = Some(identity());
    w.trust = InputTrust::Unverified {
        registry: "https://r.example".into(),
    };
    assert_eq!(w.to_fetch(), None);
    assert_eq!(w.decide().unwrap().version.to_string(), "1.1.0");
}

#[test]
fn the_cooldown_counts_from_the_log_s_integrated_time_when_it_is_later() {
    let key = key();
    let p = packument(
        &key,
        &[("1.0.0", 9, provenance()), ("1.1.0", 5, provenance())],
    );
    let mut w = World::new(&key, &p);
    w.identity = Some(identity());
    // The registry says 1.1.0 is five days old; the log saw its provenance one day ago.
    w.outcomes.insert("1.1.0".into(), verified(1));
    w.outcomes.insert("1.0.0".into(), verified(9));
    let r = w.decide().unwrap();
    assert_eq!(r.version.to_string(), "1.0.0");
    let why = reasons(&r, "1.1.0");
    assert!(
        why.contains("its provenance logged at") && why.contains("inside the cooldown"),
        "{why}"
    );
    // Logged when published: taken.
    w.outcomes.insert("1.1.0".into(), verified(5));
    assert_eq!(w.decide().unwrap().version.to_string(), "1.1.0");
}

#[test]
fn less_evidence_than_an_earlier_or_the_locked_version_is_a_downgrade() {
    let key = key();
    // 1.0.0 came through trusted publishing; 1.1.0 only with provenance from an account.
    let p = packument(
        &key,
        &[
            ("1.0.0", 9, trusted("GitHub Actions")),
            ("1.1.0", 5, {
                let mut v = provenance();
                v["_npmUser"] = json!({ "name": "mallory", "email": "m@example.org" });
                v
            }),
        ],
    );
    let mut w = World::new(&key, &p);
    w.outcomes.insert("1.0.0".into(), verified(9));
    w.outcomes.insert("1.1.0".into(), verified(5));
    let r = w.decide().unwrap();
    assert_eq!(r.version.to_string(), "1.0.0");
    let why = reasons(&r, "1.1.0");
    assert!(
        why.contains("trust downgrade: 1.0.0, published before it, had trusted publishing, this version has provenance"),
        "{why}"
    );
    assert_eq!(r.evidence, Evidence::TrustedPublisher);

    // The locked version's record: it had provenance; a newer version with none (and no
    // earlier version in the packument showing any, as a stripping proxy would serve it).
    let p = packument(&key, &[("1.0.0", 9, json!({})), ("1.1.0", 5, json!({}))]);
    let mut w = World::new(&key, &p);
    w.locked = Some(Version::parse("1.0.0").unwrap());
    w.locked_trust = Some(LockedTrust {
        version: "1.0.0".into(),
        evidence: Evidence::Provenance,
        publisher: None,
        provenance: None,
    });
    let err = format!("{:#}", w.decide().unwrap_err());
    assert!(
        err.contains("1.1.0: trust downgrade: the locked 1.0.0 had provenance, this version has no trust evidence")
            && err.contains("1.0.0: trust downgrade"),
        "{err}"
    );
}

#[test]
fn a_publisher_change_is_shown_and_not_blocking_between_accounts() {
    let key = key();
    let p = packument(
        &key,
        &[("1.0.0", 9, account("alice")), ("1.1.0", 5, account("bob"))],
    );
    let mut w = World::new(&key, &p);
    w.locked = Some(Version::parse("1.0.0").unwrap());
    let r = w.decide().unwrap();
    assert_eq!(r.version.to_string(), "1.1.0");
    assert_eq!(r.publisher.as_deref(), Some("bob"));
    assert_eq!(r.publisher_change.as_deref(), Some("alice -> bob"));
    assert!(
        r.notes
            .iter()
            .any(|n| n == "PUBLISHER CHANGED: alice -> bob"),
        "{:?}",
        r.notes
    );
    // The committed record of the locked version's publisher counts over the packument's.
    w.locked_trust = Some(LockedTrust {
        version: "1.0.0".into(),
        publisher: Some("carol".into()),
        ..LockedTrust::default()
    });
    assert_eq!(
        w.decide().unwrap().publisher_change.as_deref(),
        Some("carol -> bob")
    );
}

#[test]
fn the_trusted_publisher_is_read_from_npm_user() {
    let meta: VersionMeta = serde_json::from_value(json!({ "version": "1.0.0",
        "_npmUser": { "name": "GitHub Actions", "email": "npm-oidc-no-reply@github.com",
            "trustedPublisher": { "id": "github", "oidcConfigId": "oidc:1" } } }))
    .unwrap();
    assert_eq!(evidence_of(&meta), Evidence::TrustedPublisher);
    assert_eq!(
        publisher_of(&meta).as_deref(),
        Some("GitHub Actions (trusted publishing)")
    );
    // An empty provider is no trusted publisher (pnpm requires an id).
    let meta: VersionMeta = serde_json::from_value(json!({ "version": "1.0.0",
        "_npmUser": { "name": "x", "trustedPublisher": { "id": "" } } }))
    .unwrap();
    assert_eq!(evidence_of(&meta), Evidence::None);
}
