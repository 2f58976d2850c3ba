//! Validation service binary: `crdplane-validation --listen 127.0.0.1:PORT` (flags in
//! `crdplane_validation::config`).
use clap::Parser;

/// mimalloc instead of glibc malloc: the request path allocates many small, short-lived
/// buffers, and glibc's consolidation showed up as ~20% of CPU in profiles.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    crdplane_transport::logging::init("info").map_err(anyhow::Error::msg)?;
    // Trace export when the OTEL_* environment asks for it; flushed when main returns,
    // which a SIGTERM or SIGINT leads to once serving has drained.
    let _traces =
        crdplane_transport::telemetry::init("crdplane-validation").map_err(anyhow::Error::msg)?;
    let shutdown = crdplane_transport::Shutdown::on_signals()?;
    let args = crdplane_validation::config::Args::parse();
    args.validate().map_err(anyhow::Error::msg)?;
    let listener = tokio::net::TcpListener::bind(&args.listen).await?;
    tracing::info!(addr = %listener.local_addr()?, "validation service listening");
    // With mutual TLS the service's URL is https:// (crdplane_transport::mtls).
    let scheme = if args.mtls.grpc_tls_ca_file.is_some() {
        "https"
    } else {
        "http"
    };
    crdplane_transport::metrics::start(&args.metrics, &args.mtls).await?;
    crdplane_core::names::announce_scheme(scheme, listener.local_addr()?);
    crdplane_validation::serve(args.config(), listener, shutdown).await
}
