//! Bounds on concurrent watches: per client and in total.
//!
//! Where it sits: in the router (`api.rs`), right after the request info is parsed and
//! before any handler runs, for requests whose verb is `watch` (HTTP/1.1 and HTTP/2 alike;
//! each watch stream of an HTTP/2 connection counts on its own). A watch admitted here holds
//! a [`WatchSlot`] that lives inside its response body, so the slot comes back whenever the
//! watch ends, for whatever reason: the client goes away (the connection layer drops the
//! body), the watch times out, the handler fails, the stream errors.
//!
//! Upstream has no per-client watch count: kube-apiserver leaves watches out of the
//! max-in-flight filter (long-running requests) and lets priority and fairness limit only
//! their initialization. A server whose per-watch cost is small is still exhausted by one
//! client opening watches without end, so this layer bounds the count and answers a watch
//! over a bound the way upstream's filters answer any request they reject
//! (`k8s.io/apiserver/pkg/server/filters/maxinflight.go` `tooManyRequests`, also used by
//! `priority-and-fairness.go`): `429`, `Retry-After: 1`, and Go's `http.Error` text body
//! `Too many requests, please try again later.` (client-go turns that 429 into a Status with
//! reason `TooManyRequests` and retries after the advertised delay).
//!
//! Clients are told apart by [`ClientKey`]: today the peer address; once requests carry an
//! authenticated identity the key becomes the user, with no change to the counting.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Default bound on concurrent watches of one client (`--max-watches-per-client`).
pub const DEFAULT_PER_CLIENT: usize = 10_000;
/// Default bound on concurrent watches of the whole gateway (`--max-watches`): at ~8 KiB
/// per idle watch, about 1 GiB.
pub const DEFAULT_TOTAL: usize = 100_000;

/// Who a watch counts against.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ClientKey {
    /// The peer address of the connection (no authenticated identity yet).
    Address(IpAddr),
    /// An authenticated user (tenant, user name): for when authentication lands.
    User(String, String),
}

/// Bounds on concurrent watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchLimits {
    /// Most watches open at once on this gateway.
    pub max_total: usize,
    /// Most watches open at once for one client.
    pub max_per_client: usize,
}

impl Default for WatchLimits {
    fn default() -> Self {
        Self {
            max_total: DEFAULT_TOTAL,
            max_per_client: DEFAULT_PER_CLIENT,
        }
    }
}

/// Why a watch was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The gateway's total limit is reached.
    Total,
    /// The client's own limit is reached.
    PerClient,
}

/// The admission rule: with `total` watches open and `mine` of them the client's, may one
/// more start?
pub fn admit(limits: WatchLimits, total: usize, mine: usize) -> Result<(), Refused> {
    if total >= limits.max_total {
        Err(Refused::Total)
    } else if mine >= limits.max_per_client {
        Err(Refused::PerClient)
    } else {
        Ok(())
    }
}

#[derive(Default)]
struct Counts {
    total: AtomicUsize,
    per_client: Mutex<HashMap<ClientKey, usize>>,
}

/// The open watches of one gateway.
pub struct WatchSlots {
    limits: WatchLimits,
    counts: Arc<Counts>,
}

/// One admitted watch; gives its slot back when dropped.
pub struct WatchSlot {
    counts: Arc<Counts>,
    key: ClientKey,
}

impl Drop for WatchSlot {
    fn drop(&mut self) {
        let mut m = self
            .counts
            .per_client
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        self.counts.total.fetch_sub(1, Ordering::Relaxed);
        if let Some(n) = m.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.key);
            }
        }
    }
}

impl WatchSlots {
    /// No watches open yet, admitting under `limits`.
    pub fn new(limits: WatchLimits) -> Self {
        Self {
            limits,
            counts: Arc::default(),
        }
    }

    /// The limits this counter admits under.
    pub fn limits(&self) -> WatchLimits {
        self.limits
    }

    /// Open watches now, in total.
    pub fn open(&self) -> usize {
        self.counts.total.load(Ordering::Relaxed)
    }

    /// Open watches of `key` now.
    pub fn open_for(&self, key: &ClientKey) -> usize {
        let m = self
            .counts
            .per_client
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        m.get(key).copied().unwrap_or(0)
    }

    /// A slot for one more watch of `key`, or why not.
    pub fn acquire(&self, key: ClientKey) -> Result<WatchSlot, Refused> {
        let mut m = self
            .counts
            .per_client
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let total = self.counts.total.load(Ordering::Relaxed);
        let mine = m.get(&key).copied().unwrap_or(0);
        admit(self.limits, total, mine)?;
        *m.entry(key.clone()).or_insert(0) += 1;
        self.counts.total.fetch_add(1, Ordering::Relaxed);
        Ok(WatchSlot {
            counts: self.counts.clone(),
            key,
        })
    }
}

/// A response body that holds a [`WatchSlot`] for as long as the body lives.
pub struct Held<B> {
    inner: B,
    _slot: WatchSlot,
}

impl<B> Held<B> {
    /// `inner`, holding `slot` until it is dropped.
    pub fn new(inner: B, slot: WatchSlot) -> Self {
        Self { inner, _slot: slot }
    }
}

impl<B: http_body::Body + Unpin> http_body::Body for Held<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admission_rule() {
        let l = WatchLimits {
            max_total: 5,
            max_per_client: 2,
        };
        for (total, mine, want) in [
            (0, 0, Ok(())),
            (1, 1, Ok(())),
            (2, 2, Err(Refused::PerClient)),
            (4, 0, Ok(())),
            (5, 0, Err(Refused::Total)),
            (5, 2, Err(Refused::Total)),
        ] {
            assert_eq!(admit(l, total, mine), want, "{total} {mine}");
        }
    }

    #[test]
    fn slots_come_back_on_drop() {
        let s = WatchSlots::new(WatchLimits {
            max_total: 3,
            max_per_client: 2,
        });
        let a = ClientKey::Address("127.0.0.1".parse().unwrap());
        let b = ClientKey::Address("127.0.0.2".parse().unwrap());
        let a1 = s.acquire(a.clone()).unwrap();
        let _a2 = s.acquire(a.clone()).unwrap();
        assert_eq!(s.acquire(a.clone()).err(), Some(Refused::PerClient));
        let b1 = s.acquire(b.clone()).unwrap();
        assert_eq!(s.acquire(b.clone()).err(), Some(Refused::Total));
        assert_eq!((s.open(), s.open_for(&a), s.open_for(&b)), (3, 2, 1));
        drop(a1);
        drop(b1);
        assert_eq!((s.open(), s.open_for(&a), s.open_for(&b)), (1, 1, 0));
        let _a3 = s.acquire(a.clone()).unwrap();
        let _b2 = s.acquire(b).unwrap();
    }
}
