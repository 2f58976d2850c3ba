//! Namespace isolation of every list and watch path (security audit).
//!
//! A namespaced list or watch must only ever show objects of its namespace, whatever path
//! serves it: a one-shot storage list, a paged list, the initial state of a watch from
//! ""/"0", watch-list (`sendInitialEvents`), a live watch joining the gateway's shared
//! stream, a watch resumed from a resourceVersion (served from the shared stream's ring, or
//! by a private storage watch replaying the Redis history when the revision is older than
//! the shared stream), and all of these with label and field selectors. Upstream serves all
//! of them from the cacher or etcd3 under the namespace's key prefix
//! (`staging/src/k8s.io/apiserver/pkg/storage/cacher/cacher.go` Watch/GetList,
//! `pkg/storage/etcd3/store.go` GetList and `watcher.go`), so none can cross namespaces.
//!
//! The audit is the table [`AUDIT`]: one row per path kind, one expected event set per scope
//! (namespace `a`, all namespaces, a cluster-scoped CRD). Every row × scope cell runs twice:
//! without a shared stream for the resource in the gateway, and with one already running
//! (an all-namespaces / cluster-wide watch opened first), each cell in its own tenant so
//! nothing carries over between cells. Every cell asserts the exact multiset of objects or
//! events seen.
//!
//! Fixture of every cell: namespaced CRD with `a/x1` (app=web), `a/x2` (app=db), `b/x1`
//! (web), `b/x2` (db) — the same names in both namespaces, so a name selector cannot hide a
//! leak — or cluster-scoped CRD with `x1` (web), `x2` (db). Later writes, in order: create
//! `x3` (web) in each namespace, modify `x1` in each, delete `x2` in each, and last a
//! sentinel modification of `a/x1` (`/x1`) marked `spec.end=true`. Events are ordered by
//! revision, so once a watcher sees the sentinel it has seen everything before it, leaks
//! included.

use crdplane_tests::{Stack, WatchStream, http_request};
use serde_json::{Value, json};
use std::time::Duration;

const T: Duration = Duration::from_secs(15);
const GROUP: &str = "iso.example.com";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// `/namespaces/a/crontabs` of a namespaced CRD.
    Namespaced,
    /// `/crontabs` of a namespaced CRD.
    AllNamespaces,
    /// `/clusterthings` of a cluster-scoped CRD.
    Cluster,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    /// GET collection.
    List,
    /// GET with limit=1, following `continue`.
    ListPaged,
    /// GET with labelSelector=app=web.
    ListLabel,
    /// watch, resourceVersion unset: initial state, then the later writes.
    WatchInitial,
    /// watch from resourceVersion=0.
    WatchRv0,
    /// watch-list: sendInitialEvents=true (BOOKMARKs are not counted).
    WatchList,
    /// watch from the list's resourceVersion, opened before the writes (live events).
    WatchLive,
    /// watch from the list's resourceVersion, opened after the writes (replay).
    WatchReplay,
    /// As WatchReplay, but the shared stream (with-stream column) starts after the writes,
    /// so the revision is older than the stream remembers: a private storage watch replays.
    WatchReplayBeforeStream,
    /// watch with labelSelector=app=web (initial state + writes).
    WatchLabel,
    /// watch with fieldSelector=metadata.name=x1 (initial state + writes).
    WatchField,
    /// replay from the list's resourceVersion with labelSelector=app=web.
    WatchReplayLabel,
}

/// Expected result of each path × scope: list items as `ns/name`, watch events as
/// `<TYPE> ns/name` (cluster-scoped objects have an empty namespace: `/x1`). Compared as
/// multisets.
type Row = (Path, [(Scope, &'static str); 3]);

use Path::*;
use Scope::*;

const LIVE_A: &str = "ADDED a/x3, MODIFIED a/x1, DELETED a/x2, MODIFIED a/x1";
const LIVE_ALL: &str = "ADDED a/x3, ADDED b/x3, MODIFIED a/x1, MODIFIED b/x1, DELETED a/x2, DELETED b/x2, MODIFIED a/x1";
const LIVE_C: &str = "ADDED /x3, MODIFIED /x1, DELETED /x2, MODIFIED /x1";
const INIT_A: &str =
    "ADDED a/x1, ADDED a/x2, ADDED a/x3, MODIFIED a/x1, DELETED a/x2, MODIFIED a/x1";
const INIT_ALL: &str = "ADDED a/x1, ADDED a/x2, ADDED b/x1, ADDED b/x2, ADDED a/x3, ADDED b/x3, MODIFIED a/x1, MODIFIED b/x1, DELETED a/x2, DELETED b/x2, MODIFIED a/x1";
const INIT_C: &str = "ADDED /x1, ADDED /x2, ADDED /x3, MODIFIED /x1, DELETED /x2, MODIFIED /x1";

const AUDIT: &[Row] = &[
    (
        List,
        [
            (Namespaced, "a/x1, a/x2"),
            (AllNamespaces, "a/x1, a/x2, b/x1, b/x2"),
            (Cluster, "/x1, /x2"),
        ],
    ),
    (
        ListPaged,
        [
            (Namespaced, "a/x1, a/x2"),
            (AllNamespaces, "a/x1, a/x2, b/x1, b/x2"),
            (Cluster, "/x1, /x2"),
        ],
    ),
    (
        ListLabel,
        [
            (Namespaced, "a/x1"),
            (AllNamespaces, "a/x1, b/x1"),
            (Cluster, "/x1"),
        ],
    ),
    (
        WatchInitial,
        [
            (Namespaced, INIT_A),
            (AllNamespaces, INIT_ALL),
            (Cluster, INIT_C),
        ],
    ),
    (
        WatchRv0,
        [
            (Namespaced, INIT_A),
            (AllNamespaces, INIT_ALL),
            (Cluster, INIT_C),
        ],
    ),
    (
        WatchList,
        [
            (Namespaced, INIT_A),
            (AllNamespaces, INIT_ALL),
            (Cluster, INIT_C),
        ],
    ),
    (
        WatchLive,
        [
            (Namespaced, LIVE_A),
            (AllNamespaces, LIVE_ALL),
            (Cluster, LIVE_C),
        ],
    ),
    (
        WatchReplay,
        [
            (Namespaced, LIVE_A),
            (AllNamespaces, LIVE_ALL),
            (Cluster, LIVE_C),
        ],
    ),
    (
        WatchReplayBeforeStream,
        [
            (Namespaced, LIVE_A),
            (AllNamespaces, LIVE_ALL),
            (Cluster, LIVE_C),
        ],
    ),
    (
        WatchLabel,
        [
            (
                Namespaced,
                "ADDED a/x1, ADDED a/x3, MODIFIED a/x1, MODIFIED a/x1",
            ),
            (
                AllNamespaces,
                "ADDED a/x1, ADDED b/x1, ADDED a/x3, ADDED b/x3, MODIFIED a/x1, MODIFIED b/x1, MODIFIED a/x1",
            ),
            (Cluster, "ADDED /x1, ADDED /x3, MODIFIED /x1, MODIFIED /x1"),
        ],
    ),
    (
        WatchField,
        [
            (Namespaced, "ADDED a/x1, MODIFIED a/x1, MODIFIED a/x1"),
            (
                AllNamespaces,
                "ADDED a/x1, ADDED b/x1, MODIFIED a/x1, MODIFIED b/x1, MODIFIED a/x1",
            ),
            (Cluster, "ADDED /x1, MODIFIED /x1, MODIFIED /x1"),
        ],
    ),
    (
        WatchReplayLabel,
        [
            (Namespaced, "ADDED a/x3, MODIFIED a/x1, MODIFIED a/x1"),
            (
                AllNamespaces,
                "ADDED a/x3, ADDED b/x3, MODIFIED a/x1, MODIFIED b/x1, MODIFIED a/x1",
            ),
            (Cluster, "ADDED /x3, MODIFIED /x1, MODIFIED /x1"),
        ],
    ),
];

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

    fn ok(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        let (code, v) = self.call(method, path, body);
        assert!((200..300).contains(&code), "{method} {path}: {code} {v}");
        v
    }

    /// A JSON merge patch (CRs need a resourceVersion for PUT, a patch does not).
    fn patch(&self, path: &str, body: &Value) {
        let (code, text) = http_request(
            "PATCH",
            &format!("{}{path}", self.base),
            Some("application/merge-patch+json"),
            Some(&body.to_string()),
        )
        .expect("http");
        assert_eq!(code, 200, "PATCH {path}: {text}");
    }

    fn watch(&self, path: &str, query: &str) -> WatchStream {
        let w = WatchStream::open(&format!("{}{path}?watch=1&{query}", self.base), None)
            .expect("watch");
        assert_eq!(w.status, 200, "watch {path}?{query}");
        w
    }
}

/// The resource of a scope: (CRD plural, kind, scope).
fn crd_of(scope: Scope) -> (&'static str, &'static str, &'static str) {
    match scope {
        Cluster => ("clusterthings", "ClusterThing", "Cluster"),
        _ => ("crontabs", "CronTab", "Namespaced"),
    }
}

/// Collection path of the cell's request.
fn collection(scope: Scope) -> String {
    match scope {
        Namespaced => format!("/apis/{GROUP}/v1/namespaces/a/crontabs"),
        AllNamespaces => format!("/apis/{GROUP}/v1/crontabs"),
        Cluster => format!("/apis/{GROUP}/v1/clusterthings"),
    }
}

/// The whole resource (what the shared stream of the with-stream column watches).
fn everything(scope: Scope) -> String {
    match scope {
        Cluster => format!("/apis/{GROUP}/v1/clusterthings"),
        _ => format!("/apis/{GROUP}/v1/crontabs"),
    }
}

/// Namespaces the fixture writes in ("" = cluster-scoped).
fn namespaces(scope: Scope) -> &'static [&'static str] {
    match scope {
        Cluster => &[""],
        _ => &["a", "b"],
    }
}

fn object_path(scope: Scope, ns: &str, name: &str) -> String {
    let (plural, ..) = crd_of(scope);
    if ns.is_empty() {
        format!("/apis/{GROUP}/v1/{plural}/{name}")
    } else {
        format!("/apis/{GROUP}/v1/namespaces/{ns}/{plural}/{name}")
    }
}

fn object(scope: Scope, ns: &str, name: &str, app: &str, spec: Value) -> Value {
    let (_, kind, _) = crd_of(scope);
    let mut meta = json!({"name": name, "labels": {"app": app}});
    if !ns.is_empty() {
        meta["namespace"] = json!(ns);
    }
    json!({"apiVersion": format!("{GROUP}/v1"), "kind": kind, "metadata": meta, "spec": spec})
}

/// A tenant with the scope's CRD, namespaces a and b, and the fixture objects.
fn setup(stack: &Stack, tenant: &str, scope: Scope) -> Api {
    let api = Api {
        base: format!("{}/clusters/{tenant}", stack.gateway),
    };
    let (plural, kind, crd_scope) = crd_of(scope);
    let singular = kind.to_ascii_lowercase();
    let crd = json!({"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
        "metadata":{"name": format!("{plural}.{GROUP}")},
        "spec":{"group": GROUP, "scope": crd_scope,
            "names":{"plural": plural, "singular": singular, "kind": kind},
            "versions":[{"name":"v1","served":true,"storage":true,
                "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}});
    api.ok(
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        Some(&crd),
    );
    for ns in ["a", "b"] {
        api.ok(
            "POST",
            "/api/v1/namespaces",
            Some(&json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name": ns}})),
        );
    }
    // Served once the collection lists.
    let mut served = false;
    for _ in 0..400 {
        if api.call("GET", &everything(scope), None).0 == 200 {
            served = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    assert!(served, "CRD {plural} not served");
    for ns in namespaces(scope) {
        for (name, app) in [("x1", "web"), ("x2", "db")] {
            let o = object(scope, ns, name, app, json!({"v": 0}));
            let coll = if ns.is_empty() {
                everything(scope)
            } else {
                format!("/apis/{GROUP}/v1/namespaces/{ns}/{plural}")
            };
            api.ok("POST", &coll, Some(&o));
        }
    }
    api
}

/// The later writes (see the module docs), the sentinel last.
fn later_writes(api: &Api, scope: Scope) {
    let nss = namespaces(scope);
    let (plural, ..) = crd_of(scope);
    for ns in nss {
        let coll = if ns.is_empty() {
            everything(scope)
        } else {
            format!("/apis/{GROUP}/v1/namespaces/{ns}/{plural}")
        };
        api.ok(
            "POST",
            &coll,
            Some(&object(scope, ns, "x3", "web", json!({"v": 0}))),
        );
    }
    for ns in nss {
        api.patch(&object_path(scope, ns, "x1"), &json!({"spec": {"v": 1}}));
    }
    for ns in nss {
        api.ok("DELETE", &object_path(scope, ns, "x2"), None);
    }
    api.patch(
        &object_path(scope, nss[0], "x1"),
        &json!({"spec": {"v": 2, "end": true}}),
    );
}

fn key(o: &Value) -> String {
    format!(
        "{}/{}",
        o["metadata"]["namespace"].as_str().unwrap_or(""),
        o["metadata"]["name"].as_str().unwrap_or("")
    )
}

/// Events until the sentinel (BOOKMARKs skipped); panics when it does not come.
fn until_sentinel(w: &WatchStream, what: &str) -> Vec<String> {
    let mut out = Vec::new();
    loop {
        let Some(e) = w.next(T) else {
            panic!("{what}: no sentinel event; got so far: {out:?}");
        };
        let t = e["type"].as_str().unwrap_or("").to_string();
        match t.as_str() {
            "BOOKMARK" => continue,
            "ERROR" => panic!("{what}: ERROR event {e}"),
            _ => {}
        }
        out.push(format!("{t} {}", key(&e["object"])));
        if e["object"]["spec"]["end"] == json!(true) {
            return out;
        }
    }
}

fn list_rv(api: &Api, path: &str) -> String {
    let l = api.ok("GET", path, None);
    l["metadata"]["resourceVersion"]
        .as_str()
        .expect("list resourceVersion")
        .to_string()
}

fn list_keys(api: &Api, path: &str, query: &str) -> Vec<String> {
    let l = api.ok("GET", &format!("{path}?{query}"), None);
    l["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(key)
        .collect()
}

/// Runs one cell and returns what it saw.
fn run_cell(stack: &Stack, tenant: &str, path: Path, scope: Scope, shared: bool) -> Vec<String> {
    let what = format!("{path:?} × {scope:?} × shared stream: {shared}");
    let api = setup(stack, tenant, scope);
    let coll = collection(scope);
    // The with-stream column: a watch of the whole resource, opened before the cell's
    // request (after the writes for WatchReplayBeforeStream). Its response headers come
    // after it joined the gateway's shared stream.
    let open_shared = || {
        shared.then(|| {
            let w = api.watch(&everything(scope), "");
            assert!(w.next(T).is_some(), "{what}: shared watch initial events");
            w
        })
    };
    match path {
        List | ListPaged | ListLabel => {
            let _bg = open_shared();
            match path {
                List => list_keys(&api, &coll, ""),
                ListLabel => list_keys(&api, &coll, "labelSelector=app%3Dweb"),
                _ => {
                    let mut keys = Vec::new();
                    let mut cont = String::new();
                    loop {
                        let l = api.ok("GET", &format!("{coll}?limit=1&continue={cont}"), None);
                        let items = l["items"].as_array().expect("items");
                        assert!(items.len() <= 1, "{what}: page larger than limit");
                        keys.extend(items.iter().map(key));
                        match l["metadata"]["continue"].as_str() {
                            Some(c) if !c.is_empty() => cont = c.to_string(),
                            _ => break,
                        }
                    }
                    keys
                }
            }
        }
        WatchInitial | WatchRv0 | WatchList | WatchLive | WatchLabel | WatchField => {
            let _bg = open_shared();
            let query = match path {
                WatchInitial => String::new(),
                WatchRv0 => "resourceVersion=0".into(),
                WatchList => "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true".into(),
                WatchLive => format!("resourceVersion={}", list_rv(&api, &coll)),
                WatchLabel => "labelSelector=app%3Dweb".into(),
                _ => "fieldSelector=metadata.name%3Dx1".into(),
            };
            let w = api.watch(&coll, &query);
            later_writes(&api, scope);
            until_sentinel(&w, &what)
        }
        WatchReplay | WatchReplayLabel => {
            let _bg = open_shared();
            let rv = list_rv(&api, &coll);
            later_writes(&api, scope);
            let sel = if path == WatchReplayLabel {
                "&labelSelector=app%3Dweb"
            } else {
                ""
            };
            let w = api.watch(&coll, &format!("resourceVersion={rv}{sel}"));
            until_sentinel(&w, &what)
        }
        WatchReplayBeforeStream => {
            let rv = list_rv(&api, &coll);
            later_writes(&api, scope);
            let _bg = open_shared();
            let w = api.watch(&coll, &format!("resourceVersion={rv}"));
            until_sentinel(&w, &what)
        }
    }
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn expected(s: &str) -> Vec<String> {
    sorted(s.split(", ").map(str::to_string).collect())
}

#[test]
fn every_list_and_watch_path_stays_in_its_namespace() {
    let stack = Stack::start_with_redis().unwrap();
    let mut cells = Vec::new();
    for (path, cols) in AUDIT {
        for (scope, want) in cols {
            for shared in [false, true] {
                cells.push((*path, *scope, shared, *want));
            }
        }
    }
    // Every path kind of the enum has a row.
    assert_eq!(AUDIT.len(), 12);
    let failures = std::sync::Mutex::new(Vec::new());
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let Some((path, scope, shared, want)) = cells.get(i) else {
                        break;
                    };
                    let tenant = format!("iso-{i}");
                    let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        run_cell(&stack, &tenant, *path, *scope, *shared)
                    }));
                    let cell = format!("{path:?} × {scope:?} × shared stream: {shared}");
                    match got {
                        Ok(got) if sorted(got.clone()) == expected(want) => {}
                        Ok(got) => failures.lock().unwrap().push(format!(
                            "{cell}: got {:?}, want {:?}",
                            sorted(got),
                            expected(want)
                        )),
                        Err(_) => failures
                            .lock()
                            .unwrap()
                            .push(format!("{cell}: panicked (see above)")),
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} of {} cells failed:\n{}",
        failures.len(),
        cells.len(),
        failures.join("\n")
    );
}

/// Paths that must be refused rather than widened: a continue token of one namespace's list
/// used for another namespace (upstream: the token's key is relative to the list's key
/// prefix, `etcd3/store.go` decodeContinue; here the token is bound to its scope), and a
/// namespaced path of a cluster-scoped resource (404, as upstream's router).
#[test]
fn cross_namespace_requests_are_refused() {
    let stack = Stack::start_with_redis().unwrap();
    let api = setup(&stack, "iso-refused", AllNamespaces);
    let b = api.ok(
        "GET",
        &format!("/apis/{GROUP}/v1/namespaces/b/crontabs?limit=1"),
        None,
    );
    let token = b["metadata"]["continue"].as_str().expect("continue token");
    let (code, body) = api.call(
        "GET",
        &format!("/apis/{GROUP}/v1/namespaces/a/crontabs?limit=1&continue={token}"),
        None,
    );
    assert_eq!(code, 400, "{body}");
    let cluster = setup(&stack, "iso-refused-c", Cluster);
    let (code, body) = cluster.call(
        "GET",
        &format!("/apis/{GROUP}/v1/namespaces/a/clusterthings"),
        None,
    );
    assert_eq!(code, 404, "{body}");
    let (code, _) = cluster.call(
        "GET",
        &format!("/apis/{GROUP}/v1/namespaces/a/clusterthings?watch=1"),
        None,
    );
    assert_eq!(code, 404);
}
