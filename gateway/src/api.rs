//! The router: the innermost service of the edge stack (`stack.rs`). Every request reaches
//! it through the layers of [`crate::filters`] and goes on to discovery ([`crate::discovery`])
//! or a resource handler family ([`crate::namespaces`], [`crate::builtin`], [`crate::crds`],
//! [`crate::crs`]). It is the top of the handler modules and the only one that knows every
//! family; the context it hands them ([`crate::context`]) knows none. Follows
//! apiextensions-apiserver's `crdHandler` (customresource_handler.go `ServeHTTP`) for the
//! choice between a custom resource and the not-found handler.

use crate::context::{Ctx, Req};
use crate::crd::CrdInfo;
use crate::http::{Body, Payload, Query, error_response, read_body};
use crate::request_info::RequestInfo;
use crate::watch_limit::ClientKey;
use bytes::Bytes;
use crdplane_core::ApiError;
use http::{Method, Request, Response};
use http_body_util::BodyExt;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

/// The router: the innermost service of the edge stack (`stack.rs`), after the
/// authorization seam. It takes what the request-info layer parsed from the request
/// extensions, bounds concurrent watches and dispatches to the resource handlers; an
/// [`ApiError`] becomes its Status response here.
#[derive(Clone)]
pub struct Router {
    ctx: Arc<Ctx>,
}

impl Router {
    /// The router over the gateway state `ctx`.
    pub fn new(ctx: Arc<Ctx>) -> Self {
        Self { ctx }
    }
}

impl tower::Service<Request<Payload>> for Router {
    type Response = Response<Body>;
    type Error = Infallible;
    /// Boxed: the handlers' futures are large and unnameable.
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Payload>) -> Self::Future {
        let ctx = self.ctx.clone();
        Box::pin(async move {
            Ok(match route(ctx, req).await {
                Ok(r) => r,
                Err(e) => error_response(&e),
            })
        })
    }
}

async fn route(ctx: Arc<Ctx>, req: Request<Payload>) -> Result<Response<Body>, ApiError> {
    let (mut parts, body) = req.into_parts();
    // Put there by the request-info layer; without it the chain is wrong, a 500 as
    // upstream's filters answer then (request_deadline.go: "no RequestInfo found in
    // context, handler chain must be wrong").
    let info = parts
        .extensions
        .remove::<RequestInfo>()
        .ok_or_else(|| ApiError::internal("no RequestInfo found in the context"))?;
    let query = parts
        .extensions
        .remove::<Query>()
        .unwrap_or_else(|| Query::parse(parts.uri.query()));
    // Watches are bounded per client and in total; the slot lives in the response body
    // and comes back when the watch ends, however it ends.
    let user = parts
        .extensions
        .get::<crate::filters::authentication::User>()
        .cloned();
    let slot = if info.verb == "watch" {
        // An authenticated user's watches count for that user (in this tenant) wherever
        // they connect from; anonymous ones for their address.
        let client = match &user {
            Some(u) if !u.is_anonymous() => ClientKey::User(info.tenant.clone(), u.name.clone()),
            _ => parts
                .extensions
                .remove::<ClientKey>()
                .unwrap_or(ClientKey::Address(std::net::Ipv4Addr::UNSPECIFIED.into())),
        };
        match ctx.watches.acquire(client) {
            Ok(s) => Some(s),
            Err(why) => {
                tracing::debug!(?why, open = ctx.watches.open(), "watch refused");
                return Ok(crate::http::too_many_requests());
            }
        }
    } else {
        None
    };
    let call = call_context(&parts, &info, user.as_deref());
    // The handlers' future (kilobytes) is built once, in its box: this function's future,
    // which the router boxes for every request, stays small, and nothing moves it again.
    let handle = Box::pin(dispatch(ctx, parts, body, query, info));
    let resp = call.scope(handle).await?;
    Ok(match slot {
        Some(slot) => resp.map(|b| crate::watch_limit::Held::new(b, slot).boxed_unsync()),
        None => resp,
    })
}

/// What every gRPC call made for this request carries: its tenant, its authenticated user
/// (`""` when no authentication layer ran) and its W3C `traceparent` and `tracestate` (see
/// `crdplane_transport::context`).
fn call_context(
    parts: &http::request::Parts,
    info: &RequestInfo,
    user: Option<&crdplane_auth::user::UserInfo>,
) -> crdplane_transport::CallContext {
    let span = parts.extensions.get::<crate::filters::trace::RequestSpan>();
    if let Some(span) = span {
        span.annotate(|s| {
            s.set("tenant", info.tenant.clone());
            s.set("verb", info.verb.clone());
            if info.is_resource_request {
                s.set("group", info.api_group.clone());
                s.set("version", info.api_version.clone());
                s.set("resource", info.resource.clone());
                if !info.subresource.is_empty() {
                    s.set("subresource", info.subresource.clone());
                }
                if !info.namespace.is_empty() {
                    s.set("namespace", info.namespace.clone());
                }
            }
        });
    }
    crdplane_transport::CallContext::new(
        &info.tenant,
        user.map_or("", |u| u.name.as_str()),
        match span {
            Some(s) => Some(s.traceparent()),
            None => parts.headers.get(crdplane_transport::context::TRACEPARENT),
        },
    )
    .with_tracestate(parts.headers.get(crdplane_transport::context::TRACESTATE))
}

/// Reads the body and runs the handler of a parsed request.
async fn dispatch(
    ctx: Arc<Ctx>,
    parts: http::request::Parts,
    body: Payload,
    query: Query,
    info: RequestInfo,
) -> Result<Response<Body>, ApiError> {
    let has_body = matches!(
        parts.method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    );
    let body = if has_body {
        match body {
            Payload::Incoming(b) => Box::pin(read_body(b, &parts.headers)).await?,
            Payload::Limited(b) => Box::pin(read_body(b, &parts.headers)).await?,
            Payload::Read(b) => b,
        }
    } else {
        Bytes::new()
    };
    let req = Req {
        info,
        method: parts.method,
        query,
        headers: parts.headers,
        body,
        body_dups: Default::default(),
        user: parts
            .extensions
            .get::<crate::filters::authentication::User>()
            .cloned(),
    };
    if !req.info.is_resource_request {
        return Box::pin(crate::discovery::serve(&ctx, &req)).await;
    }
    // Once per tenant and process (boxed: the common case awaits nothing).
    if !ctx.tenants.read().expect("lock").contains(&req.info.tenant) {
        Box::pin(crate::lifecycle::ensure_tenant(&ctx, &req.info.tenant)).await?;
    }
    // YAML output: the handler answers JSON, rendered as YAML afterwards.
    if req.info.verb != "watch" && crate::yaml::negotiate(req.header(http::header::ACCEPT)) {
        let mut req = req;
        req.headers.insert(
            http::header::ACCEPT,
            http::HeaderValue::from_static("application/json"),
        );
        let answer = Box::pin(resource(&ctx, &req)).await;
        return Box::pin(crate::yaml::respond(answer)).await;
    }
    // Metadata-only output: the handler answers plain JSON, transformed afterwards.
    if let Some(p) = crate::partial::negotiate(req.header(http::header::ACCEPT)) {
        let mut req = req;
        req.headers.insert(
            http::header::ACCEPT,
            http::HeaderValue::from_static("application/json"),
        );
        let resp = Box::pin(resource(&ctx, &req)).await?;
        let watch = req.info.verb == "watch";
        return Box::pin(crate::partial::respond(resp, p, &req.info.api_group, watch)).await;
    }
    resource(&ctx, &req).await
}

/// Dispatches a resource request to its handler.
async fn resource(ctx: &Arc<Ctx>, req: &Req) -> Result<Response<Body>, ApiError> {
    let i = &req.info;
    match (
        i.api_prefix.as_str(),
        i.api_group.as_str(),
        i.api_version.as_str(),
        i.resource.as_str(),
    ) {
        // Families' futures are boxed each (see `crs::serve`): the request's future stays
        // small and only the family taken is allocated.
        ("api", "", "v1", "namespaces") => Box::pin(crate::namespaces::serve(ctx, req)).await,
        ("apis", crate::stores::tenants::GROUP, crate::stores::tenants::VERSION, "tenants")
            if i.tenant == crate::stores::tenants::ADMIN_SCOPE =>
        {
            Box::pin(crate::tenants::serve(ctx, req)).await
        }
        ("api" | "apis", g, v, r) if crdplane_core::builtin::lookup(g, v, r).is_some() => {
            let b = crdplane_core::builtin::lookup(g, v, r).expect("just found");
            Box::pin(crate::builtin::serve(ctx, req, b)).await
        }
        ("apis", "authentication.k8s.io", v @ ("v1" | "v1beta1"), "selfsubjectreviews") => {
            crate::reviews::serve_self_subject_review(req, v)
        }
        ("apis", crate::access_reviews::GROUP, "v1", r) if crate::access_reviews::serves(r) => {
            Box::pin(crate::access_reviews::serve(ctx, req)).await
        }
        ("api", "", "v1", r) if empty_core_kind(r).is_some() => empty_core(req),
        ("api", _, _, _) => Err(ApiError::path_not_found()),
        ("apis", "apiextensions.k8s.io", "v1", "customresourcedefinitions") => {
            Box::pin(crate::crds::serve(ctx, req)).await
        }
        ("apis", "apiextensions.k8s.io", _, _) => Err(ApiError::path_not_found()),
        ("apis", group, _, resource) => {
            let crd = match ctx.resolve(&i.tenant, group, resource).await {
                Ok(crd) => crd,
                Err(e) if e.code == 404 => return Ok(crate::http::page_not_found()),
                Err(e) => return Err(e),
            };
            if let Some(r) = crd_handler_delegates(&crd, i) {
                return r;
            }
            crate::crs::serve(ctx, req, crd).await
        }
        _ => Ok(crate::http::not_found_for(&req.info.path)),
    }
}

/// The requests apiextensions-apiserver's crdHandler does not serve for a CRD that exists
/// (customresource_handler.go `ServeHTTP`): a version it does not serve and a scope that
/// does not match (namespaced CRDs answer list and watch across namespaces) go to the
/// not-found handler (plain `404 page not found`); an unknown subresource is a NotFound
/// Status naming the resource and object.
fn crd_handler_delegates(
    crd: &CrdInfo,
    i: &RequestInfo,
) -> Option<Result<Response<Body>, ApiError>> {
    let Some(ver) = crd.version(&i.api_version) else {
        return Some(Ok(crate::http::page_not_found()));
    };
    let namespaced_req = !i.namespace.is_empty();
    if (!crd.namespaced && namespaced_req)
        || (crd.namespaced && !namespaced_req && !matches!(i.verb.as_str(), "list" | "watch"))
    {
        return Some(Ok(crate::http::page_not_found()));
    }
    match i.subresource.as_str() {
        "" => None,
        "status" if ver.has_status => None,
        "scale" if ver.scale.is_some() => None,
        _ => Some(Err(ApiError::not_found(
            &crdplane_core::GroupResource::new(i.api_group.clone(), i.resource.clone()),
            &i.name,
        ))),
    }
}

/// The core resources of category `all` (`pods`, `replicationcontrollers`, `services`):
/// (resource, kind). This server runs no workloads, so it serves them as a cluster with
/// none would — empty lists, NotFound on get — which is what `kubectl get all` needs to
/// behave as upstream when no custom resource is in the category (kubectl expands `all`
/// from discovery and fails with `the server doesn't have a resource type "all"` when
/// nothing declares it). Read-only: discovery advertises only get and list.
pub const EMPTY_CORE: [(&str, &str); 3] = [
    ("pods", "Pod"),
    ("replicationcontrollers", "ReplicationController"),
    ("services", "Service"),
];

/// The kind of `resource` when it is one of [`EMPTY_CORE`].
pub fn empty_core_kind(resource: &str) -> Option<&'static str> {
    EMPTY_CORE
        .iter()
        .find(|(r, _)| *r == resource)
        .map(|(_, k)| *k)
}

fn empty_core(req: &Req) -> Result<Response<Body>, ApiError> {
    let i = &req.info;
    let kind = empty_core_kind(&i.resource).ok_or_else(ApiError::path_not_found)?;
    let gr = crdplane_core::GroupResource::new("", i.resource.clone());
    if !i.subresource.is_empty() {
        return Err(ApiError::path_not_found());
    }
    match i.verb.as_str() {
        "get" => Err(ApiError::not_found(&gr, &i.name)),
        "list" => {
            let body = match crate::http::negotiate_output(req.header(http::header::ACCEPT))? {
                crate::http::Output::Json => serde_json::json!({
                    "kind": format!("{kind}List"), "apiVersion": "v1",
                    "metadata": {"resourceVersion": "0"}, "items": []
                }),
                crate::http::Output::Table(v) => serde_json::json!({
                    "kind": "Table", "apiVersion": crate::respond::table_api_version(v),
                    "metadata": {"resourceVersion": "0"},
                    "columnDefinitions": [
                        {"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace.", "priority": 0},
                        {"name": "Age", "type": "date", "format": "", "description": "CreationTimestamp is a timestamp representing the server time when this object was created.", "priority": 0}
                    ],
                    "rows": []
                }),
            };
            Ok(crate::http::json_response(
                http::StatusCode::OK,
                serde_json::to_vec(&body).expect("json"),
            ))
        }
        verb => Err(ApiError::method_not_supported(&gr, verb)),
    }
}

#[cfg(test)]
mod tests {
    /// The router boxes each request's future, which moves it whole into the heap: its size
    /// is paid on every request (it was 16 KB, about 5 % of a GET's gateway CPU in profiles).
    /// The families' and verbs' futures are boxed on their own so this one stays small.
    #[tokio::test]
    async fn request_futures_stay_small() {
        let ctx = super::Ctx::new(crate::context::Config::default()).unwrap();
        let req = http::Request::new(crate::http::Payload::Read(bytes::Bytes::new()));
        let route = super::route(ctx.clone(), req);
        let (parts, body) =
            http::Request::new(crate::http::Payload::Read(bytes::Bytes::new())).into_parts();
        let info = crate::request_info::RequestInfo::default();
        let dispatch = super::dispatch(ctx, parts, body, crate::http::Query::parse(None), info);
        let (r, d) = (
            std::mem::size_of_val(&route),
            std::mem::size_of_val(&dispatch),
        );
        assert!(
            r <= 8 * 1024 && d <= 3 * 1024,
            "route {r} bytes, dispatch {d} bytes"
        );
    }
}
