//! Whether a service account exists, and under which uid: what a service-account token
//! needs beyond its signature (a token outlives nothing it names: delete the account, or
//! delete and recreate it, and its tokens stop working at once, as upstream's validator
//! checks against its informer cache).
//!
//! Where it sits: the authentication layer asks [`uid`] for every request with a
//! service-account token. Answers are cached per (tenant, namespace, name) while the
//! storage change stream of service accounts is followed (`Ctx::spawn_cache_followers`
//! drops an entry on every write of that account and everything when the stream breaks);
//! otherwise each request reads the account from storage.

use crate::context::Ctx;
use crdplane_apiserver::rest::Store;
use crdplane_core::ApiError;

/// The uid of service account `namespace/name` of `tenant`, None when it does not exist.
pub async fn uid(
    ctx: &Ctx,
    tenant: &str,
    namespace: &str,
    name: &str,
) -> Result<Option<String>, ApiError> {
    let key = (tenant.to_string(), namespace.to_string(), name.to_string());
    if let Some(u) = ctx.sa_uids.read().expect("lock").get(&key) {
        return Ok(Some(u.clone()));
    }
    let epoch = ctx.sa_epoch.load(std::sync::atomic::Ordering::SeqCst);
    let store = crate::stores::storage::StorageStore {
        storage: &ctx.storage,
        tenant,
        group: "",
        resource: "serviceaccounts",
        ttl_seconds: 0,
    };
    let uid = match store.get(namespace, name).await {
        Ok(v) => v
            .pointer("/metadata/uid")
            .and_then(|u| u.as_str())
            .unwrap_or_default()
            .to_string(),
        Err(e) if e.code == 404 => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut m = ctx.sa_uids.write().expect("lock");
    if ctx.sa_epoch.load(std::sync::atomic::Ordering::SeqCst) == epoch
        && ctx.sa_following.load(std::sync::atomic::Ordering::SeqCst)
    {
        m.insert(key, uid.clone());
    }
    Ok(Some(uid))
}

/// The uid of Secret `namespace/name` of `tenant` when it exists and is not being deleted,
/// for tokens bound to it (upstream's validator refuses a bound Secret that is gone,
/// terminating or recreated). Read from storage on every request with such a token: Secrets
/// have no change stream the gateways follow, and bound tokens are rare.
pub async fn secret_uid(
    ctx: &Ctx,
    tenant: &str,
    namespace: &str,
    name: &str,
) -> Result<Option<String>, ApiError> {
    let ty = crdplane_core::builtin::lookup("", "v1", "secrets").expect("secrets are built-in");
    let store =
        crate::stores::builtin::BuiltinStore::new(ctx, tenant, crate::stores::builtin::type_of(ty));
    match store.get(namespace, name).await {
        Ok(v) if v.pointer("/metadata/deletionTimestamp").is_none() => Ok(v
            .pointer("/metadata/uid")
            .and_then(|u| u.as_str())
            .map(str::to_string)),
        Ok(_) => Ok(None),
        Err(e) if e.code == 404 => Ok(None),
        Err(e) => Err(e),
    }
}
