//! Authorization: ninth layer of the edge stack (`stack.rs`), the last before the router,
//! where upstream's `WithAuthorization`
//! (staging/src/k8s.io/apiserver/pkg/endpoints/filters/authorization.go) sits.
//!
//! It asks the gateway's authorizer ([`crate::authz`]: AlwaysAllow, or RBAC over the
//! tenant's own roles and bindings) whether the authenticated user (the authentication
//! layer's `User`; a request that reached here without one is `system:anonymous`) may
//! do what the request info says (verb, API group, resource, subresource, namespace, name,
//! or the non-resource path), in the tenant the path names. A denial is upstream's 403
//! Status (`responsewriters.Forbidden`): `crontabs.stable.example.com is forbidden: User
//! "jane" cannot list resource "crontabs" in API group "stable.example.com" in the namespace
//! "default"`, for watches too (the decision comes before any response head).
//!
//! The service is the one both policy-gated layers share ([`super::gate`]): a cached policy
//! decides synchronously; only a tenant whose policy must first be read from storage costs
//! a boxed future.

use super::gate::{Gate, GateLayer, Gated, Verdict};
use crate::authz::attributes;
use crate::context::Ctx;
use crate::request_info::RequestInfo;
use crdplane_auth::rbac::{Decision, Policy};
use crdplane_auth::user::UserInfo;
use std::sync::Arc;

/// The authorizer's decision as the gate of [`Authorization`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Authorize;

fn verdict(d: Decision) -> Verdict {
    match d {
        Decision::Allow => Ok(()),
        Decision::Deny(reason) => Err(reason),
    }
}

impl Gate for Authorize {
    fn cached(&self, ctx: &Ctx, user: &UserInfo, info: &RequestInfo) -> Option<Verdict> {
        ctx.authz
            .decide_cached(user, &info.tenant, &attributes(info))
            .map(verdict)
    }
    fn decide(&self, policy: &Policy, user: &UserInfo, info: &RequestInfo) -> Verdict {
        verdict(policy.authorize(user, &attributes(info)))
    }
    fn audited(&self) -> bool {
        true
    }
    /// Upstream's reasons: the privileged-group and AlwaysAllow authorizers give none; RBAC
    /// names the binding, role and subject that allowed (`RBAC: allowed by ClusterRoleBinding
    /// "b" of ClusterRole "r" to User "u"`).
    fn explain_allow(
        &self,
        ctx: &Ctx,
        policy: Option<&Policy>,
        user: &UserInfo,
        info: &RequestInfo,
    ) -> String {
        if ctx.authz.mode() == crate::authz::Mode::AlwaysAllow
            || crdplane_auth::rbac::is_privileged(user)
        {
            return String::new();
        }
        let cached;
        let policy = match policy {
            Some(p) => p,
            None => match ctx.authz.cached(&info.tenant) {
                Some(p) => {
                    cached = p;
                    &*cached
                }
                None => return String::new(),
            },
        };
        policy.authorize_explained(user, &attributes(info)).1
    }
}

/// The layer of [`Authorization`].
pub type AuthorizationLayer = GateLayer<Authorize>;

impl AuthorizationLayer {
    /// Authorizes with the authorizer of `ctx` (None: everything is allowed, for stacks
    /// without a gateway behind them).
    pub fn authorizing(ctx: Option<Arc<Ctx>>) -> Self {
        GateLayer::new(ctx, Authorize)
    }
}

/// Authorizes every request (see the module docs).
pub type Authorization<S> = Gated<S, Authorize>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filters::authentication::User;
    use crate::filters::testing::{echo, read, request};
    use crdplane_auth::rbac::{Objects, Policy, bootstrap};
    use http::StatusCode;
    use tower::{Layer, ServiceExt};

    fn ctx(mode: crate::authz::Mode) -> Arc<Ctx> {
        let cfg = crate::context::Config {
            authorization: mode,
            ..Default::default()
        };
        let ctx = Ctx::new(cfg).unwrap();
        let mut objs = Objects {
            cluster_roles: bootstrap::cluster_roles(),
            cluster_role_bindings: bootstrap::cluster_role_bindings(),
            ..Default::default()
        };
        objs.role_bindings.push(serde_json::json!({
            "metadata": {"name": "jane-view", "namespace": "team-a"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "jane"}]
        }));
        ctx.authz
            .cache_for_test("t1", Arc::new(Policy::from_objects(&objs)));
        ctx
    }

    async fn call(
        ctx: Arc<Ctx>,
        method: &str,
        path: &str,
        user: Option<UserInfo>,
    ) -> (StatusCode, String) {
        let svc = AuthorizationLayer::authorizing(Some(ctx))
            .layer(echo(|r| format!("{} {}", r.method(), r.uri())));
        let mut req = request(method, path);
        let watch = path.contains("watch=true");
        let info = crate::request_info::parse(method, path.split('?').next().unwrap(), watch, "t1")
            .unwrap();
        req.extensions_mut().insert(info);
        if let Some(u) = user {
            req.extensions_mut().insert::<User>(Arc::new(u));
        }
        read(svc.oneshot(req).await.unwrap()).await
    }

    fn jane() -> UserInfo {
        UserInfo {
            name: "jane".into(),
            groups: vec!["system:authenticated".into()],
            ..Default::default()
        }
    }

    #[test]
    fn an_allow_is_explained_as_upstreams_rbac_authorizer_does() {
        let c = ctx(crate::authz::Mode::Rbac);
        let info =
            crate::request_info::parse("GET", "/api/v1/namespaces/team-a/configmaps", false, "t1")
                .unwrap();
        assert_eq!(
            Authorize.explain_allow(&c, None, &jane(), &info),
            "RBAC: allowed by RoleBinding \"jane-view/team-a\" of ClusterRole \"view\" to User \"jane\""
        );
        // The privileged group and AlwaysAllow give no reason, as upstream's.
        let admin = UserInfo {
            name: "admin".into(),
            groups: vec!["system:masters".into()],
            ..Default::default()
        };
        assert_eq!(Authorize.explain_allow(&c, None, &admin, &info), "");
        let open = ctx(crate::authz::Mode::AlwaysAllow);
        assert_eq!(Authorize.explain_allow(&open, None, &jane(), &info), "");
    }

    #[tokio::test]
    async fn rbac_decides_with_upstreams_texts() {
        let c = ctx(crate::authz::Mode::Rbac);
        let ok = call(
            c.clone(),
            "GET",
            "/api/v1/namespaces/team-a/configmaps",
            Some(jane()),
        )
        .await;
        assert_eq!(
            ok,
            (
                StatusCode::OK,
                "GET /api/v1/namespaces/team-a/configmaps".into()
            )
        );
        let (code, body) = call(
            c.clone(),
            "GET",
            "/apis/stable.example.com/v1/namespaces/default/crontabs?watch=true",
            Some(jane()),
        )
        .await;
        assert_eq!(code, StatusCode::FORBIDDEN);
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            v["message"],
            "crontabs.stable.example.com is forbidden: User \"jane\" cannot watch resource \"crontabs\" in API group \"stable.example.com\" in the namespace \"default\""
        );
        assert_eq!(
            v["details"],
            serde_json::json!({"group": "stable.example.com", "kind": "crontabs"})
        );
        // No user: anonymous, which may read /healthz and nothing else.
        assert_eq!(
            call(c.clone(), "GET", "/healthz", None).await.0,
            StatusCode::OK
        );
        let (code, body) = call(c.clone(), "GET", "/apis", None).await;
        assert_eq!(code, StatusCode::FORBIDDEN);
        assert!(
            body.contains("forbidden: User \\\"system:anonymous\\\" cannot get path \\\"/apis\\\""),
            "{body}"
        );
        // system:masters needs no policy at all (tenant t2 has none cached).
        let admin = UserInfo {
            name: "admin".into(),
            groups: vec!["system:masters".into()],
            ..Default::default()
        };
        assert_eq!(
            call(c, "DELETE", "/clusters/t2/api/v1/namespaces/x", Some(admin))
                .await
                .0,
            StatusCode::OK
        );
    }

    #[tokio::test]
    async fn always_allow_allows() {
        let c = ctx(crate::authz::Mode::AlwaysAllow);
        assert_eq!(
            call(c, "DELETE", "/api/v1/namespaces/x", None).await.0,
            StatusCode::OK
        );
    }
}
