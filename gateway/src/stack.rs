//! The gateway's one edge `tower::Service`: every request, HTTP/1.1 (crdplane-http1) or
//! HTTP/2 (hyper), enters here from the accept loop (`server.rs`) and leaves through the
//! router ([`crate::api::Router`]) to the resource handlers.
//!
//! The layers, outermost first, in the order of upstream's `DefaultBuildHandlerChain`
//! (staging/src/k8s.io/apiserver/pkg/server/config.go), one file each under
//! [`crate::filters`]:
//!
//! 0. [`audit_id`](crate::filters::audit_id): the request's audit id and every answer's
//!    `Audit-Id` header (`WithAuditInit`)
//! 1. [`panic`](crate::filters::panic): a panic becomes upstream's 500 (`WithPanicRecovery`)
//! 2. [`trace`](crate::filters::trace): W3C `traceparent` into the request (`WithTracing`)
//! 3. [`request_info`](crate::filters::request_info): RequestInfo + tenant from the path
//!    (`WithRequestInfo`)
//! 4. [`metrics`](crate::filters::metrics): upstream's request metrics
//!    (`WithLatencyTrackers`, `MonitorRequest`; [`crate::metrics`])
//! 5. [`limits`](crate::filters::limits): body limit; `?timeout=` and the request timeout of
//!    non-long-running requests (`WithRequestDeadline`, `WithTimeoutForNonLongRunningRequests`)
//! 6. [`authentication`](crate::filters::authentication) (`WithAuthentication`)
//! 7. [`audit`](crate::filters::audit): the audit events (`WithAudit`)
//! 8. [`impersonation`](crate::filters::impersonation) (`WithImpersonation`)
//! 9. [`tenant_lifecycle`](crate::filters::tenant_lifecycle): does this tenant exist and
//!    serve (404 for unknown tenants, 403 for Terminating ones)
//! 10. [`tenant_access`](crate::filters::tenant_access): may this identity use this tenant
//! 11. [`fairness`](crate::filters::fairness) (`WithPriorityAndFairness`)
//! 12. [`authorization`](crate::filters::authorization) (`WithAuthorization`)
//! 13. the router.
//!
//! Upstream builds the chain innermost first; [`tower::ServiceBuilder`] reads outermost
//! first, so the list above is also the order of the `.layer` calls in [`build`].
//!
//! No layer holds anything per request once the response head is out: a watch's response
//! body passes through every layer untouched, so the memory of an idle watch is what the
//! connection and the watch stream hold, as before the stack existed.

use crate::filters::{
    audit::AuditLayer, audit_id::AuditIdLayer, authentication::AuthenticationLayer,
    authorization::AuthorizationLayer, fairness::FairnessLayer, impersonation::ImpersonationLayer,
    limits::LimitsLayer, metrics::MetricsLayer, metrics::RequestMetrics, panic::PanicLayer,
    request_info::RequestInfoLayer, tenant_access::TenantAccessLayer,
    tenant_lifecycle::TenantLifecycleLayer, trace::TraceLayer,
};
use std::sync::Arc;
use std::time::Duration;

/// The response body of every layer (the gateway's one body type).
pub type Body = crate::http::Body;

/// What the edge layers are configured with.
#[derive(Clone)]
pub struct Settings {
    /// Tenant of paths without a `/clusters/<tenant>` prefix.
    pub default_tenant: Arc<str>,
    /// kube-apiserver's `--request-timeout`: the most a non-long-running request may take.
    pub request_timeout: Duration,
    /// Where the metrics layer counts.
    pub metrics: Arc<RequestMetrics>,
    /// The authenticator chain of the authentication layer.
    pub authn: Arc<crdplane_auth::chain::Authenticators>,
    /// The gateway whose tenants, and whose authorizer, the tenant-lifecycle,
    /// tenant-access and authorization layers ask (None: allow all).
    pub authz: Option<Arc<crate::context::Ctx>>,
    /// The audit policy and backends (None: no audit events, only `Audit-Id`).
    pub audit: Option<Arc<crate::audit::Auditor>>,
}

impl Settings {
    /// The edge settings from the gateway configuration, recording into `metrics`.
    pub fn new(cfg: &crate::context::Config, metrics: Arc<RequestMetrics>) -> Self {
        Self {
            default_tenant: cfg.default_tenant.as_str().into(),
            request_timeout: cfg.request_timeout,
            metrics,
            authn: cfg.authn.clone(),
            authz: None,
            audit: cfg.audit.clone(),
        }
    }
}

/// The edge service around `router` (see the module docs for the order).
pub type Edge<R> = crate::filters::audit_id::AuditIds<
    crate::filters::panic::PanicRecovery<
        crate::filters::trace::Tracing<
            crate::filters::request_info::WithRequestInfo<
                crate::filters::metrics::Metrics<
                    crate::filters::limits::Limits<
                        crate::filters::authentication::Authentication<
                            crate::filters::audit::Audit<
                                crate::filters::impersonation::Impersonation<
                                    crate::filters::tenant_lifecycle::TenantLifecycle<
                                        crate::filters::tenant_access::TenantAccess<
                                            crate::filters::fairness::Fairness<
                                                crate::filters::authorization::Authorization<R>,
                                            >,
                                        >,
                                    >,
                                >,
                            >,
                        >,
                    >,
                >,
            >,
        >,
    >,
>;

/// Builds the edge service, outermost layer first.
pub fn build<R>(s: &Settings, router: R) -> Edge<R> {
    tower::ServiceBuilder::new()
        .layer(AuditIdLayer)
        .layer(PanicLayer)
        .layer(TraceLayer)
        .layer(RequestInfoLayer::new(s.default_tenant.clone()))
        .layer(MetricsLayer::new(s.metrics.clone(), s.authz.clone()))
        .layer(LimitsLayer::new(s.request_timeout))
        .layer(AuthenticationLayer::new(s.authn.clone(), s.authz.clone()).auditing(s.audit.clone()))
        .layer(AuditLayer::new(s.audit.clone()))
        .layer(ImpersonationLayer::new(s.authz.clone()))
        .layer(TenantLifecycleLayer::checking(s.authz.clone()))
        .layer(TenantAccessLayer::checking(s.authz.clone()))
        .layer(FairnessLayer)
        .layer(AuthorizationLayer::authorizing(s.authz.clone()))
        .service(router)
}

#[cfg(test)]
mod tests {
    //! The chain as a whole, with a stub router: what each position sees and answers.
    use super::*;
    use crate::filters::trace::TraceContext;
    use crate::http::{Payload, Query};
    use crate::request_info::RequestInfo;
    use bytes::Bytes;
    use http::{Request, Response, StatusCode};
    use http_body_util::BodyExt;
    use std::convert::Infallible;
    use tower::ServiceExt;

    fn settings(timeout: Duration) -> Settings {
        Settings {
            default_tenant: "default".into(),
            request_timeout: timeout,
            metrics: Arc::new(RequestMetrics::default()),
            authn: Arc::new(crdplane_auth::chain::Authenticators {
                x509: None,
                tokens: None,
                service_accounts: None,
                oidc: None,
                anonymous: true,
                token_cache: Default::default(),
            }),
            authz: None,
            audit: None,
        }
    }

    /// A router that checks what the layers before it put into the request, sleeps on
    /// `/slow` paths (any verb) and panics on `/panic`.
    fn router() -> impl tower::Service<
        Request<Payload>,
        Response = Response<Body>,
        Error = Infallible,
        Future = impl Future<Output = Result<Response<Body>, Infallible>> + Send,
    > + Clone {
        tower::service_fn(|req: Request<Payload>| async move {
            let info = req
                .extensions()
                .get::<RequestInfo>()
                .expect("request info reaches the router")
                .clone();
            assert!(req.extensions().get::<Query>().is_some());
            if req.headers().contains_key("traceparent") {
                assert!(req.extensions().get::<TraceContext>().is_some());
            }
            if info.path.contains("/slow") {
                tokio::time::sleep(Duration::from_millis(400)).await;
            }
            if info.path.contains("/panic") {
                panic!("boom");
            }
            Ok::<_, Infallible>(crate::http::text_response_owned(
                StatusCode::OK,
                format!("{} {} {}", info.tenant, info.verb, info.resource),
            ))
        })
    }

    async fn send<S>(edge: S, method: &str, uri: &str) -> (StatusCode, String, http::HeaderMap)
    where
        S: tower::Service<Request<Payload>, Response = Response<Body>, Error = Infallible>,
    {
        let req = Request::builder()
            .method(method)
            .uri(uri)
            .header(
                "traceparent",
                "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            )
            .body(Payload::Read(Bytes::new()))
            .unwrap();
        let resp = edge.oneshot(req).await.unwrap();
        let (parts, body) = resp.into_parts();
        let body = body.collect().await.unwrap().to_bytes();
        (
            parts.status,
            String::from_utf8_lossy(&body).into_owned(),
            parts.headers,
        )
    }

    #[tokio::test]
    async fn request_info_reaches_metrics_and_the_router() {
        let s = settings(Duration::from_secs(60));
        let edge = build(&s, router());
        let (code, text, _) = send(
            edge.clone(),
            "GET",
            "/clusters/acme/apis/stable.example.com/v1/crontabs",
        )
        .await;
        assert_eq!(code, StatusCode::OK);
        assert_eq!(text, "acme list crontabs");
        // The metrics layer, inside the request-info layer, counted the verb it parsed.
        assert_eq!(s.metrics.count("LIST", 200), 1);
        // A path request info refuses never reaches the metrics layer or the router.
        let (code, text, _) = send(edge, "GET", "/clusters/Not_A_Tenant/api/v1").await;
        assert_eq!(code, StatusCode::NOT_FOUND);
        assert!(text.contains("the server could not find the requested resource"));
        assert_eq!(s.metrics.total(), 1);
    }

    #[tokio::test]
    async fn a_panic_in_the_router_is_upstreams_500() {
        let s = settings(Duration::from_secs(60));
        let (code, text, headers) = send(
            build(&s, router()),
            "GET",
            "/apis/stable.example.com/v1/panic",
        )
        .await;
        assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(
            text,
            "This request caused apiserver to panic. Look in the logs for details.\n"
        );
        assert_eq!(headers["content-type"], "text/plain; charset=utf-8");
    }

    #[tokio::test]
    async fn a_slow_request_times_out_but_a_slow_watch_does_not() {
        let s = settings(Duration::from_millis(100));
        let edge = build(&s, router());
        let (code, text, _) = send(
            edge.clone(),
            "GET",
            "/apis/stable.example.com/v1/namespaces/slow/crontabs",
        )
        .await;
        assert_eq!(code, StatusCode::GATEWAY_TIMEOUT);
        assert_eq!(
            text,
            "{\"metadata\":{},\"status\":\"Failure\",\"message\":\"Timeout: request did not complete within the allotted timeout\",\"reason\":\"Timeout\",\"details\":{},\"code\":504}\n"
        );
        // The metrics layer sits outside the limits layer: it counts the 504.
        assert_eq!(s.metrics.count("LIST", 504), 1);
        let (code, _, _) = send(
            edge,
            "GET",
            "/apis/stable.example.com/v1/namespaces/slow/crontabs?watch=1",
        )
        .await;
        assert_eq!(code, StatusCode::OK);
        assert_eq!(s.metrics.count("WATCH", 200), 1);
    }
}
