//! Request bodies of built-in types in the Kubernetes protobuf encoding
//! (`application/vnd.kubernetes.protobuf`: the magic `k8s\0`, then a `runtime.Unknown`
//! whose `raw` is the object's generated.proto message), which kubectl's typed clients send
//! (`kubectl create namespace|configmap|secret|serviceaccount`). Decoded with the k8s-pb
//! crate's generated messages into the object's JSON form, the fields a client writes:
//! metadata (name, generateName, namespace, labels, annotations, finalizers,
//! ownerReferences) and the type's own fields.
//!
//! Follows apimachinery pkg/runtime/serializer/protobuf/protobuf.go (envelope) and
//! k8s.io/api core/v1/generated.proto.

use base64::Engine;
use crdplane_core::ApiError;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use prost::Message;
use serde_json::{Map, Value, json};

/// The media type.
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// Whether a Content-Type names the protobuf encoding.
pub fn is_protobuf(content_type: Option<&str>) -> bool {
    content_type.is_some_and(|ct| ct.trim().starts_with(PROTOBUF))
}

fn bad(kind: &str) -> ApiError {
    ApiError::bad_request(format!(
        "unable to decode the protobuf {kind} in the request body"
    ))
}

/// The envelope's `raw` message, after checking its kind is `kind`.
fn unwrap_envelope(body: &[u8], kind: &str) -> Result<Vec<u8>, ApiError> {
    let unknown = body
        .strip_prefix(b"k8s\0".as_slice())
        .ok_or_else(|| bad(kind))?;
    let u = k8s_pb::apimachinery::pkg::runtime::Unknown::decode(unknown).map_err(|_| bad(kind))?;
    let found = u.type_meta.and_then(|t| t.kind).unwrap_or_default();
    if !found.is_empty() && found != kind {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({found}) does not match the expected kind ({kind})"
        )));
    }
    Ok(u.raw.unwrap_or_default())
}

fn b64(b: &[u8]) -> Value {
    Value::String(base64::engine::general_purpose::STANDARD.encode(b))
}

fn string_map<V>(m: &std::collections::BTreeMap<String, V>, f: impl Fn(&V) -> Value) -> Value {
    Value::Object(m.iter().map(|(k, v)| (k.clone(), f(v))).collect())
}

fn put(m: &mut Map<String, Value>, k: &str, v: Option<Value>) {
    if let Some(v) = v {
        m.insert(k.into(), v);
    }
}

/// The client-written fields of an ObjectMeta.
fn object_meta(m: Option<meta::ObjectMeta>) -> Value {
    let m = m.unwrap_or_default();
    let mut out = Map::new();
    // Go's generated marshallers write empty strings too: absent is "" (omitempty in JSON).
    let text = |s: Option<String>| s.filter(|s| !s.is_empty()).map(Value::String);
    put(&mut out, "name", text(m.name));
    put(&mut out, "generateName", text(m.generate_name));
    put(&mut out, "namespace", text(m.namespace));
    if !m.labels.is_empty() {
        out.insert("labels".into(), string_map(&m.labels, |v| json!(v)));
    }
    if !m.annotations.is_empty() {
        out.insert(
            "annotations".into(),
            string_map(&m.annotations, |v| json!(v)),
        );
    }
    if !m.finalizers.is_empty() {
        out.insert("finalizers".into(), json!(m.finalizers));
    }
    if !m.owner_references.is_empty() {
        let refs: Vec<Value> = m
            .owner_references
            .into_iter()
            .map(|r| {
                let mut o = Map::new();
                put(&mut o, "apiVersion", r.api_version.map(Value::String));
                put(&mut o, "kind", r.kind.map(Value::String));
                put(&mut o, "name", r.name.map(Value::String));
                put(&mut o, "uid", r.uid.map(Value::String));
                put(&mut o, "controller", r.controller.map(Value::Bool));
                put(
                    &mut o,
                    "blockOwnerDeletion",
                    r.block_owner_deletion.map(Value::Bool),
                );
                Value::Object(o)
            })
            .collect();
        out.insert("ownerReferences".into(), Value::Array(refs));
    }
    Value::Object(out)
}

/// A protobuf request body of built-in kind `kind` as JSON; `None` when this server does not
/// take that kind in protobuf (the caller answers 415).
pub fn decode(kind: &str, body: &[u8]) -> Option<Result<Value, ApiError>> {
    let f: fn(&[u8]) -> Result<Value, ApiError> = match kind {
        "ConfigMap" => config_map,
        "Secret" => secret,
        "ServiceAccount" => service_account,
        "Namespace" => namespace,
        "SelfSubjectReview" => self_subject_review,
        _ => return None,
    };
    Some(f(body))
}

/// `kubectl auth whoami`'s request: nothing in it matters but its kind.
fn self_subject_review(body: &[u8]) -> Result<Value, ApiError> {
    let raw = unwrap_envelope(body, "SelfSubjectReview")?;
    k8s_pb::api::authentication::v1::SelfSubjectReview::decode(raw.as_slice())
        .map_err(|_| bad("SelfSubjectReview"))?;
    Ok(json!({"kind": "SelfSubjectReview"}))
}

fn config_map(body: &[u8]) -> Result<Value, ApiError> {
    let raw = unwrap_envelope(body, "ConfigMap")?;
    let c =
        k8s_pb::api::core::v1::ConfigMap::decode(raw.as_slice()).map_err(|_| bad("ConfigMap"))?;
    let mut o = Map::new();
    o.insert("apiVersion".into(), json!("v1"));
    o.insert("kind".into(), json!("ConfigMap"));
    o.insert("metadata".into(), object_meta(c.metadata));
    if !c.data.is_empty() {
        o.insert("data".into(), string_map(&c.data, |v| json!(v)));
    }
    if !c.binary_data.is_empty() {
        o.insert("binaryData".into(), string_map(&c.binary_data, |v| b64(v)));
    }
    put(&mut o, "immutable", c.immutable.map(Value::Bool));
    Ok(Value::Object(o))
}

fn secret(body: &[u8]) -> Result<Value, ApiError> {
    let raw = unwrap_envelope(body, "Secret")?;
    let s = k8s_pb::api::core::v1::Secret::decode(raw.as_slice()).map_err(|_| bad("Secret"))?;
    let mut o = Map::new();
    o.insert("apiVersion".into(), json!("v1"));
    o.insert("kind".into(), json!("Secret"));
    o.insert("metadata".into(), object_meta(s.metadata));
    if !s.data.is_empty() {
        o.insert("data".into(), string_map(&s.data, |v| b64(v)));
    }
    if !s.string_data.is_empty() {
        o.insert(
            "stringData".into(),
            string_map(&s.string_data, |v| json!(v)),
        );
    }
    put(
        &mut o,
        "type",
        s.r#type.filter(|t| !t.is_empty()).map(Value::String),
    );
    put(&mut o, "immutable", s.immutable.map(Value::Bool));
    Ok(Value::Object(o))
}

fn service_account(body: &[u8]) -> Result<Value, ApiError> {
    let raw = unwrap_envelope(body, "ServiceAccount")?;
    let s = k8s_pb::api::core::v1::ServiceAccount::decode(raw.as_slice())
        .map_err(|_| bad("ServiceAccount"))?;
    let mut o = Map::new();
    o.insert("apiVersion".into(), json!("v1"));
    o.insert("kind".into(), json!("ServiceAccount"));
    o.insert("metadata".into(), object_meta(s.metadata));
    if !s.secrets.is_empty() {
        let refs: Vec<Value> = s
            .secrets
            .into_iter()
            .map(|r| {
                let mut m = Map::new();
                put(&mut m, "kind", r.kind.map(Value::String));
                put(&mut m, "namespace", r.namespace.map(Value::String));
                put(&mut m, "name", r.name.map(Value::String));
                put(&mut m, "uid", r.uid.map(Value::String));
                put(&mut m, "apiVersion", r.api_version.map(Value::String));
                Value::Object(m)
            })
            .collect();
        o.insert("secrets".into(), Value::Array(refs));
    }
    if !s.image_pull_secrets.is_empty() {
        let refs: Vec<Value> = s
            .image_pull_secrets
            .into_iter()
            .map(|r| json!({"name": r.name.unwrap_or_default()}))
            .collect();
        o.insert("imagePullSecrets".into(), Value::Array(refs));
    }
    put(
        &mut o,
        "automountServiceAccountToken",
        s.automount_service_account_token.map(Value::Bool),
    );
    Ok(Value::Object(o))
}

/// Namespaces (`kubectl create namespace`): metadata and `spec.finalizers`.
pub fn namespace(body: &[u8]) -> Result<Value, ApiError> {
    let raw = unwrap_envelope(body, "Namespace")?;
    let n =
        k8s_pb::api::core::v1::Namespace::decode(raw.as_slice()).map_err(|_| bad("Namespace"))?;
    let finalizers = n.spec.map(|s| s.finalizers).unwrap_or_default();
    Ok(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": object_meta(n.metadata),
              "spec": {"finalizers": finalizers}}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(kind: &str, raw: Vec<u8>) -> Vec<u8> {
        let u = k8s_pb::apimachinery::pkg::runtime::Unknown {
            type_meta: Some(k8s_pb::apimachinery::pkg::runtime::TypeMeta {
                api_version: Some("v1".into()),
                kind: Some(kind.into()),
            }),
            raw: Some(raw),
            ..Default::default()
        };
        [b"k8s\0".to_vec(), u.encode_to_vec()].concat()
    }

    #[test]
    fn config_maps_and_secrets_decode() {
        let cm = k8s_pb::api::core::v1::ConfigMap {
            metadata: Some(meta::ObjectMeta {
                name: Some("c".into()),
                labels: [("a".to_string(), "b".to_string())].into(),
                ..Default::default()
            }),
            data: [("k".to_string(), "v".to_string())].into(),
            binary_data: [("b".to_string(), vec![0u8, 1])].into(),
            ..Default::default()
        };
        let v = decode("ConfigMap", &envelope("ConfigMap", cm.encode_to_vec()))
            .unwrap()
            .unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "c", "labels": {"a": "b"}},
                   "data": {"k": "v"}, "binaryData": {"b": "AAE="}})
        );
        let s = k8s_pb::api::core::v1::Secret {
            metadata: Some(meta::ObjectMeta {
                name: Some("s".into()),
                ..Default::default()
            }),
            data: [("k".to_string(), b"hi".to_vec())].into(),
            r#type: Some("Opaque".into()),
            ..Default::default()
        };
        let v = decode("Secret", &envelope("Secret", s.encode_to_vec()))
            .unwrap()
            .unwrap();
        assert_eq!(v["data"]["k"], "aGk=");
        assert_eq!(v["type"], "Opaque");
    }

    #[test]
    fn namespaces_decode() {
        let n = k8s_pb::api::core::v1::Namespace {
            metadata: Some(meta::ObjectMeta {
                name: Some("team".into()),
                generate_name: Some(String::new()),
                labels: [("a".to_string(), "b".to_string())].into(),
                ..Default::default()
            }),
            spec: Some(Default::default()),
            ..Default::default()
        };
        let v = namespace(&envelope("Namespace", n.encode_to_vec())).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": "team", "labels": {"a": "b"}},
                   "spec": {"finalizers": []}})
        );
    }

    #[test]
    fn wrong_kind_and_garbage_are_400() {
        let e = decode("Secret", &envelope("ConfigMap", Vec::new()))
            .unwrap()
            .unwrap_err();
        assert_eq!(
            e.message,
            "the kind in the data (ConfigMap) does not match the expected kind (Secret)"
        );
        assert_eq!(decode("Secret", b"{}").unwrap().unwrap_err().code, 400);
        assert_eq!(
            decode("Secret", b"k8s\0\x0a\x05ab")
                .unwrap()
                .unwrap_err()
                .code,
            400
        );
        assert!(decode("Lease", b"").is_none());
    }
}
