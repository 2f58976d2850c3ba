//! Redis outages with the real binaries and a real redis-server stopped and started again on
//! the same socket and data directory.
//!
//! While Redis is down: `/readyz` fails with upstream's readyz text (`[-]storage failed`),
//! and a request answers 503 ServiceUnavailable with `Retry-After` and a Status that names
//! no Redis detail, within about the storage's Redis timeout (1 s) instead of ~9 s. After
//! Redis is back: readiness recovers by itself, an open watch receives the writes made after
//! the restart (the storage resubscribes and closes the gap from the history by revision),
//! new watches work, and namespace deletion (registry lifecycle controller) completes. A
//! private watch (from a revision older than the gateway's shared streams) ends cleanly,
//! without an ERROR event, when the storage service restarts.

use crdplane_tests::{Stack, WatchStream, http_get, http_request};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(20);
const CRD: &str = r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"crontabs.stable.example.com"},
 "spec":{"group":"stable.example.com","scope":"Namespaced",
  "names":{"plural":"crontabs","singular":"crontab","kind":"CronTab"},
  "versions":[{"name":"v1","served":true,"storage":true,
   "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}"#;
const CTS: &str = "/apis/stable.example.com/v1/namespaces/ns1/crontabs";

fn call(base: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let b = body.map(|b| b.to_string());
    let (code, text) = http_request(
        method,
        &format!("{base}{path}"),
        b.as_ref().map(|_| "application/json"),
        b.as_deref(),
    )
    .expect("http");
    (
        code,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// A GET answered with its status, headers (lower-case names) and body.
fn get_with_headers(url: &str) -> (u16, Vec<(String, String)>, String) {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").expect("http url");
    let (host, path) = rest.split_once('/').expect("path");
    let mut s = std::net::TcpStream::connect(host).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf).into_owned();
    let code = text.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let headers = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    (code, headers, body.to_string())
}

fn ct(name: &str) -> Value {
    json!({"apiVersion":"stable.example.com/v1","kind":"CronTab",
        "metadata":{"name":name},"spec":{"n":name}})
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + T;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The next object event's (type, name), skipping bookmarks.
fn next_event(w: &WatchStream) -> Option<(String, String)> {
    loop {
        let e = w.next(T)?;
        let t = e["type"].as_str().unwrap_or("").to_string();
        if t == "BOOKMARK" {
            continue;
        }
        let name = e["object"]["metadata"]["name"]
            .as_str()
            .unwrap_or("")
            .to_string();
        return Some((t, name));
    }
}

#[test]
fn redis_restart_is_survived_and_reported() {
    let mut stack = Stack::start_with_redis_and(&["--redis-timeout", "1s"]).unwrap();
    let base = stack.gateway.clone();
    let crd: Value = serde_json::from_str(CRD).unwrap();
    let (code, body) = call(
        &base,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        Some(&crd),
    );
    assert_eq!(code, 201, "{body}");
    let (code, body) = call(
        &base,
        "POST",
        "/api/v1/namespaces",
        Some(&json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"ns1"}})),
    );
    assert_eq!(code, 201, "{body}");
    wait_until("CRD served", || call(&base, "GET", CTS, None).0 == 200);
    let (code, o1) = call(&base, "POST", CTS, Some(&ct("o1")));
    assert_eq!(code, 201, "{o1}");
    let rv = o1["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();

    // Open watches: one namespaced from o1's revision, one of all namespaces from "now".
    let w_ns =
        WatchStream::open(&format!("{base}{CTS}?watch=1&resourceVersion={rv}"), None).unwrap();
    assert_eq!(w_ns.status, 200);
    let w_all = WatchStream::open(
        &format!("{base}/apis/stable.example.com/v1/crontabs?watch=1&resourceVersion={rv}"),
        None,
    )
    .unwrap();
    assert_eq!(w_all.status, 200);

    // --- Redis down ---------------------------------------------------------------------
    let redis = stack.redis.as_mut().expect("private redis");
    redis.stop();
    let socket = redis.socket.display().to_string();

    wait_until("/readyz to fail", || {
        http_get(&format!("{base}/readyz")).is_ok_and(|(c, _)| c != 200)
    });
    let (code, text) = http_get(&format!("{base}/readyz")).unwrap();
    assert_eq!(code, 500, "{text}");
    assert!(text.contains("[-]storage failed"), "{text}");
    assert!(text.contains("readyz check failed"), "{text}");

    // A request fails fast with 503 + Retry-After and a Status without Redis details.
    let started = Instant::now();
    let (code, headers, body) = get_with_headers(&format!("{base}{CTS}/o1"));
    let took = started.elapsed();
    assert_eq!(code, 503, "{body}");
    assert!(
        took < Duration::from_millis(2500),
        "503 took {took:?} (want about the 1 s Redis timeout)"
    );
    assert!(
        headers.iter().any(|(k, v)| k == "retry-after" && v == "1"),
        "{headers:?}"
    );
    let status: Value = serde_json::from_str(&body).expect("Status JSON");
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["status"], "Failure");
    assert_eq!(status["reason"], "ServiceUnavailable");
    assert_eq!(status["code"], 503);
    assert_eq!(status["details"]["retryAfterSeconds"], 1);
    let msg = status["message"]
        .as_str()
        .unwrap_or("")
        .to_ascii_lowercase();
    assert!(
        !msg.contains("redis") && !msg.contains(&socket.to_ascii_lowercase()),
        "message leaks backend details: {msg}"
    );
    // A write as well.
    let started = Instant::now();
    let (code, body) = call(&base, "POST", CTS, Some(&ct("during")));
    assert_eq!(code, 503, "{body}");
    assert!(started.elapsed() < Duration::from_millis(2500));

    // --- Redis back -----------------------------------------------------------------------
    stack.redis.as_mut().unwrap().restart().unwrap();
    // Write as soon as storage can: the first writes usually land before the pub/sub
    // connection is back, so the open watch only sees them through the history replay.
    let mut o2 = Value::Null;
    wait_until("a write after the restart", || {
        let (code, body) = call(&base, "POST", CTS, Some(&ct("o2")));
        o2 = body;
        code == 201
    });
    wait_until("/readyz to pass again", || {
        http_get(&format!("{base}/readyz")).is_ok_and(|(c, _)| c == 200)
    });
    let (code, body) = call(&base, "POST", CTS, Some(&ct("o3")));
    assert_eq!(code, 201, "{body}");

    // The open watches continue without a gap.
    for (w, which) in [(&w_ns, "namespaced"), (&w_all, "all namespaces")] {
        let got: Vec<(String, String)> = (0..2).filter_map(|_| next_event(w)).collect();
        assert_eq!(
            got,
            [("ADDED".into(), "o2".into()), ("ADDED".into(), "o3".into())],
            "{which} watch across the restart"
        );
    }

    // A new watch after the restart works (initial state, then live events).
    let w_new = WatchStream::open(&format!("{base}{CTS}?watch=1"), None).unwrap();
    assert_eq!(w_new.status, 200);
    let initial: Vec<String> = (0..3)
        .filter_map(|_| next_event(&w_new))
        .map(|(_, n)| n)
        .collect();
    assert_eq!(initial, ["o1", "o2", "o3"]);
    let (code, body) = call(&base, "POST", CTS, Some(&ct("o4")));
    assert_eq!(code, 201, "{body}");
    assert_eq!(next_event(&w_new), Some(("ADDED".into(), "o4".into())));
    assert_eq!(next_event(&w_ns), Some(("ADDED".into(), "o4".into())));

    // Namespace deletion completes (lifecycle controller survived the restart).
    let (code, body) = call(&base, "DELETE", "/api/v1/namespaces/ns1", None);
    assert!(code == 200 || code == 202, "{code} {body}");
    wait_until("namespace ns1 to be gone", || {
        call(&base, "GET", "/api/v1/namespaces/ns1", None).0 == 404
    });
    let (code, body) = call(&base, "GET", CTS, None);
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["items"].as_array().map(Vec::len), Some(0), "{body}");
}

/// A watch from a revision older than any shared stream of the gateway (a private storage
/// watch, replaying history) ends cleanly when the storage service goes away: no ERROR
/// event, the stream just ends. Watching again from the last revision delivers what was
/// written meanwhile, once.
#[test]
fn a_private_watch_ends_cleanly_when_storage_restarts() {
    let mut stack = Stack::start_with_redis().unwrap();
    let base = stack.gateway.clone();
    let crd: Value = serde_json::from_str(CRD).unwrap();
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    assert_eq!(call(&base, "POST", crds, Some(&crd)).0, 201);
    let ns = json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"ns1"}});
    assert_eq!(call(&base, "POST", "/api/v1/namespaces", Some(&ns)).0, 201);
    wait_until("CRD served", || call(&base, "GET", CTS, None).0 == 200);
    let (_, o1) = call(&base, "POST", CTS, Some(&ct("o1")));
    let (code, o2) = call(&base, "POST", CTS, Some(&ct("o2")));
    assert_eq!(code, 201, "{o2}");
    let rv1 = o1["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    // From o1's revision with no shared stream running: a private watch replays o2.
    let w = WatchStream::open(&format!("{base}{CTS}?watch=1&resourceVersion={rv1}"), None).unwrap();
    assert_eq!(w.status, 200);
    assert_eq!(next_event(&w), Some(("ADDED".into(), "o2".into())));
    let last = o2["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();

    let storage = stack
        .processes()
        .index("storage")
        .expect("the storage service");
    stack
        .processes()
        .respawn(storage, Duration::from_secs(30))
        .expect("restart storage");
    // The stream ends without an ERROR event.
    loop {
        match w.poll(T) {
            Ok(e) => assert_ne!(e["type"], "ERROR", "an ERROR event: {e}"),
            Err(ended) => {
                assert!(ended, "the watch neither ended nor sent anything");
                break;
            }
        }
    }
    stack.wait_ready(T).unwrap();
    let mut o3 = Value::Null;
    wait_until("a write after the restart", || {
        let (code, body) = call(&base, "POST", CTS, Some(&ct("o3")));
        o3 = body;
        code == 201
    });
    // Watching again from the last revision seen: o3, once.
    let again =
        WatchStream::open(&format!("{base}{CTS}?watch=1&resourceVersion={last}"), None).unwrap();
    assert_eq!(again.status, 200);
    assert_eq!(next_event(&again), Some(("ADDED".into(), "o3".into())));
    assert!(!again.ended(Duration::from_millis(300)));
}
