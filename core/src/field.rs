//! Validation failures as data, and their exact upstream texts.
//!
//! Follows k8s.io/apimachinery/pkg/util/validation/field/errors.go (`Error.ErrorBody`,
//! `ErrorType.String`, `ErrorList.ToAggregate`) and the aggregate formatting of
//! k8s.io/apimachinery/pkg/util/errors/errors.go. Values are printed the way Go's fmt prints
//! the decoded unstructured JSON (`%v` for numbers/bools, `%q` for strings, `%#v` otherwise).

use serde_json::Value;

/// Upstream `field.ErrorType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldErrorType {
    /// `ErrorTypeNotFound`: the value was not found.
    NotFound,
    /// `ErrorTypeRequired`: a required field is missing or empty.
    Required,
    /// `ErrorTypeDuplicate`: the value duplicates another that must be unique.
    Duplicate,
    /// `ErrorTypeInvalid`: the value is malformed or out of range.
    Invalid,
    /// `ErrorTypeNotSupported`: the value is not one of the supported values.
    NotSupported,
    /// `ErrorTypeForbidden`: the field may not be set or changed.
    Forbidden,
    /// `ErrorTypeTooLong`: a string or list is longer than allowed.
    TooLong,
    /// `ErrorTypeTooMany`: a list has more items than allowed.
    TooMany,
    /// `ErrorTypeInternal`: an internal error, not a fault of the value.
    Internal,
    /// `ErrorTypeTypeInvalid`: the value has the wrong JSON type (printed as "Invalid value").
    TypeInvalid,
}

impl FieldErrorType {
    /// The `StatusCause.reason` (metav1.CauseType) string.
    pub fn cause_type(self) -> &'static str {
        match self {
            Self::NotFound => "FieldValueNotFound",
            Self::Required => "FieldValueRequired",
            Self::Duplicate => "FieldValueDuplicate",
            Self::Invalid => "FieldValueInvalid",
            Self::NotSupported => "FieldValueNotSupported",
            Self::Forbidden => "FieldValueForbidden",
            Self::TooLong => "FieldValueTooLong",
            Self::TooMany => "FieldValueTooMany",
            Self::Internal => "InternalError",
            Self::TypeInvalid => "FieldValueTypeInvalid",
        }
    }

    /// The human string (`ErrorType.String()`).
    pub fn text(self) -> &'static str {
        match self {
            Self::NotFound => "Not found",
            Self::Required => "Required value",
            Self::Duplicate => "Duplicate value",
            Self::Invalid => "Invalid value",
            Self::NotSupported => "Unsupported value",
            Self::Forbidden => "Forbidden",
            Self::TooLong => "Too long",
            Self::TooMany => "Too many",
            Self::Internal => "Internal error",
            Self::TypeInvalid => "Invalid value",
        }
    }

    /// The error type of a `StatusCause.reason` string (inverse of [`Self::cause_type`]).
    pub fn from_cause_type(s: &str) -> Option<Self> {
        Some(match s {
            "FieldValueNotFound" => Self::NotFound,
            "FieldValueRequired" => Self::Required,
            "FieldValueDuplicate" => Self::Duplicate,
            "FieldValueInvalid" => Self::Invalid,
            "FieldValueNotSupported" => Self::NotSupported,
            "FieldValueForbidden" => Self::Forbidden,
            "FieldValueTooLong" => Self::TooLong,
            "FieldValueTooMany" => Self::TooMany,
            "InternalError" => Self::Internal,
            "FieldValueTypeInvalid" => Self::TypeInvalid,
            _ => return None,
        })
    }
}

/// One field error (upstream `field.Error`). `bad_value: None` means upstream's `omitValue`.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// What kind of failure it is.
    pub kind: FieldErrorType,
    /// Path of the offending field (e.g. `spec.replicas`).
    pub field: String,
    /// The offending value; `None` prints no value (upstream's `omitValue`).
    pub bad_value: Option<Value>,
    /// The offending value as Go's fmt prints a typed value that JSON does not describe (a
    /// struct such as `rbac.RoleRef{APIGroup:"…", Kind:"…", Name:"…"}`, a `[]string{…}`);
    /// printed instead of `bad_value` when set.
    pub typed_value: Option<String>,
    /// Extra explanation appended to the message; may be empty.
    pub detail: String,
}

impl FieldError {
    /// A field error from its parts.
    pub fn new(
        kind: FieldErrorType,
        field: impl Into<String>,
        bad_value: Option<Value>,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            kind,
            field: field.into(),
            bad_value,
            typed_value: None,
            detail: detail.into(),
        }
    }
    /// `field.Required(path, detail)`.
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorType::Required, field, None, detail)
    }
    /// `field.Invalid(path, value, detail)`.
    pub fn invalid(field: impl Into<String>, value: Value, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorType::Invalid, field, Some(value), detail)
    }
    /// `field.Invalid(path, value, detail)` of a typed Go value: `value` is its JSON form,
    /// `typed` what Go's `%#v` prints for it (see [`go_string_slice`] and
    /// [`Self::typed_value`]).
    pub fn invalid_typed(
        field: impl Into<String>,
        value: Value,
        typed: impl Into<String>,
        detail: impl Into<String>,
    ) -> Self {
        let mut e = Self::invalid(field, value, detail);
        e.typed_value = Some(typed.into());
        e
    }
    /// `field.Forbidden(path, detail)`.
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorType::Forbidden, field, None, detail)
    }
    /// `field.Duplicate(path, value)`.
    pub fn duplicate(field: impl Into<String>, value: Value) -> Self {
        Self::new(FieldErrorType::Duplicate, field, Some(value), "")
    }
    /// `field.NotSupported(path, value, validValues)`: detail lists quoted values.
    pub fn not_supported(field: impl Into<String>, value: Value, valid: &[&str]) -> Self {
        let detail = if valid.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = valid.iter().map(|v| go_quote(v)).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        Self::new(FieldErrorType::NotSupported, field, Some(value), detail)
    }
    /// `field.TooLong(path, value, max)` (1.34 wording, value omitted).
    pub fn too_long(field: impl Into<String>, max: usize) -> Self {
        Self::new(
            FieldErrorType::TooLong,
            field,
            None,
            format!("may not be more than {max} bytes"),
        )
    }
    /// `field.TooMany(path, actual, max)`.
    pub fn too_many(field: impl Into<String>, actual: i64, max: i64) -> Self {
        Self::new(
            FieldErrorType::TooMany,
            field,
            Some(Value::from(actual)),
            format!("must have at most {max} items"),
        )
    }
    /// `field.InternalError(path, err)`.
    pub fn internal(field: impl Into<String>, err: impl Into<String>) -> Self {
        Self::new(FieldErrorType::Internal, field, None, err)
    }

    /// `ErrorBody()`: the message without the field path.
    pub fn error_body(&self) -> String {
        let mut s = match self.kind {
            FieldErrorType::Required
            | FieldErrorType::Forbidden
            | FieldErrorType::TooLong
            | FieldErrorType::Internal => self.kind.text().to_string(),
            _ => match (&self.typed_value, &self.bad_value) {
                (Some(t), _) => format!("{}: {t}", self.kind.text()),
                (None, None) => self.kind.text().to_string(),
                (None, Some(v)) => format!("{}: {}", self.kind.text(), go_value(v)),
            },
        };
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

impl std::fmt::Display for FieldError {
    /// `Error()`: `<field>: <body>`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.error_body())
    }
}

/// `ErrorList.ToAggregate().Error()`: duplicates dropped; one error bare, several in `[a, b]`.
pub fn aggregate_message(errs: &[FieldError]) -> String {
    let mut seen: Vec<String> = Vec::new();
    for e in errs {
        let m = e.to_string();
        if !seen.contains(&m) {
            seen.push(m);
        }
    }
    if seen.len() == 1 {
        seen.pop().unwrap_or_default()
    } else {
        format!("[{}]", seen.join(", "))
    }
}

pub use crate::gofmt::{go_float, go_quote, go_string_slice, go_value};

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bodies_match_upstream() {
        let e = FieldError::invalid(
            "spec.replicas",
            json!(15),
            "spec.replicas in body should be less than or equal to 10",
        );
        assert_eq!(
            e.to_string(),
            "spec.replicas: Invalid value: 15: spec.replicas in body should be less than or equal to 10"
        );
        let e = FieldError::invalid("spec.cronSpec", json!("* * * *"), "x");
        assert_eq!(e.error_body(), "Invalid value: \"* * * *\": x");
        assert_eq!(
            FieldError::required("spec.cronSpec", "").to_string(),
            "spec.cronSpec: Required value"
        );
        assert_eq!(
            FieldError::not_supported("spec.x", json!("foo"), &["a", "b"]).to_string(),
            "spec.x: Unsupported value: \"foo\": supported values: \"a\", \"b\""
        );
        assert_eq!(
            FieldError::too_long("spec.s", 8).to_string(),
            "spec.s: Too long: may not be more than 8 bytes"
        );
        assert_eq!(
            FieldError::too_many("spec.l", 5, 3).to_string(),
            "spec.l: Too many: 5: must have at most 3 items"
        );
        assert_eq!(
            FieldError::forbidden("spec.scope", "field is immutable").to_string(),
            "spec.scope: Forbidden: field is immutable"
        );
        assert_eq!(
            FieldError::invalid_typed(
                "rules[0].nonResourceURLs",
                json!(["/a", "/b"]),
                go_string_slice(["/a", "/b"]),
                "x"
            )
            .to_string(),
            "rules[0].nonResourceURLs: Invalid value: []string{\"/a\", \"/b\"}: x"
        );
    }

    #[test]
    fn aggregate_dedups_and_brackets() {
        let a = FieldError::required("a", "");
        let b = FieldError::required("b", "");
        assert_eq!(
            aggregate_message(std::slice::from_ref(&a)),
            "a: Required value"
        );
        assert_eq!(
            aggregate_message(&[a.clone(), b, a]),
            "[a: Required value, b: Required value]"
        );
    }
}
