//! Auditing: seventh layer of the edge stack (`stack.rs`), right after authentication and
//! before impersonation, where upstream's `WithAudit`
//! (staging/src/k8s.io/apiserver/pkg/endpoints/filters/audit.go) sits, so the event records
//! the authenticated user and the impersonation layer adds whom it impersonates.
//!
//! The request's audit id is decided by the outermost layer ([`crate::filters::audit_id`],
//! upstream's `WithAuditInit`), which puts it on every answer; it is the event's `auditID`,
//! so a client's error report leads to its audit lines. This layer sets the same header on
//! the responses that pass it, so it also stands alone (its unit tests).
//!
//! With `--audit-policy-file` and a backend, the policy
//! (`crdplane_apiserver::audit::policy`) decides once per request; at level `None` nothing
//! more happens. Otherwise one event is built and written at each stage the rule keeps:
//! - `RequestReceived` before the request goes on;
//! - for a watch answered 2xx, `ResponseStarted` when its head is ready and
//!   `ResponseComplete` when its stream ends (the client went, or the watch timed out);
//! - for every other request `ResponseComplete`, with the bounded fields of an error
//!   Status (`responseStatus`: status, message, reason, details, code);
//! - `Panic` when the handler panicked (then the panic goes on to the panic layer).
//!
//! A create, update or patch body is read here (it is read once anyway), so that the
//! event's `objectRef` gets the name, namespace, uid and resourceVersion the body names, as
//! upstream's `LogRequestObject` does; at level `Request` and up the body (JSON, YAML or the
//! protobuf of a built-in type, recorded as JSON) is the `requestObject`, and at
//! `RequestResponse` the JSON response is the `responseObject`. Secrets and service-account
//! tokens are never recorded above `Metadata`, whatever the policy says. The event's
//! annotations name the tenant (`crdplane.io/tenant`), the trace id of a sampled trace
//! (`crdplane.io/trace-id`) and, once the authorization layer
//! decided, upstream's `authorization.k8s.io/decision` and `…/reason`.
//!
//! Failed authentications never reach this layer; the authentication layer records them
//! through [`failed_authentication`] (upstream `WithFailedAuthenticationAudit`).
//!
//! The authenticated user is the authentication layer's `Arc<UserInfo>` extension.

use crate::audit::Auditor;
use crate::filters::trace::RequestSpan;
use crate::http::{Body, Payload};
use crate::request_info::RequestInfo;
use bytes::Bytes;
use crdplane_apiserver::audit::event::{
    DECISION_ANNOTATION, Event, ObjectReference, REASON_ANNOTATION, ResponseStatus,
    TENANT_ANNOTATION, strip_managed_fields,
};
use crdplane_apiserver::audit::policy::{Attributes, Decision, Level, Stage};
use crdplane_auth::user::UserInfo;
use futures::FutureExt;
use futures::future::{BoxFuture, Either};
use http::{HeaderValue, Request, Response};
use http_body_util::BodyExt;
use serde_json::Value;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};

/// The annotation with the request's trace id, when its trace is sampled (see
/// `crate::filters::trace`).
pub const TRACE_ANNOTATION: &str = "crdplane.io/trace-id";

pub use crate::filters::audit_id::AUDIT_ID_HEADER;

/// What the layers after this one add to the event of an audited request.
#[derive(Debug, Default)]
pub struct Recorded {
    /// Whom the request impersonates (the impersonation layer).
    pub impersonated: Option<UserInfo>,
    /// The authorization decision and reason (the authorization layer).
    pub decision: Option<(bool, String)>,
}

/// The handle on [`Recorded`] in an audited request's extensions.
pub type Slot = Arc<Mutex<Recorded>>;

/// Records whom `req` impersonates, when it is audited.
pub fn record_impersonation<B>(req: &Request<B>, user: &UserInfo) {
    if let Some(s) = req.extensions().get::<Slot>() {
        s.lock().expect("audit slot").impersonated = Some(user.clone());
    }
}

/// Whether `req` is being audited (an event at a level above `None` is open for it).
pub fn is_audited<B>(req: &Request<B>) -> bool {
    req.extensions().get::<Slot>().is_some()
}

/// Records the authorization decision on `req`, when it is audited.
pub fn record_decision<B>(req: &Request<B>, allowed: bool, reason: &str) {
    if let Some(s) = req.extensions().get::<Slot>() {
        s.lock().expect("audit slot").decision = Some((allowed, reason.to_string()));
    }
}

/// The layer of [`Audit`].
#[derive(Clone, Default)]
pub struct AuditLayer {
    auditor: Option<Arc<Auditor>>,
}

impl AuditLayer {
    /// Audits into `auditor` (None: only the `Audit-Id` header).
    pub fn new(auditor: Option<Arc<Auditor>>) -> Self {
        Self { auditor }
    }
}

impl<S> tower::Layer<S> for AuditLayer {
    type Service = Audit<S>;
    fn layer(&self, inner: S) -> Audit<S> {
        Audit {
            inner,
            auditor: self.auditor.clone(),
        }
    }
}

/// Audits every request (see the module docs).
#[derive(Clone)]
pub struct Audit<S> {
    inner: S,
    auditor: Option<Arc<Auditor>>,
}

/// The request's audit id, as the outer audit-id layer decided it (see
/// [`crate::filters::audit_id`]); the client's or a new one where that layer did not run.
fn audit_id<B>(req: &Request<B>) -> HeaderValue {
    crate::filters::audit_id::of(req)
}

/// The target of the one debug line per request (`RUST_LOG=crdplane_gateway::request=debug`).
pub const REQUEST_LOG: &str = "crdplane_gateway::request";

/// What the request's debug line says, taken only while that line is enabled.
pub struct RequestLog {
    method: http::Method,
    uri: http::Uri,
    user: Option<Arc<UserInfo>>,
    /// The request's trace id, when its trace is sampled.
    trace_id: Option<String>,
    start: std::time::Instant,
}

impl RequestLog {
    fn of<B>(req: &Request<B>) -> Option<Box<Self>> {
        tracing::enabled!(target: REQUEST_LOG, tracing::Level::DEBUG).then(|| {
            Box::new(RequestLog {
                method: req.method().clone(),
                uri: req.uri().clone(),
                user: req.extensions().get::<Arc<UserInfo>>().cloned(),
                trace_id: req
                    .extensions()
                    .get::<RequestSpan>()
                    .and_then(RequestSpan::sampled_trace_id)
                    .map(str::to_string),
                start: std::time::Instant::now(),
            })
        })
    }

    /// The line, once the response head is ready.
    fn write(&self, id: &HeaderValue, code: http::StatusCode) {
        tracing::debug!(
            target: REQUEST_LOG,
            audit_id = id.to_str().unwrap_or_default(),
            verb = %self.method,
            uri = self.uri.path_and_query().map_or(self.uri.path(), |p| p.as_str()),
            user = self.user.as_ref().map_or("", |u| u.name.as_str()),
            trace_id = self.trace_id.as_deref(),
            code = code.as_u16(),
            latency_us = self.start.elapsed().as_micros() as u64,
            "request"
        );
    }
}

pin_project_lite::pin_project! {
    /// The inner future, whose response gets the `Audit-Id` header (and, while enabled,
    /// the request's debug line).
    pub struct WithAuditId<F> {
        #[pin]
        inner: F,
        id: Option<HeaderValue>,
        log: Option<Box<RequestLog>>,
    }
}

impl<F> Future for WithAuditId<F>
where
    F: Future<Output = Result<Response<Body>, Infallible>>,
{
    type Output = F::Output;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let Ok(mut resp) = ready!(this.inner.poll(cx));
        if let Some(id) = this.id.take() {
            if let Some(l) = this.log.take() {
                l.write(&id, resp.status());
            }
            resp.headers_mut().insert(AUDIT_ID_HEADER, id);
        }
        Poll::Ready(Ok(resp))
    }
}

/// The policy's view of a request.
fn attributes<'a>(info: &'a RequestInfo, user: Option<&'a UserInfo>) -> Attributes<'a> {
    Attributes {
        user: user.map(|u| u.name.as_str()),
        groups: user.map_or(&[][..], |u| &u.groups[..]),
        verb: &info.verb,
        resource_request: info.is_resource_request,
        group: &info.api_group,
        resource: &info.resource,
        subresource: &info.subresource,
        namespace: &info.namespace,
        name: &info.name,
        path: &info.path,
    }
}

/// Resources whose bodies are never recorded (they hold credentials).
fn holds_credentials(info: &RequestInfo) -> bool {
    info.is_resource_request
        && info.api_group.is_empty()
        && (info.resource == "secrets"
            || (info.resource == "serviceaccounts" && info.subresource == "token"))
}

fn audit_user(u: &UserInfo) -> crdplane_apiserver::audit::event::User {
    crdplane_apiserver::audit::event::User {
        username: u.name.clone(),
        uid: u.uid.clone(),
        groups: u.groups.clone(),
        extra: u.extra.clone(),
    }
}

/// upstream `utilnet.SourceIPs`: the `X-Forwarded-For` addresses, `X-Real-Ip`, then the
/// peer, each once.
fn source_ips<B>(req: &Request<B>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |s: &str| {
        let s = s.trim();
        if s.parse::<std::net::IpAddr>().is_ok() && !out.iter().any(|o| o == s) {
            out.push(s.to_string());
        }
    };
    if let Some(xff) = req
        .headers()
        .get("x-forwarded-for")
        .and_then(|v| v.to_str().ok())
    {
        xff.split(',').for_each(&mut push);
    }
    if let Some(r) = req.headers().get("x-real-ip").and_then(|v| v.to_str().ok()) {
        push(r);
    }
    if let Some(crate::watch_limit::ClientKey::Address(a)) =
        req.extensions().get::<crate::watch_limit::ClientKey>()
    {
        push(&a.to_string());
    }
    out
}

/// A new event for `req` at `level`, before it is handled.
fn event<B>(req: &Request<B>, info: &RequestInfo, level: Level, id: &HeaderValue) -> Event {
    let mut ev = Event::new(
        level,
        id.to_str().unwrap_or_default().to_string(),
        req.uri()
            .path_and_query()
            .map_or_else(|| req.uri().path().to_string(), |p| p.as_str().to_string()),
        info.verb.clone(),
    );
    if let Some(u) = req.extensions().get::<Arc<UserInfo>>() {
        ev.user = audit_user(u);
    }
    ev.source_ips = source_ips(req);
    ev.user_agent = req
        .headers()
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    if info.is_resource_request {
        ev.object_ref = Some(ObjectReference {
            resource: info.resource.clone(),
            namespace: info.namespace.clone(),
            name: info.name.clone(),
            api_group: info.api_group.clone(),
            api_version: info.api_version.clone(),
            subresource: info.subresource.clone(),
            ..Default::default()
        });
    }
    ev.annotations
        .insert(TENANT_ANNOTATION.into(), info.tenant.clone());
    if let Some(t) = req
        .extensions()
        .get::<RequestSpan>()
        .and_then(RequestSpan::sampled_trace_id)
    {
        ev.annotations
            .insert(TRACE_ANNOTATION.into(), t.to_string());
    }
    ev
}

/// The request body as JSON: JSON, YAML, or the protobuf of a built-in type.
fn body_json(info: &RequestInfo, content_type: Option<&str>, body: &[u8]) -> Option<Value> {
    if body.is_empty() {
        return None;
    }
    if crate::stores::builtin::protobuf::is_protobuf(content_type) {
        let r = crdplane_core::builtin::lookup(&info.api_group, &info.api_version, &info.resource)?;
        return crate::stores::builtin::protobuf::decode(r.kind, body)?.ok();
    }
    let mime = crate::http::media_type(content_type.unwrap_or("application/json"));
    match mime.as_str() {
        "application/yaml" | "application/x-yaml" | "text/yaml" => {
            crate::request::decode_yaml(std::str::from_utf8(body).ok()?)
                .ok()
                .map(|(v, _)| v)
        }
        _ => serde_json::from_slice(body).ok(),
    }
}

/// upstream `LogRequestObject`: the object's place and version complete the `objectRef`.
fn complete_object_ref(ev: &mut Event, obj: &Value) {
    let (Some(r), Some(m)) = (ev.object_ref.as_mut(), obj.get("metadata")) else {
        return;
    };
    let field = |k: &str| m.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    for (slot, k) in [
        (&mut r.namespace, "namespace"),
        (&mut r.name, "name"),
        (&mut r.uid, "uid"),
        (&mut r.resource_version, "resourceVersion"),
    ] {
        if slot.is_empty() {
            *slot = field(k);
        }
    }
}

impl<S> tower::Service<Request<Payload>> for Audit<S>
where
    S: tower::Service<Request<Payload>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future =
        Either<WithAuditId<S::Future>, BoxFuture<'static, Result<Response<Body>, Infallible>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Payload>) -> Self::Future {
        if let Some(span) = req.extensions().get::<RequestSpan>() {
            let id = audit_id(&req);
            span.annotate(|s| s.set("audit-id", id.to_str().unwrap_or_default().to_string()));
        }
        let decided = match (&self.auditor, crate::filters::request_info::of(&req)) {
            (Some(a), Some(info)) => {
                let user = req.extensions().get::<Arc<UserInfo>>().map(|u| &**u);
                let mut d = a.decide(&attributes(info, user));
                if d.level > Level::Metadata && holds_credentials(info) {
                    d.level = Level::Metadata;
                }
                (d.level != Level::None).then(|| (a.clone(), d, info.clone()))
            }
            _ => None,
        };
        let Some((auditor, decision, info)) = decided else {
            // The response gets its `Audit-Id` header from the outermost layer
            // (`audit_id.rs`); here the id is only the debug line's, when it is on.
            let log = RequestLog::of(&req);
            let id = log.is_some().then(|| audit_id(&req));
            return Either::Left(WithAuditId {
                inner: self.inner.call(req),
                id,
                log,
            });
        };
        let id = audit_id(&req);
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let log = RequestLog::of(&req);
        Either::Right(Box::pin(async move {
            let lid = log.is_some().then(|| id.clone());
            let out = audited(inner, req, auditor, decision, info, id).await;
            if let (Some(l), Some(id), Ok(r)) = (log, lid, &out) {
                l.write(&id, r.status());
            }
            out
        }))
    }
}

/// The answer to a request to log the event of (see the module docs).
async fn audited<S>(
    mut inner: S,
    mut req: Request<Payload>,
    auditor: Arc<Auditor>,
    d: Decision,
    info: RequestInfo,
    id: HeaderValue,
) -> Result<Response<Body>, Infallible>
where
    S: tower::Service<Request<Payload>, Response = Response<Body>, Error = Infallible>,
{
    let omit = |s: Stage| d.omit_stages.contains(s);
    let mut ev = event(&req, &info, d.level, &id);
    let slot = Slot::default();
    req.extensions_mut().insert(slot.clone());
    if !omit(Stage::RequestReceived) && !auditor.emit(&ev).await {
        // A blocking-strict backend could not store the event: the request fails before
        // anything is done (upstream `WithAudit`, `responsewriters.InternalError`).
        return Ok(with_id(store_failed(req.uri()), id));
    }
    if info.is_resource_request && matches!(info.verb.as_str(), "create" | "update" | "patch") {
        let (parts, payload) = req.into_parts();
        let bytes = match payload {
            Payload::Read(b) => Ok(b),
            Payload::Incoming(b) => crate::http::read_body(b, &parts.headers).await,
            Payload::Limited(b) => crate::http::read_body(b, &parts.headers).await,
        };
        let bytes = match bytes {
            Ok(b) => b,
            Err(e) => {
                let resp = crate::http::error_response(&e);
                ev.set_response(
                    resp.status().as_u16(),
                    serde_json::from_slice::<Value>(&e.to_json()).ok().as_ref(),
                );
                ev.enter(Stage::ResponseComplete);
                if !omit(Stage::ResponseComplete) {
                    auditor.emit(&ev).await;
                }
                return Ok(with_id(resp, id));
            }
        };
        let ct = parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        if let Some(mut obj) = body_json(&info, ct, &bytes) {
            // A patch is no object: upstream logs the patch as it came.
            if info.verb != "patch" {
                complete_object_ref(&mut ev, &obj);
            }
            if d.level >= Level::Request {
                if d.omit_managed_fields {
                    strip_managed_fields(&mut obj);
                }
                ev.request_object = Some(obj);
            }
        }
        req = Request::from_parts(parts, Payload::Read(bytes));
    }
    let outcome = std::panic::AssertUnwindSafe(inner.call(req))
        .catch_unwind()
        .await;
    let resp = match outcome {
        Ok(Ok(r)) => r,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            ev.enter(Stage::Panic);
            ev.response_status = Some(ResponseStatus::new(
                500,
                Some(format!("APIServer panic'd: {what}")),
                Some("InternalError"),
            ));
            if !omit(Stage::Panic) {
                auditor.emit(&ev).await;
            }
            std::panic::resume_unwind(panic);
        }
    };
    {
        let r = slot.lock().expect("audit slot");
        if let Some(u) = &r.impersonated {
            ev.impersonated_user = Some(audit_user(u));
        }
        if let Some((allowed, reason)) = &r.decision {
            ev.annotations.insert(
                DECISION_ANNOTATION.into(),
                if *allowed { "allow" } else { "forbid" }.into(),
            );
            ev.annotations
                .insert(REASON_ANNOTATION.into(), reason.clone());
        }
    }
    let code = resp.status();
    if info.verb == "watch" && code.is_success() {
        ev.set_response(code.as_u16(), None);
        if !omit(Stage::ResponseStarted) {
            ev.enter(Stage::ResponseStarted);
            auditor.emit(&ev).await;
        }
        let resp = if omit(Stage::ResponseComplete) {
            resp
        } else {
            resp.map(|b| {
                CompleteOnEnd {
                    inner: b,
                    done: Some((auditor, ev)),
                }
                .boxed_unsync()
            })
        };
        return Ok(with_id(resp, id));
    }
    let keep_body = d.level == Level::RequestResponse || !code.is_success();
    let resp = if keep_body {
        let (parts, body) = resp.into_parts();
        let bytes = body
            .collect()
            .await
            .map(|c| c.to_bytes())
            .unwrap_or_default();
        let json = parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
        let value: Option<Value> = if json {
            serde_json::from_slice(&bytes).ok()
        } else {
            // Upstream's request timeout answers a Status without a Content-Type.
            serde_json::from_slice(&bytes)
                .ok()
                .filter(|v: &Value| v.get("status").is_some())
        };
        ev.set_response(code.as_u16(), value.as_ref());
        if d.level == Level::RequestResponse
            && code.is_success()
            && let Some(mut v) = value
        {
            if d.omit_managed_fields {
                strip_managed_fields(&mut v);
            }
            ev.response_object = Some(v);
        }
        Response::from_parts(parts, crate::http::full(bytes))
    } else {
        ev.set_response(code.as_u16(), None);
        resp
    };
    if !omit(Stage::ResponseComplete) {
        ev.enter(Stage::ResponseComplete);
        auditor.emit(&ev).await;
    }
    Ok(with_id(resp, id))
}

/// Upstream's `responsewriters.InternalError` for an event a `blocking-strict` backend could
/// not store: Go's `http.Error` with `Internal Server Error: "<request URI>": failed to store
/// audit event` (the URI quoted as Go's `%q` does, `&`, `<`, `>` escaped as HTML).
fn store_failed(uri: &http::Uri) -> Response<Body> {
    let raw = uri.path_and_query().map_or(uri.path(), |p| p.as_str());
    let quoted = format!("{raw:?}")
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    let mut r = crate::http::text_response_owned(
        http::StatusCode::INTERNAL_SERVER_ERROR,
        format!("Internal Server Error: {quoted}: failed to store audit event\n"),
    );
    r.headers_mut().insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    r
}

fn with_id(mut resp: Response<Body>, id: HeaderValue) -> Response<Body> {
    resp.headers_mut().insert(AUDIT_ID_HEADER, id);
    resp
}

/// A watch's body that records `ResponseComplete` when it ends or is dropped (the client
/// went).
struct CompleteOnEnd {
    inner: Body,
    done: Option<(Arc<Auditor>, Event)>,
}

impl CompleteOnEnd {
    fn complete(&mut self) {
        if let Some((a, mut ev)) = self.done.take() {
            ev.enter(Stage::ResponseComplete);
            a.emit_now(&ev);
        }
    }
}

impl Drop for CompleteOnEnd {
    fn drop(&mut self) {
        self.complete();
    }
}

impl http_body::Body for CompleteOnEnd {
    type Data = Bytes;
    type Error = std::io::Error;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, std::io::Error>>> {
        let r = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(None) = r {
            self.complete();
        }
        r
    }
    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }
    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Records a request the authentication layer refused (upstream
/// `WithFailedAuthenticationAudit`): one `ResponseStarted` event, no user, the 401 and
/// which credentials were tried.
pub fn failed_authentication<B>(auditor: &Auditor, req: &Request<B>, tried: String) {
    let Some(info) = crate::filters::request_info::of(req) else {
        return;
    };
    let d = auditor.decide(&attributes(info, None));
    if d.level == Level::None || d.omit_stages.contains(Stage::ResponseStarted) {
        return;
    }
    let id = audit_id(req);
    let mut ev = event(req, info, d.level, &id);
    ev.user = Default::default();
    ev.response_status = Some(ResponseStatus::new(401, Some(tried), None));
    ev.enter(Stage::ResponseStarted);
    auditor.emit_now(&ev);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filters::testing::{echo, read, request};
    use tower::{Layer, ServiceExt};

    #[tokio::test]
    async fn every_response_carries_an_audit_id() {
        // The header is the outermost layer's (`audit_id.rs`); an unaudited request does
        // not pay for it twice.
        let alone = AuditLayer::new(None).layer(echo(|_| "ok".into()));
        let resp = alone.oneshot(request("GET", "/api")).await.unwrap();
        assert!(resp.headers().get(AUDIT_ID_HEADER).is_none());
        let svc = crate::filters::audit_id::AuditIdLayer
            .layer(AuditLayer::new(None).layer(echo(|_| "ok".into())));
        let resp = svc.clone().oneshot(request("GET", "/api")).await.unwrap();
        let id = resp.headers()[AUDIT_ID_HEADER]
            .to_str()
            .unwrap()
            .to_string();
        assert_eq!(id.len(), 36, "{id}");
        assert!(uuid::Uuid::parse_str(&id).is_ok());
        // The client's own id is kept; an unusable one is replaced.
        let mut req = request("GET", "/api");
        req.headers_mut()
            .insert(AUDIT_ID_HEADER, HeaderValue::from_static("my-request-1"));
        let resp = svc.clone().oneshot(req).await.unwrap();
        assert_eq!(resp.headers()[AUDIT_ID_HEADER], "my-request-1");
        let mut req = request("GET", "/api");
        req.headers_mut().insert(
            AUDIT_ID_HEADER,
            HeaderValue::from_str(&"x".repeat(65)).unwrap(),
        );
        let resp = svc.oneshot(req).await.unwrap();
        assert_eq!(resp.headers()[AUDIT_ID_HEADER].len(), 36);
        assert_eq!(read(resp).await.1, "ok");
    }

    #[test]
    fn source_addresses() {
        let mut req = request("GET", "/api");
        req.headers_mut().insert(
            "x-forwarded-for",
            HeaderValue::from_static("10.0.0.1, not-an-ip, 10.0.0.2"),
        );
        req.headers_mut()
            .insert("x-real-ip", HeaderValue::from_static("10.0.0.2"));
        req.extensions_mut()
            .insert(crate::watch_limit::ClientKey::Address(
                "127.0.0.1".parse().unwrap(),
            ));
        assert_eq!(source_ips(&req), ["10.0.0.1", "10.0.0.2", "127.0.0.1"]);
    }

    #[test]
    fn a_create_body_names_the_object() {
        let info =
            crate::request_info::parse("POST", "/api/v1/namespaces/a/configmaps", false, "t")
                .unwrap();
        let req = request("POST", "/api/v1/namespaces/a/configmaps");
        let mut ev = event(
            &req,
            &info,
            Level::Metadata,
            &HeaderValue::from_static("id"),
        );
        let body = body_json(
            &info,
            Some("application/yaml"),
            b"metadata:\n  name: c\n  uid: u1\n",
        )
        .unwrap();
        complete_object_ref(&mut ev, &body);
        let r = ev.object_ref.unwrap();
        assert_eq!(
            (
                r.namespace.as_str(),
                r.name.as_str(),
                r.uid.as_str(),
                r.api_version.as_str()
            ),
            ("a", "c", "u1", "v1")
        );
        assert_eq!(ev.annotations[TENANT_ANNOTATION], "t");
        assert!(holds_credentials(
            &crate::request_info::parse("GET", "/api/v1/namespaces/a/secrets", false, "t").unwrap()
        ));
        assert!(!holds_credentials(&info));
    }

    /// A writer into a shared buffer, for a test subscriber.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// An auditor logging everything at Metadata into a file that cannot be written
    /// (`/dev/full`: every write fails with ENOSPC), in `mode`.
    fn failing_auditor(mode: crate::audit::Mode) -> Arc<Auditor> {
        let policy = crdplane_apiserver::audit::policy::Policy::parse(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n",
        )
        .unwrap();
        Arc::new(
            Auditor::start(crate::audit::Settings {
                policy,
                log: Some(crate::audit::log::Settings::from_flags(
                    "/dev/full",
                    0,
                    0,
                    0,
                )),
                log_mode: mode,
                webhook: None,
                webhook_mode: crate::audit::Mode::Batch,
            })
            .unwrap(),
        )
    }

    #[tokio::test]
    async fn blocking_strict_fails_a_request_whose_event_cannot_be_stored() {
        let path = "/api/v1/namespaces/a/configmaps?labelSelector=a%3Db&x=y";
        let req = || {
            let mut r = request("GET", path);
            r.extensions_mut().insert(
                crate::request_info::parse("GET", "/api/v1/namespaces/a/configmaps", false, "t")
                    .unwrap(),
            );
            r
        };
        let strict = AuditLayer::new(Some(failing_auditor(crate::audit::Mode::BlockingStrict)))
            .layer(echo(|_| "handled".into()));
        let resp = strict.oneshot(req()).await.unwrap();
        assert_eq!(resp.status(), http::StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(resp.headers()["x-content-type-options"], "nosniff");
        assert!(resp.headers().contains_key(AUDIT_ID_HEADER));
        let (_, body) = read(resp).await;
        assert_eq!(
            body,
            "Internal Server Error: \"/api/v1/namespaces/a/configmaps?labelSelector=a%3Db&amp;x=y\": failed to store audit event\n"
        );
        // Plain blocking ignores the error (it is logged and counted): the request goes on.
        let lenient = AuditLayer::new(Some(failing_auditor(crate::audit::Mode::Blocking)))
            .layer(echo(|_| "handled".into()));
        let resp = lenient.oneshot(req()).await.unwrap();
        assert_eq!(resp.status(), http::StatusCode::OK);
        assert_eq!(read(resp).await.1, "handled");
    }

    #[test]
    fn mode_flags() {
        use crate::audit::Mode;
        assert_eq!(Mode::parse("blocking-strict"), Ok(Mode::BlockingStrict));
        assert_eq!(Mode::parse("batch"), Ok(Mode::Batch));
        assert_eq!(
            Mode::parse("sync").unwrap_err(),
            "invalid audit mode sync, allowed modes are \"batch,blocking,blocking-strict\""
        );
    }

    #[test]
    fn one_debug_line_per_request_names_its_audit_id() {
        let out = Captured::default();
        let w = out.clone();
        let sub = tracing_subscriber::fmt()
            .json()
            .flatten_event(true)
            .with_writer(move || w.clone())
            .with_env_filter(tracing_subscriber::EnvFilter::new(format!(
                "{REQUEST_LOG}=debug"
            )))
            .finish();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let resp = tracing::subscriber::with_default(sub, || {
            rt.block_on(async {
                let svc = AuditLayer::new(None).layer(echo(|_| "ok".into()));
                // HTTP/2 requests carry the absolute form; the line has the path and query.
                let mut req = request(
                    "DELETE",
                    "https://127.0.0.1:6443/api/v1/namespaces/a?dryRun=All",
                );
                req.extensions_mut().insert(Arc::new(UserInfo {
                    name: "jane".into(),
                    ..Default::default()
                }));
                svc.oneshot(req).await.unwrap()
            })
        });
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 1, "{text}");
        let l = &lines[0];
        assert_eq!(
            l["audit_id"],
            resp.headers()[AUDIT_ID_HEADER].to_str().unwrap()
        );
        assert_eq!(l["verb"], "DELETE");
        assert_eq!(l["uri"], "/api/v1/namespaces/a?dryRun=All");
        assert_eq!(l["user"], "jane");
        assert_eq!(l["code"], 200);
        assert_eq!(l["level"], "DEBUG");
    }
}
