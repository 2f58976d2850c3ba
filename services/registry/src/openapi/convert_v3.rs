//! Swagger 2.0 path items / definitions → OpenAPI 3.0 form, for the per group-version
//! documents (kube-openapi `pkg/builder3` and `pkg/spec3` shapes): shared parameters are
//! inlined, body parameters become `requestBody` with one content entry per consumed
//! media type, response schemas get one content entry per produced media type,
//! non-body parameter types move into `schema`, and `#/definitions/` references become
//! `#/components/schemas/`.

use serde_json::{Map, Value, json};

use super::paths::resolve_param;
use super::schema::MAX_DEPTH;

const V2_PREFIX: &str = "#/definitions/";
const V3_PREFIX: &str = "#/components/schemas/";
const METHODS: &[&str] = &["get", "put", "post", "delete", "options", "head", "patch"];
/// Keys of a v2 non-body parameter that describe its value (moved under `schema`).
const PARAM_SCHEMA_KEYS: &[&str] = &[
    "type",
    "format",
    "items",
    "default",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "enum",
    "multipleOf",
];

/// Rewrites every `#/definitions/X` reference to `#/components/schemas/X`.
pub(crate) fn rewrite_refs(v: &Value) -> Value {
    fn go(v: &Value, depth: usize) -> Value {
        if depth > MAX_DEPTH * 2 {
            return Value::Null;
        }
        match v {
            Value::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, x)| {
                        let x = match (k.as_str(), x) {
                            ("$ref", Value::String(r)) => Value::String(
                                r.strip_prefix(V2_PREFIX)
                                    .map(|n| format!("{V3_PREFIX}{n}"))
                                    .unwrap_or_else(|| r.clone()),
                            ),
                            _ => go(x, depth + 1),
                        };
                        (k.clone(), x)
                    })
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.iter().map(|x| go(x, depth + 1)).collect()),
            other => other.clone(),
        }
    }
    go(v, 0)
}

/// A built-in definition in OpenAPI 3.0 form: references renamed, and a reference with
/// sibling keywords (a described field) wrapped as `{"allOf": [{"$ref": …}], …}`, since
/// OpenAPI 3.0 ignores the siblings of `$ref` (kube-openapi `pkg/schemamutation` and
/// builder3 publish described references that way).
pub(crate) fn v3_definition(v: &Value) -> Value {
    fn wrap(v: &mut Value, depth: usize) {
        if depth > MAX_DEPTH * 2 {
            return;
        }
        match v {
            Value::Object(m) => {
                if m.len() > 1
                    && let Some(r) = m.remove("$ref")
                {
                    m.insert("allOf".into(), json!([{ "$ref": r }]));
                }
                for x in m.values_mut() {
                    wrap(x, depth + 1);
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|x| wrap(x, depth + 1)),
            _ => {}
        }
    }
    let mut out = rewrite_refs(v);
    wrap(&mut out, 0);
    out
}

/// Appends the names of all `#/components/schemas/...` targets referenced in `v`.
pub(crate) fn collect_refs(v: &Value, out: &mut Vec<String>) {
    fn go(v: &Value, out: &mut Vec<String>, depth: usize) {
        if depth > MAX_DEPTH * 2 {
            return;
        }
        match v {
            Value::Object(m) => {
                if let Some(name) = m
                    .get("$ref")
                    .and_then(Value::as_str)
                    .and_then(|r| r.strip_prefix(V3_PREFIX))
                {
                    out.push(name.to_string());
                }
                for x in m.values() {
                    go(x, out, depth + 1);
                }
            }
            Value::Array(a) => {
                for x in a {
                    go(x, out, depth + 1);
                }
            }
            _ => {}
        }
    }
    go(v, out, 0)
}

fn non_body_param(p: &Map<String, Value>) -> Value {
    let mut out = Map::new();
    let mut schema = Map::new();
    for (k, v) in p {
        if PARAM_SCHEMA_KEYS.contains(&k.as_str()) {
            schema.insert(k.clone(), v.clone());
        } else if k != "collectionFormat" && k != "allowEmptyValue" {
            out.insert(k.clone(), v.clone());
        }
    }
    out.insert("schema".into(), Value::Object(schema));
    Value::Object(out)
}

fn media_map(types: &[Value], schema: &Value) -> Value {
    let mut m = Map::new();
    for t in types.iter().filter_map(Value::as_str) {
        m.insert(t.to_string(), json!({"schema": rewrite_refs(schema)}));
    }
    Value::Object(m)
}

fn operation(op: &Map<String, Value>) -> Value {
    let empty = Vec::new();
    let consumes = op
        .get("consumes")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    let produces = op
        .get("produces")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    let mut out = Map::new();
    for (k, v) in op {
        match k.as_str() {
            "consumes" | "produces" | "schemes" => {}
            "parameters" => {
                let mut params = Vec::new();
                for p in v.as_array().unwrap_or(&empty) {
                    let p = resolve_param(p);
                    let Some(pm) = p.as_object() else { continue };
                    if pm.get("in").and_then(Value::as_str) == Some("body") {
                        let mut body = Map::new();
                        let schema = pm.get("schema").cloned().unwrap_or_else(|| json!({}));
                        body.insert("content".into(), media_map(consumes, &schema));
                        if let Some(d) = pm.get("description") {
                            body.insert("description".into(), d.clone());
                        }
                        if pm.get("required").and_then(Value::as_bool) == Some(true) {
                            body.insert("required".into(), Value::Bool(true));
                        }
                        out.insert("requestBody".into(), Value::Object(body));
                    } else {
                        params.push(non_body_param(pm));
                    }
                }
                if !params.is_empty() {
                    out.insert("parameters".into(), Value::Array(params));
                }
            }
            "responses" => {
                let mut rs = Map::new();
                for (code, r) in v.as_object().into_iter().flatten() {
                    let mut nr = Map::new();
                    if let Some(d) = r.get("description") {
                        nr.insert("description".into(), d.clone());
                    }
                    if let Some(s) = r.get("schema") {
                        nr.insert("content".into(), media_map(produces, s));
                    }
                    rs.insert(code.clone(), Value::Object(nr));
                }
                out.insert("responses".into(), Value::Object(rs));
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Value::Object(out)
}

/// Converts one Swagger 2.0 path item.
pub(crate) fn path_item(item: &Value) -> Value {
    let mut out = Map::new();
    for (k, v) in item.as_object().into_iter().flatten() {
        if METHODS.contains(&k.as_str()) {
            if let Some(op) = v.as_object() {
                out.insert(k.clone(), operation(op));
            }
        } else if k == "parameters" {
            let params: Vec<Value> = v
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| resolve_param(p).as_object().map(non_body_param))
                .collect();
            out.insert(k.clone(), Value::Array(params));
        } else if k.starts_with("x-") {
            out.insert(k.clone(), v.clone());
        }
    }
    Value::Object(out)
}
