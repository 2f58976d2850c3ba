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
//! With one endpoint there is nothing to choose: calls go straight to it (no balancer, no
//! health task), exactly as before replicas existed.
//!
//! Per-call cost over a single endpoint, all in the caller's task (no `tower::buffer` worker
//! and no extra task hand-off): one uncontended `std::sync::Mutex` around the balancer, its
//! `poll_ready` (a non-blocking look at the membership channel, p2c over two loads) and one
//! small allocation (the balancer's `FuturesUnordered` node for the endpoint it re-readies);
//! a reference-count increment for the in-flight handle; the deadline's timer entry and a
//! clone of the pre-encoded `grpc-timeout` value; up to three header clones (shared bytes)
//! for the call context.

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
    endpoints: Vec<Endpoint>,
    /// With more than one endpoint.
    pool: Option<Pool>,
    /// The default deadline and its `grpc-timeout` value, encoded once.
    timeout: Option<(Duration, HeaderValue)>,
    long_running: &'static [&'static str],
    read_only: &'static [&'static str],
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("endpoints", &self.inner.endpoints)
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

    /// A channel to the comma-separated endpoints `urls`. With more than one endpoint this
    /// starts a health-watch task per endpoint, so it must run inside a Tokio runtime.
    pub fn with_options(urls: &str, opts: ChannelOptions) -> Result<Channel, BoxError> {
        let list = parse_endpoints(urls);
        if list.is_empty() {
            return Err(format!("no endpoint in {urls:?}").into());
        }
        let endpoints = list
            .iter()
            .map(|u| Endpoint::new(u, opts.tls.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        let pool = if endpoints.len() > 1 {
            let rt = tokio::runtime::Handle::try_current()
                .map_err(|_| "a channel over several endpoints needs a Tokio runtime")?;
            Some(Pool::start(&endpoints, &rt))
        } else {
            None
        };
        Ok(Channel {
            inner: Arc::new(Inner {
                endpoints,
                pool,
                timeout: opts.timeout.map(|d| (d, deadline::encode(d))),
                long_running: opts.long_running,
                read_only: opts.read_only,
            }),
        })
    }

    /// `host:port` of each endpoint, in configuration order.
    pub fn endpoints(&self) -> Vec<&str> {
        self.inner
            .endpoints
            .iter()
            .map(Endpoint::authority)
            .collect()
    }

    /// Which endpoints calls are spread over now (all `true` with a single endpoint).
    pub fn in_rotation(&self) -> Vec<bool> {
        match &self.inner.pool {
            None => vec![true],
            Some(p) => p
                .members
                .state
                .iter()
                .map(|s| *s.lock().unwrap_or_else(|e| e.into_inner()))
                .collect(),
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
            return self.inner.endpoints[0].start(head).await;
        };
        let mut last = None;
        for _ in 0..self.inner.endpoints.len() {
            let (idx, load) = pool.pick();
            match self.inner.endpoints[idx].start(head).await {
                Ok(mut s) => {
                    s.load = load;
                    return Ok(s);
                }
                Err(e) => {
                    tracing::debug!(endpoint = self.inner.endpoints[idx].authority(), error = %e, "endpoint unreachable; trying another");
                    pool.members.down(idx);
                    last = Some(e);
                }
            }
        }
        Err(last.expect("at least one endpoint"))
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
        for _ in 0..self.inner.endpoints.len() {
            let (idx, load) = pool.pick();
            let ep = &self.inner.endpoints[idx];
            let r = match ep.start(head).await {
                Ok(mut s) => {
                    s.load = load;
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
                    tracing::debug!(endpoint = ep.authority(), error = %e, "endpoint failed; trying another");
                    pool.members.down(idx);
                    last = Some(e);
                }
            }
        }
        Err(last.expect("at least one endpoint"))
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

struct Pool {
    balance: Mutex<Balance<Changes, ()>>,
    members: Arc<Members>,
    /// Round-robin position when no endpoint is in rotation.
    next: AtomicUsize,
    monitors: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Pool {
    fn drop(&mut self) {
        for m in &self.monitors {
            m.abort();
        }
    }
}

impl Pool {
    fn start(endpoints: &[Endpoint], rt: &tokio::runtime::Handle) -> Pool {
        let (tx, rx) = mpsc::unbounded_channel();
        let members = Arc::new(Members {
            endpoints: endpoints.to_vec(),
            tx,
            state: endpoints.iter().map(|_| Mutex::new(false)).collect(),
            recheck: endpoints.iter().map(|_| Notify::new()).collect(),
        });
        for i in 0..endpoints.len() {
            members.set(i, true);
        }
        let monitors = (0..endpoints.len())
            .map(|i| rt.spawn(monitor(members.clone(), i)))
            .collect();
        Pool {
            balance: Mutex::new(Balance::new(Changes(rx))),
            members,
            next: AtomicUsize::new(0),
            monitors,
        }
    }

    /// The endpoint for the next call: p2c over those in rotation, else every one in turn.
    fn pick(&self) -> (usize, Option<Handle>) {
        {
            let mut b = self.balance.lock().unwrap_or_else(|e| e.into_inner());
            // Members are always ready (`Pick`), so nothing here waits on the waker: a
            // Pending only means "no member", handled below.
            let mut cx = Context::from_waker(Waker::noop());
            if let Poll::Ready(Ok(())) = tower::Service::poll_ready(&mut *b, &mut cx)
                && let Some(Ok((idx, h))) = tower::Service::call(&mut *b, ()).now_or_never()
            {
                return (idx, Some(h));
            }
        }
        let n = self.members.endpoints.len();
        (self.next.fetch_add(1, Ordering::Relaxed) % n, None)
    }
}

/// Which endpoints are in rotation; the only writer of the balancer's membership channel.
struct Members {
    endpoints: Vec<Endpoint>,
    tx: mpsc::UnboundedSender<Change<usize, Member>>,
    state: Vec<Mutex<bool>>,
    /// Wakes an endpoint's health task to look again (a call found it failing).
    recheck: Vec<Notify>,
}

impl Members {
    /// Puts endpoint `i` in or out of rotation (no message when nothing changes; changes of
    /// one endpoint are sent under its lock, so they arrive in order).
    fn set(&self, i: usize, up: bool) {
        let mut s = self.state[i].lock().unwrap_or_else(|e| e.into_inner());
        if *s == up {
            return;
        }
        *s = up;
        let change = if up {
            Change::Insert(i, PendingRequests::new(Pick(i), KeepHandle))
        } else {
            Change::Remove(i)
        };
        let _ = self.tx.send(change);
        tracing::debug!(
            endpoint = self.endpoints[i].authority(),
            up,
            "endpoint rotation"
        );
    }

    /// A call could not reach endpoint `i`: out of rotation until its health says otherwise.
    fn down(&self, i: usize) {
        self.set(i, false);
        self.recheck[i].notify_one();
    }
}

/// Follows endpoint `i`'s `grpc.health.v1` status for as long as the channel lives.
async fn monitor(members: Arc<Members>, i: usize) {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_client::HealthClient;
    let mut backoff = WATCH_BACKOFF_MIN;
    loop {
        let mut client = HealthClient::new(members.endpoints[i].clone());
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
                                members.set(i, serving);
                                backoff = WATCH_BACKOFF_MIN;
                            }
                            _ => {
                                members.set(i, false);
                                break;
                            }
                        },
                        _ = members.recheck[i].notified() => break,
                    }
                }
            }
            Err(s) if s.code() == tonic::Code::Unimplemented => {
                // No health service: answering at all counts as serving.
                members.set(i, true);
                let _ =
                    tokio::time::timeout(NO_HEALTH_RECHECK, members.recheck[i].notified()).await;
                continue;
            }
            Err(_) => members.set(i, false),
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
