//! The garbage collector's resync: a periodic walk over every tenant's custom resources and
//! built-in objects (`crdplane_core::builtin`) that have `metadata.ownerReferences`, so that no dependent of an absent owner is missed.
//!
//! Where it sits: the collector ([`crate::gc`]) learns of owner references from its durable
//! queue — deletion items recorded before a delete, verification items recorded by the
//! gateway *after* a write that adds references. Two things escape that: objects written
//! before the storage's owner index existed (no index entry, so `ListDependents` cannot find
//! them), and objects whose verification item was lost (a gateway that crashed between the
//! write and the record). Upstream the graph builder's informers list every resource when
//! they start and resync them periodically (`pkg/controller/garbagecollector/graph_builder.go`
//! monitors; every observed object is inserted into the graph and an owner never observed
//! becomes a virtual node that `attemptToDeleteItem` verifies, `garbagecollector.go`
//! `isDangling`). Here a resync pass does the equivalent from storage:
//! 1. the (tenant, resource) triples are found with the storage `ScanResources` RPC (Redis
//!    SCAN with COUNT, a cursor, never KEYS), one page at a time; only resources that a
//!    tenant's established CRDs serve, and the built-in resources, are walked;
//! 2. each resource is walked with `ScanOwned` (a cursor over its ordered index, 500 objects
//!    a page), which returns the objects with owner references and, atomically with the
//!    read, writes their missing owner-index entries;
//! 3. each reference of those objects is resolved as `isDangling` does (a namespaced owner in
//!    the dependent's own namespace, the uid compared; a kind not served is kept; a
//!    namespaced owner of a cluster-scoped dependent is invalid and left alone) and, when the
//!    owner is absent, a verification item is recorded through the queue code
//!    ([`crate::gc::record_verify`]: one entry per owner uid, so recording it again is a
//!    no-op) — the collector then handles its dependents as for any dangling reference.
//!
//! Once across replicas: the pass's state is one entry of the collector's queue resource
//! (`_crdplane/gc-resync`), claimed with the same lease as the collector's items
//! (`lease.holder`/`lease.until`, written with compare-and-swap on its resourceVersion). The
//! holder checkpoints its cursor after every page with a CAS that also renews the lease; a
//! replica that loses the CAS stops, and a killed holder's pass is resumed from its last
//! checkpoint by whoever claims the expired lease (a page done but not checkpointed is done
//! again: recording an item twice is harmless). The entry counts the pass's work.
//!
//! When a pass is due: at startup (a replica that starts after the last pass started asks
//! for one; replicas starting together share it) and then every `--gc-resync-period`
//! ([`DEFAULT_PERIOD`], one hour). Upstream's informers resync every 12–24 h
//! (kube-controller-manager `--min-resync-period` 12h, times a random factor in [1, 2)), and
//! the collector re-reads discovery every 30 s (`garbagecollector.Sync` period); but an
//! informer resync only replays its in-memory cache, while watches never lose an event. Here
//! the resync is what repairs a lost item, so the default is much shorter than upstream's
//! informer resync: a dangling dependent whose item was lost lives at most about an hour,
//! and one pass reads every custom resource once an hour (a 500-object page per storage
//! call, one pass at a time across replicas), which is cheap next to the write traffic that
//! created the objects.

use crate::gc::{Kinds, deleting, record_verify};
use crate::lifecycle::get_opt;
use crate::service::RegistryService;
use crdplane_core::ApiError;
use crdplane_core::gcqueue::{self, Owner};
use crdplane_proto::GrpcStatusExt;
use crdplane_proto::v1 as pb;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// Default `--gc-resync-period` (see the module doc).
pub const DEFAULT_PERIOD: Duration = Duration::from_secs(3600);
/// Name of the resync state entry in the queue resource (namespace slot `_crdplane`, which
/// is no tenant; the queue's followers ignore the name).
pub const ENTRY: &str = "gc-resync";
/// How long a claimed pass stays with its holder without a checkpoint.
const LEASE_MS: u64 = 15_000;
/// SCAN COUNT hint per `ScanResources` call.
const RESOURCES_PAGE: u32 = 100;
/// Objects examined per `ScanOwned` call.
const OBJECTS_PAGE: u32 = 500;
/// Owners known present kept per replica (then forgotten, and looked up again).
const KNOWN_MAX: usize = 100_000;

type Storage = crdplane_proto::v1::storage_client::StorageClient<crate::Channel>;

/// Parses a period flag: `1h`, `30m`, `10s`, `500ms`, or plain seconds; `0` disables the
/// resync.
pub fn parse_period(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit_ms) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('h') {
        (n, 3_600_000.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60_000.0)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1000.0)
    } else {
        (s, 1000.0)
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v >= 0.0 && v.is_finite() => Ok(Duration::from_millis((v * unit_ms) as u64)),
        _ => Err(format!("invalid period {s:?} (e.g. 1h, 30m, 10s)")),
    }
}

/// Whether (group, resource) is the storage triple of a built-in type.
fn builtin_storage(group: &str, resource: &str) -> bool {
    crdplane_core::builtin::BUILTIN
        .iter()
        .any(|b| b.storage == (group, resource))
}

fn queue_key() -> pb::ObjectKey {
    pb::ObjectKey {
        resource: Some(crate::lifecycle::queue_ref(gcqueue::QUEUE_TENANT)),
        namespace: gcqueue::QUEUE_TENANT.into(),
        name: ENTRY.into(),
    }
}

fn u(v: &Value, k: &str) -> u64 {
    v.get(k).and_then(Value::as_u64).unwrap_or(0)
}

/// What a replica does with the resync entry it read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Start pass number `pass`.
    Start(u64),
    /// Claim the pass in progress (its lease expired, or it is this replica's).
    Resume,
    /// Nothing before this time (ms).
    WaitUntil(u64),
}

/// The decision for the entry `state` (`None`: no pass ever ran) at `now`, for a replica
/// `me` started at `started` with `period` (ms).
pub fn decide(state: Option<&Value>, me: &str, now: u64, started: u64, period: u64) -> Decision {
    let Some(st) = state else {
        return Decision::Start(1);
    };
    let pass = u(st, "pass");
    if u(st, "finishedAt") == 0 {
        return match gcqueue::lease(st) {
            Some((holder, until)) if holder != me && until > now => Decision::WaitUntil(until),
            _ => Decision::Resume,
        };
    }
    let last = u(st, "startedAt");
    // A replica started after the last pass began asks for one at startup.
    let due = if last < started {
        now
    } else {
        last.saturating_add(period)
    };
    if due <= now {
        Decision::Start(pass + 1)
    } else {
        Decision::WaitUntil(due)
    }
}

/// The entry of a new pass.
pub fn new_pass(pass: u64, me: &str, now: u64) -> Value {
    let mut e = json!({"apiVersion": "crdplane.io/v1", "kind": "GarbageCollectorResync",
        "metadata": {"name": ENTRY, "namespace": gcqueue::QUEUE_TENANT, "resourceVersion": ""},
        "pass": pass, "startedAt": now, "finishedAt": 0,
        "cursor": {"scan": 0, "scanned": false, "pending": [], "startAfter": ""},
        "counts": {"resources": 0, "examined": 0, "owned": 0, "repaired": 0, "recorded": 0}});
    gcqueue::set_lease(&mut e, me, now + LEASE_MS);
    e
}

/// Where a pass is: the SCAN cursor over the triples, whether it came back to 0, the
/// triples of the current SCAN page still to walk (the first one from `start_after`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cursor {
    /// Redis SCAN cursor of the next `ScanResources` page (0 before the first).
    pub scan: u64,
    /// Whether the SCAN came back to cursor 0 (no more pages).
    pub scanned: bool,
    /// (tenant, group, resource) triples of the current page not yet walked.
    pub pending: Vec<(String, String, String)>,
    /// Object key after which the first pending resource's walk resumes ("" = start).
    pub start_after: String,
}

impl Cursor {
    /// The cursor stored in a pass entry's `cursor` (the start for a fresh entry).
    pub fn of(entry: &Value) -> Self {
        let c = entry.get("cursor").cloned().unwrap_or_default();
        let pending = c
            .get("pending")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|t| {
                        let t = t.as_array()?;
                        let s = |i: usize| t.get(i)?.as_str().map(str::to_string);
                        Some((s(0)?, s(1)?, s(2)?))
                    })
                    .collect()
            })
            .unwrap_or_default();
        Self {
            scan: u(&c, "scan"),
            scanned: c.get("scanned") == Some(&json!(true)),
            pending,
            start_after: c
                .get("startAfter")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        }
    }

    /// The entry's `cursor` JSON, as [`Cursor::of`] reads it back.
    pub fn to_json(&self) -> Value {
        let pending: Vec<Value> = self
            .pending
            .iter()
            .map(|(t, g, r)| json!([t, g, r]))
            .collect();
        json!({"scan": self.scan, "scanned": self.scanned, "pending": pending,
               "startAfter": self.start_after})
    }

    /// Whether the pass has walked everything.
    pub fn done(&self) -> bool {
        self.scanned && self.pending.is_empty()
    }
}

/// Work of one page (added to the entry's `counts`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Resources walked to their end.
    pub resources: u64,
    /// Objects read by `ScanOwned`.
    pub examined: u64,
    /// Objects with owner references among them.
    pub owned: u64,
    /// Missing owner-index entries written by `ScanOwned`.
    pub repaired: u64,
    /// Verification items recorded for absent owners.
    pub recorded: u64,
}

impl Counts {
    fn add_to(&self, entry: &mut Value) {
        let c = &mut entry["counts"];
        for (k, v) in [
            ("resources", self.resources),
            ("examined", self.examined),
            ("owned", self.owned),
            ("repaired", self.repaired),
            ("recorded", self.recorded),
        ] {
            c[k] = json!(u(c, k) + v);
        }
    }
}

/// The owners named by the references of `obj` (a dependent of `kinds`' resource, namespaced
/// or not) that can be looked up: (owner, namespace to look it up in). Kinds the tenant does
/// not serve are kept as if present, and a namespaced owner of a cluster-scoped dependent is
/// invalid (`isDangling`: `namespacedOwnerOfClusterScopedObjectErr`): neither is returned.
pub fn owners_to_check(kinds: &Kinds, obj: &Value, dep_namespaced: bool) -> Vec<(Owner, String)> {
    let ns = obj
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut out = Vec::new();
    for o in Owner::added_refs(obj, None) {
        let Some(k) = kinds.resolve_group_kind(&o.group, &o.kind) else {
            continue;
        };
        if k.namespaced && !dep_namespaced {
            continue;
        }
        let lookup_ns = if k.namespaced {
            ns.to_string()
        } else {
            String::new()
        };
        out.push((
            Owner {
                resource: k.resource.clone(),
                ..o
            },
            lookup_ns,
        ));
    }
    out
}

impl RegistryService {
    /// Runs the resync forever (`period` zero: never).
    pub async fn run_gc_resync(self, period: Duration) {
        if period.is_zero() {
            return;
        }
        let started = gcqueue::now_ms();
        let me = self.gc_id().to_string();
        let mut known = HashSet::new();
        let mut failures: u32 = 0;
        loop {
            match self.resync_step(&me, started, period, &mut known).await {
                Ok(wait) => {
                    failures = 0;
                    if !wait.is_zero() {
                        // Jitter, so that replicas do not read the entry in lockstep.
                        let jitter = u64::from(uuid::Uuid::new_v4().as_bytes()[0]);
                        tokio::time::sleep(wait + Duration::from_millis(jitter)).await;
                    }
                }
                Err(e) => {
                    failures += 1;
                    tracing::warn!(error = %e, "gc resync: step failed");
                    let d = Duration::from_millis(100u64 << failures.min(6));
                    tokio::time::sleep(d).await;
                }
            }
        }
    }

    /// Reads the entry and claims and works a pass when one is due; how long to wait next.
    async fn resync_step(
        &self,
        me: &str,
        started: u64,
        period: Duration,
        known: &mut HashSet<(String, String)>,
    ) -> Result<Duration, ApiError> {
        let mut st = self.storage();
        let key = queue_key();
        let cur = get_opt(&mut st, &key).await?;
        let now = gcqueue::now_ms();
        let period_ms = period.as_millis() as u64;
        let (mut entry, rv) =
            match decide(cur.as_ref().map(|(e, _)| e), me, now, started, period_ms) {
                Decision::WaitUntil(t) => {
                    // Looked at again at least every lease period (a holder may die).
                    let d = t.saturating_sub(now).min(LEASE_MS.max(period_ms));
                    return Ok(Duration::from_millis(d.max(1)));
                }
                Decision::Start(pass) => {
                    let e = new_pass(pass, me, now);
                    let r = match &cur {
                        None => st
                            .create(pb::CreateRequest {
                                key: Some(key.clone()),
                                object: Some(crate::gc::write_of(&e)?),
                                dry_run: false,
                                ttl_seconds: 0,
                            })
                            .await
                            .map(|r| r.into_inner().resource_version),
                        Some((_, rv)) => crate::gc::put(&mut st, &key, &e, *rv).await,
                    };
                    match r {
                        Ok(rv) => {
                            tracing::info!(pass, holder = me, "gc resync: pass started");
                            known.clear();
                            (e, rv)
                        }
                        Err(s) if matches!(ApiError::from_grpc(&s).code, 404 | 409) => {
                            return Ok(Duration::ZERO);
                        }
                        Err(s) => return Err(ApiError::from_grpc(&s)),
                    }
                }
                Decision::Resume => {
                    let (mut e, rv) = cur.expect("a pass in progress has an entry");
                    gcqueue::set_lease(&mut e, me, now + LEASE_MS);
                    match crate::gc::put(&mut st, &key, &e, rv).await {
                        Ok(rv) => {
                            tracing::info!(
                                pass = u(&e, "pass"),
                                holder = me,
                                "gc resync: pass resumed"
                            );
                            (e, rv)
                        }
                        Err(s) if matches!(ApiError::from_grpc(&s).code, 404 | 409) => {
                            return Ok(Duration::ZERO);
                        }
                        Err(s) => return Err(ApiError::from_grpc(&s)),
                    }
                }
            };
        self.resync_pass(&mut st, &key, me, &mut entry, rv, known)
            .await?;
        Ok(Duration::ZERO)
    }

    /// Works the claimed pass page by page, checkpointing after each; returns when it is
    /// finished or the lease was lost.
    async fn resync_pass(
        &self,
        st: &mut Storage,
        key: &pb::ObjectKey,
        me: &str,
        entry: &mut Value,
        mut rv: u64,
        known: &mut HashSet<(String, String)>,
    ) -> Result<(), ApiError> {
        let pass = u(entry, "pass");
        let mut cursor = Cursor::of(entry);
        let mut kinds: HashMap<String, Kinds> = HashMap::new();
        while !cursor.done() {
            let counts = self.resync_page(&mut cursor, &mut kinds, known).await?;
            if counts.examined > 0 || counts.resources > 0 {
                tracing::debug!(
                    pass,
                    holder = me,
                    resources = counts.resources,
                    examined = counts.examined,
                    owned = counts.owned,
                    repaired = counts.repaired,
                    recorded = counts.recorded,
                    "gc resync: page"
                );
            }
            counts.add_to(entry);
            entry["cursor"] = cursor.to_json();
            let now = gcqueue::now_ms();
            if cursor.done() {
                entry["finishedAt"] = json!(now);
                if let Some(m) = entry.as_object_mut() {
                    m.remove("lease");
                }
            } else {
                gcqueue::set_lease(entry, me, now + LEASE_MS);
            }
            match crate::gc::put(st, key, entry, rv).await {
                Ok(new_rv) => rv = new_rv,
                Err(s) if matches!(ApiError::from_grpc(&s).code, 404 | 409) => {
                    tracing::info!(pass, holder = me, "gc resync: lease lost");
                    return Ok(());
                }
                Err(s) => return Err(ApiError::from_grpc(&s)),
            }
        }
        let c = &entry["counts"];
        tracing::info!(
            pass,
            holder = me,
            resources = u(c, "resources"),
            examined = u(c, "examined"),
            owned = u(c, "owned"),
            repaired = u(c, "repaired"),
            recorded = u(c, "recorded"),
            "gc resync: pass complete"
        );
        Ok(())
    }

    /// One page: the next SCAN step over the triples, or the next page of the first pending
    /// resource. Advances `cursor`.
    async fn resync_page(
        &self,
        cursor: &mut Cursor,
        kinds: &mut HashMap<String, Kinds>,
        known: &mut HashSet<(String, String)>,
    ) -> Result<Counts, ApiError> {
        let mut st = self.storage();
        let mut counts = Counts::default();
        let Some((tenant, group, resource)) = cursor.pending.first().cloned() else {
            let r = st
                .scan_resources(pb::ScanResourcesRequest {
                    cursor: cursor.scan,
                    count: RESOURCES_PAGE,
                })
                .await
                .map_err(|s| ApiError::from_grpc(&s))?
                .into_inner();
            cursor.scan = r.cursor;
            cursor.scanned = r.cursor == 0;
            // Custom resources and the built-in types (a tenant name cannot start with
            // '_'; CRDs and namespaces are no dependents, and are filtered below anyway).
            cursor.pending = r
                .resources
                .into_iter()
                .filter(|r| {
                    !r.tenant.starts_with('_')
                        && (!r.group.is_empty() || builtin_storage(&r.group, &r.resource))
                })
                .map(|r| (r.tenant, r.group, r.resource))
                .collect();
            cursor.start_after.clear();
            return Ok(counts);
        };
        if !kinds.contains_key(&tenant) {
            if kinds.len() > 1000 {
                kinds.clear();
            }
            kinds.insert(tenant.clone(), Kinds::new(&self.crds_of(&tenant).await?));
        }
        let tk = &kinds[&tenant];
        let Some(kind) = tk
            .dependent_kinds()
            .find(|k| k.group == group && k.resource == resource)
            .cloned()
        else {
            // Not served (no established CRD): nothing of it is collected.
            cursor.pending.remove(0);
            cursor.start_after.clear();
            return Ok(counts);
        };
        let r = st
            .scan_owned(pb::ScanOwnedRequest {
                resource: Some(pb::ResourceRef {
                    tenant: tenant.clone(),
                    group: group.clone(),
                    resource: resource.clone(),
                }),
                start_after: cursor.start_after.clone(),
                limit: OBJECTS_PAGE,
            })
            .await
            .map_err(|s| ApiError::from_grpc(&s))?
            .into_inner();
        counts.examined = u64::from(r.examined);
        counts.repaired = r.repaired;
        if r.next_start_after.is_empty() {
            cursor.pending.remove(0);
            cursor.start_after.clear();
            counts.resources = 1;
        } else {
            cursor.start_after = r.next_start_after;
        }
        // The owners to look up, once each (by uid and lookup namespace).
        let mut wanted: HashMap<(String, String), Owner> = HashMap::new();
        for d in r.items {
            let Ok(obj) = serde_json::from_slice::<Value>(&d.json) else {
                continue;
            };
            counts.owned += 1;
            if deleting(&obj) {
                continue;
            }
            for (o, ns) in owners_to_check(tk, &obj, kind.namespaced) {
                let k = (o.uid.clone(), ns);
                if !known.contains(&k) {
                    wanted.entry(k).or_insert(o);
                }
            }
        }
        if wanted.is_empty() {
            return Ok(counts);
        }
        let wanted: Vec<((String, String), Owner)> = wanted.into_iter().collect();
        for chunk in wanted.chunks(1000) {
            let keys = chunk
                .iter()
                .map(|((_, ns), o)| pb::ObjectKey {
                    resource: Some(pb::ResourceRef {
                        tenant: tenant.clone(),
                        group: o.group.clone(),
                        resource: o.resource.clone(),
                    }),
                    namespace: ns.clone(),
                    name: o.name.clone(),
                })
                .collect();
            let found = st
                .get_many(pb::GetManyRequest { keys })
                .await
                .map_err(|s| ApiError::from_grpc(&s))?
                .into_inner()
                .results;
            for ((k, o), g) in chunk.iter().zip(found) {
                let uid = &k.0;
                let present = g.found
                    && serde_json::from_slice::<Value>(&g.json).is_ok_and(|v| {
                        v.pointer("/metadata/uid").and_then(Value::as_str) == Some(uid)
                    });
                if present {
                    if known.len() >= KNOWN_MAX {
                        known.clear();
                    }
                    known.insert(k.clone());
                    continue;
                }
                record_verify(&mut st, &tenant, o).await?;
                counts.recorded += 1;
            }
        }
        Ok(counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods() {
        for (s, want) in [
            ("1h", Some(3_600_000)),
            ("30m", Some(1_800_000)),
            ("10s", Some(10_000)),
            ("500ms", Some(500)),
            ("2", Some(2000)),
            ("0", Some(0)),
            ("1.5s", Some(1500)),
            ("-1s", None),
            ("soon", None),
        ] {
            assert_eq!(
                parse_period(s).ok().map(|d| d.as_millis() as u64),
                want,
                "{s}"
            );
        }
    }

    #[test]
    fn decisions() {
        let p = 60_000;
        // Nothing ran yet.
        assert_eq!(decide(None, "a", 100, 50, p), Decision::Start(1));
        let mut e = new_pass(3, "b", 1000);
        // In progress under another replica's live lease: wait for it; expired: take over.
        assert_eq!(
            decide(Some(&e), "a", 2000, 0, p),
            Decision::WaitUntil(16_000)
        );
        assert_eq!(decide(Some(&e), "a", 16_001, 0, p), Decision::Resume);
        assert_eq!(decide(Some(&e), "b", 2000, 0, p), Decision::Resume);
        // Finished: due a period after it started, or at once for a replica started later.
        e["finishedAt"] = json!(5000);
        e.as_object_mut().unwrap().remove("lease");
        assert_eq!(
            decide(Some(&e), "a", 6000, 500, p),
            Decision::WaitUntil(61_000)
        );
        assert_eq!(decide(Some(&e), "a", 61_000, 500, p), Decision::Start(4));
        assert_eq!(decide(Some(&e), "a", 6000, 1500, p), Decision::Start(4));
    }

    #[test]
    fn cursors_round_trip() {
        let c = Cursor {
            scan: 42,
            scanned: false,
            pending: vec![("t".into(), "a.io".into(), "widgets".into())],
            start_after: "ns/x".into(),
        };
        let mut e = new_pass(1, "a", 0);
        assert_eq!(Cursor::of(&e), Cursor::default());
        e["cursor"] = c.to_json();
        assert_eq!(Cursor::of(&e), c);
        assert!(!c.done());
        assert!(
            Cursor {
                scanned: true,
                ..Cursor::default()
            }
            .done()
        );
        let mut counts = Counts {
            examined: 5,
            owned: 2,
            ..Counts::default()
        };
        counts.add_to(&mut e);
        counts.recorded = 1;
        counts.add_to(&mut e);
        assert_eq!(e["counts"]["examined"], 10);
        assert_eq!(e["counts"]["owned"], 4);
        assert_eq!(e["counts"]["recorded"], 1);
    }

    #[test]
    fn owners_are_resolved_like_is_dangling() {
        let crd = |plural: &str, kind: &str, scope: &str| {
            json!({"metadata": {"name": format!("{plural}.a.io")},
            "spec": {"group": "a.io", "scope": scope,
                     "names": {"plural": plural, "kind": kind},
                     "versions": [{"name": "v1", "served": true, "storage": true}]},
            "status": {"conditions": [{"type": "Established", "status": "True"}],
                       "acceptedNames": {"plural": plural, "kind": kind}}})
        };
        let kinds = Kinds::new(&[
            crd("parents", "Parent", "Namespaced"),
            crd("globals", "Global", "Cluster"),
        ]);
        let r = |kind: &str, uid: &str| {
            json!({"apiVersion": if kind == "Namespace" { "v1" } else { "a.io/v1" },
                   "kind": kind, "name": "o", "uid": uid})
        };
        let dep = json!({"metadata": {"name": "d", "namespace": "ns1", "ownerReferences": [
            r("Parent", "u1"), r("Global", "u2"), r("Namespace", "u3"), r("Unknown", "u4")]}});
        let got: Vec<(String, String, String)> = owners_to_check(&kinds, &dep, true)
            .into_iter()
            .map(|(o, ns)| (o.uid, o.resource, ns))
            .collect();
        assert_eq!(
            got,
            [
                ("u1".to_string(), "parents".to_string(), "ns1".to_string()),
                ("u2".into(), "globals".into(), "".into()),
                ("u3".into(), "namespaces".into(), "".into()),
            ]
        );
        // A cluster-scoped dependent: the namespaced owner kind is invalid, not checked.
        let cluster = json!({"metadata": {"name": "d", "ownerReferences": [
            r("Parent", "u1"), r("Global", "u2")]}});
        let got: Vec<String> = owners_to_check(&kinds, &cluster, false)
            .into_iter()
            .map(|(o, _)| o.uid)
            .collect();
        assert_eq!(got, ["u2"]);
    }
}
