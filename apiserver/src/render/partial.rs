//! The metadata-only forms of a response (`PartialObjectMetadata`,
//! `PartialObjectMetadataList`, meta.k8s.io `v1` and `v1beta1`): what kube-rs
//! `get_metadata` / `list_metadata` / `metadata_watcher` and client-go's metadata client ask
//! for. Follows k8s.io/apiserver pkg/endpoints/handlers/response.go (`doTransformObject`,
//! `asPartialObjectMetadata`, `asPartialObjectMetadataList`) and watch.go
//! (`watchEmbeddedEncoder`):
//! - an object becomes `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/<v>","metadata":…}`
//!   with the whole `metadata` (`meta.AsPartialObjectMetadata` copies every ObjectMeta field);
//! - a list becomes `PartialObjectMetadataList` whose metadata carries resourceVersion,
//!   continue and remainingItemCount, each item a PartialObjectMetadata with its kind and
//!   apiVersion; an empty list has `"items":null` (a nil Go slice);
//! - asking for the single form of a list, or the list form of an object, is a 406 with
//!   upstream's text naming the Go type;
//! - a watch transforms each event's object; when the transform fails (the list form on a
//!   watch) upstream sends the object unchanged, and so do we. `Status` objects (errors,
//!   ERROR events) are never transformed.
//!
//! Where it sits: applied to a handler's answer once negotiation picked one of these forms
//! (the gateway negotiates and transforms the response body, `partial.rs`).

use crate::watch::event_line;
use bytes::Bytes;
use crdplane_core::ApiError;
use serde_json::{Value, json};

/// The metadata-only form negotiated for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partial {
    /// `PartialObjectMetadataList` (else `PartialObjectMetadata`).
    pub list: bool,
    /// "v1" or "v1beta1" of meta.k8s.io.
    pub version: &'static str,
}

impl Partial {
    /// The apiVersion of the metadata-only objects.
    pub fn api_version(&self) -> &'static str {
        match self.version {
            "v1beta1" => "meta.k8s.io/v1beta1",
            _ => "meta.k8s.io/v1",
        }
    }
}

/// Go's `%T` of the object upstream transforms: the internal type of a built-in resource,
/// unstructured for custom resources.
fn go_type(group: &str, kind: &str, list: bool) -> String {
    let kind = kind.strip_suffix("List").filter(|_| list).unwrap_or(kind);
    let s = if list { "List" } else { "" };
    match group {
        "" => format!("*core.{kind}{s}"),
        "apiextensions.k8s.io" => format!("*apiextensions.{kind}{s}"),
        _ => format!("*unstructured.Unstructured{s}"),
    }
}

fn not_acceptable(message: String) -> ApiError {
    let mut e = ApiError::not_acceptable(&[]);
    e.message = message;
    e
}

fn is_list(v: &Value) -> bool {
    v.get("items").is_some_and(|i| i.is_array() || i.is_null())
        && v.get("kind")
            .and_then(Value::as_str)
            .is_some_and(|k| k.ends_with("List"))
}

fn is_status(v: &Value) -> bool {
    v.get("kind").and_then(Value::as_str) == Some("Status")
}

/// `meta.AsPartialObjectMetadata` with the kind set.
fn as_partial(obj: &Value, p: Partial) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": p.api_version(),
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// `doTransformObject` for one response body (an object or a list). `group` is the API group
/// of the request (for the Go type in the 406 texts).
pub fn transform(body: &Value, p: Partial, group: &str) -> Result<Value, ApiError> {
    if is_status(body) {
        return Ok(body.clone());
    }
    let kind = body.get("kind").and_then(Value::as_str).unwrap_or("");
    let list = is_list(body);
    match (p.list, list) {
        (false, true) => Err(not_acceptable(format!(
            "you requested PartialObjectMetadata, but the requested object is a list ({})",
            go_type(group, kind, true)
        ))),
        (true, false) => Err(not_acceptable(format!(
            "you requested PartialObjectMetadataList, but the requested object is not a list ({})",
            go_type(group, kind, false)
        ))),
        (false, false) => Ok(as_partial(body, p)),
        (true, true) => {
            let items: Vec<Value> = body
                .get("items")
                .and_then(Value::as_array)
                .map(|a| a.iter().map(|o| as_partial(o, p)).collect())
                .unwrap_or_default();
            let mut meta = serde_json::Map::new();
            if let Some(m) = body.get("metadata").and_then(Value::as_object) {
                for k in ["resourceVersion", "continue", "remainingItemCount"] {
                    if let Some(v) = m.get(k) {
                        meta.insert(k.into(), v.clone());
                    }
                }
            }
            Ok(json!({
                "kind": "PartialObjectMetadataList",
                "apiVersion": p.api_version(),
                "metadata": meta,
                // A nil Go slice: upstream encodes an empty result as null.
                "items": if items.is_empty() { Value::Null } else { Value::Array(items) },
            }))
        }
    }
}

/// One watch event line `{"type":…,"object":…}`: its object transformed; the line unchanged
/// when the transform does not apply (Status objects, the list form).
pub fn transform_event(line: &[u8], p: Partial, group: &str) -> Bytes {
    let unchanged = || Bytes::copy_from_slice(line);
    let Ok(ev) = serde_json::from_slice::<Value>(line) else {
        return unchanged();
    };
    let (Some(ty), Some(obj)) = (ev.get("type"), ev.get("object")) else {
        return unchanged();
    };
    if is_status(obj) {
        return unchanged();
    }
    match transform(obj, p, group) {
        Ok(t) => event_line(
            ty.as_str().unwrap_or_default(),
            &serde_json::to_vec(&t).expect("json"),
        ),
        Err(_) => unchanged(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: Partial = Partial {
        list: false,
        version: "v1",
    };
    const V1_LIST: Partial = Partial {
        list: true,
        version: "v1",
    };

    #[test]
    fn objects_and_lists() {
        let obj = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": "a", "namespace": "default", "uid": "u", "resourceVersion": "5",
                "labels": {"x": "y"}}, "spec": {"image": "i"}});
        assert_eq!(
            transform(&obj, V1, "stable.example.com").unwrap(),
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                "metadata": obj["metadata"]})
        );
        let list = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTabList",
            "metadata": {"resourceVersion": "9", "continue": "c", "remainingItemCount": 3},
            "items": [obj]});
        let t = transform(&list, V1_LIST, "stable.example.com").unwrap();
        assert_eq!(t["kind"], "PartialObjectMetadataList");
        assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(
            t["metadata"],
            json!({"resourceVersion": "9", "continue": "c", "remainingItemCount": 3})
        );
        assert_eq!(t["items"][0]["kind"], "PartialObjectMetadata");
        assert_eq!(t["items"][0]["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(t["items"][0]["metadata"]["name"], "a");
        assert!(t["items"][0].get("spec").is_none());
        let empty = json!({"apiVersion": "v1", "kind": "NamespaceList",
            "metadata": {"resourceVersion": "9"}, "items": []});
        let t = transform(&empty, V1_LIST, "").unwrap();
        assert_eq!(t["items"], Value::Null);
        // The wrong form: 406 with upstream's text.
        let e = transform(&list, V1, "stable.example.com").unwrap_err();
        assert_eq!((e.code, e.reason.as_str()), (406, "NotAcceptable"));
        assert_eq!(
            e.message,
            "you requested PartialObjectMetadata, but the requested object is a list (*unstructured.UnstructuredList)"
        );
        assert_eq!(
            transform(&empty, V1, "").unwrap_err().message,
            "you requested PartialObjectMetadata, but the requested object is a list (*core.NamespaceList)"
        );
        let crd = json!({"kind": "CustomResourceDefinition", "metadata": {"name": "x"}});
        assert_eq!(
            transform(&crd, V1_LIST, "apiextensions.k8s.io")
                .unwrap_err()
                .message,
            "you requested PartialObjectMetadataList, but the requested object is not a list (*apiextensions.CustomResourceDefinition)"
        );
        let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Success"});
        assert_eq!(transform(&status, V1, "").unwrap(), status);
    }

    #[test]
    fn watch_events() {
        let line = b"{\"type\":\"ADDED\",\"object\":{\"kind\":\"CronTab\",\"apiVersion\":\"stable.example.com/v1\",\"metadata\":{\"name\":\"a\"},\"spec\":{}}}\n";
        let t: Value = serde_json::from_slice(&transform_event(line, V1, "g")).unwrap();
        assert_eq!(t["type"], "ADDED");
        assert_eq!(
            t["object"],
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": {"name": "a"}})
        );
        // The list form cannot transform one object: sent unchanged (watchEmbeddedEncoder).
        assert_eq!(&transform_event(line, V1_LIST, "g")[..], &line[..]);
        let err = b"{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410}}\n";
        assert_eq!(&transform_event(err, V1, "g")[..], &err[..]);
    }
}
