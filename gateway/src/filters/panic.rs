//! Panic recovery: the outermost layer of the edge stack (`stack.rs`), as upstream's
//! `WithPanicRecovery` (staging/src/k8s.io/apiserver/pkg/server/filters/wrap.go) is the
//! outermost filter of `DefaultBuildHandlerChain`.
//!
//! A panic while the request is handled (in any inner layer's `call` or future, the router
//! and the resource handlers included) answers what upstream's crash handler writes with
//! Go's `http.Error`: 500, `text/plain; charset=utf-8`, `X-Content-Type-Options: nosniff`,
//! `This request caused apiserver to panic. Look in the logs for details.` plus a newline,
//! and the panic is logged with the request's method and URI ("apiserver panic'd"). A panic
//! while a response body streams (a watch) is not caught here; it ends that connection's
//! task, as a Go handler's panic after the header ends the connection.
//!
//! Hand-written rather than tower-http's `CatchPanic`: that one boxes every response body
//! again (`UnsyncBoxBody<Bytes, BoxError>`), one more allocation held for each open watch,
//! and the answer is all this layer needs to choose.

use crate::http::Body;
use futures::FutureExt;
use futures::future::CatchUnwind;
use http::{HeaderValue, Method, Request, Response, StatusCode, Uri};
use std::convert::Infallible;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

/// The body of upstream's answer to a panic (`http.Error` appends the newline).
pub const PANIC_TEXT: &str =
    "This request caused apiserver to panic. Look in the logs for details.\n";

/// Upstream's answer to a request whose handling panicked.
pub fn panic_response() -> Response<Body> {
    let mut r = crate::http::text_response(StatusCode::INTERNAL_SERVER_ERROR, PANIC_TEXT);
    r.headers_mut().insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    r
}

/// The layer of [`PanicRecovery`].
#[derive(Debug, Clone, Copy, Default)]
pub struct PanicLayer;

impl<S> tower::Layer<S> for PanicLayer {
    type Service = PanicRecovery<S>;
    fn layer(&self, inner: S) -> PanicRecovery<S> {
        PanicRecovery { inner }
    }
}

/// Turns a panic of the inner service into upstream's 500 answer.
#[derive(Debug, Clone)]
pub struct PanicRecovery<S> {
    inner: S,
}

impl<S, B> tower::Service<Request<B>> for PanicRecovery<S>
where
    S: tower::Service<Request<B>, Response = Response<Body>, Error = Infallible>,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = PanicFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let method = req.method().clone();
        let uri = req.uri().clone();
        // The inner layers' synchronous work (request-info parsing among it) runs here.
        let inner = std::panic::catch_unwind(AssertUnwindSafe(|| self.inner.call(req)))
            .ok()
            .map(|f| AssertUnwindSafe(f).catch_unwind());
        PanicFuture { inner, method, uri }
    }
}

pin_project_lite::pin_project! {
    /// The future of [`PanicRecovery`]: the inner future, its panic caught.
    pub struct PanicFuture<F> {
        // None: the inner service's `call` itself panicked.
        #[pin]
        inner: Option<CatchUnwind<AssertUnwindSafe<F>>>,
        method: Method,
        uri: Uri,
    }
}

impl<F> Future for PanicFuture<F>
where
    F: Future<Output = Result<Response<Body>, Infallible>>,
{
    type Output = Result<Response<Body>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Some(inner) = this.inner.as_pin_mut()
            && let Ok(r) = ready!(inner.poll(cx))
        {
            return Poll::Ready(r);
        }
        tracing::error!(method = %this.method, uri = %this.uri, "apiserver panic'd");
        Poll::Ready(Ok(panic_response()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filters::testing::{echo, read, request};
    use tower::{Layer, ServiceExt};

    #[tokio::test]
    async fn a_panic_in_the_future_or_in_call_is_upstreams_500() {
        let panics_later = tower::service_fn(|_req: Request<crate::http::Payload>| async {
            if true {
                panic!("in the handler");
            }
            Ok::<_, Infallible>(crate::http::text_response(StatusCode::OK, ""))
        });
        let resp = PanicLayer
            .layer(panics_later)
            .oneshot(request("GET", "/apis/a/v1/b"))
            .await
            .unwrap();
        assert_eq!(resp.headers()["x-content-type-options"], "nosniff");
        assert_eq!(resp.headers()["content-type"], "text/plain; charset=utf-8");
        assert_eq!(
            read(resp).await,
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "This request caused apiserver to panic. Look in the logs for details.\n".into()
            )
        );
        // A panic in the inner service's `call` (a layer's synchronous work).
        let panics_now = tower::service_fn(|req: Request<crate::http::Payload>| {
            assert!(req.uri().path() != "/now", "in call");
            std::future::ready(Ok::<_, Infallible>(crate::http::text_response(
                StatusCode::OK,
                "",
            )))
        });
        let resp = PanicLayer
            .layer(panics_now)
            .oneshot(request("GET", "/now"))
            .await
            .unwrap();
        assert_eq!(read(resp).await.0, StatusCode::INTERNAL_SERVER_ERROR);
    }

    #[tokio::test]
    async fn answers_pass_through() {
        let resp = PanicLayer
            .layer(echo(|r| r.uri().to_string()))
            .oneshot(request("GET", "/version"))
            .await
            .unwrap();
        assert_eq!(read(resp).await, (StatusCode::OK, "/version".into()));
    }
}
