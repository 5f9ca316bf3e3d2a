//! JSON parsing that refuses duplicate object keys.
//!
//! serde_json keeps the last of two equal keys. For a receipt that means one document can be
//! read two ways: a reviewer (or another JSON tool) may see the first `digest`, this tool the
//! second. [`parse`] reads a document into a `serde_json::Value` through a visitor that fails
//! on the second occurrence of a key, naming the path of the key (`platforms[0].digest`).

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Parses `bytes` as one JSON document; a repeated key in any object is an error whose message
/// names the key's path in backticks: ``duplicate key `platforms[0].digest` ``.
pub fn parse(bytes: &[u8]) -> serde_json::Result<Value> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = ValueAt {
        path: String::new(),
    }
    .deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

/// Deserialises a value found at `path` (for error messages).
struct ValueAt {
    path: String,
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

impl<'de> DeserializeSeed<'de> for ValueAt {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueAt {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(ValueAt {
            path: format!("{}[{}]", self.path, items.len()),
        })? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = child(&self.path, &key);
            if object.contains_key(&key) {
                return Err(de::Error::custom(format!("duplicate key `{path}`")));
            }
            let value = map.next_value_seed(ValueAt { path })?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_parse_like_serde_json() {
        let text =
            br#"{"a": [1, -2, 2.5, "x", null, true, {"b": {}}], "c": {"d": 18446744073709551615}}"#;
        assert_eq!(
            parse(text).unwrap(),
            serde_json::from_slice::<Value>(text).unwrap()
        );
        assert!(parse(b"{\"a\": 1} x").is_err());
        assert!(parse(b"{\"a\": ").is_err());
    }

    #[test]
    fn duplicate_keys_are_named_by_path() {
        let err = parse(br#"{"a": 1, "a": 2}"#).unwrap_err().to_string();
        assert!(err.contains("duplicate key `a`"), "{err}");
        let err = parse(br#"{"p": [{"d": 1}, {"d": 1, "x": 0, "d": 2}]}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("duplicate key `p[1].d`"), "{err}");
        // Equal keys in different objects are fine.
        assert!(parse(br#"{"a": {"k": 1}, "b": {"k": 1}}"#).is_ok());
    }
}
