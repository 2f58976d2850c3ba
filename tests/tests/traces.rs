//! OpenTelemetry traces end to end: the stack's four services export over OTLP/gRPC (the
//! standard `OTEL_*` variables) to a collector of the test's own (opentelemetry-proto's
//! `TraceService`, served on 127.0.0.1:0); a custom resource created with a W3C
//! `traceparent` yields one trace whose spans come from the gateway, the validation and the
//! storage service, each parented on the one before it, down to the Redis round trip —
//! and no span names object contents.

use crdplane_tests::Stack;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use serde_json::json;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One received span, flattened.
#[derive(Debug, Clone)]
struct Got {
    service: String,
    name: String,
    trace: String,
    id: String,
    parent: String,
    /// The span's W3C trace state (`tracestate`).
    state: String,
    attrs: HashMap<String, String>,
}

#[derive(Clone, Default)]
struct Collector {
    spans: Arc<Mutex<Vec<Got>>>,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn text(v: &Option<opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        Some(Any::StringValue(s)) => s.clone(),
        Some(Any::IntValue(i)) => i.to_string(),
        Some(Any::BoolValue(b)) => b.to_string(),
        Some(Any::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    }
}

impl Collector {
    /// Keeps the spans of one export.
    fn record(&self, request: ExportTraceServiceRequest) {
        let mut out = self.spans.lock().unwrap();
        for rs in request.resource_spans {
            let service = rs
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|kv| kv.key == "service.name")
                .map(|kv| text(&kv.value))
                .unwrap_or_default();
            for ss in rs.scope_spans {
                for s in ss.spans {
                    out.push(Got {
                        service: service.clone(),
                        name: s.name,
                        trace: hex(&s.trace_id),
                        id: hex(&s.span_id),
                        parent: hex(&s.parent_span_id),
                        state: s.trace_state.clone(),
                        attrs: s
                            .attributes
                            .iter()
                            .map(|kv| (kv.key.clone(), text(&kv.value)))
                            .collect(),
                    });
                }
            }
        }
    }
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.record(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

/// Serves OTLP/HTTP on one connection into `c`: `POST /v1/traces` with a protobuf body is
/// recorded; anything else is a 400.
async fn serve_otlp_http<I>(io: I, c: Collector)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use http_body_util::BodyExt as _;
    use prost::Message as _;
    let svc = hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
        let c = c.clone();
        async move {
            let otlp = req.method() == http::Method::POST
                && req.uri().path() == "/v1/traces"
                && req
                    .headers()
                    .get("content-type")
                    .is_some_and(|v| v == "application/x-protobuf");
            let body = req.into_body().collect().await?.to_bytes();
            let (status, out) = match ExportTraceServiceRequest::decode(body) {
                Ok(r) if otlp => {
                    c.record(r);
                    (200, ExportTraceServiceResponse::default().encode_to_vec())
                }
                _ => (400, Vec::new()),
            };
            let resp = http::Response::builder()
                .status(status)
                .header("content-type", "application/x-protobuf")
                .body(http_body_util::Full::new(bytes::Bytes::from(out)))
                .unwrap();
            Ok::<_, hyper::Error>(resp)
        }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(hyper_util::rt::TokioIo::new(io), svc)
        .await;
}

/// The collector over OTLP/HTTP ([`serve_otlp_http`]), served on `rt` on 127.0.0.1:0; its
/// base URL.
fn http_collector(rt: &tokio::runtime::Runtime) -> (Collector, String) {
    let collector = Collector::default();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let c = collector.clone();
    rt.spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            tokio::spawn(serve_otlp_http(sock, c.clone()));
        }
    });
    (collector, endpoint)
}

const CRONTABS: &str = crdplane_tests::CRONTABS_PATH;
/// A value only the object's body holds: no span may carry it.
const PAYLOAD: &str = "payload-that-must-not-be-traced";
const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

/// A trace the caller did not sample (flags 00): nothing of it may be exported.
const UNSAMPLED: &str = "5a1b2c3d4e5f60718293a4b5c6d7e8f9";

/// The caller's vendor trace state: every span of its trace keeps it.
const STATE: &str = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7";

/// A POST with a `traceparent` header (trace `trace`, flags `flags`) and [`STATE`] as
/// `tracestate`; the status code.
fn post_traced(gw: &str, path: &str, body: &str, trace: &str, flags: &str) -> u16 {
    let rest = gw.strip_prefix("http://").unwrap();
    let mut s = std::net::TcpStream::connect(rest).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {rest}\r\nContent-Type: application/json\r\ntraceparent: 00-{trace}-{PARENT}-{flags}\r\ntracestate: {STATE}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    text.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0)
}

/// The chain of services from `span` up to the trace's root, nearest first.
fn ancestry<'a>(spans: &'a [Got], span: &'a Got) -> Vec<&'a Got> {
    let mut out = vec![span];
    let mut cur = span;
    while let Some(p) = spans.iter().find(|s| s.id == cur.parent) {
        out.push(p);
        cur = p;
        assert!(out.len() < 64, "a cycle of parents");
    }
    out
}

/// A collector on 127.0.0.1:0 served on `rt`; its OTLP endpoint.
fn collector(rt: &tokio::runtime::Runtime) -> (Collector, String) {
    let collector = Collector::default();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let svc = TraceServiceServer::new(collector.clone());
    rt.spawn(crdplane_transport::serve_one(listener, svc));
    (collector, endpoint)
}

#[test]
fn a_create_is_one_trace_across_gateway_validation_and_storage() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (collector, endpoint) = collector(&rt);

    let stack = Stack::start_with_redis_using(|b| {
        b.env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
            .env("OTEL_TRACES_SAMPLER", "parentbased_always_on")
            .env("OTEL_BSP_SCHEDULE_DELAY", "50")
    })
    .unwrap();
    let gw = &stack.gateway;
    // The CRD and a first object (traced too, as traces of their own).
    crdplane_tests::serve_crontabs(gw, &crdplane_tests::crontab("warm-up", "x"));

    let obj = json!({"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"traced"},"spec":{"image":PAYLOAD}});
    let unsampled = json!({"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"unsampled"}});
    assert_eq!(
        post_traced(gw, CRONTABS, &unsampled.to_string(), UNSAMPLED, "00"),
        201
    );
    assert_eq!(
        post_traced(gw, CRONTABS, &obj.to_string(), TRACE, "01"),
        201
    );

    // The spans arrive in batches (every 50 ms per process).
    let deadline = Instant::now() + Duration::from_secs(30);
    let spans = loop {
        let spans: Vec<Got> = collector
            .spans
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.trace == TRACE)
            .cloned()
            .collect();
        let has = |svc: &str, name: &str| {
            spans
                .iter()
                .any(|s| s.service == svc && s.name.contains(name))
        };
        if has("crdplane-gateway", "KubernetesAPI")
            && has("crdplane-validation", "schema admission")
            && has("crdplane-storage", "redis")
        {
            break spans;
        }
        assert!(
            Instant::now() < deadline,
            "the trace is incomplete: {spans:#?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };

    // The gateway's span continues the caller's.
    let root = spans
        .iter()
        .find(|s| s.service == "crdplane-gateway" && s.name == "KubernetesAPI")
        .unwrap();
    assert_eq!(root.parent, PARENT, "{root:#?}");
    for (k, v) in [
        ("verb", "create"),
        ("resource", "crontabs"),
        ("group", "stable.example.com"),
        ("namespace", "default"),
        ("http.response.status_code", "201"),
        ("http.request.method", "POST"),
    ] {
        assert_eq!(
            root.attrs.get(k).map(String::as_str),
            Some(v),
            "{k}: {root:#?}"
        );
    }
    assert!(root.attrs.contains_key("tenant"), "{root:#?}");
    assert!(root.attrs.contains_key("audit-id"), "{root:#?}");

    // Every other span of the trace descends from it, through the services in call order.
    for s in &spans {
        let chain = ancestry(&spans, s);
        assert_eq!(
            chain.last().unwrap().id,
            root.id,
            "{} of {} does not descend from the request span: {chain:#?}",
            s.name,
            s.service
        );
    }
    let services = |name: &str, svc: &str| -> Vec<String> {
        let s = spans
            .iter()
            .find(|s| s.service == svc && s.name.contains(name))
            .unwrap();
        ancestry(&spans, s)
            .iter()
            .map(|g| format!("{}:{}", g.service, g.name))
            .collect()
    };
    let admission = services("schema admission", "crdplane-validation");
    assert!(
        admission[1].starts_with("crdplane-validation:crdplane.v1.Validation/Admit")
            && admission[2].starts_with("crdplane-gateway:crdplane.v1.Validation/Admit")
            && admission.last().unwrap() == "crdplane-gateway:KubernetesAPI",
        "{admission:#?}"
    );
    let redis = services("redis", "crdplane-storage");
    assert!(
        redis[1].starts_with("crdplane-storage:crdplane.v1.Storage/")
            && redis[2].starts_with("crdplane-gateway:crdplane.v1.Storage/")
            && redis.last().unwrap() == "crdplane-gateway:KubernetesAPI",
        "{redis:#?}"
    );
    // The caller's "not sampled" is followed by every service (parent-based sampler).
    let leaked: Vec<Got> = collector
        .spans
        .lock()
        .unwrap()
        .iter()
        .filter(|s| s.trace == UNSAMPLED)
        .cloned()
        .collect();
    assert!(leaked.is_empty(), "{leaked:#?}");
    // Requests without a traceparent (the CRD and the first object) start traces of their
    // own here, sampled by the gateway's root decision, and the services continue them.
    let all = collector.spans.lock().unwrap().clone();
    let roots: Vec<&Got> = all
        .iter()
        .filter(|s| {
            s.service == "crdplane-gateway"
                && s.name == "KubernetesAPI"
                && s.parent.chars().all(|c| c == '0')
                && s.trace != TRACE
        })
        .collect();
    assert!(!roots.is_empty(), "no root trace of the gateway: {all:#?}");
    assert!(
        roots.iter().any(|r| all
            .iter()
            .any(|s| s.trace == r.trace && s.service == "crdplane-storage")),
        "no root trace reached storage: {all:#?}"
    );
    // The caller's tracestate went with the trace into every service.
    for s in &spans {
        assert_eq!(s.state, STATE, "{} of {}", s.name, s.service);
    }
    // Metadata only: the object's contents are in no span.
    for s in &spans {
        for v in s.attrs.values() {
            assert!(!v.contains(PAYLOAD), "{s:#?}");
        }
    }
}

/// A trace of its own for the stop test.
const AT_STOP: &str = "7c1d2e3f405162738495a6b7c8d9eaf0";

/// Spans still batched when the process is told to stop are exported before it exits: a
/// SIGTERM drains the gateway, and its exporter's guard flushes on the way out. The batch
/// delay is an hour, so only that flush can deliver the span. Exported over OTLP/HTTP
/// (`http/protobuf`), the other transport.
#[test]
fn spans_batched_at_a_sigterm_are_exported_before_the_process_exits() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (collector, endpoint) = http_collector(&rt);
    let mut stack = Stack::start_with_redis_using(|b| {
        b.env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
            .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
            .env("OTEL_TRACES_SAMPLER", "parentbased_always_on")
            .env("OTEL_BSP_SCHEDULE_DELAY", "3600000")
    })
    .unwrap();
    let gw = stack.gateway.clone();
    crdplane_tests::serve_crontabs(&gw, &crdplane_tests::crontab("first", "x"));
    let obj = crdplane_tests::crontab("at-stop", "x");
    assert_eq!(
        post_traced(&gw, CRONTABS, &obj.to_string(), AT_STOP, "01"),
        201
    );
    let gateway = |spans: &[Got]| {
        spans.iter().any(|s| {
            s.trace == AT_STOP && s.service == "crdplane-gateway" && s.name == "KubernetesAPI"
        })
    };
    assert!(
        !gateway(&collector.spans.lock().unwrap()),
        "exported before the stop: the batch delay did not hold it back"
    );
    let p = stack.processes();
    let i = p.index("gateway").expect("the gateway child");
    let exited = p.terminate(i, Duration::from_secs(20)).unwrap();
    assert!(
        exited.is_some_and(|st| st.success()),
        "the gateway did not stop on its own after SIGTERM: {exited:?}"
    );
    assert!(
        gateway(&collector.spans.lock().unwrap()),
        "the request's span was lost at the stop"
    );
}

/// A trace of its own for the TLS test, one per protocol.
const OVER_TLS: [&str; 2] = [
    "1a2b3c4d5e6f708192a3b4c5d6e7f801",
    "2a2b3c4d5e6f708192a3b4c5d6e7f802",
];

/// The OTLP/gRPC collector behind mutual TLS (the transport's own listener: a caller
/// without a certificate of `pki`'s CA is refused), on 127.0.0.1:0; its `https://` URL.
fn tls_grpc_collector(rt: &tokio::runtime::Runtime, pki: &crdplane::Pki) -> (Collector, String) {
    let collector = Collector::default();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let endpoint = format!("https://{}", listener.local_addr().unwrap());
    let files = crdplane_transport::mtls::Files {
        ca: pki.ca_cert_path(),
        cert: pki.serving_cert_path(),
        key: pki.serving_key_path(),
    };
    let tls = crdplane_transport::mtls::Mtls::load(&files).unwrap();
    let opts = crdplane_transport::ServeOptions {
        tls: Some(tls),
        ..Default::default()
    };
    let svc = TraceServiceServer::new(collector.clone());
    rt.spawn(crdplane_transport::serve_one_with(listener, svc, opts));
    (collector, endpoint)
}

/// The OTLP/HTTP collector of [`http_collector`] behind TLS (HTTP/1.1 by ALPN), served on
/// `rt` on 127.0.0.1:0, counting the connections whose client presented a certificate; its
/// `https://` URL.
fn tls_http_collector(
    rt: &tokio::runtime::Runtime,
    pki: &crdplane::Pki,
) -> (Collector, String, Arc<Mutex<usize>>) {
    let collector = Collector::default();
    let with_cert = Arc::new(Mutex::new(0usize));
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let endpoint = format!("https://{}", listener.local_addr().unwrap());
    let acceptor = crdplane_transport::tls::ServerTls::load(
        &pki.serving_cert_path(),
        &pki.serving_key_path(),
        true,
    )
    .unwrap()
    .acceptor();
    let (c, counted) = (collector.clone(), with_cert.clone());
    rt.spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            let (c, counted, acceptor) = (c.clone(), counted.clone(), acceptor.clone());
            tokio::spawn(async move {
                let Ok(stream) = acceptor.accept(sock).await else {
                    return;
                };
                if stream.get_ref().1.peer_certificates().is_some() {
                    *counted.lock().unwrap() += 1;
                }
                serve_otlp_http(stream, c).await;
            });
        }
    });
    (collector, endpoint, with_cert)
}

/// Export to an `https://` collector, over OTLP/gRPC and over OTLP/HTTP: the collector is
/// verified against the CA of `OTEL_EXPORTER_OTLP_CERTIFICATE`, and the exporter presents
/// the client certificate of `OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE`/`_KEY` (the gRPC
/// collector refuses callers without one).
#[test]
fn spans_reach_a_collector_over_tls_with_a_client_certificate() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pki = crdplane::Pki::ensure(&dir.path().join("pki"), &[]).unwrap();
    let (grpc, grpc_url) = tls_grpc_collector(&rt, &pki);
    let (http, http_url, with_cert) = tls_http_collector(&rt, &pki);
    let runs = [
        ("grpc", grpc_url, grpc, OVER_TLS[0]),
        ("http/protobuf", http_url, http, OVER_TLS[1]),
    ];
    for (protocol, endpoint, collector, trace) in runs {
        let stack = Stack::start_with_redis_using(|b| {
            b.env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
                .env("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
                .env(
                    "OTEL_EXPORTER_OTLP_CERTIFICATE",
                    pki.ca_cert_path().to_string_lossy(),
                )
                .env(
                    "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
                    pki.admin_cert_path().to_string_lossy(),
                )
                .env(
                    "OTEL_EXPORTER_OTLP_CLIENT_KEY",
                    pki.admin_key_path().to_string_lossy(),
                )
                .env("OTEL_TRACES_SAMPLER", "parentbased_always_on")
                .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        })
        .unwrap();
        let gw = stack.gateway.clone();
        crdplane_tests::serve_crontabs(&gw, &crdplane_tests::crontab("first", "x"));
        let obj = crdplane_tests::crontab(&format!("tls-{}", &trace[..4]), "x");
        assert_eq!(
            post_traced(&gw, CRONTABS, &obj.to_string(), trace, "01"),
            201
        );
        // The request's spans of the gateway and of the storage service arrive.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let services: Vec<String> = collector
                .spans
                .lock()
                .unwrap()
                .iter()
                .filter(|s| s.trace == trace)
                .map(|s| s.service.clone())
                .collect();
            if ["crdplane-gateway", "crdplane-storage"]
                .iter()
                .all(|want| services.iter().any(|s| s == want))
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{protocol}: spans of trace {trace} over TLS: {services:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    assert!(
        *with_cert.lock().unwrap() > 0,
        "the OTLP/HTTP exporter presented no client certificate"
    );
}
