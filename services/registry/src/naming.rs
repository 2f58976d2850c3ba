//! Names and conditions of a CRD: which of its requested names it may serve
//! (`status.acceptedNames`), `NamesAccepted` and `Established`.
//!
//! Follows apiextensions-apiserver `pkg/controller/status/naming_controller.go`
//! (`calculateNamesAndConditions`, `equalToAcceptedOrFresh`, `getAcceptedNamesForGroup`) and
//! `pkg/controller/establish/establishing_controller.go`. Upstream runs these as controllers
//! after the write; this single-writer registry computes them inside the write itself, so a
//! CRD whose names are free is `Established` in the response to its create. Condition
//! bookkeeping follows `apihelpers.SetCRDCondition` (lastTransitionTime moves only when the
//! status changes). Pure functions.

use crate::crd::{Condition, CrdView, Names};
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;

/// Names already claimed by the CRDs of one group (their accepted names).
#[derive(Debug, Default)]
pub struct UsedNames {
    /// Plural, singular and short names taken.
    pub resources: BTreeSet<String>,
    /// Kind and list kind names taken.
    pub kinds: BTreeSet<String>,
}

impl UsedNames {
    /// `getAcceptedNamesForGroup`: collects the accepted names of every CRD in `group`
    /// (the CRD being computed included, as the upstream lister includes it).
    pub fn for_group<'a>(group: &str, crds: impl IntoIterator<Item = &'a CrdView>) -> Self {
        let mut u = UsedNames::default();
        for c in crds {
            if c.spec.group != group {
                continue;
            }
            let n = &c.status.accepted_names;
            u.resources.insert(n.plural.clone());
            u.resources.insert(n.singular.clone());
            u.resources.extend(n.short_names.iter().cloned());
            u.kinds.insert(n.kind.clone());
            u.kinds.insert(n.list_kind.clone());
        }
        u
    }
}

fn equal_to_accepted_or_fresh(
    requested: &str,
    accepted: &str,
    used: &BTreeSet<String>,
) -> Result<(), String> {
    if requested == accepted || !used.contains(requested) {
        return Ok(());
    }
    Err(format!(
        "{} is already in use",
        crdplane_core::field::go_quote(requested)
    ))
}

/// The outcome of the naming controller for one CRD.
#[derive(Debug, Clone, PartialEq)]
pub struct NamingResult {
    /// The names to write to `status.acceptedNames`.
    pub accepted: Names,
    /// The `NamesAccepted` condition (False with reason `NameConflict` on a clash).
    pub names_accepted: Condition,
    /// The `Established` condition (True once the names are accepted).
    pub established: Condition,
}

fn cond(type_: &str, status: &str, reason: &str, message: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        last_transition_time: None,
        reason: reason.into(),
        message: message.into(),
    }
}

/// `calculateNamesAndConditions` followed by the establishing controller.
pub fn calculate(crd: &CrdView, used: &UsedNames) -> NamingResult {
    let requested = &crd.spec.names;
    let accepted = &crd.status.accepted_names;
    let mut new_names = accepted.clone();
    let mut na = cond("NamesAccepted", "Unknown", "", "");
    let fail = |na: &mut Condition, reason: &str, msg: String| {
        na.status = "False".into();
        na.reason = reason.into();
        na.message = msg;
    };
    match equal_to_accepted_or_fresh(&requested.plural, &accepted.plural, &used.resources) {
        Ok(()) => new_names.plural = requested.plural.clone(),
        Err(e) => fail(&mut na, "PluralConflict", e),
    }
    match equal_to_accepted_or_fresh(&requested.singular, &accepted.singular, &used.resources) {
        Ok(()) => new_names.singular = requested.singular.clone(),
        Err(e) => fail(&mut na, "SingularConflict", e),
    }
    if requested.short_names != accepted.short_names {
        let mut errs = Vec::new();
        for s in &requested.short_names {
            if accepted.short_names.contains(s) {
                continue;
            }
            if let Err(e) = equal_to_accepted_or_fresh(s, "", &used.resources) {
                errs.push(e);
            }
        }
        if errs.is_empty() {
            new_names.short_names = requested.short_names.clone();
        } else {
            // utilerrors.NewAggregate(...).Error()
            let msg = if errs.len() == 1 {
                errs.remove(0)
            } else {
                format!("[{}]", errs.join(", "))
            };
            fail(&mut na, "ShortNamesConflict", msg);
        }
    }
    match equal_to_accepted_or_fresh(&requested.kind, &accepted.kind, &used.kinds) {
        Ok(()) => new_names.kind = requested.kind.clone(),
        Err(e) => fail(&mut na, "KindConflict", e),
    }
    match equal_to_accepted_or_fresh(&requested.list_kind, &accepted.list_kind, &used.kinds) {
        Ok(()) => new_names.list_kind = requested.list_kind.clone(),
        Err(e) => fail(&mut na, "ListKindConflict", e),
    }
    new_names.categories = requested.categories.clone();
    if na.status == "Unknown" {
        na = cond("NamesAccepted", "True", "NoConflicts", "no conflicts found");
    }

    let mut est = crd.condition("Established").cloned().unwrap_or_else(|| {
        cond(
            "Established",
            "False",
            "NotAccepted",
            "not all names are accepted",
        )
    });
    if est.status != "True" && na.status == "True" {
        // naming controller: Installing; establishing controller (same write here): True.
        est = cond(
            "Established",
            "True",
            "InitialNamesAccepted",
            "the initial names have been accepted",
        );
    }
    NamingResult {
        accepted: new_names,
        names_accepted: na,
        established: est,
    }
}

/// JSON of `CustomResourceDefinitionNames` (plural and kind are not omitempty).
pub fn names_json(n: &Names) -> Value {
    let mut m = Map::new();
    m.insert("plural".into(), json!(n.plural));
    if !n.singular.is_empty() {
        m.insert("singular".into(), json!(n.singular));
    }
    if !n.short_names.is_empty() {
        m.insert("shortNames".into(), json!(n.short_names));
    }
    m.insert("kind".into(), json!(n.kind));
    if !n.list_kind.is_empty() {
        m.insert("listKind".into(), json!(n.list_kind));
    }
    if !n.categories.is_empty() {
        m.insert("categories".into(), json!(n.categories));
    }
    Value::Object(m)
}

fn condition_json(c: &Condition) -> Value {
    let mut m = Map::new();
    m.insert("type".into(), json!(c.type_));
    m.insert("status".into(), json!(c.status));
    m.insert(
        "lastTransitionTime".into(),
        c.last_transition_time
            .as_ref()
            .map_or(Value::Null, |t| json!(t)),
    );
    if !c.reason.is_empty() {
        m.insert("reason".into(), json!(c.reason));
    }
    if !c.message.is_empty() {
        m.insert("message".into(), json!(c.message));
    }
    Value::Object(m)
}

/// `SetCRDCondition`: replaces or appends, moving lastTransitionTime only on a status change.
pub fn set_condition(conds: &mut Vec<Condition>, mut new: Condition, now: &str) {
    new.last_transition_time = Some(now.to_string());
    match conds.iter_mut().find(|c| c.type_ == new.type_) {
        None => conds.push(new),
        Some(existing) => {
            if existing.status != new.status || existing.last_transition_time.is_none() {
                existing.last_transition_time = new.last_transition_time;
            }
            existing.status = new.status;
            existing.reason = new.reason;
            existing.message = new.message;
        }
    }
}

/// Computes names and conditions for `crd` and writes the resulting `status` into `raw`
/// (the object the view was read from). `others` are all CRDs of the tenant (any group);
/// a stored copy of `crd` itself among them is ignored in favour of `crd`'s own status.
pub fn apply(crd: &mut CrdView, raw: &mut Value, others: &[CrdView], now: &str) {
    let me = crd.metadata.name.clone();
    let used = UsedNames::for_group(
        &crd.spec.group,
        others
            .iter()
            .filter(|o| o.metadata.name != me)
            .chain(std::iter::once(&*crd)),
    );
    let r = calculate(crd, &used);
    crd.status.accepted_names = r.accepted;
    set_condition(&mut crd.status.conditions, r.names_accepted, now);
    set_condition(&mut crd.status.conditions, r.established, now);
    write_status(crd, raw);
}

/// Writes `crd.status` into `raw.status`.
pub fn write_status(crd: &CrdView, raw: &mut Value) {
    let mut st = Map::new();
    st.insert(
        "conditions".into(),
        Value::Array(crd.status.conditions.iter().map(condition_json).collect()),
    );
    st.insert(
        "acceptedNames".into(),
        names_json(&crd.status.accepted_names),
    );
    st.insert("storedVersions".into(), json!(crd.status.stored_versions));
    if let Some(obj) = raw.as_object_mut() {
        obj.insert("status".into(), Value::Object(st));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(
        name: &str,
        group: &str,
        plural: &str,
        singular: &str,
        kind: &str,
        short: &[&str],
    ) -> CrdView {
        let mut v = CrdView::default();
        v.metadata.name = name.to_string();
        v.spec.group = group.into();
        v.spec.names = Names {
            plural: plural.into(),
            singular: singular.into(),
            short_names: short.iter().map(|s| s.to_string()).collect(),
            kind: kind.into(),
            list_kind: format!("{kind}List"),
            categories: vec![],
        };
        v
    }

    fn accepted(mut v: CrdView) -> CrdView {
        v.status.accepted_names = v.spec.names.clone();
        v
    }

    #[test]
    fn fresh_names_are_accepted_and_established() {
        let c = view(
            "crontabs.g.io",
            "g.io",
            "crontabs",
            "crontab",
            "CronTab",
            &["ct"],
        );
        let r = calculate(&c, &UsedNames::for_group("g.io", [&c]));
        assert_eq!(r.accepted, c.spec.names);
        assert_eq!(
            (
                r.names_accepted.status.as_str(),
                r.names_accepted.reason.as_str(),
                r.names_accepted.message.as_str()
            ),
            ("True", "NoConflicts", "no conflicts found")
        );
        assert_eq!(
            (
                r.established.status.as_str(),
                r.established.reason.as_str(),
                r.established.message.as_str()
            ),
            (
                "True",
                "InitialNamesAccepted",
                "the initial names have been accepted"
            )
        );
    }

    #[test]
    fn conflicts_use_upstream_reasons() {
        let existing = accepted(view(
            "crontabs.g.io",
            "g.io",
            "crontabs",
            "crontab",
            "CronTab",
            &["ct"],
        ));
        let cases = [
            (
                view("crontabs2.g.io", "g.io", "crontabs", "ct2", "Other", &[]),
                "PluralConflict",
                "\"crontabs\" is already in use",
            ),
            (
                view("x.g.io", "g.io", "x", "crontab", "Other", &[]),
                "SingularConflict",
                "\"crontab\" is already in use",
            ),
            (
                view("y.g.io", "g.io", "y", "yy", "Other", &["ct"]),
                "ShortNamesConflict",
                "\"ct\" is already in use",
            ),
            (
                view("z.g.io", "g.io", "z", "zz", "CronTab", &[]),
                "KindConflict",
                "\"CronTab\" is already in use",
            ),
        ];
        for (mut c, reason, msg) in cases {
            // Only the kind collides in the kind case (the list kind would win otherwise).
            c.spec.names.list_kind = format!("{}Items", c.spec.names.plural);
            let r = calculate(&c, &UsedNames::for_group("g.io", [&existing, &c]));
            assert_eq!(r.names_accepted.status, "False", "{reason}");
            assert_eq!(r.names_accepted.reason, reason);
            assert_eq!(r.names_accepted.message, msg);
            assert_eq!(
                (
                    r.established.status.as_str(),
                    r.established.reason.as_str(),
                    r.established.message.as_str()
                ),
                ("False", "NotAccepted", "not all names are accepted")
            );
        }
        // Other groups do not conflict.
        let c = view(
            "crontabs.h.io",
            "h.io",
            "crontabs",
            "crontab",
            "CronTab",
            &["ct"],
        );
        let r = calculate(&c, &UsedNames::for_group("h.io", [&existing, &c]));
        assert_eq!(r.names_accepted.status, "True");
    }

    #[test]
    fn list_kind_conflict_and_multiple_short_names() {
        let existing = accepted(view("a.g.io", "g.io", "as", "a", "A", &["x", "y"]));
        let mut c = view("b.g.io", "g.io", "bs", "b", "B", &["x", "y"]);
        c.spec.names.list_kind = "AList".into();
        let r = calculate(&c, &UsedNames::for_group("g.io", [&existing, &c]));
        // The last failing check wins the reason, as upstream.
        assert_eq!(r.names_accepted.reason, "ListKindConflict");
        assert_eq!(r.names_accepted.message, "\"AList\" is already in use");
        assert!(r.accepted.short_names.is_empty());
        let c = view("b.g.io", "g.io", "bs", "b", "B", &["x", "y"]);
        let r = calculate(&c, &UsedNames::for_group("g.io", [&existing, &c]));
        assert_eq!(r.names_accepted.reason, "ShortNamesConflict");
        assert_eq!(
            r.names_accepted.message,
            "[\"x\" is already in use, \"y\" is already in use]"
        );
    }

    #[test]
    fn established_stays_true_and_transition_time_is_kept() {
        let mut c = view("a.g.io", "g.io", "as", "a", "A", &[]);
        let mut raw = json!({});
        apply(&mut c, &mut raw, &[], "2020-01-01T00:00:00Z");
        assert_eq!(raw["status"]["conditions"][0]["type"], "NamesAccepted");
        assert_eq!(raw["status"]["conditions"][1]["type"], "Established");
        assert_eq!(
            raw["status"]["conditions"][1]["lastTransitionTime"],
            "2020-01-01T00:00:00Z"
        );
        assert_eq!(
            raw["status"]["acceptedNames"],
            json!({"plural": "as", "singular": "a", "kind": "A", "listKind": "AList"})
        );
        // A later conflict on a new short name keeps Established True with its old time.
        let other = accepted(view("b.g.io", "g.io", "bs", "b", "B", &["q"]));
        c.spec.names.short_names = vec!["q".into()];
        apply(&mut c, &mut raw, &[other], "2021-01-01T00:00:00Z");
        assert_eq!(raw["status"]["conditions"][0]["status"], "False");
        assert_eq!(
            raw["status"]["conditions"][0]["lastTransitionTime"],
            "2021-01-01T00:00:00Z"
        );
        assert_eq!(raw["status"]["conditions"][1]["status"], "True");
        assert_eq!(
            raw["status"]["conditions"][1]["lastTransitionTime"],
            "2020-01-01T00:00:00Z"
        );
    }
}
