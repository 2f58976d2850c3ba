//! Typed read access to an object's `metadata` (upstream `metav1.ObjectMeta`, read through
//! `meta.Accessor` in k8s.io/apimachinery/pkg/api/meta) over unstructured JSON, so callers
//! stop repeating `obj["metadata"]["..."]` chains with their own defaults.
//!
//! Where it sits: anywhere an object is in hand as a `serde_json::Value` (strategies,
//! admission, garbage collection, rendering). A missing field, or one of the wrong JSON type,
//! reads as its Go zero value, as the unstructured accessors do.
//!
//! A borrowed view rather than k8s-openapi's `ObjectMeta`: objects travel as JSON values
//! (custom resources have no Rust type), and decoding an owned `ObjectMeta` on every write
//! and read would copy every label, annotation and managed field to read a few of them.

use serde_json::{Map, Value};

/// A borrowed view of `obj.metadata`.
#[derive(Debug, Clone, Copy)]
pub struct ObjectMeta<'a> {
    meta: Option<&'a Map<String, Value>>,
}

/// One `metadata.ownerReferences` entry (`metav1.OwnerReference`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnerRef<'a> {
    /// `apiVersion` of the owner.
    pub api_version: &'a str,
    /// `kind` of the owner.
    pub kind: &'a str,
    /// Name of the owner (same namespace as the dependent, or cluster-scoped).
    pub name: &'a str,
    /// UID of the owner; the reference only matches an object with this uid.
    pub uid: &'a str,
    /// Whether this owner is the managing controller (at most one reference may be).
    pub controller: bool,
    /// Whether the owner's foreground deletion waits for this dependent.
    pub block_owner_deletion: bool,
}

impl<'a> ObjectMeta<'a> {
    /// The metadata of `obj` (empty when it has none).
    pub fn of(obj: &'a Value) -> Self {
        Self {
            meta: obj.get("metadata").and_then(Value::as_object),
        }
    }

    fn str(&self, k: &str) -> &'a str {
        self.meta
            .and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    fn strings(&self, k: &str) -> Vec<(&'a str, &'a str)> {
        self.meta
            .and_then(|m| m.get(k))
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| v.as_str().map(|v| (k.as_str(), v)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// `metadata.name`.
    pub fn name(&self) -> &'a str {
        self.str("name")
    }
    /// `metadata.generateName`: the prefix for a server-generated name.
    pub fn generate_name(&self) -> &'a str {
        self.str("generateName")
    }
    /// `metadata.namespace` ("" when cluster-scoped).
    pub fn namespace(&self) -> &'a str {
        self.str("namespace")
    }
    /// `metadata.uid`.
    pub fn uid(&self) -> &'a str {
        self.str("uid")
    }
    /// `resourceVersion` as sent (a string on the wire).
    pub fn resource_version(&self) -> &'a str {
        self.str("resourceVersion")
    }
    /// `generation` (0 when unset).
    pub fn generation(&self) -> i64 {
        self.meta
            .and_then(|m| m.get("generation"))
            .and_then(Value::as_i64)
            .unwrap_or(0)
    }
    /// `deletionTimestamp`, if the object is being deleted.
    pub fn deletion_timestamp(&self) -> Option<&'a str> {
        self.meta
            .and_then(|m| m.get("deletionTimestamp"))
            .and_then(Value::as_str)
    }
    /// Whether the object is being deleted (`deletionTimestamp` set).
    pub fn deleting(&self) -> bool {
        self.deletion_timestamp().is_some()
    }
    /// `labels` (entries whose value is not a string are skipped).
    pub fn labels(&self) -> Vec<(&'a str, &'a str)> {
        self.strings("labels")
    }
    /// One label's value.
    pub fn label(&self, key: &str) -> Option<&'a str> {
        self.meta
            .and_then(|m| m.get("labels"))
            .and_then(|l| l.get(key))
            .and_then(Value::as_str)
    }
    /// `annotations` (entries whose value is not a string are skipped).
    pub fn annotations(&self) -> Vec<(&'a str, &'a str)> {
        self.strings("annotations")
    }
    /// One annotation's value.
    pub fn annotation(&self, key: &str) -> Option<&'a str> {
        self.meta
            .and_then(|m| m.get("annotations"))
            .and_then(|l| l.get(key))
            .and_then(Value::as_str)
    }
    /// `finalizers` in order (non-strings skipped).
    pub fn finalizers(&self) -> Vec<&'a str> {
        self.meta
            .and_then(|m| m.get("finalizers"))
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    }
    /// Whether `finalizers` holds `f`.
    pub fn has_finalizer(&self, f: &str) -> bool {
        self.finalizers().contains(&f)
    }
    /// `ownerReferences` (entries that are not objects are skipped).
    pub fn owner_references(&self) -> Vec<OwnerRef<'a>> {
        let s = |o: &'a Map<String, Value>, k: &str| o.get(k).and_then(Value::as_str).unwrap_or("");
        let b =
            |o: &'a Map<String, Value>, k: &str| o.get(k).and_then(Value::as_bool).unwrap_or(false);
        self.meta
            .and_then(|m| m.get("ownerReferences"))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_object)
                    .map(|o| OwnerRef {
                        api_version: s(o, "apiVersion"),
                        kind: s(o, "kind"),
                        name: s(o, "name"),
                        uid: s(o, "uid"),
                        controller: b(o, "controller"),
                        block_owner_deletion: b(o, "blockOwnerDeletion"),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
    /// The owner reference with `controller: true`, if any (`metav1.GetControllerOf`).
    pub fn controller(&self) -> Option<OwnerRef<'a>> {
        self.owner_references().into_iter().find(|o| o.controller)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_every_field() {
        let obj = json!({"metadata": {
            "name": "x", "generateName": "x-", "namespace": "default", "uid": "u1",
            "resourceVersion": "42", "generation": 3,
            "deletionTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app": "a", "bad": 1},
            "annotations": {"note": "n"},
            "finalizers": ["f1", 2, "f2"],
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "K", "name": "o", "uid": "ou"},
                "junk",
                {"apiVersion": "g/v1", "kind": "C", "name": "c", "uid": "cu",
                 "controller": true, "blockOwnerDeletion": true}
            ]
        }});
        let m = ObjectMeta::of(&obj);
        assert_eq!(
            (
                m.name(),
                m.generate_name(),
                m.namespace(),
                m.uid(),
                m.resource_version(),
                m.generation()
            ),
            ("x", "x-", "default", "u1", "42", 3)
        );
        assert_eq!(m.deletion_timestamp(), Some("2026-01-01T00:00:00Z"));
        assert!(m.deleting());
        assert_eq!(m.labels(), vec![("app", "a")]);
        assert_eq!(m.label("app"), Some("a"));
        assert_eq!(m.label("bad"), None);
        assert_eq!(m.annotations(), vec![("note", "n")]);
        assert_eq!(m.annotation("note"), Some("n"));
        assert_eq!(m.finalizers(), vec!["f1", "f2"]);
        assert!(m.has_finalizer("f2") && !m.has_finalizer("f3"));
        let owners = m.owner_references();
        assert_eq!(owners.len(), 2);
        assert_eq!((owners[0].name, owners[0].controller), ("o", false));
        let c = m.controller().unwrap();
        assert_eq!(
            (c.api_version, c.kind, c.name, c.uid, c.block_owner_deletion),
            ("g/v1", "C", "c", "cu", true)
        );
    }

    #[test]
    fn missing_or_mistyped_fields_read_as_zero_values() {
        let cases = [
            json!({}),
            json!({"metadata": null}),
            json!({"metadata": "x"}),
            json!({"metadata": {"name": 1, "generation": "3", "labels": [], "finalizers": {},
                                "ownerReferences": {}, "deletionTimestamp": 5}}),
            json!([1, 2]),
        ];
        for obj in &cases {
            let m = ObjectMeta::of(obj);
            assert_eq!(m.name(), "", "{obj}");
            assert_eq!(m.namespace(), "", "{obj}");
            assert_eq!(m.resource_version(), "", "{obj}");
            assert_eq!(m.generation(), 0, "{obj}");
            assert!(!m.deleting(), "{obj}");
            assert!(m.labels().is_empty(), "{obj}");
            assert!(m.annotations().is_empty(), "{obj}");
            assert!(m.finalizers().is_empty(), "{obj}");
            assert!(m.owner_references().is_empty(), "{obj}");
            assert_eq!(m.controller(), None, "{obj}");
        }
    }
}
