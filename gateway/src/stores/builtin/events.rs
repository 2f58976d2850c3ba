//! Events: core `v1` Events and `events.k8s.io/v1` Events, two versions of the same stored
//! objects (upstream stores both as the `events` resource of the core group and converts
//! field by field: pkg/apis/events/v1/conversion.go — `regarding` ↔ `involvedObject`,
//! `note` ↔ `message`, `deprecatedSource` ↔ `source`, `deprecatedFirstTimestamp` ↔
//! `firstTimestamp`, `deprecatedLastTimestamp` ↔ `lastTimestamp`, `deprecatedCount` ↔
//! `count`, `reportingController` ↔ `reportingComponent`). They expire `--event-ttl` after
//! their last write (pkg/registry/core/event/storage/storage.go `TTLFunc`).
//!
//! Validation: pkg/apis/core/validation/events.go (`ValidateEventCreate`,
//! `ValidateEventUpdate`, `legacyValidateEvent`: core v1 writes get only the legacy checks,
//! events.k8s.io/v1 writes the strict ones too). Field selectors: pkg/registry/core/event/
//! strategy.go `ToSelectableFields` and the events.k8s.io field label conversion. Printing:
//! pkg/printers/internalversion `printEvent`.

use super::{BuiltinType, column, s};
use crdplane_apiserver::patch::BuiltinPatch;
use crdplane_apiserver::render::table::{TableConvertor, date_cell};
use crdplane_apiserver::strategic::{Field, OBJECT_META};
use crdplane_core::builtin::{BuiltinResource, lookup};
use crdplane_core::field::FieldError;
use serde_json::{Map, Value, json};
use std::borrow::Cow;
use std::sync::OnceLock;

/// Core `v1` events.
pub struct CoreEvents;
/// `events.k8s.io/v1` events.
pub struct EventsV1;

static PATCH: BuiltinPatch = BuiltinPatch(&[("metadata", Field::Struct(OBJECT_META))]);

/// (events.k8s.io/v1 field, core v1 field) pairs that differ by name.
const RENAMED: [(&str, &str); 7] = [
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("reportingController", "reportingComponent"),
];

fn rename(mut obj: Value, api_version: &str, to_core: bool) -> Value {
    if let Some(m) = obj.as_object_mut() {
        let mut out = Map::with_capacity(m.len());
        for (k, v) in std::mem::take(m) {
            let k = RENAMED
                .iter()
                .find(|(v1, core)| if to_core { *v1 == k } else { *core == k })
                .map(|(v1, core)| if to_core { *core } else { *v1 })
                .map(str::to_string)
                .unwrap_or(k);
            out.insert(k, v);
        }
        out.insert("apiVersion".into(), json!(api_version));
        *m = out;
    }
    obj
}

/// A core v1 Event as events.k8s.io/v1.
pub fn to_v1(core: Value) -> Value {
    rename(core, "events.k8s.io/v1", false)
}

/// An events.k8s.io/v1 Event as core v1.
pub fn to_core(v1: Value) -> Value {
    rename(v1, "v1", true)
}

const REPORTING_INSTANCE_LIMIT: usize = 128;
const ACTION_LIMIT: usize = 128;
const REASON_LIMIT: usize = 128;
const NOTE_LIMIT: usize = 1024;

fn set(v: &Value, ptr: &str) -> bool {
    v.pointer(ptr).is_some_and(|x| !x.is_null() && x != "")
}

/// `legacyValidateEvent` on a core-form event; `v1_api` = written through events.k8s.io/v1
/// (names `reportingController` in the error path then).
fn legacy_validate(e: &Value, v1_api: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let ns = s(e, "/metadata/namespace");
    let obj_ns = s(e, "/involvedObject/namespace");
    let mismatch = || {
        FieldError::invalid(
            "involvedObject.namespace",
            json!(obj_ns),
            "does not match event.namespace",
        )
    };
    if !set(e, "/eventTime") {
        if obj_ns.is_empty() {
            if !ns.is_empty() && ns != "default" {
                errs.push(mismatch());
            }
        } else if ns != obj_ns {
            errs.push(mismatch());
        }
    } else {
        if obj_ns.is_empty() && ns != "default" && ns != "kube-system" {
            errs.push(mismatch());
        }
        let rc_field = if v1_api {
            "reportingController"
        } else {
            "reportingComponent"
        };
        let rc = s(e, "/reportingComponent");
        if rc.is_empty() {
            errs.push(FieldError::required(rc_field, ""));
        }
        for m in crdplane_core::validation::is_qualified_name(rc) {
            errs.push(FieldError::invalid(rc_field, json!(rc), m));
        }
        let long =
            |errs: &mut Vec<FieldError>, field: &str, ptr: &str, limit: usize, required: bool| {
                let v = s(e, ptr);
                if required && v.is_empty() {
                    errs.push(FieldError::required(field, ""));
                }
                if v.len() > limit {
                    errs.push(FieldError::invalid(
                        field,
                        json!(""),
                        format!("can have at most {limit} characters"),
                    ));
                }
            };
        long(
            &mut errs,
            "reportingInstance",
            "/reportingInstance",
            REPORTING_INSTANCE_LIMIT,
            true,
        );
        long(&mut errs, "action", "/action", ACTION_LIMIT, true);
        long(&mut errs, "reason", "/reason", REASON_LIMIT, true);
        long(&mut errs, "message", "/message", NOTE_LIMIT, false);
    }
    for m in crdplane_core::validation::is_dns1123_subdomain(ns) {
        errs.push(FieldError::invalid("namespace", json!(ns), m));
    }
    errs
}

/// `validateV1EventSeries`.
fn validate_series(e: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(series) = e.get("series").filter(|s| !s.is_null()) {
        if series.get("count").and_then(Value::as_i64).unwrap_or(0) < 2 {
            errs.push(FieldError::invalid(
                "series.count",
                json!(""),
                "should be at least 2",
            ));
        }
        if !set(series, "/lastObservedTime") {
            errs.push(FieldError::required("series.lastObservedTime", ""));
        }
    }
    errs
}

/// The strict checks of an events.k8s.io/v1 create (`ValidateEventCreate`), core form.
fn validate_v1_create(e: &Value) -> Vec<FieldError> {
    let mut errs = legacy_validate(e, true);
    errs.extend(validate_series(e));
    if !set(e, "/eventTime") {
        errs.push(FieldError::required("eventTime", ""));
    }
    let t = s(e, "/type");
    if t != "Normal" && t != "Warning" {
        errs.push(FieldError::invalid(
            "type",
            json!(""),
            format!("has invalid value: {t}"),
        ));
    }
    for (ptr, field) in [
        ("/firstTimestamp", "deprecatedFirstTimestamp"),
        ("/lastTimestamp", "deprecatedLastTimestamp"),
    ] {
        if set(e, ptr) {
            errs.push(FieldError::invalid(field, json!(""), "needs to be unset"));
        }
    }
    if e.get("count").and_then(Value::as_i64).unwrap_or(0) != 0 {
        errs.push(FieldError::invalid(
            "deprecatedCount",
            json!(""),
            "needs to be unset",
        ));
    }
    if set(e, "/source/component") || set(e, "/source/host") {
        errs.push(FieldError::invalid(
            "deprecatedSource",
            json!(""),
            "needs to be unset",
        ));
    }
    errs
}

/// The strict checks of an events.k8s.io/v1 update (`ValidateEventUpdate`), core forms.
fn validate_v1_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = legacy_validate(new, true);
    if new.get("series") != old.get("series") {
        errs.extend(validate_series(new));
    }
    for (ptr, path) in [
        ("/involvedObject", "involvedObject"),
        ("/reason", "reason"),
        ("/message", "note"),
        ("/source", "source"),
        ("/firstTimestamp", "firstTimestamp"),
        ("/lastTimestamp", "lastTimestamp"),
        ("/count", "count"),
        ("/type", "type"),
        ("/eventTime", "eventTime"),
        ("/action", "action"),
        ("/related", "related"),
        ("/reportingComponent", "reportingController"),
        ("/reportingInstance", "reportingInstance"),
    ] {
        errs.extend(super::immutable(new, old, ptr, path));
    }
    errs
}

/// `printEvent` (server-side, wide) of a core-form event.
fn core_printer(e: &Value, now: chrono::DateTime<chrono::Utc>) -> Vec<Value> {
    let first = if set(e, "/firstTimestamp") {
        date_cell(s(e, "/firstTimestamp"), now)
    } else {
        date_cell(s(e, "/eventTime"), now)
    };
    let mut last = if set(e, "/lastTimestamp") {
        date_cell(s(e, "/lastTimestamp"), now)
    } else {
        first.clone()
    };
    let mut count = e.get("count").and_then(Value::as_i64).unwrap_or(0);
    if let Some(series) = e.get("series").filter(|s| !s.is_null()) {
        last = date_cell(s(series, "/lastObservedTime"), now);
        count = series.get("count").and_then(Value::as_i64).unwrap_or(0);
    } else if count == 0 {
        count = 1;
    }
    let kind = s(e, "/involvedObject/kind").to_lowercase();
    let obj_name = s(e, "/involvedObject/name");
    let target = if obj_name.is_empty() {
        kind
    } else {
        format!("{kind}/{obj_name}")
    };
    let first_non_empty = |a: &str, b: &str| -> String {
        if a.is_empty() {
            b.to_string()
        } else {
            a.to_string()
        }
    };
    let component = first_non_empty(s(e, "/source/component"), s(e, "/reportingComponent"));
    let instance = first_non_empty(s(e, "/source/host"), s(e, "/reportingInstance"));
    let source = match (component.is_empty(), instance.is_empty()) {
        (true, true) => String::new(),
        (_, true) => component,
        _ => format!("{component}, {instance}"),
    };
    vec![
        json!(last),
        json!(s(e, "/type")),
        json!(s(e, "/reason")),
        json!(target),
        json!(s(e, "/involvedObject/fieldPath")),
        json!(source),
        json!(s(e, "/message").trim()),
        json!(first),
        json!(count),
        json!(s(e, "/metadata/name")),
    ]
}

fn v1_printer(e: &Value, now: chrono::DateTime<chrono::Utc>) -> Vec<Value> {
    core_printer(&to_core(e.clone()), now)
}

fn columns() -> Vec<crdplane_apiserver::render::table::ColumnDefinition> {
    vec![
        column(
            "Last Seen",
            "string",
            "",
            "The time at which the most recent occurrence of this event was recorded.",
            0,
        ),
        column(
            "Type",
            "string",
            "",
            "Type of this event (Normal, Warning), new types could be added in the future",
            0,
        ),
        column(
            "Reason",
            "string",
            "",
            "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
            0,
        ),
        column(
            "Object",
            "string",
            "",
            "The object that this event is about.",
            0,
        ),
        column(
            "Subobject",
            "string",
            "",
            "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]. For example, if the object reference is to a container within a pod, this would take on a value like: \"spec.containers{name}\" (where \"name\" refers to the name of the container that triggered the event) or if no container name is specified \"spec.containers[2]\" (container with index 2 in this pod). This syntax is chosen only to have some well-defined way of referencing a part of an object.",
            1,
        ),
        column(
            "Source",
            "string",
            "",
            "The component reporting this event. Should be a short machine understandable string.",
            1,
        ),
        column(
            "Message",
            "string",
            "",
            "A human-readable description of the status of this operation.",
            0,
        ),
        column(
            "First Seen",
            "string",
            "",
            "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
            1,
        ),
        column(
            "Count",
            "string",
            "",
            "The number of times this event has occurred.",
            1,
        ),
        column(
            "Name",
            "string",
            "name",
            crdplane_apiserver::render::table::NAME_DESCRIPTION,
            1,
        ),
    ]
}

/// Field labels of core events (`ToSelectableFields`).
const CORE_LABELS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];

/// Field labels of events.k8s.io/v1 events (its field label conversion).
const V1_LABELS: &[&str] = &[
    "regarding.kind",
    "regarding.namespace",
    "regarding.name",
    "regarding.uid",
    "regarding.apiVersion",
    "regarding.resourceVersion",
    "regarding.fieldPath",
    "reason",
    "reportingController",
    "type",
];

/// A core field label as a path of the stored object (`source` selects the component).
fn core_label(label: &str) -> Cow<'_, str> {
    match label {
        "source" => "source.component".into(),
        l => l.into(),
    }
}

impl BuiltinType for CoreEvents {
    fn resource(&self) -> &'static BuiltinResource {
        lookup("", "v1", "events").expect("in the table")
    }
    fn canonical(&self, obj: Value) -> Result<Value, String> {
        super::typed::<k8s_openapi::api::core::v1::Event>(obj, &["involvedObject"])
    }
    fn validates_object_meta(&self) -> bool {
        false
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        legacy_validate(obj, false)
    }
    fn validate_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        legacy_validate(new, false)
    }
    fn allow_create_on_update(&self) -> bool {
        true
    }
    fn field_labels(&self) -> &'static [&'static str] {
        CORE_LABELS
    }
    fn stored_field_label<'a>(&self, label: &'a str) -> Cow<'a, str> {
        core_label(label)
    }
    fn patch(&self) -> &'static BuiltinPatch {
        &PATCH
    }
    fn table(&self) -> &'static TableConvertor {
        static T: OnceLock<TableConvertor> = OnceLock::new();
        T.get_or_init(|| TableConvertor::printed(columns(), core_printer))
    }
}

impl BuiltinType for EventsV1 {
    fn resource(&self) -> &'static BuiltinResource {
        lookup("events.k8s.io", "v1", "events").expect("in the table")
    }
    fn canonical(&self, obj: Value) -> Result<Value, String> {
        super::typed::<k8s_openapi::api::events::v1::Event>(obj, &[])
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_v1_create(&to_core(obj.clone()))
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        validate_v1_update(&to_core(new.clone()), &to_core(old.clone()))
    }
    fn allow_create_on_update(&self) -> bool {
        true
    }
    fn field_labels(&self) -> &'static [&'static str] {
        V1_LABELS
    }
    fn stored_field_label<'a>(&self, label: &'a str) -> Cow<'a, str> {
        match label.strip_prefix("regarding.") {
            Some(rest) => format!("involvedObject.{rest}").into(),
            None if label == "reportingController" => "reportingComponent".into(),
            None => label.into(),
        }
    }
    fn served_form(&self, obj: Value) -> Value {
        to_v1(obj)
    }
    fn stored_form(&self, obj: Value) -> Value {
        to_core(obj)
    }
    fn patch(&self) -> &'static BuiltinPatch {
        &PATCH
    }
    fn table(&self) -> &'static TableConvertor {
        static T: OnceLock<TableConvertor> = OnceLock::new();
        T.get_or_init(|| TableConvertor::printed(columns(), v1_printer))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_convert_both_ways() {
        let core = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"},
            "involvedObject": {"kind": "CronTab", "name": "c"}, "message": "m", "count": 2,
            "reportingComponent": "ctl", "source": {"component": "ctl"}});
        let v1 = to_v1(core.clone());
        assert_eq!(v1["regarding"]["name"], "c");
        assert_eq!(v1["note"], "m");
        assert_eq!(v1["deprecatedCount"], 2);
        assert_eq!(v1["reportingController"], "ctl");
        assert_eq!(v1["apiVersion"], "events.k8s.io/v1");
        assert_eq!(to_core(v1), core);
    }

    #[test]
    fn legacy_and_strict_validation() {
        let legacy = json!({"metadata": {"namespace": "a"}, "involvedObject": {"namespace": "b"}});
        assert_eq!(
            legacy_validate(&legacy, false)[0].to_string(),
            "involvedObject.namespace: Invalid value: \"b\": does not match event.namespace"
        );
        let strict = to_core(json!({"metadata": {"namespace": "a"},
            "regarding": {"namespace": "a"}, "type": "Odd"}));
        let texts: Vec<String> = validate_v1_create(&strict)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert!(
            texts.contains(&"eventTime: Required value".to_string()),
            "{texts:?}"
        );
        assert!(
            texts.contains(&"type: Invalid value: \"\": has invalid value: Odd".to_string()),
            "{texts:?}"
        );
        let good = to_core(
            json!({"metadata": {"namespace": "a"}, "eventTime": "2026-11-24T05:00:00.000000Z",
            "regarding": {"namespace": "a"}, "type": "Normal", "reason": "R", "action": "A",
            "reportingController": "example.com/ctl", "reportingInstance": "i"}),
        );
        assert!(
            validate_v1_create(&good).is_empty(),
            "{:?}",
            validate_v1_create(&good)
        );
    }

    #[test]
    fn printed_row() {
        let now = chrono::Utc::now();
        let e = json!({"metadata": {"name": "e1"}, "type": "Warning", "reason": "R",
            "involvedObject": {"kind": "CronTab", "name": "c"}, "message": " m ",
            "source": {"component": "gc"}});
        let cells = core_printer(&e, now);
        assert_eq!(
            cells[1..7],
            [
                json!("Warning"),
                json!("R"),
                json!("crontab/c"),
                json!(""),
                json!("gc"),
                json!("m")
            ]
        );
        assert_eq!(cells[8], json!(1));
        assert_eq!(cells[0], json!("<unknown>"));
        assert_eq!(
            EventsV1.stored_field_label("regarding.name"),
            "involvedObject.name"
        );
    }
}
