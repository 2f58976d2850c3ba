//! Tenant-access seam: seventh layer of the edge stack (`stack.rs`), after
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
    super::super::seam_test!(super::TenantAccessLayer);
}
