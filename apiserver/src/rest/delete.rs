//! Deletion rules shared by every resource: DeleteOptions (decode and validate), the delete
//! preconditions, finalizers and the garbage collector's orphan/foreground finalizers, and
//! the "no new finalizers while deleting" rule of updates.
//!
//! Where it sits: the generic delete and deletecollection handlers ([`crate::handlers`]) and
//! the update path (finalizer removal completes a pending deletion) call these pure
//! functions. Follows k8s.io/apiserver pkg/registry/generic/registry/store.go (`Delete`,
//! `deletionFinalizersForGarbageCollection`, `markAsDeleting`, `ShouldDeleteDuringUpdate`),
//! pkg/registry/rest/delete.go (`BeforeDelete` preconditions), apimachinery
//! pkg/apis/meta/v1/validation (`ValidateDeleteOptions`, `ValidateDryRun`) and
//! pkg/api/validation/objectmeta.go (`ValidateNoNewFinalizers`).

use crdplane_core::ApiError;
use crdplane_core::field::FieldError;
use serde_json::{Value, json};

/// Finalizer of an object whose dependents are to be orphaned before it goes
/// (`metav1.FinalizerOrphanDependents`); the garbage collector handles it.
pub const FINALIZER_ORPHAN: &str = "orphan";
/// Finalizer of a foreground deletion: the object stays until its blocking dependents are gone
/// (`metav1.FinalizerDeleteDependents`); the garbage collector handles it.
pub const FINALIZER_FOREGROUND: &str = "foregroundDeletion";
/// `metav1.DeleteOptions` and their upstream validation live in the pure core.
pub use crdplane_core::options::{
    DeleteOptions, DeleteOptionsExt, Preconditions, dry_run_not_supported, preconditioned,
    validate_delete_options,
};

fn cannot_unmarshal(v: &Value, field: &str, go_type: &str) -> ApiError {
    let kind = crdplane_core::gofmt::go_json_kind(v);
    ApiError::bad_request(format!(
        "json: cannot unmarshal {kind} into Go struct field DeleteOptions.{field} of type {go_type}"
    ))
}

/// Decodes a DeleteOptions body (JSON or YAML object; `kind`/`apiVersion` as clients send
/// them: `DeleteOptions` in `v1` or `meta.k8s.io/v1`).
pub fn parse_delete_options_body(v: &Value) -> Result<DeleteOptions, ApiError> {
    let Some(m) = v.as_object() else {
        return Err(ApiError::bad_request(
            "the object provided is not a JSON object",
        ));
    };
    if let Some(k) = m.get("kind").and_then(Value::as_str)
        && !k.is_empty()
        && k != "DeleteOptions"
    {
        return Err(ApiError::bad_request(
            "decoded object cannot be converted to DeleteOptions",
        ));
    }
    let opt_str = |v: Option<&Value>, field: &str| -> Result<Option<String>, ApiError> {
        match v {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(o) => Err(cannot_unmarshal(o, field, "string")),
        }
    };
    let mut o = DeleteOptions::default();
    match m.get("preconditions") {
        None | Some(Value::Null) => {}
        Some(Value::Object(p)) => {
            o.preconditions = Some(Preconditions {
                uid: opt_str(p.get("uid"), "preconditions.uid")?,
                resource_version: opt_str(
                    p.get("resourceVersion"),
                    "preconditions.resourceVersion",
                )?,
            });
        }
        Some(other) => return Err(cannot_unmarshal(other, "preconditions", "v1.Preconditions")),
    }
    o.grace_period_seconds = match m.get("gracePeriodSeconds") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) if n.is_i64() => n.as_i64(),
        Some(other) => return Err(cannot_unmarshal(other, "gracePeriodSeconds", "int64")),
    };
    o.orphan_dependents = match m.get("orphanDependents") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(other) => return Err(cannot_unmarshal(other, "orphanDependents", "bool")),
    };
    o.propagation_policy = opt_str(m.get("propagationPolicy"), "propagationPolicy")?;
    o.dry_run = match m.get("dryRun") {
        None | Some(Value::Null) => None,
        Some(Value::Array(a)) => Some(
            a.iter()
                .map(|x| match x {
                    Value::String(s) => Ok(s.clone()),
                    other => Err(cannot_unmarshal(other, "dryRun", "string")),
                })
                .collect::<Result<_, _>>()?,
        ),
        Some(other) => return Err(cannot_unmarshal(other, "dryRun", "[]string")),
    };
    Ok(o)
}

/// `BeforeDelete`'s precondition checks (rest/delete.go): 409 naming the object's kind.
pub fn check_delete_preconditions(
    obj: &Value,
    o: &DeleteOptions,
    kind: &str,
    group: &str,
) -> Result<(), ApiError> {
    let meta = |k: &str| {
        obj.pointer(&format!("/metadata/{k}"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let name = meta("name");
    let gk = crdplane_core::GroupResource::new(group, kind);
    if let Some(uid) = o.precondition_uid()
        && uid != meta("uid")
    {
        return Err(ApiError::conflict(
            &gk,
            &name,
            &format!(
                "the UID in the precondition ({uid}) does not match the UID in record ({}). The object might have been deleted and then recreated",
                meta("uid")
            ),
        ));
    }
    if let Some(rv) = o.precondition_rv()
        && rv != meta("resourceVersion")
    {
        return Err(ApiError::conflict(
            &gk,
            &name,
            &format!(
                "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({}). The object might have been modified",
                meta("resourceVersion")
            ),
        ));
    }
    Ok(())
}

/// `metadata.finalizers` of the object (empty when none).
pub fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `metadata.deletionTimestamp` is set: the object is being deleted.
pub fn has_deletion_timestamp(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

/// store.go `deletionFinalizersForGarbageCollection` (garbage collection enabled, no default
/// policy for custom resources): whether the finalizer list changes, and the new list.
/// Orphan (or `orphanDependents: true`) adds `orphan`, Foreground adds `foregroundDeletion`,
/// Background removes both; without options the existing GC finalizer stands.
pub fn gc_finalizers(
    existing: &[String],
    orphan_dependents: Option<bool>,
    propagation: Option<&str>,
) -> (bool, Vec<String>) {
    let from_finalizers = |orphan: bool| {
        existing.iter().find_map(|f| match f.as_str() {
            FINALIZER_ORPHAN => Some(orphan),
            FINALIZER_FOREGROUND => Some(!orphan),
            _ => None,
        })
    };
    let should_orphan = match (orphan_dependents, propagation) {
        (Some(b), _) => b,
        (None, Some("Orphan")) => true,
        (None, Some("Background" | "Foreground")) => false,
        _ => from_finalizers(true).unwrap_or(false),
    };
    let should_foreground = match (orphan_dependents, propagation) {
        (Some(_), _) => false,
        (None, Some("Foreground")) => true,
        (None, Some("Background" | "Orphan")) => false,
        _ => from_finalizers(false).unwrap_or(false),
    };
    let mut out: Vec<String> = existing
        .iter()
        .filter(|f| *f != FINALIZER_ORPHAN && *f != FINALIZER_FOREGROUND)
        .cloned()
        .collect();
    if should_orphan {
        out.push(FINALIZER_ORPHAN.into());
    }
    if should_foreground {
        out.push(FINALIZER_FOREGROUND.into());
    }
    let set = |v: &[String]| {
        v.iter()
            .cloned()
            .collect::<std::collections::BTreeSet<String>>()
    };
    if set(existing) == set(&out) {
        (false, existing.to_vec())
    } else {
        (true, out)
    }
}

/// store.go `markAsDeleting`: deletionTimestamp = now (unless an earlier one is set),
/// deletionGracePeriodSeconds = 0, generation + 1 on the first mark.
pub fn mark_as_deleting(obj: &mut Value, now: &str) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let existing = meta
        .get("deletionTimestamp")
        .and_then(Value::as_str)
        .map(str::to_string);
    if existing.is_none()
        && let Some(g) = meta.get("generation").and_then(Value::as_i64)
        && g > 0
    {
        meta.insert("generation".into(), json!(g + 1));
    }
    // RFC 3339 UTC timestamps of one format compare as strings.
    if existing.as_deref().is_none_or(|t| t > now) {
        meta.insert("deletionTimestamp".into(), Value::String(now.to_string()));
    }
    meta.insert("deletionGracePeriodSeconds".into(), json!(0));
}

/// What a DELETE does to a stored custom resource.
#[derive(Debug, Clone, PartialEq)]
pub enum DeletionPlan {
    /// Remove it now.
    Delete,
    /// Finalizers are pending: store this (marked as deleting, GC finalizers applied).
    Update(Value),
    /// Already marked and nothing changes: no write, answer with the object.
    Unchanged,
}

/// store.go `Delete` → `updateForGracefulDeletionAndFinalizers` for a resource without
/// graceful deletion: with finalizers (after the GC finalizers of the options) the object is
/// marked as deleting and kept, else it is deleted.
pub fn plan_deletion(
    obj: &Value,
    orphan_dependents: Option<bool>,
    propagation: Option<&str>,
    now: &str,
) -> DeletionPlan {
    let existing = finalizers(obj);
    let (update_finalizers, new_finalizers) =
        gc_finalizers(&existing, orphan_dependents, propagation);
    if existing.is_empty() && !update_finalizers {
        return DeletionPlan::Delete;
    }
    if new_finalizers.is_empty() {
        return DeletionPlan::Delete;
    }
    let mut out = obj.clone();
    if update_finalizers && let Some(m) = out.get_mut("metadata").and_then(Value::as_object_mut) {
        m.insert("finalizers".into(), json!(new_finalizers));
    }
    mark_as_deleting(&mut out, now);
    if out == *obj {
        DeletionPlan::Unchanged
    } else {
        DeletionPlan::Update(out)
    }
}

/// store.go `ShouldDeleteDuringUpdate`: the update removed the last finalizer of an object
/// whose deletion was requested (grace period 0 or unset).
pub fn should_delete_during_update(new: &Value, old: &Value) -> bool {
    finalizers(new).is_empty()
        && has_deletion_timestamp(old)
        && old
            .pointer("/metadata/deletionGracePeriodSeconds")
            .is_none_or(|g| g.is_null() || g.as_i64() == Some(0))
}

/// objectmeta.go `ValidateNoNewFinalizers`, applied by `ValidateObjectMetaUpdate` while the
/// stored object has a deletionTimestamp.
pub fn no_new_finalizers(new: &Value, old: &Value) -> Vec<FieldError> {
    if !has_deletion_timestamp(old) {
        return vec![];
    }
    let old_f = finalizers(old);
    let extra: std::collections::BTreeSet<String> = finalizers(new)
        .into_iter()
        .filter(|f| !old_f.contains(f))
        .collect();
    if extra.is_empty() {
        return vec![];
    }
    let quoted: Vec<String> = extra
        .iter()
        .map(|f| crdplane_core::field::go_quote(f))
        .collect();
    vec![FieldError::forbidden(
        "metadata.finalizers",
        format!(
            "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
            quoted.join(", ")
        ),
    )]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crdplane_core::ApiError;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn gc_finalizers_follow_the_options() {
        assert_eq!(gc_finalizers(&[], None, None), (false, vec![]));
        assert_eq!(
            gc_finalizers(&[], None, Some("Background")),
            (false, vec![])
        );
        assert_eq!(
            gc_finalizers(&s(&["a"]), None, Some("Orphan")),
            (true, s(&["a", "orphan"]))
        );
        assert_eq!(
            gc_finalizers(&s(&["a"]), None, Some("Foreground")),
            (true, s(&["a", "foregroundDeletion"]))
        );
        assert_eq!(gc_finalizers(&[], Some(true), None), (true, s(&["orphan"])));
        assert_eq!(gc_finalizers(&[], Some(false), None), (false, vec![]));
        // Background removes GC finalizers; no options keep what is there.
        assert_eq!(
            gc_finalizers(&s(&["orphan", "x"]), None, Some("Background")),
            (true, s(&["x"]))
        );
        assert_eq!(
            gc_finalizers(&s(&["orphan"]), None, None),
            (false, s(&["orphan"]))
        );
        // Switching policy swaps the GC finalizer.
        assert_eq!(
            gc_finalizers(&s(&["orphan"]), None, Some("Foreground")),
            (true, s(&["foregroundDeletion"]))
        );
    }

    fn obj(finalizers: &[&str]) -> Value {
        json!({"apiVersion":"g/v1","kind":"K","metadata":{"name":"x","uid":"u","generation":2,
            "resourceVersion":"5","finalizers":finalizers},"spec":{}})
    }

    #[test]
    fn deletion_plans() {
        let now = "2026-01-01T00:00:00Z";
        assert_eq!(
            plan_deletion(&obj(&[]), None, None, now),
            DeletionPlan::Delete
        );
        let DeletionPlan::Update(m) = plan_deletion(&obj(&["x.io/f"]), None, None, now) else {
            panic!("expected an update");
        };
        assert_eq!(m["metadata"]["deletionTimestamp"], now);
        assert_eq!(m["metadata"]["deletionGracePeriodSeconds"], 0);
        assert_eq!(m["metadata"]["generation"], 3);
        // A second DELETE changes nothing (an earlier timestamp stays, no generation bump).
        assert_eq!(
            plan_deletion(&m, None, None, "2026-01-02T00:00:00Z"),
            DeletionPlan::Unchanged
        );
        // Orphan adds its finalizer to an object without any, and keeps it.
        let DeletionPlan::Update(o) = plan_deletion(&obj(&[]), None, Some("Orphan"), now) else {
            panic!("expected an update");
        };
        assert_eq!(o["metadata"]["finalizers"], json!(["orphan"]));
        assert!(o["metadata"]["deletionTimestamp"].is_string());
        // Background on an object whose only finalizer is a GC one: deleted at once.
        assert_eq!(
            plan_deletion(&obj(&["orphan"]), None, Some("Background"), now),
            DeletionPlan::Delete
        );
    }

    #[test]
    fn finalizer_rules_while_deleting() {
        let mut old = obj(&["a"]);
        assert!(
            no_new_finalizers(&obj(&["a", "b"]), &old).is_empty(),
            "not deleting"
        );
        old["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        old["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        let errs = no_new_finalizers(&obj(&["a", "z", "b"]), &old);
        assert_eq!(
            errs[0].to_string(),
            "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"b\", \"z\"}"
        );
        assert!(no_new_finalizers(&obj(&[]), &old).is_empty());
        assert!(should_delete_during_update(&obj(&[]), &old));
        assert!(!should_delete_during_update(&obj(&["a"]), &old));
        assert!(!should_delete_during_update(&obj(&[]), &obj(&["a"])));
    }

    #[test]
    fn delete_options_parse_and_validate() {
        let o = parse_delete_options_body(&json!({"kind":"DeleteOptions","apiVersion":"v1",
            "preconditions":{"uid":"u","resourceVersion":"5"},"propagationPolicy":"Orphan",
            "gracePeriodSeconds":0,"dryRun":["All"]}))
        .unwrap();
        assert_eq!(o.precondition_uid(), Some("u"));
        assert_eq!(o.precondition_rv(), Some("5"));
        assert!(o.is_dry_run());
        assert!(validate_delete_options(&o).is_empty());
        assert_eq!(
            parse_delete_options_body(&json!({"gracePeriodSeconds":"x"}))
                .unwrap_err()
                .message,
            "json: cannot unmarshal string into Go struct field DeleteOptions.gracePeriodSeconds of type int64"
        );
        let bad = DeleteOptions {
            propagation_policy: Some("Bad".into()),
            dry_run: Some(s(&["x"])),
            ..Default::default()
        };
        let e = ApiError::invalid(
            "DeleteOptions",
            "meta.k8s.io",
            "",
            &validate_delete_options(&bad),
        );
        assert_eq!(
            e.message,
            r#"DeleteOptions.meta.k8s.io "" is invalid: [propagationPolicy: Unsupported value: "Bad": supported values: "Foreground", "Background", "Orphan", "nil", dryRun: Unsupported value: []string{"x"}: supported values: "All"]"#
        );
        let both = DeleteOptions {
            propagation_policy: Some("Orphan".into()),
            orphan_dependents: Some(true),
            ..Default::default()
        };
        assert_eq!(
            validate_delete_options(&both)[0].to_string(),
            r#"propagationPolicy: Invalid value: "Orphan": orphanDependents and deletionPropagation cannot be both set"#
        );
    }

    #[test]
    fn delete_preconditions_name_the_kind() {
        let o = preconditioned(Some("other"), None);
        let e =
            check_delete_preconditions(&obj(&[]), &o, "CronTab", "stable.example.com").unwrap_err();
        assert_eq!(e.code, 409);
        assert_eq!(
            e.message,
            "Operation cannot be fulfilled on CronTab.stable.example.com \"x\": the UID in the precondition (other) does not match the UID in record (u). The object might have been deleted and then recreated"
        );
        let o = preconditioned(None, Some("4"));
        assert!(
            check_delete_preconditions(&obj(&[]), &o, "CronTab", "stable.example.com")
                .unwrap_err()
                .message
                .ends_with("the ResourceVersion in the precondition (4) does not match the ResourceVersion in record (5). The object might have been modified")
        );
        let ok = preconditioned(Some("u"), Some("5"));
        assert!(
            check_delete_preconditions(&obj(&[]), &ok, "CronTab", "stable.example.com").is_ok()
        );
    }
}
