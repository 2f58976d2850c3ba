//! Authentication seam: sixth layer of the edge stack (`stack.rs`), after the limits
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
    super::super::seam_test!(super::AuthenticationLayer);
}
