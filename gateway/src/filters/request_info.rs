//! Request info and tenant: third layer of the edge stack (`stack.rs`), as upstream's
//! `WithRequestInfo` (staging/src/k8s.io/apiserver/pkg/endpoints/filters/requestinfo.go):
//! every layer inside it (metrics, limits, authentication, tenant access, fairness,
//! authorization) and the router read what the request addresses from the request
//! extensions instead of parsing the path again.
//!
//! It parses the query ([`crate::http::Query`]) and, with the parser of
//! [`crate::request_info`], the tenant (`/clusters/<tenant>/…`, else the default tenant),
//! API group, version, namespace, resource, subresource, name and verb; both go into the
//! extensions. A path that can never be valid (a tenant that is no DNS label) is answered
//! here with the JSON 404 Status of a path no handler serves, as the router answered it
//! before this layer existed.

use crate::http::{Body, Query, error_response};
use crate::request_info::{self, RequestInfo};
use crdplane_core::ApiError;
use futures::future::{Either, Ready, ready};
use http::{Request, Response};
use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

/// The layer of [`WithRequestInfo`].
#[derive(Debug, Clone)]
pub struct RequestInfoLayer {
    default_tenant: Arc<str>,
}

impl RequestInfoLayer {
    /// `default_tenant`: the tenant of paths without a `/clusters/<tenant>` prefix.
    pub fn new(default_tenant: Arc<str>) -> Self {
        Self { default_tenant }
    }
}

impl<S> tower::Layer<S> for RequestInfoLayer {
    type Service = WithRequestInfo<S>;
    fn layer(&self, inner: S) -> WithRequestInfo<S> {
        WithRequestInfo {
            inner,
            default_tenant: self.default_tenant.clone(),
        }
    }
}

/// Puts [`RequestInfo`] and [`Query`] into the request extensions.
#[derive(Debug, Clone)]
pub struct WithRequestInfo<S> {
    inner: S,
    default_tenant: Arc<str>,
}

impl<S, B> tower::Service<Request<B>> for WithRequestInfo<S>
where
    S: tower::Service<Request<B>, Response = Response<Body>, Error = Infallible>,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Either<Ready<Result<Response<Body>, Infallible>>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        let query = Query::parse(req.uri().query());
        let info = request_info::parse(
            req.method().as_str(),
            req.uri().path(),
            query.flag("watch"),
            &self.default_tenant,
        );
        match info {
            Ok(info) => {
                let ext = req.extensions_mut();
                ext.insert(info);
                ext.insert(query);
                Either::Right(self.inner.call(req))
            }
            Err(_) => Either::Left(ready(Ok(error_response(&ApiError::path_not_found())))),
        }
    }
}

/// The request info the request-info layer stored (None outside the edge stack).
pub fn of<B>(req: &Request<B>) -> Option<&RequestInfo> {
    req.extensions().get::<RequestInfo>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filters::testing::{echo, read, request};
    use http::StatusCode;
    use tower::{Layer, ServiceExt};

    fn svc()
    -> impl tower::Service<
        Request<crate::http::Payload>,
        Response = Response<Body>,
        Error = Infallible,
    > + Clone {
        RequestInfoLayer::new("dflt".into()).layer(echo(|r| {
            let i = of(r).expect("request info");
            let q = r.extensions().get::<Query>().expect("query");
            format!(
                "{} {} {} {} {} {:?}",
                i.tenant,
                i.verb,
                i.namespace,
                i.resource,
                i.name,
                q.get("labelSelector")
            )
        }))
    }

    #[tokio::test]
    async fn request_info_and_query_reach_the_inner_service() {
        for (method, uri, want) in [
            (
                "GET",
                "/clusters/acme/apis/g.io/v1/namespaces/ns/widgets?watch=true&labelSelector=a%3Db",
                "acme watch ns widgets  Some(\"a=b\")",
            ),
            (
                "DELETE",
                "/api/v1/namespaces/ns/pods/p",
                "dflt delete ns pods p None",
            ),
            ("GET", "/version", "dflt get    None"),
        ] {
            let (code, text) = read(svc().oneshot(request(method, uri)).await.unwrap()).await;
            assert_eq!((code, text.as_str()), (StatusCode::OK, want), "{uri}");
        }
    }

    #[tokio::test]
    async fn an_invalid_tenant_is_a_not_found_status() {
        let (code, text) = read(
            svc()
                .oneshot(request("GET", "/clusters/UPPER/api/v1/namespaces"))
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(code, StatusCode::NOT_FOUND);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["reason"], "NotFound");
        assert_eq!(
            v["message"],
            "the server could not find the requested resource"
        );
    }
}
