//! The `crdplane` command line (clap): `crdplane up` with environment names
//! `CRDPLANE_UP_<FLAG>`, the gateway's default address from [`crdplane_core::ports`], and
//! [`Up::validate`], called before anything is started. HTTPS with the stack's own PKI is
//! the default; `--insecure-http` opts out. Not on the request path.

use clap::{Parser, Subcommand};
use crdplane_core::ports;
use std::path::PathBuf;

/// `crdplane` and its subcommands.
#[derive(Parser, Debug)]
#[command(
    name = "crdplane",
    about = "Kubernetes-compatible API server for CRDs and custom resources"
)]
pub struct Cli {
    /// The subcommand to run (`up`).
    #[command(subcommand)]
    pub cmd: Cmd,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Start the whole stack (Redis, storage, validation, registry, gateway) on this machine.
    Up(Up),
    /// Make (or renew) the certificates and keys of a deployment in a directory: the users'
    /// CA, the gateway's serving certificate, the admin's client certificate, the services
    /// CA with one certificate per process kind, the service-account key pair, the
    /// encryption configuration and the Envoy health checker's client certificate.
    Pki(PkiArgs),
}

/// `crdplane pki` flags.
#[derive(clap::Args, Debug, Clone)]
pub struct PkiArgs {
    /// Directory of the files (kept CAs and keys are reused, leaf certificates issued anew).
    #[arg(long, env = "CRDPLANE_PKI_DIR", default_value = "pki")]
    pub dir: PathBuf,
    /// Names the gateway and the services are reached by (DNS names or IPs, repeatable or
    /// comma-separated), besides localhost: for Kubernetes the Service names
    /// (crdplane-gateway, crdplane-storage, crdplane-validation, crdplane-registry, with and
    /// without `.<namespace>.svc`) and the API's external name.
    #[arg(long = "host", env = "CRDPLANE_PKI_HOSTS", value_delimiter = ',')]
    pub hosts: Vec<String>,
}

/// `crdplane up` flags.
#[derive(clap::Args, Debug, Clone)]
pub struct Up {
    /// Gateway address.
    #[arg(long, env = "CRDPLANE_UP_LISTEN", default_value = ports::GATEWAY_LISTEN)]
    pub listen: String,
    /// Where Redis data (AOF), logs and the kubeconfig live.
    #[arg(long, env = "CRDPLANE_UP_DATA_DIR", default_value = ".crdplane")]
    pub data_dir: PathBuf,
    /// Where to write the kubeconfig (default: `<data-dir>/kubeconfig`).
    #[arg(
        long,
        env = "CRDPLANE_UP_KUBECONFIG",
        help = "Where to write the kubeconfig (default: <data-dir>/kubeconfig)."
    )]
    pub kubeconfig: Option<PathBuf>,
    /// Use this Redis instead of starting one (redis://host:port or redis+unix:///path).
    #[arg(long, env = "CRDPLANE_UP_REDIS_URL")]
    pub redis_url: Option<String>,
    /// Start a local Redis Cluster of N masters with one replica each (N ≥ 3) instead of one
    /// redis-server; its data, ports and password in `<data-dir>/redis-cluster`.
    #[arg(long, env = "CRDPLANE_UP_REDIS_CLUSTER", value_name = "N")]
    pub redis_cluster: Option<usize>,
    /// Acknowledge a write only once this many replicas have it (storage's
    /// `--wait-replicas`; with `--redis-cluster`, 1 makes a master's failover lose nothing
    /// acknowledged).
    #[arg(long, env = "CRDPLANE_UP_WAIT_REPLICAS", default_value_t = 0)]
    pub wait_replicas: u32,
    /// Run N replicas of every service (storage, validation, registry, gateway), every
    /// client spread over all replicas of what it calls; the first gateway on --listen, the
    /// others on free ports (all printed).
    #[arg(
        long,
        env = "CRDPLANE_UP_REPLICAS",
        default_value_t = 1,
        value_name = "N"
    )]
    pub replicas: usize,
    /// Tenant of requests without a `/clusters/<tenant>` prefix.
    #[arg(
        long,
        env = "CRDPLANE_UP_DEFAULT_TENANT",
        default_value = "default",
        help = "Tenant of requests without a /clusters/<tenant> prefix."
    )]
    pub default_tenant: String,
    /// When a write is acknowledged: `fsync` (on disk), `everysec` (a machine crash can
    /// lose ~2 s of acknowledged writes) or `memory` (Redis without persistence).
    #[arg(
        long,
        env = "CRDPLANE_UP_DURABILITY",
        default_value = "fsync",
        value_parser = ["fsync", "everysec", "memory"]
    )]
    pub durability: String,
    /// Serve plain HTTP without authentication and write a kubeconfig without credentials
    /// (default: HTTPS with the stack's own PKI in `<data-dir>/pki`, x509 client
    /// certificates, anonymous requests refused; the kubeconfig holds the admin's
    /// certificate).
    #[arg(
        long,
        env = "CRDPLANE_UP_INSECURE_HTTP",
        help = "Serve plain HTTP without authentication and write a kubeconfig without credentials (default: HTTPS with the stack's own CA and certificates in <data-dir>/pki, x509 client certificate authentication, anonymous requests refused; the kubeconfig holds the admin client certificate, user crdplane-admin in group system:masters)."
    )]
    pub insecure_http: bool,
    /// More names for the gateway's serving certificate besides localhost, 127.0.0.1, ::1
    /// and the listen host: IP addresses or DNS names, comma-separated (kubeadm's
    /// `--apiserver-cert-extra-sans`), for clients that reach the gateway by another name.
    #[arg(
        long,
        env = "CRDPLANE_UP_APISERVER_CERT_EXTRA_SANS",
        value_delimiter = ',',
        help = "More names for the gateway's serving certificate besides localhost, 127.0.0.1, ::1 and the listen host: IP addresses or DNS names, comma-separated (kubeadm's --apiserver-cert-extra-sans)."
    )]
    pub apiserver_cert_extra_sans: Vec<String>,
    /// Audit the gateways' requests by this policy (an `audit.k8s.io/v1` Policy, as
    /// kube-apiserver's --audit-policy-file); each gateway writes its events to
    /// `<data-dir>/audit/<gateway>.log`, rotated at 100 MB.
    #[arg(long, env = "CRDPLANE_UP_AUDIT_POLICY_FILE")]
    pub audit_policy_file: Option<PathBuf>,
}

impl Up {
    /// Checks every flag before anything is started.
    pub fn validate(&self) -> Result<(), String> {
        ports::check_listen("--listen", &self.listen)?;
        if self.default_tenant.is_empty() {
            return Err("--default-tenant must not be empty".into());
        }
        if let Some(u) = &self.redis_url
            && !u.contains("://")
        {
            return Err(format!("--redis-url: {u:?} is not a URL"));
        }
        if !(1..=16).contains(&self.replicas) {
            return Err("--replicas must be 1 to 16".into());
        }
        if let Some(n) = self.redis_cluster {
            if self.redis_url.is_some() {
                return Err("--redis-cluster starts its own Redis: leave out --redis-url".into());
            }
            if !(3..=64).contains(&n) {
                return Err("--redis-cluster: a Redis Cluster needs 3 to 64 masters".into());
            }
        }
        if !self.apiserver_cert_extra_sans.is_empty() && self.insecure_http {
            return Err("--apiserver-cert-extra-sans needs TLS (not --insecure-http)".into());
        }
        for n in &self.apiserver_cert_extra_sans {
            crate::pki::check_name(n.trim())
                .map_err(|e| format!("--apiserver-cert-extra-sans: {e}"))?;
        }
        Ok(())
    }

    /// The launcher's configuration.
    pub fn config(self) -> crate::UpConfig {
        crate::UpConfig {
            listen: self.listen,
            data_dir: self.data_dir,
            kubeconfig: self.kubeconfig,
            redis_url: self.redis_url,
            redis_cluster: self.redis_cluster,
            wait_replicas: self.wait_replicas,
            replicas: self.replicas,
            default_tenant: self.default_tenant,
            durability: self.durability,
            insecure_http: self.insecure_http,
            extra_sans: self
                .apiserver_cert_extra_sans
                .iter()
                .map(|n| n.trim().to_string())
                .collect(),
            audit_policy_file: self.audit_policy_file,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validate_table() {
        let cases: &[(&[&str], Option<&str>)] = &[
            (&[], None),
            (&["--listen", "127.0.0.1:0", "--durability", "memory"], None),
            (&["--redis-url", "redis+unix:///tmp/r.sock"], None),
            (&["--insecure-http", "--listen", "0.0.0.0:6443"], None),
            (
                &["--listen", "6443"],
                Some("--listen: \"6443\" is not HOST:PORT"),
            ),
            (
                &["--default-tenant", ""],
                Some("--default-tenant must not be empty"),
            ),
            (
                &["--redis-url", "localhost:6379"],
                Some("--redis-url: \"localhost:6379\" is not a URL"),
            ),
            (
                &["--apiserver-cert-extra-sans", "10.0.0.7,api.example.com"],
                None,
            ),
            (
                &["--apiserver-cert-extra-sans", "api example"],
                Some(
                    "--apiserver-cert-extra-sans: \"api example\" is neither an IP address nor a DNS name",
                ),
            ),
            (
                &["--insecure-http", "--apiserver-cert-extra-sans", "10.0.0.7"],
                Some("--apiserver-cert-extra-sans needs TLS (not --insecure-http)"),
            ),
        ];
        for (flags, want) in cases {
            let cli =
                Cli::try_parse_from(["crdplane", "up"].into_iter().chain(flags.iter().copied()))
                    .unwrap();
            let Cmd::Up(up) = cli.cmd else { panic!() };
            assert_eq!(up.validate().err().as_deref(), *want, "{flags:?}");
        }
        assert!(Cli::try_parse_from(["crdplane", "up", "--durability", "never"]).is_err());
        let Cmd::Up(up) = Cli::try_parse_from(["crdplane", "up"]).unwrap().cmd else {
            panic!()
        };
        assert_eq!(up.listen, ports::GATEWAY_LISTEN);
        assert!(!up.clone().config().insecure_http, "TLS is the default");
        let Cmd::Up(up) = Cli::try_parse_from(["crdplane", "up", "--insecure-http"])
            .unwrap()
            .cmd
        else {
            panic!()
        };
        assert!(up.config().insecure_http);
    }
}
