//! The online check of a receipt (`receipt verify --check-registry`, `pin --check-registry`):
//! does the registry the receipt names hold exactly what the receipt says?
//!
//! Offline, a receipt can only be checked for consistency: someone who edits a platform
//! digest and recomputes the index digest, the size, the reference and the file name has a
//! receipt that holds together. The registry is the independent witness. This module fetches
//! the index by its digest and checks that the bytes hash to that digest and list exactly the
//! receipt's platform manifests (digest, media type, size, platform); fetches each platform
//! manifest by digest and checks its bytes and its config digest; and resolves the release
//! tag, which must point at the index digest. Bytes are always hashed here, never taken from
//! a registry header.
//!
//! [`registry_problems`] is pure over what was fetched ([`RegistryEvidence`]); [`fetch`] is
//! the network edge and uses the publish module's registry client (HTTP, auth, retries).

use std::collections::BTreeMap;

use anyhow::{Context, Result};

use crate::oci::client::{RegistryClient, RegistryTarget};
use crate::oci::credentials::{credentials_for, credentials_from_env, EnvCredentialsHost};
use crate::receipt::{problem, Problem};
use crate::settings::Environment;
use template_formats::hash::sha256_hex;
use template_formats::model::receipt::{PlatformRecord, Receipt};
use template_formats::oci::reference::parse_repository_name;

/// The largest manifest or index read from a registry (the limit registries themselves
/// commonly enforce): the registry is named by the receipt, so it may be hostile.
pub const MAX_MANIFEST_BYTES: usize = 4 << 20;

/// The largest image config read from a registry (a config is a few KiB; its history grows
/// with the Dockerfile, not with the image).
pub const MAX_CONFIG_BYTES: usize = 1 << 20;

/// How long the whole registry check may take before it is a failure.
pub const REGISTRY_CHECK_LIMIT: std::time::Duration = std::time::Duration::from_secs(180);

/// What the registry answered: `None` where it has no such manifest (404).
#[derive(Debug, Clone, Default)]
pub struct RegistryEvidence {
    /// `GET manifests/<index digest>`.
    pub index: Option<Vec<u8>>,
    /// `GET manifests/<release tag>`.
    pub tag: Option<Vec<u8>>,
    /// Platform manifest digest -> `GET manifests/<digest>`.
    pub manifests: BTreeMap<String, Option<Vec<u8>>>,
    /// Config digest (as a verified platform manifest names it) -> `GET blobs/<digest>`.
    pub configs: BTreeMap<String, Option<Vec<u8>>>,
}

fn digest_of(bytes: &[u8]) -> String {
    format!("sha256:{}", sha256_hex(bytes))
}

/// Compares what the registry holds with the receipt; every difference names the receipt
/// field the registry contradicts.
pub fn registry_problems(r: &Receipt, e: &RegistryEvidence) -> Vec<Problem> {
    let mut out = Vec::new();
    let where_ = &r.index.repository;
    match &e.index {
        None => out.push(problem(
            "index.digest",
            format!(
                "{} has no manifest {}: the release is not in the registry the receipt names",
                where_, r.index.digest
            ),
        )),
        Some(bytes) => {
            let actual = digest_of(bytes);
            if actual != r.index.digest {
                out.push(problem(
                    "index.digest",
                    format!(
                        "{} served bytes with digest {actual} for {}",
                        where_, r.index.digest
                    ),
                ));
            } else {
                if bytes.len() as u64 != r.index.size {
                    out.push(problem(
                        "index.size",
                        format!(
                            "is {}, the registry's index is {} bytes",
                            r.index.size,
                            bytes.len()
                        ),
                    ));
                }
                out.extend(index_content_problems(r, bytes));
            }
        }
    }
    for (i, p) in r.platforms.iter().enumerate() {
        let field = |f: &str| format!("platforms[{i}].{f}");
        match e.manifests.get(&p.digest) {
            None | Some(None) => out.push(problem(
                field("digest"),
                format!("{} has no manifest {} ({})", where_, p.digest, p.platform),
            )),
            Some(Some(bytes)) => {
                let actual = digest_of(bytes);
                if actual != p.digest {
                    out.push(problem(
                        field("digest"),
                        format!(
                            "{} served bytes with digest {actual} for {} ({})",
                            where_, p.digest, p.platform
                        ),
                    ));
                    continue;
                }
                if bytes.len() as u64 != p.manifest_size {
                    out.push(problem(
                        field("manifest_size"),
                        format!(
                            "is {}, the registry's manifest is {} bytes",
                            p.manifest_size,
                            bytes.len()
                        ),
                    ));
                }
                match template_formats::strict_json::parse(bytes) {
                    Err(err) => out.push(problem(
                        field("digest"),
                        format!("the registry's manifest {} is not JSON: {err}", p.digest),
                    )),
                    Ok(manifest) => {
                        if manifest["mediaType"].as_str() != Some(p.media_type.as_str()) {
                            out.push(problem(
                                field("media_type"),
                                format!(
                                    "`{}`, but the registry's manifest says {}",
                                    p.media_type, manifest["mediaType"]
                                ),
                            ));
                        }
                        out.extend(layer_problems(i, p, &manifest));
                        let config = manifest["config"]["digest"].as_str();
                        if config != Some(p.config_digest.as_str()) {
                            out.push(problem(
                                field("config_digest"),
                                format!(
                                    "is {}, but the registry's manifest {} has config {}",
                                    p.config_digest,
                                    p.digest,
                                    config.unwrap_or("(none)")
                                ),
                            ));
                        } else {
                            out.extend(config_problems(i, p, &manifest, e, where_));
                        }
                    }
                }
            }
        }
    }
    match &e.tag {
        None => out.push(problem(
            "release_tag",
            format!(
                "{}:{} does not exist: the release tag was never published there",
                where_, r.release_tag
            ),
        )),
        Some(bytes) => {
            let actual = digest_of(bytes);
            if actual != r.index.digest {
                out.push(problem(
                    "release_tag",
                    format!(
                        "{}:{} points at {actual}, not at the receipt's index {}",
                        where_, r.release_tag, r.index.digest
                    ),
                ));
            }
        }
    }
    out
}

/// The layers a receipt records for a platform (when it records them: the release notes count
/// what a host must pull from them) against the registry's manifest, blob by blob.
fn layer_problems(i: usize, p: &PlatformRecord, manifest: &serde_json::Value) -> Vec<Problem> {
    let Some(recorded) = &p.layers else {
        return Vec::new();
    };
    let served: Vec<(Option<&str>, Option<u64>)> = manifest["layers"]
        .as_array()
        .map(|layers| {
            layers
                .iter()
                .map(|l| (l["digest"].as_str(), l["size"].as_u64()))
                .collect()
        })
        .unwrap_or_default();
    let same = served.len() == recorded.len()
        && served
            .iter()
            .zip(recorded)
            .all(|((d, s), r)| *d == Some(r.digest.as_str()) && *s == Some(r.size));
    if same {
        return Vec::new();
    }
    vec![problem(
        format!("platforms[{i}].layers"),
        format!(
            "records {} layer(s), but the registry's manifest {} lists {} with other digests or              sizes",
            recorded.len(),
            p.digest,
            served.len()
        ),
    )]
}

/// The config a platform manifest names, fetched and hashed: it must be the image of the
/// platform the receipt records and the index lists it under (an index that swaps two
/// platforms' manifests gives each entry the other's config), with one diff id a layer. Its
/// diff ids are bound to the receipt by `config_digest` (= the smoke-tested `image_id`), which
/// the bytes were just hashed to.
fn config_problems(
    i: usize,
    p: &template_formats::model::receipt::PlatformRecord,
    manifest: &serde_json::Value,
    e: &RegistryEvidence,
    where_: &str,
) -> Vec<Problem> {
    let field = |f: &str| format!("platforms[{i}].{f}");
    let bytes = match e.configs.get(&p.config_digest) {
        None | Some(None) => {
            return vec![problem(
                field("config_digest"),
                format!(
                    "{where_} has no config blob {} ({})",
                    p.config_digest, p.platform
                ),
            )]
        }
        Some(Some(bytes)) => bytes,
    };
    let actual = digest_of(bytes);
    if actual != p.config_digest {
        return vec![problem(
            field("config_digest"),
            format!(
                "{where_} served bytes with digest {actual} for the config {} ({})",
                p.config_digest, p.platform
            ),
        )];
    }
    let config = match template_formats::strict_json::parse(bytes) {
        Ok(config) => config,
        Err(err) => {
            return vec![problem(
                field("config_digest"),
                format!(
                    "the registry's config {} is not JSON: {err}",
                    p.config_digest
                ),
            )]
        }
    };
    let mut out = Vec::new();
    let said = |key: &str| config[key].as_str().map(str::to_string);
    let (os, architecture, variant) = (said("os"), said("architecture"), said("variant"));
    let image_platform = format!(
        "{}/{}{}",
        os.as_deref().unwrap_or("(no os)"),
        architecture.as_deref().unwrap_or("(no architecture)"),
        variant
            .as_deref()
            .map(|v| format!("/{v}"))
            .unwrap_or_default()
    );
    let recorded = format!(
        "{}/{}{}",
        p.os,
        p.architecture,
        p.variant
            .as_deref()
            .map(|v| format!("/{v}"))
            .unwrap_or_default()
    );
    for (name, theirs, ours) in [
        ("os", os.as_deref(), Some(p.os.as_str())),
        (
            "architecture",
            architecture.as_deref(),
            Some(p.architecture.as_str()),
        ),
        ("variant", variant.as_deref(), p.variant.as_deref()),
    ] {
        if theirs != ours {
            out.push(problem(
                field(name),
                format!(
                    "the receipt (and the index entry) say {recorded}, but the config {} of \
                     manifest {} in {where_} is an image for {image_platform}: the index lists \
                     another platform's image under {}",
                    p.config_digest, p.digest, p.platform
                ),
            ));
        }
    }
    let layers = manifest["layers"].as_array().map(Vec::len);
    let diff_ids = config["rootfs"]["diff_ids"].as_array().map(Vec::len);
    if layers.is_none() || layers != diff_ids {
        out.push(problem(
            field("digest"),
            format!(
                "the registry's manifest {} has {} layer(s), its config {} lists {} diff id(s)",
                p.digest,
                layers.map_or("no".to_string(), |n| n.to_string()),
                p.config_digest,
                diff_ids.map_or("no".to_string(), |n| n.to_string())
            ),
        ));
    }
    out
}

/// The index's own entries, exactly the receipt's platforms.
fn index_content_problems(r: &Receipt, bytes: &[u8]) -> Vec<Problem> {
    let mut out = Vec::new();
    let index = match template_formats::strict_json::parse(bytes) {
        Ok(index) => index,
        Err(e) => {
            return vec![problem(
                "index.digest",
                format!("the registry's index is not JSON: {e}"),
            )]
        }
    };
    if index["mediaType"].as_str() != Some(r.index.media_type.as_str()) {
        out.push(problem(
            "index.media_type",
            format!(
                "`{}`, but the registry's index says {}",
                r.index.media_type, index["mediaType"]
            ),
        ));
    }
    let entries = index["manifests"].as_array().cloned().unwrap_or_default();
    if entries.len() != r.platforms.len() {
        out.push(problem(
            "platforms",
            format!(
                "the receipt records {} platform(s), the registry's index lists {}",
                r.platforms.len(),
                entries.len()
            ),
        ));
    }
    for (i, p) in r.platforms.iter().enumerate() {
        let entry = entries.iter().find(|m| {
            m["platform"]["os"].as_str() == Some(p.os.as_str())
                && m["platform"]["architecture"].as_str() == Some(p.architecture.as_str())
                && m["platform"]["variant"].as_str() == p.variant.as_deref()
        });
        let Some(entry) = entry else {
            out.push(problem(
                format!("platforms[{i}].platform"),
                format!("the registry's index has no {} entry", p.platform),
            ));
            continue;
        };
        if entry["digest"].as_str() != Some(p.digest.as_str()) {
            out.push(problem(
                format!("platforms[{i}].digest"),
                format!(
                    "is {}, the registry's index lists {} for {}",
                    p.digest, entry["digest"], p.platform
                ),
            ));
        }
        if entry["mediaType"].as_str() != Some(p.media_type.as_str()) {
            out.push(problem(
                format!("platforms[{i}].media_type"),
                format!(
                    "is `{}`, the registry's index lists {}",
                    p.media_type, entry["mediaType"]
                ),
            ));
        }
        if entry["size"].as_u64() != Some(p.manifest_size) {
            out.push(problem(
                format!("platforms[{i}].manifest_size"),
                format!(
                    "is {}, the registry's index lists {}",
                    p.manifest_size, entry["size"]
                ),
            ));
        }
    }
    out
}

/// Fetches the index, each platform manifest and the tag from the registry the receipt's
/// `index.repository` names (https, or http for a loopback host). Credentials: the docker
/// config's entry for that host, and the environment's only when `env_host` (named by the
/// user, never by the receipt) is that host. Call only for a receipt whose repository,
/// digests and tag passed the offline checks.
pub async fn fetch(
    r: &Receipt,
    env_host: &EnvCredentialsHost,
    env: &Environment,
) -> Result<RegistryEvidence> {
    let name = parse_repository_name(&r.index.repository)
        .map_err(|e| anyhow::anyhow!("index.repository: {e}"))?;
    let target = RegistryTarget::parse(&name.domain, &name.path)?;
    let credentials = credentials_for(&target.host, env_host, &env.registry).await?;
    // Say why a registry that wants credentials gets none from the environment.
    let withheld = credentials_from_env(|name| env.registry.variable(name))
        .ok()
        .flatten()
        .filter(|_| !env_host.allows(&target.host))
        .map(|c| {
            format!(
                " ({} are set but not sent: they are bound to {}, and the receipt names {}; \
                 if you trust {} with them, pass --credentials-registry {} or set \
                 XTASK_OCI_REGISTRY)",
                c.source,
                env_host.0.as_deref().unwrap_or("no registry"),
                target.host,
                target.host,
                target.host
            )
        })
        .unwrap_or_default();
    let withheld = withheld.as_str();
    let client = RegistryClient::new(target, credentials, &env.transfer)?;
    let get = |reference: String| {
        let client = &client;
        async move {
            client
                .get_manifest_bounded(&reference, MAX_MANIFEST_BYTES)
                .await
                .with_context(|| {
                    let separator = if reference.starts_with("sha256:") {
                        '@'
                    } else {
                        ':'
                    };
                    format!(
                        "index.repository: cannot read {}{separator}{reference} from the registry \
                         the receipt names, so the receipt cannot be checked against it{withheld}",
                        r.index.repository
                    )
                })
        }
    };
    let mut evidence = RegistryEvidence {
        index: get(r.index.digest.clone()).await?,
        tag: get(r.release_tag.clone()).await?,
        manifests: BTreeMap::new(),
        configs: BTreeMap::new(),
    };
    for p in &r.platforms {
        let bytes = get(p.digest.clone()).await?;
        // The config is read only when the manifest is the receipt's (its bytes hash to the
        // digest and name the recorded config): a lying registry gets no further request.
        let names_config = bytes.as_deref().is_some_and(|b| {
            digest_of(b) == p.digest
                && template_formats::strict_json::parse(b)
                    .is_ok_and(|m| m["config"]["digest"].as_str() == Some(p.config_digest.as_str()))
        });
        if names_config && !evidence.configs.contains_key(&p.config_digest) {
            let config = client
                .get_blob_bounded(&p.config_digest, MAX_CONFIG_BYTES)
                .await
                .with_context(|| {
                    format!(
                        "platforms: cannot read the config {} of {} from {}",
                        p.config_digest, p.platform, r.index.repository
                    )
                })?;
            evidence.configs.insert(p.config_digest.clone(), config);
        }
        evidence.manifests.insert(p.digest.clone(), bytes);
    }
    Ok(evidence)
}

/// [`fetch`] then [`registry_problems`], for the sync commands: on a thread and runtime of
/// its own, so it works whether or not the caller is inside the binary's async runtime.
pub fn check(
    r: &Receipt,
    env_host: &EnvCredentialsHost,
    env: &Environment,
) -> Result<Vec<Problem>> {
    let evidence = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .context("cannot start the async runtime for the registry check")?
                    .block_on(async {
                        tokio::time::timeout(REGISTRY_CHECK_LIMIT, fetch(r, env_host, env))
                            .await
                            .map_err(|_| {
                                anyhow::anyhow!(
                                    "index.repository: the registry {} did not answer within \
                                     {REGISTRY_CHECK_LIMIT:?}",
                                    r.index.repository
                                )
                            })?
                    })
            })
            .join()
            .map_err(|_| anyhow::anyhow!("the registry check panicked"))?
    })?;
    Ok(registry_problems(r, &evidence))
}

/// Parses an index's JSON entries into (digest, platform) pairs, for tests and messages.
#[cfg(test)]
fn entries(bytes: &[u8]) -> Vec<(String, String)> {
    let v: serde_json::Value = serde_json::from_slice(bytes).unwrap();
    v["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["digest"].as_str().unwrap().to_string(),
                m["platform"]["architecture"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receipt::tests_support::sample;
    use template_formats::model::publish::IndexEntry;
    use template_formats::oci::index::index_bytes_of;

    /// What a registry that holds exactly the sample release would answer.
    fn honest(r: &Receipt) -> RegistryEvidence {
        let entries: Vec<IndexEntry> = r.platforms.iter().map(IndexEntry::from).collect();
        let index = index_bytes_of(&entries).unwrap();
        RegistryEvidence {
            index: Some(index.clone()),
            tag: Some(index),
            manifests: r
                .platforms
                .iter()
                .map(|p| (p.digest.clone(), None))
                .collect(),
            configs: BTreeMap::new(),
        }
    }

    /// A hostile registry cannot make the check read without bound, with or without a
    /// Content-Length.
    #[tokio::test]
    async fn oversized_manifests_are_refused_while_streaming() {
        use axum::body::Body;
        use axum::http::Uri;
        let app = axum::Router::new().fallback(|uri: Uri| async move {
            let chunk = bytes::Bytes::from(vec![b' '; 1 << 20]);
            if uri.path().ends_with("/sized") {
                Body::from(vec![b' '; MAX_MANIFEST_BYTES + 1])
            } else if uri.path().ends_with("/small") {
                Body::from("{}")
            } else {
                // Chunked, no length: 64 MiB unless the reader stops early.
                Body::from_stream(futures_util::stream::iter(
                    (0..64).map(move |_| Ok::<_, std::io::Error>(chunk.clone())),
                ))
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let target = RegistryTarget::parse(&addr.to_string(), "s0/ca").unwrap();
        let client = RegistryClient::new(target, None, &Default::default()).unwrap();
        for reference in ["sized", "endless"] {
            let err = client
                .get_manifest_bounded(reference, MAX_MANIFEST_BYTES)
                .await
                .unwrap_err();
            assert!(
                format!("{err:#}").contains("larger than"),
                "{reference}: {err:#}"
            );
        }
        let small = client
            .get_manifest_bounded("small", MAX_MANIFEST_BYTES)
            .await;
        assert_eq!(small.unwrap(), Some(b"{}".to_vec()));
    }

    #[test]
    fn a_registry_that_disagrees_is_named_field_by_field() {
        let r = sample();
        let e = honest(&r);
        assert_eq!(entries(e.index.as_ref().unwrap()).len(), 2);
        let fields = |e: &RegistryEvidence| -> Vec<String> {
            registry_problems(&r, e)
                .into_iter()
                .map(|p| p.field)
                .collect()
        };
        // The sample's platform manifests are not real bytes: each is missing.
        assert_eq!(
            fields(&e),
            vec!["platforms[0].digest", "platforms[1].digest"]
        );

        let mut missing_index = e.clone();
        missing_index.index = None;
        assert!(fields(&missing_index).contains(&"index.digest".to_string()));

        let mut other_bytes = e.clone();
        other_bytes.index = Some(b"{}".to_vec());
        assert!(fields(&other_bytes).contains(&"index.digest".to_string()));

        let mut moved_tag = e.clone();
        moved_tag.tag = Some(b"{\"other\": true}".to_vec());
        assert!(fields(&moved_tag).contains(&"release_tag".to_string()));
        let mut no_tag = e.clone();
        no_tag.tag = None;
        assert!(fields(&no_tag).contains(&"release_tag".to_string()));

        let mut r2 = r.clone();
        let mut e2 = publish_real_bytes(&mut r2);
        e2.manifests.remove(&r2.platforms[1].digest);
        let got: Vec<String> = registry_problems(&r2, &e2)
            .into_iter()
            .map(|p| p.field)
            .collect();
        assert!(!got.contains(&"platforms[0].digest".to_string()), "{got:?}");
        assert!(
            !got.contains(&"platforms[0].config_digest".to_string()),
            "{got:?}"
        );
        r2.platforms[0].config_digest = digest_of(b"another config");
        let got: Vec<String> = registry_problems(&r2, &e2)
            .into_iter()
            .map(|p| p.field)
            .collect();
        assert!(
            got.contains(&"platforms[0].config_digest".to_string()),
            "{got:?}"
        );
    }

    /// An image config for `architecture` with one layer.
    fn config(architecture: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "architecture": architecture, "os": "linux",
            "rootfs": {"type": "layers", "diff_ids": [digest_of(architecture.as_bytes())]},
        }))
        .unwrap()
    }

    fn manifest(config: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": template_formats::oci::index::OCI_MANIFEST,
            "config": {"digest": config},
            "layers": [{"digest": digest_of(b"layer")}],
        }))
        .unwrap()
    }

    /// Gives each platform of `r` a real manifest and config and returns what an honest
    /// registry holding them answers (the index digest recomputed).
    fn publish_real_bytes(r: &mut Receipt) -> RegistryEvidence {
        let mut blobs = Vec::new();
        for p in &mut r.platforms {
            let config = config(&p.architecture);
            p.config_digest = digest_of(&config);
            p.image_id = p.config_digest.clone();
            let bytes = manifest(&p.config_digest);
            p.digest = digest_of(&bytes);
            p.manifest_size = bytes.len() as u64;
            blobs.push((p.digest.clone(), bytes, p.config_digest.clone(), config));
        }
        let entries: Vec<IndexEntry> = r.platforms.iter().map(IndexEntry::from).collect();
        let index = index_bytes_of(&entries).unwrap();
        r.index.digest = digest_of(&index);
        r.index.size = index.len() as u64;
        let mut e = honest(r);
        for (digest, bytes, config_digest, config) in blobs {
            e.manifests.insert(digest, Some(bytes));
            e.configs.insert(config_digest, Some(config));
        }
        e
    }

    /// Fuzz target: what a registry answers for a release, each document in turn (the index
    /// by digest and by tag, a platform manifest, its config) replaced by the input, the
    /// others as an honest registry holding the release answers them.
    #[test]
    fn fuzz_registry_answers() {
        let mut r = sample();
        let honest = publish_real_bytes(&mut r);
        let platform = r.platforms[0].clone();
        let mut seeds = vec![honest.index.clone().unwrap()];
        seeds.extend(honest.manifests.values().flatten().cloned());
        seeds.extend(honest.configs.values().flatten().cloned());
        let outcome =
            crate::fuzz::campaign("registry answers", &seeds, crate::fuzz::inputs(), |bytes| {
                let answer = Some(bytes.to_vec());
                let mut e = honest.clone();
                e.index = answer.clone();
                e.tag = answer.clone();
                let _ = registry_problems(&r, &e);
                let mut e = honest.clone();
                e.manifests.insert(platform.digest.clone(), answer.clone());
                let _ = registry_problems(&r, &e);
                let mut e = honest.clone();
                e.configs.insert(platform.config_digest.clone(), answer);
                let _ = registry_problems(&r, &e);
            });
        crate::fuzz::assert_clean(&outcome);
    }

    /// An index whose entries swap the two platforms' manifests, with a receipt that agrees
    /// with it: only the configs say which image is which.
    #[test]
    fn configs_are_read_and_a_swapped_index_is_refused() {
        let mut r = sample();
        let e = publish_real_bytes(&mut r);
        assert_eq!(registry_problems(&r, &e), vec![]);

        let mut swapped = r.clone();
        let (a, b) = (swapped.platforms[0].clone(), swapped.platforms[1].clone());
        for (to, from) in [(0, &b), (1, &a)] {
            let p = &mut swapped.platforms[to];
            p.digest = from.digest.clone();
            p.manifest_size = from.manifest_size;
            p.config_digest = from.config_digest.clone();
            p.image_id = from.image_id.clone();
        }
        let entries: Vec<IndexEntry> = swapped.platforms.iter().map(IndexEntry::from).collect();
        let index = index_bytes_of(&entries).unwrap();
        swapped.index.digest = digest_of(&index);
        swapped.index.size = index.len() as u64;
        let mut e2 = e.clone();
        e2.index = Some(index.clone());
        e2.tag = Some(index);
        let fields: Vec<String> = registry_problems(&swapped, &e2)
            .into_iter()
            .map(|p| p.field)
            .collect();
        assert_eq!(
            fields,
            vec!["platforms[0].architecture", "platforms[1].architecture"]
        );

        // A config the registry does not have, or whose bytes are not its digest.
        let mut missing = e.clone();
        missing.configs.clear();
        assert!(registry_problems(&r, &missing)
            .iter()
            .any(|p| p.field == "platforms[0].config_digest"));
        let mut lying = e.clone();
        lying
            .configs
            .insert(r.platforms[1].config_digest.clone(), Some(config("s390x")));
        assert!(registry_problems(&r, &lying)
            .iter()
            .any(|p| p.field == "platforms[1].config_digest"));

        // A variant the config does not have.
        let mut variant = r.clone();
        variant.platforms[1].variant = Some("v8".into());
        assert!(registry_problems(&variant, &e)
            .iter()
            .any(|p| p.field == "platforms[1].variant"));
    }
}
