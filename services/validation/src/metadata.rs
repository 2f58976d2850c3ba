//! ObjectMeta, apiVersion/kind and embedded-resource checks for custom resources.
//!
//! Runs in [`crate::admit`] before the schema passes. Follows
//! k8s.io/apimachinery pkg/api/validation/objectmeta.go (`ValidateObjectMetaAccessor`,
//! `ValidateObjectMetaAccessorUpdate`, `ValidateAnnotations`, `ValidateOwnerReferences`,
//! `ValidateFinalizers`), pkg/apis/meta/v1/validation/validation.go (`ValidateLabels`),
//! pkg/util/validation/validation.go (name and label texts), the type checks of
//! k8s.io/apiextensions-apiserver pkg/registry/customresource/validator.go
//! (`ValidateTypeMeta`) and pkg/apiserver/schema/objectmeta/validation.go (embedded resources).

use crate::structural::Schema;
use crdplane_core::FieldError;
use serde_json::{Map, Value};

pub use crdplane_core::objectmeta::*;

// ---------------------------------------------------------------------------------------
// Embedded resources (pkg/apiserver/schema/objectmeta/validation.go)

/// Validates every `x-kubernetes-embedded-resource` object below the root.
pub fn validate_embedded(schema: &Schema, obj: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut p = path.to_string();
    embedded_walk(schema, obj, &mut p, &mut errs, 0, true);
    errs
}

fn embedded_walk(
    s: &Schema,
    x: &Value,
    p: &mut String,
    errs: &mut Vec<FieldError>,
    depth: usize,
    root: bool,
) {
    if depth > 512 || !s.has_embedded {
        return;
    }
    match x {
        Value::Object(m) => {
            if s.embedded && !root {
                validate_embedded_resource(m, p, errs);
            }
            for (k, v) in m {
                let sub = s.property(k).or_else(|| s.additional_schema());
                if let Some(sub) = sub {
                    let l = p.len();
                    if !p.is_empty() {
                        p.push('.');
                    }
                    p.push_str(k);
                    embedded_walk(sub, v, p, errs, depth + 1, false);
                    p.truncate(l);
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = s.items.as_deref() {
                for (i, v) in a.iter().enumerate() {
                    let l = p.len();
                    p.push_str(&format!("[{i}]"));
                    embedded_walk(items, v, p, errs, depth + 1, false);
                    p.truncate(l);
                }
            }
        }
        _ => {}
    }
}

fn join(p: &str, k: &str) -> String {
    if p.is_empty() {
        k.to_string()
    } else {
        format!("{p}.{k}")
    }
}

fn validate_embedded_resource(m: &Map<String, Value>, p: &str, errs: &mut Vec<FieldError>) {
    if !m.contains_key("apiVersion") {
        errs.push(FieldError::required(
            join(p, "apiVersion"),
            "must not be empty",
        ));
    }
    if !m.contains_key("kind") {
        errs.push(FieldError::required(join(p, "kind"), "must not be empty"));
    }
    for (k, v) in m {
        match k.as_str() {
            "apiVersion" => match v.as_str() {
                None => errs.push(FieldError::invalid(
                    join(p, "apiVersion"),
                    v.clone(),
                    "must be a string",
                )),
                Some("") => errs.push(FieldError::invalid(
                    join(p, "apiVersion"),
                    v.clone(),
                    "must not be empty",
                )),
                Some(av) => {
                    if av.matches('/').count() > 1 || av.starts_with('/') || av.ends_with('/') {
                        errs.push(FieldError::invalid(
                            join(p, "apiVersion"),
                            v.clone(),
                            format!("unexpected GroupVersion string: {av}"),
                        ));
                    }
                }
            },
            "kind" => match v.as_str() {
                None => errs.push(FieldError::invalid(
                    join(p, "kind"),
                    v.clone(),
                    "must be a string",
                )),
                Some("") => errs.push(FieldError::invalid(
                    join(p, "kind"),
                    v.clone(),
                    "must not be empty",
                )),
                Some(kind) => {
                    let e = is_dns1035_label(&kind.to_lowercase());
                    if !e.is_empty() {
                        errs.push(FieldError::invalid(
                            join(p, "kind"),
                            v.clone(),
                            format!(
                                "may have mixed case, but should otherwise match: {}",
                                e.join(",")
                            ),
                        ));
                    }
                }
            },
            "metadata" => match v {
                Value::Object(meta) => {
                    let mut meta = meta.clone();
                    if str_field(&meta, "name").is_empty() {
                        meta.insert("name".into(), Value::String("fakename".into()));
                    }
                    let ns = !str_field(&meta, "namespace").is_empty();
                    errs.extend(validate_object_meta_with(
                        &meta,
                        ns,
                        &join(p, "metadata"),
                        validate_path_segment_name,
                    ));
                }
                other => errs.push(FieldError::invalid(
                    join(p, "metadata"),
                    other.clone(),
                    "expected object",
                )),
            },
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta_errs(meta: Value, namespaced: bool) -> Vec<String> {
        validate_object_meta(meta.as_object().unwrap(), namespaced)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    // Cases follow staging/src/k8s.io/apimachinery/pkg/api/validation/objectmeta_test.go
    #[test]
    fn object_meta_create() {
        assert_eq!(
            meta_errs(json!({"name": "Bad_Name", "namespace": "default"}), true),
            vec![
                "metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
            ]
        );
        assert_eq!(
            meta_errs(json!({}), true),
            vec![
                "metadata.name: Required value: name or generateName is required",
                "metadata.namespace: Required value"
            ]
        );
        assert_eq!(
            meta_errs(json!({"name": "a", "namespace": "x"}), false),
            vec!["metadata.namespace: Forbidden: not allowed on this type"]
        );
        assert!(
            meta_errs(
                json!({"generateName": "foo-", "name": "foo-abcde", "namespace": "d"}),
                true
            )
            .is_empty()
        );
        let big = "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT);
        assert_eq!(
            meta_errs(json!({"name": "a", "annotations": {"k": big}}), false),
            vec!["metadata.annotations: Too long: may not be more than 262144 bytes"]
        );
        assert_eq!(
            meta_errs(
                json!({"name": "a", "labels": {"a/b/c": "v", "ok": "bad value"}}),
                false
            ),
            vec![
                "metadata.labels: Invalid value: \"a/b/c\": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                "metadata.labels: Invalid value: \"bad value\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
            ]
        );
    }

    #[test]
    fn type_meta_and_update() {
        let errs: Vec<String> = validate_type_meta(
            &json!({"apiVersion": "x/v1", "kind": "X"}),
            "stable.example.com/v1",
            "CronTab",
        )
        .iter()
        .map(ToString::to_string)
        .collect();
        assert_eq!(
            errs,
            vec![
                "kind: Invalid value: \"X\": must be CronTab",
                "apiVersion: Invalid value: \"x/v1\": must be stable.example.com/v1"
            ]
        );
        let old = json!({"name": "a", "uid": "1", "generation": 2});
        let new = json!({"name": "b", "uid": "1", "generation": 1});
        let errs: Vec<String> =
            validate_object_meta_update(new.as_object().unwrap(), old.as_object().unwrap())
                .iter()
                .map(ToString::to_string)
                .collect();
        assert_eq!(
            errs,
            vec![
                "metadata.generation: Invalid value: 1: must not be decremented",
                "metadata.name: Invalid value: \"b\": field is immutable"
            ]
        );
    }
}
