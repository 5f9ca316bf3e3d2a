//! npm registry signatures, bound to the lockfile: every version the tool takes is checked as
//! `<name>@<version>:<integrity>` (the integrity the lockfile will record) against the
//! registry's keys valid at the version's publish time.
//!
//! The form is npm's (npm/cli `lib/utils/verify-signatures.js`, pacote `lib/registry.js`):
//! `dist.signatures[] = { keyid, sig }`, ECDSA P-256 over SHA-256, `sig` DER in base64,
//! `keyid` = the key's OpenSSH fingerprint (`SHA256:` + unpadded base64 of the sha256 of its
//! SSH wire form; npm names the key type `ecdsa-sha2-nistp256`, as SSH does: checked against
//! registry.npmjs.org's own key, whose id is not the hash of its SubjectPublicKeyInfo). The
//! keys come in two forms: the registry's `/-/npm/v1/keys` (`{keys: [{keyid, key, expires}]}`)
//! and the TUF target `registry.npmjs.org/keys.json` that npm ships in
//! `node_modules/@sigstore/tuf/seeds.json` (`{keys: [{keyId, keyUsage, publicKey: {rawBytes,
//! validFor: {start, end}}}]}`). Pure functions; the anchors are read in `trust_anchors.rs`.

use anyhow::{bail, Context, Result};
use base64::Engine as _;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::npm::registry::DistSignature;

/// One registry signing key, with the window in which it may have signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RegistryKey {
    pub keyid: String,
    /// DER SubjectPublicKeyInfo.
    pub spki: Vec<u8>,
    pub valid_from: Option<DateTime<Utc>>,
    pub valid_until: Option<DateTime<Utc>>,
}

/// The keys a registry's signatures are judged by, and where they came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RegistryKeys {
    pub origin: String,
    pub keys: Vec<RegistryKey>,
}

/// The DER SubjectPublicKeyInfo header of every P-256 key (id-ecPublicKey, prime256v1), before
/// the uncompressed point.
const P256_SPKI_HEADER: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// How npm names a key: its OpenSSH fingerprint, `SHA256:` + unpadded base64 of the sha256 of
/// the SSH wire form (`string "ecdsa-sha2-nistp256"`, `string "nistp256"`, `string Q`, RFC
/// 5656 section 3.1). `None` for anything but a P-256 SubjectPublicKeyInfo.
pub(crate) fn keyid_of(spki: &[u8]) -> Option<String> {
    let point = spki.strip_prefix(&P256_SPKI_HEADER[..])?;
    if point.len() != 65 || point[0] != 4 {
        return None;
    }
    let mut wire = Vec::new();
    for part in [&b"ecdsa-sha2-nistp256"[..], b"nistp256", point] {
        wire.extend_from_slice(&(part.len() as u32).to_be_bytes());
        wire.extend_from_slice(part);
    }
    Some(format!(
        "SHA256:{}",
        base64::engine::general_purpose::STANDARD_NO_PAD.encode(Sha256::digest(&wire))
    ))
}

fn decode_key(keyid: &str, key: &str, origin: &str) -> Result<Vec<u8>> {
    let spki = base64::engine::general_purpose::STANDARD
        .decode(key.trim())
        .with_context(|| format!("{origin}: key {keyid} is not base64"))?;
    match keyid_of(&spki) {
        None => bail!("{origin}: key {keyid} is not an ECDSA P-256 public key"),
        Some(id) if id != keyid => {
            bail!("{origin}: key {keyid} is not the key its id names (its fingerprint is {id})")
        }
        Some(_) => {}
    }
    Ok(spki)
}

fn time(text: &str, origin: &str) -> Result<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .with_context(|| format!("{origin}: `{text}` is not an RFC 3339 time"))
}

impl RegistryKeys {
    /// npm's `/-/npm/v1/keys` answer (and `--trusted-keys`): `expires` ends a key's window.
    pub(crate) fn from_npm_keys(json: &str, origin: &str) -> Result<RegistryKeys> {
        #[derive(Deserialize)]
        struct Doc {
            keys: Vec<Key>,
        }
        #[derive(Deserialize)]
        struct Key {
            keyid: String,
            key: String,
            #[serde(default)]
            expires: Option<String>,
            #[serde(default)]
            keytype: Option<String>,
        }
        let doc: Doc = serde_json::from_str(json).with_context(|| {
            format!("{origin} is not npm's registry keys form ({{\"keys\": [{{\"keyid\", \"key\", \"expires\"}}]}})")
        })?;
        let mut keys = Vec::new();
        for k in doc.keys {
            if let Some(t) = k.keytype.as_deref().filter(|t| *t != "ecdsa-sha2-nistp256") {
                bail!(
                    "{origin}: key {} is of type {t}, not ecdsa-sha2-nistp256",
                    k.keyid
                );
            }
            keys.push(RegistryKey {
                spki: decode_key(&k.keyid, &k.key, origin)?,
                valid_from: None,
                valid_until: k.expires.as_deref().map(|t| time(t, origin)).transpose()?,
                keyid: k.keyid,
            });
        }
        Ok(RegistryKeys {
            origin: origin.to_owned(),
            keys,
        })
    }

    /// The TUF target `registry.npmjs.org/keys.json`: only `npm:signatures` keys, each with
    /// its `validFor` window.
    pub(crate) fn from_tuf_target(json: &str, origin: &str) -> Result<RegistryKeys> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Doc {
            keys: Vec<Key>,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Key {
            key_id: String,
            key_usage: String,
            public_key: PublicKey,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct PublicKey {
            raw_bytes: String,
            #[serde(default)]
            valid_for: Option<Window>,
        }
        #[derive(Deserialize)]
        struct Window {
            #[serde(default)]
            start: Option<String>,
            #[serde(default)]
            end: Option<String>,
        }
        let doc: Doc = serde_json::from_str(json)
            .with_context(|| format!("{origin} is not npm's TUF keys target"))?;
        let mut keys = Vec::new();
        for k in doc
            .keys
            .into_iter()
            .filter(|k| k.key_usage == "npm:signatures")
        {
            let window = k.public_key.valid_for.unwrap_or(Window {
                start: None,
                end: None,
            });
            keys.push(RegistryKey {
                spki: decode_key(&k.key_id, &k.public_key.raw_bytes, origin)?,
                valid_from: window
                    .start
                    .as_deref()
                    .map(|t| time(t, origin))
                    .transpose()?,
                valid_until: window.end.as_deref().map(|t| time(t, origin)).transpose()?,
                keyid: k.key_id,
            });
        }
        if keys.is_empty() {
            bail!("{origin} holds no npm:signatures key");
        }
        Ok(RegistryKeys {
            origin: origin.to_owned(),
            keys,
        })
    }

    /// What is wrong with the keys a registry serves, judged by these anchors: a key id the
    /// anchors know with other key bytes. A served key the anchors do not know is not trusted
    /// (it is not added), so it needs no error here: its signatures fail as "unknown key".
    pub(crate) fn conflicts_with(&self, served: &RegistryKeys) -> Vec<String> {
        served
            .keys
            .iter()
            .filter(|s| {
                self.keys
                    .iter()
                    .any(|a| a.keyid == s.keyid && a.spki != s.spki)
            })
            .map(|s| {
                format!(
                    "{} serves key {} with other bytes than {} holds",
                    served.origin, s.keyid, self.origin
                )
            })
            .collect()
    }
}

/// Checks one version's registry signatures over `<name>@<version>:<integrity>`: at least one
/// must verify with a known key valid at `published`. `Ok` names the key; `Err` says why not.
pub(crate) fn check(
    name: &str,
    version: &str,
    integrity: &str,
    signatures: &[DistSignature],
    keys: &RegistryKeys,
    published: Option<DateTime<Utc>>,
) -> std::result::Result<String, String> {
    if signatures.is_empty() {
        return Err(
            "no registry signature (dist.signatures is empty or missing), though the registry signs"
                .to_string(),
        );
    }
    let message = format!("{name}@{version}:{integrity}");
    let mut reasons = Vec::new();
    for signature in signatures {
        let Some(key) = keys.keys.iter().find(|k| k.keyid == signature.keyid) else {
            reasons.push(format!(
                "signed by key {}, which {} does not hold",
                signature.keyid, keys.origin
            ));
            continue;
        };
        match (published, key.valid_from, key.valid_until) {
            (None, from, until) if from.is_some() || until.is_some() => {
                reasons.push(format!(
                    "publish time unknown, so key {} (valid only for a window) cannot be judged",
                    key.keyid
                ));
                continue;
            }
            (Some(t), _, Some(until)) if t >= until => {
                reasons.push(format!(
                    "key {} expired at {}, before the publish time {}",
                    key.keyid,
                    until.to_rfc3339(),
                    t.to_rfc3339()
                ));
                continue;
            }
            (Some(t), Some(from), _) if t < from => {
                reasons.push(format!(
                    "key {} was not yet valid at the publish time {} (valid from {})",
                    key.keyid,
                    t.to_rfc3339(),
                    from.to_rfc3339()
                ));
                continue;
            }
            _ => {}
        }
        let Ok(sig) = base64::engine::general_purpose::STANDARD.decode(signature.sig.trim()) else {
            reasons.push(format!("the signature by {} is not base64", key.keyid));
            continue;
        };
        match template_verify::sigstore::verify_p256_sha256(&key.spki, message.as_bytes(), &sig) {
            Ok(()) => return Ok(key.keyid.clone()),
            Err(_) => reasons.push(format!(
                "the signature by {} does not verify over `{message}`",
                key.keyid
            )),
        }
    }
    Err(reasons.join("; "))
}

#[cfg(test)]
mod tests;
