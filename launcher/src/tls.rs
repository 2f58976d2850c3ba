//! The launcher's TLS client side: rustls on the ring provider, PEM parsing, the webpki
//! chain checks [`crate::pki`] runs on the certificates it keeps or issues, and the blocking
//! HTTPS probe of a gateway's `/readyz` (what [`crate::stack`] waits on when the gateways
//! serve TLS).
//!
//! The probe presents a client certificate (the admin's: the gateways run with
//! `--anonymous-auth=false`, so an anonymous `/readyz` gets 401, as upstream's
//! kube-apiserver answers with anonymous authentication off) and trusts only the stack's CA.
//! It offers ALPN `http/1.1` alone, since it speaks HTTP/1.1. The server name is the host of
//! the gateway's announced address, an IP (`ServerName::IpAddress`), matched against the
//! serving certificate's IP SANs as kubectl/client-go does. Not on the request path.

use anyhow::{Context, Result, anyhow};
use rustls::client::danger::ServerCertVerifier;
use rustls::crypto::CryptoProvider;
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long a probe waits for the gateway to answer (handshake included).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// The crypto provider of every TLS object the launcher builds: ring.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Every certificate in `pem` (at least one).
pub fn certs_from_pem(pem: &str) -> Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow!("bad certificate PEM: {e}"))?;
    if certs.is_empty() {
        anyhow::bail!("no certificate in the PEM");
    }
    Ok(certs)
}

/// The (first) private key in `pem` (PKCS#8, SEC1 or PKCS#1).
pub fn key_from_pem(pem: &str) -> Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_slice(pem.as_bytes()).map_err(|e| anyhow!("bad private key PEM: {e}"))
}

/// A root store holding every certificate of the bundle `ca_pem`.
pub fn roots(ca_pem: &str) -> Result<Arc<RootCertStore>> {
    let mut roots = RootCertStore::empty();
    for c in certs_from_pem(ca_pem)? {
        roots.add(c).context("CA certificate")?;
    }
    Ok(Arc::new(roots))
}

fn unix_time(t: SystemTime) -> UnixTime {
    UnixTime::since_unix_epoch(t.duration_since(UNIX_EPOCH).unwrap_or_default())
}

/// Checks that the first certificate of `cert_pem` (the rest: intermediates) is a serving
/// certificate for `host` (an IP or a DNS name) issued by the CA of `ca_pem`, valid at `at`.
pub fn verify_server_cert(ca_pem: &str, cert_pem: &str, host: &str, at: SystemTime) -> Result<()> {
    let verifier =
        rustls::client::WebPkiServerVerifier::builder_with_provider(roots(ca_pem)?, provider())
            .build()?;
    let chain = certs_from_pem(cert_pem)?;
    let name = server_name(host)?;
    verifier.verify_server_cert(&chain[0], &chain[1..], &name, &[], unix_time(at))?;
    Ok(())
}

/// Checks that the first certificate of `cert_pem` is a client certificate issued by the CA
/// of `ca_pem`, valid at `at`.
pub fn verify_client_cert(ca_pem: &str, cert_pem: &str, at: SystemTime) -> Result<()> {
    let verifier =
        rustls::server::WebPkiClientVerifier::builder_with_provider(roots(ca_pem)?, provider())
            .build()?;
    let chain = certs_from_pem(cert_pem)?;
    verifier.verify_client_cert(&chain[0], &chain[1..], unix_time(at))?;
    Ok(())
}

/// A client configuration that trusts only the CA bundle `ca_pem` and presents the client
/// certificate `cert_pem` with its key `key_pem` (checked to belong to it), offering ALPN
/// `http/1.1`.
pub fn client_config(ca_pem: &str, cert_pem: &str, key_pem: &str) -> Result<Arc<ClientConfig>> {
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots(ca_pem)?)
        .with_client_auth_cert(certs_from_pem(cert_pem)?, key_from_pem(key_pem)?)
        .context("client certificate and key")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The TLS server name of `host` (an IP, also in brackets, or a DNS name); an unspecified
/// address (`0.0.0.0`, `::`) stands for the loopback one, which is what a client reaches
/// through it.
pub fn server_name(host: &str) -> Result<ServerName<'static>> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match host.parse::<IpAddr>() {
        Ok(ip) => Ok(ServerName::from(crate::loopback_if_unspecified(ip))),
        Err(_) => ServerName::try_from(host.to_string())
            .map_err(|e| anyhow!("{host:?} is not a TLS server name: {e}")),
    }
}

/// Writes `GET path` (HTTP/1.1, `Connection: close`) on `s` and reads the status code.
pub(crate) fn get_status(mut s: impl Read + Write, host: &str, path: &str) -> std::io::Result<u16> {
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )?;
    s.flush()?;
    let mut buf = [0u8; 12];
    s.read_exact(&mut buf)?;
    std::str::from_utf8(&buf[9..12])
        .ok()
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "not an HTTP status line: {:?}",
                    String::from_utf8_lossy(&buf)
                ),
            )
        })
}

/// Blocking HTTPS `GET path` on `addr` (`host:port`) with `config`; returns the status
/// code. A TLS failure (unknown CA, name mismatch, rejected client certificate) is an
/// error of kind `InvalidData` carrying rustls' message.
pub fn https_status(addr: &str, path: &str, config: &Arc<ClientConfig>) -> std::io::Result<u16> {
    let host = match addr.parse::<SocketAddr>() {
        Ok(a) => a.ip().to_string(),
        Err(_) => addr.rsplit_once(':').map_or(addr, |(h, _)| h).to_string(),
    };
    let name = server_name(&host)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))?;
    let tcp = TcpStream::connect(addr)?;
    tcp.set_read_timeout(Some(PROBE_TIMEOUT))?;
    tcp.set_write_timeout(Some(PROBE_TIMEOUT))?;
    let conn = ClientConnection::new(config.clone(), name).map_err(std::io::Error::other)?;
    get_status(StreamOwned::new(conn, tcp), addr, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_of_hosts() {
        let ip = |s: &str| ServerName::from(s.parse::<IpAddr>().unwrap());
        assert_eq!(server_name("127.0.0.1").unwrap(), ip("127.0.0.1"));
        assert_eq!(server_name("[::1]").unwrap(), ip("::1"));
        assert_eq!(server_name("0.0.0.0").unwrap(), ip("127.0.0.1"));
        assert_eq!(server_name("::").unwrap(), ip("::1"));
        assert_eq!(
            server_name("localhost").unwrap(),
            ServerName::try_from("localhost").unwrap()
        );
        assert!(server_name("not a name").is_err());
    }

    /// What the test server saw: the negotiated ALPN protocol, or the failure.
    type Served = std::result::Result<Option<Vec<u8>>, String>;

    /// A one-connection HTTPS server with the PKI's serving certificate that requires a
    /// client certificate of its CA (as the gateway with `--client-ca-file` and
    /// `--anonymous-auth=false`) and answers 200 to an HTTP/1.1 request; returns its address
    /// and what it saw (the negotiated ALPN protocol, or the handshake error).
    fn serve_once(pki: &crate::Pki) -> (SocketAddr, std::thread::JoinHandle<Served>) {
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            roots(pki.ca_pem()).unwrap(),
            provider(),
        )
        .build()
        .unwrap();
        let key = std::fs::read_to_string(pki.serving_key_path()).unwrap();
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(
                certs_from_pem(pki.serving_cert_pem()).unwrap(),
                key_from_pem(&key).unwrap(),
            )
            .unwrap();
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let config = Arc::new(config);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let (tcp, _) = listener.accept().map_err(|e| e.to_string())?;
            tcp.set_read_timeout(Some(PROBE_TIMEOUT)).unwrap();
            let conn = rustls::ServerConnection::new(config).unwrap();
            let mut s = StreamOwned::new(conn, tcp);
            let mut req = Vec::new();
            let mut b = [0u8; 1];
            while !req.ends_with(b"\r\n\r\n") {
                s.read_exact(&mut b).map_err(|e| e.to_string())?;
                req.push(b[0]);
            }
            assert!(req.starts_with(b"GET /readyz HTTP/1.1\r\n"));
            let alpn = s.conn.alpn_protocol().map(<[u8]>::to_vec);
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                .map_err(|e| e.to_string())?;
            s.conn.send_close_notify();
            let _ = s.flush();
            Ok(alpn)
        });
        (addr, t)
    }

    #[test]
    fn the_probe_authenticates_with_a_client_certificate_over_tls() {
        let d = tempfile::tempdir().unwrap();
        let pki = crate::Pki::ensure(d.path(), &[]).unwrap();
        let client =
            client_config(pki.ca_pem(), pki.admin_cert_pem(), pki.admin_key_pem()).unwrap();

        let (addr, server) = serve_once(&pki);
        assert_eq!(
            https_status(&addr.to_string(), "/readyz", &client).unwrap(),
            200
        );
        assert_eq!(
            server.join().unwrap().unwrap().as_deref(),
            Some(&b"http/1.1"[..])
        );

        // An announced unspecified address is probed on the loopback one.
        let (addr, server) = serve_once(&pki);
        let url = format!("https://0.0.0.0:{}", addr.port());
        assert_eq!(
            crate::url_status(&url, "/readyz", Some(&client)).unwrap(),
            200
        );
        server.join().unwrap().unwrap();

        // A client certificate of another CA is refused by the server, and a server of
        // another CA by the probe.
        let other = crate::Pki::ensure(&d.path().join("other"), &[]).unwrap();
        let (addr, server) = serve_once(&pki);
        let stranger =
            client_config(pki.ca_pem(), other.admin_cert_pem(), other.admin_key_pem()).unwrap();
        assert!(https_status(&addr.to_string(), "/readyz", &stranger).is_err());
        assert!(server.join().unwrap().is_err());
        let (addr, server) = serve_once(&other);
        let e = https_status(&addr.to_string(), "/readyz", &client).unwrap_err();
        assert!(e.to_string().contains("certificate"), "{e}");
        assert!(server.join().unwrap().is_err());
    }

    #[test]
    fn bad_pem_is_an_error() {
        assert!(certs_from_pem("").is_err());
        assert!(key_from_pem("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n").is_err());
    }
}
