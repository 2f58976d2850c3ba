//! The request's audit id: the outermost layer of the edge stack (`stack.rs`), where
//! upstream's `WithAuditInit` (staging/src/k8s.io/apiserver/pkg/endpoints/filters/audit_init.go)
//! sits, so that every answer carries it in an `Audit-Id` header — the 401 of
//! authentication, the 413 and 504 of the limits layer and the 500 of panic recovery
//! included.
//!
//! The id is the client's `Audit-ID` header when it is 1–64 visible ASCII characters, else a
//! new UUID. It goes into the request's extensions as [`AuditId`]; the audit layer records
//! its events under it and the request's debug log line names it.

use http::{HeaderValue, Request, Response};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

/// The response header with the request's audit id (upstream `Audit-Id`).
pub const AUDIT_ID_HEADER: http::HeaderName = http::HeaderName::from_static("audit-id");

/// The audit id of a request (in its extensions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditId(pub HeaderValue);

/// The request's audit id: the one this layer decided, else the client's valid `Audit-ID`,
/// else a new UUID.
pub fn of<B>(req: &Request<B>) -> HeaderValue {
    if let Some(AuditId(id)) = req.extensions().get::<AuditId>() {
        return id.clone();
    }
    if let Some(v) = req.headers().get(AUDIT_ID_HEADER)
        && (1..=64).contains(&v.len())
        && v.as_bytes().iter().all(|b| b.is_ascii_graphic())
    {
        return v.clone();
    }
    new_id()
}

/// A new random UUID as a header value, formatted on the stack (no `String` in between).
fn new_id() -> HeaderValue {
    let mut buf = [0u8; uuid::fmt::Hyphenated::LENGTH];
    let id = crdplane_apiserver::audit::event::new_audit_uuid();
    HeaderValue::from_bytes(id.hyphenated().encode_lower(&mut buf).as_bytes())
        .expect("a UUID is a header value")
}

/// The layer of [`AuditIds`].
#[derive(Debug, Clone, Copy, Default)]
pub struct AuditIdLayer;

impl<S> tower::Layer<S> for AuditIdLayer {
    type Service = AuditIds<S>;
    fn layer(&self, inner: S) -> AuditIds<S> {
        AuditIds { inner }
    }
}

/// Gives each request its audit id and each response the `Audit-Id` header.
#[derive(Debug, Clone)]
pub struct AuditIds<S> {
    inner: S,
}

pin_project_lite::pin_project! {
    /// The inner future; its response gets the `Audit-Id` header.
    pub struct WithAuditId<F> {
        #[pin]
        inner: F,
        id: Option<HeaderValue>,
    }
}

impl<F, RB, E> Future for WithAuditId<F>
where
    F: Future<Output = Result<Response<RB>, E>>,
{
    type Output = F::Output;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let mut out = ready!(this.inner.poll(cx));
        if let (Ok(resp), Some(id)) = (&mut out, this.id.take()) {
            resp.headers_mut().insert(AUDIT_ID_HEADER, id);
        }
        Poll::Ready(out)
    }
}

impl<S, B, RB> tower::Service<Request<B>> for AuditIds<S>
where
    S: tower::Service<Request<B>, Response = Response<RB>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = WithAuditId<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        let id = of(&req);
        req.extensions_mut().insert(AuditId(id.clone()));
        WithAuditId {
            inner: self.inner.call(req),
            id: Some(id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filters::testing::{echo, read, request};
    use tower::{Layer, ServiceExt};

    #[tokio::test]
    async fn every_answer_carries_the_id_the_inner_layers_see() {
        let svc = AuditIdLayer.layer(echo(|r| {
            r.extensions()
                .get::<AuditId>()
                .map(|a| a.0.to_str().unwrap().to_string())
                .unwrap_or_default()
        }));
        let resp = svc.clone().oneshot(request("GET", "/api")).await.unwrap();
        let header = resp.headers()[AUDIT_ID_HEADER]
            .to_str()
            .unwrap()
            .to_string();
        assert_eq!(header.len(), 36, "a UUID");
        let (_, seen) = read(resp).await;
        assert_eq!(seen, header);

        let mut req = request("GET", "/api");
        req.headers_mut()
            .insert(AUDIT_ID_HEADER, HeaderValue::from_static("my-request-1"));
        let resp = svc.clone().oneshot(req).await.unwrap();
        assert_eq!(resp.headers()[AUDIT_ID_HEADER], "my-request-1");

        // Too long or not visible ASCII: replaced.
        for bad in ["a".repeat(65), "with space".to_string()] {
            let mut req = request("GET", "/api");
            req.headers_mut()
                .insert(AUDIT_ID_HEADER, HeaderValue::from_str(&bad).unwrap());
            let resp = svc.clone().oneshot(req).await.unwrap();
            assert_eq!(resp.headers()[AUDIT_ID_HEADER].len(), 36, "{bad:?}");
        }
    }
}
