//! What an operator sees of a running stack: the stack as `crdplane up` runs it (HTTPS,
//! client certificates, RBAC, mutual TLS between the services) on a private Redis, scraped
//! by a real Prometheus (Debian's, fetched into `.tools/prometheus` by
//! `scripts/deps.sh --test`) with the configuration `crdplane up` writes
//! (`crdplane::monitoring`) and the alert rules of deploy/monitoring, and queried through
//! Prometheus's HTTP API; `/metrics` read with real kubectl and refused to a user without
//! the right.

use crdplane::{Pki, kubeconfig_yaml_tls};
use crdplane_tests::{Stack, TlsClient, free_port, http_get, kubectls};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn prometheus_bin() -> PathBuf {
    let p = repo().join(".tools/prometheus/usr/bin/prometheus");
    assert!(
        p.exists(),
        "no Prometheus at {}: run scripts/deps.sh --test",
        p.display()
    );
    p
}

/// A Prometheus server on a free port; killed on drop.
struct Prometheus {
    child: Child,
    url: String,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    fn start(config: &Path, dir: &Path) -> Self {
        let port = free_port();
        let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
        let child = Command::new(prometheus_bin())
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let p = Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        wait_for("Prometheus ready", Duration::from_secs(60), || {
            matches!(http_get(&format!("{}/-/ready", p.url)), Ok((200, _)))
        });
        p
    }

    fn api(&self, path: &str) -> Value {
        let (code, body) = http_get(&format!("{}{path}", self.url)).unwrap();
        assert_eq!(code, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap()
    }

    /// The instant vector of `query`: (labels, value) per series.
    fn query(&self, query: &str) -> Vec<(Value, f64)> {
        let v = self.api(&format!("/api/v1/query?query={}", encode(query)));
        v["data"]["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let value = s["value"][1].as_str().unwrap().parse().unwrap();
                (s["metric"].clone(), value)
            })
            .collect()
    }

    /// The value of the one series of `query` once `ok` holds for it (scrapes are every
    /// second), or a failure naming what was last seen.
    fn eventually(&self, query: &str, ok: impl Fn(f64) -> bool) -> f64 {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let r = self.query(query);
            if let [(_, v)] = r.as_slice()
                && ok(*v)
            {
                return *v;
            }
            assert!(Instant::now() < deadline, "{query}: {r:?}");
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !ok() {
        assert!(Instant::now() < deadline, "{what}: timed out");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Percent-encodes a query parameter value.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

const CRD: &str = r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
"metadata":{"name":"crontabs.stable.example.com"},
"spec":{"group":"stable.example.com","scope":"Namespaced",
"names":{"plural":"crontabs","singular":"crontab","kind":"CronTab"},
"versions":[{"name":"v1","served":true,"storage":true,
"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object",
"properties":{"cronSpec":{"type":"string"}}}}}}}]}}"#;

#[test]
fn prometheus_scrapes_every_process_and_sees_the_requests() {
    // Fails early, naming the command that fetches it, when Prometheus is missing.
    prometheus_bin();
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::ensure(&dir.path().join("pki"), &[]).unwrap();
    let redis = crdplane_tests::RedisServer::start().unwrap();
    let b = Stack::explicit_tenants_builder(&redis.url()).tls(&pki);
    let mut stack = Stack::start_from(b, Some(redis)).unwrap();
    let base = stack.gateway.clone();
    let admin = TlsClient::new(
        pki.ca_pem(),
        Some((pki.admin_cert_pem(), pki.admin_key_pem())),
    )
    .unwrap();
    let call = |method: &str, path: &str, body: Option<&str>| {
        let (code, _, body) = admin
            .request(
                method,
                &format!("{base}{path}"),
                &[("Content-Type", "application/json")],
                body,
            )
            .unwrap();
        (code, body)
    };

    // Traffic: a CRD, 5 creates, a get, a list, a watch left open, an unknown tenant.
    assert_eq!(
        call(
            "POST",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            Some(CRD)
        )
        .0,
        201
    );
    let crs = "/apis/stable.example.com/v1/namespaces/default/crontabs";
    wait_for("CRD served", Duration::from_secs(30), || {
        call("GET", crs, None).0 == 200
    });
    for i in 0..5 {
        let body = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": format!("c{i}")}, "spec": {"cronSpec": "* * * * */5"}});
        assert_eq!(call("POST", crs, Some(&body.to_string())).0, 201);
    }
    assert_eq!(call("GET", &format!("{crs}/c0"), None).0, 200);
    assert_eq!(
        call("GET", "/clusters/nosuch/api/v1/namespaces", None).0,
        404
    );
    let watch_client = admin.clone();
    let watch_url = format!("{base}{crs}?watch=true&timeoutSeconds=120");
    let watch = std::thread::spawn(move || {
        let _ = watch_client.request("GET", &watch_url, &[], None);
    });

    // kubectl reads /metrics as the admin (any version); a user without the right may not.
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        kubeconfig_yaml_tls(
            &base,
            pki.ca_pem(),
            pki.admin_cert_pem(),
            pki.admin_key_pem(),
        ),
    )
    .unwrap();
    for k in kubectls() {
        let out = Command::new(&k)
            .args([
                "--kubeconfig",
                &kubeconfig.to_string_lossy(),
                "get",
                "--raw",
                "/metrics",
            ])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}: {}",
            k.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains("# TYPE apiserver_request_total counter")
                && text.contains(r#"apiserver_request_total{code="201",component="apiserver",dry_run="",group="stable.example.com",resource="crontabs",scope="resource",subresource="",verb="POST",version="v1"} 5"#),
            "{}: {text}",
            k.display()
        );
    }
    let (cert, key) = pki.issue_client("carol", &[]).unwrap();
    let carol = TlsClient::new(pki.ca_pem(), Some((&cert, &key))).unwrap();
    let (code, _, body) = carol
        .request("GET", &format!("{base}/metrics"), &[], None)
        .unwrap();
    assert_eq!(code, 403, "{body}");
    assert!(
        body.contains(r#"forbidden: User \"carol\" cannot get path \"/metrics\""#),
        "{body}"
    );

    // Prometheus on the configuration `crdplane up` writes, with the alert rules.
    let config = dir.path().join("prometheus.yml");
    let rules = repo().join("deploy/monitoring/alerts.yml");
    let targets = stack.processes().metrics_targets();
    assert_eq!(targets.len(), 4, "{targets:?}");
    std::fs::write(
        &config,
        crdplane::monitoring::prometheus_config(
            &targets,
            Some(&pki),
            "1s",
            &[rules.display().to_string()],
        ),
    )
    .unwrap();
    let p = Prometheus::start(&config, dir.path());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let t = p.api("/api/v1/targets");
        let active = t["data"]["activeTargets"].as_array().unwrap().clone();
        if active.len() == 4 && active.iter().all(|t| t["health"] == "up") {
            break;
        }
        let seen: Vec<_> = active
            .iter()
            .map(|t| {
                (
                    t["scrapeUrl"].clone(),
                    t["health"].clone(),
                    t["lastError"].clone(),
                )
            })
            .collect();
        assert!(
            Instant::now() < deadline,
            "not every target is up: {seen:?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    for job in [
        "crdplane-gateway",
        "crdplane-storage",
        "crdplane-registry",
        "crdplane-validation",
    ] {
        assert_eq!(
            p.eventually(&format!("up{{job=\"{job}\"}}"), |v| v == 1.0),
            1.0
        );
    }

    // The gateway: upstream's request metrics, watchers, per-tenant counts.
    let creates = p.eventually(
        r#"sum(apiserver_request_total{job="crdplane-gateway",verb="POST",resource="crontabs",code="201"})"#,
        |v| v >= 5.0,
    );
    assert_eq!(creates, 5.0);
    p.eventually(
        r#"sum(apiserver_request_duration_seconds_count{verb="GET",resource="crontabs",scope="resource"})"#,
        |v| v >= 1.0,
    );
    p.eventually(
        r#"apiserver_registered_watchers{group="stable.example.com",kind="CronTab"}"#,
        |v| v == 1.0,
    );
    p.eventually(
        r#"apiserver_longrunning_requests{verb="WATCH",resource="crontabs"}"#,
        |v| v == 1.0,
    );
    p.eventually(
        r#"sum(crdplane_tenant_requests_total{tenant="default"})"#,
        |v| v >= 7.0,
    );
    assert!(
        p.query(r#"crdplane_tenant_requests_total{tenant="nosuch"}"#)
            .is_empty(),
        "an unknown tenant is never a label"
    );
    // The services: gRPC server metrics, Redis round trips, the schema cache.
    p.eventually(
        r#"sum(grpc_server_handled_total{job="crdplane-storage",grpc_code="OK"})"#,
        |v| v > 0.0,
    );
    p.eventually(
        r#"sum(grpc_server_handled_total{job="crdplane-validation",grpc_code="OK"})"#,
        |v| v > 0.0,
    );
    p.eventually(
        r#"sum(grpc_server_handled_total{job="crdplane-registry",grpc_code="OK"})"#,
        |v| v > 0.0,
    );
    p.eventually(
        r#"sum(crdplane_redis_command_duration_seconds_count{job="crdplane-storage"})"#,
        |v| v > 0.0,
    );
    p.eventually(
        r#"crdplane_storage_watchers{job="crdplane-storage"}"#,
        |v| v >= 1.0,
    );
    p.eventually(
        r#"crdplane_validation_schema_cache_entries{job="crdplane-validation"}"#,
        |v| v >= 1.0,
    );
    // The rules loaded and evaluate; nothing fires on a healthy stack.
    let rules = p.api("/api/v1/rules");
    let groups = rules["data"]["groups"].as_array().unwrap();
    assert!(!groups.is_empty(), "{rules}");
    let alerts = p.api("/api/v1/alerts");
    assert_eq!(alerts["data"]["alerts"], json!([]), "{alerts}");

    // A killed service is seen down.
    let names = stack
        .processes()
        .names()
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>();
    let validation = names.iter().position(|n| n == "validation").unwrap();
    stack.kill_child(validation).unwrap();
    p.eventually(r#"up{job="crdplane-validation"}"#, |v| v == 0.0);
    drop(stack);
    let _ = watch.join();
}
