//! Request body decoding that also reports duplicate object keys: the strict-decoding half of
//! server-side field validation (KEP-2885), as upstream's sigs.k8s.io/json `UnmarshalStrict`
//! reports them (`duplicate field "spec.a"`). It sits at the very start of the write path: the
//! gateway decodes create/update bodies with it (and scans merge/JSON patch documents with it
//! under fieldValidation Warn/Strict, the patch itself being applied by its own decode), and the
//! validation service decodes the objects it admits with it.
//!
//! One bounded pass: it is the JSON decode itself (serde_json's parser with a seed that keeps
//! the current path), so finding duplicates costs no second parse. The last occurrence of a
//! duplicated key wins, as with Go's `encoding/json` (and serde_json's `Value`). Integers are
//! kept exactly (i64/u64, as serde_json's own `Value`), never through f64. Nesting is bounded
//! by serde_json's recursion limit (128).

use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;

/// Decodes `bytes`, returning the value and the dotted paths of duplicated keys.
pub fn decode_with_duplicates(bytes: &[u8]) -> Result<(Value, Vec<String>), serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let mut path = String::new();
    let mut dups = Vec::new();
    let v = Seed {
        path: &mut path,
        dups: &mut dups,
    }
    .deserialize(&mut de)?;
    de.end()?;
    Ok((v, dups))
}

struct Seed<'a> {
    path: &'a mut String,
    dups: &'a mut Vec<String>,
}

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_> {
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
        let mut out = Vec::new();
        let base = self.path.len();
        loop {
            push_index(self.path, out.len());
            let next = seq.next_element_seed(Seed {
                path: &mut *self.path,
                dups: &mut *self.dups,
            })?;
            self.path.truncate(base);
            match next {
                Some(v) => out.push(v),
                None => break,
            }
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        let base = self.path.len();
        while let Some(k) = map.next_key::<String>()? {
            if !self.path.is_empty() {
                self.path.push('.');
            }
            self.path.push_str(&k);
            let v = map.next_value_seed(Seed {
                path: &mut *self.path,
                dups: &mut *self.dups,
            })?;
            if out.insert(k, v).is_some() {
                self.dups.push(self.path.clone());
            }
            self.path.truncate(base);
        }
        Ok(Value::Object(out))
    }
}

fn push_index(s: &mut String, i: usize) {
    use std::fmt::Write;
    let _ = write!(s, "[{i}]");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_duplicates() {
        let (v, d) =
            decode_with_duplicates(br#"{"spec":{"a":1,"l":[{"x":1,"x":2}],"a":3},"k":true}"#)
                .unwrap();
        assert_eq!(v, json!({"spec": {"a": 3, "l": [{"x": 2}]}, "k": true}));
        assert_eq!(d, vec!["spec.l[0].x", "spec.a"]);
        assert!(decode_with_duplicates(b"{").is_err());
        let deep = "[".repeat(1000) + &"]".repeat(1000);
        assert!(decode_with_duplicates(deep.as_bytes()).is_err());
    }

    #[test]
    fn integers_are_exact() {
        for text in [
            "9007199254740993",
            "9223372036854775807",
            "-9223372036854775808",
            "18446744073709551615",
            "[9007199254740993,{\"a\":-9007199254740993}]",
            "0.1",
            "0.5",
        ] {
            let (v, d) = decode_with_duplicates(text.as_bytes()).unwrap();
            assert!(d.is_empty());
            assert_eq!(serde_json::to_string(&v).unwrap(), text);
        }
    }
}
