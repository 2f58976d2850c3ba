//! `crdplane-load otlp-sink`: an OTLP/gRPC trace receiver that only counts what it gets, so
//! that the cost of trace export can be measured end to end (`loadtest/cpu-per-request.sh`
//! with `OTEL_EXPORTER_OTLP_ENDPOINT` pointing here) without a collector installed. It
//! prints `listening on http://ADDR` once bound, then every 10 s and at exit the spans and
//! export calls received so far. Not a collector: nothing is kept.

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The sink's options.
#[derive(Debug, clap::Parser)]
#[command(name = "crdplane-load otlp-sink")]
pub struct SinkArgs {
    /// Where to listen (`127.0.0.1:0`: a free port, printed).
    #[arg(long, default_value = "127.0.0.1:4317")]
    pub listen: String,
}

#[derive(Default)]
struct Counts {
    spans: AtomicU64,
    exports: AtomicU64,
}

#[derive(Clone, Default)]
struct Sink(Arc<Counts>);

#[tonic::async_trait]
impl TraceService for Sink {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let n: usize = request
            .get_ref()
            .resource_spans
            .iter()
            .flat_map(|r| &r.scope_spans)
            .map(|s| s.spans.len())
            .sum();
        self.0.spans.fetch_add(n as u64, Ordering::Relaxed);
        self.0.exports.fetch_add(1, Ordering::Relaxed);
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

/// Runs the sink until interrupted.
pub fn main_with_args(args: SinkArgs) -> std::process::ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("otlp-sink: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    rt.block_on(async move {
        let listener = match tokio::net::TcpListener::bind(&args.listen).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("otlp-sink: {}: {e}", args.listen);
                return std::process::ExitCode::FAILURE;
            }
        };
        let addr = listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        println!("listening on http://{addr}");
        let sink = Sink::default();
        let counts = sink.0.clone();
        let report = move || {
            println!(
                "spans {} in {} exports",
                counts.spans.load(Ordering::Relaxed),
                counts.exports.load(Ordering::Relaxed)
            );
        };
        let server = tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(sink))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener));
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(10));
        tick.tick().await;
        tokio::pin!(server);
        loop {
            tokio::select! {
                r = &mut server => {
                    report();
                    return match r {
                        Ok(()) => std::process::ExitCode::SUCCESS,
                        Err(e) => {
                            eprintln!("otlp-sink: {e}");
                            std::process::ExitCode::FAILURE
                        }
                    };
                }
                _ = tick.tick() => report(),
                _ = tokio::signal::ctrl_c() => {
                    report();
                    return std::process::ExitCode::SUCCESS;
                }
            }
        }
    })
}
