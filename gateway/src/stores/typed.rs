//! Strict decoding of a namespace or CRD against its Kubernetes type (k8s-openapi's
//! `Namespace`, `CustomResourceDefinition`): the fields the typed object does not have, as
//! upstream's strict decoder reports them (`unknown field "spec.foo"`, sigs.k8s.io/json
//! paths), and the object without them, as decoding into the Go type drops them.
//!
//! Where it sits: under the namespace and CRD strategies (`Strategy::unknown_fields` for the
//! patch handler, pruning in `prepare_for_create`/`prepare_for_update`) and their create
//! and update handlers (the findings under `fieldValidation`). The built-in types do the
//! same through their own typed round trip (`stores/builtin`).

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// `input` decoded as `T` and encoded again; None when it does not decode as `T` (the
/// type's validation answers for such an object).
fn round_trip<T: DeserializeOwned + Serialize>(input: &Value) -> Option<Value> {
    let typed: T = serde_json::from_value(input.clone()).ok()?;
    serde_json::to_value(typed).ok()
}

/// The `unknown field "…"` texts of `input` as type `T` (apiVersion and kind are known
/// fields of every type; null values are not unknown fields).
pub fn unknown_fields<T: DeserializeOwned + Serialize>(input: &Value) -> Vec<String> {
    let Some(out) = round_trip::<T>(input) else {
        return Vec::new();
    };
    crate::stores::builtin::unknown_fields(input, &out)
        .into_iter()
        .filter(|p| p != "apiVersion" && p != "kind")
        .map(|p| format!("unknown field {}", crdplane_core::field::go_quote(&p)))
        .collect()
}

/// Removes from `obj` the fields type `T` does not have (what upstream's decoding into the
/// Go type leaves out), keeping everything else as it is.
pub fn drop_unknown_fields<T: DeserializeOwned + Serialize>(obj: &mut Value) {
    fn prune(i: &mut Value, o: &Value) {
        match (i, o) {
            (Value::Object(a), Value::Object(b)) => {
                a.retain(|k, _| k == "apiVersion" || k == "kind" || b.contains_key(k));
                for (k, v) in a.iter_mut() {
                    if let Some(w) = b.get(k) {
                        prune(v, w);
                    }
                }
            }
            (Value::Array(a), Value::Array(b)) => {
                for (v, w) in a.iter_mut().zip(b) {
                    prune(v, w);
                }
            }
            _ => {}
        }
    }
    if let Some(out) = round_trip::<T>(obj) {
        prune(obj, &out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Namespace;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use serde_json::json;

    #[test]
    fn namespaces() {
        let mut ns = json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "a", "labels": {"x": "y"}, "bogus": 1, "gone": null},
            "spec": {"finalizers": ["kubernetes"], "foo": {"bar": 1}}, "status": {"phase": "Active"}});
        assert_eq!(
            unknown_fields::<Namespace>(&ns),
            [
                r#"unknown field "metadata.bogus""#,
                r#"unknown field "spec.foo""#
            ]
        );
        drop_unknown_fields::<Namespace>(&mut ns);
        assert_eq!(
            ns,
            json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "a", "labels": {"x": "y"}},
                "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
        );
        assert!(unknown_fields::<Namespace>(&ns).is_empty());
        // Not a namespace at all: no findings, nothing dropped.
        let mut odd = json!({"apiVersion": "v1", "kind": "Namespace", "spec": "x", "zz": 1});
        assert!(unknown_fields::<Namespace>(&odd).is_empty());
        drop_unknown_fields::<Namespace>(&mut odd);
        assert_eq!(odd["zz"], 1);
    }

    #[test]
    fn crds_down_to_the_schema() {
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "things.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced", "colour": "red",
                "names": {"plural": "things", "kind": "Thing"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "propertiez": {},
                        "properties": {"spec": {"type": "object", "default": {"free": {"form": 1}},
                            "x-kubernetes-preserve-unknown-fields": true}}}}}]}});
        assert_eq!(
            unknown_fields::<CustomResourceDefinition>(&crd),
            [
                r#"unknown field "spec.colour""#,
                r#"unknown field "spec.versions[0].schema.openAPIV3Schema.propertiez""#
            ]
        );
        let mut pruned = crd.clone();
        drop_unknown_fields::<CustomResourceDefinition>(&mut pruned);
        assert!(pruned["spec"].get("colour").is_none());
        // Free-form JSON (a default) is kept whole.
        assert_eq!(
            pruned["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["default"],
            json!({"free": {"form": 1}})
        );
    }
}
