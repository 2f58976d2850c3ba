//! The key sets of the OIDC / JWT authenticators (`--authentication-config`), kept fresh in
//! the background: the one place the gateway goes to the network for authentication.
//!
//! Where it sits: beside the request path, not on it. At start-up the process state
//! (`context.rs`, with its other cache followers) calls [`spawn`], which starts one task
//! per JWT authenticator. The authentication layer (`filters/authentication.rs`) only reads
//! the key set a task last stored in `crdplane_auth::oidc::KeyStore`; no request ever waits
//! for a fetch. Until an issuer's first key set arrives its tokens get the 401 (the chain's
//! `oidc: authenticator not initialized`), and every failed fetch is logged.
//!
//! What a task does, after upstream's `oidc.go` and go-oidc (`NewProvider`, the remote key
//! set):
//! - Discovery: GET `<discoveryURL>` (default `<url>/.well-known/openid-configuration`), whose
//!   `issuer` must be the configured URL, then GET its `jwks_uri`; both over HTTPS, trusting
//!   the issuer's `certificateAuthority` (PEM) or else the system's roots; HTTP/1.1, one
//!   connection per request, [`TIMEOUT`] for each request, responses of at most
//!   [`MAX_RESPONSE_BYTES`], status 200 only, no redirects.
//! - `jwksFile` (crdplane's extension): the file is re-read instead of fetched.
//! - When: at once (a file's keys are already loaded), then every [`REFRESH_EVERY`]
//!   ([`FILE_REFRESH_EVERY`] for a file), every [`RETRY_EVERY`] after a failure (upstream's
//!   10 s poll), and when a token names a key id the set lacks — at most once per
//!   [`MIN_GAP`], so unknown key ids cannot make the gateway hammer the issuer. A failed
//!   refresh keeps the previous key set.

use bytes::Bytes;
use crdplane_auth::oidc::{JwksSource, JwtAuthenticator, KeySet, Oidc};
use http_body_util::BodyExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often a fetched key set is fetched again.
pub const REFRESH_EVERY: Duration = Duration::from_secs(3600);
/// How often a `jwksFile` is read again.
pub const FILE_REFRESH_EVERY: Duration = Duration::from_secs(60);
/// The wait after a failed fetch (upstream polls every 10 s until the first success).
pub const RETRY_EVERY: Duration = Duration::from_secs(10);
/// The least time between two fetches asked for by unknown key ids.
pub const MIN_GAP: Duration = Duration::from_secs(5);
/// The most time one HTTPS request may take (upstream's client: 30 s).
pub const TIMEOUT: Duration = Duration::from_secs(30);
/// The largest discovery or JWKS document accepted.
pub const MAX_RESPONSE_BYTES: usize = 1 << 20;

/// Starts one background task per JWT authenticator of `oidc` (needs a tokio runtime).
pub fn spawn(oidc: &Oidc) {
    for i in 0..oidc.authenticators().len() {
        let oidc = oidc.clone();
        tokio::spawn(async move { keep_fresh(oidc, i).await });
    }
}

/// The task of authenticator `i`: fetch, store, wait, again.
async fn keep_fresh(oidc: Oidc, i: usize) {
    let a = &oidc.authenticators()[i];
    let bell = Arc::new(tokio::sync::Notify::new());
    let b = bell.clone();
    a.keys().on_unknown_kid(Box::new(move || b.notify_one()));
    let (tls, every) = match &a.source {
        JwksSource::File(_) => (None, FILE_REFRESH_EVERY),
        JwksSource::Discovery {
            certificate_authority,
            ..
        } => match client_config(certificate_authority.as_deref()) {
            Ok(c) => (Some(c), REFRESH_EVERY),
            Err(e) => {
                tracing::error!(issuer = %a.issuer, "oidc authenticator: no TLS trust for the issuer, its tokens are refused: {e}");
                return;
            }
        },
    };
    // A file's keys were read at load.
    let mut due = a.keys().get().is_none();
    let mut last: Option<Instant> = None;
    loop {
        let mut ok = true;
        if due {
            last = Some(Instant::now());
            match fetch(a, tls.as_ref()).await {
                Ok(keys) => {
                    tracing::debug!(issuer = %a.issuer, keys = keys.len(), "oidc authenticator: key set loaded");
                    a.keys().set(keys);
                }
                Err(e) => {
                    ok = false;
                    let held = if a.keys().get().is_some() {
                        "keeping the previous key set"
                    } else {
                        "its tokens are refused until keys are loaded"
                    };
                    tracing::warn!(issuer = %a.issuer, "oidc authenticator: fetching keys failed ({held}): {e}");
                }
            }
        }
        let wait = if ok { every } else { RETRY_EVERY };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = bell.notified() => {
                if let Some(gap) = last.map(|t| MIN_GAP.saturating_sub(t.elapsed())) {
                    tokio::time::sleep(gap).await;
                }
            }
        }
        due = true;
    }
}

/// The key set of `a`, read from its file or fetched from its issuer.
async fn fetch(
    a: &JwtAuthenticator,
    tls: Option<&Arc<rustls::ClientConfig>>,
) -> Result<KeySet, String> {
    match (&a.source, tls) {
        (JwksSource::File(path), _) => {
            let bytes = tokio::fs::read(path)
                .await
                .map_err(|e| format!("open {}: {e}", path.display()))?;
            KeySet::from_jwks(&bytes).map_err(|e| format!("{}: {e}", path.display()))
        }
        (JwksSource::Discovery { discovery_url, .. }, Some(tls)) => {
            #[derive(serde::Deserialize)]
            struct Discovery {
                #[serde(default)]
                issuer: String,
                #[serde(default)]
                jwks_uri: String,
            }
            let body = get(discovery_url, tls).await?;
            let d: Discovery = serde_json::from_slice(&body)
                .map_err(|e| format!("oidc: failed to decode provider discovery object: {e}"))?;
            if d.issuer != a.issuer {
                return Err(format!(
                    "oidc: issuer did not match the issuer returned by provider, expected {:?} got {:?}",
                    a.issuer, d.issuer
                ));
            }
            if d.jwks_uri.is_empty() {
                return Err("oidc: the discovery document has no jwks_uri".into());
            }
            let body = get(&d.jwks_uri, tls).await?;
            KeySet::from_jwks(&body).map_err(|e| format!("{}: {e}", d.jwks_uri))
        }
        (JwksSource::Discovery { .. }, None) => Err("no TLS configuration".into()),
    }
}

/// A TLS client trusting the PEM bundle `ca`, or the system's roots without one.
pub fn client_config(ca: Option<&str>) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    match ca {
        Some(pem) => {
            for c in crdplane_auth::oidc::ca_certificates(pem)? {
                roots.add(c).map_err(|e| e.to_string())?;
            }
        }
        None => {
            tracing::info!("OIDC: No x509 certificates provided, will use host's root CA set");
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(format!(
                    "no system root certificates could be loaded: {:?}",
                    found.errors
                ));
            }
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// GET of an `https` URL: the body of a 200, at most [`MAX_RESPONSE_BYTES`], within
/// [`TIMEOUT`].
pub async fn get(url: &str, tls: &Arc<rustls::ClientConfig>) -> Result<Bytes, String> {
    tokio::time::timeout(TIMEOUT, get_once(url, tls))
        .await
        .map_err(|_| format!("GET {url}: no answer within {}s", TIMEOUT.as_secs()))?
        .map_err(|e| format!("GET {url}: {e}"))
}

async fn get_once(url: &str, tls: &Arc<rustls::ClientConfig>) -> Result<Bytes, String> {
    let uri: http::Uri = url.parse().map_err(|e| format!("{e}"))?;
    if uri.scheme_str() != Some("https") {
        return Err("only https URLs are fetched".into());
    }
    let authority = uri.authority().ok_or("no host")?.clone();
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = authority.port_u16().unwrap_or(443);
    let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| format!("dial tcp {host}:{port}: {e}"))?;
    let name = rustls::pki_types::ServerName::try_from(host.clone()).map_err(|e| e.to_string())?;
    let stream = tokio_rustls::TlsConnector::from(tls.clone())
        .connect(name, tcp)
        .await
        .map_err(|e| format!("tls: {e}"))?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let req = http::Request::get(path)
        .header(http::header::HOST, authority.as_str())
        .header(http::header::ACCEPT, "application/json")
        .header(http::header::USER_AGENT, "crdplane-gateway")
        .body(http_body_util::Empty::<Bytes>::new())
        .map_err(|e| e.to_string())?;
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let status = resp.status();
    let body = http_body_util::Limited::new(resp.into_body(), MAX_RESPONSE_BYTES)
        .collect()
        .await
        .map_err(|e| format!("reading the response: {e}"))?
        .to_bytes();
    if status != http::StatusCode::OK {
        let text = String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned();
        return Err(format!("{status}: {text}"));
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A one-shot HTTPS server on 127.0.0.1 answering every request with `status` and
    /// `body`; its CA's PEM and its base URL.
    async fn server(status: u16, body: Vec<u8>) -> (String, String) {
        let ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        let mut ca = ca;
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let leaf_key = rcgen::KeyPair::generate().unwrap();
        let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
            .unwrap()
            .signed_by(&leaf_key, &rcgen::Issuer::new(ca, ca_key))
            .unwrap();
        let cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into()),
        )
        .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            while let Ok((sock, _)) = listener.accept().await {
                let Ok(mut s) = acceptor.accept(sock).await else {
                    continue;
                };
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                let head = format!(
                    "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = s.write_all(head.as_bytes()).await;
                let _ = s.write_all(&body).await;
                let _ = s.shutdown().await;
            }
        });
        (ca_cert.pem(), format!("https://127.0.0.1:{}", addr.port()))
    }

    #[tokio::test]
    async fn gets_bounded_bodies_of_200s_from_trusted_servers_only() {
        let (ca, url) = server(200, b"{\"keys\":[]}".to_vec()).await;
        let tls = client_config(Some(&ca)).unwrap();
        assert_eq!(get(&url, &tls).await.unwrap(), &b"{\"keys\":[]}"[..]);
        // Another CA: the handshake fails.
        let (other_ca, _) = server(200, Vec::new()).await;
        let e = get(&url, &client_config(Some(&other_ca)).unwrap())
            .await
            .unwrap_err();
        assert!(e.contains("tls:"), "{e}");
        // Not 200, too large, not https.
        let (ca, url) = server(404, b"nothing here".to_vec()).await;
        let e = get(&url, &client_config(Some(&ca)).unwrap())
            .await
            .unwrap_err();
        assert!(e.ends_with("404 Not Found: nothing here"), "{e}");
        let (ca, url) = server(200, vec![b' '; MAX_RESPONSE_BYTES + 1]).await;
        let e = get(&url, &client_config(Some(&ca)).unwrap())
            .await
            .unwrap_err();
        assert!(e.contains("reading the response"), "{e}");
        let e = get("http://127.0.0.1:1/", &tls).await.unwrap_err();
        assert!(e.ends_with("only https URLs are fetched"), "{e}");
        assert!(client_config(Some("not a certificate")).is_err());
    }
}
