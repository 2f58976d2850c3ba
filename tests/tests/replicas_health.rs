//! Service replicas behind one gateway, with the real binaries: the gateway and the registry
//! are given two storage and two validation endpoints (`--storage a,b`; the gateway names
//! storage `dns:///localhost:<port>`, as on Kubernetes); every write is
//! admitted whichever validation replica answers; killing one storage process leaves
//! every request succeeding and the open watches going. Storage reports its readiness over
//! `grpc.health.v1`: NOT_SERVING while Redis is down, SERVING again once it is back.

use std::process::Child;
use std::time::{Duration, Instant};

use crdplane_tests::{RedisServer, WatchStream, http_get, http_request, spawn_service};
use serde_json::{Value, json};

const CRD: &str = r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"gadgets.replicas.example.com"},
 "spec":{"group":"replicas.example.com","scope":"Namespaced",
  "names":{"plural":"gadgets","singular":"gadget","kind":"Gadget"},
  "versions":[{"name":"v1","served":true,"storage":true,
   "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}"#;
const GS: &str = "/apis/replicas.example.com/v1/namespaces/default/gadgets";

/// Child processes, killed when the test ends however it ends.
struct Kids(Vec<Child>);

impl Drop for Kids {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn call(base: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let b = body.map(|b| b.to_string());
    let (code, text) = http_request(
        method,
        &format!("{base}{path}"),
        b.as_ref().map(|_| "application/json"),
        b.as_deref(),
    )
    .expect("http");
    (
        code,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn gadget(name: &str) -> Value {
    json!({"apiVersion":"replicas.example.com/v1","kind":"Gadget",
        "metadata":{"name":name},"spec":{"n":1}})
}

#[test]
fn a_killed_storage_replica_leaves_requests_and_watches_going() {
    let redis = RedisServer::start().expect("redis");
    let mut kids = Kids(Vec::new());
    let storage: Vec<String> = (0..2)
        .map(|_| {
            spawn_service(
                &mut kids.0,
                "crdplane-storage",
                &["--listen", "127.0.0.1:0", "--redis-url", &redis.url()],
            )
            .expect("storage")
        })
        .collect();
    let storages = storage.join(",");
    // The gateway names them as on Kubernetes, `dns:///<name>:<port>` (each resolved and
    // followed by the transport; `localhost` here), the registry by their URLs.
    let storages_by_name = storage
        .iter()
        .map(|u| format!("dns:///localhost:{}", u.rsplit_once(':').unwrap().1))
        .collect::<Vec<_>>()
        .join(",");
    // Two validation replicas too: each compiles a schema the first time a call that
    // needs it reaches that replica (the retry carries the CRD).
    let validation = (0..2)
        .map(|_| {
            spawn_service(
                &mut kids.0,
                "crdplane-validation",
                &["--listen", "127.0.0.1:0"],
            )
            .expect("validation")
        })
        .collect::<Vec<_>>()
        .join(",");
    let registry = spawn_service(
        &mut kids.0,
        "crdplane-registry",
        &[
            "--listen",
            "127.0.0.1:0",
            "--storage",
            &storages,
            "--validation",
            &validation,
        ],
    )
    .expect("registry");
    let gw = spawn_service(
        &mut kids.0,
        "crdplane-gateway",
        &[
            "--listen",
            "127.0.0.1:0",
            "--storage",
            &storages_by_name,
            "--validation",
            &validation,
            "--registry",
            &registry,
        ],
    )
    .expect("gateway");
    wait_until("the gateway to be ready", || {
        matches!(http_get(&format!("{gw}/readyz")), Ok((200, _)))
    });
    let crd: Value = serde_json::from_str(CRD).unwrap();
    let (code, body) = call(
        &gw,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        Some(&crd),
    );
    assert_eq!(code, 201, "{body}");
    wait_until("gadgets to be served", || {
        call(&gw, "GET", GS, None).0 == 200
    });

    let watch = WatchStream::open(&format!("{gw}{GS}?watch=1"), None).expect("watch");
    let mut names = Vec::new();
    for i in 0..10 {
        let name = format!("before-{i}");
        let (code, body) = call(&gw, "POST", GS, Some(&gadget(&name)));
        assert_eq!(code, 201, "{body}");
        names.push(name);
    }

    // Storage replica 0 (children are pushed in start order) dies without a word.
    kids.0[0].kill().expect("kill");
    kids.0[0].wait().expect("wait");

    // Every request from now on succeeds: writes, reads, lists.
    for i in 0..30 {
        let name = format!("after-{i}");
        let (code, body) = call(&gw, "POST", GS, Some(&gadget(&name)));
        assert_eq!(code, 201, "create {name} after the kill: {body}");
        let (code, body) = call(&gw, "GET", &format!("{GS}/{name}"), None);
        assert_eq!(code, 200, "get {name} after the kill: {body}");
        names.push(name);
    }
    let (code, list) = call(&gw, "GET", GS, None);
    assert_eq!(code, 200, "{list}");
    assert_eq!(list["items"].as_array().map(Vec::len), Some(40), "{list}");
    // A CRD read goes through the registry, which balances over storage too.
    let (code, body) = call(
        &gw,
        "GET",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.replicas.example.com",
        None,
    );
    assert_eq!(code, 200, "{body}");

    // The watch opened before the kill saw every create, once, in order.
    let events = watch.take(40, Duration::from_secs(30));
    let seen: Vec<&str> = events
        .iter()
        .map(|e| e["object"]["metadata"]["name"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(seen, names, "watch events across the kill");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_is_not_serving_while_redis_is_down() {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_client::HealthClient;
    let mut redis = RedisServer::start().expect("redis");
    let mut kids = Kids(Vec::new());
    // (Blocking calls on a runtime worker are fine here: two workers, nothing else to run.)
    let storage = spawn_service(
        &mut kids.0,
        "crdplane-storage",
        &["--listen", "127.0.0.1:0", "--redis-url", &redis.url()],
    )
    .expect("storage");
    let channel = tonic::transport::Channel::from_shared(storage.clone())
        .unwrap()
        .connect_lazy();
    let mut health = HealthClient::new(channel);
    let status = |h: &mut HealthClient<tonic::transport::Channel>| {
        let mut h = h.clone();
        async move {
            h.check(HealthCheckRequest {
                service: String::new(),
            })
            .await
            .map(|r| r.into_inner().status)
            .unwrap_or(-1)
        }
    };
    let serving = tonic_health::ServingStatus::Serving as i32;
    let not_serving = tonic_health::ServingStatus::NotServing as i32;
    let wait_for = async |h: &mut HealthClient<tonic::transport::Channel>, want: i32| {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let got = status(h).await;
            if got == want {
                return;
            }
            assert!(Instant::now() < deadline, "health {got}, want {want}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    wait_for(&mut health, serving).await;
    let r = health
        .check(HealthCheckRequest {
            service: "crdplane.v1.Storage".into(),
        })
        .await
        .unwrap();
    assert_eq!(r.into_inner().status, serving);

    redis.stop();
    wait_for(&mut health, not_serving).await;
    redis.restart().expect("redis restart");
    wait_for(&mut health, serving).await;
}

/// `crdplane up --replicas 2` runs two registries too, and the gateways spread their calls
/// over both: with one registry killed (SIGKILL), CRDs are still created, served, listed in
/// discovery and deleted — the deletion's instance cleanup and finalizer removal done by the
/// surviving registry's controller.
#[test]
fn a_killed_registry_replica_leaves_crds_served_and_deleted() {
    let redis = RedisServer::start().expect("redis");
    let mut stack = crdplane_tests::Stack::start_from(
        crdplane_tests::Stack::builder(&redis.url()).scale(2),
        Some(redis),
    )
    .expect("scaled stack");
    assert_eq!(
        stack.registry.split(',').count(),
        2,
        "two registries: {}",
        stack.registry
    );
    let gw = stack.gateway.clone();
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let r0 = stack.processes().index("registry-0").expect("registry-0");
    stack.processes().kill(r0).expect("kill registry-0");

    // Every call now needs the surviving registry; several creates, so that the gateway's
    // balancing would have picked the dead one for some of them.
    for i in 0..4 {
        let mut crd: Value = serde_json::from_str(CRD).unwrap();
        let plural = format!("gadgets{i}");
        crd["metadata"]["name"] = json!(format!("{plural}.replicas.example.com"));
        crd["spec"]["names"] = json!({"plural": plural, "kind": format!("Gadget{i}")});
        let (code, body) = call(&gw, "POST", crds, Some(&crd));
        assert_eq!(code, 201, "{body}");
    }
    let path = "/apis/replicas.example.com/v1/namespaces/default/gadgets0";
    wait_until("gadgets0 to be served", || {
        call(&gw, "GET", path, None).0 == 200
    });
    let (code, _) = call(
        &gw,
        "POST",
        path,
        Some(&json!({
        "apiVersion": "replicas.example.com/v1", "kind": "Gadget0",
        "metadata": {"name": "g"}})),
    );
    assert_eq!(code, 201);
    let (code, disco) = call(&gw, "GET", "/apis/replicas.example.com/v1", None);
    assert_eq!(code, 200, "{disco}");
    assert_eq!(disco["resources"].as_array().unwrap().len(), 4, "{disco}");

    // Deletion: the registry's controller removes the instance, then the CRD.
    let name = "gadgets0.replicas.example.com";
    let (code, body) = call(&gw, "DELETE", &format!("{crds}/{name}"), None);
    assert_eq!(code, 200, "{body}");
    wait_until("the CRD to be gone", || {
        call(&gw, "GET", &format!("{crds}/{name}"), None).0 == 404
    });
}
