//! [`BuiltinStore`]: the storage service as the `Store` of one built-in resource of one
//! tenant — objects converted between the served version and the stored one
//! (`BuiltinType::stored_form` / `served_form`), sealed and opened for encryption at rest
//! ([`crate::encryption`]), expiring writes for the types that expire.
//!
//! Where it sits: under the built-in handler family (`builtin.rs`) and the paths that read
//! built-in objects for the edge (TokenRequest's bound Secrets, service-account token
//! checks).

use super::{BuiltinType, gr};
use crate::context::Ctx;
use crate::stores::storage::StorageStore;
use bytes::Bytes;
use crdplane_apiserver::rest::{EncodedList, ListOptions, ListResult, Store, Stored};
use crdplane_core::{ApiError, GroupResource};
use serde_json::Value;

/// The storage service as the `Store` of one built-in resource: objects converted between
/// the served version and the stored one, expiring writes for the types that expire.
pub struct BuiltinStore<'a> {
    inner: StorageStore<'a>,
    ty: &'static dyn BuiltinType,
    /// Encryption at rest of the stored objects (see [`crate::encryption`]).
    sealing: crate::encryption::Sealing,
    /// resourceVersions of the objects this store read in a stale form ([`Store::stale`]).
    stale: std::sync::Mutex<Vec<String>>,
}

impl<'a> BuiltinStore<'a> {
    /// The store of built-in type `ty` for `tenant`.
    pub fn new(ctx: &'a Ctx, tenant: &'a str, ty: &'static dyn BuiltinType) -> Self {
        let r = ty.resource();
        Self {
            inner: StorageStore {
                storage: &ctx.storage,
                tenant,
                group: r.storage.0,
                resource: r.storage.1,
                ttl_seconds: if r.expires {
                    ctx.cfg.event_ttl.as_secs()
                } else {
                    0
                },
            },
            ty,
            sealing: crate::encryption::Sealing::new(
                ctx.cfg.encryption.as_ref(),
                tenant,
                r.storage,
            ),
            stale: Default::default(),
        }
    }
}

impl Store for BuiltinStore<'_> {
    async fn get(&self, namespace: &str, name: &str) -> Result<Value, ApiError> {
        match self.inner.get(namespace, name).await {
            Ok(v) => {
                let (v, stale) = self.sealing.open_checked(v)?;
                if stale
                    && let Some(rv) = v
                        .pointer("/metadata/resourceVersion")
                        .and_then(Value::as_str)
                {
                    self.stale
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(rv.to_string());
                }
                Ok(self.ty.served_form(v))
            }
            // The stored triple may be shared (events): name the served resource.
            Err(e) if e.code == 404 => Err(ApiError::not_found(&gr(self.ty.resource()), name)),
            Err(e) => Err(e),
        }
    }
    /// The stored bytes as they are for a type served as stored (all but
    /// `events.k8s.io` events, which are converted from the core form).
    async fn get_encoded(&self, namespace: &str, name: &str) -> Result<Bytes, ApiError> {
        let r = self.ty.resource();
        if r.storage != (r.group, r.resource) || self.sealing.active() {
            let v = self.get(namespace, name).await?;
            return Ok(serde_json::to_vec(&v).expect("json").into());
        }
        match self.inner.get_encoded(namespace, name).await {
            Err(e) if e.code == 404 => Err(ApiError::not_found(&gr(r), name)),
            Ok(b) => {
                self.sealing.check_plain(&b)?;
                Ok(b)
            }
            other => other,
        }
    }
    /// The page as stored for a type served as stored (checked to be plaintext), else
    /// each object opened and in the served form.
    async fn list_encoded(
        &self,
        namespace: &str,
        opts: &ListOptions,
    ) -> Result<EncodedList, ApiError> {
        let r = self.ty.resource();
        let page = self.inner.list_encoded(namespace, opts).await?;
        if r.storage == (r.group, r.resource) && !self.sealing.active() {
            for b in &page.items {
                self.sealing.check_plain(b)?;
            }
            return Ok(page);
        }
        let mut page = page;
        for b in &mut page.items {
            let v = serde_json::from_slice(b).map_err(ApiError::internal)?;
            let v = self.sealing.open(v)?;
            *b = serde_json::to_vec(&self.ty.served_form(v))
                .expect("json")
                .into();
        }
        Ok(page)
    }
    async fn list(&self, namespace: &str, opts: &ListOptions) -> Result<ListResult, ApiError> {
        let mut l = self.inner.list(namespace, opts).await?;
        l.items = l
            .items
            .into_iter()
            .map(|v| self.sealing.open(v).map(|v| self.ty.served_form(v)))
            .collect::<Result<_, _>>()?;
        Ok(l)
    }
    fn stale(&self, old: &Value) -> bool {
        old.pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .is_some_and(|rv| {
                self.stale
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .iter()
                    .any(|s| s == rv)
            })
    }
    async fn create(&self, obj: Value, dry_run: bool) -> Result<Stored, ApiError> {
        let stored = self.sealing.seal(self.ty.stored_form(obj))?;
        let v = self
            .inner
            .create(stored, dry_run)
            .await
            .map_err(|e| rename_conflict(e, self.ty))?;
        Ok(self.ty.served_form(self.sealing.open(v.object)?).into())
    }
    async fn update(&self, obj: Value, old: &Value, dry_run: bool) -> Result<Stored, ApiError> {
        let stored = self.sealing.seal(self.ty.stored_form(obj))?;
        let v = self
            .inner
            .update(stored, old, dry_run)
            .await
            .map_err(|e| rename_conflict(e, self.ty))?;
        Ok(self.ty.served_form(self.sealing.open(v.object)?).into())
    }
    async fn before_delete(&self, obj: &Value, dry_run: bool) -> Result<(), ApiError> {
        self.inner
            .before_delete(&self.ty.stored_form(obj.clone()), dry_run)
            .await
    }
    async fn delete(
        &self,
        namespace: &str,
        name: &str,
        expected_rv: u64,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let v = self
            .inner
            .delete(namespace, name, expected_rv, dry_run)
            .await
            .map_err(|e| rename_conflict(e, self.ty))?;
        Ok(self.ty.served_form(self.sealing.open(v)?))
    }
}

/// Storage errors name the stored triple; for a served version stored under another
/// (events.k8s.io events) the client must see its own resource.
fn rename_conflict(e: ApiError, ty: &dyn BuiltinType) -> ApiError {
    let r = ty.resource();
    if r.storage == (r.group, r.resource) {
        return e;
    }
    let stored = format!("{}", GroupResource::new(r.storage.0, r.storage.1));
    let served = format!("{}", gr(r));
    let mut e = e;
    e.message = e.message.replacen(&stored, &served, 1);
    if let Some(d) = e.details.as_mut() {
        d.group = r.group.into();
    }
    e
}
