//! Redis operations of the storage service: one atomic Lua script per write, pipelined
//! reads over one multiplexed connection ([`crate::backend::Conn`]: one server through the
//! reconnecting `ConnectionManager`, or a Redis Cluster through the cluster client). Every
//! script and pipeline touches the keys of one (tenant, resource), so one hash slot; what
//! needs every key (SCAN, the persistence and epoch checks) goes to each master in turn.
//!
//! Request path: gateway/registry → gRPC (`server.rs`) → `Store` → Redis.

use crate::backend::{Conn, Target};
use crate::durability::{Durability, EPOCH_KEY, EPOCH_LUA, RAISE_LUA, Verdict};
use crate::keys::{Keyspace, object_key, parse_stored, range};
use crate::replies::{Created, Deleted, Updated};
use bytes::Bytes;
use crdplane_core::ApiError;
use redis::{Script, Value};

/// An object as stored: its JSON and resourceVersion.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    /// The object's JSON, resourceVersion included.
    pub json: Bytes,
    /// The object's resourceVersion (the revision of its last write).
    pub rv: u64,
}

/// One page of a list.
#[derive(Debug, Default)]
pub struct Page {
    /// `<namespace>/<name>` key and object, in key order.
    pub items: Vec<(String, Stored)>,
    /// The resource's revision the page was read at (the list's resourceVersion).
    pub revision: u64,
    /// Objects after this page in the requested range.
    pub remaining: u64,
    /// With an `exact` revision below `revision`: the keys written after it, and the
    /// revision of the first such write still in the history (0 = none in the history).
    pub later: Option<Later>,
}

/// Writes after a requested revision, read atomically with a page.
#[derive(Debug, Default, PartialEq)]
pub struct Later {
    /// `<namespace>/<name>` keys written after the requested revision.
    pub keys: Vec<String>,
    /// Revision of the first such write still in the history (0 = none).
    pub first_rv: u64,
}

/// How a page read relates to the state at a requested revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtRevision {
    /// Nothing written after the revision could appear in the page: it is that state.
    Same,
    /// A write after the revision touched a key the page covers.
    Changed,
    /// The history no longer covers every write after the revision: unknown.
    Gone,
}

impl Page {
    /// Whether this page is the state at revision `exact` for a read of `namespace` after
    /// `start_after` (writes to keys at or before `start_after`, or in other namespaces,
    /// do not matter).
    pub fn consistent_at(&self, exact: u64, namespace: &str, start_after: &str) -> AtRevision {
        if exact == 0 || exact >= self.revision {
            return AtRevision::Same;
        }
        let Some(l) = &self.later else {
            return AtRevision::Gone;
        };
        if l.first_rv != exact + 1 {
            return AtRevision::Gone;
        }
        let prefix = format!("{namespace}/");
        let touched = l
            .keys
            .iter()
            .any(|k| k.as_str() > start_after && (namespace.is_empty() || k.starts_with(&prefix)));
        if touched {
            AtRevision::Changed
        } else {
            AtRevision::Same
        }
    }
}

/// Settings of a [`Store`] (see [`crate::Config`]).
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Most events kept per (tenant, resource) for watch resume (the memory bound).
    pub history_len: usize,
    /// Seconds of events kept per (tenant, resource) (0 = by `history_len` only).
    pub history_window_secs: u64,
    /// What a write must reach before it is acknowledged.
    pub durability: Durability,
    /// Bound of one Redis connect or command (see [`crate::manager_config`]).
    pub redis_timeout: std::time::Duration,
    /// Replicas that must have each write before it is acknowledged (Redis `WAIT`; 0 = the
    /// master alone, see [`crate::durability`]).
    pub wait_replicas: u32,
}

/// Redis connection and loaded scripts: every read and write of the storage service.
#[derive(Clone)]
pub struct Store {
    conn: Conn,
    list: std::sync::Arc<Script>,
    /// lua/owners.lua + lua/scan_owned.lua: one page of the collector's resync.
    scan_owned: std::sync::Arc<Script>,
    /// lua/drop_keyspace.lua: a purged triple's keys but its revision counter.
    drop_keyspace: std::sync::Arc<Script>,
    epoch_script: std::sync::Arc<Script>,
    raise_script: std::sync::Arc<Script>,
    /// The write scripts of the current recovery epoch.
    writes: std::sync::Arc<std::sync::RwLock<std::sync::Arc<WriteScripts>>>,
    /// Why writes are refused (the Redis persistence settings cannot give `durability`).
    refusal: std::sync::Arc<std::sync::RwLock<Option<String>>>,
    /// Most events kept per (tenant, resource) for watch resume.
    pub history_len: usize,
    history_window_secs: u64,
    durability: Durability,
    /// Wait for this many replicas to acknowledge each write (`WAIT`) before answering.
    wait_replicas: u32,
    /// Bound of one Redis command; also `WAIT`'s timeout.
    redis_timeout: std::time::Duration,
    /// The Redis deployment connected to.
    target: Target,
}

/// The write scripts (lua/prelude.lua, owners.lua, expiry.lua, remove.lua + create/update/
/// delete/expire) of one recovery epoch: the
/// prelude carries the epoch's revision floor and the history window, so each epoch has its
/// own SHAs, and a replica still on an older epoch gets NOSCRIPT from a restarted Redis and
/// refreshes its epoch before writing (see [`crate::durability`]).
struct WriteScripts {
    epoch: u64,
    create: (String, Script),
    update: (String, Script),
    delete: (String, Script),
    /// The expiry sweeper's step (lua/expire.lua): deletes through remove.lua as `delete` does.
    expire: (String, Script),
}

impl WriteScripts {
    /// `sharded`: live events go out with SPUBLISH (Redis Cluster: only to the shard that owns
    /// the triple's slot) instead of PUBLISH (every node).
    fn new(epoch: u64, window_secs: u64, sharded: bool) -> Self {
        let prelude = include_str!("lua/prelude.lua")
            .replace("%FLOOR%", &crate::durability::floor(epoch).to_string())
            .replace("%WINDOW%", &window_secs.to_string());
        let publish = if sharded { "SPUBLISH" } else { "PUBLISH" };
        let build = |body: &str| {
            let text = format!(
                "{prelude}{}{}{}{body}",
                include_str!("lua/owners.lua"),
                include_str!("lua/expiry.lua"),
                include_str!("lua/remove.lua")
            )
            .replace("%PUBLISH%", publish);
            let s = Script::new(&text);
            (text, s)
        };
        Self {
            epoch,
            create: build(include_str!("lua/create.lua")),
            update: build(include_str!("lua/update.lua")),
            delete: build(include_str!("lua/delete.lua")),
            expire: build(include_str!("lua/expire.lua")),
        }
    }
}

/// The seven keys every write script takes (lua/prelude.lua), after its SHA.
fn write_keys<'a>(cmd: &'a mut redis::Cmd, ks: &Keyspace) -> &'a mut redis::Cmd {
    cmd.arg(7)
        .arg(&ks.rev)
        .arg(&ks.obj)
        .arg(&ks.idx)
        .arg(&ks.ev)
        .arg(&ks.evt)
        .arg(&ks.own)
        .arg(&ks.ttl)
}

fn is_noscript(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
}

/// A Redis failure as the client sees it. Redis unreachable (connection refused or lost,
/// timed out) is 503 ServiceUnavailable with `retryAfterSeconds` (the gateway sends it as
/// `Retry-After`), without the Redis error text or address (logged here instead); upstream
/// answers a storage it cannot reach with a retryable server error the same way
/// (`apiserver/pkg/storage/errors.go`, responsewriters `ErrorNegotiated` sets Retry-After
/// from the Status details).
pub(crate) fn redis_err(e: redis::RedisError) -> ApiError {
    if e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_unrecoverable_error()
    {
        tracing::warn!(error = %e, "redis unavailable");
        return backend_unavailable();
    }
    ApiError::unavailable(format!("storage backend error: {e}"))
}

/// The Status of a request storage cannot serve because Redis is unreachable.
pub fn backend_unavailable() -> ApiError {
    let mut e = ApiError::unavailable("the storage backend is unavailable, please try again later");
    e.details = Some(Box::new(crdplane_core::status::StatusDetails {
        retry_after_seconds: 1,
        ..Default::default()
    }));
    e
}

/// The bytes of one write (the JSON split at the resourceVersion slot) and its time to live
/// in seconds (0 = the object never expires).
#[derive(Debug, Clone, Copy)]
pub struct Write<'a> {
    /// The JSON before the resourceVersion slot.
    pub head: &'a [u8],
    /// The JSON after the resourceVersion slot.
    pub tail: &'a [u8],
    /// Seconds until the object expires (0 = never).
    pub ttl_seconds: u64,
}

/// One object of a `create_many`: keyspace, namespace, name, the JSON split at the
/// resourceVersion slot (head, tail), and its ttl in seconds (0 = never expires).
pub type NewObject<'a> = (&'a Keyspace, &'a str, &'a str, &'a [u8], &'a [u8], u64);

fn stored_from_value(v: Vec<u8>) -> Result<Stored, ApiError> {
    let (rv, start) =
        parse_stored(&v).ok_or_else(|| ApiError::internal("corrupt stored object"))?;
    let b = Bytes::from(v);
    Ok(Stored {
        json: b.slice(start..),
        rv,
    })
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        Value::BulkString(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0),
        _ => 0,
    }
}

/// The value of a one-parameter `CONFIG GET` reply: `[name, value]` (RESP2) or
/// `{name: value}` (RESP3, the cluster client's protocol).
fn config_value(v: Value) -> Option<String> {
    let value = match v {
        Value::Array(mut a) if a.len() == 2 => a.pop(),
        Value::Map(mut m) if m.len() == 1 => m.pop().map(|(_, v)| v),
        _ => None,
    }?;
    bulk(value).and_then(|b| String::from_utf8(b).ok())
}

fn bulk(v: Value) -> Option<Vec<u8>> {
    match v {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.into_bytes()),
        _ => None,
    }
}

/// Redis answers but its persistence settings cannot give the chosen durability: a
/// configuration error, so the process does not start (unlike an unreachable Redis, which
/// [`crate::serve`] waits out).
#[derive(Debug)]
pub struct Refused(pub String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "refusing to serve: {}", self.0)
    }
}

impl std::error::Error for Refused {}

impl Store {
    /// Connects, refuses to start when Redis's persistence settings cannot give the chosen
    /// durability (warns when they give it only in part), and enters the current recovery
    /// epoch. A background task re-checks both every second (a restarted Redis, a `CONFIG
    /// SET` behind our back): see [`crate::durability`].
    pub async fn connect(target: &Target, opts: StoreOptions) -> anyhow::Result<Self> {
        let conn = Conn::open(target, opts.redis_timeout).await?;
        let sharded = conn.is_cluster();
        let store = Self {
            conn,
            list: std::sync::Arc::new(Script::new(include_str!("lua/list.lua"))),
            scan_owned: std::sync::Arc::new(Script::new(&format!(
                "{}{}",
                include_str!("lua/owners.lua"),
                include_str!("lua/scan_owned.lua")
            ))),
            drop_keyspace: std::sync::Arc::new(Script::new(include_str!("lua/drop_keyspace.lua"))),
            epoch_script: std::sync::Arc::new(Script::new(EPOCH_LUA)),
            raise_script: std::sync::Arc::new(Script::new(RAISE_LUA)),
            writes: std::sync::Arc::new(std::sync::RwLock::new(std::sync::Arc::new(
                WriteScripts::new(0, opts.history_window_secs, sharded),
            ))),
            refusal: Default::default(),
            history_len: opts.history_len.max(16),
            history_window_secs: opts.history_window_secs,
            durability: opts.durability,
            wait_replicas: opts.wait_replicas,
            redis_timeout: opts.redis_timeout,
            target: target.clone(),
        };
        match store.persistence_verdict().await {
            Verdict::Refuse(msg) => return Err(Refused(msg).into()),
            Verdict::Warn(msg) => tracing::warn!("{msg}"),
            Verdict::Ok => {}
        }
        store
            .refresh_epoch()
            .await
            .map_err(|e| anyhow::anyhow!("{}", e.message))?;
        let watchdog = store.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                // Redis unreachable: nothing to judge (writes fail on their own meanwhile).
                let mut c = watchdog.conn.clone();
                if redis::cmd("PING")
                    .query_async::<String>(&mut c)
                    .await
                    .is_err()
                {
                    continue;
                }
                let refusal = match watchdog.persistence_verdict().await {
                    Verdict::Refuse(msg) => Some(msg),
                    _ => None,
                };
                let changed = *watchdog.refusal.read().expect("lock") != refusal;
                if changed {
                    match &refusal {
                        Some(msg) => tracing::error!("refusing writes: {msg}"),
                        None => tracing::info!("Redis persistence settings fine again"),
                    }
                    *watchdog.refusal.write().expect("lock") = refusal;
                }
                if let Err(e) = watchdog.refresh_epoch().await {
                    tracing::debug!("epoch check: {}", e.message);
                }
            }
        });
        Ok(store)
    }

    /// Judges Redis's current `appendonly` / `appendfsync` against the chosen durability.
    async fn persistence_verdict(&self) -> Verdict {
        if self.durability == Durability::Memory {
            return Verdict::Ok;
        }
        let mut c = self.conn.clone();
        let Ok(shards) = c.shards().await else {
            return crate::durability::judge(self.durability, None, None);
        };
        // Every master must give the durability; the worst verdict is the store's.
        let mut worst = Verdict::Ok;
        for slot in shards {
            let mut get = Vec::with_capacity(2);
            for name in ["appendonly", "appendfsync"] {
                let v = c
                    .on_shard::<Value>(slot, redis::cmd("CONFIG").arg("GET").arg(name))
                    .await;
                get.push(v.ok().and_then(config_value));
            }
            let (ao, fs) = (get[0].take(), get[1].take());
            let v = crate::durability::judge(self.durability, ao.as_deref(), fs.as_deref());
            worst = match (worst, v) {
                (w @ Verdict::Refuse(_), _)
                | (Verdict::Ok | Verdict::Warn(_), w @ Verdict::Refuse(_)) => w,
                (Verdict::Ok, v) | (v, Verdict::Ok) => v,
                (w @ Verdict::Warn(_), Verdict::Warn(_)) => w,
            };
        }
        worst
    }

    /// The Redis deployment this store is connected to.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// The write scripts of the current epoch.
    fn scripts(&self) -> std::sync::Arc<WriteScripts> {
        self.writes.read().expect("lock").clone()
    }

    /// The current recovery epoch (see [`crate::durability`]).
    pub fn epoch(&self) -> u64 {
        self.scripts().epoch
    }

    /// Enters the recovery epoch of the Redis server we are connected to (starting a new one
    /// when that server is new), and moves every revision counter up to its floor.
    pub async fn refresh_epoch(&self) -> Result<(), ApiError> {
        let mut c = self.conn.clone();
        // One server: the script reads its run id and key count itself, atomically. A
        // cluster: the run ids of all masters (a restarted or failed-over master is a server
        // not seen before) and whether any master holds keys.
        let (run, nonempty) = if c.is_cluster() {
            let infos: Vec<String> = c
                .on_masters(redis::cmd("INFO").arg("server"))
                .await
                .map_err(redis_err)?;
            let sizes: Vec<u64> = c
                .on_masters(&redis::cmd("DBSIZE"))
                .await
                .map_err(redis_err)?;
            let runs: Vec<&str> = infos
                .iter()
                .map(|i| crate::durability::run_id(i).unwrap_or("?"))
                .collect();
            (
                crate::durability::cluster_run(&runs),
                if sizes.iter().any(|&n| n > 0) {
                    "1"
                } else {
                    "0"
                },
            )
        } else {
            (String::new(), "")
        };
        let r: Value = self
            .epoch_script
            .key(EPOCH_KEY)
            .arg(run)
            .arg(nonempty)
            .arg(crate::durability::KNOWN_RUNS)
            .invoke_async(&mut c)
            .await
            .map_err(redis_err)?;
        let crate::replies::Epoch { epoch, started } = crate::replies::epoch(r)?;
        if epoch == self.epoch() && !started {
            return Ok(());
        }
        tracing::info!(
            epoch,
            started,
            floor = crate::durability::floor(epoch),
            "recovery epoch"
        );
        *self.writes.write().expect("lock") = std::sync::Arc::new(WriteScripts::new(
            epoch,
            self.history_window_secs,
            self.conn.is_cluster(),
        ));
        self.raise_counters(crate::durability::floor(epoch)).await
    }

    /// Moves every revision counter up to `floor` (the write scripts do it too, lazily; this
    /// makes reads of idle resources report a revision at or past the floor at once).
    async fn raise_counters(&self, floor: u64) -> Result<(), ApiError> {
        if floor == 0 {
            return Ok(());
        }
        let mut c = self.conn.clone();
        let mut cursor = 0u64;
        loop {
            let (keys, next) = self.scan_step("cp:*:rev", cursor, 1000).await?;
            for k in keys {
                let r: Value = self
                    .raise_script
                    .key(&k)
                    .arg(floor)
                    .invoke_async(&mut c)
                    .await
                    .map_err(redis_err)?;
                crate::replies::raise(r)?;
            }
            if next == 0 {
                return Ok(());
            }
            cursor = next;
        }
    }

    /// Err when writes are refused (see [`Store::connect`]).
    fn writable(&self) -> Result<(), ApiError> {
        match &*self.refusal.read().expect("lock") {
            Some(msg) => Err(ApiError::unavailable(format!(
                "storage refuses writes: {msg}"
            ))),
            None => Ok(()),
        }
    }

    /// After NOSCRIPT (a restarted or flushed Redis): enters the current epoch first, then
    /// loads its write scripts.
    async fn reload_scripts(&self, c: &mut Conn) -> Result<(), ApiError> {
        self.refresh_epoch().await?;
        let s = self.scripts();
        // One command per script: on a cluster the client sends each SCRIPT LOAD to every
        // master (a pipeline of keyless commands would go to one random node).
        for (text, _) in [&s.create, &s.update, &s.delete, &s.expire] {
            let _: Value = redis::cmd("SCRIPT")
                .arg("LOAD")
                .arg(text)
                .query_async(c)
                .await
                .map_err(redis_err)?;
        }
        Ok(())
    }

    /// Runs write script `pick` (update, delete or expire) on `ks` with `args` after the seven
    /// keys.
    async fn run_write(
        &self,
        pick: fn(&WriteScripts) -> &(String, Script),
        ks: &Keyspace,
        args: impl Fn(&mut redis::Cmd),
    ) -> Result<Value, ApiError> {
        self.writable()?;
        let mut c = self.conn.clone();
        let mut reloaded = false;
        let mut patience = crate::backend::Patience::start();
        loop {
            let scripts = self.scripts();
            let mut cmd = redis::cmd("EVALSHA");
            write_keys(cmd.arg(pick(&scripts).1.get_hash()), ks);
            args(&mut cmd);
            let reply = if self.wait_replicas == 0 {
                cmd.query_async::<Value>(&mut c).await
            } else {
                let mut p = redis::pipe();
                p.ignore_errors().add_command(cmd);
                self.add_wait(&mut p);
                match p
                    .query_async::<Vec<redis::RedisResult<Value>>>(&mut c)
                    .await
                {
                    Ok(mut r) if r.len() == 2 => {
                        let waited = r.pop().expect("two replies");
                        let reply = r.pop().expect("two replies");
                        if reply.is_ok() {
                            self.check_wait(waited)?;
                        }
                        reply
                    }
                    Ok(_) => return Err(ApiError::internal("short redis pipeline reply")),
                    Err(e) => Err(e),
                }
            };
            match reply {
                Err(e) if !reloaded && is_noscript(&e) => {
                    self.reload_scripts(&mut c).await?;
                    reloaded = true;
                }
                // The script's slot is moving (with --wait-replicas the script travels in
                // a pipeline, which the connection does not resend itself).
                Err(e) if patience.allows(&e) => patience.pause().await,
                r => return r.map_err(redis_err),
            }
        }
    }

    /// Appends `WAIT <replicas> <timeout>` to a pipeline of writes (`--wait-replicas`): sent on
    /// the same connection right after them, to the master that ran them, it returns once that
    /// many replicas have everything this connection wrote so far.
    fn add_wait(&self, p: &mut redis::Pipeline) {
        p.cmd("WAIT")
            .arg(self.wait_replicas)
            .arg(self.wait_timeout_ms());
    }

    /// Half the Redis timeout: WAIT's own answer (too few replicas) must come before the
    /// connection's reply timeout turns it into "Redis unreachable".
    fn wait_timeout_ms(&self) -> u64 {
        (self.redis_timeout.as_millis() as u64 / 2).max(1)
    }

    /// Fewer replicas than asked for confirmed the writes before them within the timeout:
    /// the write may survive or not, so the caller gets 504 Timeout (as for an etcd commit
    /// that timed out) and retries.
    fn check_wait(&self, waited: redis::RedisResult<Value>) -> Result<(), ApiError> {
        let n = match waited {
            Ok(v) => int(&v),
            Err(e) => return Err(redis_err(e)),
        };
        if n >= i64::from(self.wait_replicas) {
            return Ok(());
        }
        tracing::warn!(
            replicas = n,
            wanted = self.wait_replicas,
            "write not confirmed by enough replicas in time"
        );
        Err(ApiError::dependency_timeout())
    }

    /// One object by namespace and name; absent is 404 NotFound.
    pub async fn get(
        &self,
        ks: &Keyspace,
        namespace: &str,
        name: &str,
    ) -> Result<Stored, ApiError> {
        let mut c = self.conn.clone();
        let v: Option<Vec<u8>> = redis::cmd("HGET")
            .arg(&ks.obj)
            .arg(object_key(namespace, name))
            .query_async(&mut c)
            .await
            .map_err(redis_err)?;
        match v {
            Some(v) => stored_from_value(v),
            None => Err(ApiError::not_found(&ks.gr, name)),
        }
    }

    /// Several objects in one Redis pipeline (`None`: not found), in the order asked.
    pub async fn get_many(
        &self,
        keys: &[(Keyspace, String, String)],
    ) -> Result<Vec<Option<Stored>>, ApiError> {
        crate::metrics::batch_size("get", keys.len());
        let mut c = self.conn.clone();
        let vs: Vec<Option<Vec<u8>>> = if c.is_cluster() {
            // Keys of many (tenant, resource) triples live on many slots: one pipeline per
            // triple (one slot), all in flight at once over the cluster client's connections.
            let mut groups: Vec<(&str, Vec<usize>)> = Vec::new();
            for (i, (ks, ..)) in keys.iter().enumerate() {
                match groups.iter_mut().find(|(obj, _)| *obj == ks.obj) {
                    Some((_, idx)) => idx.push(i),
                    None => groups.push((&ks.obj, vec![i])),
                }
            }
            let reads = groups.iter().map(|(obj, idx)| {
                let mut c = c.clone();
                let mut p = redis::pipe();
                for &i in idx {
                    let (_, ns, name) = &keys[i];
                    p.cmd("HGET").arg(*obj).arg(object_key(ns, name));
                }
                async move { p.query_async::<Vec<Option<Vec<u8>>>>(&mut c).await }
            });
            let answers = futures::future::try_join_all(reads)
                .await
                .map_err(redis_err)?;
            let mut out = vec![None; keys.len()];
            for ((_, idx), vals) in groups.iter().zip(answers) {
                for (&i, v) in idx.iter().zip(vals) {
                    out[i] = v;
                }
            }
            out
        } else {
            let mut p = redis::pipe();
            for (ks, ns, name) in keys {
                p.cmd("HGET").arg(&ks.obj).arg(object_key(ns, name));
            }
            p.query_async(&mut c).await.map_err(redis_err)?
        };
        vs.into_iter()
            .map(|v| v.map(stored_from_value).transpose())
            .collect()
    }

    /// The resourceVersion of an object, or `None` when it does not exist.
    pub async fn exists(
        &self,
        ks: &Keyspace,
        namespace: &str,
        name: &str,
    ) -> Result<Option<u64>, ApiError> {
        match self.get(ks, namespace, name).await {
            Ok(s) => Ok(Some(s.rv)),
            Err(e) if e.code == 404 => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Dependents of each owner uid (the `own` index, see keys.rs): up to `limit` per uid
    /// after `start_after`, as (uid, key, object). Two pipelines: index ranges, then objects;
    /// an index entry whose object is gone meanwhile is skipped.
    pub async fn dependents(
        &self,
        ks: &Keyspace,
        uids: &[String],
        limit: usize,
        start_after: &str,
    ) -> Result<Vec<(String, String, Stored)>, ApiError> {
        if uids.is_empty() {
            return Ok(vec![]);
        }
        let mut p = redis::pipe();
        for u in uids {
            let min = if start_after.is_empty() {
                format!("[{u}\0")
            } else {
                format!("({u}\0{start_after}")
            };
            p.cmd("ZRANGE")
                .arg(&ks.own)
                .arg(min)
                .arg(format!("({u}\u{1}"))
                .arg("BYLEX")
                .arg("LIMIT")
                .arg(0)
                .arg(limit);
        }
        let mut c = self.conn.clone();
        let ranges: Vec<Vec<String>> = p.query_async(&mut c).await.map_err(redis_err)?;
        let mut found: Vec<(String, String)> = Vec::new();
        for (u, members) in uids.iter().zip(ranges) {
            for m in members {
                if let Some((_, k)) = m.split_once('\0') {
                    found.push((u.clone(), k.to_string()));
                }
            }
        }
        if found.is_empty() {
            return Ok(vec![]);
        }
        let mut p = redis::pipe();
        for (_, k) in &found {
            p.cmd("HGET").arg(&ks.obj).arg(k);
        }
        let vs: Vec<Option<Vec<u8>>> = p.query_async(&mut c).await.map_err(redis_err)?;
        let mut out = Vec::new();
        for ((u, k), v) in found.into_iter().zip(vs) {
            if let Some(v) = v {
                out.push((u, k, stored_from_value(v)?));
            }
        }
        Ok(out)
    }

    /// One step of a Redis `SCAN` over the triples' ordered indexes (`keys::IDX_PATTERN`):
    /// the (tenant, group, resource) triples found and the next cursor (0 = done).
    pub async fn scan_resources(
        &self,
        cursor: u64,
        count: usize,
    ) -> Result<(Vec<(String, String, String)>, u64), ApiError> {
        self.scan_triples(
            crate::keys::IDX_PATTERN,
            crate::keys::parse_idx_key,
            cursor,
            count,
        )
        .await
    }

    /// One step of a Redis `SCAN` over every key of `tenant` (`keys::tenant_pattern`; the
    /// tenant must be a DNS label): the distinct (tenant, group, resource) triples found, in
    /// order, and the next cursor (0 = done).
    pub async fn scan_tenant(
        &self,
        tenant: &str,
        cursor: u64,
        count: usize,
    ) -> Result<(Vec<(String, String, String)>, u64), ApiError> {
        let (mut found, next) = self
            .scan_triples(
                &crate::keys::tenant_pattern(tenant),
                |k| crate::keys::parse_tenant_key(k, tenant),
                cursor,
                count,
            )
            .await?;
        found.sort_unstable();
        found.dedup();
        Ok((found, next))
    }

    /// Drops the keys of `ks` but its revision counter (obj, idx, ev, evt, own, ttl: UNLINK),
    /// atomically and only while it holds no object: `Some(keys removed)`, or `None` when an
    /// object exists (written since the caller deleted them all; nothing is removed).
    pub async fn drop_keyspace(&self, ks: &Keyspace) -> Result<Option<u64>, ApiError> {
        self.writable()?;
        let mut c = self.conn.clone();
        let r: i64 = self
            .drop_keyspace
            .key(&ks.obj)
            .key(&ks.idx)
            .key(&ks.ev)
            .key(&ks.evt)
            .key(&ks.own)
            .key(&ks.ttl)
            .invoke_async(&mut c)
            .await
            .map_err(redis_err)?;
        Ok(u64::try_from(r).ok())
    }

    /// One step of a Redis `SCAN` (never KEYS) over the keys matching `pattern`, each
    /// turned into its (tenant, group, resource) triple by `parse`; the next cursor (0 =
    /// done).
    async fn scan_triples(
        &self,
        pattern: &str,
        parse: impl Fn(&str) -> Option<(String, String, String)>,
        cursor: u64,
        count: usize,
    ) -> Result<(Vec<(String, String, String)>, u64), ApiError> {
        let (keys, next) = self.scan_step(pattern, cursor, count).await?;
        Ok((keys.iter().filter_map(|k| parse(k)).collect(), next))
    }

    /// One step of a Redis `SCAN MATCH pattern COUNT count` over the whole deployment: on a
    /// cluster the cursor also names the master being scanned (`backend::split_cursor`), and
    /// the scan moves from one master to the next.
    async fn scan_step(
        &self,
        pattern: &str,
        cursor: u64,
        count: usize,
    ) -> Result<(Vec<String>, u64), ApiError> {
        let mut c = self.conn.clone();
        let shards = c.shards().await.map_err(redis_err)?;
        let (index, node_cursor) = crate::backend::split_cursor(cursor);
        let Some(&slot) = shards.get(index) else {
            // The cluster shrank under a running scan: it is over.
            return Ok((vec![], 0));
        };
        let (next, keys): (u64, Vec<String>) = c
            .on_shard(
                slot,
                redis::cmd("SCAN")
                    .arg(node_cursor)
                    .arg("MATCH")
                    .arg(pattern)
                    .arg("COUNT")
                    .arg(count),
            )
            .await
            .map_err(redis_err)?;
        let next = crate::backend::join_cursor(index, next, shards.len())
            .ok_or_else(|| ApiError::internal("redis SCAN cursor out of range"))?;
        Ok((keys, next))
    }

    /// One page of the collector's resync over `ks` (lua/scan_owned.lua): of the `limit`
    /// keys after `start_after`, the objects with owner references (key, object); the
    /// owner-index entries written because they were missing; the number of keys examined;
    /// the last key examined ("" = none left).
    pub async fn scan_owned(
        &self,
        ks: &Keyspace,
        start_after: &str,
        limit: usize,
    ) -> Result<(Vec<(String, Stored)>, u64, usize, String), ApiError> {
        let min = if start_after.is_empty() {
            "-".to_string()
        } else {
            format!("({start_after}")
        };
        let mut c = self.conn.clone();
        let r: Vec<Value> = self
            .scan_owned
            .key(&ks.rev)
            .key(&ks.obj)
            .key(&ks.idx)
            .key(&ks.ev)
            .key(&ks.evt)
            .key(&ks.own)
            .arg(min)
            .arg(limit)
            .invoke_async(&mut c)
            .await
            .map_err(redis_err)?;
        let mut it = r.into_iter();
        let repaired = it.next().map(|v| int(&v)).unwrap_or(0).max(0) as u64;
        let examined = it.next().map(|v| int(&v)).unwrap_or(0).max(0) as usize;
        let last = it
            .next()
            .and_then(bulk)
            .and_then(|k| String::from_utf8(k).ok())
            .unwrap_or_default();
        let mut items = Vec::new();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            let k = bulk(k)
                .and_then(|k| String::from_utf8(k).ok())
                .ok_or_else(|| ApiError::internal("corrupt scan reply"))?;
            let v = bulk(v).ok_or_else(|| ApiError::internal("corrupt scan reply"))?;
            items.push((k, stored_from_value(v)?));
        }
        // A short page is the last one.
        let next = if examined < limit {
            String::new()
        } else {
            last
        };
        Ok((items, repaired, examined, next))
    }

    /// The resource's current revision (0 before its first write).
    pub async fn revision(&self, ks: &Keyspace) -> Result<u64, ApiError> {
        let mut c = self.conn.clone();
        let v: Option<u64> = redis::cmd("GET")
            .arg(&ks.rev)
            .query_async(&mut c)
            .await
            .map_err(redis_err)?;
        Ok(v.unwrap_or(0))
    }

    /// Creates one object at the next revision; a taken name is 409 AlreadyExists.
    pub async fn create(
        &self,
        ks: &Keyspace,
        namespace: &str,
        name: &str,
        w: Write<'_>,
    ) -> Result<Stored, ApiError> {
        self.create_many(&[(ks, namespace, name, w.head, w.tail, w.ttl_seconds)])
            .await
            .pop()
            .unwrap_or_else(|| Err(ApiError::internal("storage lost a create")))
    }

    /// Creates in request order, each with exactly the outcome of a create of its own (a name
    /// given twice: the second gets AlreadyExists). The objects of one resource go to Redis as
    /// one run of the create script (one script call per resource, so keys of one hash tag
    /// only), all resources' runs in one pipeline; each object gets its own revision, stream
    /// entry and watch event. Results come in request order. A script cache flushed behind
    /// our back (NOSCRIPT) is reloaded and the affected runs retried once; runs refused while
    /// their slot moves between masters are sent again (`backend::Patience`).
    pub async fn create_many(&self, items: &[NewObject<'_>]) -> Vec<Result<Stored, ApiError>> {
        crate::metrics::batch_size("create", items.len());
        if let Err(e) = self.writable() {
            return items.iter().map(|_| Err(e.clone())).collect();
        }
        // Item indexes grouped by keyspace, in request order within each group.
        let mut groups: Vec<(&Keyspace, Vec<usize>)> = Vec::new();
        for (i, (ks, ..)) in items.iter().enumerate() {
            match groups.iter_mut().find(|(g, _)| g.obj == ks.obj) {
                Some((_, idx)) => idx.push(i),
                None => groups.push((ks, vec![i])),
            }
        }
        let mut out: Vec<Option<Result<Stored, ApiError>>> = items.iter().map(|_| None).collect();
        let mut pending: Vec<usize> = (0..groups.len()).collect();
        let mut c = self.conn.clone();
        let mut reloaded = false;
        let mut patience = crate::backend::Patience::start();
        loop {
            let scripts = self.scripts();
            // One pipeline for all resources on one server; on a cluster one per resource
            // (each is one slot), sent at once over the cluster client's connections.
            let buckets: Vec<Vec<usize>> = if c.is_cluster() {
                pending.iter().map(|&g| vec![g]).collect()
            } else {
                vec![pending.clone()]
            };
            let mut pipes = Vec::with_capacity(buckets.len());
            for bucket in &buckets {
                let mut p = redis::pipe();
                p.ignore_errors();
                for &g in bucket {
                    let (ks, idx) = &groups[g];
                    let mut cmd = redis::cmd("EVALSHA");
                    write_keys(cmd.arg(scripts.create.1.get_hash()), ks)
                        .arg(self.history_len)
                        .arg(&ks.channel)
                        .arg(ks.notify_channel())
                        .arg(&ks.tenant);
                    for &i in idx {
                        let (_, ns, name, head, tail, ttl) = items[i];
                        cmd.arg(object_key(ns, name))
                            .arg(head)
                            .arg(tail)
                            .arg(ttl.to_string());
                    }
                    p.add_command(cmd);
                }
                if self.wait_replicas > 0 {
                    self.add_wait(&mut p);
                }
                pipes.push(p);
            }
            let sent = pipes.iter().map(|p| {
                let mut c = c.clone();
                async move {
                    p.query_async::<Vec<redis::RedisResult<Value>>>(&mut c)
                        .await
                }
            });
            let answers = futures::future::join_all(sent).await;
            // (group, reply) of every run, or the pipeline's error for each of its groups.
            let mut replies: Vec<(usize, redis::RedisResult<Value>)> = Vec::new();
            let (mut noscript, mut moving) = (Vec::new(), Vec::new());
            for (bucket, answer) in buckets.iter().zip(answers) {
                match answer {
                    Ok(mut r) => {
                        let waited = if self.wait_replicas > 0 {
                            r.pop()
                        } else {
                            None
                        };
                        let unconfirmed = waited.and_then(|w| self.check_wait(w).err());
                        for (&g, reply) in bucket.iter().zip(r) {
                            match (&unconfirmed, reply) {
                                (Some(e), Ok(_)) => {
                                    for &i in &groups[g].1 {
                                        out[i] = Some(Err(e.clone()));
                                    }
                                }
                                (_, reply) => replies.push((g, reply)),
                            }
                        }
                    }
                    // Refused as a whole while the slot moves: on a cluster a bucket is one
                    // script (and WAIT), which did not run.
                    Err(e) if c.is_cluster() && patience.allows(&e) => moving.extend(bucket),
                    Err(e) => {
                        let e = redis_err(e);
                        for &g in bucket {
                            for &i in &groups[g].1 {
                                out[i] = Some(Err(e.clone()));
                            }
                        }
                    }
                }
            }
            for (g, reply) in replies {
                let (ks, idx) = &groups[g];
                match reply.map(|v| crate::replies::create(v, idx.len())) {
                    Ok(Ok(outcomes)) => {
                        for (&i, outcome) in idx.iter().zip(outcomes) {
                            let (_, _, name, head, tail, _) = items[i];
                            out[i] = Some(match outcome {
                                Created::Exists => Err(ApiError::already_exists(&ks.gr, name)),
                                Created::At(rv) => Ok(Stored {
                                    json: crdplane_core::rvslot::join(head, rv, tail).into(),
                                    rv,
                                }),
                            });
                        }
                    }
                    Ok(Err(malformed)) => {
                        let e = ApiError::from(malformed);
                        for &i in idx {
                            out[i] = Some(Err(e.clone()));
                        }
                    }
                    Err(e)
                        if !reloaded
                            && e.kind()
                                == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
                    {
                        noscript.push(g)
                    }
                    Err(e) if patience.allows(&e) => moving.push(g),
                    Err(e) => {
                        let e = redis_err(e);
                        for &i in idx {
                            out[i] = Some(Err(e.clone()));
                        }
                    }
                }
            }
            if !noscript.is_empty() {
                reloaded = true;
                if let Err(e) = self.reload_scripts(&mut c).await {
                    for &g in &noscript {
                        for &i in &groups[g].1 {
                            out[i] = Some(Err(e.clone()));
                        }
                    }
                    noscript.clear();
                }
            }
            if !moving.is_empty() {
                patience.pause().await;
            }
            pending = noscript;
            pending.extend(moving);
            if pending.is_empty() {
                break;
            }
            pending.sort_unstable();
        }
        out.into_iter()
            .map(|o| o.unwrap_or_else(|| Err(ApiError::internal("storage lost a create"))))
            .collect()
    }

    /// Replaces one object at the next revision; `expected` (0 = unconditional) must equal the
    /// stored resourceVersion, else 409 Conflict; absent is 404 NotFound.
    pub async fn update(
        &self,
        ks: &Keyspace,
        namespace: &str,
        name: &str,
        w: Write<'_>,
        expected: u64,
    ) -> Result<Stored, ApiError> {
        let Write {
            head,
            tail,
            ttl_seconds,
        } = w;
        let r = self
            .run_write(
                |s| &s.update,
                ks,
                |cmd| {
                    cmd.arg(object_key(namespace, name))
                        .arg(head)
                        .arg(tail)
                        .arg(self.history_len)
                        .arg(&ks.channel)
                        .arg(expected.to_string())
                        .arg(ks.notify_channel())
                        .arg(&ks.tenant)
                        .arg(ttl_seconds.to_string());
                },
            )
            .await?;
        match crate::replies::update(r)? {
            Updated::At(rv) => Ok(Stored {
                json: crdplane_core::rvslot::join(head, rv, tail).into(),
                rv,
            }),
            Updated::Stale { .. } => Err(ApiError::stale(&ks.gr, name)),
            Updated::NotFound => Err(ApiError::not_found(&ks.gr, name)),
        }
    }

    /// Deletes one object at the next revision, returning its last state; `expected` (0 =
    /// unconditional) must equal the stored resourceVersion, else 409 Conflict.
    pub async fn delete(
        &self,
        ks: &Keyspace,
        namespace: &str,
        name: &str,
        expected: u64,
    ) -> Result<Stored, ApiError> {
        let r = self
            .run_write(
                |s| &s.delete,
                ks,
                |cmd| {
                    cmd.arg(object_key(namespace, name))
                        .arg(self.history_len)
                        .arg(&ks.channel)
                        .arg(expected.to_string())
                        .arg(ks.notify_channel())
                        .arg(&ks.tenant);
                },
            )
            .await?;
        match crate::replies::delete(r)? {
            Deleted::At { rv, last } => Ok(Stored { json: last, rv }),
            Deleted::Stale { current } => Err(ApiError::conflict(
                &ks.gr,
                name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {expected}, ResourceVersion in object meta: {current}"
                ),
            )),
            Deleted::NotFound => Err(ApiError::not_found(&ks.gr, name)),
        }
    }

    /// Deletes up to `limit` objects of `ks` whose expiry is due (lua/expire.lua), each as
    /// [`Store::delete`] would; (deleted, due members examined — `limit` means more may be due).
    pub async fn expire(&self, ks: &Keyspace, limit: usize) -> Result<(u64, usize), ApiError> {
        let r = self
            .run_write(
                |s| &s.expire,
                ks,
                |cmd| {
                    cmd.arg(self.history_len)
                        .arg(&ks.channel)
                        .arg(ks.notify_channel())
                        .arg(&ks.tenant)
                        .arg(limit);
                },
            )
            .await?;
        match r {
            Value::Array(a) if a.len() == 2 => {
                Ok((int(&a[0]).max(0) as u64, int(&a[1]).max(0) as usize))
            }
            _ => Err(ApiError::internal("unexpected expire reply")),
        }
    }

    /// One step of a Redis `SCAN` over the triples' expiry sets (`keys::TTL_PATTERN`): the
    /// (tenant, group, resource) triples that have objects which expire, and the next cursor
    /// (0 = done).
    pub async fn scan_expiring(
        &self,
        cursor: u64,
        count: usize,
    ) -> Result<(Vec<(String, String, String)>, u64), ApiError> {
        self.scan_triples(
            crate::keys::TTL_PATTERN,
            crate::keys::parse_ttl_key,
            cursor,
            count,
        )
        .await
    }

    /// One page of up to `limit` objects (`None` = all) of `namespace` ("" = all) after `start_after`.
    pub async fn list_page(
        &self,
        ks: &Keyspace,
        namespace: &str,
        start_after: &str,
        limit: Option<usize>,
    ) -> Result<Page, ApiError> {
        self.list_page_at(ks, namespace, start_after, limit, 0)
            .await
    }

    /// [`Store::list_page`] that also reports, atomically with the page, which keys were
    /// written after revision `exact` (when `0 < exact < revision`): see [`Page::later`].
    pub async fn list_page_at(
        &self,
        ks: &Keyspace,
        namespace: &str,
        start_after: &str,
        limit: Option<usize>,
        exact: u64,
    ) -> Result<Page, ApiError> {
        let limit: i64 = limit.map(|l| l as i64).unwrap_or(-1);
        if let Some(page) = self
            .page_without_script(ks, namespace, start_after, limit, exact)
            .await?
        {
            return Ok(page);
        }
        let (min, max) = range(namespace, start_after);
        let mut c = self.conn.clone();
        let r: Value = self
            .list
            .key(&ks.rev)
            .key(&ks.obj)
            .key(&ks.idx)
            .key(&ks.ev)
            .arg(min)
            .arg(max)
            .arg(limit)
            .arg(exact)
            .arg(crate::durability::floor(self.scripts().epoch))
            .invoke_async(&mut c)
            .await
            .map_err(redis_err)?;
        Ok(crate::replies::list(r)?)
    }

    /// The page of [`Store::list_page_at`] read without the list script, whose per-value
    /// copies into and out of Lua tables cost more than the reads themselves: one atomic
    /// MULTI (GET revision, ZRANGEBYLEX page keys, ZLEXCOUNT of the range, and with `exact`
    /// the events after it) fixes the page's keys at a revision, then one HMGET reads their
    /// objects. The page equals the state at that revision exactly when every object read
    /// still exists and carries a resourceVersion not after it (a later write gives a later
    /// rv, a delete a missing value); otherwise `None`, and the caller runs the script, which
    /// does all of it atomically.
    async fn page_without_script(
        &self,
        ks: &Keyspace,
        namespace: &str,
        start_after: &str,
        limit: i64,
        exact: u64,
    ) -> Result<Option<Page>, ApiError> {
        let (min, max) = range(namespace, start_after);
        let mut c = self.conn.clone();
        let mut p = redis::pipe();
        p.atomic()
            .cmd("GET")
            .arg(&ks.rev)
            .cmd("ZRANGEBYLEX")
            .arg(&ks.idx)
            .arg(&min)
            .arg(&max)
            .arg("LIMIT")
            .arg(0)
            .arg(limit)
            .cmd("ZLEXCOUNT")
            .arg(&ks.idx)
            .arg(&min)
            .arg(&max);
        let (mut r, events) = query_with_later_events(&mut c, p, ks, exact).await?;
        let total = r.pop().map(|v| int(&v)).unwrap_or(0).max(0) as u64;
        let keys: Vec<String> = match r.pop() {
            Some(Value::Array(a)) => a
                .into_iter()
                .filter_map(|k| bulk(k).and_then(|k| String::from_utf8(k).ok()))
                .collect(),
            _ => Vec::new(),
        };
        let revision = r.first().map(int).unwrap_or(0) as u64;
        let later = later_events(events, exact, revision)?;
        if keys.is_empty() {
            return Ok(Some(Page {
                items: Vec::new(),
                revision,
                remaining: 0,
                later,
            }));
        }
        let vals: Vec<Value> = redis::cmd("HMGET")
            .arg(&ks.obj)
            .arg(&keys)
            .query_async(&mut c)
            .await
            .map_err(redis_err)?;
        if vals.len() != keys.len() {
            return Ok(None);
        }
        let mut items = Vec::with_capacity(keys.len());
        for (k, v) in keys.into_iter().zip(vals) {
            let Some(v) = bulk(v) else {
                return Ok(None);
            };
            let stored = stored_from_value(v)?;
            if stored.rv > revision {
                return Ok(None);
            }
            items.push((k, stored));
        }
        let remaining = total.saturating_sub(items.len() as u64);
        Ok(Some(Page {
            items,
            revision,
            remaining,
            later,
        }))
    }

    /// Every object of `namespace` ("" = all) after `start_after`, in key order, in one
    /// atomic MULTI (GET revision, HGETALL objects, and with `exact` the events after it):
    /// the whole-collection read without a Lua script, whose per-value copies into and out
    /// of Lua tables cost more than Redis's own HGETALL reply (measured: 10,000 objects of
    /// 1 KiB, see loadtest/LIST-FIGURES.md). Sorting the keys here gives the index's order
    /// (ZRANGEBYLEX compares bytes, as `str` ordering does).
    pub async fn list_all(
        &self,
        ks: &Keyspace,
        namespace: &str,
        start_after: &str,
        exact: u64,
    ) -> Result<Page, ApiError> {
        let mut c = self.conn.clone();
        let mut p = redis::pipe();
        p.atomic()
            .cmd("GET")
            .arg(&ks.rev)
            .cmd("HGETALL")
            .arg(&ks.obj);
        let (mut r, events) = query_with_later_events(&mut c, p, ks, exact).await?;
        let all = r.pop().unwrap_or(Value::Nil);
        let mut revision = r.first().map(int).unwrap_or(0) as u64;
        if revision == 0 {
            // Never written: the counter starts at the epoch floor (at least 1), as in
            // lua/list.lua, so the list's resourceVersion is never "0". SET NX fails only
            // when a write created the counter meanwhile: read again.
            let start = crate::durability::floor(self.scripts().epoch).max(1);
            let created: Option<String> = redis::cmd("SET")
                .arg(&ks.rev)
                .arg(start)
                .arg("NX")
                .query_async(&mut c)
                .await
                .map_err(redis_err)?;
            if created.is_none() {
                return Box::pin(self.list_all(ks, namespace, start_after, exact)).await;
            }
            revision = start;
        }
        let prefix = format!("{namespace}/");
        let mut items = Vec::new();
        let mut push = |k: Value, v: Value| -> Result<(), ApiError> {
            let Some(k) = bulk(k).and_then(|k| String::from_utf8(k).ok()) else {
                return Ok(());
            };
            if (!namespace.is_empty() && !k.starts_with(&prefix))
                || (!start_after.is_empty() && k.as_str() <= start_after)
            {
                return Ok(());
            }
            let v = bulk(v).ok_or_else(|| ApiError::internal("corrupt list reply"))?;
            items.push((k, stored_from_value(v)?));
            Ok(())
        };
        match all {
            Value::Map(kv) => {
                for (k, v) in kv {
                    push(k, v)?;
                }
            }
            Value::Array(a) => {
                let mut it = a.into_iter();
                while let (Some(k), Some(v)) = (it.next(), it.next()) {
                    push(k, v)?;
                }
            }
            _ => {}
        }
        items.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let later = later_events(events, exact, revision)?;
        Ok(Page {
            items,
            revision,
            remaining: 0,
            later,
        })
    }

    /// A random 32-byte secret stored under `key`, created once by whichever replica asks
    /// first (SET NX) and the same for every caller afterwards.
    pub async fn shared_secret(&self, key: &str) -> Result<Vec<u8>, ApiError> {
        let mut fresh = [0u8; 32];
        {
            use std::io::Read;
            std::fs::File::open("/dev/urandom")
                .and_then(|mut f| f.read_exact(&mut fresh))
                .map_err(|e| ApiError::internal(format!("no randomness: {e}")))?;
        }
        let mut c = self.conn.clone();
        let (_, v): (Value, Option<Vec<u8>>) = redis::pipe()
            .atomic()
            .cmd("SET")
            .arg(key)
            .arg(&fresh[..])
            .arg("NX")
            .cmd("GET")
            .arg(key)
            .query_async(&mut c)
            .await
            .map_err(redis_err)?;
        v.filter(|v| v.len() >= 16)
            .ok_or_else(|| ApiError::internal("continue key missing"))
    }

    /// Whether a watch can resume after revision `last` (below the current revision) from
    /// the history: `Ok(())` when the event right after `last` is in it, or `last` itself is
    /// (a gap after it is a recovery epoch's jump, with nothing lost in between); otherwise
    /// the oldest revision still in history (`None`: empty), and the watcher must get 410
    /// Expired — its revision was trimmed away, or handed out and then lost in a Redis crash
    /// (upstream `storage/cacher/watch_cache.go` `getAllEventsSinceLocked`: too old →
    /// 410 "too old resource version").
    pub async fn resume_check(
        &self,
        ks: &Keyspace,
        last: u64,
    ) -> Result<Result<(), Option<u64>>, ApiError> {
        let mut c = self.conn.clone();
        let (at, next, oldest): (Value, Value, Value) = redis::pipe()
            .cmd("XRANGE")
            .arg(&ks.ev)
            .arg(format!("{last}-0"))
            .arg(format!("{last}-0"))
            .cmd("XRANGE")
            .arg(&ks.ev)
            .arg(format!("{}-0", last + 1))
            .arg("+")
            .arg("COUNT")
            .arg(1)
            .cmd("XRANGE")
            .arg(&ks.ev)
            .arg("-")
            .arg("+")
            .arg("COUNT")
            .arg(1)
            .query_async(&mut c)
            .await
            .map_err(redis_err)?;
        let at = crate::replies::history(at)?;
        let next = crate::replies::history(next)?;
        let oldest = crate::replies::history(oldest)?.first().map(|e| e.rv);
        Ok(resumable(
            last,
            !at.is_empty(),
            next.first().map(|e| e.rv),
            oldest,
        ))
    }
}

/// The pure decision of [`Store::resume_check`]: `last_kept` = the event at `last` is in the
/// history, `next` = the first event after it, `oldest` = the oldest event.
fn resumable(
    last: u64,
    last_kept: bool,
    next: Option<u64>,
    oldest: Option<u64>,
) -> Result<(), Option<u64>> {
    if next == Some(last + 1) || (last_kept && next.is_some()) {
        Ok(())
    } else {
        Err(oldest)
    }
}

/// Runs the MULTI `p`, with (when `exact > 0`) an XRANGE of the history after `exact`
/// appended: the replies of `p`'s commands, and the XRANGE reply for [`later_events`].
async fn query_with_later_events(
    c: &mut Conn,
    mut p: redis::Pipeline,
    ks: &Keyspace,
    exact: u64,
) -> Result<(Vec<Value>, Option<Value>), ApiError> {
    if exact > 0 {
        p.cmd("XRANGE")
            .arg(&ks.ev)
            .arg(format!("{}-0", exact + 1))
            .arg("+");
    }
    let mut r: Vec<Value> = p.query_async(c).await.map_err(redis_err)?;
    let events = if exact > 0 { r.pop() } else { None };
    Ok((r, events))
}

/// The keys written after revision `exact` (from an XRANGE of the history starting at
/// `exact + 1`), with the rv of the first event still in the history: see [`Page::later`].
fn later_events(
    events: Option<Value>,
    exact: u64,
    revision: u64,
) -> Result<Option<Later>, ApiError> {
    Ok(match events {
        Some(v) if exact < revision => {
            let evs = crate::replies::history(v)?;
            let first_rv = evs.first().map_or(0, |e| e.rv);
            let mut keys: Vec<String> = evs.into_iter().map(|e| e.key).collect();
            keys.sort_unstable();
            keys.dedup();
            (first_rv > 0).then_some(Later { keys, first_rv })
        }
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(revision: u64, later: Option<(&[&str], u64)>) -> Page {
        Page {
            revision,
            later: later.map(|(keys, first_rv)| Later {
                keys: keys.iter().map(|k| k.to_string()).collect(),
                first_rv,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn config_replies_of_both_protocols() {
        let b = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        assert_eq!(
            config_value(Value::Array(vec![b("appendonly"), b("yes")])).as_deref(),
            Some("yes")
        );
        assert_eq!(
            config_value(Value::Map(vec![(b("appendfsync"), b("always"))])).as_deref(),
            Some("always")
        );
        assert_eq!(config_value(Value::Array(vec![])), None);
        assert_eq!(config_value(Value::Nil), None);
    }

    #[test]
    fn watch_resumption() {
        // Contiguous history after `last`.
        assert_eq!(resumable(7, true, Some(8), Some(3)), Ok(()));
        assert_eq!(
            resumable(7, false, Some(8), Some(8)),
            Ok(()),
            "oldest is last+1"
        );
        // Trimmed away.
        assert_eq!(resumable(2, false, Some(5), Some(5)), Err(Some(5)));
        assert_eq!(resumable(2, false, None, None), Err(None));
        // An epoch jump after the last surviving event 7 (8.. lost, floor 1000).
        assert_eq!(resumable(7, true, Some(1001), Some(3)), Ok(()));
        // A watcher at a lost revision (9 was handed out, then lost): 410, not silence.
        assert_eq!(resumable(9, false, Some(1001), Some(3)), Err(Some(3)));
    }

    #[test]
    fn state_at_a_revision() {
        // Latest reads and reads at the current revision are always the state.
        assert_eq!(page(10, None).consistent_at(0, "", ""), AtRevision::Same);
        assert_eq!(page(10, None).consistent_at(10, "", ""), AtRevision::Same);
        // Older revision, history gone or incomplete.
        assert_eq!(page(10, None).consistent_at(7, "", ""), AtRevision::Gone);
        assert_eq!(
            page(10, Some((&["a/x"], 9))).consistent_at(7, "", ""),
            AtRevision::Gone
        );
        // Writes after 7 to a/x (rv 8..10 all in history).
        let p = page(10, Some((&["a/x"], 8)));
        assert_eq!(p.consistent_at(7, "", ""), AtRevision::Changed);
        assert_eq!(p.consistent_at(7, "a", ""), AtRevision::Changed);
        assert_eq!(
            p.consistent_at(7, "b", ""),
            AtRevision::Same,
            "other namespace"
        );
        assert_eq!(
            p.consistent_at(7, "", "a/x"),
            AtRevision::Same,
            "behind the cursor"
        );
        assert_eq!(
            p.consistent_at(7, "", "a/w"),
            AtRevision::Changed,
            "ahead of it"
        );
        // "ab/…" is not in namespace "a".
        let p = page(10, Some((&["ab/x"], 8)));
        assert_eq!(p.consistent_at(7, "a", ""), AtRevision::Same);
    }
}
