//! Records garbage-collection work (`crdplane_core::gcqueue`) before the gateway deletes an
//! object or marks it for deletion, so the registry's collector
//! (`services/registry/src/gc.rs`) handles its dependents — also after a restart of any
//! process. Upstream the garbage collector learns of deletions by watching every resource
//! (`pkg/controller/garbagecollector/graph_builder.go`); here the writer records them.
//!
//! After a write that adds owner references (create, update, patch) it records a
//! verification item per added owner uid (`gcqueue::verify_entry`): the collector checks
//! that the owner exists and collects the dependent when it does not (upstream's virtual
//! owner nodes, `graph_builder.go`). It is recorded *after* the write, so the collector's
//! lookup of the owner's dependents sees the dependent; a crash in between loses the check
//! (no resync yet). Recording it is best effort: a failure is logged, the
//! client's write stands.
//!
//! The entry is recorded *before* the write: a crash between the two leaves an entry whose
//! owner still exists, which the collector drops after a grace period; the other order could
//! lose the work.
use crdplane_core::ApiError;
use crdplane_core::gcqueue::{self, Owner};
use crdplane_proto::GrpcStatusExt;
use crdplane_proto::v1 as pb;
use crdplane_proto::v1::storage_client::StorageClient;
use crdplane_transport::Channel;
use serde_json::Value;

fn queue_key(tenant: &str, name: String) -> pb::ObjectKey {
    pb::ObjectKey {
        resource: Some(pb::ResourceRef {
            tenant: gcqueue::QUEUE_TENANT.into(),
            group: gcqueue::QUEUE_GROUP.into(),
            resource: gcqueue::queue_resource(tenant),
        }),
        namespace: tenant.into(),
        name,
    }
}

fn write_of(v: &Value) -> Result<pb::ObjectWrite, ApiError> {
    let (head, tail) = crdplane_core::rvslot::split(v).map_err(ApiError::internal)?;
    Ok(pb::ObjectWrite {
        head: head.into(),
        tail: tail.into(),
    })
}

/// Records (or re-records, keeping its lease) the work item of the object `obj` of
/// `group`/`resource` in `tenant`. Objects without a uid have no dependents to handle.
pub async fn record(
    storage: &StorageClient<Channel>,
    tenant: &str,
    group: &str,
    resource: &str,
    obj: &Value,
) -> Result<(), ApiError> {
    let Some(owner) = Owner::of(group, resource, obj) else {
        return Ok(());
    };
    record_owner(storage, tenant, &owner, false).await
}

/// Records verification items for the owner references `new` has and `old` (the object
/// before the write, `None` on create) had not; failures are logged.
pub async fn verify_added_refs(
    storage: &StorageClient<Channel>,
    tenant: &str,
    new: &[u8],
    old: Option<&Value>,
) {
    // Cheap test first: most objects have no owner references.
    if !new.windows(17).any(|w| w == b"\"ownerReferences\"") {
        return;
    }
    let Ok(new) = serde_json::from_slice::<Value>(new) else {
        return;
    };
    for owner in Owner::added_refs(&new, old) {
        if let Err(e) = record_owner(storage, tenant, &owner, true).await {
            tracing::warn!(error = %e, tenant, owner = %owner.uid,
                "gc: recording the verification of an owner reference failed");
        }
    }
}

async fn record_owner(
    storage: &StorageClient<Channel>,
    tenant: &str,
    owner: &Owner,
    verify: bool,
) -> Result<(), ApiError> {
    let mut st = storage.clone();
    // Verification items are per (owner uid, lookup namespace); deletions per owner uid.
    let key = queue_key(
        tenant,
        if verify {
            gcqueue::verify_entry_name(owner)
        } else {
            gcqueue::entry_name(&owner.uid)
        },
    );
    for _ in 0..5 {
        let now = gcqueue::now_ms();
        let fresh = if verify {
            gcqueue::verify_entry(tenant, owner, now)
        } else {
            gcqueue::entry(tenant, owner, now)
        };
        match st
            .create(pb::CreateRequest {
                key: Some(key.clone()),
                object: Some(write_of(&fresh)?),
                dry_run: false,
                ttl_seconds: 0,
            })
            .await
        {
            Ok(_) => return Ok(()),
            Err(s) if ApiError::from_grpc(&s).code == 409 => {}
            Err(s) => return Err(ApiError::from_grpc(&s)),
        }
        let cur = match st
            .get(pb::GetRequest {
                key: Some(key.clone()),
            })
            .await
        {
            Ok(c) => c.into_inner(),
            Err(s) if ApiError::from_grpc(&s).code == 404 => continue,
            Err(s) => return Err(ApiError::from_grpc(&s)),
        };
        let mut e: Value = serde_json::from_slice(&cur.json).map_err(ApiError::internal)?;
        if verify {
            // Not yet claimed: its first pass comes after this write anyway.
            if gcqueue::lease(&e).is_none() {
                return Ok(());
            }
            gcqueue::touch_verify(&mut e, now);
        } else {
            gcqueue::touch(&mut e, owner, now);
        }
        match st
            .update(pb::UpdateRequest {
                key: Some(key.clone()),
                object: Some(write_of(&e)?),
                expected_resource_version: cur.resource_version,
                dry_run: false,
                ttl_seconds: 0,
            })
            .await
        {
            Ok(_) => return Ok(()),
            Err(s) if matches!(ApiError::from_grpc(&s).code, 404 | 409) => continue,
            Err(s) => return Err(ApiError::from_grpc(&s)),
        }
    }
    Err(ApiError::internal(
        "could not record the garbage collection of the object",
    ))
}
