//! Server-side apply and managedFields end to end (real binaries, real redis-server, real
//! kubectl: Debian's 1.20 when present and the newest): `kubectl apply --server-side` of a
//! CRD and of custom resources creates, leaves unchanged, changes and removes fields;
//! another manager's field is a conflict with upstream's text until `--force-conflicts`;
//! two managers applying the same value share it; `--dry-run=server` writes nothing; every
//! other write (kubectl create, patch) records its Update entry; `kubectl diff --server-side`
//! (every kubectl on the machine) exits 0 silently on an unchanged object and 1 with the change
//! otherwise. Over HTTP: upstream's 422s
//! of the options (`fieldManager` required for apply, `force` only with it), the 400 of an
//! applied object of another kind, and the 201 of an apply that creates.
//!
//! The sequence follows the server-side apply documentation's walk-through
//! (kubernetes.io/docs/reference/using-api/server-side-apply: conflicts, forcing, shared
//! ownership, field removal) and the apiserver's `apply_test.go` integration cases.

use crdplane_tests::{Stack, http_request, kubectls};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

const CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.ssa.example.com
spec:
  group: ssa.example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              replicas: {type: integer}
              image: {type: string}
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    port: {type: integer}
          status:
            type: object
            properties:
              ready: {type: boolean}
"#;

fn widget(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: ssa.example.com/v1\nkind: Widget\nmetadata:\n  name: {name}\nspec:\n{spec}"
    )
}

fn get(s: &Stack, name: &str) -> Value {
    let url = format!(
        "{}/apis/ssa.example.com/v1/namespaces/default/widgets/{name}",
        s.gateway
    );
    let (code, body) = http_request("GET", &url, None, None).unwrap();
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// The managedFields entries by manager: (operation, fieldsV1).
fn managers(o: &Value) -> Vec<(String, String, Value)> {
    o["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            (
                e["manager"].as_str().unwrap_or("").to_string(),
                e["operation"].as_str().unwrap().to_string(),
                e["fieldsV1"].clone(),
            )
        })
        .collect()
}

fn apply(s: &Stack, k: &Path, yaml: &str, extra: &[&str]) -> crdplane_tests::KubectlOutput {
    let mut args = vec!["apply", "--server-side", "-f", "-"];
    args.extend_from_slice(extra);
    s.kubectl_stdin(k, &args, Some(yaml))
}

#[test]
fn kubectl_applies_server_side() {
    let s = Stack::start_with_redis().expect("stack");
    let all = kubectls();
    assert!(!all.is_empty(), "no kubectl");
    // The oldest (Debian's 1.20 when present) and the newest.
    let mut ks = vec![all[0].clone()];
    if all.len() > 1 {
        ks.push(all[all.len() - 1].clone());
    }
    let o = apply(&s, &ks[0], CRD, &[]);
    assert!(o.ok, "{o:?}");
    assert!(o.stdout.contains("serverside-applied"), "{o:?}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !s.kubectl(&ks[0], &["get", "widgets"]).ok {
        assert!(Instant::now() < deadline, "widgets never served");
        std::thread::sleep(Duration::from_millis(100));
    }
    for (i, k) in ks.iter().enumerate() {
        let v = k.display();
        let name = format!("w{i}");
        let spec = "  replicas: 1\n  image: a\n  ports:\n  - {name: http, port: 80}\n";
        // Create.
        let o = apply(&s, k, &widget(&name, spec), &[]);
        assert!(
            o.ok && o.stdout.contains("serverside-applied"),
            "{v}: {o:?}"
        );
        let w = get(&s, &name);
        assert_eq!(
            managers(&w),
            [(
                "kubectl".to_string(),
                "Apply".to_string(),
                json!({"f:spec": {"f:image": {}, "f:ports": {"k:{\"name\":\"http\"}": {
                    ".": {}, "f:name": {}, "f:port": {}}}, "f:replicas": {}}})
            )],
            "{v}"
        );
        let rv = w["metadata"]["resourceVersion"].clone();
        // Unchanged: nothing written.
        let o = apply(&s, k, &widget(&name, spec), &[]);
        assert!(o.ok, "{v}: {o:?}");
        assert_eq!(get(&s, &name)["metadata"]["resourceVersion"], rv, "{v}");
        // Changed, and a field the applier no longer applies is removed.
        let o = apply(
            &s,
            k,
            &widget(
                &name,
                "  replicas: 1\n  ports:\n  - {name: http, port: 8080}\n",
            ),
            &[],
        );
        assert!(o.ok, "{v}: {o:?}");
        let w = get(&s, &name);
        assert_eq!(
            w["spec"],
            json!({"replicas": 1, "ports": [{"name": "http", "port": 8080}]}),
            "{v}"
        );
        // Another manager's field: a conflict with upstream's text, then forced.
        let o = s.kubectl(
            k,
            &[
                "patch",
                "widget",
                &name,
                "--type",
                "merge",
                "-p",
                r#"{"spec":{"replicas":5}}"#,
            ],
        );
        assert!(o.ok, "{v}: {o:?}");
        let w = get(&s, &name);
        assert!(
            managers(&w).iter().any(|(m, op, f)| m == "kubectl-patch"
                && op == "Update"
                && *f == json!({"f:spec": {"f:replicas": {}}})),
            "{v}: {:?}",
            managers(&w)
        );
        let config = widget(
            &name,
            "  replicas: 1\n  ports:\n  - {name: http, port: 8080}\n",
        );
        let o = apply(&s, k, &config, &[]);
        assert!(!o.ok, "{v}: {o:?}");
        assert!(
            o.stderr.contains(
                r#"Apply failed with 1 conflict: conflict with "kubectl-patch" using ssa.example.com/v1: .spec.replicas"#
            ),
            "{v}: {o:?}"
        );
        assert_eq!(get(&s, &name)["spec"]["replicas"], 5, "{v}");
        let o = apply(&s, k, &config, &["--force-conflicts"]);
        assert!(o.ok, "{v}: {o:?}");
        let w = get(&s, &name);
        assert_eq!(w["spec"]["replicas"], 1, "{v}");
        assert!(
            !managers(&w).iter().any(|(m, _, _)| m == "kubectl-patch"),
            "{v}: {:?}",
            managers(&w)
        );
        // A second manager applying the same value shares the field.
        let o = apply(
            &s,
            k,
            &widget(&name, "  replicas: 1\n"),
            &["--field-manager", "other"],
        );
        assert!(o.ok, "{v}: {o:?}");
        let w = get(&s, &name);
        let ms = managers(&w);
        for m in ["kubectl", "other"] {
            assert!(
                ms.iter().any(|(n, op, f)| n == m
                    && op == "Apply"
                    && f["f:spec"].get("f:replicas").is_some()),
                "{v}: {ms:?}"
            );
        }
        // --dry-run=server changes nothing (the field is shared: only forced).
        let rv = w["metadata"]["resourceVersion"].clone();
        let o = apply(
            &s,
            k,
            &widget(&name, "  replicas: 9\n"),
            &[
                "--field-manager",
                "other",
                "--dry-run=server",
                "--force-conflicts",
            ],
        );
        assert!(o.ok, "{v}: {o:?}");
        let w = get(&s, &name);
        assert_eq!(
            (&w["metadata"]["resourceVersion"], &w["spec"]["replicas"]),
            (&rv, &json!(1)),
            "{v}"
        );
        // A built-in type: kubectl create records its Update entry, apply takes over.
        let cm = format!("cm{i}");
        let o = s.kubectl(k, &["create", "configmap", &cm, "--from-literal=a=1"]);
        assert!(o.ok, "{v}: {o:?}");
        let url = format!("{}/api/v1/namespaces/default/configmaps/{cm}", s.gateway);
        let (_, body) = http_request("GET", &url, None, None).unwrap();
        let c: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            managers(&c),
            [(
                "kubectl-create".to_string(),
                "Update".to_string(),
                json!({"f:data": {".": {}, "f:a": {}}})
            )],
            "{v}"
        );
        let o = apply(
            &s,
            k,
            &format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {cm}\ndata:\n  b: \"2\"\n"
            ),
            &[],
        );
        assert!(o.ok, "{v}: {o:?}");
        let (_, body) = http_request("GET", &url, None, None).unwrap();
        let c: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(c["data"], json!({"a": "1", "b": "2"}), "{v}");
    }
}

#[test]
fn apply_options_and_errors_over_http() {
    let s = Stack::start_with_redis().expect("stack");
    let base = format!("{}/api/v1/namespaces/default/configmaps", s.gateway);
    let send = |method: &str, url: &str, ct: &str, body: &str| {
        let (code, body) = http_request(method, url, Some(ct), Some(body)).unwrap();
        (
            code,
            serde_json::from_str::<Value>(&body).unwrap_or(Value::Null),
        )
    };
    const APPLY: &str = "application/apply-patch+yaml";
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  k: v\n";
    // fieldManager is required.
    let (code, st) = send("PATCH", &format!("{base}/c"), APPLY, cm);
    assert_eq!(code, 422, "{st}");
    assert_eq!(
        st["message"],
        r#"PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch"#
    );
    // force only with apply.
    let (code, st) = send(
        "PATCH",
        &format!("{base}/c?force=true&fieldManager=m"),
        "application/merge-patch+json",
        "{}",
    );
    assert_eq!(code, 422, "{st}");
    assert_eq!(
        st["message"],
        r#"PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch"#
    );
    // A fieldManager of 129 bytes.
    let long = "m".repeat(129);
    let (code, st) = send(
        "POST",
        &format!("{base}?fieldManager={long}"),
        "application/json",
        "{}",
    );
    assert_eq!(code, 422, "{st}");
    assert_eq!(
        st["message"],
        r#"CreateOptions.meta.k8s.io "" is invalid: fieldManager: Too long: may not be more than 128 bytes"#
    );
    // Another kind than the endpoint's.
    let (code, st) = send(
        "PATCH",
        &format!("{base}/c?fieldManager=m"),
        APPLY,
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: c\n",
    );
    assert_eq!(code, 400, "{st}");
    assert_eq!(st["message"], "invalid object type: /v1, Kind=Secret");
    // An apply of a missing object creates it (201), owned by its applier; a second one
    // that changes nothing answers 200 with the same resourceVersion.
    let (code, created) = send("PATCH", &format!("{base}/c?fieldManager=m"), APPLY, cm);
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["data"], json!({"k": "v"}));
    assert_eq!(created["metadata"]["managedFields"][0]["manager"], "m");
    assert_eq!(
        created["metadata"]["managedFields"][0]["operation"],
        "Apply"
    );
    let (code, again) = send("PATCH", &format!("{base}/c?fieldManager=m"), APPLY, cm);
    assert_eq!(code, 200, "{again}");
    assert_eq!(
        again["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    // A write without fieldManager is managed by its User-Agent's product (this client
    // sends none: an entry without manager, as upstream's `omitempty` writes it).
    let (code, patched) = send(
        "PATCH",
        &format!("{base}/c"),
        "application/merge-patch+json",
        r#"{"data":{"k":"w"}}"#,
    );
    assert_eq!(code, 200, "{patched}");
    let ms = managers(&patched);
    assert!(
        ms.iter().any(|(m, op, _)| op == "Update" && m.is_empty()),
        "{ms:?}"
    );
    // `[{}]` clears managedFields.
    let (code, cleared) = send(
        "PATCH",
        &format!("{base}/c"),
        "application/merge-patch+json",
        r#"{"metadata":{"managedFields":[{}]}}"#,
    );
    assert_eq!(code, 200, "{cleared}");
    assert!(
        cleared["metadata"].get("managedFields").is_none(),
        "{cleared}"
    );
}

/// `kubectl diff --server-side` (a dry-run apply compared with the live object) with every
/// kubectl on this machine: an unchanged configuration exits 0 and prints nothing, a changed
/// one exits 1 and prints the change, a missing object is all added; nothing is written.
#[test]
fn kubectl_diff_server_side() {
    let s = Stack::start_with_redis().expect("stack");
    let ks = kubectls();
    assert!(!ks.is_empty(), "no kubectl");
    let o = apply(&s, &ks[0], CRD, &[]);
    assert!(o.ok, "{o:?}");
    let o = s.kubectl(
        &ks[0],
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=30s",
            "crd/widgets.ssa.example.com",
        ],
    );
    assert!(o.ok, "{o:?}");
    let diff = |k: &Path, yaml: &str| {
        s.kubectl_stdin(k, &["diff", "--server-side", "-f", "-"], Some(yaml))
    };
    for (i, k) in ks.iter().enumerate() {
        let v = k.display();
        let name = format!("d{i}");
        let spec = "  replicas: 1\n  image: a\n";
        let o = apply(&s, k, &widget(&name, spec), &[]);
        assert!(o.ok, "{v}: {o:?}");
        let rv = get(&s, &name)["metadata"]["resourceVersion"].clone();
        // Unchanged: exit 0, no output.
        let o = diff(k, &widget(&name, spec));
        assert_eq!(
            (o.code, o.stdout.as_str(), o.stderr.as_str()),
            (Some(0), "", ""),
            "{v}: {o:?}"
        );
        // Changed: exit 1 and the change.
        let o = diff(k, &widget(&name, "  replicas: 2\n  image: a\n"));
        assert_eq!(o.code, Some(1), "{v}: {o:?}");
        assert!(
            o.stdout.contains("\n-  replicas: 1\n") && o.stdout.contains("\n+  replicas: 2\n"),
            "{v}: {o:?}"
        );
        assert!(
            o.stdout.contains("\n-  generation: 1\n+  generation: 2\n"),
            "{v}: {o:?}"
        );
        assert!(o.stderr.is_empty(), "{v}: {o:?}");
        let w = get(&s, &name);
        assert_eq!(
            (&w["metadata"]["resourceVersion"], &w["spec"]["replicas"]),
            (&rv, &json!(1)),
            "{v}: a diff writes nothing"
        );
        // A missing object: all of it added.
        let o = diff(k, &widget(&format!("new{i}"), spec));
        assert_eq!(o.code, Some(1), "{v}: {o:?}");
        assert!(o.stdout.contains("\n+  replicas: 1\n"), "{v}: {o:?}");
        let url = format!(
            "{}/apis/ssa.example.com/v1/namespaces/default/widgets/new{i}",
            s.gateway
        );
        assert_eq!(http_request("GET", &url, None, None).unwrap().0, 404, "{v}");
    }
}

/// From client-side to server-side apply (the documentation's "Upgrading from client-side
/// apply to server-side apply"): after `kubectl apply`, `kubectl apply --server-side` of a
/// changed configuration takes the fields over without a conflict — the apiserver's
/// `lastAppliedManager` allows conflicts with fields the last-applied annotation still
/// matches, for the manager `kubectl` — and `lastAppliedUpdater` keeps the annotation in
/// step with the applied configuration; another manager still conflicts.
#[test]
fn kubectl_upgrades_from_client_side_apply() {
    let s = Stack::start_with_redis().expect("stack");
    let all = kubectls();
    let mut ks = vec![all[0].clone()];
    if all.len() > 1 {
        ks.push(all[all.len() - 1].clone());
    }
    let o = apply(&s, &ks[0], CRD, &[]);
    assert!(o.ok, "{o:?}");
    let o = s.kubectl(
        &ks[0],
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=30s",
            "crd/widgets.ssa.example.com",
        ],
    );
    assert!(o.ok, "{o:?}");
    for (i, k) in ks.iter().enumerate() {
        let v = k.display();
        let name = format!("u{i}");
        let o = s.kubectl_stdin(
            k,
            &["apply", "-f", "-"],
            Some(&widget(&name, "  replicas: 1\n  image: a\n")),
        );
        assert!(o.ok, "{v}: {o:?}");
        let w = get(&s, &name);
        assert!(
            managers(&w)
                .iter()
                .any(|(m, op, _)| m == "kubectl-client-side-apply" && op == "Update"),
            "{v}: {:?}",
            managers(&w)
        );
        // Another manager conflicts with the client-side applier.
        let o = apply(
            &s,
            k,
            &widget(&name, "  replicas: 3\n  image: a\n"),
            &["--field-manager", "other"],
        );
        assert!(!o.ok, "{v}: {o:?}");
        assert!(
            o.stderr.contains(r#"conflict with "kubectl-client-side-apply" using ssa.example.com/v1: .spec.replicas"#),
            "{v}: {o:?}"
        );
        // kubectl itself takes over.
        let config = widget(&name, "  replicas: 2\n  image: a\n");
        let o = apply(&s, k, &config, &[]);
        assert!(o.ok, "{v}: {o:?}");
        let w = get(&s, &name);
        assert_eq!(w["spec"], json!({"replicas": 2, "image": "a"}), "{v}");
        let last: Value = serde_json::from_str(
            w["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
                .as_str()
                .unwrap_or("{}"),
        )
        .unwrap();
        assert_eq!(
            last["spec"],
            json!({"replicas": 2, "image": "a"}),
            "{v}: {w}"
        );
        assert!(
            managers(&w).iter().any(|(m, op, f)| m == "kubectl"
                && op == "Apply"
                && f["f:spec"].get("f:replicas").is_some()),
            "{v}: {:?}",
            managers(&w)
        );
    }
}

const GADGETS: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.ssa.example.com
spec:
  group: ssa.example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              replicas: {type: integer}
              image: {type: string}
          status:
            type: object
            properties:
              replicas: {type: integer}
"#;

/// Server-side apply of a Scale through `/scale` (upstream's `ScaleHandler`): the owners of
/// the object's replicas field are the Scale's owners of `.spec.replicas`, so another
/// manager's apply conflicts with upstream's text until `force`, which moves the field to
/// an entry of the object with subresource `scale`; the object's owner of the field then
/// conflicts with that manager; a Scale of another type is refused; merge patches of the
/// Scale still work, and the 415 names the three patch types.
#[test]
fn apply_to_scale() {
    let s = Stack::start_with_redis().expect("stack");
    let ks = kubectls();
    let k = ks.last().expect("no kubectl");
    let o = apply(&s, k, GADGETS, &[]);
    assert!(o.ok, "{o:?}");
    let o = s.kubectl(
        k,
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=30s",
            "crd/gadgets.ssa.example.com",
        ],
    );
    assert!(o.ok, "{o:?}");
    let gadget = "apiVersion: ssa.example.com/v1\nkind: Gadget\nmetadata:\n  name: g\nspec:\n  replicas: 1\n  image: a\n";
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let o = apply(&s, k, gadget, &[]);
        if o.ok {
            break;
        }
        assert!(Instant::now() < deadline, "gadgets never served: {o:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let obj = format!(
        "{}/apis/ssa.example.com/v1/namespaces/default/gadgets/g",
        s.gateway
    );
    let send = |query: &str, ct: &str, body: &str| {
        let url = format!("{obj}/scale{query}");
        let (code, body) = http_request("PATCH", &url, Some(ct), Some(body)).unwrap();
        (
            code,
            serde_json::from_str::<Value>(&body).unwrap_or(Value::Null),
        )
    };
    const APPLY: &str = "application/apply-patch+yaml";
    let scale = |n: u32| {
        format!(
            "apiVersion: autoscaling/v1\nkind: Scale\nmetadata:\n  name: g\nspec:\n  replicas: {n}\n"
        )
    };
    let (code, st) = send("?fieldManager=hpa", APPLY, &scale(3));
    assert_eq!(code, 409, "{st}");
    assert_eq!(
        st["message"],
        r#"Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas"#
    );
    assert_eq!(
        st["details"]["causes"],
        json!([{"reason": "FieldManagerConflict",
            "message": "conflict with \"kubectl\"", "field": ".spec.replicas"}])
    );
    let (code, st) = send(
        "?fieldManager=hpa",
        APPLY,
        "apiVersion: apps/v1\nkind: Scale\nmetadata:\n  name: g\nspec:\n  replicas: 3\n",
    );
    assert_eq!(code, 400, "{st}");
    assert_eq!(st["message"], "invalid object type: apps/v1, Kind=Scale");
    // Forced: the Scale's replicas, and the object's field changes hands.
    let (code, sc) = send("?fieldManager=hpa&force=true", APPLY, &scale(3));
    assert_eq!(code, 200, "{sc}");
    assert_eq!(
        (sc["kind"].as_str(), sc["spec"]["replicas"].as_i64()),
        (Some("Scale"), Some(3))
    );
    let (code, body) = http_request("GET", &obj, None, None).unwrap();
    assert_eq!(code, 200);
    let g: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(g["spec"]["replicas"], 3);
    // (Sorted by manager: upstream orders entries by time, then manager, and both were
    // written within a second or two.)
    let mut entries: Vec<Value> = g["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            json!([
                e["manager"],
                e["operation"],
                e["apiVersion"],
                e["subresource"],
                e["fieldsV1"]
            ])
        })
        .collect();
    entries.sort_by_key(|e| e[0].as_str().unwrap_or("").to_string());
    assert_eq!(
        entries,
        [
            json!(["hpa", "Apply", "ssa.example.com/v1", "scale", {"f:spec": {"f:replicas": {}}}]),
            json!(["kubectl", "Apply", "ssa.example.com/v1", null, {"f:spec": {"f:image": {}}}]),
        ]
    );
    // The same manager again: no conflict; an unchanged apply writes nothing.
    let (code, sc) = send("?fieldManager=hpa", APPLY, &scale(4));
    assert_eq!(
        (code, sc["spec"]["replicas"].as_i64()),
        (200, Some(4)),
        "{sc}"
    );
    let rv = sc["metadata"]["resourceVersion"].clone();
    let (code, sc) = send("?fieldManager=hpa", APPLY, &scale(4));
    assert_eq!(
        (code, &sc["metadata"]["resourceVersion"]),
        (200, &rv),
        "{sc}"
    );
    // kubectl's apply of the object now conflicts with the Scale's manager.
    let o = apply(&s, k, gadget, &[]);
    assert!(!o.ok, "{o:?}");
    assert!(
        o.stderr
            .contains(r#"conflict with "hpa" with subresource "scale": .spec.replicas"#),
        "{o:?}"
    );
    // A merge patch of the Scale is an Update of its own.
    let (code, sc) = send(
        "?fieldManager=scaler",
        "application/merge-patch+json",
        r#"{"spec":{"replicas":5}}"#,
    );
    assert_eq!(
        (code, sc["spec"]["replicas"].as_i64()),
        (200, Some(5)),
        "{sc}"
    );
    let (code, st) = send("", "application/strategic-merge-patch+json", "{}");
    assert_eq!(code, 415, "{st}");
    assert_eq!(
        st["message"],
        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    );
}
