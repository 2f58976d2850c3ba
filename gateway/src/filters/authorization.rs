//! Authorization seam: ninth layer of the edge stack (`stack.rs`), the last before
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
    super::super::seam_test!(super::AuthorizationLayer);
}
