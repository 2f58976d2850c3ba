//! The client channel of a service with N replicas: power-of-two-choices over the healthy
//! endpoints, a deadline on every call that is not a watch, and the request's call metadata.
//!
//! Where it sits: under every generated tonic client of the gateway (`StorageClient`,
//! `ValidationClient`, `RegistryClient`) and of the registry (storage, validation); over one
//! [`Endpoint`] (HTTP/2 connection) per replica. A call:
//! 1. stamps the current [`CallContext`] (tenant, user, `traceparent`) on its metadata;
//! 2. gets a deadline unless it is long-running ([`ChannelOptions::long_running`]): the
//!    caller's `grpc-timeout` if it set one, else the default, sent as `grpc-timeout` so the
//!    server sees it and enforced here (expiry is `DEADLINE_EXCEEDED`, 504 Timeout at the
//!    gateway);
//! 3. picks an endpoint with tower's `p2c::Balance` (two random healthy endpoints, the one
//!    with fewer calls in flight; a call counts until its response body is gone, so open
//!    watch streams count too) — the choice of Envoy's least-request balancer;
//! 4. opens its HTTP/2 stream there; if that fails (nothing was sent) the endpoint is taken
//!    out and the call tries the next pick, up to once per endpoint. A read-only call
//!    ([`ChannelOptions::read_only`]) is also sent again when the connection breaks before
//!    its answer (the endpoint died under it); a write is not, its outcome being unknown
//!    (the caller gets UNAVAILABLE, a 503, as from kube-apiserver when etcd drops mid-write).
//!
//! Membership ([`tower::discover`]): every endpoint starts in (optimistically, as gRPC
//! channels do before the first health report) and a background task per endpoint follows
//! its `grpc.health.v1.Health/Watch` (gRPC health checking protocol): NOT_SERVING, a broken
//! stream or a failed connection take it out, SERVING puts it back; a server without the
//! health service counts as serving while it answers. When no endpoint is in, calls go to
//! every endpoint in turn (Envoy's "panic routing") and meet the endpoint's own answer (e.g.
//! storage's 503 while Redis is down) rather than a guess made here.
//!
//! Endpoints come from the configuration (`http://a:1,http://b:2`) or from resolving a name
//! (`dns:///name:port`, [`crate::resolve`]): a resolved address that appears joins the pool
//! (in rotation, with its own health task), one that disappears leaves it for good. Each
//! endpoint has a key that is never reused, so a late health report or pick about a removed
//! endpoint cannot land on another.
//!
//! With one configured endpoint and no `dns:///` target there is nothing to choose: calls go
//! straight to it (no balancer, no health task), exactly as before replicas existed.
//!
//! Per-call cost over several endpoints, all in the caller's task (no `tower::buffer` worker
//! and no extra task hand-off): one `std::sync::Mutex` around the balancer and the endpoint
//! table, its `poll_ready` (a non-blocking look at the membership channel, p2c over two
//! loads) and one small allocation (the balancer's `FuturesUnordered` node for the endpoint
//! it re-readies); reference-count increments for the in-flight handle and the picked
//! endpoint; the deadline's timer entry and a clone of the pre-encoded `grpc-timeout` value;
//! up to three header clones (shared bytes) for the call context.

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures::FutureExt;
use http::HeaderValue;
use tokio::sync::{Notify, mpsc};
use tonic::body::Body as TonicBody;
use tower::balance::p2c::Balance;
use tower::discover::Change;
use tower::load::pending_requests::Handle;
use tower::load::{PendingRequests, TrackCompletion};

use crate::client::{self, Endpoint, RecvBody, Started};
use crate::context::CallContext;
use crate::deadline;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// First and longest wait between health-watch attempts on an endpoint.
const WATCH_BACKOFF_MIN: Duration = Duration::from_millis(100);
const WATCH_BACKOFF_MAX: Duration = Duration::from_secs(2);
/// How often a server without `grpc.health.v1` is looked at again.
const NO_HEALTH_RECHECK: Duration = Duration::from_secs(5);

/// How a [`Channel`] treats its calls.
#[derive(Debug, Clone)]
pub struct ChannelOptions {
    /// Deadline of a call that carries none; `None`: no default deadline.
    pub timeout: Option<Duration>,
    /// Full method paths (`/package.Service/Method`) that get no default deadline.
    pub long_running: &'static [&'static str],
    /// Full method paths that change nothing on the server: with several endpoints, such a
    /// call whose connection broke before its answer is sent again to another endpoint.
    pub read_only: &'static [&'static str],
    /// Mutual TLS for every endpoint (`https://` URLs); `None`: plaintext (`http://`).
    pub tls: Option<crate::mtls::Mtls>,
    /// How `dns:///host:port` endpoints are looked up ([`crate::resolve`]).
    pub resolver: crate::resolve::Resolver,
    /// How often a `dns:///` endpoint's name is resolved again.
    pub dns_refresh: Duration,
}

/// The read-only methods of the crdplane services (see [`ChannelOptions::read_only`]):
/// resending one cannot apply anything twice (gRPC's retry policy leaves this judgement to
/// the service owner, per method).
pub const READ_ONLY: &[&str] = &[
    "/crdplane.v1.Storage/Get",
    "/crdplane.v1.Storage/GetMany",
    "/crdplane.v1.Storage/List",
    "/crdplane.v1.Storage/Watch",
    "/crdplane.v1.Storage/Changes",
    "/crdplane.v1.Storage/ContinueKey",
    "/crdplane.v1.Storage/ListDependents",
    "/crdplane.v1.Validation/ValidateCrd",
    "/crdplane.v1.Validation/LoadSchema",
    "/crdplane.v1.Validation/Admit",
    "/crdplane.v1.Validation/AdmitMany",
    "/crdplane.v1.Validation/Normalize",
    "/crdplane.v1.Registry/GetCrd",
    "/crdplane.v1.Registry/ListCrds",
    "/crdplane.v1.Registry/Resolve",
    "/crdplane.v1.Registry/Discovery",
    "/crdplane.v1.Registry/OpenApiV2",
    "/crdplane.v1.Registry/OpenApiV3",
];

impl Default for ChannelOptions {
    fn default() -> Self {
        Self {
            timeout: Some(deadline::DEFAULT_TIMEOUT),
            long_running: deadline::LONG_RUNNING,
            read_only: READ_ONLY,
            tls: None,
            resolver: crate::resolve::Resolver::system(),
            dns_refresh: crate::resolve::DEFAULT_REFRESH,
        }
    }
}

/// A cloneable gRPC channel to one service, over one or more endpoints (see the module
/// docs).
#[derive(Clone)]
pub struct Channel {
    inner: Arc<Inner>,
}

struct Inner {
    /// One fixed endpoint (no pool): calls go straight to it.
    single: Option<Endpoint>,
    /// Several endpoints, or any `dns:///` target.
    pool: Option<Arc<Pool>>,
    /// The default deadline and its `grpc-timeout` value, encoded once.
    timeout: Option<(Duration, HeaderValue)>,
    long_running: &'static [&'static str],
    read_only: &'static [&'static str],
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("endpoints", &self.endpoints())
            .finish()
    }
}

/// The endpoints of a configuration value: `http://a:1,http://b:2` (spaces allowed around
/// commas; duplicates kept once).
pub fn parse_endpoints(urls: &str) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for u in urls.split(',').map(str::trim).filter(|u| !u.is_empty()) {
        if !out.contains(&u) {
            out.push(u);
        }
    }
    out
}

impl Channel {
    /// A channel to the comma-separated endpoints `urls` (`http://host:port,…`) with the
    /// default options; connects on first use.
    pub fn lazy(urls: &str) -> Result<Channel, BoxError> {
        Self::with_options(urls, ChannelOptions::default())
    }

    /// A channel to the comma-separated endpoints `urls`: `http://host:port` (`https://`
    /// with mutual TLS), or `dns:///host:port` for every address `host` resolves to, now
    /// and as it changes ([`crate::resolve`]). With more than one endpoint or any
    /// `dns:///` target this starts a health-watch task per endpoint (and a resolver task
    /// per target), so it must run inside a Tokio runtime.
    pub fn with_options(urls: &str, opts: ChannelOptions) -> Result<Channel, BoxError> {
        let list = parse_endpoints(urls);
        if list.is_empty() {
            return Err(format!("no endpoint in {urls:?}").into());
        }
        let (mut fixed, mut resolved) = (Vec::new(), Vec::new());
        for u in list {
            match crate::resolve::parse(u, opts.tls.as_ref()) {
                Some(t) => resolved.push(t?),
                None => fixed.push(Endpoint::new(u, opts.tls.as_ref())?),
            }
        }
        let (single, pool) = if resolved.is_empty() && fixed.len() == 1 {
            (fixed.pop(), None)
        } else {
            let rt = tokio::runtime::Handle::try_current()
                .map_err(|_| "a channel over several endpoints needs a Tokio runtime")?;
            let pool = Pool::start(fixed, resolved, &opts, rt);
            (None, Some(pool))
        };
        Ok(Channel {
            inner: Arc::new(Inner {
                single,
                pool,
                timeout: opts.timeout.map(|d| (d, deadline::encode(d))),
                long_running: opts.long_running,
                read_only: opts.read_only,
            }),
        })
    }

    /// What each endpoint dials (`host:port`, or the address a name resolved to), in the
    /// order they joined.
    pub fn endpoints(&self) -> Vec<String> {
        match (&self.inner.single, &self.inner.pool) {
            (Some(e), _) => vec![e.address()],
            (None, Some(p)) => p
                .table()
                .entries
                .iter()
                .flatten()
                .map(|e| e.endpoint.address())
                .collect(),
            (None, None) => vec![],
        }
    }

    /// Which endpoints calls are spread over now, in [`Channel::endpoints`] order (all
    /// `true` with a single endpoint).
    pub fn in_rotation(&self) -> Vec<bool> {
        match &self.inner.pool {
            None => vec![true],
            Some(p) => p.members.in_rotation(),
        }
    }

    /// The deadline of a call to `path` with `headers`, adding the default `grpc-timeout`.
    fn deadline(&self, headers: &mut http::HeaderMap, path: &str) -> Option<Duration> {
        if let Some(v) = headers.get(deadline::GRPC_TIMEOUT) {
            return deadline::parse(v.as_bytes());
        }
        if self.inner.long_running.contains(&path) {
            return None;
        }
        let (d, v) = self.inner.timeout.as_ref()?;
        headers.insert(deadline::GRPC_TIMEOUT, v.clone());
        Some(*d)
    }

    /// Opens the call's stream on a picked endpoint, moving on to the next pick when one
    /// cannot be reached.
    async fn start(&self, head: &http::Request<()>) -> Result<Started, BoxError> {
        let Some(pool) = &self.inner.pool else {
            let single = self.inner.single.as_ref().expect("an endpoint");
            return single.start(head).await;
        };
        let mut last = None;
        let mut tries = 0;
        while let Some(p) = pool.pick() {
            match p.endpoint.start(head).await {
                Ok(mut s) => {
                    s.load = p.load;
                    return Ok(s);
                }
                Err(e) => {
                    tracing::debug!(endpoint = %p.endpoint.address(), error = %e, "endpoint unreachable; trying another");
                    pool.down(p.key);
                    last = Some(e);
                }
            }
            tries += 1;
            if tries >= p.live {
                break;
            }
        }
        Err(last.unwrap_or_else(|| pool.unresolved()))
    }

    /// A read-only call over several endpoints: its body is read once, and a call whose
    /// connection fails before the answer (the endpoint died under it) is sent again to the
    /// next pick, up to once per endpoint.
    async fn call_read_only(
        &self,
        head: &http::Request<()>,
        body: TonicBody,
    ) -> Result<http::Response<RecvBody>, BoxError> {
        use http_body_util::BodyExt;
        let pool = self.inner.pool.as_ref().expect("several endpoints");
        let body = body.collect().await?.to_bytes();
        let mut last = None;
        let mut tries = 0;
        while let Some(p) = pool.pick() {
            let r = match p.endpoint.start(head).await {
                Ok(mut s) => {
                    s.load = p.load;
                    match client::finish_bytes(s, body.clone()).await {
                        Err(e) if !client::connection_failed(&e) => return Err(e),
                        r => r,
                    }
                }
                Err(e) => Err(e),
            };
            match r {
                Ok(resp) => return Ok(resp),
                Err(e) => {
                    tracing::debug!(endpoint = %p.endpoint.address(), error = %e, "endpoint failed; trying another");
                    pool.down(p.key);
                    last = Some(e);
                }
            }
            tries += 1;
            if tries >= p.live {
                break;
            }
        }
        Err(last.unwrap_or_else(|| pool.unresolved()))
    }

    async fn call_inner(
        self,
        req: http::Request<TonicBody>,
    ) -> Result<http::Response<RecvBody>, BoxError> {
        let (mut parts, body) = req.into_parts();
        CallContext::apply_current(&mut parts.headers);
        // With trace export on, a client span per call whose context is sampled; the callee
        // continues the trace from it.
        let mut span =
            crate::telemetry::child_of_current("grpc.client", crate::telemetry::Kind::Client);
        if let Some(s) = &mut span {
            let path = parts.uri.path().trim_start_matches('/');
            if let Some((service, method)) = path.split_once('/') {
                s.set("rpc.system", "grpc");
                s.set("rpc.service", service.to_string());
                s.set("rpc.method", method.to_string());
            }
            s.rename(path.to_string());
            parts
                .headers
                .insert(crate::context::TRACEPARENT, s.traceparent());
        }
        let limit = self.deadline(&mut parts.headers, parts.uri.path());
        let head = http::Request::from_parts(parts, ());
        let resend = self.inner.pool.is_some() && self.inner.read_only.contains(&head.uri().path());
        let call = async {
            if resend {
                return self.call_read_only(&head, body).await;
            }
            let started = self.start(&head).await?;
            client::finish(started, body).await
        };
        let out: Result<http::Response<RecvBody>, BoxError> = match limit {
            None => call.await,
            Some(d) => match tokio::time::timeout(d, call).await {
                Ok(r) => r,
                Err(_) => Err(Box::new(tonic::Status::deadline_exceeded(format!(
                    "deadline of {d:?} exceeded"
                )))),
            },
        };
        if let Some(mut s) = span {
            match &out {
                Ok(resp) => {
                    if let Some(code) = resp
                        .headers()
                        .get("grpc-status")
                        .and_then(|v| v.to_str().ok()?.parse::<i64>().ok())
                    {
                        s.set_i64("rpc.grpc.status_code", code);
                    }
                }
                Err(e) => s.fail(e.to_string()),
            }
        }
        out
    }
}

impl tower::Service<http::Request<TonicBody>> for Channel {
    type Response = http::Response<RecvBody>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Readiness (connection, stream concurrency) is awaited inside the call.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<TonicBody>) -> Self::Future {
        Box::pin(self.clone().call_inner(req))
    }
}

/// The balancer's view of one endpoint: picking it yields its index.
#[derive(Clone, Copy)]
struct Pick(usize);

impl tower::Service<()> for Pick {
    type Response = usize;
    type Error = std::convert::Infallible;
    type Future = std::future::Ready<Result<usize, Self::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: ()) -> Self::Future {
        std::future::ready(Ok(self.0))
    }
}

/// Keeps the in-flight handle of a pick, to travel with the call until its response body
/// is gone (tower's default would end the count at the response head).
#[derive(Clone, Copy)]
struct KeepHandle;

impl TrackCompletion<Handle, usize> for KeepHandle {
    type Output = (usize, Handle);
    fn track_completion(&self, handle: Handle, idx: usize) -> (usize, Handle) {
        (idx, handle)
    }
}

type Member = PendingRequests<Pick, KeepHandle>;

/// The membership changes the balancer reads (`tower::discover::Discover`).
struct Changes(mpsc::UnboundedReceiver<Change<usize, Member>>);

impl futures::Stream for Changes {
    type Item = Result<Change<usize, Member>, std::convert::Infallible>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_recv(cx).map(|c| c.map(Ok))
    }
}

/// The endpoints of a channel with several, each under a key that is never reused.
struct Pool {
    table: Mutex<Table>,
    members: Arc<Members>,
    /// Round-robin position when no endpoint is in rotation.
    next: AtomicUsize,
    /// Where health-watch tasks run.
    rt: tokio::runtime::Handle,
    /// The `dns:///` targets (for the error of a call made before they resolved).
    targets: Vec<String>,
    resolvers: Mutex<Vec<tokio::task::AbortHandle>>,
}

struct Table {
    balance: Balance<Changes, ()>,
    /// By key; `None` once removed.
    entries: Vec<Option<Entry>>,
    /// How many entries are `Some`.
    live: usize,
}

struct Entry {
    endpoint: Endpoint,
    /// Wakes the endpoint's health task to look again (a call found it failing).
    recheck: Arc<Notify>,
    monitor: tokio::task::AbortHandle,
}

/// The endpoint a call goes to.
struct Picked {
    key: usize,
    endpoint: Endpoint,
    load: Option<Handle>,
    /// How many endpoints the pool had (bounds the tries of one call).
    live: usize,
}

impl Drop for Pool {
    fn drop(&mut self) {
        for r in self
            .resolvers
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            r.abort();
        }
        let t = self.table.get_mut().unwrap_or_else(|e| e.into_inner());
        for e in t.entries.iter().flatten() {
            e.monitor.abort();
        }
    }
}

impl Pool {
    fn start(
        fixed: Vec<Endpoint>,
        resolved: Vec<crate::resolve::Target>,
        opts: &ChannelOptions,
        rt: tokio::runtime::Handle,
    ) -> Arc<Pool> {
        let (tx, rx) = mpsc::unbounded_channel();
        let pool = Arc::new(Pool {
            table: Mutex::new(Table {
                balance: Balance::new(Changes(rx)),
                entries: Vec::new(),
                live: 0,
            }),
            members: Arc::new(Members {
                tx,
                state: Mutex::new(Vec::new()),
            }),
            next: AtomicUsize::new(0),
            rt: rt.clone(),
            targets: resolved
                .iter()
                .map(|t| format!("{}{}:{}", crate::resolve::PREFIX, t.host, t.port))
                .collect(),
            resolvers: Mutex::new(Vec::new()),
        });
        for e in fixed {
            crate::resolve::Membership::add(&*pool, e);
        }
        let resolvers = resolved
            .into_iter()
            .map(|t| {
                rt.spawn(crate::resolve::follow(
                    Arc::downgrade(&pool),
                    t,
                    opts.resolver.clone(),
                    opts.dns_refresh,
                ))
                .abort_handle()
            })
            .collect();
        *pool.resolvers.lock().unwrap_or_else(|e| e.into_inner()) = resolvers;
        pool
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The endpoint for the next call: p2c over those in rotation, else every one in turn;
    /// `None` when the pool has none (a `dns:///` target not resolved yet).
    fn pick(&self) -> Option<Picked> {
        let mut t = self.table();
        let live = t.live;
        // Members are always ready (`Pick`), so nothing here waits on the waker: a Pending
        // only means "no member", handled below.
        let mut cx = Context::from_waker(Waker::noop());
        if let Poll::Ready(Ok(())) = tower::Service::poll_ready(&mut t.balance, &mut cx)
            && let Some(Ok((key, h))) = tower::Service::call(&mut t.balance, ()).now_or_never()
            && let Some(Some(e)) = t.entries.get(key)
        {
            return Some(Picked {
                key,
                endpoint: e.endpoint.clone(),
                load: Some(h),
                live,
            });
        }
        if live == 0 {
            return None;
        }
        let n = self.next.fetch_add(1, Ordering::Relaxed) % live;
        let (key, e) = t
            .entries
            .iter()
            .enumerate()
            .filter_map(|(k, e)| Some((k, e.as_ref()?)))
            .nth(n)?;
        Some(Picked {
            key,
            endpoint: e.endpoint.clone(),
            load: None,
            live,
        })
    }

    /// A call could not reach endpoint `key`: out of rotation until its health says
    /// otherwise.
    fn down(&self, key: usize) {
        self.members.set(key, false);
        if let Some(Some(e)) = self.table().entries.get(key) {
            e.recheck.notify_one();
        }
    }

    /// The error of a call made while the pool has no endpoint.
    fn unresolved(&self) -> BoxError {
        Box::new(tonic::Status::unavailable(format!(
            "{}: no address resolved yet",
            self.targets.join(",")
        )))
    }
}

impl crate::resolve::Membership for Pool {
    fn add(&self, endpoint: Endpoint) -> usize {
        let recheck = Arc::new(Notify::new());
        // Under the table's lock: a pick sees the entry no later than the balancer does.
        let mut t = self.table();
        let key = self.members.push(endpoint.address());
        debug_assert_eq!(key, t.entries.len());
        // In rotation from the start (as gRPC channels are before the first health report).
        self.members.set(key, true);
        let monitor = self
            .rt
            .spawn(monitor(
                self.members.clone(),
                key,
                endpoint.clone(),
                recheck.clone(),
            ))
            .abort_handle();
        t.entries.push(Some(Entry {
            endpoint,
            recheck,
            monitor,
        }));
        t.live += 1;
        key
    }

    fn remove(&self, key: usize) {
        self.members.remove(key);
        let mut t = self.table();
        if let Some(e) = t.entries.get_mut(key).and_then(Option::take) {
            e.monitor.abort();
            t.live -= 1;
        }
    }
}

/// Which endpoints are in rotation; the only writer of the balancer's membership channel.
struct Members {
    tx: mpsc::UnboundedSender<Change<usize, Member>>,
    /// By key.
    state: Mutex<Vec<MemberState>>,
}

struct MemberState {
    /// What the endpoint dials (for logs).
    address: String,
    up: bool,
    /// Removed from the pool: never back in rotation.
    gone: bool,
}

impl Members {
    fn state(&self) -> std::sync::MutexGuard<'_, Vec<MemberState>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new endpoint, out of rotation; returns its key.
    fn push(&self, address: String) -> usize {
        let mut st = self.state();
        st.push(MemberState {
            address,
            up: false,
            gone: false,
        });
        st.len() - 1
    }

    /// Puts endpoint `key` in or out of rotation (no message when nothing changes; changes
    /// are sent under the lock, so they arrive in order).
    fn set(&self, key: usize, up: bool) {
        let mut st = self.state();
        let Some(s) = st.get_mut(key) else { return };
        if s.gone || s.up == up {
            return;
        }
        s.up = up;
        let change = if up {
            Change::Insert(key, PendingRequests::new(Pick(key), KeepHandle))
        } else {
            Change::Remove(key)
        };
        let _ = self.tx.send(change);
        tracing::debug!(endpoint = s.address, up, "endpoint rotation");
    }

    /// Takes endpoint `key` out for good (under one lock, so its health task cannot put it
    /// back in between).
    fn remove(&self, key: usize) {
        let mut st = self.state();
        let Some(s) = st.get_mut(key) else { return };
        s.gone = true;
        if std::mem::take(&mut s.up) {
            let _ = self.tx.send(Change::Remove(key));
        }
    }

    fn in_rotation(&self) -> Vec<bool> {
        self.state()
            .iter()
            .filter(|s| !s.gone)
            .map(|s| s.up)
            .collect()
    }
}

/// Follows endpoint `key`'s `grpc.health.v1` status until the pool ends or removes it.
async fn monitor(members: Arc<Members>, key: usize, endpoint: Endpoint, recheck: Arc<Notify>) {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_client::HealthClient;
    let mut backoff = WATCH_BACKOFF_MIN;
    loop {
        let mut client = HealthClient::new(endpoint.clone());
        let req = HealthCheckRequest {
            service: String::new(),
        };
        match client.watch(req).await {
            Ok(resp) => {
                let mut stream = resp.into_inner();
                loop {
                    tokio::select! {
                        m = stream.message() => match m {
                            Ok(Some(r)) => {
                                let serving = r.status == tonic_health::ServingStatus::Serving as i32;
                                members.set(key, serving);
                                backoff = WATCH_BACKOFF_MIN;
                            }
                            _ => {
                                members.set(key, false);
                                break;
                            }
                        },
                        _ = recheck.notified() => break,
                    }
                }
            }
            Err(s) if s.code() == tonic::Code::Unimplemented => {
                // No health service: answering at all counts as serving.
                members.set(key, true);
                let _ = tokio::time::timeout(NO_HEALTH_RECHECK, recheck.notified()).await;
                continue;
            }
            Err(_) => members.set(key, false),
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(WATCH_BACKOFF_MAX);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn endpoint_lists() {
        let cases: &[(&str, &[&str])] = &[
            ("http://a:1", &["http://a:1"]),
            ("http://a:1,http://b:2", &["http://a:1", "http://b:2"]),
            (" http://a:1 , http://b:2 ,", &["http://a:1", "http://b:2"]),
            ("http://a:1,http://a:1", &["http://a:1"]),
            ("", &[]),
            (",", &[]),
        ];
        for (v, want) in cases {
            assert_eq!(super::parse_endpoints(v), *want, "{v:?}");
        }
    }
}
