//! Authorization seam: ninth layer of the edge stack ([`crate::stack`]), the last before
//! the router, where upstream's `WithAuthorization`
//! (staging/src/k8s.io/apiserver/pkg/endpoints/filters/authorization.go) sits. It sees the
//! request info ([`crate::request_info::RequestInfo`], put there by the request-info
//! layer) that an authorizer decides on: verb, API group, resource, subresource, namespace,
//! name and tenant.
//!
//! Pass-through today: everything is allowed. The RBAC issue puts here the per-tenant RBAC
//! authorizer and upstream's 403 Forbidden Status (`forbidden.go`), then audit
//! (`WithAudit`) next to it.

super::seam!(
    /// The layer of [`Authorization`].
    AuthorizationLayer,
    /// Pass-through authorization (see the module docs for what comes here).
    Authorization
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filters::testing::{echo, read, request};
    use tower::{Layer, ServiceExt};

    /// The seam hands the request on untouched (extensions included) and answers what the
    /// inner service answers.
    #[tokio::test]
    async fn passes_requests_through() {
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
        let resp = AuthorizationLayer.layer(inner).oneshot(req).await.unwrap();
        assert_eq!(
            read(resp).await,
            (
                http::StatusCode::OK,
                "DELETE /api/v1/namespaces/a Some(\"acme\")".into()
            )
        );
    }
}
