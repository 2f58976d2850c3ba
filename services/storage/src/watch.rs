//! Live event fan-out inside one storage replica.
//!
//! One Redis pub/sub connection per replica; each (tenant, resource) channel is subscribed
//! once, on first use, and its messages go to a `tokio::sync::broadcast` that every gRPC
//! watch stream of that channel reads. Event bytes are decoded from Redis once and shared
//! (`Bytes`), never re-encoded per watcher. A watcher that falls behind the broadcast buffer
//! is closed (its client re-watches from its last resourceVersion, served from history).

use bytes::Bytes;
use futures::StreamExt;
use redis::aio::PubSubSink;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::{Mutex, broadcast};

/// One live event as published by the write scripts: `<T><rv>\n<key>\n<json>`.
#[derive(Debug, Clone)]
pub struct LiveEvent {
    pub kind: u8,
    pub rv: u64,
    pub key: String,
    pub json: Bytes,
}

pub fn parse_event(payload: &[u8]) -> Option<LiveEvent> {
    let kind = *payload.first()?;
    let nl = payload.iter().position(|&b| b == b'\n')?;
    let rv = std::str::from_utf8(&payload[1..nl]).ok()?.parse().ok()?;
    let rest = &payload[nl + 1..];
    let nl2 = rest.iter().position(|&b| b == b'\n')?;
    let key = String::from_utf8(rest[..nl2].to_vec()).ok()?;
    Some(LiveEvent {
        kind,
        rv,
        key,
        json: Bytes::copy_from_slice(&rest[nl2 + 1..]),
    })
}

pub const BUFFER: usize = 4096;

/// A subscribed channel's broadcast sender, and whether Redis confirmed the subscription.
type Channel = (broadcast::Sender<Arc<Bytes>>, bool);

pub struct Hub {
    sink: Mutex<PubSubSink>,
    /// channel → (sender, subscription confirmed by Redis).
    channels: std::sync::Mutex<HashMap<String, Channel>>,
}

impl Hub {
    pub async fn start(url: &str) -> anyhow::Result<Arc<Self>> {
        let client = redis::Client::open(url)?;
        let pubsub = client.get_async_pubsub().await?;
        let (sink, mut stream) = pubsub.split();
        let hub = Arc::new(Self {
            sink: Mutex::new(sink),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_published_events() {
        let e = parse_event(b"A12\ndefault/x\n{\"a\":1}").unwrap();
        assert_eq!(
            (e.kind, e.rv, e.key.as_str(), &e.json[..]),
            (b'A', 12, "default/x", &b"{\"a\":1}"[..])
        );
        assert!(parse_event(b"A\n").is_none());
        assert!(parse_event(b"").is_none());
    }
}
