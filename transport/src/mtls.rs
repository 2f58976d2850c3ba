//! Mutual TLS between crdplane's processes: the gRPC services (registry, validation, storage)
//! answer calls only from callers that present a certificate of the services CA, and every
//! caller (the gateway, the registry) presents one.
//!
//! Where it sits: on the server side in the accept loop of [`crate::serve_one`] /
//! [`crate::serve_with_health`] (each accepted socket is handshaken in its connection's
//! task, then [`RequireClientCert`] stands in front of the service); on the client side in
//! [`crate::client::Endpoint`], between the TCP connect and the HTTP/2 handshake. Without
//! these files configured both sides speak plaintext HTTP/2, as before.
//!
//! Rules:
//! - One certificate and key per process, used on both sides: it is the serving certificate
//!   of the process's listener and the client certificate of its calls, so it carries both
//!   the `serverAuth` and `clientAuth` extended key usages. The pair is read again when its
//!   files change ([`crate::tls::RELOAD_EVERY`]); the CA bundle is read once at start.
//! - The server requests a client certificate and verifies a presented one against the CA
//!   (WebPKI: chain, validity period, `clientAuth` usage): a certificate that does not verify
//!   fails the handshake. A connection without a certificate is accepted, but on it only
//!   `grpc.health.v1.Health` answers — load balancers, Envoy and orchestrator probes check
//!   health without a credential — and every other call gets `UNAUTHENTICATED`
//!   ([`CLIENT_CERT_REQUIRED`]). A plaintext connection to a TLS listener fails its
//!   handshake: no call is served in plaintext.
//! - The client verifies the server's certificate against the same CA and the endpoint's
//!   host (an IP or DNS subject alternative name), offering ALPN `h2` only.
//! - Any certificate the CA signed is a crdplane service, so the CA must be a dedicated one,
//!   not the CA of the users' client certificates (`crdplane up` creates a separate services
//!   CA). The tenant and user a call names (`crate::context`) are trusted because only the
//!   gateway, which decided them at its edge, and the registry, which passes on the gateway's,
//!   may call with them.
//! - Which service may call which is decided by the certificate's subject common name,
//!   `crdplane-<kind>` ([`callers`]): a server lists the callers it serves
//!   (`ServeOptions::callers`: storage and validation the gateway and the registry, the
//!   registry the gateway); a verified certificate of another name gets `PERMISSION_DENIED`
//!   ([`caller_refused`]) on every call but health. So a validation process, or any other
//!   holder of a services certificate, cannot read or write a tenant's objects. Certificates
//!   an operator issues must follow the naming.
//! - A forwarding proxy between the processes (the optional Envoy of
//!   `deploy/envoy/services-mesh.yaml`) holds a certificate named `crdplane-mesh-proxy`
//!   ([`callers::MESH_PROXY`]). It terminates its callers' mutual TLS, so the server sees the
//!   proxy, not the caller: on a proxy's connection each call is decided as the common name
//!   of the `Subject` in its `x-forwarded-client-cert` header ([`forwarded_caller`]), which
//!   Envoy sets from the certificate it verified and strips from what callers send
//!   (`SANITIZE_SET`); a call without one is a caller without a certificate. The header is
//!   read only on a proxy's connection, so nobody else can claim an identity with it; the
//!   proxy's certificate is as powerful as the gateway's and is issued like it. This is the
//!   service-mesh convention (Istio and Envoy's own), chosen over passing TLS through
//!   Envoy, which would balance connections instead of calls.
//!
//! Follows etcd's client-port security (`--client-cert-auth` with `--trusted-ca-file`, and
//! kube-apiserver's `--etcd-cafile/--etcd-certfile/--etcd-keyfile` on the caller's side),
//! except that the health service answers without a certificate, as gRPC's health checking
//! protocol expects of an unauthenticated prober.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::{BoxFuture, Either};
use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tonic::body::Body;

use crate::tls::{RELOAD_EVERY, Reloading, provider, spawn_reloader};

/// The message of the `UNAUTHENTICATED` answer to a call without a client certificate.
pub const CLIENT_CERT_REQUIRED: &str =
    "a client certificate of the crdplane services CA is required";

/// The subject common names of crdplane's own certificates (`crdplane up` issues
/// `crdplane-<kind>`), as servers list the callers they serve.
pub mod callers {
    /// The gateway: calls storage, validation and the registry.
    pub const GATEWAY: &str = "crdplane-gateway";
    /// The registry: calls storage and validation.
    pub const REGISTRY: &str = "crdplane-registry";
    /// A forwarding proxy between the processes (Envoy, `deploy/envoy/services-mesh.yaml`):
    /// every server accepts its connections, and each call on them is served as the caller
    /// its `x-forwarded-client-cert` header names ([`super::forwarded_caller`]).
    pub const MESH_PROXY: &str = "crdplane-mesh-proxy";
}

/// The header in which a forwarding proxy names the certificate its own caller presented
/// (Envoy's `forward_client_cert_details`).
pub const XFCC: &str = "x-forwarded-client-cert";

/// The subject common name of the certificate the nearest proxy verified, from an
/// `x-forwarded-client-cert` value: its last element (the one the proxy that called us set;
/// with Envoy's `SANITIZE_SET` the only one), its `Subject` key (RFC 2253, in double
/// quotes), its `CN` attribute. `None` when there is none, e.g. the proxy's caller presented
/// no certificate.
///
/// Follows Envoy's header format (docs: "x-forwarded-client-cert"): elements separated by
/// `,`, key-value pairs by `;`, values with those characters double-quoted with `\`
/// escapes.
pub fn forwarded_caller(value: &str) -> Option<String> {
    let element = split_unquoted(value, b',').pop()?;
    let subject = split_unquoted(element, b';')
        .into_iter()
        .find_map(|pair| {
            let (k, v) = pair.split_once('=')?;
            k.trim()
                .eq_ignore_ascii_case("subject")
                .then(|| unquote(v.trim()))
        })??;
    // RFC 2253: attributes separated by unescaped `,` (or `+` within one RDN).
    let mut attr = String::new();
    let mut attrs = Vec::new();
    let mut chars = subject.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => attr.push(chars.next()?),
            ',' | '+' => attrs.push(std::mem::take(&mut attr)),
            c => attr.push(c),
        }
    }
    attrs.push(attr);
    attrs.into_iter().find_map(|a| {
        let (k, v) = a.split_once('=')?;
        (k.trim() == "CN").then(|| v.to_string())
    })
}

/// `s` split at each `sep` outside double quotes (a `\` escapes the next byte).
fn split_unquoted(s: &str, sep: u8) -> Vec<&str> {
    let (mut parts, mut start, mut quoted, mut escaped) = (Vec::new(), 0, false, false);
    for (i, b) in s.bytes().enumerate() {
        match b {
            _ if escaped => escaped = false,
            b'\\' => escaped = true,
            b'"' => quoted = !quoted,
            b if b == sep && !quoted => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

/// A value without its double quotes; `None` for an unterminated quote. Only an escaped
/// quote is unescaped: the backslashes of a subject's RFC 2253 escapes stay for its parser.
fn unquote(v: &str) -> Option<String> {
    let Some(inner) = v.strip_prefix('"') else {
        return Some(v.to_string());
    };
    let inner = inner.strip_suffix('"').filter(|i| !i.ends_with('\\'))?;
    Some(inner.replace("\\\"", "\""))
}

/// The message of the `PERMISSION_DENIED` answer to a verified caller whose certificate's
/// common name the server does not serve.
pub fn caller_refused(common_name: &str) -> String {
    format!("a client certificate with common name {common_name:?} may not call this service")
}

/// What a TLS connection's client certificate allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Access {
    /// Every call: a verified certificate of a caller the server serves.
    Allowed,
    /// The health service only: no certificate.
    NoCertificate,
    /// The health service only: a verified certificate of this common name, which the
    /// server does not serve.
    Refused(String),
    /// A forwarding proxy's connection ([`callers::MESH_PROXY`]): each call is decided as
    /// the caller its `x-forwarded-client-cert` names, against these callers.
    Proxy(&'static [&'static str]),
}

impl Access {
    /// The access of a connection whose verified client certificates are `certs` (leaf
    /// first) to a server that serves `callers` (empty: any certificate of the CA).
    pub fn of(certs: Option<&[CertificateDer<'_>]>, callers: &'static [&'static str]) -> Access {
        let Some(leaf) = certs.and_then(|c| c.first()) else {
            return Access::NoCertificate;
        };
        if callers.is_empty() {
            return Access::Allowed;
        }
        let cn = x509_parser::parse_x509_certificate(leaf.as_ref())
            .ok()
            .and_then(|(_, c)| {
                c.subject()
                    .iter_common_name()
                    .next()
                    .and_then(|a| a.as_str().ok())
                    .map(str::to_string)
            })
            .unwrap_or_default();
        if callers.contains(&cn.as_str()) {
            Access::Allowed
        } else if cn == callers::MESH_PROXY {
            Access::Proxy(callers)
        } else {
            Access::Refused(cn)
        }
    }
}

/// The mutual-TLS flags every crdplane process shares (all three or none).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct MtlsArgs {
    /// CA bundle, PEM, of crdplane's services (--grpc-tls-ca-file): gRPC servers accept
    /// only clients with a certificate it signed, clients accept only servers with one.
    /// With the two flags below, every gRPC connection of this process is mutual TLS.
    #[arg(long, env = "CRDPLANE_GRPC_TLS_CA_FILE")]
    pub grpc_tls_ca_file: Option<PathBuf>,
    /// This process's certificate, PEM, for both serving and calling (needs the serverAuth
    /// and clientAuth extended key usages); reloaded when the file changes.
    #[arg(long, env = "CRDPLANE_GRPC_TLS_CERT_FILE")]
    pub grpc_tls_cert_file: Option<PathBuf>,
    /// The private key of --grpc-tls-cert-file, PEM.
    #[arg(long, env = "CRDPLANE_GRPC_TLS_KEY_FILE")]
    pub grpc_tls_key_file: Option<PathBuf>,
}

impl MtlsArgs {
    /// The three files, `None` when none is set; an error when only some are.
    pub fn files(&self) -> Result<Option<Files>, String> {
        match (
            &self.grpc_tls_ca_file,
            &self.grpc_tls_cert_file,
            &self.grpc_tls_key_file,
        ) {
            (None, None, None) => Ok(None),
            (Some(ca), Some(cert), Some(key)) => Ok(Some(Files {
                ca: ca.clone(),
                cert: cert.clone(),
                key: key.clone(),
            })),
            _ => Err(
                "--grpc-tls-ca-file, --grpc-tls-cert-file and --grpc-tls-key-file go together"
                    .into(),
            ),
        }
    }

    /// The loaded configuration, `None` when the flags are unset (see [`MtlsArgs::files`]
    /// and [`Mtls::load`]).
    pub fn load(&self) -> Result<Option<Mtls>, String> {
        Mtls::load_optional(self.files()?.as_ref())
    }
}

/// Where a process's mutual-TLS material is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Files {
    /// The services CA bundle.
    pub ca: PathBuf,
    /// The process's certificate chain.
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
}

/// A process's mutual-TLS configuration, for its listener and its calls (see the module
/// docs).
#[derive(Clone)]
pub struct Mtls {
    /// `None` for [`Mtls::anonymous`].
    server: Option<Arc<rustls::ServerConfig>>,
    client: Arc<rustls::ClientConfig>,
    pair: Option<Arc<Reloading>>,
}

impl std::fmt::Debug for Mtls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mtls").field("pair", &self.pair).finish()
    }
}

fn load_roots(ca: &Path) -> Result<RootCertStore, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(ca)
        .map_err(|e| format!("{}: {e}", ca.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: {e}", ca.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no certificate in the file", ca.display()));
    }
    let mut roots = RootCertStore::empty();
    for c in certs {
        roots
            .add(c)
            .map_err(|e| format!("{}: not a CA certificate: {e}", ca.display()))?;
    }
    Ok(roots)
}

impl Mtls {
    /// Loads the CA bundle and the process's pair; fails when either does not load.
    pub fn load(files: &Files) -> Result<Self, String> {
        let provider = provider();
        let roots = Arc::new(load_roots(&files.ca)?);
        let pair = Arc::new(Reloading::load(&files.cert, &files.key, &provider)?);
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            roots.clone(),
            provider.clone(),
        )
        .allow_unauthenticated()
        .build()
        .map_err(|e| format!("{}: {e}", files.ca.display()))?;
        let mut server = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_client_cert_verifier(verifier)
            .with_cert_resolver(pair.clone());
        server.alpn_protocols = vec![b"h2".to_vec()];
        let mut client = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_client_cert_resolver(pair.clone());
        client.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Self {
            server: Some(Arc::new(server)),
            client: Arc::new(client),
            pair: Some(pair),
        })
    }

    /// [`Mtls::load`] of a service configuration's optional files; errors name the flags.
    pub fn load_optional(files: Option<&Files>) -> Result<Option<Self>, String> {
        files
            .map(Self::load)
            .transpose()
            .map_err(|e| format!("--grpc-tls-*: {e}"))
    }

    /// A caller that verifies servers against the CA in `ca` but presents no certificate:
    /// what a health prober is. It cannot serve, and the services answer only its health
    /// checks.
    pub fn anonymous(ca: &Path) -> Result<Self, String> {
        let roots = Arc::new(load_roots(ca)?);
        let mut client = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        client.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Self {
            server: None,
            client: Arc::new(client),
            pair: None,
        })
    }

    /// The acceptor of a listener serving with this configuration, its files reloaded when
    /// they change; an error when there is no certificate of its own to serve with.
    pub fn serve(&self) -> std::io::Result<tokio_rustls::TlsAcceptor> {
        self.spawn_reloader();
        self.acceptor().ok_or_else(|| {
            std::io::Error::other("mutual TLS without a certificate of its own cannot serve")
        })
    }

    /// Handshakes accepted sockets; `None` for [`Mtls::anonymous`], which cannot serve.
    pub fn acceptor(&self) -> Option<tokio_rustls::TlsAcceptor> {
        self.server
            .as_ref()
            .map(|s| tokio_rustls::TlsAcceptor::from(s.clone()))
    }

    /// Handshakes outgoing connections.
    pub fn connector(&self) -> tokio_rustls::TlsConnector {
        tokio_rustls::TlsConnector::from(self.client.clone())
    }

    /// Reads the pair again when its files change, for the life of the process (call once,
    /// inside a Tokio runtime).
    pub fn spawn_reloader(&self) {
        if let Some(pair) = &self.pair {
            spawn_reloader(pair.clone(), RELOAD_EVERY, "gRPC TLS certificate");
        }
    }
}

impl rustls::client::ResolvesClientCert for Reloading {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        Some(self.current())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// The service of one TLS connection: calls pass when the connection presented a verified
/// client certificate of a caller the server serves; otherwise only the health service
/// answers (see the module docs).
#[derive(Clone, Debug)]
pub struct RequireClientCert<S> {
    inner: S,
    access: Access,
}

impl<S> RequireClientCert<S> {
    /// `inner` behind the check, for a connection with `access`.
    pub fn new(inner: S, access: Access) -> Self {
        Self { inner, access }
    }
}

/// Most request bytes a refused call's body is read for before its answer goes out.
const DRAIN_LIMIT: usize = 64 << 10;

impl<S, B> tower::Service<http::Request<B>> for RequireClientCert<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<Body>, Error = Infallible>,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Either<S::Future, BoxFuture<'static, Result<http::Response<Body>, Infallible>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let refusal = match &self.access {
            Access::Allowed => None,
            _ if req.uri().path().starts_with(crate::health::PATH_PREFIX) => None,
            Access::NoCertificate => Some(tonic::Status::unauthenticated(CLIENT_CERT_REQUIRED)),
            Access::Refused(cn) => Some(tonic::Status::permission_denied(caller_refused(cn))),
            Access::Proxy(callers) => match req
                .headers()
                .get(XFCC)
                .and_then(|v| v.to_str().ok())
                .and_then(forwarded_caller)
            {
                Some(cn) if callers.contains(&cn.as_str()) => None,
                Some(cn) => Some(tonic::Status::permission_denied(caller_refused(&cn))),
                None => Some(tonic::Status::unauthenticated(CLIENT_CERT_REQUIRED)),
            },
        };
        match refusal {
            None => Either::Left(self.inner.call(req)),
            // The request is read (up to a bound) before the answer: an answer that ends the
            // stream while the caller still sends makes HTTP/2 reset it, and the caller then
            // sees "stream closed while sending" instead of the refusal.
            Some(s) => Either::Right(Box::pin(async move {
                use bytes::Buf;
                use http_body_util::BodyExt;
                let mut body = Box::pin(req.into_body());
                let mut read = 0;
                while read <= DRAIN_LIMIT {
                    match body.frame().await {
                        Some(Ok(f)) => read += f.data_ref().map_or(0, Buf::remaining),
                        _ => break,
                    }
                }
                Ok(s.into_http())
            })),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        mtls: MtlsArgs,
    }

    #[test]
    fn flags_go_together() {
        let cases: &[(&[&str], Result<bool, &str>)] = &[
            (&[], Ok(false)),
            (
                &[
                    "--grpc-tls-ca-file=a",
                    "--grpc-tls-cert-file=b",
                    "--grpc-tls-key-file=c",
                ],
                Ok(true),
            ),
            (
                &["--grpc-tls-ca-file=a"],
                Err("--grpc-tls-ca-file, --grpc-tls-cert-file and --grpc-tls-key-file go together"),
            ),
            (
                &["--grpc-tls-cert-file=b", "--grpc-tls-key-file=c"],
                Err("--grpc-tls-ca-file, --grpc-tls-cert-file and --grpc-tls-key-file go together"),
            ),
        ];
        for (flags, want) in cases {
            let cli =
                Cli::try_parse_from(std::iter::once("x").chain(flags.iter().copied())).unwrap();
            let got = cli.mtls.files().map(|f| f.is_some());
            assert_eq!(got, want.map_err(String::from), "{flags:?}");
        }
    }

    #[test]
    fn forwarded_caller_reads_the_last_elements_subject_cn() {
        let cases: &[(&str, Option<&str>)] = &[
            // Envoy's SANITIZE_SET with `subject: true` (RFC 2253 subject).
            (
                r#"Hash=4a1b;Subject="CN=crdplane-gateway,O=crdplane:services""#,
                Some("crdplane-gateway"),
            ),
            (
                r#"By=spiffe://x;Hash=4a1b;Subject="O=crdplane:services,CN=crdplane-registry""#,
                Some("crdplane-registry"),
            ),
            // Several proxies: the nearest one's element is the last.
            (
                r#"Hash=1;Subject="CN=crdplane-gateway",Hash=2;Subject="CN=crdplane-validation""#,
                Some("crdplane-validation"),
            ),
            // Quoted separators and escapes stay inside their value.
            (r#"Hash=1;Subject="CN=a\,b;c,O=x""#, Some("a,b;c")),
            (r#"subject="CN=x+OU=y""#, Some("x")),
            // No certificate behind the proxy, no CN, broken quoting.
            ("Hash=1", None),
            (r#"Hash=1;Subject="O=crdplane:services""#, None),
            (r#"Hash=1;Subject="CN=crdplane-gateway"#, None),
            ("", None),
        ];
        for (value, want) in cases {
            assert_eq!(forwarded_caller(value).as_deref(), *want, "{value}");
        }
    }

    #[test]
    fn a_mesh_proxy_is_served_as_the_caller_it_forwards() {
        use std::future::Future;
        const SERVED: &[&str] = &[callers::GATEWAY];
        let ok = tower::service_fn(|_: http::Request<String>| async {
            Ok::<_, Infallible>(http::Response::new(Body::empty()))
        });
        let grpc_status = |xfcc: Option<&str>, path: &str| {
            let mut svc = RequireClientCert::new(ok, Access::Proxy(SERVED));
            let mut req = http::Request::builder().uri(path);
            if let Some(v) = xfcc {
                req = req.header(XFCC, v);
            }
            let fut = tower::Service::call(&mut svc, req.body(String::new()).unwrap());
            let mut cx = Context::from_waker(std::task::Waker::noop());
            let Poll::Ready(Ok(resp)) = std::pin::pin!(fut).poll(&mut cx) else {
                panic!("not ready");
            };
            resp.headers()
                .get("grpc-status")
                .map(|v| v.to_str().unwrap().to_string())
        };
        let call = "/crdplane.v1.Storage/Get";
        assert_eq!(
            grpc_status(Some(r#"Subject="CN=crdplane-gateway""#), call),
            None
        );
        // PERMISSION_DENIED (7) for a caller this server does not serve, UNAUTHENTICATED
        // (16) for a call whose caller showed the proxy no certificate.
        assert_eq!(
            grpc_status(Some(r#"Subject="CN=crdplane-validation""#), call).as_deref(),
            Some("7")
        );
        assert_eq!(grpc_status(None, call).as_deref(), Some("16"));
        assert_eq!(grpc_status(None, "/grpc.health.v1.Health/Check"), None);
    }

    #[test]
    fn load_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = Files {
            ca: dir.path().join("ca.crt"),
            cert: dir.path().join("tls.crt"),
            key: dir.path().join("tls.key"),
        };
        let e = Mtls::load(&missing).unwrap_err();
        assert!(e.contains("ca.crt"), "{e}");
        std::fs::write(&missing.ca, "not pem").unwrap();
        let e = Mtls::load(&missing).unwrap_err();
        assert!(e.contains("no certificate in the file"), "{e}");
    }
}
