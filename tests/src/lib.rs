//! Test support for crdplane: real components only.
//!
//! - [`RedisServer`]: a private `redis-server` per test (own unix socket and data dir, no TCP
//!   port), stopped on drop; [`RedisCluster`]: a private Redis Cluster; [`TestRedis`]: either,
//!   as the environment asks.
//! - [`Stack`] and [`Replicas`]: the real service binaries (storage, validation, registry,
//!   gateway) started as processes by the launcher's [`StackBuilder`] (the one that
//!   `crdplane up` uses): each on `127.0.0.1:0`, its announced address passed on, waited on
//!   through `/readyz`, never on sleeps. Every child gets a parent-death signal, so a test
//!   process that dies leaves nothing running.
//! - [`kubectls`]: every real kubectl found on the machine.
//! - [`JwtKey`]: an ES256 key that signs OIDC test tokens, and the JWKS of such keys.

use crdplane::spawn::spawn_tied;
use crdplane::stack::{ChildSpec, Output};
pub use crdplane::{RunningStack, Service, StackBuilder};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A private redis-server, killed on drop.
pub struct RedisServer {
    child: Child,
    /// Data directory (AOF files and the socket), removed on drop.
    pub dir: tempfile::TempDir,
    /// Path of the unix socket redis-server listens on.
    pub socket: PathBuf,
}

impl RedisServer {
    /// Starts redis-server in a fresh temporary directory.
    pub fn start() -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        Self::start_in(dir)
    }

    /// Starts redis with AOF persistence in `dir` (so a restart on the same dir keeps data).
    pub fn start_in(dir: tempfile::TempDir) -> anyhow::Result<Self> {
        let socket = dir.path().join("redis.sock");
        let child = Self::spawn(dir.path(), &socket)?;
        let r = Self { child, dir, socket };
        r.wait_socket()?;
        Ok(r)
    }

    /// Stops redis-server as an operator would (SIGTERM: the AOF is flushed) and waits for
    /// it to exit; clients see their connections closed and new ones refused.
    pub fn stop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.socket);
    }

    /// Starts redis-server again on the same socket and data directory (after [`stop`]).
    ///
    /// [`stop`]: RedisServer::stop
    pub fn restart(&mut self) -> anyhow::Result<()> {
        let _ = std::fs::remove_file(&self.socket);
        self.child = Self::spawn(self.dir.path(), &self.socket)?;
        self.wait_socket()
    }

    /// Waits until redis-server answers PING on its socket. The socket file alone is not
    /// enough: it exists from `bind`, and a connect before `listen` (or while the AOF
    /// loads) is refused.
    fn wait_socket(&self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.answers_ping() {
            if Instant::now() > deadline {
                anyhow::bail!("redis-server did not answer PING on its socket");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    fn answers_ping(&self) -> bool {
        use std::io::{Read, Write};
        let Ok(mut c) = std::os::unix::net::UnixStream::connect(&self.socket) else {
            return false;
        };
        let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
        let mut buf = [0u8; 7];
        c.write_all(b"PING\r\n").is_ok() && c.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
    }

    fn spawn(dir: &Path, socket: &Path) -> anyhow::Result<Child> {
        // The launcher's flags for an own Redis (AOF, fsync always), quieter.
        let mut c = Command::new(redis_server_bin());
        c.args(crdplane::stack::redis_args(socket, dir, "fsync"))
            .args(["--loglevel", "warning"])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        spawn_tied(c).map_err(|e| {
            anyhow::anyhow!("cannot start redis-server (install Debian's redis-server): {e}")
        })
    }

    /// The `--redis-url` for the services (`redis+unix://<socket>`).
    pub fn url(&self) -> String {
        format!("redis+unix://{}", self.socket.display())
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A private Redis Cluster (the launcher's [`crdplane::cluster`]: masters with one replica
/// each on 127.0.0.1, password-protected), killed on drop.
pub struct RedisCluster {
    /// The cluster's nodes, ports and password.
    pub plan: crdplane::cluster::Plan,
    children: Vec<Option<Child>>,
    _dir: tempfile::TempDir,
}

impl RedisCluster {
    /// Starts `masters` masters and as many replicas, joined and `cluster_state:ok`.
    ///
    /// A node that exits while starting (its port was taken between choosing and binding it,
    /// by another test's node) makes it start over with new ports, up to three times.
    pub fn start(masters: usize) -> anyhow::Result<Self> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let dir = tempfile::tempdir()?;
            let plan = crdplane::cluster::Plan::in_dir(dir.path(), masters)?;
            let mut children = Vec::new();
            for node in &plan.nodes {
                children.push(Some(Self::spawn(node)?));
            }
            let mut cluster = Self {
                plan,
                children,
                _dir: dir,
            };
            match cluster.wait_listening(Duration::from_secs(30)) {
                Ok(()) => {}
                Err(e) if attempt < 3 => {
                    eprintln!("redis cluster: {e}; starting over with other ports");
                    continue;
                }
                Err(e) => return Err(e),
            }
            cluster.plan.form(Duration::from_secs(60))?;
            return Ok(cluster);
        }
    }

    /// Waits until every node answers PING; an error as soon as one has exited.
    fn wait_listening(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = std::time::Instant::now() + timeout;
        for i in 0..self.plan.nodes.len() {
            let port = self.plan.nodes[i].port;
            while !self
                .plan
                .cli(port, &["PING"])
                .is_ok_and(|o| o.trim() == "PONG")
            {
                if let Some(status) = self.children[i].as_mut().and_then(|c| c.try_wait().ok()?) {
                    anyhow::bail!("the node on port {port} exited ({status})");
                }
                anyhow::ensure!(
                    std::time::Instant::now() < deadline,
                    "the node on port {port} does not answer"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Ok(())
    }

    fn spawn(node: &crdplane::cluster::Node) -> anyhow::Result<Child> {
        let mut c = Command::new(redis_server_bin());
        c.args(crdplane::cluster::node_args(node, "fsync"))
            .args(["--loglevel", "warning"])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        Ok(spawn_tied(c)?)
    }

    fn index(&self, port: u16) -> usize {
        self.plan
            .nodes
            .iter()
            .position(|n| n.port == port)
            .expect("a node of this cluster")
    }

    /// The `--redis-url` for the storage: the seed list with the password.
    pub fn url(&self) -> String {
        self.plan.seed_url()
    }

    /// `redis-cli` against the node on `port`.
    pub fn cli(&self, port: u16, args: &[&str]) -> String {
        self.plan.cli(port, args).expect("redis-cli")
    }

    /// The ports of the nodes that are masters now.
    pub fn master_ports(&self) -> Vec<u16> {
        self.plan
            .nodes
            .iter()
            .zip(&self.children)
            .filter(|(_, c)| c.is_some())
            .map(|(n, _)| n.port)
            .filter(|&p| {
                self.plan
                    .cli(p, &["ROLE"])
                    .is_ok_and(|r| r.lines().next() == Some("master"))
            })
            .collect()
    }

    /// The port of the master serving `key`'s slot now.
    pub fn master_of(&self, key: &str) -> u16 {
        self.master_of_opt(key)
            .unwrap_or_else(|| panic!("no live master serves the slot of {key}"))
    }

    /// The port of the live master serving `key`'s slot, if one does (`None` during a
    /// failover).
    pub fn master_of_opt(&self, key: &str) -> Option<u16> {
        let any = self
            .plan
            .nodes
            .iter()
            .zip(&self.children)
            .find(|(_, c)| c.is_some())
            .map(|(n, _)| n.port)?;
        let slot: u16 = self
            .plan
            .cli(any, &["CLUSTER", "KEYSLOT", key])
            .ok()?
            .trim()
            .parse()
            .ok()?;
        self.master_ports()
            .into_iter()
            .find(|&p| self.owns(p, slot))
    }

    fn owns(&self, port: u16, slot: u16) -> bool {
        // `CLUSTER NODES` of the node itself: its own line carries `myself` and its ranges.
        let Ok(nodes) = self.plan.cli(port, &["CLUSTER", "NODES"]) else {
            return false;
        };
        let Some(me) = nodes.lines().find(|l| l.contains("myself")) else {
            return false;
        };
        me.split_whitespace().skip(8).any(|r| {
            let (a, b) = r.split_once('-').unwrap_or((r, r));
            match (a.parse::<u16>(), b.parse::<u16>()) {
                (Ok(a), Ok(b)) => (a..=b).contains(&slot),
                _ => false,
            }
        })
    }

    /// Starts the node on `port` again (after [`RedisCluster::kill`]), with its data and
    /// `nodes.conf`: it rejoins the cluster (a killed master comes back as a replica of the
    /// replica that took over).
    pub fn restart(&mut self, port: u16) -> anyhow::Result<()> {
        let i = self.index(port);
        self.children[i] = Some(Self::spawn(&self.plan.nodes[i])?);
        Ok(())
    }

    /// Moves hash slot `slot` with its keys to the master on `to` (upstream's resharding
    /// steps: IMPORTING / MIGRATING, MIGRATE of every key, SETSLOT NODE on every master).
    pub fn move_slot(&self, slot: u16, to: u16) {
        let m = self.begin_migration(slot, to);
        while self.migrate_keys(&m, 100) > 0 {}
        self.end_migration(&m);
    }

    /// Starts moving hash slot `slot` to the master on `to`: the target imports it, the
    /// owner marks it migrating. Until [`RedisCluster::end_migration`], a command on a key
    /// the owner no longer has is redirected with ASK, and one on several keys of which
    /// only some are still there fails with TRYAGAIN.
    pub fn begin_migration(&self, slot: u16, to: u16) -> Migration {
        let from = self
            .master_ports()
            .into_iter()
            .find(|&p| self.owns(p, slot))
            .expect("a master serves the slot");
        assert_ne!(from, to, "the slot is already there");
        let id = |p: u16| self.cli(p, &["CLUSTER", "MYID"]).trim().to_string();
        let m = Migration {
            slot: slot.to_string(),
            from,
            to,
            to_id: id(to),
        };
        self.cli(to, &["CLUSTER", "SETSLOT", &m.slot, "IMPORTING", &id(from)]);
        self.cli(
            from,
            &["CLUSTER", "SETSLOT", &m.slot, "MIGRATING", &m.to_id],
        );
        m
    }

    /// Moves up to `n` keys of the migrating slot to the target (MIGRATE); returns how
    /// many it moved (0: none left).
    pub fn migrate_keys(&self, m: &Migration, n: usize) -> usize {
        let count = n.to_string();
        let keys = self.cli(m.from, &["CLUSTER", "GETKEYSINSLOT", &m.slot, &count]);
        let keys: Vec<&str> = keys.lines().filter(|k| !k.is_empty()).collect();
        if keys.is_empty() {
            return 0;
        }
        let to_port = m.to.to_string();
        let mut args = vec![
            "MIGRATE",
            "127.0.0.1",
            &to_port,
            "",
            "0",
            "5000",
            "AUTH",
            &self.plan.password,
            "KEYS",
        ];
        args.extend(keys.iter().copied());
        self.cli(m.from, &args);
        keys.len()
    }

    /// Ends a migration: every master hears that the target owns the slot (keys the owner
    /// still had stay behind, unreachable: move them all first).
    pub fn end_migration(&self, m: &Migration) {
        for p in self.master_ports() {
            self.cli(p, &["CLUSTER", "SETSLOT", &m.slot, "NODE", &m.to_id]);
        }
    }

    /// The hash slot of `key` (`CLUSTER KEYSLOT`).
    pub fn slot_of(&self, key: &str) -> u16 {
        let any = self.master_ports()[0];
        self.cli(any, &["CLUSTER", "KEYSLOT", key])
            .trim()
            .parse()
            .expect("slot")
    }

    /// Waits until every replica of the master on `port` has received all of its writes
    /// (each replica's `offset` in `INFO replication` equals the master's
    /// `master_repl_offset`); panics after 10 s. For tests about something other than
    /// the default asynchronous replication, which a failover right after a write can
    /// otherwise lose (see the storage's `--wait-replicas`).
    pub fn wait_replicated(&self, port: u16) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let info = self.cli(port, &["INFO", "replication"]);
            let field = |name: &str| {
                info.lines()
                    .find_map(|l| l.trim().strip_prefix(name))
                    .map(str::to_string)
            };
            let master = field("master_repl_offset:").and_then(|v| v.parse::<u64>().ok());
            let replicas: Vec<Option<u64>> = info
                .lines()
                .filter(|l| l.starts_with("slave") && l.contains("offset="))
                .map(|l| {
                    l.split(',')
                        .find_map(|kv| kv.strip_prefix("offset="))
                        .and_then(|v| v.trim().parse().ok())
                })
                .collect();
            if let Some(m) = master
                && !replicas.is_empty()
                && replicas.iter().all(|r| *r == Some(m))
            {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the replicas of {port} did not catch up: {info}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `CLUSTER NODES` as a live node sees it, for a failing test's message.
    pub fn describe(&self) -> String {
        self.plan
            .nodes
            .iter()
            .zip(&self.children)
            .filter(|(_, c)| c.is_some())
            .find_map(|(n, _)| self.plan.cli(n.port, &["CLUSTER", "NODES"]).ok())
            .unwrap_or_else(|| "no live node answers".into())
    }

    /// Kills the node on `port` with SIGKILL (no AOF flush, no goodbye to its peers).
    pub fn kill(&mut self, port: u16) {
        let i = self.index(port);
        if let Some(mut c) = self.children[i].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for c in self.children.iter_mut().flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The Redis a storage test runs on: one `redis-server`, or a Redis Cluster of three masters
/// with a replica each when `CRDPLANE_TEST_REDIS=cluster` (`scripts/test.sh` runs the storage
/// suite both ways).
pub enum TestRedis {
    /// One server.
    Single(RedisServer),
    /// A cluster.
    Cluster(RedisCluster),
}

impl TestRedis {
    /// Starts the Redis the environment asks for.
    pub fn start() -> anyhow::Result<Self> {
        if std::env::var("CRDPLANE_TEST_REDIS").as_deref() == Ok("cluster") {
            Ok(Self::Cluster(RedisCluster::start(3)?))
        } else {
            Ok(Self::Single(RedisServer::start()?))
        }
    }

    /// The storage's `--redis-url`.
    pub fn url(&self) -> String {
        match self {
            Self::Single(r) => r.url(),
            Self::Cluster(c) => c.url(),
        }
    }

    /// One keyed `redis-cli` command (on a cluster: sent to the key's master, `-c`).
    pub fn cli(&self, args: &[&str]) -> String {
        let mut c = Command::new(crdplane::cluster::cli_bin());
        match self {
            Self::Single(r) => {
                c.arg("-s").arg(&r.socket);
            }
            Self::Cluster(cl) => {
                c.args(["-c", "-h", "127.0.0.1", "-p"])
                    .arg(cl.plan.nodes[0].port.to_string())
                    .env("REDISCLI_AUTH", &cl.plan.password);
            }
        }
        let out = c.args(args).output().expect("redis-cli");
        assert!(out.status.success(), "redis-cli {args:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A keyless `redis-cli` command on the server (on a cluster: on every master).
    pub fn on_all(&self, args: &[&str]) {
        match self {
            Self::Single(_) => {
                self.cli(args);
            }
            Self::Cluster(cl) => {
                for p in cl.master_ports() {
                    cl.cli(p, args);
                }
            }
        }
    }

    /// Every key matching `pattern` (`redis-cli --scan`; on a cluster, on every master),
    /// sorted.
    pub fn scan(&self, pattern: &str) -> Vec<String> {
        let mut keys: Vec<String> = match self {
            Self::Single(_) => self.cli(&["--scan", "--pattern", pattern]),
            Self::Cluster(cl) => cl
                .master_ports()
                .into_iter()
                .map(|p| cl.cli(p, &["--scan", "--pattern", pattern]))
                .collect(),
        }
        .lines()
        .map(str::to_string)
        .collect();
        keys.sort();
        keys
    }
}

/// The redis-server binary to run: `$CRDPLANE_REDIS_SERVER` if set, else `redis-server` on
/// PATH.
pub fn redis_server_bin() -> String {
    crdplane::stack::redis_server_bin()
}

/// The directory holding the binaries the tests start: `$CRDPLANE_BIN_DIR` if set (e.g. the
/// release binaries, to measure with a test), else the target directory of this test build.
pub fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CRDPLANE_BIN_DIR") {
        return PathBuf::from(dir);
    }
    // tests run from target/<profile>/deps/<test-binary>
    let exe = std::env::current_exe().expect("current exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("target profile dir")
        .to_path_buf()
}

/// Path of the binary `name` (e.g. `crdplane-gateway`) in [`bin_dir`].
pub fn bin(name: &str) -> PathBuf {
    bin_dir().join(name)
}

/// A free loopback port (bound, then released for a child to bind).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// Starts a service binary and returns the URL it announced (`listening on http://ADDR`).
/// The child is pushed to `children` once it announced (one that fails is stopped). A
/// gateway gets `--insecure-http` unless its flags choose TLS or plain HTTP themselves, and
/// `--tenant-creation=on-first-use` unless they choose.
pub fn spawn_service(
    children: &mut Vec<Child>,
    name: &str,
    args: &[&str],
) -> anyhow::Result<String> {
    let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    // A gateway serves plain HTTP only when told so (the harness's clients speak it).
    if name == "crdplane-gateway"
        && !args
            .iter()
            .any(|a| a == "--insecure-http" || a == "--tls-cert-file")
    {
        args.push("--insecure-http".into());
    }
    // As [`Stack::builder`]: the suites address tenants by made-up names.
    if name == "crdplane-gateway" && !args.iter().any(|a| a.starts_with("--tenant-creation")) {
        args.push("--tenant-creation=on-first-use".into());
    }
    let spec = ChildSpec {
        name: name.to_string(),
        bin: bin(name),
        args,
        envs: Vec::new(),
        announces: true,
        output: Output::Inherit,
    };
    let (child, url) = spec.spawn().map_err(|e| {
        anyhow::anyhow!(
            "{e} (binaries from {}: build the workspace binaries first)",
            bin_dir().display()
        )
    })?;
    children.push(child);
    Ok(url.unwrap_or_default())
}

/// The whole stack as real processes on one Redis, started by the launcher's
/// [`StackBuilder`].
pub struct Stack {
    /// The children (dropped, i.e. killed, before `redis`).
    inner: RunningStack,
    /// Base URL of the gateway (the Kubernetes API endpoint), `http://127.0.0.1:PORT`.
    pub gateway: String,
    /// gRPC URL of the storage service.
    pub storage: String,
    /// gRPC URL of the validation service.
    pub validation: String,
    /// gRPC URL of the registry service.
    pub registry: String,
    /// The private Redis when the stack started its own (`start_with_redis*`); None when it
    /// was given a `redis_url`.
    pub redis: Option<RedisServer>,
    /// A kubeconfig whose current context points at the gateway (no credentials).
    pub kubeconfig: PathBuf,
    /// HOME for the clients run against the stack (holds `kubeconfig` and kubectl's cache).
    pub home: tempfile::TempDir,
}

impl Stack {
    /// A [`StackBuilder`] for the binaries in [`bin_dir`] on `redis_url`.
    pub fn builder(redis_url: &str) -> StackBuilder {
        Self::explicit_tenants_builder(redis_url)
            .args(Service::Gateway, &["--tenant-creation=on-first-use"])
    }

    /// A builder of the stack as an operator runs it: tenants exist only once created in
    /// the admin scope (the suites' usual [`Stack::builder`] creates a tenant on its first
    /// request, as they address tenants by made-up names).
    pub fn explicit_tenants_builder(redis_url: &str) -> StackBuilder {
        StackBuilder::new(bin_dir(), redis_url)
    }

    /// Starts the stack `builder` describes and waits until it is ready; `redis` is the
    /// private Redis it runs on, if any (kept with the stack).
    pub fn start_from(builder: StackBuilder, redis: Option<RedisServer>) -> anyhow::Result<Self> {
        let inner = builder.start()?;
        let home = tempfile::tempdir()?;
        let kubeconfig = home.path().join("kubeconfig");
        std::fs::write(&kubeconfig, kubeconfig_yaml(inner.gateway(), "crdplane"))?;
        Ok(Self {
            gateway: inner.gateway().to_string(),
            storage: inner.storages[0].clone(),
            validation: inner.validation.clone(),
            registry: inner.registry.clone(),
            inner,
            redis,
            kubeconfig,
            home,
        })
    }

    /// Starts a private Redis and the stack `configure` makes of the default builder on it.
    pub fn start_with_redis_using(
        configure: impl FnOnce(StackBuilder) -> StackBuilder,
    ) -> anyhow::Result<Self> {
        let redis = RedisServer::start()?;
        Self::start_from(configure(Self::builder(&redis.url())), Some(redis))
    }

    /// Starts storage, validation, registry and gateway against `redis_url`, each on
    /// `127.0.0.1:0`, in dependency order, reading each one's announced address.
    pub fn start(redis_url: &str) -> anyhow::Result<Self> {
        Self::start_from(Self::builder(redis_url), None)
    }

    /// As [`Stack::start`], with extra flags for the storage service (e.g. a tiny
    /// `--history-len` to reach 410 Expired quickly).
    pub fn start_with_storage_args(redis_url: &str, storage_args: &[&str]) -> anyhow::Result<Self> {
        Self::start_with_all_args(redis_url, storage_args, &[], &[])
    }

    /// As [`Stack::start`], with extra flags for the storage service and for the gateway
    /// (e.g. `--max-watches-per-client 2`).
    pub fn start_with_args(
        redis_url: &str,
        storage_args: &[&str],
        gateway_args: &[&str],
    ) -> anyhow::Result<Self> {
        Self::start_with_all_args(redis_url, storage_args, gateway_args, &[])
    }

    /// As [`Stack::start_with_args`], with extra registry flags as well.
    pub fn start_with_all_args(
        redis_url: &str,
        storage_args: &[&str],
        gateway_args: &[&str],
        registry_args: &[&str],
    ) -> anyhow::Result<Self> {
        let b = Self::builder(redis_url)
            .args(Service::Storage, storage_args)
            .args(Service::Gateway, gateway_args)
            .args(Service::Registry, registry_args);
        Self::start_from(b, None)
    }

    /// Starts a private Redis and the stack on it.
    pub fn start_with_redis() -> anyhow::Result<Self> {
        Self::start_with_redis_using(|b| b)
    }

    /// Starts a private Redis and the stack on it, with extra storage flags.
    pub fn start_with_redis_and(storage_args: &[&str]) -> anyhow::Result<Self> {
        Self::start_with_redis_using(|b| b.args(Service::Storage, storage_args))
    }

    /// Starts a private Redis and the stack on it, with extra gateway flags.
    pub fn start_with_redis_and_gateway_args(gateway_args: &[&str]) -> anyhow::Result<Self> {
        Self::start_with_redis_using(|b| b.args(Service::Gateway, gateway_args))
    }

    /// Starts a private Redis and the stack on it, with extra registry flags (e.g. a short
    /// `--gc-resync-period`).
    pub fn start_with_redis_and_registry_args(registry_args: &[&str]) -> anyhow::Result<Self> {
        Self::start_with_redis_using(|b| b.args(Service::Registry, registry_args))
    }

    /// The started processes (kill, restart in place, add replicas, pids).
    pub fn processes(&mut self) -> &mut RunningStack {
        &mut self.inner
    }

    /// Kills the registry with SIGKILL and starts a new one on the same address (the
    /// gateway keeps its endpoint), e.g. to check that background work survives.
    pub fn kill_and_restart_registry(&mut self) -> anyhow::Result<()> {
        let i = self.inner.index("registry").expect("the registry");
        self.registry = self.inner.respawn(i, Duration::from_secs(30))?;
        Ok(())
    }

    /// Starts one more registry replica on the stack's storage and validation, its log
    /// (stderr) written to `log`; returns its index for [`Stack::kill_child`].
    pub fn add_registry(&mut self, log: &Path) -> anyhow::Result<usize> {
        self.add_registry_with(log, &[], &[])
    }

    /// As [`Stack::add_registry`], with extra flags and environment variables (e.g.
    /// `RUST_LOG`) for the new replica.
    pub fn add_registry_with(
        &mut self,
        log: &Path,
        args: &[&str],
        envs: &[(&str, &str)],
    ) -> anyhow::Result<usize> {
        let (i, _) = self.inner.add(Service::Registry, args, envs, Some(log))?;
        Ok(i)
    }

    /// Kills (SIGKILL) a process started by [`Stack::add_registry`].
    pub fn kill_child(&mut self, i: usize) -> anyhow::Result<()> {
        Ok(self.inner.kill(i)?)
    }

    /// Waits until the gateway's `/readyz` answers 200, or fails after `timeout`.
    pub fn wait_ready(&self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok((200, _)) = http_get(&format!("{}/readyz", self.gateway)) {
                return Ok(());
            }
            if Instant::now() > deadline {
                anyhow::bail!("stack not ready after {timeout:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Points the stack's kubeconfig at its HTTPS gateway as the admin of `pki`: it trusts
    /// the PKI's CA and holds the admin's client certificate (a stack started with
    /// `StackBuilder::tls(pki)`).
    pub fn use_admin_kubeconfig(&self, pki: &crdplane::Pki) {
        std::fs::write(
            &self.kubeconfig,
            crdplane::kubeconfig_yaml_tls(
                &self.gateway,
                pki.ca_pem(),
                pki.admin_cert_pem(),
                pki.admin_key_pem(),
            ),
        )
        .expect("write the admin kubeconfig");
    }

    /// Runs `kubectl` (the given binary) against this stack with a private HOME.
    pub fn kubectl(&self, kubectl: &Path, args: &[&str]) -> KubectlOutput {
        self.kubectl_stdin(kubectl, args, None)
    }

    /// As [`Stack::kubectl`], with `stdin` (e.g. a manifest for `apply -f -`) on its input.
    pub fn kubectl_stdin(
        &self,
        kubectl: &Path,
        args: &[&str],
        stdin: Option<&str>,
    ) -> KubectlOutput {
        use std::io::Write;
        let mut c = Command::new(kubectl);
        c.args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", self.home.path())
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().expect("spawn kubectl");
        if let Some(s) = stdin {
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(s.as_bytes())
                .expect("write stdin");
        }
        let o = child.wait_with_output().expect("kubectl output");
        KubectlOutput {
            ok: o.status.success(),
            code: o.status.code(),
            stdout: String::from_utf8_lossy(&o.stdout).into(),
            stderr: String::from_utf8_lossy(&o.stderr).into(),
        }
    }
}

/// What a kubectl run printed, and whether it exited 0.
#[derive(Debug)]
pub struct KubectlOutput {
    /// kubectl exited with status 0.
    pub ok: bool,
    /// Its exit status (`None`: ended by a signal); `kubectl diff` exits 1 when it found
    /// differences.
    pub code: Option<i32>,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error (kubectl prints server errors here, e.g. `Error from server ...`).
    pub stderr: String,
}

/// A kubeconfig (YAML) with one cluster, context and user, all named `name`, for `server`
/// without TLS or credentials; namespace `default`.
pub fn kubeconfig_yaml(server: &str, name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: {server}\ncontexts:\n- name: {name}\n  context:\n    cluster: {name}\n    user: {name}\n    namespace: default\ncurrent-context: {name}\nusers:\n- name: {name}\n  user: {{}}\n"
    )
}

/// A minimal blocking HTTP/1.1 GET (no client crate needed for readiness polling).
pub fn http_get(url: &str) -> std::io::Result<(u16, String)> {
    http_request("GET", url, None, None)
}

/// A minimal blocking HTTP/1.1 request (`Connection: close`) with an optional body and
/// `Content-Type`; returns the status and the (de-chunked) body.
pub fn http_request(
    method: &str,
    url: &str,
    content_type: Option<&str>,
    body: Option<&str>,
) -> std::io::Result<(u16, String)> {
    use std::io::{Read, Write};
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| std::io::Error::other("http only"))?;
    let (host, path) = rest
        .split_once('/')
        .map(|(h, p)| (h, format!("/{p}")))
        .unwrap_or((rest, "/".into()));
    let mut s = std::net::TcpStream::connect(host)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let body = body.unwrap_or("");
    let ct = content_type
        .map(|c| format!("Content-Type: {c}\r\n"))
        .unwrap_or_default();
    // A server may answer (e.g. 413) and close before the whole body is written: still read
    // its response.
    let _ = write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\n{ct}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let (code, _, body) = split_response(&buf);
    Ok((code, body))
}

/// Status code, head and (de-chunked) body of a whole HTTP/1.1 response.
fn split_response(buf: &[u8]) -> (u16, String, String) {
    let text = String::from_utf8_lossy(buf).into_owned();
    let code = text.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    (code, head.to_string(), body)
}

/// What an HTTPS client of the gateway trusts and presents: the CA of the serving
/// certificate and, optionally, a client certificate and key (PEM).
#[derive(Clone)]
pub struct TlsClient {
    config: std::sync::Arc<rustls::ClientConfig>,
}

impl TlsClient {
    /// A client of `pki`'s admin: its client certificate, trusting the PKI's CA.
    pub fn admin(pki: &crdplane::Pki) -> Self {
        Self::new(
            pki.ca_pem(),
            Some((pki.admin_cert_pem(), pki.admin_key_pem())),
        )
        .expect("the admin's TLS client")
    }

    /// A client trusting `ca_pem`, presenting `client` (certificate, key) if given.
    pub fn new(ca_pem: &str, client: Option<(&str, &str)>) -> anyhow::Result<Self> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            roots.add(c?)?;
        }
        let b = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots);
        let mut config = match client {
            Some((cert, key)) => b.with_client_auth_cert(
                CertificateDer::pem_slice_iter(cert.as_bytes()).collect::<Result<_, _>>()?,
                PrivateKeyDer::from_pem_slice(key.as_bytes())?,
            )?,
            None => b.with_no_client_auth(),
        };
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            config: std::sync::Arc::new(config),
        })
    }

    /// The certificate (DER) the server at `url` (`https://IP:PORT…`) serves now, from a
    /// fresh handshake.
    pub fn server_certificate(&self, url: &str) -> anyhow::Result<Vec<u8>> {
        let rest = url
            .strip_prefix("https://")
            .ok_or_else(|| anyhow::anyhow!("https only: {url}"))?;
        let host = rest.split('/').next().unwrap_or(rest);
        let addr: std::net::SocketAddr = host.parse()?;
        let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
        let mut conn = rustls::ClientConnection::new(self.config.clone(), name)?;
        let mut sock = std::net::TcpStream::connect(addr)?;
        sock.set_read_timeout(Some(Duration::from_secs(30)))?;
        while conn.is_handshaking() {
            conn.complete_io(&mut sock)?;
        }
        let leaf = conn
            .peer_certificates()
            .and_then(|c| c.first())
            .ok_or_else(|| anyhow::anyhow!("no server certificate"))?;
        Ok(leaf.to_vec())
    }

    /// A blocking HTTP/1.1 request over TLS (`Connection: close`) to `url`
    /// (`https://IP:PORT/path`) with extra header lines; returns the status, the response
    /// head and the (de-chunked) body.
    pub fn request(
        &self,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> anyhow::Result<(u16, String, String)> {
        use std::io::{Read, Write};
        let rest = url
            .strip_prefix("https://")
            .ok_or_else(|| anyhow::anyhow!("https only: {url}"))?;
        let (host, path) = rest
            .split_once('/')
            .map(|(h, p)| (h, format!("/{p}")))
            .unwrap_or((rest, "/".into()));
        let addr: std::net::SocketAddr = host.parse()?;
        let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
        let conn = rustls::ClientConnection::new(self.config.clone(), name)?;
        let sock = std::net::TcpStream::connect(addr)?;
        sock.set_read_timeout(Some(Duration::from_secs(30)))?;
        let mut s = rustls::StreamOwned::new(conn, sock);
        let body = body.unwrap_or("");
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {}\r\nConnection: close\r\n",
            body.len()
        );
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        s.write_all(head.as_bytes())?;
        s.write_all(body.as_bytes())?;
        s.flush()?;
        let mut buf = Vec::new();
        // A peer that closes without close_notify still gave us its whole response.
        if let Err(e) = s.read_to_end(&mut buf)
            && buf.is_empty()
        {
            return Err(e.into());
        }
        Ok(split_response(&buf))
    }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// The column names of a `meta.k8s.io` Table, in order.
pub fn column_names(table: &serde_json::Value) -> Vec<&str> {
    table["columnDefinitions"]
        .as_array()
        .map(|cols| cols.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default()
}

/// A plain REST client of one gateway: `base` is the gateway's URL, with a
/// `/clusters/<tenant>` prefix for another tenant. Every call answers the status code and the
/// body as JSON (a body that is not JSON comes back as a JSON string).
#[derive(Debug, Clone)]
pub struct Rest {
    /// URL the request paths are appended to.
    pub base: String,
}

impl Rest {
    /// A client of `base`.
    pub fn new(base: impl Into<String>) -> Self {
        Self { base: base.into() }
    }
    /// One request: `method path` with an optional content type and body.
    pub fn call(
        &self,
        method: &str,
        path: &str,
        ct: Option<&str>,
        body: Option<&str>,
    ) -> (u16, serde_json::Value) {
        let (code, text) =
            http_request(method, &format!("{}{path}", self.base), ct, body).expect("http");
        let v = serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text));
        (code, v)
    }
    /// GET `path`.
    pub fn get(&self, path: &str) -> (u16, serde_json::Value) {
        self.call("GET", path, None, None)
    }
    /// `method path` with `body` sent as `ct`.
    pub fn send(
        &self,
        method: &str,
        path: &str,
        ct: &str,
        body: &serde_json::Value,
    ) -> (u16, serde_json::Value) {
        self.call(method, path, Some(ct), Some(&body.to_string()))
    }
    /// `method path` with a JSON body.
    pub fn json(
        &self,
        method: &str,
        path: &str,
        body: &serde_json::Value,
    ) -> (u16, serde_json::Value) {
        self.send(method, path, "application/json", body)
    }
    /// A JSON merge patch of `path`.
    pub fn merge(&self, path: &str, body: &serde_json::Value) -> (u16, serde_json::Value) {
        self.send("PATCH", path, "application/merge-patch+json", body)
    }
}

/// Every real kubectl on this machine: `$CRDPLANE_KUBECTLS` (colon-separated) if set, else
/// the versioned binaries beside the dispatcher (`kubectl.1.N`) and an extracted Debian 1.20
/// at `.tools/kubectl-1.20/usr/bin/kubectl` (see `.ci/run`).
pub fn kubectls() -> Vec<PathBuf> {
    if let Ok(list) = std::env::var("CRDPLANE_KUBECTLS") {
        return list
            .split(':')
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
            .collect();
    }
    let mut out = Vec::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace")
        .to_path_buf();
    let k120 = root.join(".tools/kubectl-1.20/usr/bin/kubectl");
    if k120.exists() {
        out.push(k120);
    }
    if let Ok(rd) = std::fs::read_dir("/usr/lib/google-cloud-sdk/bin") {
        let mut v: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("kubectl.1."))
            })
            .collect();
        v.sort();
        out.extend(v);
    }
    out
}

// ---- watch fan-out / multi-replica support (appended) -----------------------------------

/// An HTTP watch (`?watch=1…`) read event by event on a background thread.
pub struct WatchStream {
    rx: std::sync::mpsc::Receiver<serde_json::Value>,
    socket: std::net::TcpStream,
    /// Set when the chunked body ended with its last chunk (a clean end, not a cut).
    clean: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// HTTP status of the response.
    pub status: u16,
    /// `Content-Type` of the response.
    pub content_type: String,
}

impl WatchStream {
    /// Opens `url` (http only) with an optional Accept header and waits for the headers.
    pub fn open(url: &str, accept: Option<&str>) -> std::io::Result<Self> {
        use std::io::{BufRead, BufReader, Read, Write};
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| std::io::Error::other("http only"))?;
        let (host, path) = rest
            .split_once('/')
            .map(|(h, p)| (h, format!("/{p}")))
            .unwrap_or((rest, "/".into()));
        let mut s = std::net::TcpStream::connect(host)?;
        let accept = accept
            .map(|a| format!("Accept: {a}\r\n"))
            .unwrap_or_default();
        write!(s, "GET {path} HTTP/1.1\r\nHost: {host}\r\n{accept}\r\n")?;
        let socket = s.try_clone()?;
        let mut r = BufReader::new(s);
        let mut status_line = String::new();
        r.read_line(&mut status_line)?;
        let status = status_line
            .get(9..12)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let (mut chunked, mut content_type, mut length) = (false, String::new(), None);
        loop {
            let mut h = String::new();
            if r.read_line(&mut h)? == 0 || h == "\r\n" {
                break;
            }
            let lower = h.to_ascii_lowercase();
            if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
                chunked = true;
            }
            if let Some(v) = lower.strip_prefix("content-type:") {
                content_type = v.trim().to_string();
            }
            if let Some(v) = lower.strip_prefix("content-length:") {
                length = v.trim().parse::<usize>().ok();
            }
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let clean = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let last_chunk = clean.clone();
        std::thread::spawn(move || {
            let mut pending = Vec::new();
            let emit = |pending: &mut Vec<u8>| {
                while let Some(i) = pending.iter().position(|&b| b == b'\n') {
                    let line: Vec<u8> = pending.drain(..=i).collect();
                    if let Ok(v) = serde_json::from_slice(&line)
                        && tx.send(v).is_err()
                    {
                        return false;
                    }
                }
                true
            };
            if !chunked {
                let mut body = Vec::new();
                let _ = match length {
                    Some(n) => r.by_ref().take(n as u64).read_to_end(&mut body),
                    None => r.read_to_end(&mut body),
                };
                body.push(b'\n');
                emit(&mut body);
                return;
            }
            loop {
                let mut size = String::new();
                if r.read_line(&mut size).unwrap_or(0) == 0 {
                    break;
                }
                let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
                    break;
                };
                if n == 0 {
                    last_chunk.store(true, std::sync::atomic::Ordering::SeqCst);
                    break;
                }
                let mut chunk = vec![0; n + 2];
                if r.read_exact(&mut chunk).is_err() {
                    break;
                }
                chunk.truncate(n);
                pending.extend_from_slice(&chunk);
                if !emit(&mut pending) {
                    break;
                }
            }
        });
        Ok(Self {
            rx,
            socket,
            clean,
            status,
            content_type,
        })
    }

    /// The next event, or None when none arrives within `timeout` or the stream ended.
    pub fn next(&self, timeout: Duration) -> Option<serde_json::Value> {
        self.rx.recv_timeout(timeout).ok()
    }

    /// Events until `n` arrived or `timeout` passed since the call.
    pub fn take(&self, n: usize, timeout: Duration) -> Vec<serde_json::Value> {
        let deadline = Instant::now() + timeout;
        let mut out = Vec::new();
        while out.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(v) => out.push(v),
                Err(_) => break,
            }
        }
        out
    }

    /// The next event within `timeout`: `Err(true)` when the stream ended, `Err(false)` when
    /// nothing arrived in time.
    pub fn poll(&self, timeout: Duration) -> Result<serde_json::Value, bool> {
        self.rx
            .recv_timeout(timeout)
            .map_err(|e| matches!(e, std::sync::mpsc::RecvTimeoutError::Disconnected))
    }

    /// True when the server ended the stream within `timeout` with the chunked body's last
    /// chunk, as a watch that times out or a stopping server ends it (a cut connection is
    /// not a clean end).
    pub fn ended_cleanly(&self, timeout: Duration) -> bool {
        self.ended(timeout) && self.clean.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// True when the server ended the stream (no more events will come).
    pub fn ended(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(_) => continue,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return true,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => return false,
            }
        }
    }
}

impl Drop for WatchStream {
    fn drop(&mut self) {
        let _ = self.socket.shutdown(std::net::Shutdown::Both);
    }
}

/// Several storage and gateway replicas on one Redis (plus one registry and validation).
/// Gateway `i` talks to storage `i % storages`. A storage replica is restarted in place, on
/// the address it announced ([`Replicas::restart_storage`]).
pub struct Replicas {
    /// The children (dropped, i.e. killed, before `redis`).
    inner: RunningStack,
    /// gRPC URLs of the storage replicas.
    pub storages: Vec<String>,
    /// Base URLs of the gateway replicas.
    pub gateways: Vec<String>,
    /// gRPC URL of the registry service.
    pub registry: String,
    /// gRPC URL of the validation service.
    pub validation: String,
    /// The private Redis all replicas share.
    pub redis: Option<RedisServer>,
}

impl Replicas {
    /// Starts a private Redis, `storages` storage and `gateways` gateway replicas (at least
    /// one each), and waits until every gateway is ready.
    pub fn start(storages: usize, gateways: usize) -> anyhow::Result<Self> {
        let redis = RedisServer::start()?;
        let inner = Stack::builder(&redis.url())
            .replicas(storages, gateways)
            .start()?;
        Ok(Self {
            storages: inner.storages.clone(),
            gateways: inner.gateways.clone(),
            registry: inner.registry.clone(),
            validation: inner.validation.clone(),
            inner,
            redis: Some(redis),
        })
    }

    /// Kills storage replica `i` and starts it again on the same address.
    pub fn restart_storage(&mut self, i: usize) -> anyhow::Result<()> {
        let name = if self.storages.len() == 1 {
            "storage".to_string()
        } else {
            format!("storage-{i}")
        };
        let idx = self.inner.index(&name).expect("a storage replica");
        self.inner.respawn(idx, Duration::from_secs(20))?;
        Ok(())
    }
}

/// (interpreter, its `kubernetes` client version) for each distinct Python interpreter that
/// has the client: Debian's python3-kubernetes 22.6 for /usr/bin/python3 and the newest pip
/// release for the `python3` on PATH (both installed by scripts/deps.sh --test).
pub fn python_interpreters() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for py in ["/usr/bin/python3", "python3"] {
        let Ok(o) = Command::new(py)
            .args([
                "-c",
                "import sys, kubernetes; print(sys.executable, kubernetes.__version__)",
            ])
            .output()
        else {
            continue;
        };
        if !o.status.success() {
            continue;
        }
        let s = String::from_utf8_lossy(&o.stdout).trim().to_string();
        let Some((exe, ver)) = s.rsplit_once(' ') else {
            continue;
        };
        if !out.iter().any(|(e, _)| e == exe) {
            out.push((exe.to_string(), ver.to_string()));
        }
    }
    if !out.iter().any(|(_, v)| v.starts_with("22.")) {
        eprintln!(
            "note: Debian's python3-kubernetes 22.6 is not installed (scripts/deps.sh --test)"
        );
    }
    out
}

/// Runs the Python client script `tests/python/<script>` with interpreter `py` (client
/// version `ver`) against `server` (a gateway URL, usually with a `/clusters/<name>` tenant
/// prefix); panics with its output unless it exits 0 and prints `all checks passed`.
pub fn run_python_checks(py: &str, ver: &str, script: &str, server: &str) -> String {
    let path = format!("{}/python/{script}", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(py).arg(&path).arg(server).output().unwrap();
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success() && o.contains("all checks passed"),
        "{py} (kubernetes {ver}) {script}:\n{o}{e}"
    );
    o.into_owned()
}

/// One HTTP/1.1 exchange returning status, raw response head and (de-chunked) body.
pub fn exchange(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String, String) {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").expect("http url");
    let (host, path) = rest
        .split_once('/')
        .map(|(h, p)| (h, format!("/{p}")))
        .unwrap_or((rest, "/".into()));
    let mut s = std::net::TcpStream::connect(host).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf).into_owned();
    let code = text.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        let mut out = String::new();
        let mut rest = body;
        while let Some((size, r)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if n == 0 || r.len() < n {
                break;
            }
            out.push_str(&r[..n]);
            rest = r[n..].trim_start_matches("\r\n");
        }
        out
    } else {
        body.to_string()
    };
    (code, head.to_string(), body)
}

// ---- OIDC test tokens ---------------------------------------------------------------------

/// An ES256 (ECDSA P-256) signing key of a test OIDC issuer, with its JWK (`kid` as given).
pub struct JwtKey {
    enc: jsonwebtoken::EncodingKey,
    /// The key id its tokens carry.
    pub kid: String,
    /// The public key as a JWK (`kty` EC, `alg` ES256, `use` sig).
    pub jwk: serde_json::Value,
}

impl JwtKey {
    /// A fresh key named `kid`.
    pub fn new(kid: &str) -> Self {
        use base64::Engine;
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let kp = rcgen::KeyPair::generate().expect("an ECDSA P-256 key");
        // SEC1 uncompressed point: 0x04 || x || y.
        let raw = kp.public_key_raw();
        Self {
            enc: jsonwebtoken::EncodingKey::from_ec_pem(kp.serialize_pem().as_bytes())
                .expect("rcgen writes PKCS#8 PEM"),
            kid: kid.into(),
            jwk: serde_json::json!({"kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256",
                "kid": kid, "x": b64.encode(&raw[1..33]), "y": b64.encode(&raw[33..])}),
        }
    }

    /// A compact JWT of `claims`, signed with this key (header `alg` ES256 and `kid`).
    pub fn sign(&self, claims: &serde_json::Value) -> String {
        let mut h = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        h.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&h, claims, &self.enc).expect("signing a test token")
    }
}

/// The JWKS document (`{"keys": [...]}`) of `keys`.
pub fn jwks(keys: &[&JwtKey]) -> String {
    serde_json::json!({"keys": keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>()}).to_string()
}

/// The current Unix time in seconds (for `iat`, `nbf`, `exp`).
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default()
}

/// Path of the CronTab CRD's collection (`crontabs.stable.example.com`).
pub const CRDS_PATH: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
/// Path of the CronTabs of namespace `default`.
pub const CRONTABS_PATH: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";

/// A CronTab named `name` whose `spec.image` is `image`.
pub fn crontab(name: &str, image: &str) -> serde_json::Value {
    serde_json::json!({"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":name},"spec":{"image":image}})
}

/// Creates the CronTab CRD (one version, no schema beyond preserve-unknown-fields) on the
/// gateway at `gw` and then `first` in namespace `default`, retried until the new resource
/// is served (at most 30 s). Returns the body of that create (the object as stored).
pub fn serve_crontabs(gw: &str, first: &serde_json::Value) -> String {
    let crd = serde_json::json!({"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"crontabs.stable.example.com"},
        "spec":{"group":"stable.example.com","scope":"Namespaced","names":{"plural":"crontabs","kind":"CronTab"},
        "versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}});
    let (code, body) = http_request(
        "POST",
        &format!("{gw}{CRDS_PATH}"),
        Some("application/json"),
        Some(&crd.to_string()),
    )
    .expect("create the CRD");
    assert_eq!(code, 201, "{body}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, body) = http_request(
            "POST",
            &format!("{gw}{CRONTABS_PATH}"),
            Some("application/json"),
            Some(&first.to_string()),
        )
        .expect("create the first CronTab");
        if code == 201 {
            return body;
        }
        assert!(Instant::now() < deadline, "{code} {body}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A hash slot being moved between masters ([`RedisCluster::begin_migration`]).
#[derive(Debug)]
pub struct Migration {
    slot: String,
    from: u16,
    to: u16,
    to_id: String,
}
