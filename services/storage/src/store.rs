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
}

#[derive(Clone)]
pub struct Store {
    conn: ConnectionManager,
    scripts: std::sync::Arc<Scripts>,
    pub history_len: usize,
}

struct Scripts {
    create: Script,
    update: Script,
    delete: Script,
    list: Script,
}

pub(crate) fn redis_err(e: redis::RedisError) -> ApiError {
    ApiError::unavailable(format!("storage backend error: {e}"))
}

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
    pub async fn connect(url: &str, history_len: usize) -> anyhow::Result<Self> {
        let client = redis::Client::open(url)?;
        let conn = ConnectionManager::new(client).await?;
        Ok(Self {
            conn,
            scripts: std::sync::Arc::new(Scripts {
                create: Script::new(include_str!("lua/create.lua")),
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
        let mut c = self.conn.clone();
        let r: Vec<Value> = self
            .scripts
            .create
            .key(&ks.rev)
            .key(&ks.obj)
            .key(&ks.idx)
            .key(&ks.ev)
            .arg(object_key(namespace, name))
            .arg(head)
            .arg(tail)
            .arg(self.history_len)
            .arg(&ks.channel)
            .arg(ks.notify_channel())
            .arg(&ks.tenant)
            .invoke_async(&mut c)
            .await
            .map_err(redis_err)?;
        if r.first().map(int) != Some(1) {
            return Err(ApiError::already_exists(&ks.gr, name));
        }
        let rv = r.get(1).map(int).unwrap_or(0) as u64;
        Ok(Stored {
            json: crdplane_core::rvslot::join(head, rv, tail).into(),
            rv,
        })
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
        let limit: i64 = limit.map(|l| l as i64).unwrap_or(-1);
        let (min, max) = range(namespace, start_after);
        let mut c = self.conn.clone();
        let r: Vec<Value> = self
            .scripts
            .list
            .key(&ks.rev)
            .key(&ks.obj)
            .key(&ks.idx)
            .arg(min)
            .arg(max)
            .arg(limit)
            .invoke_async(&mut c)
            .await
            .map_err(redis_err)?;
        let mut it = r.into_iter();
        let revision = it.next().map(|v| int(&v)).unwrap_or(0) as u64;
        let remaining = it.next().map(|v| int(&v)).unwrap_or(0) as u64;
        let mut items = Vec::new();
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
        })
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
