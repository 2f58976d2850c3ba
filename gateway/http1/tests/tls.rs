//! HTTP/1.1 over TLS (`crdplane_http1::tls`): a real rustls client against `serve_connection`
//! over a `TlsConnection`, on `127.0.0.1:0`: kept-alive requests whose bodies span many TLS
//! records both ways, pipelining, a streamed response that ends when the client goes, the
//! HTTP/2 preface refused, and close_notify at the end. And a large body on a plain socket.

use bytes::Bytes;
use crdplane_http1::tls::TlsConnection;
use crdplane_http1::{Limits, serve_connection};
use http::{Response, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls;

#[path = "support/pki.rs"]
mod pki;

type Body = http_body_util::combinators::UnsyncBoxBody<Bytes, std::io::Error>;

fn limits() -> Limits {
    Limits {
        max_head: 4096,
        max_headers: 32,
        max_body: 8 << 20,
        header_timeout: Duration::from_secs(30),
        idle_timeout: Duration::from_secs(30),
    }
}

fn full(code: StatusCode, b: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Full::new(b.into()).map_err(|n| match n {}).boxed_unsync());
    *r.status_mut() = code;
    r
}

struct Pki {
    server: Arc<rustls::ServerConfig>,
    client: Arc<rustls::ClientConfig>,
}

fn pki() -> Pki {
    let (server, client) = pki::configs(&[b"h2", b"http/1.1"]);
    Pki { server, client }
}

/// Serves one TLS connection with `handler`; the task's result says whether the server
/// ended the connection cleanly.
async fn serve_one<H, F>(
    pki: &Pki,
    handler: H,
) -> (
    tokio_rustls::client::TlsStream<TcpStream>,
    tokio::task::JoinHandle<std::io::Result<()>>,
)
where
    H: Fn(http::request::Parts, Bytes) -> F + Send + 'static,
    F: Future<Output = Response<Body>> + Send,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(pki.server.clone());
    let server = tokio::spawn(async move {
        let (sock, _) = listener.accept().await?;
        let (sock, session) = acceptor.accept(sock).await?.into_inner();
        let mut conn = TlsConnection::new(sock, session).await?;
        assert_eq!(conn.session().alpn_protocol(), Some(&b"http/1.1"[..]));
        let handed = serve_connection(
            &mut conn,
            handler,
            || full(StatusCode::PAYLOAD_TOO_LARGE, "big"),
            &limits(),
        )
        .await?;
        assert!(handed.is_none());
        conn.close();
        Ok(())
    });
    let connector = tokio_rustls::TlsConnector::from(pki.client.clone());
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let client = connector.connect(name, tcp).await.unwrap();
    (client, server)
}

/// Reads one response with a Content-Length body: (status line, body).
async fn read_response(
    c: &mut tokio_rustls::client::TlsStream<TcpStream>,
    buf: &mut Vec<u8>,
) -> (String, Vec<u8>) {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8(buf[..end].to_vec()).unwrap();
            let len: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(|v| v.trim().parse().unwrap())
                })
                .expect("content-length");
            while buf.len() < end + 4 + len {
                let mut chunk = vec![0; 65536];
                let n = c.read(&mut chunk).await.unwrap();
                assert!(n > 0, "connection ended inside a body");
                buf.extend_from_slice(&chunk[..n]);
            }
            let body = buf[end + 4..end + 4 + len].to_vec();
            buf.drain(..end + 4 + len);
            return (head.lines().next().unwrap().to_string(), body);
        }
        let mut chunk = vec![0; 65536];
        let n = c.read(&mut chunk).await.unwrap();
        assert!(n > 0, "connection ended before a response");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// An echo: the body back, or for GET /big?n=N, N bytes.
async fn echo(parts: http::request::Parts, body: Bytes) -> Response<Body> {
    if let Some(n) = parts.uri.query().and_then(|q| q.strip_prefix("n=")) {
        let n: usize = n.parse().unwrap();
        let data: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
        return full(StatusCode::OK, data);
    }
    full(StatusCode::OK, body)
}

#[tokio::test]
async fn kept_alive_requests_with_bodies_over_many_records() {
    let pki = pki();
    let (mut c, server) = serve_one(&pki, echo).await;
    let mut buf = Vec::new();
    // 4 MiB out (256 records of 16 KiB, more reads than tokio's cooperative budget allows
    // in one poll), the same back; then a 1 MiB response.
    let body: Vec<u8> = (0..4 << 20).map(|i| (i * 7 % 256) as u8).collect();
    let head = format!(
        "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    // tokio-rustls may hold the last sealed records of a write until it is flushed (its
    // write returns once rustls took the plaintext): without the flushes the server
    // waits for the rest of the body and the client for the answer.
    c.write_all(head.as_bytes()).await.unwrap();
    c.flush().await.unwrap();
    c.write_all(&body).await.unwrap();
    c.flush().await.unwrap();
    let (status, got) = read_response(&mut c, &mut buf).await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(got == body, "echoed body differs");
    c.write_all(b"GET /big?n=1048576 HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    c.flush().await.unwrap();
    let (status, got) = read_response(&mut c, &mut buf).await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(got.len(), 1 << 20);
    assert!(got.iter().enumerate().all(|(i, b)| *b == (i % 251) as u8));
    // Pipelined: two requests in one write, answered in order.
    c.write_all(b"POST /a HTTP/1.1\r\nContent-Length: 3\r\n\r\noneGET /big?n=5 HTTP/1.1\r\n\r\n")
        .await
        .unwrap();
    c.flush().await.unwrap();
    assert_eq!(read_response(&mut c, &mut buf).await.1, b"one");
    assert_eq!(read_response(&mut c, &mut buf).await.1, vec![0, 1, 2, 3, 4]);
    // The client closes (close_notify): the server ends cleanly and answers with its own.
    c.shutdown().await.unwrap();
    server.await.unwrap().unwrap();
    let mut rest = Vec::new();
    c.read_to_end(&mut rest)
        .await
        .expect("the server's close_notify, not a truncated stream");
    assert!(rest.is_empty());
}

#[tokio::test]
async fn a_streamed_response_ends_when_the_client_goes() {
    let pki = pki();
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(4);
    let rx = Arc::new(std::sync::Mutex::new(Some(rx)));
    let (mut c, server) = serve_one(&pki, move |_, _| {
        let rx = rx.lock().unwrap().take().unwrap();
        async move {
            let s = futures::stream::unfold(rx, |mut rx| async move {
                rx.recv().await.map(|b| (Ok(http_body::Frame::data(b)), rx))
            });
            Response::new(StreamBody::new(s).boxed_unsync())
        }
    })
    .await;
    c.write_all(b"GET /watch HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    c.flush().await.unwrap();
    tx.send(Bytes::from_static(b"{\"type\":\"ADDED\"}\n"))
        .await
        .unwrap();
    let mut got = Vec::new();
    while !got.windows(17).any(|w| w == b"{\"type\":\"ADDED\"}\n") {
        let mut chunk = [0; 4096];
        let n = c.read(&mut chunk).await.unwrap();
        assert!(n > 0);
        got.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(text.contains("transfer-encoding: chunked\r\n"), "{text}");
    // The client goes away while the body has nothing to send: the connection ends, and the
    // body (the sender's other end) is dropped.
    drop(c);
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), tx.closed())
        .await
        .unwrap();
}

#[tokio::test]
async fn the_http2_preface_over_tls_is_a_bad_request() {
    let pki = pki();
    let (mut c, server) = serve_one(&pki, echo).await;
    c.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .unwrap();
    c.flush().await.unwrap();
    let mut got = Vec::new();
    c.read_to_end(&mut got).await.unwrap();
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{text}");
    server.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_large_body_on_a_plain_socket() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (sock, _) = listener.accept().await.unwrap();
        let too_large = || full(StatusCode::PAYLOAD_TOO_LARGE, "big");
        serve_connection(sock, echo, too_large, &limits()).await
    });
    let mut c = TcpStream::connect(addr).await.unwrap();
    let body: Vec<u8> = (0..6 << 20).map(|i| (i * 13 % 256) as u8).collect();
    let head = format!(
        "POST /echo HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let (r, w) = c.split();
    let send = async move {
        let mut w = w;
        w.write_all(head.as_bytes()).await.unwrap();
        w.write_all(&body).await.unwrap();
        body
    };
    let receive = async move {
        let mut r = r;
        let mut got = Vec::new();
        let mut chunk = vec![0; 65536];
        loop {
            let n = r.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the connection ended early");
            got.extend_from_slice(&chunk[..n]);
            if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n")
                && got.len() >= end + 4 + (6 << 20)
            {
                return got.split_off(end + 4);
            }
        }
    };
    let (sent, got) = tokio::time::timeout(Duration::from_secs(30), async {
        tokio::join!(send, receive)
    })
    .await
    .expect("the body was read and answered in time");
    assert!(got == sent, "echoed body differs");
    drop(c);
    assert!(server.await.unwrap().unwrap().is_none());
}
