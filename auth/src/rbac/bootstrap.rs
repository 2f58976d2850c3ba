//! The default roles and bindings every tenant starts with, as upstream's bootstrap policy
//! creates them in a new cluster (`plugin/pkg/auth/authorizer/rbac/bootstrappolicy/
//! policy.go`, `ClusterRoles()` and `ClusterRoleBindings()`): `cluster-admin` for
//! `system:masters`; discovery, the public info paths and the self reviews for every
//! authenticated user; the public info paths also for anonymous ones; and the user-facing
//! `admin`, `edit` and `view` roles, aggregated from the `system:aggregate-to-*` roles and
//! from any ClusterRole a CRD's operator labels `rbac.authorization.k8s.io/aggregate-to-*`.
//!
//! Where it sits: the gateway creates these objects (if absent) when it first meets a
//! tenant; from then on they are ordinary objects a tenant admin may change.
//!
//! The rules are upstream's for the resources crdplane serves; rules of API groups it does
//! not serve (apps, batch, networking, …) are left out.

use serde_json::{Value, json};

const READ: [&str; 3] = ["get", "list", "watch"];
const WRITE: [&str; 5] = ["create", "delete", "deletecollection", "patch", "update"];
const READ_WRITE: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": groups, "resources": resources, "verbs": verbs})
}

fn urls(paths: &[&str], verbs: &[&str]) -> Value {
    json!({"nonResourceURLs": paths, "verbs": verbs})
}

fn meta(name: &str, labels: &[(&str, &str)]) -> Value {
    let mut l = serde_json::Map::new();
    l.insert("kubernetes.io/bootstrapping".into(), "rbac-defaults".into());
    for (k, v) in labels {
        l.insert((*k).into(), (*v).into());
    }
    json!({
        "name": name,
        "labels": l,
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
    })
}

fn cluster_role(name: &str, labels: &[(&str, &str)], rules: Vec<Value>) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": meta(name, labels),
        "rules": rules,
    })
}

fn aggregated(name: &str, labels: &[(&str, &str)], select: &str) -> Value {
    let mut v = cluster_role(name, labels, vec![]);
    v["aggregationRule"] = json!({"clusterRoleSelectors": [{"matchLabels": {select: "true"}}]});
    v
}

const TO_ADMIN: &str = "rbac.authorization.k8s.io/aggregate-to-admin";
const TO_EDIT: &str = "rbac.authorization.k8s.io/aggregate-to-edit";
const TO_VIEW: &str = "rbac.authorization.k8s.io/aggregate-to-view";

/// The bootstrap ClusterRoles.
pub fn cluster_roles() -> Vec<Value> {
    vec![
        cluster_role(
            "cluster-admin",
            &[],
            vec![rule(&["*"], &["*"], &["*"]), urls(&["*"], &["*"])],
        ),
        aggregated("admin", &[], TO_ADMIN),
        aggregated("edit", &[(TO_ADMIN, "true")], TO_EDIT),
        aggregated("view", &[(TO_EDIT, "true")], TO_VIEW),
        cluster_role(
            "system:aggregate-to-admin",
            &[(TO_ADMIN, "true")],
            vec![
                rule(
                    &["authorization.k8s.io"],
                    &["localsubjectaccessreviews"],
                    &["create"],
                ),
                rule(
                    &["rbac.authorization.k8s.io"],
                    &["rolebindings", "roles"],
                    &READ_WRITE,
                ),
            ],
        ),
        cluster_role(
            "system:aggregate-to-edit",
            &[(TO_EDIT, "true")],
            vec![
                rule(
                    &[""],
                    &[
                        "pods/attach",
                        "pods/exec",
                        "pods/portforward",
                        "pods/proxy",
                        "secrets",
                        "services/proxy",
                    ],
                    &READ,
                ),
                rule(&[""], &["serviceaccounts"], &["impersonate"]),
                rule(
                    &[""],
                    &[
                        "pods",
                        "pods/attach",
                        "pods/exec",
                        "pods/portforward",
                        "pods/proxy",
                    ],
                    &WRITE,
                ),
                rule(&[""], &["pods/eviction"], &["create"]),
                rule(
                    &[""],
                    &[
                        "configmaps",
                        "persistentvolumeclaims",
                        "replicationcontrollers",
                        "replicationcontrollers/scale",
                        "secrets",
                        "serviceaccounts",
                        "services",
                        "services/proxy",
                    ],
                    &WRITE,
                ),
                rule(&[""], &["serviceaccounts/token"], &["create"]),
            ],
        ),
        cluster_role(
            "system:aggregate-to-view",
            &[(TO_VIEW, "true")],
            vec![
                rule(
                    &[""],
                    &[
                        "configmaps",
                        "endpoints",
                        "persistentvolumeclaims",
                        "persistentvolumeclaims/status",
                        "pods",
                        "replicationcontrollers",
                        "replicationcontrollers/scale",
                        "serviceaccounts",
                        "services",
                        "services/status",
                    ],
                    &READ,
                ),
                rule(
                    &[""],
                    &[
                        "bindings",
                        "events",
                        "limitranges",
                        "namespaces/status",
                        "pods/log",
                        "pods/status",
                        "replicationcontrollers/status",
                        "resourcequotas",
                        "resourcequotas/status",
                    ],
                    &READ,
                ),
                rule(&[""], &["namespaces"], &READ),
            ],
        ),
        cluster_role(
            "system:discovery",
            &[],
            vec![urls(
                &[
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                    "/healthz",
                    "/livez",
                    "/openapi",
                    "/openapi/*",
                    "/readyz",
                    "/version",
                    "/version/",
                ],
                &["get"],
            )],
        ),
        cluster_role(
            "system:basic-user",
            &[],
            vec![
                rule(
                    &["authorization.k8s.io"],
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                    &["create"],
                ),
                rule(
                    &["authentication.k8s.io"],
                    &["selfsubjectreviews"],
                    &["create"],
                ),
            ],
        ),
        cluster_role(
            "system:public-info-viewer",
            &[],
            vec![urls(
                &["/healthz", "/livez", "/readyz", "/version", "/version/"],
                &["get"],
            )],
        ),
    ]
}

fn cluster_binding(role: &str, groups: &[&str]) -> Value {
    let subjects: Vec<Value> = groups
        .iter()
        .map(|g| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g}))
        .collect();
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": meta(role, &[]),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": subjects,
    })
}

/// The bootstrap ClusterRoleBindings (each named as its role, as upstream's).
pub fn cluster_role_bindings() -> Vec<Value> {
    vec![
        cluster_binding("cluster-admin", &["system:masters"]),
        cluster_binding("system:discovery", &["system:authenticated"]),
        cluster_binding("system:basic-user", &["system:authenticated"]),
        cluster_binding(
            "system:public-info-viewer",
            &["system:authenticated", "system:unauthenticated"],
        ),
    ]
}
