//! Evaluating a parsed expression (`evaluator.ts`, `result.ts`, `funcs/*.ts`) against a
//! [`Scope`], and the `${{ }}` templates of workflow files.

use std::collections::BTreeMap;
use std::rc::Rc;

use serde_json::Value;

use super::parser::{contexts_named, has_status_function, parse, CmpOp, Expr};
use super::value::{js_number_to_string, to_string, truthy, upper_special, Data};

/// What an expression can see. Errors are plain sentences; the caller adds where it happened.
pub trait Scope {
    /// A top-level context (`github`, `steps`, ...), or an error when it is not available here.
    fn context(&self, name: &str) -> Result<Value, String>;
    /// Vets a property path rooted at a context, e.g. `["steps", "build", "outputs", "image"]`,
    /// given whether anything was found there.
    fn check_path(&self, path: &[String], found: bool) -> Result<(), String>;
    /// `success()`, `failure()`, `always()`, `cancelled()`.
    fn status(&self, function: &str) -> Result<bool, String>;
    /// `hashFiles(patterns...)`.
    fn hash_files(&self, patterns: &[String]) -> Result<String, String>;
}

// ---------------------------------------------------------------------------------------------
// Coercion and comparison (result.ts)
// ---------------------------------------------------------------------------------------------

/// `coerceTypes`: like JavaScript's abstract equality, but objects stay as they are.
fn coerce_types(l: &Data, r: &Data) -> (Data, Data) {
    let same_kind = std::mem::discriminant(l) == std::mem::discriminant(r);
    if same_kind {
        return (l.clone(), r.clone());
    }
    match (l, r) {
        (Data::Num(_), Data::Str(_)) => return (l.clone(), Data::Num(r.number())),
        (Data::Str(_), Data::Num(_)) => return (Data::Num(l.number()), r.clone()),
        (Data::Null | Data::Bool(_), _) => return coerce_types(&Data::Num(l.number()), r),
        _ => {}
    }
    match r {
        Data::Null | Data::Bool(_) => coerce_types(l, &Data::Num(r.number())),
        _ => (l.clone(), r.clone()),
    }
}

fn equals(l: &Data, r: &Data) -> bool {
    match coerce_types(l, r) {
        (Data::Null, Data::Null) => true,
        (Data::Num(a), Data::Num(b)) => a == b,
        (Data::Str(a), Data::Str(b)) => upper_special(&a) == upper_special(&b),
        (Data::Bool(a), Data::Bool(b)) => a == b,
        (Data::Arr { items: a, .. }, Data::Arr { items: b, .. }) => Rc::ptr_eq(&a, &b),
        (Data::Obj(a), Data::Obj(b)) => Rc::ptr_eq(&a, &b),
        _ => false,
    }
}

/// `greaterThan` with `greater`, `lessThan` without.
fn order(l: &Data, r: &Data, greater: bool) -> bool {
    match coerce_types(l, r) {
        (Data::Num(a), Data::Num(b)) => {
            if a.is_nan() || b.is_nan() {
                false
            } else if greater {
                a > b
            } else {
                a < b
            }
        }
        (Data::Str(a), Data::Str(b)) => {
            let (a, b) = (upper_special(&a), upper_special(&b));
            // JavaScript compares UTF-16 code units; for the strings workflows hold that is
            // the order of their code points, which is what `str` compares.
            if greater {
                a > b
            } else {
                a < b
            }
        }
        (Data::Bool(a), Data::Bool(b)) => {
            if greater {
                a && !b
            } else {
                !a && b
            }
        }
        _ => false,
    }
}

fn compare(op: CmpOp, a: &Data, b: &Data) -> bool {
    match op {
        CmpOp::Eq => equals(a, b),
        CmpOp::Ne => !equals(a, b),
        CmpOp::Gt => order(a, b, true),
        CmpOp::Ge => equals(a, b) || order(a, b, true),
        CmpOp::Lt => order(a, b, false),
        CmpOp::Le => equals(a, b) || order(a, b, false),
    }
}

// ---------------------------------------------------------------------------------------------
// Evaluation (evaluator.ts)
// ---------------------------------------------------------------------------------------------

/// One evaluation: the scope, and each context converted once, so a context is the same
/// object every time the expression names it.
struct Evaluation<'s> {
    scope: &'s dyn Scope,
    contexts: BTreeMap<String, Data>,
}

pub fn eval(e: &Expr, scope: &dyn Scope) -> Result<Value, String> {
    eval_data(e, scope).map(|d| d.to_json())
}

/// Evaluates to the expression's own value (NaN and the infinities included). Every context
/// the expression names must exist, whether or not the evaluation reaches it: GitHub rejects
/// an unknown named-value when it parses the workflow.
pub fn eval_data(e: &Expr, scope: &dyn Scope) -> Result<Data, String> {
    let mut names = Vec::new();
    contexts_named(e, &mut names);
    let mut contexts = BTreeMap::new();
    for name in names {
        let value = Data::from_json(&scope.context(&name)?);
        contexts.insert(name, value);
    }
    let evaluation = Evaluation { scope, contexts };
    evaluation.eval(e).map(|(d, _)| d)
}

/// The context path of a property chain (`["steps", "build", "outputs"]`), for the scope to
/// vet; None once the chain leaves plain property access.
type Path = Option<Vec<String>>;

impl Evaluation<'_> {
    fn eval(&self, e: &Expr) -> Result<(Data, Path), String> {
        Ok(match e {
            Expr::Lit(v) => (v.clone(), None),
            Expr::Context(name) => {
                // eval_data resolved every context the expression names before it began.
                let value = self.contexts.get(name).cloned().ok_or_else(|| {
                    format!("the `{name}` context was not resolved before evaluation")
                })?;
                (value, Some(vec![name.clone()]))
            }
            Expr::Group(inner) => (self.eval(inner)?.0, None),
            Expr::Index(base, index) => self.index(base, index.as_deref())?,
            Expr::Not(inner) => (Data::Bool(!self.eval(inner)?.0.truthy()), None),
            Expr::And(args) | Expr::Or(args) => {
                let and = matches!(e, Expr::And(_));
                let mut result = Data::Null;
                for arg in args {
                    result = self.eval(arg)?.0;
                    if result.truthy() != and {
                        break;
                    }
                }
                (result, None)
            }
            Expr::Cmp(op, a, b) => {
                let (a, b) = (self.eval(a)?.0, self.eval(b)?.0);
                (Data::Bool(compare(*op, &a, &b)), None)
            }
            Expr::Call(name, args) => (self.call(name, args)?, None),
        })
    }

    /// `visitIndexAccess`, with `idxHelper`'s coercion of the index.
    fn index(&self, base: &Expr, index: Option<&Expr>) -> Result<(Data, Path), String> {
        let index = match index {
            None => None,
            Some(i) => Some(self.eval(i)?.0),
        };
        let (object, path) = self.eval(base)?;
        let star = index.is_none();
        let key = index
            .as_ref()
            .filter(|i| i.primitive())
            .map(Data::coerce_string);
        let position = index
            .as_ref()
            .map(Data::number)
            .and_then(|f| (f.is_finite() && f >= 0.0).then(|| f.floor() as usize));
        let result = match &object {
            Data::Arr {
                items,
                filtered: true,
            } => {
                let mut out = Vec::new();
                for item in items.iter() {
                    match item {
                        Data::Obj(pairs) if star => {
                            out.extend(pairs.iter().map(|(_, v)| v.clone()))
                        }
                        Data::Obj(_) => {
                            if let Some(v) = key.as_deref().and_then(|k| item.get(k)) {
                                out.push(v.clone());
                            }
                        }
                        Data::Arr { items: inner, .. } if star => out.extend(inner.iter().cloned()),
                        Data::Arr { items: inner, .. } => {
                            if let Some(v) = position.and_then(|p| inner.get(p)) {
                                out.push(v.clone());
                            }
                        }
                        _ => {}
                    }
                }
                Data::filtered(out)
            }
            Data::Arr { items, .. } if star => Data::filtered(items.to_vec()),
            Data::Arr { items, .. } => position
                .and_then(|p| items.get(p))
                .cloned()
                .unwrap_or(Data::Null),
            Data::Obj(pairs) if star => {
                Data::filtered(pairs.iter().map(|(_, v)| v.clone()).collect())
            }
            Data::Obj(_) => key
                .as_deref()
                .and_then(|k| object.get(k))
                .cloned()
                .unwrap_or(Data::Null),
            _ if star => Data::filtered(Vec::new()),
            _ => Data::Null,
        };
        // The harness's vetting: property chains on objects rooted at a context.
        let path = match (path, &object, key) {
            (Some(mut p), base, Some(k)) if !star && !matches!(base, Data::Arr { .. }) => {
                let found = object.get(&k).is_some();
                p.push(k);
                self.scope.check_path(&p, found)?;
                Some(p)
            }
            _ => None,
        };
        Ok((result, path))
    }

    fn call(&self, name: &str, args: &[Expr]) -> Result<Data, String> {
        let values = || {
            args.iter()
                .map(|a| self.eval(a).map(|(d, _)| d))
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(match name {
            "success" | "failure" | "always" | "cancelled" => Data::Bool(self.scope.status(name)?),
            "hashfiles" => {
                let patterns: Vec<String> = values()?.iter().map(Data::coerce_string).collect();
                Data::Str(self.scope.hash_files(&patterns)?)
            }
            "contains" => {
                let v = values()?;
                let (left, right) = (&v[0], &v[1]);
                Data::Bool(match left {
                    _ if left.primitive() && right.primitive() => left
                        .coerce_string()
                        .to_lowercase()
                        .contains(&right.coerce_string().to_lowercase()),
                    Data::Arr { items, .. } => items.iter().any(|item| equals(right, item)),
                    _ => false,
                })
            }
            "startswith" | "endswith" => {
                let v = values()?;
                if !v[0].primitive() || !v[1].primitive() {
                    return Ok(Data::Bool(false));
                }
                let (s, affix) = (
                    upper_special(&v[0].coerce_string()),
                    upper_special(&v[1].coerce_string()),
                );
                Data::Bool(if name == "startswith" {
                    s.starts_with(&affix)
                } else {
                    s.ends_with(&affix)
                })
            }
            "format" => {
                let v = values()?;
                Data::Str(format(&v[0].coerce_string(), &v[1..])?)
            }
            "join" => {
                let v = values()?;
                match &v[0] {
                    d if d.primitive() => Data::Str(d.coerce_string()),
                    Data::Arr { items, .. } => {
                        let separator = v
                            .get(1)
                            .filter(|s| s.primitive())
                            .map(Data::coerce_string)
                            .unwrap_or_else(|| ",".into());
                        Data::Str(
                            items
                                .iter()
                                .map(Data::coerce_string)
                                .collect::<Vec<_>>()
                                .join(&separator),
                        )
                    }
                    _ => Data::Str(String::new()),
                }
            }
            "tojson" => {
                let mut out = String::new();
                to_json_text(&values()?[0], 0, &mut out);
                Data::Str(out)
            }
            "fromjson" => {
                let text = values()?[0].coerce_string();
                if text.trim().is_empty() {
                    return Err("fromJSON: empty input".into());
                }
                let parsed: Value = serde_json::from_str(&text)
                    .map_err(|e| format!("fromJSON: `{text}` is not JSON: {e}"))?;
                Data::from_json(&parsed)
            }
            "case" => {
                let v = values()?;
                let mut chosen = None;
                for pair in v[..v.len() - 1].chunks(2) {
                    match &pair[0] {
                        Data::Bool(true) => {
                            chosen = Some(pair[1].clone());
                            break;
                        }
                        Data::Bool(false) => {}
                        _ => return Err("case predicate must evaluate to a boolean value".into()),
                    }
                }
                chosen.unwrap_or_else(|| v[v.len() - 1].clone())
            }
            other => return Err(format!("Unrecognized function: '{other}'")),
        })
    }
}

/// `JSON.stringify(value, replacer, "  ")` (`funcs/tojson.ts`): two-space indentation,
/// numbers in JavaScript's form, NaN and the infinities as null.
fn to_json_text(d: &Data, indent: usize, out: &mut String) {
    let pad = |n: usize, out: &mut String| out.extend(std::iter::repeat_n("  ", n));
    match d {
        Data::Null => out.push_str("null"),
        Data::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Data::Num(n) if n.is_finite() => out.push_str(&js_number_to_string(*n)),
        Data::Num(_) => out.push_str("null"),
        Data::Str(s) => out.push_str(&serde_json::to_string(s).expect("strings serialise")),
        Data::Arr { items, .. } if items.is_empty() => out.push_str("[]"),
        Data::Arr { items, .. } => {
            out.push_str("[\n");
            for (i, item) in items.iter().enumerate() {
                pad(indent + 1, out);
                to_json_text(item, indent + 1, out);
                out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
            }
            pad(indent, out);
            out.push(']');
        }
        Data::Obj(pairs) if pairs.is_empty() => out.push_str("{}"),
        Data::Obj(pairs) => {
            out.push_str("{\n");
            for (i, (k, v)) in pairs.iter().enumerate() {
                pad(indent + 1, out);
                out.push_str(&serde_json::to_string(k).expect("strings serialise"));
                out.push_str(": ");
                to_json_text(v, indent + 1, out);
                out.push_str(if i + 1 < pairs.len() { ",\n" } else { "\n" });
            }
            pad(indent, out);
            out.push('}');
        }
    }
}

/// `format()` (`funcs/format.ts`): `{N}` is argument N, `{{` and `}}` are braces, anything
/// else with a brace is an error.
fn format(fmt: &str, args: &[Data]) -> Result<String, String> {
    let chars: Vec<char> = fmt.chars().collect();
    let find = |c: char, from: usize| chars[from..].iter().position(|&x| x == c).map(|p| p + from);
    let invalid = || format!("The following format string is invalid: {fmt}");
    let mut out = String::new();
    let mut index = 0;
    while index < chars.len() {
        let (lbrace, rbrace) = (find('{', index), find('}', index));
        match (lbrace, rbrace) {
            (Some(l), r) if r.is_none_or(|r| r > l) => {
                if chars.get(l + 1) == Some(&'{') {
                    out.extend(&chars[index..=l]);
                    index = l + 2;
                    continue;
                }
                let Some(r) = r.filter(|&r| r > l + 1) else {
                    return Err(invalid());
                };
                let digits: String = chars[l + 1..]
                    .iter()
                    .take_while(|c| c.is_ascii_digit())
                    .collect();
                if digits.is_empty() {
                    return Err(invalid());
                }
                // Upstream reads the digits and jumps to the next `}`, whatever lies between.
                let n: usize = digits.parse().map_err(|_| invalid())?;
                let arg = args.get(n).ok_or_else(|| {
                    format!(
                        "The following format string references more arguments than were \
                         supplied: {fmt}"
                    )
                })?;
                out.extend(&chars[index..l]);
                out.push_str(&arg.coerce_string());
                index = r + 1;
            }
            (_, Some(r)) => {
                if chars.get(r + 1) == Some(&'}') {
                    out.extend(&chars[index..=r]);
                    index = r + 2;
                } else {
                    return Err(invalid());
                }
            }
            // No brace left (a lone `{` went to the first arm).
            (_, None) => {
                out.extend(&chars[index..]);
                break;
            }
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Templates: strings with `${{ }}` inside
// ---------------------------------------------------------------------------------------------

/// Splits a template into literal text and expression sources.
fn segments(template: &str) -> Result<Vec<(bool, String)>, String> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find("${{") {
        out.push((false, rest[..start].to_owned()));
        let body = &rest[start + 3..];
        let mut in_str = false;
        let mut end = None;
        let bytes = body.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'\'' => in_str = !in_str,
                b'}' if !in_str && bytes.get(i + 1) == Some(&b'}') => {
                    end = Some(i);
                    break;
                }
                _ => {}
            }
            i += 1;
        }
        let end = end.ok_or_else(|| format!("unterminated `${{{{` in `{template}`"))?;
        out.push((true, body[..end].trim().to_owned()));
        rest = &body[end + 2..];
    }
    out.push((false, rest.to_owned()));
    Ok(out)
}

/// Evaluates every `${{ }}` in a string. A string that is exactly one expression keeps the
/// expression's type (GitHub does this for `matrix`, `with`, `continue-on-error`...); mixed
/// text is a string. Objects and arrays interpolated into text are an error (GitHub writes
/// `Object` or `Array`, never what was meant).
pub fn render(template: &str, scope: &dyn Scope) -> Result<Value, String> {
    let segs = segments(template)?;
    if let [(false, a), (true, src), (false, b)] = segs.as_slice() {
        if a.trim().is_empty() && b.trim().is_empty() {
            return eval(&parse(src)?, scope).map_err(|e| format!("`${{{{ {src} }}}}`: {e}"));
        }
    }
    let mut out = String::new();
    for (is_expr, text) in segs {
        if !is_expr {
            out.push_str(&text);
            continue;
        }
        let v = eval(&parse(&text)?, scope).map_err(|e| format!("`${{{{ {text} }}}}`: {e}"))?;
        if v.is_array() || v.is_object() {
            return Err(format!(
                "`${{{{ {text} }}}}` is an {} inside text; use toJSON() to write it",
                if v.is_array() { "array" } else { "object" }
            ));
        }
        out.push_str(&to_string(&v));
    }
    Ok(Value::String(out))
}

pub fn render_string(template: &str, scope: &dyn Scope) -> Result<String, String> {
    let v = render(template, scope)?;
    if v.is_array() || v.is_object() {
        return Err(format!(
            "`{template}` evaluates to an {} where a string is needed; use toJSON()",
            if v.is_array() { "array" } else { "object" }
        ));
    }
    Ok(to_string(&v))
}

/// A job or step `if:`: bare or wrapped in `${{ }}`, with the implicit `success() && (...)`
/// when it calls no status function.
pub fn condition(source: &str, scope: &dyn Scope) -> Result<bool, String> {
    let trimmed = source.trim();
    let segs = segments(trimmed)?;
    let expr_src = match segs.as_slice() {
        [(false, a), (true, src), (false, b)] if a.is_empty() && b.is_empty() => src.clone(),
        [(false, only)] => only.clone(),
        _ => return Ok(truthy(&render(trimmed, scope)?)),
    };
    let e = parse(&expr_src)?;
    if !has_status_function(&e) && !scope.status("success")? {
        return Ok(false);
    }
    Ok(truthy(
        &eval(&e, scope).map_err(|e| format!("`{expr_src}`: {e}"))?,
    ))
}
