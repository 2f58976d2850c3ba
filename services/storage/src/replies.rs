//! The reply contract of every Lua script the storage runs, and of the watch history stream:
//! one decoding function per script, returning a typed value.
//!
//! Where it sits: [`crate::store::Store`] runs the scripts (`lua/*.lua`,
//! [`crate::durability`]'s `EPOCH_LUA` and `RAISE_LUA`) and reads the history (`XRANGE`,
//! for watch replay in [`crate::watch::Hub::history_after`], for resume checks and for
//! lists at an exact revision); every reply goes through this module before anything acts
//! on it.
//!
//! A reply that does not match its contract is a bug or a foreign writer, never a client
//! error: it becomes [`Malformed`], which turns into a 500 InternalError (and an error log
//! naming the script) — never a 409 Conflict, a 404 or a silent default. Upstream's etcd3
//! store does the same with a response it cannot decode
//! (`staging/src/k8s.io/apiserver/pkg/storage/etcd3/store.go`: a decode failure is returned
//! as an internal error, `storage.NewInternalError`).

use crate::keys::parse_stored;
use crate::store::{Later, Page, Stored};
use crate::watch::LiveEvent;
use bytes::Bytes;
use crdplane_core::ApiError;
use redis::Value;

/// A reply that breaks its script's contract.
#[derive(Debug, Clone, PartialEq)]
pub struct Malformed {
    /// The script (or stream) whose reply it is.
    pub script: &'static str,
    /// What is wrong with it.
    pub why: String,
}

impl Malformed {
    fn new(script: &'static str, why: impl Into<String>) -> Self {
        Self {
            script,
            why: why.into(),
        }
    }
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "storage: malformed reply of the {} script: {}",
            self.script, self.why
        )
    }
}

impl From<Malformed> for ApiError {
    fn from(m: Malformed) -> Self {
        tracing::error!(script = m.script, why = %m.why, "malformed reply from Redis");
        ApiError::internal(m)
    }
}

/// Outcome of one object of a create script run (`lua/create.lua`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Created {
    /// Written at this revision.
    At(u64),
    /// The key already exists; nothing written.
    Exists,
}

/// Outcome of the update script (`lua/update.lua`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Updated {
    /// Written at this revision.
    At(u64),
    /// The expected resourceVersion is not the stored one (`current`).
    Stale {
        /// The stored object's resourceVersion.
        current: u64,
    },
    /// No such object.
    NotFound,
}

/// Outcome of the delete script (`lua/delete.lua`).
#[derive(Debug, Clone, PartialEq)]
pub enum Deleted {
    /// Deleted at revision `rv`; `last` is the last state with `rv` spliced in.
    At {
        /// Revision of the delete.
        rv: u64,
        /// The object's last state, carrying `rv` as its resourceVersion.
        last: Bytes,
    },
    /// The expected resourceVersion is not the stored one (`current`).
    Stale {
        /// The stored object's resourceVersion.
        current: u64,
    },
    /// No such object.
    NotFound,
}

/// Reply of `durability::EPOCH_LUA`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Epoch {
    /// The current recovery epoch number.
    pub epoch: u64,
    /// This call started the epoch.
    pub started: bool,
}

fn array(script: &'static str, v: Value) -> Result<Vec<Value>, Malformed> {
    match v {
        Value::Array(a) => Ok(a),
        other => Err(Malformed::new(
            script,
            format!("expected an array, got {other:?}"),
        )),
    }
}

/// An integer: a Lua number (integer reply) or a string of digits (a Lua string such as a
/// stored resourceVersion).
fn int(script: &'static str, what: &str, v: &Value) -> Result<i64, Malformed> {
    let bad = || Malformed::new(script, format!("{what}: expected an integer, got {v:?}"));
    match v {
        Value::Int(i) => Ok(*i),
        Value::BulkString(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(bad),
        _ => Err(bad()),
    }
}

fn uint(script: &'static str, what: &str, v: &Value) -> Result<u64, Malformed> {
    let i = int(script, what, v)?;
    u64::try_from(i).map_err(|_| Malformed::new(script, format!("{what}: negative ({i})")))
}

/// A revision: a positive integer.
fn revision(script: &'static str, what: &str, v: &Value) -> Result<u64, Malformed> {
    match uint(script, what, v)? {
        0 => Err(Malformed::new(script, format!("{what}: revision 0"))),
        rv => Ok(rv),
    }
}

fn bytes(script: &'static str, what: &str, v: Value) -> Result<Vec<u8>, Malformed> {
    match v {
        Value::BulkString(b) => Ok(b),
        Value::SimpleString(s) => Ok(s.into_bytes()),
        other => Err(Malformed::new(
            script,
            format!("{what}: expected a string, got {other:?}"),
        )),
    }
}

fn text(script: &'static str, what: &str, v: Value) -> Result<String, Malformed> {
    String::from_utf8(bytes(script, what, v)?)
        .map_err(|_| Malformed::new(script, format!("{what}: not UTF-8")))
}

/// A stored value (`<rv>:<offset>:<json>`, keys.rs) as an object.
fn stored(script: &'static str, v: Value) -> Result<Stored, Malformed> {
    let v = bytes(script, "object", v)?;
    let (rv, start) =
        parse_stored(&v).ok_or_else(|| Malformed::new(script, "object: not a stored value"))?;
    Ok(Stored {
        json: Bytes::from(v).slice(start..),
        rv,
    })
}

/// `lua/create.lua`: one revision (or 0: exists) per object, `objects` of them.
pub fn create(v: Value, objects: usize) -> Result<Vec<Created>, Malformed> {
    const S: &str = "create";
    let a = array(S, v)?;
    if a.len() != objects {
        return Err(Malformed::new(
            S,
            format!("{} results for {objects} objects", a.len()),
        ));
    }
    a.iter()
        .map(|r| match uint(S, "revision", r)? {
            0 => Ok(Created::Exists),
            rv => Ok(Created::At(rv)),
        })
        .collect()
}

/// `lua/update.lua`: `{1, rv}`, `{-1, current rv}` or `{0}`.
pub fn update(v: Value) -> Result<Updated, Malformed> {
    const S: &str = "update";
    let a = array(S, v)?;
    match (a.first().map(|s| int(S, "status", s)).transpose()?, a.len()) {
        (Some(1), 2) => Ok(Updated::At(revision(S, "revision", &a[1])?)),
        (Some(-1), 2) => Ok(Updated::Stale {
            current: revision(S, "current revision", &a[1])?,
        }),
        (Some(0), 1) => Ok(Updated::NotFound),
        (status, n) => Err(Malformed::new(
            S,
            format!("status {status:?} with {n} elements"),
        )),
    }
}

/// `lua/delete.lua`: `{1, rv, last state}`, `{-1, current rv}` or `{0}`.
pub fn delete(v: Value) -> Result<Deleted, Malformed> {
    const S: &str = "delete";
    let mut a = array(S, v)?;
    match (a.first().map(|s| int(S, "status", s)).transpose()?, a.len()) {
        (Some(1), 3) => {
            let last = bytes(S, "last state", a.pop().expect("3 elements"))?;
            Ok(Deleted::At {
                rv: revision(S, "revision", &a[1])?,
                last: last.into(),
            })
        }
        (Some(-1), 2) => Ok(Deleted::Stale {
            current: revision(S, "current revision", &a[1])?,
        }),
        (Some(0), 1) => Ok(Deleted::NotFound),
        (status, n) => Err(Malformed::new(
            S,
            format!("status {status:?} with {n} elements"),
        )),
    }
}

/// `lua/list.lua`: `{revision, remaining, n_later, first_later_rv, later keys (n_later),
/// key1, value1, …}`.
pub fn list(v: Value) -> Result<Page, Malformed> {
    const S: &str = "list";
    let a = array(S, v)?;
    if a.len() < 4 {
        return Err(Malformed::new(S, format!("{} elements", a.len())));
    }
    let revision = revision(S, "revision", &a[0])?;
    let remaining = uint(S, "remaining", &a[1])?;
    let n_later = uint(S, "later keys", &a[2])? as usize;
    let first_later = uint(S, "first later revision", &a[3])?;
    let rest = a.len() - 4;
    if n_later > rest || !(rest - n_later).is_multiple_of(2) {
        return Err(Malformed::new(
            S,
            format!("{n_later} later keys and an odd or short rest of {rest} elements"),
        ));
    }
    let mut it = a.into_iter().skip(4);
    let later = if n_later > 0 || first_later > 0 {
        let keys = it
            .by_ref()
            .take(n_later)
            .map(|k| text(S, "later key", k))
            .collect::<Result<_, _>>()?;
        Some(Later {
            keys,
            first_rv: first_later,
        })
    } else {
        None
    };
    let mut items = Vec::with_capacity(it.len() / 2);
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        items.push((text(S, "key", k)?, stored(S, v)?));
    }
    Ok(Page {
        items,
        revision,
        remaining,
        later,
    })
}

/// `durability::EPOCH_LUA`: `{epoch, 1 if started by this call else 0}`.
pub fn epoch(v: Value) -> Result<Epoch, Malformed> {
    const S: &str = "epoch";
    let a = array(S, v)?;
    if a.len() != 2 {
        return Err(Malformed::new(S, format!("{} elements", a.len())));
    }
    let epoch = uint(S, "epoch", &a[0])?;
    match uint(S, "started", &a[1])? {
        0 => Ok(Epoch {
            epoch,
            started: false,
        }),
        1 => Ok(Epoch {
            epoch,
            started: true,
        }),
        n => Err(Malformed::new(S, format!("started flag {n}"))),
    }
}

/// `durability::RAISE_LUA`: 1 when the counter was raised, else 0.
pub fn raise(v: Value) -> Result<bool, Malformed> {
    const S: &str = "raise";
    match uint(S, "raised", &v)? {
        0 => Ok(false),
        1 => Ok(true),
        n => Err(Malformed::new(S, format!("raised flag {n}"))),
    }
}

/// The one reader of the watch history: an `XRANGE` reply of a history stream (entries
/// `<rv>-0` with fields `t` type A/M/D, `k` key, `o` object and, for MODIFIED, `p` previous
/// state; written by `lua/prelude.lua` `history`), oldest first.
pub fn history(v: Value) -> Result<Vec<LiveEvent>, Malformed> {
    const S: &str = "history";
    let entries = array(S, v)?;
    let mut out = Vec::with_capacity(entries.len());
    for e in entries {
        let mut parts = array(S, e)?;
        if parts.len() != 2 {
            return Err(Malformed::new(
                S,
                format!("entry of {} elements", parts.len()),
            ));
        }
        let fields = array(S, parts.pop().expect("2 elements"))?;
        let id = text(S, "entry id", parts.pop().expect("2 elements"))?;
        let rv = id
            .strip_suffix("-0")
            .and_then(|r| r.parse::<u64>().ok())
            .filter(|&rv| rv > 0)
            .ok_or_else(|| Malformed::new(S, format!("entry id {id:?}")))?;
        if !fields.len().is_multiple_of(2) {
            return Err(Malformed::new(S, format!("entry {id}: odd field list")));
        }
        let (mut kind, mut key, mut json, mut prev) = (None, None, None, Bytes::new());
        let mut it = fields.into_iter();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            match bytes(S, "field name", k)?.as_slice() {
                b"t" => kind = Some(bytes(S, "type", v)?),
                b"k" => key = Some(text(S, "key", v)?),
                b"o" => json = Some(Bytes::from(bytes(S, "object", v)?)),
                b"p" => prev = Bytes::from(bytes(S, "previous state", v)?),
                _ => {}
            }
        }
        let kind = match kind.as_deref() {
            Some([t @ (b'A' | b'M' | b'D')]) => *t,
            t => {
                return Err(Malformed::new(S, format!("entry {id}: type {t:?}")));
            }
        };
        let (Some(key), Some(json)) = (key, json) else {
            return Err(Malformed::new(S, format!("entry {id}: no key or object")));
        };
        out.push(LiveEvent {
            kind,
            rv,
            key,
            json,
            prev,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn i(n: i64) -> Value {
        Value::Int(n)
    }
    fn s(t: &str) -> Value {
        Value::BulkString(t.as_bytes().to_vec())
    }
    fn arr(v: Vec<Value>) -> Value {
        Value::Array(v)
    }
    fn bad<T: std::fmt::Debug>(r: Result<T, Malformed>, script: &str) {
        match r {
            Err(m) => assert_eq!(m.script, script),
            Ok(v) => panic!("{script}: accepted {v:?}"),
        }
    }

    #[test]
    fn create_replies() {
        assert_eq!(
            create(arr(vec![i(7), i(0), i(9)]), 3),
            Ok(vec![Created::At(7), Created::Exists, Created::At(9)])
        );
        assert_eq!(create(arr(vec![]), 0), Ok(vec![]));
        bad(create(arr(vec![i(7)]), 2), "create");
        bad(create(arr(vec![i(-1)]), 1), "create");
        bad(create(arr(vec![Value::Nil]), 1), "create");
        bad(create(i(7), 1), "create");
        bad(create(Value::Nil, 0), "create");
    }

    #[test]
    fn update_replies() {
        assert_eq!(update(arr(vec![i(1), i(12)])), Ok(Updated::At(12)));
        assert_eq!(
            update(arr(vec![i(-1), s("11")])),
            Ok(Updated::Stale { current: 11 })
        );
        assert_eq!(update(arr(vec![i(0)])), Ok(Updated::NotFound));
        for v in [
            arr(vec![]),
            arr(vec![i(1)]),
            arr(vec![i(1), i(0)]),
            arr(vec![i(1), s("x")]),
            arr(vec![i(-1)]),
            arr(vec![i(0), i(5)]),
            arr(vec![i(2), i(5)]),
            arr(vec![s("OK")]),
            i(1),
            Value::Nil,
        ] {
            bad(update(v), "update");
        }
    }

    #[test]
    fn delete_replies() {
        assert_eq!(
            delete(arr(vec![i(1), i(12), s("{\"a\":1}")])),
            Ok(Deleted::At {
                rv: 12,
                last: Bytes::from_static(b"{\"a\":1}")
            })
        );
        assert_eq!(
            delete(arr(vec![i(-1), s("3")])),
            Ok(Deleted::Stale { current: 3 })
        );
        assert_eq!(delete(arr(vec![i(0)])), Ok(Deleted::NotFound));
        for v in [
            arr(vec![i(1), i(12)]),
            arr(vec![i(1), i(12), Value::Nil]),
            arr(vec![i(1), i(0), s("{}")]),
            arr(vec![i(-1), s("")]),
            arr(vec![i(5)]),
            arr(vec![]),
            s("x"),
        ] {
            bad(delete(v), "delete");
        }
    }

    #[test]
    fn list_replies() {
        let p = list(arr(vec![
            i(10),
            i(2),
            i(1),
            i(8),
            s("ns/z"),
            s("ns/a"),
            s("5:9:{\"rv\":\"5\"}"),
        ]))
        .unwrap();
        assert_eq!((p.revision, p.remaining), (10, 2));
        assert_eq!(
            p.later,
            Some(Later {
                keys: vec!["ns/z".into()],
                first_rv: 8
            })
        );
        assert_eq!(p.items.len(), 1);
        assert_eq!(p.items[0].0, "ns/a");
        assert_eq!(p.items[0].1.rv, 5);
        assert_eq!(&p.items[0].1.json[..], b"{\"rv\":\"5\"}");
        let empty = list(arr(vec![i(3), i(0), i(0), i(0)])).unwrap();
        assert!(empty.items.is_empty() && empty.later.is_none());
        for v in [
            arr(vec![i(3), i(0), i(0)]),
            arr(vec![i(0), i(0), i(0), i(0)]),
            arr(vec![i(3), i(-1), i(0), i(0)]),
            arr(vec![i(3), i(0), i(2), i(4), s("a/b")]),
            arr(vec![i(3), i(0), i(0), i(0), s("a/b")]),
            arr(vec![i(3), i(0), i(0), i(0), s("a/b"), s("not stored")]),
            arr(vec![i(3), i(0), i(0), i(0), s("a/b"), Value::Nil]),
            arr(vec![
                i(3),
                i(0),
                i(0),
                i(0),
                Value::BulkString(vec![0xff]),
                s("1:0:{}"),
            ]),
            Value::Nil,
        ] {
            bad(list(v), "list");
        }
    }

    #[test]
    fn epoch_and_raise_replies() {
        assert_eq!(
            epoch(arr(vec![i(5), i(1)])),
            Ok(Epoch {
                epoch: 5,
                started: true
            })
        );
        assert_eq!(
            epoch(arr(vec![i(0), i(0)])),
            Ok(Epoch {
                epoch: 0,
                started: false
            })
        );
        bad(epoch(arr(vec![i(5)])), "epoch");
        bad(epoch(arr(vec![i(5), i(2)])), "epoch");
        bad(epoch(arr(vec![Value::Nil, i(0)])), "epoch");
        assert_eq!(raise(i(1)), Ok(true));
        assert_eq!(raise(i(0)), Ok(false));
        bad(raise(i(3)), "raise");
        bad(raise(Value::Nil), "raise");
    }

    fn entry(id: &str, f: &[(&str, &str)]) -> Value {
        arr(vec![
            s(id),
            arr(f.iter().flat_map(|(k, v)| [s(k), s(v)]).collect()),
        ])
    }

    #[test]
    fn history_entries() {
        let evs = history(arr(vec![
            entry("5-0", &[("t", "A"), ("k", "a/b"), ("o", "{}")]),
            entry(
                "6-0",
                &[("t", "M"), ("k", "a/b"), ("o", "{\"x\":1}"), ("p", "{}")],
            ),
            entry("7-0", &[("t", "D"), ("k", "a/b"), ("o", "{}")]),
        ]))
        .unwrap();
        assert_eq!(evs.len(), 3);
        assert_eq!(
            (
                evs[0].rv,
                evs[0].kind,
                evs[0].key.as_str(),
                &evs[0].prev[..]
            ),
            (5, b'A', "a/b", &b""[..])
        );
        assert_eq!(
            (evs[1].rv, evs[1].kind, &evs[1].json[..], &evs[1].prev[..]),
            (6, b'M', &b"{\"x\":1}"[..], &b"{}"[..])
        );
        assert_eq!((evs[2].rv, evs[2].kind), (7, b'D'));
        assert_eq!(history(arr(vec![])), Ok(vec![]));
        for v in [
            arr(vec![entry("0-0", &[("t", "A"), ("k", "a/b"), ("o", "{}")])]),
            arr(vec![entry("x-0", &[("t", "A"), ("k", "a/b"), ("o", "{}")])]),
            arr(vec![entry("5-1", &[("t", "A"), ("k", "a/b"), ("o", "{}")])]),
            arr(vec![entry("5-0", &[("t", "X"), ("k", "a/b"), ("o", "{}")])]),
            arr(vec![entry("5-0", &[("k", "a/b"), ("o", "{}")])]),
            arr(vec![entry("5-0", &[("t", "A"), ("o", "{}")])]),
            arr(vec![entry("5-0", &[("t", "A"), ("k", "a/b")])]),
            arr(vec![arr(vec![s("5-0")])]),
            arr(vec![arr(vec![s("5-0"), arr(vec![s("t")])])]),
            arr(vec![s("5-0")]),
            Value::Nil,
        ] {
            bad(history(v), "history");
        }
    }

    #[test]
    fn malformed_is_an_internal_error() {
        let e: ApiError = Malformed::new("update", "status None with 0 elements").into();
        assert_eq!(e.code, 500);
        assert!(e.message.contains("update script"), "{}", e.message);
    }
}
