//! The audit policy: kube-apiserver's `--audit-policy-file` (`audit.k8s.io/v1` `Policy`),
//! loaded and validated once at start, then evaluated once per request by the gateway's
//! audit layer.
//!
//! Follows upstream's `pkg/audit/policy/reader.go` (loading: lenient decoding, the group
//! version checked, `ValidatePolicy`'s aggregate before the zero-rules refusal),
//! `pkg/apis/audit/validation` (the texts) and `pkg/audit/policy/checker.go` (the first rule
//! that matches decides; no match is level `None`; a rule's omitted stages are its own plus
//! the policy's; its `omitManagedFields`, when set, overrides the policy's).

use crdplane_core::field::{FieldError, aggregate_message, go_string_slice};
use serde::Deserialize;
use serde_json::Value;

/// How much of a request is recorded (upstream `audit.Level`), in increasing order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Not recorded.
    None,
    /// User, timestamps, resource, verb; no bodies.
    Metadata,
    /// Metadata and the request body.
    Request,
    /// Metadata, the request body and the response body.
    RequestResponse,
}

impl Level {
    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::None => "None",
            Level::Metadata => "Metadata",
            Level::Request => "Request",
            Level::RequestResponse => "RequestResponse",
        }
    }
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "None" => Level::None,
            "Metadata" => Level::Metadata,
            "Request" => Level::Request,
            "RequestResponse" => Level::RequestResponse,
            _ => return None,
        })
    }
}

/// A point in a request's life at which an event is recorded (upstream `audit.Stage`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    /// As soon as the request is received, before it is handled.
    RequestReceived,
    /// Once the response head is sent, for long-running requests (watches) only.
    ResponseStarted,
    /// Once the response is complete.
    ResponseComplete,
    /// When handling the request panicked.
    Panic,
}

impl Stage {
    /// Every stage, in upstream's order of `validOmitStages`.
    pub const ALL: [Stage; 4] = [
        Stage::RequestReceived,
        Stage::ResponseStarted,
        Stage::ResponseComplete,
        Stage::Panic,
    ];
    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::RequestReceived => "RequestReceived",
            Stage::ResponseStarted => "ResponseStarted",
            Stage::ResponseComplete => "ResponseComplete",
            Stage::Panic => "Panic",
        }
    }
    fn parse(s: &str) -> Option<Self> {
        Stage::ALL.into_iter().find(|st| st.as_str() == s)
    }
    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// A set of stages (the ones a rule leaves out).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stages(u8);

impl Stages {
    /// Whether `s` is in the set.
    pub fn contains(self, s: Stage) -> bool {
        self.0 & s.bit() != 0
    }
    fn with(self, s: Stage) -> Self {
        Stages(self.0 | s.bit())
    }
    fn union(self, o: Stages) -> Self {
        Stages(self.0 | o.0)
    }
}

/// What the policy decides for one request (upstream `RequestAuditConfig`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// The level to record at.
    pub level: Level,
    /// Stages not recorded.
    pub omit_stages: Stages,
    /// Whether `metadata.managedFields` is left out of recorded bodies.
    pub omit_managed_fields: bool,
}

impl Decision {
    /// Nothing is recorded.
    pub const NONE: Decision = Decision {
        level: Level::None,
        omit_stages: Stages(0),
        omit_managed_fields: false,
    };
}

/// What a rule is matched against (upstream `authorizer.Attributes`, as far as the audit
/// policy reads them).
#[derive(Debug, Clone, Copy, Default)]
pub struct Attributes<'a> {
    /// The user's name; None for a request nobody is authenticated as (a rule naming
    /// users or groups then does not match).
    pub user: Option<&'a str>,
    /// The user's groups.
    pub groups: &'a [String],
    /// The request verb (`get`, `list`, `watch`, `create`, …; the lowercase method for
    /// non-resource requests).
    pub verb: &'a str,
    /// Whether the request names a resource.
    pub resource_request: bool,
    /// API group ("" = core).
    pub group: &'a str,
    /// Plural resource.
    pub resource: &'a str,
    /// Subresource ("" = none).
    pub subresource: &'a str,
    /// Namespace ("" = cluster scope).
    pub namespace: &'a str,
    /// Object name ("" = a collection).
    pub name: &'a str,
    /// The path, for non-resource requests.
    pub path: &'a str,
}

/// One group's resources in a rule.
#[derive(Debug, Clone, PartialEq)]
struct GroupResources {
    group: String,
    resources: Vec<String>,
    resource_names: Vec<String>,
}

/// One rule of the policy.
#[derive(Debug, Clone, PartialEq)]
struct Rule {
    level: Level,
    users: Vec<String>,
    user_groups: Vec<String>,
    verbs: Vec<String>,
    resources: Vec<GroupResources>,
    namespaces: Vec<String>,
    non_resource_urls: Vec<String>,
    omit_stages: Stages,
    omit_managed_fields: Option<bool>,
}

/// A loaded, valid audit policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    rules: Vec<Rule>,
    omit_managed_fields: bool,
}

/// The group versions a policy file may name (upstream reads v1 only since 1.24).
pub const API_VERSION: &str = "audit.k8s.io/v1";

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct FilePolicy {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    rules: Vec<FileRule>,
    #[serde(default)]
    omit_stages: Vec<String>,
    #[serde(default)]
    omit_managed_fields: bool,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct FileRule {
    #[serde(default)]
    level: String,
    #[serde(default)]
    users: Vec<String>,
    #[serde(default)]
    user_groups: Vec<String>,
    #[serde(default)]
    verbs: Vec<String>,
    #[serde(default)]
    resources: Vec<FileGroupResources>,
    #[serde(default)]
    namespaces: Vec<String>,
    #[serde(default, rename = "nonResourceURLs")]
    non_resource_urls: Vec<String>,
    #[serde(default)]
    omit_stages: Vec<String>,
    #[serde(default)]
    omit_managed_fields: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct FileGroupResources {
    #[serde(default)]
    group: String,
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    resource_names: Vec<String>,
}

fn valid_levels() -> Vec<&'static str> {
    vec!["Metadata", "None", "Request", "RequestResponse"]
}

/// `validateOmitStages`: each stage named must exist.
fn omit_stages(stages: &[String], path: &str, errs: &mut Vec<FieldError>) -> Stages {
    let mut set = Stages::default();
    for (i, s) in stages.iter().enumerate() {
        match Stage::parse(s) {
            Some(st) => set = set.with(st),
            None => errs.push(FieldError::invalid(
                format!("{path}[{i}]"),
                Value::String(s.clone()),
                format!(
                    "allowed stages are {}",
                    Stage::ALL.map(Stage::as_str).join(",")
                ),
            )),
        }
    }
    set
}

/// `validatePolicyRule` for rule `i`, and the rule it makes when valid.
fn rule(r: FileRule, i: usize, policy_stages: Stages, errs: &mut Vec<FieldError>) -> Rule {
    let path = format!("rules[{i}]");
    let level = match r.level.as_str() {
        "" => {
            errs.push(FieldError::required(format!("{path}.level"), ""));
            Level::None
        }
        l => Level::parse(l).unwrap_or_else(|| {
            errs.push(FieldError::not_supported(
                format!("{path}.level"),
                Value::String(l.to_string()),
                &valid_levels(),
            ));
            Level::None
        }),
    };
    for (j, url) in r.non_resource_urls.iter().enumerate() {
        if url == "*" {
            continue;
        }
        let field = format!("{path}.nonResourceURLs[{j}]");
        if !url.starts_with('/') {
            errs.push(FieldError::invalid(
                &field,
                Value::String(url.clone()),
                "non-resource URL rules must begin with a '/' character",
            ));
        }
        if !url.is_empty() && url[..url.len() - 1].contains('*') {
            errs.push(FieldError::invalid(
                &field,
                Value::String(url.clone()),
                "non-resource URL wildcards '*' must be the final character of the rule",
            ));
        }
    }
    for gr in &r.resources {
        if !gr.group.is_empty() {
            let msgs = crdplane_core::validation::is_dns1123_subdomain(&gr.group);
            if !msgs.is_empty() {
                errs.push(FieldError::invalid(
                    format!("{path}.resources.group"),
                    Value::String(gr.group.clone()),
                    msgs.join(","),
                ));
            }
        }
        if !gr.resource_names.is_empty() && gr.resources.is_empty() {
            errs.push(FieldError::invalid_typed(
                format!("{path}.resources.resourceNames"),
                Value::from(gr.resource_names.clone()),
                go_string_slice(gr.resource_names.iter().map(String::as_str)),
                "using resourceNames requires at least one resource",
            ));
        }
    }
    let own = omit_stages(&r.omit_stages, &format!("{path}.omitStages"), errs);
    if !r.non_resource_urls.is_empty() && (!r.resources.is_empty() || !r.namespaces.is_empty()) {
        errs.push(FieldError::invalid_typed(
            format!("{path}.nonResourceURLs"),
            Value::from(r.non_resource_urls.clone()),
            go_string_slice(r.non_resource_urls.iter().map(String::as_str)),
            "rules cannot apply to both regular resources and non-resource URLs",
        ));
    }
    Rule {
        level,
        users: r.users,
        user_groups: r.user_groups,
        verbs: r.verbs,
        resources: r
            .resources
            .into_iter()
            .map(|g| GroupResources {
                group: g.group,
                resources: g.resources,
                resource_names: g.resource_names,
            })
            .collect(),
        namespaces: r.namespaces,
        non_resource_urls: r.non_resource_urls,
        omit_stages: own.union(policy_stages),
        omit_managed_fields: r.omit_managed_fields,
    }
}

impl Policy {
    /// Reads and loads the policy file at `path` (upstream `LoadPolicyFromFile`).
    pub fn load(path: &std::path::Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("failed to read file path {:?}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("{e}: from file {}", path.display()))
    }

    /// Loads a policy from its YAML or JSON text (upstream `LoadPolicyFromBytes`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let file: FilePolicy = if text.trim().is_empty() {
            FilePolicy::default()
        } else {
            serde_saphyr::from_str(text).map_err(|e| format!("failed decoding: {e}"))?
        };
        if file.api_version != API_VERSION || file.kind != "Policy" {
            let (group, version) = file
                .api_version
                .rsplit_once('/')
                .unwrap_or(("", file.api_version.as_str()));
            return Err(format!(
                "unknown group version field {group}/{version}, Kind={} in policy",
                file.kind
            ));
        }
        let mut errs = Vec::new();
        let policy_stages = omit_stages(&file.omit_stages, "omitStages", &mut errs);
        let rules: Vec<Rule> = file
            .rules
            .into_iter()
            .enumerate()
            .map(|(i, r)| rule(r, i, policy_stages, &mut errs))
            .collect();
        if !errs.is_empty() {
            return Err(aggregate_message(&errs));
        }
        if rules.is_empty() {
            return Err("loaded illegal policy with 0 rules".into());
        }
        Ok(Policy {
            rules,
            omit_managed_fields: file.omit_managed_fields,
        })
    }

    /// What the first rule matching `a` says; [`Decision::NONE`] when none does
    /// (upstream `EvaluatePolicyRule`).
    pub fn evaluate(&self, a: &Attributes<'_>) -> Decision {
        self.rules
            .iter()
            .find(|r| r.matches(a))
            .map_or(Decision::NONE, |r| Decision {
                level: r.level,
                omit_stages: r.omit_stages,
                omit_managed_fields: r.omit_managed_fields.unwrap_or(self.omit_managed_fields),
            })
    }
}

fn has(list: &[String], s: &str) -> bool {
    list.iter().any(|x| x == s)
}

impl Rule {
    /// upstream `ruleMatches`.
    fn matches(&self, a: &Attributes<'_>) -> bool {
        if !self.users.is_empty() && !a.user.is_some_and(|u| has(&self.users, u)) {
            return false;
        }
        if !self.user_groups.is_empty()
            && (a.user.is_none() || !a.groups.iter().any(|g| has(&self.user_groups, g)))
        {
            return false;
        }
        if !self.verbs.is_empty() && !has(&self.verbs, a.verb) {
            return false;
        }
        if !self.namespaces.is_empty() || !self.resources.is_empty() {
            return self.matches_resource(a);
        }
        if !self.non_resource_urls.is_empty() {
            return !a.resource_request
                && self
                    .non_resource_urls
                    .iter()
                    .any(|spec| path_matches(a.path, spec));
        }
        true
    }

    /// upstream `ruleMatchesResource`: `resource`, `resource/subresource`, `*`,
    /// `*/subresource` and `resource/*`, limited to the resourceNames when given.
    fn matches_resource(&self, a: &Attributes<'_>) -> bool {
        if !a.resource_request {
            return false;
        }
        if !self.namespaces.is_empty() && !has(&self.namespaces, a.namespace) {
            return false;
        }
        if self.resources.is_empty() {
            return true;
        }
        let combined = if a.subresource.is_empty() {
            std::borrow::Cow::Borrowed(a.resource)
        } else {
            std::borrow::Cow::Owned(format!("{}/{}", a.resource, a.subresource))
        };
        self.resources.iter().any(|gr| {
            gr.group == a.group
                && (gr.resources.is_empty()
                    || gr.resources.iter().any(|res| {
                        (gr.resource_names.is_empty() || has(&gr.resource_names, a.name))
                            && (res == combined.as_ref()
                                || res == "*"
                                || (!a.subresource.is_empty()
                                    && res.strip_prefix("*/") == Some(a.subresource))
                                || res.strip_suffix("/*") == Some(a.resource))
                    }))
        })
    }
}

/// upstream `pathMatches`: `*`, the path itself, or a prefix ending in `*`.
fn path_matches(path: &str, spec: &str) -> bool {
    spec == "*"
        || spec == path
        || spec
            .strip_suffix('*')
            .is_some_and(|prefix| path.starts_with(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: None
    users: ["system:kube-proxy"]
  - level: None
    nonResourceURLs: ["/healthz*", "/version"]
  - level: Metadata
    resources:
      - group: ""
        resources: ["secrets", "configmaps"]
  - level: RequestResponse
    omitManagedFields: true
    resources:
      - group: stable.example.com
        resources: ["crontabs/status"]
      - group: stable.example.com
        resources: ["*/scale"]
  - level: Request
    userGroups: ["team-a"]
    namespaces: ["team-a", ""]
    omitStages: [ResponseStarted]
  - level: Request
    verbs: [delete, deletecollection]
    resources:
      - group: stable.example.com
        resources: ["crontabs/*"]
        resourceNames: ["precious"]
  - level: Metadata
"#;

    fn attrs<'a>(
        user: &'a str,
        groups: &'a [String],
        verb: &'a str,
        path: &'a str,
    ) -> Attributes<'a> {
        // A tiny request-info: /<group or core>/<ns>/<resource>[/<name>[/<sub>]] or a
        // non-resource path (starting with //).
        if path.starts_with("//") {
            return Attributes {
                user: Some(user),
                groups,
                verb,
                path: &path[1..],
                ..Default::default()
            };
        }
        let parts: Vec<&str> = path.split('/').collect();
        Attributes {
            user: Some(user),
            groups,
            verb,
            resource_request: true,
            group: if parts[0] == "core" { "" } else { parts[0] },
            namespace: parts[1],
            resource: parts[2],
            name: parts.get(3).copied().unwrap_or(""),
            subresource: parts.get(4).copied().unwrap_or(""),
            path: "",
        }
    }

    #[test]
    fn the_first_matching_rule_decides() {
        let p = Policy::parse(POLICY).unwrap();
        let none: Vec<String> = vec![];
        let team_a = vec!["team-a".to_string()];
        let g = "stable.example.com";
        // (user, groups, verb, request), the level the policy gives.
        type Case<'a> = ((&'a str, &'a [String], &'a str, String), Level);
        let cases: Vec<Case<'_>> = vec![
            (
                (
                    "system:kube-proxy",
                    &none,
                    "get",
                    "core/x/secrets".to_string(),
                ),
                Level::None,
            ),
            (
                ("jane", &none, "get", "//healthz/ready".to_string()),
                Level::None,
            ),
            (("jane", &none, "get", "//version".to_string()), Level::None),
            (
                ("jane", &none, "get", "//versionx".to_string()),
                Level::Metadata,
            ),
            (
                ("jane", &none, "create", "core/x/secrets".to_string()),
                Level::Metadata,
            ),
            (
                ("jane", &team_a, "get", "core/x/configmaps/c".to_string()),
                Level::Metadata,
            ),
            (
                ("jane", &none, "update", format!("{g}/x/crontabs/c/status")),
                Level::RequestResponse,
            ),
            (
                ("jane", &none, "update", format!("{g}/x/crontabs/c/scale")),
                Level::RequestResponse,
            ),
            // crontabs/status does not match the main resource.
            (
                ("jane", &none, "update", format!("{g}/x/crontabs/c")),
                Level::Metadata,
            ),
            // team-a: its namespace and cluster scope, not another namespace.
            (
                ("jane", &team_a, "get", format!("{g}/team-a/crontabs")),
                Level::Request,
            ),
            (
                ("jane", &team_a, "get", format!("{g}//crontabs")),
                Level::Request,
            ),
            (
                ("jane", &team_a, "get", format!("{g}/b/crontabs")),
                Level::Metadata,
            ),
            // resourceNames and resource/*: only the named object, main resource included.
            (
                ("jane", &none, "delete", format!("{g}/b/crontabs/precious")),
                Level::Request,
            ),
            (
                ("jane", &none, "delete", format!("{g}/b/crontabs/other")),
                Level::Metadata,
            ),
            (
                ("jane", &none, "get", format!("{g}/b/crontabs/precious")),
                Level::Metadata,
            ),
        ];
        for ((u, groups, verb, path), want) in cases {
            let a = attrs(u, groups, verb, &path);
            assert_eq!(p.evaluate(&a).level, want, "{a:?}");
        }
    }

    #[test]
    fn omitted_stages_and_managed_fields() {
        let p = Policy::parse(POLICY).unwrap();
        let team_a = vec!["team-a".to_string()];
        let d = p.evaluate(&attrs("jane", &team_a, "get", "g.io/team-a/xs"));
        assert!(d.omit_stages.contains(Stage::RequestReceived));
        assert!(d.omit_stages.contains(Stage::ResponseStarted));
        assert!(!d.omit_stages.contains(Stage::ResponseComplete));
        assert!(!d.omit_managed_fields);
        let d = p.evaluate(&attrs(
            "jane",
            &[],
            "patch",
            "stable.example.com/x/crontabs/c/status",
        ));
        assert!(d.omit_managed_fields);
        assert!(!d.omit_stages.contains(Stage::ResponseStarted));
    }

    #[test]
    fn unauthenticated_requests_match_no_user_or_group_rule() {
        let p = Policy::parse(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Request\n  userGroups: [system:unauthenticated]\n- level: Metadata\n",
        )
        .unwrap();
        let a = Attributes {
            user: None,
            verb: "get",
            path: "/api",
            ..Default::default()
        };
        assert_eq!(p.evaluate(&a).level, Level::Metadata);
    }

    #[test]
    fn upstreams_load_errors() {
        let cases = [
            ("", "unknown group version field /, Kind= in policy"),
            (
                "apiVersion: audit.k8s.io/v1beta1\nkind: Policy\nrules: [{level: None}]",
                "unknown group version field audit.k8s.io/v1beta1, Kind=Policy in policy",
            ),
            (
                "apiVersion: audit.k8s.io/v1\nkind: Policy",
                "loaded illegal policy with 0 rules",
            ),
            (
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{}]",
                "rules[0].level: Required value",
            ),
            (
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: Everything}]",
                "rules[0].level: Unsupported value: \"Everything\": supported values: \"Metadata\", \"None\", \"Request\", \"RequestResponse\"",
            ),
            (
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [Started]\nrules: [{level: None, omitStages: [Panic, Done]}]",
                "[omitStages[0]: Invalid value: \"Started\": allowed stages are RequestReceived,ResponseStarted,ResponseComplete,Panic, rules[0].omitStages[1]: Invalid value: \"Done\": allowed stages are RequestReceived,ResponseStarted,ResponseComplete,Panic]",
            ),
            (
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  nonResourceURLs: [healthz, /a*b]",
                "[rules[0].nonResourceURLs[0]: Invalid value: \"healthz\": non-resource URL rules must begin with a '/' character, rules[0].nonResourceURLs[1]: Invalid value: \"/a*b\": non-resource URL wildcards '*' must be the final character of the rule]",
            ),
            (
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  namespaces: [a]\n  nonResourceURLs: [/x]",
                "rules[0].nonResourceURLs: Invalid value: []string{\"/x\"}: rules cannot apply to both regular resources and non-resource URLs",
            ),
            (
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  resources: [{group: rbac.authorization.k8s.io/v1, resourceNames: [x]}]",
                "[rules[0].resources.group: Invalid value: \"rbac.authorization.k8s.io/v1\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'), rules[0].resources.resourceNames: Invalid value: []string{\"x\"}: using resourceNames requires at least one resource]",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(Policy::parse(text).unwrap_err(), want, "{text}");
        }
        // Unknown fields are ignored, as upstream's lenient decoding does.
        assert!(
            Policy::parse(
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nextra: 1\nrules: [{level: None, x: y}]"
            )
            .is_ok()
        );
    }

    #[test]
    fn the_shipped_policy_loads() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/audit/policy.yaml");
        let p = Policy::load(&path).unwrap();
        let none: Vec<String> = vec![];
        let a = |verb, path| attrs("jane", &none, verb, path);
        assert_eq!(p.evaluate(&a("get", "//healthz")).level, Level::None);
        assert_eq!(
            p.evaluate(&a("create", "core/x/secrets")).level,
            Level::Metadata
        );
        assert_eq!(
            p.evaluate(&a("create", "rbac.authorization.k8s.io/x/rolebindings"))
                .level,
            Level::RequestResponse
        );
        assert_eq!(
            p.evaluate(&a("delete", "g.io/x/crontabs/c")).level,
            Level::Request
        );
        assert!(
            p.evaluate(&a("delete", "g.io/x/crontabs/c"))
                .omit_stages
                .contains(Stage::RequestReceived)
        );
    }
}
