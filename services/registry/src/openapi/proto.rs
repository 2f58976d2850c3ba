//! The gnostic `openapi.v2` protobuf form of a Swagger 2.0 document
//! (github.com/google/gnostic-models `openapiv2/OpenAPIv2.proto`), which kubectl 1.20
//! requests from `/openapi/v2` and decodes with `proto.Unmarshal` before `apply`,
//! `create`, `explain` and `--dry-run=server`.
//!
//! The message types below are written by hand with the tags of that .proto (only the
//! messages a Kubernetes document uses). [`encode_document`] maps the JSON document onto
//! them the way gnostic's `NewDocument` does: vendor extensions (`x-*` keys) become
//! `NamedAny` entries whose `Any.yaml` holds the value's YAML text (JSON is valid YAML,
//! so the compact JSON rendering is used), schema `type` becomes a `TypeItem`, `items`
//! an `ItemsItem`, parameters are dispatched on `in` to the body/query/path/header/
//! formData variants, and `$ref` parameters/responses become `JsonReference`s.

use prost::Message;
use serde_json::{Map, Value};

use super::schema::MAX_DEPTH;

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Any {
    #[prost(string, tag = "2")]
    pub(crate) yaml: String,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct NamedAny {
    #[prost(string, tag = "1")]
    pub(crate) name: String,
    #[prost(message, optional, tag = "2")]
    pub(crate) value: Option<Any>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Document {
    #[prost(string, tag = "1")]
    pub(crate) swagger: String,
    #[prost(message, optional, tag = "2")]
    pub(crate) info: Option<Info>,
    #[prost(string, tag = "3")]
    pub(crate) host: String,
    #[prost(string, tag = "4")]
    pub(crate) base_path: String,
    #[prost(string, repeated, tag = "5")]
    pub(crate) schemes: Vec<String>,
    #[prost(string, repeated, tag = "6")]
    pub(crate) consumes: Vec<String>,
    #[prost(string, repeated, tag = "7")]
    pub(crate) produces: Vec<String>,
    #[prost(message, optional, tag = "8")]
    pub(crate) paths: Option<Paths>,
    #[prost(message, optional, tag = "9")]
    pub(crate) definitions: Option<Definitions>,
    #[prost(message, optional, tag = "10")]
    pub(crate) parameters: Option<ParameterDefinitions>,
    #[prost(message, repeated, tag = "12")]
    pub(crate) security: Vec<SecurityRequirement>,
    #[prost(message, optional, tag = "13")]
    pub(crate) security_definitions: Option<SecurityDefinitions>,
    #[prost(message, repeated, tag = "16")]
    pub(crate) vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Info {
    #[prost(string, tag = "1")]
    pub(crate) title: String,
    #[prost(string, tag = "2")]
    pub(crate) version: String,
    #[prost(string, tag = "3")]
    pub(crate) description: String,
    #[prost(message, repeated, tag = "7")]
    pub(crate) vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Paths {
    #[prost(message, repeated, tag = "1")]
    pub(crate) vendor_extension: Vec<NamedAny>,
    #[prost(message, repeated, tag = "2")]
    pub(crate) path: Vec<NamedPathItem>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct NamedPathItem {
    #[prost(string, tag = "1")]
    pub(crate) name: String,
    #[prost(message, optional, tag = "2")]
    pub(crate) value: Option<PathItem>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct PathItem {
    #[prost(string, tag = "1")]
    pub(crate) r#ref: String,
    #[prost(message, optional, tag = "2")]
    pub(crate) get: Option<Operation>,
    #[prost(message, optional, tag = "3")]
    pub(crate) put: Option<Operation>,
    #[prost(message, optional, tag = "4")]
    pub(crate) post: Option<Operation>,
    #[prost(message, optional, tag = "5")]
    pub(crate) delete: Option<Operation>,
    #[prost(message, optional, tag = "6")]
    pub(crate) options: Option<Operation>,
    #[prost(message, optional, tag = "7")]
    pub(crate) head: Option<Operation>,
    #[prost(message, optional, tag = "8")]
    pub(crate) patch: Option<Operation>,
    #[prost(message, repeated, tag = "9")]
    pub(crate) parameters: Vec<ParametersItem>,
    #[prost(message, repeated, tag = "10")]
    pub(crate) vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Operation {
    #[prost(string, repeated, tag = "1")]
    pub(crate) tags: Vec<String>,
    #[prost(string, tag = "2")]
    pub(crate) summary: String,
    #[prost(string, tag = "3")]
    pub(crate) description: String,
    #[prost(string, tag = "5")]
    pub(crate) operation_id: String,
    #[prost(string, repeated, tag = "6")]
    pub(crate) produces: Vec<String>,
    #[prost(string, repeated, tag = "7")]
    pub(crate) consumes: Vec<String>,
    #[prost(message, repeated, tag = "8")]
    pub(crate) parameters: Vec<ParametersItem>,
    #[prost(message, optional, tag = "9")]
    pub(crate) responses: Option<Responses>,
    #[prost(string, repeated, tag = "10")]
    pub(crate) schemes: Vec<String>,
    #[prost(bool, tag = "11")]
    pub(crate) deprecated: bool,
    #[prost(message, repeated, tag = "13")]
    pub(crate) vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct ParametersItem {
    #[prost(oneof = "parameters_item::Oneof", tags = "1, 2")]
    pub(crate) oneof: Option<parameters_item::Oneof>,
}

pub(crate) mod parameters_item {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub(crate) enum Oneof {
        #[prost(message, tag = "1")]
        Parameter(super::Parameter),
        #[prost(message, tag = "2")]
        JsonReference(super::JsonReference),
    }
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct JsonReference {
    #[prost(string, tag = "1")]
    pub(crate) r#ref: String,
    #[prost(string, tag = "2")]
    pub(crate) description: String,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Parameter {
    #[prost(oneof = "parameter::Oneof", tags = "1, 2")]
    pub(crate) oneof: Option<parameter::Oneof>,
}

pub(crate) mod parameter {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub(crate) enum Oneof {
        #[prost(message, tag = "1")]
        BodyParameter(super::BodyParameter),
        #[prost(message, tag = "2")]
        NonBodyParameter(super::NonBodyParameter),
    }
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct BodyParameter {
    #[prost(string, tag = "1")]
    pub(crate) description: String,
    #[prost(string, tag = "2")]
    pub(crate) name: String,
    #[prost(string, tag = "3")]
    pub(crate) r#in: String,
    #[prost(bool, tag = "4")]
    pub(crate) required: bool,
    #[prost(message, optional, boxed, tag = "5")]
    pub(crate) schema: Option<Box<Schema>>,
    #[prost(message, repeated, tag = "6")]
    pub(crate) vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct NonBodyParameter {
    #[prost(oneof = "non_body_parameter::Oneof", tags = "1, 2, 3, 4")]
    pub(crate) oneof: Option<non_body_parameter::Oneof>,
}

pub(crate) mod non_body_parameter {
    /// Header and path sub-schemas share one field layout, as do query and formData.
    /// The variant names are the gnostic oneof's field names.
    #[allow(clippy::enum_variant_names)]
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub(crate) enum Oneof {
        #[prost(message, tag = "1")]
        HeaderParameterSubSchema(Box<super::PathLayoutParameter>),
        #[prost(message, tag = "2")]
        FormDataParameterSubSchema(Box<super::QueryLayoutParameter>),
        #[prost(message, tag = "3")]
        QueryParameterSubSchema(Box<super::QueryLayoutParameter>),
        #[prost(message, tag = "4")]
        PathParameterSubSchema(Box<super::PathLayoutParameter>),
    }
}

/// `QueryParameterSubSchema` / `FormDataParameterSubSchema`.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct QueryLayoutParameter {
    #[prost(bool, tag = "1")]
    pub(crate) required: bool,
    #[prost(string, tag = "2")]
    pub(crate) r#in: String,
    #[prost(string, tag = "3")]
    pub(crate) description: String,
    #[prost(string, tag = "4")]
    pub(crate) name: String,
    #[prost(bool, tag = "5")]
    pub(crate) allow_empty_value: bool,
    #[prost(string, tag = "6")]
    pub(crate) r#type: String,
    #[prost(string, tag = "7")]
    pub(crate) format: String,
    #[prost(message, optional, tag = "8")]
    pub(crate) items: Option<PrimitivesItems>,
    #[prost(string, tag = "9")]
    pub(crate) collection_format: String,
    #[prost(message, optional, tag = "10")]
    pub(crate) default: Option<Any>,
    #[prost(bool, tag = "20")]
    pub(crate) unique_items: bool,
    #[prost(message, repeated, tag = "21")]
    pub(crate) r#enum: Vec<Any>,
    #[prost(message, repeated, tag = "23")]
    pub(crate) vendor_extension: Vec<NamedAny>,
}

/// `PathParameterSubSchema` / `HeaderParameterSubSchema`.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct PathLayoutParameter {
    #[prost(bool, tag = "1")]
    pub(crate) required: bool,
    #[prost(string, tag = "2")]
    pub(crate) r#in: String,
    #[prost(string, tag = "3")]
    pub(crate) description: String,
    #[prost(string, tag = "4")]
    pub(crate) name: String,
    #[prost(string, tag = "5")]
    pub(crate) r#type: String,
    #[prost(string, tag = "6")]
    pub(crate) format: String,
    #[prost(message, optional, tag = "7")]
    pub(crate) items: Option<PrimitivesItems>,
    #[prost(string, tag = "8")]
    pub(crate) collection_format: String,
    #[prost(message, optional, tag = "9")]
    pub(crate) default: Option<Any>,
    #[prost(bool, tag = "19")]
    pub(crate) unique_items: bool,
    #[prost(message, repeated, tag = "20")]
    pub(crate) r#enum: Vec<Any>,
    #[prost(message, repeated, tag = "22")]
    pub(crate) vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct PrimitivesItems {
    #[prost(string, tag = "1")]
    pub(crate) r#type: String,
    #[prost(string, tag = "2")]
    pub(crate) format: String,
    #[prost(message, optional, boxed, tag = "3")]
    pub(crate) items: Option<Box<PrimitivesItems>>,
    #[prost(string, tag = "4")]
    pub(crate) collection_format: String,
    #[prost(message, optional, tag = "5")]
    pub(crate) default: Option<Any>,
    #[prost(bool, tag = "15")]
    pub(crate) unique_items: bool,
    #[prost(message, repeated, tag = "16")]
    pub(crate) r#enum: Vec<Any>,
    #[prost(message, repeated, tag = "18")]
    pub(crate) vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Responses {
    #[prost(message, repeated, tag = "1")]
    pub(crate) response_code: Vec<NamedResponseValue>,
    #[prost(message, repeated, tag = "2")]
    pub(crate) vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct NamedResponseValue {
    #[prost(string, tag = "1")]
    pub(crate) name: String,
    #[prost(message, optional, tag = "2")]
    pub(crate) value: Option<ResponseValue>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct ResponseValue {
    #[prost(oneof = "response_value::Oneof", tags = "1, 2")]
    pub(crate) oneof: Option<response_value::Oneof>,
}

pub(crate) mod response_value {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub(crate) enum Oneof {
        #[prost(message, tag = "1")]
        Response(super::Response),
        #[prost(message, tag = "2")]
        JsonReference(super::JsonReference),
    }
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Response {
    #[prost(string, tag = "1")]
    pub(crate) description: String,
    #[prost(message, optional, tag = "2")]
    pub(crate) schema: Option<SchemaItem>,
    #[prost(message, repeated, tag = "5")]
    pub(crate) vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct SchemaItem {
    #[prost(oneof = "schema_item::Oneof", tags = "1")]
    pub(crate) oneof: Option<schema_item::Oneof>,
}

pub(crate) mod schema_item {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub(crate) enum Oneof {
        #[prost(message, tag = "1")]
        Schema(Box<super::Schema>),
    }
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Definitions {
    #[prost(message, repeated, tag = "1")]
    pub(crate) additional_properties: Vec<NamedSchema>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Properties {
    #[prost(message, repeated, tag = "1")]
    pub(crate) additional_properties: Vec<NamedSchema>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct NamedSchema {
    #[prost(string, tag = "1")]
    pub(crate) name: String,
    #[prost(message, optional, tag = "2")]
    pub(crate) value: Option<Schema>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct ParameterDefinitions {
    #[prost(message, repeated, tag = "1")]
    pub(crate) additional_properties: Vec<NamedParameter>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct NamedParameter {
    #[prost(string, tag = "1")]
    pub(crate) name: String,
    #[prost(message, optional, tag = "2")]
    pub(crate) value: Option<Parameter>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct SecurityDefinitions {
    #[prost(message, repeated, tag = "1")]
    pub(crate) additional_properties: Vec<NamedSecurityDefinitionsItem>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct NamedSecurityDefinitionsItem {
    #[prost(string, tag = "1")]
    pub(crate) name: String,
    #[prost(message, optional, tag = "2")]
    pub(crate) value: Option<SecurityDefinitionsItem>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct SecurityDefinitionsItem {
    #[prost(oneof = "security_definitions_item::Oneof", tags = "2")]
    pub(crate) oneof: Option<security_definitions_item::Oneof>,
}

pub(crate) mod security_definitions_item {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub(crate) enum Oneof {
        #[prost(message, tag = "2")]
        ApiKeySecurity(super::ApiKeySecurity),
    }
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct ApiKeySecurity {
    #[prost(string, tag = "1")]
    pub(crate) r#type: String,
    #[prost(string, tag = "2")]
    pub(crate) name: String,
    #[prost(string, tag = "3")]
    pub(crate) r#in: String,
    #[prost(string, tag = "4")]
    pub(crate) description: String,
    #[prost(message, repeated, tag = "5")]
    pub(crate) vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct SecurityRequirement {
    #[prost(message, repeated, tag = "1")]
    pub(crate) additional_properties: Vec<NamedStringArray>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct NamedStringArray {
    #[prost(string, tag = "1")]
    pub(crate) name: String,
    #[prost(message, optional, tag = "2")]
    pub(crate) value: Option<StringArray>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct StringArray {
    #[prost(string, repeated, tag = "1")]
    pub(crate) value: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct TypeItem {
    #[prost(string, repeated, tag = "1")]
    pub(crate) value: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct ItemsItem {
    #[prost(message, repeated, tag = "1")]
    pub(crate) schema: Vec<Schema>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct AdditionalPropertiesItem {
    #[prost(oneof = "additional_properties_item::Oneof", tags = "1, 2")]
    pub(crate) oneof: Option<additional_properties_item::Oneof>,
}

pub(crate) mod additional_properties_item {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub(crate) enum Oneof {
        #[prost(message, tag = "1")]
        Schema(Box<super::Schema>),
        #[prost(bool, tag = "2")]
        Boolean(bool),
    }
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct ExternalDocs {
    #[prost(string, tag = "1")]
    pub(crate) description: String,
    #[prost(string, tag = "2")]
    pub(crate) url: String,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Schema {
    #[prost(string, tag = "1")]
    pub(crate) r#ref: String,
    #[prost(string, tag = "2")]
    pub(crate) format: String,
    #[prost(string, tag = "3")]
    pub(crate) title: String,
    #[prost(string, tag = "4")]
    pub(crate) description: String,
    #[prost(message, optional, tag = "5")]
    pub(crate) default: Option<Any>,
    #[prost(double, tag = "6")]
    pub(crate) multiple_of: f64,
    #[prost(double, tag = "7")]
    pub(crate) maximum: f64,
    #[prost(bool, tag = "8")]
    pub(crate) exclusive_maximum: bool,
    #[prost(double, tag = "9")]
    pub(crate) minimum: f64,
    #[prost(bool, tag = "10")]
    pub(crate) exclusive_minimum: bool,
    #[prost(int64, tag = "11")]
    pub(crate) max_length: i64,
    #[prost(int64, tag = "12")]
    pub(crate) min_length: i64,
    #[prost(string, tag = "13")]
    pub(crate) pattern: String,
    #[prost(int64, tag = "14")]
    pub(crate) max_items: i64,
    #[prost(int64, tag = "15")]
    pub(crate) min_items: i64,
    #[prost(bool, tag = "16")]
    pub(crate) unique_items: bool,
    #[prost(int64, tag = "17")]
    pub(crate) max_properties: i64,
    #[prost(int64, tag = "18")]
    pub(crate) min_properties: i64,
    #[prost(string, repeated, tag = "19")]
    pub(crate) required: Vec<String>,
    #[prost(message, repeated, tag = "20")]
    pub(crate) r#enum: Vec<Any>,
    #[prost(message, optional, boxed, tag = "21")]
    pub(crate) additional_properties: Option<Box<AdditionalPropertiesItem>>,
    #[prost(message, optional, tag = "22")]
    pub(crate) r#type: Option<TypeItem>,
    #[prost(message, optional, tag = "23")]
    pub(crate) items: Option<ItemsItem>,
    #[prost(message, repeated, tag = "24")]
    pub(crate) all_of: Vec<Schema>,
    #[prost(message, optional, tag = "25")]
    pub(crate) properties: Option<Properties>,
    #[prost(string, tag = "26")]
    pub(crate) discriminator: String,
    #[prost(bool, tag = "27")]
    pub(crate) read_only: bool,
    #[prost(message, optional, tag = "29")]
    pub(crate) external_docs: Option<ExternalDocs>,
    #[prost(message, optional, tag = "30")]
    pub(crate) example: Option<Any>,
    #[prost(message, repeated, tag = "31")]
    pub(crate) vendor_extension: Vec<NamedAny>,
}

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
pub(crate) fn any(v: &Value) -> Any {
    Any {
        yaml: format!("{}\n", serde_json::to_string(v).unwrap_or_default()),
    }
}

fn opt_any(m: &Map<String, Value>, k: &str) -> Option<Any> {
    m.get(k).map(any)
}

fn anys(m: &Map<String, Value>, k: &str) -> Vec<Any> {
    m.get(k)
        .and_then(Value::as_array)
        .map(|a| a.iter().map(any).collect())
        .unwrap_or_default()
}

fn vendor(m: &Map<String, Value>) -> Vec<NamedAny> {
    m.iter()
        .filter(|(k, _)| k.starts_with("x-"))
        .map(|(k, v)| NamedAny {
            name: k.clone(),
            value: Some(any(v)),
        })
        .collect()
}

fn schema(v: &Value, depth: usize) -> Schema {
    let Some(m) = v.as_object() else {
        return Schema::default();
    };
    if depth > MAX_DEPTH * 2 {
        return Schema::default();
    }
    let additional_properties = match m.get("additionalProperties") {
        Some(Value::Bool(x)) => Some(Box::new(AdditionalPropertiesItem {
            oneof: Some(additional_properties_item::Oneof::Boolean(*x)),
        })),
        Some(x @ Value::Object(_)) => Some(Box::new(AdditionalPropertiesItem {
            oneof: Some(additional_properties_item::Oneof::Schema(Box::new(schema(
                x,
                depth + 1,
            )))),
        })),
        _ => None,
    };
    let items = match m.get("items") {
        Some(x @ Value::Object(_)) => Some(ItemsItem {
            schema: vec![schema(x, depth + 1)],
        }),
        Some(Value::Array(a)) => Some(ItemsItem {
            schema: a.iter().map(|x| schema(x, depth + 1)).collect(),
        }),
        _ => None,
    };
    let properties = m
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| Properties {
            additional_properties: p
                .iter()
                .map(|(k, x)| NamedSchema {
                    name: k.clone(),
                    value: Some(schema(x, depth + 1)),
                })
                .collect(),
        });
    let ty = strings(m, "type");
    Schema {
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
        r#type: (!ty.is_empty()).then_some(TypeItem { value: ty }),
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
            .map(|e| ExternalDocs {
                description: s(e, "description"),
                url: s(e, "url"),
            }),
        example: opt_any(m, "example"),
        vendor_extension: vendor(m),
    }
}

fn primitives_items(v: Option<&Value>, depth: usize) -> Option<PrimitivesItems> {
    let m = v?.as_object()?;
    if depth > 8 {
        return None;
    }
    Some(PrimitivesItems {
        r#type: s(m, "type"),
        format: s(m, "format"),
        items: primitives_items(m.get("items"), depth + 1).map(Box::new),
        collection_format: s(m, "collectionFormat"),
        default: opt_any(m, "default"),
        unique_items: b(m, "uniqueItems"),
        r#enum: anys(m, "enum"),
        vendor_extension: vendor(m),
    })
}

fn parameter(m: &Map<String, Value>) -> Parameter {
    let inn = s(m, "in");
    let query_layout = || QueryLayoutParameter {
        required: b(m, "required"),
        r#in: inn.clone(),
        description: s(m, "description"),
        name: s(m, "name"),
        allow_empty_value: b(m, "allowEmptyValue"),
        r#type: s(m, "type"),
        format: s(m, "format"),
        items: primitives_items(m.get("items"), 0),
        collection_format: s(m, "collectionFormat"),
        default: opt_any(m, "default"),
        unique_items: b(m, "uniqueItems"),
        r#enum: anys(m, "enum"),
        vendor_extension: vendor(m),
    };
    let path_layout = || PathLayoutParameter {
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
    };
    let non_body = |o| parameter::Oneof::NonBodyParameter(NonBodyParameter { oneof: Some(o) });
    let oneof = match inn.as_str() {
        "body" => parameter::Oneof::BodyParameter(BodyParameter {
            description: s(m, "description"),
            name: s(m, "name"),
            r#in: inn.clone(),
            required: b(m, "required"),
            schema: m.get("schema").map(|x| Box::new(schema(x, 0))),
            vendor_extension: vendor(m),
        }),
        "path" => non_body(non_body_parameter::Oneof::PathParameterSubSchema(Box::new(
            path_layout(),
        ))),
        "header" => non_body(non_body_parameter::Oneof::HeaderParameterSubSchema(
            Box::new(path_layout()),
        )),
        "formData" => non_body(non_body_parameter::Oneof::FormDataParameterSubSchema(
            Box::new(query_layout()),
        )),
        _ => non_body(non_body_parameter::Oneof::QueryParameterSubSchema(
            Box::new(query_layout()),
        )),
    };
    Parameter { oneof: Some(oneof) }
}

fn parameters_items(v: Option<&Value>) -> Vec<ParametersItem> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_object)
                .map(|p| {
                    let oneof = match p.get("$ref").and_then(Value::as_str) {
                        Some(r) => parameters_item::Oneof::JsonReference(JsonReference {
                            r#ref: r.to_string(),
                            description: s(p, "description"),
                        }),
                        None => parameters_item::Oneof::Parameter(parameter(p)),
                    };
                    ParametersItem { oneof: Some(oneof) }
                })
                .collect()
        })
        .unwrap_or_default()
}

fn responses(v: Option<&Value>) -> Option<Responses> {
    let m = v?.as_object()?;
    Some(Responses {
        response_code: m
            .iter()
            .filter(|(k, _)| !k.starts_with("x-"))
            .filter_map(|(code, r)| {
                let r = r.as_object()?;
                let oneof = match r.get("$ref").and_then(Value::as_str) {
                    Some(rf) => response_value::Oneof::JsonReference(JsonReference {
                        r#ref: rf.to_string(),
                        description: s(r, "description"),
                    }),
                    None => response_value::Oneof::Response(Response {
                        description: s(r, "description"),
                        schema: r.get("schema").map(|x| SchemaItem {
                            oneof: Some(schema_item::Oneof::Schema(Box::new(schema(x, 0)))),
                        }),
                        vendor_extension: vendor(r),
                    }),
                };
                Some(NamedResponseValue {
                    name: code.clone(),
                    value: Some(ResponseValue { oneof: Some(oneof) }),
                })
            })
            .collect(),
        vendor_extension: vendor(m),
    })
}

fn operation(v: Option<&Value>) -> Option<Operation> {
    let m = v?.as_object()?;
    Some(Operation {
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
    })
}

fn path_item(m: &Map<String, Value>) -> PathItem {
    PathItem {
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
pub(crate) fn document(doc: &Value) -> Document {
    let empty = Map::new();
    let m = doc.as_object().unwrap_or(&empty);
    let info = m.get("info").and_then(Value::as_object).map(|i| Info {
        title: s(i, "title"),
        version: s(i, "version"),
        description: s(i, "description"),
        vendor_extension: vendor(i),
    });
    let paths = m.get("paths").and_then(Value::as_object).map(|p| Paths {
        vendor_extension: vendor(p),
        path: p
            .iter()
            .filter(|(k, _)| !k.starts_with("x-"))
            .filter_map(|(k, v)| {
                Some(NamedPathItem {
                    name: k.clone(),
                    value: Some(path_item(v.as_object()?)),
                })
            })
            .collect(),
    });
    let definitions = m
        .get("definitions")
        .and_then(Value::as_object)
        .map(|d| Definitions {
            additional_properties: d
                .iter()
                .map(|(k, v)| NamedSchema {
                    name: k.clone(),
                    value: Some(schema(v, 0)),
                })
                .collect(),
        });
    let parameters = m
        .get("parameters")
        .and_then(Value::as_object)
        .map(|d| ParameterDefinitions {
            additional_properties: d
                .iter()
                .filter_map(|(k, v)| {
                    Some(NamedParameter {
                        name: k.clone(),
                        value: Some(parameter(v.as_object()?)),
                    })
                })
                .collect(),
        });
    let security_definitions = m
        .get("securityDefinitions")
        .and_then(Value::as_object)
        .map(|d| SecurityDefinitions {
            additional_properties: d
                .iter()
                .filter_map(|(k, v)| {
                    let v = v.as_object()?;
                    (s(v, "type") == "apiKey").then(|| NamedSecurityDefinitionsItem {
                        name: k.clone(),
                        value: Some(SecurityDefinitionsItem {
                            oneof: Some(security_definitions_item::Oneof::ApiKeySecurity(
                                ApiKeySecurity {
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
                .map(|req| SecurityRequirement {
                    additional_properties: req
                        .iter()
                        .map(|(k, v)| NamedStringArray {
                            name: k.clone(),
                            value: Some(StringArray {
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
    Document {
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
    }
}

/// Serialises [`document`] to protobuf bytes.
pub(crate) fn encode_document(doc: &Value) -> Vec<u8> {
    document(doc).encode_to_vec()
}
