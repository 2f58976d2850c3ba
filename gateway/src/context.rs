//! The gateway's context, per process and per request: the configuration ([`Config`]), the
//! process state every handler shares ([`Ctx`]: service clients, batchers, caches), the gRPC
//! [`Channel`] and the parsed request ([`Req`]).
//!
//! Where it sits: the bottom of the request path's modules. The router builds a [`Req`] for
//! each request and hands it with the [`Ctx`] to the resource handlers; every handler module
//! imports this one, and it imports no handler module (only the CRD cache of
//! [`crate::crd`], the batchers of [`crate::batch`], the watch bounds of
//! [`crate::watch_limit`] and the parsers of [`crate::request_info`] and [`crate::http`]).
//! The per-process context follows kube-apiserver's `GenericAPIServer` config
//! (staging/src/k8s.io/apiserver/pkg/server/config.go), the per-request one its
//! `RequestInfo` plus the request (staging/src/k8s.io/apiserver/pkg/endpoints/request).

use crate::crd::{CrdCache, CrdInfo, CrdNow};
use crate::http::Query;
use crate::request_info::RequestInfo;
use bytes::Bytes;
use crdplane_core::ApiError;
use crdplane_proto::GrpcStatusExt;
use crdplane_proto::v1 as pb;
use crdplane_proto::v1::registry_client::RegistryClient;
use crdplane_proto::v1::storage_client::StorageClient;
use crdplane_proto::v1::validation_client::ValidationClient;
use http::Method;
use std::collections::HashSet;
use std::sync::{Arc, RwLock};

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
    /// The most tenants that are labels of the per-tenant metrics (see [`crate::metrics`]).
    pub metrics_max_tenants: usize,
    /// Metrics neither recorded nor exposed (`--disabled-metrics`).
    pub disabled_metrics: Vec<String>,
    /// kube-apiserver's `--request-timeout`: the most time a non-long-running request may
    /// take (enforced by the limits layer, `filters/limits.rs`).
    pub request_timeout: std::time::Duration,
    /// kube-apiserver's `--shutdown-delay-duration`: how long a stopping gateway keeps
    /// serving new requests, with `/readyz` failing, before it closes its listener.
    pub shutdown_delay: std::time::Duration,
    /// Deadline of each gRPC call that is not a watch (None: none); see
    /// `crdplane_transport::deadline`.
    pub call_timeout: Option<std::time::Duration>,
    /// kube-apiserver's `--event-ttl`: Events expire this long after their last write.
    pub event_ttl: std::time::Duration,
    /// TLS of the listener (None: plain HTTP, `--insecure-http`).
    pub tls: Option<crdplane_transport::tls::ServerTls>,
    /// Mutual TLS of the calls to registry, validation and storage (`--grpc-tls-*`, see
    /// `crdplane_transport::mtls`; None: plaintext gRPC).
    pub grpc_tls: Option<crdplane_transport::mtls::Mtls>,
    /// The authenticators of the authentication layer (`filters/authentication.rs`).
    pub authn: Arc<crdplane_auth::chain::Authenticators>,
    /// `--authorization-mode` (see [`crate::authz`]).
    pub authorization: crate::authz::Mode,
    /// What the TokenRequest API signs service-account tokens with (None: it answers 404,
    /// as upstream without a signing key).
    pub service_account_signer: Option<Arc<crdplane_auth::service_account::Signer>>,
    /// `--api-audiences`.
    pub api_audiences: Vec<String>,
    /// `--encryption-provider-config`: encryption at rest of the listed built-in resources
    /// (see [`crate::encryption`]).
    pub encryption: Option<Arc<crdplane_apiserver::encryption::EncryptionConfig>>,
    /// `--audit-*`: the audit policy and backends (see [`crate::audit`]).
    pub audit: Option<Arc<crate::audit::Auditor>>,
    /// `--tenant-creation`: whether a tenant exists only once a platform admin created
    /// its Tenant (see [`TenantCreation`]).
    pub tenant_creation: TenantCreation,
    /// `--adopt-stored-tenants`: at start, a Tenant for every tenant with stored objects
    /// and none (see `tenant_purge`).
    pub adopt_stored_tenants: bool,
}

/// How tenants come to exist (`--tenant-creation`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum TenantCreation {
    /// A tenant exists once a platform admin created its Tenant in the admin scope
    /// (`/clusters/root/apis/crdplane.io/v1alpha1/tenants`); requests for any other
    /// tenant get 404 and write nothing. The `--default-tenant` is created on its first
    /// request.
    #[default]
    Explicit,
    /// The first request for an unknown tenant creates its Tenant, whoever sends it: for
    /// a single team's development server, never for a platform.
    OnFirstUse,
}

/// kube-apiserver's default `--request-timeout` (1m0s).
pub const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

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
            metrics_max_tenants: crate::metrics::DEFAULT_MAX_TENANTS,
            disabled_metrics: Vec::new(),
            request_timeout: REQUEST_TIMEOUT,
            shutdown_delay: std::time::Duration::ZERO,
            call_timeout: Some(crdplane_transport::deadline::DEFAULT_TIMEOUT),
            event_ttl: EVENT_TTL,
            tls: None,
            grpc_tls: None,
            authn: Arc::new(crdplane_auth::chain::Authenticators {
                x509: None,
                tokens: None,
                service_accounts: None,
                oidc: None,
                anonymous: true,
                token_cache: Default::default(),
            }),
            authorization: crate::authz::Mode::AlwaysAllow,
            service_account_signer: None,
            api_audiences: Vec::new(),
            encryption: None,
            audit: None,
            tenant_creation: TenantCreation::Explicit,
            adopt_stored_tenants: false,
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
    pub crd_changes: tokio::sync::broadcast::Sender<Arc<CrdNow>>,
    /// Open watches, per client and in total.
    pub watches: crate::watch_limit::WatchSlots,
    /// The authorizer and its per-tenant policies.
    pub authz: crate::authz::Authorizer,
    /// Uids of existing service accounts by (tenant, namespace, name), for
    /// service-account tokens (see `service_accounts.rs`).
    pub sa_uids: RwLock<std::collections::HashMap<(String, String, String), String>>,
    /// Bumped by every change of a service account (a read before it is not cached).
    pub sa_epoch: std::sync::atomic::AtomicU64,
    /// Whether the change stream of service accounts is followed (else nothing is cached).
    pub sa_following: std::sync::atomic::AtomicBool,
    /// The phases of the tenants seen (see [`crate::tenant_directory`]).
    pub tenant_dir: crate::tenant_directory::Directory,
    /// Wakes the purge controller of deleted tenants (the `tenant_purge` module).
    pub tenant_purge: tokio::sync::Notify,
    /// The request metrics (`GET /metrics`; see [`crate::metrics`]).
    pub metrics: Arc<crate::metrics::ApiMetrics>,
    /// Fires when the process begins to stop: `/readyz` fails its `shutdown` check (see
    /// `crdplane_transport::shutdown`).
    pub shutdown: crdplane_transport::Shutdown,
    /// Fires when the stopping process closes its listener, `--shutdown-delay-duration`
    /// after [`Ctx::shutdown`]: watches end and connections close once their request in
    /// flight is answered (`server.rs`).
    pub closing: crdplane_transport::Shutdown,
}

/// Batched calls of each kind (GetMany, CreateMany, AdmitMany) a gateway keeps in flight
/// (see [`crate::batch`]).
pub const BATCHES_IN_FLIGHT: usize = 2;

/// The gRPC channel of the gateway's service clients: one HTTP/2 connection per endpoint,
/// opened lazily, driven without tonic's buffer task; calls balanced over the endpoints of a
/// service (comma-separated in the configuration), each with a deadline unless it is a
/// watch, each carrying the request's tenant, user and traceparent (see `crdplane-transport`).
pub type Channel = crdplane_transport::Channel;

fn channel(urls: &str, cfg: &Config) -> anyhow::Result<Channel> {
    let opts = crdplane_transport::ChannelOptions {
        timeout: cfg.call_timeout,
        tls: cfg.grpc_tls.clone(),
        ..Default::default()
    };
    Channel::with_options(urls, opts).map_err(|e| anyhow::anyhow!("service endpoint {urls:?}: {e}"))
}

impl Ctx {
    /// The gateway state: service clients on the configured endpoints (an address that does
    /// not parse is an error), batchers, and empty caches.
    pub fn new(cfg: Config) -> anyhow::Result<Arc<Self>> {
        Self::stopped_by(cfg, crdplane_transport::Shutdown::new())
    }

    /// [`Ctx::new`] for a process that stops gracefully when `shutdown` fires.
    pub fn stopped_by(
        cfg: Config,
        shutdown: crdplane_transport::Shutdown,
    ) -> anyhow::Result<Arc<Self>> {
        let max = 256 << 20;
        let storage = StorageClient::new(channel(&cfg.storage_endpoint, &cfg)?)
            .max_decoding_message_size(max)
            .max_encoding_message_size(max);
        let validation = ValidationClient::new(channel(&cfg.validation_endpoint, &cfg)?)
            .max_decoding_message_size(max)
            .max_encoding_message_size(max);
        Ok(Arc::new(Self {
            shutdown,
            closing: crdplane_transport::Shutdown::new(),
            gets: crate::batch::gets(storage.clone(), BATCHES_IN_FLIGHT),
            creates: crate::batch::creates(storage.clone(), BATCHES_IN_FLIGHT),
            admits: crate::batch::admits(validation.clone(), BATCHES_IN_FLIGHT),
            storage,
            registry: RegistryClient::new(channel(&cfg.registry_endpoint, &cfg)?)
                .max_decoding_message_size(max)
                .max_encoding_message_size(max),
            validation,
            crds: CrdCache::default(),
            namespaces: Default::default(),
            tenants: Default::default(),
            crd_changes: tokio::sync::broadcast::channel(256).0,
            watches: crate::watch_limit::WatchSlots::new(cfg.watches),
            authz: crate::authz::Authorizer::new(cfg.authorization),
            sa_uids: Default::default(),
            sa_epoch: Default::default(),
            sa_following: Default::default(),
            tenant_dir: Default::default(),
            tenant_purge: tokio::sync::Notify::new(),
            metrics: Arc::new(crate::metrics::ApiMetrics::with_disabled(
                cfg.metrics_max_tenants,
                &cfg.disabled_metrics,
            )),
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

    /// Follows the storage change streams of CRDs, namespaces and (with RBAC) the RBAC
    /// objects to keep caches fresh; reconnects with backoff, dropping the caches whenever
    /// the stream was interrupted. Also starts the refreshers of the OIDC issuers' key sets
    /// ([`crate::oidc_keys`]).
    pub fn spawn_cache_followers(self: &Arc<Self>) {
        // The OIDC issuers' key sets (`--authentication-config`), fetched beside requests.
        if let Some(oidc) = &self.cfg.authn.oidc {
            crate::oidc_keys::spawn(oidc);
        }
        let mut followed = vec![
            ("apiextensions.k8s.io", "customresourcedefinitions"),
            ("", "namespaces"),
            (
                crdplane_core::tenancy::GROUP,
                crdplane_core::tenancy::RESOURCE,
            ),
        ];
        if self.cfg.authn.service_accounts.is_some() {
            followed.push(("", "serviceaccounts"));
        }
        if self.authz.mode() == crate::authz::Mode::Rbac {
            followed.extend(
                crate::authz::RBAC_RESOURCES
                    .iter()
                    .map(|r| (crdplane_auth::rbac::GROUP, *r)),
            );
        }
        for (group, resource) in followed {
            let ctx = Arc::downgrade(self);
            let rbac = group == crdplane_auth::rbac::GROUP;
            let accounts = resource == "serviceaccounts";
            let tenants = group == crdplane_core::tenancy::GROUP;
            tokio::spawn(async move {
                let mut backoff = std::time::Duration::from_millis(100);
                loop {
                    let mut up = false;
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
                            if rbac {
                                c.authz.stream_up();
                                up = true;
                            } else if accounts {
                                c.forget_service_accounts();
                                c.sa_following
                                    .store(true, std::sync::atomic::Ordering::SeqCst);
                            } else if tenants {
                                c.tenant_dir.following(true);
                            } else {
                                c.drop_caches(resource);
                            }
                        }
                        while let Ok(Some(ch)) = s.message().await {
                            let Some(c) = ctx.upgrade() else { return };
                            if rbac {
                                c.authz.invalidate(&ch.tenant);
                            } else if tenants {
                                // A Tenant (of the admin scope) changed: its tenant's
                                // phase, and whether this process seeded it, are re-read.
                                c.forget_tenant(&ch.name);
                            } else if accounts {
                                c.sa_epoch.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                                c.sa_uids.write().expect("lock").remove(&(
                                    ch.tenant.clone(),
                                    ch.namespace.clone(),
                                    ch.name.clone(),
                                ));
                            } else if resource == "namespaces" {
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
                        if accounts {
                            c.sa_following
                                .store(false, std::sync::atomic::Ordering::SeqCst);
                            c.forget_service_accounts();
                        } else if tenants {
                            c.tenant_dir.following(false);
                        } else if !rbac {
                            c.drop_caches(resource);
                        } else if up {
                            c.authz.stream_down();
                        }
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
            let _ = tx.send(Arc::new(CrdNow { tenant, name, now }));
        });
    }

    /// Forgets what this process knows of `tenant`: its phase, and that it seeded it.
    pub fn forget_tenant(&self, tenant: &str) {
        self.tenant_dir.forget(tenant);
        self.tenants.write().expect("lock").remove(tenant);
    }

    fn forget_service_accounts(&self) {
        self.sa_epoch
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.sa_uids.write().expect("lock").clear();
    }

    fn drop_caches(&self, resource: &str) {
        if resource == "namespaces" {
            self.namespaces.write().expect("lock").clear();
        } else {
            self.crds.clear();
        }
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
    /// the request module's `decode_body`.
    pub body_dups: std::sync::OnceLock<Vec<String>>,
    /// The authenticated user (None when no authentication layer ran, as in in-process
    /// tests of the router).
    pub user: Option<Arc<crdplane_auth::user::UserInfo>>,
}

impl Req {
    /// The value of header `k`, when it is valid text.
    pub fn header<K: http::header::AsHeaderName>(&self, k: K) -> Option<&str> {
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
