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
//! Faults: the children inherit a soft `RLIMIT_NOFILE` raised to the hard limit (as systemd
//! units of kube-apiserver set `LimitNOFILE`; a gateway with thousands of watch connections
//! must not stop at the common soft default of 1,024). A child that dies after startup is
//! restarted in place — services on the address they first announced, so the others' flags
//! stay valid — with a delay of 0.5 s doubling to 30 s while it keeps crashing, as a kubelet
//! restarts a crashed static-pod apiserver; nothing else is stopped. Every child gets a
//! parent-death signal ([`spawn`]), so killing the launcher (even with SIGKILL, even during
//! startup) stops them all.
//!
//! How the processes are started (order, flags, readiness) lives in [`stack`]'s
//! [`StackBuilder`], which the end-to-end test harness uses as well.

pub mod config;
pub mod spawn;
pub mod stack;

pub use stack::{RunningStack, Service, StackBuilder, with_listen};
use std::path::{Path, PathBuf};
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
    /// Tenant of requests without a `/clusters/<tenant>` prefix.
    pub default_tenant: String,
    /// When a write is acknowledged (`fsync`, `everysec`, `memory`; see the storage's
    /// `--durability`): sets the started Redis's `appendfsync` and is passed to the storage.
    pub durability: String,
}

/// The binaries of the stack live beside the launcher.
pub fn sibling(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from(name));
    exe.parent()
        .map(|d| d.join(name))
        .unwrap_or_else(|| PathBuf::from(name))
}

/// A kubeconfig YAML for kubectl and clients: one cluster at `server`, no credentials, namespace
/// `default`.
pub fn kubeconfig_yaml(server: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: crdplane\n  cluster:\n    server: {server}\ncontexts:\n- name: crdplane\n  context:\n    cluster: crdplane\n    user: crdplane\n    namespace: default\ncurrent-context: crdplane\nusers:\n- name: crdplane\n  user: {{}}\n"
    )
}

/// Blocking HTTP GET of `path` on `addr`; returns the status code.
pub fn http_status(addr: &str, path: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut buf = [0u8; 12];
    s.read_exact(&mut buf).ok()?;
    std::str::from_utf8(&buf[9..12]).ok()?.parse().ok()
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
    let mut builder = StackBuilder::new(bin_dir, cfg.redis_url.clone().unwrap_or_default())
        .durability(cfg.durability.clone())
        .gateway_listen(cfg.listen.clone())
        .args(Service::Gateway, &["--default-tenant", &cfg.default_tenant])
        .logs(&logs);
    if cfg.redis_url.is_none() {
        builder = builder.own_redis(data_dir.join("redis"));
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
    std::fs::write(&kubeconfig, kubeconfig_yaml(&server))?;
    println!("crdplane is up");
    println!("  gateway:    {server}");
    println!("  kubeconfig: {}", kubeconfig.display());
    println!(
        "  data:       {}  (logs in {})",
        data_dir.display(),
        logs.display()
    );
    println!();
    println!("Point kubectl at it:");
    println!("  export KUBECONFIG={}", kubeconfig.display());
    println!("  kubectl get namespaces");
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
