//! What the transport's integration tests share: a test gRPC service.

use std::time::Duration;

use crdplane_proto::v1 as pb;
use crdplane_proto::v1::validation_server::Validation;
use crdplane_transport::CallContext;
use tonic::{Request, Response, Status};

/// A test service: `Admit` answers with the server's name in `object` and, in `warnings`,
/// the call's tenant, user, traceparent and grpc-timeout as the server saw them; an object
/// `sleep:MS` sleeps first.
pub(crate) struct Echo {
    /// Answered in `object`.
    pub(crate) name: String,
}

#[tonic::async_trait]
impl Validation for Echo {
    async fn validate_crd(
        &self,
        _: Request<pb::ValidateCrdRequest>,
    ) -> Result<Response<pb::ValidationResult>, Status> {
        Err(Status::unimplemented("test"))
    }
    async fn load_schema(
        &self,
        _: Request<pb::LoadSchemaRequest>,
    ) -> Result<Response<pb::Empty>, Status> {
        Err(Status::unimplemented("test"))
    }
    async fn admit(
        &self,
        req: Request<pb::AdmitRequest>,
    ) -> Result<Response<pb::AdmitResponse>, Status> {
        let ctx = CallContext::from_metadata(req.metadata());
        let timeout = req
            .metadata()
            .get("grpc-timeout")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let seen = crdplane_transport::deadline::from_metadata(req.metadata());
        let obj = String::from_utf8_lossy(&req.get_ref().object).to_string();
        if let Some(ms) = obj.strip_prefix("sleep:") {
            tokio::time::sleep(Duration::from_millis(ms.parse().unwrap())).await;
        }
        Ok(Response::new(pb::AdmitResponse {
            object: self.name.clone().into_bytes().into(),
            warnings: vec![
                ctx.tenant().unwrap_or("-").to_string(),
                ctx.user().unwrap_or("-").to_string(),
                ctx.traceparent().unwrap_or("-").to_string(),
                timeout,
                format!("{:?}", seen),
            ],
            ..Default::default()
        }))
    }
    async fn admit_many(
        &self,
        _: Request<pb::AdmitManyRequest>,
    ) -> Result<Response<pb::AdmitManyResponse>, Status> {
        Err(Status::unimplemented("test"))
    }
    async fn normalize(
        &self,
        _: Request<pb::NormalizeRequest>,
    ) -> Result<Response<pb::NormalizeResponse>, Status> {
        Err(Status::unimplemented("test"))
    }
}
