//! Shared upstream watch streams: many HTTP watchers of one gateway on one storage `Watch`.
//!
//! Where it sits: `watch::serve` (HTTP watch) → [`Mux::join`] → one [`Shared`]
//! stream per (tenant, group, resource) → storage gRPC `Watch` without selectors (events
//! carry the previous state of a MODIFIED) → [`Shared`] dispatch → per-watcher bounded
//! queues ([`crate::watch_queue`]) → the HTTP response bodies. It is also the watch handler's facade for its other
//! storage calls (the initial state, the current revision, a private watch from an old
//! revision: [`Mux::initial_state`], [`Mux::current_revision`], [`Mux::watch_direct`]), so
//! the handler sees no protobuf type.
//!
//! - **One upstream per resource.** The first watcher of a (tenant, resource) starts a
//!   storage watch from a known revision; later watchers join it. The stream reconnects from
//!   its last revision when storage goes away (history replay covers the gap); when history
//!   no longer covers it (410) every watcher gets the ERROR event and ends, as upstream does
//!   for a watch cache that cannot serve a revision.
//! - **Recent-event ring.** Each stream keeps the last [`RING_EVENTS`] events (at most
//!   [`RING_BYTES`]); a watcher resuming from a revision inside the ring replays from it and
//!   joins live with no gap (upstream's watch cache does the same). A revision older than the
//!   ring is served by a private storage watch (history in Redis, or 410) — see
//!   [`Joined::NotCovered`].
//! - **Encode once.** An event is rendered to its `{"type":…,"object":…}\n` line once per
//!   (apiVersion, type, object) and the same `Bytes` go to every watcher that wants it.
//!   Table watchers get the object and render their own rows (column definitions only on
//!   their first event).
//! - **Read defaulting once per (event, served version).** Watchers of a served version
//!   whose schema has defaults share one [`Defaulting`] key: before the stream dispatches
//!   a batch of events (what the storage stream has ready, at most [`DEFAULT_BATCH`]), it
//!   makes one validation call per key present among its watchers for the whole batch,
//!   and keeps the defaulted bytes with each event (they stay with it in the ring). JSON
//!   watchers then get the line rendered once from them; Table watchers render from the
//!   defaulted object. Only a watcher whose version had no watcher when the event came
//!   (it joined later and replays the ring), the initial list and a private storage watch
//!   default per watcher (`normalize_items`). Upstream applies defaults when it
//!   decodes an object from storage, once per object read by the watch cache
//!   (apiextensions-apiserver `pkg/apiserver/customresource_handler.go`
//!   `schemaCoercingDecoder` / `unstructuredDefaulter`), never per watcher.
//! - **Per-watcher filtering with transitions.** Namespace/name by the event key; label and
//!   field selectors on the object decoded once per event, with upstream's transitions
//!   (`apiserver pkg/storage/cacher/cache_watcher.go` convertToWatchEvent): a MODIFIED that
//!   starts matching is ADDED, one that stops matching is DELETED carrying the previous
//!   state at the event's revision.
//! - **Slow watchers.** Each watcher has a bounded queue ([`WATCHER_QUEUE`]); a watcher whose
//!   queue is full is dropped (its response ends after what is queued, the client re-watches
//!   from its last revision), so it never slows the others or grows memory.
//!
//! Watchers are indexed by namespace, so an event is only offered to watchers of its
//! namespace and to all-namespace watchers.

use crate::context::Channel;
use crate::watch_queue;
use bytes::Bytes;
use crdplane_core::filter::{ObjectFilter, Transition, transition};
use crdplane_core::{ApiError, ResourceRef};
use crdplane_proto::GrpcStatusExt;
use crdplane_proto::v1 as pb;
use crdplane_proto::v1::storage_client::StorageClient;
use futures::FutureExt;
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::Notify;

/// Events kept per shared stream for resuming watchers.
pub const RING_EVENTS: usize = 1024;
/// Bytes of event objects kept per shared stream (the ring shrinks below this).
pub const RING_BYTES: usize = 8 << 20;
/// Events queued per watcher before it counts as too slow and is closed.
pub const WATCHER_QUEUE: usize = 512;

/// Object transform of a watcher (apiVersion rewrite for a served version).
pub type Transform = Arc<dyn Fn(Bytes) -> Bytes + Send + Sync>;

/// Defaults a batch of objects (same order out as in), e.g. through the validation service.
pub type Normalizer = Arc<
    dyn Fn(Vec<Bytes>) -> futures::future::BoxFuture<'static, Result<Vec<Bytes>, ApiError>>
        + Send
        + Sync,
>;

/// Most events a shared stream defaults in one call.
pub const DEFAULT_BATCH: usize = 256;

/// Read defaulting of one served version, shared by all its watchers on a stream.
pub struct Defaulting {
    /// What the defaults depend on (apiVersion, CRD uid and serving hash): watchers with
    /// the same key get the same defaulted bytes.
    pub key: String,
    /// Applied after the watcher's transform.
    pub normalize: Normalizer,
}

/// Which objects one watcher wants: the shared [`ObjectFilter`] (namespace and name by key,
/// selectors on the body) plus the cacher's transitions over decoded objects.
#[derive(Debug, Default)]
pub struct WatchFilter {
    inner: ObjectFilter,
}

impl std::ops::Deref for WatchFilter {
    type Target = ObjectFilter;
    fn deref(&self) -> &ObjectFilter {
        &self.inner
    }
}

impl WatchFilter {
    /// Selector strings were checked by the handler; a parse error here is still a 400.
    pub fn new(namespace: &str, name: &str, label: &str, field: &str) -> Result<Self, ApiError> {
        Ok(Self {
            inner: ObjectFilter::new(namespace, name, label, field)?,
        })
    }

    /// The event this watcher sees for a stored event: `(type, object is the previous
    /// state)`, or None. `cur`/`prev` are the decoded objects (decoded only when needed).
    pub fn decide(
        &self,
        kind: u8,
        ns: &str,
        name: &str,
        has_prev: bool,
        decoded: impl FnOnce() -> (Option<Arc<Value>>, Option<Arc<Value>>),
    ) -> Option<(u8, bool)> {
        if !self.matches_key(ns, name) {
            return None;
        }
        if self.key_only() {
            return Some((kind, false));
        }
        let (cur, prev) = decoded();
        let now = cur.is_some_and(|v| self.matches_value(&v));
        let before =
            (kind == b'M' && has_prev).then(|| prev.is_some_and(|v| self.matches_value(&v)));
        match transition(kind, before, now)? {
            Transition::Same => Some((kind, false)),
            Transition::Added => Some((b'A', false)),
            Transition::DeletedPrev => Some((b'D', true)),
        }
    }
}

pub use crdplane_apiserver::watch::{Item, event_line, type_name};

/// What a watcher asked for.
pub struct Spec {
    /// Which events of the stream the watcher gets (namespace, name, selectors).
    pub filter: WatchFilter,
    /// apiVersion objects are served with (render-cache key together with the type).
    pub api_version: String,
    /// Post-processing of each event object (version conversion); None = as stored.
    pub transform: Option<Transform>,
    /// Table output: the watcher renders objects itself.
    pub raw: bool,
    /// Read defaulting of the served version (None: objects are served as stored).
    pub defaulting: Option<Arc<Defaulting>>,
}

impl Spec {
    /// The queue item for an object this watcher receives (rendered for JSON watchers).
    pub fn item(&self, kind: u8, object: Bytes, rv: u64) -> Item {
        if self.raw || self.defaulting.is_some() {
            return Item::Raw {
                kind,
                object,
                rv,
                needs_defaults: self.defaulting.is_some(),
            };
        }
        let object = match &self.transform {
            Some(f) => f(object),
            None => object,
        };
        Item::Line {
            line: event_line(type_name(kind), &object),
            rv,
        }
    }
}

type Decoded = (Option<Arc<Value>>, Option<Arc<Value>>);

/// The object (and, when some watcher's selectors may need it, the previous state) of an
/// event after transform and read defaulting for one [`Defaulting::key`].
struct DefaultedObject {
    key: String,
    object: Bytes,
    /// Empty when not computed.
    prev: Bytes,
}

/// One event from storage, decoded at most once, rendered at most once per variant.
struct Event {
    kind: u8,
    rv: u64,
    ns: String,
    name: String,
    object: Bytes,
    prev: Bytes,
    decoded: OnceLock<Decoded>,
    /// Read-defaulted variants, set before the event is dispatched (see [`Shared::default_batch`]).
    defaulted: Vec<DefaultedObject>,
    /// (apiVersion or defaulting key, type, previous-state object) → rendered line.
    renders: Mutex<Vec<(String, u8, bool, Bytes)>>,
}

impl Event {
    fn decoded(&self) -> Decoded {
        self.decoded
            .get_or_init(|| {
                let p = |b: &Bytes| {
                    (!b.is_empty())
                        .then(|| serde_json::from_slice::<Value>(b).ok().map(Arc::new))
                        .flatten()
                };
                (p(&self.object), p(&self.prev))
            })
            .clone()
    }

    fn size(&self) -> usize {
        let defaulted: usize = self
            .defaulted
            .iter()
            .map(|d| d.object.len() + d.prev.len() + d.key.len())
            .sum();
        self.object.len() + self.prev.len() + self.key_len() + defaulted
    }

    fn key_len(&self) -> usize {
        self.ns.len() + self.name.len() + 64
    }

    /// What `spec` receives for this event, rendered once per variant.
    fn for_watcher(&self, spec: &Spec) -> Option<Item> {
        let (kind, use_prev) = spec.filter.decide(
            self.kind,
            &self.ns,
            &self.name,
            !self.prev.is_empty(),
            || self.decoded(),
        )?;
        let object = if use_prev { &self.prev } else { &self.object };
        // Defaulted by the shared stream for this watcher's version: render from that.
        let defaulted = spec.defaulting.as_ref().and_then(|d| {
            let found = self.defaulted.iter().find(|x| x.key == d.key)?;
            let o = if use_prev { &found.prev } else { &found.object };
            (!o.is_empty()).then(|| (d.key.as_str(), o))
        });
        if spec.raw {
            return Some(match defaulted {
                Some((_, o)) => Item::Raw {
                    kind,
                    object: o.clone(),
                    rv: self.rv,
                    needs_defaults: false,
                },
                None => spec.item(kind, object.clone(), self.rv),
            });
        }
        if spec.defaulting.is_some() && defaulted.is_none() {
            return Some(spec.item(kind, object.clone(), self.rv));
        }
        let variant = defaulted.map_or(spec.api_version.as_str(), |(k, _)| k);
        let mut cache = self.renders.lock().expect("render cache");
        if let Some((.., line)) = cache
            .iter()
            .find(|(v, k, p, _)| *k == kind && *p == use_prev && v == variant)
        {
            return Some(Item::Line {
                line: line.clone(),
                rv: self.rv,
            });
        }
        let item = match defaulted {
            Some((_, o)) => Item::Line {
                line: event_line(type_name(kind), o),
                rv: self.rv,
            },
            None => spec.item(kind, object.clone(), self.rv),
        };
        if let Item::Line { line, .. } = &item {
            cache.push((variant.to_string(), kind, use_prev, line.clone()));
        }
        Some(item)
    }
}

/// `metadata.namespace` and `metadata.name` of an object.
fn object_key(json: &[u8]) -> Option<(String, String)> {
    #[derive(serde::Deserialize)]
    struct Meta {
        #[serde(default)]
        namespace: String,
        #[serde(default)]
        name: String,
    }
    #[derive(serde::Deserialize)]
    struct Obj {
        metadata: Meta,
    }
    let o: Obj = serde_json::from_slice(json).ok()?;
    Some((o.metadata.namespace, o.metadata.name))
}

/// True when an object's `metadata.namespace`/`metadata.name` are within what `filter`
/// allows (an object without metadata is not).
pub fn object_in_scope(filter: &ObjectFilter, json: &[u8]) -> bool {
    object_key(json).is_some_and(|(ns, name)| filter.matches_key(&ns, &name))
}

struct Slot {
    spec: Arc<Spec>,
    tx: watch_queue::Sender<Item>,
    /// Events with revision ≤ pos were delivered another way (replay, list).
    pos: u64,
    ns: String,
}

#[derive(Default)]
struct State {
    /// The ring holds every event with revision in (base, last].
    base: u64,
    last: u64,
    ring: VecDeque<Arc<Event>>,
    ring_bytes: usize,
    watchers: HashMap<u64, Slot>,
    by_ns: HashMap<String, Vec<u64>>,
    next_id: u64,
    closed: bool,
}

impl State {
    fn remove(&mut self, id: u64) {
        if let Some(slot) = self.watchers.remove(&id)
            && let Some(v) = self.by_ns.get_mut(&slot.ns)
        {
            v.retain(|x| *x != id);
            if v.is_empty() {
                self.by_ns.remove(&slot.ns);
            }
        }
    }
}

/// One upstream storage watch and its watchers.
pub struct Shared {
    key: StreamKey,
    state: Mutex<State>,
    stop: Notify,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands one storage event to the ring and to every interested watcher (without read
    /// defaulting: see [`Shared::dispatch_batch`]).
    #[cfg(test)]
    fn dispatch(&self, ev: pb::WatchEvent) {
        if let Some(e) = self.event(ev) {
            self.dispatch_event(e);
        }
    }

    /// A storage event as an [`Event`]; progress notifications advance the stream's
    /// revision and yield None.
    fn event(&self, ev: pb::WatchEvent) -> Option<Event> {
        let kind = match pb::watch_event::Type::try_from(ev.r#type) {
            Ok(pb::watch_event::Type::Added) => b'A',
            Ok(pb::watch_event::Type::Modified) => b'M',
            Ok(pb::watch_event::Type::Deleted) => b'D',
            Ok(pb::watch_event::Type::Progress) => {
                let mut st = self.lock();
                st.last = st.last.max(ev.resource_version);
                return None;
            }
            _ => return None,
        };
        let Some((ns, name)) = object_key(&ev.object) else {
            tracing::warn!(rv = ev.resource_version, "watch event without metadata");
            return None;
        };
        Some(Event {
            kind,
            rv: ev.resource_version,
            ns,
            name,
            object: ev.object,
            prev: ev.prev_object,
            decoded: OnceLock::new(),
            defaulted: Vec::new(),
            renders: Mutex::new(Vec::new()),
        })
    }

    /// Read defaulting of a batch of events, once per [`Defaulting::key`] among the current
    /// watchers: one call for the batch's objects (and previous states, when a watcher of
    /// that key has selectors, whose transitions may send the previous state). A failed
    /// call leaves the objects as stored (transformed only), as the per-watcher path does.
    async fn default_batch(&self, events: &mut [Event]) {
        // key → (defaulting, transform, previous states needed)
        let mut wanted: Vec<(Arc<Defaulting>, Option<Transform>, bool)> = Vec::new();
        {
            let st = self.lock();
            for slot in st.watchers.values() {
                let Some(d) = &slot.spec.defaulting else {
                    continue;
                };
                let prev = !slot.spec.filter.key_only();
                match wanted.iter_mut().find(|(w, ..)| w.key == d.key) {
                    Some(w) => w.2 |= prev,
                    None => wanted.push((d.clone(), slot.spec.transform.clone(), prev)),
                }
            }
        }
        for (d, transform, with_prev) in wanted {
            let t = |b: &Bytes| match &transform {
                Some(f) => f(b.clone()),
                None => b.clone(),
            };
            let mut objs: Vec<Bytes> = events.iter().map(|e| t(&e.object)).collect();
            let prev_at: Vec<usize> = if with_prev {
                (0..events.len())
                    .filter(|&i| !events[i].prev.is_empty())
                    .collect()
            } else {
                Vec::new()
            };
            objs.extend(prev_at.iter().map(|&i| t(&events[i].prev)));
            let n = objs.len();
            let out = match (d.normalize)(objs.clone()).await {
                Ok(out) if out.len() == n => out,
                Ok(_) => objs,
                Err(e) => {
                    tracing::warn!(error = %e.message, "read defaulting of watch events failed");
                    objs
                }
            };
            let mut out = out.into_iter();
            for e in events.iter_mut() {
                e.defaulted.push(DefaultedObject {
                    key: d.key.clone(),
                    object: out.next().unwrap_or_default(),
                    prev: Bytes::new(),
                });
            }
            for i in prev_at {
                if let Some(p) = out.next()
                    && let Some(x) = events[i].defaulted.last_mut()
                {
                    x.prev = p;
                }
            }
        }
    }

    /// Defaults a batch of storage events (see [`Shared::default_batch`]) and dispatches
    /// them in order.
    async fn dispatch_batch(&self, evs: Vec<pb::WatchEvent>) {
        let mut events: Vec<Event> = evs.into_iter().filter_map(|e| self.event(e)).collect();
        if events.is_empty() {
            return;
        }
        self.default_batch(&mut events).await;
        for e in events {
            self.dispatch_event(e);
        }
    }

    /// Hands one event to the ring and to every interested watcher.
    fn dispatch_event(&self, e: Event) {
        let e = Arc::new(e);
        let mut st = self.lock();
        if e.rv <= st.last {
            return; // already seen (reconnect overlap)
        }
        st.last = e.rv;
        st.ring_bytes += e.size();
        st.ring.push_back(e.clone());
        while st.ring.len() > RING_EVENTS || (st.ring_bytes > RING_BYTES && st.ring.len() > 1) {
            let Some(old) = st.ring.pop_front() else {
                break;
            };
            st.ring_bytes -= old.size();
            st.base = old.rv;
        }
        let State {
            watchers, by_ns, ..
        } = &mut *st;
        let mut slow = Vec::new();
        let all = by_ns.get("").into_iter().flatten();
        let own = (!e.ns.is_empty())
            .then(|| by_ns.get(&e.ns))
            .flatten()
            .into_iter()
            .flatten();
        for id in all.chain(own) {
            let Some(slot) = watchers.get(id) else {
                continue;
            };
            if e.rv <= slot.pos {
                continue;
            }
            if let Some(item) = e.for_watcher(&slot.spec)
                && slot.tx.try_send(item).is_err()
            {
                slow.push(*id);
            }
        }
        for id in slow {
            st.remove(id);
        }
        // Drop renders now: the ring keeps the event, not its lines.
        e.renders.lock().expect("render cache").clear();
    }

    /// Ends every watcher with `err` as an ERROR event.
    fn fail(&self, err: &ApiError) {
        let line = event_line("ERROR", &err.to_json());
        let mut st = self.lock();
        st.closed = true;
        for (_, slot) in st.watchers.drain() {
            let _ = slot.tx.try_send(Item::Line {
                line: line.clone(),
                rv: 0,
            });
        }
        st.by_ns.clear();
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct StreamKey {
    tenant: String,
    group: String,
    resource: String,
}

/// The shared streams of one gateway process (per storage endpoint).
pub struct Mux {
    client: StorageClient<Channel>,
    streams: Mutex<HashMap<StreamKey, Arc<Shared>>>,
}

/// A watcher registered on a shared stream; leaving (drop) unregisters it.
pub struct Subscription {
    /// Events from the ring with revision > the requested one, to send first.
    pub replay: Vec<Item>,
    /// Live events after the replay.
    pub rx: watch_queue::Receiver<Item>,
    shared: Arc<Shared>,
    mux: Arc<Mux>,
    id: u64,
}

impl Subscription {
    /// The revision the shared stream has dispatched up to (for bookmarks: every event up
    /// to it that this watcher wants is already in its queue).
    pub fn current_rv(&self) -> u64 {
        self.shared.lock().last
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let empty = {
            let mut st = self.shared.lock();
            st.remove(self.id);
            if st.watchers.is_empty() {
                st.closed = true;
            }
            st.closed
        };
        if empty {
            self.shared.stop.notify_one();
            self.mux.forget(&self.shared);
        }
    }
}

/// The result of [`Mux::join`].
pub enum Joined {
    /// Registered on the shared stream.
    Shared(Subscription),
    /// The revision is older than the shared stream remembers: watch storage directly.
    NotCovered,
}

static MUXES: OnceLock<Mutex<HashMap<String, Arc<Mux>>>> = OnceLock::new();

impl Mux {
    /// The mux of this process for a storage endpoint (one per endpoint).
    pub fn for_endpoint(endpoint: &str, client: &StorageClient<Channel>) -> Arc<Mux> {
        let map = MUXES.get_or_init(Default::default);
        let mut m = map.lock().unwrap_or_else(|e| e.into_inner());
        m.entry(endpoint.to_string())
            .or_insert_with(|| {
                Arc::new(Mux {
                    client: client.clone(),
                    streams: Default::default(),
                })
            })
            .clone()
    }

    fn streams(&self) -> std::sync::MutexGuard<'_, HashMap<StreamKey, Arc<Shared>>> {
        self.streams.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn forget(&self, shared: &Arc<Shared>) {
        let mut m = self.streams();
        if m.get(&shared.key).is_some_and(|s| Arc::ptr_eq(s, shared)) {
            m.remove(&shared.key);
        }
    }

    /// The revision of a resource right now (a one-item list).
    pub async fn current_revision(&self, r: &ResourceRef) -> Result<u64, ApiError> {
        let l = self
            .client
            .clone()
            .list(pb::ListRequest {
                resource: Some(r.into()),
                limit: 1,
                ..Default::default()
            })
            .await
            .map_err(crdplane_proto::status::from_grpc)?
            .into_inner();
        Ok(l.resource_version)
    }

    /// Every object of the resource the watch selects (its initial state) and the list's
    /// revision.
    pub async fn initial_state(&self, w: &WatchScope<'_>) -> Result<(Vec<Bytes>, u64), ApiError> {
        let list = self
            .client
            .clone()
            .list(pb::ListRequest {
                resource: Some(w.resource.into()),
                namespace: w.namespace.into(),
                name: w.name.into(),
                label_selector: w.label_selector.into(),
                field_selector: w.field_selector.into(),
                ..Default::default()
            })
            .await
            .map_err(crdplane_proto::status::from_grpc)?
            .into_inner();
        Ok((list.items, list.resource_version))
    }

    /// A private storage watch from revision `from` (older than any shared stream
    /// remembers): storage replays its history, or ends with 410 Expired.
    pub async fn watch_direct(
        &self,
        w: &WatchScope<'_>,
        from: u64,
    ) -> Result<DirectWatch, ApiError> {
        let stream = self
            .client
            .clone()
            .watch(pb::WatchRequest {
                resource: Some(w.resource.into()),
                namespace: w.namespace.into(),
                from_resource_version: from,
                send_initial_state: false,
                label_selector: w.label_selector.into(),
                field_selector: w.field_selector.into(),
                name: w.name.into(),
            })
            .await
            .map_err(crdplane_proto::status::from_grpc)?
            .into_inner();
        Ok(DirectWatch(stream))
    }

    /// True when a live shared stream exists for the resource (joining needs no start
    /// revision then).
    pub fn running(&self, r: &ResourceRef) -> bool {
        self.streams()
            .get(&key_of(r))
            .is_some_and(|s| !s.lock().closed)
    }

    /// Registers a watcher that wants every event with revision > `from`. `start` is the
    /// revision a new shared stream starts at when none runs (a revision known to be
    /// current, e.g. of a list); None when the caller has none (then a missing stream
    /// yields [`Joined::NotCovered`]).
    pub fn join(
        self: &Arc<Self>,
        r: &ResourceRef,
        from: u64,
        start: Option<u64>,
        spec: Arc<Spec>,
    ) -> Joined {
        let key = key_of(r);
        for _ in 0..3 {
            let shared = {
                let mut m = self.streams();
                match m.get(&key) {
                    Some(s) if !s.lock().closed => s.clone(),
                    _ => {
                        // A revision older than the stream would start at is not covered:
                        // do not start a stream nobody joins.
                        let Some(start) = start.filter(|s| from >= *s) else {
                            return Joined::NotCovered;
                        };
                        let s = Arc::new(Shared {
                            key: key.clone(),
                            state: Mutex::new(State {
                                base: start,
                                last: start,
                                ..Default::default()
                            }),
                            stop: Notify::new(),
                        });
                        m.insert(key.clone(), s.clone());
                        tokio::spawn(run_upstream(self.clone(), s.clone(), r.into()));
                        s
                    }
                }
            };
            let mut st = shared.lock();
            if st.closed {
                continue;
            }
            if from < st.base {
                return Joined::NotCovered;
            }
            let replay: Vec<Item> = st
                .ring
                .iter()
                .filter(|e| e.rv > from)
                .filter_map(|e| {
                    let item = e.for_watcher(&spec);
                    e.renders.lock().expect("render cache").clear();
                    item
                })
                .collect();
            let (tx, rx) = watch_queue::channel(WATCHER_QUEUE);
            let id = st.next_id;
            st.next_id += 1;
            let ns = spec.filter.namespace.clone();
            st.by_ns.entry(ns.clone()).or_default().push(id);
            let pos = from.max(st.last);
            st.watchers.insert(id, Slot { spec, tx, pos, ns });
            drop(st);
            return Joined::Shared(Subscription {
                replay,
                rx,
                shared,
                mux: self.clone(),
                id,
            });
        }
        Joined::NotCovered
    }
}

/// What a watch selects, as the storage service takes it.
#[derive(Debug, Clone, Copy)]
pub struct WatchScope<'a> {
    /// The tenant's resource.
    pub resource: &'a ResourceRef,
    /// Namespace ("" = all namespaces or cluster scope).
    pub namespace: &'a str,
    /// Single object name ("" = every object).
    pub name: &'a str,
    /// Label selector text (already validated).
    pub label_selector: &'a str,
    /// Field selector text (already validated).
    pub field_selector: &'a str,
}

/// A private storage watch ([`Mux::watch_direct`]).
pub struct DirectWatch(tonic::Streaming<pb::WatchEvent>);

impl DirectWatch {
    /// The next event: its type byte (`A`dded, `M`odified, `D`eleted), the object and its
    /// revision; None when the stream ended, the Status when it failed.
    pub async fn next(&mut self) -> Option<Result<(u8, Bytes, u64), ApiError>> {
        loop {
            match self.0.message().await {
                Ok(Some(ev)) => {
                    let kind = match pb::watch_event::Type::try_from(ev.r#type) {
                        Ok(pb::watch_event::Type::Added) => b'A',
                        Ok(pb::watch_event::Type::Deleted) => b'D',
                        Ok(pb::watch_event::Type::Modified) => b'M',
                        _ => continue,
                    };
                    return Some(Ok((kind, ev.object, ev.resource_version)));
                }
                Ok(None) => return None,
                Err(s) => return Some(Err(ApiError::from_grpc(&s))),
            }
        }
    }
}

fn key_of(r: &ResourceRef) -> StreamKey {
    StreamKey {
        tenant: r.tenant.clone(),
        group: r.group.clone(),
        resource: r.resource.clone(),
    }
}

/// The upstream storage watch of one shared stream: reconnects from its last revision,
/// ends when the last watcher leaves or history no longer covers it.
async fn run_upstream(mux: Arc<Mux>, shared: Arc<Shared>, r: pb::ResourceRef) {
    let mut backoff = Duration::from_millis(50);
    loop {
        let from = {
            let st = shared.lock();
            if st.closed {
                break;
            }
            st.last
        };
        let req = pb::WatchRequest {
            resource: Some(r.clone()),
            from_resource_version: from,
            ..Default::default()
        };
        let mut ended_by = None;
        match mux.client.clone().watch(req).await {
            Ok(resp) => {
                let mut s = resp.into_inner();
                loop {
                    tokio::select! {
                        _ = shared.stop.notified() => {
                            if shared.lock().closed {
                                return;
                            }
                        }
                        m = s.message() => match m {
                            Ok(Some(ev)) => {
                                backoff = Duration::from_millis(50);
                                // What else the stream has ready goes in the same batch,
                                // so read defaulting makes one call for all of it.
                                let mut batch = vec![ev];
                                let mut end = None;
                                while batch.len() < DEFAULT_BATCH {
                                    match s.message().now_or_never() {
                                        Some(Ok(Some(ev))) => batch.push(ev),
                                        Some(Ok(None)) => {
                                            end = Some(None);
                                            break;
                                        }
                                        Some(Err(st)) => {
                                            end = Some(Some(ApiError::from_grpc(&st)));
                                            break;
                                        }
                                        None => break,
                                    }
                                }
                                shared.dispatch_batch(batch).await;
                                if let Some(e) = end {
                                    ended_by = e;
                                    break;
                                }
                            }
                            Ok(None) => break,
                            Err(st) => {
                                ended_by = Some(ApiError::from_grpc(&st));
                                break;
                            }
                        }
                    }
                }
            }
            Err(st) => ended_by = Some(ApiError::from_grpc(&st)),
        }
        if let Some(e) = ended_by {
            if e.code == 410 {
                shared.fail(&e);
                mux.forget(&shared);
                return;
            }
            tracing::warn!(resource = %r.resource, error = %e.message, "shared watch reconnecting");
        }
        tokio::select! {
            _ = shared.stop.notified() => {}
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(Duration::from_secs(2));
    }
    mux.forget(&shared);
}

/// Applies read defaulting to the object events among `items` that still need it (the
/// initial list, a ring replay of events that came before any watcher of this version, a
/// private storage watch; live events of the shared stream come defaulted already): every
/// such `Item::Raw` is converted (`transform`), defaulted in one batch, and rendered as a
/// JSON line unless the watcher renders Tables itself. A failed call leaves the objects as
/// stored (logged).
pub(crate) async fn normalize_items(
    items: Vec<Item>,
    transform: &Option<Transform>,
    norm: &Normalizer,
    table: bool,
) -> Vec<Item> {
    let objs: Vec<Bytes> = items
        .iter()
        .filter_map(|i| match i {
            Item::Raw {
                object,
                needs_defaults: true,
                ..
            } => Some(match transform {
                Some(f) => f(object.clone()),
                None => object.clone(),
            }),
            Item::Raw { .. } | Item::Line { .. } => None,
        })
        .collect();
    if objs.is_empty() {
        return items;
    }
    let n = objs.len();
    let defaulted = match norm(objs.clone()).await {
        Ok(d) if d.len() == n => d,
        Ok(_) => objs,
        Err(e) => {
            tracing::warn!(error = %e.message, "read defaulting of watch events failed");
            objs
        }
    };
    let mut defaulted = defaulted.into_iter();
    items
        .into_iter()
        .map(|i| match i {
            Item::Raw {
                kind,
                rv,
                object,
                needs_defaults: true,
            } => {
                let object = defaulted.next().unwrap_or(object);
                if table {
                    Item::Raw {
                        kind,
                        object,
                        rv,
                        needs_defaults: false,
                    }
                } else {
                    Item::Line {
                        line: event_line(type_name(kind), &object),
                        rv,
                    }
                }
            }
            line => line,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(ns: &str, name: &str, app: &str) -> Bytes {
        Bytes::from(format!(
            r#"{{"apiVersion":"g/v1","kind":"K","metadata":{{"namespace":"{ns}","name":"{name}","labels":{{"app":"{app}"}}}}}}"#
        ))
    }

    fn shared() -> Shared {
        Shared {
            key: StreamKey {
                tenant: "t".into(),
                group: "g".into(),
                resource: "r".into(),
            },
            state: Mutex::new(State::default()),
            stop: Notify::new(),
        }
    }

    fn add(s: &Shared, spec: Spec, cap: usize) -> (u64, watch_queue::Receiver<Item>) {
        let (tx, rx) = watch_queue::channel(cap);
        let mut st = s.lock();
        let id = st.next_id;
        st.next_id += 1;
        let ns = spec.filter.namespace.clone();
        st.by_ns.entry(ns.clone()).or_default().push(id);
        st.watchers.insert(
            id,
            Slot {
                spec: Arc::new(spec),
                tx,
                pos: 0,
                ns,
            },
        );
        (id, rx)
    }

    fn spec(ns: &str, label: &str) -> Spec {
        Spec {
            filter: WatchFilter::new(ns, "", label, "").unwrap(),
            api_version: "g/v1".into(),
            transform: None,
            raw: false,
            defaulting: None,
        }
    }

    fn ev(t: pb::watch_event::Type, rv: u64, o: Bytes, prev: Bytes) -> pb::WatchEvent {
        pb::WatchEvent {
            r#type: t as i32,
            object: o,
            resource_version: rv,
            prev_object: prev,
        }
    }

    fn line(i: Item) -> (String, Value) {
        let Item::Line { line, .. } = i else {
            panic!("raw")
        };
        let v: Value = serde_json::from_slice(&line).unwrap();
        (v["type"].as_str().unwrap().to_string(), v["object"].clone())
    }

    #[test]
    fn one_rendering_is_shared_by_all_watchers() {
        let s = shared();
        let (_, mut a) = add(&s, spec("", ""), 8);
        let (_, mut b) = add(&s, spec("ns1", ""), 8);
        let (_, mut c) = add(&s, spec("ns2", ""), 8);
        s.dispatch(ev(
            pb::watch_event::Type::Added,
            1,
            obj("ns1", "x", "web"),
            Bytes::new(),
        ));
        let (Item::Line { line: la, .. }, Item::Line { line: lb, .. }) =
            (a.try_recv().unwrap(), b.try_recv().unwrap())
        else {
            panic!()
        };
        assert_eq!(la, lb);
        assert_eq!(la.as_ptr(), lb.as_ptr(), "same bytes, not a copy");
        assert!(c.try_recv().is_err(), "other namespace gets nothing");
    }

    #[test]
    fn selector_transitions() {
        let s = shared();
        let (_, mut w) = add(&s, spec("", "app=web"), 8);
        let (web, db) = (obj("a", "x", "web"), obj("a", "x", "db"));
        let m = pb::watch_event::Type::Modified;
        s.dispatch(ev(
            pb::watch_event::Type::Added,
            1,
            db.clone(),
            Bytes::new(),
        ));
        s.dispatch(ev(m, 2, web.clone(), db.clone()));
        s.dispatch(ev(m, 3, web.clone(), web.clone()));
        s.dispatch(ev(m, 4, db.clone(), web.clone()));
        s.dispatch(ev(m, 5, db.clone(), db.clone()));
        s.dispatch(ev(
            pb::watch_event::Type::Deleted,
            6,
            db.clone(),
            Bytes::new(),
        ));
        let got: Vec<(String, String)> = std::iter::from_fn(|| w.try_recv().ok())
            .map(line)
            .map(|(t, o)| (t, o["metadata"]["labels"]["app"].as_str().unwrap().into()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("ADDED".into(), "web".into()),
                ("MODIFIED".into(), "web".into()),
                ("DELETED".into(), "web".into()),
            ]
        );
    }

    #[test]
    fn slow_watcher_is_dropped_and_others_continue() {
        let s = shared();
        let (_, mut slow) = add(&s, spec("", ""), 2);
        let (_, mut fast) = add(&s, spec("", ""), 64);
        for rv in 1..=10 {
            s.dispatch(ev(
                pb::watch_event::Type::Added,
                rv,
                obj("a", &format!("o{rv}"), "x"),
                Bytes::new(),
            ));
            while fast.try_recv().is_ok() {}
        }
        assert_eq!(s.lock().watchers.len(), 1);
        // The slow one gets what was queued, then its queue ends.
        assert!(slow.try_recv().is_ok());
        assert!(slow.try_recv().is_ok());
        assert!(matches!(
            slow.try_recv(),
            Err(watch_queue::TryRecvError::Disconnected)
        ));
    }

    #[test]
    fn ring_keeps_recent_events_and_moves_its_base() {
        let s = shared();
        for rv in 1..=(RING_EVENTS as u64 + 5) {
            s.dispatch(ev(
                pb::watch_event::Type::Added,
                rv,
                obj("a", "x", "y"),
                Bytes::new(),
            ));
        }
        let st = s.lock();
        assert_eq!(st.ring.len(), RING_EVENTS);
        assert_eq!(st.base, 5);
        assert_eq!(st.last, RING_EVENTS as u64 + 5);
        // Duplicates after a reconnect are ignored.
        drop(st);
        s.dispatch(ev(
            pb::watch_event::Type::Added,
            3,
            obj("a", "x", "y"),
            Bytes::new(),
        ));
        assert_eq!(s.lock().last, RING_EVENTS as u64 + 5);
    }

    #[test]
    fn name_and_field_selectors() {
        let f = WatchFilter::new("a", "", "", "metadata.name=x").unwrap();
        assert!(f.key_only());
        assert_eq!(
            f.decide(b'M', "a", "x", true, || unreachable!()),
            Some((b'M', false))
        );
        assert_eq!(f.decide(b'M', "a", "y", true, || unreachable!()), None);
        let g = WatchFilter::new("", "", "", "spec.color=red").unwrap();
        let red = Arc::new(serde_json::json!({"spec": {"color": "red"}}));
        let blue = Arc::new(serde_json::json!({"spec": {"color": "blue"}}));
        assert_eq!(
            g.decide(b'M', "a", "x", true, || (
                Some(blue.clone()),
                Some(red.clone())
            )),
            Some((b'D', true))
        );
        assert_eq!(
            g.decide(b'M', "a", "x", true, || (
                Some(red.clone()),
                Some(blue.clone())
            )),
            Some((b'A', false))
        );
    }

    /// A normalizer that counts its calls and sets `spec.replicas` (a default) on each object.
    fn counting_defaulter() -> (Normalizer, Arc<std::sync::atomic::AtomicUsize>) {
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let c = calls.clone();
        let norm: Normalizer = Arc::new(move |objs: Vec<Bytes>| {
            c.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Box::pin(async move {
                Ok(objs
                    .into_iter()
                    .map(|o| {
                        let mut v: Value = serde_json::from_slice(&o).unwrap();
                        v["spec"] = serde_json::json!({"replicas": 1});
                        Bytes::from(serde_json::to_vec(&v).unwrap())
                    })
                    .collect())
            })
        });
        (norm, calls)
    }

    #[tokio::test]
    async fn read_defaulting_is_one_call_per_batch_and_version_whatever_the_watchers() {
        for n in [1usize, 25] {
            let (norm, calls) = counting_defaulter();
            let d = Arc::new(Defaulting {
                key: "defaulted g/v1".into(),
                normalize: norm.clone(),
            });
            let s = shared();
            let with_defaults = |ns: &str, label: &str, raw: bool| Spec {
                raw,
                defaulting: Some(d.clone()),
                ..spec(ns, label)
            };
            let mut json: Vec<watch_queue::Receiver<Item>> = (0..n)
                .map(|_| add(&s, with_defaults("", "", false), 64).1)
                .collect();
            let (_, mut table) = add(&s, with_defaults("", "", true), 64);
            let (_, mut selective) = add(&s, with_defaults("a", "app=web", false), 64);
            let (web, db) = (obj("a", "x", "web"), obj("a", "x", "db"));
            s.dispatch_batch(vec![
                ev(pb::watch_event::Type::Added, 1, web.clone(), Bytes::new()),
                ev(pb::watch_event::Type::Modified, 2, db.clone(), web.clone()),
            ])
            .await;
            // What each watcher's response does with its queue (watch.rs Run::prepare).
            let mut lines = Vec::new();
            for rx in json.iter_mut().chain([&mut selective]) {
                let items: Vec<Item> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
                assert_eq!(items.len(), 2);
                for i in normalize_items(items, &None, &norm, false).await {
                    lines.push(i);
                }
            }
            let items: Vec<Item> = std::iter::from_fn(|| table.try_recv().ok()).collect();
            let table_items = normalize_items(items, &None, &norm, true).await;
            assert_eq!(
                calls.load(std::sync::atomic::Ordering::SeqCst),
                1,
                "{n} watchers: one defaulting call for the batch"
            );
            // Same bytes as defaulting per watcher gives: the stored object defaulted.
            let (want, _) = counting_defaulter();
            let expect = want(vec![web.clone(), db.clone(), web.clone()])
                .await
                .unwrap();
            let first = lines[0].clone();
            for (k, i) in lines.into_iter().enumerate() {
                let Item::Line { line, rv } = i else {
                    panic!("JSON watchers get lines")
                };
                let (kind, object, ptr) = match (k >= 2 * n, rv) {
                    (false, 1) => ("ADDED", &expect[0], true),
                    (false, _) => ("MODIFIED", &expect[1], true),
                    // The selective watcher: web is ADDED, db stops matching (DELETED with
                    // the previous state, defaulted).
                    (true, 1) => ("ADDED", &expect[0], true),
                    (true, _) => ("DELETED", &expect[2], false),
                };
                assert_eq!(line, event_line(kind, object), "watcher {k} rv {rv}");
                if ptr && rv == 1 {
                    let Item::Line { line: l0, .. } = &first else {
                        unreachable!()
                    };
                    assert_eq!(line.as_ptr(), l0.as_ptr(), "rendered once, shared");
                }
            }
            let Item::Raw {
                object,
                needs_defaults: false,
                ..
            } = &table_items[0]
            else {
                panic!("table watchers get the defaulted object")
            };
            assert_eq!(object, &expect[0]);
        }
    }

    #[test]
    fn an_item_is_48_bytes() {
        // Every byte of an `Item` is a byte of every queued event of every watcher (up
        // to `WATCHER_QUEUE` per watcher).
        assert_eq!(std::mem::size_of::<Item>(), 48);
    }

    #[tokio::test]
    async fn join_replays_the_ring_or_defers_to_storage() {
        // A client whose server never answers: the upstream task just keeps retrying.
        let ch = Channel::lazy("http://127.0.0.1:9").unwrap();
        let mux = Arc::new(Mux {
            client: StorageClient::new(ch),
            streams: Default::default(),
        });
        let r = ResourceRef::new("t", "g", "r");
        let spec = || Arc::new(spec("", ""));
        // No stream and no start revision: storage must serve it.
        assert!(matches!(mux.join(&r, 10, None, spec()), Joined::NotCovered));
        let Joined::Shared(first) = mux.join(&r, 10, Some(10), spec()) else {
            panic!("shared")
        };
        assert!(mux.running(&r));
        for rv in 11..=14 {
            first.shared.dispatch(ev(
                pb::watch_event::Type::Added,
                rv,
                obj("a", &format!("o{rv}"), "x"),
                Bytes::new(),
            ));
        }
        // Resume inside the ring: exactly the later events, then live ones.
        let Joined::Shared(mut second) = mux.join(&r, 12, None, spec()) else {
            panic!("shared")
        };
        let replayed: Vec<u64> = second.replay.iter().map(Item::rv).collect();
        assert_eq!(replayed, vec![13, 14]);
        first.shared.dispatch(ev(
            pb::watch_event::Type::Added,
            15,
            obj("a", "o15", "x"),
            Bytes::new(),
        ));
        assert_eq!(second.rx.try_recv().unwrap().rv(), 15);
        assert_eq!(second.current_rv(), 15);
        // Older than the ring: storage history (or 410) instead.
        assert!(matches!(mux.join(&r, 9, None, spec()), Joined::NotCovered));
        // The last watcher leaving ends the shared stream.
        drop(first);
        assert!(mux.running(&r));
        drop(second);
        assert!(!mux.running(&r));
    }
}
