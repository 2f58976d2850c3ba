//! One gRPC endpoint: an HTTP/2 connection driven by the `h2` crate directly.
//!
//! Where it sits: under [`crate::Channel`], which picks an endpoint per call and hands it the
//! request head (`Endpoint::start`), then the body (`finish`); an endpoint is also a
//! `tower::Service` of its own (the health watch of [`crate::balance`] runs on it). The
//! generated tonic clients accept any `tower::Service<http::Request<tonic::body::Body>>`. tonic's own
//! `transport::Channel` puts a `tower::buffer` worker task and hyper's client dispatcher task
//! between the caller and the HTTP/2 connection, so every unary call pays two extra task
//! hand-offs (and, on a busy two-core machine, the thread wake-ups that go with them). Here
//! the caller's task opens the HTTP/2 stream itself; only the connection driver runs in its
//! own task.
//!
//! Semantics kept: lazy connect on first use, reconnect after the connection dies (a request
//! that could not be started on a dead connection is retried once on a fresh one — nothing
//! was sent, so this is safe for every method), request-side flow control honoured for large
//! messages, response-side capacity released as data is consumed, trailers (`grpc-status`)
//! passed through to tonic.
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http::uri::{Authority, Scheme};
use http_body::{Body as HttpBody, Frame};
use tonic::body::Body as TonicBody;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Connection window and per-stream window: large enough that a multi-megabyte list or write
/// does not stall on WINDOW_UPDATE round trips.
const STREAM_WINDOW: u32 = 4 << 20;
const CONN_WINDOW: u32 = 16 << 20;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// HTTP/2 keep-alive of the client side, as the servers' (see `serve_raw`): a PING every
/// 30 s; a connection that does not answer one within 20 s is dropped, so calls stop going
/// to a peer that vanished without closing (a host gone, a partition) and the next call
/// reconnects — without it such a connection is only noticed when TCP gives up, minutes
/// later.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(30);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);

/// A cloneable gRPC channel to one `http://host:port` endpoint (`https://` with mutual TLS,
/// see [`crate::mtls`]).
#[derive(Clone)]
pub struct Endpoint {
    shared: Arc<Shared>,
}

struct Shared {
    scheme: Scheme,
    /// `host:port` of the URL: the request's `:authority`, and what is dialled unless
    /// `address` is set.
    authority: Authority,
    /// The address a name resolved to (an endpoint of a `dns:///` target): dialled instead
    /// of `authority`, whose host stays the TLS server name.
    address: Option<std::net::SocketAddr>,
    /// With mutual TLS: the connector and the name the server's certificate must hold.
    tls: Option<(
        tokio_rustls::TlsConnector,
        rustls::pki_types::ServerName<'static>,
    )>,
    /// The live connection's request handle; `None` before the first call or after it died.
    sender: Mutex<Option<h2::client::SendRequest<Bytes>>>,
    /// Serialises (re)connects so a burst of callers opens one connection, not many.
    connecting: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.shared.address {
            None => write!(f, "Endpoint({})", self.shared.authority),
            Some(a) => write!(f, "Endpoint({} at {a})", self.shared.authority),
        }
    }
}

/// A call whose HTTP/2 stream is open (its head sent); the body and the response follow in
/// [`finish`].
pub(crate) struct Started {
    resp: h2::client::ResponseFuture,
    stream: h2::SendStream<Bytes>,
    /// Counts the call as in flight on its endpoint until the response body is gone.
    pub(crate) load: Option<tower::load::pending_requests::Handle>,
}

impl Endpoint {
    /// A channel to `url` (`http://host:port`); connects on first use.
    pub fn lazy(url: &str) -> Result<Endpoint, BoxError> {
        Self::new(url, None)
    }

    /// A channel to `url`; `https://host:port` with `tls` (mutual TLS, see
    /// [`crate::mtls`]), `http://host:port` without. Connects on first use.
    pub fn new(url: &str, tls: Option<&crate::mtls::Mtls>) -> Result<Endpoint, BoxError> {
        let uri: http::Uri = url.parse()?;
        let scheme = uri.scheme().cloned().unwrap_or(Scheme::HTTP);
        let authority = uri
            .authority()
            .cloned()
            .ok_or_else(|| format!("no host:port in {url:?}"))?;
        let tls = match (scheme.as_str(), tls) {
            ("http", None) => None,
            ("https", Some(t)) => {
                let host = authority
                    .host()
                    .trim_start_matches('[')
                    .trim_end_matches(']');
                let name = rustls::pki_types::ServerName::try_from(host.to_string())
                    .map_err(|e| format!("{url:?}: {e}"))?;
                Some((t.connector(), name))
            }
            ("https", None) => {
                return Err(format!(
                    "{url:?}: https:// needs mutual TLS (--grpc-tls-ca-file, --grpc-tls-cert-file, --grpc-tls-key-file)"
                )
                .into());
            }
            ("http", Some(_)) => {
                return Err(format!(
                    "{url:?}: mutual TLS is configured, so the endpoint must be https://"
                )
                .into());
            }
            _ => {
                return Err(
                    format!("unsupported scheme in {url:?}: use http:// or https://").into(),
                );
            }
        };
        Ok(Endpoint {
            shared: Arc::new(Shared {
                scheme,
                authority,
                address: None,
                tls,
                sender: Mutex::new(None),
                connecting: tokio::sync::Mutex::new(()),
            }),
        })
    }

    /// This endpoint's URL and TLS settings (the server's certificate must still hold the
    /// URL's host) on `address`, one of the addresses the host resolved to; a connection
    /// of its own.
    pub(crate) fn at(&self, address: std::net::SocketAddr) -> Endpoint {
        Endpoint {
            shared: Arc::new(Shared {
                scheme: self.shared.scheme.clone(),
                authority: self.shared.authority.clone(),
                address: Some(address),
                tls: self.shared.tls.clone(),
                sender: Mutex::new(None),
                connecting: tokio::sync::Mutex::new(()),
            }),
        }
    }

    /// What this endpoint dials: the resolved address, else the URL's `host:port`.
    pub fn address(&self) -> String {
        match self.shared.address {
            Some(a) => a.to_string(),
            None => self.shared.authority.to_string(),
        }
    }

    fn cached(&self) -> Option<h2::client::SendRequest<Bytes>> {
        self.shared.sender.lock().ok()?.clone()
    }

    fn forget(&self) {
        if let Ok(mut g) = self.shared.sender.lock() {
            *g = None;
        }
    }

    /// The current connection's handle, connecting if there is none.
    async fn sender(&self) -> Result<h2::client::SendRequest<Bytes>, BoxError> {
        if let Some(s) = self.cached() {
            return Ok(s);
        }
        let _guard = self.shared.connecting.lock().await;
        if let Some(s) = self.cached() {
            return Ok(s);
        }
        let addr = self.address();
        let tcp = tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(&addr))
            .await
            .map_err(|_| format!("connect to {addr}: timed out"))??;
        tcp.set_nodelay(true)?;
        let send = match &self.shared.tls {
            None => self.handshake(tcp, addr).await?,
            Some((connector, name)) => {
                let tls =
                    tokio::time::timeout(CONNECT_TIMEOUT, connector.connect(name.clone(), tcp))
                        .await
                        .map_err(|_| format!("TLS handshake with {addr}: timed out"))?
                        .map_err(|e| format!("TLS handshake with {addr}: {e}"))?;
                self.handshake(tls, addr).await?
            }
        };
        if let Ok(mut g) = self.shared.sender.lock() {
            *g = Some(send.clone());
        }
        Ok(send)
    }

    /// The HTTP/2 handshake over `io`; the connection is driven by a task of its own until it
    /// ends or stops answering keep-alive PINGs.
    async fn handshake<T>(
        &self,
        io: T,
        addr: String,
    ) -> Result<h2::client::SendRequest<Bytes>, BoxError>
    where
        T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (send, mut conn) = h2::client::Builder::new()
            .initial_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONN_WINDOW)
            .max_frame_size(1 << 20)
            .handshake::<_, Bytes>(io)
            .await?;
        let ping_pong = conn.ping_pong();
        let shared = self.shared.clone();
        tokio::spawn(async move {
            tokio::select! {
                r = &mut conn => {
                    if let Err(e) = r {
                        tracing::debug!(error = %e, "gRPC client connection ended");
                    }
                }
                () = keep_alive(ping_pong, KEEPALIVE_INTERVAL, KEEPALIVE_TIMEOUT) => {
                    tracing::warn!(peer = %addr, "gRPC peer did not answer a keep-alive PING; connection dropped");
                }
            }
            // The driver is gone: the next call reconnects.
            if let Ok(mut g) = shared.sender.lock() {
                *g = None;
            }
        });
        Ok(send)
    }

    /// `host:port` of this endpoint.
    pub fn authority(&self) -> &str {
        self.shared.authority.as_str()
    }

    /// Opens the call's HTTP/2 stream and sends (a copy of) its head, connecting first if
    /// needed. When this fails nothing of the call has reached the server, so it may be
    /// tried on another endpoint.
    pub(crate) async fn start(&self, head: &http::Request<()>) -> Result<Started, BoxError> {
        let path = head
            .uri()
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| http::uri::PathAndQuery::from_static("/"));
        let uri = http::Uri::builder()
            .scheme(self.shared.scheme.clone())
            .authority(self.shared.authority.clone())
            .path_and_query(path)
            .build()?;
        // Start the stream; a connection that died under us gets one fresh retry.
        let mut attempt = 0;
        loop {
            let sender = self.sender().await?;
            let started = match sender.ready().await {
                Ok(mut ready) => {
                    let mut h = head.clone();
                    *h.uri_mut() = uri.clone();
                    ready.send_request(h, false)
                }
                Err(e) => Err(e),
            };
            match started {
                Ok((resp, stream)) => {
                    return Ok(Started {
                        resp,
                        stream,
                        load: None,
                    });
                }
                Err(e) if attempt == 0 && !e.is_reset() => {
                    attempt += 1;
                    self.forget();
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// Pings the peer every `interval`; returns when a PING is not answered within `timeout`
/// (never when the connection gives no ping handle).
async fn keep_alive(ping_pong: Option<h2::PingPong>, interval: Duration, timeout: Duration) {
    let Some(mut pp) = ping_pong else {
        return std::future::pending().await;
    };
    loop {
        tokio::time::sleep(interval).await;
        match tokio::time::timeout(timeout, pp.ping(h2::Ping::opaque())).await {
            Ok(Ok(_)) => {}
            // The connection failed (its driver reports that) or the peer is silent.
            Ok(Err(_)) => return std::future::pending().await,
            Err(_) => return,
        }
    }
}

/// Sends the body of a started call and waits for the response head.
pub(crate) async fn finish(
    started: Started,
    body: TonicBody,
) -> Result<http::Response<RecvBody>, BoxError> {
    let Started { resp, stream, load } = started;
    if let Err(SendFailed::Body(e)) = send_body(body, stream).await {
        return Err(e);
    }
    answer(resp, load).await
}

/// [`finish`] with a body already read (a call that may be sent again elsewhere).
pub(crate) async fn finish_bytes(
    started: Started,
    body: Bytes,
) -> Result<http::Response<RecvBody>, BoxError> {
    let Started {
        resp,
        mut stream,
        load,
    } = started;
    // A stream that stopped taking the body is reported by the response future below.
    let _ = send_data(&mut stream, body, true).await;
    answer(resp, load).await
}

/// The response head of a call whose body was sent — or whose stream stopped taking it.
/// In the latter case this is what ended the stream: the server's answer (a server may
/// answer before reading the whole request, e.g. a trailers-only gRPC error), its
/// RST_STREAM, or the connection's failure (so [`connection_failed`] can judge it).
async fn answer(
    resp: h2::client::ResponseFuture,
    load: Option<tower::load::pending_requests::Handle>,
) -> Result<http::Response<RecvBody>, BoxError> {
    let resp = resp.await?;
    Ok(resp.map(|b| RecvBody {
        inner: b,
        data_done: false,
        _load: load,
    }))
}

/// Whether a call that failed with `e` after its stream was opened surely or probably never
/// ran on the server: the connection broke (I/O error), the server refused the stream
/// (REFUSED_STREAM) or is going away (GOAWAY). Only read-only calls are resent on it.
pub(crate) fn connection_failed(e: &BoxError) -> bool {
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(&**e);
    while let Some(err) = src {
        if let Some(h2) = err.downcast_ref::<h2::Error>() {
            return h2.is_io()
                || h2.is_go_away()
                || h2.reason() == Some(h2::Reason::REFUSED_STREAM);
        }
        if err.downcast_ref::<std::io::Error>().is_some() {
            return true;
        }
        src = err.source();
    }
    false
}

/// Why sending a request body stopped early.
enum SendFailed {
    /// The request body itself failed (tonic's encoder): the call ends with that error; the
    /// dropped stream is reset.
    Body(BoxError),
    /// The stream takes no more data: the server answered or reset it, or the connection
    /// died. The response future holds which (see [`answer`]).
    Stream,
}

/// Streams the request body into the HTTP/2 stream, honouring the peer's flow control.
///
/// One frame of look-ahead so the last data frame carries END_STREAM: a separate empty final
/// frame per call would double the frames, and small non-final DATA frames count against the
/// server's framing-overhead budget (h2's `too_many_data_frames` guard).
async fn send_body(
    mut body: TonicBody,
    mut stream: h2::SendStream<Bytes>,
) -> Result<(), SendFailed> {
    use http_body_util::BodyExt;
    let mut pending: Option<Bytes> = None;
    loop {
        let next = match body.frame().await {
            Some(f) => Some(f.map_err(|e| SendFailed::Body(Box::new(e)))?),
            None => None,
        };
        match next {
            Some(frame) => match frame.into_data() {
                Ok(data) => {
                    if let Some(prev) = pending.replace(data) {
                        send_data(&mut stream, prev, false).await?;
                    }
                }
                Err(frame) => {
                    if let Some(prev) = pending.take() {
                        send_data(&mut stream, prev, false).await?;
                    }
                    if let Ok(trailers) = frame.into_trailers() {
                        return stream
                            .send_trailers(trailers)
                            .map_err(|_| SendFailed::Stream);
                    }
                }
            },
            None => {
                return send_data(&mut stream, pending.take().unwrap_or_default(), true).await;
            }
        }
    }
}

/// Sends `data` in chunks the peer has granted capacity for; `end` marks the last chunk.
async fn send_data(
    stream: &mut h2::SendStream<Bytes>,
    mut data: Bytes,
    end: bool,
) -> Result<(), SendFailed> {
    if data.is_empty() {
        if end {
            stream
                .send_data(data, true)
                .map_err(|_| SendFailed::Stream)?;
        }
        return Ok(());
    }
    while !data.is_empty() {
        stream.reserve_capacity(data.len());
        let cap = match std::future::poll_fn(|cx| stream.poll_capacity(cx)).await {
            Some(Ok(cap)) => cap,
            Some(Err(_)) | None => return Err(SendFailed::Stream),
        };
        let chunk = data.split_to(cap.min(data.len()));
        stream
            .send_data(chunk, end && data.is_empty())
            .map_err(|_| SendFailed::Stream)?;
    }
    Ok(())
}

impl tower::Service<http::Request<TonicBody>> for Endpoint {
    type Response = http::Response<RecvBody>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Readiness (connection, stream concurrency) is awaited inside the call.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<TonicBody>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let (parts, body) = req.into_parts();
            let started = this.start(&http::Request::from_parts(parts, ())).await?;
            finish(started, body).await
        })
    }
}

/// A response body: HTTP/2 data frames, then trailers; releases flow-control capacity as
/// data is handed to tonic.
pub struct RecvBody {
    inner: h2::RecvStream,
    data_done: bool,
    _load: Option<tower::load::pending_requests::Handle>,
}

impl HttpBody for RecvBody {
    type Data = Bytes;
    type Error = h2::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, h2::Error>>> {
        let this = &mut *self;
        if !this.data_done {
            match ready!(this.inner.poll_data(cx)) {
                Some(Ok(data)) => {
                    let _ = this.inner.flow_control().release_capacity(data.len());
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => this.data_done = true,
            }
        }
        match ready!(this.inner.poll_trailers(cx)) {
            Ok(Some(t)) => Poll::Ready(Some(Ok(Frame::trailers(t)))),
            Ok(None) => Poll::Ready(None),
            Err(e) => Poll::Ready(Some(Err(e))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client connection to a peer that completes the HTTP/2 handshake and then answers
    /// PINGs (`answer`) or goes silent; returns the client's ping handle.
    async fn peer(answer: bool) -> Option<h2::PingPong> {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            let (s, _) = l.accept().await.unwrap();
            let mut conn = h2::server::handshake(s).await.unwrap();
            if answer {
                while conn.accept().await.is_some() {}
            } else {
                // Holds the connection without ever reading from it again.
                std::future::pending::<()>().await;
            }
        });
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (_send, mut conn) = h2::client::handshake(tcp).await.unwrap();
        let pp = conn.ping_pong();
        tokio::spawn(async move {
            let _send = _send;
            let _ = conn.await;
        });
        pp
    }

    #[tokio::test]
    async fn a_silent_peer_fails_the_keep_alive() {
        let (interval, timeout) = (Duration::from_millis(20), Duration::from_millis(200));
        let silent = keep_alive(peer(false).await, interval, timeout);
        assert!(
            tokio::time::timeout(Duration::from_secs(5), silent)
                .await
                .is_ok(),
            "the keep-alive did not notice a silent peer"
        );
        let alive = keep_alive(peer(true).await, interval, timeout);
        assert!(
            tokio::time::timeout(Duration::from_secs(1), alive)
                .await
                .is_err(),
            "the keep-alive gave up on a peer that answers"
        );
    }

    /// A peer that takes the request head of one call, then either closes the connection or
    /// answers at once (a trailers-only gRPC error) — without reading the body, so the client
    /// is still waiting for flow-control capacity when that happens. Returns its URL.
    async fn impatient_peer(answer: bool) -> String {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            let (s, _) = l.accept().await.unwrap();
            let mut conn = h2::server::handshake(s).await.unwrap();
            let (req, mut respond) = conn.accept().await.unwrap().unwrap();
            if answer {
                // As a gRPC server does: the unread request body is dropped (RST_STREAM
                // NO_ERROR once the answer is out).
                drop(req);
                let head = http::Response::builder()
                    .header("content-type", "application/grpc")
                    .header("grpc-status", "3")
                    .header("grpc-message", "early")
                    .body(())
                    .unwrap();
                respond.send_response(head, true).unwrap();
                drop(respond);
                // Keep driving the connection so the answer goes out.
                let _ = tokio::time::timeout(Duration::from_secs(5), conn.accept()).await;
            }
            // Returning drops the connection: the TCP socket closes under the client.
        });
        format!("http://{addr}")
    }

    fn big_call() -> (http::Request<()>, Bytes) {
        let head = http::Request::builder()
            .method("POST")
            .uri("/crdplane.v1.Storage/Get")
            .header("content-type", "application/grpc")
            .body(())
            .unwrap();
        // Larger than the peer's default 64 KiB stream window.
        (head, Bytes::from(vec![0u8; 1 << 20]))
    }

    #[tokio::test]
    async fn a_connection_that_dies_while_the_body_waits_for_capacity_counts_as_failed() {
        let ep = Endpoint::lazy(&impatient_peer(false).await).unwrap();
        let (head, body) = big_call();
        let started = ep.start(&head).await.unwrap();
        let e = tokio::time::timeout(Duration::from_secs(5), finish_bytes(started, body))
            .await
            .expect("the call ended")
            .err()
            .expect("the connection died");
        assert!(
            connection_failed(&e),
            "not seen as a broken connection: {e}"
        );
    }

    #[tokio::test]
    async fn an_answer_that_comes_before_the_whole_body_is_the_answer() {
        let ep = Endpoint::lazy(&impatient_peer(true).await).unwrap();
        let (head, body) = big_call();
        let started = ep.start(&head).await.unwrap();
        let resp = tokio::time::timeout(Duration::from_secs(5), finish_bytes(started, body))
            .await
            .expect("the call ended")
            .expect("the server's answer");
        assert_eq!(resp.headers()["grpc-status"], "3");
        assert_eq!(resp.headers()["grpc-message"], "early");
    }
}
