//! `crdplane-gateway`: the Kubernetes REST API front of crdplane (see the crate docs; flags
//! in `crdplane_gateway::config`).
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
        crdplane_transport::telemetry::init("crdplane-gateway").map_err(anyhow::Error::msg)?;
    let shutdown = crdplane_transport::Shutdown::on_signals()?;
    let a = crdplane_gateway::config::Args::parse();
    a.validate().map_err(anyhow::Error::msg)?;
    let listener = tokio::net::TcpListener::bind(&a.listen).await?;
    let cfg = a
        .config(listener.local_addr()?.to_string())
        .map_err(anyhow::Error::msg)?;
    let scheme = if cfg.tls.is_some() { "https" } else { "http" };
    crdplane_core::names::announce_scheme(scheme, listener.local_addr()?);
    crdplane_gateway::serve(cfg, listener, shutdown).await
}
