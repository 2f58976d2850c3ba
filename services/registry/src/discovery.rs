//! Discovery documents of one tenant, legacy and aggregated, built from one list of CRDs.
//!
//! The gateway serves `/apis`, `/apis/<group>`, `/apis/<group>/<version>` and the aggregated
//! `apidiscovery.k8s.io/v2` form of `/apis` from the `DiscoveryResponse` built here, so both
//! forms always agree. Follows apiextensions-apiserver
//! `pkg/apiserver/customresource_discovery_controller.go` (established CRDs only, served
//! versions, accepted names, `<plural>/status` and `<plural>/scale`), the version ordering of
//! k8s.io/apimachinery `pkg/version/helpers.go` (`CompareKubeAwareVersionStrings`) and
//! `storageversionhash.go` of k8s.io/apiserver `pkg/endpoints/discovery`. The built-in groups
//! (`coordination.k8s.io`, `events.k8s.io`, `rbac.authorization.k8s.io`, from
//! `crdplane_core::builtin::BUILTIN`) are part of
//! every tenant's documents, ordered before the CRD groups by kube-aggregator's group
//! priorities. Pure functions.

use crate::crd::{self, CrdView};
use base64::Engine;
use crdplane_core::builtin::{self, BUILTIN};
use crdplane_core::discovery::{
    APIGroupDiscovery, APIGroupDiscoveryList, APIResource, APIResourceDiscovery,
    APISubresourceDiscovery, APIVersionDiscovery, GroupMeta, GroupVersionKind, non_empty,
    resource_list, scope, strings,
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

const CR_VERBS: &[&str] = &[
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "create",
    "update",
    "watch",
];
const SUB_VERBS: &[&str] = &["get", "patch", "update"];
/// Verbs of a CRD whose Terminating condition is True: no create, no update
/// (`customresource_discovery_controller.go`).
const TERMINATING_VERBS: &[&str] = &["delete", "deletecollection", "get", "list", "watch"];

fn verbs(c: &CrdView) -> &'static [&'static str] {
    if c.is_condition_true("Terminating") {
        TERMINATING_VERBS
    } else {
        CR_VERBS
    }
}

/// `discovery.StorageVersionHash`: base64 of the first 8 bytes of sha256("group/version/kind").
pub fn storage_version_hash(group: &str, version: &str, kind: &str) -> String {
    let d = Sha256::digest(format!("{group}/{version}/{kind}").as_bytes());
    base64::engine::general_purpose::STANDARD.encode(&d[..8])
}

/// `CompareKubeAwareVersionStrings` as a sort order (higher priority first): the one
/// implementation in crdplane-core, shared with the gateway.
pub use crdplane_core::names::compare_kube_versions as compare_versions;

/// One served resource in one group-version.
struct Served<'a> {
    crd: &'a CrdView,
    version: &'a crd::Version,
}

fn legacy_resources(list: &[Served<'_>], group: &str) -> Vec<APIResource> {
    let mut out = Vec::new();
    for s in list {
        let c = s.crd;
        let n = &c.status.accepted_names;
        out.push(APIResource {
            name: n.plural.clone(),
            singular_name: n.singular.clone(),
            namespaced: c.namespaced(),
            kind: n.kind.clone(),
            verbs: strings(verbs(c)),
            short_names: (!n.short_names.is_empty()).then(|| n.short_names.clone()),
            categories: (!n.categories.is_empty()).then(|| n.categories.clone()),
            storage_version_hash: c
                .storage_version()
                .map(|sv| storage_version_hash(group, &sv.name, &c.spec.names.kind)),
            ..Default::default()
        });
        let sub = s.version.subresources.as_ref();
        if sub.is_some_and(|s| s.status.is_some()) {
            out.push(APIResource {
                name: format!("{}/status", n.plural),
                namespaced: c.namespaced(),
                kind: n.kind.clone(),
                verbs: strings(SUB_VERBS),
                ..Default::default()
            });
        }
        if sub.is_some_and(|s| s.scale.is_some()) {
            out.push(APIResource {
                name: format!("{}/scale", n.plural),
                namespaced: c.namespaced(),
                group: Some("autoscaling".into()),
                version: Some("v1".into()),
                kind: "Scale".into(),
                verbs: strings(SUB_VERBS),
                ..Default::default()
            });
        }
    }
    out
}

fn aggregated_resources(
    list: &[Served<'_>],
    group: &str,
    version: &str,
) -> Vec<APIResourceDiscovery> {
    let mut out = Vec::new();
    for s in list {
        let c = s.crd;
        let n = &c.status.accepted_names;
        let kind = GroupVersionKind::new(group, version, &n.kind);
        let mut subresources = Vec::new();
        let sub = s.version.subresources.as_ref();
        if sub.is_some_and(|s| s.status.is_some()) {
            subresources.push(APISubresourceDiscovery {
                subresource: "status".into(),
                response_kind: Some(kind.clone()),
                verbs: strings(SUB_VERBS),
            });
        }
        if sub.is_some_and(|s| s.scale.is_some()) {
            subresources.push(APISubresourceDiscovery {
                subresource: "scale".into(),
                response_kind: Some(GroupVersionKind::new("autoscaling", "v1", "Scale")),
                verbs: strings(SUB_VERBS),
            });
        }
        out.push(APIResourceDiscovery {
            resource: n.plural.clone(),
            response_kind: Some(kind),
            scope: scope(c.namespaced()),
            singular_resource: n.singular.clone(),
            verbs: strings(verbs(c)),
            short_names: n.short_names.clone(),
            categories: n.categories.clone(),
            subresources,
        });
    }
    out
}

const CRD_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// The built-in `apiextensions.k8s.io/v1` resource list.
fn apiextensions_legacy() -> Vec<APIResource> {
    vec![
        APIResource {
            name: crd::RESOURCE.into(),
            singular_name: "customresourcedefinition".into(),
            namespaced: false,
            kind: crd::KIND.into(),
            verbs: strings(CRD_VERBS),
            short_names: non_empty(&["crd", "crds"]),
            categories: non_empty(&["api-extensions"]),
            // CRDs are stored as apiextensions.k8s.io/v1beta1 upstream; the hash names the
            // storage version, so kube-apiserver serves the v1beta1 hash.
            storage_version_hash: Some(storage_version_hash(crd::GROUP, "v1beta1", crd::KIND)),
            ..Default::default()
        },
        APIResource {
            name: format!("{}/status", crd::RESOURCE),
            namespaced: false,
            kind: crd::KIND.into(),
            verbs: strings(SUB_VERBS),
            ..Default::default()
        },
    ]
}

fn apiextensions_aggregated() -> APIResourceDiscovery {
    let kind = GroupVersionKind::new(crd::GROUP, crd::VERSION, crd::KIND);
    APIResourceDiscovery {
        resource: crd::RESOURCE.into(),
        response_kind: Some(kind.clone()),
        scope: scope(false),
        singular_resource: "customresourcedefinition".into(),
        verbs: strings(CRD_VERBS),
        short_names: strings(&["crd", "crds"]),
        categories: strings(&["api-extensions"]),
        subresources: vec![APISubresourceDiscovery {
            subresource: "status".into(),
            response_kind: Some(kind),
            verbs: strings(SUB_VERBS),
        }],
    }
}

/// One group's entry in aggregated discovery.
fn group_discovery(group: &str, versions: Vec<APIVersionDiscovery>) -> APIGroupDiscovery {
    APIGroupDiscovery {
        metadata: GroupMeta {
            name: group.into(),
            creation_timestamp: None,
        },
        versions,
    }
}

/// One version's entry in aggregated discovery.
fn version_discovery(version: &str, resources: Vec<APIResourceDiscovery>) -> APIVersionDiscovery {
    APIVersionDiscovery {
        version: version.into(),
        resources,
        freshness: "Current".into(),
    }
}

fn to_json(v: impl serde::Serialize) -> Value {
    serde_json::to_value(v).expect("discovery documents encode")
}

/// kube-aggregator's group priorities for the built-in groups served here
/// (k8s.io/kubernetes `pkg/controlplane/apiserver/options` → `apiVersionPriorities` in
/// pkg/controlplane/aggregator.go); `/apis` lists groups by descending priority. CRD
/// groups get 1000 (apiextensions-apiserver's autoregistration) and follow by name.
fn group_priority(group: &str) -> u32 {
    match group {
        "events.k8s.io" => 17750,
        "authentication.k8s.io" => 17700,
        "authorization.k8s.io" => 17600,
        "rbac.authorization.k8s.io" => 17000,
        crd::GROUP => 16700,
        "coordination.k8s.io" => 16500,
        g if builtin::groups().contains(&g) => 16000,
        _ => 1000,
    }
}

/// The `apiextensions.k8s.io` group: its entry, its v1 resource list, its aggregated item.
fn push_apiextensions(
    group_items: &mut Vec<Value>,
    resource_lists: &mut BTreeMap<String, Value>,
    agg_items: &mut Vec<APIGroupDiscovery>,
) {
    group_items.push(json!({
        "name": crd::GROUP,
        "versions": [{"groupVersion": crd::API_VERSION, "version": crd::VERSION}],
        "preferredVersion": {"groupVersion": crd::API_VERSION, "version": crd::VERSION},
    }));
    resource_lists.insert(
        crd::API_VERSION.to_string(),
        to_json(resource_list(crd::API_VERSION, apiextensions_legacy())),
    );
    agg_items.push(group_discovery(
        crd::GROUP,
        vec![version_discovery(
            crd::VERSION,
            vec![apiextensions_aggregated()],
        )],
    ));
}

/// The discovery documents of a tenant.
#[derive(Debug, Clone, PartialEq)]
pub struct Documents {
    /// The `APIGroupList` served at `/apis`.
    pub group_list: Value,
    /// `APIResourceList` of each served group-version, keyed by `<group>/<version>`.
    pub resource_lists: BTreeMap<String, Value>,
    /// The aggregated `APIGroupDiscoveryList` (apidiscovery.k8s.io/v2) for `/apis`.
    pub aggregated: Value,
    /// Hex of the first 16 bytes of a SHA-256 over all the documents; changes whenever any
    /// of them does.
    pub etag: String,
}

/// Builds every discovery document from the tenant's CRDs.
pub fn build(crds: &[CrdView]) -> Documents {
    // group → version → served resources
    let mut groups: BTreeMap<&str, BTreeMap<&str, Vec<Served<'_>>>> = BTreeMap::new();
    let mut sorted: Vec<&CrdView> = crds.iter().filter(|c| c.established()).collect();
    sorted.sort_by(|a, b| {
        a.status
            .accepted_names
            .plural
            .cmp(&b.status.accepted_names.plural)
    });
    for c in sorted {
        if c.spec.group == crd::GROUP {
            continue;
        }
        for v in c.spec.versions.iter().filter(|v| v.served) {
            groups
                .entry(c.spec.group.as_str())
                .or_default()
                .entry(v.name.as_str())
                .or_default()
                .push(Served { crd: c, version: v });
        }
    }

    // group → version → (legacy entries, aggregated entries): the built-in types first,
    // then the CRDs serving the group-version. A CRD in a built-in group (upstream requires
    // the `api-approved.kubernetes.io` annotation for those) joins the group; a plural that
    // a built-in type already serves stays the built-in's.
    type Lists = (Vec<APIResource>, Vec<APIResourceDiscovery>);
    let mut lists: BTreeMap<&str, BTreeMap<&str, Lists>> = BTreeMap::new();
    for b in BUILTIN.iter().filter(|b| !b.group.is_empty()) {
        let e = lists
            .entry(b.group)
            .or_default()
            .entry(b.version)
            .or_default();
        e.0.push(b.discovery_resource());
        e.1.push(b.aggregated_resource());
    }
    for r in builtin::REVIEWS {
        let e = lists
            .entry(r.group)
            .or_default()
            .entry(r.version)
            .or_default();
        e.0.push(r.discovery_resource());
        e.1.push(r.aggregated_resource());
    }
    for (group, versions) in &groups {
        for (v, served) in versions {
            let taken = |name: &str| {
                let base = name.split('/').next().unwrap_or_default();
                builtin::lookup(group, v, base).is_some()
            };
            let e = lists.entry(group).or_default().entry(v).or_default();
            e.0.extend(
                legacy_resources(served, group)
                    .into_iter()
                    .filter(|x| !taken(&x.name)),
            );
            e.1.extend(
                aggregated_resources(served, group, v)
                    .into_iter()
                    .filter(|x| !taken(&x.resource)),
            );
        }
    }
    let mut order: Vec<&str> = lists.keys().copied().collect();
    order.sort_by_key(|g| std::cmp::Reverse(group_priority(g)));

    let mut group_items = Vec::new();
    let mut resource_lists = BTreeMap::new();
    let mut agg_items = Vec::new();
    let mut apiextensions_done = false;
    for group in order {
        if !apiextensions_done && group_priority(group) < group_priority(crd::GROUP) {
            push_apiextensions(&mut group_items, &mut resource_lists, &mut agg_items);
            apiextensions_done = true;
        }
        let versions = lists.remove(group).expect("a listed group");
        let mut names: Vec<&str> = versions.keys().copied().collect();
        names.sort_by(|a, b| compare_versions(a, b));
        let gvs: Vec<Value> = names
            .iter()
            .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
            .collect();
        group_items.push(json!({
            "name": group,
            "versions": gvs,
            "preferredVersion": gvs[0],
        }));
        let mut agg_versions = Vec::new();
        let mut versions = versions;
        for v in &names {
            let (legacy, agg) = versions.remove(v).expect("a listed version");
            let gv = format!("{group}/{v}");
            resource_lists.insert(gv.clone(), to_json(resource_list(&gv, legacy)));
            agg_versions.push(version_discovery(v, agg));
        }
        agg_items.push(group_discovery(group, agg_versions));
    }
    if !apiextensions_done {
        push_apiextensions(&mut group_items, &mut resource_lists, &mut agg_items);
    }

    let group_list = json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": group_items});
    let aggregated = to_json(APIGroupDiscoveryList::new(agg_items));
    let mut h = Sha256::new();
    h.update(group_list.to_string().as_bytes());
    for (k, v) in &resource_lists {
        h.update(k.as_bytes());
        h.update(v.to_string().as_bytes());
    }
    h.update(aggregated.to_string().as_bytes());
    let etag = hex(&h.finalize()[..16]);
    Documents {
        group_list,
        resource_lists,
        aggregated,
        etag,
    }
}

/// Lowercase hex of `b`.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::CrdView;

    fn established(v: Value) -> CrdView {
        let mut c = CrdView::from_value(&v).unwrap();
        c.status.accepted_names = c.spec.names.clone();
        c.status.conditions.push(crate::crd::Condition {
            type_: "Established".into(),
            status: "True".into(),
            ..Default::default()
        });
        c
    }

    fn crontab() -> CrdView {
        established(
            json!({"metadata": {"name": "crontabs.stable.example.com"}, "spec": {
            "group": "stable.example.com", "scope": "Namespaced",
            "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "listKind": "CronTabList",
                      "shortNames": ["ct"], "categories": ["all"]},
            "versions": [
                {"name": "v1beta1", "served": true, "storage": false},
                {"name": "v1", "served": true, "storage": true,
                 "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}}},
                {"name": "v2alpha1", "served": false, "storage": false}]}}),
        )
    }

    #[test]
    fn version_priority_matches_upstream_example() {
        let mut v = vec![
            "foo10",
            "v1",
            "v10",
            "v11alpha2",
            "v12alpha1",
            "v2",
            "v3beta1",
            "v10beta3",
            "v11beta2",
            "foo1",
        ];
        v.sort_by(|a, b| compare_versions(a, b));
        assert_eq!(
            v,
            vec![
                "v10",
                "v2",
                "v1",
                "v11beta2",
                "v10beta3",
                "v3beta1",
                "v12alpha1",
                "v11alpha2",
                "foo1",
                "foo10"
            ]
        );
    }

    #[test]
    fn storage_version_hash_is_upstreams() {
        // The value kube-apiserver serves for customresourcedefinitions (storage version
        // v1beta1), and what this crate publishes for it.
        assert_eq!(
            storage_version_hash(
                "apiextensions.k8s.io",
                "v1beta1",
                "CustomResourceDefinition"
            ),
            "jfWCUB31mvA="
        );
        let d = build(&[]);
        assert_eq!(
            d.resource_lists["apiextensions.k8s.io/v1"]["resources"][0]["storageVersionHash"],
            "jfWCUB31mvA="
        );
    }

    /// The position of group `name` in an `APIGroupList`'s `groups` or an aggregated list's
    /// `items` (the built-in groups before it vary as built-in types are added).
    fn at(list: &Value, name: &str) -> usize {
        list.as_array()
            .unwrap()
            .iter()
            .position(|g| g["name"] == name || g["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("{name} not in {list}"))
    }

    #[test]
    fn legacy_and_aggregated_agree() {
        let d = build(&[crontab()]);
        let groups = d.group_list["groups"].as_array().unwrap();
        let names: Vec<&str> = groups.iter().map(|g| g["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "events.k8s.io",
                "authentication.k8s.io",
                "authorization.k8s.io",
                "rbac.authorization.k8s.io",
                "apiextensions.k8s.io",
                "coordination.k8s.io",
                "stable.example.com"
            ]
        );
        let crontabs = &groups[at(&d.group_list["groups"], "stable.example.com")];
        assert_eq!(crontabs["preferredVersion"]["version"], "v1");
        assert_eq!(crontabs["versions"].as_array().unwrap().len(), 2);
        assert_eq!(
            crontabs["versions"][1]["groupVersion"],
            "stable.example.com/v1beta1"
        );

        let v1 = &d.resource_lists["stable.example.com/v1"];
        let res = v1["resources"].as_array().unwrap();
        assert_eq!(res.len(), 3);
        assert_eq!(res[0]["name"], "crontabs");
        assert_eq!(res[0]["singularName"], "crontab");
        assert_eq!(res[0]["namespaced"], true);
        assert_eq!(res[0]["shortNames"], json!(["ct"]));
        assert_eq!(res[0]["categories"], json!(["all"]));
        assert_eq!(res[0]["verbs"], json!(CR_VERBS));
        assert_eq!(
            res[0]["storageVersionHash"],
            storage_version_hash("stable.example.com", "v1", "CronTab")
        );
        assert_eq!(res[1]["name"], "crontabs/status");
        assert_eq!(res[2]["name"], "crontabs/scale");
        assert_eq!(res[2]["group"], "autoscaling");
        assert_eq!(res[2]["kind"], "Scale");
        // v1beta1 has no subresources; v2alpha1 is not served.
        assert_eq!(
            d.resource_lists["stable.example.com/v1beta1"]["resources"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
        assert!(!d.resource_lists.contains_key("stable.example.com/v2alpha1"));
        let crdl = &d.resource_lists["apiextensions.k8s.io/v1"]["resources"];
        assert_eq!(crdl[0]["shortNames"], json!(["crd", "crds"]));
        assert_eq!(crdl[1]["name"], "customresourcedefinitions/status");

        let items = d.aggregated["items"].as_array().unwrap();
        assert_eq!(d.aggregated["apiVersion"], "apidiscovery.k8s.io/v2");
        let av = &items[at(&d.aggregated["items"], "stable.example.com")]["versions"][0];
        assert_eq!(av["version"], "v1");
        assert_eq!(av["freshness"], "Current");
        let r = &av["resources"][0];
        assert_eq!(r["resource"], "crontabs");
        assert_eq!(r["scope"], "Namespaced");
        assert_eq!(r["singularResource"], "crontab");
        assert_eq!(r["shortNames"], json!(["ct"]));
        assert_eq!(r["categories"], json!(["all"]));
        assert_eq!(
            r["responseKind"],
            json!({"group": "stable.example.com", "version": "v1", "kind": "CronTab"})
        );
        assert_eq!(r["subresources"][1]["responseKind"]["kind"], "Scale");
    }

    #[test]
    fn terminating_crds_lose_create_and_update_verbs() {
        let mut c = crontab();
        c.status.conditions.push(crate::crd::Condition {
            type_: "Terminating".into(),
            status: "True".into(),
            ..Default::default()
        });
        let d = build(&[c]);
        let want = json!(["delete", "deletecollection", "get", "list", "watch"]);
        assert_eq!(
            d.resource_lists["stable.example.com/v1"]["resources"][0]["verbs"],
            want
        );
        assert_eq!(
            d.aggregated["items"][at(&d.aggregated["items"], "stable.example.com")]["versions"][0]
                ["resources"][0]["verbs"],
            want
        );
    }

    #[test]
    fn unestablished_crds_are_not_served_and_etag_changes() {
        let mut c = crontab();
        let with = build(std::slice::from_ref(&c));
        c.status.conditions.clear();
        let without = build(&[c]);
        assert_eq!(
            without.group_list["groups"].as_array().unwrap().len(),
            with.group_list["groups"].as_array().unwrap().len() - 1
        );
        assert!(!without.resource_lists.contains_key("stable.example.com/v1"));
        assert_ne!(with.etag, without.etag);
        assert_eq!(build(&[]).etag, without.etag);
    }

    #[test]
    fn builtin_groups_are_served_from_the_table() {
        let d = build(&[]);
        let groups = &d.group_list["groups"];
        assert_eq!(groups[0]["name"], "events.k8s.io");
        assert_eq!(
            groups[0]["preferredVersion"],
            json!({"groupVersion": "events.k8s.io/v1", "version": "v1"})
        );
        // kube-aggregator's priorities: events.k8s.io, authentication.k8s.io,
        // rbac.authorization.k8s.io, apiextensions.k8s.io, coordination.k8s.io.
        assert_eq!(groups[1]["name"], "authentication.k8s.io");
        assert!(at(groups, "rbac.authorization.k8s.io") < at(groups, "apiextensions.k8s.io"));
        let rbac = &d.resource_lists["rbac.authorization.k8s.io/v1"]["resources"];
        let names: Vec<(&str, bool)> = rbac
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["name"].as_str().unwrap(),
                    r["namespaced"].as_bool().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            names,
            [
                ("clusterrolebindings", false),
                ("clusterroles", false),
                ("rolebindings", true),
                ("roles", true)
            ]
        );
        assert_eq!(rbac[3]["storageVersionHash"], "7FuwZcIIItM=");
        assert_eq!(
            d.aggregated["items"][at(&d.aggregated["items"], "rbac.authorization.k8s.io")]["versions"]
                [0]["resources"][1],
            json!({"resource": "clusterroles",
                   "responseKind": {"group": "rbac.authorization.k8s.io", "version": "v1", "kind": "ClusterRole"},
                   "scope": "Cluster", "singularResource": "clusterrole",
                   "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]})
        );
        assert_eq!(
            d.resource_lists["authentication.k8s.io/v1"]["resources"],
            json!([{"name": "selfsubjectreviews", "singularName": "selfsubjectreview",
                    "namespaced": false, "kind": "SelfSubjectReview", "verbs": ["create"]}])
        );
        assert_eq!(
            groups[at(groups, "coordination.k8s.io")]["versions"],
            json!([{"groupVersion": "coordination.k8s.io/v1", "version": "v1"}])
        );
        let leases = &d.resource_lists["coordination.k8s.io/v1"];
        assert_eq!(leases["groupVersion"], "coordination.k8s.io/v1");
        assert_eq!(
            leases["resources"],
            json!([{"name": "leases", "singularName": "lease", "namespaced": true, "kind": "Lease",
                    "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
                    "storageVersionHash": "gqkMMb/YqFM="}])
        );
        let ev = &d.resource_lists["events.k8s.io/v1"]["resources"][0];
        assert_eq!(ev["shortNames"], json!(["ev"]));
        assert_eq!(ev["storageVersionHash"], "r2yiGXH7wu8=");
        let agg = &d.aggregated["items"];
        assert_eq!(agg[0]["metadata"]["name"], "events.k8s.io");
        assert_eq!(
            agg[1]["versions"][0]["resources"][0],
            json!({"resource": "selfsubjectreviews",
                   "responseKind": {"group": "authentication.k8s.io", "version": "v1", "kind": "SelfSubjectReview"},
                   "scope": "Cluster", "singularResource": "selfsubjectreview", "verbs": ["create"]})
        );
        assert_eq!(
            agg[at(agg, "coordination.k8s.io")]["versions"][0]["resources"][0],
            json!({"resource": "leases",
                   "responseKind": {"group": "coordination.k8s.io", "version": "v1", "kind": "Lease"},
                   "scope": "Namespaced", "singularResource": "lease",
                   "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]})
        );
    }

    #[test]
    fn a_crd_in_a_builtin_group_joins_it_without_replacing_builtins() {
        let mine = established(
            json!({"metadata": {"name": "leasecandidates.coordination.k8s.io",
            "annotations": {"api-approved.kubernetes.io": "unapproved"}}, "spec": {
            "group": "coordination.k8s.io", "scope": "Namespaced",
            "names": {"plural": "leasecandidates", "singular": "leasecandidate", "kind": "LeaseCandidate"},
            "versions": [{"name": "v1", "served": true, "storage": true},
                         {"name": "v1alpha9", "served": true, "storage": false}]}}),
        );
        let clash = established(
            json!({"metadata": {"name": "leases.coordination.k8s.io"}, "spec": {
            "group": "coordination.k8s.io", "scope": "Cluster",
            "names": {"plural": "leases", "singular": "lease", "kind": "MyLease"},
            "versions": [{"name": "v1", "served": true, "storage": true}]}}),
        );
        let d = build(&[mine, clash]);
        let names: Vec<&str> = d.group_list["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "events.k8s.io",
                "authentication.k8s.io",
                "authorization.k8s.io",
                "rbac.authorization.k8s.io",
                "apiextensions.k8s.io",
                "coordination.k8s.io"
            ]
        );
        let coordination = at(&d.group_list["groups"], "coordination.k8s.io");
        assert_eq!(
            d.group_list["groups"][coordination]["versions"],
            json!([{"groupVersion": "coordination.k8s.io/v1", "version": "v1"},
                   {"groupVersion": "coordination.k8s.io/v1alpha9", "version": "v1alpha9"}])
        );
        let res = d.resource_lists["coordination.k8s.io/v1"]["resources"]
            .as_array()
            .unwrap();
        let kinds: Vec<&str> = res.iter().map(|r| r["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["Lease", "LeaseCandidate"]);
        let agg = &d.aggregated["items"][coordination]["versions"][0]["resources"];
        assert_eq!(agg.as_array().unwrap().len(), 2);
        assert_eq!(agg[0]["responseKind"]["kind"], "Lease");
    }
}
