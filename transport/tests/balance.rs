//! The balanced channel against real in-process gRPC servers on 127.0.0.1:0 (the transport's
//! own `serve_with_health`, tonic-health, HTTP/2 over TCP): spreading, a killed endpoint, a
//! NOT_SERVING endpoint, deadlines and call metadata.
//!
//! Each server runs on a runtime of its own, so killing it (dropping the runtime) closes its
//! listener and every connection at once, as a killed process would.

use std::time::{Duration, Instant};

mod common;

use common::Echo;
use crdplane_proto::v1 as pb;
use crdplane_proto::v1::validation_client::ValidationClient;
use crdplane_proto::v1::validation_server::ValidationServer;
use crdplane_transport::health::Health;
use crdplane_transport::{CallContext, Channel, ChannelOptions};
use tonic::Request;

/// One server on its own runtime and thread.
struct Server {
    url: String,
    health: Health,
    kill: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    fn start(name: &str) -> Server {
        let name = name.to_string();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (kill_tx, kill_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let url = format!("http://{}", l.local_addr().unwrap());
                let health = Health::new("crdplane.v1.Validation", true).await;
                let h = health.clone();
                tokio::spawn(async move {
                    crdplane_transport::serve_with_health(
                        l,
                        ValidationServer::new(Echo { name }),
                        &h,
                        Default::default(),
                    )
                    .await
                });
                ready_tx.send((url, health)).unwrap();
            });
            let _ = kill_rx.recv();
            // Dropping the runtime ends every task: the listener and all connections close.
            rt.shutdown_background();
        });
        let (url, health) = ready_rx.recv().unwrap();
        Server {
            url,
            health,
            kill: Some(kill_tx),
            thread: Some(thread),
        }
    }

    async fn set_serving(&self, serving: bool) {
        self.health.set(serving).await;
    }

    /// Ends the server like a killed process: listener and connections closed at once.
    fn kill(&mut self) {
        if let Some(k) = self.kill.take() {
            let _ = k.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

fn admit(object: &str) -> pb::AdmitRequest {
    pb::AdmitRequest {
        object: object.as_bytes().to_vec().into(),
        ..Default::default()
    }
}

/// Calls `n` times; the names of the servers that answered, in order.
async fn call_n(c: &Channel, n: usize) -> Vec<String> {
    let mut client = ValidationClient::new(c.clone());
    let mut out = Vec::new();
    for i in 0..n {
        let r = client
            .admit(admit("x"))
            .await
            .unwrap_or_else(|e| panic!("call {i} failed: {e}"));
        out.push(String::from_utf8(r.into_inner().object.to_vec()).unwrap());
    }
    out
}

/// Waits (bounded) until the channel's rotation is `want`.
async fn wait_rotation(c: &Channel, want: &[bool]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while c.in_rotation() != want {
        assert!(
            Instant::now() < deadline,
            "rotation {:?}, want {want:?}",
            c.in_rotation()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn calls_spread_and_survive_a_killed_endpoint() {
    let mut a = Server::start("a");
    let b = Server::start("b");
    let c = Channel::lazy(&format!("{},{}", a.url, b.url)).unwrap();
    let seen = call_n(&c, 40).await;
    assert!(
        seen.iter().any(|s| s == "a") && seen.iter().any(|s| s == "b"),
        "{seen:?}"
    );

    // Calls in flight from several tasks while one endpoint is killed: every one succeeds
    // (read-only calls broken by the kill are sent again to the other endpoint).
    let busy: Vec<_> = (0..8)
        .map(|_| {
            let c = c.clone();
            tokio::spawn(async move { call_n(&c, 100).await })
        })
        .collect();
    tokio::task::yield_now().await;
    a.kill();
    for t in busy {
        t.await.expect("every call succeeded");
    }
    // No waiting for the health watch: calls right after the kill succeed too.
    let seen = call_n(&c, 40).await;
    assert!(seen.iter().all(|s| s == "b"), "{seen:?}");
    wait_rotation(&c, &[false, true]).await;
    drop(b);
}

#[tokio::test]
async fn a_not_serving_endpoint_is_not_picked_until_it_serves_again() {
    let a = Server::start("a");
    let b = Server::start("b");
    let c = Channel::lazy(&format!("{},{}", a.url, b.url)).unwrap();
    call_n(&c, 2).await;

    a.set_serving(false).await;
    wait_rotation(&c, &[false, true]).await;
    let seen = call_n(&c, 40).await;
    assert!(seen.iter().all(|s| s == "b"), "{seen:?}");

    a.set_serving(true).await;
    wait_rotation(&c, &[true, true]).await;
    let seen = call_n(&c, 40).await;
    assert!(seen.iter().any(|s| s == "a"), "{seen:?}");
}

#[tokio::test]
async fn with_no_endpoint_serving_calls_still_reach_them() {
    let a = Server::start("a");
    let b = Server::start("b");
    let c = Channel::lazy(&format!("{},{}", a.url, b.url)).unwrap();
    a.set_serving(false).await;
    b.set_serving(false).await;
    wait_rotation(&c, &[false, false]).await;
    let seen = call_n(&c, 10).await;
    assert!(
        seen.iter().any(|s| s == "a") && seen.iter().any(|s| s == "b"),
        "{seen:?}"
    );
}

#[tokio::test]
async fn deadlines_are_sent_and_enforced_except_for_long_running_methods() {
    let a = Server::start("a");
    let b = Server::start("b");
    for urls in [a.url.clone(), format!("{},{}", a.url, b.url)] {
        let opts = ChannelOptions {
            timeout: Some(Duration::from_millis(300)),
            ..Default::default()
        };
        let mut client = ValidationClient::new(Channel::with_options(&urls, opts).unwrap());
        let r = client.admit(admit("x")).await.unwrap().into_inner();
        assert_eq!(r.warnings[3], "300000u", "{urls}");
        assert_eq!(r.warnings[4], "Some(300ms)", "{urls}");

        let t = Instant::now();
        let e = client.admit(admit("sleep:3000")).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::DeadlineExceeded, "{urls}: {e}");
        assert!(t.elapsed() < Duration::from_millis(2000), "{urls}");

        // A deadline the caller set wins over the default.
        let mut req = Request::new(admit("sleep:500"));
        req.set_timeout(Duration::from_secs(5));
        let r = client.admit(req).await.unwrap().into_inner();
        assert_eq!(r.warnings[4], "Some(5s)", "{urls}");

        // Long-running methods get no default deadline.
        let opts = ChannelOptions {
            timeout: Some(Duration::from_millis(300)),
            long_running: &["/crdplane.v1.Validation/Admit"],
            ..Default::default()
        };
        let mut client = ValidationClient::new(Channel::with_options(&urls, opts).unwrap());
        let r = client.admit(admit("sleep:600")).await.unwrap().into_inner();
        assert_eq!(r.warnings[3], "", "{urls}");
    }
}

#[tokio::test]
async fn call_metadata_comes_from_the_request_context() {
    let a = Server::start("a");
    let b = Server::start("b");
    let tp =
        http::HeaderValue::from_static("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    for urls in [a.url.clone(), format!("{},{}", a.url, b.url)] {
        let mut client = ValidationClient::new(Channel::lazy(&urls).unwrap());
        let r = CallContext::new("acme", "", Some(&tp))
            .scope(client.admit(admit("x")))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            r.warnings[..3],
            ["acme", "", tp.to_str().unwrap()],
            "{urls}"
        );

        let r = client.admit(admit("x")).await.unwrap().into_inner();
        assert_eq!(r.warnings[..3], ["-", "-", "-"], "{urls}");
    }
}

#[tokio::test]
async fn every_server_answers_grpc_health() {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_client::HealthClient;
    let a = Server::start("a");
    let mut h = HealthClient::new(crdplane_transport::client::Endpoint::lazy(&a.url).unwrap());
    for (service, serving) in [("", true), ("crdplane.v1.Validation", true)] {
        let r = h
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            r.status == tonic_health::ServingStatus::Serving as i32,
            serving
        );
    }
    a.set_serving(false).await;
    let r = h
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.status, tonic_health::ServingStatus::NotServing as i32);
}

/// The answer a test's resolver gives (`None` fails the lookup), and how many lookups it
/// has answered.
#[derive(Default)]
struct Dns {
    answer: std::sync::Mutex<Option<Vec<std::net::SocketAddr>>>,
    lookups: std::sync::atomic::AtomicUsize,
}

impl Dns {
    fn set(&self, answer: Option<Vec<std::net::SocketAddr>>) {
        *self.answer.lock().unwrap() = answer;
    }

    /// Waits (bounded) until the channel has looked the name up `n` more times.
    async fn wait_lookups(&self, n: usize) {
        use std::sync::atomic::Ordering;
        let until = self.lookups.load(Ordering::SeqCst) + n;
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.lookups.load(Ordering::SeqCst) < until {
            assert!(Instant::now() < deadline, "no lookups");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

fn resolver(dns: &std::sync::Arc<Dns>) -> crdplane_transport::resolve::Resolver {
    let dns = dns.clone();
    crdplane_transport::resolve::Resolver::new(move |host, port| {
        assert_eq!((host.as_str(), port), ("storage.test", 7001));
        let a = dns.answer.lock().unwrap().clone();
        dns.lookups
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Box::pin(async move { a.ok_or_else(|| std::io::Error::other("no such host")) })
    })
}

fn addr(s: &Server) -> std::net::SocketAddr {
    s.url.trim_start_matches("http://").parse().unwrap()
}

/// Waits (bounded) until the channel dials exactly `want`.
async fn wait_endpoints(c: &Channel, want: &[std::net::SocketAddr]) {
    let want: Vec<String> = want.iter().map(|a| a.to_string()).collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while c.endpoints() != want {
        assert!(
            Instant::now() < deadline,
            "endpoints {:?}, want {want:?}",
            c.endpoints()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_dns_target_spreads_over_its_addresses_and_follows_them() {
    let (a, b, c3) = (Server::start("a"), Server::start("b"), Server::start("c"));
    let dns = std::sync::Arc::new(Dns::default());
    let opts = ChannelOptions {
        resolver: resolver(&dns),
        dns_refresh: Duration::from_millis(20),
        ..Default::default()
    };
    let c = Channel::with_options("dns:///storage.test:7001", opts).unwrap();

    // Not resolved yet: UNAVAILABLE, naming the target.
    let e = ValidationClient::new(c.clone())
        .admit(admit("x"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unavailable, "{e}");
    assert!(
        e.message()
            .contains("dns:///storage.test:7001: no address resolved yet"),
        "{e}"
    );

    dns.set(Some(vec![addr(&a), addr(&b)]));
    wait_endpoints(&c, &[addr(&a), addr(&b)]).await;
    let seen = call_n(&c, 40).await;
    assert!(
        seen.iter().any(|s| s == "a") && seen.iter().any(|s| s == "b"),
        "{seen:?}"
    );

    // A replica goes (scaled down, pod replaced) and another comes: a gets no more calls.
    dns.set(Some(vec![addr(&b), addr(&c3)]));
    wait_endpoints(&c, &[addr(&b), addr(&c3)]).await;
    wait_rotation(&c, &[true, true]).await;
    let seen = call_n(&c, 40).await;
    assert!(
        !seen.iter().any(|s| s == "a")
            && seen.iter().any(|s| s == "b")
            && seen.iter().any(|s| s == "c"),
        "{seen:?}"
    );

    // A failed or empty lookup keeps the last known addresses.
    for broken in [None, Some(vec![])] {
        dns.set(broken);
        dns.wait_lookups(3).await;
        assert_eq!(c.endpoints(), [addr(&b), addr(&c3)].map(|a| a.to_string()));
        let seen = call_n(&c, 10).await;
        assert!(!seen.iter().any(|s| s == "a"), "{seen:?}");
    }
    drop(a);
}

#[tokio::test]
async fn a_dns_target_resolves_through_the_system_resolver() {
    // `localhost` may also resolve to ::1, where nothing listens: that endpoint is taken
    // out at its first refused connect and every call still succeeds.
    let a = Server::start("a");
    let port = addr(&a).port();
    let c = Channel::lazy(&format!("dns:///localhost:{port}")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !c.endpoints().contains(&format!("127.0.0.1:{port}")) {
        assert!(Instant::now() < deadline, "{:?}", c.endpoints());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let seen = call_n(&c, 20).await;
    assert!(seen.iter().all(|s| s == "a"), "{seen:?}");
}

#[test]
fn malformed_dns_targets_are_configuration_errors() {
    for bad in ["dns:///storage", "dns://10.0.0.10/storage:7001"] {
        let e = Channel::lazy(bad).unwrap_err().to_string();
        assert!(e.contains(bad), "{bad}: {e}");
    }
}
