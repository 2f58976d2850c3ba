//! crdplane-registry: the registry service — CustomResourceDefinitions of every tenant
//! (checks, names and conflicts, conditions), the discovery and OpenAPI documents built from
//! them, and `Resolve`, which tells the gateway which CRD serves a resource.
//!
//! The gateway calls it over gRPC (`proto/crdplane/v1/registry.proto`); CRDs are persisted
//! through the storage service and schema checks are delegated to the validation service,
//! so replicas hold nothing but caches (`cache`), kept fresh by the storage change feed.
//!
//! Modules: [`crd`] (decoding, defaults, typed view), [`validate`] (static CRD validation),
//! [`naming`] (accepted names, NamesAccepted/Established), [`discovery`] (documents),
//! [`lifecycle`] (background deletion of a deleted CRD's instances and of a deleted
//! namespace's custom resources, resumed from a durable queue after restarts), [`gc`] (the
//! garbage collector: ownerReferences, cascading deletion, from the same queue), [`resync`]
//! (the collector's periodic scan for references it was never told about),
//! [`openapi`] (OpenAPI documents), [`cache`] (per-tenant snapshots), [`service`] (the RPCs).

// `ApiError` (crdplane-core) is the edge error carried to the gateway unchanged; it is large
// (Status details with causes) but only built on failure paths, so boxing it buys nothing.
#![allow(clippy::result_large_err)]

pub mod cache;
pub mod config;
pub mod crd;
pub mod discovery;
pub mod gc;
pub mod lifecycle;
pub mod naming;
pub mod openapi;
pub mod resync;
pub mod service;
pub mod validate;

pub use service::RegistryService;

use anyhow::Context;
use crdplane_proto::v1::registry_server::RegistryServer;

/// The registry's channel to storage and validation: every endpoint of each (comma-separated
/// in the configuration), balanced and health-checked, with a deadline on every call and the
/// incoming call's metadata passed on (see `crdplane_transport`).
pub type Channel = crdplane_transport::Channel;

/// Largest request accepted (a CRD body plus framing).
const MAX_REQUEST: usize = 8 * 1024 * 1024;

/// What [`serve`] needs: the endpoints of storage and validation and the timings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Storage service endpoints, comma-separated, e.g. `http://127.0.0.1:7001`.
    pub storage_endpoint: String,
    /// Validation service endpoints, comma-separated; empty = no schema checks (development
    /// only).
    pub validation_endpoint: String,
    /// Period of the garbage collector's resync ([`resync`]; zero = never).
    pub gc_resync_period: std::time::Duration,
    /// Deadline of each call to storage and validation that is not a watch (None: none).
    pub call_timeout: Option<std::time::Duration>,
    /// Time to live of the events the registry records (the garbage collector's
    /// `OwnerRefInvalidNamespace`); zero: they do not expire.
    pub event_ttl: std::time::Duration,
    /// Mutual TLS of the listener and of the calls (`--grpc-tls-*`); `None`: plaintext.
    pub tls: Option<crdplane_transport::mtls::Files>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            storage_endpoint: String::new(),
            validation_endpoint: String::new(),
            gc_resync_period: resync::DEFAULT_PERIOD,
            call_timeout: Some(crdplane_transport::deadline::DEFAULT_TIMEOUT),
            event_ttl: gc::DEFAULT_EVENT_TTL,
            tls: None,
        }
    }
}

fn lazy_channel(
    endpoints: &str,
    timeout: Option<std::time::Duration>,
    tls: Option<&crdplane_transport::mtls::Mtls>,
) -> anyhow::Result<Channel> {
    let opts = crdplane_transport::ChannelOptions {
        timeout,
        tls: tls.cloned(),
        ..Default::default()
    };
    Channel::with_options(endpoints, opts)
        .map_err(|e| anyhow::anyhow!("invalid endpoint {endpoints:?}: {e}"))
}

/// Serves the registry on `listener` until `shutdown` fires (then drains its connections,
/// `crdplane_transport::shutdown`), the task is dropped or the server fails.
pub async fn serve(
    config: Config,
    listener: tokio::net::TcpListener,
    shutdown: crdplane_transport::Shutdown,
) -> anyhow::Result<()> {
    let tls = crdplane_transport::mtls::Mtls::load_optional(config.tls.as_ref())
        .map_err(anyhow::Error::msg)?;
    let storage = lazy_channel(&config.storage_endpoint, config.call_timeout, tls.as_ref())?;
    let validation = if config.validation_endpoint.trim().is_empty() {
        None
    } else {
        Some(lazy_channel(
            &config.validation_endpoint,
            config.call_timeout,
            tls.as_ref(),
        )?)
    };
    let svc = RegistryService::new(storage, validation);
    svc.set_event_ttl(config.event_ttl);
    let watcher = tokio::spawn(svc.clone().watch_changes());
    // Background deletion controllers (CRD finalizer, namespace content), resumed from the
    // durable work queue at startup.
    let lifecycle = tokio::spawn(svc.clone().run_lifecycle());
    let resync = tokio::spawn(svc.clone().run_gc_resync(config.gc_resync_period));
    let health = crdplane_transport::health::Health::new(
        <RegistryServer<RegistryService> as tonic::server::NamedService>::NAME,
        true,
    )
    .await;
    // The metadata of each incoming call (tenant, user, traceparent) goes on with the calls
    // its handler makes to storage and validation.
    let svc = crdplane_transport::context::Scoped::new(
        RegistryServer::new(svc).max_decoding_message_size(MAX_REQUEST),
    );
    let opts = crdplane_transport::ServeOptions {
        tls,
        // Only the gateway asks the registry.
        callers: &[crdplane_transport::mtls::callers::GATEWAY],
        shutdown,
        ..Default::default()
    };
    let result = crdplane_transport::serve_with_health(listener, svc, &health, opts)
        .await
        .context("registry gRPC server");
    watcher.abort();
    lifecycle.abort();
    resync.abort();
    result
}
