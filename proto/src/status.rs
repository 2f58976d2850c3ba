//! The Kubernetes `Status` on gRPC: the one conversion between [`ApiError`] (crdplane-core's
//! edge error, rendered by the gateway as upstream's `metav1.Status` JSON) and
//! `tonic::Status`.
//!
//! A service's failure travels as a gRPC status whose code comes from [`grpc_code`] (the one
//! table from Status reason to gRPC code) and whose `details` are the standard
//! `google.rpc.Status` (grpc-status-details-bin, built with tonic-types) holding one
//! `google.protobuf.Any` of type [`TYPE_URL`]: the protobuf [`KubernetesStatus`]
//! (`crdplane/v1/status.proto`, field numbers as upstream's apimachinery `generated.proto`).
//!
//! Where it sits: services call [`GrpcStatusExt::to_grpc`] on their way out; the gateway and
//! the registry call [`GrpcStatusExt::from_grpc`] on every failed call, which is also where
//! failures of the path to a service become upstream's 503/504 (apiserver answers an
//! unreachable dependency with 503/504 and a Retry-After, never 500 with the transport's
//! words; `endpoints/handlers/finisher`, `apimachinery/pkg/api/errors`).

use crate::v1::{KubernetesStatus, KubernetesStatusCause, KubernetesStatusDetails};
use crdplane_core::status::{RETRY_AFTER_SECONDS, StatusCause, StatusDetails};
use crdplane_core::{ApiError, Reason};
use prost::Message;
use tonic::Code;

/// Type URL of the [`KubernetesStatus`] inside the `google.rpc.Status` details.
pub const TYPE_URL: &str = "type.googleapis.com/crdplane.v1.KubernetesStatus";

/// The gRPC code of a failure with this reason (what a gRPC client that does not read the
/// details sees).
pub fn grpc_code(reason: Reason) -> Code {
    match reason {
        Reason::BadRequest => Code::InvalidArgument,
        Reason::Unauthorized => Code::Unauthenticated,
        Reason::Forbidden => Code::PermissionDenied,
        Reason::NotFound => Code::NotFound,
        Reason::MethodNotAllowed => Code::Unimplemented,
        Reason::NotAcceptable => Code::InvalidArgument,
        Reason::AlreadyExists => Code::AlreadyExists,
        Reason::Conflict => Code::Aborted,
        Reason::Gone | Reason::Expired => Code::OutOfRange,
        Reason::RequestEntityTooLarge => Code::ResourceExhausted,
        Reason::UnsupportedMediaType => Code::InvalidArgument,
        Reason::Invalid => Code::InvalidArgument,
        Reason::TooManyRequests => Code::ResourceExhausted,
        Reason::InternalError => Code::Internal,
        Reason::ServiceUnavailable => Code::Unavailable,
        Reason::Timeout => Code::DeadlineExceeded,
        Reason::Unknown => Code::Internal,
    }
}

impl From<&StatusCause> for KubernetesStatusCause {
    fn from(c: &StatusCause) -> Self {
        Self {
            r#type: c.type_.clone(),
            message: c.message.clone(),
            field: c.field.clone(),
        }
    }
}

impl From<KubernetesStatusCause> for StatusCause {
    fn from(c: KubernetesStatusCause) -> Self {
        Self {
            type_: c.r#type,
            message: c.message,
            field: c.field,
        }
    }
}

impl From<&StatusDetails> for KubernetesStatusDetails {
    fn from(d: &StatusDetails) -> Self {
        Self {
            name: d.name.clone(),
            group: d.group.clone(),
            kind: d.kind.clone(),
            uid: d.uid.clone(),
            causes: d.causes.iter().map(Into::into).collect(),
            retry_after_seconds: d.retry_after_seconds,
        }
    }
}

impl From<KubernetesStatusDetails> for StatusDetails {
    fn from(d: KubernetesStatusDetails) -> Self {
        Self {
            name: d.name,
            group: d.group,
            kind: d.kind,
            uid: d.uid,
            causes: d.causes.into_iter().map(Into::into).collect(),
            retry_after_seconds: d.retry_after_seconds,
            // A ListMeta continue token never crosses gRPC: the gateway makes them.
            list_continue: String::new(),
        }
    }
}

impl From<&ApiError> for KubernetesStatus {
    fn from(e: &ApiError) -> Self {
        Self {
            message: e.message.clone(),
            reason: e.reason.as_str().to_string(),
            details: e.details.as_deref().map(Into::into),
            code: i32::from(e.code),
        }
    }
}

impl From<KubernetesStatus> for ApiError {
    /// A reason this build does not know becomes `InternalError`, as the JSON decoding did.
    fn from(s: KubernetesStatus) -> Self {
        ApiError {
            reason: Reason::parse(&s.reason).unwrap_or(Reason::InternalError),
            code: u16::try_from(s.code).unwrap_or(500),
            message: s.message,
            details: s.details.map(|d| Box::new(d.into())),
        }
    }
}

/// The `google.rpc.Status` bytes carrying `e` (what goes into `tonic::Status::details`).
pub fn encode_details(e: &ApiError) -> Vec<u8> {
    let rpc = tonic_types::Status {
        code: grpc_code(e.reason) as i32,
        message: e.message.clone(),
        details: vec![prost_types::Any {
            type_url: TYPE_URL.to_string(),
            value: KubernetesStatus::from(e).encode_to_vec(),
        }],
    };
    rpc.encode_to_vec()
}

/// The Kubernetes Status in the details of a gRPC status, if the service put one there.
pub fn decode_details(details: &[u8]) -> Option<ApiError> {
    if details.is_empty() {
        return None;
    }
    let rpc = tonic_types::Status::decode(details).ok()?;
    let any = rpc.details.into_iter().find(|a| a.type_url == TYPE_URL)?;
    KubernetesStatus::decode(any.value.as_slice())
        .ok()
        .map(Into::into)
}

/// gRPC transport of [`ApiError`] (an extension trait: the error type lives in the IO-free
/// core, which knows nothing of gRPC).
pub trait GrpcStatusExt: Sized {
    /// A gRPC status carrying this error (code from [`grpc_code`], the Status in details).
    fn to_grpc(&self) -> tonic::Status;
    /// Recovers the Status from a gRPC status. This is the one place where failures of the
    /// path to a service are mapped:
    ///
    /// - a Status the service decided (in `details`) passes through, except that a 503/504
    ///   is re-rendered with the generic text and `retryAfterSeconds` (a service's outage
    ///   text names its backend: Redis errors, socket paths);
    /// - no Status: the call failed on the way (connection refused or reset, HTTP/2 stream
    ///   errors, the service process died mid-call) or the service failed without deciding;
    ///   `DeadlineExceeded` is a 504, everything else a 503; never the message.
    fn from_grpc(s: &tonic::Status) -> Self;
}

impl GrpcStatusExt for ApiError {
    fn to_grpc(&self) -> tonic::Status {
        tonic::Status::with_details(
            grpc_code(self.reason),
            self.message.clone(),
            encode_details(self).into(),
        )
    }

    fn from_grpc(s: &tonic::Status) -> Self {
        if let Some(e) = decode_details(s.details()) {
            return match e.code {
                503 => ApiError::dependency_unavailable(),
                504 if e.retry_after().is_none() => {
                    let mut e = e;
                    e.details
                        .get_or_insert_with(Default::default)
                        .retry_after_seconds = RETRY_AFTER_SECONDS;
                    e
                }
                _ => e,
            };
        }
        match s.code() {
            Code::DeadlineExceeded => ApiError::dependency_timeout(),
            _ => ApiError::dependency_unavailable(),
        }
    }
}

/// `ApiError` → `tonic::Status`, for `map_err` and `?` in service handlers.
pub fn to_grpc(e: ApiError) -> tonic::Status {
    e.to_grpc()
}

/// `tonic::Status` → `ApiError`, for `map_err` on calls to a service.
pub fn from_grpc(s: tonic::Status) -> ApiError {
    ApiError::from_grpc(&s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crdplane_core::{FieldError, GroupResource};
    use serde_json::json;

    fn gr() -> GroupResource {
        GroupResource::new("stable.example.com", "crontabs")
    }

    #[test]
    fn every_reason_has_its_grpc_code() {
        let table = [
            (Reason::BadRequest, Code::InvalidArgument),
            (Reason::Unauthorized, Code::Unauthenticated),
            (Reason::Forbidden, Code::PermissionDenied),
            (Reason::NotFound, Code::NotFound),
            (Reason::MethodNotAllowed, Code::Unimplemented),
            (Reason::NotAcceptable, Code::InvalidArgument),
            (Reason::AlreadyExists, Code::AlreadyExists),
            (Reason::Conflict, Code::Aborted),
            (Reason::Gone, Code::OutOfRange),
            (Reason::Expired, Code::OutOfRange),
            (Reason::RequestEntityTooLarge, Code::ResourceExhausted),
            (Reason::UnsupportedMediaType, Code::InvalidArgument),
            (Reason::Invalid, Code::InvalidArgument),
            (Reason::TooManyRequests, Code::ResourceExhausted),
            (Reason::InternalError, Code::Internal),
            (Reason::ServiceUnavailable, Code::Unavailable),
            (Reason::Timeout, Code::DeadlineExceeded),
            (Reason::Unknown, Code::Internal),
        ];
        for (r, c) in table {
            assert_eq!(grpc_code(r), c, "{r:?}");
        }
    }

    #[test]
    fn grpc_round_trip_keeps_the_status() {
        let e = ApiError::already_exists(&gr(), "x");
        let s = e.to_grpc();
        assert_eq!(s.code(), Code::AlreadyExists);
        assert_eq!(s.message(), e.message);
        assert_eq!(ApiError::from_grpc(&s), e);
        let t = ApiError::from_grpc(&tonic::Status::unavailable("down"));
        assert_eq!(t.code, 503);
    }

    #[test]
    fn round_trip_renders_the_same_status_json() {
        let errs = vec![
            FieldError::invalid("spec.replicas", json!(15), "must be <= 10"),
            FieldError::required("spec.cronSpec", ""),
        ];
        let cases = [
            ApiError::not_found(&gr(), "x"),
            ApiError::path_not_found(),
            ApiError::stale(&gr(), "x"),
            ApiError::invalid("CronTab", "stable.example.com", "x", &errs),
            ApiError::bad_request("bad"),
            ApiError::internal("boom"),
            ApiError::forbidden(&gr(), "", "namespace is terminating"),
            ApiError::method_not_supported(&gr(), "deletecollection"),
            ApiError::too_large(3145728),
            ApiError::expired("too old resource version: 1 (5)"),
            ApiError::new(Reason::Unknown, "resourceVersion should not be set"),
            ApiError::dependency_timeout(),
        ];
        for e in cases {
            let back = ApiError::from_grpc(&e.to_grpc());
            assert_eq!(back.to_json(), e.to_json(), "{e:?}");
            assert_eq!(back, e);
        }
    }

    #[test]
    fn details_are_a_google_rpc_status_with_the_kubernetes_status() {
        let e = ApiError::not_found(&gr(), "x");
        let s = e.to_grpc();
        let rpc = tonic_types::Status::decode(s.details()).unwrap();
        assert_eq!(rpc.code, Code::NotFound as i32);
        assert_eq!(rpc.message, e.message);
        assert_eq!(rpc.details.len(), 1);
        assert_eq!(rpc.details[0].type_url, TYPE_URL);
        let k = KubernetesStatus::decode(rpc.details[0].value.as_slice()).unwrap();
        assert_eq!(k.reason, "NotFound");
        assert_eq!(k.code, 404);
        assert_eq!(k.details.unwrap().name, "x");
        // Other details (and bytes that are no google.rpc.Status) carry no Kubernetes Status.
        assert_eq!(decode_details(b""), None);
        assert_eq!(decode_details(b"{\"kind\":\"Status\"}"), None);
        let other = tonic_types::Status {
            code: 5,
            message: "m".into(),
            details: vec![prost_types::Any {
                type_url: "type.googleapis.com/google.rpc.RetryInfo".into(),
                value: vec![],
            }],
        };
        assert_eq!(decode_details(&other.encode_to_vec()), None);
    }

    #[test]
    fn transport_failures_are_503_or_504_with_retry_after_and_no_internal_text() {
        let secret = "connect to 127.0.0.1:7001: Connection refused (os error 111)";
        let cases = [
            (
                tonic::Status::unavailable(secret),
                503,
                "ServiceUnavailable",
            ),
            (tonic::Status::unknown(secret), 503, "ServiceUnavailable"),
            (
                tonic::Status::internal(format!("h2 protocol error: {secret}")),
                503,
                "ServiceUnavailable",
            ),
            (tonic::Status::cancelled(secret), 503, "ServiceUnavailable"),
            (tonic::Status::deadline_exceeded(secret), 504, "Timeout"),
            // A service's own 503 names its backend: re-rendered generically.
            (
                ApiError::unavailable(format!("storage backend error: {secret}")).to_grpc(),
                503,
                "ServiceUnavailable",
            ),
            (
                ApiError::new(Reason::Timeout, "Timeout: slow").to_grpc(),
                504,
                "Timeout",
            ),
        ];
        for (s, code, reason) in cases {
            let e = ApiError::from_grpc(&s);
            assert_eq!((e.code, e.reason.as_str()), (code, reason), "{s:?}");
            assert_eq!(e.retry_after(), Some(RETRY_AFTER_SECONDS), "{s:?}");
            let json = String::from_utf8(e.to_json()).unwrap();
            assert!(
                !json.contains("127.0.0.1") && !json.contains("backend"),
                "{json}"
            );
            assert!(json.contains(r#""retryAfterSeconds":1"#), "{json}");
        }
        assert_eq!(
            String::from_utf8(ApiError::from_grpc(&tonic::Status::unavailable("x")).to_json())
                .unwrap(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server is currently unable to handle the request","reason":"ServiceUnavailable","details":{"retryAfterSeconds":1},"code":503}"#
        );
        assert_eq!(
            ApiError::from_grpc(&tonic::Status::deadline_exceeded("x")).message,
            "Timeout: request did not complete within requested timeout - context deadline exceeded"
        );
        // Decided errors pass through unchanged.
        let nf = ApiError::not_found(&gr(), "x");
        assert_eq!(ApiError::from_grpc(&nf.to_grpc()), nf);
        assert_eq!(nf.retry_after(), None);
    }
}
