//! The whole stack on a Redis Cluster, started the way `crdplane up --redis-cluster 3
//! --replicas 2` does (the launcher's three masters with a replica each, password-protected;
//! two replicas of storage, validation and the gateway, every client spread over all replicas
//! of what it calls), driven by real
//! kubectl 1.20 and the newest: a CRD and custom resources in many namespaces (keys on every
//! master), a running `kubectl get -w` that sees them, namespace deletion and CRD deletion
//! finished by the registry through the deletion queue's buckets, and a master killed under
//! a running watch, which goes on once its replica took over.

use crdplane_tests::{Stack, kubectls};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WIDGETS: &str = include_str!("../testdata/lc-widget-crd.yaml");

fn widget(ns: &str, name: &str) -> String {
    format!(
        "apiVersion: example.org/v1\nkind: Widget\nmetadata: {{name: {name}, namespace: {ns}}}\nspec: {{n: 1}}\n"
    )
}

fn wait_for(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `kubectl get widgets -A -w -o name` in the background; its lines so far.
struct Watch {
    child: std::process::Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Watch {
    fn start(stack: &Stack, kubectl: &std::path::Path) -> Self {
        let mut child = Command::new(kubectl)
            .args(["get", "widgets", "-A", "-w", "-o", "name"])
            .env("KUBECONFIG", &stack.kubeconfig)
            .env("HOME", stack.home.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("kubectl get -w");
        let out = child.stdout.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let l = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                l.lock().unwrap().push(line);
            }
        });
        Self { child, lines }
    }

    fn saw(&self, name: &str) -> bool {
        let want = format!("widget.example.org/{name}");
        self.lines.lock().unwrap().iter().any(|l| l.trim() == want)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn kubectl_on_a_redis_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let cluster_dir = dir.path().join("redis-cluster");
    let mut stack = Stack::start_from(
        Stack::builder("")
            .own_redis_cluster(&cluster_dir, 3)
            .scale(2),
        None,
    )
    .expect("stack on a Redis Cluster");
    let plan = crdplane::cluster::Plan::in_dir(&cluster_dir, 3).unwrap();
    let all = kubectls();
    let picked = [all.first().cloned(), all.last().cloned()];
    let k0 = picked[0].clone().expect("a kubectl");

    let out = stack.kubectl_stdin(&k0, &["apply", "-f", "-"], Some(WIDGETS));
    assert!(out.ok, "{}", out.stderr);
    wait_for(20, "widgets served", || {
        stack.kubectl(&k0, &["get", "widgets", "-A"]).ok
    });

    for (v, k) in picked.iter().flatten().enumerate() {
        let w = Watch::start(&stack, k);
        // The watch is open once it printed an object created after it started.
        let ns = |i: usize| format!("k{v}-ns{i}");
        assert!(stack.kubectl(k, &["create", "namespace", &ns(0)]).ok);
        let probe = format!("k{v}-probe");
        wait_for(20, "the watch is open", || {
            let _ = stack.kubectl_stdin(k, &["create", "-f", "-"], Some(&widget(&ns(0), &probe)));
            w.saw(&probe)
        });
        for i in 1..8 {
            let out = stack.kubectl(k, &["create", "namespace", &ns(i)]);
            assert!(out.ok, "{}", out.stderr);
            let out = stack.kubectl_stdin(
                k,
                &["create", "-f", "-"],
                Some(&widget(&ns(i), &format!("k{v}-w{i}"))),
            );
            assert!(out.ok, "{}", out.stderr);
        }
        wait_for(20, "every create on the watch", || {
            (1..8).all(|i| w.saw(&format!("k{v}-w{i}")))
        });
        // Namespace deletion: the registry's worker (its bucket of the queue) empties it.
        let out = stack.kubectl(k, &["delete", "namespace", &ns(3), "--timeout=60s"]);
        assert!(out.ok, "{}", out.stderr);
        let listed = stack.kubectl(k, &["get", "widgets", "-A", "-o", "name"]);
        assert!(listed.ok, "{}", listed.stderr);
        assert!(!listed.stdout.contains(&format!("k{v}-w3")));
        assert!(listed.stdout.contains(&format!("k{v}-w4")));
    }

    // Keys of the tenants and namespaces are on every master.
    let masters: Vec<usize> = (0..plan.nodes.len())
        .filter(|&i| {
            plan.cli(plan.nodes[i].port, &["ROLE"])
                .is_ok_and(|r| r.starts_with("master"))
        })
        .collect();
    assert_eq!(masters.len(), 3);
    for &i in &masters {
        let port = plan.nodes[i].port;
        let size: u64 = plan.cli(port, &["DBSIZE"]).unwrap().trim().parse().unwrap();
        assert!(size > 0, "master {port} holds no key");
    }

    // A master dies under a running watch: its replica takes over and the watch goes on
    // (writes to that shard fail meanwhile; kubectl retries them here).
    let k = picked[1].clone().unwrap();
    let w = Watch::start(&stack, &k);
    let probe = "after-probe";
    wait_for(20, "the watch is open", || {
        let _ = stack.kubectl_stdin(&k, &["create", "-f", "-"], Some(&widget("default", probe)));
        w.saw(probe)
    });
    // Children 0..6 of the stack are the Redis nodes, in plan order.
    stack.kill_child(masters[0]).expect("kill a master");
    for i in 0..10 {
        let name = format!("after-{i}");
        wait_for(60, "a create after the failover", || {
            stack
                .kubectl_stdin(&k, &["create", "-f", "-"], Some(&widget("default", &name)))
                .ok
                || stack.kubectl(&k, &["get", "widget", &name]).ok
        });
    }
    wait_for(30, "the watch sees the creates after the failover", || {
        (0..10).all(|i| w.saw(&format!("after-{i}")))
    });
    drop(w);

    // CRD deletion: its instances go first (the CRD finalizer), then the CRD.
    let out = stack.kubectl(
        &k,
        &["delete", "crd", "widgets.example.org", "--timeout=60s"],
    );
    assert!(out.ok, "{}", out.stderr);
    let crds = stack.kubectl(&k, &["get", "crds", "-o", "name"]);
    assert!(
        !crds.stdout.contains("widgets.example.org"),
        "{}",
        crds.stdout
    );
}
