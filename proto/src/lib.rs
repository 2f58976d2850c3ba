//! gRPC contracts between the crdplane gateway and its services (storage, validation,
//! registry). Generated from `proto/crdplane/v1/*.proto` at build time, plus the one
//! conversion per wire type: [`status`] (Kubernetes Status ⇄ gRPC status). Also
//! [`openapi_v2`], gnostic's OpenAPI v2 messages (what `/openapi/v2` serves as protobuf; not a
//! contract between the services), generated from the vendored `proto/gnostic/`.
#![allow(clippy::all)]

/// The generated messages, clients and servers of package `crdplane.v1`. Their docs are the
/// `.proto` comments where there are any; the rest is generated code and exempt.
#[allow(missing_docs)]
pub mod v1 {
    tonic::include_proto!("crdplane.v1");
}
pub use v1::*;

/// gnostic's `openapi.v2` messages: the protobuf form of a Swagger 2.0 document, generated
/// from `proto/gnostic/openapiv2/OpenAPIv2.proto` (vendored unchanged from
/// github.com/google/gnostic-models). Not a crdplane contract: the registry encodes the
/// `/openapi/v2` document with these for kubectl, which requests
/// `application/com.github.proto-openapi.spec.v2@v1.0+protobuf` and decodes it with
/// gnostic's Go types. Field docs are the `.proto` comments where there are any.
// Generated code: most of gnostic's messages and fields have no .proto comment to document.
#[allow(missing_docs)]
pub mod openapi_v2 {
    tonic::include_proto!("openapi.v2");
}

pub mod status;
pub use status::GrpcStatusExt;

/// The one conversion of a resource reference to its gRPC message.
impl From<&crdplane_core::ResourceRef> for v1::ResourceRef {
    fn from(r: &crdplane_core::ResourceRef) -> Self {
        v1::ResourceRef {
            tenant: r.tenant.clone(),
            group: r.group.clone(),
            resource: r.resource.clone(),
        }
    }
}

impl From<&tonic::Status> for v1::ItemStatus {
    /// One failed item of a batched call, as the status it would have got on its own.
    fn from(s: &tonic::Status) -> Self {
        Self {
            code: s.code() as i32,
            message: s.message().to_string(),
            details: s.details().to_vec().into(),
        }
    }
}

impl v1::ItemStatus {
    /// Back to the gRPC status the item would have got as a call of its own.
    pub fn to_status(&self) -> tonic::Status {
        tonic::Status::with_details(
            tonic::Code::from_i32(self.code),
            self.message.clone(),
            self.details.clone(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::v1::ItemStatus;

    #[test]
    fn item_status_round_trips_code_message_and_details() {
        let s = tonic::Status::with_details(
            tonic::Code::AlreadyExists,
            "x \"a\" already exists",
            prost::bytes::Bytes::from_static(b"{\"kind\":\"Status\"}"),
        );
        let back = ItemStatus::from(&s).to_status();
        assert_eq!(back.code(), tonic::Code::AlreadyExists);
        assert_eq!(back.message(), "x \"a\" already exists");
        assert_eq!(&back.details()[..], b"{\"kind\":\"Status\"}");
    }
}
