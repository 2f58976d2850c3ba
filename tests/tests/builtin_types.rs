//! The built-in types served through the generic machinery (ConfigMap, Secret,
//! ServiceAccount, core and events.k8s.io Events, Lease, Role, ClusterRole, RoleBinding,
//! ClusterRoleBinding), with the real clients that use them: kubectl 1.20 and 1.33
//! (`create configmap|secret|serviceaccount|role|clusterrole|rolebinding|clusterrolebinding`,
//! which send protobuf; `get`, `get -o wide`, `get events`, `events`, `describe`, `explain`),
//! kube-rs `events::Recorder`, and plain REST for upstream's validation texts, field
//! selectors and watches.

use crdplane_tests::{Stack, WatchStream, http_request, kubeconfig_yaml, kubectls};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const CRD: &str = r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"crontabs.stable.example.com"},
 "spec":{"group":"stable.example.com","scope":"Namespaced",
  "names":{"plural":"crontabs","singular":"crontab","kind":"CronTab","shortNames":["ct"]},
  "versions":[{"name":"v1","served":true,"storage":true,
   "schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object",
     "properties":{"n":{"type":"integer"}}}}}}}]}}"#;

fn req(method: &str, url: &str, body: Option<Value>) -> (u16, Value) {
    let b = body.map(|b| b.to_string());
    let (code, text) =
        http_request(method, url, Some("application/json"), b.as_deref()).expect("request");
    (
        code,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn kubectl_creates_and_reads_configmaps_secrets_serviceaccounts() {
    let stack = Stack::start_with_redis().expect("stack");
    let g = &stack.gateway;
    for (n, k) in kubectls().iter().enumerate() {
        let ns = format!("k{n}");
        let ok = |args: &[&str]| {
            let o = stack.kubectl(k, args);
            assert!(o.ok, "kubectl {args:?} failed: {}{}", o.stdout, o.stderr);
            o.stdout
        };
        ok(&["create", "namespace", &ns]);
        ok(&[
            "-n",
            &ns,
            "create",
            "configmap",
            "c1",
            "--from-literal=a=b",
            "--from-literal=x=y",
        ]);
        ok(&[
            "-n",
            &ns,
            "create",
            "secret",
            "generic",
            "s1",
            "--from-literal=user=me",
        ]);
        ok(&["-n", &ns, "create", "serviceaccount", "sa1"]);
        let (code, cm) = req(
            "GET",
            &format!("{g}/api/v1/namespaces/{ns}/configmaps/c1"),
            None,
        );
        assert_eq!(code, 200, "{cm}");
        assert_eq!(cm["data"], json!({"a": "b", "x": "y"}));
        assert_eq!(cm["metadata"].get("generateName"), None, "{cm}");
        assert!(cm["metadata"].get("generation").is_none(), "{cm}");
        let (_, s) = req(
            "GET",
            &format!("{g}/api/v1/namespaces/{ns}/secrets/s1"),
            None,
        );
        assert_eq!(s["data"]["user"], "bWU=", "{s}");
        assert_eq!(s["type"], "Opaque");
        // Reads through discovery: get, the data column, jsonpath.
        let out = ok(&[
            "-n",
            &ns,
            "get",
            "configmap",
            "c1",
            "-o",
            "jsonpath={.data.x}",
        ]);
        assert_eq!(out, "y");
        let out = ok(&["-n", &ns, "get", "configmaps"]);
        assert!(
            out.contains("NAME") && out.contains("DATA") && out.contains("c1"),
            "{out}"
        );
        let out = ok(&["-n", &ns, "get", "secrets"]);
        assert!(out.contains("TYPE") && out.contains("Opaque"), "{out}");
        let out = ok(&["-n", &ns, "get", "sa"]);
        assert!(out.contains("sa1"), "{out}");
        // Upstream's refusal of a bad key, as kubectl prints it (`create configmap` checks
        // keys itself, so the object comes as a manifest).
        let bad = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad\n  namespace: {ns}\ndata:\n  a/b: c\n"
        );
        let o = stack.kubectl_stdin(k, &["create", "-f", "-"], Some(&bad));
        assert!(!o.ok);
        assert!(
            o.stderr.contains("ConfigMap \"bad\" is invalid: data[a/b]: Invalid value: \"a/b\": a valid config key must consist of alphanumeric characters, '-', '_' or '.'"),
            "{}",
            o.stderr
        );
        // Client-side apply of a changed manifest: a strategic merge patch computed from the
        // last-applied annotation (a dropped label goes, a new key comes).
        let manifest = |labels: &str, data: &str| {
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n  namespace: {ns}\n  labels: {labels}\ndata: {data}\n"
            )
        };
        for m in [
            manifest("{a: \"1\"}", "{k: v1}"),
            manifest("{b: \"2\"}", "{k: v2, k2: x}"),
        ] {
            let o = stack.kubectl_stdin(k, &["apply", "-f", "-"], Some(&m));
            assert!(o.ok, "{}", o.stderr);
        }
        let (_, applied) = req(
            "GET",
            &format!("{g}/api/v1/namespaces/{ns}/configmaps/applied"),
            None,
        );
        assert_eq!(
            applied["metadata"]["labels"],
            json!({"b": "2"}),
            "{applied}"
        );
        assert_eq!(applied["data"], json!({"k": "v2", "k2": "x"}));
        // An existing name is AlreadyExists.
        let o = stack.kubectl(
            k,
            &["-n", &ns, "create", "configmap", "c1", "--from-literal=a=b"],
        );
        assert!(
            o.stderr.contains("configmaps \"c1\" already exists"),
            "{}",
            o.stderr
        );
        ok(&["-n", &ns, "delete", "configmap", "c1"]);
        assert_eq!(
            req(
                "GET",
                &format!("{g}/api/v1/namespaces/{ns}/configmaps/c1"),
                None
            )
            .0,
            404
        );
    }
}

#[test]
fn validation_and_immutability_follow_upstream() {
    let stack = Stack::start_with_redis().expect("stack");
    let cms = format!("{}/api/v1/namespaces/default/configmaps", stack.gateway);
    let (code, v) = req(
        "POST",
        &cms,
        Some(json!({"metadata": {"name": "im"}, "immutable": true, "data": {"a": "1"}})),
    );
    assert_eq!(code, 201, "{v}");
    let (code, v) = req(
        "PUT",
        &format!("{cms}/im"),
        Some(json!({"metadata": {"name": "im"}, "immutable": true, "data": {"a": "2"}})),
    );
    assert_eq!(code, 422, "{v}");
    assert_eq!(
        v["message"],
        "ConfigMap \"im\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
    );
    // Labels may still change.
    let (code, v) = req(
        "PUT",
        &format!("{cms}/im"),
        Some(
            json!({"metadata": {"name": "im", "labels": {"x": "y"}}, "immutable": true, "data": {"a": "1"}}),
        ),
    );
    assert_eq!(code, 200, "{v}");
    // A value of the wrong JSON type is the decoder's 400; an unknown field under Strict too.
    let (code, v) = req(
        "POST",
        &cms,
        Some(json!({"metadata": {"name": "t"}, "data": {"a": 1}})),
    );
    assert_eq!(code, 400, "{v}");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .starts_with("ConfigMap in version \"v1\" cannot be handled as a ConfigMap: ")
    );
    let (code, v) = req(
        "POST",
        &format!("{cms}?fieldValidation=Strict"),
        Some(json!({"metadata": {"name": "t"}, "spec": {}})),
    );
    assert_eq!(code, 400, "{v}");
    assert_eq!(
        v["message"],
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"spec\""
    );
    // The patched object is decoded strictly too (patch.go applyPatchToCurrentObject):
    // an unknown field it gains is a 400 under Strict and a warning under Warn (the
    // default), as kubectl shows it.
    let (code, v) = req(
        "POST",
        &cms,
        Some(json!({"metadata": {"name": "pt"}, "data": {"a": "1"}})),
    );
    assert_eq!(code, 201, "{v}");
    for mime in [
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
    ] {
        let (code, text) = http_request(
            "PATCH",
            &format!("{cms}/pt?fieldValidation=Strict"),
            Some(mime),
            Some(r#"{"spec":{"x":1},"data":{"a":"2"}}"#),
        )
        .expect("patch");
        let v: Value = serde_json::from_str(&text).expect("status");
        assert_eq!(code, 400, "{mime}: {v}");
        assert_eq!(
            v["message"], "strict decoding error: unknown field \"spec\"",
            "{mime}"
        );
    }
    let (code, v) = req("GET", &format!("{cms}/pt"), None);
    assert_eq!((code, &v["data"]["a"]), (200, &json!("1")), "not written");
    for kubectl in kubectls() {
        let out = stack.kubectl(
            &kubectl,
            &[
                "patch",
                "configmap",
                "pt",
                "--type",
                "merge",
                "-p",
                r#"{"spec":{"x":1},"data":{"a":"3"}}"#,
            ],
        );
        // kubectl 1.27+ asks for Strict by default; older ones send nothing (Warn).
        if out.stderr.contains("strict decoding error") {
            assert!(!out.ok, "{}", kubectl.display());
            assert!(
                out.stderr
                    .contains("strict decoding error: unknown field \"spec\""),
                "{}: {}",
                kubectl.display(),
                out.stderr
            );
        } else {
            assert!(out.ok, "{}: {}", kubectl.display(), out.stderr);
            assert!(
                out.stderr.contains("Warning: unknown field \"spec\""),
                "{}: {} {}",
                kubectl.display(),
                out.stdout,
                out.stderr
            );
        }
    }
    // Secrets: stringData merged into data, type-specific keys, immutable type.
    let secrets = format!("{}/api/v1/namespaces/default/secrets", stack.gateway);
    let (code, v) = req(
        "POST",
        &secrets,
        Some(json!({"metadata": {"name": "s"}, "stringData": {"p": "hi"}})),
    );
    assert_eq!(code, 201, "{v}");
    assert_eq!(v["data"], json!({"p": "aGk="}));
    assert!(v.get("stringData").is_none());
    let (code, v) = req(
        "POST",
        &secrets,
        Some(
            json!({"metadata": {"name": "tls"}, "type": "kubernetes.io/tls", "data": {"tls.crt": ""}}),
        ),
    );
    assert_eq!(code, 422, "{v}");
    assert_eq!(
        v["message"],
        "Secret \"tls\" is invalid: data[tls.key]: Required value"
    );
    // Leases: no unconditional update; create on update; a stale resourceVersion conflicts.
    let leases = format!(
        "{}/apis/coordination.k8s.io/v1/namespaces/default/leases",
        stack.gateway
    );
    let (code, v) = req(
        "PUT",
        &format!("{leases}/l"),
        Some(
            json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 10}}),
        ),
    );
    assert_eq!(code, 201, "{v}");
    let rv = v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, v) = req(
        "PUT",
        &format!("{leases}/l"),
        Some(json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "b"}})),
    );
    assert_eq!(code, 422, "{v}");
    let (code, _) = req(
        "PUT",
        &format!("{leases}/l"),
        Some(
            json!({"metadata": {"name": "l", "resourceVersion": rv}, "spec": {"holderIdentity": "b"}}),
        ),
    );
    assert_eq!(code, 200);
    let (code, v) = req(
        "PUT",
        &format!("{leases}/l"),
        Some(
            json!({"metadata": {"name": "l", "resourceVersion": rv}, "spec": {"holderIdentity": "c"}}),
        ),
    );
    assert_eq!(code, 409, "{v}");
    assert_eq!(
        v["message"],
        "Operation cannot be fulfilled on leases.coordination.k8s.io \"l\": the object has been modified; please apply your changes to the latest version and try again"
    );
    let (code, v) = req(
        "POST",
        &leases,
        Some(json!({"metadata": {"name": "bad"}, "spec": {"leaseDurationSeconds": 0}})),
    );
    assert_eq!(code, 422, "{v}");
    assert_eq!(
        v["message"],
        "Lease.coordination.k8s.io \"bad\" is invalid: spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"
    );
    // A namespace that does not exist.
    let (code, v) = req(
        "POST",
        &format!("{}/api/v1/namespaces/nope/configmaps", stack.gateway),
        Some(json!({"metadata": {"name": "x"}})),
    );
    assert_eq!(code, 404, "{v}");
    assert_eq!(v["message"], "namespaces \"nope\" not found");
}

#[test]
fn both_event_apis_share_objects_selectors_and_watches() {
    let stack = Stack::start_with_redis().expect("stack");
    let g = &stack.gateway;
    let core = format!("{g}/api/v1/namespaces/default/events");
    let v1 = format!("{g}/apis/events.k8s.io/v1/namespaces/default/events");
    let watch_core = WatchStream::open(
        &format!(
            "{g}/api/v1/namespaces/default/events?watch=true&fieldSelector=involvedObject.name=c1"
        ),
        None,
    )
    .unwrap();
    let watch_v1 = WatchStream::open(
        &format!("{g}/apis/events.k8s.io/v1/events?watch=true&fieldSelector=regarding.name=c1"),
        None,
    )
    .unwrap();
    let ev = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e1"},
        "eventTime": "2026-11-24T05:00:00.000000Z",
        "regarding": {"kind": "ConfigMap", "name": "c1", "namespace": "default", "apiVersion": "v1"},
        "note": "hello", "reason": "Tested", "type": "Normal", "action": "Test",
        "reportingController": "example.com/ctl", "reportingInstance": "i1"});
    let (code, v) = req("POST", &v1, Some(ev.clone()));
    assert_eq!(code, 201, "{v}");
    let (code, other) = req(
        "POST",
        &v1,
        Some(
            json!({"metadata": {"name": "e2"}, "eventTime": "2026-11-24T05:00:00.000000Z",
        "regarding": {"kind": "ConfigMap", "name": "c2", "namespace": "default"}, "reason": "R", "type": "Normal",
        "action": "A", "reportingController": "example.com/ctl", "reportingInstance": "i1"}),
        ),
    );
    assert_eq!(code, 201, "{other}");
    // The core view of the same object.
    let (_, c) = req("GET", &format!("{core}/e1"), None);
    assert_eq!(c["apiVersion"], "v1");
    assert_eq!(c["involvedObject"]["name"], "c1");
    assert_eq!(c["message"], "hello");
    assert_eq!(c["reportingComponent"], "example.com/ctl");
    // Field selectors of each version.
    let (_, l) = req(
        "GET",
        &format!("{core}?fieldSelector=involvedObject.name%3Dc1"),
        None,
    );
    assert_eq!(l["items"].as_array().unwrap().len(), 1, "{l}");
    let (_, l) = req(
        "GET",
        &format!("{g}/apis/events.k8s.io/v1/events?fieldSelector=regarding.name%3Dc2"),
        None,
    );
    assert_eq!(l["items"][0]["metadata"]["name"], "e2", "{l}");
    assert_eq!(l["items"][0]["regarding"]["name"], "c2", "{l}");
    let (code, l) = req("GET", &format!("{core}?fieldSelector=spec.x%3D1"), None);
    assert_eq!(code, 400);
    assert_eq!(l["message"], "field label not supported: spec.x");
    // Each watcher got only c1's event, in its own version.
    let e = watch_core
        .next(Duration::from_secs(10))
        .expect("core watch event");
    assert_eq!(e["type"], "ADDED");
    assert_eq!(e["object"]["involvedObject"]["name"], "c1", "{e}");
    let e = watch_v1
        .next(Duration::from_secs(10))
        .expect("v1 watch event");
    assert_eq!(e["object"]["apiVersion"], "events.k8s.io/v1", "{e}");
    assert_eq!(e["object"]["regarding"]["name"], "c1", "{e}");
    assert!(watch_core.next(Duration::from_millis(300)).is_none());
    // Strict validation of events.k8s.io/v1.
    let (code, v) = req(
        "POST",
        &v1,
        Some(
            json!({"metadata": {"name": "e3"}, "regarding": {"namespace": "default"}, "type": "Odd"}),
        ),
    );
    assert_eq!(code, 422, "{v}");
    assert_eq!(
        v["message"],
        "Event.events.k8s.io \"e3\" is invalid: [eventTime: Required value, type: Invalid value: \"\": has invalid value: Odd]"
    );
    // The legacy API's namespace rule.
    let (code, v) = req(
        "POST",
        &core,
        Some(json!({"metadata": {"name": "e4"}, "involvedObject": {"namespace": "other"}})),
    );
    assert_eq!(code, 422, "{v}");
    assert_eq!(
        v["message"],
        "Event \"e4\" is invalid: involvedObject.namespace: Invalid value: \"other\": does not match event.namespace"
    );
    // Deleting through one API removes it from both.
    let (code, _) = req("DELETE", &format!("{v1}/e1"), None);
    assert_eq!(code, 200);
    assert_eq!(req("GET", &format!("{core}/e1"), None).0, 404);
    let (code, v) = req("GET", &format!("{v1}/e1"), None);
    assert_eq!(code, 404);
    assert_eq!(v["message"], "events.events.k8s.io \"e1\" not found");
}

/// kube-rs `events::Recorder` publishes (create, then a series patch), and both kubectls
/// show the events: `get events`, `describe crontab`, and 1.33's `kubectl events`.
#[test]
fn kube_rs_recorder_events_show_in_kubectl() {
    let stack = Stack::start_with_redis().expect("stack");
    let g = stack.gateway.clone();
    let (code, body) = http_request(
        "POST",
        &format!("{g}/apis/apiextensions.k8s.io/v1/customresourcedefinitions"),
        Some("application/json"),
        Some(CRD),
    )
    .unwrap();
    assert_eq!(code, 201, "{body}");
    let ct = format!("{g}/apis/stable.example.com/v1/namespaces/default/crontabs");
    wait_for("the CRD to serve", || req("GET", &ct, None).0 == 200);
    let (code, obj) = req(
        "POST",
        &ct,
        Some(
            json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": "nightly"}, "spec": {"n": 1}}),
        ),
    );
    assert_eq!(code, 201, "{obj}");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        use kube::runtime::events::{Event, EventType, Recorder, Reporter};
        let kc = kube::config::Kubeconfig::from_yaml(&kubeconfig_yaml(&g, "crdplane")).unwrap();
        let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap();
        let client = kube::Client::try_from(cfg).unwrap();
        let recorder = Recorder::new(
            client,
            Reporter {
                controller: "crontab-controller".into(),
                instance: Some("replica-1".into()),
            },
        );
        let reference = k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some("stable.example.com/v1".into()),
            kind: Some("CronTab".into()),
            name: Some("nightly".into()),
            namespace: Some("default".into()),
            uid: obj["metadata"]["uid"].as_str().map(str::to_string),
            ..Default::default()
        };
        let ev = Event {
            type_: EventType::Warning,
            reason: "ScheduleMissed".into(),
            note: Some("the nightly run was missed".into()),
            action: "Scheduling".into(),
            secondary: None,
        };
        recorder
            .publish(&ev, &reference)
            .await
            .expect("first publish");
        // The same event again: kube-rs patches the series.
        recorder
            .publish(&ev, &reference)
            .await
            .expect("series publish");
    });
    let (_, l) = req(
        "GET",
        &format!("{g}/apis/events.k8s.io/v1/namespaces/default/events"),
        None,
    );
    let items = l["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{l}");
    assert_eq!(items[0]["series"]["count"], 2, "{l}");
    for k in kubectls() {
        let o = stack.kubectl(&k, &["get", "events"]);
        assert!(o.ok, "{}", o.stderr);
        assert!(
            o.stdout.contains("ScheduleMissed") && o.stdout.contains("crontab/nightly"),
            "{}",
            o.stdout
        );
        let o = stack.kubectl(&k, &["describe", "crontab", "nightly"]);
        assert!(o.ok, "{}", o.stderr);
        let events = o.stdout.split("Events:").nth(1).unwrap_or("");
        assert!(
            events.contains("ScheduleMissed") && events.contains("the nightly run was missed"),
            "describe shows no events:\n{}",
            o.stdout
        );
        if k.to_string_lossy().contains("1.33") {
            let o = stack.kubectl(&k, &["events", "--for", "crontab/nightly"]);
            assert!(o.ok, "{}", o.stderr);
            assert!(o.stdout.contains("ScheduleMissed"), "{}", o.stdout);
        }
    }
}

/// Leader election with a real Lease-based library (the Python client's `leaderelection`
/// with `LeaseLock`): of two candidates exactly one leads; once it is killed the other takes
/// over within the lease duration (plus one retry period, the candidates' polling interval).
#[test]
fn lease_leader_election_with_the_python_client() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    use std::sync::mpsc;
    let Some((py, _)) = crdplane_tests::python_interpreters()
        .into_iter()
        .find(|(py, _)| {
            Command::new(py)
                .args([
                    "-c",
                    "import kubernetes.leaderelection.resourcelock.leaselock",
                ])
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
    else {
        eprintln!("skipping: no Python kubernetes client with LeaseLock (scripts/deps.sh --test)");
        return;
    };
    let stack = Stack::start_with_redis().expect("stack");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/lease_candidate.py");
    let (tx, rx) = mpsc::channel::<(String, Instant)>();
    let mut children = Vec::new();
    for id in ["a", "b"] {
        let mut c = Command::new(&py)
            .arg(script)
            .arg(&stack.kubeconfig)
            .arg(id)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn candidate");
        let out = c.stdout.take().unwrap();
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send((line, Instant::now()));
            }
        });
        children.push((id, c));
    }
    let leader_line = |timeout: Duration| -> Option<String> {
        let deadline = Instant::now() + timeout;
        while let Ok((line, _)) =
            rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            if let Some(id) = line.strip_prefix("LEADER ") {
                return Some(id.to_string());
            }
        }
        None
    };
    let first = leader_line(Duration::from_secs(30)).expect("a leader");
    // Nobody else leads while the leader renews (several lease durations).
    assert_eq!(leader_line(Duration::from_secs(6)), None, "two leaders");
    let leases = format!(
        "{}/apis/coordination.k8s.io/v1/namespaces/default/leases/crdplane-test-election",
        stack.gateway
    );
    let (_, lease) = req("GET", &leases, None);
    assert_eq!(lease["spec"]["holderIdentity"], first.as_str(), "{lease}");
    let (_, leader) = children
        .iter_mut()
        .find(|(id, _)| *id == first)
        .map(|(i, c)| (*i, c))
        .unwrap();
    leader.kill().unwrap();
    let killed = Instant::now();
    let _ = leader.wait();
    let second = leader_line(Duration::from_secs(20)).expect("a new leader");
    let took = killed.elapsed();
    assert_ne!(second, first);
    eprintln!("takeover after the leader was killed: {took:?} (lease duration 4 s, retry 1 s)");
    assert!(took <= Duration::from_secs(6), "takeover took {took:?}");
    let (_, lease) = req("GET", &leases, None);
    assert_eq!(lease["spec"]["holderIdentity"], second.as_str(), "{lease}");
    for (_, c) in &mut children {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// Events expire `--event-ttl` after their last write (upstream's etcd lease per event): a
/// watcher sees them DELETED, a read no longer finds them; an update pushes the expiry out;
/// other built-in objects stay.
#[test]
fn events_expire_after_the_event_ttl() {
    let redis = crdplane_tests::RedisServer::start().expect("redis");
    let stack = Stack::start_with_args(
        &redis.url(),
        &["--expiry-sweep-period", "200ms"],
        &["--event-ttl", "2s"],
    )
    .expect("stack");
    let g = &stack.gateway;
    let core = format!("{g}/api/v1/namespaces/default/events");
    let watch = WatchStream::open(&format!("{core}?watch=true"), None).unwrap();
    let ev = |name: &str, msg: &str| {
        json!({"metadata": {"name": name}, "involvedObject": {"kind": "ConfigMap", "name": "c", "namespace": "default"},
               "reason": "R", "message": msg, "type": "Normal"})
    };
    let (code, v) = req("POST", &core, Some(ev("short", "1")));
    assert_eq!(code, 201, "{v}");
    let (code, v) = req("POST", &core, Some(ev("renewed", "1")));
    assert_eq!(code, 201, "{v}");
    let (code, v) = req(
        "POST",
        &format!("{g}/api/v1/namespaces/default/configmaps"),
        Some(json!({"metadata": {"name": "stays"}})),
    );
    assert_eq!(code, 201, "{v}");
    let created = Instant::now();
    // Keep `renewed` alive by updating it past the first expiry.
    std::thread::sleep(Duration::from_millis(1500));
    let (code, v) = req("PUT", &format!("{core}/renewed"), Some(ev("renewed", "2")));
    assert_eq!(code, 200, "{v}");
    wait_for("the first event to expire", || {
        req("GET", &format!("{core}/short"), None).0 == 404
    });
    let gone_after = created.elapsed();
    assert!(
        gone_after >= Duration::from_secs(2),
        "expired early: {gone_after:?}"
    );
    assert_eq!(
        req("GET", &format!("{core}/renewed"), None).0,
        200,
        "the update did not renew the ttl"
    );
    let mut deleted = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(15);
    while deleted.len() < 2 && Instant::now() < deadline {
        if let Some(e) = watch.next(Duration::from_millis(500))
            && e["type"] == "DELETED"
        {
            deleted.push(
                e["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            );
        }
    }
    assert_eq!(
        deleted,
        vec!["short", "renewed"],
        "watch saw the expiries in order"
    );
    assert_eq!(
        req(
            "GET",
            &format!("{g}/api/v1/namespaces/default/configmaps/stays"),
            None
        )
        .0,
        200
    );
}

/// The oldest and the newest kubectl here (1.20 and 1.33 on CI).
fn oldest_and_newest_kubectls() -> Vec<std::path::PathBuf> {
    let ks = kubectls();
    match (ks.first(), ks.last()) {
        (Some(a), Some(b)) if a != b => vec![a.clone(), b.clone()],
        (Some(a), _) => vec![a.clone()],
        _ => vec![],
    }
}

/// `rbac.authorization.k8s.io/v1` through kubectl (`create role|clusterrole|rolebinding|
/// clusterrolebinding`, wide Tables, `explain`, upstream's refusal texts) and plain REST
/// (cluster scope, create on update, immutable roleRef); deleting a namespace removes its
/// Roles and RoleBindings and leaves the cluster-scoped objects.
#[test]
fn rbac_types_with_kubectl_and_upstream_texts() {
    let stack = Stack::start_with_redis().expect("stack");
    let g = &stack.gateway;
    let rbac = format!("{g}/apis/rbac.authorization.k8s.io/v1");
    let ks = oldest_and_newest_kubectls();
    assert!(!ks.is_empty(), "no kubectl found");
    for (n, k) in ks.iter().enumerate() {
        let version = k.display().to_string();
        let ns = format!("rbac{n}");
        let ok = |args: &[&str]| {
            let o = stack.kubectl(k, args);
            assert!(o.ok, "kubectl {version} {args:?}: {}{}", o.stdout, o.stderr);
            o.stdout
        };
        ok(&["create", "namespace", &ns]);
        ok(&[
            "-n",
            &ns,
            "create",
            "role",
            "cm-reader",
            "--verb=get,list",
            "--resource=configmaps",
        ]);
        let cr = format!("cm-lister-{n}");
        ok(&[
            "create",
            "clusterrole",
            &cr,
            "--verb=list",
            "--resource=configmaps",
        ]);
        ok(&[
            "-n",
            &ns,
            "create",
            "rolebinding",
            "jane-view",
            "--clusterrole=view",
            "--user=jane",
        ]);
        ok(&[
            "-n",
            &ns,
            "create",
            "rolebinding",
            "readers",
            "--role=cm-reader",
            "--group=devs",
            &format!("--serviceaccount={ns}:default"),
        ]);
        let crb = format!("jane-lists-{n}");
        ok(&[
            "create",
            "clusterrolebinding",
            &crb,
            &format!("--clusterrole={cr}"),
            "--user=jane",
        ]);
        let (code, b) = req(
            "GET",
            &format!("{rbac}/namespaces/{ns}/rolebindings/readers"),
            None,
        );
        assert_eq!(code, 200, "{b}");
        assert_eq!(
            b["roleRef"],
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-reader"})
        );
        assert_eq!(
            b["subjects"],
            json!([{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "devs"},
                   {"kind": "ServiceAccount", "name": "default", "namespace": ns}]),
            "kubectl {version}"
        );
        let (code, c) = req("GET", &format!("{rbac}/clusterroles/{cr}"), None);
        assert_eq!(code, 200, "{c}");
        assert!(c["metadata"].get("namespace").is_none(), "{c}");
        assert_eq!(
            c["rules"],
            json!([{"verbs": ["list"], "apiGroups": [""], "resources": ["configmaps"]}])
        );
        // Wide Tables: roles have Name / Created At, bindings Role, Users, Groups,
        // ServiceAccounts.
        let out = ok(&["-n", &ns, "get", "roles,rolebindings", "-o", "wide"]);
        for needle in [
            "CREATED AT",
            "role.rbac.authorization.k8s.io/cm-reader",
            "ROLE",
            "USERS",
            "GROUPS",
            "SERVICEACCOUNTS",
            "rolebinding.rbac.authorization.k8s.io/jane-view",
            "ClusterRole/view",
            "Role/cm-reader",
            "devs",
            &format!("{ns}/default"),
        ] {
            assert!(
                out.contains(needle),
                "kubectl {version}: {needle:?} in\n{out}"
            );
        }
        let row = out
            .lines()
            .find(|l| l.contains("rolebinding.rbac.authorization.k8s.io/jane-view"))
            .unwrap();
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols[1], "ClusterRole/view", "{row}");
        assert_eq!(cols[3], "jane", "{row}");
        let out = ok(&["get", "clusterrolebinding", &crb]);
        assert!(out.contains(&format!("ClusterRole/{cr}")), "{out}");
        let out = ok(&["explain", "role.rules"]);
        assert!(
            out.split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .contains("Rules holds all the PolicyRules for this Role"),
            "kubectl {version}:\n{out}"
        );
        let out = ok(&["-n", &ns, "describe", "rolebinding", "readers"]);
        assert!(
            out.contains("cm-reader") && out.contains("ServiceAccount") && out.contains("devs"),
            "kubectl {version}:\n{out}"
        );
        // Client-side apply: rules are an atomic list, a changed manifest replaces them.
        let manifest = |verb: &str, resource: &str| {
            format!(
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: applied\n  namespace: {ns}\nrules:\n- apiGroups: [\"\"]\n  resources: [{resource}]\n  verbs: [{verb}]\n"
            )
        };
        for m in [manifest("get", "configmaps"), manifest("list", "secrets")] {
            let o = stack.kubectl_stdin(k, &["apply", "-f", "-"], Some(&m));
            assert!(o.ok, "kubectl {version} apply: {}", o.stderr);
        }
        let (_, applied) = req(
            "GET",
            &format!("{rbac}/namespaces/{ns}/roles/applied"),
            None,
        );
        assert_eq!(
            applied["rules"],
            json!([{"verbs": ["list"], "apiGroups": [""], "resources": ["secrets"]}]),
            "kubectl {version}"
        );
        // Upstream's refusal, as kubectl prints it.
        let bad = format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: bad\n  namespace: {ns}\nrules:\n- verbs: [get]\n  nonResourceURLs: [/healthz]\n"
        );
        let o = stack.kubectl_stdin(k, &["create", "-f", "-"], Some(&bad));
        assert!(!o.ok, "kubectl {version}");
        assert!(
            o.stderr.contains(
                "Role \"bad\" is invalid: rules[0].nonResourceURLs: Invalid value: []string{\"/healthz\"}: namespaced rules cannot apply to non-resource URLs"
            ),
            "kubectl {version}: {}",
            o.stderr
        );
    }

    // REST: upstream's texts, create on update, the immutable roleRef, cluster scope.
    let roles = format!("{rbac}/namespaces/rbac0/roles");
    let (code, v) = req(
        "POST",
        &roles,
        Some(json!({"metadata": {"name": "bad"}, "rules": [{"verbs": ["get"]}]})),
    );
    assert_eq!(code, 422, "{v}");
    assert_eq!(
        v["message"],
        "Role.rbac.authorization.k8s.io \"bad\" is invalid: [rules[0].apiGroups: Required value: resource rules must supply at least one api group, rules[0].resources: Required value: resource rules must supply at least one resource]"
    );
    assert_eq!(v["details"]["causes"][0]["field"], "rules[0].apiGroups");
    let (code, v) = req(
        "PUT",
        &format!("{roles}/put-created"),
        Some(json!({"metadata": {"name": "put-created"}})),
    );
    assert_eq!(code, 201, "create on update: {v}");
    assert!(v["rules"].is_null() && v.get("rules").is_some(), "{v}");
    let binding = format!("{rbac}/namespaces/rbac0/rolebindings/jane-view");
    let (_, mut b) = req("GET", &binding, None);
    b["roleRef"]["name"] = json!("edit");
    b["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    let (code, v) = req("PUT", &binding, Some(b));
    assert_eq!(code, 422, "{v}");
    assert_eq!(
        v["message"],
        "RoleBinding.rbac.authorization.k8s.io \"jane-view\" is invalid: roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"ClusterRole\", Name:\"edit\"}: cannot change roleRef"
    );
    let (code, v) = req(
        "POST",
        &format!("{rbac}/clusterrolebindings"),
        Some(json!({"metadata": {"name": "bad"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "x"},
            "subjects": [{"kind": "ServiceAccount", "name": "default"}]})),
    );
    assert_eq!(code, 422, "{v}");
    assert_eq!(
        v["message"],
        "ClusterRoleBinding.rbac.authorization.k8s.io \"bad\" is invalid: [roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\", subjects[0].namespace: Required value]"
    );
    // Cluster-scoped: no route under a namespace; a namespace in the body is dropped; no
    // namespace needs to exist.
    assert_eq!(
        req(
            "GET",
            &format!("{rbac}/namespaces/rbac0/clusterroles/cm-lister-0"),
            None
        )
        .0,
        404
    );
    let (code, v) = req(
        "POST",
        &format!("{rbac}/clusterroles"),
        Some(json!({"metadata": {"name": "agg", "namespace": "nope"},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"agg": "yes"}}]}})),
    );
    assert_eq!(code, 201, "{v}");
    assert!(v["metadata"].get("namespace").is_none(), "{v}");
    // The aggregation controller, without RBAC authorization too: a ClusterRole the
    // selector matches has its rules written into `agg`, and the bootstrap `admin` carries
    // the rules of the roles aggregated into it.
    let (code, v) = req(
        "POST",
        &format!("{rbac}/clusterroles"),
        Some(
            json!({"metadata": {"name": "agg-part", "labels": {"agg": "yes"}},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}),
        ),
    );
    assert_eq!(code, 201, "{v}");
    wait_for("agg to gather agg-part's rule", || {
        let (_, a) = req("GET", &format!("{rbac}/clusterroles/agg"), None);
        a["rules"] == json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}])
    });
    wait_for(
        "the bootstrap admin role to carry its aggregated rules",
        || {
            let (_, a) = req("GET", &format!("{rbac}/clusterroles/admin"), None);
            a["rules"].as_array().is_some_and(|r| {
                r.iter().any(|rule| {
                    rule["resources"]
                        .as_array()
                        .is_some_and(|x| x.contains(&json!("configmaps")))
                })
            })
        },
    );
    let (code, v) = req(
        "POST",
        &format!("{rbac}/namespaces/nope/roles"),
        Some(json!({"metadata": {"name": "r"}})),
    );
    assert_eq!(code, 404, "{v}");
    assert_eq!(v["message"], "namespaces \"nope\" not found");

    // Deleting a namespace removes its Roles and RoleBindings.
    let (code, v) = req("DELETE", &format!("{g}/api/v1/namespaces/rbac0"), None);
    assert_eq!(code, 200, "{v}");
    wait_for("rbac0's roles and bindings to go", || {
        let (_, r) = req("GET", &roles, None);
        let (_, b) = req(
            "GET",
            &format!("{rbac}/namespaces/rbac0/rolebindings"),
            None,
        );
        r["items"].as_array().is_some_and(Vec::is_empty)
            && b["items"].as_array().is_some_and(Vec::is_empty)
    });
    wait_for("rbac0 to go", || {
        req("GET", &format!("{g}/api/v1/namespaces/rbac0"), None).0 == 404
    });
    let (_, l) = req("GET", &format!("{rbac}/clusterroles"), None);
    let names: Vec<&str> = l["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"cm-lister-0") && names.contains(&"agg"),
        "{l}"
    );
    assert_eq!(
        req(
            "GET",
            &format!("{rbac}/clusterrolebindings/jane-lists-0"),
            None
        )
        .0,
        200
    );
}
