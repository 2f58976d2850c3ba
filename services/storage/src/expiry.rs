//! The expiry sweeper: deletes objects whose time to live ran out (upstream: kube-apiserver
//! `--event-ttl`, an etcd lease attached on every create and update of an event,
//! pkg/registry/core/event/storage/storage.go `TTLFunc`; etcd deletes the key when the lease
//! ends and watchers receive DELETED).
//!
//! Where it sits: not on the request path. A write with `ttl_seconds` > 0 records the object's
//! expiry in its triple's `:ttl` sorted set (keys.rs, lua/expiry.lua). Every storage replica
//! runs [`run`]: each `--expiry-sweep-period` it walks the triples that have such a set with
//! Redis `SCAN MATCH cp:{*}:ttl COUNT …` (never KEYS; one connection, as `ScanResources`
//! walks the ordered indexes) and runs lua/expire.lua on each, which deletes up to
//! [`BATCH`] due objects per call through the same delete as `Delete` (lua/remove.lua:
//! object, indexes, DELETED history entry and pub/sub event, new revision). Several replicas
//! sweeping at once are harmless: the script reads the due members atomically, so an object
//! is deleted once, and one whose expiry an update moved out is not due.
//!
//! The watch history these deletes append to is bounded like every other write's: by age
//! (`--history-window`) and by length (`--history-len`, XADD MAXLEN) in lua/prelude.lua, so
//! expiring objects never grow it without bound.

use crate::keys::Keyspace;
use crate::store::Store;
use crdplane_core::ApiError;
use crdplane_proto::v1::ResourceRef;
use std::time::Duration;

/// Default `--expiry-sweep-period`.
pub const DEFAULT_PERIOD: Duration = Duration::from_secs(10);
/// Objects deleted per script call (one atomic step; the sweeper calls again while more are due).
pub const BATCH: usize = 256;
/// SCAN COUNT hint per step over the expiry sets: SCAN MATCH still visits every key of the
/// database, so large steps keep a sweep to few round trips (1,000 keys per call, each call
/// a few hundred microseconds of Redis time).
const SCAN_COUNT: usize = 1000;

/// Sweeps every `period` until the process ends (`period` zero: never).
pub async fn run(store: Store, period: Duration) {
    if period.is_zero() {
        return;
    }
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match sweep(&store).await {
            Ok(0) => {}
            Ok(n) => tracing::debug!(deleted = n, "expiry sweep"),
            // Redis unreachable or writes refused: the next period tries again.
            Err(e) => tracing::debug!(error = %e.message, "expiry sweep failed"),
        }
    }
}

/// One sweep over every triple with objects that expire; the number of objects deleted.
pub async fn sweep(store: &Store) -> Result<u64, ApiError> {
    let mut cursor = 0u64;
    let mut deleted = 0u64;
    loop {
        let (found, next) = store.scan_expiring(cursor, SCAN_COUNT).await?;
        for (tenant, group, resource) in found {
            let Ok(ks) = Keyspace::new(&ResourceRef {
                tenant,
                group,
                resource,
            }) else {
                continue;
            };
            loop {
                let (n, due) = store.expire(&ks, BATCH).await?;
                deleted += n;
                if due < BATCH {
                    break;
                }
            }
        }
        if next == 0 {
            return Ok(deleted);
        }
        cursor = next;
    }
}
