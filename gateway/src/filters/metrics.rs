//! Request metrics: fourth layer of the edge stack (`stack.rs`), inside the
//! request-info layer (it labels by the parsed verb) and outside the limits layer (a
//! request that timed out is counted with its 504), where upstream's
//! `WithLatencyTrackers` (staging/src/k8s.io/apiserver/pkg/endpoints/filters/webhook_duration.go)
//! and the `apiserver_request_total` counting of `MonitorRequest`
//! (staging/src/k8s.io/apiserver/pkg/endpoints/metrics/metrics.go) observe requests.
//!
//! The seam counts completed requests by (verb, code) into [`RequestMetrics`], which a test
//! or, with the telemetry issue, a Prometheus exporter reads. A request is counted when its
//! response head is ready, so a watch counts once, when it is answered; the layer holds
//! nothing in the response body.

use crate::http::Body;
use crate::request_info::RequestInfo;
use http::{Request, Response};
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};

/// The verbs counted under their own name; anything else is `other`.
const VERBS: [&str; 15] = [
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
    // Non-resource requests: the lowercase HTTP method.
    "post",
    "put",
    "head",
    "options",
    "connect",
    "trace",
    "other",
];

/// The label of `verb`, from a fixed set (a client cannot grow the table).
pub fn verb_label(verb: &str) -> &'static str {
    VERBS
        .iter()
        .find(|v| **v == verb)
        .copied()
        .unwrap_or("other")
}

/// Completed requests by (verb, status code).
#[derive(Debug, Default)]
pub struct RequestMetrics {
    counts: Mutex<HashMap<(&'static str, u16), u64>>,
}

impl RequestMetrics {
    /// Counts one request.
    pub fn record(&self, verb: &'static str, code: u16) {
        *self
            .counts
            .lock()
            .expect("metrics lock")
            .entry((verb, code))
            .or_default() += 1;
    }

    /// Requests of `verb` answered with `code` so far.
    pub fn count(&self, verb: &str, code: u16) -> u64 {
        let counts = self.counts.lock().expect("metrics lock");
        counts.get(&(verb_label(verb), code)).copied().unwrap_or(0)
    }

    /// All requests counted so far.
    pub fn total(&self) -> u64 {
        self.counts.lock().expect("metrics lock").values().sum()
    }

    /// Every (verb, code) count, sorted.
    pub fn snapshot(&self) -> Vec<((&'static str, u16), u64)> {
        let mut v: Vec<_> = self
            .counts
            .lock()
            .expect("metrics lock")
            .iter()
            .map(|(k, n)| (*k, *n))
            .collect();
        v.sort_unstable();
        v
    }
}

/// The layer of [`Metrics`].
#[derive(Debug, Clone)]
pub struct MetricsLayer {
    metrics: Arc<RequestMetrics>,
}

impl MetricsLayer {
    /// The layer recording into `metrics`.
    pub fn new(metrics: Arc<RequestMetrics>) -> Self {
        Self { metrics }
    }
}

impl<S> tower::Layer<S> for MetricsLayer {
    type Service = Metrics<S>;
    fn layer(&self, inner: S) -> Metrics<S> {
        Metrics {
            inner,
            metrics: self.metrics.clone(),
        }
    }
}

/// Counts each answered request by verb and code.
#[derive(Debug, Clone)]
pub struct Metrics<S> {
    inner: S,
    metrics: Arc<RequestMetrics>,
}

impl<S, B> tower::Service<Request<B>> for Metrics<S>
where
    S: tower::Service<Request<B>, Response = Response<Body>, Error = Infallible>,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = MetricsFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let verb = req
            .extensions()
            .get::<RequestInfo>()
            .map_or("other", |i| verb_label(&i.verb));
        MetricsFuture {
            inner: self.inner.call(req),
            record: Some((self.metrics.clone(), verb)),
        }
    }
}

pin_project_lite::pin_project! {
    /// The future of [`Metrics`]: counts the response once it is ready.
    pub struct MetricsFuture<F> {
        #[pin]
        inner: F,
        record: Option<(Arc<RequestMetrics>, &'static str)>,
    }
}

impl<F> Future for MetricsFuture<F>
where
    F: Future<Output = Result<Response<Body>, Infallible>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let out = ready!(this.inner.poll(cx));
        if let (Some((m, verb)), Ok(resp)) = (this.record.take(), &out) {
            m.record(verb, resp.status().as_u16());
        }
        Poll::Ready(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filters::testing::{echo, request};
    use tower::{Layer, ServiceExt};

    #[test]
    fn verbs_come_from_a_fixed_set() {
        assert_eq!(verb_label("deletecollection"), "deletecollection");
        assert_eq!(verb_label("brew"), "other");
    }

    #[tokio::test]
    async fn counts_by_the_verb_of_the_request_info_and_the_code() {
        let m = Arc::new(RequestMetrics::default());
        let svc = MetricsLayer::new(m.clone()).layer(echo(|_| String::new()));
        for verb in ["list", "list", "create"] {
            let mut req = request("GET", "/apis/g/v1/x");
            req.extensions_mut().insert(RequestInfo {
                verb: verb.into(),
                ..Default::default()
            });
            svc.clone().oneshot(req).await.unwrap();
        }
        // Without request info (not behind the request-info layer): `other`.
        svc.oneshot(request("GET", "/")).await.unwrap();
        assert_eq!(
            m.snapshot(),
            [
                (("create", 200), 1),
                (("list", 200), 2),
                (("other", 200), 1)
            ]
        );
        assert_eq!(m.count("list", 200), 2);
        assert_eq!(m.total(), 4);
    }
}
