//! `crdplane-storage`: the storage service binary (see the crate docs).
use clap::Parser;

/// mimalloc instead of glibc malloc: the request path allocates many small, short-lived
/// buffers, and glibc's consolidation showed up as ~20% of CPU in profiles.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(about = "crdplane storage service (Redis)")]
struct Args {
    /// Address to listen on.
    #[arg(
        long,
        env = "CRDPLANE_STORAGE_LISTEN",
        default_value = "127.0.0.1:7001"
    )]
    listen: String,
    /// Redis URL (redis://host:port or redis+unix:///path).
    #[arg(
        long,
        env = "CRDPLANE_REDIS_URL",
        default_value = "redis://127.0.0.1:6379"
    )]
    redis_url: String,
    /// Most events kept per (tenant, resource) for watch resume (the memory bound).
    #[arg(long, default_value_t = crdplane_storage::DEFAULT_HISTORY_LEN)]
    history_len: usize,
    /// Seconds of events kept per (tenant, resource) for watch resume (0 = by length only).
    #[arg(long, default_value_t = crdplane_storage::DEFAULT_HISTORY_WINDOW_SECS)]
    history_window: u64,
    /// When a write is acknowledged: `fsync` (on disk; Redis must run with appendonly yes and
    /// appendfsync always), `everysec` (Redis appendfsync everysec: a machine crash loses up
    /// to ~2 s of acknowledged writes) or `memory` (no persistence check).
    #[arg(long, env = "CRDPLANE_DURABILITY", default_value = "fsync")]
    durability: crdplane_storage::durability::Durability,
    /// Longest wait for one Redis connect or command, e.g. `1s`, `500ms`: while Redis is
    /// unreachable, requests fail after at most about this long with 503 and Retry-After.
    #[arg(long, env = "CRDPLANE_REDIS_TIMEOUT", default_value = "1s", value_parser = crdplane_storage::parse_timeout)]
    redis_timeout: std::time::Duration,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let a = Args::parse();
    let listener = tokio::net::TcpListener::bind(&a.listen).await?;
    crdplane_core::names::announce(listener.local_addr()?);
    crdplane_storage::serve(
        crdplane_storage::Config {
            redis_url: a.redis_url,
            history_len: a.history_len,
            history_window_secs: a.history_window,
            durability: a.durability,
            redis_timeout: a.redis_timeout,
        },
        listener,
    )
    .await
}
