//! Metadata-only responses: `Accept: application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`
//! (and `…as=PartialObjectMetadataList…`, and both in `v1beta1`), what kube-rs `get_metadata` /
//! `list_metadata` / `metadata_watcher` and client-go's metadata client (controller-runtime
//! metadata watches) ask for.
//!
//! Sits around the resource handlers in the router (`api.rs`): when negotiation picks one of
//! these media types (handlers/negotiation/negotiate.go `acceptMediaTypeOptions`: the first
//! servable media range wins), the handler runs as for plain JSON and its response body is
//! transformed here, whole or event by event for a watch, with the machinery's
//! `crdplane_apiserver::render::partial` (upstream's `doTransformObject`).

use crate::http::{Body, MediaRange, parse_accept};
use bytes::BytesMut;
use crdplane_core::ApiError;
use http::{Response, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;

pub use crdplane_apiserver::render::partial::{Partial, transform, transform_event};

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

/// Whether one media range asks for a metadata-only form this server serves.
pub fn negotiate_range(r: &MediaRange) -> bool {
    partial_of(r).is_some()
}

/// Upstream picks the first media range of the Accept header it can serve: a metadata-only
/// form when that comes first, `None` when another servable form comes first (or none is
/// servable: the handler then answers its usual 406).
pub fn negotiate(accept: Option<&str>) -> Option<Partial> {
    // Most requests do not ask for it: no parse of their Accept header for it.
    if !accept.is_some_and(|a| a.contains("PartialObjectMetadata")) {
        return None;
    }
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
}
