//! `coordination.k8s.io/v1` Leases (k8s.io/kubernetes pkg/registry/coordination/lease/
//! strategy.go: create on update allowed, unconditional update not; validation:
//! pkg/apis/coordination/validation `ValidateLease`, `ValidateLeaseSpec`; printing:
//! pkg/printers/internalversion `printLease`). Leader election (client-go leaderelection,
//! kube-rs lease crates, the Python client) works through compare-and-swap updates of them.

use super::{BuiltinType, age, name, s};
use crdplane_apiserver::patch::BuiltinPatch;
use crdplane_apiserver::render::table::TableConvertor;
use crdplane_apiserver::strategic::{Field, OBJECT_META};
use crdplane_core::builtin::{BuiltinResource, lookup};
use crdplane_core::field::FieldError;
use k8s_openapi::api::coordination::v1::Lease;
use serde_json::Value;
use std::sync::OnceLock;

/// The `coordination.k8s.io/v1` Lease type.
pub struct Leases;

static PATCH: BuiltinPatch = BuiltinPatch(&[("metadata", Field::Struct(OBJECT_META))]);

/// `ValidateLeaseSpec`.
pub fn validate_spec(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(d) = obj
        .pointer("/spec/leaseDurationSeconds")
        .and_then(Value::as_i64)
        && d <= 0
    {
        errs.push(FieldError::invalid(
            "spec.leaseDurationSeconds",
            Value::from(d),
            "must be greater than 0",
        ));
    }
    if let Some(t) = obj
        .pointer("/spec/leaseTransitions")
        .and_then(Value::as_i64)
        && t < 0
    {
        errs.push(FieldError::invalid(
            "spec.leaseTransitions",
            Value::from(t),
            "must be greater than or equal to 0",
        ));
    }
    errs
}

fn printer(obj: &Value, now: chrono::DateTime<chrono::Utc>) -> Vec<Value> {
    let holder = match s(obj, "/spec/holderIdentity") {
        "" if obj.pointer("/spec/holderIdentity").is_none() => "<unknown>",
        h => h,
    };
    vec![name(obj), Value::String(holder.into()), age(obj, now)]
}

impl BuiltinType for Leases {
    fn resource(&self) -> &'static BuiltinResource {
        lookup("coordination.k8s.io", "v1", "leases").expect("in the table")
    }
    fn canonical(&self, obj: Value) -> Result<Value, String> {
        super::typed::<Lease>(obj, &[])
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_spec(obj)
    }
    fn validate_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        validate_spec(new)
    }
    fn allow_create_on_update(&self) -> bool {
        true
    }
    fn allow_unconditional_update(&self) -> bool {
        false
    }
    fn patch(&self) -> &'static BuiltinPatch {
        &PATCH
    }
    fn table(&self) -> &'static TableConvertor {
        static T: OnceLock<TableConvertor> = OnceLock::new();
        super::name_age_table(
            &T,
            &[(
                "Holder",
                "string",
                "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field.",
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
    fn spec_rules() {
        let texts: Vec<String> =
            validate_spec(&json!({"spec": {"leaseDurationSeconds": 0, "leaseTransitions": -1}}))
                .iter()
                .map(ToString::to_string)
                .collect();
        assert_eq!(
            texts,
            vec![
                "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0",
                "spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0"
            ]
        );
        assert!(validate_spec(&json!({"spec": {"leaseDurationSeconds": 15}})).is_empty());
    }
}
