//! `with:` inputs as the actions read them.

use std::collections::BTreeMap;

use anyhow::{bail, Result};

pub(super) fn truthy_input(
    with: &BTreeMap<String, String>,
    key: &str,
    default: bool,
) -> Result<bool> {
    match with.get(key).map(String::as_str) {
        None | Some("") => Ok(default),
        Some("true") => Ok(true),
        Some("false") => Ok(false),
        Some(other) => bail!("input `{key}` must be true or false, got {other:?}"),
    }
}
