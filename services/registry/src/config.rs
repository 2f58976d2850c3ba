//! The registry binary's command line (clap): environment names `CRDPLANE_REGISTRY_<FLAG>`,
//! default addresses from [`crdplane_core::ports`], and [`Args::validate`], which `main`
//! calls before binding. Not on the request path.

use crdplane_core::ports;

/// `crdplane-registry` flags.
#[derive(clap::Parser, Debug, Clone)]
#[command(name = "crdplane-registry", about = "crdplane registry service (gRPC)")]
pub struct Args {
    /// Address to listen on (HOST:PORT; port 0 picks a free one).
    #[arg(long, env = "CRDPLANE_REGISTRY_LISTEN", default_value = ports::REGISTRY_LISTEN)]
    pub listen: String,
    /// Storage service endpoints, comma-separated (calls are balanced over them):
    /// `http://host:port` (`https://` with mutual TLS), or `dns:///host:port` for every address
    /// the name resolves to, resolved again every 5 s (a headless Service on Kubernetes).
    #[arg(long, env = "CRDPLANE_REGISTRY_STORAGE", default_value = ports::STORAGE_ENDPOINT)]
    pub storage: String,
    /// Validation service endpoints, comma-separated ("" disables schema checks); `dns:///host:port`
    /// as for `--storage`.
    #[arg(long, env = "CRDPLANE_REGISTRY_VALIDATION", default_value = ports::VALIDATION_ENDPOINT)]
    pub validation: String,
    /// Period of the garbage collector's resync (e.g. 1h, 30m, 10s; 0 = never): a scan of
    /// every custom resource with ownerReferences, at startup and then at this period.
    #[arg(long, env = "CRDPLANE_REGISTRY_GC_RESYNC_PERIOD", default_value = "1h",
          value_parser = crate::resync::parse_period)]
    pub gc_resync_period: std::time::Duration,
    /// Time to live of the events the registry records (e.g. 1h, 30m; 0 = they never
    /// expire), as kube-apiserver's `--event-ttl`.
    #[arg(long, env = "CRDPLANE_REGISTRY_EVENT_TTL", default_value = "1h",
          value_parser = crate::resync::parse_period)]
    pub event_ttl: std::time::Duration,
    /// Seconds each call to storage or validation may take, watches excepted (0 = no limit).
    #[arg(
        long,
        env = "CRDPLANE_REGISTRY_GRPC_TIMEOUT",
        default_value_t = crdplane_transport::deadline::DEFAULT_TIMEOUT.as_secs_f64()
    )]
    pub grpc_timeout: f64,
    /// Mutual TLS of the gRPC listener and of the calls to storage and validation (see
    /// `crdplane_transport::mtls`); with it the endpoints are `https://`.
    #[command(flatten)]
    pub mtls: crdplane_transport::mtls::MtlsArgs,
    /// The Prometheus metrics listener (see `crdplane_transport::metrics`).
    #[command(flatten)]
    pub metrics: crdplane_transport::metrics::MetricsArgs,
}

use crdplane_transport::deadline::from_flag as call_timeout;

impl Args {
    /// Checks every flag before anything is bound or connected.
    pub fn validate(&self) -> Result<(), String> {
        ports::check_listen("--listen", &self.listen)?;
        ports::check_endpoint("--storage", &self.storage)?;
        if !self.validation.is_empty() {
            ports::check_endpoint("--validation", &self.validation)?;
        }
        call_timeout(self.grpc_timeout)?;
        self.mtls.files()?;
        Ok(())
    }

    /// The registry's configuration.
    pub fn config(&self) -> crate::Config {
        crate::Config {
            storage_endpoint: self.storage.clone(),
            validation_endpoint: self.validation.clone(),
            gc_resync_period: self.gc_resync_period,
            call_timeout: call_timeout(self.grpc_timeout).unwrap_or(None),
            event_ttl: self.event_ttl,
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
            (&["--validation", ""], None),
            (&["--listen", "0.0.0.0:0"], None),
            (
                &["--listen", "7002"],
                Some("--listen: \"7002\" is not HOST:PORT"),
            ),
            (
                &["--storage", "storage:7001"],
                Some(
                    "--storage: \"storage:7001\" is not an http:// or https:// URL (or dns:///HOST:PORT)",
                ),
            ),
            (
                &["--validation", "validation:7003"],
                Some(
                    "--validation: \"validation:7003\" is not an http:// or https:// URL (or dns:///HOST:PORT)",
                ),
            ),
        ];
        for (flags, want) in cases {
            let a =
                Args::try_parse_from(std::iter::once("r").chain(flags.iter().copied())).unwrap();
            assert_eq!(a.validate().err().as_deref(), *want, "{flags:?}");
        }
        let d = Args::try_parse_from(["r"]).unwrap();
        assert_eq!(d.listen, ports::REGISTRY_LISTEN);
        assert_eq!(d.config().storage_endpoint, ports::STORAGE_ENDPOINT);
        assert_eq!(d.config().validation_endpoint, ports::VALIDATION_ENDPOINT);
        assert_eq!(d.config().event_ttl, std::time::Duration::from_secs(3600));
        let short = Args::try_parse_from(["r", "--event-ttl", "90s"]).unwrap();
        assert_eq!(short.config().event_ttl, std::time::Duration::from_secs(90));
        assert!(Args::try_parse_from(["r", "--event-ttl", "soon"]).is_err());
    }
}
