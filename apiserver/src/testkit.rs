//! An in-memory [`Store`] for in-process tests of the generic machinery: the same contract
//! as the storage service (resourceVersions from one counter, compare-and-swap writes,
//! dry-run, label/field selectors, pages in key order) without Redis.
//!
//! Not on the request path of any binary; the handlers' tests and resource strategies'
//! tests use it instead of a mock.

use crate::rest::store::stored_rv;
use crate::rest::{ListOptions, ListResult, Store, Stored};
use crdplane_core::selector::{FieldSelector, LabelSelector};
use crdplane_core::{ApiError, GroupResource};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// The revision counter and the objects by (namespace, name).
type Objects = (u64, BTreeMap<(String, String), Value>);

/// Objects of one resource, keyed by (namespace, name).
pub struct MemStore {
    gr: GroupResource,
    inner: Mutex<Objects>,
    /// Writes that will lose their compare-and-swap before succeeding (to test retries).
    pub lose_next_writes: Mutex<u32>,
}

impl MemStore {
    /// An empty store of the group/resource `gr`.
    pub fn new(gr: GroupResource) -> Self {
        MemStore {
            gr,
            inner: Mutex::new((0, BTreeMap::new())),
            lose_next_writes: Mutex::new(0),
        }
    }

    /// Number of stored objects.
    pub fn len(&self) -> usize {
        self.inner.lock().expect("lock").1.len()
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The current resourceVersion counter (moves on every real write).
    pub fn revision(&self) -> u64 {
        self.inner.lock().expect("lock").0
    }

    /// Simulates another writer: bumps the stored object's resourceVersion.
    pub fn touch(&self, namespace: &str, name: &str) {
        let mut g = self.inner.lock().expect("lock");
        g.0 += 1;
        let rv = g.0;
        if let Some(o) = g.1.get_mut(&(namespace.to_string(), name.to_string())) {
            set_rv(o, rv);
        }
    }

    fn lose(&self) -> bool {
        let mut n = self.lose_next_writes.lock().expect("lock");
        if *n > 0 {
            *n -= 1;
            true
        } else {
            false
        }
    }
}

fn key_of(obj: &Value) -> (String, String) {
    let m = |k: &str| {
        obj.pointer(&format!("/metadata/{k}"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    (m("namespace"), m("name"))
}

fn set_rv(obj: &mut Value, rv: u64) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

impl Store for MemStore {
    async fn get(&self, namespace: &str, name: &str) -> Result<Value, ApiError> {
        let g = self.inner.lock().expect("lock");
        g.1.get(&(namespace.to_string(), name.to_string()))
            .cloned()
            .ok_or_else(|| ApiError::not_found(&self.gr, name))
    }

    async fn list(&self, namespace: &str, opts: &ListOptions) -> Result<ListResult, ApiError> {
        let labels = LabelSelector::parse(&opts.label_selector).map_err(ApiError::bad_request)?;
        let fields = FieldSelector::parse(&opts.field_selector).map_err(ApiError::bad_request)?;
        let g = self.inner.lock().expect("lock");
        let after = opts.continue_token.split_once('/');
        let mut items = Vec::new();
        let mut continue_token = String::new();
        for ((ns, name), obj) in &g.1 {
            if !namespace.is_empty() && ns != namespace {
                continue;
            }
            if let Some((ans, aname)) = after
                && (ns.as_str(), name.as_str()) <= (ans, aname)
            {
                continue;
            }
            let field = |f: &str| match f {
                "metadata.name" => Some(name.clone()),
                "metadata.namespace" => Some(ns.clone()),
                _ => None,
            };
            if !labels.matches_object(obj) || !fields.matches(field) {
                continue;
            }
            if opts.limit > 0 && items.len() == opts.limit as usize {
                let (lns, lname) = key_of(items.last().expect("non-empty page"));
                continue_token = format!("{lns}/{lname}");
                break;
            }
            items.push(obj.clone());
        }
        Ok(ListResult {
            items,
            resource_version: g.0,
            continue_token,
            remaining: None,
        })
    }

    async fn create(&self, mut obj: Value, dry_run: bool) -> Result<Stored, ApiError> {
        let mut g = self.inner.lock().expect("lock");
        let k = key_of(&obj);
        if g.1.contains_key(&k) {
            return Err(ApiError::already_exists(&self.gr, &k.1));
        }
        if dry_run {
            return Ok(obj.into());
        }
        g.0 += 1;
        set_rv(&mut obj, g.0);
        g.1.insert(k, obj.clone());
        Ok(obj.into())
    }

    async fn update(&self, mut obj: Value, old: &Value, dry_run: bool) -> Result<Stored, ApiError> {
        let expected_rv = stored_rv(old);
        if self.lose() {
            let (_, name) = key_of(&obj);
            self.touch(&key_of(&obj).0, &name);
            return Err(ApiError::stale(&self.gr, &name));
        }
        let mut g = self.inner.lock().expect("lock");
        let k = key_of(&obj);
        let Some(cur) = g.1.get(&k) else {
            return Err(ApiError::not_found(&self.gr, &k.1));
        };
        if stored_rv(cur) != expected_rv {
            return Err(ApiError::stale(&self.gr, &k.1));
        }
        if dry_run {
            return Ok(obj.into());
        }
        g.0 += 1;
        set_rv(&mut obj, g.0);
        g.1.insert(k, obj.clone());
        Ok(obj.into())
    }

    async fn delete(
        &self,
        namespace: &str,
        name: &str,
        expected_rv: u64,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        if self.lose() {
            self.touch(namespace, name);
            return Err(ApiError::stale(&self.gr, name));
        }
        let mut g = self.inner.lock().expect("lock");
        let k = (namespace.to_string(), name.to_string());
        let Some(cur) = g.1.get(&k) else {
            return Err(ApiError::not_found(&self.gr, name));
        };
        if stored_rv(cur) != expected_rv {
            return Err(ApiError::stale(&self.gr, name));
        }
        if dry_run {
            return Ok(cur.clone());
        }
        g.0 += 1;
        Ok(g.1.remove(&k).expect("present"))
    }
}
