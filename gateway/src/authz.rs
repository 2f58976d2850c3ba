//! The authorizer of the gateway: `--authorization-mode` (AlwaysAllow, or RBAC over each
//! tenant's own Roles, ClusterRoles and bindings), the per-tenant policy cache, and
//! upstream's 403 text. No IO: reading a tenant's policy from storage is
//! `policy.rs`'s.
//!
//! Where it sits: the authorization layer (`filters/authorization.rs`) asks it about every
//! request after authentication (through `policy.rs` when the policy is not cached);
//! the RBAC write paths (escalation prevention in `rbac_admission.rs`) and
//! the access reviews (`access_reviews.rs`) ask about other attributes of the same or
//! another user. Decisions are `crdplane_auth::rbac`'s.
//!
//! **Cache.** A tenant's policy is built from four storage lists (its Roles, ClusterRoles,
//! RoleBindings and ClusterRoleBindings, every namespace) and kept until one of those
//! objects changes: the storage service announces every write of them on its change
//! channel, which `Ctx::spawn_cache_followers` follows and turns into
//! [`Authorizer::invalidate`]. Policies are cached only while all four change streams are
//! connected; a stream that breaks drops every policy, and until it is back each request
//! reads the tenant's objects afresh, so a revoked binding is never honoured from a stale
//! cache. A policy built while a change of its tenant came in is used for its own request
//! only (an epoch counter tells). Upstream's RBAC authorizer reads the same objects from
//! shared informers, which are likewise refreshed by a watch.
//!
//! Upstream: `pkg/kubeapiserver/authorizer` (modes; `system:masters` is allowed everything
//! by the privileged-group authorizer ahead of RBAC), `plugin/pkg/auth/authorizer/rbac`,
//! `staging/src/k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go`
//! (`forbiddenMessage`, `Forbidden`).

use crate::request_info::RequestInfo;
use crdplane_auth::rbac::{self, Attributes, Decision, Policy};
use crdplane_auth::user::UserInfo;
use crdplane_core::{ApiError, GroupResource};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

/// The RBAC resources a policy is built from, as the storage service names them.
pub const RBAC_RESOURCES: [&str; 4] = [
    "roles",
    "clusterroles",
    "rolebindings",
    "clusterrolebindings",
];

/// `--authorization-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Every request is allowed (kube-apiserver's default mode).
    #[default]
    AlwaysAllow,
    /// `system:masters` is allowed everything; everyone else what RBAC in the tenant grants.
    Rbac,
}

impl Mode {
    /// Parses kube-apiserver's `--authorization-mode` value: a comma-separated list of
    /// modes, of which crdplane knows AlwaysAllow and RBAC. RBAC, when listed, decides
    /// (AlwaysAllow after it would allow everything RBAC denies, so it may not follow it).
    pub fn parse(s: &str) -> Result<Mode, String> {
        let modes: Vec<&str> = s.split(',').map(str::trim).collect();
        for m in &modes {
            if !matches!(*m, "AlwaysAllow" | "RBAC") {
                return Err(format!(
                    "authorization-mode {m:?} is not a valid mode (valid modes: AlwaysAllow, RBAC)"
                ));
            }
        }
        match modes.as_slice() {
            ["AlwaysAllow"] => Ok(Mode::AlwaysAllow),
            ["RBAC"] => Ok(Mode::Rbac),
            _ => Err(format!(
                "authorization-mode {s:?}: give exactly one of AlwaysAllow, RBAC"
            )),
        }
    }
}

/// The gateway's authorizer (see the module docs).
#[derive(Debug, Default)]
pub struct Authorizer {
    mode: Mode,
    policies: RwLock<HashMap<String, Arc<Policy>>>,
    /// Bumped by every invalidation: a policy read before a bump is not cached after it.
    epoch: AtomicU64,
    /// How many of the four RBAC change streams are connected.
    following: AtomicUsize,
}

impl Authorizer {
    /// An authorizer of `mode` with an empty cache.
    pub fn new(mode: Mode) -> Self {
        Self {
            mode,
            ..Default::default()
        }
    }

    /// The mode it decides in.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The decision for `user` on `a` in `tenant`, if it needs no storage read (always
    /// allowed, privileged, or the tenant's policy is cached).
    pub fn decide_cached(
        &self,
        user: &UserInfo,
        tenant: &str,
        a: &Attributes<'_>,
    ) -> Option<Decision> {
        if self.mode == Mode::AlwaysAllow || rbac::is_privileged(user) {
            return Some(Decision::Allow);
        }
        let p = self.policies.read().expect("lock").get(tenant).cloned()?;
        Some(p.authorize(user, a))
    }

    /// Whether `user` may use `tenant` at all (see `filters/tenant_access.rs`), if that needs
    /// no storage read: always with AlwaysAllow and for `system:masters`, else whether a
    /// binding of the cached policy names the user.
    pub fn admits_cached(&self, user: &UserInfo, tenant: &str) -> Option<bool> {
        if self.mode == Mode::AlwaysAllow || rbac::is_privileged(user) {
            return Some(true);
        }
        Some(self.cached(tenant)?.is_member(user))
    }

    /// The cached policy of `tenant`, if any.
    pub fn cached(&self, tenant: &str) -> Option<Arc<Policy>> {
        self.policies.read().expect("lock").get(tenant).cloned()
    }

    /// Where a policy read starts: pass the value to [`Self::finish_read`].
    pub fn start_read(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// A policy read from storage since [`Self::start_read`] gave `epoch`: cached when no
    /// change came in meanwhile and every change stream is followed.
    pub fn finish_read(&self, tenant: &str, epoch: u64, p: &Arc<Policy>) {
        let mut m = self.policies.write().expect("lock");
        if self.epoch.load(Ordering::SeqCst) == epoch
            && self.following.load(Ordering::SeqCst) == RBAC_RESOURCES.len()
        {
            m.insert(tenant.to_string(), p.clone());
        }
    }

    /// Forgets the policy of `tenant` (one of its RBAC objects changed).
    pub fn invalidate(&self, tenant: &str) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
        self.policies.write().expect("lock").remove(tenant);
    }

    /// A change stream of an RBAC resource connected: its changes are followed from now.
    pub fn stream_up(&self) {
        self.clear();
        self.following.fetch_add(1, Ordering::SeqCst);
    }

    /// A change stream of an RBAC resource ended: nothing cached can be trusted.
    pub fn stream_down(&self) {
        let _ = self
            .following
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        self.clear();
    }

    /// Puts a policy into the cache (tests of the layers that use it).
    #[cfg(test)]
    pub fn cache_for_test(&self, tenant: &str, p: Arc<Policy>) {
        self.policies
            .write()
            .expect("lock")
            .insert(tenant.to_string(), p);
    }

    fn clear(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
        self.policies.write().expect("lock").clear();
    }
}

/// The authorizer's attributes of a request.
pub fn attributes(i: &RequestInfo) -> Attributes<'_> {
    Attributes {
        verb: &i.verb,
        resource_request: i.is_resource_request,
        namespace: &i.namespace,
        api_group: &i.api_group,
        api_version: &i.api_version,
        resource: &i.resource,
        subresource: &i.subresource,
        name: &i.name,
        path: &i.path,
    }
}

/// `forbiddenMessage`: who cannot do what, where.
pub fn forbidden_message(user: &str, a: &Attributes<'_>) -> String {
    let q = crdplane_core::field::go_quote;
    if !a.resource_request {
        return format!("User {} cannot {} path {}", q(user), a.verb, q(a.path));
    }
    let resource = if a.subresource.is_empty() {
        a.resource.to_string()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    if a.namespace.is_empty() {
        format!(
            "User {} cannot {} resource {} in API group {} at the cluster scope",
            q(user),
            a.verb,
            q(&resource),
            q(a.api_group)
        )
    } else {
        format!(
            "User {} cannot {} resource {} in API group {} in the namespace {}",
            q(user),
            a.verb,
            q(&resource),
            q(a.api_group),
            q(a.namespace)
        )
    }
}

/// `responsewriters.Forbidden`: the 403 Status of a denied request, with the authorizer's
/// reason after the message when it gave one.
pub fn forbidden(user: &str, a: &Attributes<'_>, reason: &str) -> ApiError {
    let msg = forbidden_message(user, a);
    let err = if reason.is_empty() {
        msg
    } else {
        format!("{msg}: {reason}")
    };
    let gr = if a.resource_request {
        GroupResource::new(a.api_group, a.resource)
    } else {
        GroupResource::new("", "")
    };
    ApiError::forbidden(&gr, a.name, &err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes() {
        assert_eq!(Mode::parse("RBAC"), Ok(Mode::Rbac));
        assert_eq!(Mode::parse("AlwaysAllow"), Ok(Mode::AlwaysAllow));
        assert!(
            Mode::parse("Node,RBAC")
                .unwrap_err()
                .contains("\"Node\" is not a valid mode")
        );
        assert!(Mode::parse("RBAC,AlwaysAllow").is_err());
    }

    #[test]
    fn forbidden_texts_are_upstreams() {
        let at = |verb, ns, group, resource, sub, name| Attributes {
            verb,
            resource_request: true,
            namespace: ns,
            api_group: group,
            resource,
            subresource: sub,
            name,
            ..Default::default()
        };
        let cases = [
            (
                at("list", "default", "stable.example.com", "crontabs", "", ""),
                "",
                "crontabs.stable.example.com is forbidden: User \"jane\" cannot list resource \"crontabs\" in API group \"stable.example.com\" in the namespace \"default\"",
            ),
            (
                at(
                    "update",
                    "ns",
                    "stable.example.com",
                    "crontabs",
                    "status",
                    "c1",
                ),
                "",
                "crontabs.stable.example.com \"c1\" is forbidden: User \"jane\" cannot update resource \"crontabs/status\" in API group \"stable.example.com\" in the namespace \"ns\"",
            ),
            (
                at("watch", "", "", "namespaces", "", ""),
                "",
                "namespaces is forbidden: User \"jane\" cannot watch resource \"namespaces\" in API group \"\" at the cluster scope",
            ),
            (
                at("get", "ns", "", "configmaps", "", "cm"),
                "RBAC: role.rbac.authorization.k8s.io \"gone\" not found",
                "configmaps \"cm\" is forbidden: User \"jane\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"ns\": RBAC: role.rbac.authorization.k8s.io \"gone\" not found",
            ),
        ];
        for (a, reason, want) in cases {
            let e = forbidden("jane", &a, reason);
            assert_eq!(e.code, 403);
            assert_eq!(e.message, want);
        }
        let path = Attributes {
            verb: "get",
            path: "/apis",
            ..Default::default()
        };
        let e = forbidden("system:anonymous", &path, "");
        assert_eq!(
            e.message,
            "forbidden: User \"system:anonymous\" cannot get path \"/apis\""
        );
        let body: serde_json::Value = serde_json::from_slice(&e.to_json()).unwrap();
        assert_eq!(body["details"], serde_json::json!({}));
        assert_eq!(body["reason"], "Forbidden");
    }
}
