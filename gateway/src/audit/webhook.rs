//! The webhook backend: events POSTed as `audit.k8s.io/v1` `EventList` JSON to the server
//! that `--audit-webhook-config-file` names, a kubeconfig as upstream's: the first
//! cluster's `server` (`https://` or `http://`), its `certificate-authority` or
//! `certificate-authority-data`, and the first user's `token`, or
//! `client-certificate`/`client-key` (files or `-data`).
//!
//! Batching follows upstream's buffered backend: a batch goes out when it holds
//! `--audit-webhook-batch-max-size` events (default 400) or when its first event has waited
//! `--audit-webhook-batch-max-wait` (default 30s); in blocking mode each request's event goes
//! out at once (with whatever else is queued). A failed POST (no connection, or an answer
//! other than 2xx) is tried again after `--audit-webhook-initial-backoff` (default 10s),
//! doubling, five tries in all; then the batch is dropped, counted and logged.
//!
//! The thread runs its own single-threaded runtime, so a slow webhook never holds the
//! gateway's workers.

use super::{Counters, Mode, Queued};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// How many POSTs a batch gets before it is dropped.
const TRIES: u32 = 5;
/// The most a POST may take.
const POST_TIMEOUT: Duration = Duration::from_secs(30);

/// The webhook flags, the kubeconfig read.
#[derive(Clone)]
pub struct Settings {
    /// Where events go.
    pub server: http::Uri,
    /// TLS for an `https` server.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// `Authorization: Bearer` of the kubeconfig's user.
    pub token: Option<String>,
    /// Events per POST at most.
    pub max_batch: usize,
    /// How long the first event of a batch may wait.
    pub max_wait: Duration,
    /// The wait before the first retry.
    pub initial_backoff: Duration,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("server", &self.server)
            .field("max_batch", &self.max_batch)
            .field("max_wait", &self.max_wait)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize, Default)]
struct Kubeconfig {
    #[serde(default)]
    clusters: Vec<NamedCluster>,
    #[serde(default)]
    users: Vec<NamedUser>,
}

#[derive(Deserialize)]
struct NamedCluster {
    cluster: Cluster,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct Cluster {
    #[serde(default)]
    server: String,
    certificate_authority: Option<PathBuf>,
    certificate_authority_data: Option<String>,
}

#[derive(Deserialize)]
struct NamedUser {
    user: User,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct User {
    token: Option<String>,
    client_certificate: Option<PathBuf>,
    client_certificate_data: Option<String>,
    client_key: Option<PathBuf>,
    client_key_data: Option<String>,
}

fn pem(
    file: &Option<PathBuf>,
    data: &Option<String>,
    what: &str,
    base: &Path,
) -> Result<Option<Vec<u8>>, String> {
    use base64::Engine;
    match (file, data) {
        (_, Some(d)) => base64::engine::general_purpose::STANDARD
            .decode(d.trim())
            .map(Some)
            .map_err(|e| format!("{what}-data: {e}")),
        (Some(f), None) => {
            let p = if f.is_absolute() {
                f.clone()
            } else {
                base.join(f)
            };
            std::fs::read(&p)
                .map(Some)
                .map_err(|e| format!("{what} {}: {e}", p.display()))
        }
        (None, None) => Ok(None),
    }
}

impl Settings {
    /// Reads the kubeconfig at `path` (relative file names are relative to it).
    pub fn load(
        path: &Path,
        max_batch: usize,
        max_wait: Duration,
        initial_backoff: Duration,
    ) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--audit-webhook-config-file {}: {e}", path.display()))?;
        let kc: Kubeconfig = serde_saphyr::from_str(&text)
            .map_err(|e| format!("--audit-webhook-config-file {}: {e}", path.display()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        let cluster = kc
            .clusters
            .into_iter()
            .next()
            .map(|c| c.cluster)
            .ok_or("--audit-webhook-config-file: no cluster")?;
        let server: http::Uri = cluster.server.parse().map_err(|e| {
            format!(
                "--audit-webhook-config-file: server {:?}: {e}",
                cluster.server
            )
        })?;
        let user = kc
            .users
            .into_iter()
            .next()
            .map(|u| u.user)
            .unwrap_or_default();
        let tls = match server.scheme_str() {
            Some("https") => {
                let ca = pem(
                    &cluster.certificate_authority,
                    &cluster.certificate_authority_data,
                    "certificate-authority",
                    base,
                )?;
                let cert = pem(
                    &user.client_certificate,
                    &user.client_certificate_data,
                    "client-certificate",
                    base,
                )?;
                let key = pem(&user.client_key, &user.client_key_data, "client-key", base)?;
                Some(client_config(
                    ca.as_deref(),
                    cert.as_deref(),
                    key.as_deref(),
                )?)
            }
            Some("http") => None,
            _ => {
                return Err(format!(
                    "--audit-webhook-config-file: server {:?} is not an http(s) URL",
                    cluster.server
                ));
            }
        };
        if max_batch == 0 {
            return Err("--audit-webhook-batch-max-size must be at least 1".into());
        }
        Ok(Settings {
            server,
            tls,
            token: user.token,
            max_batch,
            max_wait,
            initial_backoff,
        })
    }
}

fn client_config(
    ca: Option<&[u8]>,
    cert: Option<&[u8]>,
    key: Option<&[u8]>,
) -> Result<Arc<rustls::ClientConfig>, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let mut roots = rustls::RootCertStore::empty();
    match ca {
        Some(pem) => {
            for c in CertificateDer::pem_slice_iter(pem) {
                roots
                    .add(c.map_err(|e| format!("certificate-authority: {e}"))?)
                    .map_err(|e| format!("certificate-authority: {e}"))?;
            }
        }
        None => {
            let (added, _) =
                roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
            if added == 0 {
                return Err(
                    "--audit-webhook-config-file: no certificate-authority and no system roots"
                        .into(),
                );
            }
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let b = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots);
    let mut cfg = match (cert, key) {
        (Some(c), Some(k)) => {
            let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(c)
                .collect::<Result<_, _>>()
                .map_err(|e| format!("client-certificate: {e}"))?;
            let key = PrivateKeyDer::from_pem_slice(k).map_err(|e| format!("client-key: {e}"))?;
            b.with_client_auth_cert(chain, key)
                .map_err(|e| format!("client-certificate: {e}"))?
        }
        (None, None) => b.with_no_client_auth(),
        _ => {
            return Err(
                "--audit-webhook-config-file: client-certificate and client-key go together".into(),
            );
        }
    };
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// Starts the webhook thread; the queue that feeds it.
pub(crate) fn start(
    s: Settings,
    mode: Mode,
    counters: Arc<Counters>,
) -> Result<mpsc::Sender<Queued>, String> {
    let (tx, rx) = mpsc::channel::<Queued>(super::log::QUEUE);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting the audit webhook: {e}"))?;
    std::thread::Builder::new()
        .name("audit-webhook".into())
        .spawn(move || rt.block_on(run(s, mode, rx, counters)))
        .map_err(|e| format!("starting the audit webhook: {e}"))?;
    Ok(tx)
}

async fn run(s: Settings, mode: Mode, mut rx: mpsc::Receiver<Queued>, counters: Arc<Counters>) {
    let mut batch: Vec<Queued> = Vec::new();
    while let Some(first) = rx.recv().await {
        batch.push(first);
        let deadline = tokio::time::Instant::now() + s.max_wait;
        // Blocking mode (or a waiting request) sends what is queued now; batch mode fills
        // the batch or waits out the first event's wait, looking at the queue every 50 ms
        // rather than being woken by each event.
        loop {
            while batch.len() < s.max_batch {
                match rx.try_recv() {
                    Ok(q) => batch.push(q),
                    Err(_) => break,
                }
            }
            let now = tokio::time::Instant::now();
            if batch.len() >= s.max_batch
                || mode.blocks()
                || batch.iter().any(|q| q.done.is_some())
                || now >= deadline
            {
                break;
            }
            tokio::time::sleep((deadline - now).min(Duration::from_millis(50))).await;
        }
        let lines: Vec<&[u8]> = batch.iter().map(|q| &q.line[..]).collect();
        let body = Bytes::from(crdplane_apiserver::audit::event::event_list(&lines));
        let mut backoff = s.initial_backoff;
        let mut sent = false;
        for attempt in 1..=TRIES {
            match tokio::time::timeout(POST_TIMEOUT, post(&s, body.clone())).await {
                Ok(Ok(())) => {
                    sent = true;
                    break;
                }
                Ok(Err(e)) => tracing::warn!(attempt, "audit webhook: {e}"),
                Err(_) => {
                    tracing::warn!(attempt, "audit webhook: no answer within {POST_TIMEOUT:?}")
                }
            }
            if attempt < TRIES {
                tokio::time::sleep(backoff).await;
                backoff *= 2;
            }
        }
        if !sent {
            let n = counters.lost("webhook", batch.len() as u64);
            tracing::error!(
                lost = batch.len(),
                total_lost = n,
                "audit webhook: a batch was dropped after {TRIES} tries"
            );
        }
        for q in batch.drain(..) {
            if let Some(d) = q.done {
                let _ = d.send(sent);
            }
        }
    }
}

/// One POST of `body`; Ok for a 2xx answer.
async fn post(s: &Settings, body: Bytes) -> Result<(), String> {
    let authority = s
        .server
        .authority()
        .ok_or("the server URL has no host")?
        .clone();
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let https = s.tls.is_some();
    let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
    let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| format!("dial tcp {host}:{port}: {e}"))?;
    let path = s.server.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let mut req = http::Request::post(path)
        .header(http::header::HOST, authority.as_str())
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json")
        .header(http::header::USER_AGENT, "crdplane-gateway")
        .body(Full::new(body))
        .map_err(|e| e.to_string())?;
    if let Some(t) = &s.token {
        req.headers_mut().insert(
            http::header::AUTHORIZATION,
            http::HeaderValue::from_str(&format!("Bearer {t}")).map_err(|e| e.to_string())?,
        );
    }
    let resp = match &s.tls {
        Some(tls) => {
            let name =
                rustls::pki_types::ServerName::try_from(host.clone()).map_err(|e| e.to_string())?;
            let stream = tokio_rustls::TlsConnector::from(tls.clone())
                .connect(name, tcp)
                .await
                .map_err(|e| format!("tls: {e}"))?;
            send(hyper_util::rt::TokioIo::new(stream), req).await?
        }
        None => send(hyper_util::rt::TokioIo::new(tcp), req).await?,
    };
    if resp.status().is_success() {
        Ok(())
    } else {
        let status = resp.status();
        let body = http_body_util::Limited::new(resp.into_body(), 4096)
            .collect()
            .await
            .map(|c| c.to_bytes())
            .unwrap_or_default();
        Err(format!("{status}: {}", String::from_utf8_lossy(&body)))
    }
}

async fn send<I>(
    io: I,
    req: http::Request<Full<Bytes>>,
) -> Result<http::Response<hyper::body::Incoming>, String>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    sender.send_request(req).await.map_err(|e| e.to_string())
}
