//! Resource bounds, end to end on the real binaries and a real redis-server:
//!
//! - concurrent watches per client and in total (`--max-watches-per-client`,
//!   `--max-watches`): over a bound a watch gets upstream's 429 (`Retry-After: 1`,
//!   `Too many requests, please try again later.`); a watch that ends, however it ends,
//!   gives its slot back; another client address is unaffected; HTTP/2 streams on one
//!   connection count one by one;
//! - the size limits of objects (request body 3 MiB → 413; stored object 1.5 MiB → etcd's
//!   `request is too large`), for custom resources and CRDs;
//! - the request timeout (`--request-timeout`, a request's `?timeout=`): what kubectl's
//!   `--request-timeout` sends is understood, an unparsable value is upstream's 400.

use crdplane_tests::Stack;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// The gateway's socket address.
fn gateway_addr(s: &Stack) -> SocketAddr {
    s.gateway
        .trim_start_matches("http://")
        .parse()
        .expect("gateway address")
}

/// A connection from source address `src` (127.0.0.x) to the gateway.
async fn connect_from(src: &str, to: SocketAddr) -> TcpStream {
    let s = TcpSocket::new_v4().unwrap();
    s.bind(format!("{src}:0").parse().unwrap()).unwrap();
    s.connect(to).await.expect("connect")
}

/// The response head of an HTTP/1.1 GET of `path` on `c`: (status, lower-cased head), and
/// for a response with Content-Length, its body.
async fn get_head(c: &mut TcpStream, path: &str) -> (u16, String, Vec<u8>) {
    c.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut buf = Vec::new();
    let mut b = [0u8; 4096];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = tokio::time::timeout(Duration::from_secs(20), c.read(&mut b))
            .await
            .expect("response head in time")
            .unwrap();
        assert!(n > 0, "connection closed before the response head");
        buf.extend_from_slice(&b[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    let status = head[9..12].parse().unwrap();
    let mut body = buf[end..].to_vec();
    if let Some(len) = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
    {
        while body.len() < len {
            let n = c.read(&mut b).await.unwrap();
            assert!(n > 0);
            body.extend_from_slice(&b[..n]);
        }
    }
    (status, head, body)
}

const WATCH: &str = "/api/v1/namespaces?watch=1";

/// Opens a watch from `src`: the connection (holding the watch when the status is 200),
/// the status, the head and any fixed-length body.
async fn watch_from(src: &str, to: SocketAddr, path: &str) -> (TcpStream, u16, String, Vec<u8>) {
    let mut c = connect_from(src, to).await;
    let (status, head, body) = get_head(&mut c, path).await;
    (c, status, head, body)
}

fn assert_too_many(status: u16, head: &str, body: &[u8]) {
    assert_eq!(status, 429, "{head}");
    assert!(head.contains("\r\nretry-after: 1\r\n"), "{head}");
    assert!(
        head.contains("content-type: text/plain; charset=utf-8"),
        "{head}"
    );
    assert_eq!(
        String::from_utf8_lossy(body),
        "Too many requests, please try again later.\n"
    );
}

/// Opens watches from `src` until one is admitted (a slot given back is seen by the gateway
/// once it noticed the closed connection); panics after `within`.
async fn admitted_within(src: &str, to: SocketAddr, path: &str, within: Duration) -> TcpStream {
    let deadline = Instant::now() + within;
    loop {
        let (c, status, head, _) = watch_from(src, to, path).await;
        if status == 200 {
            return c;
        }
        assert_eq!(status, 429, "{head}");
        assert!(
            Instant::now() < deadline,
            "no slot came back within {within:?}"
        );
        tokio::task::yield_now().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_are_bounded_per_client_and_in_total() {
    let stack = tokio::task::spawn_blocking(|| {
        Stack::start_with_redis_and_gateway_args(&[
            "--max-watches-per-client",
            "2",
            "--max-watches",
            "3",
        ])
    })
    .await
    .unwrap()
    .expect("stack");
    let gw = gateway_addr(&stack);

    // Two watches from one address are served; the third is refused with upstream's 429.
    let (a1, s, h, _) = watch_from("127.0.0.1", gw, WATCH).await;
    assert_eq!(s, 200, "{h}");
    let (_a2, s, h, _) = watch_from("127.0.0.1", gw, WATCH).await;
    assert_eq!(s, 200, "{h}");
    let (_, s, h, body) = watch_from("127.0.0.1", gw, WATCH).await;
    assert_too_many(s, &h, &body);
    // The legacy /watch/ path is a watch too.
    let (_, s, h, body) = watch_from("127.0.0.1", gw, "/api/v1/watch/namespaces").await;
    assert_too_many(s, &h, &body);
    // Requests that are not watches are not counted.
    let (_, s, h, _) = watch_from("127.0.0.1", gw, "/api/v1/namespaces").await;
    assert_eq!(s, 200, "{h}");

    // Another client address is unaffected by the first one's bound ...
    let (b1, s, h, _) = watch_from("127.0.0.2", gw, WATCH).await;
    assert_eq!(s, 200, "{h}");
    // ... until the total bound (3) is reached.
    let (_, s, h, body) = watch_from("127.0.0.2", gw, WATCH).await;
    assert_too_many(s, &h, &body);

    // A client that closes its watch gets the slot back.
    drop(a1);
    let a3 = admitted_within("127.0.0.1", gw, WATCH, Duration::from_secs(10)).await;
    drop((a3, b1, _a2));

    // A watch that ends on the server's side (timeoutSeconds) gives its slot back too.
    // (The slots just dropped come back once the gateway noticed the closed connections.)
    let mut t1 = admitted_within(
        "127.0.0.2",
        gw,
        &format!("{WATCH}&timeoutSeconds=1"),
        Duration::from_secs(10),
    )
    .await;
    let _b2 = admitted_within("127.0.0.2", gw, WATCH, Duration::from_secs(10)).await;
    // Both slots of 127.0.0.2 are taken until the timed-out watch ends.
    // The response ends (the last chunk) while the connection stays open.
    let mut rest = Vec::new();
    let mut b = [0u8; 4096];
    while !rest.ends_with(b"0\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(10), t1.read(&mut b))
            .await
            .expect("the watch ends at its timeout")
            .unwrap();
        assert!(n > 0, "the response ends with its last chunk");
        rest.extend_from_slice(&b[..n]);
    }
    let _b3 = admitted_within("127.0.0.2", gw, WATCH, Duration::from_secs(10)).await;
    drop((_b2, _b3));

    // HTTP/2: watches multiplexed on one connection count one by one.
    let tcp = connect_from("127.0.0.1", gw).await;
    let (h2, conn) = h2::client::handshake(tcp).await.expect("h2 handshake");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut h2 = h2.ready().await.unwrap();
    // The slots of the HTTP/1.1 watches closed above come back once the gateway has seen
    // those connections end: until then a stream may still get 429.
    let mut open = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = None;
    while open.len() < 3 {
        let req = http::Request::get(format!("http://{gw}{WATCH}"))
            .body(())
            .unwrap();
        let (resp, _) = h2.send_request(req, true).unwrap();
        let resp = tokio::time::timeout(Duration::from_secs(20), resp)
            .await
            .expect("h2 response in time")
            .unwrap();
        h2 = h2.ready().await.unwrap();
        if resp.status() == 200 {
            open.push(resp);
            continue;
        }
        assert_eq!(resp.status(), 429);
        assert_eq!(resp.headers()["retry-after"], "1");
        let mut body = resp.into_body();
        let chunk = body.data().await.unwrap().unwrap();
        assert_eq!(&chunk[..], b"Too many requests, please try again later.\n");
        if open.len() == 2 {
            last = Some(429);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the closed watches' slots did not come back"
        );
        tokio::task::yield_now().await;
    }
    // Two streams of one connection hold both of the client's slots: the third is refused.
    assert_eq!((open.len(), last), (2, Some(429)));
    // Resetting one stream (the client stops reading) frees its slot.
    drop(open.pop());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let req = http::Request::get(format!("http://{gw}{WATCH}"))
            .body(())
            .unwrap();
        let (resp, _) = h2.send_request(req, true).unwrap();
        let resp = resp.await.unwrap();
        if resp.status() == 200 {
            break;
        }
        assert_eq!(resp.status(), 429);
        assert!(Instant::now() < deadline, "h2 slot came back");
        h2 = h2.ready().await.unwrap();
    }
    drop(stack);
}

const BLOBS_CRD: &str = r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"blobs.bounds.example.com"},
 "spec":{"group":"bounds.example.com","scope":"Namespaced",
  "names":{"plural":"blobs","singular":"blob","kind":"Blob"},
  "versions":[{"name":"v1","served":true,"storage":true,
   "schema":{"openAPIV3Schema":{"type":"object","properties":{"data":{"type":"string"}}}}}]}}"#;

const BLOBS: &str = "/apis/bounds.example.com/v1/namespaces/default/blobs";

fn blob(name: &str, bytes: usize) -> String {
    serde_json::json!({"apiVersion":"bounds.example.com/v1","kind":"Blob",
        "metadata":{"name":name},"data":"x".repeat(bytes)})
    .to_string()
}

fn call(stack: &Stack, method: &str, path: &str, body: &str) -> (u16, serde_json::Value) {
    let (code, text) = crdplane_tests::http_request(
        method,
        &format!("{}{path}", stack.gateway),
        Some("application/json"),
        Some(body),
    )
    .expect("http");
    (
        code,
        serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
    )
}

/// Upstream's answer for an object over etcd's 1.5 MiB request limit: a 500 Status with
/// reason "" and etcd's text.
fn assert_etcd_too_large(code: u16, e: &serde_json::Value) {
    assert_eq!(code, 500, "{e}");
    assert_eq!(e["message"], "etcdserver: request is too large", "{e}");
    assert_eq!(e["code"], 500);
    assert!(e.get("reason").is_none(), "{e}");
}

#[test]
fn objects_are_bounded_by_upstreams_size_limits() {
    let stack = Stack::start_with_redis().expect("stack");
    let (code, e) = call(
        &stack,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        BLOBS_CRD,
    );
    assert_eq!(code, 201, "{e}");

    // Under etcd's limit: stored.
    let (code, small) = call(&stack, "POST", BLOBS, &blob("small", 1_000_000));
    assert_eq!(code, 201, "{small}");
    // Over etcd's 1.5 MiB but under the 3 MiB request limit: etcd refuses the write.
    let (code, e) = call(&stack, "POST", BLOBS, &blob("big", 2_000_000));
    assert_etcd_too_large(code, &e);
    let (code, _) = call(&stack, "GET", &format!("{BLOBS}/big"), "");
    assert_eq!(code, 404, "nothing was stored");
    // A dry run never reaches etcd upstream: it passes.
    let (code, e) = call(
        &stack,
        "POST",
        &format!("{BLOBS}?dryRun=All"),
        &blob("big", 2_000_000),
    );
    assert_eq!(code, 201, "{e}");
    // An update that grows an object over the limit is refused the same way.
    let mut grown: serde_json::Value = serde_json::from_str(&blob("small", 2_000_000)).unwrap();
    grown["metadata"]["resourceVersion"] = small["metadata"]["resourceVersion"].clone();
    let (code, e) = call(&stack, "PUT", &format!("{BLOBS}/small"), &grown.to_string());
    assert_etcd_too_large(code, &e);
    let (code, e) = call(&stack, "GET", &format!("{BLOBS}/small"), "");
    assert_eq!(
        (code, &e["metadata"]["resourceVersion"]),
        (200, &small["metadata"]["resourceVersion"])
    );
    // Over the 3 MiB request body limit: 413 before anything is decoded.
    let (code, e) = call(&stack, "POST", BLOBS, &blob("huge", 3_200_000));
    assert_eq!(code, 413, "{e}");
    assert_eq!(e["reason"], "RequestEntityTooLarge");
    assert_eq!(e["message"], "Request entity too large: limit is 3145728");

    // A CRD over etcd's limit (a huge description) is refused like any object.
    let mut crd: serde_json::Value = serde_json::from_str(BLOBS_CRD).unwrap();
    crd["metadata"]["name"] = "wides.bounds.example.com".into();
    crd["spec"]["names"] = serde_json::json!({"plural":"wides","singular":"wide","kind":"Wide"});
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] =
        "d".repeat(1_700_000).into();
    let (code, e) = call(
        &stack,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &crd.to_string(),
    );
    assert_etcd_too_large(code, &e);

    // kubectl shows upstream's words for both.
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.json");
    std::fs::write(&big, blob("big", 2_000_000)).unwrap();
    let huge = dir.path().join("huge.json");
    std::fs::write(&huge, blob("huge", 3_200_000)).unwrap();
    for k in crdplane_tests::kubectls() {
        let out = stack.kubectl(&k, &["create", "-f", big.to_str().unwrap()]);
        assert!(!out.ok, "{}", out.stdout);
        assert!(
            out.stderr
                .contains("Error from server: error when creating")
                && out.stderr.contains("etcdserver: request is too large"),
            "{}: {}",
            k.display(),
            out.stderr
        );
        let out = stack.kubectl(&k, &["create", "-f", huge.to_str().unwrap()]);
        assert!(
            out.stderr
                .contains("Error from server (RequestEntityTooLarge)")
                && out
                    .stderr
                    .contains("Request entity too large: limit is 3145728"),
            "{}: {}",
            k.display(),
            out.stderr
        );
    }
}

/// `kubectl --request-timeout` sends `?timeout=<Go duration>` on every request, which the
/// gateway's limits layer reads as upstream's `WithRequestDeadline`: it must parse what kubectl
/// sends, and answer upstream's 400 for what does not parse. The gateway's own
/// `--request-timeout` takes a Go duration too.
#[test]
fn request_timeouts_are_read_as_upstream() {
    let stack = Stack::start_with_redis_and_gateway_args(&["--request-timeout", "45s"]).unwrap();
    for k in crdplane_tests::kubectls() {
        for t in ["5s", "1m30s", "2"] {
            let out = stack.kubectl(&k, &["--request-timeout", t, "get", "namespaces"]);
            assert!(
                out.ok,
                "{} --request-timeout {t}: {}",
                k.display(),
                out.stderr
            );
            assert!(out.stdout.contains("kube-system"), "{}", out.stdout);
        }
    }
    let (code, e) = call(&stack, "GET", "/api/v1/namespaces?timeout=2", "");
    assert_eq!(code, 400, "{e}");
    assert_eq!(e["reason"], "BadRequest", "{e}");
    assert_eq!(
        e["message"],
        "invalid timeout specified in the request URL - time: missing unit in duration \"2\"",
        "{e}"
    );
    // A watch is long-running: its `timeout` is not the request deadline's.
    let (code, _, _) = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let mut c = TcpStream::connect(gateway_addr(&stack)).await.unwrap();
        get_head(&mut c, "/api/v1/namespaces?watch=1&timeout=2").await
    });
    assert_eq!(code, 200);
}
