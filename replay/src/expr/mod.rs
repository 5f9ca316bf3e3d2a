//! GitHub Actions' `${{ }}` expression language: a lexer, a parser and an evaluator.
//!
//! A port of GitHub's own implementation, `@actions/expressions` 0.3.61 in
//! actions/languageservices@4043eda158e16579cc5fb1b0b07a4bce2a76f0b5 (MIT):
//! `expressions/src/lexer.ts` (tokens, number literals through JavaScript's `Number()`,
//! `NaN`/`Infinity`), `parser.ts` (precedence, the depth limit of 50, functions and their
//! arity checked when parsing, so `false && nope()` fails even though `nope()` never runs),
//! `evaluator.ts` and `idxHelper.ts` (index coercion, `*` filters), `result.ts` (loose
//! equality and ordering: OrdinalIgnoreCase strings compared upper-cased, objects and arrays
//! equal only to themselves), `data/*.ts` (how each kind becomes a string or a number) and
//! `funcs/*.ts`. Its known-answer cases, `expressions/testdata/*.json`, run against this module
//! in `tests/expressions.rs` (this crate); a case that disagrees fails there, unless it is listed there
//! with the reason.
//!
//! Where the harness is stricter than GitHub, on purpose: a [`Scope`] is asked to vet every
//! property path rooted at a context (`steps.build.outputs.image`), and an object or array
//! written into text is an error (GitHub writes `Object`/`Array`, never what was meant).
//!
//! The evaluator knows nothing about jobs or steps: a [`Scope`] provides the contexts, the
//! status functions and `hashFiles`.
//!
//! `value.rs` holds the values and JavaScript's number coercions, `parser.rs` the lexer and the
//! parser, `evaluator.rs` the evaluation, `format()` and the `${{ }}` templates.

mod evaluator;
mod parser;
mod value;

pub use evaluator::{condition, eval, eval_data, render, render_string, Scope};
pub use parser::{has_status_function, parse, CmpOp, Expr};
pub use value::{js_number, js_number_to_string, to_string, truthy, Data};
