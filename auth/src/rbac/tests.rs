//! Table tests of the RBAC decisions (cases follow upstream's rbac_test.go,
//! policy_comparator_test.go and rule_test.go where they apply).

use super::covers::{compact_string, confirm_no_escalation, covers};
use super::*;
use serde_json::json;

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn user(name: &str, groups: &[&str]) -> UserInfo {
    UserInfo {
        name: name.into(),
        groups: s(groups),
        ..Default::default()
    }
}

fn res<'a>(verb: &'a str, ns: &'a str, group: &'a str, resource: &'a str) -> Attributes<'a> {
    Attributes {
        verb,
        resource_request: true,
        namespace: ns,
        api_group: group,
        resource,
        ..Default::default()
    }
}

fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Rule {
    Rule {
        verbs: s(verbs),
        api_groups: s(groups),
        resources: s(resources),
        ..Default::default()
    }
}

#[test]
fn rule_allows_table() {
    let sub = |verb, r, sub, name| Attributes {
        verb,
        resource_request: true,
        api_group: "stable.example.com",
        resource: r,
        subresource: sub,
        name,
        ..Default::default()
    };
    let g = &["stable.example.com"];
    let named = Rule {
        resource_names: s(&["a"]),
        ..rule(&["get"], g, &["crontabs"])
    };
    let cases: Vec<(Rule, Attributes, bool)> = vec![
        (
            rule(&["get"], g, &["crontabs"]),
            sub("get", "crontabs", "", "x"),
            true,
        ),
        (
            rule(&["*"], &["*"], &["*"]),
            sub("delete", "crontabs", "status", ""),
            true,
        ),
        (
            rule(&["get"], g, &["crontabs"]),
            sub("list", "crontabs", "", ""),
            false,
        ),
        (
            rule(&["get"], &[""], &["crontabs"]),
            sub("get", "crontabs", "", ""),
            false,
        ),
        // A subresource needs its own grant ...
        (
            rule(&["update"], g, &["crontabs"]),
            sub("update", "crontabs", "status", ""),
            false,
        ),
        (
            rule(&["update"], g, &["crontabs/status"]),
            sub("update", "crontabs", "status", ""),
            true,
        ),
        // ... or `*/status`; `*/status` grants no main resource.
        (
            rule(&["update"], g, &["*/status"]),
            sub("update", "crontabs", "status", ""),
            true,
        ),
        (
            rule(&["update"], g, &["*/status"]),
            sub("update", "crontabs", "", ""),
            false,
        ),
        (
            rule(&["update"], g, &["*/scale"]),
            sub("update", "crontabs", "status", ""),
            false,
        ),
        (named.clone(), sub("get", "crontabs", "", "a"), true),
        (named.clone(), sub("get", "crontabs", "", "b"), false),
        // resourceNames never match a collection (list has no name).
        (named, sub("get", "crontabs", "", ""), false),
    ];
    for (i, (r, a, want)) in cases.iter().enumerate() {
        assert_eq!(r.allows(a), *want, "case {i}: {r:?} {a:?}");
    }
}

#[test]
fn non_resource_urls() {
    let r = Rule {
        verbs: s(&["get"]),
        non_resource_urls: s(&["/apis/*", "/version"]),
        ..Default::default()
    };
    let at = |verb, path| Attributes {
        verb,
        path,
        ..Default::default()
    };
    assert!(r.allows(&at("get", "/apis/stable.example.com/v1")));
    assert!(r.allows(&at("get", "/apis/")));
    assert!(!r.allows(&at("get", "/apis")));
    assert!(r.allows(&at("get", "/version")));
    assert!(!r.allows(&at("get", "/version/")));
    assert!(!r.allows(&at("post", "/version")));
    // A resource rule never grants a path.
    assert!(!rule(&["*"], &["*"], &["*"]).allows(&at("get", "/version")));
}

#[test]
fn subjects_apply() {
    let sa = |name: &str, ns: &str| Subject {
        kind: "ServiceAccount".into(),
        name: name.into(),
        namespace: ns.into(),
    };
    let u = user(
        "system:serviceaccount:ns1:builder",
        &["system:serviceaccounts"],
    );
    assert!(applies_to(&u, &sa("builder", "ns1"), ""));
    assert!(applies_to(&u, &sa("builder", ""), "ns1"));
    assert!(!applies_to(&u, &sa("builder", ""), ""));
    assert!(!applies_to(&u, &sa("builder", "ns2"), "ns1"));
    assert!(!applies_to(&u, &sa("build", "ns1"), ""));
    assert!(!applies_to(
        &user("system:serviceaccount:ns10:builder", &[]),
        &sa("builder", "ns1"),
        ""
    ));
    let g = Subject {
        kind: "Group".into(),
        name: "dev".into(),
        namespace: String::new(),
    };
    assert!(applies_to(&user("x", &["dev"]), &g, ""));
    assert!(!applies_to(&user("dev", &[]), &g, ""));
    let bogus = Subject {
        kind: "user".into(),
        name: "x".into(),
        namespace: String::new(),
    };
    assert!(!applies_to(&user("x", &[]), &bogus, ""));
}

fn crd_policy() -> Policy {
    let mut objs = Objects {
        cluster_roles: bootstrap::cluster_roles(),
        cluster_role_bindings: bootstrap::cluster_role_bindings(),
        ..Default::default()
    };
    objs.cluster_roles.push(json!({
        "metadata": {"name": "crontab-edit", "labels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}},
        "rules": [{"apiGroups": ["stable.example.com"], "resources": ["crontabs"], "verbs": ["*"]}]
    }));
    objs.roles.push(json!({
        "metadata": {"name": "reader", "namespace": "team-a"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]
    }));
    objs.role_bindings.push(json!({
        "metadata": {"name": "jane-edit", "namespace": "team-a"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "jane"}]
    }));
    objs.role_bindings.push(json!({
        "metadata": {"name": "bob-reader", "namespace": "team-a"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
        "subjects": [{"kind": "User", "name": "bob"}, {"kind": "ServiceAccount", "name": "ci"}]
    }));
    objs.role_bindings.push(json!({
        "metadata": {"name": "dangling", "namespace": "team-b"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "gone"},
        "subjects": [{"kind": "User", "name": "bob"}]
    }));
    Policy::from_objects(&objs)
}

#[test]
fn aggregation_is_transitive_and_picks_up_crd_roles() {
    let p = crd_policy();
    let has = |role: &str, group: &str, res: &str, verb: &str| {
        p.cluster_role(role)
            .unwrap()
            .iter()
            .any(|r| r.allows(&res_attrs(verb, group, res)))
    };
    fn res_attrs<'a>(verb: &'a str, group: &'a str, r: &'a str) -> Attributes<'a> {
        res(verb, "ns", group, r)
    }
    // The CRD's role reaches edit and, through edit's label, admin; not view.
    assert!(has("edit", "stable.example.com", "crontabs", "create"));
    assert!(has("admin", "stable.example.com", "crontabs", "create"));
    assert!(!has("view", "stable.example.com", "crontabs", "get"));
    // view's rules reach edit and admin; admin's own extras only admin.
    assert!(has("edit", "", "configmaps", "get"));
    assert!(has("admin", "", "configmaps", "get"));
    assert!(has(
        "admin",
        "rbac.authorization.k8s.io",
        "rolebindings",
        "create"
    ));
    assert!(!has(
        "edit",
        "rbac.authorization.k8s.io",
        "rolebindings",
        "create"
    ));
    assert!(has("view", "", "namespaces", "list"));
    assert!(!has("view", "", "secrets", "get"));
}

#[test]
fn decisions_follow_bindings() {
    let p = crd_policy();
    let jane = user("jane", &["system:authenticated"]);
    let bob = user("bob", &["system:authenticated"]);
    assert!(
        p.authorize(
            &jane,
            &res("create", "team-a", "stable.example.com", "crontabs")
        )
        .allowed()
    );
    // A RoleBinding grants nothing in other namespaces or at cluster scope.
    assert_eq!(
        p.authorize(
            &jane,
            &res("create", "team-b", "stable.example.com", "crontabs")
        ),
        Decision::Deny(String::new())
    );
    assert!(
        !p.authorize(&jane, &res("list", "", "stable.example.com", "crontabs"))
            .allowed()
    );
    assert!(
        p.authorize(&bob, &res("get", "team-a", "", "configmaps"))
            .allowed()
    );
    assert!(
        !p.authorize(&bob, &res("list", "team-a", "", "configmaps"))
            .allowed()
    );
    // A binding to a missing role: the lister's NotFound in the reason.
    assert_eq!(
        p.authorize(&bob, &res("get", "team-b", "", "configmaps")),
        Decision::Deny("RBAC: role.rbac.authorization.k8s.io \"gone\" not found".into())
    );
    // The SA subject without a namespace is the binding's namespace.
    let ci = user(
        "system:serviceaccount:team-a:ci",
        &["system:serviceaccounts"],
    );
    assert!(
        p.authorize(&ci, &res("get", "team-a", "", "configmaps"))
            .allowed()
    );
    // Bootstrap: discovery for authenticated users, health for anyone, cluster-admin for
    // system:masters, self reviews for authenticated users.
    let path = |p| Attributes {
        verb: "get",
        path: p,
        ..Default::default()
    };
    assert!(
        p.authorize(&jane, &path("/apis/stable.example.com/v1"))
            .allowed()
    );
    let anon = UserInfo::anonymous();
    assert!(!p.authorize(&anon, &path("/apis")).allowed());
    assert!(p.authorize(&anon, &path("/healthz")).allowed());
    assert!(p.authorize(&anon, &path("/version")).allowed());
    let admin = user("admin", &["system:masters", "system:authenticated"]);
    assert!(
        p.authorize(&admin, &res("deletecollection", "", "", "namespaces"))
            .allowed()
    );
    assert!(
        p.authorize(
            &jane,
            &res(
                "create",
                "",
                "authorization.k8s.io",
                "selfsubjectaccessreviews"
            )
        )
        .allowed()
    );
    assert!(
        !p.authorize(
            &anon,
            &res(
                "create",
                "",
                "authorization.k8s.io",
                "selfsubjectaccessreviews"
            )
        )
        .allowed()
    );
}

#[test]
fn aggregate_error_texts() {
    assert_eq!(aggregate_errors(&s(&["a"])), "a");
    assert_eq!(aggregate_errors(&s(&["a", "b", "a"])), "[a, b]");
}

#[test]
fn covers_table() {
    let owner = vec![
        rule(&["get", "list"], &[""], &["configmaps"]),
        rule(&["*"], &["stable.example.com"], &["*/status"]),
        Rule {
            resource_names: s(&["one"]),
            ..rule(&["delete"], &[""], &["secrets"])
        },
        Rule {
            verbs: s(&["get"]),
            non_resource_urls: s(&["/apis/*"]),
            ..Default::default()
        },
    ];
    let ok = |servant: Rule| covers(&owner, &[servant]).0;
    assert!(ok(rule(&["get"], &[""], &["configmaps"])));
    assert!(!ok(rule(&["get", "watch"], &[""], &["configmaps"])));
    assert!(ok(rule(
        &["update"],
        &["stable.example.com"],
        &["crontabs/status"]
    )));
    assert!(!ok(rule(
        &["update"],
        &["stable.example.com"],
        &["crontabs"]
    )));
    assert!(ok(Rule {
        resource_names: s(&["one"]),
        ..rule(&["delete"], &[""], &["secrets"])
    }));
    assert!(!ok(rule(&["delete"], &[""], &["secrets"])));
    assert!(ok(Rule {
        verbs: s(&["get"]),
        non_resource_urls: s(&["/apis/x"]),
        ..Default::default()
    }));
    assert!(!ok(Rule {
        verbs: s(&["get"]),
        non_resource_urls: s(&["/api"]),
        ..Default::default()
    }));
}

#[test]
fn escalation_message_is_upstreams() {
    let jane = user("jane", &["dev", "system:authenticated"]);
    let owner = vec![rule(&["get"], &[""], &["pods"])];
    let granted = vec![
        rule(&["get", "delete"], &[""], &["pods"]),
        rule(
            &["list"],
            &["stable.example.com"],
            &["crontabs", "crontabs/status"],
        ),
    ];
    let err = confirm_no_escalation(&jane, &owner, &[], &granted).unwrap_err();
    assert_eq!(
        err,
        "user \"jane\" (groups=[\"dev\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n\
         {APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\"]}\n\
         {APIGroups:[\"stable.example.com\"], Resources:[\"crontabs\"], Verbs:[\"list\"]}\n\
         {APIGroups:[\"stable.example.com\"], Resources:[\"crontabs/status\"], Verbs:[\"list\"]}"
    );
    let err = confirm_no_escalation(
        &jane,
        &owner,
        &s(&["role.rbac.authorization.k8s.io \"x\" not found"]),
        &granted[..1],
    )
    .unwrap_err();
    assert!(
        err.ends_with("; resolution errors: [role.rbac.authorization.k8s.io \"x\" not found]"),
        "{err}"
    );
    assert!(confirm_no_escalation(&jane, &owner, &[], &[rule(&["get"], &[""], &["pods"])]).is_ok());
    assert_eq!(
        compact_string(&Rule {
            verbs: s(&["get"]),
            non_resource_urls: s(&["/x"]),
            ..Default::default()
        }),
        "{NonResourceURLs:[\"/x\"], Verbs:[\"get\"]}"
    );
}

#[test]
fn label_selectors() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
    let labels: BTreeMap<String, String> = [("a".to_string(), "1".to_string())].into();
    let sel = |ml: Option<(&str, &str)>, ex: Vec<(&str, &str, &[&str])>| LabelSelector {
        match_labels: ml.map(|(k, v)| [(k.to_string(), v.to_string())].into()),
        match_expressions: Some(
            ex.into_iter()
                .map(|(k, op, vals)| LabelSelectorRequirement {
                    key: k.into(),
                    operator: op.into(),
                    values: Some(s(vals)),
                })
                .collect(),
        ),
    };
    assert!(selector_matches(&sel(None, vec![]), &labels));
    assert!(selector_matches(&sel(Some(("a", "1")), vec![]), &labels));
    assert!(!selector_matches(&sel(Some(("a", "2")), vec![]), &labels));
    assert!(selector_matches(
        &sel(None, vec![("a", "In", &["1", "2"])]),
        &labels
    ));
    assert!(!selector_matches(
        &sel(None, vec![("a", "NotIn", &["1"])]),
        &labels
    ));
    assert!(selector_matches(
        &sel(None, vec![("b", "NotIn", &["1"])]),
        &labels
    ));
    assert!(selector_matches(
        &sel(None, vec![("a", "Exists", &[])]),
        &labels
    ));
    assert!(!selector_matches(
        &sel(None, vec![("a", "DoesNotExist", &[])]),
        &labels
    ));
    assert!(!selector_matches(
        &sel(None, vec![("a", "Bogus", &[])]),
        &labels
    ));
}

#[test]
fn allow_reasons_name_the_binding() {
    let p = crd_policy();
    let jane = user("jane", &["system:authenticated"]);
    assert_eq!(
        p.authorize_explained(&jane, &res("create", "team-a", "stable.example.com", "crontabs")),
        (true, "RBAC: allowed by RoleBinding \"jane-edit/team-a\" of ClusterRole \"edit\" to User \"jane\"".to_string())
    );
    let ci = user("system:serviceaccount:team-a:ci", &[]);
    assert_eq!(
        p.authorize_explained(&ci, &res("get", "team-a", "", "configmaps"))
            .1,
        "RBAC: allowed by RoleBinding \"bob-reader/team-a\" of Role \"reader\" to ServiceAccount \"ci/team-a\""
    );
    let path = Attributes {
        verb: "get",
        path: "/version",
        ..Default::default()
    };
    assert_eq!(
        p.authorize_explained(&jane, &path).1,
        "RBAC: allowed by ClusterRoleBinding \"system:discovery\" of ClusterRole \"system:discovery\" to Group \"system:authenticated\""
    );
    assert_eq!(
        p.authorize_explained(&jane, &res("list", "", "", "secrets")),
        (false, String::new())
    );
}

#[test]
fn membership_needs_a_binding_that_names_you() {
    let p = crd_policy();
    assert!(p.is_member(&user("jane", &["system:authenticated"])));
    assert!(p.is_member(&user("bob", &["system:authenticated"])));
    // The RoleBinding's SA subject without a namespace is the binding's namespace.
    assert!(p.is_member(&user("system:serviceaccount:team-a:ci", &[])));
    assert!(!p.is_member(&user("system:serviceaccount:team-b:ci", &[])));
    // Bootstrap bindings to all users do not make anyone a member; system:masters is named.
    assert!(!p.is_member(&user("eve", &["system:authenticated"])));
    assert!(!p.is_member(&UserInfo::anonymous()));
    assert!(p.is_member(&user("root", &["system:masters"])));
}
