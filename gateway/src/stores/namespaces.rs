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
use crdplane_proto::v1 as pb;
use serde_json::{Value, json};
use std::sync::OnceLock;

/// Which endpoint of a namespace is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `/api/v1/namespaces/{name}`.
    Main,
    /// `/api/v1/namespaces/{name}/status`.
    Status,
    /// `/api/v1/namespaces/{name}/finalize` (writes only `spec.finalizers`).
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

/// The storage service's reference to the namespaces of `tenant` (group "", resource
/// `namespaces`).
pub fn storage_ref(tenant: &str) -> pb::ResourceRef {
    pb::ResourceRef {
        tenant: tenant.into(),
        group: String::new(),
        resource: "namespaces".into(),
    }
}

/// The storage key of namespace `name` of `tenant`.
pub fn storage_key(tenant: &str, name: &str) -> pb::ObjectKey {
    pb::ObjectKey {
        resource: Some(storage_ref(tenant)),
        namespace: String::new(),
        name: name.into(),
    }
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
    /// strategy.go `PrepareForCreate`: phase Active, the `kubernetes` finalizer in spec, the
    /// `kubernetes.io/metadata.name` label (`NamespaceDefaultLabelName`); no generation.
    fn prepare_for_create(&self, obj: &mut Value, _namespace: &str) -> Result<(), ApiError> {
        if self.0 != Endpoint::Main {
            return Err(ApiError::method_not_supported(gr(), "create"));
        }
        crdplane_apiserver::rest::meta::prepare_for_create(
            obj,
            &crdplane_apiserver::rest::meta::CreateParams {
                namespace: "",
                namespaced: false,
                uid: uuid::Uuid::new_v4().to_string(),
                now: crdplane_core::names::now_timestamp(),
                drop_status: false,
            },
        )?;
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let m = obj
            .as_object_mut()
            .ok_or_else(|| ApiError::bad_request("the object provided is not a JSON object"))?;
        m.insert("apiVersion".into(), json!("v1"));
        m.insert("kind".into(), json!("Namespace"));
        if let Some(meta) = m.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("generation");
            if !name.is_empty() {
                let labels = meta.entry("labels").or_insert_with(|| json!({}));
                if !labels.is_object() {
                    *labels = json!({});
                }
                labels["kubernetes.io/metadata.name"] = json!(name);
            }
        }
        m.insert("spec".into(), json!({"finalizers": ["kubernetes"]}));
        m.insert("status".into(), json!({"phase": "Active"}));
        Ok(())
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
    /// `ValidateNamespace`: ObjectMeta of a cluster-scoped object with DNS-1123 label names.
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let mut errs = Vec::new();
        for msg in crdplane_core::validation::is_dns1123_label(name) {
            errs.push(FieldError::invalid("metadata.name", json!(name), msg));
        }
        errs
    }
    fn validate_update(&self, _new: &Value, _old: &Value) -> Vec<FieldError> {
        Vec::new()
    }
    fn should_delete_during_update(&self, new: &Value, _old: &Value) -> bool {
        finalized(new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Upstream `IsDNS1123Label` message.
    const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

    fn errs(name: &str) -> Vec<String> {
        NamespaceStrategy(Endpoint::Main)
            .validate(&json!({"metadata": {"name": name}}))
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn namespace_names() {
        assert!(errs("kube-system").is_empty());
        assert_eq!(
            errs("Bad_Name"),
            vec![format!(
                "metadata.name: Invalid value: \"Bad_Name\": {DNS1123_LABEL_MSG}"
            )]
        );
        assert_eq!(
            errs(&"a".repeat(64)),
            vec![format!(
                "metadata.name: Invalid value: \"{}\": must be no more than 63 characters",
                "a".repeat(64)
            )]
        );
    }

    #[test]
    fn create_sets_phase_finalizer_and_name_label() {
        let mut ns = json!({"metadata": {"name": "team", "labels": {"a": "b"}}, "spec": {}});
        NamespaceStrategy(Endpoint::Main)
            .prepare_for_create(&mut ns, "")
            .unwrap();
        assert_eq!(ns["status"], json!({"phase": "Active"}));
        assert_eq!(ns["spec"], json!({"finalizers": ["kubernetes"]}));
        assert_eq!(
            ns["metadata"]["labels"],
            json!({"a": "b", "kubernetes.io/metadata.name": "team"})
        );
        assert!(ns["metadata"].get("generation").is_none());
        assert!(ns["metadata"]["uid"].is_string());
    }
}
