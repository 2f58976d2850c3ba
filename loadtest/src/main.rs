//! `crdplane-load` binary: parses the command line and hands over to the library.
use clap::Parser;

/// mimalloc instead of glibc malloc: the request path allocates many small, short-lived
/// buffers, and glibc's consolidation showed up as ~20% of CPU in profiles.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    // The watch scenarios have their own options (crdplane_load::watch).
    if matches!(
        std::env::args().nth(1).as_deref(),
        Some("watch-fanout" | "watch-selective")
    ) {
        return crdplane_load::watch::main_with_args(crdplane_load::watch::WatchArgs::parse());
    }
    // `otlp-sink` runs no load: a trace receiver for measuring export (crdplane_load::otlp_sink).
    if std::env::args().nth(1).as_deref() == Some("otlp-sink") {
        let args = crdplane_load::otlp_sink::SinkArgs::parse_from(std::env::args().skip(1));
        return crdplane_load::otlp_sink::main_with_args(args);
    }
    // `report` runs no load: HTML from saved JSON reports (crdplane_load::report).
    if std::env::args().nth(1).as_deref() == Some("report") {
        let args = crdplane_load::report::ReportArgs::parse_from(std::env::args().skip(1));
        return crdplane_load::report::main_with_args(args);
    }
    crdplane_load::main_with_args(crdplane_load::config::Args::parse())
}
