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
