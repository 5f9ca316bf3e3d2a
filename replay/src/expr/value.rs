//! Expression values (`data/*.ts`): the value type, JavaScript's number conversions, and the
//! string and truthiness coercions the harness uses.

use std::rc::Rc;

use serde_json::{Map, Value};

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

    pub(super) fn filtered(items: Vec<Data>) -> Data {
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

    pub(super) fn primitive(&self) -> bool {
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
    pub(super) fn number(&self) -> f64 {
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

    pub(super) fn get(&self, key: &str) -> Option<&Data> {
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
pub(super) fn upper_special(s: &str) -> String {
    s.split('ı')
        .map(str::to_uppercase)
        .collect::<Vec<_>>()
        .join("ı")
}

pub fn truthy(v: &Value) -> bool {
    Data::from_json(v).truthy()
}

/// The string form GitHub gives a value in interpolation and `format`.
pub fn to_string(v: &Value) -> String {
    Data::from_json(v).coerce_string()
}
