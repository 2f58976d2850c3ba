//! Defaulting: fills `default` values top-down into a custom resource, after pruning, on
//! every write and on read (`Normalize`).
//!
//! Follows k8s.io/apiextensions-apiserver pkg/apiserver/schema/defaulting/algorithm.go
//! (`Default`, `isNonNullableNull`) and prunenulls.go (`PruneNonNullableNullsWithoutDefaults`):
//! a missing property, or a `null` one whose schema is not `nullable`, gets its default;
//! `null`s without a default and without `nullable` are dropped from objects.

use crate::structural::{Additional, Schema};
use serde_json::Value;

fn is_non_nullable_null(x: &Value, s: Option<&Schema>) -> bool {
    x.is_null() && s.is_some_and(|s| !s.nullable)
}

/// Applies defaults in place.
pub fn apply_defaults(x: &mut Value, s: &Schema) {
    match x {
        Value::Object(m) => {
            for (k, prop) in &s.properties {
                let Some(d) = &prop.default else { continue };
                match m.get_mut(k.as_str()) {
                    None => {
                        m.insert(k.clone(), d.clone());
                    }
                    Some(v) if is_non_nullable_null(v, Some(prop)) => *v = d.clone(),
                    _ => {}
                }
            }
            let add = s.additional_schema();
            for (k, v) in m.iter_mut() {
                if let Some(prop) = s.property(k) {
                    apply_defaults(v, prop);
                } else if let Some(a) = add {
                    if is_non_nullable_null(v, Some(a))
                        && let Some(d) = &a.default
                    {
                        *v = d.clone();
                    }
                    apply_defaults(v, a);
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = s.items.as_deref() {
                for v in a.iter_mut() {
                    if is_non_nullable_null(v, Some(items))
                        && let Some(d) = &items.default
                    {
                        *v = d.clone();
                    }
                    apply_defaults(v, items);
                }
            }
        }
        _ => {}
    }
}

/// Drops `null` object fields whose schema is neither nullable nor defaulted.
pub fn prune_non_nullable_nulls(x: &mut Value, s: &Schema) {
    match x {
        Value::Object(m) => {
            m.retain(|k, v| {
                let sub = match s.property(k) {
                    Some(p) => Some(p),
                    None => match &s.additional {
                        Some(Additional::Schema(a)) => Some(&**a),
                        _ => None,
                    },
                };
                let Some(sub) = sub else { return true };
                if v.is_null() {
                    return sub.nullable || sub.default.is_some();
                }
                prune_non_nullable_nulls(v, sub);
                true
            });
        }
        Value::Array(a) => {
            if let Some(items) = s.items.as_deref() {
                for v in a.iter_mut() {
                    prune_non_nullable_nulls(v, items);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::structural::compile;
    use serde_json::json;

    // Cases follow staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting/algorithm_test.go
    #[test]
    fn defaults_top_down_and_nulls() {
        let s = compile(&json!({"type": "object", "properties": {
            "spec": {"type": "object", "default": {}, "properties": {
                "a": {"type": "string", "default": "A"},
                "b": {"type": "object", "default": {"c": 1}, "properties": {"c": {"type": "integer"}, "d": {"type": "integer", "default": 4}}},
                "n": {"type": "string", "nullable": true, "default": "N"},
                "z": {"type": "string", "default": "Z"},
                "l": {"type": "array", "items": {"type": "object", "default": {"q": 1}, "properties": {"q": {"type": "integer"}, "r": {"type": "integer", "default": 2}}}},
                "m": {"type": "object", "additionalProperties": {"type": "string", "default": "M"}}
            }}}}))
        .unwrap();
        let mut o = json!({"spec": null});
        // non-nullable null gets its default, then defaults apply inside it
        apply_defaults(&mut o, &s);
        assert_eq!(
            o,
            json!({"spec": {"a": "A", "b": {"c": 1, "d": 4}, "n": "N", "z": "Z"}})
        );
        let mut o =
            json!({"spec": {"n": null, "z": null, "l": [null, {"q": 5}], "m": {"k": null}}});
        apply_defaults(&mut o, &s);
        assert_eq!(
            o,
            json!({"spec": {"a": "A", "b": {"c": 1, "d": 4}, "n": null, "z": "Z",
                "l": [{"q": 1, "r": 2}, {"q": 5, "r": 2}], "m": {"k": "M"}}})
        );
    }

    #[test]
    fn prunes_nulls_without_defaults() {
        let s = compile(&json!({"type": "object", "properties": {
            "a": {"type": "string"}, "b": {"type": "string", "nullable": true},
            "c": {"type": "string", "default": "x"}, "o": {"type": "object", "properties": {"d": {"type": "string"}}}}}))
        .unwrap();
        let mut o = json!({"a": null, "b": null, "c": null, "o": {"d": null}, "u": null});
        prune_non_nullable_nulls(&mut o, &s);
        assert_eq!(o, json!({"b": null, "c": null, "o": {}, "u": null}));
    }
}
