//! Explicit tenant lifecycle, as an operator runs crdplane (`--tenant-creation=explicit`,
//! the default): Tenants (`crdplane.io/v1alpha1`) in the admin scope `/clusters/root`,
//! created and deleted with real kubectl (`kubectl --context crdplane-admin get tenants`,
//! from the kubeconfig the launcher writes); unknown tenants answer 404 to platform admins
//! and 403 to everyone else and write nothing to Redis; a created tenant is seeded (default
//! namespaces, bootstrap RBAC, its owners bound to cluster-admin) and reached by its owner's
//! token on plain paths (the `crdplane:tenant:<t>` group); a deleted tenant goes
//! Terminating, refuses requests, and is purged down to its revision counters; and a purge
//! that no gateway was running (the gateway stopped right after marking the Tenant) is
//! finished by the next gateway to start.

use crdplane::{Pki, Service};
use crdplane_proto::v1 as pb;
use crdplane_tests::{RedisServer, Stack, TlsClient, http_request, kubectls};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

const JANE: &str = "jane-token-0123456789";
const EVE: &str = "eve-token-0123456789";
const ADMIN_SCOPE: &str = "/clusters/root";
const TENANTS: &str = "/apis/crdplane.io/v1alpha1/tenants";
const CRD: &str = include_str!("../testdata/crontab-crd.yaml");

/// Redis keys whose names contain `needle` (SCAN through redis-cli).
fn redis_keys(redis: &RedisServer, needle: &str) -> Vec<String> {
    let out = std::process::Command::new("redis-cli")
        .arg("-s")
        .arg(&redis.socket)
        .args(["--scan", "--pattern", &format!("*{needle}*")])
        .output()
        .unwrap();
    assert!(out.status.success());
    let mut keys: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    keys.sort();
    keys
}

fn eventually(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

struct Secure {
    stack: Stack,
    pki: Pki,
    _dir: tempfile::TempDir,
}

impl Secure {
    /// TLS, client certificates, a token file (jane: group `crdplane:tenant:acme`; eve: no
    /// tenant), RBAC, explicit tenants: the gateway as `crdplane up` runs it.
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let pki = Pki::ensure(&dir.path().join("pki"), &[]).unwrap();
        let tokens = dir.path().join("tokens.csv");
        std::fs::write(
            &tokens,
            format!("{JANE},jane,1001,\"crdplane:tenant:acme\"\n{EVE},eve,1002\n"),
        )
        .unwrap();
        let tokens = tokens.to_string_lossy().to_string();
        let redis = RedisServer::start().unwrap();
        let b = Stack::explicit_tenants_builder(&redis.url())
            .tls(&pki)
            .args(Service::Gateway, &["--token-auth-file", &tokens]);
        let stack = Stack::start_from(b, Some(redis)).unwrap();
        stack.use_admin_kubeconfig(&pki);
        Self {
            stack,
            pki,
            _dir: dir,
        }
    }

    /// A raw request as a token's user (None: the admin's client certificate).
    fn call(
        &self,
        token: Option<&str>,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let bearer = token.map(|t| format!("Bearer {t}"));
        let mut headers = vec![("Content-Type", "application/json")];
        if let Some(b) = &bearer {
            headers.push(("Authorization", b));
        }
        let cert = (self.pki.admin_cert_pem(), self.pki.admin_key_pem());
        let client = TlsClient::new(self.pki.ca_pem(), token.is_none().then_some(cert)).unwrap();
        let body = body.map(|b| b.to_string());
        let (code, _, text) = client
            .request(
                method,
                &format!("{}{path}", self.stack.gateway),
                &headers,
                body.as_deref(),
            )
            .unwrap();
        (
            code,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// A GET of `path` as the admin's client certificate, impersonating `user` in `group`.
    fn impersonating(&self, user: &str, group: &str, path: &str) -> (u16, Value) {
        let cert = (self.pki.admin_cert_pem(), self.pki.admin_key_pem());
        let client = TlsClient::new(self.pki.ca_pem(), Some(cert)).unwrap();
        let headers = [("Impersonate-User", user), ("Impersonate-Group", group)];
        let url = format!("{}{path}", self.stack.gateway);
        let (code, _, text) = client.request("GET", &url, &headers, None).unwrap();
        (
            code,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    fn kubectl(&self, k: &Path, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
        let o = self.stack.kubectl_stdin(k, args, stdin);
        (o.ok, o.stdout, o.stderr)
    }
}

#[test]
fn tenants_are_created_used_and_purged_by_platform_admins() {
    let s = Secure::start();
    let redis = s.stack.redis.as_ref().unwrap();
    let ks = kubectls();
    let newest = ks.last().unwrap().clone();

    // An unknown tenant: 404 for the platform admin, 403 for anyone else, nothing written.
    let cms = "/api/v1/namespaces/default/configmaps";
    let (code, v) = s.call(None, "GET", &format!("/clusters/acme{cms}"), None);
    assert_eq!(code, 404, "{v}");
    assert_eq!(v["message"], "tenants.crdplane.io \"acme\" not found");
    assert_eq!(
        v["details"],
        json!({"name": "acme", "group": "crdplane.io", "kind": "tenants"})
    );
    for path in ["/apis", "/api/v1/namespaces", "/openapi/v2"] {
        let (code, _) = s.call(None, "GET", &format!("/clusters/acme{path}"), None);
        assert_eq!(code, 404, "{path}");
    }
    let (code, v) = s.call(Some(EVE), "GET", &format!("/clusters/acme{cms}"), None);
    assert_eq!(code, 403, "{v}");
    assert_eq!(
        v["message"],
        "configmaps is forbidden: User \"eve\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""
    );
    let (code, _) = s.call(
        Some(EVE),
        "POST",
        &format!("/clusters/acme{cms}"),
        Some(json!({"metadata": {"name": "x"}})),
    );
    assert_eq!(code, 403);
    // jane's group names acme as her tenant: her plain paths go there, and it does not exist.
    let (code, v) = s.call(Some(JANE), "GET", "/api/v1/namespaces", None);
    assert_eq!(code, 403, "{v}");
    assert_eq!(
        redis_keys(redis, "acme"),
        Vec::<String>::new(),
        "refused requests wrote"
    );

    // The admin scope serves Tenants; kubectl finds them through discovery.
    for k in &ks {
        let (ok, out, err) = s.kubectl(
            k,
            &[
                "--context",
                "crdplane-admin",
                "api-resources",
                "--api-group=crdplane.io",
            ],
            None,
        );
        assert!(ok, "{}: {err}", k.display());
        assert!(out.contains("tenants") && out.contains("Tenant"), "{out}");
    }
    // ... and kubectl explain through the admin scope's OpenAPI.
    for k in &ks {
        let (ok, out, err) = s.kubectl(
            k,
            &["--context", "crdplane-admin", "explain", "tenants.spec"],
            None,
        );
        assert!(ok, "{}: {err}", k.display());
        assert!(out.contains("owners"), "{}: {out}", k.display());
    }
    let tenant = "apiVersion: crdplane.io/v1alpha1\nkind: Tenant\nmetadata:\n  name: acme\nspec:\n  owners:\n  - kind: User\n    name: jane\n";
    let (ok, out, err) = s.kubectl(
        &ks[0],
        &["--context", "crdplane-admin", "create", "-f", "-"],
        Some(tenant),
    );
    assert!(ok, "{err}");
    assert!(out.contains("tenant.crdplane.io/acme created"), "{out}");
    for k in &ks {
        let (ok, out, err) = s.kubectl(k, &["--context", "crdplane-admin", "get", "tenants"], None);
        assert!(ok, "{}: {err}", k.display());
        let line = out
            .lines()
            .find(|l| l.starts_with("acme "))
            .unwrap_or_else(|| panic!("{out}"));
        assert!(line.contains("Active"), "{out}");
    }
    // The newest kubectl applies, patches (labels) and describes one.
    let beta = "apiVersion: crdplane.io/v1alpha1\nkind: Tenant\nmetadata:\n  name: beta\n";
    let (ok, out, err) = s.kubectl(
        &newest,
        &["--context", "crdplane-admin", "apply", "-f", "-"],
        Some(beta),
    );
    assert!(ok, "{err}");
    assert!(out.contains("tenant.crdplane.io/beta created"), "{out}");
    let (ok, _, err) = s.kubectl(
        &newest,
        &[
            "--context",
            "crdplane-admin",
            "label",
            "tenant",
            "beta",
            "plan=gold",
        ],
        None,
    );
    assert!(ok, "{err}");
    let (ok, out, err) = s.kubectl(
        &newest,
        &[
            "--context",
            "crdplane-admin",
            "get",
            "tenants",
            "-l",
            "plan=gold",
            "-o",
            "name",
        ],
        None,
    );
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "tenant.crdplane.io/beta");
    let (ok, out, err) = s.kubectl(
        &newest,
        &[
            "--context",
            "crdplane-admin",
            "get",
            "tenant",
            "beta",
            "-o",
            "jsonpath={.status.phase}",
        ],
        None,
    );
    assert!(ok, "{err}");
    assert_eq!(out, "Active");
    // Owners can change: the tenant's binding follows spec.owners.
    let ns_beta = "/clusters/beta/api/v1/namespaces";
    assert_eq!(s.call(Some(EVE), "GET", ns_beta, None).0, 403);
    let (ok, _, err) = s.kubectl(
        &newest,
        &[
            "--context",
            "crdplane-admin",
            "patch",
            "tenant",
            "beta",
            "--type=merge",
            "-p",
            r#"{"spec":{"owners":[{"kind":"User","name":"eve"}]}}"#,
        ],
        None,
    );
    assert!(ok, "{err}");
    eventually("eve to own beta", Duration::from_secs(10), || {
        s.call(Some(EVE), "GET", ns_beta, None).0 == 200
    });
    let (ok, _, err) = s.kubectl(
        &newest,
        &[
            "--context",
            "crdplane-admin",
            "patch",
            "tenant",
            "beta",
            "--type=merge",
            "-p",
            r#"{"spec":{"owners":null}}"#,
        ],
        None,
    );
    assert!(ok, "{err}");
    eventually("eve to lose beta", Duration::from_secs(10), || {
        s.call(Some(EVE), "GET", ns_beta, None).0 == 403
    });
    // Tenant names are DNS labels and not the admin scope's; the default tenant stays.
    let (code, v) = s.call(
        None,
        "POST",
        &format!("{ADMIN_SCOPE}{TENANTS}"),
        Some(json!({"metadata": {"name": "root"}})),
    );
    assert_eq!(code, 422, "{v}");
    assert_eq!(
        v["message"],
        "Tenant.crdplane.io \"root\" is invalid: metadata.name: Invalid value: \"root\": is reserved for the platform admins' scope"
    );
    let (code, v) = s.call(
        None,
        "DELETE",
        &format!("{ADMIN_SCOPE}{TENANTS}/default"),
        None,
    );
    assert_eq!(code, 403, "{v}");
    assert_eq!(
        v["message"],
        "tenants.crdplane.io \"default\" is forbidden: the default tenant may not be deleted"
    );
    // Tenants exist in the admin scope only.
    let (code, _) = s.call(None, "GET", &format!("/clusters/acme{TENANTS}"), None);
    assert_eq!(code, 404);
    // Only platform admins reach the admin scope.
    let (code, v) = s.call(Some(JANE), "GET", &format!("{ADMIN_SCOPE}{TENANTS}"), None);
    assert_eq!(code, 403, "{v}");

    // The new tenant is seeded: namespaces, bootstrap roles, jane's owner binding; jane
    // reaches it on plain paths.
    let (ok, out, err) = s.kubectl(
        &newest,
        &["--token", JANE, "--user", "jane", "get", "namespaces"],
        None,
    );
    assert!(ok || !err.is_empty(), "{err}");
    let (code, v) = s.call(Some(JANE), "GET", "/api/v1/namespaces", None);
    assert_eq!(code, 200, "{v} {out}");
    let names: Vec<&str> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["default", "kube-public", "kube-system"]);
    // Impersonating an identity of another tenant on a plain path is refused (the admin was
    // authorized in the default tenant, not in acme), with the path to use instead ...
    let (code, v) = s.impersonating("jane", "crdplane:tenant:acme", "/api/v1/namespaces");
    assert_eq!(code, 403, "{v}");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .ends_with("the impersonated identity belongs to tenant acme; name it in the path (/clusters/acme/...)"),
        "{v}"
    );
    // ... and allowed with the tenant in the path.
    let (code, v) = s.impersonating(
        "jane",
        "crdplane:tenant:acme",
        "/clusters/acme/api/v1/namespaces",
    );
    assert_eq!(code, 200, "{v}");
    let (code, v) = s.call(
        Some(JANE),
        "GET",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/crdplane:tenant-owners",
        None,
    );
    assert_eq!(code, 200, "{v}");
    assert_eq!(
        v["subjects"],
        json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "jane"}])
    );
    // jane fills her tenant: a CRD and its objects, config maps, secrets.
    let crd: Value = serde_saphyr::from_str(CRD).unwrap();
    let (code, v) = s.call(
        Some(JANE),
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        Some(crd),
    );
    assert_eq!(code, 201, "{v}");
    let ct = "/apis/stable.example.com/v1/namespaces/default/crontabs";
    eventually("the CRD served", Duration::from_secs(20), || {
        s.call(Some(JANE), "GET", ct, None).0 == 200
    });
    let mut objects = 0;
    for i in 0..20 {
        let (code, v) = s.call(Some(JANE), "POST", ct, Some(json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": format!("ct-{i}")}, "spec": {"cronSpec": "* * * * */5", "image": "x"}})));
        assert_eq!(code, 201, "{v}");
        let (code, v) = s.call(
            Some(JANE),
            "POST",
            cms,
            Some(json!({"metadata": {"name": format!("cm-{i}")}, "data": {"a": "b"}})),
        );
        assert_eq!(code, 201, "{v}");
        objects += 2;
    }
    let (code, _) = s.call(
        Some(JANE),
        "POST",
        "/api/v1/namespaces/default/secrets",
        Some(json!({"metadata": {"name": "s"}, "stringData": {"k": "v"}})),
    );
    assert_eq!(code, 201);
    assert!(objects > 0);
    // The same tenant by name; another made-up one is still unknown to the admin.
    let (code, v) = s.call(None, "GET", &format!("/clusters/acme{cms}"), None);
    assert_eq!((code, v["items"].as_array().map(Vec::len)), (200, Some(20)));
    assert_eq!(
        s.call(None, "GET", &format!("/clusters/acme2{cms}"), None)
            .0,
        404
    );

    // Delete: Terminating at once, requests refused, then gone with every object.
    let (ok, out, err) = s.kubectl(
        &newest,
        &[
            "--context",
            "crdplane-admin",
            "delete",
            "tenant",
            "acme",
            "--wait=false",
        ],
        None,
    );
    assert!(ok, "{err}");
    assert!(out.contains("tenant.crdplane.io \"acme\" deleted"), "{out}");
    let (ok, _, err) = s.kubectl(
        &newest,
        &[
            "--context",
            "crdplane-admin",
            "wait",
            "--for=delete",
            "tenant/acme",
            "--timeout=60s",
        ],
        None,
    );
    assert!(ok, "{err}");
    let (code, v) = s.call(None, "GET", &format!("/clusters/acme{cms}"), None);
    assert_eq!(code, 404, "{v}");
    let (code, _) = s.call(Some(JANE), "GET", "/api/v1/namespaces", None);
    assert_eq!(code, 403);
    let left: Vec<String> = redis_keys(redis, "{acme|")
        .into_iter()
        .filter(|k| !k.ends_with(":rev"))
        .collect();
    assert_eq!(left, Vec::<String>::new(), "the purge left keys");
    let (ok, out, _) = s.kubectl(
        &newest,
        &[
            "--context",
            "crdplane-admin",
            "get",
            "tenants",
            "-o",
            "name",
        ],
        None,
    );
    assert!(ok);
    assert!(!out.contains("tenant.crdplane.io/acme"), "{out}");
    // The name can be used again: a new, empty tenant.
    let (code, v) = s.call(
        None,
        "POST",
        &format!("{ADMIN_SCOPE}{TENANTS}"),
        Some(json!({"metadata": {"name": "acme"}})),
    );
    assert_eq!(code, 201, "{v}");
    let (code, v) = s.call(None, "GET", &format!("/clusters/acme{cms}"), None);
    assert_eq!(
        (code, v["items"].as_array().map(Vec::len)),
        (200, Some(0)),
        "{v}"
    );
    let (code, _) = s.call(None, "GET", &format!("/clusters/acme{ct}"), None);
    assert_eq!(code, 404, "the CRD went with the old tenant");
}

#[test]
fn a_purge_left_unfinished_is_finished_by_the_next_gateway() {
    let redis = RedisServer::start().unwrap();
    let mut stack = Stack::start_from(Stack::explicit_tenants_builder(&redis.url()), None).unwrap();
    let gw = stack.gateway.clone();
    let req = |m: &str, path: &str, body: Option<Value>| {
        let body = body.map(|b| b.to_string());
        let (code, text) = http_request(
            m,
            &format!("{gw}{path}"),
            Some("application/json"),
            body.as_deref(),
        )
        .unwrap();
        (
            code,
            serde_json::from_str::<Value>(&text).unwrap_or(Value::String(text)),
        )
    };
    // A deletion as it normally runs: watchers of the tenant see its objects go.
    // A Tenant `name` whose default namespace holds `n` config maps; their collection path.
    let tenant_with_configmaps = |name: &str, n: usize| {
        let (code, v) = req(
            "POST",
            &format!("{ADMIN_SCOPE}{TENANTS}"),
            Some(json!({"metadata": {"name": name}})),
        );
        assert_eq!(code, 201, "{v}");
        let cms = format!("/clusters/{name}/api/v1/namespaces/default/configmaps");
        for i in 0..n {
            let body = json!({"metadata": {"name": format!("cm-{i}")}});
            let (code, v) = req("POST", &cms, Some(body));
            assert_eq!(code, 201, "{v}");
        }
        cms
    };
    let gamma = &tenant_with_configmaps("gamma", 30);
    let w =
        crdplane_tests::WatchStream::open(&format!("{gw}{gamma}?watch=1&resourceVersion=0"), None)
            .unwrap();
    assert_eq!(
        w.take(30, Duration::from_secs(10)).len(),
        30,
        "initial ADDED events"
    );
    let (code, v) = req("DELETE", &format!("{ADMIN_SCOPE}{TENANTS}/gamma"), None);
    assert_eq!(
        (code, &v["status"]["phase"]),
        (200, &json!("Terminating")),
        "{v}"
    );
    assert!(v["metadata"]["deletionTimestamp"].is_string(), "{v}");
    let deleted = w.take(30, Duration::from_secs(30));
    assert_eq!(deleted.len(), 30);
    assert!(
        deleted.iter().all(|e| e["type"] == "DELETED"),
        "{deleted:?}"
    );
    eventually("gamma's Tenant to go", Duration::from_secs(30), || {
        req("GET", &format!("{ADMIN_SCOPE}{TENANTS}/gamma"), None).0 == 404
    });
    assert_eq!(req("GET", gamma, None).0, 404);

    let cms = &tenant_with_configmaps("beta", 50);
    // The gateway stops right after marking the Tenant Terminating (the mark written as
    // its delete writes it), before any purge ran.
    let i = stack.processes().index("gateway").unwrap();
    stack.processes().kill(i).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut c = pb::storage_client::StorageClient::connect(stack.storage.clone())
            .await
            .unwrap();
        let key = pb::ObjectKey {
            resource: Some(pb::ResourceRef {
                tenant: "root".into(),
                group: "crdplane.io".into(),
                resource: "tenants".into(),
            }),
            namespace: String::new(),
            name: "beta".into(),
        };
        let got = c
            .get(pb::GetRequest {
                key: Some(key.clone()),
            })
            .await
            .unwrap()
            .into_inner();
        let mut t: Value = serde_json::from_slice(&got.json).unwrap();
        t["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        t["status"]["phase"] = json!("Terminating");
        c.update(pb::UpdateRequest {
            key: Some(key),
            object: Some({
                let (head, tail) = crdplane_core::rvslot::split(&t).unwrap();
                pb::ObjectWrite {
                    head: head.into(),
                    tail: tail.into(),
                }
            }),
            expected_resource_version: got.resource_version,
            ..Default::default()
        })
        .await
        .unwrap();
    });
    assert_eq!(
        redis_keys(&redis, "{beta|configmaps}:obj").len(),
        1,
        "nothing purged yet"
    );
    stack
        .processes()
        .respawn(i, Duration::from_secs(30))
        .unwrap();
    stack.wait_ready(Duration::from_secs(30)).unwrap();
    // Refused while it lasts, then gone.
    let (code, _) = req("GET", cms, None);
    assert!(code == 403 || code == 404, "{code}");
    eventually("the purge to finish", Duration::from_secs(60), || {
        req("GET", &format!("{ADMIN_SCOPE}{TENANTS}/beta"), None).0 == 404
    });
    let left: Vec<String> = redis_keys(&redis, "{beta|")
        .into_iter()
        .filter(|k| !k.ends_with(":rev"))
        .collect();
    assert_eq!(left, Vec::<String>::new());
    assert_eq!(req("GET", cms, None).0, 404);
}

#[test]
fn stored_tenants_without_a_tenant_are_adopted_when_asked() {
    // Objects of a tenant written before Tenants existed (here: straight into storage),
    // under a gateway told to adopt them at its start.
    let redis = RedisServer::start().unwrap();
    let b = Stack::explicit_tenants_builder(&redis.url())
        .args(Service::Gateway, &["--adopt-stored-tenants"]);
    let mut stack = Stack::start_from(b, None).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut c = pb::storage_client::StorageClient::connect(stack.storage.clone())
            .await
            .unwrap();
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "kept", "namespace": "default", "uid": "u-1",
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "data": {"a": "b"}});
        let (head, tail) = crdplane_core::rvslot::split(&obj).unwrap();
        c.create(pb::CreateRequest {
            key: Some(pb::ObjectKey {
                resource: Some(pb::ResourceRef {
                    tenant: "legacy".into(),
                    group: String::new(),
                    resource: "configmaps".into(),
                }),
                namespace: "default".into(),
                name: "kept".into(),
            }),
            object: Some(pb::ObjectWrite {
                head: head.into(),
                tail: tail.into(),
            }),
            ..Default::default()
        })
        .await
        .unwrap();
    });
    let get = |gw: &str, path: &str| {
        let (code, text) = crdplane_tests::http_get(&format!("{gw}{path}")).unwrap();
        (
            code,
            serde_json::from_str::<Value>(&text).unwrap_or(Value::String(text)),
        )
    };
    let cm = "/clusters/legacy/api/v1/namespaces/default/configmaps/kept";
    // Written after this gateway's start: unknown to it.
    assert_eq!(get(&stack.gateway, cm).0, 404);
    let i = stack.processes().index("gateway").unwrap();
    stack.processes().kill(i).unwrap();
    stack
        .processes()
        .respawn(i, Duration::from_secs(30))
        .unwrap();
    stack.wait_ready(Duration::from_secs(30)).unwrap();
    let gw = stack.gateway.clone();
    eventually("the tenant adopted", Duration::from_secs(30), || {
        get(&gw, cm).0 == 200
    });
    let (code, v) = get(&gw, cm);
    assert_eq!((code, &v["data"]["a"]), (200, &json!("b")), "{v}");
    let (code, v) = get(&gw, &format!("{ADMIN_SCOPE}{TENANTS}/legacy"));
    assert_eq!(
        (code, &v["status"]["phase"]),
        (200, &json!("Active")),
        "{v}"
    );
    // Seeded like any new tenant.
    let (code, _) = get(&gw, "/clusters/legacy/api/v1/namespaces/kube-system");
    assert_eq!(code, 200);
    drop(redis);
}
