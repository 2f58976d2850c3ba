//! `rbac.authorization.k8s.io/v1` Role, ClusterRole, RoleBinding and ClusterRoleBinding, per
//! tenant like every object. ClusterRole and ClusterRoleBinding are the cluster-scoped
//! built-in types (`builtin.rs` serves them without a namespace in the path).
//!
//! Where it sits: the built-in handler (`builtin.rs`) runs the generic handlers with these
//! strategies ([`super::BuiltinStrategy`]); the authorizer reads the stored objects.
//!
//! Follows k8s.io/kubernetes pkg/registry/rbac/{role,clusterrole,rolebinding,
//! clusterrolebinding}/strategy.go (create on update and unconditional update allowed, no
//! status; `ValidateUpdate` is the object's validation followed by the `…Update` validation,
//! which repeats it, so an update's causes list the object's errors twice and its message
//! once, as upstream's), pkg/apis/rbac/validation/validation.go (`ValidateRBACName`,
//! `ValidatePolicyRule`, `ValidateRoleBindingSubject`, the roleRef rules and the aggregation
//! rule's selectors), the omitempty fields of k8s.io/api rbac/v1 types.go (empty lists are
//! dropped, `rules` is written even when null), and the printers: roles and cluster roles
//! have none upstream (k8s.io/apiserver pkg/registry/rest/table.go's default Name / Created
//! At), bindings are pkg/printers/internalversion `printRoleBinding` /
//! `printClusterRoleBinding` (`rbac.SubjectsStrings` for the wide columns).

use super::{BuiltinType, age, column, name, name_column, s};
use crdplane_apiserver::patch::BuiltinPatch;
use crdplane_apiserver::render::table::TableConvertor;
use crdplane_apiserver::strategic::{Field, OBJECT_META};
use crdplane_core::ApiError;
use crdplane_core::builtin::{BuiltinResource, lookup};
use crdplane_core::field::{FieldError, go_quote, go_string_slice};
use crdplane_core::objectmeta::{
    label_selector_converts, name_is_dns_subdomain, validate_label_selector,
    validate_object_meta_update, validate_object_meta_with, validate_path_segment_name,
};
use k8s_openapi::api::rbac::v1 as rbac;
use serde_json::{Map, Value};
use std::sync::OnceLock;

/// The API group (`rbac.GroupName`).
pub const GROUP: &str = "rbac.authorization.k8s.io";

/// The `rbac.authorization.k8s.io/v1` Role type.
pub struct Roles;
/// The `rbac.authorization.k8s.io/v1` ClusterRole type.
pub struct ClusterRoles;
/// The `rbac.authorization.k8s.io/v1` RoleBinding type.
pub struct RoleBindings;
/// The `rbac.authorization.k8s.io/v1` ClusterRoleBinding type.
pub struct ClusterRoleBindings;

/// `rules`, `subjects`, `roleRef` and the selectors carry no patch strategy upstream: they
/// are replaced whole by a strategic merge patch.
static PATCH: BuiltinPatch = BuiltinPatch(&[("metadata", Field::Struct(OBJECT_META))]);

/// `ValidateRBACName`: `path.IsValidPathSegmentName`, for names and generateName prefixes
/// alike.
pub fn rbac_name(name: &str, _prefix: bool) -> Vec<String> {
    validate_path_segment_name(name, false)
}

fn object_meta(obj: &Value, namespaced: bool) -> Vec<FieldError> {
    let empty = Map::new();
    let m = obj
        .get("metadata")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    validate_object_meta_with(m, namespaced, "metadata", rbac_name)
}

/// The strings of a list-of-strings field (none when absent or null).
fn strs(v: Option<&Value>) -> Vec<&str> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|x| x.as_str().unwrap_or(""))
        .collect()
}

fn items(v: Option<&Value>) -> &[Value] {
    v.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// `ValidatePolicyRule` of the rule at `path` (`rules[i]`).
pub fn validate_policy_rule(rule: &Value, namespaced: bool, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if strs(rule.get("verbs")).is_empty() {
        errs.push(FieldError::required(
            format!("{path}.verbs"),
            "verbs must contain at least one value",
        ));
    }
    let urls = strs(rule.get("nonResourceURLs"));
    if !urls.is_empty() {
        let invalid = |detail: &str| {
            FieldError::invalid_typed(
                format!("{path}.nonResourceURLs"),
                Value::from(urls.clone()),
                go_string_slice(urls.iter().copied()),
                detail,
            )
        };
        if namespaced {
            errs.push(invalid(
                "namespaced rules cannot apply to non-resource URLs",
            ));
        }
        if ["apiGroups", "resources", "resourceNames"]
            .iter()
            .any(|f| !strs(rule.get(*f)).is_empty())
        {
            errs.push(invalid(
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
        return errs;
    }
    if strs(rule.get("apiGroups")).is_empty() {
        errs.push(FieldError::required(
            format!("{path}.apiGroups"),
            "resource rules must supply at least one api group",
        ));
    }
    if strs(rule.get("resources")).is_empty() {
        errs.push(FieldError::required(
            format!("{path}.resources"),
            "resource rules must supply at least one resource",
        ));
    }
    errs
}

fn validate_rules(obj: &Value, namespaced: bool, errs: &mut Vec<FieldError>) {
    for (i, rule) in items(obj.get("rules")).iter().enumerate() {
        errs.extend(validate_policy_rule(
            rule,
            namespaced,
            &format!("rules[{i}]"),
        ));
    }
}

/// `ValidateRole`.
pub fn validate_role(obj: &Value) -> Vec<FieldError> {
    let mut errs = object_meta(obj, true);
    validate_rules(obj, true, &mut errs);
    errs
}

/// The aggregation rule's selectors, when the rule is set.
fn aggregation_selectors(obj: &Value) -> Option<&[Value]> {
    obj.get("aggregationRule")
        .filter(|a| !a.is_null())
        .map(|a| items(a.get("clusterRoleSelectors")))
}

/// `ValidateClusterRole` with `ClusterRoleValidationOptions.AllowInvalidLabelValueInSelector`.
pub fn validate_cluster_role(obj: &Value, allow_invalid_label_value: bool) -> Vec<FieldError> {
    let mut errs = object_meta(obj, false);
    validate_rules(obj, false, &mut errs);
    if let Some(selectors) = aggregation_selectors(obj) {
        const PATH: &str = "aggregationRule.clusterRoleSelectors";
        if selectors.is_empty() {
            errs.push(FieldError::required(
                PATH,
                "at least one clusterRoleSelector required if aggregationRule is non-nil",
            ));
        }
        for (i, sel) in selectors.iter().enumerate() {
            let path = format!("{PATH}[{i}]");
            validate_label_selector(sel, allow_invalid_label_value, &path, &mut errs);
            if !label_selector_converts(sel) {
                // Upstream passes the failed conversion's nil Selector, printed "null".
                errs.push(FieldError::invalid(
                    path,
                    Value::String("null".into()),
                    "invalid label selector.",
                ));
            }
        }
    }
    errs
}

/// clusterrole/strategy.go `hasInvalidLabelValueInLabelSelector`: whether a stored cluster
/// role's selectors break the label value rules (then its updates may keep them).
pub fn has_invalid_label_value_in_selector(obj: &Value) -> bool {
    aggregation_selectors(obj).is_some_and(|sels| {
        sels.iter().any(|sel| {
            let mut errs = Vec::new();
            validate_label_selector(sel, false, "", &mut errs);
            !errs.is_empty()
        })
    })
}

/// (apiGroup, kind, name) of the object's roleRef.
fn role_ref(obj: &Value) -> (&str, &str, &str) {
    (
        s(obj, "/roleRef/apiGroup"),
        s(obj, "/roleRef/kind"),
        s(obj, "/roleRef/name"),
    )
}

/// The internal `rbac.RoleRef` as Go's `%#v` prints it.
fn go_role_ref(obj: &Value) -> String {
    let (g, k, n) = role_ref(obj);
    format!(
        "rbac.RoleRef{{APIGroup:{}, Kind:{}, Name:{}}}",
        go_quote(g),
        go_quote(k),
        go_quote(n)
    )
}

/// `ValidateRoleBindingSubject` of the subject at `path` (`subjects[i]`).
pub fn validate_subject(subject: &Value, namespaced: bool, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = s(subject, "/name");
    let api_group = s(subject, "/apiGroup");
    if name.is_empty() {
        errs.push(FieldError::required(format!("{path}.name"), ""));
    }
    let not_supported = |valid: &str| {
        FieldError::not_supported(
            format!("{path}.apiGroup"),
            Value::String(api_group.into()),
            &[valid],
        )
    };
    match s(subject, "/kind") {
        "ServiceAccount" => {
            if !name.is_empty() {
                for m in name_is_dns_subdomain(name, false) {
                    errs.push(FieldError::invalid(
                        format!("{path}.name"),
                        Value::String(name.into()),
                        m,
                    ));
                }
            }
            if !api_group.is_empty() {
                errs.push(not_supported(""));
            }
            if !namespaced && s(subject, "/namespace").is_empty() {
                errs.push(FieldError::required(format!("{path}.namespace"), ""));
            }
        }
        "User" | "Group" => {
            if api_group != GROUP {
                errs.push(not_supported(GROUP));
            }
        }
        kind => errs.push(FieldError::not_supported(
            format!("{path}.kind"),
            Value::String(kind.into()),
            &["ServiceAccount", "User", "Group"],
        )),
    }
    errs
}

/// `ValidateRoleBinding` (`namespaced`) or `ValidateClusterRoleBinding`.
pub fn validate_binding(obj: &Value, namespaced: bool) -> Vec<FieldError> {
    let mut errs = object_meta(obj, namespaced);
    let (api_group, kind, name) = role_ref(obj);
    if api_group != GROUP {
        errs.push(FieldError::not_supported(
            "roleRef.apiGroup",
            Value::String(api_group.into()),
            &[GROUP],
        ));
    }
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    if !kinds.contains(&kind) {
        errs.push(FieldError::not_supported(
            "roleRef.kind",
            Value::String(kind.into()),
            kinds,
        ));
    }
    if name.is_empty() {
        errs.push(FieldError::required("roleRef.name", ""));
    } else {
        for m in rbac_name(name, false) {
            errs.push(FieldError::invalid(
                "roleRef.name",
                Value::String(name.into()),
                m,
            ));
        }
    }
    for (i, subject) in items(obj.get("subjects")).iter().enumerate() {
        errs.extend(validate_subject(
            subject,
            namespaced,
            &format!("subjects[{i}]"),
        ));
    }
    errs
}

fn meta_update(new: &Value, old: &Value) -> Vec<FieldError> {
    match (
        new.get("metadata").and_then(Value::as_object),
        old.get("metadata").and_then(Value::as_object),
    ) {
        (Some(n), Some(o)) => validate_object_meta_update(n, o),
        _ => Vec::new(),
    }
}

/// The binding strategies' `ValidateUpdate`: `ValidateRoleBinding` +
/// `ValidateRoleBindingUpdate` (which repeats it, then ObjectMeta's update rules and the
/// immutable roleRef).
pub fn validate_binding_update(new: &Value, old: &Value, namespaced: bool) -> Vec<FieldError> {
    let mut errs = validate_binding(new, namespaced);
    errs.extend(validate_binding(new, namespaced));
    errs.extend(meta_update(new, old));
    if role_ref(new) != role_ref(old) {
        let (g, k, n) = role_ref(new);
        errs.push(FieldError::invalid_typed(
            "roleRef",
            serde_json::json!({"apiGroup": g, "kind": k, "name": n}),
            go_role_ref(new),
            "cannot change roleRef",
        ));
    }
    errs
}

/// Drops what Go's encoder leaves out (`omitempty` lists and strings of rbac/v1 types.go and
/// of LabelSelector) and, for the role types (`has_rules`), writes `rules` (not omitempty)
/// as `null` when absent or empty (what upstream reads back from its protobuf storage).
fn omit_empty(obj: &mut Value, has_rules: bool) {
    fn drop_empty(m: &mut Map<String, Value>, keys: &[&str]) {
        for k in keys {
            let empty = match m.get(*k) {
                Some(Value::Array(a)) => a.is_empty(),
                Some(Value::Object(o)) => o.is_empty(),
                Some(Value::String(s)) => s.is_empty(),
                Some(Value::Null) => true,
                _ => false,
            };
            if empty {
                m.remove(*k);
            }
        }
    }
    let Some(m) = obj.as_object_mut() else {
        return;
    };
    if let Some(Value::Array(rules)) = m.get_mut("rules") {
        for r in rules.iter_mut().filter_map(Value::as_object_mut) {
            drop_empty(
                r,
                &["apiGroups", "resources", "resourceNames", "nonResourceURLs"],
            );
        }
    }
    if let Some(Value::Array(subjects)) = m.get_mut("subjects") {
        for s in subjects.iter_mut().filter_map(Value::as_object_mut) {
            drop_empty(s, &["apiGroup", "namespace"]);
        }
    }
    if let Some(Value::Object(a)) = m.get_mut("aggregationRule") {
        if let Some(Value::Array(sels)) = a.get_mut("clusterRoleSelectors") {
            for sel in sels.iter_mut().filter_map(Value::as_object_mut) {
                if let Some(Value::Array(exprs)) = sel.get_mut("matchExpressions") {
                    for e in exprs.iter_mut().filter_map(Value::as_object_mut) {
                        drop_empty(e, &["values"]);
                    }
                }
                drop_empty(sel, &["matchLabels", "matchExpressions"]);
            }
        }
        drop_empty(a, &["clusterRoleSelectors"]);
    }
    drop_empty(m, &["subjects"]);
    if has_rules {
        // Stored as protobuf upstream, an empty list reads back as nil: `"rules": null`.
        let rules = m.entry("rules").or_insert(Value::Null);
        if rules.as_array().is_some_and(Vec::is_empty) {
            *rules = Value::Null;
        }
    }
}

/// `rbac.SubjectsStrings`: users, groups and service accounts (`namespace/name`), each
/// joined with ", ".
fn subjects_strings(obj: &Value) -> [String; 3] {
    let (mut users, mut groups, mut sas) = (Vec::new(), Vec::new(), Vec::new());
    for sub in items(obj.get("subjects")) {
        match s(sub, "/kind") {
            "ServiceAccount" => sas.push(format!("{}/{}", s(sub, "/namespace"), s(sub, "/name"))),
            "User" => users.push(s(sub, "/name").to_string()),
            "Group" => groups.push(s(sub, "/name").to_string()),
            _ => {}
        }
    }
    [users.join(", "), groups.join(", "), sas.join(", ")]
}

fn binding_printer(obj: &Value, now: chrono::DateTime<chrono::Utc>) -> Vec<Value> {
    let (_, kind, role) = role_ref(obj);
    let [users, groups, sas] = subjects_strings(obj);
    vec![
        name(obj),
        Value::String(format!("{kind}/{role}")),
        age(obj, now),
        Value::String(users),
        Value::String(groups),
        Value::String(sas),
    ]
}

/// The bindings' Table: Name, Role (`Kind/name`), Age, and the wide Users, Groups and
/// ServiceAccounts (priority 1). `what` names the binding in the wide columns'
/// descriptions; `role_ref` is the v1beta1 `roleRef` doc upstream describes the column with.
fn bindings_table(
    cell: &'static OnceLock<TableConvertor>,
    role_ref: &str,
    what: &str,
) -> &'static TableConvertor {
    cell.get_or_init(|| {
        TableConvertor::printed(
            vec![
                name_column(),
                column("Role", "string", "", role_ref, 0),
                super::age_column(),
                column("Users", "string", "", &format!("Users in the {what}"), 1),
                column("Groups", "string", "", &format!("Groups in the {what}"), 1),
                column(
                    "ServiceAccounts",
                    "string",
                    "",
                    &format!("ServiceAccounts in the {what}"),
                    1,
                ),
            ],
            binding_printer,
        )
    })
}

fn prepare(obj: &mut Value, has_rules: bool) -> Result<(), ApiError> {
    omit_empty(obj, has_rules);
    Ok(())
}

impl BuiltinType for Roles {
    fn resource(&self) -> &'static BuiltinResource {
        lookup(GROUP, "v1", "roles").expect("in the table")
    }
    fn canonical(&self, obj: Value) -> Result<Value, String> {
        super::typed::<rbac::Role>(obj, &[])
    }
    fn prepare_for_create(&self, obj: &mut Value) -> Result<(), ApiError> {
        prepare(obj, true)
    }
    fn prepare_for_update(&self, new: &mut Value, _old: &Value) -> Result<(), ApiError> {
        prepare(new, true)
    }
    fn validates_object_meta(&self) -> bool {
        false
    }
    fn validates_object_meta_update(&self) -> bool {
        false
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_role(obj)
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = validate_role(new);
        errs.extend(validate_role(new));
        errs.extend(meta_update(new, old));
        errs
    }
    fn allow_create_on_update(&self) -> bool {
        true
    }
    fn patch(&self) -> &'static BuiltinPatch {
        &PATCH
    }
    fn table(&self) -> &'static TableConvertor {
        TableConvertor::default_convertor()
    }
}

impl BuiltinType for ClusterRoles {
    fn resource(&self) -> &'static BuiltinResource {
        lookup(GROUP, "v1", "clusterroles").expect("in the table")
    }
    fn canonical(&self, obj: Value) -> Result<Value, String> {
        super::typed::<rbac::ClusterRole>(obj, &[])
    }
    fn prepare_for_create(&self, obj: &mut Value) -> Result<(), ApiError> {
        prepare(obj, true)
    }
    fn prepare_for_update(&self, new: &mut Value, _old: &Value) -> Result<(), ApiError> {
        prepare(new, true)
    }
    fn validates_object_meta(&self) -> bool {
        false
    }
    fn validates_object_meta_update(&self) -> bool {
        false
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_cluster_role(obj, false)
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let allow = has_invalid_label_value_in_selector(old);
        let mut errs = validate_cluster_role(new, allow);
        errs.extend(validate_cluster_role(new, allow));
        errs.extend(meta_update(new, old));
        errs
    }
    fn allow_create_on_update(&self) -> bool {
        true
    }
    fn patch(&self) -> &'static BuiltinPatch {
        &PATCH
    }
    fn table(&self) -> &'static TableConvertor {
        TableConvertor::default_convertor()
    }
}

impl BuiltinType for RoleBindings {
    fn resource(&self) -> &'static BuiltinResource {
        lookup(GROUP, "v1", "rolebindings").expect("in the table")
    }
    fn canonical(&self, obj: Value) -> Result<Value, String> {
        super::typed::<rbac::RoleBinding>(obj, &["roleRef"])
    }
    fn prepare_for_create(&self, obj: &mut Value) -> Result<(), ApiError> {
        prepare(obj, false)
    }
    fn prepare_for_update(&self, new: &mut Value, _old: &Value) -> Result<(), ApiError> {
        prepare(new, false)
    }
    fn validates_object_meta(&self) -> bool {
        false
    }
    fn validates_object_meta_update(&self) -> bool {
        false
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_binding(obj, true)
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        validate_binding_update(new, old, true)
    }
    fn allow_create_on_update(&self) -> bool {
        true
    }
    fn patch(&self) -> &'static BuiltinPatch {
        &PATCH
    }
    fn table(&self) -> &'static TableConvertor {
        static T: OnceLock<TableConvertor> = OnceLock::new();
        bindings_table(
            &T,
            "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.",
            "roleBinding",
        )
    }
}

impl BuiltinType for ClusterRoleBindings {
    fn resource(&self) -> &'static BuiltinResource {
        lookup(GROUP, "v1", "clusterrolebindings").expect("in the table")
    }
    fn canonical(&self, obj: Value) -> Result<Value, String> {
        super::typed::<rbac::ClusterRoleBinding>(obj, &["roleRef"])
    }
    fn prepare_for_create(&self, obj: &mut Value) -> Result<(), ApiError> {
        prepare(obj, false)
    }
    fn prepare_for_update(&self, new: &mut Value, _old: &Value) -> Result<(), ApiError> {
        prepare(new, false)
    }
    fn validates_object_meta(&self) -> bool {
        false
    }
    fn validates_object_meta_update(&self) -> bool {
        false
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_binding(obj, false)
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        validate_binding_update(new, old, false)
    }
    fn allow_create_on_update(&self) -> bool {
        true
    }
    fn patch(&self) -> &'static BuiltinPatch {
        &PATCH
    }
    fn table(&self) -> &'static TableConvertor {
        static T: OnceLock<TableConvertor> = OnceLock::new();
        bindings_table(
            &T,
            "RoleRef can only reference a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.",
            "clusterRoleBinding",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn texts(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    fn role(rules: Value) -> Value {
        json!({"metadata": {"name": "r", "namespace": "ns"}, "rules": rules})
    }

    #[test]
    fn policy_rules() {
        assert!(
            validate_role(&role(
                json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}])
            ))
            .is_empty()
        );
        assert_eq!(
            texts(&validate_role(&role(json!([{}, {"verbs": ["get"],
                "nonResourceURLs": ["/healthz", "/x"], "resources": ["pods"]}])))),
            [
                "rules[0].verbs: Required value: verbs must contain at least one value",
                "rules[0].apiGroups: Required value: resource rules must supply at least one api group",
                "rules[0].resources: Required value: resource rules must supply at least one resource",
                "rules[1].nonResourceURLs: Invalid value: []string{\"/healthz\", \"/x\"}: namespaced rules cannot apply to non-resource URLs",
                "rules[1].nonResourceURLs: Invalid value: []string{\"/healthz\", \"/x\"}: rules cannot apply to both regular resources and non-resource URLs",
            ]
        );
        // Cluster roles may name non-resource URLs.
        let cr = json!({"metadata": {"name": "c"},
            "rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]});
        assert!(validate_cluster_role(&cr, false).is_empty());
    }

    #[test]
    fn names_are_path_segments() {
        let r = json!({"metadata": {"name": "system:a b", "namespace": "ns"}});
        assert!(validate_role(&r).is_empty(), "colons and spaces are fine");
        assert_eq!(
            texts(&validate_role(
                &json!({"metadata": {"name": "a/b", "namespace": "ns"}})
            )),
            ["metadata.name: Invalid value: \"a/b\": may not contain '/'"]
        );
        assert_eq!(
            texts(&validate_role(&json!({"metadata": {"name": ".."}}))),
            [
                "metadata.name: Invalid value: \"..\": may not be '..'",
                "metadata.namespace: Required value"
            ]
        );
        assert_eq!(
            texts(&validate_cluster_role(
                &json!({"metadata": {"name": "c", "namespace": "ns"}}),
                false
            )),
            ["metadata.namespace: Forbidden: not allowed on this type"]
        );
    }

    #[test]
    fn aggregation_rules() {
        let cr = |a: Value| json!({"metadata": {"name": "c"}, "aggregationRule": a});
        assert!(
            validate_cluster_role(
                &cr(json!({"clusterRoleSelectors": [{"matchLabels": {"a": "b"}}]})),
                false
            )
            .is_empty()
        );
        assert_eq!(
            texts(&validate_cluster_role(&cr(json!({})), false)),
            [
                "aggregationRule.clusterRoleSelectors: Required value: at least one clusterRoleSelector required if aggregationRule is non-nil"
            ]
        );
        let bad = cr(json!({"clusterRoleSelectors": [
            {"matchExpressions": [{"key": "k", "operator": "Near"}]}]}));
        assert_eq!(
            texts(&validate_cluster_role(&bad, false)),
            [
                "aggregationRule.clusterRoleSelectors[0].matchExpressions[0].operator: Invalid value: \"Near\": not a valid selector operator",
                "aggregationRule.clusterRoleSelectors[0]: Invalid value: \"null\": invalid label selector.",
            ]
        );
        let odd_value = cr(json!({"clusterRoleSelectors": [
            {"matchExpressions": [{"key": "k", "operator": "In", "values": ["a b"]}]}]}));
        assert!(has_invalid_label_value_in_selector(&odd_value));
        assert!(!has_invalid_label_value_in_selector(&cr(json!({}))));
        assert_eq!(validate_cluster_role(&odd_value, false).len(), 2);
        assert_eq!(validate_cluster_role(&odd_value, true).len(), 1);
    }

    #[test]
    fn bindings() {
        let rb = |role_ref: Value, subjects: Value| {
            json!({"metadata": {"name": "b", "namespace": "ns"}, "roleRef": role_ref,
                   "subjects": subjects})
        };
        let view = json!({"apiGroup": GROUP, "kind": "ClusterRole", "name": "view"});
        assert!(
            validate_binding(
                &rb(
                    view.clone(),
                    json!([{"kind": "User", "apiGroup": GROUP, "name": "jane"},
                      {"kind": "ServiceAccount", "name": "default"}])
                ),
                true
            )
            .is_empty()
        );
        assert_eq!(
            texts(&validate_binding(
                &rb(
                    json!({"apiGroup": "", "kind": "Pod", "name": ""}),
                    json!([{"kind": "ServiceAccount", "name": "A_B", "apiGroup": "x"},
                      {"kind": "User", "name": "u"}, {"kind": "Robot", "name": ""}])
                ),
                true
            )),
            [
                "roleRef.apiGroup: Unsupported value: \"\": supported values: \"rbac.authorization.k8s.io\"",
                "roleRef.kind: Unsupported value: \"Pod\": supported values: \"Role\", \"ClusterRole\"",
                "roleRef.name: Required value",
                "subjects[0].name: Invalid value: \"A_B\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                "subjects[0].apiGroup: Unsupported value: \"x\": supported values: \"\"",
                "subjects[1].apiGroup: Unsupported value: \"\": supported values: \"rbac.authorization.k8s.io\"",
                "subjects[2].name: Required value",
                "subjects[2].kind: Unsupported value: \"Robot\": supported values: \"ServiceAccount\", \"User\", \"Group\"",
            ]
        );
        // Cluster role bindings: only ClusterRole, service accounts need a namespace.
        let crb = json!({"metadata": {"name": "b"},
            "roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "a/b"},
            "subjects": [{"kind": "ServiceAccount", "name": "sa"}]});
        assert_eq!(
            texts(&validate_binding(&crb, false)),
            [
                "roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\"",
                "roleRef.name: Invalid value: \"a/b\": may not contain '/'",
                "subjects[0].namespace: Required value",
            ]
        );
    }

    #[test]
    fn role_ref_is_immutable() {
        let old = json!({"metadata": {"name": "b", "namespace": "ns"},
            "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "view"}});
        assert!(validate_binding_update(&old, &old, true).is_empty());
        let mut new = old.clone();
        new["roleRef"]["name"] = json!("edit");
        let errs = validate_binding_update(&new, &old, true);
        assert_eq!(
            texts(&errs),
            [
                "roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"ClusterRole\", Name:\"edit\"}: cannot change roleRef"
            ]
        );
        let e = ApiError::invalid("RoleBinding", GROUP, "b", &errs);
        assert_eq!(
            e.message,
            "RoleBinding.rbac.authorization.k8s.io \"b\" is invalid: roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"ClusterRole\", Name:\"edit\"}: cannot change roleRef"
        );
        // The object's errors come twice (Validate + ValidateUpdate), the message once.
        new["subjects"] = json!([{"kind": "Robot", "name": "x"}]);
        let errs = validate_binding_update(&new, &old, true);
        assert_eq!(errs.len(), 3);
        let e = ApiError::invalid("RoleBinding", GROUP, "b", &errs);
        assert!(
            e.message.starts_with(
                "RoleBinding.rbac.authorization.k8s.io \"b\" is invalid: [subjects[0].kind: Unsupported value: \"Robot\""
            ),
            "{}",
            e.message
        );
    }

    #[test]
    fn omitempty_fields() {
        for mut r in [
            json!({"metadata": {}}),
            json!({"metadata": {}, "rules": []}),
        ] {
            omit_empty(&mut r, true);
            assert_eq!(r["rules"], Value::Null);
            assert!(r.as_object().unwrap().contains_key("rules"));
        }
        let mut rb = json!({"kind": "RoleBinding", "subjects": [],
            "roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "r"}});
        omit_empty(&mut rb, false);
        assert_eq!(
            rb,
            json!({"kind": "RoleBinding", "roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "r"}})
        );
        let mut cr = json!({"kind": "ClusterRole", "rules": [{"verbs": ["get"], "apiGroups": [],
            "nonResourceURLs": ["/x"]}], "aggregationRule": {"clusterRoleSelectors": [
            {"matchLabels": {}, "matchExpressions": [{"key": "k", "operator": "Exists", "values": []}]}]}});
        omit_empty(&mut cr, true);
        assert_eq!(
            cr,
            json!({"kind": "ClusterRole", "rules": [{"verbs": ["get"], "nonResourceURLs": ["/x"]}],
                "aggregationRule": {"clusterRoleSelectors": [
                    {"matchExpressions": [{"key": "k", "operator": "Exists"}]}]}})
        );
    }

    #[test]
    fn tables() {
        let now = chrono::Utc::now();
        let r = json!({"metadata": {"name": "r", "creationTimestamp": "2026-01-02T03:04:05Z"}});
        assert_eq!(
            Roles.table().cells(&r, now),
            [json!("r"), json!("2026-01-02T03:04:05Z")]
        );
        assert_eq!(
            ClusterRoles
                .table()
                .cells(&json!({"metadata": {"name": "c"}}), now)[1],
            "0001-01-01T00:00:00Z"
        );
        let cols: Vec<(String, String, i32)> = Roles
            .table()
            .column_definitions()
            .iter()
            .map(|c| (c.name.clone(), c.type_.clone(), c.priority))
            .collect();
        assert_eq!(
            cols,
            [
                ("Name".into(), "string".into(), 0),
                ("Created At".into(), "date".into(), 0)
            ]
        );
        let rb = json!({"metadata": {"name": "b"},
            "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "jane"}, {"kind": "User", "name": "joe"},
                         {"kind": "Group", "name": "devs"},
                         {"kind": "ServiceAccount", "name": "sa", "namespace": "ns"},
                         {"kind": "Other", "name": "x"}]});
        let cells = RoleBindings.table().cells(&rb, now);
        assert_eq!(cells[..2], [json!("b"), json!("ClusterRole/view")]);
        assert_eq!(
            cells[3..],
            [json!("jane, joe"), json!("devs"), json!("ns/sa")]
        );
        let defs = ClusterRoleBindings.table().column_definitions();
        let names: Vec<&str> = defs.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            ["Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"]
        );
        assert_eq!(defs[3].priority, 1);
        assert_eq!(defs[3].description, "Users in the clusterRoleBinding");
        assert_eq!(
            RoleBindings.table().column_definitions()[5].description,
            "ServiceAccounts in the roleBinding"
        );
    }
}
