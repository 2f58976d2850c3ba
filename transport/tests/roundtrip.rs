//! The lean server and client against each other, with tonic's own health service as the
//! gRPC service: unary calls, many concurrent calls, a server-streaming call, errors carried
//! in grpc-status, and reconnect after the server restarts on the same port.
use std::time::Duration;

const CONC: usize = 1000;

use crdplane_transport::{Channel, serve_one};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// A server on its own runtime, so that dropping the runtime kills every connection too.
fn start(
    listener: std::net::TcpListener,
) -> (
    tokio::runtime::Runtime,
    tonic_health::server::HealthReporter,
) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let reporter = rt.block_on(async move {
        let (reporter, svc) = tonic_health::server::health_reporter();
        reporter
            .set_service_status("crdplane.test", tonic_health::ServingStatus::Serving)
            .await;
        let listener = tokio::net::TcpListener::from_std(listener).unwrap();
        tokio::spawn(async move {
            let _ = serve_one(listener, svc).await;
        });
        reporter
    });
    (rt, reporter)
}

fn bind(addr: &str) -> std::net::TcpListener {
    let l = std::net::TcpListener::bind(addr).unwrap();
    l.set_nonblocking(true).unwrap();
    l
}

fn req(service: &str) -> HealthCheckRequest {
    HealthCheckRequest {
        service: service.into(),
    }
}

#[tokio::test]
async fn unary_concurrent_errors_streams_and_reconnect() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .try_init();
    let listener = bind("127.0.0.1:0");
    let addr = listener.local_addr().unwrap();
    let (server, reporter) = tokio::task::spawn_blocking(move || start(listener))
        .await
        .unwrap();
    let client = HealthClient::new(Channel::lazy(&format!("http://{addr}")).unwrap());

    // Unary.
    let r = client
        .clone()
        .check(req("crdplane.test"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.status, ServingStatus::Serving as i32);

    // A gRPC error travels in the trailers and comes back as the same code.
    let e = client.clone().check(req("nope")).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound);

    // Many concurrent calls share the one connection.
    let mut tasks = Vec::new();
    for _ in 0..CONC {
        let mut c = client.clone();
        tasks.push(tokio::spawn(async move {
            c.check(req("crdplane.test"))
                .await
                .map(|r| r.into_inner().status)
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap().unwrap(), ServingStatus::Serving as i32);
    }

    // Server streaming: the first message, then a change.
    let mut stream = client
        .clone()
        .watch(req("crdplane.test"))
        .await
        .unwrap()
        .into_inner();
    let first = stream.message().await.unwrap().unwrap();
    assert_eq!(first.status, ServingStatus::Serving as i32);
    reporter
        .set_service_status("crdplane.test", tonic_health::ServingStatus::NotServing)
        .await;
    let next = tokio::time::timeout(Duration::from_secs(5), stream.message())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(next.status, ServingStatus::NotServing as i32);
    drop(stream);

    // The server goes away: calls fail; it comes back on the same port: calls work again.
    server.shutdown_background();
    let mut failed = false;
    for _ in 0..50 {
        if client.clone().check(req("crdplane.test")).await.is_err() {
            failed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(failed, "calls must fail while the server is down");
    // `shutdown_background` drops the old listener asynchronously: rebind once it is gone.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let listener = loop {
        match std::net::TcpListener::bind(addr) {
            Ok(l) => {
                l.set_nonblocking(true).unwrap();
                break l;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                assert!(std::time::Instant::now() < deadline, "{addr} still in use");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("bind {addr}: {e}"),
        }
    };
    let (server, _reporter) = tokio::task::spawn_blocking(move || start(listener))
        .await
        .unwrap();
    let r = client
        .clone()
        .check(req("crdplane.test"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.status, ServingStatus::Serving as i32);
    tokio::task::spawn_blocking(move || drop(server))
        .await
        .unwrap();
}
