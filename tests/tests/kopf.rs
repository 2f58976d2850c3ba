//! kopf (the Python operator framework) against the real stack: an operator with create,
//! update and delete handlers that patch status and labels (tests/python/kopf_operator.py)
//! runs while objects are created, updated and deleted concurrently; every handler runs and
//! kopf logs no ERROR (a 409 on its own patches or a failed finalizer write would be one).
//! Twice: on a plain HTTP stack, and over HTTPS with RBAC, the operator holding a client
//! certificate of its own and only the rights kopf's documentation lists for it.

use crdplane::{Pki, kubeconfig_yaml_tls};
use crdplane_tests::{Stack, TlsClient, free_port, http_get, http_request};
use serde_json::{Value, json};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How the test itself reaches the gateway: plain HTTP, or HTTPS as the admin.
enum Api {
    Plain(String),
    Tls(TlsClient, String),
}

impl Api {
    fn request(
        &self,
        method: &str,
        path: &str,
        ct: Option<&str>,
        body: Option<&str>,
    ) -> (u16, String) {
        match self {
            Api::Plain(g) => http_request(method, &format!("{g}{path}"), ct, body).unwrap(),
            Api::Tls(c, g) => {
                let headers: Vec<(&str, &str)> =
                    ct.map(|c| vec![("Content-Type", c)]).unwrap_or_default();
                let (code, _, text) = c
                    .request(method, &format!("{g}{path}"), &headers, body)
                    .unwrap();
                (code, text)
            }
        }
    }

    fn get(&self, path: &str) -> (u16, Value) {
        let (code, text) = self.request("GET", path, None, None);
        (code, serde_json::from_str(&text).unwrap_or(Value::Null))
    }
}

const CRD: &str = r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"widgets.example.com"},
 "spec":{"group":"example.com","scope":"Namespaced",
  "names":{"plural":"widgets","singular":"widget","kind":"Widget"},
  "versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},
   "schema":{"openAPIV3Schema":{"type":"object","properties":{
     "spec":{"type":"object","properties":{"n":{"type":"integer"}}},
     "status":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}}}]}}"#;
const WS: &str = "/apis/example.com/v1/namespaces/default/widgets";
const N: usize = 8;

/// Waits for `f`; on timeout fails with kopf's log (if there is one yet).
fn wait_until(what: &str, log: &std::path::Path, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !f() {
        if Instant::now() > deadline {
            let log = std::fs::read_to_string(log).unwrap_or_default();
            panic!("timed out waiting for {what}; kopf's log:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `f(i)` for every object at once.
fn concurrently(f: impl Fn(usize) + Sync) {
    std::thread::scope(|s| {
        for i in 0..N {
            let f = &f;
            s.spawn(move || f(i));
        }
    });
}

fn have_kopf() -> bool {
    let have = Command::new("kopf")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have {
        eprintln!("skipping: kopf is not installed (scripts/deps.sh --test installs it)");
    }
    have
}

#[test]
fn kopf_operator_runs_without_errors() {
    if !have_kopf() {
        return;
    }
    let stack = Stack::start_with_redis().expect("stack");
    let api = Api::Plain(stack.gateway.clone());
    let kubeconfig = stack.kubeconfig.clone();
    exercise(&stack, &api, &kubeconfig);
}

/// The rights kopf's documentation (docs/deployment.rst, "RBAC") gives an operator that
/// serves one namespace: watching CRDs and namespaces cluster-wide, posting events, and
/// reading, watching and patching its own resources and their status.
const OPERATOR_RBAC: &[&str] = &[
    r#"{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"widget-operator"},
        "rules":[{"apiGroups":["apiextensions.k8s.io"],"resources":["customresourcedefinitions"],"verbs":["list","watch"]},
                 {"apiGroups":[""],"resources":["namespaces"],"verbs":["list","watch"]}]}"#,
    r#"{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"widget-operator"},
        "roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"widget-operator"},
        "subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"widget-operator"}]}"#,
    r#"{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"widget-operator","namespace":"default"},
        "rules":[{"apiGroups":[""],"resources":["events"],"verbs":["create"]},
                 {"apiGroups":["example.com"],"resources":["widgets"],"verbs":["get","list","watch","patch"]},
                 {"apiGroups":["example.com"],"resources":["widgets/status"],"verbs":["get","patch"]}]}"#,
    r#"{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"widget-operator","namespace":"default"},
        "roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"widget-operator"},
        "subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"widget-operator"}]}"#,
];

#[test]
fn kopf_operator_runs_over_tls_with_only_its_rbac_rights() {
    if !have_kopf() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::ensure(&dir.path().join("pki"), &[]).unwrap();
    let stack = Stack::start_with_redis_using(|b| b.tls(&pki)).unwrap();
    stack.use_admin_kubeconfig(&pki);
    let admin = TlsClient::admin(&pki);
    let api = Api::Tls(admin, stack.gateway.clone());
    for (path, obj) in [
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            OPERATOR_RBAC[0],
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            OPERATOR_RBAC[1],
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
            OPERATOR_RBAC[2],
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
            OPERATOR_RBAC[3],
        ),
    ] {
        let (code, text) = api.request("POST", path, Some("application/json"), Some(obj));
        assert_eq!(code, 201, "{path}: {text}");
    }
    // The operator's own identity: a client certificate of the cluster CA.
    let (cert, key) = pki.issue_client("widget-operator", &[]).unwrap();
    let operator = TlsClient::new(pki.ca_pem(), Some((&cert, &key))).unwrap();
    let kubeconfig = stack.home.path().join("operator.kubeconfig");
    std::fs::write(
        &kubeconfig,
        kubeconfig_yaml_tls(&stack.gateway, pki.ca_pem(), &cert, &key),
    )
    .unwrap();
    // Its rights end where the roles end.
    let (code, _, _) = operator
        .request(
            "GET",
            &format!("{}/api/v1/namespaces/default/secrets", stack.gateway),
            &[],
            None,
        )
        .unwrap();
    assert_eq!(code, 403);
    exercise(&stack, &api, &kubeconfig);
}

/// Creates the CRD, runs kopf with `kubeconfig`, drives the objects through `api` and
/// checks kopf's work and log.
fn exercise(stack: &Stack, api: &Api, kubeconfig: &Path) {
    let log_path = stack.home.path().join("kopf.log");
    let (code, body) = api.request(
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        Some("application/json"),
        Some(CRD),
    );
    assert_eq!(code, 201, "{body}");
    wait_until("the CRD to serve", &log_path, || api.get(WS).0 == 200);

    let log = std::fs::File::create(&log_path).unwrap();
    let port = free_port();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/kopf_operator.py");
    let mut kopf = Command::new("kopf")
        .args(["run", "--standalone", "--namespace", "default"])
        .arg(format!("--liveness=http://127.0.0.1:{port}/healthz"))
        .arg(script)
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", stack.home.path())
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("spawn kopf");
    wait_until("kopf's liveness endpoint", &log_path, || {
        http_get(&format!("http://127.0.0.1:{port}/healthz")).is_ok_and(|(c, _)| c == 200)
    });

    let obj = |i: usize| format!("{WS}/w{i}");
    concurrently(|i| {
        let body = json!({"apiVersion":"example.com/v1","kind":"Widget",
                          "metadata":{"name":format!("w{i}")},"spec":{"n":0}});
        let (code, text) = api.request(
            "POST",
            WS,
            Some("application/json"),
            Some(&body.to_string()),
        );
        assert_eq!(code, 201, "{text}");
    });
    wait_until("every create handler", &log_path, || {
        (0..N).all(|i| {
            let (_, v) = api.get(&obj(i));
            v["metadata"]["labels"]["handled"] == "created" && v["status"]["create_fn"]["n"] == 0
        })
    });
    // kopf posts the handler's `kopf.info` as a core v1 Event (kopf/_cogs/clients/events.py
    // `post_event`): served, selectable by the object, and shown by `kubectl get events`.
    wait_until("kopf's events", &log_path, || {
        let (code, l) = api.get(
            "/api/v1/namespaces/default/events?fieldSelector=involvedObject.kind%3DWidget,involvedObject.name%3Dw0",
        );
        code == 200
            && l["items"].as_array().is_some_and(|items| {
                items.iter().any(|e| {
                    e["message"]
                        .as_str()
                        .is_some_and(|m| m == "widget created and labelled")
                })
            })
    });
    if let Some(k) = crdplane_tests::kubectls().last() {
        let o = stack.kubectl(k, &["get", "events"]);
        assert!(
            o.ok && o.stdout.contains("widget/w0")
                && o.stdout.contains("widget created and labelled"),
            "kubectl get events:\n{}{}",
            o.stdout,
            o.stderr
        );
    }
    // The spec change, plus a burst of label patches on every object racing kopf's own
    // patches of the same objects (none carries a resourceVersion, none may fail).
    concurrently(|i| {
        std::thread::scope(|s| {
            for j in 0..6 {
                let url = obj(i);
                s.spawn(move || {
                    let p = if j == 0 {
                        r#"{"spec":{"n":1}}"#.to_string()
                    } else {
                        json!({"metadata":{"labels":{format!("burst{j}"): "x"}}}).to_string()
                    };
                    let (code, text) = api.request(
                        "PATCH",
                        &url,
                        Some("application/merge-patch+json"),
                        Some(&p),
                    );
                    assert_eq!(code, 200, "{text}");
                });
            }
        });
    });
    wait_until("every update handler", &log_path, || {
        (0..N).all(|i| {
            let (_, v) = api.get(&obj(i));
            v["metadata"]["labels"]["handled"] == "created"
                && v["status"]["phase"] == "Updated"
                && v["status"]["update_fn"]["n"] == 1
        })
    });
    concurrently(|i| {
        let (code, text) = api.request("DELETE", &obj(i), None, None);
        assert_eq!(code, 200, "{text}");
    });
    // kopf's finalizer holds each object until its delete handler ran.
    wait_until("every object to go", &log_path, || {
        (0..N).all(|i| api.get(&obj(i)).0 == 404)
    });
    let _ = kopf.kill();
    let _ = kopf.wait();
    let log = std::fs::read_to_string(&log_path).unwrap();
    let errors: Vec<&str> = log
        .lines()
        .filter(|l| {
            l.contains("ERROR") || l.contains("Traceback") || l.contains("Failed to post an event")
        })
        .collect();
    assert!(
        errors.is_empty(),
        "kopf logged errors:\n{}\n\nfull log:\n{log}",
        errors.join("\n")
    );
    let ran = |h: &str| {
        log.lines()
            .filter(|l| l.contains(&format!("Handler '{h}' succeeded")))
            .count()
    };
    assert_eq!(ran("create_fn"), N, "{log}");
    // Once for the label the create handler set, then for our spec and label changes.
    assert!(ran("update_fn") >= 2 * N, "{log}");
    assert_eq!(ran("delete_fn"), N, "{log}");
}
