//! Structured inputs for the validation pipeline target: a generated `openAPIV3Schema`
//! (the keywords services/validation compiles, with the Kubernetes extensions) and a
//! generated object whose keys come from the same small pool, so that the object actually
//! meets the schema's properties, defaults, list types and value validations.

use arbitrary::{Result, Unstructured};
use serde_json::{Map, Value, json};

const KEYS: &[&str] = &[
    "a",
    "b",
    "c",
    "name",
    "key",
    "spec",
    "status",
    "metadata",
    "kind",
    "apiVersion",
    "x",
    "",
];
const PATTERNS: &[&str] = &[
    "^a+$",
    "[0-9]",
    "^(a|b)*c$",
    "\\d{2,3}",
    ".*",
    "^$",
    "(?i)x",
];
const FORMATS: &[&str] = &[
    "int32",
    "int64",
    "date",
    "date-time",
    "byte",
    "uuid",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "uri",
    "duration",
    "password",
    "bsonobjectid",
    "mac",
    "isbn",
    "creditcard",
    "",
];
const TYPES: &[&str] = &["object", "array", "string", "integer", "number", "boolean"];
const MAX_DEPTH: u32 = 5;

/// A whole CR schema: an object at the root.
pub fn schema(u: &mut Unstructured<'_>) -> Result<Value> {
    let mut root = node(u, 0, Some("object"))?;
    // The root must be an object with properties for metadata-free objects to be admitted.
    if let Some(m) = root.as_object_mut() {
        m.insert("type".into(), json!("object"));
    }
    Ok(root)
}

fn key(u: &mut Unstructured<'_>) -> Result<String> {
    Ok(u.choose(KEYS)?.to_string())
}

fn node(u: &mut Unstructured<'_>, depth: u32, ty: Option<&str>) -> Result<Value> {
    let mut m = Map::new();
    let ty = match ty {
        Some(t) => t.to_string(),
        None if depth >= MAX_DEPTH => u.choose(&TYPES[2..])?.to_string(),
        None => u.choose(TYPES)?.to_string(),
    };
    // A few schemas without type: the compiler must reject or handle them.
    if u.ratio(1, 30)? {
        if u.arbitrary()? {
            m.insert("x-kubernetes-int-or-string".into(), json!(true));
        } else {
            m.insert("x-kubernetes-preserve-unknown-fields".into(), json!(true));
        }
    } else {
        m.insert("type".into(), json!(ty));
    }
    if u.ratio(1, 6)? {
        m.insert("nullable".into(), json!(true));
    }
    match ty.as_str() {
        "object" if depth < MAX_DEPTH => {
            let n = u.int_in_range(0..=4)?;
            let mut props = Map::new();
            for _ in 0..n {
                props.insert(key(u)?, node(u, depth + 1, None)?);
            }
            let has_props = !props.is_empty();
            if has_props {
                m.insert("properties".into(), Value::Object(props));
            }
            if !has_props && u.ratio(1, 3)? {
                m.insert(
                    "additionalProperties".into(),
                    if u.arbitrary()? {
                        json!(true)
                    } else {
                        node(u, depth + 1, None)?
                    },
                );
            }
            if u.ratio(1, 4)? {
                m.insert("x-kubernetes-preserve-unknown-fields".into(), json!(true));
            }
            if u.ratio(1, 8)? {
                m.insert("x-kubernetes-embedded-resource".into(), json!(true));
                m.insert("x-kubernetes-preserve-unknown-fields".into(), json!(true));
            }
            if u.ratio(1, 4)? {
                m.insert("required".into(), json!([key(u)?, key(u)?]));
            }
            if u.ratio(1, 6)? {
                m.insert("minProperties".into(), json!(u.int_in_range(0..=3)?));
                m.insert("maxProperties".into(), json!(u.int_in_range(0..=3)?));
            }
        }
        "array" if depth < MAX_DEPTH => {
            let items = node(u, depth + 1, None)?;
            let item_is_object = items.get("type") == Some(&json!("object"));
            m.insert("items".into(), items);
            match u.int_in_range(0..=3)? {
                1 => {
                    m.insert("x-kubernetes-list-type".into(), json!("set"));
                }
                2 if item_is_object => {
                    m.insert("x-kubernetes-list-type".into(), json!("map"));
                    m.insert("x-kubernetes-list-map-keys".into(), json!([key(u)?]));
                }
                3 => {
                    m.insert("x-kubernetes-list-type".into(), json!("atomic"));
                }
                _ => {}
            }
            if u.ratio(1, 4)? {
                m.insert("minItems".into(), json!(u.int_in_range(0..=3)?));
                m.insert("maxItems".into(), json!(u.int_in_range(0..=4)?));
            }
            if u.ratio(1, 8)? {
                m.insert("uniqueItems".into(), json!(false));
            }
        }
        "string" => {
            if u.ratio(1, 4)? {
                m.insert("pattern".into(), json!(u.choose(PATTERNS)?));
            }
            if u.ratio(1, 4)? {
                m.insert("format".into(), json!(u.choose(FORMATS)?));
            }
            if u.ratio(1, 4)? {
                m.insert("minLength".into(), json!(u.int_in_range(0..=3)?));
                m.insert("maxLength".into(), json!(u.int_in_range(0..=8)?));
            }
            if u.ratio(1, 5)? {
                m.insert("enum".into(), json!(["a", "b", key(u)?]));
            }
        }
        "integer" | "number" => {
            if u.ratio(1, 4)? {
                m.insert("minimum".into(), json!(u.int_in_range(-5i64..=5)?));
                m.insert("exclusiveMinimum".into(), json!(u.arbitrary::<bool>()?));
            }
            if u.ratio(1, 4)? {
                m.insert("maximum".into(), json!(u.int_in_range(-5i64..=50)?));
                m.insert("exclusiveMaximum".into(), json!(u.arbitrary::<bool>()?));
            }
            if u.ratio(1, 5)? {
                let d: i64 = u.int_in_range(0..=4)?;
                m.insert(
                    "multipleOf".into(),
                    if ty == "number" && u.arbitrary()? {
                        json!(0.5)
                    } else {
                        json!(d)
                    },
                );
            }
            if ty == "integer" && u.ratio(1, 4)? {
                m.insert("format".into(), json!(u.choose(&["int32", "int64"])?));
            }
        }
        _ => {}
    }
    // Value validations under the logical junctors (no types or structure there).
    if u.ratio(1, 8)? {
        let j = *u.choose(&["allOf", "anyOf", "oneOf", "not"])?;
        let inner = match u.int_in_range(0..=3)? {
            0 => json!({"minLength": 1}),
            1 => json!({"pattern": "^a"}),
            2 => json!({"maximum": 3}),
            _ => json!({"required": [key(u)?]}),
        };
        m.insert(
            j.into(),
            if j == "not" {
                inner
            } else {
                json!([inner, {}])
            },
        );
    }
    if u.ratio(1, 4)? {
        m.insert("default".into(), value(u, depth + 1)?);
    }
    Ok(Value::Object(m))
}

/// An arbitrary JSON value, keys from `KEYS`.
pub fn value(u: &mut Unstructured<'_>, depth: u32) -> Result<Value> {
    let max = if depth >= MAX_DEPTH + 2 { 6 } else { 8 };
    Ok(match u.int_in_range(0..=max)? {
        0 => Value::Null,
        1 => json!(u.arbitrary::<bool>()?),
        2 => json!(u.int_in_range(-3i64..=60)?),
        3 => {
            let f: f64 = u.arbitrary()?;
            serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
        }
        4 => json!(u.choose(KEYS)?),
        5 => json!(u.choose(&[
            "aaa",
            "12",
            "abc",
            "2024-01-01",
            "1h",
            "::1",
            "10.0.0.0/8",
            "x@y.z",
            "QUJD"
        ])?),
        6 => json!(u.arbitrary::<String>()?),
        7 => {
            let n = u.int_in_range(0..=4)?;
            let mut a = Vec::new();
            for _ in 0..n {
                a.push(value(u, depth + 1)?);
            }
            Value::Array(a)
        }
        _ => {
            let n = u.int_in_range(0..=4)?;
            let mut m = Map::new();
            for _ in 0..n {
                m.insert(key(u)?, value(u, depth + 1)?);
            }
            Value::Object(m)
        }
    })
}

/// A custom resource: apiVersion, kind, metadata and generated content.
pub fn object(u: &mut Unstructured<'_>) -> Result<Value> {
    let mut m = match value(u, 0)? {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    m.insert("apiVersion".into(), json!("g.example.com/v1"));
    m.insert("kind".into(), json!("K"));
    if u.ratio(3, 4)? {
        m.insert(
            "metadata".into(),
            json!({"name": "n", "namespace": "ns", "labels": {"a": "b"}}),
        );
    }
    Ok(Value::Object(m))
}
