//! The layers of the edge stack, one per file, in the order `stack.rs` composes them
//! (outermost first, as upstream's `DefaultBuildHandlerChain` in
//! staging/src/k8s.io/apiserver/pkg/server/config.go): [`audit_id`], [`panic`](mod@panic), [`trace`],
//! [`request_info`], [`metrics`], [`limits`], [`authentication`], [`audit`], [`impersonation`],
//! [`tenant_lifecycle`], [`tenant_access`], [`fairness`], [`authorization`] ([`gate`] is the service the last two
//! policy-gated layers share). Each is a `tower::Layer` and its `tower::Service`, with
//! an in-process test against a stub inner service.

pub mod audit;
pub mod audit_id;
pub mod authentication;
pub mod authorization;
pub mod fairness;
pub mod gate;
pub mod impersonation;
pub mod limits;
pub mod metrics;
pub mod panic;
pub mod request_info;
pub mod tenant_access;
pub mod tenant_lifecycle;
pub mod trace;

/// A pass-through seam: a layer whose service hands every request to the inner service
/// unchanged (the future is the inner one: no allocation, no state). The doc comment of
/// each seam says what the coming work puts there.
macro_rules! seam {
    ($(#[$layer_doc:meta])* $layer:ident, $(#[$svc_doc:meta])* $svc:ident) => {
        $(#[$layer_doc])*
        #[derive(Debug, Clone, Copy, Default)]
        pub struct $layer;

        impl<S> tower::Layer<S> for $layer {
            type Service = $svc<S>;
            fn layer(&self, inner: S) -> $svc<S> {
                $svc { inner }
            }
        }

        $(#[$svc_doc])*
        #[derive(Debug, Clone)]
        pub struct $svc<S> {
            inner: S,
        }

        impl<S, B> tower::Service<http::Request<B>> for $svc<S>
        where
            S: tower::Service<http::Request<B>>,
        {
            type Response = S::Response;
            type Error = S::Error;
            type Future = S::Future;

            fn poll_ready(
                &mut self,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<Result<(), S::Error>> {
                self.inner.poll_ready(cx)
            }

            fn call(&mut self, req: http::Request<B>) -> S::Future {
                self.inner.call(req)
            }
        }
    };
}
pub(crate) use seam;

/// The one test every pass-through seam has: the request reaches the inner service untouched
/// (extensions included) and its answer comes back.
#[cfg(test)]
macro_rules! seam_test {
    ($layer:path) => {
        #[tokio::test]
        async fn passes_requests_through() {
            use crate::filters::testing::{echo, read, request};
            use tower::{Layer, ServiceExt};
            let inner = echo(|r| {
                format!(
                    "{} {} {:?}",
                    r.method(),
                    r.uri(),
                    r.extensions()
                        .get::<crate::request_info::RequestInfo>()
                        .map(|i| &i.tenant)
                )
            });
            let mut req = request("DELETE", "/api/v1/namespaces/a");
            req.extensions_mut()
                .insert(crate::request_info::RequestInfo {
                    tenant: "acme".into(),
                    ..Default::default()
                });
            let resp = $layer.layer(inner).oneshot(req).await.unwrap();
            assert_eq!(
                read(resp).await,
                (
                    http::StatusCode::OK,
                    "DELETE /api/v1/namespaces/a Some(\"acme\")".into()
                )
            );
        }
    };
}
#[cfg(test)]
pub(crate) use seam_test;

#[cfg(test)]
pub(crate) mod testing {
    //! Stub inner services for the layers' tests.
    use crate::http::Body;
    use crate::http::Payload;
    use bytes::Bytes;
    use http::{Request, Response, StatusCode};
    use http_body_util::BodyExt;
    use std::convert::Infallible;

    /// A request with an empty, already read body.
    pub(crate) fn request(method: &str, uri: &str) -> Request<Payload> {
        Request::builder()
            .method(method)
            .uri(uri)
            .body(Payload::Read(Bytes::new()))
            .unwrap()
    }

    /// An inner service answering 200 with `what(&request)` as the body.
    pub(crate) fn echo(
        what: fn(&Request<Payload>) -> String,
    ) -> impl tower::Service<
        Request<Payload>,
        Response = Response<Body>,
        Error = Infallible,
        Future = impl Future<Output = Result<Response<Body>, Infallible>> + Send,
    > + Clone {
        tower::service_fn(move |req: Request<Payload>| {
            let text = what(&req);
            async move { Ok::<_, Infallible>(crate::http::text_response_owned(StatusCode::OK, text)) }
        })
    }

    /// Status and body text of a response.
    pub(crate) async fn read(resp: Response<Body>) -> (StatusCode, String) {
        let (parts, body) = resp.into_parts();
        let b = body.collect().await.unwrap().to_bytes();
        (parts.status, String::from_utf8_lossy(&b).into_owned())
    }
}
