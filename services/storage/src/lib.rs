//! crdplane storage service: objects of every kind in Redis, with resourceVersion
//! concurrency, ordered lists and watch.
//!
//! Request path: gateway / registry → gRPC `crdplane.v1.Storage` → [`server`] → [`store`]
//! (Lua scripts: one atomic script per write; the creates of one resource batched by
//! `CreateMany` run as one script call) → Redis; live events come back through Redis
//! pub/sub into [`watch::Hub`] and out to gRPC watch streams. Key layout: [`keys`].
//! The service is stateless apart from the pub/sub hub: run as many replicas as needed.

pub mod filter;
pub mod keys;
pub mod server;
pub mod store;
pub mod watch;

use crdplane_proto::v1::storage_server::StorageServer;

/// Storage service configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// `redis://host:port`, `redis+unix:///path/to/socket`.
    pub redis_url: String,
    /// Events kept per (tenant, resource) for watch resume.
    pub history_len: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            redis_url: "redis://127.0.0.1:6379".into(),
            history_len: 10_000,
        }
    }
}

/// Serves the storage gRPC API on `listener` until the process ends.
pub async fn serve(config: Config, listener: tokio::net::TcpListener) -> anyhow::Result<()> {
    let store = store::Store::connect(&config.redis_url, config.history_len).await?;
    let hub = watch::Hub::start(&config.redis_url).await?;
    let svc = server::StorageService { store, hub };
    crdplane_transport::serve_one(
        listener,
        StorageServer::new(svc)
            .max_decoding_message_size(64 << 20)
            .max_encoding_message_size(256 << 20),
    )
    .await?;
    Ok(())
}
