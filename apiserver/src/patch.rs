//! Patch mechanisms: how a PATCH body of a given content type turns the current object into
//! the patched one. Sits in the patch handler ([`crate::handlers`]), inside the
//! retry-on-conflict loop: the mechanism is applied to each fresh read of the object.
//!
//! Follows k8s.io/apiserver pkg/endpoints/handlers/patch.go (`jsonPatcher`,
//! `smpPatcher`, `applyPatchToCurrentObject`) with evanphx/json-patch semantics for merge
//! patches; JSON patch ([`crate::jsonpatch`]) keeps upstream's 10,000-operation bound and
//! strategic merge patch ([`crate::strategic`]) serves built-in types.

use crdplane_core::ApiError;
use serde_json::Value;

/// A way to apply PATCH bodies: the content types it accepts and the pure function that
/// applies one of them. Custom resources use [`CustomResourcePatch`] (JSON and merge
/// patch); built-in types use [`BuiltinPatch`] (plus strategic merge patch by their patch
/// metadata).
pub trait PatchMechanism: Send + Sync {
    /// The media types accepted, in the order the 415 error lists them.
    fn content_types(&self) -> &[&'static str];
    /// Applies `patch` (of bare media type `mime`, one of [`Self::content_types`]) to `old`.
    fn apply(&self, mime: &str, patch: &[u8], old: &Value) -> Result<Value, ApiError>;
    /// The 415 for a media type this mechanism does not accept.
    fn unsupported(&self) -> ApiError {
        ApiError::unsupported_media_type(self.content_types())
    }
}

/// JSON patch and merge patch: custom resources (apiextensions serves no strategic merge).
#[derive(Debug, Clone, Copy, Default)]
pub struct CustomResourcePatch;

impl PatchMechanism for CustomResourcePatch {
    fn content_types(&self) -> &[&'static str] {
        &PATCH_TYPES
    }
    fn apply(&self, mime: &str, patch: &[u8], old: &Value) -> Result<Value, ApiError> {
        apply_patch(mime, patch, old)
    }
}

/// JSON, merge and strategic merge patch of a built-in type, by its patch metadata.
#[derive(Debug, Clone, Copy)]
pub struct BuiltinPatch(pub crate::strategic::Fields);

impl PatchMechanism for BuiltinPatch {
    fn content_types(&self) -> &[&'static str] {
        &BUILTIN_PATCH_TYPES
    }
    fn apply(&self, mime: &str, patch: &[u8], old: &Value) -> Result<Value, ApiError> {
        apply_builtin(mime, patch, old, self.0)
    }
}

/// patch.go `maxJSONPatchOperations`: a JSON patch of more operations is refused before any
/// is applied.
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// patch.go's `NewRequestEntityTooLargeError` (413) for a JSON patch of `n` operations.
pub fn too_many_operations(n: usize) -> ApiError {
    ApiError::new(
        crdplane_core::Reason::RequestEntityTooLarge,
        format!(
            "Request entity too large: The allowed maximum operations in a JSON patch is \
             {MAX_JSON_PATCH_OPERATIONS}, got {n}"
        ),
    )
}

/// Patch content types custom resources accept (server-side apply is handled by the patch
/// handler itself, [`crate::fieldmanager`]).
pub const PATCH_TYPES: [&str; 3] = [
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
];

/// Applies a JSON patch or merge patch document (`mime` is the bare media type of the
/// request's Content-Type) to `target` (upstream patch.go semantics).
pub fn apply_patch(mime: &str, patch: &[u8], target: &Value) -> Result<Value, ApiError> {
    match mime {
        "application/merge-patch+json" => {
            let p: Value = serde_json::from_slice(patch)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            match p {
                // evanphx/json-patch v4 `MergePatch` (patch.go keeps its errors): a patch that
                // is not an object or array is `ErrBadJSONPatch`, a 400; an array patch
                // replaces the document (nulls pruned inside its objects), which then fails to
                // decode as an object (see [`not_an_object`]).
                Value::Array(mut items) => {
                    items.iter_mut().for_each(prune_object_nulls);
                    Ok(Value::Array(items))
                }
                Value::Object(_) => {
                    let mut out = target.clone();
                    json_patch::merge(&mut out, &p);
                    Ok(out)
                }
                _ => Err(ApiError::bad_request("Invalid JSON Patch")),
            }
        }
        "application/json-patch+json" => {
            // Through a Value first: a duplicated key in an operation is decoded as Go's
            // encoding/json does (evanphx/json-patch `DecodePatch`: the last value wins)
            // instead of being refused by the operation's derived decoder.
            let p: json_patch::Patch = serde_json::from_slice::<Value>(patch)
                .and_then(serde_json::from_value)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            if p.0.len() > MAX_JSON_PATCH_OPERATIONS {
                return Err(too_many_operations(p.0.len()));
            }
            crate::jsonpatch::apply(target, &p).map_err(|f| f.to_api_error())
        }
        _ => Err(ApiError::unsupported_media_type(&PATCH_TYPES)),
    }
}

/// A patch result that is not an object (an array merge patch, a JSON patch replacing the
/// root): patch.go `applyPatchToCurrentObject` fails to decode it and answers
/// `NewInvalid(GroupKind{}, "", [Invalid("patch", <patched JSON>, <decode error>)])`; the
/// decode error is the JSON serializer's kind lookup (apimachinery
/// `runtime/serializer/json/meta.go` `SimpleMetaFactory.Interpret`).
pub fn not_an_object(patched: &Value) -> ApiError {
    let go_type = match patched {
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
        Value::Null | Value::Object(_) => "",
    };
    let err = if go_type.is_empty() {
        // `null` decodes into the kind lookup without error; the object then has no kind
        // (`runtime.NewMissingKindErr`).
        format!(
            "Object 'Kind' is missing in '{}'",
            crate::render::table::go_json(patched)
        )
    } else {
        format!(
            "couldn't get version/kind; json parse error: json: cannot unmarshal {go_type} into \
             Go value of type struct {{ APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; \
             Kind string \"json:\\\"kind,omitempty\\\"\" }}"
        )
    };
    ApiError::invalid(
        "",
        "",
        "",
        &[crdplane_core::field::FieldError::invalid(
            "patch",
            Value::String(crate::render::table::go_json(patched)),
            err,
        )],
    )
}

/// evanphx/json-patch `pruneNulls`: keys with null values are removed from objects, at any
/// depth (null array elements stay).
fn prune_object_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, x| !x.is_null());
            m.values_mut().for_each(prune_object_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(prune_object_nulls),
        _ => {}
    }
}

/// Patch content types of built-in resources (handlers/patch.go with the installer's
/// supported types; server-side apply is handled by the patch handler itself).
pub const BUILTIN_PATCH_TYPES: [&str; 4] = [
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
];

/// Applies a PATCH body to a built-in object: strategic merge patch by the type's patch
/// metadata ([`crate::strategic`]), JSON and merge patches as for custom resources; other
/// types get the 415 naming the built-in types.
pub fn apply_builtin(
    mime: &str,
    patch: &[u8],
    old: &Value,
    fields: crate::strategic::Fields,
) -> Result<Value, ApiError> {
    match mime {
        "application/strategic-merge-patch+json" => crate::strategic::apply(old, patch, fields),
        "application/json-patch+json" | "application/merge-patch+json" => {
            apply_patch(mime, patch, old)
        }
        _ => Err(ApiError::unsupported_media_type(&BUILTIN_PATCH_TYPES)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patches_that_are_not_objects() {
        let target = json!({"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "x"}});
        let ct = "application/merge-patch+json";
        // Not an object or array: evanphx ErrBadJSONPatch, a 400.
        for p in ["null", "5", "\"s\"", "true"] {
            let e = apply_patch(ct, p.as_bytes(), &target).unwrap_err();
            assert_eq!(
                (e.code, e.message.as_str()),
                (400, "Invalid JSON Patch"),
                "{p}"
            );
        }
        // An array replaces the document, nulls pruned inside its objects; decoding it as an
        // object then fails with upstream's 422.
        let out = apply_patch(ct, br#"[{"a":1,"b":null,"c":{"d":null}},null]"#, &target).unwrap();
        assert_eq!(out, json!([{"a": 1, "c": {}}, null]));
        let e = not_an_object(&json!([{"op": "add", "v": "<&>"}]));
        assert_eq!(e.code, 422);
        assert_eq!(
            e.message,
            concat!(
                r#" "" is invalid: patch: Invalid value: "[{\"op\":\"add\",\"v\":\"\\u003c\\u0026\\u003e\"}]": "#,
                r#"couldn't get version/kind; json parse error: json: cannot unmarshal array "#,
                r#"into Go value of type struct { APIVersion string "json:\"apiVersion,omitempty\""; "#,
                r#"Kind string "json:\"kind,omitempty\"" }"#
            )
        );
        let e = not_an_object(&Value::Null);
        assert_eq!(e.code, 422);
        assert!(
            e.message
                .ends_with(r#"patch: Invalid value: "null": Object 'Kind' is missing in 'null'"#),
            "{}",
            e.message
        );
    }

    #[test]
    fn json_patch_operations_are_bounded() {
        let target = json!({"a": 0});
        let ops = |n: usize| {
            let one = r#"{"op":"replace","path":"/a","value":1}"#;
            format!("[{}]", vec![one; n].join(","))
        };
        let ct = "application/json-patch+json";
        assert_eq!(
            apply_patch(ct, ops(MAX_JSON_PATCH_OPERATIONS).as_bytes(), &target).unwrap(),
            json!({"a": 1})
        );
        let e =
            apply_patch(ct, ops(MAX_JSON_PATCH_OPERATIONS + 1).as_bytes(), &target).unwrap_err();
        assert_eq!(e.code, 413);
        assert_eq!(
            e.message,
            "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001"
        );
    }
}
