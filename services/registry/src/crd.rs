//! The CustomResourceDefinition object as the registry handles it: decoding of a request body,
//! apiextensions.k8s.io/v1 defaults, pruning of unknown fields, and a typed read-only view
//! used by validation, naming and discovery.
//!
//! Sits at the start of every CRD write path (`service` → `crd::decode` → `crd::apply_defaults`
//! → `crd::CrdView::from_value` → `validate`/`naming`). The object itself always stays a JSON
//! value, so the schemas (validated by the validation service) round-trip untouched.
//!
//! Defaults follow apiextensions-apiserver `pkg/apis/apiextensions/v1/defaults.go`; decoding
//! errors follow the shape of the REST handlers' `BadRequest`s.

use crdplane_core::{ApiError, GroupResource};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

pub const GROUP: &str = "apiextensions.k8s.io";
pub const VERSION: &str = "v1";
pub const API_VERSION: &str = "apiextensions.k8s.io/v1";
pub const RESOURCE: &str = "customresourcedefinitions";
pub const KIND: &str = "CustomResourceDefinition";
/// Largest CRD accepted (bytes of JSON); etcd's default request limit is 1.5 MiB, the
/// apiserver's body limit 3 MiB.
pub const MAX_CRD_BYTES: usize = 3 * 1024 * 1024;

pub fn group_resource() -> GroupResource {
    GroupResource::new(GROUP, RESOURCE)
}

/// Parses a request body into a JSON object and checks apiVersion/kind (missing ones are
/// filled in, as the REST decoder does for the endpoint's own type).
pub fn decode(body: &[u8]) -> Result<Value, ApiError> {
    if body.len() > MAX_CRD_BYTES {
        return Err(ApiError::too_large(MAX_CRD_BYTES));
    }
    let mut v: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!(
            "{KIND} in version \"{VERSION}\" cannot be handled as a {KIND}: {e}"
        ))
    })?;
    let Some(obj) = v.as_object_mut() else {
        return Err(ApiError::bad_request(format!(
            "{KIND} in version \"{VERSION}\" cannot be handled as a {KIND}: body must be a JSON object"
        )));
    };
    match obj.get("apiVersion") {
        None | Some(Value::Null) => {
            obj.insert("apiVersion".into(), API_VERSION.into());
        }
        Some(Value::String(s)) if s == API_VERSION => {}
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({}) does not match the expected API version ({API_VERSION})",
                other.as_str().unwrap_or_default()
            )));
        }
    }
    match obj.get("kind") {
        None | Some(Value::Null) => {
            obj.insert("kind".into(), KIND.into());
        }
        Some(Value::String(s)) if s == KIND => {}
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({}) does not match the expected kind ({KIND})",
                other.as_str().unwrap_or_default()
            )));
        }
    }
    Ok(v)
}

const TOP_KEYS: &[&str] = &["apiVersion", "kind", "metadata", "spec", "status"];
const META_KEYS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];
const SPEC_KEYS: &[&str] = &[
    "group",
    "names",
    "scope",
    "versions",
    "conversion",
    "preserveUnknownFields",
];
const NAMES_KEYS: &[&str] = &[
    "plural",
    "singular",
    "shortNames",
    "kind",
    "listKind",
    "categories",
];
const VERSION_KEYS: &[&str] = &[
    "name",
    "served",
    "storage",
    "deprecated",
    "deprecationWarning",
    "schema",
    "subresources",
    "additionalPrinterColumns",
    "selectableFields",
];
const STATUS_KEYS: &[&str] = &["conditions", "acceptedNames", "storedVersions"];

fn retain(obj: &mut Map<String, Value>, keys: &[&str]) {
    obj.retain(|k, v| keys.contains(&k.as_str()) && !v.is_null());
}

/// Drops fields that the typed v1 object does not have (what decoding into the Go type does)
/// and `null`s of optional fields. Schemas are left to the validation service.
pub fn prune_unknown(v: &mut Value) {
    let Some(obj) = v.as_object_mut() else { return };
    retain(obj, TOP_KEYS);
    if let Some(Value::Object(m)) = obj.get_mut("metadata") {
        retain(m, META_KEYS);
    }
    if let Some(Value::Object(spec)) = obj.get_mut("spec") {
        retain(spec, SPEC_KEYS);
        if let Some(Value::Object(n)) = spec.get_mut("names") {
            retain(n, NAMES_KEYS);
        }
        if let Some(Value::Array(vs)) = spec.get_mut("versions") {
            for ver in vs.iter_mut() {
                if let Value::Object(m) = ver {
                    retain(m, VERSION_KEYS);
                }
            }
        }
    }
    if let Some(Value::Object(st)) = obj.get_mut("status") {
        retain(st, STATUS_KEYS);
        if let Some(Value::Object(n)) = st.get_mut("acceptedNames") {
            retain(n, NAMES_KEYS);
        }
    }
}

/// apiextensions/v1 `SetDefaults_CustomResourceDefinitionSpec` and friends, on the JSON.
pub fn apply_defaults(v: &mut Value) {
    let Some(obj) = v.as_object_mut() else { return };
    let Some(Value::Object(spec)) = obj.get_mut("spec") else {
        return;
    };
    if let Some(Value::Object(names)) = spec.get_mut("names") {
        let kind = names
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let singular_empty = names
            .get("singular")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty);
        if singular_empty && !kind.is_empty() {
            names.insert("singular".into(), kind.to_lowercase().into());
        }
        let list_kind_empty = names
            .get("listKind")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty);
        if list_kind_empty && !kind.is_empty() {
            names.insert("listKind".into(), format!("{kind}List").into());
        }
    }
    match spec.get_mut("conversion") {
        None => {
            let mut c = Map::new();
            c.insert("strategy".into(), "None".into());
            spec.insert("conversion".into(), Value::Object(c));
        }
        Some(Value::Object(conv)) => {
            // SetDefaults_ServiceReference: port 443.
            if let Some(Value::Object(svc)) = conv
                .get_mut("webhook")
                .and_then(|w| w.get_mut("clientConfig"))
                .and_then(|c| c.get_mut("service"))
                && svc.get("port").is_none_or(Value::is_null)
            {
                svc.insert("port".into(), 443.into());
            }
        }
        Some(_) => {}
    }
    if let Some(Value::Array(vs)) = spec.get_mut("versions") {
        for ver in vs.iter_mut() {
            if let Value::Object(m) = ver {
                // `served` and `storage` are not omitempty in the Go type.
                for k in ["served", "storage"] {
                    if !m.contains_key(k) {
                        m.insert(k.into(), false.into());
                    }
                }
            }
        }
    }
}

/// Removes nulls recursively (Go decodes `null` into a zero value).
fn strip_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), strip_nulls(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_nulls).collect()),
        other => other.clone(),
    }
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct Names {
    pub plural: String,
    pub singular: String,
    pub short_names: Vec<String>,
    pub kind: String,
    pub list_kind: String,
    pub categories: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Scale {
    pub spec_replicas_path: String,
    pub status_replicas_path: String,
    pub label_selector_path: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Subresources {
    pub status: Option<Value>,
    pub scale: Option<Scale>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Column {
    pub name: String,
    #[serde(rename = "type")]
    pub type_: String,
    pub format: String,
    pub description: String,
    pub priority: i64,
    pub json_path: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SelectableField {
    pub json_path: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Version {
    pub name: String,
    pub served: bool,
    pub storage: bool,
    pub deprecated: bool,
    pub deprecation_warning: Option<String>,
    pub schema: Option<Value>,
    pub subresources: Option<Subresources>,
    pub additional_printer_columns: Vec<Column>,
    pub selectable_fields: Vec<SelectableField>,
}

impl Version {
    /// The `openAPIV3Schema` of this version, if any.
    pub fn open_api_schema(&self) -> Option<&Value> {
        self.schema
            .as_ref()
            .and_then(|s| s.get("openAPIV3Schema"))
            .filter(|s| !s.is_null())
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ServiceRef {
    pub namespace: String,
    pub name: String,
    pub path: Option<String>,
    pub port: Option<i64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ClientConfig {
    pub url: Option<String>,
    pub service: Option<ServiceRef>,
    pub ca_bundle: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Webhook {
    pub client_config: Option<ClientConfig>,
    pub conversion_review_versions: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Conversion {
    pub strategy: String,
    pub webhook: Option<Webhook>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Spec {
    pub group: String,
    pub names: Names,
    pub scope: String,
    pub versions: Vec<Version>,
    pub conversion: Option<Conversion>,
    pub preserve_unknown_fields: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub last_transition_time: Option<String>,
    pub reason: String,
    pub message: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Status {
    pub conditions: Vec<Condition>,
    pub accepted_names: Names,
    pub stored_versions: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Meta {
    pub name: String,
    pub generate_name: String,
    pub namespace: String,
    pub uid: String,
    pub resource_version: String,
    pub generation: i64,
    pub creation_timestamp: Option<String>,
    pub deletion_timestamp: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub finalizers: Vec<String>,
}

/// A typed, read-only view of a CRD (what the Go code works on).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct CrdView {
    pub metadata: Meta,
    pub spec: Spec,
    pub status: Status,
}

impl CrdView {
    /// Decodes the view; type mismatches are the 400 the REST decoder returns.
    pub fn from_value(v: &Value) -> Result<Self, ApiError> {
        serde_json::from_value(strip_nulls(v)).map_err(|e| {
            ApiError::bad_request(format!(
                "{KIND} in version \"{VERSION}\" cannot be handled as a {KIND}: {e}"
            ))
        })
    }

    pub fn storage_version(&self) -> Option<&Version> {
        self.spec.versions.iter().find(|v| v.storage)
    }

    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.status.conditions.iter().find(|c| c.type_ == type_)
    }

    pub fn is_condition_true(&self, type_: &str) -> bool {
        self.condition(type_).is_some_and(|c| c.status == "True")
    }

    pub fn established(&self) -> bool {
        self.is_condition_true("Established")
    }

    pub fn namespaced(&self) -> bool {
        self.spec.scope == "Namespaced"
    }
}

/// The `metadata` map of an object, created if missing.
pub fn metadata_mut(v: &mut Value) -> &mut Map<String, Value> {
    let obj = v.as_object_mut().expect("decode guarantees an object");
    let m = obj
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !m.is_object() {
        *m = Value::Object(Map::new());
    }
    m.as_object_mut().expect("just made an object")
}

/// `metadata.name` of a stored object ("" when absent).
pub fn name_of(v: &Value) -> &str {
    v.get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// `metadata.resourceVersion` parsed (0 when absent or not a number).
pub fn resource_version_of(v: &Value) -> u64 {
    v.get("metadata")
        .and_then(|m| m.get("resourceVersion"))
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_follow_v1_defaults_go() {
        let mut v = json!({"spec": {"names": {"kind": "CronTab", "plural": "crontabs"},
            "versions": [{"name": "v1"}]}});
        apply_defaults(&mut v);
        assert_eq!(v["spec"]["names"]["singular"], "crontab");
        assert_eq!(v["spec"]["names"]["listKind"], "CronTabList");
        assert_eq!(v["spec"]["conversion"], json!({"strategy": "None"}));
        assert_eq!(v["spec"]["versions"][0]["served"], false);
        assert_eq!(v["spec"]["versions"][0]["storage"], false);

        // Explicit values are kept; webhook service port defaults to 443.
        let mut v = json!({"spec": {"names": {"kind": "A", "singular": "x", "listKind": "AL"},
            "conversion": {"strategy": "Webhook", "webhook": {"clientConfig": {"service": {"name": "s", "namespace": "n"}}}}}});
        apply_defaults(&mut v);
        assert_eq!(v["spec"]["names"]["singular"], "x");
        assert_eq!(v["spec"]["names"]["listKind"], "AL");
        assert_eq!(
            v["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["port"],
            443
        );

        // No kind: nothing to derive from.
        let mut v = json!({"spec": {"names": {}}});
        apply_defaults(&mut v);
        assert!(v["spec"]["names"].get("singular").is_none());
    }

    #[test]
    fn decode_checks_type_meta() {
        let v = decode(br#"{"metadata":{"name":"a"}}"#).unwrap();
        assert_eq!(v["apiVersion"], API_VERSION);
        assert_eq!(v["kind"], KIND);
        let e = decode(br#"{"apiVersion":"apiextensions.k8s.io/v1beta1"}"#).unwrap_err();
        assert_eq!(e.code, 400);
        assert_eq!(
            e.message,
            "the API version in the data (apiextensions.k8s.io/v1beta1) does not match the expected API version (apiextensions.k8s.io/v1)"
        );
        assert_eq!(decode(b"[1]").unwrap_err().code, 400);
        assert_eq!(decode(b"{").unwrap_err().code, 400);
    }

    #[test]
    fn prune_drops_unknown_fields_only() {
        let mut v = json!({"apiVersion": API_VERSION, "bogus": 1,
            "metadata": {"name": "a", "x": 1},
            "spec": {"group": "g", "extra": true, "names": {"kind": "K", "nope": 1},
                "versions": [{"name": "v1", "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-foo": 1}}, "junk": 1}]},
            "status": {"acceptedNames": {"kind": "K"}, "other": 1}});
        prune_unknown(&mut v);
        assert!(v.get("bogus").is_none());
        assert!(v["metadata"].get("x").is_none());
        assert!(v["spec"].get("extra").is_none());
        assert!(v["spec"]["names"].get("nope").is_none());
        assert!(v["spec"]["versions"][0].get("junk").is_none());
        assert_eq!(
            v["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["x-kubernetes-foo"],
            1
        );
        assert!(v["status"].get("other").is_none());
    }

    #[test]
    fn view_tolerates_nulls_and_rejects_wrong_types() {
        let v = json!({"spec": {"group": null, "names": {"kind": "K"}, "versions": [{"name": "v1", "storage": true}]}});
        let view = CrdView::from_value(&v).unwrap();
        assert_eq!(view.spec.group, "");
        assert_eq!(view.storage_version().unwrap().name, "v1");
        let e = CrdView::from_value(&json!({"spec": {"group": 5}})).unwrap_err();
        assert_eq!(e.code, 400);
    }
}
