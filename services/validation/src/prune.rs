//! Pruning: drops every field of a custom resource that its structural schema does not
//! specify, and reports the dropped (unknown) field paths for `fieldValidation=Warn|Strict`.
//!
//! Runs first in the CR pipeline (on every write, and on read via `Normalize`). Follows
//! k8s.io/apiextensions-apiserver pkg/apiserver/schema/pruning/algorithm.go (`PruneWithOptions`,
//! `prune`, `skipPrune`): `apiVersion`/`kind`/`metadata` are kept at the resource root and in
//! embedded resources, `x-kubernetes-preserve-unknown-fields` stops pruning (while still
//! descending into specified properties), `additionalProperties` keeps every key. Object
//! metadata is coerced separately (pkg/apiserver/schema/objectmeta/coerce.go): unknown
//! ObjectMeta keys are dropped and reported as `metadata.<key>`.

use crate::structural::{Additional, Schema};
use serde_json::{Map, Value};

/// Keys ObjectMeta knows (metav1.ObjectMeta JSON names).
pub const OBJECT_META_FIELDS: &[&str] = &[
    "annotations",
    "creationTimestamp",
    "deletionGracePeriodSeconds",
    "deletionTimestamp",
    "finalizers",
    "generateName",
    "generation",
    "labels",
    "managedFields",
    "name",
    "namespace",
    "ownerReferences",
    "resourceVersion",
    "selfLink",
    "uid",
];

/// Whether `k` is a metav1.ObjectMeta JSON field name (one of [`OBJECT_META_FIELDS`]).
pub fn is_object_meta_field(k: &str) -> bool {
    matches!(
        k,
        "annotations"
            | "creationTimestamp"
            | "deletionGracePeriodSeconds"
            | "deletionTimestamp"
            | "finalizers"
            | "generateName"
            | "generation"
            | "labels"
            | "managedFields"
            | "name"
            | "namespace"
            | "ownerReferences"
            | "resourceVersion"
            | "selfLink"
            | "uid"
    )
}

struct Pruner {
    path: String,
    pruned: Vec<String>,
}

impl Pruner {
    fn record(&mut self, key: &str) {
        if self.path.is_empty() {
            self.pruned.push(key.to_string());
        } else {
            self.pruned.push(format!("{}.{}", self.path, key));
        }
    }
    fn push_key(&mut self, key: &str) -> usize {
        let len = self.path.len();
        if !self.path.is_empty() {
            self.path.push('.');
        }
        self.path.push_str(key);
        len
    }
    fn push_index(&mut self, i: usize) -> usize {
        let len = self.path.len();
        crate::validate::push_index(&mut self.path, i);
        len
    }
}

/// Prunes `obj` (a whole custom resource) in place; returns the pruned field paths, e.g.
/// `spec.foo`, `spec.items[0].bar`, `metadata.foo`, in traversal order.
pub fn prune(obj: &mut Value, schema: &Schema) -> Vec<String> {
    let mut p = Pruner {
        path: String::new(),
        pruned: Vec::new(),
    };
    // The resource root is always treated as an embedded resource.
    prune_value(obj, Some(schema), true, &mut p);
    p.pruned
}

/// Pruning, null pruning and defaulting of a whole resource in one walk: the result equals
/// [`prune`] followed by [`crate::default::prune_non_nullable_nulls`] and
/// [`crate::default::apply_defaults`]. See [`crate::pipeline`] (which also validates).
pub fn prune_and_default(obj: &mut Value, schema: &Schema) -> Vec<String> {
    crate::pipeline::prune_and_default(obj, schema)
}

/// Prunes an arbitrary subtree (not a resource root); paths are relative to `base`.
pub fn prune_at(obj: &mut Value, schema: &Schema, base: &str) -> Vec<String> {
    let mut p = Pruner {
        path: base.to_string(),
        pruned: Vec::new(),
    };
    prune_value(obj, Some(schema), false, &mut p);
    p.pruned
}

fn is_meta_field(k: &str) -> bool {
    matches!(k, "apiVersion" | "kind" | "metadata")
}

fn prune_value(x: &mut Value, s: Option<&Schema>, root: bool, p: &mut Pruner) {
    let embedded = root || s.is_some_and(|s| s.embedded);
    if let Some(s) = s
        && s.preserve_unknown
    {
        skip_prune(x, s, embedded, p);
        return;
    }
    match x {
        Value::Object(m) => {
            let Some(s) = s else {
                let keys: Vec<String> = m.keys().cloned().collect();
                for k in keys {
                    p.record(&k);
                }
                m.clear();
                return;
            };
            prune_map(m, s, embedded, root, p);
        }
        Value::Array(a) => {
            let items = s.and_then(|s| s.items.as_deref());
            for (i, v) in a.iter_mut().enumerate() {
                let l = p.push_index(i);
                prune_value(v, items, false, p);
                p.path.truncate(l);
            }
        }
        _ => {}
    }
}

fn prune_map(m: &mut Map<String, Value>, s: &Schema, embedded: bool, root: bool, p: &mut Pruner) {
    // Walk with iter_mut and remove the (usually no) dropped keys afterwards: much cheaper
    // than `retain` on the B-tree when nothing is dropped, which is the common case.
    let mut drop: Vec<String> = Vec::new();
    let mut cur = s.prop_cursor();
    for (k, v) in m.iter_mut() {
        let prop = cur.get(k);
        if !keep_entry(k, v, prop, s, embedded, root, p) {
            drop.push(k.clone());
        }
    }
    for k in &drop {
        m.remove(k);
    }
}

fn keep_entry(
    k: &str,
    v: &mut Value,
    prop: Option<&Schema>,
    s: &Schema,
    embedded: bool,
    root: bool,
    p: &mut Pruner,
) -> bool {
    if embedded {
        match k {
            "apiVersion" | "kind" if v.is_string() => return true,
            "metadata" if v.is_object() => {
                coerce_meta(v, p);
                return true;
            }
            _ => {}
        }
    }
    if let Some(prop) = prop {
        let l = p.push_key(k);
        prune_value(v, Some(prop), false, p);
        p.path.truncate(l);
        true
    } else if let Some(add) = &s.additional {
        let l = p.push_key(k);
        match add {
            Additional::Schema(a) => prune_value(v, Some(a), false, p),
            Additional::Bool(_) => prune_value(v, None, false, p),
        }
        p.path.truncate(l);
        true
    } else {
        // Upstream does not report apiVersion/kind/metadata dropped at the root.
        if !(is_meta_field(k) && root) {
            p.record(k);
        }
        false
    }
}

fn skip_prune(x: &mut Value, s: &Schema, embedded: bool, p: &mut Pruner) {
    match x {
        Value::Object(m) => {
            for (k, v) in m.iter_mut() {
                if embedded && is_meta_field(k) {
                    if k == "metadata" && v.is_object() {
                        coerce_meta(v, p);
                    }
                    continue;
                }
                let sub = match s.property(k) {
                    Some(prop) => Some(prop),
                    None => match &s.additional {
                        Some(Additional::Schema(a)) => Some(&**a),
                        _ => None,
                    },
                };
                let Some(sub) = sub else { continue };
                let l = p.push_key(k);
                prune_value(v, Some(sub), false, p);
                p.path.truncate(l);
            }
        }
        Value::Array(a) => {
            if let Some(items) = s.items.as_deref() {
                for (i, v) in a.iter_mut().enumerate() {
                    let l = p.push_index(i);
                    let emb = items.embedded;
                    if items.preserve_unknown {
                        skip_prune(v, items, emb, p);
                    } else {
                        prune_value(v, Some(items), false, p);
                    }
                    p.path.truncate(l);
                }
            }
        }
        _ => {}
    }
}

/// Drops ObjectMeta keys that metav1.ObjectMeta does not have (upstream coerces metadata
/// through the typed struct, which loses unknown keys).
fn coerce_meta(v: &mut Value, p: &mut Pruner) {
    if let Value::Object(meta) = v {
        let l = p.push_key("metadata");
        meta.retain(|k, _| {
            if is_object_meta_field(k) {
                true
            } else {
                p.record(k);
                false
            }
        });
        p.path.truncate(l);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::structural::compile;
    use serde_json::json;

    // Cases follow staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning/algorithm_test.go
    #[test]
    fn prunes_unknown_and_keeps_meta() {
        let s = compile(&json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {"a": {"type": "string"},
                "m": {"type": "object", "additionalProperties": {"type": "object", "properties": {"x": {"type": "string"}}}},
                "p": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"q": {"type": "object"}}},
                "l": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "string"}}}}}}}}))
        .unwrap();
        let mut o = json!({"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "x", "bogus": 1},
            "spec": {"a": "1", "b": 2, "m": {"k": {"x": "1", "y": 2}}, "p": {"free": 1, "q": {"z": 1}},
                     "l": [{"n": "a", "o": 1}]}, "extra": true});
        let pruned = prune(&mut o, &s);
        assert_eq!(
            o,
            json!({"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "x"},
                "spec": {"a": "1", "m": {"k": {"x": "1"}}, "p": {"free": 1, "q": {}}, "l": [{"n": "a"}]}})
        );
        let mut pruned_sorted = pruned.clone();
        pruned_sorted.sort();
        assert_eq!(
            pruned_sorted,
            vec![
                "extra",
                "metadata.bogus",
                "spec.b",
                "spec.l[0].o",
                "spec.m.k.y",
                "spec.p.q.z"
            ]
        );
    }

    #[test]
    fn embedded_resource_keeps_type_meta() {
        let s = compile(&json!({"type": "object", "properties": {
            "e": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {"spec": {"type": "object"}}}}}))
        .unwrap();
        let mut o = json!({"e": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"x": 1}, "other": 1}, "x": 1});
        let pruned = prune(&mut o, &s);
        assert_eq!(
            o,
            json!({"e": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}})
        );
        assert_eq!(pruned.len(), 3);
    }

    #[test]
    fn object_meta_field_names() {
        for k in OBJECT_META_FIELDS {
            assert!(is_object_meta_field(k));
        }
        assert!(!is_object_meta_field("bogus"));
        assert!(!is_object_meta_field("Name"));
    }

    #[test]
    fn non_string_kind_is_pruned() {
        let s = compile(&json!({"type": "object"})).unwrap();
        let mut o = json!({"apiVersion": 1, "kind": "K"});
        prune(&mut o, &s);
        assert_eq!(o, json!({"kind": "K"}));
    }
}
