//! The `/scale` subresource of custom resources: `autoscaling/v1` `Scale` views of an object
//! (GET) and writes of `spec.replicas` back into it (PUT, merge/JSON PATCH).
//!
//! This module is the pure part: the Scale of an object, a written Scale and its copy into
//! the object, and the validation of the scale paths on every write. Where it sits: below
//! the `/scale` endpoint (`scale_rest`) and the admission of custom resources
//! (`cr_store` validates the scale fields of every write), above nothing of the
//! gateway but the CRD model ([`crate::crd`]).
//!
//! Follows apiextensions-apiserver pkg/registry/customresource/etcd.go (`ScaleREST`,
//! `scaleFromCustomResource`, `scaleUpdatedObjectInfo`) and validator.go
//! (`ValidateScaleSpec`, `ValidateScaleStatus`), with apimachinery's unstructured helpers
//! (`NestedFieldNoCopy`, `NestedInt64`, `NestedString`, `SetNestedField`) for the paths.

use crdplane_core::field::{FieldError, go_quote};
use crdplane_core::gofmt::{go_sprint as go_plain, go_type};
use crdplane_core::{ApiError, Reason};
use serde::Serialize;
use serde_json::{Map, Value};

/// `replicas` placeholder of an object that has no value at `specReplicasPath` (upstream:
/// the smallest int32), so a patch that does not set replicas can be told apart.
pub const INVALID_SPEC_REPLICAS: i64 = i32::MIN as i64;

/// The three JSON paths of a CRD version's `subresources.scale`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ScalePaths {
    /// e.g. `.spec.replicas` (required).
    pub spec_replicas: String,
    /// e.g. `.status.replicas`.
    pub status_replicas: String,
    /// e.g. `.status.labelSelector`; `None` when not declared.
    pub label_selector: Option<String>,
}

impl ScalePaths {
    /// From the CRD's `subresources.scale` object.
    pub fn from_crd(scale: &Value) -> Self {
        let s = |k: &str| scale.get(k).and_then(Value::as_str).map(str::to_string);
        Self {
            spec_replicas: s("specReplicasPath").unwrap_or_default(),
            status_replicas: s("statusReplicasPath").unwrap_or_default(),
            label_selector: s("labelSelectorPath").filter(|p| !p.is_empty()),
        }
    }
}

/// Upstream `splitReplicasPath`: the path split at dots, one leading dot ignored.
pub fn split_path(path: &str) -> Vec<&str> {
    path.strip_prefix('.').unwrap_or(path).split('.').collect()
}

fn json_path(fields: &[&str]) -> String {
    format!(".{}", fields.join("."))
}

/// `NestedFieldNoCopy`: the value at `fields` (`None` when absent or under a null), or the
/// accessor error of a non-map on the way.
pub fn nested_field<'a>(obj: &'a Value, fields: &[&str]) -> Result<Option<&'a Value>, String> {
    let mut val = obj;
    for (i, f) in fields.iter().enumerate() {
        match val {
            Value::Null => return Ok(None),
            Value::Object(m) => match m.get(*f) {
                Some(v) => val = v,
                None => return Ok(None),
            },
            other => {
                return Err(format!(
                    "{} accessor error: {} is of the type {}, expected map[string]interface{{}}",
                    json_path(&fields[..=i]),
                    go_plain(other),
                    go_type(other)
                ));
            }
        }
    }
    Ok(Some(val))
}

/// `NestedInt64`: (value, found); a present non-integer is an accessor error.
pub fn nested_int64(obj: &Value, fields: &[&str]) -> Result<(i64, bool), String> {
    match nested_field(obj, fields)? {
        None => Ok((0, false)),
        Some(Value::Number(n)) if n.is_i64() => Ok((n.as_i64().unwrap_or(0), true)),
        Some(other) => Err(format!(
            "{} accessor error: {} is of the type {}, expected int64",
            json_path(fields),
            go_plain(other),
            go_type(other)
        )),
    }
}

/// `NestedString`: (value, found); a present non-string is an accessor error.
pub fn nested_string(obj: &Value, fields: &[&str]) -> Result<(String, bool), String> {
    match nested_field(obj, fields)? {
        None => Ok((String::new(), false)),
        Some(Value::String(s)) => Ok((s.clone(), true)),
        Some(other) => Err(format!(
            "{} accessor error: {} is of the type {}, expected string",
            json_path(fields),
            go_plain(other),
            go_type(other)
        )),
    }
}

/// `SetNestedField`: sets `value` at `fields`, creating (or replacing null with) maps on the
/// way; a non-map on the way is an error, as upstream.
pub fn set_nested_field(obj: &mut Value, fields: &[&str], value: Value) -> Result<(), String> {
    let Some((last, parents)) = fields.split_last() else {
        return Err("empty path".into());
    };
    let mut cur = obj;
    for (i, f) in parents.iter().enumerate() {
        let Value::Object(m) = cur else {
            return Err(format!(
                "value cannot be set because {} is not a map[string]interface{{}}",
                json_path(&fields[..i])
            ));
        };
        let e = m.entry(f.to_string()).or_insert(Value::Null);
        if e.is_null() {
            *e = Value::Object(Map::new());
        }
        if !e.is_object() {
            return Err(format!(
                "value cannot be set because {} is not a map[string]interface{{}}",
                json_path(&fields[..=i])
            ));
        }
        cur = e;
    }
    match cur {
        Value::Object(m) => {
            m.insert(last.to_string(), value);
            Ok(())
        }
        _ => Err(format!(
            "value cannot be set because {} is not a map[string]interface{{}}",
            json_path(parents)
        )),
    }
}

// ---- the autoscaling/v1 Scale document ---------------------------------------------------

/// `autoscaling/v1` `Scale`, serialized in upstream's field order and omitempty rules.
///
/// Hand-written rather than k8s-openapi's `autoscaling::v1::Scale` on purpose: that type
/// writes `apiVersion` first and the metadata fields in alphabetical order, and the Scale
/// is pinned byte for byte to upstream's answer (`tests/subresources.rs`,
/// `scale_of_an_object_is_upstreams_document`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scale {
    /// Always `Scale`.
    pub kind: &'static str,
    /// Always `autoscaling/v1`.
    #[serde(rename = "apiVersion")]
    pub api_version: &'static str,
    /// The scaled object's identity (name, namespace, uid, resourceVersion, creation time).
    pub metadata: ScaleMeta,
    /// Desired replicas.
    pub spec: ScaleSpec,
    /// Observed replicas and label selector.
    pub status: ScaleStatus,
}

/// The `metadata` of a Scale: copied from the scaled custom resource.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct ScaleMeta {
    /// The object's `metadata.name`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The object's `metadata.namespace`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// The object's `metadata.uid`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// The object's `metadata.resourceVersion`.
    #[serde(rename = "resourceVersion", skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    /// `metav1.Time` is a struct: a zero time is written as `null`, never omitted.
    #[serde(rename = "creationTimestamp")]
    pub creation_timestamp: Value,
}

/// `ScaleSpec`: the desired state.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct ScaleSpec {
    /// Desired replicas, read from the CRD's `specReplicasPath` (omitted when 0).
    #[serde(skip_serializing_if = "is_zero")]
    pub replicas: i32,
}

/// `ScaleStatus`: the observed state.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct ScaleStatus {
    /// Observed replicas, read from the CRD's `statusReplicasPath`.
    pub replicas: i32,
    /// Label selector string, read from the CRD's `labelSelectorPath` ("" = none).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub selector: String,
}

fn is_zero(v: &i32) -> bool {
    *v == 0
}

impl Scale {
    /// The Scale as JSON bytes.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("scale serializes")
    }
    /// The Scale as a JSON value.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("scale serializes")
    }
}

fn meta_str(obj: &Value, k: &str) -> String {
    obj.get("metadata")
        .and_then(|m| m.get(k))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// Upstream `scaleFromCustomResource`: the Scale of `obj` and whether the spec replicas
/// value was found (a missing status replicas is 0, a missing selector is "").
pub fn scale_from_object(obj: &Value, paths: &ScalePaths) -> Result<(Scale, bool), String> {
    let (spec, found) = nested_int64(obj, &split_path(&paths.spec_replicas))?;
    let (status, _) = nested_int64(obj, &split_path(&paths.status_replicas))?;
    let selector = match &paths.label_selector {
        Some(p) => nested_string(obj, &split_path(p))?.0,
        None => String::new(),
    };
    let created = obj
        .pointer("/metadata/creationTimestamp")
        .filter(|v| v.as_str().is_some_and(|s| !s.is_empty()))
        .cloned()
        .unwrap_or(Value::Null);
    Ok((
        Scale {
            kind: "Scale",
            api_version: "autoscaling/v1",
            metadata: ScaleMeta {
                name: meta_str(obj, "name"),
                namespace: meta_str(obj, "namespace"),
                uid: meta_str(obj, "uid"),
                resource_version: meta_str(obj, "resourceVersion"),
                creation_timestamp: created,
            },
            // Go converts with int32(...): out-of-range values wrap.
            spec: ScaleSpec {
                replicas: spec as i32,
            },
            status: ScaleStatus {
                replicas: status as i32,
                selector,
            },
        },
        found,
    ))
}

/// What a Scale written by a client contributes: `spec.replicas` and the resourceVersion
/// precondition (other fields are read-only and ignored, as upstream).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScaleWrite {
    /// The Scale's `metadata.name` (must match the URL's).
    pub name: String,
    /// The Scale's `metadata.namespace` (must match the URL's).
    pub namespace: String,
    /// `spec.replicas`, written to the CRD's `specReplicasPath`.
    pub replicas: i64,
    /// "" = no precondition.
    pub resource_version: String,
}

fn cannot_handle(detail: &str) -> ApiError {
    ApiError::bad_request(format!(
        "Scale in version \"v1\" cannot be handled as a Scale: {detail}"
    ))
}

/// Decodes a Scale document the way the typed `autoscaling/v1.Scale` decoder reads it:
/// `spec.replicas` must be an int32 (absent or null = 0), metadata fields strings.
pub fn decode_scale(v: &Value) -> Result<ScaleWrite, ApiError> {
    if !v.is_object() {
        return Err(cannot_handle("the object provided is not a JSON object"));
    }
    if let Some(k) = v.get("kind").and_then(Value::as_str)
        && !k.is_empty()
        && k != "Scale"
    {
        return Err(ApiError::bad_request(format!(
            "Scale in version \"v1\" cannot be handled as a Scale: no kind \"{k}\" is registered for version \"autoscaling/v1\""
        )));
    }
    let meta = match v.get("metadata") {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) => Some(m),
        Some(_) => {
            return Err(cannot_handle(
                "json: cannot unmarshal into Go struct field Scale.metadata of type v1.ObjectMeta",
            ));
        }
    };
    let mstr = |k: &str| -> Result<String, ApiError> {
        match meta.and_then(|m| m.get(k)) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(cannot_handle(&format!(
                "json: cannot unmarshal {} into Go struct field ObjectMeta.metadata.{k} of type string",
                crdplane_core::gofmt::go_json_kind(other)
            ))),
        }
    };
    let replicas = match v.pointer("/spec/replicas") {
        None | Some(Value::Null) => 0,
        Some(Value::Number(n)) if n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()) => {
            n.as_i64().unwrap_or(0)
        }
        Some(Value::Number(n)) => {
            return Err(cannot_handle(&format!(
                "json: cannot unmarshal number {n} into Go struct field ScaleSpec.spec.replicas of type int32"
            )));
        }
        Some(other) => {
            return Err(cannot_handle(&format!(
                "json: cannot unmarshal {} into Go struct field ScaleSpec.spec.replicas of type int32",
                crdplane_core::gofmt::go_json_kind(other)
            )));
        }
    };
    Ok(ScaleWrite {
        name: mstr("name")?,
        namespace: mstr("namespace")?,
        replicas,
        resource_version: mstr("resourceVersion")?,
    })
}

/// `scaleUpdatedObjectInfo.UpdatedObject` after the Scale is known: the object with the
/// written replicas at `specReplicasPath` and, when the Scale carries one, its
/// resourceVersion as the precondition.
pub fn apply_scale(old: &Value, paths: &ScalePaths, w: &ScaleWrite) -> Result<Value, ApiError> {
    if w.replicas == INVALID_SPEC_REPLICAS {
        return Err(ApiError::bad_request(format!(
            "the spec replicas field {} cannot be empty",
            go_quote(&paths.spec_replicas)
        )));
    }
    let mut obj = old.clone();
    set_nested_field(
        &mut obj,
        &split_path(&paths.spec_replicas),
        Value::from(w.replicas),
    )
    .map_err(|e| ApiError::new(Reason::InternalError, e))?;
    if !w.resource_version.is_empty()
        && let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut)
    {
        m.insert(
            "resourceVersion".into(),
            Value::String(w.resource_version.clone()),
        );
    }
    Ok(obj)
}

/// `ValidateScaleSpec` + `ValidateScaleStatus` (validator.go) of an object about to be
/// stored: spec replicas only on the main resource (and /scale), status replicas and the
/// selector on every write. Field paths are the CRD's JSON paths, as upstream prints them.
pub fn validate_scale_fields(
    obj: &Value,
    paths: &ScalePaths,
    status_only: bool,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let replicas =
        |path: &str, errs: &mut Vec<FieldError>| match nested_int64(obj, &split_path(path)) {
            Err(e) => errs.push(FieldError::invalid(path, Value::from(0), e)),
            Ok((n, _)) if n < 0 => errs.push(FieldError::invalid(
                path,
                Value::from(n),
                "should be a non-negative integer",
            )),
            Ok((n, _)) if n > i32::MAX as i64 => errs.push(FieldError::invalid(
                path,
                Value::from(n),
                format!("should be less than or equal to {}", i32::MAX),
            )),
            Ok(_) => {}
        };
    if !status_only {
        replicas(&paths.spec_replicas, &mut errs);
    }
    replicas(&paths.status_replicas, &mut errs);
    if let Some(p) = &paths.label_selector
        && let Err(e) = nested_string(obj, &split_path(p))
    {
        errs.push(FieldError::invalid(p.as_str(), Value::from(""), e));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn paths() -> ScalePaths {
        ScalePaths::from_crd(&json!({"specReplicasPath":".spec.replicas",
            "statusReplicasPath":".status.replicas","labelSelectorPath":".status.labelSelector"}))
    }

    fn obj() -> Value {
        json!({"apiVersion":"stable.example.com/v1","kind":"CronTab",
            "metadata":{"name":"x","namespace":"default","uid":"u-1","resourceVersion":"7",
                "creationTimestamp":"2026-01-01T00:00:00Z","labels":{"a":"b"}},
            "spec":{"replicas":3},"status":{"replicas":2,"labelSelector":"app=x"}})
    }

    #[test]
    fn scale_of_an_object_is_upstreams_document() {
        let (s, found) = scale_from_object(&obj(), &paths()).unwrap();
        assert!(found);
        assert_eq!(
            String::from_utf8(s.to_json()).unwrap(),
            r#"{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"x","namespace":"default","uid":"u-1","resourceVersion":"7","creationTimestamp":"2026-01-01T00:00:00Z"},"spec":{"replicas":3},"status":{"replicas":2,"selector":"app=x"}}"#
        );
        // Missing status and selector: 0 and omitted; zero spec replicas omitted (omitempty).
        let mut o = obj();
        o["spec"]["replicas"] = json!(0);
        o.as_object_mut().unwrap().remove("status");
        let (s, found) = scale_from_object(&o, &paths()).unwrap();
        assert!(found);
        let v = s.to_value();
        assert_eq!(v["spec"], json!({}));
        assert_eq!(v["status"], json!({"replicas":0}));
        // Missing spec replicas: not found.
        o["spec"] = json!({});
        assert!(!scale_from_object(&o, &paths()).unwrap().1);
    }

    #[test]
    fn accessor_errors_have_upstreams_text() {
        let mut o = obj();
        o["spec"]["replicas"] = json!("3");
        assert_eq!(
            scale_from_object(&o, &paths()).unwrap_err(),
            ".spec.replicas accessor error: 3 is of the type string, expected int64"
        );
        o["spec"] = json!(5);
        assert_eq!(
            scale_from_object(&o, &paths()).unwrap_err(),
            // Go names the path up to the field it tried to read from the non-map.
            ".spec.replicas accessor error: 5 is of the type int64, expected map[string]interface{}"
        );
        o["spec"] = json!({"replicas": 1.5});
        assert_eq!(
            nested_int64(&o, &["spec", "replicas"]).unwrap_err(),
            ".spec.replicas accessor error: 1.5 is of the type float64, expected int64"
        );
        assert_eq!(
            nested_int64(&json!({"spec":null}), &["spec", "replicas"]).unwrap(),
            (0, false)
        );
    }

    #[test]
    fn applying_a_scale_writes_replicas_from_the_object_root() {
        let w = ScaleWrite {
            name: "x".into(),
            namespace: "default".into(),
            replicas: 5,
            resource_version: String::new(),
        };
        let out = apply_scale(&obj(), &paths(), &w).unwrap();
        assert_eq!(out["spec"]["replicas"], 5);
        assert_eq!(
            out["metadata"]["resourceVersion"], "7",
            "no precondition: old rv kept"
        );
        assert_eq!(out["status"], obj()["status"], "status is read-only");
        let w2 = ScaleWrite {
            resource_version: "3".into(),
            ..w.clone()
        };
        assert_eq!(
            apply_scale(&obj(), &paths(), &w2).unwrap()["metadata"]["resourceVersion"],
            "3"
        );
        // Missing intermediate maps are created.
        let mut bare = obj();
        bare.as_object_mut().unwrap().remove("spec");
        assert_eq!(
            apply_scale(&bare, &paths(), &w).unwrap()["spec"],
            json!({"replicas":5})
        );
        // The "not set" placeholder survives a patch that does not set replicas: 400.
        let w3 = ScaleWrite {
            replicas: INVALID_SPEC_REPLICAS,
            ..w
        };
        let e = apply_scale(&obj(), &paths(), &w3).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                400,
                "the spec replicas field \".spec.replicas\" cannot be empty"
            )
        );
    }

    #[test]
    fn decoding_a_scale() {
        let w = decode_scale(&json!({"apiVersion":"autoscaling/v1","kind":"Scale",
            "metadata":{"name":"x","resourceVersion":"9"},"spec":{"replicas":4},"status":{"replicas":100}}))
        .unwrap();
        assert_eq!((w.replicas, w.resource_version.as_str()), (4, "9"));
        assert_eq!(
            decode_scale(&json!({"metadata":{"name":"x"}}))
                .unwrap()
                .replicas,
            0
        );
        assert_eq!(
            decode_scale(&json!({"spec":{"replicas":"4"}}))
                .unwrap_err()
                .message,
            "Scale in version \"v1\" cannot be handled as a Scale: json: cannot unmarshal string into Go struct field ScaleSpec.spec.replicas of type int32"
        );
        assert_eq!(
            decode_scale(&json!({"spec":{"replicas":4294967296u64}}))
                .unwrap_err()
                .code,
            400
        );
        assert_eq!(
            decode_scale(&json!({"kind":"Deployment"}))
                .unwrap_err()
                .code,
            400
        );
    }

    #[test]
    fn scale_field_validation() {
        let p = paths();
        assert!(validate_scale_fields(&obj(), &p, false).is_empty());
        let mut o = obj();
        o["spec"]["replicas"] = json!(-1);
        o["status"]["replicas"] = json!("two");
        o["status"]["labelSelector"] = json!({"matchLabels":{}});
        let errs: Vec<String> = validate_scale_fields(&o, &p, false)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs,
            vec![
                ".spec.replicas: Invalid value: -1: should be a non-negative integer".to_string(),
                ".status.replicas: Invalid value: 0: .status.replicas accessor error: two is of the type string, expected int64".to_string(),
                ".status.labelSelector: Invalid value: \"\": .status.labelSelector accessor error: map[matchLabels:map[]] is of the type map[string]interface {}, expected string".to_string(),
            ]
        );
        // The status subresource does not check spec replicas.
        assert_eq!(validate_scale_fields(&o, &p, true).len(), 2);
        o["spec"]["replicas"] = json!(2147483648i64);
        assert_eq!(
            validate_scale_fields(&o, &p, false)[0].to_string(),
            ".spec.replicas: Invalid value: 2147483648: should be less than or equal to 2147483647"
        );
    }
}
