//! Request metrics: fourth layer of the edge stack (`stack.rs`), inside the
//! request-info layer (it labels by the parsed request) and outside the limits layer (a
//! request that timed out is counted with its 504), where upstream's
//! `WithLatencyTrackers` (staging/src/k8s.io/apiserver/pkg/endpoints/filters/webhook_duration.go)
//! and the `apiserver_request_total` counting of `MonitorRequest`
//! (staging/src/k8s.io/apiserver/pkg/endpoints/metrics/metrics.go) observe requests.
//!
//! Each request is counted into [`ApiMetrics`] (`crate::metrics`) when its response head is
//! ready, so a watch counts once, when it is answered; the layer holds nothing in the
//! response body. While a request that is not a watch runs, it counts in
//! `apiserver_current_inflight_requests`. The tenant is a label only once the tenant
//! directory knows it exists (a path can name any tenant).

use crate::context::Ctx;
use crate::http::Body;
use crate::metrics::{ApiMetrics, InFlight, Series};
use crate::request_info::RequestInfo;
use http::{Request, Response};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Instant;

/// The request metrics of one gateway: [`ApiMetrics`] (the name the edge settings use).
pub type RequestMetrics = ApiMetrics;

/// The layer of [`Metrics`].
#[derive(Clone)]
pub struct MetricsLayer {
    metrics: Arc<ApiMetrics>,
    ctx: Option<Arc<Ctx>>,
}

impl MetricsLayer {
    /// The layer recording into `metrics`; with `ctx`, tenants are labels once its tenant
    /// directory knows them (without, every tenant named is, within the bound).
    pub fn new(metrics: Arc<ApiMetrics>, ctx: Option<Arc<Ctx>>) -> Self {
        Self { metrics, ctx }
    }
}

impl<S> tower::Layer<S> for MetricsLayer {
    type Service = Metrics<S>;
    fn layer(&self, inner: S) -> Metrics<S> {
        Metrics {
            inner,
            metrics: self.metrics.clone(),
            ctx: self.ctx.clone(),
        }
    }
}

/// Observes each answered request (see the module docs).
#[derive(Clone)]
pub struct Metrics<S> {
    inner: S,
    metrics: Arc<ApiMetrics>,
    ctx: Option<Arc<Ctx>>,
}

/// What the future records once the response head is ready.
pub struct Pending {
    metrics: Arc<ApiMetrics>,
    ctx: Option<Arc<Ctx>>,
    series: Arc<Series>,
    tenant: String,
    start: Instant,
}

impl Pending {
    fn finish(self, code: u16) {
        let known = match &self.ctx {
            None => true,
            Some(ctx) => {
                self.tenant == crate::stores::tenants::ADMIN_SCOPE
                    || ctx.tenant_dir.cached(&self.tenant).is_some()
            }
        };
        let tenant = known.then_some(self.tenant.as_str());
        self.metrics.observe_series(
            &self.series,
            code,
            self.start.elapsed().as_secs_f64(),
            tenant,
        );
    }
}

fn is_apply<B>(req: &Request<B>) -> bool {
    req.headers()
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/apply-patch"))
}

fn is_dry_run<B>(req: &Request<B>) -> bool {
    req.uri()
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "dryRun=All"))
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
        let start = Instant::now();
        let info = req.extensions().get::<RequestInfo>();
        let in_flight = info
            .filter(|i| i.verb != "watch")
            .and_then(|i| self.metrics.in_flight(i));
        let record = info
            .filter(|_| self.metrics.records_requests())
            .map(|info| Pending {
                metrics: self.metrics.clone(),
                ctx: self.ctx.clone(),
                series: self.metrics.series(info, is_apply(&req), is_dry_run(&req)),
                tenant: info.tenant.clone(),
                start,
            });
        MetricsFuture {
            inner: self.inner.call(req),
            record,
            _in_flight: in_flight,
        }
    }
}

pin_project_lite::pin_project! {
    /// The future of [`Metrics`]: records the request once the response is ready.
    pub struct MetricsFuture<F> {
        #[pin]
        inner: F,
        record: Option<Pending>,
        // Counted in flight until the response head is ready (or the request is dropped).
        _in_flight: Option<InFlight>,
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
        drop(this._in_flight.take());
        if let (Some(p), Ok(resp)) = (this.record.take(), &out) {
            p.finish(resp.status().as_u16());
        }
        Poll::Ready(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filters::testing::{echo, request};
    use tower::{Layer, ServiceExt};

    #[tokio::test]
    async fn counts_by_the_request_info_and_the_code() {
        let m = Arc::new(ApiMetrics::default());
        let svc = MetricsLayer::new(m.clone(), None).layer(echo(|_| String::new()));
        for (method, path) in [
            ("GET", "/apis/g/v1/xs"),
            ("GET", "/apis/g/v1/xs"),
            ("POST", "/apis/g/v1/namespaces/a/xs"),
        ] {
            let mut req = request(method, path);
            let info = crate::request_info::parse(method, path, false, "acme").unwrap();
            req.extensions_mut().insert(info);
            svc.clone().oneshot(req).await.unwrap();
        }
        // Without request info (not behind the request-info layer): not counted.
        svc.oneshot(request("GET", "/")).await.unwrap();
        assert_eq!(m.count("LIST", 200), 2);
        assert_eq!(m.count("POST", 200), 1);
        assert_eq!(m.total(), 3);
        assert_eq!(
            m.sum(
                "apiserver_request_total",
                &[("resource", "xs"), ("group", "g"), ("scope", "cluster")]
            ),
            2
        );
        assert_eq!(
            m.sum("crdplane_tenant_requests_total", &[("tenant", "acme")]),
            3
        );
        // Nothing stays in flight.
        assert_eq!(m.sum("apiserver_current_inflight_requests", &[]), 0);
    }

    #[tokio::test]
    async fn disabled_metrics_are_neither_recorded_nor_exposed() {
        let off: Vec<String> = [
            "apiserver_request_total",
            "apiserver_request_duration_seconds",
            "apiserver_current_inflight_requests",
            "crdplane_tenant_requests_total",
            "crdplane_tenant_request_duration_seconds_total",
            "no_such_metric",
        ]
        .map(String::from)
        .to_vec();
        let m = Arc::new(ApiMetrics::with_disabled(10, &off));
        assert!(!m.records_requests());
        let svc = MetricsLayer::new(m.clone(), None).layer(echo(|_| String::new()));
        let mut req = request("GET", "/apis/g/v1/xs");
        req.extensions_mut()
            .insert(crate::request_info::parse("GET", "/apis/g/v1/xs", false, "acme").unwrap());
        svc.oneshot(req).await.unwrap();
        assert_eq!(m.total(), 0);
        // (The in-flight gauges exist from the start, so they would show if registered.)
        let text = String::from_utf8(m.encode()).unwrap();
        for name in &off[..5] {
            assert!(!text.contains(name.as_str()), "{name} exposed:\n{text}");
        }
        // One disabled alone: the rest is recorded.
        let m = Arc::new(ApiMetrics::with_disabled(
            10,
            &["apiserver_request_duration_seconds".to_string()],
        ));
        assert!(m.records_requests());
        let svc = MetricsLayer::new(m.clone(), None).layer(echo(|_| String::new()));
        let mut req = request("GET", "/apis/g/v1/xs");
        req.extensions_mut()
            .insert(crate::request_info::parse("GET", "/apis/g/v1/xs", false, "acme").unwrap());
        svc.oneshot(req).await.unwrap();
        assert_eq!(m.total(), 1);
        let text = String::from_utf8(m.encode()).unwrap();
        assert!(
            !text.contains("apiserver_request_duration_seconds"),
            "{text}"
        );
        assert!(text.contains("apiserver_request_total{"), "{text}");
    }
}
