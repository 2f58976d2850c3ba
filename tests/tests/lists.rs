//! Lists at the HTTP API against the real stack: upstream's list-option validation texts,
//! resourceVersion semantics (unset / 0 / NotOlderThan / Exact / legacy), signed continue
//! tokens (tampered, foreign, too old), paging under concurrent writes.
//!
//! The storage service runs with a tiny event history (`--history-len 16`, trimmed by Redis
//! with `MAXLEN ~`, so a few hundred writes push any revision out of it) to reach the 410s.

use crdplane_tests::{Stack, http_request};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

const CRD: &str = r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"crontabs.stable.example.com"},
 "spec":{"group":"stable.example.com","scope":"Namespaced",
  "names":{"plural":"crontabs","singular":"crontab","kind":"CronTab"},
  "versions":[{"name":"v1","served":true,"storage":true,
   "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}"#;

const CRD2: &str = r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"widgets.stable.example.com"},
 "spec":{"group":"stable.example.com","scope":"Namespaced",
  "names":{"plural":"widgets","singular":"widget","kind":"Widget"},
  "versions":[{"name":"v1","served":true,"storage":true,
   "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}"#;

const CTS: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";
const WIDGETS: &str = "/apis/stable.example.com/v1/namespaces/default/widgets";

/// The harness stack with a 16-event storage history (reaches 410 Expired quickly).
struct MiniStack {
    gateway: String,
    _stack: Stack,
}

impl MiniStack {
    fn start() -> Self {
        let stack = Stack::start_with_redis_and(&["--history-len", "16"]).expect("stack");
        let s = Self {
            gateway: stack.gateway.clone(),
            _stack: stack,
        };
        for crd in [CRD, CRD2] {
            let (code, body) = s.call(
                "POST",
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                Some(crd),
            );
            assert_eq!(code, 201, "{body}");
        }
        s
    }

    fn call(&self, method: &str, path: &str, body: Option<&str>) -> (u16, Value) {
        let ct = body.map(|_| "application/json");
        let (code, text) =
            http_request(method, &format!("{}{path}", self.gateway), ct, body).expect("http");
        (
            code,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    fn get(&self, path: &str) -> (u16, Value) {
        self.call("GET", path, None)
    }

    fn create(&self, path: &str, name: &str, spec: i64) -> u64 {
        let kind = if path.ends_with("/widgets") {
            "Widget"
        } else {
            "CronTab"
        };
        let o = json!({"apiVersion":"stable.example.com/v1","kind":kind,
            "metadata":{"name":name},"spec":{"n":spec}});
        let (code, b) = self.call("POST", path, Some(&o.to_string()));
        assert_eq!(code, 201, "{b}");
        rv_of(&b)
    }

    fn update(&self, name: &str, spec: i64) -> u64 {
        let patch = json!({"spec":{"n":spec}}).to_string();
        let (code, text) = http_request(
            "PATCH",
            &format!("{}{CTS}/{name}", self.gateway),
            Some("application/merge-patch+json"),
            Some(&patch),
        )
        .expect("http");
        assert_eq!(code, 200, "{text}");
        rv_of(&serde_json::from_str(&text).unwrap())
    }

    fn delete(&self, name: &str) {
        let (code, b) = self.call("DELETE", &format!("{CTS}/{name}"), None);
        assert_eq!(code, 200, "{b}");
    }
}

fn rv_of(o: &Value) -> u64 {
    o["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no resourceVersion in {o}"))
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

fn invalid_list_options(causes: &[(&str, &str, &str)], message: &str) -> Value {
    json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
        "message": message,
        "reason":"Invalid",
        "details":{"group":"meta.k8s.io","kind":"ListOptions","causes":
            causes.iter().map(|(r, m, f)| json!({"reason":r,"message":m,"field":f})).collect::<Vec<_>>()},
        "code":422})
}

fn bad_request(message: &str) -> Value {
    json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
        "message":message,"reason":"BadRequest","code":400})
}

/// A raw GET returning (status, headers, body) — for the Retry-After header.
fn raw_get(base: &str, path: &str) -> (u16, String, String) {
    use std::io::{Read, Write};
    let host = base.strip_prefix("http://").unwrap();
    let mut s = std::net::TcpStream::connect(host).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut buf = String::new();
    let _ = s.read_to_string(&mut buf);
    let code = buf[9..12].parse().unwrap();
    let (head, body) = buf.split_once("\r\n\r\n").unwrap();
    (code, head.to_ascii_lowercase(), body.to_string())
}

#[test]
fn list_option_validation_is_upstreams() {
    let s = MiniStack::start();
    let cases: Vec<(&str, Value)> = vec![
        (
            "resourceVersionMatch=NotOlderThan",
            invalid_list_options(
                &[(
                    "FieldValueForbidden",
                    "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
                    "resourceVersionMatch",
                )],
                "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
            ),
        ),
        (
            "resourceVersion=0&resourceVersionMatch=Exact",
            invalid_list_options(
                &[(
                    "FieldValueForbidden",
                    "Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                    "resourceVersionMatch",
                )],
                "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ),
        ),
        (
            "resourceVersion=1&resourceVersionMatch=Newest",
            invalid_list_options(
                &[(
                    "FieldValueNotSupported",
                    "Unsupported value: \"Newest\": supported values: \"Exact\", \"NotOlderThan\", \"\"",
                    "resourceVersionMatch",
                )],
                "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Unsupported value: \"Newest\": supported values: \"Exact\", \"NotOlderThan\", \"\"",
            ),
        ),
        (
            "resourceVersion=1&resourceVersionMatch=NotOlderThan&continue=abc",
            invalid_list_options(
                &[(
                    "FieldValueForbidden",
                    "Forbidden: resourceVersionMatch is forbidden when continue is provided",
                    "resourceVersionMatch",
                )],
                "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided",
            ),
        ),
        (
            "sendInitialEvents=true",
            invalid_list_options(
                &[(
                    "FieldValueForbidden",
                    "Forbidden: sendInitialEvents is forbidden for list",
                    "sendInitialEvents",
                )],
                "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list",
            ),
        ),
        (
            "resourceVersionMatch=Exact&sendInitialEvents=false",
            invalid_list_options(
                &[
                    (
                        "FieldValueForbidden",
                        "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
                        "resourceVersionMatch",
                    ),
                    (
                        "FieldValueForbidden",
                        "Forbidden: sendInitialEvents is forbidden for list",
                        "sendInitialEvents",
                    ),
                ],
                "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided, sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list]",
            ),
        ),
        (
            "resourceVersion=abc",
            bad_request(
                "invalid resource version: resourceVersion: Invalid value: \"abc\": strconv.ParseUint: parsing \"abc\": invalid syntax",
            ),
        ),
        (
            "continue=%21%21%21",
            bad_request(
                "invalid continue token: continue key is not valid: illegal base64 data at input byte 0",
            ),
        ),
    ];
    for (q, want) in cases {
        for path in [CTS, "/api/v1/namespaces"] {
            let (code, body) = s.get(&format!("{path}?{q}"));
            assert_eq!(body, want, "{path}?{q}");
            assert_eq!(code as u64, want["code"].as_u64().unwrap(), "{q}");
        }
    }
    // A token with a resourceVersion other than "0".
    s.create(CTS, "a", 1);
    s.create(CTS, "b", 1);
    let (_, page) = s.get(&format!("{CTS}?limit=1"));
    let token = page["metadata"]["continue"].as_str().unwrap();
    let (code, body) = s.get(&format!("{CTS}?continue={token}&resourceVersion=5"));
    assert_eq!(
        (code, body),
        (
            400,
            bad_request("specifying resource version is not allowed when using continue")
        )
    );
    let (code, body) = s.get(&format!("{CTS}?continue={token}&resourceVersion=0"));
    assert_eq!((code, names(&body)), (200, vec!["b".to_string()]));
}

#[test]
fn continue_tokens_cannot_be_forged_or_moved() {
    let s = MiniStack::start();
    for n in 0..5 {
        s.create(CTS, &format!("ct-{n}"), n);
        s.create(WIDGETS, &format!("w-{n}"), n);
    }
    let (code, page) = s.get(&format!("{CTS}?limit=2"));
    assert_eq!(code, 200, "{page}");
    assert_eq!(names(&page), ["ct-0", "ct-1"]);
    assert_eq!(page["metadata"]["remainingItemCount"], 3);
    let token = page["metadata"]["continue"].as_str().unwrap().to_string();
    let (payload, mac) = token.split_once('.').expect("signed token");
    let generic = bad_request("invalid continue token: continue key is not valid");

    // The payload is upstream's JSON shape; editing it (here: skip ahead) breaks the MAC.
    use base64::Engine;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let doc: Value = serde_json::from_slice(&b64.decode(payload).unwrap()).unwrap();
    assert_eq!(doc["v"], "meta.k8s.io/v1");
    assert_eq!(doc["start"], "default/ct-1\u{0}");
    assert_eq!(doc["rv"].as_str(), None);
    assert_eq!(
        doc["rv"].as_u64(),
        page["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .ok()
    );
    let mut edited = doc.clone();
    edited["start"] = json!("default/ct-3\u{0}");
    let forged = format!("{}.{mac}", b64.encode(serde_json::to_vec(&edited).unwrap()));
    let unsigned = b64.encode(serde_json::to_vec(&edited).unwrap());
    let mut flipped = token.clone().into_bytes();
    let last = flipped.len() - 1;
    flipped[last] = if flipped[last] == b'A' { b'B' } else { b'A' };
    let flipped = String::from_utf8(flipped).unwrap();
    for bad in [&forged, &unsigned, &flipped] {
        let (code, body) = s.get(&format!("{CTS}?limit=2&continue={bad}"));
        assert_eq!((code, &body), (400, &generic), "{bad}");
    }
    // Bound to the resource, namespace and tenant it was issued for.
    for other in [
        WIDGETS.to_string(),
        "/apis/stable.example.com/v1/crontabs".to_string(),
        "/apis/stable.example.com/v1/namespaces/kube-system/crontabs".to_string(),
        "/api/v1/namespaces".to_string(),
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions".to_string(),
    ] {
        let (code, body) = s.get(&format!("{other}?limit=2&continue={token}"));
        assert_eq!((code, &body), (400, &generic), "{other}");
    }
    // The genuine token works and the pages add up.
    let (code, p2) = s.get(&format!("{CTS}?limit=2&continue={token}"));
    assert_eq!(code, 200, "{p2}");
    assert_eq!(names(&p2), ["ct-2", "ct-3"]);
    assert_eq!(
        p2["metadata"]["resourceVersion"],
        page["metadata"]["resourceVersion"]
    );
    let t2 = p2["metadata"]["continue"].as_str().unwrap();
    let (_, p3) = s.get(&format!("{CTS}?limit=2&continue={t2}"));
    assert_eq!(names(&p3), ["ct-4"]);
    assert!(p3["metadata"].get("continue").is_none(), "{p3}");
    // Cluster-wide lists and namespace lists have tokens of their own, and work.
    let (_, all) = s.get("/apis/stable.example.com/v1/crontabs?limit=3");
    let t = all["metadata"]["continue"].as_str().unwrap();
    let (code, rest) = s.get(&format!(
        "/apis/stable.example.com/v1/crontabs?limit=3&continue={t}"
    ));
    assert_eq!(
        (code, names(&rest)),
        (200, vec!["ct-3".to_string(), "ct-4".to_string()])
    );
    let (_, nsl) = s.get("/api/v1/namespaces?limit=1");
    let t = nsl["metadata"]["continue"].as_str().unwrap();
    let (code, more) = s.get(&format!("/api/v1/namespaces?limit=1&continue={t}"));
    assert_eq!(code, 200, "{more}");
    assert_ne!(names(&more), names(&nsl));
}

#[test]
fn resource_version_semantics() {
    let s = MiniStack::start();
    let r1 = s.create(CTS, "a", 1);
    let r2 = s.create(CTS, "b", 1);
    // Unset and "0": the current state at the current revision.
    for q in [
        "",
        "?resourceVersion=0",
        "?resourceVersion=0&resourceVersionMatch=NotOlderThan",
    ] {
        let (code, l) = s.get(&format!("{CTS}{q}"));
        assert_eq!(
            (code, names(&l)),
            (200, vec!["a".to_string(), "b".to_string()]),
            "{q}"
        );
        assert_eq!(l["metadata"]["resourceVersion"], r2.to_string(), "{q}");
    }
    // NotOlderThan an older revision: the current state.
    for q in [
        format!("resourceVersion={r1}&resourceVersionMatch=NotOlderThan"),
        format!("resourceVersion={r1}"),
    ] {
        let (code, l) = s.get(&format!("{CTS}?{q}"));
        assert_eq!(
            (code, l["metadata"]["resourceVersion"].clone()),
            (200, json!(r2.to_string())),
            "{q}"
        );
    }
    // Exact at the current revision, and exact at an older one when nothing in the listed
    // range changed since (a write to another namespace does not matter).
    let (code, l) = s.get(&format!(
        "{CTS}?resourceVersion={r2}&resourceVersionMatch=Exact"
    ));
    assert_eq!(
        (code, l["metadata"]["resourceVersion"].clone()),
        (200, json!(r2.to_string()))
    );
    s.call(
        "POST",
        "/api/v1/namespaces",
        Some(r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"other"}}"#),
    );
    let r3 = s.create(
        "/apis/stable.example.com/v1/namespaces/other/crontabs",
        "z",
        1,
    );
    assert!(r3 > r2);
    let (code, l) = s.get(&format!(
        "{CTS}?resourceVersion={r2}&resourceVersionMatch=Exact"
    ));
    assert_eq!(code, 200, "{l}");
    assert_eq!(names(&l), ["a", "b"]);
    assert_eq!(l["metadata"]["resourceVersion"], r2.to_string());
    // A write in range after the revision: no longer servable exactly → 410 (legacy RV with
    // a limit is an exact read too).
    s.update("a", 2);
    let gone = json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
        "message":"The resourceVersion for the provided list is too old.","reason":"Expired","code":410});
    for q in [
        format!("resourceVersion={r2}&resourceVersionMatch=Exact"),
        format!("resourceVersion={r2}&limit=5"),
    ] {
        let (code, body) = s.get(&format!("{CTS}?{q}"));
        assert_eq!((code, body), (410, gone.clone()), "{q}");
    }
    // Exact at the newest revision, cluster-wide.
    let (_, cur) = s.get(CTS);
    let now: u64 = cur["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let (code, l) = s.get(&format!(
        "/apis/stable.example.com/v1/crontabs?resourceVersion={now}&resourceVersionMatch=Exact"
    ));
    assert_eq!(
        (code, names(&l)),
        (200, vec!["a".to_string(), "b".to_string(), "z".to_string()])
    );

    // A resourceVersion from the future: 504 after a short wait, with Retry-After.
    let future = now + 100;
    let t0 = Instant::now();
    let (code, head, body) = raw_get(
        &s.gateway,
        &format!("{CTS}?resourceVersion={future}&resourceVersionMatch=NotOlderThan"),
    );
    let waited = t0.elapsed();
    assert_eq!(code, 504, "{body}");
    assert!(
        waited >= Duration::from_secs(3) && waited < Duration::from_secs(10),
        "{waited:?}"
    );
    assert!(head.contains("\r\nretry-after: 1"), "{head}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        body,
        json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
            "message":format!("Timeout: Too large resource version: {future}, current: {now}"),
            "reason":"Timeout",
            "details":{"causes":[{"reason":"ResourceVersionTooLarge","message":"Too large resource version"}],"retryAfterSeconds":1},
            "code":504})
    );
    // ... which a write reaching it in time satisfies.
    let target = now + 1;
    let gw = s.gateway.clone();
    let waiter = std::thread::spawn(move || {
        http_request(
            "GET",
            &format!("{gw}{CTS}?resourceVersion={target}&resourceVersionMatch=NotOlderThan"),
            None,
            None,
        )
        .unwrap()
    });
    std::thread::sleep(Duration::from_millis(500));
    s.create(CTS, "c", 1);
    let (code, text) = waiter.join().unwrap();
    let l: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(code, 200, "{l}");
    assert_eq!(names(&l), ["a", "b", "c"]);
    assert_eq!(l["metadata"]["resourceVersion"], target.to_string());
}

#[test]
fn paging_over_writes_never_skips_or_repeats() {
    let s = MiniStack::start();
    let stable: BTreeSet<String> = (0..40).map(|n| format!("s-{n:03}")).collect();
    for n in &stable {
        s.create(CTS, n, 0);
    }
    let mut token: Option<String> = None;
    let mut seen: Vec<String> = Vec::new();
    let mut list_rv = None;
    let mut round = 0;
    let mut expired = 0;
    loop {
        let q = match &token {
            Some(t) => format!("{CTS}?limit=6&continue={t}"),
            None => format!("{CTS}?limit=6"),
        };
        let (code, page) = s.get(&q);
        if code == 410 {
            // The tiny history lost the token's revision: go on with the fresh token of the
            // 410, as clients do (still no skips or repeats, now at the latest state).
            expired += 1;
            token = Some(page["metadata"]["continue"].as_str().unwrap().to_string());
            list_rv = None;
            continue;
        }
        assert_eq!(code, 200, "{page}");
        let rv = page["metadata"]["resourceVersion"].clone();
        assert_eq!(
            list_rv.get_or_insert(rv.clone()),
            &rv,
            "every page reports the list's revision"
        );
        seen.extend(names(&page));
        // Writes between pages: ahead of the cursor, behind it, creates and deletes.
        round += 1;
        s.update(&format!("s-{:03}", (round * 7) % 40), round);
        s.create(CTS, &format!("n-{round:03}"), 0);
        if round % 2 == 0 {
            s.create(CTS, &format!("s-{:03}-x", 39 - round % 40), 0);
            s.delete(&format!("s-{:03}-x", 39 - round % 40));
        }
        match page["metadata"]["continue"].as_str() {
            Some(t) => token = Some(t.to_string()),
            None => break,
        }
        assert!(round < 100, "paging does not end");
    }
    assert!(expired <= 2, "{expired} expirations");
    let mut sorted = seen.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(
        sorted, seen,
        "keys strictly increase: no duplicates, in order"
    );
    let seen: BTreeSet<String> = seen.into_iter().collect();
    assert!(
        stable.is_subset(&seen),
        "objects present throughout appear: {:?}",
        stable.difference(&seen).collect::<Vec<_>>()
    );
}

#[test]
fn continue_consistent_when_untouched_and_expired_when_history_is_gone() {
    let s = MiniStack::start();
    for n in 0..6 {
        s.create(CTS, &format!("c-{n}"), n);
    }
    let (_, p1) = s.get(&format!("{CTS}?limit=2"));
    let list_rv = p1["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let t1 = p1["metadata"]["continue"].as_str().unwrap().to_string();
    // A write behind the cursor does not change the rest of the list at the token's revision.
    s.update("c-0", 100);
    let (code, p2) = s.get(&format!("{CTS}?limit=2&continue={t1}"));
    assert_eq!(code, 200, "{p2}");
    assert_eq!(names(&p2), ["c-2", "c-3"]);
    for i in p2["items"].as_array().unwrap() {
        assert!(
            rv_of(i) <= list_rv.parse().unwrap(),
            "state at the token's revision: {i}"
        );
    }
    // A write ahead of the cursor (history intact): the current state of the remaining keys.
    s.update("c-3", 7);
    let (code, p2b) = s.get(&format!("{CTS}?limit=2&continue={t1}"));
    assert_eq!(code, 200, "{p2b}");
    assert_eq!(names(&p2b), ["c-2", "c-3"]);
    assert_eq!(p2b["items"][1]["spec"]["n"], 7);
    assert_eq!(p2b["metadata"]["resourceVersion"], list_rv.as_str());

    // Push the token's revision out of the (16-entry, approximately trimmed) history.
    for i in 0..400 {
        s.update("c-5", 1000 + i);
    }
    let (code, gone) = s.get(&format!("{CTS}?limit=2&continue={t1}"));
    assert_eq!(code, 410, "{gone}");
    let fresh = gone["metadata"]["continue"]
        .as_str()
        .expect("a new token")
        .to_string();
    let mut want = json!({"kind":"Status","apiVersion":"v1","metadata":{"continue":fresh},"status":"Failure",
        "message":"The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
        "reason":"Expired","code":410});
    assert_eq!(gone, want);
    use base64::Engine;
    let payload = fresh.split('.').next().unwrap();
    let doc: Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        doc,
        json!({"v":"meta.k8s.io/v1","rv":-1,"start":"default/c-1\u{0}"})
    );
    // The rv -1 token continues (inconsistently) at the latest state, from the same key.
    let (code, rest) = s.get(&format!("{CTS}?limit=10&continue={fresh}"));
    assert_eq!(code, 200, "{rest}");
    assert_eq!(names(&rest), ["c-2", "c-3", "c-4", "c-5"]);
    let (_, now) = s.get(CTS);
    assert_eq!(
        rest["metadata"]["resourceVersion"],
        now["metadata"]["resourceVersion"]
    );
    // An exact list at that old revision is gone too.
    let (code, body) = s.get(&format!(
        "{CTS}?resourceVersion={list_rv}&resourceVersionMatch=Exact"
    ));
    want = json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
        "message":"The resourceVersion for the provided list is too old.","reason":"Expired","code":410});
    assert_eq!((code, body), (410, want));
}
