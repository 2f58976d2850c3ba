//! Whether each backend service answers at all, for `/readyz` (k8s.io/apiserver
//! pkg/server/healthz; upstream's readyz includes the storage backend's health check).
//!
//! Where it sits: called by `discovery.rs` for `/readyz`. Each service gets one cheap call
//! for a tenant no client can name; any Kubernetes Status error in the answer still proves
//! the service is up — except the storage service's 503, which says it cannot reach Redis.

use crate::context::Channel;
use crdplane_core::ApiError;
use crdplane_proto::GrpcStatusExt;
use crdplane_proto::v1 as pb;
use crdplane_proto::v1::registry_client::RegistryClient;
use crdplane_proto::v1::storage_client::StorageClient;
use crdplane_proto::v1::validation_client::ValidationClient;

/// The tenant the probes name (`crdplane-` is not a tenant name a client can use).
const PROBE_TENANT: &str = "crdplane-readyz";

/// Whether one service answered: a reply, or an error the service itself sent.
fn answered<T>(r: &Result<T, tonic::Status>) -> bool {
    match r {
        Ok(_) => true,
        Err(s) => {
            !s.details().is_empty()
                || !matches!(
                    s.code(),
                    tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::Cancelled
                )
        }
    }
}

/// The readiness of the storage, registry and validation services, in that order.
pub async fn probe(
    storage: &StorageClient<Channel>,
    registry: &RegistryClient<Channel>,
    validation: &ValidationClient<Channel>,
) -> [bool; 3] {
    let (mut sc, mut rc, mut vc) = (storage.clone(), registry.clone(), validation.clone());
    let s = sc.list(pb::ListRequest {
        resource: Some(pb::ResourceRef {
            tenant: PROBE_TENANT.into(),
            group: String::new(),
            resource: "namespaces".into(),
        }),
        limit: 1,
        ..Default::default()
    });
    let r = rc.discovery(pb::DiscoveryRequest {
        tenant: PROBE_TENANT.into(),
    });
    let v = vc.validate_crd(pb::ValidateCrdRequest {
        crd_json: b"{}".to_vec().into(),
        old_crd_json: Default::default(),
    });
    let (s, r, v) = tokio::join!(s, r, v);
    let storage_up = match &s {
        Err(st) => answered(&s) && ApiError::from_grpc(st).code != 503,
        Ok(_) => true,
    };
    [storage_up, answered(&r), answered(&v)]
}
