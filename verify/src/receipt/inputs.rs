//! The receipt's `inputs` record (docs/inputs.md): how the release's npm inputs were judged,
//! held together with the rest of the receipt, with the release's manifest and with its
//! inventory asset; and what a consumer who requires verified inputs refuses. Pure.
//!
//! A receipt written before the tool recorded its inputs has no `inputs`: it still verifies
//! (the gate and the plan still find that release), except against an inventory asset that
//! records the inputs (the tool that wrote both would have recorded them), and a consumer who
//! requires verified inputs refuses it.

use std::collections::BTreeMap;

use crate::receipt::{problem, Problem};
use template_formats::manifest::Manifest;
use template_formats::model::inventory::Inventory;
use template_formats::model::receipt::{InputStatus, InputsRecord, Receipt};

/// The record against the receipt's own fields and the manifest's allowances: the same
/// registry as `resolver`, the same packages and versions as `packages`, keys and signatures
/// exactly when verified, install scripts exactly for the packages the manifest allows to run
/// them. (The content of those scripts is judged against the release's own manifest, in
/// [`acknowledged_problems`]: a checkout's manifest may acknowledge newer content since.)
pub fn record_problems(r: &Receipt, manifest: &Manifest) -> Vec<Problem> {
    let Some(inputs) = &r.inputs else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if inputs.registry != r.resolver.registry {
        out.push(problem(
            "inputs.registry",
            format!(
                "`{}` is not resolver.registry `{}`",
                inputs.registry, r.resolver.registry
            ),
        ));
    }
    let verified = inputs.status == InputStatus::Verified;
    if verified != inputs.keys.is_some() {
        out.push(problem(
            "inputs.keys",
            if verified {
                "is null, but the inputs are `verified`: verified with which keys?".to_owned()
            } else {
                "names keys, but the inputs are `unverified`".to_owned()
            },
        ));
    }
    let recorded: Vec<(&str, &str)> = inputs
        .packages
        .iter()
        .map(|p| (p.name.as_str(), p.version.as_str()))
        .collect();
    let released: Vec<(&str, &str)> = r
        .packages
        .iter()
        .map(|p| (p.name.as_str(), p.version.as_str()))
        .collect();
    if recorded != released {
        out.push(problem(
            "inputs.packages",
            format!(
                "lists {recorded:?}; the receipt's packages are {released:?}, each once and in order"
            ),
        ));
    }
    for (i, p) in inputs.packages.iter().enumerate() {
        if verified != p.signed_by.is_some() {
            out.push(problem(
                format!("inputs.packages[{i}].signed_by"),
                format!(
                    "`{}`: {}",
                    p.name,
                    if verified {
                        "no registry key signed it, but the inputs are `verified`"
                    } else {
                        "names a key, but the inputs are `unverified`"
                    }
                ),
            ));
        }
        let allowed = manifest.install_scripts_allowed.contains_key(&p.name);
        if allowed != p.install_scripts.is_some() {
            out.push(problem(
                format!("inputs.packages[{i}].install_scripts"),
                if allowed {
                    format!(
                        "is null, but the manifest allows `{}` to run install scripts: what it \
                         ran is not recorded",
                        p.name
                    )
                } else {
                    format!(
                        "records install scripts of `{}`, which the manifest does not allow to \
                         run any",
                        p.name
                    )
                },
            ));
        }
    }
    out
}

/// The install scripts the receipt records against the content the release's own manifest
/// acknowledges (`install_scripts_allowed`): they must be the same.
pub fn acknowledged_problems(r: &Receipt, manifest: &Manifest) -> Vec<Problem> {
    let Some(inputs) = &r.inputs else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, p) in inputs.packages.iter().enumerate() {
        let (Some(ran), Some(acknowledged)) = (
            &p.install_scripts,
            manifest.install_scripts_allowed.get(&p.name),
        ) else {
            continue;
        };
        if ran != acknowledged {
            out.push(problem(
                format!("inputs.packages[{i}].install_scripts"),
                format!(
                    "`{}` {}: the recorded install scripts are not the content the release's \
                     manifest acknowledges",
                    p.name, p.version
                ),
            ));
        }
    }
    out
}

/// The record against the release's inventory asset, which it is copied from: the status,
/// registry and keys, and each package's key and install scripts as its top-level row has them.
/// A receipt without a record, next to an inventory that records its inputs, is refused.
pub fn inventory_problems(r: &Receipt, inventory: &Inventory) -> Vec<Problem> {
    let Some(inputs) = &r.inputs else {
        return vec![problem(
            "inputs",
            format!(
                "is missing, but the release's inventory.json records its inputs as `{}`: the \
                 receipt does not vouch for how its inputs were judged; ask for a receipt that \
                 records them",
                status_name(inventory.inputs)
            ),
        )];
    };
    let mut out = Vec::new();
    if inputs.status != inventory.inputs {
        out.push(problem(
            "inputs.status",
            format!(
                "`{}` is not inventory.json's `{}`",
                status_name(inputs.status),
                status_name(inventory.inputs)
            ),
        ));
    }
    if inputs.registry != inventory.registry {
        out.push(problem(
            "inputs.registry",
            format!(
                "`{}` is not inventory.json's registry {}",
                inputs.registry, inventory.registry
            ),
        ));
    }
    if inputs.keys != inventory.keys {
        out.push(problem(
            "inputs.keys",
            format!(
                "{:?} is not inventory.json's keys {:?}",
                inputs.keys, inventory.keys
            ),
        ));
    }
    let rows: BTreeMap<&str, _> = inventory
        .packages
        .iter()
        .filter(|p| p.top_level)
        .map(|p| (p.name.as_str(), p))
        .collect();
    for (i, p) in inputs.packages.iter().enumerate() {
        let Some(row) = rows.get(p.name.as_str()) else {
            out.push(problem(
                format!("inputs.packages[{i}]"),
                format!("inventory.json has no top-level package `{}`", p.name),
            ));
            continue;
        };
        if row.version != p.version {
            out.push(problem(
                format!("inputs.packages[{i}].version"),
                format!(
                    "`{}` {} is not inventory.json's {}",
                    p.name, p.version, row.version
                ),
            ));
        }
        if row.signed_by != p.signed_by {
            out.push(problem(
                format!("inputs.packages[{i}].signed_by"),
                format!(
                    "`{}`: {:?} is not the key inventory.json records, {:?}",
                    p.name, p.signed_by, row.signed_by
                ),
            ));
        }
        if row.install_scripts != p.install_scripts {
            out.push(problem(
                format!("inputs.packages[{i}].install_scripts"),
                format!(
                    "`{}`: differ from the install scripts inventory.json records",
                    p.name
                ),
            ));
        }
    }
    out
}

/// Why a consumer who requires verified inputs (`pin`/`consume --require-verified-inputs`)
/// refuses this receipt, naming the release and the registry; `None` when its inputs are
/// verified.
pub fn unverified_refusal(r: &Receipt) -> Option<Problem> {
    match &r.inputs {
        Some(InputsRecord {
            status: InputStatus::Verified,
            ..
        }) => None,
        Some(inputs) => Some(problem(
            "inputs.status",
            format!(
                "release {}: its npm inputs are `unverified` (the registry {} served no \
                 registry signatures), and --require-verified-inputs refuses that",
                r.release_tag, inputs.registry
            ),
        )),
        None => Some(problem(
            "inputs",
            format!(
                "release {}: the receipt records no input trust (a release made before the tool \
                 recorded it; its npm registry was {}), and --require-verified-inputs refuses \
                 that",
                r.release_tag, r.resolver.registry
            ),
        )),
    }
}

fn status_name(status: InputStatus) -> &'static str {
    match status {
        InputStatus::Verified => "verified",
        InputStatus::Unverified => "unverified",
    }
}

#[cfg(test)]
mod tests;
