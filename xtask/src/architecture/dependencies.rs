//! The dependency rule of ARCHITECTURE.md ("Dependencies"), kept true: within each crate, the
//! files' imports form no circle and no arrow points up the layers that section names.
//!
//! One walker for the three crates. It starts at each crate root (`lib.rs`, and `main.rs` for a
//! binary), follows the `mod` declarations that are not test-only, parses every file it reaches
//! with `syn`, and takes each path that names a module of the same crate: `crate::...`,
//! `super::...`, `self::...`, and a path that starts with a child module's name (`plan::run`
//! in `release/mod.rs`), in `use` trees, in code and inside macro invocations. Items under
//! `#[cfg(test)]` or `#[test]` are left out: a test may import anything. A path is an arrow to
//! the file that defines the longest module prefix of it (`crate::image::build::X` ->
//! `image/build.rs`, `crate::Context` -> `lib.rs`). A `mod` declaration is not an import.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// A production file of a crate: its path below `src/` (`/`-separated) and its module path.
pub(super) struct SourceFile {
    pub(super) path: String,
    pub(super) syntax: syn::File,
    /// The module path of the file (`["release", "plan"]`; empty for a crate root).
    module: Vec<String>,
}

/// One arrow: `from` names a module of `to` through `path`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Import {
    pub(super) from: String,
    pub(super) to: String,
    pub(super) path: String,
}

/// Whether `attrs` make an item test-only: `#[test]`, `#[cfg(test)]`, or
/// `#[cfg(any(test, feature = "test-support"))]` (code other crates' tests link, never a
/// release: `verify/src/receipt/mod.rs`'s `tests_support`).
pub(super) fn test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        if attr.path().is_ident("test") {
            return true;
        }
        match &attr.meta {
            syn::Meta::List(list) if list.path.is_ident("cfg") => matches!(
                list.tokens.to_string().as_str(),
                "test" | "any (test , feature = \"test-support\")"
            ),
            _ => false,
        }
    })
}

/// The attributes of `item`, when it has any.
pub(super) fn attrs_of(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::ExternCrate(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::ForeignMod(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::TraitAlias(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Union(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// Reads `file` (module path `module`) and, through its `mod name;` declarations that are not
/// test-only, every production file below it.
fn read_tree(src: &Path, file: &Path, module: Vec<String>, out: &mut Vec<SourceFile>) {
    let text = std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
    let syntax =
        syn::parse_file(&text).unwrap_or_else(|e| panic!("cannot parse {}: {e}", file.display()));
    let name = file.file_name().unwrap().to_string_lossy();
    let dir = file.parent().unwrap();
    // A crate root's or a mod.rs's children are beside it; any other file's are in the folder
    // of its name (`flags.rs` declares `flags/round_trip.rs`).
    let children_dir = if matches!(name.as_ref(), "lib.rs" | "main.rs" | "mod.rs") {
        dir.to_path_buf()
    } else {
        dir.join(file.file_stem().unwrap())
    };
    let mut declared = Vec::new();
    declarations(&syntax.items, &children_dir, &module, file, &mut declared);
    out.push(SourceFile {
        path: relative(src, file),
        syntax,
        module,
    });
    for (child, child_module) in declared {
        read_tree(src, &child, child_module, out);
    }
}

/// The files `items` declare (`mod name;`, not test-only), with their module paths; inline
/// modules are followed, as their own files' children would be.
fn declarations(
    items: &[syn::Item],
    dir: &Path,
    module: &[String],
    file: &Path,
    out: &mut Vec<(PathBuf, Vec<String>)>,
) {
    for item in items {
        let syn::Item::Mod(m) = item else { continue };
        if test_only(&m.attrs) {
            continue;
        }
        assert!(
            !m.attrs.iter().any(|a| a.path().is_ident("path")),
            "{}: `#[path]` on `mod {}`: the walker follows the default module files only",
            file.display(),
            m.ident
        );
        let name = m.ident.to_string();
        let mut child_module = module.to_vec();
        child_module.push(name.clone());
        match &m.content {
            Some((_, inner)) => {
                declarations(inner, &dir.join(&name), &child_module, file, out);
            }
            None => {
                let flat = dir.join(format!("{name}.rs"));
                let nested = dir.join(&name).join("mod.rs");
                let child = if flat.exists() { flat } else { nested };
                assert!(
                    child.exists(),
                    "{}: `mod {name};` has no file",
                    file.display()
                );
                out.push((child, child_module));
            }
        }
    }
}

fn relative(src: &Path, file: &Path) -> String {
    file.strip_prefix(src)
        .unwrap()
        .to_string_lossy()
        .replace('\\', "/")
}

/// The production files of the crate rooted at `src` (`lib.rs`, and `main.rs` when there is
/// one: the binary's own modules, `flags.rs`, are files of the same folder).
pub(super) fn production_files(src: &Path) -> Vec<SourceFile> {
    let mut files = Vec::new();
    for root in ["lib.rs", "main.rs"] {
        let file = src.join(root);
        if file.exists() {
            read_tree(src, &file, Vec::new(), &mut files);
        }
    }
    files
}

/// Every module path of `files` (inline modules included) and the file that holds it, and
/// each module's child module names.
struct Modules {
    /// Keyed by the root file (`lib.rs` or `main.rs`) the module belongs to, and its path.
    files: BTreeMap<(String, Vec<String>), String>,
    children: BTreeMap<(String, Vec<String>), BTreeSet<String>>,
}

/// The paths one file names, each with the module path it is named in, and its macro
/// invocations.
struct PathCollector {
    module: Vec<String>,
    found: Vec<(Vec<String>, Vec<String>)>,
    macros: Vec<(String, String)>,
}

impl PathCollector {
    fn record(&mut self, segments: Vec<String>) {
        if !segments.is_empty() {
            self.found.push((self.module.clone(), segments));
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut path = prefix.clone();
                if n.ident != "self" {
                    path.push(n.ident.to_string());
                }
                self.record(path);
            }
            syn::UseTree::Rename(r) => {
                let mut path = prefix.clone();
                if r.ident != "self" {
                    path.push(r.ident.to_string());
                }
                self.record(path);
            }
            syn::UseTree::Glob(_) => self.record(prefix.clone()),
            syn::UseTree::Group(g) => {
                for tree in &g.items {
                    self.use_tree(prefix, tree);
                }
            }
        }
    }

    /// The paths inside a macro's tokens (`format!("{}", crate::x::y())`).
    fn macro_tokens(&mut self, tokens: &str) {
        for run in paths_in_tokens(tokens) {
            self.record(run);
        }
    }
}

/// Each maximal `a :: b :: c` run of identifiers in tokens as `syn` prints them
/// (`crate :: util :: now_or (x)`).
fn paths_in_tokens(tokens: &str) -> Vec<Vec<String>> {
    let words: Vec<&str> = tokens.split_whitespace().collect();
    let ident = |w: &str| {
        w.chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_')
            && w.chars().all(|c| c.is_alphanumeric() || c == '_')
    };
    let mut runs = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let starts_run =
            ident(words[i]) && words.get(i + 1) == Some(&"::") && (i == 0 || words[i - 1] != "::");
        if !starts_run {
            i += 1;
            continue;
        }
        let mut run = vec![words[i].to_string()];
        while words.get(i + 1) == Some(&"::") && words.get(i + 2).is_some_and(|w| ident(w)) {
            run.push(words[i + 2].to_string());
            i += 2;
        }
        runs.push(run);
        i += 1;
    }
    runs
}

impl<'ast> Visit<'ast> for PathCollector {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if test_only(attrs_of(item)) {
            return;
        }
        if let syn::Item::Mod(m) = item {
            if let Some((_, items)) = &m.content {
                self.module.push(m.ident.to_string());
                for item in items {
                    self.visit_item(item);
                }
                self.module.pop();
            }
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        let attrs = match item {
            syn::ImplItem::Const(i) => &i.attrs,
            syn::ImplItem::Fn(i) => &i.attrs,
            syn::ImplItem::Type(i) => &i.attrs,
            syn::ImplItem::Macro(i) => &i.attrs,
            _ => return syn::visit::visit_impl_item(self, item),
        };
        if !test_only(attrs) {
            syn::visit::visit_impl_item(self, item);
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        self.record(path.segments.iter().map(|s| s.ident.to_string()).collect());
        syn::visit::visit_path(self, path);
    }

    // `pub(crate)`, `pub(super)`, `pub(in crate::x)` say who may see an item, not what it uses.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    // Attributes hold documentation and derives, not imports.
    fn visit_attribute(&mut self, _: &'ast syn::Attribute) {}

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.visit_path(&mac.path);
        let tokens = mac.tokens.to_string();
        if let Some(name) = mac.path.segments.last() {
            self.macros.push((name.ident.to_string(), tokens.clone()));
        }
        self.macro_tokens(&tokens);
    }
}

/// The file `segments` (named in module `scope` of the tree rooted at `root`) points into, if
/// they name a module of this crate.
fn resolve(modules: &Modules, root: &str, scope: &[String], segments: &[String]) -> Option<String> {
    let key = |m: &[String]| (root.to_string(), m.to_vec());
    let (mut base, rest): (Vec<String>, &[String]) = match segments[0].as_str() {
        "crate" => (Vec::new(), &segments[1..]),
        "self" => (scope.to_vec(), &segments[1..]),
        "super" => {
            let mut base = scope.to_vec();
            let mut rest = segments;
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
            (base, rest)
        }
        // A child module's name starts a path only when something of it follows: a lone
        // `plan` is a variable.
        first if segments.len() > 1 => {
            let children = modules.children.get(&key(scope))?;
            if !children.contains(first) {
                return None;
            }
            (scope.to_vec(), segments)
        }
        _ => return None,
    };
    base.extend(rest.iter().cloned());
    (0..=base.len())
        .rev()
        .find_map(|n| modules.files.get(&key(&base[..n])).cloned())
}

fn collect(file: &SourceFile) -> PathCollector {
    let mut collector = PathCollector {
        module: file.module.clone(),
        found: Vec::new(),
        macros: Vec::new(),
    };
    collector.visit_file(&file.syntax);
    collector
}

/// What one production file names, tests left out: every path (in `use` trees, in code and
/// inside macro tokens; `std::env::var`, `Settings::from_process`) and every macro invocation
/// (its name, `env`, and its tokens as `syn` prints them, `"CARGO_PKG_VERSION"`).
pub(super) struct Named {
    pub(super) paths: Vec<Vec<String>>,
    pub(super) macros: Vec<(String, String)>,
}

pub(super) fn named(file: &SourceFile) -> Named {
    let collector = collect(file);
    Named {
        paths: collector.found.into_iter().map(|(_, path)| path).collect(),
        macros: collector.macros,
    }
}

/// A crate's production files and the arrows between them.
#[derive(Debug)]
pub(super) struct Graph {
    pub(super) files: Vec<String>,
    pub(super) imports: Vec<Import>,
}

/// The production files of the crate rooted at `src` and every arrow between two of them.
pub(super) fn imports(src: &Path) -> Graph {
    let files = production_files(src);
    assert!(!files.is_empty(), "no crate root in {}", src.display());
    imports_of(files)
}

/// The arrows between `files`, one crate's production files as [`production_files`] reads
/// them.
pub(super) fn imports_of(files: Vec<SourceFile>) -> Graph {
    // The tree each file belongs to: the binary's files (main.rs and what it declares) are
    // another crate than the library's, though they share the folder.
    let mut root_of = BTreeMap::new();
    let mut current_root = String::new();
    for file in &files {
        if file.module.is_empty() {
            current_root = file.path.clone();
        }
        root_of.insert(file.path.clone(), current_root.clone());
    }
    let mut modules = Modules {
        files: BTreeMap::new(),
        children: BTreeMap::new(),
    };
    for file in &files {
        let root = &root_of[&file.path];
        register(
            &mut modules,
            root,
            &file.path,
            &file.module,
            &file.syntax.items,
        );
    }
    let mut found = BTreeSet::new();
    for file in &files {
        let root = &root_of[&file.path];
        for (scope, segments) in collect(file).found {
            let Some(to) = resolve(&modules, root, &scope, &segments) else {
                continue;
            };
            if to != file.path {
                found.insert(Import {
                    from: file.path.clone(),
                    to,
                    path: segments.join("::"),
                });
            }
        }
    }
    Graph {
        files: files.into_iter().map(|f| f.path).collect(),
        imports: found.into_iter().collect(),
    }
}

/// Records the modules `items` (in `module` of `path`) declare, inline ones included.
fn register(modules: &mut Modules, root: &str, path: &str, module: &[String], items: &[syn::Item]) {
    modules
        .files
        .insert((root.to_string(), module.to_vec()), path.to_string());
    let children = modules
        .children
        .entry((root.to_string(), module.to_vec()))
        .or_default();
    let mut inline = Vec::new();
    for item in items {
        let syn::Item::Mod(m) = item else { continue };
        if test_only(&m.attrs) {
            continue;
        }
        children.insert(m.ident.to_string());
        if let Some((_, inner)) = &m.content {
            inline.push((m.ident.to_string(), inner));
        }
    }
    for (name, inner) in inline {
        let mut child = module.to_vec();
        child.push(name);
        register(modules, root, path, &child, inner);
    }
}

/// The layers ARCHITECTURE.md names, per crate folder (`xtask/src/`), top first: the first
/// fenced block after `## Dependencies`, a line per crate folder and below it an indented line
/// per layer, its files (`layout.rs`) and folders (`image/`) separated by spaces.
pub(super) fn layers(text: &str) -> BTreeMap<String, Vec<Vec<String>>> {
    let from = text
        .find("## Dependencies")
        .expect("ARCHITECTURE.md has a `## Dependencies` section");
    let rest = &text[from..];
    let start = rest.find("```\n").expect("the layers are a fenced block") + 4;
    let end = rest[start..].find("```").expect("the layers' block ends") + start;
    let mut crates: BTreeMap<String, Vec<Vec<String>>> = BTreeMap::new();
    let mut current = None;
    for line in rest[start..end].lines() {
        if line.trim().is_empty() {
            continue;
        }
        if !line.starts_with(' ') {
            let name = line.trim().to_string();
            assert!(
                name.ends_with("/src/"),
                "a crate's line names its folder (`xtask/src/`): {line:?}"
            );
            crates.insert(name.clone(), Vec::new());
            current = Some(name);
            continue;
        }
        let krate = current
            .as_ref()
            .unwrap_or_else(|| panic!("a layer before its crate's folder: {line:?}"));
        let entries: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        for entry in &entries {
            assert!(
                entry.ends_with(".rs") || entry.ends_with('/'),
                "a layer lists files (`x.rs`) and folders (`x/`) only: {entry:?} in {line:?}"
            );
        }
        crates.get_mut(krate).unwrap().push(entries);
    }
    crates
}

/// The layer of `file` (0 = top): the one with its most specific entry, the file itself or
/// the deepest folder holding it.
fn layer_of(layers: &[Vec<String>], file: &str) -> Option<usize> {
    let mut best: Option<(usize, usize)> = None;
    for (index, layer) in layers.iter().enumerate() {
        for entry in layer {
            let matches =
                entry == file || (entry.ends_with('/') && file.starts_with(entry.as_str()));
            if matches && best.is_none_or(|(_, len)| entry.len() > len) {
                best = Some((index, entry.len()));
            }
        }
    }
    best.map(|(index, _)| index)
}

/// What `graph` breaks of `layers` (top first): files in no layer, arrows to a higher
/// layer, and circles, one line each, naming the files and the paths.
pub(super) fn violations(graph: &Graph, layers: &[Vec<String>]) -> Vec<String> {
    let imports = &graph.imports;
    let mut found = Vec::new();
    for file in &graph.files {
        if layer_of(layers, file).is_none() {
            found.push(format!(
                "{file} is in no layer: add it (or its folder) to one"
            ));
        }
    }
    for entry in layers.iter().flatten() {
        let names_a_file = graph
            .files
            .iter()
            .any(|f| f == entry || (entry.ends_with('/') && f.starts_with(entry.as_str())));
        if !names_a_file {
            found.push(format!("the layer entry {entry} names no production file"));
        }
    }
    for import in imports {
        let (Some(from), Some(to)) = (layer_of(layers, &import.from), layer_of(layers, &import.to))
        else {
            continue;
        };
        if to < from {
            found.push(format!(
                "upward arrow: {} (layer {}) imports {} (layer {}, above it) through `{}`",
                import.from,
                from + 1,
                import.to,
                to + 1,
                import.path
            ));
        }
    }
    found.extend(circles(imports));
    found
}

/// One line per circle of `imports`: the shortest way round from the circle's first file,
/// with the path each arrow takes.
fn circles(imports: &[Import]) -> Vec<String> {
    let mut graph: BTreeMap<&str, Vec<&Import>> = BTreeMap::new();
    for import in imports {
        graph.entry(&import.from).or_default().push(import);
        graph.entry(&import.to).or_default();
    }
    let mut lines = Vec::new();
    for component in strongly_connected(&graph) {
        if component.len() < 2 {
            continue;
        }
        let first = component[0];
        // Breadth-first inside the component, from `first` back to `first`.
        let inside: BTreeSet<&str> = component.iter().copied().collect();
        let mut came_by: BTreeMap<&str, &Import> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([first]);
        let mut closing = None;
        while let Some(file) = queue.pop_front() {
            for import in &graph[file] {
                if import.to == first {
                    closing = Some(*import);
                    break;
                }
                if inside.contains(import.to.as_str()) && !came_by.contains_key(import.to.as_str())
                {
                    came_by.insert(&import.to, import);
                    queue.push_back(&import.to);
                }
            }
            if closing.is_some() {
                break;
            }
        }
        let closing = closing.expect("a component of two or more files has a way round");
        let mut arrows = vec![closing];
        let mut at = closing.from.as_str();
        while at != first {
            let import = came_by[at];
            arrows.push(import);
            at = &import.from;
        }
        arrows.reverse();
        let mut line = format!("circle: {first}");
        for import in &arrows {
            line.push_str(&format!(" -> {} (`{}`)", import.to, import.path));
        }
        if component.len() > arrows.len() {
            line.push_str(&format!(
                "; {} files in all are on circles with it: {}",
                component.len(),
                component.join(" ")
            ));
        }
        lines.push(line);
    }
    lines.sort();
    lines
}

/// Tarjan's strongly connected components of `graph`, each sorted, in the order found.
fn strongly_connected<'a>(graph: &BTreeMap<&'a str, Vec<&'a Import>>) -> Vec<Vec<&'a str>> {
    struct State<'a> {
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        components: Vec<Vec<&'a str>>,
    }
    fn visit<'a>(graph: &BTreeMap<&'a str, Vec<&'a Import>>, v: &'a str, s: &mut State<'a>) {
        let next = s.index.len();
        s.index.insert(v, next);
        s.low.insert(v, next);
        s.stack.push(v);
        s.on_stack.insert(v);
        for import in &graph[v] {
            let w = import.to.as_str();
            if !s.index.contains_key(w) {
                visit(graph, w, s);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on_stack.remove(w);
                component.push(w);
                if w == v {
                    break;
                }
            }
            component.sort();
            s.components.push(component);
        }
    }
    let mut state = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        components: Vec::new(),
    };
    for v in graph.keys() {
        if !state.index.contains_key(v) {
            visit(graph, v, &mut state);
        }
    }
    state.components
}

#[test]
fn the_imports_make_no_circle_and_no_arrow_points_up() {
    let root = crate::util::repo_root();
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let layers = layers(&text);
    assert_eq!(
        layers.keys().map(String::as_str).collect::<Vec<_>>(),
        ["formats/src/", "verify/src/", "xtask/src/"],
        "ARCHITECTURE.md's dependency block names the three crates' layers"
    );
    let mut found = Vec::new();
    for (krate, layers) in &layers {
        let graph = imports(&root.join(krate));
        assert!(
            graph.imports.len() > 20,
            "the walk found {krate}'s imports: {graph:#?}"
        );
        found.extend(
            violations(&graph, layers)
                .into_iter()
                .map(|v| format!("{krate}: {v}")),
        );
    }
    assert!(
        found.is_empty(),
        "the imports break ARCHITECTURE.md's dependency rule (\"Dependencies\"): move the item \
         to the lower file, or the file to another layer there:\n{}",
        found.join("\n")
    );
}

#[test]
fn a_circle_and_an_upward_arrow_are_reported_and_tests_are_not_imports() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("demo/src");
    std::fs::create_dir_all(src.join("ring")).unwrap();
    for (file, text) in [
        (
            "lib.rs",
            "pub mod high;\npub mod low;\npub mod ring;\n#[cfg(test)]\nmod tests;\n\
             pub struct Context;\n",
        ),
        // The upward arrow (and with high.rs's arrow down, a circle); its test module's
        // import and a visibility are not arrows.
        (
            "low.rs",
            "use crate::high::Thing;\npub(crate) fn f(_: Thing) {}\n\
             pub(in crate::ring) fn v() {}\n\
             #[cfg(test)]\nmod t {\n    use crate::ring::b::B;\n}\n",
        ),
        // An arrow inside a macro's tokens, and one to the crate root's item.
        (
            "high.rs",
            "pub struct Thing;\npub fn g(c: &crate::Context) {\n    \
             crate::low::f(Thing);\n    println!(\"{}\", crate::ring::a::A);\n}\n",
        ),
        // A path from a child's name, and a variable named like a child, which is not one.
        (
            "ring/mod.rs",
            "pub mod a;\npub mod b;\npub fn x() -> u8 {\n    let b = a::A;\n    b\n}\n",
        ),
        ("ring/a.rs", "use super::b::B;\npub const A: u8 = B;\n"),
        (
            "ring/b.rs",
            "pub const B: u8 = 1;\npub fn b() -> u8 {\n    super::a::A\n}\n#[test]\n\
             fn t() {\n    crate::high::g(&crate::Context);\n}\n",
        ),
        // Test-only: not walked.
        ("tests.rs", "use crate::high::g;\n"),
    ] {
        std::fs::write(src.join(file), text).unwrap();
    }
    let graph = imports(&src);
    let arrows: Vec<String> = graph
        .imports
        .iter()
        .map(|i| format!("{} -> {} {}", i.from, i.to, i.path))
        .collect();
    assert_eq!(
        arrows,
        [
            "high.rs -> lib.rs crate::Context",
            "high.rs -> low.rs crate::low::f",
            "high.rs -> ring/a.rs crate::ring::a::A",
            "low.rs -> high.rs crate::high::Thing",
            "ring/a.rs -> ring/b.rs super::b::B",
            "ring/b.rs -> ring/a.rs super::a::A",
            "ring/mod.rs -> ring/a.rs a::A",
        ]
    );
    assert_eq!(graph.files.len(), 6, "{:?}", graph.files);
    let layers =
        layers("## Dependencies\n\n```\ndemo/src/\n  high.rs\n  ring/\n  low.rs gone.rs\n```\n");
    let found = violations(&graph, &layers["demo/src/"]);
    assert_eq!(
        found,
        [
            "lib.rs is in no layer: add it (or its folder) to one",
            "the layer entry gone.rs names no production file",
            "upward arrow: low.rs (layer 3) imports high.rs (layer 1, above it) through \
             `crate::high::Thing`",
            "circle: high.rs -> low.rs (`crate::low::f`) -> high.rs (`crate::high::Thing`)",
            "circle: ring/a.rs -> ring/b.rs (`super::b::B`) -> ring/a.rs (`super::a::A`)",
        ]
    );
}
