//! RBAC per tenant, as `crdplane up` runs the gateway (TLS, client certificates, a token
//! file, `--authorization-mode=RBAC`): the bootstrap roles, upstream's 403 texts for every
//! verb (watch included), `kubectl auth can-i` (and `--list`), aggregated roles picking up
//! a CRD's ClusterRole, escalation prevention, prompt revocation, impersonation,
//! service-account tokens, and the isolation matrix: identities of one tenant (token,
//! client certificate, service-account token, OIDC token of `--authentication-config`) ×
//! every verb × every path form of another tenant, 0 successes. Checked with raw HTTPS requests, real kubectl binaries, kube-rs and
//! the Python client.

use crdplane::{Pki, Service};
use crdplane_tests::{JwtKey, Stack, TlsClient, jwks, kubectls, unix_now};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const JANE: &str = "jane-token-0123456789";
const BOB: &str = "bob-token-0123456789";
const CRD: &str = include_str!("../testdata/crontab-crd.yaml");
/// The OIDC issuer of `--authentication-config` (keys from a JWKS file); its `sub` is the
/// username, prefixed `oidc:`.
const OIDC_ISSUER: &str = "https://oidc.example.com";

/// The tenants besides the default one that a platform admin creates for these tests.
const TENANTS: [&str; 3] = ["other", "tenant-a", "tenant-b"];

struct Secure {
    stack: Stack,
    pki: Pki,
    dir: tempfile::TempDir,
    /// The OIDC issuer's signing key.
    oidc_key: JwtKey,
}

impl Secure {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let pki = Pki::ensure(&dir.path().join("pki"), &[]).unwrap();
        let tokens = dir.path().join("tokens.csv");
        std::fs::write(
            &tokens,
            format!("{JANE},jane,1001,\"dev\"\n{BOB},bob,1002\n"),
        )
        .unwrap();
        let tokens = tokens.to_string_lossy().to_string();
        let oidc_key = JwtKey::new("rbac-1");
        std::fs::write(dir.path().join("keys.json"), jwks(&[&oidc_key])).unwrap();
        let authn = dir.path().join("authn.yaml");
        std::fs::write(
            &authn,
            format!(
                "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\njwt:\n\
                 - issuer: {{url: \"{OIDC_ISSUER}\", audiences: [crdplane], jwksFile: keys.json}}\n  \
                 claimMappings:\n    username: {{claim: sub, prefix: \"oidc:\"}}\n"
            ),
        )
        .unwrap();
        let authn = authn.to_string_lossy().to_string();
        // Tenants exist once created, as `crdplane up` runs the gateway.
        let redis = crdplane_tests::RedisServer::start().unwrap();
        let b = Stack::explicit_tenants_builder(&redis.url())
            .tls(&pki)
            .args(
                Service::Gateway,
                &[
                    "--token-auth-file",
                    &tokens,
                    "--authentication-config",
                    &authn,
                ],
            );
        let stack = Stack::start_from(b, Some(redis)).unwrap();
        stack.use_admin_kubeconfig(&pki);
        // A kubeconfig that trusts the CA and holds no credential (tokens come as flags).
        let bare: String = std::fs::read_to_string(&stack.kubeconfig)
            .unwrap()
            .lines()
            .filter(|l| !l.contains("client-certificate-data") && !l.contains("client-key-data"))
            .map(|l| format!("{l}\n"))
            .collect::<String>()
            .replace("  user:\n", "  user: {}\n");
        std::fs::write(dir.path().join("bare"), bare).unwrap();
        let s = Self {
            stack,
            pki,
            dir,
            oidc_key,
        };
        for t in TENANTS {
            s.admin(
                "POST",
                "/clusters/root/apis/crdplane.io/v1alpha1/tenants",
                serde_json::json!({"metadata": {"name": t}}),
            );
        }
        s
    }

    /// An OIDC token of [`OIDC_ISSUER`] for `sub` (user `oidc:<sub>`), valid for 10 minutes.
    fn oidc_token(&self, sub: &str) -> String {
        let now = unix_now();
        self.oidc_key
            .sign(&serde_json::json!({"iss": OIDC_ISSUER, "aud": "crdplane",
            "sub": sub, "iat": now, "nbf": now, "exp": now + 600}))
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.stack.gateway)
    }

    /// A raw request as the token's user (None: the admin's client certificate).
    fn call(
        &self,
        token: Option<&str>,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> (u16, serde_json::Value) {
        let bearer = token.map(|t| format!("Bearer {t}"));
        let mut headers = vec![("Content-Type", "application/json")];
        if method == "PATCH" {
            headers[0].1 = "application/merge-patch+json";
        }
        if let Some(b) = &bearer {
            headers.push(("Authorization", b));
        }
        let client = match token {
            Some(_) => TlsClient::new(self.pki.ca_pem(), None).unwrap(),
            None => TlsClient::new(
                self.pki.ca_pem(),
                Some((self.pki.admin_cert_pem(), self.pki.admin_key_pem())),
            )
            .unwrap(),
        };
        let (code, _, body) = client
            .request(method, &self.url(path), &headers, body)
            .unwrap();
        let v = serde_json::from_str(&body).unwrap_or(serde_json::Value::String(body));
        (code, v)
    }

    fn admin(&self, method: &str, path: &str, body: serde_json::Value) -> serde_json::Value {
        let (code, v) = self.call(None, method, path, Some(&body.to_string()));
        assert!((200..300).contains(&code), "{method} {path}: {code} {v}");
        v
    }

    /// kubectl as the admin (token None) or a token's user: (ok, stdout, stderr).
    fn kubectl(&self, k: &Path, token: Option<&str>, args: &[&str]) -> (bool, String, String) {
        let home = self
            .dir
            .path()
            .join(format!("home-{}", k.file_name().unwrap().to_string_lossy()));
        let mut c = Command::new(k);
        match token {
            Some(t) => c
                .arg("--token")
                .arg(t)
                .env("KUBECONFIG", self.dir.path().join("bare")),
            None => c.env("KUBECONFIG", &self.stack.kubeconfig),
        };
        let o = c.args(args).env("HOME", home).output().unwrap();
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn setup_crd_and_namespaces(&self, namespaces: &[&str]) {
        let crd: serde_json::Value = serde_saphyr::from_str(CRD).unwrap();
        self.admin(
            "POST",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            crd,
        );
        for ns in namespaces {
            self.admin(
                "POST",
                "/api/v1/namespaces",
                serde_json::json!({"metadata": {"name": ns}}),
            );
        }
        // The CRD serves once Established.
        let deadline = Instant::now() + Duration::from_secs(30);
        while self
            .call(None, "GET", "/apis/stable.example.com/v1/crontabs", None)
            .0
            != 200
        {
            assert!(Instant::now() < deadline, "CRD never served");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Polls `f` until it holds (policy changes reach the cache through the storage change
/// stream, asynchronously); returns how long it took.
fn eventually(what: &str, mut f: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < Duration::from_secs(10), "never: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
    start.elapsed()
}

fn binding(
    kind: &str,
    name: &str,
    ns: Option<&str>,
    role_kind: &str,
    role: &str,
    user: &str,
) -> serde_json::Value {
    let mut meta = serde_json::json!({"name": name});
    if let Some(ns) = ns {
        meta["namespace"] = ns.into();
    }
    serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]
    })
}

/// (method, path, body, verb, object name, resource as the message names it)
type Case<'a> = (&'a str, String, Option<&'a str>, &'a str, &'a str, &'a str);

#[test]
fn forbidden_statuses_for_every_verb_and_path_form() {
    let s = Secure::start();
    s.setup_crd_and_namespaces(&["team-a"]);
    let ct = serde_json::json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
        "metadata": {"name": "c1"}, "spec": {"cronSpec": "* * * * */5"}});
    s.admin(
        "POST",
        "/apis/stable.example.com/v1/namespaces/team-a/crontabs",
        ct.clone(),
    );
    let base = "/apis/stable.example.com/v1/namespaces/team-a/crontabs";
    let q = |v: &str| format!("\"{v}\"");
    let msg = |verb: &str, name: &str, res: &str| {
        let what = if name.is_empty() {
            "crontabs.stable.example.com".to_string()
        } else {
            format!("crontabs.stable.example.com {}", q(name))
        };
        format!(
            "{what} is forbidden: User \"jane\" cannot {verb} resource {} in API group \"stable.example.com\" in the namespace \"team-a\"",
            q(res)
        )
    };
    let body = ct.to_string();
    // (method, path, body, verb, name, resource as named in the message)
    let one = format!("{base}/c1");
    let cases: Vec<Case> = vec![
        ("GET", one.clone(), None, "get", "c1", "crontabs"),
        ("GET", base.to_string(), None, "list", "", "crontabs"),
        (
            "GET",
            format!("{base}?watch=true"),
            None,
            "watch",
            "",
            "crontabs",
        ),
        (
            "POST",
            base.to_string(),
            Some(&body),
            "create",
            "",
            "crontabs",
        ),
        ("PUT", one.clone(), Some(&body), "update", "c1", "crontabs"),
        ("PATCH", one.clone(), Some("{}"), "patch", "c1", "crontabs"),
        ("DELETE", one.clone(), None, "delete", "c1", "crontabs"),
        (
            "DELETE",
            base.to_string(),
            None,
            "deletecollection",
            "",
            "crontabs",
        ),
        (
            "PUT",
            format!("{one}/status"),
            Some(&body),
            "update",
            "c1",
            "crontabs/status",
        ),
    ];
    for (method, path, body, verb, name, res) in &cases {
        let (code, v) = s.call(Some(JANE), method, path, *body);
        assert_eq!(code, 403, "{method} {path}: {v}");
        assert_eq!(v["reason"], "Forbidden", "{v}");
        assert_eq!(v["message"], msg(verb, name, res), "{method} {path}");
        assert_eq!(v["details"]["group"], "stable.example.com");
        assert_eq!(v["details"]["kind"], "crontabs");
    }
    // Cluster scope, the core group, a non-resource path.
    let (code, v) = s.call(Some(JANE), "GET", "/api/v1/namespaces", None);
    assert_eq!(code, 403);
    assert_eq!(
        v["message"],
        "namespaces is forbidden: User \"jane\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope"
    );
    let (code, v) = s.call(Some(JANE), "GET", "/logs", None);
    assert_eq!(
        (code, v["message"].as_str()),
        (
            403,
            Some("forbidden: User \"jane\" cannot get path \"/logs\"")
        ),
        "{v}"
    );
    assert_eq!(v["details"], serde_json::json!({}));
    // Not yet a member of the tenant (no binding names her): not even discovery.
    let (code, v) = s.call(Some(JANE), "GET", "/apis", None);
    assert_eq!(code, 403, "{v}");
    assert_eq!(
        v["message"],
        "forbidden: User \"jane\" cannot get path \"/apis\""
    );
    // Nothing was changed by the refused writes.
    let (_, v) = s.call(None, "GET", &one, None);
    assert_eq!(
        v["metadata"]["resourceVersion"],
        s.call(None, "GET", &one, None).1["metadata"]["resourceVersion"]
    );
    assert_eq!(
        s.call(None, "GET", base, None).1["items"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // A grant in the default tenant grants nothing in another tenant.
    s.admin(
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/team-a/rolebindings",
        binding(
            "RoleBinding",
            "jane-edit",
            Some("team-a"),
            "ClusterRole",
            "edit",
            "jane",
        ),
    );
    let cms = "/api/v1/namespaces/team-a/configmaps";
    eventually("jane lists configmaps", || {
        s.call(Some(JANE), "GET", cms, None).0 == 200
    });
    // Now a member of the tenant: discovery (system:discovery binds every authenticated
    // user), OpenAPI, health.
    for ok in [
        "/apis",
        "/api/v1",
        "/apis/stable.example.com/v1",
        "/version",
        "/healthz",
        "/openapi/v2",
    ] {
        assert_eq!(s.call(Some(JANE), "GET", ok, None).0, 200, "{ok}");
    }
    // Another tenant: nothing, discovery included; health is the process's.
    let (code, v) = s.call(Some(JANE), "GET", "/clusters/other/apis", None);
    assert_eq!(code, 403, "{v}");
    assert_eq!(
        s.call(Some(JANE), "GET", "/clusters/other/healthz", None).0,
        200
    );
    let (code, v) = s.call(Some(JANE), "GET", &format!("/clusters/other{cms}"), None);
    assert_eq!(code, 403, "{v}");
    assert_eq!(
        v["message"],
        "configmaps is forbidden: User \"jane\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"team-a\""
    );
    // A binding to a role that does not exist: the reason says so.
    s.admin(
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/team-a/rolebindings",
        binding(
            "RoleBinding",
            "dangling",
            Some("team-a"),
            "Role",
            "gone",
            "bob",
        ),
    );
    eventually("the dangling binding is seen", || {
        s.call(Some(BOB), "GET", cms, None).1["message"]
            .as_str()
            .is_some_and(|m| {
                m.ends_with(": RBAC: role.rbac.authorization.k8s.io \"gone\" not found")
            })
    });
    // Access reviews: the admin asks about jane (SubjectAccessReview names the binding that
    // allows); jane may ask about herself but not about others.
    let sar = |user: &str, verb: &str| {
        serde_json::json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": user, "groups": ["system:authenticated"], "resourceAttributes":
                {"namespace": "team-a", "verb": verb, "resource": "configmaps"}}})
        .to_string()
    };
    let path = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
    let (code, v) = s.call(None, "POST", path, Some(&sar("jane", "list")));
    assert_eq!(code, 201, "{v}");
    assert_eq!(v["status"]["allowed"], true);
    assert_eq!(
        v["status"]["reason"],
        "RBAC: allowed by RoleBinding \"jane-edit/team-a\" of ClusterRole \"edit\" to User \"jane\""
    );
    let (_, v) = s.call(None, "POST", path, Some(&sar("bob", "list")));
    assert_eq!(v["status"]["allowed"], false, "{v}");
    let (code, v) = s.call(Some(JANE), "POST", path, Some(&sar("bob", "list")));
    assert_eq!(code, 403, "{v}");
    let (code, v) = s.call(
        None,
        "POST",
        path,
        Some(&serde_json::json!({"spec": {"user": "x"}}).to_string()),
    );
    assert_eq!(code, 422, "{v}");
    assert_eq!(
        v["message"],
        "SubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.resourceAttributes: Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified"
    );
    let ssar = serde_json::json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"nonResourceAttributes": {"path": "/logs", "verb": "get"}}}).to_string();
    let (code, v) = s.call(
        Some(JANE),
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        Some(&ssar),
    );
    assert_eq!(
        (code, &v["status"]["allowed"]),
        (201, &serde_json::json!(false)),
        "{v}"
    );

    // Revocation: deleting the binding takes jane's access away promptly.
    s.call(
        None,
        "DELETE",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/team-a/rolebindings/jane-edit",
        None,
    );
    let took = eventually("jane's access is revoked", || {
        s.call(Some(JANE), "GET", cms, None).0 == 403
    });
    eprintln!("revocation reached the authorizer after {took:?}");
}

#[test]
fn kubectl_can_i_aggregation_and_escalation() {
    let ks = kubectls();
    assert!(!ks.is_empty(), "no kubectl found");
    let newest = ks.last().unwrap();
    let s = Secure::start();
    s.setup_crd_and_namespaces(&["team-a", "team-b"]);
    let k = |token, args: &[&str]| s.kubectl(newest, token, args);

    // jane holds nothing yet, so she is no member of the tenant: even discovery is refused.
    let (ok, _, e) = k(Some(JANE), &["get", "crontabs", "-n", "team-a"]);
    assert!(!ok);
    assert!(e.contains("Forbidden"), "{e}");
    // edit in team-a: configmaps yes, crontabs not until the CRD's role aggregates.
    let (ok, o, e) = k(
        None,
        &[
            "create",
            "rolebinding",
            "jane-edit",
            "--clusterrole=edit",
            "--user=jane",
            "-n",
            "team-a",
        ],
    );
    assert!(ok, "{o}{e}");
    eventually("jane may create configmaps", || {
        k(
            Some(JANE),
            &["auth", "can-i", "create", "configmaps", "-n", "team-a"],
        )
        .1
        .trim()
            == "yes"
    });
    let (ok, o, _) = k(
        Some(JANE),
        &["auth", "can-i", "create", "crontabs", "-n", "team-a"],
    );
    assert!(!ok && o.trim() == "no", "{o}");
    let role = s.path("crontab-edit.yaml");
    std::fs::write(
        &role,
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: crontab-edit\n  labels:\n    rbac.authorization.k8s.io/aggregate-to-edit: \"true\"\nrules:\n- apiGroups: [\"stable.example.com\"]\n  resources: [\"crontabs\"]\n  verbs: [\"get\", \"list\", \"watch\", \"create\", \"update\", \"patch\", \"delete\"]\n",
    )
    .unwrap();
    let (ok, o, e) = k(None, &["apply", "-f", &role.to_string_lossy()]);
    assert!(ok, "{o}{e}");
    eventually("the CRD's role aggregates into edit", || {
        k(
            Some(JANE),
            &["auth", "can-i", "create", "crontabs", "-n", "team-a"],
        )
        .1
        .trim()
            == "yes"
    });
    // The aggregated rules are written into edit and admin, as upstream's controller does.
    for role in ["edit", "admin"] {
        eventually(&format!("{role} shows the CronTab rule"), || {
            let (_, o, _) = k(None, &["get", "clusterrole", role, "-o", "json"]);
            o.contains("\"crontabs\"")
        });
    }
    let (_, o, _) = k(None, &["get", "clusterrole", "view", "-o", "json"]);
    assert!(!o.contains("crontabs") && o.contains("configmaps"), "{o}");
    let ct = s.path("ct.yaml");
    std::fs::write(&ct, include_str!("../testdata/my-crontab.yaml")).unwrap();
    let (ok, o, e) = k(
        Some(JANE),
        &["apply", "-n", "team-a", "-f", &ct.to_string_lossy()],
    );
    assert!(ok, "{o}{e}");
    let (ok, o, e) = k(
        Some(JANE),
        &["get", "crontabs", "-n", "team-a", "-o", "name"],
    );
    assert!(
        ok && o.contains("crontab.stable.example.com/my-new-cron-object"),
        "{o}{e}"
    );
    // Not in team-b, and edit holds no RBAC writes.
    let (ok, _, e) = k(Some(JANE), &["get", "crontabs", "-n", "team-b"]);
    assert!(!ok && e.contains("in the namespace \"team-b\""), "{e}");
    let (ok, o, _) = k(
        Some(JANE),
        &["auth", "can-i", "create", "rolebindings", "-n", "team-a"],
    );
    assert!(!ok && o.trim() == "no", "{o}");
    // `can-i --list`: the aggregated rules are there.
    let (ok, o, e) = k(Some(JANE), &["auth", "can-i", "--list", "-n", "team-a"]);
    assert!(ok, "{o}{e}");
    assert!(o.contains("crontabs.stable.example.com"), "{o}");
    assert!(
        o.contains("selfsubjectaccessreviews.authorization.k8s.io"),
        "{o}"
    );

    // Escalation: admin in team-b may grant what she holds (edit) but not cluster-admin,
    // and may not write a role with rules she lacks.
    let (ok, o, e) = k(
        None,
        &[
            "create",
            "rolebinding",
            "jane-admin",
            "--clusterrole=admin",
            "--user=jane",
            "-n",
            "team-b",
        ],
    );
    assert!(ok, "{o}{e}");
    eventually("jane may create rolebindings in team-b", || {
        k(
            Some(JANE),
            &["auth", "can-i", "create", "rolebindings", "-n", "team-b"],
        )
        .1
        .trim()
            == "yes"
    });
    let (ok, _, e) = k(
        Some(JANE),
        &[
            "create",
            "rolebinding",
            "bob-root",
            "--clusterrole=cluster-admin",
            "--user=bob",
            "-n",
            "team-b",
        ],
    );
    assert!(!ok);
    assert!(
        e.contains("rolebindings.rbac.authorization.k8s.io \"bob-root\" is forbidden: user \"jane\" (groups=[\"dev\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:"),
        "{e}"
    );
    let (ok, o, e) = k(
        Some(JANE),
        &[
            "create",
            "rolebinding",
            "bob-edit",
            "--clusterrole=edit",
            "--user=bob",
            "-n",
            "team-b",
        ],
    );
    assert!(ok, "{o}{e}");
    let (ok, _, e) = k(
        Some(JANE),
        &[
            "create",
            "role",
            "too-much",
            "--verb=get",
            "--resource=leases",
            "-n",
            "team-b",
        ],
    );
    assert!(!ok);
    assert!(
        e.contains("roles.rbac.authorization.k8s.io \"too-much\" is forbidden: user \"jane\""),
        "{e}"
    );
    assert!(
        e.contains(
            "{APIGroups:[\"coordination.k8s.io\"], Resources:[\"leases\"], Verbs:[\"get\"]}"
        ),
        "{e}"
    );
    let (ok, o, e) = k(
        Some(JANE),
        &[
            "create",
            "role",
            "cm-reader",
            "--verb=get",
            "--resource=configmaps",
            "-n",
            "team-b",
        ],
    );
    assert!(ok, "{o}{e}");
    // bob got edit in team-b from jane.
    eventually("bob may create crontabs in team-b", || {
        k(
            Some(BOB),
            &["auth", "can-i", "create", "crontabs", "-n", "team-b"],
        )
        .1
        .trim()
            == "yes"
    });

    // Impersonation: the admin (system:masters) may be anyone; jane only whom RBAC lets her.
    let (ok, o, e) = k(
        None,
        &[
            "--as",
            "bob",
            "--as-group",
            "dev",
            "auth",
            "whoami",
            "-o",
            "json",
        ],
    );
    assert!(ok, "{o}{e}");
    let v: serde_json::Value = serde_json::from_str(&o).unwrap();
    assert_eq!(v["status"]["userInfo"]["username"], "bob");
    assert_eq!(
        v["status"]["userInfo"]["groups"],
        serde_json::json!(["dev", "system:authenticated"])
    );
    let (ok, _, e) = k(None, &["--as", "bob", "get", "crontabs", "-n", "team-a"]);
    assert!(
        !ok && e.contains("User \"bob\" cannot list resource \"crontabs\""),
        "{e}"
    );
    let (ok, _, e) = k(
        Some(JANE),
        &["--as", "bob", "get", "configmaps", "-n", "team-b"],
    );
    assert!(!ok);
    assert!(
        e.contains("users \"bob\" is forbidden: User \"jane\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"),
        "{e}"
    );
    let imp = s.path("impersonate-bob.yaml");
    std::fs::write(
        &imp,
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: impersonate-bob\nrules:\n- apiGroups: [\"\"]\n  resources: [\"users\"]\n  verbs: [\"impersonate\"]\n  resourceNames: [\"bob\"]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: jane-impersonates-bob\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: impersonate-bob\nsubjects:\n- apiGroup: rbac.authorization.k8s.io\n  kind: User\n  name: jane\n",
    )
    .unwrap();
    let (ok, o, e) = k(None, &["apply", "-f", &imp.to_string_lossy()]);
    assert!(ok, "{o}{e}");
    eventually("jane may act as bob", || {
        k(
            Some(JANE),
            &["--as", "bob", "get", "configmaps", "-n", "team-b"],
        )
        .0
    });
    // ... as bob only, and not with a group she may not impersonate.
    let (ok, _, e) = k(
        Some(JANE),
        &["--as", "carol", "get", "configmaps", "-n", "team-b"],
    );
    assert!(!ok && e.contains("users \"carol\" is forbidden"), "{e}");
    let (ok, _, e) = k(
        Some(JANE),
        &[
            "--as",
            "bob",
            "--as-group",
            "system:masters",
            "get",
            "configmaps",
            "-n",
            "team-b",
        ],
    );
    assert!(
        !ok && e.contains("groups \"system:masters\" is forbidden"),
        "{e}"
    );

    // Every kubectl here: the same 403 text and can-i answers.
    for kk in &ks {
        let (ok, _, e) = s.kubectl(kk, Some(BOB), &["get", "crontabs", "-n", "team-a"]);
        assert!(!ok, "{}", kk.display());
        assert!(
            e.contains("crontabs.stable.example.com is forbidden: User \"bob\" cannot list resource \"crontabs\" in API group \"stable.example.com\" in the namespace \"team-a\""),
            "{}: {e}",
            kk.display()
        );
        let (_, o, _) = s.kubectl(
            kk,
            Some(BOB),
            &["auth", "can-i", "delete", "crontabs", "-n", "team-b"],
        );
        assert_eq!(o.trim(), "yes", "{}", kk.display());
        let (_, o, _) = s.kubectl(
            kk,
            Some(BOB),
            &["auth", "can-i", "delete", "crontabs", "-n", "team-a"],
        );
        assert_eq!(o.trim(), "no", "{}", kk.display());
    }
}

#[test]
fn service_account_tokens_from_the_token_request_api() {
    let ks = kubectls();
    let newest = ks.last().expect("a kubectl");
    let s = Secure::start();
    s.setup_crd_and_namespaces(&["team-a"]);
    let k = |token: Option<&str>, args: &[&str]| s.kubectl(newest, token, args);
    for args in [
        &["create", "serviceaccount", "builder", "-n", "team-a"][..],
        &[
            "create",
            "rolebinding",
            "builder-edit",
            "--clusterrole=edit",
            "--serviceaccount=team-a:builder",
            "-n",
            "team-a",
        ],
    ] {
        let (ok, o, e) = k(None, args);
        assert!(ok, "{args:?}: {o}{e}");
    }
    // Discovery lists the TokenRequest subresource (a signing key is configured).
    let (ok, o, e) = k(None, &["api-resources", "--api-group="]);
    assert!(ok, "{o}{e}");
    let (code, v1) = s.call(None, "GET", "/api/v1", None);
    assert_eq!(code, 200);
    assert!(
        v1["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "serviceaccounts/token" && r["kind"] == "TokenRequest"),
        "{v1}"
    );
    // `kubectl create token` (TokenRequest, sent as protobuf).
    let (ok, o, e) = k(None, &["create", "token", "builder", "-n", "team-a"]);
    assert!(ok, "{o}{e}");
    let token = o.trim().to_string();
    assert_eq!(token.split('.').count(), 3, "{token}");
    let cms = "/api/v1/namespaces/team-a/configmaps";
    eventually("the token works", || {
        s.call(Some(&token), "GET", cms, None).0 == 200
    });
    // boundObjectRef: a token bound to a Secret works while that Secret exists.
    let token_path = "/api/v1/namespaces/team-a/serviceaccounts/builder/token";
    let request = |r: serde_json::Value| {
        let body = serde_json::json!({"apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest", "spec": {"boundObjectRef": r}});
        s.call(None, "POST", token_path, Some(&body.to_string()))
    };
    let secret = s.admin(
        "POST",
        "/api/v1/namespaces/team-a/secrets",
        serde_json::json!({"metadata": {"name": "bind-me"}}),
    );
    let (code, v) = request(serde_json::json!({"apiVersion": "v1", "kind": "Secret",
        "name": "bind-me", "uid": secret["metadata"]["uid"]}));
    assert_eq!(code, 201, "{v}");
    let bound = v["status"]["token"].as_str().unwrap().to_string();
    assert_eq!(s.call(Some(&bound), "GET", cms, None).0, 200);
    s.admin(
        "DELETE",
        "/api/v1/namespaces/team-a/secrets/bind-me",
        serde_json::json!({}),
    );
    let (code, v) = s.call(Some(&bound), "GET", cms, None);
    assert_eq!(code, 401, "the bound Secret is gone: {v}");
    assert_eq!(
        s.call(Some(&token), "GET", cms, None).0,
        200,
        "unbound tokens are unaffected"
    );
    for (r, want_code, want) in [
        (
            serde_json::json!({"apiVersion": "v1", "kind": "Secret", "name": "bind-me"}),
            404,
            "secrets \"bind-me\" not found",
        ),
        (
            serde_json::json!({"apiVersion": "v1", "kind": "Pod", "name": "p"}),
            404,
            "pods \"p\" not found",
        ),
        (
            serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}),
            400,
            "cannot bind token for object of type apps/v1, Kind=Deployment",
        ),
    ] {
        let (code, v) = request(r);
        assert_eq!(code, want_code, "{v}");
        assert_eq!(v["message"], want, "{v}");
    }
    s.admin(
        "POST",
        "/api/v1/namespaces/team-a/secrets",
        serde_json::json!({"metadata": {"name": "bind-me"}}),
    );
    let (code, v) = request(serde_json::json!({"apiVersion": "v1", "kind": "Secret",
        "name": "bind-me", "uid": secret["metadata"]["uid"]}));
    assert_eq!(code, 409, "a recreated Secret: {v}");
    // kubectl's flags for it (the TokenRequest travels as protobuf).
    let (ok, o, e) = k(
        None,
        &[
            "create",
            "token",
            "builder",
            "-n",
            "team-a",
            "--bound-object-kind",
            "Secret",
            "--bound-object-name",
            "bind-me",
        ],
    );
    assert!(ok, "{o}{e}");
    assert_eq!(s.call(Some(o.trim()), "GET", cms, None).0, 200);
    s.admin(
        "DELETE",
        "/api/v1/namespaces/team-a/secrets/bind-me",
        serde_json::json!({}),
    );
    assert_eq!(
        s.call(Some(o.trim()), "GET", cms, None).0,
        401,
        "kubectl's bound token ends with its Secret"
    );
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .starts_with("Operation cannot be fulfilled on Secret \"bind-me\": the UID in the bound object reference"),
        "{v}"
    );
    // Every kubectl with the token; whoami names the service account.
    for kk in &ks {
        let (ok, o, e) = s.kubectl(kk, Some(&token), &["get", "configmaps", "-n", "team-a"]);
        assert!(ok, "{}: {o}{e}", kk.display());
    }
    let (ok, o, e) = k(Some(&token), &["auth", "whoami", "-o", "json"]);
    assert!(ok, "{o}{e}");
    let v: serde_json::Value = serde_json::from_str(&o).unwrap();
    assert_eq!(
        v["status"]["userInfo"]["username"],
        "system:serviceaccount:team-a:builder"
    );
    assert_eq!(
        v["status"]["userInfo"]["groups"],
        serde_json::json!([
            "system:serviceaccounts",
            "system:serviceaccounts:team-a",
            "system:authenticated"
        ])
    );
    // What edit does not grant is still refused, with upstream's text.
    let (code, v) = s.call(Some(&token), "GET", "/api/v1/namespaces", None);
    assert_eq!(code, 403, "{v}");
    assert_eq!(
        v["message"],
        "namespaces is forbidden: User \"system:serviceaccount:team-a:builder\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope"
    );
    // The token is its tenant's only: anywhere else it authenticates no one.
    let (code, v) = s.call(Some(&token), "GET", &format!("/clusters/other{cms}"), None);
    assert_eq!(
        (code, &v["reason"]),
        (401, &serde_json::json!("Unauthorized")),
        "{v}"
    );
    // kube-rs with the token.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        use k8s_openapi::api::core::v1::ConfigMap;
        let kc = kube::config::Kubeconfig::read_from(s.path("bare")).unwrap();
        let mut cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap();
        cfg.auth_info = kube::config::AuthInfo {
            token: Some(token.clone().into()),
            ..Default::default()
        };
        let api: kube::Api<ConfigMap> =
            kube::Api::namespaced(kube::Client::try_from(cfg).unwrap(), "team-a");
        api.list(&Default::default()).await.unwrap();
    });
    // The Python client with the token.
    let ca = s.path("ca.crt");
    std::fs::write(&ca, s.pki.ca_pem()).unwrap();
    let script = format!("{}/python/sa_token.py", env!("CARGO_MANIFEST_DIR"));
    for (py, ver) in crdplane_tests::python_interpreters() {
        let out = Command::new(&py)
            .arg(&script)
            .arg(&ca)
            .args([s.stack.gateway.as_str(), token.as_str(), "team-a"])
            .output()
            .unwrap();
        let (o, e) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(
            out.status.success() && o.contains("all checks passed"),
            "{py} (kubernetes {ver}):\n{o}{e}"
        );
        // Each interpreter makes the same ConfigMap: remove it for the next.
        s.call(None, "DELETE", &format!("{cms}/from-py-sa"), None);
    }
    // TokenRequest's own rules.
    let tr = |secs: i64| {
        serde_json::json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": secs}})
        .to_string()
    };
    let (code, v) = s.call(
        None,
        "POST",
        "/api/v1/namespaces/team-a/serviceaccounts/builder/token",
        Some(&tr(60)),
    );
    assert_eq!(code, 422, "{v}");
    assert!(
        v["message"].as_str().unwrap().ends_with("spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes"),
        "{v}"
    );
    let (code, v) = s.call(
        None,
        "POST",
        "/api/v1/namespaces/team-a/serviceaccounts/nobody/token",
        Some(&tr(600)),
    );
    assert_eq!(
        (code, &v["message"]),
        (
            404,
            &serde_json::json!("serviceaccounts \"nobody\" not found")
        ),
        "{v}"
    );
    // Not a token of ours, and a tampered one.
    assert_eq!(s.call(Some("a.b.c"), "GET", cms, None).0, 401);
    let mut forged = token.clone();
    forged.truncate(forged.len() - 4);
    forged.push_str("AAAA");
    assert_eq!(s.call(Some(&forged), "GET", cms, None).0, 401);
    // Deleting the account revokes its tokens.
    let (ok, o, e) = k(
        None,
        &["delete", "serviceaccount", "builder", "-n", "team-a"],
    );
    assert!(ok, "{o}{e}");
    eventually("the token stops working", || {
        s.call(Some(&token), "GET", cms, None).0 == 401
    });
}

/// One request of the isolation matrix: method, path under the tenant prefix, body.
type Probe = (&'static str, String, Option<String>);

/// Every verb on every path form of one tenant's API (data, not code: add rows here).
fn probes() -> Vec<Probe> {
    let ct = serde_json::json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
        "metadata": {"name": "ct1", "namespace": "team"}, "spec": {"cronSpec": "* * * * */5", "replicas": 1}})
    .to_string();
    let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cm1", "namespace": "team"}, "data": {"k": "v"}})
    .to_string();
    let ns =
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
            .to_string();
    let crd_name =
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.stable.example.com";
    let ssar = serde_json::json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"namespace": "team", "verb": "list", "resource": "configmaps"}}})
    .to_string();
    let patch = Some("{}".to_string());
    // (collection, object, body of a write)
    let families: Vec<(String, String, String)> = vec![
        (
            "/api/v1/namespaces".into(),
            "/api/v1/namespaces/team".into(),
            ns,
        ),
        (
            "/api/v1/namespaces/team/configmaps".into(),
            "/api/v1/namespaces/team/configmaps/cm1".into(),
            cm,
        ),
        (
            "/apis/stable.example.com/v1/namespaces/team/crontabs".into(),
            "/apis/stable.example.com/v1/namespaces/team/crontabs/ct1".into(),
            ct.clone(),
        ),
        (
            "/apis/stable.example.com/v1/crontabs".into(),
            "/apis/stable.example.com/v1/namespaces/team/crontabs/ct1/status".into(),
            ct.clone(),
        ),
        (
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions".into(),
            crd_name.into(),
            "{}".into(),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings".into(),
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/cluster-admin".into(),
            "{}".into(),
        ),
        (
            "/api/v1/namespaces/team/serviceaccounts".into(),
            "/api/v1/namespaces/team/serviceaccounts/default".into(),
            "{}".into(),
        ),
    ];
    let mut out: Vec<Probe> = Vec::new();
    for (coll, obj, body) in families {
        out.push(("GET", obj.clone(), None));
        out.push(("GET", coll.clone(), None));
        out.push(("GET", format!("{coll}?watch=true&timeoutSeconds=1"), None));
        out.push(("POST", coll.clone(), Some(body.clone())));
        out.push(("PUT", obj.clone(), Some(body)));
        out.push(("PATCH", obj.clone(), patch.clone()));
        out.push(("DELETE", obj, None));
        out.push(("DELETE", coll, None));
    }
    out.push((
        "PUT",
        "/apis/stable.example.com/v1/namespaces/team/crontabs/ct1/scale".into(),
        Some("{}".into()),
    ));
    out.push((
        "POST",
        "/api/v1/namespaces/team/serviceaccounts/default/token".into(),
        Some("{}".into()),
    ));
    out.push((
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews".into(),
        Some(ssar),
    ));
    for path in [
        "/api",
        "/api/v1",
        "/apis",
        "/apis/stable.example.com/v1",
        "/openapi/v2",
        "/openapi/v3",
        "/metrics",
    ] {
        out.push(("GET", path.into(), None));
    }
    out
}

#[test]
fn isolation_matrix_identities_of_one_tenant_get_nothing_from_another() {
    let s = Secure::start();
    let a = "/clusters/tenant-a";
    let b = "/clusters/tenant-b";
    // Both tenants hold the same kinds of objects; tenant A's identities are cluster-admin
    // there (the strongest grant a tenant can give).
    let mut crd: serde_json::Value = serde_saphyr::from_str(CRD).unwrap();
    crd["spec"]["versions"][0]["subresources"] = serde_json::json!({"status": {},
        "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}});
    for t in [a, b] {
        s.admin(
            "POST",
            &format!("{t}/apis/apiextensions.k8s.io/v1/customresourcedefinitions"),
            crd.clone(),
        );
        s.admin(
            "POST",
            &format!("{t}/api/v1/namespaces"),
            serde_json::json!({"metadata": {"name": "team"}}),
        );
        s.admin(
            "POST",
            &format!("{t}/api/v1/namespaces/team/serviceaccounts"),
            serde_json::json!({"metadata": {"name": "default"}}),
        );
        s.admin(
            "POST",
            &format!("{t}/api/v1/namespaces/team/serviceaccounts"),
            serde_json::json!({"metadata": {"name": "builder"}}),
        );
        s.admin(
            "POST",
            &format!("{t}/api/v1/namespaces/team/configmaps"),
            serde_json::json!({"metadata": {"name": "cm1"}, "data": {"k": "v"}}),
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        while s
            .call(
                None,
                "GET",
                &format!("{t}/apis/stable.example.com/v1/crontabs"),
                None,
            )
            .0
            != 200
        {
            assert!(Instant::now() < deadline, "CRD never served in {t}");
            std::thread::sleep(Duration::from_millis(50));
        }
        s.admin(
            "POST",
            &format!("{t}/apis/stable.example.com/v1/namespaces/team/crontabs"),
            serde_json::json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
                "metadata": {"name": "ct1"}, "spec": {"cronSpec": "* * * * */5", "replicas": 1}}),
        );
    }
    let mut grant = binding(
        "ClusterRoleBinding",
        "a-admins",
        None,
        "ClusterRole",
        "cluster-admin",
        "jane",
    );
    grant["subjects"] = serde_json::json!([
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "jane"},
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "carol"},
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "oidc:dana"},
        {"kind": "ServiceAccount", "name": "builder", "namespace": "team"}
    ]);
    s.admin(
        "POST",
        &format!("{a}/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"),
        grant,
    );
    let sa_token = s.admin(
        "POST",
        &format!("{a}/api/v1/namespaces/team/serviceaccounts/builder/token"),
        serde_json::json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}),
    )["status"]["token"]
        .as_str()
        .unwrap()
        .to_string();
    let (carol_cert, carol_key) = s.pki.issue_client("carol", &[]).unwrap();
    let carol = TlsClient::new(s.pki.ca_pem(), Some((&carol_cert, &carol_key))).unwrap();
    let nobody = TlsClient::new(s.pki.ca_pem(), None).unwrap();
    // An OIDC user: authenticated everywhere (its issuer knows no tenants), bound in A only.
    let oidc_token = s.oidc_token("dana");
    // Each identity works in tenant A (so a refusal below is the tenant boundary, not a
    // broken credential).
    let send = |who: &str, method: &str, url: &str, body: Option<&str>| {
        let bearer;
        let mut headers = vec![(
            "Content-Type",
            if method == "PATCH" {
                "application/merge-patch+json"
            } else {
                "application/json"
            },
        )];
        let client = match who {
            "carol" => &carol,
            _ => {
                bearer = format!(
                    "Bearer {}",
                    match who {
                        "jane" => JANE.to_string(),
                        "oidc:dana" => oidc_token.clone(),
                        _ => sa_token.clone(),
                    }
                );
                headers.push(("Authorization", &bearer));
                &nobody
            }
        };
        let (code, _, body) = client.request(method, url, &headers, body).unwrap();
        (code, body)
    };
    let who = ["jane", "carol", "builder", "oidc:dana"];
    for w in who {
        eventually(&format!("{w} works in tenant A"), || {
            send(
                w,
                "GET",
                &s.url(&format!("{a}/api/v1/namespaces/team/configmaps")),
                None,
            )
            .0 == 200
        });
    }
    let before: Vec<String> = [b, ""]
        .iter()
        .map(|t| {
            s.call(
                None,
                "GET",
                &format!("{t}/api/v1/namespaces/team/configmaps"),
                None,
            )
            .1
            .to_string()
        })
        .collect();
    let mut refusals = 0;
    // A plain path goes to the identity's own tenant: the configured default for users,
    // tenant A for A's service account, whose plain paths are checked to reach A below.
    let victims = |w: &str| if w == "builder" { vec![b] } else { vec![b, ""] };
    for w in who {
        for (method, path, body) in probes() {
            for t in victims(w) {
                let url = s.url(&format!("{t}{path}"));
                let (code, text) = send(w, method, &url, body.as_deref());
                assert!(
                    code == 401 || code == 403,
                    "{w} {method} {url}: {code} {text}"
                );
                let v: serde_json::Value = serde_json::from_str(&text)
                    .unwrap_or_else(|_| panic!("{w} {method} {url}: not a Status: {text}"));
                assert_eq!(v["kind"], "Status", "{text}");
                assert_eq!(
                    v["reason"],
                    if code == 401 {
                        "Unauthorized"
                    } else {
                        "Forbidden"
                    },
                    "{text}"
                );
                // The service account's token authenticates no one outside tenant A.
                assert_eq!(w == "builder", code == 401, "{w} {method} {url}: {code}");
                refusals += 1;
            }
        }
    }
    eprintln!("isolation matrix: {refusals} requests, 0 successes");
    let own = |t: &str| {
        let (code, text) = send(
            "builder",
            "GET",
            &s.url(&format!("{t}/api/v1/namespaces/team")),
            None,
        );
        assert_eq!(code, 200, "{text}");
        serde_json::from_str::<serde_json::Value>(&text).unwrap()["metadata"]["uid"].clone()
    };
    assert_eq!(
        own(""),
        own(a),
        "the service account's plain paths reach its tenant"
    );
    // Tenants that do not exist: refused as any tenant of others is (403, or 401 for
    // the service account's token), 404 for the platform admin, and nothing is stored.
    for w in who {
        for path in ["/api/v1/namespaces", "/api/v1/namespaces/team/configmaps"] {
            let url = s.url(&format!("/clusters/made-up-{}{path}", w.replace(':', "-")));
            let (code, text) = send(w, "GET", &url, None);
            assert!(code == 401 || code == 403, "{w} {url}: {code} {text}");
        }
    }
    let (code, v) = s.call(
        None,
        "GET",
        "/clusters/made-up-admin/api/v1/namespaces",
        None,
    );
    assert_eq!(code, 404, "{v}");
    let socket = &s.stack.redis.as_ref().unwrap().socket;
    let keys = std::process::Command::new("redis-cli")
        .arg("-s")
        .arg(socket)
        .args(["--scan", "--pattern", "*made-up-*"])
        .output()
        .unwrap();
    assert!(keys.status.success());
    let keys = String::from_utf8_lossy(&keys.stdout);
    assert!(
        keys.trim().is_empty(),
        "requests for unknown tenants stored keys: {keys}"
    );
    // cluster-admin of tenant A may impersonate anyone there, but not the platform's admin
    // group: that would open every tenant.
    let escape = |t: &str| {
        let bearer = format!("Bearer {JANE}");
        let headers = [
            ("Authorization", bearer.as_str()),
            ("Impersonate-User", "jane"),
            ("Impersonate-Group", "system:masters"),
        ];
        nobody
            .request(
                "GET",
                &s.url(&format!("{t}/api/v1/namespaces")),
                &headers,
                None,
            )
            .unwrap()
    };
    for t in [a, b] {
        let (code, _, text) = escape(t);
        assert_eq!(code, 403, "{t}: {text}");
    }
    {
        // In A the user part passes (cluster-admin holds impersonate); the group does not.
        let (_, _, text) = escape(a);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            v["message"],
            "groups \"system:masters\" is forbidden: User \"jane\" cannot impersonate resource \"groups\" in API group \"\" at the cluster scope"
        );
    }
    // Nothing of B (or of the default tenant) changed.
    let after: Vec<String> = [b, ""]
        .iter()
        .map(|t| {
            s.call(
                None,
                "GET",
                &format!("{t}/api/v1/namespaces/team/configmaps"),
                None,
            )
            .1
            .to_string()
        })
        .collect();
    assert_eq!(before, after);
    let (_, v) = s.call(
        None,
        "GET",
        &format!("{b}/apis/stable.example.com/v1/namespaces/team/crontabs/ct1"),
        None,
    );
    assert_eq!(v["metadata"]["generation"], 1, "{v}");

    // Continue tokens and resourceVersions of A mean nothing in B, even to the platform's
    // admin (who may read both): A's configmaps get ahead of B's in revisions, then A's
    // token and revision are presented to B.
    let cms = |t: &str| format!("{t}/api/v1/namespaces/team/configmaps");
    for i in 0..20 {
        s.admin(
            "POST",
            &cms(a),
            serde_json::json!({"metadata": {"name": format!("filler-{i}")}}),
        );
    }
    let (code, page) = s.call(None, "GET", &format!("{}?limit=1", cms(a)), None);
    assert_eq!(code, 200, "{page}");
    let token = page["metadata"]["continue"].as_str().unwrap().to_string();
    let rv_a = page["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, v) = s.call(
        None,
        "GET",
        &format!("{}?limit=1&continue={token}", cms(b)),
        None,
    );
    assert_eq!(code, 400, "A's continue token in B: {v}");
    assert_eq!(v["reason"], "BadRequest", "{v}");
    let (code, v) = s.call(
        None,
        "GET",
        &format!(
            "{}?resourceVersion={rv_a}&resourceVersionMatch=NotOlderThan",
            cms(b)
        ),
        None,
    );
    assert_eq!(code, 504, "A's resourceVersion is in B's future: {v}");
    assert_eq!(v["reason"], "Timeout", "{v}");
    assert!(v.to_string().contains("Too large resource version"), "{v}");
    // The same token and revision serve A.
    let (code, v) = s.call(
        None,
        "GET",
        &format!("{}?limit=1&continue={token}", cms(a)),
        None,
    );
    assert_eq!(code, 200, "{v}");

    // A watch of A (jane, tenant A's cluster-admin) sees A's events and never B's, written
    // in the same second.
    let watch_url = s.url(&format!(
        "{}?watch=true&resourceVersion={rv_a}&timeoutSeconds=2",
        cms(a)
    ));
    let watcher = {
        let ca = s.pki.ca_pem().to_string();
        std::thread::spawn(move || {
            let bearer = format!("Bearer {JANE}");
            TlsClient::new(&ca, None)
                .unwrap()
                .request("GET", &watch_url, &[("Authorization", &bearer)], None)
                .unwrap()
        })
    };
    s.admin(
        "POST",
        &cms(b),
        serde_json::json!({"metadata": {"name": "b-event"}}),
    );
    s.admin(
        "POST",
        &cms(a),
        serde_json::json!({"metadata": {"name": "a-event"}}),
    );
    let (code, _, events) = watcher.join().unwrap();
    assert_eq!(code, 200, "{events}");
    assert!(events.contains("\"a-event\""), "{events}");
    assert!(
        !events.contains("b-event"),
        "B's event reached A's watch: {events}"
    );
}
