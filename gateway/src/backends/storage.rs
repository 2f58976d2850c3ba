//! The storage service's LIST page (the list's resourceVersion rules turned into the
//! request's three revision fields) and the HMAC key of continue tokens.
//!
//! Where it sits: under the storage-backed stores' `list_encoded` (`stores/storage.rs`) and
//! `list.rs` (the key, to verify and sign tokens).

use crate::context::Channel;
use crdplane_apiserver::rest::{EncodedList, ListOptions};
use crdplane_core::ApiError;
use crdplane_proto::v1 as pb;
use crdplane_proto::v1::storage_client::StorageClient;
use std::sync::Arc;

/// The HMAC key for continue tokens, fetched once per process from the storage service
/// (which creates it in Redis once for all replicas).
pub async fn continue_key(storage: &StorageClient<Channel>) -> Result<Arc<[u8]>, ApiError> {
    static KEY: tokio::sync::OnceCell<Arc<[u8]>> = tokio::sync::OnceCell::const_new();
    KEY.get_or_try_init(|| async {
        let r = storage
            .clone()
            .continue_key(pb::ContinueKeyRequest {})
            .await
            .map_err(crdplane_proto::status::from_grpc)?
            .into_inner();
        if r.key.len() < 16 {
            return Err(ApiError::internal("continue key too short"));
        }
        Ok(Arc::from(r.key.to_vec()))
    })
    .await
    .cloned()
}

/// One page of the objects of `[tenant, group, resource]` in `namespace` ("" = all) as
/// `opts` asks for; `continue_token` of the answer is the storage's next start key, not yet
/// signed.
pub async fn list_page(
    storage: &StorageClient<Channel>,
    [tenant, group, resource]: [&str; 3],
    namespace: &str,
    opts: &ListOptions,
) -> Result<EncodedList, ApiError> {
    let (min_rv, exact_rv, continue_rv) = opts.rv.storage_rv(opts.continuing);
    let r = storage
        .clone()
        .list(pb::ListRequest {
            resource: Some(pb::ResourceRef {
                tenant: tenant.into(),
                group: group.into(),
                resource: resource.into(),
            }),
            namespace: namespace.into(),
            limit: opts.limit,
            start_after: opts.continue_token.clone(),
            name: String::new(),
            label_selector: opts.label_selector.clone(),
            field_selector: opts.field_selector.clone(),
            min_resource_version: min_rv,
            exact_resource_version: exact_rv,
            continue_resource_version: continue_rv,
        })
        .await
        .map_err(crdplane_proto::status::from_grpc)?
        .into_inner();
    Ok(EncodedList {
        items: r.items,
        resource_version: r.resource_version,
        continue_token: r.next_start_after,
        remaining: r.has_remaining_item_count.then_some(r.remaining_item_count),
    })
}

/// One step of the storage service's `PurgeTenant` walk over the keys of `tenant` from
/// `cursor`: the next cursor (0: the walk is done) and the objects deleted.
pub async fn purge_tenant(
    storage: &StorageClient<Channel>,
    tenant: &str,
    cursor: u64,
    count: u32,
) -> Result<(u64, u64), ApiError> {
    let r = storage
        .clone()
        .purge_tenant(pb::PurgeTenantRequest {
            tenant: tenant.into(),
            cursor,
            count,
        })
        .await
        .map_err(crdplane_proto::status::from_grpc)?
        .into_inner();
    Ok((r.cursor, r.deleted))
}

/// One step of the storage service's `ScanResources` walk from `cursor`: the tenants of the
/// (tenant, group, resource) triples that hold objects (repeats possible) and the next
/// cursor (0: the walk is done).
pub async fn scan_tenants(
    storage: &StorageClient<Channel>,
    cursor: u64,
    count: u32,
) -> Result<(Vec<String>, u64), ApiError> {
    let r = storage
        .clone()
        .scan_resources(pb::ScanResourcesRequest { cursor, count })
        .await
        .map_err(crdplane_proto::status::from_grpc)?
        .into_inner();
    Ok((
        r.resources.into_iter().map(|t| t.tenant).collect(),
        r.cursor,
    ))
}
