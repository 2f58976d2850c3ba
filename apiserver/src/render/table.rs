//! Server-side printing: custom resources rendered as a `meta.k8s.io` `Table`.
//!
//! Where it sits: when a GET/LIST/WATCH asks for `Accept: application/json;as=Table;...`, the
//! gateway renders the objects it got from storage with the [`TableConvertor`] built once per
//! CRD version from its `additionalPrinterColumns` (kept in the CRD cache, rebuilt when the CRD
//! generation changes), then serializes the returned JSON value.
//!
//! Ported semantics:
//! - columns and cells: apiextensions-apiserver
//!   pkg/registry/customresource/tableconvertor/tableconvertor.go (`New`, `ConvertToTable`,
//!   `cellForJSONValue`) and the default `Age` column of pkg/apiserver/customresource_handler.go
//!   (`serveDefaultColumnsIfEmpty`);
//! - the `Age`/date cells: k8s.io/apimachinery/pkg/api/meta/table/table.go
//!   (`ConvertToHumanReadableDateType`) and k8s.io/apimachinery/pkg/util/duration/duration.go
//!   (`HumanDuration`);
//! - string cells: k8s.io/client-go/util/jsonpath `PrintResults` (scalars as Go's `fmt.Print`,
//!   maps and lists as compact `encoding/json`);
//! - `includeObject` and the row objects: apiserver pkg/endpoints/handlers/response.go
//!   (`asTable`) and apiserver pkg/apis/meta/internalversion/validation (`ValidateTableOptions`);
//! - Table watches: only the first event carries `columnDefinitions` (later ones render with
//!   `noHeaders`, i.e. `"columnDefinitions": null`).
//!
//! Upstream evaluates column paths with the Kubernetes JSONPath dialect (`{.spec.replicas}`,
//! `[?(@.type=="Ready")]`); we translate those paths once to RFC 9535 and evaluate them with
//! `serde_json_path`. Like upstream, only the first result of a path is used.

use chrono::{DateTime, Datelike, Duration, Timelike, Utc};
use crdplane_core::FieldError;
use crdplane_core::field::{go_float, go_quote};
use serde_json::{Map, Number, Value};
use serde_json_path::JsonPath;

/// `metav1.ObjectMeta` swagger description of `name` (the `Name` column).
pub const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";

/// `metav1.ObjectMeta` swagger description of `creationTimestamp` (the default `Age` column).
pub const CREATION_TIMESTAMP_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// `apiVersion` of a `meta.k8s.io/v1` Table (and of its PartialObjectMetadata rows).
pub const TABLE_API_VERSION_V1: &str = "meta.k8s.io/v1";
/// `apiVersion` of a `meta.k8s.io/v1beta1` Table.
pub const TABLE_API_VERSION_V1BETA1: &str = "meta.k8s.io/v1beta1";

/// Longest printer-column JSON path we compile; CRD objects are size-bounded already, this
/// keeps the translation and the parser cheap regardless.
const MAX_COLUMN_PATH_BYTES: usize = 4096;

/// One `columnDefinitions[]` entry (`metav1.TableColumnDefinition`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnDefinition {
    /// Column header (the printer column's `name`).
    pub name: String,
    /// OpenAPI type of the column (`string`, `integer`, `date`, ...), JSON `type`.
    pub type_: String,
    /// OpenAPI format hint of the column (e.g. `name`), may be empty.
    pub format: String,
    /// Human-readable description of the column.
    pub description: String,
    /// 0 = shown by default; higher values only with `-o wide`.
    pub priority: i32,
}

impl ColumnDefinition {
    fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("name".into(), Value::String(self.name.clone()));
        m.insert("type".into(), Value::String(self.type_.clone()));
        m.insert("format".into(), Value::String(self.format.clone()));
        m.insert(
            "description".into(),
            Value::String(self.description.clone()),
        );
        m.insert("priority".into(), Value::from(self.priority));
        Value::Object(m)
    }
}

/// `?includeObject=` of a Table request (upstream `metav1.IncludeObjectPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    /// `row.object` is `null`.
    None,
    /// `row.object` is a `PartialObjectMetadata` (the default).
    #[default]
    Metadata,
    /// `row.object` is the whole object.
    Object,
}

impl IncludeObject {
    /// Parses the query value; the error is upstream's 400 BadRequest message.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "" | "Metadata" => Ok(Self::Metadata),
            "None" => Ok(Self::None),
            "Object" => Ok(Self::Object),
            other => Err(FieldError::invalid(
                "includeObject",
                Value::String(other.to_string()),
                "must be 'Metadata', 'Object', 'None', or empty",
            )
            .to_string()),
        }
    }
}

/// The list metadata a Table carries: k8s-openapi's `metav1.ListMeta` (unset fields are
/// omitted).
pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;

/// How to render a Table.
#[derive(Debug, Clone)]
pub struct RenderOptions<'a> {
    /// Whether each row carries the object, its metadata or nothing (`includeObject`).
    pub include_object: IncludeObject,
    /// False for every Table watch event after the first (`noHeaders`).
    pub with_columns: bool,
    /// `meta.k8s.io/v1` or `meta.k8s.io/v1beta1`, as negotiated from the Accept header.
    pub api_version: &'a str,
    /// The clock the `date` cells are relative to.
    pub now: DateTime<Utc>,
}

/// A compiled additional printer column.
#[derive(Debug)]
struct Column {
    type_: String,
    path: JsonPath,
}

/// Table rendering for one CRD version; build once, use for every request.
#[derive(Debug)]
pub struct TableConvertor {
    headers: Vec<ColumnDefinition>,
    headers_json: Value,
    columns: Vec<Column>,
    /// A built-in type's printer, which makes every cell (instead of `columns`).
    printer: Option<Printer>,
    warning: Option<String>,
}

/// The cells of one object of a built-in type, as upstream's printers make them
/// (k8s.io/kubernetes pkg/printers/internalversion/printers.go, run server-side with
/// `Wide: true`): one per column definition, in order.
pub type Printer = fn(&Value, DateTime<Utc>) -> Vec<Value>;

impl TableConvertor {
    /// From the version's `additionalPrinterColumns` (a JSON array; absent, `null` or empty
    /// gives the default `Age` column). Like upstream, a column whose JSON path does not parse
    /// ends the column list there, and [`Self::warning`] says why.
    pub fn new(printer_columns: &Value) -> Self {
        let declared = printer_columns
            .as_array()
            .filter(|a| !a.is_empty())
            .cloned()
            .unwrap_or_else(|| {
                vec![serde_json::json!({
                    "name": "Age",
                    "type": "date",
                    "description": CREATION_TIMESTAMP_DESCRIPTION,
                    "jsonPath": ".metadata.creationTimestamp",
                })]
            });
        let mut headers = vec![ColumnDefinition {
            name: "Name".into(),
            type_: "string".into(),
            format: "name".into(),
            description: NAME_DESCRIPTION.into(),
            priority: 0,
        }];
        let mut columns = Vec::new();
        let mut warning = None;
        let str_of =
            |c: &Value, k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        for col in &declared {
            // v1 spells it `jsonPath`; v1beta1 used `JSONPath`.
            let json_path = col
                .get("jsonPath")
                .or_else(|| col.get("JSONPath"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let Some(path) = compile_column_path(&json_path) else {
                warning = Some(format!(
                    "unrecognized column definition {}",
                    go_quote(&json_path)
                ));
                break;
            };
            let description = match str_of(col, "description") {
                d if d.is_empty() => {
                    format!("Custom resource definition column (in JSONPath format): {json_path}")
                }
                d => d,
            };
            let priority = col
                .get("priority")
                .and_then(Value::as_i64)
                .and_then(|p| i32::try_from(p).ok())
                .unwrap_or(0);
            let type_ = str_of(col, "type");
            headers.push(ColumnDefinition {
                name: str_of(col, "name"),
                type_: type_.clone(),
                format: str_of(col, "format"),
                description,
                priority,
            });
            columns.push(Column { type_, path });
        }
        let headers_json = Value::Array(headers.iter().map(ColumnDefinition::to_json).collect());
        Self {
            headers,
            headers_json,
            columns,
            printer: None,
            warning,
        }
    }

    /// The Table of a built-in type: its column definitions and its printer.
    pub fn printed(headers: Vec<ColumnDefinition>, printer: Printer) -> Self {
        let headers_json = Value::Array(headers.iter().map(ColumnDefinition::to_json).collect());
        Self {
            headers,
            headers_json,
            columns: Vec::new(),
            printer: Some(printer),
            warning: None,
        }
    }

    /// k8s.io/apiserver `rest.NewDefaultTableConvertor`, the Table of every resource without
    /// printer columns of its own (CRDs, roles): `Name`, and `Created At`, the creation time
    /// in RFC 3339, UTC (Go's zero time when the object has none).
    pub fn default_convertor() -> &'static TableConvertor {
        static T: std::sync::OnceLock<TableConvertor> = std::sync::OnceLock::new();
        T.get_or_init(|| {
            let column =
                |name: &str, type_: &str, format: &str, description: &str| ColumnDefinition {
                    name: name.into(),
                    type_: type_.into(),
                    format: format.into(),
                    description: description.into(),
                    priority: 0,
                };
            TableConvertor::printed(
                vec![
                    column("Name", "string", "name", NAME_DESCRIPTION),
                    column("Created At", "date", "", CREATION_TIMESTAMP_DESCRIPTION),
                ],
                default_cells,
            )
        })
    }

    /// The column definitions, `Name` first.
    pub fn column_definitions(&self) -> &[ColumnDefinition] {
        &self.headers
    }

    /// Why the column list was cut short, if it was (upstream logs this and serves the rest).
    pub fn warning(&self) -> Option<&str> {
        self.warning.as_deref()
    }

    /// A `meta.k8s.io/v1` Table of a list, with column definitions.
    pub fn to_table(
        &self,
        objects: &[Value],
        include_object: IncludeObject,
        list_meta: &ListMeta,
        now: DateTime<Utc>,
    ) -> Value {
        self.to_table_with(objects, include_object, list_meta, now, true)
    }

    /// As [`Self::to_table`]; `with_columns: false` renders `"columnDefinitions": null`
    /// (Table watch events after the first).
    pub fn to_table_with(
        &self,
        objects: &[Value],
        include_object: IncludeObject,
        list_meta: &ListMeta,
        now: DateTime<Utc>,
        with_columns: bool,
    ) -> Value {
        self.render(
            objects,
            list_meta,
            &RenderOptions {
                include_object,
                with_columns,
                api_version: TABLE_API_VERSION_V1,
                now,
            },
        )
    }

    /// A Table of one object (GET of a single object, or one watch event): one row, and the
    /// object's `resourceVersion` as the Table's.
    pub fn object_to_table(&self, obj: &Value, opts: &RenderOptions<'_>) -> Value {
        let meta = ListMeta {
            resource_version: obj
                .get("metadata")
                .and_then(|m| m.get("resourceVersion"))
                .and_then(Value::as_str)
                .filter(|rv| !rv.is_empty())
                .map(str::to_string),
            ..ListMeta::default()
        };
        self.render(std::slice::from_ref(obj), &meta, opts)
    }

    /// The general form: any Table version, include policy and header choice.
    pub fn render(
        &self,
        objects: &[Value],
        list_meta: &ListMeta,
        opts: &RenderOptions<'_>,
    ) -> Value {
        let rows: Vec<Value> = objects.iter().map(|o| self.row(o, opts)).collect();
        let mut m = Map::new();
        m.insert("kind".into(), Value::String("Table".into()));
        m.insert(
            "apiVersion".into(),
            Value::String(opts.api_version.to_string()),
        );
        m.insert(
            "metadata".into(),
            serde_json::to_value(list_meta).expect("ListMeta serializes"),
        );
        m.insert(
            "columnDefinitions".into(),
            if opts.with_columns {
                self.headers_json.clone()
            } else {
                Value::Null
            },
        );
        m.insert("rows".into(), Value::Array(rows));
        Value::Object(m)
    }

    /// One `rows[]` entry: `{"cells": [...], "object": ...}`.
    pub fn row(&self, obj: &Value, opts: &RenderOptions<'_>) -> Value {
        let object = match opts.include_object {
            IncludeObject::None => Value::Null,
            IncludeObject::Metadata => partial_object_metadata(obj, opts.api_version),
            IncludeObject::Object => obj.clone(),
        };
        let mut m = Map::new();
        m.insert("cells".into(), Value::Array(self.cells(obj, opts.now)));
        m.insert("object".into(), object);
        Value::Object(m)
    }

    /// The cells of one object: its name, then one per printer column.
    pub fn cells(&self, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
        if let Some(p) = self.printer {
            return p(obj, now);
        }
        let name = obj
            .get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("");
        let mut cells = Vec::with_capacity(1 + self.columns.len());
        cells.push(Value::String(name.to_string()));
        for col in &self.columns {
            let nodes = col.path.query(obj);
            let cell = match nodes.first() {
                None => Value::Null,
                Some(v) if col.type_ == "string" => Value::String(print_jsonpath_value(v)),
                Some(v) => cell_for_json_value(&col.type_, v, now),
            };
            cells.push(cell);
        }
        cells
    }
}

/// The cells of [`TableConvertor::default_convertor`].
fn default_cells(obj: &Value, _now: DateTime<Utc>) -> Vec<Value> {
    let meta = |k: &str| {
        obj.get("metadata")
            .and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let created = DateTime::parse_from_rfc3339(meta("creationTimestamp"))
        .map(|t| {
            t.with_timezone(&Utc)
                .format("%Y-%m-%dT%H:%M:%SZ")
                .to_string()
        })
        .unwrap_or_else(|_| "0001-01-01T00:00:00Z".into());
    vec![Value::String(meta("name").into()), Value::String(created)]
}

/// Upstream `cellForJSONValue` for the non-string column types.
fn cell_for_json_value(type_: &str, v: &Value, now: DateTime<Utc>) -> Value {
    match (type_, v) {
        // Integers are copied exactly: int64 as upstream, and uint64 beyond int64 too (the
        // integers of this server round-trip exactly, see crdplane_core::decode).
        ("integer", Value::Number(n)) if n.is_i64() || n.is_u64() => Value::Number(n.clone()),
        // float64 → int64 conversion truncates toward zero.
        ("integer", Value::Number(n)) => Value::from(n.as_f64().unwrap_or(0.0) as i64),
        ("number", Value::Number(n)) => float_cell(n.as_f64().unwrap_or(0.0)),
        ("boolean", Value::Bool(b)) => Value::Bool(*b),
        ("date", Value::String(s)) => Value::String(date_cell(s, now)),
        _ => Value::Null,
    }
}

/// A float64 cell as Go's encoding/json writes it: integral values without a fraction.
fn float_cell(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 9.0e18 {
        Value::from(f as i64)
    } else {
        Number::from_f64(f)
            .map(Value::Number)
            .unwrap_or(Value::Null)
    }
}

/// Upstream `metav1.Time.UnmarshalQueryParameter` + `ConvertToHumanReadableDateType`; also
/// the printers' `translateTimestampSince` (`<unknown>` for an absent or zero time).
pub fn date_cell(s: &str, now: DateTime<Utc>) -> String {
    if s.is_empty() || s == "null" {
        return "<unknown>".into();
    }
    match DateTime::parse_from_rfc3339(s) {
        Err(_) => "<invalid>".into(),
        Ok(t) => {
            let t = t.with_timezone(&Utc);
            if is_go_zero_time(&t) {
                "<unknown>".into()
            } else {
                human_duration(now.signed_duration_since(t))
            }
        }
    }
}

/// Go's zero `time.Time` is 0001-01-01T00:00:00Z.
fn is_go_zero_time(t: &DateTime<Utc>) -> bool {
    t.year() == 1
        && t.month() == 1
        && t.day() == 1
        && t.hour() == 0
        && t.minute() == 0
        && t.second() == 0
        && t.nanosecond() == 0
}

/// Upstream `duration.HumanDuration`: a short age with ~2-3 significant figures
/// ("45s", "5m30s", "3h10m", "2d4h", "400d", "2y30d", "10y"); up to 2 seconds in the
/// future reads "0s", further is `"<invalid>"`.
pub fn human_duration(d: Duration) -> String {
    // Go's time.Duration is int64 nanoseconds and time.Since saturates.
    let ns: i64 = d.num_nanoseconds().unwrap_or(if d < Duration::zero() {
        i64::MIN
    } else {
        i64::MAX
    });
    const SECOND: i64 = 1_000_000_000;
    const MINUTE: i64 = 60 * SECOND;
    const HOUR: i64 = 60 * MINUTE;
    let seconds = ns / SECOND;
    if seconds < -1 {
        return "<invalid>".into();
    } else if seconds < 0 {
        return "0s".into();
    } else if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = ns / MINUTE;
    if minutes < 10 {
        let s = (ns / SECOND) % 60;
        if s == 0 {
            return format!("{minutes}m");
        }
        return format!("{minutes}m{s}s");
    } else if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = ns / HOUR;
    if hours < 8 {
        let m = (ns / MINUTE) % 60;
        if m == 0 {
            return format!("{hours}h");
        }
        format!("{hours}h{m}m")
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 24 * 8 {
        let h = hours % 24;
        if h == 0 {
            return format!("{}d", hours / 24);
        }
        format!("{}d{}h", hours / 24, h)
    } else if hours < 24 * 365 * 2 {
        format!("{}d", hours / 24)
    } else if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        if dy == 0 {
            return format!("{}y", hours / 24 / 365);
        }
        format!("{}y{}d", hours / 24 / 365, dy)
    } else {
        format!("{}y", hours / 24 / 365)
    }
}

/// The text k8s JSONPath `PrintResults` writes for one value: scalars as Go's `fmt.Print`,
/// `null` as `<no value>`, maps and lists as compact `encoding/json`.
fn print_jsonpath_value(v: &Value) -> String {
    match v {
        Value::Null => "<no value>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) if n.is_i64() || n.is_u64() => n.to_string(),
        Value::Number(n) => go_float(n.as_f64().unwrap_or(0.0)),
        Value::String(s) => s.clone(),
        Value::Array(_) | Value::Object(_) => {
            let mut out = String::new();
            go_json_into(v, &mut out);
            out
        }
    }
}

pub use crdplane_core::gofmt::go_json;
use crdplane_core::gofmt::go_json_into;

/// `PartialObjectMetadata` of an object (`meta.AsPartialObjectMetadata`): the ObjectMeta fields
/// with Go's JSON omission rules (`creationTimestamp` is always present, `null` when unset).
pub fn partial_object_metadata(obj: &Value, api_version: &str) -> Value {
    let empty = Map::new();
    let meta = obj
        .get("metadata")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let mut m = Map::new();
    let nonempty_str = |k: &str| {
        meta.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(|s| Value::String(s.to_string()))
    };
    for k in [
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
    ] {
        if let Some(v) = nonempty_str(k) {
            m.insert(k.into(), v);
        }
    }
    if let Some(g) = meta
        .get("generation")
        .and_then(Value::as_i64)
        .filter(|g| *g != 0)
    {
        m.insert("generation".into(), Value::from(g));
    }
    m.insert(
        "creationTimestamp".into(),
        meta.get("creationTimestamp")
            .and_then(Value::as_str)
            .and_then(normalize_time)
            .map(Value::String)
            .unwrap_or(Value::Null),
    );
    if let Some(t) = meta
        .get("deletionTimestamp")
        .and_then(Value::as_str)
        .and_then(normalize_time)
    {
        m.insert("deletionTimestamp".into(), Value::String(t));
    }
    if let Some(g) = meta
        .get("deletionGracePeriodSeconds")
        .and_then(Value::as_i64)
    {
        m.insert("deletionGracePeriodSeconds".into(), Value::from(g));
    }
    for k in ["labels", "annotations"] {
        if let Some(map) = meta
            .get(k)
            .and_then(Value::as_object)
            .filter(|map| !map.is_empty() && map.values().all(Value::is_string))
        {
            m.insert(k.into(), Value::Object(map.clone()));
        }
    }
    for k in ["ownerReferences", "finalizers", "managedFields"] {
        if let Some(a) = meta
            .get(k)
            .and_then(Value::as_array)
            .filter(|a| !a.is_empty())
        {
            m.insert(k.into(), Value::Array(a.clone()));
        }
    }
    let mut out = Map::new();
    out.insert("kind".into(), Value::String("PartialObjectMetadata".into()));
    out.insert("apiVersion".into(), Value::String(api_version.to_string()));
    out.insert("metadata".into(), Value::Object(m));
    Value::Object(out)
}

/// A `metav1.Time` round trip: RFC 3339 in, second-precision UTC out; zero/invalid → None.
fn normalize_time(s: &str) -> Option<String> {
    let t = DateTime::parse_from_rfc3339(s).ok()?.with_timezone(&Utc);
    if is_go_zero_time(&t) {
        return None;
    }
    Some(t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
}

/// Compiles a CRD printer-column path (k8s JSONPath without braces, e.g. `.spec.replicas` or
/// `.status.conditions[?(@.type=="Ready")].status`) into an RFC 9535 query.
fn compile_column_path(path: &str) -> Option<JsonPath> {
    if path.len() > MAX_COLUMN_PATH_BYTES {
        return None;
    }
    let rfc = k8s_jsonpath_to_rfc9535(path)?;
    JsonPath::parse(&rfc).ok()
}

/// Terminators of a field name in the k8s JSONPath parser.
fn is_name_terminator(c: char) -> bool {
    c.is_whitespace() || matches!(c, '.' | ',' | '[' | ']' | '$' | '@' | '{' | '}' | '(' | ')')
}

/// Translates the k8s JSONPath dialect (as used inside `{...}`) to RFC 9535: `.name` segments
/// (with `\.` escapes) become `['name']`, `..` stays a descendant segment, and bracket
/// selectors (indexes, slices, unions, quoted names, `?(...)` filters) are kept as written.
pub fn k8s_jsonpath_to_rfc9535(path: &str) -> Option<String> {
    let chars: Vec<char> = path.trim().chars().collect();
    if chars.is_empty() {
        return None;
    }
    let mut out = String::from("$");
    let mut i = usize::from(chars[0] == '$');
    while i < chars.len() {
        match chars[i] {
            '.' => {
                let descendant = chars.get(i + 1) == Some(&'.');
                i += if descendant { 2 } else { 1 };
                if descendant {
                    out.push_str("..");
                }
                match chars.get(i) {
                    None if !descendant => break,
                    None => return None,
                    // `.[0]` is the same as `[0]`; `..[0]` is a descendant bracket segment.
                    Some('[') => continue,
                    Some(_) => {}
                }
                let (name, next) = read_name(&chars, i);
                if name.is_empty() {
                    return None;
                }
                i = next;
                if name == "*" {
                    out.push_str(if descendant { "*" } else { "[*]" });
                } else {
                    out.push('[');
                    push_quoted_name(&name, &mut out);
                    out.push(']');
                }
            }
            '[' => {
                let end = bracket_end(&chars, i)?;
                out.extend(&chars[i..=end]);
                i = end + 1;
            }
            _ => return None,
        }
    }
    Some(out)
}

/// Reads a field name from `i`: up to an unescaped terminator; `\x` stands for `x`.
fn read_name(chars: &[char], mut i: usize) -> (String, usize) {
    let mut name = String::new();
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' {
            if let Some(&n) = chars.get(i + 1) {
                name.push(n);
                i += 2;
                continue;
            }
            i += 1;
            continue;
        }
        if is_name_terminator(c) {
            break;
        }
        name.push(c);
        i += 1;
    }
    (name, i)
}

/// An RFC 9535 single-quoted name selector.
fn push_quoted_name(name: &str, out: &mut String) {
    out.push('\'');
    for c in name.chars() {
        match c {
            '\'' => out.push_str("\\'"),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('\'');
}

/// The index of the `]` closing the `[` at `start`, skipping quoted strings and nested
/// brackets/parentheses.
fn bracket_end(chars: &[char], start: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut i = start;
    while i < chars.len() {
        let c = chars[i];
        if let Some(q) = quote {
            if c == '\\' {
                i += 2;
                continue;
            }
            if c == q {
                quote = None;
            }
        } else {
            match c {
                '\'' | '"' => quote = Some(c),
                '[' | '(' => depth += 1,
                ']' | ')' => {
                    depth = depth.checked_sub(1)?;
                    if depth == 0 {
                        return (c == ']').then_some(i);
                    }
                }
                _ => {}
            }
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_convertor_prints_name_and_creation_time_in_utc() {
        let t = TableConvertor::default_convertor();
        let names: Vec<&str> = t
            .column_definitions()
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(names, ["Name", "Created At"]);
        assert_eq!(t.column_definitions()[1].type_, "date");
        let now = Utc::now();
        let obj = serde_json::json!({"metadata": {"name": "a.b.c",
            "creationTimestamp": "2026-11-28T09:30:00+02:00"}});
        assert_eq!(t.cells(&obj, now), ["a.b.c", "2026-11-28T07:30:00Z"]);
        // No creation time: Go's zero time, as upstream formats it.
        let obj = serde_json::json!({"metadata": {"name": "x"}});
        assert_eq!(t.cells(&obj, now), ["x", "0001-01-01T00:00:00Z"]);
    }
    use serde_json::json;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2024-06-01T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    fn crontab(name: &str, created: &str) -> Value {
        json!({
            "apiVersion": "stable.example.com/v1",
            "kind": "CronTab",
            "metadata": {
                "name": name,
                "namespace": "default",
                "uid": "u-1",
                "resourceVersion": "7",
                "generation": 1,
                "creationTimestamp": created,
                "labels": {"app": "x"},
            },
            "spec": {"cronSpec": "* * * * */5", "image": "my-awesome-cron-image", "replicas": 1}
        })
    }

    fn spec_columns() -> Value {
        json!([
            {"name": "Spec", "type": "string", "description": "The cron spec defining the interval a CronJob is run", "jsonPath": ".spec.cronSpec"},
            {"name": "Replicas", "type": "integer", "description": "The number of jobs launched by the CronJob", "jsonPath": ".spec.replicas"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
        ])
    }

    #[test]
    fn integer_cells_are_exact() {
        let cases: &[(&str, &str, &str)] = &[
            ("integer", "9007199254740993", "9007199254740993"),
            ("integer", "9223372036854775807", "9223372036854775807"),
            ("integer", "-9223372036854775808", "-9223372036854775808"),
            ("integer", "18446744073709551615", "18446744073709551615"),
            ("integer", "2.9", "2"),
            ("integer", "-2.9", "-2"),
            ("number", "9007199254740993", "9007199254740992"),
            ("number", "2.5", "2.5"),
        ];
        for (ty, input, want) in cases {
            let v: Value = serde_json::from_str(input).unwrap();
            let got = cell_for_json_value(ty, &v, now());
            assert_eq!(serde_json::to_string(&got).unwrap(), *want, "{ty} {input}");
        }
        for (input, want) in [
            ("18446744073709551615", "18446744073709551615"),
            ("9007199254740993", "9007199254740993"),
            ("[18446744073709551615]", "[18446744073709551615]"),
        ] {
            let v: Value = serde_json::from_str(input).unwrap();
            assert_eq!(print_jsonpath_value(&v), want);
        }
    }

    #[test]
    fn default_age_column() {
        for cols in [json!([]), Value::Null, json!({})] {
            let t = TableConvertor::new(&cols);
            let table = t.to_table(
                &[crontab("a", "2024-06-01T11:59:53Z")],
                IncludeObject::None,
                &ListMeta::default(),
                now(),
            );
            assert_eq!(
                table["columnDefinitions"],
                json!([
                    {"name": "Name", "type": "string", "format": "name", "description": NAME_DESCRIPTION, "priority": 0},
                    {"name": "Age", "type": "date", "format": "", "description": CREATION_TIMESTAMP_DESCRIPTION, "priority": 0}
                ])
            );
            assert_eq!(
                table["rows"],
                json!([{"cells": ["a", "7s"], "object": null}])
            );
            assert!(t.warning().is_none());
        }
    }

    #[test]
    fn spec_printer_columns_example() {
        let t = TableConvertor::new(&spec_columns());
        let table = t.to_table(
            &[crontab("my-new-cron-object", "2024-06-01T11:59:53Z")],
            IncludeObject::Metadata,
            &ListMeta {
                resource_version: Some("42".into()),
                ..ListMeta::default()
            },
            now(),
        );
        assert_eq!(
            table,
            json!({
                "kind": "Table",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": {"resourceVersion": "42"},
                "columnDefinitions": [
                    {"name": "Name", "type": "string", "format": "name", "description": NAME_DESCRIPTION, "priority": 0},
                    {"name": "Spec", "type": "string", "format": "", "description": "The cron spec defining the interval a CronJob is run", "priority": 0},
                    {"name": "Replicas", "type": "integer", "format": "", "description": "The number of jobs launched by the CronJob", "priority": 0},
                    {"name": "Age", "type": "date", "format": "", "description": "Custom resource definition column (in JSONPath format): .metadata.creationTimestamp", "priority": 0}
                ],
                "rows": [{
                    "cells": ["my-new-cron-object", "* * * * */5", 1, "7s"],
                    "object": {
                        "kind": "PartialObjectMetadata",
                        "apiVersion": "meta.k8s.io/v1",
                        "metadata": {
                            "name": "my-new-cron-object",
                            "namespace": "default",
                            "uid": "u-1",
                            "resourceVersion": "7",
                            "generation": 1,
                            "creationTimestamp": "2024-06-01T11:59:53Z",
                            "labels": {"app": "x"}
                        }
                    }
                }]
            })
        );
    }

    #[test]
    fn list_meta_and_empty_list() {
        let t = TableConvertor::new(&spec_columns());
        let table = t.to_table(
            &[],
            IncludeObject::Metadata,
            &ListMeta {
                resource_version: Some("9".into()),
                continue_: Some("tok".into()),
                remaining_item_count: Some(3),
                self_link: None,
            },
            now(),
        );
        assert_eq!(
            table["metadata"],
            json!({"resourceVersion": "9", "continue": "tok", "remainingItemCount": 3})
        );
        assert_eq!(table["rows"], json!([]));
        let table = t.to_table(&[], IncludeObject::Metadata, &ListMeta::default(), now());
        assert_eq!(table["metadata"], json!({}));
    }

    #[test]
    fn include_object_modes() {
        let t = TableConvertor::new(&json!([]));
        let obj = crontab("a", "2024-06-01T11:00:00Z");
        let meta = ListMeta::default();
        let none = t.to_table(
            std::slice::from_ref(&obj),
            IncludeObject::None,
            &meta,
            now(),
        );
        assert_eq!(none["rows"][0]["object"], Value::Null);
        let full = t.to_table(
            std::slice::from_ref(&obj),
            IncludeObject::Object,
            &meta,
            now(),
        );
        assert_eq!(full["rows"][0]["object"], obj);
        let md = t.to_table(
            std::slice::from_ref(&obj),
            IncludeObject::Metadata,
            &meta,
            now(),
        );
        assert_eq!(md["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert!(md["rows"][0]["object"].get("spec").is_none());

        assert_eq!(IncludeObject::parse(""), Ok(IncludeObject::Metadata));
        assert_eq!(
            IncludeObject::parse("Metadata"),
            Ok(IncludeObject::Metadata)
        );
        assert_eq!(IncludeObject::parse("None"), Ok(IncludeObject::None));
        assert_eq!(IncludeObject::parse("Object"), Ok(IncludeObject::Object));
        assert_eq!(
            IncludeObject::parse("unrecognized"),
            Err("includeObject: Invalid value: \"unrecognized\": must be 'Metadata', 'Object', 'None', or empty".to_string())
        );
    }

    #[test]
    fn v1beta1_and_single_object_and_watch_without_columns() {
        let t = TableConvertor::new(&spec_columns());
        let obj = crontab("a", "2024-06-01T11:00:00Z");
        let opts = RenderOptions {
            include_object: IncludeObject::Metadata,
            with_columns: false,
            api_version: TABLE_API_VERSION_V1BETA1,
            now: now(),
        };
        let table = t.object_to_table(&obj, &opts);
        assert_eq!(table["apiVersion"], "meta.k8s.io/v1beta1");
        assert_eq!(table["metadata"], json!({"resourceVersion": "7"}));
        assert_eq!(table["columnDefinitions"], Value::Null);
        assert!(table.as_object().unwrap().contains_key("columnDefinitions"));
        assert_eq!(
            table["rows"][0]["object"]["apiVersion"],
            "meta.k8s.io/v1beta1"
        );
        assert_eq!(
            table["rows"][0]["cells"],
            json!(["a", "* * * * */5", 1, "60m"])
        );
        let first = t.to_table_with(
            &[obj],
            IncludeObject::Metadata,
            &ListMeta::default(),
            now(),
            true,
        );
        assert_eq!(first["columnDefinitions"].as_array().unwrap().len(), 4);
    }

    #[test]
    fn missing_paths_are_null() {
        let t = TableConvertor::new(&json!([
            {"name": "S", "type": "string", "jsonPath": ".status.phase"},
            {"name": "I", "type": "integer", "jsonPath": ".spec.nope"},
            {"name": "D", "type": "date", "jsonPath": ".status.when"},
            {"name": "X", "type": "string", "jsonPath": ".spec.cronSpec.deeper"},
            {"name": "Y", "type": "string", "jsonPath": ".spec.list[5]"},
        ]));
        let mut obj = crontab("a", "2024-06-01T11:00:00Z");
        obj["spec"]["list"] = json!([1]);
        assert_eq!(
            t.cells(&obj, now()),
            vec![
                json!("a"),
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null
            ]
        );
    }

    #[test]
    fn cell_types_like_upstream() {
        let t = TableConvertor::new(&json!([
            {"name": "int-from-float", "type": "integer", "jsonPath": ".v.f"},
            {"name": "int-from-string", "type": "integer", "jsonPath": ".v.s"},
            {"name": "num-from-int", "type": "number", "jsonPath": ".v.i"},
            {"name": "num", "type": "number", "jsonPath": ".v.f"},
            {"name": "bool", "type": "boolean", "jsonPath": ".v.b"},
            {"name": "bool-from-string", "type": "boolean", "jsonPath": ".v.s"},
            {"name": "str-from-int", "type": "string", "jsonPath": ".v.i"},
            {"name": "str-from-float", "type": "string", "jsonPath": ".v.f"},
            {"name": "str-from-bool", "type": "string", "jsonPath": ".v.b"},
            {"name": "str-from-null", "type": "string", "jsonPath": ".v.n"},
            {"name": "str-from-map", "type": "string", "jsonPath": ".v.m"},
            {"name": "str-from-list", "type": "string", "jsonPath": ".v.l"},
            {"name": "int-from-null", "type": "integer", "jsonPath": ".v.n"},
            {"name": "date-invalid", "type": "date", "jsonPath": ".v.s"},
            {"name": "date-empty", "type": "date", "jsonPath": ".v.e"},
            {"name": "date-zero", "type": "date", "jsonPath": ".v.z"},
            {"name": "date-int", "type": "date", "jsonPath": ".v.i"},
            {"name": "unknown-type", "type": "weird", "jsonPath": ".v.i"},
            {"name": "num-whole-float", "type": "number", "jsonPath": ".v.w"},
            {"name": "str-big-float", "type": "string", "jsonPath": ".v.big"},
        ]));
        let obj = json!({
            "metadata": {"name": "n"},
            "v": {"f": 2.7, "s": "x<y", "i": 3, "b": true, "n": null, "e": "", "z": "0001-01-01T00:00:00Z",
                  "m": {"z": 1, "a": "<&>"}, "l": [1, "two", 1.5e-7], "w": 4.0, "big": 1e21}
        });
        assert_eq!(
            t.cells(&obj, now()),
            vec![
                json!("n"),
                json!(2),
                Value::Null,
                json!(3),
                json!(2.7),
                json!(true),
                Value::Null,
                json!("3"),
                json!("2.7"),
                json!("true"),
                json!("<no value>"),
                json!("{\"a\":\"\\u003c\\u0026\\u003e\",\"z\":1}"),
                json!("[1,\"two\",1.5e-7]"),
                Value::Null,
                json!("<invalid>"),
                json!("<unknown>"),
                json!("<unknown>"),
                Value::Null,
                Value::Null,
                json!(4),
                json!("1e+21"),
            ]
        );
    }

    #[test]
    fn priority_format_and_description_default() {
        let t = TableConvertor::new(&json!([
            {"name": "Wide", "type": "integer", "format": "int32", "priority": 1, "jsonPath": ".spec.replicas"},
        ]));
        assert_eq!(
            t.column_definitions()[1],
            ColumnDefinition {
                name: "Wide".into(),
                type_: "integer".into(),
                format: "int32".into(),
                description:
                    "Custom resource definition column (in JSONPath format): .spec.replicas".into(),
                priority: 1,
            }
        );
    }

    #[test]
    fn invalid_column_path_truncates_columns() {
        let t = TableConvertor::new(&json!([
            {"name": "A", "type": "string", "jsonPath": ".spec.cronSpec"},
            {"name": "B", "type": "string", "jsonPath": ".spec[?("},
            {"name": "C", "type": "string", "jsonPath": ".spec.image"},
        ]));
        assert_eq!(t.column_definitions().len(), 2);
        assert_eq!(
            t.warning(),
            Some("unrecognized column definition \".spec[?(\"")
        );
        let cells = t.cells(&crontab("a", "2024-06-01T11:00:00Z"), now());
        assert_eq!(cells, vec![json!("a"), json!("* * * * */5")]);
    }

    #[test]
    fn jsonpath_translation() {
        let cases = [
            (".spec.replicas", Some("$['spec']['replicas']")),
            (".", Some("$")),
            (".spec.list[0]", Some("$['spec']['list'][0]")),
            (".spec.list[-1:]", Some("$['spec']['list'][-1:]")),
            (
                ".status.conditions[?(@.type==\"Ready\")].status",
                Some("$['status']['conditions'][?(@.type==\"Ready\")]['status']"),
            ),
            (
                ".metadata.labels.app\\.kubernetes\\.io/name",
                Some("$['metadata']['labels']['app.kubernetes.io/name']"),
            ),
            (
                ".metadata.annotations['a.b/c']",
                Some("$['metadata']['annotations']['a.b/c']"),
            ),
            (".spec.*", Some("$['spec'][*]")),
            ("..name", Some("$..['name']")),
            ("..*", Some("$..*")),
            (".it's", Some("$['it\\'s']")),
            ("", None),
            ("spec", None),
            (".spec.a b", None),
            (".spec[0", None),
            ("{.spec}", None),
        ];
        for (input, want) in cases {
            assert_eq!(k8s_jsonpath_to_rfc9535(input).as_deref(), want, "{input}");
        }
        let obj = json!({
            "metadata": {"labels": {"app.kubernetes.io/name": "web"}},
            "status": {"conditions": [{"type": "Other", "status": "False"}, {"type": "Ready", "status": "True"}]}
        });
        let t = TableConvertor::new(&json!([
            {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
            {"name": "App", "type": "string", "jsonPath": ".metadata.labels.app\\.kubernetes\\.io/name"},
            {"name": "First", "type": "string", "jsonPath": ".status.conditions[*].type"},
        ]));
        assert!(t.warning().is_none());
        assert_eq!(
            t.cells(&obj, now())[1..],
            [json!("True"), json!("web"), json!("Other")]
        );
    }

    #[test]
    fn human_duration_thresholds() {
        let s = Duration::seconds;
        let ms = Duration::milliseconds;
        let cases = [
            (ms(-2500), "<invalid>"),
            (s(-2), "<invalid>"),
            (ms(-1999), "0s"),
            (s(-1), "0s"),
            (ms(-500), "0s"),
            (s(0), "0s"),
            (ms(1999), "1s"),
            (s(5), "5s"),
            (s(119), "119s"),
            (s(120), "2m"),
            (s(121), "2m1s"),
            (s(6 * 60), "6m"),
            (s(9 * 60 + 59), "9m59s"),
            (s(10 * 60), "10m"),
            (s(10 * 60 + 30), "10m"),
            (s(179 * 60 + 59), "179m"),
            (s(3 * 3600), "3h"),
            (s(3 * 3600 + 60), "3h1m"),
            (s(7 * 3600 + 59 * 60), "7h59m"),
            (s(8 * 3600), "8h"),
            (s(8 * 3600 + 60), "8h"),
            (s(47 * 3600), "47h"),
            (s(48 * 3600), "2d"),
            (s(50 * 3600), "2d2h"),
            (s(7 * 86400 + 23 * 3600), "7d23h"),
            (s(8 * 86400), "8d"),
            (s(8 * 86400 + 3600), "8d"),
            (s(729 * 86400), "729d"),
            (s(730 * 86400), "2y"),
            (s(731 * 86400), "2y1d"),
            (s(8 * 365 * 86400 - 86400), "7y364d"),
            (s(8 * 365 * 86400), "8y"),
            (s(100 * 365 * 86400), "100y"),
            (Duration::days(1_000_000), "292y"),
            (-Duration::days(1_000_000), "<invalid>"),
        ];
        for (d, want) in cases {
            assert_eq!(human_duration(d), want, "{d:?}");
        }
    }

    #[test]
    fn date_cells() {
        let n = now();
        assert_eq!(date_cell("2024-06-01T11:59:55Z", n), "5s");
        assert_eq!(date_cell("2024-06-01T11:54:00Z", n), "6m");
        assert_eq!(date_cell("2024-06-01T09:00:00Z", n), "3h");
        assert_eq!(date_cell("2024-05-30T12:00:00Z", n), "2d");
        assert_eq!(date_cell("2020-06-01T12:00:00Z", n), "4y1d");
        assert_eq!(date_cell("2024-06-01T14:00:00+02:00", n), "0s");
        assert_eq!(date_cell("2024-06-01T12:00:05Z", n), "<invalid>");
        assert_eq!(date_cell("2024-06-01T11:59:55.5Z", n), "4s");
        assert_eq!(date_cell("null", n), "<unknown>");
        assert_eq!(date_cell("yesterday", n), "<invalid>");
    }

    #[test]
    fn partial_metadata_projection() {
        let obj = json!({
            "metadata": {
                "name": "a", "namespace": "", "generation": 0, "uid": "x",
                "creationTimestamp": "2024-06-01T11:00:00.123Z",
                "deletionTimestamp": "2024-06-01T12:00:00Z", "deletionGracePeriodSeconds": 0,
                "labels": {}, "annotations": {"k": "v"}, "finalizers": ["f"],
                "ownerReferences": [], "unknown": 1
            }
        });
        assert_eq!(
            partial_object_metadata(&obj, TABLE_API_VERSION_V1),
            json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": {
                    "name": "a", "uid": "x",
                    "creationTimestamp": "2024-06-01T11:00:00Z",
                    "deletionTimestamp": "2024-06-01T12:00:00Z",
                    "deletionGracePeriodSeconds": 0,
                    "annotations": {"k": "v"},
                    "finalizers": ["f"]
                }
            })
        );
        assert_eq!(
            partial_object_metadata(&json!({}), TABLE_API_VERSION_V1)["metadata"],
            json!({"creationTimestamp": null})
        );
    }

    #[test]
    fn convertor_is_shareable_across_tasks() {
        // Compile-time check: the CRD cache shares one convertor between request tasks.
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<TableConvertor>();
    }
}
