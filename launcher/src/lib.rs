//! The `crdplane` launcher: runs the whole stack on one machine for development and for the
//! README's one-command start.
//!
//! `crdplane up` starts a `redis-server` child (AOF persistence in the data dir with
//! `appendfsync always`, so an acknowledged write survives a crash of the machine; see the
//! storage's `durability` module) unless `--redis-url` is given, then storage, validation,
//! registry and gateway as separate processes (the binaries beside this one), waits for the gateway's
//! `/readyz`, writes a kubeconfig, prints how to use it, and stops every child on
//! Ctrl-C/SIGTERM.
//!
//! Security: by default the gateway serves HTTPS with certificates from the stack's own PKI
//! in `<data-dir>/pki` ([`pki`], as kubeadm's certs phase makes one), authenticates x509
//! client certificates issued by its CA and refuses anonymous requests
//! (`--anonymous-auth=false`) and authorizes with RBAC (`--authorization-mode=RBAC`); the
//! kubeconfig holds the CA and the admin's client certificate (user `crdplane-admin`, group
//! `system:masters`, allowed everything) and is written mode 0600.
//! `--insecure-http` serves plain HTTP without authentication instead (the load tests use
//! it), with a kubeconfig without credentials.
//!
//! Faults: the children inherit a soft `RLIMIT_NOFILE` raised to the hard limit (as systemd
//! units of kube-apiserver set `LimitNOFILE`; a gateway with thousands of watch connections
//! must not stop at the common soft default of 1,024). A child that dies after startup is
//! restarted in place — services on the address they first announced, so the others' flags
//! stay valid — with a delay of 0.5 s doubling to 30 s while it keeps crashing, as a kubelet
//! restarts a crashed static-pod apiserver; nothing else is stopped. Every child gets a
//! parent-death signal ([`spawn`]), so killing the launcher (even with SIGKILL, even during
//! startup) stops them all.
//!
//! How the processes are started (order, flags, readiness over HTTP or HTTPS) lives in
//! [`stack`]'s [`StackBuilder`], which the end-to-end test harness uses as well.

pub mod cluster;
pub mod config;
pub mod monitoring;
pub mod pki;
pub mod spawn;
pub mod stack;
pub mod tls;

pub use pki::Pki;
pub use stack::{RunningStack, Service, StackBuilder, with_listen};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// What `crdplane up` runs: its flags after validation (see [`config::Up`]).
#[derive(Debug, Clone)]
pub struct UpConfig {
    /// Gateway listen address (`host:port`).
    pub listen: String,
    /// Where Redis data (AOF), logs and the kubeconfig live.
    pub data_dir: PathBuf,
    /// Where to write the kubeconfig (`None`: `<data_dir>/kubeconfig`).
    pub kubeconfig: Option<PathBuf>,
    /// An external Redis to use instead of starting one (`None`: start `redis-server`).
    pub redis_url: Option<String>,
    /// Start a local Redis Cluster of this many masters (one replica each) instead of one
    /// `redis-server` ([`cluster`]).
    pub redis_cluster: Option<usize>,
    /// Replicas each write must reach before storage acknowledges it (`--wait-replicas`).
    pub wait_replicas: u32,
    /// Replicas of storage, validation and the gateway ([`StackBuilder::scale`]).
    pub replicas: usize,
    /// Tenant of requests without a `/clusters/<tenant>` prefix.
    pub default_tenant: String,
    /// When a write is acknowledged (`fsync`, `everysec`, `memory`; see the storage's
    /// `--durability`): sets the started Redis's `appendfsync` and is passed to the storage.
    pub durability: String,
    /// Serve plain HTTP without authentication (no PKI, a kubeconfig without credentials)
    /// instead of HTTPS with client certificates.
    pub insecure_http: bool,
    /// More names for the serving certificate (`--apiserver-cert-extra-sans`).
    pub extra_sans: Vec<String>,
    /// The gateways' audit policy ([`StackBuilder::audit`]).
    pub audit_policy_file: Option<PathBuf>,
}

/// The binaries of the stack live beside the launcher.
pub fn sibling(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from(name));
    exe.parent()
        .map(|d| d.join(name))
        .unwrap_or_else(|| PathBuf::from(name))
}

/// A kubeconfig YAML for kubectl and clients: the cluster at `server` (current context
/// `crdplane`, namespace `default`) and its admin scope (context `crdplane-admin`, where
/// Tenants are managed), no credentials (for a gateway serving plain HTTP).
pub fn kubeconfig_yaml(server: &str) -> String {
    kubeconfig_with(server, "", " {}")
}

/// A kubeconfig YAML like [`kubeconfig_yaml`] for a gateway serving HTTPS at `server`: it
/// trusts the CA `ca_pem` (`certificate-authority-data`) and authenticates with the client
/// certificate `client_cert_pem` and its key `client_key_pem` (`client-certificate-data`,
/// `client-key-data`), each the base64 of the PEM, as kubeadm writes `admin.conf`. It holds
/// a private key: write it with [`pki::write_private`].
pub fn kubeconfig_yaml_tls(
    server: &str,
    ca_pem: &str,
    client_cert_pem: &str,
    client_key_pem: &str,
) -> String {
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    kubeconfig_with(
        server,
        &format!("    certificate-authority-data: {}\n", b64(ca_pem)),
        &format!(
            "\n    client-certificate-data: {}\n    client-key-data: {}",
            b64(client_cert_pem),
            b64(client_key_pem)
        ),
    )
}

/// The admin scope's path prefix: platform admins manage Tenants there
/// (`kubectl --context crdplane-admin get tenants`).
pub const ADMIN_SCOPE_PATH: &str = "/clusters/root";

fn kubeconfig_with(server: &str, cluster_extra: &str, user: &str) -> String {
    let admin = format!("{}{ADMIN_SCOPE_PATH}", server.trim_end_matches('/'));
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: crdplane\n  cluster:\n    server: {server}\n{cluster_extra}- name: crdplane-admin\n  cluster:\n    server: {admin}\n{cluster_extra}contexts:\n- name: crdplane\n  context:\n    cluster: crdplane\n    user: crdplane\n    namespace: default\n- name: crdplane-admin\n  context:\n    cluster: crdplane-admin\n    user: crdplane\ncurrent-context: crdplane\nusers:\n- name: crdplane\n  user:{user}\n"
    )
}

/// Blocking HTTP GET of `path` on `addr`; returns the status code.
pub fn http_status(addr: &str, path: &str) -> Option<u16> {
    plain_status(addr, path).ok()
}

fn plain_status(addr: &str, path: &str) -> std::io::Result<u16> {
    let s = std::net::TcpStream::connect(addr)?;
    s.set_read_timeout(Some(tls::PROBE_TIMEOUT))?;
    s.set_write_timeout(Some(tls::PROBE_TIMEOUT))?;
    tls::get_status(s, addr, path)
}

/// Blocking GET of `path` on the base URL `url`: plain for `http://`, through `tls` for
/// `https://` ([`tls::https_status`]; an error without it); an unspecified host stands for
/// the loopback one ([`client_url`]). Returns the status code.
pub fn url_status(
    url: &str,
    path: &str,
    tls: Option<&Arc<rustls::ClientConfig>>,
) -> std::io::Result<u16> {
    let url = client_url(url);
    if let Some(addr) = url.strip_prefix("https://") {
        let tls = tls.ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{url} serves TLS and no client configuration was given"),
            )
        })?;
        tls::https_status(addr.trim_end_matches('/'), path, tls)
    } else {
        plain_status(url_addr(&url).trim_end_matches('/'), path)
    }
}

/// The `host:port` of a base URL (`http://` or `https://` removed).
pub fn url_addr(url: &str) -> &str {
    url.strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .unwrap_or(url)
}

/// `ip`, or the loopback address of its family when it is unspecified (`0.0.0.0`, `::`).
pub fn loopback_if_unspecified(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v) if v.is_unspecified() => IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        IpAddr::V6(v) if v.is_unspecified() => IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
        other => other,
    }
}

/// The URL a client on this machine uses for the announced base URL `url`: an unspecified
/// host (a gateway listening on `0.0.0.0` or `[::]`) becomes the loopback address, which is
/// reachable and named in the serving certificate.
pub fn client_url(url: &str) -> String {
    let addr = url_addr(url);
    let scheme = &url[..url.len() - addr.len()];
    match addr.parse::<std::net::SocketAddr>() {
        Ok(mut a) => {
            a.set_ip(loopback_if_unspecified(a.ip()));
            format!("{scheme}{a}")
        }
        Err(_) => url.to_string(),
    }
}

/// The hosts the serving certificate needs for the listen address `listen` (`host:port`):
/// its host (without brackets) and, for a DNS name, the addresses it resolves to (the
/// gateway announces the address it bound, and clients of the kubeconfig use that).
pub fn san_hosts(listen: &str) -> Vec<String> {
    use std::net::ToSocketAddrs;
    let host = listen.rsplit_once(':').map_or(listen, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let mut hosts = vec![host.to_string()];
    if host.parse::<IpAddr>().is_err()
        && let Ok(addrs) = (host, 0).to_socket_addrs()
    {
        for a in addrs {
            let ip = a.ip().to_string();
            if !hosts.contains(&ip) {
                hosts.push(ip);
            }
        }
    }
    hosts
}

/// First delay before restarting a child that died.
pub const RESTART_MIN: Duration = Duration::from_millis(500);
/// Longest delay before restarting a child that died (the backoff doubles up to it).
pub const RESTART_MAX: Duration = Duration::from_secs(30);
/// A child that ran this long before dying is restarted after [`RESTART_MIN`] again.
pub const RESTART_RESET: Duration = Duration::from_secs(60);

/// The delay before restarting a child that died after running `ran`, `prev` being the
/// delay used last time.
pub fn restart_delay(prev: Option<Duration>, ran: Duration) -> Duration {
    match prev {
        Some(d) if ran < RESTART_RESET => (d * 2).clamp(RESTART_MIN, RESTART_MAX),
        _ => RESTART_MIN,
    }
}

/// Raises this process's soft `RLIMIT_NOFILE` to its hard limit (inherited by every child
/// started afterwards); returns the resulting soft limit (None = unlimited).
pub fn raise_nofile_limit() -> std::io::Result<Option<u64>> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let l = getrlimit(Resource::Nofile);
    if let Some(max) = l.maximum
        && l.current != Some(max)
    {
        setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(max),
                maximum: Some(max),
            },
        )?;
    }
    Ok(getrlimit(Resource::Nofile).current)
}

/// Runs the stack until interrupted, restarting children that die. Returns an error if
/// startup fails.
pub async fn up(cfg: UpConfig) -> anyhow::Result<()> {
    match raise_nofile_limit() {
        Ok(_) => {}
        Err(e) => eprintln!("crdplane: cannot raise the open-files limit: {e}"),
    }
    std::fs::create_dir_all(&cfg.data_dir)?;
    let data_dir = std::fs::canonicalize(&cfg.data_dir)?;
    let logs = data_dir.join("logs");
    std::fs::create_dir_all(&logs)?;
    let bin_dir = sibling("crdplane-gateway")
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let pki = if cfg.insecure_http {
        None
    } else {
        let mut hosts = san_hosts(&cfg.listen);
        hosts.extend(cfg.extra_sans.iter().cloned());
        Some(Pki::ensure(&data_dir.join("pki"), &hosts)?)
    };
    let mut builder = StackBuilder::new(bin_dir, cfg.redis_url.clone().unwrap_or_default())
        .durability(cfg.durability.clone())
        .gateway_listen(cfg.listen.clone())
        .args(Service::Gateway, &["--default-tenant", &cfg.default_tenant])
        .logs(&logs);
    match (&cfg.redis_url, cfg.redis_cluster) {
        (Some(_), _) => {}
        (None, Some(masters)) => {
            builder = builder.own_redis_cluster(data_dir.join("redis-cluster"), masters);
        }
        (None, None) => builder = builder.own_redis(data_dir.join("redis")),
    }
    if cfg.replicas > 1 {
        builder = builder.scale(cfg.replicas);
    }
    if cfg.wait_replicas > 0 {
        builder = builder.args(
            Service::Storage,
            &["--wait-replicas", &cfg.wait_replicas.to_string()],
        );
    }
    if let Some(p) = &pki {
        builder = builder.tls(p);
    }
    let audit_dir = data_dir.join("audit");
    if let Some(policy) = &cfg.audit_policy_file {
        builder = builder.audit(std::fs::canonicalize(policy)?, &audit_dir);
    }
    let mut stack = tokio::task::spawn_blocking(move || builder.start()).await??;

    let server = stack.gateway().to_string();
    let kubeconfig = cfg
        .kubeconfig
        .clone()
        .unwrap_or_else(|| data_dir.join("kubeconfig"));
    if let Some(d) = kubeconfig.parent() {
        std::fs::create_dir_all(d)?;
    }
    let yaml = match &pki {
        Some(p) => kubeconfig_yaml_tls(
            &client_url(&server),
            p.ca_pem(),
            p.admin_cert_pem(),
            p.admin_key_pem(),
        ),
        None => kubeconfig_yaml(&client_url(&server)),
    };
    pki::write_private(&kubeconfig, &yaml)?;
    // Every process's metrics, for a Prometheus on this machine.
    let prometheus = data_dir.join("prometheus.yml");
    let alerts = std::env::current_dir()?.join("deploy/monitoring/alerts.yml");
    let rules: Vec<String> = if alerts.exists() {
        vec![alerts.display().to_string()]
    } else {
        Vec::new()
    };
    pki::write_private(
        &prometheus,
        &monitoring::prometheus_config(&stack.metrics_targets(), pki.as_ref(), "15s", &rules),
    )?;
    println!("crdplane is up");
    println!("  gateway:    {server}");
    if stack.gateways.len() > 1 {
        println!("  gateways:   {}", stack.gateways.join(" "));
    }
    println!("  kubeconfig: {}", kubeconfig.display());
    println!(
        "  metrics:    {}  (prometheus --config.file={})",
        stack
            .metrics_targets()
            .iter()
            .map(|(_, u)| u.as_str())
            .collect::<Vec<_>>()
            .join(" "),
        prometheus.display()
    );
    println!(
        "  data:       {}  (logs in {})",
        data_dir.display(),
        logs.display()
    );
    if cfg.audit_policy_file.is_some() {
        println!("  audit log:  {}/<gateway>.log", audit_dir.display());
    }
    println!();
    match &pki {
        Some(p) => {
            println!(
                "The gateway serves https with a certificate of the CA in {}.",
                p.ca_cert_path().display()
            );
            println!(
                "The kubeconfig holds that CA and the admin client certificate ({}, group {});",
                pki::ADMIN_USER,
                pki::ADMIN_GROUP
            );
            println!("anonymous requests are refused (--anonymous-auth=false).");
            println!(
                "Authorization is RBAC per tenant: {} may do everything; grant others Roles \
                 and bindings (kubectl create rolebinding ... --clusterrole=edit --user=...).",
                pki::ADMIN_GROUP
            );
        }
        None => {
            println!("The gateway serves plain http without authentication (--insecure-http).");
        }
    }
    println!();
    println!("Point kubectl at it:");
    println!("  export KUBECONFIG={}", kubeconfig.display());
    println!("  kubectl get namespaces");
    println!(
        "Tenants (each a logical cluster at {}/clusters/<tenant>) are created and deleted in the \
         admin scope:",
        client_url(&server)
    );
    println!("  kubectl --context crdplane-admin get tenants");
    println!(
        "  kubectl --context crdplane-admin create -f tenant.yaml   # kind: Tenant, apiVersion: crdplane.io/v1alpha1"
    );
    println!();
    println!("Press Ctrl-C to stop.");

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            _ = term.recv() => break,
            _ = tokio::time::sleep(Duration::from_millis(200)) => stack.supervise(),
        }
    }
    println!("stopping crdplane");
    tokio::task::spawn_blocking(move || stack.stop()).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubeconfig_points_at_the_gateway() {
        let k = kubeconfig_yaml("http://127.0.0.1:6443");
        assert!(k.contains("server: http://127.0.0.1:6443"));
        assert!(k.contains("current-context: crdplane"));
        let v: serde_json::Value = serde_saphyr::from_str(&k).unwrap();
        assert_eq!(
            v["clusters"][1]["cluster"]["server"],
            "http://127.0.0.1:6443/clusters/root"
        );
        assert_eq!(v["contexts"][1]["name"], "crdplane-admin");
        assert_eq!(v["contexts"][1]["context"]["cluster"], "crdplane-admin");
        assert_eq!(v["users"][0]["user"], serde_json::json!({}));
        assert!(
            v["clusters"][0]["cluster"]
                .get("certificate-authority-data")
                .is_none()
        );
    }

    #[test]
    fn tls_kubeconfig_carries_the_ca_and_the_client_certificate() {
        use base64::Engine;
        let ca = "-----BEGIN CERTIFICATE-----\nQ0E=\n-----END CERTIFICATE-----\n";
        let cert = "-----BEGIN CERTIFICATE-----\nYWRtaW4=\n-----END CERTIFICATE-----\n";
        let key = "-----BEGIN PRIVATE KEY-----\na2V5\n-----END PRIVATE KEY-----\n";
        let k = kubeconfig_yaml_tls("https://127.0.0.1:6443", ca, cert, key);
        let v: serde_json::Value = serde_saphyr::from_str(&k).unwrap();
        let unb64 = |v: &serde_json::Value| {
            let b = base64::engine::general_purpose::STANDARD
                .decode(v.as_str().unwrap())
                .unwrap();
            String::from_utf8(b).unwrap()
        };
        assert_eq!(v["apiVersion"], "v1");
        assert_eq!(v["kind"], "Config");
        assert_eq!(v["current-context"], "crdplane");
        let cluster = &v["clusters"][0];
        assert_eq!(cluster["name"], "crdplane");
        assert_eq!(cluster["cluster"]["server"], "https://127.0.0.1:6443");
        assert_eq!(unb64(&cluster["cluster"]["certificate-authority-data"]), ca);
        assert_eq!(
            unb64(&v["clusters"][1]["cluster"]["certificate-authority-data"]),
            ca
        );
        let ctx = &v["contexts"][0];
        assert_eq!(ctx["name"], "crdplane");
        assert_eq!(ctx["context"]["cluster"], "crdplane");
        assert_eq!(ctx["context"]["user"], "crdplane");
        assert_eq!(ctx["context"]["namespace"], "default");
        let user = &v["users"][0];
        assert_eq!(user["name"], "crdplane");
        assert_eq!(unb64(&user["user"]["client-certificate-data"]), cert);
        assert_eq!(unb64(&user["user"]["client-key-data"]), key);
    }

    #[test]
    fn urls_for_clients() {
        assert_eq!(url_addr("https://127.0.0.1:1"), "127.0.0.1:1");
        assert_eq!(url_addr("http://[::1]:1"), "[::1]:1");
        assert_eq!(url_addr("127.0.0.1:1"), "127.0.0.1:1");
        assert_eq!(client_url("https://0.0.0.0:6443"), "https://127.0.0.1:6443");
        assert_eq!(client_url("http://[::]:6443"), "http://[::1]:6443");
        assert_eq!(client_url("https://10.0.0.2:6443"), "https://10.0.0.2:6443");
        assert_eq!(client_url("http://localhost:6443"), "http://localhost:6443");
    }

    #[test]
    fn san_hosts_of_listen_addresses() {
        assert_eq!(san_hosts("0.0.0.0:6443"), ["0.0.0.0"]);
        assert_eq!(san_hosts("[fd00::1]:6443"), ["fd00::1"]);
        let local = san_hosts("localhost:6443");
        assert_eq!(local[0], "localhost");
        assert!(
            local[1..]
                .iter()
                .all(|h| h.parse::<IpAddr>().unwrap().is_loopback())
        );
    }

    #[test]
    fn an_https_url_needs_a_client_configuration() {
        let e = url_status("https://127.0.0.1:1", "/readyz", None).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    }

    #[test]
    fn restart_delays_grow_while_crashing_and_reset_after_a_good_run() {
        let mut d = None;
        let mut seen = Vec::new();
        for _ in 0..9 {
            let n = restart_delay(d, Duration::from_secs(1));
            seen.push(n.as_millis());
            d = Some(n);
        }
        assert_eq!(
            seen,
            [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]
        );
        assert_eq!(restart_delay(d, Duration::from_secs(120)), RESTART_MIN);
    }

    #[test]
    fn the_soft_open_files_limit_is_raised_to_the_hard_one() {
        let after = raise_nofile_limit().unwrap();
        let l = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        assert_eq!(after, l.current);
        if l.maximum.is_some() {
            assert_eq!(l.current, l.maximum);
        }
    }
}
