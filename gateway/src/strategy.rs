//! Request strategy as pure functions: what the server sets on create and keeps on update,
//! generation bookkeeping, generateName, list options and continue tokens.
//!
//! Follows k8s.io/apiserver/pkg/registry/rest/create.go (`BeforeCreate`, `FillObjectMetaSystemFields`),
//! update.go (`BeforeUpdate`), apiextensions-apiserver pkg/registry/customresource/strategy.go
//! (`PrepareForCreate`/`PrepareForUpdate`: status handling and generation), and
//! k8s.io/apiserver/pkg/storage/continue.go (continue tokens).

pub use crdplane_apiserver::rest::meta::{
    CreateParams, generate_name, object_rv, prepare_for_create, prepare_for_update,
    rv_set_on_create, spec_changed, unchanged,
};

// ---- list options and continue tokens -------------------------------------------------------
//
// Token encoding and list-option validation are pure and live in crdplane-core
// (`continue_token`, `options`); fetching the signing key is IO (`backends::storage`).

pub use crdplane_core::continue_token::{
    INCONSISTENT_CONTINUE, decode_continue, encode_continue, token_scope,
};
pub use crdplane_core::options::{ListOptions, ListRv, list_options};

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn params(ns: &str) -> CreateParams<'_> {
        CreateParams {
            namespace: ns,
            namespaced: true,
            uid: "u".into(),
            now: "2026-01-01T00:00:00Z".into(),
            drop_status: false,
        }
    }

    #[test]
    fn no_op_detection_and_create_resource_version() {
        let old = json!({"apiVersion":"s/v1","kind":"K","metadata":{"name":"x","generation":1,
            "resourceVersion":"5","labels":{"a":"b"}},"spec":{"n":1},"status":{"p":"R"}});
        // A merge patch that sets what is there, after prepare-for-update: unchanged.
        let mut new = old.clone();
        json_patch::merge(
            &mut new,
            &json!({"spec":{"n":1},"metadata":{"labels":{"a":"b"}}}),
        );
        prepare_for_update(&mut new, &old, true).unwrap();
        assert!(unchanged(&new, &old));
        // Status through the main resource is reset from the stored object: unchanged.
        let mut new = old.clone();
        new["status"] = json!({"p":"other"});
        prepare_for_update(&mut new, &old, true).unwrap();
        assert!(unchanged(&new, &old));
        // A label, a spec field (generation moves too), an annotation: changed.
        for p in [
            json!({"metadata":{"labels":{"a":"c"}}}),
            json!({"spec":{"n":2}}),
            json!({"metadata":{"annotations":{"x":"y"}}}),
        ] {
            let mut new = old.clone();
            json_patch::merge(&mut new, &p);
            prepare_for_update(&mut new, &old, true).unwrap();
            assert!(!unchanged(&new, &old), "{p}");
        }
        for (rv, set) in [
            (json!("12"), true),
            (json!("0"), false),
            (json!(""), false),
            (json!("-1"), false),
            (json!("abc"), false),
            (Value::Null, false),
        ] {
            let o = json!({"metadata":{"name":"x","resourceVersion":rv}});
            assert_eq!(rv_set_on_create(&o), set, "{rv}");
        }
    }

    #[test]
    fn create_sets_system_fields() {
        let mut o = json!({"apiVersion":"g/v1","kind":"K","metadata":{"name":"a","resourceVersion":"5"},"spec":{}});
        prepare_for_create(&mut o, &params("default")).unwrap();
        assert_eq!(o["metadata"]["namespace"], "default");
        assert_eq!(o["metadata"]["generation"], 1);
        assert_eq!(o["metadata"]["uid"], "u");
        assert!(o["metadata"].get("resourceVersion").is_none());
        let mut bad = json!({"metadata":{"name":"a","namespace":"other"}});
        assert_eq!(
            prepare_for_create(&mut bad, &params("default"))
                .unwrap_err()
                .message,
            "the namespace of the provided object does not match the namespace sent on the request"
        );
    }

    #[test]
    fn generate_name_and_status_drop() {
        let mut o = json!({"metadata":{"generateName":"ct-"},"status":{"x":1}});
        let mut p = params("d");
        p.drop_status = true;
        prepare_for_create(&mut o, &p).unwrap();
        let n = o["metadata"]["name"].as_str().unwrap();
        assert!(n.starts_with("ct-") && n.len() == 8, "{n}");
        assert!(o.get("status").is_none());
    }

    #[test]
    fn update_generation_and_status() {
        let old = json!({"metadata":{"uid":"u","generation":3,"creationTimestamp":"t"},"spec":{"a":1},"status":{"s":1}});
        let mut same =
            json!({"metadata":{"uid":"evil","generation":9},"spec":{"a":1},"status":{"s":2}});
        prepare_for_update(&mut same, &old, true).unwrap();
        assert_eq!(same["metadata"]["generation"], 3);
        assert_eq!(same["metadata"]["uid"], "u");
        assert_eq!(
            same["status"]["s"], 1,
            "status kept from old with the subresource"
        );
        let mut changed = json!({"metadata":{},"spec":{"a":2}});
        prepare_for_update(&mut changed, &old, false).unwrap();
        assert_eq!(changed["metadata"]["generation"], 4);
        let mut status_only = json!({"metadata":{},"spec":{"a":1},"status":{"s":5}});
        prepare_for_update(&mut status_only, &old, false).unwrap();
        assert_eq!(
            status_only["metadata"]["generation"], 3,
            "status changes do not bump generation"
        );
    }
}
