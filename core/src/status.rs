//! Kubernetes `Status` errors: the one table from reason to HTTP and gRPC code, the
//! constructors with upstream's exact messages (k8s.io/apimachinery/pkg/api/errors/errors.go).
//! The transport of a Status inside a gRPC status (and the gRPC code of each reason) is
//! `crdplane_proto::status`: this crate knows nothing of gRPC.
//!
//! The Status JSON ([`StatusBody`], [`StatusDetails`], [`StatusCause`]) is written here rather
//! than with k8s-openapi's `Status`: that type writes `apiVersion` first and its fields in
//! alphabetical order, and Status bodies are pinned byte for byte to upstream's
//! (`not_found_json_is_upstreams` below), in upstream's field order with its `omitempty`
//! rules (`"metadata":{}` always present, `details` without empty fields).

use crate::field::{FieldError, aggregate_message};
use crate::names::{GroupResource, qualified_kind};
use serde::{Deserialize, Serialize};

/// `metav1.StatusReason` values used by crdplane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// 400: the request is malformed (`StatusReasonBadRequest`).
    BadRequest,
    /// 401: the client is not authenticated (`StatusReasonUnauthorized`).
    Unauthorized,
    /// 403: the client may not perform the action (`StatusReasonForbidden`).
    Forbidden,
    /// 404: the resource or path does not exist (`StatusReasonNotFound`).
    NotFound,
    /// 405: the verb is not served on this resource (`StatusReasonMethodNotAllowed`).
    MethodNotAllowed,
    /// 406: no acceptable response media type (`StatusReasonNotAcceptable`).
    NotAcceptable,
    /// 409: a create found the name taken (`StatusReasonAlreadyExists`).
    AlreadyExists,
    /// 409: a write lost an optimistic-concurrency race (`StatusReasonConflict`).
    Conflict,
    /// 410: the item is no longer available and has no forwarding address (`StatusReasonGone`).
    Gone,
    /// 410: the requested resourceVersion or continue token is too old (`StatusReasonExpired`).
    Expired,
    /// 413: the request body is over the size limit (`StatusReasonRequestEntityTooLarge`).
    RequestEntityTooLarge,
    /// 415: the request body's content type is not accepted (`StatusReasonUnsupportedMediaType`).
    UnsupportedMediaType,
    /// 422: the object failed validation; causes name the fields (`StatusReasonInvalid`).
    Invalid,
    /// 429: the client must slow down (`StatusReasonTooManyRequests`).
    TooManyRequests,
    /// 500: the server failed unexpectedly (`StatusReasonInternalError`).
    InternalError,
    /// 503: the server or one of its dependencies is unavailable
    /// (`StatusReasonServiceUnavailable`).
    ServiceUnavailable,
    /// 504: the request did not complete in time (`StatusReasonTimeout`).
    Timeout,
    /// `StatusReasonUnknown` (""): what upstream sends for an error that is not a Status,
    /// e.g. storage's "resourceVersion should not be set on objects to be created" (500).
    Unknown,
}

/// The table: reason → (wire string, HTTP code).
const TABLE: &[(Reason, &str, u16)] = &[
    (Reason::BadRequest, "BadRequest", 400),
    (Reason::Unauthorized, "Unauthorized", 401),
    (Reason::Forbidden, "Forbidden", 403),
    (Reason::NotFound, "NotFound", 404),
    (Reason::MethodNotAllowed, "MethodNotAllowed", 405),
    (Reason::NotAcceptable, "NotAcceptable", 406),
    (Reason::AlreadyExists, "AlreadyExists", 409),
    (Reason::Conflict, "Conflict", 409),
    (Reason::Gone, "Gone", 410),
    (Reason::Expired, "Expired", 410),
    (Reason::RequestEntityTooLarge, "RequestEntityTooLarge", 413),
    (Reason::UnsupportedMediaType, "UnsupportedMediaType", 415),
    (Reason::Invalid, "Invalid", 422),
    (Reason::TooManyRequests, "TooManyRequests", 429),
    (Reason::InternalError, "InternalError", 500),
    (Reason::ServiceUnavailable, "ServiceUnavailable", 503),
    (Reason::Timeout, "Timeout", 504),
    (Reason::Unknown, "", 500),
];

impl Reason {
    fn row(self) -> &'static (Reason, &'static str, u16) {
        TABLE
            .iter()
            .find(|r| r.0 == self)
            .expect("every reason is in the table")
    }
    /// The wire string of the reason (`Status.reason`); empty for [`Reason::Unknown`].
    pub fn as_str(self) -> &'static str {
        self.row().1
    }
    /// The HTTP status code answered with this reason.
    pub fn http_code(self) -> u16 {
        self.row().2
    }
    /// The reason of a wire string, if it is one crdplane knows.
    pub fn parse(s: &str) -> Option<Self> {
        TABLE.iter().find(|r| r.1 == s).map(|r| r.0)
    }
}

/// `metav1.StatusCause` (JSON field `reason` holds the cause type).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct StatusCause {
    /// The cause type (`metav1.CauseType`, e.g. `FieldValueInvalid`), sent as JSON `reason`.
    #[serde(rename = "reason", default, skip_serializing_if = "String::is_empty")]
    pub type_: String,
    /// Human-readable description of the cause.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Path of the offending field (e.g. `spec.replicas`); empty when not field-specific.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub field: String,
}

/// `metav1.StatusDetails`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct StatusDetails {
    /// Name of the object the error is about.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// API group of the resource.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// Resource (or kind, for 422) the error is about.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// UID of the object, when known.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// Individual causes, one per field error for 422.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<StatusCause>,
    /// Seconds to wait before retrying (also sent as `Retry-After`); 0 = not set.
    #[serde(rename = "retryAfterSeconds", default, skip_serializing_if = "is_zero")]
    pub retry_after_seconds: i32,
    /// The Status's `metadata.continue` (its ListMeta), not part of `details` on the wire:
    /// the fresh token a 410 for an expired continue token carries (etcd3 store.go
    /// `handleCompactedErrorForPaging`). Kept here so that [`ApiError`] stays small.
    #[serde(skip)]
    pub list_continue: String,
}

fn is_zero(v: &i32) -> bool {
    *v == 0
}

/// A failure `Status` (metav1.Status). Field order of the JSON is upstream's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusBody {
    /// Always `"Status"`.
    pub kind: String,
    /// Always `"v1"`.
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    /// `ListMeta` of the Status: empty, but for the `continue` token of a 410 for an
    /// expired continue token (see [`StatusDetails::list_continue`]).
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// Always `"Failure"` for an error.
    pub status: String,
    /// Human-readable description of the error.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The [`Reason`] wire string.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Extended data about the object and causes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<StatusDetails>,
    /// The HTTP status code, repeated in the body.
    pub code: u16,
}

/// The edge error: knows its Status JSON, its HTTP code and its gRPC code.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{} ({}): {}", .reason.as_str(), .code, .message)]
pub struct ApiError {
    /// The Status reason.
    pub reason: Reason,
    /// The HTTP code answered (normally `reason.http_code()`).
    pub code: u16,
    /// The Status `message`.
    pub message: String,
    /// Boxed: keeps `Result<_, ApiError>` small on every hot path.
    pub details: Option<Box<StatusDetails>>,
}

impl ApiError {
    /// An error with this reason, its HTTP code and message, and no details.
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        Self {
            reason,
            code: reason.http_code(),
            message: message.into(),
            details: None,
        }
    }
    fn with_details(mut self, d: StatusDetails) -> Self {
        self.details = Some(Box::new(d));
        self
    }
    fn gr_details(gr: &GroupResource, name: &str) -> StatusDetails {
        StatusDetails {
            name: name.into(),
            group: gr.group.clone(),
            kind: gr.resource.clone(),
            ..Default::default()
        }
    }

    /// `NewNotFound`.
    pub fn not_found(gr: &GroupResource, name: &str) -> Self {
        Self::new(
            Reason::NotFound,
            format!("{gr} {} not found", crate::field::go_quote(name)),
        )
        .with_details(Self::gr_details(gr, name))
    }
    /// The generic 404 of an unserved path.
    pub fn path_not_found() -> Self {
        Self::new(
            Reason::NotFound,
            "the server could not find the requested resource",
        )
        .with_details(StatusDetails::default())
    }
    /// `NewAlreadyExists`.
    pub fn already_exists(gr: &GroupResource, name: &str) -> Self {
        Self::new(
            Reason::AlreadyExists,
            format!("{gr} {} already exists", crate::field::go_quote(name)),
        )
        .with_details(Self::gr_details(gr, name))
    }
    /// `NewConflict`.
    pub fn conflict(gr: &GroupResource, name: &str, err: &str) -> Self {
        Self::new(
            Reason::Conflict,
            format!(
                "Operation cannot be fulfilled on {gr} {}: {err}",
                crate::field::go_quote(name)
            ),
        )
        .with_details(Self::gr_details(gr, name))
    }
    /// The storage precondition failure text of `NewConflict` for a stale resourceVersion.
    pub fn stale(gr: &GroupResource, name: &str) -> Self {
        Self::conflict(gr, name, OBJECT_MODIFIED)
    }
    /// `NewInvalid`: 422 with one cause per field error.
    pub fn invalid(kind: &str, group: &str, name: &str, errs: &[FieldError]) -> Self {
        let causes = errs
            .iter()
            .map(|e| StatusCause {
                type_: e.kind.cause_type().into(),
                message: e.error_body(),
                field: e.field.clone(),
            })
            .collect();
        Self::new(
            Reason::Invalid,
            format!(
                "{} {} is invalid: {}",
                qualified_kind(kind, group),
                crate::field::go_quote(name),
                aggregate_message(errs)
            ),
        )
        .with_details(StatusDetails {
            name: name.into(),
            group: group.into(),
            kind: kind.into(),
            causes,
            ..Default::default()
        })
    }
    /// `NewBadRequest`.
    pub fn bad_request(msg: impl Into<String>) -> Self {
        Self::new(Reason::BadRequest, msg)
    }
    /// `NewForbidden`.
    pub fn forbidden(gr: &GroupResource, name: &str, err: &str) -> Self {
        if gr.group.is_empty() && gr.resource.is_empty() {
            // A non-resource path: `forbidden: <err>`, empty details.
            return Self::new(Reason::Forbidden, format!("forbidden: {err}"))
                .with_details(StatusDetails::default());
        }
        let what = if name.is_empty() {
            gr.to_string()
        } else {
            format!("{gr} {}", crate::field::go_quote(name))
        };
        Self::new(Reason::Forbidden, format!("{what} is forbidden: {err}"))
            .with_details(Self::gr_details(gr, name))
    }
    /// `NewMethodNotSupported`.
    pub fn method_not_supported(gr: &GroupResource, verb: &str) -> Self {
        Self::new(
            Reason::MethodNotAllowed,
            format!(
                "{verb} is not supported on resources of kind {}",
                crate::field::go_quote(&gr.to_string())
            ),
        )
        .with_details(StatusDetails {
            group: gr.group.clone(),
            kind: gr.resource.clone(),
            ..Default::default()
        })
    }
    /// 415 for a body type the endpoint does not take.
    pub fn unsupported_media_type(accepted: &[&str]) -> Self {
        Self::new(
            Reason::UnsupportedMediaType,
            format!(
                "the body of the request was in an unknown format - accepted media types include: {}",
                accepted.join(", ")
            ),
        )
    }
    /// 406 for an Accept header the endpoint cannot produce.
    pub fn not_acceptable(accepted: &[&str]) -> Self {
        Self::new(
            Reason::NotAcceptable,
            format!(
                "only the following media types are accepted: {}",
                accepted.join(", ")
            ),
        )
    }
    /// `NewRequestEntityTooLargeError`.
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            Reason::RequestEntityTooLarge,
            format!("Request entity too large: limit is {limit}"),
        )
    }
    /// `NewInternalError`.
    pub fn internal(err: impl std::fmt::Display) -> Self {
        let err = err.to_string();
        Self::new(
            Reason::InternalError,
            format!("Internal error occurred: {err}"),
        )
        .with_details(StatusDetails {
            causes: vec![StatusCause {
                message: err,
                ..Default::default()
            }],
            ..Default::default()
        })
    }
    /// `NewServiceUnavailable`.
    pub fn unavailable(msg: impl Into<String>) -> Self {
        Self::new(Reason::ServiceUnavailable, msg)
    }
    /// A dependency (a crdplane service, Redis) cannot be reached: 503 with upstream's generic
    /// text (`NewGenericServerResponse` for 503) and `retryAfterSeconds`, which the edge turns
    /// into a `Retry-After` header as apiserver's `responsewriters.ErrorNegotiated` does.
    /// Whatever the failure said (addresses, Redis errors) stays out of the client's answer.
    pub fn dependency_unavailable() -> Self {
        Self::new(Reason::ServiceUnavailable, SERVICE_UNAVAILABLE).with_details(StatusDetails {
            retry_after_seconds: RETRY_AFTER_SECONDS,
            ..Default::default()
        })
    }
    /// A dependency did not answer in time: `NewTimeoutError` with the text of apiserver's
    /// request finisher (`endpoints/handlers/finisher`), 504 with `retryAfterSeconds`.
    pub fn dependency_timeout() -> Self {
        Self::new(Reason::Timeout, format!("Timeout: {REQUEST_TIMEOUT}")).with_details(
            StatusDetails {
                retry_after_seconds: RETRY_AFTER_SECONDS,
                ..Default::default()
            },
        )
    }
    /// Seconds a client should wait before retrying after a 503/504 (`Retry-After`), if any.
    pub fn retry_after(&self) -> Option<i32> {
        self.details
            .as_ref()
            .map(|d| d.retry_after_seconds)
            .filter(|s| *s > 0)
    }
    /// 410 Expired.
    pub fn expired(msg: impl Into<String>) -> Self {
        Self::new(Reason::Expired, msg)
    }

    /// The `metav1.Status` body of this error.
    pub fn status_body(&self) -> StatusBody {
        let mut metadata = serde_json::Map::new();
        let details = self.details.as_deref().and_then(|d| {
            if d.list_continue.is_empty() {
                return Some(d.clone());
            }
            metadata.insert("continue".into(), d.list_continue.clone().into());
            let rest = StatusDetails {
                list_continue: String::new(),
                ..d.clone()
            };
            (rest != StatusDetails::default()).then_some(rest)
        });
        StatusBody {
            kind: "Status".into(),
            api_version: "v1".into(),
            metadata,
            status: "Failure".into(),
            message: self.message.clone(),
            reason: self.reason.as_str().into(),
            details,
            code: self.code,
        }
    }
    /// The Status JSON sent to clients.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(&self.status_body()).expect("status serializes")
    }
    /// Parses a Status JSON body back into an error (unknown reasons become `InternalError`);
    /// `None` if it is not a Status.
    pub fn from_json(b: &[u8]) -> Option<Self> {
        let s: StatusBody = serde_json::from_slice(b).ok()?;
        let reason = Reason::parse(&s.reason).unwrap_or(Reason::InternalError);
        let mut details = s.details;
        if let Some(c) = s.metadata.get("continue").and_then(|c| c.as_str()) {
            details.get_or_insert_with(Default::default).list_continue = c.to_string();
        }
        Some(Self {
            reason,
            code: s.code,
            message: s.message,
            details: details.map(Box::new),
        })
    }
}

/// Message of a 503 for an unreachable dependency (apimachinery `NewGenericServerResponse`).
pub const SERVICE_UNAVAILABLE: &str = "the server is currently unable to handle the request";
/// Detail of a 504 for a dependency that did not answer in time (apiserver's finisher:
/// `request did not complete within requested timeout - <ctx.Err()>`).
pub const REQUEST_TIMEOUT: &str =
    "request did not complete within requested timeout - context deadline exceeded";
/// `Retry-After` of 503/504 answers for an unreachable dependency.
pub const RETRY_AFTER_SECONDS: i32 = 1;

/// The detail of a stale-resourceVersion conflict (`registry/store.go` OptimisticLockErrorMsg).
pub const OBJECT_MODIFIED: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn gr() -> GroupResource {
        GroupResource::new("stable.example.com", "crontabs")
    }

    #[test]
    fn not_found_json_is_upstreams() {
        let e = ApiError::not_found(&gr(), "x");
        assert_eq!(
            String::from_utf8(e.to_json()).unwrap(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"crontabs.stable.example.com \"x\" not found","reason":"NotFound","details":{"name":"x","group":"stable.example.com","kind":"crontabs"},"code":404}"#
        );
        assert_eq!(
            String::from_utf8(ApiError::path_not_found().to_json()).unwrap(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","details":{},"code":404}"#
        );
    }

    #[test]
    fn conflict_and_invalid_messages() {
        assert_eq!(
            ApiError::stale(&gr(), "x").message,
            "Operation cannot be fulfilled on crontabs.stable.example.com \"x\": the object has been modified; please apply your changes to the latest version and try again"
        );
        let errs = vec![
            FieldError::invalid(
                "spec.cronSpec",
                json!("* * * *"),
                r"spec.cronSpec in body should match '^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$'",
            ),
            FieldError::invalid(
                "spec.replicas",
                json!(15),
                "spec.replicas in body should be less than or equal to 10",
            ),
        ];
        let e = ApiError::invalid("CronTab", "stable.example.com", "my-new-cron-object", &errs);
        assert_eq!(e.code, 422);
        assert_eq!(
            e.message,
            r#"CronTab.stable.example.com "my-new-cron-object" is invalid: [spec.cronSpec: Invalid value: "* * * *": spec.cronSpec in body should match '^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$', spec.replicas: Invalid value: 15: spec.replicas in body should be less than or equal to 10]"#
        );
        let d = e.details.as_ref().unwrap();
        assert_eq!(d.kind, "CronTab");
        assert_eq!(d.causes[1].type_, "FieldValueInvalid");
        assert_eq!(
            d.causes[1].message,
            "Invalid value: 15: spec.replicas in body should be less than or equal to 10"
        );
    }

    #[test]
    fn table_is_complete_and_consistent() {
        for (r, s, http) in TABLE {
            assert_eq!(Reason::parse(s), Some(*r));
            assert_eq!(r.http_code(), *http);
        }
        assert_eq!(
            ApiError::too_large(3145728).message,
            "Request entity too large: limit is 3145728"
        );
        assert_eq!(
            ApiError::method_not_supported(&gr(), "deletecollection").message,
            "deletecollection is not supported on resources of kind \"crontabs.stable.example.com\""
        );
    }
}
