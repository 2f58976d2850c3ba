//! Storage's Prometheus metrics, beside the gRPC server metrics of
//! `crdplane_transport::metrics` in the process's default registry (served by the service's
//! `--metrics-listen` listener): every Redis round trip (observed in
//! [`crate::backend::Conn`], under every store operation), the sizes of batched writes and
//! reads, and the watches this replica serves.
//!
//! Watch fan-out health: `crdplane_storage_watch_lagged_total` counts watches closed because
//! they fell behind the pub/sub stream (their client resumes from its last revision), the
//! sign of a fan-out that cannot keep up.

use prometheus::{HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts};
use std::sync::LazyLock;

fn registered<M: prometheus::core::Collector + Clone + 'static>(m: M) -> M {
    prometheus::default_registry()
        .register(Box::new(m.clone()))
        .expect("storage metric registered once");
    m
}

const REDIS_SECONDS_NAME: &str = "crdplane_redis_command_duration_seconds";
const REDIS_ERRORS_NAME: &str = "crdplane_redis_errors_total";
const BATCH_SIZE_NAME: &str = "crdplane_storage_batch_size";

/// Redis round-trip buckets (seconds): 100 µs to 2.5 s.
const REDIS_BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// Seconds of each Redis round trip, by `op`: `command` (one command or script) or
/// `pipeline`.
pub static REDIS_SECONDS: LazyLock<HistogramVec> = LazyLock::new(|| {
    registered(
        HistogramVec::new(
            HistogramOpts::new(
                REDIS_SECONDS_NAME,
                "Seconds of each Redis round trip (a command, a script or a pipeline).",
            )
            .buckets(REDIS_BUCKETS.to_vec()),
            &["op"],
        )
        .expect("metric"),
    )
});

/// Failed Redis round trips by `kind`: `io` (connection, timeout) or `server` (an error
/// reply).
pub static REDIS_ERRORS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    registered(
        IntCounterVec::new(
            Opts::new(
                REDIS_ERRORS_NAME,
                "Redis round trips that failed, by kind: io (connection or timeout) or server (an error reply).",
            ),
            &["kind"],
        )
        .expect("metric"),
    )
});

/// Items per batched call (`op`: `create`, `get`).
pub static BATCH_SIZE: LazyLock<HistogramVec> = LazyLock::new(|| {
    registered(
        HistogramVec::new(
            HistogramOpts::new(
                BATCH_SIZE_NAME,
                "Items per batched storage call (CreateMany, GetMany).",
            )
            .buckets(vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0]),
            &["op"],
        )
        .expect("metric"),
    )
});

/// Watches this replica serves now.
pub static WATCHERS: LazyLock<IntGauge> = LazyLock::new(|| {
    registered(
        IntGauge::new(
            "crdplane_storage_watchers",
            "Watches this storage replica serves now.",
        )
        .expect("metric"),
    )
});

/// Events sent to watches.
pub static WATCH_EVENTS: LazyLock<IntCounter> = LazyLock::new(|| {
    registered(
        IntCounter::new(
            "crdplane_storage_watch_events_total",
            "Watch events sent to the gateways (initial state, replay and live).",
        )
        .expect("metric"),
    )
});

/// Watches closed because they fell behind the pub/sub stream.
pub static WATCH_LAGGED: LazyLock<IntCounter> = LazyLock::new(|| {
    registered(
        IntCounter::new(
            "crdplane_storage_watch_lagged_total",
            "Watches closed because they fell behind the pub/sub stream (the client resumes).",
        )
        .expect("metric"),
    )
});

/// Counts one served watch while alive.
pub struct WatchGuard(());

impl WatchGuard {
    /// One more watch.
    pub fn new() -> Self {
        WATCHERS.inc();
        Self(())
    }
}

impl Default for WatchGuard {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        WATCHERS.dec();
    }
}

/// Whether the per-call metrics are recorded (each not named by `--disabled-metrics`):
/// Redis round-trip seconds, Redis errors, batch sizes.
static RECORDED: LazyLock<[bool; 3]> = LazyLock::new(|| {
    use crdplane_transport::metrics::is_enabled;
    [
        is_enabled(REDIS_SECONDS_NAME),
        is_enabled(REDIS_ERRORS_NAME),
        is_enabled(BATCH_SIZE_NAME),
    ]
});

/// Records the size of one batched call of `op` (`create`, `get`).
pub fn batch_size(op: &'static str, items: usize) {
    if RECORDED[2] {
        BATCH_SIZE.with_label_values(&[op]).observe(items as f64);
    }
}

/// Records one Redis round trip of `op` that took `seconds` and ended `ok` or with `err`.
pub fn redis_round_trip(op: &'static str, seconds: f64, err: Option<&redis::RedisError>) {
    if RECORDED[0] {
        REDIS_SECONDS.with_label_values(&[op]).observe(seconds);
    }
    if let Some(e) = err.filter(|_| RECORDED[1]) {
        let kind = if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() {
            "io"
        } else {
            "server"
        };
        REDIS_ERRORS.with_label_values(&[kind]).inc();
    }
}
