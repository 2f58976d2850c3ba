//! The `crdplane` launcher: runs the whole stack on one machine for development and for the
//! README's one-command start.
//!
//! `crdplane up` starts a `redis-server` child (AOF persistence in the data dir with
//! `appendfsync always`, so an acknowledged write survives a crash of the machine; see the
//! storage's `durability` module) unless `--redis-url` is given, then storage, validation, registry and
//! gateway as separate processes (the binaries beside this one), waits for the gateway's
//! `/readyz`, writes a kubeconfig, prints how to use it, and stops every child on
//! Ctrl-C/SIGTERM or when any child dies.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

#[derive(Debug, Clone)]
pub struct UpConfig {
    pub listen: String,
    pub data_dir: PathBuf,
    pub kubeconfig: Option<PathBuf>,
    pub redis_url: Option<String>,
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

struct Proc {
    name: &'static str,
    child: Child,
}

fn log_file(dir: &Path, name: &str) -> anyhow::Result<std::fs::File> {
    Ok(std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("{name}.log")))?)
}

/// Starts a crdplane service on port 0 and returns it with the URL it announced
/// (`listening on http://ADDR`); the rest of its stdout goes to its log file.
async fn spawn_service(
    name: &'static str,
    bin: &Path,
    args: &[String],
    logs: &Path,
    procs: &mut Vec<Proc>,
) -> anyhow::Result<String> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let log = log_file(logs, name)?;
    let mut child = Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log.try_clone()?)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot start {name} ({}): {e}", bin.display()))?;
    let stdout = child.stdout.take().expect("piped stdout");
    procs.push(Proc { name, child });
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
    Ok(url)
}

fn spawn(name: &'static str, bin: &Path, args: &[String], logs: &Path) -> anyhow::Result<Proc> {
    let log = log_file(logs, name)?;
    let child = Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot start {name} ({}): {e}", bin.display()))?;
    Ok(Proc { name, child })
}

async fn terminate(p: &mut Proc) {
    if let Some(pid) = p.child.id() {
        let _ = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(pid.to_string())
            .status();
        if tokio::time::timeout(Duration::from_secs(5), p.child.wait())
            .await
            .is_ok()
        {
            return;
        }
    }
    let _ = p.child.kill().await;
}

/// Runs the stack until interrupted. Returns an error if startup fails or a child dies.
pub async fn up(cfg: UpConfig) -> anyhow::Result<()> {
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
            let p = spawn("redis", Path::new(&bin), &args, &logs).map_err(|e| {
                anyhow::anyhow!(
                    "{e}\nInstall it (Debian: apt-get install redis-server) or pass --redis-url"
                )
            })?;
            procs.push(p);
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
        let storage = spawn_service(
            "storage",
            &sibling("crdplane-storage"),
            &s(&[
                "--listen",
                "127.0.0.1:0",
                "--redis-url",
                &redis_url,
                "--durability",
                &cfg.durability,
            ]),
            &logs,
            &mut procs,
        )
        .await?;
        let validation = spawn_service(
            "validation",
            &sibling("crdplane-validation"),
            &s(&["--listen", "127.0.0.1:0"]),
            &logs,
            &mut procs,
        )
        .await?;
        let registry = spawn_service(
            "registry",
            &sibling("crdplane-registry"),
            &s(&[
                "--listen",
                "127.0.0.1:0",
                "--storage",
                &storage,
                "--validation",
                &validation,
            ]),
            &logs,
            &mut procs,
        )
        .await?;
        spawn_service(
            "gateway",
            &sibling("crdplane-gateway"),
            &s(&[
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
            if let Ok(Some(st)) = p.child.try_wait() {
                let name = p.name;
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
    let result = loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break Ok(()),
            _ = term.recv() => break Ok(()),
            _ = tokio::time::sleep(Duration::from_millis(500)) => {
                let mut died = None;
                for p in &mut procs {
                    if let Ok(Some(st)) = p.child.try_wait() {
                        died = Some((p.name, st));
                    }
                }
                if let Some((name, st)) = died {
                    break Err(anyhow::anyhow!("{name} exited ({st}); stopping; see {}", logs.join(format!("{name}.log")).display()));
                }
            }
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
}
