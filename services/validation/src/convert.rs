//! Conversions between `crdplane_core::FieldError` (the data the engine produces) and the
//! gRPC `crdplane_proto::v1::FieldError`, for the validation server and its callers (gateway,
//! registry).

use crdplane_core::{FieldError, FieldErrorType};
use crdplane_proto::v1 as pb;
use serde_json::Value;

/// Core → proto. `bad_value_json` is the JSON text of the value ("" when omitted).
pub fn to_proto(e: &FieldError) -> pb::FieldError {
    pb::FieldError {
        r#type: e.kind.cause_type().to_string(),
        field: e.field.clone(),
        bad_value_json: e
            .bad_value
            .as_ref()
            .map(|v| serde_json::to_string(v).unwrap_or_default())
            .unwrap_or_default(),
        detail: e.detail.clone(),
        has_value: e.bad_value.is_some(),
    }
}

/// Proto → core. Unknown type strings become `Internal` errors; undecodable values are kept
/// as strings.
pub fn from_proto(e: &pb::FieldError) -> FieldError {
    let kind = FieldErrorType::from_cause_type(&e.r#type).unwrap_or(FieldErrorType::Internal);
    let bad_value = if e.has_value || !e.bad_value_json.is_empty() {
        Some(
            serde_json::from_str::<Value>(&e.bad_value_json)
                .unwrap_or_else(|_| Value::String(e.bad_value_json.clone())),
        )
    } else {
        None
    };
    FieldError::new(kind, e.field.clone(), bad_value, e.detail.clone())
}

/// Converts a list.
pub fn to_proto_list(errs: &[FieldError]) -> Vec<pb::FieldError> {
    errs.iter().map(to_proto).collect()
}

/// Converts a list back.
pub fn from_proto_list(errs: &[pb::FieldError]) -> Vec<FieldError> {
    errs.iter().map(from_proto).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trip() {
        let errs = vec![
            FieldError::invalid("spec.replicas", json!(15), "too big"),
            FieldError::required("spec.cronSpec", ""),
            FieldError::too_many("spec.l", 5, 3),
            FieldError::invalid("x", json!({"a": [1, "b"]}), "d"),
        ];
        let p = to_proto_list(&errs);
        assert_eq!(p[0].r#type, "FieldValueInvalid");
        assert_eq!(p[0].bad_value_json, "15");
        assert!(p[0].has_value);
        assert_eq!(p[1].bad_value_json, "");
        assert!(!p[1].has_value);
        assert_eq!(from_proto_list(&p), errs);
    }
}
