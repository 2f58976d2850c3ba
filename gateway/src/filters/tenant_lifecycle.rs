//! Tenant lifecycle: eighth layer of the edge stack (`stack.rs`), after impersonation (it
//! needs the final identity) and before tenant access. A request reaches a tenant only
//! while the tenant's Tenant exists and is Active (DESIGN.md, "Identity and tenancy";
//! crdplane's own filter, upstream has no tenants):
//!
//! - **unknown tenant**: a platform admin (`system:masters`), or anyone when authorization
//!   is AlwaysAllow, gets 404 `tenants.crdplane.io "x" not found`; anyone else gets the
//!   403 the tenant-access layer gives identities a tenant never granted anything, so the
//!   answer does not tell them which tenants exist. Nothing is written either way.
//! - **Terminating tenant** (its Tenant was deleted; its objects are being purged): 403
//!   `tenants.crdplane.io "x" is forbidden: the tenant is being terminated` for identities
//!   that may use it (the reason withheld from others, as above).
//! - the admin scope (`/clusters/root`) always exists; the `--default-tenant` (and, with
//!   `--tenant-creation=on-first-use`, any tenant) is created on its first request.
//!
//! The process-level paths (`/healthz`, `/livez`, `/readyz`, `/version`) belong to no
//! tenant and pass. The phase comes from `crate::tenants::phase`: a map lookup for a known
//! tenant, one storage read otherwise.

use crate::context::Ctx;
use crate::filters::authentication::User;
use crate::http::{Body, Payload, error_response};
use crate::request_info::RequestInfo;
use crate::tenant_directory::Phase;
use crdplane_auth::user::UserInfo;
use futures::future::{BoxFuture, Either};
use http::{Request, Response};
use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

/// The layer of [`TenantLifecycle`].
#[derive(Clone)]
pub struct TenantLifecycleLayer {
    ctx: Option<Arc<Ctx>>,
}

impl TenantLifecycleLayer {
    /// Checks tenants with the gateway `ctx` (None: every request passes, for stacks
    /// without a gateway behind them).
    pub fn checking(ctx: Option<Arc<Ctx>>) -> Self {
        Self { ctx }
    }
}

impl<S> tower::Layer<S> for TenantLifecycleLayer {
    type Service = TenantLifecycle<S>;
    fn layer(&self, inner: S) -> TenantLifecycle<S> {
        TenantLifecycle {
            inner,
            ctx: self.ctx.clone(),
        }
    }
}

/// Passes requests for Active tenants (see the module docs).
#[derive(Clone)]
pub struct TenantLifecycle<S> {
    inner: S,
    ctx: Option<Arc<Ctx>>,
}

/// Whether `user` may learn about the tenants it is refused: platform admins, and
/// everyone when authorization is off.
fn sees_tenants(ctx: &Ctx, user: Option<&UserInfo>) -> bool {
    ctx.authz.mode() == crate::authz::Mode::AlwaysAllow
        || user.is_some_and(crdplane_auth::rbac::is_privileged)
}

/// The answer for a request to a tenant in `phase` (None: unknown); None: it passes.
fn refusal(
    ctx: &Ctx,
    user: Option<&UserInfo>,
    info: &RequestInfo,
    phase: Option<Phase>,
) -> Option<Response<Body>> {
    let gr = crate::stores::tenants::gr();
    let e = match phase {
        Some(Phase::Active) => return None,
        None if sees_tenants(ctx, user) => crdplane_core::ApiError::not_found(gr, &info.tenant),
        Some(Phase::Terminating)
            if sees_tenants(ctx, user)
                || user.is_some_and(|u| ctx.authz.admits_cached(u, &info.tenant) == Some(true)) =>
        {
            crdplane_core::ApiError::forbidden(gr, &info.tenant, "the tenant is being terminated")
        }
        _ => {
            let name = user.map_or(crdplane_auth::user::ANONYMOUS_USER, |u| u.name.as_str());
            crate::authz::forbidden(name, &crate::authz::attributes(info), "")
        }
    };
    Some(error_response(&e))
}

impl<S> tower::Service<Request<Payload>> for TenantLifecycle<S>
where
    S: tower::Service<Request<Payload>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Either<S::Future, BoxFuture<'static, Result<Response<Body>, Infallible>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Payload>) -> Self::Future {
        let (Some(ctx), Some(info)) = (&self.ctx, crate::filters::request_info::of(&req)) else {
            return Either::Left(self.inner.call(req));
        };
        if crate::filters::tenant_access::process_path(info) {
            return Either::Left(self.inner.call(req));
        }
        if info.tenant == crate::stores::tenants::ADMIN_SCOPE
            || ctx.tenant_dir.cached(&info.tenant) == Some(Phase::Active)
        {
            return Either::Left(self.inner.call(req));
        }
        // The Tenant must be read (or the cached phase refuses): take the service that is
        // ready and leave a clone in its place (tower's rule for calls after an await).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let (ctx, info) = (ctx.clone(), info.clone());
        let user = req.extensions().get::<User>().cloned();
        Either::Right(Box::pin(async move {
            let phase = match crate::tenants::phase(&ctx, &info.tenant).await {
                Ok(p) => p,
                Err(e) => return Ok(error_response(&e)),
            };
            match refusal(&ctx, user.as_deref(), &info, phase) {
                Some(resp) => Ok(resp),
                None => inner.call(req).await,
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::StatusCode;

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..Default::default()
        }
    }

    fn code_and_message(r: Option<Response<Body>>) -> Option<(StatusCode, String)> {
        let r = r?;
        let code = r.status();
        let body = futures::executor::block_on(http_body_util::BodyExt::collect(r.into_body()))
            .unwrap()
            .to_bytes();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        Some((code, v["message"].as_str().unwrap().to_string()))
    }

    #[tokio::test]
    async fn who_learns_what() {
        let cfg = crate::context::Config {
            authorization: crate::authz::Mode::Rbac,
            ..Default::default()
        };
        let ctx = Ctx::new(cfg).unwrap();
        let info = crate::request_info::parse(
            "GET",
            "/clusters/gone/api/v1/namespaces/default/configmaps",
            false,
            "default",
        )
        .unwrap();
        let admin = user("admin", &["system:masters", "system:authenticated"]);
        let jane = user("jane", &["system:authenticated"]);
        let r = |u: &UserInfo, p| code_and_message(refusal(&ctx, Some(u), &info, p));
        assert_eq!(r(&admin, Some(Phase::Active)), None);
        assert_eq!(
            r(&admin, None),
            Some((
                StatusCode::NOT_FOUND,
                "tenants.crdplane.io \"gone\" not found".into()
            ))
        );
        assert_eq!(
            r(&admin, Some(Phase::Terminating)),
            Some((
                StatusCode::FORBIDDEN,
                "tenants.crdplane.io \"gone\" is forbidden: the tenant is being terminated".into()
            ))
        );
        // Others learn nothing: the tenant-access layer's 403, for unknown and
        // Terminating alike.
        let hidden = Some((
            StatusCode::FORBIDDEN,
            "configmaps is forbidden: User \"jane\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\"".into(),
        ));
        assert_eq!(r(&jane, None), hidden);
        assert_eq!(r(&jane, Some(Phase::Terminating)), hidden);
        let anon = code_and_message(refusal(&ctx, None, &info, None)).unwrap();
        assert_eq!(anon.0, StatusCode::FORBIDDEN);
        assert!(anon.1.contains("User \"system:anonymous\""), "{}", anon.1);
    }
}
