//! CRD-side schema checks: called by the registry (`ValidateCrd`) on CRD create/update, before
//! any schema is compiled for custom resources.
//!
//! For every `spec.versions[i].schema.openAPIV3Schema` this reports, with upstream's field
//! paths and texts:
//! - the generic OpenAPI checks of k8s.io/apiextensions-apiserver
//!   pkg/apis/apiextensions/validation/validation.go (`ValidateCustomResourceDefinitionValidation`,
//!   `ValidateCustomResourceDefinitionOpenAPISchema`, `specStandardValidatorV3.validate`):
//!   forbidden keywords (`id`, `$ref`, `definitions`, `dependencies`, `patternProperties`,
//!   `additionalItems`, `items` arrays, `type: null`), `uniqueItems: true`, `nullable` at the
//!   root, `additionalProperties` with `properties`, defaults in top-level metadata, and the
//!   x-kubernetes-list-type / list-map-keys / map-type rules;
//! - the structural-schema rules of pkg/apiserver/schema/validation.go (`ValidateStructural`:
//!   invariants, int-or-string patterns, metadata restrictions, value-validation completeness,
//!   pattern compilation), sorted by message like upstream;
//! - defaults (pkg/apiserver/schema/defaulting/validation.go `ValidateDefaults`): every default
//!   must be pruned (`must not have unknown fields`) and validate against its schema.

use crate::structural::{self, Schema};
use crate::{metadata, prune, validate};
use crdplane_core::FieldError;
use serde_json::{Map, Value};

/// Result of checking a CRD.
#[derive(Debug, Clone, Default)]
pub struct CrdResult {
    /// Field errors of the CRD (422 Invalid when non-empty).
    pub errors: Vec<FieldError>,
    /// Non-fatal findings, returned as `Warning` headers of the CRD write.
    pub warnings: Vec<String>,
}

const OPENAPI_V3_TYPES: &[&str] = &["array", "boolean", "integer", "number", "object", "string"];

fn key(p: &str, k: &str) -> String {
    format!("{p}[{k}]")
}
fn child(p: &str, c: &str) -> String {
    format!("{p}.{c}")
}
fn index(p: &str, i: usize) -> String {
    format!("{p}[{i}]")
}

/// Checks every version schema of a CRD (apiextensions.k8s.io/v1 JSON).
pub fn validate_crd(crd: &Value, _old: Option<&Value>) -> CrdResult {
    let mut res = CrdResult::default();
    let Some(versions) = crd.pointer("/spec/versions").and_then(Value::as_array) else {
        return res;
    };
    for (i, v) in versions.iter().enumerate() {
        let base = format!("spec.versions[{i}].schema");
        match v.pointer("/schema/openAPIV3Schema") {
            Some(s) if !s.is_null() => {
                if v.pointer("/subresources/status")
                    .is_some_and(|st| !st.is_null())
                {
                    res.errors.extend(status_root_checks(s, &base));
                }
                res.errors.extend(validate_version_schema(s, &base))
            }
            _ => res.errors.push(FieldError::required(
                child(&base, "openAPIV3Schema"),
                "schemas are required",
            )),
        }
    }
    res
}

/// Checks one `openAPIV3Schema`; `base` is the path of its `schema` field, e.g.
/// `spec.versions[0].schema`.
pub fn validate_version_schema(schema: &Value, base: &str) -> Vec<FieldError> {
    let root = child(base, "openAPIV3Schema");
    let mut errs = Vec::new();
    let Some(m) = schema.as_object() else {
        errs.push(FieldError::invalid(
            root,
            schema.clone(),
            "must be a JSON schema object",
        ));
        return errs;
    };
    if m.get("nullable").and_then(Value::as_bool) == Some(true) {
        errs.push(FieldError::forbidden(
            child(&root, "nullable"),
            "nullable cannot be true at the root",
        ));
    }
    let ctx = Ctx::default();
    let mut generic = Vec::new();
    openapi_schema(m, &root, &ctx, true, &mut generic, 0);

    // Upstream cannot even build the structural schema from constructs it does not support
    // (`NewStructural` fails); that error is hidden when the generic checks already failed.
    if !(errs.is_empty() && generic.is_empty()) && has_unsupported(m, 0) {
        errs.extend(generic);
        return errs;
    }
    // `validateCustomResourceDefinitionValidation` appends the structural errors (or, when
    // there are none, the defaults' errors) before the generic OpenAPI checks' errors.
    let mut st = Vec::new();
    structural_invariants(m, Level::Root, &root, &mut st, 0);
    structural_completeness(m, &root, &mut st, 0);
    st.sort_by_key(|e| e.to_string());
    let structural_ok = st.is_empty();
    errs.extend(st);

    if structural_ok {
        match structural::compile(schema) {
            Ok(compiled) => validate_defaults(&compiled, &root, true, false, &mut errs, 0),
            Err(e) => errs.push(FieldError::invalid(
                root,
                Value::String(String::new()),
                e.to_string(),
            )),
        }
    }
    errs.extend(generic);
    errs
}

/// JSONSchemaProps fields (JSON names, in the Go struct's field order) with the Go field name
/// of those allowed at the root of a schema whose version has the status subresource.
const ROOT_FIELDS: &[(&str, Option<&str>)] = &[
    ("id", None),
    ("$schema", None),
    ("$ref", None),
    ("description", Some("Description")),
    ("type", Some("Type")),
    ("nullable", None),
    ("format", Some("Format")),
    ("title", Some("Title")),
    ("default", None),
    ("maximum", Some("Maximum")),
    ("exclusiveMaximum", Some("ExclusiveMaximum")),
    ("minimum", Some("Minimum")),
    ("exclusiveMinimum", Some("ExclusiveMinimum")),
    ("maxLength", Some("MaxLength")),
    ("minLength", Some("MinLength")),
    ("pattern", Some("Pattern")),
    ("maxItems", Some("MaxItems")),
    ("minItems", Some("MinItems")),
    ("uniqueItems", Some("UniqueItems")),
    ("multipleOf", Some("MultipleOf")),
    ("enum", None),
    ("maxProperties", None),
    ("minProperties", None),
    ("required", Some("Required")),
    ("items", Some("Items")),
    ("allOf", None),
    ("oneOf", None),
    ("anyOf", None),
    ("not", None),
    ("properties", Some("Properties")),
    ("additionalProperties", None),
    ("patternProperties", None),
    ("dependencies", None),
    ("additionalItems", None),
    ("definitions", None),
    ("externalDocs", Some("ExternalDocs")),
    ("example", Some("Example")),
    (
        "x-kubernetes-preserve-unknown-fields",
        Some("XPreserveUnknownFields"),
    ),
    ("x-kubernetes-embedded-resource", None),
    ("x-kubernetes-int-or-string", None),
    ("x-kubernetes-list-map-keys", None),
    ("x-kubernetes-list-type", None),
    ("x-kubernetes-map-type", None),
    ("x-kubernetes-validations", Some("XValidations")),
];

/// Whether a decoded JSONSchemaProps field holds its Go zero value (false, "", absent).
fn is_go_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        _ => false,
    }
}

/// `validateCustomResourceDefinitionValidation` with the status subresource enabled: the
/// first non-zero root field (in struct order) must be `type: object` or one of
/// `allowedFieldsAtRootSchema`, so that `properties[status]` carries all status validation.
/// The offending schema itself is the error's value (upstream prints the Go struct).
pub fn status_root_checks(schema: &Value, base: &str) -> Vec<FieldError> {
    let Some(m) = schema.as_object() else {
        return Vec::new();
    };
    let root = child(base, "openAPIV3Schema");
    for (name, allowed) in ROOT_FIELDS {
        let Some(v) = m.get(*name) else { continue };
        if is_go_zero(v) {
            continue;
        }
        if *name == "type" {
            if v.as_str() != Some("object") {
                return vec![FieldError::invalid(
                    child(&root, "type"),
                    v.clone(),
                    r#"only "object" is allowed as the type at the root of the schema if the status subresource is enabled"#,
                )];
            }
            continue;
        }
        if allowed.is_none() {
            let list: Vec<&str> = ROOT_FIELDS.iter().filter_map(|(_, a)| *a).collect();
            return vec![FieldError::invalid(
                root,
                schema.clone(),
                format!(
                    "only [{}] fields are allowed at the root of the schema if the status subresource is enabled",
                    list.join(" ")
                ),
            )];
        }
    }
    Vec::new()
}

// ---------------------------------------------------------------------------------------
// Generic checks (ValidateCustomResourceDefinitionOpenAPISchema)

#[derive(Clone, Default)]
struct Ctx {
    inside_resource_meta: bool,
    forbidden_defaults: Option<String>,
}

fn obj(v: Option<&Value>) -> Option<&Map<String, Value>> {
    v.and_then(Value::as_object)
}

fn type_of(m: &Map<String, Value>) -> &str {
    m.get("type").and_then(Value::as_str).unwrap_or("")
}

fn openapi_schema(
    m: &Map<String, Value>,
    p: &str,
    ctx: &Ctx,
    is_root: bool,
    errs: &mut Vec<FieldError>,
    depth: usize,
) {
    if depth > structural::MAX_SCHEMA_DEPTH {
        errs.push(FieldError::forbidden(
            p,
            format!(
                "must not be nested deeper than {}",
                structural::MAX_SCHEMA_DEPTH
            ),
        ));
        return;
    }
    standard_checks(m, p, ctx, errs);
    if m.get("uniqueItems").and_then(Value::as_bool) == Some(true) {
        errs.push(FieldError::forbidden(
            child(p, "uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    let props = obj(m.get("properties"));
    if let Some(ap) = m.get("additionalProperties") {
        if props.is_some_and(|p| !p.is_empty()) && (ap == &Value::Bool(false) || ap.is_object()) {
            errs.push(FieldError::forbidden(
                child(p, "additionalProperties"),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        if let Some(apm) = ap.as_object() {
            let mut sub = ctx.clone();
            if ctx.inside_resource_meta {
                sub.forbidden_defaults =
                    Some("inside additionalProperties applying to object metadata".into());
            }
            openapi_schema(
                apm,
                &child(p, "additionalProperties"),
                &sub,
                false,
                errs,
                depth + 1,
            );
        }
    }
    let embedded = m
        .get("x-kubernetes-embedded-resource")
        .and_then(Value::as_bool)
        == Some(true);
    if let Some(props) = props {
        for (k, v) in props {
            let mut sub = ctx.clone();
            if (is_root || embedded) && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                sub.inside_resource_meta = true;
                if is_root {
                    sub.forbidden_defaults = Some(format!("in top-level {k}"));
                }
            }
            if let Some(vm) = v.as_object() {
                openapi_schema(
                    vm,
                    &key(&child(p, "properties"), k),
                    &sub,
                    false,
                    errs,
                    depth + 1,
                );
            }
        }
    }
    if let Some(n) = obj(m.get("not")) {
        openapi_schema(n, &child(p, "not"), ctx, false, errs, depth + 1);
    }
    for j in ["allOf", "oneOf", "anyOf"] {
        if let Some(Value::Array(list)) = m.get(j) {
            for (i, x) in list.iter().enumerate() {
                if let Some(xm) = x.as_object() {
                    openapi_schema(xm, &index(&child(p, j), i), ctx, false, errs, depth + 1);
                }
            }
        }
    }
    if let Some(pp) = obj(m.get("patternProperties")) {
        for (k, v) in pp {
            if let Some(vm) = v.as_object() {
                openapi_schema(
                    vm,
                    &key(&child(p, "patternProperties"), k),
                    ctx,
                    false,
                    errs,
                    depth + 1,
                );
            }
        }
    }
    if let Some(ai) = obj(m.get("additionalItems")) {
        openapi_schema(
            ai,
            &child(p, "additionalItems"),
            ctx,
            false,
            errs,
            depth + 1,
        );
    }
    if let Some(defs) = obj(m.get("definitions")) {
        for (k, v) in defs {
            if let Some(vm) = v.as_object() {
                openapi_schema(
                    vm,
                    &key(&child(p, "definitions"), k),
                    ctx,
                    false,
                    errs,
                    depth + 1,
                );
            }
        }
    }
    match m.get("items") {
        Some(Value::Object(im)) => {
            openapi_schema(im, &child(p, "items"), ctx, false, errs, depth + 1)
        }
        Some(Value::Array(list)) => {
            for (i, x) in list.iter().enumerate() {
                if let Some(xm) = x.as_object() {
                    openapi_schema(
                        xm,
                        &index(&child(p, "items"), i),
                        ctx,
                        false,
                        errs,
                        depth + 1,
                    );
                }
            }
        }
        _ => {}
    }
    if let Some(deps) = obj(m.get("dependencies")) {
        for (k, v) in deps {
            if let Some(vm) = v.as_object() {
                openapi_schema(
                    vm,
                    &key(&child(p, "dependencies"), k),
                    ctx,
                    false,
                    errs,
                    depth + 1,
                );
            }
        }
    }
    if m.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        errs.push(FieldError::invalid(
            child(p, "x-kubernetes-preserve-unknown-fields"),
            Value::Bool(false),
            "must be true or undefined",
        ));
    }
    list_and_map_type_checks(m, p, errs);
    map_list_keys_map_set(m, p, errs);
    x_validations_checks(m, p, errs);
}

fn standard_checks(m: &Map<String, Value>, p: &str, ctx: &Ctx, errs: &mut Vec<FieldError>) {
    let t = type_of(m);
    if !t.is_empty() && !OPENAPI_V3_TYPES.contains(&t) {
        errs.push(FieldError::not_supported(
            child(p, "type"),
            Value::String(t.into()),
            OPENAPI_V3_TYPES,
        ));
    }
    if m.contains_key("default")
        && let Some(reason) = &ctx.forbidden_defaults
    {
        errs.push(FieldError::forbidden(
            child(p, "default"),
            format!("must not be set {reason}"),
        ));
    }
    if m.get("id")
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty())
    {
        errs.push(FieldError::forbidden(child(p, "id"), "id is not supported"));
    }
    if m.get("additionalItems").is_some_and(|v| !v.is_null()) {
        errs.push(FieldError::forbidden(
            child(p, "additionalItems"),
            "additionalItems is not supported",
        ));
    }
    if obj(m.get("patternProperties")).is_some_and(|x| !x.is_empty()) {
        errs.push(FieldError::forbidden(
            child(p, "patternProperties"),
            "patternProperties is not supported",
        ));
    }
    if obj(m.get("definitions")).is_some_and(|x| !x.is_empty()) {
        errs.push(FieldError::forbidden(
            child(p, "definitions"),
            "definitions is not supported",
        ));
    }
    if m.get("dependencies").is_some_and(|v| !v.is_null()) {
        errs.push(FieldError::forbidden(
            child(p, "dependencies"),
            "dependencies is not supported",
        ));
    }
    if m.get("$ref").is_some_and(|v| !v.is_null()) {
        errs.push(FieldError::forbidden(
            child(p, "$ref"),
            "$ref is not supported",
        ));
    }
    if t == "null" {
        errs.push(FieldError::forbidden(
            child(p, "type"),
            "type cannot be set to null, use nullable as an alternative",
        ));
    }
    if matches!(m.get("items"), Some(Value::Array(a)) if !a.is_empty()) {
        errs.push(FieldError::forbidden(
            child(p, "items"),
            "items must be a schema object and not an array",
        ));
    }
    if ctx.inside_resource_meta
        && m.get("x-kubernetes-embedded-resource")
            .and_then(Value::as_bool)
            == Some(true)
    {
        errs.push(FieldError::forbidden(
            child(p, "x-kubernetes-embedded-resource"),
            "must not be used inside of resource meta",
        ));
    }
}

fn list_and_map_type_checks(m: &Map<String, Value>, p: &str, errs: &mut Vec<FieldError>) {
    let t = type_of(m);
    let map_type = m.get("x-kubernetes-map-type").and_then(Value::as_str);
    if let Some(mt) = map_type {
        if t != "object" {
            if t.is_empty() {
                errs.push(FieldError::required(
                    child(p, "type"),
                    "must be object if x-kubernetes-map-type is specified",
                ));
            } else {
                errs.push(FieldError::invalid(
                    child(p, "type"),
                    Value::String(t.into()),
                    "must be object if x-kubernetes-map-type is specified",
                ));
            }
        }
        if mt != "atomic" && mt != "granular" {
            errs.push(FieldError::not_supported(
                child(p, "x-kubernetes-map-type"),
                Value::String(mt.into()),
                &["atomic", "granular"],
            ));
        }
    }
    let list_type = m.get("x-kubernetes-list-type").and_then(Value::as_str);
    let items = obj(m.get("items"));
    if let Some(lt) = list_type {
        if t != "array" {
            if t.is_empty() {
                errs.push(FieldError::required(
                    child(p, "type"),
                    "must be array if x-kubernetes-list-type is specified",
                ));
            } else {
                errs.push(FieldError::invalid(
                    child(p, "type"),
                    Value::String(t.into()),
                    "must be array if x-kubernetes-list-type is specified",
                ));
            }
        } else if lt == "set"
            && let Some(is) = items
        {
            match type_of(is) {
                "array" => {
                    if let Some(ilt) = is.get("x-kubernetes-list-type").and_then(Value::as_str)
                        && ilt != "atomic"
                    {
                        errs.push(FieldError::invalid(
                            child(&child(p, "items"), "x-kubernetes-list-type"),
                            Value::String(ilt.into()),
                            "must be atomic as item of a list with x-kubernetes-list-type=set",
                        ));
                    }
                }
                "object"
                    if is.get("x-kubernetes-map-type").and_then(Value::as_str)
                        != Some("atomic") =>
                {
                    // Upstream reports the items' x-kubernetes-list-type as the value (a nil
                    // pointer for an object, printed "null").
                    errs.push(FieldError::invalid(
                        child(&child(p, "items"), "x-kubernetes-map-type"),
                        Value::String(
                            is.get("x-kubernetes-list-type")
                                .and_then(Value::as_str)
                                .unwrap_or("null")
                                .into(),
                        ),
                        "must be atomic as item of a list with x-kubernetes-list-type=set",
                    ));
                }
                _ => {}
            }
        }
        if lt != "atomic" && lt != "set" && lt != "map" {
            errs.push(FieldError::not_supported(
                child(p, "x-kubernetes-list-type"),
                Value::String(lt.into()),
                &["atomic", "set", "map"],
            ));
        }
    }
    let keys: Vec<&str> = match m.get("x-kubernetes-list-map-keys") {
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let keys_value = m
        .get("x-kubernetes-list-map-keys")
        .cloned()
        .unwrap_or(Value::Null);
    if !keys.is_empty() {
        match list_type {
            None => errs.push(FieldError::required(
                child(p, "x-kubernetes-list-type"),
                "must be map if x-kubernetes-list-map-keys is non-empty",
            )),
            Some(lt) if lt != "map" => errs.push(FieldError::invalid(
                child(p, "x-kubernetes-list-type"),
                Value::String(lt.into()),
                "must be map if x-kubernetes-list-map-keys is non-empty",
            )),
            _ => {}
        }
    }
    if list_type == Some("map") {
        if keys.is_empty() {
            errs.push(FieldError::required(
                child(p, "x-kubernetes-list-map-keys"),
                "must not be empty if x-kubernetes-list-type is map",
            ));
        }
        match m.get("items") {
            None | Some(Value::Null) => errs.push(FieldError::required(
                child(p, "items"),
                "must have a schema if x-kubernetes-list-type is map",
            )),
            Some(Value::Array(a)) => errs.push(FieldError::invalid(
                child(p, "items"),
                Value::Array(a.clone()),
                "must only have a single schema if x-kubernetes-list-type is map",
            )),
            _ => {}
        }
        if let Some(is) = items {
            let it = type_of(is);
            if it != "object" {
                errs.push(FieldError::invalid(
                    child(&child(p, "items"), "type"),
                    Value::String(it.into()),
                    "must be object if parent array's x-kubernetes-list-type is map",
                ));
            } else {
                let iprops = obj(is.get("properties"));
                let mut seen: Vec<&str> = Vec::new();
                for k in &keys {
                    match iprops.and_then(|ps| ps.get(*k)).and_then(Value::as_object) {
                        Some(ks) => {
                            let kt = type_of(ks);
                            if kt == "array" || kt == "object" {
                                errs.push(FieldError::invalid(
                                    child(&key(&child(&child(p, "items"), "properties"), k), "type"),
                                    Value::String(it.into()),
                                    "must be a scalar type if parent array's x-kubernetes-list-type is map",
                                ));
                            }
                        }
                        None => errs.push(FieldError::invalid(
                            child(p, "x-kubernetes-list-map-keys"),
                            keys_value.clone(),
                            "entries must all be names of item properties",
                        )),
                    }
                    if seen.contains(k) {
                        errs.push(FieldError::invalid(
                            child(p, "x-kubernetes-list-map-keys"),
                            keys_value.clone(),
                            "must not contain duplicate entries",
                        ));
                    }
                    seen.push(k);
                }
            }
        }
    }
}

/// `validateMapListKeysMapSet`: items of set and map lists cannot be nullable; map keys must
/// be required or defaulted, and not nullable.
fn map_list_keys_map_set(m: &Map<String, Value>, p: &str, errs: &mut Vec<FieldError>) {
    let Some(is) = obj(m.get("items")) else {
        return;
    };
    let Some(lt) = m.get("x-kubernetes-list-type").and_then(Value::as_str) else {
        return;
    };
    if lt != "set" && lt != "map" {
        return;
    }
    let ip = child(p, "items");
    if is_true(is, "nullable") {
        errs.push(FieldError::forbidden(
            child(&ip, "nullable"),
            format!("cannot be nullable when x-kubernetes-list-type is {lt}"),
        ));
    }
    if lt != "map" {
        return;
    }
    let required: Vec<&str> = match is.get("required") {
        Some(Value::Array(r)) => r.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let keys = m
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str);
    for k in keys {
        let Some(ks) = obj(is.get("properties")).and_then(|ps| obj(ps.get(k))) else {
            continue;
        };
        let kp = key(&child(&ip, "properties"), k);
        if !required.contains(&k) && ks.get("default").is_none_or(Value::is_null) {
            errs.push(FieldError::required(
                child(&kp, "default"),
                "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
            ));
        }
        if is_true(ks, "nullable") {
            errs.push(FieldError::forbidden(
                child(&kp, "nullable"),
                "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
            ));
        }
    }
}

/// `hasNewlines`: whether `s` has one of CEL's newline characters (`[\n\r]`).
fn has_newlines(s: &str) -> bool {
    s.contains(['\n', '\r'])
}

/// Supported `x-kubernetes-validations[].reason` values, sorted as `sets.String.List()`.
const VALIDATION_REASONS: &[&str] = &[
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

/// The static checks of `x-kubernetes-validations` rules in
/// `ValidateCustomResourceDefinitionOpenAPISchema` (rule, message, messageExpression, reason,
/// fieldPath text). The CEL compilation and cost checks that follow upstream are not done.
fn x_validations_checks(m: &Map<String, Value>, p: &str, errs: &mut Vec<FieldError>) {
    let Some(Value::Array(rules)) = m.get("x-kubernetes-validations") else {
        return;
    };
    let str_of = |r: &Map<String, Value>, k: &str| -> String {
        r.get(k).and_then(Value::as_str).unwrap_or("").to_string()
    };
    for (i, r) in rules.iter().enumerate() {
        let Some(r) = r.as_object() else { continue };
        let rp = index(&child(p, "x-kubernetes-validations"), i);
        let rule = str_of(r, "rule");
        let message = str_of(r, "message");
        let message_expr = str_of(r, "messageExpression");
        let field_path = str_of(r, "fieldPath");
        let (t_rule, t_msg) = (rule.trim(), message.trim());
        if t_rule.is_empty() {
            errs.push(FieldError::required(
                child(&rp, "rule"),
                "rule is not specified",
            ));
        } else if !message.is_empty() && t_msg.is_empty() {
            errs.push(FieldError::invalid(
                child(&rp, "message"),
                Value::String(message.clone()),
                "must be non-empty if specified",
            ));
        } else if has_newlines(t_msg) {
            errs.push(FieldError::invalid(
                child(&rp, "message"),
                Value::String(message.clone()),
                "must not contain line breaks",
            ));
        } else if has_newlines(t_rule) && t_msg.is_empty() {
            errs.push(FieldError::required(
                child(&rp, "message"),
                "message must be specified if rule contains line breaks",
            ));
        }
        if !message_expr.is_empty() && message_expr.trim().is_empty() {
            errs.push(FieldError::required(
                child(&rp, "messageExpression"),
                "messageExpression must be non-empty if specified",
            ));
        }
        if let Some(reason) = r.get("reason").and_then(Value::as_str)
            && !VALIDATION_REASONS.contains(&reason)
        {
            errs.push(FieldError::not_supported(
                child(&rp, "reason"),
                Value::String(reason.into()),
                VALIDATION_REASONS,
            ));
        }
        if !field_path.is_empty() && field_path.trim().is_empty() {
            errs.push(FieldError::invalid(
                child(&rp, "fieldPath"),
                Value::String(field_path.clone()),
                "must be non-empty if specified",
            ));
        }
        if has_newlines(&field_path) {
            errs.push(FieldError::invalid(
                child(&rp, "fieldPath"),
                Value::String(field_path.clone()),
                "must not contain line breaks",
            ));
        }
    }
}

/// Whether the schema uses a construct `NewStructural` rejects.
fn has_unsupported(m: &Map<String, Value>, depth: usize) -> bool {
    if depth > structural::MAX_SCHEMA_DEPTH {
        return true;
    }
    if matches!(m.get("items"), Some(Value::Array(_)))
        || [
            "patternProperties",
            "dependencies",
            "definitions",
            "additionalItems",
            "$ref",
        ]
        .iter()
        .any(|k| m.get(*k).is_some_and(|v| !v.is_null()))
    {
        return true;
    }
    let sub = |v: Option<&Value>| obj(v).is_some_and(|x| has_unsupported(x, depth + 1));
    if sub(m.get("items")) || sub(m.get("additionalProperties")) || sub(m.get("not")) {
        return true;
    }
    if let Some(ps) = obj(m.get("properties"))
        && ps.values().any(|v| sub(Some(v)))
    {
        return true;
    }
    ["allOf", "anyOf", "oneOf"]
        .iter()
        .any(|j| matches!(m.get(*j), Some(Value::Array(a)) if a.iter().any(|x| sub(Some(x)))))
}

// ---------------------------------------------------------------------------------------
// Structural invariants (pkg/apiserver/schema/validation.go)

#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Item,
    Field,
}

fn is_true(m: &Map<String, Value>, k: &str) -> bool {
    m.get(k).and_then(Value::as_bool) == Some(true)
}

/// `anyOf: [{type: integer}, {type: string}]` exactly.
fn is_int_or_string_any_of(list: Option<&Value>) -> bool {
    let Some(Value::Array(a)) = list else {
        return false;
    };
    a.len() == 2
        && a[0] == serde_json::json!({"type": "integer"})
        && a[1] == serde_json::json!({"type": "string"})
}

fn structural_invariants(
    m: &Map<String, Value>,
    lvl: Level,
    p: &str,
    errs: &mut Vec<FieldError>,
    depth: usize,
) {
    if depth > structural::MAX_SCHEMA_DEPTH {
        return;
    }
    let t = type_of(m);
    if t == "array" && !m.get("items").is_some_and(Value::is_object) {
        errs.push(FieldError::required(child(p, "items"), "must be specified"));
    }
    if let Some(im) = obj(m.get("items")) {
        structural_invariants(im, Level::Item, &child(p, "items"), errs, depth + 1);
    }
    if let Some(props) = obj(m.get("properties")) {
        for (k, v) in props {
            if let Some(vm) = v.as_object() {
                structural_invariants(
                    vm,
                    Level::Field,
                    &key(&child(p, "properties"), k),
                    errs,
                    depth + 1,
                );
            }
        }
    }
    // validateGeneric
    if let Some(ap) = m.get("additionalProperties") {
        if lvl == Level::Root {
            errs.push(FieldError::forbidden(
                child(p, "additionalProperties"),
                "must not be used at the root",
            ));
        }
        if let Some(apm) = ap.as_object() {
            structural_invariants(
                apm,
                Level::Field,
                &child(p, "additionalProperties"),
                errs,
                depth + 1,
            );
        }
    }
    // validateExtensions
    let int_or_string = is_true(m, "x-kubernetes-int-or-string");
    let preserve = is_true(m, "x-kubernetes-preserve-unknown-fields");
    let embedded = is_true(m, "x-kubernetes-embedded-resource");
    if int_or_string && preserve {
        errs.push(FieldError::invalid(
            child(p, "x-kubernetes-preserve-unknown-fields"),
            Value::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if int_or_string && embedded {
        errs.push(FieldError::invalid(
            child(p, "x-kubernetes-embedded-resource"),
            Value::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    let skip_any_of = int_or_string && is_int_or_string_any_of(m.get("anyOf"));
    let skip_first_all_of_any_of = int_or_string
        && matches!(m.get("allOf"), Some(Value::Array(a)) if !a.is_empty()
            && is_int_or_string_any_of(a[0].get("anyOf")));
    value_validation(m, skip_any_of, skip_first_all_of_any_of, p, errs, depth);

    let check_metadata = lvl == Level::Root || embedded;
    if embedded && t != "object" {
        if t.is_empty() {
            errs.push(FieldError::required(
                child(p, "type"),
                "must be object if x-kubernetes-embedded-resource is true",
            ));
        } else {
            errs.push(FieldError::invalid(
                child(p, "type"),
                Value::String(t.into()),
                "must be object if x-kubernetes-embedded-resource is true",
            ));
        }
    } else if t.is_empty() && !int_or_string && !preserve {
        // A typeless field that preserves unknown fields is exempt (upstream's
        // `!s.Extensions.XIntOrString && !s.Extensions.XPreserveUnknownFields`).
        let detail = match lvl {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        errs.push(FieldError::required(child(p, "type"), detail));
    }
    if embedded && m.contains_key("additionalProperties") {
        errs.push(FieldError::forbidden(
            child(p, "additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if lvl == Level::Root && !t.is_empty() && t != "object" {
        errs.push(FieldError::invalid(
            child(p, "type"),
            Value::String(t.into()),
            "must be object at the root",
        ));
    }
    let props = obj(m.get("properties"));
    if check_metadata {
        for f in ["kind", "apiVersion"] {
            if let Some(fs) = props.and_then(|ps| ps.get(f)).and_then(Value::as_object)
                && type_of(fs) != "string"
            {
                errs.push(FieldError::invalid(
                    child(&key(&child(p, "properties"), f), "type"),
                    Value::String(type_of(fs).into()),
                    "must be string",
                ));
            }
        }
    }
    if let Some(md) = props
        .and_then(|ps| ps.get("metadata"))
        .and_then(Value::as_object)
    {
        let mp = key(&child(p, "properties"), "metadata");
        if check_metadata && type_of(md) != "object" {
            errs.push(FieldError::invalid(
                child(&mp, "type"),
                Value::String(type_of(md).into()),
                "must be object",
            ));
        }
        if lvl == Level::Root {
            let mut rest = md.clone();
            for k in ["type", "default", "description", "title"] {
                rest.remove(k);
            }
            if let Some(Value::Object(ps)) = rest.get("properties") {
                let only_names = ps.keys().all(|k| k == "name" || k == "generateName");
                if only_names {
                    rest.remove("properties");
                }
            }
            if !rest.is_empty() {
                errs.push(FieldError::forbidden(
                    mp,
                    "must not specify anything other than name and generateName, but metadata is implicitly specified",
                ));
            }
        }
    }
    if embedded && !preserve && props.is_none_or(Map::is_empty) {
        errs.push(FieldError::required(
            child(p, "properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

fn value_validation(
    m: &Map<String, Value>,
    skip_any_of: bool,
    skip_first_all_of_any_of: bool,
    p: &str,
    errs: &mut Vec<FieldError>,
    depth: usize,
) {
    if depth > structural::MAX_SCHEMA_DEPTH {
        return;
    }
    if !skip_any_of && let Some(Value::Array(a)) = m.get("anyOf") {
        for (i, x) in a.iter().enumerate() {
            if let Some(xm) = x.as_object() {
                nested_value_validation(
                    xm,
                    false,
                    false,
                    &index(&child(p, "anyOf"), i),
                    errs,
                    depth + 1,
                );
            }
        }
    }
    if let Some(Value::Array(a)) = m.get("allOf") {
        for (i, x) in a.iter().enumerate() {
            if let Some(xm) = x.as_object() {
                let skip = i == 0 && skip_first_all_of_any_of;
                nested_value_validation(
                    xm,
                    skip,
                    false,
                    &index(&child(p, "allOf"), i),
                    errs,
                    depth + 1,
                );
            }
        }
    }
    if let Some(Value::Array(a)) = m.get("oneOf") {
        for (i, x) in a.iter().enumerate() {
            if let Some(xm) = x.as_object() {
                nested_value_validation(
                    xm,
                    false,
                    false,
                    &index(&child(p, "oneOf"), i),
                    errs,
                    depth + 1,
                );
            }
        }
    }
    if let Some(n) = obj(m.get("not")) {
        nested_value_validation(n, false, false, &child(p, "not"), errs, depth + 1);
    }
    if let Some(pat) = m.get("pattern").and_then(Value::as_str)
        && !pat.is_empty()
        && let Err(e) = structural::compile_pattern(pat)
    {
        errs.push(FieldError::invalid(
            child(p, "pattern"),
            Value::String(pat.into()),
            format!(
                "must be a valid regular expression, but isn't: {}",
                go_regexp_error(pat, &e)
            ),
        ));
    }
}

fn nested_value_validation(
    m: &Map<String, Value>,
    skip_any_of: bool,
    skip_all_of_any_of: bool,
    p: &str,
    errs: &mut Vec<FieldError>,
    depth: usize,
) {
    if depth > structural::MAX_SCHEMA_DEPTH {
        return;
    }
    value_validation(m, skip_any_of, skip_all_of_any_of, p, errs, depth);
    if let Some(im) = obj(m.get("items")) {
        nested_value_validation(im, false, false, &child(p, "items"), errs, depth + 1);
    }
    if let Some(props) = obj(m.get("properties")) {
        for (k, v) in props {
            if let Some(vm) = v.as_object() {
                nested_value_validation(
                    vm,
                    false,
                    false,
                    &key(&child(p, "properties"), k),
                    errs,
                    depth + 1,
                );
            }
        }
    }
    let forbid = |errs: &mut Vec<FieldError>, f: &str, d: &str| {
        errs.push(FieldError::forbidden(child(p, f), d));
    };
    if !type_of(m).is_empty() {
        forbid(errs, "type", "must be empty to be structural");
    }
    if m.get("additionalProperties").is_some_and(|v| !v.is_null()) {
        forbid(
            errs,
            "additionalProperties",
            "must be undefined to be structural",
        );
    }
    if m.get("default").is_some_and(|v| !v.is_null()) {
        forbid(errs, "default", "must be undefined to be structural");
    }
    if m.get("title")
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty())
    {
        forbid(errs, "title", "must be empty to be structural");
    }
    if m.get("description")
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty())
    {
        forbid(errs, "description", "must be empty to be structural");
    }
    if is_true(m, "nullable") {
        forbid(errs, "nullable", "must be false to be structural");
    }
    if is_true(m, "x-kubernetes-preserve-unknown-fields") {
        forbid(
            errs,
            "x-kubernetes-preserve-unknown-fields",
            "must be false to be structural",
        );
    }
    if is_true(m, "x-kubernetes-embedded-resource") {
        forbid(
            errs,
            "x-kubernetes-embedded-resource",
            "must be false to be structural",
        );
    }
    if is_true(m, "x-kubernetes-int-or-string") {
        forbid(
            errs,
            "x-kubernetes-int-or-string",
            "must be false to be structural",
        );
    }
    if matches!(m.get("x-kubernetes-list-map-keys"), Some(Value::Array(a)) if !a.is_empty()) {
        forbid(
            errs,
            "x-kubernetes-list-map-keys",
            "must be empty to be structural",
        );
    }
    if m.get("x-kubernetes-list-type")
        .is_some_and(|v| !v.is_null())
    {
        forbid(
            errs,
            "x-kubernetes-list-type",
            "must be undefined to be structural",
        );
    }
    if m.get("x-kubernetes-map-type").is_some_and(|v| !v.is_null()) {
        forbid(
            errs,
            "x-kubernetes-map-type",
            "must be undefined to be structural",
        );
    }
    if matches!(m.get("x-kubernetes-validations"), Some(Value::Array(a)) if !a.is_empty()) {
        forbid(
            errs,
            "x-kubernetes-validations",
            "must be empty to be structural",
        );
    }
    if obj(m.get("properties")).is_some_and(|ps| ps.contains_key("metadata")) {
        errs.push(FieldError::forbidden(
            key(&child(p, "properties"), "metadata"),
            "must not be specified in a nested context",
        ));
    }
}

/// `validateStructuralCompleteness`: everything named inside a value validation must also be
/// specified in the structural part.
fn structural_completeness(
    m: &Map<String, Value>,
    p: &str,
    errs: &mut Vec<FieldError>,
    depth: usize,
) {
    if depth > structural::MAX_SCHEMA_DEPTH {
        return;
    }
    if let Some(im) = obj(m.get("items")) {
        structural_completeness(im, &child(p, "items"), errs, depth + 1);
    }
    if let Some(props) = obj(m.get("properties")) {
        for (k, v) in props {
            if let Some(vm) = v.as_object() {
                structural_completeness(vm, &key(&child(p, "properties"), k), errs, depth + 1);
            }
        }
    }
    vv_completeness(m, Some(m), p, p, errs, depth);
}

fn vv_completeness(
    v: &Map<String, Value>,
    s: Option<&Map<String, Value>>,
    s_path: &str,
    v_path: &str,
    errs: &mut Vec<FieldError>,
    depth: usize,
) {
    if depth > structural::MAX_SCHEMA_DEPTH {
        return;
    }
    if let Some(n) = obj(v.get("not")) {
        nested_completeness(n, s, s_path, &child(v_path, "not"), errs, depth + 1);
    }
    for j in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(a)) = v.get(j) {
            for (i, x) in a.iter().enumerate() {
                if let Some(xm) = x.as_object() {
                    nested_completeness(
                        xm,
                        s,
                        s_path,
                        &index(&child(v_path, j), i),
                        errs,
                        depth + 1,
                    );
                }
            }
        }
    }
}

fn nested_completeness(
    v: &Map<String, Value>,
    s: Option<&Map<String, Value>>,
    s_path: &str,
    v_path: &str,
    errs: &mut Vec<FieldError>,
    depth: usize,
) {
    let Some(s) = s else {
        errs.push(FieldError::required(
            s_path,
            format!("because it is defined in {v_path}"),
        ));
        return;
    };
    vv_completeness(v, Some(s), s_path, v_path, errs, depth);
    if let Some(vi) = obj(v.get("items")) {
        nested_completeness(
            vi,
            obj(s.get("items")),
            &child(s_path, "items"),
            &child(v_path, "items"),
            errs,
            depth + 1,
        );
    }
    if let Some(vps) = obj(v.get("properties")) {
        let sps = obj(s.get("properties"));
        for (k, vp) in vps {
            let Some(vpm) = vp.as_object() else { continue };
            let sp = key(&child(s_path, "properties"), k);
            let vpp = key(&child(v_path, "properties"), k);
            match sps.and_then(|x| x.get(k)).and_then(Value::as_object) {
                None => errs.push(FieldError::required(
                    sp,
                    format!("because it is defined in {vpp}"),
                )),
                Some(spm) => nested_completeness(vpm, Some(spm), &sp, &vpp, errs, depth + 1),
            }
        }
    }
}

/// Renders a pattern compile error the way Go's regexp package words it
/// (`error parsing regexp: <code>: `<expr>``) for the common cases; other errors fall back
/// to the Rust parser's description.
fn go_regexp_error(pat: &str, e: &str) -> String {
    use regex_syntax::ast::ErrorKind as K;
    let parsed = regex_syntax::ast::parse::Parser::new().parse(pat);
    let Err(err) = parsed else {
        // Parsed as an AST but failed later (size limits, Unicode classes...).
        return format!(
            "error parsing regexp: {}",
            e.lines().last().unwrap_or(e).trim()
        );
    };
    let span = err.span();
    let mut snippet = pat.get(span.start.offset..span.end.offset).unwrap_or(pat);
    if snippet.is_empty() {
        // Zero-width spans point at the offending operator.
        let start = span.start.offset.min(pat.len());
        let len = pat[start..].chars().next().map_or(0, char::len_utf8);
        snippet = &pat[start..start + len];
    }
    let (code, expr) = match err.kind() {
        K::GroupUnclosed => ("missing closing )", pat.to_string()),
        K::GroupUnopened => ("unexpected )", pat.to_string()),
        K::ClassUnclosed => (
            "missing closing ]",
            pat.get(span.start.offset..).unwrap_or(pat).to_string(),
        ),
        K::RepetitionMissing => (
            "missing argument to repetition operator",
            snippet.to_string(),
        ),
        K::EscapeUnrecognized | K::EscapeUnexpectedEof => {
            ("invalid escape sequence", snippet.to_string())
        }
        K::RepetitionCountInvalid | K::DecimalInvalid => {
            ("invalid repeat count", snippet.to_string())
        }
        K::ClassRangeInvalid => ("invalid character class range", snippet.to_string()),
        K::ClassEscapeInvalid => ("invalid escape sequence", snippet.to_string()),
        K::GroupNameInvalid
        | K::GroupNameDuplicate { .. }
        | K::GroupNameEmpty
        | K::GroupNameUnexpectedEof => ("invalid named capture", snippet.to_string()),
        K::FlagUnrecognized
        | K::FlagDanglingNegation
        | K::FlagUnexpectedEof
        | K::FlagRepeatedNegation { .. }
        | K::FlagDuplicate { .. } => ("invalid or unsupported Perl syntax", snippet.to_string()),
        K::UnsupportedLookAround | K::UnsupportedBackreference => {
            ("invalid or unsupported Perl syntax", snippet.to_string())
        }
        _ => return format!("error parsing regexp: {err}"),
    };
    format!("error parsing regexp: {code}: `{expr}`")
}

// ---------------------------------------------------------------------------------------
// Defaults (pkg/apiserver/schema/defaulting/validation.go)

fn validate_defaults(
    s: &Schema,
    p: &str,
    is_root: bool,
    inside_meta: bool,
    errs: &mut Vec<FieldError>,
    depth: usize,
) {
    if depth > structural::MAX_SCHEMA_DEPTH {
        return;
    }
    let resource_root = is_root || s.embedded;
    if let Some(d) = &s.default
        && !inside_meta
    {
        let dp = child(p, "default");
        let mut pruned = d.clone();
        if s.embedded {
            prune::prune(&mut pruned, s);
        } else {
            prune::prune_at(&mut pruned, s, "");
        }
        if pruned != *d {
            errs.push(FieldError::invalid(
                &dp,
                d.clone(),
                "must not have unknown fields",
            ));
        }
        for mut e in metadata::validate_embedded(s, d, "") {
            e.field = rebase(&dp, &e.field);
            errs.push(e);
        }
        for mut e in validate::validate(s, d, "") {
            e.field = rebase(&dp, &e.field);
            errs.push(e);
        }
        for mut e in validate::validate_list_sets_and_maps(s, d, "") {
            e.field = rebase(&dp, &e.field);
            errs.push(e);
        }
    }
    if let Some(items) = s.items.as_deref() {
        validate_defaults(
            items,
            &child(p, "items"),
            false,
            inside_meta,
            errs,
            depth + 1,
        );
    }
    for (k, ps) in &s.properties {
        let sub_meta = inside_meta
            || (resource_root && matches!(k.as_str(), "apiVersion" | "kind" | "metadata"));
        validate_defaults(
            ps,
            &key(&child(p, "properties"), k),
            false,
            sub_meta,
            errs,
            depth + 1,
        );
    }
}

/// Puts an error found inside a default value under the default's path (upstream validates
/// the default with `fldPath = <schema path>.default`).
fn rebase(base: &str, field: &str) -> String {
    if field.is_empty() || field == "<nil>" {
        base.to_string()
    } else if field.starts_with('[') {
        format!("{base}{field}")
    } else {
        format!("{base}.{field}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msgs(schema: Value) -> Vec<String> {
        validate_version_schema(&schema, "spec.versions[0].schema")
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn obj_schema(props: Value) -> Value {
        json!({"type": "object", "properties": props})
    }

    /// One case per check fixed or added in the audit against apiextensions-apiserver
    /// pkg/apis/apiextensions/validation/validation.go and pkg/apiserver/schema/validation.go.
    #[test]
    fn audited_schema_checks() {
        let p = "spec.versions[0].schema.openAPIV3Schema";
        let cases: Vec<(Value, Vec<String>)> = vec![
            // A typeless field that preserves unknown fields is structural (tekton, argo,
            // cert-manager's webhook config, flux's values …).
            (
                obj_schema(json!({"config": {"x-kubernetes-preserve-unknown-fields": true}})),
                vec![],
            ),
            (
                obj_schema(json!({"list": {"type": "array",
                    "items": {"x-kubernetes-preserve-unknown-fields": true}}})),
                vec![],
            ),
            // Upstream's default checks do not follow additionalProperties
            // (defaulting/validation.go), so a default there that breaks its own schema
            // is accepted; objects it defaults then fail validation instead.
            (
                obj_schema(json!({"m": {"type": "object", "additionalProperties": {
                    "type": "integer", "minimum": 0, "default": -1}}})),
                vec![],
            ),
            // Without it the type is still required.
            (
                obj_schema(json!({"config": {"description": "x"}})),
                vec![format!(
                    "{p}.properties[config].type: Required value: must not be empty for specified object fields"
                )],
            ),
            // `additionalProperties: false` alone is accepted (no check in current upstream);
            // with properties it is refused as mutually exclusive.
            (
                obj_schema(json!({"m": {"type": "object", "additionalProperties": false}})),
                vec![],
            ),
            (
                obj_schema(
                    json!({"m": {"type": "object", "additionalProperties": false,
                    "properties": {"a": {"type": "string"}}}}),
                ),
                vec![format!(
                    "{p}.properties[m].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"
                )],
            ),
            // Items of a set list: non-atomic list items and non-atomic map items.
            (
                obj_schema(
                    json!({"s": {"type": "array", "x-kubernetes-list-type": "set",
                    "items": {"type": "array", "x-kubernetes-list-type": "set",
                        "items": {"type": "string"}}}}),
                ),
                vec![format!(
                    r#"{p}.properties[s].items.x-kubernetes-list-type: Invalid value: "set": must be atomic as item of a list with x-kubernetes-list-type=set"#
                )],
            ),
            (
                obj_schema(
                    json!({"s": {"type": "array", "x-kubernetes-list-type": "set",
                    "items": {"type": "object", "properties": {"a": {"type": "string"}}}}}),
                ),
                vec![format!(
                    r#"{p}.properties[s].items.x-kubernetes-map-type: Invalid value: "null": must be atomic as item of a list with x-kubernetes-list-type=set"#
                )],
            ),
            // Set and map items cannot be nullable (validateMapListKeysMapSet).
            (
                obj_schema(
                    json!({"s": {"type": "array", "x-kubernetes-list-type": "set",
                    "items": {"type": "string", "nullable": true}}}),
                ),
                vec![format!(
                    "{p}.properties[s].items.nullable: Forbidden: cannot be nullable when x-kubernetes-list-type is set"
                )],
            ),
            // Map keys: required or defaulted, not nullable.
            (
                obj_schema(
                    json!({"l": {"type": "array", "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["k"],
                    "items": {"type": "object", "properties": {
                        "k": {"type": "string", "nullable": true}}}}}),
                ),
                vec![
                    format!(
                        "{p}.properties[l].items.properties[k].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"
                    ),
                    format!(
                        "{p}.properties[l].items.properties[k].nullable: Forbidden: this property is in x-kubernetes-list-map-keys, so it cannot be nullable"
                    ),
                ],
            ),
            // x-kubernetes-validations rule texts.
            (
                json!({"type": "object", "x-kubernetes-validations": [
                    {"rule": " "},
                    {"rule": "self.a", "message": " "},
                    {"rule": "self.a", "message": "a\nb"},
                    {"rule": "self.a ||\n self.b"},
                    {"rule": "self.a", "messageExpression": " ", "reason": "Nope"},
                    {"rule": "self.a", "fieldPath": " "},
                    {"rule": "self.a", "fieldPath": ".a\n"}]}),
                vec![
                    format!(
                        "{p}.x-kubernetes-validations[0].rule: Required value: rule is not specified"
                    ),
                    format!(
                        r#"{p}.x-kubernetes-validations[1].message: Invalid value: " ": must be non-empty if specified"#
                    ),
                    format!(
                        r#"{p}.x-kubernetes-validations[2].message: Invalid value: "a\nb": must not contain line breaks"#
                    ),
                    format!(
                        "{p}.x-kubernetes-validations[3].message: Required value: message must be specified if rule contains line breaks"
                    ),
                    format!(
                        "{p}.x-kubernetes-validations[4].messageExpression: Required value: messageExpression must be non-empty if specified"
                    ),
                    format!(
                        r#"{p}.x-kubernetes-validations[4].reason: Unsupported value: "Nope": supported values: "FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired""#
                    ),
                    format!(
                        r#"{p}.x-kubernetes-validations[5].fieldPath: Invalid value: " ": must be non-empty if specified"#
                    ),
                    format!(
                        r#"{p}.x-kubernetes-validations[6].fieldPath: Invalid value: ".a\n": must not contain line breaks"#
                    ),
                ],
            ),
            // Structural errors come before the generic OpenAPI ones.
            (
                obj_schema(json!({"a": {"description": "x"},
                    "b": {"type": "array", "items": {"type": "string"}, "uniqueItems": true}})),
                vec![
                    format!(
                        "{p}.properties[a].type: Required value: must not be empty for specified object fields"
                    ),
                    format!(
                        "{p}.properties[b].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic"
                    ),
                ],
            ),
        ];
        for (schema, want) in cases {
            assert_eq!(msgs(schema.clone()), want, "{schema}");
        }
    }

    #[test]
    fn status_subresource_root_restrictions() {
        let p = "spec.versions[0].schema.openAPIV3Schema";
        let base = "spec.versions[0].schema";
        let m = |s: Value| -> Vec<String> {
            status_root_checks(&s, base)
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        assert!(
            m(
                json!({"type": "object", "description": "d", "required": ["spec"],
            "properties": {}, "x-kubernetes-preserve-unknown-fields": true})
            )
            .is_empty()
        );
        assert_eq!(
            m(json!({"type": "array", "items": {"type": "string"}})),
            vec![format!(
                r#"{p}.type: Invalid value: "array": only "object" is allowed as the type at the root of the schema if the status subresource is enabled"#
            )]
        );
        let e = status_root_checks(&json!({"type": "object", "maxProperties": 3}), base);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].field, p);
        assert_eq!(
            e[0].detail,
            "only [Description Type Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum MaxLength MinLength Pattern MaxItems MinItems UniqueItems MultipleOf Required Items Properties ExternalDocs Example XPreserveUnknownFields XValidations] fields are allowed at the root of the schema if the status subresource is enabled"
        );
        // Zero values (false, "") are skipped like Go's reflect-based check.
        assert!(m(json!({"type": "object", "nullable": false, "x-kubernetes-embedded-resource": false})).is_empty());
        // Only versions with the status subresource are checked.
        let crd = |sub: Value| {
            json!({"spec": {"versions": [{"name": "v1", "subresources": sub,
                "schema": {"openAPIV3Schema": {"type": "object", "maxProperties": 3}}}]}})
        };
        assert_eq!(
            validate_crd(&crd(json!({"status": {}})), None).errors.len(),
            1
        );
        assert!(validate_crd(&crd(json!({})), None).errors.is_empty());
    }

    #[test]
    fn regex_errors_are_go_worded() {
        assert_eq!(
            msgs(
                json!({"type": "object", "properties": {"foo": {"type": "string", "pattern": "+"}}})
            ),
            vec![
                "spec.versions[0].schema.openAPIV3Schema.properties[foo].pattern: Invalid value: \"+\": must be a valid regular expression, but isn't: error parsing regexp: missing argument to repetition operator: `+`"
            ]
        );
    }
}
