//! Request bodies of built-in types in the Kubernetes protobuf encoding
//! (`application/vnd.kubernetes.protobuf`: the magic `k8s\0`, then a `runtime.Unknown`
//! whose `raw` is the object's generated.proto message), which kubectl's typed clients send
//! (`kubectl create namespace|configmap|secret|serviceaccount|role|clusterrole|rolebinding|
//! clusterrolebinding`). Decoded with the k8s-pb
//! crate's generated messages into the object's JSON form, the fields a client writes:
//! metadata (name, generateName, namespace, labels, annotations, finalizers,
//! ownerReferences) and the type's own fields.
//!
//! Follows apimachinery pkg/runtime/serializer/protobuf/protobuf.go (envelope) and
//! k8s.io/api core/v1 and rbac/v1 generated.proto.

use base64::Engine;
use crdplane_core::ApiError;
use k8s_pb::api::rbac::v1 as rbac;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use prost::Message;
use serde_json::{Map, Value, json};

/// The media type.
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// Whether a Content-Type names the protobuf encoding.
pub fn is_protobuf(content_type: Option<&str>) -> bool {
    content_type.is_some_and(|ct| ct.trim().starts_with(PROTOBUF))
}

/// A write's body as an object of `kind`: JSON or YAML ([`crate::request::decode_body`]),
/// or protobuf for the kinds kubectl's typed clients send that way. A protobuf body of
/// another kind is 415, naming the media types that are served.
pub fn request_object(req: &crate::context::Req, kind: &str) -> Result<Value, ApiError> {
    if !is_protobuf(req.header(http::header::CONTENT_TYPE)) {
        return crate::request::decode_body(req);
    }
    decode(kind, &req.body).unwrap_or_else(|| {
        Err(ApiError::unsupported_media_type(&[
            "application/json",
            "application/yaml",
        ]))
    })
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
        "SelfSubjectAccessReview" => self_subject_access_review,
        "TokenRequest" => token_request,
        "SelfSubjectRulesReview" => self_subject_rules_review,
        "SubjectAccessReview" => subject_access_review,
        "LocalSubjectAccessReview" => local_subject_access_review,
        "Role" => role,
        "ClusterRole" => cluster_role,
        "RoleBinding" => role_binding,
        "ClusterRoleBinding" => cluster_role_binding,
        _ => return None,
    };
    Some(f(body))
}

use k8s_pb::api::authorization::v1 as authz;

/// The attributes of an access review's spec, as JSON (`kubectl auth can-i`'s request).
fn access_attributes(
    out: &mut Map<String, Value>,
    r: Option<authz::ResourceAttributes>,
    n: Option<authz::NonResourceAttributes>,
) {
    let text = |s: Option<String>| s.map(Value::String);
    if let Some(r) = r {
        let mut o = Map::new();
        put(&mut o, "namespace", text(r.namespace));
        put(&mut o, "verb", text(r.verb));
        put(&mut o, "group", text(r.group));
        put(&mut o, "version", text(r.version));
        put(&mut o, "resource", text(r.resource));
        put(&mut o, "subresource", text(r.subresource));
        put(&mut o, "name", text(r.name));
        out.insert("resourceAttributes".into(), Value::Object(o));
    }
    if let Some(n) = n {
        let mut o = Map::new();
        put(&mut o, "path", text(n.path));
        put(&mut o, "verb", text(n.verb));
        out.insert("nonResourceAttributes".into(), Value::Object(o));
    }
}

fn review(kind: &str, meta: Option<meta::ObjectMeta>, spec: Map<String, Value>) -> Value {
    json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": kind,
        "metadata": object_meta(meta),
        "spec": spec,
    })
}

/// `kubectl create token`'s request.
fn token_request(body: &[u8]) -> Result<Value, ApiError> {
    const K: &str = "TokenRequest";
    let raw = unwrap_envelope(body, K)?;
    let r = k8s_pb::api::authentication::v1::TokenRequest::decode(raw.as_slice())
        .map_err(|_| bad(K))?;
    let s = r.spec.unwrap_or_default();
    let mut spec = Map::new();
    if !s.audiences.is_empty() {
        spec.insert("audiences".into(), json!(s.audiences));
    }
    put(
        &mut spec,
        "expirationSeconds",
        s.expiration_seconds.map(Value::from),
    );
    if let Some(b) = s.bound_object_ref {
        let mut o = Map::new();
        put(&mut o, "kind", b.kind.map(Value::String));
        put(&mut o, "apiVersion", b.api_version.map(Value::String));
        put(&mut o, "name", b.name.map(Value::String));
        put(&mut o, "uid", b.u_id.map(Value::String));
        spec.insert("boundObjectRef".into(), Value::Object(o));
    }
    Ok(json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": K,
        "metadata": object_meta(r.metadata),
        "spec": spec,
    }))
}

/// `kubectl auth can-i`'s request.
fn self_subject_access_review(body: &[u8]) -> Result<Value, ApiError> {
    const K: &str = "SelfSubjectAccessReview";
    let raw = unwrap_envelope(body, K)?;
    let r = authz::SelfSubjectAccessReview::decode(raw.as_slice()).map_err(|_| bad(K))?;
    let s = r.spec.unwrap_or_default();
    let mut spec = Map::new();
    access_attributes(&mut spec, s.resource_attributes, s.non_resource_attributes);
    Ok(review(K, r.metadata, spec))
}

/// `kubectl auth can-i --list`'s request.
fn self_subject_rules_review(body: &[u8]) -> Result<Value, ApiError> {
    const K: &str = "SelfSubjectRulesReview";
    let raw = unwrap_envelope(body, K)?;
    let r = authz::SelfSubjectRulesReview::decode(raw.as_slice()).map_err(|_| bad(K))?;
    let mut spec = Map::new();
    put(
        &mut spec,
        "namespace",
        r.spec.and_then(|s| s.namespace).map(Value::String),
    );
    Ok(review(K, r.metadata, spec))
}

fn subject_access_spec(s: authz::SubjectAccessReviewSpec) -> Map<String, Value> {
    let mut spec = Map::new();
    access_attributes(&mut spec, s.resource_attributes, s.non_resource_attributes);
    put(&mut spec, "user", s.user.map(Value::String));
    put(&mut spec, "uid", s.uid.map(Value::String));
    if !s.groups.is_empty() {
        spec.insert("groups".into(), json!(s.groups));
    }
    if !s.extra.is_empty() {
        spec.insert("extra".into(), string_map(&s.extra, |v| json!(v.items)));
    }
    spec
}

fn subject_access_review(body: &[u8]) -> Result<Value, ApiError> {
    const K: &str = "SubjectAccessReview";
    let raw = unwrap_envelope(body, K)?;
    let r = authz::SubjectAccessReview::decode(raw.as_slice()).map_err(|_| bad(K))?;
    Ok(review(
        K,
        r.metadata,
        subject_access_spec(r.spec.unwrap_or_default()),
    ))
}

fn local_subject_access_review(body: &[u8]) -> Result<Value, ApiError> {
    const K: &str = "LocalSubjectAccessReview";
    let raw = unwrap_envelope(body, K)?;
    let r = authz::LocalSubjectAccessReview::decode(raw.as_slice()).map_err(|_| bad(K))?;
    Ok(review(
        K,
        r.metadata,
        subject_access_spec(r.spec.unwrap_or_default()),
    ))
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

const RBAC_V1: &str = "rbac.authorization.k8s.io/v1";

/// A list of strings as JSON, `None` when empty (the JSON form omits it).
fn string_list(v: Vec<String>) -> Option<Value> {
    (!v.is_empty()).then(|| json!(v))
}

fn policy_rules(rules: Vec<rbac::PolicyRule>) -> Value {
    Value::Array(
        rules
            .into_iter()
            .map(|r| {
                let mut o = Map::new();
                o.insert("verbs".into(), json!(r.verbs));
                put(&mut o, "apiGroups", string_list(r.api_groups));
                put(&mut o, "resources", string_list(r.resources));
                put(&mut o, "resourceNames", string_list(r.resource_names));
                put(&mut o, "nonResourceURLs", string_list(r.non_resource_ur_ls));
                Value::Object(o)
            })
            .collect(),
    )
}

fn label_selector(s: meta::LabelSelector) -> Value {
    let mut o = Map::new();
    if !s.match_labels.is_empty() {
        o.insert(
            "matchLabels".into(),
            string_map(&s.match_labels, |v| json!(v)),
        );
    }
    if !s.match_expressions.is_empty() {
        let exprs: Vec<Value> = s
            .match_expressions
            .into_iter()
            .map(|e| {
                let mut m = Map::new();
                m.insert("key".into(), json!(e.key.unwrap_or_default()));
                m.insert("operator".into(), json!(e.operator.unwrap_or_default()));
                put(&mut m, "values", string_list(e.values));
                Value::Object(m)
            })
            .collect();
        o.insert("matchExpressions".into(), Value::Array(exprs));
    }
    Value::Object(o)
}

fn role_object(
    kind: &str,
    metadata: Option<meta::ObjectMeta>,
    rules: Vec<rbac::PolicyRule>,
) -> Map<String, Value> {
    let mut o = Map::new();
    o.insert("apiVersion".into(), json!(RBAC_V1));
    o.insert("kind".into(), json!(kind));
    o.insert("metadata".into(), object_meta(metadata));
    o.insert("rules".into(), policy_rules(rules));
    o
}

fn role(body: &[u8]) -> Result<Value, ApiError> {
    let raw = unwrap_envelope(body, "Role")?;
    let r = rbac::Role::decode(raw.as_slice()).map_err(|_| bad("Role"))?;
    Ok(Value::Object(role_object("Role", r.metadata, r.rules)))
}

fn cluster_role(body: &[u8]) -> Result<Value, ApiError> {
    let raw = unwrap_envelope(body, "ClusterRole")?;
    let r = rbac::ClusterRole::decode(raw.as_slice()).map_err(|_| bad("ClusterRole"))?;
    let mut o = role_object("ClusterRole", r.metadata, r.rules);
    if let Some(a) = r.aggregation_rule {
        let mut rule = Map::new();
        if !a.cluster_role_selectors.is_empty() {
            let sels: Vec<Value> = a
                .cluster_role_selectors
                .into_iter()
                .map(label_selector)
                .collect();
            rule.insert("clusterRoleSelectors".into(), Value::Array(sels));
        }
        o.insert("aggregationRule".into(), Value::Object(rule));
    }
    Ok(Value::Object(o))
}

fn binding_object(
    kind: &str,
    metadata: Option<meta::ObjectMeta>,
    subjects: Vec<rbac::Subject>,
    role_ref: Option<rbac::RoleRef>,
) -> Value {
    let mut o = Map::new();
    o.insert("apiVersion".into(), json!(RBAC_V1));
    o.insert("kind".into(), json!(kind));
    o.insert("metadata".into(), object_meta(metadata));
    let text = |s: Option<String>| s.filter(|s| !s.is_empty()).map(Value::String);
    if !subjects.is_empty() {
        let subs: Vec<Value> = subjects
            .into_iter()
            .map(|s| {
                let mut m = Map::new();
                m.insert("kind".into(), json!(s.kind.unwrap_or_default()));
                put(&mut m, "apiGroup", text(s.api_group));
                m.insert("name".into(), json!(s.name.unwrap_or_default()));
                put(&mut m, "namespace", text(s.namespace));
                Value::Object(m)
            })
            .collect();
        o.insert("subjects".into(), Value::Array(subs));
    }
    let r = role_ref.unwrap_or_default();
    o.insert(
        "roleRef".into(),
        json!({"apiGroup": r.api_group.unwrap_or_default(), "kind": r.kind.unwrap_or_default(),
               "name": r.name.unwrap_or_default()}),
    );
    Value::Object(o)
}

fn role_binding(body: &[u8]) -> Result<Value, ApiError> {
    let raw = unwrap_envelope(body, "RoleBinding")?;
    let b = rbac::RoleBinding::decode(raw.as_slice()).map_err(|_| bad("RoleBinding"))?;
    Ok(binding_object(
        "RoleBinding",
        b.metadata,
        b.subjects,
        b.role_ref,
    ))
}

fn cluster_role_binding(body: &[u8]) -> Result<Value, ApiError> {
    let raw = unwrap_envelope(body, "ClusterRoleBinding")?;
    let b =
        rbac::ClusterRoleBinding::decode(raw.as_slice()).map_err(|_| bad("ClusterRoleBinding"))?;
    Ok(binding_object(
        "ClusterRoleBinding",
        b.metadata,
        b.subjects,
        b.role_ref,
    ))
}

/// Namespaces (`kubectl create namespace`): metadata and `spec.finalizers`.
fn namespace(body: &[u8]) -> Result<Value, ApiError> {
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
    fn rbac_types_decode() {
        let r = rbac::ClusterRole {
            metadata: Some(meta::ObjectMeta {
                name: Some("c".into()),
                ..Default::default()
            }),
            rules: vec![rbac::PolicyRule {
                verbs: vec!["get".into()],
                non_resource_ur_ls: vec!["/healthz".into()],
                ..Default::default()
            }],
            aggregation_rule: Some(rbac::AggregationRule {
                cluster_role_selectors: vec![meta::LabelSelector {
                    match_labels: [("a".to_string(), "b".to_string())].into(),
                    ..Default::default()
                }],
            }),
        };
        let v = decode("ClusterRole", &envelope("ClusterRole", r.encode_to_vec()))
            .unwrap()
            .unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": "c"},
                   "rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}],
                   "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"a": "b"}}]}})
        );
        let b = rbac::RoleBinding {
            metadata: Some(meta::ObjectMeta {
                name: Some("b".into()),
                namespace: Some("ns".into()),
                ..Default::default()
            }),
            subjects: vec![rbac::Subject {
                kind: Some("User".into()),
                api_group: Some("rbac.authorization.k8s.io".into()),
                name: Some("jane".into()),
                namespace: Some(String::new()),
            }],
            role_ref: Some(rbac::RoleRef {
                api_group: Some("rbac.authorization.k8s.io".into()),
                kind: Some("ClusterRole".into()),
                name: Some("view".into()),
            }),
        };
        let v = decode("RoleBinding", &envelope("RoleBinding", b.encode_to_vec()))
            .unwrap()
            .unwrap();
        assert_eq!(
            v["subjects"],
            json!([{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "jane"}])
        );
        assert_eq!(
            v["roleRef"],
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"})
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
