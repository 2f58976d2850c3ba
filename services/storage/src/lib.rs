//! crdplane storage service: objects of every kind in Redis, with resourceVersion
//! concurrency, ordered lists and watch.
//!
//! Request path: gateway / registry → gRPC `crdplane.v1.Storage` → [`server`] → [`store`]
//! (Lua scripts: one atomic script per write; the creates of one resource batched by
//! `CreateMany` run as one script call) → Redis; live events come back through Redis
//! pub/sub into [`watch::Hub`] and out to gRPC watch streams. Key layout: [`keys`].
//! The service is stateless apart from the pub/sub hub: run as many replicas as needed.

pub mod durability;
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
    /// Most events kept per (tenant, resource) for watch resume (the memory bound).
    pub history_len: usize,
    /// Seconds of events kept per (tenant, resource) for watch resume (0 = length only).
    pub history_window_secs: u64,
    /// What a write must reach before it is acknowledged ([`durability`]).
    pub durability: durability::Durability,
}

/// Default watch history per (tenant, resource): 75 s, like upstream's watch cache
/// (`storage/cacher/watch_cache.go` `eventFreshDuration`), at most 200,000 events (75 s at
/// ~2,700 writes/s to one resource; memory ≈ events × object size, ×2 for updates, which
/// also carry the previous state).
pub const DEFAULT_HISTORY_WINDOW_SECS: u64 = 75;
pub const DEFAULT_HISTORY_LEN: usize = 200_000;

impl Default for Config {
    fn default() -> Self {
        Self {
            redis_url: "redis://127.0.0.1:6379".into(),
            history_len: DEFAULT_HISTORY_LEN,
            history_window_secs: DEFAULT_HISTORY_WINDOW_SECS,
            durability: durability::Durability::Fsync,
        }
    }
}

/// Serves the storage gRPC API on `listener` until the process ends.
pub async fn serve(config: Config, listener: tokio::net::TcpListener) -> anyhow::Result<()> {
    let store = store::Store::connect(
        &config.redis_url,
        store::StoreOptions {
            history_len: config.history_len,
            history_window_secs: config.history_window_secs,
            durability: config.durability,
        },
    )
    .await?;
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
