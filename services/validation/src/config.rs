//! The validation binary's command line (clap): environment names
//! `CRDPLANE_VALIDATION_<FLAG>`, the default address from [`crdplane_core::ports`] (the
//! one the gateway and the registry expect), and [`Args::validate`], which `main` calls
//! before binding. Not on the request path.

use crdplane_core::ports;

/// `crdplane-validation` flags.
#[derive(clap::Parser, Debug, Clone)]
#[command(
    name = "crdplane-validation",
    about = "crdplane validation service (gRPC)"
)]
pub struct Args {
    /// Address to listen on (HOST:PORT; port 0 picks a free one).
    #[arg(long, env = "CRDPLANE_VALIDATION_LISTEN", default_value = ports::VALIDATION_LISTEN)]
    pub listen: String,
    /// Byte budget of the compiled-schema cache (estimated heap size of the compiled
    /// schemas); least recently used schemas are evicted beyond it.
    #[arg(
        long,
        env = "CRDPLANE_VALIDATION_SCHEMA_CACHE_BYTES",
        default_value_t = crate::server::DEFAULT_CACHE_BYTES
    )]
    pub schema_cache_bytes: usize,
    /// Mutual TLS of the gRPC listener and calls (see `crdplane_transport::mtls`).
    #[command(flatten)]
    pub mtls: crdplane_transport::mtls::MtlsArgs,
    /// The Prometheus metrics listener (see `crdplane_transport::metrics`).
    #[command(flatten)]
    pub metrics: crdplane_transport::metrics::MetricsArgs,
}

impl Args {
    /// Checks every flag before anything is bound.
    pub fn validate(&self) -> Result<(), String> {
        ports::check_listen("--listen", &self.listen)?;
        if self.schema_cache_bytes == 0 {
            return Err("--schema-cache-bytes must be at least 1".into());
        }
        self.mtls.files()?;
        Ok(())
    }

    /// The validation service's configuration.
    pub fn config(&self) -> crate::Config {
        crate::Config {
            cache_bytes: self.schema_cache_bytes,
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
            (&["--listen", "127.0.0.1:0"], None),
            (&["--listen", "x"], Some("--listen: \"x\" is not HOST:PORT")),
            (
                &["--schema-cache-bytes", "0"],
                Some("--schema-cache-bytes must be at least 1"),
            ),
        ];
        for (flags, want) in cases {
            let a =
                Args::try_parse_from(std::iter::once("v").chain(flags.iter().copied())).unwrap();
            assert_eq!(a.validate().err().as_deref(), *want, "{flags:?}");
        }
        // The default is where the gateway and the registry look for it.
        let d = Args::try_parse_from(["v"]).unwrap();
        assert_eq!(format!("http://{}", d.listen), ports::VALIDATION_ENDPOINT);
    }
}
