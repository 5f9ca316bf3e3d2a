//! The Dockerfile as the assembler reads it: the final stage's steps (`COPY --from`, `ARG`,
//! `LABEL`, nothing else, each refusal naming its line), the stages' starts, the build
//! arguments substituted, and the image each named stage ended with in the classic builder's
//! output. Pure: text in, steps out.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{bail, Context, Result};

use template_formats::paths::DOCKERFILE;

/// The Dockerfile's final stage, as the assembler reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FinalStage {
    /// The stage it starts from (`FROM system`): the engine builds up to this one.
    pub system: String,
    pub steps: Vec<FinalStep>,
    /// The build arguments the stages above it declare: the engine's build gets only these
    /// (the rest are the final stage's own, and the engine warns about unused ones).
    pub engine_args: BTreeSet<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FinalStep {
    /// `COPY --from=STAGE /TREE/ /`: one layer, the content of `tree` in `stage` at `/`.
    Copy {
        stage: String,
        tree: String,
        instruction: String,
    },
    /// `LABEL k="v" …`, values with the build arguments substituted.
    Label {
        labels: Vec<(String, String)>,
        instruction: String,
    },
}

/// The Dockerfile's instructions, one per logical line: continuations joined, comments and
/// blank lines dropped (also inside a continuation, as Docker does).
fn instructions(dockerfile: &str) -> Vec<String> {
    numbered_instructions(dockerfile)
        .into_iter()
        .map(|(_, i)| i)
        .collect()
}

/// [`instructions`], each with the number of the line it starts on (from 1).
fn numbered_instructions(dockerfile: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut first_line = 0;
    for (n, line) in dockerfile.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if current.is_empty() {
            first_line = n + 1;
        }
        match trimmed.strip_suffix('\\') {
            Some(part) => {
                current.push_str(part.trim_end());
                current.push(' ');
            }
            None => {
                current.push_str(trimmed);
                out.push((first_line, std::mem::take(&mut current)));
            }
        }
    }
    if !current.trim().is_empty() {
        out.push((first_line, current.trim().to_string()));
    }
    out
}

/// Instructions that only change the image's settings: the classic builder commits them
/// without running a container or making a layer.
const SETTINGS_ONLY: &[&str] = &[
    "ARG",
    "ENV",
    "LABEL",
    "USER",
    "EXPOSE",
    "CMD",
    "ENTRYPOINT",
    "SHELL",
    "STOPSIGNAL",
    "HEALTHCHECK",
    "ONBUILD",
    "VOLUME",
    "MAINTAINER",
];

/// Refuses a stage that starts from an image the engine only loaded (the base, not an earlier
/// stage) and makes its first layer with `COPY` or `ADD`, naming the line. The containerd image
/// store cannot build that on a base of another architecture it never ran (`parent snapshot
/// … does not exist`, docker.io 28.5.2, docker-engines.md): a `RUN` first unpacks the base.
/// Refused on every engine, so a layout that builds here builds on every runner. Pure.
pub(crate) fn check_stage_starts(dockerfile: &str) -> Result<()> {
    let mut stages: BTreeSet<String> = BTreeSet::new();
    let mut loaded_base: Option<String> = None;
    for (line, instruction) in numbered_instructions(dockerfile) {
        let (word, rest) = keyword(&instruction);
        if word == "FROM" {
            let words: Vec<&str> = rest
                .split_whitespace()
                .filter(|w| !w.starts_with("--"))
                .collect();
            let from = words
                .first()
                .map(|w| w.to_ascii_lowercase())
                .unwrap_or_default();
            loaded_base =
                (!stages.contains(&from)).then(|| words.first().unwrap_or(&"").to_string());
            if let [_, as_, name] = words[..] {
                if as_.eq_ignore_ascii_case("as") {
                    stages.insert(name.to_ascii_lowercase());
                }
            }
            continue;
        }
        if SETTINGS_ONLY.contains(&word.as_str()) {
            continue;
        }
        if let Some(base) = loaded_base.take() {
            if word == "COPY" || word == "ADD" {
                bail!(
                    "{DOCKERFILE}:{line}: `{instruction}` is the first step on `{base}`, an \
                     image the engine loaded and never ran; the containerd image store cannot \
                     build that for a base of another architecture (`parent snapshot … does not \
                     exist`): start the stage with a `RUN`"
                );
            }
        }
    }
    Ok(())
}

/// The keyword of an instruction, upper case, and the rest.
fn keyword(instruction: &str) -> (String, &str) {
    let (word, rest) = instruction
        .split_once(char::is_whitespace)
        .unwrap_or((instruction, ""));
    (word.to_ascii_uppercase(), rest.trim())
}

/// Reads the final stage of `dockerfile` with the build arguments `args`. Pure.
pub(crate) fn final_stage(dockerfile: &str, args: &BTreeMap<String, String>) -> Result<FinalStage> {
    let all = instructions(dockerfile);
    let start = all
        .iter()
        .rposition(|i| keyword(i).0 == "FROM")
        .context("the Dockerfile has no FROM")?;
    let stages: BTreeSet<String> = all[..start]
        .iter()
        .filter(|i| keyword(i).0 == "FROM")
        .filter_map(
            |i| match keyword(i).1.split_whitespace().collect::<Vec<_>>()[..] {
                [_, as_, name] if as_.eq_ignore_ascii_case("as") => Some(name.to_ascii_lowercase()),
                _ => None,
            },
        )
        .collect();
    let system = match keyword(&all[start])
        .1
        .split_whitespace()
        .collect::<Vec<_>>()[..]
    {
        [name] if stages.contains(&name.to_ascii_lowercase()) => name.to_ascii_lowercase(),
        _ => bail!(
            "the Dockerfile's final stage starts with `{}`; `cargo xtask build` assembles a \
             final stage that starts from an earlier named stage (`FROM system`)",
            all[start]
        ),
    };
    let engine_args: BTreeSet<String> = all[..start]
        .iter()
        .filter(|i| keyword(i).0 == "ARG")
        .filter_map(|i| keyword(i).1.split(['=', ' ']).next().map(str::to_string))
        .collect();
    let mut declared: BTreeMap<String, String> = BTreeMap::new();
    let mut steps = Vec::new();
    for instruction in &all[start + 1..] {
        let refuse = || {
            anyhow::anyhow!(
                "the Dockerfile's final stage has `{instruction}`; `cargo xtask build` \
                 assembles only `COPY --from=STAGE /DIR/ /`, `ARG NAME` and `LABEL` there: move \
                 other steps into the `{system}` stage"
            )
        };
        let (word, rest) = keyword(instruction);
        match word.as_str() {
            "COPY" => {
                let [from, source, "/"] = rest.split_whitespace().collect::<Vec<_>>()[..] else {
                    return Err(refuse());
                };
                let stage = from.strip_prefix("--from=").ok_or_else(refuse)?;
                let tree = source
                    .strip_suffix('/')
                    .filter(|t| t.starts_with('/') && t.len() > 1 && !t.contains("//"))
                    .ok_or_else(refuse)?;
                if !stages.contains(&stage.to_ascii_lowercase()) {
                    bail!("`{instruction}` copies from `{stage}`, which is not a stage above it");
                }
                steps.push(FinalStep::Copy {
                    stage: stage.to_ascii_lowercase(),
                    tree: tree.to_string(),
                    instruction: instruction.clone(),
                });
            }
            "ARG" => {
                let [name] = rest.split_whitespace().collect::<Vec<_>>()[..] else {
                    return Err(refuse());
                };
                if name.contains('=') {
                    return Err(refuse());
                }
                let value = args.get(name).with_context(|| {
                    format!("the final stage declares `ARG {name}` but the build has no {name}")
                })?;
                declared.insert(name.to_string(), value.clone());
            }
            "LABEL" => {
                let labels = label_pairs(rest)
                    .with_context(|| format!("cannot read `{instruction}`"))?
                    .into_iter()
                    .map(|(k, v)| Ok((k, substitute(&v, &declared)?)))
                    .collect::<Result<Vec<_>>>()
                    .with_context(|| format!("cannot read `{instruction}`"))?;
                steps.push(FinalStep::Label {
                    labels,
                    instruction: instruction.clone(),
                });
            }
            _ => return Err(refuse()),
        }
    }
    Ok(FinalStage {
        system,
        steps,
        engine_args,
    })
}

/// `k1="v 1" k2=v2` -> pairs, quotes removed (`\"` and `\\` inside double quotes).
fn label_pairs(text: &str) -> Result<Vec<(String, String)>> {
    let mut pairs = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return Ok(pairs);
        }
        let key: String =
            std::iter::from_fn(|| chars.next_if(|&c| c != '=' && !c.is_whitespace())).collect();
        if chars.next() != Some('=') || key.is_empty() {
            bail!("a label is not `key=value`");
        }
        let mut value = String::new();
        if chars.next_if_eq(&'"').is_some() {
            loop {
                match chars.next() {
                    Some('"') => break,
                    Some('\\') => value.extend(chars.next()),
                    Some(c) => value.push(c),
                    None => bail!("the label {key} has no closing quote"),
                }
            }
        } else {
            value.extend(std::iter::from_fn(|| chars.next_if(|c| !c.is_whitespace())));
        }
        pairs.push((key, value));
    }
}

/// `${NAME}` and `$NAME` replaced by the declared argument's value; any other is an error.
fn substitute(text: &str, declared: &BTreeMap<String, String>) -> Result<String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (name, tail) = match after.strip_prefix('{') {
            Some(braced) => braced
                .split_once('}')
                .with_context(|| format!("`{text}` has an unclosed ${{"))?,
            None => {
                let end = after
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(after.len());
                (&after[..end], &after[end..])
            }
        };
        let value = declared.get(name).with_context(|| {
            format!("`{text}` names ${name}, which no `ARG` of the final stage declares")
        })?;
        out.push_str(value);
        rest = tail;
    }
    out.push_str(rest);
    Ok(out)
}

/// The image each named stage ended with, from the classic builder's output (`Step n/m : FROM
/// x AS name` starts a stage, each ` ---> <id>` is its image so far). Pure.
pub(crate) fn stage_images(output: &str) -> BTreeMap<String, String> {
    let mut stages = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in output.lines().map(str::trim) {
        if let Some((_, instruction)) = line
            .strip_prefix("Step ")
            .and_then(|rest| rest.split_once(" : "))
        {
            let (word, rest) = keyword(instruction);
            if word == "FROM" {
                current = match rest.split_whitespace().collect::<Vec<_>>()[..] {
                    [_, as_, name] if as_.eq_ignore_ascii_case("as") => {
                        Some(name.to_ascii_lowercase())
                    }
                    _ => None,
                };
            }
        } else if let Some(id) = line.strip_prefix("---> ") {
            if id.len() >= 12 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
                if let Some(stage) = &current {
                    stages.insert(stage.clone(), id.to_string());
                }
            }
        }
    }
    stages
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn a_stage_that_copies_first_onto_a_loaded_base_is_refused_by_its_line() {
        let copy_first = "ARG BASE_IMAGE\n# tools\nFROM ${BASE_IMAGE} AS stage\nARG X\nCOPY a.txt \\\n  /a\nRUN true\n";
        let err = check_stage_starts(copy_first).unwrap_err().to_string();
        assert!(
            err.starts_with("Dockerfile:5: `COPY a.txt /a` is the first step on `${BASE_IMAGE}`"),
            "{err}"
        );
        let add_first = "FROM --platform=linux/arm64 debian AS stage\nADD x /x\n";
        assert!(check_stage_starts(add_first)
            .unwrap_err()
            .to_string()
            .starts_with("Dockerfile:2:"));
        // A RUN first unpacks the base; a stage on an earlier stage starts from a built image.
        check_stage_starts("FROM ${BASE_IMAGE} AS stage\nRUN true\nCOPY a /a\nFROM stage AS next\nCOPY b /b\nFROM next\nCOPY --from=stage /x/ /\n").unwrap();
        check_stage_starts(include_str!("../../../Dockerfile")).unwrap();
    }

    pub(crate) fn args() -> BTreeMap<String, String> {
        BTreeMap::from([
            ("LOCKFILE_SHA256".into(), "abc".into()),
            ("NODE_VERSION".into(), "24.1.0".into()),
        ])
    }

    pub(crate) const DOCKERFILE: &str = "\
ARG BASE_IMAGE
FROM ${BASE_IMAGE} AS tools
RUN echo \\
    # a comment inside a continuation
    done
FROM tools AS one
FROM ${BASE_IMAGE} AS system
ENV HOME=/workspace
# The image.
FROM system
COPY --from=tools /staging/tools/ /
copy --from=One /staging/one/ /

ARG LOCKFILE_SHA256
ARG NODE_VERSION
LABEL org.example.lock=\"${LOCKFILE_SHA256}\" \\
      org.example.title=\"two words\" org.example.node=$NODE_VERSION \\
      org.example.quoted=\"say \\\"hi\\\"\"
";

    #[test]
    fn the_final_stage_is_read_with_its_arguments() {
        let stage = final_stage(DOCKERFILE, &args()).unwrap();
        assert_eq!(stage.system, "system");
        assert_eq!(
            stage.engine_args,
            BTreeSet::from(["BASE_IMAGE".to_string()])
        );
        let copy = |stage: &str, tree: &str, instruction: &str| FinalStep::Copy {
            stage: stage.into(),
            tree: tree.into(),
            instruction: instruction.into(),
        };
        assert_eq!(
            stage.steps[..2],
            [
                copy(
                    "tools",
                    "/staging/tools",
                    "COPY --from=tools /staging/tools/ /"
                ),
                copy("one", "/staging/one", "copy --from=One /staging/one/ /"),
            ]
        );
        let FinalStep::Label { labels, .. } = &stage.steps[2] else {
            panic!("{:?}", stage.steps[2]);
        };
        let pairs: Vec<(&str, &str)> = labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("org.example.lock", "abc"),
                ("org.example.title", "two words"),
                ("org.example.node", "24.1.0"),
                ("org.example.quoted", "say \"hi\""),
            ]
        );
    }

    #[test]
    fn the_committed_dockerfile_assembles() {
        let root = crate::util::repo_root();
        let inputs =
            crate::image::build_inputs::BuildInputs::load(&crate::layout::Layout::at(&root))
                .unwrap();
        let args = crate::image::build_inputs::build_args(
            &inputs,
            template_formats::manifest::Platform::LinuxAmd64,
        )
        .unwrap();
        let stage = final_stage(std::str::from_utf8(&inputs.dockerfile).unwrap(), &args).unwrap();
        assert_eq!(stage.system, "system");
        let copies: Vec<&str> = stage
            .steps
            .iter()
            .filter_map(|s| match s {
                FinalStep::Copy { stage, .. } => Some(stage.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(
            copies,
            [
                "node",
                "claude-code",
                "codex",
                "opencode",
                "rest",
                "install-plan"
            ]
        );
    }

    #[test]
    fn other_steps_in_the_final_stage_are_refused_by_name() {
        for (line, named) in [
            ("RUN rm -rf /tmp", "RUN rm -rf /tmp"),
            ("COPY a.txt /", "COPY a.txt /"),
            ("COPY --from=tools /staging/tools /", "/staging/tools /"),
            ("COPY --from=tools /staging/tools/ /opt/", "/opt/"),
            ("ENV A=1", "ENV A=1"),
            ("ARG X=1", "ARG X=1"),
        ] {
            let text = format!("{DOCKERFILE}{line}\n");
            let err = format!("{:#}", final_stage(&text, &args()).unwrap_err());
            assert!(err.contains(named) && err.contains("system"), "{err}");
        }
        let text = format!("{DOCKERFILE}COPY --from=nowhere /staging/x/ /\n");
        let err = format!("{:#}", final_stage(&text, &args()).unwrap_err());
        assert!(err.contains("nowhere"), "{err}");
        let text = format!("{DOCKERFILE}LABEL x=$UNDECLARED\n");
        let err = format!("{:#}", final_stage(&text, &args()).unwrap_err());
        assert!(err.contains("UNDECLARED"), "{err}");
        let err = format!(
            "{:#}",
            final_stage(DOCKERFILE, &BTreeMap::new()).unwrap_err()
        );
        assert!(err.contains("LOCKFILE_SHA256"), "{err}");
        let err = format!(
            "{:#}",
            final_stage("FROM debian\nCOPY --from=x /a/ /\n", &args()).unwrap_err()
        );
        assert!(err.contains("FROM debian"), "{err}");
    }

    #[test]
    fn stage_images_come_from_the_builders_output() {
        let output = "Step 1/9 : ARG BASE_IMAGE\n\
                      Step 2/9 : FROM base:1 AS tools\n ---> 0123456789ab\n\
                      Step 3/9 : RUN echo\n ---> Running in fedcba987654\n\
                      Removing intermediate container fedcba987654\n ---> 1111111111aa\n\
                      Step 4/9 : FROM tools AS One\n ---> 1111111111aa\n\
                      Step 5/9 : COPY x /\n ---> Using cache\n ---> 2222222222bb\n\
                      Step 6/9 : FROM base:1\n ---> 0123456789ab\n\
                      Successfully built 0123456789ab\n";
        assert_eq!(
            stage_images(output),
            BTreeMap::from([
                ("tools".to_string(), "1111111111aa".to_string()),
                ("one".to_string(), "2222222222bb".to_string()),
            ])
        );
    }
}
