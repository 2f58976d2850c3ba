//! The strategies of core `v1` namespaces (main resource, `/status`, `/finalize`) for the
//! generic handlers.
//!
//! Follows k8s.io/kubernetes pkg/registry/core/namespace/strategy.go: `namespaceStrategy`
//! (`PrepareForUpdate` keeps status; unconditional updates allowed), `namespaceStatusStrategy`
//! (keeps spec), `namespaceFinalizeStrategy` (takes only `spec.finalizers`), and
//! storage/storage.go `ShouldDeleteNamespaceDuringUpdate` (no finalizer left in spec or
//! metadata of a namespace being deleted: it is removed).

use crdplane_apiserver::patch::{BuiltinPatch, PatchMechanism};
use crdplane_apiserver::rest::Strategy;
use crdplane_core::field::FieldError;
use crdplane_core::{ApiError, GroupResource};
use serde_json::{Value, json};
use std::sync::OnceLock;

/// Which endpoint of a namespace is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Main,
    Status,
    Finalize,
}

/// The namespace strategy of one endpoint.
pub struct NamespaceStrategy(pub Endpoint);

fn gr() -> &'static GroupResource {
    static GR: OnceLock<GroupResource> = OnceLock::new();
    GR.get_or_init(|| GroupResource::new("", "namespaces"))
}

static PATCH: BuiltinPatch = BuiltinPatch(crdplane_apiserver::strategic::NAMESPACE);

fn has_strings(v: Option<&Value>) -> bool {
    v.and_then(Value::as_array)
        .is_some_and(|a| a.iter().any(Value::is_string))
}

/// Whether a namespace being deleted has no finalizer left in `spec` or `metadata`.
pub fn finalized(ns: &Value) -> bool {
    ns.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
        && !has_strings(ns.pointer("/spec/finalizers"))
        && !has_strings(ns.pointer("/metadata/finalizers"))
}

impl Strategy for NamespaceStrategy {
    fn group_resource(&self) -> &GroupResource {
        gr()
    }
    fn kind(&self) -> &str {
        "Namespace"
    }
    fn namespaced(&self) -> bool {
        false
    }
    fn return_deleted_object(&self) -> bool {
        true
    }
    fn patch_mechanism(&self) -> &dyn PatchMechanism {
        &PATCH
    }
    fn prepare_for_update(&self, new: &mut Value, old: &Value) -> Result<(), ApiError> {
        match self.0 {
            Endpoint::Finalize => {
                let fins = new
                    .pointer("/spec/finalizers")
                    .cloned()
                    .unwrap_or(json!([]));
                *new = old.clone();
                new["spec"]["finalizers"] = fins;
            }
            Endpoint::Main | Endpoint::Status => {
                let keep = if self.0 == Endpoint::Status {
                    "spec"
                } else {
                    "status"
                };
                if let Some(v) = old.get(keep) {
                    new[keep] = v.clone();
                }
            }
        }
        for k in ["uid", "creationTimestamp", "deletionTimestamp"] {
            match old.pointer(&format!("/metadata/{k}")) {
                Some(v) => new["metadata"][k] = v.clone(),
                None => {
                    if let Some(m) = new["metadata"].as_object_mut() {
                        m.remove(k);
                    }
                }
            }
        }
        if let Some(rv) = old.pointer("/metadata/resourceVersion").cloned() {
            new["metadata"]["resourceVersion"] = rv;
        }
        new["apiVersion"] = json!("v1");
        new["kind"] = json!("Namespace");
        Ok(())
    }
    fn validate(&self, _obj: &Value) -> Vec<FieldError> {
        Vec::new()
    }
    fn validate_update(&self, _new: &Value, _old: &Value) -> Vec<FieldError> {
        Vec::new()
    }
    fn should_delete_during_update(&self, new: &Value, _old: &Value) -> bool {
        finalized(new)
    }
}
