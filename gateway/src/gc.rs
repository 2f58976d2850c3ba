//! Records garbage-collection work (`crdplane_core::gcqueue`) before the gateway deletes an
//! object or marks it for deletion, so the registry's collector
//! (`services/registry/src/gc.rs`) handles its dependents — also after a restart of any
//! process. Upstream the garbage collector learns of deletions by watching every resource
//! (`pkg/controller/garbagecollector/graph_builder.go`); here the writer records them.
//!
//! The entry is recorded *before* the write: a crash between the two leaves an entry whose
//! owner still exists, which the collector drops after a grace period; the other order could
//! lose the work.
use crdplane_core::ApiError;
use crdplane_core::gcqueue::{self, Owner};
use crdplane_proto::v1 as pb;
use crdplane_proto::v1::storage_client::StorageClient;
use crdplane_transport::Channel;
use serde_json::Value;

fn queue_key(tenant: &str, uid: &str) -> pb::ObjectKey {
    pb::ObjectKey {
        resource: Some(pb::ResourceRef {
            tenant: gcqueue::QUEUE_TENANT.into(),
            group: gcqueue::QUEUE_GROUP.into(),
            resource: gcqueue::QUEUE_RESOURCE.into(),
        }),
        namespace: tenant.into(),
        name: gcqueue::entry_name(uid),
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
    let mut st = storage.clone();
    let key = queue_key(tenant, &owner.uid);
    for _ in 0..5 {
        let now = gcqueue::now_ms();
        match st
            .create(pb::CreateRequest {
                key: Some(key.clone()),
                object: Some(write_of(&gcqueue::entry(tenant, &owner, now))?),
                dry_run: false,
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
        gcqueue::touch(&mut e, now);
        match st
            .update(pb::UpdateRequest {
                key: Some(key.clone()),
                object: Some(write_of(&e)?),
                expected_resource_version: cur.resource_version,
                dry_run: false,
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
