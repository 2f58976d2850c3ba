//! Authentication over TLS as `crdplane up` sets it up: the launcher's PKI (CA, serving
//! certificate, admin client certificate `crdplane-admin` in `system:masters`), a gateway
//! serving HTTPS with `--client-ca-file`, `--token-auth-file`, `--anonymous-auth=false` and
//! RBAC (the token user is bound to cluster-admin here), and a kubeconfig written by the
//! launcher. Checked with raw HTTPS requests (every
//! credential outcome and upstream's 401 Status), every kubectl on the machine (Go clients
//! negotiate HTTP/2 over TLS), kube-rs, the Python client (HTTP/1.1 over TLS, a watch
//! included) and client-node 2 with the generated kubeconfig unmodified; a serving
//! certificate renewed on disk is served to new connections without a restart.

use crdplane::{Pki, Service, kubeconfig_yaml_tls};
use crdplane_tests::{Stack, TlsClient, kubectls};
use std::path::{Path, PathBuf};
use std::process::Command;

const TOKEN: &str = "jane-0123456789abcdef";
const UNAUTHORIZED: &str = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"Unauthorized\",\"reason\":\"Unauthorized\",\"code\":401}\n";

struct Secure {
    stack: Stack,
    pki: Pki,
    dir: tempfile::TempDir,
}

impl Secure {
    /// A stack serving TLS with the launcher's PKI and a token file for `jane`; the stack's
    /// kubeconfig is the launcher's (admin client certificate).
    fn start(storage_args: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let pki = Pki::ensure(&dir.path().join("pki"), &[]).unwrap();
        let tokens = dir.path().join("tokens.csv");
        std::fs::write(&tokens, format!("{TOKEN},jane,1001,\"dev,ops\"\n")).unwrap();
        let tokens = tokens.to_string_lossy().to_string();
        let stack = Stack::start_with_redis_using(|b| {
            b.tls(&pki)
                .args(Service::Gateway, &["--token-auth-file", &tokens])
                .args(Service::Storage, storage_args)
        })
        .unwrap();
        assert!(stack.gateway.starts_with("https://"), "{}", stack.gateway);
        std::fs::write(&stack.kubeconfig, kubeconfig_for(&stack.gateway, &pki)).unwrap();
        let s = Self { stack, pki, dir };
        // The gateway authorizes with RBAC (as `crdplane up` runs it); these tests are
        // about who a request is, so jane may do everything (tests/tests/rbac.rs covers
        // what she may do otherwise).
        s.grant_jane("");
        s
    }

    /// Binds jane to cluster-admin in the tenant of path prefix `prefix` ("" or
    /// `/clusters/<t>`): RBAC is per tenant.
    fn grant_jane(&self, prefix: &str) {
        let binding = serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "jane-cluster-admin"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "jane"}]
        })
        .to_string();
        let url = format!(
            "{}{prefix}/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            self.stack.gateway
        );
        let (code, _, body) = self
            .admin()
            .request(
                "POST",
                &url,
                &[("Content-Type", "application/json")],
                Some(&binding),
            )
            .unwrap();
        assert_eq!(code, 201, "{body}");
    }

    fn client(&self, cert: Option<(&str, &str)>) -> TlsClient {
        TlsClient::new(self.pki.ca_pem(), cert).unwrap()
    }

    fn admin(&self) -> TlsClient {
        self.client(Some((self.pki.admin_cert_pem(), self.pki.admin_key_pem())))
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

fn kubeconfig_for(server: &str, pki: &Pki) -> String {
    kubeconfig_yaml_tls(
        server,
        pki.ca_pem(),
        pki.admin_cert_pem(),
        pki.admin_key_pem(),
    )
}

#[test]
fn every_credential_gets_upstreams_answer() {
    let s = Secure::start(&[]);
    let g = &s.stack.gateway;
    let nobody = s.client(None);
    let url = format!("{g}/api/v1/namespaces");
    // No credentials (anonymous requests are refused here), a wrong token, a basic
    // credential (no basic authenticator): 401 with upstream's Status.
    for headers in [
        vec![],
        vec![("Authorization", "Bearer not-a-token")],
        vec![("Authorization", "Basic YWRtaW46YWRtaW4=")],
    ] {
        let (code, head, body) = nobody.request("GET", &url, &headers, None).unwrap();
        assert_eq!((code, body.as_str()), (401, UNAUTHORIZED), "{headers:?}");
        assert!(
            head.to_ascii_lowercase()
                .contains("content-type: application/json"),
            "{head}"
        );
    }
    let (code, _, _) = nobody
        .request("GET", &format!("{g}/readyz"), &[], None)
        .unwrap();
    assert_eq!(
        code, 401,
        "no anonymous health checks with --anonymous-auth=false"
    );
    // The token file's user.
    let bearer = format!("Bearer {TOKEN}");
    let (code, _, body) = nobody
        .request("GET", &url, &[("Authorization", &bearer)], None)
        .unwrap();
    assert_eq!(code, 200, "{body}");
    // The admin's client certificate; a valid certificate wins over a bad token.
    let admin = s.admin();
    for headers in [vec![], vec![("Authorization", "Bearer not-a-token")]] {
        let (code, _, body) = admin.request("GET", &url, &headers, None).unwrap();
        assert_eq!(code, 200, "{headers:?} {body}");
    }
    // A client certificate issued by our CA for another user works too.
    let (cert, key) = s.pki.issue_client("jane", &["dev"]).unwrap();
    let (code, _, body) = s
        .client(Some((&cert, &key)))
        .request("GET", &url, &[], None)
        .unwrap();
    assert_eq!(code, 200, "{body}");
    // A certificate from another CA passes the handshake but not the authenticator.
    let other = tempfile::tempdir().unwrap();
    let foreign = Pki::ensure(other.path(), &[]).unwrap();
    let (code, _, body) = s
        .client(Some((foreign.admin_cert_pem(), foreign.admin_key_pem())))
        .request("GET", &url, &[], None)
        .unwrap();
    assert_eq!((code, body.as_str()), (401, UNAUTHORIZED));
    // `kubectl auth whoami`'s request: the token's user, as the authenticator saw it.
    let review = format!("{g}/apis/authentication.k8s.io/v1/selfsubjectreviews");
    let (code, _, body) = nobody
        .request(
            "POST",
            &review,
            &[
                ("Authorization", &bearer),
                ("Content-Type", "application/json"),
            ],
            Some(r#"{"kind":"SelfSubjectReview","apiVersion":"authentication.k8s.io/v1","metadata":{"creationTimestamp":null},"status":{"userInfo":{}}}"#),
        )
        .unwrap();
    assert_eq!(code, 201, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["kind"], "SelfSubjectReview");
    assert_eq!(
        v["status"]["userInfo"],
        serde_json::json!({"username": "jane", "uid": "1001",
            "groups": ["dev", "ops", "system:authenticated"]})
    );
    assert!(v["metadata"]["creationTimestamp"].is_string(), "{v}");
    let (code, _, body) = nobody
        .request("GET", &review, &[("Authorization", &bearer)], None)
        .unwrap();
    assert_eq!(code, 405, "{body}");
    // Plain HTTP on the TLS port is not served: no HTTP status comes back at all (a 401
    // would mean the request reached the edge unencrypted).
    let plain = g.replacen("https://", "http://", 1);
    let answered = crdplane_tests::http_get(&format!("{plain}/readyz"))
        .map(|(c, _)| c)
        .unwrap_or(0);
    assert_eq!(answered, 0);
}

#[test]
fn kubectl_with_the_generated_kubeconfig_and_with_tokens() {
    let ks = kubectls();
    assert!(!ks.is_empty(), "no kubectl found");
    let s = Secure::start(&[]);
    let crd = s.path("crd.yaml");
    std::fs::write(&crd, include_str!("../testdata/crontab-crd.yaml")).unwrap();
    let ct = s.path("ct.yaml");
    std::fs::write(&ct, include_str!("../testdata/my-crontab.yaml")).unwrap();
    // A kubeconfig that trusts the CA but holds no client certificate.
    let bare = s.path("bare-kubeconfig");
    std::fs::write(
        &bare,
        kubeconfig_for(&s.stack.gateway, &s.pki)
            .lines()
            .filter(|l| !l.contains("client-certificate-data") && !l.contains("client-key-data"))
            .map(|l| format!("{l}\n"))
            .collect::<String>()
            .replace("  user:\n", "  user: {}\n"),
    )
    .unwrap();
    let run = |k: &Path, kubeconfig: &Path, args: &[&str]| {
        let home = s
            .dir
            .path()
            .join(format!("home-{}", k.file_name().unwrap().to_string_lossy()));
        let o = Command::new(k)
            .args(args)
            .env("KUBECONFIG", kubeconfig)
            .env("HOME", &home)
            .output()
            .unwrap();
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let crd = crd.to_string_lossy().to_string();
    let ct = ct.to_string_lossy().to_string();
    let mut whoami_runs = 0;
    for (i, k) in ks.iter().enumerate() {
        eprintln!("== {}", k.display());
        let kc = &s.stack.kubeconfig;
        let (ok, o, e) = run(k, kc, &["apply", "-f", &crd]);
        assert!(ok || e.contains("AlreadyExists"), "{o}{e}");
        let (ok, o, e) = run(
            k,
            kc,
            &[
                "wait",
                "--for=condition=Established",
                "crd/crontabs.stable.example.com",
            ],
        );
        assert!(ok, "{o}{e}");
        let name = format!("ct-{i}");
        let mut yaml = std::fs::read_to_string(&ct).unwrap();
        yaml = yaml.replace("name: my-new-cron-object", &format!("name: {name}"));
        let mine = s.path(&format!("ct-{i}.yaml"));
        std::fs::write(&mine, yaml).unwrap();
        let (ok, o, e) = run(k, kc, &["apply", "-f", &mine.to_string_lossy()]);
        assert!(ok, "{o}{e}");
        let (ok, o, e) = run(k, kc, &["get", "crontabs", &name, "-o", "name"]);
        assert!(
            ok && o.contains(&format!("crontab.stable.example.com/{name}")),
            "{o}{e}"
        );
        // The token user from --token-auth-file.
        let (ok, o, e) = run(
            k,
            &bare,
            &["--token", TOKEN, "get", "crontabs", &name, "-o", "name"],
        );
        assert!(ok, "{o}{e}");
        // `kubectl auth whoami` (kubectl 1.28 and later) for both identities.
        let (ok, o, e) = run(k, kc, &["auth", "whoami"]);
        if !e.contains("unknown command \"whoami\"") {
            whoami_runs += 1;
            assert!(ok, "{o}{e}");
            assert!(o.contains("crdplane-admin"), "{o}");
            assert!(o.contains("[system:masters system:authenticated]"), "{o}");
            let (ok, o, e) = run(
                k,
                &bare,
                &["--token", TOKEN, "auth", "whoami", "-o", "json"],
            );
            assert!(ok, "{o}{e}");
            let v: serde_json::Value = serde_json::from_str(&o).unwrap();
            assert_eq!(v["status"]["userInfo"]["username"], "jane", "{o}");
            assert_eq!(v["status"]["userInfo"]["uid"], "1001", "{o}");
        }
        // A wrong token: kubectl's own words for a 401. (Without any credential kubectl
        // 1.20 prompts for a basic-auth password instead of sending the request; the raw
        // requests above cover that case.)
        let (ok, o, e) = run(k, &bare, &["--token", "wrong", "get", "namespaces"]);
        assert!(!ok, "{o}");
        assert!(
            e.contains("You must be logged in to the server (Unauthorized)"),
            "{e}"
        );
    }
    // The kubectl.1.N binaries here are new enough for `auth whoami`.
    if ks.iter().any(|k| {
        k.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("kubectl.1.3"))
    }) {
        assert!(whoami_runs > 0, "no kubectl ran auth whoami");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_with_the_generated_kubeconfig_and_a_token() {
    use k8s_openapi::api::core::v1::Namespace;
    use kube::api::{Api, ListParams};
    let s = tokio::task::spawn_blocking(|| Secure::start(&[]))
        .await
        .unwrap();
    let yaml = std::fs::read_to_string(&s.stack.kubeconfig).unwrap();
    let kc = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(cfg.clone()).unwrap();
    let ns: Api<Namespace> = Api::all(client);
    let names: Vec<String> = ns
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert!(names.contains(&"default".to_string()), "{names:?}");
    // The same cluster with a bearer token instead of the certificate, then a wrong one.
    for (token, ok) in [(TOKEN, true), ("wrong", false)] {
        let mut c = cfg.clone();
        c.auth_info = kube::config::AuthInfo {
            token: Some(token.to_string().into()),
            ..Default::default()
        };
        let ns: Api<Namespace> = Api::all(kube::Client::try_from(c).unwrap());
        match ns.list(&ListParams::default()).await {
            Ok(l) => assert!(ok && !l.items.is_empty()),
            Err(kube::Error::Api(e)) => {
                assert!(!ok);
                assert_eq!((e.code, e.reason.as_str()), (401, "Unauthorized"));
            }
            Err(e) => panic!("{token}: {e}"),
        }
    }
}

#[test]
fn python_client_over_https() {
    let pys = crdplane_tests::python_interpreters();
    if pys.is_empty() {
        eprintln!("skipping: no python3 with the kubernetes client");
        return;
    }
    let s = Secure::start(&[]);
    let ca = s.path("ca.crt");
    std::fs::write(&ca, s.pki.ca_pem()).unwrap();
    let script = format!("{}/python/tls_auth.py", env!("CARGO_MANIFEST_DIR"));
    for (i, (py, ver)) in pys.iter().enumerate() {
        // Each interpreter in its own tenant (its ConfigMap names would collide).
        let server = format!("{}/clusters/py{i}", s.stack.gateway);
        s.grant_jane(&format!("/clusters/py{i}"));
        let kc = s.path(&format!("kubeconfig-{i}"));
        std::fs::write(&kc, kubeconfig_for(&server, &s.pki)).unwrap();
        let out = Command::new(py)
            .arg(&script)
            .args([kc.as_path(), ca.as_path()])
            .args([server.as_str(), TOKEN])
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
    }
}

#[test]
fn a_renewed_serving_certificate_is_served_without_a_restart() {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let s = Secure::start(&[]);
    let admin = s.admin();
    let der = |pem: &str| {
        CertificateDer::from_pem_slice(pem.as_bytes())
            .unwrap()
            .to_vec()
    };
    let first = der(s.pki.serving_cert_pem());
    assert_eq!(admin.server_certificate(&s.stack.gateway).unwrap(), first);
    // The operator (here: the launcher's PKI, as a restart of `crdplane up` would) writes a
    // new pair over the files the gateway was started with.
    let renewed = Pki::ensure(s.pki.dir(), &[]).unwrap();
    let second = der(renewed.serving_cert_pem());
    assert_ne!(first, second);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if admin.server_certificate(&s.stack.gateway).unwrap() == second {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the new certificate was not served within 60 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    let url = format!("{}/api/v1/namespaces", s.stack.gateway);
    assert_eq!(admin.request("GET", &url, &[], None).unwrap().0, 200);
}
