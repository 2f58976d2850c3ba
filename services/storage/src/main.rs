//! `crdplane-storage`: the storage service binary (see the crate docs; flags in
//! `crdplane_storage::config`).
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
        crdplane_transport::telemetry::init("crdplane-storage").map_err(anyhow::Error::msg)?;
    let shutdown = crdplane_transport::Shutdown::on_signals()?;
    let a = crdplane_storage::config::Args::parse();
    a.validate().map_err(anyhow::Error::msg)?;
    let listener = tokio::net::TcpListener::bind(&a.listen).await?;
    // With mutual TLS the service's URL is https:// (crdplane_transport::mtls).
    let scheme = if a.mtls.grpc_tls_ca_file.is_some() {
        "https"
    } else {
        "http"
    };
    crdplane_transport::metrics::start(&a.metrics, &a.mtls).await?;
    crdplane_core::names::announce_scheme(scheme, listener.local_addr()?);
    crdplane_storage::serve(a.config(), listener, shutdown).await
}
