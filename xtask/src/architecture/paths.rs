//! One home per path: every path of the checkout that `template_formats::paths` defines is
//! spelled out there and nowhere else in production code, so a moved file is moved in one
//! place. The walker reads the constants from `formats/src/paths.rs` itself and looks for
//! their values in the string literals of every other production file of the three crates
//! (in code, in macros such as `format!` and in attributes such as clap's `default_value`;
//! not in comments and documentation, not in `#[cfg(test)]` code, and not in `include_str!`,
//! which takes only a literal).
//!
//! Only the values with a `/` are looked for (`template/package-lock.json`, `.xtask/releases`):
//! a bare `Dockerfile` or `template` is also a word of prose and a release asset's name.

use std::collections::BTreeMap;
use std::path::Path;

use syn::visit::Visit;

use super::dependencies::{attrs_of, production_files, test_only};

/// `NAME -> value` of every `&str` constant in the paths module's text.
fn defined_paths(text: &str) -> BTreeMap<String, String> {
    let file = syn::parse_file(text).expect("the paths module parses");
    let mut paths = BTreeMap::new();
    for item in &file.items {
        if let syn::Item::Const(c) = item {
            if let syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(value),
                ..
            }) = &*c.expr
            {
                paths.insert(c.ident.to_string(), value.value());
            }
        }
    }
    paths
}

/// The string literals of one file's production code, as written.
#[derive(Default)]
struct Literals(Vec<String>);

impl<'ast> Visit<'ast> for Literals {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !test_only(attrs_of(item)) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        if let syn::ImplItem::Fn(f) = item {
            if test_only(&f.attrs) {
                return;
            }
        }
        syn::visit::visit_impl_item(self, item);
    }

    fn visit_lit_str(&mut self, lit: &'ast syn::LitStr) {
        self.0.push(lit.value());
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        let name = mac.path.segments.last().map(|s| s.ident.to_string());
        if !matches!(name.as_deref(), Some("include_str" | "include_bytes")) {
            // The printed tokens hold every literal verbatim.
            self.0.push(mac.tokens.to_string());
        }
    }

    fn visit_attribute(&mut self, attr: &'ast syn::Attribute) {
        if !attr.path().is_ident("doc") {
            if let syn::Meta::List(list) = &attr.meta {
                self.0.push(list.tokens.to_string());
            }
            if let syn::Meta::NameValue(nv) = &attr.meta {
                self.visit_expr(&nv.value);
            }
        }
    }
}

/// Each production file below `root` (crate folders `crates`, paths module `paths_module`
/// skipped) that spells out a value of `paths`: `file: "value" (use paths::NAME)`.
fn spelled_out(
    root: &Path,
    crates: &[&str],
    paths_module: &str,
    paths: &BTreeMap<String, String>,
) -> Vec<String> {
    let policed: Vec<(&String, &String)> = paths
        .iter()
        .filter(|(_, value)| value.contains('/'))
        .collect();
    let mut found = Vec::new();
    for krate in crates {
        for file in production_files(&root.join(krate).join("src")) {
            let shown = format!("{krate}/src/{}", file.path);
            if shown == paths_module {
                continue;
            }
            let mut literals = Literals::default();
            literals.visit_file(&file.syntax);
            for (name, value) in &policed {
                if literals.0.iter().any(|l| l.contains(value.as_str())) {
                    found.push(format!("{shown}: \"{value}\" (use paths::{name})"));
                }
            }
        }
    }
    found
}

#[test]
fn each_path_of_the_checkout_has_one_home() {
    let root = crate::util::repo_root();
    let module = "formats/src/paths.rs";
    let paths = defined_paths(&std::fs::read_to_string(root.join(module)).unwrap());
    assert!(
        paths.get("PACKAGE_LOCK").map(String::as_str) == Some("template/package-lock.json"),
        "the walker read the paths module: {paths:?}"
    );
    let found = spelled_out(&root, super::WORKSPACE_CRATES, module, &paths);
    assert!(
        found.is_empty(),
        "these production files spell out a path that {module} defines; name its constant \
         instead (through `Layout` in the xtask):\n{}",
        found.join("\n")
    );
}

#[test]
fn a_path_spelled_out_in_code_a_macro_or_an_attribute_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("demo/src");
    std::fs::create_dir_all(&src).unwrap();
    let paths_text = "pub const LOCK: &str = \"template/package-lock.json\";\n\
                      pub const DOCKERFILE: &str = \"Dockerfile\";\n";
    std::fs::write(src.join("paths.rs"), paths_text).unwrap();
    std::fs::write(
        src.join("lib.rs"),
        "pub mod paths;\npub mod code;\npub mod message;\npub mod flag;\npub mod fine;\n",
    )
    .unwrap();
    std::fs::write(
        src.join("code.rs"),
        "pub fn f() -> &'static str { \"template/package-lock.json\" }\n",
    )
    .unwrap();
    std::fs::write(
        src.join("message.rs"),
        "pub fn g() -> String { format!(\"read template/package-lock.json: {}\", 1) }\n",
    )
    .unwrap();
    std::fs::write(
        src.join("flag.rs"),
        "pub struct A {\n    #[arg(default_value = \"template/package-lock.json\")]\n    \
         pub lock: String,\n}\n",
    )
    .unwrap();
    // Documentation, a test, include_str! and a bare word are not homes.
    std::fs::write(
        src.join("fine.rs"),
        "/// Reads template/package-lock.json.\n\
         pub const S: &str = include_str!(\"../template/package-lock.json\");\n\
         pub const D: &str = \"the Dockerfile\";\n\
         #[cfg(test)]\nmod tests {\n    const T: &str = \"template/package-lock.json\";\n}\n",
    )
    .unwrap();
    let paths = defined_paths(paths_text);
    assert_eq!(
        spelled_out(dir.path(), &["demo"], "demo/src/paths.rs", &paths),
        [
            "demo/src/code.rs: \"template/package-lock.json\" (use paths::LOCK)",
            "demo/src/message.rs: \"template/package-lock.json\" (use paths::LOCK)",
            "demo/src/flag.rs: \"template/package-lock.json\" (use paths::LOCK)",
        ]
    );
}
