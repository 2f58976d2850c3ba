//! Redis operations of the storage service: one atomic Lua script per write, pipelined
//! reads over one multiplexed connection (redis `ConnectionManager`, reconnecting).
//!
//! Request path: gateway/registry → gRPC (`server.rs`) → `Store` → Redis.

use crate::keys::{Keyspace, object_key, parse_stored, range};
use bytes::Bytes;
use crdplane_core::ApiError;
use redis::aio::ConnectionManager;
use redis::{Script, Value};

/// An object as stored: its JSON and resourceVersion.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    pub json: Bytes,
    pub rv: u64,
}

/// One page of a list.
#[derive(Debug, Default)]
pub struct Page {
    pub items: Vec<(String, Stored)>,
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
    pub keys: Vec<String>,
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

/// Parses the list script's reply (see lua/list.lua).
fn parse_page(r: Vec<Value>) -> Result<Page, ApiError> {
    let mut it = r.into_iter();
    let revision = it.next().map(|v| int(&v)).unwrap_or(0) as u64;
    let remaining = it.next().map(|v| int(&v)).unwrap_or(0) as u64;
    let n_later = it.next().map(|v| int(&v)).unwrap_or(0).max(0) as usize;
    let first_later = it.next().map(|v| int(&v)).unwrap_or(0) as u64;
    let mut later = None;
    if n_later > 0 || first_later > 0 {
        let mut keys = Vec::with_capacity(n_later);
        for _ in 0..n_later {
            let k = it
                .next()
                .and_then(bulk)
                .and_then(|k| String::from_utf8(k).ok())
                .ok_or_else(|| ApiError::internal("corrupt list reply"))?;
            keys.push(k);
        }
        later = Some(Later {
            keys,
            first_rv: first_later,
        });
    }
    let mut items = Vec::with_capacity(it.len() / 2);
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        let k = bulk(k)
            .and_then(|k| String::from_utf8(k).ok())
            .unwrap_or_default();
        let v = bulk(v).ok_or_else(|| ApiError::internal("corrupt list reply"))?;
        items.push((k, stored_from_value(v)?));
    }
    Ok(Page {
        items,
        revision,
        remaining,
        later,
    })
}

#[derive(Clone)]
pub struct Store {
    conn: ConnectionManager,
    scripts: std::sync::Arc<Scripts>,
    pub history_len: usize,
}

/// The create script (`lua/create.lua`): any number of objects of one resource.
const CREATE_LUA: &str = include_str!("lua/create.lua");

struct Scripts {
    create: Script,
    update: Script,
    delete: Script,
    list: Script,
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

/// One object of a `create_many`: keyspace, namespace, name, and the JSON split at the
/// resourceVersion slot (head, tail).
pub type NewObject<'a> = (&'a Keyspace, &'a str, &'a str, &'a [u8], &'a [u8]);

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

fn bulk(v: Value) -> Option<Vec<u8>> {
    match v {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.into_bytes()),
        _ => None,
    }
}

impl Store {
    pub async fn connect(
        url: &str,
        history_len: usize,
        timeout: std::time::Duration,
    ) -> anyhow::Result<Self> {
        let client = redis::Client::open(url)?;
        let conn =
            ConnectionManager::new_with_config(client, crate::manager_config(timeout)).await?;
        Ok(Self {
            conn,
            scripts: std::sync::Arc::new(Scripts {
                create: Script::new(CREATE_LUA),
                update: Script::new(include_str!("lua/update.lua")),
                delete: Script::new(include_str!("lua/delete.lua")),
                list: Script::new(include_str!("lua/list.lua")),
            }),
            history_len: history_len.max(16),
        })
    }

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
        let mut p = redis::pipe();
        for (ks, ns, name) in keys {
            p.cmd("HGET").arg(&ks.obj).arg(object_key(ns, name));
        }
        let mut c = self.conn.clone();
        let vs: Vec<Option<Vec<u8>>> = p.query_async(&mut c).await.map_err(redis_err)?;
        vs.into_iter()
            .map(|v| v.map(stored_from_value).transpose())
            .collect()
    }

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

    pub async fn revision(&self, ks: &Keyspace) -> Result<u64, ApiError> {
        let mut c = self.conn.clone();
        let v: Option<u64> = redis::cmd("GET")
            .arg(&ks.rev)
            .query_async(&mut c)
            .await
            .map_err(redis_err)?;
        Ok(v.unwrap_or(0))
    }

    pub async fn create(
        &self,
        ks: &Keyspace,
        namespace: &str,
        name: &str,
        head: &[u8],
        tail: &[u8],
    ) -> Result<Stored, ApiError> {
        self.create_many(&[(ks, namespace, name, head, tail)])
            .await
            .pop()
            .unwrap_or_else(|| Err(ApiError::internal("storage lost a create")))
    }

    /// Creates in request order, each with exactly the outcome of a create of its own (a name
    /// given twice: the second gets AlreadyExists). The objects of one resource go to Redis as
    /// one run of the create script (one script call per resource, so keys of one hash tag
    /// only), all resources' runs in one pipeline; each object gets its own revision, stream
    /// entry and watch event. Results come in request order. A script cache flushed behind
    /// our back (NOSCRIPT) is reloaded and the affected runs retried once.
    pub async fn create_many(&self, items: &[NewObject<'_>]) -> Vec<Result<Stored, ApiError>> {
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
        for attempt in 0..2 {
            let mut p = redis::pipe();
            p.ignore_errors();
            for &g in &pending {
                let (ks, idx) = &groups[g];
                let cmd = p
                    .cmd("EVALSHA")
                    .arg(self.scripts.create.get_hash())
                    .arg(4)
                    .arg(&ks.rev)
                    .arg(&ks.obj)
                    .arg(&ks.idx)
                    .arg(&ks.ev)
                    .arg(self.history_len)
                    .arg(&ks.channel)
                    .arg(ks.notify_channel())
                    .arg(&ks.tenant);
                for &i in idx {
                    let (_, ns, name, head, tail) = items[i];
                    cmd.arg(object_key(ns, name)).arg(head).arg(tail);
                }
            }
            let replies: Vec<redis::RedisResult<Vec<Value>>> = match p.query_async(&mut c).await {
                Ok(r) => r,
                Err(e) => {
                    let e = redis_err(e);
                    return out
                        .into_iter()
                        .map(|o| o.unwrap_or_else(|| Err(e.clone())))
                        .collect();
                }
            };
            let mut retry = Vec::new();
            for (&g, reply) in pending.iter().zip(replies) {
                let (ks, idx) = &groups[g];
                match reply {
                    Ok(rvs) if rvs.len() == idx.len() => {
                        for (&i, rv) in idx.iter().zip(&rvs) {
                            let (_, _, name, head, tail) = items[i];
                            out[i] = Some(match int(rv) {
                                0 => Err(ApiError::already_exists(&ks.gr, name)),
                                rv => Ok(Stored {
                                    json: crdplane_core::rvslot::join(head, rv as u64, tail).into(),
                                    rv: rv as u64,
                                }),
                            });
                        }
                    }
                    Ok(rvs) => {
                        let e = ApiError::internal(format!(
                            "create script answered {} results for {} objects",
                            rvs.len(),
                            idx.len()
                        ));
                        for &i in idx {
                            out[i] = Some(Err(e.clone()));
                        }
                    }
                    Err(e)
                        if attempt == 0
                            && e.kind()
                                == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
                    {
                        retry.push(g)
                    }
                    Err(e) => {
                        let e = redis_err(e);
                        for &i in idx {
                            out[i] = Some(Err(e.clone()));
                        }
                    }
                }
            }
            if retry.is_empty() {
                break;
            }
            if let Err(e) = redis::cmd("SCRIPT")
                .arg("LOAD")
                .arg(CREATE_LUA)
                .query_async::<String>(&mut c)
                .await
            {
                let e = redis_err(e);
                for &g in &retry {
                    for &i in &groups[g].1 {
                        out[i] = Some(Err(e.clone()));
                    }
                }
                break;
            }
            pending = retry;
        }
        out.into_iter()
            .map(|o| o.unwrap_or_else(|| Err(ApiError::internal("storage lost a create"))))
            .collect()
    }

    pub async fn update(
        &self,
        ks: &Keyspace,
        namespace: &str,
        name: &str,
        head: &[u8],
        tail: &[u8],
        expected: u64,
    ) -> Result<Stored, ApiError> {
        let mut c = self.conn.clone();
        let r: Vec<Value> = self
            .scripts
            .update
            .key(&ks.rev)
            .key(&ks.obj)
            .key(&ks.idx)
            .key(&ks.ev)
            .arg(object_key(namespace, name))
            .arg(head)
            .arg(tail)
            .arg(self.history_len)
            .arg(&ks.channel)
            .arg(expected.to_string())
            .arg(ks.notify_channel())
            .arg(&ks.tenant)
            .invoke_async(&mut c)
            .await
            .map_err(redis_err)?;
        match r.first().map(int) {
            Some(1) => {
                let rv = r.get(1).map(int).unwrap_or(0) as u64;
                Ok(Stored {
                    json: crdplane_core::rvslot::join(head, rv, tail).into(),
                    rv,
                })
            }
            Some(-1) => Err(ApiError::stale(&ks.gr, name)),
            _ => Err(ApiError::not_found(&ks.gr, name)),
        }
    }

    pub async fn delete(
        &self,
        ks: &Keyspace,
        namespace: &str,
        name: &str,
        expected: u64,
    ) -> Result<Stored, ApiError> {
        let mut c = self.conn.clone();
        let mut r: Vec<Value> = self
            .scripts
            .delete
            .key(&ks.rev)
            .key(&ks.obj)
            .key(&ks.idx)
            .key(&ks.ev)
            .arg(object_key(namespace, name))
            .arg(self.history_len)
            .arg(&ks.channel)
            .arg(expected.to_string())
            .arg(ks.notify_channel())
            .arg(&ks.tenant)
            .invoke_async(&mut c)
            .await
            .map_err(redis_err)?;
        match r.first().map(int) {
            Some(1) => {
                let rv = r.get(1).map(int).unwrap_or(0) as u64;
                let json = r.drain(..).nth(2).and_then(bulk).unwrap_or_default();
                Ok(Stored {
                    json: json.into(),
                    rv,
                })
            }
            Some(-1) => {
                let cur = r.get(1).map(int).unwrap_or(0);
                Err(ApiError::conflict(
                    &ks.gr,
                    name,
                    &format!(
                        "Precondition failed: ResourceVersion in precondition: {expected}, ResourceVersion in object meta: {cur}"
                    ),
                ))
            }
            _ => Err(ApiError::not_found(&ks.gr, name)),
        }
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
        let r: Vec<Value> = self
            .scripts
            .list
            .key(&ks.rev)
            .key(&ks.obj)
            .key(&ks.idx)
            .key(&ks.ev)
            .arg(min)
            .arg(max)
            .arg(limit)
            .arg(exact)
            .invoke_async(&mut c)
            .await
            .map_err(redis_err)?;
        parse_page(r)
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
        let later = later_events(events, exact, revision);
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
        let revision = r.first().map(int).unwrap_or(0) as u64;
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
        let later = later_events(events, exact, revision);
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

    /// History entries with revision > `after`, at most `count`: (rv, type, key, json).
    pub async fn history_after(
        &self,
        ks: &Keyspace,
        after: u64,
        count: usize,
    ) -> Result<Vec<HistoryEvent>, ApiError> {
        let mut c = self.conn.clone();
        let v: Value = redis::cmd("XRANGE")
            .arg(&ks.ev)
            .arg(format!("{}-0", after + 1))
            .arg("+")
            .arg("COUNT")
            .arg(count)
            .query_async(&mut c)
            .await
            .map_err(redis_err)?;
        Ok(parse_xrange(v))
    }

    /// The oldest revision still in history (None when the history is empty).
    pub async fn oldest_history(&self, ks: &Keyspace) -> Result<Option<u64>, ApiError> {
        let mut c = self.conn.clone();
        let v: Value = redis::cmd("XRANGE")
            .arg(&ks.ev)
            .arg("-")
            .arg("+")
            .arg("COUNT")
            .arg(1)
            .query_async(&mut c)
            .await
            .map_err(redis_err)?;
        Ok(parse_xrange(v).first().map(|e| e.rv))
    }
}

#[derive(Debug, Clone)]
pub struct HistoryEvent {
    pub rv: u64,
    pub kind: u8,
    pub key: String,
    pub json: Bytes,
}

/// Runs the MULTI `p`, with (when `exact > 0`) an XRANGE of the history after `exact`
/// appended: the replies of `p`'s commands, and the XRANGE reply for [`later_events`].
async fn query_with_later_events(
    c: &mut ConnectionManager,
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
fn later_events(events: Option<Value>, exact: u64, revision: u64) -> Option<Later> {
    match events {
        Some(v) if exact < revision => {
            let evs = parse_xrange(v);
            let first_rv = evs.first().map_or(0, |e| e.rv);
            let mut keys: Vec<String> = evs.into_iter().map(|e| e.key).collect();
            keys.sort_unstable();
            keys.dedup();
            (first_rv > 0).then_some(Later { keys, first_rv })
        }
        _ => None,
    }
}

fn parse_xrange(v: Value) -> Vec<HistoryEvent> {
    let mut out = Vec::new();
    let Value::Array(entries) = v else { return out };
    for e in entries {
        let Value::Array(mut parts) = e else { continue };
        if parts.len() != 2 {
            continue;
        }
        let fields = parts.pop();
        let id = parts
            .pop()
            .and_then(bulk)
            .and_then(|b| String::from_utf8(b).ok())
            .unwrap_or_default();
        let rv = id
            .split('-')
            .next()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let Some(Value::Array(fields)) = fields else {
            continue;
        };
        let mut ev = HistoryEvent {
            rv,
            kind: b'M',
            key: String::new(),
            json: Bytes::new(),
        };
        let mut it = fields.into_iter();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            let (Some(k), Some(v)) = (bulk(k), bulk(v)) else {
                continue;
            };
            match k.as_slice() {
                b"t" => ev.kind = v.first().copied().unwrap_or(b'M'),
                b"k" => ev.key = String::from_utf8(v).unwrap_or_default(),
                b"o" => ev.json = v.into(),
                _ => {}
            }
        }
        out.push(ev);
    }
    out
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
