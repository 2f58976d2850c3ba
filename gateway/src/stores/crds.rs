//! `apiextensions.k8s.io/v1` CustomResourceDefinitions for the generic handlers: the
//! registry gRPC service as their `Store` ([`CrdStore`]) and their `Strategy`
//! ([`CrdStrategy`], main resource and `/status`).
//!
//! Where it sits: `crds.rs` decodes a CRD request and calls the generic handlers of
//! `crdplane_apiserver::handlers` (read, retry-on-conflict loop, preconditions, no-op
//! detection, dry-run) over these two; the registry service underneath validates, names,
//! sets conditions and persists. Follows apiextensions-apiserver
//! pkg/registry/customresourcedefinition/strategy.go (`strategy`, `statusStrategy`) and
//! etcd.go (`REST.Delete`).
//!
//! Which side does what:
//!
//! | step (upstream)                                         | done by                    |
//! |---------------------------------------------------------|----------------------------|
//! | name/namespace of the body vs. the URL, resourceVersion | generic handlers           |
//! |   preconditions, retry on a lost compare-and-swap       |                            |
//! | `BeforeCreate`'s generateName                           | [`CrdStrategy`]            |
//! | `BeforeCreate` system fields (uid, creationTimestamp),  | registry `CreateCrd`       |
//! |   `PrepareForCreate` (status cleared, storedVersions,   |                            |
//! |   generation 1), defaults, pruning, validation, names   |                            |
//! | `PrepareForUpdate` (status kept, generation bumped when | registry `UpdateCrd`       |
//! |   the spec changes), `ValidateUpdate`, names            |                            |
//! | `statusStrategy` (only `.status` changes), validation   | registry `UpdateCrdStatus` |
//! | `ShouldDeleteDuringUpdate` (last finalizer removed)     | registry `UpdateCrd`       |
//! | etcd.go `REST.Delete` preconditions (its texts)         | [`CrdStrategy`]            |
//! | etcd.go first DELETE: deletionTimestamp, cleanup        | registry `DeleteCrd`       |
//! |   finalizer, Terminating condition, instance cleanup    |   ([`CrdStore`]'s mark)    |
//!
//! Every write through this store drops the gateway's own cache entry of the CRD at once
//! (other gateways follow the storage change stream).
//!
//! Upstream's CRD strategy answers `AllowCreateOnUpdate` false and
//! `AllowUnconditionalUpdate` false (a PUT without resourceVersion is a 422); CRDs are a
//! built-in type, so strategic merge patch is accepted, by the CRD's patch metadata
//! ([`crdplane_apiserver::strategic::CUSTOM_RESOURCE_DEFINITION`]).

use crate::context::Channel;
use crate::crd::CrdCache;
use crate::stores::typed;
use crdplane_apiserver::patch::{BuiltinPatch, PatchMechanism};
use crdplane_apiserver::rest::delete::{DeleteOptions, DeleteOptionsExt, has_deletion_timestamp};
use crdplane_apiserver::rest::{ListOptions, ListResult, Store, Stored, Strategy};
use crdplane_core::field::FieldError;
use crdplane_core::{ApiError, GroupResource};
use crdplane_proto::v1 as pb;
use crdplane_proto::v1::registry_client::RegistryClient;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Value, json};
use std::sync::OnceLock;

/// Group and resource of CRDs.
pub fn gr() -> &'static GroupResource {
    static GR: OnceLock<GroupResource> = OnceLock::new();
    GR.get_or_init(|| GroupResource::new("apiextensions.k8s.io", "customresourcedefinitions"))
}

static PATCH: BuiltinPatch =
    BuiltinPatch(crdplane_apiserver::strategic::CUSTOM_RESOURCE_DEFINITION);

/// The CRDs of one tenant in the registry service. `status` selects the endpoint updates go
/// to (`UpdateCrdStatus` for `/status`, else `UpdateCrd`).
pub struct CrdStore<'a> {
    /// Client of the registry service.
    pub registry: RegistryClient<Channel>,
    /// The gateway's cache of served CRDs (entries dropped after each write).
    pub cache: &'a CrdCache,
    /// The tenant whose CRDs these are.
    pub tenant: &'a str,
    /// Whether updates write the `/status` subresource.
    pub status: bool,
}

fn parse(json: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(json).map_err(ApiError::internal)
}

fn name_of(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

impl CrdStore<'_> {
    fn reg(&self) -> RegistryClient<Channel> {
        self.registry.clone()
    }

    fn write_request(&self, obj: &Value, dry_run: bool) -> Result<pb::CrdWriteRequest, ApiError> {
        Ok(pb::CrdWriteRequest {
            tenant: self.tenant.into(),
            crd_json: serde_json::to_vec(obj).map_err(ApiError::internal)?.into(),
            dry_run,
            name: name_of(obj).into(),
        })
    }

    async fn delete_crd(
        &self,
        name: &str,
        expected_rv: u64,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let r = self
            .reg()
            .delete_crd(pb::CrdDeleteRequest {
                tenant: self.tenant.into(),
                name: name.into(),
                expected_resource_version: expected_rv,
                dry_run,
            })
            .await;
        self.cache.invalidate(self.tenant, name);
        parse(
            &r.map_err(crdplane_proto::status::from_grpc)?
                .into_inner()
                .json,
        )
    }
}

impl Store for CrdStore<'_> {
    async fn get(&self, _namespace: &str, name: &str) -> Result<Value, ApiError> {
        let r = self
            .reg()
            .get_crd(pb::CrdGetRequest {
                tenant: self.tenant.into(),
                name: name.into(),
            })
            .await
            .map_err(crdplane_proto::status::from_grpc)?
            .into_inner();
        parse(&r.json)
    }

    /// The registry's start key is the (store-level) continue token, as in
    /// [`crate::stores::storage::StorageStore`].
    async fn list(&self, _namespace: &str, opts: &ListOptions) -> Result<ListResult, ApiError> {
        let r = self
            .reg()
            .list_crds(pb::CrdListRequest {
                tenant: self.tenant.into(),
                limit: opts.limit,
                start_after: opts.continue_token.clone(),
                name: String::new(),
                label_selector: opts.label_selector.clone(),
                field_selector: opts.field_selector.clone(),
            })
            .await
            .map_err(crdplane_proto::status::from_grpc)?
            .into_inner();
        Ok(ListResult {
            items: r.items.iter().map(|b| parse(b)).collect::<Result<_, _>>()?,
            resource_version: r.resource_version,
            continue_token: r.next_start_after,
            remaining: r.has_remaining_item_count.then_some(r.remaining_item_count),
        })
    }

    async fn create(&self, obj: Value, dry_run: bool) -> Result<Stored, ApiError> {
        let r = self
            .reg()
            .create_crd(self.write_request(&obj, dry_run)?)
            .await
            .map_err(crdplane_proto::status::from_grpc)?
            .into_inner();
        let v = parse(&r.json)?;
        self.cache.invalidate(self.tenant, name_of(&v));
        Ok(v.into())
    }

    /// The registry compares the body's resourceVersion with the stored one (a stale one is
    /// a Conflict): that is the compare-and-swap on `old`'s resourceVersion.
    async fn update(&self, mut obj: Value, old: &Value, dry_run: bool) -> Result<Stored, ApiError> {
        let expected_rv = crdplane_apiserver::rest::stored_rv(old);
        if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert("resourceVersion".into(), json!(expected_rv.to_string()));
        }
        let w = self.write_request(&obj, dry_run)?;
        let r = if self.status {
            self.reg().update_crd_status(w).await
        } else {
            self.reg().update_crd(w).await
        };
        self.cache.invalidate(self.tenant, name_of(&obj));
        parse(
            &r.map_err(crdplane_proto::status::from_grpc)?
                .into_inner()
                .json,
        )
        .map(Stored::from)
    }

    /// etcd.go `REST.Delete` on a CRD not yet being deleted: the registry marks it (and
    /// starts the removal of its instances) with a compare-and-swap on `expected_rv`.
    async fn mark_deleting(
        &self,
        old: &Value,
        expected_rv: u64,
        dry_run: bool,
    ) -> Result<Option<Value>, ApiError> {
        if has_deletion_timestamp(old) {
            return Ok(None);
        }
        self.delete_crd(name_of(old), expected_rv, dry_run)
            .await
            .map(Some)
    }

    /// A CRD being deleted whose finalizers are all gone: the registry removes it.
    async fn delete(
        &self,
        _namespace: &str,
        name: &str,
        expected_rv: u64,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        self.delete_crd(name, expected_rv, dry_run).await
    }
}

/// The field-management schema of a CRD: apiextensions-apiserver `apis/apiextensions/v1`
/// `types.go` as upstream's OpenAPI publishes it (the registry's document has only a shallow
/// CRD): `spec.names` and `status.acceptedNames` structs with atomic `shortNames` and
/// `categories`, `spec.versions` and `status.storedVersions` atomic lists, `spec.conversion`
/// down to the webhook's client config, `status.conditions` keyed by `type`.
pub fn field_schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let string = json!({"type": "string"});
        let atomic = json!({"type": "array", "items": string});
        let names = json!({"type": "object", "properties": {
            "plural": string, "singular": string, "kind": string, "listKind": string,
            "shortNames": atomic, "categories": atomic}});
        crdplane_core::managedfields::with_object_meta(&json!({"type": "object", "properties": {
            "apiVersion": string, "kind": string,
            "spec": {"type": "object", "properties": {
                "group": string, "names": names, "scope": string,
                "versions": {"type": "array", "items": {"type": "object"}},
                "preserveUnknownFields": {"type": "boolean"},
                "conversion": {"type": "object", "properties": {
                    "strategy": string,
                    "webhook": {"type": "object", "properties": {
                        "conversionReviewVersions": atomic,
                        "clientConfig": {"type": "object", "properties": {
                            "url": string, "caBundle": string,
                            "service": {"type": "object", "properties": {
                                "namespace": string, "name": string, "path": string,
                                "port": {"type": "integer"}}}}}}}}}}},
            "status": {"type": "object", "properties": {
                "acceptedNames": names, "storedVersions": atomic,
                "conditions": {"type": "array", "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["type"],
                    "items": {"type": "object", "properties": {
                        "type": string, "status": string, "lastTransitionTime": string,
                        "reason": string, "message": string}}}}}
        }}))
    })
}

/// The CRD strategy of the main resource (`status: false`) or of `/status`.
pub struct CrdStrategy {
    /// Whether this is the `/status` subresource (no create there).
    pub status: bool,
}

impl Strategy for CrdStrategy {
    fn group_resource(&self) -> &GroupResource {
        gr()
    }
    fn kind(&self) -> &str {
        "CustomResourceDefinition"
    }
    fn namespaced(&self) -> bool {
        false
    }
    fn has_status_subresource(&self) -> bool {
        true
    }
    /// strategy.go `AllowUnconditionalUpdate`: false.
    fn allow_unconditional_update(&self) -> bool {
        false
    }
    /// etcd.go `REST.Delete` returns the CRD (marked, or as it was when removed).
    fn return_deleted_object(&self) -> bool {
        true
    }
    fn patch_mechanism(&self) -> &dyn PatchMechanism {
        &PATCH
    }
    fn field_schema(&self) -> &Value {
        field_schema()
    }
    /// The fields a `v1.CustomResourceDefinition` does not have (the patched object's).
    fn unknown_fields(&self, obj: &Value) -> Vec<String> {
        typed::unknown_fields::<CustomResourceDefinition>(obj)
    }
    /// Fields the type does not have dropped (as decoding does upstream), then
    /// `BeforeCreate`'s generateName (the generic create handler needs the name); every other
    /// create step is the registry's (module doc).
    fn prepare_for_create(&self, obj: &mut Value, _namespace: &str) -> Result<(), ApiError> {
        if self.status {
            return Err(ApiError::method_not_supported(gr(), "create"));
        }
        typed::drop_unknown_fields::<CustomResourceDefinition>(obj);
        let meta = obj
            .as_object_mut()
            .ok_or_else(|| ApiError::bad_request("the object provided is not a JSON object"))?
            .entry("metadata")
            .or_insert_with(|| json!({}));
        if meta.is_null() {
            *meta = json!({});
        }
        let meta = meta
            .as_object_mut()
            .ok_or_else(|| ApiError::bad_request("metadata must be an object"))?;
        let named = meta
            .get("name")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty());
        if !named
            && let Some(prefix) = meta
                .get("generateName")
                .and_then(Value::as_str)
                .filter(|p| !p.is_empty())
        {
            let name = crdplane_apiserver::rest::meta::generate_name(prefix);
            meta.insert("name".into(), Value::String(name));
        }
        Ok(())
    }
    /// Fields the type does not have dropped (as decoding does upstream); the registry's
    /// `UpdateCrd` / `UpdateCrdStatus` keep status (resp. everything but status) and move
    /// the generation (module doc).
    fn prepare_for_update(&self, new: &mut Value, _old: &Value) -> Result<(), ApiError> {
        typed::drop_unknown_fields::<CustomResourceDefinition>(new);
        Ok(())
    }
    /// The registry validates.
    fn validate(&self, _obj: &Value) -> Vec<FieldError> {
        Vec::new()
    }
    /// The registry validates.
    fn validate_update(&self, _new: &Value, _old: &Value) -> Vec<FieldError> {
        Vec::new()
    }
    /// The registry's `UpdateCrd` removes a CRD being deleted whose last finalizer goes.
    fn should_delete_during_update(&self, _new: &Value, _old: &Value) -> bool {
        false
    }
    /// etcd.go `REST.Delete`: both preconditions, checked before anything else, with its
    /// texts (not rest/delete.go's).
    fn check_delete_preconditions(&self, obj: &Value, o: &DeleteOptions) -> Result<(), ApiError> {
        delete_preconditions(obj, o)
    }
}

/// etcd.go `REST.Delete`'s precondition checks of a CRD (409 with its texts).
pub fn delete_preconditions(obj: &Value, o: &DeleteOptions) -> Result<(), ApiError> {
    let meta = |k: &str| {
        obj.pointer(&format!("/metadata/{k}"))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let name = meta("name");
    if let Some(uid) = o.precondition_uid()
        && uid != meta("uid")
    {
        return Err(ApiError::conflict(
            gr(),
            name,
            &format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                meta("uid")
            ),
        ));
    }
    if let Some(rv) = o.precondition_rv()
        && rv != meta("resourceVersion")
    {
        return Err(ApiError::conflict(
            gr(),
            name,
            &format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                meta("resourceVersion")
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd() -> Value {
        json!({"metadata": {"name": "crontabs.stable.example.com", "uid": "u1",
            "resourceVersion": "7"}, "spec": {}})
    }

    /// A CRD apply owns what upstream's does: declared fields without `.`, `versions` as one
    /// field, conditions by type.
    #[test]
    fn crd_fields_follow_the_crd_types() {
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition", "metadata": {"name": "a.b.c"},
            "spec": {"group": "b.c", "scope": "Namespaced",
                "names": {"plural": "a", "kind": "A", "shortNames": ["x"]},
                "versions": [{"name": "v1", "served": true, "storage": true}],
                "conversion": {"strategy": "None"}},
            "status": {"conditions": [{"type": "Established", "status": "True"}]}});
        let fields = crdplane_core::structured::field_set(&crd, Some(field_schema())).unwrap();
        assert_eq!(
            fields.to_value(),
            json!({"f:apiVersion": {}, "f:kind": {}, "f:metadata": {"f:name": {}},
                "f:spec": {"f:group": {}, "f:scope": {},
                    "f:names": {"f:plural": {}, "f:kind": {}, "f:shortNames": {}},
                    "f:versions": {}, "f:conversion": {"f:strategy": {}}},
                "f:status": {"f:conditions": {"k:{\"type\":\"Established\"}": {
                    ".": {}, "f:type": {}, "f:status": {}}}}})
        );
    }

    #[test]
    fn delete_preconditions_use_the_crd_texts() {
        let o = crdplane_apiserver::rest::delete::preconditioned;
        let cases: [(DeleteOptions, Option<&str>); 5] = [
            (o(None, None), None),
            (o(Some("u1"), Some("7")), None),
            (
                o(Some("u2"), None),
                Some(
                    "Operation cannot be fulfilled on customresourcedefinitions.apiextensions.k8s.io \"crontabs.stable.example.com\": Precondition failed: UID in precondition: u2, UID in object meta: u1",
                ),
            ),
            (
                o(None, Some("6")),
                Some(
                    "Operation cannot be fulfilled on customresourcedefinitions.apiextensions.k8s.io \"crontabs.stable.example.com\": Precondition failed: ResourceVersion in precondition: 6, ResourceVersion in object meta: 7",
                ),
            ),
            // The UID is checked first.
            (
                o(Some("u2"), Some("6")),
                Some(
                    "Operation cannot be fulfilled on customresourcedefinitions.apiextensions.k8s.io \"crontabs.stable.example.com\": Precondition failed: UID in precondition: u2, UID in object meta: u1",
                ),
            ),
        ];
        for (opts, want) in cases {
            let got = delete_preconditions(&crd(), &opts).err().map(|e| e.message);
            assert_eq!(got.as_deref(), want);
        }
    }

    #[test]
    fn create_completes_generate_name_only() {
        let s = CrdStrategy { status: false };
        let mut v =
            json!({"metadata": {"generateName": "x-"}, "status": {"storedVersions": ["v1"]}});
        s.prepare_for_create(&mut v, "").unwrap();
        let name = v["metadata"]["name"].as_str().unwrap();
        assert!(name.starts_with("x-") && name.len() == 7, "{name}");
        // Status, uid and generation are the registry's.
        assert_eq!(v["status"], json!({"storedVersions": ["v1"]}));
        assert!(v["metadata"].get("uid").is_none());
        let mut named = json!({"metadata": {"name": "a.b", "generateName": "x-"}});
        s.prepare_for_create(&mut named, "").unwrap();
        assert_eq!(named["metadata"]["name"], "a.b");
        assert!(
            CrdStrategy { status: true }
                .prepare_for_create(&mut json!({}), "")
                .is_err()
        );
    }
}
