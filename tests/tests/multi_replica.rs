//! Two storage and two gateway replicas on one Redis: watchers on both gateways see every
//! write made through either, in revision order, with no gaps or duplicates; a storage
//! replica restart keeps history (watch resume from a revision before the restart) and the
//! gateways' shared watch streams carry on across it.

use crdplane_proto::v1 as pb;
use crdplane_tests::{Replicas, WatchStream, http_request};
use serde_json::{Value, json};
use std::time::Duration;

const CRD: &str = r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"widgets.multi.example.com"},
 "spec":{"group":"multi.example.com","scope":"Namespaced",
  "names":{"plural":"widgets","singular":"widget","kind":"Widget"},
  "versions":[{"name":"v1","served":true,"storage":true,
   "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}"#;

const WS: &str = "/apis/multi.example.com/v1/namespaces/default/widgets";
const T: Duration = Duration::from_secs(20);

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

fn rv_of(v: &Value) -> u64 {
    v["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn wait_serving(base: &str) {
    for _ in 0..400 {
        if call(base, "GET", WS, None).0 == 200 {
            return;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("{base} does not serve widgets");
}

/// Writes `n` creates + updates through `base` and returns the revisions they got.
fn writer(base: String, tag: &'static str, n: usize) -> std::thread::JoinHandle<Vec<u64>> {
    std::thread::spawn(move || {
        let mut rvs = Vec::new();
        for i in 0..n {
            let name = format!("{tag}-{i}");
            let o = json!({"apiVersion":"multi.example.com/v1","kind":"Widget",
                "metadata":{"name":name},"spec":{"n":i}});
            let (code, c) = call(&base, "POST", WS, Some(&o));
            assert_eq!(code, 201, "{c}");
            rvs.push(rv_of(&c));
            let mut u = c.clone();
            u["spec"]["n"] = json!(i + 1000);
            let (code, m) = call(&base, "PUT", &format!("{WS}/{name}"), Some(&u));
            assert_eq!(code, 200, "{m}");
            rvs.push(rv_of(&m));
        }
        rvs
    })
}

fn check(w: &WatchStream, want: &[u64], label: &str) {
    let evs = w.take(want.len(), T);
    let got: Vec<u64> = evs.iter().map(|e| rv_of(&e["object"])).collect();
    assert_eq!(got, want, "{label}: every write, in revision order, once");
    for e in &evs {
        assert!(
            matches!(e["type"].as_str(), Some("ADDED" | "MODIFIED")),
            "{e}"
        );
    }
    // Nothing extra.
    assert!(
        w.next(Duration::from_millis(200)).is_none(),
        "{label}: no duplicates"
    );
}

#[test]
fn watchers_on_every_gateway_see_every_write_in_order() {
    let mut r = Replicas::start(2, 2).unwrap();
    let (g0, g1) = (r.gateways[0].clone(), r.gateways[1].clone());
    let crd: Value = serde_json::from_str(CRD).unwrap();
    let (code, body) = call(
        &g0,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        Some(&crd),
    );
    assert_eq!(code, 201, "{body}");
    wait_serving(&g0);
    wait_serving(&g1);
    let (_, list) = call(&g0, "GET", WS, None);
    let start = rv_of(&list);

    let open = |g: &str, q: &str| {
        let w = WatchStream::open(&format!("{g}{WS}?watch=1&{q}"), None).unwrap();
        assert_eq!(w.status, 200);
        w
    };
    let watchers: Vec<(String, WatchStream)> = [&g0, &g1]
        .iter()
        .flat_map(|g| {
            vec![
                (
                    format!("{g} from list rv"),
                    open(g, &format!("resourceVersion={start}")),
                ),
                (
                    format!("{g} from list rv (2)"),
                    open(g, &format!("resourceVersion={start}")),
                ),
                (format!("{g} from now"), open(g, "resourceVersion=0")),
            ]
        })
        .collect();

    let a = writer(g0.clone(), "a", 40);
    let b = writer(g1.clone(), "b", 40);
    let mut all: Vec<u64> = a.join().unwrap();
    all.extend(b.join().unwrap());
    all.sort();
    let mut dedup = all.clone();
    dedup.dedup();
    assert_eq!(dedup.len(), all.len(), "every write got its own revision");
    assert_eq!(
        all,
        (start + 1..=start + all.len() as u64).collect::<Vec<_>>()
    );
    for (label, w) in &watchers {
        check(w, &all, label);
    }

    // Restart the storage replica behind gateway 1: history lives in Redis, so watches
    // resume from revisions before the restart, and open shared streams carry on.
    let before_restart = *all.last().unwrap();
    let mid = all[all.len() / 2];
    r.restart_storage(1).unwrap();
    wait_serving(&g1);
    let more_a = writer(g0.clone(), "c", 5);
    let more_b = writer(g1.clone(), "d", 5);
    let mut more = more_a.join().unwrap();
    more.extend(more_b.join().unwrap());
    more.sort();
    for (label, w) in &watchers {
        check(w, &more, &format!("{label} after restart"));
    }
    // A new HTTP watch through the restarted replica's gateway from before the restart.
    let resumed = open(&g1, &format!("resourceVersion={mid}"));
    let want: Vec<u64> = all
        .iter()
        .chain(more.iter())
        .copied()
        .filter(|v| *v > mid)
        .collect();
    check(&resumed, &want, "resumed via gateway 1");

    // And straight from the restarted storage replica over gRPC.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let got = rt.block_on(async {
        let mut c = pb::storage_client::StorageClient::connect(r.storages[1].clone())
            .await
            .unwrap();
        let mut s = c
            .watch(pb::WatchRequest {
                resource: Some(pb::ResourceRef {
                    tenant: "default".into(),
                    group: "multi.example.com".into(),
                    resource: "widgets".into(),
                }),
                from_resource_version: before_restart - 4,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        let mut got = Vec::new();
        while got.len() < 4 + more.len() {
            let ev = tokio::time::timeout(T, s.message())
                .await
                .expect("event in time")
                .unwrap()
                .expect("stream open");
            // MODIFIED events carry the previous state for consumers' selector filtering.
            if ev.r#type == pb::watch_event::Type::Modified as i32 {
                let prev: Value = serde_json::from_slice(&ev.prev_object).unwrap();
                let cur: Value = serde_json::from_slice(&ev.object).unwrap();
                assert_eq!(prev["metadata"]["name"], cur["metadata"]["name"]);
                assert_eq!(rv_of(&prev), ev.resource_version);
                assert_eq!(
                    cur["spec"]["n"].as_i64().unwrap(),
                    prev["spec"]["n"].as_i64().unwrap() + 1000
                );
            }
            got.push(ev.resource_version);
        }
        got
    });
    let want: Vec<u64> = (before_restart - 3..=before_restart)
        .chain(more.iter().copied())
        .collect();
    assert_eq!(got, want);
}
