//! The `/scale` subresource, finalizers and deletion semantics (DeleteOptions, preconditions,
//! propagation policies) and `dryRun` on every write verb, against the real stack (real
//! redis-server, real service binaries): HTTP requests for exact JSON and Status texts, real
//! kubectl (1.20 and the newest on the machine) for the user flows.

use crdplane_tests::{Rest, Stack, http_request, kubeconfig_yaml, kubectls};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const CRD: &str = include_str!("../testdata/sub-crontab-crd.yaml");
const CT: &str = include_str!("../testdata/sub-crontab.yaml");
const CTS: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";

/// The shared REST client with this file's helpers on top.
struct Api(Rest);

impl std::ops::Deref for Api {
    type Target = Rest;
    fn deref(&self) -> &Rest {
        &self.0
    }
}

impl Api {
    /// The stored object (asserting it exists).
    fn obj(&self, name: &str) -> Value {
        let (code, v) = self.get(&format!("{CTS}/{name}"));
        assert_eq!(code, 200, "{v}");
        v
    }
    fn create(&self, body: &Value) -> Value {
        let (code, v) = self.json("POST", CTS, body);
        assert_eq!(code, 201, "{v}");
        v
    }
}

fn setup(stack: &Stack, tenant: &str) -> Api {
    let api = Api(Rest::new(format!("{}/clusters/{tenant}", stack.gateway)));
    let (code, body) = api.call(
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        Some("application/yaml"),
        Some(CRD),
    );
    assert_eq!(code, 201, "{body}");
    api
}

fn crontab(name: &str, replicas: Option<i64>) -> Value {
    let mut spec = json!({"cronSpec":"* * * * */5","image":"img"});
    if let Some(r) = replicas {
        spec["replicas"] = json!(r);
    }
    json!({"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":name},"spec":spec})
}

fn rv(v: &Value) -> String {
    v["metadata"]["resourceVersion"]
        .as_str()
        .expect("resourceVersion")
        .to_string()
}

#[test]
fn scale_subresource_get_put_patch() {
    let stack = Stack::start_with_redis().unwrap();
    let api = setup(&stack, "scale");
    let x = api.create(&crontab("x", Some(3)));
    // Status through /status (the main endpoint ignores it with the status subresource).
    let mut st = x.clone();
    st["status"] = json!({"replicas": 2, "labelSelector": "app=x"});
    let (code, x) = api.json("PUT", &format!("{CTS}/x/status"), &st);
    assert_eq!(code, 200, "{x}");

    // GET: upstream's autoscaling/v1 Scale, byte for byte.
    let (code, text) =
        http_request("GET", &format!("{}{CTS}/x/scale", api.base), None, None).unwrap();
    assert_eq!(code, 200, "{text}");
    let m = &x["metadata"];
    let want = format!(
        r#"{{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{{"name":"x","namespace":"default","uid":{},"resourceVersion":{},"creationTimestamp":{}}},"spec":{{"replicas":3}},"status":{{"replicas":2,"selector":"app=x"}}}}"#,
        m["uid"], m["resourceVersion"], m["creationTimestamp"]
    );
    assert_eq!(text, want);

    // PUT with the current resourceVersion: replicas land at .spec.replicas of the object.
    let scale_url = format!("{CTS}/x/scale");
    let put = |replicas: i64, rv: &str| {
        api.json(
            "PUT",
            &scale_url,
            &json!({"apiVersion":"autoscaling/v1","kind":"Scale",
                "metadata":{"name":"x","namespace":"default","resourceVersion":rv},
                "spec":{"replicas":replicas},"status":{"replicas":99}}),
        )
    };
    let (code, s) = put(5, &rv(&x));
    assert_eq!(code, 200, "{s}");
    assert_eq!(s["spec"]["replicas"], 5);
    assert_eq!(
        s["status"]["replicas"], 2,
        "status is read-only through /scale"
    );
    let obj = api.obj("x");
    assert_eq!(obj["spec"]["replicas"], 5);
    assert_eq!(obj["status"]["replicas"], 2);
    assert_eq!(
        obj["metadata"]["generation"], 2,
        "a spec change bumps generation"
    );
    assert_eq!(
        s["metadata"]["resourceVersion"],
        obj["metadata"]["resourceVersion"]
    );

    // A stale resourceVersion: upstream's optimistic-lock conflict.
    let (code, e) = put(6, &rv(&x));
    assert_eq!(code, 409, "{e}");
    assert_eq!(
        e["message"],
        "Operation cannot be fulfilled on crontabs.stable.example.com \"x\": the object has been modified; please apply your changes to the latest version and try again"
    );
    assert_eq!(e["reason"], "Conflict");
    // No resourceVersion: unconditional.
    let (code, s) = put(6, "");
    assert_eq!((code, &s["spec"]["replicas"]), (200, &json!(6)), "{s}");
    // Name mismatch.
    let (code, e) = api.json(
        "PUT",
        &scale_url,
        &json!({"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"y"},"spec":{"replicas":1}}),
    );
    assert_eq!(
        (code, e["message"].as_str()),
        (
            400,
            Some("the name of the object (y) does not match the name on the URL (x)")
        )
    );

    // PATCH: merge patch and JSON patch.
    let (code, s) = api.merge(&scale_url, &json!({"spec":{"replicas":7}}));
    assert_eq!((code, &s["spec"]["replicas"]), (200, &json!(7)), "{s}");
    let (code, s) = api.call(
        "PATCH",
        &scale_url,
        Some("application/json-patch+json"),
        Some(r#"[{"op":"replace","path":"/spec/replicas","value":4}]"#),
    );
    assert_eq!((code, &s["spec"]["replicas"]), (200, &json!(4)), "{s}");
    assert_eq!(api.obj("x")["spec"]["replicas"], 4);
    // A patch carrying a stale resourceVersion conflicts.
    let (code, _) = api.merge(
        &scale_url,
        &json!({"metadata":{"resourceVersion": rv(&x)},"spec":{"replicas":1}}),
    );
    assert_eq!(code, 409);
    let (code, _) = api.call(
        "PATCH",
        &scale_url,
        Some("application/strategic-merge-patch+json"),
        Some(r#"{"spec":{"replicas":1}}"#),
    );
    assert_eq!(code, 415);

    // The object's schema validates the written replicas.
    let (code, e) = put(15, "");
    assert_eq!(code, 422, "{e}");
    assert_eq!(
        e["message"],
        "CronTab.stable.example.com \"x\" is invalid: spec.replicas: Invalid value: 15: spec.replicas in body should be less than or equal to 10"
    );
    assert_eq!(e["details"]["causes"][0]["field"], "spec.replicas");
    // Negative replicas: the scale path check of validator.go.
    let (code, e) = api.merge(&scale_url, &json!({"spec":{"replicas":-1}}));
    assert_eq!(code, 422, "{e}");
    assert_eq!(
        e["message"],
        "CronTab.stable.example.com \"x\" is invalid: .spec.replicas: Invalid value: -1: should be a non-negative integer"
    );
    assert_eq!(api.obj("x")["spec"]["replicas"], 4, "nothing stored on 422");

    // An object without a value at specReplicasPath.
    api.create(&crontab("noreps", None));
    let (code, e) = api.get(&format!("{CTS}/noreps/scale"));
    assert_eq!(code, 500, "{e}");
    assert_eq!(
        e["message"],
        "Internal error occurred: the spec replicas field \".spec.replicas\" does not exist"
    );
    let (code, e) = api.merge(
        &format!("{CTS}/noreps/scale"),
        &json!({"metadata":{"labels":{"a":"b"}}}),
    );
    assert_eq!(
        (code, e["message"].as_str()),
        (
            400,
            Some("the spec replicas field \".spec.replicas\" cannot be empty")
        )
    );
    let (code, s) = api.merge(
        &format!("{CTS}/noreps/scale"),
        &json!({"spec":{"replicas":2}}),
    );
    assert_eq!((code, &s["spec"]["replicas"]), (200, &json!(2)), "{s}");
    assert_eq!(api.obj("noreps")["spec"]["replicas"], 2);

    // Unknown object; a CRD without the scale subresource; unsupported verbs.
    let (code, e) = api.get(&format!("{CTS}/nope/scale"));
    assert_eq!(
        (code, e["message"].as_str()),
        (404, Some("crontabs.stable.example.com \"nope\" not found"))
    );
    let plain = CRD
        .replace("crontabs", "plaintabs")
        .replace("crontab", "plaintab")
        .replace("CronTab", "PlainTab")
        .replace("- ct", "- pt");
    let plain = plain.split("    subresources:").next().unwrap();
    let (code, b) = api.call(
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        Some("application/yaml"),
        Some(plain),
    );
    assert_eq!(code, 201, "{b}");
    let pts = "/apis/stable.example.com/v1/namespaces/default/plaintabs";
    let (code, b) = api.json(
        "POST",
        pts,
        &json!({"apiVersion":"stable.example.com/v1","kind":"PlainTab","metadata":{"name":"p"},"spec":{"replicas":1}}),
    );
    assert_eq!(code, 201, "{b}");
    // An unserved subresource: customresource_handler.go answers NewNotFound(gr, name).
    let (code, e) = api.get(&format!("{pts}/p/scale"));
    assert_eq!(
        (code, e["message"].as_str()),
        (404, Some("plaintabs.stable.example.com \"p\" not found"))
    );
    let (code, e) = api.call("DELETE", &scale_url, None, None);
    assert_eq!(code, 405, "{e}");
}

fn newest_and_oldest_kubectls() -> Vec<PathBuf> {
    let ks = kubectls();
    let mut out = Vec::new();
    if let Some(k) = ks.first() {
        out.push(k.clone());
    }
    if let Some(k) = ks.last()
        && ks.len() > 1
    {
        out.push(k.clone());
    }
    out
}

struct Kubectl<'a> {
    bin: &'a Path,
    kubeconfig: PathBuf,
    home: tempfile::TempDir,
}

impl Kubectl<'_> {
    fn new<'a>(stack: &Stack, tenant: &str, bin: &'a Path) -> Kubectl<'a> {
        let home = tempfile::tempdir().unwrap();
        let kubeconfig = home.path().join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            kubeconfig_yaml(&format!("{}/clusters/{tenant}", stack.gateway), tenant),
        )
        .unwrap();
        Kubectl {
            bin,
            kubeconfig,
            home,
        }
    }
    fn run(&self, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
        let mut c = std::process::Command::new(self.bin);
        c.args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", self.home.path())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = c.spawn().expect("kubectl");
        if let Some(s) = stdin {
            child.stdin.take().unwrap().write_all(s.as_bytes()).unwrap();
        }
        drop(child.stdin.take());
        let o = child.wait_with_output().unwrap();
        let (out, err) = (
            String::from_utf8_lossy(&o.stdout).to_string(),
            String::from_utf8_lossy(&o.stderr).to_string(),
        );
        eprintln!("$ kubectl {}\n{out}{err}", args.join(" "));
        (o.status.success(), out, err)
    }
    fn ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let (ok, out, err) = self.run(args, stdin);
        assert!(ok, "kubectl {args:?} failed: {out}{err}");
        out
    }
}

#[test]
fn kubectl_scale_then_jsonpath() {
    let ks = newest_and_oldest_kubectls();
    assert!(!ks.is_empty(), "no kubectl found");
    let stack = Stack::start_with_redis().unwrap();
    for (n, bin) in ks.iter().enumerate() {
        let tenant = format!("kscale-{n}");
        let k = Kubectl::new(&stack, &tenant, bin);
        k.ok(&["apply", "-f", "-"], Some(CRD));
        k.ok(
            &[
                "wait",
                "--for=condition=Established",
                "crd/crontabs.stable.example.com",
            ],
            None,
        );
        k.ok(&["apply", "-f", "-"], Some(&CT.replace("NAME", "x")));
        let out = k.ok(&["scale", "--replicas=5", "crontabs/x"], None);
        assert!(out.contains("scaled"), "{out}");
        let out = k.ok(
            &["get", "crontab", "x", "-o", "jsonpath={.spec.replicas}"],
            None,
        );
        assert_eq!(out.trim(), "5");
        // With a precondition kubectl GETs the Scale and PUTs it back.
        k.ok(
            &["scale", "--current-replicas=5", "--replicas=2", "ct/x"],
            None,
        );
        let out = k.ok(&["get", "ct", "x", "-o", "jsonpath={.spec.replicas}"], None);
        assert_eq!(out.trim(), "2");
        if n > 0 {
            // kubectl >= 1.27 reads subresources directly.
            let out = k.ok(
                &[
                    "get",
                    "ct",
                    "x",
                    "--subresource=scale",
                    "-o",
                    "jsonpath={.kind} {.spec.replicas}",
                ],
                None,
            );
            assert_eq!(out.trim(), "Scale 2");
            let out = k.ok(&["get", "ct", "x", "--subresource=scale"], None);
            assert!(out.contains('x'), "{out}");
        }
        let (ok, _, err) = k.run(
            &["scale", "--current-replicas=7", "--replicas=3", "ct/x"],
            None,
        );
        assert!(!ok, "a wrong --current-replicas must fail");
        assert!(err.contains("Expected replicas to be 7, was 2"), "{err}");
        // Server-side dry runs persist nothing.
        k.ok(&["scale", "--replicas=9", "ct/x", "--dry-run=server"], None);
        k.ok(&["delete", "ct", "x", "--dry-run=server"], None);
        let out = k.ok(&["get", "ct", "x", "-o", "jsonpath={.spec.replicas}"], None);
        assert_eq!(out.trim(), "2");
        // Schema validation of the scaled value reaches kubectl.
        let (ok, _, err) = k.run(&["scale", "--replicas=50", "ct/x"], None);
        assert!(!ok);
        assert!(
            err.contains("spec.replicas in body should be less than or equal to 10"),
            "{err}"
        );
    }
}

/// A raw watch: reads the chunked stream until a DELETED event (or the deadline) and
/// returns the event types with their objects.
fn watch_until_deleted(url: &str, deadline: Duration) -> Vec<(String, Value)> {
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').unwrap();
    let mut s = std::net::TcpStream::connect(host).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    write!(
        s,
        "GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let start = Instant::now();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while start.elapsed() < deadline {
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(_) => {}
        }
        if String::from_utf8_lossy(&buf).contains("\"type\":\"DELETED\"") {
            // Let the rest of the line arrive.
            std::thread::sleep(Duration::from_millis(100));
            let _ = s
                .read(&mut chunk)
                .map(|n| buf.extend_from_slice(&chunk[..n]));
            break;
        }
    }
    let text = String::from_utf8_lossy(&buf).to_string();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        .filter(|v| v.get("type").is_some())
        .map(|v| {
            (
                v["type"].as_str().unwrap_or("").to_string(),
                v["object"].clone(),
            )
        })
        .collect()
}

#[test]
fn finalizers_hold_deletion_until_removed() {
    let stack = Stack::start_with_redis().unwrap();
    let api = setup(&stack, "fin");
    let mut body = crontab("f", Some(1));
    body["metadata"]["finalizers"] = json!(["stable.example.com/cleanup"]);
    let created = api.create(&body);
    let start_rv = rv(&created);
    let watch_url = format!(
        "{}{CTS}?watch=1&resourceVersion={start_rv}&fieldSelector=metadata.name%3Df",
        api.base
    );
    let watcher =
        std::thread::spawn(move || watch_until_deleted(&watch_url, Duration::from_secs(60)));
    std::thread::sleep(Duration::from_millis(300));

    // DELETE marks the object and keeps it.
    let (code, marked) = api.call("DELETE", &format!("{CTS}/f"), None, None);
    assert_eq!(code, 200, "{marked}");
    assert_eq!(
        marked["kind"], "CronTab",
        "the object, not a Status: {marked}"
    );
    let m = &marked["metadata"];
    assert!(m["deletionTimestamp"].is_string(), "{marked}");
    assert_eq!(m["deletionGracePeriodSeconds"], 0);
    assert_eq!(
        m["generation"], 2,
        "the first deletion mark bumps generation"
    );
    assert_eq!(m["finalizers"], json!(["stable.example.com/cleanup"]));
    assert_eq!(
        api.obj("f")["metadata"]["deletionTimestamp"],
        m["deletionTimestamp"]
    );

    // A second DELETE changes nothing.
    let (code, again) = api.call("DELETE", &format!("{CTS}/f"), None, None);
    assert_eq!(code, 200);
    assert_eq!(rv(&again), rv(&marked));
    assert_eq!(
        again["metadata"]["deletionTimestamp"],
        m["deletionTimestamp"]
    );

    // No new finalizers while deleting.
    let (code, e) = api.merge(
        &format!("{CTS}/f"),
        &json!({"metadata":{"finalizers":["stable.example.com/cleanup","stable.example.com/other"]}}),
    );
    assert_eq!(code, 422, "{e}");
    assert_eq!(
        e["message"],
        "CronTab.stable.example.com \"f\" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"stable.example.com/other\"}"
    );
    assert_eq!(e["details"]["causes"][0]["reason"], "FieldValueForbidden");
    // With a schema error too: both in one 422, the ObjectMeta rule first (customresource
    // strategy.go ValidateUpdate lists them together).
    let (code, e) = api.merge(
        &format!("{CTS}/f"),
        &json!({"metadata":{"finalizers":["stable.example.com/cleanup","stable.example.com/other"]},
                "spec":{"replicas":50}}),
    );
    assert_eq!(code, 422, "{e}");
    assert_eq!(
        e["message"],
        "CronTab.stable.example.com \"f\" is invalid: [metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"stable.example.com/other\"}, spec.replicas: Invalid value: 50: spec.replicas in body should be less than or equal to 10]"
    );
    // The same through /status (metadata is reset to the stored one there: no error, no change).
    let mut st = api.obj("f");
    st["status"] = json!({"replicas": 1});
    let (code, s) = api.json("PUT", &format!("{CTS}/f/status"), &st);
    assert_eq!(code, 200, "{s}");
    // Other updates are fine; deletionTimestamp and the grace period stay the stored ones.
    let mut upd = api.obj("f");
    upd["spec"]["image"] = json!("other");
    upd["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("deletionTimestamp");
    upd["metadata"]["deletionGracePeriodSeconds"] = json!(30);
    let (code, u) = api.json("PUT", &format!("{CTS}/f"), &upd);
    assert_eq!(code, 200, "{u}");
    assert_eq!(u["metadata"]["deletionTimestamp"], m["deletionTimestamp"]);
    assert_eq!(u["metadata"]["deletionGracePeriodSeconds"], 0);

    // Removing the last finalizer (kubectl's merge patch) deletes the object.
    let bins = newest_and_oldest_kubectls();
    let k = Kubectl::new(&stack, "fin", &bins[0]);
    k.ok(
        &[
            "patch",
            "crontab",
            "f",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ],
        None,
    );
    let (code, e) = api.get(&format!("{CTS}/f"));
    assert_eq!(
        (code, e["message"].as_str()),
        (404, Some("crontabs.stable.example.com \"f\" not found"))
    );

    let events = watcher.join().unwrap();
    let types: Vec<&str> = events.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(types.first(), Some(&"MODIFIED"), "{types:?}");
    assert!(events[0].1["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(types.last(), Some(&"DELETED"), "{types:?}");
    assert!(!types.contains(&"ADDED"), "{types:?}");

    // The same flow with kubectl delete --wait=false on the newest kubectl.
    let k = Kubectl::new(&stack, "fin", bins.last().unwrap());
    let mut body = crontab("g", Some(1));
    body["metadata"]["finalizers"] = json!(["stable.example.com/cleanup"]);
    api.create(&body);
    k.ok(&["delete", "ct", "g", "--wait=false"], None);
    let g = api.obj("g");
    assert!(g["metadata"]["deletionTimestamp"].is_string(), "{g}");
    k.ok(
        &[
            "patch",
            "ct",
            "g",
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
        ],
        None,
    );
    assert_eq!(api.get(&format!("{CTS}/g")).0, 404);
}

#[test]
fn delete_options_preconditions_and_propagation() {
    let stack = Stack::start_with_redis().unwrap();
    let api = setup(&stack, "delopts");
    let a = api.create(&crontab("a", Some(1)));
    let uid = a["metadata"]["uid"].as_str().unwrap().to_string();
    let del = |name: &str, body: &Value| api.json("DELETE", &format!("{CTS}/{name}"), body);

    // Preconditions: upstream's BeforeDelete texts, naming the Kind.
    let (code, e) = del(
        "a",
        &json!({"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"not-it"}}),
    );
    assert_eq!(code, 409, "{e}");
    assert_eq!(
        e["message"],
        format!(
            "Operation cannot be fulfilled on CronTab.stable.example.com \"a\": the UID in the precondition (not-it) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
        )
    );
    assert_eq!(
        e["details"],
        json!({"name":"a","group":"stable.example.com","kind":"CronTab"})
    );
    let (code, e) = del(
        "a",
        &json!({"kind":"DeleteOptions","apiVersion":"meta.k8s.io/v1","preconditions":{"resourceVersion":"999"}}),
    );
    assert_eq!(code, 409, "{e}");
    assert_eq!(
        e["message"],
        format!(
            "Operation cannot be fulfilled on CronTab.stable.example.com \"a\": the ResourceVersion in the precondition (999) does not match the ResourceVersion in record ({}). The object might have been modified",
            rv(&a)
        )
    );
    // Invalid options: 422 before anything is read (even for a missing object).
    let (code, e) = del("nope", &json!({"propagationPolicy":"Sometimes"}));
    assert_eq!(code, 422, "{e}");
    assert_eq!(
        e["message"],
        "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"Sometimes\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
    );
    assert_eq!(e["details"]["kind"], "DeleteOptions");
    assert_eq!(e["details"]["group"], "meta.k8s.io");
    let (code, e) = del(
        "a",
        &json!({"orphanDependents":true,"propagationPolicy":"Orphan"}),
    );
    assert_eq!(code, 422);
    assert_eq!(
        e["message"],
        "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Invalid value: \"Orphan\": orphanDependents and deletionPropagation cannot be both set"
    );
    let (code, e) = api.call(
        "DELETE",
        &format!("{CTS}/a?gracePeriodSeconds=soon"),
        None,
        None,
    );
    assert_eq!(
        (code, e["message"].as_str()),
        (
            400,
            Some("strconv.ParseInt: parsing \"soon\": invalid syntax")
        )
    );
    // Matching preconditions: deleted, Success Status with the uid.
    let (code, s) = del(
        "a",
        &json!({"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":0,
            "preconditions":{"uid":uid,"resourceVersion":rv(&a)}}),
    );
    assert_eq!(code, 200, "{s}");
    assert_eq!(
        s,
        json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success",
            "details":{"name":"a","group":"stable.example.com","kind":"crontabs","uid":uid}})
    );
    assert_eq!(api.get(&format!("{CTS}/a")).0, 404);

    // Orphan adds the `orphan` finalizer: the object is kept, marked as deleting.
    api.create(&crontab("o", Some(1)));
    let (code, o) = del(
        "o",
        &json!({"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Orphan"}),
    );
    assert_eq!(code, 200, "{o}");
    assert_eq!(o["metadata"]["finalizers"], json!(["orphan"]));
    assert!(o["metadata"]["deletionTimestamp"].is_string());
    // The garbage collector (no dependents to orphan) removes the finalizer, which completes
    // the deletion.
    gone_within(&api, &format!("{CTS}/o"), Duration::from_secs(30));

    // Foreground through the query parameter adds `foregroundDeletion`.
    api.create(&crontab("fg", Some(1)));
    let (code, o) = api.call(
        "DELETE",
        &format!("{CTS}/fg?propagationPolicy=Foreground"),
        None,
        None,
    );
    assert_eq!(code, 200, "{o}");
    assert_eq!(o["metadata"]["finalizers"], json!(["foregroundDeletion"]));
    // No dependents: the garbage collector removes `foregroundDeletion` and the object goes.
    gone_within(&api, &format!("{CTS}/fg"), Duration::from_secs(30));

    // orphanDependents=false on an object kept by a finalizer: 202 Accepted.
    let mut body = crontab("acc", Some(1));
    body["metadata"]["finalizers"] = json!(["stable.example.com/cleanup"]);
    api.create(&body);
    let (code, o) = del("acc", &json!({"orphanDependents":false}));
    assert_eq!(code, 202, "{o}");
    assert!(o["metadata"]["deletionTimestamp"].is_string());

    // deletecollection applies the same rules per object.
    let mut keep = crontab("c1", Some(1));
    keep["metadata"]["labels"] = json!({"batch":"c"});
    keep["metadata"]["finalizers"] = json!(["stable.example.com/cleanup"]);
    api.create(&keep);
    let mut gone = crontab("c2", Some(1));
    gone["metadata"]["labels"] = json!({"batch":"c"});
    api.create(&gone);
    let (code, l) = api.call(
        "DELETE",
        &format!("{CTS}?labelSelector=batch%3Dc"),
        None,
        None,
    );
    assert_eq!(code, 200, "{l}");
    assert_eq!(l["kind"], "CronTabList");
    assert_eq!(l["items"].as_array().map(Vec::len), Some(2));
    assert!(api.obj("c1")["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(api.get(&format!("{CTS}/c2")).0, 404);
    // Objects outside the selector are untouched.
    assert!(api.obj("acc")["metadata"]["finalizers"].is_array());
}

#[test]
fn dry_run_writes_persist_nothing() {
    let stack = Stack::start_with_redis().unwrap();
    let api = setup(&stack, "dry");
    // create
    let (code, c) = api.json("POST", &format!("{CTS}?dryRun=All"), &crontab("d", Some(1)));
    assert_eq!(code, 201, "{c}");
    assert_eq!(c["metadata"]["name"], "d");
    assert_eq!(api.get(&format!("{CTS}/d")).0, 404);
    // Only "All" is a dryRun value (ValidateCreateOptions/ValidatePatchOptions).
    let (code, e) = api.json(
        "POST",
        &format!("{CTS}?dryRun=Some"),
        &crontab("d", Some(1)),
    );
    assert_eq!(code, 422, "{e}");
    assert_eq!(
        e["message"],
        "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: []string{\"Some\"}: supported values: \"All\""
    );
    let (code, e) = api.merge(&format!("{CTS}/nope?dryRun=x"), &json!({}));
    assert_eq!(code, 422, "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .starts_with("PatchOptions.meta.k8s.io \"\" is invalid: dryRun")
    );
    // validation still runs
    let (code, _) = api.json(
        "POST",
        &format!("{CTS}?dryRun=All"),
        &crontab("d", Some(11)),
    );
    assert_eq!(code, 422);

    let x = api.create(&crontab("x", Some(1)));
    let before = api.obj("x");
    let unchanged = || {
        let now = api.obj("x");
        assert_eq!(now, before, "dryRun changed the stored object");
    };
    // update
    let mut u = x.clone();
    u["spec"]["replicas"] = json!(2);
    let (code, r) = api.json("PUT", &format!("{CTS}/x?dryRun=All"), &u);
    assert_eq!((code, &r["spec"]["replicas"]), (200, &json!(2)), "{r}");
    unchanged();
    // patch
    let (code, r) = api.merge(
        &format!("{CTS}/x?dryRun=All"),
        &json!({"spec":{"replicas":3}}),
    );
    assert_eq!((code, &r["spec"]["replicas"]), (200, &json!(3)), "{r}");
    unchanged();
    // status
    let mut st = x.clone();
    st["status"] = json!({"replicas": 4});
    let (code, r) = api.json("PUT", &format!("{CTS}/x/status?dryRun=All"), &st);
    assert_eq!((code, &r["status"]["replicas"]), (200, &json!(4)), "{r}");
    unchanged();
    // scale (PUT and PATCH)
    let (code, r) = api.merge(
        &format!("{CTS}/x/scale?dryRun=All"),
        &json!({"spec":{"replicas":5}}),
    );
    assert_eq!((code, &r["spec"]["replicas"]), (200, &json!(5)), "{r}");
    let (code, r) = api.json(
        "PUT",
        &format!("{CTS}/x/scale?dryRun=All"),
        &json!({"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"x"},"spec":{"replicas":6}}),
    );
    assert_eq!((code, &r["spec"]["replicas"]), (200, &json!(6)), "{r}");
    unchanged();
    // delete: query parameter and DeleteOptions body
    let (code, s) = api.call("DELETE", &format!("{CTS}/x?dryRun=All"), None, None);
    assert_eq!((code, &s["status"]), (200, &json!("Success")), "{s}");
    let (code, s) = api.json(
        "DELETE",
        &format!("{CTS}/x"),
        &json!({"kind":"DeleteOptions","apiVersion":"v1","dryRun":["All"]}),
    );
    assert_eq!((code, &s["status"]), (200, &json!("Success")), "{s}");
    unchanged();
    let (code, e) = api.json("DELETE", &format!("{CTS}/x"), &json!({"dryRun":["Some"]}));
    assert_eq!(code, 422);
    assert_eq!(
        e["message"],
        "DeleteOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: []string{\"Some\"}: supported values: \"All\""
    );
    unchanged();
    // delete of an object with finalizers: the marked object is answered, not stored
    let mut f = crontab("f", Some(1));
    f["metadata"]["finalizers"] = json!(["stable.example.com/cleanup"]);
    api.create(&f);
    let (code, m) = api.call("DELETE", &format!("{CTS}/f?dryRun=All"), None, None);
    assert_eq!(code, 200, "{m}");
    assert!(m["metadata"]["deletionTimestamp"].is_string());
    assert!(api.obj("f")["metadata"].get("deletionTimestamp").is_none());
    // deletecollection
    let (code, l) = api.call("DELETE", &format!("{CTS}?dryRun=All"), None, None);
    assert_eq!(code, 200, "{l}");
    assert_eq!(l["items"].as_array().map(Vec::len), Some(2));
    unchanged();
    assert!(api.obj("f")["metadata"].get("deletionTimestamp").is_none());
    // a real delete still works afterwards
    let (code, _) = api.call("DELETE", &format!("{CTS}/x"), None, None);
    assert_eq!(code, 200);
    assert_eq!(api.get(&format!("{CTS}/x")).0, 404);
}

/// Waits (polling, bounded) until `path` answers 404: work of the background garbage collector.
fn gone_within(api: &Api, path: &str, limit: Duration) {
    let deadline = Instant::now() + limit;
    while api.get(path).0 != 404 {
        assert!(
            Instant::now() < deadline,
            "{path} still there after {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
