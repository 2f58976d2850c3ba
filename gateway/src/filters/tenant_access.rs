//! Tenant-access seam: seventh layer of the edge stack ([`crate::stack`]), after
//! authentication (it needs the identity) and before fairness (a request refused here costs
//! no fairness seat). Upstream has no tenants; this is crdplane's own filter (DESIGN.md,
//! "Identity and tenancy").
//!
//! Pass-through today: every request may use the tenant its path names. The tenancy issue
//! puts here the check that the tenant exists (404, writing nothing, when a platform admin
//! has not created it) and that the authenticated identity may use it (403 Status).

super::seam!(
    /// The layer of [`TenantAccess`].
    TenantAccessLayer,
    /// Pass-through tenant access (see the module docs for what comes here).
    TenantAccess
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
        let resp = TenantAccessLayer.layer(inner).oneshot(req).await.unwrap();
        assert_eq!(
            read(resp).await,
            (
                http::StatusCode::OK,
                "DELETE /api/v1/namespaces/a Some(\"acme\")".into()
            )
        );
    }
}
