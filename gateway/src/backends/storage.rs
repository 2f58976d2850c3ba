//! The storage service's LIST page (with the resourceVersion rules of a list already
//! turned into its three revision fields) and the HMAC key of continue tokens.
//!
//! Where it sits: under `list.rs` (every family's LIST page) and the CRD list; the
//! per-object calls of the generic stores are `stores/storage.rs`.

use crate::context::Channel;
use crate::stores::storage::RawList;
use crdplane_core::options::ListOptions;
use crdplane_core::{ApiError, ResourceRef};
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

/// One page of `resource` in `namespace` ("" = all) as `opts` (validated, token decoded)
/// and the selectors ask for. `continue_token` of the answer is the storage's next start
/// key, not yet signed.
pub async fn list_page(
    storage: &StorageClient<Channel>,
    resource: &ResourceRef,
    namespace: &str,
    opts: &ListOptions,
    label_selector: String,
    field_selector: String,
) -> Result<RawList, ApiError> {
    let (min_rv, exact_rv, continue_rv) = opts.storage_rv();
    let r = storage
        .clone()
        .list(pb::ListRequest {
            resource: Some(resource.into()),
            namespace: namespace.into(),
            limit: opts.limit,
            start_after: opts.start_after.clone(),
            name: String::new(),
            label_selector,
            field_selector,
            min_resource_version: min_rv,
            exact_resource_version: exact_rv,
            continue_resource_version: continue_rv,
        })
        .await
        .map_err(crdplane_proto::status::from_grpc)?
        .into_inner();
    Ok(RawList {
        items: r.items,
        resource_version: r.resource_version,
        continue_token: r.next_start_after,
        remaining: r.has_remaining_item_count.then_some(r.remaining_item_count),
    })
}
