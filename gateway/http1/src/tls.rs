//! HTTP/1.1 over TLS for crdplane-http1: a handshaken rustls server session over the client's
//! TCP socket, driven directly (rustls's buffered, IO-free `ServerConnection` API) instead of
//! through an `AsyncRead`/`AsyncWrite` stream, so that [`crate::serve_connection`] keeps its
//! readiness-based reads: while the client is idle the connection waits on the socket and
//! holds no HTTP read buffer of its own.
//!
//! The gateway's accept loop (`crdplane_gateway::server`) does the handshake with
//! tokio-rustls and hands the socket and the session here when ALPN chose HTTP/1.1 (HTTP/2
//! goes to hyper). Before, hyper's HTTP/1 server served those connections over the
//! tokio-rustls stream; this path replaces it so that HTTP/1.1 is served one way whatever
//! the transport (the same limits, timeouts, framing and Status answers), and so that an idle
//! or watching HTTP/1.1-over-TLS connection (the Python client's and client-node's watches)
//! holds rustls's buffers only, not hyper's 8 KiB read and write buffers besides. In time
//! the two are even: `cargo bench -p crdplane-http1 --bench connection` (one kept-alive
//! connection, client and server on one thread) measured 23.2 µs a round trip here against
//! 23.0 µs for hyper over tokio-rustls, and 17.7 µs for crdplane-http1 on plain TCP.
//!
//! Reading: ciphertext is read from the socket into rustls only when the session holds no
//! plaintext, every record that has arrived is opened at once (`process_new_packets`), and
//! plaintext is copied out into the caller's buffer. Writing: plaintext is sealed into TLS
//! records by rustls (at most its buffer limit at a time) and written out before more is
//! taken, so a slow reader holds back the writer as on a plain socket. The end of the stream
//! is the peer's close_notify or the TCP end of stream; TLS errors end the connection after
//! the alert rustls queued for them has been tried once.

use crate::Connection;
use bytes::BytesMut;
use rustls::ServerConnection;
use std::io::{self, Read, Write};
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::TcpStream;

/// A TLS server session over a TCP socket, after its handshake.
pub struct TlsConnection {
    sock: TcpStream,
    tls: ServerConnection,
    /// Plaintext bytes rustls holds, opened but not yet read.
    pending: usize,
    /// The peer has ended the stream (close_notify or TCP end of stream).
    eof: bool,
}

impl TlsConnection {
    /// The session `tls`, handshaken over `sock` (as tokio-rustls's `TlsStream::into_inner`
    /// returns them). Records that arrived with the handshake are opened and what the
    /// session still has to send (TLS 1.3 session tickets) is written.
    pub async fn new(sock: TcpStream, tls: ServerConnection) -> io::Result<Self> {
        let mut c = Self {
            sock,
            tls,
            pending: 0,
            eof: false,
        };
        c.open_records()?;
        c.flush().await?;
        Ok(c)
    }

    /// The session: ALPN, the client's certificates.
    pub fn session(&self) -> &ServerConnection {
        &self.tls
    }

    /// Sends close_notify, as far as the socket takes it without waiting (the connection
    /// ends right after).
    pub fn close(mut self) {
        self.tls.send_close_notify();
        let _ = self.tls.write_tls(&mut Nonblocking(&self.sock));
    }

    /// Opens every complete record rustls has read; a TLS error becomes an `InvalidData`
    /// error after the alert for it has been tried.
    fn open_records(&mut self) -> io::Result<()> {
        match self.tls.process_new_packets() {
            Ok(state) => {
                self.pending = state.plaintext_bytes_to_read();
                if state.peer_has_closed() {
                    self.eof = true;
                }
                if self.tls.wants_write() {
                    // A key update's answer or an alert; the rest goes with the next write.
                    let _ = self.tls.write_tls(&mut Nonblocking(&self.sock));
                }
                Ok(())
            }
            Err(e) => {
                let _ = self.tls.write_tls(&mut Nonblocking(&self.sock));
                Err(io::Error::new(io::ErrorKind::InvalidData, e))
            }
        }
    }

    /// Writes every sealed record rustls holds.
    async fn flush(&mut self) -> io::Result<()> {
        while self.tls.wants_write() {
            match self.tls.write_tls(&mut Nonblocking(&self.sock)) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.sock.writable().await?,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

impl Connection for TlsConnection {
    const PRIOR_KNOWLEDGE_H2: bool = false;

    async fn wait_readable(&mut self) -> io::Result<()> {
        if self.pending > 0 || self.eof {
            return Ok(());
        }
        self.sock.readable().await
    }

    fn poll_read_available(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut BytesMut,
    ) -> Poll<io::Result<usize>> {
        loop {
            if self.pending > 0 {
                let at = buf.len();
                buf.resize(at + self.pending, 0);
                let n = match self.tls.reader().read(&mut buf[at..]) {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
                    Err(e) => {
                        buf.truncate(at);
                        return Poll::Ready(Err(e));
                    }
                };
                buf.truncate(at + n);
                self.pending = self.pending.saturating_sub(n);
                if n > 0 {
                    return Poll::Ready(Ok(n));
                }
                self.pending = 0;
            }
            if self.eof {
                return Poll::Ready(Ok(0));
            }
            // Ciphertext that has arrived (after a partial record the loop reads again).
            let mut from = Reading {
                sock: &mut self.sock,
                cx,
            };
            match self.tls.read_tls(&mut from) {
                Ok(0) => self.eof = true,
                Ok(_) => {
                    if let Err(e) = self.open_records() {
                        return Poll::Ready(Err(e));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Poll::Pending,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    async fn send_all(&mut self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let n = self.tls.writer().write(data)?;
            data = &data[n..];
            self.flush().await?;
        }
        Ok(())
    }
}

/// The socket as the `Read` rustls drives: tokio's read with the task's context, `Pending`
/// (the task to be woken) as `WouldBlock`; see [`Connection::poll_read_available`].
struct Reading<'a, 'b> {
    sock: &'a mut TcpStream,
    cx: &'a mut Context<'b>,
}

impl Read for Reading<'_, '_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut rb = ReadBuf::new(buf);
        match Pin::new(&mut *self.sock).poll_read(self.cx, &mut rb) {
            Poll::Ready(Ok(())) => Ok(rb.filled().len()),
            Poll::Ready(Err(e)) => Err(e),
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
}

/// The socket as the `Write` rustls drives, answering `WouldBlock` instead of waiting.
struct Nonblocking<'a>(&'a TcpStream);

impl Write for Nonblocking<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.try_write(buf)
    }
    /// rustls always writes its sealed records as a vector, most often of one record (a
    /// response up to 16 KiB). One buffer goes out with `send(2)`: `writev(2)` on a socket
    /// takes the file's position lock and the generic vector path first, which a profile of
    /// TLS GETs put at about 0.4 µs per response.
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match bufs {
            [one] => self.0.try_write(one),
            _ => self.0.try_write_vectored(bufs),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
