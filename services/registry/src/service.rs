//! The tonic `Registry` service: CRD writes (create, update, status update, delete with
//! cascade to the custom resources), reads passed through to storage, and the per-tenant
//! read models the gateway needs (`Resolve`, `Discovery`, `OpenApiV2/V3`).
//!
//! Request path: gateway → `Registry` RPC → (`crd`, `validate`, `naming` pure passes +
//! validation service `ValidateCrd` for schemas) → storage service (`Storage` RPCs on
//! group `apiextensions.k8s.io`, resource `customresourcedefinitions`).
//!
//! Write semantics follow apiextensions-apiserver `pkg/registry/customresourcedefinition/
//! strategy.go` (PrepareForCreate/PrepareForUpdate, status strategy) and the generic
//! registry's `store.go` ordering of checks on update (NotFound, missing resourceVersion,
//! stale resourceVersion, then validation).

use crate::Channel;
use crate::cache::{Cache, OpenApiV2, Snapshot};
use crate::crd::{self, CrdView};
use crate::{discovery, naming, openapi, validate};
use crdplane_core::field::FieldErrorType;
use crdplane_core::names::now_timestamp;
use crdplane_core::{ApiError, FieldError};
use crdplane_proto::GrpcStatusExt;
use crdplane_proto::v1 as pb;
use crdplane_proto::v1::registry_server::Registry;
use crdplane_proto::v1::storage_client::StorageClient;
use crdplane_proto::v1::validation_client::ValidationClient;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tonic::{Request, Response, Status};

/// Largest gRPC message accepted from storage (a tenant's whole CRD list).
const MAX_STORAGE_MESSAGE: usize = 256 * 1024 * 1024;
/// Page size used when listing a tenant's CRDs for a snapshot.
const LIST_PAGE: u32 = 500;

/// The registry's gRPC service (`crdplane.v1.Registry`): CRD writes and reads of every
/// tenant, `Resolve`, discovery and OpenAPI documents; cheap to clone (shared state).
#[derive(Clone)]
pub struct RegistryService {
    inner: Arc<Inner>,
}

struct Inner {
    storage: StorageClient<Channel>,
    validation: Option<ValidationClient<Channel>>,
    cache: Cache,
    /// Deletion workers running in this replica (`lifecycle`).
    running: crate::lifecycle::Running,
    /// The garbage collector's lease id and followed items (`gc`).
    gc: crate::gc::GcState,
    /// CRD writes of one tenant are serialized within this replica (striped by tenant), so
    /// two concurrent creates cannot both claim the same name: names are computed from a
    /// list taken under the lock. Across replicas the race upstream also has remains.
    write_locks: Vec<tokio::sync::Mutex<()>>,
}

const WRITE_LOCK_STRIPES: usize = 64;

type ApiResult<T> = Result<T, ApiError>;

fn crd_ref(tenant: &str) -> pb::ResourceRef {
    pb::ResourceRef {
        tenant: tenant.to_string(),
        group: crd::GROUP.to_string(),
        resource: crd::RESOURCE.to_string(),
    }
}

fn crd_key(tenant: &str, name: &str) -> pb::ObjectKey {
    pb::ObjectKey {
        resource: Some(crd_ref(tenant)),
        namespace: String::new(),
        name: name.to_string(),
    }
}

fn object_write(v: &Value) -> ApiResult<pb::ObjectWrite> {
    let (head, tail) = crdplane_core::rvslot::split(v).map_err(ApiError::internal)?;
    Ok(pb::ObjectWrite {
        head: head.into(),
        tail: tail.into(),
    })
}

fn parse_json(b: &[u8]) -> ApiResult<Value> {
    serde_json::from_slice(b).map_err(|e| ApiError::internal(format!("stored CRD: {e}")))
}

fn crd_object(o: pb::StoredObject) -> pb::CrdObject {
    pb::CrdObject {
        json: o.json,
        resource_version: o.resource_version,
    }
}

/// A field error from the validation service, as data.
pub fn field_error_from_proto(e: &pb::FieldError) -> FieldError {
    let kind = FieldErrorType::from_cause_type(&e.r#type).unwrap_or(FieldErrorType::Invalid);
    let bad_value = if e.bad_value_json.is_empty() {
        None
    } else {
        serde_json::from_str(&e.bad_value_json).ok()
    };
    FieldError::new(kind, e.field.clone(), bad_value, e.detail.clone())
}

fn invalid(name: &str, errs: &[FieldError]) -> ApiError {
    let mut e = ApiError::invalid(crd::KIND, crd::GROUP, name, errs);
    // Go prints the empty (nil) storedVersions slice with `%#v` as `[]string(nil)`.
    let from = "Invalid value: []interface {}{}: must have at least one stored version";
    let to = "Invalid value: []string(nil): must have at least one stored version";
    e.message = e.message.replace(from, to);
    if let Some(d) = e.details.as_mut() {
        for c in &mut d.causes {
            c.message = c.message.replace(from, to);
        }
    }
    e
}

/// `store.go`'s update without a resourceVersion: the qualified "kind" is the resource and
/// the value is printed as Go prints a uint64 with `%#v`.
fn missing_resource_version(name: &str) -> ApiError {
    let fe = FieldError::invalid(
        "metadata.resourceVersion",
        json!(0),
        "must be specified for an update",
    );
    let mut e = ApiError::invalid(crd::RESOURCE, crd::GROUP, name, &[fe]);
    let from = "Invalid value: 0: must be specified for an update";
    let to = "Invalid value: 0x0: must be specified for an update";
    e.message = e.message.replace(from, to);
    if let Some(d) = e.details.as_mut() {
        for c in &mut d.causes {
            c.message = c.message.replace(from, to);
        }
    }
    e
}

/// Random suffix of `generateName` (`names.SimpleNameGenerator`: 5 chars of an alphabet
/// without vowels and confusable digits).
fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    uuid::Uuid::new_v4()
        .as_bytes()
        .iter()
        .take(5)
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect()
}

/// Appends the validation service's errors, skipping ones already reported here (both
/// sides check e.g. that every version has a schema; upstream reports it once).
fn merge(errs: &mut Vec<FieldError>, schema: Vec<FieldError>) {
    for e in schema {
        if !errs
            .iter()
            .any(|x| x.field == e.field && x.error_body() == e.error_body())
        {
            errs.push(e);
        }
    }
}

impl RegistryService {
    /// A service persisting through `storage` and checking schemas through `validation`
    /// (None: no schema checks).
    pub fn new(storage: Channel, validation: Option<Channel>) -> Self {
        let storage = StorageClient::new(storage)
            .max_decoding_message_size(MAX_STORAGE_MESSAGE)
            .max_encoding_message_size(MAX_STORAGE_MESSAGE);
        let validation = validation.map(|c| {
            ValidationClient::new(c)
                .max_decoding_message_size(64 * 1024 * 1024)
                .max_encoding_message_size(64 * 1024 * 1024)
        });
        Self {
            inner: Arc::new(Inner {
                storage,
                validation,
                cache: Cache::default(),
                running: Default::default(),
                gc: Default::default(),
                write_locks: (0..WRITE_LOCK_STRIPES)
                    .map(|_| tokio::sync::Mutex::new(()))
                    .collect(),
            }),
        }
    }

    async fn write_lock(&self, tenant: &str) -> tokio::sync::MutexGuard<'_, ()> {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        tenant.hash(&mut h);
        let i = (h.finish() % WRITE_LOCK_STRIPES as u64) as usize;
        self.inner.write_locks[i].lock().await
    }

    pub(crate) fn storage(&self) -> StorageClient<Channel> {
        self.inner.storage.clone()
    }

    pub(crate) fn cache(&self) -> &Cache {
        &self.inner.cache
    }

    pub(crate) fn gc(&self) -> &crate::gc::GcState {
        &self.inner.gc
    }

    pub(crate) fn running(&self) -> &crate::lifecycle::Running {
        &self.inner.running
    }

    pub(crate) fn crd_key(&self, tenant: &str, name: &str) -> pb::ObjectKey {
        crd_key(tenant, name)
    }

    /// Every CRD of the tenant, straight from storage (for the lifecycle controllers).
    pub(crate) async fn crds_of(&self, tenant: &str) -> ApiResult<Vec<Value>> {
        self.list_all(tenant).await
    }

    /// Names freed by a deleted CRD go to the CRDs of its group that wanted them.
    pub(crate) async fn reconcile_names(&self, tenant: &str, group: &str) {
        let _guard = self.write_lock(tenant).await;
        self.reconcile_group(tenant, group).await;
    }

    /// Follows the storage `Changes` feed for CRDs forever, dropping tenants' snapshots.
    pub async fn watch_changes(self) {
        let mut backoff = Duration::from_millis(100);
        loop {
            let req = pb::ChangesRequest {
                group: crd::GROUP.into(),
                resource: crd::RESOURCE.into(),
            };
            match self.storage().changes(req).await {
                Ok(resp) => {
                    let mut stream = resp.into_inner();
                    self.inner.cache.set_live(true);
                    backoff = Duration::from_millis(100);
                    loop {
                        match stream.message().await {
                            Ok(Some(ch)) => self.inner.cache.invalidate(&ch.tenant),
                            Ok(None) => break,
                            Err(e) => {
                                tracing::warn!(error = %e, "CRD change feed broke");
                                break;
                            }
                        }
                    }
                    self.inner.cache.set_live(false);
                }
                Err(e) => {
                    tracing::debug!(error = %e, "CRD change feed unavailable");
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(2));
        }
    }

    async fn get_stored(&self, tenant: &str, name: &str) -> ApiResult<(Value, u64)> {
        let o = self
            .storage()
            .get(pb::GetRequest {
                key: Some(crd_key(tenant, name)),
            })
            .await
            .map_err(crdplane_proto::status::from_grpc)?
            .into_inner();
        Ok((parse_json(&o.json)?, o.resource_version))
    }

    /// Every CRD of the tenant, straight from storage.
    async fn list_all(&self, tenant: &str) -> ApiResult<Vec<Value>> {
        let mut out = Vec::new();
        let mut start_after = String::new();
        loop {
            let r = self
                .storage()
                .list(pb::ListRequest {
                    resource: Some(crd_ref(tenant)),
                    limit: LIST_PAGE,
                    start_after: start_after.clone(),
                    ..Default::default()
                })
                .await
                .map_err(crdplane_proto::status::from_grpc)?
                .into_inner();
            for item in &r.items {
                out.push(parse_json(item)?);
            }
            if r.next_start_after.is_empty() || r.next_start_after == start_after {
                break;
            }
            start_after = r.next_start_after;
        }
        Ok(out)
    }

    async fn snapshot(&self, tenant: &str) -> ApiResult<Arc<Snapshot>> {
        if let Some(s) = self.inner.cache.get(tenant) {
            return Ok(s);
        }
        let epoch = self.inner.cache.epoch(tenant);
        let snap = Arc::new(Snapshot::new(self.list_all(tenant).await?));
        self.inner.cache.put(tenant, epoch, snap.clone());
        Ok(snap)
    }

    /// Schema errors from the validation service (none when it is not configured).
    async fn schema_errors(&self, new: &Value, old: Option<&Value>) -> ApiResult<Vec<FieldError>> {
        let Some(client) = self.inner.validation.clone() else {
            return Ok(Vec::new());
        };
        let mut client = client;
        let r = client
            .validate_crd(pb::ValidateCrdRequest {
                crd_json: serde_json::to_vec(new).map_err(ApiError::internal)?.into(),
                old_crd_json: old
                    .map(serde_json::to_vec)
                    .transpose()
                    .map_err(ApiError::internal)?
                    .unwrap_or_default()
                    .into(),
            })
            .await
            .map_err(crdplane_proto::status::from_grpc)?
            .into_inner();
        Ok(r.errors.iter().map(field_error_from_proto).collect())
    }

    fn views(raw: &[Value]) -> Vec<CrdView> {
        raw.iter()
            .map(|v| CrdView::from_value(v).unwrap_or_default())
            .collect()
    }

    /// Re-runs naming for the CRDs of `group` whose names are not (all) accepted, e.g. after
    /// the CRD that held a name was deleted (the naming controller requeues the group).
    async fn reconcile_group(&self, tenant: &str, group: &str) {
        let Ok(all) = self.list_all(tenant).await else {
            return;
        };
        let views = Self::views(&all);
        let now = now_timestamp();
        let mut changed = false;
        for (raw, view) in all.iter().zip(&views) {
            if view.spec.group != group || view.is_condition_true("NamesAccepted") {
                continue;
            }
            let mut v = view.clone();
            let mut r = raw.clone();
            naming::apply(&mut v, &mut r, &views, &now);
            if r.get("status") == raw.get("status") {
                continue;
            }
            let Ok(write) = object_write(&r) else {
                continue;
            };
            let res = self
                .storage()
                .update(pb::UpdateRequest {
                    key: Some(crd_key(tenant, &view.metadata.name)),
                    object: Some(write),
                    expected_resource_version: crd::resource_version_of(raw),
                    dry_run: false,
                    ttl_seconds: 0,
                })
                .await;
            if let Err(e) = res {
                tracing::debug!(error = %e, crd = %view.metadata.name, "naming reconcile skipped");
            }
            changed = true;
        }
        if changed {
            self.inner.cache.invalidate(tenant);
        }
    }

    /// Creates a CRD: defaults, `PrepareForCreate` and validation as apiextensions-apiserver
    /// `pkg/registry/customresourcedefinition/strategy.go`, then names and conditions.
    pub async fn create(&self, req: pb::CrdWriteRequest) -> ApiResult<pb::CrdObject> {
        let _guard = self.write_lock(&req.tenant).await;
        let mut v = crd::decode(&req.crd_json)?;
        crd::prune_unknown(&mut v);
        crd::apply_defaults(&mut v);
        let now = now_timestamp();
        {
            let m = crd::metadata_mut(&mut v);
            // BeforeCreate: cluster-scoped objects lose any namespace.
            m.remove("namespace");
            let name = m.get("name").and_then(Value::as_str).unwrap_or_default();
            let gen_name = m
                .get("generateName")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            if name.is_empty() && !gen_name.is_empty() {
                m.insert(
                    "name".into(),
                    format!("{gen_name}{}", random_suffix()).into(),
                );
            }
            for k in [
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "selfLink",
                "resourceVersion",
            ] {
                m.remove(k);
            }
            m.insert("uid".into(), uuid::Uuid::new_v4().to_string().into());
            m.insert("creationTimestamp".into(), now.clone().into());
            m.insert("generation".into(), 1.into());
        }
        let mut view = CrdView::from_value(&v)?;
        let name = view.metadata.name.clone();
        // PrepareForCreate: status reset, storedVersions = [storage version].
        view.status = crd::Status::default();
        if let Some(sv) = view.storage_version() {
            view.status.stored_versions = vec![sv.name.clone()];
        }
        let mut errs = validate::validate_create(&view, &v);
        merge(&mut errs, self.schema_errors(&v, None).await?);
        if !errs.is_empty() {
            return Err(invalid(&name, &errs));
        }
        // Names already claimed in the tenant: the snapshot, fresh under the write lock
        // (own writes invalidate it synchronously, other replicas' through the change feed).
        let others = self.snapshot(&req.tenant).await?;
        naming::apply(&mut view, &mut v, &others.views, &now);
        let o = self
            .storage()
            .create(pb::CreateRequest {
                key: Some(crd_key(&req.tenant, &name)),
                object: Some(object_write(&v)?),
                dry_run: req.dry_run,
                ttl_seconds: 0,
            })
            .await
            .map_err(crdplane_proto::status::from_grpc)?
            .into_inner();
        if !req.dry_run {
            self.inner.cache.invalidate(&req.tenant);
        }
        Ok(crd_object(o))
    }

    /// Common start of both update endpoints: decode, name check, the stored object and the
    /// resourceVersion checks, in `store.go`'s order.
    async fn begin_update(&self, req: &pb::CrdWriteRequest) -> ApiResult<(Value, Value, u64)> {
        let mut v = crd::decode(&req.crd_json)?;
        crd::prune_unknown(&mut v);
        let name = crd::name_of(&v).to_string();
        if !req.name.is_empty() && name != req.name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({name}) does not match the name on the URL ({})",
                req.name
            )));
        }
        let (old, old_rv) = self.get_stored(&req.tenant, &name).await?;
        let rv_str = v
            .get("metadata")
            .and_then(|m| m.get("resourceVersion"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if rv_str.is_empty() {
            return Err(missing_resource_version(&name));
        }
        let rv: u64 = rv_str.parse().map_err(|_| {
            invalid(
                &name,
                &[FieldError::invalid(
                    "metadata.resourceVersion",
                    json!(rv_str),
                    "must be a valid resourceVersion",
                )],
            )
        })?;
        if rv == 0 {
            return Err(missing_resource_version(&name));
        }
        if rv != old_rv {
            return Err(ApiError::stale(&crd::group_resource(), &name));
        }
        Ok((v, old, old_rv))
    }

    /// The compare-and-swap of an update. An object equal to the stored one is not written
    /// (etcd3 store.go `GuaranteedUpdate` skips the write when the new bytes equal the
    /// existing ones): the stored object comes back with its resourceVersion, no event.
    async fn write_update(
        &self,
        tenant: &str,
        name: &str,
        v: &Value,
        old: &Value,
        expected: u64,
        dry_run: bool,
    ) -> ApiResult<pb::CrdObject> {
        if v == old {
            return Ok(pb::CrdObject {
                json: serde_json::to_vec(old).map_err(ApiError::internal)?.into(),
                resource_version: expected,
            });
        }
        let o = self
            .storage()
            .update(pb::UpdateRequest {
                key: Some(crd_key(tenant, name)),
                object: Some(object_write(v)?),
                expected_resource_version: expected,
                dry_run,
                ttl_seconds: 0,
            })
            .await
            .map_err(crdplane_proto::status::from_grpc)?
            .into_inner();
        if !dry_run {
            self.inner.cache.invalidate(tenant);
        }
        Ok(crd_object(o))
    }

    /// Updates a CRD's spec and metadata (status is kept from the stored object).
    pub async fn update(&self, req: pb::CrdWriteRequest) -> ApiResult<pb::CrdObject> {
        let _guard = self.write_lock(&req.tenant).await;
        let (mut v, old, old_rv) = self.begin_update(&req).await?;
        crd::apply_defaults(&mut v);
        let old_view = CrdView::from_value(&old)?;
        let name = old_view.metadata.name.clone();
        let now = now_timestamp();
        {
            let m = crd::metadata_mut(&mut v);
            m.remove("namespace");
            let old_meta = old.get("metadata");
            let keep = |k: &str| old_meta.and_then(|m| m.get(k)).cloned();
            if m.get("uid")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
                && let Some(uid) = keep("uid")
            {
                m.insert("uid".into(), uid);
            }
            for k in [
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
            ] {
                match keep(k) {
                    Some(x) => m.insert(k.into(), x),
                    None => m.remove(k),
                };
            }
        }
        // PrepareForUpdate: generation moves only with the spec.
        let spec_changed = v.get("spec") != old.get("spec");
        let generation = old_view.metadata.generation + i64::from(spec_changed);
        crd::metadata_mut(&mut v).insert("generation".into(), generation.into());

        let mut errs = Vec::new();
        if let (Some(new_uid), Some(old_uid)) = (
            v.pointer("/metadata/uid").and_then(Value::as_str),
            old.pointer("/metadata/uid").and_then(Value::as_str),
        ) && new_uid != old_uid
        {
            errs.push(FieldError::invalid(
                "metadata.uid",
                json!(new_uid),
                "field is immutable",
            ));
        }
        let mut view = CrdView::from_value(&v)?;
        // PrepareForUpdate: status comes from the stored object; storedVersions gains the
        // (new) storage version.
        view.status = old_view.status.clone();
        if let Some(sv) = view.storage_version().map(|s| s.name.clone())
            && !view.status.stored_versions.contains(&sv)
        {
            view.status.stored_versions.push(sv);
        }
        errs.extend(validate::validate_update(&view, &v, &old_view));
        merge(&mut errs, self.schema_errors(&v, Some(&old)).await?);
        if !errs.is_empty() {
            return Err(invalid(&name, &errs));
        }
        // Names already claimed in the tenant: the snapshot, fresh under the write lock
        // (own writes invalidate it synchronously, other replicas' through the change feed).
        let others = self.snapshot(&req.tenant).await?;
        naming::apply(&mut view, &mut v, &others.views, &now);
        let names_changed = view.status.accepted_names != old_view.status.accepted_names;
        // store.go ShouldDeleteDuringUpdate: a CRD being deleted whose last finalizer is
        // removed (e.g. `kubectl patch crd … -p '{"metadata":{"finalizers":[]}}'`) is
        // deleted by that update.
        let being_deleted = old
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|t| !t.is_null());
        let no_finalizers = v
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_none_or(|f| f.is_empty());
        if being_deleted && no_finalizers {
            if req.dry_run {
                return Ok(pb::CrdObject {
                    json: serde_json::to_vec(&v).map_err(ApiError::internal)?.into(),
                    resource_version: old_rv,
                });
            }
            let o = self
                .storage()
                .delete(pb::DeleteRequest {
                    key: Some(crd_key(&req.tenant, &name)),
                    expected_resource_version: old_rv,
                    dry_run: false,
                })
                .await
                .map_err(crdplane_proto::status::from_grpc)?
                .into_inner();
            self.inner.cache.invalidate(&req.tenant);
            self.reconcile_group(&req.tenant, &view.spec.group).await;
            return Ok(crd_object(o));
        }
        let out = self
            .write_update(&req.tenant, &name, &v, &old, old_rv, req.dry_run)
            .await?;
        if names_changed && !req.dry_run {
            self.reconcile_group(&req.tenant, &view.spec.group).await;
        }
        Ok(out)
    }

    /// Updates a CRD's `status` subresource (everything else is kept from the stored object).
    pub async fn update_status(&self, req: pb::CrdWriteRequest) -> ApiResult<pb::CrdObject> {
        let _guard = self.write_lock(&req.tenant).await;
        let (v, old, old_rv) = self.begin_update(&req).await?;
        let old_view = CrdView::from_value(&old)?;
        let name = old_view.metadata.name.clone();
        // statusStrategy.PrepareForUpdate: everything but status comes from the stored object.
        let mut next = old.clone();
        if let Some(obj) = next.as_object_mut() {
            match v.get("status") {
                Some(s) => obj.insert("status".into(), s.clone()),
                None => obj.remove("status"),
            };
        }
        let mut view = CrdView::from_value(&next)?;
        let errs = validate::validate_status_update(&view);
        if !errs.is_empty() {
            return Err(invalid(&name, &errs));
        }
        // The naming/establishing controllers react to every status write.
        let others = self.snapshot(&req.tenant).await?;
        naming::apply(&mut view, &mut next, &others.views, &now_timestamp());
        self.write_update(&req.tenant, &name, &next, &old, old_rv, req.dry_run)
            .await
    }

    /// DELETE of a CRD (`etcd.go` `REST.Delete`): the first request marks the CRD —
    /// `deletionTimestamp`, finalizer `customresourcecleanup.apiextensions.k8s.io`,
    /// condition Terminating/InstanceDeletionPending — and returns it; the finalizer
    /// controller (`lifecycle`) deletes the instances in the background and then the CRD.
    /// Later requests follow the generic store: the object is returned while finalizers
    /// remain, deleted when none do.
    pub async fn delete(&self, req: pb::CrdDeleteRequest) -> ApiResult<pb::CrdObject> {
        let _guard = self.write_lock(&req.tenant).await;
        let (cur, cur_rv) = self.get_stored(&req.tenant, &req.name).await?;
        let terminating = cur
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|v| !v.is_null());
        if !terminating {
            if req.expected_resource_version != 0 && req.expected_resource_version != cur_rv {
                return Err(ApiError::conflict(
                    &crd::group_resource(),
                    &req.name,
                    &format!(
                        "Precondition failed: ResourceVersion in precondition: {}, ResourceVersion in object meta: {cur_rv}",
                        req.expected_resource_version
                    ),
                ));
            }
            let work = crate::lifecycle::Work::Crd {
                tenant: req.tenant.clone(),
                name: req.name.clone(),
            };
            if !req.dry_run {
                crate::lifecycle::enqueue(&mut self.storage(), &work).await?;
            }
            let mut marked = cur.clone();
            {
                let m = crd::metadata_mut(&mut marked);
                m.insert("deletionTimestamp".into(), now_timestamp().into());
                let mut fins: Vec<Value> = m
                    .get("finalizers")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                if !fins
                    .iter()
                    .any(|f| f.as_str() == Some(crate::lifecycle::CLEANUP_FINALIZER))
                {
                    fins.push(crate::lifecycle::CLEANUP_FINALIZER.into());
                }
                m.insert("finalizers".into(), Value::Array(fins));
            }
            crate::lifecycle::set_terminating(
                &mut marked,
                "True",
                "InstanceDeletionPending",
                "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
            );
            let out = self
                .write_update(&req.tenant, &req.name, &marked, &cur, cur_rv, req.dry_run)
                .await?;
            if !req.dry_run {
                // Recorded again after the mark: a worker that removed the entry between
                // the first record and the mark sees it come back.
                crate::lifecycle::enqueue(&mut self.storage(), &work).await?;
                self.kick(work);
            }
            return Ok(out);
        }
        if req.expected_resource_version != 0 && req.expected_resource_version != cur_rv {
            return Err(ApiError::conflict(
                &crd::group_resource(),
                &req.name,
                &format!(
                    "the ResourceVersion in the precondition ({}) does not match the ResourceVersion in record ({cur_rv}). The object might have been modified",
                    req.expected_resource_version
                ),
            ));
        }
        let has_finalizers = cur
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
        if has_finalizers || req.dry_run {
            return Ok(pb::CrdObject {
                json: serde_json::to_vec(&cur).map_err(ApiError::internal)?.into(),
                resource_version: cur_rv,
            });
        }
        let view = CrdView::from_value(&cur)?;
        let o = self
            .storage()
            .delete(pb::DeleteRequest {
                key: Some(crd_key(&req.tenant, &req.name)),
                expected_resource_version: cur_rv,
                dry_run: false,
            })
            .await
            .map_err(crdplane_proto::status::from_grpc)?
            .into_inner();
        self.inner.cache.invalidate(&req.tenant);
        self.reconcile_group(&req.tenant, &view.spec.group).await;
        Ok(crd_object(o))
    }

    /// Reads one CRD by name.
    pub async fn get(&self, req: pb::CrdGetRequest) -> ApiResult<pb::CrdObject> {
        let o = self
            .storage()
            .get(pb::GetRequest {
                key: Some(crd_key(&req.tenant, &req.name)),
            })
            .await
            .map_err(crdplane_proto::status::from_grpc)?
            .into_inner();
        Ok(crd_object(o))
    }

    /// Lists a tenant's CRDs, one page at a time.
    pub async fn list(&self, req: pb::CrdListRequest) -> ApiResult<pb::CrdListResponse> {
        let r = self
            .storage()
            .list(pb::ListRequest {
                resource: Some(crd_ref(&req.tenant)),
                namespace: String::new(),
                limit: req.limit,
                start_after: req.start_after,
                name: req.name,
                label_selector: req.label_selector,
                field_selector: req.field_selector,
                ..Default::default()
            })
            .await
            .map_err(crdplane_proto::status::from_grpc)?
            .into_inner();
        Ok(pb::CrdListResponse {
            items: r.items,
            resource_version: r.resource_version,
            next_start_after: r.next_start_after,
            remaining_item_count: r.remaining_item_count,
            has_remaining_item_count: r.has_remaining_item_count,
        })
    }

    /// The Established CRD serving `<resource>.<group>`; NotFound (404 page not found)
    /// otherwise.
    pub async fn resolve(&self, req: pb::ResolveRequest) -> ApiResult<pb::CrdObject> {
        let snap = self.snapshot(&req.tenant).await?;
        // The CRD serving <resource>.<group> is the one of that name (the name is enforced
        // to be spec.names.plural + "." + spec.group), once Established.
        let name = format!("{}.{}", req.resource, req.group);
        for (raw, view) in snap.raw.iter().zip(&snap.views) {
            if view.metadata.name == name && view.spec.group == req.group && view.established() {
                return Ok(pb::CrdObject {
                    json: serde_json::to_vec(raw).map_err(ApiError::internal)?.into(),
                    resource_version: crd::resource_version_of(raw),
                });
            }
        }
        Err(ApiError::path_not_found())
    }

    /// The tenant's discovery documents (`/apis`, `/apis/<g>/<v>`, aggregated).
    pub async fn discovery(&self, req: pb::DiscoveryRequest) -> ApiResult<pb::DiscoveryResponse> {
        let snap = self.snapshot(&req.tenant).await?;
        let d = snap
            .discovery
            .get_or_init(|| Arc::new(discovery::build(&snap.views)))
            .clone();
        Ok(pb::DiscoveryResponse {
            group_list: d.group_list.to_string().into_bytes().into(),
            resource_lists: d
                .resource_lists
                .iter()
                .map(|(k, v)| (k.clone(), v.to_string().into_bytes().into()))
                .collect(),
            aggregated: d.aggregated.to_string().into_bytes().into(),
            etag: d.etag.clone(),
        })
    }

    /// The tenant's `/openapi/v2` document (JSON, protobuf and ETag).
    pub async fn openapi_v2(&self, req: pb::OpenApiRequest) -> ApiResult<pb::OpenApiV2Response> {
        let snap = self.snapshot(&req.tenant).await?;
        let doc = snap
            .openapi_v2
            .get_or_init(|| {
                let doc = openapi::build_v2(&req.tenant, &snap.established_raw());
                let json = doc.to_string().into_bytes();
                let protobuf = openapi::encode_v2_protobuf(&doc);
                let etag = openapi::compute_etag(&json);
                Arc::new(OpenApiV2 {
                    json,
                    protobuf,
                    etag,
                })
            })
            .clone();
        Ok(pb::OpenApiV2Response {
            json: doc.json.clone().into(),
            protobuf: doc.protobuf.clone().into(),
            etag: doc.etag.clone(),
        })
    }

    /// The tenant's `/openapi/v3` index, or the group-version document at `path`.
    pub async fn openapi_v3(&self, req: pb::OpenApiRequest) -> ApiResult<pb::OpenApiV3Response> {
        let snap = self.snapshot(&req.tenant).await?;
        let docs = snap
            .openapi_v3
            .get_or_init(|| {
                Arc::new(openapi::build_v3_documents(
                    &req.tenant,
                    &snap.established_raw(),
                ))
            })
            .clone();
        let path = req.path.trim_matches('/');
        if path.is_empty() {
            let json = serde_json::to_vec(&docs.index).map_err(ApiError::internal)?;
            let etag = openapi::compute_etag(&json);
            return Ok(pb::OpenApiV3Response {
                json: json.into(),
                etag,
                found: true,
            });
        }
        Ok(match docs.group_versions.get(path) {
            Some(gv) => pb::OpenApiV3Response {
                json: gv.json.clone().into(),
                etag: gv.hash.clone(),
                found: true,
            },
            None => pb::OpenApiV3Response {
                found: false,
                ..Default::default()
            },
        })
    }
}

fn reply<T>(r: ApiResult<T>) -> Result<Response<T>, Status> {
    r.map(Response::new).map_err(|e| e.to_grpc())
}

#[tonic::async_trait]
impl Registry for RegistryService {
    async fn create_crd(
        &self,
        request: Request<pb::CrdWriteRequest>,
    ) -> Result<Response<pb::CrdObject>, Status> {
        reply(self.create(request.into_inner()).await)
    }
    async fn update_crd(
        &self,
        request: Request<pb::CrdWriteRequest>,
    ) -> Result<Response<pb::CrdObject>, Status> {
        reply(self.update(request.into_inner()).await)
    }
    async fn update_crd_status(
        &self,
        request: Request<pb::CrdWriteRequest>,
    ) -> Result<Response<pb::CrdObject>, Status> {
        reply(self.update_status(request.into_inner()).await)
    }
    async fn delete_crd(
        &self,
        request: Request<pb::CrdDeleteRequest>,
    ) -> Result<Response<pb::CrdObject>, Status> {
        reply(self.delete(request.into_inner()).await)
    }
    async fn get_crd(
        &self,
        request: Request<pb::CrdGetRequest>,
    ) -> Result<Response<pb::CrdObject>, Status> {
        reply(self.get(request.into_inner()).await)
    }
    async fn list_crds(
        &self,
        request: Request<pb::CrdListRequest>,
    ) -> Result<Response<pb::CrdListResponse>, Status> {
        reply(self.list(request.into_inner()).await)
    }
    async fn resolve(
        &self,
        request: Request<pb::ResolveRequest>,
    ) -> Result<Response<pb::CrdObject>, Status> {
        reply(RegistryService::resolve(self, request.into_inner()).await)
    }
    async fn discovery(
        &self,
        request: Request<pb::DiscoveryRequest>,
    ) -> Result<Response<pb::DiscoveryResponse>, Status> {
        reply(RegistryService::discovery(self, request.into_inner()).await)
    }
    async fn open_api_v2(
        &self,
        request: Request<pb::OpenApiRequest>,
    ) -> Result<Response<pb::OpenApiV2Response>, Status> {
        reply(self.openapi_v2(request.into_inner()).await)
    }
    async fn open_api_v3(
        &self,
        request: Request<pb::OpenApiRequest>,
    ) -> Result<Response<pb::OpenApiV3Response>, Status> {
        reply(self.openapi_v3(request.into_inner()).await)
    }
    async fn record_namespace_deletion(
        &self,
        request: Request<pb::NamespaceDeletionRequest>,
    ) -> Result<Response<pb::Empty>, Status> {
        reply(
            crate::lifecycle::record_namespace_deletion(&mut self.storage(), request.into_inner())
                .await,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_drops_duplicates_only() {
        let mut errs = vec![FieldError::required(
            "spec.versions[0].schema.openAPIV3Schema",
            "schemas are required",
        )];
        merge(
            &mut errs,
            vec![
                FieldError::required(
                    "spec.versions[0].schema.openAPIV3Schema",
                    "schemas are required",
                ),
                FieldError::forbidden("spec.versions[0].schema.openAPIV3Schema.uniqueItems", "x"),
            ],
        );
        assert_eq!(errs.len(), 2);
        assert_eq!(
            errs[1].field,
            "spec.versions[0].schema.openAPIV3Schema.uniqueItems"
        );
    }

    #[test]
    fn missing_resource_version_text() {
        let e = missing_resource_version("crontabs.stable.example.com");
        assert_eq!(e.code, 422);
        assert_eq!(
            e.message,
            "customresourcedefinitions.apiextensions.k8s.io \"crontabs.stable.example.com\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"
        );
        let d = e.details.unwrap();
        assert_eq!(d.kind, "customresourcedefinitions");
        assert_eq!(
            d.causes[0].message,
            "Invalid value: 0x0: must be specified for an update"
        );
    }

    #[test]
    fn proto_field_errors_convert() {
        let e = field_error_from_proto(&pb::FieldError {
            r#type: "FieldValueRequired".into(),
            field: "spec.versions[0].schema.openAPIV3Schema.type".into(),
            bad_value_json: String::new(),
            detail: "must not be empty at the root".into(),
            has_value: false,
        });
        assert_eq!(
            e.to_string(),
            "spec.versions[0].schema.openAPIV3Schema.type: Required value: must not be empty at the root"
        );
        let e = field_error_from_proto(&pb::FieldError {
            r#type: "FieldValueInvalid".into(),
            field: "f".into(),
            bad_value_json: "\"x\"".into(),
            detail: "d".into(),
            has_value: true,
        });
        assert_eq!(e.to_string(), "f: Invalid value: \"x\": d");
    }

    #[test]
    fn generated_suffix_shape() {
        let s = random_suffix();
        assert_eq!(s.len(), 5);
        assert!(
            s.bytes()
                .all(|b| b"bcdfghjklmnpqrstvwxz2456789".contains(&b))
        );
    }
}
