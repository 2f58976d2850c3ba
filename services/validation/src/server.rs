//! The gRPC `Validation` service: a bounded cache of compiled schemas and the four RPCs.
//!
//! Compiled schemas are keyed by `SchemaRef` (tenant, CRD uid, generation, version) and
//! deduplicated by the SHA-256 of the schema JSON, so identical schemas loaded by many tenants
//! share one tree. The cache is bounded by bytes: each compiled tree's estimated heap size
//! (`Schema::heap_size`, computed once at compile time) counts against `--schema-cache-bytes`
//! and least-recently-used entries are evicted to stay within it. `Admit` and
//! `Normalize` answer NOT_FOUND when the `SchemaRef` is not loaded; the caller then sends
//! `LoadSchema` with the CRD and retries. CPU-heavy work runs on the blocking pool.

use crate::admit::{self, AdmitInput, FieldValidation, Operation};
use crate::convert::to_proto_list;
use crate::crd_schema;
use crate::structural::{self, Schema};
use crdplane_core::{ApiError, Reason};
use crdplane_proto::GrpcStatusExt;
use crdplane_proto::v1 as pb;
use crdplane_proto::v1::validation_server::{Validation, ValidationServer};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use tonic::{Request, Response, Status};

/// Service configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Byte budget of the compiled-schema cache (estimated heap size of the compiled trees).
    pub cache_bytes: usize,
    /// Mutual TLS of the listener (`--grpc-tls-*`); `None`: plaintext.
    pub tls: Option<crdplane_transport::mtls::Files>,
}

/// Default byte budget of the compiled-schema cache (`--schema-cache-bytes`).
pub const DEFAULT_CACHE_BYTES: usize = 512 << 20;

impl Default for Config {
    fn default() -> Self {
        Config {
            cache_bytes: DEFAULT_CACHE_BYTES,
            tls: None,
        }
    }
}

/// Maximum size of a CRD or object accepted over gRPC (matches the 3 MiB request limit with
/// headroom for old objects).
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

type Key = (String, String, i64, String);
type Hash = [u8; 32];

/// One loaded `SchemaRef`: which compiled tree it uses, and when it was last used.
struct Entry {
    hash: Hash,
    last_used: AtomicU64,
}

/// One compiled tree, shared by every `SchemaRef` whose schema JSON is identical.
struct Tree {
    schema: Arc<Schema>,
    /// [`Schema::heap_size`], computed once at compile time.
    bytes: usize,
    /// Entries using this tree.
    refs: usize,
}

#[derive(Default)]
struct CacheInner {
    by_ref: HashMap<Key, Entry>,
    trees: HashMap<Hash, Tree>,
    /// Sum of the trees' `bytes`.
    bytes: usize,
    /// The most recent schema larger than the whole budget: served, never cached with the
    /// others (it replaces the previous one), so that `LoadSchema` followed by `Admit` works
    /// for it too.
    oversize: Option<(Key, Arc<Schema>)>,
}

/// Cache of compiled schemas bounded by bytes: the estimated heap size of the distinct
/// compiled trees it holds never exceeds its budget; the least recently used entries are
/// evicted to make room. A schema larger than the whole budget is still served: it is kept
/// aside alone (the last such schema loaded) instead of evicting everything else.
pub struct SchemaCache {
    inner: RwLock<CacheInner>,
    tick: AtomicU64,
    budget: usize,
}

impl SchemaCache {
    /// A cache of at most `budget` bytes of compiled schemas.
    pub fn new(budget: usize) -> Self {
        SchemaCache {
            inner: RwLock::new(CacheInner::default()),
            tick: AtomicU64::new(0),
            budget,
        }
    }

    fn key(r: &pb::SchemaRef) -> Key {
        (
            r.tenant.clone(),
            r.crd_uid.clone(),
            r.generation,
            r.version.clone(),
        )
    }

    /// The compiled schema for `r`, if loaded.
    pub fn get(&self, r: &pb::SchemaRef) -> Option<Arc<Schema>> {
        let inner = self.inner.read().unwrap_or_else(|e| e.into_inner());
        let key = Self::key(r);
        let Some(e) = inner.by_ref.get(&key) else {
            return inner
                .oversize
                .as_ref()
                .filter(|(k, _)| *k == key)
                .map(|(_, s)| s.clone());
        };
        e.last_used
            .store(self.tick.fetch_add(1, Ordering::Relaxed), Ordering::Relaxed);
        inner.trees.get(&e.hash).map(|t| t.schema.clone())
    }

    /// Number of entries (`SchemaRef`s) cached.
    pub fn len(&self) -> usize {
        self.inner
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .by_ref
            .len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Estimated bytes of the compiled trees cached (at most the budget).
    pub fn bytes(&self) -> usize {
        self.inner.read().unwrap_or_else(|e| e.into_inner()).bytes
    }

    /// The byte budget.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Loads `schema_json` under `r`: compiles it unless an identical schema is already
    /// compiled (for any tenant), then evicts least-recently-used entries until the cache
    /// fits its budget. Idempotent.
    pub fn load(
        &self,
        r: &pb::SchemaRef,
        schema_json: &serde_json::Value,
    ) -> Result<Arc<Schema>, structural::CompileError> {
        if let Some(s) = self.get(r) {
            return Ok(s);
        }
        let key = Self::key(r);
        let hash: Hash = Sha256::digest(serde_json::to_vec(schema_json).unwrap_or_default()).into();
        let shared = {
            let inner = self.inner.read().unwrap_or_else(|e| e.into_inner());
            inner.trees.get(&hash).map(|t| t.schema.clone())
        };
        let (schema, bytes) = match shared {
            Some(s) => (s, 0),
            None => {
                let s = structural::compile(schema_json)?;
                let bytes = s.heap_size();
                (Arc::new(s), bytes)
            }
        };
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        if inner.by_ref.contains_key(&key) {
            return Ok(schema);
        }
        if !inner.trees.contains_key(&hash) {
            if bytes > self.budget {
                inner.oversize = Some((key, schema.clone()));
                return Ok(schema);
            }
            while inner.bytes + bytes > self.budget && evict_lru(&mut inner) {}
            inner.bytes += bytes;
            inner.trees.insert(
                hash,
                Tree {
                    schema: schema.clone(),
                    bytes,
                    refs: 0,
                },
            );
        }
        if let Some(t) = inner.trees.get_mut(&hash) {
            t.refs += 1;
        }
        inner.by_ref.insert(
            key,
            Entry {
                hash,
                last_used: AtomicU64::new(self.tick.fetch_add(1, Ordering::Relaxed)),
            },
        );
        Ok(schema)
    }
}

/// Evicts the least recently used entry (and its tree once no entry uses it); false when
/// nothing is left to evict.
fn evict_lru(inner: &mut CacheInner) -> bool {
    let Some(victim) = inner
        .by_ref
        .iter()
        .min_by_key(|(_, e)| e.last_used.load(Ordering::Relaxed))
        .map(|(k, _)| k.clone())
    else {
        return false;
    };
    if let Some(e) = inner.by_ref.remove(&victim)
        && let Some(t) = inner.trees.get_mut(&e.hash)
    {
        t.refs -= 1;
        if t.refs == 0 {
            let bytes = t.bytes;
            inner.trees.remove(&e.hash);
            inner.bytes -= bytes;
        }
    }
    true
}

/// The tonic service implementation.
pub struct ValidationService {
    cache: Arc<SchemaCache>,
}

impl ValidationService {
    /// A service with a schema cache of `config.cache_bytes`.
    pub fn new(config: &Config) -> Self {
        ValidationService {
            cache: Arc::new(SchemaCache::new(config.cache_bytes)),
        }
    }

    /// The schema cache (for tests and metrics).
    pub fn cache(&self) -> Arc<SchemaCache> {
        self.cache.clone()
    }
}

fn bad_request(msg: impl Into<String>) -> Status {
    ApiError::bad_request(msg).to_grpc()
}

fn internal(e: impl std::fmt::Display) -> Status {
    ApiError::internal(e).to_grpc()
}

/// Requests (or batches) with less JSON than this are admitted on the request's task; larger
/// ones go to the blocking pool.
const INLINE_ADMIT_BYTES: usize = 64 * 1024;

/// Largest AdmitMany batch accepted (the gateway sends at most 256).
pub const MAX_ADMIT_MANY: usize = 1024;

fn admit_bytes(req: &pb::AdmitRequest) -> usize {
    req.object.len() + req.old_object.len()
}

/// The span of schema admission (prune, default, validate) when the call is traced and
/// sampled: the kind and apiVersion admitted, the operation, and how many objects (more
/// than one for a coalesced batch; the first one's kind is named). Never object contents.
fn admission_span(
    n: usize,
    first: &pb::AdmitRequest,
) -> Option<crdplane_transport::telemetry::Span> {
    let mut span = crdplane_transport::telemetry::child_of_current(
        "schema admission",
        crdplane_transport::telemetry::Kind::Internal,
    )?;
    span.set("kind", first.kind.clone());
    span.set("apiVersion", first.api_version.clone());
    span.set(
        "operation",
        match pb::admit_request::Operation::try_from(first.operation) {
            Ok(pb::admit_request::Operation::Update) => "UPDATE",
            _ => "CREATE",
        },
    );
    span.set_i64("objects", n as i64);
    Some(span)
}

/// One admission against a loaded schema: `admit::admit` with the request's parameters.
fn admit_one(schema: &Schema, req: &pb::AdmitRequest) -> pb::AdmitResponse {
    let operation = match pb::admit_request::Operation::try_from(req.operation) {
        Ok(pb::admit_request::Operation::Update) => Operation::Update,
        _ => Operation::Create,
    };
    let field_validation = match pb::admit_request::FieldValidation::try_from(req.field_validation)
    {
        Ok(pb::admit_request::FieldValidation::Ignore) => FieldValidation::Ignore,
        Ok(pb::admit_request::FieldValidation::Strict) => FieldValidation::Strict,
        _ => FieldValidation::Warn,
    };
    let input = AdmitInput {
        operation,
        object: &req.object,
        old_object: if req.old_object.is_empty() {
            None
        } else {
            Some(&req.old_object)
        },
        field_validation,
        subresource: &req.subresource,
        api_version: &req.api_version,
        kind: &req.kind,
        namespaced: req.namespaced,
    };
    let out = admit::admit(schema, &input);
    pb::AdmitResponse {
        object: if out.errors.is_empty() {
            serde_json::to_vec(&out.object).unwrap_or_default().into()
        } else {
            Default::default()
        },
        errors: to_proto_list(&out.errors),
        warnings: out.warnings,
        unknown_fields: out.unknown_fields,
    }
}

fn not_loaded(r: &pb::SchemaRef) -> Status {
    ApiError::new(
        Reason::NotFound,
        format!(
            "schema for CRD uid {:?} generation {} version {:?} of tenant {:?} is not loaded",
            r.crd_uid, r.generation, r.version, r.tenant
        ),
    )
    .to_grpc()
}

/// Compiles the schema of `r.version` from the whole CRD and caches it (LoadSchema, and the
/// `crd_json` of an Admit/Normalize retry), on the blocking pool.
async fn load(
    cache: Arc<SchemaCache>,
    r: pb::SchemaRef,
    crd_json: bytes::Bytes,
) -> Result<(), Status> {
    tokio::task::spawn_blocking(move || -> Result<(), Status> {
        let crd: serde_json::Value = serde_json::from_slice(&crd_json)
            .map_err(|e| bad_request(format!("invalid CRD JSON: {e}")))?;
        let empty = serde_json::json!({});
        // A version without a schema (only possible for legacy CRDs) prunes everything
        // except apiVersion/kind/metadata, like an empty structural schema upstream.
        let schema = match structural::crd_version_schema(&crd, &r.version) {
            Some(s) => s,
            None => {
                let has_version = crd
                    .pointer("/spec/versions")
                    .and_then(serde_json::Value::as_array)
                    .is_some_and(|vs| {
                        vs.iter().any(|v| {
                            v.get("name").and_then(serde_json::Value::as_str)
                                == Some(r.version.as_str())
                        })
                    });
                if !has_version {
                    return Err(bad_request(format!("CRD has no version {:?}", r.version)));
                }
                &empty
            }
        };
        cache
            .load(&r, schema)
            .map_err(|e| bad_request(format!("cannot compile schema: {e}")))?;
        Ok(())
    })
    .await
    .map_err(internal)?
}

impl ValidationService {
    /// The compiled schema of `r`; when it is not loaded and the request carries the CRD
    /// (a retry after NOT_FOUND, possibly on another replica), compiles it first.
    async fn schema_for(
        &self,
        r: &pb::SchemaRef,
        crd_json: &bytes::Bytes,
    ) -> Result<Arc<Schema>, Status> {
        if let Some(s) = self.cache.get(r) {
            return Ok(s);
        }
        if crd_json.is_empty() {
            return Err(not_loaded(r));
        }
        load(self.cache.clone(), r.clone(), crd_json.clone()).await?;
        self.cache.get(r).ok_or_else(|| not_loaded(r))
    }
}

#[tonic::async_trait]
impl Validation for ValidationService {
    async fn validate_crd(
        &self,
        request: Request<pb::ValidateCrdRequest>,
    ) -> Result<Response<pb::ValidationResult>, Status> {
        let req = request.into_inner();
        let result = tokio::task::spawn_blocking(move || -> Result<_, Status> {
            let crd: serde_json::Value = serde_json::from_slice(&req.crd_json)
                .map_err(|e| bad_request(format!("invalid CRD JSON: {e}")))?;
            let old: Option<serde_json::Value> = if req.old_crd_json.is_empty() {
                None
            } else {
                Some(
                    serde_json::from_slice(&req.old_crd_json)
                        .map_err(|e| bad_request(format!("invalid old CRD JSON: {e}")))?,
                )
            };
            Ok(crd_schema::validate_crd(&crd, old.as_ref()))
        })
        .await
        .map_err(internal)??;
        Ok(Response::new(pb::ValidationResult {
            errors: to_proto_list(&result.errors),
            warnings: result.warnings,
        }))
    }

    async fn load_schema(
        &self,
        request: Request<pb::LoadSchemaRequest>,
    ) -> Result<Response<pb::Empty>, Status> {
        let req = request.into_inner();
        let r = req
            .schema
            .ok_or_else(|| bad_request("schema reference is required"))?;
        if self.cache.get(&r).is_some() {
            return Ok(Response::new(pb::Empty {}));
        }
        load(self.cache.clone(), r, req.crd_json).await?;
        Ok(Response::new(pb::Empty {}))
    }

    async fn admit(
        &self,
        request: Request<pb::AdmitRequest>,
    ) -> Result<Response<pb::AdmitResponse>, Status> {
        let req = request.into_inner();
        let r = req
            .schema
            .as_ref()
            .ok_or_else(|| bad_request("schema reference is required"))?;
        let schema = self.schema_for(r, &req.crd_json).await?;
        let _span = admission_span(1, &req);
        // Small objects are cheaper inline than a hop to the blocking pool.
        let resp = if admit_bytes(&req) < INLINE_ADMIT_BYTES {
            admit_one(&schema, &req)
        } else {
            tokio::task::spawn_blocking(move || admit_one(&schema, &req))
                .await
                .map_err(internal)?
        };
        Ok(Response::new(resp))
    }

    async fn admit_many(
        &self,
        request: Request<pb::AdmitManyRequest>,
    ) -> Result<Response<pb::AdmitManyResponse>, Status> {
        let reqs = request.into_inner().requests;
        if reqs.len() > MAX_ADMIT_MANY {
            return Err(bad_request(format!(
                "at most {MAX_ADMIT_MANY} requests per AdmitMany"
            )));
        }
        // Schemas missing here that a request carries the CRD of (retries after NOT_FOUND,
        // perhaps answered by another replica) are compiled first, once each.
        let mut loaded: Vec<&pb::SchemaRef> = Vec::new();
        for req in &reqs {
            if let Some(r) = req.schema.as_ref()
                && !req.crd_json.is_empty()
                && !loaded.contains(&r)
            {
                self.schema_for(r, &req.crd_json).await?;
                loaded.push(r);
            }
        }
        // Resolve every schema first (a cache lookup each; a batch is mostly one schema).
        let items: Vec<(pb::AdmitRequest, Result<Arc<Schema>, Status>)> = reqs
            .into_iter()
            .map(|req| {
                let schema = match req.schema.as_ref() {
                    None => Err(bad_request("schema reference is required")),
                    Some(r) => self.cache.get(r).ok_or_else(|| not_loaded(r)),
                };
                (req, schema)
            })
            .collect();
        let total: usize = items.iter().map(|(req, _)| admit_bytes(req)).sum();
        let _span = items
            .first()
            .and_then(|(req, _)| admission_span(items.len(), req));
        let run = move || {
            items
                .iter()
                .map(|(req, schema)| match schema {
                    Ok(schema) => pb::AdmitResult {
                        response: Some(admit_one(schema, req)),
                        error: None,
                    },
                    Err(s) => pb::AdmitResult {
                        response: None,
                        error: Some(pb::ItemStatus::from(s)),
                    },
                })
                .collect::<Vec<_>>()
        };
        let results = if total < INLINE_ADMIT_BYTES {
            run()
        } else {
            tokio::task::spawn_blocking(run).await.map_err(internal)?
        };
        Ok(Response::new(pb::AdmitManyResponse { results }))
    }

    async fn normalize(
        &self,
        request: Request<pb::NormalizeRequest>,
    ) -> Result<Response<pb::NormalizeResponse>, Status> {
        let req = request.into_inner();
        let r = req
            .schema
            .clone()
            .ok_or_else(|| bad_request("schema reference is required"))?;
        let schema = self.schema_for(&r, &req.crd_json).await?;
        let objects = tokio::task::spawn_blocking(move || {
            req.objects
                .iter()
                .map(|o| bytes::Bytes::from(admit::normalize(&schema, o)))
                .collect::<Vec<_>>()
        })
        .await
        .map_err(internal)?;
        Ok(Response::new(pb::NormalizeResponse { objects }))
    }
}

/// Serves the `Validation` gRPC service on `listener` until `shutdown` fires, then drains
/// its connections (`crdplane_transport::shutdown`).
pub async fn serve(
    config: Config,
    listener: tokio::net::TcpListener,
    shutdown: crdplane_transport::Shutdown,
) -> anyhow::Result<()> {
    let service = ValidationService::new(&config);
    crate::metrics::CacheCollector::new(service.cache()).register();
    let svc = ValidationServer::new(service)
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
    let opts = crdplane_transport::ServeOptions {
        tls: crdplane_transport::mtls::Mtls::load_optional(config.tls.as_ref())
            .map_err(anyhow::Error::msg)?,
        // The gateway admits objects, the registry checks CRDs and loads schemas.
        callers: &[
            crdplane_transport::mtls::callers::GATEWAY,
            crdplane_transport::mtls::callers::REGISTRY,
        ],
        shutdown,
        ..Default::default()
    };
    crdplane_transport::serve_one_with(listener, svc, opts).await?;
    Ok(())
}
