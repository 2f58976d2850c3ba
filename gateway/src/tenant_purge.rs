//! The purge controller of deleted tenants: every Terminating Tenant
//! (`crate::stores::tenants`) has all objects of its tenant removed, then the Tenant
//! itself, which ends its deletion.
//!
//! Where it sits: a background task of each gateway process, beside the request path
//! (started by `serve`). It is woken by every Tenant deletion of this process
//! (`Ctx::tenant_purge`) and looks again every [`RESYNC`], so a deletion that another
//! replica accepted, or that a process stopped in the middle of, is finished by whichever
//! gateway runs next: the Terminating mark is stored, and each step is idempotent. Replicas
//! that purge the same tenant at once only repeat each other's work.
//!
//! The objects are removed by the storage service (`PurgeTenant`, a Redis SCAN over the
//! tenant's keys): each through the normal delete path, so watchers see DELETED events and
//! the gateways' and registry's caches hear of it, then the tenant's watch history and
//! indexes; its revision counters stay, so resourceVersions never repeat if the name is
//! used again. No request reaches a Terminating tenant (the tenant-lifecycle layer refuses
//! them), so nothing new is written while it runs; a request already in flight when the
//! Tenant was marked is caught by the next walk: the controller walks until a whole walk
//! finds nothing. Upstream's counterpart is the namespace controller
//! (pkg/controller/namespace/deletion), which deletes a Terminating namespace's content and
//! then finalizes it.

use crate::context::Ctx;
use crate::stores::tenants::{self as store, TenantStore};
use crdplane_apiserver::rest::{ListOptions, Store};
use crdplane_core::ApiError;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// How often every gateway looks for Terminating Tenants besides being woken.
pub const RESYNC: Duration = Duration::from_secs(30);

/// Keys per storage SCAN step.
const SCAN_COUNT: u32 = 100;

/// Whole walks over a tenant's keys before the controller gives up until the next round
/// (each walk after the first only finds what requests in flight at the mark wrote).
const MAX_WALKS: usize = 5;

/// Starts the controller of `ctx`, for the life of the process.
pub fn spawn(ctx: &Arc<Ctx>) {
    tokio::spawn(run(ctx.clone()));
}

async fn run(c: Arc<Ctx>) {
    let mut backoff = Duration::from_secs(1);
    // The configured default tenant exists from the start (listed by `get tenants`),
    // not only from its first request; a failure here is retried by that request.
    if let Err(e) = crate::tenants::phase(&c, &c.cfg.default_tenant).await {
        tracing::debug!(error = %e.message, "creating the default tenant at startup failed");
    }
    if c.cfg.adopt_stored_tenants {
        match adopt(&c).await {
            Ok(n) => tracing::info!(
                adopted = n,
                "Tenants created for the stored tenants without one"
            ),
            Err(e) => tracing::error!(error = %e.message, "adopting the stored tenants failed"),
        }
    }
    loop {
        let wait = match round(&c).await {
            Ok(()) => {
                backoff = Duration::from_secs(1);
                RESYNC
            }
            Err(e) => {
                tracing::warn!(error = %e.message, "purging deleted tenants failed; retrying");
                backoff = (backoff * 2).min(RESYNC);
                backoff
            }
        };
        // Wait for a deletion of this process or the next resync.
        let _ = tokio::time::timeout(wait, c.tenant_purge.notified()).await;
    }
}

/// `--adopt-stored-tenants`: walks storage (`ScanResources`) for the tenants that hold
/// objects and creates (and seeds) a Tenant for each that has none; the number created. An
/// operator's one-off after upgrading from a version without Tenants: it runs only when
/// asked, so it never races with a purge (whose tenant it would bring back).
pub async fn adopt(ctx: &Ctx) -> Result<usize, ApiError> {
    let mut seen = std::collections::BTreeSet::new();
    let mut cursor = 0;
    loop {
        let (tenants, next) =
            crate::backends::storage::scan_tenants(&ctx.storage, cursor, 1000).await?;
        seen.extend(tenants);
        if next == 0 {
            break;
        }
        cursor = next;
    }
    let mut adopted = 0;
    for t in seen {
        if t == store::ADMIN_SCOPE || !crate::request_info::valid_tenant(&t) || store::reserved(&t)
        {
            continue;
        }
        let tenants = TenantStore::new(&ctx.storage, &ctx.tenant_purge);
        match tenants.get("", &t).await {
            Ok(_) => {}
            Err(e) if e.code == 404 => {
                match crate::tenants::create_tenant(
                    ctx,
                    serde_json::json!({"metadata": {"name": t}}),
                    &crdplane_apiserver::handlers::WriteOptions::system(
                        crate::stores::tenants::API_VERSION,
                    ),
                )
                .await
                {
                    Ok(_) => adopted += 1,
                    Err(e) if e.code == 409 => {}
                    Err(e) => return Err(e),
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(adopted)
}

/// One round: every Terminating Tenant is purged and removed.
async fn round(ctx: &Ctx) -> Result<(), ApiError> {
    // Every Tenant, 500 at a time (each page read fresh: the controller needs no snapshot).
    let tenants = TenantStore::new(&ctx.storage, &ctx.tenant_purge);
    let mut terminating: Vec<Value> = Vec::new();
    let mut opts = ListOptions {
        limit: 500,
        ..Default::default()
    };
    loop {
        let page = tenants.list("", &opts).await?;
        terminating.extend(page.items.into_iter().filter(store::terminating));
        if page.continue_token.is_empty() {
            break;
        }
        opts.continue_token = page.continue_token;
    }
    let mut first_err = None;
    for t in terminating {
        if let Err(e) = purge(ctx, &t).await {
            first_err.get_or_insert(e);
        }
    }
    first_err.map_or(Ok(()), Err)
}

/// Removes every object of the tenant of Terminating Tenant `t`, then `t`.
pub async fn purge(ctx: &Ctx, t: &Value) -> Result<(), ApiError> {
    let name = t
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let started = std::time::Instant::now();
    let mut total = 0u64;
    let mut clean = false;
    for _ in 0..MAX_WALKS {
        let found = walk(ctx, &name).await?;
        total += found;
        if found == 0 {
            clean = true;
            break;
        }
    }
    if !clean {
        return Err(ApiError::internal(format!(
            "tenant {name} still had objects after {MAX_WALKS} walks"
        )));
    }
    // The Tenant goes last, only if nobody changed it meanwhile.
    let tenants = TenantStore::new(&ctx.storage, &ctx.tenant_purge);
    let rv = crdplane_apiserver::rest::stored_rv(t);
    match tenants.storage().delete_raw("", &name, rv, false).await {
        Ok(_) => {}
        Err(e) if e.code == 404 || e.code == 409 => {}
        Err(e) => return Err(e),
    }
    ctx.forget_tenant(&name);
    tracing::info!(tenant = %name, objects = total, elapsed = ?started.elapsed(), "tenant purged");
    Ok(())
}

/// One whole walk over the tenant's keys; the objects it deleted.
async fn walk(ctx: &Ctx, tenant: &str) -> Result<u64, ApiError> {
    let mut cursor = 0;
    let mut deleted = 0;
    loop {
        let (next, n) =
            crate::backends::storage::purge_tenant(&ctx.storage, tenant, cursor, SCAN_COUNT)
                .await?;
        deleted += n;
        cursor = next;
        if cursor == 0 {
            return Ok(deleted);
        }
    }
}
