//! Names of crdplane's tenancy API, shared by the gateway (which serves Tenants and checks
//! every request's tenant against them) and the storage service (which announces changes
//! of Tenants to the gateways). Pure data; see DESIGN.md, "Identity and tenancy".

/// The logical cluster of the platform admins (`/clusters/root/…`), where Tenants are
/// served. No Tenant may take its name, and it always exists.
pub const ADMIN_SCOPE: &str = "root";
/// API group of Tenants.
pub const GROUP: &str = "crdplane.io";
/// API version of Tenants.
pub const VERSION: &str = "v1alpha1";
/// Resource name of Tenants.
pub const RESOURCE: &str = "tenants";
/// Kind of a Tenant.
pub const KIND: &str = "Tenant";
/// `apiVersion` of a Tenant.
pub const API_VERSION: &str = "crdplane.io/v1alpha1";
/// List kind of Tenants.
pub const LIST_KIND: &str = "TenantList";
/// Singular resource name of Tenants (discovery's `singularName`).
pub const SINGULAR: &str = "tenant";
/// The verbs served on Tenants, in discovery's order (no `deletecollection`: tenants are
/// deleted one by one).
pub const VERBS: &[&str] = &[
    "create", "delete", "get", "list", "patch", "update", "watch",
];
