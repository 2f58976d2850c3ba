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
