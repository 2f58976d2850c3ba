//! The built-in resource types crdplane serves besides CRDs and custom resources, as data:
//! names, scope, verbs and discovery facts. One table, read by the gateway (routing and
//! discovery), the registry (OpenAPI) and the storage service (which resources expire).
//!
//! Facts follow upstream's registrations (k8s.io/kubernetes pkg/registry/core/*/storage,
//! pkg/registry/events, pkg/registry/coordination, pkg/registry/rbac) and
//! test/integration/etcd/data: `GVRToStorageVersionHash` of storageversionhashdata for the
//! hashes. `events.k8s.io/v1` events are the same stored objects as core `v1` events
//! (upstream stores both under the `events` resource of the core group), so they share a
//! storage resource. Within a group the entries are in resource-name order, the order of
//! upstream's discovery lists; ClusterRole and ClusterRoleBinding are the cluster-scoped ones.

/// One served group/version/resource of a built-in type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltinResource {
    /// API group ("" for the core group, served under `/api`).
    pub group: &'static str,
    /// API version served (e.g. `v1`).
    pub version: &'static str,
    /// Plural resource name in URLs.
    pub resource: &'static str,
    /// Singular resource name (discovery's `singularName`).
    pub singular: &'static str,
    /// The object's `kind`.
    pub kind: &'static str,
    /// The `kind` of its list (e.g. `EventList`).
    pub list_kind: &'static str,
    /// Whether objects live in a namespace (otherwise cluster-scoped).
    pub namespaced: bool,
    /// Short names for kubectl (discovery's `shortNames`).
    pub short_names: &'static [&'static str],
    /// Verbs served, as listed in discovery.
    pub verbs: &'static [&'static str],
    /// Discovery's `storageVersionHash`.
    pub storage_version_hash: &'static str,
    /// Where the objects are stored: (group, resource) of the storage triple.
    pub storage: (&'static str, &'static str),
    /// Whether stored objects expire (upstream's `--event-ttl` for events).
    pub expires: bool,
}

impl BuiltinResource {
    /// `apiVersion` of the objects (`v1`, `events.k8s.io/v1`).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

impl BuiltinResource {
    /// Its entry in a legacy `APIResourceList` (`/api/v1`, `/apis/<g>/<v>`), as
    /// k8s.io/apiserver `pkg/endpoints/installer.go` registers it: name, singularName,
    /// namespaced, kind, verbs, shortNames (when any), storageVersionHash.
    pub fn discovery_resource(&self) -> crate::discovery::APIResource {
        use crate::discovery::{non_empty, strings};
        crate::discovery::APIResource {
            name: self.resource.into(),
            singular_name: self.singular.into(),
            namespaced: self.namespaced,
            kind: self.kind.into(),
            verbs: strings(self.verbs),
            short_names: non_empty(self.short_names),
            storage_version_hash: Some(self.storage_version_hash.into()),
            ..Default::default()
        }
    }

    /// Its `APIResourceDiscovery` in aggregated discovery (`apidiscovery.k8s.io/v2`,
    /// k8s.io/apiserver `pkg/endpoints/discovery/aggregated`): resource, responseKind,
    /// scope, singularResource, verbs, shortNames (when any).
    pub fn aggregated_resource(&self) -> crate::discovery::APIResourceDiscovery {
        use crate::discovery::{GroupVersionKind, scope, strings};
        crate::discovery::APIResourceDiscovery {
            resource: self.resource.into(),
            response_kind: Some(GroupVersionKind::new(self.group, self.version, self.kind)),
            scope: scope(self.namespaced),
            singular_resource: self.singular.into(),
            verbs: strings(self.verbs),
            short_names: strings(self.short_names),
            ..Default::default()
        }
    }
}

/// Every verb of a fully served resource, in discovery's order.
pub const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// The built-in types served through the generic machinery.
pub const BUILTIN: &[BuiltinResource] = &[
    BuiltinResource {
        group: "",
        version: "v1",
        resource: "configmaps",
        singular: "configmap",
        kind: "ConfigMap",
        list_kind: "ConfigMapList",
        namespaced: true,
        short_names: &["cm"],
        verbs: ALL_VERBS,
        storage_version_hash: "qFsyl6wFWjQ=",
        storage: ("", "configmaps"),
        expires: false,
    },
    BuiltinResource {
        group: "",
        version: "v1",
        resource: "events",
        singular: "event",
        kind: "Event",
        list_kind: "EventList",
        namespaced: true,
        short_names: &["ev"],
        verbs: ALL_VERBS,
        storage_version_hash: "r2yiGXH7wu8=",
        storage: ("", "events"),
        expires: true,
    },
    BuiltinResource {
        group: "",
        version: "v1",
        resource: "secrets",
        singular: "secret",
        kind: "Secret",
        list_kind: "SecretList",
        namespaced: true,
        short_names: &[],
        verbs: ALL_VERBS,
        storage_version_hash: "S6u1pOWzb84=",
        storage: ("", "secrets"),
        expires: false,
    },
    BuiltinResource {
        group: "",
        version: "v1",
        resource: "serviceaccounts",
        singular: "serviceaccount",
        kind: "ServiceAccount",
        list_kind: "ServiceAccountList",
        namespaced: true,
        short_names: &["sa"],
        verbs: ALL_VERBS,
        storage_version_hash: "pbx9ZvyFpBE=",
        storage: ("", "serviceaccounts"),
        expires: false,
    },
    BuiltinResource {
        group: "coordination.k8s.io",
        version: "v1",
        resource: "leases",
        singular: "lease",
        kind: "Lease",
        list_kind: "LeaseList",
        namespaced: true,
        short_names: &[],
        verbs: ALL_VERBS,
        storage_version_hash: "gqkMMb/YqFM=",
        storage: ("coordination.k8s.io", "leases"),
        expires: false,
    },
    BuiltinResource {
        group: "events.k8s.io",
        version: "v1",
        resource: "events",
        singular: "event",
        kind: "Event",
        list_kind: "EventList",
        namespaced: true,
        short_names: &["ev"],
        verbs: ALL_VERBS,
        storage_version_hash: "r2yiGXH7wu8=",
        storage: ("", "events"),
        expires: true,
    },
    BuiltinResource {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        resource: "clusterrolebindings",
        singular: "clusterrolebinding",
        kind: "ClusterRoleBinding",
        list_kind: "ClusterRoleBindingList",
        namespaced: false,
        short_names: &[],
        verbs: ALL_VERBS,
        storage_version_hash: "48tpQ8gZHFc=",
        storage: ("rbac.authorization.k8s.io", "clusterrolebindings"),
        expires: false,
    },
    BuiltinResource {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        resource: "clusterroles",
        singular: "clusterrole",
        kind: "ClusterRole",
        list_kind: "ClusterRoleList",
        namespaced: false,
        short_names: &[],
        verbs: ALL_VERBS,
        storage_version_hash: "bYE5ZWDrJ44=",
        storage: ("rbac.authorization.k8s.io", "clusterroles"),
        expires: false,
    },
    BuiltinResource {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        resource: "rolebindings",
        singular: "rolebinding",
        kind: "RoleBinding",
        list_kind: "RoleBindingList",
        namespaced: true,
        short_names: &[],
        verbs: ALL_VERBS,
        storage_version_hash: "eGsCzGH6b1g=",
        storage: ("rbac.authorization.k8s.io", "rolebindings"),
        expires: false,
    },
    BuiltinResource {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        resource: "roles",
        singular: "role",
        kind: "Role",
        list_kind: "RoleList",
        namespaced: true,
        short_names: &[],
        verbs: ALL_VERBS,
        storage_version_hash: "7FuwZcIIItM=",
        storage: ("rbac.authorization.k8s.io", "roles"),
        expires: false,
    },
];

/// A create-only resource that stores nothing: a create answers with what the server
/// computed for the request (upstream's review APIs, e.g. `SelfSubjectReview`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReviewResource {
    /// API group.
    pub group: &'static str,
    /// API version served.
    pub version: &'static str,
    /// Plural resource name in URLs.
    pub resource: &'static str,
    /// Singular resource name.
    pub singular: &'static str,
    /// The object's `kind`.
    pub kind: &'static str,
    /// Whether it is created in a namespace (LocalSubjectAccessReview).
    pub namespaced: bool,
}

impl ReviewResource {
    /// Its legacy discovery entry, as upstream lists a create-only, unstored resource:
    /// verbs `["create"]`, no storageVersionHash.
    pub fn discovery_resource(&self) -> crate::discovery::APIResource {
        crate::discovery::APIResource {
            name: self.resource.into(),
            singular_name: self.singular.into(),
            namespaced: self.namespaced,
            kind: self.kind.into(),
            verbs: crate::discovery::strings(&["create"]),
            ..Default::default()
        }
    }

    /// Its aggregated discovery entry.
    pub fn aggregated_resource(&self) -> crate::discovery::APIResourceDiscovery {
        use crate::discovery::{GroupVersionKind, scope, strings};
        crate::discovery::APIResourceDiscovery {
            resource: self.resource.into(),
            response_kind: Some(GroupVersionKind::new(self.group, self.version, self.kind)),
            scope: scope(self.namespaced),
            singular_resource: self.singular.into(),
            verbs: strings(&["create"]),
            ..Default::default()
        }
    }
}

/// The review resources served (k8s.io/kubernetes pkg/registry/authentication and
/// pkg/registry/authorization).
/// SelfSubjectReview also in `v1beta1`, which kubectl 1.27's `auth whoami` asks for.
pub const REVIEWS: &[ReviewResource] = &[
    ReviewResource {
        group: "authentication.k8s.io",
        version: "v1",
        resource: "selfsubjectreviews",
        singular: "selfsubjectreview",
        kind: "SelfSubjectReview",
        namespaced: false,
    },
    ReviewResource {
        group: "authentication.k8s.io",
        version: "v1beta1",
        resource: "selfsubjectreviews",
        singular: "selfsubjectreview",
        kind: "SelfSubjectReview",
        namespaced: false,
    },
    ReviewResource {
        group: "authorization.k8s.io",
        version: "v1",
        resource: "localsubjectaccessreviews",
        singular: "localsubjectaccessreview",
        kind: "LocalSubjectAccessReview",
        namespaced: true,
    },
    ReviewResource {
        group: "authorization.k8s.io",
        version: "v1",
        resource: "selfsubjectaccessreviews",
        singular: "selfsubjectaccessreview",
        kind: "SelfSubjectAccessReview",
        namespaced: false,
    },
    ReviewResource {
        group: "authorization.k8s.io",
        version: "v1",
        resource: "selfsubjectrulesreviews",
        singular: "selfsubjectrulesreview",
        kind: "SelfSubjectRulesReview",
        namespaced: false,
    },
    ReviewResource {
        group: "authorization.k8s.io",
        version: "v1",
        resource: "subjectaccessreviews",
        singular: "subjectaccessreview",
        kind: "SubjectAccessReview",
        namespaced: false,
    },
];

/// The built-in resource served at (group, version, resource).
pub fn lookup(group: &str, version: &str, resource: &str) -> Option<&'static BuiltinResource> {
    BUILTIN
        .iter()
        .find(|b| b.group == group && b.version == version && b.resource == resource)
}

/// The API groups (other than core) of built-in types, in discovery order.
pub fn groups() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for b in BUILTIN {
        if !b.group.is_empty() && !out.contains(&b.group) {
            out.push(b.group);
        }
    }
    out
}

/// Whether objects of the storage triple (group, resource) expire.
pub fn storage_expires(group: &str, resource: &str) -> bool {
    BUILTIN
        .iter()
        .any(|b| b.expires && b.storage == (group, resource))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent() {
        assert_eq!(lookup("", "v1", "configmaps").unwrap().kind, "ConfigMap");
        assert_eq!(
            lookup("events.k8s.io", "v1", "events")
                .unwrap()
                .api_version(),
            "events.k8s.io/v1"
        );
        assert!(lookup("", "v1", "pods").is_none());
        assert_eq!(
            groups(),
            vec![
                "coordination.k8s.io",
                "events.k8s.io",
                "rbac.authorization.k8s.io"
            ]
        );
        let rbac: Vec<(&str, bool)> = BUILTIN
            .iter()
            .filter(|b| b.group == "rbac.authorization.k8s.io")
            .map(|b| (b.resource, b.namespaced))
            .collect();
        assert_eq!(
            rbac,
            [
                ("clusterrolebindings", false),
                ("clusterroles", false),
                ("rolebindings", true),
                ("roles", true)
            ]
        );
        assert_eq!(
            lookup("rbac.authorization.k8s.io", "v1", "roles")
                .unwrap()
                .storage_version_hash,
            "7FuwZcIIItM="
        );
        assert!(storage_expires("", "events"));
        assert!(!storage_expires("", "configmaps"));
        for b in BUILTIN {
            assert_eq!(b.list_kind, format!("{}List", b.kind));
            assert_eq!(b.singular, b.kind.to_lowercase());
        }
    }
}
