//! The Kubernetes HTTP API of the gateway, request by request, against the real stack:
//! status codes and upstream's exact Status texts, discovery, Table output, OpenAPI,
//! patches, paging, selectors, tenants.

use crdplane_tests::{Rest, Stack};
use serde_json::{Value, json};

const CRD: &str = r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"crontabs.stable.example.com"},
 "spec":{"group":"stable.example.com","scope":"Namespaced",
  "names":{"plural":"crontabs","singular":"crontab","kind":"CronTab","shortNames":["ct"],"categories":["all"]},
  "versions":[{"name":"v1","served":true,"storage":true,
   "schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","properties":{
     "cronSpec":{"type":"string","pattern":"^(\\d+|\\*)(/\\d+)?(\\s+(\\d+|\\*)(/\\d+)?){4}$"},
     "image":{"type":"string"},"replicas":{"type":"integer","minimum":1,"maximum":10}}}}}},
   "additionalPrinterColumns":[{"name":"Spec","type":"string","jsonPath":".spec.cronSpec"},{"name":"Replicas","type":"integer","jsonPath":".spec.replicas"},{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}]}]}}"#;

/// The shared REST client with this file's helpers on top.
struct Api(Rest);

impl std::ops::Deref for Api {
    type Target = Rest;
    fn deref(&self) -> &Rest {
        &self.0
    }
}

impl Api {
    fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.call(
            "POST",
            path,
            Some("application/json"),
            Some(&body.to_string()),
        )
    }
}

fn crontab(name: &str, replicas: i64) -> Value {
    json!({"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":name,"labels":{"app":"a"}},"spec":{"cronSpec":"* * * * */5","image":"img","replicas":replicas}})
}

const CTS: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";

fn setup(stack: &Stack, tenant: &str) -> Api {
    let api = Api(Rest::new(format!("{}/clusters/{tenant}", stack.gateway)));
    let (code, body) = api.call(
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        Some("application/json"),
        Some(CRD),
    );
    assert_eq!(code, 201, "{body}");
    // Established is reported in the same write (single logical server).
    let conds = body["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let established = conds
        .iter()
        .find(|c| c["type"] == "Established")
        .expect("Established condition");
    assert_eq!(established["status"], "True");
    assert_eq!(established["reason"], "InitialNamesAccepted");
    api
}

#[test]
fn custom_resource_lifecycle_and_upstream_errors() {
    let stack = Stack::start_with_redis().unwrap();
    let api = setup(&stack, "api");

    let (code, created) = api.post(CTS, &crontab("a", 1));
    assert_eq!(code, 201, "{created}");
    let m = &created["metadata"];
    assert_eq!(
        (m["namespace"].as_str(), m["generation"].as_i64()),
        (Some("default"), Some(1))
    );
    assert!(m["uid"].as_str().is_some_and(|u| u.len() == 36) && m["creationTimestamp"].is_string());
    let rv = m["resourceVersion"].as_str().unwrap().to_string();

    let (code, e) = api.post(CTS, &crontab("a", 1));
    assert_eq!(
        (code, e["reason"].as_str(), e["message"].as_str()),
        (
            409,
            Some("AlreadyExists"),
            Some("crontabs.stable.example.com \"a\" already exists")
        )
    );
    assert_eq!(
        e["details"],
        json!({"name":"a","group":"stable.example.com","kind":"crontabs"})
    );

    let (code, e) = api.get(&format!("{CTS}/nope"));
    assert_eq!(
        (code, e["message"].as_str()),
        (404, Some("crontabs.stable.example.com \"nope\" not found"))
    );

    // generateName
    let mut g = crontab("", 1);
    g["metadata"] = json!({"generateName": "gen-"});
    let (code, gen_obj) = api.post(CTS, &g);
    assert_eq!(code, 201);
    assert!(
        gen_obj["metadata"]["name"]
            .as_str()
            .unwrap()
            .starts_with("gen-")
    );

    // Create in a namespace that does not exist.
    let (code, e) = api.post(
        "/apis/stable.example.com/v1/namespaces/nope/crontabs",
        &crontab("x", 1),
    );
    assert_eq!(
        (code, e["message"].as_str()),
        (404, Some("namespaces \"nope\" not found"))
    );

    // Update: stale resourceVersion → 409 with upstream's text; missing → 422.
    let mut upd = created.clone();
    upd["spec"]["replicas"] = json!(2);
    let (code, updated) = api.call(
        "PUT",
        &format!("{CTS}/a"),
        Some("application/json"),
        Some(&upd.to_string()),
    );
    assert_eq!(code, 200, "{updated}");
    assert_eq!(updated["metadata"]["generation"], 2);
    assert_ne!(
        updated["metadata"]["resourceVersion"].as_str(),
        Some(rv.as_str())
    );
    let (code, e) = api.call(
        "PUT",
        &format!("{CTS}/a"),
        Some("application/json"),
        Some(&upd.to_string()),
    );
    assert_eq!(code, 409);
    assert_eq!(
        e["message"],
        "Operation cannot be fulfilled on crontabs.stable.example.com \"a\": the object has been modified; please apply your changes to the latest version and try again"
    );
    let mut no_rv = upd.clone();
    no_rv["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    let (code, e) = api.call(
        "PUT",
        &format!("{CTS}/a"),
        Some("application/json"),
        Some(&no_rv.to_string()),
    );
    assert_eq!(
        (code, e["message"].as_str()),
        (
            422,
            Some(
                "crontabs.stable.example.com \"a\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"
            )
        )
    );

    // Patches: merge and JSON patch; other types 415 with upstream's message.
    let (code, p) = api.call(
        "PATCH",
        &format!("{CTS}/a"),
        Some("application/merge-patch+json"),
        Some(r#"{"spec":{"image":"img2"}}"#),
    );
    assert_eq!((code, p["spec"]["image"].as_str()), (200, Some("img2")));
    let (code, p) = api.call(
        "PATCH",
        &format!("{CTS}/a"),
        Some("application/json-patch+json"),
        Some(r#"[{"op":"replace","path":"/spec/replicas","value":7}]"#),
    );
    assert_eq!((code, p["spec"]["replicas"].as_i64()), (200, Some(7)));
    let (code, e) = api.call(
        "PATCH",
        &format!("{CTS}/a"),
        Some("application/strategic-merge-patch+json"),
        Some("{}"),
    );
    assert_eq!(code, 415);
    assert_eq!(e["reason"], "UnsupportedMediaType");
    assert!(e["message"].as_str().unwrap().starts_with("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json"));

    // Schema validation through a patch: 422 Invalid with a cause per field.
    let (code, e) = api.call(
        "PATCH",
        &format!("{CTS}/a"),
        Some("application/merge-patch+json"),
        Some(r#"{"spec":{"replicas":15}}"#),
    );
    assert_eq!(code, 422);
    assert_eq!(
        e["message"],
        "CronTab.stable.example.com \"a\" is invalid: spec.replicas: Invalid value: 15: spec.replicas in body should be less than or equal to 10"
    );
    assert_eq!(
        e["details"]["causes"][0],
        json!({"reason":"FieldValueInvalid","message":"Invalid value: 15: spec.replicas in body should be less than or equal to 10","field":"spec.replicas"})
    );

    // No name and a schema error: both in one 422, as upstream's strategy.Validate lists
    // ObjectMeta and schema errors together.
    let mut nameless = crontab("", 15);
    nameless["metadata"] = json!({});
    let (code, e) = api.post(CTS, &nameless);
    assert_eq!(code, 422, "{e}");
    assert_eq!(
        e["message"],
        "CronTab.stable.example.com \"\" is invalid: [metadata.name: Required value: name or generateName is required, spec.replicas: Invalid value: 15: spec.replicas in body should be less than or equal to 10]"
    );

    // apiVersion/kind must match the endpoint.
    let mut wrong = crontab("w", 1);
    wrong["kind"] = json!("Other");
    let (code, e) = api.post(CTS, &wrong);
    assert_eq!(code, 422, "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("kind: Invalid value: \"Other\": must be CronTab"),
        "{e}"
    );

    // Lists: fieldSelector on the name (kubectl delete's wait), labels, paging.
    let (code, l) = api.get(&format!("{CTS}?fieldSelector=metadata.name%3Da"));
    assert_eq!(code, 200);
    assert_eq!(
        (l["kind"].as_str(), l["items"].as_array().unwrap().len()),
        (Some("CronTabList"), 1)
    );
    let (code, e) = api.get(&format!("{CTS}?fieldSelector=spec.image%3Dx"));
    assert_eq!(
        (code, e["message"].as_str()),
        (400, Some("field label not supported: spec.image"))
    );
    for i in 0..5 {
        api.post(CTS, &crontab(&format!("p{i}"), 1));
    }
    let (_, page) = api.get(&format!("{CTS}?limit=3"));
    assert_eq!(page["items"].as_array().unwrap().len(), 3);
    let cont = page["metadata"]["continue"]
        .as_str()
        .expect("continue token")
        .to_string();
    assert_eq!(page["metadata"]["remainingItemCount"], 4);
    let (_, rest) = api.get(&format!("{CTS}?limit=3&continue={cont}"));
    assert_eq!(rest["items"].as_array().unwrap().len(), 3);
    let (_, rest2) = api.get(&format!(
        "{CTS}?limit=3&continue={}",
        rest["metadata"]["continue"].as_str().unwrap()
    ));
    assert_eq!(rest2["items"].as_array().unwrap().len(), 1);
    assert!(rest2["metadata"].get("continue").is_none());
    let (code, _) = api.get(&format!("{CTS}?continue=garbage"));
    assert_eq!(code, 400);

    // Table output with the CRD's printer columns and PartialObjectMetadata rows.
    let (code, t) = api.call_accept(
        &format!("{CTS}?fieldSelector=metadata.name%3Da"),
        "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
    );
    assert_eq!(code, 200);
    assert_eq!(
        crdplane_tests::column_names(&t),
        ["Name", "Spec", "Replicas", "Age"]
    );
    assert_eq!(t["rows"][0]["cells"][0], "a");
    assert_eq!(t["rows"][0]["cells"][2], 7);
    assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");

    // Delete returns a Success Status; a second delete is 404.
    let (code, s) = api.call("DELETE", &format!("{CTS}/a"), None, None);
    assert_eq!(
        (code, s["status"].as_str(), s["details"]["kind"].as_str()),
        (200, Some("Success"), Some("crontabs"))
    );
    let (code, _) = api.call("DELETE", &format!("{CTS}/a"), None, None);
    assert_eq!(code, 404);

    // Bodies over 3 MiB: 413 with upstream's text.
    let big = format!("{{\"x\":\"{}\"}}", "a".repeat(3 * 1024 * 1024 + 10));
    let (code, e) = api.call("POST", CTS, Some("application/json"), Some(&big));
    assert_eq!(
        (code, e["message"].as_str()),
        (413, Some("Request entity too large: limit is 3145728"))
    );

    // Unknown paths: upstream's not-found handler, plain text (see tests/read_path.rs).
    let (code, e) = api.get("/apis/nope.example.com/v1/things");
    assert_eq!((code, e.as_str()), (404, Some("404 page not found\n")));

    // Tenants are isolated: another tenant has no crontabs endpoint.
    let other = Api(Rest::new(format!("{}/clusters/other", stack.gateway)));
    assert_eq!(other.get(CTS).0, 404);
}

impl Api {
    fn call_accept(&self, path: &str, accept: &str) -> (u16, Value) {
        use std::io::{Read, Write};
        let url = format!("{}{path}", self.base);
        let rest = url.strip_prefix("http://").unwrap();
        let (host, p) = rest.split_once('/').unwrap();
        let mut s = std::net::TcpStream::connect(host).unwrap();
        write!(
            s,
            "GET /{p} HTTP/1.1\r\nHost: {host}\r\nAccept: {accept}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut buf = String::new();
        s.read_to_string(&mut buf).unwrap();
        let code = buf[9..12].parse().unwrap();
        let body = buf.split_once("\r\n\r\n").unwrap().1;
        (code, serde_json::from_str(body).unwrap_or(Value::Null))
    }
}

#[test]
fn discovery_openapi_namespaces_and_health() {
    let stack = Stack::start_with_redis().unwrap();
    let api = setup(&stack, "disc");
    let (code, h) = api.get("/healthz");
    assert_eq!((code, h.as_str()), (200, Some("ok")));
    let (code, v) = api.get("/version");
    assert_eq!((code, v["major"].as_str()), (200, Some("1")));
    let (_, groups) = api.get("/apis");
    let names: Vec<&str> = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"stable.example.com") && names.contains(&"apiextensions.k8s.io"),
        "{names:?}"
    );
    let (code, g) = api.get("/apis/stable.example.com");
    assert_eq!(
        (
            code,
            g["kind"].as_str(),
            g["preferredVersion"]["version"].as_str()
        ),
        (200, Some("APIGroup"), Some("v1"))
    );
    let (_, rl) = api.get("/apis/stable.example.com/v1");
    let ct = rl["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "crontabs")
        .expect("crontabs");
    assert_eq!(ct["singularName"], "crontab");
    assert_eq!(ct["namespaced"], true);
    assert_eq!(ct["kind"], "CronTab");
    assert_eq!(ct["shortNames"], json!(["ct"]));
    assert_eq!(ct["categories"], json!(["all"]));
    let verbs: Vec<&str> = ct["verbs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for v in [
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    ] {
        assert!(verbs.contains(&v), "{verbs:?}");
    }
    let (_, ext) = api.get("/apis/apiextensions.k8s.io/v1");
    assert!(
        ext["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "customresourcedefinitions")
    );
    let (_, core) = api.get("/api/v1");
    assert!(
        core["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "namespaces")
    );

    // OpenAPI v2 (JSON): a definition per served version with its GVK.
    let (code, doc) = api.get("/openapi/v2");
    assert_eq!(code, 200);
    let defs = doc["definitions"].as_object().unwrap();
    let (_, def) = defs
        .iter()
        .find(|(k, _)| k.ends_with(".v1.CronTab"))
        .expect("CronTab definition");
    assert_eq!(
        def["x-kubernetes-group-version-kind"][0],
        json!({"group":"stable.example.com","kind":"CronTab","version":"v1"})
    );
    // OpenAPI v3 index and document.
    let (code, idx) = api.get("/openapi/v3");
    assert_eq!(code, 200);
    let url = idx["paths"]["apis/stable.example.com/v1"]["serverRelativeURL"]
        .as_str()
        .expect("v3 path")
        .to_string();
    let (code, v3) = api.get(&url);
    assert_eq!(code, 200);
    assert!(
        v3["components"]["schemas"]
            .as_object()
            .unwrap()
            .keys()
            .any(|k| k.ends_with(".v1.CronTab"))
    );

    // Namespaces: the three defaults, create/get/delete, and cascade of custom resources.
    let (_, nss) = api.get("/api/v1/namespaces");
    let ns_names: Vec<&str> = nss["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(ns_names, ["default", "kube-public", "kube-system"]);
    let (code, ns) = api.post(
        "/api/v1/namespaces",
        &json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a"}}),
    );
    assert_eq!(
        (code, ns["status"]["phase"].as_str()),
        (201, Some("Active"))
    );
    let (code, e) = api.post(
        "/api/v1/namespaces",
        &json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"Bad_Name"}}),
    );
    assert_eq!(code, 422);
    assert!(e["message"].as_str().unwrap().starts_with("Namespace \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 label"));
    assert_eq!(
        api.post(
            "/apis/stable.example.com/v1/namespaces/team-a/crontabs",
            &crontab("c", 1)
        )
        .0,
        201
    );
    let (code, ns) = api.call("DELETE", "/api/v1/namespaces/team-a", None, None);
    assert_eq!(code, 200);
    assert_eq!(ns["status"]["phase"], "Terminating");
    // The namespace controller empties it in the background, then removes it.
    assert!(
        eventually(|| api.get("/api/v1/namespaces/team-a").0 == 404),
        "the namespace goes away once emptied"
    );
    let (_, all) = api.get("/apis/stable.example.com/v1/crontabs");
    assert!(
        all["items"].as_array().unwrap().is_empty(),
        "namespace deletion removed its custom resources"
    );
    // Recreating the namespace does not bring them back.
    api.post("/api/v1/namespaces", &json!({"metadata":{"name":"team-a"}}));
    let (_, l) = api.get("/apis/stable.example.com/v1/namespaces/team-a/crontabs");
    assert!(l["items"].as_array().unwrap().is_empty());

    // Deleting the CRD deletes its objects and unserves the endpoint; recreating starts empty.
    assert_eq!(api.post(CTS, &crontab("keep", 1)).0, 201);
    let (code, _) = api.call(
        "DELETE",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.stable.example.com",
        None,
        None,
    );
    assert_eq!(code, 200);
    assert!(
        eventually(|| api.get(CTS).0 == 404),
        "the CRD's endpoint is unserved once its objects are gone: {:?} {:?}",
        api.get(CTS),
        api.get(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.stable.example.com"
        )
    );
    let (code, _) = api.call(
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        Some("application/json"),
        Some(CRD),
    );
    assert_eq!(code, 201);
    let (_, l) = api.get(CTS);
    assert!(l["items"].as_array().unwrap().is_empty(), "{l}");
}

/// Polls `cond` (every 50 ms, up to 20 s) for background work such as namespace and CRD
/// finalization.
fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    false
}

/// Creates sent all at once (the gateway coalesces them into AdmitMany and CreateMany calls)
/// are each answered as a lone create would be: 201 for new names, 409 with upstream's text
/// for the second create of a name, 422 with upstream's text for an invalid object, per
/// tenant; resourceVersions are distinct and the list holds exactly the created objects.
#[test]
fn concurrent_creates_are_answered_one_by_one() {
    let stack = Stack::start_with_redis().unwrap();
    let apis = [setup(&stack, "acme"), setup(&stack, "other")];
    // (tenant index, name, replicas): every name twice in "acme", once in "other"; some invalid.
    let mut plan = Vec::new();
    for i in 0..16 {
        let replicas = if i % 5 == 4 { 15 } else { 1 + i % 10 };
        plan.push((0usize, format!("c{i}"), replicas));
        plan.push((0, format!("c{i}"), replicas));
        plan.push((1, format!("c{i}"), replicas));
    }
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(plan.len()));
    let results: Vec<(usize, String, i64, u16, Value)> = std::thread::scope(|s| {
        let handles: Vec<_> = plan
            .iter()
            .map(|(t, name, replicas)| {
                let barrier = barrier.clone();
                let api = &apis[*t];
                s.spawn(move || {
                    barrier.wait();
                    let (code, body) = api.post(CTS, &crontab(name, *replicas));
                    (*t, name.clone(), *replicas, code, body)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (t, api) in apis.iter().enumerate() {
        let mut rvs = std::collections::BTreeSet::new();
        let mut created = std::collections::BTreeSet::new();
        for i in 0..16 {
            let name = format!("c{i}");
            let answers: Vec<&(usize, String, i64, u16, Value)> =
                results.iter().filter(|r| r.0 == t && r.1 == name).collect();
            let mut codes: Vec<u16> = answers.iter().map(|r| r.3).collect();
            codes.sort();
            if i % 5 == 4 {
                assert!(codes.iter().all(|&c| c == 422), "{name}: {codes:?}");
                assert_eq!(
                    answers[0].4["message"],
                    format!(
                        "CronTab.stable.example.com \"{name}\" is invalid: spec.replicas: Invalid value: 15: spec.replicas in body should be less than or equal to 10"
                    )
                );
                continue;
            }
            let want: &[u16] = if t == 0 { &[201, 409] } else { &[201] };
            assert_eq!(codes, want, "{name}");
            for (_, _, replicas, code, body) in answers {
                if *code == 201 {
                    assert_eq!(body["metadata"]["name"], name.as_str());
                    assert_eq!(body["spec"]["replicas"], *replicas);
                    let rv = body["metadata"]["resourceVersion"].as_str().unwrap();
                    assert!(rvs.insert(rv.to_string()), "rv {rv} given twice");
                    created.insert(name.clone());
                } else {
                    assert_eq!(body["reason"], "AlreadyExists");
                    assert_eq!(
                        body["message"],
                        format!("crontabs.stable.example.com \"{name}\" already exists")
                    );
                }
            }
        }
        let (code, list) = api.get(CTS);
        assert_eq!(code, 200);
        let listed: std::collections::BTreeSet<String> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(listed, created);
        assert_eq!(created.len(), 13);
    }
}

/// A watch of a CRD's resources ends when upstream would tear down the CRD's storage: the
/// CRD's spec or accepted names change, or the CRD is deleted (after the DELETED events of
/// its objects). A metadata-only change of the CRD, and the same CRD in another tenant,
/// leave watches running.
#[test]
fn watches_end_when_their_crd_is_deleted_or_respecified() {
    use crdplane_tests::WatchStream;
    use std::time::Duration;
    let stack = Stack::start_with_redis().unwrap();
    let (acme, other) = (setup(&stack, "acme"), setup(&stack, "other"));
    let watch = |api: &Api| {
        let w = WatchStream::open(&format!("{}{CTS}?watch=1", api.base), None).unwrap();
        assert_eq!(w.status, 200);
        w
    };
    let added = |w: &WatchStream, name: &str| {
        let e = w.next(Duration::from_secs(10)).expect("an event");
        assert_eq!(e["type"], "ADDED", "{e}");
        assert_eq!(e["object"]["metadata"]["name"], name);
    };
    let (code, a) = acme.post(CTS, &crontab("a", 1));
    assert_eq!(code, 201, "{a}");
    let w = watch(&acme);
    added(&w, "a");
    let w_other = watch(&other);
    let crd_path =
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.stable.example.com";

    // A label on the CRD: its storage stays, so does the watch.
    let (code, body) = acme.call(
        "PATCH",
        crd_path,
        Some("application/merge-patch+json"),
        Some(r#"{"metadata":{"labels":{"team":"a"}}}"#),
    );
    assert_eq!(code, 200, "{body}");
    let (code, _) = acme.post(CTS, &crontab("b", 2));
    assert_eq!(code, 201);
    added(&w, "b");
    assert!(!w.ended(Duration::from_secs(1)));

    // A new printer column changes the spec: the watch ends (informers watch again).
    let (code, body) = acme.call(
        "PATCH",
        crd_path,
        Some("application/json-patch+json"),
        Some(r#"[{"op":"add","path":"/spec/versions/0/additionalPrinterColumns/-","value":{"name":"Image","type":"string","jsonPath":".spec.image"}}]"#),
    );
    assert_eq!(code, 200, "{body}");
    assert!(
        w.ended(Duration::from_secs(20)),
        "the watch outlived a spec change"
    );

    // Deleting the CRD: a new watch sees its objects go, then ends.
    let w = watch(&acme);
    added(&w, "a");
    added(&w, "b");
    let (code, body) = acme.call("DELETE", crd_path, None, None);
    assert_eq!(code, 200, "{body}");
    let mut deleted: Vec<String> = w
        .take(2, Duration::from_secs(20))
        .iter()
        .map(|e| {
            assert_eq!(e["type"], "DELETED", "{e}");
            e["object"]["metadata"]["name"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    deleted.sort();
    assert_eq!(deleted, ["a", "b"]);
    assert!(
        w.ended(Duration::from_secs(20)),
        "the watch outlived its CRD"
    );

    // The other tenant's CRD of the same name is untouched: its watch goes on.
    assert!(!w_other.ended(Duration::from_secs(1)));
    let (code, _) = other.post(CTS, &crontab("c", 3));
    assert_eq!(code, 201);
    added(&w_other, "c");
}
