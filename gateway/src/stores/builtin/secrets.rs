//! Core `v1` Secrets (k8s.io/kubernetes pkg/registry/core/secret/strategy.go; the v1 →
//! internal conversion that merges `stringData` into `data`, pkg/apis/core/v1/conversion.go;
//! defaulting `type: Opaque`, pkg/apis/core/v1/defaults.go `SetDefaults_Secret`; validation:
//! pkg/apis/core/validation `ValidateSecret`, `ValidateSecretUpdate`; printing:
//! pkg/printers/internalversion `printSecret`).

use super::{BuiltinType, MAX_DATA_SIZE, age, config_map_key_errors, entries, name, s};
use base64::Engine;
use crdplane_apiserver::patch::BuiltinPatch;
use crdplane_apiserver::render::table::TableConvertor;
use crdplane_apiserver::strategic::{Field, OBJECT_META};
use crdplane_core::ApiError;
use crdplane_core::builtin::{BuiltinResource, lookup};
use crdplane_core::field::FieldError;
use k8s_openapi::api::core::v1::Secret;
use serde_json::{Value, json};
use std::sync::OnceLock;

/// The core `v1` Secret type.
pub struct Secrets;

static PATCH: BuiltinPatch = BuiltinPatch(&[("metadata", Field::Struct(OBJECT_META))]);

/// `stringData` merged into `data` (its values win), then dropped; `type` defaults to
/// `Opaque`.
fn merge_string_data(obj: &mut Value) {
    let Some(m) = obj.as_object_mut() else { return };
    if let Some(Value::Object(sd)) = m.remove("stringData") {
        let data = m.entry("data").or_insert_with(|| json!({}));
        if !data.is_object() {
            *data = json!({});
        }
        for (k, v) in sd {
            let enc = base64::engine::general_purpose::STANDARD.encode(v.as_str().unwrap_or(""));
            data[k.as_str()] = Value::String(enc);
        }
    }
    if m.get("type")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        m.insert("type".into(), json!("Opaque"));
    }
}

fn decoded_len(v: &Value) -> usize {
    v.as_str()
        .and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok())
        .map_or(0, |b| b.len())
}

fn data_has(obj: &Value, key: &str) -> bool {
    obj.get("data").and_then(|d| d.get(key)).is_some()
}

/// `ValidateSecret` beyond ObjectMeta.
pub fn validate_secret(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut total = 0usize;
    if let Some(d) = obj.get("data").and_then(Value::as_object) {
        for (k, v) in d {
            total += decoded_len(v);
            for m in config_map_key_errors(k) {
                errs.push(FieldError::invalid(
                    format!("data[{k}]"),
                    Value::String(k.clone()),
                    m,
                ));
            }
        }
    }
    if total > MAX_DATA_SIZE {
        errs.push(FieldError::too_long("data", MAX_DATA_SIZE));
    }
    let required = |errs: &mut Vec<FieldError>, key: &str| {
        if !data_has(obj, key) {
            errs.push(FieldError::required(format!("data[{key}]"), ""));
        }
    };
    match s(obj, "/type") {
        "kubernetes.io/service-account-token"
            if s(
                obj,
                "/metadata/annotations/kubernetes.io~1service-account.name",
            )
            .is_empty() =>
        {
            errs.push(FieldError::required(
                "metadata.annotations[kubernetes.io/service-account.name]",
                "",
            ));
        }
        t @ ("kubernetes.io/dockercfg" | "kubernetes.io/dockerconfigjson") => {
            let key = if t == "kubernetes.io/dockercfg" {
                ".dockercfg"
            } else {
                ".dockerconfigjson"
            };
            match obj.pointer(&format!("/data/{key}")) {
                None => errs.push(FieldError::required(format!("data[{key}]"), "")),
                Some(v) => {
                    let raw = v
                        .as_str()
                        .and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok())
                        .unwrap_or_default();
                    if let Err(e) = serde_json::from_slice::<Value>(&raw) {
                        errs.push(FieldError::invalid(
                            format!("data[{key}]"),
                            json!("<secret contents redacted>"),
                            e.to_string(),
                        ));
                    }
                }
            }
        }
        "kubernetes.io/basic-auth" if !data_has(obj, "username") && !data_has(obj, "password") => {
            required(&mut errs, "username");
            required(&mut errs, "password");
        }
        "kubernetes.io/ssh-auth" => required(&mut errs, "ssh-privatekey"),
        // validation.go `ValidateSecret`: the certificate first, then the key.
        "kubernetes.io/tls" => {
            required(&mut errs, "tls.crt");
            required(&mut errs, "tls.key");
        }
        _ => {}
    }
    errs
}

fn printer(obj: &Value, now: chrono::DateTime<chrono::Utc>) -> Vec<Value> {
    vec![
        name(obj),
        json!(s(obj, "/type")),
        Value::from(entries(obj.get("data")) as i64),
        age(obj, now),
    ]
}

impl BuiltinType for Secrets {
    fn resource(&self) -> &'static BuiltinResource {
        lookup("", "v1", "secrets").expect("in the table")
    }
    fn canonical(&self, obj: Value) -> Result<Value, String> {
        super::typed::<Secret>(obj, &[])
    }
    fn prepare_for_create(&self, obj: &mut Value) -> Result<(), ApiError> {
        merge_string_data(obj);
        Ok(())
    }
    fn prepare_for_update(&self, new: &mut Value, _old: &Value) -> Result<(), ApiError> {
        merge_string_data(new);
        Ok(())
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_secret(obj)
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        errs.extend(super::immutable(new, old, "/type", "type"));
        errs.extend(super::immutable_data_errors(new, old, &["data"]));
        errs.extend(validate_secret(new));
        errs
    }
    fn field_labels(&self) -> &'static [&'static str] {
        &["type"]
    }
    fn patch(&self) -> &'static BuiltinPatch {
        &PATCH
    }
    fn table(&self) -> &'static TableConvertor {
        static T: OnceLock<TableConvertor> = OnceLock::new();
        super::name_age_table(
            &T,
            &[
                (
                    "Type",
                    "string",
                    "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types",
                ),
                (
                    "Data",
                    "string",
                    "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4",
                ),
            ],
            printer,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_data_is_merged_and_type_defaulted() {
        let mut o = json!({"data": {"a": "eA=="}, "stringData": {"b": "hi", "a": "y"}});
        merge_string_data(&mut o);
        assert_eq!(
            o,
            json!({"data": {"a": "eQ==", "b": "aGk="}, "type": "Opaque"})
        );
    }

    #[test]
    fn type_rules() {
        let texts = |o: Value| -> Vec<String> {
            validate_secret(&o)
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        assert_eq!(
            texts(json!({"type": "kubernetes.io/tls", "data": {"tls.crt": ""}})),
            vec!["data[tls.key]: Required value"]
        );
        assert_eq!(
            texts(json!({"type": "kubernetes.io/tls", "data": {}})),
            vec![
                "data[tls.crt]: Required value",
                "data[tls.key]: Required value"
            ]
        );
        assert_eq!(
            texts(json!({"type": "kubernetes.io/service-account-token"})),
            vec!["metadata.annotations[kubernetes.io/service-account.name]: Required value"]
        );
        assert!(texts(json!({"type": "Opaque", "data": {"k": "dg=="}})).is_empty());
        let old = json!({"type": "Opaque"});
        let new = json!({"type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}});
        assert_eq!(
            Secrets.validate_update(&new, &old)[0].to_string(),
            "type: Invalid value: \"kubernetes.io/tls\": field is immutable"
        );
    }

    #[test]
    fn canonical_checks_base64() {
        let e = Secrets
            .canonical(json!({"metadata": {"name": "s"}, "data": {"k": "not base64!"}}))
            .unwrap_err();
        assert!(!e.is_empty());
    }
}
