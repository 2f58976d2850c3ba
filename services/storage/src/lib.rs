//! crdplane storage service: objects of every kind in Redis, with resourceVersion
//! concurrency, ordered lists and watch.
//!
//! Request path: gateway / registry → gRPC `crdplane.v1.Storage` → [`server`] → [`store`]
//! (Lua scripts: one atomic script per write; the creates of one resource batched by
//! `CreateMany` run as one script call) → Redis; live events come back through Redis
//! pub/sub into [`watch::Hub`] and out to gRPC watch streams. Key layout: [`keys`]. Objects
//! written with a time to live are deleted when it ends by [`expiry`] (every replica).
//! The gateway's tenant purge controller empties a Tenant being deleted with `PurgeTenant`
//! ([`server`]): normal deletes of its objects, then its keys but the revision counters.
//! The service is stateless apart from the pub/sub hub: run as many replicas as needed.
//! Redis is one server or a Redis Cluster ([`backend`]); on a cluster the live events are
//! sharded pub/sub and `--wait-replicas` can make every write wait for a replica.

pub mod backend;
pub mod config;
pub mod durability;
pub mod expiry;
pub mod filter;
pub mod keys;
pub mod metrics;
pub mod replies;
pub mod server;
pub mod store;
pub mod watch;

use crdplane_proto::v1::storage_server::StorageServer;

/// Storage service configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// `redis://host:port`, `redis+unix:///path/to/socket`, or a Redis Cluster's seed list
    /// (comma-separated; see [`backend`]).
    pub redis_url: String,
    /// Most events kept per (tenant, resource) for watch resume (the memory bound).
    pub history_len: usize,
    /// Seconds of events kept per (tenant, resource) for watch resume (0 = length only).
    pub history_window_secs: u64,
    /// What a write must reach before it is acknowledged ([`durability`]).
    pub durability: durability::Durability,
    /// Bound of one Redis connect or command: while Redis cannot be reached, requests fail
    /// after at most about this long with 503 ServiceUnavailable (and `Retry-After`).
    pub redis_timeout: std::time::Duration,
    /// Replicas that must confirm each write (Redis `WAIT`) before it is acknowledged.
    pub wait_replicas: u32,
    /// How often this replica deletes the objects whose time to live ran out ([`expiry`]);
    /// zero: never.
    pub expiry_sweep_period: std::time::Duration,
    /// Mutual TLS of the listener (`--grpc-tls-*`); `None`: plaintext.
    pub tls: Option<crdplane_transport::mtls::Files>,
}

/// How storage's Redis connections behave during an outage: a connect attempt or a
/// command waits at most `timeout`, and a lost connection is made again by the next
/// command instead of the connection manager's default six retries with exponential
/// back-off (which held every request for ~9 s before its error). The next request after
/// Redis is back reconnects by itself.
pub fn manager_config(timeout: std::time::Duration) -> redis::aio::ConnectionManagerConfig {
    redis::aio::ConnectionManagerConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout))
        .set_number_of_retries(0)
}

/// Default watch history per (tenant, resource): 75 s, like upstream's watch cache
/// (`storage/cacher/watch_cache.go` `eventFreshDuration`), at most 200,000 events (75 s at
/// ~2,700 writes/s to one resource; memory ≈ events × object size, ×2 for updates, which
/// also carry the previous state).
pub const DEFAULT_HISTORY_WINDOW_SECS: u64 = 75;
/// Default most events kept per (tenant, resource) for watch resume (see above).
pub const DEFAULT_HISTORY_LEN: usize = 200_000;

impl Default for Config {
    fn default() -> Self {
        Self {
            redis_url: "redis://127.0.0.1:6379".into(),
            history_len: DEFAULT_HISTORY_LEN,
            history_window_secs: DEFAULT_HISTORY_WINDOW_SECS,
            durability: durability::Durability::Fsync,
            redis_timeout: std::time::Duration::from_secs(1),
            wait_replicas: 0,
            expiry_sweep_period: expiry::DEFAULT_PERIOD,
            tls: None,
        }
    }
}

/// A timeout flag: `500ms`, `1s`, `1.5s`, or plain seconds (`2`).
pub fn parse_timeout(s: &str) -> Result<std::time::Duration, String> {
    let (num, unit) = if let Some(n) = s.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else {
        (s, 1.0)
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(std::time::Duration::from_secs_f64(v * unit)),
        _ => Err(format!("invalid duration {s:?} (e.g. 500ms, 1s)")),
    }
}

/// A period flag: `0` (off), or a duration as [`parse_timeout`] reads it.
pub fn parse_period(s: &str) -> Result<std::time::Duration, String> {
    if s.trim().parse::<f64>() == Ok(0.0) {
        return Ok(std::time::Duration::ZERO);
    }
    parse_timeout(s).map_err(|_| format!("invalid period {s:?} (e.g. 10s, 500ms, 0 = off)"))
}

/// Serves the storage gRPC API on `listener` until `shutdown` fires, then drains its
/// connections (`crdplane_transport::shutdown`).
///
/// An unreachable or slow Redis at startup is waited out (retried with backoff up to 2 s,
/// each attempt logged), as kube-apiserver keeps retrying etcd rather than exiting: a
/// supervisor starting Redis and storage together, or a Redis still loading its AOF, must
/// not stop the stack. Persistence settings that refuse the chosen durability
/// ([`store::Refused`]) end the process at once: that is a configuration error.
pub async fn serve(
    config: Config,
    listener: tokio::net::TcpListener,
    shutdown: crdplane_transport::Shutdown,
) -> anyhow::Result<()> {
    let tls = crdplane_transport::mtls::Mtls::load_optional(config.tls.as_ref())
        .map_err(anyhow::Error::msg)?;
    let mut delay = std::time::Duration::from_millis(100);
    let (store, hub) = loop {
        match connect(&config).await {
            Ok(pair) => break pair,
            Err(e) if e.is::<store::Refused>() => return Err(e),
            Err(e) => {
                tracing::warn!("Redis not usable yet ({e:#}); retrying in {delay:?}");
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = shutdown.triggered() => return Ok(()),
                }
                delay = (delay * 2).min(std::time::Duration::from_secs(2));
            }
        }
    };
    let health = crdplane_transport::health::Health::new(
        <StorageServer<server::StorageService> as tonic::server::NamedService>::NAME,
        true,
    )
    .await;
    let readiness = tokio::spawn(follow_redis(
        store.target().clone(),
        config.redis_timeout,
        health.clone(),
    ));
    let sweeper = tokio::spawn(expiry::run(store.clone(), config.expiry_sweep_period));
    let svc = server::StorageService { store, hub };
    let served = crdplane_transport::serve_with_health(
        listener,
        StorageServer::new(svc)
            .max_decoding_message_size(64 << 20)
            .max_encoding_message_size(256 << 20),
        &health,
        crdplane_transport::ServeOptions {
            tls,
            // The gateway and the registry read and write objects; no other service may.
            callers: &[
                crdplane_transport::mtls::callers::GATEWAY,
                crdplane_transport::mtls::callers::REGISTRY,
            ],
            streaming: &["Watch", "Changes"],
            shutdown,
            ..Default::default()
        },
    )
    .await;
    readiness.abort();
    sweeper.abort();
    served?;
    Ok(())
}

/// How often storage's readiness (Redis answering `PING`) is looked at.
pub const READINESS_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// Keeps the `grpc.health.v1` status equal to storage's readiness: SERVING while Redis
/// answers `PING` within the Redis timeout, NOT_SERVING while it does not (callers with
/// other storage replicas then leave this one out; see `crdplane_transport::balance`). Its
/// own connection, so a slow request path cannot hide an outage or fake one. On a cluster
/// the ping goes to each master's slot, but the cluster client sends a keyless command to
/// any live node when a master's connection is down: one failed master leaves storage
/// SERVING (its shard's requests fail with 503 until a replica takes over), which keeps a
/// partial outage from taking every storage replica, and so every gateway, out of service.
async fn follow_redis(
    target: backend::Target,
    timeout: std::time::Duration,
    health: crdplane_transport::health::Health,
) {
    let mut conn: Option<backend::Conn> = None;
    let mut serving = true;
    let mut tick = tokio::time::interval(READINESS_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let ok = ping(&target, timeout, &mut conn).await;
        if ok != serving {
            serving = ok;
            if ok {
                tracing::info!("Redis answers again: SERVING");
            } else {
                tracing::warn!("Redis does not answer: NOT_SERVING");
            }
            health.set(ok).await;
        }
    }
}

/// One readiness probe: `PING` on `conn` (made first if there is none), within `timeout`.
async fn ping(
    target: &backend::Target,
    timeout: std::time::Duration,
    conn: &mut Option<backend::Conn>,
) -> bool {
    let probe = async {
        if conn.is_none() {
            *conn = backend::Conn::open(target, timeout).await.ok();
        }
        let c = conn.as_mut()?;
        let pongs: Vec<String> = c.on_masters(&redis::cmd("PING")).await.ok()?;
        Some(!pongs.is_empty() && pongs.iter().all(|p| p == "PONG"))
    };
    matches!(
        tokio::time::timeout(timeout * 2, probe).await,
        Ok(Some(true))
    )
}

/// One startup attempt: the store (persistence check, recovery epoch) and the pub/sub hub.
async fn connect(config: &Config) -> anyhow::Result<(store::Store, std::sync::Arc<watch::Hub>)> {
    let target = backend::Target::discover(&config.redis_url, config.redis_timeout).await?;
    if let backend::Target::Cluster(seeds) = &target {
        tracing::info!(?seeds, "Redis Cluster");
    }
    let store = store::Store::connect(
        &target,
        store::StoreOptions {
            history_len: config.history_len,
            history_window_secs: config.history_window_secs,
            durability: config.durability,
            redis_timeout: config.redis_timeout,
            wait_replicas: config.wait_replicas,
        },
    )
    .await?;
    let hub = watch::Hub::start(&target, config.redis_timeout).await?;
    Ok((store, hub))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn timeouts() {
        for (s, want) in [
            ("1s", Some(Duration::from_secs(1))),
            ("500ms", Some(Duration::from_millis(500))),
            ("1.5s", Some(Duration::from_millis(1500))),
            ("2", Some(Duration::from_secs(2))),
            ("0s", None),
            ("-1s", None),
            ("fast", None),
        ] {
            assert_eq!(super::parse_timeout(s).ok(), want, "{s}");
        }
        for (s, want) in [
            ("0", Some(Duration::ZERO)),
            ("0s", None),
            ("10s", Some(Duration::from_secs(10))),
            ("250ms", Some(Duration::from_millis(250))),
            ("-1", None),
            ("often", None),
        ] {
            assert_eq!(super::parse_period(s).ok(), want, "{s}");
        }
    }
}
