//! Defaulting on read (apiextensions-apiserver defaults objects when it decodes them from
//! storage): a default added to the CRD after an object was stored shows up on GET, LIST and
//! WATCH of that old object, through the real gateway, validation service and Redis.
use crdplane_tests::{Stack, WatchStream, http_request};
use serde_json::{Value, json};
use std::time::Duration;

const CRD_PATH: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const ITEMS: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";

fn crd(with_default: bool) -> Value {
    let mut replicas = json!({"type": "integer"});
    if with_default {
        replicas["default"] = json!(3);
    }
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "crontabs.stable.example.com"},
        "spec": {"group": "stable.example.com", "scope": "Namespaced",
          "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab"},
          "versions": [{"name": "v1", "served": true, "storage": true,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
              "spec": {"type": "object", "default": {}, "properties": {
                "cronSpec": {"type": "string"}, "replicas": replicas}}}}}}]}
    })
}

fn call(
    s: &Stack,
    method: &str,
    path: &str,
    ct: Option<&str>,
    body: Option<&Value>,
) -> (u16, Value) {
    let body = body.map(|b| b.to_string());
    let (code, text) =
        http_request(method, &format!("{}{path}", s.gateway), ct, body.as_deref()).expect("http");
    (
        code,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn defaults_added_later_apply_to_stored_objects_on_get_list_and_watch() {
    let s = Stack::start_with_redis().expect("stack");
    let j = Some("application/json");
    assert_eq!(call(&s, "POST", CRD_PATH, j, Some(&crd(false))).0, 201);
    assert!(eventually(|| call(&s, "GET", ITEMS, None, None).0 == 200));
    let obj = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
        "metadata": {"name": "old"}, "spec": {"cronSpec": "* * * * */5"}});
    let (code, created) = call(&s, "POST", ITEMS, j, Some(&obj));
    assert_eq!(code, 201, "{created}");
    assert!(
        created["spec"].get("replicas").is_none(),
        "no default yet: {created}"
    );

    // The CRD gains a default for spec.replicas.
    let (_, cur) = call(
        &s,
        "GET",
        &format!("{CRD_PATH}/crontabs.stable.example.com"),
        None,
        None,
    );
    let mut next = crd(true);
    next["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"].clone();
    let (code, body) = call(
        &s,
        "PUT",
        &format!("{CRD_PATH}/crontabs.stable.example.com"),
        j,
        Some(&next),
    );
    assert_eq!(code, 200, "{body}");

    // GET and LIST of the object stored before show the default (once the gateway sees the
    // new CRD generation).
    assert!(
        eventually(
            || call(&s, "GET", &format!("{ITEMS}/old"), None, None).1["spec"]["replicas"] == 3
        ),
        "GET applies the new default"
    );
    let (_, list) = call(&s, "GET", ITEMS, None, None);
    assert_eq!(list["items"][0]["spec"]["replicas"], 3, "{list}");

    // WATCH from "0": the synthetic ADDED is defaulted; the live DELETED of the old stored
    // object is defaulted too.
    let w = WatchStream::open(&format!("{}{ITEMS}?watch=1", s.gateway), None).expect("watch");
    assert_eq!(w.status, 200);
    let added = w.next(Duration::from_secs(10)).expect("ADDED");
    assert_eq!(added["type"], "ADDED");
    assert_eq!(added["object"]["spec"]["replicas"], 3, "{added}");
    assert_eq!(added["object"]["spec"]["cronSpec"], "* * * * */5");
    let (code, _) = call(&s, "DELETE", &format!("{ITEMS}/old"), None, None);
    assert_eq!(code, 200);
    let deleted = w.next(Duration::from_secs(10)).expect("DELETED");
    assert_eq!(deleted["type"], "DELETED");
    assert_eq!(deleted["object"]["spec"]["replicas"], 3, "{deleted}");
    assert_eq!(deleted["object"]["metadata"]["name"], "old");
}

/// Live events of a CRD version with defaults reach every kind of watcher defaulted: the
/// gateway's shared stream defaults each event once for the served version (not once per
/// watcher) and JSON watchers, a label-selected watcher and a Table watcher all see the
/// default on an object stored without it (its DELETED carries the stored state).
#[test]
fn live_events_are_defaulted_for_every_watcher_of_the_version() {
    let s = Stack::start_with_redis().expect("stack");
    let j = Some("application/json");
    assert_eq!(call(&s, "POST", CRD_PATH, j, Some(&crd(false))).0, 201);
    assert!(eventually(|| call(&s, "GET", ITEMS, None, None).0 == 200));
    for name in ["a", "b"] {
        let obj = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": name, "labels": {"app": "web"}},
            "spec": {"cronSpec": "* * * * */5"}});
        assert_eq!(call(&s, "POST", ITEMS, j, Some(&obj)).0, 201);
    }
    let crd_url = format!("{CRD_PATH}/crontabs.stable.example.com");
    let (_, cur) = call(&s, "GET", &crd_url, None, None);
    let mut next = crd(true);
    next["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"].clone();
    assert_eq!(call(&s, "PUT", &crd_url, j, Some(&next)).0, 200);
    assert!(eventually(|| call(
        &s,
        "GET",
        &format!("{ITEMS}/a"),
        None,
        None
    )
    .1["spec"]["replicas"]
        == 3));
    let (_, list) = call(&s, "GET", ITEMS, None, None);
    let rv = list["metadata"]["resourceVersion"].as_str().expect("rv");

    let url = |q: &str| format!("{}{ITEMS}?watch=1&resourceVersion={rv}{q}", s.gateway);
    let open = |q: &str, accept: Option<&str>| {
        let w = WatchStream::open(&url(q), accept).expect("watch");
        assert_eq!(w.status, 200);
        w
    };
    let json_watchers: Vec<WatchStream> = (0..3).map(|_| open("", None)).collect();
    let selected = open("&labelSelector=app%3Dweb", None);
    let table = open(
        "&includeObject=Object",
        Some("application/json;as=Table;v=v1;g=meta.k8s.io"),
    );
    for name in ["a", "b"] {
        assert_eq!(
            call(&s, "DELETE", &format!("{ITEMS}/{name}"), None, None).0,
            200
        );
    }
    for (i, w) in json_watchers.iter().chain([&selected]).enumerate() {
        for name in ["a", "b"] {
            let e = w.next(Duration::from_secs(10)).expect("DELETED");
            assert_eq!(e["type"], "DELETED", "watcher {i}: {e}");
            assert_eq!(e["object"]["metadata"]["name"], name, "watcher {i}: {e}");
            assert_eq!(e["object"]["spec"]["replicas"], 3, "watcher {i}: {e}");
        }
    }
    for name in ["a", "b"] {
        let e = table.next(Duration::from_secs(10)).expect("DELETED row");
        assert_eq!(e["type"], "DELETED", "{e}");
        let row = &e["object"]["rows"][0]["object"];
        assert_eq!(row["metadata"]["name"], name, "{e}");
        assert_eq!(row["spec"]["replicas"], 3, "{e}");
    }
}
