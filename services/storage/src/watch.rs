//! Live event fan-out inside one storage replica, and history reads with previous states.
//!
//! One Redis pub/sub connection per replica; each (tenant, resource) channel is subscribed
//! once, on first use, and its messages go to a `tokio::sync::broadcast` that every gRPC
//! watch stream of that channel reads. Event bytes are received from Redis once and shared
//! (`Bytes` slices, no copy per watcher). A watcher that falls behind the broadcast buffer
//! is closed (its client re-watches from its last resourceVersion, served from history).
//!
//! Redis outages: the pub/sub connection is made again after it is lost (see
//! [`Hub::start`]); the channels are subscribed anew and every receiver is told to close the
//! gap from the history by revision, so open watches continue without a gap, or end with
//! 410 Expired when the history no longer reaches back far enough.
//!
//! On a Redis Cluster the triples' channels are *sharded* (SSUBSCRIBE; the scripts SPUBLISH,
//! so an event travels only within the shard that owns its slot) and the cross-tenant change
//! channels classic; both ride the cluster client's RESP3 connections, whose pushes come to
//! [`Hub`]. The client subscribes again after a node's connection is lost and after the slot
//! map changed (failover, resharding); every confirmation of a channel after its first is a
//! resubscription and gets the marker, as above. A shard channel the server drops (its slot
//! moved: `sunsubscribe` push) is subscribed again by the hub, which the client sends to the
//! slot's new owner.
//!
//! Event format (written by `lua/{create,update,delete}.lua`):
//! - pub/sub: `A<rv>\n<key>\n<json>`, `D<rv>\n<key>\n<json>` and
//!   `M<rv>\n<key>\n<len(prev)>\n<prev><json>`;
//! - history stream entry `<rv>-0` with fields `t` (type), `k` (key), `o` (object) and, for
//!   MODIFIED, `p` (previous state at the event's revision); decoded by
//!   [`crate::replies::history`], the one reader of the history for every path.
//!
//! Why the previous state travels with the event instead of a per-replica cache of current
//! objects: a filtered watch resumed from history needs the state *before* each historical
//! event, which a cache of current objects cannot give (upstream's watch cache keeps the
//! previous object with every event for the same reason, and etcd hands it over as PrevKV).
//! Carrying it costs one more copy of the object per MODIFIED in the bounded history, but no
//! replica holds a copy of every object, replicas need no warm-up list, and a restarted
//! replica serves transitions for any revision still in history.

use crate::backend::{Conn, Target};
use bytes::Bytes;
use futures::StreamExt;
use redis::Value;
use redis::aio::PubSubSink;
use redis::cluster_async::ClusterConnection;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::{Mutex, broadcast};

/// One event as published by the write scripts (or read back from history).
#[derive(Debug, Clone, PartialEq)]
pub struct LiveEvent {
    /// Event type byte as the scripts publish it (`b'M'` = MODIFIED, which carries `prev`).
    pub kind: u8,
    /// Revision of the write (the event's resourceVersion).
    pub rv: u64,
    /// `<namespace>/<name>` key of the object.
    pub key: String,
    /// The object's JSON after the write (its last state for DELETED).
    pub json: Bytes,
    /// MODIFIED: the previous state at this event's revision; empty for ADDED/DELETED and
    /// for events written before the previous state was recorded.
    pub prev: Bytes,
}

/// Parses a pub/sub payload; the object bytes are slices of `payload` (no copy).
pub fn parse_event(payload: &Bytes) -> Option<LiveEvent> {
    let kind = *payload.first()?;
    let nl = payload.iter().position(|&b| b == b'\n')?;
    let rv = std::str::from_utf8(&payload[1..nl]).ok()?.parse().ok()?;
    let rest_at = nl + 1;
    let nl2 = rest_at + payload[rest_at..].iter().position(|&b| b == b'\n')?;
    let key = std::str::from_utf8(&payload[rest_at..nl2])
        .ok()?
        .to_string();
    let body_at = nl2 + 1;
    let (prev, json) = if kind == b'M' {
        let nl3 = body_at + payload[body_at..].iter().position(|&b| b == b'\n')?;
        let len: usize = std::str::from_utf8(&payload[body_at..nl3])
            .ok()?
            .parse()
            .ok()?;
        let prev_at = nl3 + 1;
        let json_at = prev_at.checked_add(len)?;
        if json_at > payload.len() {
            return None;
        }
        (payload.slice(prev_at..json_at), payload.slice(json_at..))
    } else {
        (Bytes::new(), payload.slice(body_at..))
    };
    Some(LiveEvent {
        kind,
        rv,
        key,
        json,
        prev,
    })
}

/// Capacity of each channel's broadcast buffer: events a slow receiver may fall behind by
/// before it lags (its watch stream then ends).
pub const BUFFER: usize = 4096;

/// What every receiver of a channel gets after the pub/sub connection was lost and made
/// again and the channel is subscribed anew: messages published meanwhile were missed, so
/// the receiver reads the history after its last revision (an empty payload; real events
/// are never empty).
pub fn is_resubscribed(payload: &Bytes) -> bool {
    payload.is_empty()
}

/// A subscribed channel's broadcast sender, whether Redis confirmed the subscription, and
/// (cluster) how many confirmations came for it: each after the first is a resubscription.
type Channel = (broadcast::Sender<Arc<Bytes>>, bool, u32);

/// Where the live events come from.
enum Source {
    /// One server: a dedicated pub/sub connection, made again by [`Hub::run`] when lost.
    Single {
        client: redis::Client,
        /// The subscribing half of the pub/sub connection; None while it is lost.
        sink: Mutex<Option<PubSubSink>>,
    },
    /// A cluster: the cluster client's connections, pushes read by [`Hub::run_cluster`];
    /// `subscribing` serializes subscription changes as the sink lock does; `conn` is
    /// replaced when the slots change owner ([`Hub::keep_topology`]).
    Cluster {
        conn: std::sync::Mutex<ClusterConnection>,
        subscribing: Mutex<()>,
        seeds: Vec<String>,
    },
}

/// One Redis pub/sub connection shared by all watches of this replica, fanning each channel's
/// live events out to its receivers.
pub struct Hub {
    source: Source,
    /// A multiplexed connection for history reads (`XRANGE` with previous states).
    history: Conn,
    /// channel → (sender, subscription confirmed by Redis, confirmations seen).
    channels: std::sync::Mutex<HashMap<String, Channel>>,
    /// Whether the pub/sub connection is up (readiness).
    connected: AtomicBool,
    /// Bound of one connect or SUBSCRIBE (the storage's Redis timeout).
    timeout: Duration,
}

/// Longest pause between attempts to make the pub/sub connection again.
const MAX_RECONNECT_DELAY: Duration = Duration::from_secs(1);

async fn bounded<T, E: Into<anyhow::Error>>(
    limit: Duration,
    f: impl std::future::Future<Output = Result<T, E>>,
) -> anyhow::Result<T> {
    match tokio::time::timeout(limit, f).await {
        Ok(r) => r.map_err(Into::into),
        Err(_) => anyhow::bail!("redis did not answer within {limit:?}"),
    }
}

impl Hub {
    /// Connects (the first connection must succeed) and keeps the pub/sub connection up:
    /// when it is lost, it is made again and every channel subscribed anew, and each
    /// channel's receivers get the [`is_resubscribed`] marker so they close the gap from
    /// the history (upstream's cacher re-lists and restarts its watchers' from the etcd
    /// watch history the same way: `staging/src/k8s.io/apiserver/pkg/storage/cacher/
    /// reflector` relists, etcd3 `watcher.go` resumes from a revision).
    pub async fn start(target: &Target, timeout: Duration) -> anyhow::Result<Arc<Self>> {
        let url = match target {
            Target::Single(url) => url,
            Target::Cluster(seeds) => return Self::start_cluster(seeds, timeout).await,
        };
        let client = redis::Client::open(url.as_str())?;
        let history = Conn::open(target, timeout).await?;
        let pubsub = bounded(timeout, client.get_async_pubsub()).await?;
        let (sink, stream) = pubsub.split();
        let hub = Arc::new(Self {
            source: Source::Single {
                client,
                sink: Mutex::new(Some(sink)),
            },
            history,
            channels: Default::default(),
            connected: AtomicBool::new(true),
            timeout,
        });
        tokio::spawn(Self::run(Arc::downgrade(&hub), stream));
        Ok(hub)
    }

    /// [`Hub::start`] on a Redis Cluster.
    async fn start_cluster(seeds: &[String], timeout: Duration) -> anyhow::Result<Arc<Self>> {
        let (conn, rx) = Self::cluster_pubsub(seeds, timeout).await?;
        let history = Conn::open(&Target::Cluster(seeds.to_vec()), timeout).await?;
        let hub = Arc::new(Self {
            history,
            source: Source::Cluster {
                conn: std::sync::Mutex::new(conn),
                subscribing: Mutex::new(()),
                seeds: seeds.to_vec(),
            },
            channels: Default::default(),
            connected: AtomicBool::new(true),
            timeout,
        });
        tokio::spawn(Self::run_cluster(Arc::downgrade(&hub), rx));
        tokio::spawn(Self::keep_topology(Arc::downgrade(&hub)));
        Ok(hub)
    }

    /// A cluster connection whose pushes (messages, confirmations) come out of the receiver.
    async fn cluster_pubsub(
        seeds: &[String],
        timeout: Duration,
    ) -> anyhow::Result<(
        ClusterConnection,
        tokio::sync::mpsc::UnboundedReceiver<redis::PushInfo>,
    )> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let client = crate::backend::cluster_client(seeds, timeout, Some(tx))?;
        let conn = bounded(timeout * 2, client.get_async_connection()).await?;
        Ok((conn, rx))
    }

    /// The subscribing cluster connection (cluster hubs only).
    fn cluster_conn(&self) -> Option<ClusterConnection> {
        match &self.source {
            Source::Cluster { conn, .. } => Some(conn.lock().expect("hub lock").clone()),
            Source::Single { .. } => None,
        }
    }

    /// Once a second, reads which master serves which slots (`CLUSTER SLOTS`). When that
    /// changed (a failover, a slot moved), makes the pub/sub connection anew
    /// ([`Hub::resubscribe_all`]). The cluster client follows such a change by itself only
    /// once a command of its own fails, and moves its subscriptions only on a full refresh of
    /// its slot map; a replica that only watches (another replica writes) would otherwise keep
    /// its subscriptions on the dead node, and its watchers would hear nothing.
    async fn keep_topology(weak: Weak<Self>) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last: Option<Vec<(i64, i64, String)>> = None;
        let mut retry = false;
        loop {
            tick.tick().await;
            let Some(hub) = weak.upgrade() else { return };
            let Some(conn) = hub.cluster_conn() else {
                return;
            };
            let mut c = Conn::Cluster(conn);
            let Ok(Ok(owners)) = tokio::time::timeout(hub.timeout, c.slot_owners()).await else {
                continue;
            };
            if owners.is_empty() {
                continue;
            }
            let changed = last.as_ref().is_some_and(|l| *l != owners);
            last = Some(owners);
            if changed || retry {
                tracing::warn!("redis cluster slots changed owner; subscribing anew");
                retry = match hub.resubscribe_all().await {
                    Ok(()) => false,
                    Err(e) => {
                        tracing::warn!(error = %e, "subscribing anew failed; trying again");
                        true
                    }
                };
            }
        }
    }

    /// A new cluster pub/sub connection with every channel subscribed on it (at the slots'
    /// current masters), swapped in for the old one; then every receiver gets the
    /// resubscribed marker and closes the gap from the history. Events that both connections
    /// delivered meanwhile are skipped by revision.
    async fn resubscribe_all(self: &Arc<Self>) -> anyhow::Result<()> {
        let Source::Cluster {
            conn: held,
            subscribing,
            seeds,
        } = &self.source
        else {
            return Ok(());
        };
        let _guard = subscribing.lock().await;
        let (mut conn, rx) = Self::cluster_pubsub(seeds, self.timeout).await?;
        let names: Vec<String> = {
            let mut map = self.channels.lock().expect("hub lock");
            for e in map.values_mut() {
                // The new connection's confirmations start the count again.
                e.2 = 0;
            }
            map.keys().cloned().collect()
        };
        tokio::spawn(Self::run_cluster(Arc::downgrade(self), rx));
        for n in &names {
            if crate::keys::is_shard_channel(n) {
                bounded(self.timeout, conn.ssubscribe(n)).await?;
            } else {
                bounded(self.timeout, conn.subscribe(n)).await?;
            }
        }
        *held.lock().expect("hub lock") = conn;
        for e in self.channels.lock().expect("hub lock").values_mut() {
            e.1 = true;
            let _ = e.0.send(Arc::new(Bytes::new()));
        }
        Ok(())
    }

    /// Reads the cluster client's pushes: messages to the channels' receivers, confirmations
    /// counted (a repeated one sends the resubscribed marker), dropped shard channels
    /// subscribed again.
    async fn run_cluster(
        weak: Weak<Self>,
        mut rx: tokio::sync::mpsc::UnboundedReceiver<redis::PushInfo>,
    ) {
        use redis::PushKind;
        while let Some(push) = rx.recv().await {
            let Some(hub) = weak.upgrade() else { return };
            let channel = match push.data.first() {
                Some(Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
                _ => String::new(),
            };
            match push.kind {
                PushKind::Message | PushKind::SMessage => {
                    let tx = hub
                        .channels
                        .lock()
                        .expect("hub lock")
                        .get(&channel)
                        .map(|e| e.0.clone());
                    if let (Some(tx), Some(Value::BulkString(payload))) = (tx, push.data.get(1))
                        && !payload.is_empty()
                    {
                        let _ = tx.send(Arc::new(Bytes::copy_from_slice(payload)));
                    }
                }
                PushKind::Subscribe | PushKind::SSubscribe => {
                    let mut map = hub.channels.lock().expect("hub lock");
                    if let Some(e) = map.get_mut(&channel) {
                        e.2 += 1;
                        if e.2 > 1 {
                            tracing::info!(channel, "redis channel subscribed again");
                            e.1 = true;
                            let _ = e.0.send(Arc::new(Bytes::new()));
                        }
                    }
                }
                PushKind::SUnsubscribe => {
                    // Not ours (a released channel has no entry): its slot moved away.
                    let wanted = hub
                        .channels
                        .lock()
                        .expect("hub lock")
                        .get(&channel)
                        .is_some_and(|e| e.0.receiver_count() > 0);
                    if wanted {
                        tracing::warn!(channel, "redis dropped a shard channel; subscribing again");
                        tokio::spawn(Self::resubscribe_dropped(weak.clone(), channel));
                    }
                }
                PushKind::Disconnection => {
                    tracing::warn!("a redis cluster connection was lost; the client reconnects");
                }
                _ => {}
            }
        }
    }

    /// Subscribes a dropped shard channel again, retrying until it is confirmed or released;
    /// its confirmation (the second or later) sends the resubscribed marker.
    async fn resubscribe_dropped(weak: Weak<Self>, channel: String) {
        let mut delay = Duration::from_millis(50);
        loop {
            let Some(hub) = weak.upgrade() else { return };
            let Source::Cluster { subscribing, .. } = &hub.source else {
                return;
            };
            let _guard = subscribing.lock().await;
            if !hub
                .channels
                .lock()
                .expect("hub lock")
                .contains_key(&channel)
            {
                return;
            }
            let Some(mut c) = hub.cluster_conn() else {
                return;
            };
            match bounded(hub.timeout, c.ssubscribe(&channel)).await {
                Ok(()) => return,
                Err(e) => tracing::debug!(error = %e, channel, "shard channel resubscribe failed"),
            }
            drop(_guard);
            drop(hub);
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(MAX_RECONNECT_DELAY);
        }
    }

    /// True while the pub/sub connection to Redis is up.
    pub fn connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }

    /// Hands messages to the channels' receivers; when the connection ends, makes it again.
    async fn run(weak: Weak<Self>, mut stream: redis::aio::PubSubStream) {
        loop {
            while let Some(msg) = stream.next().await {
                let Some(hub) = weak.upgrade() else { return };
                let ch = msg.get_channel_name().to_string();
                let tx = hub
                    .channels
                    .lock()
                    .expect("hub lock")
                    .get(&ch)
                    .map(|e| e.0.clone());
                if let Some(tx) = tx {
                    let payload = msg.get_payload_bytes();
                    if !payload.is_empty() {
                        let _ = tx.send(Arc::new(Bytes::copy_from_slice(payload)));
                    }
                }
            }
            drop(stream);
            let Some(hub) = weak.upgrade() else { return };
            tracing::error!("redis pub/sub connection lost; reconnecting");
            hub.lost().await;
            drop(hub);
            let mut delay = Duration::from_millis(50);
            stream = loop {
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(MAX_RECONNECT_DELAY);
                let Some(hub) = weak.upgrade() else { return };
                match hub.reconnect().await {
                    Ok(s) => break s,
                    Err(e) => tracing::debug!(error = %e, "redis pub/sub reconnect failed"),
                }
            };
            tracing::info!("redis pub/sub connection restored");
        }
    }

    /// The connection is gone: no subscription is confirmed any more.
    async fn lost(&self) {
        self.connected.store(false, Ordering::Relaxed);
        let Source::Single { sink, .. } = &self.source else {
            return;
        };
        let mut sink = sink.lock().await;
        *sink = None;
        for e in self.channels.lock().expect("hub lock").values_mut() {
            e.1 = false;
        }
    }

    /// A new pub/sub connection with every known channel subscribed; their receivers get
    /// the resubscribed marker.
    async fn reconnect(&self) -> anyhow::Result<redis::aio::PubSubStream> {
        let Source::Single { client, sink: held } = &self.source else {
            anyhow::bail!("not a single-server hub");
        };
        let pubsub = bounded(self.timeout, client.get_async_pubsub()).await?;
        let (mut sink, stream) = pubsub.split();
        // Under the sink lock no new channel is added (see `subscribe`).
        let mut slot = held.lock().await;
        let names: Vec<String> = self
            .channels
            .lock()
            .expect("hub lock")
            .keys()
            .cloned()
            .collect();
        for n in &names {
            bounded(self.timeout, sink.subscribe(n)).await?;
        }
        {
            let mut map = self.channels.lock().expect("hub lock");
            for e in map.values_mut() {
                e.1 = true;
                let _ = e.0.send(Arc::new(Bytes::new()));
            }
        }
        *slot = Some(sink);
        self.connected.store(true, Ordering::Relaxed);
        Ok(stream)
    }

    /// Subscribes (once per channel) and returns a receiver that sees every message
    /// published after this call returns (and the resubscribed marker after an outage).
    pub async fn subscribe(
        &self,
        channel: &str,
    ) -> anyhow::Result<broadcast::Receiver<Arc<Bytes>>> {
        if let Some((tx, true, _)) = self.channels.lock().expect("hub lock").get(channel) {
            return Ok(tx.subscribe());
        }
        // Subscriptions are made under the sink lock, so once we hold it an entry that exists
        // is either confirmed or ours to confirm.
        let (mut guard, _cluster_guard) = match &self.source {
            Source::Single { sink, .. } => (Some(sink.lock().await), None),
            Source::Cluster { subscribing, .. } => (None, Some(subscribing.lock().await)),
        };
        if let Some(g) = &guard
            && g.is_none()
        {
            anyhow::bail!("redis pub/sub connection is down");
        }
        let rx = {
            let mut map = self.channels.lock().expect("hub lock");
            let entry = map
                .entry(channel.to_string())
                .or_insert_with(|| (broadcast::channel(BUFFER).0, false, 0));
            if entry.1 {
                return Ok(entry.0.subscribe());
            }
            // Receivers made before SUBSCRIBE is confirmed see everything published after it.
            entry.0.subscribe()
        };
        let subscribed = match (&self.source, guard.as_mut().and_then(|g| g.as_mut())) {
            (Source::Single { .. }, Some(sink)) => {
                bounded(self.timeout, sink.subscribe(channel)).await
            }
            (Source::Cluster { conn, .. }, _) => {
                let mut c = conn.lock().expect("hub lock").clone();
                if crate::keys::is_shard_channel(channel) {
                    bounded(self.timeout, c.ssubscribe(channel)).await
                } else {
                    bounded(self.timeout, c.subscribe(channel)).await
                }
            }
            (Source::Single { .. }, None) => {
                Err(anyhow::anyhow!("redis pub/sub connection is down"))
            }
        };
        if let Err(e) = subscribed {
            drop(rx);
            let mut map = self.channels.lock().expect("hub lock");
            if map
                .get(channel)
                .is_some_and(|(tx, ok, _)| !ok && tx.receiver_count() == 0)
            {
                map.remove(channel);
            }
            return Err(e);
        }
        if let Some(e) = self.channels.lock().expect("hub lock").get_mut(channel) {
            e.1 = true;
        }
        Ok(rx)
    }

    /// History entries with revision > `after` (at most `count`), with previous states.
    pub async fn history_after(
        &self,
        stream: &str,
        after: u64,
        count: usize,
    ) -> Result<Vec<LiveEvent>, crdplane_core::ApiError> {
        let mut c = self.history.clone();
        let v: Value = redis::cmd("XRANGE")
            .arg(stream)
            .arg(format!("{}-0", after + 1))
            .arg("+")
            .arg("COUNT")
            .arg(count)
            .query_async(&mut c)
            .await
            .map_err(crate::store::redis_err)?;
        Ok(crate::replies::history(v)?)
    }

    /// Drops channels nobody listens to any more.
    pub async fn release(&self, channel: &str) {
        let (mut guard, _cluster_guard) = match &self.source {
            Source::Single { sink, .. } => (Some(sink.lock().await), None),
            Source::Cluster { subscribing, .. } => (None, Some(subscribing.lock().await)),
        };
        let idle = {
            let mut map = self.channels.lock().expect("hub lock");
            match map.get(channel) {
                Some((tx, ..)) if tx.receiver_count() == 0 => {
                    map.remove(channel);
                    true
                }
                _ => false,
            }
        };
        if !idle {
            return;
        }
        match (&self.source, guard.as_mut().and_then(|g| g.as_mut())) {
            (Source::Single { .. }, Some(sink)) => {
                let _ = bounded(self.timeout, sink.unsubscribe(channel)).await;
            }
            (Source::Cluster { conn, .. }, _) => {
                let mut c = conn.lock().expect("hub lock").clone();
                let _ = if crate::keys::is_shard_channel(channel) {
                    bounded(self.timeout, c.sunsubscribe(channel)).await
                } else {
                    bounded(self.timeout, c.unsubscribe(channel)).await
                };
            }
            (Source::Single { .. }, None) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_published_events() {
        let e = parse_event(&Bytes::from_static(b"A12\ndefault/x\n{\"a\":1}")).unwrap();
        assert_eq!(
            (e.kind, e.rv, e.key.as_str(), &e.json[..], &e.prev[..]),
            (b'A', 12, "default/x", &b"{\"a\":1}"[..], &b""[..])
        );
        assert!(parse_event(&Bytes::from_static(b"A\n")).is_none());
        assert!(parse_event(&Bytes::from_static(b"")).is_none());
    }

    #[test]
    fn parses_modified_with_previous_state() {
        let e = parse_event(&Bytes::from_static(b"M7\nns/x\n7\n{\"p\":1}{\"n\":2}")).unwrap();
        assert_eq!(
            (e.kind, e.rv, &e.prev[..], &e.json[..]),
            (b'M', 7, &b"{\"p\":1}"[..], &b"{\"n\":2}"[..])
        );
        // A length past the end, or not a number, is refused rather than misread.
        assert!(parse_event(&Bytes::from_static(b"M7\nns/x\n70\n{}{}")).is_none());
        assert!(parse_event(&Bytes::from_static(b"M7\nns/x\nzz\n{}{}")).is_none());
        assert!(parse_event(&Bytes::from_static(b"M7\nns/x\n{}")).is_none());
    }
}
