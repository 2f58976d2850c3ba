//! The service shared by the two edge layers that decide on a tenant's RBAC policy
//! ([`tenant_access`](super::tenant_access) and [`authorization`](super::authorization)):
//! a [`Gate`] says whether a request passes, from the cached policy when it can (then the
//! inner future is returned as it is, no allocation), else after reading the tenant's
//! policy (`crate::policy`), which costs one boxed future. A refusal is upstream's 403
//! for the request (`crate::authz::forbidden`) with the gate's reason.

use crate::authz::{attributes, forbidden};
use crate::context::Ctx;
use crate::filters::authentication::User;
use crate::http::{Body, Payload, error_response};
use crate::request_info::RequestInfo;
use crdplane_auth::rbac::Policy;
use crdplane_auth::user::UserInfo;
use futures::future::{BoxFuture, Either, Ready, ready};
use http::{Request, Response};
use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

/// One decision on a request: pass, or refuse with a reason ("" for none).
pub type Verdict = Result<(), String>;

/// What a gated layer decides.
pub trait Gate: Clone + Send + Sync + 'static {
    /// The verdict when it needs no storage read (None: the tenant's policy is needed).
    fn cached(&self, ctx: &Ctx, user: &UserInfo, info: &RequestInfo) -> Option<Verdict>;
    /// The verdict from the tenant's policy.
    fn decide(&self, policy: &Policy, user: &UserInfo, info: &RequestInfo) -> Verdict;
    /// Whether the verdict is the authorization decision an audit event records.
    fn audited(&self) -> bool {
        false
    }
    /// Why a request passed, as the audit event's `authorization.k8s.io/reason` says it
    /// (upstream's authorizer reason; "" where upstream gives none). `policy` is the
    /// tenant's policy when it was just read. Asked only for requests being audited.
    fn explain_allow(
        &self,
        _ctx: &Ctx,
        _policy: Option<&Policy>,
        _user: &UserInfo,
        _info: &RequestInfo,
    ) -> String {
        String::new()
    }
}

/// Records `v` as the authorization decision of `req` when `gate` is the authorizer.
fn record<G: Gate>(
    gate: &G,
    ctx: &Ctx,
    policy: Option<&Policy>,
    user: &UserInfo,
    info: &RequestInfo,
    req: &Request<Payload>,
    v: &Verdict,
) {
    if gate.audited() && crate::filters::audit::is_audited(req) {
        match v {
            Ok(()) => {
                let why = gate.explain_allow(ctx, policy, user, info);
                crate::filters::audit::record_decision(req, true, &why)
            }
            Err(reason) => crate::filters::audit::record_decision(req, false, reason),
        }
    }
}

/// The user of a request that reached the layers after authentication without one.
fn anonymous() -> User {
    static ANON: std::sync::OnceLock<User> = std::sync::OnceLock::new();
    ANON.get_or_init(|| Arc::new(UserInfo::anonymous())).clone()
}

fn refuse(user: &UserInfo, info: &RequestInfo, reason: &str) -> Response<Body> {
    error_response(&forbidden(&user.name, &attributes(info), reason))
}

/// A layer of [`Gated`] with gate `G`.
#[derive(Clone)]
pub struct GateLayer<G> {
    ctx: Option<Arc<Ctx>>,
    gate: G,
}

impl<G> GateLayer<G> {
    /// Decides with `gate` on the authorizer of `ctx` (None: every request passes, for
    /// stacks without a gateway behind them).
    pub fn new(ctx: Option<Arc<Ctx>>, gate: G) -> Self {
        Self { ctx, gate }
    }
}

impl<S, G: Clone> tower::Layer<S> for GateLayer<G> {
    type Service = Gated<S, G>;
    fn layer(&self, inner: S) -> Gated<S, G> {
        Gated {
            inner,
            ctx: self.ctx.clone(),
            gate: self.gate.clone(),
        }
    }
}

/// Passes the requests its gate lets through (see the module docs).
#[derive(Clone)]
pub struct Gated<S, G> {
    inner: S,
    ctx: Option<Arc<Ctx>>,
    gate: G,
}

type Answer<F> = Either<
    Either<F, Ready<Result<Response<Body>, Infallible>>>,
    BoxFuture<'static, Result<Response<Body>, Infallible>>,
>;

impl<S, G> tower::Service<Request<Payload>> for Gated<S, G>
where
    S: tower::Service<Request<Payload>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    G: Gate,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Answer<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Payload>) -> Self::Future {
        let (Some(ctx), Some(info)) = (&self.ctx, crate::filters::request_info::of(&req)) else {
            return Either::Left(Either::Left(self.inner.call(req)));
        };
        let user = req
            .extensions()
            .get::<User>()
            .cloned()
            .unwrap_or_else(anonymous);
        let cached = self.gate.cached(ctx, &user, info);
        if let Some(v) = &cached {
            record(&self.gate, ctx, None, &user, info, &req, v);
        }
        match cached {
            Some(Ok(())) => Either::Left(Either::Left(self.inner.call(req))),
            Some(Err(reason)) => {
                Either::Left(Either::Right(ready(Ok(refuse(&user, info, &reason)))))
            }
            None => {
                // The tenant's policy must be read first: take the service that is ready
                // and leave a clone in its place (tower's rule for calls after an await).
                let clone = self.inner.clone();
                let mut inner = std::mem::replace(&mut self.inner, clone);
                let (ctx, gate, info) = (ctx.clone(), self.gate.clone(), info.clone());
                Either::Right(Box::pin(async move {
                    match crate::policy::policy(&ctx, &info.tenant).await {
                        Ok(p) => {
                            let v = gate.decide(&p, &user, &info);
                            record(&gate, &ctx, Some(&p), &user, &info, &req, &v);
                            match v {
                                Ok(()) => inner.call(req).await,
                                Err(reason) => Ok(refuse(&user, &info, &reason)),
                            }
                        }
                        Err(e) => Ok(error_response(&e)),
                    }
                }))
            }
        }
    }
}
