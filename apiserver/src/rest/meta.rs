//! Object-metadata strategy every resource shares, as pure functions: what the server sets
//! on create and keeps on update, generateName, generation bookkeeping, no-op detection.
//!
//! Where it sits: called by the resource strategies ([`crate::rest::Strategy`]
//! implementations) from the generic create/update/patch handlers. Follows
//! k8s.io/apiserver pkg/registry/rest/create.go (`BeforeCreate`,
//! `FillObjectMetaSystemFields`), update.go (`BeforeUpdate`), pkg/storage/names (generateName)
//! and apiextensions-apiserver pkg/registry/customresource/strategy.go
//! (`PrepareForCreate`/`PrepareForUpdate`: status handling and generation).

use crdplane_core::ApiError;
use serde_json::{Map, Value, json};

/// Upstream's name generator alphabet (k8s.io/apiserver/pkg/storage/names, utilrand.String).
const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
/// Upstream's `maxGeneratedNameLength` is 63 - 5 random characters.
const MAX_GENERATE_PREFIX: usize = 58;

/// `metadata.generateName` completed: the prefix (cut to 58 bytes) plus 5 random characters from
/// upstream's alphabet (apiserver `pkg/storage/names`).
pub fn generate_name(prefix: &str) -> String {
    use rand::Rng;
    let prefix = if prefix.len() > MAX_GENERATE_PREFIX {
        &prefix[..MAX_GENERATE_PREFIX]
    } else {
        prefix
    };
    let mut rng = rand::rng();
    let suffix: String = (0..5)
        .map(|_| ALPHANUMS[rng.random_range(0..ALPHANUMS.len())] as char)
        .collect();
    format!("{prefix}{suffix}")
}

fn meta_mut(obj: &mut Value) -> Result<&mut Map<String, Value>, ApiError> {
    let m = obj
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("the object provided is not a JSON object"))?;
    let meta = m
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if meta.is_null() {
        *meta = Value::Object(Map::new());
    }
    meta.as_object_mut()
        .ok_or_else(|| ApiError::bad_request("metadata must be an object"))
}

/// Options of one create.
pub struct CreateParams<'a> {
    /// Namespace of the URL ("" for cluster-scoped resources).
    pub namespace: &'a str,
    /// Whether the resource is namespaced.
    pub namespaced: bool,
    /// The new object's `metadata.uid`.
    pub uid: String,
    /// The new object's `metadata.creationTimestamp` (RFC 3339).
    pub now: String,
    /// Status subresource enabled: the main endpoint drops `.status`.
    pub drop_status: bool,
}

/// `BeforeCreate` + `PrepareForCreate`: namespace check, generateName, system fields.
pub fn prepare_for_create(obj: &mut Value, p: &CreateParams<'_>) -> Result<(), ApiError> {
    if p.drop_status
        && let Some(m) = obj.as_object_mut()
    {
        m.remove("status");
    }
    let meta = meta_mut(obj)?;
    if p.namespaced {
        match meta.get("namespace").and_then(Value::as_str) {
            Some(ns) if !ns.is_empty() && ns != p.namespace => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => {
                meta.insert("namespace".into(), Value::String(p.namespace.to_string()));
            }
        }
    } else {
        meta.remove("namespace");
    }
    let has_name = meta
        .get("name")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    if !has_name
        && let Some(prefix) = meta
            .get("generateName")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    {
        let n = generate_name(prefix);
        meta.insert("name".into(), Value::String(n));
    }
    meta.insert("uid".into(), Value::String(p.uid.clone()));
    meta.insert("creationTimestamp".into(), Value::String(p.now.clone()));
    meta.insert("generation".into(), json!(1));
    for k in [
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
    ] {
        meta.remove(k);
    }
    Ok(())
}

/// `BeforeUpdate` + `PrepareForUpdate`: immutable system fields from `old`, status kept from
/// `old` when the status subresource is on, generation +1 iff anything but metadata and
/// status changed.
pub fn prepare_for_update(
    new: &mut Value,
    old: &Value,
    has_status_subresource: bool,
) -> Result<(), ApiError> {
    if has_status_subresource {
        let m = new
            .as_object_mut()
            .ok_or_else(|| ApiError::bad_request("the object provided is not a JSON object"))?;
        match old.get("status") {
            Some(s) => {
                m.insert("status".into(), s.clone());
            }
            None => {
                m.remove("status");
            }
        }
    }
    let changed = spec_changed(new, old);
    let old_meta = old
        .get("metadata")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let meta = meta_mut(new)?;
    for k in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "namespace",
    ] {
        match old_meta.get(k) {
            Some(v) => {
                meta.insert(k.into(), v.clone());
            }
            None => {
                meta.remove(k);
            }
        }
    }
    let generation = old_meta
        .get("generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    meta.insert(
        "generation".into(),
        json!(if changed { generation + 1 } else { generation }),
    );
    meta.remove("selfLink");
    Ok(())
}

/// Anything other than metadata and status differs (apiVersion and kind excluded too, since
/// a version change alone is a conversion, not an edit).
pub fn spec_changed(new: &Value, old: &Value) -> bool {
    let skip = ["metadata", "status", "apiVersion", "kind"];
    let (Some(n), Some(o)) = (new.as_object(), old.as_object()) else {
        return new != old;
    };
    let nk = n.iter().filter(|(k, _)| !skip.contains(&k.as_str()));
    let ok = o.iter().filter(|(k, _)| !skip.contains(&k.as_str()));
    !nk.eq(ok)
}

/// Whether an object to be created carries a resourceVersion (etcd3 store.go `Create`: the
/// versioner's parse of it is a non-zero number; an unparsable value is ignored as upstream
/// ignores it).
pub fn rv_set_on_create(obj: &Value) -> bool {
    match obj.pointer("/metadata/resourceVersion") {
        Some(Value::String(s)) => s.parse::<u64>().is_ok_and(|v| v != 0),
        _ => false,
    }
}

/// Whether the object an update would store equals the stored one (etcd3 store.go
/// `GuaranteedUpdate` skips a write whose bytes equal the existing ones). Both sides are the
/// objects as the request's version shows them, after admission and prepare-for-update, so
/// server-set fields (generation, status of the main resource, identity) already agree when
/// nothing else changed.
pub fn unchanged(new: &Value, old: &Value) -> bool {
    new == old
}

/// The resourceVersion a client sent in an object, if any (0 when absent/empty).
pub fn object_rv(obj: &Value) -> Result<u64, ApiError> {
    match obj.pointer("/metadata/resourceVersion") {
        None | Some(Value::Null) => Ok(0),
        Some(Value::String(s)) if s.is_empty() => Ok(0),
        Some(Value::String(s)) => s
            .parse()
            .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {s:?}"))),
        Some(other) => Err(ApiError::bad_request(format!(
            "invalid resourceVersion {other}"
        ))),
    }
}
