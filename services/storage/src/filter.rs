//! Which objects a list or watch returns: namespace and name by key (no parsing), label and
//! field selectors (`crdplane_core::selector`) by decoding the object only when one is set.
//!
//! Field selectors here understand `metadata.name` and `metadata.namespace`, and any other
//! label as a dotted JSON path (a CRD's selectableFields); which labels a request may use is
//! decided by the caller (gateway), which answers `field label not supported: …` before
//! reaching storage.

use crdplane_core::ApiError;
use crdplane_core::filter::{ObjectFilter, transition};
pub use crdplane_core::filter::{Transition, field_value};
use serde_json::Value;

/// [`ObjectFilter`] over stored bytes: the key `<namespace>/<name>` and the JSON, decoded only
/// when a selector needs it.
#[derive(Debug, Default)]
pub struct Filter {
    inner: ObjectFilter,
}

impl Filter {
    /// Parses the request's fixed namespace and name (empty = any) and its label and field
    /// selector strings; a selector that does not parse is a 400 BadRequest.
    pub fn new(
        namespace: &str,
        name: &str,
        label_selector: &str,
        field_selector: &str,
    ) -> Result<Self, ApiError> {
        Ok(Self {
            inner: ObjectFilter::new(namespace, name, label_selector, field_selector)?,
        })
    }

    /// True when no selector needs the object body and no name is fixed.
    pub fn is_plain(&self) -> bool {
        self.inner.key_only() && self.inner.name.is_empty()
    }

    /// True when the name alone decides (a direct key lookup is possible).
    pub fn is_single_name(&self) -> bool {
        !self.inner.name.is_empty()
    }

    /// Matches on the object key `<namespace>/<name>` and, when selectors are set, the JSON.
    pub fn matches(&self, key: &str, json: &[u8]) -> bool {
        let (ns, name) = key.split_once('/').unwrap_or(("", key));
        if !self.inner.matches_key(ns, name) {
            return false;
        }
        if self.inner.key_only() {
            return true;
        }
        serde_json::from_slice::<Value>(json).is_ok_and(|obj| self.inner.matches_value(&obj))
    }

    /// The event a watcher with this filter sees for a stored event (see
    /// [`crdplane_core::filter::transition`]); `prev` is the previous state of a MODIFIED
    /// event, empty when unknown.
    pub fn transition(&self, kind: u8, key: &str, json: &[u8], prev: &[u8]) -> Option<Transition> {
        let now = self.matches(key, json);
        let before = (kind == b'M' && !prev.is_empty() && !self.is_key_only())
            .then(|| self.matches(key, prev));
        transition(kind, before, now)
    }

    /// True when the key alone decides (namespace / name, no selectors on the body).
    pub fn is_key_only(&self) -> bool {
        self.inner.key_only()
    }
}

/// `namespace`, `name`, `matches_key` and `matches_value` of the shared filter.
impl std::ops::Deref for Filter {
    type Target = ObjectFilter;
    fn deref(&self) -> &ObjectFilter {
        &self.inner
    }
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
