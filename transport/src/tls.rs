//! TLS serving: the rustls server configuration of a crdplane listener, its certificate
//! reloaded from files when they change, and client certificates requested but verified by
//! the caller.
//!
//! Where it sits: in the gateway's accept loop (`crdplane_gateway::server`), between
//! `accept()` and the HTTP connection layers: each accepted socket is handshaken with
//! [`ServerTls::acceptor`], and the negotiated ALPN protocol picks HTTP/2 or HTTP/1.1.
//!
//! Follows kube-apiserver's secure serving (staging/src/k8s.io/apiserver/pkg/server/
//! secure_serving.go and `dynamiccertificates`):
//! - `--tls-cert-file` / `--tls-private-key-file` are watched and a changed pair is served
//!   to new connections without a restart (upstream reacts to file events and resyncs every
//!   minute; here the files are polled, [`RELOAD_EVERY`]). A pair that does not load (a
//!   half-written file, a key that does not match) keeps the previous one in service and is
//!   logged; the next poll tries again.
//! - ALPN offers `h2` and `http/1.1` (Go's `http2.ConfigureServer`).
//! - Client certificates are requested, not required, and any one is accepted by the
//!   handshake (Go's `tls.RequestClientCert`): the handshake proves the client holds the
//!   certificate's key, and the x509 authenticator (crate `crdplane-auth`) checks the chain
//!   against the client CA afterwards, so a certificate from another CA is a 401 with
//!   upstream's Status instead of a failed handshake.

use rustls::DistinguishedName;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// How often the certificate files are checked for changes.
pub const RELOAD_EVERY: Duration = Duration::from_secs(10);

/// The ALPN protocols a TLS listener offers, preferred first.
pub const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// The crypto provider of every TLS endpoint of crdplane (ring).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A serving certificate and key pair loaded from PEM files.
fn load_pair(
    cert: &Path,
    key_file: &Path,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| format!("{}: {e}", cert.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no certificate in the file", cert.display()));
    }
    let key = PrivateKeyDer::from_pem_file(key_file)
        .map_err(|e| format!("{}: {e}", key_file.display()))?;
    let ck = CertifiedKey::from_der(certs, key, provider)
        .map_err(|e| format!("{} and {}: {e}", cert.display(), key_file.display()))?;
    Ok(ck)
}

/// When and how big each file was, to notice a change without reading it.
fn stamp(p: &Path) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(p).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// When and how big the certificate and key files were when last loaded.
type Stamps = [Option<(SystemTime, u64)>; 2];

/// A certificate and key pair, swapped when its files change (the gateway's serving pair;
/// a service's pair for mutual TLS, [`crate::mtls`], on both sides of its connections).
#[derive(Debug)]
pub(crate) struct Reloading {
    cert: PathBuf,
    key: PathBuf,
    current: Mutex<(Arc<CertifiedKey>, Stamps)>,
    provider: Arc<CryptoProvider>,
}

impl Reloading {
    /// The pair in `cert` and `key`; fails when it does not load.
    pub(crate) fn load(
        cert: &Path,
        key: &Path,
        provider: &Arc<CryptoProvider>,
    ) -> Result<Self, String> {
        let ck = load_pair(cert, key, provider)?;
        Ok(Self {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            current: Mutex::new((Arc::new(ck), [stamp(cert), stamp(key)])),
            provider: provider.clone(),
        })
    }

    /// The pair in service now.
    pub(crate) fn current(&self) -> Arc<CertifiedKey> {
        self.current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .0
            .clone()
    }

    /// Loads the pair again if either file changed; `Ok(true)` when a new pair is served.
    pub(crate) fn reload(&self) -> Result<bool, String> {
        let stamps = [stamp(&self.cert), stamp(&self.key)];
        {
            let cur = self.current.lock().unwrap_or_else(|e| e.into_inner());
            if cur.1 == stamps {
                return Ok(false);
            }
        }
        let ck = load_pair(&self.cert, &self.key, &self.provider)?;
        let mut cur = self.current.lock().unwrap_or_else(|e| e.into_inner());
        *cur = (Arc::new(ck), stamps);
        Ok(true)
    }
}

impl ResolvesServerCert for Reloading {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// Requests a client certificate, accepts any (after the handshake proved possession of its
/// key) and leaves the chain's verification to the authenticator (see the module docs).
#[derive(Debug)]
struct RequestClientCert {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ClientCertVerifier for RequestClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        // Go's server sends no CA names either when it only requests a certificate; Go,
        // OpenSSL and rustls clients then send the one certificate they have.
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// A TLS listener's configuration (see the module docs).
#[derive(Clone)]
pub struct ServerTls {
    config: Arc<rustls::ServerConfig>,
    certs: Arc<Reloading>,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("cert", &self.certs.cert)
            .field("key", &self.certs.key)
            .finish()
    }
}

impl ServerTls {
    /// Serves the certificate chain in `cert` with the key in `key` (PEM files); requests
    /// client certificates when `request_client_certs`. Fails when the pair does not load.
    pub fn load(cert: &Path, key: &Path, request_client_certs: bool) -> Result<Self, String> {
        let provider = provider();
        let certs = Arc::new(Reloading::load(cert, key, &provider)?);
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?;
        let builder = if request_client_certs {
            builder.with_client_cert_verifier(Arc::new(RequestClientCert {
                algorithms: provider.signature_verification_algorithms,
            }))
        } else {
            builder.with_no_client_auth()
        };
        let mut config = builder.with_cert_resolver(certs.clone());
        config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
        Ok(Self {
            config: Arc::new(config),
            certs,
        })
    }

    /// The acceptor that handshakes each accepted socket.
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.config.clone())
    }

    /// Loads the certificate files again if they changed; `Ok(true)` when new connections
    /// now get the new pair. On an error the previous pair stays in service.
    pub fn reload(&self) -> Result<bool, String> {
        self.certs.reload()
    }

    /// Checks the files every `every` for the life of the process (see [`ServerTls::reload`]);
    /// logs what happened.
    pub fn spawn_reloader(&self, every: Duration) {
        spawn_reloader(self.certs.clone(), every, "serving certificate");
    }
}

/// Checks `certs`' files every `every` for the life of the process and logs what happened;
/// `what` names the pair in the log.
pub(crate) fn spawn_reloader(certs: Arc<Reloading>, every: Duration, what: &'static str) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            match certs.reload() {
                Ok(true) => tracing::info!(cert = %certs.cert.display(), "{what} reloaded"),
                Ok(false) => {}
                Err(e) => tracing::warn!("{what} not reloaded, keeping the previous one: {e}"),
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_pair(dir: &Path, name: &str) -> (PathBuf, PathBuf, CertificateDer<'static>) {
        let k = rcgen::KeyPair::generate().unwrap();
        let c = rcgen::CertificateParams::new(vec![name.to_string()])
            .unwrap()
            .self_signed(&k)
            .unwrap();
        let (cp, kp) = (dir.join("tls.crt"), dir.join("tls.key"));
        std::fs::write(&cp, c.pem()).unwrap();
        std::fs::write(&kp, k.serialize_pem()).unwrap();
        (cp, kp, c.der().clone())
    }

    fn served(t: &ServerTls) -> CertificateDer<'static> {
        t.certs.current.lock().unwrap().0.cert[0].clone()
    }

    #[test]
    fn reload_swaps_a_changed_pair_and_keeps_the_old_one_on_errors() {
        let dir = tempfile::tempdir().unwrap();
        let (cp, kp, first) = write_pair(dir.path(), "one.example");
        let t = ServerTls::load(&cp, &kp, true).unwrap();
        assert_eq!(served(&t), first);
        assert_eq!(t.reload(), Ok(false), "nothing changed");
        // A certificate whose key is not the one in the key file: refused, old pair kept.
        let other = rcgen::KeyPair::generate().unwrap();
        let c = rcgen::CertificateParams::new(vec!["x.example".to_string()])
            .unwrap()
            .self_signed(&other)
            .unwrap();
        std::fs::write(&cp, format!("{}\n", c.pem())).unwrap();
        assert!(t.reload().is_err());
        assert_eq!(served(&t), first);
        // A whole new pair: served.
        let (_, _, second) = write_pair(dir.path(), "two.example");
        assert_eq!(t.reload(), Ok(true));
        assert_eq!(served(&t), second);
        assert_ne!(first, second);
    }

    #[test]
    fn load_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.crt");
        let e = ServerTls::load(&missing, &missing, false).unwrap_err();
        assert!(e.contains("nope.crt"), "{e}");
        std::fs::write(&missing, "not pem").unwrap();
        let e = ServerTls::load(&missing, &missing, false).unwrap_err();
        assert!(e.contains("no certificate"), "{e}");
    }

    #[tokio::test]
    async fn handshake_offers_h2_and_accepts_any_client_certificate() {
        let dir = tempfile::tempdir().unwrap();
        let (cp, kp, server_der) = write_pair(dir.path(), "localhost");
        let t = ServerTls::load(&cp, &kp, true).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let acceptor = t.acceptor();
        let server = tokio::spawn(async move {
            let (s, _) = listener.accept().await.unwrap();
            let tls = acceptor.accept(s).await.unwrap();
            let (_, conn) = tls.get_ref();
            (
                conn.alpn_protocol().map(<[u8]>::to_vec),
                conn.peer_certificates().map(|c| c.len()),
            )
        });
        // A client with a self-signed certificate no CA vouches for.
        let ck = rcgen::KeyPair::generate().unwrap();
        let cc = rcgen::CertificateParams::new(Vec::<String>::new())
            .unwrap()
            .self_signed(&ck)
            .unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(server_der).unwrap();
        let mut cfg = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_client_auth_cert(
                vec![cc.der().clone()],
                PrivateKeyDer::from_pem_slice(ck.serialize_pem().as_bytes()).unwrap(),
            )
            .unwrap();
        cfg.alpn_protocols = vec![b"h2".to_vec()];
        let conn = tokio_rustls::TlsConnector::from(Arc::new(cfg));
        let sock = tokio::net::TcpStream::connect(addr).await.unwrap();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let _c = conn.connect(name, sock).await.unwrap();
        let (alpn, peers) = server.await.unwrap();
        assert_eq!(alpn.as_deref(), Some(&b"h2"[..]));
        assert_eq!(peers, Some(1));
    }
}
