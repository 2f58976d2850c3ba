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
//!
//! Why [`CrdView`] is not k8s-openapi's `CustomResourceDefinition`: that type's decoder
//! requires the fields Go's decoder leaves at their zero value (`spec.group`, `spec.names`,
//! `names.plural`, a condition's `type`, …), so a CRD missing one would get a 400 decoding
//! error instead of upstream's 422 that names every field (`spec.group: Required value`),
//! and its typed `JSONSchemaProps` would re-encode the schemas, which must reach the
//! validation service and storage as the client wrote them. The view decodes like Go
//! (absent = zero value) and keeps schemas as JSON. k8s-openapi's type is used where its
//! strictness is the point: the unknown-field findings of `fieldValidation` (the gateway's
//! `stores/typed.rs`).

use crdplane_core::{ApiError, GroupResource};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// API group of CustomResourceDefinitions.
pub const GROUP: &str = "apiextensions.k8s.io";
/// The one served version of that group.
pub const VERSION: &str = "v1";
/// `apiVersion` of a CRD object.
pub const API_VERSION: &str = "apiextensions.k8s.io/v1";
/// Plural resource name of CRDs.
pub const RESOURCE: &str = "customresourcedefinitions";
/// `kind` of a CRD object.
pub const KIND: &str = "CustomResourceDefinition";
/// Largest CRD accepted (bytes of JSON); etcd's default request limit is 1.5 MiB, the
/// apiserver's body limit 3 MiB.
pub const MAX_CRD_BYTES: usize = 3 * 1024 * 1024;

/// `customresourcedefinitions.apiextensions.k8s.io`, as error messages name it.
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

/// `CustomResourceDefinitionNames`: `spec.names` and `status.acceptedNames`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct Names {
    /// Plural resource name, used in URLs (`crontabs`).
    pub plural: String,
    /// Singular name, an alias on the CLI (lowercase kind when empty).
    pub singular: String,
    /// Short aliases on the CLI (`ct`).
    pub short_names: Vec<String>,
    /// CamelCase kind of the objects (`CronTab`).
    pub kind: String,
    /// Kind of the list (`CronTabList`; kind + `List` when empty).
    pub list_kind: String,
    /// Grouped resources it belongs to (`all`), for `kubectl get <category>`.
    pub categories: Vec<String>,
}

/// `CustomResourceSubresourceScale`: the `/scale` subresource's JSON paths.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Scale {
    /// JSON path of the desired replicas (`.spec.replicas`).
    pub spec_replicas_path: String,
    /// JSON path of the observed replicas (`.status.replicas`).
    pub status_replicas_path: String,
    /// JSON path of the serialized label selector, if any (`.status.selector`).
    pub label_selector_path: Option<String>,
}

/// `CustomResourceSubresources` of a version.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Subresources {
    /// `{}` when the `/status` subresource is enabled.
    pub status: Option<Value>,
    /// The `/scale` subresource, when enabled.
    pub scale: Option<Scale>,
}

/// `CustomResourceColumnDefinition`: one `additionalPrinterColumns` entry (table output).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Column {
    /// Column header.
    pub name: String,
    /// OpenAPI type of the cell (`string`, `integer`, `number`, `boolean`, `date`).
    #[serde(rename = "type")]
    pub type_: String,
    /// OpenAPI format of the cell (e.g. `int32`, `date-time`), may be empty.
    pub format: String,
    /// Human-readable description of the column.
    pub description: String,
    /// 0 = shown by default; higher = only with `-o wide`.
    pub priority: i64,
    /// JSON path evaluated against each object for the cell.
    pub json_path: String,
}

/// `SelectableField`: a field usable in field selectors.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SelectableField {
    /// JSON path of the field (`.spec.color`).
    pub json_path: String,
}

/// `CustomResourceDefinitionVersion`: one entry of `spec.versions`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Version {
    /// Version name, as in URLs (`v1`, `v1beta1`).
    pub name: String,
    /// Whether the version is served over REST.
    pub served: bool,
    /// Whether objects are persisted in this version (exactly one is).
    pub storage: bool,
    /// Whether requests to this version get a deprecation warning.
    pub deprecated: bool,
    /// Overrides the default deprecation warning text.
    pub deprecation_warning: Option<String>,
    /// `CustomResourceValidation`: `{"openAPIV3Schema": …}`.
    pub schema: Option<Value>,
    /// The `/status` and `/scale` subresources, if any.
    pub subresources: Option<Subresources>,
    /// Columns of table output (`kubectl get`).
    pub additional_printer_columns: Vec<Column>,
    /// Extra fields usable in field selectors.
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

/// `ServiceReference`: the in-cluster Service of a conversion webhook.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ServiceRef {
    /// Namespace of the Service.
    pub namespace: String,
    /// Name of the Service.
    pub name: String,
    /// URL path requests are sent to.
    pub path: Option<String>,
    /// Service port (upstream default 443).
    pub port: Option<i64>,
}

/// `WebhookClientConfig`: how to reach a conversion webhook (`url` or `service`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ClientConfig {
    /// `https://host:port/path` of the webhook.
    pub url: Option<String>,
    /// In-cluster Service of the webhook.
    pub service: Option<ServiceRef>,
    /// Base64 PEM CA bundle that validates the webhook's certificate.
    pub ca_bundle: Option<String>,
}

/// `WebhookConversion`: settings of `strategy: Webhook`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Webhook {
    /// Where the webhook is.
    pub client_config: Option<ClientConfig>,
    /// `ConversionReview` versions the webhook accepts, in preference order.
    pub conversion_review_versions: Vec<String>,
}

/// `CustomResourceConversion`: `spec.conversion`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Conversion {
    /// `None` (only apiVersion changes) or `Webhook`.
    pub strategy: String,
    /// Webhook settings, required with `strategy: Webhook`.
    pub webhook: Option<Webhook>,
}

/// `CustomResourceDefinitionSpec`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Spec {
    /// API group of the custom resources (`stable.example.com`).
    pub group: String,
    /// Requested names of the resource and kind.
    pub names: Names,
    /// `Namespaced` or `Cluster`.
    pub scope: String,
    /// Every version, served or not.
    pub versions: Vec<Version>,
    /// How objects are converted between versions.
    pub conversion: Option<Conversion>,
    /// Legacy pruning opt-out; only `false` is allowed in v1.
    pub preserve_unknown_fields: Option<bool>,
}

/// `CustomResourceDefinitionCondition`: one entry of `status.conditions`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct Condition {
    /// `Established`, `NamesAccepted`, `Terminating`, …
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// RFC 3339 time the status last changed.
    pub last_transition_time: Option<String>,
    /// CamelCase machine-readable reason of the last transition.
    pub reason: String,
    /// Human-readable details.
    pub message: String,
}

/// `CustomResourceDefinitionStatus`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Status {
    /// Current conditions of the CRD.
    pub conditions: Vec<Condition>,
    /// The names actually served (may lag `spec.names` on a conflict).
    pub accepted_names: Names,
    /// Versions objects have ever been persisted in.
    pub stored_versions: Vec<String>,
}

/// The CRD's `metadata` (the ObjectMeta fields the registry reads).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Meta {
    /// `<plural>.<group>`.
    pub name: String,
    /// Prefix for a server-generated name.
    pub generate_name: String,
    /// Always empty once stored (CRDs are cluster-scoped).
    pub namespace: String,
    /// Unique id assigned at creation.
    pub uid: String,
    /// Opaque storage version, for optimistic concurrency.
    pub resource_version: String,
    /// Incremented on every spec change.
    pub generation: i64,
    /// RFC 3339 creation time.
    pub creation_timestamp: Option<String>,
    /// RFC 3339 time deletion was requested, while finalizers run.
    pub deletion_timestamp: Option<String>,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Annotations (e.g. `api-approved.kubernetes.io`).
    pub annotations: BTreeMap<String, String>,
    /// Finalizers that must be removed before the object goes.
    pub finalizers: Vec<String>,
}

/// A typed, read-only view of a CRD (what the Go code works on).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct CrdView {
    /// Object metadata.
    pub metadata: Meta,
    /// Desired state.
    pub spec: Spec,
    /// Observed state (conditions, accepted names, stored versions).
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

    /// The version with `storage: true`.
    pub fn storage_version(&self) -> Option<&Version> {
        self.spec.versions.iter().find(|v| v.storage)
    }

    /// The condition of `type_`, if present.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.status.conditions.iter().find(|c| c.type_ == type_)
    }

    /// Whether the condition of `type_` is present with status `True`.
    pub fn is_condition_true(&self, type_: &str) -> bool {
        self.condition(type_).is_some_and(|c| c.status == "True")
    }

    /// Whether `Established` is True (the CRD is served).
    pub fn established(&self) -> bool {
        self.is_condition_true("Established")
    }

    /// Whether `spec.scope` is `Namespaced`.
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
