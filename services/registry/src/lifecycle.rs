//! Background deletion controllers of the registry: the CRD finalizer (instances of a deleted
//! CRD) and the namespace content deleter (custom resources and built-in objects —
//! `crdplane_core::builtin` — of a deleted namespace).
//!
//! Where they sit: a CRD DELETE (registry `DeleteCrd`) or a namespace DELETE (gateway) only
//! *marks* the object (`deletionTimestamp`, a finalizer, Terminating) and answers 200 with
//! it; the work of removing content happens here, in the background, and the object goes
//! away when its last finalizer is removed — the apiserver/controller split of upstream.
//!
//! Semantics follow apiextensions-apiserver `pkg/controller/finalizer/crd_finalizer.go`
//! (Terminating condition reasons and texts, the one-minute check that no instance remains,
//! removal of `customresourcecleanup.apiextensions.k8s.io`) and kubernetes
//! `pkg/controller/namespace/deletion/namespaced_resources_deleter.go` +
//! `status_condition_utils.go` (the five namespace conditions, removal of the `kubernetes`
//! finalizer). Instances are deleted with the generic registry's delete semantics
//! (`store.go` `updateForGracefulDeletionAndFinalizers`): an object with finalizers only
//! gets `deletionTimestamp` (and `deletionGracePeriodSeconds: 0`) and is waited for.
//!
//! Restart safety: whoever marks an object for deletion first records it in a durable work
//! queue — storage resources of its own (`QUEUE_TENANT`, `crdplane.io/pendingdeletions` split
//! into `crdplane_core::gcqueue::QUEUE_BUCKETS` buckets by tenant; `_` cannot start a tenant
//! name, so it collides with none), one entry per (tenant, resource, name). Every registry
//! replica watches every bucket of that queue from the beginning
//! (initial state, then live events), so work recorded before a restart is resumed at
//! startup and new work starts at once; an entry is removed (compare-and-swap on its
//! resourceVersion) only after its object was seen gone or no longer terminating. Markers
//! record the entry again after marking, so a removal that raced with a new mark cannot
//! lose it. Only the registry writes the queue: the gateway records a namespace deletion
//! through the `RecordNamespaceDeletion` RPC ([`record_namespace_deletion`]), so the entry
//! format stays private to this module. Replicas work the same entries concurrently; every write is a CAS, so the worst
//! case is duplicate reads, never a lost or doubled deletion.
//!
//! One deliberate departure from DESIGN.md, for the queue only: reading it is the one place
//! that sees several tenants (each bucket holds the entries of the tenants that hash to it)
//! — it yields (tenant, name) pairs, and all work on them is scoped to that tenant. Without
//! it a restarted registry could not find deletions in progress without listing every
//! tenant. The buckets are 16 (tenant, resource) triples, so on a Redis Cluster the queue's
//! writes spread over 16 slots instead of one.

use crate::crd::{self, CrdView};
use crate::naming;
use crate::service::RegistryService;
use crdplane_core::ApiError;
use crdplane_core::names::now_timestamp;
use crdplane_proto::GrpcStatusExt;
use crdplane_proto::v1 as pb;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

pub use crdplane_core::gcqueue::{QUEUE_GROUP, QUEUE_TENANT};
/// `apiextensions.CustomResourceCleanupFinalizer`.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";
/// The namespace controller's token in `spec.finalizers` (`v1.FinalizerKubernetes`).
pub const NAMESPACE_FINALIZER: &str = "kubernetes";
/// How long the CRD finalizer waits for instances to disappear before reporting
/// `InstanceDeletionCheck` and starting over (upstream: one minute).
const CHECK_TIMEOUT: Duration = Duration::from_secs(60);
/// Poll interval while waiting for instances (upstream: 1 s).
const POLL: Duration = Duration::from_secs(1);
/// Page size when walking a resource's objects.
const PAGE: u32 = 500;

/// What a queue entry asks for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Work {
    /// Delete every instance of a deleted CRD, then drop its cleanup finalizer.
    Crd {
        /// Tenant of the CRD.
        tenant: String,
        /// CRD name (`<plural>.<group>`).
        name: String,
    },
    /// Delete a deleted namespace's contents (custom resources and built-in objects).
    Namespace {
        /// Tenant of the namespace.
        tenant: String,
        /// Namespace name.
        name: String,
    },
}

impl Work {
    fn tenant(&self) -> &str {
        match self {
            Work::Crd { tenant, .. } | Work::Namespace { tenant, .. } => tenant,
        }
    }
    fn entry_name(&self) -> String {
        match self {
            Work::Crd { name, .. } => format!("customresourcedefinitions.{name}"),
            Work::Namespace { name, .. } => format!("namespaces.{name}"),
        }
    }
    /// The queue entry naming this work (namespace slot = tenant, in the tenant's bucket).
    pub fn key(&self) -> pb::ObjectKey {
        pb::ObjectKey {
            resource: Some(queue_ref(self.tenant())),
            namespace: self.tenant().to_string(),
            name: self.entry_name(),
        }
    }
    /// Parses a queue entry object.
    pub fn from_entry(v: &Value) -> Option<Self> {
        let tenant = v.pointer("/metadata/namespace")?.as_str()?.to_string();
        let name = v.pointer("/metadata/name")?.as_str()?;
        if let Some(n) = name.strip_prefix("customresourcedefinitions.") {
            return Some(Work::Crd {
                tenant,
                name: n.to_string(),
            });
        }
        name.strip_prefix("namespaces.").map(|n| Work::Namespace {
            tenant,
            name: n.to_string(),
        })
    }
    fn entry_json(&self) -> Value {
        json!({"apiVersion": "crdplane.io/v1", "kind": "PendingDeletion",
               "metadata": {"name": self.entry_name(), "namespace": self.tenant(), "resourceVersion": ""}})
    }
}

/// Storage reference of the work-queue bucket holding `tenant`'s entries.
pub fn queue_ref(tenant: &str) -> pb::ResourceRef {
    bucket_ref(crdplane_core::gcqueue::bucket_of(tenant))
}

/// Storage reference of work-queue bucket `b`.
pub fn bucket_ref(b: usize) -> pb::ResourceRef {
    pb::ResourceRef {
        tenant: QUEUE_TENANT.into(),
        group: QUEUE_GROUP.into(),
        resource: crdplane_core::gcqueue::bucket_resource(b),
    }
}

fn write_of(v: &Value) -> Result<pb::ObjectWrite, ApiError> {
    let (head, tail) = crdplane_core::rvslot::split(v).map_err(ApiError::internal)?;
    Ok(pb::ObjectWrite {
        head: head.into(),
        tail: tail.into(),
    })
}

/// Records `work` in the queue (create, or bump the entry's resourceVersion if present).
pub async fn enqueue(
    storage: &mut crdplane_proto::v1::storage_client::StorageClient<crate::Channel>,
    work: &Work,
) -> Result<(), ApiError> {
    let obj = write_of(&work.entry_json())?;
    for _ in 0..3 {
        match storage
            .update(pb::UpdateRequest {
                key: Some(work.key()),
                object: Some(obj.clone()),
                expected_resource_version: 0,
                dry_run: false,
                ttl_seconds: 0,
            })
            .await
        {
            Ok(_) => return Ok(()),
            Err(s) if ApiError::from_grpc(&s).code == 404 => {}
            Err(s) => return Err(ApiError::from_grpc(&s)),
        }
        match storage
            .create(pb::CreateRequest {
                key: Some(work.key()),
                object: Some(obj.clone()),
                dry_run: false,
                ttl_seconds: 0,
            })
            .await
        {
            Ok(_) => return Ok(()),
            Err(s) if ApiError::from_grpc(&s).code == 409 => continue,
            Err(s) => return Err(ApiError::from_grpc(&s)),
        }
    }
    Err(ApiError::internal("could not record pending deletion"))
}

/// The `RecordNamespaceDeletion` RPC: the gateway marks a namespace Terminating and asks
/// the registry to record the work (before the mark and again after it, see the module
/// doc), so the queue's entry format stays private to this module.
pub async fn record_namespace_deletion(
    storage: &mut crdplane_proto::v1::storage_client::StorageClient<crate::Channel>,
    req: pb::NamespaceDeletionRequest,
) -> Result<pb::Empty, ApiError> {
    if req.tenant.is_empty() || req.name.is_empty() {
        return Err(ApiError::bad_request(
            "a namespace deletion needs a tenant and a name",
        ));
    }
    enqueue(
        storage,
        &Work::Namespace {
            tenant: req.tenant,
            name: req.name,
        },
    )
    .await?;
    Ok(pb::Empty {})
}

/// Workers running in this replica; the flag asks a running worker for one more pass.
#[derive(Default)]
pub struct Running {
    m: Mutex<HashMap<Work, bool>>,
}

/// Outcome of one pass of a worker.
enum Step {
    /// The object is gone or not terminating: the queue entry can go.
    Done,
    /// Try again after the delay.
    Again(Duration),
}

/// Count of what is left in a resource after one deletion pass.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Remaining {
    /// Objects still present.
    pub objects: u64,
    /// finalizer → number of objects still carrying it.
    pub finalizers: BTreeMap<String, u64>,
}

/// The garbage collector's own finalizers (`metav1.FinalizerOrphanDependents`,
/// `FinalizerDeleteDependents`). Content is deleted with background propagation (the
/// namespace deleter's `PropagationPolicy: Background`), which drops both.
const GC_FINALIZERS: [&str; 2] = ["orphan", "foregroundDeletion"];

/// The finalizers that hold an object once deleted with background propagation.
fn holding_finalizers(obj: &Value) -> Vec<String> {
    finalizers_of(obj)
        .into_iter()
        .filter(|f| !GC_FINALIZERS.contains(&f.as_str()))
        .collect()
}

/// The mark the generic store puts on an object with finalizers that is deleted
/// (`updateForGracefulDeletionAndFinalizers`): `deletionTimestamp` (once),
/// `deletionGracePeriodSeconds: 0`, GC finalizers dropped. `None` when nothing holds the
/// object (it is deleted outright) or it is already marked.
pub fn mark_for_deletion(obj: &Value, now: &str) -> Option<Value> {
    let meta = obj.get("metadata")?.as_object()?;
    let holding = holding_finalizers(obj);
    if holding.is_empty() || meta.get("deletionTimestamp").is_some_and(|v| !v.is_null()) {
        return None;
    }
    let mut out = obj.clone();
    let m = out.get_mut("metadata")?.as_object_mut()?;
    m.insert("deletionTimestamp".into(), json!(now));
    m.insert("deletionGracePeriodSeconds".into(), json!(0));
    m.insert("finalizers".into(), json!(holding));
    Some(out)
}

fn finalizers_of(obj: &Value) -> Vec<String> {
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

fn has_deletion_timestamp(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

/// One condition as upstream serializes it (`reason`/`message` omitted when empty).
fn condition(type_: &str, status: &str, reason: &str, message: &str, now: &str) -> Value {
    json!({"type": type_, "status": status, "lastTransitionTime": now, "reason": reason, "message": message})
}

/// The namespace conditions the deleter maintains, in upstream order, for one pass.
/// `status_condition_utils.go`: each is the "ok" form unless the pass found a problem.
pub fn namespace_conditions(
    remaining: &BTreeMap<String, Remaining>,
    delete_errors: &[String],
    now: &str,
) -> Vec<Value> {
    let mut out = vec![
        condition(
            "NamespaceDeletionDiscoveryFailure",
            "False",
            "ResourcesDiscovered",
            "All resources successfully discovered",
            now,
        ),
        condition(
            "NamespaceDeletionGroupVersionParsingFailure",
            "False",
            "ParsedGroupVersions",
            "All legacy kube types successfully parsed",
            now,
        ),
    ];
    if delete_errors.is_empty() {
        out.push(condition(
            "NamespaceDeletionContentFailure",
            "False",
            "ContentDeleted",
            "All content successfully deleted, may be waiting on finalization",
            now,
        ));
    } else {
        let mut msgs = delete_errors.to_vec();
        msgs.sort();
        out.push(condition(
            "NamespaceDeletionContentFailure",
            "True",
            "ContentDeletionFailed",
            &format!(
                "Failed to delete all resource types, {} remaining: {}",
                msgs.len(),
                msgs.join(", ")
            ),
            now,
        ));
    }
    let mut resources: Vec<String> = remaining
        .iter()
        .filter(|(_, r)| r.objects > 0)
        .map(|(gr, r)| format!("{gr} has {} resource instances", r.objects))
        .collect();
    resources.sort();
    if resources.is_empty() {
        out.push(condition(
            "NamespaceContentRemaining",
            "False",
            "ContentRemoved",
            "All content successfully removed",
            now,
        ));
    } else {
        out.push(condition(
            "NamespaceContentRemaining",
            "True",
            "SomeResourcesRemain",
            &format!("Some resources are remaining: {}", resources.join(", ")),
            now,
        ));
    }
    let mut by_finalizer: BTreeMap<&str, u64> = BTreeMap::new();
    for r in remaining.values() {
        for (f, n) in &r.finalizers {
            *by_finalizer.entry(f).or_default() += n;
        }
    }
    let mut fins: Vec<String> = by_finalizer
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(f, n)| format!("{f} in {n} resource instances"))
        .collect();
    fins.sort();
    if fins.is_empty() {
        out.push(condition(
            "NamespaceFinalizersRemaining",
            "False",
            "ContentHasNoFinalizers",
            "All content-preserving finalizers finished",
            now,
        ));
    } else {
        out.push(condition(
            "NamespaceFinalizersRemaining",
            "True",
            "SomeFinalizersRemain",
            &format!(
                "Some content in the namespace has finalizers remaining: {}",
                fins.join(", ")
            ),
            now,
        ));
    }
    out
}

/// `updateConditions`: replaces the managed conditions, keeping lastTransitionTime when the
/// status did not change. Returns whether anything changed.
pub fn merge_namespace_conditions(ns: &mut Value, new: Vec<Value>) -> bool {
    let Some(obj) = ns.as_object_mut() else {
        return false;
    };
    let status = obj.entry("status").or_insert_with(|| json!({}));
    if !status.is_object() {
        *status = json!({});
    }
    let conds = status
        .as_object_mut()
        .expect("object")
        .entry("conditions")
        .or_insert_with(|| json!([]));
    if !conds.is_array() {
        *conds = json!([]);
    }
    let list = conds.as_array_mut().expect("array");
    let mut changed = false;
    for c in new {
        let t = c["type"].clone();
        match list.iter_mut().find(|o| o["type"] == t) {
            None => {
                list.push(c);
                changed = true;
            }
            Some(old) => {
                if old["status"] != c["status"]
                    || old["reason"] != c["reason"]
                    || old["message"] != c["message"]
                {
                    if old["status"] != c["status"] {
                        old["lastTransitionTime"] = c["lastTransitionTime"].clone();
                    }
                    old["status"] = c["status"].clone();
                    old["reason"] = c["reason"].clone();
                    old["message"] = c["message"].clone();
                    changed = true;
                }
            }
        }
    }
    changed
}

/// Sets the CRD's Terminating condition (`SetCRDCondition`); returns whether it changed.
pub fn set_terminating(raw: &mut Value, status: &str, reason: &str, message: &str) -> bool {
    let Ok(mut view) = CrdView::from_value(raw) else {
        return false;
    };
    let before = view.condition("Terminating").cloned();
    naming::set_condition(
        &mut view.status.conditions,
        crd::Condition {
            type_: "Terminating".into(),
            status: status.into(),
            last_transition_time: None,
            reason: reason.into(),
            message: message.into(),
        },
        &now_timestamp(),
    );
    let after = view.condition("Terminating").cloned();
    if before.as_ref().map(|c| (&c.status, &c.reason, &c.message))
        == after.as_ref().map(|c| (&c.status, &c.reason, &c.message))
    {
        return false;
    }
    naming::write_status(&view, raw);
    true
}

/// The object with `finalizer` removed from `metadata.finalizers` (dropped when empty).
pub fn remove_finalizer(obj: &mut Value, finalizer: &str) {
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        let left: Vec<Value> = m
            .get("finalizers")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter(|f| f.as_str() != Some(finalizer))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        if left.is_empty() {
            m.remove("finalizers");
        } else {
            m.insert("finalizers".into(), Value::Array(left));
        }
    }
}

impl RegistryService {
    /// Follows every bucket of the work queue forever: every entry (those recorded before
    /// this process started included) gets a worker.
    pub async fn run_lifecycle(self) {
        let followers: Vec<_> = (0..crdplane_core::gcqueue::QUEUE_BUCKETS)
            .map(|b| tokio::spawn(self.clone().follow_bucket(b)))
            .collect();
        for f in followers {
            let _ = f.await;
        }
    }

    /// Follows work-queue bucket `b` forever (one watch, made again when it ends).
    async fn follow_bucket(self, b: usize) {
        let mut backoff = Duration::from_millis(100);
        loop {
            let req = pb::WatchRequest {
                resource: Some(bucket_ref(b)),
                send_initial_state: true,
                ..Default::default()
            };
            match self.storage().watch(req).await {
                Ok(resp) => {
                    backoff = Duration::from_millis(100);
                    let mut s = resp.into_inner();
                    while let Ok(Some(ev)) = s.message().await {
                        if !matches!(
                            pb::watch_event::Type::try_from(ev.r#type),
                            Ok(pb::watch_event::Type::Added | pb::watch_event::Type::Modified)
                        ) {
                            continue;
                        }
                        let Ok(v) = serde_json::from_slice::<Value>(&ev.object) else {
                            continue;
                        };
                        if let Some(t) = v.pointer("/metadata/namespace").and_then(Value::as_str)
                            && crdplane_core::gcqueue::bucket_of(t) != b
                        {
                            // Recorded before the queue was split (bucket 0): move it to its
                            // tenant's bucket, whose watch then works it.
                            self.relocate(b, &v).await;
                            continue;
                        }
                        if let Some(w) = Work::from_entry(&v) {
                            self.kick(w);
                        } else if let (Some(t), Some(uid)) = (
                            v.pointer("/metadata/namespace").and_then(Value::as_str),
                            v.pointer("/metadata/name")
                                .and_then(Value::as_str)
                                .and_then(|n| n.strip_prefix(crdplane_core::gcqueue::PREFIX)),
                        ) {
                            // Garbage-collection items (gc.rs) are claimed with a lease:
                            // this replica's own lease writes need no new look.
                            let mine = crdplane_core::gcqueue::lease(&v)
                                .is_some_and(|(h, _)| h == self.gc_id());
                            if !mine {
                                self.kick_gc(t.to_string(), uid.to_string());
                            }
                        }
                    }
                }
                Err(e) => tracing::debug!(error = %e, "deletion queue unavailable"),
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
    }

    /// Starts a worker for `work`, or asks the running one for another pass.
    pub fn kick(&self, work: Work) {
        {
            let mut m = self.running().m.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(again) = m.get_mut(&work) {
                *again = true;
                return;
            }
            m.insert(work.clone(), false);
        }
        let svc = self.clone();
        tokio::spawn(async move { svc.work(work).await });
    }

    async fn work(self, work: Work) {
        let mut failures: u32 = 0;
        loop {
            let step = match &work {
                Work::Crd { tenant, name } => self.finalize_crd(tenant, name).await,
                Work::Namespace { tenant, name } => self.finalize_namespace(tenant, name).await,
            };
            match step {
                Ok(Step::Again(d)) => {
                    failures = 0;
                    tokio::time::sleep(d).await;
                    continue;
                }
                Ok(Step::Done) => {
                    if self.dequeue(&work).await {
                        let mut m = self.running().m.lock().unwrap_or_else(|e| e.into_inner());
                        if m.get(&work) == Some(&false) {
                            m.remove(&work);
                            return;
                        }
                        m.insert(work.clone(), false);
                    }
                }
                Err(e) => {
                    failures = failures.saturating_add(1);
                    tracing::warn!(error = %e, ?work, "deletion worker pass failed");
                    // workqueue.DefaultControllerRateLimiter-like: 5 ms doubling, capped.
                    let d = Duration::from_millis(5u64 << failures.min(12)).min(POLL * 5);
                    tokio::time::sleep(d).await;
                }
            }
        }
    }

    /// Moves entry `v`, found in bucket `from`, to its tenant's bucket: created there (as it
    /// is, or kept if already there), then removed here only at the resourceVersion read, so
    /// a re-record meanwhile is not lost. A failure leaves it for the next watch.
    async fn relocate(&self, from: usize, v: &Value) {
        let (Some(tenant), Some(name), Some(rv)) = (
            v.pointer("/metadata/namespace").and_then(Value::as_str),
            v.pointer("/metadata/name").and_then(Value::as_str),
            v.pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .and_then(|r| r.parse::<u64>().ok()),
        ) else {
            return;
        };
        let mut moved = v.clone();
        moved["metadata"]["resourceVersion"] = json!("");
        let Ok(obj) = write_of(&moved) else { return };
        let key = |resource: pb::ResourceRef| pb::ObjectKey {
            resource: Some(resource),
            namespace: tenant.to_string(),
            name: name.to_string(),
        };
        let mut st = self.storage();
        let created = st
            .create(pb::CreateRequest {
                key: Some(key(queue_ref(tenant))),
                object: Some(obj),
                dry_run: false,
                ttl_seconds: 0,
            })
            .await;
        if let Err(s) = &created
            && ApiError::from_grpc(s).code != 409
        {
            tracing::warn!(error = %s.message(), tenant, name, "moving a queue entry failed");
            return;
        }
        let _ = st
            .delete(pb::DeleteRequest {
                key: Some(key(bucket_ref(from))),
                expected_resource_version: rv,
                dry_run: false,
            })
            .await;
    }

    /// Removes the queue entry if nothing re-recorded it since the object was last seen
    /// finished. Returns false when the worker must look again.
    async fn dequeue(&self, work: &Work) -> bool {
        let mut st = self.storage();
        let entry = match st
            .get(pb::GetRequest {
                key: Some(work.key()),
            })
            .await
        {
            Ok(e) => e.into_inner(),
            Err(s) if ApiError::from_grpc(&s).code == 404 => return true,
            Err(_) => return false,
        };
        // Re-check after reading the entry's version: a mark made after this check
        // re-records the entry, so the CAS below fails and we look again.
        let finished = match work {
            Work::Crd { tenant, name } => self
                .get_stored_opt(tenant, name)
                .await
                .map(|o| o.is_none_or(|(v, _)| !has_deletion_timestamp(&v))),
            Work::Namespace { tenant, name } => get_opt(&mut st, &ns_key(tenant, name))
                .await
                .map(|o| o.is_none_or(|(v, _)| !has_deletion_timestamp(&v))),
        };
        if !matches!(finished, Ok(true)) {
            return false;
        }
        match st
            .delete(pb::DeleteRequest {
                key: Some(work.key()),
                expected_resource_version: entry.resource_version,
                dry_run: false,
            })
            .await
        {
            Ok(_) => true,
            Err(s) => ApiError::from_grpc(&s).code == 404,
        }
    }

    async fn get_stored_opt(&self, tenant: &str, name: &str) -> ApiResultOpt {
        get_opt(&mut self.storage(), &self.crd_key(tenant, name)).await
    }

    /// Writes a CRD straight to storage (controller writes skip the API's validation, as
    /// upstream's UpdateStatus of an unchanged spec would pass it) and drops the snapshot.
    async fn put_crd(&self, tenant: &str, name: &str, v: &Value, rv: u64) -> Result<(), ApiError> {
        let r = self
            .storage()
            .update(pb::UpdateRequest {
                key: Some(self.crd_key(tenant, name)),
                object: Some(write_of(v)?),
                expected_resource_version: rv,
                dry_run: false,
                ttl_seconds: 0,
            })
            .await;
        self.cache().invalidate(tenant);
        r.map(|_| ()).map_err(|s| ApiError::from_grpc(&s))
    }

    /// One pass of `crd_finalizer.go` `sync` for one CRD.
    async fn finalize_crd(&self, tenant: &str, name: &str) -> Result<Step, ApiError> {
        let Some((mut raw, mut rv)) = self.get_stored_opt(tenant, name).await? else {
            return Ok(Step::Done);
        };
        if !has_deletion_timestamp(&raw) {
            return Ok(Step::Done);
        }
        if !finalizers_of(&raw).iter().any(|f| f == CLEANUP_FINALIZER) {
            // Someone else's finalizer holds it; nothing for this controller to do.
            return Ok(Step::Done);
        }
        let view = CrdView::from_value(&raw)?;
        if set_terminating(
            &mut raw,
            "True",
            "InstanceDeletionInProgress",
            "CustomResource deletion is in progress",
        ) {
            match self.put_crd(tenant, name, &raw, rv).await {
                Ok(()) => {}
                Err(e) if e.code == 409 || e.code == 404 => return Ok(Step::Again(Duration::ZERO)),
                Err(e) => return Err(e),
            }
            let Some((r2, rv2)) = self.get_stored_opt(tenant, name).await? else {
                return Ok(Step::Done);
            };
            raw = r2;
            rv = rv2;
        }
        if view.established() {
            let cr = pb::ResourceRef {
                tenant: tenant.to_string(),
                group: view.spec.group.clone(),
                resource: view.spec.names.plural.clone(),
            };
            let started = tokio::time::Instant::now();
            loop {
                match delete_all(self, &mut self.storage(), &cr, "").await {
                    Ok(left) if left.objects == 0 => break,
                    Ok(_) => {}
                    Err(e) => {
                        set_terminating(
                            &mut raw,
                            "True",
                            "InstanceDeletionFailed",
                            &format!("could not issue all deletes: {}", e.message),
                        );
                        let _ = self.put_crd(tenant, name, &raw, rv).await;
                        return Err(e);
                    }
                }
                if started.elapsed() >= CHECK_TIMEOUT {
                    set_terminating(
                        &mut raw,
                        "True",
                        "InstanceDeletionCheck",
                        "could not confirm zero CustomResources remaining: context deadline exceeded",
                    );
                    let _ = self.put_crd(tenant, name, &raw, rv).await;
                    return Ok(Step::Again(Duration::from_millis(5)));
                }
                tokio::time::sleep(POLL).await;
            }
            // The CRD may have changed while we waited.
            let Some((r2, rv2)) = self.get_stored_opt(tenant, name).await? else {
                return Ok(Step::Done);
            };
            raw = r2;
            rv = rv2;
            set_terminating(
                &mut raw,
                "False",
                "InstanceDeletionCompleted",
                "removed all instances",
            );
        } else {
            set_terminating(
                &mut raw,
                "False",
                "NeverEstablished",
                "resource was never established",
            );
        }
        remove_finalizer(&mut raw, CLEANUP_FINALIZER);
        let result = if finalizers_of(&raw).is_empty() {
            // Last finalizer gone on an object being deleted: the store deletes it.
            self.storage()
                .delete(pb::DeleteRequest {
                    key: Some(self.crd_key(tenant, name)),
                    expected_resource_version: rv,
                    dry_run: false,
                })
                .await
                .map(|_| ())
                .map_err(|s| ApiError::from_grpc(&s))
        } else {
            self.put_crd(tenant, name, &raw, rv).await
        };
        self.cache().invalidate(tenant);
        match result {
            Ok(()) => {
                self.reconcile_names(tenant, &view.spec.group).await;
                Ok(Step::Done)
            }
            Err(e) if e.code == 409 => Ok(Step::Again(Duration::ZERO)),
            Err(e) if e.code == 404 => Ok(Step::Done),
            Err(e) => Err(e),
        }
    }

    /// One pass of `namespaced_resources_deleter.go` `Delete` for one namespace: delete the
    /// custom resources of every namespaced CRD of the tenant and the objects of every
    /// namespaced built-in resource (upstream deletes every namespaced resource that
    /// discovery lists), report what is left in the
    /// namespace's conditions, and once nothing is left remove the `kubernetes` finalizer
    /// (deleting the namespace when no finalizer remains).
    async fn finalize_namespace(&self, tenant: &str, name: &str) -> Result<Step, ApiError> {
        let mut st = self.storage();
        let key = ns_key(tenant, name);
        let Some((mut ns, rv)) = get_opt(&mut st, &key).await? else {
            return Ok(Step::Done);
        };
        if !has_deletion_timestamp(&ns) {
            return Ok(Step::Done);
        }
        let spec_finalizers: Vec<String> = ns
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        if !spec_finalizers.iter().any(|f| f == NAMESPACE_FINALIZER) {
            if spec_finalizers.is_empty() && finalizers_of(&ns).is_empty() {
                self.gc_record(tenant, "", "namespaces", &ns).await;
                return match delete_ns(&mut st, &key, rv).await {
                    Ok(()) => Ok(Step::Done),
                    Err(e) if e.code == 409 => Ok(Step::Again(Duration::ZERO)),
                    Err(e) => Err(e),
                };
            }
            return Ok(Step::Done);
        }
        let mut remaining: BTreeMap<String, Remaining> = BTreeMap::new();
        let mut errors = Vec::new();
        let mut content: Vec<(String, String)> = Vec::new();
        for raw in self.crds_of(tenant).await? {
            let Ok(view) = CrdView::from_value(&raw) else {
                continue;
            };
            if !view.namespaced() || !view.established() {
                continue;
            }
            content.push((view.spec.group.clone(), view.spec.names.plural.clone()));
        }
        content.extend(namespaced_builtin_storage());
        for (group, resource) in content {
            let cr = pb::ResourceRef {
                tenant: tenant.to_string(),
                group,
                resource,
            };
            match delete_all(self, &mut st, &cr, name).await {
                Ok(left) => {
                    if left.objects > 0 {
                        let gr = crdplane_core::GroupResource::new(&cr.group, &cr.resource);
                        remaining.insert(gr.to_string(), left);
                    }
                }
                Err(e) => errors.push(e.message),
            }
        }
        let now = now_timestamp();
        let mut changed =
            merge_namespace_conditions(&mut ns, namespace_conditions(&remaining, &errors, &now));
        if ns.pointer("/status/phase").and_then(Value::as_str) != Some("Terminating") {
            ns["status"]["phase"] = json!("Terminating");
            changed = true;
        }
        let done = remaining.is_empty() && errors.is_empty();
        if !done {
            if changed {
                match put(&mut st, &key, &ns, rv).await {
                    Ok(()) => {}
                    Err(e) if e.code == 409 || e.code == 404 => {
                        return Ok(Step::Again(Duration::ZERO));
                    }
                    Err(e) => return Err(e),
                }
            }
            return Ok(Step::Again(POLL));
        }
        // finalizeNamespace: drop our token from spec.finalizers.
        let left: Vec<Value> = spec_finalizers
            .iter()
            .filter(|f| *f != NAMESPACE_FINALIZER)
            .map(|f| json!(f))
            .collect();
        ns["spec"]["finalizers"] = Value::Array(left.clone());
        let r = if left.is_empty() && finalizers_of(&ns).is_empty() {
            self.gc_record(tenant, "", "namespaces", &ns).await;
            delete_ns(&mut st, &key, rv).await
        } else {
            put(&mut st, &key, &ns, rv).await
        };
        match r {
            Ok(()) => Ok(Step::Done),
            Err(e) if e.code == 409 => Ok(Step::Again(Duration::ZERO)),
            Err(e) if e.code == 404 => Ok(Step::Done),
            Err(e) => Err(e),
        }
    }
}

/// The storage (group, resource) of every namespaced built-in type, once each (core `v1` and
/// `events.k8s.io/v1` events are one stored resource).
fn namespaced_builtin_storage() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for b in crdplane_core::builtin::BUILTIN
        .iter()
        .filter(|b| b.namespaced)
    {
        let gr = (b.storage.0.to_string(), b.storage.1.to_string());
        if !out.contains(&gr) {
            out.push(gr);
        }
    }
    out
}

/// Whether (group, resource) is a resource whose objects the deleters may remove: a custom
/// resource (a group is set) or a built-in type's storage — never namespaces or CRDs.
fn deletable(group: &str, resource: &str) -> bool {
    !resource.is_empty()
        && (!group.is_empty()
            || crdplane_core::builtin::BUILTIN
                .iter()
                .any(|b| b.storage == (group, resource)))
}

pub(crate) type ApiResultOpt = Result<Option<(Value, u64)>, ApiError>;

fn ns_key(tenant: &str, name: &str) -> pb::ObjectKey {
    pb::ObjectKey {
        resource: Some(pb::ResourceRef {
            tenant: tenant.into(),
            group: String::new(),
            resource: "namespaces".into(),
        }),
        namespace: String::new(),
        name: name.into(),
    }
}

type Storage = crdplane_proto::v1::storage_client::StorageClient<crate::Channel>;

/// The stored object at `key` and its resourceVersion; None when there is none.
pub(crate) async fn get_opt(st: &mut Storage, key: &pb::ObjectKey) -> ApiResultOpt {
    match st
        .get(pb::GetRequest {
            key: Some(key.clone()),
        })
        .await
    {
        Ok(o) => {
            let o = o.into_inner();
            let v = serde_json::from_slice(&o.json).map_err(ApiError::internal)?;
            Ok(Some((v, o.resource_version)))
        }
        Err(s) => {
            let e = ApiError::from_grpc(&s);
            if e.code == 404 { Ok(None) } else { Err(e) }
        }
    }
}

async fn put(st: &mut Storage, key: &pb::ObjectKey, v: &Value, rv: u64) -> Result<(), ApiError> {
    st.update(pb::UpdateRequest {
        key: Some(key.clone()),
        object: Some(write_of(v)?),
        expected_resource_version: rv,
        dry_run: false,
        ttl_seconds: 0,
    })
    .await
    .map(|_| ())
    .map_err(|s| ApiError::from_grpc(&s))
}

async fn delete_ns(st: &mut Storage, key: &pb::ObjectKey, rv: u64) -> Result<(), ApiError> {
    match st
        .delete(pb::DeleteRequest {
            key: Some(key.clone()),
            expected_resource_version: rv,
            dry_run: false,
        })
        .await
    {
        Ok(_) => Ok(()),
        Err(s) => {
            let e = ApiError::from_grpc(&s);
            if e.code == 404 { Ok(()) } else { Err(e) }
        }
    }
}

/// Deletes every object of `r` (in `namespace`, or all when empty) with the generic store's
/// delete semantics: objects with finalizers are marked and left; the rest are deleted
/// (compare-and-swap on the version read, so a concurrent update is seen on the next pass).
/// Returns what is left after the pass.
pub async fn delete_all(
    svc: &RegistryService,
    st: &mut Storage,
    r: &pb::ResourceRef,
    namespace: &str,
) -> Result<Remaining, ApiError> {
    let mut left = Remaining::default();
    if !deletable(&r.group, &r.resource) {
        return Ok(left);
    }
    let now = now_timestamp();
    let mut start_after = String::new();
    loop {
        let page = st
            .list(pb::ListRequest {
                resource: Some(r.clone()),
                namespace: namespace.to_string(),
                limit: PAGE,
                start_after: start_after.clone(),
                ..Default::default()
            })
            .await
            .map_err(|s| ApiError::from_grpc(&s))?
            .into_inner();
        // The objects deleted below may own others (in other CRDs, other namespaces, or
        // cluster-scoped): the garbage collector's items first.
        let doomed: Vec<Value> = page
            .items
            .iter()
            .filter_map(|b| serde_json::from_slice::<Value>(b).ok())
            .filter(|o| holding_finalizers(o).is_empty())
            .collect();
        svc.gc_record_deleted(&r.tenant, &r.group, &r.resource, &doomed)
            .await?;
        for item in &page.items {
            let Ok(obj) = serde_json::from_slice::<Value>(item) else {
                continue;
            };
            let meta = obj.get("metadata").cloned().unwrap_or(Value::Null);
            let s = |k: &str| {
                meta.get(k)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            let key = pb::ObjectKey {
                resource: Some(r.clone()),
                namespace: s("namespace"),
                name: s("name"),
            };
            let rv: u64 = s("resourceVersion").parse().unwrap_or(0);
            let fins = holding_finalizers(&obj);
            if !fins.is_empty() {
                left.objects += 1;
                for f in fins {
                    *left.finalizers.entry(f).or_default() += 1;
                }
                if let Some(marked) = mark_for_deletion(&obj, &now) {
                    match put(st, &key, &marked, rv).await {
                        Ok(()) => {}
                        Err(e) if e.code == 409 || e.code == 404 => {}
                        Err(e) => return Err(e),
                    }
                }
                continue;
            }
            match st
                .delete(pb::DeleteRequest {
                    key: Some(key),
                    expected_resource_version: rv,
                    dry_run: false,
                })
                .await
            {
                Ok(_) => {}
                Err(s) => match ApiError::from_grpc(&s).code {
                    404 => {}
                    409 => left.objects += 1,
                    _ => return Err(ApiError::from_grpc(&s)),
                },
            }
        }
        if page.next_start_after.is_empty() || page.next_start_after == start_after {
            break;
        }
        start_after = page.next_start_after;
    }
    Ok(left)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_content_includes_the_built_in_types() {
        let b = namespaced_builtin_storage();
        for gr in [
            ("", "configmaps"),
            ("", "secrets"),
            ("", "serviceaccounts"),
            ("", "events"),
            ("coordination.k8s.io", "leases"),
            ("rbac.authorization.k8s.io", "roles"),
            ("rbac.authorization.k8s.io", "rolebindings"),
        ] {
            assert!(b.contains(&(gr.0.to_string(), gr.1.to_string())), "{gr:?}");
        }
        assert_eq!(b.len(), 7, "events once, no cluster-scoped types: {b:?}");
        assert!(deletable("rbac.authorization.k8s.io", "clusterroles"));
        assert!(deletable("", "configmaps"));
        assert!(deletable("a.io", "widgets"));
        assert!(!deletable("", "namespaces"));
        assert!(!deletable("a.io", ""));
    }

    #[test]
    fn queue_entries_round_trip() {
        for w in [
            Work::Crd {
                tenant: "t1".into(),
                name: "crontabs.stable.example.com".into(),
            },
            Work::Namespace {
                tenant: "t1".into(),
                name: "team-a".into(),
            },
        ] {
            let mut e = w.entry_json();
            e["metadata"]["resourceVersion"] = json!("7");
            assert_eq!(Work::from_entry(&e), Some(w.clone()));
            assert_eq!(w.key().namespace, "t1");
        }
        assert_eq!(
            Work::from_entry(&json!({"metadata": {"namespace": "t", "name": "pods.x"}})),
            None
        );
    }

    #[test]
    fn objects_with_finalizers_are_marked_once() {
        let o = json!({"metadata": {"name": "a", "finalizers": ["x/y"]}});
        let m = mark_for_deletion(&o, "2026-01-01T00:00:00Z").unwrap();
        assert_eq!(m["metadata"]["deletionTimestamp"], "2026-01-01T00:00:00Z");
        assert_eq!(m["metadata"]["deletionGracePeriodSeconds"], 0);
        assert!(mark_for_deletion(&m, "2027-01-01T00:00:00Z").is_none());
        assert!(mark_for_deletion(&json!({"metadata": {"name": "a"}}), "t").is_none());
        assert!(
            mark_for_deletion(&json!({"metadata": {"name": "a", "finalizers": []}}), "t").is_none()
        );
        // Background propagation: GC finalizers alone do not hold an object, and go.
        let gc = json!({"metadata": {"name": "a", "finalizers": ["orphan", "foregroundDeletion"]}});
        assert!(mark_for_deletion(&gc, "t").is_none());
        let mixed = json!({"metadata": {"name": "a", "finalizers": ["orphan", "x/y"]}});
        assert_eq!(
            mark_for_deletion(&mixed, "t").unwrap()["metadata"]["finalizers"],
            json!(["x/y"])
        );
    }

    #[test]
    fn namespace_conditions_use_upstream_texts() {
        let ok = namespace_conditions(&BTreeMap::new(), &[], "T");
        let types: Vec<&str> = ok.iter().map(|c| c["type"].as_str().unwrap()).collect();
        assert_eq!(
            types,
            [
                "NamespaceDeletionDiscoveryFailure",
                "NamespaceDeletionGroupVersionParsingFailure",
                "NamespaceDeletionContentFailure",
                "NamespaceContentRemaining",
                "NamespaceFinalizersRemaining"
            ]
        );
        assert!(ok.iter().all(|c| c["status"] == "False"));
        assert_eq!(
            ok[4]["message"],
            "All content-preserving finalizers finished"
        );

        let mut rem = BTreeMap::new();
        rem.insert(
            "crontabs.stable.example.com".to_string(),
            Remaining {
                objects: 2,
                finalizers: BTreeMap::from([("example.com/hold".to_string(), 1)]),
            },
        );
        rem.insert(
            "widgets.a.io".to_string(),
            Remaining {
                objects: 1,
                finalizers: BTreeMap::from([("example.com/hold".to_string(), 1)]),
            },
        );
        let c = namespace_conditions(&rem, &[], "T");
        assert_eq!(c[3]["status"], "True");
        assert_eq!(c[3]["reason"], "SomeResourcesRemain");
        assert_eq!(
            c[3]["message"],
            "Some resources are remaining: crontabs.stable.example.com has 2 resource instances, widgets.a.io has 1 resource instances"
        );
        assert_eq!(c[4]["reason"], "SomeFinalizersRemain");
        assert_eq!(
            c[4]["message"],
            "Some content in the namespace has finalizers remaining: example.com/hold in 2 resource instances"
        );
        let e = namespace_conditions(&BTreeMap::new(), &["b".into(), "a".into()], "T");
        assert_eq!(
            e[2]["message"],
            "Failed to delete all resource types, 2 remaining: a, b"
        );
    }

    #[test]
    fn condition_merge_keeps_transition_time_without_status_change() {
        let mut ns = json!({"status": {"phase": "Terminating"}});
        assert!(merge_namespace_conditions(
            &mut ns,
            namespace_conditions(&BTreeMap::new(), &[], "T1")
        ));
        assert!(!merge_namespace_conditions(
            &mut ns,
            namespace_conditions(&BTreeMap::new(), &[], "T2")
        ));
        let mut rem = BTreeMap::new();
        rem.insert(
            "a.b".to_string(),
            Remaining {
                objects: 1,
                finalizers: BTreeMap::new(),
            },
        );
        assert!(merge_namespace_conditions(
            &mut ns,
            namespace_conditions(&rem, &[], "T3")
        ));
        let c = &ns["status"]["conditions"];
        assert_eq!(c[0]["lastTransitionTime"], "T1");
        assert_eq!(c[3]["lastTransitionTime"], "T3");
        assert_eq!(c.as_array().unwrap().len(), 5);
    }

    #[test]
    fn terminating_condition_and_finalizer_removal() {
        let mut crd = json!({"metadata": {"name": "a.b", "finalizers": [CLEANUP_FINALIZER, "other"]},
            "spec": {"group": "b"}, "status": {"conditions": [], "acceptedNames": {"plural": "a", "kind": "A"}, "storedVersions": ["v1"]}});
        assert!(set_terminating(
            &mut crd,
            "True",
            "InstanceDeletionInProgress",
            "CustomResource deletion is in progress"
        ));
        assert!(!set_terminating(
            &mut crd,
            "True",
            "InstanceDeletionInProgress",
            "CustomResource deletion is in progress"
        ));
        let c = &crd["status"]["conditions"][0];
        assert_eq!(c["type"], "Terminating");
        assert_eq!(c["reason"], "InstanceDeletionInProgress");
        assert_eq!(crd["status"]["storedVersions"], json!(["v1"]));
        remove_finalizer(&mut crd, CLEANUP_FINALIZER);
        assert_eq!(crd["metadata"]["finalizers"], json!(["other"]));
        remove_finalizer(&mut crd, "other");
        assert!(crd["metadata"].get("finalizers").is_none());
    }
}
