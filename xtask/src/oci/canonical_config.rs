//! Canonical image configs: the same image gives the same config bytes, whatever the build's
//! clock, container ids or image store. The config keeps the image's settings and history
//! text; its times become the epoch, the build's container, parent image and engine version go,
//! unset settings are left out (the classic store writes them, the containerd store does not),
//! and the keys are sorted.

use anyhow::{bail, Context, Result};
use serde_json::Value;

use template_formats::model::Digest;

/// The time of every history entry and of the image: the epoch, in RFC 3339.
pub(crate) fn epoch_time(epoch: u64) -> Result<String> {
    let time = chrono::DateTime::from_timestamp(i64::try_from(epoch)?, 0)
        .with_context(|| format!("the epoch {epoch} is out of range"))?;
    Ok(time.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
}

/// The engine's image config in canonical form, over the canonical layers' `diff_ids`.
pub(crate) fn canonical_config(config: &[u8], diff_ids: &[Digest], epoch: u64) -> Result<Vec<u8>> {
    let mut config: Value =
        serde_json::from_slice(config).context("the image config is not JSON")?;
    let object = config
        .as_object_mut()
        .context("the image config is not a JSON object")?;
    let time = Value::String(epoch_time(epoch)?);
    for build_only in ["container", "container_config", "docker_version"] {
        object.remove(build_only);
    }
    object.insert("created".into(), time.clone());
    object.retain(|_, v| !v.is_null());
    if let Some(settings) = object.get_mut("config").and_then(Value::as_object_mut) {
        // The parent image of the last step: an id of the engine's, different every build;
        // the hostname: the build container's.
        settings.remove("Image");
        settings.remove("Hostname");
        // Docker 20.10 and 28's classic store write every setting, unset ones as null, "",
        // false or []; the containerd store writes only the ones that are set. Unset is
        // unset: only set ones stay.
        settings.retain(|_, v| !is_unset(v));
    }
    if let Some(history) = object.get_mut("history").and_then(Value::as_array_mut) {
        for step in history.iter_mut().filter_map(Value::as_object_mut) {
            step.insert("created".into(), time.clone());
            step.retain(|_, v| !is_unset(v));
        }
    }
    let rootfs = object
        .get_mut("rootfs")
        .and_then(Value::as_object_mut)
        .context("the image config has no rootfs")?;
    let count = rootfs
        .get("diff_ids")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    if count != diff_ids.len() {
        bail!(
            "the image config lists {count} layers but the image has {}",
            diff_ids.len()
        );
    }
    rootfs.insert(
        "diff_ids".into(),
        Value::Array(
            diff_ids
                .iter()
                .map(|d| Value::String(d.to_string()))
                .collect(),
        ),
    );
    Ok(canonical_json(config))
}

/// An unset setting as an engine writes one: null, false, "", [] or {}.
fn is_unset(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Number(_) => false,
    }
}

/// `value` as JSON with every object's keys sorted: engines write a config's keys in their
/// own orders (Go struct order differs between moby's classic and containerd image types).
pub(crate) fn canonical_json(mut value: Value) -> Vec<u8> {
    fn sort(value: &mut Value) {
        match value {
            Value::Object(map) => {
                let mut entries: Vec<(String, Value)> = std::mem::take(map).into_iter().collect();
                entries.sort_by(|a, b| a.0.cmp(&b.0));
                for (key, mut v) in entries {
                    sort(&mut v);
                    map.insert(key, v);
                }
            }
            Value::Array(items) => items.iter_mut().for_each(sort),
            _ => {}
        }
    }
    sort(&mut value);
    serde_json::to_vec(&value).expect("JSON values serialize")
}

#[cfg(test)]
mod tests {
    use super::*;

    const EPOCH: u64 = 1_767_225_600;

    fn engine_config(created: &str, container: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "architecture": "amd64",
            "config": {"Hostname": "", "Domainname": "", "User": "", "AttachStdin": false, "Tty": false, "Env": ["A=1"], "Cmd": null, "Image": format!("sha256:{container}"), "Volumes": null, "WorkingDir": "", "Entrypoint": null, "OnBuild": null, "Labels": {"x": "y"}},
            "container": container,
            "container_config": {"Hostname": &container[..12]},
            "created": created,
            "docker_version": "20.10.24",
            "history": [
                {"created": created, "created_by": "/bin/sh -c x"},
                {"created": created, "created_by": "ENV A=1", "empty_layer": true}
            ],
            "os": "linux",
            "rootfs": {"type": "layers", "diff_ids": ["sha256:aa"]}
        }))
        .unwrap()
    }

    #[test]
    fn configs_of_two_builds_agree_and_keep_the_settings() {
        let ids = [Digest::of(b"layer")];
        let a = canonical_config(
            &engine_config("2026-11-30T19:34:11.1Z", &"a".repeat(64)),
            &ids,
            EPOCH,
        )
        .unwrap();
        let b = canonical_config(
            &engine_config("2026-12-03T01:00:00.9Z", &"b".repeat(64)),
            &ids,
            EPOCH,
        )
        .unwrap();
        assert_eq!(a, b);
        let v: Value = serde_json::from_slice(&a).unwrap();
        assert_eq!(v["created"], "2026-01-01T00:00:00Z");
        assert_eq!(v["history"][1]["created"], "2026-01-01T00:00:00Z");
        assert_eq!(v["history"][1]["empty_layer"], true);
        assert_eq!(v["config"]["Env"][0], "A=1");
        assert_eq!(v["config"]["Labels"]["x"], "y");
        assert!(v["config"].get("Image").is_none());
        assert!(v.get("container").is_none() && v.get("container_config").is_none());
        assert_eq!(v["rootfs"]["diff_ids"][0], ids[0].to_string());
    }

    /// The system stage's config as Docker 28.5.2's containerd store builds it: only set
    /// settings, its own key order, no build-only fields (docker-engines.md).
    fn containerd_config(created: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "os": "linux",
            "architecture": "amd64",
            "rootfs": {"diff_ids": ["sha256:aa"], "type": "layers"},
            "history": [
                {"created_by": "/bin/sh -c x", "created": created},
                {"created_by": "ENV A=1", "empty_layer": true, "created": created}
            ],
            "created": created,
            "config": {"Labels": {"x": "y"}, "Env": ["A=1"]}
        }))
        .unwrap()
    }

    #[test]
    fn the_containerd_stores_config_and_the_classic_stores_give_one_config() {
        let ids = [Digest::of(b"layer")];
        let classic = canonical_config(
            &engine_config("2026-11-30T19:34:11.1Z", &"a".repeat(64)),
            &ids,
            EPOCH,
        )
        .unwrap();
        let containerd =
            canonical_config(&containerd_config("2026-12-01T20:00:00Z"), &ids, EPOCH).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&classic),
            String::from_utf8_lossy(&containerd)
        );
    }

    #[test]
    fn a_config_for_another_number_of_layers_is_refused() {
        let err = canonical_config(&engine_config("t", &"a".repeat(64)), &[], EPOCH)
            .unwrap_err()
            .to_string();
        assert!(err.contains("lists 1 layers but the image has 0"), "{err}");
    }
}
