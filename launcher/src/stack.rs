//! [`StackBuilder`]: the one place that knows how to start the stack's processes — which
//! ones, in which order, with which flags, and how to wait for them — used by `crdplane up`
//! and by the end-to-end test harness (`tests/src/lib.rs`).
//!
//! Order: Redis (when the stack runs its own), the storage replicas, validation, registry,
//! the gateway replicas; each service is started on `127.0.0.1:0` (the gateway on its listen
//! address) and announces `listening on http://ADDR` on its stdout (a gateway serving TLS:
//! `https://ADDR`; [`crdplane_core::names::parse_announcement`]); the next ones get those
//! addresses as flags ([`service_args`]). [`StackBuilder::start`] returns once every
//! gateway's `/readyz` answers 200 (the readiness endpoint of kube-apiserver,
//! staging/src/k8s.io/apiserver/pkg/server/healthz), failing early when a child exits.
//!
//! Gateways serve HTTPS when the builder has [`StackBuilder::tls`]: `--tls-cert-file`,
//! `--tls-private-key-file` and `--client-ca-file` from the stack's [`Pki`], and
//! `--anonymous-auth=false` and `--authorization-mode=RBAC`, as kube-apiserver runs under
//! kubeadm; readiness is then probed
//! over TLS with the admin's client certificate, trusting only the stack's CA
//! ([`crate::tls`]). With it every process also gets `--grpc-tls-ca-file`,
//! `--grpc-tls-cert-file` and `--grpc-tls-key-file` ([`ServiceTls`]): the gRPC connections
//! between them are mutual TLS under the PKI's services CA, and the services announce
//! `https://` URLs. Otherwise they get `--insecure-http` (plain HTTP, the gateway's explicit
//! opt-out; without either it refuses to start). Replicas added later get the same flags.
//!
//! The returned [`RunningStack`] holds the children (killed on drop; [`RunningStack::stop`]
//! stops them as an operator would) and can kill, restart in place, add and supervise them.
//! Every child is started with [`crate::spawn::spawn_tied`], so it dies with its starter.
//! Not on the request path.

use crate::pki::Pki;
use crate::spawn::spawn_tied;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One of the four crdplane services.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    /// `crdplane-storage` (on Redis).
    Storage,
    /// `crdplane-validation`.
    Validation,
    /// `crdplane-registry` (on storage and validation).
    Registry,
    /// `crdplane-gateway` (on storage, validation and registry).
    Gateway,
}

impl Service {
    /// All four, in start order.
    pub const ALL: [Service; 4] = [
        Service::Storage,
        Service::Validation,
        Service::Registry,
        Service::Gateway,
    ];

    /// Short name (`storage`, …): log file names and messages.
    pub fn name(self) -> &'static str {
        match self {
            Service::Storage => "storage",
            Service::Validation => "validation",
            Service::Registry => "registry",
            Service::Gateway => "gateway",
        }
    }

    /// File name of its binary (`crdplane-storage`, …).
    pub fn binary(self) -> &'static str {
        match self {
            Service::Storage => "crdplane-storage",
            Service::Validation => "crdplane-validation",
            Service::Registry => "crdplane-registry",
            Service::Gateway => "crdplane-gateway",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The addresses a service is pointed at (those of the services started before it).
#[derive(Debug, Clone, Default)]
pub struct Peers {
    /// `--redis-url` of the storage.
    pub redis_url: String,
    /// gRPC URL of the storage (replica) this service talks to.
    pub storage: String,
    /// gRPC URL of the validation service.
    pub validation: String,
    /// gRPC URLs of the registries (comma-separated when there are several).
    pub registry: String,
}

/// The flags of `service`: `--listen <listen>`, the peers it needs, then `extra`.
pub fn service_args(
    service: Service,
    listen: &str,
    peers: &Peers,
    extra: &[String],
) -> Vec<String> {
    let mut a: Vec<String> = vec!["--listen".into(), listen.into()];
    let mut flag = |f: &str, v: &str| {
        a.push(f.into());
        a.push(v.into());
    };
    match service {
        // A URL with a password goes in the environment instead ([`storage_envs`]).
        Service::Storage if !peers.redis_url.contains('@') => flag("--redis-url", &peers.redis_url),
        Service::Storage => {}
        Service::Validation => {}
        Service::Registry => {
            flag("--storage", &peers.storage);
            flag("--validation", &peers.validation);
        }
        Service::Gateway => {
            flag("--storage", &peers.storage);
            flag("--validation", &peers.validation);
            flag("--registry", &peers.registry);
        }
    }
    a.extend(extra.iter().cloned());
    a
}

/// The environment of a storage pointed at `redis_url`: the URL when it carries a password
/// (a process's arguments are readable by every local user; its environment is not).
pub fn storage_envs(redis_url: &str) -> Vec<(String, String)> {
    if redis_url.contains('@') {
        vec![("CRDPLANE_STORAGE_REDIS_URL".into(), redis_url.into())]
    } else {
        Vec::new()
    }
}

/// The flags of a `redis-server` on the unix socket `socket` only (no TCP port), data in
/// `dir`, with the persistence `durability` asks for: AOF with `appendfsync always` for
/// `fsync` (an acknowledged write survives a crash of the machine; Redis group-commits the
/// fsync of one event-loop iteration), `everysec`, or no persistence for `memory`.
pub fn redis_args(socket: &Path, dir: &Path, durability: &str) -> Vec<String> {
    let s = |v: &str| v.to_string();
    vec![
        s("--port"),
        s("0"),
        s("--unixsocket"),
        socket.to_string_lossy().into_owned(),
        s("--unixsocketperm"),
        s("700"),
        s("--dir"),
        dir.to_string_lossy().into_owned(),
    ]
    .into_iter()
    .chain(persistence_args(durability))
    .collect()
}

/// The persistence flags of a `redis-server` for storage's `durability` (see [`redis_args`]),
/// in the foreground.
pub fn persistence_args(durability: &str) -> Vec<String> {
    let s = |v: &str| v.to_string();
    vec![
        s("--appendonly"),
        s(if durability == "memory" { "no" } else { "yes" }),
        s("--appendfsync"),
        s(if durability == "everysec" {
            "everysec"
        } else {
            "always"
        }),
        s("--save"),
        s(""),
        s("--daemonize"),
        s("no"),
    ]
}

/// The redis-server binary: `$CRDPLANE_REDIS_SERVER` if set, else `redis-server` on PATH.
pub fn redis_server_bin() -> String {
    std::env::var("CRDPLANE_REDIS_SERVER").unwrap_or_else(|_| "redis-server".into())
}

/// `args` with the value of `--listen` replaced by `addr` (a restarted service keeps the
/// address it first announced, so the flags of the others stay valid).
pub fn with_listen(args: &[String], addr: &str) -> Vec<String> {
    with_flag(args, "--listen", addr)
}

/// `args` with the value of `flag` replaced by `value` (unchanged without the flag).
pub fn with_flag(args: &[String], flag: &str, value: &str) -> Vec<String> {
    let mut out = args.to_vec();
    if let Some(i) = out.iter().position(|a| a == flag)
        && i + 1 < out.len()
    {
        out[i + 1] = value.to_string();
    }
    out
}

/// How long a service may take to announce its address.
pub const ANNOUNCE_TIMEOUT: Duration = Duration::from_secs(60);

/// Where a child's output goes.
#[derive(Debug, Clone)]
pub enum Output {
    /// stderr inherited from the starter, stdout (after the announcement) discarded.
    Inherit,
    /// stdout and stderr appended to this file.
    File(PathBuf),
}

/// How to (re)start one child.
#[derive(Debug, Clone)]
pub struct ChildSpec {
    /// Name in messages and log files (`storage`, `gateway-1`, `redis`).
    pub name: String,
    /// The binary.
    pub bin: PathBuf,
    /// Its flags (for a service, `--listen` holds the announced address once started).
    pub args: Vec<String>,
    /// Extra environment variables.
    pub envs: Vec<(String, String)>,
    /// A crdplane service that announces `listening on http://ADDR` (or `https://ADDR`;
    /// else: Redis).
    pub announces: bool,
    /// Where its output goes.
    pub output: Output,
}

impl ChildSpec {
    fn command(&self) -> std::io::Result<Command> {
        let mut c = Command::new(&self.bin);
        c.args(&self.args)
            .envs(self.envs.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null());
        match &self.output {
            Output::Inherit => {
                c.stderr(Stdio::inherit());
                c.stdout(if self.announces {
                    Stdio::piped()
                } else {
                    Stdio::null()
                });
            }
            Output::File(f) => {
                let log = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(f)?;
                c.stderr(log.try_clone()?);
                c.stdout(if self.announces {
                    Stdio::piped()
                } else {
                    Stdio::from(log)
                });
            }
        }
        Ok(c)
    }

    fn see_log(&self) -> String {
        match &self.output {
            Output::File(f) => format!("; see {}", f.display()),
            Output::Inherit => String::new(),
        }
    }

    /// Starts the child; for a service, also returns the URL it announced (waited for up to
    /// [`ANNOUNCE_TIMEOUT`]). On failure the child is killed.
    pub fn spawn(&self) -> anyhow::Result<(Child, Option<String>)> {
        self.spawn_announced().map(|(c, a)| (c, a.map(|a| a.url)))
    }

    /// [`ChildSpec::spawn`], with the metrics URL the service announced too (if it serves
    /// metrics).
    pub fn spawn_announced(&self) -> anyhow::Result<(Child, Option<Announced>)> {
        let name = &self.name;
        let mut child = spawn_tied(self.command()?)
            .map_err(|e| anyhow::anyhow!("cannot start {name} ({}): {e}", self.bin.display()))?;
        if !self.announces {
            return Ok((child, None));
        }
        let stdout = child.stdout.take().expect("piped stdout");
        let log = match &self.output {
            Output::File(f) => Some(std::fs::OpenOptions::new().append(true).open(f)?),
            Output::Inherit => None,
        };
        match announced(stdout, log) {
            Ok(a) => Ok((child, Some(a))),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(anyhow::anyhow!("{name} {e}{}", self.see_log()))
            }
        }
    }
}

/// What a service announced on its stdout.
#[derive(Debug, Clone)]
pub struct Announced {
    /// Its URL (`listening on …`).
    pub url: String,
    /// Its metrics URL (`metrics on …`, printed before the URL), if it serves metrics.
    pub metrics: Option<String>,
}

/// The URL a service announces on `stdout` (its first announcement line) and the metrics URL
/// announced before it, waited for up to [`ANNOUNCE_TIMEOUT`]; every other line is copied to
/// `log` (or dropped), on a thread that drains the pipe for the child's life so the child
/// never blocks on it.
fn announced(
    stdout: std::process::ChildStdout,
    mut log: Option<std::fs::File>,
) -> Result<Announced, String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        let mut metrics = None;
        for l in std::io::BufReader::new(stdout).lines() {
            let Ok(l) = l else { break };
            if tx.is_some() {
                if let Some(url) = crdplane_core::names::parse_metrics_announcement(&l) {
                    metrics = Some(url.to_string());
                    continue;
                }
                if let Some(url) = crdplane_core::names::parse_announcement(&l) {
                    let a = Announced {
                        url: url.to_string(),
                        metrics: metrics.take(),
                    };
                    let _ = tx.take().map(|t| t.send(a));
                    continue;
                }
            }
            if let Some(f) = log.as_mut() {
                let _ = writeln!(f, "{l}");
            }
        }
    });
    match rx.recv_timeout(ANNOUNCE_TIMEOUT) {
        Ok(url) => Ok(url),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            Err(format!("did not start within {ANNOUNCE_TIMEOUT:?}"))
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err("exited during startup".into()),
    }
}

/// Where the stack's Redis comes from.
#[derive(Debug, Clone)]
pub enum RedisSource {
    /// An existing Redis (`redis://host:port`, `redis+unix:///path`).
    Url(String),
    /// A `redis-server` child with its socket and data in this directory.
    Own(PathBuf),
    /// A local Redis Cluster of this many masters (one replica each) in this directory
    /// ([`crate::cluster`]).
    OwnCluster(PathBuf, usize),
}

/// What a stack's gateways serve TLS with ([`StackBuilder::tls`]): the files of the
/// [`Pki`] they are pointed at and the PEMs the readiness probe authenticates with.
#[derive(Clone)]
pub struct GatewayTls {
    /// `--tls-cert-file`.
    pub cert_file: PathBuf,
    /// `--tls-private-key-file`.
    pub key_file: PathBuf,
    /// `--client-ca-file`.
    pub client_ca_file: PathBuf,
    /// `--service-account-signing-key-file`.
    pub sa_key_file: PathBuf,
    /// `--service-account-key-file`.
    pub sa_pub_file: PathBuf,
    /// `--encryption-provider-config`.
    pub encryption_config_file: PathBuf,
    /// The CA the probe trusts (PEM).
    pub ca_pem: String,
    /// The client certificate the probe presents (PEM; the admin's).
    pub client_cert_pem: String,
    /// Its key (PEM).
    pub client_key_pem: String,
}

impl std::fmt::Debug for GatewayTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayTls")
            .field("cert_file", &self.cert_file)
            .field("key_file", &self.key_file)
            .field("client_ca_file", &self.client_ca_file)
            .finish_non_exhaustive()
    }
}

impl GatewayTls {
    /// The gateway's TLS and authentication flags.
    pub fn gateway_args(&self) -> Vec<String> {
        let path = |p: &Path| p.to_string_lossy().into_owned();
        vec![
            "--tls-cert-file".into(),
            path(&self.cert_file),
            "--tls-private-key-file".into(),
            path(&self.key_file),
            "--client-ca-file".into(),
            path(&self.client_ca_file),
            "--anonymous-auth=false".into(),
            "--authorization-mode=RBAC".into(),
            "--service-account-issuer".into(),
            crate::pki::SA_ISSUER.into(),
            "--service-account-key-file".into(),
            path(&self.sa_pub_file),
            "--service-account-signing-key-file".into(),
            path(&self.sa_key_file),
            "--encryption-provider-config".into(),
            path(&self.encryption_config_file),
        ]
    }
}

/// Where each process kind's mutual-TLS files are ([`StackBuilder::tls`]).
#[derive(Debug, Clone)]
pub struct ServiceTls {
    ca_file: PathBuf,
    certs: [(PathBuf, PathBuf); 4],
}

impl ServiceTls {
    /// The files of `pki` (its services CA and per-kind certificates).
    pub fn from_pki(pki: &Pki) -> Self {
        let pair = |s: Service| {
            (
                pki.service_cert_path(s.name()),
                pki.service_key_path(s.name()),
            )
        };
        Self {
            ca_file: pki.services_ca_path(),
            certs: [
                pair(Service::Storage),
                pair(Service::Validation),
                pair(Service::Registry),
                pair(Service::Gateway),
            ],
        }
    }

    /// The `--grpc-tls-*` flags of a process of kind `service`.
    pub fn args(&self, service: Service) -> Vec<String> {
        let path = |p: &Path| p.to_string_lossy().into_owned();
        let (cert, key) = &self.certs[service.index()];
        vec![
            "--grpc-tls-ca-file".into(),
            path(&self.ca_file),
            "--grpc-tls-cert-file".into(),
            path(cert),
            "--grpc-tls-key-file".into(),
            path(key),
        ]
    }
}

/// The mutual-TLS flags of `service` with `mtls`, none without.
fn mtls_args(mtls: Option<&ServiceTls>, service: Service) -> Vec<String> {
    mtls.map(|m| m.args(service)).unwrap_or_default()
}

/// The flags that choose how a gateway serves: TLS with `tls`, else `--insecure-http`.
pub fn gateway_mode_args(tls: Option<&GatewayTls>) -> Vec<String> {
    match tls {
        Some(t) => t.gateway_args(),
        None => vec!["--insecure-http".into()],
    }
}

/// Describes a stack to start; see the module docs.
#[derive(Debug, Clone)]
pub struct StackBuilder {
    bin_dir: PathBuf,
    redis: RedisSource,
    durability: Option<String>,
    storages: usize,
    gateways: usize,
    validations: usize,
    registries: usize,
    /// Every client gets every replica of a service (comma-separated endpoints, balanced
    /// and health-aware in `crdplane_transport`) instead of one ([`StackBuilder::scale`]).
    spread: bool,
    extra: [Vec<String>; 4],
    gateway_listen: String,
    logs: Option<PathBuf>,
    ready_timeout: Duration,
    tls: Option<GatewayTls>,
    mtls: Option<ServiceTls>,
    /// The audit policy and the folder of the gateways' audit logs.
    audit: Option<(PathBuf, PathBuf)>,
    /// Environment variables of every service process (e.g. `OTEL_*`).
    envs: Vec<(String, String)>,
}

impl StackBuilder {
    /// A stack of the binaries in `bin_dir` on the Redis at `redis_url`: one replica of each
    /// service, the gateway on `127.0.0.1:0`, output inherited, 60 s to get ready.
    pub fn new(bin_dir: impl Into<PathBuf>, redis_url: impl Into<String>) -> Self {
        Self {
            bin_dir: bin_dir.into(),
            redis: RedisSource::Url(redis_url.into()),
            durability: None,
            storages: 1,
            gateways: 1,
            validations: 1,
            registries: 1,
            spread: false,
            extra: Default::default(),
            gateway_listen: "127.0.0.1:0".into(),
            logs: None,
            ready_timeout: Duration::from_secs(60),
            tls: None,
            mtls: None,
            audit: None,
            envs: Vec::new(),
        }
    }

    /// Runs a local Redis Cluster of `masters` masters with one replica each (the first
    /// children, data in `dir`) instead.
    pub fn own_redis_cluster(mut self, dir: impl Into<PathBuf>, masters: usize) -> Self {
        self.redis = RedisSource::OwnCluster(dir.into(), masters);
        self
    }

    /// Runs its own `redis-server` (first child, its socket and data in `dir`) instead.
    pub fn own_redis(mut self, dir: impl Into<PathBuf>) -> Self {
        self.redis = RedisSource::Own(dir.into());
        self
    }

    /// When a write is acknowledged (`fsync`, `everysec`, `memory`): the storage's
    /// `--durability`, and the persistence of an own Redis ([`redis_args`]).
    pub fn durability(mut self, d: impl Into<String>) -> Self {
        self.durability = Some(d.into());
        self
    }

    /// Runs `storages` storage and `gateways` gateway replicas (at least one each); gateway
    /// `i` talks to storage `i % storages`, the registry to storage 0.
    pub fn replicas(mut self, storages: usize, gateways: usize) -> Self {
        self.storages = storages.max(1);
        self.gateways = gateways.max(1);
        self
    }

    /// Runs `n` replicas of every service, and points every client at all replicas of each
    /// service it calls (comma-separated endpoints: spread, health-aware, surviving a
    /// replica's death), as a scaled-out deployment does. The registries share their work
    /// through storage (every controller write is a compare-and-swap, collector items are
    /// leased), so any number of them may run.
    pub fn scale(mut self, n: usize) -> Self {
        let n = n.max(1);
        self.storages = n;
        self.validations = n;
        self.registries = n;
        self.gateways = n;
        self.spread = true;
        self
    }

    /// Appends flags for every replica of `service`.
    pub fn args<S: AsRef<str>>(mut self, service: Service, args: &[S]) -> Self {
        self.extra[service.index()].extend(args.iter().map(|a| a.as_ref().to_string()));
        self
    }

    /// Sets an environment variable of every service process (gateways, registry,
    /// validation, storage), e.g. the `OTEL_*` variables of trace export.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.envs.push((key.into(), value.into()));
        self
    }

    /// Gateways audit by the policy file `policy`, each into `<dir>/<gateway name>.log`
    /// (`--audit-policy-file`, `--audit-log-path`).
    pub fn audit(mut self, policy: impl Into<PathBuf>, dir: impl Into<PathBuf>) -> Self {
        self.audit = Some((policy.into(), dir.into()));
        self
    }

    /// The (first) gateway's listen address (`host:port`).
    pub fn gateway_listen(mut self, addr: impl Into<String>) -> Self {
        self.gateway_listen = addr.into();
        self
    }

    /// Writes each child's output to `<dir>/<name>.log` instead of inheriting stderr.
    pub fn logs(mut self, dir: impl Into<PathBuf>) -> Self {
        self.logs = Some(dir.into());
        self
    }

    /// Gateways serve HTTPS with `pki`'s serving certificate, authenticate client
    /// certificates of its CA and refuse anonymous requests; readiness is probed with its
    /// admin certificate, and the processes' gRPC connections are mutual TLS under the
    /// PKI's services CA (see the module docs). Without it gateways get `--insecure-http`.
    pub fn tls(mut self, pki: &Pki) -> Self {
        self.mtls = Some(ServiceTls::from_pki(pki));
        self.tls = Some(GatewayTls {
            cert_file: pki.serving_cert_path(),
            key_file: pki.serving_key_path(),
            client_ca_file: pki.ca_cert_path(),
            sa_key_file: pki.sa_key_path(),
            sa_pub_file: pki.sa_pub_path(),
            encryption_config_file: pki.encryption_config_path(),
            ca_pem: pki.ca_pem().to_string(),
            client_cert_pem: pki.admin_cert_pem().to_string(),
            client_key_pem: pki.admin_key_pem().to_string(),
        });
        self
    }

    /// The flags every gateway replica gets: the serving mode ([`gateway_mode_args`]), then
    /// those of [`StackBuilder::args`].
    fn gateway_extra(&self) -> Vec<String> {
        let mut a = gateway_mode_args(self.tls.as_ref());
        a.extend(mtls_args(self.mtls.as_ref(), Service::Gateway));
        a.extend(self.extra[Service::Gateway.index()].iter().cloned());
        a
    }

    /// How long [`StackBuilder::start`] waits for the gateways' `/readyz`.
    pub fn ready_timeout(mut self, t: Duration) -> Self {
        self.ready_timeout = t;
        self
    }

    fn output(&self, name: &str) -> Output {
        match &self.logs {
            Some(d) => Output::File(d.join(format!("{name}.log"))),
            None => Output::Inherit,
        }
    }

    fn replica_name(service: Service, i: usize, n: usize) -> String {
        if n == 1 {
            service.name().to_string()
        } else {
            format!("{}-{i}", service.name())
        }
    }

    /// Starts every child in order and waits until the stack is ready. Children started
    /// before a failure are killed.
    pub fn start(self) -> anyhow::Result<RunningStack> {
        let client_tls = match &self.tls {
            Some(t) => Some(crate::tls::client_config(
                &t.ca_pem,
                &t.client_cert_pem,
                &t.client_key_pem,
            )?),
            None => None,
        };
        let mut stack = RunningStack {
            procs: Vec::new(),
            bin_dir: self.bin_dir.clone(),
            logs: self.logs.clone(),
            gateway_mode: gateway_mode_args(self.tls.as_ref()),
            mtls: self.mtls.clone(),
            client_tls,
            redis_url: String::new(),
            storages: Vec::new(),
            validation: String::new(),
            registry: String::new(),
            gateways: Vec::new(),
            service_envs: self.envs.clone(),
        };
        stack.redis_url = match &self.redis {
            RedisSource::Url(u) => u.clone(),
            RedisSource::Own(dir) => {
                std::fs::create_dir_all(dir)?;
                let socket = dir.join("redis.sock");
                let _ = std::fs::remove_file(&socket);
                let spec = ChildSpec {
                    name: "redis".into(),
                    bin: PathBuf::from(redis_server_bin()),
                    args: redis_args(&socket, dir, self.durability.as_deref().unwrap_or("fsync")),
                    envs: Vec::new(),
                    announces: false,
                    output: self.output("redis"),
                };
                stack.push(spec).map_err(|e| {
                    anyhow::anyhow!(
                        "{e}\nInstall it (Debian: apt-get install redis-server) or give a Redis URL"
                    )
                })?;
                let deadline = Instant::now() + Duration::from_secs(30);
                while !socket.exists() {
                    stack.check_alive()?;
                    if Instant::now() > deadline {
                        anyhow::bail!("redis-server did not create {}", socket.display());
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                format!("redis+unix://{}", socket.display())
            }
            RedisSource::OwnCluster(dir, masters) => {
                let plan = crate::cluster::Plan::in_dir(dir, *masters)?;
                let durability = self.durability.as_deref().unwrap_or("fsync");
                for (i, node) in plan.nodes.iter().enumerate() {
                    let spec = ChildSpec {
                        name: format!("redis-{i}"),
                        bin: PathBuf::from(redis_server_bin()),
                        args: crate::cluster::node_args(node, durability),
                        envs: Vec::new(),
                        announces: false,
                        output: self.output(&format!("redis-{i}")),
                    };
                    stack.push(spec).map_err(|e| {
                        anyhow::anyhow!(
                            "{e}\nInstall it (Debian: apt-get install redis-server) or give a Redis URL"
                        )
                    })?;
                }
                if let Err(e) = plan.form(Duration::from_secs(60)) {
                    // A node that exited says more than "did not form".
                    stack.check_alive()?;
                    return Err(e);
                }
                plan.seed_url()
            }
        };
        let mut peers = Peers {
            redis_url: stack.redis_url.clone(),
            ..Peers::default()
        };
        let mut storage_extra = mtls_args(self.mtls.as_ref(), Service::Storage);
        storage_extra.extend(self.extra[Service::Storage.index()].iter().cloned());
        if let Some(d) = &self.durability {
            storage_extra.extend(["--durability".to_string(), d.clone()]);
        }
        for i in 0..self.storages {
            let name = Self::replica_name(Service::Storage, i, self.storages);
            let args = service_args(Service::Storage, "127.0.0.1:0", &peers, &storage_extra);
            let envs = storage_envs(&peers.redis_url);
            let url = stack.push_service(Service::Storage, name, args, envs, None)?;
            stack.storages.push(url);
        }
        peers.storage = if self.spread {
            stack.storages.join(",")
        } else {
            stack.storages[0].clone()
        };
        for s in [Service::Validation, Service::Registry] {
            let mut extra = mtls_args(self.mtls.as_ref(), s);
            extra.extend(self.extra[s.index()].iter().cloned());
            let n = if s == Service::Validation {
                self.validations
            } else {
                self.registries
            };
            let mut urls = Vec::new();
            for i in 0..n {
                let args = service_args(s, "127.0.0.1:0", &peers, &extra);
                let name = Self::replica_name(s, i, n);
                urls.push(stack.push_service(s, name, args, Vec::new(), None)?);
            }
            match s {
                Service::Validation => peers.validation = urls.join(","),
                _ => peers.registry = urls.join(","),
            }
        }
        stack.validation = peers.validation.clone();
        stack.registry = peers.registry.clone();
        let gateway_extra = self.gateway_extra();
        for i in 0..self.gateways {
            let name = Self::replica_name(Service::Gateway, i, self.gateways);
            let listen = if i == 0 {
                self.gateway_listen.as_str()
            } else {
                "127.0.0.1:0"
            };
            let p = if self.spread {
                peers.clone()
            } else {
                Peers {
                    storage: stack.storages[i % stack.storages.len()].clone(),
                    ..peers.clone()
                }
            };
            let mut extra = gateway_extra.clone();
            if let Some((policy, dir)) = &self.audit {
                extra.extend([
                    "--audit-policy-file".to_string(),
                    policy.to_string_lossy().into_owned(),
                    "--audit-log-path".into(),
                    dir.join(format!("{name}.log"))
                        .to_string_lossy()
                        .into_owned(),
                ]);
            }
            let args = service_args(Service::Gateway, listen, &p, &extra);
            let url = stack.push_service(Service::Gateway, name, args, Vec::new(), None)?;
            stack.gateways.push(url);
        }
        stack.wait_ready(self.ready_timeout)?;
        Ok(stack)
    }
}

/// One started child and its restart state.
struct Proc {
    spec: ChildSpec,
    /// None after [`RunningStack::kill`] or while a restart is pending.
    child: Option<Child>,
    started: Instant,
    /// Delay before the next restart, and when it is due (supervision).
    delay: Duration,
    due: Option<Instant>,
    /// The metrics URL it announced (services).
    metrics: Option<String>,
}

/// A started stack: its children (in start order, Redis first when it is its own) and the
/// addresses they announced. Every child is killed (SIGKILL) when it is dropped.
pub struct RunningStack {
    procs: Vec<Proc>,
    bin_dir: PathBuf,
    logs: Option<PathBuf>,
    /// [`gateway_mode_args`] of the builder: flags of every gateway, also added ones.
    gateway_mode: Vec<String>,
    /// The processes' mutual-TLS files, for added replicas too.
    mtls: Option<ServiceTls>,
    /// How the readiness probe talks to gateways serving TLS.
    client_tls: Option<Arc<rustls::ClientConfig>>,
    /// The Redis URL the storage replicas use.
    pub redis_url: String,
    /// gRPC URLs of the storage replicas.
    pub storages: Vec<String>,
    /// gRPC URL of the validation service (every replica's, comma-separated, after
    /// [`StackBuilder::scale`]).
    pub validation: String,
    /// gRPC URLs of the registries (comma-separated when there are several).
    pub registry: String,
    /// Base URLs of the gateway replicas (`http://ADDR`, `https://ADDR` with TLS).
    pub gateways: Vec<String>,
    /// Environment variables of every service process ([`StackBuilder::env`]).
    service_envs: Vec<(String, String)>,
}

impl RunningStack {
    fn push(&mut self, spec: ChildSpec) -> anyhow::Result<(usize, Option<String>)> {
        let (child, announced) = spec.spawn_announced()?;
        let mut spec = spec;
        // A restart in place keeps the addresses the first start got.
        if let Some(a) = &announced {
            spec.args = with_listen(&spec.args, crate::url_addr(&a.url));
            if let Some(m) = &a.metrics {
                spec.args = with_flag(&spec.args, "--metrics-listen", crate::url_addr(m));
            }
        }
        self.procs.push(Proc {
            spec,
            child: Some(child),
            started: Instant::now(),
            delay: Duration::ZERO,
            due: None,
            metrics: announced.as_ref().and_then(|a| a.metrics.clone()),
        });
        Ok((self.procs.len() - 1, announced.map(|a| a.url)))
    }

    /// The metrics endpoints of the children that serve them: (name, URL of `/metrics`),
    /// the gateways' (`<base>/metrics`, authorized as every request) included.
    pub fn metrics_targets(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = self
            .procs
            .iter()
            .filter_map(|p| {
                Some((
                    p.spec.name.clone(),
                    format!("{}/metrics", p.metrics.as_ref()?),
                ))
            })
            .collect();
        for (i, g) in self.gateways.iter().enumerate() {
            let name = if self.gateways.len() == 1 {
                "gateway".to_string()
            } else {
                format!("gateway-{i}")
            };
            out.push((name, format!("{g}/metrics")));
        }
        out
    }

    fn push_service(
        &mut self,
        service: Service,
        name: String,
        args: Vec<String>,
        envs: Vec<(String, String)>,
        output: Option<Output>,
    ) -> anyhow::Result<String> {
        let output = output.unwrap_or_else(|| match &self.logs {
            Some(d) => Output::File(d.join(format!("{name}.log"))),
            None => Output::Inherit,
        });
        let mut args = args;
        // Every service serves metrics, on a port of its own (announced, see `announced`).
        if service != Service::Gateway && !args.iter().any(|a| a == "--metrics-listen") {
            args.extend(["--metrics-listen".to_string(), "127.0.0.1:0".to_string()]);
        }
        let mut envs = envs;
        envs.extend(self.service_envs.iter().cloned());
        let spec = ChildSpec {
            name,
            bin: self.bin_dir.join(service.binary()),
            args,
            envs,
            announces: true,
            output,
        };
        let (_, url) = self.push(spec)?;
        Ok(url.expect("a service announces its URL"))
    }

    /// The first gateway's base URL.
    pub fn gateway(&self) -> &str {
        &self.gateways[0]
    }

    /// The client configuration the readiness probe uses for gateways serving TLS (trusts
    /// the stack's CA, presents the admin certificate); `None` for plain HTTP.
    pub fn client_tls(&self) -> Option<&Arc<rustls::ClientConfig>> {
        self.client_tls.as_ref()
    }

    /// Blocking GET of `path` on the base URL `url` (a gateway's), over TLS with
    /// [`RunningStack::client_tls`] for `https://`; returns the status code.
    pub fn status(&self, url: &str, path: &str) -> std::io::Result<u16> {
        crate::url_status(url, path, self.client_tls.as_ref())
    }

    /// Names of the children, by index (`redis`, `storage`, …, added ones last).
    pub fn names(&self) -> Vec<&str> {
        self.procs.iter().map(|p| p.spec.name.as_str()).collect()
    }

    /// Index of the child named `name`.
    pub fn index(&self, name: &str) -> Option<usize> {
        self.procs.iter().position(|p| p.spec.name == name)
    }

    /// Process ids of the running children.
    pub fn pids(&self) -> Vec<u32> {
        self.procs
            .iter()
            .filter_map(|p| p.child.as_ref().map(Child::id))
            .collect()
    }

    /// Starts one more replica of `service` on the stack's storage (0), validation and
    /// registry, with `extra` flags (a gateway gets the stack's TLS or `--insecure-http`
    /// flags before them), environment `envs` and its output in `log` (None: as the
    /// stack's); returns its index and announced URL.
    pub fn add(
        &mut self,
        service: Service,
        extra: &[&str],
        envs: &[(&str, &str)],
        log: Option<&Path>,
    ) -> anyhow::Result<(usize, String)> {
        let peers = Peers {
            redis_url: self.redis_url.clone(),
            storage: self.storages.first().cloned().unwrap_or_default(),
            validation: self.validation.clone(),
            registry: self.registry.clone(),
        };
        let mut all = match service {
            Service::Gateway => self.gateway_mode.clone(),
            _ => Vec::new(),
        };
        all.extend(mtls_args(self.mtls.as_ref(), service));
        all.extend(extra.iter().map(|s| s.to_string()));
        let extra = all;
        let name = format!("{}-added-{}", service.name(), self.procs.len());
        let args = service_args(service, "127.0.0.1:0", &peers, &extra);
        let envs = envs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        if let Some(l) = log {
            std::fs::File::create(l)?;
        }
        let url = self.push_service(
            service,
            name,
            args,
            envs,
            log.map(|l| Output::File(l.to_path_buf())),
        )?;
        Ok((self.procs.len() - 1, url))
    }

    /// Kills child `i` with SIGKILL and reaps it (no restart until [`RunningStack::respawn`]).
    pub fn kill(&mut self, i: usize) -> std::io::Result<()> {
        if let Some(mut c) = self.procs[i].child.take() {
            c.kill()?;
            c.wait()?;
        }
        Ok(())
    }

    /// Starts child `i` again with the same flags (a service on the address it announced),
    /// retrying for up to `timeout` while its port is not free yet; returns its URL (empty
    /// for Redis).
    pub fn respawn(&mut self, i: usize, timeout: Duration) -> anyhow::Result<String> {
        self.kill(i)?;
        let deadline = Instant::now() + timeout;
        loop {
            match self.procs[i].spec.spawn() {
                Ok((c, url)) => {
                    let p = &mut self.procs[i];
                    p.child = Some(c);
                    p.started = Instant::now();
                    return Ok(url.unwrap_or_default());
                }
                Err(e) if Instant::now() < deadline => {
                    eprintln!("restarting {}: {e}; retrying", self.procs[i].spec.name);
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// An error naming the first child that has exited, if any.
    pub fn check_alive(&mut self) -> anyhow::Result<()> {
        for p in &mut self.procs {
            if let Some(Ok(Some(st))) = p.child.as_mut().map(Child::try_wait) {
                anyhow::bail!(
                    "{} exited during startup ({st}){}",
                    p.spec.name,
                    p.spec.see_log()
                );
            }
        }
        Ok(())
    }

    /// Waits until every gateway's `/readyz` answers 200 (over TLS with
    /// [`RunningStack::client_tls`] for `https://` gateways); fails after `timeout`, naming
    /// the last answer or error, or as soon as a child exits.
    pub fn wait_ready(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        for g in self.gateways.clone() {
            loop {
                let last = match self.status(&g, "/readyz") {
                    Ok(200) => break,
                    Ok(code) => format!("/readyz answered {code}"),
                    Err(e) => format!("/readyz: {e}"),
                };
                self.check_alive()?;
                if Instant::now() > deadline {
                    anyhow::bail!("gateway {g} was not ready within {timeout:?} ({last})");
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Ok(())
    }

    /// One pass of supervision (`crdplane up`): notes children that died and restarts those
    /// whose backoff delay ([`crate::restart_delay`]) is over, each in place.
    pub fn supervise(&mut self) {
        for p in &mut self.procs {
            let name = p.spec.name.clone();
            if let Some(c) = &mut p.child
                && let Ok(Some(st)) = c.try_wait()
            {
                p.child = None;
                p.delay = crate::restart_delay(
                    (!p.delay.is_zero()).then_some(p.delay),
                    p.started.elapsed(),
                );
                p.due = Some(Instant::now() + p.delay);
                eprintln!(
                    "crdplane: {name} exited ({st}); restarting it in {:?}{}",
                    p.delay,
                    p.spec.see_log()
                );
            }
            if p.child.is_none() && p.due.is_some_and(|d| Instant::now() >= d) {
                let started = p.spec.spawn();
                p.started = Instant::now();
                match started {
                    Ok((c, _)) => {
                        eprintln!("crdplane: {name} restarted");
                        p.child = Some(c);
                        p.due = None;
                    }
                    Err(e) => {
                        p.delay = crate::restart_delay(Some(p.delay), Duration::ZERO);
                        p.due = Some(Instant::now() + p.delay);
                        eprintln!(
                            "crdplane: restarting {name} failed: {e}; next try in {:?}",
                            p.delay
                        );
                    }
                }
            }
        }
    }

    /// Stops the children in reverse start order (gateways first, Redis last so its AOF is
    /// flushed): SIGTERM, then SIGKILL after 5 s.
    pub fn stop(&mut self) {
        while let Some(mut p) = self.procs.pop() {
            if let Some(c) = p.child.take() {
                let _ = terminate(c, Duration::from_secs(5));
            }
        }
    }

    /// Stops child `i` as a supervisor does (no restart until [`RunningStack::respawn`]):
    /// SIGTERM, then SIGKILL if it has not exited within `grace`. Its exit status, or None
    /// when it had to be killed (or was not running).
    pub fn terminate(
        &mut self,
        i: usize,
        grace: Duration,
    ) -> std::io::Result<Option<std::process::ExitStatus>> {
        match self.procs[i].child.take() {
            Some(c) => terminate(c, grace),
            None => Ok(None),
        }
    }
}

impl Drop for RunningStack {
    fn drop(&mut self) {
        for c in self.procs.iter_mut().filter_map(|p| p.child.as_mut()) {
            let _ = c.kill();
        }
        for c in self.procs.iter_mut().filter_map(|p| p.child.as_mut()) {
            let _ = c.wait();
        }
    }
}

/// SIGTERM to `c`, then SIGKILL after `grace`; reaps it. Its exit status when it exited on
/// its own within `grace`.
fn terminate(mut c: Child, grace: Duration) -> std::io::Result<Option<std::process::ExitStatus>> {
    if let Some(pid) = rustix::process::Pid::from_raw(c.id() as i32) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
    let deadline = Instant::now() + grace;
    loop {
        if let Some(st) = c.try_wait()? {
            return Ok(Some(st));
        }
        if Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = c.kill();
    c.wait()?;
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strs(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }

    #[test]
    fn service_args_table() {
        let peers = Peers {
            redis_url: "redis+unix:///r.sock".into(),
            storage: "http://s".into(),
            validation: "http://v".into(),
            registry: "http://r".into(),
        };
        let x = vec!["--x".to_string(), "1".to_string()];
        let cases: &[(Service, &str, &[String], &[&str])] = &[
            (
                Service::Storage,
                "127.0.0.1:0",
                &[],
                &[
                    "--listen",
                    "127.0.0.1:0",
                    "--redis-url",
                    "redis+unix:///r.sock",
                ],
            ),
            (
                Service::Validation,
                "127.0.0.1:0",
                &x,
                &["--listen", "127.0.0.1:0", "--x", "1"],
            ),
            (
                Service::Registry,
                "127.0.0.1:0",
                &[],
                &[
                    "--listen",
                    "127.0.0.1:0",
                    "--storage",
                    "http://s",
                    "--validation",
                    "http://v",
                ],
            ),
            (
                Service::Gateway,
                "0.0.0.0:6443",
                &x,
                &[
                    "--listen",
                    "0.0.0.0:6443",
                    "--storage",
                    "http://s",
                    "--validation",
                    "http://v",
                    "--registry",
                    "http://r",
                    "--x",
                    "1",
                ],
            ),
        ];
        for (s, listen, extra, want) in cases {
            assert_eq!(
                strs(&service_args(*s, listen, &peers, extra)),
                *want,
                "{s:?}"
            );
        }
    }

    #[test]
    fn redis_args_table() {
        let cases = [
            ("fsync", "yes", "always"),
            ("everysec", "yes", "everysec"),
            ("memory", "no", "always"),
        ];
        for (durability, appendonly, fsync) in cases {
            let a = redis_args(Path::new("/d/redis.sock"), Path::new("/d"), durability);
            let flag = |f: &str| {
                let i = a.iter().position(|x| x == f).expect(f);
                a[i + 1].clone()
            };
            assert_eq!(flag("--appendonly"), appendonly, "{durability}");
            assert_eq!(flag("--appendfsync"), fsync, "{durability}");
            assert_eq!(flag("--unixsocket"), "/d/redis.sock");
            assert_eq!(flag("--port"), "0");
            assert_eq!(flag("--save"), "");
        }
    }

    #[test]
    fn restarts_reuse_the_announced_address() {
        let args: Vec<String> = ["--listen", "127.0.0.1:0", "--redis-url", "x"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            with_listen(&args, "127.0.0.1:4321"),
            ["--listen", "127.0.0.1:4321", "--redis-url", "x"]
        );
    }

    #[test]
    fn builder_assembles_replicas_and_extra_flags() {
        let b = StackBuilder::new("/bin", "redis://x")
            .replicas(0, 3)
            .args(Service::Gateway, &["--a", "b"])
            .args(Service::Gateway, &["--c"])
            .durability("memory");
        assert_eq!((b.storages, b.gateways), (1, 3));
        assert_eq!(b.extra[Service::Gateway.index()], ["--a", "b", "--c"]);
        assert!(b.extra[Service::Storage.index()].is_empty());
        assert_eq!(
            StackBuilder::replica_name(Service::Gateway, 2, 3),
            "gateway-2"
        );
        assert_eq!(
            StackBuilder::replica_name(Service::Storage, 0, 1),
            "storage"
        );
        assert_eq!(b.gateway_extra(), ["--insecure-http", "--a", "b", "--c"]);
        let s = StackBuilder::new("/bin", "redis://x").scale(3);
        assert_eq!(
            (
                s.storages,
                s.validations,
                s.registries,
                s.gateways,
                s.spread
            ),
            (3, 3, 3, 3, true)
        );
        assert_eq!(StackBuilder::new("/bin", "redis://x").scale(0).storages, 1);
    }

    #[test]
    fn tls_gateways_get_the_pki_files_and_no_anonymous_requests() {
        let d = tempfile::tempdir().unwrap();
        let pki = Pki::ensure(d.path(), &[]).unwrap();
        let b = StackBuilder::new("/bin", "redis://x")
            .tls(&pki)
            .args(Service::Gateway, &["--default-tenant", "t"]);
        let p = |f: &str| d.path().join(f).to_string_lossy().into_owned();
        assert_eq!(
            b.gateway_extra(),
            [
                "--tls-cert-file".to_string(),
                p("apiserver.crt"),
                "--tls-private-key-file".into(),
                p("apiserver.key"),
                "--client-ca-file".into(),
                p("ca.crt"),
                "--anonymous-auth=false".into(),
                "--authorization-mode=RBAC".into(),
                "--service-account-issuer".into(),
                "https://kubernetes.default.svc.cluster.local".into(),
                "--service-account-key-file".into(),
                p("sa.pub"),
                "--service-account-signing-key-file".into(),
                p("sa.key"),
                "--encryption-provider-config".into(),
                p("encryption-config.yaml"),
                "--grpc-tls-ca-file".into(),
                p("services-ca.crt"),
                "--grpc-tls-cert-file".into(),
                p("services/gateway.crt"),
                "--grpc-tls-key-file".into(),
                p("services/gateway.key"),
                "--default-tenant".into(),
                "t".into(),
            ]
        );
        let t = b.tls.as_ref().unwrap();
        assert_eq!(t.client_cert_pem, pki.admin_cert_pem());
        assert!(!format!("{b:?}").contains("PRIVATE KEY"));
        crate::tls::client_config(&t.ca_pem, &t.client_cert_pem, &t.client_key_pem).unwrap();
        // Every other process kind gets its own pair of the services CA.
        let m = b.mtls.as_ref().unwrap();
        for s in [Service::Storage, Service::Validation, Service::Registry] {
            assert_eq!(
                m.args(s),
                [
                    "--grpc-tls-ca-file".to_string(),
                    p("services-ca.crt"),
                    "--grpc-tls-cert-file".into(),
                    p(&format!("services/{}.crt", s.name())),
                    "--grpc-tls-key-file".into(),
                    p(&format!("services/{}.key", s.name())),
                ]
            );
        }
        // Without TLS: no mutual TLS either.
        let plain = StackBuilder::new("/bin", "redis://x");
        assert!(plain.mtls.is_none());
        assert_eq!(plain.gateway_extra(), ["--insecure-http"]);
    }
}
