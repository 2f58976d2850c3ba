//! Discovery and OpenAPI of the built-in types (ConfigMap, Secret, ServiceAccount, core and
//! `events.k8s.io` Events, Lease, the RBAC types) through real clients: `kubectl api-resources` and
//! `kubectl explain` on every kubectl here (1.20 reads legacy discovery and the OpenAPI v2
//! protobuf, 1.33 aggregated discovery and OpenAPI v3), kube-rs' `Discovery`, and the Python
//! client's `get_api_resources()`. CRD entries stay listed beside them.

use crdplane_tests::{Stack, http_request, kubeconfig_yaml};

const CRD: &str = r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"crontabs.stable.example.com"},
 "spec":{"group":"stable.example.com","scope":"Namespaced",
  "names":{"plural":"crontabs","singular":"crontab","kind":"CronTab","shortNames":["ct"]},
  "versions":[{"name":"v1","served":true,"storage":true,
   "schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object",
     "properties":{"cronSpec":{"type":"string"}}}}}}}]}}"#;

fn stack_with_crd() -> Stack {
    let stack = Stack::start_with_redis().expect("stack");
    let (code, body) = http_request(
        "POST",
        &format!(
            "{}/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            stack.gateway
        ),
        Some("application/json"),
        Some(CRD),
    )
    .unwrap();
    assert_eq!(code, 201, "{body}");
    // Wait until the CRD is Established and its group-version discoverable.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (code, _) =
            crdplane_tests::http_get(&format!("{}/apis/stable.example.com/v1", stack.gateway))
                .unwrap();
        if code == 200 {
            return stack;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "crontabs never became discoverable"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `s` with every run of whitespace made one space (kubectl explain wraps descriptions).
fn flat(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The `kubectl api-resources` row of `name`, split into columns.
fn row<'a>(out: &'a str, name: &str) -> Option<Vec<&'a str>> {
    out.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|cols| cols.first() == Some(&name))
}

#[test]
fn kubectl_lists_and_explains_the_builtin_types() {
    let kubectls = crdplane_tests::kubectls();
    assert!(!kubectls.is_empty(), "no kubectl found");
    let stack = stack_with_crd();
    for kubectl in &kubectls {
        let version = kubectl.display().to_string();
        let ok = |args: &[&str]| {
            let o = stack.kubectl(kubectl, args);
            assert!(o.ok, "kubectl {version} {args:?}: {}{}", o.stdout, o.stderr);
            o.stdout
        };
        let out = ok(&["api-resources"]);
        let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
        assert_eq!(
            header,
            ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"],
            "kubectl {version}"
        );
        for want in [
            vec!["configmaps", "cm", "v1", "true", "ConfigMap"],
            vec!["events", "ev", "v1", "true", "Event"],
            vec!["secrets", "v1", "true", "Secret"],
            vec!["serviceaccounts", "sa", "v1", "true", "ServiceAccount"],
            vec!["leases", "coordination.k8s.io/v1", "true", "Lease"],
            vec!["roles", "rbac.authorization.k8s.io/v1", "true", "Role"],
            vec![
                "rolebindings",
                "rbac.authorization.k8s.io/v1",
                "true",
                "RoleBinding",
            ],
            vec![
                "clusterroles",
                "rbac.authorization.k8s.io/v1",
                "false",
                "ClusterRole",
            ],
            vec![
                "clusterrolebindings",
                "rbac.authorization.k8s.io/v1",
                "false",
                "ClusterRoleBinding",
            ],
            vec!["crontabs", "ct", "stable.example.com/v1", "true", "CronTab"],
            vec![
                "customresourcedefinitions",
                "crd,crds",
                "apiextensions.k8s.io/v1",
                "false",
                "CustomResourceDefinition",
            ],
        ] {
            assert_eq!(
                row(&out, want[0]).as_deref(),
                Some(&want[..]),
                "kubectl {version} api-resources:\n{out}"
            );
        }
        let ev_rows: Vec<&str> = out.lines().filter(|l| l.starts_with("events ")).collect();
        assert!(
            ev_rows
                .iter()
                .any(|l| l.split_whitespace().collect::<Vec<_>>()
                    == ["events", "ev", "events.k8s.io/v1", "true", "Event"]),
            "kubectl {version} api-resources:\n{out}"
        );

        let cm = flat(&ok(&["explain", "configmap.data"]));
        for needle in [
            "KIND:",
            "ConfigMap",
            "data",
            "Data contains the configuration data.",
        ] {
            assert!(
                cm.contains(needle),
                "kubectl {version} explain configmap.data: {needle:?} missing from\n{cm}"
            );
        }
        let lease = flat(&ok(&["explain", "lease.spec.holderIdentity"]));
        assert!(
            lease.contains("holderIdentity contains the identity of the holder of a current lease"),
            "kubectl {version} explain lease.spec.holderIdentity:\n{lease}"
        );
        let ev = flat(&ok(&[
            "explain",
            "events",
            "--api-version=events.k8s.io/v1",
        ]));
        for needle in [
            "events.k8s.io",
            "Event is a report of an event somewhere in the cluster. It generally denotes some state change in the system.",
            "regarding",
            "reportingController",
        ] {
            assert!(
                ev.contains(needle),
                "kubectl {version} explain events --api-version=events.k8s.io/v1: {needle:?} missing from\n{ev}"
            );
        }
        let core_ev = flat(&ok(&["explain", "events.involvedObject"]));
        assert!(
            core_ev.contains("The object that this event is about."),
            "kubectl {version} explain events.involvedObject:\n{core_ev}"
        );
        let rules = flat(&ok(&["explain", "clusterrole.aggregationRule"]));
        assert!(
            rules.contains("AggregationRule is an optional field that describes how to build the Rules for this ClusterRole."),
            "kubectl {version} explain clusterrole.aggregationRule:\n{rules}"
        );
        let sa = flat(&ok(&["explain", "serviceaccount.secrets"]));
        assert!(
            sa.contains("Secrets is a list of the secrets in the same namespace"),
            "kubectl {version} explain serviceaccount.secrets:\n{sa}"
        );
        // The review types (create only): `kubectl explain` finds them too.
        let ssar = flat(&ok(&[
            "explain",
            "selfsubjectaccessreview.spec.resourceAttributes",
        ]));
        assert!(
            ssar.contains("ResourceAuthorizationAttributes describes information for a resource access request"),
            "kubectl {version} explain selfsubjectaccessreview.spec.resourceAttributes:\n{ssar}"
        );
        let sar = flat(&ok(&["explain", "subjectaccessreview.status.allowed"]));
        assert!(
            sar.contains(
                "Allowed is required. True if the action would be allowed, false otherwise."
            ),
            "kubectl {version} explain subjectaccessreview.status.allowed:\n{sar}"
        );
        let ssr = flat(&ok(&["explain", "selfsubjectreview.status.userInfo"]));
        assert!(
            ssr.contains("User attributes of the user making this request."),
            "kubectl {version} explain selfsubjectreview.status.userInfo:\n{ssr}"
        );
        // The CRD is still explained from the same documents.
        let ct = ok(&["explain", "crontab.spec"]);
        assert!(ct.contains("cronSpec"), "kubectl {version}:\n{ct}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn kube_rs_discovery_finds_lease_and_configmap() {
    let stack = stack_with_crd();
    let kc = kube::config::Kubeconfig::from_yaml(&kubeconfig_yaml(&stack.gateway, "crdplane"))
        .expect("kubeconfig");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("config");
    let client = kube::Client::try_from(cfg).expect("client");
    let discovery = kube::discovery::Discovery::new(client)
        .run()
        .await
        .expect("discovery");
    let find = |group: &str, kind: &str| {
        discovery
            .groups()
            .filter(|g| g.name() == group)
            .flat_map(|g| g.recommended_resources())
            .find(|(ar, _)| ar.kind == kind)
    };
    let (lease, caps) = find("coordination.k8s.io", "Lease").expect("Lease discovered");
    assert_eq!(lease.plural, "leases");
    assert_eq!(lease.api_version, "coordination.k8s.io/v1");
    assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
    let (cm, caps) = find("", "ConfigMap").expect("ConfigMap discovered");
    assert_eq!(cm.plural, "configmaps");
    assert_eq!(cm.api_version, "v1");
    assert!(caps.supports_operation(kube::discovery::verbs::WATCH));
    let (ev, _) = find("events.k8s.io", "Event").expect("events.k8s.io Event discovered");
    assert_eq!(ev.plural, "events");
    assert!(find("stable.example.com", "CronTab").is_some());
    let (crb, caps) = find("rbac.authorization.k8s.io", "ClusterRoleBinding")
        .expect("ClusterRoleBinding discovered");
    assert_eq!(crb.plural, "clusterrolebindings");
    assert_eq!(caps.scope, kube::discovery::Scope::Cluster);
    let (_, caps) = find("rbac.authorization.k8s.io", "Role").expect("Role discovered");
    assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
}

#[test]
fn python_client_lists_the_builtin_resources() {
    let pys = crdplane_tests::python_interpreters();
    if pys.is_empty() {
        eprintln!("skipping: the Python kubernetes client is missing (scripts/deps.sh --test)");
        return;
    }
    let stack = Stack::start_with_redis().unwrap();
    for (i, (py, ver)) in pys.iter().enumerate() {
        crdplane_tests::run_python_checks(
            py,
            ver,
            "builtin_discovery.py",
            &format!("{}/clusters/python{i}", stack.gateway),
        );
    }
}

#[test]
fn builtin_group_documents_over_http() {
    let stack = stack_with_crd();
    let get = |path: &str| {
        let (code, body) = crdplane_tests::http_get(&format!("{}{path}", stack.gateway)).unwrap();
        assert_eq!(code, 200, "{path}: {body}");
        serde_json::from_str::<serde_json::Value>(&body).unwrap()
    };
    for g in [
        "coordination.k8s.io",
        "events.k8s.io",
        "rbac.authorization.k8s.io",
    ] {
        assert_eq!(
            get(&format!("/apis/{g}")),
            serde_json::json!({"kind": "APIGroup", "apiVersion": "v1", "name": g,
                "versions": [{"groupVersion": format!("{g}/v1"), "version": "v1"}],
                "preferredVersion": {"groupVersion": format!("{g}/v1"), "version": "v1"}})
        );
    }
    // The review API of `kubectl auth whoami`: v1 preferred, v1beta1 for kubectl 1.27.
    assert_eq!(
        get("/apis/authentication.k8s.io")["versions"],
        serde_json::json!([
            {"groupVersion": "authentication.k8s.io/v1", "version": "v1"},
            {"groupVersion": "authentication.k8s.io/v1beta1", "version": "v1beta1"}
        ])
    );
    assert_eq!(
        get("/apis/authentication.k8s.io/v1")["resources"],
        serde_json::json!([{"name": "selfsubjectreviews", "singularName": "selfsubjectreview",
            "namespaced": false, "kind": "SelfSubjectReview", "verbs": ["create"]}])
    );
    let leases = get("/apis/coordination.k8s.io/v1");
    assert_eq!(leases["resources"][0]["name"], "leases");
    assert_eq!(leases["resources"][0]["storageVersionHash"], "gqkMMb/YqFM=");
    let events = get("/apis/events.k8s.io/v1");
    assert_eq!(
        events["resources"][0]["shortNames"],
        serde_json::json!(["ev"])
    );
    let rbac = get("/apis/rbac.authorization.k8s.io/v1");
    let names: Vec<(&str, bool, &str)> = rbac["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap(),
                r["namespaced"].as_bool().unwrap(),
                r["storageVersionHash"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("clusterrolebindings", false, "48tpQ8gZHFc="),
            ("clusterroles", false, "bYE5ZWDrJ44="),
            ("rolebindings", true, "eGsCzGH6b1g="),
            ("roles", true, "7FuwZcIIItM=")
        ]
    );
    let groups: Vec<String> = get("/apis")["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap().to_string())
        .collect();
    // kube-aggregator's group priorities: the built-in groups, then the CRD groups.
    let pos = |n: &str| groups.iter().position(|g| g == n).expect(n);
    assert_eq!(groups[..2], ["events.k8s.io", "authentication.k8s.io"]);
    assert!(pos("authentication.k8s.io") < pos("rbac.authorization.k8s.io"));
    assert!(pos("rbac.authorization.k8s.io") < pos("apiextensions.k8s.io"));
    assert!(pos("apiextensions.k8s.io") < pos("coordination.k8s.io"));
    assert_eq!(groups.last().unwrap(), "stable.example.com");
    let index = get("/openapi/v3");
    let core_url = index["paths"]["api/v1"]["serverRelativeURL"]
        .as_str()
        .expect("api/v1 in the v3 index")
        .to_string();
    let core = get(&core_url);
    assert!(core["components"]["schemas"]["io.k8s.api.core.v1.Secret"].is_object());
    let rbac_doc = get("/openapi/v3/apis/rbac.authorization.k8s.io/v1");
    assert!(rbac_doc["components"]["schemas"]["io.k8s.api.rbac.v1.ClusterRoleBinding"].is_object());
    assert!(
        rbac_doc["paths"]["/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}"].is_object()
    );
    let lease_doc = get("/openapi/v3/apis/coordination.k8s.io/v1");
    assert!(lease_doc["components"]["schemas"]["io.k8s.api.coordination.v1.LeaseList"].is_object());
    let v2 = get("/openapi/v2");
    assert!(v2["definitions"]["io.k8s.api.events.v1.EventSeries"].is_object());
    assert!(v2["paths"]["/api/v1/namespaces/{namespace}/serviceaccounts/{name}"].is_object());
    assert!(v2["definitions"]["com.example.stable.v1.CronTab"].is_object());
}
