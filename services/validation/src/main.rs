//! Validation service binary: `crdplane-validation --listen 127.0.0.1:PORT`.
use clap::Parser;

/// mimalloc instead of glibc malloc: the request path allocates many small, short-lived
/// buffers, and glibc's consolidation showed up as ~20% of CPU in profiles.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser, Debug)]
#[command(
    name = "crdplane-validation",
    about = "crdplane validation service (gRPC)"
)]
struct Args {
    /// Address to listen on.
    #[arg(
        long,
        env = "CRDPLANE_VALIDATION_LISTEN",
        default_value = "127.0.0.1:50052"
    )]
    listen: String,
    /// Byte budget of the compiled-schema cache (estimated heap size of the compiled
    /// schemas); least recently used schemas are evicted beyond it.
    #[arg(long, env = "CRDPLANE_VALIDATION_SCHEMA_CACHE_BYTES", default_value_t = crdplane_validation::server::DEFAULT_CACHE_BYTES)]
    schema_cache_bytes: usize,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let args = Args::parse();
    let listener = tokio::net::TcpListener::bind(&args.listen).await?;
    tracing::info!(addr = %listener.local_addr()?, "validation service listening");
    crdplane_core::names::announce(listener.local_addr()?);
    crdplane_validation::serve(
        crdplane_validation::Config {
            cache_bytes: args.schema_cache_bytes,
        },
        listener,
    )
    .await
}
