//! The audit log as an operator configures it: a TLS + RBAC stack whose gateway has
//! kube-apiserver's `--audit-policy-file`, `--audit-log-path` and
//! `--audit-webhook-config-file` (an HTTP receiver in this test), driven by kubectl 1.20
//! and the newest kubectl and by plain requests. Checked in the written JSON lines and in
//! the webhook's `EventList` batches: upstream's event shape and stages (RequestReceived and
//! ResponseComplete; ResponseStarted for a watch; a ResponseStarted without user for a
//! refused token), the levels the policy gives (request and response bodies at
//! RequestResponse, managed fields left out where asked, nothing for a rule of level None),
//! Secrets never above Metadata (their data appears nowhere), the tenant, the authorization
//! decision, the impersonated user, the error Status of a failed request, and the
//! `Audit-Id` response header naming the event.

use crdplane::{Pki, Service};
use crdplane_tests::{Stack, TlsClient, kubectls};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const POLICY: &str = r#"apiVersion: audit.k8s.io/v1
kind: Policy
rules:
  - level: None
    nonResourceURLs: ["/healthz*", "/readyz*", "/livez*", "/version"]
  - level: None
    resources: [{group: "", resources: ["events"]}]
  - level: RequestResponse
    resources: [{group: "", resources: ["secrets", "configmaps"]}]
  - level: Request
    omitManagedFields: true
    omitStages: [RequestReceived]
    resources: [{group: "rbac.authorization.k8s.io"}]
  - level: Metadata
"#;

const SECRET_VALUE: &str = "aHVudGVyMg=="; // never in the log

/// Every line of the audit log as JSON.
fn events(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Waits until `pred` holds for the log's events.
fn wait_for(path: &Path, what: &str, pred: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let e = events(path);
        if pred(&e) {
            return e;
        }
        assert!(
            Instant::now() < until,
            "no {what} in the audit log:\n{e:#?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A plain-HTTP webhook receiver: the bodies it was POSTed.
fn webhook_receiver() -> (String, Arc<Mutex<Vec<Value>>>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/audit", l.local_addr().unwrap());
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut len = 0usize;
            let mut auth = String::new();
            let mut line = String::new();
            loop {
                line.clear();
                if r.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                if line == "\r\n" {
                    break;
                }
                let lower = line.to_ascii_lowercase();
                if let Some(v) = lower.strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap();
                }
                if lower.starts_with("authorization:") {
                    auth = line["authorization:".len()..].trim().to_string();
                }
            }
            let mut body = vec![0; len];
            if r.read_exact(&mut body).is_ok() {
                let mut v: Value = serde_json::from_slice(&body).unwrap();
                v["receivedAuthorization"] = Value::String(auth);
                g.lock().unwrap().push(v);
            }
            let _ =
                s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    (url, got)
}

/// The `Audit-Id` of a response head.
fn audit_id_of(head: &str) -> String {
    head.lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("audit-id:")
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_else(|| panic!("no Audit-Id in {head}"))
}

fn by_id<'a>(evs: &'a [Value], id: &str) -> Vec<&'a Value> {
    evs.iter().filter(|e| e["auditID"] == id).collect()
}

#[test]
fn audit_log_and_webhook_record_what_kubectl_did() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::ensure(&dir.path().join("pki"), &[]).unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, POLICY).unwrap();
    let log = dir.path().join("audit/audit.log");
    let (hook_url, hook) = webhook_receiver();
    let hook_config = dir.path().join("webhook.kubeconfig");
    std::fs::write(
        &hook_config,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: audit\n  cluster:\n    server: {hook_url}\nusers:\n- name: gw\n  user:\n    token: t0ken\ncontexts:\n- name: c\n  context: {{cluster: audit, user: gw}}\ncurrent-context: c\n"
        ),
    )
    .unwrap();
    let p = |x: &Path| x.to_string_lossy().into_owned();
    let stack = Stack::start_with_redis_using(|b| {
        b.tls(&pki).args(
            Service::Gateway,
            &[
                "--audit-policy-file".to_string(),
                p(&policy),
                "--audit-log-path".into(),
                p(&log),
                "--audit-webhook-config-file".into(),
                p(&hook_config),
                "--audit-webhook-batch-max-wait".into(),
                "200ms".into(),
            ],
        )
    })
    .unwrap();
    stack.use_admin_kubeconfig(&pki);
    let admin = TlsClient::admin(&pki);
    let url = |path: &str| format!("{}{path}", stack.gateway);

    // A plain GET: its Audit-Id names a RequestReceived and a ResponseComplete event.
    let (code, head, _) = admin
        .request(
            "GET",
            &url("/api/v1/namespaces/default/configmaps"),
            &[],
            None,
        )
        .unwrap();
    assert_eq!(code, 200);
    let id = audit_id_of(&head);
    let evs = wait_for(&log, "list", |e| by_id(e, &id).len() == 2);
    let list = by_id(&evs, &id);
    assert_eq!(list[0]["stage"], "RequestReceived");
    assert_eq!(list[1]["stage"], "ResponseComplete");
    let e = list[1];
    assert_eq!(e["kind"], "Event");
    assert_eq!(e["apiVersion"], "audit.k8s.io/v1");
    assert_eq!(e["level"], "RequestResponse");
    assert_eq!(e["verb"], "list");
    assert_eq!(e["requestURI"], "/api/v1/namespaces/default/configmaps");
    assert_eq!(e["user"]["username"], "crdplane-admin");
    assert_eq!(e["sourceIPs"][0], "127.0.0.1");
    assert_eq!(
        e["objectRef"],
        serde_json::json!({"resource": "configmaps", "namespace": "default", "apiVersion": "v1"})
    );
    assert_eq!(
        e["responseStatus"],
        serde_json::json!({"metadata": {}, "code": 200})
    );
    assert_eq!(e["responseObject"]["kind"], "ConfigMapList");
    assert_eq!(e["annotations"]["crdplane.io/tenant"], "default");
    assert_eq!(e["annotations"]["authorization.k8s.io/decision"], "allow");
    assert!(
        e["requestReceivedTimestamp"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );

    let kubectls = kubectls();
    for (i, k) in kubectls.iter().enumerate() {
        let name = format!("cm{i}");
        // kubectl create configmap: the request and response bodies at RequestResponse, the
        // object's name from the body.
        let out = stack.kubectl(
            k,
            &["create", "configmap", &name, "--from-literal=colour=teal"],
        );
        assert!(out.ok, "{}: {}", k.display(), out.stderr);
        let evs = wait_for(&log, "configmap create", |e| {
            e.iter().any(|x| {
                x["verb"] == "create"
                    && x["objectRef"]["name"] == name.as_str()
                    && x["stage"] == "ResponseComplete"
            })
        });
        let c = evs
            .iter()
            .find(|x| {
                x["verb"] == "create"
                    && x["objectRef"]["name"] == name.as_str()
                    && x["stage"] == "ResponseComplete"
            })
            .unwrap();
        assert_eq!(c["requestObject"]["data"]["colour"], "teal", "{c:#}");
        assert_eq!(c["responseObject"]["metadata"]["name"], name.as_str());
        assert_eq!(c["responseStatus"]["code"], 201);
        assert!(
            c["userAgent"].as_str().unwrap().starts_with("kubectl"),
            "{c:#}"
        );

        // A Secret: Metadata only, whatever the rule says; its data is nowhere.
        let sname = format!("s{i}");
        let out = stack.kubectl(
            k,
            &[
                "create",
                "secret",
                "generic",
                &sname,
                "--from-literal=password=hunter2",
            ],
        );
        assert!(out.ok, "{}", out.stderr);
        let evs = wait_for(&log, "secret create", |e| {
            e.iter().any(|x| {
                x["objectRef"]["name"] == sname.as_str() && x["stage"] == "ResponseComplete"
            })
        });
        let s = evs
            .iter()
            .find(|x| x["objectRef"]["name"] == sname.as_str() && x["stage"] == "ResponseComplete")
            .unwrap();
        assert_eq!(s["level"], "Metadata");
        assert!(s.get("requestObject").is_none() && s.get("responseObject").is_none());
    }
    // Impersonating someone with no rights in the tenant: refused, with both users.
    let (code, head, _) = admin
        .request(
            "DELETE",
            &url("/api/v1/namespaces/default/configmaps/cm0"),
            &[("Impersonate-User", "jane")],
            None,
        )
        .unwrap();
    assert_eq!(code, 403);
    let did = audit_id_of(&head);
    let evs = wait_for(&log, "impersonated delete", |e| by_id(e, &did).len() == 2);
    let d = by_id(&evs, &did)[1];
    assert_eq!(d["verb"], "delete");
    assert_eq!(d["user"]["username"], "crdplane-admin");
    assert_eq!(d["impersonatedUser"]["username"], "jane");
    assert_eq!(d["responseStatus"]["code"], 403);
    assert_eq!(d["responseStatus"]["reason"], "Forbidden");
    assert_eq!(d["responseStatus"]["status"], "Failure");
    assert!(
        d["responseStatus"]["message"]
            .as_str()
            .unwrap()
            .contains("User \"jane\" cannot delete resource \"configmaps\""),
        "{d:#}"
    );
    // The same delete by the admin: allowed, and the authorizer's decision recorded.
    let (code, head, _) = admin
        .request(
            "DELETE",
            &url("/api/v1/namespaces/default/configmaps/cm0"),
            &[],
            None,
        )
        .unwrap();
    assert_eq!(code, 200);
    let aid = audit_id_of(&head);
    let evs = wait_for(&log, "admin delete", |e| by_id(e, &aid).len() == 2);
    let d = by_id(&evs, &aid)[1];
    assert_eq!(d["annotations"]["authorization.k8s.io/decision"], "allow");
    assert_eq!(d["objectRef"]["name"], "cm0");
    assert!(d.get("impersonatedUser").is_none());
    let all = std::fs::read_to_string(&log).unwrap();
    assert!(!all.contains(SECRET_VALUE) && !all.contains("hunter2"));

    // A Role (kubectl sends protobuf): Request level, no RequestReceived, no managed fields.
    let k = kubectls.last().unwrap();
    let out = stack.kubectl(
        k,
        &[
            "create",
            "role",
            "reader",
            "--verb=get",
            "--resource=configmaps",
            "--dry-run=server",
            "-o",
            "name",
        ],
    );
    assert!(out.ok, "{}", out.stderr);
    let evs = wait_for(&log, "role create", |e| {
        e.iter().any(|x| x["objectRef"]["resource"] == "roles")
    });
    let roles: Vec<&Value> = evs
        .iter()
        .filter(|x| x["objectRef"]["resource"] == "roles")
        .collect();
    assert_eq!(roles.len(), 1, "{roles:#?}");
    assert_eq!(roles[0]["stage"], "ResponseComplete");
    assert_eq!(roles[0]["level"], "Request");
    assert_eq!(roles[0]["requestObject"]["rules"][0]["verbs"][0], "get");
    assert_eq!(roles[0]["objectRef"]["name"], "reader");
    assert!(roles[0].get("responseObject").is_none());

    // A watch: ResponseStarted when it is answered, ResponseComplete when it ends.
    let (code, head, _) = admin
        .request(
            "GET",
            &url("/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1"),
            &[],
            None,
        )
        .unwrap();
    assert_eq!(code, 200);
    let wid = audit_id_of(&head);
    let evs = wait_for(&log, "watch", |e| by_id(e, &wid).len() == 3);
    let stages: Vec<&Value> = by_id(&evs, &wid).iter().map(|e| &e["stage"]).collect();
    assert_eq!(
        stages,
        ["RequestReceived", "ResponseStarted", "ResponseComplete"]
    );

    // A refused token: one ResponseStarted event, no user, which credentials were tried.
    let anon = TlsClient::new(pki.ca_pem(), None).unwrap();
    let (code, head, _) = anon
        .request(
            "GET",
            &url("/api/v1/namespaces"),
            &[("Authorization", "Bearer nope")],
            None,
        )
        .unwrap();
    assert_eq!(code, 401);
    // The 401 comes from a layer outside the audit layer and still names its event.
    let refused = audit_id_of(&head);
    let evs = wait_for(&log, "failed authentication", |e| {
        e.iter().any(|x| x["responseStatus"]["code"] == 401)
    });
    let f = evs
        .iter()
        .find(|x| x["responseStatus"]["code"] == 401)
        .unwrap();
    assert_eq!(f["auditID"], refused.as_str());
    assert_eq!(f["stage"], "ResponseStarted");
    assert_eq!(f["user"], serde_json::json!({}));
    assert_eq!(
        f["responseStatus"]["message"],
        "Authentication failed, attempted: bearer"
    );

    // Level None: health checks and events are not recorded.
    assert!(events(&log).iter().all(|e| {
        let uri = e["requestURI"].as_str().unwrap();
        !uri.starts_with("/readyz")
            && !uri.starts_with("/healthz")
            && e["objectRef"]["resource"] != "events"
    }));

    // The webhook got the same events, as EventList batches with its bearer token.
    let until = Instant::now() + Duration::from_secs(30);
    let logged = events(&log).len();
    loop {
        let batches = hook.lock().unwrap().clone();
        let items: usize = batches
            .iter()
            .map(|b| b["items"].as_array().unwrap().len())
            .sum();
        if items >= logged {
            assert!(batches.iter().all(|b| b["kind"] == "EventList"
                && b["apiVersion"] == "audit.k8s.io/v1"
                && b["receivedAuthorization"] == "Bearer t0ken"));
            let ids: Vec<&Value> = batches
                .iter()
                .flat_map(|b| b["items"].as_array().unwrap())
                .map(|e| &e["auditID"])
                .collect();
            assert!(
                ids.iter().any(|i| **i == id.as_str()) && ids.iter().any(|i| **i == wid.as_str())
            );
            break;
        }
        assert!(
            Instant::now() < until,
            "the webhook got {items} of {logged} events"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
