//! Structured merge of server-side apply: the fields an object has, an applied
//! configuration merged into a live object, the fields two versions of an object differ
//! in, and fields removed from an object — each following the object's structural schema.
//!
//! Where it sits: beside [`crate::fieldpath`], under the apply patch mechanism and the
//! managedFields tracking of every write (issue 17); no IO. It follows structured-merge-
//! diff's typed walkers: `tofieldset.go`, `merge.go` (the applied value wins at every leaf; maps merge by
//! key; associative lists merge by item, shared items in the applied order with the live
//! object's other items kept around them), `compare.go` with `Compare`'s rules in
//! `typed.go` (a leaf present on one side only is added or removed, present on both and
//! unequal modified; a map or list present on one side only is added or removed itself
//! too), and `remove.go` (the fields of a set taken out of a value).
//!
//! Leaves are scalars, atomic lists and maps (see [`field_set`]); a merge and a comparison
//! also treat empty or null maps and lists as leaves, as upstream does, so that the
//! difference between empty and null survives them.

use serde_json::{Map, Value};

use crate::fieldpath::{PathElement, Set};

/// How a schema node (or, without one, a value) is merged, compared and walked.
enum Shape<'s> {
    Leaf,
    /// `x-kubernetes-list-type: set`.
    SetList,
    /// `x-kubernetes-list-type: map` with its key fields and item schema.
    MapList(Vec<&'s str>, Option<&'s Value>),
    /// A granular map: declared properties, and the schema of undeclared keys (`None`:
    /// deduced from the values).
    Struct(Option<&'s Map<String, Value>>, Option<&'s Value>),
}

fn shape<'s>(schema: Option<&'s Value>, sample: Option<&Value>) -> Shape<'s> {
    let Some(s) = schema else {
        // Deduced: objects are granular maps, lists atomic.
        return match sample {
            Some(Value::Object(_)) => Shape::Struct(None, None),
            _ => Shape::Leaf,
        };
    };
    let str_of = |k: &str| s.get(k).and_then(Value::as_str);
    if str_of("type") == Some("array") {
        return match str_of("x-kubernetes-list-type") {
            Some("set") => Shape::SetList,
            Some("map") => Shape::MapList(
                s.get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default(),
                s.get("items"),
            ),
            _ => Shape::Leaf,
        };
    }
    if str_of("type") == Some("object") || s.get("properties").is_some() {
        if str_of("x-kubernetes-map-type") == Some("atomic") {
            return Shape::Leaf;
        }
        return Shape::Struct(
            s.get("properties").and_then(Value::as_object),
            s.get("additionalProperties").filter(|a| a.is_object()),
        );
    }
    if s.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
        && matches!(sample, Some(Value::Object(_)))
    {
        return Shape::Struct(None, None);
    }
    Shape::Leaf
}

fn child_schema<'s>(
    props: Option<&'s Map<String, Value>>,
    additional: Option<&'s Value>,
    key: &str,
) -> Option<&'s Value> {
    props.and_then(|p| p.get(key)).or(additional)
}

/// Whether a container value is absent, null or empty (upstream's "promote to leaf").
fn empty(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::Object(m)) => m.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        Some(_) => false,
    }
}

/// The items of an associative list by element, first occurrence kept, in list order.
fn index<'v>(
    items: Option<&'v Value>,
    keys: Option<&[&str]>,
) -> Result<Vec<(PathElement, &'v Value)>, String> {
    let Some(Value::Array(items)) = items else {
        return Ok(Vec::new());
    };
    let mut out: Vec<(PathElement, &Value)> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let pe = match keys {
            None => PathElement::Value(item.clone()),
            Some(k) => {
                crate::fieldpath::list_item_key(item, k).map_err(|e| format!("element {i}: {e}"))?
            }
        };
        if !out.iter().any(|(p, _)| *p == pe) {
            out.push((pe, item));
        }
    }
    Ok(out)
}

/// The fields of `obj` as upstream's `TypedValue.ToFieldSet` lists them, with the types
/// of the structural schema `schema` (a CRD version's `openAPIV3Schema`; `None`: no
/// schema, every part deduced from the value).
///
/// The schema decides what is a leaf: scalars; lists that are atomic (no
/// `x-kubernetes-list-type`, or `atomic`) and maps with `x-kubernetes-map-type: atomic`
/// are one field each. A `set` list has a `v:` member per item, a `map` list a `k:` member
/// per item (keyed by `x-kubernetes-list-map-keys`) with the item's fields below it. Of an
/// object, fields the schema declares are reached but are members only when they are
/// leaves; fields it does not declare (`additionalProperties`, preserved unknown fields)
/// are members themselves too. Where no schema speaks (preserved unknown fields, no
/// schema), objects are granular maps and lists atomic, as upstream's deduced type. A
/// null where the schema expects a granular map or an associative list owns nothing.
///
/// A map-type list item without its key fields, or with a key that is not a scalar, is an
/// error with upstream's message.
///
/// `metadata` follows whatever `schema` says of it; upstream types it as ObjectMeta (labels
/// and annotations granular maps of declared kind, finalizers a set, ownerReferences keyed
/// by `uid`), so the caller passes a schema with that `metadata` spliced in.
pub fn field_set(obj: &Value, schema: Option<&Value>) -> Result<Set, String> {
    let mut set = Set::new();
    walk(obj, schema, &mut Vec::new(), &mut set)?;
    Ok(set)
}

fn walk(
    v: &Value,
    schema: Option<&Value>,
    path: &mut Vec<PathElement>,
    set: &mut Set,
) -> Result<(), String> {
    match (shape(schema, Some(v)), v) {
        (Shape::SetList | Shape::MapList(..) | Shape::Struct(..), Value::Null) => {}
        (Shape::SetList, Value::Array(items)) => {
            for item in items {
                path.push(PathElement::Value(item.clone()));
                set.insert(path);
                path.pop();
            }
        }
        (Shape::MapList(keys, item_schema), Value::Array(items)) => {
            for item in items {
                path.push(crate::fieldpath::list_item_key(item, &keys)?);
                walk(item, item_schema, path, set)?;
                set.insert(path);
                path.pop();
            }
        }
        (Shape::Struct(props, additional), Value::Object(fields)) => {
            for (name, child) in fields {
                path.push(PathElement::Field(name.clone()));
                match props.and_then(|p| p.get(name)) {
                    Some(declared) => walk(child, Some(declared), path, set)?,
                    None => {
                        walk(child, additional, path, set)?;
                        set.insert(path);
                    }
                }
                path.pop();
            }
        }
        // Leaves, and values whose kind the schema does not expect (validation reports
        // those): one field.
        _ => set.insert(path),
    }
    Ok(())
}

/// `applied` merged into `live` under `schema`: the applied value wins at every leaf,
/// maps merge key by key, associative lists item by item. `None` when neither side has a
/// value.
pub fn merge(
    live: Option<&Value>,
    applied: Option<&Value>,
    schema: Option<&Value>,
) -> Result<Option<Value>, String> {
    if live.is_none() && applied.is_none() {
        return Ok(None);
    }
    // A value whose kind differs from the applied one's is replaced, not merged.
    let live = match (live, applied) {
        (Some(l), Some(a)) if std::mem::discriminant(l) != std::mem::discriminant(a) => None,
        _ => live,
    };
    let sh = shape(schema, applied.or(live));
    if matches!(sh, Shape::Leaf) || (empty(live) && empty(applied)) {
        return Ok(applied.or(live).cloned());
    }
    match sh {
        Shape::Leaf => unreachable!("handled above"),
        Shape::SetList => merge_list(live, applied, None, None),
        Shape::MapList(keys, item) => merge_list(live, applied, Some(&keys), item),
        Shape::Struct(props, additional) => {
            let mut out = Map::new();
            let (l, a) = (
                live.and_then(Value::as_object),
                applied.and_then(Value::as_object),
            );
            for (k, lv) in l.into_iter().flatten() {
                let s = child_schema(props, additional, k);
                if let Some(v) = merge(Some(lv), a.and_then(|a| a.get(k)), s)? {
                    out.insert(k.clone(), v);
                }
            }
            for (k, av) in a.into_iter().flatten() {
                if l.is_some_and(|l| l.contains_key(k)) {
                    continue;
                }
                let s = child_schema(props, additional, k);
                if let Some(v) = merge(None, Some(av), s)? {
                    out.insert(k.clone(), v);
                }
            }
            Ok((!out.is_empty()).then_some(Value::Object(out)))
        }
    }
}

/// An associative list merged: shared items in the applied order, each merged; the live
/// object's other items where they were relative to the shared ones; new applied items
/// where the applied list has them.
fn merge_list(
    live: Option<&Value>,
    applied: Option<&Value>,
    keys: Option<&[&str]>,
    item_schema: Option<&Value>,
) -> Result<Option<Value>, String> {
    let lhs = index(live, keys).map_err(|e| format!("lhs: {e}"))?;
    let rhs = index(applied, keys).map_err(|e| format!("rhs: {e}"))?;
    let in_lhs = |pe: &PathElement| lhs.iter().find(|(p, _)| p == pe).map(|(_, v)| *v);
    let in_rhs = |pe: &PathElement| rhs.iter().find(|(p, _)| p == pe).map(|(_, v)| *v);
    let mut shared = rhs
        .iter()
        .map(|(pe, _)| pe)
        .filter(|pe| in_lhs(pe).is_some());
    let mut next_shared = shared.next();
    let mut out = Vec::with_capacity(lhs.len().max(rhs.len()));
    let item = |l: Option<&Value>, r: Option<&Value>| merge(l, r, item_schema);
    let (mut li, mut ri) = (0, 0);
    while li < lhs.len() || ri < rhs.len() {
        if li < lhs.len() && ri < rhs.len() {
            let pe = &lhs[li].0;
            if *pe == rhs[ri].0 {
                if let Some(v) = item(Some(lhs[li].1), Some(rhs[ri].1))? {
                    out.push(v);
                }
                li += 1;
                ri += 1;
                next_shared = shared.next();
                continue;
            }
            if in_rhs(pe).is_some() && next_shared.is_some_and(|n| n != pe) {
                // A shared item, but not the next one in the applied order: it comes
                // later.
                li += 1;
                continue;
            }
        }
        if li < lhs.len() && in_rhs(&lhs[li].0).is_none() {
            if let Some(v) = item(Some(lhs[li].1), None)? {
                out.push(v);
            }
            li += 1;
            continue;
        }
        if ri < rhs.len() {
            let pe = &rhs[ri].0;
            if let Some(v) = item(in_lhs(pe), Some(rhs[ri].1))? {
                out.push(v);
            }
            ri += 1;
            if next_shared.is_some_and(|n| n == pe) {
                next_shared = shared.next();
            }
        }
    }
    Ok((!out.is_empty()).then_some(Value::Array(out)))
}

/// What changed from `old` to `new` (upstream's `Comparison`).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Comparison {
    /// Fields only `new` has.
    pub added: Set,
    /// Leaves both have, with different values.
    pub modified: Set,
    /// Fields only `old` has.
    pub removed: Set,
}

impl Comparison {
    /// Whether nothing changed.
    pub fn is_same(&self) -> bool {
        self.added.is_empty() && self.modified.is_empty() && self.removed.is_empty()
    }
}

/// The fields `old` and `new` differ in, under `schema`.
pub fn compare(old: &Value, new: &Value, schema: Option<&Value>) -> Result<Comparison, String> {
    let mut c = Comparison::default();
    compare_at(Some(old), Some(new), schema, &mut Vec::new(), &mut c)?;
    Ok(c)
}

fn compare_at(
    old: Option<&Value>,
    new: Option<&Value>,
    schema: Option<&Value>,
    path: &mut Vec<PathElement>,
    c: &mut Comparison,
) -> Result<(), String> {
    let leaf = |c: &mut Comparison, path: &[PathElement]| match (old, new) {
        (None, Some(_)) => c.added.insert(path),
        (Some(_), None) => c.removed.insert(path),
        (Some(o), Some(n)) if !values_equal(o, n) => c.modified.insert(path),
        _ => {}
    };
    // A kind change is compared as the new kind (upstream handles both atoms; the new
    // one's rule decides).
    let sh = shape(schema, new.or(old));
    let kinds_differ = matches!((old, new), (Some(o), Some(n))
        if std::mem::discriminant(o) != std::mem::discriminant(n));
    if matches!(sh, Shape::Leaf) || (empty(old) && empty(new)) || kinds_differ {
        leaf(c, path);
        return Ok(());
    }
    match sh {
        Shape::Leaf => unreachable!("handled above"),
        Shape::SetList | Shape::MapList(..) => {
            let (keys, item_schema) = match &sh {
                Shape::MapList(k, i) => (Some(k.as_slice()), *i),
                _ => (None, None),
            };
            let lhs = index(old, keys)?;
            let rhs = index(new, keys)?;
            for (pe, lv) in &lhs {
                let rv = rhs.iter().find(|(p, _)| p == pe).map(|(_, v)| *v);
                path.push(pe.clone());
                compare_at(Some(lv), rv, item_schema, path, c)?;
                path.pop();
            }
            for (pe, rv) in &rhs {
                if lhs.iter().any(|(p, _)| p == pe) {
                    continue;
                }
                path.push(pe.clone());
                compare_at(None, Some(rv), item_schema, path, c)?;
                path.pop();
            }
        }
        Shape::Struct(props, additional) => {
            let (o, n) = (
                old.and_then(Value::as_object),
                new.and_then(Value::as_object),
            );
            for (k, ov) in o.into_iter().flatten() {
                path.push(PathElement::Field(k.clone()));
                let s = child_schema(props, additional, k);
                compare_at(Some(ov), n.and_then(|n| n.get(k)), s, path, c)?;
                path.pop();
            }
            for (k, nv) in n.into_iter().flatten() {
                if o.is_some_and(|o| o.contains_key(k)) {
                    continue;
                }
                path.push(PathElement::Field(k.clone()));
                compare_at(None, Some(nv), child_schema(props, additional, k), path, c)?;
                path.pop();
            }
        }
    }
    // A map or list present on one side only is itself added or removed.
    match (old, new) {
        (None, Some(_)) => c.added.insert(path),
        (Some(_), None) => c.removed.insert(path),
        _ => {}
    }
    Ok(())
}

/// `compare({}, obj).added` as the `fieldsV1` value [`Set::to_value`] writes: every field,
/// item and non-empty container of `obj` (a created object), built in one walk without the
/// set. A create records exactly this set for its writer, so this is the create's share of
/// field tracking without its cost (paths of owned elements in ordered maps, then the
/// encoding): `managedfields::created` checks it against the general path in its tests.
pub fn added_fields_v1(obj: &Value, schema: Option<&Value>) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    added_children(obj, schema, &mut out)?;
    Ok(out)
}

/// The children of `v` (a value only the new side has) into `out`: what `compare_at`
/// inserts below its path.
fn added_children(
    v: &Value,
    schema: Option<&Value>,
    out: &mut Map<String, Value>,
) -> Result<(), String> {
    let sh = shape(schema, Some(v));
    if matches!(sh, Shape::Leaf) || empty(Some(v)) {
        return Ok(());
    }
    let mut child = |key: String, item: &Value, s: Option<&Value>| -> Result<(), String> {
        let mut below = Map::new();
        added_children(item, s, &mut below)?;
        // A container with fields below it is itself a member too: `"."`.
        if !below.is_empty() {
            below.insert(".".into(), Value::Object(Map::new()));
        }
        out.insert(key, Value::Object(below));
        Ok(())
    };
    match sh {
        Shape::Leaf => unreachable!("handled above"),
        Shape::SetList | Shape::MapList(..) => {
            let (keys, item_schema) = match &sh {
                Shape::MapList(k, i) => (Some(k.as_slice()), *i),
                _ => (None, None),
            };
            for (pe, item) in index(Some(v), keys)? {
                child(pe.to_fields_v1_key(), item, item_schema)?;
            }
        }
        Shape::Struct(props, additional) => {
            for (k, nv) in v.as_object().into_iter().flatten() {
                child(format!("f:{k}"), nv, child_schema(props, additional, k))?;
            }
        }
    }
    Ok(())
}

/// Upstream's `value.Equals`: numbers compare by value across integers and floats.
fn values_equal(a: &Value, b: &Value) -> bool {
    crate::fieldpath::compare_values(a, b) == std::cmp::Ordering::Equal
}

/// `v` without the fields of `remove`, under `schema`: a member path takes its field or
/// item out whole; a path below one takes out only what it names. As upstream's
/// `RemoveItems`, a granular map or associative list left with nothing (or empty to begin
/// with) becomes null; the schema pass after a write drops nulls of non-nullable fields.
pub fn remove(v: &Value, remove: &Set, schema: Option<&Value>) -> Value {
    let sh = shape(schema, Some(v));
    if !matches!(sh, Shape::Leaf) && empty(Some(v)) {
        return Value::Null;
    }
    let out = match (sh, v) {
        (Shape::Struct(props, additional), Value::Object(m)) => {
            let mut out = Map::new();
            for (k, child) in m {
                let pe = PathElement::Field(k.clone());
                if remove.has(std::slice::from_ref(&pe)) {
                    continue;
                }
                match remove.child(&pe) {
                    Some(sub) if !sub.is_empty() => {
                        let s = child_schema(props, additional, k);
                        out.insert(k.clone(), self::remove(child, sub, s));
                    }
                    _ => {
                        out.insert(k.clone(), child.clone());
                    }
                }
            }
            Value::Object(out)
        }
        (sh @ (Shape::SetList | Shape::MapList(..)), Value::Array(items)) => {
            let (keys, item_schema) = match &sh {
                Shape::MapList(k, i) => (Some(k.as_slice()), *i),
                _ => (None, None),
            };
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                let pe = match keys {
                    None => PathElement::Value(item.clone()),
                    Some(k) => match crate::fieldpath::list_item_key(item, k) {
                        Ok(pe) => pe,
                        Err(_) => {
                            out.push(item.clone());
                            continue;
                        }
                    },
                };
                if remove.has(std::slice::from_ref(&pe)) {
                    continue;
                }
                match remove.child(&pe) {
                    Some(sub) if !sub.is_empty() => out.push(self::remove(item, sub, item_schema)),
                    _ => out.push(item.clone()),
                }
            }
            Value::Array(out)
        }
        _ => return v.clone(),
    };
    if empty(Some(&out)) { Value::Null } else { out }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "replicas": {"type": "integer"},
            "args": {"type": "array", "items": {"type": "string"}},
            "tags": {"type": "array", "x-kubernetes-list-type": "set",
                "items": {"type": "string"}},
            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {
                    "name": {"type": "string"}, "port": {"type": "integer"},
                    "extra": {"type": "string"}}}},
            "selector": {"type": "object", "x-kubernetes-map-type": "atomic",
                "additionalProperties": {"type": "string"}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}}
        }}}})
    }

    /// `(live, applied, merged)`, after the kinds of upstream's `merge_test.go` cases:
    /// leaves replaced, atomic lists and maps replaced whole, sets and keyed lists merged
    /// item by item in the applied order with the live object's other items kept in place.
    #[test]
    fn merges() {
        let s = schema();
        let cases = [
            (
                json!({"spec": {"replicas": 1, "args": ["a"]}}),
                json!({"spec": {"replicas": 2, "args": ["b", "c"]}}),
                json!({"spec": {"replicas": 2, "args": ["b", "c"]}}),
            ),
            (
                json!({"spec": {"selector": {"a": "1", "b": "2"}}}),
                json!({"spec": {"selector": {"c": "3"}}}),
                json!({"spec": {"selector": {"c": "3"}}}),
            ),
            (
                json!({"spec": {"labels": {"a": "1", "b": "2"}}}),
                json!({"spec": {"labels": {"b": "3", "c": "4"}}}),
                json!({"spec": {"labels": {"a": "1", "b": "3", "c": "4"}}}),
            ),
            (
                json!({"spec": {"tags": ["x", "a", "y"]}}),
                json!({"spec": {"tags": ["b", "a"]}}),
                json!({"spec": {"tags": ["x", "b", "a", "y"]}}),
            ),
            (
                json!({"spec": {"ports": [
                    {"name": "a", "port": 1, "extra": "keep"}, {"name": "z", "port": 9}]}}),
                json!({"spec": {"ports": [{"name": "b", "port": 2}, {"name": "a", "port": 3}]}}),
                json!({"spec": {"ports": [{"name": "b", "port": 2},
                    {"name": "a", "port": 3, "extra": "keep"}, {"name": "z", "port": 9}]}}),
            ),
            // Shared items in the applied order; a live-only item stays ahead of the
            // shared item it preceded.
            (
                json!({"spec": {"tags": ["a", "b", "c"]}}),
                json!({"spec": {"tags": ["c", "a"]}}),
                json!({"spec": {"tags": ["b", "c", "a"]}}),
            ),
            // Empty and null survive as given (promoted to leaves).
            (
                json!({"spec": {"labels": null}}),
                json!({"spec": {"labels": {}}}),
                json!({"spec": {"labels": {}}}),
            ),
            // A kind change replaces.
            (
                json!({"spec": {"other": {"a": 1}}}),
                json!({"spec": {"other": "x"}}),
                json!({"spec": {"other": "x"}}),
            ),
        ];
        for (live, applied, want) in cases {
            let got = merge(Some(&live), Some(&applied), Some(&s))
                .unwrap()
                .unwrap();
            assert_eq!(got, want, "{live} + {applied}");
        }
        let e = merge(
            Some(&json!({})),
            Some(&json!({"spec": {"ports": [{"port": 1}]}})),
            Some(&s),
        )
        .unwrap_err();
        assert_eq!(
            e,
            r#"rhs: element 0: associative list with keys has an element that omits key field "name""#
        );
    }

    fn fv1(s: &Set) -> String {
        s.to_json()
    }

    #[test]
    fn comparisons() {
        let s = schema();
        // A create (from nothing): every field added, maps and lists themselves too.
        let c = compare(
            &json!({}),
            &json!({"spec": {"replicas": 1, "labels": {"a": "b"}, "ports": [{"name": "a"}]}}),
            Some(&s),
        )
        .unwrap();
        assert_eq!(
            fv1(&c.added),
            concat!(
                r#"{"f:spec":{"f:labels":{"f:a":{},".":{}},"f:ports":{"k:{\"name\":\"a\"}":{"#,
                r#""f:name":{},".":{}},".":{}},"f:replicas":{},".":{}}}"#
            )
        );
        assert!(c.modified.is_empty() && c.removed.is_empty());
        // An update: one leaf changed, one set item swapped, a label removed.
        let c = compare(
            &json!({"spec": {"replicas": 2, "tags": ["a", "b"], "labels": {"x": "1", "y": "2"}}}),
            &json!({"spec": {"replicas": 2.0, "tags": ["b", "c"], "labels": {"x": "1"}}}),
            Some(&s),
        )
        .unwrap();
        assert_eq!(fv1(&c.added), r#"{"f:spec":{"f:tags":{"v:\"c\"":{}}}}"#);
        assert_eq!(fv1(&c.modified), "{}", "2.0 equals 2 in value");
        assert_eq!(
            fv1(&c.removed),
            r#"{"f:spec":{"f:labels":{"f:y":{}},"f:tags":{"v:\"a\"":{}}}}"#
        );
        let c = compare(
            &json!({"spec": {"replicas": 1}}),
            &json!({"spec": {"replicas": 3}}),
            Some(&s),
        )
        .unwrap();
        assert_eq!(fv1(&c.modified), r#"{"f:spec":{"f:replicas":{}}}"#);
        assert!(
            compare(&json!({"a": [1]}), &json!({"a": [1]}), None)
                .unwrap()
                .is_same()
        );
    }

    #[test]
    fn removals() {
        let s = schema();
        let obj = json!({"spec": {"replicas": 1, "labels": {"a": "1", "b": "2"},
            "tags": ["x", "y"], "ports": [{"name": "a", "port": 1}, {"name": "b", "port": 2}]}});
        let mut set = Set::new();
        let f = |n: &str| PathElement::Field(n.into());
        set.insert(&[f("spec"), f("replicas")]);
        set.insert(&[f("spec"), f("labels"), f("a")]);
        set.insert(&[f("spec"), f("tags"), PathElement::Value(json!("x"))]);
        set.insert(&[
            f("spec"),
            f("ports"),
            PathElement::key(vec![("name".into(), json!("b"))]),
        ]);
        set.insert(&[
            f("spec"),
            f("ports"),
            PathElement::key(vec![("name".into(), json!("a"))]),
            f("port"),
        ]);
        assert_eq!(
            remove(&obj, &set, Some(&s)),
            json!({"spec": {"labels": {"b": "2"}, "tags": ["y"], "ports": [{"name": "a"}]}})
        );
    }

    /// A structural schema with every kind the walk distinguishes.
    fn toset_schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "replicas": {"type": "integer"},
                "args": {"type": "array", "items": {"type": "string"}},
                "finalizers": {"type": "array", "x-kubernetes-list-type": "set",
                    "items": {"type": "string"}},
                "ports": {"type": "array", "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["port", "protocol"],
                    "items": {"type": "object", "properties": {
                        "port": {"type": "integer"}, "protocol": {"type": "string"},
                        "name": {"type": "string"}}}},
                "selector": {"type": "object", "x-kubernetes-map-type": "atomic",
                    "additionalProperties": {"type": "string"}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "templates": {"type": "object", "additionalProperties": {
                    "type": "object", "properties": {"image": {"type": "string"}}}},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            }}
        }})
    }

    /// The shapes of upstream's `toset_test.go` cases (struct grab bag, associative list,
    /// atomic list and map), on a CRD-style schema: `(object, the set's fieldsV1)`.
    #[test]
    fn field_sets_of_objects() {
        let cases = [
            (
                json!({"spec": {"replicas": 3}}),
                json!({"f:spec": {"f:replicas": {}}}),
            ),
            (
                json!({"spec": {"args": ["a", "a"]}}),
                json!({"f:spec": {"f:args": {}}}),
            ),
            (
                json!({"spec": {"args": null}}),
                json!({"f:spec": {"f:args": {}}}),
            ),
            (
                json!({"spec": {"finalizers": ["b", "a"]}}),
                json!({"f:spec": {"f:finalizers": {"v:\"a\"": {}, "v:\"b\"": {}}}}),
            ),
            // An empty associative list and a null struct own nothing.
            (json!({"spec": {"finalizers": []}}), json!({})),
            (json!({"spec": null}), json!({})),
            (
                json!({"spec": {"ports": [{"port": 80, "protocol": "TCP", "name": "web"}]}}),
                json!({"f:spec": {"f:ports": {"k:{\"port\":80,\"protocol\":\"TCP\"}": {
                    ".": {}, "f:port": {}, "f:protocol": {}, "f:name": {}}}}}),
            ),
            (
                json!({"spec": {"selector": {"a": "b"}}}),
                json!({"f:spec": {"f:selector": {}}}),
            ),
            (
                json!({"spec": {"labels": {"a": "b", "c": "d"}}}),
                json!({"f:spec": {"f:labels": {"f:a": {}, "f:c": {}}}}),
            ),
            // An undeclared key holding a struct is a member with children.
            (
                json!({"spec": {"templates": {"web": {"image": "x"}}}}),
                json!({"f:spec": {"f:templates": {"f:web": {".": {}, "f:image": {}}}}}),
            ),
            // Preserved unknown fields: deduced (granular maps, atomic lists).
            (
                json!({"spec": {"extra": {"a": {"b": 1}, "l": [{"x": 1}]}}}),
                json!({"f:spec": {"f:extra": {"f:a": {".": {}, "f:b": {}}, "f:l": {}}}}),
            ),
        ];
        let s = toset_schema();
        for (obj, want) in cases {
            let got = field_set(&obj, Some(&s)).unwrap();
            assert_eq!(
                got,
                Set::from_value(&want).unwrap(),
                "{obj}: {}",
                got.to_json()
            );
        }
        // No schema at all: everything deduced.
        let got = field_set(&json!({"a": {"b": [1]}, "c": 1}), None).unwrap();
        assert_eq!(got.to_json(), r#"{"f:a":{"f:b":{},".":{}},"f:c":{}}"#);
    }

    #[test]
    fn map_list_items_need_their_keys() {
        let s = toset_schema();
        for (obj, err) in [
            (
                json!({"spec": {"ports": [{"port": 80}]}}),
                r#"associative list with keys has an element that omits key field "protocol""#,
            ),
            (
                json!({"spec": {"ports": [{"port": [1], "protocol": "TCP"}]}}),
                r#"associative list key field "port" has a value that is not a scalar"#,
            ),
            (
                json!({"spec": {"ports": ["x"]}}),
                "associative list with keys may not have non-map elements",
            ),
        ] {
            assert_eq!(field_set(&obj, Some(&s)).unwrap_err(), err, "{obj}");
        }
    }
}
