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
//! restarts a crashed static-pod apiserver; nothing else is stopped.
#![warn(missing_docs, unreachable_pub)]

pub mod config;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

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

/// How to (re)start one child.
struct Spec {
    name: &'static str,
    bin: PathBuf,
    args: Vec<String>,
    /// A crdplane service that prints `listening on http://ADDR` (else: redis).
    announces: bool,
}

struct Proc {
    spec: Spec,
    /// None while a restart is pending.
    child: Option<Child>,
    started: Instant,
    /// Delay before the next restart, and when it is due.
    delay: Duration,
    due: Option<Instant>,
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

/// `args` with the value of `--listen` replaced by `addr`.
pub fn with_listen(args: &[String], addr: &str) -> Vec<String> {
    let mut out = args.to_vec();
    if let Some(i) = out.iter().position(|a| a == "--listen")
        && i + 1 < out.len()
    {
        out[i + 1] = addr.to_string();
    }
    out
}

fn log_file(dir: &Path, name: &str) -> anyhow::Result<std::fs::File> {
    Ok(std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("{name}.log")))?)
}

/// Starts a crdplane service and returns it with the URL it announced
/// (`listening on http://ADDR`); the rest of its stdout goes to its log file.
async fn spawn_service(spec: &Spec, logs: &Path) -> anyhow::Result<(Child, String)> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let name = spec.name;
    let log = log_file(logs, name)?;
    // kill_on_drop: a child that fails to start is stopped with the error.
    let mut child = Command::new(&spec.bin)
        .args(&spec.args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log.try_clone()?)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot start {name} ({}): {e}", spec.bin.display()))?;
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    // The first line that is an announcement (anything before it is copied to the log).
    let mut log = tokio::fs::File::from_std(log);
    let find = async {
        while let Some(l) = lines.next_line().await? {
            if let Some(url) = crdplane_core::names::parse_announcement(&l) {
                return Ok::<_, std::io::Error>(Some(url.to_string()));
            }
            log.write_all(format!("{l}\n").as_bytes()).await?;
        }
        Ok(None)
    };
    let url = tokio::time::timeout(Duration::from_secs(60), find)
        .await
        .map_err(|_| {
            anyhow::anyhow!(
                "{name} did not start within 60s; see {}",
                logs.join(format!("{name}.log")).display()
            )
        })??
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{name} exited during startup; see {}",
                logs.join(format!("{name}.log")).display()
            )
        })?;
    tokio::spawn(async move {
        while let Ok(Some(l)) = lines.next_line().await {
            let _ = log.write_all(format!("{l}\n").as_bytes()).await;
        }
    });
    Ok((child, url))
}

fn spawn_plain(spec: &Spec, logs: &Path) -> anyhow::Result<Child> {
    let name = spec.name;
    let log = log_file(logs, name)?;
    Command::new(&spec.bin)
        .args(&spec.args)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot start {name} ({}): {e}", spec.bin.display()))
}

/// Starts a service child, records it in `procs` (so it is stopped on any later failure)
/// and returns its URL; its restarts reuse the announced address.
async fn start_service(
    mut spec: Spec,
    logs: &Path,
    procs: &mut Vec<Proc>,
) -> anyhow::Result<String> {
    let (child, url) = spawn_service(&spec, logs).await?;
    spec.args = with_listen(&spec.args, url.trim_start_matches("http://"));
    procs.push(Proc {
        spec,
        child: Some(child),
        started: Instant::now(),
        delay: Duration::ZERO,
        due: None,
    });
    Ok(url)
}

/// One pass of supervision: notes children that died and restarts those whose delay is over.
async fn supervise(procs: &mut [Proc], logs: &Path) {
    for p in procs.iter_mut() {
        let name = p.spec.name;
        if let Some(c) = &mut p.child
            && let Ok(Some(st)) = c.try_wait()
        {
            p.child = None;
            p.delay = restart_delay((!p.delay.is_zero()).then_some(p.delay), p.started.elapsed());
            p.due = Some(Instant::now() + p.delay);
            eprintln!(
                "crdplane: {name} exited ({st}); restarting it in {:?} (see {})",
                p.delay,
                logs.join(format!("{name}.log")).display()
            );
        }
        if p.child.is_none() && p.due.is_some_and(|d| Instant::now() >= d) {
            let started = if p.spec.announces {
                spawn_service(&p.spec, logs).await.map(|(c, _)| c)
            } else {
                spawn_plain(&p.spec, logs)
            };
            p.started = Instant::now();
            match started {
                Ok(c) => {
                    eprintln!("crdplane: {name} restarted");
                    p.child = Some(c);
                    p.due = None;
                }
                Err(e) => {
                    p.delay = restart_delay(Some(p.delay), Duration::ZERO);
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

async fn terminate(p: &mut Proc) {
    let Some(child) = p.child.as_mut() else {
        return;
    };
    if let Some(pid) = child.id() {
        let _ = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(pid.to_string())
            .status();
        if tokio::time::timeout(Duration::from_secs(5), child.wait())
            .await
            .is_ok()
        {
            return;
        }
    }
    let _ = child.kill().await;
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
    let mut procs: Vec<Proc> = Vec::new();

    let redis_url = match &cfg.redis_url {
        Some(u) => u.clone(),
        None => {
            let rdir = data_dir.join("redis");
            std::fs::create_dir_all(&rdir)?;
            let sock = rdir.join("redis.sock");
            let _ = std::fs::remove_file(&sock);
            let args: Vec<String> = [
                "--port",
                "0",
                "--unixsocket",
                &sock.to_string_lossy(),
                "--unixsocketperm",
                "700",
                "--dir",
                &rdir.to_string_lossy(),
                "--appendonly",
                if cfg.durability == "memory" {
                    "no"
                } else {
                    "yes"
                },
                // fsync before acknowledging (Redis group-commits the fsync of every write of
                // one event-loop iteration); `everysec` only when asked for.
                "--appendfsync",
                if cfg.durability == "everysec" {
                    "everysec"
                } else {
                    "always"
                },
                "--save",
                "",
                "--daemonize",
                "no",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            let bin =
                std::env::var("CRDPLANE_REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
            let spec = Spec {
                name: "redis",
                bin: PathBuf::from(bin),
                args,
                announces: false,
            };
            let child = spawn_plain(&spec, &logs).map_err(|e| {
                anyhow::anyhow!(
                    "{e}\nInstall it (Debian: apt-get install redis-server) or pass --redis-url"
                )
            })?;
            procs.push(Proc {
                spec,
                child: Some(child),
                started: Instant::now(),
                delay: Duration::ZERO,
                due: None,
            });
            let deadline = Instant::now() + Duration::from_secs(30);
            while !sock.exists() {
                if Instant::now() > deadline {
                    anyhow::bail!(
                        "redis-server did not start; see {}",
                        logs.join("redis.log").display()
                    );
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            format!("redis+unix://{}", sock.display())
        }
    };

    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let started = async {
        let storage = start_service(
            Spec {
                name: "storage",
                bin: sibling("crdplane-storage"),
                announces: true,
                args: s(&[
                    "--listen",
                    "127.0.0.1:0",
                    "--redis-url",
                    &redis_url,
                    "--durability",
                    &cfg.durability,
                ]),
            },
            &logs,
            &mut procs,
        )
        .await?;
        let validation = start_service(
            Spec {
                name: "validation",
                bin: sibling("crdplane-validation"),
                announces: true,
                args: s(&["--listen", "127.0.0.1:0"]),
            },
            &logs,
            &mut procs,
        )
        .await?;
        let registry = start_service(
            Spec {
                name: "registry",
                bin: sibling("crdplane-registry"),
                announces: true,
                args: s(&[
                    "--listen",
                    "127.0.0.1:0",
                    "--storage",
                    &storage,
                    "--validation",
                    &validation,
                ]),
            },
            &logs,
            &mut procs,
        )
        .await?;
        start_service(
            Spec {
                name: "gateway",
                bin: sibling("crdplane-gateway"),
                announces: true,
                args: s(&[
                    "--listen",
                    &cfg.listen,
                    "--storage",
                    &storage,
                    "--validation",
                    &validation,
                    "--registry",
                    &registry,
                    "--default-tenant",
                    &cfg.default_tenant,
                ]),
            },
            &logs,
            &mut procs,
        )
        .await
    }
    .await;
    let gateway = match started {
        Ok(g) => g,
        Err(e) => {
            shutdown(&mut procs).await;
            return Err(e);
        }
    };
    let listen = gateway.trim_start_matches("http://").to_string();

    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let l = listen.clone();
        if tokio::task::spawn_blocking(move || http_status(&l, "/readyz")).await? == Some(200) {
            break;
        }
        for p in &mut procs {
            if let Some(Ok(Some(st))) = p.child.as_mut().map(|c| c.try_wait()) {
                let name = p.spec.name;
                shutdown(&mut procs).await;
                anyhow::bail!(
                    "{name} exited during startup ({st}); see {}",
                    logs.join(format!("{name}.log")).display()
                );
            }
        }
        if Instant::now() > deadline {
            shutdown(&mut procs).await;
            anyhow::bail!(
                "the stack was not ready within 60s; logs in {}",
                logs.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let server = gateway.clone();
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
    let result: anyhow::Result<()> = loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break Ok(()),
            _ = term.recv() => break Ok(()),
            _ = tokio::time::sleep(Duration::from_millis(200)) => supervise(&mut procs, &logs).await,
        }
    };
    println!("stopping crdplane");
    shutdown(&mut procs).await;
    result
}

/// Stops children in reverse start order (gateway first, Redis last so AOF is flushed).
async fn shutdown(procs: &mut Vec<Proc>) {
    while let Some(mut p) = procs.pop() {
        terminate(&mut p).await;
    }
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
    fn the_soft_open_files_limit_is_raised_to_the_hard_one() {
        let after = raise_nofile_limit().unwrap();
        let l = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        assert_eq!(after, l.current);
        if l.maximum.is_some() {
            assert_eq!(l.current, l.maximum);
        }
    }
}
