//! The process log of every crdplane binary: `tracing` events on standard error, filtered by
//! `RUST_LOG` (each binary names its default), as text or, with `CRDPLANE_LOG_FORMAT=json`,
//! one JSON object per line (kube-apiserver's `--logging-format=json`): `timestamp`,
//! `level`, `target` and the event's fields, the message included, for log collectors.
//!
//! Called first thing by each `main.rs`; the gateway's per-request debug line
//! (`crdplane_gateway::request`) carries the request's `audit_id`, the id its response's
//! `Audit-Id` header, its audit events and its span (attribute `audit-id`) carry, and the
//! `trace_id` of a sampled trace (see [`crate::telemetry`]).

/// The log formats.
pub const FORMATS: [&str; 2] = ["text", "json"];

/// Installs the process's subscriber: `RUST_LOG`, else `default_directive` (e.g. `info`);
/// text, or JSON lines when `CRDPLANE_LOG_FORMAT=json`. An unknown format is an error.
pub fn init(default_directive: &str) -> Result<(), String> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_directive));
    let format = std::env::var("CRDPLANE_LOG_FORMAT").unwrap_or_default();
    let b = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter);
    match format.as_str() {
        "" | "text" => b.init(),
        "json" => b.json().flatten_event(true).init(),
        other => {
            return Err(format!(
                "CRDPLANE_LOG_FORMAT={other:?}: the formats are {}",
                FORMATS.join(", ")
            ));
        }
    }
    Ok(())
}
