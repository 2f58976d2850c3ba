//! Escalation prevention for RBAC writes: nobody grants permissions they do not hold.
//!
//! Where it sits: a validating admission plugin the built-in handler (`builtin.rs`) adds to
//! the chain of every create, update and patch of Roles, ClusterRoles, RoleBindings and
//! ClusterRoleBindings, so it sees the object as it will be stored. With RBAC
//! authorization (`--authorization-mode=RBAC`):
//! - a Role or ClusterRole may hold only rules the writer holds in its namespace (for a
//!   ClusterRole, cluster-wide), unless the writer may `escalate` it; setting an
//!   `aggregationRule` takes all permissions (`must have cluster-admin privileges to use
//!   the aggregationRule`);
//! - a binding may refer only to a role whose rules the writer holds, unless the writer may
//!   `bind` that role;
//! - `system:masters` skips both checks; an update that changes only garbage-collection
//!   fields (ownerReferences, finalizers) is not checked.
//!
//! The refusal is upstream's 403, e.g. `roles.rbac.authorization.k8s.io "r" is forbidden:
//! user "jane" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not
//! currently held:` followed by the missing rules. With AlwaysAllow every `escalate` and
//! `bind` check is allowed, so nothing is refused (as upstream).
//!
//! Follows k8s.io/kubernetes pkg/registry/rbac/{role,clusterrole,rolebinding,
//! clusterrolebinding}/policybased/storage.go and pkg/registry/rbac/escalation_check.go
//! (`EscalationAllowed`, `RoleEscalationAuthorized`, `BindingAuthorized`,
//! `IsOnlyMutatingGCFields`).

use crate::context::Ctx;
use crdplane_apiserver::admission::{Admission, Attributes as AdmissionAttributes, Operation};
use crdplane_auth::rbac::{self, Attributes, Rule, covers};
use crdplane_auth::user::UserInfo;
use crdplane_core::{ApiError, GroupResource};
use futures::future::BoxFuture;
use serde_json::Value;

/// The escalation checks of one request's RBAC write.
pub struct Escalation<'a> {
    /// The gateway (authorizer, storage).
    pub ctx: &'a Ctx,
    /// The request's tenant.
    pub tenant: &'a str,
    /// Who writes.
    pub user: &'a UserInfo,
}

fn rules_of(obj: &Value) -> Vec<Rule> {
    obj.get("rules")
        .and_then(|r| {
            serde_json::from_value::<Vec<k8s_openapi::api::rbac::v1::PolicyRule>>(r.clone()).ok()
        })
        .unwrap_or_default()
        .iter()
        .map(Rule::from)
        .collect()
}

/// `IsOnlyMutatingGCFields`: the objects are equal once their ownerReferences and
/// finalizers (and what the server maintains) are set aside.
fn only_gc_fields(new: &Value, old: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            for k in [
                "ownerReferences",
                "finalizers",
                "managedFields",
                "resourceVersion",
            ] {
                m.remove(k);
            }
        }
        v
    };
    strip(new) == strip(old)
}

impl Escalation<'_> {
    async fn allowed(
        &self,
        verb: &str,
        resource: &str,
        name: &str,
        ns: &str,
    ) -> Result<bool, ApiError> {
        let a = Attributes {
            verb,
            resource_request: true,
            namespace: ns,
            api_group: rbac::GROUP,
            api_version: "*",
            resource,
            name,
            ..Default::default()
        };
        Ok(crate::policy::decide(self.ctx, self.user, self.tenant, &a)
            .await?
            .allowed())
    }

    /// `ConfirmNoEscalation` for `granted` in `ns`, refused as a 403 naming the object.
    async fn confirm(
        &self,
        gr: &GroupResource,
        name: &str,
        ns: &str,
        granted: &[Rule],
        msg: Option<&str>,
    ) -> Result<(), ApiError> {
        let policy = crate::policy::policy(self.ctx, self.tenant).await?;
        let (owner, errs) = policy.rules_for(self.user, ns);
        covers::confirm_no_escalation(self.user, &owner, &errs, granted)
            .map_err(|e| ApiError::forbidden(gr, name, msg.unwrap_or(&e)))
    }

    async fn check(&self, a: &AdmissionAttributes<'_>) -> Result<(), ApiError> {
        if !matches!(a.operation, Operation::Create | Operation::Update)
            || self.ctx.authz.mode() == crate::authz::Mode::AlwaysAllow
            || rbac::is_privileged(self.user)
        {
            return Ok(());
        }
        let Some(obj) = a.object.as_deref() else {
            return Ok(());
        };
        if let Some(old) = a.old
            && only_gc_fields(obj, old)
        {
            return Ok(());
        }
        let gr = a.resource;
        let (ns, name) = (a.namespace, a.name);
        match gr.resource.as_str() {
            "roles" | "clusterroles" => {
                if self.allowed("escalate", &gr.resource, name, ns).await? {
                    return Ok(());
                }
                self.confirm(gr, name, ns, &rules_of(obj), None).await?;
                if gr.resource == "clusterroles"
                    && obj.get("aggregationRule").is_some_and(|v| !v.is_null())
                {
                    self.confirm(
                        gr,
                        name,
                        ns,
                        &covers::full_authority(),
                        Some("must have cluster-admin privileges to use the aggregationRule"),
                    )
                    .await?;
                }
                Ok(())
            }
            "rolebindings" | "clusterrolebindings" => {
                let s = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or("");
                let (kind, role) = (s("/roleRef/kind"), s("/roleRef/name"));
                let resource = match kind {
                    "ClusterRole" => "clusterroles",
                    "Role" => "roles",
                    _ => "",
                };
                if !resource.is_empty() && self.allowed("bind", resource, role, ns).await? {
                    return Ok(());
                }
                let policy = crate::policy::policy(self.ctx, self.tenant).await?;
                let rules = policy
                    .role_ref_rules(kind, role, ns)
                    .map_err(|e| ApiError::forbidden(gr, name, &e))?
                    .to_vec();
                self.confirm(gr, name, ns, &rules, None).await
            }
            _ => Ok(()),
        }
    }
}

impl Admission for Escalation<'_> {
    fn admit<'a>(
        &'a self,
        a: &'a mut AdmissionAttributes<'_>,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move { self.check(a).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn gc_only_updates() {
        let old = json!({"metadata": {"name": "r", "resourceVersion": "1"}, "rules": []});
        let new = json!({"metadata": {"name": "r", "resourceVersion": "2", "finalizers": ["x"],
                          "ownerReferences": [{"uid": "u"}]}, "rules": []});
        assert!(only_gc_fields(&new, &old));
        let relabelled = json!({"metadata": {"name": "r", "labels": {"a": "b"}}, "rules": []});
        assert!(!only_gc_fields(&relabelled, &old));
    }
}
