//! Lean gRPC transport shared by the crdplane services.
//!
//! Where it sits: under every service's `serve(config, listener)`. tonic's
//! `transport::Server` wraps each service in an axum router, a tower stack and per-request
//! layers; a crdplane service process exposes exactly one gRPC service, so [`serve_one`]
//! hands accepted sockets straight to hyper's HTTP/2 connection driver with the generated
//! tonic service as the request handler. Profiles of the storage service under load showed
//! the router and its per-request parameter maps among the top costs of a unary call.
//!
//! Behaviour kept from tonic's server: `TCP_NODELAY` on every accepted socket (Nagle plus
//! delayed ACKs cost ~40 ms per call), HTTP/2 only (gRPC), large flow-control windows,
//! and HTTP/2 keep-alive pings so dead peers are noticed. Every service also answers
//! `grpc.health.v1` ([`health`]).
//!
//! With `--grpc-tls-*` files ([`mtls`]) every connection is mutual TLS: the services answer
//! only callers holding a certificate of crdplane's services CA (health excepted).
//!
//! Client side: [`Channel`] ([`balance`]) spreads calls over the N endpoints of a service by
//! power-of-two-choices on in-flight calls, leaves out endpoints that report NOT_SERVING or
//! cannot be reached, puts a deadline on every call that is not a watch ([`deadline`]) and
//! carries tenant, user and `traceparent` metadata ([`context`]). One endpoint is one
//! HTTP/2 connection driven by the caller's task ([`client`]).
use std::convert::Infallible;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tonic::body::Body;

/// Serves one tonic service (a generated `…Server<T>`) on `listener` until the process ends,
/// with automatic connection bounds (see [`accept`]) and `grpc.health.v1` beside it,
/// SERVING from the start (see [`health`]).
///
/// Each connection runs in its own task; a connection error ends only that connection, and a
/// failed accept is retried with backoff (Go `net/http` `Server.Serve`).
pub async fn serve_one<S>(listener: tokio::net::TcpListener, svc: S) -> std::io::Result<()>
where
    S: tower::Service<
            http::Request<hyper::body::Incoming>,
            Response = http::Response<Body>,
            Error = Infallible,
        > + tonic::server::NamedService
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    serve_one_with(listener, svc, ServeOptions::default()).await
}

/// How a listener serves: connection bounds and, when set, mutual TLS.
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    /// Connection bounds (0 = automatic, see [`accept`]).
    pub limits: accept::ConnLimits,
    /// Mutual TLS (see [`mtls`]); `None`: plaintext HTTP/2.
    pub tls: Option<mtls::Mtls>,
    /// With mutual TLS, the common names of the callers served ([`mtls::callers`]); empty:
    /// any certificate of the services CA.
    pub callers: &'static [&'static str],
    /// The methods whose responses are server streams (the `grpc_type` of [`metrics`]).
    pub streaming: &'static [&'static str],
    /// Stops the accept loop and drains the connections when it fires ([`shutdown`]).
    pub shutdown: shutdown::Shutdown,
}

/// How long an accepted socket may take to finish its TLS handshake.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// [`serve_one`] with explicit options.
pub async fn serve_one_with<S>(
    listener: tokio::net::TcpListener,
    svc: S,
    opts: ServeOptions,
) -> std::io::Result<()>
where
    S: tower::Service<
            http::Request<hyper::body::Incoming>,
            Response = http::Response<Body>,
            Error = Infallible,
        > + tonic::server::NamedService
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    // A process whose service *is* the health service needs no second one beside it.
    if S::NAME == HEALTH_SERVICE {
        return serve_raw(listener, svc, opts).await;
    }
    let health = health::Health::new(S::NAME, true).await;
    serve_with_health(listener, svc, &health, opts).await
}

/// The gRPC name of `grpc.health.v1.Health`.
const HEALTH_SERVICE: &str = "grpc.health.v1.Health";

/// Serves `svc` with the given health status beside it (for a service whose readiness
/// changes, e.g. storage while Redis is unreachable).
pub async fn serve_with_health<S>(
    listener: tokio::net::TcpListener,
    svc: S,
    health: &health::Health,
    opts: ServeOptions,
) -> std::io::Result<()>
where
    S: tower::Service<
            http::Request<hyper::body::Incoming>,
            Response = http::Response<Body>,
            Error = Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let stopping = {
        let health = health.clone();
        let shutdown = opts.shutdown.clone();
        tokio::spawn(async move {
            shutdown.triggered().await;
            // Before the accept loop stops: balanced callers leave this endpoint out.
            health.set(false).await;
        })
    };
    let served = serve_raw(listener, health::WithHealth::new(svc, health), opts).await;
    stopping.abort();
    served
}

/// The accept loop: every connection served over HTTP/2 by `svc` alone, after a TLS
/// handshake when mutual TLS is configured.
async fn serve_raw<S>(
    listener: tokio::net::TcpListener,
    svc: S,
    opts: ServeOptions,
) -> std::io::Result<()>
where
    S: tower::Service<
            http::Request<hyper::body::Incoming>,
            Response = http::Response<Body>,
            Error = Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let acceptor = accept::Acceptor::new(listener, opts.limits);
    let callers = opts.callers;
    let streaming = opts.streaming;
    let shutdown = opts.shutdown;
    let tls = opts.tls.map(|t| t.serve()).transpose()?;
    let connections = tokio_util::task::TaskTracker::new();
    loop {
        let (sock, peer, guard) = tokio::select! {
            biased;
            _ = shutdown.triggered() => break,
            c = acceptor.accept() => c,
        };
        let _ = sock.set_nodelay(true);
        let svc = svc.clone();
        let tls = tls.clone();
        let shutdown = shutdown.clone();
        connections.spawn(async move {
            match tls {
                None => serve_connection(TokioIo::new(sock), svc, streaming, &shutdown).await,
                Some(tls) => {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.accept(sock)).await {
                        Ok(Ok(stream)) => {
                            let access =
                                mtls::Access::of(stream.get_ref().1.peer_certificates(), callers);
                            let svc = mtls::RequireClientCert::new(svc, access);
                            serve_connection(TokioIo::new(stream), svc, streaming, &shutdown).await
                        }
                        Ok(Err(e)) => {
                            tracing::debug!(%peer, error = %e, "gRPC TLS handshake failed")
                        }
                        Err(_) => tracing::debug!(%peer, "gRPC TLS handshake timed out"),
                    }
                }
            }
            drop(guard);
        });
    }
    // Stopping: no new connection; the open ones got a GOAWAY and end with their calls.
    drop(acceptor);
    connections.close();
    if tokio::time::timeout(shutdown::DRAIN_TIMEOUT, connections.wait())
        .await
        .is_err()
    {
        eprintln!(
            "{} connections still open {:?} after the stop; closing them",
            connections.len(),
            shutdown::DRAIN_TIMEOUT
        );
    }
    Ok(())
}

/// Serves one accepted connection over HTTP/2 until it ends, every call observed by
/// [`metrics`].
async fn serve_connection<I, S>(
    io: I,
    svc: S,
    streaming: &'static [&'static str],
    shutdown: &shutdown::Shutdown,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: tower::Service<
            http::Request<hyper::body::Incoming>,
            Response = http::Response<Body>,
            Error = Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let svc = TowerToHyperService::new(metrics::Observe::new(
        shutdown::EndStreamsOf::new(
            deadline::Enforce(telemetry::ServerSpans::new(svc)),
            streaming,
            shutdown.clone(),
        ),
        streaming,
    ));
    let mut builder = Builder::new(TokioExecutor::new()).http2_only();
    builder
        .http2()
        .timer(TokioTimer::new())
        // tonic's server default: no stream limit (the gateway multiplexes many
        // watches onto one connection).
        .max_concurrent_streams(None)
        // Large fixed windows instead of BDP probing: h2 budgets the framing overhead of
        // small DATA frames against half the connection window, and a burst of small
        // unary requests from a client that ends each one with an empty frame (tonic's
        // own client does) exhausts the default 64 KiB window's budget and draws a
        // GOAWAY `too_many_data_frames`.
        .initial_stream_window_size(4 << 20)
        .initial_connection_window_size(16 << 20)
        .keep_alive_interval(Some(Duration::from_secs(30)))
        .keep_alive_timeout(Duration::from_secs(20));
    let conn = builder.serve_connection(io, svc);
    tokio::pin!(conn);
    let ended = tokio::select! {
        r = conn.as_mut() => r,
        _ = shutdown.triggered() => {
            // GOAWAY: calls in flight finish, streams end (EndStreamsOf), then it closes.
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = ended {
        tracing::debug!(error = %e, "gRPC connection ended");
    }
}

pub mod accept;
pub mod balance;
pub mod client;
pub mod context;
pub mod deadline;
pub mod health;
pub mod logging;
pub mod metrics;
pub mod mtls;
pub mod resolve;
pub mod shutdown;
pub mod telemetry;
pub mod tls;
pub use balance::{Channel, ChannelOptions};
pub use context::CallContext;
pub use shutdown::Shutdown;
