//! OIDC / JWT bearer tokens (`--authentication-config`, kube-apiserver's structured
//! authentication configuration) through the real stack as `crdplane up` runs it (TLS, RBAC,
//! `--anonymous-auth=false`): tokens signed here with test keys whose JWKS comes (a) from a
//! file (crdplane's `jwksFile`) and (b) from an HTTPS discovery endpoint started by the test
//! on 127.0.0.1 with its own CA, given to the gateway as `certificateAuthority`. Checked
//! with raw HTTPS requests (upstream's 401 Status for every failure, the 403 text for what
//! the user is not bound to, SelfSubjectReview), kubectl 1.20 and the newest kubectl
//! (`--token`, `auth whoami`), and a key rotation on the discovery endpoint that a token of
//! the new key id picks up.

use crdplane::{Pki, Service, kubeconfig_yaml_tls};
use crdplane_tests::{JwtKey as Key, Stack, TlsClient, jwks, kubectls, unix_now};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const UNAUTHORIZED: &str = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"Unauthorized\",\"reason\":\"Unauthorized\",\"code\":401}\n";
const FILE_ISSUER: &str = "https://file-issuer.example.com";

fn now() -> i64 {
    unix_now()
}

/// An OIDC issuer on 127.0.0.1 over HTTPS: discovery document and a JWKS the test can
/// replace; counts JWKS fetches.
struct Issuer {
    url: String,
    ca_pem: String,
    jwks: Arc<Mutex<String>>,
    fetches: Arc<AtomicUsize>,
}

impl Issuer {
    fn start(keys: String) -> Self {
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
        let leaf_key = rcgen::KeyPair::generate().unwrap();
        let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
            .unwrap()
            .signed_by(&leaf_key, &rcgen::Issuer::new(ca, ca_key))
            .unwrap();
        let cfg = Arc::new(
            rustls::ServerConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into()),
            )
            .unwrap(),
        );
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!(
            "https://127.0.0.1:{}",
            listener.local_addr().unwrap().port()
        );
        let jwks = Arc::new(Mutex::new(keys));
        let fetches = Arc::new(AtomicUsize::new(0));
        let (u, j, f) = (url.clone(), jwks.clone(), fetches.clone());
        std::thread::spawn(move || {
            for sock in listener.incoming().flatten() {
                let (cfg, u, j, f) = (cfg.clone(), u.clone(), j.clone(), f.clone());
                std::thread::spawn(move || serve(sock, cfg, &u, &j, &f));
            }
        });
        Self {
            url,
            ca_pem,
            jwks,
            fetches,
        }
    }
}

/// One HTTPS request to the test issuer.
fn serve(
    sock: std::net::TcpStream,
    cfg: Arc<rustls::ServerConfig>,
    url: &str,
    jwks: &Mutex<String>,
    fetches: &AtomicUsize,
) {
    use std::io::{Read, Write};
    let _ = sock.set_read_timeout(Some(Duration::from_secs(10)));
    let Ok(conn) = rustls::ServerConnection::new(cfg) else {
        return;
    };
    let mut s = rustls::StreamOwned::new(conn, sock);
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let head = String::from_utf8_lossy(&head);
    let path = head.split(' ').nth(1).unwrap_or_default();
    let (status, body) = match path {
        "/.well-known/openid-configuration" => (
            "200 OK",
            json!({"issuer": url, "jwks_uri": format!("{url}/openid/v1/jwks")}).to_string(),
        ),
        "/openid/v1/jwks" => {
            fetches.fetch_add(1, Ordering::SeqCst);
            ("200 OK", jwks.lock().unwrap().clone())
        }
        _ => ("404 Not Found", "{}".into()),
    };
    let _ = write!(
        s,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = s.flush();
    s.conn.send_close_notify();
    let _ = s.flush();
}

/// The authentication configuration: the file issuer (prefixed `sub`, groups, uid, a
/// required `hd` claim) and the discovery issuer (`email`, no prefix).
fn authentication_config(issuer: &Issuer) -> String {
    let ca: String = issuer
        .ca_pem
        .lines()
        .map(|l| format!("      {l}\n"))
        .collect();
    format!(
        "apiVersion: apiserver.config.k8s.io/v1beta1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: {FILE_ISSUER}
    audiences: [crdplane]
    jwksFile: keys.json
  claimMappings:
    username: {{claim: sub, prefix: \"oidc:\"}}
    groups: {{claim: groups, prefix: \"oidc:\"}}
    uid: {{claim: uid}}
  claimValidationRules:
  - claim: hd
    requiredValue: example.com
- issuer:
    url: {}
    audiences: [crdplane, other]
    audienceMatchPolicy: MatchAny
    certificateAuthority: |
{ca}  claimMappings:
    username: {{claim: email, prefix: \"\"}}
",
        issuer.url
    )
}

/// Claims of a valid token of the file issuer for dana.
fn dana() -> Value {
    json!({"iss": FILE_ISSUER, "aud": ["crdplane"], "sub": "dana", "uid": "dana-1",
        "groups": ["dev"], "hd": "example.com", "iat": now(), "nbf": now(), "exp": now() + 600})
}

struct Setup {
    stack: Stack,
    pki: Pki,
    dir: tempfile::TempDir,
    issuer: Issuer,
    file_key: Key,
}

impl Setup {
    fn start(discovery_key: &Key) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let pki = Pki::ensure(&dir.path().join("pki"), &[]).unwrap();
        let issuer = Issuer::start(jwks(&[discovery_key]));
        let file_key = Key::new("file-1");
        std::fs::write(dir.path().join("keys.json"), jwks(&[&file_key])).unwrap();
        let cfg = dir.path().join("authn.yaml");
        std::fs::write(&cfg, authentication_config(&issuer)).unwrap();
        let cfg = cfg.to_string_lossy().to_string();
        let stack = Stack::start_with_redis_using(|b| {
            b.tls(&pki)
                .args(Service::Gateway, &["--authentication-config", &cfg])
        })
        .unwrap();
        let kc = kubeconfig_yaml_tls(
            &stack.gateway,
            pki.ca_pem(),
            pki.admin_cert_pem(),
            pki.admin_key_pem(),
        );
        std::fs::write(&stack.kubeconfig, &kc).unwrap();
        // A kubeconfig that trusts the CA and holds no credential (tokens come as flags).
        let bare: String = kc
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
            issuer,
            file_key,
        };
        // oidc:dana and erin@example.com may read the default namespace.
        for (name, user) in [
            ("dana-view", "oidc:dana"),
            ("erin-view", "erin@example.com"),
        ] {
            let (code, body) = s.call(
                None,
                "POST",
                "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
                Some(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                    "metadata": {"name": name},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]})
                .to_string()),
            );
            assert_eq!(code, 201, "{body}");
        }
        s
    }

    /// A raw request with a bearer token (None: the admin's client certificate).
    fn call(
        &self,
        token: Option<&str>,
        method: &str,
        path: &str,
        body: Option<String>,
    ) -> (u16, String) {
        let bearer = token.map(|t| format!("Bearer {t}"));
        let mut headers = vec![("Content-Type", "application/json")];
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
        let url = format!("{}{path}", self.stack.gateway);
        let (code, _, body) = client
            .request(method, &url, &headers, body.as_deref())
            .unwrap();
        (code, body)
    }

    fn kubectl(&self, k: &Path, token: &str, args: &[&str]) -> (bool, String, String) {
        let home = self
            .dir
            .path()
            .join(format!("home-{}", k.file_name().unwrap().to_string_lossy()));
        let o = Command::new(k)
            .arg("--token")
            .arg(token)
            .args(args)
            .env("KUBECONFIG", self.dir.path().join("bare"))
            .env("HOME", home)
            .output()
            .unwrap();
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }
}

/// Polls `f` until it holds, for at most `secs` seconds.
fn eventually(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(secs),
            "never within {secs} s: {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[test]
fn oidc_tokens_with_keys_from_a_file_and_from_discovery() {
    let discovery_key = Key::new("disc-1");
    let s = Setup::start(&discovery_key);
    let dana_token = s.file_key.sign(&dana());
    // The binding reaches the policy cache asynchronously.
    eventually("dana may list configmaps", 10, || {
        s.call(Some(&dana_token), "GET", CMS, None).0 == 200
    });
    // Who the gateway thinks dana is: the prefixed username and groups, the uid claim.
    let (code, body) = s.call(
        Some(&dana_token),
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        Some(r#"{"kind":"SelfSubjectReview","apiVersion":"authentication.k8s.io/v1"}"#.into()),
    );
    assert_eq!(code, 201, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v["status"]["userInfo"],
        json!({"username": "oidc:dana", "uid": "dana-1",
            "groups": ["oidc:dev", "system:authenticated"]})
    );
    // What dana is not bound to: upstream's 403.
    let (code, body) = s.call(
        Some(&dana_token),
        "GET",
        "/api/v1/namespaces/kube-system/configmaps",
        None,
    );
    assert_eq!(code, 403, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v["message"],
        "configmaps is forbidden: User \"oidc:dana\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"kube-system\""
    );
    // Every failing token: upstream's 401 Status, byte for byte.
    let with = |f: &dyn Fn(&mut Value)| {
        let mut c = dana();
        f(&mut c);
        c
    };
    let other_key = Key::new("file-1");
    let failing: Vec<(&str, String)> = vec![
        (
            "expired",
            s.file_key.sign(&with(&|c| c["exp"] = json!(now() - 10))),
        ),
        (
            "wrong audience",
            s.file_key
                .sign(&with(&|c| c["aud"] = json!(["someone-else"]))),
        ),
        (
            "unknown issuer",
            s.file_key
                .sign(&with(&|c| c["iss"] = json!("https://unknown.example.com"))),
        ),
        (
            "signed by another key of the same kid",
            other_key.sign(&dana()),
        ),
        ("tampered", {
            let mut t = dana_token.clone();
            t.truncate(t.len() - 4);
            t.push_str(if dana_token.ends_with("AAAA") {
                "BBBB"
            } else {
                "AAAA"
            });
            t
        }),
        (
            "failed claimValidationRule",
            s.file_key
                .sign(&with(&|c| c["hd"] = json!("evil.example.com"))),
        ),
        (
            "missing username claim",
            s.file_key.sign(&with(&|c| {
                c.as_object_mut().unwrap().remove("sub");
            })),
        ),
    ];
    for (case, token) in &failing {
        let (code, body) = s.call(Some(token), "GET", CMS, None);
        assert_eq!((code, body.as_str()), (401, UNAUTHORIZED), "{case}");
    }
    // kubectl 1.20 and the newest one, with the token.
    let ks = kubectls();
    let mut picked: Vec<&std::path::PathBuf> = ks.first().into_iter().collect();
    if let Some(last) = ks.last().filter(|l| Some(*l) != ks.first()) {
        picked.push(last);
    }
    assert!(!picked.is_empty(), "no kubectl found");
    let mut whoami = 0;
    for k in picked {
        let (ok, o, e) = s.kubectl(k, &dana_token, &["get", "configmaps", "-n", "default"]);
        assert!(ok, "{}: {o}{e}", k.display());
        let (ok, o, e) = s.kubectl(k, &dana_token, &["get", "configmaps", "-n", "kube-system"]);
        assert!(!ok, "{}: {o}", k.display());
        assert!(
            e.contains("configmaps is forbidden: User \"oidc:dana\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"kube-system\""),
            "{}: {e}",
            k.display()
        );
        let (ok, o, e) = s.kubectl(k, &failing[0].1, &["get", "configmaps", "-n", "default"]);
        assert!(!ok, "{o}");
        assert!(
            e.contains("You must be logged in to the server (Unauthorized)"),
            "{}: {e}",
            k.display()
        );
        // `auth whoami` exists from kubectl 1.28 on.
        let (_, _, e) = s.kubectl(k, &dana_token, &["auth", "whoami"]);
        if e.contains("unknown command \"whoami\"") {
            continue;
        }
        let (ok, o, e) = s.kubectl(k, &dana_token, &["auth", "whoami", "-o", "json"]);
        assert!(ok, "{}: {o}{e}", k.display());
        let v: Value = serde_json::from_str(&o).unwrap();
        assert_eq!(v["status"]["userInfo"]["username"], "oidc:dana", "{o}");
        assert_eq!(
            v["status"]["userInfo"]["groups"],
            json!(["oidc:dev", "system:authenticated"]),
            "{o}"
        );
        whoami += 1;
    }
    if ks
        .last()
        .and_then(|k| k.file_name())
        .is_some_and(|n| n.to_string_lossy().starts_with("kubectl.1.3"))
    {
        assert_eq!(whoami, 1, "the newest kubectl ran auth whoami");
    }

    // The discovery issuer: keys fetched over HTTPS (trusting certificateAuthority) in the
    // background; the `email` claim is the username, unprefixed.
    let erin = |key: &Key, aud: &str| {
        key.sign(&json!({"iss": s.issuer.url, "aud": aud, "sub": "e-1",
            "email": "erin@example.com", "email_verified": true,
            "iat": now(), "exp": now() + 600}))
    };
    let token = erin(&discovery_key, "other");
    eventually("the discovery issuer's keys are fetched", 30, || {
        s.call(Some(&token), "GET", CMS, None).0 == 200
    });
    let (code, body) = s.call(Some(&erin(&discovery_key, "nobody")), "GET", CMS, None);
    assert_eq!((code, body.as_str()), (401, UNAUTHORIZED));
    let unverified = discovery_key.sign(&json!({"iss": s.issuer.url, "aud": "crdplane",
        "email": "erin@example.com", "email_verified": false, "exp": now() + 600}));
    let (code, body) = s.call(Some(&unverified), "GET", CMS, None);
    assert_eq!((code, body.as_str()), (401, UNAUTHORIZED));

    // Rotation: the issuer now publishes only a new key. A token of the new key id is
    // refused at first (no request waits for a fetch) and rings for a refresh, after
    // which it works; the old key's tokens stop working.
    let fetched = s.issuer.fetches.load(Ordering::SeqCst);
    assert!(fetched >= 1);
    let rotated = Key::new("disc-2");
    *s.issuer.jwks.lock().unwrap() = jwks(&[&rotated]);
    let new_token = erin(&rotated, "crdplane");
    eventually("a token of the rotated key works", 30, || {
        s.call(Some(&new_token), "GET", CMS, None).0 == 200
    });
    assert!(s.issuer.fetches.load(Ordering::SeqCst) > fetched);
    let (code, body) = s.call(Some(&token), "GET", CMS, None);
    assert_eq!((code, body.as_str()), (401, UNAUTHORIZED));
    // The file issuer is untouched by all this.
    assert_eq!(s.call(Some(&dana_token), "GET", CMS, None).0, 200);
}
