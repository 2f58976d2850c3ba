//! Reading a tenant's RBAC policy: the storage side of the authorizer ([`crate::authz`]
//! holds the mode, the cache and the texts). The tenant's Roles, ClusterRoles, RoleBindings
//! and ClusterRoleBindings are listed from storage (all four at once) and built into a
//! `crdplane_auth::rbac::Policy`, cached per [`crate::authz::Authorizer::finish_read`]'s rule.
//!
//! Reading writes no object: a tenant never used before has no RBAC objects, and its
//! policy is then the bootstrap one it will get (`crdplane_auth::rbac::bootstrap`: health
//! and version for everyone, discovery for the authenticated, everything for
//! `system:masters`), built in memory; the tenant-access gate still refuses non-members.
//! Its default namespaces and bootstrap roles are stored by the first request that passed
//! authorization (`api.rs`, `lifecycle.rs` `ensure_tenant`), whose RBAC writes then
//! invalidate the cached policy. So a user of one tenant who sends requests to made-up
//! tenant names gets 403s and stores no object there (the storage service does keep the
//! revision counters of the four RBAC resources it was asked to list).
//!
//! Where it sits: called by the authorization layer for an uncached tenant, by the RBAC
//! escalation checks and by the access reviews.

use crate::authz::Mode;
use crate::context::Ctx;
use crdplane_apiserver::rest::{ListOptions, Store};
use crdplane_auth::rbac::{self, Attributes, Decision, Policy};
use crdplane_auth::user::UserInfo;
use crdplane_core::ApiError;
use std::sync::Arc;
/// The decision for `user` on `a` in `tenant`, reading the tenant's policy if needed.
pub async fn decide(
    ctx: &Ctx,
    user: &UserInfo,
    tenant: &str,
    a: &Attributes<'_>,
) -> Result<Decision, ApiError> {
    if let Some(d) = ctx.authz.decide_cached(user, tenant, a) {
        return Ok(d);
    }
    Ok(policy(ctx, tenant).await?.authorize(user, a))
}

/// An access review's answer (`SubjectAccessReviewStatus`): allowed, and the reason the
/// authorizers give (RBAC names the binding that allowed; `system:masters` and
/// AlwaysAllow give none).
pub async fn review(
    ctx: &Ctx,
    user: &UserInfo,
    tenant: &str,
    a: &Attributes<'_>,
) -> Result<(bool, String), ApiError> {
    if ctx.authz.mode() == Mode::AlwaysAllow || rbac::is_privileged(user) {
        return Ok((true, String::new()));
    }
    Ok(policy(ctx, tenant).await?.authorize_explained(user, a))
}

/// A rules review's answer (`SubjectRulesReviewStatus`): every rule `user` holds in
/// `namespace` and the errors met resolving them. AlwaysAllow and `system:masters`
/// hold everything (the `*` rules), as upstream's authorizers list it.
pub async fn rules(
    ctx: &Ctx,
    user: &UserInfo,
    tenant: &str,
    namespace: &str,
) -> Result<(Vec<rbac::Rule>, Vec<String>), ApiError> {
    if ctx.authz.mode() == Mode::AlwaysAllow {
        return Ok((rbac::covers::full_authority(), Vec::new()));
    }
    let (mut rules, errs) = policy(ctx, tenant).await?.rules_for(user, namespace);
    if rbac::is_privileged(user) {
        let mut all = rbac::covers::full_authority();
        all.append(&mut rules);
        rules = all;
    }
    Ok((rules, errs))
}

/// The tenant's policy: cached, or read from storage (and cached when that is safe).
pub async fn policy(ctx: &Ctx, tenant: &str) -> Result<Arc<Policy>, ApiError> {
    if let Some(p) = ctx.authz.cached(tenant) {
        return Ok(p);
    }
    let epoch = ctx.authz.start_read();
    let mut objects = read_objects(ctx, tenant).await?;
    if objects.roles.is_empty()
        && objects.cluster_roles.is_empty()
        && objects.role_bindings.is_empty()
        && objects.cluster_role_bindings.is_empty()
    {
        // Never used: the bootstrap policy, not stored yet (see the module docs).
        objects.cluster_roles = rbac::bootstrap::cluster_roles();
        objects.cluster_role_bindings = rbac::bootstrap::cluster_role_bindings();
    }
    let p = Arc::new(Policy::from_objects(&objects));
    ctx.authz.finish_read(tenant, epoch, &p);
    write_back_aggregation(ctx, tenant, &objects.cluster_roles, &p);
    Ok(p)
}

/// The aggregation controller where no policy is read to decide requests (AlwaysAllow):
/// after the tenant's ClusterRoles change (a write, the bootstrap), its aggregated ones get
/// the union of their selected roles' rules written into `rules`, as the policy reads of RBAC
/// mode do it (`write_back_aggregation`). Upstream's controller runs whatever the
/// authorization mode.
pub async fn aggregate(ctx: &Ctx, tenant: &str) -> Result<(), ApiError> {
    let objects = read_objects(ctx, tenant).await?;
    if objects.cluster_roles.is_empty() {
        return Ok(());
    }
    let p = Policy::from_objects(&objects);
    write_back_aggregation(ctx, tenant, &objects.cluster_roles, &p);
    Ok(())
}

/// The aggregation controller's write (upstream's `pkg/controller/clusterroleaggregation`):
/// an aggregated ClusterRole whose stored rules differ from the union its selectors gather
/// (which decisions use already, see `crdplane_auth::rbac`) gets that union written into
/// `rules`, in the background, so `kubectl get clusterrole edit -o yaml` shows what `edit`
/// grants. The write is a compare-and-swap on the read object; a conflict means another
/// writer (or gateway) was first, and the policy read its write causes settles it. Runs
/// where policies are read (RBAC authorization), and from [`aggregate`] otherwise.
fn write_back_aggregation(ctx: &Ctx, tenant: &str, roles: &[serde_json::Value], p: &Policy) {
    for role in roles {
        if role.get("aggregationRule").is_none_or(|a| a.is_null()) {
            continue;
        }
        let name = role
            .pointer("/metadata/name")
            .and_then(|n| n.as_str())
            .unwrap_or("");
        let Some(union) = p.cluster_role(name) else {
            continue;
        };
        let stored: Vec<rbac::Rule> = role
            .get("rules")
            .and_then(|r| {
                serde_json::from_value::<Vec<k8s_openapi::api::rbac::v1::PolicyRule>>(r.clone())
                    .ok()
            })
            .unwrap_or_default()
            .iter()
            .map(rbac::Rule::from)
            .collect();
        if stored.as_slice() == &union[..] {
            continue;
        }
        let mut new = role.clone();
        new["rules"] = serde_json::to_value(
            union
                .iter()
                .map(rbac::Rule::to_policy_rule)
                .collect::<Vec<_>>(),
        )
        .unwrap_or_default();
        let (old, storage, tenant) = (role.clone(), ctx.storage.clone(), tenant.to_string());
        tokio::spawn(async move {
            let store = crate::stores::storage::StorageStore {
                storage: &storage,
                tenant: &tenant,
                group: rbac::GROUP,
                resource: "clusterroles",
                ttl_seconds: 0,
            };
            if let Err(e) = store.update(new, &old, false).await
                && e.code != 409
            {
                tracing::warn!(%tenant, error = %e.message, "aggregating a ClusterRole's rules failed");
            }
        });
    }
}

/// Every RBAC object of `tenant`, from storage.
async fn read_objects(ctx: &Ctx, tenant: &str) -> Result<rbac::Objects, ApiError> {
    let list = |resource: &'static str| async move {
        let store = crate::stores::storage::StorageStore {
            storage: &ctx.storage,
            tenant,
            group: rbac::GROUP,
            resource,
            ttl_seconds: 0,
        };
        store
            .list("", &ListOptions::default())
            .await
            .map(|l| l.items)
    };
    let (roles, cluster_roles, role_bindings, cluster_role_bindings) = futures::try_join!(
        list("roles"),
        list("clusterroles"),
        list("rolebindings"),
        list("clusterrolebindings")
    )?;
    Ok(rbac::Objects {
        roles,
        cluster_roles,
        role_bindings,
        cluster_role_bindings,
    })
}
