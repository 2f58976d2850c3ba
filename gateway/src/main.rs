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
    let cfg = crdplane_gateway::Config {
        registry_endpoint: a.registry,
        validation_endpoint: a.validation,
        storage_endpoint: a.storage,
        default_tenant: a.default_tenant,
        advertise_address: listener.local_addr()?.to_string(),
    };
    crdplane_gateway::serve(cfg, listener).await
}
