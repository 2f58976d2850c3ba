//! The registry service's per-tenant documents: discovery (legacy and aggregated) and
//! OpenAPI v2 (JSON and gnostic protobuf) and v3, as the registry renders them
//! (`services/registry/src/discovery.rs`, `openapi/`).
//!
//! Where it sits: called by `discovery.rs` for `/apis*` and `/openapi/*`.

use crate::context::Channel;
use bytes::Bytes;
use crdplane_core::ApiError;
use crdplane_proto::v1 as pb;
use crdplane_proto::v1::registry_client::RegistryClient;
use std::collections::HashMap;

/// The discovery documents of one tenant, JSON.
#[derive(Debug, Clone, Default)]
pub struct Discovery {
    /// `APIGroupList` (legacy `/apis`).
    pub group_list: Bytes,
    /// One `APIResourceList` per group-version, keyed `"<group>/<version>"`.
    pub resource_lists: HashMap<String, Bytes>,
    /// `APIGroupDiscoveryList` (aggregated discovery, `apidiscovery.k8s.io/v2`).
    pub aggregated: Bytes,
}

/// The OpenAPI v2 document of one tenant in both encodings.
#[derive(Debug, Clone, Default)]
pub struct OpenApiV2 {
    /// Swagger 2.0 JSON.
    pub json: Bytes,
    /// The same document as gnostic `openapi.v2.Document` protobuf.
    pub protobuf: Bytes,
    /// Content hash, sent as the ETag.
    pub etag: String,
}

/// One OpenAPI v3 document (the index or one group-version's).
#[derive(Debug, Clone, Default)]
pub struct OpenApiV3 {
    /// The document's JSON.
    pub json: Bytes,
    /// Content hash, sent as the ETag ("" = none).
    pub etag: String,
}

/// The discovery documents of `tenant`.
pub async fn discovery(
    registry: &RegistryClient<Channel>,
    tenant: &str,
) -> Result<Discovery, ApiError> {
    let d = registry
        .clone()
        .discovery(pb::DiscoveryRequest {
            tenant: tenant.into(),
        })
        .await
        .map_err(crdplane_proto::status::from_grpc)?
        .into_inner();
    Ok(Discovery {
        group_list: d.group_list,
        resource_lists: d.resource_lists,
        aggregated: d.aggregated,
    })
}

/// The OpenAPI v2 document of `tenant`.
pub async fn openapi_v2(
    registry: &RegistryClient<Channel>,
    tenant: &str,
) -> Result<OpenApiV2, ApiError> {
    let d = registry
        .clone()
        .open_api_v2(pb::OpenApiRequest {
            tenant: tenant.into(),
            path: String::new(),
        })
        .await
        .map_err(crdplane_proto::status::from_grpc)?
        .into_inner();
    Ok(OpenApiV2 {
        json: d.json,
        protobuf: d.protobuf,
        etag: d.etag,
    })
}

/// The OpenAPI v3 document at `path` (`""`: the index; `apis/<group>/<version>`) of
/// `tenant`, or `None` when there is none.
pub async fn openapi_v3(
    registry: &RegistryClient<Channel>,
    tenant: &str,
    path: &str,
) -> Result<Option<OpenApiV3>, ApiError> {
    let d = registry
        .clone()
        .open_api_v3(pb::OpenApiRequest {
            tenant: tenant.into(),
            path: path.into(),
        })
        .await
        .map_err(crdplane_proto::status::from_grpc)?
        .into_inner();
    Ok(d.found.then_some(OpenApiV3 {
        json: d.json,
        etag: d.etag,
    }))
}
