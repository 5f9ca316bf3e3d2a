//! The notes as Markdown (GitHub's release body, a pull request's summary, a job summary),
//! leading with what changed: the first lines name each package that moved, what was held back
//! and why, each platform's size and what a host holding the previous release pulls, a
//! session that moved and the protocol changes; the tables follow. Pure: the same notes give
//! the same text.

use template_formats::model::notes::*;
use template_formats::model::resolution::InputStatus;

/// The whole notes. Every control or invisible character a receipt's text may carry is
/// written as `\u{XXXX}` (`terminal_text`), so the text is as safe on a terminal as in a
/// GitHub body.
pub fn render(n: &ReleaseNotes) -> String {
    let text = unescaped(n);
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c != '\n' && crate::terminal_text::needs_escape(c) {
            out.push_str(&format!("\\u{{{:04X}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

fn unescaped(n: &ReleaseNotes) -> String {
    let mut out = format!("# Coding agent template {}\n\n", n.release_tag);
    out.push_str(&headline(n));
    out.push('\n');
    out.push_str(&packages_section(n));
    out.push_str(&images_section(n));
    out.push_str(&harnesses_section(n));
    out.push_str(&inputs_section(n));
    out.push_str(&dependencies_section(n));
    if !n.unavailable.is_empty() {
        out.push_str("\n## Not shown\n\n");
        for u in &n.unavailable {
            out.push_str(&format!("- {}\n", text(u)));
        }
    }
    out.push_str(&format!(
        "\nPin `{}` (created {}{}).\n",
        n.reference,
        n.created_at,
        if n.complete {
            ""
        } else {
            "; INCOMPLETE: consumers refuse it"
        }
    ));
    out
}

/// The first lines: what changed, what was held back, sizes and pulls, risks.
pub fn headline(n: &ReleaseNotes) -> String {
    let mut out = String::new();
    match &n.previous {
        Some(p) => out.push_str(&format!(
            "Changes since {} ({}):\n\n",
            p.release_tag, p.created_at
        )),
        None => out.push_str("No previous release to compare with: every package is new.\n\n"),
    }
    let moved: Vec<&PackageNote> = n
        .packages
        .iter()
        .filter(|p| p.change != Change::Unchanged)
        .collect();
    if moved.is_empty() {
        out.push_str("- No package changed.\n");
    }
    for p in moved {
        let versions = match (&p.previous, p.change) {
            (Some(before), Change::Rollback) => {
                format!(
                    "{before} → {} (ROLLBACK: upstream moved `latest` back)",
                    p.version
                )
            }
            (Some(before), _) => format!("{before} → {}", p.version),
            (None, _) => format!("{} (new)", p.version),
        };
        let link = p
            .release_notes
            .as_ref()
            .map(|u| format!(" ([release notes]({u}))"))
            .unwrap_or_default();
        out.push_str(&format!("- `{}` {versions}{link}\n", p.name));
    }
    for p in n.packages.iter().filter(|p| p.held_back) {
        let why = if p.not_taken_because.is_empty() {
            "the receipt does not say why".to_string()
        } else {
            p.not_taken_because.join("; ")
        };
        out.push_str(&format!(
            "- Held back: `{}` {}, not latest {}: {}\n",
            p.name,
            p.version,
            p.latest,
            text(&why)
        ));
    }
    for p in &n.platforms {
        out.push_str(&format!("- {}\n", platform_line(p, n.previous.as_ref())));
    }
    for h in &n.harnesses {
        if let Some(risk) = &h.resume_risk {
            out.push_str(&format!("- RESUME RISK: {}\n", text(risk)));
        }
    }
    let drifted: Vec<String> = n
        .harnesses
        .iter()
        .filter_map(|h| {
            let count = distinct_changes(h);
            (count > 0).then(|| format!("`{}` {count} change(s)", h.name))
        })
        .collect();
    let compared = n.harnesses.iter().any(|h| !h.drift.is_empty());
    if !drifted.is_empty() {
        out.push_str(&format!(
            "- Protocol drift (listed below, not failed): {}\n",
            drifted.join(", ")
        ));
    } else if compared {
        out.push_str("- Protocol: every harness's transcript is the previous release's.\n");
    }
    if let Some(i) = &n.inputs {
        out.push_str(&format!("- Inputs: {}\n", inputs_line(i)));
    }
    out
}

fn platform_line(p: &PlatformNote, previous: Option<&PreviousRelease>) -> String {
    let mut line = format!(
        "{}: {}{}, {} compressed{}",
        p.platform,
        bytes(p.image_size),
        delta(p.image_size, p.previous_image_size),
        bytes(p.compressed_size),
        delta(p.compressed_size, p.previous_compressed_size)
    );
    match (&p.pull_bytes, &p.new_layers, previous) {
        (Some(pull), Some(new), Some(prev)) => line.push_str(&format!(
            "; a host holding {} pulls {} ({} of {} layers new)",
            prev.release_tag,
            bytes(*pull),
            new.len(),
            p.layers.unwrap_or_default()
        )),
        (Some(pull), Some(_), None) => {
            line.push_str(&format!("; a first pull is {}", bytes(*pull)))
        }
        _ => line.push_str("; the bytes to pull are not known (a receipt without its layers)"),
    }
    line
}

fn inputs_line(i: &InputsNote) -> String {
    let status = match i.status {
        InputStatus::Verified => format!(
            "every package's registry signature verified ({})",
            i.keys.as_deref().unwrap_or("keys not named")
        ),
        InputStatus::Unverified => {
            format!("UNVERIFIED: {} served no registry signatures", i.registry)
        }
    };
    match i.previous_status {
        Some(before) if before != i.status => format!(
            "{status} (the previous release's were {})",
            match before {
                InputStatus::Verified => "verified",
                InputStatus::Unverified => "unverified",
            }
        ),
        _ => status,
    }
}

fn packages_section(n: &ReleaseNotes) -> String {
    let mut out = String::from(
        "\n## Packages\n\n| package | version | before | latest at release | release notes |\n\
         | --- | --- | --- | --- | --- |\n",
    );
    for p in &n.packages {
        out.push_str(&format!(
            "| `{}` | {} | {} | {}{} | {} |\n",
            p.name,
            p.version,
            p.previous.as_deref().unwrap_or("–"),
            p.latest,
            if p.held_back { " (held back)" } else { "" },
            p.release_notes
                .as_ref()
                .map(|u| format!("[{}]({u})", cell(u.trim_start_matches("https://"))))
                .unwrap_or_else(|| "–".into())
        ));
    }
    let passed_over: Vec<String> = n
        .packages
        .iter()
        .flat_map(|p| {
            p.rejected.iter().map(move |r| {
                format!(
                    "- `{}` {}: {}\n",
                    p.name,
                    r.version,
                    text(&r.reasons.join("; "))
                )
            })
        })
        .collect();
    if !passed_over.is_empty() {
        out.push_str("\nNewer versions passed over:\n\n");
        out.push_str(&passed_over.concat());
    }
    let notes: Vec<String> = n
        .packages
        .iter()
        .flat_map(|p| {
            p.notes
                .iter()
                .map(move |note| format!("- `{}`: {}\n", p.name, text(note)))
        })
        .collect();
    if !notes.is_empty() {
        out.push_str("\nResolution notes:\n\n");
        out.push_str(&notes.concat());
    }
    out
}

fn images_section(n: &ReleaseNotes) -> String {
    let before = n.previous.as_ref().map_or("–".to_string(), |p| {
        format!("pull from {}", p.release_tag)
    });
    let mut out = format!(
        "\n## Images\n\n| platform | size | change | compressed | change | layers | new layers | {before} |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- |\n"
    );
    for p in &n.platforms {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            p.platform,
            bytes(p.image_size),
            delta(p.image_size, p.previous_image_size)
                .trim_start_matches(" (")
                .trim_end_matches(')'),
            bytes(p.compressed_size),
            delta(p.compressed_size, p.previous_compressed_size)
                .trim_start_matches(" (")
                .trim_end_matches(')'),
            p.layers.map_or("–".into(), |l| l.to_string()),
            p.new_layers.as_ref().map_or("–".into(), |l| {
                l.iter()
                    .map(|l| format!("`{}` {}", short(&l.digest), bytes(l.size)))
                    .collect::<Vec<_>>()
                    .join(", ")
            }),
            p.pull_bytes.map_or("–".into(), bytes)
        ));
    }
    out
}

fn harnesses_section(n: &ReleaseNotes) -> String {
    if n.harnesses.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "\n## Harnesses\n\nSmoke timings (handshake; turn, kill and resume against the fake \
         model):\n\n| harness | CLI | platform | handshake | turn and resume | before |\n\
         | --- | --- | --- | --- | --- | --- |\n",
    );
    for h in &n.harnesses {
        let cli = match (&h.package, &h.version, &h.previous_version) {
            (Some(p), Some(v), Some(b)) if v != b => format!("`{p}` {b} → {v}"),
            (Some(p), Some(v), _) => format!("`{p}` {v}"),
            _ => "–".into(),
        };
        for t in &h.timings {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                h.name,
                cli,
                t.platform,
                secs(t.handshake_secs),
                secs(t.turn_secs),
                secs(t.previous_turn_secs)
            ));
        }
    }
    for h in &n.harnesses {
        out.push_str(&format!("\n### {}\n\n", h.name));
        if let Some(risk) = &h.resume_risk {
            out.push_str(&format!("- RESUME RISK: {}\n", text(risk)));
        }
        out.push_str(&format!(
            "- session kept in: {}\n",
            if h.session.is_empty() {
                "not recorded".to_string()
            } else {
                h.session
                    .iter()
                    .map(|s| format!("`{s}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ));
        if !h.written_added.is_empty() {
            out.push_str(&format!(
                "- writes newly in: {}\n",
                h.written_added
                    .iter()
                    .map(|s| format!("`{s}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if !h.written_removed.is_empty() {
            out.push_str(&format!(
                "- no longer writes in: {}\n",
                h.written_removed
                    .iter()
                    .map(|s| format!("`{s}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        out.push_str(&drift_lines(h));
    }
    out
}

/// The protocol's changes: once when every platform compared has the same, else per platform.
fn drift_lines(h: &HarnessNote) -> String {
    let Some(first) = h.drift.first() else {
        return "- protocol: no transcript of the previous release to compare with\n".into();
    };
    let same = h.drift.iter().all(|d| d.changes == first.changes);
    let platforms: Vec<String> = h.drift.iter().map(|d| d.platform.to_string()).collect();
    let mut out = String::new();
    let groups: Vec<(String, &Vec<template_formats::model::transcript::Drift>)> = if same {
        vec![(platforms.join(", "), &first.changes)]
    } else {
        h.drift
            .iter()
            .map(|d| (d.platform.to_string(), &d.changes))
            .collect()
    };
    for (on, changes) in groups {
        if changes.is_empty() {
            out.push_str(&format!("- protocol on {on}: as in the previous release\n"));
            continue;
        }
        out.push_str(&format!(
            "- protocol on {on}: {} change(s)\n",
            changes.len()
        ));
        for c in changes {
            out.push_str(&format!("  - drift: {}\n", text(&c.to_string())));
        }
    }
    out
}

/// How many different changes a harness's transcripts show, over its platforms.
fn distinct_changes(h: &HarnessNote) -> usize {
    let mut all: Vec<String> = h
        .drift
        .iter()
        .flat_map(|d| d.changes.iter().map(|c| c.to_string()))
        .collect();
    all.sort();
    all.dedup();
    all.len()
}

fn inputs_section(n: &ReleaseNotes) -> String {
    let Some(i) = &n.inputs else {
        return String::new();
    };
    let mut out = format!(
        "\n## Input trust\n\n{}; registry {}.\n\n| package | version | signed by | provenance | \
         publisher | install scripts | changed |\n| --- | --- | --- | --- | --- | --- | --- |\n",
        inputs_line(i),
        i.registry
    );
    for p in &i.packages {
        let or_dash = |s: &Option<String>| s.as_deref().map(cell).unwrap_or_else(|| "–".into());
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} | {} |\n",
            p.name,
            p.version,
            or_dash(&p.signed_by),
            or_dash(&p.provenance),
            or_dash(&p.publisher),
            or_dash(&p.install_scripts),
            if p.changes.is_empty() {
                "–".into()
            } else {
                cell(&p.changes.join("; "))
            }
        ));
    }
    out
}

fn dependencies_section(n: &ReleaseNotes) -> String {
    if n.previous.is_none() {
        return String::new();
    }
    if n.dependencies.is_empty() {
        return "\n## Dependencies\n\nNo other package of the lockfile changed.\n".into();
    }
    let count = |f: fn(&VersionChange) -> bool| n.dependencies.iter().filter(|d| f(d)).count();
    let mut out = format!(
        "\n## Dependencies\n\n{} changed, {} added, {} removed.\n\n<details><summary>Every \
         change</summary>\n\n",
        count(|d| d.before.is_some() && d.after.is_some()),
        count(|d| d.before.is_none()),
        count(|d| d.after.is_none())
    );
    for d in &n.dependencies {
        out.push_str(&format!(
            "- `{}` {} → {}\n",
            d.name,
            d.before.as_deref().unwrap_or("(added)"),
            d.after.as_deref().unwrap_or("(removed)")
        ));
    }
    out.push_str("\n</details>\n");
    out
}

/// Bytes in decimal units, as registries and `docker images` report sizes.
pub fn bytes(n: u64) -> String {
    let f = n as f64;
    if n >= 1_000_000_000 {
        format!("{:.2} GB", f / 1e9)
    } else if n >= 1_000_000 {
        format!("{:.1} MB", f / 1e6)
    } else if n >= 1_000 {
        format!("{:.1} kB", f / 1e3)
    } else {
        format!("{n} B")
    }
}

/// ` (+12.3 MB)`, ` (-1.0 kB)`, ` (unchanged)`; empty without a previous size.
fn delta(now: u64, before: Option<u64>) -> String {
    match before {
        None => String::new(),
        Some(b) if b == now => " (unchanged)".into(),
        Some(b) if now > b => format!(" (+{})", bytes(now - b)),
        Some(b) => format!(" (-{})", bytes(b - now)),
    }
}

fn secs(s: Option<f64>) -> String {
    s.map_or("–".into(), |s| format!("{s:.1} s"))
}

/// `sha256:` and the first 12 hex digits.
fn short(digest: &str) -> &str {
    &digest[..digest.len().min("sha256:".len() + 12)]
}

/// Text from a receipt on one Markdown line.
fn text(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

/// Text from a receipt in a table cell.
fn cell(s: &str) -> String {
    text(s).replace('|', "\\|")
}
