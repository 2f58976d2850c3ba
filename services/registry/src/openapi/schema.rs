//! Per-version CR schema → published OpenAPI schema.
//!
//! Follows apiextensions-apiserver:
//! - `pkg/apiserver/schema` (`Structural`, `ToKubeOpenAPI`, `Unfold`): only the fields a
//!   structural schema can carry survive publishing (no `example`, `externalDocs`, `id`,
//!   `$schema`, `definitions`, `patternProperties`, ...); `x-kubernetes-int-or-string`
//!   is unfolded into an `anyOf` of integer and string;
//! - `pkg/controller/openapi/v2/conversion.go` (`ToStructuralOpenAPIV2`): for Swagger 2.0
//!   the junctors are dropped, nullable/preserve-unknown-fields nodes lose their type,
//!   items and properties, and nullable properties are no longer required;
//! - `pkg/controller/openapi/builder/builder.go` (`buildKubeNative`,
//!   `addEmbeddedProperties`, `addTypeMetaProperties`, `buildListSchema`).

use serde_json::{Map, Value, json};

/// Deeper schema nodes are cut off (replaced by an empty schema). CRD validation bounds
/// real schemas far below this; the limit only protects the recursion.
pub(crate) const MAX_DEPTH: usize = 96;

/// Description of the root `metadata` property (upstream
/// `metav1beta1.PartialObjectMetadata{}.SwaggerDoc()["metadata"]`).
pub(crate) const OBJECT_METADATA_DESC: &str = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
/// Description of the list `metadata` property (`PartialObjectMetadataList`).
pub(crate) const LIST_METADATA_DESC: &str = "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
/// TypeMeta `apiVersion` description (as in every generated built-in definition).
pub(crate) const API_VERSION_DESC: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
/// TypeMeta `kind` description.
pub(crate) const KIND_DESC: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
/// Descriptions `addEmbeddedProperties` puts on embedded resources.
const EMBEDDED_API_VERSION_DESC: &str = "apiVersion defines the versioned schema of this representation of an object. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const EMBEDDED_KIND_DESC: &str = "kind is a string value representing the type of this object. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";

pub(crate) const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
pub(crate) const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";

/// Scalar keys a structural schema node keeps (`Generic` + `ValueValidation` scalars).
const SCALAR_KEYS: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "default",
    "nullable",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "multipleOf",
    "enum",
    "maxProperties",
    "minProperties",
    "required",
];

const JUNCTORS: &[&str] = &["allOf", "anyOf", "oneOf"];

/// Which document a schema is published into.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Flavor {
    V2,
    V3,
}

impl Flavor {
    pub(crate) fn def_prefix(self) -> &'static str {
        match self {
            Flavor::V2 => "#/definitions/",
            Flavor::V3 => "#/components/schemas/",
        }
    }
    pub(crate) fn reference(self, name: &str) -> String {
        format!("{}{}", self.def_prefix(), name)
    }
}

fn is_true(s: &Map<String, Value>, key: &str) -> bool {
    s.get(key).and_then(Value::as_bool) == Some(true)
}

/// Keep only what the structural schema type carries (`ToKubeOpenAPI` output).
/// `nested` marks nodes inside a junctor (`NestedValueValidation`), which are not unfolded.
fn structural(v: &Value, depth: usize, nested: bool) -> Value {
    let Some(src) = v.as_object() else {
        return Value::Object(Map::new());
    };
    if depth > MAX_DEPTH {
        return Value::Object(Map::new());
    }
    let mut out = Map::new();
    for key in SCALAR_KEYS {
        if let Some(x) = src.get(*key) {
            if *key == "nullable" && x.as_bool() != Some(true) {
                continue;
            }
            if *key == "required" && x.as_array().is_some_and(Vec::is_empty) {
                continue;
            }
            out.insert((*key).to_string(), x.clone());
        }
    }
    if let Some(props) = src.get("properties").and_then(Value::as_object) {
        let mut p = Map::new();
        for (k, s) in props {
            p.insert(k.clone(), structural(s, depth + 1, nested));
        }
        out.insert("properties".into(), Value::Object(p));
    }
    if let Some(items) = src.get("items").filter(|i| i.is_object()) {
        out.insert("items".into(), structural(items, depth + 1, nested));
    }
    match src.get("additionalProperties") {
        Some(ap @ Value::Object(_)) => {
            out.insert(
                "additionalProperties".into(),
                structural(ap, depth + 1, nested),
            );
        }
        Some(Value::Bool(b)) => {
            out.insert("additionalProperties".into(), Value::Bool(*b));
        }
        _ => {}
    }
    for j in JUNCTORS {
        if let Some(list) = src.get(*j).and_then(Value::as_array) {
            let l: Vec<Value> = list
                .iter()
                .map(|s| structural(s, depth + 1, true))
                .collect();
            out.insert((*j).to_string(), Value::Array(l));
        }
    }
    if let Some(not) = src.get("not").filter(|n| n.is_object()) {
        out.insert("not".into(), structural(not, depth + 1, true));
    }
    for ext in [
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-embedded-resource",
        "x-kubernetes-int-or-string",
    ] {
        if is_true(src, ext) {
            out.insert(ext.into(), Value::Bool(true));
        }
    }
    if let Some(keys) = src
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty())
    {
        out.insert(
            "x-kubernetes-list-map-keys".into(),
            Value::Array(keys.clone()),
        );
    }
    for ext in ["x-kubernetes-list-type", "x-kubernetes-map-type"] {
        if let Some(s) = src.get(ext).and_then(Value::as_str) {
            out.insert(ext.into(), Value::String(s.to_string()));
        }
    }
    if let Some(rules) = src
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty())
    {
        out.insert(
            "x-kubernetes-validations".into(),
            Value::Array(rules.clone()),
        );
    }
    if !nested && is_true(&out, "x-kubernetes-int-or-string") {
        unfold_int_or_string(&mut out);
    }
    Value::Object(out)
}

/// `Structural.Unfold`: int-or-string nodes get `anyOf: [{type: integer}, {type: string}]`,
/// or, if they already have an `anyOf`, that pair is prepended to `allOf` as a nested anyOf.
fn unfold_int_or_string(s: &mut Map<String, Value>) {
    let pair = json!([{"type": "integer"}, {"type": "string"}]);
    if s.contains_key("anyOf") {
        let mut all = vec![json!({ "anyOf": pair })];
        if let Some(Value::Array(existing)) = s.remove("allOf") {
            all.extend(existing);
        }
        s.insert("allOf".into(), Value::Array(all));
    } else {
        s.insert("anyOf".into(), pair);
    }
}

/// `ToStructuralOpenAPIV2`, applied to every structural node (parents before children,
/// as the upstream visitor does).
fn to_v2(s: &mut Map<String, Value>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    for j in JUNCTORS {
        s.remove(*j);
    }
    s.remove("not");
    if is_true(s, "nullable") {
        s.remove("type");
        s.remove("nullable");
        s.remove("items");
        s.remove("properties");
    }
    let preserve = is_true(s, "x-kubernetes-preserve-unknown-fields");
    if preserve {
        s.remove("items");
        s.remove("properties");
    }
    let ty = s.get("type").and_then(Value::as_str).map(str::to_string);
    if !s.contains_key("items") && ty.as_deref() == Some("array") {
        s.remove("type");
    }
    if preserve && ty.as_deref() == Some("object") {
        s.remove("type");
    }
    // Nullable properties / additionalProperties are no longer required.
    let nullable_props: Vec<String> = s
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| {
            p.iter()
                .filter(|(_, v)| v.get("nullable").and_then(Value::as_bool) == Some(true))
                .map(|(k, _)| k.clone())
                .collect()
        })
        .unwrap_or_default();
    let ap_nullable = s
        .get("additionalProperties")
        .and_then(|a| a.get("nullable"))
        .and_then(Value::as_bool)
        == Some(true);
    if ap_nullable {
        s.remove("required");
    } else if !nullable_props.is_empty()
        && let Some(Value::Array(req)) = s.get_mut("required")
    {
        req.retain(|r| {
            !r.as_str()
                .is_some_and(|r| nullable_props.iter().any(|n| n == r))
        });
        if req.is_empty() {
            s.remove("required");
        }
    }
    if let Some(Value::Object(props)) = s.get_mut("properties") {
        for v in props.values_mut() {
            if let Value::Object(m) = v {
                to_v2(m, depth + 1);
            }
        }
    }
    if let Some(Value::Object(m)) = s.get_mut("items") {
        to_v2(m, depth + 1);
    }
    if let Some(Value::Object(m)) = s.get_mut("additionalProperties") {
        to_v2(m, depth + 1);
    }
}

fn type_meta_property(desc: &str) -> Value {
    json!({"description": desc, "type": "string"})
}

fn meta_ref(flavor: Flavor, target: &str, desc: &str) -> Value {
    json!({"$ref": flavor.reference(target), "description": desc})
}

/// `addEmbeddedProperties`: children first, then embedded-resource nodes get
/// apiVersion/kind/metadata and require kind and apiVersion. In v2, nodes that preserve
/// unknown fields are left alone.
fn add_embedded(s: &mut Map<String, Value>, flavor: Flavor, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    if let Some(Value::Object(props)) = s.get_mut("properties") {
        for v in props.values_mut() {
            if let Value::Object(m) = v {
                add_embedded(m, flavor, depth + 1);
            }
        }
    }
    if let Some(Value::Object(m)) = s.get_mut("items") {
        add_embedded(m, flavor, depth + 1);
    }
    if let Some(Value::Object(m)) = s.get_mut("additionalProperties") {
        add_embedded(m, flavor, depth + 1);
    }
    if flavor == Flavor::V2 && is_true(s, "x-kubernetes-preserve-unknown-fields") {
        return;
    }
    if !is_true(s, "x-kubernetes-embedded-resource") {
        return;
    }
    let props = s
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(p) = props {
        p.insert(
            "apiVersion".into(),
            type_meta_property(EMBEDDED_API_VERSION_DESC),
        );
        p.insert("kind".into(), type_meta_property(EMBEDDED_KIND_DESC));
        p.insert(
            "metadata".into(),
            meta_ref(flavor, OBJECT_META, OBJECT_METADATA_DESC),
        );
    }
    let req = s
        .entry("required")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(r) = req {
        for k in ["kind", "apiVersion"] {
            if !r.iter().any(|x| x.as_str() == Some(k)) {
                r.push(Value::String(k.into()));
            }
        }
    }
}

/// The GVK extension value: `[{group, kind, version}]`.
pub(crate) fn gvk_ext(group: &str, version: &str, kind: &str) -> Value {
    json!([{"group": group, "kind": kind, "version": version}])
}

/// `buildKubeNative`: the published definition of one CR kind in one version.
pub(crate) fn kind_schema(
    schema: Option<&Value>,
    crd_preserve_unknown: bool,
    flavor: Flavor,
    group: &str,
    version: &str,
    kind: &str,
) -> Value {
    let root = schema.map(|s| structural(s, 0, false));
    let root_preserve = root
        .as_ref()
        .and_then(Value::as_object)
        .is_some_and(|m| is_true(m, "x-kubernetes-preserve-unknown-fields"));
    let mut out = match root {
        Some(Value::Object(m))
            if !(flavor == Flavor::V2 && (root_preserve || crd_preserve_unknown)) =>
        {
            let mut m = m;
            if flavor == Flavor::V2 {
                to_v2(&mut m, 0);
            }
            let props = m
                .entry("properties")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(p) = props {
                p.insert(
                    "metadata".into(),
                    meta_ref(flavor, OBJECT_META, OBJECT_METADATA_DESC),
                );
                p.insert("apiVersion".into(), type_meta_property(API_VERSION_DESC));
                p.insert("kind".into(), type_meta_property(KIND_DESC));
            }
            add_embedded(&mut m, flavor, 0);
            m
        }
        _ => {
            let mut m = Map::new();
            m.insert("type".into(), Value::String("object".into()));
            m
        }
    };
    out.insert(
        "x-kubernetes-group-version-kind".into(),
        gvk_ext(group, version, kind),
    );
    Value::Object(out)
}

/// `buildListSchema`: the `<Kind>List` definition.
pub(crate) fn list_schema(
    flavor: Flavor,
    item_def: &str,
    group: &str,
    version: &str,
    kind: &str,
    list_kind: &str,
    plural: &str,
) -> Value {
    json!({
        "description": format!("{list_kind} is a list of {kind}"),
        "required": ["items"],
        "properties": {
            "items": {
                "description": format!("List of {plural}. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md"),
                "type": "array",
                "items": {"$ref": flavor.reference(item_def)},
            },
            "metadata": meta_ref(flavor, LIST_META, LIST_METADATA_DESC),
            "apiVersion": type_meta_property(API_VERSION_DESC),
            "kind": type_meta_property(KIND_DESC),
        },
        "x-kubernetes-group-version-kind": gvk_ext(group, version, list_kind),
    })
}
