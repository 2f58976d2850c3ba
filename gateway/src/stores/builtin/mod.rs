//! The strategies of the built-in types (ConfigMap, Secret, ServiceAccount, the two Event
//! APIs, Lease, the four RBAC types): one module per type (one for the RBAC group)
//! implementing [`BuiltinType`], adapted to the generic
//! machinery's `Strategy` by [`BuiltinStrategy`], and their store ([`store::BuiltinStore`]).
//! Adding a type takes one such module, its
//! entry in `crdplane_core::builtin::BUILTIN` and its OpenAPI schema.
//!
//! Where it sits: the built-in resource handler (`builtin.rs`) runs the generic handlers
//! of `crdplane_apiserver` with these strategies over the storage service. Every write is
//! decoded into the type's k8s-openapi struct and encoded back ([`typed`]): that checks each
//! field's JSON type as upstream's decoder does and drops unknown fields, which the strict
//! field validation reports ([`unknown_fields`]).
//!
//! Follows k8s.io/kubernetes pkg/registry/core/{configmap,secret,serviceaccount,event}/
//! strategy.go, pkg/registry/events, pkg/registry/coordination/lease/strategy.go,
//! pkg/registry/rbac/*/strategy.go, and the validation of pkg/apis/core/validation,
//! pkg/apis/coordination/validation and pkg/apis/rbac/validation.

pub mod configmaps;
pub mod events;
pub mod leases;
pub mod protobuf;
pub mod rbac;
pub mod secrets;
pub mod serviceaccounts;
pub mod store;

pub use store::BuiltinStore;

use crdplane_apiserver::patch::{BuiltinPatch, PatchMechanism};
use crdplane_apiserver::render::table::{ColumnDefinition, TableConvertor};
use crdplane_apiserver::rest::Strategy;
use crdplane_apiserver::rest::meta::{self, CreateParams};
use crdplane_core::builtin::BuiltinResource;
use crdplane_core::field::FieldError;
use crdplane_core::{ApiError, GroupResource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// One built-in type's rules.
pub trait BuiltinType: Send + Sync + 'static {
    /// Its entry of the built-in table.
    fn resource(&self) -> &'static BuiltinResource;
    /// Decodes `obj` into the type's struct and encodes it back: Go's zero values for
    /// absent required fields, unknown fields dropped; a JSON type mismatch is the decode
    /// error's text.
    fn canonical(&self, obj: Value) -> Result<Value, String>;
    /// Type-specific `PrepareForCreate` (after the shared metadata rules).
    fn prepare_for_create(&self, _obj: &mut Value) -> Result<(), ApiError> {
        Ok(())
    }
    /// Type-specific `PrepareForUpdate` (after the shared metadata rules).
    fn prepare_for_update(&self, _new: &mut Value, _old: &Value) -> Result<(), ApiError> {
        Ok(())
    }
    /// Whether `ValidateObjectMeta` applies (core v1 events are validated the legacy way,
    /// without it).
    fn validates_object_meta(&self) -> bool {
        true
    }
    /// Whether `ValidateObjectMetaUpdate` runs before the type's `validate_update` (the RBAC
    /// types run it inside theirs, in upstream's order).
    fn validates_object_meta_update(&self) -> bool {
        true
    }
    /// `Validate` beyond ObjectMeta.
    fn validate(&self, obj: &Value) -> Vec<FieldError>;
    /// `ValidateUpdate` beyond ObjectMeta.
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError>;
    /// `AllowCreateOnUpdate`.
    fn allow_create_on_update(&self) -> bool {
        false
    }
    /// `AllowUnconditionalUpdate`.
    fn allow_unconditional_update(&self) -> bool {
        true
    }
    /// The strategic-merge field table of the type.
    fn patch(&self) -> &'static BuiltinPatch;
    /// Table printing (columns and printer).
    fn table(&self) -> &'static TableConvertor;
    /// Field labels a field selector may use besides `metadata.name` / `metadata.namespace`
    /// (the type's `GetAttrs` / field label conversion).
    fn field_labels(&self) -> &'static [&'static str] {
        &[]
    }
    /// A field label of this version as stored (events.k8s.io `regarding.name` is
    /// `involvedObject.name` in the stored core Event).
    fn stored_field_label<'a>(&self, label: &'a str) -> std::borrow::Cow<'a, str> {
        label.into()
    }
    /// The served form of a stored object.
    fn served_form(&self, obj: Value) -> Value {
        obj
    }
    /// The stored form of a served object.
    fn stored_form(&self, obj: Value) -> Value {
        obj
    }
}

/// The rules of a built-in resource.
pub fn type_of(r: &BuiltinResource) -> &'static dyn BuiltinType {
    match (r.group, r.resource) {
        ("", "configmaps") => &configmaps::ConfigMaps,
        ("", "secrets") => &secrets::Secrets,
        ("", "serviceaccounts") => &serviceaccounts::ServiceAccounts,
        ("", "events") => &events::CoreEvents,
        ("events.k8s.io", "events") => &events::EventsV1,
        ("coordination.k8s.io", "leases") => &leases::Leases,
        (rbac::GROUP, "roles") => &rbac::Roles,
        (rbac::GROUP, "clusterroles") => &rbac::ClusterRoles,
        (rbac::GROUP, "rolebindings") => &rbac::RoleBindings,
        (rbac::GROUP, "clusterrolebindings") => &rbac::ClusterRoleBindings,
        _ => unreachable!("every BUILTIN entry has a strategy (see the tests)"),
    }
}

/// Encodes `obj` through the k8s-openapi type `T`.
pub fn typed<T: DeserializeOwned + Serialize>(
    mut obj: Value,
    required: &[&str],
) -> Result<Value, String> {
    if let Some(m) = obj.as_object_mut() {
        for k in required.iter().copied().chain(["metadata"]) {
            if m.get(k).is_none_or(Value::is_null) {
                m.insert(k.into(), Value::Object(Map::new()));
            }
        }
    }
    let t: T = serde_json::from_value(obj).map_err(|e| e.to_string())?;
    serde_json::to_value(t).map_err(|e| e.to_string())
}

/// The fields of `input` that its canonical form `output` lacks: what upstream's strict
/// decoding reports as `unknown field "spec.foo"` (null values are not unknown fields;
/// paths as sigs.k8s.io/json prints them).
pub fn unknown_fields(input: &Value, output: &Value) -> Vec<String> {
    fn walk(i: &Value, o: &Value, path: &mut String, out: &mut Vec<String>) {
        match (i, o) {
            (Value::Object(a), Value::Object(b)) => {
                for (k, v) in a {
                    let len = path.len();
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(k);
                    match b.get(k) {
                        None if !v.is_null() => out.push(path.clone()),
                        Some(w) => walk(v, w, path, out),
                        None => {}
                    }
                    path.truncate(len);
                }
            }
            (Value::Array(a), Value::Array(b)) => {
                for (n, (v, w)) in a.iter().zip(b).enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{n}]"));
                    walk(v, w, path, out);
                    path.truncate(len);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(input, output, &mut String::new(), &mut out);
    out
}

/// The `unknown field "x"` texts of a request object of type `ty`, as the strict decoder
/// reports them (apiVersion/kind are known fields of every type).
pub fn unknown_field_findings(ty: &dyn BuiltinType, input: &Value) -> Vec<String> {
    let Ok(out) = ty.canonical(input.clone()) else {
        return Vec::new();
    };
    unknown_fields(input, &out)
        .into_iter()
        .filter(|p| p != "apiVersion" && p != "kind")
        .map(|p| format!("unknown field {}", crdplane_core::field::go_quote(&p)))
        .collect()
}

/// The generic machinery's strategy of one built-in resource.
pub struct BuiltinStrategy {
    /// The built-in type this strategy serves.
    pub ty: &'static dyn BuiltinType,
    gr: GroupResource,
}

impl BuiltinStrategy {
    /// The strategy of built-in type `ty`.
    pub fn new(ty: &'static dyn BuiltinType) -> Self {
        let r = ty.resource();
        Self {
            ty,
            gr: GroupResource::new(r.group, r.resource),
        }
    }

    /// `canonical` with upstream's decode error (a 400).
    fn canonicalize(&self, obj: &mut Value) -> Result<(), ApiError> {
        let r = self.ty.resource();
        let taken = std::mem::take(obj);
        *obj = self.ty.canonical(taken).map_err(|e| decode_error(r, &e))?;
        if let Some(m) = obj.as_object_mut() {
            m.insert("apiVersion".into(), Value::String(r.api_version()));
            m.insert("kind".into(), Value::String(r.kind.into()));
        }
        Ok(())
    }
}

/// The OpenAPI v2 definitions of the built-in types, with upstream's `x-kubernetes-*`
/// markers: the registry's golden file (generated from k8s-openapi, published in
/// `/openapi/v2`), which field management types the objects by, as upstream builds its
/// `TypeConverter` from the same OpenAPI.
const DEFINITIONS: &str =
    include_str!("../../../../services/registry/src/openapi/builtin/definitions.json");

/// The field-management schema of built-in resource `r` (its served kind's definition,
/// found by `x-kubernetes-group-version-kind`; [`crdplane_apiserver::fieldmanager::
/// schema_from_openapi`]): ConfigMap `data` a map of declared field `data`, ServiceAccount
/// `secrets` keyed by `name`, ObjectReference and RoleRef atomic, RBAC `rules` and
/// `subjects` atomic lists. A kind without a definition falls back to the deduced type.
pub fn field_schema(r: &BuiltinResource) -> &'static Value {
    type Schemas = Vec<((&'static str, &'static str, &'static str), Value)>;
    static SCHEMAS: std::sync::OnceLock<Schemas> = std::sync::OnceLock::new();
    let schemas = SCHEMAS.get_or_init(|| {
        let defs: Map<String, Value> = serde_json::from_str(DEFINITIONS).unwrap_or_default();
        crdplane_core::builtin::BUILTIN
            .iter()
            .filter_map(|b| {
                let name = defs.iter().find_map(|(name, d)| {
                    let gvks = d.get("x-kubernetes-group-version-kind")?.as_array()?;
                    gvks.iter()
                        .any(|g| {
                            g["group"] == b.group
                                && g["version"] == b.version
                                && g["kind"] == b.kind
                        })
                        .then_some(name)
                })?;
                Some((
                    (b.group, b.version, b.kind),
                    crdplane_apiserver::fieldmanager::schema_from_openapi(&defs, name),
                ))
            })
            .collect()
    });
    schemas
        .iter()
        .find(|(k, _)| *k == (r.group, r.version, r.kind))
        .map(|(_, v)| v)
        .unwrap_or_else(|| crdplane_apiserver::fieldmanager::deduced_schema())
}

/// create.go / update.go's 400 for a body the type's decoder refuses.
pub fn decode_error(r: &BuiltinResource, err: &str) -> ApiError {
    ApiError::bad_request(format!(
        "{kind} in version {v:?} cannot be handled as a {kind}: {err}",
        kind = r.kind,
        v = r.version
    ))
}

/// The built-in types keep no `metadata.generation` (their strategies do not set it).
fn keep_generation(obj: &mut Value, old: Option<&Value>) {
    let g = old.and_then(|o| o.pointer("/metadata/generation")).cloned();
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        match g {
            Some(g) => m.insert("generation".into(), g),
            None => m.remove("generation"),
        };
    }
}

impl Strategy for BuiltinStrategy {
    fn group_resource(&self) -> &GroupResource {
        &self.gr
    }
    fn kind(&self) -> &str {
        self.ty.resource().kind
    }
    fn namespaced(&self) -> bool {
        self.ty.resource().namespaced
    }
    fn allow_create_on_update(&self) -> bool {
        self.ty.allow_create_on_update()
    }
    fn allow_unconditional_update(&self) -> bool {
        self.ty.allow_unconditional_update()
    }
    fn unknown_fields(&self, obj: &Value) -> Vec<String> {
        unknown_field_findings(self.ty, obj)
    }
    fn patch_mechanism(&self) -> &dyn PatchMechanism {
        self.ty.patch()
    }
    fn field_schema(&self) -> &Value {
        field_schema(self.ty.resource())
    }
    fn prepare_for_create(&self, obj: &mut Value, namespace: &str) -> Result<(), ApiError> {
        self.canonicalize(obj)?;
        meta::prepare_for_create(
            obj,
            &CreateParams {
                namespace,
                namespaced: self.namespaced(),
                uid: uuid::Uuid::new_v4().to_string(),
                now: crdplane_core::names::now_timestamp(),
                drop_status: false,
            },
        )?;
        keep_generation(obj, None);
        self.ty.prepare_for_create(obj)
    }
    fn prepare_for_update(&self, new: &mut Value, old: &Value) -> Result<(), ApiError> {
        self.canonicalize(new)?;
        meta::prepare_for_update(new, old, false)?;
        keep_generation(new, Some(old));
        self.ty.prepare_for_update(new, old)
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if self.ty.validates_object_meta()
            && let Some(m) = obj.get("metadata").and_then(Value::as_object)
        {
            errs.extend(crdplane_core::objectmeta::validate_object_meta(
                m,
                self.namespaced(),
            ));
        }
        errs.extend(self.ty.validate(obj));
        errs
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if self.ty.validates_object_meta_update()
            && let (Some(n), Some(o)) = (
                new.get("metadata").and_then(Value::as_object),
                old.get("metadata").and_then(Value::as_object),
            )
        {
            errs.extend(crdplane_core::objectmeta::validate_object_meta_update(n, o));
        }
        errs.extend(self.ty.validate_update(new, old));
        errs
    }
}

// ---- shared pieces of the type modules ----------------------------------------------------

/// A string at a JSON pointer ("" when absent).
pub fn s<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

/// The Table of a type whose columns are Name, `middle`, Age (most built-in printers), built
/// once in `cell`.
pub fn name_age_table(
    cell: &'static std::sync::OnceLock<TableConvertor>,
    middle: &[(&str, &str, &str)],
    printer: crdplane_apiserver::render::table::Printer,
) -> &'static TableConvertor {
    cell.get_or_init(|| {
        let mut cols = vec![name_column()];
        cols.extend(middle.iter().map(|(n, t, d)| column(n, t, "", d, 0)));
        cols.push(age_column());
        TableConvertor::printed(cols, printer)
    })
}

/// The `Name` column of every built-in Table.
pub fn name_column() -> ColumnDefinition {
    column(
        "Name",
        "string",
        "name",
        crdplane_apiserver::render::table::NAME_DESCRIPTION,
        0,
    )
}

/// The `Age` column of every built-in Table (upstream declares it as a string column).
pub fn age_column() -> ColumnDefinition {
    column(
        "Age",
        "string",
        "",
        crdplane_apiserver::render::table::CREATION_TIMESTAMP_DESCRIPTION,
        0,
    )
}

/// One Table column definition (`metav1.TableColumnDefinition`).
pub fn column(
    name: &str,
    type_: &str,
    format: &str,
    description: &str,
    priority: i32,
) -> ColumnDefinition {
    ColumnDefinition {
        name: name.into(),
        type_: type_.into(),
        format: format.into(),
        description: description.into(),
        priority,
    }
}

/// The age cell of an object (`translateTimestampSince(creationTimestamp)`).
pub fn age(obj: &Value, now: chrono::DateTime<chrono::Utc>) -> Value {
    Value::String(crdplane_apiserver::render::table::date_cell(
        s(obj, "/metadata/creationTimestamp"),
        now,
    ))
}

/// The name cell of an object.
pub fn name(obj: &Value) -> Value {
    Value::String(s(obj, "/metadata/name").to_string())
}

/// Number of entries of an object-valued field (0 when absent).
pub fn entries(v: Option<&Value>) -> usize {
    v.and_then(Value::as_object).map_or(0, Map::len)
}

/// The data-key rules shared by ConfigMap and Secret (validation.go `IsConfigMapKey`).
pub fn config_map_key_errors(key: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if key.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    if key.is_empty()
        || !key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        errs.push("a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')".to_string());
    }
    match key {
        "." => errs.push("must not be '.'".into()),
        ".." => errs.push("must not be '..'".into()),
        k if k.starts_with("..") => errs.push("must not start with '..'".into()),
        _ => {}
    }
    errs
}

/// `corev1.MaxSecretSize`: the total data of a ConfigMap or Secret.
pub const MAX_DATA_SIZE: usize = 1024 * 1024;

/// The immutable-data rules shared by ConfigMap and Secret updates
/// (`ValidateConfigMapUpdate`, `ValidateSecretUpdate`).
pub fn immutable_data_errors(new: &Value, old: &Value, fields: &[&str]) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if old.get("immutable").and_then(Value::as_bool) != Some(true) {
        return errs;
    }
    const MSG: &str = "field is immutable when `immutable` is set";
    if new.get("immutable").and_then(Value::as_bool) != Some(true) {
        errs.push(FieldError::forbidden("immutable", MSG));
    }
    for f in fields {
        let empty = |v: Option<&Value>| {
            v.is_none_or(|v| v.is_null() || v.as_object().is_some_and(Map::is_empty))
        };
        let same = new.get(*f) == old.get(*f) || (empty(new.get(*f)) && empty(old.get(*f)));
        if !same {
            errs.push(FieldError::forbidden(*f, MSG));
        }
    }
    errs
}

/// `ValidateImmutableField`: `field is immutable` unless `new` equals `old` at `ptr`.
pub fn immutable(new: &Value, old: &Value, ptr: &str, path: &str) -> Option<FieldError> {
    let (n, o) = (new.pointer(ptr), old.pointer(ptr));
    let norm = |v: Option<&Value>| v.filter(|v| !v.is_null()).cloned();
    (norm(n) != norm(o)).then(|| {
        FieldError::invalid(
            path,
            n.cloned().unwrap_or(Value::String(String::new())),
            "field is immutable",
        )
    })
}

/// The served group and resource of a built-in type (what its errors name).
pub(crate) fn gr(r: &crdplane_core::builtin::BuiltinResource) -> crdplane_core::GroupResource {
    crdplane_core::GroupResource::new(r.group, r.resource)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_builtin_has_a_strategy() {
        for r in crdplane_core::builtin::BUILTIN {
            let t = type_of(r);
            assert_eq!(t.resource(), r);
            assert!(!t.table().column_definitions().is_empty());
        }
    }

    /// Every built-in kind is typed by its OpenAPI definition, so an apply owns what
    /// upstream's would: no `.` for declared fields, maps and keyed lists by their keys,
    /// atomic references as one field.
    #[test]
    fn builtin_field_schemas_follow_the_openapi_definitions() {
        use crdplane_core::structured::field_set;
        for r in crdplane_core::builtin::BUILTIN {
            assert!(
                !std::ptr::eq(
                    field_schema(r),
                    crdplane_apiserver::fieldmanager::deduced_schema()
                ),
                "{} has no definition",
                r.kind
            );
        }
        let fields = |group: &str, kind: &str, obj: Value| {
            let r = crdplane_core::builtin::BUILTIN
                .iter()
                .find(|r| r.group == group && r.kind == kind)
                .unwrap();
            field_set(&obj, Some(field_schema(r))).unwrap().to_value()
        };
        assert_eq!(
            fields(
                "",
                "ConfigMap",
                json!({"metadata": {"labels": {"a": "b"}}, "data": {"k": "v"}, "immutable": true})
            ),
            json!({"f:metadata": {"f:labels": {"f:a": {}}}, "f:data": {"f:k": {}}, "f:immutable": {}})
        );
        assert_eq!(
            fields(
                "",
                "ServiceAccount",
                json!({"secrets": [{"name": "s"}], "imagePullSecrets": [{"name": "p"}]})
            ),
            json!({"f:secrets": {"k:{\"name\":\"s\"}": {}}, "f:imagePullSecrets": {}})
        );
        assert_eq!(
            fields(
                "",
                "Event",
                json!({"involvedObject": {"kind": "Pod", "name": "p"}, "source": {"component": "c"},
                    "count": 1})
            ),
            json!({"f:involvedObject": {}, "f:source": {"f:component": {}}, "f:count": {}})
        );
        assert_eq!(
            fields(
                "rbac.authorization.k8s.io",
                "RoleBinding",
                json!({"roleRef": {"kind": "Role", "name": "r"}, "subjects": [{"kind": "User", "name": "u"}]})
            ),
            json!({"f:roleRef": {}, "f:subjects": {}})
        );
        assert_eq!(
            fields(
                "coordination.k8s.io",
                "Lease",
                json!({"spec": {"holderIdentity": "h", "renewTime": "2026-11-29T00:00:00.000000Z"}})
            ),
            json!({"f:spec": {"f:holderIdentity": {}, "f:renewTime": {}}})
        );
    }

    #[test]
    fn unknown_fields_are_the_dropped_ones() {
        let input = json!({"metadata": {"name": "a", "bogus": 1, "labels": null},
                           "data": {"k": "v"}, "spec": {"x": 1}});
        let out = configmaps::ConfigMaps.canonical(input.clone()).unwrap();
        assert_eq!(
            unknown_fields(&input, &out),
            vec!["metadata.bogus".to_string(), "spec".to_string()]
        );
        assert_eq!(
            unknown_field_findings(&configmaps::ConfigMaps, &input),
            vec![
                "unknown field \"metadata.bogus\"".to_string(),
                "unknown field \"spec\"".to_string()
            ]
        );
    }

    #[test]
    fn config_map_keys() {
        assert!(config_map_key_errors("key.name_1-x").is_empty());
        assert_eq!(
            config_map_key_errors("..a"),
            vec!["must not start with '..'"]
        );
        assert!(config_map_key_errors("a/b")[0].starts_with("a valid config key"));
        assert_eq!(config_map_key_errors(&"a".repeat(254)).len(), 1);
    }

    #[test]
    fn type_mismatch_is_the_decoders_400() {
        let s = BuiltinStrategy::new(&configmaps::ConfigMaps);
        let mut obj = json!({"metadata": {"name": "a"}, "data": {"k": 1}});
        let e = s.prepare_for_create(&mut obj, "ns").unwrap_err();
        assert_eq!(e.code, 400);
        assert!(
            e.message
                .starts_with("ConfigMap in version \"v1\" cannot be handled as a ConfigMap: "),
            "{}",
            e.message
        );
    }
}
