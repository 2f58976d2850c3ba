//! A local Redis Cluster for development and tests: `crdplane up --redis-cluster N` starts N
//! masters with one replica each (`redis-server --cluster-enabled yes`, AOF as the stack's
//! durability asks) on 127.0.0.1, joins them with `redis-cli --cluster create`, and hands the
//! storage a seed list. Not on the request path.
//!
//! The nodes listen on TCP (a cluster's nodes and clients reach each other by address), so
//! they require a password (`requirepass`/`masterauth`, random, kept in `<dir>/password` and
//! in each node's `redis.conf`, mode 0600, never in a process's arguments): another local
//! user cannot read or write the data. The password reaches the
//! storage in its environment (`CRDPLANE_STORAGE_REDIS_URL`), never on a command line. Ports
//! are chosen free on first start and kept in `<dir>/ports`, so a restart finds the cluster
//! it formed (each node's `nodes.conf` names its peers by address).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// One node of a planned local cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Client port on 127.0.0.1.
    pub port: u16,
    /// Cluster bus port (`cluster-port`).
    pub bus_port: u16,
    /// Its data directory (AOF, `nodes.conf`).
    pub dir: PathBuf,
}

/// A local cluster: `masters` masters, one replica each.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Masters wanted.
    pub masters: usize,
    /// Every node (2 × masters), masters first as `redis-cli --cluster create` assigns them.
    pub nodes: Vec<Node>,
    /// The nodes' password.
    pub password: String,
}

/// The first port of the kernel's ephemeral range (`net.ipv4.ip_local_port_range`), 32768
/// where it cannot be read.
fn ephemeral_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768)
}

/// A port that is free now and outside the kernel's ephemeral range where there is room
/// below it (from 10000 up). A port from `bind(:0)` is a poor choice here: between choosing
/// it and the node binding it, any outgoing connection on the machine (a `redis-cli`, a
/// client) may be given the same port as its local end, and the node then cannot listen.
/// Below the ephemeral range the kernel hands out no ports by itself.
fn free_port() -> anyhow::Result<u16> {
    let top = ephemeral_start();
    if top > 11_000 {
        for _ in 0..1000 {
            let port = rand::random_range(10_000..top);
            if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return Ok(port);
            }
        }
    }
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

impl Plan {
    /// The cluster kept in `dir` (ports and password of an earlier start), or a new one with
    /// free ports.
    pub fn in_dir(dir: &Path, masters: usize) -> anyhow::Result<Self> {
        anyhow::ensure!(
            (3..=64).contains(&masters),
            "a Redis Cluster needs 3 to 64 masters"
        );
        std::fs::create_dir_all(dir)?;
        let pw_file = dir.join("password");
        let password = match std::fs::read_to_string(&pw_file) {
            Ok(p) if !p.trim().is_empty() => p.trim().to_string(),
            _ => {
                let p: String = (0..32)
                    .map(|_| format!("{:x}", rand::random::<u8>() & 0xf))
                    .collect();
                crate::pki::write_private(&pw_file, &p)?;
                p
            }
        };
        let ports_file = dir.join("ports");
        let kept: Vec<u16> = std::fs::read_to_string(&ports_file)
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        let ports = if kept.len() == masters * 4 {
            kept
        } else {
            let mut p = Vec::with_capacity(masters * 4);
            while p.len() < masters * 4 {
                let port = free_port()?;
                if !p.contains(&port) {
                    p.push(port);
                }
            }
            std::fs::write(
                &ports_file,
                p.iter().map(u16::to_string).collect::<Vec<_>>().join(" "),
            )?;
            p
        };
        let nodes = ports
            .chunks(2)
            .enumerate()
            .map(|(i, pair)| Node {
                port: pair[0],
                bus_port: pair[1],
                dir: dir.join(format!("node-{i}")),
            })
            .collect::<Vec<_>>();
        for n in &nodes {
            std::fs::create_dir_all(&n.dir)?;
            crate::pki::write_private(
                &n.dir.join("redis.conf"),
                &format!("requirepass {password}\nmasterauth {password}\n"),
            )?;
        }
        Ok(Self {
            masters,
            nodes,
            password,
        })
    }

    /// The storage's `--redis-url`: every node as a seed, with the password.
    pub fn seed_url(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("redis://:{}@127.0.0.1:{}", self.password, n.port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Joins the nodes into a cluster (unless they already form one) and waits until every
    /// node reports `cluster_state:ok`.
    pub fn form(&self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        for n in &self.nodes {
            while !self
                .cli(n.port, &["PING"])
                .is_ok_and(|o| o.trim() == "PONG")
            {
                anyhow::ensure!(
                    Instant::now() < deadline,
                    "redis node on port {} does not answer",
                    n.port
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        if !self.all_ok()? {
            let known = self.cli(self.nodes[0].port, &["CLUSTER", "INFO"])?;
            if known.contains("cluster_known_nodes:1\r")
                || known.contains("cluster_known_nodes:1\n")
            {
                let mut args: Vec<String> = vec!["--cluster".into(), "create".into()];
                args.extend(self.nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)));
                args.extend(["--cluster-replicas", "1", "--cluster-yes"].map(String::from));
                let out = Command::new(cli_bin())
                    .args(&args)
                    .env("REDISCLI_AUTH", &self.password)
                    .output()?;
                anyhow::ensure!(
                    out.status.success(),
                    "redis-cli --cluster create failed: {}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
        while !self.all_ok()? {
            anyhow::ensure!(
                Instant::now() < deadline,
                "the Redis Cluster did not reach cluster_state:ok"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// Every node sees the cluster as ok, and every replica's link to its master is up (so a
    /// write can reach a replica from the first request on).
    fn all_ok(&self) -> anyhow::Result<bool> {
        let has = |text: &str, line: &str| text.lines().any(|l| l.trim() == line);
        for n in &self.nodes {
            let info = self.cli(n.port, &["CLUSTER", "INFO"]).unwrap_or_default();
            if !has(&info, "cluster_state:ok") {
                return Ok(false);
            }
            let repl = self
                .cli(n.port, &["INFO", "replication"])
                .unwrap_or_default();
            if has(&repl, "role:slave") && !has(&repl, "master_link_status:up") {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// One `redis-cli` command against the node on `port` (password in the environment).
    pub fn cli(&self, port: u16, args: &[&str]) -> anyhow::Result<String> {
        let out = Command::new(cli_bin())
            .args(["-h", "127.0.0.1", "-p", &port.to_string()])
            .args(args)
            .env("REDISCLI_AUTH", &self.password)
            .output()?;
        anyhow::ensure!(
            out.status.success(),
            "redis-cli: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// The `redis-server` arguments of one cluster node: its `redis.conf` (the password), its
/// ports on 127.0.0.1, its data directory, and persistence as [`crate::stack::redis_args`]
/// gives a single Redis.
pub fn node_args(node: &Node, durability: &str) -> Vec<String> {
    let s = |v: &str| v.to_string();
    vec![
        node.dir.join("redis.conf").to_string_lossy().into_owned(),
        s("--bind"),
        s("127.0.0.1"),
        s("--port"),
        node.port.to_string(),
        s("--cluster-enabled"),
        s("yes"),
        s("--cluster-port"),
        node.bus_port.to_string(),
        s("--cluster-config-file"),
        node.dir.join("nodes.conf").to_string_lossy().into_owned(),
        s("--cluster-node-timeout"),
        s("2000"),
        s("--dir"),
        node.dir.to_string_lossy().into_owned(),
    ]
    .into_iter()
    .chain(crate::stack::persistence_args(durability))
    .collect()
}

/// The redis-cli binary: `$CRDPLANE_REDIS_CLI` if set, else `redis-cli` on PATH.
pub fn cli_bin() -> String {
    std::env::var("CRDPLANE_REDIS_CLI").unwrap_or_else(|_| "redis-cli".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_keep_ports_and_password() {
        let dir = tempfile::tempdir().unwrap();
        let a = Plan::in_dir(dir.path(), 3).unwrap();
        assert_eq!(a.nodes.len(), 6);
        assert_eq!(a.password.len(), 32);
        let b = Plan::in_dir(dir.path(), 3).unwrap();
        assert_eq!(a.nodes, b.nodes, "a restart finds the same cluster");
        assert_eq!(a.password, b.password);
        assert!(Plan::in_dir(dir.path(), 2).is_err());
        let conf = std::fs::read_to_string(a.nodes[0].dir.join("redis.conf")).unwrap();
        assert!(conf.contains(&format!("requirepass {}", a.password)));
        let url = a.seed_url();
        assert_eq!(url.split(',').count(), 6);
        assert!(url.starts_with(&format!("redis://:{}@127.0.0.1:", a.password)));
    }

    #[test]
    fn node_flags() {
        let n = Node {
            port: 7000,
            bus_port: 7100,
            dir: PathBuf::from("/d/node-0"),
        };
        let a = node_args(&n, "fsync");
        assert_eq!(a[0], "/d/node-0/redis.conf");
        assert!(!a.iter().any(|x| x.contains("pw")));
        let flag = |f: &str| {
            let i = a.iter().position(|x| x == f).unwrap();
            a[i + 1].clone()
        };
        assert_eq!(flag("--port"), "7000");
        assert_eq!(flag("--cluster-port"), "7100");
        assert_eq!(flag("--cluster-enabled"), "yes");
        assert_eq!(flag("--appendfsync"), "always");
        assert_eq!(flag("--cluster-config-file"), "/d/node-0/nodes.conf");
        let m = node_args(&n, "memory");
        let i = m.iter().position(|x| x == "--appendonly").unwrap();
        assert_eq!(m[i + 1], "no");
    }
}
