//! `cargo xtask pin`: the consumer's step. Points the Sandbox0 template definition
//! (`template/sandbox0-template.yaml`) at a release by digest, `repo@sha256:<index digest>`,
//! and only from a receipt that verifies and is complete.
//!
//! The file is edited, not re-serialised: exactly one `image:` line changes, so comments,
//! key order and quoting survive. The result is then parsed with yaml_serde and must equal
//! the original document with nothing but the image replaced. On any failure the file is
//! left byte-for-byte as it was and the exit status is non-zero.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use serde::Serialize;
use yaml_serde::Value;

use crate::fs::atomic_write;
use crate::receipt::policy::ReceiptPolicy;
use crate::receipt::verify::verify_file;
use crate::settings::Environment;
use crate::terminal_text::{escape, print_json_escaped};
use template_formats::oci::reference::{parse_pinned_reference, parse_reference};

/// The key whose value is the image reference.
pub const IMAGE_KEY: &str = "image";

/// Replaces the value of the single `image:` key in `text` by `new_image`, keeping the line's
/// indentation, quoting and trailing comment and every other byte. Returns (old value, text).
pub fn rewrite_image_line(text: &str, new_image: &str) -> Result<(String, String)> {
    let prefix = format!("{IMAGE_KEY}:");
    let mut hits = Vec::new();
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with(&prefix) {
            hits.push(i);
        }
    }
    let line_no = match hits.as_slice() {
        [one] => *one,
        [] => bail!("no `{prefix}` line to pin"),
        many => bail!(
            "`{prefix}` appears on {} lines ({}); expected exactly one",
            many.len(),
            many.iter()
                .map(|i| (i + 1).to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };

    let mut out = String::with_capacity(text.len() + new_image.len());
    let mut old_value = String::new();
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if i != line_no {
            out.push_str(line);
            continue;
        }
        let (body, ending) = match line.strip_suffix("\r\n") {
            Some(body) => (body, "\r\n"),
            None => match line.strip_suffix('\n') {
                Some(body) => (body, "\n"),
                None => (line, ""),
            },
        };
        let indent_len = body.len() - body.trim_start().len();
        let after_key = &body[indent_len + prefix.len()..];
        let spaces_len = after_key.len() - after_key.trim_start().len();
        let value_and_rest = &after_key[spaces_len..];
        let (quote, value_len) = match value_and_rest.chars().next() {
            Some(q @ ('"' | '\'')) => {
                let close = value_and_rest[1..]
                    .find(q)
                    .with_context(|| format!("line {}: unterminated quote", line_no + 1))?;
                (Some(q), close + 2)
            }
            _ => (
                None,
                value_and_rest
                    .find(char::is_whitespace)
                    .unwrap_or(value_and_rest.len()),
            ),
        };
        let raw_value = &value_and_rest[..value_len];
        let rest = &value_and_rest[value_len..];
        old_value = match quote {
            Some(_) => raw_value[1..raw_value.len() - 1].to_string(),
            None => raw_value.to_string(),
        };
        if old_value.is_empty() || old_value.starts_with('#') {
            bail!("line {}: `{prefix}` has no value on its line", line_no + 1);
        }
        out.push_str(&body[..indent_len + prefix.len() + spaces_len]);
        match quote {
            Some(q) => {
                out.push(q);
                out.push_str(new_image);
                out.push(q);
            }
            None => out.push_str(new_image),
        }
        out.push_str(rest);
        out.push_str(ending);
    }
    Ok((old_value, out))
}

/// Every value of an `image` key in the document, with its path.
fn image_values(value: &Value, path: &str, out: &mut Vec<(String, Value)>) {
    match value {
        Value::Mapping(map) => {
            for (k, v) in map {
                let key = k.as_str().unwrap_or("?");
                let here = format!("{path}.{key}");
                if key == IMAGE_KEY {
                    out.push((here.clone(), v.clone()));
                }
                image_values(v, &here, out);
            }
        }
        Value::Sequence(items) => {
            for (i, v) in items.iter().enumerate() {
                image_values(v, &format!("{path}[{i}]"), out);
            }
        }
        Value::Tagged(t) => image_values(&t.value, path, out),
        _ => {}
    }
}

fn set_image(value: &mut Value, new_image: &str) {
    match value {
        Value::Mapping(map) => {
            for (k, v) in map.iter_mut() {
                if k.as_str() == Some(IMAGE_KEY) {
                    *v = Value::String(new_image.to_string());
                } else {
                    set_image(v, new_image);
                }
            }
        }
        Value::Sequence(items) => items.iter_mut().for_each(|v| set_image(v, new_image)),
        Value::Tagged(t) => set_image(&mut t.value, new_image),
        _ => {}
    }
}

/// The whole edit, pure: the new text, checked to parse and to differ from the old one only
/// in the image. Returns (old image, new text).
pub fn pin_text(text: &str, new_image: &str, origin: &Path) -> Result<(String, String)> {
    let before: Value = yaml_serde::from_str(text)
        .with_context(|| format!("{} is not valid YAML", origin.display()))?;
    let mut images = Vec::new();
    image_values(&before, "", &mut images);
    if images.len() != 1 {
        bail!(
            "{}: expected exactly one `{IMAGE_KEY}` key, found {}",
            origin.display(),
            images.len()
        );
    }
    let (old, new_text) =
        rewrite_image_line(text, new_image).with_context(|| origin.display().to_string())?;
    let after: Value = yaml_serde::from_str(&new_text).with_context(|| {
        format!(
            "{}: the edited file no longer parses; nothing was written",
            origin.display()
        )
    })?;
    let mut expected = before.clone();
    set_image(&mut expected, new_image);
    if after != expected {
        bail!(
            "{}: editing the `{IMAGE_KEY}:` line changed more than the image (is it a multi-line \
             value?); nothing was written",
            origin.display()
        );
    }
    let mut pinned = Vec::new();
    image_values(&after, "", &mut pinned);
    match pinned.as_slice() {
        [(_, Value::String(v))] if v == new_image => {}
        _ => bail!(
            "{}: `{IMAGE_KEY}` does not read back as {new_image}",
            origin.display()
        ),
    }
    Ok((old, new_text))
}

/// What a pin did (or, with `dry_run`, would do).
#[derive(Debug, Serialize)]
pub struct PinReport {
    pub template: String,
    pub receipt: String,
    pub old: String,
    pub new: String,
    pub changed: bool,
    pub dry_run: bool,
}

/// A pin either happened (or would have) or the receipt was rejected: both leave a report for
/// the caller to print; only errors of another kind (unreadable files) are `Err`.
pub enum PinOutcome {
    Pinned(PinReport),
    /// The receipt did not verify (offline or against its registry); the template is as it was.
    Rejected(Vec<crate::receipt::Problem>),
}

/// The trust anchor of a pin: the registry and repository the template's `image:` already
/// names. A receipt for another place is refused unless `allow_change`, with an error naming
/// both. `current` is the template's image value, `new` the receipt's pinned reference.
pub fn anchor_check(current: &str, new: &str, allow_change: bool, template: &Path) -> Result<()> {
    let new = parse_pinned_reference(new)
        .map_err(|e| anyhow::anyhow!("the receipt's index.reference `{new}` {e}"))?;
    if allow_change {
        return Ok(());
    }
    let current = parse_reference(current).map_err(|e| {
        anyhow::anyhow!(
            "{}: the current image `{current}` is not an image reference ({e}), so there is no \
             repository to hold the receipt to; pass --allow-repository-change to pin {} anyway",
            template.display(),
            new.name
        )
    })?;
    if current.name != new.name {
        let what = if current.name.domain != new.name.domain {
            "registry"
        } else {
            "repository"
        };
        bail!(
            "the receipt's index.repository `{}` is not `{}`, the {what} that {} names now; a \
             receipt cannot move the template to another {what}. If the move is intended, run \
             pin again with --allow-repository-change",
            new.name,
            current.name,
            template.display()
        );
    }
    Ok(())
}

/// What to pin, as the library takes it: from `pin`'s command line (`cli.rs` converts) or from
/// `consume`, which chose the receipt. The manifest a receipt is judged by is not here: it is
/// the [`ReceiptPolicy`] the caller made at its edge.
#[derive(Debug, Clone)]
pub struct PinRequest {
    /// The receipt, verified before anything is written.
    pub receipt: PathBuf,
    /// The release's assets, checked against the receipt.
    pub artifacts: Option<PathBuf>,
    /// The template definition to rewrite.
    pub template: PathBuf,
    /// Skip the registry check (after it passed elsewhere on the same receipt).
    pub offline: bool,
    /// Allow a receipt in another repository than the template's current one.
    pub allow_repository_change: bool,
    /// Refuse a receipt whose npm inputs are not `verified` (docs/inputs.md).
    pub require_verified_inputs: bool,
    /// Write nothing.
    pub dry_run: bool,
}

/// `pin` as a command: the request and how to print its report.
#[derive(Debug, Clone)]
pub struct PinCommand {
    pub request: PinRequest,
    /// Print the report as JSON.
    pub json: bool,
}

/// Prints a rejection and leaves the template as it is.
fn reject(args: &PinRequest, problems: &[crate::receipt::Problem]) -> ExitCode {
    eprintln!(
        "{}: rejected; {} left unchanged",
        escape(&args.receipt.display().to_string()),
        escape(&args.template.display().to_string())
    );
    crate::receipt::verify::print_problems(problems);
    ExitCode::FAILURE
}

/// The pin itself. The order matters: every offline check first, then the anchor (so no
/// registry the template does not already name is ever contacted), then the registry, then
/// the write.
/// `env` is the environment's snapshot (credentials for the registry check).
pub fn pin(args: &PinRequest, policy: &ReceiptPolicy, env: &Environment) -> Result<PinOutcome> {
    let mut verification = verify_file(&args.receipt, args.artifacts.as_deref(), policy)?;
    if !verification.valid {
        return Ok(PinOutcome::Rejected(verification.problems));
    }
    let receipt = verification
        .receipt
        .clone()
        .context("a valid verification carries its receipt")?;
    if args.require_verified_inputs {
        if let Some(refusal) = crate::receipt::inputs::unverified_refusal(&receipt) {
            return Ok(PinOutcome::Rejected(vec![refusal]));
        }
    }
    let new_image = receipt.index.reference.clone();

    let text = String::from_utf8(template_formats::bounded_read::read_regular(
        &args.template,
        1 << 20,
        "template definition",
    )?)
    .with_context(|| format!("{} is not UTF-8", args.template.display()))?;
    let (old, new_text) = pin_text(&text, &new_image, &args.template)?;
    anchor_check(
        &old,
        &new_image,
        args.allow_repository_change,
        &args.template,
    )?;
    if !args.offline {
        // The environment's credentials are for the registry the template already names (the
        // anchor), not for one the receipt brings, even when the move is allowed.
        let env_host = crate::oci::credentials::EnvCredentialsHost(
            parse_reference(&old).ok().map(|r| r.name.domain),
        );
        crate::receipt::verify::add_registry_check(&mut verification, &env_host, env)?;
        if !verification.valid {
            return Ok(PinOutcome::Rejected(verification.problems));
        }
    }
    let changed = new_text != text;
    if changed && !args.dry_run {
        atomic_write(&args.template, new_text.as_bytes())?;
    }
    Ok(PinOutcome::Pinned(PinReport {
        template: args.template.display().to_string(),
        receipt: args.receipt.display().to_string(),
        old,
        new: new_image,
        changed,
        dry_run: args.dry_run,
    }))
}

/// `cargo xtask pin` (and `template-verify pin`); `policy` from the command line's edge.
pub fn run(command: PinCommand, policy: &ReceiptPolicy, env: &Environment) -> Result<ExitCode> {
    let PinCommand { request, json } = command;
    let report = match pin(&request, policy, env)? {
        PinOutcome::Pinned(report) => report,
        PinOutcome::Rejected(problems) => return Ok(reject(&request, &problems)),
    };
    if json {
        print_json_escaped(&report)?;
    } else if !report.changed {
        println!(
            "{} already pins {}",
            escape(&report.template),
            escape(&report.new)
        );
    } else {
        println!(
            "{}{}: image {} -> {}",
            if request.dry_run { "would pin " } else { "" },
            escape(&report.template),
            escape(&report.old),
            escape(&report.new)
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receipt::tests_support::repo_root;
    use template_formats::manifest::Manifest;
    use template_formats::paths::MANIFEST;

    const NEW: &str = "ghcr.io/s0/coding-agent@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn pins_stay_in_the_repository_the_template_names() {
        let t = Path::new("t.yaml");
        let here = "ghcr.io/s0/coding-agent:unpinned";
        assert!(anchor_check(here, NEW, false, t).is_ok());
        let pinned_before = format!("ghcr.io/s0/coding-agent@sha256:{}", "1".repeat(64));
        assert!(anchor_check(&pinned_before, NEW, false, t).is_ok());
        for (current, names) in [
            ("ghcr.io/other/coding-agent:unpinned", "repository"),
            ("registry.example:5000/s0/coding-agent:x", "registry"),
            ("ghcr.io/s0/coding-agent-2", "repository"),
        ] {
            let msg = format!("{:#}", anchor_check(current, NEW, false, t).unwrap_err());
            assert!(
                msg.contains(names)
                    && msg.contains("ghcr.io/s0/coding-agent`")
                    && msg.contains("--allow-repository-change"),
                "{msg}"
            );
            assert!(anchor_check(current, NEW, true, t).is_ok());
        }
        assert!(anchor_check("not a reference", NEW, false, t).is_err());
        assert!(anchor_check("not a reference", NEW, true, t).is_ok());
        // The receipt's own reference is held to the grammar even when moving is allowed.
        assert!(anchor_check(here, "ghcr.io/s0/coding-agent:v1@sha256:x", true, t).is_err());
    }

    #[test]
    fn only_the_image_line_changes() {
        let text = "# head\nname: x   # keep\nspec:\n  image: old:tag   # pinned by xtask\n  env:\n    HOME: /workspace\n";
        let (old, new) = pin_text(text, NEW, Path::new("t.yaml")).unwrap();
        assert_eq!(old, "old:tag");
        assert_eq!(
            new,
            format!("# head\nname: x   # keep\nspec:\n  image: {NEW}   # pinned by xtask\n  env:\n    HOME: /workspace\n")
        );
    }

    #[test]
    fn quoting_and_crlf_survive() {
        let text = "image: \"old:tag\"\r\nname: x\r\n";
        let (_, new) = pin_text(text, NEW, Path::new("t.yaml")).unwrap();
        assert_eq!(new, format!("image: \"{NEW}\"\r\nname: x\r\n"));
        let text = "image: 'old'";
        let (_, new) = pin_text(text, NEW, Path::new("t.yaml")).unwrap();
        assert_eq!(new, format!("image: '{NEW}'"));
    }

    #[test]
    fn ambiguous_or_odd_files_are_refused() {
        let two = "a:\n  image: x\nb:\n  image: y\n";
        assert!(pin_text(two, NEW, Path::new("t.yaml")).is_err());
        let none = "name: x\n";
        assert!(pin_text(none, NEW, Path::new("t.yaml")).is_err());
        let block = "image: >\n  folded\n";
        assert!(pin_text(block, NEW, Path::new("t.yaml")).is_err());
        let broken = "image: [unclosed\n";
        assert!(pin_text(broken, NEW, Path::new("t.yaml")).is_err());
    }

    /// The committed template definition mirrors the manifest: the four harness commands,
    /// HOME and the no-update variables, and it is pinnable.
    #[test]
    fn committed_template_mirrors_the_manifest() {
        let root = repo_root();
        let path = root.join("template/sandbox0-template.yaml");
        let text = std::fs::read_to_string(&path).unwrap();
        let doc: Value = yaml_serde::from_str(&text).unwrap();
        let manifest = Manifest::load(&root.join(MANIFEST)).unwrap();
        let harnesses = doc["harnesses"].as_mapping().expect("harnesses map");
        assert_eq!(harnesses.len(), manifest.harnesses.len());
        for h in &manifest.harnesses {
            let command: Vec<String> =
                yaml_serde::from_value(doc["harnesses"][h.name.as_str()]["command"].clone())
                    .unwrap_or_else(|e| panic!("harness {}: {e}", h.name));
            assert_eq!(command, h.command, "harness {}", h.name);
        }
        for (key, value) in [
            ("HOME", "/workspace"),
            ("DISABLE_AUTOUPDATER", "1"),
            ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
            ("PI_SKIP_VERSION_CHECK", "1"),
            ("PI_TELEMETRY", "0"),
        ] {
            assert_eq!(doc["env"][key].as_str(), Some(value), "env.{key}");
        }
        assert_eq!(doc["resources"]["cpu"].as_str(), Some("1"));
        assert_eq!(doc["resources"]["memory"].as_str(), Some("4Gi"));
        assert_eq!(doc["resources"]["ephemeralStorage"].as_str(), Some("16Gi"));
        assert_eq!(doc["workingDir"].as_str(), Some("/workspace"));
        assert_eq!(
            doc["seccompProfile"].as_str(),
            Some(manifest.runtime.seccomp.profile.as_str())
        );
        assert!(doc["mounts"]
            .as_sequence()
            .unwrap()
            .iter()
            .any(|m| m["path"].as_str() == Some("/workspace")));
        pin_text(&text, NEW, &path).expect("the committed template is pinnable");
    }
}
