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
//! garbage collector: ownerReferences, cascading deletion, from the same queue),
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
pub mod service;
pub mod validate;

pub use service::RegistryService;

use anyhow::Context;
use crdplane_proto::v1::registry_server::RegistryServer;
use tonic::transport::{Channel, Endpoint};

/// Largest request accepted (a CRD body plus framing).
const MAX_REQUEST: usize = 8 * 1024 * 1024;

#[derive(Debug, Clone, Default)]
pub struct Config {
    /// Storage service endpoint, e.g. `http://127.0.0.1:7001`.
    pub storage_endpoint: String,
    /// Validation service endpoint; empty = no schema checks (development only).
    pub validation_endpoint: String,
}

fn lazy_channel(endpoint: &str) -> anyhow::Result<Channel> {
    Ok(Endpoint::from_shared(endpoint.to_string())
        .with_context(|| format!("invalid endpoint {endpoint:?}"))?
        .tcp_nodelay(true)
        .http2_keep_alive_interval(std::time::Duration::from_secs(30))
        .connect_lazy())
}

/// Serves the registry on `listener` until the task is dropped or the server fails.
pub async fn serve(config: Config, listener: tokio::net::TcpListener) -> anyhow::Result<()> {
    let storage = lazy_channel(&config.storage_endpoint)?;
    let validation = if config.validation_endpoint.is_empty() {
        None
    } else {
        Some(lazy_channel(&config.validation_endpoint)?)
    };
    let svc = RegistryService::new(storage, validation);
    let watcher = tokio::spawn(svc.clone().watch_changes());
    // Background deletion controllers (CRD finalizer, namespace content), resumed from the
    // durable work queue at startup.
    let lifecycle = tokio::spawn(svc.clone().run_lifecycle());
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_serving::<RegistryServer<RegistryService>>()
        .await;
    let result = tonic::transport::Server::builder()
        .add_service(health)
        .add_service(RegistryServer::new(svc).max_decoding_message_size(MAX_REQUEST))
        // Accepted sockets need TCP_NODELAY set here: Server::tcp_nodelay is ignored by
        // serve_with_incoming, and Nagle + delayed ACK cost ~40 ms per call.
        .serve_with_incoming(
            tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)),
        )
        .await
        .context("registry gRPC server");
    watcher.abort();
    lifecycle.abort();
    result
}
