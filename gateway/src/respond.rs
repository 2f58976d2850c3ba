//! Building responses the handler families share: `Warning` headers, the answers of the
//! generic write handlers and of deletecollection, the Table apiVersion, and a GET or LIST
//! answered as JSON or as a Table (`Accept: …;as=Table`).
//!
//! Where it sits: below the handler families, above the HTTP details ([`crate::http`]). Follows k8s.io/apiserver
//! pkg/endpoints/handlers (`warning` headers of rest.go, responsewriters `ErrorNegotiated`).

use crate::http::{Body, json_response};
use http::{HeaderValue, Response, StatusCode};

/// Appends each text as a `Warning: 299 - "<text>"` header (upstream
/// apiserver/pkg/endpoints/handlers `warning` headers).
pub fn add_warnings(resp: &mut Response<Body>, warnings: &[String]) {
    for w in warnings {
        // Upstream: `299 - "<text>"` with the text escaped as a Go quoted string.
        let v = format!("299 - {}", crdplane_core::field::go_quote(w));
        if let Ok(h) = HeaderValue::from_str(&v) {
            resp.headers_mut().append("warning", h);
        }
    }
}

/// The JSON answer of a generic write handler (the store's encoding of the object when it
/// has one), with `extra` warnings (the request's own) before the handler's.
pub fn written(w: crdplane_apiserver::handlers::Written, extra: &[String]) -> Response<Body> {
    let mut warnings = extra.to_vec();
    warnings.extend(w.warnings);
    let code = StatusCode::from_u16(w.code).unwrap_or(StatusCode::OK);
    let body = match w.encoded {
        Some(b) => b,
        None => serde_json::to_vec(&w.object).expect("json"),
    };
    with_warnings(json_response(code, body), &warnings)
}

/// The answer of a deletecollection: the list as it was read (store.go `DeleteCollection`),
/// without continue token.
pub fn deleted_collection(
    api_version: &str,
    list_kind: &str,
    all: &crdplane_apiserver::rest::ListResult,
) -> Response<Body> {
    json_response(
        StatusCode::OK,
        crdplane_apiserver::render::list::list_json_of_values(
            api_version,
            list_kind,
            &all.items,
            all.resource_version,
            "",
            None,
        ),
    )
}

/// `r` with the warnings added as `Warning` headers (see [`add_warnings`]).
pub fn with_warnings(mut r: Response<Body>, w: &[String]) -> Response<Body> {
    add_warnings(&mut r, w);
    r
}

/// The Table apiVersion for a requested `meta.k8s.io` version (`v1beta1` or `v1`).
pub fn table_api_version(v: &str) -> &'static str {
    if v == "v1beta1" {
        crate::table::TABLE_API_VERSION_V1BETA1
    } else {
        crate::table::TABLE_API_VERSION_V1
    }
}
