//! A STAND-IN for Sigstore, for the fixture npm registry's provenance (and, through
//! `statement_bundle`, the negatives of `template-verify attestation verify` no real bundle
//! gives: verify/tests/attestation_cli.rs includes this file): its own certificate
//! authority (Fulcio-like), its own certificate transparency log and its own transparency log
//! (Rekor-like), and the trusted root that names them. It is not Sigstore and trusts nothing of
//! Sigstore's: a bundle it makes verifies only against its own root (`trusted_root`), which the
//! tests hand to the tool with `--trusted-root`, as a private Sigstore deployment would be.
//!
//! Each behaviour it imitates is cited where it is made:
//! - the bundle: sigstore/protobuf-specs `protos/sigstore_bundle.proto`, media type
//!   `application/vnd.dev.sigstore.bundle.v0.3+json` (what npm 11 publishes; the real
//!   sigstore-js 2.1.0 bundle in ../shared/fixtures/sigstore/cli-cli has this form);
//! - the trusted root: protobuf-specs `protos/sigstore_trustroot.proto`,
//!   `application/vnd.dev.sigstore.trustedroot+json;version=0.1` (the public-good root in
//!   ../shared/fixtures/sigstore has this form);
//! - the certificate: Fulcio's for a GitHub Actions token: a 10-minute code-signing
//!   certificate, empty subject, the workflow URI as its subject alternative name, and the
//!   extensions of sigstore/fulcio `docs/oid-info.md` (at sigstore/fulcio@001376a5): `1.3.6.1.4.1.57264.1.1`
//!   to `.1.6` as raw strings, `.1.8` to `.1.22` as DER UTF8Strings;
//! - the embedded SCT: RFC 6962 sections 3.2 and 3.3 (a precertificate entry over the
//!   certificate's TBS without the SCT extension, the issuer key's sha256; ECDSA P-256);
//! - the log entry: Rekor's `intoto` 0.0.2 kind (sigstore/rekor
//!   `pkg/types/intoto/v0.0.2/intoto_v0_0_2_schema.json`: the envelope with its signature
//!   base64'd again and the certificate PEM base64'd, the payload's sha256), the RFC 6962
//!   Merkle tree and inclusion proof, a signed checkpoint in the signed-note form Rekor v1
//!   serves (`origin\nsize\nroot\n\n— name base64(keyhint || sig)\n`, keyhint = the first 4
//!   bytes of the log key's sha256), and the signed entry timestamp over the canonical JSON
//!   `{"body","integratedTime","logID","logIndex"}` (Rekor v1 `inclusionPromise`);
//! - the npm answer: `/-/npm/v1/attestations/<name>@<version>` as registry.npmjs.org serves it
//!   (`{"attestations": [{"predicateType", "bundle"}]}`; ../shared/fixtures/npm), with the
//!   SLSA v1 statement npm writes for GitHub Actions (npm/cli `libnpmpublish/lib/provenance.js`).
//!   The registry's own publish attestation is left out: nothing here reads it.
//!
//! Like the real services it fails closed: a bundle from another stand-in (another CA and
//! logs) does not verify against this one's root.

#![allow(dead_code)]

use std::sync::Mutex;

use base64::Engine as _;
use chrono::{DateTime, Duration, Utc};
use rcgen::{
    CertificateParams, CustomExtension, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType, SerialNumber, SigningKey,
};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

const ISSUER: &str = "https://token.actions.githubusercontent.com";
const LOG_ORIGIN: &str = "rekor.sigstore-standin.test - 1";
const LOG_NAME: &str = "rekor.sigstore-standin.test";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// The GitHub Actions run a bundle claims to come from.
#[derive(Debug, Clone)]
pub struct GithubRun {
    /// `owner/name`.
    pub repository: String,
    /// `.github/workflows/release.yml`.
    pub workflow: String,
    /// `refs/tags/v1.0.0`.
    pub git_ref: String,
    /// Fulcio's runner environment claim (`.1.11`): `github-hosted` unless a test says
    /// otherwise.
    pub runner: String,
    /// The commit built (`.1.3`, `.1.10`, `.1.13`, `.1.19`): forty zeros unless a test says
    /// otherwise.
    pub commit: String,
    /// The build config (`.1.18`) when it is not the signing workflow itself: the caller of a
    /// reusable workflow, as Fulcio records it.
    pub build_config: Option<String>,
}

impl GithubRun {
    pub fn new(repository: &str, workflow: &str, git_ref: &str) -> GithubRun {
        GithubRun {
            repository: repository.into(),
            workflow: workflow.into(),
            git_ref: git_ref.into(),
            runner: "github-hosted".into(),
            commit: "0".repeat(40),
            build_config: None,
        }
    }

    /// Fulcio's subject alternative name for a workflow run: `server_url + job_workflow_ref`.
    fn workflow_uri(&self) -> String {
        format!(
            "https://github.com/{}/{}@{}",
            self.repository, self.workflow, self.git_ref
        )
    }
}

pub struct SigstoreStandIn {
    ca_key: KeyPair,
    ca_params: CertificateParams,
    ca_der: Vec<u8>,
    ct_key: KeyPair,
    log_key: KeyPair,
    /// The transparency log's leaves (RFC 6962 leaf hashes), in order.
    leaves: Mutex<Vec<[u8; 32]>>,
}

fn p256() -> KeyPair {
    KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap()
}

fn key_id(key: &KeyPair) -> [u8; 32] {
    use rcgen::PublicKeyData;
    sha256(&key.subject_public_key_info())
}

fn spki(key: &KeyPair) -> Vec<u8> {
    use rcgen::PublicKeyData;
    key.subject_public_key_info()
}

impl Default for SigstoreStandIn {
    fn default() -> Self {
        Self::new()
    }
}

impl SigstoreStandIn {
    pub fn new() -> SigstoreStandIn {
        let ca_key = p256();
        let mut ca_params = CertificateParams::default();
        ca_params.distinguished_name = DistinguishedName::new();
        ca_params
            .distinguished_name
            .push(DnType::OrganizationName, "sigstore-standin.test");
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "sigstore stand-in (not Sigstore)");
        ca_params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        ca_params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        ca_params.not_after = rcgen::date_time_ymd(2040, 1, 1);
        ca_params.serial_number = Some(SerialNumber::from_slice(&[0x01]));
        let ca_der = ca_params.self_signed(&ca_key).unwrap().der().to_vec();
        SigstoreStandIn {
            ca_key,
            ca_params,
            ca_der,
            ct_key: p256(),
            log_key: p256(),
            leaves: Mutex::new(Vec::new()),
        }
    }

    /// This stand-in's trusted root, in Sigstore's `trusted_root.json` form.
    pub fn trusted_root(&self) -> Value {
        let key = |k: &KeyPair| {
            json!({
                "rawBytes": b64(&spki(k)),
                "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                "validFor": { "start": "2020-01-01T00:00:00Z" },
            })
        };
        json!({
            "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
            "tlogs": [{
                "baseUrl": "https://rekor.sigstore-standin.test",
                "hashAlgorithm": "SHA2_256",
                "publicKey": key(&self.log_key),
                "logId": { "keyId": b64(&key_id(&self.log_key)) },
            }],
            "certificateAuthorities": [{
                "subject": { "organization": "sigstore-standin.test",
                             "commonName": "sigstore stand-in (not Sigstore)" },
                "uri": "https://fulcio.sigstore-standin.test",
                "certChain": { "certificates": [{ "rawBytes": b64(&self.ca_der) }] },
                "validFor": { "start": "2020-01-01T00:00:00Z" },
            }],
            "ctlogs": [{
                "baseUrl": "https://ctfe.sigstore-standin.test",
                "hashAlgorithm": "SHA2_256",
                "publicKey": key(&self.ct_key),
                "logId": { "keyId": b64(&key_id(&self.ct_key)) },
            }],
            "timestampAuthorities": [],
        })
    }

    /// The trusted root written to `dir/trusted_root.json`, for `--trusted-root`.
    pub fn write_trusted_root(&self, dir: &std::path::Path) -> std::path::PathBuf {
        let path = dir.join("trusted_root.json");
        std::fs::write(&path, self.trusted_root().to_string()).unwrap();
        path
    }

    /// The registry's `/-/npm/v1/attestations/<name>@<version>` answer for a version built by
    /// `run`: SLSA v1 provenance about `pkg:npm/<name>@<version>` with `sha512` (the tarball's
    /// digest, 64 bytes), logged at `integrated`.
    pub fn npm_attestations(
        &self,
        name: &str,
        version: &str,
        sha512: &[u8],
        run: &GithubRun,
        integrated: DateTime<Utc>,
    ) -> Value {
        json!({ "attestations": [{
            "predicateType": "https://slsa.dev/provenance/v1",
            "bundle": self.provenance_bundle(name, version, sha512, run, integrated),
        }]})
    }

    /// A Sigstore bundle v0.3 of npm's SLSA v1 provenance.
    pub fn provenance_bundle(
        &self,
        name: &str,
        version: &str,
        sha512: &[u8],
        run: &GithubRun,
        integrated: DateTime<Utc>,
    ) -> Value {
        let purl = format!("pkg:npm/{}@{version}", name.replacen('@', "%40", 1));
        let statement = json!({
            "_type": "https://in-toto.io/Statement/v1",
            "subject": [{ "name": purl, "digest": { "sha512": hex::encode(sha512) } }],
            "predicateType": "https://slsa.dev/provenance/v1",
            "predicate": {
                "buildDefinition": {
                    "buildType": "https://slsa-framework.github.io/github-actions-buildtypes/workflow/v1",
                    "externalParameters": { "workflow": {
                        "ref": run.git_ref,
                        "repository": format!("https://github.com/{}", run.repository),
                        "path": run.workflow,
                    }},
                    "internalParameters": { "github": {
                        "event_name": "release", "repository_id": "1", "repository_owner_id": "2",
                    }},
                    "resolvedDependencies": [{
                        "uri": format!("git+https://github.com/{}@{}", run.repository, run.git_ref),
                        "digest": { "gitCommit": "0".repeat(40) },
                    }],
                },
                "runDetails": {
                    "builder": { "id": "https://github.com/actions/runner/github-hosted" },
                    "metadata": { "invocationId": format!(
                        "https://github.com/{}/actions/runs/1/attempts/1", run.repository) },
                },
            },
        });
        self.statement_bundle(&statement, run, integrated)
    }

    /// A Sigstore bundle v0.3 of `statement` in a DSSE envelope, signed as `run` and logged at
    /// `integrated` (what actions/attest makes for a statement).
    pub fn statement_bundle(
        &self,
        statement: &Value,
        run: &GithubRun,
        integrated: DateTime<Utc>,
    ) -> Value {
        let payload = statement.to_string().into_bytes();
        let payload_type = "application/vnd.in-toto+json";

        // The signer's ephemeral key and its Fulcio-like certificate.
        let signer = p256();
        let cert = self.certificate(&signer, run, integrated);
        // DSSE: the signature is over PAE(type, body) (secure-systems-lab/dsse `protocol.md`).
        let pae = [
            format!(
                "DSSEv1 {} {payload_type} {} ",
                payload_type.len(),
                payload.len()
            )
            .as_bytes(),
            &payload,
        ]
        .concat();
        let sig = signer.sign(&pae).unwrap();

        // Rekor intoto 0.0.2: the entry as Rekor canonicalizes it (keys sorted).
        let cert_pem = pem_certificate(&cert);
        let envelope_for_hash = json!({
            "payload": b64(&payload), "payloadType": payload_type,
            "signatures": [{ "keyid": "", "sig": b64(&sig) }],
        })
        .to_string();
        let body = format!(
            r#"{{"apiVersion":"0.0.2","kind":"intoto","spec":{{"content":{{"envelope":{{"payloadType":"{payload_type}","signatures":[{{"publicKey":"{}","sig":"{}"}}]}},"hash":{{"algorithm":"sha256","value":"{}"}},"payloadHash":{{"algorithm":"sha256","value":"{}"}}}}}}}}"#,
            b64(cert_pem.as_bytes()),
            b64(b64(&sig).as_bytes()),
            hex::encode(sha256(envelope_for_hash.as_bytes())),
            hex::encode(sha256(&payload)),
        );
        let entry = self.log_entry(body.as_bytes(), integrated);

        json!({
            "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
            "verificationMaterial": {
                "certificate": { "rawBytes": b64(&cert) },
                "tlogEntries": [entry],
            },
            "dsseEnvelope": {
                "payload": b64(&payload),
                "payloadType": payload_type,
                "signatures": [{ "sig": b64(&sig), "keyid": "" }],
            },
        })
    }

    /// A 10-minute code-signing certificate for `signer`, as Fulcio issues one for a GitHub
    /// Actions token, with its SCT embedded.
    fn certificate(&self, signer: &KeyPair, run: &GithubRun, at: DateTime<Utc>) -> Vec<u8> {
        let uri = run.workflow_uri();
        let raw = |n: u64, v: &str| CustomExtension::from_oid_content(&fulcio(n), v.into());
        let utf8 = |n: u64, v: &str| CustomExtension::from_oid_content(&fulcio(n), der_utf8(v));
        let repo_uri = format!("https://github.com/{}", run.repository);
        let owner = run.repository.split('/').next().unwrap();
        let sha = run.commit.clone();
        let build_config = run.build_config.clone().unwrap_or_else(|| uri.clone());
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params.subject_alt_names = vec![SanType::URI(uri.as_str().try_into().unwrap())];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::CodeSigning];
        params.use_authority_key_identifier_extension = true;
        params.not_before = time(at - Duration::minutes(1));
        params.not_after = time(at + Duration::minutes(9));
        let serial: [u8; 16] = rand_bytes();
        let mut serial = serial.to_vec();
        serial[0] &= 0x7f;
        params.serial_number = Some(SerialNumber::from_slice(&serial));
        params.custom_extensions = vec![
            raw(1, ISSUER),
            raw(2, "release"),
            raw(3, &sha),
            raw(4, "Publish"),
            raw(5, &run.repository),
            raw(6, &run.git_ref),
            utf8(8, ISSUER),
            utf8(9, &uri),
            utf8(10, &sha),
            utf8(11, &run.runner),
            utf8(12, &repo_uri),
            utf8(13, &sha),
            utf8(14, &run.git_ref),
            utf8(15, "1"),
            utf8(16, &format!("https://github.com/{owner}")),
            utf8(17, "2"),
            utf8(18, &build_config),
            utf8(19, &sha),
            utf8(20, "release"),
            utf8(21, &format!("{repo_uri}/actions/runs/1/attempts/1")),
            utf8(22, "public"),
        ];
        let issuer = Issuer::from_params(&self.ca_params, &self.ca_key);
        // RFC 6962: the log signs the precertificate, the certificate's TBS without the SCT
        // extension; the same parameters give the same TBS, so it is the first signing's.
        let precert = params.signed_by(signer, &issuer).unwrap();
        let tbs = first_element(precert.der());
        let sct_list = self.sct(tbs, at);
        params
            .custom_extensions
            .push(CustomExtension::from_oid_content(
                &[1, 3, 6, 1, 4, 1, 11129, 2, 4, 2],
                der_octet_string(&sct_list),
            ));
        params.signed_by(signer, &issuer).unwrap().der().to_vec()
    }

    /// An SCT list (RFC 6962 3.3) holding this stand-in CT log's SCT over the precertificate.
    fn sct(&self, tbs: &[u8], at: DateTime<Utc>) -> Vec<u8> {
        let timestamp = at.timestamp_millis() as u64;
        let issuer_key_hash = sha256(&spki(&self.ca_key));
        let mut signed = vec![0u8, 0u8]; // v1, certificate_timestamp
        signed.extend_from_slice(&timestamp.to_be_bytes());
        signed.extend_from_slice(&1u16.to_be_bytes()); // precert_entry
        signed.extend_from_slice(&issuer_key_hash);
        signed.extend_from_slice(&(tbs.len() as u32).to_be_bytes()[1..]); // uint24
        signed.extend_from_slice(tbs);
        signed.extend_from_slice(&0u16.to_be_bytes()); // no extensions
        let signature = self.ct_key.sign(&signed).unwrap();
        let mut sct = vec![0u8]; // v1
        sct.extend_from_slice(&key_id(&self.ct_key));
        sct.extend_from_slice(&timestamp.to_be_bytes());
        sct.extend_from_slice(&0u16.to_be_bytes());
        sct.extend_from_slice(&[4, 3]); // sha256, ecdsa
        sct.extend_from_slice(&(signature.len() as u16).to_be_bytes());
        sct.extend_from_slice(&signature);
        let mut list = ((sct.len() + 2) as u16).to_be_bytes().to_vec();
        list.extend_from_slice(&(sct.len() as u16).to_be_bytes());
        list.extend_from_slice(&sct);
        list
    }

    /// Appends `body` to the log and returns the bundle's `tlogEntries[]` item for it: its
    /// index, the inclusion proof to a signed checkpoint of the tree as it now is, and the
    /// signed entry timestamp.
    fn log_entry(&self, body: &[u8], integrated: DateTime<Utc>) -> Value {
        let mut leaves = self.leaves.lock().unwrap();
        let index = leaves.len();
        leaves.push(leaf_hash(body));
        let size = leaves.len();
        let root = tree_hash(&leaves);
        let proof = inclusion_path(index, &leaves);
        let note = format!("{LOG_ORIGIN}\n{size}\n{}\n", b64(&root));
        let mut hinted = key_id(&self.log_key)[..4].to_vec();
        hinted.extend(self.log_key.sign(note.as_bytes()).unwrap());
        let checkpoint = format!("{note}\n\u{2014} {LOG_NAME} {}\n", b64(&hinted));
        let log_id = key_id(&self.log_key);
        let time = integrated.timestamp();
        let promise = format!(
            r#"{{"body":"{}","integratedTime":{time},"logID":"{}","logIndex":{index}}}"#,
            b64(body),
            hex::encode(log_id)
        );
        json!({
            "logIndex": index.to_string(),
            "logId": { "keyId": b64(&log_id) },
            "kindVersion": { "kind": "intoto", "version": "0.0.2" },
            "integratedTime": time.to_string(),
            "inclusionPromise": {
                "signedEntryTimestamp": b64(&self.log_key.sign(promise.as_bytes()).unwrap()),
            },
            "inclusionProof": {
                "logIndex": index.to_string(),
                "rootHash": b64(&root),
                "treeSize": size.to_string(),
                "hashes": proof.iter().map(|h| b64(h)).collect::<Vec<_>>(),
                "checkpoint": { "envelope": checkpoint },
            },
            "canonicalizedBody": b64(body),
        })
    }
}

/// `1.3.6.1.4.1.57264.1.<n>`, Fulcio's arc.
fn fulcio(n: u64) -> Vec<u64> {
    vec![1, 3, 6, 1, 4, 1, 57264, 1, n]
}

fn der_length(len: usize) -> Vec<u8> {
    if len < 0x80 {
        vec![len as u8]
    } else {
        let bytes: Vec<u8> = len
            .to_be_bytes()
            .into_iter()
            .skip_while(|b| *b == 0)
            .collect();
        [vec![0x80 | bytes.len() as u8], bytes].concat()
    }
}

fn der_utf8(text: &str) -> Vec<u8> {
    [vec![0x0c], der_length(text.len()), text.as_bytes().to_vec()].concat()
}

fn der_octet_string(bytes: &[u8]) -> Vec<u8> {
    [vec![0x04], der_length(bytes.len()), bytes.to_vec()].concat()
}

/// The first element inside a DER SEQUENCE (a certificate's TBSCertificate), tag and length
/// included.
fn first_element(der: &[u8]) -> &[u8] {
    let header = |at: usize| -> (usize, usize) {
        let first = der[at + 1] as usize;
        if first < 0x80 {
            (2, first)
        } else {
            let n = first & 0x7f;
            let len = der[at + 2..at + 2 + n]
                .iter()
                .fold(0usize, |acc, b| (acc << 8) | *b as usize);
            (2 + n, len)
        }
    };
    let (outer, _) = header(0);
    let (inner, len) = header(outer);
    &der[outer..outer + inner + len]
}

fn pem_certificate(der: &[u8]) -> String {
    let body = b64(der);
    let lines: Vec<&str> = body
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    format!(
        "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
        lines.join("\n")
    )
}

fn time(t: DateTime<Utc>) -> time::OffsetDateTime {
    time::OffsetDateTime::from_unix_timestamp(t.timestamp()).unwrap()
}

fn rand_bytes<const N: usize>() -> [u8; N] {
    let mut out = [0u8; N];
    aws_lc_rs::rand::fill(&mut out).unwrap();
    out
}

/// RFC 6962 2.1: a leaf's hash.
fn leaf_hash(body: &[u8]) -> [u8; 32] {
    sha256(&[&[0u8][..], body].concat())
}

fn node_hash(left: &[u8; 32], right: &[u8; 32]) -> [u8; 32] {
    sha256(&[&[1u8][..], left, right].concat())
}

/// The largest power of two smaller than `n` (n > 1).
fn split(n: usize) -> usize {
    let mut k = 1;
    while k * 2 < n {
        k *= 2;
    }
    k
}

/// RFC 6962 2.1: MTH over leaf hashes.
fn tree_hash(leaves: &[[u8; 32]]) -> [u8; 32] {
    match leaves.len() {
        0 => sha256(b""),
        1 => leaves[0],
        n => {
            let k = split(n);
            node_hash(&tree_hash(&leaves[..k]), &tree_hash(&leaves[k..]))
        }
    }
}

/// RFC 6962 2.1.1: PATH(m, D[n]), from the leaf's sibling up.
fn inclusion_path(m: usize, leaves: &[[u8; 32]]) -> Vec<[u8; 32]> {
    let n = leaves.len();
    if n <= 1 {
        return Vec::new();
    }
    let k = split(n);
    if m < k {
        let mut path = inclusion_path(m, &leaves[..k]);
        path.push(tree_hash(&leaves[k..]));
        path
    } else {
        let mut path = inclusion_path(m - k, &leaves[k..]);
        path.push(tree_hash(&leaves[..k]));
        path
    }
}
