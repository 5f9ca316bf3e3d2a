//! The consumer's verifier of coding-agent template releases: a receipt judged offline and
//! against its registry (`receipt`), the template definition pinned to a verified release
//! (`pin`), and a release taken from GitHub with its attestations (`consume`). The
//! `template-verify` binary (`main.rs`) is this crate's command line; the maintainer's xtask
//! uses the same library for `cargo xtask receipt verify` and `cargo xtask pin`, and its
//! registry client (`oci`) for `publish`.
//!
//! What a receipt is judged by is passed in ([`receipt::policy::ReceiptPolicy`]): the
//! release's own manifest for a consumer, never a file of the machine that built this binary.

pub mod attestation;
pub mod cli;
pub mod consume;
pub mod fs;
pub mod http;
pub mod notes;
pub mod oci;
pub mod pin;
pub mod receipt;
pub mod settings;
pub mod sigstore;
pub mod status;
pub mod terminal_text;
pub mod verifier;

#[cfg(test)]
mod fuzz;

/// Runs one command on a multi-threaded runtime and turns its result into the exit status,
/// for both binaries (`xtask`, `template-verify`). Errors can quote a receipt or a registry's
/// or GitHub's answer, so they are printed escaped, line by line.
pub fn run_command(
    command: impl std::future::Future<Output = anyhow::Result<std::process::ExitCode>>,
) -> std::process::ExitCode {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("cannot start the async runtime");
    match runtime.block_on(command) {
        Ok(code) => code,
        Err(err) => {
            let text = format!("{err:#}");
            let lines: Vec<String> = text.lines().map(terminal_text::escape).collect();
            eprintln!("error: {}", lines.join("\n"));
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    /// What a verifier has no use for: a Docker client, an HTTP server, layer compression and
    /// tar, a text diff, the license-text classifier (the `spdx` crate's `detection`).
    const NOT_IN_THE_VERIFIER: [&str; 9] = [
        "bollard ",
        "axum ",
        "tar ",
        "flate2 ",
        "zlib-rs ",
        "libdeflate-sys ",
        "similar ",
        "spdx feature \"detection\"",
        "spdx feature \"text\"",
    ];

    /// The lines of `cargo tree` (`name vX` and `name feature "f"`) that name what the
    /// verifier must not build.
    fn forbidden(tree: &str) -> Vec<&str> {
        let mut found: Vec<&str> = tree
            .lines()
            .filter(|line| NOT_IN_THE_VERIFIER.iter().any(|bad| line.starts_with(bad)))
            .collect();
        found.sort();
        found.dedup();
        found
    }

    #[test]
    fn the_verifier_depends_on_no_engine_server_or_compressor() {
        // Cargo's own answer for this package's normal dependencies and their features, as
        // `cargo build -p template-verify` (scripts/build-verifiers.sh) resolves them.
        let out = std::process::Command::new(env!("CARGO"))
            .args(["tree", "-p", "template-verify", "-e", "normal,features"])
            .args(["--prefix", "none", "--locked"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("cargo runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let tree = String::from_utf8(out.stdout).unwrap();
        assert!(
            tree.contains("reqwest v"),
            "the tree is the verifier's: {tree}"
        );
        assert_eq!(forbidden(&tree), Vec::<&str>::new());
    }

    #[test]
    fn a_tree_with_a_compressor_or_the_classifier_is_refused() {
        let tree = "reqwest v0.13.5\nflate2 v1.1.11\nspdx v0.13.6\nspdx feature \"detection\"\n";
        assert_eq!(
            forbidden(tree),
            ["flate2 v1.1.11", "spdx feature \"detection\""]
        );
        assert!(forbidden("reqwest v0.13.5\nspdx feature \"default\"\n").is_empty());
    }
}

/// The crate's two edges, kept by a test: the command line's types (`cli.rs`) are converted
/// into each domain module's own request type in `cli.rs`, so no domain module knows clap;
/// and the process environment is read once, by a binary's `main`, into
/// `settings::Environment`, so every decision below it is a function of what it is passed.
#[cfg(test)]
mod edge_rules {
    use std::path::{Path, PathBuf};

    /// Where the environment may be read: the snapshot and the binary that takes it.
    const ENVIRONMENT_READERS: [&str; 2] = ["main.rs", "settings.rs"];
    /// Where the command line's types may be named: the edge module and the binary.
    const COMMAND_LINE_USERS: [&str; 2] = ["cli.rs", "main.rs"];
    /// Ways to read the process environment at run time.
    const ENVIRONMENT_READS: [&str; 5] = [
        "std::env::var",
        "env::var(",
        "env::var_os",
        "env::vars",
        "vars_os",
    ];
    /// Ways for a module of this crate to name the command line's types.
    const COMMAND_LINE_PATHS: [&str; 3] = ["use crate::cli", "crate::cli::", "super::cli"];
    /// The one compile-time variable production code may embed: the version, for the user
    /// agent. Anything else (`CARGO_MANIFEST_DIR`) ties the binary to the machine that built it.
    const COMPILE_TIME_VARIABLE: &str = "env!(\"CARGO_PKG_VERSION\")";

    /// The lines of `text` that are production code, with their numbers: comments and
    /// test-only modules (`#[cfg(test)]`, or the `test-support` feature's, at column 0 and
    /// followed by a `mod` line, up to the next `}` at column 0, as rustfmt lays them out)
    /// are left out.
    fn production_lines(text: &str) -> Vec<(usize, &str)> {
        let lines: Vec<&str> = text.lines().collect();
        let mut out = Vec::new();
        let mut i = 0;
        while i < lines.len() {
            let line = lines[i];
            let test_only = line == "#[cfg(test)]"
                || line.starts_with("#[cfg(any(test, feature = \"test-support\"))]");
            let next_is_mod = lines
                .get(i + 1)
                .is_some_and(|next| next.starts_with("mod ") || next.starts_with("pub mod "));
            if test_only && next_is_mod && !lines[i + 1].trim_end().ends_with(';') {
                while i < lines.len() && lines[i] != "}" {
                    i += 1;
                }
                i += 1;
                continue;
            }
            if !line.trim_start().starts_with("//") {
                out.push((i + 1, line));
            }
            i += 1;
        }
        out
    }

    /// What `file` (its path below `src/`, `/`-separated) breaks of the two rules, one line
    /// per finding: `file:line: what, and what to do instead`.
    fn violations(file: &str, text: &str) -> Vec<String> {
        let name = file.rsplit('/').next().unwrap_or(file);
        let mut found = Vec::new();
        for (number, line) in production_lines(text) {
            if !ENVIRONMENT_READERS.contains(&name) {
                // One finding a line: the first of the forms it matches.
                if let Some(read) = ENVIRONMENT_READS.iter().find(|r| line.contains(*r)) {
                    found.push(format!(
                        "{file}:{number}: reads the environment (`{read}`); add the variable to \
                         settings::Environment and pass it in"
                    ));
                }
                let mut rest = line;
                while let Some(at) = rest.find("env!(") {
                    if !rest[at..].starts_with(COMPILE_TIME_VARIABLE) {
                        found.push(format!(
                            "{file}:{number}: embeds a build-time variable (`{}`); only \
                             {COMPILE_TIME_VARIABLE} may be compiled in",
                            rest[at..].split(')').next().unwrap_or("env!(")
                        ));
                    }
                    rest = &rest[at + "env!(".len()..];
                }
            }
            if !COMMAND_LINE_USERS.contains(&name) {
                if let Some(path) = COMMAND_LINE_PATHS.iter().find(|p| line.contains(*p)) {
                    found.push(format!(
                        "{file}:{number}: names the command line (`{path}`); take the module's \
                         own request type and convert to it in cli.rs"
                    ));
                }
            }
        }
        found
    }

    /// The files of modules declared test-only (`#[cfg(test)]` over `mod name;`), as paths
    /// below `src/` and folder prefixes: `name.rs` and `name/` beside a `lib.rs`, `main.rs` or
    /// `mod.rs`, under `stem/` beside any other file. Given (path below `src/`, text).
    fn test_only_files(files: &[(String, String)]) -> Vec<String> {
        let mut out = Vec::new();
        for (file, text) in files {
            let (dir, name) = file.rsplit_once('/').unwrap_or(("", file));
            let stem = name.trim_end_matches(".rs");
            let base = match (dir, stem) {
                (_, "lib" | "main" | "mod") => dir.to_string(),
                ("", _) => stem.to_string(),
                _ => format!("{dir}/{stem}"),
            };
            let lines: Vec<&str> = text.lines().collect();
            for pair in lines.windows(2) {
                let declared = pair[1]
                    .trim_start_matches("pub(crate) ")
                    .trim_start_matches("pub ")
                    .strip_prefix("mod ")
                    .and_then(|rest| rest.strip_suffix(';'));
                if let (true, Some(module)) = (pair[0] == "#[cfg(test)]", declared) {
                    let join = |tail: &str| {
                        if base.is_empty() {
                            tail.to_string()
                        } else {
                            format!("{base}/{tail}")
                        }
                    };
                    out.push(join(&format!("{module}.rs")));
                    out.push(join(&format!("{module}/")));
                }
            }
        }
        out
    }

    #[test]
    fn a_file_declared_test_only_is_not_production_code() {
        let files = [
            (
                "lib.rs".to_string(),
                "#[cfg(test)]\nmod fuzz;\npub mod pin;\n".to_string(),
            ),
            (
                "receipt/verify.rs".to_string(),
                "#[cfg(test)]\nmod fixtures_tests;\n#[cfg(test)]\nmod tests {\n}\n".to_string(),
            ),
        ];
        assert_eq!(
            test_only_files(&files),
            [
                "fuzz.rs",
                "fuzz/",
                "receipt/verify/fixtures_tests.rs",
                "receipt/verify/fixtures_tests/"
            ]
        );
    }

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    #[test]
    fn only_the_edges_read_the_environment_or_know_the_command_line() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        files.sort();
        assert!(files.len() > 10, "the walk found the sources: {files:?}");
        let texts: Vec<(String, String)> = files
            .iter()
            .map(|path| {
                let file = path
                    .strip_prefix(&src)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                (file, std::fs::read_to_string(path).unwrap())
            })
            .collect();
        let test_only = test_only_files(&texts);
        let mut found = Vec::new();
        for (file, text) in &texts {
            if test_only
                .iter()
                .any(|t| file == t || (t.ends_with('/') && file.starts_with(t)))
            {
                continue;
            }
            found.extend(violations(file, text));
        }
        assert!(found.is_empty(), "{}", found.join("\n"));
    }

    #[test]
    fn the_rules_see_production_code_and_skip_tests_and_comments() {
        let text = "use crate::cli::PinArgs;\n\
                    // std::env::var in a comment\n\
                    fn f() { let _ = std::env::var_os(\"HOME\"); }\n\
                    const A: &str = env!(\"CARGO_PKG_VERSION\");\n\
                    const B: &str = env!(\"CARGO_MANIFEST_DIR\");\n\
                    #[cfg(test)]\n\
                    mod tests {\n\
                    \x20   use crate::cli::PinArgs;\n\
                    \x20   fn g() { std::env::var(\"X\").ok(); }\n\
                    }\n\
                    fn h() { std::env::vars_os(); }\n";
        let found = violations("pin.rs", text);
        let lines: Vec<&str> = found
            .iter()
            .map(|f| f.split(": ").next().unwrap())
            .collect();
        assert_eq!(
            lines,
            ["pin.rs:1", "pin.rs:3", "pin.rs:5", "pin.rs:11"],
            "{found:#?}"
        );
        assert!(found[1].contains("settings::Environment"), "{found:#?}");
        assert!(found[0].contains("cli.rs"), "{found:#?}");
        assert!(
            violations("main.rs", text).is_empty(),
            "main.rs may do both"
        );
        assert_eq!(
            violations("settings.rs", text).len(),
            1,
            "settings.rs reads, knows no cli"
        );
    }
}
