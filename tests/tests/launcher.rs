//! The launcher's `StackBuilder` starting a real stack, and `crdplane up`'s children dying
//! with it: after a SIGKILL of the launcher (once started up, and while it is still starting
//! the stack) no process it started may be left running.

use crdplane::{Service, StackBuilder};
use crdplane_tests::{bin, bin_dir, http_get};
use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// State and parent pid of `/proc/<pid>/stat` (None: no such process).
fn stat(pid: u32) -> Option<(String, u32)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut f = s.rsplit_once(')')?.1.split_whitespace();
    let state = f.next()?.to_string();
    Some((state, f.next()?.parse().ok()?))
}

/// `pid` exists and has not exited (`Z`: exited, not yet reaped).
fn alive(pid: u32) -> bool {
    stat(pid).is_some_and(|(s, _)| s != "Z" && s != "X")
}

/// Live processes started by the launcher `launcher`: its children, and every process whose
/// environment holds `marker` (they inherit it wherever they were reparented to; Redis
/// overwrites its environment with its process title, so it is found as a child).
fn launched(launcher: Option<u32>, marker: &str) -> Vec<u32> {
    let needle = format!("CRDPLANE_TEST_MARK={marker}");
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if Some(pid) == launcher || !alive(pid) {
            continue;
        }
        let child = stat(pid).is_some_and(|(_, ppid)| Some(ppid) == launcher);
        let marked = std::fs::read(e.path().join("environ"))
            .is_ok_and(|env| env.split(|&b| b == 0).any(|v| v == needle.as_bytes()));
        if child || marked {
            out.push(pid);
        }
    }
    out
}

/// Waits (bounded) until none of `pids` nor any process carrying `marker` is alive;
/// returns those left.
fn wait_all_gone(pids: &[u32], marker: &str, timeout: Duration) -> Vec<u32> {
    let deadline = Instant::now() + timeout;
    loop {
        let mut left: Vec<u32> = pids.iter().copied().filter(|&p| alive(p)).collect();
        for p in launched(None, marker) {
            if !left.contains(&p) {
                left.push(p);
            }
        }
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn kill_left(pids: &[u32]) {
    for p in pids {
        let _ = Command::new("kill")
            .args(["-KILL", &p.to_string()])
            .status();
    }
}

/// Starts `crdplane up` with a fresh marker; returns the launcher, its marker and stdout.
fn launch(data: &std::path::Path) -> (std::process::Child, String) {
    let marker = format!("{}-{:?}", std::process::id(), Instant::now());
    let child = Command::new(bin("crdplane"))
        .args(["up", "--listen", "127.0.0.1:0", "--durability", "memory"])
        .args(["--apiserver-cert-extra-sans", "10.1.2.3,api.example.com"])
        .arg("--data-dir")
        .arg(data)
        .env("CRDPLANE_TEST_MARK", &marker)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start crdplane up");
    (child, marker)
}

#[test]
fn children_die_when_the_started_launcher_is_killed() {
    let data = tempfile::tempdir().unwrap();
    let (mut launcher, marker) = launch(data.path());
    let out = launcher.stdout.take().unwrap();
    let mut lines = std::io::BufReader::new(out).lines();
    let gateway = loop {
        let line = lines.next().expect("launcher printed its gateway").unwrap();
        if let Some(url) = line.trim().strip_prefix("gateway:") {
            break url.trim().to_string();
        }
    };
    // `up` serves HTTPS by default: the CA, the admin certificate and a kubeconfig that
    // holds them are in the data dir; without a credential the gateway answers 401.
    assert!(gateway.starts_with("https://"), "{gateway}");
    let read = |f: &str| std::fs::read_to_string(data.path().join("pki").join(f)).unwrap();
    let (ca, serving) = (read("ca.crt"), read("apiserver.crt"));
    let admin = crdplane_tests::TlsClient::new(&ca, Some((&read("admin.crt"), &read("admin.key"))))
        .unwrap();
    // The serving certificate names the extra names too (kubeadm's flag).
    let now = std::time::SystemTime::now();
    for host in ["127.0.0.1", "localhost", "10.1.2.3", "api.example.com"] {
        crdplane::tls::verify_server_cert(&ca, &serving, host, now)
            .unwrap_or_else(|e| panic!("{host}: {e}"));
    }
    assert!(crdplane::tls::verify_server_cert(&ca, &serving, "10.9.9.9", now).is_err());
    let readyz = format!("{gateway}/readyz");
    assert_eq!(admin.request("GET", &readyz, &[], None).unwrap().0, 200);
    let nobody = crdplane_tests::TlsClient::new(&ca, None).unwrap();
    assert_eq!(nobody.request("GET", &readyz, &[], None).unwrap().0, 401);
    let kubeconfig = std::fs::read_to_string(data.path().join("kubeconfig")).unwrap();
    assert!(
        kubeconfig.contains(&format!("server: {gateway}")),
        "{kubeconfig}"
    );
    assert!(
        kubeconfig.contains("client-certificate-data: "),
        "{kubeconfig}"
    );
    let children = launched(Some(launcher.id()), &marker);
    assert_eq!(children.len(), 5, "redis and four services: {children:?}");
    launcher.kill().unwrap();
    launcher.wait().unwrap();
    let left = wait_all_gone(&children, &marker, Duration::from_secs(20));
    kill_left(&left);
    assert!(
        left.is_empty(),
        "left running after SIGKILL of the launcher: {left:?}"
    );
}

#[test]
fn children_die_when_the_launcher_is_killed_while_starting() {
    // Kill at several points of startup: as soon as the first child exists, and after
    // one, two and three more have appeared.
    for after in 1..=4 {
        let data = tempfile::tempdir().unwrap();
        let (mut launcher, marker) = launch(data.path());
        let deadline = Instant::now() + Duration::from_secs(60);
        let children = loop {
            let children = launched(Some(launcher.id()), &marker);
            let n = children.len();
            if n >= after {
                break children;
            }
            assert!(Instant::now() < deadline, "launcher started {n} children");
            assert!(
                launcher.try_wait().unwrap().is_none(),
                "launcher exited during startup"
            );
            std::thread::sleep(Duration::from_millis(5));
        };
        launcher.kill().unwrap();
        launcher.wait().unwrap();
        let left = wait_all_gone(&children, &marker, Duration::from_secs(20));
        kill_left(&left);
        assert!(
            left.is_empty(),
            "left running after SIGKILL during startup (after {after} children): {left:?}"
        );
    }
}

#[test]
fn the_builder_starts_a_ready_stack_with_replicas_and_logs() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let mut stack = StackBuilder::new(bin_dir(), "")
        .own_redis(dir.path().join("redis"))
        .durability("memory")
        .replicas(2, 2)
        .args(Service::Gateway, &["--default-tenant", "t1"])
        .logs(&logs)
        .start()
        .expect("stack");
    assert_eq!(
        stack.names(),
        [
            "redis",
            "storage-0",
            "storage-1",
            "validation",
            "registry",
            "gateway-0",
            "gateway-1"
        ]
    );
    assert_eq!(stack.pids().len(), 7);
    assert_eq!(stack.storages.len(), 2);
    for g in &stack.gateways {
        assert_eq!(http_get(&format!("{g}/readyz")).unwrap().0, 200, "{g}");
    }
    for name in ["redis", "storage-0", "gateway-1"] {
        assert!(logs.join(format!("{name}.log")).exists(), "{name}.log");
    }
    // Restart in place: the same address answers again.
    let i = stack.index("storage-1").unwrap();
    let before = stack.storages[1].clone();
    assert_eq!(stack.respawn(i, Duration::from_secs(20)).unwrap(), before);
    // An added replica is pointed at the stack's services.
    let (j, url) = stack
        .add(
            Service::Registry,
            &[],
            &[],
            Some(&dir.path().join("r2.log")),
        )
        .unwrap();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    assert_eq!(stack.pids().len(), 8);
    stack.kill(j).unwrap();
    stack.stop();
    assert!(stack.pids().is_empty());
}

/// Not a test of its own: with `CRDPLANE_TEST_HOLD` set, starts a stack through the harness
/// and waits to be killed (see `harness_children_die_with_the_test_process`).
#[test]
fn holds_a_stack_until_killed() {
    if std::env::var_os("CRDPLANE_TEST_HOLD").is_none() {
        return;
    }
    let _stack = crdplane_tests::Stack::start_with_redis().expect("stack");
    println!("stack is up");
    loop {
        std::thread::park();
    }
}

#[test]
fn harness_children_die_with_the_test_process() {
    let marker = format!("{}-{:?}-harness", std::process::id(), Instant::now());
    let mut holder = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "holds_a_stack_until_killed", "--nocapture"])
        .env("CRDPLANE_TEST_HOLD", "1")
        .env("CRDPLANE_TEST_MARK", &marker)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let out = holder.stdout.take().unwrap();
    let up = std::io::BufReader::new(out)
        .lines()
        .map_while(Result::ok)
        .any(|l| l.contains("stack is up"));
    assert!(up, "the holder started its stack");
    let children = launched(Some(holder.id()), &marker);
    assert_eq!(children.len(), 5, "redis and four services: {children:?}");
    holder.kill().unwrap();
    holder.wait().unwrap();
    let left = wait_all_gone(&children, &marker, Duration::from_secs(20));
    kill_left(&left);
    assert!(
        left.is_empty(),
        "left running after SIGKILL of the test: {left:?}"
    );
}

#[test]
fn children_outlive_the_thread_that_started_them() {
    // The parent-death signal follows the thread that forked: a stack started on a thread
    // that then exits (a `spawn_blocking` thread, say) must keep running.
    let stack = std::thread::spawn(|| crdplane_tests::Stack::start_with_redis().expect("stack"))
        .join()
        .unwrap();
    let mut stack = stack;
    let pids = stack.processes().pids();
    assert_eq!(pids.len(), 4);
    let until = Instant::now() + Duration::from_secs(1);
    while Instant::now() < until {
        assert!(
            pids.iter().all(|&p| alive(p)),
            "a child died with its thread"
        );
        assert_eq!(
            http_get(&format!("{}/readyz", stack.gateway)).unwrap().0,
            200
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
