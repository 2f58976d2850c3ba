//! Per-request call metadata: tenant, user and W3C `traceparent` on every gRPC call.
//!
//! Where it sits: the gateway decides (tenant, user) once per HTTP request and runs the
//! request's handler inside [`CallContext::scope`]; every gRPC call the handler makes through
//! [`crate::Channel`] then carries the context as metadata ([`CallContext::apply`]). A service
//! that itself calls other services (the registry) runs its handlers under [`ScopeLayer`], so
//! the incoming metadata flows on to its own calls. Servers read the metadata with
//! [`CallContext::from_metadata`].
//!
//! Why a task-local rather than an argument: the context must reach about fifty call sites
//! spread over the gateway's handlers (and the registry's), each building its own protobuf
//! request; a task-local set once at the edge reaches all of them without touching any, the
//! way Go's `context.Context` carries request-scoped values through client-go and gRPC-Go
//! (`metadata.NewOutgoingContext`). The price is that work moved to another task does not
//! inherit it: the gateway's coalescing batchers (one GetMany/CreateMany/AdmitMany for many
//! requests) and the shared watch streams serve several requests at once and carry no
//! tenant or user — their messages name the tenant of each item themselves; a batch carries
//! only the trace context of one sampled request in it ([`CallContext::current_sampled_trace`]).
//!
//! Metadata keys: `crdplane-tenant`, `crdplane-user` (empty until authentication lands),
//! `traceparent` and `tracestate` (the W3C Trace Context headers, as OpenTelemetry's gRPC
//! propagators name them; `tracestate` is passed on unchanged, only beside a `traceparent`).

use http::HeaderValue;
use http::header::HeaderName;

/// Metadata key of the tenant a call acts for.
pub const TENANT: HeaderName = HeaderName::from_static("crdplane-tenant");
/// Metadata key of the authenticated user a call acts for (empty: not authenticated).
pub const USER: HeaderName = HeaderName::from_static("crdplane-user");
/// Metadata key of the W3C trace context (`traceparent`).
pub const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
/// Metadata key of the W3C vendor trace state (`tracestate`).
pub const TRACESTATE: HeaderName = HeaderName::from_static("tracestate");

/// The longest `tracestate` passed on: W3C Trace Context §3.3.1.5 asks propagators to keep
/// at least 512 characters; a longer one (which a vendor may cut entry by entry) is dropped
/// whole here.
pub const MAX_TRACESTATE: usize = 512;

tokio::task_local! {
    static CURRENT: CallContext;
}

/// What every gRPC call made on behalf of one request carries. Values are kept as
/// ready-made header values, so stamping a call clones reference-counted bytes and
/// allocates nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallContext {
    tenant: Option<HeaderValue>,
    user: Option<HeaderValue>,
    traceparent: Option<HeaderValue>,
    tracestate: Option<HeaderValue>,
}

impl CallContext {
    /// The context of one request: its tenant, its user (`""` until authentication lands) and
    /// the request's `traceparent` header, if it had a valid one. A tenant or user that
    /// cannot be a header value (never the case for a DNS-1123 tenant) is left out.
    pub fn new(tenant: &str, user: &str, traceparent: Option<&HeaderValue>) -> Self {
        Self {
            tenant: HeaderValue::from_str(tenant).ok(),
            user: HeaderValue::from_str(user).ok(),
            traceparent: traceparent
                .filter(|v| valid_traceparent(v.as_bytes()))
                .cloned(),
            tracestate: None,
        }
    }

    /// This context with the request's `tracestate` header, kept only beside a
    /// `traceparent` and when no longer than [`MAX_TRACESTATE`].
    pub fn with_tracestate(mut self, tracestate: Option<&HeaderValue>) -> Self {
        self.tracestate = tracestate
            .filter(|v| self.traceparent.is_some() && v.len() <= MAX_TRACESTATE)
            .cloned();
        self
    }

    /// The trace context alone (no tenant, no user) of the current context when its trace
    /// is sampled (flags bit 0 set; see [`crate::telemetry`]), while trace export is on:
    /// what a call made for several requests at once (a coalesced batch) carries when one
    /// of them is traced.
    pub fn current_sampled_trace() -> Option<CallContext> {
        if !crate::telemetry::enabled() {
            return None;
        }
        CURRENT
            .try_with(|c| {
                let tp = c.traceparent.as_ref()?;
                crate::telemetry::is_sampled(tp.as_bytes()).then(|| CallContext {
                    tenant: None,
                    user: None,
                    traceparent: Some(tp.clone()),
                    tracestate: c.tracestate.clone(),
                })
            })
            .ok()
            .flatten()
    }

    /// The context carried by an incoming call's headers.
    pub fn from_headers(h: &http::HeaderMap) -> Self {
        Self {
            tenant: h.get(TENANT).cloned(),
            user: h.get(USER).cloned(),
            traceparent: h.get(TRACEPARENT).cloned(),
            tracestate: h.get(TRACESTATE).cloned(),
        }
    }

    /// The context carried by an incoming call (`request.metadata()` in a tonic handler).
    pub fn from_metadata(m: &tonic::metadata::MetadataMap) -> Self {
        let get = |k: &str| {
            m.get(k)
                .and_then(|v| HeaderValue::from_bytes(v.as_bytes()).ok())
        };
        Self {
            tenant: get(TENANT.as_str()),
            user: get(USER.as_str()),
            traceparent: get(TRACEPARENT.as_str()),
            tracestate: get(TRACESTATE.as_str()),
        }
    }

    /// The tenant, if the call carried one.
    pub fn tenant(&self) -> Option<&str> {
        self.tenant.as_ref().and_then(|v| v.to_str().ok())
    }

    /// The user, if the call carried one (`Some("")`: not authenticated).
    pub fn user(&self) -> Option<&str> {
        self.user.as_ref().and_then(|v| v.to_str().ok())
    }

    /// The W3C `traceparent`, if the call carried one.
    pub fn traceparent(&self) -> Option<&str> {
        self.traceparent.as_ref().and_then(|v| v.to_str().ok())
    }

    /// The W3C `tracestate`, if the call carried one.
    pub fn tracestate(&self) -> Option<&str> {
        self.tracestate.as_ref().and_then(|v| v.to_str().ok())
    }

    /// Runs `f` with this context as the current one: every call made through
    /// [`crate::Channel`] within it (on this task) carries the context.
    ///
    /// Not an `async fn`: that would add a level that moves `f` once more, and the request
    /// futures passed here are kilobytes large.
    pub fn scope<F: Future>(self, f: F) -> tokio::task::futures::TaskLocalFuture<CallContext, F> {
        CURRENT.scope(self, f)
    }

    /// The current context, if the running task is inside [`CallContext::scope`].
    pub fn current() -> Option<CallContext> {
        CURRENT.try_with(Clone::clone).ok()
    }

    /// Stamps the current context (if any) on an outgoing call's headers; keys the caller
    /// already set are kept.
    pub fn apply_current(headers: &mut http::HeaderMap) {
        let _ = CURRENT.try_with(|c| c.apply(headers));
    }

    /// Stamps this context on an outgoing call's headers; keys already set are kept.
    pub fn apply(&self, headers: &mut http::HeaderMap) {
        for (k, v) in [
            (TENANT, &self.tenant),
            (USER, &self.user),
            (TRACEPARENT, &self.traceparent),
            (TRACESTATE, &self.tracestate),
        ] {
            if let Some(v) = v
                && let http::header::Entry::Vacant(e) = headers.entry(k)
            {
                e.insert(v.clone());
            }
        }
    }
}

/// A W3C `traceparent` of version 00 (`00-<32 hex trace id>-<16 hex parent id>-<2 hex
/// flags>`, ids not all zero), or of a later version with at least those fields (Trace
/// Context §3.2.4: parse the known prefix of a higher version). Lowercase hex only.
pub fn valid_traceparent(v: &[u8]) -> bool {
    let hex = |s: &[u8]| {
        s.iter()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
    };
    let zero = |s: &[u8]| s.iter().all(|&c| c == b'0');
    if v.len() < 55 || v[2] != b'-' || v[35] != b'-' || v[52] != b'-' {
        return false;
    }
    let (version, trace, parent, flags) = (&v[0..2], &v[3..35], &v[36..52], &v[53..55]);
    if !hex(version) || version == b"ff" || !hex(trace) || !hex(parent) || !hex(flags) {
        return false;
    }
    if zero(trace) || zero(parent) {
        return false;
    }
    match version {
        b"00" => v.len() == 55,
        _ => v.len() == 55 || v[55] == b'-',
    }
}

/// A tower layer for a gRPC server whose handlers call other services: each request's
/// handler runs inside [`CallContext::scope`] with the context the request carried, so the
/// handler's own calls pass it on.
#[derive(Debug, Clone, Copy, Default)]
pub struct ScopeLayer;

impl<S> tower::Layer<S> for ScopeLayer {
    type Service = Scoped<S>;
    fn layer(&self, inner: S) -> Scoped<S> {
        Scoped { inner }
    }
}

/// The service of [`ScopeLayer`].
#[derive(Debug, Clone)]
pub struct Scoped<S> {
    inner: S,
}

impl<S> Scoped<S> {
    /// `inner`, each request's handler run in the request's context (see [`ScopeLayer`]).
    pub fn new(inner: S) -> Self {
        Self { inner }
    }
}

impl<S, B> tower::Service<http::Request<B>> for Scoped<S>
where
    S: tower::Service<http::Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = std::pin::Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let ctx = CallContext::from_headers(req.headers());
        let fut = self.inner.call(req);
        Box::pin(CURRENT.scope(ctx, fut))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparents() {
        let ok = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let cases: &[(&str, bool)] = &[
            (ok, true),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
                true,
            ),
            // Higher versions may append fields after a dash.
            (
                "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xyz",
                true,
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xyz",
                false,
            ),
            (
                "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                false,
            ),
            (
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                false,
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                false,
            ),
            (
                "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
                false,
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
                false,
            ),
            ("", false),
        ];
        for (v, want) in cases {
            assert_eq!(valid_traceparent(v.as_bytes()), *want, "{v}");
        }
    }

    #[test]
    fn a_tracestate_rides_only_beside_a_traceparent_and_within_its_bound() {
        let tp =
            HeaderValue::from_static("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        let ts = HeaderValue::from_static("congo=t61rcWkgMzE");
        let c = CallContext::new("acme", "", Some(&tp)).with_tracestate(Some(&ts));
        let mut h = http::HeaderMap::new();
        c.apply(&mut h);
        assert_eq!(h[TRACESTATE], ts);
        assert_eq!(
            CallContext::from_headers(&h).tracestate(),
            Some("congo=t61rcWkgMzE")
        );
        // No traceparent: no tracestate either (W3C §3.3: it is meaningless alone).
        let c = CallContext::new("acme", "", None).with_tracestate(Some(&ts));
        assert_eq!(c.tracestate(), None);
        // Longer than the bound: dropped whole.
        let long = HeaderValue::from_str(&format!("a={}", "x".repeat(MAX_TRACESTATE))).unwrap();
        let c = CallContext::new("acme", "", Some(&tp)).with_tracestate(Some(&long));
        assert_eq!(c.tracestate(), None);
    }

    #[test]
    fn apply_keeps_what_the_caller_set_and_skips_what_is_unknown() {
        let tp =
            HeaderValue::from_static("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        let c = CallContext::new("acme", "", Some(&tp));
        let mut h = http::HeaderMap::new();
        h.insert(USER, HeaderValue::from_static("alice"));
        c.apply(&mut h);
        assert_eq!(h[TENANT], "acme");
        assert_eq!(h[USER], "alice");
        assert_eq!(h[TRACEPARENT], tp);
        let back = CallContext::from_headers(&h);
        assert_eq!(back.tenant(), Some("acme"));
        assert_eq!(back.user(), Some("alice"));

        let bad = HeaderValue::from_static("not-a-trace");
        let c = CallContext::new("acme", "", Some(&bad));
        let mut h = http::HeaderMap::new();
        c.apply(&mut h);
        assert!(h.get(TRACEPARENT).is_none());
        assert_eq!(h[USER], "");
    }

    #[tokio::test]
    async fn scope_sets_the_current_context() {
        assert_eq!(CallContext::current(), None);
        let c = CallContext::new("t1", "u", None);
        let seen = c.clone().scope(async { CallContext::current() }).await;
        assert_eq!(seen, Some(c));
    }
}
