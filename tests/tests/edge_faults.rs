//! Faults at the edge, end to end on the real binaries and a real redis-server:
//!
//! - a flood of connections beyond the gateway's file-descriptor limit does not end it
//!   (accept errors back off, as Go's `net/http` `Server.Serve` does);
//! - the connection bounds refuse promptly and a client from another address is still served;
//! - slowloris: a connection whose head never completes is closed after the header timeout
//!   (kube-apiserver's `ReadHeaderTimeout`, here set to 1 s by flag);
//! - a backend killed with SIGKILL turns every path (get, list, create, watch, discovery)
//!   into 503 + `Retry-After` without internal text, and everything recovers when it returns;
//! - under `crdplane up`, a child killed with SIGKILL is restarted and nothing else stops.

use crdplane_tests::{RedisServer, bin, free_port, http_get};
use serde_json::json;
use std::io::{BufRead, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Processes killed on drop.
struct Procs(Vec<(String, Child)>);

impl Drop for Procs {
    fn drop(&mut self) {
        for (_, c) in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Starts `cmd` (a crdplane service) and returns its announced URL.
fn announce(mut cmd: Command, procs: &mut Procs, name: &str) -> String {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start service (build the workspace binaries first)");
    let out = child.stdout.take().unwrap();
    procs.0.push((name.to_string(), child));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = std::io::BufReader::new(out).lines();
        for l in lines.by_ref() {
            let Ok(l) = l else { break };
            if let Some(u) = crdplane_core::names::parse_announcement(&l) {
                let _ = tx.send(u.to_string());
                break;
            }
        }
        for _ in lines {}
    });
    rx.recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("{name} announced its address"))
}

/// The stack on fixed ports (so a service can be killed and started again in place), the
/// gateway with extra flags and, if given, a lower open-files limit.
struct Fixture {
    procs: Procs,
    redis: RedisServer,
    storage: String,
    validation: String,
    registry: String,
    gateway: String,
    gateway_args: Vec<String>,
    nofile: Option<u32>,
}

impl Fixture {
    fn start(gateway_args: &[&str], nofile: Option<u32>) -> Fixture {
        let redis = RedisServer::start().expect("redis-server");
        let mut f = Fixture {
            procs: Procs(Vec::new()),
            storage: format!("http://127.0.0.1:{}", free_port()),
            validation: format!("http://127.0.0.1:{}", free_port()),
            registry: format!("http://127.0.0.1:{}", free_port()),
            gateway: String::new(),
            gateway_args: gateway_args.iter().map(|s| s.to_string()).collect(),
            nofile,
            redis,
        };
        for name in ["storage", "validation", "registry"] {
            f.start_service(name);
        }
        f.start_gateway();
        f
    }

    fn command(&self, name: &str) -> Command {
        let addr = |u: &str| u.trim_start_matches("http://").to_string();
        let mut c = Command::new(bin(&format!("crdplane-{name}")));
        match name {
            "storage" => c.args([
                "--listen",
                &addr(&self.storage),
                "--redis-url",
                &self.redis.url(),
            ]),
            "validation" => c.args(["--listen", &addr(&self.validation)]),
            "registry" => c.args([
                "--listen",
                &addr(&self.registry),
                "--storage",
                &self.storage,
                "--validation",
                &self.validation,
            ]),
            _ => unreachable!(),
        };
        c
    }

    fn start_service(&mut self, name: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        // The port was just released; a restart may have to wait for it briefly.
        loop {
            let c = self.command(name);
            let mut p = Procs(Vec::new());
            let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                announce(c, &mut p, name)
            }));
            if ok.is_ok() {
                self.procs.0.append(&mut p.0);
                return;
            }
            assert!(Instant::now() < deadline, "{name} restarted");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn start_gateway(&mut self) {
        let mut args = vec![
            "--listen".to_string(),
            "127.0.0.1:0".into(),
            "--storage".into(),
            self.storage.clone(),
            "--validation".into(),
            self.validation.clone(),
            "--registry".into(),
            self.registry.clone(),
            "--insecure-http".into(),
        ];
        args.extend(self.gateway_args.iter().cloned());
        let c = match self.nofile {
            // The shell lowers the limit, then becomes the gateway.
            Some(n) => {
                let mut c = Command::new("sh");
                c.arg("-c")
                    .arg(format!("ulimit -n {n} && exec \"$0\" \"$@\""))
                    .arg(bin("crdplane-gateway"))
                    .args(&args);
                c
            }
            None => {
                let mut c = Command::new(bin("crdplane-gateway"));
                c.args(&args);
                c
            }
        };
        self.gateway = announce(c, &mut self.procs, "gateway");
        wait_ready(&self.gateway);
    }

    fn kill9(&mut self, name: &str) {
        let i = self
            .procs
            .0
            .iter()
            .position(|(n, _)| n == name)
            .expect("known process");
        let (_, mut c) = self.procs.0.remove(i);
        c.kill().unwrap(); // SIGKILL
        c.wait().unwrap();
    }

    fn gateway_alive(&mut self) -> bool {
        let (_, c) = self
            .procs
            .0
            .iter_mut()
            .find(|(n, _)| n == "gateway")
            .expect("gateway");
        matches!(c.try_wait(), Ok(None))
    }

    fn addr(&self) -> SocketAddr {
        self.gateway
            .trim_start_matches("http://")
            .parse()
            .expect("gateway address")
    }
}

fn wait_ready(gw: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !matches!(http_get(&format!("{gw}/readyz")), Ok((200, _))) {
        assert!(Instant::now() < deadline, "{gw} ready");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A TCP connection to `to` from the loopback address `from` (any 127/8 address is local).
fn connect_from(from: &str, to: SocketAddr) -> std::io::Result<TcpStream> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let s = rt.block_on(async {
        let s = tokio::net::TcpSocket::new_v4()?;
        s.bind(format!("{from}:0").parse().unwrap())?;
        tokio::time::timeout(Duration::from_secs(5), s.connect(to))
            .await
            .map_err(|_| std::io::Error::other("connect timed out"))?
    })?;
    let s = s.into_std()?;
    s.set_nonblocking(false)?;
    Ok(s)
}

/// One `GET path` from `from`: the status code, 0 if the connection was closed unanswered.
fn get_from(from: &str, to: SocketAddr, path: &str) -> u16 {
    let Ok(mut s) = connect_from(from, to) else {
        return 0;
    };
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    );
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out)
        .get(9..12)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// Whether the server closed `s` (EOF or reset) within `within`.
fn closed_by_server(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let mut b = [0u8; 64];
    match s.read(&mut b) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

#[test]
fn running_out_of_file_descriptors_does_not_end_the_gateway() {
    // Bounds above the descriptor limit, so accept itself fails with EMFILE.
    let mut f = Fixture::start(&["--max-connections", "100000"], Some(128));
    let addr = f.addr();
    // Far more than the 128 descriptors: the rest wait in the listen backlog (until it is full:
    // a connect that cannot complete ends the flood).
    let mut flood = Vec::new();
    for _ in 0..400 {
        match connect_from("127.0.0.1", addr) {
            Ok(s) => flood.push(s),
            Err(_) => break,
        }
    }
    assert!(flood.len() > 128, "flooded: {}", flood.len());
    // The backlog is full of connections the gateway cannot accept; it keeps trying.
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        assert!(
            f.gateway_alive(),
            "the gateway exited at the descriptor limit"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(flood);
    // Descriptors come back; the next attempt (at most 1 s later) serves again.
    wait_ready(&f.gateway);
    assert!(f.gateway_alive());
}

#[test]
fn connection_bounds_refuse_promptly_and_other_clients_are_served() {
    let mut f = Fixture::start(
        &[
            "--max-connections",
            "60",
            "--max-connections-per-client",
            "40",
        ],
        None,
    );
    let addr = f.addr();
    // One address opens far more than its share: 40 are kept, the rest closed at once.
    let mut conns: Vec<TcpStream> = (0..100)
        .map(|_| connect_from("127.0.0.1", addr).expect("connect"))
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let refused = conns
        .iter_mut()
        .filter_map(|c| {
            let mut c = c.try_clone().ok()?;
            closed_by_server(&mut c, Duration::from_millis(50)).then_some(())
        })
        .count();
    assert_eq!(refused, 60, "all beyond the per-client bound are refused");
    assert!(started.elapsed() < Duration::from_secs(20));
    // Another client is served while the first holds its share.
    assert_eq!(get_from("127.0.0.2", addr, "/readyz"), 200);
    // The total bound: a second address takes the remaining 20 slots; then everyone waits.
    let mut more: Vec<TcpStream> = (0..20)
        .map(|_| connect_from("127.0.0.3", addr).expect("connect"))
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    for c in &mut more {
        assert!(
            !closed_by_server(c, Duration::from_millis(20)),
            "within the total"
        );
    }
    assert_eq!(
        get_from("127.0.0.4", addr, "/readyz"),
        0,
        "refused at the total"
    );
    assert!(f.gateway_alive());
    drop(more);
    drop(conns);
    let deadline = Instant::now() + Duration::from_secs(10);
    while get_from("127.0.0.4", addr, "/readyz") != 200 {
        assert!(Instant::now() < deadline, "slots came back");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn slowloris_connections_are_closed_after_the_header_timeout() {
    let mut f = Fixture::start(&["--request-header-timeout", "1"], None);
    let addr = f.addr();
    let mut slow: Vec<TcpStream> = (0..50)
        .map(|i| {
            let mut s = connect_from("127.0.0.1", addr).expect("connect");
            // Half send a partial head, half nothing at all.
            if i % 2 == 0 {
                s.write_all(b"GET /api HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                    .unwrap();
            }
            s
        })
        .collect();
    let started = Instant::now();
    // Keep trickling header bytes: the deadline is for the whole head, not per byte.
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(200));
        for s in slow.iter_mut().step_by(2) {
            let _ = s.write_all(b"a");
        }
    }
    for (i, s) in slow.iter_mut().enumerate() {
        assert!(
            closed_by_server(s, Duration::from_secs(10)),
            "slow connection {i} was not closed"
        );
    }
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(900), "closed after {took:?}");
    assert!(took < Duration::from_secs(8), "closed after {took:?}");
    // A normal client is served throughout.
    assert_eq!(get_from("127.0.0.1", addr, "/readyz"), 200);
    assert!(f.gateway_alive());
}

const CRD: &str = crdplane_tests::CRDS_PATH;
const CRONTABS: &str = crdplane_tests::CRONTABS_PATH;

fn create_crd_and_object(gw: &str) {
    crdplane_tests::serve_crontabs(gw, &cron("first"));
}

fn cron(name: &str) -> serde_json::Value {
    crdplane_tests::crontab(name, "x")
}

/// Status, head and body of one exchange.
fn exchange(method: &str, url: &str, body: Option<&str>) -> (u16, String, String) {
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').unwrap();
    let mut s = TcpStream::connect(host).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let body = body.unwrap_or("");
    write!(
        s,
        "{method} /{path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let code = text.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (code, head.to_ascii_lowercase(), body.to_string())
}

/// Every request in `paths` answers 503 with Retry-After and a Status without internal text.
fn assert_unavailable(gw: &str, what: &str, paths: &[(&str, String, Option<String>)]) {
    for (method, path, body) in paths {
        let (code, head, body) = exchange(method, &format!("{gw}{path}"), body.as_deref());
        let ctx = format!("{what}: {method} {path} -> {code}\n{head}\n{body}");
        assert_eq!(code, 503, "{ctx}");
        assert!(head.contains("\r\nretry-after: 1"), "{ctx}");
        let v: serde_json::Value = serde_json::from_str(&body).expect(&ctx);
        assert_eq!(v["kind"], "Status", "{ctx}");
        assert_eq!(v["reason"], "ServiceUnavailable", "{ctx}");
        assert_eq!(v["details"]["retryAfterSeconds"], 1, "{ctx}");
        for leak in [
            "127.0.0.1",
            "refused",
            "h2",
            "transport",
            "redis",
            "os error",
            "tcp",
        ] {
            assert!(!body.to_lowercase().contains(leak), "{leak} leaked: {ctx}");
        }
    }
}

#[test]
fn a_killed_backend_gives_503_with_retry_after_everywhere_and_recovery() {
    let mut f = Fixture::start(&[], None);
    let gw = f.gateway.clone();
    create_crd_and_object(&gw);

    // Storage: every resource path depends on it.
    f.kill9("storage");
    let paths = [
        ("GET", format!("{CRONTABS}/first"), None),
        ("GET", CRONTABS.to_string(), None),
        ("GET", format!("{CRONTABS}?watch=1"), None),
        (
            "POST",
            CRONTABS.to_string(),
            Some(cron("second").to_string()),
        ),
        ("GET", CRD.to_string(), None),
        ("GET", "/api/v1/namespaces".to_string(), None),
        ("GET", "/apis".to_string(), None),
        ("GET", "/apis/stable.example.com/v1".to_string(), None),
    ];
    assert_unavailable(&gw, "storage killed", &paths);
    f.start_service("storage");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, _, body) = exchange(
            "POST",
            &format!("{gw}{CRONTABS}"),
            Some(&cron("second").to_string()),
        );
        if code == 201 {
            break;
        }
        assert!(Instant::now() < deadline, "no recovery: {code} {body}");
        std::thread::sleep(Duration::from_millis(100));
    }
    for (method, path, _) in &paths[..3] {
        if *method == "GET" && !path.contains("watch") {
            let (code, _, body) = exchange(method, &format!("{gw}{path}"), None);
            assert_eq!(code, 200, "{path}: {body}");
        }
    }

    // Registry: discovery and CRD writes.
    f.kill9("registry");
    let crd2 = json!({"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"widgets.example.org"},
        "spec":{"group":"example.org","scope":"Namespaced","names":{"plural":"widgets","kind":"Widget"},
        "versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object"}}}]}});
    assert_unavailable(
        &gw,
        "registry killed",
        &[
            ("POST", CRD.to_string(), Some(crd2.to_string())),
            (
                "GET",
                "/apis/example.org/v1/namespaces/default/widgets".to_string(),
                None,
            ),
        ],
    );
    f.start_service("registry");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, _, body) = exchange("POST", &format!("{gw}{CRD}"), Some(&crd2.to_string()));
        if code == 201 {
            break;
        }
        assert!(Instant::now() < deadline, "no recovery: {code} {body}");
        std::thread::sleep(Duration::from_millis(100));
    }

    // Validation: admission of custom resource writes.
    f.kill9("validation");
    assert_unavailable(
        &gw,
        "validation killed",
        &[(
            "POST",
            CRONTABS.to_string(),
            Some(cron("third").to_string()),
        )],
    );
    f.start_service("validation");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, _, body) = exchange(
            "POST",
            &format!("{gw}{CRONTABS}"),
            Some(&cron("third").to_string()),
        );
        if code == 201 {
            break;
        }
        assert!(Instant::now() < deadline, "no recovery: {code} {body}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(f.gateway_alive());
}

/// Pids of the children of `pid` (from /proc), by command name.
fn children(pid: u32) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ...
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let comm = head.split_once('(').map(|x| x.1).unwrap_or("").to_string();
        let ppid: u32 = rest
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        if ppid == pid {
            out.push((p, comm));
        }
    }
    out.sort();
    out
}

fn pid_of(kids: &[(u32, String)], comm: &str) -> u32 {
    kids.iter()
        .find(|(_, c)| c.starts_with(comm))
        .unwrap_or_else(|| panic!("{comm} among {kids:?}"))
        .0
}

#[test]
fn the_launcher_restarts_a_killed_child_and_stops_nothing_else() {
    let data = tempfile::tempdir().unwrap();
    let mut launcher = Command::new(bin("crdplane"))
        .args([
            "up",
            "--insecure-http",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
        ])
        .arg(data.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start crdplane up");
    struct Stop(u32);
    impl Drop for Stop {
        fn drop(&mut self) {
            let _ = Command::new("kill")
                .args(["-TERM", &self.0.to_string()])
                .status();
        }
    }
    let _stop = Stop(launcher.id());
    let out = launcher.stdout.take().unwrap();
    let mut lines = std::io::BufReader::new(out).lines();
    let gw = loop {
        let l = lines.next().expect("launcher output").expect("read");
        if let Some(u) = l.trim().strip_prefix("gateway:") {
            break u.trim().to_string();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    wait_ready(&gw);
    create_crd_and_object(&gw);

    let before = children(launcher.id());
    assert_eq!(before.len(), 5, "redis and four services: {before:?}");
    for victim in ["crdplane-stora", "crdplane-gatew"] {
        let now = children(launcher.id());
        let pid = pid_of(&now, victim);
        Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap();
        // Restarted: a new process of the same program, the others untouched.
        let deadline = Instant::now() + Duration::from_secs(30);
        let after = loop {
            let k = children(launcher.id());
            if k.len() == 5 && k.iter().any(|(p, c)| c.starts_with(victim) && *p != pid) {
                break k;
            }
            assert!(
                matches!(launcher.try_wait(), Ok(None)),
                "the launcher stopped after {victim} died"
            );
            assert!(Instant::now() < deadline, "{victim} not restarted: {k:?}");
            std::thread::sleep(Duration::from_millis(50));
        };
        for (p, c) in &now {
            if !c.starts_with(victim) {
                assert!(
                    after.contains(&(*p, c.clone())),
                    "{c} was stopped: {after:?}"
                );
            }
        }
        // The stack serves again, on the same address.
        wait_ready(&gw);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (code, _) =
                http_get(&format!("{gw}{CRONTABS}/first")).unwrap_or((0, String::new()));
            if code == 200 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "no recovery after {victim}: {code}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    assert!(matches!(launcher.try_wait(), Ok(None)));
}
