//! Which objects a list or watch returns: namespace and name by key (no parsing), label and
//! field selectors (`crdplane_core::selector`) by decoding the object only when one is set.
//!
//! Field selectors here understand `metadata.name` and `metadata.namespace`, and any other
//! label as a dotted JSON path (a CRD's selectableFields); which labels a request may use is
//! decided by the caller (gateway), which answers `field label not supported: …` before
//! reaching storage.

use crdplane_core::ApiError;
use crdplane_core::selector::{FieldSelector, LabelSelector};
use serde_json::Value;

#[derive(Debug, Default)]
pub struct Filter {
    pub namespace: String,
    pub name: String,
    label: Option<LabelSelector>,
    field: Option<FieldSelector>,
}

impl Filter {
    pub fn new(
        namespace: &str,
        name: &str,
        label_selector: &str,
        field_selector: &str,
    ) -> Result<Self, ApiError> {
        let label = if label_selector.trim().is_empty() {
            None
        } else {
            Some(LabelSelector::parse(label_selector).map_err(ApiError::bad_request)?)
        };
        let mut name = name.to_string();
        let field = if field_selector.trim().is_empty() {
            None
        } else {
            let f = FieldSelector::parse(field_selector).map_err(ApiError::bad_request)?;
            match f.exact_name() {
                Some(n) if name.is_empty() => {
                    name = n.to_string();
                    None
                }
                _ => Some(f),
            }
        };
        Ok(Self {
            namespace: namespace.to_string(),
            name,
            label,
            field,
        })
    }

    /// True when no selector needs the object body.
    pub fn is_plain(&self) -> bool {
        self.label.is_none() && self.field.is_none() && self.name.is_empty()
    }

    /// True when the name alone decides (a direct key lookup is possible).
    pub fn is_single_name(&self) -> bool {
        !self.name.is_empty()
    }

    /// Matches on the object key `<namespace>/<name>` and, when selectors are set, the JSON.
    pub fn matches(&self, key: &str, json: &[u8]) -> bool {
        let (ns, name) = key.split_once('/').unwrap_or(("", key));
        if !self.namespace.is_empty() && ns != self.namespace {
            return false;
        }
        if !self.name.is_empty() && name != self.name {
            return false;
        }
        if self.label.is_none() && self.field.is_none() {
            return true;
        }
        let Ok(obj) = serde_json::from_slice::<Value>(json) else {
            return false;
        };
        self.matches_value(&obj)
    }

    /// The event type a watcher with this filter sees for a stored event, or None when it
    /// sees nothing (upstream cacher `cache_watcher.go` convertToWatchEvent):
    /// - ADDED / DELETED pass when their object matches;
    /// - MODIFIED: matched before and now → MODIFIED; only now → ADDED; only before →
    ///   DELETED (the object sent is then the previous state at the event's revision, which
    ///   `prev` already is); neither → nothing.
    ///
    /// `prev` is the previous state of a MODIFIED event; when it is unknown (empty) the new
    /// state decides alone, as before transitions were tracked.
    pub fn transition(&self, kind: u8, key: &str, json: &[u8], prev: &[u8]) -> Option<Transition> {
        if kind != b'M' {
            return self.matches(key, json).then_some(Transition::Same);
        }
        let now = self.matches(key, json);
        if prev.is_empty() || self.is_key_only() {
            return now.then_some(Transition::Same);
        }
        match (self.matches(key, prev), now) {
            (true, true) => Some(Transition::Same),
            (false, true) => Some(Transition::Added),
            (true, false) => Some(Transition::DeletedPrev),
            (false, false) => None,
        }
    }

    /// True when the key alone decides (namespace / name, no selectors on the body).
    pub fn is_key_only(&self) -> bool {
        self.label.is_none() && self.field.is_none()
    }

    pub fn matches_value(&self, obj: &Value) -> bool {
        if let Some(l) = &self.label {
            let empty = serde_json::Map::new();
            let labels = obj
                .pointer("/metadata/labels")
                .and_then(Value::as_object)
                .unwrap_or(&empty);
            if !l.matches(labels) {
                return false;
            }
        }
        if let Some(f) = &self.field {
            return f.matches(|label: &str| field_value(obj, label));
        }
        true
    }
}

/// What a watcher receives for an event that passed [`Filter::transition`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// The event as stored (same type, new object).
    Same,
    /// ADDED with the new object (it starts matching).
    Added,
    /// DELETED with the previous object (it stops matching).
    DeletedPrev,
}

/// The string value of a field label in an object; absent → "" (upstream behaviour for
/// selectable fields).
pub fn field_value(obj: &Value, label: &str) -> Option<String> {
    let mut cur = obj;
    for part in label.split('.') {
        match cur.get(part) {
            Some(v) => cur = v,
            None => return Some(String::new()),
        }
    }
    Some(match cur {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Null => String::new(),
        other => other.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(labels: &str) -> Vec<u8> {
        format!(r#"{{"metadata":{{"name":"x","namespace":"a","labels":{{{labels}}}}}}}"#)
            .into_bytes()
    }

    #[test]
    fn selector_transitions_follow_the_cacher() {
        let f = Filter::new("", "", "app=web", "").unwrap();
        let (web, db) = (obj(r#""app":"web""#), obj(r#""app":"db""#));
        assert_eq!(
            f.transition(b'M', "a/x", &web, &web),
            Some(Transition::Same)
        );
        assert_eq!(
            f.transition(b'M', "a/x", &web, &db),
            Some(Transition::Added)
        );
        assert_eq!(
            f.transition(b'M', "a/x", &db, &web),
            Some(Transition::DeletedPrev)
        );
        assert_eq!(f.transition(b'M', "a/x", &db, &db), None);
        assert_eq!(f.transition(b'A', "a/x", &web, b""), Some(Transition::Same));
        assert_eq!(f.transition(b'A', "a/x", &db, b""), None);
        assert_eq!(f.transition(b'D', "a/x", &web, b""), Some(Transition::Same));
        assert_eq!(f.transition(b'D', "a/x", &db, b""), None);
        // Previous state unknown: the new state decides.
        assert_eq!(f.transition(b'M', "a/x", &web, b""), Some(Transition::Same));
        assert_eq!(f.transition(b'M', "a/x", &db, b""), None);
    }

    #[test]
    fn key_filters_need_no_previous_state() {
        let f = Filter::new("a", "", "", "metadata.name=x").unwrap();
        assert!(f.is_key_only());
        let o = obj("");
        assert_eq!(
            f.transition(b'M', "a/x", &o, b"not json"),
            Some(Transition::Same)
        );
        assert_eq!(f.transition(b'M', "b/x", &o, &o), None);
        assert_eq!(f.transition(b'M', "a/y", &o, &o), None);
    }

    #[test]
    fn field_selector_on_a_selectable_field_transitions() {
        let f = Filter::new("", "", "", "spec.color=red").unwrap();
        let red = br#"{"spec":{"color":"red"}}"#;
        let blue = br#"{"spec":{"color":"blue"}}"#;
        assert_eq!(
            f.transition(b'M', "a/x", blue, red),
            Some(Transition::DeletedPrev)
        );
        assert_eq!(
            f.transition(b'M', "a/x", red, blue),
            Some(Transition::Added)
        );
    }
}
