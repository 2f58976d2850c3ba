//! Lifecycle end to end on the real stack (real redis-server, real service binaries, real
//! kubectl): CRD deletion (Terminating, background instance deletion honouring finalizers,
//! restart safety), namespace deletion (Terminating, content deletion across CRDs,
//! protected namespaces), a CRD served in two versions, categories (`kubectl get all`),
//! discovery and OpenAPI freshness.

use crdplane_tests::{
    RedisServer, Stack, exchange, http_get, http_request, kubeconfig_yaml, kubectls,
};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const TWO_VERSIONS: &str = include_str!("../testdata/lc-crontab-two-versions.yaml");
const WIDGETS: &str = include_str!("../testdata/lc-widget-crd.yaml");
const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const CRD_NAME: &str = "crontabs.stable.example.com";

fn json_of(body: &str) -> Value {
    // Upstream's not-found handler answers paths no CRD serves in plain text.
    if body == "404 page not found\n" {
        return Value::String(body.into());
    }
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

fn post(url: &str, ct: &str, body: &str) -> (u16, Value) {
    let (code, b) = http_request("POST", url, Some(ct), Some(body)).unwrap();
    (code, json_of(&b))
}

fn get(url: &str) -> (u16, Value) {
    let (code, b) = http_get(url).unwrap();
    (code, json_of(&b))
}

fn delete(url: &str) -> (u16, Value) {
    let (code, b) = http_request("DELETE", url, None, None).unwrap();
    (code, json_of(&b))
}

fn merge_patch(url: &str, patch: &Value) -> (u16, Value) {
    let (code, b) = http_request(
        "PATCH",
        url,
        Some("application/merge-patch+json"),
        Some(&patch.to_string()),
    )
    .unwrap();
    (code, json_of(&b))
}

fn condition<'a>(v: &'a Value, t: &str) -> &'a Value {
    v["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == t))
        .unwrap_or_else(|| panic!("no {t} condition in {v}"))
}

/// Polls `f` until it returns Some, for at most `secs` seconds.
fn wait_for<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn cr(name: &str, extra_meta: Value, spec: Value) -> String {
    let mut o = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
        "metadata": {"name": name}, "spec": spec});
    if let (Some(m), Some(x)) = (o["metadata"].as_object_mut(), extra_meta.as_object()) {
        for (k, v) in x {
            m.insert(k.clone(), v.clone());
        }
    }
    o.to_string()
}

fn create_crd(base: &str, yaml: &str) -> Value {
    let (code, v) = post(&format!("{base}{CRDS}"), "application/yaml", yaml);
    assert_eq!(code, 201, "{v}");
    v
}

#[test]
fn crd_deletion_waits_for_instances_and_their_finalizers() {
    let stack = Stack::start_with_redis().expect("stack");
    let gw = format!("{}/clusters/lc-crd", stack.gateway);
    create_crd(&gw, TWO_VERSIONS);
    let crs = format!("{gw}/apis/stable.example.com/v1/namespaces/default/crontabs");
    for n in ["a", "b"] {
        let (code, v) = post(&crs, "application/json", &cr(n, json!({}), json!({})));
        assert_eq!(code, 201, "{v}");
    }
    let (code, v) = post(
        &crs,
        "application/json",
        &cr(
            "held",
            json!({"finalizers": ["example.com/hold"]}),
            json!({}),
        ),
    );
    assert_eq!(code, 201, "{v}");
    // A fresh CRD carries no cleanup finalizer (upstream adds it on DELETE).
    let (_, before) = get(&format!("{gw}{CRDS}/{CRD_NAME}"));
    assert!(before["metadata"].get("finalizers").is_none(), "{before}");

    // DELETE answers 200 with the CRD marked for deletion.
    let (code, d) = delete(&format!("{gw}{CRDS}/{CRD_NAME}"));
    assert_eq!(code, 200, "{d}");
    assert_eq!(d["kind"], "CustomResourceDefinition");
    assert!(d["metadata"]["deletionTimestamp"].is_string(), "{d}");
    assert_eq!(
        d["metadata"]["finalizers"],
        json!(["customresourcecleanup.apiextensions.k8s.io"])
    );
    let t = condition(&d, "Terminating");
    assert_eq!(t["status"], "True");
    assert_eq!(t["reason"], "InstanceDeletionPending");
    assert_eq!(
        t["message"],
        "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon"
    );
    assert_eq!(condition(&d, "Established")["status"], "True");

    // The instances without finalizers go; the held one is marked and waited for.
    let items = wait_for(10, "instances deleted", || {
        let (_, l) = get(&crs);
        let items = l["items"].as_array().cloned().unwrap_or_default();
        (items.len() == 1 && items[0]["metadata"]["deletionTimestamp"].is_string()).then_some(items)
    });
    assert_eq!(items[0]["metadata"]["name"], "held");
    assert_eq!(items[0]["metadata"]["deletionGracePeriodSeconds"], 0);
    let (_, waiting) = get(&format!("{gw}{CRDS}/{CRD_NAME}"));
    let t = condition(&waiting, "Terminating");
    assert_eq!(
        (
            t["status"].as_str(),
            t["reason"].as_str(),
            t["message"].as_str()
        ),
        (
            Some("True"),
            Some("InstanceDeletionInProgress"),
            Some("CustomResource deletion is in progress")
        ),
        "{waiting}"
    );

    // While terminating: create is refused exactly as upstream, reads still work.
    let (code, e) = post(&crs, "application/json", &cr("late", json!({}), json!({})));
    assert_eq!(code, 405);
    assert_eq!(
        e,
        json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
            "message":"create not allowed while custom resource definition is terminating",
            "reason":"MethodNotAllowed","details":{"group":"stable.example.com","kind":"crontabs"},"code":405})
    );
    assert_eq!(get(&format!("{crs}/held")).0, 200);
    // Discovery (legacy and aggregated) lists only the verbs left.
    let want = json!(["delete", "deletecollection", "get", "list", "watch"]);
    let (_, rl) = get(&format!("{gw}/apis/stable.example.com/v1"));
    assert_eq!(rl["resources"][0]["verbs"], want, "{rl}");
    let (_, _, agg) = exchange(
        "GET",
        &format!("{gw}/apis"),
        &[(
            "Accept",
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
        )],
        "",
    );
    let agg = json_of(&agg);
    let g = agg["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["metadata"]["name"] == "stable.example.com")
        .unwrap();
    assert_eq!(g["versions"][0]["resources"][0]["verbs"], want);
    // A second DELETE returns the CRD as it is.
    let (code, again) = delete(&format!("{gw}{CRDS}/{CRD_NAME}"));
    assert_eq!(code, 200);
    assert_eq!(
        again["metadata"]["deletionTimestamp"],
        d["metadata"]["deletionTimestamp"]
    );
    // It keeps waiting while the finalizer is there.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(get(&format!("{gw}{CRDS}/{CRD_NAME}")).0, 200);

    // The owner removes its finalizer: the object goes, then the CRD, then its endpoints.
    let (code, v) = merge_patch(
        &format!("{crs}/held"),
        &json!({"metadata": {"finalizers": null}}),
    );
    assert!(code == 200 || code == 404, "{code} {v}");
    wait_for(10, "CRD gone", || {
        (get(&format!("{gw}{CRDS}/{CRD_NAME}")).0 == 404).then_some(())
    });
    wait_for(5, "endpoints gone", || (get(&crs).0 == 404).then_some(()));
    assert_eq!(get(&format!("{gw}/apis/stable.example.com/v1")).0, 404);

    // Recreated, it starts empty.
    create_crd(&gw, TWO_VERSIONS);
    let l = wait_for(5, "served again", || {
        let (code, l) = get(&crs);
        (code == 200).then_some(l)
    });
    assert_eq!(l["items"], json!([]), "{l}");
}

#[test]
fn crd_deletion_resumes_after_a_restart() {
    let redis = RedisServer::start().expect("redis");
    let (crs, crd_url);
    {
        let stack = Stack::start(&redis.url()).expect("stack");
        let gw = format!("{}/clusters/lc-restart", stack.gateway);
        create_crd(&gw, TWO_VERSIONS);
        crs = "/clusters/lc-restart/apis/stable.example.com/v1/namespaces/default/crontabs";
        crd_url = format!("/clusters/lc-restart{CRDS}/{CRD_NAME}");
        let (code, v) = post(
            &format!("{}{crs}", stack.gateway),
            "application/json",
            &cr(
                "held",
                json!({"finalizers": ["example.com/hold"]}),
                json!({}),
            ),
        );
        assert_eq!(code, 201, "{v}");
        assert_eq!(delete(&format!("{}{crd_url}", stack.gateway)).0, 200);
        wait_for(10, "held object marked", || {
            let (_, o) = get(&format!("{}{crs}/held", stack.gateway));
            o["metadata"]["deletionTimestamp"].is_string().then_some(())
        });
        // Every process stops here, with the deletion in progress.
    }
    let stack = Stack::start(&redis.url()).expect("restarted stack");
    let (code, v) = get(&format!("{}{crd_url}", stack.gateway));
    assert_eq!(code, 200, "{v}");
    assert!(v["metadata"]["deletionTimestamp"].is_string());
    merge_patch(
        &format!("{}{crs}/held", stack.gateway),
        &json!({"metadata": {"finalizers": null}}),
    );
    // Only the restarted registry's controller (resumed from the queue) can finish it.
    wait_for(15, "CRD deleted after restart", || {
        (get(&format!("{}{crd_url}", stack.gateway)).0 == 404).then_some(())
    });
}

/// `redis-cli` on `redis`'s socket; its stdout.
fn redis_cli(redis: &RedisServer, args: &[&str]) -> String {
    let o = std::process::Command::new("redis-cli")
        .arg("-s")
        .arg(&redis.socket)
        .args(args)
        .output()
        .expect("redis-cli");
    assert!(o.status.success(), "redis-cli {args:?}: {o:?}");
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// A deletion recorded before the work queue was split into buckets (in bucket 0, the
/// queue's old name, though its tenant hashes elsewhere) is moved to its tenant's bucket by
/// a restarted registry and finished.
#[test]
fn a_deletion_recorded_in_the_unsplit_queue_is_moved_and_finished() {
    use crdplane_core::gcqueue::{bucket_of, bucket_resource};
    let tenant = (0..)
        .map(|i| format!("lc-moved-{i}"))
        .find(|t| bucket_of(t) != 0)
        .unwrap();
    let key = |bucket: usize, what: &str| {
        format!(
            "cp:{{_crdplane|{}.crdplane.io}}:{what}",
            bucket_resource(bucket)
        )
    };
    let redis = RedisServer::start().expect("redis");
    let crs = format!("/clusters/{tenant}/apis/stable.example.com/v1/namespaces/default/crontabs");
    let crd_url = format!("/clusters/{tenant}{CRDS}/{CRD_NAME}");
    let field = format!("{tenant}/customresourcedefinitions.{CRD_NAME}");
    {
        let stack = Stack::start(&redis.url()).expect("stack");
        create_crd(
            &format!("{}/clusters/{tenant}", stack.gateway),
            TWO_VERSIONS,
        );
        let held = cr(
            "held",
            json!({"finalizers": ["example.com/hold"]}),
            json!({}),
        );
        let (code, v) = post(
            &format!("{}{crs}", stack.gateway),
            "application/json",
            &held,
        );
        assert_eq!(code, 201, "{v}");
        assert_eq!(delete(&format!("{}{crd_url}", stack.gateway)).0, 200);
        wait_for(10, "held object marked", || {
            let (_, o) = get(&format!("{}{crs}/held", stack.gateway));
            o["metadata"]["deletionTimestamp"].is_string().then_some(())
        });
    }
    // Every process is stopped: move the entry where an earlier version kept it.
    let home = bucket_of(&tenant);
    let stored = redis_cli(&redis, &["HGET", &key(home, "obj"), &field]);
    assert!(
        !stored.is_empty(),
        "the deletion was recorded in the tenant's bucket"
    );
    redis_cli(&redis, &["HDEL", &key(home, "obj"), &field]);
    redis_cli(&redis, &["ZREM", &key(home, "idx"), &field]);
    redis_cli(&redis, &["HSET", &key(0, "obj"), &field, &stored]);
    redis_cli(&redis, &["ZADD", &key(0, "idx"), "0", &field]);

    let stack = Stack::start(&redis.url()).expect("restarted stack");
    wait_for(15, "entry moved to its bucket", || {
        (redis_cli(&redis, &["HEXISTS", &key(0, "obj"), &field]) == "0").then_some(())
    });
    merge_patch(
        &format!("{}{crs}/held", stack.gateway),
        &json!({"metadata": {"finalizers": null}}),
    );
    wait_for(15, "CRD deleted from the moved entry", || {
        (get(&format!("{}{crd_url}", stack.gateway)).0 == 404).then_some(())
    });
    wait_for(15, "entry removed once done", || {
        (redis_cli(&redis, &["HEXISTS", &key(home, "obj"), &field]) == "0").then_some(())
    });
}

#[test]
fn namespace_deletion_removes_custom_resources_of_every_crd() {
    let stack = Stack::start_with_redis().expect("stack");
    let gw = format!("{}/clusters/lc-ns", stack.gateway);
    create_crd(&gw, TWO_VERSIONS);
    create_crd(&gw, WIDGETS);
    let (code, v) = post(
        &format!("{gw}/api/v1/namespaces"),
        "application/json",
        r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team"}}"#,
    );
    assert_eq!(code, 201, "{v}");
    let ct = |ns: &str| format!("{gw}/apis/stable.example.com/v1/namespaces/{ns}/crontabs");
    let wd = |ns: &str| format!("{gw}/apis/example.org/v1/namespaces/{ns}/widgets");
    for ns in ["team", "default"] {
        assert_eq!(
            post(&ct(ns), "application/json", &cr("c1", json!({}), json!({}))).0,
            201
        );
        let w = r#"{"apiVersion":"example.org/v1","kind":"Widget","metadata":{"name":"w1"}}"#;
        assert_eq!(post(&wd(ns), "application/json", w).0, 201);
    }
    let held = r#"{"apiVersion":"example.org/v1","kind":"Widget","metadata":{"name":"held","finalizers":["example.com/hold"]}}"#;
    assert_eq!(post(&wd("team"), "application/json", held).0, 201);

    // Protected namespaces.
    for ns in ["default", "kube-system", "kube-public"] {
        let (code, e) = delete(&format!("{gw}/api/v1/namespaces/{ns}"));
        assert_eq!(code, 403);
        assert_eq!(
            e,
            json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
                "message":format!("namespaces \"{ns}\" is forbidden: this namespace may not be deleted"),
                "reason":"Forbidden","details":{"name":ns,"kind":"namespaces"},"code":403})
        );
    }

    let (code, d) = delete(&format!("{gw}/api/v1/namespaces/team"));
    assert_eq!(code, 200, "{d}");
    assert_eq!(d["kind"], "Namespace");
    assert_eq!(d["status"]["phase"], "Terminating");
    assert!(d["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(d["spec"]["finalizers"], json!(["kubernetes"]));
    // No new content while terminating.
    let (code, e) = post(
        &ct("team"),
        "application/json",
        &cr("c2", json!({}), json!({})),
    );
    assert_eq!(code, 403, "{e}");
    assert_eq!(e["reason"], "Forbidden");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .ends_with("is forbidden: unable to create new content in namespace team because it is being terminated"),
        "{e}"
    );
    // The controller deletes everything it can and reports the held widget.
    let ns = wait_for(10, "namespace conditions", || {
        let (_, ns) = get(&format!("{gw}/api/v1/namespaces/team"));
        let c = ns["status"]["conditions"].as_array()?;
        (c.len() == 5 && get(&ct("team")).1["items"] == json!([])).then_some(ns)
    });
    let c = condition(&ns, "NamespaceContentRemaining");
    assert_eq!(c["status"], "True");
    assert_eq!(c["reason"], "SomeResourcesRemain");
    assert_eq!(
        c["message"],
        "Some resources are remaining: widgets.example.org has 1 resource instances"
    );
    let c = condition(&ns, "NamespaceFinalizersRemaining");
    assert_eq!(c["reason"], "SomeFinalizersRemain");
    assert_eq!(
        c["message"],
        "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"
    );
    let c = condition(&ns, "NamespaceDeletionDiscoveryFailure");
    assert_eq!(
        (
            c["status"].as_str(),
            c["reason"].as_str(),
            c["message"].as_str()
        ),
        (
            Some("False"),
            Some("ResourcesDiscovered"),
            Some("All resources successfully discovered")
        )
    );
    let (_, w) = get(&format!("{}/held", wd("team")));
    assert!(w["metadata"]["deletionTimestamp"].is_string(), "{w}");
    // A second DELETE returns the namespace as it is.
    let (code, again) = delete(&format!("{gw}/api/v1/namespaces/team"));
    assert_eq!(code, 200);
    assert_eq!(again["status"]["phase"], "Terminating");

    merge_patch(
        &format!("{}/held", wd("team")),
        &json!({"metadata": {"finalizers": null}}),
    );
    wait_for(10, "namespace gone", || {
        (get(&format!("{gw}/api/v1/namespaces/team")).0 == 404).then_some(())
    });
    // The other namespace is untouched.
    assert_eq!(get(&ct("default")).1["items"].as_array().unwrap().len(), 1);
    assert_eq!(get(&wd("default")).1["items"].as_array().unwrap().len(), 1);
    // Recreating the namespace gives an empty, Active one.
    let (code, v) = post(
        &format!("{gw}/api/v1/namespaces"),
        "application/json",
        r#"{"metadata":{"name":"team"}}"#,
    );
    assert_eq!(code, 201, "{v}");
    assert_eq!(v["status"]["phase"], "Active");
    assert_eq!(get(&wd("team")).1["items"], json!([]));

    // The usual way out of a stuck namespace: PUT /finalize without the `kubernetes`
    // finalizer removes it at once (its held content is left behind, as upstream).
    assert_eq!(post(&wd("team"), "application/json", held).0, 201);
    assert_eq!(delete(&format!("{gw}/api/v1/namespaces/team")).0, 200);
    let ns = wait_for(10, "held widget marked", || {
        let (_, w) = get(&format!("{}/held", wd("team")));
        w["metadata"]["deletionTimestamp"]
            .is_string()
            .then_some(())?;
        Some(get(&format!("{gw}/api/v1/namespaces/team")).1)
    });
    // The namespace controller may still be writing the namespace's conditions (its pass
    // ends after the content it marked): a client re-reads and retries on 409, as here.
    let mut ns = ns;
    let mut attempts = 0;
    let (code, b) = loop {
        let mut fin = ns.clone();
        fin["spec"]["finalizers"] = json!([]);
        let (code, b) = http_request(
            "PUT",
            &format!("{gw}/api/v1/namespaces/team/finalize"),
            Some("application/json"),
            Some(&fin.to_string()),
        )
        .unwrap();
        attempts += 1;
        if code != 409 || attempts == 5 {
            break (code, b);
        }
        ns = get(&format!("{gw}/api/v1/namespaces/team")).1;
    };
    assert_eq!(code, 200, "{b}");
    assert_eq!(get(&format!("{gw}/api/v1/namespaces/team")).0, 404);
}

/// DELETE of a namespace with DeleteOptions: storage.go `REST.Delete`'s own precondition
/// texts, dry run (nothing marked), invalid options (422), and the answer to a DELETE with
/// `orphanDependents: false` (202, as handlers/delete.go answers a deletion not yet done).
#[test]
fn namespace_delete_options() {
    let stack = Stack::start_with_redis().expect("stack");
    let gw = format!("{}/clusters/lc-nsopts", stack.gateway);
    let ns_url = format!("{gw}/api/v1/namespaces/opts");
    let (code, ns) = post(
        &format!("{gw}/api/v1/namespaces"),
        "application/json",
        r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"opts"}}"#,
    );
    assert_eq!(code, 201, "{ns}");
    let uid = ns["metadata"]["uid"].as_str().unwrap().to_string();
    let rv = ns["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let delete_with = |body: &str| {
        let (code, b) =
            http_request("DELETE", &ns_url, Some("application/json"), Some(body)).unwrap();
        (code, json_of(&b))
    };
    let (code, e) = delete_with(r#"{"preconditions":{"uid":"other"}}"#);
    assert_eq!(code, 409, "{e}");
    assert_eq!(
        e["message"],
        format!(
            "Operation cannot be fulfilled on namespaces \"opts\": Precondition failed: UID in precondition: other, UID in object meta: {uid}"
        )
    );
    let (code, e) = delete_with(r#"{"preconditions":{"resourceVersion":"1"}}"#);
    assert_eq!(code, 409, "{e}");
    assert_eq!(
        e["message"],
        format!(
            "Operation cannot be fulfilled on namespaces \"opts\": Precondition failed: ResourceVersion in precondition: 1, ResourceVersion in object meta: {rv}"
        )
    );
    let (code, e) = delete_with(r#"{"propagationPolicy":"Sideways"}"#);
    assert_eq!(code, 422, "{e}");
    // Dry run: the answer is the marked namespace, nothing is stored.
    let (code, d) = delete_with(r#"{"dryRun":["All"]}"#);
    assert_eq!(code, 200, "{d}");
    assert_eq!(d["status"]["phase"], "Terminating");
    let (_, now) = get(&ns_url);
    assert_eq!(now["status"]["phase"], "Active");
    assert_eq!(now["metadata"]["resourceVersion"], rv.as_str());
    // Matching preconditions and orphanDependents=false: marked, 202.
    let (code, d) = delete_with(&format!(
        r#"{{"preconditions":{{"uid":"{uid}","resourceVersion":"{rv}"}},"orphanDependents":false}}"#
    ));
    assert_eq!(code, 202, "{d}");
    assert_eq!(d["status"]["phase"], "Terminating");
    // The namespace controller finishes the deletion.
    wait_for(30, "the namespace to be removed", || {
        (get(&ns_url).0 == 404).then_some(())
    });
}

#[test]
fn two_versions_are_served_through_both_versions() {
    let stack = Stack::start_with_redis().expect("stack");
    let gw = format!("{}/clusters/lc-versions", stack.gateway);
    let created = create_crd(&gw, TWO_VERSIONS);
    assert_eq!(created["status"]["storedVersions"], json!(["v1"]));
    let v1 = format!("{gw}/apis/stable.example.com/v1/namespaces/default/crontabs");
    let beta = format!("{gw}/apis/stable.example.com/v1beta1/namespaces/default/crontabs");
    let warning = "Warning: 299 - \"CronTab v1beta1 is going away: move to \\\"v1\\\"\"";

    // Written through v1beta1: v1beta1's default, a deprecation warning, apiVersion v1beta1.
    let body = json!({"apiVersion": "stable.example.com/v1beta1", "kind": "CronTab",
        "metadata": {"name": "old"}, "spec": {"cronSpec": "* * * * */5", "image": "img"}})
    .to_string();
    let (code, head, b) = exchange(
        "POST",
        &beta,
        &[("Content-Type", "application/json")],
        &body,
    );
    assert_eq!(code, 201, "{b}");
    assert!(
        head.lines().any(|l| l.eq_ignore_ascii_case(warning)),
        "{head}"
    );
    let old = json_of(&b);
    assert_eq!(old["apiVersion"], "stable.example.com/v1beta1");
    assert_eq!(old["spec"]["mode"], "legacy");
    // Read through v1: same object, apiVersion rewritten, no warning.
    let (code, head, b) = exchange("GET", &format!("{v1}/old"), &[], "");
    assert_eq!(code, 200);
    assert!(
        !head.to_ascii_lowercase().contains("\r\nwarning:"),
        "{head}"
    );
    let via_v1 = json_of(&b);
    assert_eq!(via_v1["apiVersion"], "stable.example.com/v1");
    assert_eq!(via_v1["metadata"]["uid"], old["metadata"]["uid"]);
    assert_eq!(via_v1["spec"]["mode"], "legacy");
    // Written through v1: v1's default; read through v1beta1.
    let (code, v) = post(
        &v1,
        "application/json",
        &cr("new", json!({}), json!({"image": "img2"})),
    );
    assert_eq!(code, 201, "{v}");
    assert_eq!(v["spec"]["mode"], "modern");
    let (code, head, b) = exchange("GET", &format!("{beta}/new"), &[], "");
    assert_eq!(code, 200);
    assert!(head.lines().any(|l| l.eq_ignore_ascii_case(warning)));
    assert_eq!(json_of(&b)["apiVersion"], "stable.example.com/v1beta1");
    // Update through v1beta1 keeps the object.
    let (code, v) = merge_patch(&format!("{beta}/new"), &json!({"spec": {"image": "img3"}}));
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["apiVersion"], "stable.example.com/v1beta1");
    assert_eq!(get(&format!("{v1}/new")).1["spec"]["image"], "img3");
    // Lists through each version carry that version.
    let (_, l) = get(&beta);
    assert_eq!(l["apiVersion"], "stable.example.com/v1beta1");
    assert!(
        l["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["apiVersion"] == "stable.example.com/v1beta1")
    );
    // Per-version printer columns in server-side tables.
    let table = |url: &str| {
        let (_, _, b) = exchange(
            "GET",
            url,
            &[("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")],
            "",
        );
        let t = json_of(&b);
        crdplane_tests::column_names(&t)
            .into_iter()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    // (Declared columns replace the default Age column, as upstream's tableconvertor.)
    assert_eq!(table(&beta), ["Name", "Spec"]);
    assert_eq!(table(&v1), ["Name", "Mode", "Image"]);
    // The unserved version is not there.
    let (code, e) = get(&format!(
        "{gw}/apis/stable.example.com/v1alpha1/namespaces/default/crontabs"
    ));
    assert_eq!(code, 404, "{e}");
    assert_eq!(
        get(&format!("{gw}/apis/stable.example.com/v1alpha1")).0,
        404
    );
    // Discovery: versions by Kubernetes version priority, v1 preferred.
    let (_, g) = get(&format!("{gw}/apis/stable.example.com"));
    assert_eq!(
        g["versions"],
        json!([{"groupVersion": "stable.example.com/v1", "version": "v1"},
               {"groupVersion": "stable.example.com/v1beta1", "version": "v1beta1"}])
    );
    assert_eq!(g["preferredVersion"]["version"], "v1");
    // storedVersions stays [v1]; moving storage to v1beta1 adds it.
    let (_, mut crd) = get(&format!("{gw}{CRDS}/{CRD_NAME}"));
    assert_eq!(crd["status"]["storedVersions"], json!(["v1"]));
    crd["spec"]["versions"][1]["storage"] = json!(true);
    crd["spec"]["versions"][2]["storage"] = json!(false);
    let (code, b) = http_request(
        "PUT",
        &format!("{gw}{CRDS}/{CRD_NAME}"),
        Some("application/json"),
        Some(&crd.to_string()),
    )
    .unwrap();
    assert_eq!(code, 200, "{b}");
    assert_eq!(
        json_of(&b)["status"]["storedVersions"],
        json!(["v1", "v1beta1"])
    );
}

/// Legacy and aggregated discovery carry the same names, categories and subresources.
#[test]
fn aggregated_and_legacy_discovery_agree_and_openapi_follows_changes() {
    let stack = Stack::start_with_redis().expect("stack");
    let gw = format!("{}/clusters/lc-disc", stack.gateway);
    create_crd(&gw, TWO_VERSIONS);
    let (_, _, agg) = exchange(
        "GET",
        &format!("{gw}/apis"),
        &[(
            "Accept",
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
        )],
        "",
    );
    let agg = json_of(&agg);
    let g = agg["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["metadata"]["name"] == "stable.example.com")
        .unwrap()
        .clone();
    let versions: Vec<&str> = g["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_str().unwrap())
        .collect();
    assert_eq!(versions, ["v1", "v1beta1"]);
    for (i, v) in ["v1", "v1beta1"].iter().enumerate() {
        let a = &g["versions"][i]["resources"][0];
        let (_, legacy) = get(&format!("{gw}/apis/stable.example.com/{v}"));
        let l = &legacy["resources"][0];
        assert_eq!(a["resource"], l["name"]);
        assert_eq!(a["singularResource"], l["singularName"]);
        assert_eq!(a["shortNames"], json!(["ct"]));
        assert_eq!(l["shortNames"], json!(["ct"]));
        assert_eq!(a["categories"], json!(["all"]));
        assert_eq!(l["categories"], json!(["all"]));
        assert_eq!(a["verbs"], l["verbs"]);
        assert_eq!(a["scope"], "Namespaced");
        assert_eq!(l["namespaced"], true);
    }
    // Subresources only where declared (v1 has status).
    assert_eq!(
        g["versions"][0]["resources"][0]["subresources"][0]["subresource"],
        "status"
    );
    assert!(
        g["versions"][1]["resources"][0]
            .get("subresources")
            .is_none()
    );
    let (_, l1) = get(&format!("{gw}/apis/stable.example.com/v1"));
    assert_eq!(l1["resources"][1]["name"], "crontabs/status");
    // The core members of category "all" are served as a cluster without workloads.
    let (_, core) = get(&format!("{gw}/api/v1"));
    let in_all: Vec<&str> = core["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["categories"] == json!(["all"]))
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(in_all, ["pods", "replicationcontrollers", "services"]);
    let (code, l) = get(&format!("{gw}/api/v1/namespaces/default/pods"));
    assert_eq!(code, 200);
    assert_eq!(
        l,
        json!({"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"0"},"items":[]})
    );
    let (code, e) = get(&format!("{gw}/api/v1/namespaces/default/services/web"));
    assert_eq!(code, 404);
    assert_eq!(e["message"], "services \"web\" not found");
    let (code, e) = post(
        &format!("{gw}/api/v1/namespaces/default/pods"),
        "application/json",
        "{}",
    );
    assert_eq!(code, 405, "{e}");

    // OpenAPI v2 and v3 reflect a schema change within a second.
    let (_, mut crd) = get(&format!("{gw}{CRDS}/{CRD_NAME}"));
    crd["spec"]["versions"][2]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["freshField"] =
        json!({"type": "string", "description": "added later"});
    let (code, b) = http_request(
        "PUT",
        &format!("{gw}{CRDS}/{CRD_NAME}"),
        Some("application/json"),
        Some(&crd.to_string()),
    )
    .unwrap();
    assert_eq!(code, 200, "{b}");
    let changed = Instant::now();
    wait_for(1, "OpenAPI v2 to show the new field", || {
        let (_, b) = http_get(&format!("{gw}/openapi/v2")).unwrap();
        b.contains("freshField").then_some(())
    });
    wait_for(1, "OpenAPI v3 to show the new field", || {
        let (_, b) = http_get(&format!("{gw}/openapi/v3/apis/stable.example.com/v1")).unwrap();
        b.contains("freshField").then_some(())
    });
    assert!(changed.elapsed() < Duration::from_secs(2));
    // And a deleted CRD leaves both documents.
    delete(&format!("{gw}{CRDS}/{CRD_NAME}"));
    wait_for(10, "OpenAPI without the CRD", || {
        let (_, b) = http_get(&format!("{gw}/openapi/v2")).unwrap();
        let (code, _) = http_get(&format!("{gw}/openapi/v3/apis/stable.example.com/v1")).unwrap();
        (!b.contains("freshField") && code == 404).then_some(())
    });
}

/// kubectl 1.20 and the newest kubectl: `delete crd` / `delete namespace` with content
/// complete (they wait for the object to go), both versions readable, `get all`.
#[test]
fn kubectl_deletes_namespaces_and_crds_and_reads_both_versions() {
    let all = kubectls();
    assert!(!all.is_empty(), "no kubectl found");
    // kubectl 1.20 (legacy discovery) and the newest (aggregated discovery).
    let mut ks = vec![all[0].clone()];
    if all.len() > 1 {
        ks.push(all[all.len() - 1].clone());
    }
    let stack = Stack::start_with_redis().expect("stack");
    let dir = tempfile::tempdir().unwrap();
    let crd_file = dir.path().join("crd.yaml");
    std::fs::write(&crd_file, TWO_VERSIONS).unwrap();
    let crd_file = crd_file.to_string_lossy().to_string();
    for (n, k) in ks.iter().enumerate() {
        let tenant = format!("lc-kubectl-{n}");
        let home = tempfile::tempdir().unwrap();
        let kubeconfig = home.path().join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            kubeconfig_yaml(&format!("{}/clusters/{tenant}", stack.gateway), &tenant),
        )
        .unwrap();
        let run = |args: &[&str], stdin: Option<&str>| {
            use std::io::Write;
            let mut c = std::process::Command::new(k);
            c.args(args)
                .env("KUBECONFIG", &kubeconfig)
                .env("HOME", home.path())
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            let mut child = c.spawn().expect("kubectl");
            let mut input = child.stdin.take().unwrap();
            if let Some(s) = stdin {
                input.write_all(s.as_bytes()).unwrap();
            }
            drop(input);
            let o = child.wait_with_output().unwrap();
            let (out, err) = (
                String::from_utf8_lossy(&o.stdout).to_string(),
                String::from_utf8_lossy(&o.stderr).to_string(),
            );
            eprintln!("$ {} {}\n{out}{err}", k.display(), args.join(" "));
            (o.status.success(), out, err)
        };
        let ok = |args: &[&str], stdin: Option<&str>| {
            let (success, out, err) = run(args, stdin);
            assert!(success, "kubectl {} failed: {out}{err}", args.join(" "));
            (out, err)
        };
        // No custom resource in category "all" yet: like a cluster without workloads.
        let (out, err) = ok(&["get", "all"], None);
        assert_eq!(out, "");
        assert!(
            err.contains("No resources found in default namespace."),
            "{err}"
        );
        ok(&["apply", "-f", &crd_file], None);
        ok(
            &[
                "wait",
                "--for=condition=Established",
                &format!("crd/{CRD_NAME}"),
                "--timeout=30s",
            ],
            None,
        );
        ok(&["create", "namespace", "team"], None);
        let ct = |name: &str, ns: &str, v: &str| {
            format!(
                "apiVersion: stable.example.com/{v}\nkind: CronTab\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  cronSpec: \"* * * * */5\"\n  image: img-{name}\n"
            )
        };
        ok(&["apply", "-f", "-"], Some(&ct("one", "team", "v1")));
        ok(&["apply", "-f", "-"], Some(&ct("two", "default", "v1")));
        let (_, err) = ok(
            &["apply", "-f", "-"],
            Some(&ct("three", "default", "v1beta1")),
        );
        assert!(
            err.contains("CronTab v1beta1 is going away: move to \"v1\""),
            "deprecation warning printed: {err}"
        );
        // Both versions, through the fully qualified resource.
        let (out, _) = ok(
            &[
                "get",
                "crontabs.v1beta1.stable.example.com",
                "two",
                "-o",
                "jsonpath={.apiVersion} {.spec.image}",
            ],
            None,
        );
        assert_eq!(out, "stable.example.com/v1beta1 img-two");
        let (out, _) = ok(
            &[
                "get",
                "crontabs.v1.stable.example.com",
                "three",
                "-o",
                "jsonpath={.apiVersion} {.spec.mode}",
            ],
            None,
        );
        assert_eq!(out, "stable.example.com/v1 legacy");
        let (out, _) = ok(&["get", "crontabs.v1beta1.stable.example.com"], None);
        assert!(out.contains("SPEC"), "v1beta1 columns: {out}");
        let (out, _) = ok(&["get", "ct"], None);
        assert!(out.contains("MODE"), "v1 (preferred) columns: {out}");
        // Category "all": the CronTabs (the only resource in it here) are listed.
        let (out, _) = ok(&["get", "all"], None);
        assert!(out.starts_with("NAME"), "{out}");
        assert!(
            out.lines()
                .any(|l| l.starts_with("two ") || l.starts_with("crontab.stable.example.com/two ")),
            "{out}"
        );
        assert!(
            out.lines()
                .any(|l| l.starts_with("three ")
                    || l.starts_with("crontab.stable.example.com/three ")),
            "{out}"
        );
        let (out, _) = ok(&["get", "all", "-n", "team"], None);
        assert!(out.contains("one"), "{out}");
        // Deleting a namespace with content completes (kubectl waits for it).
        let (out, _) = ok(&["delete", "namespace", "team", "--timeout=60s"], None);
        assert!(out.contains("namespace \"team\" deleted"), "{out}");
        let (success, _, err) = run(&["get", "namespace", "team"], None);
        assert!(!success && err.contains("not found"), "{err}");
        // Deleting the CRD with objects completes too.
        let (out, _) = ok(&["delete", "crd", CRD_NAME, "--timeout=60s"], None);
        assert!(
            out.contains(&format!(
                "customresourcedefinition.apiextensions.k8s.io \"{CRD_NAME}\" deleted"
            )),
            "{out}"
        );
        let (success, _, err) = run(&["get", "crd", CRD_NAME], None);
        assert!(!success && err.contains("not found"), "{err}");
    }
}
