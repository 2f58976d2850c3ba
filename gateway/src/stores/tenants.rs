//! The strategy and store of `crdplane.io/v1alpha1` Tenants, the platform admins' API for
//! creating and deleting tenants (DESIGN.md, "Identity and tenancy"). Tenants are objects of
//! the admin scope, the logical cluster [`ADMIN_SCOPE`] (`/clusters/root/…`), stored through
//! the storage service like every other object (tenant `root`, group `crdplane.io`,
//! resource `tenants`).
//!
//! Where it sits: under the Tenant handler (the `tenants` module), which runs the generic
//! handlers of `crdplane_apiserver` with [`TenantStrategy`] over [`TenantStore`]. Upstream
//! has no tenants; the lifecycle follows upstream's namespaces
//! (pkg/registry/core/namespace/strategy.go and storage/storage.go `REST.Delete`): a new
//! Tenant is `Active`; its first DELETE sets `deletionTimestamp` and phase `Terminating`
//! and hands it to the purge controller (the `tenant_purge` module), which removes every object
//! of the tenant and then the Tenant itself. A Terminating Tenant keeps that state through
//! updates (the strategy copies `deletionTimestamp` and `status`), so no client can cut the
//! purge short.

use crate::stores::storage::StorageStore;
use crate::stores::typed;
use crdplane_apiserver::patch::{BuiltinPatch, PatchMechanism};
use crdplane_apiserver::rest::delete::has_deletion_timestamp;
use crdplane_apiserver::rest::{ListOptions, ListResult, Store, Stored, Strategy};
use crdplane_apiserver::strategic::{Field, OBJECT_META};
use crdplane_core::field::FieldError;
use crdplane_core::{ApiError, GroupResource};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::OnceLock;

pub use crdplane_core::tenancy::{ADMIN_SCOPE, API_VERSION, GROUP, KIND, RESOURCE, VERSION};

/// Name of the ClusterRoleBinding (to `cluster-admin`) that a Tenant's `spec.owners`
/// become in the tenant.
pub const OWNERS_BINDING: &str = "crdplane:tenant-owners";

/// The group/resource of Tenants (`tenants.crdplane.io` in messages).
pub fn gr() -> &'static GroupResource {
    static GR: OnceLock<GroupResource> = OnceLock::new();
    GR.get_or_init(|| GroupResource::new(GROUP, RESOURCE))
}

/// A Tenant, as clients send and receive it (fields it does not have are dropped, and
/// reported under strict field validation).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tenant {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What the platform admin asks for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<TenantSpec>,
    /// What the server reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<TenantStatus>,
}

/// `spec` of a Tenant.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantSpec {
    /// Subjects (RBAC `Subject`s: User, Group, ServiceAccount) bound to `cluster-admin`
    /// in the tenant by the ClusterRoleBinding [`OWNERS_BINDING`], kept in step with
    /// this list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owners: Option<Vec<k8s_openapi::api::rbac::v1::Subject>>,
}

/// `status` of a Tenant.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantStatus {
    /// `Active`, or `Terminating` once it is being deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
}

static PATCH: BuiltinPatch = BuiltinPatch(&[("metadata", Field::Struct(OBJECT_META))]);

/// Whether a Tenant object is being deleted.
pub fn terminating(t: &Value) -> bool {
    has_deletion_timestamp(t)
}

/// The names a Tenant may not have: the admin scope's.
pub fn reserved(name: &str) -> bool {
    name == ADMIN_SCOPE
}

/// The strategy of Tenants (one endpoint: the main resource).
pub struct TenantStrategy;

impl Strategy for TenantStrategy {
    fn group_resource(&self) -> &GroupResource {
        gr()
    }
    fn kind(&self) -> &str {
        KIND
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
    fn unknown_fields(&self, obj: &Value) -> Vec<String> {
        typed::unknown_fields::<Tenant>(obj)
    }
    /// As a namespace: phase Active; fields a Tenant does not have dropped.
    fn prepare_for_create(&self, obj: &mut Value, _namespace: &str) -> Result<(), ApiError> {
        typed::drop_unknown_fields::<Tenant>(obj);
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
        let m = obj
            .as_object_mut()
            .ok_or_else(|| ApiError::bad_request("the object provided is not a JSON object"))?;
        m.insert("apiVersion".into(), json!(API_VERSION));
        m.insert("kind".into(), json!(KIND));
        if !m.get("spec").is_some_and(Value::is_object) {
            m.insert("spec".into(), json!({}));
        }
        m.insert("status".into(), json!({"phase": "Active"}));
        Ok(())
    }
    /// The generic `PrepareForUpdate` with status kept as stored (like a status
    /// subresource's: only the server writes it), so a Terminating Tenant stays so.
    fn prepare_for_update(&self, new: &mut Value, old: &Value) -> Result<(), ApiError> {
        typed::drop_unknown_fields::<Tenant>(new);
        crdplane_apiserver::rest::meta::prepare_for_update(new, old, true)?;
        if !new.get("spec").is_some_and(Value::is_object) {
            new["spec"] = json!({});
        }
        new["apiVersion"] = json!(API_VERSION);
        new["kind"] = json!(KIND);
        Ok(())
    }
    /// The name is a DNS-1123 label (it is a path segment, `/clusters/<name>`, and part
    /// of every storage key of the tenant) and not the admin scope's; owners are RBAC
    /// subjects.
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let mut errs = Vec::new();
        for msg in crdplane_core::validation::is_dns1123_label(name) {
            errs.push(FieldError::invalid("metadata.name", json!(name), msg));
        }
        if reserved(name) {
            errs.push(FieldError::invalid(
                "metadata.name",
                json!(name),
                "is reserved for the platform admins' scope",
            ));
        }
        errs.extend(validate_owners(obj));
        errs
    }
    fn validate_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        validate_owners(new)
    }
}

/// Each owner is a Subject upstream's RBAC validation accepts (`ValidateRoleBindingSubject`:
/// kind User, Group or ServiceAccount; a name; a namespace for a ServiceAccount).
fn validate_owners(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(owners) = obj.pointer("/spec/owners").and_then(Value::as_array) else {
        return errs;
    };
    for (i, o) in owners.iter().enumerate() {
        let path = format!("spec.owners[{i}]");
        let kind = o.get("kind").and_then(Value::as_str).unwrap_or("");
        let name = o.get("name").and_then(Value::as_str).unwrap_or("");
        if name.is_empty() {
            errs.push(FieldError::required(format!("{path}.name"), ""));
        }
        match kind {
            "User" | "Group" => {}
            "ServiceAccount" => {
                if o.get("namespace")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .is_empty()
                {
                    errs.push(FieldError::required(format!("{path}.namespace"), ""));
                }
            }
            _ => errs.push(FieldError::not_supported(
                format!("{path}.kind"),
                json!(kind),
                &["ServiceAccount", "User", "Group"],
            )),
        }
    }
    errs
}

/// The Tenants: the storage service, with the first DELETE marking the Tenant
/// Terminating for the purge controller ([`Store::mark_deleting`]).
pub struct TenantStore<'a> {
    inner: StorageStore<'a>,
    /// Woken when a Tenant is marked for deletion.
    purge: &'a tokio::sync::Notify,
}

impl<'a> TenantStore<'a> {
    /// The Tenants, over `storage`; `purge` is woken by every deletion.
    pub fn new(
        storage: &'a crdplane_proto::v1::storage_client::StorageClient<crate::context::Channel>,
        purge: &'a tokio::sync::Notify,
    ) -> Self {
        TenantStore {
            inner: StorageStore {
                storage,
                tenant: ADMIN_SCOPE,
                group: GROUP,
                resource: RESOURCE,
                ttl_seconds: 0,
            },
            purge,
        }
    }

    /// The storage calls on bytes (for the purge controller's final delete).
    pub fn storage(&self) -> &StorageStore<'a> {
        &self.inner
    }
}

impl Store for TenantStore<'_> {
    async fn get(&self, namespace: &str, name: &str) -> Result<Value, ApiError> {
        self.inner.get(namespace, name).await
    }
    async fn list(&self, namespace: &str, opts: &ListOptions) -> Result<ListResult, ApiError> {
        self.inner.list(namespace, opts).await
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
    /// A Tenant not yet being deleted gets `deletionTimestamp` and phase Terminating and
    /// the purge controller is woken; one already being deleted is answered as it is. The
    /// object itself is removed by the controller once the tenant is empty.
    async fn mark_deleting(
        &self,
        old: &Value,
        _expected_rv: u64,
        dry_run: bool,
    ) -> Result<Option<Value>, ApiError> {
        if terminating(old) {
            return Ok(Some(old.clone()));
        }
        let mut t = old.clone();
        t["status"]["phase"] = json!("Terminating");
        t["metadata"]["deletionTimestamp"] = json!(crdplane_core::names::now_timestamp());
        if dry_run {
            return Ok(Some(t));
        }
        let (bytes, _) = self.inner.update_raw(&t, old, false).await?;
        self.purge.notify_one();
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(ApiError::internal)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn errs(obj: Value) -> Vec<String> {
        TenantStrategy
            .validate(&obj)
            .into_iter()
            .map(|e| e.to_string())
            .collect()
    }

    #[test]
    fn names_and_owners() {
        assert!(errs(json!({"metadata": {"name": "acme"}})).is_empty());
        let e = errs(json!({"metadata": {"name": "Acme"}}));
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].starts_with("metadata.name: Invalid value: \"Acme\""),
            "{e:?}"
        );
        let e = errs(json!({"metadata": {"name": "root"}}));
        assert_eq!(
            e,
            ["metadata.name: Invalid value: \"root\": is reserved for the platform admins' scope"]
        );
        let e = errs(json!({"metadata": {"name": "a"}, "spec": {"owners": [
            {"kind": "User", "name": "jane"},
            {"kind": "ServiceAccount", "name": "ci"},
            {"kind": "Robot", "name": "r2"},
            {"kind": "Group"}
        ]}}));
        assert_eq!(
            e,
            [
                "spec.owners[1].namespace: Required value",
                "spec.owners[2].kind: Unsupported value: \"Robot\": supported values: \"ServiceAccount\", \"User\", \"Group\"",
                "spec.owners[3].name: Required value",
            ]
        );
    }

    #[test]
    fn create_sets_phase_and_drops_unknown_fields() {
        let mut o = json!({"metadata": {"name": "acme", "generation": 3}, "spec": {"owners": [], "x": 1}, "status": {"phase": "Terminating"}, "junk": true});
        assert_eq!(
            TenantStrategy.unknown_fields(&o),
            ["unknown field \"junk\"", "unknown field \"spec.x\""]
        );
        TenantStrategy.prepare_for_create(&mut o, "").unwrap();
        assert_eq!(o["apiVersion"], API_VERSION);
        assert_eq!(o["kind"], KIND);
        assert_eq!(o["status"], json!({"phase": "Active"}));
        assert_eq!(o["spec"], json!({"owners": []}));
        assert!(o.get("junk").is_none());
        assert_eq!(o["metadata"]["generation"], 1);
        assert!(o["metadata"]["uid"].is_string());
    }

    #[test]
    fn update_keeps_status_and_deletion() {
        let old = json!({"metadata": {"name": "acme", "uid": "u", "creationTimestamp": "t0", "deletionTimestamp": "t1"}, "status": {"phase": "Terminating"}});
        let mut new = json!({"metadata": {"name": "acme", "labels": {"a": "b"}}, "status": {"phase": "Active"}});
        TenantStrategy.prepare_for_update(&mut new, &old).unwrap();
        assert_eq!(new["status"]["phase"], "Terminating");
        assert_eq!(new["metadata"]["deletionTimestamp"], "t1");
        assert_eq!(new["metadata"]["uid"], "u");
        assert_eq!(new["metadata"]["labels"]["a"], "b");
    }
}
