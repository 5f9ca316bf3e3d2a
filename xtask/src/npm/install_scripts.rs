//! Install scripts pinned by content: what a package allowed to run scripts
//! (`install_scripts_allowed` in the manifest) runs when npm installs it, read from the
//! version's tarball, and compared with the content the manifest acknowledges.
//!
//! What npm runs (npm 10.9.9, `node_modules/@npmcli/arborist/lib/arborist/rebuild.js`): the
//! `preinstall`, `install` and `postinstall` commands of the package.json inside the tarball,
//! each through `sh -c` in the package's directory (`@npmcli/run-script`), and `node-gyp
//! rebuild` as the `install` command of a package with a `binding.gyp` and neither `install`
//! nor `preinstall` (unless package.json says `"gypfile": false`; `isNodeGypPackage` is
//! "binding.gyp exists").
//!
//! Each command is recorded whole, so any change of it counts. The files it runs are
//! attributed conservatively ([`targets`]): only a command of plain words joined by `&&`,
//! `||` or `;`, whose program is `node`/`bun` with a script file (or `-e` code), `sh`/`bash`
//! with a script file, a file of the package, `node-gyp` (its `binding.gyp`) or a builtin that
//! runs nothing of the package (`echo`, `true`, `exit`, `:`). A JavaScript file's relative
//! `require`/`import` of another module of the package is followed too ([`relative_modules`]),
//! JSON data is not. Anything else (a variable, a quote with an expansion, a redirection, a
//! program from `node_modules/.bin`) leaves that command without files: its text is still
//! pinned, and the remedy says it needs a review by hand.
//!
//! Tarballs are downloaded with their integrity checked and kept in the tool's cache under
//! that digest (`<cache>/tarballs/<sha512 hex>.tgz`), so a second run reads none again.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256, Sha512};

use template_formats::manifest::Manifest;
use template_formats::model::install_scripts::InstallScripts;
use template_formats::model::inventory::InventoryPackage;
use template_formats::paths::MANIFEST;

/// The most a tarball may hold unpacked: a bound against a decompression bomb.
const MAX_UNPACKED_BYTES: u64 = 512 << 20;

/// A package's regular files from its tarball, by path relative to the package root.
#[derive(Debug, Default, Clone)]
pub(crate) struct PackageFiles {
    files: BTreeMap<String, Vec<u8>>,
}

impl PackageFiles {
    /// Unpacks a gzip'd npm tarball: the first path component (`package/`, whatever its name)
    /// is stripped, as pacote does; only regular files are kept (pacote drops links).
    pub(crate) fn from_tgz(tgz: &[u8]) -> Result<PackageFiles> {
        let decoder = flate2::read::GzDecoder::new(tgz);
        let mut archive = tar::Archive::new(decoder.take(MAX_UNPACKED_BYTES + 1));
        let mut files = BTreeMap::new();
        let mut total = 0u64;
        for entry in archive.entries().context("not a tar archive")? {
            let mut entry = entry.context("a broken tar entry")?;
            if !entry.header().entry_type().is_file() {
                continue;
            }
            let path = entry.path().context("a tar entry without a path")?;
            let path = path.to_string_lossy().replace('\\', "/");
            let Some((_, inner)) = path.split_once('/') else {
                continue;
            };
            let Some(inner) = normalize(inner) else {
                continue;
            };
            total += entry.size();
            if total > MAX_UNPACKED_BYTES {
                bail!("unpacks to more than {} MiB", MAX_UNPACKED_BYTES >> 20);
            }
            let mut bytes = Vec::with_capacity(entry.size() as usize);
            entry
                .read_to_end(&mut bytes)
                .with_context(|| format!("cannot read {inner}"))?;
            files.insert(inner, bytes);
        }
        Ok(PackageFiles { files })
    }

    #[cfg(test)]
    pub(crate) fn from_files(files: &[(&str, &str)]) -> PackageFiles {
        PackageFiles {
            files: files
                .iter()
                .map(|(p, c)| ((*p).to_owned(), c.as_bytes().to_vec()))
                .collect(),
        }
    }

    fn get(&self, path: &str) -> Option<&[u8]> {
        self.files.get(path).map(Vec::as_slice)
    }
}

/// `a/./b/../c` as `a/c`; `None` for a path that leaves the package root or is empty.
fn normalize(path: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// What one command runs of the package.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    /// A file run as a program or script, as named (relative to the package root).
    File { path: String, javascript: bool },
    /// JavaScript given on the command line (`node -e`): the code is in the command's text;
    /// the modules it requires are the package's.
    Inline(String),
    /// `node-gyp`: it reads `binding.gyp` and compiles the sources that names.
    Gyp,
}

/// The package's install scripts: the commands of its package.json (and npm's implied
/// `node-gyp rebuild`), and the sha256 of every file they run that can be attributed.
pub(crate) fn scripts_of(files: &PackageFiles) -> Result<InstallScripts> {
    let package_json = files
        .get("package.json")
        .context("the tarball has no package.json")?;
    let package_json: serde_json::Value =
        serde_json::from_slice(package_json).context("its package.json is not JSON")?;
    let command = |name: &str| -> Option<String> {
        package_json["scripts"][name]
            .as_str()
            .filter(|c| !c.is_empty())
            .map(str::to_owned)
    };
    let mut scripts = InstallScripts {
        preinstall: command("preinstall"),
        install: command("install"),
        postinstall: command("postinstall"),
        files: BTreeMap::new(),
    };
    let gyp = package_json["gypfile"] != serde_json::Value::Bool(false)
        && scripts.install.is_none()
        && scripts.preinstall.is_none()
        && files.get("binding.gyp").is_some();
    if gyp {
        // @npmcli/node-gyp `defaultGypInstallScript`.
        scripts.install = Some("node-gyp rebuild".to_owned());
    }
    let mut run = BTreeSet::new();
    for (_, command) in scripts.commands() {
        for target in targets(command).unwrap_or_default() {
            match target {
                Target::File { path, javascript } => {
                    let found = if javascript {
                        resolve_script(files, &path)
                    } else {
                        normalize(&path).filter(|p| files.get(p).is_some())
                    };
                    if let Some(found) = found {
                        if javascript {
                            run.extend(modules_from(files, &found));
                        }
                        run.insert(found);
                    }
                }
                Target::Inline(code) => {
                    for specifier in relative_modules(&code) {
                        if let Some(found) = resolve_module(files, "", &specifier) {
                            run.extend(modules_from(files, &found));
                            run.insert(found);
                        }
                    }
                }
                Target::Gyp => {
                    if files.get("binding.gyp").is_some() {
                        run.insert("binding.gyp".to_owned());
                    }
                }
            }
        }
    }
    scripts.files = run
        .into_iter()
        .filter_map(|path| {
            let digest = hex::encode(Sha256::digest(files.get(&path)?));
            Some((path, digest))
        })
        .collect();
    Ok(scripts)
}

/// The commands among `scripts` whose files cannot be attributed: their text is pinned, what
/// they run is not.
pub(crate) fn unattributed(scripts: &InstallScripts) -> Vec<String> {
    scripts
        .commands()
        .into_iter()
        .filter(|(_, c)| targets(c).is_none())
        .map(|(name, c)| format!("{name} `{c}`"))
        .collect()
}

/// What `command` runs, when every part of it is attributable; `None` when any is not.
fn targets(command: &str) -> Option<Vec<Target>> {
    let mut out = Vec::new();
    for argv in simple_commands(command)? {
        let (program, args) = argv.split_first()?;
        match program.as_str() {
            "node" | "nodejs" | "bun" => match args.split_first() {
                Some((flag, rest))
                    if ["-e", "--eval", "-p", "--print"].contains(&flag.as_str()) =>
                {
                    out.push(Target::Inline(rest.first()?.clone()))
                }
                Some((script, _)) if !script.starts_with('-') => out.push(Target::File {
                    path: script.clone(),
                    javascript: true,
                }),
                // Another option (`--require`, `--import`, `--loader` ...) may load anything.
                _ => return None,
            },
            "sh" | "bash" => match args.first() {
                Some(script) if !script.starts_with('-') => out.push(Target::File {
                    path: script.clone(),
                    javascript: false,
                }),
                _ => return None,
            },
            "node-gyp" => out.push(Target::Gyp),
            "echo" | "true" | "exit" | ":" => {}
            p if p.starts_with("./") || p.starts_with("../") => out.push(Target::File {
                path: p.to_owned(),
                javascript: false,
            }),
            _ => return None,
        }
    }
    Some(out)
}

/// A command split into simple commands (argv each) at `&&`, `||` and `;`; `None` for anything
/// but plain words and quotes without expansions (`$`, backquotes, backslashes, redirections,
/// pipes, globs, subshells, comments, assignments before the program).
fn simple_commands(command: &str) -> Option<Vec<Vec<String>>> {
    let mut commands = vec![Vec::new()];
    let mut word: Option<String> = None;
    let mut chars = command.chars().peekable();
    let end_word = |word: &mut Option<String>, commands: &mut Vec<Vec<String>>| {
        if let Some(w) = word.take() {
            commands.last_mut().expect("one command at least").push(w);
        }
    };
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => end_word(&mut word, &mut commands),
            '&' | '|' => {
                if chars.next() != Some(c) {
                    return None;
                }
                end_word(&mut word, &mut commands);
                commands.push(Vec::new());
            }
            ';' => {
                end_word(&mut word, &mut commands);
                commands.push(Vec::new());
            }
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next()? {
                        '\'' => break,
                        c => w.push(c),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next()? {
                        '"' => break,
                        '$' | '`' | '\\' => return None,
                        c => w.push(c),
                    }
                }
            }
            c if c.is_ascii_alphanumeric() || "._/@:=+,-%".contains(c) => {
                word.get_or_insert_with(String::new).push(c)
            }
            _ => return None,
        }
    }
    end_word(&mut word, &mut commands);
    // An empty command (`a;`), or an assignment before the program (`NODE_OPTIONS=... node`):
    // the latter can make the program load anything.
    if commands
        .iter()
        .any(|argv| argv.first().is_none_or(|program| program.contains('=')))
    {
        return None;
    }
    Some(commands)
}

/// The file `node <script>` runs from the package root: the name, else with `.js`, `.json`,
/// `.node`, else `<name>/index.js` (Node's CommonJS resolution of the main module).
fn resolve_script(files: &PackageFiles, script: &str) -> Option<String> {
    let base = normalize(script)?;
    [
        base.clone(),
        format!("{base}.js"),
        format!("{base}.json"),
        format!("{base}.node"),
        format!("{base}/index.js"),
    ]
    .into_iter()
    .find(|p| files.get(p).is_some())
}

/// The module a relative specifier names from the directory `from` (`""`: the package
/// root), with Node's extensions; JSON data is left out (it runs nothing, and package.json
/// changes with every version).
fn resolve_module(files: &PackageFiles, from: &str, specifier: &str) -> Option<String> {
    let joined = if from.is_empty() {
        specifier.to_owned()
    } else {
        format!("{from}/{specifier}")
    };
    let base = normalize(&joined)?;
    let found = ["", ".js", ".cjs", ".mjs", ".node", "/index.js"]
        .iter()
        .map(|ext| format!("{base}{ext}"))
        .find(|p| files.get(p).is_some())?;
    (!found.ends_with(".json")).then_some(found)
}

/// Every module of the package `file` loads by a relative specifier, transitively.
fn modules_from(files: &PackageFiles, file: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut queue = vec![file.to_owned()];
    while let Some(current) = queue.pop() {
        if current.ends_with(".node") {
            continue;
        }
        let Some(source) = files.get(&current) else {
            continue;
        };
        let dir = current.rsplit_once('/').map_or("", |(d, _)| d).to_owned();
        for specifier in relative_modules(&String::from_utf8_lossy(source)) {
            if let Some(found) = resolve_module(files, &dir, &specifier) {
                if found != file && seen.insert(found.clone()) {
                    queue.push(found);
                }
            }
        }
    }
    seen
}

/// The relative specifiers (`./x`, `../x`) a JavaScript source names as string literals in
/// `require(...)`, `import(...)`, `import ... from` and `import "..."`. A lexical scan: a
/// specifier computed at run time is not seen (the docs say so).
fn relative_modules(source: &str) -> Vec<String> {
    let mut out = Vec::new();
    let bytes = source.as_bytes();
    for keyword in ["require", "import", "from"] {
        let mut start = 0;
        while let Some(at) = source[start..].find(keyword) {
            let at = start + at;
            start = at + keyword.len();
            let before = at.checked_sub(1).map(|i| bytes[i]);
            if before
                .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b == b'.')
            {
                continue;
            }
            let mut rest = source[start..].trim_start();
            if keyword != "from" {
                if let Some(r) = rest.strip_prefix('(') {
                    rest = r.trim_start();
                } else if keyword == "require" {
                    continue;
                }
            }
            let Some(quote) = rest.chars().next().filter(|c| "'\"`".contains(*c)) else {
                continue;
            };
            let Some(end) = rest[1..].find(quote) else {
                continue;
            };
            let literal = &rest[1..1 + end];
            if (literal.starts_with("./") || literal.starts_with("../")) && !literal.contains("${")
            {
                out.push(literal.to_owned());
            }
        }
    }
    out
}

/// Every way `found` (in `version`) differs from `acknowledged`, one line each, naming the
/// command or file and both values; empty when they are the same.
pub(crate) fn differences(
    acknowledged: &InstallScripts,
    found: &InstallScripts,
    version: &str,
) -> Vec<String> {
    let mut out = Vec::new();
    for name in template_formats::model::install_scripts::LIFECYCLE_SCRIPTS {
        let (a, f) = (acknowledged.command(name), found.command(name));
        if a != f {
            let show = |c: Option<&str>| c.map_or_else(|| "none".to_owned(), |c| format!("`{c}`"));
            out.push(format!(
                "{name} is {} in {version}, {} acknowledged",
                show(f),
                show(a)
            ));
        }
    }
    let paths: BTreeSet<&String> = acknowledged
        .files
        .keys()
        .chain(found.files.keys())
        .collect();
    for path in paths {
        match (acknowledged.files.get(path), found.files.get(path)) {
            (Some(a), Some(f)) if a != f => out.push(format!(
                "{path} has sha256 {f} in {version}, {a} acknowledged"
            )),
            (Some(a), None) => out.push(format!(
                "{path} (sha256 {a} acknowledged) is not run in {version}"
            )),
            (None, Some(f)) => out.push(format!(
                "{path} (sha256 {f}) is run in {version}, not acknowledged"
            )),
            _ => {}
        }
    }
    out
}

/// Why `version` of `name` may not run its install scripts (its content differs from the
/// manifest's acknowledgment), or `Ok` when it is the acknowledged content.
pub(crate) fn judge(
    name: &str,
    version: &str,
    acknowledged: &InstallScripts,
    found: &InstallScripts,
) -> Result<(), String> {
    let differences = differences(acknowledged, found, version);
    if differences.is_empty() {
        return Ok(());
    }
    Err(format!(
        "install scripts differ from what {MANIFEST} acknowledges for {name}: {}",
        differences.join("; ")
    ))
}

/// The manifest lines a maintainer pastes into `install_scripts_allowed`, after reviewing
/// `found`, to let `version` of `name` run its install scripts.
pub(crate) fn remedy(name: &str, version: &str, found: &InstallScripts) -> String {
    let entry = BTreeMap::from([(name.to_owned(), found.clone())]);
    let yaml = yaml_serde::to_string(&entry).expect("install scripts serialise");
    let indented: String = yaml.lines().map(|l| format!("  {l}\n")).collect();
    let mut out = format!(
        "to let {name} {version} run its install scripts, review them (the tarball's \
         package.json and the files below), then replace its entry under \
         `install_scripts_allowed:` in {MANIFEST} with:\n{indented}"
    );
    for command in unattributed(found) {
        out.push_str(&format!(
            "  (the {command} runs nothing this tool can attribute to a file of the package: \
             review what it runs by hand)\n"
        ));
    }
    out
}

/// Where a tarball of `integrity` is cached.
fn cached_path(cache_dir: &Path, integrity: &str) -> Result<PathBuf> {
    let digest = crate::npm::registry::sha512_integrity(integrity)
        .with_context(|| format!("integrity `{integrity}` is not a sha512 digest"))?;
    Ok(cache_dir
        .join("tarballs")
        .join(format!("{}.tgz", hex::encode(digest))))
}

/// The tarball at `url` with `integrity`: from the cache when a file there has that digest,
/// else downloaded, checked and cached (written whole, by rename). `Err`: the download failed
/// (the network's problem, not the version's); `Ok(Err)`: what was served is not that tarball.
pub(crate) async fn tarball(
    cache_dir: &Path,
    url: &str,
    integrity: &str,
) -> Result<Result<Vec<u8>, String>> {
    let Some(expected) = crate::npm::registry::sha512_integrity(integrity) else {
        return Ok(Err(format!(
            "integrity `{integrity}` is not a sha512 digest"
        )));
    };
    let path = cached_path(cache_dir, integrity)?;
    if let Ok(bytes) = std::fs::read(&path) {
        if Sha512::digest(&bytes).as_slice() == expected.as_slice() {
            return Ok(Ok(bytes));
        }
    }
    let bytes = crate::npm::registry::download(url).await?;
    if Sha512::digest(&bytes).as_slice() != expected.as_slice() {
        return Ok(Err(format!(
            "{url} does not match its integrity {integrity}"
        )));
    }
    let dir = path.parent().expect("a cache file has a directory");
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut staged = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut staged, &bytes)?;
    staged
        .persist(&path)
        .with_context(|| format!("cannot cache {}", path.display()))?;
    Ok(Ok(bytes))
}

/// The install scripts of `name`@`version`, read from its tarball (`url`, checked against
/// `integrity`, cached). `Err`: it could not be downloaded; `Ok(Err)`: the tarball is not the
/// one its integrity names, or not an npm package (why).
pub(crate) async fn read(
    cache_dir: &Path,
    name: &str,
    version: &str,
    url: &str,
    integrity: &str,
) -> Result<Result<InstallScripts, String>> {
    let bytes = match tarball(cache_dir, url, integrity)
        .await
        .with_context(|| format!("{name}@{version}: reading its install scripts"))?
    {
        Ok(bytes) => bytes,
        Err(why) => return Ok(Err(why)),
    };
    Ok(PackageFiles::from_tgz(&bytes)
        .and_then(|files| scripts_of(&files))
        .map_err(|e| format!("the tarball {url}: {e:#}")))
}

/// `lock`'s check: every lockfile entry of a package allowed to run install scripts, read from
/// the tarball the lockfile names (checked against the lockfile's integrity, so the content is
/// the one npm will install), must run what the manifest acknowledges; each row records it.
/// Anything else fails the lock, naming the entry, each difference and the remedy.
pub(crate) async fn check_rows(
    rows: &mut [InventoryPackage],
    manifest: &Manifest,
    ctx: &crate::Context,
    progress: &crate::util::Progress,
) -> Result<()> {
    let mut problems = Vec::new();
    for row in rows.iter_mut() {
        let Some(acknowledged) = manifest.install_scripts_allowed.get(&row.name) else {
            continue;
        };
        progress.step(format!(
            "reading the install scripts of {}@{} ({}) from its tarball",
            row.name, row.version, row.path
        ));
        let found = read(
            &ctx.layout.tool_cache(),
            &row.name,
            &row.version,
            &row.resolved,
            &row.integrity,
        )
        .await?;
        match found {
            Err(why) => problems.push(format!(
                "{}@{} ({}): install scripts: {why}",
                row.name, row.version, row.path
            )),
            Ok(found) => {
                if let Err(why) = judge(&row.name, &row.version, acknowledged, &found) {
                    problems.push(format!(
                        "{}@{} ({}): {why}\n{}",
                        row.name,
                        row.version,
                        row.path,
                        remedy(&row.name, &row.version, &found)
                    ));
                }
                row.install_scripts = Some(found);
            }
        }
    }
    if !problems.is_empty() {
        bail!(
            "{} lockfile entr{} run install scripts the manifest does not acknowledge; template/ \
             was not changed:\n  {}",
            problems.len(),
            if problems.len() == 1 { "y" } else { "ies" },
            problems.join("\n  ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests;
