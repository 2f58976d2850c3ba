//! The garbage collector's resync and the namespace-deletion cascade, end to end on the real
//! stack (real redis-server, the service binaries, real kubectl 1.33):
//! - a dependent whose verification item was lost (removed from Redis by the test, with its
//!   owner-index entries: an object written before the index existed) is collected after the
//!   registry's startup resync; one written straight to storage (a gateway that crashed
//!   between the write and the item) after a periodic one;
//! - two registry replicas: each resync pass is done by one replica, each page once;
//! - `kubectl delete ns`: dependents of a cluster-scoped owner go with their namespace (the
//!   owner stays), and a namespaced owner cannot own dependents in another namespace
//!   (upstream `isDangling` looks the owner up in the dependent's namespace: the reference is
//!   dangling and the dependent is collected).

use crdplane_proto::v1 as pb;
use crdplane_tests::{Stack, http_get, http_request, kubectls};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const GROUP: &str = "resync.example.com";
const GHOST_UID: &str = "00000000-0000-0000-0000-0000000000aa";

fn json_of(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

fn req(method: &str, url: &str, body: Option<&Value>) -> (u16, Value) {
    let b = body.map(Value::to_string);
    let (code, text) = http_request(
        method,
        url,
        b.as_ref().map(|_| "application/json"),
        b.as_deref(),
    )
    .unwrap();
    (code, json_of(&text))
}

fn get(url: &str) -> (u16, Value) {
    let (code, b) = http_get(url).unwrap();
    (code, json_of(&b))
}

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

/// A tenant with `parents`, `children` (namespaced) and `clusterowners` (cluster-scoped).
struct Env {
    base: String,
    tenant: String,
}

impl Env {
    fn new(stack: &Stack, tenant: &str) -> Self {
        let base = format!("{}/clusters/{tenant}", stack.gateway);
        for (p, k, s) in [
            ("parents", "Parent", "Namespaced"),
            ("children", "Child", "Namespaced"),
            ("clusterowners", "ClusterOwner", "Cluster"),
        ] {
            let crd = json!({"apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": format!("{p}.{GROUP}")},
                "spec": {"group": GROUP, "scope": s,
                    "names": {"plural": p, "singular": k.to_lowercase(), "kind": k},
                    "versions": [{"name": "v1", "served": true, "storage": true,
                        "schema": {"openAPIV3Schema": {"type": "object",
                            "x-kubernetes-preserve-unknown-fields": true}}}]}});
            let (code, v) = req("POST", &format!("{base}{CRDS}"), Some(&crd));
            assert_eq!(code, 201, "{v}");
        }
        let env = Self {
            base,
            tenant: tenant.into(),
        };
        for p in ["parents", "children", "clusterowners"] {
            let url = env.url(p, "default", "");
            wait_for(30, "CRD served", || (get(&url).0 == 200).then_some(()));
        }
        env
    }

    /// `ns` is ignored for `clusterowners`.
    fn url(&self, plural: &str, ns: &str, name: &str) -> String {
        let ns = if plural == "clusterowners" {
            String::new()
        } else {
            format!("/namespaces/{ns}")
        };
        let n = if name.is_empty() {
            String::new()
        } else {
            format!("/{name}")
        };
        format!("{}/apis/{GROUP}/v1{ns}/{plural}{n}", self.base)
    }

    fn namespace(&self, name: &str) {
        let (code, v) = req(
            "POST",
            &format!("{}/api/v1/namespaces", self.base),
            Some(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})),
        );
        assert_eq!(code, 201, "{v}");
    }

    fn create(&self, plural: &str, kind: &str, ns: &str, name: &str, refs: &[Value]) -> Value {
        let mut o = json!({"apiVersion": format!("{GROUP}/v1"), "kind": kind,
            "metadata": {"name": name}});
        if !refs.is_empty() {
            o["metadata"]["ownerReferences"] = json!(refs);
        }
        let (code, v) = req("POST", &self.url(plural, ns, ""), Some(&o));
        assert_eq!(code, 201, "{v}");
        v
    }

    fn status(&self, plural: &str, ns: &str, name: &str) -> u16 {
        get(&self.url(plural, ns, name)).0
    }

    fn gone(&self, plural: &str, ns: &str, name: &str, secs: u64) {
        wait_for(secs, &format!("{plural} {ns}/{name} gone"), || {
            (self.status(plural, ns, name) == 404).then_some(())
        });
    }

    fn kubectl(&self, stack: &Stack, k: &Path, args: &[&str]) -> crdplane_tests::KubectlOutput {
        let server = format!("{}/clusters/{}", stack.gateway, self.tenant);
        let mut all = vec!["--server", server.as_str()];
        all.extend_from_slice(args);
        stack.kubectl(k, &all)
    }
}

fn owner_ref(o: &Value) -> Value {
    json!({"apiVersion": o["apiVersion"], "kind": o["kind"], "name": o["metadata"]["name"],
           "uid": o["metadata"]["uid"]})
}

fn ghost() -> Value {
    json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Parent", "name": "ghost",
           "uid": GHOST_UID})
}

/// `redis-cli` on the stack's private Redis; its stdout.
fn redis_cli(stack: &Stack, args: &[&str]) -> String {
    let socket = &stack.redis.as_ref().expect("private redis").socket;
    let o = Command::new("redis-cli")
        .arg("-s")
        .arg(socket)
        .args(args)
        .output()
        .expect("redis-cli (Debian package redis-tools, installed with redis-server)");
    assert!(o.status.success(), "redis-cli {args:?}: {o:?}");
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Storage's key of a (tenant, resource) triple (services/storage/src/keys.rs).
fn triple_key(tenant: &str, resource: &str, group: &str, what: &str) -> String {
    format!("cp:{{{tenant}|{resource}.{group}}}:{what}")
}

/// Removes the collector's verification item of owner `uid` looked up in namespace `ns`
/// straight from Redis (object and index), as if it had never been recorded.
fn drop_queue_entry(stack: &Stack, tenant: &str, uid: &str, ns: &str) {
    let field = format!("{tenant}/gc.{uid}.{ns}");
    let bucket = crdplane_core::gcqueue::queue_resource(tenant);
    let obj = triple_key("_crdplane", &bucket, "crdplane.io", "obj");
    let idx = triple_key("_crdplane", &bucket, "crdplane.io", "idx");
    assert_eq!(
        redis_cli(stack, &["HDEL", &obj, &field]),
        "1",
        "the gateway recorded a verification item"
    );
    redis_cli(stack, &["ZREM", &idx, &field]);
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Runtime::new().unwrap()
}

/// Writes `children` objects (name, owner references) straight to the storage service (no
/// gateway: no verification item is recorded, as when a gateway crashes between the write
/// and the record).
fn create_in_storage(stack: &Stack, tenant: &str, ns: &str, objs: &[(String, Vec<Value>)]) {
    let writes: Vec<pb::CreateRequest> = objs
        .iter()
        .map(|(name, refs)| {
            // A uid per name (FNV-1a), stable and distinct enough for a test.
            let h = name.bytes().fold(0xcbf29ce484222325u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
            });
            let obj = json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Child",
                "metadata": {"name": name, "namespace": ns,
                    "uid": format!("{:08x}-0000-4000-8000-{:012x}", h >> 32, h & 0xffff_ffff_ffff),
                    "creationTimestamp": "2026-11-24T00:00:00Z", "generation": 1,
                    "resourceVersion": "", "ownerReferences": refs}});
            let (head, tail) = crdplane_core::rvslot::split(&obj).unwrap();
            pb::CreateRequest {
                key: Some(pb::ObjectKey {
                    resource: Some(pb::ResourceRef {
                        tenant: tenant.into(),
                        group: GROUP.into(),
                        resource: "children".into(),
                    }),
                    namespace: ns.into(),
                    name: name.clone(),
                }),
                object: Some(pb::ObjectWrite {
                    head: head.into(),
                    tail: tail.into(),
                }),
                dry_run: false,
                ttl_seconds: 0,
            }
        })
        .collect();
    let storage = stack.storage.clone();
    rt().block_on(async move {
        let mut c = pb::storage_client::StorageClient::connect(storage)
            .await
            .unwrap();
        for w in writes {
            c.create(w).await.unwrap();
        }
    });
}

/// The resync's state entry (services/registry/src/resync.rs), if any.
fn resync_entry(stack: &Stack) -> Option<Value> {
    let bucket = crdplane_core::gcqueue::queue_resource("_crdplane");
    let obj = triple_key("_crdplane", &bucket, "crdplane.io", "obj");
    let v = redis_cli(stack, &["HGET", &obj, "_crdplane/gc-resync"]);
    // Stored as `<rv>:<offset>:<json>`.
    let json = v.splitn(3, ':').nth(2)?;
    serde_json::from_str(json).ok()
}

/// A lost verification item and an object written before the owner index existed: the
/// startup resync rebuilds the index and records the item, the collector collects the
/// dependent; an object written without any item while the registry runs: the periodic
/// resync. A dependent with a live owner stays. Without the resync (`--gc-resync-period 0`)
/// both dangling dependents stay: this test fails.
#[test]
fn lost_verification_items_are_recovered_by_the_resync() {
    let mut stack =
        Stack::start_with_redis_and_registry_args(&["--gc-resync-period", "2s"]).expect("stack");
    let env = Env::new(&stack, "resync-lost");
    let live = env.create("parents", "Parent", "default", "live", &[]);
    env.create("children", "Child", "default", "kept", &[owner_ref(&live)]);
    // The registry is down: the gateway still serves the (cached) CRDs and records the
    // verification item of the dangling reference, which the test then removes.
    stack.kill_child(2).expect("stop the registry");
    env.create("children", "Child", "default", "lost", &[ghost()]);
    drop_queue_entry(&stack, "resync-lost", GHOST_UID, "default");
    // And the owner index of the resource, as before the index existed.
    let own = triple_key("resync-lost", "children", GROUP, "own");
    assert_eq!(redis_cli(&stack, &["DEL", &own]), "1");
    stack.kill_and_restart_registry().expect("registry back");
    // The old registry may have died holding the pass's lease (15 s) mid-walk.
    env.gone("children", "default", "lost", 60);
    assert_eq!(env.status("children", "default", "kept"), 200);
    // The index was rebuilt: the live owner's entry is back.
    let members = redis_cli(&stack, &["ZRANGE", &own, "0", "-1"]);
    let live_uid = live["metadata"]["uid"].as_str().unwrap();
    assert!(
        members.contains(&format!("{live_uid}\0default/kept"))
            || members.contains(&format!("{live_uid}\\x00default/kept")),
        "owner index not rebuilt: {members:?}"
    );
    // Periodic: written behind the running registry's back, found by a later pass.
    create_in_storage(
        &stack,
        "resync-lost",
        "default",
        &[("lost-later".into(), vec![ghost()])],
    );
    env.gone("children", "default", "lost-later", 30);
    assert_eq!(env.status("children", "default", "kept"), 200);
    assert_eq!(env.status("parents", "default", "live"), 200);
    let e = resync_entry(&stack).expect("resync entry");
    assert!(e["pass"].as_u64().unwrap() >= 2, "{e}");
}

/// Drops ANSI colour sequences from a log line.
fn plain(line: &str) -> String {
    let mut out = String::new();
    let mut it = line.chars().peekable();
    while let Some(c) = it.next() {
        if c == '\u{1b}' {
            for c in it.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `name=<number>` in a log line.
fn field(line: &str, name: &str) -> Option<u64> {
    line.split_whitespace()
        .find_map(|t| t.strip_prefix(&format!("{name}=")))
        .and_then(|v| v.trim_matches('"').parse().ok())
}

/// Two registry replicas with a 1 s resync period (the stack's own registry has it off):
/// over several passes every pass is completed by exactly one replica, and the pages of a
/// pass add up to the objects with owner references once (600 with a live owner), not
/// twice; the dependents written without items are collected.
#[test]
fn two_registries_do_each_resync_pass_once() {
    let mut stack =
        Stack::start_with_redis_and_registry_args(&["--gc-resync-period", "0"]).expect("stack");
    let env = Env::new(&stack, "resync-replicas");
    let live = env.create("parents", "Parent", "default", "live", &[]);
    let r = owner_ref(&live);
    let mut objs: Vec<(String, Vec<Value>)> = (0..600)
        .map(|i| (format!("c{i:04}"), vec![r.clone()]))
        .collect();
    objs.extend((0..3).map(|i| (format!("ghost-{i}"), vec![ghost()])));
    create_in_storage(&stack, "resync-replicas", "default", &objs);
    let logs: Vec<PathBuf> = (0..2)
        .map(|i| stack.home.path().join(format!("registry-{i}.log")))
        .collect();
    for l in &logs {
        stack
            .add_registry_with(
                l,
                &["--gc-resync-period", "1s"],
                &[
                    ("RUST_LOG", "crdplane_registry::resync=debug"),
                    ("NO_COLOR", "1"),
                ],
            )
            .expect("registry replica");
    }
    for i in 0..3 {
        env.gone("children", "default", &format!("ghost-{i}"), 60);
    }
    wait_for(90, "four resync passes", || {
        resync_entry(&stack).filter(|e| {
            e["pass"].as_u64().unwrap_or(0) >= 4 && e["finishedAt"].as_u64().unwrap_or(0) > 0
        })
    });
    let mut complete: std::collections::HashMap<u64, (usize, u64)> = Default::default();
    let mut pages: std::collections::HashMap<u64, u64> = Default::default();
    for (i, l) in logs.iter().enumerate() {
        let text = std::fs::read_to_string(l).unwrap();
        for line in text.lines().map(plain) {
            assert!(
                !line.contains("failed"),
                "replica {i}: a failed resync step: {line}"
            );
            let Some(pass) = field(&line, "pass") else {
                continue;
            };
            if line.contains("gc resync: pass complete") {
                let owned = field(&line, "owned").expect("owned");
                assert!(
                    complete.insert(pass, (i, owned)).is_none(),
                    "pass {pass} completed twice"
                );
            } else if line.contains("gc resync: page") {
                *pages.entry(pass).or_default() += field(&line, "owned").expect("owned");
            }
        }
    }
    let done: Vec<u64> = (1..=4).filter(|p| complete.contains_key(p)).collect();
    assert_eq!(done, [1, 2, 3, 4], "passes completed: {complete:?}");
    for p in 2..=4 {
        let (_, owned) = complete[&p];
        // The three ghosts may still be there in pass 2 (collected meanwhile).
        assert!((600..=603).contains(&owned), "pass {p}: {owned} objects");
        assert_eq!(pages[&p], owned, "pass {p}: pages counted {}", pages[&p]);
    }
    assert_eq!(env.status("parents", "default", "live"), 200);
    assert_eq!(env.status("children", "default", "c0599"), 200);
}

fn kubectl_133() -> Option<PathBuf> {
    kubectls()
        .into_iter()
        .find(|k| k.to_string_lossy().contains("1.33"))
}

/// `kubectl delete ns` (1.33) of a namespace holding dependents of a cluster-scoped owner:
/// they go with the namespace, the owner and its dependent elsewhere stay. A namespaced
/// owner named by a dependent in another namespace is looked up in the dependent's
/// namespace (upstream `garbagecollector.go` `isDangling`, `resourceDefaultNamespace`):
/// absent there, the reference is dangling and the dependent is collected while the owner
/// still exists; the owner's own namespace, deleted, takes it and its same-namespace
/// dependent.
#[test]
fn namespace_deletion_cascades_to_dependents() {
    let Some(k) = kubectl_133() else {
        eprintln!("skipping: kubectl 1.33 not installed");
        return;
    };
    let stack = Stack::start_with_redis().expect("stack");
    let env = Env::new(&stack, "resync-ns");
    for ns in ["doomed", "other", "owner-ns"] {
        env.namespace(ns);
    }
    // A cluster-scoped owner in no namespace.
    let c = env.create("clusterowners", "ClusterOwner", "", "c", &[]);
    for n in ["d1", "d2"] {
        env.create("children", "Child", "doomed", n, &[owner_ref(&c)]);
    }
    env.create("children", "Child", "other", "d-other", &[owner_ref(&c)]);
    // A namespaced owner, a dependent in its namespace and one in another. The second
    // reference is verified after the first one's item is done, so its item looks the owner
    // up in the other namespace and finds both dependents: only the cross-namespace one is
    // dangling (the owner state is known per namespace, as upstream's absentOwnerCache).
    let pa = env.create("parents", "Parent", "owner-ns", "pa", &[]);
    env.create("children", "Child", "owner-ns", "same", &[owner_ref(&pa)]);
    let item = format!("resync-ns/gc.{}", pa["metadata"]["uid"].as_str().unwrap());
    let bucket = crdplane_core::gcqueue::queue_resource(item.split('/').next().unwrap());
    let queue = triple_key("_crdplane", &bucket, "crdplane.io", "obj");
    wait_for(30, "the first verification done", || {
        (redis_cli(&stack, &["HEXISTS", &queue, &item]) == "0").then_some(())
    });
    env.create("children", "Child", "other", "cross", &[owner_ref(&pa)]);
    env.gone("children", "other", "cross", 30);
    assert_eq!(env.status("parents", "owner-ns", "pa"), 200);
    assert_eq!(env.status("children", "owner-ns", "same"), 200);

    let out = env.kubectl(&stack, &k, &["delete", "ns", "doomed", "--timeout=60s"]);
    assert!(out.ok, "{}: {}", out.stdout, out.stderr);
    assert_eq!(
        get(&format!("{}/api/v1/namespaces/doomed", env.base)).0,
        404
    );
    assert_eq!(env.status("children", "doomed", "d1"), 404);
    assert_eq!(env.status("children", "doomed", "d2"), 404);
    assert_eq!(env.status("clusterowners", "", "c"), 200);
    assert_eq!(env.status("children", "other", "d-other"), 200);

    // Not collected with it: once the item is done (removed after its writes), "same" stays.
    wait_for(30, "the second verification done", || {
        (redis_cli(&stack, &["HEXISTS", &queue, &item]) == "0").then_some(())
    });
    assert_eq!(env.status("children", "owner-ns", "same"), 200);

    let out = env.kubectl(&stack, &k, &["delete", "ns", "owner-ns", "--timeout=60s"]);
    assert!(out.ok, "{}: {}", out.stdout, out.stderr);
    assert_eq!(env.status("parents", "owner-ns", "pa"), 404);
    assert_eq!(env.status("children", "owner-ns", "same"), 404);
    assert_eq!(env.status("children", "other", "d-other"), 200);
}
