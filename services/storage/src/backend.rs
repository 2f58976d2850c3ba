//! Which Redis the storage talks to — one server or a Redis Cluster — behind one connection
//! type.
//!
//! Where it sits: [`crate::store::Store`], [`crate::watch::Hub`] and the readiness probe
//! (`lib.rs`) open their connections here; everything above speaks plain Redis commands on a
//! [`Conn`]. On a cluster the redis crate's cluster client routes each command by its key's
//! hash slot and follows MOVED/ASK and topology changes. crdplane keeps every key of one
//! (tenant, resource) under one hash tag (`keys.rs`), so each write script and each pipeline
//! touches one slot; the few keyless or all-keys operations (SCAN, CONFIG GET, INFO, DBSIZE)
//! are sent to every master in turn, named by the first slot each master owns ([`Conn::shards`]),
//! so a failover (same slots, new master) keeps the order and a SCAN cursor stays valid.
//!
//! `--redis-url` takes one URL or a comma-separated seed list; a single URL is a cluster when
//! the server says `cluster_enabled:1` (`INFO cluster`), so pointing at any node of a
//! cluster is enough.
//!
//! Resharding: while a slot moves between masters (`CLUSTER SETSLOT … MIGRATING/IMPORTING`,
//! then `MIGRATE` of its keys), a script over keys of which only some have moved gets
//! `TRYAGAIN`, and a MULTI/EXEC read whose keys have moved is aborted with ASK errors (the
//! redis crate follows ASK for single commands, not inside a transaction). Neither ran
//! anything, and the state lasts as long as the move of one (tenant, resource)'s few keys:
//! [`Conn`] sends such a command again, with a short backoff, for up to
//! [`MIGRATION_PATIENCE`] before the error reaches the caller (a 503 with `Retry-After`).

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{Cmd, RedisFuture, RedisResult, Value};
use std::time::Duration;

/// How long a command refused because its slot is being moved (`TRYAGAIN`, or a transaction
/// aborted by ASK) is sent again before the error is returned. Upstream's resharding moves
/// the keys of a slot in batches; all of one (tenant, resource) share a slot and are five
/// keys, so the refusal lasts about one `MIGRATE` of its largest key.
pub const MIGRATION_PATIENCE: Duration = Duration::from_secs(2);
const MIGRATION_BACKOFF_MIN: Duration = Duration::from_millis(5);
const MIGRATION_BACKOFF_MAX: Duration = Duration::from_millis(100);

/// Whether `e` says the command was refused, unexecuted, because its slot is moving.
pub(crate) fn refused_while_migrating(e: &redis::RedisError) -> bool {
    use redis::{ErrorKind, ServerErrorKind};
    match e.kind() {
        ErrorKind::Server(
            ServerErrorKind::TryAgain | ServerErrorKind::Moved | ServerErrorKind::Ask,
        ) => true,
        // EXECABORT: the queued commands were refused, so EXEC ran none of them.
        ErrorKind::Server(ServerErrorKind::ExecAbort) => {
            e.clone().into_server_errors().is_some_and(|errs| {
                !errs.is_empty()
                    && errs.iter().all(|(_, se)| {
                        matches!(
                            se.kind(),
                            Some(
                                ServerErrorKind::Ask
                                    | ServerErrorKind::Moved
                                    | ServerErrorKind::TryAgain
                            )
                        )
                    })
            })
        }
        _ => false,
    }
}

/// The patience of one request with a moving slot: from its first attempt, refusals
/// ([`refused_while_migrating`]) are waited out for up to [`MIGRATION_PATIENCE`], the wait
/// between attempts doubling from 5 ms to 100 ms.
pub(crate) struct Patience {
    deadline: tokio::time::Instant,
    wait: Duration,
}

impl Patience {
    pub(crate) fn start() -> Self {
        Self {
            deadline: tokio::time::Instant::now() + MIGRATION_PATIENCE,
            wait: MIGRATION_BACKOFF_MIN,
        }
    }

    /// Whether `e` is a refusal worth sending the command again for (time is left).
    pub(crate) fn allows(&self, e: &redis::RedisError) -> bool {
        refused_while_migrating(e) && tokio::time::Instant::now() < self.deadline
    }

    /// Waits before the next attempt.
    pub(crate) async fn pause(&mut self) {
        tokio::time::sleep(self.wait).await;
        self.wait = (self.wait * 2).min(MIGRATION_BACKOFF_MAX);
    }
}

/// Runs `attempt` until it succeeds, fails otherwise than by [`refused_while_migrating`],
/// or [`MIGRATION_PATIENCE`] has passed.
async fn ride_out_migration<T, F>(mut attempt: impl FnMut() -> F) -> RedisResult<T>
where
    F: std::future::Future<Output = RedisResult<T>>,
{
    let mut patience = Patience::start();
    loop {
        match attempt().await {
            Err(e) if patience.allows(&e) => {
                tracing::debug!(error = %e, "slot is moving; sending the command again");
                patience.pause().await;
            }
            r => return r,
        }
    }
}

/// The Redis deployment `--redis-url` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// One server (standalone, or a primary with replicas the storage does not see).
    Single(String),
    /// A Redis Cluster, reached through these seed nodes.
    Cluster(Vec<String>),
}

impl Target {
    /// The seeds of `url` (comma-separated; blanks dropped).
    pub fn seeds(url: &str) -> Vec<String> {
        url.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect()
    }

    /// Decides between one server and a cluster: several seeds are a cluster; one URL is a
    /// cluster when its server runs with `cluster-enabled yes`.
    pub async fn discover(url: &str, timeout: Duration) -> anyhow::Result<Self> {
        let seeds = Self::seeds(url);
        if seeds.len() > 1 {
            return Ok(Self::Cluster(seeds));
        }
        let Some(one) = seeds.into_iter().next() else {
            anyhow::bail!("empty Redis URL");
        };
        let client = redis::Client::open(one.as_str())?;
        let probe = async {
            let mut c = client.get_multiplexed_async_connection().await?;
            redis::cmd("INFO")
                .arg("cluster")
                .query_async::<String>(&mut c)
                .await
        };
        let info = tokio::time::timeout(timeout, probe)
            .await
            .map_err(|_| anyhow::anyhow!("redis did not answer within {timeout:?}"))??;
        Ok(if cluster_enabled(&info) {
            Self::Cluster(vec![one])
        } else {
            Self::Single(one)
        })
    }

    /// Whether this is a cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self, Self::Cluster(_))
    }
}

/// Whether an `INFO cluster` reply says the server is a cluster node.
pub fn cluster_enabled(info: &str) -> bool {
    info.lines().any(|l| l.trim() == "cluster_enabled:1")
}

/// A cluster client for `seeds`: every connect and reply bounded by `timeout`, and few
/// retries so that a request during a failover fails in about a second rather than queueing.
/// With `push` (the watch hub's pub/sub) it speaks RESP3, which carries pushes; otherwise
/// RESP2, so every reply has the shape a single server's connection gives.
pub(crate) fn cluster_client(
    seeds: &[String],
    timeout: Duration,
    push: Option<tokio::sync::mpsc::UnboundedSender<redis::PushInfo>>,
) -> RedisResult<redis::cluster::ClusterClient> {
    let protocol = if push.is_some() {
        redis::ProtocolVersion::RESP3
    } else {
        redis::ProtocolVersion::RESP2
    };
    let mut b = redis::cluster::ClusterClientBuilder::new(seeds.iter().map(String::as_str))
        .use_protocol(protocol)
        .connection_timeout(timeout)
        .response_timeout(timeout)
        .retries(3)
        .min_retry_wait(20)
        .max_retry_wait(250);
    if let Some(tx) = push {
        b = b.push_sender(tx);
    }
    b.build()
}

/// One multiplexed connection to the Redis deployment: commands on it are routed (by key on
/// a cluster) and reconnected by the redis crate.
#[derive(Clone)]
pub enum Conn {
    /// One server, through the reconnecting connection manager.
    Single(ConnectionManager),
    /// A cluster, through the cluster client (one connection per node).
    Cluster(ClusterConnection),
}

/// Observes one round trip in [`crate::metrics`] (its latency, and its error if it fails)
/// and, when the call it serves is traced and sampled, as a span (`redis command` or
/// `redis pipeline`, child of the gRPC call's span; see `crdplane_transport::telemetry`).
fn timed<'a, T: Send + 'a>(op: &'static str, call: RedisFuture<'a, T>) -> RedisFuture<'a, T> {
    Box::pin(async move {
        let mut span = crdplane_transport::telemetry::child_of_current(
            if op == "pipeline" {
                "redis pipeline"
            } else {
                "redis command"
            },
            crdplane_transport::telemetry::Kind::Client,
        );
        if let Some(s) = &mut span {
            s.set("db.system.name", "redis");
        }
        let start = std::time::Instant::now();
        let out = call.await;
        crate::metrics::redis_round_trip(op, start.elapsed().as_secs_f64(), out.as_ref().err());
        if let (Some(s), Err(e)) = (&mut span, &out) {
            s.fail(format!("{:?}", e.kind()));
        }
        out
    })
}

/// Every command and pipeline of the store goes through here, timed into `crate::metrics`;
/// on a cluster, a command refused while its slot moves is sent again (module docs).
impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(c) => timed("command", c.req_packed_command(cmd)),
            Self::Cluster(c) => {
                let c = c.clone();
                Box::pin(ride_out_migration(move || {
                    let mut c = c.clone();
                    async move { timed("command", c.req_packed_command(cmd)).await }
                }))
            }
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Single(c) => timed("pipeline", c.req_packed_commands(cmd, offset, count)),
            // A transaction refused as a whole ran nothing; a plain pipeline may have run
            // some of its commands, so it is not sent again here (the store's write
            // pipelines judge each reply themselves).
            Self::Cluster(c) => {
                if !cmd.is_transaction() {
                    return timed("pipeline", c.req_packed_commands(cmd, offset, count));
                }
                let c = c.clone();
                Box::pin(ride_out_migration(move || {
                    let mut c = c.clone();
                    async move { timed("pipeline", c.req_packed_commands(cmd, offset, count)).await }
                }))
            }
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(c) => c.get_db(),
            Self::Cluster(c) => c.get_db(),
        }
    }
}

impl Conn {
    /// Connects to `target` (the first connect must succeed; later losses are reconnected).
    pub async fn open(target: &Target, timeout: Duration) -> anyhow::Result<Self> {
        Ok(match target {
            Target::Single(url) => {
                let client = redis::Client::open(url.as_str())?;
                Self::Single(
                    ConnectionManager::new_with_config(client, crate::manager_config(timeout))
                        .await?,
                )
            }
            Target::Cluster(seeds) => {
                let client = cluster_client(seeds, timeout, None)?;
                let c = tokio::time::timeout(timeout * 2, client.get_async_connection())
                    .await
                    .map_err(|_| anyhow::anyhow!("redis cluster did not answer in time"))??;
                Self::Cluster(c)
            }
        })
    }

    /// Whether this is a cluster connection.
    pub fn is_cluster(&self) -> bool {
        matches!(self, Self::Cluster(_))
    }

    /// The masters, each named by the lowest hash slot it serves, in slot order (one server:
    /// `[0]`). A master's first slot survives its failover, so callers can keep positions
    /// (SCAN cursors) across one.
    pub async fn shards(&mut self) -> RedisResult<Vec<u16>> {
        Ok(match self.cluster_slots().await? {
            Some(v) => first_slots(&v),
            None => vec![0],
        })
    }

    /// Which master serves which slots: `(first, last, "host:port")` per range of `CLUSTER
    /// SLOTS`, sorted (one server: empty).
    pub async fn slot_owners(&mut self) -> RedisResult<Vec<(i64, i64, String)>> {
        Ok(self
            .cluster_slots()
            .await?
            .map(|v| owners(&v))
            .unwrap_or_default())
    }

    /// `CLUSTER SLOTS` as any node answers it (one server: `None`).
    async fn cluster_slots(&mut self) -> RedisResult<Option<Value>> {
        match self {
            Self::Single(_) => Ok(None),
            Self::Cluster(c) => c
                .route_command(
                    redis::cmd("CLUSTER").arg("SLOTS").clone(),
                    RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
                )
                .await
                .map(Some),
        }
    }

    /// Runs `cmd` on the master serving `slot` (one server: on it).
    pub async fn on_shard<T: redis::FromRedisValue>(
        &mut self,
        slot: u16,
        cmd: &Cmd,
    ) -> RedisResult<T> {
        let v = match self {
            Self::Single(c) => cmd.query_async::<Value>(c).await?,
            Self::Cluster(c) => {
                c.route_command(
                    cmd.clone(),
                    RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::new(
                        slot,
                        SlotAddr::Master,
                    ))),
                )
                .await?
            }
        };
        redis::from_redis_value(v).map_err(Into::into)
    }

    /// Runs `cmd` on every master in turn: the replies in [`Conn::shards`] order.
    pub async fn on_masters<T: redis::FromRedisValue>(&mut self, cmd: &Cmd) -> RedisResult<Vec<T>> {
        let shards = self.shards().await?;
        let mut out = Vec::with_capacity(shards.len());
        for s in shards {
            out.push(self.on_shard(s, cmd).await?);
        }
        Ok(out)
    }
}

/// From a `CLUSTER SLOTS` reply (`[start, end, [host, port, id, …], replicas…]` per range), the
/// lowest slot of each master, sorted. Ranges of one master (after resharding) count once.
pub fn first_slots(v: &Value) -> Vec<u16> {
    let mut by_master: std::collections::BTreeMap<Vec<u8>, u16> = Default::default();
    let Value::Array(ranges) = v else {
        return vec![];
    };
    for r in ranges {
        let Value::Array(parts) = r else { continue };
        let (Some(Value::Int(start)), Some(Value::Array(master))) = (parts.first(), parts.get(2))
        else {
            continue;
        };
        let id = match (master.get(2), master.first(), master.get(1)) {
            (Some(Value::BulkString(id)), ..) => id.clone(),
            (_, Some(Value::BulkString(host)), Some(Value::Int(port))) => {
                format!("{}:{port}", String::from_utf8_lossy(host)).into_bytes()
            }
            _ => continue,
        };
        let Ok(start) = u16::try_from(*start) else {
            continue;
        };
        let e = by_master.entry(id).or_insert(start);
        *e = (*e).min(start);
    }
    let mut slots: Vec<u16> = by_master.into_values().collect();
    slots.sort_unstable();
    slots
}

/// From a `CLUSTER SLOTS` reply, each range with its master's `host:port`, sorted.
pub fn owners(v: &Value) -> Vec<(i64, i64, String)> {
    let Value::Array(ranges) = v else {
        return vec![];
    };
    let mut out: Vec<(i64, i64, String)> = ranges
        .iter()
        .filter_map(|r| {
            let Value::Array(parts) = r else { return None };
            match (parts.first(), parts.get(1), parts.get(2)) {
                (Some(Value::Int(a)), Some(Value::Int(b)), Some(Value::Array(m))) => {
                    match (m.first(), m.get(1)) {
                        (Some(Value::BulkString(h)), Some(Value::Int(p))) => {
                            Some((*a, *b, format!("{}:{p}", String::from_utf8_lossy(h))))
                        }
                        _ => None,
                    }
                }
                _ => None,
            }
        })
        .collect();
    out.sort();
    out
}

/// Bits of a cluster SCAN cursor that carry the node's own cursor; the bits above name the
/// shard (its index in [`Conn::shards`]).
const NODE_CURSOR_BITS: u32 = 48;

/// Splits a storage SCAN cursor into (shard index, that node's cursor).
pub fn split_cursor(cursor: u64) -> (usize, u64) {
    (
        (cursor >> NODE_CURSOR_BITS) as usize,
        cursor & ((1 << NODE_CURSOR_BITS) - 1),
    )
}

/// The storage SCAN cursor after a node answered `next` for shard `index` of `shards`:
/// the same shard while the node is not done, then the next shard, 0 after the last.
/// `None`: the node's cursor does not fit (a keyspace of > 2^48 buckets).
pub fn join_cursor(index: usize, next: u64, shards: usize) -> Option<u64> {
    if next >= 1 << NODE_CURSOR_BITS {
        return None;
    }
    if next != 0 {
        return Some(((index as u64) << NODE_CURSOR_BITS) | next);
    }
    if index + 1 >= shards {
        Some(0)
    } else {
        Some(((index + 1) as u64) << NODE_CURSOR_BITS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    fn range(start: i64, end: i64, host: &str, port: i64, id: &str) -> Value {
        Value::Array(vec![
            Value::Int(start),
            Value::Int(end),
            Value::Array(vec![bulk(host), Value::Int(port), bulk(id)]),
            Value::Array(vec![bulk(host), Value::Int(port + 100), bulk("replica")]),
        ])
    }

    #[test]
    fn seeds_and_cluster_flag() {
        assert_eq!(
            Target::seeds("redis://a:1, redis://b:2,,"),
            vec!["redis://a:1", "redis://b:2"]
        );
        assert_eq!(Target::seeds("redis://a:1"), vec!["redis://a:1"]);
        assert!(cluster_enabled("# Cluster\r\ncluster_enabled:1\r\n"));
        assert!(!cluster_enabled("# Cluster\r\ncluster_enabled:0\r\n"));
        assert!(!cluster_enabled(""));
    }

    #[test]
    fn first_slot_of_each_master() {
        let v = Value::Array(vec![
            range(10923, 16383, "h", 3, "c"),
            range(0, 5460, "h", 1, "a"),
            range(5461, 10922, "h", 2, "b"),
            // A range of master "a" after resharding: still one shard, named by slot 0.
            range(12000, 12001, "h", 1, "a"),
        ]);
        assert_eq!(first_slots(&v), vec![0, 5461, 10923]);
        assert_eq!(
            owners(&v),
            vec![
                (0, 5460, "h:1".to_string()),
                (5461, 10922, "h:2".to_string()),
                (10923, 16383, "h:3".to_string()),
                (12000, 12001, "h:1".to_string()),
            ]
        );
        assert_eq!(first_slots(&Value::Nil), Vec::<u16>::new());
    }

    #[test]
    fn cursors_walk_every_shard_once() {
        assert_eq!(split_cursor(0), (0, 0));
        // One server: the node's cursor, unchanged.
        assert_eq!(join_cursor(0, 17, 1), Some(17));
        assert_eq!(join_cursor(0, 0, 1), Some(0));
        // Three shards: a node done moves to the next shard; the last one ends the scan.
        let c = join_cursor(0, 0, 3).unwrap();
        assert_eq!(split_cursor(c), (1, 0));
        let c = join_cursor(1, 99, 3).unwrap();
        assert_eq!(split_cursor(c), (1, 99));
        assert_eq!(join_cursor(2, 0, 3), Some(0));
        assert_eq!(join_cursor(0, 1 << 48, 3), None);
    }
}
