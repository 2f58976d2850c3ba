//! Prometheus metrics of a service process: the gRPC server's request counts and latencies,
//! observed around every call of the accept loop ([`crate::serve_one_with`]), and the
//! `/metrics` listener ([`serve_metrics`]) that Prometheus scrapes.
//!
//! The names and labels are go-grpc-prometheus's (`grpc_server_handled_total`,
//! `grpc_server_handling_seconds`), which dashboards for gRPC services already query. The
//! metrics live in the process's default registry (`prometheus::default_registry()`), as
//! kube-apiserver's live in its `legacyregistry`: a service process has one of each, and
//! the storage, registry and validation crates add their own metrics to the same registry.
//!
//! `--disabled-metrics` (kube's escape hatch for a misbehaving metric, [`MetricsArgs`])
//! names metrics that are neither exposed nor, on the per-call paths (gRPC handling here,
//! Redis round trips and batch sizes in storage), recorded ([`is_enabled`]).
//!
//! A call is counted when it ends: a unary call with its response, a stream when its
//! trailers (the `grpc-status`) pass through. The code is the `grpc-status` of the response
//! head (trailers-only answers) or of the trailers; a stream dropped before it ended counts
//! as `Canceled`.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::LazyLock;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use http_body::Frame;
use prometheus::{HistogramVec, IntCounterVec, Opts};
use tonic::body::Body;

/// Latency buckets of gRPC handling (seconds): go-grpc-prometheus's default
/// `prometheus.DefBuckets`, with finer steps below 5 ms where the services' unary calls fall.
const HANDLING_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The gRPC server metrics of this process.
pub struct GrpcMetrics {
    handled: IntCounterVec,
    handling: HistogramVec,
    /// Whether each is recorded (not `--disabled-metrics`).
    handled_on: bool,
    handling_on: bool,
}

/// The metrics `--disabled-metrics` named, set once at start ([`start`]).
static DISABLED: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

/// Disables the metrics `names` for this process (the first call counts): they are left
/// out of `/metrics`, and the per-call paths stop recording them. Must run before the
/// first call is served, as [`start`] does.
pub fn disable(names: &[String]) {
    let names = names
        .iter()
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
        .collect();
    let _ = DISABLED.set(names);
}

/// Whether metric `name` is recorded and exposed (not named by `--disabled-metrics`).
pub fn is_enabled(name: &str) -> bool {
    DISABLED.get().is_none_or(|d| !d.iter().any(|n| n == name))
}

/// The process's gRPC server metrics, registered in the default registry on first use.
pub static GRPC: LazyLock<GrpcMetrics> = LazyLock::new(|| {
    let handled = IntCounterVec::new(
        Opts::new(
            "grpc_server_handled_total",
            "Total number of RPCs completed on the server, regardless of success or failure.",
        ),
        &["grpc_type", "grpc_service", "grpc_method", "grpc_code"],
    )
    .expect("metric");
    let handling = HistogramVec::new(
        prometheus::HistogramOpts::new(
            "grpc_server_handling_seconds",
            "Histogram of response latency (seconds) of gRPC that had been application-level handled by the server.",
        )
        .buckets(HANDLING_BUCKETS.to_vec()),
        &["grpc_type", "grpc_service", "grpc_method"],
    )
    .expect("metric");
    let r = prometheus::default_registry();
    r.register(Box::new(handled.clone())).expect("register");
    r.register(Box::new(handling.clone())).expect("register");
    GrpcMetrics {
        handled,
        handling,
        handled_on: is_enabled("grpc_server_handled_total"),
        handling_on: is_enabled("grpc_server_handling_seconds"),
    }
});

impl GrpcMetrics {
    /// Calls of `service`/`method` that ended with `code` so far.
    pub fn handled(&self, service: &str, method: &str, code: &str) -> u64 {
        ["unary", "server_stream"]
            .iter()
            .map(|t| {
                self.handled
                    .get_metric_with_label_values(&[t, service, method, code])
                    .map_or(0, |c| c.get())
            })
            .sum()
    }
}

/// The name of gRPC status `code` as go-grpc-prometheus writes it (`codes.Code.String()`).
pub fn code_name(code: i32) -> &'static str {
    match code {
        0 => "OK",
        1 => "Canceled",
        2 => "Unknown",
        3 => "InvalidArgument",
        4 => "DeadlineExceeded",
        5 => "NotFound",
        6 => "AlreadyExists",
        7 => "PermissionDenied",
        8 => "ResourceExhausted",
        9 => "FailedPrecondition",
        10 => "Aborted",
        11 => "OutOfRange",
        12 => "Unimplemented",
        13 => "Internal",
        14 => "Unavailable",
        15 => "DataLoss",
        16 => "Unauthenticated",
        _ => "Unknown",
    }
}

fn status_of(headers: &http::HeaderMap) -> Option<&'static str> {
    let v = headers.get("grpc-status")?;
    let code = std::str::from_utf8(v.as_bytes()).ok()?.parse().ok()?;
    Some(code_name(code))
}

/// One call being observed: its labels and start.
struct Call {
    kind: &'static str,
    service: String,
    method: String,
    start: Instant,
}

impl Call {
    fn of(path: &str, streaming: &[&str]) -> Self {
        let (service, method) = path
            .trim_start_matches('/')
            .split_once('/')
            .unwrap_or(("unknown", "unknown"));
        let kind = if streaming.contains(&method) {
            "server_stream"
        } else {
            "unary"
        };
        Self {
            kind,
            service: service.to_owned(),
            method: method.to_owned(),
            start: Instant::now(),
        }
    }

    fn end(self, code: &str) {
        let m = &*GRPC;
        // The path is the caller's: one the service does not serve (tonic answers
        // Unimplemented) is no label of its own, so no caller can grow the series.
        let (service, method) = if code == "Unimplemented" {
            ("unknown", "unknown")
        } else {
            (self.service.as_str(), self.method.as_str())
        };
        if m.handled_on {
            m.handled
                .with_label_values(&[self.kind, service, method, code])
                .inc();
        }
        if m.handling_on {
            m.handling
                .with_label_values(&[self.kind, service, method])
                .observe(self.start.elapsed().as_secs_f64());
        }
    }
}

/// Observes every call of `S` (see the module docs). `streaming` names the methods whose
/// responses are server streams.
#[derive(Clone)]
pub struct Observe<S> {
    inner: S,
    streaming: &'static [&'static str],
}

impl<S> Observe<S> {
    /// Observes `inner`.
    pub fn new(inner: S, streaming: &'static [&'static str]) -> Self {
        Self { inner, streaming }
    }
}

impl<S, B> tower::Service<http::Request<B>> for Observe<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<Body>, Error = Infallible>,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = ObserveFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let call = Call::of(req.uri().path(), self.streaming);
        ObserveFuture {
            inner: self.inner.call(req),
            call: Some(call),
        }
    }
}

pin_project_lite::pin_project! {
    /// The future of [`Observe`].
    pub struct ObserveFuture<F> {
        #[pin]
        inner: F,
        call: Option<Call>,
    }
}

impl<F> Future for ObserveFuture<F>
where
    F: Future<Output = Result<http::Response<Body>, Infallible>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let Ok(resp) = ready!(this.inner.poll(cx));
        let call = this.call.take().expect("polled after completion");
        // A trailers-only answer (an error, or an empty stream) has its status in the head.
        if let Some(code) = status_of(resp.headers()) {
            call.end(code);
            return Poll::Ready(Ok(resp));
        }
        Poll::Ready(Ok(resp.map(|b| {
            Body::new(Observed {
                inner: b,
                call: Some(call),
            })
        })))
    }
}

/// A response body that records its call when the trailers pass (or when dropped first).
struct Observed {
    inner: Body,
    call: Option<Call>,
}

impl http_body::Body for Observed {
    type Data = bytes::Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<bytes::Bytes>, tonic::Status>>> {
        let out = ready!(Pin::new(&mut self.inner).poll_frame(cx));
        match &out {
            Some(Ok(f)) => {
                if let Some(t) = f.trailers_ref()
                    && let Some(call) = self.call.take()
                {
                    call.end(status_of(t).unwrap_or("OK"));
                }
            }
            Some(Err(s)) => {
                if let Some(call) = self.call.take() {
                    call.end(code_name(s.code() as i32));
                }
            }
            None => {
                if let Some(call) = self.call.take() {
                    call.end("OK");
                }
            }
        }
        Poll::Ready(out)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Observed {
    fn drop(&mut self) {
        if let Some(call) = self.call.take() {
            call.end("Canceled");
        }
    }
}

/// The default registry in Prometheus's text format (version 0.0.4).
pub fn encode() -> Vec<u8> {
    encode_registry(prometheus::default_registry())
}

/// `registry` in Prometheus's text format.
pub fn encode_registry(registry: &prometheus::Registry) -> Vec<u8> {
    use prometheus::Encoder;
    let mut out = Vec::with_capacity(16 << 10);
    let mut families = registry.gather();
    families.retain(|f| is_enabled(f.name()));
    prometheus::TextEncoder::new()
        .encode(&families, &mut out)
        .expect("text encoding into memory");
    out
}

/// The content type of [`encode`]'s output.
pub const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Serves `GET /metrics` (the default registry) over HTTP/1.1 or HTTP/2 on `listener` until the
/// process ends; with `tls`, only to clients holding a certificate of the services CA (the
/// rule of the gRPC port, so a scraper is authenticated the same way a caller is).
pub async fn serve_metrics(
    listener: tokio::net::TcpListener,
    tls: Option<crate::mtls::Mtls>,
) -> std::io::Result<()> {
    let tls = tls.map(|t| t.serve()).transpose()?;
    let acceptor = crate::accept::Acceptor::new(listener, crate::accept::ConnLimits::default());
    loop {
        let (sock, _peer, guard) = acceptor.accept().await;
        let tls = tls.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(|req: http::Request<hyper::body::Incoming>| {
                std::future::ready(Ok::<_, Infallible>(answer(&req)))
            });
            // HTTP/1.1 or HTTP/2 (a TLS client that got `h2` by ALPN, as the gRPC port
            // offers it, speaks HTTP/2).
            let http =
                hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
            match tls {
                None => {
                    let _ = http
                        .serve_connection(hyper_util::rt::TokioIo::new(sock), svc)
                        .await;
                }
                Some(tls) => {
                    let Ok(Ok(stream)) =
                        tokio::time::timeout(crate::HANDSHAKE_TIMEOUT, tls.accept(sock)).await
                    else {
                        return;
                    };
                    // The handshake already required a certificate of the services CA.
                    let _ = http
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                        .await;
                }
            }
            drop(guard);
        });
    }
}

fn answer<B>(req: &http::Request<B>) -> http::Response<http_body_util::Full<bytes::Bytes>> {
    let (status, ctype, body) = if req.uri().path() != "/metrics" {
        (
            http::StatusCode::NOT_FOUND,
            "text/plain",
            b"404 page not found\n".to_vec(),
        )
    } else if req.method() != http::Method::GET && req.method() != http::Method::HEAD {
        (
            http::StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            b"method not allowed\n".to_vec(),
        )
    } else {
        (http::StatusCode::OK, TEXT_FORMAT, encode())
    };
    http::Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, ctype)
        .body(http_body_util::Full::new(bytes::Bytes::from(body)))
        .expect("static response")
}

/// The metrics flag every service process shares.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct MetricsArgs {
    /// Serve Prometheus metrics at `GET /metrics` on this address (HOST:PORT; port 0 picks a
    /// free one, announced on stdout: `crdplane_core::names::announce_metrics`). With the --grpc-tls-*
    /// files it is HTTPS and asks for a client certificate of the services CA, as the gRPC
    /// port does. Unset: no metrics listener.
    #[arg(long, env = "CRDPLANE_METRICS_LISTEN")]
    pub metrics_listen: Option<String>,
    /// Metrics not to record or expose, by full name (kube-apiserver's --disabled-metrics,
    /// its escape hatch for a misbehaving metric), comma-separated.
    #[arg(long, env = "CRDPLANE_DISABLED_METRICS", value_delimiter = ',')]
    pub disabled_metrics: Vec<String>,
}

/// Binds the metrics listener of `args` (if any), announces it on stdout and serves it in
/// the background ([`serve_metrics`]); called by each service's `main` before it serves.
pub async fn start(args: &MetricsArgs, tls: &crate::mtls::MtlsArgs) -> anyhow::Result<()> {
    disable(&args.disabled_metrics);
    let Some(addr) = &args.metrics_listen else {
        return Ok(());
    };
    let tls = tls.load().map_err(anyhow::Error::msg)?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("--metrics-listen {addr}: {e}"))?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    crdplane_core::names::announce_metrics(scheme, listener.local_addr()?);
    tokio::spawn(async move {
        if let Err(e) = serve_metrics(listener, tls).await {
            tracing::error!(error = %e, "metrics listener ended");
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_named_as_grpc_go_names_them() {
        assert_eq!(code_name(0), "OK");
        assert_eq!(code_name(4), "DeadlineExceeded");
        assert_eq!(code_name(14), "Unavailable");
        assert_eq!(code_name(99), "Unknown");
    }

    #[test]
    fn a_disabled_family_is_left_out_of_the_exposition() {
        // The only test of this binary that sets the process's list.
        disable(&[" crdplane_test_disabled_total ".to_string(), String::new()]);
        assert!(!is_enabled("crdplane_test_disabled_total"));
        assert!(is_enabled("crdplane_test_kept_total"));
        let r = prometheus::Registry::new();
        for name in ["crdplane_test_disabled_total", "crdplane_test_kept_total"] {
            let c = prometheus::IntCounter::new(name, "test").unwrap();
            c.inc();
            r.register(Box::new(c)).unwrap();
        }
        let text = String::from_utf8(encode_registry(&r)).unwrap();
        assert!(text.contains("crdplane_test_kept_total 1"), "{text}");
        assert!(!text.contains("crdplane_test_disabled_total"), "{text}");
    }

    #[test]
    fn unknown_methods_share_one_series() {
        for path in ["/made.Up/One", "/made.Up/Two"] {
            Call::of(path, &[]).end("Unimplemented");
        }
        assert_eq!(GRPC.handled("unknown", "unknown", "Unimplemented"), 2);
        assert_eq!(GRPC.handled("made.Up", "One", "Unimplemented"), 0);
    }

    #[test]
    fn the_path_names_service_and_method() {
        let c = Call::of("/crdplane.storage.v1.Storage/Watch", &["Watch"]);
        assert_eq!(
            (c.kind, c.service.as_str(), c.method.as_str()),
            ("server_stream", "crdplane.storage.v1.Storage", "Watch")
        );
        let c = Call::of("/crdplane.storage.v1.Storage/Get", &["Watch"]);
        assert_eq!(c.kind, "unary");
    }
}
