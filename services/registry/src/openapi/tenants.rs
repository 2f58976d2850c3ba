//! The `crdplane.io/v1alpha1` Tenant type, published in the OpenAPI documents of the admin
//! scope ([`ADMIN_SCOPE`], `/clusters/root`) only: the gateway serves Tenants there and lists
//! them in that scope's discovery. Upstream has no tenants; to clients the Tenant is one more
//! built-in type of that scope: definitions shaped as the built-ins' (named by
//! [`definition_name`], the namer's form for a group outside k8s.io), endpoints from the
//! common path builder.

use serde_json::{Map, Value, json};

use super::definition_name;
use super::paths::KindInfo;
use super::schema::{
    API_VERSION_DESC, Flavor, KIND_DESC, LIST_META, LIST_METADATA_DESC, OBJECT_META,
    OBJECT_METADATA_DESC, gvk_ext,
};
pub(crate) use crdplane_core::tenancy::ADMIN_SCOPE;
use crdplane_core::tenancy::{GROUP, KIND, LIST_KIND, RESOURCE, VERBS, VERSION};
/// The definition of the Subjects of `spec.owners` (a built-in RBAC type).
const SUBJECT: &str = "io.k8s.api.rbac.v1.Subject";

/// `(group, version)` of Tenants, which gets its own v3 document in the admin scope.
pub(crate) const GROUP_VERSION: (&str, &str) = (GROUP, VERSION);

fn reference(name: &str) -> String {
    Flavor::V2.reference(name)
}

/// The Swagger 2.0 definitions of Tenant, its spec, status and list.
pub(crate) fn definitions() -> Map<String, Value> {
    let tenant = definition_name(GROUP, VERSION, KIND);
    let spec = definition_name(GROUP, VERSION, "TenantSpec");
    let status = definition_name(GROUP, VERSION, "TenantStatus");
    let list = definition_name(GROUP, VERSION, LIST_KIND);
    let api_version = json!({"description": API_VERSION_DESC, "type": "string"});
    let kind = json!({"description": KIND_DESC, "type": "string"});
    let mut defs = Map::new();
    defs.insert(
        tenant.clone(),
        json!({
            "description": "Tenant is a logical cluster of crdplane, served under /clusters/<name>. Platform admins create and delete Tenants in the admin scope; deleting one removes all of the tenant's objects.",
            "properties": {
                "apiVersion": api_version.clone(),
                "kind": kind.clone(),
                "metadata": {"$ref": reference(OBJECT_META), "description": OBJECT_METADATA_DESC},
                "spec": {"$ref": reference(&spec), "description": "Spec is what the platform admin asks for the tenant."},
                "status": {"$ref": reference(&status), "description": "Status is the current state of the tenant, maintained by the server."},
            },
            "type": "object",
            "x-kubernetes-group-version-kind": gvk_ext(GROUP, VERSION, KIND),
        }),
    );
    defs.insert(
        spec,
        json!({
            "description": "TenantSpec describes the attributes of a tenant.",
            "properties": {
                "owners": {
                    "description": "Owners are the subjects (users, groups, service accounts) bound to cluster-admin in the tenant by the ClusterRoleBinding crdplane:tenant-owners, which the server keeps in step with this list.",
                    "items": {"$ref": reference(SUBJECT)},
                    "type": "array",
                    "x-kubernetes-list-type": "atomic",
                },
            },
            "type": "object",
        }),
    );
    defs.insert(
        status,
        json!({
            "description": "TenantStatus is information about the current status of a tenant.",
            "properties": {
                "phase": {
                    "description": "Phase is \"Active\", or \"Terminating\" while the tenant's objects are being removed.",
                    "type": "string",
                },
            },
            "type": "object",
        }),
    );
    defs.insert(
        list,
        json!({
            "description": "TenantList is a list of Tenants.",
            "properties": {
                "apiVersion": api_version,
                "items": {
                    "description": "Items is the list of Tenants.",
                    "items": {"$ref": reference(&tenant)},
                    "type": "array",
                },
                "kind": kind,
                "metadata": {"$ref": reference(LIST_META), "description": LIST_METADATA_DESC},
            },
            "required": ["items"],
            "type": "object",
            "x-kubernetes-group-version-kind": gvk_ext(GROUP, VERSION, LIST_KIND),
        }),
    );
    defs
}

/// The Swagger 2.0 path items of the Tenant endpoints (cluster-scoped, main resource
/// only), keyed by path.
pub(crate) fn paths() -> Vec<(String, Value)> {
    let def = definition_name(GROUP, VERSION, KIND);
    let list_def = definition_name(GROUP, VERSION, LIST_KIND);
    KindInfo {
        group: GROUP,
        version: VERSION,
        kind: KIND,
        plural: RESOURCE,
        namespaced: false,
        status: false,
        scale: false,
        verbs: VERBS,
        def: &def,
        list_def: &list_def,
    }
    .paths()
}
