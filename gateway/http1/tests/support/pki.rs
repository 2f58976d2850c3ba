//! A self-signed `localhost` certificate and the rustls configurations around it, for the TLS
//! tests (`tests/tls.rs`) and the connection benchmark (`benches/connection.rs`).

use std::sync::Arc;
use tokio_rustls::rustls;

/// A server offering HTTP/1.1 by ALPN and a client trusting it, offering `client_alpn`.
pub(crate) fn configs(
    client_alpn: &[&[u8]],
) -> (Arc<rustls::ServerConfig>, Arc<rustls::ClientConfig>) {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut server = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    server.alpn_protocols = vec![b"http/1.1".to_vec()];
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.der().clone()).unwrap();
    let mut client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    client.alpn_protocols = client_alpn.iter().map(|p| p.to_vec()).collect();
    (Arc::new(server), Arc::new(client))
}
