//! Trace context: second layer of the edge stack (`stack.rs`), right inside panic
//! recovery, where upstream's `WithTracing`
//! (staging/src/k8s.io/apiserver/pkg/endpoints/filters/traces.go, OpenTelemetry's
//! `otelhttp` handler) sits.
//!
//! A valid W3C `traceparent` header (Trace Context, §3.2) becomes a [`TraceContext`] in the
//! request extensions, with the `tracestate` header beside it; an invalid one is ignored, as
//! the specification asks (§4.3: a receiver that cannot parse it starts a new trace).
//!
//! With trace export on (`OTEL_*`, see `crdplane_transport::telemetry`) the layer also starts
//! the gateway's span of the request (`KubernetesAPI`, upstream's operation name), a child of
//! the incoming `traceparent`, and, when the sampler keeps it, puts a [`RequestSpan`] handle
//! into the extensions (an unsampled request costs one span start and nothing more): the
//! handler names the tenant, verb, group, resource and namespace on it and sends the span's
//! own `traceparent` on to the services; the audit layer adds the audit id. The span ends
//! with the response head (its status code recorded; 5xx marks it failed).

use http::{HeaderValue, Request, Response};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};

use crdplane_transport::telemetry;

/// The gateway's span of one request (see the module docs); cheap to clone.
#[derive(Clone)]
pub struct RequestSpan(Arc<RequestSpanInner>);

struct RequestSpanInner {
    span: Mutex<Option<telemetry::Span>>,
    traceparent: HeaderValue,
    trace_id: String,
    recording: bool,
}

impl RequestSpan {
    fn new(span: telemetry::Span) -> Self {
        Self(Arc::new(RequestSpanInner {
            traceparent: span.traceparent(),
            trace_id: span.trace_id(),
            recording: span.is_recording(),
            span: Mutex::new(Some(span)),
        }))
    }

    /// The `traceparent` naming this span, for the backend calls made for the request.
    pub fn traceparent(&self) -> &HeaderValue {
        &self.0.traceparent
    }

    /// The trace id (32 hex digits) when the span is sampled, for logs and audit events.
    pub fn sampled_trace_id(&self) -> Option<&str> {
        self.0.recording.then_some(self.0.trace_id.as_str())
    }

    /// Sets attributes while the span is open and recording.
    pub fn annotate(&self, f: impl FnOnce(&mut telemetry::Span)) {
        if self.0.recording
            && let Ok(mut g) = self.0.span.lock()
            && let Some(s) = g.as_mut()
        {
            f(s);
        }
    }

    fn finish(&self, status: http::StatusCode) {
        if let Ok(mut g) = self.0.span.lock()
            && let Some(mut s) = g.take()
        {
            s.set_i64("http.response.status_code", i64::from(status.as_u16()));
            if status.is_server_error() {
                s.fail(status.as_str().to_string());
            }
            s.end();
        }
    }
}

/// The W3C trace context of a request (`traceparent`, plus `tracestate` as received).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    /// The trace id (16 bytes, never all zero).
    pub trace_id: [u8; 16],
    /// The caller's span.
    pub parent_id: [u8; 8],
    /// Trace flags (bit 0: sampled).
    pub flags: u8,
    /// The `tracestate` header, passed on unchanged.
    pub tracestate: Option<HeaderValue>,
}

impl TraceContext {
    /// Parses a `traceparent` value (W3C Trace Context §3.2): `version-traceid-parentid-flags`
    /// in lowercase hex; version `ff` is invalid, version `00` has exactly these four fields,
    /// a later version may append fields after a `-`; all-zero ids are invalid.
    pub fn parse(traceparent: &[u8]) -> Option<Self> {
        if traceparent.len() < 55 {
            return None;
        }
        let version = hex::<1>(&traceparent[0..2])?;
        if version[0] == 0xff || traceparent[2] != b'-' {
            return None;
        }
        if version[0] == 0 && traceparent.len() != 55 {
            return None;
        }
        if traceparent.len() > 55 && traceparent[55] != b'-' {
            return None;
        }
        let trace_id = hex::<16>(&traceparent[3..35])?;
        if traceparent[35] != b'-' || traceparent[52] != b'-' {
            return None;
        }
        let parent_id = hex::<8>(&traceparent[36..52])?;
        let flags = hex::<1>(&traceparent[53..55])?[0];
        if trace_id == [0; 16] || parent_id == [0; 8] {
            return None;
        }
        Some(Self {
            trace_id,
            parent_id,
            flags,
            tracestate: None,
        })
    }

    /// The `traceparent` value to send on (version `00`).
    pub fn traceparent(&self) -> String {
        let mut s = String::with_capacity(55);
        s.push_str("00-");
        push_hex(&mut s, &self.trace_id);
        s.push('-');
        push_hex(&mut s, &self.parent_id);
        s.push('-');
        push_hex(&mut s, &[self.flags]);
        s
    }
}

/// Lowercase hex digits only (the specification refuses uppercase).
fn hex<const N: usize>(s: &[u8]) -> Option<[u8; N]> {
    if s.len() != 2 * N {
        return None;
    }
    let digit = |b: u8| match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = digit(s[2 * i])? << 4 | digit(s[2 * i + 1])?;
    }
    Some(out)
}

fn push_hex(s: &mut String, bytes: &[u8]) {
    for b in bytes {
        s.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
        s.push(char::from(b"0123456789abcdef"[usize::from(b & 0xf)]));
    }
}

/// The layer of [`Tracing`].
#[derive(Debug, Clone, Copy, Default)]
pub struct TraceLayer;

impl<S> tower::Layer<S> for TraceLayer {
    type Service = Tracing<S>;
    fn layer(&self, inner: S) -> Tracing<S> {
        Tracing { inner }
    }
}

/// Puts the request's [`TraceContext`] (and, with export on, its [`RequestSpan`]) into its
/// extensions.
#[derive(Debug, Clone)]
pub struct Tracing<S> {
    inner: S,
}

pin_project_lite::pin_project! {
    /// The inner future; the request's span ends with its response head.
    pub struct Traced<F> {
        #[pin]
        inner: F,
        span: Option<RequestSpan>,
    }
}

impl<F, RB, E> Future for Traced<F>
where
    F: Future<Output = Result<Response<RB>, E>>,
{
    type Output = F::Output;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let out = ready!(this.inner.poll(cx));
        if let Some(span) = this.span.take() {
            match &out {
                Ok(resp) => span.finish(resp.status()),
                Err(_) => span.finish(http::StatusCode::INTERNAL_SERVER_ERROR),
            }
        }
        Poll::Ready(out)
    }
}

impl<S, B, RB> tower::Service<Request<B>> for Tracing<S>
where
    S: tower::Service<Request<B>, Response = Response<RB>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Traced<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        // Most requests carry none: then nothing is parsed or stored.
        let incoming = req
            .headers()
            .get(crdplane_transport::context::TRACEPARENT)
            .cloned();
        if let Some(tp) = &incoming
            && let Some(mut tc) = TraceContext::parse(tp.as_bytes())
        {
            tc.tracestate = req
                .headers()
                .get(crdplane_transport::context::TRACESTATE)
                .cloned();
            req.extensions_mut().insert(tc);
        }
        // A span the sampler drops records nothing: it is ended at once and the request
        // goes on as with export off (the incoming `traceparent`, if any, is what the
        // services see; they follow its "not sampled").
        let state = req
            .headers()
            .get(crdplane_transport::context::TRACESTATE)
            .filter(|v| v.len() <= crdplane_transport::context::MAX_TRACESTATE)
            .and_then(|v| v.to_str().ok());
        let span = telemetry::start(
            "KubernetesAPI",
            telemetry::Kind::Server,
            incoming.as_ref().map(HeaderValue::as_bytes),
            state,
        )
        .filter(telemetry::Span::is_recording)
        .map(|mut s| {
            s.set("http.request.method", req.method().as_str().to_string());
            s.set("url.path", req.uri().path().to_string());
            RequestSpan::new(s)
        });
        if let Some(s) = &span {
            req.extensions_mut().insert(s.clone());
        }
        Traced {
            inner: self.inner.call(req),
            span,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filters::testing::{echo, read, request};
    use tower::{Layer, ServiceExt};

    const VALID: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    #[test]
    fn traceparent_parsing() {
        let tc = TraceContext::parse(VALID.as_bytes()).unwrap();
        assert_eq!(tc.flags, 1);
        assert_eq!(
            tc.parent_id,
            [0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31]
        );
        assert_eq!(tc.traceparent(), VALID);
        // A later version may carry more fields; it is read as version 00.
        let v1 = format!("01{}-extra", &VALID[2..]);
        assert_eq!(
            TraceContext::parse(v1.as_bytes()).unwrap().traceparent(),
            VALID
        );
        for bad in [
            "",
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-x",
            "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01x",
            "00_0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c_b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319-cb7ad6b7169203331-01",
            "0g-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        ] {
            assert_eq!(TraceContext::parse(bad.as_bytes()), None, "{bad:?}");
        }
    }

    #[tokio::test]
    async fn the_context_reaches_the_inner_service() {
        let svc = TraceLayer.layer(echo(|r| {
            format!(
                "{:?}",
                r.extensions()
                    .get::<TraceContext>()
                    .map(|t| (t.traceparent(), t.tracestate.clone()))
            )
        }));
        let mut req = request("GET", "/api");
        req.headers_mut()
            .insert("traceparent", HeaderValue::from_static(VALID));
        req.headers_mut()
            .insert("tracestate", HeaderValue::from_static("k=v"));
        let (_, text) = read(svc.clone().oneshot(req).await.unwrap()).await;
        assert_eq!(text, format!("Some((\"{VALID}\", Some(\"k=v\")))"));
        let mut req = request("GET", "/api");
        req.headers_mut()
            .insert("traceparent", HeaderValue::from_static("garbage"));
        let (_, text) = read(svc.oneshot(req).await.unwrap()).await;
        assert_eq!(text, "None");
    }
}
