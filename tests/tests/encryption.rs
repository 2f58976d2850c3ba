//! Encryption at rest, as `crdplane up` runs it (a TLS stack: the launcher's
//! `encryption-config.yaml`, secretbox then identity): Secrets written through the gateway
//! (REST and kubectl) are sealed in Redis — their data, their annotations, the watch history
//! — while every read path (get, list with label and field selectors, watch, kubectl of
//! each version) serves them decrypted; key rotation as upstream documents it (new key
//! first, rewrite, old key dropped), and an object whose key is gone is a 500, never its
//! ciphertext. Real binaries, real Redis (read with `redis-cli`).

use crdplane::pki::Pki;
use crdplane_tests::{Stack, TlsClient, kubectls};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const PASSWORD_B64: &str = "aHVudGVyMg=="; // "hunter2"

/// Every string value Redis holds (hash fields and values, strings, stream entries, sorted
/// set members), with the key it is under.
fn redis_dump(socket: &Path) -> String {
    let cli = |args: &[&str]| -> String {
        let out = Command::new("redis-cli")
            .arg("-s")
            .arg(socket)
            .args(args)
            .output()
            .expect("redis-cli");
        assert!(out.status.success(), "{:?}", out);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let mut all = String::new();
    for key in cli(&["--scan"]).lines().filter(|k| !k.is_empty()) {
        let dump = match cli(&["TYPE", key]).trim() {
            "hash" => cli(&["HGETALL", key]),
            "string" => cli(&["GET", key]),
            "stream" => cli(&["XRANGE", key, "-", "+"]),
            "zset" => cli(&["ZRANGE", key, "0", "-1"]),
            "list" => cli(&["LRANGE", key, "0", "-1"]),
            "set" => cli(&["SMEMBERS", key]),
            other => panic!("{key}: unexpected type {other}"),
        };
        all.push_str(&format!("== {key}\n{dump}\n"));
    }
    all
}

fn secret(name: &str) -> String {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "labels": {"app": "db"},
            "annotations": {"note": "the password is hunter2"}},
        "data": {"password": PASSWORD_B64}
    })
    .to_string()
}

struct Env {
    stack: Stack,
    pki: Pki,
    admin: TlsClient,
    _dir: tempfile::TempDir,
}

impl Env {
    fn call(&self, method: &str, path: &str, body: Option<&str>) -> (u16, serde_json::Value) {
        let (code, _, text) = self
            .admin
            .request(
                method,
                &format!("{}{path}", self.stack.gateway),
                &[("Content-Type", "application/json")],
                body,
            )
            .unwrap();
        (
            code,
            serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
        )
    }

    fn redis(&self) -> String {
        redis_dump(&self.stack.redis.as_ref().unwrap().socket)
    }

    /// Rewrites the configuration in place and restarts the gateway on it.
    fn reconfigure(&mut self, providers: &str) {
        let text = format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n{providers}"
        );
        std::fs::write(self.pki.encryption_config_path(), text).unwrap();
        let procs = self.stack.processes();
        let i = procs.index("gateway").unwrap();
        procs.kill(i).unwrap();
        procs.respawn(i, Duration::from_secs(30)).unwrap();
        procs.wait_ready(Duration::from_secs(30)).unwrap();
    }
}

const SECS_PATH: &str = "/api/v1/namespaces/default/secrets";

#[test]
fn secrets_are_sealed_in_redis_and_served_decrypted() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::ensure(&dir.path().join("pki"), &[]).unwrap();
    let stack = Stack::start_with_redis_using(|b| b.tls(&pki)).unwrap();
    stack.use_admin_kubeconfig(&pki);
    let admin = TlsClient::admin(&pki);
    let mut env = Env {
        stack,
        pki,
        admin,
        _dir: dir,
    };

    // Written through REST and through kubectl.
    let (code, list) = env.call("GET", SECS_PATH, None);
    assert_eq!(code, 200, "{list}");
    let rv0 = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, created) = env.call("POST", SECS_PATH, Some(&secret("db")));
    assert_eq!(code, 201, "{created}");
    assert_eq!(
        created["data"]["password"], PASSWORD_B64,
        "create answers decrypted"
    );
    let k = kubectls();
    let newest = k.last().expect("a kubectl").clone();
    let out = env.stack.kubectl(
        &newest,
        &[
            "create",
            "secret",
            "generic",
            "by-kubectl",
            "--from-literal=token=s3cr3t-t0ken",
        ],
    );
    assert!(out.ok, "{}", out.stderr);

    // In Redis: sealed, data and annotations nowhere, watch history included.
    let dump = env.redis();
    for hidden in [PASSWORD_B64, "hunter2", "s3cr3t-t0ken", "czNjcjN0LXQwa2Vu"] {
        assert!(
            !dump.contains(hidden),
            "{hidden} is stored in the clear:\n{dump}"
        );
    }
    assert!(dump.contains("k8s:enc:secretbox:v1:key1:"), "{dump}");

    // Every read path serves it decrypted.
    let (code, got) = env.call("GET", &format!("{SECS_PATH}/db"), None);
    assert_eq!(code, 200, "{got}");
    assert_eq!(got["data"]["password"], PASSWORD_B64);
    assert_eq!(
        got["metadata"]["annotations"]["note"],
        "the password is hunter2"
    );
    assert_eq!(got["type"], "Opaque");
    assert!(got.get("crdplane.io/encrypted").is_none(), "{got}");
    for q in [
        "labelSelector=app%3Ddb",
        "fieldSelector=type%3DOpaque,metadata.name%3Ddb",
    ] {
        let (code, l) = env.call("GET", &format!("{SECS_PATH}?{q}"), None);
        assert_eq!(code, 200, "{l}");
        let items = l["items"].as_array().unwrap();
        assert_eq!(items.len(), 1, "{q}: {l}");
        assert_eq!(items[0]["data"]["password"], PASSWORD_B64, "{q}");
    }
    let (code, w) = env.call(
        "GET",
        &format!("{SECS_PATH}?watch=true&resourceVersion={rv0}&timeoutSeconds=1"),
        None,
    );
    assert_eq!(code, 200);
    let w = w
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| w.to_string());
    assert!(w.contains(PASSWORD_B64), "watch events are decrypted: {w}");
    assert!(!w.contains("k8s:enc:"), "{w}");
    for kubectl in &k {
        let out = env.stack.kubectl(
            kubectl,
            &[
                "get",
                "secret",
                "by-kubectl",
                "-o",
                "jsonpath={.data.token}",
            ],
        );
        assert!(out.ok, "{}: {}", kubectl.display(), out.stderr);
        assert_eq!(out.stdout, "czNjcjN0LXQwa2Vu", "{}", kubectl.display());
    }

    // The garbage collector works on sealed objects (owner references stay in the clear):
    // an orphaned dependent loses its reference and still opens; a dependent of a deleted
    // owner is deleted.
    for (owner, policy) in [("owner-a", "Orphan"), ("owner-b", "Background")] {
        let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": owner}})
        .to_string();
        let (code, cm) = env.call("POST", "/api/v1/namespaces/default/configmaps", Some(&cm));
        assert_eq!(code, 201, "{cm}");
        let mut dep: serde_json::Value =
            serde_json::from_str(&secret(&format!("dep-{owner}"))).unwrap();
        dep["metadata"]["ownerReferences"] = serde_json::json!([{"apiVersion": "v1",
            "kind": "ConfigMap", "name": owner, "uid": cm["metadata"]["uid"]}]);
        let (code, d) = env.call("POST", SECS_PATH, Some(&dep.to_string()));
        assert_eq!(code, 201, "{d}");
        let del = serde_json::json!({"kind": "DeleteOptions", "apiVersion": "v1",
            "propagationPolicy": policy})
        .to_string();
        let (code, r) = env.call(
            "DELETE",
            &format!("/api/v1/namespaces/default/configmaps/{owner}"),
            Some(&del),
        );
        assert_eq!(code, 200, "{r}");
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let (code, got) = env.call("GET", &format!("{SECS_PATH}/dep-{owner}"), None);
            let done = match policy {
                "Orphan" => {
                    assert_eq!(code, 200, "{got}");
                    assert_eq!(got["data"]["password"], PASSWORD_B64, "{got}");
                    got["metadata"].get("ownerReferences").is_none()
                }
                _ => code == 404,
            };
            if done {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{policy}: {got}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    // Rotation: a new key first, the old one second; the old objects still read, a rewrite
    // seals them with the new key.
    let key2 = "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=";
    let old = std::fs::read_to_string(env.pki.encryption_config_path()).unwrap();
    let key1 = old
        .lines()
        .find_map(|l| l.trim().strip_prefix("secret: "))
        .unwrap()
        .to_string();
    env.reconfigure(&format!(
        "  - secretbox:\n      keys:\n      - name: key2\n        secret: {key2}\n      - name: key1\n        secret: {key1}\n"
    ));
    let (code, got) = env.call("GET", &format!("{SECS_PATH}/db"), None);
    assert_eq!(code, 200, "{got}");
    let (code, put) = env.call("PUT", &format!("{SECS_PATH}/db"), Some(&got.to_string()));
    assert_eq!(code, 200, "{put}");
    let dump = env.redis();
    assert!(dump.contains("k8s:enc:secretbox:v1:key2:"), "{dump}");

    // The old key dropped: the rewritten object reads; the one never rewritten is a 500
    // naming its key, never its ciphertext.
    env.reconfigure(&format!(
        "  - secretbox:\n      keys:\n      - name: key2\n        secret: {key2}\n"
    ));
    let (code, got) = env.call("GET", &format!("{SECS_PATH}/db"), None);
    assert_eq!(code, 200, "{got}");
    assert_eq!(got["data"]["password"], PASSWORD_B64);
    let (code, got) = env.call("GET", &format!("{SECS_PATH}/by-kubectl"), None);
    assert_eq!(code, 500, "{got}");
    assert_eq!(got["reason"], "InternalError", "{got}");
    let msg = got["message"].as_str().unwrap();
    assert!(msg.contains("k8s:enc:secretbox:v1:key1"), "{msg}");
    assert!(!got.to_string().contains("czNjcjN0"), "{got}");
    let (code, l) = env.call("GET", SECS_PATH, None);
    assert_eq!(code, 500, "a list holding it fails too: {l}");
}
