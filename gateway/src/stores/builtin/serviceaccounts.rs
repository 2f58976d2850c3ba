//! Core `v1` ServiceAccounts (k8s.io/kubernetes pkg/registry/core/serviceaccount/strategy.go;
//! validation: `ValidateServiceAccount` = ObjectMeta with DNS-subdomain names; printing:
//! pkg/printers/internalversion `printServiceAccount`). Token requests
//! (`serviceaccounts/token`) are not served: this server issues no credentials.

use super::{BuiltinType, age, name};
use crdplane_apiserver::patch::BuiltinPatch;
use crdplane_apiserver::render::table::TableConvertor;
use crdplane_apiserver::strategic::{Field, OBJECT_META};
use crdplane_core::builtin::{BuiltinResource, lookup};
use crdplane_core::field::FieldError;
use k8s_openapi::api::core::v1::ServiceAccount;
use serde_json::Value;
use std::sync::OnceLock;

/// The core `v1` ServiceAccount type.
pub struct ServiceAccounts;

/// `secrets` is `patchStrategy:"merge" patchMergeKey:"name"` (types.go).
static PATCH: BuiltinPatch = BuiltinPatch(&[
    ("metadata", Field::Struct(OBJECT_META)),
    (
        "secrets",
        Field::MergeList {
            key: Some("name"),
            item: &[],
        },
    ),
]);

fn printer(obj: &Value, now: chrono::DateTime<chrono::Utc>) -> Vec<Value> {
    let n = obj
        .get("secrets")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    vec![name(obj), Value::from(n as i64), age(obj, now)]
}

impl BuiltinType for ServiceAccounts {
    fn resource(&self) -> &'static BuiltinResource {
        lookup("", "v1", "serviceaccounts").expect("in the table")
    }
    fn canonical(&self, obj: Value) -> Result<Value, String> {
        super::typed::<ServiceAccount>(obj, &[])
    }
    fn validate(&self, _obj: &Value) -> Vec<FieldError> {
        Vec::new()
    }
    fn validate_update(&self, _new: &Value, _old: &Value) -> Vec<FieldError> {
        Vec::new()
    }
    fn patch(&self) -> &'static BuiltinPatch {
        &PATCH
    }
    fn table(&self) -> &'static TableConvertor {
        static T: OnceLock<TableConvertor> = OnceLock::new();
        super::name_age_table(
            &T,
            &[(
                "Secrets",
                "string",
                "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use. Pods are only limited to this list if this service account has a \"kubernetes.io/enforce-mountable-secrets\" annotation set to \"true\". The \"kubernetes.io/enforce-mountable-secrets\" annotation is deprecated since v1.32. Prefer separate namespaces to isolate access to mounted secrets. This field should not be used to find auto-generated service account token secrets for use outside of pods. Instead, tokens can be requested directly using the TokenRequest API, or service account token secrets can be manually created. More info: https://kubernetes.io/docs/concepts/configuration/secret",
            )],
            printer,
        )
    }
}
