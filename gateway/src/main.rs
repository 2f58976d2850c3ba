//! `crdplane-gateway`: the Kubernetes REST API front of crdplane (see the crate docs).
use clap::Parser;

/// mimalloc instead of glibc malloc: the request path allocates many small, short-lived
/// buffers, and glibc's consolidation showed up as ~20% of CPU in profiles.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(about = "crdplane gateway: Kubernetes REST API over the crdplane services")]
struct Args {
    #[arg(
        long,
        env = "CRDPLANE_GATEWAY_LISTEN",
        default_value = "127.0.0.1:6443"
    )]
    listen: String,
    #[arg(
        long,
        env = "CRDPLANE_REGISTRY",
        default_value = "http://127.0.0.1:7002"
    )]
    registry: String,
    #[arg(
        long,
        env = "CRDPLANE_VALIDATION",
        default_value = "http://127.0.0.1:7003"
    )]
    validation: String,
    #[arg(
        long,
        env = "CRDPLANE_STORAGE",
        default_value = "http://127.0.0.1:7001"
    )]
    storage: String,
    /// Tenant of requests without a /clusters/<tenant> prefix.
    #[arg(long, default_value = "default")]
    default_tenant: String,
    /// Most client connections open at once; more are closed at once (0 = the descriptor
    /// limit less a reserve).
    #[arg(long, default_value_t = 0)]
    max_connections: usize,
    /// Most connections from one client address (0 = seven eighths of --max-connections).
    #[arg(long, default_value_t = 0)]
    max_connections_per_client: usize,
    /// Seconds a request head may take to arrive before the connection is closed
    /// (kube-apiserver: 32).
    #[arg(long, default_value_t = 32.0)]
    request_header_timeout: f64,
    /// Seconds a kept-alive connection may idle between requests (kube-apiserver: 90).
    #[arg(long, default_value_t = 90.0)]
    idle_timeout: f64,
    /// Most watches open at once from one client (today: one client address).
    #[arg(long, env = "CRDPLANE_GATEWAY_MAX_WATCHES_PER_CLIENT", default_value_t = crdplane_gateway::watch_limit::DEFAULT_PER_CLIENT)]
    max_watches_per_client: usize,
    /// The most time a non-long-running request may take, a Go duration (kube-apiserver's
    /// --request-timeout: 1m0s); a request's own `?timeout=` may only shorten it.
    #[arg(long, default_value = "1m0s", value_parser = request_timeout)]
    request_timeout: std::time::Duration,
    /// Most watches open at once in this gateway.
    #[arg(long, env = "CRDPLANE_GATEWAY_MAX_WATCHES", default_value_t = crdplane_gateway::watch_limit::DEFAULT_TOTAL)]
    max_watches: usize,
    /// Seconds each call to registry, validation or storage may take, watches excepted
    /// (0 = no limit); an expired call is a 504 Timeout. The service flags take
    /// comma-separated endpoint lists.
    #[arg(long, env = "CRDPLANE_GRPC_TIMEOUT", default_value_t = 60.0)]
    grpc_timeout: f64,
}

/// `--request-timeout`: a Go duration, not negative (as kube-apiserver validates it).
fn request_timeout(s: &str) -> Result<std::time::Duration, String> {
    let nanos = crdplane_gateway::filters::limits::parse_go_duration(s)?;
    u64::try_from(nanos)
        .map(std::time::Duration::from_nanos)
        .map_err(|_| "--request-timeout can not be negative value".to_string())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let a = Args::parse();
    anyhow::ensure!(
        a.max_watches > 0 && a.max_watches_per_client > 0,
        "--max-watches and --max-watches-per-client must be at least 1"
    );
    let listener = tokio::net::TcpListener::bind(&a.listen).await?;
    crdplane_core::names::announce(listener.local_addr()?);
    let cfg = crdplane_gateway::Config {
        registry_endpoint: a.registry,
        validation_endpoint: a.validation,
        storage_endpoint: a.storage,
        default_tenant: a.default_tenant,
        advertise_address: listener.local_addr()?.to_string(),
        connections: crdplane_transport::accept::ConnLimits {
            max_total: a.max_connections,
            max_per_client: a.max_connections_per_client,
        },
        request_header_timeout: std::time::Duration::try_from_secs_f64(a.request_header_timeout)?,
        idle_timeout: std::time::Duration::try_from_secs_f64(a.idle_timeout)?,
        watches: crdplane_gateway::watch_limit::WatchLimits {
            max_total: a.max_watches,
            max_per_client: a.max_watches_per_client,
        },
        request_timeout: a.request_timeout,
        call_timeout: Some(std::time::Duration::try_from_secs_f64(a.grpc_timeout)?)
            .filter(|d| !d.is_zero()),
    };
    crdplane_gateway::serve(cfg, listener).await
}
