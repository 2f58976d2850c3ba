//! HTTP watch behaviour through the gateway's shared upstream streams: initial events,
//! resume inside and before the shared ring, selector transitions (upstream cacher
//! semantics), watch-list end bookmark, Table watches, timeoutSeconds, 410 text, and many
//! watchers of one resource all seeing the same events.

use crdplane_tests::{Stack, WatchStream, http_request};
use serde_json::{Value, json};
use std::time::Duration;

const CRD: &str = r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"crontabs.stable.example.com"},
 "spec":{"group":"stable.example.com","scope":"Namespaced",
  "names":{"plural":"crontabs","singular":"crontab","kind":"CronTab"},
  "versions":[{"name":"v1","served":true,"storage":true,
   "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}},
   "additionalPrinterColumns":[{"name":"Image","type":"string","jsonPath":".spec.image"}]}]}}"#;

const T: Duration = Duration::from_secs(10);

struct Api {
    base: String,
}

impl Api {
    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let b = body.map(|b| b.to_string());
        let (code, text) = http_request(
            method,
            &format!("{}{path}", self.base),
            b.as_ref().map(|_| "application/json"),
            b.as_deref(),
        )
        .expect("http");
        (
            code,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }
    fn watch(&self, query: &str) -> WatchStream {
        let w =
            WatchStream::open(&format!("{}{CTS}?watch=1&{query}", self.base), None).expect("watch");
        assert_eq!(w.status, 200);
        w
    }
}

const CTS: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";

fn ct(name: &str, app: &str, image: &str) -> Value {
    json!({"apiVersion":"stable.example.com/v1","kind":"CronTab",
        "metadata":{"name":name,"labels":{"app":app}},"spec":{"image":image}})
}

fn setup(stack: &Stack, tenant: &str) -> Api {
    let api = Api {
        base: format!("{}/clusters/{tenant}", stack.gateway),
    };
    let crd: Value = serde_json::from_str(CRD).unwrap();
    let (code, body) = api.call(
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        Some(&crd),
    );
    assert_eq!(code, 201, "{body}");
    // Served once the collection lists.
    for _ in 0..200 {
        if api.call("GET", CTS, None).0 == 200 {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    api
}

fn put(api: &Api, name: &str, app: &str, image: &str) -> Value {
    let (_, cur) = api.call("GET", &format!("{CTS}/{name}"), None);
    let mut o = ct(name, app, image);
    o["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"].clone();
    let (code, out) = api.call("PUT", &format!("{CTS}/{name}"), Some(&o));
    assert_eq!(code, 200, "{out}");
    out
}

fn summary(evs: &[Value]) -> Vec<(String, String, String)> {
    evs.iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap_or("").to_string(),
                e["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                e["object"]["metadata"]["labels"]["app"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect()
}

fn rv(v: &Value) -> u64 {
    v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn shared_watch_streams_behave_like_upstream() {
    let stack = Stack::start_with_redis().unwrap();
    let api = setup(&stack, "fan");
    let (code, a) = api.call("POST", CTS, Some(&ct("a", "web", "i1")));
    assert_eq!(code, 201, "{a}");

    // Watch from "0"/unset: synthetic ADDED for the current state, then live events.
    let initial = api.watch("");
    let e = initial.next(T).expect("initial ADDED");
    assert_eq!(
        summary(std::slice::from_ref(&e)),
        [("ADDED".into(), "a".into(), "web".into())]
    );
    assert_eq!(e["object"]["apiVersion"], "stable.example.com/v1");

    // Selector watch: transitions like upstream's cacher.
    let web = api.watch("labelSelector=app%3Dweb&resourceVersion=0");
    assert_eq!(
        summary(&web.take(1, T)),
        [("ADDED".into(), "a".into(), "web".into())]
    );

    // Many plain watchers on one resource (one shared upstream stream).
    let from = rv(&a);
    let many: Vec<WatchStream> = (0..20)
        .map(|_| api.watch(&format!("resourceVersion={from}")))
        .collect();

    let m1 = put(&api, "a", "db", "i2"); // web → not web: DELETED for the selector watch
    let m2 = put(&api, "a", "web", "i3"); // back: ADDED
    let m3 = put(&api, "a", "web", "i4"); // stays: MODIFIED
    let (code, d) = api.call("DELETE", &format!("{CTS}/a"), None);
    assert_eq!(code, 200, "{d}");

    let sel = web.take(3, T);
    assert_eq!(
        summary(&sel),
        [
            ("DELETED".into(), "a".into(), "web".into()),
            ("ADDED".into(), "a".into(), "web".into()),
            ("MODIFIED".into(), "a".into(), "web".into()),
        ]
    );
    // The DELETED of a transition carries the previous content at the event's revision.
    assert_eq!(sel[0]["object"]["spec"]["image"], "i1");
    assert_eq!(rv(&sel[0]["object"]), rv(&m1));
    assert_eq!(rv(&sel[1]["object"]), rv(&m2));
    let last = web.next(T).expect("DELETED");
    assert_eq!(last["type"], "DELETED");

    let want: Vec<u64> = vec![rv(&m1), rv(&m2), rv(&m3), rv(&m1) + 3];
    for w in &many {
        let evs = w.take(4, T);
        let got: Vec<u64> = evs.iter().map(|e| rv(&e["object"])).collect();
        assert_eq!(got, want, "every watcher sees every event in order");
        let types: Vec<&str> = evs.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(types, ["MODIFIED", "MODIFIED", "MODIFIED", "DELETED"]);
    }
    let plain = initial.take(4, T);
    assert_eq!(plain.len(), 4);

    // Resume inside the shared ring: exactly the events after the revision.
    let resumed = api.watch(&format!("resourceVersion={}", rv(&m2)));
    let got: Vec<u64> = resumed
        .take(2, T)
        .iter()
        .map(|e| rv(&e["object"]))
        .collect();
    assert_eq!(got, vec![rv(&m3), rv(&m1) + 3]);

    // Resume from the first revision: everything after it, in order.
    let old = api.watch(&format!("resourceVersion={from}"));
    let got: Vec<u64> = old.take(4, T).iter().map(|e| rv(&e["object"])).collect();
    assert_eq!(got, want);

    // Watch-list: initial events then the annotated BOOKMARK.
    api.call("POST", CTS, Some(&ct("b", "web", "i1")));
    let wl = api
        .watch("sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true");
    let evs = wl.take(2, T);
    assert_eq!(evs[0]["type"], "ADDED");
    assert_eq!(evs[1]["type"], "BOOKMARK");
    assert_eq!(evs[1]["object"]["kind"], "CronTab");
    assert_eq!(evs[1]["object"]["apiVersion"], "stable.example.com/v1");
    assert_eq!(
        evs[1]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );

    // timeoutSeconds ends the stream.
    let short = api.watch("timeoutSeconds=1&resourceVersion=0");
    assert!(short.ended(Duration::from_secs(5)));

    // Table watch: column definitions only on the first event.
    let tw = WatchStream::open(
        &format!("{}{CTS}?watch=1", api.base),
        Some("application/json;as=Table;v=v1;g=meta.k8s.io"),
    )
    .unwrap();
    assert!(tw.content_type.contains("as=table"), "{}", tw.content_type);
    let first = tw.next(T).unwrap();
    assert!(
        first["object"]["columnDefinitions"]
            .as_array()
            .is_some_and(|c| !c.is_empty())
    );
    put(&api, "b", "web", "i9");
    let second = tw.next(T).unwrap();
    assert_eq!(second["type"], "MODIFIED");
    assert!(
        second["object"]["columnDefinitions"].is_null()
            || second["object"]["columnDefinitions"]
                .as_array()
                .is_some_and(|c| c.is_empty()),
        "{second}"
    );
    assert_eq!(second["object"]["rows"][0]["cells"][1], "i9");
}

#[test]
fn compacted_history_is_410_with_upstream_text() {
    // A stack whose storage keeps a short history, so old revisions get compacted.
    let redis = crdplane_tests::RedisServer::start().unwrap();
    let mut children = Vec::new();
    let spawn = |children: &mut Vec<std::process::Child>, name: &str, args: &[&str]| {
        crdplane_tests::spawn_service(children, name, args).unwrap()
    };
    let url = redis.url();
    let storage = spawn(
        &mut children,
        "crdplane-storage",
        &[
            "--listen",
            "127.0.0.1:0",
            "--redis-url",
            &url,
            "--history-len",
            "16",
        ],
    );
    let validation = spawn(
        &mut children,
        "crdplane-validation",
        &["--listen", "127.0.0.1:0"],
    );
    let registry = spawn(
        &mut children,
        "crdplane-registry",
        &[
            "--listen",
            "127.0.0.1:0",
            "--storage",
            &storage,
            "--validation",
            &validation,
        ],
    );
    let gateway = spawn(
        &mut children,
        "crdplane-gateway",
        &[
            "--listen",
            "127.0.0.1:0",
            "--storage",
            &storage,
            "--validation",
            &validation,
            "--registry",
            &registry,
        ],
    );
    struct Kill(Vec<std::process::Child>);
    impl Drop for Kill {
        fn drop(&mut self) {
            for c in &mut self.0 {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
    let _kill = Kill(children);
    for _ in 0..500 {
        if matches!(
            crdplane_tests::http_get(&format!("{gateway}/readyz")),
            Ok((200, _))
        ) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let api = Api {
        base: format!("{gateway}/clusters/gone"),
    };
    let crd: Value = serde_json::from_str(CRD).unwrap();
    assert_eq!(
        api.call(
            "POST",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            Some(&crd)
        )
        .0,
        201
    );
    for _ in 0..200 {
        if api.call("GET", CTS, None).0 == 200 {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    // Redis trims streams by whole nodes (MAXLEN ~): write well past one node.
    for i in 0..400 {
        assert_eq!(
            api.call("POST", CTS, Some(&ct(&format!("o{i}"), "x", "i")))
                .0,
            201
        );
    }
    let w = api.watch("resourceVersion=1");
    let e = w.next(T).expect("ERROR event");
    assert_eq!(e["type"], "ERROR", "{e}");
    assert_eq!(e["object"]["code"], 410);
    assert_eq!(e["object"]["reason"], "Expired");
    let msg = e["object"]["message"].as_str().unwrap();
    let re = regex_lite_match(msg);
    assert!(re, "{msg}");
    assert!(w.ended(Duration::from_secs(5)));
}

/// `too old resource version: 1 (<n>)` with n > 1.
fn regex_lite_match(msg: &str) -> bool {
    let Some(rest) = msg.strip_prefix("too old resource version: 1 (") else {
        return false;
    };
    rest.strip_suffix(')')
        .and_then(|n| n.parse::<u64>().ok())
        .is_some_and(|n| n > 1)
}
