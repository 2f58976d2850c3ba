//! Call deadlines: the gRPC `grpc-timeout` header (gRPC over HTTP/2, "Requests":
//! `Timeout → "grpc-timeout" TimeoutValue TimeoutUnit`, at most eight digits, units
//! `H M S m u n`).
//!
//! Where it sits: [`crate::Channel`] puts a deadline on every call that is not long-running
//! (watch streams are, like kube-apiserver's `LongRunningRequestCheck` exempts watches from
//! its request timeout) and enforces it on the client side; the server sees the header
//! ([`from_headers`]). The default is kube-apiserver's request timeout (`--request-timeout`,
//! 60 s, `apiserver/pkg/server/config.go`), so a call never outlives the request it serves.
//! An expired deadline is `DEADLINE_EXCEEDED`, which the gateway's error table renders as
//! 504 Timeout.

use std::time::Duration;

use http::HeaderValue;
use http::header::HeaderName;

/// The gRPC deadline header.
pub const GRPC_TIMEOUT: HeaderName = HeaderName::from_static("grpc-timeout");

/// Default deadline of a call: kube-apiserver's default request timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The `--grpc-timeout` flag of the binaries that call services: seconds, 0 = no deadline.
pub fn from_flag(v: f64) -> Result<Option<Duration>, String> {
    Duration::try_from_secs_f64(v)
        .map(|d| Some(d).filter(|d| !d.is_zero()))
        .map_err(|_| format!("--grpc-timeout: {v} is not a number of seconds"))
}

/// Methods exempt from the deadline: server-streaming watches (and the health watch).
pub const LONG_RUNNING: &[&str] = &[
    "/crdplane.v1.Storage/Watch",
    "/crdplane.v1.Storage/Changes",
    "/grpc.health.v1.Health/Watch",
];

/// `d` as a `grpc-timeout` value: the finest unit whose value fits in eight digits.
pub fn encode(d: Duration) -> HeaderValue {
    const MAX: u128 = 99_999_999;
    let nanos = d.as_nanos();
    let (v, unit) = [
        (1u128, 'n'),
        (1_000, 'u'),
        (1_000_000, 'm'),
        (1_000_000_000, 'S'),
        (60_000_000_000, 'M'),
        (3_600_000_000_000, 'H'),
    ]
    .into_iter()
    // Round up: a deadline must not end before the one asked for.
    .map(|(per, u)| (nanos.div_ceil(per), u))
    .find(|(v, _)| *v <= MAX)
    .unwrap_or((MAX, 'H'));
    HeaderValue::from_str(&format!("{v}{unit}")).expect("digits and a unit letter")
}

/// A `grpc-timeout` value as a duration (None when malformed).
pub fn parse(v: &[u8]) -> Option<Duration> {
    let (&unit, digits) = v.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

/// The deadline an incoming call carries (a server's accessor), if any.
pub fn from_headers(h: &http::HeaderMap) -> Option<Duration> {
    h.get(GRPC_TIMEOUT).and_then(|v| parse(v.as_bytes()))
}

/// The deadline an incoming call carries, from a tonic handler's `request.metadata()`.
pub fn from_metadata(m: &tonic::metadata::MetadataMap) -> Option<Duration> {
    m.get(GRPC_TIMEOUT.as_str())
        .and_then(|v| parse(v.as_bytes()))
}

/// The server side of deadlines: a tower service that runs the inner service's response
/// future under the call's `grpc-timeout` (none: no limit). Only the response future is
/// bounded, so a server-streaming call's stream, once returned, is not.
#[derive(Clone)]
pub struct Enforce<S>(pub S);

impl<S, B> tower::Service<http::Request<B>> for Enforce<S>
where
    S: tower::Service<
            http::Request<B>,
            Response = http::Response<tonic::body::Body>,
            Error = std::convert::Infallible,
        >,
    S::Future: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>,
    >;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let deadline = from_headers(req.headers());
        let fut = self.0.call(req);
        Box::pin(async move {
            let Some(d) = deadline else {
                return fut.await;
            };
            match tokio::time::timeout(d, fut).await {
                Ok(r) => r,
                Err(_) => Ok(tonic::Status::deadline_exceeded("Timeout expired").into_http()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_in_the_finest_unit_that_fits() {
        let cases = [
            (Duration::from_secs(60), "60000000u"),
            (Duration::from_millis(250), "250000u"),
            (Duration::from_millis(100), "100000u"),
            (Duration::from_millis(99), "99000000n"),
            (Duration::from_secs(100), "100000m"),
            (Duration::from_secs(1_000_000), "1000000S"),
            (Duration::from_secs(200_000_000), "3333334M"),
            (Duration::from_nanos(1), "1n"),
            (Duration::ZERO, "0n"),
        ];
        for (d, want) in cases {
            assert_eq!(encode(d), want, "{d:?}");
            assert!(parse(encode(d).as_bytes()).unwrap() >= d, "{d:?}");
        }
    }

    #[test]
    fn parses_every_unit_and_rejects_malformed_values() {
        let cases: &[(&str, Option<Duration>)] = &[
            ("1H", Some(Duration::from_secs(3600))),
            ("2M", Some(Duration::from_secs(120))),
            ("3S", Some(Duration::from_secs(3))),
            ("4m", Some(Duration::from_millis(4))),
            ("5u", Some(Duration::from_micros(5))),
            ("6n", Some(Duration::from_nanos(6))),
            ("99999999S", Some(Duration::from_secs(99_999_999))),
            ("123456789S", None),
            ("S", None),
            ("10", None),
            ("10s", None),
            ("-1S", None),
            ("", None),
        ];
        for (v, want) in cases {
            assert_eq!(parse(v.as_bytes()), *want, "{v}");
        }
    }

    #[tokio::test]
    async fn the_server_ends_a_call_at_its_deadline() {
        use tower::{Service, ServiceExt};
        let slow = tower::service_fn(|_req: http::Request<()>| async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            Ok::<_, std::convert::Infallible>(http::Response::new(tonic::body::Body::empty()))
        });
        let mut svc = Enforce(slow);
        let mut req = http::Request::new(());
        req.headers_mut()
            .insert(GRPC_TIMEOUT, encode(Duration::from_millis(50)));
        let resp = svc.ready().await.unwrap().call(req).await.unwrap();
        let status = tonic::Status::from_header_map(resp.headers()).expect("a gRPC status");
        assert_eq!(status.code(), tonic::Code::DeadlineExceeded);
        // Without a deadline the call runs to its end.
        let resp = svc
            .ready()
            .await
            .unwrap()
            .call(http::Request::new(()))
            .await
            .unwrap();
        assert!(tonic::Status::from_header_map(resp.headers()).is_none());
    }
}
