//! The registry service binary: `crdplane-registry --listen ADDR --storage URL --validation URL`
//! (flags in `crdplane_registry::config`).
use clap::Parser;

/// mimalloc instead of glibc malloc: the request path allocates many small, short-lived
/// buffers, and glibc's consolidation showed up as ~20% of CPU in profiles.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    crdplane_transport::logging::init("error").map_err(anyhow::Error::msg)?;
    // Trace export when the OTEL_* environment asks for it; flushed when main returns,
    // which a SIGTERM or SIGINT leads to once serving has drained.
    let _traces =
        crdplane_transport::telemetry::init("crdplane-registry").map_err(anyhow::Error::msg)?;
    let shutdown = crdplane_transport::Shutdown::on_signals()?;
    let args = crdplane_registry::config::Args::parse();
    args.validate().map_err(anyhow::Error::msg)?;
    let listener = tokio::net::TcpListener::bind(&args.listen).await?;
    tracing::info!(addr = %listener.local_addr()?, "registry listening");
    // With mutual TLS the service's URL is https:// (crdplane_transport::mtls).
    let scheme = if args.mtls.grpc_tls_ca_file.is_some() {
        "https"
    } else {
        "http"
    };
    crdplane_transport::metrics::start(&args.metrics, &args.mtls).await?;
    crdplane_core::names::announce_scheme(scheme, listener.local_addr()?);
    crdplane_registry::serve(args.config(), listener, shutdown).await
}
