//! JSON patch (RFC 6902) application as upstream's apiserver does it: the handler
//! (k8s.io/apiserver pkg/endpoints/handlers/patch.go `applyJSPatch`) applies the document with
//! evanphx/json-patch v4, whose `test` operation differs from RFC 6902 in one way clients rely
//! on: testing a path that does not exist against `null` (or with no value) passes. kube-rs's
//! finalizer helper sends `[{"op":"test","path":"/metadata/finalizers","value":null},
//! {"op":"add",…}]` to add the first finalizer. Other operations are the `json-patch` crate's.
//!
//! A failed application is upstream's `NewGenericServerResponse(422, …)`: reason Invalid, the
//! generic message, empty details; the library's own text (kept here in [`PatchFailure`]) is
//! not shown to clients.

use crdplane_core::ApiError;
use crdplane_core::status::StatusDetails;
use json_patch::{Patch, PatchOperation};
use serde_json::Value;

/// Why a JSON patch did not apply, with evanphx/json-patch v4's texts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchFailure(pub String);

impl PatchFailure {
    /// The response upstream sends for any failed JSON patch application.
    pub fn to_api_error(&self) -> ApiError {
        let mut e = ApiError::new(
            crdplane_core::Reason::Invalid,
            "the server rejected our request due to an error in our request",
        );
        e.details = Some(Box::new(StatusDetails::default()));
        e
    }
}

/// Applies `patch` to `doc` atomically (a failed operation leaves `doc` untouched).
pub fn apply(doc: &Value, patch: &Patch) -> Result<Value, PatchFailure> {
    let mut out = doc.clone();
    for op in patch.iter() {
        match op {
            PatchOperation::Test(t) => test(&out, t.path.as_str(), &t.value)?,
            other => json_patch::patch(&mut out, std::slice::from_ref(other))
                .map_err(|e| PatchFailure(e.to_string()))?,
        }
    }
    Ok(out)
}

/// RFC 6901 token unescaping.
fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

/// evanphx/json-patch v4 `Patch.test`.
fn test(doc: &Value, path: &str, want: &Value) -> Result<(), PatchFailure> {
    let failed = || PatchFailure(format!("testing value {path} failed: test failed"));
    if path.is_empty() {
        return if doc == want { Ok(()) } else { Err(failed()) };
    }
    let (parent_path, last) = path.rsplit_once('/').unwrap_or(("", path));
    let missing = || {
        PatchFailure(format!(
            "test operation does not apply: is missing path: {path}: missing value"
        ))
    };
    // findObject: every step but the last must exist and be an object or array.
    let parent = if parent_path.is_empty() {
        Some(doc)
    } else {
        doc.pointer(parent_path)
    };
    let key = unescape(last);
    let found = match parent {
        Some(Value::Object(m)) => m.get(&key),
        Some(Value::Array(a)) => {
            let invalid = |k: &str| {
                PatchFailure(format!(
                    "error in test for path: '{path}': Unable to access invalid index: {k}: invalid index referenced"
                ))
            };
            let i: i64 = key
                .parse()
                .map_err(|_| PatchFailure(format!("error in test for path: '{path}': {key}")))?;
            if i < 0 || i as usize >= a.len() {
                return Err(invalid(&key));
            }
            a.get(i as usize)
        }
        _ => return Err(missing()),
    };
    match found {
        // A missing value passes against null (v4: the operation's raw value is nil).
        None if want.is_null() => Ok(()),
        None => Err(failed()),
        Some(v) if v == want => Ok(()),
        Some(_) => Err(failed()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(doc: Value, patch: Value) -> Result<Value, String> {
        let p: Patch = serde_json::from_value(patch).unwrap();
        apply(&doc, &p).map_err(|e| e.0)
    }

    #[test]
    fn test_operation_follows_evanphx_v4() {
        let ok = |doc: Value, patch: Value| assert!(run(doc, patch).is_ok());
        let fails =
            |doc: Value, patch: Value, text: &str| assert_eq!(run(doc, patch).unwrap_err(), text);
        // Cases of evanphx/json-patch's own table (patch_test.go TestCases).
        ok(
            json!({"baz": "qux", "foo": ["a", 2, "c"]}),
            json!([{"op": "test", "path": "/baz", "value": "qux"},
                   {"op": "test", "path": "/foo/1", "value": 2}]),
        );
        fails(
            json!({"baz": "qux"}),
            json!([{"op": "test", "path": "/baz", "value": "bar"}]),
            "testing value /baz failed: test failed",
        );
        fails(
            json!({"baz": "qux", "foo": ["a", 2, "c"]}),
            json!([{"op": "test", "path": "/foo/1", "value": "c"}]),
            "testing value /foo/1 failed: test failed",
        );
        fails(
            json!({"baz": "qux"}),
            json!([{"op": "test", "path": "/foo", "value": 42}]),
            "testing value /foo failed: test failed",
        );
        ok(
            json!({"baz": "qux"}),
            json!([{"op": "test", "path": "/foo", "value": null}]),
        );
        ok(
            json!({"foo": null}),
            json!([{"op": "test", "path": "/foo", "value": null}]),
        );
        fails(
            json!({"foo": {}}),
            json!([{"op": "test", "path": "/foo", "value": null}]),
            "testing value /foo failed: test failed",
        );
        fails(
            json!({"foo": []}),
            json!([{"op": "test", "path": "/foo", "value": null}]),
            "testing value /foo failed: test failed",
        );
        ok(
            json!({"baz/foo": "qux"}),
            json!([{"op": "test", "path": "/baz~1foo", "value": "qux"}]),
        );
        fails(
            json!({"a": 1}),
            json!([{"op": "test", "path": "/b/c", "value": null}]),
            "test operation does not apply: is missing path: /b/c: missing value",
        );
        fails(
            json!({"a": [1]}),
            json!([{"op": "test", "path": "/a/3", "value": 1}]),
            "error in test for path: '/a/3': Unable to access invalid index: 3: invalid index referenced",
        );
        ok(
            json!({"a": 1}),
            json!([{"op": "test", "path": "", "value": {"a": 1}}]),
        );
    }

    #[test]
    fn kube_rs_finalizer_patch_adds_the_first_finalizer() {
        let obj = json!({"metadata": {"name": "x"}, "spec": {}});
        let out = run(
            obj.clone(),
            json!([{"op": "test", "path": "/metadata/finalizers", "value": null},
                   {"op": "add", "path": "/metadata/finalizers", "value": ["f.example.com/cleanup"]}]),
        )
        .unwrap();
        assert_eq!(
            out["metadata"]["finalizers"],
            json!(["f.example.com/cleanup"])
        );
        // Once present, the same patch fails its test (and nothing is applied).
        let err = run(
            out,
            json!([{"op": "test", "path": "/metadata/finalizers", "value": null},
                   {"op": "add", "path": "/metadata/finalizers", "value": ["g"]}]),
        )
        .unwrap_err();
        assert_eq!(
            err,
            "testing value /metadata/finalizers failed: test failed"
        );
    }

    #[test]
    fn failures_are_upstreams_generic_422() {
        let e = PatchFailure("x".into()).to_api_error();
        assert_eq!(e.code, 422);
        let body: Value = serde_json::from_slice(&e.to_json()).unwrap();
        assert_eq!(
            body["message"],
            "the server rejected our request due to an error in our request"
        );
        assert_eq!(body["reason"], "Invalid");
        assert_eq!(body["details"], json!({}));
    }
}
