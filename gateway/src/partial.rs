//! Metadata-only responses: `Accept: application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`
//! (and `…as=PartialObjectMetadataList…`, and both in `v1beta1`), what kube-rs `get_metadata` /
//! `list_metadata` / `metadata_watcher` and client-go's metadata client (controller-runtime
//! metadata watches) ask for.
//!
//! Sits around the resource handlers in the router (`api.rs`): when negotiation picks one of these
//! media types, the handler runs as for plain JSON and its response is transformed here, as
//! upstream transforms the object storage returned (k8s.io/apiserver
//! pkg/endpoints/handlers/response.go `doTransformObject`, `asPartialObjectMetadata`,
//! `asPartialObjectMetadataList`; negotiation in handlers/negotiation/negotiate.go
//! `acceptMediaTypeOptions` and `RequestScope.AllowsMediaTypeTransform`):
//! - an object becomes `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/<v>","metadata":…}`
//!   with the whole `metadata` (`meta.AsPartialObjectMetadata` copies every ObjectMeta field);
//! - a list becomes `PartialObjectMetadataList` whose metadata carries resourceVersion,
//!   continue and remainingItemCount, each item a PartialObjectMetadata with its kind and
//!   apiVersion; an empty list has `"items":null` (a nil Go slice);
//! - asking for the single form of a list, or the list form of an object, is a 406 with
//!   upstream's text naming the Go type;
//! - a watch transforms each event's object (watch.go `watchEmbeddedEncoder`); when the
//!   transform fails (the list form on a watch) upstream sends the object unchanged, and so
//!   do we. `Status` objects (errors, ERROR events) are never transformed.

use crate::http::{Body, MediaRange, parse_accept};
use bytes::{Bytes, BytesMut};
use crdplane_core::ApiError;
use http::{Response, StatusCode};
use http_body_util::BodyExt;
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
    fn api_version(&self) -> &'static str {
        match self.version {
            "v1beta1" => "meta.k8s.io/v1beta1",
            _ => "meta.k8s.io/v1",
        }
    }
}

/// Whether a media range asks for a metadata-only form this server serves: JSON with
/// `as=PartialObjectMetadata[List]`, `g=meta.k8s.io`, `v=v1|v1beta1`.
fn partial_of(r: &MediaRange) -> Option<Partial> {
    if r.mime != "application/json" || r.param("g") != Some("meta.k8s.io") {
        return None;
    }
    let list = match r.param("as")? {
        "PartialObjectMetadata" => false,
        "PartialObjectMetadataList" => true,
        _ => return None,
    };
    let version = match r.param("v")? {
        "v1" => "v1",
        "v1beta1" => "v1beta1",
        _ => return None,
    };
    Some(Partial { list, version })
}

/// Upstream picks the first media range of the Accept header it can serve: a metadata-only
/// form when that comes first, `None` when another servable form comes first (or none is
/// servable: the handler then answers its usual 406).
pub fn negotiate(accept: Option<&str>) -> Option<Partial> {
    for r in parse_accept(accept) {
        if let Some(p) = partial_of(&r) {
            return Some(p);
        }
        if crate::http::acceptable(&r).is_some() {
            return None;
        }
    }
    None
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
        Ok(t) => crate::watch_mux::event_line(
            ty.as_str().unwrap_or_default(),
            &serde_json::to_vec(&t).expect("json"),
        ),
        Err(_) => unchanged(),
    }
}

/// Applies the metadata-only form to a handler's response: successful JSON bodies are
/// transformed whole, watch streams event by event; errors pass unchanged.
pub async fn respond(
    resp: Response<Body>,
    p: Partial,
    group: &str,
    watch: bool,
) -> Result<Response<Body>, ApiError> {
    if !resp.status().is_success() {
        return Ok(resp);
    }
    let (parts, body) = resp.into_parts();
    if watch {
        let group = group.to_string();
        let mut pending = BytesMut::new();
        let body = body
            .map_frame(move |f| match f.into_data() {
                Ok(data) => {
                    pending.extend_from_slice(&data);
                    let mut out = BytesMut::new();
                    while let Some(n) = pending.iter().position(|b| *b == b'\n') {
                        let line = pending.split_to(n + 1);
                        out.extend_from_slice(&transform_event(&line, p, &group));
                    }
                    http_body::Frame::data(out.freeze())
                }
                Err(f) => f,
            })
            .boxed_unsync();
        return Ok(Response::from_parts(parts, body));
    }
    let bytes = body
        .collect()
        .await
        .map_err(|e| ApiError::internal(format!("reading the response: {e}")))?
        .to_bytes();
    let Ok(v) = serde_json::from_slice::<Value>(&bytes) else {
        return Ok(Response::from_parts(parts, crate::http::full(bytes)));
    };
    let t = transform(&v, p, group)?;
    let mut r = crate::http::json_response(
        StatusCode::from_u16(parts.status.as_u16()).unwrap_or(StatusCode::OK),
        serde_json::to_vec(&t).expect("json"),
    );
    for (k, v) in parts.headers.iter() {
        if k != http::header::CONTENT_LENGTH && k != http::header::CONTENT_TYPE {
            r.headers_mut().append(k.clone(), v.clone());
        }
    }
    Ok(r)
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

    /// Negotiation: the first servable media range wins (negotiate.go); the forms kube-rs and
    /// client-go send.
    #[test]
    fn negotiation() {
        for (accept, want) in [
            (
                "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
                Some(V1),
            ),
            (
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
                Some(V1_LIST),
            ),
            (
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1",
                Some(Partial {
                    list: true,
                    version: "v1beta1",
                }),
            ),
            // client-go's metadata client: protobuf first (not served), then JSON.
            (
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
                Some(V1_LIST),
            ),
            (
                "application/json, application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
                None,
            ),
            (
                "application/json;as=Table;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
                None,
            ),
            // Unknown versions and groups are not servable: the next range counts.
            (
                "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v2,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1",
                Some(Partial {
                    list: false,
                    version: "v1beta1",
                }),
            ),
            (
                "application/json;as=PartialObjectMetadata;g=example.com;v=v1",
                None,
            ),
            ("application/json", None),
        ] {
            assert_eq!(negotiate(Some(accept)), want, "{accept}");
        }
        // Nothing servable: the handler's negotiation answers 406 as before.
        let only_v2 = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v2";
        assert_eq!(negotiate(Some(only_v2)), None);
        assert_eq!(
            crate::http::negotiate_output(Some(only_v2))
                .unwrap_err()
                .code,
            406
        );
    }

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
