//! The gnostic `openapi.v2` protobuf form of a Swagger 2.0 document
//! (github.com/google/gnostic-models `openapiv2/OpenAPIv2.proto`), which kubectl 1.20
//! requests from `/openapi/v2` and decodes with `proto.Unmarshal` before `apply`,
//! `create`, `explain` and `--dry-run=server`.
//!
//! The message types are generated from the vendored .proto (`proto/gnostic/`, exposed as
//! [`crdplane_proto::openapi_v2`]); this file is the one place that maps the JSON document
//! onto them. [`encode_document`] does it the way gnostic's `NewDocument` does: vendor
//! extensions (`x-*` keys) become `NamedAny` entries whose `Any.yaml` holds the value's YAML
//! text (JSON is valid YAML, so the compact JSON rendering is used; `Any.value` stays
//! empty), schema `type` becomes a `TypeItem`, `items` an `ItemsItem`, parameters are
//! dispatched on `in` to the body/query/path/header/formData variants, and `$ref`
//! parameters/responses become `JsonReference`s.
//!
//! Only what the registry's documents use is filled in. Left at their defaults (so not on
//! the wire): the document's `responses`, `tags` and `externalDocs`; `Info`'s
//! `termsOfService`, `contact` and `license`; `Operation`'s `externalDocs` and `security`;
//! `Response`'s `headers` and `examples`; `Schema.xml`; vendor extensions of `externalDocs`;
//! and the validation keywords (`maximum`, `pattern`, ...) of non-body parameters and of
//! their `items`. Security definitions other than `apiKey` are left out.

use crdplane_proto::openapi_v2 as v2;
use prost::Message;
use serde_json::{Map, Value};

use super::schema::MAX_DEPTH;

// ---------------------------------------------------------------------------------------
// JSON → messages

fn s(m: &Map<String, Value>, k: &str) -> String {
    m.get(k)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn b(m: &Map<String, Value>, k: &str) -> bool {
    m.get(k).and_then(Value::as_bool).unwrap_or(false)
}

fn f(m: &Map<String, Value>, k: &str) -> f64 {
    m.get(k).and_then(Value::as_f64).unwrap_or(0.0)
}

fn i(m: &Map<String, Value>, k: &str) -> i64 {
    match m.get(k) {
        Some(v) => v
            .as_i64()
            .or_else(|| v.as_f64().map(|x| x as i64))
            .unwrap_or(0),
        None => 0,
    }
}

fn strings(m: &Map<String, Value>, k: &str) -> Vec<String> {
    match m.get(k) {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        Some(Value::String(x)) => vec![x.clone()],
        _ => Vec::new(),
    }
}

/// A JSON value as gnostic's `Any`: its YAML text. JSON is a subset of YAML, so the
/// compact JSON rendering plus a newline is a YAML document with the same value.
pub(crate) fn any(v: &Value) -> v2::Any {
    v2::Any {
        value: None,
        yaml: format!("{}\n", serde_json::to_string(v).unwrap_or_default()),
    }
}

fn opt_any(m: &Map<String, Value>, k: &str) -> Option<v2::Any> {
    m.get(k).map(any)
}

fn anys(m: &Map<String, Value>, k: &str) -> Vec<v2::Any> {
    m.get(k)
        .and_then(Value::as_array)
        .map(|a| a.iter().map(any).collect())
        .unwrap_or_default()
}

fn vendor(m: &Map<String, Value>) -> Vec<v2::NamedAny> {
    m.iter()
        .filter(|(k, _)| k.starts_with("x-"))
        .map(|(k, v)| v2::NamedAny {
            name: k.clone(),
            value: Some(any(v)),
        })
        .collect()
}

fn schema(v: &Value, depth: usize) -> v2::Schema {
    let Some(m) = v.as_object() else {
        return v2::Schema::default();
    };
    if depth > MAX_DEPTH * 2 {
        return v2::Schema::default();
    }
    let additional_properties = match m.get("additionalProperties") {
        Some(Value::Bool(x)) => Some(Box::new(v2::AdditionalPropertiesItem {
            oneof: Some(v2::additional_properties_item::Oneof::Boolean(*x)),
        })),
        Some(x @ Value::Object(_)) => Some(Box::new(v2::AdditionalPropertiesItem {
            oneof: Some(v2::additional_properties_item::Oneof::Schema(Box::new(
                schema(x, depth + 1),
            ))),
        })),
        _ => None,
    };
    let items = match m.get("items") {
        Some(x @ Value::Object(_)) => Some(v2::ItemsItem {
            schema: vec![schema(x, depth + 1)],
        }),
        Some(Value::Array(a)) => Some(v2::ItemsItem {
            schema: a.iter().map(|x| schema(x, depth + 1)).collect(),
        }),
        _ => None,
    };
    let properties = m
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| v2::Properties {
            additional_properties: p
                .iter()
                .map(|(k, x)| v2::NamedSchema {
                    name: k.clone(),
                    value: Some(schema(x, depth + 1)),
                })
                .collect(),
        });
    let ty = strings(m, "type");
    v2::Schema {
        r#ref: s(m, "$ref"),
        format: s(m, "format"),
        title: s(m, "title"),
        description: s(m, "description"),
        default: opt_any(m, "default"),
        multiple_of: f(m, "multipleOf"),
        maximum: f(m, "maximum"),
        exclusive_maximum: b(m, "exclusiveMaximum"),
        minimum: f(m, "minimum"),
        exclusive_minimum: b(m, "exclusiveMinimum"),
        max_length: i(m, "maxLength"),
        min_length: i(m, "minLength"),
        pattern: s(m, "pattern"),
        max_items: i(m, "maxItems"),
        min_items: i(m, "minItems"),
        unique_items: b(m, "uniqueItems"),
        max_properties: i(m, "maxProperties"),
        min_properties: i(m, "minProperties"),
        required: strings(m, "required"),
        r#enum: anys(m, "enum"),
        additional_properties,
        r#type: (!ty.is_empty()).then_some(v2::TypeItem { value: ty }),
        items,
        all_of: m
            .get("allOf")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(|x| schema(x, depth + 1)).collect())
            .unwrap_or_default(),
        properties,
        discriminator: s(m, "discriminator"),
        read_only: b(m, "readOnly"),
        external_docs: m
            .get("externalDocs")
            .and_then(Value::as_object)
            .map(|e| v2::ExternalDocs {
                description: s(e, "description"),
                url: s(e, "url"),
                ..Default::default()
            }),
        example: opt_any(m, "example"),
        vendor_extension: vendor(m),
        // CRD schemas (JSONSchemaProps) have no `xml`.
        xml: None,
    }
}

fn primitives_items(v: Option<&Value>, depth: usize) -> Option<v2::PrimitivesItems> {
    let m = v?.as_object()?;
    if depth > 8 {
        return None;
    }
    Some(v2::PrimitivesItems {
        r#type: s(m, "type"),
        format: s(m, "format"),
        items: primitives_items(m.get("items"), depth + 1).map(Box::new),
        collection_format: s(m, "collectionFormat"),
        default: opt_any(m, "default"),
        unique_items: b(m, "uniqueItems"),
        r#enum: anys(m, "enum"),
        vendor_extension: vendor(m),
        ..Default::default()
    })
}

fn parameter(m: &Map<String, Value>) -> v2::Parameter {
    let inn = s(m, "in");
    // The four non-body messages share their field names (query and formData also have
    // `allowEmptyValue`), and each oneof variant is named after its message. Their numeric
    // and string validation keywords (`maximum`, `pattern`, ...) stay unset: no parameter
    // the registry publishes has any.
    macro_rules! non_body {
        ($variant:ident $(, $field:ident: $value:expr)?) => {
            v2::parameter::Oneof::NonBodyParameter(v2::NonBodyParameter {
                oneof: Some(v2::non_body_parameter::Oneof::$variant(v2::$variant {
                    required: b(m, "required"),
                    r#in: inn.clone(),
                    description: s(m, "description"),
                    name: s(m, "name"),
                    r#type: s(m, "type"),
                    format: s(m, "format"),
                    items: primitives_items(m.get("items"), 0),
                    collection_format: s(m, "collectionFormat"),
                    default: opt_any(m, "default"),
                    unique_items: b(m, "uniqueItems"),
                    r#enum: anys(m, "enum"),
                    vendor_extension: vendor(m),
                    $($field: $value,)?
                    ..Default::default()
                })),
            })
        };
    }
    let oneof = match inn.as_str() {
        "body" => v2::parameter::Oneof::BodyParameter(v2::BodyParameter {
            description: s(m, "description"),
            name: s(m, "name"),
            r#in: inn.clone(),
            required: b(m, "required"),
            schema: m.get("schema").map(|x| schema(x, 0)),
            vendor_extension: vendor(m),
        }),
        "path" => non_body!(PathParameterSubSchema),
        "header" => non_body!(HeaderParameterSubSchema),
        "formData" => non_body!(
            FormDataParameterSubSchema,
            allow_empty_value: b(m, "allowEmptyValue")
        ),
        _ => non_body!(
            QueryParameterSubSchema,
            allow_empty_value: b(m, "allowEmptyValue")
        ),
    };
    v2::Parameter { oneof: Some(oneof) }
}

fn parameters_items(v: Option<&Value>) -> Vec<v2::ParametersItem> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_object)
                .map(|p| {
                    let oneof = match p.get("$ref").and_then(Value::as_str) {
                        Some(r) => v2::parameters_item::Oneof::JsonReference(v2::JsonReference {
                            r#ref: r.to_string(),
                            description: s(p, "description"),
                        }),
                        None => v2::parameters_item::Oneof::Parameter(parameter(p)),
                    };
                    v2::ParametersItem { oneof: Some(oneof) }
                })
                .collect()
        })
        .unwrap_or_default()
}

fn responses(v: Option<&Value>) -> Option<v2::Responses> {
    let m = v?.as_object()?;
    Some(v2::Responses {
        response_code: m
            .iter()
            .filter(|(k, _)| !k.starts_with("x-"))
            .filter_map(|(code, r)| {
                let r = r.as_object()?;
                let oneof = match r.get("$ref").and_then(Value::as_str) {
                    Some(rf) => v2::response_value::Oneof::JsonReference(v2::JsonReference {
                        r#ref: rf.to_string(),
                        description: s(r, "description"),
                    }),
                    None => v2::response_value::Oneof::Response(v2::Response {
                        description: s(r, "description"),
                        schema: r.get("schema").map(|x| v2::SchemaItem {
                            oneof: Some(v2::schema_item::Oneof::Schema(schema(x, 0))),
                        }),
                        vendor_extension: vendor(r),
                        ..Default::default()
                    }),
                };
                Some(v2::NamedResponseValue {
                    name: code.clone(),
                    value: Some(v2::ResponseValue { oneof: Some(oneof) }),
                })
            })
            .collect(),
        vendor_extension: vendor(m),
    })
}

fn operation(v: Option<&Value>) -> Option<v2::Operation> {
    let m = v?.as_object()?;
    Some(v2::Operation {
        tags: strings(m, "tags"),
        summary: s(m, "summary"),
        description: s(m, "description"),
        operation_id: s(m, "operationId"),
        produces: strings(m, "produces"),
        consumes: strings(m, "consumes"),
        parameters: parameters_items(m.get("parameters")),
        responses: responses(m.get("responses")),
        schemes: strings(m, "schemes"),
        deprecated: b(m, "deprecated"),
        vendor_extension: vendor(m),
        ..Default::default()
    })
}

fn path_item(m: &Map<String, Value>) -> v2::PathItem {
    v2::PathItem {
        r#ref: s(m, "$ref"),
        get: operation(m.get("get")),
        put: operation(m.get("put")),
        post: operation(m.get("post")),
        delete: operation(m.get("delete")),
        options: operation(m.get("options")),
        head: operation(m.get("head")),
        patch: operation(m.get("patch")),
        parameters: parameters_items(m.get("parameters")),
        vendor_extension: vendor(m),
    }
}

/// Builds the `openapi.v2.Document` message for a Swagger 2.0 JSON document.
pub(crate) fn document(doc: &Value) -> v2::Document {
    let empty = Map::new();
    let m = doc.as_object().unwrap_or(&empty);
    let info = m.get("info").and_then(Value::as_object).map(|i| v2::Info {
        title: s(i, "title"),
        version: s(i, "version"),
        description: s(i, "description"),
        vendor_extension: vendor(i),
        ..Default::default()
    });
    let paths = m
        .get("paths")
        .and_then(Value::as_object)
        .map(|p| v2::Paths {
            vendor_extension: vendor(p),
            path: p
                .iter()
                .filter(|(k, _)| !k.starts_with("x-"))
                .filter_map(|(k, v)| {
                    Some(v2::NamedPathItem {
                        name: k.clone(),
                        value: Some(path_item(v.as_object()?)),
                    })
                })
                .collect(),
        });
    let definitions = m
        .get("definitions")
        .and_then(Value::as_object)
        .map(|d| v2::Definitions {
            additional_properties: d
                .iter()
                .map(|(k, v)| v2::NamedSchema {
                    name: k.clone(),
                    value: Some(schema(v, 0)),
                })
                .collect(),
        });
    let parameters =
        m.get("parameters")
            .and_then(Value::as_object)
            .map(|d| v2::ParameterDefinitions {
                additional_properties: d
                    .iter()
                    .filter_map(|(k, v)| {
                        Some(v2::NamedParameter {
                            name: k.clone(),
                            value: Some(parameter(v.as_object()?)),
                        })
                    })
                    .collect(),
            });
    let security_definitions = m
        .get("securityDefinitions")
        .and_then(Value::as_object)
        .map(|d| v2::SecurityDefinitions {
            additional_properties: d
                .iter()
                .filter_map(|(k, v)| {
                    let v = v.as_object()?;
                    (s(v, "type") == "apiKey").then(|| v2::NamedSecurityDefinitionsItem {
                        name: k.clone(),
                        value: Some(v2::SecurityDefinitionsItem {
                            oneof: Some(v2::security_definitions_item::Oneof::ApiKeySecurity(
                                v2::ApiKeySecurity {
                                    r#type: s(v, "type"),
                                    name: s(v, "name"),
                                    r#in: s(v, "in"),
                                    description: s(v, "description"),
                                    vendor_extension: vendor(v),
                                },
                            )),
                        }),
                    })
                })
                .collect(),
        });
    let security = m
        .get("security")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_object)
                .map(|req| v2::SecurityRequirement {
                    additional_properties: req
                        .iter()
                        .map(|(k, v)| v2::NamedStringArray {
                            name: k.clone(),
                            value: Some(v2::StringArray {
                                value: v
                                    .as_array()
                                    .map(|x| {
                                        x.iter()
                                            .filter_map(Value::as_str)
                                            .map(str::to_string)
                                            .collect()
                                    })
                                    .unwrap_or_default(),
                            }),
                        })
                        .collect(),
                })
                .collect()
        })
        .unwrap_or_default();
    v2::Document {
        swagger: s(m, "swagger"),
        info,
        host: s(m, "host"),
        base_path: s(m, "basePath"),
        schemes: strings(m, "schemes"),
        consumes: strings(m, "consumes"),
        produces: strings(m, "produces"),
        paths,
        definitions,
        parameters,
        security,
        security_definitions,
        vendor_extension: vendor(m),
        ..Default::default()
    }
}

/// Serialises [`document`] to protobuf bytes.
pub(crate) fn encode_document(doc: &Value) -> Vec<u8> {
    document(doc).encode_to_vec()
}
