//! Core `v1` ConfigMaps (k8s.io/kubernetes pkg/registry/core/configmap/strategy.go;
//! validation: pkg/apis/core/validation `ValidateConfigMap`, `ValidateConfigMapUpdate`;
//! printing: pkg/printers/internalversion `printConfigMap`).

use super::{BuiltinType, MAX_DATA_SIZE, age, config_map_key_errors, entries, name};
use crdplane_apiserver::patch::BuiltinPatch;
use crdplane_apiserver::render::table::TableConvertor;
use crdplane_apiserver::strategic::{Field, OBJECT_META};
use crdplane_core::builtin::{BuiltinResource, lookup};
use crdplane_core::field::FieldError;
use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::Value;
use std::sync::OnceLock;

/// The core `v1` ConfigMap type.
pub struct ConfigMaps;

static PATCH: BuiltinPatch = BuiltinPatch(&[("metadata", Field::Struct(OBJECT_META))]);

/// `ValidateConfigMap` beyond ObjectMeta: keys, keys in both maps, total size.
pub fn validate_data(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut total = 0usize;
    let data = obj.get("data").and_then(Value::as_object);
    let binary = obj.get("binaryData").and_then(Value::as_object);
    if let Some(d) = data {
        for (k, v) in d {
            total += v.as_str().map_or(0, str::len);
            for m in config_map_key_errors(k) {
                errs.push(FieldError::invalid(
                    format!("data[{k}]"),
                    Value::String(k.clone()),
                    m,
                ));
            }
            if binary.is_some_and(|b| b.contains_key(k)) {
                errs.push(FieldError::invalid(
                    format!("data[{k}]"),
                    Value::String(k.clone()),
                    "duplicate of key present in binaryData",
                ));
            }
        }
    }
    if let Some(b) = binary {
        for (k, v) in b {
            // Base64 in JSON: the decoded length is what counts.
            total += v.as_str().map_or(0, |s| s.len() / 4 * 3);
            for m in config_map_key_errors(k) {
                errs.push(FieldError::invalid(
                    format!("binaryData[{k}]"),
                    Value::String(k.clone()),
                    m,
                ));
            }
        }
    }
    if total > MAX_DATA_SIZE {
        errs.push(FieldError::too_long("", MAX_DATA_SIZE));
    }
    errs
}

fn printer(obj: &Value, now: chrono::DateTime<chrono::Utc>) -> Vec<Value> {
    let n = entries(obj.get("data")) + entries(obj.get("binaryData"));
    vec![name(obj), Value::from(n as i64), age(obj, now)]
}

impl BuiltinType for ConfigMaps {
    fn resource(&self) -> &'static BuiltinResource {
        lookup("", "v1", "configmaps").expect("in the table")
    }
    fn canonical(&self, obj: Value) -> Result<Value, String> {
        super::typed::<ConfigMap>(obj, &[])
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_data(obj)
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = super::immutable_data_errors(new, old, &["data", "binaryData"]);
        errs.extend(validate_data(new));
        errs
    }
    fn patch(&self) -> &'static BuiltinPatch {
        &PATCH
    }
    fn table(&self) -> &'static TableConvertor {
        static T: OnceLock<TableConvertor> = OnceLock::new();
        super::name_age_table(
            &T,
            &[(
                "Data",
                "integer",
                "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.",
            )],
            printer,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn validation_texts() {
        let errs =
            validate_data(&json!({"data": {"a/b": "x", "k": "v"}, "binaryData": {"k": "dg=="}}));
        let texts: Vec<String> = errs.iter().map(ToString::to_string).collect();
        assert_eq!(texts.len(), 2, "{texts:?}");
        assert!(texts[0].starts_with("data[a/b]: Invalid value: \"a/b\": a valid config key"));
        assert_eq!(
            texts[1],
            "data[k]: Invalid value: \"k\": duplicate of key present in binaryData"
        );
        let big = "x".repeat(MAX_DATA_SIZE + 1);
        assert_eq!(validate_data(&json!({"data": {"k": big}})).len(), 1);
    }

    #[test]
    fn immutable_config_maps_keep_their_data() {
        let old = json!({"immutable": true, "data": {"a": "1"}});
        assert!(ConfigMaps.validate_update(&old, &old).is_empty());
        let texts: Vec<String> = ConfigMaps
            .validate_update(&json!({"data": {"a": "2"}}), &old)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            texts,
            vec![
                "immutable: Forbidden: field is immutable when `immutable` is set",
                "data: Forbidden: field is immutable when `immutable` is set"
            ]
        );
    }

    #[test]
    fn table_cells() {
        let now = chrono::Utc::now();
        let cells = ConfigMaps.table().cells(
            &json!({"metadata": {"name": "c"}, "data": {"a": "1"}, "binaryData": {"b": ""}}),
            now,
        );
        assert_eq!(cells[..2], [json!("c"), json!(2)]);
    }
}
