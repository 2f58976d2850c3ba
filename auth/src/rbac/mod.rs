//! Role-based access control: the decision of upstream's RBAC authorizer over one tenant's
//! Roles, ClusterRoles, RoleBindings and ClusterRoleBindings, with no IO.
//!
//! Where it sits in the request path: the gateway's authorization layer
//! (`gateway/src/filters/authorization.rs`) builds a [`Policy`] per tenant from the stored
//! RBAC objects (cached until one of them changes) and asks [`Policy::authorize`] about every
//! request after authentication; the RBAC write paths ask [`Policy::rules_for`] and
//! [`covers::confirm_no_escalation`] whether a user may grant what a role holds; the access
//! reviews (`kubectl auth can-i`) ask the same questions for another user.
//!
//! Upstream sources whose semantics this follows:
//! - `plugin/pkg/auth/authorizer/rbac/rbac.go` (`RBACAuthorizer.Authorize`, `RuleAllows`,
//!   the "RBAC: …" reason of a denial),
//! - `pkg/registry/rbac/validation/rule.go` (`VisitRulesFor`, `appliesTo`,
//!   `GetRoleReferenceRules` and the lister's NotFound texts),
//! - `pkg/apis/rbac/v1/evaluation_helpers.go` (`VerbMatches`, `ResourceMatches`, …),
//! - `pkg/controller/clusterroleaggregation` (an aggregated ClusterRole holds the union of
//!   the rules of the ClusterRoles its selectors match; computed here when the policy is
//!   built, so a decision never waits for a controller),
//! - `pkg/serviceaccount` (`system:serviceaccount:<namespace>:<name>`).
//!
//! [`Policy::authorize`] walks the bindings that apply to the user (ClusterRoleBindings, then
//! the RoleBindings of the request's namespace) and stops at the first rule that allows; its
//! cost is linear in the bindings of the tenant and namespace, not in the number of objects.

pub mod bootstrap;
pub mod covers;

use crate::user::{ALL_AUTHENTICATED, ALL_UNAUTHENTICATED, SYSTEM_MASTERS, UserInfo};
use k8s_openapi::api::rbac::v1 as rbac;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// The API group of the RBAC types.
pub const GROUP: &str = "rbac.authorization.k8s.io";

/// One policy rule (`rbacv1.PolicyRule`), absent lists empty.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash, PartialOrd, Ord)]
pub struct Rule {
    /// Verbs (`*` = all).
    pub verbs: Vec<String>,
    /// API groups (`*` = all, `""` = core).
    pub api_groups: Vec<String>,
    /// Resources, `resource/subresource`, `*`, `*/subresource`.
    pub resources: Vec<String>,
    /// Object names (empty = every object).
    pub resource_names: Vec<String>,
    /// Non-resource URL paths, a trailing `*` matching any suffix.
    pub non_resource_urls: Vec<String>,
}

impl From<&rbac::PolicyRule> for Rule {
    fn from(r: &rbac::PolicyRule) -> Self {
        let v = |o: &Option<Vec<String>>| o.clone().unwrap_or_default();
        Rule {
            verbs: r.verbs.clone(),
            api_groups: v(&r.api_groups),
            resources: v(&r.resources),
            resource_names: v(&r.resource_names),
            non_resource_urls: v(&r.non_resource_urls),
        }
    }
}

impl Rule {
    /// The rule as `rbacv1.PolicyRule` (for review responses).
    pub fn to_policy_rule(&self) -> rbac::PolicyRule {
        let o = |v: &Vec<String>| (!v.is_empty()).then(|| v.clone());
        rbac::PolicyRule {
            verbs: self.verbs.clone(),
            api_groups: o(&self.api_groups),
            resources: o(&self.resources),
            resource_names: o(&self.resource_names),
            non_resource_urls: o(&self.non_resource_urls),
        }
    }

    /// `RuleAllows`: whether this rule grants the request.
    pub fn allows(&self, a: &Attributes<'_>) -> bool {
        if !verb_matches(self, a.verb) {
            return false;
        }
        if a.resource_request {
            let combined;
            let resource = if a.subresource.is_empty() {
                a.resource
            } else {
                combined = format!("{}/{}", a.resource, a.subresource);
                &combined
            };
            api_group_matches(self, a.api_group)
                && resource_matches(self, resource, a.subresource)
                && resource_name_matches(self, a.name)
        } else {
            non_resource_url_matches(self, a.path)
        }
    }
}

fn verb_matches(r: &Rule, verb: &str) -> bool {
    r.verbs.iter().any(|v| v == "*" || v == verb)
}

fn api_group_matches(r: &Rule, group: &str) -> bool {
    r.api_groups.iter().any(|g| g == "*" || g == group)
}

/// `ResourceMatches`: `*`, the exact `resource[/subresource]`, or `*/subresource`.
fn resource_matches(r: &Rule, combined: &str, subresource: &str) -> bool {
    r.resources.iter().any(|rr| {
        rr == "*"
            || rr == combined
            || (!subresource.is_empty()
                && rr.len() == subresource.len() + 2
                && rr.starts_with("*/")
                && rr.ends_with(subresource))
    })
}

fn resource_name_matches(r: &Rule, name: &str) -> bool {
    r.resource_names.is_empty() || r.resource_names.iter().any(|n| n == name)
}

fn non_resource_url_matches(r: &Rule, path: &str) -> bool {
    r.non_resource_urls.iter().any(|u| {
        u == "*" || u == path || (u.ends_with('*') && path.starts_with(u.trim_end_matches('*')))
    })
}

/// What a request asks to do (`authorizer.Attributes`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Attributes<'a> {
    /// Verb: get, list, watch, create, update, patch, delete, deletecollection, or a
    /// special verb (bind, escalate, impersonate); for non-resource requests the lowercase
    /// HTTP method.
    pub verb: &'a str,
    /// Whether this is a resource request (else a non-resource path).
    pub resource_request: bool,
    /// Namespace ("" = cluster scope or all namespaces).
    pub namespace: &'a str,
    /// API group ("" = core).
    pub api_group: &'a str,
    /// API version (for the 403's details only).
    pub api_version: &'a str,
    /// Resource.
    pub resource: &'a str,
    /// Subresource.
    pub subresource: &'a str,
    /// Object name ("" for collections).
    pub name: &'a str,
    /// URL path of a non-resource request.
    pub path: &'a str,
}

/// A binding's subject (`rbacv1.Subject`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    /// User, Group or ServiceAccount.
    pub kind: String,
    /// Name.
    pub name: String,
    /// Namespace of a ServiceAccount ("" = the binding's).
    pub namespace: String,
}

/// A RoleBinding or ClusterRoleBinding, reduced to what decisions need.
#[derive(Debug, Clone)]
pub struct Binding {
    /// The binding's name.
    pub name: String,
    /// The binding's namespace ("" for a ClusterRoleBinding).
    pub namespace: String,
    /// `roleRef.kind`: Role or ClusterRole.
    pub role_kind: String,
    /// `roleRef.name`.
    pub role_name: String,
    /// Who the binding applies to.
    pub subjects: Vec<Subject>,
}

/// The username of a service account (`serviceaccount.MakeUsername`).
pub fn service_account_username(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// Whether `subject` names `user` (`appliesToUser`); `namespace` is the binding's, the
/// default namespace of a ServiceAccount subject without one.
pub fn applies_to(user: &UserInfo, s: &Subject, namespace: &str) -> bool {
    match s.kind.as_str() {
        "User" => user.name == s.name,
        "Group" => user.groups.contains(&s.name),
        "ServiceAccount" => {
            let ns = if s.namespace.is_empty() {
                namespace
            } else {
                &s.namespace
            };
            // `serviceaccount.MatchesUsername`, without building the string.
            !ns.is_empty()
                && user
                    .name
                    .strip_prefix("system:serviceaccount:")
                    .and_then(|r| r.strip_prefix(ns))
                    .and_then(|r| r.strip_prefix(':'))
                    == Some(s.name.as_str())
        }
        _ => false,
    }
}

/// A visitor of rules with the binding and subject each comes from (None for errors).
type SourcedVisitor<'a> =
    dyn FnMut(Option<(&Binding, &Subject)>, Result<&Rule, String>) -> bool + 'a;

/// One tenant's RBAC objects, ready for decisions: roles by (namespace, name), cluster roles
/// by name with aggregation applied, bindings by namespace.
#[derive(Debug, Default)]
pub struct Policy {
    roles: HashMap<(String, String), Arc<[Rule]>>,
    cluster_roles: HashMap<String, Arc<[Rule]>>,
    role_bindings: HashMap<String, Vec<Binding>>,
    cluster_role_bindings: Vec<Binding>,
    /// Who some binding of the tenant names (see [`Policy::is_member`]).
    members: Members,
}

/// The subjects the bindings of a tenant name: users, groups (other than the groups of all
/// users) and service-account user names.
#[derive(Debug, Default)]
struct Members {
    users: std::collections::HashSet<String>,
    groups: std::collections::HashSet<String>,
}

impl Members {
    fn add(&mut self, b: &Binding) {
        for s in &b.subjects {
            match s.kind.as_str() {
                "User" => {
                    self.users.insert(s.name.clone());
                }
                "Group" if s.name != ALL_AUTHENTICATED && s.name != ALL_UNAUTHENTICATED => {
                    self.groups.insert(s.name.clone());
                }
                "ServiceAccount" => {
                    let ns = if s.namespace.is_empty() {
                        &b.namespace
                    } else {
                        &s.namespace
                    };
                    if !ns.is_empty() {
                        self.users.insert(service_account_username(ns, &s.name));
                    }
                }
                _ => {}
            }
        }
    }
}

/// The stored objects of one tenant a [`Policy`] is built from (JSON as stored).
#[derive(Debug, Default)]
pub struct Objects {
    /// Roles (every namespace).
    pub roles: Vec<Value>,
    /// ClusterRoles.
    pub cluster_roles: Vec<Value>,
    /// RoleBindings (every namespace).
    pub role_bindings: Vec<Value>,
    /// ClusterRoleBindings.
    pub cluster_role_bindings: Vec<Value>,
}

/// A decision: allowed, or denied with the reason upstream appends to the 403 message
/// ("" or `RBAC: <resolution errors>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// A rule allows the request.
    Allow,
    /// No rule allows it; the reason (may be empty).
    Deny(String),
}

impl Decision {
    /// Whether the request is allowed.
    pub fn allowed(&self) -> bool {
        matches!(self, Decision::Allow)
    }
}

fn meta_str<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get("metadata")
        .and_then(|m| m.get(key))
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn rules_of(rules: &Option<Vec<rbac::PolicyRule>>) -> Vec<Rule> {
    rules.iter().flatten().map(Rule::from).collect()
}

fn binding(
    name: String,
    namespace: String,
    r: &rbac::RoleRef,
    s: &Option<Vec<rbac::Subject>>,
) -> Binding {
    Binding {
        name,
        namespace,
        role_kind: r.kind.clone(),
        role_name: r.name.clone(),
        subjects: s
            .iter()
            .flatten()
            .map(|s| Subject {
                kind: s.kind.clone(),
                name: s.name.clone(),
                namespace: s.namespace.clone().unwrap_or_default(),
            })
            .collect(),
    }
}

/// `metav1.LabelSelectorAsSelector(sel).Matches(labels)`: every matchLabels pair and every
/// expression holds; an empty selector matches everything. An expression with an unknown
/// operator matches nothing (upstream refuses to build such a selector).
pub fn selector_matches(sel: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let labels_ok = sel
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let exprs_ok = sel.match_expressions.iter().flatten().all(|e| {
        let have = labels.get(&e.key);
        let values = e.values.as_deref().unwrap_or_default();
        match e.operator.as_str() {
            "In" => have.is_some_and(|h| values.contains(h)),
            "NotIn" => have.is_none_or(|h| !values.contains(h)),
            "Exists" => have.is_some(),
            "DoesNotExist" => have.is_none(),
            _ => false,
        }
    });
    labels_ok && exprs_ok
}

impl Policy {
    /// Builds the policy of one tenant from its stored objects. Objects that do not decode
    /// as their type are left out (they cannot be stored through the API, which validates
    /// them; leaving them out denies rather than allows).
    pub fn from_objects(o: &Objects) -> Self {
        let mut p = Policy::default();
        for v in &o.roles {
            if let Ok(r) = serde_json::from_value::<rbac::Role>(v.clone()) {
                p.roles.insert(
                    (meta_str(v, "namespace").into(), meta_str(v, "name").into()),
                    rules_of(&r.rules).into(),
                );
            }
        }
        let cluster_roles: Vec<rbac::ClusterRole> = o
            .cluster_roles
            .iter()
            .filter_map(|v| serde_json::from_value(v.clone()).ok())
            .collect();
        p.cluster_roles = aggregate(&cluster_roles);
        for v in &o.role_bindings {
            if let Ok(b) = serde_json::from_value::<rbac::RoleBinding>(v.clone()) {
                let ns = meta_str(v, "namespace").to_string();
                let b = binding(
                    meta_str(v, "name").into(),
                    ns.clone(),
                    &b.role_ref,
                    &b.subjects,
                );
                p.members.add(&b);
                p.role_bindings.entry(ns).or_default().push(b);
            }
        }
        for v in &o.cluster_role_bindings {
            if let Ok(b) = serde_json::from_value::<rbac::ClusterRoleBinding>(v.clone()) {
                let b = binding(
                    meta_str(v, "name").into(),
                    String::new(),
                    &b.role_ref,
                    &b.subjects,
                );
                p.members.add(&b);
                p.cluster_role_bindings.push(b);
            }
        }
        p
    }

    /// Whether `user` belongs to the tenant: some RoleBinding or ClusterRoleBinding names the
    /// user, one of its groups (not merely every authenticated or every anonymous user), or
    /// its service account. Upstream has one cluster, whose bootstrap bindings let every
    /// authenticated user read discovery; crdplane's tenants must not see each other, so an
    /// identity that no binding of a tenant names gets nothing there, not even those.
    pub fn is_member(&self, user: &UserInfo) -> bool {
        self.members.users.contains(&user.name)
            || user.groups.iter().any(|g| self.members.groups.contains(g))
    }

    /// The rules of a ClusterRole (aggregation applied), if it exists.
    pub fn cluster_role(&self, name: &str) -> Option<&Arc<[Rule]>> {
        self.cluster_roles.get(name)
    }

    /// `GetRoleReferenceRules`: the rules a binding in `namespace` refers to, or the
    /// lister's NotFound text.
    pub fn role_ref_rules(
        &self,
        kind: &str,
        name: &str,
        namespace: &str,
    ) -> Result<&Arc<[Rule]>, String> {
        match kind {
            "Role" => self
                .roles
                .get(&(namespace.to_string(), name.to_string()))
                .ok_or_else(|| format!("role.{GROUP} {name:?} not found")),
            "ClusterRole" => self
                .cluster_roles
                .get(name)
                .ok_or_else(|| format!("clusterrole.{GROUP} {name:?} not found")),
            k => Err(format!("unsupported role reference kind: {k:?}")),
        }
    }

    /// `VisitRulesFor`: calls `visit` with every rule that applies to `user` in `namespace`
    /// (ClusterRoleBindings first, then the namespace's RoleBindings) and with every
    /// resolution error; stops when `visit` returns false.
    pub fn visit_rules_for(
        &self,
        user: &UserInfo,
        namespace: &str,
        visit: &mut dyn FnMut(Result<&Rule, String>) -> bool,
    ) {
        self.visit_sourced(user, namespace, &mut |_, r| visit(r));
    }

    /// [`Self::visit_rules_for`], each rule with the binding and subject it comes from.
    fn visit_sourced(&self, user: &UserInfo, namespace: &str, visit: &mut SourcedVisitor<'_>) {
        let bindings = self.cluster_role_bindings.iter().map(|b| (b, "")).chain(
            (!namespace.is_empty())
                .then(|| self.role_bindings.get(namespace))
                .flatten()
                .into_iter()
                .flatten()
                .map(|b| (b, namespace)),
        );
        for (b, ns) in bindings {
            let Some(subject) = b.subjects.iter().find(|s| applies_to(user, s, ns)) else {
                continue;
            };
            match self.role_ref_rules(&b.role_kind, &b.role_name, ns) {
                Ok(rules) => {
                    for r in rules.iter() {
                        if !visit(Some((b, subject)), Ok(r)) {
                            return;
                        }
                    }
                }
                Err(e) => {
                    if !visit(None, Err(e)) {
                        return;
                    }
                }
            }
        }
    }

    /// [`Self::authorize`] with the reason upstream's RBAC authorizer gives either way: on
    /// an allow, `RBAC: allowed by <binding> of <role> to <subject>` (what an access review
    /// reports); on a denial, the resolution errors.
    pub fn authorize_explained(&self, user: &UserInfo, a: &Attributes<'_>) -> (bool, String) {
        let mut allowed_by: Option<String> = None;
        let mut errs: Vec<String> = Vec::new();
        self.visit_sourced(user, a.namespace, &mut |src, r| match r {
            Ok(rule) if rule.allows(a) => {
                allowed_by = src.map(|(b, s)| describe(b, s));
                false
            }
            Ok(_) => true,
            Err(e) => {
                errs.push(e);
                true
            }
        });
        match allowed_by {
            Some(by) => (true, format!("RBAC: allowed by {by}")),
            None if errs.is_empty() => (false, String::new()),
            None => (false, format!("RBAC: {}", aggregate_errors(&errs))),
        }
    }

    /// `RulesFor`: every rule of `user` in `namespace` and the resolution errors met.
    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> (Vec<Rule>, Vec<String>) {
        let (mut rules, mut errs) = (Vec::new(), Vec::new());
        self.visit_rules_for(user, namespace, &mut |r| {
            match r {
                Ok(r) => rules.push(r.clone()),
                Err(e) => errs.push(e),
            }
            true
        });
        (rules, errs)
    }

    /// The RBAC authorizer's decision (`RBACAuthorizer.Authorize`) for `user`.
    pub fn authorize(&self, user: &UserInfo, a: &Attributes<'_>) -> Decision {
        let mut allowed = false;
        let mut errs: Vec<String> = Vec::new();
        self.visit_rules_for(user, a.namespace, &mut |r| match r {
            Ok(rule) => {
                allowed = rule.allows(a);
                !allowed
            }
            Err(e) => {
                errs.push(e);
                true
            }
        });
        if allowed {
            Decision::Allow
        } else if errs.is_empty() {
            Decision::Deny(String::new())
        } else {
            Decision::Deny(format!("RBAC: {}", aggregate_errors(&errs)))
        }
    }
}

/// The describers of `rule.go`: `ClusterRoleBinding "name" of ClusterRole "role" to Group
/// "g"`, `RoleBinding "name/ns" of Role "role" to ServiceAccount "sa/ns"`.
fn describe(b: &Binding, s: &Subject) -> String {
    let subject = match s.kind.as_str() {
        "ServiceAccount" => {
            let ns = if s.namespace.is_empty() {
                &b.namespace
            } else {
                &s.namespace
            };
            format!("{} {:?}", s.kind, format!("{}/{}", s.name, ns))
        }
        _ => format!("{} {:?}", s.kind, s.name),
    };
    if b.namespace.is_empty() {
        format!(
            "ClusterRoleBinding {:?} of {} {:?} to {subject}",
            b.name, b.role_kind, b.role_name
        )
    } else {
        format!(
            "RoleBinding {:?} of {} {:?} to {subject}",
            format!("{}/{}", b.name, b.namespace),
            b.role_kind,
            b.role_name
        )
    }
}

/// `utilerrors.NewAggregate(errs).Error()`: one message as it is, several in brackets,
/// duplicates once.
pub fn aggregate_errors(errs: &[String]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for e in errs {
        if !seen.contains(&e.as_str()) {
            seen.push(e);
        }
    }
    if seen.len() == 1 {
        seen[0].to_string()
    } else {
        format!("[{}]", seen.join(", "))
    }
}

/// Whether `user` is in upstream's privileged group (`system:masters`): the authorizer that
/// runs before RBAC allows it everything, and RBAC writes skip the escalation checks.
pub fn is_privileged(user: &UserInfo) -> bool {
    user.groups.iter().any(|g| g == SYSTEM_MASTERS)
}

/// The ClusterRoles by name, each aggregated one holding the union of the rules of the
/// ClusterRoles its selectors match (other than itself), transitively, in name order, each
/// rule once — what the aggregation controller writes into it.
fn aggregate(roles: &[rbac::ClusterRole]) -> HashMap<String, Arc<[Rule]>> {
    let mut by_name: BTreeMap<&str, &rbac::ClusterRole> = BTreeMap::new();
    for r in roles {
        by_name.insert(r.metadata.name.as_deref().unwrap_or(""), r);
    }
    let mut done: HashMap<String, Arc<[Rule]>> = HashMap::new();
    fn resolve(
        name: &str,
        by_name: &BTreeMap<&str, &rbac::ClusterRole>,
        done: &mut HashMap<String, Arc<[Rule]>>,
        visiting: &mut Vec<String>,
    ) -> Arc<[Rule]> {
        if let Some(r) = done.get(name) {
            return r.clone();
        }
        let Some(role) = by_name.get(name) else {
            return Arc::from(Vec::new());
        };
        let Some(agg) = &role.aggregation_rule else {
            let rules: Arc<[Rule]> = rules_of(&role.rules).into();
            done.insert(name.to_string(), rules.clone());
            return rules;
        };
        if visiting.iter().any(|v| v == name) {
            // A cycle of aggregations: what is known so far.
            return Arc::from(rules_of(&role.rules));
        }
        visiting.push(name.to_string());
        let selectors = agg.cluster_role_selectors.as_deref().unwrap_or_default();
        let mut out: Vec<Rule> = Vec::new();
        for (other, r) in by_name {
            if *other == name {
                continue;
            }
            let labels = r.metadata.labels.clone().unwrap_or_default();
            if selectors.iter().any(|s| selector_matches(s, &labels)) {
                for rule in resolve(other, by_name, done, visiting).iter() {
                    if !out.contains(rule) {
                        out.push(rule.clone());
                    }
                }
            }
        }
        visiting.pop();
        let rules: Arc<[Rule]> = out.into();
        done.insert(name.to_string(), rules.clone());
        rules
    }
    let names: Vec<&str> = by_name.keys().copied().collect();
    for n in names {
        resolve(n, &by_name, &mut done, &mut Vec::new());
    }
    done
}

#[cfg(test)]
mod tests;
