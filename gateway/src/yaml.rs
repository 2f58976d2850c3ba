//! YAML responses: `Accept: application/yaml` (curl users, scripts) on a resource request
//! that is not a watch. The handler answers JSON as usual and the body — the object, list,
//! Table or error Status — is rendered as YAML by the machinery
//! (`crdplane_apiserver::render::yaml`), as upstream encodes any response in the negotiated
//! serializer (handlers/responsewriters `WriteObjectNegotiated`, `ErrorNegotiated`).
//!
//! Where it sits: around the resource handlers in the router (`api.rs`), beside the
//! metadata-only forms (`partial.rs`). A watch is left to the handler's own negotiation,
//! which refuses YAML alone with 406: upstream's YAML serializer has no stream form.

use crate::http::{Body, full, parse_accept};
use crdplane_apiserver::render::yaml::json_to_yaml;
use crdplane_core::ApiError;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::BodyExt;

const YAML: &str = "application/yaml";

/// Whether the first media range of the Accept header this server can serve is YAML.
pub fn negotiate(accept: Option<&str>) -> bool {
    // Most requests do not mention YAML: no parse of their Accept header for it (media
    // types are case-insensitive).
    let mentions = |a: &str| {
        a.as_bytes()
            .windows(4)
            .any(|w| w.eq_ignore_ascii_case(b"yaml"))
    };
    if !accept.is_some_and(mentions) {
        return false;
    }
    for r in parse_accept(accept) {
        if r.mime == YAML && r.param("as").is_none() {
            return true;
        }
        if crate::http::acceptable(&r).is_some() || crate::partial::negotiate_range(&r) {
            return false;
        }
    }
    false
}

/// The handler's answer (or its error) with a YAML body.
pub async fn respond(answer: Result<Response<Body>, ApiError>) -> Result<Response<Body>, ApiError> {
    let (mut parts, json) = match answer {
        Ok(resp) => {
            let (parts, body) = resp.into_parts();
            let bytes = body
                .collect()
                .await
                .map_err(|e| ApiError::internal(format!("reading the response: {e}")))?
                .to_bytes();
            (parts, bytes)
        }
        Err(e) => {
            let (parts, _) = crate::http::error_response(&e).into_parts();
            (parts, e.to_json().into())
        }
    };
    let yaml = json_to_yaml(&json)?;
    parts.headers.remove(header::CONTENT_LENGTH);
    parts
        .headers
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(YAML));
    let mut r = Response::from_parts(parts, full(yaml));
    if r.status() == StatusCode::NOT_MODIFIED {
        *r.body_mut() = full(bytes::Bytes::new());
    }
    Ok(r)
}
