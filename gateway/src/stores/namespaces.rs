//! The strategies of core `v1` namespaces (main resource, `/status`, `/finalize`) for the
//!
//! generic handlers, and their store ([`NamespaceStore`]: the storage service, with the
//! namespace's own first DELETE).
//!
//! Follows k8s.io/kubernetes pkg/registry/core/namespace/strategy.go: `namespaceStrategy`
//! (`PrepareForUpdate` keeps status; unconditional updates allowed), `namespaceStatusStrategy`
//! (keeps spec), `namespaceFinalizeStrategy` (takes only `spec.finalizers`), and
//! storage/storage.go (`REST.Delete`: its precondition texts, the Terminating mark, the
//! generic delete once no finalizer is left; `ShouldDeleteNamespaceDuringUpdate`: no
//! finalizer left in spec or metadata of a namespace being deleted: it is removed).

use crate::context::Ctx;
use crate::stores::storage::StorageStore;
use crate::stores::typed;
use bytes::Bytes;
use crdplane_apiserver::admission::{Admission, Attributes, Operation};
use crdplane_apiserver::patch::{BuiltinPatch, PatchMechanism};
use crdplane_apiserver::rest::delete::{DeleteOptions, DeleteOptionsExt, has_deletion_timestamp};
use crdplane_apiserver::rest::{
    EncodedList, ListOptions, ListResult, Store, Stored, Strategy, stored_rv,
};
use crdplane_core::field::FieldError;
use crdplane_core::{ApiError, GroupResource};
use crdplane_proto::v1 as pb;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Namespace;
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
    /// k8s.io/api `core/v1` NamespaceSpec and NamespaceStatus as upstream's OpenAPI types
    /// them: `spec.finalizers` atomic, `status.conditions` keyed by `type`.
    fn field_schema(&self) -> &Value {
        static SCHEMA: OnceLock<Value> = OnceLock::new();
        SCHEMA.get_or_init(|| {
            let string = json!({"type": "string"});
            crdplane_core::managedfields::with_object_meta(&json!({"type": "object",
                "properties": {
                    "apiVersion": string, "kind": string,
                    "spec": {"type": "object", "properties": {
                        "finalizers": {"type": "array", "items": string}}},
                    "status": {"type": "object", "properties": {
                        "phase": string,
                        "conditions": {"type": "array", "x-kubernetes-list-type": "map",
                            "x-kubernetes-list-map-keys": ["type"],
                            "items": {"type": "object", "properties": {
                                "type": string, "status": string,
                                "lastTransitionTime": string, "reason": string,
                                "message": string}}}}}}}))
        })
    }
    /// The fields a `v1.Namespace` does not have (the patched object's, for PATCH).
    fn unknown_fields(&self, obj: &Value) -> Vec<String> {
        typed::unknown_fields::<Namespace>(obj)
    }
    /// strategy.go `PrepareForCreate`: phase Active, the `kubernetes` finalizer in spec, the
    /// `kubernetes.io/metadata.name` label (`NamespaceDefaultLabelName`); no generation.
    /// Fields a `v1.Namespace` does not have are dropped first, as decoding does upstream.
    fn prepare_for_create(&self, obj: &mut Value, _namespace: &str) -> Result<(), ApiError> {
        typed::drop_unknown_fields::<Namespace>(obj);
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
        typed::drop_unknown_fields::<Namespace>(new);
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
    /// storage.go `REST.Delete`'s own precondition checks and texts (a Conflict).
    fn check_delete_preconditions(&self, obj: &Value, o: &DeleteOptions) -> Result<(), ApiError> {
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        if let Some(want) = o.precondition_uid() {
            let uid = obj
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .unwrap_or("");
            if want != uid {
                return Err(ApiError::conflict(
                    gr(),
                    name,
                    &format!(
                        "Precondition failed: UID in precondition: {want}, UID in object meta: {uid}"
                    ),
                ));
            }
        }
        if let Some(want) = o.precondition_rv() {
            let rv = stored_rv(obj).to_string();
            if want != rv {
                return Err(ApiError::conflict(
                    gr(),
                    name,
                    &format!(
                        "Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in object meta: {rv}"
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// The namespaces of one tenant: the storage service, with the first DELETE of a namespace
/// as storage.go `REST.Delete` does it ([`Store::mark_deleting`]).
pub struct NamespaceStore<'a> {
    inner: StorageStore<'a>,
    ctx: &'a Ctx,
}

impl<'a> NamespaceStore<'a> {
    /// The namespaces of `tenant`.
    pub fn new(ctx: &'a Ctx, tenant: &'a str) -> Self {
        NamespaceStore {
            inner: StorageStore {
                storage: &ctx.storage,
                tenant,
                group: "",
                resource: "namespaces",
                ttl_seconds: 0,
            },
            ctx,
        }
    }

    /// Records (or re-records) the namespace's deletion with the registry, whose namespace
    /// controller deletes its content — also after any restart. The registry owns its work
    /// queue and the entry format (`services/registry/src/lifecycle.rs`).
    async fn enqueue_deletion(&self, name: &str) -> Result<(), ApiError> {
        self.ctx
            .registry
            .clone()
            .record_namespace_deletion(pb::NamespaceDeletionRequest {
                tenant: self.inner.tenant.into(),
                name: name.into(),
            })
            .await
            .map_err(crdplane_proto::status::from_grpc)?;
        Ok(())
    }
}

fn parse(json: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(json).map_err(ApiError::internal)
}

impl Store for NamespaceStore<'_> {
    async fn get(&self, namespace: &str, name: &str) -> Result<Value, ApiError> {
        self.inner.get(namespace, name).await
    }
    async fn list(&self, namespace: &str, opts: &ListOptions) -> Result<ListResult, ApiError> {
        self.inner.list(namespace, opts).await
    }
    async fn get_encoded(&self, namespace: &str, name: &str) -> Result<Bytes, ApiError> {
        self.inner.get_encoded(namespace, name).await
    }
    async fn list_encoded(
        &self,
        namespace: &str,
        opts: &ListOptions,
    ) -> Result<EncodedList, ApiError> {
        self.inner.list_encoded(namespace, opts).await
    }
    async fn create(&self, obj: Value, dry_run: bool) -> Result<Stored, ApiError> {
        self.inner.create(obj, dry_run).await
    }
    async fn update(&self, obj: Value, old: &Value, dry_run: bool) -> Result<Stored, ApiError> {
        self.inner.update(obj, old, dry_run).await
    }
    async fn before_delete(&self, obj: &Value, dry_run: bool) -> Result<(), ApiError> {
        self.inner.before_delete(obj, dry_run).await
    }
    /// storage.go `REST.Delete`: a namespace not yet being deleted gets `deletionTimestamp`
    /// and phase Terminating, and its deletion is handed to the registry's namespace
    /// controller (recorded before the mark, and again after it, so that a controller that
    /// just removed the entry looks again); one being deleted with finalizers left is
    /// answered as it is. Once no finalizer is left, the generic delete removes it.
    async fn mark_deleting(
        &self,
        old: &Value,
        _expected_rv: u64,
        dry_run: bool,
    ) -> Result<Option<Value>, ApiError> {
        if has_deletion_timestamp(old) {
            return Ok((!finalized(old)).then(|| old.clone()));
        }
        let name = old
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let mut ns = old.clone();
        ns["status"]["phase"] = json!("Terminating");
        ns["metadata"]["deletionTimestamp"] = json!(crdplane_core::names::now_timestamp());
        if dry_run {
            return Ok(Some(ns));
        }
        self.enqueue_deletion(&name).await?;
        let marked = parse(&self.inner.update_raw(&ns, old, false).await?.0)?;
        self.enqueue_deletion(&name).await?;
        self.ctx
            .namespaces
            .write()
            .expect("lock")
            .remove(&(self.inner.tenant.to_string(), name));
        Ok(Some(marked))
    }
    async fn delete(
        &self,
        namespace: &str,
        name: &str,
        expected_rv: u64,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        self.inner
            .delete(namespace, name, expected_rv, dry_run)
            .await
    }
}

/// NamespaceLifecycle's rule for deletes (plugin/namespace/lifecycle/admission.go): the
/// default namespaces cannot be deleted (403 `this namespace may not be deleted`).
pub struct ImmortalNamespaces;

impl Admission for ImmortalNamespaces {
    fn admit<'a>(&'a self, a: &'a mut Attributes<'_>) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            if a.operation == Operation::Delete && DEFAULT_NAMESPACES.contains(&a.name) {
                return Err(ApiError::forbidden(
                    gr(),
                    a.name,
                    "this namespace may not be deleted",
                ));
            }
            Ok(())
        })
    }
}

/// The three namespaces every tenant starts with (created once per tenant, idempotently);
/// they cannot be deleted.
pub const DEFAULT_NAMESPACES: [&str; 3] = ["default", "kube-system", "kube-public"];

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
    fn namespace_fields_follow_the_namespace_types() {
        let ns = json!({"metadata": {"name": "a", "labels": {"k": "v"}},
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active", "conditions": [{"type": "T", "status": "True"}]}});
        let s = NamespaceStrategy(Endpoint::Main);
        let fields = crdplane_core::structured::field_set(&ns, Some(s.field_schema())).unwrap();
        assert_eq!(
            fields.to_value(),
            json!({"f:metadata": {"f:name": {}, "f:labels": {"f:k": {}}},
                "f:spec": {"f:finalizers": {}},
                "f:status": {"f:phase": {}, "f:conditions": {"k:{\"type\":\"T\"}": {
                    ".": {}, "f:type": {}, "f:status": {}}}}})
        );
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
