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
//! `funcs/*.ts`. Its known-answer cases, `expressions/testdata/*.json`, run against this file
//! in `tests/expressions.rs` (this crate); a case that disagrees fails there, unless it is listed there
//! with the reason.
//!
//! Where the harness is stricter than GitHub, on purpose: a [`Scope`] is asked to vet every
//! property path rooted at a context (`steps.build.outputs.image`), and an object or array
//! written into text is an error (GitHub writes `Object`/`Array`, never what was meant).
//!
//! The evaluator knows nothing about jobs or steps: a [`Scope`] provides the contexts, the
//! status functions and `hashFiles`.

use std::collections::BTreeMap;
use std::rc::Rc;

use serde_json::{Map, Value};

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
// Values (data/*.ts)
// ---------------------------------------------------------------------------------------------

/// An expression value. Arrays and objects are shared, because GitHub compares them by
/// identity (`object1 == object1` is true, `fromJSON('{}') == fromJSON('{}')` false).
#[derive(Debug, Clone)]
pub enum Data {
    Null,
    Bool(bool),
    /// Any f64, NaN and the infinities included (JSON cannot hold those; [`Data::to_json`]).
    Num(f64),
    Str(String),
    /// `filtered` marks the result of a `*`, which later indexes flatten (`filtered_array.ts`).
    Arr {
        items: Rc<Vec<Data>>,
        filtered: bool,
    },
    /// Keys keep their order and case; lookups ignore case, and the first of two keys that
    /// differ only in case wins (`data/dictionary.ts`, `add`).
    Obj(Rc<Vec<(String, Data)>>),
}

impl Data {
    pub fn from_json(v: &Value) -> Data {
        match v {
            Value::Null => Data::Null,
            Value::Bool(b) => Data::Bool(*b),
            Value::Number(n) => Data::Num(n.as_f64().unwrap_or(f64::NAN)),
            Value::String(s) => Data::Str(s.clone()),
            Value::Array(items) => Data::array(items.iter().map(Data::from_json).collect()),
            Value::Object(map) => {
                let mut pairs: Vec<(String, Data)> = Vec::with_capacity(map.len());
                for (k, v) in map {
                    if !pairs.iter().any(|(seen, _)| seen.eq_ignore_ascii_case(k)) {
                        pairs.push((k.clone(), Data::from_json(v)));
                    }
                }
                Data::Obj(Rc::new(pairs))
            }
        }
    }

    /// Back to JSON for the harness. NaN and the infinities have no JSON form; they become
    /// null, as `JSON.stringify` writes them.
    pub fn to_json(&self) -> Value {
        match self {
            Data::Null => Value::Null,
            Data::Bool(b) => Value::Bool(*b),
            Data::Num(n) => json_number(*n),
            Data::Str(s) => Value::String(s.clone()),
            Data::Arr { items, .. } => Value::Array(items.iter().map(Data::to_json).collect()),
            Data::Obj(pairs) => Value::Object(
                pairs
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_json()))
                    .collect::<Map<_, _>>(),
            ),
        }
    }

    fn array(items: Vec<Data>) -> Data {
        Data::Arr {
            items: Rc::new(items),
            filtered: false,
        }
    }

    fn filtered(items: Vec<Data>) -> Data {
        Data::Arr {
            items: Rc::new(items),
            filtered: true,
        }
    }

    /// The upstream kind names (`kindStr` in `data/expressiondata.ts`).
    pub fn kind(&self) -> &'static str {
        match self {
            Data::Null => "Null",
            Data::Bool(_) => "Boolean",
            Data::Num(_) => "Number",
            Data::Str(_) => "String",
            Data::Arr { .. } => "Array",
            Data::Obj(_) => "Object",
        }
    }

    fn primitive(&self) -> bool {
        !matches!(self, Data::Arr { .. } | Data::Obj(_))
    }

    /// `coerceString()` of each kind.
    pub fn coerce_string(&self) -> String {
        match self {
            Data::Null => String::new(),
            Data::Bool(b) => b.to_string(),
            Data::Num(n) => number_coerce_string(*n),
            Data::Str(s) => s.clone(),
            Data::Arr { .. } => "Array".into(),
            Data::Obj(_) => "Object".into(),
        }
    }

    /// `number()` of each kind.
    fn number(&self) -> f64 {
        match self {
            Data::Null => 0.0,
            Data::Bool(b) => f64::from(u8::from(*b)),
            Data::Num(n) => *n,
            Data::Str(s) => js_number(s),
            Data::Arr { .. } | Data::Obj(_) => f64::NAN,
        }
    }

    /// `falsy()` negated (`result.ts`).
    pub fn truthy(&self) -> bool {
        match self {
            Data::Null => false,
            Data::Bool(b) => *b,
            Data::Num(n) => *n != 0.0 && !n.is_nan(),
            Data::Str(s) => !s.is_empty(),
            Data::Arr { .. } | Data::Obj(_) => true,
        }
    }

    fn get(&self, key: &str) -> Option<&Data> {
        match self {
            Data::Obj(pairs) => pairs
                .iter()
                .find(|(k, _)| k.to_lowercase() == key.to_lowercase())
                .map(|(_, v)| v),
            _ => None,
        }
    }
}

fn json_number(n: f64) -> Value {
    if !n.is_finite() {
        return Value::Null;
    }
    if n.fract() == 0.0 && n.abs() < 9.0e15 {
        // `-0` too: JSON has one zero.
        Value::from(n as i64)
    } else {
        serde_json::Number::from_f64(n)
            .map(Value::Number)
            .unwrap_or(Value::Null)
    }
}

/// JavaScript's `Number(string)` (ECMA-262 StringToNumber), which `data/string.ts` uses: the
/// string trimmed, empty is 0, `0x`/`0o`/`0b` integers without a sign, `Infinity` with an
/// optional sign, decimal literals with an optional sign and exponent; anything else is NaN.
pub fn js_number(text: &str) -> f64 {
    let t = text.trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
    if t.is_empty() {
        return 0.0;
    }
    let radix = |digits: &str, radix: u32| -> f64 {
        if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
            return f64::NAN;
        }
        digits.chars().fold(0.0, |n, c| {
            n * f64::from(radix) + f64::from(c.to_digit(radix).unwrap())
        })
    };
    let lower = t.to_ascii_lowercase();
    if let Some(hex) = lower.strip_prefix("0x") {
        return radix(hex, 16);
    }
    if let Some(oct) = lower.strip_prefix("0o") {
        return radix(oct, 8);
    }
    if let Some(bin) = lower.strip_prefix("0b") {
        return radix(bin, 2);
    }
    let (sign, body) = match t.as_bytes()[0] {
        b'-' => (-1.0, &t[1..]),
        b'+' => (1.0, &t[1..]),
        _ => (1.0, t),
    };
    if body == "Infinity" {
        return sign * f64::INFINITY;
    }
    // StrUnsignedDecimalLiteral: digits [. digits] [exponent], or . digits [exponent].
    let bytes = body.as_bytes();
    let mut i = 0;
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < bytes.len() && bytes[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - start
    };
    let int = digits(&mut i);
    let mut frac = 0;
    if i < bytes.len() && bytes[i] == b'.' {
        i += 1;
        frac = digits(&mut i);
    }
    if int + frac == 0 {
        return f64::NAN;
    }
    if i < bytes.len() && (bytes[i] == b'e' || bytes[i] == b'E') {
        i += 1;
        if i < bytes.len() && (bytes[i] == b'+' || bytes[i] == b'-') {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return f64::NAN;
        }
    }
    if i != bytes.len() {
        return f64::NAN;
    }
    // Rust's parser takes the same decimal grammar ("1.", ".5", "1e5"), correctly rounded.
    sign * body.parse::<f64>().unwrap_or(f64::NAN)
}

/// JavaScript's `Number.prototype.toString()` (ECMA-262 Number::toString): the shortest
/// digits that round-trip, in decimal notation from 1e-6 up to 1e21, else exponential.
pub fn js_number_to_string(n: f64) -> String {
    if n.is_nan() {
        return "NaN".into();
    }
    if n.is_infinite() {
        return if n > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if n == 0.0 {
        return "0".into();
    }
    let magnitude = n.abs();
    if (1e-6..1e21).contains(&magnitude) {
        // Rust's Display is the shortest round-trip form and never exponential.
        format!("{n}")
    } else {
        let s = format!("{n:e}");
        match s.split_once('e') {
            Some((mantissa, exp)) if !exp.starts_with('-') => format!("{mantissa}e+{exp}"),
            _ => s,
        }
    }
}

/// `NumberData.coerceString()`: at most 15 decimals (`+value.toFixed(15)`), so 0.1 + 0.2
/// prints as 0.3, then JavaScript's toString.
fn number_coerce_string(n: f64) -> String {
    if n == 0.0 {
        return "0".into();
    }
    if !n.is_finite() || n.abs() >= 1e21 {
        // toFixed falls back to toString there.
        return js_number_to_string(n);
    }
    let rounded: f64 = format!("{n:.15}").parse().unwrap_or(n);
    js_number_to_string(rounded)
}

/// `toUpperSpecial` (`result.ts`): upper case, except that the dotless `ı` stays as it is.
fn upper_special(s: &str) -> String {
    s.split('ı')
        .map(str::to_uppercase)
        .collect::<Vec<_>>()
        .join("ı")
}

// ---------------------------------------------------------------------------------------------
// Lexer (lexer.ts)
// ---------------------------------------------------------------------------------------------

/// `MAX_EXPRESSION_LENGTH` (errors.ts).
const MAX_EXPRESSION_LENGTH: usize = 21000;
/// `MAX_PARSER_DEPTH` (errors.ts).
const MAX_PARSER_DEPTH: usize = 50;

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    LParen,
    RParen,
    LBrack,
    RBrack,
    Comma,
    Dot,
    Bang,
    Cmp(CmpOp),
    And,
    Or,
    Star,
    Str(String),
    Num(f64),
    True,
    False,
    Null,
    Ident(String),
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

/// `isBoundary`: where a number or an identifier ends.
fn is_boundary(c: char) -> bool {
    matches!(
        c,
        '(' | '[' | ')' | ']' | ',' | '.' | '!' | '>' | '<' | '=' | '&' | '|'
    ) || c.is_whitespace()
}

/// `isLegalIdentifier`.
fn is_legal_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {
            chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        }
        _ => false,
    }
}

fn lex(src: &str) -> Result<Vec<Tok>, String> {
    if src.chars().count() > MAX_EXPRESSION_LENGTH {
        return Err(format!(
            "Exceeded max expression length {MAX_EXPRESSION_LENGTH}"
        ));
    }
    let chars: Vec<char> = src.chars().collect();
    let mut out: Vec<Tok> = Vec::new();
    let mut i = 0;
    let unexpected = |start: usize, end: usize| {
        let lexeme: String = chars[start..end].iter().collect();
        format!(
            "Unexpected symbol: '{lexeme}'. Located at position {} within expression: {src}",
            start + 1
        )
    };
    while i < chars.len() {
        let start = i;
        let c = chars[i];
        i += 1;
        let two = |second: char, i: &mut usize| {
            let hit = chars.get(*i) == Some(&second);
            if hit {
                *i += 1;
            }
            hit
        };
        let number = |i: &mut usize| -> Result<Tok, String> {
            while *i < chars.len() && (!is_boundary(chars[*i]) || chars[*i] == '.') {
                *i += 1;
            }
            let lexeme: String = chars[start..*i].iter().collect();
            let n = js_number(&lexeme);
            if n.is_nan() {
                return Err(unexpected(start, *i));
            }
            Ok(Tok::Num(n))
        };
        let identifier = |i: &mut usize, previous: Option<&Tok>| -> Result<Tok, String> {
            while *i < chars.len() && !is_boundary(chars[*i]) {
                *i += 1;
            }
            let lexeme: String = chars[start..*i].iter().collect();
            let keyword = if previous == Some(&Tok::Dot) {
                None
            } else {
                match lexeme.as_str() {
                    "true" => Some(Tok::True),
                    "false" => Some(Tok::False),
                    "null" => Some(Tok::Null),
                    "NaN" => Some(Tok::Num(f64::NAN)),
                    "Infinity" => Some(Tok::Num(f64::INFINITY)),
                    _ => None,
                }
            };
            if !is_legal_identifier(&lexeme) {
                return Err(unexpected(start, *i));
            }
            Ok(keyword.unwrap_or(Tok::Ident(lexeme)))
        };
        let tok = match c {
            '(' => Tok::LParen,
            ')' => Tok::RParen,
            '[' => Tok::LBrack,
            ']' => Tok::RBrack,
            ',' => Tok::Comma,
            '.' => match out.last() {
                Some(Tok::Ident(_) | Tok::RBrack | Tok::RParen | Tok::Star) => Tok::Dot,
                _ => number(&mut i)?,
            },
            '-' | '+' => number(&mut i)?,
            '!' if two('=', &mut i) => Tok::Cmp(CmpOp::Ne),
            '!' => Tok::Bang,
            '=' if two('=', &mut i) => Tok::Cmp(CmpOp::Eq),
            '<' if two('=', &mut i) => Tok::Cmp(CmpOp::Le),
            '<' => Tok::Cmp(CmpOp::Lt),
            '>' if two('=', &mut i) => Tok::Cmp(CmpOp::Ge),
            '>' => Tok::Cmp(CmpOp::Gt),
            '&' if two('&', &mut i) => Tok::And,
            '|' if two('|', &mut i) => Tok::Or,
            // A lone `=`, `&` or `|`: read to the next boundary and fail on it, as upstream.
            '=' | '&' | '|' => identifier(&mut i, out.last())?,
            '*' => Tok::Star,
            ' ' | '\r' | '\t' | '\n' => continue,
            '\'' => {
                let mut s = String::new();
                loop {
                    match chars.get(i) {
                        None => return Err(unexpected(start, chars.len())),
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
                Tok::Str(s)
            }
            c if c.is_ascii_digit() => number(&mut i)?,
            _ => identifier(&mut i, out.last())?,
        };
        out.push(tok);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Parser (parser.ts, funcs.ts)
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
pub enum Expr {
    Lit(Data),
    /// A context name, lower-cased (contexts are case-insensitive).
    Context(String),
    /// `base[index]` and `base.name` (a string literal index); `None` is `*`.
    Index(Box<Expr>, Option<Box<Expr>>),
    /// A function, lower-cased, and its arguments.
    Call(String, Vec<Expr>),
    Not(Box<Expr>),
    Cmp(CmpOp, Box<Expr>, Box<Expr>),
    And(Vec<Expr>),
    Or(Vec<Expr>),
    /// `( ... )`: only a group, a call or a context may be indexed.
    Group(Box<Expr>),
}

/// The functions an expression may call and their arity (`funcs/*.ts` for the built-in ones;
/// the status functions and `hashFiles` are the workflow parser's additions).
fn arity(name: &str) -> Option<(usize, usize)> {
    Some(match name {
        "contains" | "startswith" | "endswith" => (2, 2),
        "format" => (1, 255),
        "join" => (1, 2),
        "tojson" | "fromjson" => (1, 1),
        "case" => (3, usize::MAX),
        "success" | "failure" | "always" | "cancelled" => (0, 0),
        "hashfiles" => (1, 255),
        _ => return None,
    })
}

struct Parser<'a> {
    toks: Vec<Tok>,
    pos: usize,
    depth: usize,
    src: &'a str,
}

/// Parses one expression (the text between `${{` and `}}`). An empty one is `null`, as
/// upstream.
pub fn parse(src: &str) -> Result<Expr, String> {
    let mut p = Parser {
        toks: lex(src)?,
        pos: 0,
        depth: 0,
        src,
    };
    if p.toks.is_empty() {
        return Ok(Expr::Lit(Data::Null));
    }
    let e = p.expression()?;
    if p.pos != p.toks.len() {
        return Err(p.unexpected());
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
    fn unexpected(&self) -> String {
        match self.peek() {
            Some(t) => format!("Unexpected symbol: {t:?} in `{}`", self.src),
            None => format!("Unexpected end of expression in `{}`", self.src),
        }
    }
    fn expect(&mut self, t: &Tok) -> Result<(), String> {
        if self.eat(t) {
            Ok(())
        } else {
            Err(self.unexpected())
        }
    }
    fn deeper(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > MAX_PARSER_DEPTH {
            return Err(format!(
                "Exceeded max expression depth {MAX_PARSER_DEPTH} in `{}`",
                self.src
            ));
        }
        Ok(())
    }
    fn expression(&mut self) -> Result<Expr, String> {
        self.deeper()?;
        let e = self.or();
        self.depth -= 1;
        e
    }
    /// `a || b || c` as one node (the value of the first truthy operand, or of the last).
    fn or(&mut self) -> Result<Expr, String> {
        let first = self.and()?;
        if self.peek() != Some(&Tok::Or) {
            return Ok(first);
        }
        self.deeper()?;
        let mut args = vec![first];
        while self.eat(&Tok::Or) {
            args.push(self.and()?);
        }
        self.depth -= 1;
        Ok(Expr::Or(args))
    }
    fn and(&mut self) -> Result<Expr, String> {
        let first = self.comparisons(&[CmpOp::Eq, CmpOp::Ne], Self::ordering)?;
        if self.peek() != Some(&Tok::And) {
            return Ok(first);
        }
        self.deeper()?;
        let mut args = vec![first];
        while self.eat(&Tok::And) {
            args.push(self.comparisons(&[CmpOp::Eq, CmpOp::Ne], Self::ordering)?);
        }
        self.depth -= 1;
        Ok(Expr::And(args))
    }
    fn ordering(&mut self) -> Result<Expr, String> {
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
        if self.eat(&Tok::Bang) {
            self.deeper()?;
            let inner = self.unary()?;
            self.depth -= 1;
            return Ok(Expr::Not(Box::new(inner)));
        }
        self.index()
    }
    fn index(&mut self) -> Result<Expr, String> {
        let mut e = self.call()?;
        if !matches!(e, Expr::Group(_) | Expr::Call(..) | Expr::Context(_)) {
            return Ok(e);
        }
        // Each `[...]` and `.name` is one level deeper until the chain ends. An error ends
        // the whole parse, so only the way out without one has to give the levels back.
        let mut deeper = 0;
        loop {
            if self.eat(&Tok::LBrack) {
                let index = if self.eat(&Tok::Star) {
                    None
                } else {
                    Some(Box::new(self.expression()?))
                };
                self.expect(&Tok::RBrack)?;
                self.deeper()?;
                deeper += 1;
                e = Expr::Index(Box::new(e), index);
            } else if self.eat(&Tok::Dot) {
                self.deeper()?;
                deeper += 1;
                let index = match self.peek().cloned() {
                    Some(Tok::Ident(name)) => Some(Box::new(Expr::Lit(Data::Str(name)))),
                    Some(Tok::Star) => None,
                    _ => return Err(self.unexpected()),
                };
                self.pos += 1;
                e = Expr::Index(Box::new(e), index);
            } else {
                self.depth -= deeper;
                return Ok(e);
            }
        }
    }
    fn call(&mut self) -> Result<Expr, String> {
        let Some(Tok::Ident(name)) = self.peek().cloned() else {
            return self.primary();
        };
        self.pos += 1;
        if !self.eat(&Tok::LParen) {
            return Ok(Expr::Context(name.to_lowercase()));
        }
        let mut args = Vec::new();
        while !self.eat(&Tok::RParen) {
            args.push(self.expression()?);
            if self.peek() != Some(&Tok::RParen) {
                self.expect(&Tok::Comma)?;
            }
        }
        // validateFunction: known, with its arity, and `case` with an odd count.
        let lower = name.to_lowercase();
        let (min, max) = arity(&lower)
            .ok_or_else(|| format!("Unrecognized function: '{name}' in `{}`", self.src))?;
        if args.len() < min {
            return Err(format!("Too few parameters supplied: '{name}'"));
        }
        if args.len() > max {
            return Err(format!("Too many parameters supplied: '{name}'"));
        }
        if lower == "case" && args.len() % 2 == 0 {
            return Err(format!(
                "Expected an odd number of parameters: '{name}' in `{}`",
                self.src
            ));
        }
        Ok(Expr::Call(lower, args))
    }
    fn primary(&mut self) -> Result<Expr, String> {
        let Some(tok) = self.peek().cloned() else {
            return Err(self.unexpected());
        };
        self.pos += 1;
        Ok(match tok {
            Tok::False => Expr::Lit(Data::Bool(false)),
            Tok::True => Expr::Lit(Data::Bool(true)),
            Tok::Null => Expr::Lit(Data::Null),
            Tok::Num(n) => Expr::Lit(Data::Num(n)),
            Tok::Str(s) => Expr::Lit(Data::Str(s)),
            Tok::LParen => {
                let e = self.expression()?;
                self.expect(&Tok::RParen)?;
                Expr::Group(Box::new(e))
            }
            _ => {
                self.pos -= 1;
                return Err(self.unexpected());
            }
        })
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
        Expr::Not(b) | Expr::Group(b) => has_status_function(b),
        Expr::Index(a, b) => {
            has_status_function(a) || b.as_deref().is_some_and(has_status_function)
        }
        Expr::Cmp(_, a, b) => has_status_function(a) || has_status_function(b),
        Expr::And(args) | Expr::Or(args) => args.iter().any(has_status_function),
        Expr::Lit(_) | Expr::Context(_) => false,
    }
}

fn contexts_named(e: &Expr, out: &mut Vec<String>) {
    match e {
        Expr::Context(name) => {
            if !out.contains(name) {
                out.push(name.clone());
            }
        }
        Expr::Call(_, args) | Expr::And(args) | Expr::Or(args) => {
            args.iter().for_each(|a| contexts_named(a, out))
        }
        Expr::Not(b) | Expr::Group(b) => contexts_named(b, out),
        Expr::Index(a, b) => {
            contexts_named(a, out);
            if let Some(b) = b {
                contexts_named(b, out);
            }
        }
        Expr::Cmp(_, a, b) => {
            contexts_named(a, out);
            contexts_named(b, out);
        }
        Expr::Lit(_) => {}
    }
}

// ---------------------------------------------------------------------------------------------
// Coercion and comparison (result.ts)
// ---------------------------------------------------------------------------------------------

pub fn truthy(v: &Value) -> bool {
    Data::from_json(v).truthy()
}

/// The string form GitHub gives a value in interpolation and `format`.
pub fn to_string(v: &Value) -> String {
    Data::from_json(v).coerce_string()
}

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
