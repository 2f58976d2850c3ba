//! Authentication seam: sixth layer of the edge stack ([`crate::stack`]), after the limits
//! and before tenant access, where upstream's `WithAuthentication`
//! (staging/src/k8s.io/apiserver/pkg/endpoints/filters/authentication.go) sits.
//!
//! Pass-through today: every request is anonymous. The identity issue puts here the
//! authenticators (x509 client certificates, bearer tokens, OIDC, service-account JWTs),
//! the user info they yield into the request extensions, upstream's 401 Status for a request
//! whose credentials fail, impersonation right after it (`WithImpersonation`), and the
//! watch limits' `ClientKey::User` in place of the peer address.

super::seam!(
    /// The layer of [`Authentication`].
    AuthenticationLayer,
    /// Pass-through authentication (see the module docs for what comes here).
    Authentication
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
        let resp = AuthenticationLayer.layer(inner).oneshot(req).await.unwrap();
        assert_eq!(
            read(resp).await,
            (
                http::StatusCode::OK,
                "DELETE /api/v1/namespaces/a Some(\"acme\")".into()
            )
        );
    }
}
