//! Tenant access: ninth layer of the edge stack (`stack.rs`), after authentication (it
//! needs the identity) and before fairness (a request refused here costs no fairness seat).
//! Upstream has no tenants; this is crdplane's own filter (DESIGN.md, "Identity and
//! tenancy").
//!
//! With RBAC authorization, an identity may use a tenant only if some RoleBinding or
//! ClusterRoleBinding of that tenant names it (its user name, one of its groups other than
//! `system:authenticated` / `system:unauthenticated`, or its service account); members of
//! `system:masters`, the platform's admins, may use every tenant. A request of anyone else
//! gets the 403 the authorizer would give for it (upstream's `forbiddenMessage`), so a
//! tenant's discovery, OpenAPI and access reviews stay closed to identities it never
//! granted anything, though the bootstrap bindings open them to every authenticated
//! member. The process-level health and version paths (`/healthz`, `/livez`, `/readyz`,
//! `/version`) are not a tenant's and pass. With AlwaysAllow everything passes.
//!
//! The check reads the same cached per-tenant policy as the authorization layer
//! (`crate::authz`), so it costs a set lookup; an uncached tenant costs one policy read,
//! which the authorization layer then finds cached.
//!
//! Whether the tenant exists at all is decided by the layer before this one
//! ([`tenant_lifecycle`](super::tenant_lifecycle)).

use super::gate::{Gate, GateLayer, Gated, Verdict};
use crate::context::Ctx;
use crate::request_info::RequestInfo;
use crdplane_auth::rbac::Policy;
use crdplane_auth::user::UserInfo;
use std::sync::Arc;

/// Tenant membership as the gate of [`TenantAccess`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Membership;

/// The process-level paths that belong to no tenant.
pub(crate) fn process_path(i: &RequestInfo) -> bool {
    !i.is_resource_request
        && ["/healthz", "/livez", "/readyz", "/version"]
            .iter()
            .any(|p| i.path == *p || i.path.strip_prefix(p).is_some_and(|r| r.starts_with('/')))
}

fn member(yes: bool) -> Verdict {
    if yes { Ok(()) } else { Err(String::new()) }
}

impl Gate for Membership {
    fn cached(&self, ctx: &Ctx, user: &UserInfo, info: &RequestInfo) -> Option<Verdict> {
        if process_path(info) {
            return Some(Ok(()));
        }
        ctx.authz.admits_cached(user, &info.tenant).map(member)
    }
    fn decide(&self, policy: &Policy, user: &UserInfo, _info: &RequestInfo) -> Verdict {
        member(policy.is_member(user))
    }
}

/// The layer of [`TenantAccess`].
pub type TenantAccessLayer = GateLayer<Membership>;

impl TenantAccessLayer {
    /// Checks tenant membership with the authorizer of `ctx` (None: every request passes).
    pub fn checking(ctx: Option<Arc<Ctx>>) -> Self {
        GateLayer::new(ctx, Membership)
    }
}

/// Refuses identities that do not belong to the request's tenant (see the module docs).
pub type TenantAccess<S> = Gated<S, Membership>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filters::authentication::User;
    use crate::filters::testing::{echo, read, request};
    use crdplane_auth::rbac::{Objects, Policy, bootstrap};
    use http::StatusCode;
    use tower::{Layer, ServiceExt};

    async fn call(ctx: Arc<Ctx>, path: &str, user: &str) -> (StatusCode, String) {
        let svc = TenantAccessLayer::checking(Some(ctx)).layer(echo(|r| r.uri().to_string()));
        let mut req = request("GET", path);
        req.extensions_mut()
            .insert(crate::request_info::parse("GET", path, false, "t1").unwrap());
        req.extensions_mut().insert::<User>(Arc::new(UserInfo {
            name: user.into(),
            groups: vec!["system:authenticated".into()],
            ..Default::default()
        }));
        read(svc.oneshot(req).await.unwrap()).await
    }

    #[tokio::test]
    async fn only_members_reach_a_tenant() {
        let cfg = crate::context::Config {
            authorization: crate::authz::Mode::Rbac,
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
        assert_eq!(call(ctx.clone(), "/apis", "jane").await.0, StatusCode::OK);
        let (code, body) = call(ctx.clone(), "/apis", "eve").await;
        assert_eq!(code, StatusCode::FORBIDDEN);
        assert!(
            body.contains("forbidden: User \\\"eve\\\" cannot get path \\\"/apis\\\""),
            "{body}"
        );
        // Health and version are the process's, not the tenant's.
        for p in ["/healthz", "/readyz/ping", "/version"] {
            assert_eq!(call(ctx.clone(), p, "eve").await.0, StatusCode::OK, "{p}");
        }
        let (code, _) = call(ctx, "/api/v1/namespaces/team-a/configmaps", "eve").await;
        assert_eq!(code, StatusCode::FORBIDDEN);
    }
}
