//! ObjectMeta and TypeMeta validation with upstream's texts, shared by every resource: custom
//! resources (the validation service's admission) and the built-in types (the gateway's
//! strategies). Pure.
//!
//! Follows k8s.io/apimachinery pkg/api/validation/objectmeta.go (`ValidateObjectMetaAccessor`,
//! `ValidateObjectMetaAccessorUpdate`, `ValidateAnnotations`, `ValidateOwnerReferences`,
//! `ValidateFinalizers`), pkg/apis/meta/v1/validation/validation.go (`ValidateLabels`,
//! `ValidateLabelSelector`), pkg/apis/meta/v1/helpers.go (`LabelSelectorAsSelector`) and
//! pkg/util/validation/validation.go (name and label texts).

use crate::FieldError;
use serde_json::{Map, Value};

/// Total size limit of all annotation keys and values (`TotalAnnotationSizeLimitB`).
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

pub use crate::validation::{
    is_dns1035_label, is_dns1123_label, is_dns1123_subdomain, is_qualified_name,
    is_valid_label_value,
};

/// `NameIsDNSSubdomain(name, prefix)`: a generateName prefix may end in '-'.
pub fn name_is_dns_subdomain(name: &str, prefix: bool) -> Vec<String> {
    let n = if prefix {
        mask_trailing_dash(name)
    } else {
        name.to_string()
    };
    is_dns1123_subdomain(&n)
}

fn mask_trailing_dash(name: &str) -> String {
    if name.len() > 1 && name.ends_with('-') {
        format!("{}a", &name[..name.len() - 1])
    } else {
        name.to_string()
    }
}

/// `path.ValidatePathSegmentName` (used for embedded resources).
pub fn validate_path_segment_name(name: &str, prefix: bool) -> Vec<String> {
    let mut errs = Vec::new();
    if !prefix {
        for illegal in [".", ".."] {
            if name == illegal {
                errs.push(format!("may not be '{illegal}'"));
            }
        }
    }
    for illegal in ["/", "%"] {
        if name.contains(illegal) {
            errs.push(format!("may not contain '{illegal}'"));
        }
    }
    errs
}

/// The string at key `k` of a JSON object; "" when absent or not a string.
pub fn str_field<'a>(m: &'a Map<String, Value>, k: &str) -> &'a str {
    m.get(k).and_then(Value::as_str).unwrap_or("")
}

fn string_map(v: Option<&Value>) -> Vec<(String, String)> {
    match v {
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
            .collect(),
        _ => Vec::new(),
    }
}

/// `ValidateLabels`.
pub fn validate_labels(labels: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    for (k, v) in string_map(labels) {
        for m in is_qualified_name(&k) {
            errs.push(FieldError::invalid(path, Value::String(k.clone()), m));
        }
        for m in is_valid_label_value(&v) {
            errs.push(FieldError::invalid(path, Value::String(v.clone()), m));
        }
    }
}

/// metav1 `ValidateLabelSelector` (pkg/apis/meta/v1/validation): `matchLabels` as labels,
/// each `matchExpressions` item's operator, values and key; the values' label rules are
/// skipped with `allow_invalid_label_value` (upstream's `AllowInvalidLabelValueInSelector`,
/// for objects stored before the rule).
pub fn validate_label_selector(
    selector: &Value,
    allow_invalid_label_value: bool,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    if !selector.is_object() {
        return;
    }
    validate_labels(
        selector.get("matchLabels"),
        &format!("{path}.matchLabels"),
        errs,
    );
    let exprs = selector.get("matchExpressions").and_then(Value::as_array);
    for (i, e) in exprs.into_iter().flatten().enumerate() {
        let p = format!("{path}.matchExpressions[{i}]");
        let values: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|v| v.as_str().unwrap_or(""))
            .collect();
        let op = e.get("operator").and_then(Value::as_str).unwrap_or("");
        match op {
            "In" | "NotIn" if values.is_empty() => errs.push(FieldError::required(
                format!("{p}.values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => errs.push(FieldError::forbidden(
                format!("{p}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            _ => errs.push(FieldError::invalid(
                format!("{p}.operator"),
                Value::String(op.into()),
                "not a valid selector operator",
            )),
        }
        let key = e.get("key").and_then(Value::as_str).unwrap_or("");
        for m in is_qualified_name(key) {
            errs.push(FieldError::invalid(
                format!("{p}.key"),
                Value::String(key.into()),
                m,
            ));
        }
        if !allow_invalid_label_value {
            for (n, v) in values.iter().enumerate() {
                for m in is_valid_label_value(v) {
                    errs.push(FieldError::invalid(
                        format!("{p}.values[{n}]"),
                        Value::String((*v).into()),
                        m,
                    ));
                }
            }
        }
    }
}

/// Whether metav1 `LabelSelectorAsSelector` accepts `selector` (every requirement passes
/// labels `NewRequirement`: a known operator with the right number of values, a qualified
/// key, valid label values).
pub fn label_selector_converts(selector: &Value) -> bool {
    let labels = selector.get("matchLabels").and_then(Value::as_object);
    let labels_ok = labels.into_iter().flatten().all(|(k, v)| {
        is_qualified_name(k).is_empty() && is_valid_label_value(v.as_str().unwrap_or("")).is_empty()
    });
    let exprs = selector.get("matchExpressions").and_then(Value::as_array);
    labels_ok
        && exprs.into_iter().flatten().all(|e| {
            let values: Vec<&str> = e
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|v| v.as_str().unwrap_or(""))
                .collect();
            let count_ok = match e.get("operator").and_then(Value::as_str).unwrap_or("") {
                "In" | "NotIn" => !values.is_empty(),
                "Exists" | "DoesNotExist" => values.is_empty(),
                _ => false,
            };
            count_ok
                && is_qualified_name(e.get("key").and_then(Value::as_str).unwrap_or("")).is_empty()
                && values.iter().all(|v| is_valid_label_value(v).is_empty())
        })
}

/// `ValidateAnnotations`.
pub fn validate_annotations(ann: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    let mut total = 0usize;
    for (k, v) in string_map(ann) {
        for m in is_qualified_name(&k.to_lowercase()) {
            errs.push(FieldError::invalid(path, Value::String(k.clone()), m));
        }
        total += k.len() + v.len();
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.push(FieldError::too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT));
    }
}

fn validate_owner_references(refs: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    let Some(Value::Array(list)) = refs else {
        return;
    };
    let mut first_controller = String::new();
    for r in list {
        let empty = Map::new();
        let m = r.as_object().unwrap_or(&empty);
        let api_version = str_field(m, "apiVersion");
        let kind = str_field(m, "kind");
        let version = api_version.rsplit('/').next().unwrap_or("");
        if version.is_empty() || api_version.matches('/').count() > 1 {
            errs.push(FieldError::invalid(
                format!("{path}.apiVersion"),
                Value::String(api_version.into()),
                "version must not be empty",
            ));
        }
        if kind.is_empty() {
            errs.push(FieldError::invalid(
                format!("{path}.kind"),
                Value::String(kind.into()),
                "kind must not be empty",
            ));
        }
        let name = str_field(m, "name");
        if name.is_empty() {
            errs.push(FieldError::invalid(
                format!("{path}.name"),
                Value::String(name.into()),
                "name must not be empty",
            ));
        }
        let uid = str_field(m, "uid");
        if uid.is_empty() {
            errs.push(FieldError::invalid(
                format!("{path}.uid"),
                Value::String(uid.into()),
                "uid must not be empty",
            ));
        }
        if m.get("controller").and_then(Value::as_bool) == Some(true) {
            let cur = format!("{kind}/{name}");
            if first_controller.is_empty() {
                first_controller = cur;
            } else {
                errs.push(FieldError::invalid(
                    path,
                    Value::Array(list.clone()),
                    format!(
                        "Only one reference can have Controller set to true. Found \"true\" in references for {first_controller} and {cur}"
                    ),
                ));
            }
        }
    }
}

fn validate_finalizers(fin: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    let Some(Value::Array(list)) = fin else {
        return;
    };
    let (mut orphan, mut delete) = (false, false);
    for f in list {
        let s = f.as_str().unwrap_or("");
        for m in is_qualified_name(s) {
            errs.push(FieldError::invalid(path, Value::String(s.into()), m));
        }
        orphan |= s == "orphan";
        delete |= s == "foregroundDeletion";
    }
    if orphan && delete {
        errs.push(FieldError::invalid(
            path,
            Value::Array(list.clone()),
            "finalizer orphan and foregroundDeletion cannot be both set",
        ));
    }
}

/// `ValidateObjectMetaAccessor(meta, namespaced, NameIsDNSSubdomain, "metadata")` on create.
pub fn validate_object_meta(meta: &Map<String, Value>, namespaced: bool) -> Vec<FieldError> {
    validate_object_meta_with(meta, namespaced, "metadata", name_is_dns_subdomain)
}

/// `ValidateObjectMetaAccessor` with the field path of the metadata (`path`) and the name rule
/// (`name_fn`, e.g. [`name_is_dns_subdomain`] or [`validate_path_segment_name`]) of the caller.
pub fn validate_object_meta_with(
    meta: &Map<String, Value>,
    namespaced: bool,
    path: &str,
    name_fn: fn(&str, bool) -> Vec<String>,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let gen_name = str_field(meta, "generateName");
    if !gen_name.is_empty() {
        for m in name_fn(gen_name, true) {
            errs.push(FieldError::invalid(
                format!("{path}.generateName"),
                Value::String(gen_name.into()),
                m,
            ));
        }
    }
    let name = str_field(meta, "name");
    if name.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.name"),
            "name or generateName is required",
        ));
    } else {
        for m in name_fn(name, false) {
            errs.push(FieldError::invalid(
                format!("{path}.name"),
                Value::String(name.into()),
                m,
            ));
        }
    }
    let ns = str_field(meta, "namespace");
    if namespaced {
        if ns.is_empty() {
            errs.push(FieldError::required(format!("{path}.namespace"), ""));
        } else {
            for m in is_dns1123_label(ns) {
                errs.push(FieldError::invalid(
                    format!("{path}.namespace"),
                    Value::String(ns.into()),
                    m,
                ));
            }
        }
    } else if !ns.is_empty() {
        errs.push(FieldError::forbidden(
            format!("{path}.namespace"),
            "not allowed on this type",
        ));
    }
    if let Some(g) = meta.get("generation").and_then(Value::as_i64)
        && g < 0
    {
        errs.push(FieldError::invalid(
            format!("{path}.generation"),
            Value::from(g),
            "must be greater than or equal to 0",
        ));
    }
    validate_common(meta, path, &mut errs);
    errs
}

fn validate_common(meta: &Map<String, Value>, path: &str, errs: &mut Vec<FieldError>) {
    validate_labels(meta.get("labels"), &format!("{path}.labels"), errs);
    validate_annotations(
        meta.get("annotations"),
        &format!("{path}.annotations"),
        errs,
    );
    validate_owner_references(
        meta.get("ownerReferences"),
        &format!("{path}.ownerReferences"),
        errs,
    );
    validate_finalizers(meta.get("finalizers"), &format!("{path}.finalizers"), errs);
}

/// `ValidateObjectMetaAccessorUpdate(new, old, "metadata")` (without the resourceVersion
/// presence check, which the gateway's update path owns).
pub fn validate_object_meta_update(
    new: &Map<String, Value>,
    old: &Map<String, Value>,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let path = "metadata";
    let ng = new.get("generation").and_then(Value::as_i64).unwrap_or(0);
    let og = old.get("generation").and_then(Value::as_i64).unwrap_or(0);
    if ng < og {
        errs.push(FieldError::invalid(
            format!("{path}.generation"),
            Value::from(ng),
            "must not be decremented",
        ));
    }
    for f in [
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    ] {
        let nv = new.get(f).cloned().unwrap_or(Value::Null);
        let ov = old.get(f).cloned().unwrap_or(Value::Null);
        let norm = |v: &Value| match v {
            Value::String(s) if s.is_empty() => Value::Null,
            other => other.clone(),
        };
        if norm(&nv) != norm(&ov) {
            let shown = if nv.is_null() {
                Value::String(String::new())
            } else {
                nv
            };
            errs.push(FieldError::invalid(
                format!("{path}.{f}"),
                shown,
                "field is immutable",
            ));
        }
    }
    validate_common(new, path, &mut errs);
    errs
}

/// `ValidateTypeMeta`: kind and apiVersion must be the served ones.
pub fn validate_type_meta(obj: &Value, api_version: &str, kind: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let k = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    if k != kind {
        errs.push(FieldError::invalid(
            "kind",
            Value::String(k.into()),
            format!("must be {kind}"),
        ));
    }
    let av = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    if av != api_version {
        errs.push(FieldError::invalid(
            "apiVersion",
            Value::String(av.into()),
            format!("must be {api_version}"),
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn texts(sel: Value, allow: bool) -> Vec<String> {
        let mut errs = Vec::new();
        validate_label_selector(&sel, allow, "s", &mut errs);
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn label_selectors() {
        let ok = json!({"matchLabels": {"a": "b"},
            "matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]},
                                 {"key": "x.io/k", "operator": "DoesNotExist"}]});
        assert!(texts(ok.clone(), false).is_empty());
        assert!(label_selector_converts(&ok));
        assert!(label_selector_converts(&json!({})));
        let bad = json!({"matchExpressions": [
            {"key": "k", "operator": "In"},
            {"key": "k", "operator": "Exists", "values": ["v"]},
            {"key": "-k", "operator": "Near", "values": ["a b"]}]});
        assert_eq!(
            texts(bad.clone(), false),
            [
                "s.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
                "s.matchExpressions[1].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                "s.matchExpressions[2].operator: Invalid value: \"Near\": not a valid selector operator",
                "s.matchExpressions[2].key: Invalid value: \"-k\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                "s.matchExpressions[2].values[0]: Invalid value: \"a b\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            ]
        );
        assert_eq!(texts(bad.clone(), true).len(), 4, "values not checked");
        assert!(!label_selector_converts(&bad));
        assert!(!label_selector_converts(
            &json!({"matchLabels": {"a": "b c"}})
        ));
    }
}
