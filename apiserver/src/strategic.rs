//! Strategic merge patch (`application/strategic-merge-patch+json`) for the built-in types
//! this server serves, following k8s.io/apimachinery/pkg/util/strategicpatch/patch.go
//! (`StrategicMergeMapPatch` with `MergeParallelList` and `IgnoreUnmatchedNulls`, as
//! apiserver's handlers/patch.go `strategicPatchObject` applies it) and the errors of
//! k8s.io/apimachinery/pkg/util/mergepatch/errors.go as patch.go
//! `interpretStrategicMergePatchError` maps them to HTTP codes.
//!
//! Sits in the write path of built-in resources (namespaces): the patch handler calls
//! [`apply`] with the stored object, the patch body and the type's [`Fields`], then goes on
//! exactly as for a merge patch. Custom resources never get here (upstream answers 415).
//!
//! Semantics:
//! - maps merge key by key, `null` deletes a key;
//! - a list merges only when the Go struct tag says `patchStrategy:"merge"` (with
//!   `patchMergeKey` for lists of objects), else the patch's list replaces it;
//! - directives: `$patch: replace|delete` in a map, `$patch: replace` and
//!   `{<mergeKey>: v, $patch: delete}` elements in a list of objects, `$retainKeys`,
//!   `$deleteFromPrimitiveList/<field>`, `$setElementOrder/<field>` (order precedence:
//!   `$setElementOrder` > patch list > live list; server-only items keep their live place).
//!
//! Differences from upstream kept on purpose: a value the original lacks is merged into an
//! empty value (so directives inside it never reach storage), where upstream copies it.

use crdplane_core::{ApiError, Reason};
use serde_json::{Map, Value};

/// Patch metadata of a struct's fields, from its Go struct tags (`patchStrategy`,
/// `patchMergeKey`); fields not listed merge as maps or are replaced as lists.
pub type Fields = &'static [(&'static str, Field)];

/// How strategic merge patch treats one field of a Go struct.
#[derive(Debug, Clone, Copy)]
pub enum Field {
    /// A nested struct.
    Struct(Fields),
    /// `patchStrategy:"merge"`: a list of scalars (`key` None) or of objects merged by `key`,
    /// whose items are described by `item`.
    MergeList {
        /// The merge key (`patchMergeKey`) of object items; `None` for a list of scalars.
        key: Option<&'static str>,
        /// The fields of one item.
        item: Fields,
    },
}

/// meta/v1 `ObjectMeta` (k8s.io/apimachinery/pkg/apis/meta/v1/types.go): `finalizers`
/// `patchStrategy:"merge"`, `ownerReferences` `patchStrategy:"merge" patchMergeKey:"uid"`.
pub const OBJECT_META: Fields = &[
    (
        "finalizers",
        Field::MergeList {
            key: None,
            item: &[],
        },
    ),
    (
        "ownerReferences",
        Field::MergeList {
            key: Some("uid"),
            item: &[],
        },
    ),
];

/// core/v1 `Namespace` (k8s.io/api/core/v1/types.go): `spec.finalizers` has no patch
/// strategy (atomic, replaced); `status.conditions` `patchStrategy:"merge" patchMergeKey:"type"`.
pub const NAMESPACE: Fields = &[
    ("metadata", Field::Struct(OBJECT_META)),
    (
        "status",
        Field::Struct(&[(
            "conditions",
            Field::MergeList {
                key: Some("type"),
                item: &[],
            },
        )]),
    ),
];

/// apiextensions/v1 `CustomResourceDefinition`: only its ObjectMeta carries patch strategies.
pub const CUSTOM_RESOURCE_DEFINITION: Fields = &[("metadata", Field::Struct(OBJECT_META))];

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";

// mergepatch/errors.go texts.
const ERR_BAD_JSON_DOC: &str = "invalid JSON document";
const ERR_NO_LIST_OF_LISTS: &str = "lists of lists are not supported";
const ERR_PRIMITIVE_LIST: &str = "invalid patch format of primitive list";
const ERR_RETAIN_KEYS: &str = "invalid patch format of retainKeys";
const ERR_SET_ELEMENT_ORDER: &str = "invalid patch format of setElementOrder list";

fn bad_request(m: &str) -> ApiError {
    ApiError::bad_request(m.to_string())
}

/// `interpretStrategicMergePatchError`'s 422 (`NewGenericServerResponse`).
fn unprocessable(m: &str) -> ApiError {
    ApiError::new(Reason::Invalid, m.to_string())
}

/// Errors upstream does not map: a plain error, a 500.
fn internal(m: String) -> ApiError {
    ApiError::new(Reason::InternalError, m)
}

fn lookup(fields: Fields, k: &str) -> Option<Field> {
    fields.iter().find(|(n, _)| *n == k).map(|(_, f)| *f)
}

fn sub_fields(fields: Fields, k: &str) -> Fields {
    match lookup(fields, k) {
        Some(Field::Struct(f)) => f,
        Some(Field::MergeList { item, .. }) => item,
        None => &[],
    }
}

/// Applies a strategic merge patch document (the request body) to `original`.
pub fn apply(original: &Value, patch: &[u8], fields: Fields) -> Result<Value, ApiError> {
    let patch: Value = serde_json::from_slice(patch).map_err(|e| bad_request(&e.to_string()))?;
    let Value::Object(patch) = patch else {
        return Err(bad_request(
            "json: cannot unmarshal non-object into Go value of type map[string]interface {}",
        ));
    };
    let Value::Object(original) = original.clone() else {
        return Err(bad_request(ERR_BAD_JSON_DOC));
    };
    Ok(Value::Object(merge_map(original, patch, fields)?))
}

/// `mergeMap`.
fn merge_map(
    mut original: Map<String, Value>,
    mut patch: Map<String, Value>,
    fields: Fields,
) -> Result<Map<String, Value>, ApiError> {
    if let Some(d) = patch.get(DIRECTIVE) {
        // handleDirectiveInMergeMap
        return match d.as_str() {
            Some("replace") => {
                patch.remove(DIRECTIVE);
                Ok(strip(patch, fields)?)
            }
            Some("delete") => Ok(Map::new()),
            _ => Err(internal(format!(
                "unknown patch type: {} in map: {}",
                go_value(d),
                Value::Object(patch.clone())
            ))),
        };
    }
    retain_keys(&mut original, &mut patch)?;
    set_element_order(&mut original, &mut patch, fields)?;
    for (k, pv) in patch {
        let (k, delete_list) = match k.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) {
            Some(rest) => {
                if rest.contains('/') {
                    return Err(bad_request(ERR_PRIMITIVE_LIST));
                }
                (rest.to_string(), true)
            }
            None if k.starts_with('$') && k.contains('/') => continue,
            None => (k, false),
        };
        if pv.is_null() {
            original.remove(&k);
            continue;
        }
        let Some(ov) = original.remove(&k) else {
            if !delete_list {
                original.insert(k.clone(), fresh(pv, fields, &k)?);
            }
            continue;
        };
        let merged = match (ov, pv) {
            // `$patch: delete` leaves an empty map, which the typed object's `omitempty`
            // drops: the key goes.
            (Value::Object(_), Value::Object(p))
                if p.get(DIRECTIVE).and_then(Value::as_str) == Some("delete") =>
            {
                continue;
            }
            (Value::Object(o), Value::Object(p)) => {
                let m = merge_map(o, p, sub_fields(fields, &k))?;
                Value::Object(m)
            }
            (Value::Array(o), Value::Array(p)) => match lookup(fields, &k) {
                Some(Field::MergeList { key, item }) => {
                    Value::Array(merge_list(o, p, key, item, delete_list)?)
                }
                _ => Value::Array(p),
            },
            // A delete list whose target is not a list leaves the original alone.
            (ov, _) if delete_list => ov,
            (_, pv) => fresh(pv, fields, &k)?,
        };
        original.insert(k, merged);
    }
    Ok(original)
}

/// A patch value with nothing to merge into: merged into an empty value of its type, which
/// drops nulls (`discardNullValuesFromPatch`) and directives.
fn fresh(pv: Value, fields: Fields, k: &str) -> Result<Value, ApiError> {
    Ok(match pv {
        Value::Object(p) => Value::Object(merge_map(Map::new(), p, sub_fields(fields, k))?),
        Value::Array(p) => match lookup(fields, k) {
            Some(Field::MergeList { key, item }) => {
                Value::Array(merge_list(Vec::new(), p, key, item, false)?)
            }
            _ => Value::Array(p),
        },
        v => v,
    })
}

/// A replacing map (`$patch: replace`) without directives or nulls below it.
fn strip(patch: Map<String, Value>, fields: Fields) -> Result<Map<String, Value>, ApiError> {
    merge_map(Map::new(), patch, fields)
}

/// `applyRetainKeysDirective`.
fn retain_keys(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
) -> Result<(), ApiError> {
    let Some(keep) = patch.remove(RETAIN_KEYS) else {
        return Ok(());
    };
    let Value::Array(keep) = keep else {
        return Err(internal(format!(
            "expected a slice, but received a {}",
            go_kind(&keep)
        )));
    };
    let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
    for (k, v) in patch.iter() {
        if v.is_null()
            || k.starts_with(DELETE_FROM_PRIMITIVE_LIST)
            || k.starts_with(SET_ELEMENT_ORDER)
        {
            continue;
        }
        if !keep.contains(&k.as_str()) {
            return Err(bad_request(ERR_RETAIN_KEYS));
        }
    }
    original.retain(|k, _| keep.contains(&k.as_str()));
    Ok(())
}

/// `mergePatchIntoOriginal`: each `$setElementOrder/<field>` with its patch list.
fn set_element_order(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
    fields: Fields,
) -> Result<(), ApiError> {
    let keys: Vec<String> = patch
        .keys()
        .filter(|k| k.starts_with(SET_ELEMENT_ORDER))
        .cloned()
        .collect();
    for dk in keys {
        let k = dk[SET_ELEMENT_ORDER.len()..].to_string();
        if k.contains('/') {
            return Err(bad_request(ERR_SET_ELEMENT_ORDER));
        }
        let Some(Value::Array(order)) = patch.remove(&dk) else {
            return Err(bad_request(ERR_SET_ELEMENT_ORDER));
        };
        let (key, item, strategy_merge) = match lookup(fields, &k) {
            Some(Field::MergeList { key, item }) => (key, item, true),
            _ => (None, &[][..], false),
        };
        let orig = match original.get(&k) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a.clone(),
            Some(_) => return Err(bad_request(ERR_SET_ELEMENT_ORDER)),
        };
        let pl = match patch.remove(&k) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a,
            Some(_) => return Err(bad_request(ERR_SET_ELEMENT_ORDER)),
        };
        validate_order(&pl, &order, key)?;
        if orig.is_empty() && pl.is_empty() {
            continue;
        }
        let merged = if orig.is_empty() {
            fresh(Value::Array(pl), fields, &k)?
                .as_array()
                .cloned()
                .unwrap_or_default()
        } else if pl.is_empty() {
            orig.clone()
        } else if strategy_merge {
            merge_list(orig.clone(), pl, key, item, false)?
        } else {
            pl
        };
        let (in_order, server_only): (Vec<Value>, Vec<Value>) = merged
            .into_iter()
            .partition(|v| index_of(&order, v, key).is_some());
        original.insert(
            k,
            Value::Array(normalize_order(in_order, server_only, &order, &orig, key)),
        );
    }
    Ok(())
}

/// `validatePatchWithSetOrderList`: the patch list's items (deletions aside) appear in the
/// `$setElementOrder` list in the same relative order.
fn validate_order(pl: &[Value], order: &[Value], key: Option<&str>) -> Result<(), ApiError> {
    if pl.is_empty() || order.is_empty() {
        return Ok(());
    }
    let items: Vec<&Value> = pl.iter().filter(|v| !has_directive(v)).collect();
    let (mut p, mut s) = (0, 0);
    while p < items.len() && s < order.len() {
        if same_item(items[p], &order[s], key) {
            p += 1;
        }
        s += 1;
    }
    if p < items.len() {
        return Err(internal(format!(
            "The order in patch list:\n{}\n doesn't match $setElementOrder list:\n{}\n",
            Value::Array(pl.to_vec()),
            Value::Array(order.to_vec())
        )));
    }
    Ok(())
}

fn has_directive(v: &Value) -> bool {
    v.as_object().is_some_and(|m| m.contains_key(DIRECTIVE))
}

fn same_item(a: &Value, b: &Value, key: Option<&str>) -> bool {
    match key {
        Some(k) => a.get(k).is_some() && a.get(k) == b.get(k),
        None => a == b,
    }
}

fn index_of(list: &[Value], v: &Value, key: Option<&str>) -> Option<usize> {
    list.iter().position(|x| same_item(v, x, key))
}

/// `mergeSlice` (with `mergeSliceWithSpecialElements`, `mergeSliceWithoutSpecialElements`
/// and `normalizeElementOrder`).
fn merge_list(
    original: Vec<Value>,
    patch: Vec<Value>,
    key: Option<&str>,
    item: Fields,
    delete_list: bool,
) -> Result<Vec<Value>, ApiError> {
    if original.is_empty() && patch.is_empty() {
        return Ok(original);
    }
    if original.iter().chain(patch.iter()).any(Value::is_array) {
        return Err(unprocessable(ERR_NO_LIST_OF_LISTS));
    }
    let maps = original
        .iter()
        .chain(patch.iter())
        .next()
        .is_some_and(Value::is_object);
    if !maps {
        if delete_list {
            // deleteFromSlice
            return Ok(original
                .into_iter()
                .filter(|v| !patch.contains(v))
                .collect());
        }
        // deduplicateScalars of original + patch, then the patch's order.
        let mut merged: Vec<Value> = Vec::new();
        for v in original.iter().chain(patch.iter()) {
            if !merged.contains(v) {
                merged.push(v.clone());
            }
        }
        let (in_patch, server_only): (Vec<Value>, Vec<Value>) =
            merged.into_iter().partition(|v| patch.contains(v));
        return Ok(normalize_order(
            in_patch,
            server_only,
            &patch,
            &original,
            None,
        ));
    }
    let Some(mk) = key else {
        return Err(internal(
            "cannot merge lists without merge key for a list of objects".to_string(),
        ));
    };
    let live = original.clone();
    // mergeSliceWithSpecialElements
    let mut original = original;
    let mut plain = Vec::new();
    let mut replace = false;
    for v in patch.iter() {
        let Value::Object(m) = v else {
            return Err(internal(
                "cannot merge a list of objects with a scalar".into(),
            ));
        };
        match m.get(DIRECTIVE) {
            None => plain.push(v.clone()),
            Some(d) => match d.as_str() {
                Some("delete") => {
                    let Some(mv) = m.get(mk) else {
                        return Err(no_merge_key(v, mk));
                    };
                    original.retain(|o| o.get(mk) != Some(mv));
                }
                Some("replace") => replace = true,
                Some("merge") => {
                    return Err(internal(
                        "merging lists cannot yet be specified in the patch".into(),
                    ));
                }
                _ => {
                    return Err(internal(format!(
                        "unknown patch type: {} in map: {v}",
                        go_value(d)
                    )));
                }
            },
        }
    }
    let (mut merged, rest) = if replace {
        (Vec::new(), plain.clone())
    } else {
        (original, plain.clone())
    };
    // mergeSliceWithoutSpecialElements
    for v in rest {
        let Some(mv) = v.get(mk).cloned() else {
            return Err(no_merge_key(&v, mk));
        };
        let Value::Object(p) = v else { unreachable!() };
        match merged.iter().position(|o| o.get(mk) == Some(&mv)) {
            Some(i) => {
                let o = match std::mem::take(&mut merged[i]) {
                    Value::Object(o) => o,
                    _ => Map::new(),
                };
                merged[i] = Value::Object(merge_map(o, p, item)?);
            }
            None => merged.push(Value::Object(merge_map(Map::new(), p, item)?)),
        }
    }
    let (in_patch, server_only): (Vec<Value>, Vec<Value>) = merged
        .into_iter()
        .partition(|v| index_of(&plain, v, Some(mk)).is_some());
    Ok(normalize_order(
        in_patch,
        server_only,
        &plain,
        &live,
        Some(mk),
    ))
}

fn no_merge_key(v: &Value, k: &str) -> ApiError {
    internal(format!("map: {v} does not contain declared merge key: {k}"))
}

/// `normalizeElementOrder`: patch items in `patch_order`, server-only items in live order,
/// then interleaved by the live order (`mergeSortedSlice`).
fn normalize_order(
    mut patch: Vec<Value>,
    mut server_only: Vec<Value>,
    patch_order: &[Value],
    live: &[Value],
    key: Option<&str>,
) -> Vec<Value> {
    let pos = |order: &[Value], v: &Value| index_of(order, v, key).unwrap_or(usize::MAX);
    patch.sort_by_key(|v| pos(patch_order, v));
    server_only.sort_by_key(|v| pos(live, v));
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::with_capacity(patch.len() + server_only.len());
    while i < server_only.len() || j < patch.len() {
        if i >= server_only.len() {
            out.push(patch[j].clone());
            j += 1;
        } else if j >= patch.len() {
            out.push(server_only[i].clone());
            i += 1;
        } else {
            let (li, ri) = (
                index_of(live, &server_only[i], key),
                index_of(live, &patch[j], key),
            );
            if matches!((li, ri), (Some(l), Some(r)) if l < r) {
                out.push(server_only[i].clone());
                i += 1;
            } else {
                out.push(patch[j].clone());
                j += 1;
            }
        }
    }
    out
}

fn go_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

fn go_kind(v: &Value) -> &'static str {
    match v {
        Value::Object(_) => "map",
        Value::Array(_) => "slice",
        Value::String(_) => "string",
        Value::Bool(_) => "bool",
        Value::Number(_) => "float64",
        Value::Null => "invalid",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const POD_LIKE: Fields = &[
        ("metadata", Field::Struct(OBJECT_META)),
        (
            "spec",
            Field::Struct(&[(
                "containers",
                Field::MergeList {
                    key: Some("name"),
                    item: &[(
                        "ports",
                        Field::MergeList {
                            key: Some("containerPort"),
                            item: &[],
                        },
                    )],
                },
            )]),
        ),
    ];

    fn smp(original: Value, patch: Value, fields: Fields) -> Result<Value, ApiError> {
        apply(&original, &serde_json::to_vec(&patch).unwrap(), fields)
    }

    fn ok(original: Value, patch: Value, fields: Fields) -> Value {
        smp(original, patch, fields).unwrap()
    }

    /// Cases follow strategicpatch/patch_test.go `TestCustomStrategicMergePatch` and the
    /// `createStrategicMergePatchTestCaseData` YAML table (testdata of the same file):
    /// named after the upstream case each mirrors.
    #[test]
    fn maps() {
        // "nil value deletes key" / "add new key" / "replace existing value"
        assert_eq!(
            ok(
                json!({"metadata": {"labels": {"a": "1", "b": "2"}}}),
                json!({"metadata": {"labels": {"a": null, "b": "3", "c": "4"}}}),
                NAMESPACE
            ),
            json!({"metadata": {"labels": {"b": "3", "c": "4"}}})
        );
        // "$patch: replace" in a map
        assert_eq!(
            ok(
                json!({"metadata": {"labels": {"a": "1", "b": "2"}}}),
                json!({"metadata": {"labels": {"$patch": "replace", "c": "3"}}}),
                NAMESPACE
            ),
            json!({"metadata": {"labels": {"c": "3"}}})
        );
        // "$patch: delete" in a map: the map goes
        assert_eq!(
            ok(
                json!({"metadata": {"labels": {"a": "1"}, "name": "x"}}),
                json!({"metadata": {"labels": {"$patch": "delete"}}}),
                NAMESPACE
            ),
            json!({"metadata": {"name": "x"}})
        );
        // An unknown directive is an error.
        assert!(
            smp(
                json!({"a": {}}),
                json!({"a": {"$patch": "nonsense"}}),
                NAMESPACE
            )
            .is_err()
        );
        // A value the original lacks: nulls dropped.
        assert_eq!(
            ok(
                json!({}),
                json!({"metadata": {"labels": {"a": "1", "b": null}}}),
                NAMESPACE
            ),
            json!({"metadata": {"labels": {"a": "1"}}})
        );
    }

    #[test]
    fn lists() {
        // A list without patch strategy is replaced (spec.finalizers is atomic).
        assert_eq!(
            ok(
                json!({"spec": {"finalizers": ["kubernetes", "x"]}}),
                json!({"spec": {"finalizers": ["y"]}}),
                NAMESPACE
            ),
            json!({"spec": {"finalizers": ["y"]}})
        );
        // "merge lists of scalars": metadata.finalizers, deduplicated; patch items in patch
        // order, a server-only item placed by mergeSortedSlice (after items it cannot be
        // compared with).
        assert_eq!(
            ok(
                json!({"metadata": {"finalizers": ["a", "b"]}}),
                json!({"metadata": {"finalizers": ["c", "a"]}}),
                NAMESPACE
            ),
            json!({"metadata": {"finalizers": ["c", "a", "b"]}})
        );
        // "$deleteFromPrimitiveList"
        assert_eq!(
            ok(
                json!({"metadata": {"finalizers": ["a", "b", "c"]}}),
                json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["b"]}}),
                NAMESPACE
            ),
            json!({"metadata": {"finalizers": ["a", "c"]}})
        );
        // "merge lists of maps": status.conditions by type; new items appended.
        assert_eq!(
            ok(
                json!({"status": {"conditions": [
                    {"type": "A", "status": "True"}, {"type": "B", "status": "False"}]}}),
                json!({"status": {"conditions": [
                    {"type": "B", "status": "True"}, {"type": "C", "status": "True"}]}}),
                NAMESPACE
            ),
            json!({"status": {"conditions": [
                {"type": "A", "status": "True"}, {"type": "B", "status": "True"},
                {"type": "C", "status": "True"}]}})
        );
        // "delete items in lists of maps" ($patch: delete with the merge key)
        assert_eq!(
            ok(
                json!({"metadata": {"ownerReferences": [{"uid": "1", "name": "a"}, {"uid": "2", "name": "b"}]}}),
                json!({"metadata": {"ownerReferences": [{"uid": "1", "$patch": "delete"}]}}),
                NAMESPACE
            ),
            json!({"metadata": {"ownerReferences": [{"uid": "2", "name": "b"}]}})
        );
        // "replace list of maps" ($patch: replace element)
        assert_eq!(
            ok(
                json!({"status": {"conditions": [{"type": "A"}, {"type": "B"}]}}),
                json!({"status": {"conditions": [{"type": "C"}, {"$patch": "replace"}]}}),
                NAMESPACE
            ),
            json!({"status": {"conditions": [{"type": "C"}]}})
        );
        // A merge-list item without its merge key: error.
        assert!(
            smp(
                json!({"status": {"conditions": [{"type": "A"}]}}),
                json!({"status": {"conditions": [{"status": "x"}]}}),
                NAMESPACE
            )
            .is_err()
        );
        // "lists of lists are not supported" (422)
        let e = smp(
            json!({"metadata": {"finalizers": ["a"]}}),
            json!({"metadata": {"finalizers": [["b"]]}}),
            NAMESPACE,
        )
        .unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (422, "lists of lists are not supported")
        );
        // Nested merge lists: containers by name, ports by containerPort.
        assert_eq!(
            ok(
                json!({"spec": {"containers": [
                    {"name": "a", "image": "1", "ports": [{"containerPort": 80}]},
                    {"name": "b", "image": "2"}]}}),
                json!({"spec": {"containers": [
                    {"name": "a", "ports": [{"containerPort": 81}]}]}}),
                POD_LIKE
            ),
            json!({"spec": {"containers": [
                // 81 cannot be compared with the live order: it goes first.
                {"name": "a", "image": "1", "ports": [{"containerPort": 81}, {"containerPort": 80}]},
                {"name": "b", "image": "2"}]}})
        );
    }

    /// patch_test.go `TestStrategicMergePatch` set-element-order cases ("$setElementOrder
    /// with server-only items", "reorder"): the directive's order wins, server-only items keep
    /// their live position.
    #[test]
    fn set_element_order() {
        assert_eq!(
            ok(
                json!({"metadata": {"finalizers": ["a", "b", "c"]}}),
                json!({"metadata": {"$setElementOrder/finalizers": ["c", "a"], "finalizers": ["c"]}}),
                NAMESPACE
            ),
            // b precedes c live, so it stays before c (mergeSortedSlice).
            json!({"metadata": {"finalizers": ["b", "c", "a"]}})
        );
        assert_eq!(
            ok(
                json!({"status": {"conditions": [{"type": "A", "s": 1}, {"type": "B", "s": 2}, {"type": "S", "s": 0}]}}),
                json!({"status": {"$setElementOrder/conditions": [{"type": "B"}, {"type": "A"}],
                    "conditions": [{"type": "A", "s": 3}]}}),
                NAMESPACE
            ),
            json!({"status": {"conditions": [{"type": "B", "s": 2}, {"type": "A", "s": 3}, {"type": "S", "s": 0}]}})
        );
        // A patch list whose order contradicts the directive: error.
        assert!(
            smp(
                json!({"metadata": {"finalizers": ["a", "b"]}}),
                json!({"metadata": {"$setElementOrder/finalizers": ["a", "b"], "finalizers": ["b", "a"]}}),
                NAMESPACE
            )
            .is_err()
        );
    }

    /// patch_test.go retainKeys cases: keys not listed are cleared; a patch key missing from
    /// the list is a 400 "invalid patch format of retainKeys".
    #[test]
    fn retain_keys() {
        assert_eq!(
            ok(
                json!({"spec": {"a": 1, "b": 2, "c": 3}}),
                json!({"spec": {"$retainKeys": ["a", "c"], "c": 4}}),
                NAMESPACE
            ),
            json!({"spec": {"a": 1, "c": 4}})
        );
        let e = smp(
            json!({"spec": {"a": 1}}),
            json!({"spec": {"$retainKeys": ["a"], "b": 4}}),
            NAMESPACE,
        )
        .unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (400, "invalid patch format of retainKeys")
        );
    }

    #[test]
    fn bad_documents() {
        assert_eq!(
            apply(&json!({}), b"{not json", NAMESPACE).unwrap_err().code,
            400
        );
        assert_eq!(apply(&json!({}), b"[1]", NAMESPACE).unwrap_err().code, 400);
    }
}
