//! The lexer (`lexer.ts`) and the parser (`parser.ts`, `funcs.ts`) of the expression language.

use super::value::{js_number, Data};

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

pub(super) fn contexts_named(e: &Expr, out: &mut Vec<String>) {
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
