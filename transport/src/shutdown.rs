//! Graceful stop of a crdplane process: SIGTERM or SIGINT ends serving without cutting
//! acknowledged work short.
//!
//! Where it sits: every binary's `main` makes one [`Shutdown`] with [`Shutdown::on_signals`]
//! and hands it to its library's `serve(config, listener, shutdown)`; tests trigger one by
//! hand. The accept loops stop on it, and the connections they spawned drain:
//!
//! - **gRPC services** ([`crate::serve_with_health`]): the health status turns NOT_SERVING,
//!   no connection is accepted any more, every HTTP/2 connection gets a GOAWAY so callers
//!   open no new calls on it, unary calls in flight run to their end, and server streams
//!   (storage watches) end with `UNAVAILABLE` ([`EndStreams`]) so their callers resume
//!   elsewhere. The process waits for its connections at most [`DRAIN_TIMEOUT`].
//! - **The gateway** follows kube-apiserver's graceful termination
//!   (k8s.io/apiserver `pkg/server/genericapiserver.go`, `RunWithContext`): `/readyz`
//!   fails its `shutdown` check at once, requests are still accepted for
//!   `--shutdown-delay-duration`, then the listener closes, watches end, idle connections
//!   close and each request in flight finishes (HTTP/1.1 answers it with
//!   `Connection: close`, HTTP/2 with a GOAWAY).
//!
//! When `serve` returns, `main` returns and the trace exporter's guard flushes the spans
//! still batched ([`crate::telemetry`]).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// How long a service waits for its connections after it stopped accepting. Unary calls
/// carry deadlines shorter than this ([`crate::deadline`]), so only a peer that does not
/// close its side after the GOAWAY is cut off.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(15);

/// A stop signal shared by the accept loop, its connections and long-running responses.
/// Cloning shares it; [`Default`] is one that nothing triggers unless asked to.
#[derive(Debug, Clone, Default)]
pub struct Shutdown(CancellationToken);

impl Shutdown {
    /// A signal that only [`Shutdown::trigger`] fires.
    pub fn new() -> Self {
        Self::default()
    }

    /// A signal fired by the first SIGTERM or SIGINT this process receives (from then on,
    /// those signals no longer end the process at once). Must be called inside a Tokio
    /// runtime.
    pub fn on_signals() -> std::io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        let s = Self::new();
        let fire = s.clone();
        tokio::spawn(async move {
            let name = tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            };
            // stderr: the services' log files, whatever the tracing filter.
            eprintln!("{name} received: stopping gracefully");
            fire.trigger();
        });
        Ok(s)
    }

    /// Fires the signal (again is a no-op).
    pub fn trigger(&self) {
        self.0.cancel();
    }

    /// Whether the signal has fired.
    pub fn is_triggered(&self) -> bool {
        self.0.is_cancelled()
    }

    /// Resolves once the signal has fired.
    pub async fn triggered(&self) {
        self.0.cancelled().await
    }

    /// [`Shutdown::triggered`] as a future that owns its share of the signal (for a task or
    /// a response body that outlives the caller).
    pub fn triggered_owned(&self) -> WaitForCancellationFutureOwned {
        self.0.clone().cancelled_owned()
    }
}

/// A gRPC server-stream response body that ends, with the trailers `grpc-status: 14`
/// (UNAVAILABLE) and a message saying why, when the process stops. A stream cut without
/// trailers looks like a broken connection to its caller; this one is a clean status that
/// the caller's retry resumes from (the gateway's shared watch resumes from its last
/// revision on another replica).
pub struct EndStreams {
    inner: tonic::body::Body,
    stop: Option<Pin<Box<WaitForCancellationFutureOwned>>>,
}

impl EndStreams {
    /// Wraps `inner`, to end it when `shutdown` fires.
    pub fn new(inner: tonic::body::Body, shutdown: &Shutdown) -> Self {
        Self {
            inner,
            stop: Some(Box::pin(shutdown.triggered_owned())),
        }
    }
}

impl HttpBody for EndStreams {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Some(stop) = self.stop.as_mut() {
            if stop.as_mut().poll(cx).is_ready() {
                self.stop = None;
                let mut trailers = http::HeaderMap::new();
                trailers.insert("grpc-status", http::HeaderValue::from_static("14"));
                trailers.insert(
                    "grpc-message",
                    http::HeaderValue::from_static("the server is shutting down"),
                );
                return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
            }
        } else {
            // The closing trailers went out: the stream is over.
            return Poll::Ready(None);
        }
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.stop.is_none() || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The health service's server stream, which balanced callers hold open on every
/// connection ([`crate::balance`]).
const HEALTH_WATCH: &str = "/grpc.health.v1.Health/Watch";

/// Wraps the responses of the server-stream methods (by method name, as
/// [`crate::ServeOptions::streaming`] lists them, and the health service's `Watch`) in
/// [`EndStreams`]; unary calls pass untouched.
#[derive(Debug, Clone)]
pub struct EndStreamsOf<S> {
    inner: S,
    streaming: &'static [&'static str],
    shutdown: Shutdown,
}

impl<S> EndStreamsOf<S> {
    /// `inner`, its streams ended when `shutdown` fires.
    pub fn new(inner: S, streaming: &'static [&'static str], shutdown: Shutdown) -> Self {
        Self {
            inner,
            streaming,
            shutdown,
        }
    }

    fn streams(&self, path: &str) -> bool {
        path == HEALTH_WATCH
            || path
                .rsplit_once('/')
                .is_some_and(|(_, m)| self.streaming.contains(&m))
    }
}

type Streamed<E> =
    Pin<Box<dyn Future<Output = Result<http::Response<tonic::body::Body>, E>> + Send>>;

impl<S, B> tower::Service<http::Request<B>> for EndStreamsOf<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<tonic::body::Body>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = futures::future::Either<S::Future, Streamed<S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if !self.streams(req.uri().path()) {
            return futures::future::Either::Left(self.inner.call(req));
        }
        let shutdown = self.shutdown.clone();
        let fut = self.inner.call(req);
        futures::future::Either::Right(Box::pin(async move {
            let resp = fut.await?;
            Ok(resp.map(|b| tonic::body::Body::new(EndStreams::new(b, &shutdown))))
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn a_stream_ends_with_unavailable_when_the_process_stops() {
        let (mut tx, rx) =
            futures::channel::mpsc::channel::<Result<Frame<Bytes>, tonic::Status>>(4);
        let inner = tonic::body::Body::new(http_body_util::StreamBody::new(rx));
        let s = Shutdown::new();
        let mut body = EndStreams::new(inner, &s);
        futures::SinkExt::send(&mut tx, Ok(Frame::data(Bytes::from_static(b"one"))))
            .await
            .unwrap();
        let f = body.frame().await.unwrap().unwrap();
        assert_eq!(f.into_data().unwrap(), Bytes::from_static(b"one"));
        assert!(!body.is_end_stream());
        s.trigger();
        let f = body.frame().await.unwrap().unwrap();
        let t = f.into_trailers().unwrap();
        assert_eq!(t["grpc-status"], "14");
        assert!(body.is_end_stream());
        assert!(body.frame().await.is_none());
    }

    #[test]
    fn only_server_streams_are_wrapped() {
        let e = EndStreamsOf::new((), &["Watch", "Changes"], Shutdown::new());
        assert!(e.streams("/crdplane.v1.Storage/Watch"));
        assert!(e.streams("/crdplane.v1.Storage/Changes"));
        assert!(e.streams(HEALTH_WATCH));
        assert!(!e.streams("/crdplane.v1.Storage/Get"));
        assert!(!e.streams("/grpc.health.v1.Health/Check"));
        let none = EndStreamsOf::new((), &[], Shutdown::new());
        assert!(none.streams(HEALTH_WATCH));
        assert!(!none.streams("/crdplane.v1.Registry/Watch"));
    }

    #[tokio::test]
    async fn a_stream_that_ends_first_is_untouched() {
        let inner = tonic::body::Body::new(http_body_util::Full::new(Bytes::from_static(b"x")));
        let s = Shutdown::new();
        let body = EndStreams::new(inner, &s);
        let all = body.collect().await.unwrap();
        assert!(all.trailers().is_none());
        assert_eq!(all.to_bytes(), Bytes::from_static(b"x"));
    }
}
