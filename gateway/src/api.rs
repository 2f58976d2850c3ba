//! Gateway context and router. The [`Router`] is the innermost service of the edge stack
//! ([`crate::stack`]): every request reaches it through the layers of [`crate::filters`]
//! and goes on to discovery or a resource handler.

use crate::crd::{CrdCache, CrdInfo};
use crate::http::{Body, Query, error_response, read_body};
use crate::request_info::RequestInfo;
use crate::stack::Payload;
use crate::watch_limit::ClientKey;
use bytes::Bytes;
use crdplane_core::ApiError;
use crdplane_proto::GrpcStatusExt;
use crdplane_proto::v1 as pb;
use crdplane_proto::v1::registry_client::RegistryClient;
use crdplane_proto::v1::storage_client::StorageClient;
use crdplane_proto::v1::validation_client::ValidationClient;
use http::{Method, Request, Response};
use http_body_util::BodyExt;
use std::collections::HashSet;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::task::Poll;

/// Gateway configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// gRPC address(es) of the registry service.
    pub registry_endpoint: String,
    /// gRPC address(es) of the validation service.
    pub validation_endpoint: String,
    /// gRPC address(es) of the storage service.
    pub storage_endpoint: String,
    /// Tenant of requests without a `/clusters/<tenant>` prefix.
    pub default_tenant: String,
    /// Address clients reach this gateway at (for `/api` serverAddressByClientCIDRs).
    pub advertise_address: String,
    /// Bounds on client connections, in total and per client address (0 = automatic, from
    /// the descriptor limit; see `crdplane_transport::accept`).
    pub connections: crdplane_transport::accept::ConnLimits,
    /// Go `http.Server.ReadHeaderTimeout` of kube-apiserver's serving (32 s).
    pub request_header_timeout: std::time::Duration,
    /// Go `http.Server.IdleTimeout` of kube-apiserver's serving (90 s).
    pub idle_timeout: std::time::Duration,
    /// Bounds on concurrent watches, per client and in total (see [`crate::watch_limit`]).
    pub watches: crate::watch_limit::WatchLimits,
    /// kube-apiserver's `--request-timeout`: the most time a non-long-running request may
    /// take (see [`crate::filters::limits`]).
    pub request_timeout: std::time::Duration,
    /// Deadline of each gRPC call that is not a watch (None: none); see
    /// `crdplane_transport::deadline`.
    pub call_timeout: Option<std::time::Duration>,
    /// kube-apiserver's `--event-ttl`: Events expire this long after their last write.
    pub event_ttl: std::time::Duration,
}

/// kube-apiserver's `--event-ttl` default.
pub const EVENT_TTL: std::time::Duration = std::time::Duration::from_secs(3600);

/// kube-apiserver's `ReadHeaderTimeout` (apiserver `pkg/server/secure_serving.go`: "just shy
/// of requestTimeoutUpperBound").
pub const REQUEST_HEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(32);
/// kube-apiserver's `IdleTimeout` (matches `http.DefaultTransport`'s keep-alive timeout).
pub const IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(90);

impl Default for Config {
    fn default() -> Self {
        Self {
            registry_endpoint: "http://127.0.0.1:7002".into(),
            validation_endpoint: "http://127.0.0.1:7003".into(),
            storage_endpoint: "http://127.0.0.1:7001".into(),
            default_tenant: "default".into(),
            advertise_address: "127.0.0.1:6443".into(),
            connections: Default::default(),
            request_header_timeout: REQUEST_HEADER_TIMEOUT,
            idle_timeout: IDLE_TIMEOUT,
            watches: Default::default(),
            request_timeout: crate::filters::limits::REQUEST_TIMEOUT,
            call_timeout: Some(crdplane_transport::deadline::DEFAULT_TIMEOUT),
            event_ttl: EVENT_TTL,
        }
    }
}

/// Shared state of one gateway process.
pub struct Ctx {
    /// The configuration the gateway started with.
    pub cfg: Config,
    /// Client of the storage service.
    pub storage: StorageClient<Channel>,
    /// Client of the registry service.
    pub registry: RegistryClient<Channel>,
    /// Client of the validation service.
    pub validation: ValidationClient<Channel>,
    /// Served CRDs per (tenant, group, plural).
    pub crds: CrdCache,
    /// Custom resource GETs, coalesced into storage GetMany calls.
    pub gets: crate::batch::GetBatcher,
    /// Custom resource creates, coalesced into storage CreateMany calls.
    pub creates: crate::batch::CreateBatcher,
    /// Admissions of custom resource writes, coalesced into validation AdmitMany calls.
    pub admits: crate::batch::AdmitBatcher,
    /// (tenant, namespace) pairs known to exist; dropped on any change to the namespace.
    pub namespaces: RwLock<HashSet<(String, String)>>,
    /// Tenants whose default namespaces this process has ensured.
    pub tenants: RwLock<HashSet<String>>,
    /// What became of a CRD after each change to it, for the watches of its resources
    /// (sent only while some watch listens).
    pub crd_changes: tokio::sync::broadcast::Sender<Arc<crate::watch::CrdNow>>,
    /// Open watches, per client and in total.
    pub watches: crate::watch_limit::WatchSlots,
}

/// Batched calls of each kind (GetMany, CreateMany, AdmitMany) a gateway keeps in flight
/// (see [`crate::batch`]).
pub const BATCHES_IN_FLIGHT: usize = 2;

/// The gRPC channel of the gateway's service clients: one HTTP/2 connection per endpoint,
/// opened lazily, driven without tonic's buffer task; calls balanced over the endpoints of a
/// service (comma-separated in the configuration), each with a deadline unless it is a
/// watch, each carrying the request's tenant, user and traceparent (see `crdplane-transport`).
pub type Channel = crdplane_transport::Channel;

fn channel(urls: &str, timeout: Option<std::time::Duration>) -> anyhow::Result<Channel> {
    let opts = crdplane_transport::ChannelOptions {
        timeout,
        ..Default::default()
    };
    Channel::with_options(urls, opts).map_err(|e| anyhow::anyhow!("service endpoint {urls:?}: {e}"))
}

impl Ctx {
    /// The gateway state: service clients on the configured endpoints (an address that does
    /// not parse is an error), batchers, and empty caches.
    pub fn new(cfg: Config) -> anyhow::Result<Arc<Self>> {
        let max = 256 << 20;
        let storage = StorageClient::new(channel(&cfg.storage_endpoint, cfg.call_timeout)?)
            .max_decoding_message_size(max)
            .max_encoding_message_size(max);
        let validation =
            ValidationClient::new(channel(&cfg.validation_endpoint, cfg.call_timeout)?)
                .max_decoding_message_size(max)
                .max_encoding_message_size(max);
        Ok(Arc::new(Self {
            gets: crate::batch::gets(storage.clone(), BATCHES_IN_FLIGHT),
            creates: crate::batch::creates(storage.clone(), BATCHES_IN_FLIGHT),
            admits: crate::batch::admits(validation.clone(), BATCHES_IN_FLIGHT),
            storage,
            registry: RegistryClient::new(channel(&cfg.registry_endpoint, cfg.call_timeout)?)
                .max_decoding_message_size(max)
                .max_encoding_message_size(max),
            validation,
            crds: CrdCache::default(),
            namespaces: Default::default(),
            tenants: Default::default(),
            crd_changes: tokio::sync::broadcast::channel(256).0,
            watches: crate::watch_limit::WatchSlots::new(cfg.watches),
            cfg,
        }))
    }

    /// The served CRD for (tenant, group, plural): cache, else the registry.
    pub async fn resolve(
        &self,
        tenant: &str,
        group: &str,
        plural: &str,
    ) -> Result<Arc<CrdInfo>, ApiError> {
        if let Some(i) = self.crds.get(tenant, group, plural) {
            return Ok(i);
        }
        // The registry call, boxed: the cached case above keeps the caller's future small.
        Box::pin(self.resolve_remote(tenant, group, plural)).await
    }

    /// [`Self::resolve`] from the registry (and into the cache).
    async fn resolve_remote(
        &self,
        tenant: &str,
        group: &str,
        plural: &str,
    ) -> Result<Arc<CrdInfo>, ApiError> {
        let r = self
            .registry
            .clone()
            .resolve(pb::ResolveRequest {
                tenant: tenant.into(),
                group: group.into(),
                resource: plural.into(),
            })
            .await
            .map_err(|s| {
                let e = ApiError::from_grpc(&s);
                if e.code == 404 {
                    ApiError::path_not_found()
                } else {
                    e
                }
            })?
            .into_inner();
        let v: serde_json::Value = serde_json::from_slice(&r.json).map_err(ApiError::internal)?;
        let info = Arc::new(CrdInfo::from_json(v)?);
        if info.plural == plural && info.group == group {
            self.crds.insert(tenant, info.clone());
        }
        Ok(info)
    }

    /// Follows the storage change streams of CRDs and namespaces to keep caches fresh;
    /// reconnects with backoff, dropping the caches whenever the stream was interrupted.
    pub fn spawn_cache_followers(self: &Arc<Self>) {
        for (group, resource) in [
            ("apiextensions.k8s.io", "customresourcedefinitions"),
            ("", "namespaces"),
        ] {
            let ctx = Arc::downgrade(self);
            tokio::spawn(async move {
                let mut backoff = std::time::Duration::from_millis(100);
                loop {
                    let Some(c) = ctx.upgrade() else { return };
                    let mut storage = c.storage.clone();
                    drop(c);
                    let req = pb::ChangesRequest {
                        group: group.into(),
                        resource: resource.into(),
                    };
                    if let Ok(resp) = storage.changes(req).await {
                        backoff = std::time::Duration::from_millis(100);
                        let mut s = resp.into_inner();
                        // Anything cached before the stream started may be stale.
                        if let Some(c) = ctx.upgrade() {
                            c.drop_caches(resource);
                        }
                        while let Ok(Some(ch)) = s.message().await {
                            let Some(c) = ctx.upgrade() else { return };
                            if resource == "namespaces" {
                                c.namespaces
                                    .write()
                                    .expect("lock")
                                    .remove(&(ch.tenant.clone(), ch.name.clone()));
                            } else {
                                c.crds.invalidate(&ch.tenant, &ch.name);
                                c.report_crd(ch.tenant, ch.name);
                            }
                        }
                    }
                    if let Some(c) = ctx.upgrade() {
                        c.drop_caches(resource);
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(std::time::Duration::from_secs(5));
                }
            });
        }
    }

    /// Tells the watches of a changed CRD's resources whether it still exists (under which
    /// uid, serving what), so that those of a deleted, replaced or re-specified CRD end.
    fn report_crd(&self, tenant: String, name: String) {
        if self.crd_changes.receiver_count() == 0 {
            return;
        }
        let mut registry = self.registry.clone();
        let tx = self.crd_changes.clone();
        tokio::spawn(async move {
            let req = pb::CrdGetRequest {
                tenant: tenant.clone(),
                name: name.clone(),
            };
            let now = match registry.get_crd(req).await {
                Ok(r) => {
                    let v: serde_json::Value = match serde_json::from_slice(&r.into_inner().json) {
                        Ok(v) => v,
                        Err(_) => return,
                    };
                    match v["metadata"]["uid"].as_str() {
                        Some(uid) => Some((uid.to_string(), crate::crd::serving_hash(&v))),
                        None => return,
                    }
                }
                Err(s) if s.code() == tonic::Code::NotFound => None,
                // Registry unreachable: nothing known, nothing ended.
                Err(_) => return,
            };
            let _ = tx.send(Arc::new(crate::watch::CrdNow { tenant, name, now }));
        });
    }

    fn drop_caches(&self, resource: &str) {
        if resource == "namespaces" {
            self.namespaces.write().expect("lock").clear();
        } else {
            self.crds.clear();
        }
    }
}

/// The router: the innermost service of the edge stack ([`crate::stack`]), after the
/// authorization seam. It takes what the request-info layer parsed from the request
/// extensions, bounds concurrent watches and dispatches to the resource handlers; an
/// [`ApiError`] becomes its Status response here.
#[derive(Clone)]
pub struct Router {
    ctx: Arc<Ctx>,
}

impl Router {
    /// The router over the gateway state `ctx`.
    pub fn new(ctx: Arc<Ctx>) -> Self {
        Self { ctx }
    }
}

impl tower::Service<Request<Payload>> for Router {
    type Response = Response<Body>;
    type Error = Infallible;
    /// Boxed: the handlers' futures are large and unnameable.
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Payload>) -> Self::Future {
        let ctx = self.ctx.clone();
        Box::pin(async move {
            Ok(match route(ctx, req).await {
                Ok(r) => r,
                Err(e) => error_response(&e),
            })
        })
    }
}

/// Everything a resource handler needs about the request.
pub struct Req {
    /// What the path addresses (tenant, group, version, resource, name, verb).
    pub info: RequestInfo,
    /// HTTP method.
    pub method: Method,
    /// Parsed query parameters.
    pub query: Query,
    /// Request headers.
    pub headers: http::HeaderMap,
    /// The whole request body.
    pub body: Bytes,
    /// Strict-decoding findings of the body (`duplicate field "spec.a"`), recorded by the
    /// one decode of the body (create/update) or of the patch document; see
    /// [`crate::crs::decode_body`].
    pub body_dups: std::sync::OnceLock<Vec<String>>,
}

impl Req {
    /// The value of header `k`, when it is valid text.
    pub fn header(&self, k: &str) -> Option<&str> {
        self.headers.get(k).and_then(|v| v.to_str().ok())
    }
    /// The `dryRun` query parameter: `All` = true, absent or empty = false, else 400 BadRequest.
    pub fn dry_run(&self) -> Result<bool, ApiError> {
        match self.query.get("dryRun") {
            None | Some("") => Ok(false),
            Some("All") => Ok(true),
            Some(other) => Err(ApiError::bad_request(format!(
                "dryRun: Unsupported value: {other:?}: supported values: \"All\""
            ))),
        }
    }
}

async fn route(ctx: Arc<Ctx>, req: Request<Payload>) -> Result<Response<Body>, ApiError> {
    let (mut parts, body) = req.into_parts();
    // Put there by the request-info layer; without it the chain is wrong, a 500 as
    // upstream's filters answer then (request_deadline.go: "no RequestInfo found in
    // context, handler chain must be wrong").
    let info = parts
        .extensions
        .remove::<RequestInfo>()
        .ok_or_else(|| ApiError::internal("no RequestInfo found in the context"))?;
    let query = parts
        .extensions
        .remove::<Query>()
        .unwrap_or_else(|| Query::parse(parts.uri.query()));
    // Watches are bounded per client and in total; the slot lives in the response body
    // and comes back when the watch ends, however it ends.
    let slot = if info.verb == "watch" {
        let client = parts
            .extensions
            .remove::<ClientKey>()
            .unwrap_or(ClientKey::Address(std::net::Ipv4Addr::UNSPECIFIED.into()));
        match ctx.watches.acquire(client) {
            Ok(s) => Some(s),
            Err(why) => {
                tracing::debug!(?why, open = ctx.watches.open(), "watch refused");
                return Ok(crate::http::too_many_requests());
            }
        }
    } else {
        None
    };
    let resp = call_context(&parts, &info)
        .scope(dispatch(ctx, parts, body, query, info))
        .await?;
    Ok(match slot {
        Some(slot) => resp.map(|b| crate::watch_limit::Held::new(b, slot).boxed_unsync()),
        None => resp,
    })
}

/// What every gRPC call made for this request carries: its tenant, its user (none until
/// authentication lands) and its W3C `traceparent` (see `crdplane_transport::context`).
fn call_context(
    parts: &http::request::Parts,
    info: &RequestInfo,
) -> crdplane_transport::CallContext {
    crdplane_transport::CallContext::new(
        &info.tenant,
        "",
        parts.headers.get(crdplane_transport::context::TRACEPARENT),
    )
}

/// Reads the body and runs the handler of a parsed request.
async fn dispatch(
    ctx: Arc<Ctx>,
    parts: http::request::Parts,
    body: Payload,
    query: Query,
    info: RequestInfo,
) -> Result<Response<Body>, ApiError> {
    let has_body = matches!(
        parts.method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    );
    let body = if has_body {
        match body {
            Payload::Incoming(b) => Box::pin(read_body(b, &parts.headers)).await?,
            Payload::Limited(b) => Box::pin(read_body(b, &parts.headers)).await?,
            Payload::Read(b) => b,
        }
    } else {
        Bytes::new()
    };
    let req = Req {
        info,
        method: parts.method,
        query,
        headers: parts.headers,
        body,
        body_dups: Default::default(),
    };
    if !req.info.is_resource_request {
        return Box::pin(crate::discovery::serve(&ctx, &req)).await;
    }
    // Once per tenant and process (boxed: the common case awaits nothing).
    if !ctx.tenants.read().expect("lock").contains(&req.info.tenant) {
        Box::pin(ensure_tenant(&ctx, &req.info.tenant)).await?;
    }
    // Metadata-only output: the handler answers plain JSON, transformed afterwards.
    if let Some(p) = crate::partial::negotiate(req.header("accept")) {
        let mut req = req;
        req.headers.insert(
            http::header::ACCEPT,
            http::HeaderValue::from_static("application/json"),
        );
        let resp = Box::pin(resource(&ctx, &req)).await?;
        let watch = req.info.verb == "watch";
        return Box::pin(crate::partial::respond(resp, p, &req.info.api_group, watch)).await;
    }
    resource(&ctx, &req).await
}

/// Dispatches a resource request to its handler.
async fn resource(ctx: &Arc<Ctx>, req: &Req) -> Result<Response<Body>, ApiError> {
    let i = &req.info;
    match (
        i.api_prefix.as_str(),
        i.api_group.as_str(),
        i.api_version.as_str(),
        i.resource.as_str(),
    ) {
        // Families' futures are boxed each (see `crs::serve`): the request's future stays
        // small and only the family taken is allocated.
        ("api", "", "v1", "namespaces") => Box::pin(crate::namespaces::serve(ctx, req)).await,
        ("api" | "apis", g, v, r) if crdplane_core::builtin::lookup(g, v, r).is_some() => {
            let b = crdplane_core::builtin::lookup(g, v, r).expect("just found");
            Box::pin(crate::builtin::serve(ctx, req, b)).await
        }
        ("api", "", "v1", r) if empty_core_kind(r).is_some() => empty_core(req),
        ("api", _, _, _) => Err(ApiError::path_not_found()),
        ("apis", "apiextensions.k8s.io", "v1", "customresourcedefinitions") => {
            Box::pin(crate::crds::serve(ctx, req)).await
        }
        ("apis", "apiextensions.k8s.io", _, _) => Err(ApiError::path_not_found()),
        ("apis", group, _, resource) => {
            let crd = match ctx.resolve(&i.tenant, group, resource).await {
                Ok(crd) => crd,
                Err(e) if e.code == 404 => return Ok(crate::http::page_not_found()),
                Err(e) => return Err(e),
            };
            if let Some(r) = crd_handler_delegates(&crd, i) {
                return r;
            }
            crate::crs::serve(ctx, req, crd).await
        }
        _ => Ok(crate::http::not_found_for(&req.info.path)),
    }
}

/// The requests apiextensions-apiserver's crdHandler does not serve for a CRD that exists
/// (customresource_handler.go `ServeHTTP`): a version it does not serve and a scope that
/// does not match (namespaced CRDs answer list and watch across namespaces) go to the
/// not-found handler (plain `404 page not found`); an unknown subresource is a NotFound
/// Status naming the resource and object.
fn crd_handler_delegates(
    crd: &CrdInfo,
    i: &RequestInfo,
) -> Option<Result<Response<Body>, ApiError>> {
    let Some(ver) = crd.version(&i.api_version) else {
        return Some(Ok(crate::http::page_not_found()));
    };
    let namespaced_req = !i.namespace.is_empty();
    if (!crd.namespaced && namespaced_req)
        || (crd.namespaced && !namespaced_req && !matches!(i.verb.as_str(), "list" | "watch"))
    {
        return Some(Ok(crate::http::page_not_found()));
    }
    match i.subresource.as_str() {
        "" => None,
        "status" if ver.has_status => None,
        "scale" if ver.scale.is_some() => None,
        _ => Some(Err(ApiError::not_found(
            &crdplane_core::GroupResource::new(i.api_group.clone(), i.resource.clone()),
            &i.name,
        ))),
    }
}

/// The three namespaces every tenant starts with (created once per tenant, idempotently).
pub const DEFAULT_NAMESPACES: [&str; 3] = ["default", "kube-system", "kube-public"];

/// Creates the tenant's default namespaces on its first request (once per gateway process).
pub async fn ensure_tenant(ctx: &Ctx, tenant: &str) -> Result<(), ApiError> {
    if ctx.tenants.read().expect("lock").contains(tenant) {
        return Ok(());
    }
    for ns in DEFAULT_NAMESPACES {
        match crate::namespaces::create_namespace(
            ctx,
            tenant,
            serde_json::json!({"metadata": {"name": ns}}),
            false,
        )
        .await
        {
            Ok(_) => {}
            Err(e) if e.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
    ctx.tenants
        .write()
        .expect("lock")
        .insert(tenant.to_string());
    Ok(())
}

/// The core resources of category `all` (`pods`, `replicationcontrollers`, `services`):
/// (resource, kind). This server runs no workloads, so it serves them as a cluster with
/// none would — empty lists, NotFound on get — which is what `kubectl get all` needs to
/// behave as upstream when no custom resource is in the category (kubectl expands `all`
/// from discovery and fails with `the server doesn't have a resource type "all"` when
/// nothing declares it). Read-only: discovery advertises only get and list.
pub const EMPTY_CORE: [(&str, &str); 3] = [
    ("pods", "Pod"),
    ("replicationcontrollers", "ReplicationController"),
    ("services", "Service"),
];

/// The kind of `resource` when it is one of [`EMPTY_CORE`].
pub fn empty_core_kind(resource: &str) -> Option<&'static str> {
    EMPTY_CORE
        .iter()
        .find(|(r, _)| *r == resource)
        .map(|(_, k)| *k)
}

fn empty_core(req: &Req) -> Result<Response<Body>, ApiError> {
    let i = &req.info;
    let kind = empty_core_kind(&i.resource).ok_or_else(ApiError::path_not_found)?;
    let gr = crdplane_core::GroupResource::new("", i.resource.clone());
    if !i.subresource.is_empty() {
        return Err(ApiError::path_not_found());
    }
    match i.verb.as_str() {
        "get" => Err(ApiError::not_found(&gr, &i.name)),
        "list" => {
            let body = match crate::http::negotiate_output(req.header("accept"))? {
                crate::http::Output::Json => serde_json::json!({
                    "kind": format!("{kind}List"), "apiVersion": "v1",
                    "metadata": {"resourceVersion": "0"}, "items": []
                }),
                crate::http::Output::Table(v) => serde_json::json!({
                    "kind": "Table", "apiVersion": crate::crs::table_api_version(v),
                    "metadata": {"resourceVersion": "0"},
                    "columnDefinitions": [
                        {"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace.", "priority": 0},
                        {"name": "Age", "type": "date", "format": "", "description": "CreationTimestamp is a timestamp representing the server time when this object was created.", "priority": 0}
                    ],
                    "rows": []
                }),
            };
            Ok(crate::http::json_response(
                http::StatusCode::OK,
                serde_json::to_vec(&body).expect("json"),
            ))
        }
        verb => Err(ApiError::method_not_supported(&gr, verb)),
    }
}

#[cfg(test)]
mod tests {
    /// The router boxes each request's future, which moves it whole into the heap: its size
    /// is paid on every request (it was 16 KB, about 5 % of a GET's gateway CPU in profiles).
    /// The families' and verbs' futures are boxed on their own so this one stays small.
    #[tokio::test]
    async fn request_futures_stay_small() {
        let ctx = super::Ctx::new(super::Config::default()).unwrap();
        let req = http::Request::new(crate::stack::Payload::Read(bytes::Bytes::new()));
        let route = super::route(ctx.clone(), req);
        let (parts, body) =
            http::Request::new(crate::stack::Payload::Read(bytes::Bytes::new())).into_parts();
        let info = crate::request_info::RequestInfo::default();
        let dispatch = super::dispatch(ctx, parts, body, crate::http::Query::parse(None), info);
        let (r, d) = (
            std::mem::size_of_val(&route),
            std::mem::size_of_val(&dispatch),
        );
        assert!(
            r <= 8 * 1024 && d <= 3 * 1024,
            "route {r} bytes, dispatch {d} bytes"
        );
    }
}
