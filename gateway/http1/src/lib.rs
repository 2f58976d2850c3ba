//! crdplane-http1: the lean HTTP/1.1 server connection layer of the crdplane gateway. It knows
//! HTTP/1.1 and nothing of Kubernetes: the gateway's accept loop (`crdplane_gateway::server`)
//! hands it each accepted connection (a TCP socket, or a TLS session over one whose ALPN chose
//! HTTP/1.1, [`tls`]), and it calls the gateway's one edge service with each request (head and
//! whole body) and writes the response back.
//!
//! Request heads are parsed with `httparse`; bodies are read whole (Content-Length or chunked,
//! bounded by `Limits::max_body`); responses go out with Content-Length when their size is
//! known and with the chunked transfer coding otherwise (watch streams; to an HTTP/1.0 client
//! such a body goes as is and the connection closes at its end); connections are kept
//! alive and pipelined requests are answered in order (RFC 9112). A connection that opens with
//! the HTTP/2 preface (prior knowledge, as the load tool's `--http2-streams` and gRPC-style
//! clients send it) is handed back to the caller, who serves it with hyper's HTTP/2 server.
//! The framing rules follow Go's `net/http` server (`server.go`, `transfer.go`), which is what
//! kube-apiserver's clients are used to.
//!
//! Why not hyper's HTTP/1 server: it keeps an 8 KiB read buffer and an 8 KiB header write
//! buffer for the whole life of every connection. Go clients (kubectl, client-go informers)
//! speak HTTP/1.1 to a plain-HTTP server and open one connection per watch, so most
//! connections of a watch-heavy gateway are idle watches, and 16 KiB each is the whole
//! per-watcher budget. Here a connection owns no buffer while it waits: idleness is awaited
//! with the socket's readiness ([`Connection`]), bytes are read only once they have arrived,
//! and the read buffer is released as soon as it is empty. While a response streams, the
//! socket is watched the same way, so a client that goes away ends its watch at once.
//!
//! What a request costs here against hyper's server, client and server on one thread, is
//! measured by `cargo bench -p crdplane-http1 --bench connection`.
//!
//! The head parser and the chunked decoder are fuzzed (`fuzz/`, targets `http1_head` and
//! `http1_chunked`).

use bytes::{Buf, Bytes, BytesMut};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Response, StatusCode, Version, header};
use http_body_util::{BodyExt, Full};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

pub mod tls;

/// The client connection preface of HTTP/2 (RFC 9113 §3.4).
pub const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Bytes of an oversized body read past the limit before the 413 goes out (Go's
/// `net/http` `maxPostHandlerReadBytes`).
pub const DRAIN_AFTER_LIMIT: usize = 256 << 10;

/// Most header fields a request head may carry, whatever `Limits::max_headers` says.
pub const MAX_HEADERS: usize = 128;

/// Bounds on what a client may send.
#[derive(Clone, Copy)]
pub struct Limits {
    /// Request line plus headers (Go's `http.DefaultMaxHeaderBytes` is 1 MiB).
    pub max_head: usize,
    /// Number of header fields (at most [`MAX_HEADERS`]).
    pub max_headers: usize,
    /// Request body; beyond it the client gets the `too_large` response of
    /// [`serve_connection`] and the connection is closed.
    pub max_body: usize,
    /// Time a request head may take to arrive, counted from the connection's start or, on a
    /// kept-alive connection, from the first byte of the head; then the connection is closed
    /// without an answer (Go `http.Server.ReadHeaderTimeout`; kube-apiserver: 32 s).
    pub header_timeout: std::time::Duration,
    /// Time a kept-alive connection may wait for its next request (Go
    /// `http.Server.IdleTimeout`; kube-apiserver: 90 s).
    pub idle_timeout: std::time::Duration,
}

/// How the request's body is framed (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body (no Content-Length, or Content-Length 0).
    Empty,
    /// A body of exactly this many bytes (Content-Length).
    Length(usize),
    /// `Transfer-Encoding: chunked`: the body ends with the zero-size chunk.
    Chunked,
}

/// A parsed request head.
#[derive(Debug)]
pub struct Head {
    /// Method, URI, version and headers of the request.
    pub parts: http::request::Parts,
    /// Bytes the head took in the buffer.
    pub len: usize,
    /// How the body that follows is framed.
    pub framing: Framing,
    /// Whether the connection stays open after this exchange.
    pub keep_alive: bool,
    /// `Expect: 100-continue`.
    pub expect_continue: bool,
}

/// Why a head could not be accepted: answered with the status, then the connection closes.
#[derive(Debug, PartialEq, Eq)]
pub enum HeadError {
    /// 400: malformed request line, header, framing.
    Bad(&'static str),
    /// 431: more header bytes or fields than allowed.
    TooLarge,
    /// 501 `Unsupported transfer encoding`: a Transfer-Encoding other than exactly one field
    /// `chunked` (Go net/http transfer.go `parseTransferEncoding`, `unsupportedTEError`).
    UnsupportedTransferEncoding,
}

/// Parses a request head from the start of `buf`: `Ok(None)` when more bytes are needed.
pub fn parse_head(buf: &[u8], limits: &Limits) -> Result<Option<Head>, HeadError> {
    let mut fields =
        [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut []);
    let n = limits.max_headers.min(MAX_HEADERS);
    let len = match req.parse_with_uninit_headers(buf, &mut fields[..n]) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            return if buf.len() > limits.max_head {
                Err(HeadError::TooLarge)
            } else {
                Ok(None)
            };
        }
        Err(httparse::Error::TooManyHeaders) => return Err(HeadError::TooLarge),
        Err(_) => return Err(HeadError::Bad("malformed request head")),
    };
    if len > limits.max_head {
        return Err(HeadError::TooLarge);
    }
    let version = match req.version {
        Some(0) => Version::HTTP_10,
        _ => Version::HTTP_11,
    };
    let method = Method::from_bytes(req.method.unwrap_or("").as_bytes())
        .map_err(|_| HeadError::Bad("invalid method"))?;
    let uri: http::Uri = req
        .path
        .unwrap_or("")
        .parse()
        .map_err(|_| HeadError::Bad("invalid request target"))?;
    let mut headers = HeaderMap::with_capacity(req.headers.len());
    let mut length: Option<usize> = None;
    // Transfer-Encoding fields seen, and whether the (single) one is exactly `chunked`.
    let mut te_fields = 0usize;
    let mut chunked = false;
    let mut close = false;
    let mut keep_alive_token = false;
    let mut expect_continue = false;
    for f in req.headers.iter() {
        let name =
            HeaderName::from_bytes(f.name.as_bytes()).map_err(|_| HeadError::Bad("header"))?;
        let value = HeaderValue::from_bytes(f.value).map_err(|_| HeadError::Bad("header"))?;
        if name == header::CONTENT_LENGTH {
            let n = std::str::from_utf8(f.value)
                .ok()
                .map(str::trim)
                .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|s| s.parse::<usize>().ok())
                .ok_or(HeadError::Bad("invalid content-length"))?;
            if length.is_some_and(|m| m != n) {
                return Err(HeadError::Bad("conflicting content-length"));
            }
            length = Some(n);
        } else if name == header::TRANSFER_ENCODING {
            te_fields += 1;
            // Go compares the whole (trimmed) field value: `gzip, chunked` and
            // `chunked, chunked` are unsupported, like two fields.
            chunked = value
                .as_bytes()
                .trim_ascii()
                .eq_ignore_ascii_case(b"chunked");
        } else if name == header::CONNECTION {
            for token in value.to_str().unwrap_or("").split(',') {
                let t = token.trim();
                close |= t.eq_ignore_ascii_case("close");
                keep_alive_token |= t.eq_ignore_ascii_case("keep-alive");
            }
        } else if name == header::EXPECT {
            expect_continue = value.as_bytes().eq_ignore_ascii_case(b"100-continue");
        }
        headers.append(name, value);
    }
    // Go net/http transfer.go (`parseTransferEncoding`, `fixLength`): Transfer-Encoding is
    // ignored on HTTP/1.0; on HTTP/1.1 only one field of exactly `chunked` is supported (else
    // 501), and then it frames the body and any Content-Length is dropped. Content-Length
    // fields that differ are a 400 (above); equal duplicates are one.
    let framing = if te_fields > 0 && version != Version::HTTP_10 {
        if te_fields > 1 || !chunked {
            return Err(HeadError::UnsupportedTransferEncoding);
        }
        headers.remove(header::CONTENT_LENGTH);
        Framing::Chunked
    } else {
        match length {
            Some(0) | None => Framing::Empty,
            Some(n) => Framing::Length(n),
        }
    };
    let keep_alive = if version == Version::HTTP_10 {
        keep_alive_token && !close
    } else {
        !close
    };
    let mut r = http::Request::new(());
    *r.method_mut() = method;
    *r.uri_mut() = uri;
    *r.version_mut() = version;
    *r.headers_mut() = headers;
    Ok(Some(Head {
        parts: r.into_parts().0,
        len,
        framing,
        keep_alive,
        expect_continue: expect_continue && version == Version::HTTP_11,
    }))
}

/// Incremental decoder of the chunked transfer coding (RFC 9112 §7.1), consuming from the
/// connection's buffer as bytes arrive.
#[derive(Debug, Default)]
pub struct ChunkedDecoder {
    state: ChunkState,
    out: BytesMut,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum ChunkState {
    #[default]
    Size,
    Data(usize),
    DataEnd,
    Trailers,
    Done,
}

/// Longest chunk-size line (with extensions) or trailer line accepted.
const MAX_CHUNK_LINE: usize = 4096;

/// Why a chunked body was rejected (the connection is answered and closed).
#[derive(Debug, PartialEq, Eq)]
pub enum ChunkError {
    /// 400: a malformed chunk-size line, chunk terminator or trailer.
    Bad,
    /// The body grows past the size limit (answered with the caller's `too_large` response).
    TooLarge,
}

impl ChunkedDecoder {
    /// Consumes what it can of `buf`; `Ok(Some(body))` once the last chunk and the trailers
    /// are in, `Ok(None)` when more bytes are needed.
    pub fn decode(&mut self, buf: &mut BytesMut, max: usize) -> Result<Option<Bytes>, ChunkError> {
        loop {
            match self.state {
                ChunkState::Size => {
                    let Some(line) = take_line(buf)? else {
                        return Ok(None);
                    };
                    let size = line.split(|b| *b == b';').next().unwrap_or(&[]);
                    let size = std::str::from_utf8(size)
                        .ok()
                        .map(str::trim)
                        .filter(|s| !s.is_empty() && s.len() <= 16)
                        .and_then(|s| usize::from_str_radix(s, 16).ok())
                        .ok_or(ChunkError::Bad)?;
                    if self.out.len().saturating_add(size) > max {
                        return Err(ChunkError::TooLarge);
                    }
                    self.state = if size == 0 {
                        ChunkState::Trailers
                    } else {
                        ChunkState::Data(size)
                    };
                }
                ChunkState::Data(left) => {
                    if buf.is_empty() {
                        return Ok(None);
                    }
                    let n = left.min(buf.len());
                    self.out.extend_from_slice(&buf[..n]);
                    buf.advance(n);
                    self.state = if n == left {
                        ChunkState::DataEnd
                    } else {
                        ChunkState::Data(left - n)
                    };
                }
                ChunkState::DataEnd => {
                    let Some(line) = take_line(buf)? else {
                        return Ok(None);
                    };
                    if !line.is_empty() {
                        return Err(ChunkError::Bad);
                    }
                    self.state = ChunkState::Size;
                }
                ChunkState::Trailers => {
                    let Some(line) = take_line(buf)? else {
                        return Ok(None);
                    };
                    // Trailer fields are read and dropped, as kube-apiserver ignores them.
                    if line.is_empty() {
                        self.state = ChunkState::Done;
                    }
                }
                ChunkState::Done => return Ok(Some(std::mem::take(&mut self.out).freeze())),
            }
        }
    }
}

/// Takes one CRLF-terminated line off the front of `buf` (without the CRLF).
fn take_line(buf: &mut BytesMut) -> Result<Option<Bytes>, ChunkError> {
    match buf.windows(2).position(|w| w == b"\r\n") {
        Some(i) if i <= MAX_CHUNK_LINE => {
            let line = buf.split_to(i).freeze();
            buf.advance(2);
            Ok(Some(line))
        }
        Some(_) => Err(ChunkError::Bad),
        None if buf.len() > MAX_CHUNK_LINE + 1 => Err(ChunkError::Bad),
        None => Ok(None),
    }
}

/// What `serve_connection` hands back when the client speaks HTTP/2: the connection and the
/// bytes already read from it, to be replayed first (see [`Rewind`]).
pub struct Handoff<C = TcpStream> {
    /// The client's connection.
    pub sock: C,
    /// Bytes already read from it (the HTTP/2 preface and what followed).
    pub read: Bytes,
}

/// A client connection crdplane-http1 serves: a plain TCP socket, or a TLS session over one
/// ([`tls::TlsConnection`]). Reads are readiness-based so that an idle connection owns no
/// read buffer: [`Connection::wait_readable`] waits without one, then
/// [`Connection::poll_read_available`] takes what has arrived (`Ok(0)` at the end of the
/// stream).
pub trait Connection: Send {
    /// Whether a connection that opens with the HTTP/2 preface is handed back to be served
    /// HTTP/2 (prior knowledge, cleartext). Over TLS, ALPN has chosen HTTP/1.1 already, and
    /// such a preface is a bad request.
    const PRIOR_KNOWLEDGE_H2: bool;
    /// Waits until the connection has something to read, holding no buffer.
    fn wait_readable(&mut self) -> impl Future<Output = io::Result<()>> + Send;
    /// Appends what has arrived to `buf`; `Pending` (the task to be woken) when nothing has.
    ///
    /// A poll with the task's own context, not a `try_read`: tokio's read takes a short read
    /// for proof that the socket is drained and forgets its readiness, so the next wait goes
    /// straight to epoll, where `try_read` keeps the readiness until a read fails with
    /// `EAGAIN` (one more `recvfrom` per request on a kept-alive connection); and tokio's
    /// cooperative budget, when spent, answers `Pending` and wakes the task it was given.
    fn poll_read_available(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut BytesMut,
    ) -> Poll<io::Result<usize>>;
    /// Writes all of `data`.
    fn send_all(&mut self, data: &[u8]) -> impl Future<Output = io::Result<()>> + Send;
}

/// A connection lent for a while: the caller keeps it, to close it its own way after
/// [`serve_connection`] ends (a TLS session sends close_notify).
impl<T: Connection> Connection for &mut T {
    const PRIOR_KNOWLEDGE_H2: bool = T::PRIOR_KNOWLEDGE_H2;
    fn wait_readable(&mut self) -> impl Future<Output = io::Result<()>> + Send {
        T::wait_readable(self)
    }
    fn poll_read_available(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut BytesMut,
    ) -> Poll<io::Result<usize>> {
        T::poll_read_available(self, cx, buf)
    }
    fn send_all(&mut self, data: &[u8]) -> impl Future<Output = io::Result<()>> + Send {
        T::send_all(self, data)
    }
}

impl Connection for TcpStream {
    const PRIOR_KNOWLEDGE_H2: bool = true;
    fn wait_readable(&mut self) -> impl Future<Output = io::Result<()>> + Send {
        TcpStream::readable(self)
    }
    fn poll_read_available(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut BytesMut,
    ) -> Poll<io::Result<usize>> {
        tokio_util::io::poll_read_buf(Pin::new(self), cx, buf)
    }
    async fn send_all(&mut self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            self.writable().await?;
            match self.try_write(data) {
                Ok(n) => data = &data[n..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Serves HTTP/1.1 on `sock` until the client or an error ends the connection. Returns the
/// connection instead when it opens with the HTTP/2 preface.
///
/// `handler` answers each request (its head and its whole body); `too_large` is the answer to
/// a body over `limits.max_body`, after which the connection closes. Response bodies are
/// any `http_body::Body` of `Bytes`; a body error ends the connection.
///
/// Timers run only while a head is awaited (`header_timeout`, `idle_timeout`): a request
/// being handled or a watch streaming its events holds none.
pub async fn serve_connection<C, H, F, B>(
    sock: C,
    handler: H,
    too_large: fn() -> Response<B>,
    limits: &Limits,
) -> io::Result<Option<Handoff<C>>>
where
    C: Connection,
    H: FnMut(http::request::Parts, Bytes) -> F,
    F: Future<Output = Response<B>>,
    B: http_body::Body<Data = Bytes> + Unpin,
{
    serve_connection_until(sock, handler, too_large, limits, std::future::pending()).await
}

/// [`serve_connection`] for a server that stops gracefully when `closing` resolves, as Go's
/// `http.Server.Shutdown` does: a connection waiting for its next request closes at once;
/// a request in flight is answered with `Connection: close`, and then the connection
/// closes. A head that has begun to arrive is read and answered.
pub async fn serve_connection_until<C, H, F, B, G>(
    mut sock: C,
    mut handler: H,
    too_large: fn() -> Response<B>,
    limits: &Limits,
    closing: G,
) -> io::Result<Option<Handoff<C>>>
where
    C: Connection,
    H: FnMut(http::request::Parts, Bytes) -> F,
    F: Future<Output = Response<B>>,
    B: http_body::Body<Data = Bytes> + Unpin,
    G: Future<Output = ()>,
{
    // Every response is written by a boxed `write_response`: the connection's future keeps
    // room for its largest state for its whole life (an idle watch lives for hours), and
    // the write's state (the response head, the body, the socket write in progress) would
    // make that about 1 KB larger than the rest of it.
    let mut closing = std::pin::pin!(closing);
    // Whether `closing` has resolved (it is not polled again once it has).
    let mut closed = false;
    let mut buf = BytesMut::new();
    let mut first = C::PRIOR_KNOWLEDGE_H2;
    // The first head is timed from the connection's start.
    let mut head_deadline = Some(tokio::time::Instant::now() + limits.header_timeout);
    loop {
        let deadline = match head_deadline.take() {
            Some(d) => d,
            None => {
                // Kept alive: wait for the next request's first byte, then time its head.
                if buf.is_empty() {
                    tokio::select! {
                        r = tokio::time::timeout(limits.idle_timeout, sock.wait_readable()) => {
                            match r {
                                Err(_) => return Ok(None),
                                Ok(r) => r?,
                            }
                        }
                        _ = closing.as_mut(), if !closed => return Ok(None),
                    }
                }
                tokio::time::Instant::now() + limits.header_timeout
            }
        };
        // The request head. A head can only end at a line feed, so it is parsed again only
        // when one has arrived since the last attempt: a client that trickles its head a byte
        // at a time costs one parse per line (at most `max_headers` + 1), not one per byte.
        let mut parsed_upto = 0;
        let head = loop {
            if first && !buf.is_empty() {
                let n = buf.len().min(H2_PREFACE.len());
                if buf[..n] == H2_PREFACE[..n] {
                    if n == H2_PREFACE.len() {
                        return Ok(Some(Handoff {
                            sock,
                            read: buf.freeze(),
                        }));
                    }
                } else {
                    first = false;
                }
            }
            let new_line = buf[parsed_upto.min(buf.len())..].contains(&b'\n');
            if !first && !buf.is_empty() && (new_line || buf.len() > limits.max_head) {
                parsed_upto = buf.len();
                match parse_head(&buf, limits) {
                    Ok(Some(h)) => break h,
                    Ok(None) => {}
                    Err(e) => {
                        let (code, text) = match e {
                            HeadError::Bad(_) => (StatusCode::BAD_REQUEST, "400 Bad Request"),
                            HeadError::TooLarge => (
                                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                                "431 Request Header Fields Too Large",
                            ),
                            // server.go answers an unsupportedTEError without echoing it.
                            HeadError::UnsupportedTransferEncoding => {
                                (StatusCode::NOT_IMPLEMENTED, "Unsupported transfer encoding")
                            }
                        };
                        let r = plain_response(code, text);
                        let _ = Box::pin(write_response(
                            &mut sock,
                            r,
                            false,
                            false,
                            Http::V11,
                            &mut buf,
                            0,
                        ))
                        .await;
                        return Ok(None);
                    }
                }
            }
            match tokio::time::timeout_at(deadline, read_more(&mut sock, &mut buf)).await {
                // The head did not arrive in time: close without an answer, as Go does.
                Err(_) => return Ok(None),
                Ok(r) => {
                    if r? == 0 {
                        return Ok(None);
                    }
                }
            }
        };
        buf.advance(head.len);
        let is_head = head.parts.method == Method::HEAD;
        let http10 = head.parts.version == Version::HTTP_10;
        let mut keep_alive = head.keep_alive;

        // The body.
        let body = match head.framing {
            Framing::Empty => Bytes::new(),
            Framing::Length(n) if n > limits.max_body => {
                // As kube-apiserver on Go's server: the handler reads the body up to the limit
                // before answering 413, and the server drains up to 256 KiB more
                // (`maxPostHandlerReadBytes`). A client still writing its body then reads
                // the answer instead of failing with a broken pipe. Discarded as it arrives.
                if !head.expect_continue {
                    let mut left = n.min(limits.max_body.saturating_add(DRAIN_AFTER_LIMIT));
                    loop {
                        let take = left.min(buf.len());
                        buf.advance(take);
                        left -= take;
                        if left == 0 {
                            break;
                        }
                        match tokio::time::timeout(
                            limits.idle_timeout,
                            read_more(&mut sock, &mut buf),
                        )
                        .await
                        {
                            Ok(Ok(k)) if k > 0 => {}
                            _ => return Ok(None),
                        }
                    }
                }
                let _ = Box::pin(write_response(
                    &mut sock,
                    too_large(),
                    is_head,
                    false,
                    Http::V11,
                    &mut buf,
                    0,
                ))
                .await;
                return Ok(None);
            }
            Framing::Length(n) => {
                if buf.len() < n && head.expect_continue {
                    sock.send_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
                }
                while buf.len() < n {
                    buf.reserve(n - buf.len());
                    if read_more(&mut sock, &mut buf).await? == 0 {
                        return Ok(None);
                    }
                }
                buf.split_to(n).freeze()
            }
            Framing::Chunked => {
                if head.expect_continue {
                    sock.send_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
                }
                let mut dec = ChunkedDecoder::default();
                loop {
                    match dec.decode(&mut buf, limits.max_body) {
                        Ok(Some(b)) => break b,
                        Ok(None) => {
                            if read_more(&mut sock, &mut buf).await? == 0 {
                                return Ok(None);
                            }
                        }
                        Err(e) => {
                            let _ = match e {
                                ChunkError::TooLarge => {
                                    let r = too_large();
                                    Box::pin(write_response(
                                        &mut sock,
                                        r,
                                        is_head,
                                        false,
                                        Http::V11,
                                        &mut buf,
                                        0,
                                    ))
                                    .await
                                }
                                ChunkError::Bad => {
                                    let r =
                                        plain_response(StatusCode::BAD_REQUEST, "400 Bad Request");
                                    Box::pin(write_response(
                                        &mut sock,
                                        r,
                                        is_head,
                                        false,
                                        Http::V11,
                                        &mut buf,
                                        0,
                                    ))
                                    .await
                                }
                            };
                            return Ok(None);
                        }
                    }
                }
            }
        };
        if buf.is_empty() {
            // Nothing pipelined: hold no buffer while the request runs or the connection idles.
            buf = BytesMut::new();
        }

        let resp = handler(head.parts, body).await;
        if !closed {
            closed = futures::FutureExt::now_or_never(closing.as_mut()).is_some();
        }
        if closed
            || resp.headers().get(header::CONNECTION).is_some_and(|v| {
                v.to_str()
                    .is_ok_and(|s| s.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")))
            })
        {
            keep_alive = false;
        }
        let pipelined_cap = limits.max_head.saturating_add(limits.max_body);
        let framing = if http10 { Http::V10 } else { Http::V11 };
        if !Box::pin(write_response(
            &mut sock,
            resp,
            is_head,
            keep_alive,
            framing,
            &mut buf,
            pipelined_cap,
        ))
        .await?
        {
            return Ok(None);
        }
        if !keep_alive {
            return Ok(None);
        }
        if buf.is_empty() {
            buf = BytesMut::new();
        }
    }
}

/// The connection layer's own answers (400, 431, 501), plain text as Go's `net/http`
/// server writes them, with `Connection: close`.
fn plain_response(code: StatusCode, text: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
    *r.status_mut() = code;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

/// Reads what has arrived into `buf`; 0 at end of stream.
async fn read_more<C: Connection>(sock: &mut C, buf: &mut BytesMut) -> io::Result<usize> {
    sock.wait_readable().await?;
    if buf.capacity() - buf.len() < 1024 {
        buf.reserve(4096);
    }
    std::future::poll_fn(|cx| sock.poll_read_available(cx, buf)).await
}

/// Waits until the client closes the connection (or fails), keeping anything it sends
/// meanwhile (a pipelined request) in `buf`, up to `cap` bytes.
async fn closed<C: Connection>(sock: &mut C, buf: &mut BytesMut, cap: usize) {
    loop {
        if buf.len() >= cap {
            std::future::pending::<()>().await;
        }
        // Readiness first: a watch waits here for its whole life, holding no buffer.
        if sock.wait_readable().await.is_err() {
            return;
        }
        match std::future::poll_fn(|cx| sock.poll_read_available(cx, buf)).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// Appends the current time as an HTTP date (`Sun, 22 Nov 2026 06:17:04 GMT`), formatted
/// once per second per thread.
fn date_now(out: &mut Vec<u8>) {
    use std::cell::RefCell;
    use std::time::{SystemTime, UNIX_EPOCH};
    thread_local! {
        static CACHE: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
    }
    let now = SystemTime::now();
    let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.0 != secs {
            *c = (secs, httpdate::fmt_http_date(now));
        }
        out.extend_from_slice(c.1.as_bytes());
    });
}

/// Bodies up to this size are written in the same write as the head.
const COALESCE: usize = 64 * 1024;

/// The HTTP version of the request a response answers, for how a body of unknown length
/// is framed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Http {
    /// Chunked transfer coding.
    V11,
    /// HTTP/1.0 has no chunked coding: the body is sent as is and the connection closed at
    /// its end (RFC 9112 §6.3, like Go's net/http for 1.0 clients).
    V10,
}

/// Writes a response; `Ok(false)` when the connection must end (the client went away while
/// a streamed body was being written, the body failed, or an HTTP/1.0 stream ended).
async fn write_response<C, B>(
    sock: &mut C,
    resp: Response<B>,
    is_head: bool,
    keep_alive: bool,
    version: Http,
    buf: &mut BytesMut,
    pipelined_cap: usize,
) -> io::Result<bool>
where
    C: Connection,
    B: http_body::Body<Data = Bytes> + Unpin,
{
    let (parts, mut body) = resp.into_parts();
    let status = parts.status;
    let bodyless = is_head
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    let exact = body.size_hint().exact();
    // An HTTP/1.0 client learns where a body of unknown length ends only from the close.
    let close_delimited = version == Http::V10 && exact.is_none() && !bodyless;
    let keep_alive = keep_alive && !close_delimited;
    let mut head = Vec::with_capacity(128 + parts.headers.len() * 48);
    head.extend_from_slice(b"HTTP/1.1 ");
    head.extend_from_slice(status.as_str().as_bytes());
    head.push(b' ');
    head.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    head.extend_from_slice(b"\r\n");
    for (k, v) in parts.headers.iter() {
        if k == header::CONTENT_LENGTH || k == header::TRANSFER_ENCODING {
            continue;
        }
        if k == header::CONNECTION && keep_alive {
            continue;
        }
        head.extend_from_slice(k.as_str().as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(v.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    if !parts.headers.contains_key(header::DATE) {
        head.extend_from_slice(b"date: ");
        date_now(&mut head);
        head.extend_from_slice(b"\r\n");
    }
    if !keep_alive && !parts.headers.contains_key(header::CONNECTION) {
        head.extend_from_slice(b"connection: close\r\n");
    }
    let chunked = match exact {
        Some(n) => {
            if status != StatusCode::NO_CONTENT && status != StatusCode::NOT_MODIFIED {
                head.extend_from_slice(b"content-length: ");
                head.extend_from_slice(n.to_string().as_bytes());
                head.extend_from_slice(b"\r\n");
            }
            false
        }
        None if bodyless || close_delimited => false,
        None => {
            head.extend_from_slice(b"transfer-encoding: chunked\r\n");
            true
        }
    };
    head.extend_from_slice(b"\r\n");
    // The head is written: a watch stream lives for hours and needs no more of it.
    drop(parts);
    if bodyless {
        sock.send_all(&head).await?;
        return Ok(true);
    }
    if !chunked && !close_delimited {
        // A known-length body (every response but watch streams): one frame in practice.
        let mut first = true;
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else { return Ok(false) };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            if first && head.len() + data.len() <= COALESCE {
                head.extend_from_slice(&data);
            } else {
                if !head.is_empty() {
                    sock.send_all(&head).await?;
                    head = Vec::new();
                }
                sock.send_all(&data).await?;
            }
            first = false;
        }
        if !head.is_empty() {
            sock.send_all(&head).await?;
        }
        return Ok(true);
    }
    sock.send_all(&head).await?;
    drop(head);
    loop {
        let next = {
            let frame = body.frame();
            let gone = closed(sock, buf, pipelined_cap);
            tokio::select! {
                biased;
                f = frame => f,
                () = gone => return Ok(false),
            }
        };
        // Chunked, or as is for an HTTP/1.0 client (whose body ends with the connection).
        let put = if chunked { put_chunk } else { put_raw };
        let mut out = Vec::new();
        let mut ended = false;
        match next {
            None => ended = true,
            Some(Err(_)) => return Ok(false),
            Some(Ok(frame)) => put(&mut out, frame),
        }
        // Frames that are already waiting (a burst of watch events) go out in the same write.
        while !ended && out.len() < COALESCE {
            match futures::FutureExt::now_or_never(body.frame()) {
                None => break,
                Some(None) => ended = true,
                Some(Some(Err(_))) => {
                    sock.send_all(&out).await?;
                    return Ok(false);
                }
                Some(Some(Ok(frame))) => put(&mut out, frame),
            }
        }
        if ended && chunked {
            out.extend_from_slice(b"0\r\n\r\n");
        }
        sock.send_all(&out).await?;
        if ended {
            return Ok(chunked);
        }
    }
}

/// Appends a data frame as is (a close-delimited body).
fn put_raw(out: &mut Vec<u8>, frame: http_body::Frame<Bytes>) {
    if let Ok(data) = frame.into_data() {
        out.extend_from_slice(&data);
    }
}

/// Appends a data frame in the chunked transfer coding (trailers are not sent).
fn put_chunk(out: &mut Vec<u8>, frame: http_body::Frame<Bytes>) {
    let Ok(data) = frame.into_data() else {
        return;
    };
    if data.is_empty() {
        return;
    }
    out.reserve(data.len() + 20);
    let digits = (usize::BITS - data.len().leading_zeros())
        .div_ceil(4)
        .max(1);
    for i in (0..digits).rev() {
        out.push(b"0123456789abcdef"[(data.len() >> (i * 4)) & 0xf]);
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&data);
    out.extend_from_slice(b"\r\n");
}

/// A socket whose first reads replay bytes already taken from it.
pub struct Rewind {
    pre: Bytes,
    inner: TcpStream,
}

impl Rewind {
    /// A socket that first replays `h.read`, then reads `h.sock`.
    pub fn new(h: Handoff<TcpStream>) -> Self {
        Self {
            pre: h.read,
            inner: h.sock,
        }
    }
}

impl AsyncRead for Rewind {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.pre.is_empty() {
            let n = self.pre.len().min(out.remaining());
            out.put_slice(&self.pre[..n]);
            self.pre.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, out)
    }
}

impl AsyncWrite for Rewind {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Body = http_body_util::combinators::UnsyncBoxBody<Bytes, io::Error>;

    fn text_response(code: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
        let b = Full::new(body.into()).map_err(|never| match never {});
        let mut r = Response::new(b.boxed_unsync());
        *r.status_mut() = code;
        r
    }

    fn too_large() -> Response<Body> {
        text_response(StatusCode::PAYLOAD_TOO_LARGE, "big")
    }

    fn limits() -> Limits {
        Limits {
            max_head: 1024,
            max_headers: 8,
            max_body: 64,
            header_timeout: std::time::Duration::from_secs(30),
            idle_timeout: std::time::Duration::from_secs(30),
        }
    }

    #[test]
    fn head_needs_the_blank_line() {
        assert!(
            parse_head(b"GET /api HTTP/1.1\r\nHost: x\r\n", &limits())
                .unwrap()
                .is_none()
        );
        let h = parse_head(b"GET /api?x=1 HTTP/1.1\r\nHost: x\r\n\r\nGET", &limits())
            .unwrap()
            .unwrap();
        assert_eq!(h.len, 34);
        assert_eq!(h.parts.uri.path(), "/api");
        assert_eq!(h.parts.uri.query(), Some("x=1"));
        assert_eq!(h.framing, Framing::Empty);
        assert!(h.keep_alive);
    }

    #[test]
    fn framing_and_connection_rules() {
        let p = |s: &str| parse_head(s.as_bytes(), &limits());
        let h = p("POST / HTTP/1.1\r\nContent-Length: 12\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.framing, Framing::Length(12));
        let h = p("POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\nConnection: close\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.framing, Framing::Chunked);
        assert!(!h.keep_alive);
        // Go's fixLength: chunked wins over Content-Length, which is dropped.
        let h = p("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.framing, Framing::Chunked);
        assert!(h.parts.headers.get("content-length").is_none());
        // Equal Content-Length duplicates are one.
        let h = p("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length:  3\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.framing, Framing::Length(3));
        // Bare LF line ends are accepted, as Go's textproto reader does.
        let h = p("POST / HTTP/1.1\nHost: a\nContent-Length: 2\n\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.framing, Framing::Length(2));
        // HTTP/1.0 ignores Transfer-Encoding.
        let h = p("POST / HTTP/1.0\r\nTransfer-Encoding: gzip\r\nContent-Length: 2\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.framing, Framing::Length(2));
        for unsupported in [
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
            "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
            "POST / HTTP/1.1\r\nTransfer-Encoding: identity\r\nContent-Length: 1\r\n\r\n",
        ] {
            assert_eq!(
                p(unsupported).err(),
                Some(HeadError::UnsupportedTransferEncoding),
                "{unsupported:?}"
            );
        }
        let h = p("GET / HTTP/1.0\r\n\r\n").unwrap().unwrap();
        assert!(!h.keep_alive);
        let h = p("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(h.keep_alive);
        let h = p("PUT / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(h.expect_continue);
        for bad in [
            "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: +1\r\n\r\n",
            "GET /a b HTTP/1.1\r\n\r\n",
            // Space before the colon, an invalid name, obs-fold (textproto: malformed MIME
            // header line; httparse refuses the fold too, where Go would join it).
            "GET / HTTP/1.1\r\nHost : a\r\n\r\n",
            "GET / HTTP/1.1\r\nBad(Name): a\r\n\r\n",
            "GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n",
            "GET / HTTP/2.0\r\n\r\n",
        ] {
            assert!(
                matches!(p(bad), Err(HeadError::Bad(_))),
                "{bad:?}: {:?}",
                p(bad)
            );
        }
    }

    #[test]
    fn head_limits() {
        let many: String = (0..9).map(|i| format!("x{i}: y\r\n")).collect();
        let r = parse_head(
            format!("GET / HTTP/1.1\r\n{many}\r\n").as_bytes(),
            &limits(),
        );
        assert_eq!(r.unwrap_err(), HeadError::TooLarge);
        let long = format!("GET /{} HTTP/1.1\r\n", "a".repeat(2000));
        assert_eq!(
            parse_head(long.as_bytes(), &limits()).unwrap_err(),
            HeadError::TooLarge
        );
    }

    #[test]
    fn chunked_decoding_in_pieces() {
        let wire = b"4;ext=1\r\nWiki\r\n5\r\npedia\r\n0\r\nTrailer: x\r\n\r\nNEXT";
        for split in 1..wire.len() {
            let mut dec = ChunkedDecoder::default();
            let mut buf = BytesMut::from(&wire[..split]);
            let mut got = dec.decode(&mut buf, 64).unwrap();
            buf.extend_from_slice(&wire[split..]);
            if got.is_none() {
                got = dec.decode(&mut buf, 64).unwrap();
            }
            assert_eq!(got.as_deref(), Some(&b"Wikipedia"[..]), "split at {split}");
            assert_eq!(&buf[..], b"NEXT");
        }
    }

    #[test]
    fn chunk_sizes_are_lowercase_hex() {
        for (n, want) in [
            (1usize, "1"),
            (15, "f"),
            (16, "10"),
            (4096, "1000"),
            (70000, "11170"),
        ] {
            let mut out = Vec::new();
            put_chunk(&mut out, http_body::Frame::data(Bytes::from(vec![b'x'; n])));
            let text = String::from_utf8(out).unwrap();
            assert!(text.starts_with(&format!("{want}\r\n")), "{n}");
            assert_eq!(text.len(), want.len() + 4 + n);
        }
    }

    #[test]
    fn date_header_is_an_imf_fixdate() {
        let mut out = Vec::new();
        date_now(&mut out);
        let d = String::from_utf8(out).unwrap();
        assert_eq!(d.len(), 29, "{d}");
        assert!(d.ends_with(" GMT"), "{d}");
        assert!(httpdate::parse_http_date(&d).is_ok(), "{d}");
    }

    #[test]
    fn chunked_errors() {
        let mut dec = ChunkedDecoder::default();
        let mut buf = BytesMut::from(&b"zz\r\n"[..]);
        assert_eq!(dec.decode(&mut buf, 64), Err(ChunkError::Bad));
        let mut dec = ChunkedDecoder::default();
        let mut buf = BytesMut::from(&b"41\r\n"[..]);
        assert_eq!(dec.decode(&mut buf, 64), Err(ChunkError::TooLarge));
        let mut dec = ChunkedDecoder::default();
        let mut buf = BytesMut::from(&b"2\r\nabX\r\n"[..]);
        assert_eq!(dec.decode(&mut buf, 64), Err(ChunkError::Bad));
        let mut dec = ChunkedDecoder::default();
        let mut buf = BytesMut::from(vec![b'1'; 5000].as_slice());
        assert_eq!(dec.decode(&mut buf, 64), Err(ChunkError::Bad));
    }

    /// A server on 127.0.0.1:0 whose handler echoes method, path and body, and streams
    /// `/stream` until the client leaves (reporting the drop on `gone`).
    async fn server() -> (std::net::SocketAddr, tokio::sync::mpsc::Receiver<()>) {
        server_with(limits()).await
    }

    async fn server_with(
        limits: Limits,
    ) -> (std::net::SocketAddr, tokio::sync::mpsc::Receiver<()>) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (gone_tx, gone) = tokio::sync::mpsc::channel(4);
        tokio::spawn(async move {
            loop {
                let (s, _) = l.accept().await.unwrap();
                let gone_tx = gone_tx.clone();
                tokio::spawn(async move {
                    let h = move |p: http::request::Parts, b: Bytes| {
                        let gone_tx = gone_tx.clone();
                        async move {
                            if p.uri.path().starts_with("/stream") {
                                let end = if p.uri.path() == "/stream3" {
                                    3
                                } else {
                                    u32::MAX
                                };
                                struct Guard(tokio::sync::mpsc::Sender<()>);
                                impl Drop for Guard {
                                    fn drop(&mut self) {
                                        let _ = self.0.try_send(());
                                    }
                                }
                                let g = Guard(gone_tx);
                                let s = futures::stream::unfold(0u32, move |i| {
                                    let _keep = &g;
                                    async move {
                                        if i == end {
                                            return None;
                                        }
                                        if i > 0 {
                                            tokio::time::sleep(std::time::Duration::from_millis(5))
                                                .await;
                                        }
                                        let f =
                                            http_body::Frame::data(Bytes::from(format!("ev{i}\n")));
                                        Some((Ok::<_, io::Error>(f), i + 1))
                                    }
                                });
                                let body = http_body_util::StreamBody::new(s).boxed_unsync();
                                return Response::new(body);
                            }
                            let text =
                                format!("{} {} {}", p.method, p.uri, String::from_utf8_lossy(&b));
                            text_response(StatusCode::OK, text)
                        }
                    };
                    let _ = serve_connection(s, h, too_large, &limits).await;
                });
            }
        });
        (addr, gone)
    }

    async fn exchange(addr: std::net::SocketAddr, wire: &[u8]) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
        c.write_all(wire).await.unwrap();
        let mut out = Vec::new();
        c.read_to_end(&mut out).await.unwrap();
        String::from_utf8(out).unwrap()
    }

    #[tokio::test]
    async fn pipelined_requests_and_bodies() {
        let (addr, _) = server().await;
        let out = exchange(
            addr,
            b"POST /a HTTP/1.1\r\nContent-Length: 5\r\n\r\nhelloPOST /b HTTP/1.1\r\n\
              Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n\
              GET /c?x=1 HTTP/1.1\r\nConnection: close\r\n\r\n",
        )
        .await;
        let bodies: Vec<&str> = out
            .split("HTTP/1.1 200 OK\r\n")
            .skip(1)
            .map(|r| r.split("\r\n\r\n").nth(1).unwrap())
            .collect();
        assert_eq!(
            bodies,
            ["POST /a hello", "POST /b abc", "GET /c?x=1 "],
            "{out}"
        );
        assert!(out.contains("content-length: 13\r\n"), "{out}");
        assert!(out.contains("connection: close\r\n"), "{out}");
    }

    #[tokio::test]
    async fn limits_and_malformed_requests_close_the_connection() {
        let (addr, _) = server().await;
        // The oversized body is read (and dropped) before the answer, as Go's server does,
        // so a client still writing it reads the 413 rather than a broken pipe.
        let wire = format!(
            "POST /a HTTP/1.1\r\nContent-Length: 65\r\n\r\n{}",
            "x".repeat(65)
        );
        let out = exchange(addr, wire.as_bytes()).await;
        assert!(
            out.starts_with("HTTP/1.1 413 Payload Too Large\r\n"),
            "{out}"
        );
        // With `Expect: 100-continue` the body is never sent: the answer comes at once.
        let out = exchange(
            addr,
            b"POST /a HTTP/1.1\r\nContent-Length: 65\r\nExpect: 100-continue\r\n\r\n",
        )
        .await;
        assert!(out.starts_with("HTTP/1.1 413 "), "{out}");
        let out = exchange(
            addr,
            b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n41\r\n",
        )
        .await;
        assert!(out.starts_with("HTTP/1.1 413 "), "{out}");
        for te in [
            "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked",
            "Transfer-Encoding: chunked, chunked",
        ] {
            let wire = format!("POST /a HTTP/1.1\r\n{te}\r\n\r\n0\r\n\r\n");
            let out = exchange(addr, wire.as_bytes()).await;
            assert!(out.starts_with("HTTP/1.1 501 Not Implemented\r\n"), "{out}");
            assert!(
                out.ends_with("\r\n\r\nUnsupported transfer encoding"),
                "{out}"
            );
        }
        let out = exchange(addr, b"GET / HTTP/1.1\r\nBad Header\r\n\r\n").await;
        assert!(out.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{out}");
        let long = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(2000));
        let out = exchange(addr, long.as_bytes()).await;
        assert!(out.starts_with("HTTP/1.1 431 "), "{out}");
    }

    #[tokio::test]
    async fn a_head_trickled_byte_by_byte_is_answered() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (addr, _) = server().await;
        let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
        c.set_nodelay(true).unwrap();
        for b in b"GET /slow HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" {
            c.write_all(&[*b]).await.unwrap();
            tokio::task::yield_now().await;
        }
        let mut out = String::new();
        c.read_to_string(&mut out).await.unwrap();
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        assert!(out.ends_with("GET /slow "), "{out}");
    }

    #[tokio::test]
    async fn expect_continue_gets_100_first() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (addr, _) = server().await;
        let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
        c.write_all(b"PUT /x HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut first = [0u8; 25];
        c.read_exact(&mut first).await.unwrap();
        assert_eq!(&first, b"HTTP/1.1 100 Continue\r\n\r\n");
        c.write_all(b"ok").await.unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).await.unwrap();
        assert!(out.ends_with("PUT /x ok"), "{out}");
    }

    /// One connection served until `closing` fires; its handler, on `/slow`, notifies
    /// `entered` and answers only once `release` is notified. Long idle and head timeouts:
    /// only `closing` may end it.
    async fn closing_server(
        closing: std::sync::Arc<tokio::sync::Notify>,
        entered: std::sync::Arc<tokio::sync::Notify>,
        release: std::sync::Arc<tokio::sync::Notify>,
    ) -> std::net::SocketAddr {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            let (s, _) = l.accept().await.unwrap();
            let h = move |p: http::request::Parts, _b: Bytes| {
                let release = release.clone();
                let entered = entered.clone();
                async move {
                    if p.uri.path() == "/slow" {
                        entered.notify_one();
                        release.notified().await;
                    }
                    text_response(StatusCode::OK, p.uri.path().to_string())
                }
            };
            let limits = Limits {
                header_timeout: std::time::Duration::from_secs(60),
                idle_timeout: std::time::Duration::from_secs(60),
                ..limits()
            };
            let until = async move { closing.notified().await };
            let _ = serve_connection_until(s, h, too_large, &limits, until).await;
        });
        addr
    }

    #[tokio::test]
    async fn closing_answers_the_request_in_flight_then_closes() {
        use tokio::io::AsyncWriteExt;
        let closing = std::sync::Arc::new(tokio::sync::Notify::new());
        let entered = std::sync::Arc::new(tokio::sync::Notify::new());
        let release = std::sync::Arc::new(tokio::sync::Notify::new());
        let addr = closing_server(closing.clone(), entered.clone(), release.clone()).await;
        let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
        c.write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        // The request is in the handler (it waits for `release`) when the server stops.
        entered.notified().await;
        closing.notify_one();
        release.notify_one();
        let out = closed_within(&mut c, 10)
            .await
            .expect("closed after the answer");
        let out = String::from_utf8(out).unwrap();
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        assert!(out.contains("connection: close\r\n"), "{out}");
        assert!(out.ends_with("/slow"), "{out}");
    }

    #[tokio::test]
    async fn closing_ends_an_idle_kept_alive_connection() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let closing = std::sync::Arc::new(tokio::sync::Notify::new());
        let unused = std::sync::Arc::new(tokio::sync::Notify::new());
        let addr = closing_server(closing.clone(), unused.clone(), unused).await;
        let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
        c.write_all(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut first = vec![0u8; 512];
        let n = c.read(&mut first).await.unwrap();
        let first = String::from_utf8_lossy(&first[..n]).to_string();
        assert!(first.ends_with("/a"), "{first}");
        assert!(!first.contains("connection: close"), "kept alive: {first}");
        // Idle now, with a 60 s idle timeout: only the stop can close it.
        closing.notify_one();
        let rest = closed_within(&mut c, 10).await.expect("closed at the stop");
        assert!(rest.is_empty(), "{rest:?}");
    }

    /// Reads until the server closes; Err if it has not within `secs`.
    async fn closed_within(c: &mut tokio::net::TcpStream, secs: u64) -> Result<Vec<u8>, ()> {
        use tokio::io::AsyncReadExt;
        let mut out = Vec::new();
        tokio::time::timeout(std::time::Duration::from_secs(secs), async {
            let mut b = [0u8; 512];
            loop {
                match c.read(&mut b).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => out.extend_from_slice(&b[..n]),
                }
            }
        })
        .await
        .map_err(|_| ())?;
        Ok(out)
    }

    #[tokio::test]
    async fn a_partial_head_is_closed_after_the_header_timeout() {
        use tokio::io::AsyncWriteExt;
        let quick = Limits {
            header_timeout: std::time::Duration::from_millis(300),
            idle_timeout: std::time::Duration::from_secs(30),
            ..limits()
        };
        let (addr, _) = server_with(quick).await;
        // Slowloris: a head that keeps coming, a line now and then, but never ends.
        let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
        let started = std::time::Instant::now();
        c.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
        for _ in 0..2 {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            c.write_all(b"X-A: b\r\n").await.unwrap();
        }
        let out = closed_within(&mut c, 10).await.expect("closed");
        assert!(out.is_empty(), "no answer to a head that timed out");
        assert!(started.elapsed() >= std::time::Duration::from_millis(300));
        // A connection that sends nothing at all is closed too.
        let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
        closed_within(&mut c, 10).await.expect("closed");
    }

    #[tokio::test]
    async fn idle_keep_alive_closes_but_a_stream_outlives_both_timeouts() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let quick = Limits {
            header_timeout: std::time::Duration::from_millis(200),
            idle_timeout: std::time::Duration::from_millis(400),
            ..limits()
        };
        let (addr, _) = server_with(quick).await;
        let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
        c.write_all(b"GET /a HTTP/1.1\r\n\r\n").await.unwrap();
        let out = closed_within(&mut c, 10)
            .await
            .expect("closed after idling");
        assert!(String::from_utf8_lossy(&out).contains("GET /a"));
        // A stream (a watch) that runs longer than both timeouts is not cut.
        let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
        c.write_all(b"GET /stream HTTP/1.1\r\n\r\n").await.unwrap();
        let until = std::time::Instant::now() + std::time::Duration::from_millis(1200);
        while std::time::Instant::now() < until {
            let mut b = [0u8; 256];
            assert!(c.read(&mut b).await.unwrap() > 0, "stream ended early");
        }
    }

    #[tokio::test]
    async fn streams_are_chunked_and_end_when_the_client_leaves() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (addr, mut gone) = server().await;
        let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
        c.write_all(b"GET /stream HTTP/1.1\r\n\r\n").await.unwrap();
        let mut got = Vec::new();
        while !String::from_utf8_lossy(&got).contains("4\r\nev2\n\r\n") {
            let mut b = [0u8; 256];
            let n = c.read(&mut b).await.unwrap();
            assert!(n > 0);
            got.extend_from_slice(&b[..n]);
        }
        let text = String::from_utf8_lossy(&got);
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(text.contains("transfer-encoding: chunked\r\n"), "{text}");
        assert!(
            text.contains("\r\n\r\n4\r\nev0\n\r\n4\r\nev1\n\r\n"),
            "{text}"
        );
        drop(c);
        // The response body (the watch) is dropped once the client has gone.
        tokio::time::timeout(std::time::Duration::from_secs(10), gone.recv())
            .await
            .expect("stream dropped after the client closed");
    }

    #[tokio::test]
    async fn an_http10_client_gets_a_stream_unchunked_and_ended_by_the_close() {
        use tokio::io::AsyncWriteExt;
        let (addr, _) = server().await;
        let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
        c.write_all(b"GET /stream3 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            .await
            .unwrap();
        let mut out = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut c, &mut out)
            .await
            .unwrap();
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        assert!(out.contains("connection: close\r\n"), "{out}");
        assert!(!out.contains("transfer-encoding"), "{out}");
        assert!(out.ends_with("\r\n\r\nev0\nev1\nev2\n"), "{out}");
        // A known-length response to HTTP/1.0 keep-alive keeps the connection.
        let out = exchange(
            addr,
            b"GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /b HTTP/1.0\r\n\r\n",
        )
        .await;
        assert!(out.contains("GET /a ") && out.ends_with("GET /b "), "{out}");
    }

    #[tokio::test]
    async fn http2_preface_is_handed_back_with_the_bytes_read() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let srv = tokio::spawn(async move {
            let (s, _) = l.accept().await.unwrap();
            let h =
                |_p: http::request::Parts, _b: Bytes| async { text_response(StatusCode::OK, "h1") };
            let handoff = serve_connection(s, h, too_large, &limits())
                .await
                .unwrap()
                .unwrap();
            let mut rw = Rewind::new(handoff);
            let mut all = vec![0u8; H2_PREFACE.len() + 4];
            rw.read_exact(&mut all).await.unwrap();
            all
        });
        let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
        c.write_all(&H2_PREFACE[..3]).await.unwrap();
        c.flush().await.unwrap();
        tokio::task::yield_now().await;
        c.write_all(&H2_PREFACE[3..]).await.unwrap();
        c.write_all(b"abcd").await.unwrap();
        let all = srv.await.unwrap();
        assert_eq!(&all[..H2_PREFACE.len()], H2_PREFACE);
        assert_eq!(&all[H2_PREFACE.len()..], b"abcd");
    }
}
