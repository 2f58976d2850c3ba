//! Limits: fifth layer of the edge stack (`stack.rs`), inside metrics (a timed-out
//! request is counted with its 504) and outside authentication, where upstream's
//! `WithRequestDeadline` (staging/src/k8s.io/apiserver/pkg/endpoints/filters/request_deadline.go)
//! and `WithTimeoutForNonLongRunningRequests`
//! (staging/src/k8s.io/apiserver/pkg/server/filters/timeout.go) sit.
//!
//! - **Request timeout** of non-long-running requests: the request's own `?timeout=` (a Go
//!   duration, as client-go sends `kubectl --request-timeout`) when it is positive and below
//!   the server's `--request-timeout` (60 s by default), else the latter. A request still
//!   unanswered then gets upstream's 504: `NewTimeoutError("request did not complete within
//!   the allotted timeout", 0)` encoded as timeout.go does (the bare `metav1.Status`, no kind,
//!   a newline, and the `text/plain` Content-Type Go's sniffing gives it). An unparsable
//!   `?timeout=` is upstream's 400 `invalid timeout specified in the request URL - time: …`.
//!   Upstream's handler goroutine runs on after the timeout; here the handler's future is
//!   dropped, so its backend calls are cancelled (the client was answered 504, nothing was
//!   acknowledged). Only the answer is timed, not the writing of its body.
//! - **Long-running** requests (upstream's `BasicLongRunningRequestCheck` as kube-apiserver
//!   configures it: verbs `watch` and `proxy`, subresources `attach`, `exec`, `proxy`, `log`,
//!   `portforward`, and `/debug/pprof/`) are never timed here.
//! - **Body limit**: upstream's `MaxRequestBodyBytes` (3 MiB, config.go), answered with
//!   upstream's 413 Status (`Request entity too large: limit is 3145728`, as the handlers'
//!   `limitedReadBody`). An HTTP/1.1 body is bounded while crdplane-http1 reads it (it must
//!   know the bound to drain and close the connection), with [`too_large`] as the answer; an
//!   HTTP/2 body is bounded here: a larger Content-Length is refused at once, and the body is
//!   wrapped so the router's read stops at the limit.
//!
//! The concurrent-watch bounds stay in the router ([`crate::watch_limit`]): upstream bounds
//! watches in its fairness filter, not here, and their slot must live in the response body.
//!
//! Hand-written rather than tower-http's `Timeout` and `RequestBodyLimit`: those answer 408
//! and a plain-text 413 and know nothing of long-running requests; upstream's clients read
//! the Status texts above.

use crate::http::Payload;
use crate::http::{Body, Query, error_response};
use crate::request_info::RequestInfo;
use bytes::Bytes;
use crdplane_core::ApiError;
use futures::FutureExt;
use futures::future::{Either, Map, Ready, ready};
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use std::convert::Infallible;
use std::task::{Context, Poll};
use std::time::Duration;

/// Upstream `MaxRequestBodyBytes` (k8s.io/apiserver/pkg/server/config.go).
pub use crate::http::MAX_BODY;

/// kube-apiserver's default `--request-timeout` (1m0s), with the other edge defaults.
pub use crate::context::REQUEST_TIMEOUT;

/// Upstream's answer to a body over [`MAX_BODY`].
pub fn too_large() -> Response<Body> {
    error_response(&ApiError::too_large(MAX_BODY))
}

/// The body of upstream's 504 (timeout.go encodes `apierrors.NewTimeoutError(…, 0)`'s bare
/// `metav1.Status` with `json.Encoder`).
pub const TIMEOUT_BODY: &str = "{\"metadata\":{},\"status\":\"Failure\",\"message\":\"Timeout: request did not complete within the allotted timeout\",\"reason\":\"Timeout\",\"details\":{},\"code\":504}\n";

/// Upstream's answer to a non-long-running request that outlived its timeout.
pub fn timeout_response() -> Response<Body> {
    let mut r = Response::new(crate::http::full(Bytes::from_static(
        TIMEOUT_BODY.as_bytes(),
    )));
    *r.status_mut() = StatusCode::GATEWAY_TIMEOUT;
    // timeout.go sets no Content-Type; Go's server sniffs the JSON as plain text.
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// Whether upstream leaves `info` untimed (kube-apiserver's `BasicLongRunningRequestCheck`
/// with verbs `watch`, `proxy` and subresources `attach`, `exec`, `proxy`, `log`,
/// `portforward`; staging/src/k8s.io/apiserver/pkg/server/filters/longrunning.go).
pub fn long_running(info: &RequestInfo) -> bool {
    matches!(info.verb.as_str(), "watch" | "proxy")
        || (info.is_resource_request
            && matches!(
                info.subresource.as_str(),
                "attach" | "exec" | "proxy" | "log" | "portforward"
            ))
        || (!info.is_resource_request && info.path.starts_with("/debug/pprof/"))
}

/// The timeout of a non-long-running request (request_deadline.go): the request's
/// positive `?timeout=` below `max`, else `max`; `Err` is the message of upstream's 400.
pub fn request_timeout(query: Option<&Query>, max: Duration) -> Result<Duration, String> {
    let Some(v) = query
        .and_then(|q| q.get("timeout"))
        .filter(|v| !v.is_empty())
    else {
        return Ok(max);
    };
    let nanos = parse_go_duration(v)
        .map_err(|e| format!("invalid timeout specified in the request URL - {e}"))?;
    Ok(match u64::try_from(nanos) {
        Ok(n) if n > 0 && Duration::from_nanos(n) < max => Duration::from_nanos(n),
        _ => max,
    })
}

/// Go's `time.ParseDuration`: a signed sequence of decimal numbers with optional fractions
/// and units `ns`, `us` (`µs`, `μs`), `ms`, `s`, `m`, `h` (`300ms`, `-1.5h`, `2h45m`, `0`),
/// in nanoseconds; errors are Go's texts (`time: invalid duration "x"`, `time: missing unit
/// in duration "1"`, `time: unknown unit "d" in duration "1d"`).
pub fn parse_go_duration(orig: &str) -> Result<i64, String> {
    let invalid = || format!("time: invalid duration {}", go_time_quote(orig));
    let mut s = orig.as_bytes();
    let mut neg = false;
    if let Some((&c, rest)) = s.split_first()
        && (c == b'-' || c == b'+')
    {
        neg = c == b'-';
        s = rest;
    }
    if s == b"0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    const LIMIT: u64 = 1 << 63;
    let mut d: u64 = 0;
    while !s.is_empty() {
        if !(s[0] == b'.' || s[0].is_ascii_digit()) {
            return Err(invalid());
        }
        // [0-9]*
        let digits = s.iter().take_while(|b| b.is_ascii_digit()).count();
        let mut v: u64 = 0;
        for &b in &s[..digits] {
            if v > LIMIT / 10 {
                return Err(invalid());
            }
            v = v * 10 + u64::from(b - b'0');
            if v > LIMIT {
                return Err(invalid());
            }
        }
        let pre = digits > 0;
        s = &s[digits..];
        // (\.[0-9]*)?: digits past what fits are dropped, as Go's leadingFraction does.
        let (mut f, mut scale, mut post) = (0u64, 1f64, false);
        if s.first() == Some(&b'.') {
            s = &s[1..];
            let n = s.iter().take_while(|b| b.is_ascii_digit()).count();
            let mut overflow = false;
            for &b in &s[..n] {
                if overflow {
                    continue;
                }
                if f > (LIMIT - 1) / 10 {
                    overflow = true;
                    continue;
                }
                let y = f * 10 + u64::from(b - b'0');
                if y > LIMIT {
                    overflow = true;
                    continue;
                }
                f = y;
                scale *= 10.0;
            }
            post = n > 0;
            s = &s[n..];
        }
        if !pre && !post {
            return Err(invalid());
        }
        let unit_len = s
            .iter()
            .take_while(|b| !(**b == b'.' || b.is_ascii_digit()))
            .count();
        if unit_len == 0 {
            return Err(format!(
                "time: missing unit in duration {}",
                go_time_quote(orig)
            ));
        }
        let u = &s[..unit_len];
        s = &s[unit_len..];
        let unit: u64 = match u {
            b"ns" => 1,
            // "µs" (U+00B5) and "μs" (U+03BC).
            b"us" | b"\xc2\xb5s" | b"\xce\xbcs" => 1_000,
            b"ms" => 1_000_000,
            b"s" => 1_000_000_000,
            b"m" => 60 * 1_000_000_000,
            b"h" => 3600 * 1_000_000_000,
            _ => {
                return Err(format!(
                    "time: unknown unit {} in duration {}",
                    go_time_quote(&String::from_utf8_lossy(u)),
                    go_time_quote(orig)
                ));
            }
        };
        if v > LIMIT / unit {
            return Err(invalid());
        }
        v *= unit;
        if f > 0 {
            // As Go: float64 arithmetic, truncated.
            v += (f as f64 * (unit as f64 / scale)) as u64;
            if v > LIMIT {
                return Err(invalid());
            }
        }
        d += v;
        if d > LIMIT {
            return Err(invalid());
        }
    }
    if neg {
        return Ok((d as i128).wrapping_neg() as i64);
    }
    i64::try_from(d).map_err(|_| invalid())
}

/// The `quote` of Go's time package: double quotes, `"` and `\` escaped, every byte of a
/// control or non-ASCII character as `\xNN`.
fn go_time_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c.is_ascii() && c >= ' ' {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("\\x{b:02x}"));
            }
        }
    }
    out.push('"');
    out
}

/// The layer of [`Limits`].
#[derive(Debug, Clone)]
pub struct LimitsLayer {
    request_timeout: Duration,
}

impl LimitsLayer {
    /// `request_timeout`: the server's `--request-timeout`.
    pub fn new(request_timeout: Duration) -> Self {
        Self { request_timeout }
    }
}

impl<S> tower::Layer<S> for LimitsLayer {
    type Service = Limits<S>;
    fn layer(&self, inner: S) -> Limits<S> {
        Limits {
            inner,
            request_timeout: self.request_timeout,
        }
    }
}

/// Bounds the body and the time of each request (see the module docs).
#[derive(Debug, Clone)]
pub struct Limits<S> {
    inner: S,
    request_timeout: Duration,
}

type Answer = Result<Response<Body>, Infallible>;

fn on_elapsed(r: Result<Answer, tokio::time::error::Elapsed>) -> Answer {
    r.unwrap_or_else(|_| Ok(timeout_response()))
}

/// The future of [`Limits`]: an answer given at once, the inner future untimed (a
/// long-running request), or timed.
pub type LimitsFuture<F> = Either<
    Ready<Answer>,
    Either<
        F,
        Map<tokio::time::Timeout<F>, fn(Result<Answer, tokio::time::error::Elapsed>) -> Answer>,
    >,
>;

impl<S> tower::Service<Request<Payload>> for Limits<S>
where
    S: tower::Service<Request<Payload>, Response = Response<Body>, Error = Infallible>,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = LimitsFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Payload>) -> Self::Future {
        let has_body = matches!(
            *req.method(),
            Method::POST | Method::PUT | Method::PATCH | Method::DELETE
        );
        if has_body
            && req
                .headers()
                .get(header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<usize>().ok())
                .is_some_and(|n| n > MAX_BODY)
        {
            return Either::Left(ready(Ok(too_large())));
        }
        let req = req.map(|p| match p {
            Payload::Incoming(b) => Payload::Limited(http_body_util::Limited::new(b, MAX_BODY)),
            other => other,
        });
        let timeout = match req.extensions().get::<RequestInfo>() {
            Some(info) if long_running(info) => None,
            _ => match request_timeout(req.extensions().get::<Query>(), self.request_timeout) {
                Ok(t) => Some(t),
                Err(msg) => {
                    return Either::Left(ready(Ok(error_response(&ApiError::bad_request(msg)))));
                }
            },
        };
        let fut = self.inner.call(req);
        match timeout {
            None => Either::Right(Either::Left(fut)),
            Some(t) => Either::Right(Either::Right(
                tokio::time::timeout(t, fut).map(on_elapsed as fn(_) -> _),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filters::testing::{read, request};
    use tower::{Layer, ServiceExt};

    #[test]
    fn go_durations() {
        let s = 1_000_000_000i64;
        for (text, want) in [
            ("0", 0),
            ("-0", 0),
            ("5s", 5 * s),
            ("1m0s", 60 * s),
            ("1.5h", 5400 * s),
            ("2h45m", 9900 * s),
            ("300ms", 300_000_000),
            ("-1.5s", -1_500_000_000),
            ("+10us", 10_000),
            ("10µs", 10_000),
            ("1ns", 1),
            (".5s", 500_000_000),
            ("5.s", 5 * s),
            ("9223372036854775807ns", i64::MAX),
            ("-9223372036854775808ns", i64::MIN),
        ] {
            assert_eq!(parse_go_duration(text), Ok(want), "{text}");
        }
        for (text, err) in [
            ("", "time: invalid duration \"\""),
            ("-", "time: invalid duration \"-\""),
            ("abc", "time: invalid duration \"abc\""),
            (".s", "time: invalid duration \".s\""),
            ("5", "time: missing unit in duration \"5\""),
            ("1.5", "time: missing unit in duration \"1.5\""),
            ("1d", "time: unknown unit \"d\" in duration \"1d\""),
            (
                "9223372036854775808ns",
                "time: invalid duration \"9223372036854775808ns\"",
            ),
            ("3000000h", "time: invalid duration \"3000000h\""),
            (
                "1\"x",
                "time: unknown unit \"\\\"x\" in duration \"1\\\"x\"",
            ),
            (
                "1é",
                "time: unknown unit \"\\xc3\\xa9\" in duration \"1\\xc3\\xa9\"",
            ),
        ] {
            assert_eq!(parse_go_duration(text), Err(err.to_string()), "{text}");
        }
    }

    #[test]
    fn request_timeouts() {
        let max = Duration::from_secs(60);
        let q = |s: &str| Query::parse(Some(s));
        assert_eq!(request_timeout(None, max), Ok(max));
        assert_eq!(request_timeout(Some(&q("timeout=")), max), Ok(max));
        assert_eq!(
            request_timeout(Some(&q("timeout=5s")), max),
            Ok(Duration::from_secs(5))
        );
        // Zero (no timeout of the client's), negative and too long: the server's.
        for t in ["0", "0s", "-5s", "2m", "60s"] {
            assert_eq!(
                request_timeout(Some(&q(&format!("timeout={t}"))), max),
                Ok(max),
                "{t}"
            );
        }
        assert_eq!(
            request_timeout(Some(&q("timeout=5")), max),
            Err("invalid timeout specified in the request URL - time: missing unit in duration \"5\"".into())
        );
    }

    #[test]
    fn long_running_requests() {
        let info = |verb: &str, sub: &str, resource: bool, path: &str| RequestInfo {
            verb: verb.into(),
            subresource: sub.into(),
            is_resource_request: resource,
            path: path.into(),
            ..Default::default()
        };
        for (i, want) in [
            (info("watch", "", true, ""), true),
            (info("proxy", "", true, ""), true),
            (info("get", "log", true, ""), true),
            (info("create", "exec", true, ""), true),
            (info("get", "portforward", true, ""), true),
            (info("list", "", true, ""), false),
            (info("get", "status", true, ""), false),
            (info("get", "", false, "/debug/pprof/profile"), true),
            (info("get", "", false, "/log"), false),
        ] {
            assert_eq!(long_running(&i), want, "{i:?}");
        }
    }

    /// An inner service that takes `delay` to answer 200.
    fn slow(
        delay: Duration,
    ) -> impl tower::Service<
        Request<Payload>,
        Response = Response<Body>,
        Error = Infallible,
        Future = impl Future<Output = Answer> + Send,
    > + Clone {
        tower::service_fn(move |_req: Request<Payload>| async move {
            tokio::time::sleep(delay).await;
            Ok::<_, Infallible>(crate::http::text_response(StatusCode::OK, "done"))
        })
    }

    fn with_info(mut req: Request<Payload>, verb: &str) -> Request<Payload> {
        let query = Query::parse(req.uri().query());
        req.extensions_mut().insert(RequestInfo {
            verb: verb.into(),
            is_resource_request: true,
            ..Default::default()
        });
        req.extensions_mut().insert(query);
        req
    }

    #[tokio::test]
    async fn a_slow_request_is_upstreams_504_and_a_watch_is_not_timed() {
        let svc =
            LimitsLayer::new(Duration::from_millis(50)).layer(slow(Duration::from_millis(300)));
        let resp = svc
            .clone()
            .oneshot(with_info(request("GET", "/apis/g/v1/x"), "list"))
            .await
            .unwrap();
        assert_eq!(resp.headers()["content-type"], "text/plain; charset=utf-8");
        assert_eq!(
            read(resp).await,
            (StatusCode::GATEWAY_TIMEOUT, TIMEOUT_BODY.into())
        );
        let resp = svc
            .oneshot(with_info(request("GET", "/apis/g/v1/x?watch=1"), "watch"))
            .await
            .unwrap();
        assert_eq!(read(resp).await, (StatusCode::OK, "done".into()));
    }

    #[tokio::test]
    async fn the_clients_timeout_parameter_shortens_the_servers() {
        let svc = LimitsLayer::new(Duration::from_secs(60)).layer(slow(Duration::from_millis(300)));
        let resp = svc
            .clone()
            .oneshot(with_info(
                request("GET", "/apis/g/v1/x?timeout=50ms"),
                "list",
            ))
            .await
            .unwrap();
        assert_eq!(read(resp).await.0, StatusCode::GATEWAY_TIMEOUT);
        let resp = svc
            .clone()
            .oneshot(with_info(request("GET", "/apis/g/v1/x?timeout=1s"), "list"))
            .await
            .unwrap();
        assert_eq!(read(resp).await, (StatusCode::OK, "done".into()));
        let resp = svc
            .oneshot(with_info(
                request("GET", "/apis/g/v1/x?timeout=abc"),
                "list",
            ))
            .await
            .unwrap();
        let (code, text) = read(resp).await;
        assert_eq!(code, StatusCode::BAD_REQUEST);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            v["message"],
            "invalid timeout specified in the request URL - time: invalid duration \"abc\""
        );
        assert_eq!(v["reason"], "BadRequest");
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_upstreams_413() {
        let svc = LimitsLayer::new(REQUEST_TIMEOUT).layer(slow(Duration::ZERO));
        let mut req = with_info(request("POST", "/apis/g/v1/x"), "create");
        req.headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from(MAX_BODY + 1));
        let (code, text) = read(svc.clone().oneshot(req).await.unwrap()).await;
        assert_eq!(code, StatusCode::PAYLOAD_TOO_LARGE);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["message"], "Request entity too large: limit is 3145728");
        assert_eq!(v["reason"], "RequestEntityTooLarge");
        // At the limit, and a GET's Content-Length (its body is never read), pass.
        let mut req = with_info(request("POST", "/apis/g/v1/x"), "create");
        req.headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from(MAX_BODY));
        assert_eq!(
            read(svc.clone().oneshot(req).await.unwrap()).await.0,
            StatusCode::OK
        );
        let mut req = with_info(request("GET", "/apis/g/v1/x"), "list");
        req.headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from(MAX_BODY + 1));
        assert_eq!(
            read(svc.oneshot(req).await.unwrap()).await.0,
            StatusCode::OK
        );
    }
}
