//! HTTP plumbing of the gateway: bodies with the 3 MiB limit, query parameters, JSON and
//! Status responses, content negotiation. Every error response is rendered here, once, from
//! an `ApiError` (the one reason→code table lives in crdplane-core).

use bytes::Bytes;
use crdplane_core::ApiError;
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};

/// Upstream `MaxRequestBodyBytes` (k8s.io/apiserver/pkg/server/config.go).
pub const MAX_BODY: usize = 3 * 1024 * 1024;

/// Response body of every handler: boxed, so bytes and streams (watch) share one type.
pub type Body = http_body_util::combinators::UnsyncBoxBody<Bytes, std::io::Error>;

/// A body of these bytes, all at once.
pub fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// A response with status `code`, `Content-Type: application/json` and this body.
pub fn json_response(code: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(full(body));
    *r.status_mut() = code;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// The media type of a Content-Type value, without parameters, lower-cased
/// (`application/json; charset=utf-8` → `application/json`).
pub fn media_type(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// The Status response of `e`; a Status with `retryAfterSeconds` also gets the `Retry-After`
/// header (apiserver `endpoints/handlers/responsewriters/writers.go` ErrorNegotiated).
pub fn error_response(e: &ApiError) -> Response<Body> {
    let code = StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut r = json_response(code, e.to_json());
    if let Some(s) = e.retry_after() {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(s));
    }
    r
}

/// The answer of upstream's request-limiting filters to a request over a bound
/// (`k8s.io/apiserver/pkg/server/filters/maxinflight.go` `tooManyRequests`, shared by
/// `priority-and-fairness.go`): 429 with `Retry-After: 1` and Go's `http.Error` body, plain
/// text with `X-Content-Type-Options: nosniff`. client-go reads it as a Status with reason
/// `TooManyRequests` and retries after the advertised second.
pub fn too_many_requests() -> Response<Body> {
    let mut r = text_response(
        StatusCode::TOO_MANY_REQUESTS,
        "Too many requests, please try again later.\n",
    );
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    r.headers_mut().insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    r
}

/// A response with status `code`, `Content-Type: text/plain` and this body.
pub fn text_response(code: StatusCode, body: &'static str) -> Response<Body> {
    let mut r = Response::new(full(body));
    *r.status_mut() = code;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// A plain-text response with an owned body.
pub fn text_response_owned(code: StatusCode, body: String) -> Response<Body> {
    let mut r = Response::new(full(body));
    *r.status_mut() = code;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// The answer of upstream's not-found handler (k8s.io/apiserver/pkg/util/notfoundhandler,
/// Go's `http.NotFound`): `404 page not found` as text/plain. kube-apiserver gives it to
/// every path no handler claims: paths outside `/api` and `/apis`, and `/apis/<group>/…`
/// of a group, version or resource no CRD serves (apiextensions-apiserver's crdHandler and
/// its discovery handlers delegate those). Paths under a built-in API root (`/api/…`,
/// `/apis/apiextensions.k8s.io/…`) reach go-restful instead, whose 404 is a JSON Status
/// (`ApiError::path_not_found`).
pub fn page_not_found() -> Response<Body> {
    let mut r = text_response(StatusCode::NOT_FOUND, "404 page not found\n");
    r.headers_mut().insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    r
}

/// Whether `path` (tenant prefix removed) lies under a root go-restful serves: `/api` and
/// the built-in group `apiextensions.k8s.io`. Its unknown paths get a JSON Status 404, all
/// others [`page_not_found`].
pub fn under_builtin_root(path: &str) -> bool {
    let under = |root: &str| {
        path.strip_prefix(root)
            .is_some_and(|r| r.is_empty() || r.starts_with('/'))
    };
    under("/api") || under("/apis/apiextensions.k8s.io")
}

/// The 404 for `path` no handler serves: a JSON Status under a built-in root, else
/// upstream's plain-text `404 page not found`.
pub fn not_found_for(path: &str) -> Response<Body> {
    if under_builtin_root(path) {
        error_response(&ApiError::path_not_found())
    } else {
        page_not_found()
    }
}

/// Reads a request body up to `MAX_BODY` bytes (413 with upstream's text beyond).
pub async fn read_body<B>(body: B, headers: &HeaderMap) -> Result<Bytes, ApiError>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    if let Some(len) = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        && len > MAX_BODY
    {
        return Err(ApiError::too_large(MAX_BODY));
    }
    match Limited::new(body, MAX_BODY).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) => {
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                Err(ApiError::too_large(MAX_BODY))
            } else {
                Err(ApiError::bad_request(format!(
                    "unable to read request body: {e}"
                )))
            }
        }
    }
}

/// Parsed query string (later values of a repeated key win, as `url.Values.Get` takes the first;
/// we keep the first too).
#[derive(Debug, Default, Clone)]
pub struct Query(pub Vec<(String, String)>);

impl Query {
    /// Splits a raw query string at `&` and `=` and percent-decodes each key and value.
    pub fn parse(q: Option<&str>) -> Self {
        let mut v = Vec::new();
        for pair in q.unwrap_or("").split('&').filter(|s| !s.is_empty()) {
            let (k, val) = pair.split_once('=').unwrap_or((pair, ""));
            v.push((pct_decode(k), pct_decode(val)));
        }
        Self(v)
    }
    /// The first value of key `k`.
    pub fn get(&self, k: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    }
    /// A boolean query parameter (`watch`, `allowWatchBookmarks`, `orphanDependents`, …):
    /// absent is false, else [`query_bool`] of its first value.
    pub fn flag(&self, k: &str) -> bool {
        self.opt_flag(k).unwrap_or(false)
    }
    /// A `*bool` query parameter (`sendInitialEvents`, `orphanDependents`): `None` when
    /// absent, else [`query_bool`] of its first value.
    pub fn opt_flag(&self, k: &str) -> Option<bool> {
        self.get(k).map(query_bool)
    }
}

/// How upstream's parameter codec reads a boolean query parameter
/// (k8s.io/apimachinery/pkg/runtime/conversion.go, `Convert_Slice_string_To_bool` and
/// `Convert_Slice_string_To_Pointer_bool`): only `0` and `false` in any letter case are
/// false; every other value, the empty one (`?watch`, `?watch=`) included, is true. No
/// value is unparsable, so a boolean parameter never causes an error.
pub fn query_bool(v: &str) -> bool {
    !(v == "0" || v.eq_ignore_ascii_case("false"))
}

/// Percent-decoding of a query component (`+` is a space, as Go's url.ParseQuery).
pub fn pct_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                let h = std::str::from_utf8(&b[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match h {
                    Some(v) => {
                        out.push(v);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One media range of an Accept header with its parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct MediaRange {
    /// `type/subtype`, lowercased, e.g. `application/json`.
    pub mime: String,
    /// `;key=value` parameters in order (keys lowercased, quotes removed), e.g. `as=Table`.
    pub params: Vec<(String, String)>,
}

impl MediaRange {
    /// The value of parameter `k`.
    pub fn param(&self, k: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    }
}

/// The media ranges of an `Accept` header, in order (none when absent).
pub fn parse_accept(h: Option<&str>) -> Vec<MediaRange> {
    let Some(h) = h else { return vec![] };
    h.split(',')
        .filter_map(|part| {
            let mut it = part.split(';');
            let mime = it.next()?.trim().to_ascii_lowercase();
            if mime.is_empty() {
                return None;
            }
            let params = it
                .filter_map(|p| {
                    let (k, v) = p.split_once('=')?;
                    Some((
                        k.trim().to_ascii_lowercase(),
                        v.trim().trim_matches('"').to_string(),
                    ))
                })
                .collect();
            Some(MediaRange { mime, params })
        })
        .collect()
}

/// What representation a GET/LIST/WATCH response should have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// The object or list itself as JSON.
    Json,
    /// meta.k8s.io Table; the version string ("v1" or "v1beta1").
    Table(&'static str),
}

/// Picks the first acceptable media range in client order, like upstream's negotiation:
/// a Table when asked for (as=Table;g=meta.k8s.io;v=v1|v1beta1), else JSON. Protobuf is not
/// served for custom resources (upstream answers 406). YAML output is rendered around the
/// handlers (`yaml.rs`), which then see `application/json`; a watch asking for YAML alone
/// reaches this negotiation and gets 406 (upstream's YAML serializer has no stream form).
pub fn negotiate_output(accept: Option<&str>) -> Result<Output, ApiError> {
    let ranges = parse_accept(accept);
    if ranges.is_empty() {
        return Ok(Output::Json);
    }
    if let Some(o) = ranges.iter().find_map(acceptable) {
        return Ok(o);
    }
    Err(ApiError::not_acceptable(&[
        "application/json",
        "application/yaml",
    ]))
}

/// What one media range of an Accept header gets from [`negotiate_output`], if anything.
/// (Metadata-only forms are negotiated before the handlers run, in `partial.rs`.)
pub fn acceptable(r: &MediaRange) -> Option<Output> {
    match (r.mime.as_str(), r.param("as")) {
        ("application/json", Some("Table")) if r.param("g") == Some("meta.k8s.io") => {
            match r.param("v") {
                Some("v1") => Some(Output::Table("v1")),
                Some("v1beta1") => Some(Output::Table("v1beta1")),
                _ => None,
            }
        }
        ("application/json", None) | ("application/*", None) | ("*/*", _) => Some(Output::Json),
        _ => None,
    }
}

/// A request body as the edge service receives it.
#[derive(Debug)]
pub enum Payload {
    /// Read whole by the HTTP/1.1 layer (which enforces the body limit while reading).
    Read(Bytes),
    /// Still on the wire (HTTP/2), not yet under the body limit.
    Incoming(hyper::body::Incoming),
    /// Still on the wire, bounded by the limits layer.
    Limited(http_body_util::Limited<hyper::body::Incoming>),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_accept_headers() {
        let k120 = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(negotiate_output(Some(k120)).unwrap(), Output::Table("v1"));
        assert_eq!(
            negotiate_output(Some("application/json")).unwrap(),
            Output::Json
        );
        assert_eq!(negotiate_output(None).unwrap(), Output::Json);
        assert_eq!(
            negotiate_output(Some("application/json, */*")).unwrap(),
            Output::Json
        );
        assert_eq!(
            negotiate_output(Some("application/vnd.kubernetes.protobuf"))
                .unwrap_err()
                .code,
            406
        );
        assert_eq!(
            negotiate_output(Some("application/vnd.kubernetes.protobuf,application/json")).unwrap(),
            Output::Json
        );
    }

    #[test]
    fn queries() {
        let q = Query::parse(Some(
            "fieldSelector=metadata.name%3Dx&watch=1&limit=500&labelSelector=a+in+(b)",
        ));
        assert_eq!(q.get("fieldSelector"), Some("metadata.name=x"));
        assert_eq!(q.get("labelSelector"), Some("a in (b)"));
        assert!(q.flag("watch"));
        assert!(!q.flag("dryRun"));
        assert!(!Query::parse(Some("watch=false")).flag("watch"));
        assert_eq!(Query::parse(Some("a=1")).opt_flag("b"), None);
    }

    #[test]
    fn which_paths_get_the_plain_404() {
        for (path, builtin) in [
            ("/api", true),
            ("/api/v2", true),
            ("/api/v1/foos", true),
            ("/apis/apiextensions.k8s.io", true),
            ("/apis/apiextensions.k8s.io/v2/x", true),
            ("/apis/apiextensions.k8s.io.evil/v1", false),
            ("/apiz", false),
            ("/nope", false),
            ("/apis/nope.example.com/v1/foos", false),
            ("/apis/stable.example.com/v1", false),
        ] {
            assert_eq!(under_builtin_root(path), builtin, "{path}");
            let r = not_found_for(path);
            assert_eq!(r.status(), 404);
            let ct = r.headers()[header::CONTENT_TYPE].to_str().unwrap();
            assert_eq!(ct.starts_with("text/plain"), !builtin, "{path}");
        }
    }

    /// Table of runtime.Convert_Slice_string_To_bool (apimachinery runtime/conversion.go).
    #[test]
    fn boolean_query_parameters() {
        for (q, want) in [
            ("watch=true", true),
            ("watch=True", true), // the Python client 22.6
            ("watch=TRUE", true),
            ("watch=1", true),
            ("watch=", true),
            ("watch", true),
            ("watch=yes", true),
            ("watch=t", true),
            ("watch=2", true),
            ("watch=false", false),
            ("watch=False", false),
            ("watch=FALSE", false),
            ("watch=fAlSe", false),
            ("watch=0", false),
            ("watch=0&watch=1", false), // the first value counts
            ("other=1", false),
        ] {
            assert_eq!(Query::parse(Some(q)).flag("watch"), want, "{q}");
        }
        assert_eq!(pct_decode("%zz%4"), "%zz%4");
    }
}
