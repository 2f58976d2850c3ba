//! The accept loop of every crdplane listener (gateway and gRPC services): errors never end
//! the process, and connections are bounded in total and per client address.
//!
//! Where it sits: between a `TcpListener` and the per-connection tasks (`serve_one` here, the
//! gateway's `api::serve`). It follows Go's `net/http` `Server.Serve`, which kube-apiserver
//! runs on: a failed accept (EMFILE "too many open files", ENFILE, ECONNABORTED, ENOBUFS, …)
//! is retried after a delay of 5 ms doubling up to 1 s, reset by the next success, instead of
//! ending the server. Go's server has no connection bound; here the bound keeps the process
//! below its file-descriptor limit, so a flood of idle connections is refused at the door
//! (the socket is closed at once) rather than exhausting descriptors that the process also
//! needs for its own upstream connections. A refusal is logged once per
//! [`LOG_INTERVAL`] with the count, not once per connection.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};

/// First delay after a failed accept (Go `net/http`: 5 ms).
pub const BACKOFF_MIN: Duration = Duration::from_millis(5);
/// Longest delay between accept attempts (Go `net/http`: 1 s).
pub const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// Refusals and accept errors are summarised in the log at most this often.
pub const LOG_INTERVAL: Duration = Duration::from_secs(10);
/// Descriptors kept out of the automatic connection bound for everything else a process opens
/// (its upstream connections, Redis, logs).
pub const FD_RESERVE: usize = 128;

/// The next delay after a failed accept: 5 ms, then doubling, at most 1 s.
pub fn next_backoff(prev: Option<Duration>) -> Duration {
    match prev {
        None => BACKOFF_MIN,
        Some(d) => (d * 2).min(BACKOFF_MAX),
    }
}

/// The soft `RLIMIT_NOFILE` of this process (None where it is unlimited).
pub fn nofile_limit() -> Option<usize> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .and_then(|n| usize::try_from(n).ok())
}

/// Bounds on concurrent connections; 0 means "automatic" (see [`ConnLimits::resolve`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnLimits {
    /// All connections together.
    pub max_total: usize,
    /// Connections from one client IP address.
    pub max_per_client: usize,
}

impl ConnLimits {
    /// Fills in automatic values from the descriptor limit `nofile`: the total bound is the
    /// limit less [`FD_RESERVE`] (at least 64); one address may hold all but an eighth of it,
    /// so a single client can never lock every other one out.
    pub fn resolve(self, nofile: Option<usize>) -> ConnLimits {
        let max_total = match self.max_total {
            0 => nofile.map_or(65_536, |n| n.saturating_sub(FD_RESERVE).max(64)),
            n => n,
        };
        let max_per_client = match self.max_per_client {
            0 => (max_total - max_total / 8).max(1),
            n => n.min(max_total),
        };
        ConnLimits {
            max_total,
            max_per_client,
        }
    }
}

/// Counts of open connections, shared by the accept loop and the connections' guards.
#[derive(Default)]
struct Counts {
    total: AtomicUsize,
    per_client: Mutex<HashMap<IpAddr, usize>>,
}

/// Held by a connection's task; gives its slot back when dropped.
pub struct ConnGuard {
    counts: Arc<Counts>,
    ip: IpAddr,
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.counts.total.fetch_sub(1, Ordering::Relaxed);
        if let Ok(mut m) = self.counts.per_client.lock()
            && let Some(n) = m.get_mut(&self.ip)
        {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.ip);
            }
        }
    }
}

/// A rate-limited log line: counts events and reports them at most once per interval.
struct Summary {
    what: &'static str,
    count: AtomicU64,
    last: Mutex<Option<Instant>>,
}

impl Summary {
    fn new(what: &'static str) -> Self {
        Self {
            what,
            count: AtomicU64::new(0),
            last: Mutex::new(None),
        }
    }
    fn note(&self, detail: impl std::fmt::Display) {
        self.count.fetch_add(1, Ordering::Relaxed);
        let Ok(mut last) = self.last.lock() else {
            return;
        };
        let now = Instant::now();
        if last.is_none_or(|t| now.duration_since(t) >= LOG_INTERVAL) {
            let n = self.count.swap(0, Ordering::Relaxed);
            *last = Some(now);
            // stderr: the services' log files, whatever the tracing filter.
            eprintln!("{}: {n} in the last {LOG_INTERVAL:?}; {detail}", self.what);
        }
    }
}

/// A listener whose `accept` never fails and admits only connections within the bounds.
pub struct Acceptor {
    listener: TcpListener,
    limits: ConnLimits,
    counts: Arc<Counts>,
    refused: Summary,
    failed: Summary,
}

impl Acceptor {
    /// `limits` with zeros resolved against this process's descriptor limit.
    pub fn new(listener: TcpListener, limits: ConnLimits) -> Self {
        let limits = limits.resolve(nofile_limit());
        Self {
            listener,
            limits,
            counts: Arc::default(),
            refused: Summary::new("connections refused at the connection limit"),
            failed: Summary::new("accept failed; retrying with backoff"),
        }
    }

    /// The connection limits in force (automatic values already resolved).
    pub fn limits(&self) -> ConnLimits {
        self.limits
    }

    /// The address the listener is bound to (the real port when it was bound to port 0).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Open connections now.
    pub fn open(&self) -> usize {
        self.counts.total.load(Ordering::Relaxed)
    }

    /// The next admitted connection. Failed accepts are retried with backoff; connections
    /// over a bound are closed at once.
    pub async fn accept(&self) -> (TcpStream, SocketAddr, ConnGuard) {
        let mut backoff = None;
        loop {
            let (sock, peer) = match self.listener.accept().await {
                Ok(c) => c,
                Err(e) => {
                    let d = next_backoff(backoff);
                    backoff = Some(d);
                    self.failed
                        .note(format_args!("{e} (next attempt in {d:?})"));
                    tokio::time::sleep(d).await;
                    continue;
                }
            };
            backoff = None;
            match self.admit(peer.ip()) {
                Some(guard) => return (sock, peer, guard),
                None => {
                    // Closed without a word: the client sees the connection end at once.
                    drop(sock);
                    self.refused.note(format_args!(
                        "{} open, at most {} in total and {} per client address (last from {})",
                        self.open(),
                        self.limits.max_total,
                        self.limits.max_per_client,
                        peer.ip()
                    ));
                }
            }
        }
    }

    fn admit(&self, ip: IpAddr) -> Option<ConnGuard> {
        let mut m = self.counts.per_client.lock().ok()?;
        if self.counts.total.load(Ordering::Relaxed) >= self.limits.max_total {
            return None;
        }
        let n = m.entry(ip).or_insert(0);
        if *n >= self.limits.max_per_client {
            return None;
        }
        *n += 1;
        self.counts.total.fetch_add(1, Ordering::Relaxed);
        Some(ConnGuard {
            counts: self.counts.clone(),
            ip,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_is_go_net_http_s() {
        let mut d = None;
        let mut seen = Vec::new();
        for _ in 0..10 {
            let n = next_backoff(d);
            seen.push(n.as_millis());
            d = Some(n);
        }
        assert_eq!(seen, [5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
    }

    #[test]
    fn automatic_limits_follow_the_descriptor_limit() {
        let auto = ConnLimits::default();
        let cases = [
            (Some(1024), 896, 784),
            (Some(20_000), 19_872, 17_388),
            (Some(100), 64, 56),
            (None, 65_536, 57_344),
        ];
        for (nofile, total, per) in cases {
            let l = auto.resolve(nofile);
            assert_eq!((l.max_total, l.max_per_client), (total, per), "{nofile:?}");
        }
        let set = ConnLimits {
            max_total: 10,
            max_per_client: 50,
        }
        .resolve(Some(1024));
        assert_eq!((set.max_total, set.max_per_client), (10, 10));
    }

    #[tokio::test]
    async fn bounds_refuse_promptly_and_free_slots_on_drop() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let acc = Arc::new(Acceptor::new(
            l,
            ConnLimits {
                max_total: 3,
                max_per_client: 2,
            },
        ));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let a = acc.clone();
        tokio::spawn(async move {
            loop {
                let c = a.accept().await;
                let _ = tx.send(c);
            }
        });
        let connect_from = |src: &'static str| async move {
            let s = tokio::net::TcpSocket::new_v4().unwrap();
            s.bind(format!("{src}:0").parse().unwrap()).unwrap();
            s.connect(addr).await.unwrap()
        };
        let _a1 = connect_from("127.0.0.1").await;
        let _a2 = connect_from("127.0.0.1").await;
        let g1 = rx.recv().await.unwrap();
        let _g2 = rx.recv().await.unwrap();
        // A third from the same address is closed at once.
        let mut a3 = connect_from("127.0.0.1").await;
        let mut b = [0u8; 1];
        let n = tokio::time::timeout(
            Duration::from_secs(5),
            tokio::io::AsyncReadExt::read(&mut a3, &mut b),
        )
        .await
        .expect("refused promptly");
        assert!(matches!(n, Ok(0) | Err(_)));
        // Another address still gets in, up to the total.
        let _b1 = connect_from("127.0.0.2").await;
        let _gb = rx.recv().await.unwrap();
        assert_eq!(acc.open(), 3);
        let mut b2 = connect_from("127.0.0.2").await;
        let n = tokio::time::timeout(
            Duration::from_secs(5),
            tokio::io::AsyncReadExt::read(&mut b2, &mut b),
        )
        .await
        .expect("refused promptly at the total");
        assert!(matches!(n, Ok(0) | Err(_)));
        // A closed connection frees its slot.
        drop(g1);
        assert_eq!(acc.open(), 2);
        let _a4 = connect_from("127.0.0.1").await;
        let g = rx.recv().await.unwrap();
        assert_eq!(g.1.ip().to_string(), "127.0.0.1");
    }
}
