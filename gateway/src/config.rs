//! The gateway binary's command line (clap), with its environment names
//! (`CRDPLANE_GATEWAY_<FLAG>`), defaults written once (ports from
//! [`crdplane_core::ports`], edge timeouts from [`crate::context`], watch bounds from
//! [`crate::watch_limit`]) and [`Args::validate`], which `main` calls before binding.
//! Not on the request path: it only builds the [`crate::context::Config`] that `serve` runs with.

use crdplane_core::ports;

/// `crdplane-gateway` flags.
#[derive(clap::Parser, Debug, Clone)]
#[command(
    name = "crdplane-gateway",
    about = "crdplane gateway: Kubernetes REST API over the crdplane services"
)]
pub struct Args {
    /// Address to listen on (HOST:PORT; port 0 picks a free one).
    #[arg(long, env = "CRDPLANE_GATEWAY_LISTEN", default_value = ports::GATEWAY_LISTEN)]
    pub listen: String,
    /// Registry service endpoints, comma-separated (calls are balanced over them).
    #[arg(long, env = "CRDPLANE_GATEWAY_REGISTRY", default_value = ports::REGISTRY_ENDPOINT)]
    pub registry: String,
    /// Validation service endpoints, comma-separated.
    #[arg(long, env = "CRDPLANE_GATEWAY_VALIDATION", default_value = ports::VALIDATION_ENDPOINT)]
    pub validation: String,
    /// Storage service endpoints, comma-separated.
    #[arg(long, env = "CRDPLANE_GATEWAY_STORAGE", default_value = ports::STORAGE_ENDPOINT)]
    pub storage: String,
    /// Tenant of requests without a `/clusters/<tenant>` prefix.
    #[arg(
        long,
        env = "CRDPLANE_GATEWAY_DEFAULT_TENANT",
        default_value = "default",
        help = "Tenant of requests without a /clusters/<tenant> prefix."
    )]
    pub default_tenant: String,
    /// Most client connections open at once; more are closed at once (0 = the descriptor
    /// limit less a reserve).
    #[arg(long, env = "CRDPLANE_GATEWAY_MAX_CONNECTIONS", default_value_t = 0)]
    pub max_connections: usize,
    /// Most connections from one client address (0 = seven eighths of --max-connections).
    #[arg(
        long,
        env = "CRDPLANE_GATEWAY_MAX_CONNECTIONS_PER_CLIENT",
        default_value_t = 0
    )]
    pub max_connections_per_client: usize,
    /// Seconds a request head may take to arrive before the connection is closed
    /// (kube-apiserver: 32).
    #[arg(
        long,
        env = "CRDPLANE_GATEWAY_REQUEST_HEADER_TIMEOUT",
        default_value_t = crate::context::REQUEST_HEADER_TIMEOUT.as_secs_f64()
    )]
    pub request_header_timeout: f64,
    /// Seconds a kept-alive connection may idle between requests (kube-apiserver: 90).
    #[arg(
        long,
        env = "CRDPLANE_GATEWAY_IDLE_TIMEOUT",
        default_value_t = crate::context::IDLE_TIMEOUT.as_secs_f64()
    )]
    pub idle_timeout: f64,
    /// Most watches open at once from one client (today: one client address).
    #[arg(
        long,
        env = "CRDPLANE_GATEWAY_MAX_WATCHES_PER_CLIENT",
        default_value_t = crate::watch_limit::DEFAULT_PER_CLIENT
    )]
    pub max_watches_per_client: usize,
    /// Most watches open at once in this gateway.
    #[arg(
        long,
        env = "CRDPLANE_GATEWAY_MAX_WATCHES",
        default_value_t = crate::watch_limit::DEFAULT_TOTAL
    )]
    pub max_watches: usize,
    /// The most time a non-long-running request may take, a Go duration (kube-apiserver's
    /// --request-timeout: 1m0s); a request's own `?timeout=` may only shorten it.
    #[arg(
        long,
        env = "CRDPLANE_GATEWAY_REQUEST_TIMEOUT",
        default_value = "1m0s",
        value_parser = request_timeout
    )]
    pub request_timeout: std::time::Duration,
    /// Seconds each call to registry, validation or storage may take, watches excepted
    /// (0 = no limit); an expired call is a 504 Timeout.
    #[arg(
        long,
        env = "CRDPLANE_GATEWAY_GRPC_TIMEOUT",
        default_value_t = crdplane_transport::deadline::DEFAULT_TIMEOUT.as_secs_f64()
    )]
    pub grpc_timeout: f64,
    /// How long an Event is kept after its last write, a Go duration (kube-apiserver's
    /// --event-ttl: 1h0m0s); the storage service removes it then.
    #[arg(
        long,
        env = "CRDPLANE_GATEWAY_EVENT_TTL",
        default_value = "1h0m0s",
        value_parser = event_ttl
    )]
    pub event_ttl: std::time::Duration,
}

/// `--event-ttl`: a Go duration of at least one second (storage expiry has whole seconds).
fn event_ttl(s: &str) -> Result<std::time::Duration, String> {
    let nanos = crate::filters::limits::parse_go_duration(s)?;
    match u64::try_from(nanos) {
        Ok(n) if n >= 1_000_000_000 => Ok(std::time::Duration::from_nanos(n)),
        _ => Err("--event-ttl must be at least 1s".to_string()),
    }
}

/// `--request-timeout`: a Go duration, not negative (as kube-apiserver validates it).
fn request_timeout(s: &str) -> Result<std::time::Duration, String> {
    let nanos = crate::filters::limits::parse_go_duration(s)?;
    u64::try_from(nanos)
        .map(std::time::Duration::from_nanos)
        .map_err(|_| "--request-timeout can not be negative value".to_string())
}

use crdplane_transport::deadline::from_flag as call_timeout;

fn seconds(flag: &str, v: f64) -> Result<std::time::Duration, String> {
    match std::time::Duration::try_from_secs_f64(v) {
        Ok(d) if !d.is_zero() => Ok(d),
        _ => Err(format!("{flag}: {v} is not a positive number of seconds")),
    }
}

impl Args {
    /// Checks every flag before anything is bound or connected.
    pub fn validate(&self) -> Result<(), String> {
        ports::check_listen("--listen", &self.listen)?;
        ports::check_endpoint("--registry", &self.registry)?;
        ports::check_endpoint("--validation", &self.validation)?;
        ports::check_endpoint("--storage", &self.storage)?;
        if self.default_tenant.is_empty() {
            return Err("--default-tenant must not be empty".into());
        }
        seconds("--request-header-timeout", self.request_header_timeout)?;
        seconds("--idle-timeout", self.idle_timeout)?;
        if self.max_watches == 0 || self.max_watches_per_client == 0 {
            return Err("--max-watches and --max-watches-per-client must be at least 1".into());
        }
        call_timeout(self.grpc_timeout)?;
        Ok(())
    }

    /// The gateway's configuration, for a listener bound at `advertise_address`.
    pub fn config(&self, advertise_address: String) -> Result<crate::context::Config, String> {
        self.validate()?;
        Ok(crate::context::Config {
            registry_endpoint: self.registry.clone(),
            validation_endpoint: self.validation.clone(),
            storage_endpoint: self.storage.clone(),
            default_tenant: self.default_tenant.clone(),
            advertise_address,
            connections: crdplane_transport::accept::ConnLimits {
                max_total: self.max_connections,
                max_per_client: self.max_connections_per_client,
            },
            request_header_timeout: seconds(
                "--request-header-timeout",
                self.request_header_timeout,
            )?,
            idle_timeout: seconds("--idle-timeout", self.idle_timeout)?,
            watches: crate::watch_limit::WatchLimits {
                max_total: self.max_watches,
                max_per_client: self.max_watches_per_client,
            },
            request_timeout: self.request_timeout,
            call_timeout: call_timeout(self.grpc_timeout)?,
            event_ttl: self.event_ttl,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn parse(flags: &[&str]) -> Args {
        Args::try_parse_from(std::iter::once("crdplane-gateway").chain(flags.iter().copied()))
            .unwrap()
    }

    #[test]
    fn defaults_are_valid_and_point_at_the_services_defaults() {
        let a = parse(&[]);
        assert_eq!(a.validate(), Ok(()));
        assert_eq!(a.listen, ports::GATEWAY_LISTEN);
        assert_eq!(a.storage, ports::STORAGE_ENDPOINT);
        assert_eq!(a.registry, ports::REGISTRY_ENDPOINT);
        assert_eq!(a.validation, ports::VALIDATION_ENDPOINT);
        let c = a.config("127.0.0.1:6443".into()).unwrap();
        assert_eq!(
            c.request_header_timeout,
            crate::context::REQUEST_HEADER_TIMEOUT
        );
        assert_eq!(c.idle_timeout, crate::context::IDLE_TIMEOUT);
        assert_eq!(c.event_ttl, crate::context::EVENT_TTL);
        assert_eq!(
            parse(&["--event-ttl", "2m30s"]).event_ttl,
            std::time::Duration::from_secs(150)
        );
        for bad in ["500ms", "-1h", "soon"] {
            assert!(
                Args::try_parse_from(["crdplane-gateway", "--event-ttl", bad]).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn validate_table() {
        let cases: &[(&[&str], Option<&str>)] = &[
            (&["--listen", "127.0.0.1:0"], None),
            (
                &["--listen", "6443"],
                Some("--listen: \"6443\" is not HOST:PORT"),
            ),
            (
                &["--storage", "127.0.0.1:7001"],
                Some("--storage: \"127.0.0.1:7001\" is not an http:// or https:// URL"),
            ),
            (
                &["--registry", "http://"],
                Some("--registry: \"http://\" has no host"),
            ),
            (
                &["--default-tenant", ""],
                Some("--default-tenant must not be empty"),
            ),
            (
                &["--idle-timeout", "0"],
                Some("--idle-timeout: 0 is not a positive number of seconds"),
            ),
            (
                &["--request-header-timeout=-1"],
                Some("--request-header-timeout: -1 is not a positive number of seconds"),
            ),
            (
                &["--max-watches", "0"],
                Some("--max-watches and --max-watches-per-client must be at least 1"),
            ),
            (
                &["--max-watches-per-client", "0"],
                Some("--max-watches and --max-watches-per-client must be at least 1"),
            ),
        ];
        for (flags, want) in cases {
            assert_eq!(parse(flags).validate().err().as_deref(), *want, "{flags:?}");
        }
    }
}
