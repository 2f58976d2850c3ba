//! Escalation prevention: whether the rules a user holds cover the rules they grant
//! (a Role or ClusterRole they write, the role a binding they write refers to), and the
//! 403 text when they do not.
//!
//! Where it sits: the gateway's RBAC write paths (the escalation admission of Roles,
//! ClusterRoles and their bindings) call [`confirm_no_escalation`] unless the user is in
//! `system:masters` or holds the `escalate` / `bind` verb on the role.
//!
//! Follows `pkg/registry/rbac/validation/policy_comparator.go` (`Covers`, `BreakdownRule`,
//! `ruleCovers`), `policy_compact.go` (`CompactRules`), `rule.go` (`ConfirmNoEscalation`) and
//! `pkg/apis/rbac/v1/evaluation_helpers.go` (`CompactString`).

use super::Rule;
use crate::user::UserInfo;

/// `BreakdownRule`: the rule as rules of one verb, one group, one resource and at most one
/// name (or one verb and one non-resource URL).
pub fn breakdown(rule: &Rule) -> Vec<Rule> {
    let mut out = Vec::new();
    let one = |s: &String| vec![s.clone()];
    for g in &rule.api_groups {
        for r in &rule.resources {
            for v in &rule.verbs {
                if rule.resource_names.is_empty() {
                    out.push(Rule {
                        api_groups: one(g),
                        resources: one(r),
                        verbs: one(v),
                        ..Default::default()
                    });
                } else {
                    for n in &rule.resource_names {
                        out.push(Rule {
                            api_groups: one(g),
                            resources: one(r),
                            verbs: one(v),
                            resource_names: one(n),
                            ..Default::default()
                        });
                    }
                }
            }
        }
    }
    for u in &rule.non_resource_urls {
        for v in &rule.verbs {
            out.push(Rule {
                non_resource_urls: one(u),
                verbs: one(v),
                ..Default::default()
            });
        }
    }
    out
}

fn has(set: &[String], s: &str) -> bool {
    set.iter().any(|x| x == s)
}

fn has_all(set: &[String], want: &[String]) -> bool {
    want.iter().all(|w| has(set, w))
}

fn resource_covers_all(set: &[String], covers: &[String]) -> bool {
    if has(set, "*") || has_all(set, covers) {
        return true;
    }
    covers.iter().all(|path| {
        has(set, path)
            || path
                .split_once('/')
                .is_some_and(|(_, sub)| has(set, &format!("*/{sub}")))
    })
}

fn non_resource_url_covers(owner: &str, sub: &str) -> bool {
    owner == sub || (owner.ends_with('*') && sub.starts_with(owner.trim_end_matches('*')))
}

/// `ruleCovers`: whether `owner` covers `sub` (a broken-down rule).
pub fn rule_covers(owner: &Rule, sub: &Rule) -> bool {
    let verbs = has(&owner.verbs, "*") || has_all(&owner.verbs, &sub.verbs);
    let groups = has(&owner.api_groups, "*") || has_all(&owner.api_groups, &sub.api_groups);
    let resources = resource_covers_all(&owner.resources, &sub.resources);
    let urls = sub.non_resource_urls.iter().all(|p| {
        owner
            .non_resource_urls
            .iter()
            .any(|o| non_resource_url_covers(o, p))
    });
    let names = if sub.resource_names.is_empty() {
        owner.resource_names.is_empty()
    } else {
        owner.resource_names.is_empty() || has_all(&owner.resource_names, &sub.resource_names)
    };
    verbs && groups && resources && names && urls
}

/// `Covers`: whether `owner` rules cover every `servant` rule, and the broken-down rules
/// they do not cover.
pub fn covers(owner: &[Rule], servant: &[Rule]) -> (bool, Vec<Rule>) {
    let missing: Vec<Rule> = servant
        .iter()
        .flat_map(breakdown)
        .filter(|sub| !owner.iter().any(|o| rule_covers(o, sub)))
        .collect();
    (missing.is_empty(), missing)
}

/// `CompactRules`: rules of one group, one resource, at most one name and nothing else are
/// merged per (group, resource, name), their verbs appended; others stay as they are.
pub fn compact(rules: Vec<Rule>) -> Vec<Rule> {
    let mut out: Vec<Rule> = Vec::new();
    let mut simple: Vec<Rule> = Vec::new();
    for r in rules {
        let is_simple = r.resource_names.len() <= 1
            && r.non_resource_urls.is_empty()
            && r.api_groups.len() == 1
            && r.resources.len() == 1;
        if !is_simple {
            out.push(r);
            continue;
        }
        match simple.iter_mut().find(|s| {
            s.api_groups == r.api_groups
                && s.resources == r.resources
                && s.resource_names == r.resource_names
        }) {
            Some(s) => s.verbs.extend(r.verbs),
            None => simple.push(r),
        }
    }
    out.extend(simple);
    out
}

/// Go's `%q` of a `[]string`: `["a" "b"]`.
pub fn go_quote_list(v: &[String]) -> String {
    let q: Vec<String> = v.iter().map(|s| go_quote(s)).collect();
    format!("[{}]", q.join(" "))
}

/// Go's `%q` of a string (`strconv.Quote`).
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `CompactString`: `{APIGroups:["…"], Resources:["…"], Verbs:["…"]}`, parts present only
/// when non-empty.
pub fn compact_string(r: &Rule) -> String {
    let mut parts = Vec::new();
    for (label, v) in [
        ("APIGroups", &r.api_groups),
        ("Resources", &r.resources),
        ("NonResourceURLs", &r.non_resource_urls),
        ("ResourceNames", &r.resource_names),
        ("Verbs", &r.verbs),
    ] {
        if !v.is_empty() {
            parts.push(format!("{label}:{}", go_quote_list(v)));
        }
    }
    format!("{{{}}}", parts.join(", "))
}

/// `ConfirmNoEscalation`: `Ok` when `owner` (the rules `user` holds, with the errors met
/// resolving them) covers `granted`; else the error text upstream wraps in a Forbidden.
pub fn confirm_no_escalation(
    user: &UserInfo,
    owner: &[Rule],
    resolution_errors: &[String],
    granted: &[Rule],
) -> Result<(), String> {
    let (ok, missing) = covers(owner, granted);
    if ok {
        return Ok(());
    }
    let mut descriptions: Vec<String> = compact(missing).iter().map(compact_string).collect();
    descriptions.sort();
    descriptions.dedup();
    let mut msg = format!(
        "user {} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
        go_quote(&user.name),
        go_quote_list(&user.groups),
        descriptions.join("\n")
    );
    if !resolution_errors.is_empty() {
        // `%v` of the one-element []error holding `RulesFor`'s aggregate error.
        msg.push_str(&format!(
            "; resolution errors: [{}]",
            super::aggregate_errors(resolution_errors)
        ));
    }
    Err(msg)
}

/// The rules that only a user holding everything covers (`fullAuthority`): what setting
/// an `aggregationRule` requires.
pub fn full_authority() -> Vec<Rule> {
    let all = || vec!["*".to_string()];
    vec![
        Rule {
            verbs: all(),
            api_groups: all(),
            resources: all(),
            ..Default::default()
        },
        Rule {
            verbs: all(),
            non_resource_urls: all(),
            ..Default::default()
        },
    ]
}
