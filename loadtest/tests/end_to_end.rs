//! End-to-end runs of the load tool against in-process fakes on loopback: a minimal
//! Kubernetes-style HTTP API for CronTabs and a validation gRPC service. They check what the
//! tool does on the wire (setup calls, paths, tenant prefix, bodies and their sizes, unique
//! names) and that its report counts successes, errors and open-loop requests correctly.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use clap::Parser;
use crdplane_load::config::{Args, Config};
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

#[derive(Default)]
struct Fake {
    crd: Mutex<Option<Value>>,
    /// name → (body as the client sent it, resourceVersion)
    objects: Mutex<HashMap<String, (Vec<u8>, u64)>>,
    rv: AtomicU64,
    conflicts: AtomicU64,
    tenants: Mutex<Vec<String>>,
    /// Tenants created through the admin scope's Tenants.
    created_tenants: Mutex<Vec<String>>,
    posts: AtomicU64,
    puts: AtomicU64,
    lists: AtomicU64,
    /// Server-side applies (PATCH with application/apply-patch+yaml and a fieldManager).
    applies: AtomicU64,
    /// Reject PUTs whose spec.replicas equals this (422 Invalid).
    reject_replicas: Option<i64>,
}

fn status(code: StatusCode, reason: &str, msg: &str) -> Response<Full<Bytes>> {
    let body = json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
        "message": msg, "reason": reason, "code": code.as_u16()});
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

fn with_rv(body: &[u8], rv: u64) -> Vec<u8> {
    let mut v: Value = serde_json::from_slice(body).unwrap();
    v["metadata"]["resourceVersion"] = json!(rv.to_string());
    serde_json::to_vec(&v).unwrap()
}

fn ok(code: StatusCode, body: Vec<u8>) -> Response<Full<Bytes>> {
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap()
}

async fn handle(fake: Arc<Fake>, req: Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
    let method = req.method().clone();
    let mut path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let content_type = req
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap().to_string());
    let body = req.into_body().collect().await.unwrap().to_bytes().to_vec();
    if method == hyper::Method::POST && path == "/clusters/root/apis/crdplane.io/v1alpha1/tenants" {
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["kind"], "Tenant");
        let name = v["metadata"]["name"].as_str().unwrap().to_string();
        fake.created_tenants.lock().unwrap().push(name);
        return ok(StatusCode::CREATED, body);
    }
    if let Some(rest) = path.strip_prefix("/clusters/") {
        let (tenant, rest) = rest.split_once('/').unwrap();
        fake.tenants.lock().unwrap().push(tenant.to_string());
        path = format!("/{rest}");
    }
    let coll = "/apis/stable.example.com/v1/namespaces/default/crontabs";
    match (method.as_str(), path.as_str()) {
        ("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions") => {
            let v: Value = serde_json::from_slice(&body).unwrap();
            *fake.crd.lock().unwrap() = Some(v);
            ok(StatusCode::CREATED, body)
        }
        ("GET", "/apis/stable.example.com/v1") => {
            if fake.crd.lock().unwrap().is_some() {
                ok(StatusCode::OK, b"{}".to_vec())
            } else {
                status(
                    StatusCode::NOT_FOUND,
                    "NotFound",
                    "the server could not find the requested resource",
                )
            }
        }
        ("POST", "/api/v1/namespaces") => status(StatusCode::CONFLICT, "AlreadyExists", "exists"),
        ("GET", p) if p == coll => {
            fake.lists.fetch_add(1, Ordering::Relaxed);
            assert!(query.starts_with("limit="), "{query}");
            ok(
                StatusCode::OK,
                br#"{"kind":"CronTabList","items":[]}"#.to_vec(),
            )
        }
        ("POST", p) if p == coll => {
            fake.posts.fetch_add(1, Ordering::Relaxed);
            let v: Value = serde_json::from_slice(&body).unwrap();
            let name = v["metadata"]["name"].as_str().unwrap().to_string();
            let mut objs = fake.objects.lock().unwrap();
            if objs.contains_key(&name) {
                return status(StatusCode::CONFLICT, "AlreadyExists", "already exists");
            }
            let rv = fake.rv.fetch_add(1, Ordering::Relaxed) + 1;
            objs.insert(name, (body.clone(), rv));
            ok(StatusCode::CREATED, with_rv(&body, rv))
        }
        (m, p) if p.starts_with(coll) && p.len() > coll.len() + 1 => {
            let name = &p[coll.len() + 1..];
            let mut objs = fake.objects.lock().unwrap();
            match m {
                "GET" => match objs.get(name) {
                    Some((b, rv)) => ok(StatusCode::OK, with_rv(b, *rv)),
                    None => status(StatusCode::NOT_FOUND, "NotFound", "not found"),
                },
                "PUT" => {
                    fake.puts.fetch_add(1, Ordering::Relaxed);
                    let v: Value = serde_json::from_slice(&body).unwrap();
                    assert_eq!(v["metadata"]["name"], name);
                    if fake.reject_replicas.is_some()
                        && v["spec"]["replicas"].as_i64() == fake.reject_replicas
                    {
                        return status(
                            StatusCode::UNPROCESSABLE_ENTITY,
                            "Invalid",
                            "replicas rejected",
                        );
                    }
                    let Some((_, current)) = objs.get(name) else {
                        return status(StatusCode::NOT_FOUND, "NotFound", "not found");
                    };
                    // custom resources need the resourceVersion precondition
                    let sent = v["metadata"]["resourceVersion"].as_str().unwrap_or("");
                    if sent.is_empty() {
                        return status(
                            StatusCode::UNPROCESSABLE_ENTITY,
                            "Invalid",
                            "metadata.resourceVersion: must be specified for an update",
                        );
                    }
                    if sent != current.to_string() {
                        fake.conflicts.fetch_add(1, Ordering::Relaxed);
                        return status(
                            StatusCode::CONFLICT,
                            "Conflict",
                            "the object has been modified",
                        );
                    }
                    let rv = fake.rv.fetch_add(1, Ordering::Relaxed) + 1;
                    objs.insert(name.to_string(), (body.clone(), rv));
                    ok(StatusCode::OK, with_rv(&body, rv))
                }
                "PATCH" => {
                    assert_eq!(
                        content_type.as_deref(),
                        Some("application/apply-patch+yaml")
                    );
                    assert_eq!(query, "fieldManager=crdplane-load-apply&force=true");
                    let v: Value = serde_json::from_slice(&body).unwrap();
                    assert_eq!(v["metadata"]["name"], name);
                    assert!(v["metadata"].get("resourceVersion").is_none(), "{v}");
                    fake.applies.fetch_add(1, Ordering::Relaxed);
                    let rv = fake.rv.fetch_add(1, Ordering::Relaxed) + 1;
                    objs.insert(name.to_string(), (body.clone(), rv));
                    ok(StatusCode::OK, with_rv(&body, rv))
                }
                _ => status(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed", "no"),
            }
        }
        _ => status(StatusCode::NOT_FOUND, "NotFound", "no route"),
    }
}

async fn serve_fake(fake: Arc<Fake>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let fake = fake.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| {
                    let fake = fake.clone();
                    async move { Ok::<_, Infallible>(handle(fake, req).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    addr
}

fn config(extra: &[&str]) -> Config {
    let mut v = vec!["crdplane-load", "--quiet"];
    v.extend_from_slice(extra);
    Config::from_args(Args::try_parse_from(v).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_create_sets_up_and_writes_sized_unique_objects() {
    let fake = Arc::new(Fake::default());
    let addr = serve_fake(fake.clone()).await;
    let server = format!("http://{addr}");
    let rep = crdplane_load::run(config(&[
        "create",
        "--server",
        &server,
        "--concurrency",
        "8",
        "--requests",
        "300",
        "--object-size",
        "2048",
    ]))
    .await
    .unwrap();
    assert_eq!(rep.requests, 300);
    assert_eq!(rep.ok, 300, "{}", rep.table());
    assert_eq!(rep.errors, 0);
    assert_eq!(rep.latency_us.count, 300);
    assert!(rep.latency_us.p50 > 0 && rep.latency_us.p50 <= rep.latency_us.max);
    // the CRD was created with its schema
    let crd = fake.crd.lock().unwrap().clone().unwrap();
    assert_eq!(
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            ["replicas"]["maximum"],
        10
    );
    // every object has a unique name and exactly the requested size
    let objs = fake.objects.lock().unwrap();
    assert_eq!(objs.len(), 300);
    assert!(objs.values().all(|(b, _)| b.len() == 2048));
    assert!(objs.keys().all(|k| k.starts_with("lt-")));
    assert!(fake.tenants.lock().unwrap().is_empty());
    assert!(fake.created_tenants.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_mixed_uses_working_set_and_tenant_prefix() {
    let fake = Arc::new(Fake::default());
    let addr = serve_fake(fake.clone()).await;
    let server = format!("http://{addr}");
    let rep = crdplane_load::run(config(&[
        "mixed",
        "--mix",
        "get=2,update=1,list=1",
        "--server",
        &server,
        "--tenant",
        "acme",
        "--objects",
        "40",
        "--concurrency",
        "4",
        "--requests",
        "400",
    ]))
    .await
    .unwrap();
    assert_eq!(rep.ok, 400, "{}", rep.table());
    assert_eq!(rep.working_set, 40);
    let names: Vec<String> = fake.objects.lock().unwrap().keys().cloned().collect();
    assert_eq!(names.len(), 40);
    assert!(names.iter().all(|n| n.starts_with("lt-set-")));
    let ops: HashMap<&str, u64> = rep.ops.iter().map(|o| (o.op.as_str(), o.ok)).collect();
    assert_eq!(ops.values().sum::<u64>(), 400);
    // weights 2:1:1 over 400 requests: each op clearly present
    assert!(
        ops["get"] > 120 && ops["update"] > 50 && ops["list"] > 50,
        "{ops:?}"
    );
    assert_eq!(fake.puts.load(Ordering::Relaxed), ops["update"]);
    // updates carry the last seen resourceVersion; workers own disjoint objects: no conflicts
    assert_eq!(fake.conflicts.load(Ordering::Relaxed), 0);
    // every request went under /clusters/acme
    let tenants = fake.tenants.lock().unwrap();
    assert!(tenants.len() >= 440);
    assert!(tenants.iter().all(|t| t == "acme"));
    assert_eq!(*fake.created_tenants.lock().unwrap(), ["acme"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_apply_is_a_server_side_apply_of_the_working_set() {
    let fake = Arc::new(Fake::default());
    let addr = serve_fake(fake.clone()).await;
    let server = format!("http://{addr}");
    let rep = crdplane_load::run(config(&[
        "apply",
        "--server",
        &server,
        "--objects",
        "8",
        "--concurrency",
        "2",
        "--requests",
        "50",
    ]))
    .await
    .unwrap();
    assert_eq!(rep.ok, 50, "{}", rep.table());
    assert_eq!(fake.applies.load(Ordering::Relaxed), 50);
    assert_eq!(fake.puts.load(Ordering::Relaxed), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_errors_are_counted_by_status_and_sampled() {
    let fake = Arc::new(Fake {
        reject_replicas: Some(3),
        ..Default::default()
    });
    let addr = serve_fake(fake.clone()).await;
    let server = format!("http://{addr}");
    let rep = crdplane_load::run(config(&[
        "update",
        "--server",
        &server,
        "--objects",
        "10",
        "--concurrency",
        "1",
        "--requests",
        "200",
    ]))
    .await
    .unwrap();
    // replicas = 1 + seq % 10: exactly one tenth of the (single) worker's updates carry 3
    assert_eq!(rep.requests, 200);
    assert_eq!(rep.errors, 20, "{}", rep.table());
    assert_eq!(rep.ok, 180);
    assert_eq!(rep.latency_us.count, 180);
    assert_eq!(rep.error_counts.len(), 1);
    assert_eq!(rep.error_counts[0].error, "http 422 Invalid");
    assert_eq!(rep.error_counts[0].count, 20);
    assert!(!rep.error_samples.is_empty());
    assert!(rep.error_samples[0].body.contains("replicas rejected"));
    assert!(rep.table().contains("http 422 Invalid"));
}

/// A whole run through the command-line entry point: `--json-out` gains the timeline and the
/// histogram (adding up to the totals) and `--html-out` writes the page with its plots.
#[test]
fn run_writes_json_with_timeline_and_html_report() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let fake = Arc::new(Fake {
        reject_replicas: Some(3),
        ..Default::default()
    });
    let addr = rt.block_on(serve_fake(fake));
    let dir = std::env::temp_dir().join(format!("crdplane-load-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (json, html) = (dir.join("run.json"), dir.join("run.html"));
    let server = format!("http://{addr}");
    let args = Args::try_parse_from([
        "crdplane-load",
        "update",
        "--quiet",
        "--server",
        &server,
        "--objects",
        "10",
        "--concurrency",
        "2",
        "--rate",
        "400",
        "--duration",
        "1500ms",
        "--json-out",
        json.to_str().unwrap(),
        "--html-out",
        html.to_str().unwrap(),
    ])
    .unwrap();
    let _ = crdplane_load::main_with_args(args);
    let rep: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(rep["requests"], 600);
    let timeline = rep["timeline"].as_array().unwrap();
    assert!((2..=3).contains(&timeline.len()), "{timeline:?}");
    let sum = |v: &[Value], k: &str| v.iter().map(|p| p[k].as_u64().unwrap()).sum::<u64>();
    assert_eq!(sum(timeline, "ok"), rep["ok"].as_u64().unwrap());
    assert_eq!(sum(timeline, "errors"), rep["errors"].as_u64().unwrap());
    assert!(rep["errors"].as_u64().unwrap() > 0);
    // open loop at 400/s: the first full second has about 400 requests
    let first = timeline[0]["ok"].as_u64().unwrap() + timeline[0]["errors"].as_u64().unwrap();
    assert!((380..=420).contains(&first), "{first}");
    assert!(timeline[0]["p50_us"].as_u64().unwrap() > 0);
    let buckets = rep["latency_histogram"].as_array().unwrap();
    assert_eq!(sum(buckets, "count"), rep["ok"].as_u64().unwrap());
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(page.matches("<svg").count(), 3);
    assert!(page.contains("http 422 Invalid"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_loop_issues_exactly_rate_times_duration() {
    let fake = Arc::new(Fake::default());
    let addr = serve_fake(fake.clone()).await;
    let server = format!("http://{addr}");
    let rep = crdplane_load::run(config(&[
        "list",
        "--server",
        &server,
        "--objects",
        "5",
        "--concurrency",
        "8",
        "--rate",
        "200",
        "--duration",
        "1s",
    ]))
    .await
    .unwrap();
    assert_eq!(rep.requests, 200, "{}", rep.table());
    assert_eq!(rep.ok, 200);
    assert_eq!(rep.rate, Some(200.0));
    // paced: the last request is due at 995 ms, so the run cannot finish much earlier
    assert!(
        rep.elapsed_sec >= 0.99 && rep.elapsed_sec < 3.0,
        "{}",
        rep.elapsed_sec
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_gateway_fails_setup_quickly() {
    // bind then drop: nothing listens there any more
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let err = crdplane_load::run(config(&["create", "--server", &format!("http://{addr}")]))
        .await
        .expect_err("setup must fail");
    assert!(err.to_string().contains("creating the CRD"), "{err}");
}

mod validation_fake {
    use super::*;
    use crdplane_proto::v1::validation_server::{Validation, ValidationServer};
    use crdplane_proto::v1::*;
    use tonic::{Request, Response, Status};

    #[derive(Default)]
    pub(crate) struct FakeValidation {
        pub loaded: Mutex<Vec<SchemaRef>>,
        pub admits: AtomicU64,
        pub updates_with_old: AtomicU64,
    }

    pub(crate) struct Svc(Arc<FakeValidation>);

    #[tonic::async_trait]
    impl Validation for Svc {
        async fn validate_crd(
            &self,
            _: Request<ValidateCrdRequest>,
        ) -> Result<Response<ValidationResult>, Status> {
            Err(Status::unimplemented("x"))
        }
        async fn load_schema(
            &self,
            r: Request<LoadSchemaRequest>,
        ) -> Result<Response<Empty>, Status> {
            let r = r.into_inner();
            let crd: Value = serde_json::from_slice(&r.crd_json).unwrap();
            assert_eq!(crd["metadata"]["name"], "crontabs.stable.example.com");
            self.0.loaded.lock().unwrap().push(r.schema.unwrap());
            Ok(Response::new(Empty {}))
        }
        async fn admit(&self, r: Request<AdmitRequest>) -> Result<Response<AdmitResponse>, Status> {
            let r = r.into_inner();
            if self.0.loaded.lock().unwrap().is_empty() {
                return Err(Status::not_found("schema not loaded"));
            }
            self.0.admits.fetch_add(1, Ordering::Relaxed);
            let obj: Value = serde_json::from_slice(&r.object).unwrap();
            assert_eq!(r.kind, "CronTab");
            assert_eq!(r.api_version, "stable.example.com/v1");
            if r.operation == admit_request::Operation::Update as i32 {
                assert!(!r.old_object.is_empty());
                self.0.updates_with_old.fetch_add(1, Ordering::Relaxed);
            }
            let mut errors = vec![];
            if obj["spec"]["replicas"] == 10 {
                errors.push(FieldError {
                    r#type: "FieldValueInvalid".into(),
                    field: "spec.replicas".into(),
                    bad_value_json: "10".into(),
                    detail: "test rejects 10".into(),
                    has_value: false,
                });
            }
            Ok(Response::new(AdmitResponse {
                object: r.object,
                errors,
                warnings: vec![],
                unknown_fields: vec![],
            }))
        }
        /// The load tool calls `Admit` only (one request per simulated client).
        async fn admit_many(
            &self,
            _: Request<AdmitManyRequest>,
        ) -> Result<Response<AdmitManyResponse>, Status> {
            Err(Status::unimplemented("x"))
        }
        async fn normalize(
            &self,
            _: Request<NormalizeRequest>,
        ) -> Result<Response<NormalizeResponse>, Status> {
            Err(Status::unimplemented("x"))
        }
    }

    pub(crate) async fn serve(fake: Arc<FakeValidation>) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(ValidationServer::new(Svc(fake)))
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
                .await
                .unwrap();
        });
        addr
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_validation_loads_schema_and_admits() {
    let fake = Arc::new(validation_fake::FakeValidation::default());
    let addr = validation_fake::serve(fake.clone()).await;
    let grpc = format!("http://{addr}");
    let rep = crdplane_load::run(config(&[
        "mixed",
        "--mix",
        "create=1,update=1",
        "--target",
        "validation",
        "--grpc",
        &grpc,
        "--tenant",
        "t1",
        "--concurrency",
        "1",
        "--requests",
        "400",
    ]))
    .await
    .unwrap();
    let loaded = fake.loaded.lock().unwrap().clone();
    assert_eq!(loaded.len(), 1);
    assert_eq!(loaded[0].tenant, "t1");
    assert_eq!(loaded[0].version, "v1");
    assert_eq!(fake.admits.load(Ordering::Relaxed), 400);
    // replicas == 10 (seq % 10 == 9) is rejected: one in ten of the single worker's requests
    assert_eq!(rep.errors, 40, "{}", rep.table());
    assert_eq!(rep.error_counts[0].error, "admit Invalid");
    assert!(rep.error_samples[0].body.contains("spec.replicas"));
    let updates = rep.ops.iter().find(|o| o.op == "update").unwrap();
    assert_eq!(
        fake.updates_with_old.load(Ordering::Relaxed),
        updates.requests
    );
}
