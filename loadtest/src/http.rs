//! HTTP target: the gateway, spoken to as a Kubernetes API server over HTTP/1.1 with
//! keep-alive, plaintext or over TLS (an `https://` server: rustls, ALPN `http/1.1`, an
//! optional client certificate), with an optional bearer token on every request. Each
//! worker is one client with its own connection (hyper's HTTP/1 client connection, reopened
//! if the server closes it), so the tool spends its CPU on requests rather than on a shared
//! pool; setup requests use hyper-util's pooled client over plaintext and a connection of
//! their own over TLS.
//!
//! Setup (not timed): create the CronTab CRD with its schema (`409 AlreadyExists` is fine),
//! wait until `GET /apis/stable.example.com/v1` answers 200 and the collection lists, ensure
//! the namespace, and pre-create the working set for get/update/list.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, StatusCode, header};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

use crate::Failure;
use crate::config::{Config, Op};
use crate::objects::{self, CronTabSpec};

/// How long setup waits for the CRD to be served.
const SETUP_WAIT: Duration = Duration::from_secs(30);
/// Largest response body the tool reads (bigger bodies count as an error).
const MAX_RESPONSE: usize = 256 * 1024 * 1024;

type Conn = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

/// The gateway as a load target: the CronTab collection URL and one connection per worker.
pub struct HttpTarget {
    client: Client<HttpConnector, Full<Bytes>>,
    /// `host:port` of the endpoint, for the workers' own connections.
    authority: String,
    /// One connection slot per worker.
    conns: Vec<tokio::sync::Mutex<Option<Conn>>>,
    /// `http://host:port[/clusters/<tenant>]`
    base: String,
    /// The Tenant to create before anything else (`--tenant`): `(admin scope's Tenants URL,
    /// tenant name)`.
    tenant: Option<(String, String)>,
    /// `<base>/apis/stable.example.com/v1/namespaces/<ns>/crontabs`
    collection: String,
    namespace: String,
    object_size: usize,
    list_limit: u32,
    list_all_pages: bool,
    /// TLS to the gateway, for an https:// endpoint.
    tls: Option<tokio_rustls::TlsConnector>,
    /// The setup requests' connection over TLS.
    setup_conn: tokio::sync::Mutex<Option<Conn>>,
    /// `Authorization: Bearer …` of every request.
    authorization: Option<hyper::header::HeaderValue>,
}

/// An HTTP/1 client connection over `io`, its driver spawned.
async fn handshake<IO>(io: IO) -> Result<Conn, Failure>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (send, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(io))
        .await
        .map_err(|e| Failure::new("transport", error_chain(&e)))?;
    tokio::spawn(conn);
    Ok(send)
}

/// The TLS client configuration `files` describe (ALPN `http/1.1`).
fn tls_connector(files: &crate::config::TlsFiles) -> anyhow::Result<tokio_rustls::TlsConnector> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(&files.ca)? {
        roots.add(c?)?;
    }
    let b = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots);
    let mut cfg = match &files.client {
        Some((cert, key)) => b.with_client_auth_cert(
            CertificateDer::pem_file_iter(cert)?.collect::<Result<_, _>>()?,
            PrivateKeyDer::from_pem_file(key)?,
        )?,
        None => b.with_no_client_auth(),
    };
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsConnector::from(std::sync::Arc::new(cfg)))
}

/// Error key for a non-2xx response: `http 409 AlreadyExists` (reason from a Status body).
pub fn status_key(status: StatusCode, body: &[u8]) -> String {
    let reason = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("reason").and_then(|r| r.as_str()).map(str::to_string))
        .filter(|r| !r.is_empty() && r.len() <= 64);
    match reason {
        Some(r) => format!("http {} {r}", status.as_u16()),
        None => format!("http {}", status.as_u16()),
    }
}

/// A request with the tool's headers (and `Host`, for a request on a connection of its own).
fn request(
    method: Method,
    uri: &str,
    host: Option<&str>,
    authorization: Option<&hyper::header::HeaderValue>,
    body: Option<Vec<u8>>,
) -> Result<Request<Full<Bytes>>, Failure> {
    let mut b = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::ACCEPT, "application/json")
        .header(header::USER_AGENT, "crdplane-load/0.1");
    if let Some(h) = host {
        b = b.header(header::HOST, h);
    }
    if let Some(a) = authorization {
        b = b.header(header::AUTHORIZATION, a.clone());
    }
    let body = match body {
        Some(v) => {
            // The tool's only PATCH is a server-side apply (`Op::Apply`); JSON is YAML.
            let ct = if b.method_ref() == Some(&Method::PATCH) {
                "application/apply-patch+yaml"
            } else {
                "application/json"
            };
            b = b.header(header::CONTENT_TYPE, ct);
            Full::new(Bytes::from(v))
        }
        None => Full::new(Bytes::new()),
    };
    b.body(body)
        .map_err(|e| Failure::new("bad request", e.to_string()))
}

/// The status and the whole body of a response (bounded by `MAX_RESPONSE`).
async fn read_body(
    resp: hyper::Response<hyper::body::Incoming>,
) -> Result<(StatusCode, Bytes), Failure> {
    let status = resp.status();
    let body = http_body_util::Limited::new(resp.into_body(), MAX_RESPONSE)
        .collect()
        .await
        .map_err(|e| Failure::new("transport body", e.to_string()))?
        .to_bytes();
    Ok((status, body))
}

/// Paths for a base URL, tenant and namespace.
pub fn paths(endpoint: &str, tenant: Option<&str>, namespace: &str) -> (String, String) {
    let base = match tenant {
        Some(t) => format!("{endpoint}/clusters/{t}"),
        None => endpoint.to_string(),
    };
    let collection = format!(
        "{base}/apis/{}/{}/namespaces/{namespace}/{}",
        objects::GROUP,
        objects::VERSION,
        objects::RESOURCE
    );
    (base, collection)
}

impl HttpTarget {
    /// A target for `cfg.endpoint` (tenant prefix and namespace from `cfg`); no connection is
    /// opened yet.
    pub fn new(cfg: &Config) -> anyhow::Result<HttpTarget> {
        let mut conn = HttpConnector::new();
        conn.set_nodelay(true);
        conn.set_connect_timeout(Some(Duration::from_secs(5)));
        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(cfg.concurrency)
            .pool_idle_timeout(Duration::from_secs(90))
            .build(conn);
        let (base, collection) = paths(&cfg.endpoint, cfg.tenant.as_deref(), &cfg.namespace);
        let authority = cfg
            .endpoint
            .parse::<hyper::Uri>()
            .ok()
            .and_then(|u| u.authority().map(|a| a.to_string()))
            .unwrap_or_else(|| "127.0.0.1:6443".into());
        let tls = cfg.tls.as_ref().map(tls_connector).transpose()?;
        let authorization = cfg
            .token
            .as_ref()
            .map(|t| hyper::header::HeaderValue::from_str(&format!("Bearer {t}")))
            .transpose()?;
        Ok(HttpTarget {
            client,
            authority,
            tls,
            setup_conn: tokio::sync::Mutex::new(None),
            authorization,
            conns: (0..cfg.concurrency.max(1))
                .map(|_| tokio::sync::Mutex::new(None))
                .collect(),
            base,
            tenant: cfg.tenant.as_ref().map(|t| {
                use crdplane_core::tenancy::{ADMIN_SCOPE, GROUP, RESOURCE, VERSION};
                let url = format!(
                    "{}/clusters/{ADMIN_SCOPE}/apis/{GROUP}/{VERSION}/{RESOURCE}",
                    cfg.endpoint
                );
                (url, t.clone())
            }),
            collection,
            namespace: cfg.namespace.clone(),
            object_size: cfg.object_size,
            list_limit: cfg.list_limit,
            list_all_pages: cfg.list_all_pages,
        })
    }

    /// Sends one request and reads the whole response body.
    pub async fn send(
        &self,
        method: Method,
        uri: &str,
        body: Option<Vec<u8>>,
    ) -> Result<(StatusCode, Bytes), Failure> {
        if self.tls.is_some() {
            return self.send_via(&self.setup_conn, method, uri, body).await;
        }
        let req = request(method, uri, None, self.authorization.as_ref(), body)?;
        let resp = self
            .client
            .request(req)
            .await
            .map_err(|e| Failure::new("transport", error_chain(&e)))?;
        read_body(resp).await
    }

    /// Sends one request on worker `worker`'s own connection (opened on first use, and again
    /// after the server closed it) and reads the whole response body.
    pub async fn send_on(
        &self,
        worker: usize,
        method: Method,
        uri: &str,
        body: Option<Vec<u8>>,
    ) -> Result<(StatusCode, Bytes), Failure> {
        self.send_via(&self.conns[worker % self.conns.len()], method, uri, body)
            .await
    }

    /// A new connection to the endpoint (TLS handshake included for https://).
    async fn open(&self) -> Result<Conn, Failure> {
        let tcp = tokio::net::TcpStream::connect(&self.authority)
            .await
            .map_err(|e| Failure::new("transport", format!("connect: {e}")))?;
        let _ = tcp.set_nodelay(true);
        let send = match &self.tls {
            None => handshake(tcp).await?,
            Some(tls) => {
                let host = self.authority.rsplit_once(':').map_or("", |(h, _)| h);
                let host = host.trim_start_matches('[').trim_end_matches(']');
                let name = rustls::pki_types::ServerName::try_from(host.to_string())
                    .map_err(|e| Failure::new("transport", format!("server name: {e}")))?;
                let stream = tls
                    .connect(name, tcp)
                    .await
                    .map_err(|e| Failure::new("transport", format!("TLS: {e}")))?;
                handshake(stream).await?
            }
        };
        Ok(send)
    }

    /// Sends one request on the connection in `slot` (opened when there is none or the
    /// server closed it) and reads the whole response body.
    async fn send_via(
        &self,
        slot: &tokio::sync::Mutex<Option<Conn>>,
        method: Method,
        uri: &str,
        body: Option<Vec<u8>>,
    ) -> Result<(StatusCode, Bytes), Failure> {
        let path = uri
            .parse::<hyper::Uri>()
            .ok()
            .and_then(|u| u.path_and_query().map(|p| p.as_str().to_string()))
            .unwrap_or_else(|| uri.to_string());
        let req = request(
            method,
            &path,
            Some(&self.authority),
            self.authorization.as_ref(),
            body,
        )?;
        let mut slot = slot.lock().await;
        if slot.as_ref().is_none_or(|c| c.is_closed()) {
            *slot = Some(self.open().await?);
        }
        let Some(conn) = slot.as_mut() else {
            return Err(Failure::new("transport", "no connection".to_string()));
        };
        let sent = async {
            conn.ready().await?;
            conn.send_request(req).await
        }
        .await;
        let resp = match sent {
            Ok(r) => r,
            Err(e) => {
                *slot = None;
                return Err(Failure::new("transport", error_chain(&e)));
            }
        };
        read_body(resp).await
    }

    async fn expect_2xx_on(
        &self,
        worker: usize,
        method: Method,
        uri: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Bytes, Failure> {
        let (status, body) = self.send_on(worker, method, uri, body).await?;
        if status.is_success() {
            Ok(body)
        } else {
            Err(Failure::with_body(status_key(status, &body), &body))
        }
    }

    fn object(&self, name: &str, seq: u64, resource_version: Option<&str>) -> Vec<u8> {
        let obj = objects::crontab(&CronTabSpec {
            name,
            namespace: &self.namespace,
            seq,
            size: self.object_size,
            server_fields: false,
            resource_version,
        });
        serde_json::to_vec(&obj).unwrap_or_default()
    }

    /// The current resourceVersion of an object (an untimed GET before its first update).
    pub async fn read_rv(&self, worker: usize, name: &str) -> Result<String, Failure> {
        let body = self
            .expect_2xx_on(
                worker,
                Method::GET,
                &format!("{}/{name}", self.collection),
                None,
            )
            .await?;
        resource_version_of(&body)
    }

    /// One timed operation. `name` is the object's name (unused for list); `rv` is the
    /// resourceVersion an update is conditioned on. Returns the object's new
    /// resourceVersion after an update.
    pub async fn op(
        &self,
        worker: usize,
        op: Op,
        name: &str,
        seq: u64,
        rv: Option<&str>,
    ) -> Result<Option<String>, Failure> {
        match op {
            Op::Create => {
                self.expect_2xx_on(
                    worker,
                    Method::POST,
                    &self.collection,
                    Some(self.object(name, seq, None)),
                )
                .await?;
                Ok(None)
            }
            Op::Get => {
                self.expect_2xx_on(
                    worker,
                    Method::GET,
                    &format!("{}/{name}", self.collection),
                    None,
                )
                .await?;
                Ok(None)
            }
            // Custom resources refuse unconditional updates (upstream customresource
            // strategy: AllowUnconditionalUpdate() is false), so a PUT carries the
            // resourceVersion the worker last saw, as client-go's Update does.
            Op::Update => {
                let body = self
                    .expect_2xx_on(
                        worker,
                        Method::PUT,
                        &format!("{}/{name}", self.collection),
                        Some(self.object(name, seq, rv)),
                    )
                    .await?;
                resource_version_of(&body).map(Some)
            }
            // The whole object, applied by its own manager. The working set was created by
            // another one (the tool's POSTs: manager `crdplane-load`, operation Update), so
            // the first apply to an object takes its fields over (`force`); after that every
            // field is the applier's, no apply conflicts, and a changed seq changes the spec.
            Op::Apply => {
                self.expect_2xx_on(
                    worker,
                    Method::PATCH,
                    &format!(
                        "{}/{name}?fieldManager=crdplane-load-apply&force=true",
                        self.collection
                    ),
                    Some(self.object(name, seq, None)),
                )
                .await?;
                Ok(None)
            }
            Op::List => {
                let uri = if self.list_limit > 0 {
                    format!("{}?limit={}", self.collection, self.list_limit)
                } else {
                    self.collection.clone()
                };
                let mut body = self.expect_2xx_on(worker, Method::GET, &uri, None).await?;
                // With --list-all-pages: the rest of the paged list, token by token.
                while self.list_all_pages
                    && let Some(token) = continue_of(&body)
                {
                    let next = format!("{uri}&continue={token}");
                    body = self.expect_2xx_on(worker, Method::GET, &next, None).await?;
                }
                Ok(None)
            }
        }
    }

    /// Creates a working-set object; an existing one (409) is fine.
    pub async fn ensure_object(&self, name: &str, seq: u64) -> Result<(), Failure> {
        let (status, body) = self
            .send(
                Method::POST,
                &self.collection,
                Some(self.object(name, seq, None)),
            )
            .await?;
        if status.is_success() || status == StatusCode::CONFLICT {
            Ok(())
        } else {
            Err(Failure::with_body(status_key(status, &body), &body))
        }
    }

    /// Creates the tenant (`--tenant`, if missing; a server that creates tenants on first use
    /// or refuses the admin scope gets a warning), the CRD (if missing) and the namespace,
    /// and waits until the resource is served.
    pub async fn setup(&self) -> anyhow::Result<()> {
        if let Some((url, name)) = &self.tenant {
            let t = serde_json::to_vec(&json!({
                "apiVersion": crdplane_core::tenancy::API_VERSION,
                "kind": crdplane_core::tenancy::KIND,
                "metadata": {"name": name}
            }))?;
            match self.send(Method::POST, url, Some(t)).await {
                Ok((s, _)) if s.is_success() => eprintln!("setup: created tenant {name}"),
                Ok((StatusCode::CONFLICT, _)) => eprintln!("setup: tenant {name} already exists"),
                Ok((s, body)) => eprintln!(
                    "setup: warning: creating tenant {name} answered {s}: {}",
                    crate::stats::truncate_body(&body)
                ),
                Err(f) => eprintln!(
                    "setup: warning: creating tenant {name}: {}: {}",
                    f.key, f.body
                ),
            }
        }
        let crd_url = format!(
            "{}/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            self.base
        );
        let crd = serde_json::to_vec(&objects::crontab_crd())?;
        let (status, body) = self
            .send(Method::POST, &crd_url, Some(crd))
            .await
            .map_err(|f| anyhow::anyhow!("creating the CRD: {}: {}", f.key, f.body))?;
        match status {
            s if s.is_success() => eprintln!("setup: created CRD {}", objects::CRD_NAME),
            StatusCode::CONFLICT => eprintln!("setup: CRD {} already exists", objects::CRD_NAME),
            s => anyhow::bail!(
                "creating the CRD failed: {s}: {}",
                crate::stats::truncate_body(&body)
            ),
        }
        let group_url = format!("{}/apis/{}/{}", self.base, objects::GROUP, objects::VERSION);
        self.wait_200(&group_url).await?;

        let ns_url = format!("{}/api/v1/namespaces", self.base);
        let ns = serde_json::to_vec(&json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}
        }))?;
        match self.send(Method::POST, &ns_url, Some(ns)).await {
            Ok((s, _)) if s.is_success() || s == StatusCode::CONFLICT => {}
            Ok((s, body)) => eprintln!(
                "setup: warning: creating namespace {} answered {s}: {}",
                self.namespace,
                crate::stats::truncate_body(&body)
            ),
            Err(f) => eprintln!("setup: warning: creating namespace: {}: {}", f.key, f.body),
        }
        self.wait_200(&format!("{}?limit=1", self.collection))
            .await?;
        Ok(())
    }

    async fn wait_200(&self, url: &str) -> anyhow::Result<()> {
        let until = Instant::now() + SETUP_WAIT;
        loop {
            let last = match self.send(Method::GET, url, None).await {
                Ok((StatusCode::OK, _)) => return Ok(()),
                Ok((s, body)) => format!("{s}: {}", crate::stats::truncate_body(&body)),
                Err(f) => format!("{}: {}", f.key, f.body),
            };
            if Instant::now() >= until {
                anyhow::bail!("GET {url} did not answer 200 within {SETUP_WAIT:?}; last: {last}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// `metadata.resourceVersion` of an object in a response body.
pub fn resource_version_of(body: &[u8]) -> Result<String, Failure> {
    #[derive(serde::Deserialize)]
    struct Meta {
        #[serde(rename = "resourceVersion", default)]
        resource_version: String,
    }
    #[derive(serde::Deserialize)]
    struct Obj {
        metadata: Meta,
    }
    match serde_json::from_slice::<Obj>(body) {
        Ok(o) if !o.metadata.resource_version.is_empty() => Ok(o.metadata.resource_version),
        _ => Err(Failure::with_body(
            "no resourceVersion in response".into(),
            body,
        )),
    }
}

/// An error with its sources, e.g. `client error (Connect): tcp connect error: Connection refused`.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    let mut depth = 0;
    while let Some(src) = cur {
        if depth >= 8 {
            break;
        }
        s.push_str(": ");
        s.push_str(&src.to_string());
        cur = src.source();
        depth += 1;
    }
    s
}

/// `metadata.continue` of a list body, if it has a non-empty one (tokens are URL-safe).
/// Only that field is decoded: serde skips `items` without building values, so the client's
/// own cost stays small next to the server's.
fn continue_of(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Meta {
        #[serde(rename = "continue")]
        cont: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct ListHead {
        metadata: Option<Meta>,
    }
    let h: ListHead = serde_json::from_slice(body).ok()?;
    h.metadata?.cont.filter(|c| !c.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_token_of_a_list() {
        let page = br#"{"apiVersion":"v1","items":[{"metadata":{"continue":"no"}}],"kind":"L","metadata":{"continue":"ab.cd","resourceVersion":"3"}}"#;
        assert_eq!(continue_of(page), Some("ab.cd".to_string()));
        assert_eq!(
            continue_of(br#"{"items":[],"metadata":{"resourceVersion":"3"}}"#),
            None
        );
        assert_eq!(continue_of(br#"{"metadata":{"continue":""}}"#), None);
    }

    #[test]
    fn paths_with_and_without_tenant() {
        let (b, c) = paths("http://127.0.0.1:6443", None, "default");
        assert_eq!(b, "http://127.0.0.1:6443");
        assert_eq!(
            c,
            "http://127.0.0.1:6443/apis/stable.example.com/v1/namespaces/default/crontabs"
        );
        let (b, c) = paths("http://h:1", Some("acme"), "ns1");
        assert_eq!(b, "http://h:1/clusters/acme");
        assert_eq!(
            c,
            "http://h:1/clusters/acme/apis/stable.example.com/v1/namespaces/ns1/crontabs"
        );
    }

    #[test]
    fn resource_versions_are_read_from_objects() {
        let body = br#"{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"a","resourceVersion":"42"},"spec":{"padding":"xx"}}"#;
        assert_eq!(resource_version_of(body).unwrap(), "42");
        let e = resource_version_of(br#"{"metadata":{"name":"a"}}"#).unwrap_err();
        assert_eq!(e.key, "no resourceVersion in response");
        assert!(resource_version_of(b"not json").is_err());
    }

    #[test]
    fn status_keys_carry_the_reason() {
        let body = br#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"AlreadyExists","code":409}"#;
        assert_eq!(
            status_key(StatusCode::CONFLICT, body),
            "http 409 AlreadyExists"
        );
        assert_eq!(
            status_key(StatusCode::BAD_GATEWAY, b"upstream down"),
            "http 502"
        );
        assert_eq!(
            status_key(StatusCode::NOT_FOUND, br#"{"reason":""}"#),
            "http 404"
        );
    }
}
