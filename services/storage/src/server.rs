//! The tonic `Storage` service: gRPC requests → `Store` (Redis) and `Hub` (live events).
//!
//! `PurgeTenant` (the gateway's tenant purge controller, for a Tenant being deleted) empties
//! a tenant one SCAN step at a time: each (group, resource) found loses its objects through
//! the normal delete ([`Store::delete`]: DELETED events, change notifications), then its keys
//! but the revision counter ([`Store::drop_keyspace`]).

use crate::filter::{Filter, Transition};
use crate::keys::{Keyspace, changes_channel};
use crate::store::{AtRevision, NewObject, Store, Stored, Write};
use crate::watch::{Hub, is_resubscribed, parse_event};
use bytes::Bytes;
use crdplane_core::ApiError;
use crdplane_proto::GrpcStatusExt;
use crdplane_proto::v1 as pb;
use crdplane_proto::v1::storage_server::Storage;
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::{broadcast, mpsc};
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

/// Largest page one List call reads from Redis at a time when filtering.
const SCAN_CHUNK: usize = 1000;

/// Rounds of deleting a purged resource's objects and dropping its keys before a
/// `PurgeTenant` call gives up on a resource that is still being written to (409 Conflict;
/// the caller retries the step).
const PURGE_ROUNDS: usize = 3;

/// The `crdplane.v1.Storage` gRPC service: requests go to the Redis store, watches to the hub.
pub struct StorageService {
    /// Redis-backed reads and writes.
    pub store: Store,
    /// Live-event fan-out from Redis pub/sub to watch streams.
    pub hub: Arc<Hub>,
}

/// Largest GetMany batch accepted (the gateway sends at most 256).
pub const MAX_GET_MANY: usize = 1024;

/// Largest CreateMany batch accepted (the gateway sends at most 256).
pub const MAX_CREATE_MANY: usize = 1024;

fn ks(r: &Option<pb::ResourceRef>) -> Result<Keyspace, Status> {
    let r = r
        .as_ref()
        .ok_or_else(|| ApiError::bad_request("missing resource").to_grpc())?;
    Keyspace::new(r).map_err(crdplane_proto::status::to_grpc)
}

fn key_parts(k: &Option<pb::ObjectKey>) -> Result<(Keyspace, String, String), Status> {
    let k = k
        .as_ref()
        .ok_or_else(|| ApiError::bad_request("missing key").to_grpc())?;
    if k.name.is_empty() || k.name.contains('/') || k.namespace.contains('/') {
        return Err(ApiError::bad_request(format!(
            "invalid object key {:?}/{:?}",
            k.namespace, k.name
        ))
        .to_grpc());
    }
    Ok((ks(&k.resource)?, k.namespace.clone(), k.name.clone()))
}

/// Largest object stored: etcd's default request size limit (`--max-request-bytes`,
/// 1.5 MiB, etcd `server/embed/config.go` `DefaultMaxRequestBytes`), which bounds every
/// object kube-apiserver writes. Upstream stores custom resources as JSON, so their JSON
/// size is what etcd sees (built-in types and CRDs go as protobuf, a little smaller).
pub const MAX_OBJECT_BYTES: usize = 1536 * 1024;

/// What kube-apiserver answers for an object over etcd's limit: etcd's gRPC error text,
/// passed through `responsewriters.ErrorNegotiated` → `ErrorToAPIStatus` as a non-Status
/// error (500, reason "", the error's text; kubernetes/kubernetes#112152 tracks mapping it
/// to a better code).
pub fn request_too_large() -> ApiError {
    ApiError::new(
        crdplane_core::Reason::Unknown,
        "etcdserver: request is too large",
    )
}

fn write_parts(w: &Option<pb::ObjectWrite>) -> Result<(&[u8], &[u8]), Status> {
    let w = w
        .as_ref()
        .ok_or_else(|| ApiError::bad_request("missing object").to_grpc())?;

    if !w.head.ends_with(b"\"resourceVersion\":\"") || !w.tail.starts_with(b"\"") {
        return Err(
            ApiError::bad_request("object is not split at the resourceVersion slot").to_grpc(),
        );
    }
    json_object(&w.head, &w.tail)?;
    Ok((&w.head, &w.tail))
}

/// Refuses a write whose bytes, with a revision in the slot, are not one JSON object: a
/// caller that bypasses the gateway (or a bug in it) must not store what every later read of
/// the resource would fail to parse. One pass of serde_json's validating parser over a copy
/// of the object, without building it: about 0.4 µs for a 1 KiB object in a release build on
/// the 2-core development VM (a chained `io::Read` over the two parts instead took 3.2 µs).
fn json_object(head: &[u8], tail: &[u8]) -> Result<(), Status> {
    use serde::de::IgnoredAny;
    let starts_as_object = head
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|b| *b == b'{');
    let mut whole = Vec::with_capacity(head.len() + 1 + tail.len());
    whole.extend_from_slice(head);
    whole.push(b'0');
    whole.extend_from_slice(tail);
    let mut de = serde_json::Deserializer::from_slice(&whole);
    let parsed = serde::Deserialize::deserialize(&mut de)
        .map(|_: IgnoredAny| ())
        .and_then(|()| de.end());
    match parsed {
        Ok(()) if starts_as_object => Ok(()),
        Ok(()) => Err(ApiError::bad_request("object is not a JSON object").to_grpc()),
        Err(e) => Err(ApiError::bad_request(format!("object is not valid JSON: {e}")).to_grpc()),
    }
}

/// An object that is really written (not a dry run) must fit etcd's limit; a dry run never
/// reaches etcd upstream, so it is not checked.
fn check_size(head: &[u8], tail: &[u8]) -> Result<(), Status> {
    if head.len() + tail.len() > MAX_OBJECT_BYTES {
        return Err(request_too_large().to_grpc());
    }
    Ok(())
}

fn out(s: Stored) -> Response<pb::StoredObject> {
    Response::new(pb::StoredObject {
        json: s.json,
        resource_version: s.rv,
    })
}

/// The answer to a dry-run write: the object as it would be stored. A dry-run create has no
/// resourceVersion yet, and upstream leaves the field out rather than sending `""`
/// (apiserver `pkg/registry/generic/registry/dryrun.go` Create copies the unstored object;
/// apimachinery `unstructured.go` SetResourceVersion("") removes `metadata.resourceVersion`).
fn dry(head: &[u8], tail: &[u8], rv: u64) -> Response<pb::StoredObject> {
    let json = if rv == 0 {
        without_resource_version(head, tail)
    } else {
        crdplane_core::rvslot::join(head, rv, tail)
    };
    Response::new(pb::StoredObject {
        json: json.into(),
        resource_version: rv,
    })
}

/// `head + tail` with the empty `"resourceVersion":""` member (the slot) cut out.
fn without_resource_version(head: &[u8], tail: &[u8]) -> Vec<u8> {
    // head ends with `"resourceVersion":"` (checked by write_parts), tail starts with `"`.
    let mut h = &head[..head.len() - b"\"resourceVersion\":\"".len()];
    let mut t = &tail[1..];
    if h.ends_with(b",") {
        h = &h[..h.len() - 1];
    } else if t.starts_with(b",") {
        t = &t[1..];
    }
    let mut v = h.to_vec();
    v.extend_from_slice(t);
    v
}

/// How long a list waits for the revision to reach a requested resourceVersion before
/// answering 504 (upstream cacher `blockTimeout`, watch_cache.go).
const BLOCK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);
/// Attempts of a multi-chunk list to read all its chunks at one revision.
const CONSISTENT_ATTEMPTS: usize = 5;
/// Redis key of the continue-token HMAC key shared by every gateway replica.
const CONTINUE_KEY: &str = "cp:secret:continue-key";

/// Upstream `NewTooLargeResourceVersionError` (apiserver pkg/storage/errors.go) with the
/// cacher's retry hint `resourceVersionTooHighRetrySeconds` = 1.
pub fn too_large_resource_version(wanted: u64, current: u64) -> ApiError {
    let mut e = ApiError::new(
        crdplane_core::Reason::Timeout,
        format!("Timeout: Too large resource version: {wanted}, current: {current}"),
    );
    e.details = Some(Box::new(crdplane_core::status::StatusDetails {
        causes: vec![crdplane_core::status::StatusCause {
            type_: "ResourceVersionTooLarge".into(),
            message: "Too large resource version".into(),
            field: String::new(),
        }],
        retry_after_seconds: 1,
        ..Default::default()
    }));
    e
}

/// Upstream etcd3 `interpretListError` text for a list at a compacted revision.
pub const LIST_TOO_OLD: &str = "The resourceVersion for the provided list is too old.";
/// Upstream etcd3 `continueExpired` (the gateway answers continue requests with the
/// `inconsistentContinue` variant and a fresh token).
pub const CONTINUE_TOO_OLD: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.";

/// Which state a list reads (see `ListRequest` in storage.proto).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReadAt {
    Latest,
    Exact(u64),
    Continue(u64),
}

/// Why a read could not be served at the wanted revision.
#[derive(Debug, PartialEq, Eq)]
enum Inconsistent {
    /// A write after the revision touched the keys the read covers.
    Changed,
    /// The history no longer reaches back to the revision.
    Gone,
}

impl StorageService {
    /// Deletes every object of `ks` (all namespaces) one by one through [`Store::delete`], as
    /// `DeleteCollection` does, so each gets its DELETED event and change notification; an
    /// object deleted meanwhile (404) is skipped. The number deleted.
    async fn delete_all(&self, ks: &Keyspace) -> Result<u64, ApiError> {
        let mut deleted = 0;
        let mut cursor = String::new();
        loop {
            let page = self
                .store
                .list_page(ks, "", &cursor, Some(SCAN_CHUNK))
                .await?;
            let n = page.items.len();
            for (k, _) in page.items {
                let (ns, name) = k.split_once('/').unwrap_or(("", &k));
                match self.store.delete(ks, ns, name, 0).await {
                    Ok(_) => deleted += 1,
                    Err(e) if e.code == 404 => {}
                    Err(e) => return Err(e),
                }
                cursor = k;
            }
            if n == 0 || page.remaining == 0 {
                return Ok(deleted);
            }
        }
    }

    /// Purges one resource of a tenant: every object deleted ([`Self::delete_all`]), then
    /// every key but the revision counter dropped ([`Store::drop_keyspace`], refused while an
    /// object exists: one written meanwhile is deleted by the next round). (objects
    /// deleted, keys dropped); harmless to repeat.
    async fn purge_keyspace(&self, ks: &Keyspace) -> Result<(u64, u64), ApiError> {
        let mut deleted = 0;
        for _ in 0..PURGE_ROUNDS {
            deleted += self.delete_all(ks).await?;
            if let Some(dropped) = self.store.drop_keyspace(ks).await? {
                return Ok((deleted, dropped));
            }
        }
        Err(ApiError::new(
            crdplane_core::Reason::Conflict,
            format!(
                "tenant {:?}: {} are still being written; try again",
                ks.tenant, ks.gr
            ),
        ))
    }

    /// Waits (up to [`BLOCK_TIMEOUT`]) until the resource's revision reaches `target`.
    async fn wait_fresh(&self, ks: &Keyspace, target: u64) -> Result<(), ApiError> {
        let start = std::time::Instant::now();
        loop {
            let cur = self.store.revision(ks).await?;
            if cur >= target {
                return Ok(());
            }
            if start.elapsed() >= BLOCK_TIMEOUT {
                return Err(too_large_resource_version(target, cur));
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
    }

    /// Reads pages until `limit` matching objects are collected (0 = all), at `at`.
    async fn list_filtered(
        &self,
        ks: &Keyspace,
        filter: &Filter,
        limit: usize,
        start_after: &str,
        at: ReadAt,
    ) -> Result<pb::ListResponse, ApiError> {
        let (rev, too_old) = match at {
            ReadAt::Latest => (0, LIST_TOO_OLD),
            ReadAt::Exact(n) => (n, LIST_TOO_OLD),
            ReadAt::Continue(n) => (n, CONTINUE_TOO_OLD),
        };
        if rev > 0 {
            match self.read_at(ks, filter, limit, start_after, rev).await? {
                Ok(r) => return Ok(r),
                Err(Inconsistent::Gone) => return Err(ApiError::expired(too_old)),
                Err(Inconsistent::Changed) if matches!(at, ReadAt::Exact(_)) => {
                    return Err(ApiError::expired(too_old));
                }
                // A continue page whose keys changed since the token's revision: the current
                // state of the keys after the token's key, still reported at its revision.
                Err(Inconsistent::Changed) => {}
            }
        }
        let mut r = self.read_latest(ks, filter, limit, start_after).await?;
        if rev > 0 {
            r.resource_version = rev;
        }
        Ok(r)
    }

    /// The most recent state; a multi-chunk read is retried until all chunks are of one
    /// revision (the last attempt takes what it gets).
    async fn read_latest(
        &self,
        ks: &Keyspace,
        filter: &Filter,
        limit: usize,
        start_after: &str,
    ) -> Result<pb::ListResponse, ApiError> {
        if filter.is_single_name() && !filter.namespace.is_empty() {
            return match self.single(ks, filter, start_after, 0).await? {
                Ok(r) => Ok(r),
                Err(_) => Err(ApiError::internal("unreachable: no revision to check")),
            };
        }
        for _ in 1..CONSISTENT_ATTEMPTS {
            if let Ok(r) = self.scan(ks, filter, limit, start_after, 0, true).await? {
                return Ok(r);
            }
        }
        match self.scan(ks, filter, limit, start_after, 0, false).await? {
            Ok(r) => Ok(r),
            Err(_) => Err(ApiError::internal("unreachable: unchecked scan")),
        }
    }

    /// The state at revision `rev`, if nothing after `rev` touched the keys read.
    async fn read_at(
        &self,
        ks: &Keyspace,
        filter: &Filter,
        limit: usize,
        start_after: &str,
        rev: u64,
    ) -> Result<Result<pb::ListResponse, Inconsistent>, ApiError> {
        if filter.is_single_name() && !filter.namespace.is_empty() {
            return self.single(ks, filter, start_after, rev).await;
        }
        self.scan(ks, filter, limit, start_after, rev, true).await
    }

    /// A list of one namespaced name (fieldSelector metadata.name=…): one GET.
    async fn single(
        &self,
        ks: &Keyspace,
        filter: &Filter,
        start_after: &str,
        rev: u64,
    ) -> Result<Result<pb::ListResponse, Inconsistent>, ApiError> {
        let ns = filter.namespace.clone();
        let key = crate::keys::object_key(&ns, &filter.name);
        let mut items = Vec::new();
        if start_after.is_empty() || key.as_str() > start_after {
            match self.store.get(ks, &ns, &filter.name).await {
                Ok(s) if filter.matches(&key, &s.json) => items.push(s.json),
                Ok(_) => {}
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        // Read after the object: the revision, and (for `rev`) whether the object was
        // written since — if not, what we read is its state at `rev`.
        let probe = self
            .store
            .list_page_at(ks, &ns, start_after, Some(0), rev)
            .await?;
        let revision = if rev > 0 {
            if rev < probe.revision {
                match &probe.later {
                    Some(l) if l.first_rv == rev + 1 => {
                        if l.keys.contains(&key) {
                            return Ok(Err(Inconsistent::Changed));
                        }
                    }
                    _ => return Ok(Err(Inconsistent::Gone)),
                }
            }
            rev
        } else {
            probe.revision
        };
        Ok(Ok(pb::ListResponse {
            items,
            resource_version: revision,
            ..Default::default()
        }))
    }

    /// One attempt at a (possibly multi-chunk) list. Every chunk is checked (when `check`)
    /// to be the state at `rev` (0 = at the first chunk's revision): a write after it to a
    /// key the rest of the list covers makes the attempt `Inconsistent`.
    async fn scan(
        &self,
        ks: &Keyspace,
        filter: &Filter,
        limit: usize,
        start_after: &str,
        rev: u64,
        check: bool,
    ) -> Result<Result<pb::ListResponse, Inconsistent>, ApiError> {
        let mut items = Vec::new();
        let mut cursor = start_after.to_string();
        let mut revision = if rev > 0 { Some(rev) } else { None };
        let unfiltered = filter.is_plain();
        if limit == 0 {
            // The whole collection: one atomic read, filtered here.
            let at = if check { rev } else { 0 };
            let page = self
                .store
                .list_all(ks, &filter.namespace, start_after, at)
                .await?;
            match page.consistent_at(at, &filter.namespace, start_after) {
                AtRevision::Same => {}
                AtRevision::Changed => return Ok(Err(Inconsistent::Changed)),
                AtRevision::Gone => return Ok(Err(Inconsistent::Gone)),
            }
            let items = page
                .items
                .into_iter()
                .filter(|(k, s)| unfiltered || filter.matches(k, &s.json))
                .map(|(_, s)| s.json)
                .collect();
            return Ok(Ok(pb::ListResponse {
                items,
                resource_version: if rev > 0 { rev } else { page.revision },
                ..Default::default()
            }));
        }
        loop {
            let want = if limit == 0 {
                SCAN_CHUNK
            } else {
                (limit - items.len()).min(SCAN_CHUNK)
            };
            let want = if unfiltered { want } else { SCAN_CHUNK };
            let at = if check { revision.unwrap_or(0) } else { 0 };
            let page = self
                .store
                .list_page_at(
                    ks,
                    &filter.namespace,
                    &cursor,
                    if limit == 0 && unfiltered {
                        None
                    } else {
                        Some(want)
                    },
                    at,
                )
                .await?;
            match page.consistent_at(at, &filter.namespace, &cursor) {
                AtRevision::Same => {}
                AtRevision::Changed => return Ok(Err(Inconsistent::Changed)),
                AtRevision::Gone => return Ok(Err(Inconsistent::Gone)),
            }
            revision.get_or_insert(page.revision);
            let n = page.items.len();
            for (i, (k, s)) in page.items.into_iter().enumerate() {
                if filter.matches(&k, &s.json) {
                    items.push(s.json);
                }
                cursor = k;
                if limit != 0 && items.len() == limit {
                    let more = page.remaining + (n - i - 1) as u64;
                    let next = if more > 0 {
                        cursor.clone()
                    } else {
                        String::new()
                    };
                    return Ok(Ok(pb::ListResponse {
                        items,
                        resource_version: revision.unwrap_or(0),
                        next_start_after: next,
                        // Upstream only reports the count when no selector filters it.
                        remaining_item_count: if unfiltered { more } else { 0 },
                        has_remaining_item_count: unfiltered && more > 0,
                    }));
                }
            }
            if page.remaining == 0 || n == 0 || (limit == 0 && unfiltered) {
                break;
            }
        }
        Ok(Ok(pb::ListResponse {
            items,
            resource_version: revision.unwrap_or(0),
            ..Default::default()
        }))
    }
}

/// Sends the history events after `last` that `filter` lets through, advancing `last`;
/// 410 Expired when the history no longer reaches back to `last` (upstream etcd3
/// `watcher.go`: a compacted start revision ends the watch with "too old resource
/// version"). False when the client went away.
///
/// `delivered`: `last` is a revision this watch already sent (a resume after an outage),
/// not one a client asked for. Such a revision above the store's current one was handed out
/// and then lost (a failover to a replica that had not received it, a restart without
/// persistence) before the recovery epoch raised the counter: the client holds objects the
/// store no longer has, so the watch ends with 410 and the client lists again. A client's
/// own future revision instead just waits for the store to reach it.
async fn replay(
    store: &Store,
    hub: &Hub,
    ks: &Keyspace,
    filter: &Filter,
    tx: &mpsc::Sender<Result<pb::WatchEvent, Status>>,
    last: &mut u64,
    delivered: bool,
) -> Result<bool, ApiError> {
    let current = store.revision(ks).await?;
    if delivered && *last > current {
        return Err(ApiError::expired(format!(
            "too old resource version: {} ({current})",
            *last
        )));
    }
    if *last >= current {
        return Ok(true);
    }
    // Resumable only from an unbroken history (store.rs `resume_check`).
    if let Err(oldest) = store.resume_check(ks, *last).await? {
        let m = oldest.unwrap_or(current + 1).saturating_sub(1);
        return Err(ApiError::expired(format!(
            "too old resource version: {} ({m})",
            *last
        )));
    }
    loop {
        let evs = hub.history_after(&ks.ev, *last, SCAN_CHUNK).await?;
        if evs.is_empty() {
            return Ok(true);
        }
        for e in evs {
            *last = e.rv;
            if let Some(ev) = outgoing(filter, e)
                && tx.send(Ok(ev)).await.is_err()
            {
                return Ok(false);
            }
        }
    }
}

/// Longest time a watch waits for Redis to serve its history again after its live events
/// were interrupted (a Redis Cluster failover takes a few seconds: the cluster's node
/// timeout plus the election) before it ends with 503 and its client re-watches.
const OUTAGE_REPLAY_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// [`replay`] after the live events were interrupted: while Redis answers 503 (the shard is
/// failing over), tries again with backoff, up to [`OUTAGE_REPLAY_PATIENCE`], so the watch
/// goes on without a gap instead of ending. Live events that arrive meanwhile wait in the
/// channel's buffer and are skipped up to the replayed revision.
async fn replay_after_outage(
    store: &Store,
    hub: &Hub,
    ks: &Keyspace,
    filter: &Filter,
    tx: &mpsc::Sender<Result<pb::WatchEvent, Status>>,
    last: &mut u64,
) -> Result<bool, ApiError> {
    let started = tokio::time::Instant::now();
    let mut delay = std::time::Duration::from_millis(50);
    loop {
        match replay(store, hub, ks, filter, tx, last, true).await {
            Err(e) if e.code == 503 && started.elapsed() < OUTAGE_REPLAY_PATIENCE => {
                tokio::select! {
                    _ = tx.closed() => return Ok(false),
                    _ = tokio::time::sleep(delay) => {}
                }
                delay = (delay * 2).min(std::time::Duration::from_secs(1));
            }
            r => return r,
        }
    }
}

type EventStream = Pin<Box<dyn Stream<Item = Result<pb::WatchEvent, Status>> + Send>>;
type ChangeStream = Pin<Box<dyn Stream<Item = Result<pb::Change, Status>> + Send>>;

/// The gRPC event a watcher with `filter` gets for a stored event (None = nothing).
///
/// Namespace and name are always decided here, by the event's key: a namespaced watch never
/// sees another namespace's objects, whether the event comes from history (replay from a
/// resourceVersion) or live (upstream: the cacher's and etcd3 watcher's key prefix and
/// `filterWithAttrsFunction`, `staging/src/k8s.io/apiserver/pkg/storage/cacher/cacher.go`,
/// `.../storage/etcd3/watcher.go`). Without selectors the event then goes out as stored,
/// with the previous state of a MODIFIED for the consumer's own filtering; with selectors,
/// transitions are applied here.
pub fn outgoing(filter: &Filter, e: crate::watch::LiveEvent) -> Option<pb::WatchEvent> {
    let (ns, name) = e.key.split_once('/').unwrap_or(("", &e.key));
    if !filter.matches_key(ns, name) {
        return None;
    }
    let (kind, object, prev) = if filter.is_key_only() {
        (e.kind, e.json, e.prev)
    } else {
        match filter.transition(e.kind, &e.key, &e.json, &e.prev)? {
            Transition::Same => (e.kind, e.json, Bytes::new()),
            Transition::Added => (b'A', e.json, Bytes::new()),
            Transition::DeletedPrev => (b'D', e.prev, Bytes::new()),
        }
    };
    Some(pb::WatchEvent {
        r#type: event_type(kind),
        object,
        resource_version: e.rv,
        prev_object: prev,
    })
}

fn event_type(kind: u8) -> i32 {
    (match kind {
        b'A' => pb::watch_event::Type::Added,
        b'D' => pb::watch_event::Type::Deleted,
        _ => pb::watch_event::Type::Modified,
    }) as i32
}

#[tonic::async_trait]
impl Storage for StorageService {
    async fn get(
        &self,
        req: Request<pb::GetRequest>,
    ) -> Result<Response<pb::StoredObject>, Status> {
        let (ks, ns, name) = key_parts(&req.get_ref().key)?;
        Ok(out(self
            .store
            .get(&ks, &ns, &name)
            .await
            .map_err(crdplane_proto::status::to_grpc)?))
    }

    async fn get_many(
        &self,
        req: Request<pb::GetManyRequest>,
    ) -> Result<Response<pb::GetManyResponse>, Status> {
        let r = req.into_inner();
        if r.keys.len() > MAX_GET_MANY {
            return Err(
                ApiError::bad_request(format!("at most {MAX_GET_MANY} keys per GetMany")).to_grpc(),
            );
        }
        let keys = r
            .keys
            .into_iter()
            .map(|k| key_parts(&Some(k)))
            .collect::<Result<Vec<_>, _>>()?;
        let results = self
            .store
            .get_many(&keys)
            .await
            .map_err(crdplane_proto::status::to_grpc)?
            .into_iter()
            .map(|s| match s {
                Some(s) => pb::GetResult {
                    found: true,
                    json: s.json,
                    resource_version: s.rv,
                },
                None => pb::GetResult::default(),
            })
            .collect();
        Ok(Response::new(pb::GetManyResponse { results }))
    }

    async fn create(
        &self,
        req: Request<pb::CreateRequest>,
    ) -> Result<Response<pb::StoredObject>, Status> {
        let r = req.get_ref();
        let (ks, ns, name) = key_parts(&r.key)?;
        let (head, tail) = write_parts(&r.object)?;
        if r.dry_run {
            if self
                .store
                .exists(&ks, &ns, &name)
                .await
                .map_err(crdplane_proto::status::to_grpc)?
                .is_some()
            {
                return Err(ApiError::already_exists(&ks.gr, &name).to_grpc());
            }
            return Ok(dry(head, tail, 0));
        }
        check_size(head, tail)?;
        Ok(out(self
            .store
            .create(
                &ks,
                &ns,
                &name,
                Write {
                    head,
                    tail,
                    ttl_seconds: r.ttl_seconds,
                },
            )
            .await
            .map_err(crdplane_proto::status::to_grpc)?))
    }

    async fn create_many(
        &self,
        req: Request<pb::CreateManyRequest>,
    ) -> Result<Response<pb::CreateManyResponse>, Status> {
        let reqs = req.into_inner().requests;
        if reqs.len() > MAX_CREATE_MANY {
            return Err(ApiError::bad_request(format!(
                "at most {MAX_CREATE_MANY} requests per CreateMany"
            ))
            .to_grpc());
        }
        // Each item is checked as `create` checks it; the valid, non-dry-run ones go to Redis
        // together, the others are answered on their own.
        let parsed: Vec<Result<_, Status>> = reqs
            .iter()
            .map(|r| {
                let (head, tail) = write_parts(&r.object)?;
                if !r.dry_run {
                    check_size(head, tail)?;
                }
                Ok((key_parts(&r.key)?, (head, tail)))
            })
            .collect();
        let batch: Vec<NewObject<'_>> = parsed
            .iter()
            .zip(&reqs)
            .filter(|(_, r)| !r.dry_run)
            .filter_map(|(p, r)| Some((p.as_ref().ok()?, r.ttl_seconds)))
            .map(|(((ks, ns, name), (head, tail)), ttl)| {
                (ks, ns.as_str(), name.as_str(), *head, *tail, ttl)
            })
            .collect();
        let mut stored = self.store.create_many(&batch).await.into_iter();
        let mut results = Vec::with_capacity(reqs.len());
        for (p, r) in parsed.iter().zip(&reqs) {
            let res: Result<pb::StoredObject, Status> = match p {
                Err(e) => Err(e.clone()),
                Ok(((ks, ns, name), (head, tail))) if r.dry_run => {
                    match self.store.exists(ks, ns, name).await {
                        Ok(Some(_)) => Err(ApiError::already_exists(&ks.gr, name).to_grpc()),
                        Ok(None) => Ok(dry(head, tail, 0).into_inner()),
                        Err(e) => Err(e.to_grpc()),
                    }
                }
                Ok(_) => match stored.next() {
                    Some(Ok(s)) => Ok(out(s).into_inner()),
                    Some(Err(e)) => Err(e.to_grpc()),
                    None => Err(ApiError::internal("storage lost a batched create").to_grpc()),
                },
            };
            results.push(match res {
                Ok(o) => pb::WriteResult {
                    object: Some(o),
                    error: None,
                },
                Err(s) => pb::WriteResult {
                    object: None,
                    error: Some(pb::ItemStatus::from(&s)),
                },
            });
        }
        Ok(Response::new(pb::CreateManyResponse { results }))
    }

    async fn update(
        &self,
        req: Request<pb::UpdateRequest>,
    ) -> Result<Response<pb::StoredObject>, Status> {
        let r = req.get_ref();
        let (ks, ns, name) = key_parts(&r.key)?;
        let (head, tail) = write_parts(&r.object)?;
        if r.dry_run {
            let cur = self
                .store
                .get(&ks, &ns, &name)
                .await
                .map_err(crdplane_proto::status::to_grpc)?;
            if r.expected_resource_version != 0 && r.expected_resource_version != cur.rv {
                return Err(ApiError::stale(&ks.gr, &name).to_grpc());
            }
            return Ok(dry(head, tail, cur.rv));
        }
        check_size(head, tail)?;
        Ok(out(self
            .store
            .update(
                &ks,
                &ns,
                &name,
                Write {
                    head,
                    tail,
                    ttl_seconds: r.ttl_seconds,
                },
                r.expected_resource_version,
            )
            .await
            .map_err(crdplane_proto::status::to_grpc)?))
    }

    async fn delete(
        &self,
        req: Request<pb::DeleteRequest>,
    ) -> Result<Response<pb::StoredObject>, Status> {
        let r = req.get_ref();
        let (ks, ns, name) = key_parts(&r.key)?;
        if r.dry_run {
            return Ok(out(self
                .store
                .get(&ks, &ns, &name)
                .await
                .map_err(crdplane_proto::status::to_grpc)?));
        }
        Ok(out(self
            .store
            .delete(&ks, &ns, &name, r.expected_resource_version)
            .await
            .map_err(crdplane_proto::status::to_grpc)?))
    }

    async fn list(
        &self,
        req: Request<pb::ListRequest>,
    ) -> Result<Response<pb::ListResponse>, Status> {
        let r = req.get_ref();
        let ks = ks(&r.resource)?;
        let filter = Filter::new(&r.namespace, &r.name, &r.label_selector, &r.field_selector)
            .map_err(crdplane_proto::status::to_grpc)?;
        let at = if r.continue_resource_version > 0 {
            ReadAt::Continue(r.continue_resource_version)
        } else if r.exact_resource_version > 0 {
            ReadAt::Exact(r.exact_resource_version)
        } else {
            ReadAt::Latest
        };
        let target = r.min_resource_version.max(r.exact_resource_version);
        if target > 0 {
            self.wait_fresh(&ks, target)
                .await
                .map_err(crdplane_proto::status::to_grpc)?;
        }
        Ok(Response::new(
            self.list_filtered(&ks, &filter, r.limit as usize, &r.start_after, at)
                .await
                .map_err(crdplane_proto::status::to_grpc)?,
        ))
    }

    async fn continue_key(
        &self,
        _req: Request<pb::ContinueKeyRequest>,
    ) -> Result<Response<pb::ContinueKeyResponse>, Status> {
        Ok(Response::new(pb::ContinueKeyResponse {
            key: self
                .store
                .shared_secret(CONTINUE_KEY)
                .await
                .map_err(crdplane_proto::status::to_grpc)?
                .into(),
        }))
    }

    async fn list_dependents(
        &self,
        req: Request<pb::ListDependentsRequest>,
    ) -> Result<Response<pb::ListDependentsResponse>, Status> {
        let r = req.get_ref();
        let ks = ks(&r.resource)?;
        if r.owner_uids.len() > MAX_GET_MANY {
            return Err(ApiError::bad_request(format!(
                "at most {MAX_GET_MANY} owner uids per ListDependents"
            ))
            .to_grpc());
        }
        let limit = match r.limit {
            0 => 500,
            n => n.min(5000) as usize,
        };
        let items = self
            .store
            .dependents(&ks, &r.owner_uids, limit, &r.start_after)
            .await
            .map_err(crdplane_proto::status::to_grpc)?
            .into_iter()
            .map(|(owner_uid, key, s)| pb::Dependent {
                owner_uid,
                key,
                json: s.json,
                resource_version: s.rv,
            })
            .collect();
        Ok(Response::new(pb::ListDependentsResponse { items }))
    }

    async fn scan_resources(
        &self,
        req: Request<pb::ScanResourcesRequest>,
    ) -> Result<Response<pb::ScanResourcesResponse>, Status> {
        let r = req.get_ref();
        let count = match r.count {
            0 => 100,
            n => n.min(10_000) as usize,
        };
        let (found, cursor) = self
            .store
            .scan_resources(r.cursor, count)
            .await
            .map_err(crdplane_proto::status::to_grpc)?;
        let resources = found
            .into_iter()
            .map(|(tenant, group, resource)| pb::ResourceRef {
                tenant,
                group,
                resource,
            })
            .collect();
        Ok(Response::new(pb::ScanResourcesResponse {
            resources,
            cursor,
        }))
    }

    async fn scan_owned(
        &self,
        req: Request<pb::ScanOwnedRequest>,
    ) -> Result<Response<pb::ScanOwnedResponse>, Status> {
        let r = req.get_ref();
        let ks = ks(&r.resource)?;
        let limit = match r.limit {
            0 => 500,
            n => n.min(5000) as usize,
        };
        let (found, repaired, examined, next) = self
            .store
            .scan_owned(&ks, &r.start_after, limit)
            .await
            .map_err(crdplane_proto::status::to_grpc)?;
        let items = found
            .into_iter()
            .map(|(key, s)| pb::Dependent {
                owner_uid: String::new(),
                key,
                json: s.json,
                resource_version: s.rv,
            })
            .collect();
        Ok(Response::new(pb::ScanOwnedResponse {
            items,
            next_start_after: next,
            repaired,
            examined: examined as u32,
        }))
    }

    async fn purge_tenant(
        &self,
        req: Request<pb::PurgeTenantRequest>,
    ) -> Result<Response<pb::PurgeTenantResponse>, Status> {
        let r = req.get_ref();
        // A DNS label holds no glob characters for the SCAN pattern, nor `|` / `}`.
        let invalid = crdplane_core::validation::is_dns1123_label(&r.tenant);
        if !invalid.is_empty() {
            return Err(crdplane_proto::status::to_grpc(ApiError::bad_request(
                format!("invalid tenant {:?}: {}", r.tenant, invalid.join(", ")),
            )));
        }
        let count = match r.count {
            0 => 100,
            n => n.min(10_000) as usize,
        };
        let (found, cursor) = self
            .store
            .scan_tenant(&r.tenant, r.cursor, count)
            .await
            .map_err(crdplane_proto::status::to_grpc)?;
        let (mut deleted, mut dropped) = (0, 0);
        for (tenant, group, resource) in found {
            // Every stored key was named by a valid reference; anything else is not ours.
            let Ok(ks) = Keyspace::new(&pb::ResourceRef {
                tenant,
                group,
                resource,
            }) else {
                continue;
            };
            let (d, k) = self
                .purge_keyspace(&ks)
                .await
                .map_err(crdplane_proto::status::to_grpc)?;
            deleted += d;
            dropped += k;
        }
        if deleted > 0 || dropped > 0 {
            tracing::info!(tenant = %r.tenant, deleted, dropped, cursor, "tenant purge step");
        }
        Ok(Response::new(pb::PurgeTenantResponse {
            cursor,
            deleted,
            dropped,
        }))
    }

    async fn delete_collection(
        &self,
        req: Request<pb::DeleteCollectionRequest>,
    ) -> Result<Response<pb::DeleteCollectionResponse>, Status> {
        let r = req.get_ref();
        let ks = ks(&r.resource)?;
        let filter = Filter::new(&r.namespace, "", &r.label_selector, &r.field_selector)
            .map_err(crdplane_proto::status::to_grpc)?;
        let mut deleted = Vec::new();
        let mut last_rv = 0;
        let mut cursor = String::new();
        loop {
            let page = self
                .store
                .list_page(&ks, &filter.namespace, &cursor, Some(SCAN_CHUNK))
                .await
                .map_err(crdplane_proto::status::to_grpc)?;
            let n = page.items.len();
            last_rv = last_rv.max(page.revision);
            for (k, s) in page.items {
                cursor = k.clone();
                if !filter.matches(&k, &s.json) {
                    continue;
                }
                let (ns, name) = k.split_once('/').unwrap_or(("", &k));
                if r.dry_run {
                    deleted.push(s.json);
                    continue;
                }
                match self.store.delete(&ks, ns, name, 0).await {
                    Ok(d) => {
                        last_rv = last_rv.max(d.rv);
                        deleted.push(d.json);
                    }
                    Err(e) if e.code == 404 => {}
                    Err(e) => return Err(e.to_grpc()),
                }
            }
            if n == 0 || page.remaining == 0 {
                break;
            }
        }
        Ok(Response::new(pb::DeleteCollectionResponse {
            items: deleted,
            resource_version: last_rv,
        }))
    }

    type WatchStream = EventStream;

    async fn watch(
        &self,
        req: Request<pb::WatchRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let r = req.into_inner();
        let ks = ks(&r.resource)?;
        let filter = Filter::new(&r.namespace, &r.name, &r.label_selector, &r.field_selector)
            .map_err(crdplane_proto::status::to_grpc)?;
        // Subscribe before reading state or history, so nothing falls between the two.
        let mut live = self.hub.subscribe(&ks.channel).await.map_err(|e| {
            tracing::warn!(error = %e, "watch subscription failed");
            crate::store::backend_unavailable().to_grpc()
        })?;
        let (tx, rx) = mpsc::channel::<Result<pb::WatchEvent, Status>>(256);
        let store = self.store.clone();
        let hub = self.hub.clone();
        tokio::spawn(async move {
            let _watching = crate::metrics::WatchGuard::new();
            let result: Result<(), ApiError> = async {
                let mut last = r.from_resource_version;
                if r.send_initial_state {
                    let mut cursor = String::new();
                    let mut revision = None;
                    loop {
                        let page = store.list_page(&ks, &filter.namespace, &cursor, Some(SCAN_CHUNK)).await?;
                        revision.get_or_insert(page.revision);
                        let n = page.items.len();
                        for (k, s) in page.items {
                            cursor = k.clone();
                            if filter.matches(&k, &s.json) {
                                let ev = pb::WatchEvent { r#type: event_type(b'A'), object: s.json, resource_version: s.rv, prev_object: Default::default() };
                                if tx.send(Ok(ev)).await.is_err() {
                                    return Ok(());
                                }
                            }
                        }
                        if n == 0 || page.remaining == 0 {
                            break;
                        }
                    }
                    last = revision.unwrap_or(0);
                    let progress = pb::WatchEvent { r#type: pb::watch_event::Type::Progress as i32, object: Default::default(), resource_version: last, prev_object: Default::default() };
                    if tx.send(Ok(progress)).await.is_err() {
                        return Ok(());
                    }
                } else {
                    let current = store.revision(&ks).await?;
                    if last < current && !replay(&store, &hub, &ks, &filter, &tx, &mut last, false).await? {
                        return Ok(());
                    }
                }
                loop {
                    tokio::select! {
                        _ = tx.closed() => return Ok(()),
                        m = live.recv() => match m {
                            // The pub/sub connection was lost and is back: events published
                            // meanwhile come from the history (or 410 when it no longer
                            // reaches back), then live ones continue.
                            Ok(payload) if is_resubscribed(&payload) => {
                                if !replay_after_outage(&store, &hub, &ks, &filter, &tx, &mut last).await? {
                                    return Ok(());
                                }
                            }
                            Ok(payload) => {
                                let Some(e) = parse_event(&payload) else { continue };
                                if e.rv <= last {
                                    continue;
                                }
                                last = e.rv;
                                if let Some(ev) = outgoing(&filter, e) {
                                    if tx.send(Ok(ev)).await.is_err() {
                                        return Ok(());
                                    }
                                    crate::metrics::WATCH_EVENTS.inc();
                                }
                            }
                            // Too slow: close; the client resumes from its last revision.
                            Err(broadcast::error::RecvError::Lagged(_)) => {
                                crate::metrics::WATCH_LAGGED.inc();
                                return Ok(());
                            }
                            Err(broadcast::error::RecvError::Closed) => return Ok(()),
                        }
                    }
                }
            }
            .await;
            if let Err(e) = result {
                let _ = tx.send(Err(e.to_grpc())).await;
            }
            drop(live);
            hub.release(&ks.channel).await;
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    type ChangesStream = ChangeStream;

    async fn changes(
        &self,
        req: Request<pb::ChangesRequest>,
    ) -> Result<Response<Self::ChangesStream>, Status> {
        let r = req.into_inner();
        let channel = changes_channel(&r.group, &r.resource);
        let mut live = self.hub.subscribe(&channel).await.map_err(|e| {
            tracing::warn!(error = %e, "watch subscription failed");
            crate::store::backend_unavailable().to_grpc()
        })?;
        let (tx, rx) = mpsc::channel(1024);
        let hub = self.hub.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tx.closed() => break,
                    m = live.recv() => match m {
                        // Changes may have been missed while the pub/sub connection was
                        // down: end the stream, so the consumer drops its cache.
                        Ok(p) if is_resubscribed(&p) => break,
                        Ok(p) => {
                            let s = String::from_utf8_lossy(&p);
                            let mut it = s.splitn(3, '\n');
                            let (Some(tenant), Some(key), Some(rv)) = (it.next(), it.next(), it.next()) else { continue };
                            let (ns, name) = key.split_once('/').unwrap_or(("", key));
                            let c = pb::Change { tenant: tenant.into(), namespace: ns.into(), name: name.into(), resource_version: rv.parse().unwrap_or(0) };
                            if tx.send(Ok(c)).await.is_err() { break; }
                        }
                        // A cache that missed changes must drop everything: end the stream.
                        Err(_) => break,
                    }
                }
            }
            drop(live);
            hub.release(&channel).await;
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watch::LiveEvent;

    /// Only one JSON object, whole, is stored: what `rvslot::split` makes passes; bytes
    /// that are not JSON, trailing garbage, and a JSON value that is not an object are 400s.
    #[test]
    fn writes_must_be_one_json_object() {
        let (head, tail) =
            crdplane_core::rvslot::split(&serde_json::json!({"kind":"W","metadata":{"name":"n"}}))
                .unwrap();
        assert!(json_object(&head, &tail).is_ok());
        let slot = b"\"resourceVersion\":\"".to_vec();
        for (head, tail, want) in [
            (
                b"{\"a\":1,\"metadata\":{".to_vec(),
                b"\"}} trailing".to_vec(),
                "object is not valid JSON: trailing characters",
            ),
            (
                b"{\"a\":\x01,\"metadata\":{".to_vec(),
                b"\"}}".to_vec(),
                "object is not valid JSON",
            ),
            (
                b"[{\"metadata\":{".to_vec(),
                b"\"}}]".to_vec(),
                "object is not a JSON object",
            ),
            (
                b"not json {".to_vec(),
                b"\"}".to_vec(),
                "object is not valid JSON",
            ),
        ] {
            let mut h = head.clone();
            h.extend_from_slice(&slot);
            let e = ApiError::from_grpc(&json_object(&h, &tail).unwrap_err());
            assert_eq!(e.code, 400);
            assert!(
                e.message.starts_with(want),
                "{}: {}",
                String::from_utf8_lossy(&h),
                e.message
            );
        }
    }

    /// A dry-run create answers without `metadata.resourceVersion`, wherever the slot sits.
    #[test]
    fn dry_run_create_has_no_resource_version() {
        let cases = [
            serde_json::json!({"kind":"W","metadata":{"name":"n","namespace":"x"},"spec":{}}),
            serde_json::json!({"metadata":{"resourceVersion":"5"}}),
            serde_json::json!({"kind":"W"}),
            serde_json::json!({"metadata":{"resourceVersion":"","name":"n"}}),
        ];
        for obj in cases {
            let (head, tail) = crdplane_core::rvslot::split(&obj).unwrap();
            let out = dry(&head, &tail, 0).into_inner();
            let got: serde_json::Value = serde_json::from_slice(&out.json).unwrap();
            let mut want = obj.clone();
            let meta = want
                .as_object_mut()
                .unwrap()
                .entry("metadata")
                .or_insert_with(|| serde_json::json!({}));
            meta.as_object_mut().unwrap().remove("resourceVersion");
            assert_eq!(got, want, "{obj}");
            let kept = dry(&head, &tail, 9).into_inner();
            let got: serde_json::Value = serde_json::from_slice(&kept.json).unwrap();
            assert_eq!(got["metadata"]["resourceVersion"], "9");
        }
    }

    fn ev(kind: u8, key: &str, json: &str) -> LiveEvent {
        LiveEvent {
            kind,
            rv: 7,
            key: key.into(),
            json: Bytes::from(json.to_string()),
            prev: Bytes::new(),
        }
    }

    /// Every filter shape × events of its own namespace, another namespace and a
    /// cluster-scoped key: only the watcher's own namespace (or every namespace) gets out.
    #[test]
    fn outgoing_never_crosses_namespaces() {
        let obj = r#"{"metadata":{"labels":{"app":"web"}}}"#;
        let cases: &[(&str, &str, &str, &str, &[&str])] = &[
            // (namespace, name, label, field, keys that go out)
            ("", "", "", "", &["a/x", "b/y", "/c"]),
            ("a", "", "", "", &["a/x"]),
            ("a", "x", "", "", &["a/x"]),
            ("a", "", "app=web", "", &["a/x"]),
            ("a", "", "", "metadata.name=x", &["a/x"]),
            ("b", "", "", "", &["b/y"]),
            ("", "", "app=web", "", &["a/x", "b/y", "/c"]),
            ("", "c", "", "", &["/c"]),
        ];
        for (ns, name, label, field, want) in cases {
            let f = Filter::new(ns, name, label, field).unwrap();
            for kind in [b'A', b'M', b'D'] {
                let got: Vec<&str> = ["a/x", "b/y", "/c"]
                    .into_iter()
                    .filter(|k| outgoing(&f, ev(kind, k, obj)).is_some())
                    .collect();
                assert_eq!(&got, want, "filter {ns:?}/{name:?} {label:?} {field:?}");
            }
        }
    }
}
