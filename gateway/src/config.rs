//! The gateway binary's command line (clap), with its environment names
//! (`CRDPLANE_GATEWAY_<FLAG>`), defaults written once (ports from
//! [`crdplane_core::ports`], edge timeouts from [`crate::context`], watch bounds from
//! [`crate::watch_limit`]) and [`Args::validate`], which `main` calls before binding.
//! Not on the request path: it only builds the [`crate::context::Config`] that `serve` runs with.

use crdplane_core::ports;
use std::path::PathBuf;

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
    /// Registry service endpoints, comma-separated (calls are balanced over them):
    /// `http://host:port` (`https://` with mutual TLS), or `dns:///host:port` for every address
    /// the name resolves to, resolved again every 5 s (a headless Service on Kubernetes).
    #[arg(long, env = "CRDPLANE_GATEWAY_REGISTRY", default_value = ports::REGISTRY_ENDPOINT)]
    pub registry: String,
    /// Validation service endpoints, comma-separated; `dns:///host:port` as for `--registry`.
    #[arg(long, env = "CRDPLANE_GATEWAY_VALIDATION", default_value = ports::VALIDATION_ENDPOINT)]
    pub validation: String,
    /// Storage service endpoints, comma-separated; `dns:///host:port` as for `--registry`.
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
    /// How tenants come to exist: `explicit` (a platform admin creates each Tenant in the
    /// admin scope, `/clusters/root`; unknown tenants get 404) or `on-first-use` (the first
    /// request for a tenant creates it: a single team's development server only).
    #[arg(
        long,
        env = "CRDPLANE_GATEWAY_TENANT_CREATION",
        value_enum,
        default_value = "explicit"
    )]
    pub tenant_creation: crate::context::TenantCreation,
    /// At start, create a Tenant for every tenant that holds objects in storage but has
    /// none: once, after upgrading from a version without Tenants (explicit tenants would
    /// otherwise answer 404 for them).
    #[arg(long, env = "CRDPLANE_GATEWAY_ADOPT_STORED_TENANTS")]
    pub adopt_stored_tenants: bool,
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
    /// The most tenants that are labels of the per-tenant metrics at `/metrics`
    /// (`crdplane_tenant_*`); requests of tenants past it count as tenant "other".
    #[arg(
        long,
        env = "CRDPLANE_GATEWAY_METRICS_MAX_TENANTS",
        default_value_t = crate::metrics::DEFAULT_MAX_TENANTS
    )]
    pub metrics_max_tenants: usize,
    /// Metrics not to record or expose, by full name (kube-apiserver's --disabled-metrics,
    /// its escape hatch for a misbehaving metric), comma-separated.
    #[arg(long, env = "CRDPLANE_GATEWAY_DISABLED_METRICS", value_delimiter = ',')]
    pub disabled_metrics: Vec<String>,
    /// The most time a non-long-running request may take, a Go duration (kube-apiserver's
    /// --request-timeout: 1m0s); a request's own `?timeout=` may only shorten it.
    #[arg(
        long,
        env = "CRDPLANE_GATEWAY_REQUEST_TIMEOUT",
        default_value = "1m0s",
        value_parser = request_timeout
    )]
    pub request_timeout: std::time::Duration,
    /// After SIGTERM, how long to keep serving new requests (with `/readyz` failing, so
    /// load balancers take this gateway out) before the listener closes and requests in
    /// flight drain, a Go duration (kube-apiserver's --shutdown-delay-duration).
    #[arg(
        long,
        env = "CRDPLANE_GATEWAY_SHUTDOWN_DELAY_DURATION",
        default_value = "0s",
        value_parser = shutdown_delay
    )]
    pub shutdown_delay_duration: std::time::Duration,
    /// Seconds each call to registry, validation or storage may take, watches excepted
    /// (0 = no limit); an expired call is a 504 Timeout.
    #[arg(
        long,
        env = "CRDPLANE_GATEWAY_GRPC_TIMEOUT",
        default_value_t = crdplane_transport::deadline::DEFAULT_TIMEOUT.as_secs_f64()
    )]
    pub grpc_timeout: f64,
    /// Mutual TLS of the calls to registry, validation and storage (see
    /// `crdplane_transport::mtls`); with it their endpoints are `https://`.
    #[command(flatten)]
    pub mtls: crdplane_transport::mtls::MtlsArgs,
    /// The audit flags (`--audit-*`).
    #[command(flatten)]
    pub audit: AuditArgs,
    /// How long an Event is kept after its last write, a Go duration (kube-apiserver's
    /// --event-ttl: 1h0m0s); the storage service removes it then.
    #[arg(
        long,
        env = "CRDPLANE_GATEWAY_EVENT_TTL",
        default_value = "1h0m0s",
        value_parser = event_ttl
    )]
    pub event_ttl: std::time::Duration,
    /// Serving certificate chain, PEM (kube-apiserver's --tls-cert-file); reloaded when the
    /// file changes. With --tls-private-key-file the gateway serves HTTPS.
    #[arg(long, env = "CRDPLANE_GATEWAY_TLS_CERT_FILE")]
    pub tls_cert_file: Option<PathBuf>,
    /// Private key of the serving certificate, PEM (--tls-private-key-file).
    #[arg(long, env = "CRDPLANE_GATEWAY_TLS_PRIVATE_KEY_FILE")]
    pub tls_private_key_file: Option<PathBuf>,
    /// CA bundle, PEM, that client certificates are verified against (--client-ca-file):
    /// a verified certificate's CommonName is the user, its Organizations the groups.
    #[arg(long, env = "CRDPLANE_GATEWAY_CLIENT_CA_FILE")]
    pub client_ca_file: Option<PathBuf>,
    /// Static bearer tokens, CSV `token,user,uid,"group1,group2"` (--token-auth-file).
    #[arg(long, env = "CRDPLANE_GATEWAY_TOKEN_AUTH_FILE")]
    pub token_auth_file: Option<PathBuf>,
    /// Structured authentication configuration, YAML or JSON (kube-apiserver's
    /// --authentication-config): `AuthenticationConfiguration` of
    /// apiserver.config.k8s.io/v1beta1 or v1 with its `jwt:` list of OIDC issuers.
    #[arg(long, env = "CRDPLANE_GATEWAY_AUTHENTICATION_CONFIG")]
    pub authentication_config: Option<PathBuf>,
    /// Requests without credentials run as system:anonymous (--anonymous-auth); false:
    /// they get 401.
    #[arg(
        long,
        env = "CRDPLANE_GATEWAY_ANONYMOUS_AUTH",
        default_value_t = true,
        num_args = 0..=1,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub anonymous_auth: bool,
    /// Keys that verify service-account tokens, PEM (--service-account-key-file, repeatable):
    /// public keys, or private keys standing for their public half.
    #[arg(
        long,
        env = "CRDPLANE_GATEWAY_SERVICE_ACCOUNT_KEY_FILE",
        value_delimiter = ','
    )]
    pub service_account_key_file: Vec<PathBuf>,
    /// The private key the TokenRequest API signs service-account tokens with, PEM PKCS#8
    /// ECDSA P-256 (--service-account-signing-key-file); needs --service-account-issuer.
    #[arg(long, env = "CRDPLANE_GATEWAY_SERVICE_ACCOUNT_SIGNING_KEY_FILE")]
    pub service_account_signing_key_file: Option<PathBuf>,
    /// Issuers of service-account tokens (--service-account-issuer, repeatable): the first
    /// is written into new tokens, all are accepted.
    #[arg(
        long,
        env = "CRDPLANE_GATEWAY_SERVICE_ACCOUNT_ISSUER",
        value_delimiter = ','
    )]
    pub service_account_issuer: Vec<String>,
    /// Audiences of the API (--api-audiences): a token must be for one of them; tokens
    /// requested without audiences are for these. Default: the issuers.
    #[arg(long, env = "CRDPLANE_GATEWAY_API_AUDIENCES", value_delimiter = ',')]
    pub api_audiences: Vec<String>,
    /// Authorization mode (--authorization-mode): AlwaysAllow, or RBAC (system:masters may
    /// do everything, everyone else what the Roles and bindings of the tenant grant).
    #[arg(
        long,
        env = "CRDPLANE_GATEWAY_AUTHORIZATION_MODE",
        default_value = "AlwaysAllow",
        value_parser = crate::authz::Mode::parse
    )]
    pub authorization_mode: crate::authz::Mode,
    /// Encryption at rest (kube-apiserver's --encryption-provider-config): an
    /// `EncryptionConfiguration` (apiserver.config.k8s.io/v1) whose aesgcm / secretbox /
    /// identity providers seal the listed resources (secrets, configmaps, events, leases)
    /// before they are stored.
    #[arg(long, env = "CRDPLANE_GATEWAY_ENCRYPTION_PROVIDER_CONFIG")]
    pub encryption_provider_config: Option<PathBuf>,
    /// Serve plain HTTP (no TLS, so no client certificates). Required when no serving
    /// certificate is given.
    #[arg(long, env = "CRDPLANE_GATEWAY_INSECURE_HTTP")]
    pub insecure_http: bool,
}

/// A Go duration flag of at least zero.
fn audit_duration(s: &str) -> Result<std::time::Duration, String> {
    let nanos = crate::filters::limits::parse_go_duration(s)?;
    u64::try_from(nanos)
        .map(std::time::Duration::from_nanos)
        .map_err(|_| format!("{s:?} can not be negative"))
}

/// kube-apiserver's audit flags, as the gateway takes them.
#[derive(clap::Args, Debug, Clone)]
pub struct AuditArgs {
    /// The audit policy (kube-apiserver's --audit-policy-file): an `audit.k8s.io/v1`
    /// Policy saying which requests are recorded at which level. Without it, nothing is.
    #[arg(long, env = "CRDPLANE_GATEWAY_AUDIT_POLICY_FILE")]
    pub audit_policy_file: Option<PathBuf>,
    /// Where audit events go as JSON lines (`-`: standard output).
    #[arg(long, env = "CRDPLANE_GATEWAY_AUDIT_LOG_PATH")]
    pub audit_log_path: Option<String>,
    /// Rotate the audit log before it grows past this many megabytes (0: 100).
    #[arg(long, env = "CRDPLANE_GATEWAY_AUDIT_LOG_MAXSIZE", default_value_t = 0)]
    pub audit_log_maxsize: u64,
    /// How many rotated audit logs to keep (0: all).
    #[arg(
        long,
        env = "CRDPLANE_GATEWAY_AUDIT_LOG_MAXBACKUP",
        default_value_t = 0
    )]
    pub audit_log_maxbackup: usize,
    /// How many days to keep rotated audit logs (0: no limit).
    #[arg(long, env = "CRDPLANE_GATEWAY_AUDIT_LOG_MAXAGE", default_value_t = 0)]
    pub audit_log_maxage: u64,
    /// How the log backend takes events: blocking (a request waits until its events are
    /// written), blocking-strict (as blocking, and a request whose RequestReceived event
    /// cannot be written fails with a 500) or batch (queued; dropped and counted when the
    /// queue is full).
    #[arg(long, env = "CRDPLANE_GATEWAY_AUDIT_LOG_MODE", default_value = "blocking", value_parser = crate::audit::Mode::parse)]
    pub audit_log_mode: crate::audit::Mode,
    /// A kubeconfig naming the server audit events are POSTed to as EventList batches.
    #[arg(long, env = "CRDPLANE_GATEWAY_AUDIT_WEBHOOK_CONFIG_FILE")]
    pub audit_webhook_config_file: Option<PathBuf>,
    /// How the webhook backend takes events: batch, blocking or blocking-strict.
    #[arg(long, env = "CRDPLANE_GATEWAY_AUDIT_WEBHOOK_MODE", default_value = "batch", value_parser = crate::audit::Mode::parse)]
    pub audit_webhook_mode: crate::audit::Mode,
    /// Events per webhook POST at most.
    #[arg(
        long,
        env = "CRDPLANE_GATEWAY_AUDIT_WEBHOOK_BATCH_MAX_SIZE",
        default_value_t = 400
    )]
    pub audit_webhook_batch_max_size: usize,
    /// How long an event may wait for its webhook batch to fill, a Go duration.
    #[arg(long, env = "CRDPLANE_GATEWAY_AUDIT_WEBHOOK_BATCH_MAX_WAIT", default_value = "30s", value_parser = audit_duration)]
    pub audit_webhook_batch_max_wait: std::time::Duration,
    /// The wait before a failed webhook POST is tried again (doubling), a Go duration.
    #[arg(long, env = "CRDPLANE_GATEWAY_AUDIT_WEBHOOK_INITIAL_BACKOFF", default_value = "10s", value_parser = audit_duration)]
    pub audit_webhook_initial_backoff: std::time::Duration,
}

impl AuditArgs {
    /// The audit settings the flags ask for, the policy and webhook kubeconfig read (None:
    /// no policy or no backend, so nothing is recorded).
    pub fn settings(&self) -> Result<Option<crate::audit::Settings>, String> {
        let Some(p) = &self.audit_policy_file else {
            if self.audit_log_path.is_some() || self.audit_webhook_config_file.is_some() {
                tracing::warn!(
                    "an audit backend is configured but --audit-policy-file is not: nothing is audited"
                );
            }
            return Ok(None);
        };
        let policy = crdplane_apiserver::audit::policy::Policy::load(p)
            .map_err(|e| format!("--audit-policy-file: {e}"))?;
        let log = self.audit_log_path.as_deref().map(|path| {
            crate::audit::log::Settings::from_flags(
                path,
                self.audit_log_maxsize,
                self.audit_log_maxbackup,
                self.audit_log_maxage,
            )
        });
        let webhook = match &self.audit_webhook_config_file {
            Some(f) => Some(crate::audit::webhook::Settings::load(
                f,
                self.audit_webhook_batch_max_size,
                self.audit_webhook_batch_max_wait,
                self.audit_webhook_initial_backoff,
            )?),
            None => None,
        };
        if log.is_none() && webhook.is_none() {
            tracing::warn!(
                "--audit-policy-file is given without --audit-log-path or --audit-webhook-config-file: nothing is audited"
            );
            return Ok(None);
        }
        Ok(Some(crate::audit::Settings {
            policy,
            log,
            log_mode: self.audit_log_mode,
            webhook,
            webhook_mode: self.audit_webhook_mode,
        }))
    }
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
    non_negative("--request-timeout", s)
}

/// `--shutdown-delay-duration`: a Go duration, not negative (as kube-apiserver validates it).
fn shutdown_delay(s: &str) -> Result<std::time::Duration, String> {
    non_negative("--shutdown-delay-duration", s)
}

/// A Go duration that may not be negative, with kube-apiserver's text naming `flag`.
fn non_negative(flag: &str, s: &str) -> Result<std::time::Duration, String> {
    let nanos = crate::filters::limits::parse_go_duration(s)?;
    u64::try_from(nanos)
        .map(std::time::Duration::from_nanos)
        .map_err(|_| format!("{flag} can not be negative value"))
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
        if !crate::request_info::valid_tenant(&self.default_tenant)
            || crate::stores::tenants::reserved(&self.default_tenant)
        {
            return Err(format!(
                "--default-tenant {:?} is not a tenant name (a DNS-1123 label other than {:?})",
                self.default_tenant,
                crate::stores::tenants::ADMIN_SCOPE
            ));
        }
        seconds("--request-header-timeout", self.request_header_timeout)?;
        seconds("--idle-timeout", self.idle_timeout)?;
        if self.max_watches == 0 || self.max_watches_per_client == 0 {
            return Err("--max-watches and --max-watches-per-client must be at least 1".into());
        }
        call_timeout(self.grpc_timeout)?;
        self.mtls.files()?;
        if self.audit.audit_webhook_batch_max_size == 0 {
            return Err("--audit-webhook-batch-max-size must be at least 1".into());
        }
        match (
            &self.tls_cert_file,
            &self.tls_private_key_file,
            self.insecure_http,
        ) {
            (Some(_), Some(_), false) => {}
            (Some(_), None, _) | (None, Some(_), _) => {
                return Err(
                    "--tls-cert-file and --tls-private-key-file must be given together".into(),
                );
            }
            (Some(_), Some(_), true) => {
                return Err("--insecure-http and --tls-cert-file exclude each other".into());
            }
            (None, None, true) => {
                if self.client_ca_file.is_some() {
                    return Err(
                        "--client-ca-file needs TLS (--tls-cert-file and --tls-private-key-file)"
                            .into(),
                    );
                }
            }
            (None, None, false) => {
                return Err("no serving certificate: give --tls-cert-file and \
                     --tls-private-key-file, or --insecure-http to serve plain HTTP"
                    .into());
            }
        }
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
            tenant_creation: self.tenant_creation,
            adopt_stored_tenants: self.adopt_stored_tenants,
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
            metrics_max_tenants: self.metrics_max_tenants,
            disabled_metrics: self.disabled_metrics.clone(),
            request_timeout: self.request_timeout,
            shutdown_delay: self.shutdown_delay_duration,
            call_timeout: call_timeout(self.grpc_timeout)?,
            grpc_tls: self.mtls.load()?,
            event_ttl: self.event_ttl,
            tls: match (&self.tls_cert_file, &self.tls_private_key_file) {
                (Some(c), Some(k)) => Some(crdplane_transport::tls::ServerTls::load(
                    c,
                    k,
                    self.client_ca_file.is_some(),
                )?),
                _ => None,
            },
            authn: std::sync::Arc::new(self.authenticators()?),
            authorization: self.authorization_mode,
            service_account_signer: match &self.service_account_signing_key_file {
                Some(p) => {
                    let issuer = self.service_account_issuer.first().ok_or(
                        "--service-account-issuer is required with --service-account-signing-key-file",
                    )?;
                    Some(std::sync::Arc::new(
                        crdplane_auth::service_account::Signer::load(p, issuer)
                            .map_err(|e| format!("--service-account-signing-key-file: {e}"))?,
                    ))
                }
                None => None,
            },
            api_audiences: self.audiences(),
            audit: match self.audit.settings()? {
                Some(s) => Some(std::sync::Arc::new(crate::audit::Auditor::start(s)?)),
                None => None,
            },
            encryption: match &self.encryption_provider_config {
                Some(p) => Some(std::sync::Arc::new(
                    crate::encryption::load(p)
                        .map_err(|e| format!("--encryption-provider-config: {e}"))?,
                )),
                None => None,
            },
        })
    }

    /// `--api-audiences`, defaulting to the issuers (as kube-apiserver).
    fn audiences(&self) -> Vec<String> {
        if self.api_audiences.is_empty() {
            self.service_account_issuer.clone()
        } else {
            self.api_audiences.clone()
        }
    }

    /// The authenticator chain the flags ask for, its files loaded (an error names the file).
    fn authenticators(&self) -> Result<crdplane_auth::chain::Authenticators, String> {
        let x509 = match &self.client_ca_file {
            Some(p) => Some(
                crdplane_auth::x509::X509Authenticator::load(p)
                    .map_err(|e| format!("--client-ca-file {}: {e}", p.display()))?,
            ),
            None => None,
        };
        let tokens = match &self.token_auth_file {
            Some(p) => {
                let (t, warnings) = crdplane_auth::token_file::TokenFile::load(p)
                    .map_err(|e| format!("--token-auth-file: {e}"))?;
                for w in warnings {
                    tracing::warn!("{w}");
                }
                Some(t)
            }
            None => None,
        };
        let service_accounts = if self.service_account_key_file.is_empty() {
            None
        } else {
            if self.service_account_issuer.is_empty() {
                return Err(
                    "--service-account-issuer is required with --service-account-key-file".into(),
                );
            }
            Some(
                crdplane_auth::service_account::Verifier::load(
                    &self.service_account_key_file,
                    &self.service_account_issuer,
                    &self.audiences(),
                )
                .map_err(|e| format!("--service-account-key-file: {e}"))?,
            )
        };
        // The service-account issuers may not be JWT issuers (as kube-apiserver).
        let oidc = match &self.authentication_config {
            Some(p) => Some(
                crdplane_auth::oidc::load(p, &self.service_account_issuer)
                    .map_err(|e| format!("--authentication-config: {e}"))?,
            ),
            None => None,
        };
        Ok(crdplane_auth::chain::Authenticators {
            x509,
            tokens,
            service_accounts,
            oidc,
            anonymous: self.anonymous_auth,
            token_cache: Default::default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn parse_exactly(flags: &[&str]) -> Args {
        Args::try_parse_from(std::iter::once("crdplane-gateway").chain(flags.iter().copied()))
            .unwrap()
    }

    /// `flags` on a plain-HTTP gateway.
    fn parse(flags: &[&str]) -> Args {
        let mut all = vec!["--insecure-http"];
        all.extend_from_slice(flags);
        parse_exactly(&all)
    }

    #[test]
    fn shutdown_delay_is_a_go_duration_not_negative() {
        assert_eq!(
            parse(&[]).shutdown_delay_duration,
            std::time::Duration::ZERO
        );
        assert_eq!(
            parse(&["--shutdown-delay-duration=1m30s"]).shutdown_delay_duration,
            std::time::Duration::from_secs(90)
        );
        let e = Args::try_parse_from([
            "crdplane-gateway",
            "--insecure-http",
            "--shutdown-delay-duration=-1s",
        ])
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("--shutdown-delay-duration can not be negative value"),
            "{e}"
        );
    }

    #[test]
    fn serving_flags_table() {
        let cases: &[(&[&str], Option<&str>)] = &[
            (
                &[],
                Some(
                    "no serving certificate: give --tls-cert-file and --tls-private-key-file, \
                     or --insecure-http to serve plain HTTP",
                ),
            ),
            (&["--insecure-http"], None),
            (
                &["--tls-cert-file", "c", "--tls-private-key-file", "k"],
                None,
            ),
            (
                &[
                    "--tls-cert-file",
                    "c",
                    "--tls-private-key-file",
                    "k",
                    "--client-ca-file",
                    "ca",
                ],
                None,
            ),
            (
                &["--tls-cert-file", "c"],
                Some("--tls-cert-file and --tls-private-key-file must be given together"),
            ),
            (
                &["--tls-private-key-file", "k", "--insecure-http"],
                Some("--tls-cert-file and --tls-private-key-file must be given together"),
            ),
            (
                &[
                    "--tls-cert-file",
                    "c",
                    "--tls-private-key-file",
                    "k",
                    "--insecure-http",
                ],
                Some("--insecure-http and --tls-cert-file exclude each other"),
            ),
            (
                &["--insecure-http", "--client-ca-file", "ca"],
                Some("--client-ca-file needs TLS (--tls-cert-file and --tls-private-key-file)"),
            ),
        ];
        for (flags, want) in cases {
            assert_eq!(
                parse_exactly(flags).validate().err().as_deref(),
                *want,
                "{flags:?}"
            );
        }
        // Go-style boolean: alone it means true; `=false` turns anonymous requests away.
        assert!(parse(&[]).anonymous_auth);
        assert!(parse(&["--anonymous-auth"]).anonymous_auth);
        assert!(!parse(&["--anonymous-auth=false"]).anonymous_auth);
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
    fn authentication_config_is_loaded_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("authn.yaml");
        let f = file.to_str().unwrap();
        let head = "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\n";
        let good = format!(
            "{head}jwt:\n- issuer: {{url: https://issuer.example.com, audiences: [crdplane]}}\n  claimMappings:\n    username: {{claim: sub, prefix: \"oidc:\"}}\n"
        );
        std::fs::write(&file, &good).unwrap();
        let c = parse(&["--authentication-config", f])
            .config("127.0.0.1:6443".into())
            .unwrap();
        assert_eq!(c.authn.oidc.as_ref().unwrap().authenticators().len(), 1);
        // A bad file stops the start, naming the flag and upstream's reason.
        std::fs::write(&file, format!("{head}jwt:\n- issuer: {{audiences: [a]}}\n")).unwrap();
        let e = parse(&["--authentication-config", f])
            .config("127.0.0.1:6443".into())
            .unwrap_err();
        assert_eq!(
            e,
            "--authentication-config: invalid authentication configuration: [jwt[0].issuer.url: Required value, jwt[0].claimMappings.username: Required value: claim or expression is required]"
        );
        // A service-account issuer may not be a JWT issuer.
        std::fs::write(
            &file,
            good.replace("issuer.example.com", "kubernetes.default.svc"),
        )
        .unwrap();
        let e = parse(&[
            "--authentication-config",
            f,
            "--service-account-issuer",
            "https://kubernetes.default.svc",
        ])
        .config("127.0.0.1:6443".into())
        .unwrap_err();
        assert!(
            e.contains("URL must not overlap with disallowed issuers"),
            "{e}"
        );
        let missing = dir.path().join("missing.yaml");
        let e = parse(&["--authentication-config", missing.to_str().unwrap()])
            .config("127.0.0.1:6443".into())
            .unwrap_err();
        assert!(
            e.starts_with(
                "--authentication-config: failed to load authentication configuration from file"
            ),
            "{e}"
        );
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
                Some(
                    "--storage: \"127.0.0.1:7001\" is not an http:// or https:// URL (or dns:///HOST:PORT)",
                ),
            ),
            (
                &["--registry", "http://"],
                Some("--registry: \"http://\" has no host"),
            ),
            (
                &["--default-tenant", ""],
                Some(
                    "--default-tenant \"\" is not a tenant name (a DNS-1123 label other than \"root\")",
                ),
            ),
            (
                &["--default-tenant", "root"],
                Some(
                    "--default-tenant \"root\" is not a tenant name (a DNS-1123 label other than \"root\")",
                ),
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
