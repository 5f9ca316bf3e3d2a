//! GitHub Actions' `${{ }}` expression language: a lexer, a parser and an evaluator with
//! GitHub's value-returning `&&`/`||`, loose equality (case-insensitive strings, numeric
//! coercion across types) and its functions.
//!
//! The evaluator knows nothing about jobs or steps: a [`Scope`] provides the contexts, the
//! status functions and `hashFiles`, and is asked to vet every property path rooted at a context
//! (`steps.build.outputs.image`), which is where the harness is stricter than GitHub.

use serde_json::{Map, Value};

/// What an expression can see. Errors are plain sentences; the caller adds where it happened.
pub trait Scope {
    /// A top-level context (`github`, `steps`, ...), or an error when it is not available here.
    fn context(&self, name: &str) -> Result<Value, String>;
    /// Vets a property path rooted at a context, e.g. `["steps", "build", "outputs", "image"]`,
    /// given the value found there (None when absent).
    fn check_path(&self, path: &[String], found: Option<&Value>) -> Result<(), String>;
    /// `success()`, `failure()`, `always()`, `cancelled()`.
    fn status(&self, function: &str) -> Result<bool, String>;
    /// `hashFiles(patterns...)`.
    fn hash_files(&self, patterns: &[String]) -> Result<String, String>;
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Num(f64),
    Str(String),
    Dot,
    LBrack,
    RBrack,
    LParen,
    RParen,
    Comma,
    Not,
    Cmp(CmpOp),
    And,
    Or,
}

#[derive(Debug, Clone)]
pub enum Expr {
    Lit(Value),
    Context(String),
    Prop(Box<Expr>, String),
    Index(Box<Expr>, Box<Expr>),
    Call(String, Vec<Expr>),
    Not(Box<Expr>),
    Cmp(CmpOp, Box<Expr>, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

fn lex(src: &str) -> Result<Vec<Tok>, String> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        match c {
            c if c.is_whitespace() => i += 1,
            '.' if !next.is_some_and(|n| n.is_ascii_digit()) => {
                out.push(Tok::Dot);
                i += 1;
            }
            '[' => (out.push(Tok::LBrack), i += 1).1,
            ']' => (out.push(Tok::RBrack), i += 1).1,
            '(' => (out.push(Tok::LParen), i += 1).1,
            ')' => (out.push(Tok::RParen), i += 1).1,
            ',' => (out.push(Tok::Comma), i += 1).1,
            '!' if next == Some('=') => (out.push(Tok::Cmp(CmpOp::Ne)), i += 2).1,
            '!' => (out.push(Tok::Not), i += 1).1,
            '=' if next == Some('=') => (out.push(Tok::Cmp(CmpOp::Eq)), i += 2).1,
            '<' if next == Some('=') => (out.push(Tok::Cmp(CmpOp::Le)), i += 2).1,
            '<' => (out.push(Tok::Cmp(CmpOp::Lt)), i += 1).1,
            '>' if next == Some('=') => (out.push(Tok::Cmp(CmpOp::Ge)), i += 2).1,
            '>' => (out.push(Tok::Cmp(CmpOp::Gt)), i += 1).1,
            '&' if next == Some('&') => (out.push(Tok::And), i += 2).1,
            '|' if next == Some('|') => (out.push(Tok::Or), i += 2).1,
            '\'' => {
                let mut s = String::new();
                i += 1;
                loop {
                    match chars.get(i) {
                        None => return Err(format!("unterminated string literal in `{src}`")),
                        Some('\'') if chars.get(i + 1) == Some(&'\'') => {
                            s.push('\'');
                            i += 2;
                        }
                        Some('\'') => {
                            i += 1;
                            break;
                        }
                        Some(&ch) => {
                            s.push(ch);
                            i += 1;
                        }
                    }
                }
                out.push(Tok::Str(s));
            }
            c if c.is_ascii_digit()
                || c == '.'
                || (c == '-' && next.is_some_and(|n| n.is_ascii_digit() || n == '.')) =>
            {
                let start = i;
                i += 1;
                while i < chars.len()
                    && (chars[i].is_ascii_alphanumeric()
                        || chars[i] == '.'
                        || ((chars[i] == '-' || chars[i] == '+')
                            && matches!(chars[i - 1], 'e' | 'E')))
                {
                    i += 1;
                }
                let text: String = chars[start..i].iter().collect();
                let n = parse_number(&text)
                    .ok_or_else(|| format!("invalid number `{text}` in `{src}`"))?;
                out.push(Tok::Num(n));
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let start = i;
                while i < chars.len()
                    && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == '-')
                {
                    i += 1;
                }
                out.push(Tok::Ident(chars[start..i].iter().collect()));
            }
            other => return Err(format!("unexpected character `{other}` in `{src}`")),
        }
    }
    Ok(out)
}

fn parse_number(text: &str) -> Option<f64> {
    let (neg, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let n = if let Some(hex) = body.strip_prefix("0x") {
        i64::from_str_radix(hex, 16).ok()? as f64
    } else if let Some(oct) = body.strip_prefix("0o") {
        i64::from_str_radix(oct, 8).ok()? as f64
    } else {
        body.parse::<f64>().ok()?
    };
    Some(if neg { -n } else { n })
}

struct Parser<'a> {
    toks: Vec<Tok>,
    pos: usize,
    src: &'a str,
}

/// Parses one expression (the text between `${{` and `}}`).
pub fn parse(src: &str) -> Result<Expr, String> {
    let mut p = Parser {
        toks: lex(src)?,
        pos: 0,
        src,
    };
    if p.toks.is_empty() {
        return Err("empty expression".into());
    }
    let e = p.or()?;
    if p.pos != p.toks.len() {
        return Err(format!("unexpected `{:?}` in `{src}`", p.toks[p.pos]));
    }
    Ok(e)
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }
    fn eat(&mut self, t: &Tok) -> bool {
        if self.peek() == Some(t) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, t: &Tok) -> Result<(), String> {
        if self.eat(t) {
            Ok(())
        } else {
            Err(format!(
                "expected {t:?} at token {} of `{}`",
                self.pos + 1,
                self.src
            ))
        }
    }
    fn or(&mut self) -> Result<Expr, String> {
        let mut l = self.and()?;
        while self.eat(&Tok::Or) {
            l = Expr::Or(Box::new(l), Box::new(self.and()?));
        }
        Ok(l)
    }
    fn and(&mut self) -> Result<Expr, String> {
        let mut l = self.eq()?;
        while self.eat(&Tok::And) {
            l = Expr::And(Box::new(l), Box::new(self.eq()?));
        }
        Ok(l)
    }
    fn eq(&mut self) -> Result<Expr, String> {
        self.comparisons(&[CmpOp::Eq, CmpOp::Ne], Self::cmp)
    }
    fn cmp(&mut self) -> Result<Expr, String> {
        self.comparisons(&[CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge], Self::unary)
    }
    /// One precedence level of left-associative comparisons: `operand (op operand)*` for the
    /// operators in `ops`.
    fn comparisons(
        &mut self,
        ops: &[CmpOp],
        operand: fn(&mut Self) -> Result<Expr, String>,
    ) -> Result<Expr, String> {
        let mut l = operand(self)?;
        loop {
            let op = match self.peek() {
                Some(Tok::Cmp(op)) if ops.contains(op) => *op,
                _ => return Ok(l),
            };
            self.pos += 1;
            l = Expr::Cmp(op, Box::new(l), Box::new(operand(self)?));
        }
    }
    fn unary(&mut self) -> Result<Expr, String> {
        if self.eat(&Tok::Not) {
            return Ok(Expr::Not(Box::new(self.unary()?)));
        }
        self.postfix()
    }
    fn postfix(&mut self) -> Result<Expr, String> {
        let mut e = self.primary()?;
        loop {
            if self.eat(&Tok::Dot) {
                match self.toks.get(self.pos).cloned() {
                    Some(Tok::Ident(name)) => {
                        self.pos += 1;
                        e = Expr::Prop(Box::new(e), name);
                    }
                    _ => return Err(format!("expected a property name after `.` in `{}` (`.*` filters are not supported)", self.src)),
                }
            } else if self.eat(&Tok::LBrack) {
                let idx = self.or()?;
                self.expect(&Tok::RBrack)?;
                e = Expr::Index(Box::new(e), Box::new(idx));
            } else {
                return Ok(e);
            }
        }
    }
    fn primary(&mut self) -> Result<Expr, String> {
        let tok = self
            .toks
            .get(self.pos)
            .cloned()
            .ok_or_else(|| format!("unexpected end of `{}`", self.src))?;
        self.pos += 1;
        match tok {
            Tok::Num(n) => Ok(Expr::Lit(number(n))),
            Tok::Str(s) => Ok(Expr::Lit(Value::String(s))),
            Tok::LParen => {
                let e = self.or()?;
                self.expect(&Tok::RParen)?;
                Ok(e)
            }
            Tok::Ident(name) => match name.as_str() {
                "true" => Ok(Expr::Lit(Value::Bool(true))),
                "false" => Ok(Expr::Lit(Value::Bool(false))),
                "null" => Ok(Expr::Lit(Value::Null)),
                _ if self.eat(&Tok::LParen) => {
                    let mut args = Vec::new();
                    if !self.eat(&Tok::RParen) {
                        loop {
                            args.push(self.or()?);
                            if self.eat(&Tok::RParen) {
                                break;
                            }
                            self.expect(&Tok::Comma)?;
                        }
                    }
                    Ok(Expr::Call(name.to_ascii_lowercase(), args))
                }
                _ => Ok(Expr::Context(name.to_ascii_lowercase())),
            },
            other => Err(format!("unexpected `{other:?}` in `{}`", self.src)),
        }
    }
}

fn number(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() < 9.0e15 {
        Value::from(n as i64)
    } else {
        serde_json::Number::from_f64(n)
            .map(Value::Number)
            .unwrap_or(Value::Null)
    }
}

/// Whether the expression calls a status function (a condition without one is implicitly
/// `success() && (...)`).
pub fn has_status_function(e: &Expr) -> bool {
    match e {
        Expr::Call(name, args) => {
            matches!(
                name.as_str(),
                "success" | "failure" | "always" | "cancelled"
            ) || args.iter().any(has_status_function)
        }
        Expr::Prop(b, _) | Expr::Not(b) => has_status_function(b),
        Expr::Index(a, b) | Expr::Cmp(_, a, b) | Expr::And(a, b) | Expr::Or(a, b) => {
            has_status_function(a) || has_status_function(b)
        }
        Expr::Lit(_) | Expr::Context(_) => false,
    }
}

// ---------------------------------------------------------------------------------------------
// Coercion rules (docs.github.com: "Evaluate expressions in workflows and actions")
// ---------------------------------------------------------------------------------------------

pub fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0 && !f.is_nan()),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

fn to_number(v: &Value) -> f64 {
    match v {
        Value::Null => 0.0,
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::Number(n) => n.as_f64().unwrap_or(f64::NAN),
        Value::String(s) => {
            let t = s.trim();
            if t.is_empty() {
                0.0
            } else {
                parse_number(t).unwrap_or(f64::NAN)
            }
        }
        Value::Array(_) | Value::Object(_) => f64::NAN,
    }
}

/// The string form GitHub gives a value in interpolation and `format`.
pub fn to_string(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => format!("{}", f as i64),
            Some(f) => f.to_string(),
            None => n.to_string(),
        },
        Value::String(s) => s.clone(),
        Value::Array(_) => "Array".into(),
        Value::Object(_) => "Object".into(),
    }
}

fn kind(v: &Value) -> u8 {
    match v {
        Value::Null => 0,
        Value::Bool(_) => 1,
        Value::Number(_) => 2,
        Value::String(_) => 3,
        Value::Array(_) => 4,
        Value::Object(_) => 5,
    }
}

pub fn loose_eq(a: &Value, b: &Value) -> bool {
    if kind(a) == kind(b) {
        return match (a, b) {
            (Value::Null, Value::Null) => true,
            (Value::Bool(x), Value::Bool(y)) => x == y,
            (Value::Number(_), Value::Number(_)) => to_number(a) == to_number(b),
            (Value::String(x), Value::String(y)) => x.to_lowercase() == y.to_lowercase(),
            // Objects and arrays are equal only when they are the same instance.
            _ => false,
        };
    }
    to_number(a) == to_number(b)
}

fn compare(op: CmpOp, a: &Value, b: &Value) -> bool {
    use std::cmp::Ordering;
    let ord = if let (Value::String(x), Value::String(y)) = (a, b) {
        Some(x.to_lowercase().cmp(&y.to_lowercase()))
    } else {
        to_number(a).partial_cmp(&to_number(b))
    };
    match (op, ord) {
        (CmpOp::Eq, _) => loose_eq(a, b),
        (CmpOp::Ne, _) => !loose_eq(a, b),
        (_, None) => false,
        (CmpOp::Lt, Some(o)) => o == Ordering::Less,
        (CmpOp::Le, Some(o)) => o != Ordering::Greater,
        (CmpOp::Gt, Some(o)) => o == Ordering::Greater,
        (CmpOp::Ge, Some(o)) => o != Ordering::Less,
    }
}

/// Property lookup: exact name first, then case-insensitive (GitHub's contexts are).
fn lookup<'v>(map: &'v Map<String, Value>, key: &str) -> Option<&'v Value> {
    map.get(key).or_else(|| {
        map.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v)
    })
}

// ---------------------------------------------------------------------------------------------
// Evaluation
// ---------------------------------------------------------------------------------------------

pub fn eval(e: &Expr, scope: &dyn Scope) -> Result<Value, String> {
    eval_path(e, scope).map(|(v, _)| v)
}

/// Evaluates, keeping the context path of property chains so the scope can vet them.
fn eval_path(e: &Expr, scope: &dyn Scope) -> Result<(Value, Option<Vec<String>>), String> {
    Ok(match e {
        Expr::Lit(v) => (v.clone(), None),
        Expr::Context(name) => (scope.context(name)?, Some(vec![name.clone()])),
        Expr::Prop(base, key) => member(scope, eval_path(base, scope)?, key)?,
        Expr::Index(base, idx) => {
            let base = eval_path(base, scope)?;
            let idx = eval(idx, scope)?;
            match (&base.0, &idx) {
                (Value::Array(items), Value::Number(_)) => {
                    let i = to_number(&idx);
                    let v = if i >= 0.0 && i.fract() == 0.0 {
                        items.get(i as usize).cloned()
                    } else {
                        None
                    };
                    (v.unwrap_or(Value::Null), None)
                }
                _ => member(scope, base, &to_string(&idx))?,
            }
        }
        Expr::Not(inner) => (Value::Bool(!truthy(&eval(inner, scope)?)), None),
        Expr::And(a, b) => {
            let l = eval(a, scope)?;
            (if truthy(&l) { eval(b, scope)? } else { l }, None)
        }
        Expr::Or(a, b) => {
            let l = eval(a, scope)?;
            (if truthy(&l) { l } else { eval(b, scope)? }, None)
        }
        Expr::Cmp(op, a, b) => (
            Value::Bool(compare(*op, &eval(a, scope)?, &eval(b, scope)?)),
            None,
        ),
        Expr::Call(name, args) => (call(name, args, scope)?, None),
    })
}

fn member(
    scope: &dyn Scope,
    (base, path): (Value, Option<Vec<String>>),
    key: &str,
) -> Result<(Value, Option<Vec<String>>), String> {
    let found = match &base {
        Value::Object(map) => lookup(map, key).cloned(),
        _ => None,
    };
    let path = match path {
        Some(mut p) => {
            p.push(key.to_owned());
            scope.check_path(&p, found.as_ref())?;
            Some(p)
        }
        None => None,
    };
    Ok((found.unwrap_or(Value::Null), path))
}

fn arity(name: &str, args: &[Expr], min: usize, max: usize) -> Result<(), String> {
    if args.len() < min || args.len() > max {
        return Err(format!(
            "{name}() takes {min}..={max} arguments, got {}",
            args.len()
        ));
    }
    Ok(())
}

fn call(name: &str, args: &[Expr], scope: &dyn Scope) -> Result<Value, String> {
    let vals = |scope: &dyn Scope| {
        args.iter()
            .map(|a| eval(a, scope))
            .collect::<Result<Vec<_>, _>>()
    };
    match name {
        "success" | "failure" | "always" | "cancelled" => {
            arity(name, args, 0, 0)?;
            Ok(Value::Bool(scope.status(name)?))
        }
        "contains" => {
            arity(name, args, 2, 2)?;
            let v = vals(scope)?;
            Ok(Value::Bool(match &v[0] {
                Value::Array(items) => items.iter().any(|i| loose_eq(i, &v[1])),
                other => to_string(other)
                    .to_lowercase()
                    .contains(&to_string(&v[1]).to_lowercase()),
            }))
        }
        "startswith" | "endswith" => {
            arity(name, args, 2, 2)?;
            let v = vals(scope)?;
            let (s, affix) = (
                to_string(&v[0]).to_lowercase(),
                to_string(&v[1]).to_lowercase(),
            );
            Ok(Value::Bool(if name == "startswith" {
                s.starts_with(&affix)
            } else {
                s.ends_with(&affix)
            }))
        }
        "format" => {
            arity(name, args, 1, usize::MAX)?;
            let v = vals(scope)?;
            format(&to_string(&v[0]), &v[1..]).map(Value::String)
        }
        "join" => {
            arity(name, args, 1, 2)?;
            let v = vals(scope)?;
            let sep = v.get(1).map(to_string).unwrap_or_else(|| ",".into());
            Ok(Value::String(match &v[0] {
                Value::Array(items) => items.iter().map(to_string).collect::<Vec<_>>().join(&sep),
                other => to_string(other),
            }))
        }
        "tojson" => {
            arity(name, args, 1, 1)?;
            let v = vals(scope)?;
            Ok(Value::String(
                serde_json::to_string_pretty(&v[0]).expect("JSON values serialise"),
            ))
        }
        "fromjson" => {
            arity(name, args, 1, 1)?;
            let text = to_string(&vals(scope)?[0]);
            serde_json::from_str(&text).map_err(|e| format!("fromJSON: `{text}` is not JSON: {e}"))
        }
        "hashfiles" => {
            arity(name, args, 1, usize::MAX)?;
            let patterns: Vec<String> = vals(scope)?.iter().map(to_string).collect();
            scope.hash_files(&patterns).map(Value::String)
        }
        other => Err(format!("unknown function `{other}()`")),
    }
}

fn format(fmt: &str, args: &[Value]) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = fmt.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                out.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                out.push('}');
            }
            '{' => {
                let mut digits = String::new();
                for d in chars.by_ref() {
                    if d == '}' {
                        break;
                    }
                    digits.push(d);
                }
                let i: usize = digits.parse().map_err(|_| {
                    format!("format: invalid placeholder `{{{digits}}}` in `{fmt}`")
                })?;
                let arg = args
                    .get(i)
                    .ok_or_else(|| format!("format: `{fmt}` has no argument {i}"))?;
                out.push_str(&to_string(arg));
            }
            '}' => return Err(format!("format: unbalanced `}}` in `{fmt}`")),
            other => out.push(other),
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
