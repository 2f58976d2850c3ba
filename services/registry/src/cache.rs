//! Per-tenant snapshot of CRDs and the documents derived from them (discovery, OpenAPI).
//!
//! Read paths (`Resolve`, `Discovery`, `OpenApiV2/V3`) use a snapshot; a snapshot is built by
//! listing the tenant's CRDs from storage and is dropped when a CRD of the tenant changes:
//! synchronously by this replica's own write paths, and through the storage `Changes` stream
//! for writes made by other replicas. While the stream is down nothing is cached (every read
//! lists), so a missed notification can never leave a stale snapshot behind. An epoch per
//! tenant keeps a list that raced with an invalidation from being stored.

use crate::crd::CrdView;
use crate::discovery::Documents;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Tenants whose snapshots are kept at most (an arbitrary one is dropped beyond).
pub const MAX_TENANTS: usize = 10_000;

/// The OpenAPI v2 document of a tenant, in both encodings.
pub struct OpenApiV2 {
    /// The Swagger 2.0 document as JSON (`/openapi/v2`).
    pub json: Vec<u8>,
    /// The same document as a gnostic `openapi.v2.Document` protobuf message.
    pub protobuf: Vec<u8>,
    /// kube-openapi's ETag of the JSON form, sent for both encodings.
    pub etag: String,
}

/// The CRDs of one tenant at one point in time, and lazily built derived documents.
pub struct Snapshot {
    /// Raw CRD objects, in name order.
    pub raw: Vec<Value>,
    /// Typed views of `raw`, index for index (default for an undecodable object).
    pub views: Vec<CrdView>,
    /// Discovery documents, built on first use.
    pub discovery: OnceLock<Arc<Documents>>,
    /// OpenAPI v2 document, built on first use.
    pub openapi_v2: OnceLock<Arc<OpenApiV2>>,
    /// OpenAPI v3 index and group-version documents, built on first use.
    pub openapi_v3: OnceLock<Arc<crate::openapi::V3Documents>>,
}

impl Snapshot {
    /// A snapshot of `raw` (the tenant's CRDs as listed), with nothing derived yet.
    pub fn new(raw: Vec<Value>) -> Self {
        let views = raw
            .iter()
            .map(|v| CrdView::from_value(v).unwrap_or_default())
            .collect();
        Self {
            raw,
            views,
            discovery: OnceLock::new(),
            openapi_v2: OnceLock::new(),
            openapi_v3: OnceLock::new(),
        }
    }

    /// Established CRDs only (what may be served).
    pub fn established_raw(&self) -> Vec<Value> {
        self.raw
            .iter()
            .zip(&self.views)
            .filter(|(_, v)| v.established())
            .map(|(r, _)| r.clone())
            .collect()
    }
}

#[derive(Default)]
struct Entry {
    epoch: u64,
    snapshot: Option<Arc<Snapshot>>,
}

/// Snapshots of every tenant, valid only while the storage change feed is live.
#[derive(Default)]
pub struct Cache {
    tenants: Mutex<HashMap<String, Entry>>,
    live: AtomicBool,
}

impl Cache {
    /// The cached snapshot, if the change feed is live and one is cached.
    pub fn get(&self, tenant: &str) -> Option<Arc<Snapshot>> {
        if !self.live.load(Ordering::Acquire) {
            return None;
        }
        let t = self.tenants.lock().unwrap_or_else(|e| e.into_inner());
        t.get(tenant).and_then(|e| e.snapshot.clone())
    }

    /// The epoch to pass to [`Cache::put`] for a list that starts now.
    pub fn epoch(&self, tenant: &str) -> u64 {
        let t = self.tenants.lock().unwrap_or_else(|e| e.into_inner());
        t.get(tenant).map_or(0, |e| e.epoch)
    }

    /// Stores a snapshot listed at `epoch`, unless the tenant was invalidated since.
    pub fn put(&self, tenant: &str, epoch: u64, snap: Arc<Snapshot>) {
        if !self.live.load(Ordering::Acquire) {
            return;
        }
        let mut t = self.tenants.lock().unwrap_or_else(|e| e.into_inner());
        if t.len() >= MAX_TENANTS && !t.contains_key(tenant) {
            // Drop a snapshot-holding entry; keep epochs meaningful by dropping only
            // entries with no snapshot's epoch in flight mattering less than memory.
            if let Some(k) = t.keys().next().cloned() {
                t.remove(&k);
            }
        }
        let e = t.entry(tenant.to_string()).or_default();
        if e.epoch == epoch {
            e.snapshot = Some(snap);
        }
    }

    /// Drops the tenant's snapshot.
    pub fn invalidate(&self, tenant: &str) {
        let mut t = self.tenants.lock().unwrap_or_else(|e| e.into_inner());
        let e = t.entry(tenant.to_string()).or_default();
        e.epoch += 1;
        e.snapshot = None;
    }

    /// Drops every snapshot (the change feed (re)connected or broke).
    pub fn invalidate_all(&self) {
        let mut t = self.tenants.lock().unwrap_or_else(|e| e.into_inner());
        for e in t.values_mut() {
            e.epoch += 1;
            e.snapshot = None;
        }
    }

    /// Marks the change feed connected (`true`) or broken; either way drops every snapshot.
    pub fn set_live(&self, live: bool) {
        self.invalidate_all();
        self.live.store(live, Ordering::Release);
    }

    /// Whether the change feed is connected (snapshots are kept only then).
    pub fn is_live(&self) -> bool {
        self.live.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_cached_while_not_live_and_races_are_dropped() {
        let c = Cache::default();
        let s = Arc::new(Snapshot::new(vec![]));
        c.put("t", c.epoch("t"), s.clone());
        assert!(c.get("t").is_none());
        c.set_live(true);
        let e = c.epoch("t");
        c.invalidate("t"); // a change arrives while the list is in flight
        c.put("t", e, s.clone());
        assert!(c.get("t").is_none());
        let e = c.epoch("t");
        c.put("t", e, s.clone());
        assert!(c.get("t").is_some());
        c.invalidate("t");
        assert!(c.get("t").is_none());
        c.put("t", c.epoch("t"), s);
        c.set_live(false);
        assert!(c.get("t").is_none());
    }
}
