//! GET of namespaces on the real stack (real redis-server, real service binaries, real
//! kubectl 1.20 and the newest installed): the object, its `/status`, Table output with each
//! `includeObject`, the NotFound Status, and what kubectl prints for each — the answers of
//! kube-apiserver's namespace REST (pkg/registry/core/namespace/storage/storage.go, served by
//! apiserver handlers/get.go `GetResource`).

use crdplane_tests::{Stack, exchange, http_request, kubectls};
use serde_json::{Value, json};

const TABLE_V1: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";

fn call(method: &str, url: &str, ct: Option<&str>, body: Option<&str>) -> (u16, Value) {
    let (code, text) = http_request(method, url, ct, body).expect("http");
    let v = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    (code, v)
}

fn get_accept(url: &str, accept: &str) -> (u16, Value) {
    let (code, _, body) = exchange("GET", url, &[("Accept", accept)], "");
    let v = serde_json::from_str(&body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"));
    (code, v)
}

#[test]
fn namespace_get_status_table_and_not_found() {
    let stack = Stack::start_with_redis().expect("stack");
    let ns = format!("{}/api/v1/namespaces", stack.gateway);
    let (code, created) = call(
        "POST",
        &ns,
        Some("application/json"),
        Some(
            r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team","labels":{"a":"b"}}}"#,
        ),
    );
    assert_eq!(code, 201, "{created}");

    // The object as it was stored: every field the create answered, unchanged.
    let (code, got) = call("GET", &format!("{ns}/team"), None, None);
    assert_eq!(code, 200, "{got}");
    assert_eq!(got, created);
    assert_eq!(got["kind"], "Namespace");
    assert_eq!(got["apiVersion"], "v1");
    assert_eq!(
        got["metadata"]["labels"],
        json!({"a": "b", "kubernetes.io/metadata.name": "team"})
    );
    assert_eq!(got["spec"]["finalizers"], json!(["kubernetes"]));
    assert_eq!(got["status"]["phase"], "Active");

    // `/status` serves the same object.
    let (code, status) = call("GET", &format!("{ns}/team/status"), None, None);
    assert_eq!(code, 200, "{status}");
    assert_eq!(status, got);

    // A write is seen by the next GET, with the resourceVersion the write answered.
    let (code, patched) = call(
        "PATCH",
        &format!("{ns}/team"),
        Some("application/merge-patch+json"),
        Some(r#"{"metadata":{"labels":{"c":"d"}}}"#),
    );
    assert_eq!(code, 200, "{patched}");
    let (_, got) = call("GET", &format!("{ns}/team"), None, None);
    assert_eq!(got, patched);
    assert_eq!(
        got["metadata"]["labels"],
        json!({"a": "b", "c": "d", "kubernetes.io/metadata.name": "team"})
    );
    assert_ne!(
        got["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );

    // Upstream's NotFound Status.
    for path in ["nope", "nope/status"] {
        let (code, st) = call("GET", &format!("{ns}/{path}"), None, None);
        assert_eq!(code, 404, "{st}");
        assert_eq!(
            st,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "namespaces \"nope\" not found", "reason": "NotFound",
                "details": {"name": "nope", "kind": "namespaces"}, "code": 404})
        );
    }

    // Table: one row, the namespace's columns; the object as partial metadata by default.
    let (code, t) = get_accept(&format!("{ns}/team"), TABLE_V1);
    assert_eq!(code, 200, "{t}");
    assert_eq!(t["kind"], "Table");
    assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(crdplane_tests::column_names(&t), ["Name", "Status", "Age"]);
    let rows = t["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{t}");
    assert_eq!(rows[0]["cells"][0], "team");
    assert_eq!(rows[0]["cells"][1], "Active");
    assert_eq!(rows[0]["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(rows[0]["object"]["metadata"]["name"], "team");
    let (_, t) = get_accept(&format!("{ns}/team?includeObject=Object"), TABLE_V1);
    assert_eq!(t["rows"][0]["object"], got);
    let (_, t) = get_accept(&format!("{ns}/team?includeObject=None"), TABLE_V1);
    assert!(t["rows"][0].get("object").is_none_or(Value::is_null), "{t}");
    // The read path every family shares: a one-object Table carries the object's
    // resourceVersion, the Table version follows the Accept header, and an unknown
    // includeObject is upstream's 400.
    assert_eq!(
        t["metadata"]["resourceVersion"], got["metadata"]["resourceVersion"],
        "{t}"
    );
    let (code, t) = get_accept(
        &format!("{ns}/team"),
        "application/json;as=Table;v=v1beta1;g=meta.k8s.io",
    );
    assert_eq!(code, 200, "{t}");
    assert_eq!(t["apiVersion"], "meta.k8s.io/v1beta1");
    assert_eq!(t["rows"][0]["object"]["apiVersion"], "meta.k8s.io/v1beta1");
    let (code, st) = get_accept(&format!("{ns}/team?includeObject=Everything"), TABLE_V1);
    assert_eq!(code, 400, "{st}");
    assert!(
        st["message"]
            .as_str()
            .unwrap()
            .contains("must be 'Metadata', 'Object', 'None', or empty"),
        "{st}"
    );

    let all = kubectls();
    assert!(!all.is_empty(), "no kubectl found");
    // kubectl 1.20 and the newest.
    let mut ks = vec![all[0].clone()];
    if all.len() > 1 {
        ks.push(all[all.len() - 1].clone());
    }
    for k in &ks {
        let out = stack.kubectl(k, &["get", "namespace", "team", "-o", "json"]);
        assert!(out.ok, "{k:?}: {}", out.stderr);
        let mut v: Value = serde_json::from_str(&out.stdout).expect("kubectl json");
        // kubectl 1.21 and later leave managedFields out unless --show-managed-fields.
        let mut want = got.clone();
        for o in [&mut v, &mut want] {
            o["metadata"]
                .as_object_mut()
                .unwrap()
                .remove("managedFields");
        }
        assert_eq!(v, want, "{k:?}");
        let out = stack.kubectl(k, &["get", "namespace", "team"]);
        assert!(out.ok, "{k:?}: {}", out.stderr);
        let header: Vec<&str> = out
            .stdout
            .lines()
            .next()
            .unwrap()
            .split_whitespace()
            .collect();
        assert_eq!(header, ["NAME", "STATUS", "AGE"], "{k:?}: {}", out.stdout);
        let row: Vec<&str> = out
            .stdout
            .lines()
            .nth(1)
            .unwrap()
            .split_whitespace()
            .collect();
        assert_eq!(&row[..2], ["team", "Active"], "{k:?}: {}", out.stdout);
        let out = stack.kubectl(k, &["get", "namespace", "nope"]);
        assert!(!out.ok);
        assert_eq!(
            out.stderr.trim(),
            "Error from server (NotFound): namespaces \"nope\" not found",
            "{k:?}"
        );
    }
}
