//! Discovery documents as types: legacy discovery (`APIResourceList`, `APIResource`,
//! `GroupVersionForDiscovery`) from k8s-openapi, and aggregated discovery
//! (`apidiscovery.k8s.io/v2`: `APIGroupDiscoveryList` and its parts), which k8s-openapi does
//! not carry, written once here after k8s.io/api `apidiscovery/v2/types.go` (field names and
//! `omitempty` rules). The gateway (the core group) and the registry (CRD groups, the
//! built-in groups, `apiextensions.k8s.io`) build their documents from these; the built-in
//! types' entries come from [`crate::builtin::BuiltinResource`].

use serde::{Deserialize, Serialize};

pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    APIResource, APIResourceList, GroupVersionForDiscovery,
};

/// The apiVersion of aggregated discovery documents.
pub const AGGREGATED_API_VERSION: &str = "apidiscovery.k8s.io/v2";

/// `metav1.GroupVersionKind` (aggregated discovery's `responseKind`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct GroupVersionKind {
    /// API group ("" for the core group).
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
}

impl GroupVersionKind {
    /// The kind `kind` of `group`/`version`.
    pub fn new(group: &str, version: &str, kind: &str) -> Self {
        GroupVersionKind {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        }
    }
}

/// `APISubresourceDiscovery`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct APISubresourceDiscovery {
    /// The subresource's name (`status`, `scale`).
    pub subresource: String,
    /// What it answers with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_kind: Option<GroupVersionKind>,
    /// Verbs served.
    pub verbs: Vec<String>,
}

/// `APIResourceDiscovery`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct APIResourceDiscovery {
    /// Plural resource name.
    pub resource: String,
    /// The kind it serves.
    pub response_kind: Option<GroupVersionKind>,
    /// `Namespaced` or `Cluster`.
    pub scope: String,
    /// Singular resource name.
    pub singular_resource: String,
    /// Verbs served.
    pub verbs: Vec<String>,
    /// Short names for kubectl.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub short_names: Vec<String>,
    /// Categories (`all`, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub categories: Vec<String>,
    /// Its subresources.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subresources: Vec<APISubresourceDiscovery>,
}

/// The `scope` of a resource.
pub fn scope(namespaced: bool) -> String {
    if namespaced { "Namespaced" } else { "Cluster" }.into()
}

/// `APIVersionDiscovery`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct APIVersionDiscovery {
    /// The version's name.
    pub version: String,
    /// Its resources (always sent here, also when empty).
    pub resources: Vec<APIResourceDiscovery>,
    /// `Current` (or `Stale` for an aggregated API server that could not be reached).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub freshness: String,
}

/// The metadata of an `APIGroupDiscovery`: its name (the group; "" for the core group) and
/// the `creationTimestamp: null` a Go zero time encodes to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct GroupMeta {
    /// The group's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Always null.
    pub creation_timestamp: Option<String>,
}

/// `APIGroupDiscovery`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct APIGroupDiscovery {
    /// The group.
    pub metadata: GroupMeta,
    /// Its versions, preferred first.
    pub versions: Vec<APIVersionDiscovery>,
}

/// `APIGroupDiscoveryList` (what `/api` and `/apis` answer to aggregated discovery).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct APIGroupDiscoveryList {
    /// `APIGroupDiscoveryList`.
    pub kind: String,
    /// [`AGGREGATED_API_VERSION`].
    pub api_version: String,
    /// Empty ListMeta.
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// One item per group.
    pub items: Vec<APIGroupDiscovery>,
}

impl APIGroupDiscoveryList {
    /// The list of `items`.
    pub fn new(items: Vec<APIGroupDiscovery>) -> Self {
        APIGroupDiscoveryList {
            kind: "APIGroupDiscoveryList".into(),
            api_version: AGGREGATED_API_VERSION.into(),
            metadata: Default::default(),
            items,
        }
    }
}

/// `APIResourceList` of `group_version` (`v1` for the core group).
pub fn resource_list(group_version: &str, resources: Vec<APIResource>) -> APIResourceList {
    APIResourceList {
        group_version: group_version.into(),
        resources,
    }
}

/// Owned strings of a static list.
pub fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// `Some(owned strings)` of a list, `None` when it is empty (an omitted field).
pub fn non_empty(v: &[&str]) -> Option<Vec<String>> {
    (!v.is_empty()).then(|| strings(v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn encodings_follow_upstream_field_rules() {
        let r = APIResourceDiscovery {
            resource: "crontabs".into(),
            response_kind: Some(GroupVersionKind::new("g", "v1", "CronTab")),
            scope: scope(true),
            singular_resource: "crontab".into(),
            verbs: strings(&["get"]),
            subresources: vec![APISubresourceDiscovery {
                subresource: "status".into(),
                response_kind: Some(GroupVersionKind::new("g", "v1", "CronTab")),
                verbs: strings(&["get"]),
            }],
            ..Default::default()
        };
        let l = APIGroupDiscoveryList::new(vec![APIGroupDiscovery {
            metadata: GroupMeta {
                name: "g".into(),
                creation_timestamp: None,
            },
            versions: vec![APIVersionDiscovery {
                version: "v1".into(),
                resources: vec![r],
                freshness: "Current".into(),
            }],
        }]);
        assert_eq!(
            serde_json::to_value(&l).unwrap(),
            json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
                "metadata": {}, "items": [{"metadata": {"name": "g", "creationTimestamp": null},
                "versions": [{"version": "v1", "freshness": "Current", "resources": [{
                    "resource": "crontabs", "responseKind": {"group": "g", "version": "v1", "kind": "CronTab"},
                    "scope": "Namespaced", "singularResource": "crontab", "verbs": ["get"],
                    "subresources": [{"subresource": "status",
                        "responseKind": {"group": "g", "version": "v1", "kind": "CronTab"},
                        "verbs": ["get"]}]}]}]}]})
        );
        let legacy = resource_list(
            "g/v1",
            vec![APIResource {
                name: "crontabs".into(),
                singular_name: "crontab".into(),
                namespaced: true,
                kind: "CronTab".into(),
                verbs: strings(&["get"]),
                short_names: non_empty(&[]),
                ..Default::default()
            }],
        );
        assert_eq!(
            serde_json::to_value(&legacy).unwrap(),
            json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "g/v1",
                "resources": [{"name": "crontabs", "singularName": "crontab", "namespaced": true,
                    "kind": "CronTab", "verbs": ["get"]}]})
        );
    }
}
