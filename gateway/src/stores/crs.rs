//! Custom resources for the generic handlers: one served version of a CRD as a `Store`
//! ([`CrStore`], the storage gRPC service with version conversion and read defaults), its
//! `Strategy` ([`CrStrategy`]; `/status` wraps it in `StatusStrategy`) and the schema
//! admission plugin ([`SchemaAdmission`], the validation service).
//!
//! Where it sits: `crs.rs` decodes a custom-resource write and calls the generic handlers of
//! `crdplane_apiserver::handlers` (identity checks, the retry-on-conflict loop,
//! preconditions, finalizers, no-op detection, dry-run) over these three; underneath,
//! [`crate::cr_store`] talks to the services. Follows apiextensions-apiserver
//! pkg/registry/customresource (etcd.go `CustomResourceStorage`, strategy.go,
//! status_strategy.go, validator.go).
//!
//! Which side does what:
//!
//! | step (upstream)                                           | done by                  |
//! |-----------------------------------------------------------|--------------------------|
//! | `BeforeCreate`/`PrepareForCreate` (system fields, status  | [`CrStrategy`] (shared   |
//! |   dropped with a status subresource, generation 1)        |   metadata rules)        |
//! | `PrepareForUpdate` (status kept, generation bumped)       | [`CrStrategy`]           |
//! | `Validate`/`ValidateUpdate`: ObjectMeta, apiVersion/kind, | [`SchemaAdmission`]: the |
//! |   pruning, defaulting, the schema, the scale paths,       |   validation service     |
//! |   unknown/duplicate fields under `fieldValidation`        |   (`Admit`)              |
//! | NamespaceLifecycle                                        | `lifecycle::NamespaceExists` |
//! | storage version conversion, read defaults                 | [`CrStore`]              |
//! | the garbage collector's work items                        | [`CrStore`]              |
//!
//! The schema checks run as an admission plugin rather than in `Strategy::validate`
//! because they are a call to another service (async, and they prune and default the
//! object, which upstream's strategy does while decoding).

use crate::context::{Ctx, Req};
use crate::cr_store::{
    admit, api_version, for_version, get_stored, key, object_write, stored_form,
};
use crate::crd::{CrdInfo, VersionInfo};
use crate::request::parse_object;
use crate::stores::storage::StorageStore;
use bytes::Bytes;
use crdplane_apiserver::admission::{Admission, Attributes, Operation};
use crdplane_apiserver::patch::{CustomResourcePatch, PatchMechanism};
use crdplane_apiserver::rest::{EncodedList, ListOptions, ListResult, Store, Stored, Strategy};
use crdplane_core::field::FieldError;
use crdplane_core::{ApiError, GroupResource};
use crdplane_proto::v1 as pb;
use futures::future::BoxFuture;
use serde_json::Value;

/// The objects of one custom resource in one tenant, as one served version shows them:
/// the storage service ([`StorageStore`]) with the version conversion and read defaults
/// of the CRD, and creates through the gateway's create batcher.
pub struct CrStore<'a> {
    inner: StorageStore<'a>,
    ctx: &'a Ctx,
    crd: &'a CrdInfo,
    ver: &'a VersionInfo,
}

impl<'a> CrStore<'a> {
    /// The objects of `crd` in `tenant`, served in version `ver`.
    pub fn new(ctx: &'a Ctx, tenant: &'a str, crd: &'a CrdInfo, ver: &'a VersionInfo) -> Self {
        CrStore {
            inner: StorageStore {
                storage: &ctx.storage,
                tenant,
                group: &crd.group,
                resource: &crd.plural,
                ttl_seconds: 0,
            },
            ctx,
            crd,
            ver,
        }
    }

    /// A just-written object as the served version shows it: [`as_written`], with the
    /// stored bytes as its encoding when the request's version is the storage version (the
    /// answer is then the stored bytes, as a GET of it would send them).
    fn as_written(
        &self,
        stored: Value,
        served_api_version: Option<Value>,
        json: Bytes,
        rv: u64,
    ) -> Stored {
        let encoded = (self.ver.name == self.crd.storage_version).then(|| json.to_vec());
        Stored {
            object: as_written(stored, served_api_version, rv),
            encoded,
        }
    }

    /// Stored bytes as the served version shows them (apiVersion, read defaults).
    async fn served(&self, stored: Bytes) -> Result<Value, ApiError> {
        let b = for_version(
            self.ctx,
            self.inner.tenant,
            self.crd,
            self.ver,
            vec![stored],
        )
        .await?
        .pop()
        .unwrap_or_default();
        parse_object(&b)
    }
}

/// Whether every stored object already has `want` as its apiVersion (stored objects are
/// written with "apiVersion" as their first key).
fn all_served_as_is(items: &[Bytes], want: &str) -> bool {
    let prefix = format!(
        "{{\"apiVersion\":{}",
        serde_json::to_string(want).expect("json")
    );
    items.iter().all(|b| b.starts_with(prefix.as_bytes()))
}

impl Store for CrStore<'_> {
    async fn get(&self, namespace: &str, name: &str) -> Result<Value, ApiError> {
        self.served(self.inner.get_raw(namespace, name).await?)
            .await
    }

    async fn list(&self, namespace: &str, opts: &ListOptions) -> Result<ListResult, ApiError> {
        self.list_encoded(namespace, opts)
            .await?
            .into_list(parse_object)
    }

    /// Through the GET batcher; the stored bytes as they are unless the served version or
    /// read defaults rewrite them.
    async fn get_encoded(&self, namespace: &str, name: &str) -> Result<Bytes, ApiError> {
        let (tenant, crd) = (self.inner.tenant, self.crd);
        let Some(stored) = get_stored(self.ctx, crd, tenant, namespace, name).await? else {
            return Err(ApiError::not_found(&crd.gr(), name));
        };
        Ok(for_version(self.ctx, tenant, crd, self.ver, vec![stored])
            .await?
            .pop()
            .unwrap_or_default())
    }

    /// The stored bytes as they are (spliced into the list document) unless a version
    /// rewrite or read defaults are needed.
    async fn list_encoded(
        &self,
        namespace: &str,
        opts: &ListOptions,
    ) -> Result<EncodedList, ApiError> {
        let mut page = self.inner.list_encoded(namespace, opts).await?;
        let want = api_version(self.crd, &self.ver.name);
        if self.ver.has_defaults || !all_served_as_is(&page.items, &want) {
            let tenant = self.inner.tenant;
            page.items = for_version(self.ctx, tenant, self.crd, self.ver, page.items).await?;
        }
        Ok(page)
    }

    /// Through the create batcher; owner references of the new object are queued for the
    /// garbage collector's verification. The answer is `as_written` (a dry run's is the
    /// storage's answer, read back).
    async fn create(&self, obj: Value, dry_run: bool) -> Result<Stored, ApiError> {
        let m = |k: &str| {
            obj.get("metadata")
                .and_then(|m| m.get(k))
                .and_then(Value::as_str)
                .unwrap_or("")
        };
        let key = key(self.crd, self.inner.tenant, m("namespace"), m("name"));
        let served_api_version = obj.get("apiVersion").cloned();
        let stored = stored_form(self.crd, obj);
        let s = self
            .ctx
            .creates
            .call(pb::CreateRequest {
                key: Some(key),
                object: Some(object_write(&stored)?),
                dry_run,
                ttl_seconds: 0,
            })
            .await
            .map_err(crdplane_proto::status::from_grpc)?;
        if dry_run {
            return self.served(s.json).await.map(Stored::from);
        }
        crate::gc::verify_added_refs(&self.ctx.storage, self.inner.tenant, &s.json, None).await;
        Ok(self.as_written(stored, served_api_version, s.json, s.resource_version))
    }

    /// In the storage version; owner references the update adds are queued for the garbage
    /// collector's verification. The answer is `as_written` (a dry run's is the storage's
    /// answer, read back).
    async fn update(&self, obj: Value, old: &Value, dry_run: bool) -> Result<Stored, ApiError> {
        let served_api_version = obj.get("apiVersion").cloned();
        let stored = stored_form(self.crd, obj);
        let (json, rv) = self.inner.update_raw(&stored, old, dry_run).await?;
        if dry_run {
            return self.served(json).await.map(Stored::from);
        }
        crate::gc::verify_added_refs(&self.ctx.storage, self.inner.tenant, &json, Some(old)).await;
        Ok(self.as_written(stored, served_api_version, json, rv))
    }

    /// The garbage collector's work item, recorded before the write (`crate::gc`).
    async fn before_delete(&self, obj: &Value, dry_run: bool) -> Result<(), ApiError> {
        self.inner.before_delete(obj, dry_run).await
    }

    async fn delete(
        &self,
        namespace: &str,
        name: &str,
        expected_rv: u64,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let json = self
            .inner
            .delete_raw(namespace, name, expected_rv, dry_run)
            .await?;
        self.served(json).await
    }
}

/// What reading a just-written object back in the served version gives, without parsing
/// the stored bytes: the object as admitted (it carries the served version's defaults, and
/// the stored form differs from it only in apiVersion: conversion strategy None) with its
/// served apiVersion back and the resourceVersion the storage assigned. Measured: parsing
/// the storage's answer instead cost ~7 % of the gateway's instructions per create
/// (`loadtest/instructions-per-request.sh`, 214,097 → 199,238 at concurrency 1).
fn as_written(mut stored: Value, served_api_version: Option<Value>, rv: u64) -> Value {
    if let Some(m) = stored.as_object_mut() {
        if let Some(v) = served_api_version {
            m.insert("apiVersion".into(), v);
        }
        if let Some(meta) = m.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
    }
    stored
}

/// The rules of one served version of a custom resource (strategy.go `customResourceStrategy`):
/// the shared metadata rules, status kept apart when the version has a status subresource,
/// no create on update, a resourceVersion required on update, JSON and merge patch. Its
/// own validation is empty: the schema checks are [`SchemaAdmission`].
pub struct CrStrategy<'a> {
    gr: GroupResource,
    crd: &'a CrdInfo,
    ver: &'a VersionInfo,
}

impl<'a> CrStrategy<'a> {
    /// The strategy of version `ver` of `crd`.
    pub fn new(crd: &'a CrdInfo, ver: &'a VersionInfo) -> Self {
        CrStrategy {
            gr: crd.gr(),
            crd,
            ver,
        }
    }
}

static PATCH: CustomResourcePatch = CustomResourcePatch;

impl Strategy for CrStrategy<'_> {
    fn group_resource(&self) -> &GroupResource {
        &self.gr
    }
    fn kind(&self) -> &str {
        &self.crd.kind
    }
    fn namespaced(&self) -> bool {
        self.crd.namespaced
    }
    fn has_status_subresource(&self) -> bool {
        self.ver.has_status
    }
    fn field_schema(&self) -> &Value {
        &self.ver.field_schema
    }
    fn allow_unconditional_update(&self) -> bool {
        false
    }
    fn patch_mechanism(&self) -> &dyn PatchMechanism {
        &PATCH
    }
    /// The schema admission ([`SchemaAdmission`]) validates everything, ObjectMeta too.
    fn validate(&self, _obj: &Value) -> Vec<FieldError> {
        Vec::new()
    }
    fn validate_update(&self, _new: &Value, _old: &Value) -> Vec<FieldError> {
        Vec::new()
    }
    /// The validation service checks ObjectMeta (a missing name too) with the schema, so a
    /// nameless create with schema errors gets them all in one 422, as upstream's.
    fn metadata_validated_in_admission(&self) -> bool {
        true
    }
}

/// The validation service as an admission plugin: creates and updates (also of `/status`)
/// are pruned, defaulted and validated against the served version's schema (with the
/// ObjectMeta, type and scale-path checks), and the object is replaced by the admitted one.
/// The request's `fieldValidation` decides what unknown and duplicate fields do: warnings
/// (`Warn`), a 400 (`Strict`) or nothing (`Ignore`).
pub struct SchemaAdmission<'a> {
    /// The gateway's context (the validation client and its batcher).
    pub ctx: &'a Ctx,
    /// The request (its `fieldValidation`, verb and body findings).
    pub req: &'a Req,
    /// The CRD.
    pub crd: &'a CrdInfo,
    /// The version the request is served in.
    pub ver: &'a VersionInfo,
}

impl Admission for SchemaAdmission<'_> {
    fn admit<'a>(&'a self, a: &'a mut Attributes<'_>) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            let op = match a.operation {
                Operation::Create => pb::admit_request::Operation::Create,
                Operation::Update => pb::admit_request::Operation::Update,
                Operation::Delete => return Ok(()),
            };
            let Some(obj) = a.object.as_deref_mut() else {
                return Ok(());
            };
            // `/scale` writes are validated by the main resource's rules.
            let sub = if a.subresource == "status" {
                "status"
            } else {
                ""
            };
            let prior = std::mem::take(&mut a.errors);
            let (admitted, warnings) = admit(
                self.ctx, self.req, self.crd, self.ver, op, obj, a.old, sub, prior,
            )
            .await?;
            *obj = admitted;
            a.warnings.extend(warnings);
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `as_written` gives what parsing the stored bytes and converting them back to the
    /// served version gives: the same object, in any field order, with or without a
    /// resourceVersion in the written object.
    #[test]
    fn as_written_equals_the_stored_bytes_read_back() {
        for meta in [
            json!({"name": "a", "namespace": "team", "uid": "u", "generation": 1}),
            json!({"name": "a", "resourceVersion": "7", "labels": {"x": "y"}}),
        ] {
            let stored = json!({"apiVersion": "g.io/v1", "kind": "K", "metadata": meta,
                "spec": {"n": 1, "list": [1, {"z": null}]}, "status": {"ok": true}});
            let (head, tail) = crdplane_core::rvslot::split(&stored).unwrap();
            let mut read: Value =
                serde_json::from_slice(&crdplane_core::rvslot::join(&head, 42, &tail)).unwrap();
            read["apiVersion"] = json!("g.io/v2");
            assert_eq!(as_written(stored, Some(json!("g.io/v2")), 42), read);
        }
    }
}
