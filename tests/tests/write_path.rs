//! The write path of existing objects against the real stack (real redis-server, real
//! service binaries, real kubectl): re-applying patches after lost races (etcd3 store.go
//! `GuaranteedUpdate`), no-op writes that store nothing, evanphx/json-patch's `test` of a
//! missing path against null, create with a resourceVersion, the 10,000-operation bound of
//! JSON patches, and the texts of these paths.

use crdplane_tests::{Rest, Stack, WatchStream, kubectls};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::Duration;

const CRD: &str = include_str!("../testdata/sub-crontab-crd.yaml");
const CTS: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";

/// The shared REST client with this file's helpers on top.
#[derive(Clone)]
struct Api(Rest);

impl std::ops::Deref for Api {
    type Target = Rest;
    fn deref(&self) -> &Rest {
        &self.0
    }
}

impl Api {
    fn get(&self, path: &str) -> Value {
        let (code, v) = self.call("GET", path, None, None);
        assert_eq!(code, 200, "{v}");
        v
    }
}

/// `base` is the gateway URL, with `/clusters/<tenant>` for a tenant of its own.
fn setup(base: String) -> Api {
    let api = Api(Rest::new(base));
    let (code, body) = api.call(
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        Some("application/yaml"),
        Some(CRD),
    );
    assert_eq!(code, 201, "{body}");
    // Wait until the CRD serves (Established): a list answers 200.
    for _ in 0..500 {
        if api.call("GET", CTS, None, None).0 == 200 {
            return api;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("CRD never served");
}

fn crontab(name: &str) -> Value {
    json!({"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":name},
           "spec":{"cronSpec":"* * * * */5","image":"img","replicas":1}})
}

fn rv(v: &Value) -> String {
    v["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_string()
}

/// Runs `n` requests at once (threads released together) and returns their codes.
fn concurrently(n: usize, f: impl Fn(usize) -> (u16, Value) + Sync) -> Vec<(u16, Value)> {
    let barrier = std::sync::Barrier::new(n);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..n)
            .map(|i| {
                let (f, b) = (&f, &barrier);
                s.spawn(move || {
                    b.wait();
                    f(i)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn all_ok(rs: &[(u16, Value)]) {
    let bad: Vec<_> = rs.iter().filter(|(c, _)| *c != 200).collect();
    assert!(
        bad.is_empty(),
        "{} of {} failed: {bad:?}",
        bad.len(),
        rs.len()
    );
}

#[test]
fn concurrent_patches_without_resource_version_all_succeed() {
    let stack = Stack::start_with_redis().unwrap();
    let api = setup(format!("{}/clusters/race", stack.gateway));
    let (code, v) = api.json("POST", CTS, &crontab("x"));
    assert_eq!(code, 201, "{v}");

    // Main resource: 20 merge patches with distinct label keys, all applied.
    let rs = concurrently(20, |i| {
        api.merge(
            &format!("{CTS}/x"),
            &json!({"metadata":{"labels":{format!("k{i}"): "v"}}}),
        )
    });
    all_ok(&rs);
    let x = api.get(&format!("{CTS}/x"));
    for i in 0..20 {
        assert_eq!(x["metadata"]["labels"][format!("k{i}")], "v", "{x}");
    }
    // The same with JSON patches.
    let rs = concurrently(20, |i| {
        let p = json!([{"op":"add","path":format!("/metadata/labels/j{i}"),"value":"v"}]);
        api.call(
            "PATCH",
            &format!("{CTS}/x"),
            Some("application/json-patch+json"),
            Some(&p.to_string()),
        )
    });
    all_ok(&rs);
    let x = api.get(&format!("{CTS}/x"));
    for i in 0..20 {
        assert_eq!(x["metadata"]["labels"][format!("j{i}")], "v", "{x}");
    }

    // /status: 20 merge patches; every one lands (no 409).
    let rs = concurrently(20, |i| {
        api.merge(
            &format!("{CTS}/x/status"),
            &json!({"status":{"replicas": i}}),
        )
    });
    all_ok(&rs);
    // /scale: 20 merge patches of spec.replicas.
    let rs = concurrently(20, |i| {
        api.merge(
            &format!("{CTS}/x/scale"),
            &json!({"spec":{"replicas": i % 10}}),
        )
    });
    all_ok(&rs);

    // Namespaces (unconditional updates allowed) and CRDs take the same path.
    let rs = concurrently(20, |i| {
        api.merge(
            "/api/v1/namespaces/default",
            &json!({"metadata":{"labels":{format!("n{i}"): "v"}}}),
        )
    });
    all_ok(&rs);
    let ns = api.get("/api/v1/namespaces/default");
    for i in 0..20 {
        assert_eq!(ns["metadata"]["labels"][format!("n{i}")], "v", "{ns}");
    }
    let crd = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.stable.example.com";
    let rs = concurrently(20, |i| {
        api.merge(crd, &json!({"metadata":{"labels":{format!("c{i}"): "v"}}}))
    });
    all_ok(&rs);
    let c = api.get(crd);
    for i in 0..20 {
        assert_eq!(c["metadata"]["labels"][format!("c{i}")], "v", "{c}");
    }

    // A resourceVersion in the patch stays a precondition: a stale one is a 409.
    let (code, v) = api.merge(
        &format!("{CTS}/x"),
        &json!({"metadata":{"resourceVersion":"1","labels":{"late":"v"}}}),
    );
    assert_eq!(code, 409, "{v}");
    assert_eq!(v["reason"], "Conflict");
}

#[test]
fn puts_without_resource_version_follow_each_strategy() {
    let stack = Stack::start_with_redis().unwrap();
    let api = setup(format!("{}/clusters/put", stack.gateway));
    let (code, x) = api.json("POST", CTS, &crontab("x"));
    assert_eq!(code, 201, "{x}");
    // Custom resources do not allow unconditional updates (422) ...
    let (code, v) = api.json("PUT", &format!("{CTS}/x"), &crontab("x"));
    assert_eq!(code, 422, "{v}");
    assert_eq!(
        v["message"],
        "crontabs.stable.example.com \"x\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"
    );
    // ... but a missing object is a 404 first (store.go: NotFound before the rv check).
    let (code, v) = api.json("PUT", &format!("{CTS}/nope"), &crontab("nope"));
    assert_eq!(code, 404, "{v}");
    assert_eq!(
        v["message"],
        "crontabs.stable.example.com \"nope\" not found"
    );
    // Namespaces allow them (namespace strategy.go AllowUnconditionalUpdate).
    let (code, v) = api.json(
        "PUT",
        "/api/v1/namespaces/default",
        &json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"default","labels":{"put":"yes"}}}),
    );
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["metadata"]["labels"]["put"], "yes");
    // CRDs do not.
    let crd = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.stable.example.com";
    let mut c = api.get(crd);
    c["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    let (code, v) = api.json("PUT", crd, &c);
    assert_eq!(code, 422, "{v}");
}

#[test]
fn no_op_writes_store_nothing() {
    let stack = Stack::start_with_redis().unwrap();
    let api = setup(format!("{}/clusters/noop", stack.gateway));
    let (code, x) = api.json("POST", CTS, &crontab("x"));
    assert_eq!(code, 201, "{x}");
    let (code, x) = api.merge(
        &format!("{CTS}/x/status"),
        &json!({"status":{"replicas":1}}),
    );
    assert_eq!(code, 200, "{x}");
    let rv0 = rv(&x);
    let watch = WatchStream::open(
        &format!("{}{CTS}?watch=1&resourceVersion={rv0}", api.base),
        None,
    )
    .unwrap();
    // Patches, PUTs and status writes that change nothing: same rv, same generation.
    let (code, v) = api.merge(&format!("{CTS}/x"), &json!({"spec":{"image":"img"}}));
    assert_eq!((code, rv(&v)), (200, rv0.clone()), "{v}");
    assert_eq!(v["metadata"]["generation"], 1);
    let (code, v) = api.merge(
        &format!("{CTS}/x/status"),
        &json!({"status":{"replicas":1}}),
    );
    assert_eq!((code, rv(&v)), (200, rv0.clone()), "{v}");
    let (code, v) = api.json("PUT", &format!("{CTS}/x"), &x);
    assert_eq!((code, rv(&v)), (200, rv0.clone()), "{v}");
    let (code, v) = api.json("PUT", &format!("{CTS}/x/status"), &x);
    assert_eq!((code, rv(&v)), (200, rv0.clone()), "{v}");
    // Status through the main resource is ignored: no change either.
    let (code, v) = api.merge(&format!("{CTS}/x"), &json!({"status":{"replicas":7}}));
    assert_eq!((code, rv(&v)), (200, rv0.clone()), "{v}");
    let (code, v) = api.merge(&format!("{CTS}/x/scale"), &json!({"spec":{"replicas":1}}));
    assert_eq!(code, 200, "{v}");
    assert_eq!(rv(&api.get(&format!("{CTS}/x"))), rv0);
    // A real change: the watch's first event is that change, nothing before it.
    let (code, v) = api.merge(
        &format!("{CTS}/x"),
        &json!({"metadata":{"labels":{"a":"b"}}}),
    );
    assert_eq!(code, 200, "{v}");
    assert_ne!(rv(&v), rv0);
    let ev = watch.next(Duration::from_secs(10)).expect("an event");
    assert_eq!(ev["type"], "MODIFIED", "{ev}");
    assert_eq!(ev["object"]["metadata"]["labels"]["a"], "b", "{ev}");

    // Namespaces and CRDs.
    let ns = api.get("/api/v1/namespaces/default");
    let (code, v) = api.merge(
        "/api/v1/namespaces/default",
        &json!({"metadata":{"labels":ns["metadata"]["labels"].clone()}}),
    );
    assert_eq!((code, rv(&v)), (200, rv(&ns)), "{v}");
    let crd = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.stable.example.com";
    let c = api.get(crd);
    let (code, v) = api.merge(crd, &json!({"spec":{"group":"stable.example.com"}}));
    assert_eq!((code, rv(&v)), (200, rv(&c)), "{v}");
    let (code, v) = api.json("PUT", crd, &c);
    assert_eq!((code, rv(&v)), (200, rv(&c)), "{v}");
}

fn newest_and_oldest_kubectls() -> Vec<PathBuf> {
    let ks = kubectls();
    match (ks.first(), ks.last()) {
        (Some(a), Some(b)) if a != b => vec![a.clone(), b.clone()],
        (Some(a), _) => vec![a.clone()],
        _ => vec![],
    }
}

#[test]
fn kubectl_patch_without_change_prints_no_change() {
    let ks = newest_and_oldest_kubectls();
    if ks.is_empty() {
        eprintln!("skipping: no kubectl on this machine");
        return;
    }
    let stack = Stack::start_with_redis().unwrap();
    let api = setup(stack.gateway.clone());
    let (code, x) = api.json("POST", CTS, &crontab("x"));
    assert_eq!(code, 201, "{x}");
    for k in &ks {
        let before = rv(&api.get(&format!("{CTS}/x")));
        let o = stack.kubectl(
            k,
            &[
                "patch",
                "crontab",
                "x",
                "--type=merge",
                "-p",
                r#"{"spec":{"image":"img"}}"#,
            ],
        );
        assert!(o.ok, "{k:?}: {}", o.stderr);
        assert_eq!(
            o.stdout.trim(),
            "crontab.stable.example.com/x patched (no change)",
            "{k:?}"
        );
        assert_eq!(rv(&api.get(&format!("{CTS}/x"))), before, "{k:?}");
        let o = stack.kubectl(
            k,
            &["label", "namespace", "default", "team=a", "--overwrite"],
        );
        assert!(o.ok, "{k:?}: {}", o.stderr);
        let o = stack.kubectl(
            k,
            &["label", "namespace", "default", "team=a", "--overwrite"],
        );
        assert!(o.ok, "{k:?}: {}", o.stderr);
        assert!(
            o.stdout.contains("not labeled")
                || o.stdout.contains("(no change)")
                || o.stdout.contains("labeled"),
            "{k:?}: {}",
            o.stdout
        );
        let o = stack.kubectl(
            k,
            &[
                "patch",
                "crd",
                "crontabs.stable.example.com",
                "--type=merge",
                "-p",
                r#"{"spec":{"group":"stable.example.com"}}"#,
            ],
        );
        assert!(o.ok, "{k:?}: {}", o.stderr);
        assert_eq!(
            o.stdout.trim(),
            "customresourcedefinition.apiextensions.k8s.io/crontabs.stable.example.com patched (no change)",
            "{k:?}"
        );
        // A real change still prints plain "patched".
        let o = stack.kubectl(
            k,
            &[
                "patch",
                "crontab",
                "x",
                "--type=merge",
                "-p",
                &format!(r#"{{"metadata":{{"labels":{{"k":"{}"}}}}}}"#, before),
            ],
        );
        assert!(o.ok, "{k:?}: {}", o.stderr);
        assert_eq!(
            o.stdout.trim(),
            "crontab.stable.example.com/x patched",
            "{k:?}"
        );
    }
}

#[test]
fn json_patch_test_of_missing_path_against_null() {
    let stack = Stack::start_with_redis().unwrap();
    let api = setup(format!("{}/clusters/jp", stack.gateway));
    let (code, x) = api.json("POST", CTS, &crontab("x"));
    assert_eq!(code, 201, "{x}");
    // kube-rs's finalizer helper: test that finalizers are absent, then add the first one.
    let p = json!([{"op":"test","path":"/metadata/finalizers","value":null},
                   {"op":"add","path":"/metadata/finalizers","value":["example.com/f"]}]);
    let jp = |p: &Value| {
        api.call(
            "PATCH",
            &format!("{CTS}/x"),
            Some("application/json-patch+json"),
            Some(&p.to_string()),
        )
    };
    let (code, v) = jp(&p);
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["metadata"]["finalizers"], json!(["example.com/f"]));
    // Now the test fails: upstream's generic 422 (NewGenericServerResponse), nothing applied.
    let (code, v) = jp(&p);
    assert_eq!(code, 422, "{v}");
    assert_eq!(
        v,
        json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
               "message":"the server rejected our request due to an error in our request",
               "reason":"Invalid","details":{},"code":422})
    );
    // Remove it again (test of the present value passes).
    let (code, v) = jp(
        &json!([{"op":"test","path":"/metadata/finalizers/0","value":"example.com/f"},
                               {"op":"remove","path":"/metadata/finalizers"}]),
    );
    assert_eq!(code, 200, "{v}");
}

#[test]
fn create_with_resource_version_and_strict_texts() {
    let stack = Stack::start_with_redis().unwrap();
    let api = setup(format!("{}/clusters/texts", stack.gateway));
    let mut c = crontab("x");
    c["metadata"]["resourceVersion"] = json!("12");
    let (code, v) = api.json("POST", CTS, &c);
    assert_eq!(code, 500, "{v}");
    assert_eq!(
        v,
        json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
               "message":"resourceVersion should not be set on objects to be created","code":500})
    );
    assert_eq!(api.call("GET", &format!("{CTS}/x"), None, None).0, 404);
    // dryRun skips storage's check (dryrun.go Create copies the object).
    let (code, v) = api.json("POST", &format!("{CTS}?dryRun=All"), &c);
    assert_eq!(code, 201, "{v}");

    // Strict field validation: create/update carry the decoder's prefix, patch does not.
    let mut c = crontab("y");
    c["spec"]["bogus"] = json!(1);
    let (code, v) = api.json("POST", &format!("{CTS}?fieldValidation=Strict"), &c);
    assert_eq!(code, 400, "{v}");
    assert_eq!(
        v["message"],
        "CronTab in version \"v1\" cannot be handled as a CronTab: strict decoding error: unknown field \"spec.bogus\""
    );
    let (code, y) = api.json("POST", CTS, &crontab("y"));
    assert_eq!(code, 201, "{y}");
    let mut u = y.clone();
    u["spec"]["bogus"] = json!(1);
    let (code, v) = api.json("PUT", &format!("{CTS}/y?fieldValidation=Strict"), &u);
    assert_eq!(code, 400, "{v}");
    assert_eq!(
        v["message"],
        "CronTab in version \"v1\" cannot be handled as a CronTab: strict decoding error: unknown field \"spec.bogus\""
    );
    let (code, v) = api.merge(
        &format!("{CTS}/y?fieldValidation=Strict"),
        &json!({"spec":{"bogus":1}}),
    );
    assert_eq!(code, 400, "{v}");
    assert_eq!(
        v["message"],
        "strict decoding error: unknown field \"spec.bogus\""
    );
    // Invalid errors name the kind.
    let (code, v) = api.merge(&format!("{CTS}/y"), &json!({"spec":{"replicas":11}}));
    assert_eq!(code, 422, "{v}");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .starts_with("CronTab.stable.example.com \"y\" is invalid: "),
        "{v}"
    );
}

/// A merge patch that is not an object (Python clients send a list body as a merge patch).
/// With fieldValidation Warn (upstream's default) or Strict, patch.go decodes the patch
/// strictly into a map first: 400 `error decoding patch: …`. With Ignore, evanphx/json-patch
/// `MergePatch` replaces the document with the array, which then fails to decode (422 on field
/// `patch`), and `null` or a scalar is `Invalid JSON Patch` (400). Nothing is written.
#[test]
fn merge_patches_that_are_not_objects() {
    let stack = Stack::start_with_redis().unwrap();
    let api = setup(format!("{}/clusters/mp", stack.gateway));
    let (code, x) = api.json("POST", CTS, &crontab("x"));
    assert_eq!(code, 201, "{x}");
    let path = format!("{CTS}/x");
    let patch = |query: &str, body: &str| {
        api.call(
            "PATCH",
            &format!("{path}{query}"),
            Some("application/merge-patch+json"),
            Some(body),
        )
    };
    for query in ["", "?fieldValidation=Warn", "?fieldValidation=Strict"] {
        for (body, go_type) in [("[1]", "array"), ("5", "number"), ("\"s\"", "string")] {
            let (code, v) = patch(query, body);
            assert_eq!(code, 400, "{query} {body}: {v}");
            assert_eq!(
                v["message"],
                format!(
                    "error decoding patch: json: cannot unmarshal {go_type} into Go value of type map[string]interface {{}}"
                ),
                "{query} {body}"
            );
        }
    }
    let list = json!([{"op": "add", "path": "/spec/a", "b": null}]).to_string();
    let (code, v) = patch("?fieldValidation=Ignore", &list);
    assert_eq!(code, 422, "{v}");
    let value = r#"[{\"op\":\"add\",\"path\":\"/spec/a\"}]"#;
    let err = concat!(
        "couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value",
        r#" of type struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "#,
        r#""json:\"kind,omitempty\"" }"#
    );
    assert_eq!(
        v,
        json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
               "message": format!(" \"\" is invalid: patch: Invalid value: \"{value}\": {err}"),
               "reason":"Invalid",
               "details":{"causes":[{"reason":"FieldValueInvalid",
                   "message": format!("Invalid value: \"{value}\": {err}"),"field":"patch"}]},
               "code":422})
    );
    for body in ["null", "5", "\"s\""] {
        let (code, v) = patch("?fieldValidation=Ignore", body);
        assert_eq!(
            (code, v["message"].as_str()),
            (400, Some("Invalid JSON Patch")),
            "{body}"
        );
    }
    // `null` decodes strictly (into a nil map), then is a bad merge patch.
    let (code, v) = patch("", "null");
    assert_eq!(
        (code, v["message"].as_str()),
        (400, Some("Invalid JSON Patch"))
    );
    assert_eq!(
        api.get(&path)["metadata"]["resourceVersion"],
        x["metadata"]["resourceVersion"]
    );
}

/// patch.go `maxJSONPatchOperations`: a JSON patch of more than 10,000 operations is a 413
/// before anything is applied, for custom resources and namespaces alike; 10,000 apply.
#[test]
fn json_patches_are_bounded_at_ten_thousand_operations() {
    let stack = Stack::start_with_redis().unwrap();
    let api = setup(format!("{}/clusters/jpb", stack.gateway));
    let (code, x) = api.json("POST", CTS, &crontab("x"));
    assert_eq!(code, 201, "{x}");
    let ops = |n: usize, path: &str| {
        let one = format!(r#"{{"op":"replace","path":"{path}","value":"v"}}"#);
        format!("[{}]", vec![one; n].join(","))
    };
    let (code, v) = api.call(
        "PATCH",
        "/api/v1/namespaces/default",
        Some("application/json-patch+json"),
        Some(r#"[{"op":"add","path":"/metadata/labels/a","value":"v"}]"#),
    );
    assert_eq!(code, 200, "{v}");
    for (path, field) in [
        (format!("{CTS}/x"), "/spec/image"),
        (
            "/api/v1/namespaces/default".to_string(),
            "/metadata/labels/a",
        ),
    ] {
        let (code, v) = api.call(
            "PATCH",
            &path,
            Some("application/json-patch+json"),
            Some(&ops(10_001, field)),
        );
        assert_eq!(code, 413, "{path}: {v}");
        assert_eq!(v["reason"], "RequestEntityTooLarge");
        assert_eq!(
            v["message"],
            "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001"
        );
        let (code, v) = api.call(
            "PATCH",
            &path,
            Some("application/json-patch+json"),
            Some(&ops(10_000, field)),
        );
        assert_eq!(code, 200, "{path}: {v}");
    }
}
