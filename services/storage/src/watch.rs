//! Live event fan-out inside one storage replica, and history reads with previous states.
//!
//! One Redis pub/sub connection per replica; each (tenant, resource) channel is subscribed
//! once, on first use, and its messages go to a `tokio::sync::broadcast` that every gRPC
//! watch stream of that channel reads. Event bytes are received from Redis once and shared
//! (`Bytes` slices, no copy per watcher). A watcher that falls behind the broadcast buffer
//! is closed (its client re-watches from its last resourceVersion, served from history).
//!
//! Event format (written by `lua/{create,update,delete}.lua`):
//! - pub/sub: `A<rv>\n<key>\n<json>`, `D<rv>\n<key>\n<json>` and
//!   `M<rv>\n<key>\n<len(prev)>\n<prev><json>`;
//! - history stream entry `<rv>-0` with fields `t` (type), `k` (key), `o` (object) and, for
//!   MODIFIED, `p` (previous state at the event's revision).
//!
//! Why the previous state travels with the event instead of a per-replica cache of current
//! objects: a filtered watch resumed from history needs the state *before* each historical
//! event, which a cache of current objects cannot give (upstream's watch cache keeps the
//! previous object with every event for the same reason, and etcd hands it over as PrevKV).
//! Carrying it costs one more copy of the object per MODIFIED in the bounded history, but no
//! replica holds a copy of every object, replicas need no warm-up list, and a restarted
//! replica serves transitions for any revision still in history.

use bytes::Bytes;
use futures::StreamExt;
use redis::Value;
use redis::aio::{ConnectionManager, PubSubSink};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::{Mutex, broadcast};

/// One event as published by the write scripts (or read back from history).
#[derive(Debug, Clone, PartialEq)]
pub struct LiveEvent {
    pub kind: u8,
    pub rv: u64,
    pub key: String,
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

pub const BUFFER: usize = 4096;

/// A subscribed channel's broadcast sender, and whether Redis confirmed the subscription.
type Channel = (broadcast::Sender<Arc<Bytes>>, bool);

pub struct Hub {
    sink: Mutex<PubSubSink>,
    /// A multiplexed connection for history reads (`XRANGE` with previous states).
    history: ConnectionManager,
    /// channel → (sender, subscription confirmed by Redis).
    channels: std::sync::Mutex<HashMap<String, Channel>>,
}

impl Hub {
    pub async fn start(url: &str) -> anyhow::Result<Arc<Self>> {
        let client = redis::Client::open(url)?;
        let pubsub = client.get_async_pubsub().await?;
        let (sink, mut stream) = pubsub.split();
        let history = ConnectionManager::new(client).await?;
        let hub = Arc::new(Self {
            sink: Mutex::new(sink),
            history,
            channels: Default::default(),
        });
        let weak = Arc::downgrade(&hub);
        tokio::spawn(async move {
            while let Some(msg) = stream.next().await {
                let Some(hub) = weak.upgrade() else { break };
                let ch = msg.get_channel_name().to_string();
                let tx = hub
                    .channels
                    .lock()
                    .expect("hub lock")
                    .get(&ch)
                    .map(|e| e.0.clone());
                if let Some(tx) = tx {
                    let _ = tx.send(Arc::new(Bytes::copy_from_slice(msg.get_payload_bytes())));
                }
            }
            tracing::error!("redis pub/sub connection closed; live watches end");
            if let Some(hub) = weak.upgrade() {
                hub.channels.lock().expect("hub lock").clear();
            }
        });
        Ok(hub)
    }

    /// Subscribes (once per channel) and returns a receiver that sees every message
    /// published after this call returns.
    pub async fn subscribe(
        &self,
        channel: &str,
    ) -> anyhow::Result<broadcast::Receiver<Arc<Bytes>>> {
        if let Some((tx, true)) = self.channels.lock().expect("hub lock").get(channel) {
            return Ok(tx.subscribe());
        }
        // Subscriptions are made under the sink lock, so once we hold it an entry that exists
        // is either confirmed or ours to confirm.
        let mut sink = self.sink.lock().await;
        let rx = {
            let mut map = self.channels.lock().expect("hub lock");
            let entry = map
                .entry(channel.to_string())
                .or_insert_with(|| (broadcast::channel(BUFFER).0, false));
            if entry.1 {
                return Ok(entry.0.subscribe());
            }
            // Receivers made before SUBSCRIBE is confirmed see everything published after it.
            entry.0.subscribe()
        };
        sink.subscribe(channel).await?;
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
        Ok(parse_history(v))
    }

    /// Drops channels nobody listens to any more.
    pub async fn release(&self, channel: &str) {
        let idle = {
            let mut map = self.channels.lock().expect("hub lock");
            match map.get(channel) {
                Some((tx, true)) if tx.receiver_count() == 0 => {
                    map.remove(channel);
                    true
                }
                _ => false,
            }
        };
        if idle {
            let _ = self.sink.lock().await.unsubscribe(channel).await;
        }
    }
}

fn bulk(v: Value) -> Option<Vec<u8>> {
    match v {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.into_bytes()),
        _ => None,
    }
}

/// `XRANGE` reply → events (entries that do not parse are skipped).
pub fn parse_history(v: Value) -> Vec<LiveEvent> {
    let mut out = Vec::new();
    let Value::Array(entries) = v else { return out };
    for e in entries {
        let Value::Array(mut parts) = e else { continue };
        if parts.len() != 2 {
            continue;
        }
        let fields = parts.pop();
        let id = parts.pop().and_then(bulk).unwrap_or_default();
        let rv = std::str::from_utf8(&id)
            .ok()
            .and_then(|s| s.split('-').next())
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let Some(Value::Array(fields)) = fields else {
            continue;
        };
        let mut ev = LiveEvent {
            kind: b'M',
            rv,
            key: String::new(),
            json: Bytes::new(),
            prev: Bytes::new(),
        };
        let mut it = fields.into_iter();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            let (Some(k), Some(v)) = (bulk(k), bulk(v)) else {
                continue;
            };
            match k.as_slice() {
                b"t" => ev.kind = v.first().copied().unwrap_or(b'M'),
                b"k" => ev.key = String::from_utf8(v).unwrap_or_default(),
                b"o" => ev.json = v.into(),
                b"p" => ev.prev = v.into(),
                _ => {}
            }
        }
        if rv != 0 {
            out.push(ev);
        }
    }
    out
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

    #[test]
    fn parses_history_entries() {
        let entry = |id: &str, f: &[(&str, &str)]| {
            Value::Array(vec![
                Value::BulkString(id.as_bytes().to_vec()),
                Value::Array(
                    f.iter()
                        .flat_map(|(k, v)| {
                            [
                                Value::BulkString(k.as_bytes().to_vec()),
                                Value::BulkString(v.as_bytes().to_vec()),
                            ]
                        })
                        .collect(),
                ),
            ])
        };
        let v = Value::Array(vec![
            entry("5-0", &[("t", "A"), ("k", "a/b"), ("o", "{}")]),
            entry(
                "6-0",
                &[("t", "M"), ("k", "a/b"), ("o", "{\"x\":1}"), ("p", "{}")],
            ),
        ]);
        let evs = parse_history(v);
        assert_eq!(evs.len(), 2);
        assert_eq!(
            (evs[0].rv, evs[0].kind, &evs[0].prev[..]),
            (5, b'A', &b""[..])
        );
        assert_eq!(
            (evs[1].rv, evs[1].kind, &evs[1].prev[..]),
            (6, b'M', &b"{}"[..])
        );
    }
}
