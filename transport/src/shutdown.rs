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

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::task::AtomicWaker;
use http_body::{Body as HttpBody, Frame, SizeHint};

/// How long a service waits for its connections after it stopped accepting. Unary calls
/// carry deadlines shorter than this ([`crate::deadline`]), so only a peer that does not
/// close its side after the GOAWAY is cut off.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(15);

/// A stop signal shared by the accept loop, its connections and long-running responses.
/// Cloning shares it; [`Default`] is one that nothing triggers unless asked to.
///
/// Hand-written rather than a `tokio_util` `CancellationToken`, measured: every connection
/// task holds a [`Triggered`] and polls it at each wake-up (several times per request), and
/// re-polling a waiting `CancellationToken` future takes the token's lock and the lock of
/// its `Notify`'s waiter list — two locks that every connection of the process shares, so
/// under load both cores bounced them on every request (a CPU profile of the gateway under
/// 64 kept-alive connections put about 220 ns per GET in those polls). A [`Triggered`]
/// registers once, in a waker slot of its own; polling it again only touches that slot and
/// reads the flag.
#[derive(Clone, Default)]
pub struct Shutdown(Arc<Inner>);

#[derive(Default)]
struct Inner {
    fired: AtomicBool,
    /// The waker slot of every [`Triggered`] that has waited, by key.
    waiting: Mutex<Waiting>,
}

#[derive(Default)]
struct Waiting {
    next: u64,
    slots: HashMap<u64, Arc<AtomicWaker>>,
}

impl std::fmt::Debug for Shutdown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shutdown")
            .field("triggered", &self.is_triggered())
            .finish()
    }
}

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
        if self.0.fired.swap(true, Ordering::SeqCst) {
            return;
        }
        // A future that registers after this lock has been released sees the flag.
        let waiting = self.0.waiting.lock().unwrap_or_else(|e| e.into_inner());
        for slot in waiting.slots.values() {
            slot.wake();
        }
    }

    /// Whether the signal has fired.
    pub fn is_triggered(&self) -> bool {
        self.0.fired.load(Ordering::SeqCst)
    }

    /// A future that resolves once the signal has fired. It owns its share of the signal
    /// (a task or a response body may keep it) and is cheap to poll again and again.
    pub fn triggered(&self) -> Triggered {
        Triggered {
            inner: self.0.clone(),
            slot: None,
        }
    }
}

/// Resolves once its [`Shutdown`] has fired (see [`Shutdown::triggered`]).
pub struct Triggered {
    inner: Arc<Inner>,
    /// Its key and waker slot, from its first wait on.
    slot: Option<(u64, Arc<AtomicWaker>)>,
}

impl Future for Triggered {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.inner.fired.load(Ordering::SeqCst) {
            self.release();
            return Poll::Ready(());
        }
        match &self.slot {
            // The slot is this future's own: no lock, and no waker clone while the task's
            // waker stays the same.
            Some((_, slot)) => slot.register(cx.waker()),
            None => {
                let slot = Arc::new(AtomicWaker::new());
                slot.register(cx.waker());
                let mut waiting = self.inner.waiting.lock().unwrap_or_else(|e| e.into_inner());
                let key = waiting.next;
                waiting.next += 1;
                waiting.slots.insert(key, slot.clone());
                drop(waiting);
                self.slot = Some((key, slot));
            }
        }
        // Registered before this read: a trigger after it wakes the slot.
        if self.inner.fired.load(Ordering::SeqCst) {
            self.release();
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

impl Triggered {
    /// Gives the waker slot back (resolved or dropped).
    fn release(&mut self) {
        if let Some((key, _)) = self.slot.take() {
            let mut waiting = self.inner.waiting.lock().unwrap_or_else(|e| e.into_inner());
            waiting.slots.remove(&key);
        }
    }
}

impl Drop for Triggered {
    fn drop(&mut self) {
        self.release();
    }
}

/// A gRPC server-stream response body that ends, with the trailers `grpc-status: 14`
/// (UNAVAILABLE) and a message saying why, when the process stops. A stream cut without
/// trailers looks like a broken connection to its caller; this one is a clean status that
/// the caller's retry resumes from (the gateway's shared watch resumes from its last
/// revision on another replica).
pub struct EndStreams {
    inner: tonic::body::Body,
    stop: Option<Triggered>,
}

impl EndStreams {
    /// Wraps `inner`, to end it when `shutdown` fires.
    pub fn new(inner: tonic::body::Body, shutdown: &Shutdown) -> Self {
        Self {
            inner,
            stop: Some(shutdown.triggered()),
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
            if Pin::new(stop).poll(cx).is_ready() {
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

    fn waiting(s: &Shutdown) -> usize {
        s.0.waiting.lock().unwrap().slots.len()
    }

    #[tokio::test]
    async fn waiting_futures_wake_on_the_trigger_and_leave_no_slot_behind() {
        let s = Shutdown::new();
        // Many waiters on other tasks, each polled several times before the trigger.
        let polled = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let t = s.triggered();
                let polled = polled.clone();
                tokio::spawn(async move {
                    let mut t = std::pin::pin!(t);
                    for _ in 0..3 {
                        assert!(futures::poll!(t.as_mut()).is_pending());
                        tokio::task::yield_now().await;
                    }
                    polled.fetch_add(1, Ordering::SeqCst);
                    t.await
                })
            })
            .collect();
        let mut probe = std::pin::pin!(s.triggered());
        assert!(futures::poll!(probe.as_mut()).is_pending());
        // Wait (bounded) until every task has polled its future three times.
        for _ in 0..10_000 {
            if polled.load(Ordering::SeqCst) == 16 {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(polled.load(Ordering::SeqCst), 16);
        assert_eq!(waiting(&s), 17, "one slot per waiting future");
        assert!(!s.is_triggered());
        s.clone().trigger();
        assert!(s.is_triggered());
        for t in tasks {
            tokio::time::timeout(Duration::from_secs(5), t)
                .await
                .expect("woken by the trigger")
                .unwrap();
        }
        probe.await;
        assert_eq!(waiting(&s), 0, "resolved futures gave their slots back");
        // After the trigger, a new future is ready at once, and registers nothing.
        assert!(futures::poll!(s.triggered()).is_ready());
        assert_eq!(waiting(&s), 0);
        s.trigger();
    }

    #[tokio::test]
    async fn a_dropped_waiter_gives_its_slot_back() {
        let s = Shutdown::new();
        let mut t = Box::pin(s.triggered());
        assert!(futures::poll!(t.as_mut()).is_pending());
        assert!(futures::poll!(t.as_mut()).is_pending());
        assert_eq!(waiting(&s), 1, "polled again, registered once");
        drop(t);
        assert_eq!(waiting(&s), 0);
    }

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
