//! The storage binary's command line (clap): environment names `CRDPLANE_STORAGE_<FLAG>`,
//! the default address from [`crdplane_core::ports`], defaults of the history bounds from
//! the crate root, and [`Args::validate`], which `main` calls before binding. Not on the
//! request path.

use crdplane_core::ports;

/// `crdplane-storage` flags.
#[derive(clap::Parser, Debug, Clone)]
#[command(name = "crdplane-storage", about = "crdplane storage service (Redis)")]
pub struct Args {
    /// Address to listen on (HOST:PORT; port 0 picks a free one).
    #[arg(long, env = "CRDPLANE_STORAGE_LISTEN", default_value = ports::STORAGE_LISTEN)]
    pub listen: String,
    /// Redis URL (redis://host:port or redis+unix:///path), or a comma-separated seed list of
    /// a Redis Cluster (one URL of a cluster node is enough: the cluster is detected).
    #[arg(
        long,
        env = "CRDPLANE_STORAGE_REDIS_URL",
        default_value = "redis://127.0.0.1:6379"
    )]
    pub redis_url: String,
    /// Most events kept per (tenant, resource) for watch resume (the memory bound).
    #[arg(long, env = "CRDPLANE_STORAGE_HISTORY_LEN", default_value_t = crate::DEFAULT_HISTORY_LEN)]
    pub history_len: usize,
    /// Seconds of events kept per (tenant, resource) for watch resume (0 = by length only).
    #[arg(
        long,
        env = "CRDPLANE_STORAGE_HISTORY_WINDOW",
        default_value_t = crate::DEFAULT_HISTORY_WINDOW_SECS
    )]
    pub history_window: u64,
    /// When a write is acknowledged: `fsync` (on disk; Redis must run with appendonly yes and
    /// appendfsync always), `everysec` (Redis appendfsync everysec: a machine crash loses up
    /// to ~2 s of acknowledged writes) or `memory` (no persistence check).
    #[arg(long, env = "CRDPLANE_STORAGE_DURABILITY", default_value = "fsync")]
    pub durability: crate::durability::Durability,
    /// Longest wait for one Redis connect or command, e.g. `1s`, `500ms`: while Redis is
    /// unreachable, requests fail after at most about this long with 503 and Retry-After.
    #[arg(
        long,
        env = "CRDPLANE_STORAGE_REDIS_TIMEOUT",
        default_value = "1s",
        value_parser = crate::parse_timeout
    )]
    pub redis_timeout: std::time::Duration,
    /// Acknowledge a write only once this many replicas of its Redis master have it (Redis
    /// `WAIT`, bounded by --redis-timeout; 504 when fewer confirm in time). With 1 on a
    /// cluster with one replica per master, killing a master loses no acknowledged write.
    #[arg(long, env = "CRDPLANE_STORAGE_WAIT_REPLICAS", default_value_t = 0)]
    pub wait_replicas: u32,
    /// How often objects whose time to live ran out (events) are deleted, e.g. `10s`,
    /// `500ms`; `0` disables the sweep on this replica.
    #[arg(
        long,
        env = "CRDPLANE_STORAGE_EXPIRY_SWEEP_PERIOD",
        default_value = "10s",
        value_parser = crate::parse_period
    )]
    pub expiry_sweep_period: std::time::Duration,
    /// Mutual TLS of the gRPC listener and calls (see `crdplane_transport::mtls`).
    #[command(flatten)]
    pub mtls: crdplane_transport::mtls::MtlsArgs,
    /// The Prometheus metrics listener (see `crdplane_transport::metrics`).
    #[command(flatten)]
    pub metrics: crdplane_transport::metrics::MetricsArgs,
}

/// URL schemes the redis client connects with.
const REDIS_SCHEMES: &[&str] = &["redis://", "rediss://", "redis+unix://", "unix://"];

impl Args {
    /// Checks every flag before anything is bound or connected.
    pub fn validate(&self) -> Result<(), String> {
        ports::check_listen("--listen", &self.listen)?;
        let seeds = crate::backend::Target::seeds(&self.redis_url);
        if seeds.is_empty() {
            return Err("--redis-url: empty".into());
        }
        for url in &seeds {
            if !REDIS_SCHEMES.iter().any(|s| url.starts_with(s)) {
                return Err(format!(
                    "--redis-url: {url:?} is not a redis://, rediss://, redis+unix:// or unix:// URL"
                ));
            }
        }
        if seeds.len() > 1 && seeds.iter().any(|u| !u.starts_with("redis")) {
            return Err("--redis-url: a cluster seed list takes redis:// or rediss:// URLs".into());
        }
        if self.history_len == 0 {
            return Err("--history-len must be at least 1".into());
        }
        if !self.expiry_sweep_period.is_zero()
            && self.expiry_sweep_period < std::time::Duration::from_millis(100)
        {
            return Err("--expiry-sweep-period must be 0 (off) or at least 100ms".into());
        }
        self.mtls.files()?;
        Ok(())
    }

    /// The storage service's configuration.
    pub fn config(&self) -> crate::Config {
        crate::Config {
            redis_url: self.redis_url.clone(),
            history_len: self.history_len,
            history_window_secs: self.history_window,
            durability: self.durability,
            redis_timeout: self.redis_timeout,
            wait_replicas: self.wait_replicas,
            expiry_sweep_period: self.expiry_sweep_period,
            tls: self.mtls.files().ok().flatten(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn validate_table() {
        let cases: &[(&[&str], Option<&str>)] = &[
            (&[], None),
            (&["--redis-url", "redis+unix:///tmp/r.sock"], None),
            (&["--history-window", "0"], None),
            (
                &["--listen", ":1"],
                Some("--listen: \":1\" is not HOST:PORT"),
            ),
            (
                &["--redis-url", "127.0.0.1:6379"],
                Some(
                    "--redis-url: \"127.0.0.1:6379\" is not a redis://, rediss://, redis+unix:// or unix:// URL",
                ),
            ),
            (
                &["--history-len", "0"],
                Some("--history-len must be at least 1"),
            ),
            (&["--expiry-sweep-period", "0"], None),
            (&["--expiry-sweep-period", "2s"], None),
            (
                &["--expiry-sweep-period", "10ms"],
                Some("--expiry-sweep-period must be 0 (off) or at least 100ms"),
            ),
        ];
        for (flags, want) in cases {
            let a =
                Args::try_parse_from(std::iter::once("s").chain(flags.iter().copied())).unwrap();
            assert_eq!(a.validate().err().as_deref(), *want, "{flags:?}");
        }
        let d = Args::try_parse_from(["s"]).unwrap().config();
        let def = crate::Config::default();
        assert_eq!(
            (
                d.history_len,
                d.history_window_secs,
                d.redis_timeout,
                d.expiry_sweep_period
            ),
            (
                def.history_len,
                def.history_window_secs,
                def.redis_timeout,
                def.expiry_sweep_period
            )
        );
        assert!(
            Args::try_parse_from(["s", "--expiry-sweep-period", "soon"]).is_err(),
            "not a period"
        );
    }
}
