//! OpenTelemetry traces of every crdplane process, exported over OTLP.
//!
//! Where it sits: [`init`] runs once in each binary's `main` (after the log subscriber, inside
//! the Tokio runtime the OTLP/gRPC client needs). Spans are then started at four places:
//! the gateway's trace filter (the request), [`crate::Channel`] (a client span per backend
//! call), the accept loop of every gRPC server (a server span per call, see [`ServerSpans`])
//! and the storage's Redis connection (a span per round trip). A validation span for schema
//! admission sits in the validation service's handler.
//!
//! Propagation is W3C Trace Context, as upstream's `WithTracing` filter
//! (staging/src/k8s.io/apiserver/pkg/endpoints/filters/traces.go) and client-go/gRPC-Go's
//! `otelgrpc` do it: the `traceparent` of the request parents the gateway's span; every
//! gRPC call carries the `traceparent` of the span it was made under, in the call metadata
//! that already carries the tenant ([`crate::CallContext`]), and the receiving server
//! continues the trace from it.
//!
//! Configuration is the standard `OTEL_*` environment (the OpenTelemetry SDK reads most of
//! it itself):
//! - export is on when `OTEL_TRACES_EXPORTER=otlp`, or when `OTEL_EXPORTER_OTLP_ENDPOINT` or
//!   `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set and `OTEL_TRACES_EXPORTER` is not `none`;
//!   `OTEL_SDK_DISABLED=true` turns it off;
//! - `OTEL_EXPORTER_OTLP_*` endpoint, headers and timeout as the `opentelemetry-otlp` crate
//!   reads them; `OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL` is `grpc` (the default here),
//!   `http/protobuf` or `http/json` ([`Protocol`]). Over HTTP the requests are sent by
//!   hyper on the process's own runtime ([`HyperExport`]);
//! - an `https://` endpoint is reached over TLS (rustls on ring, for both protocols), the
//!   collector verified against `OTEL_EXPORTER_OTLP_(TRACES_)CERTIFICATE` (a PEM bundle) or
//!   else the system's roots, with a client certificate for mutual TLS when
//!   `OTEL_EXPORTER_OTLP_(TRACES_)CLIENT_CERTIFICATE` and `..._CLIENT_KEY` name one
//!   ([`ExportTls`]; the files are read at start, and one that does not load stops the
//!   process with its variable named);
//! - `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG` as the SDK reads them; unset, the
//!   sampler is [`DEFAULT_SAMPLER`] (a parent's decision is followed; a trace started here
//!   is kept with probability [`DEFAULT_RATIO`]), so the cost stays bounded under load;
//! - `OTEL_SERVICE_NAME` (else the binary's name, e.g. `crdplane-gateway`),
//!   `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_BSP_*` for the batch processor.
//!
//! Why the OpenTelemetry API directly rather than a `tracing` bridge
//! (`tracing-opentelemetry`): with export off nothing here runs at all (one relaxed load
//! per span site), and with export on a span the sampler drops is a non-recording span — no
//! attributes are kept and nothing reaches the exporter. A bridge builds every `tracing`
//! span's data before the sampler sees it. Span attributes are metadata only (tenant, verb,
//! group, resource, namespace, status codes, the audit id), never object contents.

use std::sync::OnceLock;

use http::HeaderValue;
use opentelemetry::trace::{
    Span as _, SpanContext, SpanId, SpanKind, TraceContextExt, TraceFlags, TraceId, TraceState,
    Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{Sampler, SdkTracer, SdkTracerProvider};

/// The sampler when `OTEL_TRACES_SAMPLER` is unset.
pub const DEFAULT_SAMPLER: &str = "parentbased_traceidratio";
/// Its ratio: one trace in a hundred started here.
pub const DEFAULT_RATIO: f64 = 0.01;

static TRACER: OnceLock<SdkTracer> = OnceLock::new();

/// Whether the sampler follows the parent's decision (the default and every
/// `parentbased_*` sampler): then a call whose parent is not sampled needs no span at all.
static PARENT_BASED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// The probability with which the sampler keeps a trace this process starts (no parent), as
/// `f64` bits; NaN when the configured sampler's root decision is not a known ratio (then
/// the SDK decides alone). See [`start`].
static ROOT_RATIO: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(0x7ff8_0000_0000_0000);

thread_local! {
    /// The trace id [`start`] decided to keep, taken by [`PreDecidedIds`] while the SDK
    /// builds that span (on the same thread, within the call).
    static ROOT_TRACE_ID: std::cell::Cell<Option<TraceId>> = const { std::cell::Cell::new(None) };
}

/// The SDK's random ids, except a root trace id [`start`] already decided on.
#[derive(Debug, Default)]
struct PreDecidedIds(opentelemetry_sdk::trace::RandomIdGenerator);

impl opentelemetry_sdk::trace::IdGenerator for PreDecidedIds {
    fn new_trace_id(&self) -> TraceId {
        ROOT_TRACE_ID
            .with(std::cell::Cell::take)
            .unwrap_or_else(|| self.0.new_trace_id())
    }
    fn new_span_id(&self) -> SpanId {
        self.0.new_span_id()
    }
}

/// The root decision of `OTEL_TRACES_SAMPLER`/`_ARG` when it is a ratio (the default
/// [`DEFAULT_RATIO`], `always_on`/`off`, `traceidratio` and their `parentbased_` forms);
/// `None` for any other sampler or an argument that does not parse.
fn root_ratio(env: &dyn Fn(&str) -> Option<String>) -> Option<f64> {
    let Some(sampler) = env("OTEL_TRACES_SAMPLER") else {
        return Some(DEFAULT_RATIO);
    };
    match sampler.trim() {
        "always_on" | "parentbased_always_on" => Some(1.0),
        "always_off" | "parentbased_always_off" => Some(0.0),
        "traceidratio" | "parentbased_traceidratio" => match env("OTEL_TRACES_SAMPLER_ARG") {
            None => Some(1.0),
            Some(a) => a
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|r| (0.0..=1.0).contains(r)),
        },
        _ => None,
    }
}

/// Whether the SDK's `TraceIdRatioBased` keeps `trace` at `ratio` (its rule: the trace id's
/// low 64 bits, shifted right once, below `ratio` × 2⁶³).
fn ratio_keeps(trace: TraceId, ratio: f64) -> bool {
    if ratio >= 1.0 {
        return true;
    }
    let bound = (ratio.max(0.0) * (1u64 << 63) as f64) as u64;
    let low = u64::from_be_bytes(trace.to_bytes()[8..].try_into().expect("8 bytes"));
    (low >> 1) < bound
}

/// Whether a `traceparent` value's flags say "sampled" (bit 0 of the last two hex digits).
pub fn is_sampled(traceparent: &[u8]) -> bool {
    sampled(traceparent)
}

fn sampled(traceparent: &[u8]) -> bool {
    traceparent
        .last()
        .is_some_and(|d| matches!(d, b'1' | b'3' | b'5' | b'7' | b'9' | b'b' | b'd' | b'f'))
}

/// Whether spans are recorded and exported in this process.
#[inline]
pub fn enabled() -> bool {
    TRACER.get().is_some()
}

/// Flushes and stops the exporter when dropped (keep it in `main` until the process ends).
pub struct Guard(SdkTracerProvider);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.shutdown();
    }
}

/// The OTLP transport the environment names (`OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, else
/// `OTEL_EXPORTER_OTLP_PROTOCOL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// `grpc`: OTLP/gRPC, the default when neither variable is set.
    Grpc,
    /// `http/protobuf`: OTLP/HTTP, protobuf bodies.
    HttpProtobuf,
    /// `http/json`: OTLP/HTTP, JSON bodies.
    HttpJson,
}

impl Protocol {
    /// The protocol `env` names; an error naming the variable for one this build lacks, or
    /// for an `https://` endpoint with an HTTP protocol.
    pub fn of(env: &dyn Fn(&str) -> Option<String>) -> Result<Self, String> {
        let mut named = None;
        for k in [
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ] {
            if let Some(p) = env(k).filter(|p| !p.trim().is_empty()) {
                named = Some((k, p.trim().to_string()));
                break;
            }
        }
        let p = match &named {
            None => return Ok(Protocol::Grpc),
            Some((_, p)) if p == "grpc" => return Ok(Protocol::Grpc),
            Some((_, p)) if p == "http/protobuf" => Protocol::HttpProtobuf,
            Some((_, p)) if p == "http/json" => Protocol::HttpJson,
            Some((k, p)) => {
                return Err(format!(
                    "{k}={p:?}: the OTLP protocol is \"grpc\", \"http/protobuf\" or \"http/json\""
                ));
            }
        };
        Ok(p)
    }
}

/// The first of `keys` set to a non-blank value in `env`: the key and the value.
fn first_set(
    env: &dyn Fn(&str) -> Option<String>,
    keys: [&'static str; 2],
) -> Option<(&'static str, String)> {
    keys.into_iter().find_map(|k| {
        env(k)
            .filter(|v| !v.trim().is_empty())
            .map(|v| (k, v.trim().to_string()))
    })
}

/// Whether the OTLP endpoint `env` names is an `https://` one (the traces-specific
/// variable first, as the exporter reads them).
pub fn https_endpoint(env: &dyn Fn(&str) -> Option<String>) -> bool {
    first_set(
        env,
        [
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
        ],
    )
    .is_some_and(|(_, e)| e.to_ascii_lowercase().starts_with("https://"))
}

/// The TLS client settings of OTLP export (the specification's
/// `OTEL_EXPORTER_OTLP_[TRACES_]CERTIFICATE`, `..._CLIENT_CERTIFICATE` and `..._CLIENT_KEY`,
/// traces-specific first), read from their files once at start. Used only for an
/// `https://` endpoint.
#[derive(Clone, Default)]
pub struct ExportTls {
    /// PEM bundle of the CAs the collector's certificate is verified against; `None`: the
    /// system's roots.
    ca_pem: Option<Vec<u8>>,
    /// PEM certificate chain and key presented to the collector (mutual TLS).
    client: Option<(Vec<u8>, Vec<u8>)>,
}

impl std::fmt::Debug for ExportTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExportTls")
            .field("ca", &self.ca_pem.is_some())
            .field("client_certificate", &self.client.is_some())
            .finish()
    }
}

impl ExportTls {
    /// Reads the files the environment names; an error names the variable of a file that
    /// cannot be read, or a client certificate given without its key (or the reverse).
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<Self, String> {
        let read = |(k, path): (&str, String)| {
            std::fs::read(&path).map_err(|e| format!("{k}={path:?}: {e}"))
        };
        let ca_pem = first_set(
            env,
            [
                "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
                "OTEL_EXPORTER_OTLP_CERTIFICATE",
            ],
        )
        .map(read)
        .transpose()?;
        let cert = first_set(
            env,
            [
                "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE",
                "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
            ],
        );
        let key = first_set(
            env,
            [
                "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY",
                "OTEL_EXPORTER_OTLP_CLIENT_KEY",
            ],
        );
        let client = match (cert, key) {
            (None, None) => None,
            (Some(c), Some(k)) => Some((read(c)?, read(k)?)),
            (Some((k, _)), None) | (None, Some((k, _))) => {
                return Err(format!(
                    "{k} is set without its pair: OTLP mutual TLS needs both \
                     OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY"
                ));
            }
        };
        Ok(Self { ca_pem, client })
    }

    /// The rustls client of OTLP/HTTP: the CA bundle's roots (else the system's), the
    /// client pair when given.
    pub fn rustls_config(&self) -> Result<std::sync::Arc<rustls::ClientConfig>, String> {
        use rustls::pki_types::pem::PemObject as _;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let mut roots = rustls::RootCertStore::empty();
        match &self.ca_pem {
            Some(pem) => {
                for c in CertificateDer::pem_slice_iter(pem) {
                    let c = c.map_err(|e| format!("OTEL_EXPORTER_OTLP_CERTIFICATE: {e}"))?;
                    roots
                        .add(c)
                        .map_err(|e| format!("OTEL_EXPORTER_OTLP_CERTIFICATE: {e}"))?;
                }
                if roots.is_empty() {
                    return Err("OTEL_EXPORTER_OTLP_CERTIFICATE: no certificate in the file".into());
                }
            }
            None => {
                let found = rustls_native_certs::load_native_certs();
                roots.add_parsable_certificates(found.certs);
                if roots.is_empty() {
                    return Err(format!(
                        "OTLP over TLS: no system root certificates could be loaded \
                         (give OTEL_EXPORTER_OTLP_CERTIFICATE): {:?}",
                        found.errors
                    ));
                }
            }
        }
        let builder = rustls::ClientConfig::builder_with_provider(crate::tls::provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots);
        let cfg = match &self.client {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let chain = CertificateDer::pem_slice_iter(cert)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| format!("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE: {e}"))?;
                let key = PrivateKeyDer::from_pem_slice(key)
                    .map_err(|e| format!("OTEL_EXPORTER_OTLP_CLIENT_KEY: {e}"))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| format!("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE: {e}"))?
            }
        };
        // ALPN (`http/1.1`) is the connector's to set.
        Ok(std::sync::Arc::new(cfg))
    }

    /// The tonic TLS settings of OTLP/gRPC: the CA bundle (else the system's roots) and the
    /// client identity when given.
    pub fn tonic_config(&self) -> tonic::transport::ClientTlsConfig {
        let mut c = tonic::transport::ClientTlsConfig::new();
        c = match &self.ca_pem {
            Some(pem) => c.ca_certificate(tonic::transport::Certificate::from_pem(pem)),
            None => c.with_native_roots(),
        };
        if let Some((cert, key)) = &self.client {
            c = c.identity(tonic::transport::Identity::from_pem(cert, key));
        }
        c
    }
}

/// Whether the environment asks for trace export (see the module docs); an error for a
/// setting this build cannot honour.
pub fn wanted(env: &dyn Fn(&str) -> Option<String>) -> Result<bool, String> {
    let set = |k: &str| env(k).is_some_and(|v| !v.trim().is_empty());
    if env("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
        return Ok(false);
    }
    let on = match env("OTEL_TRACES_EXPORTER").as_deref().map(str::trim) {
        None | Some("") => {
            set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        }
        Some("none") => false,
        Some("otlp") => true,
        Some(other) => {
            return Err(format!(
                "OTEL_TRACES_EXPORTER={other:?}: this build exports traces with \"otlp\" (or \"none\")"
            ));
        }
    };
    if on {
        Protocol::of(env)?;
    }
    Ok(on)
}

/// Starts trace export when the environment asks for it (see the module docs), naming the
/// process `service` unless `OTEL_SERVICE_NAME` does. Must run inside the Tokio runtime.
pub fn init(service: &str) -> Result<Option<Guard>, String> {
    let env = |k: &str| std::env::var(k).ok();
    if !wanted(&env)? {
        return Ok(None);
    }
    // TLS only for an https:// endpoint; its files are read (and checked) here, at start.
    let tls = if https_endpoint(&env) {
        Some(ExportTls::from_env(&env)?)
    } else {
        None
    };
    let exporter = match Protocol::of(&env)? {
        Protocol::Grpc => {
            use opentelemetry_otlp::WithTonicConfig as _;
            let b = opentelemetry_otlp::SpanExporter::builder().with_tonic();
            match &tls {
                Some(t) => b.with_tls_config(t.tonic_config()).build(),
                None => b.build(),
            }
        }
        p => {
            use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};
            let protocol = match p {
                Protocol::HttpJson => opentelemetry_otlp::Protocol::HttpJson,
                _ => opentelemetry_otlp::Protocol::HttpBinary,
            };
            opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(protocol)
                .with_http_client(HyperExport::new(
                    export_timeout(&env),
                    tls.as_ref().map(ExportTls::rustls_config).transpose()?,
                ))
                .build()
        }
    }
    .map_err(|e| format!("OTLP trace exporter: {e}"))?;
    let mut resource = opentelemetry_sdk::Resource::builder();
    let named = env("OTEL_SERVICE_NAME").is_some_and(|v| !v.is_empty())
        || env("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|v| v.contains("service.name="));
    if !named {
        resource = resource.with_service_name(service.to_string());
    }
    let mut b = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build());
    PARENT_BASED.store(
        env("OTEL_TRACES_SAMPLER").is_none_or(|v| v.trim().starts_with("parentbased_")),
        std::sync::atomic::Ordering::Relaxed,
    );
    if env("OTEL_TRACES_SAMPLER").is_none() {
        b = b.with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
            DEFAULT_RATIO,
        ))));
    }
    ROOT_RATIO.store(
        root_ratio(&env).unwrap_or(f64::NAN).to_bits(),
        std::sync::atomic::Ordering::Relaxed,
    );
    b = b.with_id_generator(PreDecidedIds::default());
    let provider = b.build();
    let tracer = provider.tracer("crdplane");
    TRACER
        .set(tracer)
        .map_err(|_| "telemetry::init called twice".to_string())?;
    Ok(Some(Guard(provider)))
}

/// The HTTP client of the OTLP/HTTP exporter: hyper's pooled client, run on the runtime
/// [`init`] was called in. The batch processor exports from a thread of its own, outside
/// any runtime; each request is spawned onto the process's runtime and awaited from there,
/// so the connection pool lives on one runtime for the whole process. Each request, its
/// answer's body included, must end within the exporter's timeout, as the
/// `opentelemetry_http::HttpClient` contract asks.
#[derive(Debug, Clone)]
pub struct HyperExport {
    client: hyper_util::client::legacy::Client<
        hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
        http_body_util::Full<bytes::Bytes>,
    >,
    runtime: tokio::runtime::Handle,
    timeout: std::time::Duration,
}

/// The OTLP export timeout: `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`, else
/// `OTEL_EXPORTER_OTLP_TIMEOUT` (milliseconds), else the specification's 10 s.
pub fn export_timeout(env: &dyn Fn(&str) -> Option<String>) -> std::time::Duration {
    [
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
    ]
    .iter()
    .find_map(|k| env(k).and_then(|v| v.trim().parse::<u64>().ok()))
    .map(std::time::Duration::from_millis)
    .unwrap_or(std::time::Duration::from_secs(10))
}

/// The largest collector answer read (the `opentelemetry-http` clients' bound).
const MAX_EXPORT_RESPONSE: usize = 4 << 20;

impl HyperExport {
    /// A client on the current Tokio runtime (panics outside one) whose requests end
    /// within `timeout`: `https://` ones over `tls` (see [`ExportTls::rustls_config`]),
    /// refused without it; `http://` ones in the clear.
    pub fn new(
        timeout: std::time::Duration,
        tls: Option<std::sync::Arc<rustls::ClientConfig>>,
    ) -> Self {
        // Without TLS settings (an http:// endpoint) the connector gets a client that
        // trusts nothing, so an https:// URL could never be reached by accident.
        let tls = tls.unwrap_or_else(|| {
            std::sync::Arc::new(
                rustls::ClientConfig::builder_with_provider(crate::tls::provider())
                    .with_safe_default_protocol_versions()
                    .expect("ring supports the default TLS versions")
                    .with_root_certificates(rustls::RootCertStore::empty())
                    .with_no_client_auth(),
            )
        });
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config((*tls).clone())
            .https_or_http()
            .enable_http1()
            .build();
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build(connector);
        Self {
            client,
            runtime: tokio::runtime::Handle::current(),
            timeout,
        }
    }
}

#[tonic::async_trait]
impl opentelemetry_http::HttpClient for HyperExport {
    async fn send_bytes(
        &self,
        request: http::Request<bytes::Bytes>,
    ) -> Result<http::Response<bytes::Bytes>, opentelemetry_http::HttpError> {
        use http_body_util::BodyExt as _;
        let client = self.client.clone();
        let timeout = self.timeout;
        let call = async move {
            let resp = client
                .request(request.map(http_body_util::Full::new))
                .await?;
            let (parts, body) = resp.into_parts();
            let body = http_body_util::Limited::new(body, MAX_EXPORT_RESPONSE)
                .collect()
                .await?
                .to_bytes();
            Ok::<_, opentelemetry_http::HttpError>(http::Response::from_parts(parts, body))
        };
        let bounded = async move {
            match tokio::time::timeout(timeout, call).await {
                Ok(r) => r,
                Err(_) => {
                    Err(format!("no answer from the OTLP collector within {timeout:?}").into())
                }
            }
        };
        self.runtime.spawn(bounded).await?
    }
}

/// A span of this process; ended when dropped (or by [`Span::end`]).
pub struct Span {
    inner: opentelemetry_sdk::trace::Span,
}

impl std::fmt::Debug for Span {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Span({})", self.traceparent_string())
    }
}

/// The parent a `traceparent` value names (a remote span context), if it is valid, with
/// the vendor entries of `tracestate` (dropped when they do not parse).
fn parent_of(traceparent: &[u8], tracestate: Option<&str>) -> Option<SpanContext> {
    if !crate::context::valid_traceparent(traceparent) {
        return None;
    }
    let s = std::str::from_utf8(traceparent).ok()?;
    let trace = TraceId::from_hex(&s[3..35]).ok()?;
    let span = SpanId::from_hex(&s[36..52]).ok()?;
    let flags = u8::from_str_radix(&s[53..55], 16).ok()?;
    let state = tracestate
        .and_then(|s| s.parse::<TraceState>().ok())
        .unwrap_or_default();
    Some(SpanContext::new(
        trace,
        span,
        TraceFlags::new(flags),
        true,
        state,
    ))
}

/// Starts a span named `name` of `kind` under the span `parent` names (a `traceparent`
/// value, with the caller's `tracestate`, which the span keeps); a new trace when there is
/// none or it is invalid. `None` while export is off, and when the sampler drops the span
/// (decided before the SDK builds one, for the samplers whose decision is known here).
pub fn start(
    name: &'static str,
    kind: SpanKind,
    parent: Option<&[u8]>,
    tracestate: Option<&str>,
) -> Option<Span> {
    use std::sync::atomic::Ordering::Relaxed;
    let tracer = TRACER.get()?;
    // The sampler's decision is made here first when it is known, so that a request the
    // sampler would drop (most of them, at the default ratio) builds no span at all: the
    // SDK builds one (ids, sampler call, span context) even to drop it.
    let cx = match parent.and_then(|p| parent_of(p, tracestate)) {
        // A parent-based sampler follows the parent.
        Some(sc) if !sc.is_sampled() && PARENT_BASED.load(Relaxed) => return None,
        Some(sc) => Context::new().with_remote_span_context(sc),
        None => {
            let ratio = f64::from_bits(ROOT_RATIO.load(Relaxed));
            if !ratio.is_nan() {
                use opentelemetry_sdk::trace::IdGenerator as _;
                let trace = opentelemetry_sdk::trace::RandomIdGenerator::default().new_trace_id();
                if !ratio_keeps(trace, ratio) {
                    return None;
                }
                // The SDK's root trace id is this one, so its sampler agrees.
                ROOT_TRACE_ID.with(|c| c.set(Some(trace)));
            }
            Context::new()
        }
    };
    let inner = tracer.build_with_context(
        opentelemetry::trace::SpanBuilder::from_name(name).with_kind(kind),
        &cx,
    );
    ROOT_TRACE_ID.with(|c| c.set(None));
    Some(Span { inner })
}

/// Starts a child of the span the current call context names (see
/// [`crate::CallContext::scope`]); `None` while export is off, outside a call context, or
/// when the context's trace is not sampled (a round trip of an unsampled request costs
/// nothing here).
pub fn child_of_current(name: &'static str, kind: SpanKind) -> Option<Span> {
    if !enabled() {
        return None;
    }
    let ctx = crate::CallContext::current()?;
    let tp = ctx.traceparent()?;
    if !sampled(tp.as_bytes()) {
        return None;
    }
    start(name, kind, Some(tp.as_bytes()), ctx.tracestate())
}

impl Span {
    /// Whether this span is recorded (the sampler kept it).
    pub fn is_recording(&self) -> bool {
        self.inner.is_recording()
    }

    /// Sets a string attribute (only while recording).
    pub fn set(&mut self, key: &'static str, value: impl Into<String>) {
        if self.inner.is_recording() {
            self.inner.set_attribute(KeyValue::new(key, value.into()));
        }
    }

    /// Sets an integer attribute (only while recording).
    pub fn set_i64(&mut self, key: &'static str, value: i64) {
        if self.inner.is_recording() {
            self.inner.set_attribute(KeyValue::new(key, value));
        }
    }

    /// Renames the span (e.g. once the request is parsed).
    pub fn rename(&mut self, name: String) {
        if self.inner.is_recording() {
            self.inner.update_name(name);
        }
    }

    /// Marks the span as failed, with a short description (never object contents).
    pub fn fail(&mut self, description: impl Into<String>) {
        if self.inner.is_recording() {
            self.inner
                .set_status(opentelemetry::trace::Status::error(description.into()));
        }
    }

    /// The trace id, as 32 hex digits.
    pub fn trace_id(&self) -> String {
        self.inner.span_context().trace_id().to_string()
    }

    fn traceparent_string(&self) -> String {
        let sc = self.inner.span_context();
        format!(
            "00-{}-{}-{:02x}",
            sc.trace_id(),
            sc.span_id(),
            sc.trace_flags().to_u8()
        )
    }

    /// The `traceparent` that makes a callee's span a child of this one.
    pub fn traceparent(&self) -> HeaderValue {
        HeaderValue::from_str(&self.traceparent_string()).expect("hex digits and dashes")
    }

    /// Ends the span now.
    pub fn end(mut self) {
        self.inner.end();
    }
}

pub use opentelemetry::trace::SpanKind as Kind;

/// A tower service of a gRPC server that runs each call made for a traced request under a
/// server span (when export is on): the span continues the caller's `traceparent`, is named
/// by the method path,
/// carries the tenant and the `grpc-status` of a trailers-only answer, and the handler runs
/// in a [`crate::CallContext`] whose `traceparent` names it, so the handler's own calls and
/// Redis round trips become its children. With export off, calls pass straight through.
#[derive(Debug, Clone)]
pub struct ServerSpans<S> {
    inner: S,
}

impl<S> ServerSpans<S> {
    /// Wraps `inner`.
    pub fn new(inner: S) -> Self {
        Self { inner }
    }
}

impl<S, B, RB> tower::Service<http::Request<B>> for ServerSpans<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<RB>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    RB: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = futures::future::Either<
        S::Future,
        std::pin::Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>,
    >;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        if !enabled() {
            return futures::future::Either::Left(self.inner.call(req));
        }
        // Only calls made for a traced request continue a trace: a call without a
        // `traceparent` (health checks, the registry's background work, a batch of
        // untraced requests) starts none, so such calls do not fill the trace store with
        // one-span roots.
        // Nor does a call whose trace the caller did not sample, when the sampler follows
        // the parent (it would only make a span that records nothing).
        let Some(parent) = req
            .headers()
            .get(crate::context::TRACEPARENT)
            .filter(|p| {
                sampled(p.as_bytes()) || !PARENT_BASED.load(std::sync::atomic::Ordering::Relaxed)
            })
            .cloned()
        else {
            return futures::future::Either::Left(self.inner.call(req));
        };
        let state = req
            .headers()
            .get(crate::context::TRACESTATE)
            .and_then(|v| v.to_str().ok());
        let Some(mut span) = start(
            "grpc.server",
            SpanKind::Server,
            Some(parent.as_bytes()),
            state,
        ) else {
            return futures::future::Either::Left(self.inner.call(req));
        };
        let path = req.uri().path().trim_start_matches('/').to_string();
        if span.is_recording() {
            if let Some((service, method)) = path.split_once('/') {
                span.set("rpc.system", "grpc");
                span.set("rpc.service", service.to_string());
                span.set("rpc.method", method.to_string());
            }
            if let Some(t) = req
                .headers()
                .get(crate::context::TENANT)
                .and_then(|v| v.to_str().ok())
            {
                span.set("tenant", t.to_string());
            }
        }
        span.rename(path);
        req.headers_mut()
            .insert(crate::context::TRACEPARENT, span.traceparent());
        let ctx = crate::CallContext::from_headers(req.headers());
        let fut = self.inner.call(req);
        futures::future::Either::Right(Box::pin(async move {
            let out = ctx.scope(fut).await;
            if let Ok(resp) = &out
                && let Some(code) = resp
                    .headers()
                    .get("grpc-status")
                    .and_then(|v| v.to_str().ok()?.parse::<i64>().ok())
            {
                span.set_i64("rpc.grpc.status_code", code);
                if code != 0 {
                    span.fail(format!("grpc-status {code}"));
                }
            }
            drop(span);
            out
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn export_is_asked_by_the_standard_variables() {
        assert_eq!(wanted(&env(&[])), Ok(false));
        assert_eq!(
            wanted(&env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317")])),
            Ok(true)
        );
        assert_eq!(
            wanted(&env(&[(
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://c:4317"
            )])),
            Ok(true)
        );
        assert_eq!(wanted(&env(&[("OTEL_TRACES_EXPORTER", "otlp")])), Ok(true));
        assert_eq!(
            wanted(&env(&[
                ("OTEL_TRACES_EXPORTER", "none"),
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317")
            ])),
            Ok(false)
        );
        assert_eq!(
            wanted(&env(&[
                ("OTEL_SDK_DISABLED", "true"),
                ("OTEL_TRACES_EXPORTER", "otlp")
            ])),
            Ok(false)
        );
        assert!(
            wanted(&env(&[("OTEL_TRACES_EXPORTER", "zipkin")]))
                .unwrap_err()
                .contains("\"otlp\"")
        );
        assert!(
            wanted(&env(&[
                ("OTEL_TRACES_EXPORTER", "otlp"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/thrift")
            ]))
            .unwrap_err()
            .contains("\"grpc\", \"http/protobuf\" or \"http/json\"")
        );
        assert_eq!(
            wanted(&env(&[
                ("OTEL_TRACES_EXPORTER", "otlp"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
            ])),
            Ok(true)
        );
    }

    /// Environment variables, and the protocol (or the start of the error) they give.
    type ProtocolCase = (
        &'static [(&'static str, &'static str)],
        Result<Protocol, &'static str>,
    );

    #[test]
    fn the_protocol_table() {
        let cases: &[ProtocolCase] = &[
            (&[], Ok(Protocol::Grpc)),
            (
                &[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")],
                Ok(Protocol::Grpc),
            ),
            (
                &[("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")],
                Ok(Protocol::HttpProtobuf),
            ),
            (
                &[("OTEL_EXPORTER_OTLP_PROTOCOL", " http/json ")],
                Ok(Protocol::HttpJson),
            ),
            // The signal's own variable wins.
            (
                &[
                    ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
                    ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"),
                ],
                Ok(Protocol::HttpProtobuf),
            ),
            (
                &[("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "HTTP")],
                Err("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=\"HTTP\": the OTLP protocol is"),
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector:4318"),
                ],
                Ok(Protocol::HttpProtobuf),
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
                    (
                        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                        "http://c:4318/v1/traces",
                    ),
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://ignored:4318"),
                ],
                Ok(Protocol::HttpProtobuf),
            ),
        ];
        for (vars, want) in cases {
            let vars = vars.to_vec();
            let env = move |k: &str| {
                vars.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            };
            match (Protocol::of(&env), want) {
                (Ok(got), Ok(w)) => assert_eq!(got, *w),
                (Err(e), Err(w)) => assert!(e.starts_with(w), "{e}"),
                (got, w) => panic!("{got:?}, want {w:?}"),
            }
        }
    }

    #[test]
    fn export_tls_reads_its_files_and_names_the_variable_that_fails() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.pem").display().to_string();
        let env_of = |vars: Vec<(&'static str, String)>| {
            move |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone())
        };
        // Nothing set: the system's roots, no client certificate.
        let none = ExportTls::from_env(&env_of(vec![])).unwrap();
        assert!(none.ca_pem.is_none() && none.client.is_none());
        // A file that cannot be read names its (traces-specific) variable.
        let e = ExportTls::from_env(&env_of(vec![
            ("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", missing.clone()),
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/ignored".into()),
        ]))
        .unwrap_err();
        assert!(
            e.starts_with("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE="),
            "{e}"
        );
        // A client certificate without its key is refused.
        let e = ExportTls::from_env(&env_of(vec![(
            "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
            missing,
        )]))
        .unwrap_err();
        assert!(e.contains("without its pair"), "{e}");
        // A CA file without a certificate in it is refused when the client is built.
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate").unwrap();
        let t = ExportTls::from_env(&env_of(vec![(
            "OTEL_EXPORTER_OTLP_CERTIFICATE",
            empty.display().to_string(),
        )]))
        .unwrap();
        let e = t.rustls_config().unwrap_err();
        assert!(e.starts_with("OTEL_EXPORTER_OTLP_CERTIFICATE"), "{e}");
        // Which endpoint is TLS: the traces-specific one wins.
        assert!(https_endpoint(&env_of(vec![(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "HTTPS://c:4317".into()
        )])));
        assert!(!https_endpoint(&env_of(vec![
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:4318".into()),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://c:4317".into()),
        ])));
    }

    #[test]
    fn the_root_decision_is_the_sdks_ratio_rule() {
        let env_of = |vars: Vec<(&'static str, &'static str)>| {
            move |k: &str| {
                vars.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        for (vars, want) in [
            (vec![], Some(DEFAULT_RATIO)),
            (
                vec![("OTEL_TRACES_SAMPLER", "parentbased_always_on")],
                Some(1.0),
            ),
            (vec![("OTEL_TRACES_SAMPLER", "always_off")], Some(0.0)),
            (vec![("OTEL_TRACES_SAMPLER", "traceidratio")], Some(1.0)),
            (
                vec![
                    ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
                    ("OTEL_TRACES_SAMPLER_ARG", "0.25"),
                ],
                Some(0.25),
            ),
            (
                vec![
                    ("OTEL_TRACES_SAMPLER", "traceidratio"),
                    ("OTEL_TRACES_SAMPLER_ARG", "lots"),
                ],
                None,
            ),
            (vec![("OTEL_TRACES_SAMPLER", "jaeger_remote")], None),
        ] {
            assert_eq!(root_ratio(&env_of(vars.clone())), want, "{vars:?}");
        }
        // The SDK's own sampler, given the same trace ids, decides the same.
        use opentelemetry_sdk::trace::{
            IdGenerator as _, RandomIdGenerator, SamplingDecision, ShouldSample as _,
        };
        for ratio in [0.0, 0.01, 0.5, 0.99, 1.0] {
            let sdk = Sampler::TraceIdRatioBased(ratio);
            for _ in 0..2000 {
                let id = RandomIdGenerator::default().new_trace_id();
                let d = sdk
                    .should_sample(None, id, "x", &SpanKind::Server, &[], &[])
                    .decision;
                assert_eq!(
                    ratio_keeps(id, ratio),
                    d == SamplingDecision::RecordAndSample,
                    "{ratio} {id}"
                );
            }
        }
    }

    #[test]
    fn a_traceparent_names_a_remote_parent() {
        let sc = parent_of(
            b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            None,
        )
        .unwrap();
        assert_eq!(
            sc.trace_id().to_string(),
            "0af7651916cd43dd8448eb211c80319c"
        );
        assert_eq!(sc.span_id().to_string(), "b7ad6b7169203331");
        assert!(sc.is_sampled());
        assert!(sc.is_remote());
        assert!(
            parent_of(
                b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00",
                None
            )
            .is_some_and(|s| !s.is_sampled())
        );
        assert!(
            parent_of(
                b"00-00000000000000000000000000000000-b7ad6b7169203331-01",
                None
            )
            .is_none()
        );
        assert!(parent_of(b"garbage", None).is_none());
        // The caller's vendor entries ride along; a tracestate that does not parse is
        // dropped, not the parent.
        let tp = b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        let sc = parent_of(tp, Some("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")).unwrap();
        assert_eq!(sc.trace_state().get("congo"), Some("t61rcWkgMzE"));
        assert_eq!(
            sc.trace_state().header(),
            "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
        );
        let sc = parent_of(tp, Some("not a list entry")).unwrap();
        assert_eq!(sc.trace_state().header(), "");
    }

    #[test]
    fn sampled_flag() {
        let tp = |f: &str| format!("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-{f}");
        for (flags, want) in [
            ("01", true),
            ("00", false),
            ("03", true),
            ("02", false),
            ("ff", true),
        ] {
            assert_eq!(sampled(tp(flags).as_bytes()), want, "{flags}");
        }
    }

    #[test]
    fn nothing_is_started_while_export_is_off() {
        // This test binary never calls init.
        assert!(!enabled());
        assert!(start("x", SpanKind::Internal, None, None).is_none());
        assert!(child_of_current("x", SpanKind::Client).is_none());
    }
}
