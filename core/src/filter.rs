//! Which objects a list or watch returns, and what a filtered watcher sees of each event.
//!
//! Shared by the storage service (lists, private watches) and the gateway (shared watch
//! streams), so both decide membership and selector transitions the same way.
//!
//! Namespace and name are decided by key, without the object; label and field selectors
//! ([`crate::selector`]) need the decoded object. Field selectors understand
//! `metadata.name`, `metadata.namespace` and any other label as a dotted JSON path (a CRD's
//! selectableFields); which labels a request may use is decided by the gateway, which answers
//! `field label not supported: …` before a filter is built.
//!
//! Transitions follow upstream's cacher (`staging/src/k8s.io/apiserver/pkg/storage/cacher/
//! cache_watcher.go`, `convertToWatchEvent`).
use crate::ApiError;
use crate::selector::{FieldSelector, LabelSelector};
use serde_json::Value;

/// A watcher's or list's filter: namespace and name by key, selectors on the object.
#[derive(Debug, Default)]
pub struct ObjectFilter {
    /// "" = every namespace.
    pub namespace: String,
    /// "" = every name (a `metadata.name=` field selector lands here).
    pub name: String,
    label: Option<LabelSelector>,
    field: Option<FieldSelector>,
}

impl ObjectFilter {
    /// Selector strings in Kubernetes syntax; a parse error is a 400.
    pub fn new(namespace: &str, name: &str, label: &str, field: &str) -> Result<Self, ApiError> {
        let label = if label.trim().is_empty() {
            None
        } else {
            Some(LabelSelector::parse(label).map_err(ApiError::bad_request)?)
        };
        let mut name = name.to_string();
        let field = if field.trim().is_empty() {
            None
        } else {
            let f = FieldSelector::parse(field).map_err(ApiError::bad_request)?;
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

    /// True when namespace and name decide alone (no selector needs the object).
    pub fn key_only(&self) -> bool {
        self.label.is_none() && self.field.is_none()
    }

    /// The key part of the decision.
    pub fn matches_key(&self, ns: &str, name: &str) -> bool {
        (self.namespace.is_empty() || self.namespace == ns)
            && (self.name.is_empty() || self.name == name)
    }

    /// The selector part of the decision.
    pub fn matches_value(&self, obj: &Value) -> bool {
        if let Some(l) = &self.label
            && !l.matches_object(obj)
        {
            return false;
        }
        if let Some(f) = &self.field {
            return f.matches(|label: &str| field_value(obj, label));
        }
        true
    }
}

/// What a filtered watcher receives for a stored event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// The event as stored (same type, new object).
    Same,
    /// ADDED with the new object (it starts matching).
    Added,
    /// DELETED with the previous object (it stops matching).
    DeletedPrev,
}

/// The cacher's rule: ADDED / DELETED (`kind` `A` / `D`) pass when their object matches; a
/// MODIFIED (`M`) that matched before and now stays MODIFIED, only now becomes ADDED, only
/// before becomes DELETED (sent with the previous state), neither is dropped. `before` is
/// None when the previous state is unknown: the new state then decides alone.
pub fn transition(kind: u8, before: Option<bool>, now: bool) -> Option<Transition> {
    match (kind, before) {
        (b'M', Some(before)) => match (before, now) {
            (true, true) => Some(Transition::Same),
            (false, true) => Some(Transition::Added),
            (true, false) => Some(Transition::DeletedPrev),
            (false, false) => None,
        },
        _ => now.then_some(Transition::Same),
    }
}

/// The string value of a field label in an object (a dotted path); absent → "" (upstream
/// behaviour for selectable fields).
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
    use serde_json::json;

    #[test]
    fn transitions_follow_the_cacher() {
        use Transition::*;
        assert_eq!(transition(b'M', Some(true), true), Some(Same));
        assert_eq!(transition(b'M', Some(false), true), Some(Added));
        assert_eq!(transition(b'M', Some(true), false), Some(DeletedPrev));
        assert_eq!(transition(b'M', Some(false), false), None);
        assert_eq!(transition(b'M', None, true), Some(Same));
        assert_eq!(transition(b'M', None, false), None);
        assert_eq!(transition(b'A', Some(false), true), Some(Same));
        assert_eq!(transition(b'D', None, false), None);
    }

    #[test]
    fn keys_selectors_and_field_paths() {
        let f = ObjectFilter::new("a", "", "app in (web,api)", "spec.tier=gold").unwrap();
        assert!(!f.key_only());
        assert!(f.matches_key("a", "x") && !f.matches_key("b", "x"));
        let o = json!({"metadata": {"labels": {"app": "web"}}, "spec": {"tier": "gold"}});
        assert!(f.matches_value(&o));
        let o = json!({"metadata": {"labels": {"app": "db"}}, "spec": {"tier": "gold"}});
        assert!(!f.matches_value(&o));
        // metadata.name= becomes a key filter.
        let f = ObjectFilter::new("", "", "", "metadata.name=x").unwrap();
        assert!(f.key_only() && f.name == "x");
        assert!(ObjectFilter::new("", "", "a in (", "").is_err());
        assert_eq!(
            field_value(&json!({"spec": {"n": 3}}), "spec.n").as_deref(),
            Some("3")
        );
        assert_eq!(field_value(&json!({}), "spec.n").as_deref(), Some(""));
    }
}
