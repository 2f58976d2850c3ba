//! The accept loop: where the gateway's request path starts. On a plain-HTTP gateway
//! (`--insecure-http`) each accepted TCP connection is served HTTP/1.1 by crdplane-http1 or,
//! when it opens with the HTTP/2 preface, HTTP/2 by hyper; on a TLS gateway the connection is
//! handshaken first (`crdplane_transport::tls`) and served as ALPN chose ([`serve_tls`]):
//! HTTP/2 by hyper, HTTP/1.1 by crdplane-http1 over the TLS session. All hand every request
//! to the same edge service ([`crate::stack`]), whose innermost layer is the router
//! ([`crate::api::Router`]).
//!
//! As kube-apiserver's serving (staging/src/k8s.io/apiserver/pkg/server/secure_serving.go):
//! Go's `http.DefaultMaxHeaderBytes` for the head, `ReadHeaderTimeout` and `IdleTimeout`
//! from the configuration, 1000 concurrent HTTP/2 streams per connection.

use crate::api::Router;
use crate::context::{Config, Ctx};
use crate::filters::authentication::PeerCertificates;
use crate::filters::limits;
use crate::http::Body;
use crate::http::Payload;
use crate::stack;
use crate::watch_limit::ClientKey;
use http::{Request, Response};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use tower::ServiceExt;

/// Serves the Kubernetes API on `listener` until `shutdown` fires, then stops as
/// kube-apiserver does: `/readyz` fails at once, the listener closes after
/// `--shutdown-delay-duration`, then the connections drain (`drain` below).
///
/// The accept loop never fails (accept errors back off as Go's `net/http` does) and admits
/// connections within `cfg.connections` (see `crdplane_transport::accept`).
pub async fn serve(
    cfg: Config,
    listener: tokio::net::TcpListener,
    shutdown: crdplane_transport::Shutdown,
) -> anyhow::Result<()> {
    // One copy for the process; each connection holds a reference, not its own copy.
    let limits: &'static crdplane_http1::Limits = Box::leak(Box::new(http1_limits(&cfg)));
    let acceptor = crdplane_transport::accept::Acceptor::new(listener, cfg.connections);
    let tls = cfg.tls.clone();
    let handshake_timeout = cfg.request_header_timeout;
    if let Some(t) = &cfg.grpc_tls {
        t.spawn_reloader();
    }
    let delay = cfg.shutdown_delay;
    let drain_timeout = cfg.request_timeout;
    let ctx = Ctx::stopped_by(cfg, shutdown.clone())?;
    let closing = ctx.closing.clone();
    let mut settings = stack::Settings::new(&ctx.cfg, ctx.metrics.clone());
    ctx.spawn_cache_followers();
    crate::tenant_purge::spawn(&ctx);
    settings.authz = Some(ctx.clone());
    let edge = stack::build(&settings, Router::new(ctx));
    let tls = tls.map(|t| {
        t.spawn_reloader(crdplane_transport::tls::RELOAD_EVERY);
        (t.acceptor(), handshake_timeout, limits)
    });
    let connections = tokio_util::task::TaskTracker::new();
    // Requests are accepted until the stop, and for `delay` after it.
    let mut closing_at = None;
    loop {
        let (sock, peer, guard) = tokio::select! {
            biased;
            _ = shutdown.triggered(), if closing_at.is_none() => {
                tracing::info!(delay = ?delay, "stopping: /readyz fails; the listener closes after the delay");
                closing_at = Some(tokio::time::Instant::now() + delay);
                continue;
            }
            _ = sleep_until(closing_at) => break,
            c = acceptor.accept() => c,
        };
        let _ = sock.set_nodelay(true);
        let edge = edge.clone();
        let tls = tls.clone();
        let closing = closing.clone();
        connections.spawn(serve_connection(
            edge,
            sock,
            peer.ip(),
            limits,
            tls,
            closing,
            guard,
        ));
    }
    closing.trigger();
    drain(acceptor, connections, drain_timeout).await;
    Ok(())
}

/// The edge service as the connection tasks hold it: one copy per connection, called with
/// each of its requests (`answer`).
pub trait Edge:
    tower::Service<Request<Payload>, Response = Response<Body>, Error = Infallible, Future: Send>
    + Clone
    + Send
    + 'static
{
}

impl<S> Edge for S where
    S: tower::Service<
            Request<Payload>,
            Response = Response<Body>,
            Error = Infallible,
            Future: Send,
        > + Clone
        + Send
        + 'static
{
}

/// What a TLS listener adds to a connection: the acceptor, the handshake timeout and the
/// HTTP/1.1 limits of the TLS path.
type TlsPath = (
    tokio_rustls::TlsAcceptor,
    std::time::Duration,
    &'static crdplane_http1::Limits,
);

/// One accepted connection, plain or TLS: the future each connection task holds.
///
/// A connection task keeps a slot the size of its future for its whole life (an idle watch
/// lives for hours), and a future is as large as its largest state: the TLS path (the
/// handshake and the session) and the HTTP/2 path are boxed, so that a plain HTTP/1.1
/// connection does not carry their size (the TLS path alone was about 5 KB more per
/// HTTP/1.1 watcher). It is spawned as it is, with the connection's `guard` (its slot in
/// the connection limits), not inside another async block: each level of async nesting
/// keeps its own copy of the arguments.
async fn serve_connection<S, G>(
    edge: S,
    sock: tokio::net::TcpStream,
    peer: std::net::IpAddr,
    limits: &'static crdplane_http1::Limits,
    tls: Option<TlsPath>,
    closing: crdplane_transport::Shutdown,
    guard: G,
) where
    S: Edge,
{
    match tls {
        None => serve_socket(edge, sock, peer, limits, &closing).await,
        Some((acceptor, timeout, limits)) => {
            Box::pin(serve_tls(
                edge, acceptor, timeout, limits, sock, peer, &closing,
            ))
            .await
        }
    }
    drop(guard);
}

/// Resolves at `at`, never when there is none.
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// The end of a graceful stop (k8s.io/apiserver `genericapiserver.go`, after
/// `NotAcceptingNewRequest`): the listener closes; the connections, told by the closing
/// signal, finish their requests in flight and close (watches end on the same signal; idle
/// connections close at once). Waits for them at most `timeout`, the longest a
/// non-long-running request may take anyway (`--request-timeout`).
async fn drain(
    acceptor: crdplane_transport::accept::Acceptor,
    connections: tokio_util::task::TaskTracker,
    timeout: std::time::Duration,
) {
    drop(acceptor);
    connections.close();
    if tokio::time::timeout(timeout, connections.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            open = connections.len(),
            "connections still open {timeout:?} after the listener closed; stopping anyway"
        );
    }
}

/// One TLS client connection: the handshake (within the head timeout, as Go's
/// `ReadHeaderTimeout` covers it), then HTTP/2 by hyper when ALPN chose `h2`, else HTTP/1.1
/// by crdplane-http1 over the session (`crdplane_http1::tls`), both into `edge`. The client's
/// certificate chain, if it sent one, rides in every request's extensions for the
/// authentication layer.
pub async fn serve_tls<S>(
    edge: S,
    acceptor: tokio_rustls::TlsAcceptor,
    handshake_timeout: std::time::Duration,
    limits: &'static crdplane_http1::Limits,
    sock: tokio::net::TcpStream,
    peer: std::net::IpAddr,
    closing: &crdplane_transport::Shutdown,
) where
    S: Edge,
{
    // The handshake's state is boxed and freed once it is done: inline, its size would stay
    // in this future for the connection's life (see `serve_connection`).
    let handshake = Box::pin(acceptor.accept(sock));
    let stream = match tokio::time::timeout(handshake_timeout, handshake).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::debug!(%peer, "TLS handshake failed: {e}");
            return;
        }
        Err(_) => return,
    };
    let (_, conn) = stream.get_ref();
    let h2 = conn.alpn_protocol() == Some(b"h2");
    let certs = conn
        .peer_certificates()
        .filter(|c| !c.is_empty())
        .map(|c| Arc::new(PeerCertificates::new(c.to_vec())));
    if !h2 {
        let (sock, session) = stream.into_inner();
        let Ok(mut conn) = crdplane_http1::tls::TlsConnection::new(sock, session).await else {
            return;
        };
        let handler = http1_handler(edge, peer, certs);
        // A TLS session is never handed back (no HTTP/2 preface over HTTP/1.1).
        let served = crdplane_http1::serve_connection_until(
            &mut conn,
            handler,
            limits::too_large,
            limits,
            closing.triggered(),
        )
        .await;
        if served.is_ok() {
            conn.close();
        }
        return;
    }
    let svc = h2_service(edge, peer, certs);
    let io = hyper_util::rt::TokioIo::new(stream);
    serve_h2(io, svc, closing).await;
}

/// Bounds of the HTTP/1.1 layer: Go's `http.DefaultMaxHeaderBytes` (1 MiB) for the head,
/// upstream's `MaxRequestBodyBytes` for the body, the configured head and idle timeouts.
pub fn http1_limits(cfg: &Config) -> crdplane_http1::Limits {
    crdplane_http1::Limits {
        max_head: 1 << 20,
        max_headers: crdplane_http1::MAX_HEADERS,
        max_body: limits::MAX_BODY,
        header_timeout: cfg.request_header_timeout,
        idle_timeout: cfg.idle_timeout,
    }
}

/// A response future as the connection tasks hold it. Boxed: a connection task keeps a slot
/// the size of this future for its whole life, and most connections of a watch-heavy gateway
/// are idle watches.
type Answer = Pin<Box<dyn Future<Output = Response<Body>> + Send>>;

/// Calls a connection's own copy of the edge service with one request from `peer`.
///
/// The copy is called in place, not cloned per request: cloning the edge clones every
/// layer's shared state (about a dozen reference counts, written by both cores on every
/// request). No layer holds a request back in `poll_ready` (waiting — fairness, limits —
/// happens in the response futures), so a single poll with a no-op waker finds the edge
/// ready; should a layer ever not be, the request goes through a clone of its own, as
/// `tower::ServiceExt::oneshot` would.
fn answer<S>(edge: &mut S, mut req: Request<Payload>, peer: std::net::IpAddr) -> Answer
where
    S: Edge,
{
    req.extensions_mut().insert(ClientKey::Address(peer));
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match edge.poll_ready(&mut cx) {
        std::task::Poll::Ready(Ok(())) => boxed(edge.call(req)),
        std::task::Poll::Ready(Err(never)) => match never {},
        std::task::Poll::Pending => boxed(edge.clone().oneshot(req)),
    }
}

/// A response future of the edge, boxed as the connection tasks hold it.
fn boxed<F>(fut: F) -> Answer
where
    F: Future<Output = Result<Response<Body>, Infallible>> + Send + 'static,
{
    Box::pin(async move {
        match fut.await {
            Ok(r) => r,
            Err(never) => match never {},
        }
    })
}

/// What crdplane-http1 calls with each request of a connection from `peer`: the
/// connection's copy of the edge, with the client's certificate chain (TLS) in the request's
/// extensions.
fn http1_handler<S>(
    mut edge: S,
    peer: std::net::IpAddr,
    certs: Option<Arc<PeerCertificates>>,
) -> impl FnMut(http::request::Parts, bytes::Bytes) -> Answer
where
    S: Edge,
{
    move |mut parts, body| {
        if let Some(c) = &certs {
            parts.extensions.insert(c.clone());
        }
        answer(
            &mut edge,
            Request::from_parts(parts, Payload::Read(body)),
            peer,
        )
    }
}

/// hyper's service for one HTTP/2 connection: the connection's copy of the edge, called in
/// place (hyper calls its service through a shared reference, one call at a time, from the
/// connection's task).
fn h2_service<S>(
    edge: S,
    peer: std::net::IpAddr,
    certs: Option<Arc<PeerCertificates>>,
) -> impl hyper::service::Service<
    Request<hyper::body::Incoming>,
    Response = Response<Body>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<Body>, Infallible>> + Send + 'static,
> + Send
where
    S: Edge,
{
    let edge = std::cell::RefCell::new(edge);
    hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
        let mut req = req.map(Payload::Incoming);
        if let Some(c) = &certs {
            req.extensions_mut().insert(c.clone());
        }
        let fut = answer(&mut *edge.borrow_mut(), req, peer);
        async move { Ok::<_, Infallible>(fut.await) }
    })
}

/// One client connection: HTTP/1.1 through crdplane-http1, HTTP/2 (prior knowledge) through
/// hyper, both into `edge`.
pub async fn serve_socket<S>(
    edge: S,
    sock: tokio::net::TcpStream,
    peer: std::net::IpAddr,
    limits: &'static crdplane_http1::Limits,
    closing: &crdplane_transport::Shutdown,
) where
    S: Edge,
{
    let handler = http1_handler(edge.clone(), peer, None);
    let Ok(Some(h2)) = crdplane_http1::serve_connection_until(
        sock,
        handler,
        limits::too_large,
        limits,
        closing.triggered(),
    )
    .await
    else {
        return;
    };
    let svc = h2_service(edge, peer, None);
    let io = hyper_util::rt::TokioIo::new(crdplane_http1::Rewind::new(h2));
    // Boxed: hyper's HTTP/2 connection state would otherwise size every HTTP/1.1 connection.
    Box::pin(serve_h2(io, svc, closing)).await;
}

/// Serves one HTTP/2 connection; when the process stops, a GOAWAY lets the streams in
/// flight finish (watches end on the same signal) and then the connection closes.
async fn serve_h2<I, S>(io: I, svc: S, closing: &crdplane_transport::Shutdown)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin,
    S: hyper::service::Service<
            Request<hyper::body::Incoming>,
            Response = Response<Body>,
            Error = Infallible,
        >,
    S::Future: Send + 'static,
{
    let builder = h2_server();
    let conn = builder.serve_connection(io, svc);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = closing.triggered() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

/// hyper's HTTP/2 server as the gateway runs it: HTTP/2 clients multiplex all their
/// watches over one connection, and kube-apiserver allows 1000 streams per connection
/// (http2MaxStreamsPerConnection).
fn h2_server() -> hyper::server::conn::http2::Builder<hyper_util::rt::TokioExecutor> {
    let mut builder =
        hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new());
    builder.max_concurrent_streams(1000);
    builder
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An edge that counts its clones and answers 200, or 503 while not ready; `ready` is
    /// what `poll_ready` says (a clone is always ready).
    struct Counting {
        clones: Arc<std::sync::atomic::AtomicUsize>,
        ready: bool,
    }

    impl Clone for Counting {
        fn clone(&self) -> Self {
            self.clones
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Counting {
                clones: self.clones.clone(),
                ready: true,
            }
        }
    }

    impl tower::Service<Request<Payload>> for Counting {
        type Response = Response<Body>;
        type Error = Infallible;
        type Future = std::future::Ready<Result<Response<Body>, Infallible>>;

        fn poll_ready(
            &mut self,
            _cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Result<(), Infallible>> {
            if self.ready {
                std::task::Poll::Ready(Ok(()))
            } else {
                std::task::Poll::Pending
            }
        }

        fn call(&mut self, _req: Request<Payload>) -> Self::Future {
            let code = if self.ready {
                http::StatusCode::OK
            } else {
                http::StatusCode::SERVICE_UNAVAILABLE
            };
            std::future::ready(Ok(crate::http::text_response(code, "")))
        }
    }

    fn get() -> Request<Payload> {
        Request::new(Payload::Read(bytes::Bytes::new()))
    }

    /// A connection's requests go to its own copy of the edge, in place: no request clones
    /// the edge (a clone writes every layer's shared reference counts). An edge that is not
    /// ready still answers, through a clone of its own.
    #[tokio::test]
    async fn requests_call_the_connections_edge_in_place() {
        let peer = std::net::IpAddr::from([127, 0, 0, 1]);
        let clones = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut edge = Counting {
            clones: clones.clone(),
            ready: true,
        };
        for _ in 0..3 {
            assert_eq!(answer(&mut edge, get(), peer).await.status(), 200);
        }
        let mut handler = http1_handler(edge, peer, None);
        for _ in 0..3 {
            let (parts, _) = get().into_parts();
            assert_eq!(handler(parts, bytes::Bytes::new()).await.status(), 200);
        }
        assert_eq!(clones.load(std::sync::atomic::Ordering::SeqCst), 0);

        let mut busy = Counting {
            clones: clones.clone(),
            ready: false,
        };
        assert_eq!(answer(&mut busy, get(), peer).await.status(), 200);
        assert_eq!(clones.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    /// What each open connection holds for its whole life stays small: the plain HTTP/1.1
    /// path does not carry the TLS, HTTP/2 or response-write states inline (see
    /// [`serve_connection`]).
    #[tokio::test]
    async fn a_connection_task_does_not_carry_the_tls_h2_or_write_states() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let _client = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (sock, peer) = listener.accept().await.unwrap();
        let edge = tower::service_fn(|_req: Request<Payload>| async {
            Ok::<_, Infallible>(crate::http::text_response(http::StatusCode::OK, ""))
        });
        let limits: &'static crdplane_http1::Limits = Box::leak(Box::new(crdplane_http1::Limits {
            max_head: 1 << 20,
            max_headers: crdplane_http1::MAX_HEADERS,
            max_body: 1 << 20,
            header_timeout: std::time::Duration::from_secs(1),
            idle_timeout: std::time::Duration::from_secs(1),
        }));
        let closing = crdplane_transport::Shutdown::new();
        let plain = std::mem::size_of_val(&serve_socket(edge, sock, peer.ip(), limits, &closing));
        let (sock, peer) = {
            let _c = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
                .await
                .unwrap();
            listener.accept().await.unwrap()
        };
        let task = std::mem::size_of_val(&serve_connection(
            edge,
            sock,
            peer.ip(),
            limits,
            None,
            closing.clone(),
            (),
        ));
        assert!(
            task <= plain + 256,
            "a connection task's future is {task} bytes, its HTTP/1.1 path {plain}"
        );
        // Nor the HTTP/2 path's or a response write's: 2,328 bytes before they were boxed
        // (this test's build), 1,344 after.
        assert!(
            plain <= 1_800,
            "an HTTP/1.1 connection's future is {plain} bytes"
        );
    }
}
