//! The CR admission pipeline for one request, and the read-path normalisation.
//!
//! Write path (create/update/patch result): decode → prune unknown fields (reported for
//! fieldValidation Warn/Strict) → drop non-nullable nulls → default → apiVersion/kind check
//! (stops here on failure, like upstream's `ValidateTypeMeta`) → ObjectMeta checks → schema
//! validation → embedded resources → list-type set/map uniqueness. For the `status`
//! subresource only `.status` is schema-validated. Mirrors the order of
//! k8s.io/apiextensions-apiserver pkg/registry/customresource/strategy.go (`Validate`,
//! `ValidateUpdate`), status_strategy.go and validator.go, with the decoding steps of
//! customresource_handler.go (`schemaCoercingConverter`, pruning/defaulting on decode).
//! Pruning, defaulting and (for the main resource) schema validation run as one walk
//! ([`crate::pipeline`]), whose results equal the separate passes; the validation errors are
//! reported in their upstream place, after the ObjectMeta checks.
//! Read path ([`normalize`]): prune + default only.

use crate::decode::decode_with_duplicates;
use crate::structural::Schema;
use crate::{default, metadata, pipeline, prune, validate};
use crdplane_core::FieldError;
use serde_json::Value;

/// Write operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// Create: there is no old object.
    Create,
    /// Update (update, patch, status write): the old object is given.
    Update,
}

/// `fieldValidation` query parameter (default Warn).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    /// `Ignore`: unknown fields are dropped and duplicate fields resolved, silently.
    Ignore,
    /// `Warn`: as `Ignore`, plus a warning per unknown or duplicate field.
    Warn,
    /// `Strict`: an unknown or duplicate field fails the request (400 `strict decoding error`).
    Strict,
}

/// One admission request.
#[derive(Debug, Clone)]
pub struct AdmitInput<'a> {
    /// Create or update.
    pub operation: Operation,
    /// The request body's JSON, after any patch was applied.
    pub object: &'a [u8],
    /// The stored object's JSON (updates only).
    pub old_object: Option<&'a [u8]>,
    /// How unknown and duplicate fields are treated.
    pub field_validation: FieldValidation,
    /// "" or "status".
    pub subresource: &'a str,
    /// `<group>/<version>`.
    pub api_version: &'a str,
    /// The `kind` the CRD version serves.
    pub kind: &'a str,
    /// Whether the CRD is namespaced (decides the ObjectMeta namespace rules).
    pub namespaced: bool,
}

/// Result of admission.
#[derive(Debug, Clone, Default)]
pub struct AdmitOutput {
    /// The pruned and defaulted object (meaningful when `errors` is empty).
    pub object: Value,
    /// Field errors (422 Invalid when non-empty), in upstream's order.
    pub errors: Vec<FieldError>,
    /// Strict-decoding texts, e.g. `unknown field "spec.foo"`, `duplicate field "spec.a"`
    /// (empty for fieldValidation=Ignore). Warn: send each as a `Warning: 299 - "<text>"`
    /// header. Strict: reject with 400 `strict decoding error: <texts joined by ", ">`.
    pub warnings: Vec<String>,
    /// Paths of the pruned unknown fields (empty for Ignore).
    pub unknown_fields: Vec<String>,
}

fn decode_error(e: &serde_json::Error) -> FieldError {
    FieldError::invalid("<nil>", Value::String(String::new()), e.to_string())
}

/// Runs the admission pipeline.
pub fn admit(schema: &Schema, input: &AdmitInput<'_>) -> AdmitOutput {
    let mut out = AdmitOutput::default();
    let (mut obj, dups) = match decode_with_duplicates(input.object) {
        Ok(x) => x,
        Err(e) => {
            out.errors.push(decode_error(&e));
            return out;
        }
    };
    if !obj.is_object() {
        out.errors.push(FieldError::invalid(
            "<nil>",
            Value::String(String::new()),
            "the object must be a JSON object",
        ));
        return out;
    }
    let status = input.subresource == "status";
    // The main resource: prune + default + validate in one walk (the schema errors are held
    // until after the TypeMeta and ObjectMeta checks). The status subresource validates only
    // `.status`, below.
    let (mut unknown, schema_errors) = if status {
        (pipeline::prune_and_default(&mut obj, schema), Vec::new())
    } else {
        let o = pipeline::prune_default_validate(&mut obj, schema);
        (o.pruned, o.errors)
    };

    if input.field_validation != FieldValidation::Ignore {
        unknown.sort();
        for d in &dups {
            out.warnings.push(format!("duplicate field {}", go_q(d)));
        }
        for u in &unknown {
            out.warnings.push(format!("unknown field {}", go_q(u)));
        }
        out.unknown_fields = unknown;
    }

    let tm = metadata::validate_type_meta(&obj, input.api_version, input.kind);
    if !tm.is_empty() {
        out.errors = tm;
        out.object = obj;
        return out;
    }

    let empty = serde_json::Map::new();
    let meta = obj
        .get("metadata")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let old = match (input.operation, input.old_object) {
        (Operation::Update, Some(b)) if !b.is_empty() => match serde_json::from_slice::<Value>(b) {
            Ok(v) => Some(v),
            Err(e) => {
                out.errors.push(decode_error(&e));
                return out;
            }
        },
        _ => None,
    };
    match &old {
        Some(old) => {
            let old_meta = old
                .get("metadata")
                .and_then(Value::as_object)
                .unwrap_or(&empty);
            out.errors
                .extend(metadata::validate_object_meta_update(meta, old_meta));
        }
        None => out
            .errors
            .extend(metadata::validate_object_meta(meta, input.namespaced)),
    }

    if status {
        if let (Some(status_schema), Some(status)) = (schema.property("status"), obj.get("status"))
        {
            out.errors
                .extend(validate::validate_rooted(status_schema, status, "status"));
            out.errors
                .extend(metadata::validate_embedded(status_schema, status, "status"));
            out.errors.extend(validate::validate_list_sets_and_maps(
                status_schema,
                status,
                "status",
            ));
        }
    } else {
        out.errors.extend(schema_errors);
        out.errors
            .extend(metadata::validate_embedded(schema, &obj, ""));
        out.errors
            .extend(validate::validate_list_sets_and_maps(schema, &obj, ""));
    }
    out.object = obj;
    out
}

fn go_q(s: &str) -> String {
    crdplane_core::field::go_quote(s)
}

/// Read path: prune + default a stored object (in place).
pub fn normalize_value(schema: &Schema, obj: &mut Value) {
    prune::prune_and_default(obj, schema);
}

/// The same as [`normalize_value`] with the three separate passes (pruning, null pruning,
/// defaulting), as upstream runs them; kept as the reference for tests.
pub fn normalize_value_separate_passes(schema: &Schema, obj: &mut Value) {
    prune::prune(obj, schema);
    default::prune_non_nullable_nulls(obj, schema);
    default::apply_defaults(obj, schema);
}

/// Read path on bytes; objects that do not decode are returned unchanged.
pub fn normalize(schema: &Schema, bytes: &[u8]) -> Vec<u8> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(mut v) if v.is_object() => {
            normalize_value(schema, &mut v);
            serde_json::to_vec(&v).unwrap_or_else(|_| bytes.to_vec())
        }
        _ => bytes.to_vec(),
    }
}
