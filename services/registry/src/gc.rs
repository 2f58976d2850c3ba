//! The garbage collector: `metadata.ownerReferences` within a tenant, as kube-controller-
//! manager's collector makes them work (`pkg/controller/garbagecollector/garbagecollector.go`:
//! `attemptToDeleteItem`, `processDeletingDependentsItem`, `orphanDependents`; the owner-
//! reference rules of `graph_builder.go`).
//!
//! Where it sits: the gateway's DELETE (`gateway/src/crs.rs`, store.go semantics) removes an
//! object, or marks it with `deletionTimestamp` and the `orphan` / `foregroundDeletion`
//! finalizer for `propagationPolicy` Orphan / Foreground, and first records a work item
//! (`crdplane_core::gcqueue`, gateway `gc.rs`) in the registry's durable deletion queue.
//! Every registry replica follows that queue (`lifecycle::run_lifecycle`); this module works
//! the `gc.<uid>` entries:
//! - owner gone (absent, or its uid differs — a new object of the same name is not the owner),
//!   i.e. Background: each dependent is handled as `attemptToDeleteItem` does — references
//!   to owners that are absent (dangling) or waiting for their dependents are removed when
//!   a live owner remains; otherwise the dependent is deleted with its own policy (Foreground
//!   when it blocks an owner in foreground deletion and has dependents of its own);
//! - owner with `foregroundDeletion` (`processDeletingDependentsItem`): its dependents are
//!   deleted; once none with `blockOwnerDeletion: true` is left, the finalizer is removed
//!   (and the owner deleted when no finalizer remains);
//! - owner with `orphan` (`orphanDependents`): the owner's reference is removed from every
//!   dependent, then the finalizer.
//!
//! - verification item (`gcqueue::is_verify`, recorded by the gateway after a write that adds
//!   owner references; upstream's virtual owner nodes of `graph_builder.go`): the owner is
//!   looked up live; when absent, its dependents are handled as above (`attemptToDeleteItem`
//!   with `isDangling`'s lookup per dependent), when present the item is done at once;
//!   Objects written before the owner index existed, or whose item was lost to a crash
//!   between a write and its verification record, are found by the periodic resync
//!   ([`crate::resync`]), which records their verification items.
//! - objects removed by the CRD finalizer and the namespace deleter (`lifecycle.rs`) are
//!   owner deletions like any other: their items are recorded before the deletes
//!   (`gc_record_deleted`).
//!
//! Owner references are resolved with the tenant's CRDs (group from `apiVersion`, `kind`),
//! `v1` `Namespace` and the built-in types of `crdplane_core::builtin::BUILTIN` (ConfigMap,
//! Secret, ServiceAccount, Event, Lease: operators' usual dependents, and owners of custom
//! resources); dependents are custom resources and built-in objects alike. A namespaced owner of a cluster-scoped dependent is invalid: the
//! dependent is left alone (upstream `isDangling` returns
//! `namespacedOwnerOfClusterScopedObjectErr` and the item is forgotten) and upstream's Warning
//! event `OwnerRefInvalidNamespace` is recorded ([`invalid_namespace_event`]: a core `v1`
//! Event written to storage with the `--event-ttl` time to live, at most once per dependent
//! and owner per pass) and logged. Cross-namespace owners
//! cannot be expressed (a namespaced owner is looked up in the dependent's namespace). An
//! owner of a kind the tenant does not serve is kept as if it existed (upstream retries the
//! REST mapping and never deletes on it).
//!
//! Dependents are found with the storage service's owner index (`ListDependents`: an
//! `<owner uid>\0<key>` sorted set per (tenant, resource), kept by the write scripts), one
//! lookup per custom resource of the tenant and per built-in resource — no scan of objects.
//!
//! Work once across replicas: an item is claimed with a lease (`lease.holder`/`lease.until`
//! in the entry, written with compare-and-swap on its resourceVersion) and renewed while
//! worked; other replicas wait for the lease to expire (a killed holder's work is resumed by
//! whoever claims it next). The entry is removed with a CAS on the version the holder last
//! wrote, so a writer that recorded the item again meanwhile makes the holder look again.
//! Every object write is a CAS as well: a lost race is re-read on the next pass.

use crate::crd::CrdView;
use crate::lifecycle::get_opt;
use crate::service::RegistryService;
use crdplane_core::ApiError;
use crdplane_core::gcqueue::{self, Owner};
use crdplane_proto::GrpcStatusExt;
use crdplane_proto::v1 as pb;
use futures::StreamExt;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

/// The finalizer of an owner deleted with `propagationPolicy: Orphan` (upstream
/// `metav1.FinalizerOrphanDependents`): its dependents lose the ownerReference first.
pub const FINALIZER_ORPHAN: &str = "orphan";
/// The finalizer of an owner deleted with `propagationPolicy: Foreground` (upstream
/// `metav1.FinalizerDeleteDependents`): it goes only after its blocking dependents.
pub const FINALIZER_FOREGROUND: &str = "foregroundDeletion";
/// How long a claimed item stays with its holder without renewal.
const LEASE_MS: u64 = 15_000;
/// An item whose owner still exists (not yet deleted: the writer records the item before its
/// write) is looked at again for this long before it is dropped.
const GRACE_MS: u64 = 10_000;
/// Dependents asked for per call.
const PAGE: u32 = 500;
/// Dependents handled per pass (the lease is renewed between passes).
const PASS_BUDGET: usize = 2000;
/// Concurrent object writes of one pass.
const WRITERS: usize = 16;
/// Poll interval while dependents that block a foreground deletion are still there.
const POLL: Duration = Duration::from_secs(1);

type Storage = crdplane_proto::v1::storage_client::StorageClient<crate::Channel>;

/// The collector's state in one replica: its lease holder id, the items it follows (the
/// flag asks a running worker to look again), and the time to live of the events it records.
pub struct GcState {
    id: String,
    running: Mutex<HashMap<(String, String), bool>>,
    event_ttl_secs: std::sync::atomic::AtomicU64,
}

impl Default for GcState {
    fn default() -> Self {
        Self {
            id: uuid::Uuid::new_v4().to_string(),
            running: Mutex::default(),
            event_ttl_secs: DEFAULT_EVENT_TTL.as_secs().into(),
        }
    }
}

/// Default `--event-ttl` (kube-apiserver's `--event-ttl` default).
pub const DEFAULT_EVENT_TTL: Duration = Duration::from_secs(3600);
/// The event source of the collector's events (kube-controller-manager's garbage collector
/// records them as this component).
pub const EVENT_COMPONENT: &str = "garbage-collector-controller";

/// A resource of the tenant that owners and dependents may belong to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kind {
    /// API group ("" for the core group).
    pub group: String,
    /// Plural resource name, as stored.
    pub resource: String,
    /// The kind that ownerReferences name.
    pub kind: String,
    /// Whether objects of the kind live in a namespace.
    pub namespaced: bool,
}

/// The tenant's kinds (upstream: the RESTMapper): `v1` Namespace, the built-in types of
/// [`crdplane_core::builtin::BUILTIN`] and the tenant's established CRDs.
#[derive(Debug, Default)]
pub struct Kinds {
    kinds: Vec<Kind>,
}

/// The built-in types as kinds, by their storage triple: one kind per stored resource
/// (`events.k8s.io/v1` Event is stored as core `v1` events, which stand for both).
fn builtin_kinds() -> Vec<Kind> {
    let mut out: Vec<Kind> = Vec::new();
    for b in crdplane_core::builtin::BUILTIN {
        let (group, resource) = b.storage;
        if out
            .iter()
            .any(|k| k.group == group && k.resource == resource)
        {
            continue;
        }
        out.push(Kind {
            group: group.into(),
            resource: resource.into(),
            kind: b.kind.into(),
            namespaced: b.namespaced,
        });
    }
    out
}

impl Kinds {
    /// The kinds of a tenant with the CRD objects `crds` (only established ones count).
    pub fn new(crds: &[Value]) -> Self {
        let mut kinds = vec![Kind {
            group: String::new(),
            resource: "namespaces".into(),
            kind: "Namespace".into(),
            namespaced: false,
        }];
        kinds.extend(builtin_kinds());
        for raw in crds {
            let Ok(v) = CrdView::from_value(raw) else {
                continue;
            };
            if !v.established() {
                continue;
            }
            kinds.push(Kind {
                group: v.spec.group.clone(),
                resource: v.spec.names.plural.clone(),
                kind: v.spec.names.kind.clone(),
                namespaced: v.namespaced(),
            });
        }
        Self { kinds }
    }

    /// The kind an owner reference's `apiVersion` + `kind` names.
    pub fn resolve(&self, api_version: &str, kind: &str) -> Option<&Kind> {
        let (group, _) = crdplane_core::names::split_api_version(api_version);
        self.kinds
            .iter()
            .find(|k| k.group == group && k.kind == kind)
    }

    /// The kind of `group` (no version) named `kind`.
    pub fn resolve_group_kind(&self, group: &str, kind: &str) -> Option<&Kind> {
        self.kinds
            .iter()
            .find(|k| k.group == group && k.kind == kind)
    }

    /// The kinds whose objects can be dependents the collector handles: the custom
    /// resources and the built-in types (not namespaces).
    fn dependents(&self) -> impl Iterator<Item = &Kind> {
        self.kinds
            .iter()
            .filter(|k| !(k.group.is_empty() && k.resource == "namespaces"))
    }

    /// The kinds whose objects the resync walks (see [`Kinds::dependents`]).
    pub(crate) fn dependent_kinds(&self) -> impl Iterator<Item = &Kind> {
        self.dependents()
    }
}

fn s<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

/// `metadata.finalizers` of an object (empty when absent).
pub fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Whether the object is being deleted (`metadata.deletionTimestamp` is set).
pub fn deleting(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

fn owner_refs(obj: &Value) -> Vec<Value> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// Whether `obj`'s reference to `uid` has `blockOwnerDeletion: true`.
pub fn blocks(obj: &Value, uid: &str) -> bool {
    owner_refs(obj)
        .iter()
        .any(|r| s(r, "/uid") == uid && r.get("blockOwnerDeletion") == Some(&json!(true)))
}

/// `obj` without the owner references to `uids` (`ownerReferences` dropped when empty);
/// `None` when it has none of them.
pub fn without_refs(obj: &Value, uids: &HashSet<String>) -> Option<Value> {
    let refs = owner_refs(obj);
    let keep: Vec<Value> = refs
        .iter()
        .filter(|r| !uids.contains(s(r, "/uid")))
        .cloned()
        .collect();
    if keep.len() == refs.len() {
        return None;
    }
    let mut out = obj.clone();
    let m = out.get_mut("metadata")?.as_object_mut()?;
    if keep.is_empty() {
        m.remove("ownerReferences");
    } else {
        m.insert("ownerReferences".into(), Value::Array(keep));
    }
    Some(out)
}

/// `obj` with `finalizer` removed (`finalizers` dropped when empty).
pub fn without_finalizer(obj: &Value, finalizer: &str) -> Value {
    let mut out = obj.clone();
    crate::lifecycle::remove_finalizer(&mut out, finalizer);
    out
}

/// Deletion propagation (metav1.DeletionPropagation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// `Background`: the owner goes at once; the collector deletes dependents afterwards.
    Background,
    /// `Foreground`: the owner waits (`foregroundDeletion`) until its blocking dependents
    /// are gone.
    Foreground,
    /// `Orphan`: dependents lose the ownerReference and stay (`orphan` finalizer).
    Orphan,
}

/// The finalizers a delete with `policy` leaves (store.go
/// `deletionFinalizersForGarbageCollection`).
pub fn policy_finalizers(existing: &[String], policy: Policy) -> Vec<String> {
    let mut out: Vec<String> = existing
        .iter()
        .filter(|f| *f != FINALIZER_ORPHAN && *f != FINALIZER_FOREGROUND)
        .cloned()
        .collect();
    match policy {
        Policy::Background => {}
        Policy::Foreground => out.push(FINALIZER_FOREGROUND.into()),
        Policy::Orphan => out.push(FINALIZER_ORPHAN.into()),
    }
    out
}

/// The dependent's own default policy (the one its GC finalizers ask for).
pub fn own_policy(obj: &Value) -> Policy {
    let f = finalizers(obj);
    if f.iter().any(|f| f == FINALIZER_ORPHAN) {
        Policy::Orphan
    } else if f.iter().any(|f| f == FINALIZER_FOREGROUND) {
        Policy::Foreground
    } else {
        Policy::Background
    }
}

/// store.go `markAsDeleting` + the finalizers of the delete: deletionTimestamp (once),
/// deletionGracePeriodSeconds 0, generation + 1 on the first mark.
pub fn mark(obj: &Value, now: &str, fins: &[String]) -> Value {
    let mut out = obj.clone();
    let first = !deleting(obj);
    if let Some(m) = out.get_mut("metadata").and_then(Value::as_object_mut) {
        if first {
            m.insert("deletionTimestamp".into(), json!(now));
            let g = m.get("generation").and_then(Value::as_i64).unwrap_or(0);
            m.insert("generation".into(), json!(g + 1));
        }
        m.insert("deletionGracePeriodSeconds".into(), json!(0));
        m.insert("finalizers".into(), json!(fins));
    }
    out
}

/// Upstream's `OwnerRefInvalidNamespace` event message (graph_builder.go
/// `reportInvalidNamespaceOwnerRef`; the reference printed as objectReference.String()).
pub fn invalid_namespace_message(r: &Value, namespace: &str) -> String {
    format!(
        "ownerRef [{}/{}, namespace: {}, name: {}, uid: {}] does not exist in namespace {:?}",
        s(r, "/apiVersion"),
        s(r, "/kind"),
        namespace,
        s(r, "/name"),
        s(r, "/uid"),
        namespace
    )
}

/// Upstream's `OwnerRefInvalidNamespace` Event about dependent `dep` and its owner reference
/// `r`, as recorded at `now` (graph_builder.go `reportInvalidNamespaceOwnerRef`: involved
/// object = the dependent's apiVersion, kind, namespace, name, uid; client-go
/// tools/record/event.go `makeEvent` + `generateEvent`: named `<name>.<unix nanos in hex>`,
/// in the dependent's namespace or `default` for a cluster-scoped one, count 1, first = last
/// timestamp, source and reportingComponent = the recorder's component, reportingInstance =
/// its (empty) host; the apiserver adds uid and creationTimestamp). A complete stored core
/// `v1` Event, `resourceVersion` left for storage to fill.
pub fn invalid_namespace_event(
    dep: &Value,
    r: &Value,
    now: chrono::DateTime<chrono::Utc>,
    uid: &str,
) -> Value {
    let dep_ns = s(dep, "/metadata/namespace");
    let name = s(dep, "/metadata/name");
    let ts = now.format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let nanos = now.timestamp_nanos_opt().unwrap_or_default();
    let mut involved = serde_json::Map::new();
    for (k, v) in [
        ("kind", s(dep, "/kind")),
        ("namespace", dep_ns),
        ("name", name),
        ("uid", s(dep, "/metadata/uid")),
        ("apiVersion", s(dep, "/apiVersion")),
    ] {
        // ObjectReference fields are all omitempty.
        if !v.is_empty() {
            involved.insert(k.into(), json!(v));
        }
    }
    json!({
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": {
            "name": format!("{name}.{nanos:x}"),
            "namespace": if dep_ns.is_empty() { "default" } else { dep_ns },
            "uid": uid,
            "resourceVersion": "",
            "creationTimestamp": ts,
        },
        "involvedObject": involved,
        "reason": "OwnerRefInvalidNamespace",
        "message": invalid_namespace_message(r, dep_ns),
        "source": {"component": EVENT_COMPONENT},
        "firstTimestamp": ts,
        "lastTimestamp": ts,
        "count": 1,
        "type": "Warning",
        "eventTime": null,
        "reportingComponent": EVENT_COMPONENT,
        "reportingInstance": "",
    })
}

/// What a looked-up owner is to its dependents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnerState {
    /// Exists and is not waiting for its dependents.
    Solid,
    /// Absent, another object under its name, or an invalid reference.
    Dangling,
    /// Exists with `foregroundDeletion` and a deletionTimestamp.
    Waiting,
    /// A namespaced owner kind named by a cluster-scoped dependent: nothing is done.
    Invalid,
}

/// A dependent found through the owner index.
#[derive(Debug, Clone)]
struct Dep {
    kind: Kind,
    obj: Value,
    rv: u64,
}

impl Dep {
    fn key(&self, tenant: &str) -> pb::ObjectKey {
        pb::ObjectKey {
            resource: Some(rref(tenant, &self.kind.group, &self.kind.resource)),
            namespace: s(&self.obj, "/metadata/namespace").to_string(),
            name: s(&self.obj, "/metadata/name").to_string(),
        }
    }
    fn uid(&self) -> &str {
        s(&self.obj, "/metadata/uid")
    }
}

/// One write decided for a dependent.
enum Action {
    Nothing,
    Update(Value),
    Delete,
}

/// Outcome of one pass over an item.
enum Step {
    Done,
    Again(Duration),
}

fn rref(tenant: &str, group: &str, resource: &str) -> pb::ResourceRef {
    pb::ResourceRef {
        tenant: tenant.into(),
        group: group.into(),
        resource: resource.into(),
    }
}

fn queue_key(tenant: &str, uid: &str) -> pb::ObjectKey {
    item_key(tenant, gcqueue::entry_name(uid))
}

/// The key of the work item named `name` of `tenant`.
fn item_key(tenant: &str, name: String) -> pb::ObjectKey {
    pb::ObjectKey {
        resource: Some(rref(
            gcqueue::QUEUE_TENANT,
            gcqueue::QUEUE_GROUP,
            &gcqueue::queue_resource(tenant),
        )),
        namespace: tenant.into(),
        name,
    }
}

pub(crate) fn write_of(v: &Value) -> Result<pb::ObjectWrite, ApiError> {
    let (head, tail) = crdplane_core::rvslot::split(v).map_err(ApiError::internal)?;
    Ok(pb::ObjectWrite {
        head: head.into(),
        tail: tail.into(),
    })
}

fn code(s: &tonic::Status) -> u16 {
    ApiError::from_grpc(s).code
}

/// CAS update; the new resourceVersion.
pub(crate) async fn put(
    st: &mut Storage,
    key: &pb::ObjectKey,
    v: &Value,
    rv: u64,
) -> Result<u64, tonic::Status> {
    let w = write_of(v).map_err(|e| tonic::Status::internal(e.message))?;
    st.update(pb::UpdateRequest {
        key: Some(key.clone()),
        object: Some(w),
        expected_resource_version: rv,
        dry_run: false,
        ttl_seconds: 0,
    })
    .await
    .map(|r| r.into_inner().resource_version)
}

async fn delete(st: &mut Storage, key: &pb::ObjectKey, rv: u64) -> Result<(), tonic::Status> {
    st.delete(pb::DeleteRequest {
        key: Some(key.clone()),
        expected_resource_version: rv,
        dry_run: false,
    })
    .await
    .map(|_| ())
}

/// Records the work item of `owner` (or touches an existing one, keeping its lease).
pub async fn record(st: &mut Storage, tenant: &str, owner: &Owner) -> Result<(), ApiError> {
    let key = queue_key(tenant, &owner.uid);
    for _ in 0..5 {
        let now = gcqueue::now_ms();
        match st
            .create(pb::CreateRequest {
                key: Some(key.clone()),
                object: Some(write_of(&gcqueue::entry(tenant, owner, now))?),
                dry_run: false,
                ttl_seconds: 0,
            })
            .await
        {
            Ok(_) => return Ok(()),
            Err(s) if code(&s) == 409 => {}
            Err(s) => return Err(ApiError::from_grpc(&s)),
        }
        let Some((mut e, rv)) = get_opt(st, &key).await? else {
            continue;
        };
        gcqueue::touch(&mut e, owner, now);
        match put(st, &key, &e, rv).await {
            Ok(_) => return Ok(()),
            Err(s) if matches!(code(&s), 404 | 409) => continue,
            Err(s) => return Err(ApiError::from_grpc(&s)),
        }
    }
    Err(ApiError::internal(
        "could not record the garbage collection of an object",
    ))
}

/// Records a verification item for `owner` (gateway `gc.rs` `verify_added_refs` does the
/// same after a write; here the resync, `resync.rs`): created when there is none; an entry
/// not yet claimed is left as it is (its first pass comes anyway); a claimed one is touched
/// so its holder looks again. A deletion entry stays one. One entry per owner uid and
/// lookup namespace (`gcqueue::verify_entry_name`), so recording twice is deduplicated by
/// the queue.
pub async fn record_verify(st: &mut Storage, tenant: &str, owner: &Owner) -> Result<(), ApiError> {
    let key = item_key(tenant, gcqueue::verify_entry_name(owner));
    for _ in 0..5 {
        let now = gcqueue::now_ms();
        match st
            .create(pb::CreateRequest {
                key: Some(key.clone()),
                object: Some(write_of(&gcqueue::verify_entry(tenant, owner, now))?),
                dry_run: false,
                ttl_seconds: 0,
            })
            .await
        {
            Ok(_) => return Ok(()),
            Err(s) if code(&s) == 409 => {}
            Err(s) => return Err(ApiError::from_grpc(&s)),
        }
        let Some((mut e, rv)) = get_opt(st, &key).await? else {
            continue;
        };
        if gcqueue::lease(&e).is_none() {
            return Ok(());
        }
        gcqueue::touch_verify(&mut e, now);
        match put(st, &key, &e, rv).await {
            Ok(_) => return Ok(()),
            Err(s) if matches!(code(&s), 404 | 409) => continue,
            Err(s) => return Err(ApiError::from_grpc(&s)),
        }
    }
    Err(ApiError::internal(
        "could not record the verification of an owner reference",
    ))
}

impl RegistryService {
    pub(crate) fn gc_id(&self) -> &str {
        &self.gc().id
    }

    /// A `gc.<uid>` queue entry was seen: make sure a worker follows it.
    pub fn kick_gc(&self, tenant: String, uid: String) {
        {
            let mut m = self.gc().running.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(again) = m.get_mut(&(tenant.clone(), uid.clone())) {
                *again = true;
                return;
            }
            m.insert((tenant.clone(), uid.clone()), false);
        }
        let svc = self.clone();
        tokio::spawn(async move { svc.gc_follow(tenant, uid).await });
    }

    /// Whether the worker should look at the entry again (clears the flag), else leaves.
    fn gc_again(&self, tenant: &str, uid: &str) -> bool {
        let mut m = self.gc().running.lock().unwrap_or_else(|e| e.into_inner());
        let k = (tenant.to_string(), uid.to_string());
        if m.get(&k) == Some(&true) {
            m.insert(k, false);
            true
        } else {
            m.remove(&k);
            false
        }
    }

    /// Follows one item until it is done (by this or another replica) or gone.
    async fn gc_follow(self, tenant: String, uid: String) {
        let key = queue_key(&tenant, &uid);
        let me = self.gc().id.clone();
        let mut st = self.storage();
        let mut failures: u32 = 0;
        loop {
            let backoff = Duration::from_millis(10u64 << failures.min(9));
            let (mut entry, rv) = match get_opt(&mut st, &key).await {
                Ok(Some(e)) => e,
                Ok(None) => {
                    if self.gc_again(&tenant, &uid) {
                        continue;
                    }
                    return;
                }
                Err(e) => {
                    failures += 1;
                    tracing::warn!(error = %e, %tenant, %uid, "gc: reading work item failed");
                    tokio::time::sleep(backoff).await;
                    continue;
                }
            };
            let Some(owner) = gcqueue::owner_of(&entry) else {
                let _ = delete(&mut st, &key, rv).await;
                continue;
            };
            let now = gcqueue::now_ms();
            if let Some((holder, until)) = gcqueue::lease(&entry)
                && holder != me
                && until > now
            {
                let jitter = u64::from(uuid::Uuid::new_v4().as_bytes()[0]);
                tokio::time::sleep(Duration::from_millis(until - now + jitter)).await;
                continue;
            }
            gcqueue::set_lease(&mut entry, &me, now + LEASE_MS);
            let mut rv = match put(&mut st, &key, &entry, rv).await {
                Ok(rv) => rv,
                Err(s) if matches!(code(&s), 404 | 409) => continue,
                Err(s) => {
                    failures += 1;
                    tracing::warn!(error = %s, %tenant, %uid, "gc: claiming work item failed");
                    tokio::time::sleep(backoff).await;
                    continue;
                }
            };
            let mut touched = gcqueue::touched_at(&entry);
            let mut verify = gcqueue::is_verify(&entry);
            let mut renewed = now;
            let finished = loop {
                match self.gc_pass(&tenant, &owner, touched, verify).await {
                    Ok(Step::Done) => break true,
                    Ok(Step::Again(d)) => {
                        failures = 0;
                        tokio::time::sleep(d).await;
                    }
                    Err(e) => {
                        failures += 1;
                        tracing::warn!(error = %e, %tenant, %uid, "gc: pass failed");
                        tokio::time::sleep(Duration::from_millis(10u64 << failures.min(9))).await;
                    }
                }
                if gcqueue::now_ms().saturating_sub(renewed) > LEASE_MS / 3 {
                    match self.gc_renew(&mut st, &key, &me).await {
                        Some((new_rv, t, v)) => {
                            rv = new_rv;
                            touched = t;
                            verify = v;
                            renewed = gcqueue::now_ms();
                        }
                        None => break false,
                    }
                }
            };
            if !finished {
                continue;
            }
            match delete(&mut st, &key, rv).await {
                Ok(()) => {}
                Err(s) if matches!(code(&s), 404 | 409) => {}
                Err(s) => {
                    tracing::warn!(error = %s, %tenant, %uid, "gc: removing work item failed")
                }
            }
            // Loop: the entry is gone (→ leave), or was recorded again (→ another pass).
        }
    }

    /// Extends this replica's lease; `None` when it was lost (or the item is gone).
    async fn gc_renew(
        &self,
        st: &mut Storage,
        key: &pb::ObjectKey,
        me: &str,
    ) -> Option<(u64, u64, bool)> {
        for _ in 0..5 {
            let (mut e, rv) = get_opt(st, key).await.ok()??;
            match gcqueue::lease(&e) {
                Some((holder, _)) if holder == me => {}
                _ => return None,
            }
            gcqueue::set_lease(&mut e, me, gcqueue::now_ms() + LEASE_MS);
            match put(st, key, &e, rv).await {
                Ok(new_rv) => {
                    return Some((new_rv, gcqueue::touched_at(&e), gcqueue::is_verify(&e)));
                }
                Err(s) if code(&s) == 409 => continue,
                Err(_) => return None,
            }
        }
        None
    }

    /// Dependents of `uid` over the tenant's custom resources and the built-in resources, up
    /// to `budget`; whether more may be left.
    async fn gc_dependents(
        &self,
        tenant: &str,
        kinds: &Kinds,
        uid: &str,
        budget: usize,
    ) -> Result<(Vec<Dep>, bool), ApiError> {
        let mut st = self.storage();
        let mut out = Vec::new();
        for k in kinds.dependents() {
            let mut start_after = String::new();
            loop {
                if out.len() >= budget {
                    return Ok((out, true));
                }
                let r = st
                    .list_dependents(pb::ListDependentsRequest {
                        resource: Some(rref(tenant, &k.group, &k.resource)),
                        owner_uids: vec![uid.to_string()],
                        limit: PAGE,
                        start_after: start_after.clone(),
                    })
                    .await
                    .map_err(|s| ApiError::from_grpc(&s))?
                    .into_inner();
                let n = r.items.len();
                for d in r.items {
                    start_after = d.key;
                    let Ok(obj) = serde_json::from_slice::<Value>(&d.json) else {
                        continue;
                    };
                    // The index is read apart from the object: re-check the reference.
                    if owner_refs(&obj).iter().any(|r| s(r, "/uid") == uid) {
                        out.push(Dep {
                            kind: k.clone(),
                            obj,
                            rv: d.resource_version,
                        });
                    }
                }
                if n < PAGE as usize {
                    break;
                }
            }
        }
        Ok((out, false))
    }

    /// The uids among `deps` that have dependents themselves (one lookup per resource).
    async fn gc_with_dependents(
        &self,
        tenant: &str,
        kinds: &Kinds,
        deps: &[Dep],
    ) -> Result<HashSet<String>, ApiError> {
        let mut out = HashSet::new();
        let mut st = self.storage();
        for chunk in deps.chunks(1000) {
            let uids: Vec<String> = chunk.iter().map(|d| d.uid().to_string()).collect();
            for k in kinds.dependents() {
                let r = st
                    .list_dependents(pb::ListDependentsRequest {
                        resource: Some(rref(tenant, &k.group, &k.resource)),
                        owner_uids: uids.clone(),
                        limit: 1,
                        start_after: String::new(),
                    })
                    .await
                    .map_err(|s| ApiError::from_grpc(&s))?
                    .into_inner();
                out.extend(r.items.into_iter().map(|d| d.owner_uid));
            }
        }
        Ok(out)
    }

    /// One pass over an item (see the module doc).
    async fn gc_pass(
        &self,
        tenant: &str,
        owner: &Owner,
        touched: u64,
        verify: bool,
    ) -> Result<Step, ApiError> {
        let kinds = Kinds::new(&self.crds_of(tenant).await?);
        let mut st = self.storage();
        if verify {
            return self.gc_verify(&mut st, tenant, &kinds, owner).await;
        }
        // A verification item turned into a deletion item while this worker held it: the
        // owner it read may still be the reference's (no resource).
        let resolved;
        let owner = if owner.resource.is_empty() {
            let Some(k) = kinds.resolve_group_kind(&owner.group, &owner.kind) else {
                return Ok(Step::Again(POLL));
            };
            resolved = Owner {
                resource: k.resource.clone(),
                namespace: if k.namespaced {
                    owner.namespace.clone()
                } else {
                    String::new()
                },
                ..owner.clone()
            };
            &resolved
        } else {
            owner
        };
        let okey = pb::ObjectKey {
            resource: Some(rref(tenant, &owner.group, &owner.resource)),
            namespace: owner.namespace.clone(),
            name: owner.name.clone(),
        };
        let cur = get_opt(&mut st, &okey)
            .await?
            .filter(|(o, _)| s(o, "/metadata/uid") == owner.uid);
        let fins = cur.as_ref().map(|(o, _)| finalizers(o)).unwrap_or_default();
        let is_deleting = cur.as_ref().is_some_and(|(o, _)| deleting(o));
        let has = |f: &str| fins.iter().any(|x| x == f);
        match cur {
            None => {
                let (deps, more) = self
                    .gc_dependents(tenant, &kinds, &owner.uid, PASS_BUDGET)
                    .await?;
                let mut known = HashMap::new();
                known.insert(
                    (owner.uid.clone(), owner.namespace.clone()),
                    OwnerState::Dangling,
                );
                let changed = self.gc_attempt_all(tenant, &kinds, deps, known).await?;
                Ok(if changed || more {
                    Step::Again(Duration::ZERO)
                } else {
                    Step::Done
                })
            }
            Some((o, rv)) if is_deleting && has(FINALIZER_ORPHAN) => {
                // orphanDependents, then the finalizer goes.
                let (deps, more) = self
                    .gc_dependents(tenant, &kinds, &owner.uid, PASS_BUDGET)
                    .await?;
                let uids = HashSet::from([owner.uid.clone()]);
                let actions = deps
                    .into_iter()
                    .map(|d| {
                        let a = without_refs(&d.obj, &uids).map_or(Action::Nothing, Action::Update);
                        (d, a)
                    })
                    .collect();
                let retry = self.gc_apply(tenant, actions).await?;
                if retry || more {
                    return Ok(Step::Again(Duration::ZERO));
                }
                self.gc_finish_owner(&mut st, &okey, &o, rv, FINALIZER_ORPHAN)
                    .await
            }
            Some((o, rv)) if is_deleting && has(FINALIZER_FOREGROUND) => {
                let (deps, _) = self
                    .gc_dependents(tenant, &kinds, &owner.uid, PASS_BUDGET)
                    .await?;
                let mut known = HashMap::new();
                known.insert(
                    (owner.uid.clone(), owner.namespace.clone()),
                    OwnerState::Waiting,
                );
                let changed = self.gc_attempt_all(tenant, &kinds, deps, known).await?;
                // processDeletingDependentsItem: wait for the blocking dependents.
                let (deps, more) = self
                    .gc_dependents(tenant, &kinds, &owner.uid, PASS_BUDGET)
                    .await?;
                if more || deps.iter().any(|d| blocks(&d.obj, &owner.uid)) {
                    return Ok(Step::Again(if changed { Duration::ZERO } else { POLL }));
                }
                self.gc_finish_owner(&mut st, &okey, &o, rv, FINALIZER_FOREGROUND)
                    .await
            }
            Some(_) => {
                // Not (yet) deleted: the writer records the item before its write.
                let (deps, _) = self.gc_dependents(tenant, &kinds, &owner.uid, 1).await?;
                if deps.is_empty() || gcqueue::now_ms().saturating_sub(touched) >= GRACE_MS {
                    Ok(Step::Done)
                } else {
                    Ok(Step::Again(Duration::from_millis(200)))
                }
            }
        }
    }

    /// One pass over a verification item: the owner named by a reference is looked up live
    /// (garbagecollector.go `isDangling`: the dependent's namespace for a namespaced owner,
    /// the uid compared); only when it is absent are its dependents looked at.
    async fn gc_verify(
        &self,
        st: &mut Storage,
        tenant: &str,
        kinds: &Kinds,
        owner: &Owner,
    ) -> Result<Step, ApiError> {
        let kind = if owner.resource.is_empty() {
            kinds.resolve_group_kind(&owner.group, &owner.kind)
        } else {
            kinds
                .kinds
                .iter()
                .find(|k| k.group == owner.group && k.resource == owner.resource)
        };
        let Some(kind) = kind else {
            // Upstream retries the REST mapping and never deletes on it; the resync looks
            // again later.
            tracing::debug!(tenant, owner = %owner.uid, kind = %owner.kind,
                "gc: owner kind not served; reference kept");
            return Ok(Step::Done);
        };
        if !(kind.namespaced && owner.namespace.is_empty()) {
            let okey = pb::ObjectKey {
                resource: Some(rref(tenant, &kind.group, &kind.resource)),
                namespace: if kind.namespaced {
                    owner.namespace.clone()
                } else {
                    String::new()
                },
                name: owner.name.clone(),
            };
            if get_opt(st, &okey)
                .await?
                .is_some_and(|(o, _)| s(&o, "/metadata/uid") == owner.uid)
            {
                // Present (if being deleted, its deletion item deals with its dependents).
                return Ok(Step::Done);
            }
        }
        let (deps, more) = self
            .gc_dependents(tenant, kinds, &owner.uid, PASS_BUDGET)
            .await?;
        // Each dependent's references are looked up with its own namespace and scope.
        let changed = self
            .gc_attempt_all(tenant, kinds, deps, HashMap::new())
            .await?;
        Ok(if changed || more {
            Step::Again(Duration::ZERO)
        } else {
            Step::Done
        })
    }

    /// Removes the collector's finalizer from the owner, deleting it when none is left
    /// (store.go: an update that empties the finalizers of an object being deleted).
    async fn gc_finish_owner(
        &self,
        st: &mut Storage,
        okey: &pb::ObjectKey,
        o: &Value,
        rv: u64,
        finalizer: &str,
    ) -> Result<Step, ApiError> {
        let next = without_finalizer(o, finalizer);
        let r = if finalizers(&next).is_empty() {
            delete(st, okey, rv).await
        } else {
            put(st, okey, &next, rv).await.map(|_| ())
        };
        match r {
            Ok(()) => Ok(Step::Again(Duration::ZERO)),
            Err(s) if matches!(code(&s), 404 | 409) => Ok(Step::Again(Duration::ZERO)),
            Err(s) => Err(ApiError::from_grpc(&s)),
        }
    }

    /// `attemptToDeleteItem` for each dependent; whether anything was written (or must be
    /// retried). `known`: owner states already known by (uid, namespace the owner is looked
    /// up in: the dependent's for a namespaced owner kind, "" for a cluster-scoped one) —
    /// the item's own owner. Keyed with the namespace like upstream's `absentOwnerCache`
    /// (`garbagecollector.go` `isDangling`): a namespaced owner exists only for dependents
    /// of its own namespace; for one in another namespace the reference is dangling.
    async fn gc_attempt_all(
        &self,
        tenant: &str,
        kinds: &Kinds,
        deps: Vec<Dep>,
        mut known: HashMap<(String, String), OwnerState>,
    ) -> Result<bool, ApiError> {
        let deps: Vec<Dep> = deps.into_iter().filter(|d| !deleting(&d.obj)).collect();
        if deps.is_empty() {
            return Ok(false);
        }
        let with_deps = self.gc_with_dependents(tenant, kinds, &deps).await?;
        let mut st = self.storage();
        let now = crdplane_core::names::now_timestamp();
        let mut actions = Vec::with_capacity(deps.len());
        let mut records = Vec::new();
        // (dependent uid, owner uid) whose OwnerRefInvalidNamespace event this pass recorded.
        let mut reported: HashSet<(String, String)> = HashSet::new();
        for d in deps {
            let mut dangling = HashSet::new();
            let mut waiting = HashSet::new();
            let mut solid = 0;
            let mut invalid = false;
            let dep_ns = s(&d.obj, "/metadata/namespace").to_string();
            for r in owner_refs(&d.obj) {
                let uid = s(&r, "/uid").to_string();
                // Checked before the known states: an item's own owner is known absent, but
                // the reference may still be invalid for this dependent.
                let invalid_ref = !d.kind.namespaced
                    && kinds
                        .resolve(s(&r, "/apiVersion"), s(&r, "/kind"))
                        .is_some_and(|k| k.namespaced);
                let lookup_ns = match kinds.resolve(s(&r, "/apiVersion"), s(&r, "/kind")) {
                    Some(k) if !k.namespaced => String::new(),
                    Some(_) => dep_ns.clone(),
                    // The owner's kind is no longer served (its CRD is being deleted, which
                    // is what deleted the owner): the item keyed its owner where it lived,
                    // "" for a cluster-scoped one.
                    None if known.contains_key(&(uid.clone(), String::new())) => String::new(),
                    None => dep_ns.clone(),
                };
                let known_key = (uid.clone(), lookup_ns);
                let state = match known.get(&known_key) {
                    _ if invalid_ref => {
                        self.gc_owner_state(&mut st, tenant, kinds, &d, &r, &dep_ns)
                            .await?
                    }
                    Some(st) => *st,
                    None => {
                        let st = self
                            .gc_owner_state(&mut st, tenant, kinds, &d, &r, &dep_ns)
                            .await?;
                        if st != OwnerState::Invalid {
                            known.insert(known_key, st);
                        }
                        st
                    }
                };
                match state {
                    OwnerState::Solid => solid += 1,
                    OwnerState::Dangling => {
                        dangling.insert(uid);
                    }
                    OwnerState::Waiting => {
                        waiting.insert(uid);
                    }
                    OwnerState::Invalid => {
                        invalid = true;
                        if reported.insert((d.uid().to_string(), uid.clone())) {
                            self.gc_report_invalid(&mut st, tenant, &d.obj, &r).await;
                        }
                    }
                }
            }
            if invalid {
                actions.push((d, Action::Nothing));
                continue;
            }
            if solid > 0 {
                // A live owner remains: drop the references to dangling and waiting owners.
                let gone: HashSet<String> = dangling.union(&waiting).cloned().collect();
                let a = without_refs(&d.obj, &gone).map_or(Action::Nothing, Action::Update);
                actions.push((d, a));
                continue;
            }
            let has_deps = with_deps.contains(d.uid());
            let policy = if !waiting.is_empty() && has_deps {
                Policy::Foreground
            } else {
                own_policy(&d.obj)
            };
            let fins = policy_finalizers(&finalizers(&d.obj), policy);
            let gc_fin = fins
                .iter()
                .any(|f| f == FINALIZER_ORPHAN || f == FINALIZER_FOREGROUND);
            if (has_deps || gc_fin)
                && let Some(o) = Owner::of(&d.kind.group, &d.kind.resource, &d.obj)
            {
                records.push(o);
            }
            let a = if fins.is_empty() {
                Action::Delete
            } else {
                Action::Update(mark(&d.obj, &now, &fins))
            };
            actions.push((d, a));
        }
        // The dependents' own items first: they outlive a crash between the two steps.
        for o in &records {
            record(&mut st, tenant, o).await?;
        }
        let wrote = actions.iter().any(|(_, a)| !matches!(a, Action::Nothing));
        let retry = self.gc_apply(tenant, actions).await?;
        Ok(wrote || retry)
    }

    /// How the owner `r` of dependent `d` stands (`isDangling` + waiting check).
    async fn gc_owner_state(
        &self,
        st: &mut Storage,
        tenant: &str,
        kinds: &Kinds,
        d: &Dep,
        r: &Value,
        dep_ns: &str,
    ) -> Result<OwnerState, ApiError> {
        let Some(k) = kinds.resolve(s(r, "/apiVersion"), s(r, "/kind")) else {
            tracing::debug!(owner = %r, "gc: owner kind not served; kept");
            return Ok(OwnerState::Solid);
        };
        if k.namespaced && !d.kind.namespaced {
            return Ok(OwnerState::Invalid);
        }
        let key = pb::ObjectKey {
            resource: Some(rref(tenant, &k.group, &k.resource)),
            namespace: if k.namespaced {
                dep_ns.to_string()
            } else {
                String::new()
            },
            name: s(r, "/name").to_string(),
        };
        Ok(match get_opt(st, &key).await? {
            Some((o, _)) if s(&o, "/metadata/uid") == s(r, "/uid") => {
                if deleting(&o) && finalizers(&o).iter().any(|f| f == FINALIZER_FOREGROUND) {
                    OwnerState::Waiting
                } else {
                    OwnerState::Solid
                }
            }
            _ => OwnerState::Dangling,
        })
    }

    /// Logs and records upstream's `OwnerRefInvalidNamespace` Warning event about dependent
    /// `dep`'s owner reference `r` ([`invalid_namespace_event`]), written to storage's core
    /// `events` of the tenant with the `--event-ttl` time to live. Best effort, as upstream's
    /// recorder: a failed write is logged, the collector goes on.
    async fn gc_report_invalid(&self, st: &mut Storage, tenant: &str, dep: &Value, r: &Value) {
        let dep_ns = s(dep, "/metadata/namespace");
        tracing::warn!(
            reason = "OwnerRefInvalidNamespace",
            tenant,
            dependent = s(dep, "/metadata/name"),
            "{}",
            invalid_namespace_message(r, dep_ns)
        );
        let ev = invalid_namespace_event(
            dep,
            r,
            chrono::Utc::now(),
            &uuid::Uuid::new_v4().to_string(),
        );
        let write = match write_of(&ev) {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(error = %e, "gc: building an event failed");
                return;
            }
        };
        let ttl_seconds = self
            .gc()
            .event_ttl_secs
            .load(std::sync::atomic::Ordering::Relaxed);
        let r = st
            .create(pb::CreateRequest {
                key: Some(pb::ObjectKey {
                    resource: Some(rref(tenant, "", "events")),
                    namespace: s(&ev, "/metadata/namespace").to_string(),
                    name: s(&ev, "/metadata/name").to_string(),
                }),
                object: Some(write),
                dry_run: false,
                ttl_seconds,
            })
            .await;
        if let Err(e) = r {
            tracing::warn!(error = %e, tenant, "gc: recording an event failed");
        }
    }

    /// The time to live of the events the collector records (`--event-ttl`; zero: they do
    /// not expire).
    pub fn set_event_ttl(&self, ttl: Duration) {
        self.gc().event_ttl_secs.store(
            ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0),
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    /// Performs the writes (CAS on the version read, concurrently); whether one lost a race.
    async fn gc_apply(&self, tenant: &str, actions: Vec<(Dep, Action)>) -> Result<bool, ApiError> {
        let st = self.storage();
        let writes = actions.into_iter().map(|(d, a)| {
            let mut st = st.clone();
            async move {
                let key = d.key(tenant);
                let r = match a {
                    Action::Nothing => return Ok(false),
                    Action::Update(v) => put(&mut st, &key, &v, d.rv).await.map(|_| ()),
                    Action::Delete => delete(&mut st, &key, d.rv).await,
                };
                match r {
                    Ok(()) => Ok(false),
                    Err(s) if code(&s) == 404 => Ok(false),
                    Err(s) if code(&s) == 409 => Ok(true),
                    Err(s) => Err(ApiError::from_grpc(&s)),
                }
            }
        });
        let mut results = futures::stream::iter(writes).buffer_unordered(WRITERS);
        let mut retry = false;
        while let Some(r) = results.next().await {
            retry |= r?;
        }
        Ok(retry)
    }

    /// Records the items of objects of `group`/`resource` that a controller (the CRD
    /// finalizer, the namespace deleter) is about to delete, for those that have dependents
    /// (one owner-index lookup per dependent resource of the tenant per 1,000 objects): their
    /// removal is an owner deletion like any other (upstream: ordinary deletes the collector
    /// observes). Recorded before the deletes, so a crash in between leaves the work.
    pub(crate) async fn gc_record_deleted(
        &self,
        tenant: &str,
        group: &str,
        resource: &str,
        objs: &[Value],
    ) -> Result<(), ApiError> {
        if objs.is_empty() {
            return Ok(());
        }
        let kinds = Kinds::new(&self.crds_of(tenant).await?);
        // Only the uids matter for the lookup; the CRD may no longer be established.
        let kind = Kind {
            group: group.into(),
            resource: resource.into(),
            kind: String::new(),
            namespaced: true,
        };
        let deps: Vec<Dep> = objs
            .iter()
            .map(|o| Dep {
                kind: kind.clone(),
                obj: o.clone(),
                rv: 0,
            })
            .collect();
        let owners = self.gc_with_dependents(tenant, &kinds, &deps).await?;
        let mut st = self.storage();
        for d in &deps {
            if owners.contains(d.uid())
                && let Some(o) = Owner::of(group, resource, &d.obj)
            {
                record(&mut st, tenant, &o).await?;
            }
        }
        Ok(())
    }

    /// Records the item of an object about to be removed by a controller (namespaces).
    pub(crate) async fn gc_record(&self, tenant: &str, group: &str, resource: &str, obj: &Value) {
        if let Some(o) = Owner::of(group, resource, obj)
            && let Err(e) = record(&mut self.storage(), tenant, &o).await
        {
            tracing::warn!(error = %e, tenant, "gc: recording work item failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(refs: Value, fins: Value) -> Value {
        json!({"metadata": {"name": "d", "namespace": "n", "uid": "d1", "generation": 1,
            "ownerReferences": refs, "finalizers": fins}})
    }

    #[test]
    fn references_are_removed_by_uid() {
        let o = obj(
            json!([{"apiVersion": "a.io/v1", "kind": "A", "name": "x", "uid": "u1"},
                   {"apiVersion": "a.io/v1", "kind": "A", "name": "y", "uid": "u2", "blockOwnerDeletion": true}]),
            json!([]),
        );
        let one = without_refs(&o, &HashSet::from(["u1".to_string()])).unwrap();
        assert_eq!(
            one["metadata"]["ownerReferences"].as_array().unwrap().len(),
            1
        );
        assert!(blocks(&one, "u2"));
        assert!(!blocks(&o, "u1"));
        let none = without_refs(&one, &HashSet::from(["u2".to_string()])).unwrap();
        assert!(none["metadata"].get("ownerReferences").is_none());
        assert!(without_refs(&none, &HashSet::from(["u2".to_string()])).is_none());
    }

    #[test]
    fn policies_set_the_gc_finalizers() {
        let f = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            policy_finalizers(&f(&["x/y", "orphan"]), Policy::Background),
            f(&["x/y"])
        );
        assert_eq!(
            policy_finalizers(&f(&["orphan"]), Policy::Foreground),
            f(&["foregroundDeletion"])
        );
        assert_eq!(
            policy_finalizers(&f(&["foregroundDeletion"]), Policy::Orphan),
            f(&["orphan"])
        );
        assert_eq!(
            own_policy(&obj(json!([]), json!(["foregroundDeletion"]))),
            Policy::Foreground
        );
        assert_eq!(
            own_policy(&obj(json!([]), json!(["orphan"]))),
            Policy::Orphan
        );
        assert_eq!(own_policy(&obj(json!([]), json!([]))), Policy::Background);
    }

    #[test]
    fn marking_sets_timestamp_once_and_bumps_generation() {
        let o = obj(json!([]), json!(["x/y"]));
        let m = mark(
            &o,
            "T1",
            &["x/y".to_string(), "foregroundDeletion".to_string()],
        );
        assert_eq!(m["metadata"]["deletionTimestamp"], "T1");
        assert_eq!(m["metadata"]["generation"], 2);
        assert_eq!(m["metadata"]["deletionGracePeriodSeconds"], 0);
        let m2 = mark(&m, "T2", &["x/y".to_string()]);
        assert_eq!(m2["metadata"]["deletionTimestamp"], "T1");
        assert_eq!(m2["metadata"]["generation"], 2);
        assert_eq!(m2["metadata"]["finalizers"], json!(["x/y"]));
    }

    #[test]
    fn kinds_resolve_by_group_and_kind() {
        let crd = json!({"metadata": {"name": "widgets.a.io"},
            "spec": {"group": "a.io", "scope": "Cluster",
                     "names": {"plural": "widgets", "kind": "Widget"},
                     "versions": [{"name": "v1", "served": true, "storage": true}]},
            "status": {"conditions": [{"type": "Established", "status": "True"}],
                       "acceptedNames": {"plural": "widgets", "kind": "Widget"}}});
        let k = Kinds::new(&[crd]);
        let w = k.resolve("a.io/v1", "Widget").unwrap();
        assert_eq!(w.resource, "widgets");
        assert!(!w.namespaced);
        assert_eq!(k.resolve("v1", "Namespace").unwrap().resource, "namespaces");
        assert!(k.resolve("b.io/v1", "Widget").is_none());
        assert_eq!(
            k.dependents().count(),
            1 + 9,
            "the CRD and nine built-in resources"
        );
        // Built-in owners and dependents, by their storage triple.
        let cm = k.resolve("v1", "ConfigMap").unwrap();
        assert_eq!(
            (cm.group.as_str(), cm.resource.as_str()),
            ("", "configmaps")
        );
        assert!(cm.namespaced);
        let lease = k.resolve("coordination.k8s.io/v1", "Lease").unwrap();
        assert_eq!(lease.resource, "leases");
        for (api_version, kind) in [("v1", "Secret"), ("v1", "ServiceAccount"), ("v1", "Event")] {
            assert!(k.resolve(api_version, kind).is_some(), "{kind}");
        }
        let crb = k
            .resolve("rbac.authorization.k8s.io/v1", "ClusterRoleBinding")
            .unwrap();
        assert_eq!(crb.resource, "clusterrolebindings");
        assert!(!crb.namespaced);
        assert!(
            k.dependents().all(|d| d.resource != "namespaces"),
            "namespaces are not collected"
        );
    }

    #[test]
    fn invalid_namespace_events_are_complete_core_events() {
        let dep = json!({"apiVersion": "a.io/v1", "kind": "Global",
            "metadata": {"name": "g", "uid": "d1", "resourceVersion": "7"}});
        let r = json!({"apiVersion": "a.io/v1", "kind": "A", "name": "x", "uid": "u1"});
        let now = chrono::DateTime::from_timestamp(1_700_000_000, 123_456_789).unwrap();
        let ev = invalid_namespace_event(&dep, &r, now, "e1");
        assert_eq!(
            ev,
            json!({"kind": "Event", "apiVersion": "v1",
                "metadata": {"name": "g.17979cfe3d85cd15", "namespace": "default", "uid": "e1",
                    "resourceVersion": "", "creationTimestamp": "2023-11-14T22:13:20Z"},
                "involvedObject": {"kind": "Global", "name": "g", "uid": "d1",
                    "apiVersion": "a.io/v1"},
                "reason": "OwnerRefInvalidNamespace",
                "message": "ownerRef [a.io/v1/A, namespace: , name: x, uid: u1] does not exist in namespace \"\"",
                "source": {"component": "garbage-collector-controller"},
                "firstTimestamp": "2023-11-14T22:13:20Z",
                "lastTimestamp": "2023-11-14T22:13:20Z",
                "count": 1, "type": "Warning", "eventTime": null,
                "reportingComponent": "garbage-collector-controller", "reportingInstance": ""})
        );
        assert_eq!(
            format!("{:x}", 1_700_000_000_123_456_789u64),
            "17979cfe3d85cd15"
        );
        // A namespaced dependent's event goes to its namespace.
        let mut nsd = dep.clone();
        nsd["metadata"]["namespace"] = json!("ns1");
        let ev = invalid_namespace_event(&nsd, &r, now, "e2");
        assert_eq!(ev["metadata"]["namespace"], "ns1");
        assert_eq!(ev["involvedObject"]["namespace"], "ns1");
    }

    #[test]
    fn invalid_namespace_text() {
        let r = json!({"apiVersion": "a.io/v1", "kind": "A", "name": "x", "uid": "u1"});
        assert_eq!(
            invalid_namespace_message(&r, ""),
            "ownerRef [a.io/v1/A, namespace: , name: x, uid: u1] does not exist in namespace \"\""
        );
    }
}
