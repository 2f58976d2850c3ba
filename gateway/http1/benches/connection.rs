//! What one request costs on a kept-alive connection, client and server together on one
//! thread (so the figure is the CPU of both sides, not a latency): a GET answered with a
//! 1 KiB body, served
//! - `tcp/crdplane-http1`: crdplane-http1 on a plain socket (`--insecure-http`);
//! - `tls/crdplane-http1`: crdplane-http1 over a rustls session (`crdplane_http1::tls`);
//! - `tls/hyper`: hyper's HTTP/1 server over tokio-rustls (how the gateway served HTTP/1.1
//!   over TLS before).
//!
//! Run: `cargo bench -p crdplane-http1 --bench connection`.

use bytes::Bytes;
use crdplane_http1::{Limits, serve_connection};
use criterion::Criterion;
use http::{Response, StatusCode};
use http_body_util::Full;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls;

#[path = "../tests/support/pki.rs"]
mod pki;

const REQUEST: &[u8] = b"GET /apis/stable.example.com/v1/namespaces/default/crontabs/c1 HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: bench\r\nAccept: application/json\r\nAuthorization: Bearer 0123456789abcdef\r\n\r\n";

fn limits() -> &'static Limits {
    Box::leak(Box::new(Limits {
        max_head: 1 << 20,
        max_headers: 128,
        max_body: 3 << 20,
        header_timeout: Duration::from_secs(60),
        idle_timeout: Duration::from_secs(600),
    }))
}

fn answer() -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(vec![b'x'; 1024])));
    *r.status_mut() = StatusCode::OK;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        "application/json".parse().unwrap(),
    );
    r
}

fn too_large() -> Response<Full<Bytes>> {
    answer()
}

#[derive(Clone, Copy)]
enum Server {
    PlainHttp1,
    TlsHttp1,
    TlsHyper,
}

/// Starts a server of `kind` for one connection and returns the connected client.
async fn connect(
    kind: Server,
    server: Arc<rustls::ServerConfig>,
    client: Arc<rustls::ClientConfig>,
) -> Box<dyn Client> {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (sock, _) = listener.accept().await.unwrap();
        sock.set_nodelay(true).unwrap();
        let handler = |_, _| async { answer() };
        match kind {
            Server::PlainHttp1 => {
                let _ = serve_connection(sock, handler, too_large, limits()).await;
            }
            Server::TlsHttp1 => {
                let acceptor = tokio_rustls::TlsAcceptor::from(server);
                let (sock, session) = acceptor.accept(sock).await.unwrap().into_inner();
                let mut conn = crdplane_http1::tls::TlsConnection::new(sock, session)
                    .await
                    .unwrap();
                let _ = serve_connection(&mut conn, handler, too_large, limits()).await;
            }
            Server::TlsHyper => {
                let acceptor = tokio_rustls::TlsAcceptor::from(server);
                let stream = acceptor.accept(sock).await.unwrap();
                let svc =
                    hyper::service::service_fn(|_req| async { Ok::<_, Infallible>(answer()) });
                // As the gateway configured it.
                let _ = hyper::server::conn::http1::Builder::new()
                    .timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(limits().header_timeout)
                    .max_buf_size(limits().max_head)
                    .keep_alive(true)
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                    .await;
            }
        }
    });
    let tcp = TcpStream::connect(addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    match kind {
        Server::PlainHttp1 => Box::new(tcp),
        _ => {
            let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
            let c = tokio_rustls::TlsConnector::from(client)
                .connect(name, tcp)
                .await
                .unwrap();
            Box::new(c)
        }
    }
}

trait Client: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Client for T {}

/// Sends one request and reads its whole response (its length is known: head + 1 KiB).
async fn round_trip(c: &mut Box<dyn Client>, buf: &mut Vec<u8>) {
    c.write_all(REQUEST).await.unwrap();
    // tokio-rustls may hold sealed records until flushed.
    c.flush().await.unwrap();
    buf.clear();
    loop {
        let mut chunk = [0u8; 8192];
        let n = c.read(&mut chunk).await.unwrap();
        assert!(n > 0);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n")
            && buf.len() >= end + 4 + 1024
        {
            return;
        }
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (server, client) = pki::configs(&[b"http/1.1"]);
    let mut g = c.benchmark_group("get 1 KiB, kept alive");
    for (name, kind) in [
        ("tcp/crdplane-http1", Server::PlainHttp1),
        ("tls/crdplane-http1", Server::TlsHttp1),
        ("tls/hyper", Server::TlsHyper),
    ] {
        let mut conn = rt.block_on(connect(kind, server.clone(), client.clone()));
        let mut buf = Vec::new();
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let t = Instant::now();
                    for _ in 0..iters {
                        round_trip(&mut conn, &mut buf).await;
                    }
                    t.elapsed()
                })
            })
        });
    }
    g.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();
}
